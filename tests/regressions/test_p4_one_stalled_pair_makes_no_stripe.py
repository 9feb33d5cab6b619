"""P4 on kelpie-t64g-s (one unit: every pair of reads queues, 1.67x) at medium noise answered a stripe of 211
chunks at 0.73 (and 211 channels for P5 with it). Of the 41 pairs 211 chunks apart one had met a stall (19.6x its
first read, clipped at 3x the median of all pairs), which lifted their mean 5 % above the rest while their median
was every pair's (z 10 against all pairs' robust spread).

Now each increment's pairs are held to 4 robust spreads (at least 10 % of it) of their own median before the
means are taken: the stalled pairs no longer make a stripe, and the drive reads as one unit. The pairs below
follow that run's numbers (with one stall more, to be clear of the 1.05x contrast floor)."""

from __future__ import annotations

import numpy as np

from ftlscope.probes import _layout_analysis as la


def one_unit_pairs_with_a_stall(seed: int = 16):
    rng = np.random.default_rng(seed)
    n, window = 16384, 512
    increment = rng.integers(1, window + 1, n)
    first = 161e3 * rng.normal(1.0, 0.15, n)
    latency = first * rng.normal(1.666, 0.06, n)  # every pair queues: the later read about 1.67x the first
    stalled = np.flatnonzero(increment == 211)[:3]
    latency[stalled] = first[stalled] * np.array([19.6, 6.0, 2.2])  # two stalls, one retried read
    return increment, latency, first


def test_one_stalled_pair_at_a_width_is_no_stripe():
    reading = la.stripe_from_pairs(*one_unit_pairs_with_a_stall())
    assert reading.value == 1, reading.note
    assert "every pair queues" in reading.note


def test_a_stripe_with_a_stalled_pair_is_still_found():
    rng = np.random.default_rng(17)
    n = 16384
    increment = rng.integers(1, 513, n)
    first = 60e3 * rng.normal(1.0, 0.15, n)
    latency = first * rng.normal(1.1, 0.08, n)
    same_unit = increment % 32 == 0
    latency[same_unit] = first[same_unit] * rng.normal(1.6, 0.1, same_unit.sum())
    latency[np.flatnonzero(same_unit)[0]] *= 15  # a stall among them
    assert la.stripe_from_pairs(increment, latency, first).value == 32
