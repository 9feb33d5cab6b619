"""Rolling curves over a run's time windows: a share pooled over the last ``k`` windows (seed 000 Fig. 5.18,
the fraction of requests over 1 ms as a rolling average), and early-versus-late levels of a series.

Shares are pooled (sum of counts / sum of totals), not averages of per-window shares, so a window with few
requests weighs as little as it should.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def rolling_share(counts, totals, k: int) -> np.ndarray:
    """For each window i: sum(counts[i-k+1 .. i]) / sum(totals[i-k+1 .. i]) (fewer windows at the start);
    NaN where those windows hold no requests."""
    if k < 1:
        raise ValueError("rolling_share: k must be at least 1")
    c = pd.Series(np.asarray(counts, dtype=float)).rolling(k, min_periods=1).sum()
    t = pd.Series(np.asarray(totals, dtype=float)).rolling(k, min_periods=1).sum()
    return (c / t.where(t > 0)).to_numpy()


def rolling_mean(values, k: int) -> np.ndarray:
    """The trailing mean over the last ``k`` values (fewer at the start)."""
    if k < 1:
        raise ValueError("rolling_mean: k must be at least 1")
    return pd.Series(np.asarray(values, dtype=float)).rolling(k, min_periods=1).mean().to_numpy()


def early_late(amounts, durations, fraction: float = 0.1) -> tuple[float, float]:
    """Throughput over the first and over the last ``fraction`` of the work: windows are taken in order
    until they hold ``fraction`` of the total ``amounts`` (bytes), and each level is the amount over the
    time those windows took (so short or idle windows weigh by their duration)."""
    if not 0 < fraction <= 0.5:
        raise ValueError("early_late: fraction must be in (0, 0.5]")
    a = np.asarray(amounts, dtype=float)
    d = np.asarray(durations, dtype=float)
    if len(a) == 0 or a.sum() <= 0:
        return float("nan"), float("nan")
    share = fraction * a.sum()
    first = int(np.searchsorted(np.cumsum(a), share)) + 1
    last = int(np.searchsorted(np.cumsum(a[::-1]), share)) + 1
    return float(a[:first].sum() / d[:first].sum()), float(a[-last:].sum() / d[-last:].sum())
