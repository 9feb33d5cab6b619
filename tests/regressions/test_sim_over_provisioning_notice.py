"""``over_provisioning = 5.0`` in a device file (500 %, most likely meant as 5 %) is refused with the key and its
range (the device file's key table allows 0 to 4); a value above 1 but within that range is taken with a notice
that it reads like a percentage."""

from __future__ import annotations

import pytest

from ftlscope import from_flags, run
from ftlscope.errors import FtlscopeError
from ftlscope.sim import SimDevice


def _device(tmp_path, value: float):
    device = tmp_path / "op.toml"
    device.write_text(f'[device]\nname = "op"\ncapacity = "16GiB"\nover_provisioning = {value}\n')
    return f"sim:{device}"


def test_over_provisioning_of_five_is_refused_naming_the_key_and_range(tmp_path):
    with pytest.raises(FtlscopeError, match=r"over_provisioning = 5(\.0)? must be between 0 and 4"):
        run(_device(tmp_path, 5.0), from_flags(ops=4))


def test_over_provisioning_above_one_is_noticed(tmp_path):
    result = run(_device(tmp_path, 2.0), from_flags(ops=4))
    assert any("over_provisioning = 2" in n and "0.02" in n for n in result.notices)


def test_presets_have_no_notice():
    assert SimDevice.open("consumer-tlc-dram").notices == []
