"""A private ftrace instance in tracefs, and a reader of its binary per-CPU ring buffers.

No well-kept Python library reads ftrace: the PyPI package ``ftrace`` is one 0.0.1 release from 2020, and
trace-cruncher (libtracefs' bindings) is not on PyPI. So this module is small and hand-written: it creates an
instance directory (``/sys/kernel/tracing/instances/NAME``, its own buffers, so other tracers are untouched),
enables events with in-kernel filters, and decodes ``per_cpu/cpuN/trace_pipe_raw``. The binary pipe is read rather
than the text ``trace_pipe`` because the text prints timestamps in whole microseconds, while the ring buffer holds
nanoseconds, and because the kernel then formats nothing. The layout read here is the one the kernel describes
in ``events/header_page`` and ``events/header_event`` (checked at start) and that libtraceevent's kbuffer reads.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import TargetError

TRACEFS = Path("/sys/kernel/tracing")

# Ring-buffer event header: 5 bits type_len, 27 bits time delta (events/header_event).
_PADDING, _TIME_EXTEND, _TIME_STAMP = 29, 30, 31
_TS_SHIFT = 27
_TS_MSB = 0x1F << 59  # an absolute time-stamp event carries the low 59 bits; the top ones come from the page
# The page header's commit word also carries two flags (kernel/trace/ring_buffer.c).
_MISSED_EVENTS = 1 << 31
_MISSED_STORED = 1 << 30
_HEADER = struct.Struct("<QQ")  # page timestamp, commit (local_t, 8 bytes on 64-bit kernels)
_U32 = struct.Struct("<I")
_COMMON = struct.Struct("<HBBi")  # common_type, common_flags, common_preempt_count, common_pid


def mounted_root() -> Path:
    """tracefs' root, mounted there if it is not yet (as trace-cmd and perf do). TargetError if impossible."""
    if (TRACEFS / "instances").is_dir():
        return TRACEFS
    import subprocess

    done = subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, text=True)
    if done.returncode != 0 or not (TRACEFS / "instances").is_dir():
        lines = (done.stderr or "").strip().splitlines()
        why = lines[0] if lines else "no instances directory"
        raise TargetError(f"tracefs is not mounted at {TRACEFS} and mounting it failed ({why}); mount it with "
                          f"'mount -t tracefs nodev {TRACEFS}'")
    return TRACEFS


@dataclass(frozen=True)
class EventFormat:
    """One event's id and the byte layout of the fields a decoder asks for (from its ``format`` file)."""

    system: str
    name: str
    id: int
    fields: dict[str, tuple[int, int, bool]]  # name -> (offset, size, signed)

    def decoder(self, names: tuple[str, ...]):
        """A function payload -> tuple of the named fields: integers, or text for char arrays."""
        getters = []
        for name in names:
            offset, size, signed = self.fields[name]
            if name in _TEXT_FIELDS:
                # Interned: a capture holds millions of rows naming a handful of processes and flag sets.
                getters.append(lambda b, o=offset, s=size: sys.intern(
                    b[o:o + s].split(b"\0", 1)[0].decode("ascii", "replace")))
            else:
                code = {1: "b", 2: "h", 4: "i", 8: "q"}[size]
                unpack = struct.Struct("<" + (code if signed else code.upper())).unpack_from
                getters.append(lambda b, o=offset, u=unpack: u(b, o)[0])
        return lambda payload: tuple(g(payload) for g in getters)


_TEXT_FIELDS = ("rwbs", "comm")
_FIELD = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<signed>\d)")


def parse_format(text: str, system: str, name: str) -> EventFormat:
    """An event's ``format`` file: its ``ID:`` and every ``field:TYPE NAME; offset:N; size:N; signed:N;``."""
    found = re.search(r"^ID:\s*(\d+)", text, re.M)
    if found is None:
        raise TargetError(f"tracefs: events/{system}/{name}/format has no ID line; the kernel's format is not "
                          "one this reader knows")
    fields = {}
    for m in _FIELD.finditer(text):
        decl = m.group("decl").strip()
        field = re.sub(r"\[.*\]$", "", decl.split()[-1])
        fields[field] = (int(m.group("offset")), int(m.group("size")), m.group("signed") == "1")
    return EventFormat(system, name, int(found.group(1)), fields)


def check_page_layout(root: Path) -> int:
    """The data offset of a ring-buffer page, after checking the header is the one this reader decodes."""
    text = (root / "events" / "header_page").read_text()
    fields = {m.group("decl").split()[-1]: (int(m.group("offset")), int(m.group("size")))
              for m in _FIELD.finditer(text)}
    if fields.get("timestamp") != (0, 8) or fields.get("commit") != (8, 8) or "data" not in fields:
        raise TargetError(f"tracefs: the ring-buffer page header ({root}/events/header_page) is not the 64-bit "
                          "layout this reader decodes (timestamp u64 at 0, commit at 8)")
    return fields["data"][0]


def parse_page(page: bytes, data_offset: int = 16) -> tuple[list[tuple[int, bytes]], int]:
    """The events of one ring-buffer page as (timestamp ns, payload) and the events the kernel says it lost
    just before this page (-1 when it says some were lost but not how many)."""
    if len(page) < data_offset:
        return [], 0
    ts, commit = _HEADER.unpack_from(page, 0)
    size = commit & ~(_MISSED_EVENTS | _MISSED_STORED) & 0xFFFFFFFF
    end = min(data_offset + size, len(page))
    missed = 0
    if commit & _MISSED_EVENTS:
        missed = -1
        if commit & _MISSED_STORED and end + 8 <= len(page):
            missed = struct.unpack_from("<q", page, end)[0]
    events = []
    pos = data_offset
    while pos + 4 <= end:
        header = _U32.unpack_from(page, pos)[0]
        type_len, delta = header & 0x1F, header >> 5
        if type_len == _PADDING:
            if delta == 0:
                break  # the rest of the page is empty
            ts += delta  # a discarded event keeps its time delta
            pos += 4 + _U32.unpack_from(page, pos + 4)[0]
        elif type_len == _TIME_EXTEND:
            ts += (_U32.unpack_from(page, pos + 4)[0] << _TS_SHIFT) | delta
            pos += 8
        elif type_len == _TIME_STAMP:
            ts = (ts & _TS_MSB) | (_U32.unpack_from(page, pos + 4)[0] << _TS_SHIFT) | delta
            pos += 8
        elif type_len == 0:  # the length is in the next word and counts that word
            length = _U32.unpack_from(page, pos + 4)[0]
            ts += delta
            events.append((ts, page[pos + 8:pos + 4 + length]))
            pos += 4 + length
        else:
            ts += delta
            events.append((ts, page[pos + 4:pos + 4 + 4 * type_len]))
            pos += 4 + 4 * type_len
    return events, missed


def used_part(page: bytes, data_offset: int = 16) -> bytes:
    """The part of a page read from trace_pipe_raw that holds events (and a stored lost-event count): a page
    read while the writer is still on it is mostly empty, and keeping only this halves a capture's memory."""
    if len(page) < data_offset:
        return page
    commit = _HEADER.unpack_from(page, 0)[1]
    size = commit & ~(_MISSED_EVENTS | _MISSED_STORED) & 0xFFFFFFFF
    return page[:data_offset + size + (8 if commit & _MISSED_STORED else 0)]


def event_type(payload: bytes) -> int:
    return _COMMON.unpack_from(payload, 0)[0]


def event_pid(payload: bytes) -> int:
    return _COMMON.unpack_from(payload, 0)[3]


class Instance:
    """A private ftrace instance: created on enter, every event disabled and the directory removed on exit
    (also when the block raises, e.g. on Ctrl-C), so no tracer of anyone else is touched or left running."""

    def __init__(self, name: str, *, buffer_kb: int, clock: str = "mono"):
        self.root = mounted_root()
        self.path = self.root / "instances" / name
        self.buffer_kb = buffer_kb
        self.clock = clock
        self.data_offset = check_page_layout(self.root)
        self._fds: dict[int, int] = {}

    def __enter__(self) -> Instance:
        try:
            self.path.mkdir()
        except FileExistsError:
            raise TargetError(f"tracefs: the instance {self.path} exists already; another capture is using "
                              f"it, or remove it with 'rmdir {self.path}'") from None
        try:
            self._write("tracing_on", "0")
            self._write("trace_clock", self.clock)
            self._write("buffer_size_kb", str(self.buffer_kb))
            # When the reader falls behind, keep the oldest events and count the newer ones as dropped: a gap at
            # the end of a burst is easier to see than one in the middle of a request's life.
            self._write("options/overwrite", "0")
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _write(self, rel: str, value: str) -> None:
        (self.path / rel).write_text(value)

    def format(self, system: str, event: str) -> EventFormat:
        return parse_format((self.path / "events" / system / event / "format").read_text(), system, event)

    def has_event(self, system: str, event: str) -> bool:
        return (self.path / "events" / system / event).is_dir()

    def enable(self, system: str, event: str, filter_expr: str | None = None) -> None:
        where = self.path / "events" / system / event
        if filter_expr:
            try:
                (where / "filter").write_text(filter_expr)
            except OSError as exc:
                raise TargetError(f"tracefs: the kernel refused the filter {filter_expr!r} on {system}:{event} "
                                  f"({exc.strerror})") from None
        (where / "enable").write_text("1")

    def start(self) -> None:
        self._write("tracing_on", "1")

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._write("tracing_on", "0")

    def cpus(self) -> list[int]:
        return sorted(int(p.name[3:]) for p in (self.path / "per_cpu").glob("cpu[0-9]*"))

    def subbuffer_bytes(self) -> int:
        size = self.path / "buffer_subbuf_size_kb"
        return int(size.read_text()) * 1024 if size.exists() else os.sysconf("SC_PAGE_SIZE")

    def read_available(self, page_bytes: int) -> Iterator[tuple[int, bytes]]:
        """Every page each CPU's buffer holds now, as (cpu, page), without waiting."""
        for cpu in self.cpus():
            fd = self._fds.get(cpu)
            if fd is None:
                fd = os.open(self.path / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
                self._fds[cpu] = fd
            while True:
                try:
                    page = os.read(fd, page_bytes)
                except BlockingIOError:
                    break
                if not page:
                    break
                yield cpu, page

    def stats(self) -> dict[int, dict[str, int]]:
        """Per CPU the counters of ``per_cpu/cpuN/stats`` (entries, overrun, dropped events, ...)."""
        out = {}
        for cpu in self.cpus():
            counters = {}
            for line in (self.path / "per_cpu" / f"cpu{cpu}" / "stats").read_text().splitlines():
                key, _, value = line.partition(":")
                with contextlib.suppress(ValueError):
                    counters[key.strip()] = int(value.split()[0])
            out[cpu] = counters
        return out

    def remove(self) -> None:
        """Stop tracing, disable every event, close the pipes and remove the instance directory."""
        if not self.path.exists():
            return
        self.stop()
        with contextlib.suppress(OSError):
            self._write("events/enable", "0")
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        # The kernel refuses (EBUSY) while a file inside is still open; give a closing reader a moment.
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
                time.sleep(0.02)
        self.path.rmdir()
