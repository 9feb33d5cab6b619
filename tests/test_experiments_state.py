"""Device-state experiments on simulated devices whose insides are known: ``reset-behaviour`` (seed 000 §3.4,
§5.6), ``trim-before-overwrite`` and ``interleaved-vs-grouped`` (seed 000 §3.5). Each test reads the ground
truth from the device's TOML and checks that the experiment's findings recover it; everything runs in virtual
time with fixed seeds, so the numbers are the same on every run."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import simdevices

from ftlscope.errors import RunError, UsageError
from ftlscope.experiments import get, run_experiment
from ftlscope.experiments.context import Context
from ftlscope.sim import SimDevice
from ftlscope.units import parse_size

MiB = 1 << 20
DEFAULT = "sim:consumer-tlc-dram"

# A small SSD (64 MiB, no SLC cache): a whole-device overwrite is GC-bound, and a read buffer (when given)
# can hold a whole read sequence.
def small_ssd(tmp_path, name: str = "small", read_buffer: str = "0B") -> SimDevice:
    return simdevices.small_ssd(tmp_path, name, read_buffer={"capacity": read_buffer})


truth = simdevices.config


def value(outcome, key):
    return outcome.findings[key]["value"]


def run(name, target, tmp_path, **params):
    outcome = run_experiment(get(name), target, out=tmp_path / "out",
                             params={k: str(v) for k, v in params.items()})
    assert outcome.completed, outcome.error
    return outcome


# ---- reset-behaviour -----------------------------------------------------------------------------------------


def test_reset_keeps_the_write_buffer_and_a_power_cycle_empties_it(tmp_path):
    device = SimDevice.open(DEFAULT)
    config = truth(device)
    buffer = parse_size(config["write_buffer"]["capacity"], "capacity")
    # the recent data fits the write buffer; nothing else caches reads on this drive
    assert config["read_buffer"]["capacity"] == "0B" and config["ftl"]["mapping_cache"] == "full"
    recent = buffer // 8
    outcome = run("reset-behaviour", device, tmp_path, span=64 * MiB, recent=recent)

    # Recently written data is read from the buffer (controller RAM) until the power cycle flushes it.
    assert value(outcome, "post_reset_slowdown_recent") == pytest.approx(1.0, abs=0.01)
    assert value(outcome, "post_power_cycle_slowdown_recent") > 3
    assert value(outcome, "post_power_cycle_first_latency_ratio_recent") > 3
    # Data already on flash reads the same in every step: the drive has no read cache to lose.
    for key in ("baseline_slowdown", "post_reset_slowdown", "post_power_cycle_slowdown"):
        assert value(outcome, key) == pytest.approx(1.0, abs=0.01)
    assert value(outcome, "controller_reset_ms") > 0 and value(outcome, "power_cycle_ms") > 0
    assert "skipped" not in outcome.findings
    assert (outcome.table["status"] == "done").all()
    assert {p.name for p in outcome.figures} == {"reset_total_time.png", "reset_first_latency.png"}


def test_a_read_buffer_is_filled_by_the_first_sequence_kept_by_a_reset_and_lost_in_a_power_cycle(tmp_path):
    # The thesis's reading of its Figure 5.13: the drive caches, a reset does not clear it, power loss does.
    device = small_ssd(tmp_path, "read-buffer", read_buffer="8MiB")
    assert parse_size(truth(device)["read_buffer"]["capacity"], "capacity") == 8 * MiB
    outcome = run("reset-behaviour", device, tmp_path, span=4 * MiB, recent=0)
    assert value(outcome, "baseline_slowdown") > 3  # the first ("load") sequence reads flash
    assert value(outcome, "post_reset_slowdown") == pytest.approx(1.0, abs=0.01)
    assert value(outcome, "post_power_cycle_slowdown") > 3
    assert value(outcome, "post_power_cycle_slowdown") == pytest.approx(value(outcome, "baseline_slowdown"),
                                                                        rel=0.05)
    assert not (outcome.table["data"] == "recent").any()


def test_reset_behaviour_on_a_file_skips_reset_and_power_cycle_with_reasons(scratch):
    outcome = run_experiment(get("reset-behaviour"), str(scratch / "target.img"), out=scratch / "out",
                             size=16 * MiB, params={"span": "8MiB", "recent": "1MiB"})
    assert outcome.completed, outcome.error
    table = outcome.table.set_index(["step", "data"])
    for step in ("baseline", "pre-reset"):
        for data in ("recent", "resident"):
            assert table.loc[(step, data), "status"] == "done"
            assert table.loc[(step, data), "total_s"] > 0
    skipped = value(outcome, "skipped")
    assert "regular file, not an NVMe namespace" in skipped["controller-reset"]
    assert "needs a simulated device" in skipped["power-cycle"]
    for step in ("post-reset", "post-power-cycle"):
        assert table.loc[(step, "resident"), "status"] == "skipped"
        assert pd.isna(table.loc[(step, "resident"), "total_s"])
    conditions = json.loads((outcome.directory / "experiment.json").read_text())
    assert skipped["controller-reset"] in conditions["notes"]
    assert "controller_reset_ms" not in outcome.findings and "post_reset_slowdown" not in outcome.findings
    assert "baseline_slowdown" in outcome.findings
    assert len(outcome.figures) == 2


def test_reset_behaviour_refuses_recent_data_that_fills_the_span():
    with pytest.raises(UsageError, match=r"^--param recent: "):
        get("reset-behaviour").resolve_params({"span": "8MiB", "recent": "8MiB"})


# ---- trim-before-overwrite -----------------------------------------------------------------------------------


def test_discarding_before_an_overwrite_saves_the_gc_copies_of_a_full_small_drive(tmp_path):
    device = small_ssd(tmp_path, "gc-bound")
    assert truth(device)["device"]["over_provisioning"] == 0.15  # little spare: overwrites need GC
    outcome = run("trim-before-overwrite", device, tmp_path, region_share=1.0, window="100ms")
    plain = value(outcome, "write_amplification_overwrite")
    trimmed = value(outcome, "write_amplification_trim_first")
    # Overwriting a full drive in random order: every GC victim still holds live pages to copy.
    assert plain > 2
    # Everything discarded first: GC finds only dead pages, nothing is copied.
    assert trimmed == pytest.approx(1.0, abs=0.02)
    assert value(outcome, "write_amplification_saved") == pytest.approx(plain - trimmed)
    assert value(outcome, "overwrite_speedup") > 2
    assert value(outcome, "speedup_with_trim_time") > 2
    windows = outcome.table[outcome.table["window_index"] >= 0]
    assert set(windows["condition"]) == {"overwrite", "trim-then-overwrite"}
    assert [p.name for p in outcome.figures] == ["trim_before_overwrite.png"]


def test_trim_before_overwrite_changes_nothing_where_gc_never_runs(tmp_path):
    # A small region of the 256 GB default drive: its spare area never runs out, so there is no GC to save.
    outcome = run("trim-before-overwrite", DEFAULT, tmp_path, span=128 * MiB, region_share=0.25)
    assert value(outcome, "write_amplification_overwrite") == pytest.approx(1.0, abs=0.01)
    assert value(outcome, "write_amplification_trim_first") == pytest.approx(1.0, abs=0.01)
    assert value(outcome, "overwrite_speedup") == pytest.approx(1.0, abs=0.05)
    assert value(outcome, "trim_s") > 0


def test_trim_before_overwrite_checks_its_share_before_touching_the_device():
    with pytest.raises(UsageError, match=r"^--param region_share: "):
        get("trim-before-overwrite").resolve_params({"region_share": "1.5"})


# ---- interleaved-vs-grouped ----------------------------------------------------------------------------------


def test_interleaving_overlaps_reads_and_writes_only_when_there_is_a_queue(tmp_path):
    device = SimDevice.open(DEFAULT)
    outcome = run("interleaved-vs-grouped", device, tmp_path, span=2 << 30, ops=32768, qds="1,32")
    table = outcome.table.set_index(["qd", "mode"])
    assert set(table.index) == {(q, m) for q in (1, 32)
                                for m in ("interleaved", "grouped-reads-first", "grouped-writes-first")}
    for (qd, mode), row in table.iterrows():
        assert row["read_ops"] + row["write_ops"] == pytest.approx(32768, abs=1), (qd, mode)
        assert row["read_ops"] == pytest.approx(16384, rel=0.05), (qd, mode)
    # At QD 1 every request waits alone: the order cannot change the total time.
    assert value(outcome, "interleaved_throughput_ratio_qd1") == pytest.approx(1.0, abs=0.05)
    # At QD 32 reads (flash) and writes (the write buffer; the host link is full duplex) proceed at the same
    # time when mixed, and one after the other when grouped.
    assert value(outcome, "interleaved_throughput_ratio_qd32") > 1.2
    assert value(outcome, "interleaved_write_lat_ratio_qd32") < 1
    assert [p.name for p in outcome.figures] == ["interleaved_vs_grouped.png"]


def test_interleaved_vs_grouped_needs_both_reads_and_writes():
    with pytest.raises(UsageError, match=r"^--param read_share: "):
        get("interleaved-vs-grouped").resolve_params({"read_share": "1"})


def test_a_target_without_discard_keeps_the_plain_overwrite_and_says_why(tmp_path, monkeypatch):
    real_run = Context.run

    def no_discard(self, workload, label, **kwargs):
        if workload.mix.get("trim"):
            raise RunError("trim: the device does not support discard")
        return real_run(self, workload, label, **kwargs)

    monkeypatch.setattr(Context, "run", no_discard)
    outcome = run("trim-before-overwrite", small_ssd(tmp_path, "no-discard"), tmp_path, region_share=0.25)
    assert value(outcome, "write_amplification_overwrite") >= 1
    assert "trim_first_mb_s" not in outcome.findings and "trim_s" not in outcome.findings
    assert "does not support discard" in value(outcome, "skipped")
    assert any("does not support discard" in note for note in outcome.conditions["notes"])
