"""bench/fidelity.py measures each "SSD Performance Report" cell on a drive of its own in one stated state (the
1 GiB span written sequentially, then idle), so a cell's numbers do not depend on which cells ran before it.
Issue 15: the cells shared one device, and the NV2's 32/128 KiB mixes, measured after the random writes, moved
by up to 50 % with the measuring order and the noise seed."""

from __future__ import annotations

from ftlscope.fidelity import measure, published

SETTINGS = measure.Settings(runtime="100ms", warmup="20ms")
PRESET = "consumer-tlc-hmb"


def test_a_mix_cell_measures_the_same_after_other_cells_as_alone():
    mix = published.report_params("32k", "7:3", 64)
    alone = measure.Fidelity(SETTINGS).metrics(PRESET, "steady", mix)
    after = measure.Fidelity(SETTINGS)
    after.metrics(PRESET, "steady", published.report_params("4k", "only write", 512))
    after.metrics(PRESET, "steady", published.report_params("128k", "only write", 64))
    assert after.metrics(PRESET, "steady", mix) == alone


def test_every_report_cell_has_a_device_of_its_own():
    report = [p for p in published.POINTS if p.source == published.REPORT]
    assert len(report) == 108
    assert all(p.params["device"] == measure.OWN for p in report)
    # The thesis's points keep the shared, sequentially filled device of their span (and so do the PM981's, but
    # for its QD sweep, which reads on devices of its own: test_pm981_qd_sweep_reads_offsets_...).
    assert all("device" not in p.params for p in published.POINTS
               if p.source != published.REPORT and not (p.drive == "PM981" and p.where.startswith("§5")))
