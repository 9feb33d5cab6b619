"""Boundaries that recur at a power-of-two size, found by levels (P1's pages, P3's chunks) on noisy drives.

A sweep reads a pair of neighbours (two sectors, two pages) at every position; where a boundary of the
structure probed falls between them, the pair costs something else. Position ``i`` (in sweep steps) has the
boundary level ``k`` = the largest power of two dividing ``i + 1`` (level 0: no boundary of two steps or more
falls there). Every multiple of the true size ``S`` is a boundary, so every level from ``log2(S / step)`` up
differs from level 0 and no level below it does. Each level is tested against level 0 over all its reads
(trimmed means, Yuen's test): trimmed, because on a noisy drive a read that met a retry, a background operation
or a firmware stall costs many times a read; levels, because they pool every read of a boundary kind (Jenks
classes of single positions, the paper's method, split on such outliers). Rounds go on while a level is
neither clearly different nor clearly alike (the paper's repetitions, as many as the noise needs).

Written here because it is this probe family's own test design; the statistics are scipy's.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import trim_mean, ttest_ind

# A level differs from level 0 for sure from Z_SURE standard errors, not at all up to Z_NULL.
Z_NULL, Z_SURE = 2.0, 6.0
# Share cut from each end of a level's reads before their mean (stalls, retries, background operations).
TRIM = 0.2
Z_CAP = 1e6  # a z-score of identical reads
ROUNDING = 1e-12  # a shift this small against the values is floating-point rounding, no shift


def boundary_levels(index, top: int) -> np.ndarray:
    """The boundary level of each sweep step ``index`` (0-based): log2 of the largest power of two dividing
    ``index + 1``, capped at ``top``."""
    v = np.asarray(index, dtype=np.int64) + 1
    levels = np.full(v.shape, top, dtype=int)
    nonzero = v != 0  # step -1 + 1 = 0 (LBA 0, for a family counted before the read) is a boundary of every size
    levels[nonzero] = np.minimum(np.log2(v[nonzero] & -v[nonzero]).astype(int), top)
    return levels


@dataclass(frozen=True)
class LevelTest:
    """One boundary level against level 0: the size it stands for, the median shift of the relative value
    and of the raw one (ns), its z-score and the reads behind it."""

    size: int
    shift: float
    shift_ns: float
    z: float
    reads: int
    pooled: bool = False  # this level and every larger one together (few reads reach the large levels)
    error: float = 0.0  # the standard error of ``shift`` (Yuen's: winsorised spreads)


def level_tests(index, relative, raw_ns, step: int, top: int) -> list[LevelTest]:
    """Every level 1..``top`` against level 0 (``step`` bytes per sweep step): each level alone, then each
    level pooled with the larger ones (``pooled``). The shift is the difference of trimmed means and ``z`` is
    Yuen's t (scipy's ``ttest_ind`` with ``trim``): robust to the reads that met a stall or a background operation
    like a median, but smooth where a median jumps (a mixture of low and high pages flips a median between them)."""
    levels = boundary_levels(index, top)
    rel = np.asarray(relative, dtype=float)
    raw = np.asarray(raw_ns, dtype=float)
    base = levels == 0
    if base.sum() < 2 or len(rel) == 0:
        return []
    out = []
    for pooled in (False, True):
        for k in range(1, top + 1):
            at = levels >= k if pooled else levels == k
            if at.sum() < 2:
                continue
            shift = float(trim_mean(rel[at], TRIM) - trim_mean(rel[base], TRIM))
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                # Reads of a noise-free drive are identical: no spread, an infinite t (kept finite below).
                warnings.simplefilter("ignore", RuntimeWarning)
                z = float(ttest_ind(rel[at], rel[base], equal_var=False, trim=TRIM).statistic)
            z = float(np.clip(z, -Z_CAP, Z_CAP)) if not np.isnan(z) else (
                0.0 if shift == 0 else float(np.sign(shift) * Z_CAP))
            if abs(shift) <= ROUNDING * max(float(np.max(np.abs(rel))), 1.0):
                # Identical reads (a noise-free drive) whose means differ by rounding alone: a spread of 1e-17
                # made a shift of 2e-16 a z of -33 (kelpie-t64g-i's P3, "one page" at confidence 0).
                shift, z = 0.0, 0.0
            error = float(np.hypot(_trimmed_error(rel[at]), _trimmed_error(rel[base])))
            out.append(LevelTest(step << k, shift, float(trim_mean(raw[at], TRIM) - trim_mean(raw[base], TRIM)),
                                 z, int(at.sum()), pooled, error))
    return out


def _trimmed_error(x: np.ndarray) -> float:
    """The standard error of a trimmed mean: the winsorised standard deviation / ((1 - 2 TRIM) sqrt(n))."""
    low, high = np.quantile(x, [TRIM, 1 - TRIM])
    return float(np.std(np.clip(x, low, high), ddof=1)) / ((1 - 2 * TRIM) * np.sqrt(len(x)))


def toward(tests: list[LevelTest], direction: int) -> list[LevelTest]:
    """The tests with every level that moves against ``direction`` (+1: costs more, -1: costs less) made alike
    (z 0): a structure that makes a pair cheaper across its boundary is not shown by a boundary that makes it
    dearer (a block's or a mapping region's)."""
    return [t if np.sign(t.shift) == direction else replace(t, z=0.0) for t in tests]


def strength(z: float) -> float:
    """How surely a level differs from level 0: 0 up to ``Z_NULL`` standard errors, 1 from ``Z_SURE``."""
    return float(np.clip((abs(z) - Z_NULL) / (Z_SURE - Z_NULL), 0.0, 1.0))


def differs(test: LevelTest, floor_rel: float, floor_ns: float) -> float:
    """:func:`strength`, or 0 when the shift is under the floors (too small to be the structure probed)."""
    return strength(test.z) if abs(test.shift) >= floor_rel and abs(test.shift_ns) >= floor_ns else 0.0


def decide(tests: list[LevelTest], floor_rel: float, floor_ns: float) -> tuple[int | None, float, list[dict]]:
    """The size: the smallest level that differs from level 0 (alone, and pooled with every larger one: every
    multiple of the size is a boundary too) while no smaller level does. Its confidence is how surely both
    differ times how surely no level below does (a smaller size whose boundaries were missed); the other sizes
    with a score are the alternatives. None when no level differs."""
    single = [t for t in tests if not t.pooled]
    pooled = {t.size: t for t in tests if t.pooled}
    scores = []
    for i, t in enumerate(single):
        above = min(differs(t, floor_rel, floor_ns), differs(pooled.get(t.size, t), floor_rel, floor_ns))
        below = min((1.0 - differs(u, floor_rel, floor_ns) for u in single[:i]), default=1.0)
        scores.append((t.size, above * below))
    scores.sort(key=lambda s: -s[1])
    if not scores or scores[0][1] <= 0.0:
        return None, 0.0, []
    best, confidence = scores[0]
    alternatives = [{"value": size, "confidence": round(score, 4)} for size, score in scores[1:] if score > 0.0]
    return best, confidence, alternatives


def none_differs(tests: list[LevelTest], floor_rel: float, floor_ns: float) -> float:
    """How surely no level differs from level 0 (every boundary of the step is one of the structure)."""
    return min((1.0 - differs(t, floor_rel, floor_ns) for t in tests), default=0.0)


def power(tests: list[LevelTest], effect: float) -> float:
    """How surely a boundary effect of ``effect`` (in the relative value) would have shown, on average over the
    sizes looked for (each alike likely): per size, 1 when it would stand ``Z_SURE`` standard errors out on its
    level alone, less as the noise grows. "No level differs" means "no structure" only as far as this goes.
    Each level alone, not the levels pooled from the first: a structure of size ``S`` is found on level ``S``
    alone (:func:`decide`), which has a quarter of the first's reads at four times the step, half at twice; the
    pooled-from-the-first reads half of them at boundaries that are not the structure's (harsh noise on
    consumer-tlc-hmb, 16 KiB chunks: the pooled levels made "one page" sure at 0.95, while the levels alone
    would have shown a chunk with 0.66 on average). The average, not the weakest: the largest sizes' few reads
    alone would keep every "no structure" unsure at medium noise (kelpie-n500g-s: 0.71 at 512 KiB, 0.96 on
    average, after 12 rounds)."""
    single = [t for t in tests if not t.pooled]
    if not single:
        return 0.0
    return float(np.mean([float(np.clip(effect / (Z_SURE * t.error), 0.0, 1.0)) if t.error > 0 else 1.0
                          for t in single]))


def unclear(tests: list[LevelTest], value: int | None) -> bool:
    """A test the answer rests on (the levels up to ``value``, pooled or alone; every pooled level when there
    is no answer) is between "alike" and "surely different": more rounds would settle it."""
    relevant = [t for t in tests if (t.pooled and value is None) or (value is not None and t.size <= value)]
    return any(Z_NULL < abs(t.z) < Z_SURE for t in relevant)


def listed(tests: list[LevelTest], size_name) -> str:
    return "; ".join(f"{size_name(t.size)} {t.shift_ns / 1e3:+.1f} us (z {t.z:+.1f})" for t in tests if not t.pooled)
