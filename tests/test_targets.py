"""The target layer: a simulated and a real implementation of one interface, so the session layer
(``experiments/context.py``) holds a target and never asks which kind it is."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys

import pytest

from ftlscope.errors import NotAvailable
from ftlscope.experiments import context
from ftlscope.experiments.context import Context
from ftlscope.sim import SimDevice
from ftlscope.targets import RealTarget, SimulatedTarget, Target, open_target
from ftlscope.workload import Workload

MiB = 1 << 20


def test_both_kinds_implement_the_whole_interface():
    abstract = Target.__abstractmethods__
    assert {"run", "idle", "power_cycle", "controller_reset", "health", "clock_ns"} <= abstract
    for kind in (SimulatedTarget, RealTarget):
        assert not kind.__abstractmethods__, f"{kind.__name__} leaves {kind.__abstractmethods__} open"


def test_context_never_branches_on_the_kind_of_target():
    tree = ast.parse(inspect.getsource(context))
    offending = [
        ast.unparse(node) for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
        and "device" in ast.unparse(node)
    ]
    assert offending == []
    assert "SimDevice)" not in inspect.getsource(context.Context), "no isinstance test on the device"


def test_nvme_admin_no_longer_imports_the_session_layer():
    code = "import ftlscope.nvme_admin, sys; print('ftlscope.experiments.context' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_simulated_target_keeps_its_fill_on_the_device(tmp_path):
    device = SimDevice.open("sim:consumer-tlc-dram")
    target = open_target(device, writes=True)
    assert isinstance(target, SimulatedTarget) and target.kind == "simulated"
    assert target.unreadable_from(8 * MiB) == 0
    ctx = Context(device, raw_dir=tmp_path, writes=True)
    ctx.ensure_readable(8 * MiB)
    assert device.filled_bytes == 8 * MiB and ctx.filled_bytes == 8 * MiB
    assert target.unreadable_from(8 * MiB) is None and target.unreadable_from(16 * MiB) == 8 * MiB
    before = ctx.device_time_ns
    ctx.idle(5_000_000)
    assert ctx.device_time_ns - before == 5_000_000  # virtual time, exactly
    ctx.precondition("purge", 8 * MiB)
    assert device.filled_bytes == 0


def test_a_file_is_a_real_target(tmp_path):
    path = tmp_path / "target.bin"
    target = open_target(str(path), writes=True, size=4 * MiB)
    assert isinstance(target, RealTarget) and target.kind == "regular_file" and target.capacity == 4 * MiB
    with pytest.raises(NotAvailable, match="power cycle needs a simulated device"):
        target.power_cycle()
    with pytest.raises(NotAvailable, match="regular file"):
        target.controller_reset()
    assert target.health() is None and target.unreadable_from(4 * MiB) is None and target.filled_bytes == 0
    ctx = Context(str(path), raw_dir=tmp_path / "raw", writes=True)
    result = ctx.run(Workload(mix={"read": 100}, sizes=[4096], queue_depth=1, stop={"ops": 16}), "read")
    assert result.summary["read"]["ops"] == 16 and len(ctx.runs) == 1
