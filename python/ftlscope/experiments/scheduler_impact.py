"""``scheduler-impact`` (after the disk-scheduler comparison of "Solid State Disks vs Magnetic Disks: Making the
right choice", its §3.5 and §4.3.3): how much the kernel's I/O scheduler between the programs and the drive
changes what they get, and how fairly it shares the drive between a reader and a writer.

For every scheduler the device offers (``/sys/block/DEV/queue/scheduler``: none, mq-deadline, kyber, bfq on a
current kernel; ``schedulers`` picks some), in turn: switch to it, then run iozone's four operations (as
fs-impact: sequential write and read in ``seq_size`` requests, random read and write in ``random_size`` ones)
at QD ``qd``, each for ``runtime``, then the mixed pair: a random reader and a sequential writer at the same
time (two engine runs side by side, the same workloads as alone), each side's throughput and latency, and Jain's
fairness index over the two sides' shares of what each got alone under the same scheduler (1 = both kept the
same share, 0.5 = one side got everything). The original scheduler is restored after, also on an error or
Ctrl-C.

On the raw block device, not on a file: the scheduler orders the requests of whatever is above it, and on the
raw device its effect is not mixed with a file system's (fs-impact measures that). Reads go to the first half of
the range (written once first, so they read data), writes to the second half, so the pair's reader and writer
never touch the same blocks. At QD ``qd`` > 1 each run keeps a queue the scheduler can reorder and merge; at QD 1
it would only add its own cost. After every run that writes, the device's write cache is flushed and waited
for (``sync DEVICE``), so no run pays for the write-back of the one before; the random write stops after
``random_write_bytes`` (4 MiB), since a disk's cache takes random writes at cache speed and then needs about
10 ms of seeking per write to put them back. A ``sim:PRESET`` target is attached as a loop device for the run
(``attach_size``) and the loop device's scheduler is the one switched. Needs root and ``--destructive DEVICE``.

Findings: per operation the best and worst scheduler's MB/s and the spread (best / worst); per scheduler the
pair's fairness index (``fairness_<scheduler>``), the fairest and least fair, and ``scheduler_spread_max``, the
largest spread over the four operations (how much the choice matters on this drive).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..errors import TargetError, UsageError
from ..runner import check_outcome
from ..units import format_size
from ._attached import block_device, check_block_target, on_block_device
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context, Interrupted
from .fs_impact import wait_for_write_back

MiB = 1 << 20
GiB = 1 << 30
# (operation, engine op, pattern, request size parameter), iozone's order as fs-impact.
OPERATIONS = (
    ("sequential_write", "write", "sequential", "seq_size"),
    ("sequential_read", "read", "sequential", "seq_size"),
    ("random_read", "read", "random", "random_size"),
    ("random_write", "write", "random", "random_size"),
)
# The mixed pair: (row name, the operation it repeats alongside the other).
PAIR = (("mixed_read", "random_read"), ("mixed_write", "sequential_write"))


def _check(p: dict[str, Any]) -> None:
    if p["qd"] < 1:
        raise UsageError(f"--param qd: give a queue depth of at least 1 (got {p['qd']})")
    for name in ("seq_size", "random_size"):
        if p[name] <= 0 or p[name] % 4096:
            raise UsageError(f"--param {name}: give a multiple of 4 KiB (got {p[name]})")


def scheduler_file(device: str) -> Path:
    """``/sys/block/DEV/queue/scheduler`` of ``device`` (a partition's is its disk's)."""
    name = os.path.basename(os.path.realpath(device))
    node = Path(os.path.realpath(f"/sys/class/block/{name}"))
    if (node / "partition").exists():
        node = node.parent
    return node / "queue" / "scheduler"


def read_schedulers(path: Path) -> tuple[list[str], str]:
    """The schedulers offered and the active one (``[mq-deadline] kyber bfq none``)."""
    words = path.read_text().split()
    active = next((w.strip("[]") for w in words if w.startswith("[")), "")
    return [w.strip("[]") for w in words], active


def set_scheduler(path: Path, name: str) -> None:
    try:
        path.write_text(name)
    except OSError as exc:
        raise TargetError(f"scheduler-impact: cannot set the scheduler {name} in {path} ({exc.strerror})") from None
    if read_schedulers(path)[1] != name:
        raise TargetError(f"scheduler-impact: {path} did not take the scheduler {name}")


def _chosen(p: dict[str, Any], offered: list[str], device: str) -> list[str]:
    if not p["schedulers"]:
        return offered
    missing = [s for s in p["schedulers"] if s not in offered]
    if missing:
        raise UsageError(f"--param schedulers: {device} does not offer {', '.join(missing)} (it offers "
                         f"{','.join(offered)})")
    return list(p["schedulers"])


def _workload(p: dict[str, Any], operation: str, half: int, seed: int):
    _, op, pattern, size_param = next(o for o in OPERATIONS if o[0] == operation)
    start = 0 if op == "read" else half
    if operation == "random_write":
        # A disk's write cache takes small random writes at cache speed and then needs about 10 ms of seeking
        # per write to put them back: bounded in bytes, with no warm-up to add more, the write-back after it
        # takes seconds, not minutes (an SSD still writes thousands of requests in it).
        return workload(op, size=p[size_param], pattern=pattern, qd=p["qd"], span=half, start=start,
                        runtime_ns=p["runtime"], total_bytes=p["random_write_bytes"], seed=seed)
    return workload(op, size=p[size_param], pattern=pattern, qd=p["qd"], span=half, start=start,
                    runtime_ns=p["runtime"], warmup_ns=p["warmup"], seed=seed)


class _WriteBack:
    """Waits until the device has written back what its write cache holds (``sync DEVICE``: a flush, waited for
    without the engine's 30 s I/O time-out, since a disk's cache of random writes can take longer), so no run
    pays for the write-back of the one before it."""

    def __init__(self, device: str):
        self.device = device
        self.longest_s = 0.0

    def wait(self) -> None:
        self.longest_s = max(self.longest_s, wait_for_write_back(self.device, "scheduler-impact"))


def _run_pair(ctx: Context, p: dict[str, Any], scheduler: str, half: int) -> list[dict[str, Any]]:
    """The reader on a thread, the writer on this one (where Ctrl-C lands), started together."""
    reader = _workload(p, "random_read", half, 1 + ctx.repetition)
    writer = _workload(p, "sequential_write", half, 1 + ctx.repetition)
    done: dict[str, Any] = {}

    def read_side() -> None:
        try:
            # No progress bar on this thread: one live display at a time; the writer's shows the pair.
            done["result"] = ctx.device.run(reader, engine=ctx.engine, trace=False, window="100ms",
                                            destructive=ctx.destructive, force=ctx.force, progress=False,
                                            label=f"{scheduler} mixed: random reader",
                                            health_interval=ctx.health_interval, show_serial=ctx.show_serial)
        except BaseException as exc:  # handed to the main thread
            done["error"] = exc

    thread = threading.Thread(target=read_side, name="scheduler-impact-reader")
    thread.start()
    try:
        written = ctx.run(writer, f"{scheduler} mixed: sequential writer beside a random reader")
    finally:
        thread.join()  # at most the reader's runtime: it stops on its own
    if "error" in done:
        raise done["error"]
    read = done["result"]
    ctx._save(read, f"{scheduler} mixed: random reader beside a sequential writer")  # noqa: SLF001 - same package
    if read.stop_reason == "interrupted":
        raise Interrupted("interrupted; the results measured so far are kept")
    check_outcome(read)
    return [{"scheduler": scheduler, "operation": "mixed_read", **op_metrics(read, "read")},
            {"scheduler": scheduler, "operation": "mixed_write", **op_metrics(written, "write")}]


def measure(ctx: Context, p: dict[str, Any]):
    check_block_target(ctx, "scheduler-impact", "it switches the device's I/O scheduler")
    with block_device(ctx, "scheduler-impact", p["attach_size"]) as (device, capacity), \
            on_block_device(ctx, device):
        path = scheduler_file(device)
        if not path.exists():
            raise TargetError(f"scheduler-impact: {device} has no I/O scheduler to switch ({path} is missing)")
        offered, original = read_schedulers(path)
        chosen = _chosen(p, offered, device)
        span = (p["span"] or min(capacity, 2 * GiB)) // (2 * MiB) * (2 * MiB)
        span = min(span, capacity // (2 * MiB) * (2 * MiB))
        half = span // 2
        if half < max(p["seq_size"], p["random_size"]):
            raise UsageError(f"--param span: {format_size(span)} leaves less than one request per half; give more")
        ctx.precondition("sequential-fill", half)  # the reads read data, on every kind of drive
        write_back = _WriteBack(device)
        if ctx.repetition == 0:
            ctx.notes.append(f"scheduler-impact: {device} offers {', '.join(offered)} (active: {original}); reads "
                             f"in the first {format_size(half)}, writes in the next {format_size(half)}")
        try:
            for scheduler in chosen:
                set_scheduler(path, scheduler)
                for operation, op, _, size_param in OPERATIONS:
                    result = ctx.run(_workload(p, operation, half, 1 + ctx.repetition),
                                     f"{scheduler} {operation.replace('_', ' ')} {format_size(p[size_param])}")
                    yield {"scheduler": scheduler, "operation": operation, **op_metrics(result, op)}
                    if op == "write":
                        write_back.wait()
                yield from _run_pair(ctx, p, scheduler, half)
                write_back.wait()
        finally:
            if ctx.repetition == 0 and write_back.longest_s > 0:
                ctx.notes.append(f"scheduler-impact: the device's write cache was flushed after every run that "
                                 f"wrote; the longest write-back took {write_back.longest_s:.1f} s")
            try:
                set_scheduler(path, original)
            except TargetError as exc:
                # A note, not a second error over the first; the message names the file to fix by hand.
                ctx.notes.append(f"{exc.message}: restore it with: echo {original} > {path}")


def fairness(table: pd.DataFrame) -> pd.DataFrame:
    """Per scheduler: each side's share of what it got alone, and Jain's index over the two shares."""
    rows = []
    for scheduler, rows_of in table.groupby("scheduler", sort=False):
        mb = rows_of.set_index("operation")["mb_s"]
        if not all(k in mb and alone in mb and mb[alone] > 0 for k, alone in PAIR):
            continue
        shares = np.array([mb[k] / mb[alone] for k, alone in PAIR])
        jain = shares.sum() ** 2 / (len(shares) * (shares ** 2).sum()) if (shares > 0).any() else np.nan
        rows.append({"scheduler": scheduler, "read_share": shares[0], "write_share": shares[1], "jain": jain})
    return pd.DataFrame(rows)


def _key(scheduler: str) -> str:
    return scheduler.replace("-", "_")


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    if table.empty:
        return findings
    findings["schedulers_measured"] = finding(table["scheduler"].nunique(), "count", "results.csv: schedulers")
    spreads = []
    for name, *_ in OPERATIONS:
        rows = table[table["operation"] == name].set_index("scheduler")["mb_s"].dropna()
        if rows.empty:
            continue
        best, worst = rows.idxmax(), rows.idxmin()
        findings[f"{name}_best_mb_s"] = finding(rows[best], "MB/s", f"results.csv: {name} under {best}, the fastest")
        findings[f"{name}_worst_mb_s"] = finding(rows[worst], "MB/s",
                                                 f"results.csv: {name} under {worst}, the slowest")
        if rows[worst] > 0:
            spread = rows[best] / rows[worst]
            spreads.append((spread, name))
            findings[f"{name}_spread_ratio"] = finding(spread, "ratio", f"{name}: {best} / {worst}")
    if spreads:
        spread, name = max(spreads)
        findings["scheduler_spread_max"] = finding(spread, "ratio", f"the largest spread over the four operations "
                                                                    f"({name})")
    fair = fairness(table)
    for row in fair.itertuples():
        findings[f"fairness_{_key(row.scheduler)}"] = finding(
            row.jain, "", f"results.csv: Jain's index over the mixed pair's shares under {row.scheduler} "
                          f"(reader {row.read_share:.2f}, writer {row.write_share:.2f} of alone)")
    if not fair.empty:
        best, worst = fair.loc[fair["jain"].idxmax()], fair.loc[fair["jain"].idxmin()]
        findings["fairest_scheduler"] = finding(best["scheduler"], "", "results.csv: the scheduler with the highest "
                                                                       "fairness index in the mixed pair")
        findings["fairest_index"] = finding(best["jain"], "", f"the mixed pair under {best['scheduler']}, the "
                                                              "fairest")
        findings["least_fair_index"] = finding(worst["jain"], "", f"the mixed pair under {worst['scheduler']}, "
                                                                  "the least fair")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    if table.empty:
        return []
    schedulers = list(dict.fromkeys(table["scheduler"]))
    x = np.arange(len(schedulers))
    fig, axes = plots.panels("The four operations and a reader beside a writer, per I/O scheduler", 2, 3,
                             size=(max(11.0, 1.2 * len(schedulers) * 3 + 2), 7.0))
    for i, (ax, (name, *_)) in enumerate(zip(axes, OPERATIONS, strict=False)):
        rows = table[table["operation"] == name].set_index("scheduler").reindex(schedulers)
        err = rows["mb_s_std"].fillna(0.0).to_numpy() if "mb_s_std" in rows else None
        ax.bar(x, rows["mb_s"].to_numpy(), 0.6, yerr=err, capsize=3, color=f"C{i}")
        ax.set_title(name.replace("_", " "), fontsize=10)
        ax.set_ylabel("MB/s")
    fair = fairness(table).set_index("scheduler").reindex(schedulers) if "scheduler" in fairness(table) else None
    ax = axes[4]
    if fair is not None:
        ax.bar(x - 0.2, 100 * fair["read_share"], 0.4, color="C2", label="random reader")
        ax.bar(x + 0.2, 100 * fair["write_share"], 0.4, color="C0", label="sequential writer")
        ax.legend(fontsize=8)
    ax.set_title("mixed pair: each side's share of alone", fontsize=10)
    ax.set_ylabel("% of its MB/s alone")
    ax = axes[5]
    if fair is not None:
        ax.bar(x, fair["jain"], 0.6, color="C5")
    ax.set_ylim(0, 1.05)
    ax.set_title("fairness (Jain's index; 1 = even)", fontsize=10)
    for ax in axes:
        ax.set_xticks(x, schedulers, fontsize=8)
        ax.set_ylim(bottom=0)
    caption = (f"Sequential and random read and write throughput at QD {p['qd']} on the raw device under each I/O "
               "scheduler, and a random reader beside a sequential writer: each side's MB/s as a share of what it "
               "got alone, and Jain's fairness index over the two shares.")
    return [plots.save(fig, directory, "scheduler_impact", caption)]


EXPERIMENTS = [
    Experiment(
        name="scheduler-impact",
        summary="iozone's four operations under each I/O scheduler the device offers, and a random reader beside a "
                "sequential writer (each side's share, Jain's fairness index); restores the scheduler (needs root "
                "and a block device)",
        source='"Solid State Disks vs Magnetic Disks: Making the right choice" §3.5, §4.3.3',
        writes=True,
        preconditioning="none",
        params=(
            Param("schedulers", "strs", [], "schedulers to measure, in order; empty = every one the device offers",
                  "(all offered)"),
            Param("span", "size", 0, "range used (reads in its first half, writes in its second); 0 = the device, "
                                     "at most 2 GiB", "0 (device, ≤ 2GiB)"),
            Param("qd", "int", 8, "queue depth of every run (a queue the scheduler can reorder)", "8"),
            Param("runtime", "duration", 10**9, "measured time per run", "1s"),
            Param("warmup", "duration", 25 * 10**7, "left out at the start of each run (not the random write)",
                  "250ms"),
            Param("seq_size", "size", MiB, "request size of the sequential operations", "1MiB"),
            Param("random_size", "size", 4096, "request size of the random operations", "4KiB"),
            Param("random_write_bytes", "size", 4 * MiB, "the random write stops after this many bytes (or runtime): "
                                                          "a disk's write-back of cached random writes is slow",
                  "4MiB"),
            Param("attach_size", "size", 2 * GiB, "on a sim: target, the size it is attached at (sim attach)",
                  "2GiB"),
        ),
        keys=("scheduler", "operation"),
        check=_check,
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
