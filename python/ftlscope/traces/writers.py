"""Write a trace as fio iolog v3 (so `fio --read_iolog` replays it) or as ftlscope's Parquet."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from .schema import TraceError, parquet_table

# fio has no write-zeroes action; a zeroing write is a write of the same range. A flush is fio's 'sync'.
_FIO_ACTION = {"read": "read", "write": "write", "trim": "trim", "write_zeroes": "write", "flush": "sync"}


def _fio_body(frame: pd.DataFrame, filename: str) -> pd.DataFrame:
    body = pd.DataFrame({
        "t": frame["submit_ns"].to_numpy(dtype=np.int64) // 1_000,
        "file": filename,
        "action": frame["op"].astype(str).map(_FIO_ACTION),
        "offset": frame["offset_bytes"].to_numpy(dtype=np.int64),
        "length": frame["size"].to_numpy(dtype=np.int64),
    })
    # fio parses 'sync' like a read: with an offset and a length, which it ignores (0 0 here).
    body.loc[body["action"] == "sync", ["offset", "length"]] = 0
    return body


def _check_fio_file(filename: str) -> None:
    if any(c.isspace() for c in filename):
        raise TraceError(f"--fio-file {filename!r}: fio iologs split on spaces; use a name without spaces")


def write_fio_iolog(frame: pd.DataFrame, out: str | Path, filename: str = "target") -> Path:
    """fio iolog v3: ``usec file action offset length``; fio's timestamps are microseconds since the start
    (fio's own write_iolog writes utime_since_now), so sub-microsecond arrival detail is rounded down."""
    return _write_fio_frames([frame], Path(out), filename)[0]


def _write_fio_frames(frames: Iterable[pd.DataFrame], out: Path, filename: str) -> tuple[Path, int]:
    _check_fio_file(filename)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows, last = 0, 0
    with open(out, "w") as fh:
        fh.write(f"fio version 3 iolog\n0 {filename} add\n0 {filename} open\n")
        for frame in frames:
            body = _fio_body(frame, filename)
            body.to_csv(fh, sep=" ", header=False, index=False, lineterminator="\n")
            rows += len(body)
            last = int(body["t"].iloc[-1]) if len(body) else last
        fh.write(f"{last} {filename} close\n")
    return out, rows


def _write_parquet_frames(frames: Iterable[pd.DataFrame], out: Path) -> tuple[Path, int]:
    """:func:`ftlscope.traces.schema.write_parquet` of the frames as one trace, a row group per frame (the
    trace's metadata from the first)."""
    import pyarrow.parquet as pq

    out.parent.mkdir(parents=True, exist_ok=True)
    writer, rows = None, 0
    try:
        for frame in frames:
            table = parquet_table(frame)
            if writer is None:
                schema = table.schema
                writer = pq.ParquetWriter(out, schema, compression="zstd")
            writer.write_table(table.replace_schema_metadata(schema.metadata))
            rows += len(frame)
    finally:
        if writer is not None:
            writer.close()
    return out, rows


def convert(frame: pd.DataFrame, to: str, out: str | Path, fio_file: str = "target") -> Path:
    """The trace ``frame`` written as ``to`` (fio or parquet), as :func:`convert_frames` writes a batched one."""
    return convert_frames([frame], to, out, fio_file)[0]


def convert_frames(frames: Iterable[pd.DataFrame], to: str, out: str | Path,
                   fio_file: str = "target") -> tuple[Path, int]:
    """:func:`convert` of a trace that comes in batches (:func:`ftlscope.traces.streamed.text_frames`): written
    as it is read, into a file beside ``out`` that takes its name only once the whole trace is read, so a bad
    line late in the trace leaves nothing written. Returns the file and the requests written."""
    if to not in ("fio", "parquet"):
        raise TraceError(f"--to {to}: unknown output format; use fio or parquet")
    if to == "fio":
        _check_fio_file(fio_file)
    out = Path(out)
    partial = out.with_name(f".{out.name}.partial")
    try:
        if to == "fio":
            _, rows = _write_fio_frames(frames, partial, fio_file)
        else:
            _, rows = _write_parquet_frames(frames, partial)
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return out, rows
