"""Set-up shared by regression tests that measure a preset against a copy of itself with one key changed."""

from __future__ import annotations

import re

import pytest

import ftlscope
from ftlscope.fidelity.measure import fill
from ftlscope.sim import SimDevice


@pytest.fixture
def preset_with(tmp_path):
    """``preset_with(preset, key, value)``: the path of a copy of the preset's TOML whose ``key = ...`` line says
    ``value`` instead (asserting the line exists, so a renamed key fails here rather than testing nothing)."""
    def make(preset: str, key: str, value: str) -> str:
        text = SimDevice.open(preset).config_toml
        changed, count = re.subn(rf"^{re.escape(key)} = .*$", f"{key} = {value}", text, flags=re.M)
        assert count == 1, f"{preset} has no single '{key} = ' line"
        path = tmp_path / f"{preset}-{key}-{value}.toml"
        path.write_text(changed)
        return str(path)
    return make


@pytest.fixture
def random_reads_after_fill():
    """``random_reads_after_fill(device, qd)``: the read summary of 500 ms of 4 KiB random reads at ``qd`` over
    1 GiB written sequentially first (1 s of warm-up), as the fidelity bench measures a QD sweep point."""
    def measure(device: SimDevice, qd: int) -> dict:
        fill(device, 1 << 30, pattern="sequential")
        flags = ftlscope.from_flags(rw="randread", bs="4k", qd=qd, size="1GiB", runtime="500ms", warmup="1s")
        return ftlscope.run(device, flags, health_interval="1000s").summary["read"]
    return measure
