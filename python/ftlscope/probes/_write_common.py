"""What the write probes (P8 write buffer, P9 write parallelism, P10 flush window) share: erased space to write
into, a host flush that empties the write buffer, sequential write series with their trace, and the flush
spikes in them.

The spikes are found as seed 003 §3.2 does: Jenks natural breaks on the (log) latencies, 2 to 5 classes chosen by
silhouette (the answer's confidence; :func:`~ftlscope.analysis.jenks.classify_series`), the classes above the most
populated one being the abnormal points.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..analysis.jenks import Classification
from ..experiments.context import Context
from ..units import format_size
from ..workload import Workload

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
MS = 1_000_000
S = 1_000_000_000

# F6_conSeqW: writes fine enough to place a flush within 1/8 of the smallest buffers seen (512 KiB), few enough in
# flight that a flush stands out against the normal latency (two: "concurrent", as the paper's writes).
WRITE_SIZE = 64 * KIB
QUEUE_DEPTH = 2
# A flush spike is at least this many times the normal write latency. Jenks always finds classes; this keeps noise
# on a flat series from passing as flushes.
SPIKE_RATIO = 3.0


def spike_mask(latency_ns, classification: Classification | None) -> np.ndarray:
    """The abnormal writes: in a class above the most populated one and at least SPIKE_RATIO times its median."""
    lat = np.asarray(latency_ns, dtype=float)
    if classification is None:
        return np.zeros(len(lat), dtype=bool)
    labels = classification.labels
    normal = int(np.argmax(classification.counts()))
    base = float(np.median(lat[labels == normal]))
    return (labels > normal) & (lat >= SPIKE_RATIO * base)


def overtaken(submit_ns, complete_ns, mask) -> np.ndarray:
    """For each write in ``mask``: how many writes submitted after it completed before it. A full buffer blocks
    every write behind the one that met the flush: only the write queued beside it may complete first (when the
    host delays the first one's completion), a write submitted after that one waits for room too. A firmware
    stall or the host's completion jitter delays one command while the others go on. (Counting only the first
    half of the wait, as before, let a 3x jitter spike of a 16 KiB write stand, overtaken twice in its last
    half: at medium noise such spikes formed a false flush lattice on pm981-256g, 117 MiB for 64.)"""
    sub = np.asarray(submit_ns, dtype=np.int64)
    done = np.asarray(complete_ns, dtype=np.int64)
    idx = np.flatnonzero(np.asarray(mask, dtype=bool))
    return np.array([int(((sub > sub[i]) & (done < done[i])).sum()) for i in idx], dtype=np.int64)


def blocking(submit_ns, complete_ns, mask, queue_depth: int = QUEUE_DEPTH) -> np.ndarray:
    """``mask`` without the spikes that later writes overtook (more than the others in flight beside them)."""
    out = np.asarray(mask, dtype=bool).copy()
    idx = np.flatnonzero(out)
    out[idx[overtaken(submit_ns, complete_ns, out) > queue_depth - 1]] = False
    return out


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


def flatness(latency_ns) -> float:
    """Confidence that a series has no spikes: 1 when its longest latency is its median, 0 at SPIKE_RATIO."""
    lat = np.asarray(latency_ns, dtype=float)
    if len(lat) == 0:
        return 0.0
    ratio = float(lat.max() / max(np.median(lat), 1.0))
    return float(np.clip(1 - (ratio - 1) / (SPIKE_RATIO - 1), 0.0, 1.0))


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
    t = trace[trace["op"] == "write"].sort_values(["submit_ns", "offset_bytes"])
    return pd.DataFrame({
        "position": t["offset_bytes"].to_numpy(dtype=np.int64) - start,
        "size": t["size"].to_numpy(dtype=np.int64),
        "latency_ns": t["latency_ns"].to_numpy(dtype=np.int64),
        "submit_ns": t["submit_ns"].to_numpy(dtype=np.int64),
        "complete_ns": t["complete_ns"].to_numpy(dtype=np.int64),
    })


def power_of_two_below(n: float) -> int:
    return 1 << max(int(math.floor(math.log2(max(n, 1)))), 0)


def power_of_two_above(n: float) -> int:
    return 1 << max(int(math.ceil(math.log2(max(n, 1)))), 0)
