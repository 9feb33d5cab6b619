"""blkparse's default text output (``blkparse -i ...``) read a chunk of lines at a time.

A request is a D (issue) event; its arrival is the matching Q (same device and start sector, first in first
out), else the D time; its completion the matching C. A bio merged into a queued request (an M or F event after
its Q) is no request: its Q is dropped, so it cannot lend its arrival to a later request at that sector. Only
the requests in flight (queued, issued and not yet completed) are kept between chunks; each finished request
goes out with its arrival and its place in issue order (``seq``), and :func:`ftlscope.traces.streamed.text_frames`
orders them by arrival in its sliding window, never past the earliest request still in flight.

The lines are parsed by pyarrow's compute kernels (one regular expression over a chunk: blkparse's last field
changes meaning by event, "[process]" on Q/D, "[error]" on C, and the output ends in a per-CPU summary, so no CSV
reader fits); only the Q, D, C and merge events go through the pairing loop, which is Python (first-in-first-out
matching by key with state carried across chunks has no vectorised form in numpy or pandas).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .schema import TraceError, build_frame

# Text per chunk: about 12,000 lines of blkparse output.
CHUNK_BYTES = 1 << 20

_EXPECTED = "'maj,min cpu seq sec.nsec pid action rwbs sector + nsectors [process]' (blkparse default format)"
_LINE = (r"^\s*(?P<dev>\d+,\d+)\s+(?P<cpu>\d+)\s+\d+\s+(?P<sec>\d+)\.(?P<frac>\d{1,9})\s+(?P<pid>\d+)\s+"
         r"(?P<action>[A-Za-z]+)\s+"
         r"(?P<rwbs>[A-Z]*)\s*(?P<rest>.*)$")
_IO = r"^(?P<sector>\d+)\s+\+\s+(?P<nsect>\d+)(?:\s+\[(?P<process>.*)\])?"
# The events read: queue, issue, completion, and back and front merges of a bio into a queued request.
_WANTED = r"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d{1,9}\s+\d+\s+[QDCMF]\s"
_PASSTHROUGH = r"^(\d+\s+)?\("  # "bytes (cdb) [process]": no sector range to replay
_SUMMARY = ("CPU", "Total", "Throughput", "Events", "Skips", " Reads", " Writes")  # blkparse's closing summary
# (op, rwbs letter) by precedence: a discard that writes is a trim.
_RWBS_OPS = (("trim", "D"), ("write", "W"), ("read", "R"), ("flush", "F"))
_NO_TIME = -1  # complete_ns of a request whose C never came

# The columns of finished requests, in the order the tuples of :func:`requests` hold them: the issue (D) event's
# device, CPU, pid and process name go with each (as :data:`ftlscope.traces.readers.KEPT_COLUMNS` says).
COLUMNS = ("op", "offset", "size", "complete", "process", "device", "cpu", "pid")


def _lines(path: Path) -> Iterator[tuple[int, pa.Array]]:
    """(number of the first line, the lines without their ends) per chunk, up to blkparse's summary."""
    number = 1
    with open(path, encoding="utf-8", errors="replace") as fh:
        while True:
            chunk = fh.readlines(CHUNK_BYTES)
            if not chunk:
                return
            lines = pa.array(chunk, pa.string())
            summary = pc.starts_with(lines, _SUMMARY[0])
            for prefix in _SUMMARY[1:]:
                summary = pc.or_(summary, pc.starts_with(lines, prefix))
            end = pc.index(summary, True).as_py()
            if end >= 0:
                yield number, pc.utf8_rtrim_whitespace(lines.slice(0, end))
                return
            yield number, pc.utf8_rtrim_whitespace(lines)
            number += len(chunk)


def _events(path: Path) -> Iterator[dict[str, list[Any]]]:
    """The Q, D, C and merge events of each chunk, checked: lists ``action``, ``key`` (device and start sector),
    ``t`` (ns), ``op`` (of a D: None if its rwbs names no operation), ``offset`` and ``size`` (bytes; None for a
    flush without sectors) and ``process``."""
    for first, lines in _lines(path):
        # Matching alone is cheap (a DFA); pulling the fields out is not, so only the events read are taken apart.
        blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(lines)), 0)
        malformed = pc.and_(pc.invert(pc.match_substring_regex(lines, _LINE)), pc.invert(blank))
        wanted = pc.match_substring_regex(lines, _WANTED)
        number = pc.indices_nonzero(wanted)  # of each event read, within the chunk
        fields = pc.extract_regex(lines.filter(wanted), _LINE)
        action = pc.fill_null(pc.struct_field(fields, "action"), "")
        rest = pc.struct_field(fields, "rest")
        rwbs = pc.struct_field(fields, "rwbs")
        io = pc.extract_regex(rest, _IO)
        flush = pc.fill_null(pc.match_substring(rwbs, "F"), False)
        passthrough = pc.fill_null(pc.match_substring_regex(rest, _PASSTHROUGH), False)
        no_io = pc.and_(io.is_null(), pc.invert(passthrough))
        # Q, D and C name their sectors, but for a flush without data.
        sectorless = pc.and_(pc.and_(no_io, pc.is_in(action, pa.array(["Q", "D", "C"]))), pc.invert(flush))
        bad_line = pc.index(malformed, True).as_py()
        bad_event = pc.index(sectorless, True).as_py()
        if bad_event >= 0 and (bad_line < 0 or number[bad_event].as_py() < bad_line):
            raise TraceError(f"{path}:{first + number[bad_event].as_py()}: {action[bad_event].as_py()} event "
                             f"without 'sector + nsectors'; expected {_EXPECTED}")
        if bad_line >= 0:
            raise TraceError(f"{path}:{first + bad_line}: cannot read {lines[bad_line].as_py().strip()[:60]!r}; "
                             f"expected {_EXPECTED}")
        # A flush's completion names no sector to pair it by; a merge without sectors merges nothing.
        keep = pc.invert(pc.or_(passthrough, pc.and_(no_io, pc.is_in(action, pa.array(["C", "M", "F"])))))
        if not pc.any(keep).as_py():
            continue
        fields, io, action, rest, rwbs = (pc.filter(a, keep) for a in (fields, io, action, rest, rwbs))
        sector = pc.fill_null(pc.struct_field(io, "sector"), "0")
        t = pc.add(pc.multiply(pc.cast(pc.struct_field(fields, "sec"), pa.int64()), 1_000_000_000),
                   pc.cast(pc.utf8_rpad(pc.struct_field(fields, "frac"), 9, "0"), pa.int64()))
        op = pa.nulls(len(action), pa.string())
        for name, letter in reversed(_RWBS_OPS):
            op = pc.if_else(pc.match_substring(rwbs, letter), name, op)
        has_io = io.is_valid()
        op = pc.if_else(has_io, op, "flush")  # a D without sectors is a pure flush
        offset = pc.if_else(has_io, pc.multiply(pc.cast(sector, pa.int64()), 512), pa.scalar(None, pa.int64()))
        sectors = pc.cast(pc.fill_null(pc.struct_field(io, "nsect"), "0"), pa.int64())
        size = pc.if_else(has_io, pc.multiply(sectors, 512), pa.scalar(None, pa.int64()))
        # A flush's process is its whole "[process]" field; a request's the bracketed name after its sectors.
        process = pc.if_else(has_io, pc.struct_field(io, "process"),
                             pc.utf8_trim(pc.utf8_trim_whitespace(rest), "[]"))
        yield {"action": action.to_pylist(), "key": pc.binary_join_element_wise(
                   pc.struct_field(fields, "dev"), sector, " ").to_pylist(), "t": t.to_pylist(), "op": op.to_pylist(),
               "offset": offset.to_pylist(), "size": size.to_pylist(), "process": process.to_pylist(),
               "device": pc.struct_field(fields, "dev").to_pylist(),
               "cpu": pc.cast(pc.struct_field(fields, "cpu"), pa.int64()).to_pylist(),
               "pid": pc.cast(pc.struct_field(fields, "pid"), pa.int64()).to_pylist()}


def requests(path: str | Path) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray, np.ndarray,
                                                 tuple[int, int] | None]]:
    """The trace's requests as they finish, chunk by chunk: (columns of :data:`COLUMNS`, arrival ns, place in
    issue order, the (arrival, place) of the earliest request still in flight or None). ``complete`` is -1 where
    no C came (a flush, or the trace ended first). Requests come in issue order within a chunk, not by arrival.
    TraceError for a malformed line (naming its file and line) and a trace without a D event."""
    path = Path(path)
    queued: dict[str, deque[int]] = {}  # key -> arrivals (Q times) not yet issued
    issued: dict[str, deque[list[Any]]] = {}  # key -> requests in flight, in issue order
    in_flight: list[tuple[int, int, list[Any]]] = []  # heap of (arrival, seq, request); finished ones linger
    seq = 0
    for events in _events(path):
        done: list[list[Any]] = []  # [arrival, seq, op, offset, size, complete, process, device, cpu, pid]
        for action, key, t, op, offset, size, process, device, cpu, pid in zip(
                events["action"], events["key"], events["t"], events["op"], events["offset"], events["size"],
                events["process"], events["device"], events["cpu"], events["pid"], strict=True):
            if action == "Q":
                waiting = queued.get(key)
                if waiting is None:
                    queued[key] = deque((t,))
                else:
                    waiting.append(t)
            elif action == "D":
                if op is None:
                    continue  # an rwbs without an operation (N): nothing to replay
                waiting = queued.get(key)
                arrival = t
                if waiting:
                    arrival = waiting.popleft()
                    if not waiting:
                        del queued[key]
                request = [arrival, seq, op, 0 if offset is None else offset, size or 0, _NO_TIME, process, device,
                           cpu, pid]
                seq += 1
                if offset is None:
                    done.append(request)
                    continue
                flying = issued.get(key)
                if flying is None:
                    issued[key] = deque((request,))
                else:
                    flying.append(request)
                heapq.heappush(in_flight, (arrival, request[1], request))
            elif action == "C":
                flying = issued.get(key)
                if flying:
                    request = flying.popleft()
                    if not flying:
                        del issued[key]
                    request[5] = t
                    done.append(request)
            else:  # M, F: the bio just queued joined another request
                waiting = queued.get(key)
                if waiting:
                    waiting.pop()
                    if not waiting:
                        del queued[key]
        while in_flight and in_flight[0][2][5] != _NO_TIME:
            heapq.heappop(in_flight)
        if done:
            yield (*_columns(done), in_flight[0][:2] if in_flight else None)
    if seq == 0:
        raise TraceError(f"{path}: the trace holds no issued (D) requests")
    never = [entry[2] for entry in in_flight if entry[2][5] == _NO_TIME]  # the trace ended before their C
    if never:
        yield (*_columns(never), None)


def _columns(done: list[list[Any]]) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    arrival, seq, op, offset, size, complete, process, device, cpu, pid = zip(*done, strict=True)
    cols = {"op": np.array(op, dtype=object), "offset": np.array(offset, dtype=np.int64),
            "size": np.array(size, dtype=np.int64), "complete": np.array(complete, dtype=np.int64),
            "process": np.array(process, dtype=object), "device": np.array(device, dtype=object),
            "cpu": np.array(cpu, dtype=np.int64), "pid": np.array(pid, dtype=np.int64)}
    return cols, np.array(arrival, dtype=np.int64), np.array(seq, dtype=np.int64)


def frame(cols: dict[str, np.ndarray], arrival: np.ndarray, *, path: Path, origin: int | None = None,
          first_row: int = 0, completions: bool = True):
    """The trace table of finished requests (in order): ``complete_ns`` and ``latency_ns`` nullable where no C
    came, or left out without ``completions``."""
    complete = None
    if completions:
        complete = cols["complete"].astype(object)
        complete[cols["complete"] == _NO_TIME] = None
    return build_frame(cols["op"], cols["offset"], cols["size"], arrival, path=path, fmt="blkparse",
                       complete_ns=complete, process=cols["process"], origin=origin, first_row=first_row,
                       extra={name: cols[name] for name in ("device", "cpu", "pid")})


def read_blkparse(path: Path):
    """The whole trace, in arrival order (issue order among equal arrivals)."""
    parts = [(cols, arrival, seq) for cols, arrival, seq, _ in requests(path)]
    cols = {name: np.concatenate([p[0][name] for p in parts]) for name in COLUMNS}
    arrival = np.concatenate([p[1] for p in parts])
    order = np.lexsort((np.concatenate([p[2] for p in parts]), arrival))
    cols = {name: values[order] for name, values in cols.items()}
    return frame(cols, arrival[order], path=path, completions=bool((cols["complete"] != _NO_TIME).any()))
