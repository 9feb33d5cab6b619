"""The one object an experiment's ``measure`` talks to: it runs workloads on the target (keeping every run's
raw data), preconditions, idles, resets, and reads health — the same calls on a real device, a file and a
simulated device, so an experiment is written once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import stopping
from ..analysis.health_usage import run_usage, total_usage
from ..errors import FtlscopeError
from ..results import RunResult
from ..runner import check_outcome
from ..sim import SimDevice
from ..targets import Target, open_target
from ..units import format_size
from ..workload import Workload

MiB = 1 << 20
GiB = 1 << 30
# Preconditioning request sizes: large sequential writes fill fastest; TRIM in large pieces.
FILL_REQUEST = MiB
PURGE_REQUEST = 256 * MiB
SETTLE_NS = 1_000_000_000
# Health counters (SMART log) read this often during every run, and at its start and end: what an experiment
# wrote to the host and to NAND, and how hot the drive got, go into its experiment.json.
HEALTH_INTERVAL = "5s"


class Interrupted(FtlscopeError):
    """Ctrl-C (or SIGTERM, SIGHUP: see ftlscope.stopping) during an experiment: what was measured so far is
    kept. The exit code and the message name the signal."""

    def __init__(self, message: str):
        super().__init__(message.replace("interrupted", stopping.what_stopped(), 1))

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return stopping.exit_code()


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
        health_interval: str | int = HEALTH_INTERVAL,
    ):
        self.raw_dir = raw_dir
        self.health_interval = health_interval
        # "preconditioning" while precondition() or ensure_readable() run, so health use is told apart.
        self.phase = "measurement"
        self._last_health: dict[str, Any] | None = None
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
        # The device under test, simulated or real: everything that differs between the two lives there.
        self.device: Target = open_target(target, writes=writes, destructive=destructive, force=force, size=size,
                                          engine=engine, progress=progress)
        self.target = self.device.name
        self.kind = self.device.kind
        self.capacity = self.device.capacity
        self.logical_block = self.device.logical_block
        self.notes.extend(self.device.notes)
        self._started_device_ns = self.device.clock_ns

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
        result = self.device.run(workload, engine=self.engine, trace=trace, window=window,
                                 destructive=self.destructive, force=self.force, progress=self.progress,
                                 label=description, health_interval=self.health_interval,
                                 show_serial=self.show_serial)
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
                "phase": self.phase,
                "health": run_usage(result.summary.get("health")),
            }
        )
        self._last_health = result.summary.get("health")

    def health_usage(self) -> dict[str, Any]:
        """What the runs so far did to the device, by the health samples taken during them: host and media
        (NAND) bytes and write amplification of the measurement and of the preconditioning, the temperature at
        the first and last sample and the highest one, and where the counters came from (or why there are
        none)."""
        last = self._last_health or {}
        by_phase = {
            phase: total_usage([run["health"] for run in self.runs if run.get("phase") == phase])
            for phase in ("measurement", "preconditioning")
        }
        every = total_usage([run["health"] for run in self.runs])
        return {
            "source": last.get("source"),
            "available": bool(last.get("available")),
            "reason": last.get("reason"),
            **by_phase,
            "temperature_first_c": every["temperature_first_c"],
            "temperature_last_c": every["temperature_last_c"],
            "temperature_max_c": every["temperature_max_c"],
        }

    @contextmanager
    def _preconditioning(self) -> Iterator[None]:
        previous, self.phase = self.phase, "preconditioning"
        try:
            yield
        finally:
            self.phase = previous

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
        self.device.note_precondition(kind, length)
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
        with self._preconditioning():
            self.run(workload, f"precondition {pattern['kind']} fill {format_size(length)}{where}")

    def _purge(self, length: int) -> None:
        request = PURGE_REQUEST if length % PURGE_REQUEST == 0 else MiB if length % MiB == 0 else 4096
        workload = Workload(
            mix={"trim": 100}, sizes=[request], pattern={"kind": "sequential"},
            range={"start": 0, "length": length}, queue_depth=1, stop={"bytes": length},
        )
        try:
            with self._preconditioning():
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
        """Before reads: write what of the range the target says reads would not reach flash for (a fresh
        simulated device holds nothing). Files are filled when created; block devices are read as they are."""
        start = self.device.unreadable_from(span)
        if start is None:
            return
        self._fill(span, pattern={"kind": "sequential"}, request=FILL_REQUEST, queue_depth=8, start=start)
        self.device.note_precondition("sequential-fill", span)
        self.idle(SETTLE_NS)

    @property
    def filled_bytes(self) -> int:
        """Bytes from LBA 0 known to hold written data (0 where the target does not track it)."""
        return self.device.filled_bytes

    def idle(self, ns: int) -> None:
        """Leave the device idle: in virtual time on a simulated device, really on a real one."""
        if ns > 0:
            self.device.idle(ns)

    def power_cycle(self) -> int:
        """Power the device off and on (caches lost). Raises errors.NotAvailable where software cannot do it."""
        return self.device.power_cycle()

    def controller_reset(self) -> int:
        """Reset the controller (caches kept). Raises errors.NotAvailable where the target has no controller."""
        return self.device.controller_reset()

    def health(self) -> dict[str, Any] | None:
        """The SMART-like counters, or None where the target has none."""
        return self.device.health()

    # ---- accounting --------------------------------------------------------------------------------------

    @property
    def device_time_ns(self) -> int:
        """Device time used so far: virtual time on a simulated device (runs, idling and resets), wall time
        on a real one."""
        return self.device.clock_ns - self._started_device_ns

    @property
    def wall_time_ns(self) -> int:
        return int((time.monotonic() - self._started_wall) * 1e9)


def _slug(text: str) -> str:
    keep = [c if c.isalnum() or c in "-_." else "-" for c in text.lower()]
    return "-".join(part for part in "".join(keep).split("-") if part)[:80] or "run"
