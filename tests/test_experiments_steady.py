"""``working-set`` and ``burst-vs-steady`` (seed 001 §6) on simulated devices: the analysis recovers what the
device was built with — the mapping cache of a DRAM-less drive (and none on a drive with the whole table in
DRAM), the SLC cache plus write buffer that a fresh drive's burst fills, a GC-bound steady state by the SNIA rule,
and no burst at all on a write-in-place (Optane-like) drive. Everything runs in virtual time."""

from __future__ import annotations

import json

import numpy as np
import pytest
import simdevices

from ftlscope.errors import UsageError
from ftlscope.experiments import EXPERIMENTS
from ftlscope.experiments.suite import run_experiment
from ftlscope.experiments.working_set import coverage_fit
from ftlscope.units import parse_duration_ns, parse_size

MiB, GiB = 1 << 20, 1 << 30

# A small SSD whose fresh-out-of-box burst ends after its SLC cache and write buffer are full, and which then
# settles to the throughput greedy garbage collection leaves, within a few minutes of virtual time.


def value(outcome, key):
    return outcome.findings[key]["value"]


truth = simdevices.config


def bench(name, target, tmp_path, **params):
    outcome = run_experiment(EXPERIMENTS[name], target, out=tmp_path, params={k: str(v) for k, v in params.items()})
    assert outcome.completed, outcome.error
    assert outcome.figures and all(p.is_file() for p in outcome.figures)
    stored = json.loads((outcome.directory / "findings.json").read_text())
    assert set(stored) == set(outcome.findings)
    return outcome


# ---- working-set ------------------------------------------------------------------------------------------------

def test_coverage_fit_recovers_a_cache_from_latencies():
    ws = np.array([0.5, 1, 2, 4, 8, 16, 32]) * GiB
    latency = 70 + 60 * np.clip(1 - 3 * GiB / ws, 0, None)  # 3 GiB covered, 60 us per miss
    fit = coverage_fit(ws, latency)
    assert fit.coverage == pytest.approx(3 * GiB, rel=0.01)
    assert fit.base == pytest.approx(70, rel=0.01) and fit.miss == pytest.approx(60, rel=0.01)
    assert coverage_fit(ws, np.full(ws.size, 70.0)) is None  # flat: nothing to fit
    assert coverage_fit(ws[:2], latency[:2]) is None  # too few sizes


def test_working_set_on_the_default_ssd_has_no_mapping_step(tmp_path):
    assert truth("consumer-tlc-dram")["ftl"]["mapping_cache"] == "full"
    out = bench("working-set", "sim:consumer-tlc-dram", tmp_path, span="8GiB", min_size="512MiB",
                runtime="500ms", warmup="200ms")
    assert len(out.table) == 2 * 5  # read and write over 512 MiB .. 8 GiB
    assert set(out.table["working_set"]) == {512 * MiB, GiB, 2 * GiB, 4 * GiB, 8 * GiB}
    assert value(out, "read_latency_step_bytes") is None
    assert abs(value(out, "read_latency_growth_pct")) < 5
    assert "mapping_cache_coverage_bytes" not in out.findings
    assert value(out, "littles_law_max_error_pct") < 1  # QD 1: IOPS = 1 / mean latency
    assert value(out, "write_iops_full") > 0


def test_working_set_finds_the_mapping_cache_of_a_dram_less_ssd(tmp_path):
    config = truth("consumer-tlc-hmb")
    cache = parse_size(config["ftl"]["mapping_cache"], "mapping_cache")  # 4 MiB of 4-byte entries
    covered = cache // 4 * parse_size(config["geometry"]["page_size"], "page_size")  # = 4 GiB of data
    miss_us = parse_duration_ns(config["ftl"]["map_miss_latency"]) / 1e3
    out = bench("working-set", "sim:consumer-tlc-hmb", tmp_path, span="16GiB", min_size="512MiB", ops="read",
                runtime="1s", warmup="500ms")
    assert value(out, "mapping_cache_coverage_bytes") == pytest.approx(covered, rel=0.10)
    assert value(out, "mapping_cache_bytes_estimate") == pytest.approx(cache, rel=0.10)
    assert value(out, "map_miss_us") == pytest.approx(miss_us, rel=0.10)
    assert value(out, "read_latency_step_bytes") == 2 * covered  # the first size past what the cache maps
    assert value(out, "read_lat_p99_us_full") > value(out, "read_lat_p99_us_smallest") + 0.9 * miss_us
    assert value(out, "read_iops_full") < 0.8 * value(out, "read_iops_smallest")
    assert "write_iops_full" not in out.findings


def test_working_set_refuses_a_size_beyond_the_span(tmp_path):
    with pytest.raises(UsageError, match="--param sizes"):  # before any preconditioning
        EXPERIMENTS["working-set"].resolve_params({"span": "64MiB", "sizes": "32MiB,128MiB"})
    # With the whole target as span, the check comes once its size is known, and stops the run.
    out = run_experiment(EXPERIMENTS["working-set"], "sim:optane-like", out=tmp_path,
                         params={"sizes": "32MiB,1TiB", "settle": "0s"})
    assert not out.completed and out.error.message.startswith("--param sizes:")
    with pytest.raises(UsageError, match="--param ops"):
        EXPERIMENTS["working-set"].resolve_params({"ops": "read,trim"})


# ---- burst-vs-steady -------------------------------------------------------------------------------------------

def test_burst_vs_steady_on_the_default_ssd_stays_in_the_burst_within_its_slc_cache(tmp_path):
    slc = parse_size(truth("consumer-tlc-dram")["slc_cache"]["capacity"], "slc")
    out = bench("burst-vs-steady", "sim:consumer-tlc-dram", tmp_path, span="1GiB", runtime="3s", window="100ms",
                round="500ms", settle="0s")
    assert out.table["written_bytes"].max() < slc  # too little written to fill the SLC cache ...
    assert value(out, "drop_seconds") is None and value(out, "drop_bytes") is None  # ... so no drop
    assert value(out, "steady_state_reached") is True
    assert value(out, "steady_iops") == pytest.approx(value(out, "burst_iops"), rel=0.05)
    assert value(out, "steady_window_last_round") == 5  # 3 s of 0.5 s rounds: rounds 1..5 judged


def test_burst_vs_steady_on_a_small_ssd_drops_after_its_slc_cache_to_a_gc_bound_steady_state(tmp_path):
    device = simdevices.small_ssd(
        tmp_path, "small-gc", device={"capacity": "256MiB"}, write_buffer={"capacity": "1MiB"},
        slc_cache={"capacity": "96MiB"}, ftl={"gc": "greedy", "gc_free_block_threshold": 0.05},
    )
    config = truth(device)
    slc = parse_size(config["slc_cache"]["capacity"], "slc")
    buffer = parse_size(config["write_buffer"]["capacity"], "buffer")
    capacity = parse_size(config["device"]["capacity"], "capacity")
    physical = capacity * (1 + config["device"]["over_provisioning"])
    out = bench("burst-vs-steady", device, tmp_path, runtime="240s", window="200ms", round="10s")
    burst, steady = value(out, "burst_iops"), value(out, "steady_iops")
    assert burst > 5 * steady
    assert value(out, "steady_state_reached") is True
    assert value(out, "steady_excursion_pct") <= 20 and value(out, "steady_slope_excursion_pct") <= 10
    # The burst lasts as long as the fast places last: SLC pages and the buffer (within 10 %), and certainly
    # no longer than SLC + buffer + every free page of the purged device.
    drop = value(out, "drop_bytes")
    assert drop == pytest.approx(slc + buffer, rel=0.10)
    assert slc * 0.9 <= drop <= slc + buffer + physical
    assert 0 < value(out, "drop_seconds") < value(out, "steady_window_start_s")
    assert value(out, "steady_since_round") is not None
    # Garbage collection: the steady state's writes wait far longer than the burst's.
    assert value(out, "steady_lat_mean_us") > 5 * value(out, "burst_lat_mean_us")


def test_burst_vs_steady_on_an_optane_like_ssd_has_no_burst(tmp_path):
    config = truth("optane-like")
    assert config["slc_cache"]["capacity"] == "0B" and config["write_buffer"]["capacity"] == "0B"
    out = bench("burst-vs-steady", "sim:optane-like", tmp_path, span="256MiB", runtime="3s", window="100ms",
                round="500ms", settle="0s")
    assert value(out, "drop_seconds") is None
    assert value(out, "steady_state_reached") is True
    assert value(out, "burst_to_steady_ratio") == pytest.approx(1.0, abs=0.02)


def test_burst_vs_steady_checks_its_rounds():
    experiment = EXPERIMENTS["burst-vs-steady"]
    with pytest.raises(UsageError, match="--param round"):
        experiment.resolve_params({"window": "1s", "round": "1500ms"})
    with pytest.raises(UsageError, match="--param runtime"):
        experiment.resolve_params({"runtime": "10s", "round": "5s"})
