"""Steady state by the SNIA rule, and where a burst ends.

The SNIA Solid State Storage Performance Test Specification (PTS) runs a test in rounds and calls the device
steady once a *measurement window* of five consecutive rounds meets two conditions on the tracked value y (e.g.
the 4 KiB random write IOPS of each round):

- data excursion: max(y) - min(y) within the window is at most 20 % of the window's average;
- slope excursion: the least-squares line fitted to the window's y (x = round number) changes by at most 10 %
  of the average across the window, i.e. |slope| x (rounds - 1), the line's max minus min over the window
  (CloudHarmony's block-storage PTS implementation computes it the same way, |slope| x 4 for five rounds).

SNIA stops at the first window that meets both; :func:`first_steady_window` is that window. A run of fixed
length is judged by its last window (:func:`final_window`), and :func:`steady_since` says from which round on
every window to the end of the run met the rule, which separates a lasting steady state from a passing flat
stretch (a drive that is flat while its SLC cache is full but before garbage collection starts).

Where the burst ends (:func:`burst_end`): a device fresh out of the box writes fast until its SLC cache (and
write buffer and free blocks) are used up. The burst level is the median of the first few time windows; the
burst ends at the first window whose rolling median (three windows, centred, so one slow window inside the
burst is no end) falls more than 25 % below it. The instant is found from the amount written in that window and
the one before: burst rate up to t*, the level right after from t* on. Hand-written rather than change-point
detection because the question is the first sustained fall below the *first* level, which a few medians answer
exactly, also on the noisy, GC-bound stretch after it where segmentation finds many small shifts.

Plain arrays in, plain numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

# SNIA PTS: a five-round measurement window; data excursion within 20 %, slope excursion within 10 % of the
# window's average.
ROUNDS = 5
MAX_EXCURSION = 0.20
MAX_SLOPE_EXCURSION = 0.10

# Burst end: the burst level is the median of the first HEAD windows; it ends where the centred rolling median
# of SMOOTH windows first falls more than DROP below that level.
HEAD = 3
SMOOTH = 3
DROP = 0.25


@dataclass(frozen=True)
class Window:
    """The measurement window of rounds ``[start, stop)`` judged by the SNIA rule."""

    start: int
    stop: int
    average: float
    excursion: float  # (max - min) / average
    slope: float  # of the least-squares line, per round
    intercept: float  # of that line, at round 0 of the whole series
    slope_excursion: float  # |slope| x (rounds - 1) / average
    reached: bool


def check_window(values, start: int, rounds: int = ROUNDS, *, max_excursion: float = MAX_EXCURSION,
                 max_slope_excursion: float = MAX_SLOPE_EXCURSION) -> Window:
    """Judge the window of ``rounds`` values starting at ``start``."""
    y = np.asarray(values, dtype=float)
    if rounds < 2:
        raise ValueError("check_window: a measurement window needs at least 2 rounds")
    if start < 0 or start + rounds > len(y):
        raise ValueError(f"check_window: rounds {start}..{start + rounds - 1} are not all in the series")
    x = np.arange(start, start + rounds, dtype=float)
    w = y[start:start + rounds]
    average = float(w.mean())
    slope, intercept = np.polyfit(x, w, 1)
    if average > 0:
        excursion = float(w.max() - w.min()) / average
        slope_excursion = abs(float(slope)) * (rounds - 1) / average
    else:  # nothing measured: no level to be steady at
        excursion = slope_excursion = float("inf")
    reached = bool(np.all(np.isfinite(w)) and excursion <= max_excursion and slope_excursion <= max_slope_excursion)
    return Window(start, start + rounds, average, excursion, float(slope), float(intercept), slope_excursion,
                  reached)


def windows(values, rounds: int = ROUNDS, **limits) -> list[Window]:
    """Every measurement window of the series, by start round."""
    n = len(values)
    return [check_window(values, s, rounds, **limits) for s in range(0, n - rounds + 1)]


def first_steady_window(values, rounds: int = ROUNDS, *, start: int = 0, **limits) -> Window | None:
    """The first window starting at round ``start`` or later that meets the rule (where SNIA would stop the
    test); None when none does."""
    for w in windows(values, rounds, **limits)[max(start, 0):]:
        if w.reached:
            return w
    return None


def final_window(values, rounds: int = ROUNDS, **limits) -> Window | None:
    """The window of the last ``rounds`` rounds (the run's measurement window); None with fewer rounds."""
    if len(values) < rounds:
        return None
    return check_window(values, len(values) - rounds, rounds, **limits)


def steady_since(values, rounds: int = ROUNDS, **limits) -> int | None:
    """The earliest round from which every window to the end of the series meets the rule; None when the final
    window does not (the run ended unsteady)."""
    ws = windows(values, rounds, **limits)
    if not ws or not ws[-1].reached:
        return None
    since = len(ws) - 1
    while since > 0 and ws[since - 1].reached:
        since -= 1
    return ws[since].start


def round_averages(start_s, duration_s, amount, round_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Cut a series of time windows (start, duration, amount done in the window, e.g. ops) into rounds of
    ``round_s`` seconds counted from the first window: (round start times, amount per second of each round).
    Only complete rounds are returned (a run's last, shorter round is left out)."""
    start = np.asarray(start_s, dtype=float)
    duration = np.asarray(duration_s, dtype=float)
    amount = np.asarray(amount, dtype=float)
    if not start.size:
        return np.array([]), np.array([])
    if round_s <= 0:
        raise ValueError("round_averages: a round must last longer than 0 s")
    origin = start.min()
    index = np.floor((start - origin) / round_s + 1e-9).astype(int)
    frame = pd.DataFrame({"round": index, "duration": duration, "amount": amount})
    grouped = frame.groupby("round").sum()
    complete = grouped[grouped["duration"] >= round_s * (1 - 1e-6)]
    # Rounds must follow each other: stop at the first gap (a missing or short round inside the run).
    rounds = complete.index.to_numpy()
    keep = rounds == np.arange(len(rounds))
    stop = len(rounds) if keep.all() else int(np.argmin(keep))
    complete = complete.iloc[:stop]
    return origin + complete.index.to_numpy() * round_s, (complete["amount"] / complete["duration"]).to_numpy()


@dataclass(frozen=True)
class BurstEnd:
    """Where the burst ended: window ``index`` is the first one of the lower level; ``seconds`` the instant
    (same clock as the window starts), from the cumulative amount; ``burst`` the burst level (median of the
    windows before), ``after`` the level right after (median of up to HEAD windows from ``index`` on)."""

    index: int
    seconds: float
    burst: float
    after: float


def burst_end(start_s, duration_s, rate, *, drop: float = DROP, head: int = HEAD,
              smooth: int = SMOOTH) -> BurstEnd | None:
    """The end of the initial burst of a rate series (e.g. IOPS per time window), or None when the rate never
    falls more than ``drop`` below its first level for good (no burst: the device writes at one speed)."""
    start = np.asarray(start_s, dtype=float)
    duration = np.asarray(duration_s, dtype=float)
    y = np.asarray(rate, dtype=float)
    if y.size < 2:
        return None
    level = float(np.median(y[:head]))
    smoothed = pd.Series(y).rolling(smooth, center=True, min_periods=1).median().to_numpy()
    below = np.flatnonzero(smoothed[1:] < (1.0 - drop) * level) + 1
    # "For good": after the fall the rate never comes back near the burst level (within half the drop). A rate
    # that dips and recovers again and again (a write buffer's flushes, seen in every few windows) has no end of
    # burst, only a ripple on one level.
    recovers = (1.0 - drop / 2) * level
    # (And it stays down for `head` windows at least: a dip in the last windows is no end of burst yet.)
    index = next((int(i) for i in below if i + head <= y.size and not (smoothed[i + 1:] >= recovers).any()), None)
    if index is None or level <= 0:
        return None
    burst = float(np.median(y[:index]))
    after = float(np.median(y[index:index + head]))
    # The amount done in windows index-1 and index = burst * (t* - a) + after * (end - t*), with a the start of
    # window index-1: solve for t*. This places the end inside a window that was partly burst (the one before,
    # or this one); only these two windows count, so a slow window earlier in the burst does not move it.
    first = max(index - 1, 0)
    a = start[first]
    end = start[index] + duration[index]
    done = float(np.sum(y[first:index + 1] * duration[first:index + 1]))
    seconds = a + (done - after * (end - a)) / (burst - after) if burst > after else start[index]
    seconds = float(np.clip(seconds, a, end))
    return BurstEnd(index, seconds, burst, after)
