"""``over_provisioning = 5.0`` in a device file (500 %, most likely meant as 5 %) is said, not silently taken."""

from __future__ import annotations

from ftlscope import from_flags, run
from ftlscope.sim import SimDevice


def test_over_provisioning_above_one_is_noticed(tmp_path):
    device = tmp_path / "op.toml"
    device.write_text('[device]\nname = "op5"\ncapacity = "16GiB"\nover_provisioning = 5.0\n')
    result = run(f"sim:{device}", from_flags(ops=4))
    assert any("over_provisioning = 5" in n and "0.05" in n for n in result.notices)


def test_presets_have_no_notice():
    assert SimDevice.open("consumer-tlc-dram").notices == []
