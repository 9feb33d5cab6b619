"""What `ftlscope newt` measures its gain on (ftlscope.newt.latency): in an open-loop replay each request's
latency from its time in the trace (issue lag + device latency), the device latency (from submission) beside it;
in a closed-loop replay, which has no arrival times, from submission, and the document says which."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ftlscope.newt.latency import arrival_latencies, gains, statistics, write_cost
from ftlscope.newt.measure import Plan, measure


def _reads_at_once(n: int) -> pd.DataFrame:
    """``n`` 4 KiB reads all due at time 0: at QD 1 each waits for the ones before it."""
    return pd.DataFrame({"op": pd.Categorical(["read"] * n), "offset_bytes": np.arange(n, dtype=np.int64) * 4096,
                         "size": np.full(n, 4096, dtype=np.int64), "submit_ns": np.zeros(n, dtype=np.int64)})


def test_arrival_latency_is_issue_lag_plus_device_latency_of_the_timed_requests():
    trace = pd.DataFrame({
        "op": pd.Categorical(["read", "read", "write", "read", "flush", "read"]),
        "size": [4096, 4096, 8192, 4096, 0, 4096], "status": [4096, 4096, 8192, -5, 0, 100],
        "warmup": [False, True, False, False, False, False],
        "latency_ns": [100, 200, 300, 400, 500, 600], "issue_lag_ns": np.array([10, 20, 30, 40, 50, 60], np.uint64)})
    got = arrival_latencies(trace)
    # The warm-up read, the failed read and the short read are not timed (as the engine's summary counts them).
    assert got["read"].tolist() == [110] and got["write"].tolist() == [330] and set(got) == {"read", "write"}
    assert statistics(np.array([1, 2, 3, 4], dtype=np.int64)) == pytest.approx(
        {"mean": 2.5, "p50": 2.5, "p90": 3.7, "p95": 3.85, "p99": 3.97, "p99.9": 3.997})


def test_an_open_loop_replay_that_cannot_keep_the_timing_is_measured_from_arrival():
    # 200 reads due at once at QD 1 on a simulated drive: each waits in the replayer for the ones before it.
    outcome = measure("sim:consumer-tlc-dram", _reads_at_once(200), Plan(), timing="faithful", qd=1)
    doc = gains(outcome.before, outcome.after)
    assert doc["latency_from"] == "arrival" and "open-loop" in doc["latency_from_why"]
    trace = outcome.before.trace
    reads = trace[trace["op"] == "read"]
    waited = reads["issue_lag_ns"].to_numpy(np.int64) + reads["latency_ns"].to_numpy(np.int64)
    arrival = doc["arrival"]["before"]["read"]["lat_ns"]
    assert arrival["p99"] == pytest.approx(np.percentile(waited, 99))
    assert arrival["mean"] == pytest.approx(waited.mean())
    # The last read waits for the 199 before it: from arrival p50 is about 100 device latencies.
    device = outcome.before.summary["read"]["lat_ns"]
    assert arrival["p50"] > 50 * device["p50"], (arrival, device)
    # Nothing differs between the two passes (no optimization, a fresh drive each): no gain by either measure.
    assert all(v == 0 for v in doc["gain_pct"]["read"].values()), doc["gain_pct"]
    assert all(v == 0 for v in doc["gain_pct_device"]["read"].values()), doc["gain_pct_device"]


def test_a_closed_loop_replay_has_no_arrival_times_and_is_measured_from_submission():
    outcome = measure("sim:consumer-tlc-dram", _reads_at_once(50), Plan(), timing="afap", qd=1)
    doc = gains(outcome.before, outcome.after)
    assert doc["latency_from"] == "submission" and doc["arrival"] is None
    assert "closed-loop" in doc["latency_from_why"] and "afap" in doc["latency_from_why"]
    assert doc["gain_pct"] == doc["gain_pct_device"]


def test_the_write_cost_is_said_from_arrival_with_times_and_change():
    # A forced shim on a drive that needs none: writes from tens of microseconds to milliseconds. The line gives
    # both times and the change, by the measure the gain is on.
    lat = lambda mean, p99: {"lat_ns": {"mean": mean, "p99": p99}}  # noqa: E731
    doc = {"latency_from": "arrival", "arrival": {"before": {"write": lat(20_000, 40_000)},
                                                  "after": {"write": lat(9_000_000, 120_000_000)}}}
    line = write_cost(doc)
    assert line == ("write latency from arrival: mean 20.0 µs -> 9.00 ms (+44,900 %), "
                    "p99 40.0 µs -> 120.00 ms (+299,900 %)")
    assert write_cost({"latency_from": "submission", "before": {"read": lat(1, 1)}, "after": {"read": lat(1, 1)}}) \
        is None  # no writes
