"""A run's results as ordinary data: the summary (dict/JSON), time windows and the trace (pandas/Parquet).

Nothing here needs ftlscope to read back: ``json.load`` the summary, ``pandas.read_parquet`` the trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .metrics import LATENCY_KEYS, OFFSET_BYTES, SUBMIT_SEQ, WINDOW_INDEX, latency_column
from .workload import OPS

__all__ = ["LATENCY_KEYS", "RunResult", "trace_frame", "windows_frame"]

# The engine's trace columns (``stats.rs``'s trace_columns!) and their dtypes; a new column is one line here.
TRACE_DTYPES = {
    "op": np.uint8,
    "offset": np.uint64,
    "size": np.uint32,
    "queue": np.uint16,
    "submit_ns": np.uint64,
    "complete_ns": np.uint64,
    "status": np.int32,
    "warmup": np.bool_,
    SUBMIT_SEQ: np.uint64,
}


# The engine's field is "offset"; OFFSET is a reserved word in SQL, so the table says offset_bytes.
RENAMED = {"offset": OFFSET_BYTES}


def trace_frame(columns: dict[str, Any] | None) -> pd.DataFrame:
    """The per-request trace from the engine's raw column bytes (one copy, no per-row Python)."""
    if columns is None:
        return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in TRACE_DTYPES.items()}).rename(
            columns={"offset": OFFSET_BYTES})
    data = {name: np.frombuffer(columns[name], dtype=dtype) for name, dtype in TRACE_DTYPES.items()}
    frame = pd.DataFrame(data).rename(columns=RENAMED)
    frame["op"] = pd.Categorical.from_codes(frame["op"].astype(np.int8), categories=list(OPS))
    frame.insert(frame.columns.get_loc("complete_ns") + 1, "latency_ns",
                 (frame["complete_ns"] - frame["submit_ns"]).astype(np.int64))
    for name, dtype in OPTIONAL_TRACE_DTYPES.items():
        if name in columns:
            frame[name] = np.frombuffer(columns[name], dtype=dtype)
    return frame


# Columns only some runs have: a replay's issue lag (how late each request was submitted against its schedule).
OPTIONAL_TRACE_DTYPES = {"issue_lag_ns": np.uint64}


def empty_trace_columns(optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """The engine's trace columns with no records (and the ``optional`` ones named): ``trace_frame`` of it has
    the trace's dtypes (``op`` categorical), which an empty trace written to Parquet must keep."""
    return {**{name: b"" for name in (*TRACE_DTYPES, *optional)}, "dropped": 0}


def windows_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (window, operation) with throughput and latency percentiles, under the SQL-friendly names of
    :mod:`ftlscope.metrics` (``window_index``, ``lat_p99_9_ns``)."""
    if not rows:
        return pd.DataFrame()
    # Built column-wise from the parsed rows, not from a flattened copy of each: a long run has a row per 100 ms
    # window (18,200 for newt's 100 M-request aligned pass), and the copy held ~20 MiB more at its end.
    latency = pd.DataFrame([row.pop("lat_ns") for row in rows])
    latency.columns = [latency_column(k, "ns") for k in latency.columns]
    frame = pd.concat([pd.DataFrame(rows).rename(columns={"window": WINDOW_INDEX}), latency], axis=1)
    return frame.sort_values([WINDOW_INDEX, "op"]).reset_index(drop=True)


@dataclass
class RunResult:
    """What ``ftlscope.run`` returns."""

    summary: dict[str, Any]
    windows: pd.DataFrame
    trace: pd.DataFrame
    dropped_trace_records: int = 0
    notices: list[str] = field(default_factory=list)
    # A verify run's write record: the generation last written to each 512 B sector (little-endian u32).
    write_record: bytes | None = field(default=None, repr=False)
    # The simulated device the run drove (None for a real target): a verify run reads it back.
    sim_device: Any = field(default=None, repr=False)
    # The trace written to a file while the run went (``trace_file``), as ``ftlscope.trace_stream`` left it.
    streamed_trace: Any = None
    # What the trace is, written into its Parquet metadata (see ``ftlscope.run``'s ``trace_metadata``).
    trace_metadata: dict[str, Any] | None = None

    @property
    def ops(self) -> dict[str, dict[str, Any]]:
        """The per-operation summaries present in this run."""
        return {op: self.summary[op] for op in OPS if op in self.summary}

    @property
    def stop_reason(self) -> str:
        return self.summary["run"]["stop"]["reason"]

    def save_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.summary, indent=2, default=str) + "\n")
        return path

    def save_write_record(self, path: str | Path) -> Path:
        """Save a verify run's write record for a later ``ftlscope verify --record``: a numpy ``.npz`` with
        ``generations`` (uint32, the generation last written to each 512 B sector from offset 0) and ``tag``
        (the run's verify tag)."""
        if self.write_record is None:
            raise ValueError("not a verify run: there is no write record to save")
        path = Path(path)
        with path.open("wb") as f:  # a file object: np.savez would add ".npz" to a name without it
            np.savez_compressed(f, generations=np.frombuffer(self.write_record, dtype="<u4"),
                                tag=np.uint64(self.summary["workload"]["verify_tag"]), format=np.int32(1))
        return path

    def save_trace(self, path: str | Path) -> Path:
        """Write the per-request trace as Parquet (zstd); a trace streamed to a file is there already (or is
        copied to ``path``)."""
        if self.streamed_trace is not None:
            return self.streamed_trace.save_to(path)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not self.trace_metadata:
            self.trace.to_parquet(path, compression="zstd", index=False)
            return path
        import pyarrow as pa
        import pyarrow.parquet as pq

        from .trace_stream import with_trace_metadata

        table = pa.Table.from_pandas(self.trace, preserve_index=False)
        pq.write_table(table.replace_schema_metadata(with_trace_metadata(table.schema, self.trace_metadata).metadata),
                       path, compression="zstd")
        return path

    def save_windows(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.windows.to_csv(path, index=False)
        return path
