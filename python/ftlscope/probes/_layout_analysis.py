"""The analysis behind the layout probes P2 (page type), P4 (stripe width) and P5 (channel/chip layout), on
plain arrays: latency levels, the L/M/H pattern in each unit's write order, and the interval rule of seed 003
§3.2 (Jenks natural breaks, class count by silhouette, the most common interval between abnormal points).

Nothing here runs the engine; tests/test_probes_layout.py checks every function on synthetic latencies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from ..analysis.jenks import classify_series, most_common_intervals, silhouette_1d
from ..units import format_size

CELLS = {1: "slc", 2: "mlc", 3: "tlc"}


# ---- P2: latency levels and the page pattern ---------------------------------------------------------------


@dataclass(frozen=True)
class Levels:
    """One reading of per-page latencies as page types: ``centres`` of the levels kept (ascending),
    ``codes[i]`` = the level of value ``i`` (0 = lowest) or -1 for an outlier, and the confidence."""

    centres: tuple[float, ...]
    codes: np.ndarray
    confidence: float
    n_classes: int  # the Jenks class count it came from (1 = the values have a single level)

    @property
    def cell(self) -> str:
        return cell_name(len(self.centres))


def cell_name(levels: int) -> str:
    """1 level: SLC, 2: MLC (low/high pages), 3: TLC (low/medium/high); more: QLC."""
    return CELLS.get(levels, "qlc")


# Outliers within outliers (a retried read doubles, a stall adds milliseconds): classify what is left at most
# this many times again.
MAX_OUTLIER_PASSES = 2


def latency_levels(values, *, min_share: float = 0.02, merge_rel: float = 0.04,
                   merge_abs: float = 2.0, depth: int = 0) -> list[Levels]:
    """Page types from per-page read latencies, one reading per Jenks class count, best first.

    The classes of a classification become page-type levels after two clean-ups: a class holding fewer than
    ``min_share`` of the pages is not a page type (the first read into a mapping region, a page still in a
    read buffer) and its pages become outliers (-1); neighbouring classes whose centres differ by less than
    ``merge_rel`` of the lower one and ``merge_abs`` (the values' unit) are one level split by noise."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return []
    found = classify_series(x)
    if not found:  # a single latency level: every page reads alike
        return [Levels((float(np.median(x)),), np.zeros(len(x), dtype=int), one_level_sharpness(x), 1)]
    out = []
    for c in found:
        counts = c.counts()
        kept = [k for k in range(c.n_classes) if counts[k] >= max(min_share * len(x), 1)]
        groups: list[list[int]] = []
        for k in kept:
            centre = float(np.median(x[c.labels == k]))
            if groups:
                previous = float(np.median(x[np.isin(c.labels, groups[-1])]))
                if centre - previous < max(merge_rel * previous, merge_abs):
                    groups[-1].append(k)
                    continue
            groups.append([k])
        codes = np.full(len(x), -1, dtype=int)
        for level, members in enumerate(groups):
            codes[np.isin(c.labels, members)] = level
        centres = tuple(float(np.median(x[codes == level])) for level in range(len(groups)))
        if len(groups) == 1 and (codes < 0).any() and depth < MAX_OUTLIER_PASSES:
            # Outlier classes dropped and one level left: on a noisy drive the classification spent its classes
            # on the outliers (reads that met a background operation or a stall take milliseconds), so classify
            # what is left again; its levels are the page types if it finds more than one.
            inner = latency_levels(x[codes == 0], min_share=min_share, merge_rel=merge_rel, merge_abs=merge_abs,
                                   depth=depth + 1)
            if inner and len(inner[0].centres) > 1:
                nested = codes.copy()
                nested[codes == 0] = inner[0].codes
                out.append(Levels(inner[0].centres, nested, inner[0].confidence, inner[0].n_classes))
                continue
        if len(groups) == 1:
            # Merged to one level: the confidence is the share of pages on it (outliers lower it), times how
            # much narrower the level is than the gaps between page types would be (a level as wide as those
            # gaps may hide them: on a harsh drive TLC's three levels merge into one).
            confidence = float(np.mean(codes == 0)) * one_level_sharpness(x[codes == 0])
        elif len(groups) == c.n_classes:
            confidence = c.silhouette
        else:  # outliers dropped or levels merged: the silhouette of what is left
            confidence = silhouette_1d(x[codes >= 0], codes[codes >= 0])
        out.append(Levels(centres, codes, float(confidence), c.n_classes))
    out.sort(key=lambda r: -r.confidence)
    return out


# Page types of one cell differ by 15-40 % in read latency (MLC/TLC low, middle and high pages). A single level
# whose robust spread (1.4826 x MAD over the median) reaches this share could hide such levels.
PAGE_TYPE_GAP = 0.25


def one_level_sharpness(values) -> float:
    """1 for a single latency level with no spread, falling to 0 as its robust relative spread reaches
    ``PAGE_TYPE_GAP``: the confidence that one level is one page type and not several blurred by noise."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return 0.0
    median = float(np.median(x))
    spread = 1.4826 * float(np.median(np.abs(x - median))) / max(abs(median), 1e-12)
    return float(np.clip(1 - spread / PAGE_TYPE_GAP, 0.0, 1.0))


def level_letters(levels: int) -> str:
    """Letters for ``levels`` page types, lowest latency first: L; L H; L M H (a fourth level is X)."""
    return {1: "L", 2: "LH", 3: "LMH"}.get(levels, "LMHX"[:levels] + "X" * max(0, levels - 4))


def unit_index(pages, chunk_pages: int, stripe: int) -> tuple[np.ndarray, np.ndarray]:
    """For logical pages of a sequentially filled device: the unit each sits on and its place in that unit's
    write order (device-model.md: page p is on unit (p / chunk) mod stripe)."""
    p = np.asarray(pages, dtype=np.int64)
    chunk = p // chunk_pages
    unit = chunk % stripe
    k = (chunk // stripe) * chunk_pages + p % chunk_pages
    return unit, k


def unit_sequence(pages, codes, chunk_pages: int, stripe: int) -> np.ndarray:
    """The page-type code of each place in a unit's write order, by majority over the units (-1 where no
    page was classified), for places 0 .. the last one every unit reached."""
    pages = np.asarray(pages, dtype=np.int64)
    codes = np.asarray(codes)
    keep = codes >= 0
    _, k = unit_index(pages[keep], chunk_pages, stripe)
    if len(k) == 0:
        return np.zeros(0, dtype=int)
    table = pd.DataFrame({"k": k, "code": codes[keep]})
    majority = table.groupby("k")["code"].agg(lambda s: s.value_counts().index[0])
    length = int(majority.index.max()) + 1
    seq = np.full(length, -1, dtype=int)
    seq[majority.index.to_numpy()] = majority.to_numpy()
    return seq


def runs(seq, letters: str) -> str:
    """Run-length notation of a code sequence: [0, 0, 0, 0, 1, 1] -> '4L 2H'."""
    out = []
    for code in seq:
        letter = letters[code] if code >= 0 else "?"
        if out and out[-1][1] == letter:
            out[-1][0] += 1
        else:
            out.append([1, letter])
    return " ".join(f"{n}{letter}" for n, letter in out)


def smallest_period(seq, *, match: float = 0.97, max_period: int | None = None) -> int | None:
    """The smallest T such that the sequence follows one cycle of T codes (each place the majority of the
    codes seen at it) at ``match`` of its known places, T at most half the sequence (the cycle is seen at
    least twice); None if there is none."""
    found = periodic_cycle(seq, match=match, max_period=max_period)
    return None if found is None else len(found)


def periodic_cycle(seq, *, match: float = 0.97, max_period: int | None = None) -> np.ndarray | None:
    """The cycle behind :func:`smallest_period` (unknown places of it filled by majority)."""
    s = np.asarray(seq)
    known = s >= 0
    if known.sum() == 0:
        return None
    limit = len(s) // 2 if max_period is None else min(max_period, len(s) // 2)
    for t in range(1, limit + 1):
        cycle = np.full(t, -1, dtype=int)
        for phase in range(t):
            values = s[phase::t]
            values = values[values >= 0]
            if len(values):
                cycle[phase] = np.bincount(values).argmax()
        if (cycle < 0).any():
            continue
        expected = np.resize(cycle, len(s))
        if np.mean(s[known] == expected[known]) >= match:
            return cycle
    return None


# A cycle stands for a write order when it puts each page type at this share of its places at least.
TYPE_RECALL = 0.5


def render_pattern(seq, letters: str, page_size: int) -> str:
    """The L/M/H pattern of a unit's write-order sequence in device-model.md's notation: a composite pattern
    whose blocks open with a run of one type ("128KiB:L, 2M 2H"), or a short repeating one ("1L 1H", "4L 2H",
    "1L 1M 1H"), or a longer one; a sequence with no repetition is written out (its first 16 runs)."""
    found = repeating_pattern(seq, letters, page_size)
    if found is not None:
        return found
    s = _known_prefix(seq)
    return " ".join(runs(s, letters).split()[:16]) if len(s) else ""


def _known_prefix(seq) -> np.ndarray:
    """The sequence up to its last known place (unknown places are < 0); empty when none is known."""
    s = np.asarray(seq)
    return s[: len(s) - int(np.argmax(s[::-1] >= 0))] if (s >= 0).any() else s[:0]


def repeating_pattern(seq, letters: str, page_size: int) -> str | None:
    """:func:`render_pattern` where the sequence repeats (one type, a composite pattern or a cycle), None where
    it would be written out: page types repeat with a unit's write order, reads that met a retry or background
    work do not."""
    s = _known_prefix(seq)
    known = s[s >= 0]
    if len(known) == 0:
        return None
    if len(np.unique(known)) == 1:
        return letters[int(known[0])]
    short = 16
    composite = _composite(s, letters, page_size, short)
    if composite:
        return composite
    # The pattern restarts with every block (256 pages of "4L 2H" end in the middle of a cycle): look at the
    # whole sequence, then at its first block's worth.
    for part, limit in ((s, short), (s[: 2 * MIN_BLOCK_PAGES], short), (s, None)):
        cycle = periodic_cycle(part, max_period=limit)
        if cycle is not None and _explains_every_type(part, cycle):
            return runs(cycle, letters)
    return None


def _explains_every_type(seq: np.ndarray, cycle: np.ndarray) -> bool:
    """Whether the cycle puts each page type of the sequence at most of the places that have it. The cycle's
    match counts every place, so a rare level is "matched" by a cycle without it: 3 % retried reads on an SLC
    drive, a level of their own, matched a cycle of 786 places that put one of them once."""
    expected = np.resize(cycle, len(seq))
    known = seq >= 0
    return all(np.mean(expected[known & (seq == c)] == c) >= TYPE_RECALL for c in np.unique(seq[known]))


# A block holds at least this many pages: an opening run that comes back sooner is part of a short pattern.
MIN_BLOCK_PAGES = 32


def _composite(s: np.ndarray, letters: str, page_size: int, short: int) -> str | None:
    """``"<opening>:X, <pattern>"`` when the sequence opens with a run of one type longer than the short
    pattern that follows it, and that run does not come back before a block's worth of pages."""
    first = s[0]
    if first < 0:
        return None
    prefix = int(np.argmax(s != first)) if (s != first).any() else len(s)
    if prefix < 2 or prefix >= len(s):
        return None
    rest = s[prefix:]
    # The next block opens with the same run again: stop there.
    same = np.concatenate([[False], rest == first, [False]]).astype(int)
    starts, ends = np.flatnonzero(np.diff(same) == 1), np.flatnonzero(np.diff(same) == -1)
    long_runs = [a for a, b in zip(starts, ends, strict=True) if b - a >= max(2, prefix // 2)]
    if long_runs:
        rest = rest[: long_runs[0]]
        if prefix + len(rest) < MIN_BLOCK_PAGES:
            return None  # "4L 4H": the opening run is back after 8 pages
    cycle = periodic_cycle(rest, max_period=short)
    if cycle is None or len(cycle) >= prefix or len(rest) < 4 * len(cycle) or (cycle == first).all():
        return None
    return f"{format_size(prefix * page_size).replace(' ', '')}:{letters[first]}, {runs(cycle, letters)}"


def estimate_geometry(codes, *, chunk_candidates=(1, 2, 4, 8, 16, 32, 64, 128, 256),
                      min_rows: int = 3, tolerance: float = 0.02) -> tuple[int, int] | None:
    """(chunk pages, stripe width) read off a per-page type sequence alone, when P3 and P4 are not known yet.

    After a sequential fill the pages form rows of ``chunk x stripe`` pages in which every chunk repeats the
    same ``chunk`` types (every unit is at the same place of its write order), so every type change between
    a page and the page one chunk before it falls on a row's first chunk. The widest row that the sequence
    fits is taken, with the smallest chunk, if type changes were seen in at least ``min_rows`` rows; else
    None (a long run of one type, as the low-page opening of a composite pattern, hides the rows). Rows of
    one type are ambiguous (two such rows read as one twice as wide): the pattern then comes out scaled
    ("2L 1H" for "4L 2H"), with the right types and proportions."""
    x = np.asarray(codes)
    n = len(x)
    best: tuple[int, int, int] | None = None  # (row pages, -chunk, stripe)
    for c in chunk_candidates:
        if c * 2 * min_rows > n:
            break
        a, b = x[c:], x[:-c]
        known = (a >= 0) & (b >= 0)
        mismatch = np.flatnonzero(known & (a != b)) + c
        allowed = int(tolerance * len(mismatch))
        if len(mismatch) == 0:
            continue  # no type change at this distance: nothing to place rows by
        for stripe in range(n // (min_rows * c), 1, -1):
            row = c * stripe
            if len(mismatch) > -(-n // row) * c + allowed:
                continue  # a row holds at most one chunk of changes: too few rows this wide
            inside = mismatch % row < c
            if np.count_nonzero(~inside) > allowed:
                continue
            if len(np.unique(mismatch[inside] // row)) < min_rows or stripe < 4:
                break  # changes in too few rows to tell the row width (or rows too narrow to mean much)
            if best is None or (row, -c) > best[:2]:
                best = (row, -c, stripe)
            break
    if best is None:
        return None
    return -best[1], best[2]


# ---- P4/P5: the interval rule on contention per increment -------------------------------------------------


@dataclass(frozen=True)
class IntervalReading:
    """The interval rule on one classification: the abnormal positions, the most common interval between
    neighbours (counted from ``anchor``), how well that one period explains them (``fit``) and how much
    higher they are than the normal ones (``contrast``)."""

    value: int
    share: float
    confidence: float
    n_classes: int
    abnormal: np.ndarray
    contrast: float
    fit: float


def period_fit(positions, abnormal, period: int) -> float:
    """How well "abnormal exactly at the multiples of ``period``" describes the points: the share of measured
    multiples that are abnormal times the share of abnormal points that are multiples."""
    pos = np.asarray(positions)
    ab = np.asarray(abnormal)
    if period <= 0 or len(ab) == 0:
        return 0.0
    multiples = pos[pos % period == 0]
    recall = np.isin(multiples, ab).mean() if len(multiples) else 0.0
    precision = float(np.mean(ab % period == 0))
    return float(recall * precision)


def interval_readings(positions, values, *, anchor: int | None = 0, min_contrast: float = 1.2,
                      min_difference: float = 0.0, min_fit: float = 0.5) -> list[IntervalReading]:
    """Seed 003 §3.2 for every Jenks class count 2..5: the high classes are abnormal (increments where reads
    contend) and the property is the most common interval between neighbouring abnormal positions (with
    ``anchor``, increment 0, counted as abnormal: both reads on one unit).

    Contention comes in levels (two reads on one unit cost a read more; on one channel only a transfer; and
    the page types of the two reads add their own spread), so a classification may split one level or keep
    two apart. Of the sets "the top class", "the top two classes", ... (down to the classes above the most
    populated one) the one that a single period explains best (:func:`period_fit`) is taken, the highest on
    a tie. A set less than ``min_contrast`` times (and ``min_difference`` above) the normal level, or one that
    its period explains less than ``min_fit`` (scattered points: noise, not contention), gives no reading.
    Best silhouette first."""
    pos = np.asarray(positions)
    x = np.asarray(values, dtype=float)
    out = []
    for c in classify_series(x):
        counts = c.counts()
        present = [k for k in range(c.n_classes) if counts[k] > 0]
        normal = int(np.argmax(counts))
        lo = float(np.mean(x[c.labels == normal]))
        best: IntervalReading | None = None
        for j in range(1, len(present)):
            classes = present[-j:]
            if normal in classes:
                break
            mask = np.isin(c.labels, classes)
            hi = float(np.mean(x[mask]))
            contrast = hi / lo if lo > 0 else np.inf
            if contrast < min_contrast or hi - lo < min_difference:
                continue
            abnormal = np.sort(pos[mask])
            points = abnormal if anchor is None or anchor in abnormal else np.concatenate([[anchor], abnormal])
            ranked = most_common_intervals(points, top=1)
            if not ranked:
                continue
            value, share = int(round(ranked[0][0])), float(ranked[0][1])
            fit = period_fit(pos, points, value)
            if best is None or fit > best.fit + 1e-9:
                best = IntervalReading(value, share, float(c.silhouette), c.n_classes, abnormal, contrast, fit)
        if best is not None and best.fit >= min_fit:
            out.append(best)
    return out


def alternatives(readings: list[IntervalReading], chosen: int, to_value=lambda v: v) -> list[dict[str, Any]]:
    """The other values the classifications gave, each with its best confidence (the paper's Table 3)."""
    best: dict[int, float] = {}
    for r in readings:
        if r.value != chosen:
            best[r.value] = max(best.get(r.value, 0.0), r.confidence)
    return [{"value": to_value(v), "confidence": round(c, 4)} for v, c in sorted(best.items(), key=lambda i: -i[1])]


def per_increment(increments, latencies, *, min_count: int = 3) -> pd.DataFrame:
    """Median latency and count per increment (increments seen fewer than ``min_count`` times dropped)."""
    table = pd.DataFrame({"increment": np.asarray(increments), "latency": np.asarray(latencies, dtype=float)})
    per = table.groupby("increment")["latency"].agg(["median", "mean", "size"]).rename(columns={"size": "count"})
    return per[per["count"] >= min_count].sort_index()


@dataclass
class StripeReading:
    """P4's answer from pairs of concurrent reads: ``value`` (chunks), its confidence, the alternatives, the
    per-increment table and the abnormal increments; ``value`` None when no increment showed contention."""

    value: int | None
    confidence: float | None
    alternatives: list[dict[str, Any]]
    table: pd.DataFrame
    abnormal: np.ndarray
    note: str
    confirmed: bool = False
    readings: list[IntervalReading] = field(default_factory=list)


# P4: a candidate stripe width S passes when the pairs at its odd multiples (S, 3S, ...: no multiple of 2S) and
# at all its multiples are slower than the pairs in general by STRIPE_SPAN standard errors beyond the level one
# of all the widths tried reaches by chance (Bonferroni at STRIPE_ALPHA), and by MIN_STRIPE_CONTRAST. A pair's
# latency over its first read is clipped at CLIP_RATIO x the median (a stall is no slower unit).
STRIPE_ALPHA = 0.01
STRIPE_SPAN = 4.0
MIN_STRIPE_CONTRAST = 1.05
# A width whose multiples are surely slower but by less than MIN_STRIPE_CONTRAST is an answer at most this sure.
FAINT_STRIPE_CONFIDENCE = 0.5
CLIP_RATIO = 3.0
OWN_SPREADS = 4.0  # a pair is held to this many robust spreads of its own increment's median
OWN_FLOOR = 0.1


@dataclass(frozen=True)
class StripeCandidate:
    width: int
    sure: float  # how surely its odd and all multiples are slow (0..1)
    z: float  # of its odd multiples
    contrast: float  # their mean over all pairs' mean
    explained: float  # pairs at its multiples x (their mean - the others' mean)^2: how much of the rise it explains
    error: float = 0.0  # the standard error of ``contrast``
    slow: float = 0.0  # how surely its multiples are slow whatever the contrast (``sure`` before the floor)


def stripe_scores(increments: np.ndarray, values: np.ndarray) -> list[StripeCandidate]:
    """Every candidate stripe width S (2 .. the largest increment), from ``increments`` and ``values`` per
    pair. The pairs at the multiples of one width are few against all, so their mean is set against all
    pairs' (standard error from the spread of all pairs, 1.4826 x MAD). A width half the true one fails on its
    odd multiples; a multiple of the true one explains less of the rise (``explained``)."""
    inc = np.asarray(increments, dtype=np.int64)
    x = np.asarray(values, dtype=float)
    if len(x) < 8:
        return []
    x = np.minimum(x, CLIP_RATIO * float(np.median(x)))
    order = np.argsort(inc, kind="stable")
    keys, starts = np.unique(inc[order], return_index=True)
    groups = {k: _winsorised(g) for k, g in zip(keys.tolist(), np.split(x[order], starts[1:]), strict=True)}
    # The centre from the same winsorised pairs as the widths' means: against the clipped pairs' mean, which keeps
    # every stall and background operation the winsorising takes out of a width's pairs, a width was slower by
    # half its true share (harsh noise, pm981-256g: stripe 4's pairs 1.036x the clipped mean, 1.075x the
    # winsorised one, under MIN_STRIPE_CONTRAST at z 37; a width with one multiple won at 0.66).
    x = np.concatenate([groups[k] for k in keys.tolist()])
    inc = np.repeat(keys, [len(groups[k]) for k in keys.tolist()])
    centre = float(np.mean(x))
    spread = max(1.4826 * float(np.median(np.abs(x - np.median(x)))), 1e-3 * abs(centre), 1e-12)
    top = int(inc.max())
    widths = range(2, top + 1)
    threshold = float(norm.isf(STRIPE_ALPHA / max(len(widths), 1)))
    total, count = float(x.sum()), len(x)
    out = []
    for width in widths:
        odd = [groups[k] for k in range(width, top + 1, 2 * width) if k in groups]
        even = [groups[k] for k in range(2 * width, top + 1, 2 * width) if k in groups]
        if not odd:
            continue
        odd_x = np.concatenate(odd)
        all_x = np.concatenate(odd + even)
        # The error of its own mean takes its own pairs' spread when that is wider: a width whose few multiples
        # met a retried read or a stall is not "surely slower" than the stripe's thousand pairs, nor than pairs
        # in general (harsh noise, pm981-256g: the one multiple of 3885 in the window, 1.88x at z 13 against all
        # pairs' spread, 1.7 against its own).
        own = float(np.std(odd_x, ddof=1)) if len(odd_x) > 1 else float("inf")
        own_all = float(np.std(all_x, ddof=1)) if len(all_x) > 1 else float("inf")
        z_odd = (float(np.mean(odd_x)) - centre) / (max(spread, own) / np.sqrt(len(odd_x)))
        z_all = (float(np.mean(all_x)) - centre) / (max(spread, own_all) / np.sqrt(len(all_x)))
        contrast = float(np.mean(odd_x) / max(centre, 1e-12))
        slow = min(_sureness(z_odd, threshold), _sureness(z_all, threshold))
        sure = slow if contrast >= MIN_STRIPE_CONTRAST else 0.0
        rest = count - len(all_x)
        rise = float(np.mean(all_x)) - (total - float(all_x.sum())) / rest if rest else 0.0
        out.append(StripeCandidate(width, sure, z_odd, contrast, len(all_x) * rise * abs(rise),
                                   max(spread, own) / np.sqrt(len(odd_x)) / max(centre, 1e-12), slow))
    return out


def _winsorised(g: np.ndarray) -> np.ndarray:
    """One increment's pairs with each held to within OWN_SPREADS robust spreads of their own median: a pair that
    met a stall or a retried read is far above its increment's other pairs (which all share a unit or all do not),
    and one such pair among 40 lifted their mean by 5 % (kelpie-t64g-s, one unit, at medium noise: 211 chunks read
    as a stripe at 0.73 with the increment's median every pair's). CLIP_RATIO, against all pairs, cannot do this:
    a true stripe's pairs are themselves far above the rest."""
    if len(g) < 3:
        return g
    centre = float(np.median(g))
    # Not below OWN_FLOOR of the median: on a drive without noise an increment's pairs differ only by page type,
    # a spread of almost nothing that must not clip them.
    spread = max(1.4826 * float(np.median(np.abs(g - centre))), OWN_FLOOR * abs(centre))
    return np.clip(g, centre - OWN_SPREADS * spread, centre + OWN_SPREADS * spread)


def _slowest_level(passing: list[StripeCandidate], threshold: float) -> StripeCandidate:
    """The passing width that explains most of the rise, or, when other widths' pairs are surely slower still
    (pairs on one channel wait for its bus, on one unit for a whole read: a channel count can explain more of
    the rise than the stripe), the one of those that explains most, repeated."""
    best = max(passing, key=lambda c: (c.explained, -c.width))
    while True:
        # Surely slower, and by a share worth a read (on a drive without noise a tiny difference is "sure").
        slower = [c for c in passing if c.contrast - best.contrast >= (threshold + STRIPE_SPAN) * float(
            np.hypot(c.error, best.error)) and c.contrast >= MIN_STRIPE_CONTRAST * best.contrast]
        if not slower:
            return best
        best = max(slower, key=lambda c: (c.explained, -c.width))


def _sureness(z: float, threshold: float) -> float:
    """0 up to ``threshold`` standard errors (or a negative z), 1 from ``STRIPE_SPAN`` more."""
    return float(np.clip((z - threshold) / STRIPE_SPAN, 0.0, 1.0))


def stripe_from_pairs(increment, latency, first, *, min_count: int = 3,
                      one_unit_ratio: float = 1.6) -> StripeReading:
    """The stripe width from pairs of concurrent reads: ``increment`` = the chunks between the two reads,
    ``latency`` = when the later of them completed, ``first`` = when the earlier did (relative to the
    submission). Two reads of one unit queue (the pair takes about two reads), two reads of different
    units do not; so the increments where the pair is slow are the multiples of the stripe width.

    On ``latency / first`` per pair (page types cancel), of the widths whose multiples are surely slower than
    the other increments (:func:`stripe_scores`) the smallest at the slowest level; its confidence how surely,
    less how surely a rival at that level (no multiple of it) is (the paper read the interval between the
    abnormal points of a Jenks classification, which noise scatters)."""
    table = per_increment(increment, latency, min_count=min_count)
    increment = np.asarray(increment, dtype=np.int64)
    ratio = np.asarray(latency, dtype=float) / np.maximum(np.asarray(first, dtype=float), 1.0)
    counted = np.isin(increment, table.index.to_numpy()) & (increment > 0)
    if table.empty or not counted.any():
        return StripeReading(None, None, [], table, np.zeros(0, dtype=int), "no increment was measured often enough")
    inc = table.index.to_numpy(np.int64)
    inc = inc[inc > 0]
    scores = stripe_scores(increment[counted], ratio[counted])
    passing = [c for c in scores if c.sure > 0.0 and c.explained > 0]
    pair_ratio = float(np.median(np.asarray(latency, dtype=float)) /
                       max(np.median(np.asarray(first, dtype=float)), 1.0))
    single = None
    if passing:
        best = _slowest_level(passing, float(norm.isf(STRIPE_ALPHA / max(len(scores), 1))))
        if len(inc[inc % best.width == 0]) < 2 and pair_ratio >= one_unit_ratio:
            # One slow increment, where every pair already queues (one unit): a unit queue would make every
            # increment slow, so that one is noise (a 1-unit drive at medium noise read 570 at 0.50 here).
            single, passing = best, []
    if passing:
        first = max(passing, key=lambda c: (c.explained, -c.width))
        best = _slowest_level(passing, float(norm.isf(STRIPE_ALPHA / max(len(scores), 1))))
        # A rival: a passing width that is neither a multiple nor a divisor of the best (multiples of the stripe
        # are slow too; a divisor, a channel count, holds the stripe's multiples), nor a multiple of a slower
        # level's width passed over (a channel's multiples).
        # A divisor that passes is a channel count (pairs on one channel wait for its bus): its multiples are slow
        # for that reason, not as rivals.
        divisors = [c.width for c in passing if c.width < best.width and best.width % c.width == 0]
        rivals = sorted((c for c in passing if c.width % best.width and best.width % c.width and
                         (first.width == best.width or c.width % first.width) and
                         all(c.width % d for d in divisors)), key=lambda c: -c.explained)
        rival = min(rivals[0].explained / max(best.explained, 1e-12), 1.0) if rivals else 0.0
        confidence = best.sure * (1.0 - rival)
        abnormal = inc[inc % best.width == 0]
        # Confirmed once seen twice (the stripe width and a multiple): one slow increment alone may be noise.
        confirmed = len(abnormal) >= 2
        others = [{"value": int(c.width), "confidence": round(best.sure * min(c.explained / best.explained, 1.0), 4)}
                  for c in rivals[:3]]
        note = "" if best.width == first.width else (f"; pairs at multiples of {first.width} are slow by less (a "
                                                      f"channel: its bus)")
        return StripeReading(int(best.width), float(confidence), others, table, abnormal,
                             f"pairs at multiples of {best.width} chunks ({_listed(abnormal)}) {best.contrast:.2f}x "
                             f"slower against the pair's first read than pairs in general (z {best.z:.1f} on the odd "
                             f"multiples){note}", confirmed=confirmed)
    # No contrast between increments: either every pair queues on one unit (one unit, stripe width 1) or
    # none does within the increments measured.
    if pair_ratio >= one_unit_ratio:
        confidence = min(1.0, pair_ratio - 1.0)
        others, aside = [], ""
        if single is not None:
            # Half what two slow multiples would have confirmed stands against it.
            confidence *= 1.0 - 0.5 * single.sure
            others = [{"value": int(single.width), "confidence": round(0.5 * single.sure, 4)}]
            aside = (f"; pairs {single.width} chunks apart, the only multiple of {single.width} measured, are "
                     f"{single.contrast:.2f}x slower still (z {single.z:.1f}): one increment, taken for noise")
        return StripeReading(1, float(confidence), others, table, table.index.to_numpy(),
                             f"every pair queues: the later read completes {pair_ratio:.2f}x after the earlier at "
                             f"every increment (one unit){aside}", confirmed=True)
    faint = [c for c in scores if c.slow > 0.0 and c.explained > 0 and c.contrast > 1.0]
    if faint:
        # Multiples surely slower, by less than MIN_STRIPE_CONTRAST: on a drive without noise too small to be a
        # unit's queue, on a noisy one what is left of it once both reads' noise is added (harsh noise,
        # optane-like: stripe 8's pairs 1.022x at z 7.2, 6 us of a queued read under 10 us of host jitter). Said
        # as an unsure answer, never above FAINT_STRIPE_CONFIDENCE, instead of no answer (or a width that one
        # stalled increment made slow).
        best = max(faint, key=lambda c: (c.explained, -c.width))
        abnormal = inc[inc % best.width == 0]
        confidence = FAINT_STRIPE_CONFIDENCE * best.slow * (best.contrast - 1.0) / (MIN_STRIPE_CONTRAST - 1.0)
        others = [{"value": int(c.width), "confidence": round(FAINT_STRIPE_CONFIDENCE * c.slow * min(
            c.explained / best.explained, 1.0) * (c.contrast - 1.0) / (MIN_STRIPE_CONTRAST - 1.0), 4)}
                  for c in sorted(faint, key=lambda c: -c.explained)
                  if c.width % best.width and best.width % c.width][:3]
        return StripeReading(int(best.width), float(min(confidence, FAINT_STRIPE_CONFIDENCE)), others, table,
                             abnormal,
                             f"pairs at multiples of {best.width} chunks ({_listed(abnormal)}) only "
                             f"{best.contrast:.3f}x slower against the pair's first read than pairs in general "
                             f"(z {best.z:.1f} on the odd multiples), "
                             f"under the {MIN_STRIPE_CONTRAST:.2f}x of a unit's queue: unsure")
    return StripeReading(None, None, [], table, np.zeros(0, dtype=int),
                         f"no increment up to {int(table.index.max())} chunks slows a pair down")


@dataclass
class ChannelReading:
    """P5's answer: the layout, its confidence and alternatives, the per-distance table, the abnormal
    distances; ``found`` is False when no distance showed bus contention."""

    layout: dict[str, int]
    confidence: float | None
    alternatives: list[dict[str, Any]]
    table: pd.DataFrame
    abnormal: np.ndarray
    note: str
    found: bool
    posterior: float | None = None  # P5 from streams: the best layout's posterior
    # P5 from streams: a serial stage in front of the buses (controller, host link) long enough to hide them,
    # and its time per read (0 when none was seen).
    controller_limited: bool = False
    serial_stage_ns: float = 0.0
    # P5 from pairs: the layout rests on a drop of the close share under MIN_DEPLETION (a spread that hides most of
    # the bus wait), so its confidence is capped.
    weak: bool = False


def channels_from_gaps(distance, gap, stripe: int, *, min_count: int = 3) -> ChannelReading:
    """P5 from pairs of concurrent reads of two units of one stripe row (same place in both units' write
    order, so the same page type): ``distance`` = units between them, ``gap`` = how long after the first the
    second completed. Two units on one channel share its bus, so the second transfer waits for the first:
    the gap is a page transfer on the bus, against a transfer on the host link otherwise. Units u and u'
    share a channel when u - u' is a multiple of the channel count (unit u is on channel u mod channels);
    chips per channel = stripe / channels, rounded up."""
    table = per_increment(distance, gap, min_count=min_count)

    def layout(channels: int) -> dict[str, int]:
        return {"channels": int(channels), "chips_per_channel": int(-(-stripe // max(channels, 1)))}

    none = np.zeros(0, dtype=int)
    if table.empty:
        return ChannelReading(layout(stripe), None, [], table, none, "no distance was measured often enough", False)
    readings = interval_readings(table.index.to_numpy(), table["median"].to_numpy(), min_contrast=1.2,
                                 min_difference=500.0)
    if not readings:
        return ChannelReading(layout(stripe), 0.5, [], table, none,
                              f"no two of the {stripe} units share a bus: every distance up to "
                              f"{int(table.index.max())} units gives the same gap (one chip per channel, or "
                              "transfers the host link hides)", False)
    best = readings[0]
    note = (f"{best.n_classes} classes; the second read of a pair completes {best.contrast:.2f}x later at unit "
            f"distances {_listed(best.abnormal)}; most common interval {best.value} ({best.share:.0%})")
    return ChannelReading(layout(best.value), best.confidence, alternatives(readings, best.value, layout), table,
                          best.abnormal, note, True)


def channel_load(q: int, distance: int, stripe: int, channels: int) -> int | None:
    """Reads in flight in a stream of reads ``distance`` units apart, ``q`` at a time: the units are
    ``0, d, 2d, ...`` (mod the stripe); one plus the pairs of them on one channel (unit u is on channel u mod
    channels): the wait for a bus grows faster than the reads sharing it. None when two of them are one unit
    (the unit queue, not the bus, would show)."""
    units = [(j * distance) % stripe for j in range(q)]
    if len(set(units)) < q:
        return None
    counts = np.bincount(np.asarray(units) % channels)
    return int(np.sum(counts * (counts - 1) // 2)) + 1


def _listed(values, limit: int = 6) -> str:
    v = [int(x) for x in values]
    return ", ".join(map(str, v[:limit])) + (", ..." if len(v) > limit else "")

