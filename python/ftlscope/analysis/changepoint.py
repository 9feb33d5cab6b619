"""Change points in a time series (throughput per time window): where its level shifts, the segments between
the shifts, and the biggest drop — the write cliff of seed 000 §5.4, where a drive's SLC cache runs out.

Detection is ruptures' binary segmentation with the least-squares (``l2``) cost: it finds shifts in the mean.
Not ``Pelt``: ruptures' Pelt is written in Python and took minutes on the 5,800 windows of one whole-drive
write, where binary segmentation takes a fraction of a second and finds the same points on step-like series.

>>> x = [100.0] * 50 + [40.0] * 50
>>> change_points(x)
[50]
>>> biggest_drop(x)
Drop(index=50, before=100.0, after=40.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import ruptures as rpt


@dataclass(frozen=True)
class Segment:
    """Values ``[start, end)`` of the series, with their mean."""

    start: int
    end: int
    mean: float


@dataclass(frozen=True)
class Drop:
    """A level shift down at ``index`` (the first value of the lower segment): the mean of the segment before
    and of the segment after."""

    index: int
    before: float
    after: float

    @property
    def ratio(self) -> float:
        """after / before: 0.3 means the level fell to 30 %."""
        return self.after / self.before if self.before else math.nan


def default_penalty(values, scale: float = 1.0) -> float:
    """``scale`` x 2 var(x) ln(n): a BIC-like penalty in the series' own units. A split is kept only when it
    explains more than about 2 ln(n) / n of the variance, so pure noise yields no change points (the largest
    squared CUSUM of noise grows like ln ln n) while a real step, which carries most of the variance, always
    shows. Using the total variance (step included) makes it conservative: small shifts next to a big one
    need ``scale`` < 1 to show."""
    x = np.asarray(values, dtype=float)
    return scale * 2.0 * float(np.var(x)) * math.log(max(len(x), 2))


def change_points(values, *, penalty: float | None = None, min_size: int = 2) -> list[int]:
    """Indices where a new level starts (sorted, excluding 0 and len(values)); [] for a series too short
    to split or without variation. ``penalty`` defaults to :func:`default_penalty`."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError("change_points: give a one-dimensional series of finite numbers")
    if len(x) < 2 * min_size or float(np.var(x)) == 0.0:
        return []
    pen = default_penalty(x) if penalty is None else float(penalty)
    breaks = rpt.Binseg(model="l2", min_size=min_size, jump=1).fit(x).predict(pen=pen)
    return [int(b) for b in breaks if 0 < b < len(x)]


def segments(values, points: list[int]) -> list[Segment]:
    """The segments the change ``points`` cut the series into, with their means."""
    x = np.asarray(values, dtype=float)
    edges = [0, *sorted(points), len(x)]
    return [Segment(a, b, float(x[a:b].mean())) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def biggest_drop(values, points: list[int] | None = None, *, min_drop: float = 0.0) -> Drop | None:
    """The change point where the mean falls most (segment before minus segment after), or None when no
    change point is a fall of more than ``min_drop`` (a fraction of the level before: 0.1 = 10 %).
    ``points`` defaults to :func:`change_points` of the series."""
    x = np.asarray(values, dtype=float)
    points = change_points(x) if points is None else points
    segs = segments(x, points)
    best: Drop | None = None
    for left, right in zip(segs[:-1], segs[1:], strict=True):
        fall = left.mean - right.mean
        if fall <= 0 or fall <= min_drop * left.mean:
            continue
        if best is None or fall > best.before - best.after:
            best = Drop(right.start, left.mean, right.mean)
    return best
