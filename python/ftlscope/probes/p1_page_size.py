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

Every sweep goes from high to low offsets and the two reads of a pair are issued second sector first, so no read
starts where the read before it ended: a drive that serves a forward stream from its page register or read-ahead
(a sequential sweep is one) would otherwise serve every read but a page's first from there and show 512 B.

On a drive with a read buffer the first read of a page is the only one that reaches flash: there ``lone``
spikes where the sweep first touches a page (its last two sectors, once per page) while ``pair`` is all buffer
hits, so ``extra`` dips once per page there instead.

Jenks classifies ``extra`` in units of the lone read (an extra low page and an extra high page then weigh
alike); the abnormal points are the classes on the smaller side of the widest gap between class means (the
paper's "smaller class" when there are two), and the page size is the most common interval between them. A
reading counts only if its abnormal points stand ``MIN_SEPARATION`` of a lone read (and ``MIN_SEPARATION_NS``)
apart from the rest and recur regularly (``MIN_SHARE`` of the intervals). When two sectors read separately
never cost more than together, no two sectors share a page: the page is one sector (a 4Kn drive with 4 KiB
pages).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import plots
from ..units import format_size
from . import _boundary_levels as bl
from ._read_common import (
    Evictor,
    MiB,
    areas,
    descending,
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
# Two rounds at least; more while a level is unclear (between Z_NULL and Z_SURE: more reads settle it, the
# paper's repetitions where the drive is noisy), at most MAX_ROUNDS (a round is 1024 small reads).
MIN_ROUNDS = 2
MAX_ROUNDS = 16  # P3 sweeps the regions after the first 16


def round_base(ctx, round_index: int) -> int:
    """Where round ``round_index`` sweeps: a fresh region each, wrapping round on a small device; MAX_PAGE into
    it, so that each descending walk's lead-in read (:func:`measure_round`) falls in the region too."""
    area_start, area_length = areas(ctx)["sweeps"]
    return area_start + (round_index * ROUND_STRIDE) % max(area_length - ROUND_STRIDE, ROUND_STRIDE) + MAX_PAGE


def measure_round(ctx, round_index: int) -> pd.DataFrame:
    """One sweep of ``SWEEP`` bytes in sector steps: four engine runs (lone reads at even and odd sectors,
    sector pairs at even and odd sectors) over one fresh region, each from high to low offsets (no read continues
    the one before: :func:`._read_common.descending`)."""
    sector = ctx.logical_block
    base = round_base(ctx, round_index)
    if round_index == 0:
        # Pages another probe read may still sit in a read buffer: let it drop them first.
        Evictor(ctx, max(4096, sector)).settle(ctx)
    warm_region(ctx, base + SWEEP + 64 * 1024, "P1 warm translation")
    lone: dict[int, int] = {}
    pair: dict[int, int] = {}
    for shift in (0, sector):
        # From high to low: a strided walk reads its start first, then from the top down, so the walk starts one
        # read below the sweep (a lead-in read, dropped below) and then covers it from the top to x = 0 (on a
        # drive with a read buffer the first read of every page is then its last two sectors).
        step = 2 * sector
        wl = read_workload(start=base + shift - step, length=SWEEP + step, size=step, ops=SWEEP // step + 1,
                           pattern=descending(SWEEP + step, step))
        t = trace(ctx, wl, f"P1 round {round_index} two-sector reads from +{shift}")
        for offset, latency in zip(t["offset_bytes"].to_numpy(np.int64), t["latency_ns"].to_numpy(np.int64),
                                   strict=True):
            lone[int(offset) - base] = int(latency)
    for shift in (0, sector):
        # From high to low one sector at a time, with a lead-in batch of two (the sector below the sweep and the
        # one above it, no pair: dropped below): the batches are then (x + 1 sector, x) for every even x from the
        # top down to 0, the second sector issued first so that neither read starts where the one before ended.
        wl = read_workload(start=base + shift - sector, length=SWEEP + 2 * sector, size=sector,
                           ops=SWEEP // sector + 2, batch=2, pattern=descending(SWEEP + 2 * sector, sector))
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


def _top(sector: int) -> int:
    return int(np.log2(max(MAX_PAGE // sector, 2)))


# Where a page boundary sits against the two sectors read at x: between them (x + 1 sector on it: a second page
# read, or none), or just after them (x + 2 sectors on it: the sweep's first read of a page, which on a drive with
# a read buffer is the one that reaches flash, the sweep of even sectors running first from high to low).
FAMILIES = {"between": 0, "after": 1}


def level_tests(table: pd.DataFrame, sector: int, family: str = "between") -> list[bl.LevelTest]:
    """Each boundary level up to ``MAX_PAGE`` against sectors of one page (level 0), on ``extra`` relative to
    the position's lone read (:mod:`._boundary_levels`); ``family``: see FAMILIES. Only a level where the two
    sectors read apart cost *less* extra counts (both families' page boundaries do: a second page read the lone
    read pays too, or the lone read's first touch of a page): the "after" family's level 0 holds the sectors with
    a page boundary between them, so on a drive without a read buffer every one of its other levels reads
    *dearer* than level 0, the mirror image of the page (harsh noise on kelpie-n1.6t-s, 4 KiB pages: "1 KiB" at
    confidence 1.0, z +6.0, while the boundaries between the sectors said 4 KiB at z -17.7)."""
    tests = bl.level_tests(_sectors(table, sector) + FAMILIES[family], table["relative"], table["extra_ns"],
                           sector, _top(sector))
    return bl.toward(tests, -1)


def _sectors(table: pd.DataFrame, sector: int) -> np.ndarray:
    """The device sector of each read's first sector (boundaries are counted from LBA 0)."""
    base = table["base"].to_numpy(np.int64) if "base" in table else 0
    return (base + table["position"].to_numpy(np.int64)) // sector


def analyse(raw: pd.DataFrame, sector: int) -> Answer:
    """The page size from ``extra = pair - lone`` at each sweep position, grouped by the page boundaries that
    could fall between the two sectors (:func:`level_tests`)."""
    table = raw.assign(extra_ns=raw["pair_ns"] - raw["lone_ns"])
    # In units of the lone read at that position (its median over rounds): an extra page read is close to 1
    # whatever the page's type (low and high pages differ by tens of microseconds).
    lone_at = table.groupby("position")["lone_ns"].transform("median").to_numpy(float)
    table["relative"] = table["extra_ns"].to_numpy(float) / np.maximum(lone_at, 1.0)
    lone = float(np.median(table["lone_ns"])) if len(table) else 0.0
    readings = []
    for family in FAMILIES:
        family_tests = level_tests(table, sector, family)
        readings.append((bl.decide(family_tests, MIN_SEPARATION, MIN_SEPARATION_NS), family_tests, family))
    (value, confidence, alternatives), tests, family = max(readings, key=lambda r: r[0][1])
    table["abnormal"] = False
    listed = bl.listed(tests, format_size)
    rounds = int(table["round"].nunique()) if "round" in table else 1
    if value is None:
        extra = table.groupby("position")["extra_ns"].median().to_numpy(float)
        if len(extra) and float(np.percentile(np.abs(extra), 90)) < max(MIN_SEPARATION_NS, MIN_SEPARATION * lone):
            # Two sectors read separately never cost a page read more than together: no two share a page.
            return Answer(sector, None, "two sectors read separately never cost a page read more than both "
                                        "together: every sector boundary is a page boundary", raw=table)
        constant = ""
        if len(extra) and float(np.median(extra)) >= MIN_SEPARATION_NS:
            # Two commands cost the same fixed amount more than one wherever they read: the controller's command
            # rate (a throughput ceiling the same for every address), which can hide a second read of a page.
            constant = (f"; two commands issued together cost {np.median(extra) / 1e3:.1f} us more than one "
                        "wherever they read (a command-rate limit of the controller, which hides a page read "
                        "shorter than it)")
        return Answer(None, 0.0, f"no page boundary up to {format_size(MAX_PAGE)} stands out in {rounds} rounds "
                                 f"(two sectors read apart against together, by the boundary between them: {listed}): "
                                 f"the page is larger, or reads of one page and of two cost the same here{constant}",
                      raw=table)
    table["abnormal"] = bl.boundary_levels(_sectors(table, sector) + FAMILIES[family], _top(sector)) >= int(
        np.log2(value // sector))
    where = ("falls between them" if family == "between"
             else "falls just after them (a read buffer's first read of a page, from high to low)")
    evidence = (f"{rounds} rounds of two sectors read apart against together: where a boundary of "
                f"{format_size(value)} (or a multiple) {where} the difference moves against sectors of "
                f"one page (shifts by boundary: {listed}), and no boundary of a smaller size does")
    return Answer(value, unit_interval(confidence), evidence, alternatives=alternatives,
                  extra={"levels": {int(t.size): round(float(t.z), 2) for t in tests if not t.pooled},
                         "boundary": family}, raw=table)


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
    swept: set[int] = set()
    for round_index in range(MAX_ROUNDS):
        if round_index >= MIN_ROUNDS and round_base(ctx, round_index) in swept:
            break  # a small device: the next round would re-read a region (a read buffer would serve it)
        swept.add(round_base(ctx, round_index))
        frames.append(measure_round(ctx, round_index))
        raw = pd.concat(frames, ignore_index=True)
        answer = analyse(raw, sector)
        answer.rounds = round_index + 1
        family = answer.extra.get("boundary", "between")
        if round_index + 1 >= MIN_ROUNDS and not bl.unclear(level_tests(answer.raw, sector, family), answer.value):
            break  # every boundary level either differs surely or not at all: more rounds would not change it
    assert answer is not None
    answer.figures.append(figure(answer, directory))
    return answer


PROBES = [Probe("P1", "page size", REFILLED, (), run, unit="bytes")]
