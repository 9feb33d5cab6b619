"""P4 on consumer-tlc-hmb answered 480 for a stripe of 16: the three pairs at 480 chunks (one of them met a
stall) were "surely slower" than the stripe's thousand pairs, because a width's standard error came from the
spread of all pairs, not its own. And a multiple of the channel count (12 on a 4-channel drive) counted as a
rival of the stripe, lowering its confidence."""

from __future__ import annotations

import numpy as np

from ftlscope.probes import _layout_analysis as la


def stalled_pairs():
    rng = np.random.default_rng(3)
    n, window = 16000, 512
    a, b = rng.integers(0, window, n), rng.integers(0, window, n)
    increment = np.abs(a - b)
    first = rng.choice([32e3, 37e3, 42e3], n) + rng.normal(0, 2e3, n)
    latency = first + 3e3 + rng.normal(0, 1e3, n)
    latency = np.where(increment % 4 == 0, first + 8e3, latency)  # one channel: its bus
    latency = np.where(increment % 16 == 0, 1.6 * first, latency)  # one unit: a whole read
    increment[increment == 480] = 481  # exactly three pairs at 480 chunks, as measured
    far = np.arange(3)
    increment[far] = 480
    latency[far] = np.array([2.35, 1.75, 1.85]) * first[far]  # a stall among them
    return increment, latency, first


def test_a_few_stalled_pairs_at_a_far_multiple_are_not_the_stripe():
    reading = la.stripe_from_pairs(*stalled_pairs())
    assert reading.value == 16
    assert reading.confidence >= 0.9  # the channel's multiples (12, 20, ...) are no rivals of the stripe
