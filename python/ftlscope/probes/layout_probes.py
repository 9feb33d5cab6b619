"""P2 page type, P4 stripe width and P5 channel/chip layout (seed 003 §3.1, F2_rangeRead and F3_strideRead), on a
refilled device (purged, then filled sequentially from LBA 0). Every measurement is a few engine runs of many
requests; the analysis is in :mod:`._layout_analysis`.

P2, page type. Pages are read one at a time (batch size 1) from high to low offsets, so no read-ahead can
help. The latencies fall into levels, one per page type: one level is SLC, two MLC (low and high pages),
three TLC. Each page's level, placed in its unit's write order (page p of a sequential fill is on unit
(p / chunk) mod stripe), gives the L/M/H pattern, using P3's chunk and P4's stripe (the runner probes them
first). Without them (P2 called on its own) the chunk and stripe are read off the page sequence itself (rows
of ``chunk x stripe`` pages whose chunks repeat the same types), which can scale the pattern ("2L 1H" for
"4L 2H") or leave it unknown.
A drive that writes through an SLC cache reads its freshly filled data as SLC until it folds it: when every
page reads alike, the probe lets the drive idle and reads the same pages again before it answers SLC.

P4, stripe width. Pairs of page reads issued together (an io_uring batch of two) at random pages of a window
of chunks: two reads of one unit queue, so the pair completes in about two reads, two reads of different
units in about one. The pair's latency per increment (the chunks between the two reads) is high exactly at
the multiples of the stripe width: the paper's stride plot, from one engine run of random pairs instead of one
run per increment. The window grows until the stripe and a multiple of it are both inside.

P5, channels. On a drive with timing noise (NAND times that vary, host jitter, retries, stalls: seen by reading
one page a few times), streams of page reads with 2, 4 and 8 in flight whose neighbouring reads are d units
apart (a strided walk; one stream per (depth, d), d up to the stripe width less one, at most 40): in-flight
reads on one channel wait for its bus, so the median latency of a stream rises with the in-flight reads that
share a channel. Each channel count predicts which streams share; the one whose prediction explains the
streams' medians best (a monotone fit plus a trend in d for the page types in flight, Akaike's criterion on the
cells' real spread: :mod:`._p5_analysis`) is the answer, its posterior against the others the confidence, and
rounds of streams go on until the posterior settles. A second reading of the same cells
(:func:`._p5_analysis.second_opinion`: each stream that shares a bus rises by its own amount) that names another
channel count caps the confidence at 0.5, the other count listed; a layout of more than 16 chips a channel is
said as possibly pooled channels (at most 0.5). Where one-block reads are penalised (slower than whole pages)
the streams read whole pages. If the streams stay unsure the pairs below are run as well
and the more confident answer kept (at most 0.5 on a noisy drive). Pairs issued together first check for a
serial stage in front of the buses (one command processor): one that spaces reads by at least the fastest bus's
page transfer can hide every bus wait, and the answer then says so (``controller_limited``, low confidence).
Behind such a stage P5 then reads single commands of k whole chunks (:func:`see_through`): one command passes
the processors once, and its chunks queue on the buses behind them, a step each time k passes a multiple of the
channel count; a step found replaces the hidden answer (still marked controller-limited), none keeps it.
Every P5 read is one logical block of its page: the page still crosses the channel bus, but only the block the
host link, so a host link slower than a channel (optane-like) no longer hides the buses. A single pair's
completion gap drowns in such noise: the bus transfer is a few microseconds, the spread of two reads' sensing
tens. On a drive without noise, pairs of reads of two units of one stripe row, at the same page
of both chunks (the same place in both units' write order, so the same page type and the same sensing time),
at increasing unit distances (one strided run per distance, until the period shows twice). Both pages are
ready at once; on one channel the second waits for the first's bus transfer, on different channels only for
the host link. The completion gap is high at the multiples of the channel count (unit u sits on channel u mod
channels); chips per channel = stripe / channels, rounded up. On a drive whose lone reads are slower (paper
§4.6) the first read of every batch starts late; when that hides the bus, the pair is the second and third
read of batches of three.

What the completion times cannot show: channels pooled into groups share one bus per group (the period seen
is the number of groups); a host link slower than a channel hides every bus wait; unused units of a stripe
narrower than the chips (chips per channel is rounded up from the stripe).
"""

from __future__ import annotations

import re
from math import gcd
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from scipy.stats import mstats

from .. import plots
from ..experiments.context import Context
from ..units import format_size
from ..workload import Workload
from . import _layout_analysis as la
from . import _p5_analysis as p5
from ._read_common import HIT_RATIO, read_area
from .base import REFILLED, Answer, Probe, until_stable

MiB = 1 << 20
SECOND = 1_000_000_000

# P2: the first round reads this much from the start of the filled span (the oldest data: an SLC cache folds
# it first), later rounds the next SCAN_NEXT bytes each.
SCAN_FIRST = 64 * MiB
SCAN_NEXT = 32 * MiB
# Idle time given to a drive whose pages all read alike before they are read again (SLC-cache folding).
FOLD_WAIT_NS = 5 * SECOND
# P2 goes on while its confidence is under SURE: re-reads of the first region (at most MAX_REREADS), then new
# regions, MAX_ROUNDS scans in all. A re-read served under HIT_RATIO of the first scan's median came from a read
# buffer and is not used.
SURE = 0.9
UNUSED_LEVEL_CONFIDENCE = 0.5  # P2's most confidence when the write order uses fewer page types than levels
MAX_REREADS = 8
MAX_ROUNDS = 12
# P2: a place in a unit's write order needs this many units read before their median stands for it.
PLACE_MIN_READS = 3
# Mapping-table regions of a DRAM-less drive (4 MiB of 4 KiB pages): one read in each before a scan, so the
# scan does not pay translation reads.
MAP_REGION = 4 * MiB
# The figure shows at most this many pages, and this many places of a unit's write order.
PLOTTED_PAGES = 20000
WRITE_ORDER_SHOWN = 96

# P4: the first window of chunks, the largest, and pairs per round per chunk of window.
WINDOW_FIRST = 512
WINDOW_MAX = 4096
PAIRS_PER_CHUNK = 8
# The engine shuffles windows of at most this many requests.
MAX_WINDOW_SLOTS = 4096

# P5 on a drive without spread: unit distances measured first (doubled until the channel period shows twice),
# batches per distance, stripe rows per run.
DISTANCE_FIRST = 16
BATCHES_PER_DISTANCE = 16
ROWS_PER_RUN = 8
# P5: streams of page reads with this many in flight, at unit distances 1 .. MAX_DISTANCE (the stripe width
# less one, at most), STREAM_READS reads each per round; rounds go on (up to MAX_STREAM_ROUNDS) until the
# layout's posterior reaches SETTLED.
STREAM_DEPTHS = (2, 4, 8)
NOISE_CHECK_READS = 8
MAX_DISTANCE = 40
STREAM_READS = 4000
MAX_STREAM_ROUNDS = 4
SETTLED = 0.97
# P5's serial-stage check: pairs at unit distances 1 .. ADMISSION_DISTANCES, ADMISSION_RUNS runs of
# BATCHES_PER_DISTANCE pairs each.
ADMISSION_DISTANCES = 8
ADMISSION_RUNS = 4
STREAMS_UNSURE = 0.5  # below this confidence from streams, pairs of reads are tried as well
PAIRS_ON_NOISE = 0.5  # the most confidence pairs of reads are given on a drive with timing noise
# P5 on a noisy drive reads the whole page instead of one logical block when a lone block read takes over
# SLOW_SECTOR times a lone page read (kelpie-n1t-i: +200 us for reads that are not a multiple of 4 KiB, 267 us
# against 60, and its streams' reads never met on a bus).
SLOW_SECTOR = 1.25
SIZE_CHECK_PAGES = 64
# P5 behind a serial stage: single reads of k = 1 .. SPAN_MAX whole chunks (at most SPAN_BYTES a read), about
# SPAN_READS[r] kept per k in round r (a read that crosses into the next stripe row is left out), until the
# posterior reaches SETTLED or SPAN_BUDGET_S of device time is spent. The first round is short: a drive without
# noise shows its steps exactly. optane-like with one command processor at medium noise: 2 channels' 2.6 us
# step shows at ~1000 reads per k, not at 200. kelpie-n500g-s with a wrong 512 KiB chunk spent 1300 s here
# before the budget.
SPAN_MAX = 48
SPAN_BYTES = 2 * MiB
SPAN_READS = (32, 500, 500, 500)
SPAN_BUDGET_S = 60.0
SPAN_TRIM = 0.1  # share of the reads trimmed from each end of a size's latencies


# ---- shared ------------------------------------------------------------------------------------------------


def _known_value(known: dict[str, Answer], pid: str) -> Any:
    answer = known.get(pid)
    return None if answer is None else answer.value


def _page_size(ctx: Context, known: dict[str, Answer]) -> int:
    value = _known_value(known, "P1")
    return int(value) if value else max(ctx.logical_block, 4096)


def _chunk_size(known: dict[str, Answer], page: int) -> int:
    value = _known_value(known, "P3")
    return int(value) if value and int(value) % page == 0 else page


def _regions(ctx: Context) -> dict[str, tuple[int, int]]:
    """Where each probe reads inside the refilled area, so none re-reads what another just read (a read
    buffer would answer): P2 the first quarter (the oldest data), P4 the second, P5 the second half."""
    start, length = read_area(ctx)
    quarter = max(length // 4 // MiB * MiB, MiB)
    return {"P2": (start, quarter), "P4": (start + quarter, quarter), "P5": (start + 2 * quarter, length - 2 * quarter)}


def _reads(*, start: int, length: int, size: int, ops: int, batch: int, pattern: dict[str, Any],
           seed: int = 1) -> Workload:
    return Workload(mix={"read": 100}, sizes=[int(size)], pattern=pattern,
                    range={"start": int(start), "length": int(length)}, queue_depth=int(batch),
                    batch={"size": int(batch), "idle_ns": 0}, stop={"ops": int(ops)}, seed=seed)


def _trace(ctx: Context, workload: Workload, label: str) -> pd.DataFrame:
    frame = ctx.run(workload, label, trace=True).trace
    return frame[frame["op"] == "read"].reset_index(drop=True)


# ---- P2 page type ------------------------------------------------------------------------------------------


def scan(ctx: Context, start: int, length: int, page: int, label: str) -> pd.DataFrame:
    """Read every page of ``[start, start + length)`` once, one at a time, from high to low offsets: a strided
    walk with stride ``length - page`` visits ``start``, then the top page and downwards."""
    length = length // page * page
    warm = _reads(start=start, length=length, size=ctx.logical_block, ops=max(1, length // MAP_REGION), batch=1,
                  pattern={"kind": "strided", "stride": MAP_REGION})
    ctx.run(warm, f"{label}: one read per mapping region")
    wl = _reads(start=start, length=length, size=page, ops=length // page, batch=1,
                pattern={"kind": "strided", "stride": length - page})
    t = _trace(ctx, wl, label)
    return pd.DataFrame({
        "page": (t["offset_bytes"].to_numpy(np.int64) // page),
        "latency_ns": t["latency_ns"].to_numpy(np.int64),
        "order": np.arange(len(t)),
    })


def analyse_page_type(raw: pd.DataFrame, page: int, geometry: tuple[int, int] | None,
                      geometry_source: str = "P3/P4") -> Answer:
    """Cell type from the latency levels of single page reads, pattern from each unit's write order. ``raw``
    holds ``page`` and ``latency_ns`` per read; a page read more than once counts with the median of its reads
    of the latest ``epoch`` (a drive that folded its SLC cache in between reads the folded pages);
    ``geometry`` = (chunk pages, stripe width) when known."""
    last = _per_page(raw)
    latency_us = last["latency_ns"].to_numpy(float) / 1e3
    readings = la.latency_levels(latency_us)
    if geometry is not None:
        # A wrong chunk or stripe would mix page types in one place and blur the medians' levels: keep the
        # medians' reading only when its classes separate better than the single reads'.
        medians = la.latency_levels(_median_per_place(last["page"].to_numpy(np.int64), latency_us, *geometry))
        if medians and medians[0].confidence > readings[0].confidence:
            readings = medians
    best = readings[0]
    letters = la.level_letters(len(best.centres))
    table = last.assign(level=best.codes, type=[letters[c] if c >= 0 else "?" for c in best.codes])
    pattern, pattern_from, head = _pattern(table, page, geometry, geometry_source, letters)
    levels = ", ".join(f"{letters[i]} {c:.1f} us ({np.mean(best.codes == i):.0%})" for i, c in enumerate(best.centres))
    outliers = int(np.sum(best.codes < 0))
    reads = int(last["reads"].sum())
    evidence = (f"{len(last)} pages read one at a time from high to low offsets ({reads} reads, each page's median "
                f"counted): {len(best.centres)} latency "
                f"level(s) ({levels}" + (f"; {outliers} outlier reads left out" if outliers else "") +
                f"); Jenks {best.n_classes} classes; pattern {pattern or 'unknown'} ({pattern_from})")
    alternatives: dict[str, float] = {}
    for r in readings[1:]:
        if r.cell != best.cell:
            alternatives[r.cell] = max(alternatives.get(r.cell, 0.0), r.confidence)
    confidence = best.confidence
    used = set(re.sub(r"\d+[KMG]iB", "", pattern or "")) & set(letters)
    if pattern and len(used) < len(letters):
        # The write order holds fewer page types than the levels found: a level no place in the write order
        # takes is reads that met background work, not a page type (harsh noise: SLC and TLC drives read as
        # "MLC L" at 0.98). The cell count is then unsure.
        confidence = min(confidence, UNUSED_LEVEL_CONFIDENCE)
        evidence += f"; the write order uses {len(used)} of the {len(letters)} levels, so the cell type is unsure"
    return Answer(
        {"cell": best.cell, "pattern": pattern},
        confidence,
        evidence,
        alternatives=[{"value": {"cell": cell, "pattern": ""}, "confidence": round(conf, 4)}
                      for cell, conf in sorted(alternatives.items(), key=lambda i: -i[1])],
        extra={"levels_us": [round(c, 2) for c in best.centres], "pattern_from": pattern_from, "write_order": head},
        raw=table,
    )


def _per_page(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per page: the median latency of its reads in the latest epoch (re-reads of a noisy drive are
    independent draws of the NAND time and the host's jitter), and how many reads that is."""
    frame = raw if "epoch" in raw else raw.assign(epoch=0)
    latest = frame[frame["epoch"] == frame.groupby("page")["epoch"].transform("max")]
    grouped = latest.groupby("page")
    out = grouped.agg(latency_ns=("latency_ns", "median"), order=("order", "last"), reads=("latency_ns", "size"))
    return out.reset_index().sort_values("page").reset_index(drop=True)


def _median_per_place(pages: np.ndarray, latency_us: np.ndarray, chunk_pages: int, stripe: int) -> np.ndarray:
    """Each page's latency replaced by the median over the units of its place in a unit's write order (the
    same page type on every unit), where at least PLACE_MIN_READS units were read. On a noisy drive a single
    read varies (lognormal NAND times, host jitter, a retried read doubles it, a stall or background operation
    adds milliseconds); the median over the units keeps the level and drops those outliers without extra reads.
    On a noise-free drive every unit reads a place alike, so the levels are unchanged."""
    _, place = la.unit_index(pages, chunk_pages, stripe)
    series = pd.Series(latency_us)
    grouped = series.groupby(place)
    medians = grouped.transform("median").to_numpy(float)
    reads = grouped.transform("size").to_numpy(int)
    return np.where(reads >= PLACE_MIN_READS, medians, latency_us)


def _pattern(table: pd.DataFrame, page: int, geometry: tuple[int, int] | None, source: str,
             letters: str) -> tuple[str, str, str]:
    """(pattern, where its chunk and stripe came from, the first places of a unit's write order)."""
    pages = table["page"].to_numpy(np.int64)
    codes = table["level"].to_numpy()
    if len(letters) == 1:
        return "L", "a single page type", ""
    if geometry is None:
        # The contiguous run of pages from LBA 0 (the first scan) places rows; later scans extend it.
        top = int(pages.max()) + 1 if len(pages) else 0
        sequence = np.full(top, -1, dtype=int)
        sequence[pages] = codes
        geometry = la.estimate_geometry(sequence)
        if geometry is None:
            cycle = la.periodic_cycle(sequence, max_period=16)
            if cycle is not None:
                # Every page of the sequence repeats the same short pattern: so does every unit.
                return (la.runs(cycle, letters), "the logical page sequence repeats it (chunk and stripe unknown)",
                        "")
            return "", "unknown until P3 (chunk) and P4 (stripe) are known", ""
        source = "chunk and stripe estimated from the page sequence"
    chunk_pages, stripe = geometry
    sequence = la.unit_sequence(pages, codes, chunk_pages, stripe)
    pattern = la.render_pattern(sequence, letters, page)
    head = "".join(letters[c] if c >= 0 else "?" for c in sequence[:WRITE_ORDER_SHOWN])
    return pattern, f"{source}: chunk {format_size(chunk_pages * page)}, stripe {stripe}", head


def page_type_figure(answer: Answer, directory: Path) -> Path:
    """The F2_rangeRead plot: each page's read latency against its offset, coloured by page type; below it
    the pattern in a unit's write order when the chunk and stripe are known."""
    table = answer.raw
    head = answer.extra.get("write_order", "")
    fig, axes = plots.panels(f"P2 page type: single page reads from high to low offsets: "
                             f"{answer.value['cell'].upper()} {answer.value['pattern']}".strip(),
                             2 if head else 1, 1, size=(8.5, 6.5 if head else 4.2))
    colours = {"L": "tab:green", "M": "tab:orange", "H": "tab:red", "X": "tab:purple", "?": "tab:grey"}
    step = max(1, len(table) // PLOTTED_PAGES)
    shown = table.iloc[::step]
    ax = axes[0]
    for letter, colour in colours.items():
        group = shown[shown["type"] == letter]
        if len(group):
            ax.scatter(group["page"], plots.microseconds(group["latency_ns"]), s=3, color=colour,
                       label=f"{letter} pages" if letter != "?" else "outliers", rasterized=True)
    ax.set_xlabel("logical page" + (f" (every {step}th shown)" if step > 1 else ""))
    ax.set_ylabel("read latency (us)")
    if head:
        ax = axes[1]
        levels = {letter: i + 1 for i, letter in enumerate(la.level_letters(len(answer.extra["levels_us"])))}
        ax.bar(range(len(head)), [levels.get(c, 0) for c in head], color=[colours.get(c, "k") for c in head],
               width=1.0)
        ax.set_yticks(list(levels.values()), list(levels))
        ax.set_xlabel(f"place in a unit's write order ({answer.extra.get('pattern_from', '')})")
        ax.set_ylabel("page type")
    return plots.save(fig, directory, "P2_page_type",
                      "Latency of single-page reads in a block: the latency levels are the page types (low, middle, "
                      "high pages), and their order in the block is the page pattern.")


def run_page_type(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    page = _page_size(ctx, known)
    chunk, stripe = _known_value(known, "P3"), _known_value(known, "P4")
    geometry = (max(int(chunk) // page, 1), int(stripe)) if chunk and stripe else None
    start, length = _regions(ctx)["P2"]
    state = {"top": start, "waited": False, "cell": None, "epoch": 0, "rereads": 0, "buffered": False,
             "first_ns": None, "confidence": 0.0}

    def measure(round_index: int) -> pd.DataFrame:
        if round_index > 0 and state["cell"] == "slc" and not state["waited"]:
            # Every page read alike: perhaps still in an SLC cache. Idle so the drive can fold it (the
            # oldest data first), then read the same pages again; their reads from now on count.
            state["waited"] = True
            state["epoch"] += 1
            ctx.idle(FOLD_WAIT_NS)
            frame = scan(ctx, start, state["top"] - start, page, f"re-read after {FOLD_WAIT_NS / SECOND:.0f} s idle")
            return frame.assign(epoch=state["epoch"])
        if (round_index > 0 and state["confidence"] < SURE and state["rereads"] < MAX_REREADS
                and not state["buffered"]):
            # Unclear levels on a noisy drive: read the first region again (the paper's repetitions). Each read
            # of a page is a new draw of its NAND time and the host's jitter; the median of a page's reads
            # narrows its level where more units would not (a place has one page per unit).
            state["rereads"] += 1
            size = min(SCAN_FIRST, start + length - start)
            frame = scan(ctx, start, size, page, f"round {round_index}: re-read {state['rereads']}")
            median = float(frame["latency_ns"].median()) if len(frame) else 0.0
            if state["first_ns"] and median < HIT_RATIO * state["first_ns"]:
                state["buffered"] = True  # a read buffer serves the re-reads: they are no draws of flash
                return frame.iloc[:0].assign(epoch=state["epoch"])
            return frame.assign(epoch=state["epoch"])
        size = SCAN_FIRST if round_index == 0 else SCAN_NEXT
        size = min(size, start + length - state["top"])
        if size < page:
            return pd.DataFrame({"page": [], "latency_ns": [], "order": [], "epoch": []})
        frame = scan(ctx, state["top"], size, page, f"round {round_index}")
        if round_index == 0:
            state["first_ns"] = float(frame["latency_ns"].median()) if len(frame) else None
        state["top"] += size
        return frame.assign(epoch=state["epoch"])

    frames: list[pd.DataFrame] = []
    answer: Answer | None = None
    history: list[Answer] = []
    for round_index in range(MAX_ROUNDS):
        frames.append(measure(round_index).assign(round=round_index))
        answer = analyse_page_type(pd.concat(frames, ignore_index=True), page, geometry)
        answer.rounds = round_index + 1
        state["cell"], state["confidence"] = answer.value["cell"], answer.confidence or 0.0
        history.append(answer)
        if len(history) >= 2 and _stable(history[-2], answer) and (
                state["confidence"] >= SURE or state["rereads"] >= MAX_REREADS or state["buffered"]):
            break  # clear (or as clear as repetitions make it)
    assert answer is not None
    answer.figures.append(page_type_figure(answer, directory))
    return answer


def _stable(a: Answer, b: Answer) -> bool:
    return a.value == b.value and abs((a.confidence or 0.0) - (b.confidence or 0.0)) <= 0.02 or (
        a.value == b.value and (b.confidence or 0.0) >= SURE)


# ---- P4 stripe width ---------------------------------------------------------------------------------------


def pair_round(ctx: Context, start: int, window: int, chunk: int, page: int, label: str, *, limit: int,
               seed: int = 1) -> pd.DataFrame:
    """Random pairs of page reads inside windows of ``window`` chunks from ``start`` (at most ``limit``
    bytes), every page read once, two reads per batch. One row per pair: the chunk increment between the two
    reads and when each completed."""
    chunk_pages = max(chunk // page, 1)
    slots = window * chunk_pages
    pairs = PAIRS_PER_CHUNK * window
    windows = max(1, min(-(-2 * pairs // slots), limit // (window * chunk)))
    if slots <= MAX_WINDOW_SLOTS:
        # One run: a permuted-windows walk shuffles the pages of each window in turn.
        runs = [(start, windows * window * chunk, {"kind": "permuted_windows", "window": slots},
                 min(2 * pairs, windows * slots) // 2 * 2)]
    else:  # windows too large for the engine's shuffle: one permutation run per window
        per = min(2 * pairs, windows * slots) // windows // 2 * 2
        runs = [(start + w * window * chunk, window * chunk, {"kind": "permutation"}, per) for w in range(windows)]
    frames = []
    for at, length, pattern, ops in runs:
        t = _trace(ctx, _reads(start=at, length=length, size=page, ops=ops, batch=2, pattern=pattern, seed=seed),
                   label)
        frames.append(pd.DataFrame({"batch": t["submit_ns"].to_numpy(),
                                    "chunk": t["offset_bytes"].to_numpy(np.int64) // chunk,
                                    "latency_ns": t["latency_ns"].to_numpy(np.int64)}))
    grouped = pd.concat(frames, ignore_index=True).groupby("batch")
    table = grouped.agg(chunk_a=("chunk", "min"), chunk_b=("chunk", "max"), first_ns=("latency_ns", "min"),
                        latency_ns=("latency_ns", "max"), reads=("chunk", "size"))
    table = table[table["reads"] == 2].drop(columns="reads").reset_index(drop=True)
    table["increment"] = table["chunk_b"] - table["chunk_a"]
    table["window"] = window
    return table


def analyse_stripe(raw: pd.DataFrame) -> la.StripeReading:
    return la.stripe_from_pairs(raw["increment"].to_numpy(), raw["latency_ns"].to_numpy(float),
                                raw["first_ns"].to_numpy(float))


def stripe_answer(reading: la.StripeReading, raw: pd.DataFrame) -> Answer:
    windows = sorted(raw["window"].unique()) if len(raw) else []
    evidence = (f"{len(raw)} pairs of concurrent page reads at random increments up to "
                f"{max(windows) if windows else 0} chunks: {reading.note}")
    return Answer(reading.value, reading.confidence, evidence, alternatives=reading.alternatives,
                  extra={"abnormal_increments": [int(x) for x in reading.abnormal[:32]]}, raw=raw)


def stripe_figure(answer: Answer, directory: Path, chunk: int) -> Path:
    """The F3_strideRead plot: the pair's latency against the increment between its two reads."""
    per = la.per_increment(answer.raw["increment"], answer.raw["latency_ns"])
    fig, ax = plots.figure("P4 stripe width: two concurrent page reads, latency by increment",
                           f"increment between the two reads (chunks of {format_size(chunk)})",
                           "median latency of the pair (us)")
    ax.plot(per.index, plots.microseconds(per["median"]), marker=".", markersize=3, linewidth=0.6,
            label="pair latency")
    abnormal = [x for x in answer.extra.get("abnormal_increments", []) if x in per.index]
    if abnormal:
        ax.scatter(abnormal, plots.microseconds(per.loc[abnormal, "median"]), color="tab:red", zorder=5, s=25,
                   label="abnormal: both reads on one unit")
    if answer.value:
        for k in range(1, int(per.index.max()) // answer.value + 1):
            ax.axvline(k * answer.value, color="grey", linestyle=":", linewidth=0.8,
                       label=f"multiples of {answer.value}" if k == 1 else None)
    return plots.save(fig, directory, "P4_stripe_width",
                      "Latency of two concurrent page reads against the chunks between them: the pair is slow where "
                      "both reads land on one unit, so the spacing of the slow increments is the stripe width.")


def run_stripe_width(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    page = _page_size(ctx, known)
    chunk = _chunk_size(known, page)
    start, length = _regions(ctx)["P4"]
    largest = max(2, min(WINDOW_MAX, length // chunk))
    state = {"window": min(WINDOW_FIRST, largest), "next": start}

    def fresh(size: int) -> int:
        # Each round reads pages no round read before (wrapping inside the region if it must).
        if state["next"] + size > start + length:
            state["next"] = start
        at = state["next"]
        state["next"] += size
        return at

    def measure(round_index: int) -> pd.DataFrame:
        frames = []
        while True:
            window = state["window"]
            size = window * chunk * max(1, -(-2 * PAIRS_PER_CHUNK // max(chunk // page, 1)))
            frames.append(pair_round(ctx, fresh(min(size, length)), window, chunk, page,
                                     f"round {round_index} pairs in windows of {window} chunks",
                                     limit=length, seed=round_index + 1))
            if round_index > 0 or state["window"] >= largest:
                break
            reading = analyse_stripe(pd.concat(frames, ignore_index=True))
            if reading.confirmed:
                break
            state["window"] = min(2 * window, largest)  # no stripe (or only one multiple) inside: look wider
        return pd.concat(frames, ignore_index=True)

    answer = until_stable(measure, lambda raw: stripe_answer(analyse_stripe(raw), raw),
                          min_rounds=2, max_rounds=4, tolerance=0.02)
    answer.figures.append(stripe_figure(answer, directory, chunk))
    return answer


# ---- P5 channel/chip layout --------------------------------------------------------------------------------


def sector_read(ctx: Context) -> int:
    """P5 reads one logical block of each page: the NAND still senses the page and moves it over the channel bus,
    but only the block crosses the host link, so a host link slower than a channel (optane-like: 900 MB/s
    against 1.6 GB/s) no longer hides the bus wait that shows the channels."""
    return max(int(ctx.logical_block), 512)


def read_size(ctx: Context, end: int, page: int) -> int:
    """The size of P5's reads on a noisy drive: one logical block (:func:`sector_read`), unless lone reads of
    one block take SLOW_SECTOR times lone reads of a whole page or more (a penalty for reads below the drive's
    alignment: in-flight reads that slow finish sensing far apart and never meet on a bus); then the whole
    page. Medians of NOISE_CHECK_READS reads each at random pages of the SIZE_CHECK_PAGES before ``end``."""
    sector = sector_read(ctx)
    if sector >= page:
        return page
    span = SIZE_CHECK_PAGES * page

    def lone(size: int, seed: int) -> float:
        latency = _trace(ctx, _reads(start=end - span, length=span, size=size, ops=NOISE_CHECK_READS, batch=1,
                                     pattern={"kind": "random"}, seed=seed),
                         f"P5 read size check: {format_size(size)}")["latency_ns"]
        return float(np.median(latency)) if len(latency) else 0.0

    return page if lone(sector, 2) >= SLOW_SECTOR * lone(page, 3) else sector


def distance_run(ctx: Context, rows_start: int, rows: int, stripe: int, chunk: int, page: int, distance: int,
                 batch: int, label: str, size: int | None = None) -> pd.DataFrame:
    """Batches of ``batch`` reads of one page (the same page of every chunk) ``distance`` chunks apart: a
    strided walk of ``k * distance`` chunks over ``rows`` stripe rows. One row per pair of interest inside
    one stripe row (two units, the same place in their write order): the first two reads of a batch (of
    three: the second and third, the first starting late)."""
    chunks = rows * stripe
    period = chunks // gcd(distance, chunks)  # the walk visits this many chunks before it repeats
    batches = min(BATCHES_PER_DISTANCE, period // batch)
    if batches < 1:
        return pd.DataFrame()
    wl = _reads(start=rows_start, length=chunks * chunk, size=size or sector_read(ctx), ops=batches * batch,
                batch=batch,
                pattern={"kind": "strided", "stride": distance * chunk})
    t = _trace(ctx, wl, label).sort_values("submit_ns", kind="stable")
    index = (t["offset_bytes"].to_numpy(np.int64) - rows_start) // chunk
    submit, complete = t["submit_ns"].to_numpy(), t["complete_ns"].to_numpy(np.int64)
    out = []
    starts = np.flatnonzero(np.r_[True, np.diff(submit) != 0])
    for b, s in enumerate(starts):
        e = starts[b + 1] if b + 1 < len(starts) else len(submit)
        # Submission order inside the batch: the walk's k-th read is at chunk k * distance (mod the rows).
        expected = [((b * batch + i) * distance) % chunks for i in range(batch)]
        done = {int(c): int(t_) for c, t_ in zip(index[s:e], complete[s:e], strict=True)}
        if e - s != batch or len(done) != batch or any(c not in done for c in expected):
            continue
        a, c = (expected[0], expected[1]) if batch == 2 else (expected[1], expected[2])
        if a // stripe != c // stripe:
            continue  # the pair spans two stripe rows: other places in the write order, other page types
        out.append({"distance_run": distance, "unit_a": a % stripe, "unit_b": c % stripe,
                    "distance": abs(a - c), "gap_ns": done[c] - done[a], "batch_size": batch,
                    "first_late": batch == 2 and done[expected[0]] > done[expected[1]]})
    return pd.DataFrame(out)


def pair_answer(raw: pd.DataFrame, stripe: int, page: int = 4096) -> Answer:
    if raw.empty:
        return Answer(None, None, f"no pair of reads of two units of one stripe row could be formed (stripe width "
                                  f"{stripe})", extra={"abnormal_distances": [], "bus_contention_seen": False},
                      raw=raw)
    reading = la.channels_from_gaps(raw["distance"].to_numpy(), raw["gap_ns"].abs().to_numpy(float), stripe)
    mode = "the second and third reads of batches of three (the first read of a batch starts late on this drive)" \
        if (raw["batch_size"] == 3).any() else "pairs of concurrent reads"
    evidence = (f"{len(raw)} {mode}, two units of one stripe row at distances up to "
                f"{int(raw['distance'].max()) if len(raw) else 0}: {reading.note}; chips per channel = stripe "
                f"width {stripe} / {reading.layout['channels']} channels, rounded up")
    # Reads issued together that complete apart where no bus is shared: a serial stage (one command processor)
    # spaces them, and a bus wait shorter than it cannot show.
    admission = p5.admission_gap(raw["distance"], raw["gap_ns"], min_pairs=3)
    limited = p5.hides_buses(admission, page)
    confidence = reading.confidence
    if limited:
        confidence = min(confidence or 0.0, p5.SERIAL_FOUND_CONFIDENCE if reading.found else p5.HIDDEN_CONFIDENCE)
        evidence += (f"; where no bus is shared the pair still completes {admission / 1e3:.2f} us apart: a serial "
                     "stage in front of the buses (a controller admitting one command at a time) may hide them")
    return Answer(reading.layout, confidence, evidence, alternatives=reading.alternatives,
                  extra={"abnormal_distances": [int(x) for x in reading.abnormal[:32]],
                         "bus_contention_seen": reading.found, "controller_limited": bool(limited),
                         "serial_stage_us": round(admission / 1e3, 3) if limited else 0.0}, raw=raw)


def run_pairs(ctx: Context, page: int, chunk: int, stripe: int) -> Answer:
    """P5 on a drive whose reads take exactly their time (no spread): pairs of reads of two units of one stripe
    row, issued together, at the same page of both chunks (the same place in both units' write order, so the
    same page type and the same sensing time). Both pages are ready at once; on one channel the second waits
    for the first's bus transfer, on different channels only for the host link: the completion gap is high at
    the multiples of the channel count. On a drive whose lone reads are slower (paper §4.6) the first read of
    every batch starts late; when that hides the bus, the pair is the second and third read of batches of
    three. (Closed-loop streams cannot show the bus on such a drive: their reads fall into a rhythm in which
    none waits for a bus.)"""
    chunk_pages = max(chunk // page, 1)
    start, length = _regions(ctx)["P5"]
    row = stripe * chunk
    first_row = -(-start // row)  # rows are aligned to LBA 0 (every row starts on unit 0)
    rows = max(1, min(ROWS_PER_RUN, (start + length) // row - first_row))
    blocks = max(1, ((start + length) // row - first_row) // rows)
    # Run 0 would read the first page of each chunk, which the streams read.
    state = {"runs": 1, "batch": 2, "distance": min(stripe - 1, DISTANCE_FIRST)}

    def run_distance(distance: int, round_index: int) -> pd.DataFrame:
        # Every run reads pages no run read before: the next page of the chunks, then the next rows.
        n = state["runs"]
        state["runs"] += 1
        rows_start = (first_row + ((n // chunk_pages) % blocks) * rows) * row + (n % chunk_pages) * page
        return distance_run(ctx, rows_start, rows, stripe, chunk, page, distance, state["batch"],
                            f"round {round_index} distance {distance}")

    def distances(after: int) -> list[int]:
        # Batches of three skip the distances where the first and third read meet on one unit.
        return [d for d in range(after + 1, state["distance"] + 1) if state["batch"] == 2 or (2 * d) % stripe]

    def measure(round_index: int) -> pd.DataFrame:
        frames: list[pd.DataFrame] = []
        measured = 0
        while True:
            frames += [run_distance(d, round_index) for d in distances(measured)]
            measured = state["distance"]
            raw = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
            answer = pair_answer(raw, stripe, page)
            if raw.empty:
                return raw
            found = answer.extra["bus_contention_seen"]
            if state["batch"] == 2 and not found and raw["first_late"].mean() > 0.5:
                # The first read of every batch starts late (a lone read is slower, paper §4.6) and so late
                # that it never meets the second on the bus: take the pair from batches of three instead.
                state["batch"] = 3
                frames, measured = [], 0
                continue
            seen = [d for d in answer.extra["abnormal_distances"] if d <= measured]
            if round_index > 0 or measured >= stripe - 1 or (found and len(seen) >= 2):
                return raw
            state["distance"] = min(stripe - 1, 2 * measured)  # the channel period has not shown twice yet

    return until_stable(measure, lambda raw: pair_answer(raw, stripe, page), min_rounds=2, max_rounds=4,
                        tolerance=0.02)




def pair_figure(answer: Answer, directory: Path) -> Path:
    """The F3_strideRead plot at distances below the stripe width: how long after the first read of a pair
    the second completes, by the units between them."""
    raw = answer.raw
    per = la.per_increment(raw["distance"], raw["gap_ns"].abs()) if len(raw) else \
        pd.DataFrame({"median": []}, index=pd.Index([], name="increment"))
    fig, ax = plots.figure("P5 channel layout: two concurrent reads of one stripe row, by unit distance",
                           "units between the two reads", "second completion after the first (us)")
    ax.plot(per.index, plots.microseconds(per["median"]), marker="o", markersize=3, linewidth=0.6,
            label="completion gap")
    abnormal = [x for x in answer.extra.get("abnormal_distances", []) if x in per.index]
    if abnormal:
        ax.scatter(abnormal, plots.microseconds(per.loc[abnormal, "median"]), color="tab:red", zorder=5, s=25,
                   label="abnormal: both units on one channel (bus)")
    return plots.save(fig, directory, "P5_channel_layout",
                      "Time between the two completions of concurrent reads of one stripe row, by the units between "
                      "them: reads on one channel share its bus and complete further apart.")


def stream_cell(ctx: Context, first_row: int, rows: int, stripe: int, chunk: int, page: int, distance: int,
                depth: int, reads: int, label: str, size: int | None = None) -> np.ndarray:
    """Latencies of a stream of page reads whose neighbours are ``distance`` units apart, ``depth`` in flight:
    a strided walk over ``rows`` stripe rows from ``first_row``, the first page of each chunk, so the in-flight
    reads sit on units ``distance`` apart. The stride is ``distance`` plus whole stripe rows (the same units),
    enough that every stream sweeps the whole area at least twice: every stream then reads the same mix of
    places (page types, parts of the area the drive treats differently), and only the units differ. The walk
    stops before it would come back to a chunk it read (a read buffer would serve it)."""
    chunks = rows * stripe
    stride = distance + stripe * -(-2 * chunks // (reads * stripe))
    reads = min(reads, chunks // gcd(stride, chunks))
    wl = _reads(start=first_row * stripe * chunk, length=chunks * chunk, size=size or sector_read(ctx), ops=reads,
                batch=depth, pattern={"kind": "strided", "stride": stride * chunk})
    wl.batch = None  # a closed loop: the next read goes out as one completes, so ``depth`` stay in flight
    return _trace(ctx, wl, label)["latency_ns"].to_numpy(np.int64)


def cell_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Per (depth, distance): the median latency and its standard error (1.2533 x the MAD-based spread over
    the square root of the reads: a median ignores the reads that met a stall or a background operation)."""
    rows = []
    for (depth, distance), group in raw.groupby(["q", "d"]):
        latency = group["latency_ns"].to_numpy(float)
        median = float(np.median(latency))
        spread = 1.4826 * float(np.median(np.abs(latency - median)))
        rows.append({"q": int(depth), "d": int(distance), "n": len(latency), "median_ns": median,
                     "se_ns": 1.2533 * spread / np.sqrt(len(latency))})
    return pd.DataFrame(rows, columns=["q", "d", "n", "median_ns", "se_ns"])


def channel_answer(raw: pd.DataFrame, stripe: int, page: int = 4096, admission_ns: float = 0.0) -> Answer:
    cells = cell_table(raw) if len(raw) else pd.DataFrame(columns=["q", "d", "n", "median_ns", "se_ns"])
    reading = p5.channels_from_streams(cells, stripe, page, admission_ns)
    evidence = (f"{len(raw)} page reads in {len(cells)} streams ({', '.join(str(q) for q in STREAM_DEPTHS)} in "
                f"flight, units 1-{int(cells['d'].max()) if len(cells) else 0} apart): {reading.note}; chips per "
                f"channel = stripe width {stripe} / {reading.layout['channels']} channels, rounded up")
    return Answer(reading.layout, reading.confidence, evidence, alternatives=reading.alternatives,
                  extra={"abnormal_distances": [int(x) for x in reading.abnormal[:32]],
                         "bus_contention_seen": reading.found, "posterior": reading.posterior,
                         "controller_limited": reading.controller_limited,
                         "serial_stage_us": round(reading.serial_stage_ns / 1e3, 3)}, raw=raw)


def second_opinion_cap(answer: Answer, cells: pd.DataFrame, stripe: int) -> Answer:
    """The streams' answer at most p5.DISAGREE_CONFIDENCE, the other count listed first, when
    :func:`._p5_analysis.second_opinion` reads another channel count from the same cells."""
    other, posterior = p5.second_opinion(cells, stripe)
    if other == answer.value["channels"]:
        return answer
    layout = {"channels": other, "chips_per_channel": -(-stripe // other)}
    answer.evidence += (f"; a fit in which every stream a channel count loads rises on its own, not one level per "
                        f"load, names {other} channels (posterior {posterior:.2f}): the streams do not decide "
                        f"between them")
    answer.confidence = min(answer.confidence or 0.0, p5.DISAGREE_CONFIDENCE)
    answer.alternatives = [{"value": layout, "confidence": round(posterior, 4)}] + [
        a for a in answer.alternatives if a["value"] != layout]
    return answer


def channel_figure(answer: Answer, directory: Path) -> Path:
    """Median latency of each stream against the units between its in-flight reads, one line per depth."""
    cells = cell_table(answer.raw) if answer.raw is not None and len(answer.raw) else pd.DataFrame(
        columns=["q", "d", "n", "median_ns", "se_ns"])
    fig, ax = plots.figure("P5 channel layout: streams of page reads, by the units between in-flight reads",
                           "units between neighbouring in-flight reads", "median read latency (us)")
    for depth, group in cells.groupby("q"):
        ax.errorbar(group["d"], plots.microseconds(group["median_ns"]), yerr=plots.microseconds(group["se_ns"]),
                    marker="o", markersize=3, linewidth=0.6, label=f"{depth} in flight")
    abnormal = set(answer.extra.get("abnormal_distances", []))
    marked = cells[cells["d"].isin(abnormal)]
    if len(marked):
        ax.scatter(marked["d"], plots.microseconds(marked["median_ns"]), color="tab:red", zorder=5, s=25,
                   label="in-flight reads share a channel (the answer's layout)")
    return plots.save(fig, directory, "P5_channel_layout",
                      "Median latency of streams of page reads whose in-flight reads sit a given number of units "
                      "apart: reads on one channel wait for its bus, so the streams whose units share a channel are "
                      "slower.")


def span_run(ctx: Context, first_row: int, rows: int, stripe: int, chunk: int, k: int, reads: int, seed: int,
             label: str) -> pd.DataFrame:
    """Single reads of ``k`` whole chunks (one at a time) at random chunk-aligned places of ``rows`` stripe rows
    from ``first_row``: the latency of each read that stays inside one stripe row (its k chunks on k consecutive
    units: ceil(k / C) of them on the busiest of C channels, wherever the read starts). Random places, so every k
    reads the same mix of rows (page types); kept reads only, about ``reads`` of them."""
    starts = [j * k % stripe for j in range(stripe)]  # where a k-chunk slot starts in its row, over one period
    inside = sum(1 for u in starts if u + k <= stripe) / stripe
    ops = int(np.ceil(reads / max(inside, 1e-9)))
    length = rows * stripe * chunk // (k * chunk) * (k * chunk)
    wl = _reads(start=first_row * stripe * chunk, length=length, size=k * chunk, ops=ops, batch=1,
                pattern={"kind": "random"}, seed=seed)
    t = _trace(ctx, wl, label)
    unit = (t["offset_bytes"].to_numpy(np.int64) - first_row * stripe * chunk) // chunk % stripe
    kept = unit + k <= stripe
    return pd.DataFrame({"k": k, "latency_ns": t["latency_ns"].to_numpy(np.int64)[kept]})


def span_cells(raw: pd.DataFrame) -> pd.DataFrame:
    """Per k: the 10 %-trimmed mean latency and its standard error (scipy's winsorised estimate). Not the
    median: the random rows hold a mix of page types (MLC's 40 and 60 us reads), and a median of such a mix jumps
    between the two modes from one k to the next (a two-mode drive read "no step" at 3000x dispersion), while a
    trimmed mean moves with the mix's share only as much as its standard error says; the trimming drops the
    retried and stalled reads."""
    rows = []
    for k, group in raw.groupby("k"):
        latency = group["latency_ns"].to_numpy(float)
        rows.append({"k": int(k), "n": len(latency), "mean_ns": float(stats.trim_mean(latency, SPAN_TRIM)),
                     "se_ns": float(mstats.trimmed_stde(latency, limits=(SPAN_TRIM, SPAN_TRIM)))
                     if len(latency) > 2 else 0.0})
    return pd.DataFrame(rows, columns=["k", "n", "mean_ns", "se_ns"])


def see_through(ctx: Context, known: dict[str, Answer], answer: Answer) -> Answer:
    """P5 behind a serial stage that hides the buses (``answer`` is controller-limited): one read command of k
    whole chunks passes the command processors once, and behind them its k chunks queue on the channel buses
    (:func:`._p5_analysis.channels_from_spans`). The layout it finds replaces the hidden one; when it finds
    none (the stage may also space the senses of one command), the controller-limited answer stays."""
    page = _page_size(ctx, known)
    chunk = _chunk_size(known, page)
    stripe = int(_known_value(known, "P4"))
    start, length = _regions(ctx)["P5"]
    row = stripe * chunk
    first_row = -(-start // row)
    rows = max(1, (start + length) // row - first_row)
    sizes = range(1, max(1, min(stripe, SPAN_MAX, SPAN_BYTES // chunk)) + 1)
    frames: list[pd.DataFrame] = []
    reading = None
    before = ctx.device_time_ns

    def spent() -> float:
        return (ctx.device_time_ns - before) / 1e9

    for round_index, reads in enumerate(SPAN_READS):
        for k in sizes:
            if spent() > SPAN_BUDGET_S:
                break
            frames.append(span_run(ctx, first_row, rows, stripe, chunk, k, reads, 1000 * round_index + k,
                                   f"see-through round {round_index}: reads of {k} chunks"))
        reading = p5.channels_from_spans(span_cells(pd.concat(frames, ignore_index=True)), stripe)
        if reading.found and (reading.posterior or 0.0) >= SETTLED or spent() > SPAN_BUDGET_S:
            break
    assert reading is not None
    raw = pd.concat(frames, ignore_index=True)
    if not reading.found:
        answer.evidence += (f"; single reads of 1-{max(sizes)} chunks ({len(raw)} reads, {spent():.1f} s) could not "
                            f"see through it: {reading.note}")
        answer.extra["seen_through"] = False
        return answer
    evidence = (f"{answer.extra.get('serial_stage_us', 0):.2f} us a read of a serial stage in front of the buses "
                f"hides them from concurrent reads; seen through it with {len(raw)} single reads of 1-{max(sizes)} "
                f"whole chunks ({spent():.1f} s): {reading.note}; chips per channel = stripe width {stripe} / "
                f"{reading.layout['channels']} channels, rounded up")
    seen = Answer(reading.layout, reading.confidence, evidence,
                  alternatives=reading.alternatives + [{"value": answer.value,
                                                        "confidence": round(answer.confidence or 0.0, 4)}],
                  extra={"abnormal_distances": [int(x) for x in reading.abnormal[:32]],
                         "bus_contention_seen": True, "posterior": reading.posterior, "controller_limited": True,
                         "serial_stage_us": answer.extra.get("serial_stage_us", 0.0), "seen_through": True},
                  raw=raw)
    seen.rounds = answer.rounds
    return seen


def span_figure(answer: Answer, directory: Path) -> Path:
    """The trimmed mean latency of one read against the whole chunks it reads: a step each time one more chunk
    lands on the busiest channel bus."""
    cells = span_cells(answer.raw)
    fig, ax = plots.figure("P5 channel layout behind a serial stage: one read of k chunks",
                           "chunks in one read (k consecutive units)", "trimmed mean read latency (us)")
    ax.errorbar(cells["k"], plots.microseconds(cells["mean_ns"]), yerr=plots.microseconds(cells["se_ns"]),
                marker="o", markersize=3, linewidth=0.6, label="trimmed mean latency")
    for x in answer.extra.get("abnormal_distances", []):
        ax.axvline(x - 0.5, color="grey", linestyle=":", linewidth=0.8)
    return plots.save(fig, directory, "P5_channel_layout",
                      "Latency (10 %-trimmed mean) of single reads of k whole chunks: the command passes the "
                      "controller once, and the read is one chunk's bus transfer slower each time k passes a "
                      "multiple of the channel count.")


def pooled_cap(answer: Answer, stripe: int) -> Answer:
    """A layout with more chips a channel than any drive measured carries (p5.MAX_CHIPS_PER_CHANNEL) is more
    likely channels pooled into groups that contend as one bus ("Fantastic SSD Internals and How to Learn and
    Use Them": N1.6TS's 16 channels in 4 pools), which read timing cannot tell from that many channels: at most
    p5.POOLED_CONFIDENCE, the pooled layouts listed beside it."""
    value = answer.value or {}
    if value.get("chips_per_channel", 0) <= p5.MAX_CHIPS_PER_CHANNEL or answer.confidence is None:
        return answer
    wider = [value["channels"] * k for k in (2, 4, 8) if value["channels"] * k <= stripe]
    answer.alternatives = answer.alternatives + [
        {"value": {"channels": c, "chips_per_channel": -(-stripe // c)}, "confidence": None} for c in wider]
    answer.confidence = min(answer.confidence, p5.POOLED_CONFIDENCE)
    answer.evidence += (f"; {value['chips_per_channel']} chips a channel is more than any drive measured carries "
                        f"({p5.MAX_CHIPS_PER_CHANNEL}): these may be {value['channels']} groups of pooled channels "
                        f"that contend as one bus, which read timing cannot tell apart (confidence at most "
                        f"{p5.POOLED_CONFIDENCE})")
    answer.extra["pooled_channels_possible"] = True
    return answer


def run_channel_layout(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    answer = _channel_layout(ctx, known, directory)
    if answer.extra.get("controller_limited") and answer.value and int(_known_value(known, "P4") or 0) > 2:
        figures = answer.figures
        answer = see_through(ctx, known, answer)
        if answer.extra.get("seen_through"):
            answer.figures = [span_figure(answer, directory)]
        else:
            answer.figures = figures
    answer = pooled_cap(answer, int(_known_value(known, "P4") or 1))
    # The layout is read over P3's chunks and P4's stripe: it is no surer than they are (at harsh noise a stripe
    # of 1 read at 0.54 gave "1 ch x 1" at 1.0).
    basis = [known[pid].confidence for pid in ("P3", "P4") if pid in known and known[pid].confidence is not None]
    if basis and answer.confidence is not None and answer.confidence > min(basis):
        answer.evidence += f"; confidence at most the chunk's and stripe's ({min(basis):.2f})"
        answer.confidence = min(basis)
    return answer


def _channel_layout(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    page = _page_size(ctx, known)
    chunk = _chunk_size(known, page)
    stripe = _known_value(known, "P4")
    if not stripe:
        return Answer(None, None, "needs the stripe width (P4), which was not found")
    stripe = int(stripe)
    if stripe <= 1:
        return Answer({"channels": 1, "chips_per_channel": 1}, 1.0,
                      "the stripe width is one unit: one channel with one chip")
    start, length = _regions(ctx)["P5"]
    row = stripe * chunk
    first_row = -(-start // row)  # rows are aligned to LBA 0 (every row starts on unit 0)
    rows = max(1, (start + length) // row - first_row)
    distances = range(1, min(stripe - 1, MAX_DISTANCE) + 1)

    def measure(round_index: int) -> pd.DataFrame:
        frames = []
        for depth in STREAM_DEPTHS:
            for distance in distances:
                if la.channel_load(depth, distance, stripe, stripe) is None:
                    continue  # two in-flight reads on one unit: its queue would hide the bus
                latency = stream_cell(ctx, first_row, rows, stripe, chunk, page, distance, depth, STREAM_READS,
                                      f"round {round_index}: {depth} in flight, {distance} units apart", size)
                frames.append(pd.DataFrame({"round": round_index, "q": depth, "d": distance,
                                            "latency_ns": latency}))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
            columns=["round", "q", "d", "latency_ns"])

    def settled(answer: Answer) -> bool:
        return (answer.extra.get("posterior") or 0.0) >= SETTLED

    # Is there timing noise? One page read NOISE_CHECK_READS times, one at a time: without noise every read
    # takes the same time, and closed-loop streams settle into a rhythm in which no read waits for a bus; there
    # pairs of reads issued together show the bus exactly instead.
    check = (first_row + rows) * row - page  # the last page of the area: no stream or pair reads it before
    repeat = _trace(ctx, _reads(start=check, length=page, size=page, ops=NOISE_CHECK_READS, batch=1,
                                pattern={"kind": "sequential"}), "P5 timing noise check")["latency_ns"]
    if len(repeat) and int(repeat.max()) == int(repeat.min()):
        answer = run_pairs(ctx, page, chunk, stripe)
        answer.figures.append(pair_figure(answer, directory))
        return answer
    size = read_size(ctx, check, page)
    # Does a serial stage (one command processor) space reads issued together? Pairs at a few distances, their
    # gap in submission order: on a drive that admits commands in parallel its median is ~0 where no bus is
    # shared, whatever the noise.
    pairs = [distance_run(ctx, (first_row + run * ROWS_PER_RUN) * row, ROWS_PER_RUN, stripe, chunk, page, d, 2,
                          f"serial stage check: pairs {d} units apart", size)
             for d in range(1, min(stripe - 1, ADMISSION_DISTANCES) + 1) for run in range(ADMISSION_RUNS)]
    pairs = [p for p in pairs if len(p)]
    admission = p5.admission_gap(pd.concat(pairs)["distance"], pd.concat(pairs)["gap_ns"]) if pairs else 0.0
    frames: list[pd.DataFrame] = []
    answer: Answer | None = None
    for round_index in range(MAX_STREAM_ROUNDS):
        frames.append(measure(round_index))
        answer = channel_answer(pd.concat(frames, ignore_index=True), stripe, page, admission)
        answer.rounds = round_index + 1
        if settled(answer):
            break  # the layout is clear: more reads would not change it
    assert answer is not None
    if answer.value and not answer.extra.get("serial_stage_us"):
        answer = second_opinion_cap(answer, cell_table(answer.raw), stripe)
    if (answer.confidence or 0.0) < STREAMS_UNSURE and not answer.extra.get("serial_stage_us"):
        # Streams could not tell (noise too slight to desynchronise them, or too strong): the pairs, exact on a
        # quiet drive, may; the more confident of the two answers, the other one listed beside it. Not when the
        # streams saw a serial stage in front of the buses: it spaces the pairs too. On this noisy drive a
        # pair's gap is no longer exact (one pair's sensing spread is tens of microseconds): its silhouette
        # counts for at most PAIRS_ON_NOISE (consumer-tlc-hmb at medium noise with a one-core controller: 11
        # channels for 4 at 0.57).
        pairs = run_pairs(ctx, page, chunk, stripe)
        pairs.confidence = min(pairs.confidence or 0.0, PAIRS_ON_NOISE)
        if pairs.confidence > (answer.confidence or 0.0):
            pairs.alternatives = [{"value": answer.value, "confidence": round(answer.confidence or 0.0, 4)}] + [
                a for a in pairs.alternatives if a["value"] != answer.value]
            pairs.evidence += f" (streams of reads gave {answer.value} at confidence {answer.confidence or 0:.2f})"
            pairs.figures.append(pair_figure(pairs, directory))
            return pairs
    if size != sector_read(ctx):
        answer.evidence += (f"; read {format_size(size)} a page: a read of one logical block took longer than the "
                            "whole page (the drive penalises reads smaller than its alignment, which would space "
                            "them too far apart to meet on a bus)")
    answer.figures.append(channel_figure(answer, directory))
    return answer


PROBES = [
    Probe("P2", "page type", REFILLED, ("P1", "P3", "P4"), run_page_type),
    Probe("P4", "stripe width", REFILLED, ("P1", "P3"), run_stripe_width, unit="chunks"),
    Probe("P5", "channel/chip layout", REFILLED, ("P1", "P3", "P4"), run_channel_layout),
]
