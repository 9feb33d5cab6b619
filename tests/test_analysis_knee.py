"""Knees (analysis/knee.py) on curves whose knee is known: seed 001's own QD sweep and an ideal multi-server
device."""

from __future__ import annotations

import numpy as np
import pytest

from ftlscope.analysis import knee

# Seed 001 §5.1: 4 KiB random read, QD 1..128 — MB/s and mean latency (ms) as published.
SEED_QD = np.array([1, 2, 4, 8, 16, 32, 64, 128])
SEED_MB_S = np.array([49.0, 92.5, 164.8, 268.4, 398.2, 522.7, 566.7, 580.3])
SEED_LAT_MS = np.array([0.079, 0.084, 0.095, 0.116, 0.157, 0.239, 0.441, 0.861])


def ideal_device(qds, servers: int = 32, service_s: float = 100e-6):
    """``servers`` parallel units, each taking ``service_s`` per request, fed by a closed loop of QD requests:
    below ``servers`` every request finds a free unit; above, the surplus only queues."""
    qds = np.asarray(qds, dtype=float)
    iops = np.minimum(qds, servers) / service_s
    latency = np.where(qds <= servers, service_s, qds * service_s / servers)
    return iops, latency


def test_the_seeds_own_sweep_gives_the_seeds_knees():
    step = knee.knee_by_rule(SEED_QD, SEED_MB_S, SEED_LAT_MS)
    # "By this rule: knee lies near QD≈128 (gain +2.4% and +95.4% satisfy condition)"
    assert (step.x_from, step.x_to) == (64, 128)
    assert step.gain == pytest.approx(0.024, abs=0.001)
    assert step.latency_growth == pytest.approx(0.952, abs=0.002)
    # "at QD 32 reaches 90% of peak": the practical knee
    assert SEED_QD[knee.practical_knee(SEED_QD, SEED_MB_S)] == 32
    # The seed's QD 32 -> 64 step (+8.4 % / +84.5 %) qualifies once the gain threshold is 10 %.
    assert knee.knee_by_rule(SEED_QD, SEED_MB_S, SEED_LAT_MS, max_gain=0.10).x_to == 64


def test_an_ideal_device_has_its_knee_one_step_past_its_unit_count():
    qds = 2 ** np.arange(11)  # 1 .. 1024
    for servers in (8, 32, 128):
        iops, latency = ideal_device(qds, servers)
        step = knee.knee_by_rule(qds, iops, latency)
        # Up to `servers` IOPS doubles at flat latency; the step beyond it gains nothing and doubles latency.
        assert (step.x_from, step.x_to) == (servers, 2 * servers)
        assert step.gain == pytest.approx(0.0) and step.latency_growth == pytest.approx(1.0)
        assert qds[knee.practical_knee(qds, iops)] == servers


def test_both_conditions_are_needed():
    qds = np.array([1, 2, 4, 8])
    iops = np.array([100.0, 200.0, 203.0, 204.0])
    assert knee.knee_by_rule(qds, iops, np.array([1.0, 1.0, 1.1, 1.15])) is None  # flat IOPS, latency +10 %
    assert knee.knee_by_rule(qds, iops, np.array([1.0, 1.0, 1.5, 2.0])).x_to == 4
    climbing = np.array([100.0, 180.0, 300.0, 450.0])  # latency grows, but so does throughput
    assert knee.knee_by_rule(qds, climbing, np.array([1.0, 1.5, 2.0, 3.0])) is None


def test_unsorted_points_give_the_same_knee_and_indices_into_the_callers_arrays():
    order = np.random.default_rng(3).permutation(len(SEED_QD))
    qd, mb_s, lat = SEED_QD[order], SEED_MB_S[order], SEED_LAT_MS[order]
    step = knee.knee_by_rule(qd, mb_s, lat)
    assert step.x_to == 128 and qd[step.upper] == 128 and qd[step.lower] == 64
    assert qd[knee.practical_knee(qd, mb_s)] == 32
    steps = knee.steps(qd, mb_s, lat)
    assert [s.x_from for s in steps] == [1, 2, 4, 8, 16, 32, 64]


def test_first_reaching_ignores_missing_points_and_rejects_ragged_input():
    x = np.array([4, 16, 64, 256])
    y = np.array([10.0, np.nan, 95.0, 100.0])
    assert x[knee.first_reaching(x, y, 0.9)] == 64
    assert x[knee.first_reaching(x, y, 0.05)] == 4
    assert knee.first_reaching(x, np.full(4, np.nan)) is None
    with pytest.raises(ValueError):
        knee.steps([1, 2, 3], [1.0, 2.0], [1.0, 2.0, 3.0])


def test_the_seeds_block_size_curves_turn_bandwidth_bound_where_the_seed_read_it():
    # Seed 001 §3.3, QD 32: MB/s against KiB. The seed read the knee at 128–256 KiB (random) and 64–128 KiB
    # (sequential); bs-sweep's transition, the first size reaching 80 % of the peak, lands in both ranges.
    kib = np.array([4, 16, 32, 64, 128, 256, 512, 1024])
    random = np.array([568.4, 627.2, 956.9, 1553.0, 2212.6, 2570.7, 2657.1, 2953.2])
    sequential = np.array([1568.1, 2108.1, 2235.3, 3227.3, 3253.6, 3256.3, 3068.0, 2910.2])
    assert kib[knee.first_reaching(kib, random, 0.8)] == 256
    assert kib[knee.first_reaching(kib, sequential, 0.8)] == 64
    assert kib[knee.first_reaching(kib, random, 0.9)] == 1024  # 512 KiB reaches 89.97 % only


def test_a_curve_that_pauses_and_climbs_again_has_its_knee_where_it_stays_flat():
    # Regression: a simulated 7200 rpm disk's QD sweep (`ftlscope profile sim:hdd-7200-consumer`): QD 8 -> 16
    # gained 1.7 % for +96 % latency, then the disk's command reordering gained 15 % more at QD 32. The knee at
    # QD 16 made the guidance say "past the knee at QD 16 a doubling adds under 5 % IOPS", which QD 32 denied.
    qds = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
    iops = np.array([187, 210, 253, 301, 306, 352, 358, 363, 352, 364, 369], dtype=float)
    lat_us = np.array([5358, 9582, 16059, 26939, 52771, 91198, 175990, 337690, 621298, 1088577, 1896022.0])
    step = knee.knee_by_rule(qds, iops, lat_us)
    assert (step.x_from, step.x_to) == (32, 64)
    later = [s for s in knee.steps(qds, iops, lat_us) if s.x_from >= step.x_to]
    assert later and all(s.gain < knee.MAX_GAIN for s in later)
