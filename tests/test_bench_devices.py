"""The device files of bench/devices (fits that are not presets, measured with bench/fidelity.py --device, and the
held-out drives of bench/devices/heldout the write probes are validated on) load and describe themselves: a key
renamed or a range tightened in the simulator must not leave them unreadable."""

from pathlib import Path

import pytest

from ftlscope.sim import SimDevice

DEVICES = sorted((Path(__file__).parent.parent / "bench" / "devices").rglob("*.toml"))


def test_there_are_device_files():
    assert DEVICES


@pytest.mark.parametrize("path", DEVICES, ids=lambda p: p.name)
def test_a_bench_device_file_loads(path):
    device = SimDevice.open(str(path))
    assert device.name == f"sim:{path.stem}"
    assert device.info["size_bytes"] > 0
