"""P5 (channel/chip layout) from pairs of reads issued together on a noisy drive: which channel count explains
how often the two reads complete close together, how sure that is, and whether something serial in front of the
flash (the controller's command processors) spaces the reads.

Nothing here runs the engine; tests/test_probes_p5.py checks every function on synthetic pairs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar
from scipy.special import xlogy

from ._layout_analysis import ChannelReading, _listed

# A gap between the two completions of a pair counts as close when it is below this quantile of every pair's gap.
# Two reads on one channel cannot complete closer than one page transfer on its bus (the second waits for the
# first's), plus the host's completion jitter; on different channels nothing holds them apart. So a shared bus
# empties the low end of the gaps' distribution: at medium noise 7-9 % of the pairs at the sharing distances were
# under the pooled 15th percentile (2.1-2.8 us) against 15 % elsewhere (kelpie-t480g-s, consumer-tlc-dram,
# kelpie-n128g-s, kelpie-n1.6t-w). The lower quartile (3.4-4.7 us at medium, 8.4 us at harsh noise) reached above a
# transfer and diluted it: kelpie-n128g-s at harsh noise read "no bus shared" at 0.95 (12.5 % against 15 % at the
# 15th percentile, 22.8 % against 25 % at the quartile).
CLOSE_QUANTILE = 0.15
# A channel count is only taken with pairs on one bus completing close at most (1 - MIN_DEPLETION) times as often
# as the others: a shared bus moves the close share by 40-55 % at medium noise (18 % at harsh, where the bound still
# beat "no bus shared"), so a distance a few percent low by chance is not a bus, and "no bus shared" can be said
# with confidence when every distance keeps its share.
MIN_DEPLETION = 0.2
# ... or, when the pairs at a channel count's shared distances are many, a depletion of DEPLETION_Z standard errors
# of their close share (binomial, at the pooled share), down to DEPLETION_FLOOR. At harsh noise (30 % NAND-time
# spread, 10 us host jitter) a 5 us bus wait left only 4-9 % fewer close pairs on the held-out 4 KiB drives (8 x 4,
# 6 x 4, 4 x 4, 8 x 8): under the fixed 20 % bound no channel count fitted and "no bus shared" won at 0.53-0.96. The
# bound in standard errors keeps a chance dip from reading as a bus however many pairs were taken; the floor keeps
# a systematic few-percent difference between distances (page types, queueing) from reading as one.
DEPLETION_Z = 4.0
DEPLETION_FLOOR = 0.03
# ... but only where the spread can hide a bus wait: the close threshold above SPREAD_HIDES times the page's
# transfer on the fastest bus (FASTEST_BUS). Under it a shared bus empties the close pairs (40-55 % at medium
# noise) and a drop of a few percent is something else: pm981-256g at medium noise (4 units, each its own channel,
# threshold 1.72 us) had 10 % fewer close pairs 2 units apart and read 2 ch x 2 at 0.85 under the looser bound.
# The held-out harsh drives' thresholds were 5.4-5.8 us against 1.7 us for 4 KiB.
SPREAD_HIDES = 2.0
# A layout read from a drop under MIN_DEPLETION is given at most WEAK_CONFIDENCE: with so small a drop a chance dip
# at one distance, or one multiple of the channel count showing less than the others, can pick a multiple or a
# divisor of the count (synthetic harsh pairs, 8 ch of 32 units: 24 channels at 0.97 in one run of eight).
WEAK_CONFIDENCE = 0.85

# The most dies a channel bus carries in the drives measured ("Fantastic SSD Internals and How to Learn and Use
# Them", Table 4: the deepest layout is 4 x 16). A layout with more per channel is more likely channels pooled
# into groups that contend as one bus (the paper's N1.6TS: 16 channels in 4 pools), which no read timing tells
# from fewer channels: such an answer is given at most POOLED_CONFIDENCE, with the pooled layouts beside it.
MAX_CHIPS_PER_CHANNEL = 16
POOLED_CONFIDENCE = 0.5
# The extra spread of a span cell's mean beyond its own standard error: at least this share of the mean latency.
CELL_SPREAD_FLOOR = 0.002
# The fastest channel bus of current NAND (ONFI 5 / Toggle 5: 2.4 GT/s, one byte per transfer): a page moves
# over a bus in at least page / FASTEST_BUS. A serial stage at least this long per read can hide every bus wait.
FASTEST_BUS = 2.4e9
# The confidence of "no two units share a bus" when a serial stage long enough to hide a bus wait was seen.
HIDDEN_CONFIDENCE = 0.3
# The most confidence a layout seen through such a stage is given.
SERIAL_FOUND_CONFIDENCE = 0.6


def admission_gap(distance, gap_ns, *, min_pairs: int = 8) -> float:
    """The time a serial stage in front of the buses puts between two reads issued together: per unit distance
    the median of (second submitted's completion - first's), the least over the distances (those whose units
    share no bus; a shared bus only adds). Medians, because the host's completion jitter and the two reads'
    sensing spread are symmetric in the difference. 0 when no distance had ``min_pairs`` pairs."""
    table = pd.DataFrame({"d": np.asarray(distance), "gap": np.asarray(gap_ns, dtype=float)})
    per = table.groupby("d")["gap"].agg(["median", "size"])
    per = per[per["size"] >= min_pairs]
    return max(float(per["median"].min()), 0.0) if len(per) else 0.0


def hides_buses(stage_ns: float, page_bytes: int) -> bool:
    """A serial stage this long per read can hide every bus wait: at least the fastest bus's page transfer."""
    return stage_ns >= page_bytes / FASTEST_BUS * 1e9


def close_counts(distance, gap_ns) -> pd.DataFrame:
    """Per unit distance: the pairs (``n``), those whose completions came close together (``close``: the gap under
    the CLOSE_QUANTILE of every pair's gap) and their share; the threshold in ``attrs["threshold_ns"]``."""
    gap = np.abs(np.asarray(gap_ns, dtype=float))
    threshold = float(np.quantile(gap, CLOSE_QUANTILE)) if len(gap) else 0.0
    # At or under: on a drive whose gaps take a few exact values (no noise) the lowest is the close one.
    table = pd.DataFrame({"d": np.asarray(distance, dtype=int), "close": gap <= threshold}).groupby("d")["close"] \
        .agg(close="sum", n="size")
    table["share"] = table["close"] / table["n"]
    table.attrs["threshold_ns"] = threshold
    return table


def spread_hides_bus(threshold_ns: float, page_bytes: int | None) -> bool:
    """Whether the close threshold is wide enough to hide a page's bus wait (SPREAD_HIDES fastest transfers)."""
    return page_bytes is not None and threshold_ns > SPREAD_HIDES * page_bytes / FASTEST_BUS * 1e9


def least_depletion(close: np.ndarray, n: np.ndarray, shared: np.ndarray) -> float:
    """The smallest drop of the close share at the ``shared`` distances that is taken as a bus where the spread
    can hide a bus wait: MIN_DEPLETION, or DEPLETION_Z relative standard errors of the share over the pairs there
    when that is less (not under DEPLETION_FLOOR)."""
    pairs = float(n[shared].sum())
    share = float(close.sum() / n.sum()) if n.sum() else 0.0
    if pairs <= 0 or not 0 < share < 1:
        return MIN_DEPLETION
    resolved = DEPLETION_Z * np.sqrt((1 - share) / (share * pairs))
    return float(min(MIN_DEPLETION, max(DEPLETION_FLOOR, resolved)))


def depleted_fit(close: np.ndarray, n: np.ndarray, shared: np.ndarray, *, hidden: bool = False) \
        -> tuple[float, int, float]:
    """Binomial fit of the close pairs per distance: one share where no bus is shared, and where one is (``shared``)
    a share at most (1 - MIN_DEPLETION) times it, or (1 - :func:`least_depletion`) where the spread can hide the
    bus wait (``hidden``). (deviance against each distance's own share, parameters, Pearson's chi-square.)"""
    if shared.any():
        keep = 1.0 - (least_depletion(close, n, shared) if hidden else MIN_DEPLETION)
        free, bus = close[~shared].sum() / n[~shared].sum(), close[shared].sum() / n[shared].sum()
        if bus > keep * free:
            # On the bound: the share x elsewhere and keep * x on the shared distances, x by maximum likelihood.
            def loss(x: float) -> float:
                p = np.where(shared, keep * x, x)
                return -float(np.sum(xlogy(close, p) + xlogy(n - close, 1 - p)))
            free = float(minimize_scalar(loss, bounds=(1e-9, 1 - 1e-9), method="bounded").x)
            bus = keep * free
        p, params = np.where(shared, bus, free), 2
    else:
        p, params = np.full(len(n), close.sum() / n.sum()), 1
    p = np.clip(p, 1e-9, 1 - 1e-9)
    own = close / n
    deviance = 2 * float(np.sum(xlogy(close, own) + xlogy(n - close, 1 - own) -
                                xlogy(close, p) - xlogy(n - close, 1 - p)))
    pearson = float(np.sum((close - n * p) ** 2 / (n * p * (1 - p))))
    return deviance, params, pearson


def channels_from_pair_gaps(distance, gap_ns, stripe: int, page: int | None = None) -> ChannelReading:
    """P5 from pairs of reads of two units of one stripe row (the same place in both units' write order) issued
    together on a noisy drive: ``distance`` = the units between them, ``gap_ns`` = how long after the first the
    second completed.

    Each read senses its page for a time that varies by tens of microseconds, then moves it over its channel's
    bus. On different channels the two completions can fall arbitrarily close; on one channel the later transfer
    waits for the earlier, so they complete at least a page transfer apart (blurred by the host's completion
    jitter). The share of pairs that complete close together (:func:`close_counts`) therefore drops at the
    distances whose units share a channel: the multiples of the channel count (unit u is on channel u mod C).
    Every channel count C from 2 to the largest distance, and "no two units share a channel" (C = stripe), is a
    binomial model of the close counts (:func:`depleted_fit`), scored by Akaike's criterion after the
    quasi-likelihood dispersion (the counts' spread beyond binomial, from the best fit); the confidence is the
    best count's posterior under equal priors. A median gap per distance, the noise-free reading, drowns here:
    the bus transfer is a few microseconds, the two senses' spread tens, and a shared bus moves the median gap
    by under a microsecond while it halves the close share. Written here because it is a model selection over
    this probe's own design, not a library routine."""

    def layout(channels: int) -> dict[str, int]:
        return {"channels": int(channels), "chips_per_channel": int(-(-stripe // max(channels, 1)))}

    table = close_counts(distance, gap_ns)
    none = np.zeros(0, dtype=int)
    if table.empty or table["close"].sum() == 0:
        return ChannelReading(layout(stripe), None, [], table, none, "no pair of reads was measured", False)
    d = table.index.to_numpy(int)
    close, n = table["close"].to_numpy(float), table["n"].to_numpy(float)
    largest = int(d.max())
    candidates = [*range(2, min(largest, stripe - 1) + 1), stripe]
    hidden = spread_hides_bus(table.attrs["threshold_ns"], page)  # page None: the fixed bound
    fits = {c: depleted_fit(close, n, d % c == 0 if c < stripe else np.zeros(len(d), dtype=bool), hidden=hidden)
            for c in candidates}
    first = min(fits, key=lambda c: (fits[c][0] + 2 * fits[c][1], c))
    dispersion = max(1.0, fits[first][2] / max(len(d) - fits[first][1], 1))
    score = {c: f[0] / dispersion + 2 * f[1] for c, f in fits.items()}
    low = min(score.values())
    weights = {c: float(np.exp(-(s - low) / 2)) for c, s in score.items()}
    total = sum(weights.values())
    ranked = sorted(weights, key=lambda c: (-weights[c], c))
    best = ranked[0]
    posterior = weights[best] / total
    others = [{"value": layout(c), "confidence": round(weights[c] / total, 4)} for c in ranked[1:4]
              if weights[c] / total >= 1e-4]
    threshold = table.attrs["threshold_ns"] / 1e3
    spread = f"dispersion {dispersion:.1f}x binomial"
    if best == stripe:
        confidence = posterior if largest >= stripe - 1 else min(posterior, 0.5)  # counts beyond the distances
        note = (f"no two of the {stripe} units share a bus: at every distance up to {largest} units "
                f"{close.sum() / n.sum():.0%} of the pairs complete within {threshold:.2f} us of each other; "
                f"posterior {posterior:.2f} against every channel count; {spread}")
        return ChannelReading(layout(stripe), confidence, others, table, none, note, False, posterior)
    shared = d % best == 0
    on_bus, elsewhere = close[shared].sum() / n[shared].sum(), close[~shared].sum() / n[~shared].sum()
    note = (f"pairs {_listed(d[shared])} units apart complete within {threshold:.2f} us of each other "
            f"{on_bus:.1%} of the time against {elsewhere:.1%} at other distances: they wait for one bus if there "
            f"are {best} channels; posterior {posterior:.2f} "
            f"against the other channel counts; {spread}")
    confidence = posterior
    weak = weak_drop(on_bus, elsewhere)
    if weak:
        confidence = min(posterior, WEAK_CONFIDENCE)
        note += (f"; a drop under {MIN_DEPLETION:.0%} (the timing spread hides most of the bus wait): confidence "
                 f"at most {WEAK_CONFIDENCE}")
    return ChannelReading(layout(best), confidence, others, table, d[shared], note, True, posterior, weak=weak)


def weak_drop(on_bus: float, elsewhere: float) -> bool:
    """Whether the close share at the shared distances dropped by less than MIN_DEPLETION."""
    return elsewhere > 0 and on_bus > (1 - MIN_DEPLETION) * elsewhere

# ---- seeing through a serial stage: one command over several units -----------------------------------------------

# A stage of steps is taken only when each step stands this many standard errors (after the dispersion) above
# nothing: a smaller one is the trend's curvature or noise, not a bus transfer.
SPAN_STEP_Z = 4.0


def span_fit(k: np.ndarray, y: np.ndarray, w: np.ndarray, channels: int | None) -> tuple[float, int, float, float]:
    """Weighted least squares of ``y`` = a quadratic in ``k`` plus ``step`` x ceil(k / channels): (chi-square,
    parameters, step, its standard error). ``channels`` None: no step (no two units share a bus)."""
    scale = max(float(np.ptp(k)), 1.0)
    x = (k - k.mean()) / scale
    columns = [np.ones_like(x), x, x ** 2]
    if channels is not None:
        columns.append(np.ceil(k / channels))
    design = np.column_stack(columns)
    sw = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(design * sw[:, None], y * sw, rcond=None)
    chi2 = float(np.sum(w * (y - design @ coef) ** 2))
    if channels is None:
        return chi2, design.shape[1], 0.0, 0.0
    covariance = np.linalg.pinv((design * w[:, None]).T @ design)
    return chi2, design.shape[1], float(coef[-1]), float(np.sqrt(max(covariance[-1, -1], 0.0)))


def channels_from_spans(cells: pd.DataFrame, stripe: int) -> ChannelReading:
    """P5 seen through a serial stage: ``cells`` has one row per ``k`` (one read command of k whole chunks inside
    one stripe row, so k consecutive units, one read at a time) with its trimmed mean latency (``mean_ns``),
    standard error (``se_ns``) and reads (``n``).

    One command passes the command processors once, whatever it reads, so their time cannot hide what happens
    behind them: the units sense in parallel and their chunks then queue on the channel buses, the pages of
    ceil(k / C) units on the busiest of C channels (unit u is on channel u mod C). The latency rises by one
    chunk's bus transfer each time k passes a multiple of C, on top of a smooth rise (the host link's transfer
    of k chunks, the slowest of k sensing times). Each channel count C from 2 to k's largest is fitted as a
    quadratic in k plus an equal step per ceil(k / C) (equal: each is one more chunk on the busiest bus, so a
    divisor of C, whose extra steps would have to be zero, does not fit as well), "no two units share a bus" as
    the quadratic alone; scored by Akaike's criterion after the quasi-likelihood dispersion, as the streams are.
    Written here because it is a model selection over this probe's own design, not a library routine."""

    def layout(channels: int) -> dict[str, int]:
        return {"channels": int(channels), "chips_per_channel": int(-(-stripe // max(channels, 1)))}

    none = np.zeros(0, dtype=int)
    if len(cells) < 4:
        return ChannelReading(layout(stripe), None, [], cells, none, "too few read sizes were measured", False)
    k = cells["k"].to_numpy(float)
    y = cells["mean_ns"].to_numpy(float)
    se = np.sqrt(cells["se_ns"].to_numpy(float) ** 2 + (CELL_SPREAD_FLOOR * np.median(y)) ** 2)
    w = 1 / se ** 2
    largest = int(k.max())
    # A channel count needs a step inside the sizes measured (at k = C + 1); None: no step at all.
    candidates: list[int | None] = [*range(2, largest), None]
    fits = {c: span_fit(k, y, w, c) for c in candidates}
    first = min(fits, key=lambda c: fits[c][0] + 2 * fits[c][1])
    dispersion = max(1.0, fits[first][0] / max(len(y) - fits[first][1], 1))
    score = {c: f[0] / dispersion + 2 * f[1] for c, f in fits.items()}
    # A step that falls (a bus transfer never makes a read faster) or does not stand out is no layout.
    for c, f in fits.items():
        if c is not None and f[2] <= SPAN_STEP_Z * f[3] * np.sqrt(dispersion):
            score[c] = np.inf
    low = min(score.values())
    weights = {c: float(np.exp(-(s - low) / 2)) for c, s in score.items()}
    total = sum(weights.values())
    ranked = sorted(weights, key=lambda c: (-weights[c], stripe if c is None else c))
    best = ranked[0]
    posterior = weights[best] / total
    others = [{"value": layout(stripe if c is None else c), "confidence": round(weights[c] / total, 4)}
              for c in ranked[1:4] if weights[c] / total >= 1e-4]
    note = f"dispersion {dispersion:.1f}x the medians' standard errors"
    if best is None:
        note = (f"one read of k chunks (k = 1-{largest}) takes no step at any channel count: no bus transfer "
                f"showed behind the serial stage; {note}")
        confidence = posterior if largest >= stripe else min(posterior, 0.5)  # more channels than k also fit
        return ChannelReading(layout(stripe), confidence, others, cells, none, note, False, posterior)
    step = fits[best][2]
    abnormal = np.arange(best + 1, largest + 1, best)
    note = (f"one read of k chunks (k = 1-{largest}) takes {step / 1e3:.2f} us longer each time k passes a "
            f"multiple of {best} (at k = {_listed(abnormal)}): one more chunk on the busiest of {best} channel "
            f"buses; posterior {posterior:.2f} against the other channel counts; {note}")
    return ChannelReading(layout(best), posterior, others, cells, abnormal, note, True, posterior)
