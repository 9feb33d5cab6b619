"""The one object an experiment's ``measure`` talks to: it runs workloads on the target (keeping every run's
raw data), preconditions, idles, resets, and reads health — the same calls on a real device, a file and a
simulated device, so an experiment is written once.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from .. import safety, stopping
from ..errors import FtlscopeError, TargetError, UsageError
from ..results import RunResult
from ..runner import check_outcome, prepare_target
from ..runner import run as engine_run
from ..sim import SimDevice
from ..units import format_size
from ..workload import Workload

MiB = 1 << 20
GiB = 1 << 30
# Preconditioning request sizes: large sequential writes fill fastest; TRIM in large pieces.
FILL_REQUEST = MiB
PURGE_REQUEST = 256 * MiB
SETTLE_NS = 1_000_000_000


class Interrupted(FtlscopeError):
    """Ctrl-C (or SIGTERM, SIGHUP: see ftlscope.stopping) during an experiment: what was measured so far is
    kept. The exit code and the message name the signal."""

    def __init__(self, message: str):
        super().__init__(message.replace("interrupted", stopping.what_stopped(), 1))

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return stopping.exit_code()


class NotAvailable(Exception):
    """An operation (power cycle, controller reset, health log) the target cannot do; the text says why."""


class Context:
    """Where an experiment runs. Create one per experiment invocation; it opens a simulated device once, so
    its state (data, caches, wear, virtual clock) carries from one run to the next like a real drive's."""

    def __init__(
        self,
        target: str | SimDevice,
        *,
        raw_dir: Path,
        writes: bool,
        destructive: str | None = None,
        force: bool = False,
        size: int | None = None,
        engine: str = "auto",
        progress: bool = False,
        label: str = "",
        show_serial: bool = False,
    ):
        self.raw_dir = raw_dir
        self.engine = engine
        self.progress = progress
        self.label = label
        self.show_serial = show_serial  # else every summary written holds the drive's serial hashed
        self.destructive = destructive
        self.force = force
        self.repetition = 0
        self.runs: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.first_summary: dict[str, Any] | None = None
        # The range the probe runner preconditioned (refilled or erased); None outside probing.
        self.probe_span: int | None = None
        self._started_wall = time.monotonic()
        self.device: SimDevice | None = None
        if isinstance(target, SimDevice) or str(target).startswith("sim:"):
            self.device = target if isinstance(target, SimDevice) else SimDevice.open(str(target))
            self.target = self.device.name
            self.kind = "simulated"
            info = self.device.info
            self.capacity = int(info["size_bytes"])
            self.logical_block = int(info["logical_block_size"])
            self._started_device_ns = self.device.now_ns
            return
        self.target = str(target)
        self.kind, self.capacity, self.logical_block = self._open_real(writes, size)

    def _open_real(self, writes: bool, size: int | None) -> tuple[str, int, int]:
        from .. import _native

        try:
            st = os.stat(self.target)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise TargetError(f"cannot look at {self.target}: {exc.strerror}") from None
        if st is None or stat.S_ISREG(st.st_mode):
            # A file: an experiment that writes needs the same permission as any write (checked first, before
            # anything is touched); then the file is created/extended to --size and filled, so reads hit data.
            if writes and st is not None:
                safety.check_write_allowed(self.target, writes=True, destructive=self.destructive, force=self.force)
            prepared = prepare_target(
                self.target, Workload(mix={"read": 100}), size=size, destructive=self.destructive,
                force=self.force, engine=self.engine, progress=self.progress,
            )
            self.notes.extend(prepared.notices)
        elif stat.S_ISBLK(st.st_mode):
            if size is not None:
                raise UsageError("--size: a block device has its own size; use --param span=... to use part of it")
            safety.check_write_allowed(self.target, writes=writes, destructive=self.destructive, force=self.force)
            if not writes:
                self.notes.append("read-only: the device's data was read in place")
        else:
            raise TargetError(f"{self.target} is neither a block device nor a regular file")
        try:
            info = json.loads(_native.target_info(self.target, False, True))
        except Exception as exc:  # the native layer words the reason (permission, missing device)
            raise TargetError(f"cannot open {self.target}: {exc}") from None
        return info["kind"], int(info["size_bytes"]), int(info["logical_block_size"])

    # ---- sizes -------------------------------------------------------------------------------------------

    def span(self, requested: int, align: int = MiB) -> int:
        """``requested`` bytes (0 = the whole target), capped to the target and rounded down to ``align``."""
        length = self.capacity if requested <= 0 else min(requested, self.capacity)
        return max(length // align * align, align if self.capacity >= align else self.capacity)

    # ---- running -----------------------------------------------------------------------------------------

    def run(self, workload: Workload, label: str, *, trace: bool = False, window: str | int = "100ms") -> RunResult:
        """Run one workload; its summary, time windows (and trace, if asked) go to the raw directory."""
        description = f"{self.label} {label}".strip()
        if isinstance(window, int):
            window = f"{window}ns"  # durations here are ns; ftlscope.run reads a bare number as seconds
        result = engine_run(
            self.device if self.device is not None else self.target,
            workload,
            engine=self.engine,
            trace=trace,
            window=window,
            destructive=self.destructive,
            force=self.force,
            progress=self.progress,
            label=description,
            health_interval=0 if self.device is None else "5s",
            show_serial=self.show_serial,
        )
        if self.first_summary is None:
            self.first_summary = result.summary
        self._save(result, label)
        if result.stop_reason == "interrupted":
            raise Interrupted("interrupted; the results measured so far are kept")
        check_outcome(result)
        return result

    def _save(self, result: RunResult, label: str) -> None:
        directory = self.raw_dir / f"rep{self.repetition}"
        directory.mkdir(parents=True, exist_ok=True)
        stem = f"{len(self.runs):03d}-{_slug(label)}"
        result.save_json(directory / f"{stem}.summary.json")
        if not result.windows.empty:
            result.windows.to_parquet(directory / f"{stem}.windows.parquet", compression="zstd", index=False)
        if not result.trace.empty:
            result.save_trace(directory / f"{stem}.trace.parquet")
        run = result.summary["run"]
        self.runs.append(
            {
                "repetition": self.repetition,
                "label": label,
                "summary": f"rep{self.repetition}/{stem}.summary.json",
                "device_ns": run.get("virtual_ns") or run["measured_ns"],
                "wall_ns": run.get("wall_ns", run["measured_ns"]),
                "stop": run["stop"]["reason"],
            }
        )

    # ---- device state ------------------------------------------------------------------------------------

    def precondition(self, kind: str, span: int | None = None) -> None:
        """Bring the first ``span`` bytes (default: all) to a known state: ``purge`` (TRIM), ``sequential-fill``
        or ``random-fill`` (every 4 KiB block written once in a random order)."""
        length = self.span(span or 0)
        if kind == "none":
            return
        if kind == "purge":
            self._purge(length)
        elif kind == "sequential-fill":
            self._fill(length, pattern={"kind": "sequential"}, request=FILL_REQUEST, queue_depth=8)
        elif kind == "random-fill":
            self._fill(length, pattern={"kind": "permutation"}, request=4096, queue_depth=32)
        else:
            raise ValueError(f"unknown preconditioning {kind}")
        if self.device is not None:
            self.device.filled_bytes = 0 if kind == "purge" else max(self.device.filled_bytes, length)
        # Let the device settle (write buffer drained, background work done), so the experiment measures
        # the state preconditioning made, not its tail: reads would otherwise hit the write buffer.
        self.idle(SETTLE_NS)

    def _fill(self, length: int, *, pattern: dict[str, Any], request: int, queue_depth: int, start: int = 0) -> None:
        length -= start
        request = request if length % request == 0 and start % request == 0 else 4096
        workload = Workload(
            mix={"write": 100}, sizes=[request], pattern=pattern, range={"start": start, "length": length},
            queue_depth=queue_depth, stop={"bytes": length}, data="random",
        )
        where = f" from {format_size(start)}" if start else ""
        self.run(workload, f"precondition {pattern['kind']} fill {format_size(length)}{where}")

    def _purge(self, length: int) -> None:
        request = PURGE_REQUEST if length % PURGE_REQUEST == 0 else MiB if length % MiB == 0 else 4096
        workload = Workload(
            mix={"trim": 100}, sizes=[request], pattern={"kind": "sequential"},
            range={"start": 0, "length": length}, queue_depth=1, stop={"bytes": length},
        )
        try:
            self.run(workload, f"precondition purge {format_size(length)}")
        except FtlscopeError as exc:
            if isinstance(exc, Interrupted):
                raise
            # A target without discard: say so; the experiment still runs on the data as it is.
            self.notes.append(f"purge (TRIM) failed, so the range was not erased first: {exc.message}")

    def flush(self) -> None:
        """Make the device write back what it holds in volatile caches (one flush command: fdatasync on real
        targets) and wait for it, so the next measurement does not share the device with that write-back —
        on a hard disk with scattered writes cached, minutes of seeking."""
        workload = Workload(mix={"flush": 100}, sizes=[4096], queue_depth=1, stop={"ops": 1})
        self.run(workload, "flush the write cache")

    def ensure_readable(self, span: int) -> None:
        """Before reads: on a simulated device, write the range once (a fresh one holds nothing, and reads
        of never-written pages would not touch flash). Files are filled when created; block devices are read
        as they are."""
        if self.device is None or self.device.filled_bytes >= span:
            return
        # Write only what is missing: a whole-drive fill after another experiment's would cost hours of
        # device time on a drive in a random-written state (every overwrite pays garbage collection).
        start = self.device.filled_bytes // 4096 * 4096
        self._fill(span, pattern={"kind": "sequential"}, request=FILL_REQUEST, queue_depth=8, start=start)
        self.device.filled_bytes = span
        self.idle(SETTLE_NS)

    def idle(self, ns: int) -> None:
        """Leave the device idle: in virtual time on a simulated device, really on a real one."""
        if ns <= 0:
            return
        if self.device is not None:
            self.device.idle(f"{int(ns)}ns")  # a bare number would be read as seconds
        else:
            time.sleep(ns / 1e9)

    def power_cycle(self) -> int:
        """Power the device off and on (caches lost). Raises NotAvailable where software cannot do it."""
        if self.device is None:
            raise NotAvailable("a power cycle needs a simulated device (software cannot cut a drive's power)")
        return self.device.power_cycle()

    def controller_reset(self) -> int:
        """Reset the controller (caches kept). Raises NotAvailable where the target has no controller."""
        if self.device is not None:
            return self.device.controller_reset()
        from ..nvme_admin import controller_reset

        return controller_reset(self.target)

    def health(self) -> dict[str, Any] | None:
        """The SMART-like counters, or None where the target has none."""
        if self.device is not None:
            return self.device.health()
        from .. import _native

        snapshot = json.loads(_native.health_snapshot(self.target))
        return snapshot["sample"] if snapshot.get("available") else None

    # ---- accounting --------------------------------------------------------------------------------------

    @property
    def device_time_ns(self) -> int:
        """Device time used so far: virtual time on a simulated device (runs, idling and resets), wall time
        on a real one."""
        if self.device is not None:
            return self.device.now_ns - self._started_device_ns
        return int((time.monotonic() - self._started_wall) * 1e9)

    @property
    def wall_time_ns(self) -> int:
        return int((time.monotonic() - self._started_wall) * 1e9)


def _slug(text: str) -> str:
    keep = [c if c.isalnum() or c in "-_." else "-" for c in text.lower()]
    return "-".join(part for part in "".join(keep).split("-") if part)[:80] or "run"
