"""The time-window table from the engine's rows (``windows_frame``), built column-wise: the same frame the flattened
copy of each row gave (column order, names, dtypes, sort), without that copy (issue 17: ~20 MiB at the end of
newt's 100 M-request aligned pass, 18,200 windows)."""

from __future__ import annotations

import numpy as np

from ftlscope.results import windows_frame


def _row(window: int, op: str, ops: int, p99: int) -> dict:
    return {"window": window, "start_ns": window * 100_000_000, "duration_ns": 100_000_000, "op": op, "ops": ops,
            "iops": ops * 10.0, "bw_bytes": ops * 40960.0, "bytes": ops * 4096, "errors": 0, "ops_over_1ms": 0,
            "lat_ns": {"mean": 50_000.5, "stddev": 10.0, "min": 40_000, "max": p99 + 1, "p50": 50_000, "p90": 60_000,
                       "p95": 61_000, "p99": p99, "p99.9": p99 + 1, "p99.99": p99 + 1}}


def test_the_table_has_a_row_per_window_and_op_with_flat_latency_columns():
    frame = windows_frame([_row(1, "write", 3, 90_000), _row(0, "write", 2, 80_000), _row(0, "read", 5, 70_000)])
    assert list(frame.columns) == [
        "window_index", "start_ns", "duration_ns", "op", "ops", "iops", "bw_bytes", "bytes", "errors", "ops_over_1ms",
        "lat_mean_ns", "lat_stddev_ns", "lat_min_ns", "lat_max_ns", "lat_p50_ns", "lat_p90_ns", "lat_p95_ns",
        "lat_p99_ns", "lat_p99_9_ns", "lat_p99_99_ns"]
    assert frame[["window_index", "op"]].values.tolist() == [[0, "read"], [0, "write"], [1, "write"]]
    assert frame["lat_p99_ns"].tolist() == [70_000, 80_000, 90_000]
    assert frame["lat_p99_ns"].dtype == np.int64 and frame["lat_mean_ns"].dtype == np.float64
    assert frame["ops"].tolist() == [5, 2, 3]


def test_no_rows_is_an_empty_table():
    assert windows_frame([]).empty
