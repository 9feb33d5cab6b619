"""The `ftlscope capture` parser (cli.py adds it with one call); the command itself is in ``capture``, loaded only
when it runs, so `ftlscope --help` stays quick."""

from __future__ import annotations

import argparse
from typing import Any

HELP = (
    "record every block request the kernel issues to DEVICE while COMMAND runs (without COMMAND: until Ctrl-C "
    "or SIGTERM) into a trace (Parquet, the columns of run --trace plus the process). Uses ftrace's block "
    "tracepoints (block_io_start for the process that made the request, block_rq_issue, block_rq_complete, "
    "block_rq_requeue; on bio-based devices such as zram and device mapper block_bio_queue and "
    "block_bio_complete) in a private tracefs instance, filtered to DEVICE in the kernel and read from the "
    "binary per-CPU buffers by ftlscope's own reader (no maintained Python library reads ftrace); neither "
    "blktrace (refused under kernel lockdown) nor bpftrace is used. Needs root")


def add_capture_parser(sub: Any) -> None:
    p = sub.add_parser("capture", help="record the block requests the kernel issues to a device while a command "
                                       "runs (ftrace block tracepoints; root)",
                       usage="ftlscope capture DEVICE --out FILE [--buffer-size SIZE] [-- COMMAND ...]",
                       description=HELP + ". Times are nanoseconds on CLOCK_MONOTONIC, relative to the first "
                       "issue. Lost events (the per-CPU buffer overflowed) are reported, never dropped silently. "
                       "The exit code is COMMAND's (128 + the signal if it was killed); a capture ended by Ctrl-C "
                       "or SIGTERM without COMMAND exits 0 after writing the trace.")
    # argparse cannot put a free-form command after '--' behind a subcommand's positional (it hands the words to
    # the top-level parser as unrecognised): everything after the first '--' is taken off before parsing.
    p.__class__ = type("CaptureParser", (type(p),), {"parse_known_args": _parse_with_command})
    p.add_argument("device", metavar="DEVICE", help="block device or partition (e.g. /dev/loop0, /dev/zram0, "
                                                    "/dev/nvme0n1p2); a partition's offsets are relative to its "
                                                    "start")
    p.add_argument("--out", required=True, metavar="FILE", help="trace file to write (Parquet)")
    p.add_argument("--buffer-size", default="8MiB", metavar="SIZE",
                   help="ftrace buffer per CPU (default 8MiB, about 40 000 requests); raise it if events are lost")
    p.set_defaults(func=_cmd_capture, run_command=[])


def _parse_with_command(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
    words = list(args) if args is not None else []
    command: list[str] = []
    if "--" in words:
        cut = words.index("--")
        words, command = words[:cut], words[cut + 1:]
    ns, extra = type(self).__mro__[1].parse_known_args(self, words, namespace)
    ns.run_command = command
    return ns, extra


def _cmd_capture(args: argparse.Namespace) -> int:
    from .capture import cmd_capture

    return cmd_capture(args)
