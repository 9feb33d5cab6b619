"""The measured gain of Newt's optimizations: one trace replayed twice from the same starting state, without and
with them ("Fantastic SSD Internals and How to Learn and Use Them" §5, Figures 6-8), and the difference.

The same starting state: on a simulated drive a fresh device each time, with the range the trace touches
written once and left idle until its backlog has drained; on a real one the same preconditioning before each
pass (the range written sequentially, then a pause), since a real drive cannot be reset to a state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..results import RunResult
from ..sim import SimDevice
from ..workload import Workload
from .align import Alignment, AlignStats, align_reads
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


def extent(frames: list[pd.DataFrame]) -> tuple[int, int]:
    """The byte range every frame's reads and writes touch together, widened to 4 KiB boundaries."""
    start, end = None, 0
    for frame in frames:
        ranged = (frame["op"] != "flush").to_numpy() & (frame["size"].to_numpy() > 0)
        if not ranged.any():
            continue
        offset = frame["offset_bytes"].to_numpy()[ranged].astype(np.int64)
        stop = offset + frame["size"].to_numpy()[ranged].astype(np.int64)
        start = int(offset.min()) if start is None else min(start, int(offset.min()))
        end = max(end, int(stop.max()))
    if start is None:
        return 0, 0
    return start // 4096 * 4096, -(-end // 4096) * 4096


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


def measure(target: str, frame: pd.DataFrame, plan: Plan, *, settle_s: float = 5.0, progress: bool = False,
            notify: Any = None, **replay_kwargs: Any) -> Outcome:
    """Replay ``frame`` on ``target`` twice, from the same starting state: as it is, then with ``plan``'s
    optimizations. ``replay_kwargs`` go to both :func:`ftlscope.replay.replay` calls (timing, qd, engine,
    destructive, ...); ``settle_s`` is the pause after a real target's preconditioning."""
    from ..replay import replay

    after_frame, stats = (align_reads(frame, plan.alignment) if plan.alignment is not None else (frame, None))
    span = extent([frame, after_frame])
    has_reads = bool((frame["op"] == "read").any())
    simulated = target.startswith("sim:")
    results = []
    condition: dict[str, Any] = {"kind": "none", "reason": "the trace reads nothing"}
    for replayed, extra in ((frame, {}), (after_frame, _shim_kwargs(plan))):
        place: str | SimDevice = SimDevice.open(target) if simulated else target
        if has_reads and span[1] > span[0]:
            condition = _fill_sim(place, span, progress) if isinstance(place, SimDevice) else \
                _fill_real(target, span, settle_s, replay_kwargs, progress)
        result = replay(place, replayed, trace=True, progress=progress, notify=notify, **replay_kwargs, **extra)
        result.summary["run"]["precondition"] = condition
        results.append(result)
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
