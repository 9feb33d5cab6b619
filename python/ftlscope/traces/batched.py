"""``trace info`` of a Parquet trace in record batches (pyarrow ``iter_batches``): flat memory whatever its length.

The statistics are those of :func:`ftlscope.traces.stats.trace_stats` on the whole table, merged batch by batch:

- exact: request count, duration, bytes, the operation mix, the size histogram, mean size, sequential share (the
  previous request's end per operation is carried across batches), offset range, the mean and coefficient of
  variation of inter-arrival times and latencies (Chan et al.'s pairwise merge of count, mean and squared
  deviations: exact up to float rounding), and the working set, from one bitmap per operation over the 4 KiB
  blocks up to the highest one touched (1 bit a block: 32 MiB per TiB of address range, not per request);
- within 0.1 %: the p50 and p99 of inter-arrival times and latencies, read from a histogram of 1024 buckets per
  power of two (exact below 2048 ns, where every integer has its own bucket). A percentile needs every value
  or a second pass; the whole-table path (``trace_stats``) gives them exactly.

``--sort`` orders requests by arrival as they stream: a batch is merged with what is held back, sorted (stably,
as the whole-table sort), and all but the last batch's worth of rows go on. Traces whose disorder spans less than
a batch (a ``run --trace`` at any queue depth, which lists requests as they complete) come out in exactly the
order a whole sort gives; a trace more out of order than that is read whole instead (``Unsorted``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..metrics import SUBMIT_SEQ
from ..workload import OPS
from .schema import METADATA_KEY, TraceError
from .stats import BLOCK, _size_label
from .window import SortWindow

# Requests per batch: 256 Ki, about 10 MiB of columns; --sort holds back one batch more.
BATCH_ROWS = 1 << 18
# Blocks expanded at once for the working set (a 1 MiB request is 256 of them): bounds that step's memory.
_BLOCKS_PER_STEP = 1 << 23
_MANTISSA_BITS = 10  # histogram buckets per power of two: 2**10, so a bucket is at most 0.1 % wide
BUCKETS = 1 << 17  # more than any non-negative int64 value's bucket index


class _Moments:
    """Count, mean and summed squared deviations, merged batch by batch (Chan, Golub and LeVeque's update)."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, values: np.ndarray) -> None:
        if len(values) == 0:
            return
        n, mean = len(values), float(values.mean())
        m2 = float(((values - mean) ** 2).sum())
        total = self.n + n
        delta = mean - self.mean
        self.mean += delta * n / total
        self.m2 += m2 + delta * delta * self.n * n / total
        self.n = total


def bucket_index(values: np.ndarray) -> np.ndarray:
    """Each non-negative value's log-linear bucket: the float64's exponent and top :data:`_MANTISSA_BITS` mantissa
    bits. Bucket 0 holds values below 1 (0 ns); above, the exponent without its bias, so ns up to 2**63 need
    64 Ki buckets (below :data:`BUCKETS`) whatever the count."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(values >= 1, (values.view(np.int64) >> (52 - _MANTISSA_BITS)) - (1023 << _MANTISSA_BITS) + 1, 0)


def bucketed_percentile(counts: np.ndarray, sums: np.ndarray, q: float, n: int) -> float:
    """numpy's default (linear) percentile ``q`` of ``n`` values kept as buckets in ascending order (``counts``
    and ``sums`` per bucket; empty buckets allowed): each value taken as its bucket's mean."""
    position = q / 100 * (n - 1)
    low, frac = int(np.floor(position)), position - np.floor(position)
    cumulative = np.cumsum(counts)

    def value(rank: int) -> float:
        b = int(np.searchsorted(cumulative, rank, side="right"))
        return float(sums[b] / counts[b])

    a = value(low)
    return a if frac == 0 else a + (value(min(low + 1, n - 1)) - a) * frac


class Quantiles:
    """Non-negative values in log-linear buckets (:func:`bucket_index`). Each bucket keeps its count and sum, so a
    percentile is its bucket's mean value (the value itself when the bucket holds one), within 0.1 % of it."""

    def __init__(self) -> None:
        self.counts = np.zeros(0, dtype=np.int64)
        self.sums = np.zeros(0, dtype=np.float64)

    def add(self, values: np.ndarray) -> None:
        if len(values) == 0:
            return
        values = values.astype(np.float64)
        bucket = bucket_index(values)
        size = int(bucket.max()) + 1
        if size > len(self.counts):
            self.counts = np.pad(self.counts, (0, size - len(self.counts)))
            self.sums = np.pad(self.sums, (0, size - len(self.sums)))
        self.counts[:size] += np.bincount(bucket, minlength=size)
        self.sums[:size] += np.bincount(bucket, weights=values, minlength=size)

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def percentile(self, q: float, n: int) -> float:
        """numpy's default (linear) percentile over the bucketed values."""
        return bucketed_percentile(self.counts, self.sums, q, n)

    def cdf(self) -> tuple[np.ndarray, np.ndarray]:
        """(each non-empty bucket's mean value, the share of values at or below its bucket in %): the points a
        CDF figure steps through, each within 0.1 % of the values it stands for."""
        held = np.flatnonzero(self.counts)
        if not len(held):
            return np.zeros(0), np.zeros(0)
        counts = self.counts[held]
        return self.sums[held] / counts, np.cumsum(counts) / counts.sum() * 100


class _Distribution:
    def __init__(self) -> None:
        self.moments, self.quantiles = _Moments(), Quantiles()

    def add(self, values: np.ndarray) -> None:
        values = values.astype(np.float64)
        self.moments.add(values)
        self.quantiles.add(values)

    def result(self) -> dict[str, float]:
        m = self.moments
        if m.n == 0:
            return {"n": 0}
        std = float(np.sqrt(m.m2 / m.n))  # numpy's std: the population one (ddof 0), as trace_stats uses
        return {"n": m.n, "mean": m.mean, "p50": self.quantiles.percentile(50, m.n),
                "p99": self.quantiles.percentile(99, m.n), "cv": std / m.mean if m.mean > 0 else float("nan")}


class _BlockBitmap:
    """The distinct 4 KiB blocks requests touch, one bit each, from block 0 to the highest touched."""

    def __init__(self) -> None:
        self.bits = np.zeros(0, dtype=np.uint8)

    def add(self, offset: np.ndarray, size: np.ndarray) -> None:
        keep = size > 0
        first = offset[keep] // BLOCK
        count = (offset[keep] + size[keep] - 1) // BLOCK - first + 1
        if len(first) == 0:
            return
        # Expand requests to their blocks a slice at a time (stats.working_set_blocks' repeat/arange trick).
        ends = np.cumsum(count)
        start = 0
        while start < len(first):
            stop = max(int(np.searchsorted(ends, ends[start] - count[start] + _BLOCKS_PER_STEP, side="right")),
                       start + 1)
            f, c = first[start:stop], count[start:stop]
            blocks = np.repeat(f, c) + (np.arange(c.sum()) - np.repeat(np.cumsum(c) - c, c))
            # Sorted, not made unique: OR-ing a bit twice is harmless, and numpy 2's hash-based np.unique is
            # many times slower than a sort here (see stats.working_set_blocks).
            self._set(np.sort(blocks))
            start = stop

    def _set(self, blocks: np.ndarray) -> None:
        need = int(blocks[-1] >> 3) + 1
        if need > len(self.bits):
            self.bits = np.pad(self.bits, (0, max(need, 2 * len(self.bits)) - len(self.bits)))
        byte = blocks >> 3
        masks = (np.uint8(1) << (blocks & 7).astype(np.uint8)).astype(np.uint8)
        # Sorted blocks: OR together the bits that share a byte, then set each byte once.
        starts = np.flatnonzero(np.r_[True, byte[1:] != byte[:-1]])
        self.bits[byte[starts]] |= np.bitwise_or.reduceat(masks, starts)

    def blocks(self) -> int:
        return int(np.bitwise_count(self.bits).sum())


def _op_codes(column: pa.Array, path: Path, row: int) -> np.ndarray:
    """The op column as indexes into OPS, whether stored as a category, text or ftlscope's codes."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if pa.types.is_integer(column.type):
        codes = column.to_numpy(zero_copy_only=False).astype(np.int64)
        bad = (codes < 0) | (codes >= len(OPS))
        if bad.any():
            i = int(np.argmax(bad))
            raise TraceError(f"{path}: request {row + i + 1} has operation code {codes[i]}; expected 0 to "
                             f"{len(OPS) - 1}")
        return codes
    codes = pc.index_in(column.cast(pa.string()), value_set=pa.array(list(OPS))).to_numpy(zero_copy_only=False)
    unknown = np.isnan(codes) if codes.dtype.kind == "f" else np.zeros(len(codes), dtype=bool)
    if unknown.any():
        i = int(np.argmax(unknown))
        raise TraceError(f"{path}: request {row + i + 1} has operation {column[i].as_py()!r}; "
                         f"expected one of {', '.join(OPS)}")
    return codes.astype(np.int64)


class _Stats:
    """The running statistics of one trace (see the module's docstring for what is exact)."""

    def __init__(self, latency: bool) -> None:
        self.requests = 0
        self.first_submit: int | None = None
        self.last_submit = 0
        self.bytes = 0
        self.per_op = np.zeros((len(OPS), 2), dtype=np.int64)  # requests, bytes
        self.size_exps = np.zeros(64, dtype=np.int64)
        self.zero_sizes = 0
        self.sequential = 0
        self.prev_end = np.full(len(OPS), -1, dtype=np.int64)  # -1: no request of that op yet
        self.interarrival = _Distribution()
        self.latency = _Distribution() if latency else None
        self.working = {op: _BlockBitmap() for op in ("read", "write")}
        self.offset_min, self.end_max = None, None
        # Traces that name the issuing process (captures, blkparse): requests, bytes, reads, writes per name.
        self.processes: pd.DataFrame | None = None

    def add(self, op: np.ndarray, offset: np.ndarray, size: np.ndarray, submit: np.ndarray,
            latency: np.ndarray, process: np.ndarray | None = None) -> None:
        if len(op) == 0:
            return
        if process is not None:
            counts = pd.DataFrame({"requests": 1, "bytes": size, "reads": op == OPS.index("read"),
                                   "writes": op == OPS.index("write")}).groupby(
                pd.Series(process, dtype="string").fillna("(unknown)").to_numpy(), sort=False).sum()
            self.processes = counts if self.processes is None else self.processes.add(counts, fill_value=0)
        n = len(op)
        if self.first_submit is None:
            self.first_submit = int(submit[0])
        else:
            self.interarrival.add(np.array([submit[0] - self.last_submit]))
        self.interarrival.add(np.diff(submit))
        self.last_submit = int(submit[-1])
        self.requests += n
        self.bytes += int(size.sum())
        np.add.at(self.per_op, (op, 0), 1)
        np.add.at(self.per_op, (op, 1), size)
        pos = size > 0
        self.zero_sizes += int((~pos).sum())
        exps = np.ceil(np.log2(size[pos])).astype(np.int64)
        self.size_exps += np.bincount(exps, minlength=64)[:64]
        end = offset + size
        # The previous request of the same op: within the batch by a stable sort on op, else the carried end.
        order = np.argsort(op, kind="stable")
        sorted_op, sorted_end = op[order], end[order]
        prev = np.empty(n, dtype=np.int64)
        prev[1:] = sorted_end[:-1]
        first_of_op = np.r_[True, sorted_op[1:] != sorted_op[:-1]]
        prev[first_of_op] = self.prev_end[sorted_op[first_of_op]]
        self.sequential += int(((offset[order] == prev) & (prev >= 0)).sum())
        last_of_op = np.r_[sorted_op[1:] != sorted_op[:-1], True]
        self.prev_end[sorted_op[last_of_op]] = sorted_end[last_of_op]
        for name, bitmap in self.working.items():
            sel = op == OPS.index(name)
            bitmap.add(offset[sel], size[sel])
        low, high = int(offset.min()), int(end.max())
        self.offset_min = low if self.offset_min is None else min(self.offset_min, low)
        self.end_max = high if self.end_max is None else max(self.end_max, high)
        if self.latency is not None:
            self.latency.add(latency[~np.isnan(latency)])

    def result(self, meta: dict[str, Any]) -> dict[str, Any]:
        mix = {op: {"requests": int(self.per_op[i, 0]), "share": float(self.per_op[i, 0] / self.requests),
                    "bytes": int(self.per_op[i, 1])} for i, op in enumerate(OPS) if self.per_op[i, 0]}
        bins = [{"bin": "0 B", "le_bytes": 0, "count": self.zero_sizes}] if self.zero_sizes else []
        bins += [{"bin": f"<= {_size_label(e)}", "le_bytes": 1 << e, "count": int(c)}
                 for e, c in enumerate(self.size_exps) if c]
        stats: dict[str, Any] = {
            "format": meta.get("format"),
            "synthetic": bool(meta.get("synthetic", False)),
            "requests": self.requests,
            "duration_s": float(self.last_submit - self.first_submit) / 1e9,
            "bytes": self.bytes,
            "mix": mix,
            "size_histogram": bins,
            "mean_size_bytes": self.bytes / self.requests,
            "sequential_share": self.sequential / self.requests,
            "interarrival_ns": self.interarrival.result(),
            "working_set_bytes": {op: bitmap.blocks() * BLOCK for op, bitmap in self.working.items()},
            "offset_range": {"min_bytes": self.offset_min, "max_end_bytes": self.end_max},
        }
        if self.latency is not None:
            stats["latency_ns"] = self.latency.result()
        if meta.get("synthetic"):
            stats["workload"] = {k: v for k, v in meta.items() if k not in ("format", "synthetic")}
        if self.processes is not None:
            table = self.processes.sort_values(["requests", "bytes"], ascending=False, kind="stable")
            stats["processes"] = [{"process": str(name), "requests": int(row.requests),
                                   "share": float(row.requests / self.requests), "bytes": int(row.bytes),
                                   "reads": int(row.reads), "writes": int(row.writes)}
                                  for name, row in table.iterrows()]
        if "capture" in meta:
            stats["capture"] = meta["capture"]
        return stats


def _columns(batch: pa.RecordBatch, offset_column: str, path: Path, row: int) -> tuple[np.ndarray, ...]:
    """(op codes, offset, size, submit_ns, latency_ns[, process]) of one batch, checked as ``build_frame`` checks
    them; the process where the trace names it."""
    names = batch.schema.names

    def ints(name: str) -> np.ndarray:
        return batch.column(names.index(name)).to_numpy(zero_copy_only=False).astype(np.int64)

    op = _op_codes(batch.column(names.index("op")), path, row)
    offset, size, submit = ints(offset_column), ints("size"), ints("submit_ns")
    for values, what, rule in ((size, "size", "sizes must be >= 0 bytes"), (offset, "offset", "offsets must be >= 0")):
        if (values < 0).any():
            i = int(np.argmax(values < 0))
            raise TraceError(f"{path}: request {row + i + 1} has a negative {what} ({values[i]}); {rule}")
    # Latency per request, NaN where the format has no completion (row-aligned, so --sort moves it along).
    latency = np.full(len(submit), np.nan)
    if "complete_ns" in names:
        complete = batch.column(names.index("complete_ns"))
        done = complete.is_valid().to_numpy(zero_copy_only=False)
        latency[done] = (complete.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)[done]
                         - submit[done])
    if "process" in names:
        process = batch.column(names.index("process")).to_numpy(zero_copy_only=False)
        return op, offset, size, submit, latency, process
    return op, offset, size, submit, latency


def parquet_meta(path: str | Path) -> tuple[Any, str, dict[str, Any]]:
    """(the open ``ParquetFile``, its offset column's name, what the trace is as ``read_trace`` puts it in
    ``frame.attrs["ftlscope"]``); a damaged file or one without the trace's columns is one TraceError."""
    path = Path(path)
    try:
        # pre_buffer (pyarrow's default) keeps every column chunk read so far until the file is closed:
        # memory growing with the trace, which batches are here to avoid.
        pf = pq.ParquetFile(path, pre_buffer=False)
        names = pf.schema_arrow.names
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file (truncated or damaged: {exc})") from None
    offset_column = "offset_bytes" if "offset_bytes" in names else "offset"
    missing = [c for c in ("op", offset_column, "size", "submit_ns") if c not in names]
    if missing:
        raise TraceError(f"{path}: Parquet trace lacks column(s) {', '.join(missing)}; ftlscope traces have "
                         "op, offset_bytes, size, submit_ns")
    meta = json.loads((pf.schema_arrow.metadata or {}).get(METADATA_KEY, b"{}"))
    source = meta.pop("format", None)
    if source and source != "parquet":
        meta["converted_from"] = source
    return pf, offset_column, {"format": "parquet", "synthetic": False, **meta}


def parquet_batches(path: str | Path, *, sort: bool = False, batch_rows: int = BATCH_ROWS,
                    extra: tuple[str, ...] = ("complete_ns", "process"), key: str | None = None):
    """The trace's requests batch by batch, checked as ``read_trace`` checks them: tuples (op codes, offset,
    size, submit_ns, latency_ns[, process]) of numpy arrays, in arrival order with ``sort`` (else a timestamp
    going backwards is one TraceError), a run trace's requests of one nanosecond in its ``submit_seq`` order.
    ``extra=()`` reads only the four columns a replay needs (the latency is then NaN). Raises :class:`Unsorted`
    when ``sort`` cannot be done in its sliding window (read the trace whole then), and TraceError for an empty
    trace (after the last batch). ``key``, a column of the file, comes last in each tuple, as objects (a replay
    split over queues by it)."""
    from ..heap import hold_mmap_threshold

    hold_mmap_threshold()  # batches allocated and freed one after another: memory flat (see ftlscope.heap)
    path = Path(path)
    pf, offset_column, _ = parquet_meta(path)
    names = pf.schema_arrow.names
    wanted = ["op", offset_column, "size", "submit_ns"] + [c for c in extra if c in names]
    if key is not None and key not in wanted:
        wanted.append(key)
    # A run trace's submission order: ordered by with the other columns, left out of what is yielded.
    in_order = SUBMIT_SEQ in names
    if in_order and SUBMIT_SEQ not in wanted:
        wanted.append(SUBMIT_SEQ)
    window = SortWindow(path)
    last_submit: int | None = None
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=batch_rows, columns=wanted):
            cols = _columns(batch, offset_column, path, row)
            if key is not None:
                cols = (*cols, batch.column(batch.schema.names.index(key)).to_pandas().to_numpy(dtype=object))
            submit = cols[3]
            seq = (batch.column(batch.schema.names.index(SUBMIT_SEQ)).to_numpy(zero_copy_only=False)
                   .astype(np.uint64) if in_order else np.arange(row, row + len(submit), dtype=np.uint64))
            row += batch.num_rows
            if not len(submit):
                continue
            if not sort:
                last_submit = check_forward(path, submit, last_submit, row - len(submit))
                if not in_order:
                    yield cols
                    continue
                # Ties in a run trace: the last nanosecond's requests wait, the next batch may hold more of it.
                ready = window.push(cols, submit, seq, before=(int(submit[-1]), 0))
            else:  # rows (file order) break ties without a sequence; a batch's worth waits for earlier arrivals
                ready = window.push(cols, submit, seq, hold=batch_rows)
            if ready is not None:
                yield ready
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file (truncated or damaged: {exc})") from None
    rest = window.rest()
    if rest is not None:
        yield rest
    if row == 0:
        raise TraceError(f"{path}: the trace holds no requests")


def check_forward(path: Path, submit: np.ndarray, last_submit: int | None, first_row: int) -> int:
    """The last arrival of a batch (not empty) of a trace read without --sort; TraceError naming the request (its
    number in the trace: the batch's first is ``first_row + 1``) where a timestamp goes backwards, against the
    batch before (``last_submit``) too."""
    back = np.flatnonzero(np.diff(np.r_[submit[:1] if last_submit is None else last_submit, submit]) < 0)
    if len(back):
        i = int(back[0])
        before = submit[i - 1] if i else last_submit
        raise TraceError(f"{path}: timestamps go backwards at request {first_row + i + 1} ({submit[i]} ns after "
                         f"{before} ns); pass --sort to order the requests by arrival time")
    return int(submit[-1])


def parquet_trace_stats(path: str | Path, *, sort: bool = False, batch_rows: int = BATCH_ROWS) -> dict[str, Any]:
    """``trace_stats(read_trace(path, "parquet", sort=sort))``, read in batches of ``batch_rows`` requests.
    Raises :class:`Unsorted` when ``sort`` cannot be done in its sliding window (read the trace whole then)."""
    return batched_stats_and_gaps(path, "parquet", sort=sort, batch_rows=batch_rows)[0]


def trace_batches(path: str | Path, fmt: str, *, sort: bool = False, batch_rows: int = BATCH_ROWS,
                  extra: tuple[str, ...] = ("complete_ns", "process")):
    """:func:`parquet_batches` for a trace of any format read in batches: Parquet, or a text format of
    :data:`ftlscope.traces.streamed.STREAMED_FORMATS`."""
    if fmt == "parquet":
        return parquet_batches(path, sort=sort, batch_rows=batch_rows, extra=extra)
    from .streamed import text_batches

    return text_batches(path, fmt, sort=sort, batch_rows=batch_rows, extra=extra)


def trace_meta(path: str | Path, fmt: str) -> dict[str, Any]:
    """What the trace is, as ``read_trace`` puts it in ``frame.attrs["ftlscope"]``, without reading it."""
    if fmt == "parquet":
        return parquet_meta(path)[2]
    from .streamed import format_name

    return {"format": format_name(Path(path), fmt), "synthetic": False}


def batched_trace_stats(path: str | Path, fmt: str, *, sort: bool = False,
                        batch_rows: int = BATCH_ROWS) -> dict[str, Any]:
    """``trace_stats(read_trace(path, fmt, sort=sort))`` read in batches (see the module's docstring for what is
    exact). Raises :class:`Unsorted` when ``sort`` cannot be done in its sliding window (read the trace whole
    then)."""
    return batched_stats_and_gaps(path, fmt, sort=sort, batch_rows=batch_rows)[0]


def batched_stats_and_gaps(path: str | Path, fmt: str, *, sort: bool = False,
                           batch_rows: int = BATCH_ROWS) -> tuple[dict[str, Any], Quantiles]:
    """:func:`batched_trace_stats`, and the inter-arrival times it read in their buckets (the replay report's
    inter-arrival CDF, drawn without holding the trace)."""
    if fmt == "parquet":
        pf, _, meta = parquet_meta(path)
        stats = _Stats(latency="complete_ns" in pf.schema_arrow.names)
        for cols in parquet_batches(path, sort=sort, batch_rows=batch_rows):
            stats.add(*cols)
        return stats.result(meta), stats.interarrival.quantiles
    stats = _Stats(latency=fmt in ("msr", "blkparse"))  # the text formats that record completions
    for cols in trace_batches(path, fmt, sort=sort, batch_rows=batch_rows):
        stats.add(*cols)
    result = stats.result(trace_meta(path, fmt))
    if fmt == "blkparse" and not result["latency_ns"]["n"]:
        del result["latency_ns"]  # no C event at all: the whole read has no latency column
    return result, stats.interarrival.quantiles
