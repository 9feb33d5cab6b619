"""A simulated device as a target: runs and idling in virtual time; power cycles and resets always work."""

from __future__ import annotations

from typing import Any

from ..results import RunResult
from ..runner import run as engine_run
from ..sim import SimDevice
from ..workload import Workload
from .base import Target


class SimulatedTarget(Target):
    def __init__(self, device: SimDevice):
        super().__init__()
        self.device = device
        info = device.info
        self.name = device.name
        self.kind = "simulated"
        self.capacity = int(info["size_bytes"])
        self.logical_block = int(info["logical_block_size"])
        self.hard_disk = device.hard_disk

    def run(self, workload: Workload, *, engine: str, trace: bool, window: str, destructive: str | None,
            force: bool, progress: bool, label: str, health_interval: str | int,
            show_serial: bool = False) -> RunResult:
        return engine_run(self.device, workload, engine=engine, trace=trace, window=window, destructive=destructive,
                          force=force, progress=progress, label=label, health_interval=health_interval,
                          show_serial=show_serial)

    def idle(self, ns: int) -> None:
        self.device.idle(f"{int(ns)}ns")  # a bare number would be read as seconds

    def power_cycle(self) -> int:
        return self.device.power_cycle()

    def controller_reset(self) -> int:
        return self.device.controller_reset()

    def health(self) -> dict[str, Any] | None:
        return self.device.health()

    @property
    def clock_ns(self) -> int:
        return self.device.now_ns

    @property
    def filled_bytes(self) -> int:
        return int(self.device.filled_bytes)

    def note_precondition(self, kind: str, length: int) -> None:
        # Kept on the SimDevice, not here: the next experiment's session on the same device reads it.
        self.device.filled_bytes = 0 if kind == "purge" else max(self.device.filled_bytes, length)

    def unreadable_from(self, span: int) -> int | None:
        # A fresh range holds nothing, and reads of never-written pages would not touch flash. Only what is
        # missing is written: a whole-drive fill after another experiment's would cost hours of device time on
        # a drive in a random-written state (every overwrite pays garbage collection).
        if self.device.filled_bytes >= span:
            return None
        return self.device.filled_bytes // 4096 * 4096
