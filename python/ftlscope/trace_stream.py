"""``run --trace FILE``: the per-request trace written to Parquet while the run goes, in flat memory.

The engine's aggregator hands the completion records out in fixed-size column chunks (recycled, so nothing is
allocated once the first few exist; see ``stats.rs``'s ``TraceStream``); a writer thread here drains them and
writes each as one Parquet row group. The measuring threads never wait for Parquet: only the aggregator does,
and only when the writer falls behind by several chunks. The file has the schema (columns, dtypes, pandas
metadata) of a trace written in one piece from the in-memory frame, so every reader takes it unchanged.

The file is closed properly however the run ends (completed, Ctrl-C, SIGTERM): the writer ends when the engine's
stream does, after the last partial chunk. If the file cannot be written on (the disk filled up), the bytes
written so far are copied into a new ``ftlscope-kept-*`` directory and the writing goes on there, so the trace
is still whole; :func:`ftlscope.cli_checks.save_run_outputs` then keeps the other outputs beside it and says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .results import OPTIONAL_TRACE_DTYPES, RENAMED, TRACE_DTYPES, empty_trace_columns, trace_frame
from .workload import OPS

# Records per chunk, and so per row group: 64 Ki records are 2.6 MiB of columns, four of them in flight at most.
CHUNK_ROWS = 1 << 16


def trace_schema(optional: tuple[str, ...] = (), metadata: dict[str, Any] | None = None) -> Any:
    """The Parquet schema of a run's trace (with the ``optional`` columns named, e.g. a replay's issue lag): that
    of the in-memory trace frame written with ``to_parquet``, plus ``metadata`` under the traces' key."""
    import pyarrow as pa

    schema = pa.Schema.from_pandas(trace_frame(empty_trace_columns(optional)), preserve_index=False)
    return with_trace_metadata(schema, metadata)


def with_trace_metadata(schema: Any, metadata: dict[str, Any] | None) -> Any:
    """``schema`` carrying ``metadata`` as JSON under :data:`ftlscope.traces.schema.METADATA_KEY`."""
    if not metadata:
        return schema
    from .traces.schema import METADATA_KEY

    return schema.with_metadata({**(schema.metadata or {}), METADATA_KEY: json.dumps(metadata, default=str)})


def chunk_table(columns: dict[str, Any], schema: Any) -> Any:
    """One chunk of engine columns as a table of the trace's schema: the columns ``trace_frame`` makes, built
    straight as Arrow arrays (numbers without a copy), as pandas would convert them. A test holds the two equal."""
    import pyarrow as pa

    dtypes = {**TRACE_DTYPES, **{name: OPTIONAL_TRACE_DTYPES[name] for name in OPTIONAL_TRACE_DTYPES
                                 if name in schema.names}}
    raw = {name: np.frombuffer(columns[name], dtype=dtype) for name, dtype in dtypes.items()}
    arrays = {RENAMED.get(name, name): pa.array(values) for name, values in raw.items()}
    arrays["op"] = pa.DictionaryArray.from_arrays(pa.array(raw["op"].view(np.int8)), pa.array(list(OPS)))
    arrays["latency_ns"] = pa.array((raw["complete_ns"] - raw["submit_ns"]).astype(np.int64))
    return pa.Table.from_arrays([arrays[name] for name in schema.names], schema=schema)


class _FailoverFile:
    """A write-only file that moves to a new ``ftlscope-kept-*`` directory when its own place stops taking
    bytes (ENOSPC, EIO, a mount gone): what was written so far is copied over, the rest follows there, and
    the Parquet writer writing through it never notices, so the kept file is whole. (No library does this:
    pyarrow's writers fail, and a Parquet file without its footer cannot be read back.)"""

    mode = "wb"

    def __init__(self, path: Path) -> None:
        self.asked = path
        self.path = path
        self._file = open(path, "wb", buffering=0)  # noqa: SIM115 - closed in close(), after the Parquet footer
        self._written = 0
        self.failure: OSError | None = None
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            try:
                n = self._file.write(view[done:])
            except OSError as exc:
                if self.failure is not None:
                    raise  # the kept place failed too: nothing else to fall back on
                self._move(exc)
                continue
            done += n or 0
            self._written += n or 0
        return done

    def _move(self, exc: OSError) -> None:
        self.failure = exc
        kept = Path(tempfile.mkdtemp(prefix="ftlscope-kept-")) / self.asked.name
        with contextlib.suppress(OSError):
            self._file.close()
        with open(self.asked, "rb") as src, open(kept, "wb") as dst:
            shutil.copyfileobj(src, dst)  # the written bytes: the file is not longer than what we wrote
            dst.truncate(self._written)
        with contextlib.suppress(OSError):
            os.unlink(self.asked)  # a Parquet file without its footer is unreadable: leave none behind
        self.path = kept
        self._file = open(kept, "r+b", buffering=0)  # noqa: SIM115 - closed in close()
        self._file.seek(self._written)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._file.close()


@dataclass
class StreamedTrace:
    """Where a streamed trace went: ``path`` (the asked place, or its kept copy after ``failure``)."""

    asked: Path
    path: Path
    rows: int
    row_groups: int
    failure: OSError | None = None
    # A failure that left no readable file at all (the kept place failed too, or the writer broke).
    error: BaseException | None = None

    @property
    def kept_dir(self) -> Path | None:
        return self.path.parent if self.failure is not None and self.error is None else None

    def save_to(self, path: str | Path) -> Path:
        """Give the trace the name ``path``: it is there already, or is copied there (the kept directory
        collects every output when one of them failed). Raises the failure for its asked place."""
        path = Path(path)
        if self.error is not None:
            raise OSError(f"the trace could not be written: {self.error}")
        if path == self.asked and self.failure is not None:
            raise self.failure
        if path.absolute() == self.path.absolute():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.path, path)
        return path


class TraceWriter:
    """Drains a running ``RunHandle``'s trace chunks into ``path`` on its own thread."""

    def __init__(self, handle: Any, path: str | Path, optional: tuple[str, ...] = (),
                 metadata: dict[str, Any] | None = None) -> None:
        self._handle = handle
        self._optional = optional  # optional columns the run keeps (a replay's issue lag)
        self._metadata = metadata  # what the trace is, for its readers (a replay of a synthetic trace)
        self._asked = Path(path)
        self._asked.parent.mkdir(parents=True, exist_ok=True)
        self._rows = 0
        self._row_groups = 0
        self._sink: _FailoverFile | None = None
        self._error: BaseException | None = None
        # Not a daemon: an interpreter that exits mid-run still waits for the footer.
        self._thread = threading.Thread(target=self._write, name="ftlscope-trace-writer")

    def start(self) -> TraceWriter:
        from .heap import hold_mmap_threshold

        hold_mmap_threshold()  # chunks allocated and freed while the run goes: memory flat (see ftlscope.heap)
        self._thread.start()
        return self

    def _write(self) -> None:
        try:
            # pyarrow is imported here, on this thread, while the run goes (where pandas has not imported it
            # already): before the run it would delay the start, and a Ctrl-C then finds nothing to keep.
            import pyarrow.parquet as pq

            schema = trace_schema(self._optional, self._metadata)
            self._sink = _FailoverFile(self._asked)
            with pq.ParquetWriter(self._sink, schema, compression="zstd") as writer:
                while (chunk := self._handle.next_trace_chunk()) is not None:
                    table = chunk_table(chunk, schema)
                    if table.num_rows:
                        writer.write_table(table, row_group_size=table.num_rows)
                        self._rows += table.num_rows
                        self._row_groups += 1
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, which reports it in one line
            self._error = exc
            # The engine must not wait for a reader that is gone: it counts the records from here on instead.
            self._handle.close_trace_stream()
        finally:
            if self._sink is not None:
                self._sink.close()
                if self._error is not None:
                    with contextlib.suppress(OSError):
                        self._sink.path.unlink()  # no footer: unreadable, so not left to be mistaken for a trace

    def finish(self) -> StreamedTrace:
        """Wait for the writer (it ends after the run's last record) and say where the trace is."""
        if self._thread.ident is None:  # interrupted before it started: let the engine stop streaming
            self._handle.close_trace_stream()
            self._error = RuntimeError("the trace writer did not start")
        else:
            self._thread.join()
        sink = self._sink
        return StreamedTrace(asked=self._asked, path=sink.path if sink else self._asked, rows=self._rows,
                             row_groups=self._row_groups, failure=sink.failure if sink else None,
                             error=self._error)
