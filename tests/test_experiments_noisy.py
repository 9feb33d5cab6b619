"""The experiments' analysis on noisy drives (issue 16): with the ``[noise]`` levels ``validate-probes --noise``
uses (NAND times varying, retried reads, housekeeping, firmware stalls), the write cliff is still found within
10 % of the SLC cache, the qd-sweep knee within one step of the sweep of the same drive without noise, and
burst-vs-steady still reaches its steady state by the SNIA rule. Noise is seeded: every run is repeatable."""

from __future__ import annotations

import pytest
import simdevices

from ftlscope.experiments import get, run_experiment
from ftlscope.probes.noise_levels import NOISE_LEVELS, noisy_device_file
from ftlscope.sim import SimDevice
from ftlscope.units import parse_size

MiB = 1 << 20


def values(outcome) -> dict:
    assert outcome.completed, outcome.error
    return {k: v["value"] for k, v in outcome.findings.items()}


def noisy_small_ssd(tmp_path, level: str, **sections) -> SimDevice:
    return simdevices.small_ssd(tmp_path, f"small-{level}", noise=dict(NOISE_LEVELS[level]), **sections)


@pytest.mark.parametrize("level", ["medium", "harsh"])
@pytest.mark.parametrize("slc", ["32MiB", "96MiB"])
def test_the_write_cliff_is_found_within_10_pct_on_a_noisy_drive(tmp_path, level, slc):
    device = noisy_small_ssd(
        tmp_path, level, device={"capacity": "256MiB", "over_provisioning": 0.07},
        nand={"cell": "tlc", "page_pattern": "1L 1M 1H",
              "program_latency": {"L": "100us", "M": "600us", "H": "1200us"}},
        slc_cache={"capacity": slc})
    expected = parse_size(slc)
    found = values(run_experiment(get("seq-write-over-time"), device, out=tmp_path / "out",
                                  params={"window": "2ms", "qd": "16", "span": str(expected + 64 * MiB)}))
    assert found["cliff_bytes"] is not None, "no cliff found on a noisy drive with an SLC cache"
    assert abs(found["cliff_bytes"] - expected) / expected < 0.10, (found["cliff_bytes"], expected)


# Only "medium": "harsh" housekeeping holds each flash unit 2 ms of every 5 ms, which changes the drive itself
# (its peak falls by a quarter and is reached four times deeper: 90 % of the peak at QD 512, measured at 100 ms
# and at 400 ms per step alike), so the noise-free drive's knee is not the truth for it.
@pytest.mark.parametrize("level", ["mild", "medium"])
def test_the_qd_sweep_knee_moves_at_most_one_step_with_noise(tmp_path, level):
    params = {"span": "256MiB", "warmup": "0s", "runtime": "100ms"}
    clean = run_experiment(get("qd-sweep"), "sim:consumer-tlc-dram", out=tmp_path / "clean", params=params)
    device = SimDevice.open(str(noisy_device_file("consumer-tlc-dram", level, tmp_path)))
    noisy = run_experiment(get("qd-sweep"), device, out=tmp_path / "noisy", params=params)
    qds = sorted(clean.table["qd"])
    assert sorted(noisy.table["qd"]) == qds
    for key in ("knee_qd", "practical_knee_qd"):
        before, after = values(clean)[key], values(noisy)[key]
        assert before is not None and after is not None, key
        assert abs(qds.index(after) - qds.index(before)) <= 1, (key, before, after)


@pytest.mark.parametrize("level", ["medium", "harsh"])
def test_burst_vs_steady_reaches_the_snia_steady_state_on_a_noisy_drive(tmp_path, level):
    device = noisy_small_ssd(
        tmp_path, level, device={"capacity": "256MiB"}, write_buffer={"capacity": "1MiB"},
        slc_cache={"capacity": "96MiB"}, ftl={"gc": "greedy", "gc_free_block_threshold": 0.05})
    out = run_experiment(get("burst-vs-steady"), device, out=tmp_path / "out",
                         params={"runtime": "240s", "window": "200ms", "round": "10s"})
    found = values(out)
    assert found["steady_state_reached"] is True
    # SNIA's rule: the measurement window's excursion within 20 % of its mean, the fitted slope within 10 %.
    assert found["steady_excursion_pct"] <= 20 and found["steady_slope_excursion_pct"] <= 10
    slc, buffer = 96 * MiB, 1 * MiB
    assert found["drop_bytes"] == pytest.approx(slc + buffer, rel=0.10)
    assert found["burst_iops"] > 5 * found["steady_iops"]
