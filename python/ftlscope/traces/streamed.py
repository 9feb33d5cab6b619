"""Text traces in batches: MSR, Alibaba and SNIA CSV (pyarrow's streaming CSV reader), fio iologs (pandas'
C parser in chunks) and blkparse output (chunks of lines, :mod:`.blkparse`), read a batch at a time so a
multi-gigabyte trace replays, converts and is summed up in flat memory.

Every batch is the table :func:`ftlscope.traces.schema.build_frame` makes of the whole trace, cut in pieces: the
same checks (a malformed line names its file and line, a bad request its number in the trace), the same times
(relative to the trace's first arrival) and, with ``sort``, the same order as the whole sort, done in the sliding
window the Parquet batches use (:mod:`.window`): a trace more out of order than one batch raises ``Unsorted``.
blkparse requests are put together from Q, D and C events far apart in the file and always go out by arrival
through that window, never past the earliest request still in flight; one in flight while more than
:data:`BLKPARSE_WAITING` finished ones wait behind it (its C lost) raises ``Unsorted`` too, and the callers read
such a trace whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .batched import BATCH_ROWS, check_forward
from .readers import KEPT_COLUMNS, csv_requests, fio_requests, fio_version
from .schema import TraceError, build_frame, check_columns
from .window import SortWindow, Unsorted

# The formats read here in batches; parquet has its own batches (.batched).
STREAMED_FORMATS = ("msr", "alibaba", "spc", "fio", "blkparse")


def format_name(path: Path, fmt: str) -> str:
    """What ``frame.attrs["ftlscope"]["format"]`` says of a trace read whole: fio's names its log version."""
    return f"fio-v{fio_version(path)}" if fmt == "fio" else fmt


def _raw(path: Path, fmt: str) -> Iterator[dict[str, Any]]:
    source = fio_requests(path) if fmt == "fio" else csv_requests(path, fmt)
    for _, cols in source:
        yield {k: v for k, v in cols.items() if v is not None}


# blkparse: finished requests held back for a request queued (Q) before them but issued (D) after them, at most a
# batch; and those that may wait besides behind one still in flight, before the trace is read whole instead
# (``Unsorted``): 256 Ki requests, about 20 MiB. The held requests' process names are Python strings, so the
# window is kept smaller than a batch of the other formats.
BLKPARSE_HOLD = 1 << 14
BLKPARSE_WAITING = 1 << 18


def text_frames(path: str | Path, fmt: str, *, sort: bool = False,
                batch_rows: int = BATCH_ROWS) -> Iterator[pd.DataFrame]:
    """The trace's normalised table, batch by batch, in the order and with the times the whole read gives (see
    the module's docstring). TraceError for a malformed line, a bad request, timestamps going backwards without
    ``sort`` and an empty trace (after the last batch); :class:`Unsorted` when ``sort`` (or blkparse's pairing)
    cannot be done in its window."""
    from ..heap import hold_mmap_threshold

    hold_mmap_threshold()  # batches allocated and freed one after another: memory flat (see ftlscope.heap)
    path = Path(path)
    if fmt == "blkparse":
        yield from _blkparse_frames(path, batch_rows)
        return
    name = format_name(path, fmt)
    kept = tuple(KEPT_COLUMNS.get(fmt, ()))
    window = SortWindow(path)
    origin: int | None = None
    last_submit: int | None = None
    row = emitted = 0
    names: tuple[str, ...] = ()  # the columns of each request in the order SortWindow holds them

    def frame(values: tuple[np.ndarray, ...], first_row: int) -> pd.DataFrame:
        nonlocal origin, emitted
        cols = dict(zip(names, values, strict=True))
        if origin is None:
            origin = int(cols["submit"][0])
        emitted += len(cols["submit"])
        return build_frame(cols["op"], cols["offset"], cols["size"], cols["submit"], path=path, fmt=name,
                           complete_ns=cols.get("complete"), origin=origin, first_row=first_row,
                           extra={k: cols[k] for k in kept})

    for cols in _raw(path, fmt):
        submit = cols["submit"]
        n = len(submit)
        if n == 0:
            continue
        names = ("op", "offset", "size", "submit", *(("complete",) if "complete" in cols else ()), *kept)
        columns = tuple(cols[k] for k in names)
        if not sort:  # (build_frame checks each request, numbered in the file's order)
            last_submit = check_forward(path, submit, last_submit, row)
            yield frame(columns, row)
        else:
            # Checked in the file's order, so a bad request is named by its number in the file as the whole read
            # does, before sorting moves it.
            check_columns(cols["op"], cols["offset"], cols["size"], submit, path=path, first_row=row)
            ready = window.push(columns, submit, np.arange(row, row + n), hold=batch_rows)
            if ready is not None:
                yield frame(ready, emitted)
        row += n
    rest = window.rest()
    if rest is not None:
        yield frame(rest, emitted)
    if row == 0:
        raise TraceError(f"{path}: the trace holds no requests")


def _blkparse_frames(path: Path, batch_rows: int) -> Iterator[pd.DataFrame]:
    """blkparse's requests by arrival (issue order among equal arrivals), as they finish."""
    from . import blkparse

    window = SortWindow(path)
    origin: int | None = None
    emitted = 0

    def frame(ready: tuple[np.ndarray, ...]) -> pd.DataFrame:
        nonlocal origin, emitted
        *columns, arrival = ready
        origin = int(arrival[0]) if origin is None else origin
        table = blkparse.frame(dict(zip(blkparse.COLUMNS, columns, strict=True)), arrival, path=path,
                               origin=origin, first_row=emitted)
        emitted += len(table)
        # Every batch alike (a batch whose requests all completed would otherwise have plain integer columns).
        return table.astype({"complete_ns": "Int64", "latency_ns": "Int64"})

    hold = min(batch_rows, BLKPARSE_HOLD)
    # A chunk's requests are gathered up to that before the window merges and sorts them with what it holds.
    gathered: list[tuple[np.ndarray, ...]] = []
    count = 0
    for cols, arrival, seq, in_flight in blkparse.requests(path):
        gathered.append((*(cols[name] for name in blkparse.COLUMNS), arrival, seq))
        count += len(seq)
        if count < hold and in_flight is not None:
            continue  # (the last requests come with None: nothing is left gathered)
        *columns, arrival, seq = (np.concatenate(parts) for parts in zip(*gathered, strict=True))
        gathered, count = [], 0
        ready = window.push((*columns, arrival), arrival, seq, hold=hold, before=in_flight)
        if ready is not None:
            yield frame(ready)
        if window.held() > hold + BLKPARSE_WAITING:
            raise Unsorted(path)  # a request in flight that long (its C lost?): read whole, exact
    rest = window.rest()
    if rest is not None:
        yield frame(rest)


def text_batches(path: str | Path, fmt: str, *, sort: bool = False, batch_rows: int = BATCH_ROWS,
                 extra: tuple[str, ...] = ("complete_ns", "process")) -> Iterator[tuple[np.ndarray, ...]]:
    """:func:`text_frames` as :func:`ftlscope.traces.batched.parquet_batches` yields a Parquet trace: (op codes,
    offset, size, submit_ns, latency_ns[, process]) of numpy arrays (the latency NaN where the format records no
    completion, or with ``extra=()``; the process where the format names it and ``extra`` asks)."""
    for frame in text_frames(path, fmt, sort=sort, batch_rows=batch_rows):
        latency = np.full(len(frame), np.nan)
        if "latency_ns" in frame and "complete_ns" in extra:
            latency = frame["latency_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
        cols = (frame["op"].cat.codes.to_numpy().astype(np.int64), frame["offset_bytes"].to_numpy().astype(np.int64),
                frame["size"].to_numpy().astype(np.int64), frame["submit_ns"].to_numpy().astype(np.int64), latency)
        if "process" in frame and "process" in extra:
            cols += (frame["process"].to_numpy(dtype=object, na_value=None),)
        yield cols
