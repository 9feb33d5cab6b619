"""``reset-behaviour`` (seed 000 §3.4, §5.6): does a controller reset clear the drive's caches, and does a power
cycle?

The thesis issued three identical sequences of random reads and measured the total time of each: the first
("load", here ``baseline``) fills whatever caches the drive has, the second (``pre-reset``) runs on warm caches,
then ``xnvme_controller_reset``, then the third (``post-reset``). It found no difference after the reset, but a
slower first sequence after the machine's power had been removed (``poweroff`` in its Figure 5.13). Here the
same sequence runs a fourth time right after a power cycle (``post-power-cycle``), where the target can do one.

Each step reads two sets of data, always in the same random order (a fixed-seed permutation, every block
once, so "the total time to read all blocks" is the thesis's measure):

- ``resident`` — the first ``span - recent`` bytes, written by the sequential fill before the experiment and
  left to settle (the framework idles after preconditioning) so no buffer holds them: what the thesis read.
  Mapping-table caches (DRAM-less/HMB drives) and read buffers show here.
- ``recent`` — the last ``recent`` bytes, rewritten just before the first step. A drive that serves reads of
  data still in its write buffer shows it here; this is the cache a reset keeps and a power cycle (which must
  flush) empties. The thesis did not read recently written data: this is added because "what, if any, of the
  device caches will be cleared" includes the write buffer. ``recent=0`` leaves it out (and then the
  experiment writes nothing beyond the preconditioning).

Per step and data set: total device time, time per request, IOPS, latency percentiles, and the mean latency
of the first time window (the first accesses, where cold caches show even when the whole pass hides them).
The reset and the power cycle are rows of their own with the time they took. A step the target cannot do
(a controller reset on a file or a non-NVMe device, or without root; a power cycle anywhere but a simulated
device) is a ``skipped`` row with the reason, and so is the read sequence after it.

It writes (the fill and the ``recent`` data), so on a block device it needs ``--destructive``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..errors import NotAvailable, UsageError
from ..units import format_size
from ._common import device_seconds, op_metrics, window_rows, workload
from .base import Experiment, Param, finding
from .context import Context

# (read step, the action before it)
STEPS = (
    ("baseline", None),
    ("pre-reset", None),
    ("post-reset", "controller-reset"),
    ("post-power-cycle", "power-cycle"),
)
READ_STEPS = tuple(step for step, _ in STEPS)
DATA = ("recent", "resident")


def check(p: dict[str, Any]) -> None:
    size, recent, span = p["size"], p["recent"], p["span"]
    if size <= 0 or size % 512:
        raise UsageError(f"--param size: give a multiple of 512 bytes (got {size})")
    if recent < 0 or recent % size:
        raise UsageError(f"--param recent: give a multiple of the request size {format_size(size)} "
                         f"(got {format_size(recent)})")
    if span > 0 and recent >= span:
        raise UsageError(f"--param recent: {format_size(recent)} leaves no resident data in a span of "
                         f"{format_size(span)}; make it smaller or the span larger")


def _regions(ctx: Context, p: dict[str, Any]) -> list[tuple[str, int, int]]:
    size, recent = p["size"], p["recent"]
    span = ctx.span(p["span"])
    if recent >= span:
        raise UsageError(f"--param recent: {format_size(recent)} leaves no resident data in the "
                         f"{format_size(span)} target; make it smaller")
    resident = (span - recent) // size * size  # the recent data starts on a request boundary
    regions = [("resident", 0, resident)]
    if recent:
        regions.insert(0, ("recent", resident, recent))
    return regions


def _read_pass(ctx: Context, p: dict[str, Any], step: str, data: str, start: int, length: int) -> dict[str, Any]:
    wl = workload("read", size=p["size"], pattern="permutation", qd=p["qd"], span=length, start=start,
                  total_bytes=length, runtime_ns=p["runtime"] or None, seed=1)
    result = ctx.run(wl, f"{step} read {data} {format_size(length)}", window=p["window"])
    metrics = op_metrics(result, "read")
    total = device_seconds(result)
    windows = window_rows(result, "read")
    first = windows.iloc[0] if not windows.empty else None
    return {
        "step": step, "data": data, "status": "done", "reason": "",
        "bytes": length, "total_s": total,
        "service_us": total / metrics["ops"] * 1e6 if metrics.get("ops") else np.nan,
        "first_lat_mean_us": first["lat_mean_us"] if first is not None else np.nan,
        "first_lat_max_us": first["lat_max_us"] if first is not None else np.nan,
        **metrics,
    }


def _skip(ctx: Context, step: str, data: str, reason: str, *, note: bool = False) -> dict[str, Any]:
    if note and reason not in ctx.notes:
        ctx.notes.append(reason)
    return {"step": step, "data": data, "status": "skipped", "reason": reason}


def measure(ctx: Context, p: dict[str, Any]):
    # The framework's fill is followed by an idle settle, so the resident data is on flash and the recent data
    # written here is the only data a write buffer can hold.
    regions = _regions(ctx, p)
    recent = [r for r in regions if r[0] == "recent"]
    if recent:
        _, start, length = recent[0]
        ctx.run(workload("write", size=p["size"], pattern="sequential", qd=32, span=length, start=start,
                         total_bytes=length), f"write recent {format_size(length)}")
    for step, action in STEPS:
        if action is not None:
            try:
                took = ctx.controller_reset() if action == "controller-reset" else ctx.power_cycle()
            except NotAvailable as exc:
                reason = str(exc)
                yield _skip(ctx, action, "-", reason, note=True)
                for data, _, _ in regions:
                    yield _skip(ctx, step, data, f"no {action.replace('-', ' ')} before it: {reason}")
                continue
            yield {"step": action, "data": "-", "status": "done", "reason": "", "duration_ms": took / 1e6}
        for data, start, length in regions:
            yield _read_pass(ctx, p, step, data, start, length)


# ---- analysis -------------------------------------------------------------------------------------------------


def _value(table: pd.DataFrame, step: str, data: str, column: str) -> float | None:
    rows = table[(table["step"] == step) & (table["data"] == data)]
    if rows.empty or column not in rows or rows.iloc[0].get("status") != "done":
        return None
    value = rows.iloc[0][column]
    return None if pd.isna(value) else float(value)


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    for action, key in (("controller-reset", "controller_reset_ms"), ("power-cycle", "power_cycle_ms")):
        took = _value(table, action, "-", "duration_ms")
        if took is not None:
            findings[key] = finding(took, "ms", f"results.csv row {action}: from the command until the "
                                                "target took commands again")
    for data in ("resident", "recent"):
        suffix = "" if data == "resident" else "_recent"
        warm = _value(table, "pre-reset", data, "service_us")
        if warm is None or warm <= 0:
            continue
        for step, key in (("baseline", "baseline_slowdown"), ("post-reset", "post_reset_slowdown"),
                          ("post-power-cycle", "post_power_cycle_slowdown")):
            other = _value(table, step, data, "service_us")
            if other is None:
                continue
            findings[key + suffix] = finding(
                other / warm, "ratio",
                f"device time per request of the {data} read sequence, {step} / pre-reset "
                f"({other:.2f} us / {warm:.2f} us; results.csv rows {step}/{data} and pre-reset/{data}); "
                "above 1: slower than on warm caches")
        warm_first = _value(table, "pre-reset", data, "first_lat_mean_us")
        for step in ("baseline", "post-reset", "post-power-cycle"):
            first = _value(table, step, data, "first_lat_mean_us")
            if not warm_first or first is None:
                continue
            findings[f"{step.replace('-', '_')}_first_latency_ratio{suffix}"] = finding(
                first / warm_first, "ratio",
                f"mean latency in the first {p['window'] / 1e6:g} ms window of the {data} sequence, {step} / "
                f"pre-reset ({first:.1f} us / {warm_first:.1f} us): the first accesses, where cold caches show")
    actions = table[(table["status"] == "skipped") & (table["data"] == "-")] if "status" in table else table[:0]
    if not actions.empty:
        findings["skipped"] = finding(
            {row["step"]: row["reason"] for _, row in actions.iterrows()}, "",
            "results.csv rows with status 'skipped'; the read sequence after a skipped step is skipped too")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    out = []
    present = [d for d in DATA if (table["data"] == d).any()]
    if not present:
        return out
    for column, title, ylabel, name, caption in (
        ("total_s", "Total time to read every block once, per step (Figure 5.13)", "device time (s)",
         "reset_total_time", "Device time to read every block once at each step: before and after a controller "
         "reset and a power cycle, for recently written and for resident data."),
        ("first_lat_mean_us", f"Mean latency of the first {p['window'] / 1e6:g} ms of each sequence",
         "latency (us)", "reset_first_latency", f"Mean latency over the first {p['window'] / 1e6:g} ms of each "
         "read sequence at each step, for recently written and for resident data."),
    ):
        fig, axes = plots.panels(title, 1, len(present), size=(4.8 * len(present), 3.8))
        for ax, data in zip(axes, present, strict=True):
            values, errors, labels = [], [], []
            for step in READ_STEPS:
                rows = table[(table["step"] == step) & (table["data"] == data)]
                done = not rows.empty and rows.iloc[0].get("status") == "done"
                values.append(float(rows.iloc[0][column]) if done else 0.0)
                std = rows.iloc[0].get(f"{column}_std", 0.0) if done else 0.0
                errors.append(0.0 if pd.isna(std) else float(std))
                labels.append(step if done else f"{step}\n(skipped)")
            x = np.arange(len(READ_STEPS))
            ax.bar(x, values, yerr=errors if any(errors) else None, capsize=4,
                   color=["tab:gray", "tab:blue", "tab:green", "tab:red"], alpha=0.85)
            ax.set_xticks(x, labels, rotation=15, fontsize=8)
            ax.set_title(f"{data} data", fontsize=10)
            ax.set_ylabel(ylabel)
        out.append(plots.save(fig, directory, name, caption))
    return out


EXPERIMENTS = [
    Experiment(
        name="reset-behaviour",
        summary="identical random-read sequences: baseline, pre-reset, after a controller reset, after a power "
                "cycle (where possible): do they clear the caches?",
        source="“What does the Flash Translation Layer do?” §3.4, §5.6",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", 1 << 30, "range used (filled first): resident data, then the recent data; "
                  "0 = the whole target", "1GiB"),
            Param("recent", "size", 32 << 20, "data rewritten just before the sequences, at the end of the span "
                  "(should fit the write buffer); 0 = none", "32MiB"),
            Param("size", "size", 4096, "read request size", "4KiB"),
            Param("qd", "int", 1, "queue depth of the read sequences", "1"),
            Param("window", "duration", 10 * 10**6, "time window; the first one is the first-access latency",
                  "10ms"),
            Param("runtime", "duration", 0, "cap on each read sequence (0 = read every block once)", "0"),
        ),
        keys=("step", "data"),
        measure=measure,
        analyse=analyse,
        figures=figures,
        check=check,
    )
]
