"""Readers for the public block-trace formats, each returning the normalised trace table (see ``schema``).

CSV formats go through pyarrow's streaming CSV reader (batches of a few MiB, so a large file never sits in memory
as text); every field is read as text first and checked with one vectorised pattern per column, so a malformed
field is reported with its file, line number and what was expected instead of a conversion error mid-file.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from .names import FORMATS
from .schema import METADATA_KEY, TraceError, build_frame

_INT = r"^\s*-?\d+\s*$"
_NUM = r"^\s*-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"
# Bytes of CSV text per batch. pyarrow's streaming reader reads about 32 blocks ahead of the parser, so the
# block size sets its peak memory: 1 MiB blocks hold 36-40 MiB whatever the file's length (4 MiB blocks held
# 161 MiB for a 207 MB MSR trace, measured).
_BLOCK = 1 << 20

# (column names, pattern per column, text naming what was expected) per CSV format.
_CSV = {
    "msr": (("Timestamp", "Hostname", "DiskNumber", "Type", "Offset", "Size", "ResponseTime"),
            (_INT, None, _INT, r"^(?i:read|write)$", _INT, _INT, _INT),
            "Timestamp,Hostname,DiskNumber,Type(Read|Write),Offset,Size,ResponseTime with integer times "
            "(100 ns ticks), disk number, offset and size (bytes)"),
    "alibaba": (("device_id", "opcode", "offset", "length", "timestamp"),
                (_INT, r"^(?i:r|w)$", _INT, _INT, _INT),
                "device_id,opcode(R|W),offset,length,timestamp with integer device id, offset, length (bytes) "
                "and timestamp (microseconds)"),
    "spc": (("ASU", "LBA", "Size", "Opcode", "Timestamp"),
            (_INT, _INT, _INT, r"^\s*(?i:r|w)\s*$", _NUM),
            "ASU,LBA,Size,Opcode(r|w),Timestamp with integer ASU, LBA (512 B sectors) and size (bytes) and the "
            "timestamp in seconds"),
}

# What a format records of who issued a request beyond the request itself, kept in the trace table as these
# columns (the format's own field after each), so `replay --queues N --split-by COLUMN` can give each host, disk,
# device, unit, CPU or process a queue of its own: the MSR Cambridge traces' README (Hostname, DiskNumber: the
# logical block device), the Alibaba block traces' schema (device_id: the virtual disk), the SPC trace file format
# specification (ASU: the application specific unit) and blkparse's default format (%D %2c ... %5p ..., the issue's
# device, CPU and pid; its "[process]" is the standard ``process`` column).
KEPT_COLUMNS = {
    "msr": {"hostname": "Hostname", "disk_number": "DiskNumber"},
    "alibaba": {"device_id": "device_id"},
    "spc": {"asu": "ASU"},
    "blkparse": {"device": "maj,min", "cpu": "cpu", "pid": "pid"},
}


def read_trace(path: str | Path, fmt: str | None = None, *, sort: bool = False) -> pd.DataFrame:
    """Read a trace file in any supported format (sniffed when ``fmt`` is None) into the normalised table."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file")
    fmt = fmt or sniff(path)
    if fmt not in FORMATS:
        raise TraceError(f"--format {fmt}: unknown trace format; use one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        return _read_parquet(path, sort)
    if fmt == "blkparse":
        from .blkparse import read_blkparse

        return read_blkparse(path)  # in arrival order: --sort changes nothing
    if fmt == "fio":
        return _read_fio(path, sort)
    return _read_csv(path, fmt, sort)


def sniff(path: Path) -> str:
    """The format, from the Parquet magic or the first non-empty text line."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if head[:4] == b"PAR1":
        return "parquet"
    lines = [ln.strip() for ln in head.decode("utf-8", "replace").splitlines() if ln.strip()]
    if not lines:
        raise TraceError(f"{path}: the trace is empty")
    first = lines[0]
    if re.match(r"^fio version [23] iolog", first):
        return "fio"
    if re.match(r"^\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s+\d+\s+[A-Za-z]+\s", first):
        return "blkparse"
    fields = [f.strip() for f in first.split(",")]
    lowered = [f.lower() for f in fields]
    if lowered[:7] == [c.lower() for c in _CSV["msr"][0]] or (len(fields) == 7 and lowered[3] in ("read", "write")):
        return "msr"
    if lowered[:5] == [c.lower() for c in _CSV["alibaba"][0]] or (len(fields) == 5 and fields[1] in ("R", "W")):
        return "alibaba"
    if lowered[:5] == [c.lower() for c in _CSV["spc"][0]] or (len(fields) >= 5 and lowered[3] in ("r", "w")):
        return "spc"
    raise TraceError(f"{path}: cannot tell the trace format from its first line {first[:60]!r}; "
                     f"give --format ({', '.join(FORMATS)})")


def _read_parquet(path: Path, sort: bool) -> pd.DataFrame:
    import json

    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        table = pf.read()
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file (truncated or damaged: {exc})") from None
    # Traces written before the column became offset_bytes (SQL-friendly) call it offset: read both.
    offset_column = "offset_bytes" if "offset_bytes" in table.column_names else "offset"
    missing = [c for c in ("op", offset_column, "size", "submit_ns") if c not in table.column_names]
    if missing:
        raise TraceError(f"{path}: Parquet trace lacks column(s) {', '.join(missing)}; ftlscope traces have "
                         "op, offset_bytes, size, submit_ns")
    frame = table.to_pandas()
    op = frame["op"]
    if pd.api.types.is_integer_dtype(op):
        from ..workload import OPS

        op = pd.Categorical.from_codes(op.astype(np.int8), categories=list(OPS))
    else:
        op = op.astype(str).to_numpy(dtype=object)
    meta = json.loads((table.schema.metadata or {}).get(METADATA_KEY, b"{}"))
    source = meta.pop("format", None)
    if source and source != "parquet":
        meta["converted_from"] = source
    # Columns beyond the standard ones (a capture's pid, queued_ns, rwbs, flags; a run's issue lag) come along.
    standard = {"op", offset_column, "size", "submit_ns", "complete_ns", "latency_ns", "process"}
    extra = {name: frame[name] for name in frame.columns if name not in standard}
    return build_frame(op, frame[offset_column], frame["size"], frame["submit_ns"], path=path, fmt="parquet",
                       complete_ns=frame["complete_ns"] if "complete_ns" in frame else None,
                       process=frame["process"] if "process" in frame else None, sort=sort, meta=meta,
                       extra=extra)


def _csv_batches(path: Path, fmt: str):
    """Yield (first line number, dict of text columns) per batch; a wrong field count is one error."""
    names, patterns, expected = _CSV[fmt]
    with open(path, "rb") as fh:
        first = fh.readline().decode("utf-8", "replace").strip()
        if first.lower().startswith(names[0].lower()):
            data = fh.readline().decode("utf-8", "replace").strip()
        else:
            data = first
    header = first.lower().startswith(names[0].lower())
    extra = data.count(",") + 1 - len(names)
    if fmt == "spc" and extra > 0:
        # Some SPC traces carry further optional fields after Timestamp; they are read and ignored.
        names = (*names, *(f"field{i}" for i in range(len(names) + 1, len(names) + 1 + extra)))
        patterns = (*patterns, *([None] * extra))
    bad: list[Any] = []

    def on_invalid(row):
        bad.append(row)
        return "error"

    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=list(names), skip_rows=1 if header else 0,
                                           block_size=_BLOCK),
            parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names}),
        )
    except pa.ArrowInvalid as exc:
        raise _field_count_error(path, bad, header, expected, exc) from None
    line = 2 if header else 1
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowInvalid as exc:
            raise _field_count_error(path, bad, header, expected, exc) from None
        for name, pattern in zip(names, patterns, strict=True):
            if pattern is None:
                continue
            ok = pc.match_substring_regex(batch.column(name), pattern)
            if not pc.all(ok).as_py():
                i = int(np.argmin(ok.to_numpy(zero_copy_only=False)))
                value = batch.column(name)[i].as_py()
                raise TraceError(f"{path}:{line + i}: {name} is {value!r}; expected {expected}")
        yield line, {n: batch.column(n) for n in names}
        line += batch.num_rows


def _field_count_error(path: Path, bad: list[Any], header: bool, expected: str, exc: Exception) -> TraceError:
    if bad:
        row = bad[0]
        number = row.number if row.number is not None else _first_line_with_fields_not(path, row.expected_columns)
        where = f"{path}:{number}" if number is not None else str(path)
        return TraceError(f"{where}: {row.actual_columns} fields where {row.expected_columns} were expected "
                          f"({expected})")
    return TraceError(f"{path}: not a readable CSV trace ({exc}); expected {expected}")


def _first_line_with_fields_not(path: Path, count: int) -> int | None:
    # pyarrow's streaming reader does not always know the row's line; on this error path alone, count fields
    # (these formats have no quoted commas).
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip() and line.count(",") + 1 != count:
                return number
    return None


def csv_requests(path: Path, fmt: str):
    """The requests of a CSV trace batch by batch, as pyarrow's streaming reader reads the text: (first line
    number, dict of raw columns: op names, offset, size, submit in the trace's own clock (ns), complete or None).
    Times are not yet made relative: :func:`ftlscope.traces.streamed.text_frames` and :func:`_read_csv` do that."""
    for line, cols in _csv_batches(path, fmt):
        yield line, _csv_columns(fmt, cols)


def _csv_columns(fmt: str, cols: dict[str, Any]) -> dict[str, Any]:
    def integer(name: str) -> np.ndarray:
        return pc.cast(pc.utf8_trim_whitespace(cols[name]), pa.int64()).to_numpy()

    if fmt == "msr":
        ticks = integer("Timestamp")
        # Windows filetime: 100 ns ticks; ResponseTime counts the same ticks.
        return {"op": pc.utf8_lower(cols["Type"]).to_numpy(zero_copy_only=False),
                "offset": pc.cast(cols["Offset"], pa.int64()).to_numpy(),
                "size": pc.cast(cols["Size"], pa.int64()).to_numpy(), "submit": ticks * 100,
                "complete": (ticks + pc.cast(cols["ResponseTime"], pa.int64()).to_numpy()) * 100,
                "hostname": pc.utf8_trim_whitespace(cols["Hostname"]).to_numpy(zero_copy_only=False),
                "disk_number": integer("DiskNumber")}
    if fmt == "alibaba":
        codes = pc.utf8_lower(cols["opcode"]).to_numpy(zero_copy_only=False)
        return {"op": np.where(codes == "r", "read", "write").astype(object),
                "offset": pc.cast(cols["offset"], pa.int64()).to_numpy(),
                "size": pc.cast(cols["length"], pa.int64()).to_numpy(),
                "submit": pc.cast(cols["timestamp"], pa.int64()).to_numpy() * 1_000,  # microseconds
                "complete": None, "device_id": integer("device_id")}
    codes = pc.utf8_lower(pc.utf8_trim_whitespace(cols["Opcode"])).to_numpy(zero_copy_only=False)  # spc
    seconds = pc.cast(pc.utf8_trim_whitespace(cols["Timestamp"]), pa.float64()).to_numpy()
    return {"op": np.where(codes == "r", "read", "write").astype(object),
            "offset": integer("LBA") * 512, "size": integer("Size"),
            "submit": np.rint(seconds * 1e9).astype(np.int64), "complete": None, "asu": integer("ASU")}


def _joined(path: Path, chunks) -> dict[str, np.ndarray]:
    """The columns of a text trace's chunks (``(line, columns)`` pairs) joined into one of each."""
    parts: dict[str, list[np.ndarray]] = defaultdict(list)
    for _, cols in chunks:
        for name, values in cols.items():
            if values is not None:
                parts[name].append(values)
    if not parts:
        raise TraceError(f"{path}: the trace holds no requests")
    return {k: np.concatenate(v) for k, v in parts.items()}


def _read_csv(path: Path, fmt: str, sort: bool) -> pd.DataFrame:
    cat = _joined(path, csv_requests(path, fmt))
    return build_frame(cat["op"], cat["offset"], cat["size"], cat["submit"], path=path, fmt=fmt,
                       complete_ns=cat.get("complete"), sort=sort, extra={k: cat[k] for k in KEPT_COLUMNS[fmt]})


_FIO_ACTIONS = {"read": "read", "write": "write", "trim": "trim", "sync": "flush", "datasync": "flush"}
_FIO_FILE_ACTIONS = ("add", "open", "close")


# Lines of an fio iolog per chunk read (pandas' C parser in chunks: the text never sits in memory whole).
FIO_CHUNK_LINES = 1 << 18


def fio_version(path: Path) -> int:
    with open(path, encoding="utf-8", errors="replace") as fh:
        header = fh.readline().strip()
    return 3 if header.startswith("fio version 3") else 2


def fio_requests(path: Path, chunk_lines: int | None = None):
    """The I/O lines of an fio iolog v2 (``file action [offset length]``, ``file wait usec``) or v3 (``usec file
    action ...``), chunk by chunk: (first line number, dict of raw columns: op names, offset, size, submit ns,
    complete None). A v2 log's 'wait' delays carry from chunk to chunk."""
    version = fio_version(path)
    names = (["t"] if version == 3 else []) + ["file", "action", "offset", "length"]
    waited = 0  # v2: microseconds of 'wait' lines so far
    first = 2  # blank lines aside, row i of the file after the header is line i + 2
    # pandas' C parser takes the ragged rows (file actions have fewer fields) and keeps the text as is.
    try:
        chunks = pd.read_csv(path, sep=r"\s+", header=None, names=names, skiprows=1, dtype=str, engine="c",
                             skip_blank_lines=True, on_bad_lines="error",
                             chunksize=chunk_lines or FIO_CHUNK_LINES)
        for table in chunks:
            table = table.reset_index(drop=True)
            cols, waited = _fio_columns(path, version, table, first, waited)
            yield first, cols
            first += len(table)
    except pd.errors.EmptyDataError:
        return
    except pd.errors.ParserError as exc:
        raise TraceError(f"{path}: {exc}; expected fio iolog v{version} lines") from None


def _fio_columns(path: Path, version: int, table: pd.DataFrame, first: int, waited: int) -> tuple[dict, int]:
    line = pd.Series(np.arange(len(table)) + first)
    action = table["action"].fillna("")
    known = action.isin(list(_FIO_ACTIONS) + list(_FIO_FILE_ACTIONS) + (["wait"] if version == 2 else []))
    if not known.all():
        i = int(np.argmin(known.to_numpy()))
        raise TraceError(f"{path}:{line[i]}: action {action[i]!r}; expected one of "
                         f"{', '.join(list(_FIO_ACTIONS) + list(_FIO_FILE_ACTIONS))}"
                         + (", wait" if version == 2 else ""))
    io = action.isin(list(_FIO_ACTIONS)).to_numpy()
    int_ok = table["offset"].fillna("").str.fullmatch(r"\d+") & table["length"].fillna("").str.fullmatch(r"\d+")
    need = io & ~action.isin(["sync", "datasync"]).to_numpy()
    bad = need & ~int_ok.to_numpy()
    if version == 3:
        bad |= ~table["t"].fillna("").str.fullmatch(r"\d+").to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        raise TraceError(f"{path}:{line[i]}: expected '{'usec ' if version == 3 else ''}file action offset "
                         "length' with integer fields")
    if version == 3:
        submit = table["t"].astype(np.int64).to_numpy() * 1_000  # fio writes microseconds since the start
    else:
        # v2 has no timestamps: 'wait' lines add a delay in microseconds, otherwise fio issues back to back.
        waits = np.where(action == "wait", pd.to_numeric(table["offset"], errors="coerce").fillna(0), 0)
        total = waited + np.cumsum(waits).astype(np.int64)
        submit = total * 1_000
        waited = int(total[-1]) if len(total) else waited
    sel = table[io]
    cols = {"op": sel["action"].map(_FIO_ACTIONS).to_numpy(dtype=object),
            "offset": pd.to_numeric(sel["offset"], errors="coerce").fillna(0).astype(np.int64).to_numpy(),
            "size": pd.to_numeric(sel["length"], errors="coerce").fillna(0).astype(np.int64).to_numpy(),
            "submit": submit[io], "complete": None}
    return cols, waited


def _read_fio(path: Path, sort: bool) -> pd.DataFrame:
    cat = _joined(path, fio_requests(path))
    return build_frame(cat["op"], cat["offset"], cat["size"], cat["submit"], path=path,
                       fmt=f"fio-v{fio_version(path)}", sort=sort)
