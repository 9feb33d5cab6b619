"""Regression: bench/fidelity.py ran the PM981's QD sweep on the device its 4 KiB mixes had just written, with
the same workload seed, so the sweep read the offsets in the very order the mixes wrote them; the write path had
spread those over the dies in turn, so every queue depth found its dies free and the sweep saturated at QD 16
(published: 90 % of the peak at QD 32). The sweep now reads on a device of its own (filled sequentially, idle)."""

from __future__ import annotations

from ftlscope.fidelity.measure import Fidelity, Settings
from ftlscope.fidelity.published import POINTS, SHAPES


def test_the_pm981_qd_sweep_runs_on_devices_of_its_own():
    sweep = [p for p in POINTS if p.drive == "PM981" and p.where.startswith("§5")]
    assert sweep and all(p.params.get("device") == "own" for p in sweep)


def test_the_pm981_saturates_between_qd_32_and_64():
    shape = next(s for s in SHAPES if s.drive == "PM981" and s.kind == "saturation")
    result = Fidelity(Settings.quick()).check(shape)
    assert result.passed, result.measured
