"""P8 write buffer capacity, P9 write parallelism and P10 internal flush window (seed 003 §3.1 ``F6_conSeqW`` and
``F7_seqwSleep``, §4.2-4.4, Table 4). All three write into erased space: a probe trims what it wrote before it
writes there again, and when it is done.

- P8: concurrent sequential writes from an empty buffer (a host flush empties it first). A full buffer makes the
  write that overflows it wait for a flush: a latency spike. The bytes written before the first spike are the
  capacity; when later spikes come closer together than that, the buffer flushes only part of itself (Table 4's
  "p"); a rare, much larger spike after many first-level ones is a second level filling up. The written amount
  grows until enough spikes are seen (buffers range from none to hundreds of MiB). A repeat with smaller writes
  refines the capacity and tells a buffer counted in bytes from one counted in write commands (§4.2, A200GH).
- P9: batches of smallest-size writes issued at the same instant, each batch meeting an empty queue; the writes
  of a batch complete in clusters, and the size of the first cluster is the parallelism. A device that serialises
  such batches (§4.4) shows clusters of one; then a queue that never drains tells its parallelism from the
  completion rate (writes per buffer-insert time).
- P10: batches of three quarters of the buffer separated by idle gaps, the gap found by a geometric binary search
  between 2 ms and 5 s: the shortest gap after which the next batches see no spike. Never ("inf") when even 5 s
  does not drain the buffer; 0 when there is no buffer to drain.

The spikes are found as seed 003 §3.2 does: Jenks natural breaks on the (log) latencies, 2 to 5 classes chosen by
silhouette (the answer's confidence), the classes above the most populated one being the abnormal points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis.jenks import Classification, classify_best, silhouette_1d
from ..experiments.context import Context
from ..units import format_ns, format_size
from ..workload import Workload
from .base import ERASED, Answer, Probe, until_stable

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
MS = 1_000_000
S = 1_000_000_000

# F6_conSeqW: writes fine enough to place a flush within 1/8 of the smallest buffers seen (512 KiB), few enough in
# flight that a flush stands out against the normal latency (two: "concurrent", as the paper's writes).
WRITE_SIZE = 64 * KIB
QUEUE_DEPTH = 2
FIRST_CHUNK = 8 * MIB
MAX_CHUNK = 128 * MIB
# Write at least this much in the first round to meet a second level (Table 4: 126.5 MB to 810 MB) ...
SECOND_LEVEL_SEARCH = 1 * GIB
# ... and never more than this, even when a huge first level has shown fewer than MIN_FLUSHES spikes.
MAX_WRITTEN = 3 * GIB
MIN_FLUSHES = 4
MAX_IOS_WRITE = 4 * MIB  # the largest writes tried to outgrow a buffer that counts write commands
# A flush spike is at least this many times the normal write latency; a second-level flush this many times the
# first level's spikes. Jenks always finds classes; these keep noise on a flat series from passing as flushes.
SPIKE_RATIO = 3.0
SECOND_LEVEL_RATIO = 4.0
# Jenks natural breaks costs O(n^2): longer series are classified on a quantile sample (plus their largest
# values, so that rare spikes are in it), and the breaks then label every point.
MAX_JENKS_POINTS = 3000

# P9: batches of writes issued at the same instant.
FIRST_BATCH = 16
MAX_BATCH = 256
BATCHES = 24
BOUNDARY_RATIO = 3.0  # the step between two completion clusters against the steps inside one

# P10: F7_seqwSleep's binary search over idle gaps.
GAP_MIN_NS = 2 * MS
GAP_MAX_NS = 5 * S
GAP_FLOOR_NS = 62_500  # below 2 ms the search halves down to this before giving up on finding a spike
GAP_GROWTH = 4
GAP_RESOLUTION = 1.4  # stop when the clean and the spiked gap are this close (factor)
BATCH_FRACTION = 0.75  # of the P8 capacity per batch: one batch into an empty buffer never overflows it
GAP_BATCHES = 3


# ---- analysis: pure functions on latencies (unit-tested on synthetic series) -----------------------------------


def classify(values, *, log: bool, min_classes: int = 2, max_classes: int = 5) -> list[Classification]:
    """Jenks natural breaks with 2-5 classes, best silhouette first (seed 003 §3.2), labels for every value.
    ``log``: classify log10 of the values (latencies spanning microseconds to seconds)."""
    x = np.asarray(values, dtype=float)
    if log:
        x = np.log10(np.maximum(x, 1.0))
    if len(x) <= MAX_JENKS_POINTS:
        return classify_best(x, min_classes, max_classes)
    ordered = np.sort(x)
    top = min(len(x) // 100, MAX_JENKS_POINTS // 10)
    index = np.linspace(0, len(x) - top - 1, MAX_JENKS_POINTS - top).round().astype(int)
    sample = np.concatenate([ordered[index], ordered[len(x) - top:]])
    out = []
    for c in classify_best(sample, min_classes, max_classes):
        labels = np.clip(np.searchsorted(np.asarray(c.breaks[1:-1]), x, side="left"), 0, c.n_classes - 1)
        if len(np.unique(labels)) < 2:
            continue
        out.append(Classification(c.n_classes, c.breaks, labels, silhouette_1d(x, labels)))
    return sorted(out, key=lambda c: -c.silhouette)


def spike_mask(latency_ns, classification: Classification | None) -> np.ndarray:
    """The abnormal writes: in a class above the most populated one and at least SPIKE_RATIO times its median."""
    lat = np.asarray(latency_ns, dtype=float)
    if classification is None:
        return np.zeros(len(lat), dtype=bool)
    labels = classification.labels
    normal = int(np.argmax(classification.counts()))
    base = float(np.median(lat[labels == normal]))
    return (labels > normal) & (lat >= SPIKE_RATIO * base)


def quick_spikes(latency_ns) -> np.ndarray:
    """A cheap spike test for deciding when to stop writing: SPIKE_RATIO times the median."""
    lat = np.asarray(latency_ns, dtype=float)
    return lat >= SPIKE_RATIO * float(np.median(lat)) if len(lat) else np.zeros(0, dtype=bool)


def spike_events(position, latency_ns, mask) -> pd.DataFrame:
    """One row per flush: the first write of each run of abnormal writes, with the bytes written before it
    (``position``), the run's longest latency (``peak_ns``) and its length in writes."""
    position = np.asarray(position)
    lat = np.asarray(latency_ns, dtype=float)
    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        return pd.DataFrame({"index": [], "position": [], "peak_ns": [], "writes": []})
    starts = mask & ~np.r_[False, mask[:-1]]
    run = np.cumsum(starts)[mask] - 1
    peaks = np.zeros(int(starts.sum()))
    np.maximum.at(peaks, run, lat[mask])
    return pd.DataFrame({
        "index": np.flatnonzero(starts),
        "position": position[starts],
        "peak_ns": peaks,
        "writes": np.bincount(run),
    })


def common_interval(values, tolerance: float = 0.05) -> tuple[float, float] | None:
    """The most common value among ``values`` (intervals between neighbouring abnormal points, seed 003 §3.2),
    values within ``tolerance`` of each other counting as one: (value, share of all values)."""
    v = np.sort(np.asarray(values, dtype=float))
    v = v[v > 0]
    if len(v) == 0:
        return None
    groups: list[list[float]] = [[v[0]]]
    for x in v[1:]:
        if x <= groups[-1][0] * (1 + tolerance):
            groups[-1].append(x)
        else:
            groups.append([x])
    best = max(groups, key=len)  # ties: the smaller value, as groups are in increasing order
    return float(np.median(best)), len(best) / len(v)


@dataclass
class BufferReading:
    """What one series of writes from an empty buffer says about the buffer (bytes)."""

    size: int
    capacity: int
    first: int | None = None  # bytes written before the first flush
    interval: int | None = None  # most common bytes between flushes
    share: float = 0.0
    partial: int | None = None
    second_level: int | None = None
    flushes: int = 0
    confidence: float | None = None
    classes: int = 0

    @property
    def interval_writes(self) -> float | None:
        return None if not self.interval else self.interval / self.size


def read_buffer(position, latency_ns, size: int, classification: Classification | None) -> BufferReading:
    """Seed 003's P8 reading of one series: the flushes are the abnormal writes; the capacity is the bytes
    before the first flush (the buffer started empty) or, when that is shorter, the most common interval."""
    lat = np.asarray(latency_ns, dtype=float)
    mask = spike_mask(lat, classification)
    events = spike_events(position, lat, mask)
    confidence = None if classification is None else classification.silhouette
    classes = 0 if classification is None else classification.n_classes
    if events.empty:
        return BufferReading(size, 0, flushes=0, confidence=_flatness(lat), classes=classes)
    positions = events["position"].to_numpy(dtype=float)
    first = int(positions[0])
    common = common_interval(np.diff(positions))
    interval = None if common is None else int(round(common[0]))
    share = 0.0 if common is None else common[1]
    capacity = first
    partial = None
    if interval is not None:
        if first < 0.9 * interval:
            capacity = interval  # the buffer was not empty at the start: trust the spacing
        elif interval < 0.9 * first:
            partial = interval  # later flushes free only part of it (Table 4 "p")
    second = _second_level(events, capacity)
    return BufferReading(size, capacity, first, interval, share, partial, second, len(events), confidence, classes)


def second_level_flushes(events: pd.DataFrame) -> list[int]:
    """The flushes (rows of ``events``) far longer than the first level's (a whole level programmed to NAND)
    and followed by ordinary ones again: a lasting change, e.g. an exhausted SLC cache, is no second level."""
    peaks = events["peak_ns"].to_numpy(dtype=float)
    if len(peaks) < 3:
        return []
    big = peaks >= SECOND_LEVEL_RATIO * float(np.percentile(peaks, 25))
    return [int(i) for i in np.flatnonzero(big) if i + 1 < len(peaks) and not big[i + 1]]


def _second_level(events: pd.DataFrame, first_level: int) -> int | None:
    """A second level's size: the bytes that went into it before its first flush, i.e. everything written but
    what the first level holds."""
    flushes = second_level_flushes(events)
    if not flushes:
        return None
    size = int(events["position"].iloc[flushes[0]]) - first_level
    return size if size > first_level else None


def _flatness(latency_ns) -> float:
    """Confidence that a series has no spikes: 1 when its longest latency is its median, 0 at SPIKE_RATIO."""
    lat = np.asarray(latency_ns, dtype=float)
    if len(lat) == 0:
        return 0.0
    ratio = float(lat.max() / max(np.median(lat), 1.0))
    return float(np.clip(1 - (ratio - 1) / (SPIKE_RATIO - 1), 0.0, 1.0))


def combine_buffer_readings(readings: list[BufferReading]) -> tuple[BufferReading, int | None, str]:
    """Series at several write sizes. A buffer that also flushes after a number of write commands (capacity_ios)
    flushes sooner, in bytes, with small writes: a series whose capacity falls short of the largest by more than
    10 % and more than one write is limited by the count, which is its bytes before the first flush over its
    write size. The byte capacity is read from the finest series that is not. Returns (reading used,
    capacity_ios or None, a note)."""
    found = [r for r in readings if r.capacity > 0]
    if not found:
        return readings[0], None, ""
    top = max(r.capacity for r in found)
    limited = [r for r in found if top - r.capacity > max(0.1 * top, r.size)]
    full = [r for r in found if r not in limited]
    ios = int(round(float(np.median([r.capacity / r.size for r in limited])))) if limited else None
    note = ""
    largest = max(found, key=lambda r: r.size)
    if ios is not None and full == [largest] and abs(largest.capacity / largest.size - ios) <= 0.05 * ios:
        note = (f"every write size tried flushed after {ios} writes, so the byte capacity is at least "
                f"{format_size(largest.capacity)}")
    # The finest writes place the flush best; among equals, the series with the clearer classification.
    chosen = min(full, key=lambda r: (r.size, -(r.confidence or 0)))
    return chosen, ios, note


@dataclass
class BatchReading:
    """What batches of simultaneous writes say: the writes of the first completion cluster (None: the whole
    batch completed as one cluster), the time between clusters, and how clear the clusters are."""

    parallelism: int | None
    period_ns: float
    confidence: float
    alternatives: list[dict[str, Any]]
    serial: bool  # every write its own cluster, evenly spaced


def read_batches(frame: pd.DataFrame) -> BatchReading:
    """``frame``: ``batch`` and ``latency_ns`` per write. The sorted latencies of a batch rise in steps; the large
    steps (Jenks' highest class of the steps) separate completion clusters. Batches that met a flush (their last
    completion more than twice the quickest batch's) are left out."""
    groups = [np.sort(g.to_numpy(dtype=float)) for _, g in frame.groupby("batch")["latency_ns"]]
    groups = [g for g in groups if len(g) >= 2]
    if not groups:
        return BatchReading(None, 0.0, 0.0, [], False)
    worst = np.array([g[-1] for g in groups])
    groups = [g for g, w in zip(groups, worst, strict=True) if w <= 2 * worst.min()]
    batch = len(groups[0])
    steps = [np.diff(g) for g in groups]
    pooled = np.concatenate(steps)
    readings: list[tuple[int | None, float, float]] = []
    for c in classify(pooled, log=False):
        top = c.labels == c.n_classes - 1
        bottom = c.labels == 0
        if pooled[top].mean() < BOUNDARY_RATIO * max(pooled[bottom].mean(), 1.0):
            continue
        breaks = np.asarray(c.breaks[1:-1])
        threshold = breaks[-1]
        firsts, periods = [], []
        for g, d in zip(groups, steps, strict=True):
            big = np.flatnonzero(d > threshold)
            if len(big) == 0:
                firsts.append(len(g))
                continue
            firsts.append(int(big[0]) + 1)
            periods.append(g[big[0] + 1] - g[0])
        values, counts = np.unique(firsts, return_counts=True)
        p = int(values[np.argmax(counts)])
        readings.append((None if p >= batch else p, float(np.median(periods)) if periods else 0.0, c.silhouette))
    if readings:
        p, period, confidence = readings[0]
        alternatives = []
        for q, _, s in readings[1:]:
            if q != p and all(a["value"] != q for a in alternatives):
                alternatives.append({"value": q, "confidence": round(s, 4)})
        return BatchReading(p, period, confidence, alternatives, False)
    # One level of steps: evenly spaced completions (one at a time), or all at once.
    step = float(np.median(pooled))
    first = float(np.median([g[0] for g in groups]))
    if step >= 0.1 * first:
        spread = float(np.std(pooled) / max(step, 1.0))
        return BatchReading(1, step, float(np.clip(1 - spread, 0, 1)), [], True)
    return BatchReading(None, 0.0, 1.0, [], False)


def busy_parallelism(frame: pd.DataFrame, depth: int, period_ns: float) -> float:
    """Writes the buffer admits per insert time, from a queue kept ``depth`` deep: the completion rate times the
    time between completion clusters. ``frame``: ``submit_ns``, ``complete_ns``, ``latency_ns`` in submission
    order. The rate is counted from when the first ``depth`` writes (which met an empty queue, and may have been
    serialised) have completed, to the last submission (then the queue drains); gaps between completions longer
    than SPIKE_RATIO times the median latency are flushes, not the buffer's pace, and are left out."""
    if period_ns <= 0 or len(frame) <= 2 * depth:
        return 0.0
    start = float(frame["complete_ns"].iloc[:depth].max())
    end = float(frame["submit_ns"].iloc[-1])
    done = np.sort(frame["complete_ns"].to_numpy(dtype=float))
    done = done[(done >= start) & (done <= end)]
    gaps = np.diff(done)
    if len(gaps) == 0:
        return 0.0
    kept = gaps[gaps <= SPIKE_RATIO * float(np.median(frame["latency_ns"].to_numpy(dtype=float)))]
    return float(len(kept) / kept.sum() * period_ns) if kept.sum() > 0 else 0.0


def flush_window(tests: pd.DataFrame) -> tuple[float | None, float | None]:
    """``tests``: one row per idle-gap test with ``gap_ns`` and ``spiked``. The shortest gap after which no test
    with that or a longer gap spiked (seconds; None = even the longest spiked), and the longest spiked gap."""
    by_gap = tests.groupby("gap_ns")["spiked"].any().sort_index()
    if by_gap.empty:
        return None, None
    if by_gap.iloc[-1]:
        return None, float(by_gap.index[-1]) / 1e9
    spiked = by_gap[by_gap]
    longest_spiked = float(spiked.index[-1]) if not spiked.empty else None
    clean = by_gap[(~by_gap) & (by_gap.index > (longest_spiked if longest_spiked is not None else -1))]
    return float(clean.index[0]) / 1e9, None if longest_spiked is None else longest_spiked / 1e9


# ---- measurement ------------------------------------------------------------------------------------------------


class Region:
    """Logical space for a probe's writes: each measurement takes the next piece, so no write lands on a page the
    probe wrote before (the device was erased: every write finds an empty page). ``release`` trims it all."""

    def __init__(self, ctx: Context, start: int = 0):
        self.ctx = ctx
        self.start = start
        self.next = start
        self.end = start
        self.limit = ctx.capacity // MIB * MIB

    def take(self, length: int) -> int:
        offset = -(-self.next // MIB) * MIB
        if offset + length > self.limit:
            offset = self.start  # a small target: write over the start again
        self.next = offset + length
        self.end = min(max(self.end, self.next), self.limit)
        return offset

    def recycle(self) -> None:
        """Trim everything taken so far and start again from the beginning: erased space once more, without
        writing ever further into the device (the host flush that starts every measurement drops what the
        buffer still held of it)."""
        if self.end > self.start:
            length = -(-(self.end - self.start) // MIB) * MIB
            wl = Workload(mix={"trim": 100}, sizes=[MIB], pattern={"kind": "sequential"},
                          range={"start": self.start, "length": length}, queue_depth=8, stop={"bytes": length})
            self.ctx.run(wl, f"trim the {format_size(length)} written")
        self.next = self.end = self.start

    release = recycle


def flush_cache(ctx: Context) -> None:
    """A host flush: the write buffer (every level) empties, so the next write fills it from nothing."""
    ctx.run(Workload(mix={"flush": 100}, stop={"ops": 1}), "host flush (empty the write buffer)")


def write_series(ctx: Context, start: int, length: int, size: int, qd: int, label: str) -> pd.DataFrame:
    """Sequential writes of ``size`` over ``[start, start + length)`` at queue depth ``qd``, in submission order:
    ``position`` (bytes written before each, from ``start``), ``latency_ns``, ``submit_ns``, ``complete_ns``."""
    length = max(length // size, 1) * size
    wl = Workload(mix={"write": 100}, sizes=[size], pattern={"kind": "sequential"},
                  range={"start": start, "length": length}, queue_depth=qd, stop={"bytes": length})
    trace = ctx.run(wl, label, trace=True).trace
    t = trace[trace["op"] == "write"].sort_values(["submit_ns", "offset"])
    return pd.DataFrame({
        "position": t["offset"].to_numpy(dtype=np.int64) - start,
        "size": t["size"].to_numpy(dtype=np.int64),
        "latency_ns": t["latency_ns"].to_numpy(dtype=np.int64),
        "submit_ns": t["submit_ns"].to_numpy(dtype=np.int64),
        "complete_ns": t["complete_ns"].to_numpy(dtype=np.int64),
    })


def fill_until_flushes(ctx: Context, region: Region, size: int, *, second_level: int, limit: int,
                       series: int) -> pd.DataFrame:
    """F6_conSeqW from an empty buffer into erased space, in growing pieces with no pause between them (the
    buffer does not drain), until MIN_FLUSHES spikes are seen (and at least ``second_level`` bytes written, and any
    second-level flush followed by an ordinary one), or ``limit`` bytes."""
    region.recycle()
    flush_cache(ctx)
    frames: list[pd.DataFrame] = []
    written = 0
    chunk = FIRST_CHUNK
    while written < limit:
        chunk = max(min(chunk, limit - written) // size * size, size)
        frame = write_series(ctx, region.take(chunk), chunk, size, QUEUE_DEPTH,
                             f"sequential {format_size(size)} writes, {format_size(written)}+{format_size(chunk)}")
        frame["position"] += written
        frames.append(frame)
        written += chunk
        if _enough(pd.concat(frames, ignore_index=True), written, second_level):
            break
        chunk = min(chunk * 2, MAX_CHUNK)
    out = pd.concat(frames, ignore_index=True)
    out["series"] = series
    return out


def _enough(frame: pd.DataFrame, written: int, second_level: int) -> bool:
    lat = frame["latency_ns"].to_numpy()
    events = spike_events(frame["position"].to_numpy(), lat, quick_spikes(lat))
    if written < second_level:
        return False
    if len(events) == 0:
        return 0 < second_level <= written  # no buffer, or one beyond reach; else write up to the limit
    if len(events) < MIN_FLUSHES:
        return False
    peaks = events["peak_ns"].to_numpy(dtype=float)
    return not (peaks[-1] >= SECOND_LEVEL_RATIO * np.percentile(peaks, 25))  # wait for an ordinary flush after


def _series_readings(frame: pd.DataFrame) -> tuple[list[BufferReading], dict[int, Classification | None]]:
    readings, chosen = [], {}
    for sid, s in frame.groupby("series", sort=True):
        classes = classify(s["latency_ns"].to_numpy(), log=True)
        c = classes[0] if classes else None
        chosen[int(sid)] = c
        readings.append(read_buffer(s["position"].to_numpy(), s["latency_ns"].to_numpy(), int(s["size"].iloc[0]), c))
    return readings, chosen


# ---- P8 ----------------------------------------------------------------------------------------------------------


def probe_write_buffer(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    region = Region(ctx)
    size = max(WRITE_SIZE, ctx.logical_block)
    fine = max(size // 4, ctx.logical_block, 4 * KIB)
    # On a small device, less: the probe must not wear it or fill it (it trims what it wrote between series).
    search = min(SECOND_LEVEL_SEARCH, ctx.capacity // 8 // MIB * MIB)
    most = max(min(MAX_WRITTEN, ctx.capacity // 4 // MIB * MIB), search)
    state: dict[str, Any] = {"series": 0}

    def next_series() -> int:
        state["series"] += 1
        return state["series"] - 1

    def measure_round(index: int) -> pd.DataFrame:
        if index == 0:
            frame = fill_until_flushes(ctx, region, size, second_level=search, limit=most, series=next_series())
            state["main"] = _read_series(frame)
            return frame
        main: BufferReading = state["main"]
        if index > 1:
            return fill_until_flushes(ctx, region, size, second_level=0, limit=_limit(main, size, search),
                                      series=next_series())
        frames = [fill_until_flushes(ctx, region, fine, second_level=0, limit=_limit(main, fine, search),
                                     series=next_series())]
        reading = _read_series(frames[-1])
        # Flushes sooner (in bytes) with smaller writes: the buffer also counts commands (capacity_ios). While a
        # larger size flushes after as many writes, it is counted too: larger writes, until the bytes fill first.
        if reading.capacity and main.capacity - reading.capacity > max(0.1 * main.capacity, reading.size):
            count = reading.capacity / reading.size
            previous = main
            while abs(previous.capacity / previous.size - count) <= 0.05 * count and previous.size < MAX_IOS_WRITE:
                larger = previous.size * 4
                frames.append(fill_until_flushes(ctx, region, larger, second_level=0,
                                                 limit=_limit(main, larger, search), series=next_series()))
                previous = _read_series(frames[-1])
        return pd.concat(frames, ignore_index=True)

    answer = until_stable(measure_round, analyse_write_buffer, min_rounds=2, max_rounds=3)
    region.release()
    answer.figures = [figure_write_buffer(answer.raw, directory, int(answer.value or 0))]
    return answer


def _best(classes: list[Classification]) -> Classification | None:
    return classes[0] if classes else None


def _read_series(frame: pd.DataFrame) -> BufferReading:
    lat = frame["latency_ns"].to_numpy()
    return read_buffer(frame["position"].to_numpy(), lat, int(frame["size"].iloc[0]), _best(classify(lat, log=True)))


def _limit(main: BufferReading, size: int, most: int) -> int:
    """Bytes to write for MIN_FLUSHES flushes at ``size``, from what the first round saw (a flush after a
    number of writes comes sooner in bytes with smaller writes, later with larger ones)."""
    if not main.capacity:
        return min(64 * MIB, most)
    expected = (main.first or main.capacity) + (MIN_FLUSHES - 1) * (main.interval or main.capacity)
    expected = expected * max(size / main.size, 1.0) + size
    return int(min(max(2 * expected, 64 * MIB), most))


def analyse_write_buffer(frame: pd.DataFrame) -> Answer:
    readings, chosen = _series_readings(frame)
    reading, ios, note = combine_buffer_readings(readings)
    main = readings[0]
    extra: dict[str, Any] = {}
    if reading.partial:
        extra["partial_flush"] = reading.partial
    if main.second_level:
        extra["second_level"] = main.second_level
    if ios:
        extra["capacity_ios"] = ios
    sid = readings.index(reading)
    series_ids = sorted(chosen)
    raw = _mark_spikes(frame, chosen)
    alternatives = _buffer_alternatives(frame[frame["series"] == series_ids[sid]], reading)
    if reading.capacity == 0:
        used = frame[frame["series"] == series_ids[sid]]
        evidence = (f"no write among {len(used)} ({format_size(int(used['size'].sum()))} written into an empty "
                    f"buffer) waited {SPIKE_RATIO:g}x the normal latency: no blocking write buffer")
    else:
        evidence = (f"{reading.flushes} flush spikes in sequential {format_size(reading.size)} writes from an "
                    f"empty buffer; first after {format_size(reading.first or 0)}")
        if reading.interval:
            evidence += f", then every {format_size(reading.interval)} ({reading.share:.0%} of the intervals)"
        if reading.partial:
            evidence += f"; partial flushes of {format_size(reading.partial)}"
        if main.second_level:
            evidence += f"; a second level of {format_size(main.second_level)}"
        if ios:
            evidence += f"; flushes every {ios} writes whatever their size"
    if note:
        evidence += f"; {note}"
    return Answer(value=int(reading.capacity), confidence=reading.confidence, evidence=evidence,
                  alternatives=alternatives, extra=extra, raw=raw)


def _buffer_alternatives(series: pd.DataFrame, reading: BufferReading) -> list[dict[str, Any]]:
    """The capacity other class counts give (seed 003 Table 3), and the most common interval when it differs."""
    out: list[dict[str, Any]] = []
    seen = {reading.capacity}
    lat = series["latency_ns"].to_numpy()
    for c in classify(lat, log=True)[1:]:
        alt = read_buffer(series["position"].to_numpy(), lat, reading.size, c)
        if alt.capacity not in seen:
            seen.add(alt.capacity)
            out.append({"value": int(alt.capacity), "confidence": round(c.silhouette, 4)})
    if reading.interval and reading.interval not in seen:
        out.append({"value": int(reading.interval), "confidence": round((reading.confidence or 0) * reading.share, 4)})
    return out


def _mark_spikes(frame: pd.DataFrame, chosen: dict[int, Classification | None]) -> pd.DataFrame:
    """The raw latencies with ``spike`` (waited for a flush) and ``level`` (0 buffered, 1 first-level flush,
    2 second-level flush; marked on the first write of each flush)."""
    parts = []
    for sid, s in frame.groupby("series", sort=True):
        s = s.copy()
        mask = spike_mask(s["latency_ns"].to_numpy(), chosen[int(sid)])
        s["spike"] = mask
        level = mask.astype(np.int8)
        events = spike_events(s["position"].to_numpy(), s["latency_ns"].to_numpy(), mask)
        for i in second_level_flushes(events):
            level[int(events["index"].iloc[i])] = 2
        s["level"] = level
        parts.append(s)
    return pd.concat(parts, ignore_index=True)


def figure_write_buffer(raw: pd.DataFrame, directory: Path, capacity: int = 0) -> Path:
    """Seed 003 Figure 2: write latency against data written, flush spikes marked, the capacity as a line."""
    series = sorted(raw["series"].unique())[:3]
    fig, axes = plots.panels("P8 write buffer: write latency vs data written (F6_conSeqW)", 1, len(series),
                             size=(5.5 * len(series), 4.0))
    for ax, sid in zip(axes, series, strict=True):
        s = raw[raw["series"] == sid]
        x = s["position"].to_numpy() / MIB
        y = s["latency_ns"].to_numpy() / 1e3
        spike = s["spike"].to_numpy(dtype=bool)
        second = s["level"].to_numpy() == 2
        ax.scatter(x[~spike], y[~spike], s=3, color="tab:blue", label="buffered")
        ax.scatter(x[spike], y[spike], s=10, color="tab:red", label="waited for a flush")
        if second.any():
            ax.scatter(x[second], y[second], s=40, marker="D", color="tab:purple", label="second-level flush")
        if capacity:
            ax.axvline(capacity / MIB, color="grey", linestyle="--", linewidth=1,
                       label=f"capacity {format_size(capacity)}")
        ax.set_yscale("log")
        ax.set_xlabel("data written (MiB)")
        ax.set_ylabel("write latency (us)")
        ax.set_title(f"{format_size(int(s['size'].iloc[0]))} writes from an empty buffer", fontsize=9)
    return plots.save(fig, directory, "P8-write-buffer")


# ---- P9 ----------------------------------------------------------------------------------------------------------


def probe_write_parallelism(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    region = Region(ctx)
    size = max(ctx.logical_block, 512)
    state = {"batch": FIRST_BATCH, "depth": FIRST_BATCH}

    def measure_round(index: int) -> pd.DataFrame:
        while True:
            batch = state["batch"]
            frame = batch_series(ctx, region, size, batch, BATCHES)
            reading = read_batches(frame)
            if batch >= MAX_BATCH or (reading.parallelism is not None and reading.parallelism <= batch // 2):
                break
            state["batch"] = min(batch * 4, MAX_BATCH)  # too few clusters in a batch to read one off
        frame["kind"], frame["depth"] = "batch", batch
        frames = [frame]
        while True:
            depth = max(state["depth"], batch)
            busy = busy_series(ctx, region, size, depth, depth * max(32, depth))
            busy["kind"], busy["depth"] = "busy", depth
            frames.append(busy)
            if depth >= MAX_BATCH or 2 * busy_parallelism(busy, depth, reading.period_ns) <= depth:
                break
            state["depth"] = min(depth * 4, MAX_BATCH)  # the queue ran short of writes: deeper
        out = pd.concat(frames, ignore_index=True)
        out["series"] = index
        return out

    answer = until_stable(measure_round, analyse_write_parallelism, min_rounds=2, max_rounds=4)
    region.release()
    answer.figures = [figure_write_parallelism(answer.raw, directory)]
    return answer


def batch_series(ctx: Context, region: Region, size: int, batch: int, batches: int) -> pd.DataFrame:
    """Batches of ``batch`` writes issued at one instant; each batch waits for the previous one to complete,
    so it meets an empty queue."""
    length = batch * batches * size
    start = region.take(length)
    wl = Workload(mix={"write": 100}, sizes=[size], pattern={"kind": "sequential"},
                  range={"start": start, "length": length}, queue_depth=batch,
                  batch={"size": batch, "idle_ns": 0}, stop={"ops": batch * batches})
    t = ctx.run(wl, f"{batches} batches of {batch} concurrent {format_size(size)} writes", trace=True).trace
    t = t[t["op"] == "write"].sort_values(["submit_ns", "offset"])
    submit = t["submit_ns"].to_numpy(dtype=np.int64)
    return pd.DataFrame({
        "batch": np.unique(submit, return_inverse=True)[1],
        "latency_ns": t["latency_ns"].to_numpy(dtype=np.int64),
        "submit_ns": submit,
        "complete_ns": t["complete_ns"].to_numpy(dtype=np.int64),
    })


def busy_series(ctx: Context, region: Region, size: int, depth: int, ops: int) -> pd.DataFrame:
    """A queue kept ``depth`` deep: every write arrives while others are pending."""
    length = ops * size
    wl = Workload(mix={"write": 100}, sizes=[size], pattern={"kind": "sequential"},
                  range={"start": region.take(length), "length": length}, queue_depth=depth, stop={"ops": ops})
    t = ctx.run(wl, f"{ops} {format_size(size)} writes at queue depth {depth}", trace=True).trace
    t = t[t["op"] == "write"].sort_values(["submit_ns", "offset"])
    return pd.DataFrame({
        "latency_ns": t["latency_ns"].to_numpy(dtype=np.int64),
        "submit_ns": t["submit_ns"].to_numpy(dtype=np.int64),
        "complete_ns": t["complete_ns"].to_numpy(dtype=np.int64),
    })


def analyse_write_parallelism(frame: pd.DataFrame) -> Answer:
    batch_kind, busy_kind = frame[frame["kind"] == "batch"], frame[frame["kind"] == "busy"]
    largest = int(batch_kind["depth"].max())
    batches = batch_kind[batch_kind["depth"] == largest].copy()
    batches["batch"] = batches["series"] * 1_000_000 + batches["batch"]
    reading = read_batches(batches)
    depth = int(busy_kind["depth"].max()) if not busy_kind.empty else 0
    estimates = [busy_parallelism(s, depth, reading.period_ns)
                 for _, s in busy_kind[busy_kind["depth"] == depth].groupby("series")]
    busy = float(np.median(estimates)) if estimates else 0.0
    rate = busy / reading.period_ns if reading.period_ns > 0 else 0.0
    serialised = reading.serial and round(busy) >= 2
    alternatives = list(reading.alternatives)
    if serialised:
        value = int(round(busy))
        evidence = (f"a batch meeting an empty queue completes one write every {format_ns(reading.period_ns)} "
                    f"(serialised); with the queue kept {depth} deep, {rate * 1e9:,.0f} writes/s = "
                    f"{busy:.2f} writes per {format_ns(reading.period_ns)}")
    elif reading.parallelism is None:
        value = largest
        evidence = f"all {largest} writes of a batch completed together: at least {largest} in parallel"
    else:
        value = reading.parallelism
        evidence = (f"of {largest} writes issued at once, the first {value} complete together, the next cluster "
                    f"{format_ns(reading.period_ns)} later")
        if reading.serial:
            evidence = (f"writes of a batch complete one at a time, {format_ns(reading.period_ns)} apart, also with "
                        f"a busy queue ({busy:.2f} writes per step): parallelism 1")
        elif busy and round(busy) != value:
            evidence += f"; a busy queue gives {busy:.2f} writes per cluster period"
            alternatives.append({"value": int(round(busy)), "confidence": None})
    raw = frame.copy()
    return Answer(value=int(value), confidence=reading.confidence, evidence=evidence, alternatives=alternatives,
                  extra={"serialized_when_idle": bool(serialised)}, raw=raw)


def figure_write_parallelism(raw: pd.DataFrame, directory: Path) -> Path:
    """Seed 003 Figure 4: completion latency of the i-th write of a batch; and completions in a busy queue."""
    fig, (left, right) = plots.panels("P9 write parallelism: concurrent writes", 1, 2, size=(11, 4.0))
    largest = int(raw.loc[raw["kind"] == "batch", "depth"].max())
    batches = raw[(raw["kind"] == "batch") & (raw["depth"] == largest) & (raw["series"] == raw["series"].min())]
    for _, g in batches.groupby("batch"):
        lat = np.sort(g["latency_ns"].to_numpy()) / 1e3
        left.plot(np.arange(1, len(lat) + 1), lat, marker="o", markersize=3, alpha=0.4, color="tab:blue")
    left.set_xlabel("i-th completion in a batch issued at once")
    left.set_ylabel("latency (us)")
    left.set_title(f"batches of {largest} meeting an empty queue", fontsize=9)
    deepest = int(raw.loc[raw["kind"] == "busy", "depth"].max())
    busy = raw[(raw["kind"] == "busy") & (raw["depth"] == deepest) & (raw["series"] == raw["series"].min())]
    done = np.sort(busy["complete_ns"].to_numpy())
    done = done[len(done) // 2: len(done) // 2 + 4 * deepest]
    if len(done):
        right.step((done - done[0]) / 1e3, np.arange(1, len(done) + 1), where="post")
    right.set_xlabel("time (us)")
    right.set_ylabel("writes completed")
    right.set_title(f"queue kept {deepest} deep", fontsize=9)
    return plots.save(fig, directory, "P9-write-parallelism")


# ---- P10 ---------------------------------------------------------------------------------------------------------


def probe_flush_window(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    region = Region(ctx)
    buffer = known.get("P8")
    capacity = int(buffer.value) if buffer is not None and buffer.value else 0
    if capacity == 0:
        # Nothing buffered, nothing to drain: a write never waits for a flush, whatever the gap.
        frame = gap_test(ctx, region, 4 * MIB, WRITE_SIZE, 0, batches=2)
        region.release()
        frame["spiked"] = False
        answer = Answer(value=0.0, confidence=None if buffer is None else buffer.confidence,
                        evidence="no write buffer (P8): writes never wait for a flush, with or without idle time",
                        raw=frame)
        answer.figures = [figure_flush_window(frame, pd.DataFrame(), directory)]
        return answer
    ios = (buffer.extra or {}).get("capacity_ios")
    size = min(WRITE_SIZE, _power_of_two_below(capacity // 8))
    if ios:
        size = max(size, _power_of_two_above(capacity / ios))
    size = max(size, ctx.logical_block, 4 * KIB)
    state: dict[str, Any] = {"fraction": BATCH_FRACTION, "test": 0}

    def test(gap_ns: int) -> bool:
        """One F7_seqwSleep test: is there a spike after ``gap_ns`` of idle time?"""
        while True:
            batch = max(int(capacity * state["fraction"]) // size, 1) * size
            frame = gap_test(ctx, region, batch, size, gap_ns, batches=GAP_BATCHES)
            frame["test"] = state["test"]
            frame["fraction"] = state["fraction"]
            state["test"] += 1
            state.setdefault("frames", []).append(frame)
            first = frame[frame["batch"] == 0]["latency_ns"].to_numpy()
            later = frame[frame["batch"] > 0]["latency_ns"].to_numpy()
            if quick_spikes(first).any() and state["fraction"] > 0.2:
                state["fraction"] /= 2  # one batch overflowed an empty buffer: P8 read it too large
                continue
            return bool(later.max() >= SPIKE_RATIO * np.median(first))

    def measure_round(index: int) -> pd.DataFrame:
        state["frames"] = []
        if index == 0:
            search(test)
        else:
            # Confirm the boundary the first round found.
            for gap in state["confirm"]:
                test(gap)
        frame = pd.concat(state["frames"], ignore_index=True)
        frame["round"] = index
        return frame

    def search(spiked) -> None:
        """The shortest clean gap: up from 2 ms in steps of 4 to the first gap without a spike (5 s at most:
        never, if that still spikes), or down by halves when even 2 ms is clean; then a geometric binary search
        between the longest spiked and the shortest clean gap."""
        lo, hi = None, GAP_MIN_NS
        if spiked(hi):
            while True:
                lo, hi = hi, min(hi * GAP_GROWTH, GAP_MAX_NS)
                if not spiked(hi):
                    break
                if hi >= GAP_MAX_NS:
                    state["confirm"] = [GAP_MAX_NS]
                    return
        else:
            while hi > GAP_FLOOR_NS:
                if spiked(hi // 2):
                    lo = hi // 2
                    break
                hi //= 2
            else:
                state["confirm"] = [hi]
                return
        while hi / lo > GAP_RESOLUTION:
            mid = int(math.sqrt(lo * hi))
            if spiked(mid):
                lo = mid
            else:
                hi = mid
        state["confirm"] = [lo, hi]

    answer = until_stable(measure_round, analyse_flush_window, min_rounds=2, max_rounds=3)
    region.release()
    tests = _gap_tests(answer.raw)
    answer.figures = [figure_flush_window(answer.raw, tests, directory, answer.value)]
    return answer


def gap_test(ctx: Context, region: Region, batch_bytes: int, size: int, gap_ns: int, *, batches: int) -> pd.DataFrame:
    """From an empty buffer into erased space: ``batches`` sequential batches of ``batch_bytes``, ``gap_ns`` of
    idle time between them."""
    region.recycle()
    flush_cache(ctx)
    frames = []
    for b in range(batches):
        if b:
            ctx.idle(gap_ns)
        frame = write_series(ctx, region.take(batch_bytes), batch_bytes, size, QUEUE_DEPTH,
                             f"batch {b + 1} of {format_size(batch_bytes)} after {format_ns(gap_ns)} idle")
        frame["batch"] = b
        frame["position"] += b * batch_bytes
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    out["gap_ns"] = gap_ns
    return out


def _gap_tests(raw: pd.DataFrame) -> pd.DataFrame:
    if raw is None or raw.empty or "spike" not in raw:
        return pd.DataFrame()
    later = raw[raw["batch"] > 0]
    return later.groupby(["round", "test"]).agg(gap_ns=("gap_ns", "first"), spiked=("spike", "any"),
                                                worst_ns=("latency_ns", "max")).reset_index()


def analyse_flush_window(frame: pd.DataFrame) -> Answer:
    lat = frame["latency_ns"].to_numpy()
    classes = classify(lat, log=True)
    answers: list[tuple[float | None, float | None, float]] = []
    raw = None
    for c in classes or [None]:
        marked = frame.copy()
        marked["spike"] = spike_mask(lat, c)
        window, longest_spiked = flush_window(_gap_tests(marked))
        answers.append((window, longest_spiked, c.silhouette if c is not None else _flatness(lat)))
        if raw is None:
            raw = marked
    window, longest_spiked, confidence = answers[0]
    alternatives = []
    for w, _, s in answers[1:]:
        if w != window and all(a["value"] != w for a in alternatives):
            alternatives.append({"value": w, "confidence": round(s, 4)})
    fraction = float(frame["fraction"].min())
    if window is None:
        evidence = (f"writes after {format_ns(longest_spiked * 1e9)} of idle time still waited for a flush: the "
                    f"buffer never drains while idle")
    else:
        evidence = f"batches of {fraction:.0%} of the buffer: no spike after {format_ns(window * 1e9)} idle"
        if longest_spiked is not None:
            evidence += f", a spike after {format_ns(longest_spiked * 1e9)}"
    return Answer(value=window, confidence=confidence, evidence=evidence, alternatives=alternatives, raw=raw)


def figure_flush_window(raw: pd.DataFrame, tests: pd.DataFrame, directory: Path,
                        window: float | None = None) -> Path:
    """Seed 003 Figure 3: the longest write latency after each idle gap tried; and the writes of the two tests
    either side of the answer (the longest gap that still spiked, the shortest that did not)."""
    fig, (left, right) = plots.panels("P10 internal flush window: batches separated by idle gaps (F7_seqwSleep)",
                                      1, 2, size=(11, 4.0))
    shown: list[tuple[pd.DataFrame, str, str]] = []
    if not tests.empty:
        for spiked, color, label in ((True, "tab:red", "spike"), (False, "tab:green", "no spike")):
            t = tests[tests["spiked"] == spiked]
            left.scatter(t["gap_ns"] / 1e6, t["worst_ns"] / 1e3, color=color, label=label)
        if window:
            left.axvline(window * 1e3, color="grey", linestyle="--", linewidth=1,
                         label=f"flush window {format_ns(window * 1e9)}")
        left.set_xscale("log")
        left.set_yscale("log")
        spiked = tests[tests["spiked"]]
        clean = tests[~tests["spiked"]]
        if not spiked.empty:
            row = spiked.loc[spiked["gap_ns"].idxmax()]
            shown.append((raw[(raw["round"] == row["round"]) & (raw["test"] == row["test"])], "tab:red",
                          f"after {format_ns(row['gap_ns'])}: spike"))
            clean = clean[clean["gap_ns"] > row["gap_ns"]]
        if not clean.empty:
            row = clean.loc[clean["gap_ns"].idxmin()]
            shown.append((raw[(raw["round"] == row["round"]) & (raw["test"] == row["test"])], "tab:green",
                          f"after {format_ns(row['gap_ns'])}: no spike"))
    elif raw is not None and not raw.empty:
        left.text(0.5, 0.5, "no write buffer (P8): no idle time needed", ha="center", va="center",
                  transform=left.transAxes)
        shown.append((raw, "tab:blue", "two batches back to back: no spike"))
    left.set_xlabel("idle gap between batches (ms)")
    left.set_ylabel("longest write latency after the gap (us)")
    for frame, color, label in shown:
        right.scatter(frame["position"] / MIB, frame["latency_ns"] / 1e3, s=4, color=color, label=label)
    right.set_yscale("log")
    right.set_xlabel("data written in the test (MiB; batches back to back, gaps not drawn)")
    right.set_ylabel("write latency (us)")
    return plots.save(fig, directory, "P10-flush-window")


def _power_of_two_below(n: float) -> int:
    return 1 << max(int(math.floor(math.log2(max(n, 1)))), 0)


def _power_of_two_above(n: float) -> int:
    return 1 << max(int(math.ceil(math.log2(max(n, 1)))), 0)


PROBES = [
    Probe("P8", "write buffer capacity", ERASED, (), probe_write_buffer, unit="bytes"),
    Probe("P9", "write parallelism", ERASED, (), probe_write_parallelism, unit="writes"),
    Probe("P10", "internal flush window", ERASED, ("P8",), probe_flush_window, unit="seconds"),
]
