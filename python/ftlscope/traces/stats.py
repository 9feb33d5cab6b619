"""A trace's own statistics: mix, sizes, sequentiality, arrivals, working set, offsets (what `trace info` prints)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..workload import OPS

BLOCK = 4096  # working-set granularity: distinct 4 KiB blocks


def _size_label(exp: int) -> str:
    size = 1 << exp
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def size_histogram(sizes: np.ndarray) -> list[dict[str, Any]]:
    """Power-of-two bins: a request of size s lands in the bin of the smallest power of two >= s."""
    sizes = sizes.astype(np.int64)
    exps = np.zeros(len(sizes), dtype=np.int64)
    pos = sizes > 0
    exps[pos] = np.ceil(np.log2(sizes[pos])).astype(np.int64)
    counts = np.bincount(exps[pos]) if pos.any() else np.array([], dtype=np.int64)
    bins = [{"bin": "0 B", "le_bytes": 0, "count": int((~pos).sum())}] if (~pos).any() else []
    bins += [{"bin": f"<= {_size_label(e)}", "le_bytes": 1 << e, "count": int(c)}
             for e, c in enumerate(counts) if c]
    return bins


def sequential_share(frame: pd.DataFrame) -> float:
    """Share of requests that start where the previous request of the same operation ended."""
    offset = frame["offset_bytes"].astype(np.int64)
    end = offset + frame["size"].astype(np.int64)
    prev_end = end.groupby(frame["op"], observed=True).shift(1)
    return float((offset == prev_end).sum() / len(frame))


def working_set_blocks(offset: np.ndarray, size: np.ndarray) -> int:
    """Distinct 4 KiB blocks the requests touch (each request covers offset .. offset+size-1)."""
    offset = offset.astype(np.int64)
    size = size.astype(np.int64)
    keep = size > 0
    first = offset[keep] // BLOCK
    count = (offset[keep] + size[keep] - 1) // BLOCK - first + 1
    if len(first) == 0:
        return 0
    # Expand every request to its block numbers without a Python loop: repeat each start, add 0..count-1.
    starts = np.repeat(first, count)
    within = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    # Sort and count changes: numpy 2's hash-based np.unique is ~40x slower here (8.5 s vs 0.2 s on 7 M blocks).
    blocks = np.sort(starts + within)
    return int(np.count_nonzero(np.diff(blocks))) + 1


def process_breakdown(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Requests and bytes per issuing process (traces that name it: captures, blkparse), most requests first."""
    names = frame["process"].astype("string").fillna("(unknown)")
    size = frame["size"].astype(np.int64)
    op = frame["op"].astype(str)
    table = pd.DataFrame({"requests": 1, "bytes": size, "reads": op == "read", "writes": op == "write"}
                         ).groupby(names.to_numpy(), sort=False).sum()
    table = table.sort_values(["requests", "bytes"], ascending=False, kind="stable")
    return [{"process": str(name), "requests": int(row.requests), "share": float(row.requests / len(frame)),
             "bytes": int(row.bytes), "reads": int(row.reads), "writes": int(row.writes)}
            for name, row in table.iterrows()]


def _dist(values: np.ndarray) -> dict[str, float]:
    if len(values) == 0:
        return {"n": 0}
    mean = float(values.mean())
    return {"n": int(len(values)), "mean": mean, "p50": float(np.percentile(values, 50)),
            "p99": float(np.percentile(values, 99)),
            "cv": float(values.std() / mean) if mean > 0 else float("nan")}


def trace_stats(frame: pd.DataFrame) -> dict[str, Any]:
    meta = dict(frame.attrs.get("ftlscope", {}))
    submit = frame["submit_ns"].to_numpy(dtype=np.int64)
    size = frame["size"].to_numpy(dtype=np.int64)
    offset = frame["offset_bytes"].to_numpy(dtype=np.int64)
    end = offset + size
    mix = {}
    for op in OPS:
        sel = (frame["op"] == op).to_numpy()
        if sel.any():
            mix[op] = {"requests": int(sel.sum()), "share": float(sel.mean()), "bytes": int(size[sel].sum())}
    stats: dict[str, Any] = {
        "format": meta.get("format"),
        "synthetic": bool(meta.get("synthetic", False)),
        "requests": int(len(frame)),
        "duration_s": float(submit[-1] - submit[0]) / 1e9,
        "bytes": int(size.sum()),
        "mix": mix,
        "size_histogram": size_histogram(size),
        "mean_size_bytes": float(size.mean()),
        "sequential_share": sequential_share(frame),
        "interarrival_ns": _dist(np.diff(submit).astype(np.float64)),
        "working_set_bytes": {
            op: working_set_blocks(offset[(frame["op"] == op).to_numpy()], size[(frame["op"] == op).to_numpy()])
            * BLOCK for op in ("read", "write")},
        "offset_range": {"min_bytes": int(offset.min()), "max_end_bytes": int(end.max())},
    }
    if "latency_ns" in frame:
        lat = frame["latency_ns"].dropna().to_numpy(dtype=np.float64)
        stats["latency_ns"] = _dist(lat)
    if "process" in frame:
        stats["processes"] = process_breakdown(frame)
    if "capture" in meta:
        stats["capture"] = meta["capture"]
    if meta.get("synthetic"):
        stats["workload"] = {k: v for k, v in meta.items() if k not in ("format", "synthetic")}
    return stats
