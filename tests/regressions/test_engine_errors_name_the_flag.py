"""A workload built in Python (past the CLI's checks) that the engine's JSON parser refuses still gets a message
naming the flag, not "workload JSON: ... at line 1 column N" (issue 14, defect 6)."""

from __future__ import annotations

import pytest

from ftlscope import Workload, run
from ftlscope.errors import UsageError


@pytest.mark.parametrize(
    ("workload", "flag"),
    [
        (Workload(sizes=[10**23], stop={"ops": 2}), "--bs"),
        (Workload(pattern={"kind": "zipf", "theta": float("nan")}, stop={"ops": 2}), "--pattern"),
        (Workload(seed=10**30, stop={"ops": 2}), "--seed"),
        (Workload(stop={"time_ns": 10**21}), "--runtime"),
    ],
)
def test_engine_json_errors_name_the_flag(workload, flag):
    with pytest.raises(UsageError) as exc:
        run("sim:consumer-tlc-dram", workload)
    assert exc.value.message.startswith(flag)
    assert "line 1 column" not in exc.value.message
