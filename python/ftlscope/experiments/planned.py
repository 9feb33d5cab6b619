"""The two experiments seed 000 §3.5 planned but never ran: ``trim-before-overwrite`` (its item 2, "Discarding
(*deallocating*) a block before overwriting it") and ``interleaved-vs-grouped`` (its item 1, "The effect of
grouping I/O operations by type versus interleaving of reads and writes"). The thesis gives one line for each;
what follows is how each line is turned into a measurement, and where the design had to fill a gap.

``trim-before-overwrite``
    Question: does telling the drive that a block's old contents are dead, before writing new contents there,
    make the overwrite cheaper? On a flash drive it can only help through garbage collection: an overwrite
    leaves the old copy valid until the write arrives, so blocks chosen by GC still hold live pages to copy;
    discarded pages need no copying. So the design measures what GC costs, the thesis's own measures for it
    (§2.2.4 write amplification, which it could not read on its drives; §5.9 throughput and the share of
    requests over 1 ms), under two conditions that start from the same state:

    - preconditioning (declared): sequential fill of the span, so the drive is full and GC has work;
    - ``overwrite``: the first ``region_share`` of the span is overwritten once, every ``size`` block in a
      fixed random order (a permutation, like the thesis's random fill, §3.3.5);
    - ``trim-then-overwrite``: the span is filled sequentially again (the same starting state), then every
      block of the region is discarded, in the same order and the same request size, then overwritten exactly
      as above.

    Gaps filled: "a block" is read as the unit of the overwrite (``size``; ``trim_size`` discards in larger
    pieces). The engine issues one pattern per run, so the discard cannot be issued immediately before the
    write of the same block within one stream; the whole region is discarded first. (A discard right before
    the write of the same block cannot change GC on a page-mapped FTL: the write invalidates the old copy at
    that instant anyway; what can change is how much dead data GC sees, which is what this measures.) The
    overwrite covers a quarter of the span by default: enough to exhaust the spare area of a full drive and
    reach GC on the default 256 GB drive, short enough for a real drive (``runtime`` caps each overwrite).

    Rows: ``(condition, phase, window)``; ``window = -1`` is the whole phase (``trim``, ``overwrite``), other
    rows are the overwrite's time windows. After each overwrite a host flush puts what the write buffer still
    holds on flash, so the write amplification (NAND bytes / host bytes, where the target reports NAND writes)
    counts every NAND write the overwrite caused. Findings: write amplification of each overwrite, throughput,
    slow share, the speed-up with and without the discard's own time.

``interleaved-vs-grouped``
    Question: given the same reads and writes, is it better to submit them interleaved or grouped by type?
    Preconditioning (declared): sequential fill of the span (the thesis's usual state, §3.3). Then, at each
    queue depth, the same number of 4 KiB random requests (``read_share`` of them reads) three ways:

    - ``interleaved``: one stream, each request a read or a write at random (``read_share``);
    - ``grouped-reads-first``: all the reads, then all the writes;
    - ``grouped-writes-first``: all the writes, then all the reads (a write group leaves the drive with a full
      buffer and pending flushes, which may stall the reads after it).

    Before each mode the device idles ``settle``, so one mode's write buffer does not spill into the next.
    Reads and writes of the grouped modes use different random streams (reads of just-written blocks would hit
    the write buffer and flatter grouping). Gaps filled: the thesis names neither sizes nor queue depths nor
    the granularity of groups; the engine mixes operations per request at random, so the two ends are measured
    (per-request interleaving, one group per type) and not intermediate group sizes. Findings per queue depth:
    throughput of interleaving relative to grouping, and read/write latency (mean, p99) relative to grouping.

Both are destructive (they write the span); on a block device they need ``--destructive``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..errors import FtlscopeError, UsageError
from ..metrics import WINDOW_INDEX
from ..units import format_size
from ._common import check_qd, device_seconds, op_metrics, window_rows, workload
from .base import Experiment, Param, finding
from .context import Context, Interrupted

# ==== trim-before-overwrite ========================================================================================

CONDITIONS = ("overwrite", "trim-then-overwrite")
WHOLE = -1  # the ``window`` key of a row that covers a whole phase


def _write_amplification(before: dict[str, Any] | None, after: dict[str, Any] | None) -> float | None:
    """NAND bytes written / host bytes written between two health samples; None where the target does not
    report NAND writes (most consumer NVMe drives, files)."""
    if not before or not after:
        return None
    try:
        nand = after["media_bytes_written"] - before["media_bytes_written"]
        host = after["host_bytes_written"] - before["host_bytes_written"]
    except (KeyError, TypeError):
        return None
    return nand / host if host > 0 else None


def check_trim(p: dict[str, Any]) -> None:
    for name in ("size", "trim_size"):
        value = p[name]
        if value < 0 or value % 512 or (name == "size" and value == 0):
            raise UsageError(f"--param {name}: give a multiple of 512 bytes (got {value})")
    if not 0 < p["region_share"] <= 1:
        raise UsageError(f"--param region_share: give a share of the span in (0, 1] (got {p['region_share']})")
    check_qd(p)


def _overwrite_region(ctx: Context, p: dict[str, Any]) -> tuple[int, int, int]:
    size = p["size"]
    trim = p["trim_size"] or size
    span = ctx.span(p["span"])
    unit = math.lcm(size, trim)
    region = int(span * p["region_share"]) // unit * unit
    if region < unit:
        raise UsageError(f"--param region_share: {p['region_share']} of {format_size(span)} is less than one "
                         f"request ({format_size(unit)})")
    return span, region, trim


def _flush(p: dict[str, Any], region: int):
    return workload("flush", size=p["size"], pattern="sequential", span=region, ops=1)


def measure_trim(ctx: Context, p: dict[str, Any]):
    span, region, trim = _overwrite_region(ctx, p)
    for i, condition in enumerate(CONDITIONS):
        if i > 0:
            ctx.precondition("sequential-fill", span)  # the state the first condition started from
        # A flush first: what the buffer holds goes to flash now, and a simulated device does the background
        # work of the idle time before it (it does it at the next command), so the health counters read next
        # hold none of the preconditioning's NAND writes.
        ctx.run(_flush(p, region), f"{condition}: flush before")
        before = ctx.health()
        trim_s = 0.0
        if condition == "trim-then-overwrite":
            wl = workload("trim", size=trim, pattern="permutation", qd=p["qd"], span=region, total_bytes=region,
                          seed=1)
            try:
                result = ctx.run(wl, f"{condition}: discard {format_size(region)}")
            except FtlscopeError as exc:
                if isinstance(exc, Interrupted):
                    raise
                # A target without discard: the first condition stands, the second cannot be measured.
                reason = f"the discard failed, so {condition} was not measured: {exc.message}"
                ctx.notes.append(reason)
                yield {"condition": condition, "phase": "trim", WINDOW_INDEX: WHOLE, "status": "skipped",
                       "reason": reason}
                return
            trim_s = device_seconds(result)
            yield {"condition": condition, "phase": "trim", WINDOW_INDEX: WHOLE, "total_s": trim_s,
                   "bytes": region, **op_metrics(result, "trim")}
        wl = workload("write", size=p["size"], pattern="permutation", qd=p["qd"], span=region,
                      total_bytes=region, runtime_ns=p["runtime"] or None, seed=1)
        result = ctx.run(wl, f"{condition}: overwrite {format_size(region)}", window=p["window"])
        # A host flush puts what the write buffer still holds on flash, so the NAND writes the overwrite
        # caused are all counted (and the time until the data is durable is known).
        flushed = ctx.run(_flush(p, region), f"{condition}: flush after")
        after = ctx.health()
        seconds = device_seconds(result)
        durable = seconds + device_seconds(flushed)
        metrics = op_metrics(result, "write")
        written = result.summary["write"]["bytes"] if "write" in result.summary else 0
        wa = _write_amplification(before, after)
        yield {"condition": condition, "phase": "overwrite", WINDOW_INDEX: WHOLE, "total_s": seconds,
               "durable_s": durable, "with_trim_s": durable + trim_s, "bytes": written,
               "region_done": written / region, "write_amplification": np.nan if wa is None else wa, **metrics}
        windows = window_rows(result, "write")
        for _, w in windows.iterrows():
            yield {"condition": condition, "phase": "overwrite", WINDOW_INDEX: int(w[WINDOW_INDEX]), "t_s": w["t_s"],
                   "mb_s": w["mb_s"], "iops": w["iops"], "slow_share": w["slow_share"],
                   "lat_mean_us": w["lat_mean_us"], "lat_p99_us": w["lat_p99_us"], "lat_max_us": w["lat_max_us"]}


def _whole(table: pd.DataFrame, condition: str, phase: str) -> pd.Series | None:
    rows = table[(table["condition"] == condition) & (table["phase"] == phase) & (table[WINDOW_INDEX] == WHOLE)]
    return None if rows.empty else rows.iloc[0]


def analyse_trim(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    plain = _whole(table, "overwrite", "overwrite")
    trimmed = _whole(table, "trim-then-overwrite", "overwrite")
    discard = _whole(table, "trim-then-overwrite", "trim")
    if discard is not None and discard.get("status") == "skipped":
        findings["skipped"] = finding(discard["reason"], "", "results.csv row trim-then-overwrite/trim")
        discard = None
    was = {}
    for key, row, label in (("overwrite", plain, "overwrite"), ("trim_first", trimmed, "trim-then-overwrite")):
        if row is None:
            continue
        evidence = f"results.csv row {label}/overwrite/window -1"
        wa = row.get("write_amplification")
        if wa is not None and not pd.isna(wa):
            was[key] = float(wa)
            findings[f"write_amplification_{key}"] = finding(
                wa, "ratio", f"{evidence}: NAND bytes / host bytes written during the overwrite (health counters)")
        findings[f"{key}_mb_s"] = finding(row["mb_s"], "MB/s", evidence)
        findings[f"{key}_slow_share"] = finding(row["slow_share"], "share", f"{evidence}: requests over 1 ms")
        findings[f"{key}_lat_p99_us"] = finding(row["lat_p99_us"], "us", evidence)
    if len(was) == 2:
        findings["write_amplification_saved"] = finding(
            was["overwrite"] - was["trim_first"], "ratio",
            "write_amplification_overwrite - write_amplification_trim_first: NAND writes per host write that "
            "the discard saved")
    if plain is not None and trimmed is not None:
        findings["overwrite_speedup"] = finding(
            trimmed["mb_s"] / plain["mb_s"], "ratio",
            f"overwrite throughput after the discard / without ({trimmed['mb_s']:.1f} / {plain['mb_s']:.1f} MB/s)")
        if discard is not None:
            findings["trim_s"] = finding(discard["total_s"], "s", "results.csv row trim-then-overwrite/trim: "
                                                                    "device time of the discard")
            complete = plain["region_done"] >= 0.999 and trimmed["region_done"] >= 0.999
            findings["speedup_with_trim_time"] = finding(
                plain["durable_s"] / trimmed["with_trim_s"] if complete else None, "ratio",
                "time until the overwritten region is on flash (overwrite + flush) without discard / with the "
                "discard's own time added" if complete else
                "not comparable: an overwrite stopped at --param runtime before the region's end")
    return findings


def figures_trim(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    fig, axes = plots.panels("Overwriting a full region, with and without discarding it first", 1, 3,
                             size=(14, 4))
    colours = {"overwrite": "tab:red", "trim-then-overwrite": "tab:blue"}
    for condition in CONDITIONS:
        w = table[(table["condition"] == condition) & (table[WINDOW_INDEX] != WHOLE)].sort_values(WINDOW_INDEX)
        if w.empty:
            continue
        plots.line(axes[0], w["t_s"], w["mb_s"], w.get("mb_s_std"), label=condition, marker="",
                   color=colours[condition])
        plots.line(axes[1], w["t_s"], w["slow_share"] * 100, label=condition, marker="", color=colours[condition])
    axes[0].set_xlabel("time since the overwrite began (s)")
    axes[0].set_ylabel("write throughput (MB/s)")
    axes[1].set_xlabel("time since the overwrite began (s)")
    axes[1].set_ylabel("requests over 1 ms (%)")
    names, was, errs = [], [], []
    for condition in CONDITIONS:
        row = _whole(table, condition, "overwrite")
        if row is not None and not pd.isna(row.get("write_amplification", np.nan)):
            names.append(condition)
            was.append(float(row["write_amplification"]))
            std = row.get("write_amplification_std", 0.0)
            errs.append(0.0 if pd.isna(std) else float(std))
    if names:
        axes[2].bar(range(len(names)), was, yerr=errs if any(errs) else None, capsize=4,
                    color=[colours[n] for n in names], alpha=0.85)
        axes[2].set_xticks(range(len(names)), names, fontsize=8)
        axes[2].set_ylabel("write amplification (NAND / host)")
    else:
        axes[2].text(0.5, 0.5, "the target reports no NAND writes", ha="center", va="center",
                     transform=axes[2].transAxes)
    return [plots.save(fig, directory, "trim_before_overwrite",
                       "Overwriting a full region with and without discarding it first: write throughput, the "
                       "share of requests over 1 ms, and write amplification.")]


# ==== interleaved-vs-grouped =======================================================================================

MODES = ("interleaved", "grouped-reads-first", "grouped-writes-first")


def check_interleaving(p: dict[str, Any]) -> None:
    share = p["read_share"]
    if not 0 < share < 1:
        raise UsageError(f"--param read_share: give a share strictly between 0 and 1 (got {share})")
    if not 0 < round(share * 100) < 100:
        raise UsageError(f"--param read_share: {share} rounds to {round(share * 100)} % reads; the mix takes "
                         "whole percentages between 1 and 99")
    if p["ops"] < 2:
        raise UsageError(f"--param ops: give at least 2 requests (got {p['ops']})")
    if min(p["qds"]) < 1:
        raise UsageError(f"--param qds: queue depths start at 1 (got {min(p['qds'])})")
    if p["size"] <= 0 or p["size"] % 512:
        raise UsageError(f"--param size: give a multiple of 512 bytes (got {p['size']})")


def measure_interleaving(ctx: Context, p: dict[str, Any]):
    read_weight = round(p["read_share"] * 100)
    span = ctx.span(p["span"])
    size = p["size"]
    reads = round(p["ops"] * read_weight / 100)
    writes = p["ops"] - reads

    def one(op: str, count: int, qd: int, seed: int, label: str):
        wl = workload(op, size=size, pattern="random", qd=qd, span=span, ops=count, seed=seed)
        return ctx.run(wl, label)

    for qd in p["qds"]:
        for mode in MODES:
            ctx.idle(p["settle"])
            row: dict[str, Any] = {"qd": qd, "mode": mode}
            if mode == "interleaved":
                result = one({"read": read_weight, "write": 100 - read_weight}, p["ops"], qd, 1,
                             f"QD {qd} interleaved reads and writes")
                total = device_seconds(result)
                row.update(op_metrics(result, "read", "read_"))
                row.update(op_metrics(result, "write", "write_"))
            else:
                order = ("read", "write") if mode == "grouped-reads-first" else ("write", "read")
                total = 0.0
                for op in order:
                    count = reads if op == "read" else writes
                    # different random streams: reads of just-written blocks would hit the write buffer
                    result = one(op, count, qd, 1 if op == "read" else 2, f"QD {qd} {mode}: {op}s")
                    total += device_seconds(result)
                    row.update(op_metrics(result, op, f"{op}_"))
            done = row.get("read_ops", 0) + row.get("write_ops", 0)
            row.update({"total_s": total, "ops": done, "iops": done / total if total > 0 else np.nan,
                        "mb_s": done * size / total / 1e6 if total > 0 else np.nan})
            yield row


def analyse_interleaving(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    for qd in sorted(table["qd"].unique()):
        at = table[table["qd"] == qd].set_index("mode")
        if "interleaved" not in at.index:
            continue
        grouped = [m for m in MODES[1:] if m in at.index]
        if not grouped:
            continue
        mixed = at.loc["interleaved"]
        ref = at.loc[grouped]
        names = " and ".join(grouped)
        for column, key, what in (
            ("iops", "interleaved_throughput_ratio", "throughput (all requests / total device time)"),
            ("read_lat_mean_us", "interleaved_read_lat_ratio", "mean read latency"),
            ("read_lat_p99_us", "interleaved_read_p99_ratio", "p99 read latency"),
            ("write_lat_mean_us", "interleaved_write_lat_ratio", "mean write latency"),
            ("write_lat_p99_us", "interleaved_write_p99_ratio", "p99 write latency"),
        ):
            if column not in at.columns:
                continue
            base = float(ref[column].mean())
            if not base or pd.isna(base) or pd.isna(mixed[column]):
                continue
            findings[f"{key}_qd{int(qd)}"] = finding(
                float(mixed[column]) / base, "ratio",
                f"results.csv QD {int(qd)}: {what} of interleaved / mean of {names} "
                f"({float(mixed[column]):.4g} / {base:.4g}); above 1: interleaving is higher")
    return findings


def figures_interleaving(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any],
                         directory: Path) -> list[Path]:
    qds = sorted(table["qd"].unique())
    modes = [m for m in MODES if (table["mode"] == m).any()]
    colours = {"interleaved": "tab:orange", "grouped-reads-first": "tab:blue", "grouped-writes-first": "tab:green"}
    fig, axes = plots.panels(f"The same reads and writes ({p['read_share']:.0%} reads), interleaved or grouped",
                             1, 3, size=(14, 4))
    x = np.arange(len(qds))
    width = 0.8 / max(len(modes), 1)
    for i, mode in enumerate(modes):
        rows = table[table["mode"] == mode].set_index("qd").reindex(qds)
        offset = x + (i - (len(modes) - 1) / 2) * width
        for ax, column in ((axes[0], "iops"), (axes[1], "read_lat_mean_us"), (axes[2], "write_lat_mean_us")):
            std = rows.get(f"{column}_std")
            err = None if std is None or not np.any(np.nan_to_num(std.to_numpy(dtype=float)) > 0) else std
            ax.bar(offset, rows[column], width, yerr=err, capsize=3, color=colours[mode], alpha=0.85,
                   label=mode if ax is axes[0] else None)
        p99 = rows.get("read_lat_p99_us")
        if p99 is not None:
            axes[1].plot(offset, p99, "v", color="black", markersize=4, label="p99" if i == 0 else None)
        p99 = rows.get("write_lat_p99_us")
        if p99 is not None:
            axes[2].plot(offset, p99, "v", color="black", markersize=4, label="p99" if i == 0 else None)
    for ax, ylabel in zip(axes, ("IOPS (all requests)", "read latency (us), mean; p99 marked",
                                 "write latency (us), mean; p99 marked"), strict=True):
        ax.set_xticks(x, [f"QD {q}" for q in qds])
        ax.set_ylabel(ylabel)
    return [plots.save(fig, directory, "interleaved_vs_grouped",
                       "The same reads and writes issued interleaved or grouped by direction: throughput and "
                       "latency (bars mean, marks p99) of each.")]


EXPERIMENTS = [
    Experiment(
        name="trim-before-overwrite",
        summary="overwrite a region of a full drive in random order, with and without discarding it first: "
                "write amplification, throughput, slow requests",
        source="“What does the Flash Translation Layer do?” §3.5 item 2 (planned, never run)",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", 0, "range filled before each condition; 0 = the whole target",
                  "0 (whole target)"),
            Param("region_share", "float", 0.25, "share of the span discarded and overwritten", "0.25"),
            Param("size", "size", 4096, "write request size (the block overwritten)", "4KiB"),
            Param("trim_size", "size", 0, "discard request size; 0 = the write size", "0 (= size)"),
            Param("qd", "int", 32, "queue depth of discards and writes", "32"),
            Param("runtime", "duration", 1800 * 10**9, "cap on each overwrite (0 = none)", "30min"),
            Param("window", "duration", 5 * 10**9, "time window of the throughput curve", "5s"),
        ),
        keys=("condition", "phase", WINDOW_INDEX),
        measure=measure_trim,
        analyse=analyse_trim,
        figures=figures_trim,
        check=check_trim,
    ),
    Experiment(
        name="interleaved-vs-grouped",
        summary="the same random reads and writes interleaved or grouped by type (reads first, writes first): "
                "throughput and per-direction latency",
        source="“What does the Flash Translation Layer do?” §3.5 item 1 (planned, never run)",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", 0, "range used (filled first); 0 = the whole target", "0 (whole target)"),
            Param("size", "size", 4096, "request size", "4KiB"),
            Param("qds", "ints", [1, 32], "queue depths", "1,32"),
            Param("read_share", "float", 0.5, "share of the requests that are reads", "0.5"),
            Param("ops", "int", 1 << 20, "requests per mode (reads and writes together)", "1048576"),
            Param("settle", "duration", 10**9, "idle before each mode", "1s"),
        ),
        keys=("qd", "mode"),
        measure=measure_interleaving,
        analyse=analyse_interleaving,
        figures=figures_interleaving,
        check=check_interleaving,
    ),
]
