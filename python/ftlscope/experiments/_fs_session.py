"""A fresh file system on the target for an experiment that runs programs on files (git-checkout,
tree-traversal): the block device (a ``sim:`` target attached for the run, as ``ftlscope sim attach`` does),
``mkfs`` with its defaults, a private mount, and on leaving, whatever happened (an error, Ctrl-C): unmount,
wipe the file system's signature, detach. The mount and cache-dropping are fs-impact's (:mod:`.fs_impact`).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import RunError, UsageError
from ..units import format_size
from ._attached import block_device, check_block_target
from .context import Context
from .fs_impact import _MKFS_YES, _Skip, drop_caches, mounted

MiB = 1 << 20
GiB = 1 << 30
FILESYSTEMS = tuple(_MKFS_YES)
# ext2/3/4 would otherwise zero their inode tables and journal in the background after the mount
# (ext4lazyinit), writing under the measurement for minutes on a disk; done at mkfs time instead.
# With span=0 on a large block device, the file system covers its first 64 GiB: initialising the inode tables
# of a whole multi-terabyte disk at mkfs time would take it hours (1 GiB of them for 64 GiB).
DEFAULT_MAX_FS = 64 * GiB
_MKFS_EXTRA = {fs: ["-E", "lazy_itable_init=0,lazy_journal_init=0"] for fs in ("ext2", "ext3", "ext4")}


class Skip(Exception):
    """The experiment cannot run here (a tool or a file system missing); the message says why."""


def check_target(ctx: Context, name: str, fs: str) -> None:
    """Refuse what the experiment cannot run on, before anything is touched."""
    if fs not in FILESYSTEMS:
        raise UsageError(f"--param fs: unknown file system {fs} (known: {','.join(FILESYSTEMS)})")
    check_block_target(ctx, name, "it makes and mounts a file system")


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True)


def _first_line(done: subprocess.CompletedProcess) -> str:
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return lines[0] if lines else f"exit status {done.returncode}"


def _size_args(fs: str, size: int) -> list[str]:
    """mkfs's arguments for a file system of ``size`` bytes at the start of the device."""
    if fs in ("ext2", "ext3", "ext4"):
        return [f"{size // 1024}k"]  # mke2fs's fs-size operand, after the device
    if fs == "xfs":
        return ["-d", f"size={size}"]
    if fs == "btrfs":
        return ["-b", str(size)]
    raise Skip(f"a file system of span bytes is made only with ext2/3/4, xfs and btrfs, not {fs}; give span=0 "
               "(the whole device)")


@contextlib.contextmanager
def file_system(ctx: Context, name: str, p: dict[str, Any], default_attach: int) -> Iterator[tuple[str, str, Path]]:
    """(device, where: the device and the part of it, mount point) of a fresh ``p["fs"]`` over the first
    ``p["span"]`` bytes of the target (0: all of it, at most DEFAULT_MAX_FS; a ``sim:`` target is attached at
    ``span``, or ``default_attach`` for 0); everything undone on leaving.
    Raises Skip when mkfs is missing or the kernel will not mount it."""
    fs = p["fs"]
    attached = ctx.kind == "simulated"
    with block_device(ctx, name, p["span"] or default_attach) as (device, capacity):
        try:
            tool = shutil.which(f"mkfs.{fs}")
            if tool is None:
                raise Skip(f"mkfs.{fs} is not installed")
            size = (p["span"] or min(capacity, DEFAULT_MAX_FS)) // MiB * MiB
            partial = size < capacity and not attached
            size_args = _size_args(fs, size) if partial else []
            before, after = ([], size_args) if fs in ("ext2", "ext3", "ext4") else (size_args, [])
            done = _run(tool, *_MKFS_YES[fs], *_MKFS_EXTRA.get(fs, []), *before, device, *after)
            if done.returncode != 0:
                raise Skip(f"mkfs.{fs} failed ({_first_line(done)})")
            where = f"the first {format_size(size)} of {device}" if partial else device
            try:
                with mounted(device, fs) as point:
                    yield device, where, point
            except _Skip as exc:  # the kernel cannot mount it
                raise Skip(str(exc)) from None
        finally:
            # Leave the device without the file system's signature, so the next run needs no --force.
            done = _run("wipefs", "--all", "--quiet", device)
            if done.returncode != 0:
                ctx.notes.append(f"{name}: wipefs {device} failed after the run ({_first_line(done)})")


def cold(point: Path) -> None:
    """Write back what the file system holds dirty, then drop the page cache, dentries and inodes."""
    drop_caches(point)


def conditions(p: dict[str, Any], shape_text: str, where: str) -> str:
    """The conditions a result states: file system, cache, tree."""
    return (f"{p['fs']} made with its defaults on {where}, the page cache, dentries and inodes dropped before "
            f"each timed step; tree: {shape_text}")


def timed_sync(point: Path) -> float:
    """Seconds to write back what the file system holds dirty (syncfs), on the wall clock."""
    import time

    began = time.monotonic()
    done = _run("sync", "--file-system", str(point))
    if done.returncode != 0:
        raise RunError(f"sync --file-system {point} failed ({_first_line(done)})")
    return time.monotonic() - began
