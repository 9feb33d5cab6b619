"""Where a condition starts to hold for good along a sweep: "from which request size do shuffled reads keep up
with sequential ones" (seed 000 §3.3.2), "from which offset does misalignment stop costing" (§3.3.4).

Plain arrays in, plain numbers out. Hand-written because the question is "the smallest x from which the
condition holds at every larger x", a suffix test no library offers as such; it is a few lines of numpy.
"""

from __future__ import annotations

import numpy as np


def first_sustained(x, ok) -> float | None:
    """The smallest ``x`` from which ``ok`` holds at that point and at every larger ``x``; None when it does
    not hold at the largest ``x`` (or there are no points). Several points at one ``x`` must all hold."""
    x = np.asarray(x, dtype=float)
    ok = np.asarray(ok, dtype=bool)
    if x.ndim != 1 or ok.shape != x.shape:
        raise ValueError("x and ok must be one-dimensional and of equal length")
    if x.size == 0:
        return None
    values = np.unique(x)  # sorted
    holds = np.array([ok[x == v].all() for v in values])
    if not holds[-1]:
        return None
    # The last point where it fails; the answer is the next x up (or the first x when it never fails).
    failing = np.flatnonzero(~holds)
    return float(values[failing[-1] + 1] if failing.size else values[0])


def relative_change(value, reference):
    """``value / reference - 1`` elementwise (0.1 = 10 % above the reference); NaN where the reference is 0."""
    value = np.asarray(value, dtype=float)
    reference = np.asarray(reference, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(reference != 0, value / reference - 1.0, np.nan)
