"""``fs-impact`` (after the file-system comparison of "Performance comparison of SSDs and HDDs", its §4.2:
iozone's four basic operations on each file system): how much the file system between an application and the
drive changes what the application gets.

For every file system asked for (``filesystems``), in turn: ``mkfs.X`` with its defaults on the target block
device, mount it at a private temporary directory, create one file (``span`` bytes; filled by the engine, so
reads hit written blocks), and run through the engine on that file, at QD 1 like iozone: sequential write
(``seq_size`` requests, overwriting the file in place), sequential read, random read and random write
(``random_size`` requests), each for ``runtime`` (the random write also stops after ``random_write_bytes``).
Every request uses O_DIRECT (the engine's default), so the page cache serves nothing; between phases the file
system is synced and the kernel's caches are dropped (``/proc/sys/vm/drop_caches``), so metadata comes from the
device too, and after a writing phase the device's own write cache is waited for (``sync DEVICE``, a flush):
a disk's cache takes small random writes at cache speed and then needs about 10 ms of seeking per write to put
them back, which would otherwise land on the next phase (or hold one request past the engine's I/O time-out).
Then unmount — always, also on an error or Ctrl-C. A file system whose ``mkfs.X`` is missing, that the kernel
cannot mount, or that refuses O_DIRECT or has no room for the file is skipped with the reason (rows with ``status``
= ``skipped``, and a note).

It makes file systems on the device, so it needs root and ``--destructive DEVICE``, and a block device that
nothing has mounted (ftlscope's usual write checks, made before anything is touched). A simulated device
(``sim:PRESET``) is attached as a block device for the run (what ``ftlscope sim attach`` does, at
``attach_size`` bytes, its data in a temporary store) and detached after; that needs root and /dev/fuse.

Findings per operation: the best and worst file system's MB/s and the spread (best / worst). On a simulated
drive (attached by the run or by ``ftlscope sim attach``) each row also has ``drive_s`` and ``drive_mb_s``: the
drive's own time for the phase's requests (the sum of the model's latencies) and the MB/s it gives, free of the
FUSE/loop path's overhead and of the machine's load, and the findings the best of those per operation.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..errors import FtlscopeError, TargetError, UsageError
from ..metrics import DRIVE_MB_S, DRIVE_S
from ..targets import RealTarget
from ..units import format_size
from ._attached import block_device, drive_time
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context, Interrupted

MiB = 1 << 20
GiB = 1 << 30
FILESYSTEMS = ("ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "nilfs2", "reiserfs")
# (operation, engine op, pattern, which request size parameter), in iozone's order: write first, so the
# reads find the file as the file system laid it out.
OPERATIONS = (
    ("sequential_write", "write", "sequential", "seq_size"),
    ("sequential_read", "read", "sequential", "seq_size"),
    ("random_read", "read", "random", "random_size"),
    ("random_write", "write", "random", "random_size"),
)
# mkfs asks before overwriting an earlier file system (the previous one of this very experiment); these
# flags say yes and nothing else, so every file system is made with its defaults.
_MKFS_YES = {"ext2": ["-F", "-q"], "ext3": ["-F", "-q"], "ext4": ["-F", "-q"], "xfs": ["-f", "-q"],
             "btrfs": ["-f", "-q"], "f2fs": ["-f", "-q"], "nilfs2": ["-f", "-q"], "reiserfs": ["-f", "-q"]}
# Of the device, at most this share goes to the file by default: a file system's metadata and journal need
# the rest (btrfs on a small device most of all).
DEFAULT_SHARE = 0.5
MAX_SHARE = 0.7


def _check(p: dict[str, Any]) -> None:
    unknown = [fs for fs in p["filesystems"] if fs not in FILESYSTEMS]
    if unknown:
        raise UsageError(f"--param filesystems: unknown file system {', '.join(unknown)} "
                         f"(known: {','.join(FILESYSTEMS)})")
    for name in ("seq_size", "random_size"):
        if p[name] <= 0 or p[name] % 4096:
            raise UsageError(f"--param {name}: give a multiple of 4 KiB (got {p[name]})")


def _check_target(ctx: Context, p: dict[str, Any], capacity: int) -> int:
    """Refuse what this experiment cannot run on; the file size it will use (``span``, capped)."""
    if ctx.kind not in ("block_device", "simulated"):
        raise UsageError(f"fs-impact: {ctx.target} is a file; it makes file systems, so give a block device "
                         "(a loop device over the file will do: losetup --find --show FILE)")
    if os.geteuid() != 0:
        raise UsageError("fs-impact: making and mounting file systems needs root; run it as root")
    room = int(capacity * MAX_SHARE) // MiB * MiB
    size = (p["span"] or min(int(capacity * DEFAULT_SHARE), GiB)) // MiB * MiB
    if size < MiB or room < MiB:
        raise UsageError(f"--param span: give at least 1MiB on a device of at least 2MiB (got a "
                         f"{format_size(size)} file on {format_size(capacity)})")
    if size > room:
        # As every experiment caps its span to the target: here to what leaves the file system its metadata.
        if ctx.repetition == 0:
            ctx.notes.append(f"fs-impact: the file is {format_size(room)}, not {format_size(size)}: "
                             f"{MAX_SHARE:.0%} of the device, so the file system has room for its metadata")
        size = room
    return size


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True)


def _first_line(done: subprocess.CompletedProcess) -> str:
    # The tools put the cause first (mkfs.xfs: "... too small ...") and the usage or a hint after it.
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return lines[0] if lines else f"exit status {done.returncode}"


def wait_for_write_back(device: str, who: str = "fs-impact") -> float:
    """Wait until ``device`` has written back what its write cache holds (``sync DEVICE``: a flush, waited for
    without the engine's 30 s I/O time-out); the seconds it took."""
    started = time.monotonic()
    done = _run("sync", device)
    if done.returncode != 0:
        raise TargetError(f"{who}: sync {device} failed ({_first_line(done)})")
    return time.monotonic() - started


def drop_caches(point: Path) -> None:
    """Write back the file system's dirty data and metadata, then drop the page cache, dentries and inodes.
    Only this file system is synced (syncfs), not every one on the machine: a global sync waits for other
    programs' writes too."""
    done = _run("sync", "--file-system", str(point))
    if done.returncode != 0:
        raise TargetError(f"fs-impact: sync --file-system {point} failed ({_first_line(done)})")
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


@contextlib.contextmanager
def mounted(device: str, fs: str) -> Iterator[Path]:
    """``device`` mounted as ``fs`` at a fresh temporary directory; unmounted and the directory removed on
    leaving, whatever happened (an error, Ctrl-C). Raises _Skip when the kernel will not mount it."""
    point = Path(tempfile.mkdtemp(prefix=f"ftlscope-fs-impact-{fs}-"))
    try:
        done = _run("mount", "-t", fs, device, str(point))
        if done.returncode != 0:
            raise _Skip(f"the kernel cannot mount {fs} here ({_first_line(done)})")
        try:
            yield point
        finally:
            _unmount(point)
    finally:
        with contextlib.suppress(OSError):
            point.rmdir()


def _unmount(point: Path) -> None:
    # udev or a just-finished writer may hold the mount for a moment; a lazy unmount is the last resort, so a
    # mount is never left behind.
    for _ in range(50):
        if _run("umount", str(point)).returncode == 0:
            return
        time.sleep(0.1)
    _run("umount", "--lazy", str(point))


class _Skip(Exception):
    """This file system cannot be measured here; the message says why."""


def _mkfs(device: str, fs: str) -> None:
    tool = shutil.which(f"mkfs.{fs}")
    if tool is None:
        raise _Skip(f"mkfs.{fs} is not installed")
    done = _run(tool, *_MKFS_YES[fs], device)
    if done.returncode != 0:
        raise _Skip(f"mkfs.{fs} failed ({_first_line(done)})")


@contextlib.contextmanager
def _on_file(ctx: Context, path: Path, size: int) -> Iterator[None]:
    """Run ``ctx``'s workloads on the file at ``path`` (created at ``size`` and filled by the engine) instead of
    the device, so they are timed and kept in raw/ like every other run; the device is the target again after."""
    device = ctx.device
    try:
        ctx.device = RealTarget.open(str(path), writes=True, destructive=None, force=False, size=size,
                                     engine=ctx.engine, progress=ctx.progress)
    except Interrupted:
        raise
    except FtlscopeError as exc:
        # No room for the file (its metadata took more), or no O_DIRECT: this file system cannot be measured
        # here, the others still can.
        raise _Skip(f"the file could not be made on it ({exc.message})") from None
    try:
        yield
    finally:
        ctx.device = device


def _measure_one(ctx: Context, p: dict[str, Any], device: str, fs: str, size: int) -> list[dict[str, Any]]:
    _mkfs(device, fs)
    rows = []
    with mounted(device, fs) as point, _on_file(ctx, point / "fs-impact.data", size):
        for name, op, pattern, size_param in OPERATIONS:
            drop_caches(point)
            # The random write is bounded in bytes too, with no warm-up adding more (see the module's doc).
            bounded = {"total_bytes": p["random_write_bytes"]} if name == "random_write" else {
                "warmup_ns": p["warmup"]}
            wl = workload(op, size=p[size_param], pattern=pattern, qd=1, span=size, runtime_ns=p["runtime"],
                          seed=1 + ctx.repetition, **bounded)
            with drive_time(device) as drive:
                result = ctx.run(wl, f"{fs} {name.replace('_', ' ')} {format_size(p[size_param])}")
            if op == "write":
                wait_for_write_back(device)
            rows.append({"filesystem": fs, "operation": name, "status": "measured", "reason": "",
                         "file_bytes": size, **op_metrics(result, op), **drive_rate(drive, op)})
        drop_caches(point)
    return rows


def drive_rate(drive: dict[str, float], op: str) -> dict[str, float]:
    """On a simulated drive ``ftlscope sim attach`` serves: the bytes it moved in the phase (warm-up included)
    over the sum of its own latencies for them, ``drive_mb_s``, and that time, ``drive_s``. The phases run at
    QD 1, so the sum is the drive's busy time: what the drive itself delivers, free of the FUSE/loop path and of
    the machine's load (a request the path splits into pieces served at once counts each piece's time, which
    can only lower it). Empty on any other device (``drive``, from :func:`drive_time`, is then empty)."""
    busy_s = drive.get(DRIVE_S, 0.0)
    if busy_s <= 0:
        return {}
    moved = drive["drive_bytes_read" if op == "read" else "drive_bytes_written"]
    return {DRIVE_S: busy_s, DRIVE_MB_S: moved / busy_s / 1e6}


def measure(ctx: Context, p: dict[str, Any]):
    _check_target(ctx, p, ctx.capacity if ctx.kind != "simulated" else min(p["attach_size"], ctx.capacity))
    with block_device(ctx, "fs-impact", p["attach_size"]) as (device, capacity):
        size = _check_target(ctx, p, capacity)
        try:
            for fs in p["filesystems"]:
                try:
                    rows = _measure_one(ctx, p, device, fs, size)
                except _Skip as skip:
                    reason = str(skip)
                    if ctx.repetition == 0:
                        ctx.notes.append(f"fs-impact: {fs} skipped: {reason}")
                    rows = [{"filesystem": fs, "operation": name, "status": "skipped", "reason": reason,
                             "file_bytes": size, "mb_s": np.nan} for name, *_ in OPERATIONS]
                yield from rows
        finally:
            # Leave the device without the last file system's signature (also after an error or Ctrl-C), so
            # the next run on it needs no --force; a failure here is a note, not a second error over the first.
            done = _run("wipefs", "--all", "--quiet", device)
            if done.returncode != 0:
                ctx.notes.append(f"fs-impact: wipefs {device} failed after the run ({_first_line(done)})")


def _measured(table: pd.DataFrame) -> pd.DataFrame:
    return table[(table["status"] == "measured") & table["mb_s"].notna()]


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    measured = _measured(table)
    findings["filesystems_measured"] = finding(measured["filesystem"].nunique(), "count",
                                               "results.csv: file systems with status measured")
    for name, *_ in OPERATIONS:
        rows = measured[measured["operation"] == name].set_index("filesystem")["mb_s"]
        if rows.empty:
            continue
        best, worst = rows.idxmax(), rows.idxmin()
        findings[f"{name}_best_mb_s"] = finding(rows[best], "MB/s", f"results.csv: {name} on {best}, the fastest")
        findings[f"{name}_worst_mb_s"] = finding(rows[worst], "MB/s", f"results.csv: {name} on {worst}, the slowest")
        if rows[worst] > 0:
            findings[f"{name}_spread_ratio"] = finding(rows[best] / rows[worst], "ratio",
                                                       f"{name}: {best} / {worst}")
        if DRIVE_MB_S in measured:
            drive = measured[measured["operation"] == name].set_index("filesystem")[DRIVE_MB_S].dropna()
            if not drive.empty:
                findings[f"{name}_best_drive_mb_s"] = finding(
                    drive.max(), "MB/s", f"results.csv: {name} on {drive.idxmax()}, in the attached simulated "
                    f"drive's own time ({DRIVE_MB_S}: without the FUSE/loop path and the machine's load)")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    measured = _measured(table)
    if measured.empty:
        return []
    systems = list(dict.fromkeys(measured["filesystem"]))
    # One panel per operation, each on its own scale (sequential MB/s dwarf 4 KiB random ones), the file
    # systems side by side in each: the layout of the thesis's Figures 4.1-4.7.
    fig, axes = plots.panels("Throughput of iozone's four operations per file system", 2, 2,
                             size=(max(7.5, 1.1 * len(systems) * 2 + 2), 6.5))
    x = np.arange(len(systems))
    for i, (ax, (name, *_)) in enumerate(zip(axes, OPERATIONS, strict=True)):
        rows = measured[measured["operation"] == name].set_index("filesystem").reindex(systems)
        err = rows["mb_s_std"].fillna(0.0).to_numpy() if "mb_s_std" in rows else None
        ax.bar(x, rows["mb_s"].to_numpy(), 0.6, yerr=err, capsize=3, color=f"C{i}")
        ax.set_xticks(x, systems)
        ax.set_title(name.replace("_", " "), fontsize=10)
        ax.set_ylabel("MB/s")
        ax.set_ylim(bottom=0)
    skipped = sorted(set(table.loc[table["status"] == "skipped", "filesystem"]))
    caption = ("Sequential and random read and write throughput on one file, per file system, at QD 1 with "
               "O_DIRECT" + (f"; skipped: {', '.join(skipped)}." if skipped else "."))
    return [plots.save(fig, directory, "fs_impact", caption)]


EXPERIMENTS = [
    Experiment(
        name="fs-impact",
        summary="iozone's four operations (sequential and random read and write) on one file under each file "
                "system the kernel mounts (mkfs with defaults; makes file systems: needs root and a block device)",
        source='"Performance comparison of SSDs and HDDs" §4.2',
        writes=True,
        preconditioning="none",
        params=(
            Param("span", "size", 0, "size of the file; 0 = half the device, at most 1 GiB", "0 (half, ≤ 1GiB)"),
            Param("filesystems", "strs", list(FILESYSTEMS), "file systems to try, in order",
                  ",".join(FILESYSTEMS)),
            Param("runtime", "duration", 5 * 10**9, "measured time per operation", "5s"),
            Param("warmup", "duration", 5 * 10**8, "left out at the start of each operation", "500ms"),
            Param("seq_size", "size", MiB, "request size of the sequential operations", "1MiB"),
            Param("random_size", "size", 4096, "request size of the random operations", "4KiB"),
            Param("random_write_bytes", "size", 4 * MiB, "the random write stops after this many bytes (or "
                  "runtime): a disk's write-back of cached random writes is slow", "4MiB"),
            Param("attach_size", "size", 2 * GiB, "on a sim: target, the size it is attached at (sim attach)",
                  "2GiB"),
        ),
        keys=("filesystem", "operation"),
        check=_check,
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
