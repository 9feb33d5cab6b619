"""What a replay's figures draw, gathered from its per-request trace batch by batch (``replay --report`` and
``--plots``): the run's trace is streamed to Parquet while it runs and read back here in record batches, so the
figures cost flat memory whatever the trace's length (issue 17), where they once needed every request in memory.

Exact, as from the whole trace: request counts, the shares issued late by more than each threshold, every
maximum, and the latency histograms' bin counts (a second pass over the latency column once its range is known).
Within a bucket: the CDFs are drawn from log-linear buckets 1/1024 of a power of two wide
(:class:`ftlscope.traces.batched.Quantiles`: each point is its bucket's mean, within 0.1 % of every value it stands
for, exact below 2,048 ns), and the issue lag's p50/p99 per time window are numpy's linear percentiles over those
bucketed values (within 0.1 %). The percentiles printed in tables come from the engine's summary, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .traces.batched import BUCKETS, Quantiles, bucket_index, bucketed_percentile

# Rows per record batch read back: a few MiB of the columns read.
FIGURE_BATCH_ROWS = 1 << 16
# "Issued late by more than": 10 µs is beyond any timer's slack, 1 ms is a visible distortion of the workload.
LATE_NS = (10_000, 100_000, 1_000_000, 10_000_000)
# The share per time window that the lag-over-time figure draws: issued more than this late.
WINDOW_LATE_NS = 1_000_000


@dataclass
class OpLatencies:
    """One operation's measured requests (not warm-up, not failed): their latencies in buckets, exact range."""

    quantiles: Quantiles = field(default_factory=Quantiles)
    low: int | None = None
    high: int | None = None

    def add(self, latency: np.ndarray) -> None:
        if not len(latency):
            return
        self.quantiles.add(latency)
        low, high = int(latency.min()), int(latency.max())
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)


class _WindowLags:
    """Issue lag per time window in sparse (window, bucket) cells: counts and sums, merged batch by batch; memory
    grows with the cells that occur (a few per window), not with requests."""

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self.cells = pd.DataFrame({"count": pd.Series(dtype=np.int64), "sum": pd.Series(dtype=np.float64)})
        self.windows = pd.DataFrame({"requests": pd.Series(dtype=np.int64), "max": pd.Series(dtype=np.float64),
                                     "late": pd.Series(dtype=np.int64)})

    def add(self, submit: np.ndarray, lag: np.ndarray) -> None:
        window = submit // self.window_ns
        key = window * BUCKETS + bucket_index(lag)
        lag = lag.astype(np.float64)
        cells = pd.DataFrame({"key": key, "count": 1, "sum": lag}).groupby("key").sum()
        windows = pd.DataFrame({"window": window, "requests": 1, "max": lag, "late": lag > WINDOW_LATE_NS}
                               ).groupby("window").agg({"requests": "sum", "max": "max", "late": "sum"})
        self.cells = cells if self.cells.empty else self.cells.add(cells, fill_value=0)
        self.windows = windows if self.windows.empty else pd.concat([self.windows, windows]).groupby(level=0).agg(
            {"requests": "sum", "max": "max", "late": "sum"})

    def table(self) -> pd.DataFrame:
        """Per window (index: its start in s): requests, p50/p99/max lag (ns), share issued > 1 ms late (%)."""
        if self.windows.empty:
            return pd.DataFrame()
        cells = self.cells.sort_index()
        keys = cells.index.to_numpy(dtype=np.int64)
        counts, sums = cells["count"].to_numpy(dtype=np.int64), cells["sum"].to_numpy(dtype=np.float64)
        starts = np.searchsorted(keys // BUCKETS, self.windows.index.to_numpy(dtype=np.int64))
        ends = np.r_[starts[1:], len(keys)]
        table = self.windows.sort_index().copy()
        n = table["requests"].to_numpy(dtype=np.int64)
        for q, name in ((50, "p50"), (99, "p99")):
            table[name] = [bucketed_percentile(counts[a:b], sums[a:b], q, int(k)) for a, b, k in zip(
                starts, ends, n, strict=True)]
        table["late_1ms_pct"] = table["late"] / table["requests"] * 100
        table = table[["requests", "p50", "p99", "max", "late_1ms_pct"]]
        table.index = table.index * self.window_ns / 1e9
        table.index.name = "start_s"
        return table


@dataclass
class LagFigures:
    """The issue lag of every request of a trace: counts on time and late, its buckets, and per time window."""

    requests: int = 0
    on_time: int = 0
    late: dict[int, int] = field(default_factory=lambda: dict.fromkeys(LATE_NS, 0))
    quantiles: Quantiles = field(default_factory=Quantiles)
    over_time: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass
class TraceFigures:
    """What the figures of a replay draw (:func:`gather`), per operation and for the issue lag."""

    latencies: dict[str, OpLatencies]
    histograms: dict[str, tuple[np.ndarray, np.ndarray]]  # per op: (bin edges ns, counts)
    lag: LagFigures | None
    rows: int


def _op_names(column: Any) -> np.ndarray:
    """The op column of a record batch (a dictionary of names) as one name per row."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        names = np.asarray(column.dictionary.to_pylist(), dtype=object)
        return names[column.indices.to_numpy(zero_copy_only=False)]
    return np.asarray(column.to_pylist(), dtype=object)


def column_batches(source: Any, columns: list[str]):
    """``source`` (a Parquet trace path, or a trace frame held in memory) as dicts of numpy columns, a record
    batch at a time (the frame: one batch)."""
    if isinstance(source, pd.DataFrame):
        yield {name: (source[name].astype(str).to_numpy(dtype=object) if name == "op" else source[name].to_numpy())
               for name in columns if name in source}
        return
    import pyarrow.parquet as pq

    from .heap import hold_mmap_threshold

    hold_mmap_threshold()  # batches allocated and freed one after another: memory flat (see ftlscope.heap)
    # pre_buffer (pyarrow's default) reads the wanted columns of every row group up front and holds them until
    # the file is closed: ~6.7 B a request for newt's page (its 100 M-request run peaked at 856 MiB reading its
    # passes' traces back). Without it each row group's columns are read as their batches come.
    pf = pq.ParquetFile(source, pre_buffer=False)
    wanted = [c for c in columns if c in pf.schema_arrow.names]
    for batch in pf.iter_batches(batch_size=FIGURE_BATCH_ROWS, columns=wanted):
        yield {name: (_op_names(batch.column(name)) if name == "op" else
                      batch.column(name).to_numpy(zero_copy_only=False)) for name in wanted}


def _measured(cols: dict[str, np.ndarray]) -> np.ndarray:
    """The rows the latency figures draw: measured (not warm-up) and not failed, as the in-memory figures did."""
    keep = np.ones(len(cols["op"]), dtype=bool)
    if "warmup" in cols:
        keep &= ~cols["warmup"].astype(bool)
    if "status" in cols:
        keep &= cols["status"].astype(np.int64) >= 0
    return keep


def gather(source: Any, ops: list[str], window_ns: int, bins: int) -> TraceFigures:
    """Read ``source`` (the run's Parquet trace, or its trace frame) in batches: per operation of ``ops`` the
    latencies' buckets and exact range, then (a second pass, the range known) the counts of a histogram of
    ``bins`` log-spaced bins from the least to the greatest latency; and every request's issue lag (when the
    trace has it), per ``window_ns`` window of submission time too."""
    latencies = {op: OpLatencies() for op in ops}
    lag: LagFigures | None = None
    windows = _WindowLags(window_ns)
    rows = 0
    columns = ["op", "latency_ns", "warmup", "status", "submit_ns", "issue_lag_ns"]
    for cols in column_batches(source, columns):
        rows += len(cols["op"])
        keep = _measured(cols)
        for op, data in latencies.items():
            data.add(cols["latency_ns"][keep & (cols["op"] == op)].astype(np.int64))
        if "issue_lag_ns" in cols:
            lag = lag or LagFigures()
            lags = cols["issue_lag_ns"].astype(np.int64)
            lag.requests += len(lags)
            lag.on_time += int((lags == 0).sum())
            for threshold in LATE_NS:
                lag.late[threshold] += int((lags > threshold).sum())
            lag.quantiles.add(lags)
            windows.add(cols["submit_ns"].astype(np.int64), lags)
    if lag is not None:
        lag.over_time = windows.table()
    edges = {op: histogram_edges(data.low, data.high, bins) for op, data in latencies.items() if data.low is not None}
    counts = {op: np.zeros(len(e) - 1, dtype=np.int64) for op, e in edges.items()}
    if edges:
        for cols in column_batches(source, ["op", "latency_ns", "warmup", "status"]):
            keep = _measured(cols)
            for op, e in edges.items():
                counts[op] += np.histogram(cols["latency_ns"][keep & (cols["op"] == op)].astype(np.int64), bins=e)[0]
    return TraceFigures(latencies, {op: (edges[op], counts[op]) for op in edges}, lag, rows)


def histogram_edges(low: int, high: int, bins: int) -> np.ndarray:
    """``bins`` log-spaced bins from ``low`` to ``high`` ns; one latency only (a simulated drive can be that
    regular) gets a narrow band around it."""
    low_f, high_f = float(low), float(high)
    if high_f <= low_f * 1.01:
        low_f, high_f = low_f / 1.1, high_f * 1.1
    return np.geomspace(max(low_f, 1.0), high_f, bins + 1)


def trace_source(result: Any) -> Any:
    """Where a run's per-request trace is: its streamed Parquet file when the run wrote one, else the frame it
    kept in memory."""
    streamed = getattr(result, "streamed_trace", None)
    if streamed is not None and streamed.error is None and Path(streamed.path).is_file():
        return streamed.path
    return result.trace
