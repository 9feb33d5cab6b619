"""A run's summary names the drive by its serial's hash unless --show-serial (issue 14: `run --json` wrote the
raw serial, and a crashed profile left it in probes/raw/*/*.summary.json)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ftlscope import runner
from ftlscope.devices import hash_serial

SERIAL = "S4EWNX0R123456"


@pytest.fixture
def nvme(monkeypatch):
    dev = SimpleNamespace(name="nvme9n1", model="Example SSD", serial=SERIAL, firmware="1.0", rotational=False,
                          kind="nvme", scheduler="none", nvme_lba_format=None)
    monkeypatch.setattr(runner, "resolve_block_device", lambda path: dev)
    return runner.PreparedTarget("/dev/nvme9n1", "block_device", False, [])


def test_the_serial_is_hashed_by_default(nvme):
    described = runner._target_description(nvme, {}, None)
    assert described["serial"] == hash_serial(SERIAL)
    assert SERIAL not in repr(described)


def test_show_serial_keeps_it(nvme):
    assert runner._target_description(nvme, {}, None, show_serial=True)["serial"] == SERIAL
