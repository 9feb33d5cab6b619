"""The normalised trace table every reader returns and every tool reads.

Columns follow ``run --trace``: ``op`` (categorical over ftlscope's operations), ``offset_bytes`` and ``size`` in bytes,
``submit_ns`` (arrival time since the trace's first request), and where the format records them ``complete_ns``
and ``latency_ns`` (same clock) and ``process``. Rows are in arrival order, a run trace's requests of one
nanosecond in the order the run submitted them (its ``submit_seq``). What the trace is (its format, whether it is
synthetic) travels in ``frame.attrs["ftlscope"]`` and, in Parquet, in the schema metadata under the key ``ftlscope``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import UsageError
from ..metrics import SUBMIT_SEQ
from ..workload import OPS

METADATA_KEY = b"ftlscope"
# Further columns that are readings of the trace's clock (not durations): moved to its origin with submit_ns.
CLOCK_COLUMNS = ("queued_ns",)


class TraceError(UsageError):
    """A trace file cannot be read as asked (exit 2, one line naming the file and what is wrong)."""


def check_columns(op: Any, offset: Any, size: Any, submit_ns: Any, *, path: Path,
                  first_row: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four columns as arrays, refused (TraceError naming the request) where a size or offset is negative or
    an operation unknown; request numbers count from ``first_row + 1``."""
    op = np.asarray(op, dtype=object)
    offset = np.asarray(offset, dtype=np.int64)
    size = np.asarray(size, dtype=np.int64)
    submit = np.asarray(submit_ns, dtype=np.int64)
    if (size < 0).any():
        i = int(np.argmax(size < 0))
        raise TraceError(f"{path}: request {first_row + i + 1} has a negative size ({size[i]}); sizes must be >= 0 "
                         "bytes")
    if (offset < 0).any():
        i = int(np.argmax(offset < 0))
        raise TraceError(f"{path}: request {first_row + i + 1} has a negative offset ({offset[i]}); offsets must "
                         "be >= 0")
    known = pd.Series(op).isin(OPS).to_numpy()
    if not known.all():
        i = int(np.argmin(known))
        raise TraceError(f"{path}: request {first_row + i + 1} has operation {op[i]!r}; expected one of "
                         f"{', '.join(OPS)}")
    return op, offset, size, submit


def build_frame(op: Any, offset: Any, size: Any, submit_ns: Any, *, path: Path, fmt: str,
                complete_ns: Any = None, process: Any = None, sort: bool = False,
                meta: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
                origin: int | None = None, first_row: int = 0) -> pd.DataFrame:
    """Check and normalise columns into the trace table; times become relative to the first arrival (or to
    ``origin``: a batch of a longer trace, whose first request is number ``first_row + 1``, takes the trace's).

    ``extra`` holds further columns a format records (a capture's ``pid``, ``queued_ns``, ``rwbs``, ...): kept in
    the given order after the standard ones, sorted with them; those that are clock readings (``CLOCK_COLUMNS``) are
    shifted to the same origin as ``submit_ns``, durations (a replay's ``issue_lag_ns``) are not.
    """
    op, offset, size, submit = check_columns(op, offset, size, submit_ns, path=path, first_row=first_row)
    if len(submit) == 0:
        raise TraceError(f"{path}: the trace holds no requests")
    ops = pd.Categorical(op, categories=list(OPS))
    frame = pd.DataFrame({
        "op": ops,
        "offset_bytes": offset.astype(np.uint64),
        "size": size.astype(np.uint32),
        "submit_ns": submit,
    })
    if complete_ns is not None:
        frame["complete_ns"] = pd.array(complete_ns, dtype="Int64")
    if process is not None:
        frame["process"] = pd.array(process, dtype="string")
    for name, values in (extra or {}).items():
        frame[name] = values.to_numpy() if isinstance(values, pd.Series) else values
    back = np.flatnonzero(np.diff(submit) < 0)
    if len(back) and not sort:
        i = int(back[0]) + 1
        raise TraceError(f"{path}: timestamps go backwards at request {first_row + i + 1} ({submit[i]} ns after "
                         f"{submit[i - 1]} ns); pass --sort to order the requests by arrival time")
    if SUBMIT_SEQ in frame:
        # A run trace says in which order its requests were submitted, which neither its rows (in completion
        # order) nor its times (many requests in one nanosecond on a simulated drive) tell: that order.
        order = np.lexsort((frame[SUBMIT_SEQ].to_numpy(), submit))
        if (np.diff(order) != 1).any():
            frame = frame.iloc[order].reset_index(drop=True)
    elif len(back):
        frame = frame.sort_values("submit_ns", kind="stable").reset_index(drop=True)
    start = int(frame["submit_ns"].iloc[0]) if origin is None else origin
    frame["submit_ns"] = (frame["submit_ns"] - start).astype(np.uint64)
    for name in extra or {}:
        if name in CLOCK_COLUMNS:
            frame[name] = frame[name] - start
    if "complete_ns" in frame:
        frame["complete_ns"] = frame["complete_ns"] - start
        frame.insert(frame.columns.get_loc("complete_ns") + 1, "latency_ns",
                     frame["complete_ns"] - frame["submit_ns"].astype(np.int64))
        if frame["complete_ns"].notna().all():
            frame["complete_ns"] = frame["complete_ns"].astype(np.uint64)
            frame["latency_ns"] = frame["latency_ns"].astype(np.int64)
    frame.attrs["ftlscope"] = {"format": fmt, "synthetic": False, **(meta or {})}
    return frame


def parquet_table(frame: pd.DataFrame) -> Any:
    """The trace table as Arrow, with what the trace is (``frame.attrs["ftlscope"]``) in the schema metadata."""
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps(frame.attrs.get("ftlscope", {})).encode()
    return table.replace_schema_metadata(meta)


def write_parquet(frame: pd.DataFrame, out: str | Path) -> Path:
    """ftlscope's Parquet trace (zstd), with what the trace is in the schema metadata."""
    import pyarrow.parquet as pq

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(parquet_table(frame), out, compression="zstd")
    return out
