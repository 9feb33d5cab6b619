"""The interface every target implements: what a session needs from the device it measures."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from ..results import RunResult
from ..workload import Workload


class Target(ABC):
    """A device under test. ``name``, ``kind`` (``simulated``, ``block_device``, ``regular_file``), ``capacity`` and
    ``logical_block`` (bytes) describe it; ``notes`` collects what opening it did (a file created, read-only)."""

    name: str
    kind: str
    capacity: int
    logical_block: int
    # A simulated hard disk: its reads cost the same on written and never-written blocks (the head moves either
    # way), unlike a flash drive's. False where not known (a real device).
    hard_disk: bool = False

    def __init__(self) -> None:
        self.notes: list[str] = []

    @abstractmethod
    def run(self, workload: Workload, *, engine: str, trace: bool, window: str, destructive: str | None,
            force: bool, progress: bool, label: str, health_interval: str | int,
            show_serial: bool = False) -> RunResult:
        """Run one workload and return its result, the health counters sampled every ``health_interval`` (0:
        not at all) and at its start and end; the drive's serial hashed unless ``show_serial``."""

    @abstractmethod
    def idle(self, ns: int) -> None:
        """Leave the device idle for ``ns`` nanoseconds of device time."""

    @abstractmethod
    def power_cycle(self) -> int:
        """Power the device off and on (caches lost); the ns it took. Raises errors.NotAvailable where
        software cannot do it."""

    @abstractmethod
    def controller_reset(self) -> int:
        """Reset the controller (caches kept); the ns it took. Raises errors.NotAvailable where it cannot."""

    @abstractmethod
    def health(self) -> dict[str, Any] | None:
        """The SMART-like counters, or None where the target has none."""

    @property
    @abstractmethod
    def clock_ns(self) -> int:
        """Device time: a monotonic clock in ns that advances with runs, idling and resets."""

    @property
    @abstractmethod
    def filled_bytes(self) -> int:
        """Bytes from LBA 0 known to hold written data (0 where nothing is known)."""

    @abstractmethod
    def note_precondition(self, kind: str, length: int) -> None:
        """Record that the first ``length`` bytes were preconditioned with ``kind`` (``purge`` or a fill)."""

    @abstractmethod
    def unreadable_from(self, span: int) -> int | None:
        """Where the first ``span`` bytes stop holding data a read would reach flash for (so they must be
        written before reads measure anything), or None when the span reads as it is."""
