"""Small simulated devices for the tests: one base SSD (64 MiB, 4 channels x 2 chips, MLC, a 512 KiB write
buffer), changed per test by section overrides, so no test module carries its own copy of a device file."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

from ftlscope.sim import SimDevice

BASE: dict[str, dict[str, Any]] = {
    "device": {"name": "small", "kind": "ssd", "capacity": "64MiB", "over_provisioning": 0.15},
    "geometry": {"channels": 4, "chips_per_channel": 2, "page_size": "4KiB", "pages_per_block": 64},
    "mapping": {"chunk_size": "8KiB", "stripe_width": 8},
    "nand": {
        "cell": "mlc",
        "page_pattern": "1L 1H",
        "read_latency": {"L": "50us", "M": "70us", "H": "90us"},
        "program_latency": {"L": "300us", "M": "900us", "H": "1500us"},
        "erase_latency": "3ms",
        "channel_rate": "400MB/s",
    },
    "write_buffer": {"capacity": "512KiB", "parallelism": 2, "idle_flush_window": "10ms"},
}


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def device_toml(**sections: dict[str, Any]) -> str:
    """The base device with each ``section={key: value}`` merged over it (new sections are added)."""
    config = copy.deepcopy(BASE)
    for section, keys in sections.items():
        config.setdefault(section, {}).update(keys)
    return "\n".join(
        f"[{section}]\n" + "".join(f"{k} = {_value(v)}\n" for k, v in keys.items()) for section, keys in config.items()
    )


def small_ssd(tmp_path: Path, name: str = "small", **sections: dict[str, Any]) -> SimDevice:
    """Write the device file under ``tmp_path`` and open it."""
    sections.setdefault("device", {})
    sections["device"] = {"name": name, **sections["device"]}
    path = Path(tmp_path) / f"{name}.toml"
    path.write_text(device_toml(**sections))
    return SimDevice.open(str(path))


def config(device: str | SimDevice) -> dict[str, Any]:
    """A device's whole configuration (its ground truth) as a dict."""
    device = device if isinstance(device, SimDevice) else SimDevice.open(device)
    return tomllib.loads(device.config_toml)
