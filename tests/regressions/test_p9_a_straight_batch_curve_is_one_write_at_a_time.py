"""P9 read 5 writes in parallel (at 0.5) for pm981-256g's one insert slot at harsh noise (issue 16): the batch
curve (median over batches of the k-th write's latency) rose by one 7.8 us insert a write, but 30 % NAND variation
and 10 us of host jitter spread its steps from 1.6 to 12.5 us, and Jenks split them into "small" and "large" steps,
the large ones read as cluster boundaries. Now a curve no staircase fits significantly better than a straight line
(F test, Bonferroni over the cluster sizes), rising by at least a tenth of the first write's latency a write, is
one write at a time. The batches are seeded draws of that shape. Bounds: the answer exactly (1); a staircase of
2 under the same noise stays 2."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ftlscope.probes import p9_write_parallelism as p9


def batches(seed: int, parallel: int, insert_us: float = 7.8, size: int = 64, count: int = 48) -> pd.DataFrame:
    """``count`` batches of ``size`` writes issued at once: the k-th enters after k // ``parallel`` inserts (each
    drawn with 30 % variation), then the host adds an exponential 10 us to its completion."""
    rng = np.random.default_rng(seed)
    frames = []
    for b in range(count):
        inserts = np.cumsum(insert_us * 1e3 * rng.lognormal(-0.5 * 0.3 ** 2, 0.3, size // parallel + 1))
        entered = np.r_[0.0, inserts][np.arange(size) // parallel]
        latency = 12e3 + entered + rng.exponential(10e3, size)
        frames.append(pd.DataFrame({"batch": b, "latency_ns": latency.astype(np.int64)}))
    return pd.concat(frames, ignore_index=True)


def test_one_insert_slot_under_harsh_noise_is_one_write_at_a_time():
    for seed in (1, 2, 3):
        reading = p9.read_batches(batches(seed, parallel=1))
        assert reading.parallelism == 1 and reading.serial, (seed, reading)
        assert abs(reading.period_ns - 7_800) <= 0.2 * 7_800


def test_two_slots_under_the_same_noise_stay_a_staircase():
    for seed in (1, 2, 3):
        reading = p9.read_batches(batches(seed, parallel=2, insert_us=15.6))
        assert reading.parallelism == 2 and not reading.serial, (seed, reading)
