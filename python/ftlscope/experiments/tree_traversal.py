"""``tree-traversal`` (after "Solid State Disks vs Magnetic Disks: Making the right choice", §4.3.4, Figure
4.12: ``tar`` over the kernel tree as found in the directories and with its files sorted first, after Lunde's
improved tar): how much the order a program reads a tree's files in matters to the drive.

A synthetic tree (:mod:`._synthetic_tree`'s first snapshot: ``files`` in ``dirs``, ``seed``) is written to a
fresh file system (``fs``, ext4 by default) in a shuffled order, as the files of a tree that has lived a while
were written, and synced. Then every file is read whole, once per order, each with a cold cache (page cache,
dentries and inodes dropped before it), timed on the wall clock:

- ``directory``: as ``tar`` does without sorting: a depth-first walk, each directory's entries in the order
  the file system lists them, each file read when it is met;
- ``inode``: the walk first (inode numbers come with the directory entries, no stat), then the files read in
  inode-number order, globally (Lunde's sorted tar; GNU tar's ``--sort=inode`` sorts within a directory only);
- ``physical``: the walk, then each file's first block asked of the file system (the FS_IOC_FIEMAP ioctl),
  then the files read in the order of their data on the device.

The reading is done here in Python (open, read in 1 MiB calls, close), not by ``tar``: the same reader for the
three orders, and GNU tar does not read the files' data when its archive is /dev/null. ``scan_s`` is the walk
(and the FIEMAP calls), ``read_s`` the reading; a directory-order traversal reads as it walks, so its time is
all ``read_s``. On a simulated drive ``ftlscope sim attach`` serves (a ``sim:`` target is), ``drive_s`` is the
drive's own time for the order's requests (the sum of the model's latencies, ``drive_requests`` of them): free of
the FUSE/loop path and of the machine's load, so the orders compare on it even on a busy machine.

Needs root and ``--destructive DEVICE`` (it makes a file system). A ``sim:PRESET`` target is attached for the
run (``span``, default 2 GiB) and detached after.
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..errors import UsageError
from ..metrics import DRIVE_S
from ..units import format_size
from . import _fs_session as fss
from ._attached import drive_time
from ._synthetic_tree import TreeShape, write_tree
from .base import Experiment, Param, finding
from .context import Context

NAME = "tree-traversal"
GiB = 1 << 30
# The size a sim: target is attached at for span=0: room for the tree many times over.
DEFAULT_ATTACH = 2 * GiB
READ_CHUNK = 1 << 20
SETTLE_S = 3.0
ORDERS = ("directory", "inode", "physical")

# FIEMAP by hand: the one PyPI package for it (filefrag 0.1.1) is a young single-release project; the ioctl is
# a fixed 32-byte header and one 56-byte extent record, which struct packs in a few lines.
FS_IOC_FIEMAP = 0xC020660B  # _IOWR('f', 11, struct fiemap)
_FIEMAP_HEADER = struct.Struct("=QQIIII")  # fm_start, fm_length, fm_flags, fm_mapped_extents, fm_extent_count, reserved
_FIEMAP_EXTENT = struct.Struct("=QQQQQIIII")  # fe_logical, fe_physical, fe_length, 2 reserved, fe_flags, 3 reserved


def first_physical_byte(fd: int) -> int:
    """The device offset of the file's first extent (-1 for a file without one: empty, or inline)."""
    request = bytearray(_FIEMAP_HEADER.pack(0, 0xFFFFFFFFFFFFFFFF, 0, 0, 1, 0) + bytes(_FIEMAP_EXTENT.size))
    fcntl.ioctl(fd, FS_IOC_FIEMAP, request)
    mapped = _FIEMAP_HEADER.unpack_from(request)[3]
    if mapped == 0:
        return -1
    return _FIEMAP_EXTENT.unpack_from(request, _FIEMAP_HEADER.size)[1]


def check(p: dict[str, Any]) -> None:
    for name in ("files", "dirs"):
        if p[name] < 1:
            raise UsageError(f"--param {name}: give at least 1 (got {p[name]})")
    unknown = [o for o in p["orders"] if o not in ORDERS]
    if unknown:
        raise UsageError(f"--param orders: unknown order {', '.join(unknown)} (known: {','.join(ORDERS)})")
    if p["fs"] not in fss.FILESYSTEMS:
        raise UsageError(f"--param fs: unknown file system {p['fs']} (known: {','.join(fss.FILESYSTEMS)})")


def _read(path: str) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        total = 0
        while chunk := os.read(fd, READ_CHUNK):
            total += len(chunk)
        return total
    finally:
        os.close(fd)


def _walk(top: str) -> list[tuple[str, int]]:
    """(path, inode) of every regular file, depth first, entries in the file system's listing order."""
    return list(_files(top))


def _files(top: str) -> Iterator[tuple[str, int]]:
    """:func:`_walk` as it goes: each directory is listed only when the walk reaches it (as tar does), so a
    reader of the files in this order reads while it lists."""
    stack = [top]
    while stack:
        directory = stack.pop()
        subdirs = []
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    yield entry.path, entry.inode()
        stack.extend(reversed(subdirs))


def traverse(top: Path, order: str) -> dict[str, Any]:
    """Read every file under ``top`` in ``order``; the times and amounts."""
    began = time.monotonic()
    if order == "directory":
        files = total = 0
        for path, _ in _files(str(top)):
            total += _read(path)
            files += 1
        scanned = began
    else:
        found = _walk(str(top))
        if order == "inode":
            keyed = sorted(found, key=lambda f: f[1])
        else:
            located = []
            for path, inode in found:
                fd = os.open(path, os.O_RDONLY)
                try:
                    located.append((first_physical_byte(fd), inode, path))
                finally:
                    os.close(fd)
            keyed = [(path, inode) for _, inode, path in sorted(located)]
        scanned = time.monotonic()
        total = sum(_read(path) for path, _ in keyed)
        files = len(keyed)
    done = time.monotonic()
    return {"files": files, "bytes": total, "seconds": done - began, "scan_s": scanned - began,
            "read_s": done - scanned, "mb_s": total / (done - began) / 1e6}


def measure(ctx: Context, p: dict[str, Any]):
    fss.check_target(ctx, NAME, p["fs"])
    shape = TreeShape(p["files"], p["dirs"], seed=p["seed"])
    try:
        with fss.file_system(ctx, NAME, p, DEFAULT_ATTACH) as (device, where, point):
            top = point / "tree"
            began = time.monotonic()
            files, size = write_tree(top, shape)
            fss.timed_sync(point)
            # Let the drive settle: a drive's write cache still holding the tree would serve the first order's
            # reads from DRAM, the later ones from flash (or the platters).
            time.sleep(SETTLE_S)
            if ctx.repetition == 0:
                ctx.notes.append(f"{NAME}: {fss.conditions(p, shape.describe(), where)}; {files:,} files, "
                                 f"{format_size(size)}, written in a shuffled order in "
                                 f"{time.monotonic() - began:.1f} s, synced, {SETTLE_S:g} s idle before the traversals")
            for order in p["orders"]:
                fss.cold(point)
                with drive_time(device) as drive:
                    row = {"read_order": order, "status": "measured", "reason": "", **traverse(top, order)}
                if drive:
                    row[DRIVE_S] = drive[DRIVE_S]
                    row["drive_requests"] = drive["drive_requests"]
                yield row
    except fss.Skip as skip:
        if ctx.repetition == 0:
            ctx.notes.append(f"{NAME} skipped: {skip}")
        for order in p["orders"]:
            yield {"read_order": order, "status": "skipped", "reason": str(skip), "seconds": np.nan}


def _measured(table: pd.DataFrame) -> pd.DataFrame:
    return table[(table["status"] == "measured") & table["seconds"].notna()]


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    rows = _measured(table).set_index("read_order")
    for order in rows.index:
        findings[f"{order}_s"] = finding(rows.loc[order, "seconds"], "s",
                                         f"results.csv: reading every file in {order} order, cold cache")
    if "directory" in rows.index:
        base = rows.loc["directory", "seconds"]
        for order in ("inode", "physical"):
            if order in rows.index and rows.loc[order, "seconds"] > 0:
                findings[f"{order}_speedup"] = finding(
                    base / rows.loc[order, "seconds"], "ratio",
                    f"directory-order time / {order}-order time (above 1: sorting the reads by {order} helps)")
                findings[f"{order}_time_saved_share"] = finding(
                    1 - rows.loc[order, "seconds"] / base, "share",
                    f"1 - {order} / directory time (the thesis's disk: 67 % by sorting, its SSDs 0-3 %)")
            if DRIVE_S in rows and order in rows.index and rows.loc[order, DRIVE_S] > 0:
                findings[f"{order}_drive_speedup"] = finding(
                    rows.loc["directory", DRIVE_S] / rows.loc[order, DRIVE_S], "ratio",
                    f"results.csv: the attached simulated drive's own time (drive_s), directory order / {order} "
                    "order: the same comparison without the FUSE/loop path and the machine's load")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    rows = _measured(table)
    if rows.empty:
        return []
    fig, ax = plots.figure("Reading a whole tree, by the order of the reads", "order", "time (s)", size=(7, 4.5))
    x = np.arange(len(rows))
    err = rows["seconds_std"].fillna(0.0).to_numpy() if "seconds_std" in rows else None
    ax.bar(x, rows["scan_s"].to_numpy(), 0.6, color="C7", label="walk (and FIEMAP)")
    ax.bar(x, rows["read_s"].to_numpy(), 0.6, bottom=rows["scan_s"].to_numpy(), yerr=err, capsize=3,
           color="C0", label="reading the files")
    ax.set_xticks(x, [f"{o}\n{mb:.1f} MB/s" for o, mb in zip(rows["read_order"], rows["mb_s"], strict=True)])
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return [plots.save(fig, directory, "tree_traversal",
                       "Time to read every file of the tree with a cold cache: in directory order (as tar), "
                       "sorted by inode number, and sorted by the data's place on the device (FIEMAP).")]


EXPERIMENTS = [
    Experiment(
        name=NAME,
        summary="read every file of a synthetic source tree in directory order (as tar), in inode order and in "
                "the data's physical order (FIEMAP), each with a cold cache (makes a file system: needs root and "
                "a block device)",
        source='"Solid State Disks vs Magnetic Disks: Making the right choice" §4.3.4',
        writes=True,
        preconditioning="none",
        params=(
            Param("files", "int", 30000, "files in the tree (the thesis's kernel tree: almost 29,000)"),
            Param("dirs", "int", 1800, "directories (the thesis: just under 1,800)"),
            Param("seed", "int", 1, "seed of the tree (same seed, same tree; git-checkout's first tag)"),
            Param("orders", "strs", list(ORDERS), "orders to read the files in", ",".join(ORDERS)),
            Param("fs", "str", "ext4", "file system made on the device (the thesis: ext4)"),
            Param("span", "size", 0, "size of the file system: the first span bytes of the device (0: all of it, "
                  "at most 64 GiB; a sim: target is attached at span, or at 2GiB for 0)", "0 (all; 2GiB on sim:)"),
        ),
        keys=("read_order",),
        check=check,
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
