"""P1 page size (seed 003 §3.1, F1_pushRead): two-sector reads pushed across offsets in sector steps.

A two-sector read that straddles a page boundary needs two pages. The paper reads it alone and sees it cost
more, which holds when both pages sit on one unit (inside a chunk). When the two pages sit on two units that
work in parallel (one-page chunks), the straddling read costs about what a one-page read costs, and a lone
read shows no boundary at all. So each position is read twice:

- ``lone``: the paper's two-sector read at offset x, one at a time;
- ``pair``: the same two sectors as two one-sector reads issued together (one io_uring batch of two).

Two sectors of one page read separately cost one extra page read (the page is read twice, on one unit);
two sectors of different pages cost what the two-sector read costs (the same two pages, the same
parallelism). ``extra = pair - lone`` is therefore a page read wherever x and x + 1 sector share a page, and
about zero where a page boundary falls between them, whatever the chunk layout.

On a drive with a read buffer the first read of a page is the only one that reaches flash: there ``lone``
spikes where the sweep first touches a page (once per page) while ``pair`` is all buffer hits, so ``extra``
dips once per page there instead.

Jenks classifies ``extra`` in units of the lone read (an extra low page and an extra high page then weigh
alike); the abnormal points are the classes on the smaller side of the widest gap between class means (the
paper's "smaller class" when there are two), and the page size is the most common interval between them. A
reading counts only if its abnormal points stand ``MIN_SEPARATION`` of a lone read (and ``MIN_SEPARATION_NS``)
apart from the rest and recur regularly (``MIN_SHARE`` of the intervals). When two sectors read separately
never cost more than together, no two sectors share a page: the page is one sector (a 4Kn drive with 4 KiB
pages).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import plots
from ..units import format_size
from ._read_common import (
    Evictor,
    MiB,
    areas,
    read_workload,
    trace,
    unit_interval,
    warm_region,
)
from .base import REFILLED, Answer, Probe

SWEEP = 128 << 10  # bytes swept per round: four boundaries of a 32 KiB page, 32 of a 4 KiB one
ROUND_STRIDE = 16 * MiB  # each round sweeps a fresh region (other pages, other page types)
# The abnormal points must differ from the rest by at least this share of a lone read and this many ns (an
# extra page read is most of a lone read, unless a fixed penalty for the read's size dwarfs it).
MIN_SEPARATION = 0.05
MIN_SEPARATION_NS = 2_000
# The largest page looked for: a quarter of a sweep, so every round crosses four of its boundaries.
MAX_PAGE = SWEEP // 4
# A boundary level differs from the baseline for sure from Z_SURE standard errors, not at all up to Z_NULL.
Z_NULL, Z_SURE = 2.0, 6.0
# Two rounds at least; more while a level is unclear (between Z_NULL and Z_SURE: more reads settle it, the
# paper's repetitions where the drive is noisy), at most MAX_ROUNDS (a round is 1024 small reads).
MIN_ROUNDS = 2
MAX_ROUNDS = 16


def measure_round(ctx, round_index: int) -> pd.DataFrame:
    """One sweep of ``SWEEP`` bytes in sector steps: four engine runs (lone reads at even and odd sectors,
    sector pairs at even and odd sectors) over one fresh region."""
    sector = ctx.logical_block
    area_start, area_length = areas(ctx)["sweeps"]
    base = area_start + (round_index * ROUND_STRIDE) % max(area_length - ROUND_STRIDE, ROUND_STRIDE)
    if round_index == 0:
        # Pages another probe read may still sit in a read buffer: let it drop them first.
        Evictor(ctx, max(4096, sector)).settle(ctx)
    warm_region(ctx, base + SWEEP + 64 * 1024, "P1 warm translation")
    lone: dict[int, int] = {}
    pair: dict[int, int] = {}
    for shift in (0, sector):
        wl = read_workload(start=base + shift, length=SWEEP, size=2 * sector, ops=SWEEP // (2 * sector))
        t = trace(ctx, wl, f"P1 round {round_index} two-sector reads from +{shift}")
        for offset, latency in zip(t["offset_bytes"].to_numpy(np.int64), t["latency_ns"].to_numpy(np.int64),
                                   strict=True):
            lone[int(offset) - base] = int(latency)
    for shift in (0, sector):
        wl = read_workload(start=base + shift, length=SWEEP, size=sector, ops=SWEEP // sector, batch=2)
        t = trace(ctx, wl, f"P1 round {round_index} sector pairs from +{shift}")
        # The trace lists requests as they complete: find each pair by its offset, not by its row.
        first = (t["offset_bytes"].to_numpy(np.int64) - (base + shift)) // (2 * sector) * (2 * sector) + shift
        slowest = pd.Series(t["latency_ns"].to_numpy(np.int64)).groupby(first).agg(["max", "size"])
        for position, row in slowest.iterrows():
            if row["size"] == 2:
                pair[int(position)] = int(row["max"])
    positions = sorted(set(lone) & set(pair))
    return pd.DataFrame({
        "round": round_index,
        "base": base,
        "position": positions,
        "lone_ns": [lone[p] for p in positions],
        "pair_ns": [pair[p] for p in positions],
    })


def boundary_levels(positions, sector: int, top: int) -> np.ndarray:
    """For each sweep position x: the level k of the boundary between its two sectors, 2^k the largest power of
    two dividing ``(x + sector) / sector`` (capped at ``top``): level 0 = the two sectors share every page of
    two sectors or more (a baseline), level k = a boundary of pages of ``sector * 2^k`` bytes falls between
    them, not one of ``sector * 2^(k+1)``."""
    v = np.asarray(positions, dtype=np.int64) // sector + 1
    return np.minimum(np.log2(v & -v).astype(int), top)


@dataclass(frozen=True)
class LevelTest:
    """One boundary level against the baseline: the page size it stands for, the robust shift of ``extra``
    (in lone reads), its z-score and how many reads are behind it."""

    size: int
    shift: float
    shift_ns: float
    z: float
    reads: int


def level_tests(table: pd.DataFrame, sector: int) -> list[LevelTest]:
    """Every boundary level from two sectors to ``MAX_PAGE`` against the baseline (level 0): the median of
    ``extra`` relative to the position's lone read, over every read of the level, against the baseline's, in
    standard errors of a median (1.2533 x the pooled robust spread / sqrt(reads)). Medians, because a read that
    met a retry, a background operation or a firmware stall costs tens of times a read on a noisy drive."""
    top = int(np.log2(MAX_PAGE // sector))
    levels = boundary_levels(table["position"].to_numpy(np.int64), sector, top)
    rel = table["relative"].to_numpy(float)
    extra = table["extra_ns"].to_numpy(float)
    medians = {k: float(np.median(rel[levels == k])) for k in np.unique(levels)}
    residual = rel - np.array([medians[k] for k in levels])
    spread = max(1.4826 * float(np.median(np.abs(residual))), 1e-9)
    base = levels == 0
    if not base.any():
        return []
    out = []
    for k in range(1, top + 1):
        at = levels == k
        if not at.any():
            continue
        se = 1.2533 * spread * np.sqrt(1 / at.sum() + 1 / base.sum())
        shift = medians[k] - medians[0]
        out.append(LevelTest(sector << k, shift, float(np.median(extra[at]) - np.median(extra[base])), shift / se,
                             int(at.sum())))
    return out


def strength(z: float) -> float:
    """How surely a level differs from the baseline: 0 up to ``Z_NULL`` standard errors, 1 from ``Z_SURE``."""
    return float(np.clip((abs(z) - Z_NULL) / (Z_SURE - Z_NULL), 0.0, 1.0))


def decide(tests: list[LevelTest], floor_rel: float, floor_ns: float) -> tuple[int | None, float, list[dict]]:
    """The page size: the smallest level from which every larger level differs from the baseline (every
    multiple of the page is a page boundary), by at least the floors. Its confidence is how surely the weakest
    of those levels differs times how surely the levels below it do not (a smaller page whose boundaries were
    missed); candidates whose levels are unclear are the alternatives."""
    def differs(t: LevelTest) -> float:
        big = abs(t.shift) >= floor_rel and abs(t.shift_ns) >= floor_ns
        return strength(t.z) if big else 0.0

    scores = []
    for i, t in enumerate(tests):
        above = min(differs(u) for u in tests[i:])
        below = min((1.0 - differs(u) for u in tests[:i]), default=1.0)
        scores.append((t.size, above * below))
    scores.sort(key=lambda s: -s[1])
    if not scores or scores[0][1] <= 0.0:
        return None, 0.0, []
    best, confidence = scores[0]
    alternatives = [{"value": size, "confidence": round(score, 4)} for size, score in scores[1:] if score > 0.0]
    return best, confidence, alternatives


def unclear(tests: list[LevelTest]) -> bool:
    """A level between "no difference" and "a sure one": more rounds would settle it."""
    return any(Z_NULL < abs(t.z) < Z_SURE for t in tests)


def analyse(raw: pd.DataFrame, sector: int) -> Answer:
    """The page size from ``extra = pair - lone`` at each sweep position, grouped by the page boundaries that
    could fall between the two sectors (:func:`level_tests`)."""
    table = raw.assign(extra_ns=raw["pair_ns"] - raw["lone_ns"])
    # In units of the lone read at that position (its median over rounds): an extra page read is close to 1
    # whatever the page's type (low and high pages differ by tens of microseconds).
    lone_at = table.groupby("position")["lone_ns"].transform("median").to_numpy(float)
    table["relative"] = table["extra_ns"].to_numpy(float) / np.maximum(lone_at, 1.0)
    lone = float(np.median(table["lone_ns"])) if len(table) else 0.0
    tests = level_tests(table, sector)
    value, confidence, alternatives = decide(tests, MIN_SEPARATION, MIN_SEPARATION_NS)
    table["abnormal"] = False
    listed = "; ".join(f"{format_size(t.size)} {t.shift_ns / 1e3:+.1f} us (z {t.z:+.1f})" for t in tests)
    rounds = int(table["round"].nunique()) if "round" in table else 1
    if value is None:
        extra = table.groupby("position")["extra_ns"].median().to_numpy(float)
        if len(extra) and float(np.percentile(np.abs(extra), 90)) < max(MIN_SEPARATION_NS, MIN_SEPARATION * lone):
            # Two sectors read separately never cost a page read more than together: no two share a page.
            return Answer(sector, None, "two sectors read separately never cost a page read more than both "
                                        "together: every sector boundary is a page boundary", raw=table)
        return Answer(None, 0.0, f"no page boundary up to {format_size(MAX_PAGE)} stands out in {rounds} rounds "
                                 f"(two sectors read apart against together, by the boundary between them: {listed}): "
                                 "the page is larger, or reads of one page and of two cost the same here",
                      raw=table)
    top = int(np.log2(MAX_PAGE // sector))
    table["abnormal"] = boundary_levels(table["position"].to_numpy(np.int64), sector, top) >= int(
        np.log2(value // sector))
    evidence = (f"{rounds} rounds of two sectors read apart against together: where a boundary of "
                f"{format_size(value)} (or a multiple) falls between them the difference moves against sectors of "
                f"one page (median shifts by boundary: {listed}), and no boundary of a smaller size does")
    return Answer(value, unit_interval(confidence), evidence, alternatives=alternatives,
                  extra={"levels": {int(t.size): round(float(t.z), 2) for t in tests}}, raw=table)


def figure(answer: Answer, directory: Path) -> Path:
    """Latency against the offset of the two sectors (the paper's F1_pushRead plot), with the offsets where
    a page boundary falls between the two sectors marked."""
    table = answer.raw
    mean = table.groupby("position")[["lone_ns", "pair_ns", "extra_ns"]].median().sort_index()
    x = mean.index.to_numpy() / 1024
    fig, ax = plots.figure("P1 page size: two-sector reads pushed across offsets",
                           "offset of the two sectors in the swept region (KiB)", "latency (us)")
    ax.plot(x, plots.microseconds(mean["lone_ns"]), marker=".", linewidth=0.8, label="two-sector read, alone")
    ax.plot(x, plots.microseconds(mean["pair_ns"]), marker=".", linewidth=0.8,
            label="its two sectors as two reads issued together")
    ax.plot(x, plots.microseconds(mean["extra_ns"]), marker=".", linewidth=0.8, color="tab:grey",
            label="difference (an extra page read when both sectors share a page)")
    if "abnormal" in table and answer.value:
        marked = np.sort(table.loc[table["abnormal"], "position"].unique())
        ax.scatter(marked / 1024, plots.microseconds(mean.loc[marked, "extra_ns"]), color="tab:red", zorder=5,
                   s=30, label=f"abnormal: a page boundary between the sectors (every {format_size(answer.value)})")
    return plots.save(fig, directory, "P1_page_size",
                      "A two-sector read pushed across offsets, against its two sectors read as two requests issued "
                      "together: the offsets where they differ (red) put a page boundary between the sectors, so "
                      "their spacing is the page size.")


def run(ctx, known, directory: Path) -> Answer:
    sector = ctx.logical_block
    frames: list[pd.DataFrame] = []
    answer: Answer | None = None
    for round_index in range(MAX_ROUNDS):
        frames.append(measure_round(ctx, round_index))
        raw = pd.concat(frames, ignore_index=True)
        answer = analyse(raw, sector)
        answer.rounds = round_index + 1
        if round_index + 1 >= MIN_ROUNDS and not unclear(level_tests(answer.raw, sector)):
            break  # every boundary level either differs surely or not at all: more rounds would not change it
    assert answer is not None
    answer.figures.append(figure(answer, directory))
    return answer


PROBES = [Probe("P1", "page size", REFILLED, (), run, unit="bytes")]
