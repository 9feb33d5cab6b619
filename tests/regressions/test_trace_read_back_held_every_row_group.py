"""newt at 100 M requests peaked at 856 MiB (issue 17): its page and its gain from arrival read the passes' traces
back with ``trace_figures.column_batches``, which opened the Parquet file with pyarrow's default ``pre_buffer``.
That reads the wanted columns of every row group up front and keeps them until the file is closed: ~6.7 B a
request (30 M requests: 381 MiB while the page was drawn, 181 MiB at 1 M). The read-back now takes each row
group's columns as its batches come, so what it holds does not grow with the trace's length.

Measured on pyarrow's own count of the bytes it holds (``pyarrow.total_allocated_bytes``): exact and the same on
every run for the same file, unlike a process's RSS."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ftlscope.trace_figures import FIGURE_BATCH_ROWS, column_batches
from ftlscope.workload import OPS

ROW_GROUP = FIGURE_BATCH_ROWS // 16


def _trace(path, row_groups: int):
    """A per-request trace of ``row_groups`` row groups (as a run writes it: one per engine chunk), random
    latencies so the columns do not compress away."""
    n = row_groups * ROW_GROUP
    rng = np.random.default_rng(7)
    table = pa.table({
        "op": pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, 2, n).astype(np.int8)), pa.array(list(OPS))),
        "submit_ns": pa.array(np.cumsum(rng.integers(1, 5_000, n)).astype(np.uint64)),
        "latency_ns": pa.array(rng.integers(5_000, 5_000_000, n).astype(np.int64)),
        "issue_lag_ns": pa.array(rng.integers(0, 100_000, n).astype(np.int64)),
    })
    pq.write_table(table, path, row_group_size=ROW_GROUP, compression="zstd")
    return path


def _most_held(path) -> tuple[int, int]:
    """(the most bytes pyarrow held while the trace was read back, the rows read)."""
    base = pa.total_allocated_bytes()
    most, rows = 0, 0
    for cols in column_batches(path, ["op", "submit_ns", "latency_ns", "issue_lag_ns"]):
        most = max(most, pa.total_allocated_bytes() - base)
        rows += len(cols["op"])
    return most, rows


def test_reading_a_trace_back_holds_no_more_for_a_longer_trace(tmp_path):
    short = _trace(tmp_path / "short.parquet", 32)  # two batches of FIGURE_BATCH_ROWS
    long = _trace(tmp_path / "long.parquet", 256)  # 8 x the requests
    held_short, rows_short = _most_held(short)
    held_long, rows_long = _most_held(long)
    assert (rows_short, rows_long) == (32 * ROW_GROUP, 256 * ROW_GROUP)
    assert held_short > 0
    # Flat: the same row groups' worth at any length (pre-buffered, as before: 4.7 -> 16.9 MB, the whole file).
    assert held_long <= 1.25 * held_short, (held_short, held_long)
    # And a fraction of the long trace's file: its columns are never held whole.
    assert held_long < long.stat().st_size / 3, (held_long, long.stat().st_size)
