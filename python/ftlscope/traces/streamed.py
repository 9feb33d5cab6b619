"""Text traces in batches: MSR, Alibaba and SNIA CSV (pyarrow's streaming CSV reader) and fio iologs (pandas'
C parser in chunks), read a batch at a time so a multi-gigabyte trace replays, converts and is summed up in flat
memory. blkparse output is read whole: its requests are pieced together from Q, D and C events far apart in the
file and listed by queue time, which a batch cannot do alone.

Every batch is the table :func:`ftlscope.traces.schema.build_frame` makes of the whole trace, cut in pieces: the
same checks (a malformed line names its file and line, a bad request its number in the trace), the same times
(relative to the trace's first arrival) and, with ``sort``, the same order as the whole sort, done in a sliding
window as for Parquet (:mod:`.batched`): a trace more out of order than one batch raises ``Unsorted``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .batched import BATCH_ROWS, Unsorted, check_forward
from .readers import csv_requests, fio_requests, fio_version
from .schema import TraceError, build_frame, check_columns

# The formats read here in batches; parquet has its own batches (.batched), blkparse is read whole.
STREAMED_FORMATS = ("msr", "alibaba", "spc", "fio")


def format_name(path: Path, fmt: str) -> str:
    """What ``frame.attrs["ftlscope"]["format"]`` says of a trace read whole: fio's names its log version."""
    return f"fio-v{fio_version(path)}" if fmt == "fio" else fmt


def _raw(path: Path, fmt: str) -> Iterator[dict[str, Any]]:
    source = fio_requests(path) if fmt == "fio" else csv_requests(path, fmt)
    for _, cols in source:
        yield {k: v for k, v in cols.items() if v is not None}


def _take(cols: dict[str, np.ndarray], index: Any) -> dict[str, np.ndarray]:
    return {k: v[index] for k, v in cols.items()}


def text_frames(path: str | Path, fmt: str, *, sort: bool = False,
                batch_rows: int = BATCH_ROWS) -> Iterator[pd.DataFrame]:
    """The trace's normalised table, batch by batch, in the order and with the times the whole read gives (see
    the module's docstring). TraceError for a malformed line, a bad request, timestamps going backwards without
    ``sort`` and an empty trace (after the last batch); :class:`Unsorted` when ``sort`` cannot be done in its
    window."""
    path = Path(path)
    name = format_name(path, fmt)
    origin: int | None = None
    last_submit: int | None = None
    emitted_up_to: int | None = None
    held: dict[str, np.ndarray] | None = None
    row = emitted = 0

    def frame(cols: dict[str, np.ndarray], first_row: int) -> pd.DataFrame:
        nonlocal origin, emitted
        if origin is None:
            origin = int(cols["submit"][0])
        emitted += len(cols["submit"])
        return build_frame(cols["op"], cols["offset"], cols["size"], cols["submit"], path=path, fmt=name,
                           complete_ns=cols.get("complete"), origin=origin, first_row=first_row)

    for cols in _raw(path, fmt):
        n = len(cols["submit"])
        if n == 0:
            continue
        submit = cols["submit"]
        if not sort:  # (build_frame checks each request, numbered in the file's order)
            last_submit = check_forward(path, submit, last_submit, row)
            yield frame(cols, row)
        else:
            # Checked in the file's order, so a bad request is named by its number in the file as the whole read
            # does, before sorting moves it.
            check_columns(cols["op"], cols["offset"], cols["size"], submit, path=path, first_row=row)
            if emitted_up_to is not None and submit.min() < emitted_up_to:
                raise Unsorted(path)
            merged = cols if held is None else {k: np.concatenate([held[k], cols[k]]) for k in cols}
            order = np.argsort(merged["submit"], kind="stable")
            merged = _take(merged, order)
            ready = max(len(order) - batch_rows, 0)  # the rest is held back for later, earlier arrivals
            if ready:
                yield frame(_take(merged, slice(None, ready)), emitted)
                emitted_up_to = int(merged["submit"][ready - 1])
            held = _take(merged, slice(ready, None))
        row += n
    if held is not None and len(held["submit"]):
        yield frame(held, emitted)
    if row == 0:
        raise TraceError(f"{path}: the trace holds no requests")


def text_batches(path: str | Path, fmt: str, *, sort: bool = False, batch_rows: int = BATCH_ROWS,
                 extra: tuple[str, ...] = ("complete_ns", "process")) -> Iterator[tuple[np.ndarray, ...]]:
    """:func:`text_frames` as :func:`ftlscope.traces.batched.parquet_batches` yields a Parquet trace: (op codes,
    offset, size, submit_ns, latency_ns) of numpy arrays (the latency NaN where the format records no completion,
    or with ``extra=()``)."""
    for frame in text_frames(path, fmt, sort=sort, batch_rows=batch_rows):
        latency = np.full(len(frame), np.nan)
        if "latency_ns" in frame and "complete_ns" in extra:
            latency = frame["latency_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
        yield (frame["op"].cat.codes.to_numpy().astype(np.int64), frame["offset_bytes"].to_numpy().astype(np.int64),
               frame["size"].to_numpy().astype(np.int64), frame["submit_ns"].to_numpy().astype(np.int64), latency)
