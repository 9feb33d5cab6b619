"""Pairing a capture's block events into requests: the ring-buffer pages decoded, every CPU's events merged by time,
and each request's start, issue and completion matched by (device, start sector) in order, as blkparse pairs its
D and C events (see ``capture`` for which events and why)."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Any

from .tracefs import event_pid, event_type, parse_page

SECTOR = 512
_KINDS = {"block_io_start": "start", "block_rq_issue": "issue", "block_rq_complete": "complete",
          "block_rq_requeue": "requeue", "block_bio_queue": "issue", "block_bio_complete": "complete"}
_FIELDS = ("dev", "sector", "nr_sector", "rwbs", "error", "comm")
_OPS = {"R": "read", "W": "write", "D": "trim", "F": "flush", "N": "write_zeroes"}


def parse_rwbs(rwbs: str) -> tuple[str | None, bool, bool, bool]:
    """(operation, preflush, fua, sync) from the kernel's rwbs text (blk_fill_rwbs: [F]OP[F][A][S][M], where a
    leading F before an operation letter is a preflush and an F after it is FUA). Write zeroes prints as N."""
    i = 0
    preflush = False
    if len(rwbs) > 1 and rwbs[0] == "F" and rwbs[1] in _OPS:
        preflush, i = True, 1
    op = _OPS.get(rwbs[i:i + 1])
    rest = rwbs[i + 1:]
    return op, preflush, "F" in rest, "S" in rest


class _Fifos:
    """First-in-first-out queues by key that drop a key once its queue is empty: a capture of random I/O touches
    millions of sectors, and an empty queue left behind per sector would cost more than the requests."""

    def __init__(self) -> None:
        self._queues: dict[Any, deque] = {}

    def push(self, key: Any, item: Any, front: bool = False) -> None:
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
        if front:
            queue.appendleft(item)
        else:
            queue.append(item)

    def pop(self, key: Any) -> Any:
        queue = self._queues.get(key)
        if not queue:
            return None
        item = queue.popleft()
        if not queue:
            del self._queues[key]
        return item


class Assembler:
    """Pairs the events of one capture into requests, in timestamp order (feed every CPU's events merged).
    Keys are (device, start sector), or (device, None) for flushes, which carry no sectors."""

    def __init__(self, part_start: int = 0):
        self.part_start = part_start
        self.rows: list[list[Any]] = []
        self.starts = _Fifos()
        self.inflight = _Fifos()
        self.unmatched_completions = 0
        self.requeued = 0
        self.other_ops = 0

    def start(self, ts: int, pid: int, dev: int, sector: int, nr: int, comm: str) -> None:
        self.starts.push((dev, sector if nr else None), (ts, pid, comm))

    def issue(self, ts: int, pid: int, dev: int, sector: int, nr: int, rwbs: str, comm: str) -> None:
        op, preflush, fua, sync = parse_rwbs(rwbs)
        if preflush and nr == 0:
            op = "flush"  # a bio-based device sees a flush as an empty write with a preflush
        if op is None or (op == "write_zeroes" and nr == 0):
            self.other_ops += 1  # zone management and driver-private requests: nothing to replay
            return
        if op == "flush":
            nr = 0
        key = (dev, sector if nr else None)
        origin = self.starts.pop(key) or (None, pid, comm)
        # issue, complete, queued, op, offset, size, pid, comm, status, rwbs, sync, fua, preflush, bytes left
        row = [ts, None, origin[0], op, (sector - self.part_start) * SECTOR if nr else 0, nr * SECTOR, origin[1],
               origin[2], None, rwbs, sync, fua, preflush, nr * SECTOR]
        self.rows.append(row)
        self.inflight.push(key, row)

    def _take(self, dev: int, sector: int, nr: int, rwbs: str) -> tuple[Any, list[Any] | None]:
        if nr == 0:
            # A flush completes with sector -1; the write that asked for the flush then completes with no sectors
            # and was never issued itself (the kernel issued the flush in its place): not a request of its own.
            op, preflush, _, _ = parse_rwbs(rwbs)
            if op != "flush" and not preflush:
                return None, None
            key = (dev, None)
        else:
            key = (dev, sector)
        row = self.inflight.pop(key)
        if row is None:
            self.unmatched_completions += 1  # issued before the capture started
        return key, row

    def complete(self, ts: int, dev: int, sector: int, nr: int, rwbs: str, error: int) -> None:
        _, row = self._take(dev, sector, nr, rwbs)
        if row is None:
            return
        row[1] = ts
        row[13] -= nr * SECTOR
        if error:
            row[8] = error
        if row[13] > 0 and not error:
            # A partial completion (the driver finished part of the request): the rest completes later, from
            # the sector after the part that is done.
            row[1] = None
            self.inflight.push((dev, sector + nr), row, front=True)
        elif row[8] is None:
            row[8] = row[5]

    def requeue(self, dev: int, sector: int, nr: int, rwbs: str) -> None:
        key, row = self._take(dev, sector, nr, rwbs)
        if row is None:
            return
        self.requeued += 1
        self.rows.remove(row)
        # Its next issue is the same request: give it back the process that made it.
        self.starts.push(key, (row[2], row[6], row[7]), front=True)

    @property
    def in_flight(self) -> int:
        return sum(1 for r in self.rows if r[1] is None)


def assemble(events: Iterable[tuple], part_start: int = 0) -> Assembler:
    """Requests from decoded events (ts, kind, pid, dev, sector, nr_sector, rwbs, error, comm) in time order
    (:meth:`PageDecoder.merged` gives them so, without holding them all)."""
    asm = Assembler(part_start)
    for ts, kind, pid, dev, sector, nr, rwbs, error, comm in events:
        if kind == "start":
            asm.start(ts, pid, dev, sector, nr, comm)
        elif kind == "issue":
            asm.issue(ts, pid, dev, sector, nr, rwbs, comm)
        elif kind == "complete":
            asm.complete(ts, dev, sector, nr, rwbs, error)
        else:
            asm.requeue(dev, sector, nr, rwbs)
    return asm


class PageDecoder:
    """Raw ring-buffer pages -> event tuples for :func:`assemble`; ``lost`` counts the events the pages say the
    kernel lost (a page that says "some" without a count counts as one)."""

    def __init__(self, formats: dict[str, Any], data_offset: int = 16):
        self.data_offset = data_offset
        self.lost = 0
        self._decoders = {}
        for name, fmt in formats.items():
            names = tuple(f for f in _FIELDS if f in fmt.fields)
            self._decoders[fmt.id] = (_KINDS[name], names, fmt.decoder(names))

    def events(self, pages: Iterable[bytes]) -> Iterator[tuple]:
        """One CPU's events, in the order that CPU recorded them."""
        for page in pages:
            found, missed = parse_page(page, self.data_offset)
            self.lost += missed if missed > 0 else (1 if missed < 0 else 0)
            for ts, payload in found:
                known = self._decoders.get(event_type(payload))
                if known is None:
                    continue
                kind, names, decode = known
                values = dict(zip(names, decode(payload), strict=True))
                yield (ts, kind, event_pid(payload), values["dev"], values["sector"], values["nr_sector"],
                       values["rwbs"], values.get("error", 0), values.get("comm", ""))

    def merged(self, pages_by_cpu: dict[int, list[bytes]]) -> Iterator[tuple]:
        """Every CPU's events merged by time, decoded as they are consumed: each CPU's buffer is already in time
        order (one clock for all CPUs: trace_clock mono), so a k-way merge orders them without a sort, and the
        decoded events are never all in memory at once (about 3 KB per request if they were)."""
        return heapq.merge(*(self.events(pages) for pages in pages_by_cpu.values()), key=itemgetter(0))


def decode_pages(pages: list[bytes], formats: dict[str, Any], data_offset: int = 16) -> tuple[list[tuple], int]:
    """The events of one CPU's pages as a list, and the events lost (for tests and small captures)."""
    decoder = PageDecoder(formats, data_offset)
    events = list(decoder.events(pages))
    return events, decoder.lost
