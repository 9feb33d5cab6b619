"""Knees of a throughput curve: where adding concurrency (or request size) stops paying.

Seed 001 §5.2 names two:

- the knee by the marginal-gain rule: walking up the curve step by step (QD 1 -> 2 -> 4 ...), the first step
  whose throughput gain is below 5 % while the mean latency grows by more than 20 % (and, our addition, after
  which no step gains 5 % again). The knee is the step's
  upper point, "the current QD" in the seed's words (its QD 64 -> 128 step, +2.4 % / +95.4 %, gave knee 128);
- the practical knee: the smallest point reaching 90 % of the observed peak ("at QD 32 reaches 90 % of peak
  ... practical knee QD ≈ 32").

The same "first point reaching a share of the peak" also places the IOPS-to-bandwidth transition of a block
size sweep (seed 001 §3.4). Plain arrays in, plain numbers out; hand-written because the rule is the seed's
own (kneed's curvature knee answers a different question and needs no latency).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Seed 001 §5.0/§5.2: "throughput growth rate < 5 % and average latency growth rate > 20 %".
MAX_GAIN = 0.05
MIN_LATENCY_GROWTH = 0.20
# Seed 001 §5.1: the practical knee is where throughput first reaches 90 % of the observed peak.
PRACTICAL_SHARE = 0.90


@dataclass(frozen=True)
class Step:
    """One step up the curve, from point ``lower`` to point ``upper`` (indices into the x-sorted arrays)."""

    lower: int
    upper: int
    x_from: float
    x_to: float
    gain: float  # relative throughput change, 0.05 = +5 %
    latency_growth: float  # relative mean latency change


def _sorted(x, *ys):
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or any(np.asarray(y).shape != x.shape for y in ys):
        raise ValueError("x and the curves must be one-dimensional and of equal length")
    order = np.argsort(x, kind="stable")
    return order, x[order], [np.asarray(y, dtype=float)[order] for y in ys]


def steps(x, throughput, latency) -> list[Step]:
    """The relative throughput gain and latency growth of every step between neighbouring points, in
    increasing ``x``. Indices in the result refer to the caller's (unsorted) arrays."""
    order, xs, (tp, lat) = _sorted(x, throughput, latency)
    out = []
    for i in range(len(xs) - 1):
        out.append(Step(int(order[i]), int(order[i + 1]), float(xs[i]), float(xs[i + 1]),
                        float(tp[i + 1] / tp[i] - 1), float(lat[i + 1] / lat[i] - 1)))
    return out


def knee_by_rule(x, throughput, latency, *, max_gain: float = MAX_GAIN,
                 min_latency_growth: float = MIN_LATENCY_GROWTH) -> Step | None:
    """The first step (in increasing ``x``) that gains less than ``max_gain`` in throughput while the mean
    latency grows more than ``min_latency_growth``, and after which no step gains ``max_gain`` or more; the
    knee is that step's upper point (``step.x_to``). None when no step meets the rule (the curve was still
    climbing, or latency did not grow).

    The second condition is ours, not the seed's: on a clean curve it changes nothing (past the first flat
    step the curve stays flat), but a curve that pauses and climbs again — a hard disk whose command
    reordering gains more from deeper queues, a noisy drive's dip — would otherwise get a knee before a
    doubling that still gains (an HDD sweep: QD 8 -> 16 +1.7 %, then 16 -> 32 +15 %), and "past the knee a
    doubling adds under 5 %" would be false."""
    all_steps = steps(x, throughput, latency)
    for i, step in enumerate(all_steps):
        if (step.gain < max_gain and step.latency_growth > min_latency_growth
                and all(later.gain < max_gain for later in all_steps[i + 1:])):
            return step
    return None


def first_reaching(x, y, share: float = PRACTICAL_SHARE) -> int | None:
    """Index of the smallest ``x`` whose ``y`` is at least ``share`` of the largest ``y`` (NaNs ignored);
    None for an empty or all-NaN curve."""
    order, xs, (ys,) = _sorted(x, y)
    if not np.isfinite(ys).any():
        return None
    peak = np.nanmax(ys)
    for i, value in enumerate(ys):
        if np.isfinite(value) and value >= share * peak:
            return int(order[i])
    return None  # unreachable: the peak itself qualifies


def practical_knee(x, throughput, share: float = PRACTICAL_SHARE) -> int | None:
    """Seed 001's practical knee: index of the smallest ``x`` reaching ``share`` (90 %) of the peak."""
    return first_reaching(x, throughput, share)
