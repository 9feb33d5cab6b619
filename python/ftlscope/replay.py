"""`ftlscope replay TARGET TRACE`: a recorded block trace, replayed through the engine on any target.

The trace is read by :func:`ftlscope.traces.read_trace` (every supported format) and handed to the engine as
columns (arrival time, operation, offset, length), so the replay itself runs in Rust, in the same loop and with
the same per-request timing as ``ftlscope run``; its outputs are run's (``--json``, ``--trace``, ``--windows``)
plus each request's issue lag: how much later than its schedule it was submitted.

Timing: ``faithful`` issues each request at its recorded time, ``scaled:F`` divides the recorded times by F,
``afap`` issues as fast as ``--qd`` allows. Mode: ``open`` (the default for faithful and scaled) holds each
request to its due time whatever is in flight, so an overloaded replay shows as issue lag; ``closed`` (afap's
only mode) keeps the recorded gap after the previous request's issue, waits for a free slot, and treats a flush
as a sync point (it waits for what came before; what follows waits for it).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import RunError, UsageError
from .metrics import SYNTHETIC_TRACE
from .traces.names import FORMATS

if TYPE_CHECKING:
    from .newt.align import Alignment
    from .newt.shim import ShimSettings

MAX_QD = 65536
# --split-by's rule that needs no column: request k of the replayed trace goes to queue k mod N.
ROUND_ROBIN = "round-robin"
# Requests per batch of a streamed replay (pyarrow record batches; about 3 MiB of columns each, a few in flight:
# 64 Ki rows peak 40 MiB lower than 256 Ki, and run no slower).
STREAM_BATCH_ROWS = 1 << 16
# Offsets are int64 while the trace is prepared: a shift stays well inside, so no sum can overflow.
MAX_SHIFT = 1 << 62
# The engine adds due times to clock readings, and keeps them below 2^62 ns (146 years) too.
MAX_SPAN_NS = 1 << 62


def add_trace_replay_flags(g: Any) -> None:
    """The flags that say how a trace is read and issued, shared by ``replay`` and ``newt`` (which replays it
    twice): one declaration, so the two commands cannot drift apart in names, defaults or help."""
    g.add_argument("--format", choices=FORMATS, help="the trace's format (default: sniffed from its start)")
    g.add_argument("--sort", action="store_true",
                   help="order the requests by arrival time (for a trace whose timestamps go backwards); "
                        "ftlscope's own run traces, written in completion order, are ordered by submission anyway")
    g.add_argument("--timing", default="faithful",
                   help="faithful (each request at its recorded time; default), scaled:F (recorded times / F, "
                        "e.g. scaled:2 twice as fast), afap (as fast as --qd allows)")
    g.add_argument("--mode", choices=("open", "closed"),
                   help="open: each request is due at its recorded time whatever is in flight (default for "
                        "faithful and scaled); closed: due its recorded gap after the previous issue, with a free "
                        "slot, flushes as sync points (afap is always closed)")
    g.add_argument("--qd", type=int, default=32,
                   help="requests in flight at most (default 32); an open-loop request that finds them all busy "
                        "goes late, and its issue lag says so")
    g.add_argument("--wrap", action="store_true",
                   help="fold offsets beyond the target into it (modulo its size; a request that would then cross "
                        "the end starts at byte 0) instead of refusing the trace")
    g.add_argument("--size", help="for a regular file that does not exist: create it this large")


def add_replay_parser(sub: Any) -> None:
    from .cli import _add_run_flags, add_output_flags, add_shim_flags

    p = sub.add_parser("replay", help="replay a block trace (any format 'trace info' reads) on a target, timed "
                                      "request by request as 'run'")
    p.add_argument("target", help="block device, regular file (created with --size), or sim:PRESET")
    p.add_argument("trace", help="trace file: ftlscope Parquet (run --trace, capture), blkparse text, MSR "
                                 "Cambridge CSV, Alibaba CSV, fio iolog v2/v3, SNIA/UMass SPC CSV")
    g = p.add_argument_group("replay")
    add_trace_replay_flags(g)
    g.add_argument("--reads-only", action="store_true",
                   help="leave out everything but reads (a trace with writes then needs no --destructive)")
    g.add_argument("--queues", type=int, default=1,
                   help="split the trace over this many queues, each its own thread and ring as in run (default 1); "
                        "each request keeps its recorded arrival time, --qd applies per queue")
    g.add_argument("--split-by", default=ROUND_ROBIN, metavar="round-robin|COLUMN",
                   help="how --queues splits the trace: round-robin (request k to queue k mod N, in arrival order; "
                        "default) or a column of the trace (each value's requests on one queue, values dealt to the "
                        "queues in order of first appearance): process, pid, cpu, device (blkparse, captures), "
                        "hostname, disk_number (MSR Cambridge), device_id (Alibaba), asu (SPC)")
    g.add_argument("--offset-shift", default="0", metavar="B",
                   help="add B bytes to every offset (negative moves down), before the bounds check")
    g.add_argument("--align-reads", metavar="auto|SIZE",
                   help="round each read's offset down and size up to whole pages, past the read sizes the drive "
                        "penalises: auto (P1 and P6 of --from-profile RUN) or a page SIZE (e.g. 4k); writes untouched")
    g.add_argument("--data", default="random", help="written data: zeros, ones, 0xaa, lba, random (default)")
    g.add_argument("--no-precondition", action="store_true",
                   help="on a simulated drive, read as it is: by default a trace with reads first has the range "
                        "it touches written once, since never-written pages are answered without touching flash")
    _add_run_flags(p)
    add_shim_flags(p)
    o = add_output_flags(p, "output (as run)",
                         json_help="write the summary JSON here (run's shape, plus 'replay' and run.issue_lag_ns)",
                         trace_help="write the per-request trace (Parquet) here, with an issue_lag_ns column",
                         trace_dest="trace_out")
    o.add_argument("--report", metavar="DIR",
                   help="write a report here (report.html, self-contained, and report.md with figures/): the "
                        "conditions, latency per operation, IOPS and latency over time, issue lag, and the trace's "
                        "own statistics (as 'trace info')")
    p.set_defaults(func=cmd_replay)


def parse_timing(text: str) -> str:
    """``faithful``, ``afap`` or ``scaled:F`` with F a positive number, as the engine takes it."""
    if text in ("faithful", "afap"):
        return text
    if text.startswith("scaled:"):
        try:
            factor = float(text.removeprefix("scaled:"))
        except ValueError:
            factor = float("nan")
        if factor > 0 and factor != float("inf"):
            return f"scaled:{factor!r}"
    raise UsageError(f"--timing: '{text}' is not a timing; use faithful, afap or scaled:F with F above 0 "
                     "(e.g. scaled:2 replays twice as fast)")


def parse_shift(text: str) -> int:
    """``--offset-shift``: bytes, with fio's size units, negative to move down (``-4k``)."""
    from .units import parse_fio_size

    text = text.strip()
    negative = text.startswith("-")
    value = parse_fio_size(text.removeprefix("-"), "--offset-shift", maximum=MAX_SHIFT)
    return -value if negative else value


def check_queues(qd: int, queues: int) -> None:
    from .workload import MAX_QUEUES

    if not 1 <= qd <= MAX_QD:
        raise UsageError(f"--qd: {qd} is out of range; give 1 to {MAX_QD}")
    if not 1 <= queues <= MAX_QUEUES:
        raise UsageError(f"--queues: {queues} is out of range; give 1 to {MAX_QUEUES}")


def replay_mode(timing: str, mode: str | None) -> str:
    if timing == "afap":
        if mode == "open":
            raise UsageError("--mode open: afap issues each request as soon as a slot is free, which is a closed "
                             "loop; use --timing faithful or scaled:F for an open-loop replay")
        return "closed"
    return mode or "open"


def _target_geometry(target: str, size: int | None, direct: bool, device: Any) -> tuple[int, int]:
    """(size in bytes, I/O alignment) of the target, found without writing anything (a file still to be created
    is taken as 512 B aligned under O_DIRECT; the engine checks the exact alignment before the first request)."""
    import json
    import stat

    from . import _native
    from .errors import TargetError
    from .runner import stat_target

    if device is not None:
        info = device.info
        return info["size_bytes"], info["logical_block_size"]
    st = stat_target(target)
    if st is None:
        if size is None:
            raise UsageError(f"--size: {target} does not exist; give --size to create it (e.g. --size 1GiB)")
        return size, 512 if direct else 1
    if not (stat.S_ISBLK(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise TargetError(f"{target} is neither a block device nor a regular file")
    try:
        info = json.loads(_native.target_info(target, False, direct))
    except _native.TargetOpenError as exc:
        raise TargetError(str(exc)) from None
    grown = size if size is not None and stat.S_ISREG(st.st_mode) else info["size_bytes"]
    return grown, info["logical_block_size"]


def requests(frame, *, reads_only: bool, offset_shift: int, wrap: bool, target_size: int, alignment: int,
             flag_target: str, queues: int = 1, split_by: str = ROUND_ROBIN,
             align: Alignment | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The trace's requests as the engine's columns, and what was done to them (left out, shifted, folded).
    Refuses (UsageError) requests beyond the target unless ``wrap``, and requests not aligned to the target.
    With ``queues`` > 1 the columns carry each request's queue (``queue``, u16) by ``split_by``
    (:func:`split_queues`), and the notes how many requests each queue has (``queue_requests``)."""
    import numpy as np

    key = None if queues == 1 or split_by == ROUND_ROBIN else split_column(frame, split_by)
    columns, notes = batch_requests(frame["op"].cat.codes.to_numpy(), frame["offset_bytes"].to_numpy(),
                                    frame["size"].to_numpy(), frame["submit_ns"].to_numpy(), first_row=0,
                                    reads_only=reads_only, offset_shift=offset_shift, wrap=wrap,
                                    target_size=target_size, alignment=alignment, flag_target=flag_target, key=key,
                                    align=align)
    notes = finish_notes(notes, flag_target)
    if queues > 1:
        queue = split_queues(columns.pop("key", None), notes["requests"], queues)
        columns["queue"] = queue.astype("<u2").tobytes()
        notes["queue_requests"] = [int(n) for n in np.bincount(queue, minlength=queues)]
    return columns, notes


def split_column(frame, split_by: str):
    """The column ``--split-by`` names (as the trace table calls it, or as its format does: DiskNumber for
    disk_number, any case), refused (UsageError) when the trace has none of that name."""
    column = find_column(frame.columns, split_by)
    if column is None:
        have = ", ".join(c for c in frame.columns if c not in ("op", "offset_bytes", "size", "submit_ns"))
        raise UsageError(f"--split-by: the trace has no column '{split_by}' (its other columns: {have or 'none'}); "
                         f"use {ROUND_ROBIN} or one of those")
    return frame[column].to_numpy(dtype=object)


def find_column(names, split_by: str) -> str | None:
    """The column of ``names`` that ``--split-by`` names: exactly, else in any case and without underscores."""
    def plain(name: str) -> str:
        return name.lower().replace("_", "")

    return next((c for c in names if c == split_by), None) or next(
        (c for c in names if plain(c) == plain(split_by)), None)


def split_queues(key, requests: int, queues: int):
    """Each replayed request's queue: request k to queue k mod ``queues`` (no ``key``), or each distinct key
    value (missing ones one value) to queue v mod ``queues``, values numbered in order of first appearance."""
    import numpy as np

    if key is None:
        return np.arange(requests, dtype=np.int64) % queues
    import pandas as pd

    codes, _ = pd.factorize(pd.Series(key, dtype=object), use_na_sentinel=False)
    return codes.astype(np.int64) % queues


def batch_requests(op, offset, size, arrival, *, first_row: int, reads_only: bool, offset_shift: int, wrap: bool,
                   target_size: int, alignment: int, flag_target: str, key=None,
                   align: Alignment | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """One batch of a trace (columns: op codes, offsets, sizes, arrival ns; its first request is number
    ``first_row + 1`` of the trace) as the engine's columns, and its notes (:func:`merge_notes` adds batches
    up; :func:`finish_notes` checks the sum). A ``key`` column (one value a row) comes back as ``columns["key"]``,
    for the requests kept. ``align`` (``--align-reads``) aligns the batch's reads first, before the shift and
    the bounds check, as the whole trace was aligned before it was replayed; the notes' ``aligned`` says what
    it did (:class:`ftlscope.newt.align.AlignStats`)."""
    import numpy as np

    from .workload import OPS

    aligned = None
    if align is not None:
        from .newt.align import align_columns

        offset, size, aligned = align_columns(op, offset, size, align, first_row)
    op = np.asarray(op).astype(np.uint8)
    offset = np.asarray(offset).astype(np.int64)
    size = np.asarray(size).astype(np.int64)
    arrival = np.asarray(arrival).astype(np.uint64)
    rows = len(op)
    ranged = op != OPS.index("flush")
    keep = np.ones(rows, dtype=bool)
    left_out: dict[str, int] = {}
    if reads_only:
        keep &= op == OPS.index("read")
        for code, name in enumerate(OPS):
            n = int(((op == code) & ~keep).sum())
            if n:
                left_out[f"{name} (--reads-only)"] = n
    # A read or write of 0 bytes moves nothing: the engine has no such request (a flush's 0 is its nature).
    empty = keep & ranged & (size == 0)
    if empty.any():
        left_out["zero-length requests"] = int(empty.sum())
        keep &= ~empty
    all_arrivals = (int(arrival[0]), int(arrival[-1])) if rows else None
    kept = None
    if not keep.all():  # (copies of the columns only when something is left out)
        kept = np.flatnonzero(keep)
        op, offset, size, arrival, ranged = op[keep], offset[keep], size[keep], arrival[keep], ranged[keep]
        if key is not None:
            key = key[keep]

    def number(i: int) -> int:
        """Request i's number in the trace as read (1-based), whatever was left out before it."""
        return first_row + (int(kept[i]) if kept is not None else i) + 1

    offset = np.where(ranged, offset + offset_shift, 0)
    size = np.where(ranged, size, 0)  # a flush moves no data, whatever length a trace gives it
    if (offset < 0).any():
        i = int(np.argmax(offset < 0))
        raise UsageError(f"--offset-shift: {offset_shift} moves request {number(i)} below byte 0 ({offset[i]}); give a "
                         "smaller shift")
    if (size > target_size).any():
        i = int(np.argmax(size > target_size))
        raise UsageError(f"{flag_target}: request {number(i)} is {size[i]:,} B, larger than the {target_size:,} B "
                         "target; replay it on a larger target")
    beyond = ranged & (offset + size > target_size)
    folded = 0
    if beyond.any():
        if not wrap:
            i = int(np.argmax(beyond))
            raise UsageError(f"{flag_target}: request {number(i)} ends at byte {offset[i] + size[i]:,}, beyond the "
                             f"{target_size:,} B target; pass --wrap to fold offsets into the target, or "
                             "--offset-shift to move them")
        folded = int(beyond.sum())
        offset = np.where(beyond, offset % target_size, offset)
        offset = np.where(ranged & (offset + size > target_size), 0, offset)
    if alignment > 1:
        bad = ranged & ((offset % alignment != 0) | (size % alignment != 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise UsageError(f"{flag_target}: request {number(i)} ({size[i]:,} B at byte {offset[i]:,}) is not aligned "
                             f"to the target's {alignment} B block size (O_DIRECT); pass --buffered for a file")
    columns = {
        "arrival": arrival.astype("<u8").tobytes(), "op": op.tobytes(), "offset": offset.astype("<u8").tobytes(),
        "size": size.astype("<u4").tobytes(),
    }
    if key is not None:
        columns["key"] = key
    notes = {"left_out": left_out, "wrapped": folded, "requests": int(len(op)), "rows": rows,
             "ops": {name: int((op == code).sum()) for code, name in enumerate(OPS) if (op == code).any()},
             "max_size": int(size.max()) if len(size) else 0,
             "extent": _extent(offset[ranged], size[ranged]) if ranged.any() else None,
             "arrivals": (int(arrival[0]), int(arrival[-1])) if len(arrival) else None,
             "all_arrivals": all_arrivals, "aligned": aligned}
    return columns, notes


def merge_notes(total: dict[str, Any] | None, part: dict[str, Any]) -> dict[str, Any]:
    """The notes of two consecutive batches as one (counts added, extents and spans joined)."""
    if total is None:
        return part

    def joined(a, b):
        return b if a is None else a if b is None else (min(a[0], b[0]), max(a[1], b[1]))

    left_out = dict(total["left_out"])
    for what, n in part["left_out"].items():
        left_out[what] = left_out.get(what, 0) + n
    ops = dict(total["ops"])
    for name, n in part["ops"].items():
        ops[name] = ops.get(name, 0) + n
    return {"left_out": left_out, "wrapped": total["wrapped"] + part["wrapped"],
            "requests": total["requests"] + part["requests"], "rows": total["rows"] + part["rows"], "ops": ops,
            "max_size": max(total["max_size"], part["max_size"]), "extent": joined(total["extent"], part["extent"]),
            "arrivals": joined(total["arrivals"], part["arrivals"]),
            "all_arrivals": joined(total["all_arrivals"], part["all_arrivals"]),
            "aligned": part["aligned"].plus(total["aligned"]) if part["aligned"] is not None else total["aligned"]}


def finish_notes(notes: dict[str, Any], flag_target: str) -> dict[str, Any]:
    """Refuse a trace with nothing left to replay; the span of what is replayed and the extent it touches."""
    if notes["requests"] == 0:
        raise UsageError(f"{flag_target}: nothing to replay: every request of the trace was left out "
                         f"({', '.join(f'{v:,} {k}' for k, v in notes['left_out'].items())})")
    first, last = notes["arrivals"]
    return {**notes, "extent": notes["extent"] or (0, 0), "span_ns": last - first}


def _extent(offset, size) -> tuple[int, int]:
    if len(offset) == 0:
        return 0, 0
    start = int(offset.min()) // 4096 * 4096
    return start, -(-int((offset + size).max()) // 4096) * 4096


def replay_workload(notes: dict[str, Any], *, qd: int, data: str, target_size: int, queues: int = 1):
    """The workload that carries a replay: its mix (which operations the trace has: the engine opens the target
    for writing and the safety checks apply by it), a buffer size for the largest request, the queues and queue
    depth, and the range the trace touches (what a simulated drive's preconditioning writes)."""
    from .workload import Workload

    start, end = notes["extent"]
    block = max(4096, -(-notes["max_size"] // 4096) * 4096)
    end = min(end, target_size)
    if end > start and queues > 1 and end - start < queues * block <= target_size - start:
        # A workload's range holds a request per queue at least; a trace on a smaller extent preconditions a
        # little more.
        end = start + queues * block
    rng = {"start": start, "length": end - start} if end > start else {"start": 0, "length": 0}
    return Workload(mix=dict.fromkeys(notes["ops"], 1), sizes=[block], pattern={"kind": "sequential"},
                    range=rng, queue_depth=qd, queues=queues, stop={"ops": notes["requests"]},
                    data="lba_stamped" if data == "lba" else data)


def replay_title(summary: dict[str, Any], target: str) -> str:
    from .cli import _precondition_text

    r, run_info = summary["replay"], summary["run"]
    label = " (SYNTHETIC: generated, not captured)" if r["synthetic"] else ""
    queues = r.get("queues", 1)
    depth = f"{queues} queues ({r['split_by']}) x QD {r['queue_depth']}" if queues > 1 else f"QD {r['queue_depth']}"
    return (f"{target} — replay of {r['trace']}{label}: {r['requests']:,} requests, {r['timing']}, {r['mode']} loop, "
            f"{depth}, {summary['env']['engine']['backend']}, {run_info['measured_ns'] / 1e9:.3g} s "
            f"measured{_precondition_text(run_info)}")


def _read(args: argparse.Namespace) -> tuple[Any, bool]:
    """The trace as replay takes it, and whether it is sorted by arrival (asked, or a run trace). A Parquet trace,
    a CSV trace, an fio iolog or blkparse output stays a path, replayed while it is read in batches (flat memory;
    ``--align-reads`` aligns each batch as it is read, ``--report`` reads the trace's statistics in batches too,
    and newt streams each of its two passes). (A replay split over several queues streams too: see
    :mod:`.replay_split`.)"""
    from .traces import read_trace, sniff
    from .traces.streamed import STREAMED_FORMATS

    sort = args.sort
    path = Path(args.trace)
    fmt = (args.format or sniff(path)) if path.is_file() else args.format
    parquet = fmt == "parquet"
    if parquet and not sort:
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(path).names
        except Exception:  # noqa: BLE001 - the reader itself words a damaged file's error
            names = []
        # ftlscope's own run traces are written in completion order: replay orders them by submission.
        sort = {"queue", "status"} <= set(names)
    if parquet or fmt in STREAMED_FORMATS:
        return path, sort
    return read_trace(path, fmt, sort=sort), sort


def _check_outputs(args: argparse.Namespace) -> None:
    from .cli_checks import check_output_dir, check_run_outputs

    trace = Path(args.trace).resolve()
    for flag, output in (("--trace", args.trace_out), ("--json", args.json), ("--windows", args.windows)):
        # The trace is read again while the replay runs (streamed): an output written over it would replace
        # what is being replayed (a test that did so replayed 0 requests about one time in twelve).
        if output and Path(output).resolve() == trace:
            raise UsageError(f"{flag} {output}: is the trace being replayed; write it to another file")
    check_run_outputs(args, args.trace_out)
    for flag, directory in (("--plots", args.plots), ("--report", args.report)):
        if directory:
            check_output_dir(directory, flag)


def replay(target: Any, frame, *, timing: str = "faithful", mode: str | None = None, qd: int = 32,
           reads_only: bool = False, offset_shift: int = 0, wrap: bool = False, data: str = "random",
           trace_name: str = "TRACE", notify: Any = None, sort: bool = False,
           rate_limit_writes: ShimSettings | None = None, fmt: str | None = None, queues: int = 1,
           split_by: str = ROUND_ROBIN, spill_dir: str | Path | None = None, align_reads: Alignment | None = None,
           **run_kwargs: Any):
    """Replay a trace on ``target`` (a path, ``sim:PRESET`` or a :class:`SimDevice`) and return run's
    :class:`RunResult`, with ``summary["replay"]`` and the issue lag in ``summary["run"]["issue_lag_ns"]``.

    ``frame`` is a trace table (:func:`ftlscope.traces.read_trace`'s), or the path of a trace in Parquet or a
    text format (CSV, fio iolog, blkparse; ``fmt``, sniffed when None): that one is checked in a first pass and
    replayed while it is read again in batches, so memory stays flat whatever its length (``sort`` orders it by
    arrival as it streams; one too disordered for that is read whole).
    ``run_kwargs`` go to :func:`ftlscope.run` (engine, destructive, size, precondition, trace, progress, ...);
    ``notify(text)`` hears what was left out or folded. ``rate_limit_writes``
    (:meth:`ftlscope.newt.shim.ShimSettings.resolve`) runs the write rate-limiting shim in the engine.
    ``queues`` > 1 splits the trace over that many queues by ``split_by`` (round-robin in arrival order, or a
    column of the trace such as ``process``): each request keeps its due time, and the queues share one start.
    A trace file replayed on several queues is first split into a spill file per queue (in a temporary
    directory in ``spill_dir``, default the system's, removed after), each queue then fed from its own
    (:mod:`ftlscope.replay_split`)."""
    from .sim import SimDevice

    timing = parse_timing(timing)
    mode = replay_mode(timing, mode)
    check_queues(qd, queues)
    device = target if isinstance(target, SimDevice) else None
    if device is None and target.startswith("sim:"):
        device = SimDevice.open(target)
    size = run_kwargs.get("size")
    if isinstance(size, str):  # as run takes it ("64GiB"); the CLI hands an int
        from .units import parse_size

        size = parse_size(size, "--size")
    target_size, alignment = _target_geometry(target, size, run_kwargs.get("direct", True), device)
    prepare = {"reads_only": reads_only, "offset_shift": offset_shift, "wrap": wrap, "target_size": target_size,
               "alignment": alignment, "flag_target": trace_name, "align": align_reads}
    streamed = spilled = None
    if isinstance(frame, (str, Path)):
        from .replay_split import NeedsWhole, spill_pass
        from .traces import read_trace, sniff
        from .traces.batched import trace_meta
        from .traces.streamed import STREAMED_FORMATS
        from .traces.window import Unsorted

        fmt = fmt or sniff(Path(frame))
        if fmt != "parquet" and fmt not in STREAMED_FORMATS:
            frame = read_trace(frame, fmt, sort=sort)
        else:
            try:
                if queues > 1:
                    notes, spilled = spill_pass(frame, fmt, sort, prepare, queues,
                                                None if split_by == ROUND_ROBIN else split_by, spill_dir,
                                                STREAM_BATCH_ROWS)
                else:
                    notes = _first_pass(frame, fmt, sort, prepare)
                streamed = frame
                meta = trace_meta(frame, fmt)
            except (Unsorted, NeedsWhole) as exc:
                # Too disordered for the sort window (read whole and sorted), or a split column to derive.
                frame = read_trace(frame, fmt, sort=sort or isinstance(exc, Unsorted))
    columns = None
    if streamed is None:
        columns, notes = requests(frame, **prepare, queues=queues, split_by=split_by)
        meta = frame.attrs.get("ftlscope", {})
    if notify and queues > 1 and 0 in notes["queue_requests"]:
        idle = notes["queue_requests"].count(0)
        notify(f"{idle} of {queues} queues have no requests (--split-by {split_by}: the trace has fewer "
               "distinct values than queues)")
    try:
        return _replay_prepared(device or target, columns, notes, meta, streamed, spilled, timing=timing, mode=mode,
                                qd=qd, data=data, target_size=target_size, queues=queues, notify=notify,
                                trace_name=trace_name, rate_limit_writes=rate_limit_writes, fmt=fmt, sort=sort,
                                prepare=prepare, offset_shift=offset_shift, split_by=split_by, run_kwargs=run_kwargs)
    finally:
        if spilled is not None:
            spilled.remove()


def _replay_prepared(target: Any, columns: dict[str, Any] | None, notes: dict[str, Any], meta: dict[str, Any],
                     streamed: str | Path | None, spilled: Any, *,
                     timing: str, mode: str, qd: int, data: str, target_size: int, queues: int, notify: Any,
                     trace_name: str, rate_limit_writes: ShimSettings | None, fmt: str | None, sort: bool,
                     prepare: dict[str, Any], offset_shift: int, split_by: str, run_kwargs: dict[str, Any]):
    """:func:`replay` once the trace is checked (``notes``; ``columns`` a whole trace's, or ``streamed`` the path
    of one read while it replays, ``spilled`` when split over queues): the run, and the summary's ``replay``."""
    factor = float(timing.removeprefix("scaled:")) if timing.startswith("scaled:") else 1.0
    if timing != "afap" and notes["span_ns"] / factor >= MAX_SPAN_NS:
        # The engine refuses it too, but only once it starts: a file target would have been created by then.
        raise UsageError(f"--timing {timing}: the replay would last {notes['span_ns'] / factor / 1e9:.3e} s; give "
                         "scaled:F with a larger F")
    workload = replay_workload(notes, qd=qd, data=data, target_size=target_size, queues=queues)
    for what, n in notes["left_out"].items():
        if notify:
            notify(f"left out {n:,} {what}")
    if notes["wrapped"] and notify:
        notify(f"folded {notes['wrapped']:,} requests beyond the target into it (--wrap)")
    aligned = meta.get("aligned_reads")
    if notes.get("aligned") is not None:
        aligned = {**prepare["align"].to_json(), **notes["aligned"].to_json()}
        if notify:
            notify(f"--align-reads: {notes['aligned'].describe()}")
    # The replay's own trace says what was replayed: a synthetic trace's label and recipe carry over, so every
    # reader of the measured trace (trace info, a report) still calls it synthetic.
    labels = {**{k: v for k, v in meta.items() if k not in ("format", "converted_from")},
              "synthetic": bool(meta.get("synthetic")),
              "replay_of": {"trace": trace_name, "format": meta.get("converted_from") or meta.get("format")}}
    engine_replay = {"timing": timing, "mode": mode, "feed": None, "queues": queues}
    run_kwargs = {**run_kwargs, "rate_limit_writes": rate_limit_writes}
    if columns is not None:
        result = _run_replay(target, workload, {**columns, **engine_replay}, labels, run_kwargs)
    else:
        result = _run_streamed(target, workload, engine_replay, labels, run_kwargs, streamed, fmt, sort,
                               prepare, notes, spilled)
    # The time-window table too (a CSV has no metadata): one column, the same on every row.
    result.windows[SYNTHETIC_TRACE] = labels["synthetic"]
    first, last = notes["all_arrivals"]
    result.summary["replay"] = {
        "trace": trace_name, "format": meta.get("format"), "synthetic": bool(meta.get("synthetic")),
        "timing": timing, "mode": mode, "queue_depth": qd, "trace_requests": notes["rows"],
        "requests": notes["requests"], "left_out": notes["left_out"], "wrapped": notes["wrapped"],
        "offset_shift": offset_shift, "trace_span_ns": last - first, "streamed": streamed is not None,
        "issue_lag_ns": result.summary["run"].get("issue_lag_ns"), "aligned_reads": aligned,
        "queues": queues, "split_by": split_by if queues > 1 else None,
        "queue_requests": notes.get("queue_requests", [notes["requests"]]),
    }
    return result


def _run_replay(target: Any, workload, engine_replay: dict[str, Any], labels: dict[str, Any],
                run_kwargs: dict[str, Any]):
    from .runner import run

    return run(target, workload, label="replaying", replay=engine_replay, trace_metadata=labels, **run_kwargs)


def _first_pass(path: str | Path, fmt: str, sort: bool, prepare: dict[str, Any]) -> dict[str, Any]:
    """A streamed trace's notes, every request checked as a whole trace's are (nothing is kept)."""
    from .traces.batched import trace_batches

    notes, row = None, 0
    for op, offset, size, submit, *_ in trace_batches(path, fmt, sort=sort, extra=(), batch_rows=STREAM_BATCH_ROWS):
        _, part = batch_requests(op, offset, size, submit, first_row=row, **prepare)
        notes = merge_notes(notes, part)
        row += len(op)
    return finish_notes(notes, prepare["flag_target"])


def _run_streamed(target: Any, workload, engine_replay: dict[str, Any], labels: dict[str, Any],
                  run_kwargs: dict[str, Any], path: str | Path, fmt: str, sort: bool, prepare: dict[str, Any],
                  notes: dict[str, Any], spilled: Any = None):
    """Replay ``path`` while a thread reads it again batch by batch and pushes each into the engine's feed; a
    trace split over queues (``spilled``: :func:`ftlscope.replay_split.spill_pass`) is fed from its spill files
    instead, a thread per queue."""
    import numpy as np

    from . import _native
    from .replay_split import feed_queues, queue_batch_rows, start_feeder
    from .traces.batched import trace_batches
    from .workload import OPS

    codes = bytes(OPS.index(name) for name in notes["ops"])
    queue_requests = notes.get("queue_requests", [notes["requests"]])
    origin = notes["arrivals"][0] if spilled is not None else None
    feed = _native.ReplayFeed(queue_requests, notes["max_size"], codes, prepare["target_size"],
                              prepare["alignment"], engine_replay["timing"], engine_replay["mode"], origin)

    def batches():
        row = 0
        for op, offset, size, submit, *_ in trace_batches(path, fmt, sort=sort, extra=(),
                                                          batch_rows=STREAM_BATCH_ROWS):
            columns, _ = batch_requests(op, offset, size, np.asarray(submit), first_row=row, **prepare)
            row += len(op)
            yield columns["arrival"], columns["op"], columns["offset"], columns["size"], len(op)

    if spilled is None:
        failures: list[str] = []
        feeders = [start_feeder(feed, batches(), 0, failures, "ftlscope-replay-feed",
                                lambda pushed, exc: f"the trace could not be read on after request {pushed:,} "
                                                    f"({exc}); the replay ended there")]
    else:
        feeders, failures = feed_queues(feed, spilled, queue_batch_rows(STREAM_BATCH_ROWS, len(queue_requests)))
    try:
        empty = dict.fromkeys(("arrival", "op", "offset", "size"), b"")  # the feed takes their place
        result = _run_replay(target, workload, {**engine_replay, **empty, "feed": feed}, labels, run_kwargs)
    finally:
        feed.abandon()  # a run that never started leaves the feeders waiting for room: let them go
        for feeder in feeders:
            feeder.join()
    result.notices.extend(failures)
    return result


def _write_plots(result, directory: str) -> str:
    from .report.replay_page import SYNTHETIC_NOTE, _window_ns
    from .run_plots import HISTOGRAM_BINS, write_run_plots
    from .trace_figures import gather, trace_source

    note = SYNTHETIC_NOTE if result.summary["replay"]["synthetic"] else ""
    figures = gather(trace_source(result), list(result.ops), _window_ns(result), HISTOGRAM_BINS)
    paths = write_run_plots(result, directory, note=note, figures=figures)
    return f"{directory}/ ({', '.join(p.name for p in paths)})"


def _write_report(result, target: str, directory: str, args: argparse.Namespace, sort: bool) -> str:
    from .report.replay_page import render_replay_report
    from .traces.cli import info_stats_and_gaps

    # The trace's statistics as `trace info` gives them for this file (a Parquet trace in batches), so the
    # page and `trace info` show the same numbers.
    stats, gaps = info_stats_and_gaps(str(args.trace), args.format, sort)
    try:
        render_replay_report(result, target, directory, stats, gaps)
    except OSError as exc:
        raise RunError(f"--report: cannot write {directory} ({exc.strerror or exc}); give another directory "
                       "(the other outputs are written)") from None
    return f"{Path(directory) / 'report.html'}"


def _beside_outputs(args: argparse.Namespace) -> Path | None:
    """Where a replay split over queues spills its trace: beside the first output asked for (a place the user
    chose to write to, so likely to have room, and not a RAM-backed /tmp), else the system's temporary directory."""
    for output in (args.trace_out, args.json, args.windows, args.report, args.plots):
        if output:
            return Path(output).absolute().parent
    return None


def cmd_replay(args: argparse.Namespace) -> int:
    from .cli import _run_kwargs, err_console, shim_settings
    from .newt.align import alignment_for_replay

    # The flags first: a wrong one is refused before the trace is read.
    replay_mode(parse_timing(args.timing), args.mode)
    check_queues(args.qd, args.queues)
    if args.data == "verify":
        raise UsageError("--data verify: a replay reads nothing back to check; use zeros, ones, 0xaa, lba or random "
                         "(run --verify checks a target)")
    shift = parse_shift(args.offset_shift)
    shim = shim_settings(args)
    _check_outputs(args)
    align = alignment_for_replay(args, notify=lambda text: err_console.print(f"[dim]ftlscope: {text}[/dim]"))
    frame, sort = _read(args)  # sort: as the trace was read, so the report's statistics read it the same way
    # The figures and the report read every request's latency back from the replay's own trace, streamed to a
    # file while it runs (--trace, else a temporary one beside the outputs): nothing is held per request.
    scratch = _scratch_trace(args) if (args.plots or args.report) and not args.trace_out else None
    try:
        result = replay(args.target, frame, sort=sort, fmt=args.format, timing=args.timing, mode=args.mode,
                        qd=args.qd, reads_only=args.reads_only, offset_shift=shift, wrap=args.wrap, data=args.data,
                        trace_name=str(args.trace),
                        notify=lambda text: err_console.print(f"[dim]ftlscope: {text}[/dim]"),
                        trace_file=args.trace_out or (scratch / "replay.parquet" if scratch else None),
                        progress=not args.quiet, precondition=not args.no_precondition, show_serial=args.show_serial,
                        rate_limit_writes=shim, queues=args.queues, split_by=args.split_by,
                        spill_dir=_beside_outputs(args), align_reads=align, **_run_kwargs(args))
        return _finish_replay(args, result, sort)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _scratch_trace(args: argparse.Namespace) -> Path:
    """A temporary directory for the replay's own trace when only the figures need it: beside the outputs (a
    place the user chose to write to; not a RAM-backed /tmp), else the system's."""
    import tempfile

    parent = _beside_outputs(args)
    try:
        if parent is not None:
            parent.mkdir(parents=True, exist_ok=True)  # the outputs go there too
        return Path(tempfile.mkdtemp(prefix=".ftlscope-replay-trace-", dir=parent))
    except OSError as exc:
        raise RunError(f"--report/--plots: cannot make a directory for the replay's trace in "
                       f"{parent or tempfile.gettempdir()} ({exc.strerror or exc}); give outputs in a writable "
                       "directory, or set TMPDIR") from None


def _finish_replay(args: argparse.Namespace, result, sort: bool) -> int:
    """The outputs and the printed tables of a finished replay."""
    from .cli import console, end_of_run, err_console, print_shim, summary_tables
    from .units import format_ns

    for notice in result.notices:
        err_console.print(f"[dim]ftlscope: {notice}[/dim]")
    from .cli_checks import save_run_outputs

    saved = save_run_outputs(result, json=args.json, trace=args.trace_out, windows=args.windows, plots=args.plots,
                             plots_writer=lambda directory: _write_plots(result, directory))
    unsaved = None
    if args.report:
        try:
            saved.append(_write_report(result, args.target, args.report, args, sort))
        except RunError as exc:  # shown after the table, as run does: what was measured is printed either way
            unsaved = exc
    for table in summary_tables(result.summary, replay_title(result.summary, args.target), console.width):
        console.print(table)
    lag = result.summary["run"].get("issue_lag_ns") or {}
    if lag:
        console.print(f"issue lag: p50 {format_ns(lag['p50'])}, p99 {format_ns(lag['p99'])}, "
                      f"max {format_ns(lag['max'])}")
    print_shim(result.summary)
    return end_of_run(result, saved, unsaved)
