"""Helpers the experiments share: turning a run's summary into a table row, workload shorthands, and the
parameter checks several experiments make."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..errors import UsageError
from ..metrics import LATENCY_COLUMNS, WINDOW_INDEX, latency_column
from ..results import RunResult
from ..workload import Workload


def finding_value(findings: dict[str, Any], key: str) -> Any:
    """A finding's value for a figure (None when the analysis left it out)."""
    found = findings.get(key)
    return found.get("value") if isinstance(found, dict) else found


def check_size(p: dict[str, Any]) -> None:
    if p["size"] <= 0:
        raise UsageError(f"--param size: give a request size above 0 (got {p['size']})")


def check_qd(p: dict[str, Any]) -> None:
    if p["qd"] < 1:
        raise UsageError(f"--param qd: give a queue depth of at least 1 (got {p['qd']})")


def check_window(p: dict[str, Any]) -> None:
    if p["window"] < 10**6:
        raise UsageError(f"--param window: give at least 1ms (got {p['window']} ns)")




def op_metrics(result: RunResult, op: str, prefix: str = "") -> dict[str, Any]:
    """One operation's figures as flat columns: ``iops``, ``mb_s`` (10^6 B/s), ``ops``, ``slow_share`` (the
    fraction over 1 ms) and ``lat_*_us``. ``prefix`` names them per direction (``read_iops`` ...)."""
    s = result.summary.get(op)
    if not s:
        return {}
    lat = s["lat_ns"]
    row = {
        f"{prefix}ops": s["ops"],
        f"{prefix}iops": s["iops"],
        f"{prefix}mb_s": s["bw_bytes"] / 1e6,
        f"{prefix}slow_share": (s.get("ops_over_1ms", 0) / s["ops"]) if s["ops"] else 0.0,
    }
    for key, column in LATENCY_COLUMNS:
        row[f"{prefix}{column}"] = lat[key] / 1e3
    return row


def window_rows(result: RunResult, op: str) -> pd.DataFrame:
    """The run's time windows for one operation: ``window_index``, ``t_s`` (window start, device time),
    ``iops``, ``mb_s``, ``slow_share`` and ``lat_*_us``."""
    w = result.windows
    if w.empty:
        return pd.DataFrame()
    w = w[w["op"] == op]
    out = pd.DataFrame(
        {
            WINDOW_INDEX: w[WINDOW_INDEX].to_numpy(),
            "t_s": w["start_ns"].to_numpy() / 1e9,
            "duration_s": w["duration_ns"].to_numpy() / 1e9,
            "ops": w["ops"].to_numpy(),
            "bytes": w["bytes"].to_numpy(),
            "iops": w["iops"].to_numpy(),
            "mb_s": w["bw_bytes"].to_numpy() / 1e6,
            "slow_share": (w["ops_over_1ms"] / w["ops"].where(w["ops"] > 0)).fillna(0.0).to_numpy(),
        }
    )
    for key, column in LATENCY_COLUMNS:
        out[column] = w[latency_column(key, "ns")].to_numpy() / 1e3
    return out


def device_seconds(result: RunResult) -> float:
    """How long the run took on the device's clock (virtual time on a simulated device)."""
    run = result.summary["run"]
    return (run.get("virtual_ns") or run["measured_ns"]) / 1e9


def workload(
    op: str,
    *,
    size: int,
    pattern: str | dict[str, Any],
    qd: int = 1,
    span: int,
    start: int = 0,
    runtime_ns: int | None = None,
    ops: int | None = None,
    total_bytes: int | None = None,
    warmup_ns: int = 0,
    queues: int = 1,
    seed: int = 1,
    data: str = "random",
    **extra: Any,
) -> Workload:
    """A one-operation workload over ``[start, start + span)``. ``op`` is an engine operation name or a mix
    dict; ``pattern`` a kind name or a full pattern dict."""
    mix = {op: 100} if isinstance(op, str) else dict(op)
    stop: dict[str, int] = {}
    if runtime_ns:
        stop["time_ns"] = int(runtime_ns)
    if ops:
        stop["ops"] = int(ops)
    if total_bytes:
        stop["bytes"] = int(total_bytes)
    return Workload(
        mix=mix,
        sizes=[int(size)],
        pattern=pattern if isinstance(pattern, dict) else {"kind": pattern},
        range={"start": int(start), "length": int(span)},
        queue_depth=int(qd),
        queues=int(queues),
        stop=stop,
        warmup={"time_ns": int(warmup_ns)} if warmup_ns else {},
        seed=seed,
        data=data,
        **extra,
    )
