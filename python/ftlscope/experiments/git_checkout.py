"""``git-checkout`` (after "Solid State Disks vs Magnetic Disks: Making the right choice", §4.3.2: 160
consecutive ``git checkout``s of the Linux kernel's tags, Figure 4.8, Table 4.2, and a block trace of one,
Figures 4.9-4.10 and Table 4.3): a file-intensive program's mix of random metadata reads, pack reads and
scattered small writes, timed on the drive.

A synthetic repository (:mod:`._synthetic_tree`: ``files``, ``dirs``, ``tags``, ``change_share``, ``seed``;
shaped like the kernel tree the thesis used) is made with one ``git fast-import`` stream on a fresh file system
(``fs``, ext4 by default as in the thesis) on the target, its first tag checked out (the thesis's clone) and
written back. Then each later tag in order, with a cold cache before each (written back, page cache, dentries
and inodes dropped): ``git checkout`` timed on the wall clock, then the file system synced and that timed too
(``sync_s``: the checkout's writes the page cache held; a program's wait for them is the next program's), so
that the drive's write speed counts, not only the page cache's. ``total_s`` is their sum; ``cumulative_s`` the
series' running total (Figure 4.8).

Checkout ``trace_checkout`` (0: none) is traced with ``ftlscope capture`` (ftrace's block tracepoints, as the
thesis used blktrace): every block request's queue-to-complete time (from the bio's start in the block layer
to its completion), reads and writes apart (Figure 4.9, Table 4.3), and the completions over the checkout's
time (Figure 4.10). Its timing carries the tracing's cost (small: the kernel records the events, ftlscope reads
them in another process) and the table marks it.

Needs root and ``--destructive DEVICE`` (it makes a file system) and git; without git it is skipped, saying
so. A ``sim:PRESET`` target is attached for the run (``span``, default 4 GiB) and detached after.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from .. import plots
from ..errors import UsageError
from ..units import format_size
from . import _fs_session as fss
from ._synthetic_tree import TreeShape, git, git_program, history, make_repository, tag_name
from .base import Experiment, Param, finding
from .context import Context

NAME = "git-checkout"
MiB = 1 << 20
GiB = 1 << 30
# The size a sim: target is attached at for span=0: room for the tree and its history several times over.
DEFAULT_ATTACH = 4 * GiB
QUANTILES = (("p10", 0.10), ("p25", 0.25), ("p50", 0.50), ("p75", 0.75), ("p90", 0.90), ("p99", 0.99))
TRACE_WINDOWS = 50
CAPTURE_READY_S = 30.0
SETTLE_S = 3.0


def shape_of(p: dict[str, Any]) -> TreeShape:
    return TreeShape(p["files"], p["dirs"], p["tags"], p["change_share"], p["seed"])


def check(p: dict[str, Any]) -> None:
    for name in ("files", "dirs", "tags"):
        if p[name] < 1:
            raise UsageError(f"--param {name}: give at least 1 (got {p[name]})")
    if not 0 < p["change_share"] <= 1:
        raise UsageError(f"--param change_share: give a share above 0 and at most 1, e.g. 0.03 (got "
                         f"{p['change_share']})")
    if not 0 <= p["trace_checkout"] <= p["tags"]:
        raise UsageError(f"--param trace_checkout: give 0 (no trace) or a checkout from 1 to tags={p['tags']} "
                         f"(got {p['trace_checkout']})")
    if p["fs"] not in fss.FILESYSTEMS:
        raise UsageError(f"--param fs: unknown file system {p['fs']} (known: {','.join(fss.FILESYSTEMS)})")


def _changes(shape: TreeShape) -> list[int]:
    """Files written or deleted by each tag's checkout (index 0: the first tag, the whole tree)."""
    return [len(s.written) + len(s.deleted) for s in history(shape)]


def _skipped(reason: str) -> dict[str, Any]:
    return {"kind": "checkout", "index": 0, "op": "all", "status": "skipped", "reason": reason}


def measure(ctx: Context, p: dict[str, Any]):
    fss.check_target(ctx, NAME, p["fs"])
    if git_program() is None:
        reason = "git is not installed (Debian package git); the checkouts need it"
        if ctx.repetition == 0:
            ctx.notes.append(f"{NAME} skipped: {reason}")
        yield _skipped(reason)
        return
    shape = shape_of(p)
    changes = _changes(shape)
    try:
        with fss.file_system(ctx, NAME, p, DEFAULT_ATTACH) as (device, where, point):
            repo = point / "repo"
            began = time.monotonic()
            imported = make_repository(repo, shape)
            git(repo, "checkout", "--quiet", tag_name(0))
            # Files written in the same second as the index are "racily clean" to git: the next checkout would
            # read every one of them to compare. A clone that has stood a while has none; so wait a second and
            # let git status write the index again (it does when it finds racy entries).
            time.sleep(1.1)
            git(repo, "status", "--porcelain")
            fss.timed_sync(point)
            time.sleep(SETTLE_S)  # the drive's write cache drained before the series, as after preconditioning
            if ctx.repetition == 0:
                ctx.notes.append(f"{NAME}: {fss.conditions(p, shape.describe(), where)}; repository made in "
                                 f"{time.monotonic() - began:.1f} s (git fast-import, {format_size(imported)} of "
                                 f"file versions), {tag_name(0)} checked out, written back and {SETTLE_S:g} s idle "
                                 "before the series")
            cumulative = 0.0
            traces: list[dict[str, Any]] = []
            for index in range(1, shape.tags + 1):
                fss.cold(point)
                trace_file = ctx.raw_dir / f"rep{ctx.repetition}" / f"checkout-{index:04d}.trace.parquet"
                capture = _captured(ctx, device, trace_file) if index == p["trace_checkout"] else None
                with capture or contextlib.nullcontext():
                    began = time.monotonic()
                    git(repo, "checkout", "--quiet", tag_name(index))
                    checkout_s = time.monotonic() - began
                    sync_s = fss.timed_sync(point)
                cumulative += checkout_s + sync_s
                traced = capture is not None and capture.proc is not None
                yield {"kind": "checkout", "index": index, "op": "all", "status": "measured", "reason": "",
                       "tag": tag_name(index), "files_changed": changes[index], "checkout_s": checkout_s,
                       "sync_s": sync_s, "total_s": checkout_s + sync_s, "cumulative_s": cumulative,
                       "traced": traced}
                if traced:
                    traces = _trace_rows(ctx, trace_file)
            yield from traces
    except fss.Skip as skip:
        if ctx.repetition == 0:
            ctx.notes.append(f"{NAME} skipped: {skip}")
        yield _skipped(str(skip))


def capture_command(device: str, out: Path) -> list[str]:
    """``ftlscope capture`` of this very ftlscope (installed or a source tree), without a command: it records
    until SIGTERM."""
    return [sys.executable, "-m", "ftlscope.cli", "capture", device, "--out", str(out), "--buffer-size", "32MiB"]


class _captured:
    """``ftlscope capture DEVICE --out FILE`` running (in its own process, so that reading the trace costs the
    measured program no CPU time of this one) while the block runs; stopped with SIGTERM after it, which makes
    capture write the trace. If capture cannot start (no tracefs here), the checkout runs untraced and a note
    says why."""

    def __init__(self, ctx: Context, device: str, out: Path):
        self.ctx, self.device, self.out = ctx, device, out

    def __enter__(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.unlink(missing_ok=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.proc: subprocess.Popen | None = subprocess.Popen(
            capture_command(self.device, self.out), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, env=env)
        assert self.proc.stderr is not None
        deadline = time.monotonic() + CAPTURE_READY_S
        self.err: list[str] = []
        # capture says "capturing DEVICE" once its tracepoints are on: only then may the checkout start.
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.err.append(line.strip())
            if "capturing" in line:
                return
        self.proc.kill()
        self.proc.wait()
        self.proc = None
        self.ctx.notes.append(f"{NAME}: no block trace: ftlscope capture did not start "
                              f"({' '.join(self.err)[-300:] or 'no output'})")

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            rest = self.proc.communicate(timeout=120)[1]
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rest = self.proc.communicate()[1]
        lines = [*self.err, *(rest or "").splitlines()]
        warnings = [line for line in lines if "warning" in line or "note:" in line]
        if warnings and self.ctx.repetition == 0:
            self.ctx.notes.append(f"{NAME}: ftlscope capture: {' '.join(warnings)}")


def queue_to_complete_ns(trace: pd.DataFrame) -> pd.Series:
    """Each request's time from its start in the block layer (block_io_start, before any scheduler queue; the
    issue where the kernel lacks that event) to its completion."""
    start = trace["queued_ns"].fillna(trace["submit_ns"]) if "queued_ns" in trace else trace["submit_ns"]
    return (trace["complete_ns"] - start).astype("Float64")


def _trace_rows(ctx: Context, path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        ctx.notes.append(f"{NAME}: the traced checkout left no trace ({path.name}): capture saw no request")
        return []
    trace = pd.read_parquet(path)
    trace = trace[trace["op"].isin(["read", "write"]) & trace["complete_ns"].notna()]
    rows = []
    q2c = queue_to_complete_ns(trace)
    for op in ("read", "write"):
        mine = trace["op"] == op
        values = q2c[mine].dropna().to_numpy(dtype=float) / 1e6
        row = {"kind": "trace", "index": 0, "op": op, "status": "measured", "reason": "",
               "requests": int(mine.sum()), "bytes": int(trace.loc[mine, "size"].sum()),
               "q2c_mean_ms": float(values.mean()) if len(values) else np.nan,
               "q2c_max_ms": float(values.max()) if len(values) else np.nan}
        for name, q in QUANTILES:
            row[f"q2c_{name}_ms"] = float(np.quantile(values, q)) if len(values) else np.nan
        rows.append(row)
    if trace.empty:
        return rows
    complete = trace["complete_ns"].to_numpy(dtype=np.int64)
    first, last = int(complete.min()), int(complete.max())
    width = max(1, (last - first) // TRACE_WINDOWS + 1)
    window = (complete - first) // width
    for op in ("read", "write"):
        mine = (trace["op"] == op).to_numpy()
        counts = np.bincount(window[mine], minlength=TRACE_WINDOWS)
        sizes = np.bincount(window[mine], weights=trace["size"].to_numpy()[mine], minlength=TRACE_WINDOWS)
        for b in range(TRACE_WINDOWS):
            rows.append({"kind": "window", "index": b, "op": op, "status": "measured", "reason": "",
                         "t_s": b * width / 1e9, "window_s": width / 1e9, "requests": int(counts[b]),
                         "bytes": int(sizes[b])})
    return rows


# ---------------------------------------------------------------------------------------------------------
# analysis and figures


def _part(table: pd.DataFrame, kind: str) -> pd.DataFrame:
    rows = table[(table["kind"] == kind) & (table["status"] == "measured")]
    return rows.sort_values("index")


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    checkouts = _part(table, "checkout")
    findings["checkouts"] = finding(len(checkouts), "checkouts", "results.csv: checkout rows measured")
    if checkouts.empty:
        return findings
    total = checkouts["total_s"]
    findings["total_s"] = finding(total.sum(), "s", f"sum of total_s over the {len(checkouts)} checkouts "
                                                    "(Table 4.2's time)")
    findings["mean_checkout_s"] = finding(total.mean(), "s", "mean total_s per checkout (Table 4.2's mean)")
    if len(total) > 1:
        findings["checkout_std_s"] = finding(total.std(ddof=1), "s", "standard deviation of total_s over the "
                                                                     "checkouts (some tags change more)")
    slowest = checkouts.loc[total.idxmax()]
    findings["slowest_checkout_s"] = finding(slowest["total_s"], "s",
                                             f"checkout {int(slowest['index'])} ({slowest['tag']}), "
                                             f"{int(slowest['files_changed'])} files changed")
    findings["writeback_share"] = finding(checkouts["sync_s"].sum() / total.sum() if total.sum() else np.nan,
                                          "share", "sum of sync_s / sum of total_s: the share of the time spent "
                                                   "writing the checkouts' changes back")
    trace = _part(table, "trace").set_index("op")
    for op in ("read", "write"):
        if op in trace.index and trace.loc[op, "requests"] > 0:
            findings[f"trace_{op}_q2c_mean_ms"] = finding(
                trace.loc[op, "q2c_mean_ms"], "ms", f"traced checkout: mean queue-to-complete time of its "
                f"{int(trace.loc[op, 'requests'])} {op} requests (Table 4.3)")
            findings[f"trace_{op}_requests"] = finding(trace.loc[op, "requests"], "requests",
                                                       f"traced checkout: {op} requests")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    checkouts = _part(table, "checkout")
    if checkouts.empty:
        return []
    out = []
    fig, (cum, each) = plots.panels("git checkout of tag after tag, cold cache", 1, 2, size=(11, 4.5))
    x = checkouts["index"].to_numpy()
    plots.line(cum, x, checkouts["cumulative_s"].to_numpy(),
               checkouts["cumulative_s_std"].to_numpy() if "cumulative_s_std" in checkouts else None,
               marker="." if len(x) > 30 else "o")
    cum.set_xlabel("checkouts")
    cum.set_ylabel("accumulated time (s)")
    cum.set_title("accumulated time (Figure 4.8)", fontsize=10)
    cum.set_ylim(bottom=0)
    each.bar(x, checkouts["checkout_s"].to_numpy(), 0.8, label="git checkout", color="C0")
    each.bar(x, checkouts["sync_s"].to_numpy(), 0.8, bottom=checkouts["checkout_s"].to_numpy(),
             label="write-back (syncfs)", color="C1")
    each.set_xlabel("checkout")
    each.set_ylabel("time (s)")
    each.set_title("time per checkout", fontsize=10)
    each.legend(fontsize=8)
    for ax in (cum, each):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    out.append(plots.save(fig, directory, "git_checkout",
                          "Left: time accumulated over consecutive checkouts of the synthetic repository's tags, "
                          "each with a cold cache; right: each checkout's time, the git command and the write-back "
                          "of its changes."))
    trace = _part(table, "trace")
    windows = _part(table, "window")
    if not trace.empty and trace["requests"].sum() > 0:
        fig, (over, box) = plots.panels("Block requests of one git checkout", 1, 2, size=(11, 4.5))
        for op, color in (("read", "C0"), ("write", "C3")):
            w = windows[windows["op"] == op].sort_values("index")
            over.plot(w["t_s"].to_numpy(), (w["requests"] / w["window_s"]).to_numpy(), color=color,
                      label=f"{op}s completed")
        both = windows.groupby("index")[["requests", "t_s"]].agg({"requests": "sum", "t_s": "first"})
        twin = over.twinx()
        twin.plot(both["t_s"].to_numpy(), both["requests"].cumsum().to_numpy(), color="k", lw=1, ls="--")
        # (plots.save gives every axes with labelled lines its own legend: the dashed line is named by its axis)
        twin.set_ylabel("accumulated requests (dashed)")
        twin.set_ylim(bottom=0)
        over.set_xlabel("time in the checkout (s)")
        over.set_ylabel("requests completed per second")
        over.set_title("completions over time (Figure 4.10)", fontsize=10)
        stats = []
        for _, row in trace[trace["requests"] > 0].iterrows():
            stats.append({"label": f"{row['op']}\n({int(row['requests'])})", "med": row["q2c_p50_ms"],
                          "q1": row["q2c_p25_ms"], "q3": row["q2c_p75_ms"], "whislo": row["q2c_p10_ms"],
                          "whishi": row["q2c_p90_ms"], "mean": row["q2c_mean_ms"], "fliers": []})
        box.bxp(stats, showmeans=True)
        box.set_ylabel("queue to complete (ms)")
        box.set_title("time from queue to completion (Figure 4.9)", fontsize=10)
        box.set_ylim(bottom=0)
        out.append(plots.save(fig, directory, "git_checkout_trace",
                              "Left: block requests completed per second during the traced checkout, reads and "
                              "writes, and the accumulated count; right: their queue-to-complete times (box: "
                              "quartiles, whiskers: 10th and 90th percentiles, triangle: mean)."))
    return out


EXPERIMENTS = [
    Experiment(
        name=NAME,
        summary="consecutive git checkouts of a synthetic repository's tags, shaped like the Linux tree, on a "
                "fresh file system with a cold cache: time per checkout, accumulated time, and a block trace "
                "of one (queue-to-complete times of reads and writes; needs root, git and a block device)",
        source='"Solid State Disks vs Magnetic Disks: Making the right choice" §4.3.2',
        writes=True,
        preconditioning="none",
        params=(
            Param("files", "int", 30000, "files in the tree's first tag (the thesis: almost 29,000)"),
            Param("dirs", "int", 1800, "directories (the thesis: just under 1,800)"),
            Param("tags", "int", 160, "tags checked out in order after the first (the thesis: 160)"),
            Param("change_share", "float", 0.03, "share of the files each tag changes (85 % rewritten, 10 % "
                                                 "added, 5 % deleted)"),
            Param("seed", "int", 1, "seed of the tree and its history (same seed, same repository)"),
            Param("fs", "str", "ext4", "file system made on the device (the thesis: ext4)"),
            Param("trace_checkout", "int", 1, "which checkout ftlscope capture traces (0: none)"),
            Param("span", "size", 0, "size of the file system: the first span bytes of the device (0: all of it, "
                  "at most 64 GiB; a sim: target is attached at span, or at 4GiB for 0)", "0 (all; 4GiB on sim:)"),
        ),
        keys=("kind", "index", "op"),
        check=check,
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
