"""Simulated devices: SSDs and HDDs whose insides are known (shared/device-model.md).

A :class:`SimDevice` keeps its state between runs (data, buffers, caches, wear and its virtual clock), so an
experiment can precondition it, let it idle, and measure, as on a real drive — in virtual time, so a
whole-drive experiment takes seconds of wall time.

>>> dev = SimDevice.open("consumer-tlc-dram")
>>> ftlscope.run(dev, ftlscope.from_flags(rw="randread", runtime="1s"))
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

from . import _native
from .errors import ConfigError
from .units import parse_duration_ns

DEFAULT_PRESET = "consumer-tlc-dram"
# Enterprise drives reserve up to about half their logical capacity (the presets: 0.074 to 0.374); above 1,
# more NAND is hidden than shown: most likely a percentage written as a fraction.
MAX_REAL_OVER_PROVISIONING = 1.0


class SimDevice:
    """A simulated device. Open one with :meth:`open` (a preset name or a device TOML file)."""

    def __init__(self, native: Any, spec: str):
        self._native = native
        self.spec = spec
        # Bytes from LBA 0 that an experiment's preconditioning has written (so later read experiments on
        # the same device need not fill it again); purging sets it back to 0.
        self.filled_bytes = 0

    @classmethod
    def open(cls, spec: str = DEFAULT_PRESET) -> SimDevice:
        spec = spec.removeprefix("sim:")
        try:
            return cls(_native.SimDevice(spec), spec)
        except _native.ConfigInvalid as exc:
            raise ConfigError(f"sim:{spec}: {exc}") from None

    @property
    def notices(self) -> list[str]:
        """Values of the device file that a real drive would not have, said so a run shows them (the model
        accepts them: a simulated drive may be anything)."""
        device = tomllib.loads(self.config_toml).get("device", {})
        op = device.get("over_provisioning")
        if isinstance(op, int | float) and op > MAX_REAL_OVER_PROVISIONING:
            return [f"sim:{self.spec}: over_provisioning = {op:g} gives the drive {1 + op:g}x its capacity in "
                    f"NAND; real drives have 0.07 (consumer) to about 0.5 (enterprise), a fraction rather than a "
                    f"percentage (did you mean {op / 100:g}?)"]
        return []

    @property
    def info(self) -> dict[str, Any]:
        return json.loads(self._native.info())

    @property
    def name(self) -> str:
        return self.info["path"]

    @property
    def now_ns(self) -> int:
        """Virtual time since the device was created."""
        return self._native.now_ns

    @property
    def config_toml(self) -> str:
        """The ground truth: every key of the device's configuration."""
        return self._native.config_toml()

    @property
    def hard_disk(self) -> bool:
        """A simulated hard disk (``[device] kind = "hdd"``): its reads cost the same on written and never-written
        blocks, and the kernel is told it is rotational."""
        return tomllib.loads(self.config_toml).get("device", {}).get("kind") == "hdd"

    def idle(self, duration: str | int | float) -> None:
        """Let the device sit idle (``"500ms"``, or seconds): buffers drain, the SLC cache folds."""
        self._native.idle(parse_duration_ns(duration, "idle"))

    def power_cycle(self) -> int:
        """Flush, lose power, come back: caches are empty afterwards. Returns the virtual ns it took."""
        return self._native.power_cycle()

    def controller_reset(self) -> int:
        """Reset the controller; caches survive. Returns the virtual ns it took."""
        return self._native.controller_reset()

    def health(self) -> dict[str, Any]:
        """The counters a SMART log would hold (host and NAND bytes, so write amplification)."""
        return json.loads(self._native.health())

    def mapping_bytes(self) -> tuple[int, int]:
        """(bytes of mapping state allocated so far, logical pages of the device)."""
        return tuple(self._native.mapping_bytes())

    def content(self, lpn: int) -> str:
        """What logical page ``lpn`` holds: ``"unwritten"``, ``"zeroes"`` or the data fingerprint."""
        return self._native.content(lpn)

    def verify(self, offset: int, size: int, tag: int, write_record: bytes | None = None) -> str:
        """The read-back pass of a verify run that wrote to this device (``ftlscope.verify.verify_sim``):
        the engine's report as JSON."""
        return self._native.verify(offset, size, tag, write_record)

    def __repr__(self) -> str:
        return f"SimDevice({self.spec!r}, now={self.now_ns / 1e9:.3f}s)"


def presets() -> list[dict[str, str]]:
    """The built-in devices: ``[{"name", "summary"}]``."""
    return json.loads(_native.sim_presets())


def show(spec: str) -> str:
    """A preset (or a device file) as TOML, with every key."""
    try:
        return _native.sim_show(spec.removeprefix("sim:"))
    except _native.ConfigInvalid as exc:
        raise ConfigError(f"sim:{spec.removeprefix('sim:')}: {exc}") from None
