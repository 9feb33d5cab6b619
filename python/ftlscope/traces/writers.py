"""Write a trace as fio iolog v3 (so `fio --read_iolog` replays it) or as ftlscope's Parquet."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .schema import TraceError, write_parquet

# fio has no write-zeroes action; a zeroing write is a write of the same range. A flush is fio's 'sync'.
_FIO_ACTION = {"read": "read", "write": "write", "trim": "trim", "write_zeroes": "write", "flush": "sync"}


def write_fio_iolog(frame: pd.DataFrame, out: str | Path, filename: str = "target") -> Path:
    """fio iolog v3: ``usec file action offset length``; fio's timestamps are microseconds since the start
    (fio's own write_iolog writes utime_since_now), so sub-microsecond arrival detail is rounded down."""
    if any(c.isspace() for c in filename):
        raise TraceError(f"--fio-file {filename!r}: fio iologs split on spaces; use a name without spaces")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    usec = frame["submit_ns"].to_numpy(dtype=np.int64) // 1_000
    body = pd.DataFrame({
        "t": usec,
        "file": filename,
        "action": frame["op"].astype(str).map(_FIO_ACTION),
        "offset": frame["offset_bytes"].to_numpy(dtype=np.int64),
        "length": frame["size"].to_numpy(dtype=np.int64),
    })
    with open(out, "w") as fh:
        fh.write(f"fio version 3 iolog\n0 {filename} add\n0 {filename} open\n")
        # fio parses 'sync' like a read: with an offset and a length, which it ignores (0 0 here).
        body.loc[body["action"] == "sync", ["offset", "length"]] = 0
        body.to_csv(fh, sep=" ", header=False, index=False, lineterminator="\n")
        fh.write(f"{int(usec[-1])} {filename} close\n")
    return out


def convert(frame: pd.DataFrame, to: str, out: str | Path, fio_file: str = "target") -> Path:
    if to == "fio":
        return write_fio_iolog(frame, out, fio_file)
    if to == "parquet":
        return write_parquet(frame, out)
    raise TraceError(f"--to {to}: unknown output format; use fio or parquet")
