"""Who the profiled device is: model, serial (hashed unless asked), firmware, capacity, LBA format, I/O
scheduler — for the report's first line and the store's device identity, so runs of one drive find each other."""

from __future__ import annotations

import os
import stat
import tomllib
from typing import Any

from ..devices import hash_serial, resolve_block_device
from ..sim import SimDevice

__all__ = ["describe_target", "hash_serial"]


def describe_target(target: str | SimDevice, *, show_serial: bool = False) -> dict[str, Any]:
    """The identity of ``target`` (a path or an open simulated device)."""
    if isinstance(target, SimDevice):
        return _simulated(target)
    try:
        st = os.stat(target)
    except OSError:
        st = None
    if st is not None and stat.S_ISBLK(st.st_mode):
        return _block_device(target, show_serial)
    return {
        "name": target, "kind": "file", "model": None, "serial_hash": None, "serial": None, "firmware": None,
        "size_bytes": st.st_size if st is not None else None, "logical_block_size": None,
        "physical_block_size": None, "scheduler": None, "rotational": None, "identity": f"file {target}",
        "description": "a regular file (its file system and the device beneath it are measured together)",
    }


def _simulated(device: SimDevice) -> dict[str, Any]:
    info = device.info
    config = tomllib.loads(device.config_toml)["device"]
    preset = config.get("name") or device.spec
    return {
        "name": device.name, "kind": "simulated", "model": f"simulated {preset}", "serial_hash": None,
        "serial": None, "firmware": None, "size_bytes": int(info["size_bytes"]),
        "logical_block_size": int(info["logical_block_size"]),
        "physical_block_size": int(info.get("physical_block_size") or info["logical_block_size"]),
        "scheduler": None, "rotational": device.hard_disk, "identity": f"sim:{preset}",
        "description": config.get("description"),
    }


def _block_device(path: str, show_serial: bool) -> dict[str, Any]:
    dev = resolve_block_device(path)
    if dev is None:
        return {"name": path, "kind": "block device", "identity": path}
    serial_hash = hash_serial(dev.serial) if dev.serial else None
    identity = " ".join(part for part in (dev.model, serial_hash) if part) or path
    return {
        "name": path, "kind": "block device", "model": dev.model, "serial_hash": serial_hash,
        "serial": dev.serial if show_serial else None, "firmware": dev.firmware, "size_bytes": dev.size_bytes,
        "logical_block_size": dev.logical_block_size, "physical_block_size": dev.physical_block_size,
        "lba_format": dev.nvme_lba_format, "scheduler": dev.scheduler, "rotational": dev.rotational,
        "transport": dev.kind, "identity": identity, "description": None,
    }
