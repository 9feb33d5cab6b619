"""`ftlscope capture DEVICE --out trace.parquet [-- COMMAND ...]`: every block request the kernel issues to DEVICE.

blktrace is refused on kernels in lockdown, but ftrace's block tracepoints are not. A private ftrace instance
(``tracefs.Instance``) records, filtered to DEVICE in the kernel:

- ``block:block_io_start``: a request is created from a process's I/O, in that process's context: its pid and
  name (comm) are the trace's ``pid`` and ``process``, its time ``queued_ns`` (before any scheduler queue);
- ``block:block_rq_issue``: the request goes to the driver: ``submit_ns``, the offset, size, operation and flags
  (this runs in a kworker when the request went through a scheduler or a plug, which is why the process comes
  from block_io_start; a kernel without block_io_start, before 6.5, gets the issuing context instead);
- ``block:block_rq_complete``: ``complete_ns`` and the error; ``block:block_rq_requeue``: the driver gave a
  request back, and its next issue is the same request.

``capture_pairing`` turns the events into requests, matched by (device, start sector) in order, as blkparse pairs
its D and C events.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..errors import RunError, TargetError, UsageError
from .capture_pairing import SECTOR, Assembler, PageDecoder, assemble
from .tracefs import Instance, used_part

EVENTS = ("block_io_start", "block_rq_issue", "block_rq_complete", "block_rq_requeue")
# A bio-based driver (zram, device mapper, md, brd) takes bios straight from the submitter and never forms
# requests: there a bio's submission (in the submitter's context) is its issue, and its end its completion.
BIO_EVENTS = ("block_bio_queue", "block_bio_complete")
# The columns a capture adds to the trace table of ``run --trace``.
CAPTURE_COLUMNS = ("pid", "process", "queued_ns", "status", "rwbs", "sync", "fua", "preflush")

# ---------------------------------------------------------------------------------------------------------
# checks before anything is touched


def device_numbers(device: str) -> tuple[int, int, int, int, bool]:
    """(major, minor) of the disk the requests go to, the partition's first sector and its sectors (0 for a whole
    disk), and whether the disk forms requests (blk-mq) or takes bios. Block-layer events name the whole disk and
    its sectors, even for I/O to a partition."""
    try:
        st = os.stat(device)
    except OSError as exc:
        raise UsageError(f"DEVICE {device}: {exc.strerror}; give a block device such as /dev/loop0") from None
    if not stat.S_ISBLK(st.st_mode):
        raise UsageError(f"DEVICE {device}: not a block device or partition; give one such as /dev/loop0 "
                         "(capture records the block requests the kernel sends to a device)")
    sysfs = Path(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
    if (sysfs / "partition").exists():
        disk = sysfs.resolve().parent
        major, minor = (int(x) for x in (disk / "dev").read_text().strip().split(":"))
        return (major, minor, int((sysfs / "start").read_text()), int((sysfs / "size").read_text()),
                (disk / "mq").is_dir())
    return os.major(st.st_rdev), os.minor(st.st_rdev), 0, 0, (sysfs / "mq").is_dir()


def check_command(command: list[str]) -> list[str]:
    if command and shutil.which(command[0]) is None:
        raise UsageError(f"COMMAND {command[0]}: not found or not executable; give a program on PATH or a path")
    return command


def kernel_filter(major: int, minor: int, start: int, sectors: int) -> str:
    """The in-kernel filter: the disk (dev_t as the kernel packs it: major << 20 | minor) and, for a partition,
    its sector range; zero-sector requests (flushes) are device-wide and always kept."""
    dev = f"dev == {(major << 20) | minor}"
    if not sectors:
        return dev
    return f"{dev} && ((sector >= {start} && sector < {start + sectors}) || nr_sector == 0)"


# ---------------------------------------------------------------------------------------------------------
# the table


def to_frame(asm: Assembler, out: Path, meta: dict[str, Any]):
    """The trace table of ``run --trace`` plus the capture's columns (see CAPTURE_COLUMNS)."""
    import numpy as np
    import pandas as pd

    from .schema import build_frame

    rows = asm.rows
    if not rows:
        raise RunError(f"captured no block requests on {meta['capture']['device']}; nothing written to {out}")
    cols = list(zip(*rows, strict=True))
    issue = np.asarray(cols[0], dtype=np.int64)
    complete = pd.array(cols[1], dtype="Int64")
    extra = {
        "pid": np.asarray(cols[6], dtype=np.int32),
        "status": pd.array(cols[8], dtype="Int32"),
        "queued_ns": pd.array(cols[2], dtype="Int64"),
        "rwbs": pd.Categorical(cols[9]),
        **{name: np.asarray(cols[i], dtype=bool) for i, name in ((10, "sync"), (11, "fua"), (12, "preflush"))},
    }
    frame = build_frame(cols[3], cols[4], cols[5], issue, path=out, fmt="capture", complete_ns=complete,
                        process=cols[7], meta=meta, extra=extra)
    frame.attrs["ftlscope"]["capture"]["start_clock_ns"] = int(issue[0])
    # pid beside the process name it belongs to.
    frame.insert(frame.columns.get_loc("process"), "pid", frame.pop("pid"))
    return frame


# ---------------------------------------------------------------------------------------------------------
# the command


def _record(inst: Instance, pages: dict[int, list[bytes]], stop: threading.Event) -> None:
    size = inst.subbuffer_bytes()
    while not stop.is_set():
        got = False
        for cpu, page in inst.read_available(size):
            pages[cpu].append(used_part(page, inst.data_offset))
            got = True
        if not got:
            stop.wait(0.02)


def _trace_while(inst: Instance, command: list[str], announce) -> tuple[dict[int, list[bytes]], int | None, bool]:
    """Trace while COMMAND runs (or until Ctrl-C/SIGTERM without one): the raw pages, COMMAND's exit code and
    whether a signal ended it. The pages are kept raw and decoded after the capture, so that decoding costs
    the traced workload no CPU time."""
    pages: dict[int, list[bytes]] = defaultdict(list)
    stop = threading.Event()
    reader = threading.Thread(target=_record, args=(inst, pages, stop), name="ftlscope-capture", daemon=True)
    rc: int | None = None
    proc = None
    interrupted = False
    try:
        try:
            inst.start()
            reader.start()
            if command:
                try:
                    proc = subprocess.Popen(command)
                except OSError as exc:
                    raise UsageError(f"COMMAND {command[0]}: cannot be run ({exc.strerror}); nothing was "
                                     "captured") from None
                rc = proc.wait()
            else:
                announce()
                while True:
                    time.sleep(3600)
        except KeyboardInterrupt:
            interrupted = True
            if proc is not None:
                rc = _stop_command(proc)
    except BaseException:
        # COMMAND could not start, or a second signal came: the reader must be gone before the instance goes.
        stop.set()
        if reader.is_alive():
            reader.join()
        raise
    return _drain(inst, pages, stop, reader), rc, interrupted


def _drain(inst: Instance, pages: dict[int, list[bytes]], stop: threading.Event,
           reader: threading.Thread) -> dict[int, list[bytes]]:
    inst.stop()
    stop.set()
    if reader.is_alive():
        reader.join()
    for cpu, page in inst.read_available(inst.subbuffer_bytes()):
        pages[cpu].append(used_part(page, inst.data_offset))
    return pages


def cmd_capture(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .. import stopping
    from ..cli_checks import check_output_file
    from ..units import format_size, parse_size
    from .schema import write_parquet

    err = Console(stderr=True)
    if os.geteuid() != 0:
        raise UsageError("capture needs root: the kernel's block tracepoints (tracefs) are readable by root "
                         "only; run it with sudo")
    command = check_command(list(args.run_command))
    major, minor, part_start, part_sectors, request_based = device_numbers(args.device)
    buffer_kb = max(1, parse_size(args.buffer_size, "--buffer-size", minimum=4096, maximum=1 << 34) // 1024)
    check_output_file(args.out, "--out")
    out = Path(args.out)

    began = time.monotonic()
    with Instance(f"ftlscope-{os.getpid()}", buffer_kb=buffer_kb) as inst:
        formats = {}
        where = kernel_filter(major, minor, part_start, part_sectors)
        wanted = EVENTS if request_based else BIO_EVENTS
        for event in wanted:
            if inst.has_event("block", event):
                formats[event] = inst.format("block", event)
                inst.enable("block", event, where)
        required = ("block_rq_issue", "block_rq_complete") if request_based else BIO_EVENTS
        missing = [e for e in required if e not in formats]
        if missing:
            raise TargetError(f"tracefs: this kernel has no block:{', block:'.join(missing)} event; capture "
                              "cannot see block requests here")

        def announce() -> None:
            print(f"ftlscope: capturing {args.device}; Ctrl-C or SIGTERM ends it", file=sys.stderr, flush=True)

        pages, rc, interrupted = _trace_while(inst, command, announce)
        if rc is not None and rc < 0:
            rc = 128 - rc  # killed by a signal: the shell's convention
        stats = inst.stats()
        data_offset = inst.data_offset
    elapsed = time.monotonic() - began

    decoder = PageDecoder(formats, data_offset)
    asm = assemble(decoder.merged(pages), part_start)
    del pages
    page_lost = decoder.lost
    lost = sum(s.get("overrun", 0) + s.get("dropped events", 0) for s in stats.values())
    process_from = ("block_io_start" if "block_io_start" in formats else
                    "block_rq_issue" if request_based else "block_bio_queue")
    meta = {"synthetic": False, "capture": {
        "device": args.device, "disk": f"{major}:{minor}", "partition_start_bytes": part_start * SECTOR,
        "level": "request" if request_based else "bio", "command": command, "command_exit": rc,
        "interrupted": interrupted, "clock": "mono", "events": sorted(formats), "process_from": process_from,
        "lost_events": lost, "lost_by_cpu": {
            str(c): s.get("overrun", 0) + s.get("dropped events", 0) for c, s in stats.items()},
        "pages_marked_lost": page_lost, "unmatched_completions": asm.unmatched_completions,
        "requeued": asm.requeued, "other_requests": asm.other_ops, "in_flight_at_end": asm.in_flight,
        "buffer_kb_per_cpu": buffer_kb, "kernel": os.uname().release, "seconds": round(elapsed, 6)}}
    frame = to_frame(asm, out, meta)
    write_parquet(frame, out)
    err.print(f"[dim]ftlscope: wrote {out} ({len(frame):,} requests, "
              f"{format_size(int(frame['size'].sum()))}, {elapsed:.3g} s)[/dim]")
    # Plain prints: one line each however narrow the terminal (rich would wrap them).
    if lost or page_lost:
        print(f"ftlscope: warning: the kernel lost {lost or page_lost:,} trace events (its buffer was full): the "
              "trace misses requests; give a larger --buffer-size", file=sys.stderr)
    if asm.in_flight:
        print(f"ftlscope: note: {asm.in_flight:,} requests have no completion (still in flight when the capture "
              "ended, or the event was lost); their complete_ns is empty", file=sys.stderr)
    if interrupted and command:
        return stopping.exit_code()
    return 0 if rc is None else rc


def _stop_command(proc: subprocess.Popen) -> int:
    """Ctrl-C at a terminal reaches COMMAND too, which then ends by itself; a signal sent to ftlscope alone
    (SIGTERM, SIGHUP, kill -INT) does not: COMMAND gets SIGTERM if it is still running 2 s later."""
    for ending in (None, proc.terminate, proc.kill):
        if ending is not None:
            ending()
        try:
            return proc.wait(timeout=2 if ending is None else 10)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()

