"""P4 on kelpie-t64g-s (one unit: every pair of reads queues) at medium noise answered a stripe of 570 chunks at
0.50: the 36 pairs at 570 chunks, the only multiple of 570 in a window of 1024, were 1.05x slower than the rest
(z 8.8). Where every pair already queues a unit queue cannot single out one increment: it is noise, and the
drive is one unit."""

from __future__ import annotations

import numpy as np

from ftlscope.probes import _layout_analysis as la


def one_unit_pairs(seed: int = 5):
    rng = np.random.default_rng(seed)
    n, window = 36 * 1024, 1024
    increment = rng.integers(1, window + 1, n)
    first = 30e3 * rng.normal(1.0, 0.15, n) + rng.normal(0, 5e3, n)
    first = np.maximum(first, 5e3)
    latency = first + 30e3 * rng.normal(1.0, 0.15, n)  # the second read waits for the first: about 2x
    latency = np.where(increment == 570, latency * 1.10 + 2e3, latency)  # one increment slower by chance
    return increment, latency, first


def test_one_slow_increment_where_every_pair_queues_is_one_unit():
    reading = la.stripe_from_pairs(*one_unit_pairs())
    assert reading.value == 1, reading.note
    # The one slow increment (570 here, or another the noise lifts) is named as the alternative, and it
    # costs the answer confidence.
    (alternative,) = reading.alternatives
    assert alternative["value"] > 512 and "taken for noise" in reading.note
    assert reading.confidence < 1.0


def test_a_stripe_seen_twice_where_pairs_do_not_queue_is_kept():
    rng = np.random.default_rng(6)
    n = 36 * 1024
    increment = rng.integers(1, 1025, n)
    first = 30e3 * rng.normal(1.0, 0.15, n)
    latency = first + 3e3 + rng.normal(0, 1e3, n)
    latency = np.where(increment % 400 == 0, first + 30e3 * rng.normal(1.0, 0.15, n), latency)
    assert la.stripe_from_pairs(increment, latency, first).value == 400
