"""A block device or a regular file as a target: runs on the kernel, idling in wall time, a controller reset
through the NVMe admin path, no power cycle."""

from __future__ import annotations

import json
import stat
import time
from typing import Any

from .. import safety
from ..errors import NotAvailable, TargetError, UsageError
from ..results import RunResult
from ..runner import prepare_target, stat_target
from ..runner import run as engine_run
from ..workload import Workload
from .base import Target


class RealTarget(Target):
    def __init__(self, path: str, kind: str, capacity: int, logical_block: int, notes: list[str]):
        super().__init__()
        self.name = path
        self.kind = kind
        self.capacity = capacity
        self.logical_block = logical_block
        self.notes.extend(notes)

    @classmethod
    def open(cls, path: str, *, writes: bool, destructive: str | None, force: bool, size: int | None,
             engine: str, progress: bool) -> RealTarget:
        """Check the permission to write (before anything is touched), create or extend a file to ``size``,
        then read what the kernel says of the target."""
        from .. import _native

        notes: list[str] = []
        st = stat_target(path)
        if st is None or stat.S_ISREG(st.st_mode):
            # A file: an experiment that writes needs the same permission as any write (checked first, before
            # anything is touched); then the file is created/extended to --size and filled, so reads hit data.
            if writes and st is not None:
                safety.check_write_allowed(path, writes=True, destructive=destructive, force=force)
            prepared = prepare_target(
                path, Workload(mix={"read": 100}), size=size, destructive=destructive, force=force, engine=engine,
                progress=progress,
            )
            notes.extend(prepared.notices)
        elif stat.S_ISBLK(st.st_mode):
            if size is not None:
                raise UsageError("--size: a block device has its own size; use --param span=... to use part of it")
            safety.check_write_allowed(path, writes=writes, destructive=destructive, force=force)
            if not writes:
                notes.append("read-only: the device's data was read in place")
        else:
            raise TargetError(f"{path} is neither a block device nor a regular file")
        try:
            info = json.loads(_native.target_info(path, False, True))
        except Exception as exc:  # the native layer words the reason (permission, missing device)
            raise TargetError(f"cannot open {path}: {exc}") from None
        return cls(path, info["kind"], int(info["size_bytes"]), int(info["logical_block_size"]), notes)

    def run(self, workload: Workload, *, engine: str, trace: bool, window: str, destructive: str | None,
            force: bool, progress: bool, label: str, health_interval: str | int,
            show_serial: bool = False) -> RunResult:
        return engine_run(self.name, workload, engine=engine, trace=trace, window=window, destructive=destructive,
                          force=force, progress=progress, label=label, health_interval=health_interval,
                          show_serial=show_serial)

    def idle(self, ns: int) -> None:
        time.sleep(ns / 1e9)

    def power_cycle(self) -> int:
        raise NotAvailable("a power cycle needs a simulated device (software cannot cut a drive's power)")

    def controller_reset(self) -> int:
        from ..nvme_admin import controller_reset

        return controller_reset(self.name)

    def health(self) -> dict[str, Any] | None:
        from .. import _native

        snapshot = json.loads(_native.health_snapshot(self.name))
        return snapshot["sample"] if snapshot.get("available") else None

    @property
    def clock_ns(self) -> int:
        return time.monotonic_ns()

    @property
    def filled_bytes(self) -> int:
        return 0  # what a real device holds is not tracked: files are filled when created, devices read as they are

    def note_precondition(self, kind: str, length: int) -> None:
        pass  # nothing to remember: unreadable_from never asks for a fill on a real target

    def unreadable_from(self, span: int) -> int | None:
        return None
