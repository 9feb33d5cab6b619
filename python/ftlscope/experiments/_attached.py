"""What the system experiments (scheduler-impact, video-streaming) share besides fs-impact's mkfs and mount: the
target checks, and a simulated target attached as a real block device for the run (``ftlscope sim attach``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import UsageError
from ..metrics import DRIVE_S
from ..targets import RealTarget
from ..units import format_size
from .context import Context

MiB = 1 << 20


def check_block_target(ctx: Context, name: str, why: str) -> None:
    """Refuse a file target and a run without root, before anything is touched."""
    if ctx.kind not in ("block_device", "simulated"):
        raise UsageError(f"{name}: {ctx.target} is a file; {why}, so give a block device (a loop device over the "
                         "file will do: losetup --find --show FILE)")
    if os.geteuid() != 0:
        raise UsageError(f"{name}: {why}, which needs root; run it as root")


@contextlib.contextmanager
def block_device(ctx: Context, name: str, attach_size: int) -> Iterator[tuple[str, int]]:
    """The block device to run on and its size: the target itself, or for a simulated target the same drive
    attached as a loop device (``attach_size`` bytes, its data in a temporary store), detached after whatever
    happened (an error, Ctrl-C)."""
    if ctx.kind != "simulated":
        yield ctx.target, ctx.capacity
        return
    from .. import attach

    spec = ctx.target.removeprefix("sim:")
    size = min(attach_size, ctx.capacity) // MiB * MiB
    store = Path(tempfile.mkdtemp(prefix=f"ftlscope-{name}-store-"))
    try:
        record = attach.attach(spec, str(size), str(store))
        try:
            if ctx.repetition == 0:
                ctx.notes.append(f"{name}: sim:{spec} attached as {record.device} ({format_size(size)}); "
                                 f"{attach.overhead_text(record)}")
            yield record.device, size
        finally:
            attach.detach(record.device)
    finally:
        shutil.rmtree(store, ignore_errors=True)


@contextlib.contextmanager
def on_block_device(ctx: Context, device: str) -> Iterator[None]:
    """Run ``ctx``'s workloads on ``device`` (the attached loop device) instead of the simulated target, so they
    are timed on the wall clock through the kernel and kept in raw/ like every other run."""
    if ctx.kind != "simulated":
        yield
        return
    # A blank attached drive needs no --destructive: it is ftlscope's own (docs/attach.md, safety).
    with _writing_to(ctx, device, destructive=None, force=False):
        yield


def attached_flash_drive(device: str) -> str | None:
    """``sim:PRESET`` when ``device`` is a simulated flash drive that ``ftlscope sim attach`` serves, else None
    (a real device, an attached hard disk). Its model starts empty at attach, whatever its store holds, so a
    read of a block not written since then touches no flash."""
    from ..attach_state import attachment_for_device
    from ..sim import SimDevice

    record = attachment_for_device(device)
    if record is None:
        return None
    return None if SimDevice.open(record.spec).hard_disk else f"sim:{record.spec}"


@contextlib.contextmanager
def writing(ctx: Context) -> Iterator[None]:
    """Let a read-only experiment's context write to its block device for a while (the same device opened for
    writing, under the usual safety checks: an attached drive that is blank needs no --destructive, one with a
    file system needs --destructive DEVICE --force), then read-only again."""
    with _writing_to(ctx, ctx.target, destructive=ctx.destructive, force=ctx.force):
        yield


@contextlib.contextmanager
def _writing_to(ctx: Context, device: str, *, destructive: str | None, force: bool) -> Iterator[None]:
    """``ctx``'s workloads on ``device`` opened for writing (under the safety checks ``destructive`` and
    ``force`` pass), then on its own device again."""
    target = ctx.device
    ctx.device = RealTarget.open(device, writes=True, destructive=destructive, force=force, size=None,
                                 engine=ctx.engine, progress=ctx.progress)
    try:
        yield
    finally:
        ctx.device = target


def drive_counters(device: str) -> dict | None:
    """The counters of the simulated drive ``ftlscope sim attach`` serves as ``device``, as of now, or None when
    ``device`` is not an attached drive. The server writes them every second and, where its state.json says
    ``stats_on: SIGUSR1``, at once when sent that signal, which this sends: it then waits for a copy taken after
    it asked (a few ms); with a server from before that, for its next periodic write (at most a few seconds).
    ``model_latency_total_ns`` is the simulated drive's own time, free of the FUSE/loop path's and of the
    machine's load."""
    from ..attach_state import attachment_for_device

    record = attachment_for_device(device)
    if record is None:
        return None
    path = record.directory / "stats.json"
    asked = time.time()
    if record.stats_on_sigusr1:
        with contextlib.suppress(OSError):
            os.kill(record.pid, signal.SIGUSR1)
    deadline = asked + 5.0
    while time.time() < deadline:
        stats = record.stats()
        # A server from before "taken" is judged by the file's time (one stat, only then).
        if stats is not None and (stats["taken"] if "taken" in stats else _mtime(path)) > asked:
            return stats
        time.sleep(0.002)
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@contextlib.contextmanager
def drive_time(device: str) -> Iterator[dict[str, float]]:
    """What the attached simulated drive ``device`` did while the block ran: ``drive_s`` (the sum of its own
    latencies: its busy time at QD 1), ``drive_requests``, ``drive_bytes_read`` and ``drive_bytes_written``,
    filled in when the block ends; left empty on any other device (or when the counters could not be read)."""
    figures: dict[str, float] = {}
    before = drive_counters(device)
    yield figures
    after = drive_counters(device) if before is not None else None
    if before is None or after is None:
        return
    figures.update({
        DRIVE_S: (after["model_latency_total_ns"] - before["model_latency_total_ns"]) / 1e9,
        "drive_requests": after["requests"] - before["requests"],
        "drive_bytes_read": after["bytes_read"] - before["bytes_read"],
        "drive_bytes_written": after["bytes_written"] - before["bytes_written"],
    })
