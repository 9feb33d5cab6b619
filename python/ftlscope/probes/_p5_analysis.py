"""P5 (channel/chip layout) from streams of reads on a noisy drive: which channel count explains the streams'
median latencies, how sure that is, and whether something serial in front of the flash (the controller's
command processors, the host link) hides the channel buses.

Nothing here runs the engine; tests/test_probes_p5.py checks every function on synthetic cells.
"""

from __future__ import annotations

from math import gcd

import numpy as np
import pandas as pd
from scipy.optimize import isotonic_regression, lsq_linear

from ._layout_analysis import ChannelReading, _listed, channel_load

# The extra spread of a cell's median beyond its own standard error (a background operation that landed in one
# stream): at least this share of the median latency.
CELL_SPREAD_FLOOR = 0.002
# Alternating isotonic fit and trend: a few passes settle it (the trend moves < 0.1 % after ~5).
TREND_PASSES = 8
# The trend in the distance (page types in flight) is a polynomial of this degree: the share of neighbours
# crossing a row is linear in d, but a stream's median depends on the types of all its in-flight reads together.
TREND_DEGREE = 2
# The cells' residuals are weighed with Student's t of this many degrees of freedom (a cell 3 standard errors off
# costs 7.8 instead of 9, one 14 off 19 instead of 196), refitted this many times.
ROBUST_DF = 4
ROBUST_PASSES = 6
# The most dies a channel bus carries in the drives measured ("Fantastic SSD Internals and How to Learn and Use
# Them", Table 4: the deepest layout is 4 x 16). A layout with more per channel is more likely channels pooled
# into groups that contend as one bus (the paper's N1.6TS: 16 channels in 4 pools), which no read timing tells
# from fewer channels: such an answer is given at most POOLED_CONFIDENCE, with the pooled layouts beside it.
MAX_CHIPS_PER_CHANNEL = 16
POOLED_CONFIDENCE = 0.5
# A stream median counts as slower at the deepest depth than at the one below only beyond this ratio: with no
# serial stage the in-flight reads sit on distinct units and buses, and the median stays where it was.
SATURATION_RATIO = 1.15
# A stream median counts as slower at the deepest depth than at the one below only beyond this ratio: with no
# serial stage the in-flight reads sit on distinct units and buses, and the median stays where it was.
SATURATION_RATIO = 1.15
# The fastest channel bus of current NAND (ONFI 5 / Toggle 5: 2.4 GT/s, one byte per transfer): a page moves
# over a bus in at least page / FASTEST_BUS. A serial stage at least this long per read can hide every bus wait.
FASTEST_BUS = 2.4e9
# The most confidence a layout is given when :func:`second_opinion` names another channel count.
DISAGREE_CONFIDENCE = 0.5
# The confidence of "no two units share a bus" when a serial stage long enough to hide a bus wait was seen.
HIDDEN_CONFIDENCE = 0.3
# The most confidence a layout seen through such a stage is given.
SERIAL_FOUND_CONFIDENCE = 0.6


def lock_step(q: int, distance: int, stripe: int) -> bool:
    """A stream whose walk never leaves the units in flight (``q`` x ``distance`` a multiple of the stripe):
    every unit's next read is issued as its last completes, the reads fall into lock-step on their bus and wait
    longer than the same load spread over more units (kelpie-n500g-s's 4 channels read as 8 at posterior 1.0
    at medium noise when these cells counted as the others)."""
    return stripe // gcd(int(distance), stripe) <= q


def trend_isotonic_fit(load: np.ndarray, y: np.ndarray, w: np.ndarray, d: np.ndarray,
                       confined: np.ndarray | None = None) -> tuple[float, int, float]:
    """Weighted fit of ``y`` = a level per load value that never falls as the load rises (isotonic regression)
    plus a straight line in the distance ``d``: (chi-square, parameters, how many standard errors the top level
    stands above the first).

    The line is the page types in flight: a stream's neighbouring reads are ``d`` units plus whole stripe rows
    apart, and the share of neighbours that also cross into the next row (another place in the units' write
    order, so another page type and sensing time) is d / stripe, so the mix of page types in flight, and with it
    the median, drifts in proportion to ``d``. Bus sharing repeats with the channel count instead, which a line
    cannot follow; without the line a wrong channel count could explain the drift. Fitted by alternating the
    isotonic levels and the slope (each a weighted least-squares step, so the chi-square never rises)."""
    values = np.unique(load)
    index = np.searchsorted(values, load)
    weight = np.bincount(index, weights=w, minlength=len(values))
    scale = max(float(np.ptp(d)), 1.0)
    x = (d - np.sum(w * d) / np.sum(w)) / scale
    basis = np.column_stack([x ** (k + 1) for k in range(TREND_DEGREE)]) if len(np.unique(d)) > TREND_DEGREE \
        else np.zeros((len(d), 0))
    if confined is not None and confined.any() and not confined.all():
        basis = np.column_stack([basis, confined.astype(float)])  # lock-step streams: an offset of their own
    basis = basis - np.sum(w[:, None] * basis, axis=0) / np.sum(w)
    trend = np.zeros(len(y))
    fitted = np.zeros(len(values))
    for _ in range(TREND_PASSES):
        means = np.bincount(index, weights=w * (y - trend), minlength=len(values)) / weight
        fitted = isotonic_regression(means, weights=weight, increasing=True).x
        if basis.shape[1]:
            sw = np.sqrt(w)
            coef = np.linalg.lstsq(basis * sw[:, None], (y - fitted[index]) * sw, rcond=None)[0]
            trend = basis @ coef
    chi2 = float(np.sum(w * (y - fitted[index] - trend) ** 2))
    levels = len(np.unique(np.round(fitted, 6)))
    params = levels + basis.shape[1]
    if levels == 1:
        return chi2, params, 0.0
    low, high = fitted == fitted.min(), fitted == fitted.max()
    rise = (fitted.max() - fitted.min()) / np.sqrt(1 / weight[low].sum() + 1 / weight[high].sum())
    return chi2, params, float(rise)


def elevation_fit(y: np.ndarray, w: np.ndarray, d: np.ndarray, loaded: np.ndarray,
                  offsets: list[np.ndarray] | None = None) -> tuple[float, int, float, np.ndarray]:
    """Robust fit of the streams' cells under one channel count: ``y`` = a baseline (a level plus a trend in the
    distance ``d``, fitted to the cells whose in-flight reads share no bus) plus, for each ``loaded`` cell (some of
    its in-flight reads share a bus), an elevation of its own that is never negative. (loss, parameters, the largest
    elevation in standard errors, each cell's squared residual in standard errors.)

    An elevation of its own per loaded cell, not one level per load: how long a read waits for a shared bus depends
    on whether the reads sharing it finish sensing together, which depends on the page types the stride puts side by
    side, so streams with the same load sit microseconds apart (kelpie-n128g-s at medium noise: 75.8, 74.4, 73.0 and
    69.6 us at one load), and a fit that forced them level scattered 5.7x beyond their errors and named 29 channels
    for 16. What a channel count must explain is which cells rise, not by how much. One baseline for every depth:
    with no bus shared a stream's median is the same however many reads are in flight (measured on ten presets at
    medium noise: within 1.5 standard errors), and a baseline per depth would let a depth every one of whose cells
    the true channel count loads (4 channels: all streams with 8 in flight) sit on a level of its own, so a count
    that loads fewer cells would explain it as well for fewer parameters. ``offsets`` (indicator columns) give the
    deeper streams a level of their own all the same, for a serial stage in front of the buses (a host link slower
    than a channel) that slows them. The trend is the page types in flight (a stream's neighbouring
    reads are ``d`` units plus whole stripe rows apart, and the share of them crossing into the next row drifts with
    ``d``). The loss is Student's t with ROBUST_DF degrees of freedom on the residuals in standard errors
    (iteratively reweighted): one cell far off the baseline for a reason no channel count names (kelpie-n1.6t-s: one
    lock-step stream 6.6 us slow with no bus shared) costs a few units of loss, not its square, and cannot by itself
    buy a channel count that marks twenty more cells loaded. Each bounded least-squares step is scipy's BVLS."""
    x = (d - d.mean()) / max(float(np.ptp(d)), 1.0)
    columns = [np.ones_like(x), *(offsets or [])]
    if len(np.unique(d[~loaded])) > TREND_DEGREE + 2:
        columns += [x ** (k + 1) for k in range(TREND_DEGREE)]
    baseline = len(columns)
    index = np.flatnonzero(loaded)
    design = np.column_stack(columns + [np.eye(len(y))[:, i] for i in index])
    lower = np.r_[np.full(baseline, -np.inf), np.zeros(len(index))]
    weight = w.copy()
    coef = np.zeros(design.shape[1])
    for _ in range(ROBUST_PASSES):
        sw = np.sqrt(weight)
        coef = lsq_linear(design * sw[:, None], y * sw, bounds=(lower, np.inf), method="bvls").x
        z2 = w * (y - design @ coef) ** 2
        weight = w * (ROBUST_DF + 1) / (ROBUST_DF + z2)
    z2 = w * (y - design @ coef) ** 2
    loss = float(np.sum((ROBUST_DF + 1) * np.log1p(z2 / ROBUST_DF)))
    rise = coef[baseline:] * np.sqrt(w[index]) if len(index) else np.zeros(0)
    return loss, design.shape[1], float(rise.max()) if len(rise) else 0.0, z2


def second_opinion(cells: pd.DataFrame, stripe: int) -> tuple[int, float]:
    """A second reading of the streams' cells (:func:`elevation_fit`: a rise of its own in every cell a channel
    count loads, on one baseline for every depth, robust loss): the channel count it prefers and that count's
    posterior. Where it names another count than :func:`channels_from_streams`, the cells do not decide between
    them (at medium noise the monotone fit named 32 channels for 16 at 0.90 on kelpie-n1.6t-w, 29 for 16 on
    kelpie-n128g-s, 9 for 16 on kelpie-t128g-s; this reading named 16 on each, but on other drives it errs
    where the monotone fit does not), and the answer's confidence falls to DISAGREE_CONFIDENCE."""
    q = cells["q"].to_numpy(int)
    d = cells["d"].to_numpy(float)
    y = cells["median_ns"].to_numpy(float)
    se = np.sqrt(cells["se_ns"].to_numpy(float) ** 2 + (CELL_SPREAD_FLOOR * np.median(y)) ** 2)
    candidates = list(range(2, min(int(d.max()), stripe - 1) + 1)) + [stripe]
    loads = {c: np.array([(channel_load(int(a), int(b), stripe, c) or 1) > 1 for a, b in zip(q, d, strict=True)])
             for c in candidates}
    fits = {c: elevation_fit(y, 1 / se ** 2, d, loads[c]) for c in candidates}
    first = min(fits, key=lambda c: (fits[c][0] + 2 * fits[c][1], c))
    baseline = ~loads[first]
    # A chi-square of one degree of freedom has median 0.455.
    dispersion = max(1.0, float(np.median(fits[first][3][baseline])) / 0.455) if baseline.any() else 1.0
    if dispersion > 1.0:
        fits = {c: elevation_fit(y, 1 / (dispersion * se ** 2), d, loads[c]) for c in candidates}
    score = {c: f[0] + 2 * f[1] for c, f in fits.items()}
    low = min(score.values())
    weights = {c: float(np.exp(-(s - low) / 2)) for c, s in score.items()}
    best = min(weights, key=lambda c: (-weights[c], c))
    return best, weights[best] / sum(weights.values())


def serial_stage(cells: pd.DataFrame, loads: np.ndarray, stripe: int) -> tuple[bool, float]:
    """Whether one stage serves the reads one at a time in front of the buses (command processors, host link),
    and its time per read: at the streams no two of whose in-flight reads share a bus (``loads`` == 1), the
    median latency of the deepest depth against the depth below it. With nothing serial they match (each read
    has a unit and a bus of its own); a serial stage makes the deepest stream wait for it: its completions then
    come one per stage time, its median latency / depth."""
    free = cells[(loads == 1) & ~np.array([lock_step(int(a), int(b), stripe) for a, b in
                                           zip(cells["q"], cells["d"], strict=True)])]
    depths = sorted(free["q"].unique())
    if len(depths) < 2:
        return False, 0.0
    top, below = depths[-1], depths[-2]
    top_median = float(free.loc[free["q"] == top, "median_ns"].median())
    below_median = float(free.loc[free["q"] == below, "median_ns"].median())
    return top_median > SATURATION_RATIO * below_median, top_median / top


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


def channels_from_streams(cells: pd.DataFrame, stripe: int, page_bytes: int = 4096,
                          admission_ns: float = 0.0) -> ChannelReading:
    """P5 from streams of page reads, ``q`` in flight, ``d`` units apart: ``cells`` has one row per (q, d)
    with the median latency (``median_ns``), its standard error (``se_ns``) and the reads (``n``).

    Reads of units on one channel share its bus: the more in-flight reads wait for one channel's bus, the
    longer a read takes, which raises the median latency of the whole stream. Every channel count C from 2 up
    to the largest distance measured, and "no two units share a channel" (C = stripe), predicts each cell's
    load (:func:`channel_load`); each is fitted per depth as a median that never falls as the load rises plus a
    line in ``d`` (:func:`trend_isotonic_fit`: the page types in flight), scored by Akaike's criterion. The
    chi-squares are first divided by the best fit's chi-square per degree of freedom when that exceeds one
    (quasi-likelihood: the cells vary more than their standard errors say, and every model is judged against
    that spread, not against the optimistic one). The confidence is the best layout's posterior under equal
    priors. When a serial stage in front of the buses (:func:`serial_stage`) is at least as long as the
    fastest bus's page transfer and no sharing was seen, it may hide the buses: the answer then says so at a
    low confidence. Written here because it is a model selection over this probe's own design, not a library
    routine."""

    def layout(channels: int) -> dict[str, int]:
        return {"channels": int(channels), "chips_per_channel": int(-(-stripe // max(channels, 1)))}

    none = np.zeros(0, dtype=int)
    if cells.empty:
        return ChannelReading(layout(stripe), None, [], cells, none, "no stream of reads was measured", False)
    q = cells["q"].to_numpy(int)
    d = cells["d"].to_numpy(float)
    y = cells["median_ns"].to_numpy(float)
    se = np.sqrt(cells["se_ns"].to_numpy(float) ** 2 + (CELL_SPREAD_FLOOR * np.median(y)) ** 2)
    largest = int(d.max())
    candidates = list(range(2, min(largest, stripe - 1) + 1)) + [stripe]
    confined = np.array([lock_step(int(a), int(b), stripe) for a, b in zip(q, d, strict=True)])
    fits: dict[int, tuple[float, int, np.ndarray, float]] = {}
    for channels in candidates:
        load = np.array([channel_load(int(a), int(b), stripe, channels) or 1 for a, b in zip(q, d, strict=True)])
        chi2, params, z = 0.0, 0, 0.0
        for depth in np.unique(q):
            at = q == depth
            c, k, rise = trend_isotonic_fit(load[at], y[at], 1 / se[at] ** 2, d[at], confined[at])
            chi2, params, z = chi2 + c, params + k, max(z, rise)
        fits[channels] = (chi2, params, load, z)
    aic = {c: f[0] + 2 * f[1] for c, f in fits.items()}
    first = min(aic, key=lambda c: (aic[c], c))
    dispersion = max(1.0, fits[first][0] / max(len(y) - fits[first][1], 1))
    score = {c: fits[c][0] / dispersion + 2 * fits[c][1] for c in fits}
    low = min(score.values())
    weights = {c: float(np.exp(-(s - low) / 2)) for c, s in score.items()}
    total = sum(weights.values())
    ranked = sorted(weights, key=lambda c: (-weights[c], c))
    best = ranked[0]
    posterior = weights[best] / total
    confidence = posterior
    others = [{"value": layout(c), "confidence": round(weights[c] / total, 4)} for c in ranked[1:4]
              if weights[c] / total >= 1e-4]
    flat = best == stripe or fits[best][3] == 0
    load = np.ones(len(y), dtype=int) if flat else fits[best][2]
    limited, stage_ns = serial_stage(cells, load, stripe)
    if not limited:
        stage_ns = 0.0
    reading_note = f"dispersion {dispersion:.1f}x the medians' standard errors"
    if limited:
        reading_note += (f"; reads are served one at a time in front of the buses: with {int(q.max())} in flight "
                         f"one completes every {stage_ns / 1e3:.2f} us (a controller or host-link limit)")
    if hides_buses(admission_ns, page_bytes):
        reading_note += (f"; two reads issued together complete {admission_ns / 1e3:.2f} us apart on units that "
                         "share no bus (a controller admitting one command at a time)")
        stage_ns = max(stage_ns, admission_ns)
    hides = hides_buses(stage_ns, page_bytes)
    if hides and not flat:
        # Sharing seen through a serial stage: the stage spaces the reads, so the loads the fit assumes hold
        # only in part.
        confidence = min(confidence, SERIAL_FOUND_CONFIDENCE)
    if flat:
        if largest < stripe - 1:
            confidence = min(confidence, 0.5)  # channel counts beyond the distances measured look like this too
        if hides:
            confidence = min(confidence, HIDDEN_CONFIDENCE)
        note = (f"no two of the {stripe} units share a bus: streams at every distance up to {largest} units read "
                f"at the same median latency" + (" (a bus wait shorter than the serial stage would not show)"
                                                  if hides else " (one chip per channel, or transfers the host "
                                                  "link hides)") + f"; {reading_note}")
        reading = ChannelReading(layout(stripe), confidence, others, cells, none, note, False, posterior)
    else:
        abnormal = np.unique(d[load > 1]).astype(int)
        note = (f"the streams' median latency rises with the in-flight reads on one channel if there are {best} "
                f"channels (shared at distances {_listed(abnormal)}; slope {fits[best][3]:.1f} standard errors); "
                f"posterior {posterior:.2f} against the other channel counts; {reading_note}")
        reading = ChannelReading(layout(best), confidence, others, cells, abnormal, note, True, posterior)
    reading.controller_limited = bool(hides)
    reading.serial_stage_ns = float(stage_ns)
    return reading


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
