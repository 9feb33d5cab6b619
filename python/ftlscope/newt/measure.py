"""The measured gain of Newt's optimizations: one trace replayed twice from the same starting state, without and
with them ("Fantastic SSD Internals and How to Learn and Use Them" §5, Figures 6-8), and the difference.

The same starting state: on a simulated drive a fresh device each time, with the range the trace touches
written once and left idle until its backlog has drained; on a real one the same preconditioning before each
pass (the range written sequentially, then a pause), since a real drive cannot be reset to a state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..results import RunResult
from ..sim import SimDevice
from ..workload import Workload
from .align import Alignment, AlignStats, align_columns
from .latency import GAIN_OPS, gain_pct, gains

__all__ = ["Outcome", "Plan", "gain_pct", "gains", "held", "measure", "throughput"]

# After the fill a simulated drive idles at least this long, and at least as long as the fill took: the flash
# may still be programming what the fill's writes left in flight, and idle time costs no wall time.
MIN_SETTLE_NS = 1_000_000_000
FILL_REQUEST = 1 << 20


@dataclass
class Plan:
    """What the "after" pass changes: reads aligned (``alignment``), writes paced (``shim``: the shim's
    settings, handed to the replay as ``rate_limit_writes``). ``notes``: what was left out and why."""

    alignment: Alignment | None = None
    shim: Any = None
    params: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def describe(self) -> list[str]:
        parts = []
        if self.alignment is not None:
            parts.append(f"reads aligned to {self.alignment.describe()}")
        if self.shim is not None:
            parts.append(f"writes rate-limited ({_describe_shim(self.shim)})")
        return parts or ["none (nothing to optimize: see the notes)"]


def _describe_shim(shim: Any) -> str:
    return f"{shim.flush_speed_bps / 1e6:.1f} MB/s over {shim.period_ns / 1e6:g} ms periods, {shim.source}"


@dataclass
class Outcome:
    before: RunResult
    after: RunResult
    plan: Plan
    align_stats: AlignStats | None
    precondition: dict[str, Any]


def trace_extent(trace: pd.DataFrame | str | Path, alignment: Alignment | None, *, fmt: str | None = None,
                 sort: bool = False) -> tuple[tuple[int, int], bool]:
    """The byte range the trace's reads and writes touch, as it is and with its reads aligned by ``alignment``
    together (widened to 4 KiB boundaries: what both passes' preconditioning writes), and whether it has reads.
    ``trace`` is a trace table, or the path of a trace read here in batches (``fmt``, sniffed when None; ``sort``
    as the replay orders it), so the trace is never held whole for it. Raises
    :class:`ftlscope.traces.window.Unsorted` when ``sort`` cannot be done in batches."""
    from ..replay import STREAM_BATCH_ROWS
    from ..workload import OPS

    if isinstance(trace, pd.DataFrame):
        codes = trace["op"].astype(pd.CategoricalDtype(list(OPS))).cat.codes.to_numpy()
        batches = [(codes, trace["offset_bytes"].to_numpy(), trace["size"].to_numpy())]
    else:
        from ..traces import sniff
        from ..traces.batched import trace_batches

        batches = trace_batches(trace, fmt or sniff(Path(trace)), sort=sort, extra=(), batch_rows=STREAM_BATCH_ROWS)
    start, end, reads, row = None, 0, False, 0
    for op, offset, size, *_ in batches:
        op, offset, size = np.asarray(op), np.asarray(offset).astype(np.int64), np.asarray(size).astype(np.int64)
        reads = reads or bool((op == OPS.index("read")).any())
        versions = [(offset, size)]
        if alignment is not None:
            versions.append(align_columns(op, offset, size, alignment, row)[:2])
        row += len(op)
        for off, length in versions:
            ranged = (op != OPS.index("flush")) & (length > 0)
            if ranged.any():
                low, high = int(off[ranged].min()), int((off[ranged] + length[ranged]).max())
                start = low if start is None else min(start, low)
                end = max(end, high)
    if start is None:
        return (0, 0), reads
    return (start // 4096 * 4096, -(-end // 4096) * 4096), reads


def _fill_sim(device: SimDevice, span: tuple[int, int], progress: bool) -> dict[str, Any]:
    from ..runner import precondition_sim_reads

    start, end = span
    workload = Workload(mix={"read": 1}, sizes=[4096], pattern={"kind": "sequential"},
                        range={"start": start, "length": end - start}, queue_depth=1, queues=1, stop={"ops": 1})
    done = precondition_sim_reads(device, workload, progress=progress)
    settle = max(MIN_SETTLE_NS, int(done.get("device_ns") or 0))
    device.idle(f"{settle}ns")
    return {**done, "settle_ns": settle}


def _fill_real(target: str, span: tuple[int, int], settle_s: float, run_kwargs: dict[str, Any],
               progress: bool) -> dict[str, Any]:
    from ..runner import run

    start, end = span
    length = end - start
    workload = Workload(mix={"write": 100}, sizes=[FILL_REQUEST], pattern={"kind": "sequential"},
                        range={"start": start, "length": length}, queue_depth=8, queues=1,
                        stop={"bytes": length}, data="random")
    kwargs = {k: v for k, v in run_kwargs.items() if k in ("engine", "destructive", "force", "direct", "size")}
    result = run(target, workload, progress=progress, label="writing the range the trace touches", **kwargs)
    time.sleep(settle_s)
    return {"kind": "sequential-fill", "bytes": length, "range": [start, end],
            "device_ns": result.summary["run"]["measured_ns"], "settle_ns": int(settle_s * 1e9)}


def measure(target: str, frame: pd.DataFrame | str | Path, plan: Plan, *, settle_s: float = 5.0,
            progress: bool = False, notify: Any = None, traces: tuple[Path, Path] | None = None,
            **replay_kwargs: Any) -> Outcome:
    """Replay ``frame`` on ``target`` twice, from the same starting state: as it is, then with ``plan``'s
    optimizations. ``frame`` is a trace table or the path of a trace file: a file is streamed as ``replay``
    streams it (checked in a pass, then fed in batches; its reads aligned batch by batch in the second replay),
    so neither pass holds the input trace whole. ``replay_kwargs`` go to both :func:`ftlscope.replay.replay`
    calls (timing, qd, engine, destructive, fmt, sort, ...); ``settle_s`` is the pause after a real target's
    preconditioning. ``traces``: the Parquet files each pass (before, after) writes its per-request trace to while
    it runs, in flat memory (issue 17; the results' ``streamed_trace``, read back in batches for the gain and the
    figures); None keeps each pass's trace in memory (``result.trace``)."""
    from ..replay import replay
    from ..traces import read_trace, sniff
    from ..traces.streamed import STREAMED_FORMATS
    from ..traces.window import Unsorted

    fmt, sort = replay_kwargs.get("fmt"), replay_kwargs.get("sort", False)
    if not isinstance(frame, pd.DataFrame) and (fmt or sniff(Path(frame))) not in ("parquet", *STREAMED_FORMATS):
        frame = read_trace(frame, fmt, sort=sort)  # a format read only whole
    try:
        span, has_reads = trace_extent(frame, plan.alignment, fmt=fmt, sort=sort)
    except Unsorted:  # too disordered for the sort window: read whole and sorted, as replay would
        frame = read_trace(frame, fmt, sort=True)
        span, has_reads = trace_extent(frame, plan.alignment)
    simulated = target.startswith("sim:")
    results = []
    condition: dict[str, Any] = {"kind": "none", "reason": "the trace reads nothing"}
    outputs = traces or (None, None)
    for extra, trace_file in zip(({}, {**_shim_kwargs(plan), "align_reads": plan.alignment}), outputs, strict=True):
        place: str | SimDevice = SimDevice.open(target) if simulated else target
        if has_reads and span[1] > span[0]:
            condition = _fill_sim(place, span, progress) if isinstance(place, SimDevice) else \
                _fill_real(target, span, settle_s, replay_kwargs, progress)
        kept = {"trace_file": trace_file} if trace_file is not None else {"trace": True}
        result = replay(place, frame, progress=progress, notify=notify, **kept, **replay_kwargs, **extra)
        result.summary["run"]["precondition"] = condition
        # Nothing reads a pass's simulated drive back (newt verifies nothing): let it go before the next pass
        # builds its own, so the two drives' state is never held at once.
        result.sim_device = place = None
        results.append(result)
    aligned = results[1].summary["replay"].get("aligned_reads")
    stats = None if aligned is None else AlignStats(aligned["reads"], aligned["changed"], aligned["bytes_before"],
                                                    aligned["bytes_after"])
    return Outcome(results[0], results[1], plan, stats, condition)


def _shim_kwargs(plan: Plan) -> dict[str, Any]:
    return {"rate_limit_writes": plan.shim} if plan.shim is not None else {}


def throughput(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per operation: MB/s before and after, and the change in % (positive: more after)."""
    out: dict[str, dict[str, float | None]] = {}
    for op in GAIN_OPS:
        if op not in before or op not in after:
            continue
        b, a = before[op]["bw_bytes"] / 1e6, after[op]["bw_bytes"] / 1e6
        out[op] = {"before_mb_s": round(b, 4), "after_mb_s": round(a, 4),
                   "change_pct": round((a - b) / b * 100, 2) if b else None}
    return out


def held(summary: dict[str, Any]) -> dict[str, Any] | None:
    """What the write shim did in a pass (the summary's ``write_shim``), as the report shows it: the most bytes
    it held at once, the mean over the time windows, the mean and longest delay of a delayed write, and the
    bytes held per window (Figure 8's series). None when the pass ran without the shim."""
    from ..metrics import HELD_BYTES, SHIM_DELAY, WRITE_SHIM

    shim = summary.get(WRITE_SHIM)
    if not shim:
        return None
    series = (shim.get(HELD_BYTES) or {}).get("per_window") or []
    window_ns = (shim.get(HELD_BYTES) or {}).get("window_ns") or 0
    delay = shim.get(SHIM_DELAY) or {}
    return {
        "active": bool(shim.get("active")), "writes": shim.get("writes"), "delayed_writes": shim.get("delayed_writes"),
        # A forced speed on a drive whose profile finds no write buffer: no flush can come, nothing is held.
        "write_through": bool(shim.get("write_through")),
        "held_bytes_max": (shim.get(HELD_BYTES) or {}).get("max"),
        "held_bytes_mean": float(np.mean(series)) if series else None,
        "write_delay_mean_us": delay["mean"] / 1e3 if delay.get("mean") is not None else None,
        "write_delay_max_us": delay["max"] / 1e3 if delay.get("max") is not None else None,
        # Writes let in unheld because they outran the flush speed for good (holding could not help).
        "overloaded_writes": shim.get("overloaded_writes") or 0,
        # Times the mean-delay budget (--bound-mean-delay) let go what was held.
        "budget_releases": shim.get("budget_releases") or 0,
        # Writes held because the reads stormed (--hold-in-read-storms).
        "storm_holds": shim.get("storm_holds") or 0,
        "sustained_urgency_max": shim.get("sustained_urgency_max"),
        # Reads while writes were held against reads with nothing held (geometric means), and the back-offs.
        "read_geomean_held_us": _us(shim.get("read_geomean_held_ns")),
        "read_geomean_free_us": _us(shim.get("read_geomean_free_ns")),
        "reads_held": shim.get("reads_held") or 0,
        "backoffs": shim.get("backoffs") or 0,
        "over_time": [{"t_s": i * window_ns / 1e9, "held_bytes": int(v)} for i, v in enumerate(series)],
    }


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e3
