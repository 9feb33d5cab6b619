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

P5, channels. Pairs of reads of two units of one stripe row issued together, at the same page of both chunks
(the same place in both units' write order, so the same page type), at unit distances up to the stripe width
less one. Both pages sense in parallel; on one channel the later transfer waits for the earlier on the bus, on
different channels only for the host link. Units share a channel at the multiples of the channel count (unit u
sits on channel u mod channels); chips per channel = stripe / channels, rounded up. On a drive without noise
(one page read a few times takes exactly the same time) a pair's completion gap shows the bus exactly: the gap
is high at those distances (one strided run per distance, until the period shows twice). On a drive whose lone
reads are slower (paper §4.6) the first read of every batch starts late; when that hides the bus, the pair is
the second and third read of batches of three.
On a drive with timing noise (NAND times that vary, host jitter, retries, stalls) a single pair's gap drowns:
the bus transfer is a few microseconds, the spread of two reads' sensing tens. But two reads on one bus can
never complete closer than a transfer apart, so at the distances that share a channel fewer pairs complete
close together (under the 15th percentile of every pair's gap): thousands of pairs per distance, each channel
count's prediction of which distances lose close pairs scored by Akaike's criterion on binomial counts
(:func:`._p5_analysis.channels_from_pair_gaps`), rounds until the posterior settles (at least two). Every noisy
P5 read is one logical block of its page: the page still crosses the channel bus, but only the block the host
link, so a host link slower than a channel (optane-like) does not hide the buses; where one-block reads are
penalised (slower than whole pages) the pairs read whole pages. A layout of more than 16 chips a channel is said
as possibly pooled channels (at most 0.5).
Where no bus shows and reads issued together complete apart even on units that share no bus, a serial stage in
front of the buses (one command processor) that spaces reads by at least the fastest bus's page transfer may
hide every bus wait: the answer says so (``controller_limited``, low confidence), and P5 then reads single
commands of k whole chunks (:func:`see_through`): one command passes the processors once, and its chunks queue on
the buses behind them, a step each time k passes a multiple of the channel count; a step found replaces the
hidden answer (still marked controller-limited), none keeps it.

What the completion times cannot show: channels pooled into groups share one bus per group (the period seen
is the number of groups, so P5 answers the buses that contend and lists the pooled layouts that time the same:
:func:`said_as_buses`); a host link slower than a channel hides every bus wait; unused units of a stripe
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
# P5 on a noisy drive: pairs of reads at unit distances 1 .. NOISY_MAX_DISTANCE (the stripe width less one, at
# most), one run per distance and round of NOISY_BATCHES pairs at most, or more on a narrow stripe so that a round
# holds NOISY_ROUND_PAIRS (kelpie-t100g-s's 7 distances read "no bus shared" at 0.90 after 8 rounds of 256), over
# stripe rows holding NOISY_ROW_CHUNKS chunks or more (at least NOISY_MIN_ROWS rows; :func:`noisy_run_plan`). Rounds go
# on (at least NOISY_MIN_ROUNDS, at most NOISY_MAX_ROUNDS or NOISY_BUDGET_S of device time) until the layout's
# posterior reaches SETTLED. 64 distances hold two multiples of 32 channels. At medium noise 8-17 thousand pairs
# (1.5-2.6 s) read kelpie-t480g-s, consumer-tlc-dram and kelpie-n128g-s at posterior >= 0.9999.
NOISE_CHECK_READS = 8
NOISY_MAX_DISTANCE = 64
NOISY_ROW_CHUNKS = 1024
NOISY_MIN_ROWS = 8
NOISY_BATCHES = 256
NOISY_ROUND_PAIRS = 8192
NOISY_WIDE_ISSUE = 4
NOISY_MIN_ROUNDS = 2
NOISY_MAX_ROUNDS = 8
# Where the spread can hide a bus wait (:func:`._p5_analysis.spread_hides_bus`: harsh noise) a bus drops the close
# share by a few percent only, and the rounds go on to NOISY_HIDDEN_MAX_ROUNDS (still within NOISY_BUDGET_S): the
# held-out 8 x 4 drive at harsh noise needed 29 rounds (80 s) to settle on 8 channels.
NOISY_HIDDEN_MAX_ROUNDS = 32
NOISY_BUDGET_S = 120.0
SETTLED = 0.97
# On a noisy drive the first read of a pair completes after the second about half of the time; a drive whose lone
# reads are slower (paper §4.6) makes it nearly always: beyond this share the pairs are taken from batches of three.
FIRST_LATE_SHARE = 0.75
# P5 on a noisy drive reads the whole page instead of one logical block when a lone block read takes over
# SLOW_SECTOR times a lone page read (kelpie-n1t-i: +200 us for reads that are not a multiple of 4 KiB, 267 us
# against 60: reads that slow finish sensing too far apart to meet on a bus).
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
                      geometry_source: str = "P3/P4", geometry_confidence: float | None = None) -> Answer:
    """Cell type from the latency levels of single page reads, pattern from each unit's write order. ``raw``
    holds ``page`` and ``latency_ns`` per read; a page read more than once counts with the median of its reads
    of the latest ``epoch`` (a drive that folded its SLC cache in between reads the folded pages);
    ``geometry`` = (chunk pages, stripe width) when known, ``geometry_confidence`` how sure (the lower of P3's
    and P4's confidences)."""
    last = _per_page(raw)
    latency_us = last["latency_ns"].to_numpy(float) / 1e3
    readings = la.latency_levels(latency_us)
    capped = ""
    if geometry is not None:
        # A wrong chunk or stripe would mix page types in one place and blur the medians' levels: keep the
        # medians' reading only when its classes separate better than the single reads'.
        medians = la.latency_levels(_median_per_place(last["page"].to_numpy(np.int64), latency_us, *geometry))
        if medians and medians[0].confidence > readings[0].confidence:
            readings = medians
            if len(readings[0].centres) == 1 and geometry_confidence is not None and \
                    readings[0].confidence > geometry_confidence:
                # One level from the medians is no surer than the chunk and stripe that place the pages: a wrong
                # stripe puts pages of every type in each place, and their medians fall on one sharp level
                # (harsh noise, pm981-256g with a stripe of 276 for 4 at 0.03: "SLC L" at 0.97). Levels the
                # medians separate are no such artefact: mixing page types never splits them.
                readings = [la.Levels(r.centres, r.codes, min(r.confidence, geometry_confidence), r.n_classes)
                            if len(r.centres) == 1 else r for r in readings]
                capped = (f"; one level from the medians over each place of a unit's write order, no surer than "
                          f"the chunk and stripe that place the pages ({geometry_confidence:.2f})")
    best = readings[0]
    letters = la.level_letters(len(best.centres))
    table = last.assign(level=best.codes, type=[letters[c] if c >= 0 else "?" for c in best.codes])
    pattern, pattern_from, head, repeats = _pattern(table, page, geometry, geometry_source, letters)
    levels = ", ".join(f"{letters[i]} {c:.1f} us ({np.mean(best.codes == i):.0%})" for i, c in enumerate(best.centres))
    outliers = int(np.sum(best.codes < 0))
    reads = int(last["reads"].sum())
    evidence = (f"{len(last)} pages read one at a time from high to low offsets ({reads} reads, each page's median "
                f"counted): {len(best.centres)} latency "
                f"level(s) ({levels}" + (f"; {outliers} outlier reads left out" if outliers else "") +
                f"); Jenks {best.n_classes} classes; pattern {pattern or 'unknown'} ({pattern_from})" + capped)
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
        fewer = la.cell_name(max(len(used), 1))
    elif pattern and not repeats:
        # The levels fall on places of the write order that follow no cycle or composite pattern: page types
        # repeat with every block, reads that met a retry or background work land anywhere (harsh noise on
        # kelpie-t64g-s, SLC: "MLC 5L 1H 20L 1H 10L ..." at 0.985). The cell count is then unsure.
        confidence = min(confidence, UNUSED_LEVEL_CONFIDENCE)
        evidence += "; the levels follow no repeating write order, so the cell type is unsure"
        fewer = la.cell_name(max(len(letters) - 1, 1))
    else:
        fewer = best.cell
    if capped or confidence < best.confidence:
        # The other readings split the same reads into more or fewer levels, and the doubt that capped the answer
        # (the chunk and stripe placing the medians, a level no page type takes, or no repeating order) is a doubt
        # about those reads: no alternative is surer than the answer (harsh noise: "MLC" at 0.5 beside "TLC" at
        # 0.95, consumer-tlc-hmb "SLC" at 0.48 beside "MLC" at 0.51, told a user the wrong thing).
        alternatives = {cell: min(conf, confidence) for cell, conf in alternatives.items()}
    if fewer != best.cell:
        # A level may be no page type: the cell without it is listed beside the answer (the levels the write order
        # takes; one fewer where it repeats none).
        alternatives[fewer] = max(alternatives.get(fewer, 0.0), confidence)
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
             letters: str) -> tuple[str, str, str, bool]:
    """(pattern, where its chunk and stripe came from, the first places of a unit's write order, whether the
    write order repeats it)."""
    pages = table["page"].to_numpy(np.int64)
    codes = table["level"].to_numpy()
    if len(letters) == 1:
        return "L", "a single page type", "", True
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
                        "", True)
            return "", "unknown until P3 (chunk) and P4 (stripe) are known", "", True
        source = "chunk and stripe estimated from the page sequence"
    chunk_pages, stripe = geometry
    sequence = la.unit_sequence(pages, codes, chunk_pages, stripe)
    repeating = la.repeating_pattern(sequence, letters, page)
    pattern = repeating if repeating is not None else la.render_pattern(sequence, letters, page)
    head = "".join(letters[c] if c >= 0 else "?" for c in sequence[:WRITE_ORDER_SHOWN])
    return (pattern, f"{source}: chunk {format_size(chunk_pages * page)}, stripe {stripe}", head,
            repeating is not None or not pattern)


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
    basis = [known[pid].confidence for pid in ("P3", "P4") if pid in known and known[pid].confidence is not None]
    geometry_confidence = min(basis) if geometry is not None and basis else None
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
        answer = analyse_page_type(pd.concat(frames, ignore_index=True), page, geometry,
                                   geometry_confidence=geometry_confidence)
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
    no_surer_than_chunk(answer, known)
    answer.figures.append(stripe_figure(answer, directory, chunk))
    return answer


def no_surer_than_chunk(answer: Answer, known: dict[str, Answer]) -> Answer:
    """P4's confidence capped at P3's: the stripe is counted in P3's chunks, and a wrong chunk makes it a wrong
    count however clear its pairs (harsh noise, consumer-tlc-hmb: P3 "4 KiB" at 0.49 for 16 KiB chunks, P4 64
    for 16 at 0.83)."""
    chunk_confidence = known["P3"].confidence if "P3" in known else None
    if chunk_confidence is not None and answer.confidence is not None and answer.confidence > chunk_confidence:
        answer.confidence = chunk_confidence
        answer.evidence += f"; no surer than the chunk it is counted in (P3, {chunk_confidence:.2f})"
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


def batch_order(stripe: int, rows: int, distance: int, batch: int, batches: int) -> list[list[int]]:
    """The chunks (counted from the first of ``rows`` stripe rows) each of at most ``batches`` batches reads:
    ``batch`` reads ``distance`` units apart, the last two (the pair) in one stripe row. Consecutive batches touch
    disjoint units: on a drive whose die holds its register after a read (``register_hold``) a unit read by the
    batch before delays the pair as a shared bus would. A strided walk read units 0 and S/2 in every batch at
    distance S/2 (and met the batch before at S/3): an eight-die PM981 read "4 ch x 2". Start units rotate over
    those whose pair stays in its row; where none is free of the last batch's units (distance S - 1: one start
    only), a filler batch whose pair crosses a row reads other units in between (its pair is left out). Each
    chunk is read once; the order ends early when no fresh chunks are left."""
    chunks = rows * stripe
    starts = [u for u in range(stripe) if u + distance < stripe]
    others = [u for u in range(stripe) if u not in starts]
    used: set[int] = set()
    order: list[list[int]] = []
    last: set[int] = set()
    turn = 0
    while len(order) < batches:
        found = None
        for pool in (starts, others):
            for t in range(len(pool)):
                u = pool[(turn + t) % len(pool)]
                units = {(u + (i - batch + 2) * distance) % stripe for i in range(batch)}
                if units & last:
                    continue
                for r in range(rows):
                    row = (len(order) + r) % rows
                    reads = [(row * stripe + u + (i - batch + 2) * distance) % chunks for i in range(batch)]
                    if len(set(reads)) == batch and not used & set(reads):
                        found = reads, units, (turn + t + 1) % len(pool) if pool is starts else turn
                        break
                if found:
                    break
            if found:
                break
        if found is None:
            break
        reads, last, turn = found
        used.update(reads)
        order.append(reads)
    return order


def distance_run(ctx: Context, rows_start: int, rows: int, stripe: int, chunk: int, page: int, distance: int,
                 batch: int, label: str, size: int | None = None, batches: int = BATCHES_PER_DISTANCE) -> pd.DataFrame:
    """Batches of ``batch`` reads of one page (the same page of every chunk) ``distance`` chunks apart over
    ``rows`` stripe rows, in :func:`batch_order` (no unit read by two consecutive batches). One row per pair of
    interest inside one stripe row (two units, the same place in their write order): the last two reads of a
    batch (of three: the second and third, the first starting late)."""
    order = batch_order(stripe, rows, distance, batch, batches)
    if not order:
        return pd.DataFrame()
    wl = _reads(start=rows_start, length=rows * stripe * chunk, size=size or sector_read(ctx),
                ops=len(order) * batch, batch=batch,
                pattern={"kind": "offsets", "offsets": [c * chunk for reads in order for c in reads]})
    return _batch_pairs(_trace(ctx, wl, label), order, rows_start, chunk, stripe, distance, batch)


def _batch_pairs(trace: pd.DataFrame, order: list[list[int]], rows_start: int, chunk: int, stripe: int,
                 distance: int, batch: int) -> pd.DataFrame:
    """One row per batch of ``trace`` (requests submitted together) that read exactly the chunks ``order`` planned
    for it and whose pair of interest (its last two reads: of three, the first starts late) lies inside one stripe
    row: the two units, their distance and the gap between their completions."""
    t = trace.sort_values("submit_ns", kind="stable")
    index = (t["offset_bytes"].to_numpy(np.int64) - rows_start) // chunk
    submit, complete = t["submit_ns"].to_numpy(), t["complete_ns"].to_numpy(np.int64)
    out = []
    starts = np.flatnonzero(np.r_[True, np.diff(submit) != 0])
    for b, s in enumerate(starts):
        e = starts[b + 1] if b + 1 < len(starts) else len(submit)
        if b >= len(order):
            break
        expected = order[b]
        done = {int(c): int(t_) for c, t_ in zip(index[s:e], complete[s:e], strict=True)}
        if e - s != batch or len(done) != batch or any(c not in done for c in expected):
            continue
        a, c = expected[-2], expected[-1]
        if a // stripe != c // stripe:
            continue  # the pair spans two stripe rows: other places in the write order, other page types
        out.append({"distance_run": distance, "unit_a": a % stripe, "unit_b": c % stripe,
                    "distance": abs(a - c), "gap_ns": done[c] - done[a], "batch_size": batch,
                    "first_late": batch == 2 and done[expected[0]] > done[expected[1]]})
    return pd.DataFrame(out)


def walk_skip(stripe: int, distance: int, batch: int) -> int:
    """Chunks a strided walk skips after each batch so the next batch reads none of its units: on a drive whose
    die holds its register after a read (``register_hold``) a unit read by the batch before delays the pair as a
    shared bus would. The plain walk moves ``batch x distance`` units a batch and meets the batch before at S/2
    (batches of two: units 0 and S/2 in every batch; a PM981 read "2 ch x 2") and at S/3. 0 where the plain walk
    already keeps off (or no skip can: stripe 2)."""
    near = {(j * distance) % stripe for j in range(-(batch - 1), batch)}
    for skip in range(stripe):
        if (batch * distance + skip) % stripe not in near:
            return skip
    return 0


def strided_distance_run(ctx: Context, rows_start: int, rows: int, stripe: int, chunk: int, page: int, distance: int,
                 batch: int, label: str, size: int | None = None, batches: int = BATCHES_PER_DISTANCE) -> pd.DataFrame:
    """P5 on a noisy drive (not moved to :func:`batch_order`: with it ho-tlc-8x4-32m read "20 ch x 2" at 0.98 at
    harsh noise; :func:`walk_skip` keeps consecutive batches off each other's units instead). Batches of ``batch``
    reads of one page (the same page of every chunk) ``distance`` chunks apart: a strided walk over ``rows`` stripe
    rows, skipping :func:`walk_skip` chunks after each batch. One row per pair of interest inside one stripe row
    (:func:`_batch_pairs`)."""
    chunks = rows * stripe
    period = chunks // gcd(distance, chunks)  # the walk visits this many chunks before it repeats
    batches = min(batches, period // batch)
    if batches < 1:
        return pd.DataFrame()
    skip = walk_skip(stripe, distance, batch)
    if skip:
        first = [(b * (batch * distance + skip)) % chunks for b in range(batches)]
        pattern = {"kind": "offsets", "offsets": [((f + i * distance) % chunks) * chunk for f in first
                                                  for i in range(batch)]}
    else:
        first = [(b * batch * distance) % chunks for b in range(batches)]
        pattern = {"kind": "strided", "stride": distance * chunk}
    wl = _reads(start=rows_start, length=chunks * chunk, size=size or sector_read(ctx), ops=batches * batch,
                batch=batch, pattern=pattern)
    # Submission order inside a batch: its k-th read is at chunk first + k * distance (mod the rows).
    order = [[(f + i * distance) % chunks for i in range(batch)] for f in first]
    return _batch_pairs(_trace(ctx, wl, label), order, rows_start, chunk, stripe, distance, batch)


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
    three."""
    chunk_pages = max(chunk // page, 1)
    start, length = _regions(ctx)["P5"]
    row = stripe * chunk
    first_row = -(-start // row)  # rows are aligned to LBA 0 (every row starts on unit 0)
    rows = max(1, min(ROWS_PER_RUN, (start + length) // row - first_row))
    blocks = max(1, ((start + length) // row - first_row) // rows)
    # Run 0 would read the first page of each chunk.
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


def noisy_pair_answer(raw: pd.DataFrame, stripe: int, page: int = 4096) -> Answer:
    """P5 from pairs of reads on a noisy drive (:func:`._p5_analysis.channels_from_pair_gaps`). Where no bus
    showed and reads issued together complete apart even on units that share no bus, a serial stage in front of
    the buses (one command processor) may hide them: the answer is then marked controller-limited, at low
    confidence. Sharing that does show stands: the senses' spread puts the stage's spacing on either read, so the
    two still meet on a bus."""
    if raw.empty:
        return Answer(None, None, f"no pair of reads of two units of one stripe row could be formed (stripe width "
                                  f"{stripe})", extra={"abnormal_distances": [], "bus_contention_seen": False},
                      raw=raw)
    reading = p5.channels_from_pair_gaps(raw["distance"], raw["gap_ns"], stripe, page)
    admission = p5.admission_gap(raw["distance"], raw["gap_ns"])
    mode = "the second and third reads of batches of three (the first read of a batch starts late on this drive)" \
        if (raw["batch_size"] == 3).any() else "pairs of reads issued together"
    evidence = (f"{len(raw)} {mode}, two units of one stripe row at the same place of their write order, at "
                f"distances 1-{int(raw['distance'].max())}: {reading.note}; chips per channel = stripe width "
                f"{stripe} / {reading.layout['channels']} channels, rounded up")
    limited = not reading.found and p5.hides_buses(admission, page)
    confidence = reading.confidence
    if limited:
        confidence = min(confidence or 0.0, p5.HIDDEN_CONFIDENCE)
        evidence += (f"; where no bus is shared the pair still completes {admission / 1e3:.2f} us apart: a serial "
                     "stage in front of the buses (a controller admitting one command at a time) may hide them")
    return Answer(reading.layout, confidence, evidence, alternatives=reading.alternatives,
                  extra={"abnormal_distances": [int(x) for x in reading.abnormal[:32]],
                         "bus_contention_seen": reading.found, "posterior": reading.posterior,
                         "weak_drop": reading.weak,
                         "spread_hides_bus": p5.spread_hides_bus(reading.table.attrs.get("threshold_ns", 0.0), page),
                         "controller_limited": bool(limited),
                         "serial_stage_us": round(admission / 1e3, 3) if limited else 0.0}, raw=raw)


def noisy_run_plan(distance: int, stripe: int, pairs: int, rows_total: int) -> tuple[int, int]:
    """(stripe rows, pairs issued) of one run of pairs ``distance`` units apart that keeps about ``pairs`` inside
    one stripe row. A pair starting at unit u stays in its row when u + distance < stripe: a share (stripe -
    distance) / stripe of them, so more are issued (at most NOISY_WIDE_ISSUE times ``pairs``). The strided walk
    repeats after rows x stripe / gcd(distance, rows x stripe) chunks, so the run spans enough rows for two chunks
    a pair (kelpie-a960g-ps: 16 pairs a round at 32 units apart over 16 rows of 64 units, the one distance its 32
    channels share)."""
    issued = min(-(-pairs * stripe // max(stripe - distance, 1)), NOISY_WIDE_ISSUE * pairs)
    rows = min(max(NOISY_MIN_ROWS, -(-NOISY_ROW_CHUNKS // stripe)), rows_total)
    while rows < rows_total and rows * stripe // gcd(distance, rows * stripe) < 2 * issued:
        rows += 1
    return rows, issued


def run_noisy_pairs(ctx: Context, page: int, chunk: int, stripe: int, size: int) -> Answer:
    """P5 on a drive with timing noise: rounds of pairs of reads at every unit distance up to NOISY_MAX_DISTANCE
    (two units of one stripe row, the same page of both chunks: the same place in both units' write order, so the
    same page type), until the layout's posterior settles (:func:`noisy_pair_answer`). A run reads a sparse walk
    over its rows (two chunks of every four at most), at rows drawn anew every round, so a read buffer rarely holds
    what it reads."""
    chunk_pages = max(chunk // page, 1)
    start, length = _regions(ctx)["P5"]
    row = stripe * chunk
    first_row = -(-start // row)
    rows_total = max(1, (start + length) // row - first_row)
    distances = range(1, min(stripe - 1, NOISY_MAX_DISTANCE) + 1)
    batches = max(NOISY_BATCHES, -(-NOISY_ROUND_PAIRS // len(distances)))
    plan = {d: noisy_run_plan(d, stripe, batches, rows_total) for d in distances}
    # Where each distance reads is drawn anew every round (seeded: the probe repeats exactly), and in one round
    # every distance reads the same page of its chunks: page types (the place in the units' write order) then
    # mix alike at every distance. A page offset tied to the distance made every even distance read L pages and
    # every odd one H pages on a 1L 1H drive with 16-page chunks, and the close share followed the page type.
    draw = np.random.default_rng(5)
    state = {"batch": 2}
    before = ctx.device_time_ns
    frames: list[pd.DataFrame] = []
    answer: Answer | None = None
    round_index = 0
    runs = 0
    last_settled = None
    limit = NOISY_MAX_ROUNDS
    while round_index < limit:
        offset = (runs % chunk_pages) * page
        runs += 1
        for d in distances:
            rows, issued = plan[d]
            rows_start = (first_row + int(draw.integers(0, rows_total - rows + 1))) * row + offset
            frames.append(strided_distance_run(ctx, rows_start, rows, stripe, chunk, page, d, state["batch"],
                                       f"round {round_index}: pairs {d} units apart", size, batches=issued))
        raw = pd.concat(frames, ignore_index=True)
        if state["batch"] == 2 and len(raw) and raw["first_late"].mean() > FIRST_LATE_SHARE:
            # The first read of every batch starts late (a lone read is slower, paper §4.6), so late that it
            # rarely meets the second on a bus: the pair is the second and third read of batches of three.
            state["batch"] = 3
            frames = []
            continue
        round_index += 1
        answer = noisy_pair_answer(raw, stripe, page)
        answer.rounds = round_index
        limit = NOISY_HIDDEN_MAX_ROUNDS if answer.extra.get("spread_hides_bus") else NOISY_MAX_ROUNDS
        settled = (answer.extra.get("posterior") or 0.0) >= SETTLED
        # A layout read from a weak drop (harsh noise) is taken once it settles twice in a row on one answer: one
        # settled round can be a chance dip at one distance.
        if round_index >= NOISY_MIN_ROUNDS and settled and (not answer.extra.get("weak_drop") or
                                                           answer.value == last_settled):
            break  # the layout is clear: more reads would not change it
        last_settled = answer.value if settled else None
        if (ctx.device_time_ns - before) / 1e9 > NOISY_BUDGET_S:
            break
    assert answer is not None
    return answer


def noisy_pair_figure(answer: Answer, directory: Path) -> Path:
    """Share of the pairs whose two completions came close together, by the units between the two reads: reads
    on one channel wait for its bus, so pairs whose units share a channel rarely complete close together."""
    table = p5.close_counts(answer.raw["distance"], answer.raw["gap_ns"]) if answer.raw is not None and \
        len(answer.raw) else pd.DataFrame({"share": [], "n": []})
    fig, ax = plots.figure("P5 channel layout: pairs of reads completing close together, by unit distance",
                           "units between the two reads", "share of pairs completing close together")
    error = np.sqrt(table["share"] * (1 - table["share"]) / table["n"].clip(lower=1))
    ax.errorbar(table.index, table["share"], yerr=error, marker="o", markersize=3, linewidth=0.6,
                label="share of close completions")
    abnormal = [x for x in answer.extra.get("abnormal_distances", []) if x in table.index]
    if abnormal:
        ax.scatter(abnormal, table.loc[abnormal, "share"], color="tab:red", zorder=5, s=25,
                   label="both units on one channel (the answer's layout)")
    return plots.save(fig, directory, "P5_channel_layout",
                      "Share of pairs of reads issued together whose completions fall within the 15th percentile of "
                      "all pairs' gaps, by the units between them: two reads on one channel cannot complete closer "
                      "than a page transfer on its bus.")

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


def pooled_equivalents(value: dict[str, int] | None, stripe: int) -> list[dict[str, int]]:
    """The pooled layouts that time exactly as ``value``: k x C channels in C groups (shared/device-model.md's
    ``channel_groups``: channels c and c' contend when c mod C == c' mod C, so unit u waits for the units
    u' = u mod C, as on C channels), for every k dividing the units a channel carries."""
    if not value or value.get("chips_per_channel", 1) <= 1:
        return []
    buses, units = int(value["channels"]), int(value["channels"]) * int(value["chips_per_channel"])
    return [{"channels": buses * k, "chips_per_channel": units // (buses * k), "channel_groups": buses}
            for k in range(2, units // buses + 1) if (units // buses) % k == 0 and buses * k <= stripe]


def said_as_buses(answer: Answer, stripe: int) -> Answer:
    """Say what a P5 answer is: the buses that contend, from read timing. Channels pooled into groups contend as
    one bus per group ("Fantastic SSD Internals and How to Learn and Use Them": N1.6TS's 16 channels in 4 pools),
    so C channels and k x C channels in C groups time alike: the answer is the C buses (validate scores it so,
    truth.observable_layout), and the pooled layouts it cannot exclude are listed in ``pooled_equivalents``."""
    same = pooled_equivalents(answer.value, stripe)
    if not same or answer.confidence is None:
        return answer
    answer.extra["pooled_equivalents"] = same
    listed = ", ".join(f"{v['channels']} x {v['chips_per_channel']}" for v in same[:3])
    answer.evidence += (f"; channels are counted as the buses that contend: {listed} channels pooled into "
                        f"{answer.value['channels']} groups would time the same")
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
    answer = said_as_buses(answer, int(_known_value(known, "P4") or 1))
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
    # Is there timing noise? One page read NOISE_CHECK_READS times, one at a time: without noise every read
    # takes the same time, and a pair's completion gap shows the bus exactly (:func:`run_pairs`); with noise the
    # gaps spread and only how often pairs complete close together shows it (:func:`run_noisy_pairs`).
    check = (first_row + rows) * row - page  # the last page of the area: no pair reads it before
    repeat = _trace(ctx, _reads(start=check, length=page, size=page, ops=NOISE_CHECK_READS, batch=1,
                                pattern={"kind": "sequential"}), "P5 timing noise check")["latency_ns"]
    # The reads after the first: a read buffer serves the repeats (kelpie-a800g-p's 16 MiB), so a noise-free drive
    # with one reads the first slower and was taken for noisy.
    again = repeat.iloc[1:]
    if len(again) and int(again.max()) == int(again.min()):
        answer = run_pairs(ctx, page, chunk, stripe)
        answer.figures.append(pair_figure(answer, directory))
        return answer
    size = read_size(ctx, check, page)
    answer = run_noisy_pairs(ctx, page, chunk, stripe, size)
    if size != sector_read(ctx):
        answer.evidence += (f"; read {format_size(size)} a page: a read of one logical block took longer than the "
                            "whole page (the drive penalises reads smaller than its alignment, which would space "
                            "them too far apart to meet on a bus)")
    answer.figures.append(noisy_pair_figure(answer, directory))
    return answer


PROBES = [
    Probe("P2", "page type", REFILLED, ("P1", "P3", "P4"), run_page_type),
    Probe("P4", "stripe width", REFILLED, ("P1", "P3"), run_stripe_width, unit="chunks"),
    Probe("P5", "channel/chip layout", REFILLED, ("P1", "P3", "P4"), run_channel_layout),
]
