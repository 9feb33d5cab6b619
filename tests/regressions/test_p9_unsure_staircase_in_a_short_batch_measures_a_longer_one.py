"""P9 read 2 at 0.5 on kelpie-n1.6t-s (8 writes in parallel) at harsh noise (issue 16): its batches of 16 writes
held two clusters of 8, the first two writes of a batch completed ~5 us ahead of the rest (median curve 20.1, 21.0,
then 26.3 us), so the first step read 2, and the staircase fitted to the whole curve preferred 8 at only 0.91 over
every round: two clusters are too few steps to decide. Now, when one round's staircase prefers another cluster
size than the first step, unsure, with fewer than four of its clusters in the batch, the probe measures batches
four times longer once (the seeded harsh run then read 8 at 0.91 from batches of 64). The batches below are
seeded draws of that curve's shape; a clear staircase, or one the first step agrees with, measures no more."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ftlscope.probes import p9_write_parallelism as p9


def batches(seed: int, parallel: int, early: float, size: int = 16, count: int = 24) -> pd.DataFrame:
    """``count`` batches of ``size`` writes: a step of 6 us every ``parallel`` writes, the first two ``early`` us
    ahead, NAND-like spread (10 %) and exponential host jitter (3 us)."""
    rng = np.random.default_rng(seed)
    k = np.arange(size)
    frames = []
    for b in range(count):
        latency = 26e3 + 6e3 * (k // parallel) + np.where(k < 2, -early * 1e3, 0.0)
        latency = latency * rng.lognormal(0, 0.1, size) + rng.exponential(3e3, size)
        frames.append(pd.DataFrame({"batch": b, "latency_ns": latency.astype(np.int64)}))
    return pd.concat(frames, ignore_index=True)


def test_two_clusters_whose_first_step_reads_otherwise_ask_for_longer_batches():
    frame = batches(seed=0, parallel=8, early=5.5)
    reading = p9.read_batches(frame)
    assert reading.parallelism == 2  # the first step alone, as measured
    fit = p9.staircase_fit(p9.batch_curve(frame))
    assert fit.parallelism == 8 and fit.posterior < p9.STAIRCASE_SURE
    assert p9._staircase_elsewhere(frame, reading)


def test_a_staircase_the_first_step_agrees_with_measures_no_more():
    frame = batches(seed=1, parallel=4, early=0.0)
    reading = p9.read_batches(frame)
    assert reading.parallelism == 4
    assert not p9._staircase_elsewhere(frame, reading)
