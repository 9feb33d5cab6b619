"""A streamed replay over several queues (``replay --queues N`` of a trace read in batches): the trace is split
by queue into one spill file each while it is checked, then each queue is fed from its own file.

Why spill rather than share one window of chunks between the queues: on a simulated drive one thread steps
every queue on virtual time, so a queue that needs its next chunk blocks that thread; a shared window is
refilled only once the slowest queue has passed its oldest chunk, which needs that same thread: a deadlock as
soon as the queues drift a window apart in trace order. With a file per queue each queue has a feed of its own
(the engine's :meth:`Replay::streamed_split`, a feeder thread per queue here): a feeder waits only for room in
its own queue's chunks, so no queue ever waits for another's, on a simulated drive or a real target, however
far apart the queues drift. The price is one more pass over the data, as the engine's compact columns (21 B a
request, zstd-compressed by column with arrival times as differences: about 5 B a request for random 4 KiB reads,
in a temporary directory removed after the replay), and no Parquet or text parsing in the second pass. Memory
stays flat: a batch per queue in flight, and batches of ``STREAM_BATCH_ROWS / N`` rows per queue so N queues together
hold what one queue does.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .errors import UsageError

# One request as the engine takes it: its columns, packed (21 B). A spill file holds blocks of them (:func:`
# _pack_block`).
SPILL_DTYPE = np.dtype([("arrival", "<u8"), ("op", "u1"), ("offset", "<u8"), ("size", "<u4")])
# A block's header: requests in it, compressed bytes after the header.
_BLOCK_HEADER = np.dtype([("requests", "<u8"), ("nbytes", "<u8")])
# zstd over the columns one after another, arrival times as differences from the request before (wrapping uint64
# arithmetic, so a trace out of order still round-trips): measured on 1 M random 4 KiB reads, 4.8 B a request
# against 21 packed and 7.1 for zstd over packed rows, at ~4.5 M requests/s (pyarrow's codec, already a dependency).
_SPILL_CODEC = "zstd"


def _pack_block(records: np.ndarray, previous_arrival: int) -> bytes:
    import pyarrow as pa

    arrival = records["arrival"]
    deltas = np.diff(arrival, prepend=np.uint64(previous_arrival)) if len(arrival) else arrival
    body = b"".join(np.ascontiguousarray(column).tobytes() for column in
                    (deltas, records["op"], records["offset"], records["size"]))
    packed = pa.compress(body, codec=_SPILL_CODEC, asbytes=True)
    header = np.array([(len(records), len(packed))], dtype=_BLOCK_HEADER)
    return header.tobytes() + packed


def _unpack_block(packed: bytes, requests: int, previous_arrival: int) -> np.ndarray:
    import pyarrow as pa

    body = memoryview(pa.decompress(packed, decompressed_size=requests * SPILL_DTYPE.itemsize, codec=_SPILL_CODEC,
                                    asbytes=True))
    records = np.empty(requests, dtype=SPILL_DTYPE)
    at = 0
    for name in SPILL_DTYPE.names:
        width = SPILL_DTYPE[name].itemsize * requests
        records[name] = np.frombuffer(body[at:at + width], dtype=SPILL_DTYPE[name])
        at += width
    records["arrival"] = np.cumsum(records["arrival"], dtype=np.uint64) + np.uint64(previous_arrival)
    return records
# The fewest requests a queue's batch holds however many queues share the batch budget (a push per batch).
MIN_QUEUE_BATCH = 1 << 12
_MISSING = object()  # every missing value of a --split-by column is one value


class QueueNumbers:
    """Each replayed request's queue, batch after batch, as :func:`ftlscope.replay.split_queues` gives them for
    the whole trace: request k to queue k mod N (round-robin), or each distinct key value to queue v mod N with
    the values numbered in order of first appearance across the batches."""

    def __init__(self, queues: int) -> None:
        self.queues = queues
        self.done = 0
        self.values: dict[Any, int] = {}

    def assign(self, key: np.ndarray | None, requests: int) -> np.ndarray:
        if key is None:
            queue = (np.arange(requests, dtype=np.int64) + self.done) % self.queues
            self.done += requests
            return queue
        import pandas as pd

        codes, uniques = pd.factorize(pd.Series(key, dtype=object), use_na_sentinel=False)
        numbers = np.empty(len(uniques), dtype=np.int64)
        for i, value in enumerate(uniques):
            value = _MISSING if pd.isna(value) else value
            numbers[i] = self.values.setdefault(value, len(self.values))
        self.done += requests
        return numbers[codes] % self.queues if len(codes) else np.zeros(0, dtype=np.int64)


def key_batches(path: str | Path, fmt: str, *, sort: bool, split_by: str | None,
                batch_rows: int) -> Iterator[tuple[np.ndarray, ...]]:
    """(op codes, offset, size, submit_ns, key or None) batch by batch: the trace as ``trace_batches`` reads it,
    with the ``split_by`` column (None: round-robin) as the whole read names it (:func:`ftlscope.replay.
    split_column`): a text trace's columns are its table's; for Parquet the file's, and a name the file lacks is
    :class:`NeedsWhole` (the whole read may derive it, or words the error)."""
    from .replay import find_column
    from .traces.batched import parquet_batches, parquet_meta

    if fmt == "parquet":
        column = None
        if split_by is not None:
            column = find_column(parquet_meta(path)[0].schema_arrow.names, split_by)
            if column is None:
                raise NeedsWhole(split_by)
        for op, offset, size, submit, *rest in parquet_batches(path, sort=sort, batch_rows=batch_rows, extra=(),
                                                                key=column):
            yield op, offset, size, submit, rest[-1] if column is not None else None
        return
    from .replay import split_column
    from .traces.streamed import text_frames

    for frame in text_frames(path, fmt, sort=sort, batch_rows=batch_rows):
        key = split_column(frame, split_by) if split_by is not None else None
        yield (frame["op"].cat.codes.to_numpy().astype(np.int64), frame["offset_bytes"].to_numpy().astype(np.int64),
               frame["size"].to_numpy().astype(np.int64), frame["submit_ns"].to_numpy().astype(np.int64), key)


class NeedsWhole(Exception):  # noqa: N818 - a signal to the caller, not an error the user sees
    """The split cannot be made in batches: the caller reads the trace whole."""


class SpilledTrace:
    """A trace split into one spill file per queue, in a temporary directory :meth:`remove` deletes."""

    def __init__(self, parent: str | Path | None, queues: int) -> None:
        parent = Path(parent) if parent is not None and Path(parent).is_dir() else None
        # Both failures are the user's to fix (where the outputs go, TMPDIR) and come before the device is
        # touched: exit 2 like any other refusal, not a failed run.
        try:
            self.directory = Path(tempfile.mkdtemp(prefix=".ftlscope-replay-split-", dir=parent))
        except OSError as exc:
            raise UsageError(f"replay --queues: cannot make a directory for the split trace in "
                           f"{parent or tempfile.gettempdir()} ({exc.strerror or exc}); give an output in a "
                           "writable directory, or set TMPDIR") from None
        self.paths = [self.directory / f"queue-{q}.bin" for q in range(queues)]
        self.requests = np.zeros(queues, dtype=np.int64)
        self.spilled_bytes = 0
        self._last_arrival = [0] * queues  # each file's arrival times are differences from the one before

    def write(self, columns: dict[str, bytes], queue: np.ndarray) -> None:
        """Append a batch (the engine's columns as bytes) to its queues' files, each queue's in trace order."""
        records = np.empty(len(queue), dtype=SPILL_DTYPE)
        for name in SPILL_DTYPE.names:
            records[name] = np.frombuffer(columns[name], dtype=SPILL_DTYPE[name])
        counts = np.bincount(queue, minlength=len(self.paths))
        order = np.argsort(queue, kind="stable")
        ends = np.cumsum(counts)
        try:
            for q in np.flatnonzero(counts):
                mine = records[order[ends[q] - counts[q]:ends[q]]]
                block = _pack_block(mine, self._last_arrival[q])
                with open(self.paths[q], "ab") as out:
                    out.write(block)
                self._last_arrival[q] = int(mine["arrival"][-1])
                self.spilled_bytes += len(block)
        except OSError as exc:
            raise UsageError(f"replay --queues: cannot write the split trace in {self.directory} "
                           f"({exc.strerror or exc}; it takes up to {SPILL_DTYPE.itemsize} B a request, compressed); "
                           "free room there, give outputs on another file system, or set TMPDIR") from None
        self.requests += counts

    def batches(self, queue: int, rows: int) -> Iterator[np.ndarray]:
        """Queue ``queue``'s requests, ``rows`` at a time."""
        if not self.requests[queue]:
            return
        previous = 0
        with open(self.paths[queue], "rb") as source:
            while header := source.read(_BLOCK_HEADER.itemsize):
                requests, nbytes = (int(v) for v in np.frombuffer(header, dtype=_BLOCK_HEADER)[0])
                records = _unpack_block(source.read(nbytes), requests, previous)
                previous = int(records["arrival"][-1]) if requests else previous
                for start in range(0, requests, rows):
                    yield records[start:start + rows]

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def spill_pass(path: str | Path, fmt: str, sort: bool, prepare: dict[str, Any], queues: int,
               split_by: str | None, parent: str | Path | None,
               batch_rows: int) -> tuple[dict[str, Any], SpilledTrace]:
    """Check every request as the whole read does (``batch_requests``: a bad request or line anywhere is refused
    before the replay starts) and split the trace into a spill file per queue; the notes (with
    ``queue_requests``) and the spilled trace. Nothing is left behind when it raises."""
    from .replay import batch_requests, finish_notes, merge_notes

    numbers = QueueNumbers(queues)
    spilled = SpilledTrace(parent, queues)
    try:
        notes, row = None, 0
        for op, offset, size, submit, key in key_batches(path, fmt, sort=sort, split_by=split_by,
                                                         batch_rows=batch_rows):
            columns, part = batch_requests(op, offset, size, submit, first_row=row, key=key, **prepare)
            row += len(op)
            notes = merge_notes(notes, part)
            spilled.write(columns, numbers.assign(columns.pop("key", None), part["requests"]))
        notes = finish_notes(notes, prepare["flag_target"])
    except BaseException:
        spilled.remove()
        raise
    return {**notes, "queue_requests": [int(n) for n in spilled.requests]}, spilled


def start_feeder(feed: Any, batches: Iterator[tuple[Any, Any, Any, Any, int]], queue: int, failures: list[str],
                 name: str, failure: Callable[[int, BaseException], str]) -> threading.Thread:
    """Start a thread pushing ``batches`` (each the engine's four columns as bytes, and how many requests they
    hold) into queue ``queue`` of ``feed`` (``ReplayFeed``), which it closes when done. A batch that cannot be
    read ends the queue there, and ``failure(requests pushed, exception)`` (one line) goes into ``failures``."""

    def push() -> None:
        pushed = 0
        try:
            for arrival, op, offset, size, requests in batches:
                if not feed.push(arrival, op, offset, size, queue=queue):
                    return  # the replay stopped early (Ctrl-C, an error, a time limit): nothing more to read
                pushed += requests
        except BaseException as exc:  # noqa: BLE001 - reported with the result: that queue ends where it got
            failures.append(failure(pushed, exc))
        finally:
            with contextlib.suppress(Exception):
                feed.close(queue)

    thread = threading.Thread(target=push, name=name, daemon=True)
    thread.start()
    return thread


def feed_queues(feed: Any, spilled: SpilledTrace, rows: int) -> tuple[list[threading.Thread], list[str]]:
    """Start a thread per queue pushing its spill file into ``feed`` (``ReplayFeed`` of one feeder per queue);
    the threads, and a list the failures are put in (one line each)."""
    failures: list[str] = []

    def spilled_batches(q: int):
        for records in spilled.batches(q, rows):
            yield (records["arrival"].tobytes(), records["op"].tobytes(), records["offset"].tobytes(),
                   records["size"].tobytes(), len(records))

    threads = [start_feeder(feed, spilled_batches(q), q, failures, f"ftlscope-replay-feed-{q}",
                            lambda pushed, exc, q=q: f"queue {q}'s part of the trace could not be read on after its "
                                                     f"request {pushed:,} ({exc}); that queue ended there")
               for q in range(len(spilled.paths))]
    return threads, failures


def queue_batch_rows(batch_rows: int, queues: int) -> int:
    """Requests per push on each of ``queues`` queues: the one-queue batch shared out, so memory stays that of
    one queue (the engine holds a few chunks per queue), but not so few that pushes dominate."""
    return max(MIN_QUEUE_BATCH, batch_rows // queues)
