"""P3 chunk size (seed 003 §3.1, F1_pushRead reused): reads of two pages pushed across the pages one page at a
time. Inside a chunk both pages sit on one unit and are read one after the other; where a chunk boundary
falls between them, two units read them in parallel and the read costs *less*. The abnormal points are the
low class, and the chunk size is the most common interval between them.

Each read is set against the same two pages read one at a time (``serial``, two lone one-page reads), so the
figure analysed is ``ratio = two-page read / (first page alone + second page alone)``: close to 1 when one unit
serves both pages, about one half when two do. Low and high pages (tens of microseconds apart) cancel out of
the ratio, which a raw latency would otherwise split into classes of their own.

Every page is read once per pass (reads of two pages at even page offsets, then at odd ones, then the pages
alone); between passes a read buffer, if there is one, is emptied (:class:`Evictor`), so each pass reaches
flash. Each pass goes from high to low offsets, so no read starts where the one before it ended: a drive that
serves a forward stream from its page register or read-ahead would otherwise serve the one-page reads of a
NAND page but its first from there. When no read of two pages costs clearly less than its pages one after the
other, every page boundary is a chunk boundary (or there is one unit): the chunk is one page.
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

SWEEP = 2 * MiB  # eight boundaries of a 256 KiB chunk
ROUND_STRIDE = 16 * MiB
# A boundary level "costs less" only when its median ratio is at least this much lower (serial ~0.9-1, parallel
# ~0.5-0.7; pages of one 16 KiB NAND page share a sense, so inside such a chunk the ratio is ~0.58, across 0.5).
MIN_SEPARATION = 0.03
# The smallest chunk effect expected on a noise-free drive (one sense shared by the pages of a NAND page: 0.58
# against 0.50); a round that could not show it leaves "one page" unsure, and the rounds go on. On a noisy drive
# it shrinks (:func:`expected_effect`).
CHUNK_EFFECT = 0.08
# The expected slower of two reads whose times spread with standard deviation s is s / sqrt(pi) above their mean
# (two independent normal draws): the parallel read across a chunk boundary waits for the slower of its pages.
SLOWER_OF_TWO = 1.0 / np.sqrt(np.pi)
# The confidence of "one page" when the noise would have hidden a chunk: as likely as not.
CANNOT_TELL = 0.5
# The largest chunk looked for: a quarter of a sweep (four boundaries a round).
MAX_CHUNK = SWEEP // 4
# Three rounds at least (a read buffer's pages, a disturbed round); more while a boundary level is unclear.
MIN_ROUNDS, MAX_ROUNDS = 3, 12


def measure_round(ctx, round_index: int, page: int) -> pd.DataFrame:
    area_start, area_length = areas(ctx)["sweeps"]
    evictor = Evictor(ctx, page)
    slots = max(area_length // ROUND_STRIDE, 1)
    # Regions of their own, after the ones P1 swept (P1 sweeps one per round from the start of the area).
    # The sweep starts one page into a mapping region, whose first page (never swept) warms its translation.
    region = area_start + ((round_index + slots // 2) % slots) * ROUND_STRIDE
    base = region + page
    sweep = SWEEP
    emptied = evictor.settle(ctx) if round_index == 0 else True  # pages other probes read may be buffered
    # Before each pass: translation entries the eviction reads may have pushed out of a DRAM-less drive's
    # cache come back, and no swept page is read.
    warm = region
    pairs: dict[int, int] = {}
    for parity in (0, 1):
        warm_region(ctx, warm, "P3 warm translation")
        start = base + parity * page
        wl = read_workload(start=start, length=sweep, size=2 * page, ops=sweep // (2 * page),
                           pattern=descending(sweep, 2 * page))
        t = trace(ctx, wl, f"P3 round {round_index} two-page reads at {'odd' if parity else 'even'} pages")
        for offset, latency in zip(t["offset_bytes"].to_numpy(np.int64), t["latency_ns"].to_numpy(np.int64),
                                   strict=True):
            pairs[(int(offset) - base) // page] = int(latency)
        emptied = evictor.settle(ctx) and emptied
    warm_region(ctx, warm, "P3 warm translation")
    wl = read_workload(start=base, length=sweep + page, size=page, ops=sweep // page + 1,
                       pattern=descending(sweep + page, page))
    t = trace(ctx, wl, f"P3 round {round_index} one-page reads")
    alone = {(int(o) - base) // page: int(v)
             for o, v in zip(t["offset_bytes"].to_numpy(np.int64), t["latency_ns"].to_numpy(np.int64),
                                   strict=True)}
    emptied = evictor.settle(ctx) and emptied
    index = sorted(k for k in pairs if k in alone and k + 1 in alone)
    return pd.DataFrame({
        "round": round_index,
        "base": base,
        "page_index": index,
        "position": [k * page for k in index],
        "two_page_ns": [pairs[k] for k in index],
        "first_alone_ns": [alone[k] for k in index],
        "second_alone_ns": [alone[k + 1] for k in index],
        "buffer_emptied": emptied,
    })


def _top(page: int) -> int:
    return int(np.log2(max(MAX_CHUNK // page, 2)))


def level_tests(table: pd.DataFrame, page: int) -> list[bl.LevelTest]:
    """Each boundary level of two pages up to ``MAX_CHUNK`` against pages of one chunk (level 0), on the ratio
    of the two-page read to its pages read alone (:mod:`._boundary_levels`). Only a level that makes the read
    cheaper counts as different: on kelpie-n500g-s (4 KiB chunks) two-page reads across 512 KiB boundaries cost
    20 us more, which read as a 512 KiB chunk at confidence 1."""
    tests = bl.level_tests(_pages(table, page), table["ratio"], table["two_page_ns"], page, _top(page))
    return bl.toward(tests, -1)


def _pages(table: pd.DataFrame, page: int) -> np.ndarray:
    """The device page of each read's first page (the sweep starts one page into a region; boundaries are
    counted from LBA 0)."""
    base = table["base"].to_numpy(np.int64) if "base" in table else 0
    return (base + table["position"].to_numpy(np.int64)) // page


def pair_ratios(raw: pd.DataFrame) -> pd.Series:
    """Each two-page read's time against its two pages read alone."""
    return raw["two_page_ns"] / (raw["first_alone_ns"] + raw["second_alone_ns"]).clip(lower=1)


def read_spread(table: pd.DataFrame, page: int) -> float:
    """The relative spread (standard deviation of log latency) of a read from the noise alone, from the ratios
    of the pairs of level 0 (no boundary of two pages between them): low and high pages cancel out of a ratio (a
    noise-free drive's spread is ~0.03 or 0), while its three reads each bring their noise, the two-page read's
    whole and the two pages alone's halved by their sum, so a ratio spreads sqrt(1.5) times one read. Median
    absolute deviation (a stall or a retry is no spread). Per position across rounds would mix page types: the
    rounds' regions place a position on other page types (kelpie-n1.6t-s at medium noise: 0.42 for 0.12)."""
    ratio = pair_ratios(table).to_numpy(float)
    logs = np.log(np.clip(ratio, 1e-9, None))[bl.boundary_levels(_pages(table, page), _top(page)) == 0]
    if len(logs) < 2:
        return 0.0
    return float(1.4826 * np.median(np.abs(logs - np.median(logs))) / np.sqrt(1.5))


def expected_effect(spread: float) -> float:
    """The chunk effect a noisy drive leaves: across a boundary the two-page read waits for the slower of two
    pages read in parallel (about half of their time alone), which the noise makes ``SLOWER_OF_TWO * spread`` of a
    page read dearer, while inside a chunk one unit reads both. Harsh noise on consumer-tlc-hmb (16 KiB chunks,
    one sense for the pages of a NAND page): a spread of 0.22 leaves 0.08 - 0.06 = 0.02, and the trimmed means
    differed by 0.015 or less, under ``MIN_SEPARATION``."""
    return float(max(CHUNK_EFFECT - 0.5 * SLOWER_OF_TWO * spread, 0.0))


def one_page_confidence(tests: list[bl.LevelTest], effect: float = CHUNK_EFFECT) -> tuple[float, float]:
    """(power, confidence) of "one page": as sure as the levels are alike, and as the noise would have let a
    chunk boundary of ``effect`` (:func:`expected_effect`) show (:func:`._boundary_levels.power`)."""
    seen = bl.power(tests, effect)
    # Levels pooled from each size up that lean the same way below the 2 standard errors of "differs" are a chunk
    # effect the noise has shrunk as likely as chance (harsh noise on a drive whose pages of one NAND page share a
    # sense: -2.1, -2.1, -1.7 read "one page" at 0.99): 1 from 1 standard error down.
    lean = min((1.0 - float(np.clip((abs(t.z) - 1.0) / (bl.Z_SURE - 1.0), 0.0, 1.0)) for t in tests
                if t.pooled), default=1.0)
    # A sweep that could not have shown a chunk says nothing either way: "one page" keeps even odds
    # (``CANNOT_TELL``), with the chunk sizes it leaves open as alternatives, rather than fall towards 0 under a
    # chunk that leans by chance (harsh noise on kelpie-n1.6t-s, one-page chunks: 512 KiB at 0.08).
    return seen, (min(bl.none_differs(tests, MIN_SEPARATION, 0.0), lean) * max(seen, CANNOT_TELL) if tests else 0.0)


def hidden_chunks(tests: list[bl.LevelTest], doubt: float, effect: float = CHUNK_EFFECT) -> list[dict]:
    """The chunk sizes an unsure "one page" leaves open (the paper's Table 3 lists every candidate), most
    likely first: a size whose boundaries lean cheaper alone and pooled with the larger ones (from 1 standard
    error, as the lean that makes "one page" unsure), or whose level alone was too noisy to show a chunk
    (:func:`._boundary_levels.power` per size), and no smaller size leaning so; each at most ``doubt`` (what
    "one page" leaves, and no more than "one page" itself), none when it is sure."""
    if doubt <= 0.0:
        return []
    single = [t for t in tests if not t.pooled]
    pooled = {t.size: t for t in tests if t.pooled}

    def lean(t: bl.LevelTest) -> float:
        return float(np.clip((-t.z - 1.0) / (bl.Z_SURE - 1.0), 0.0, 1.0))

    out = []
    for i, t in enumerate(single):
        leaning = min(lean(t), lean(pooled.get(t.size, t)))
        unseen = 1.0 - float(np.clip(effect / (bl.Z_SURE * t.error), 0.0, 1.0)) if t.error > 0 else 0.0
        below = min((1.0 - lean(u) for u in single[:i]), default=1.0)
        score = min(max(leaning, unseen) * below, doubt)
        if score > 0.0:
            # Rounded down: an alternative at the answer's own confidence must not list above it.
            out.append({"value": int(t.size), "confidence": float(np.floor(score * 1e4) / 1e4)})
    return sorted(out, key=lambda a: (-a["confidence"], a["value"]))


def analyse(raw: pd.DataFrame, page: int) -> Answer:
    """The chunk from the two-page reads grouped by the boundary that falls between their pages: the smallest
    size whose boundaries (and every multiple's) make the read cheaper against its pages alone."""
    table = raw.assign(ratio=pair_ratios(raw))
    table["abnormal"] = False
    caveat = ""
    if "buffer_emptied" in table and not table["buffer_emptied"].all():
        caveat = " (caution: a read buffer larger than this probe can empty served some of these reads)"
    rounds = int(table["round"].nunique()) if "round" in table and len(table) else 1
    tests = level_tests(table, page)
    listed = bl.listed(tests, format_size)
    value, confidence, alternatives = bl.decide(tests, MIN_SEPARATION, 0.0)
    spread = read_spread(table, page)
    effect = expected_effect(spread)
    seen, one_page = one_page_confidence(tests, effect)
    if value is None or one_page > confidence:
        # No boundary level stands apart (or one stands apart less surely than none does: harsh noise on
        # kelpie-n1.6t-s, 4 KiB chunks, leaned 512 KiB's 48 reads at z -2.3 and read "512 KiB" at 0.08 where
        # "one page" had 0.6): every page boundary is a chunk boundary (or there is one unit).
        level = float(np.median(table["ratio"])) if len(table) else float("nan")
        kind = "two units read them in parallel" if level < 0.8 else "one unit reads both"
        weaker = [] if value is None else [{"value": int(value), "confidence": round(confidence, 4)}]
        hidden = [a for a in hidden_chunks(tests, min(1.0 - one_page, one_page), effect) if a["value"] != value]
        alternatives = sorted(weaker + hidden, key=lambda a: (-a["confidence"], a["value"]))
        confidence = one_page
        return Answer(page, confidence,
                      f"{rounds} rounds: no boundary of two pages makes a two-page read cheaper against its pages "
                      f"read alone than another (median ratio {level:.2f}: {kind}; by boundary: {listed}); a chunk "
                      f"is one page{caveat}" + (f"; a chunk boundary would have shown with confidence {seen:.2f} "
                                                 f"at this noise (reads alone spread {spread:.2f}, so a chunk would "
                                                 f"make a two-page read {effect:.3f} cheaper)" if seen < 1 else ""),
                      alternatives=alternatives,
                      extra={"power": round(seen, 4), "read_spread": round(spread, 4), "effect": round(effect, 4)},
                      raw=table)
    table["abnormal"] = bl.boundary_levels(_pages(table, page), _top(page)) >= int(
        np.log2(value // page))
    low, high = table.loc[table["abnormal"], "ratio"], table.loc[~table["abnormal"], "ratio"]
    evidence = (f"{rounds} rounds: two-page reads across a boundary of {format_size(value)} (or a multiple) cost "
                f"{np.median(low):.2f} of their pages read alone, {np.median(high):.2f} elsewhere, and no smaller "
                f"boundary differs (median shifts by boundary: {listed}){caveat}")
    return Answer(value, unit_interval(confidence), evidence, alternatives=alternatives,
                  extra={"levels": {int(t.size): round(float(t.z), 2) for t in tests if not t.pooled}}, raw=table)


def figure(answer: Answer, directory: Path, page: int) -> Path:
    table = answer.raw
    mean = table.groupby("position")[["two_page_ns", "ratio"]].median().sort_index()
    x = mean.index.to_numpy() / page
    fig, ax = plots.figure(f"P3 chunk size: reads of two {format_size(page)} pages pushed across pages",
                           "page offset of the read", "latency (us)")
    ax.plot(x, plots.microseconds(mean["two_page_ns"]), marker=".", linewidth=0.8, label="two-page read, alone")
    if table["abnormal"].any():
        marked = np.sort(table.loc[table["abnormal"], "position"].unique())
        ax.scatter(marked / page, plots.microseconds(mean.loc[marked, "two_page_ns"]), color="tab:red", zorder=5, s=30,
                   label=f"abnormal: two units in parallel (chunk {format_size(answer.value)})")
    right = ax.twinx()
    right.plot(x, mean["ratio"], color="tab:grey", linewidth=0.6, alpha=0.7, label="against the pages read alone")
    right.set_ylabel("two-page read / (first page + second page alone)")
    right.set_ylim(0, 1.2)
    return plots.save(fig, directory, "P3_chunk_size",
                      "Latency of a two-page read pushed across pages: it is faster where the two pages sit in "
                      "different chunks (read in parallel), so the spacing of the fast offsets is the chunk size.")


def run(ctx, known, directory: Path) -> Answer:
    page = int(known["P1"].value) if "P1" in known and known["P1"].value else 4096
    frames: list[pd.DataFrame] = []
    answer: Answer | None = None
    for round_index in range(MAX_ROUNDS):
        frames.append(measure_round(ctx, round_index, page))
        answer = analyse(pd.concat(frames, ignore_index=True), page)
        answer.rounds = round_index + 1
        if (round_index + 1 >= MIN_ROUNDS and not bl.unclear(level_tests(answer.raw, page), answer.value)
                and answer.extra.get("power", 1.0) >= 1.0):
            break  # every boundary level is clearly alike or clearly different
    assert answer is not None
    answer.figures.append(figure(answer, directory, page))
    return answer


PROBES = [Probe("P3", "chunk size", REFILLED, ("P1",), run, unit="bytes")]
