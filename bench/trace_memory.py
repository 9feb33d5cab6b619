#!/usr/bin/env python3
"""Peak memory of a per-request trace: ``ftlscope run sim:... --trace FILE`` streaming it to Parquet while the run
goes, beside the same run without a trace, the in-memory trace it replaced (every record kept, written at the
end: ``ftlscope.run(..., trace=True)`` then ``save_trace``), and fio's latency log for the same number of I/Os
(``fio --write_lat_log`` on the null engine, which keeps every sample in memory until the end); then the peak
of ``ftlscope replay`` of that trace, streamed in batches, beside a replay that reads the trace whole; and the
same on several queues (``--queues Q``, round-robin: the trace split into a spill file per queue, then each queue
streamed from its own), beside the whole read multi-queue replays made before; then the commands that read the
trace whole until issue 17's last step: ``replay --report DIR``, ``replay --align-reads 16k``, ``replay
--align-reads auto --from-profile P`` (a profile whose P1 is 16 KiB and whose P6 penalises other sizes) and
``ftlscope newt --align-reads 16k``, each as this tree runs it and, with ``--before PYTHONPATH``, as another tree
(e.g. an export of the commit before) runs the same command line.

Every figure is the peak RSS of one fresh process (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` in a wrapper that
runs only it); "per request" is (peak - the no-trace run's peak) / requests. The workload: 4 KiB random reads
at QD 32 over 1 GiB of the ``optane-like`` preset (filled first, as ``run`` does), fio the same shape.

    python bench/trace_memory.py [--counts 1000000,10000000] [--old-max 10000000] [--fio-max 10000000]
                                 [--queues 2,4] [--skip-run-table] [--commands report,align-size,align-auto,newt]
                                 [--before PYTHONPATH] [--before-max 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

MiB = 1 << 20
PRESET = "sim:optane-like"
SIZE = "1GiB"
QD = 32

# Runs its argv and prints the child's peak RSS in KiB (Linux reports ru_maxrss in KiB).
_WRAPPER = ("import resource, subprocess, sys; "
            "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")

_OLD = """
import sys
from ftlscope import from_flags, run
n, out = int(sys.argv[1]), sys.argv[2]
result = run("{preset}", from_flags(rw="randread", size="{size}", qd={qd}, ops=n), trace=True, trace_limit=n,
             precondition=True)
result.save_trace(out)
"""


# A replay that reads its Parquet trace whole (what `ftlscope replay` did before it streamed): read_trace, then
# the engine's columns.
_WHOLE_REPLAY = """
import sys
from ftlscope.replay import replay
from ftlscope.traces import read_trace
replay("{preset}", read_trace(sys.argv[1], sort=True), timing="afap", qd={qd}, size="{size}",
       queues=int(sys.argv[2]))
"""


def ftlscope_replay(trace: Path, queues: int = 1) -> list[str]:
    return [sys.executable, "-m", "ftlscope.cli", "replay", PRESET, str(trace), "--timing", "afap", "--qd", str(QD),
            "--size", SIZE, "--quiet", "--queues", str(queues)]


def peak_rss(argv: list[str], pythonpath: str | None = None) -> tuple[int, float]:
    """(peak RSS in bytes, wall seconds) of ``argv`` run in a fresh process (with ``pythonpath`` as PYTHONPATH:
    another tree's ftlscope)."""
    env = {**os.environ, "PYTHONPATH": pythonpath} if pythonpath else None
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", _WRAPPER, *argv], check=True, capture_output=True, text=True,
                         env=env)
    return int(out.stdout.strip()) * 1024, time.monotonic() - start


# A profile directory holding only what --from-profile reads (P1: 16 KiB pages; P6: other sizes cost 200 µs).
_PROFILE = {"run_id": "trace-memory-profile", "created_at": "2026-11-26T00:00:00Z", "suite": "quick",
            "target": {"name": PRESET, "identity": PRESET}, "experiments": [],
            "probes": {"properties": {"P1": {"value": 16384, "answer": "16 KiB"},
                                      "P6": {"value": {"consistent": False, "penalised_sizes": []},
                                             "answer": "inconsistent", "unaligned_penalty_us": 200.0}}}}
COMMANDS = ("report", "align-size", "align-auto", "newt")


def command_argv(command: str, trace: Path, scratch: Path) -> list[str]:
    """The command line of one of :data:`COMMANDS` on ``trace`` (afap, QD 32, outputs in ``scratch``)."""
    flags = ["--timing", "afap", "--qd", str(QD), "--size", SIZE, "--quiet"]
    if command == "newt":
        return [sys.executable, "-m", "ftlscope.cli", "newt", PRESET, str(trace), "--align-reads", "16k", *flags,
                "--no-store", "--report", str(scratch / "newt")]
    extra = {"report": ["--report", str(scratch / "report")], "align-size": ["--align-reads", "16k"],
             "align-auto": ["--align-reads", "auto", "--from-profile", str(scratch / "profile")]}[command]
    return [*ftlscope_replay(trace), *extra]


def ftlscope_run(n: int, trace: Path | None) -> list[str]:
    argv = [sys.executable, "-m", "ftlscope.cli", "run", PRESET, "--rw", "randread", "--size", SIZE, "--qd",
            str(QD), "--ops", str(n), "--quiet"]
    return argv + (["--trace", str(trace)] if trace else [])


def fio_run(n: int, directory: Path) -> list[str]:
    return ["fio", "--name=lat", "--ioengine=null", "--rw=randread", "--bs=4k", "--size=1g",
            f"--iodepth={QD}", f"--io_size={n * 4096}", f"--write_lat_log={directory / 'lat'}",
            "--log_avg_msec=0", "--output=/dev/null"]


def mib(value: int | None) -> str:
    return "not run" if value is None else f"{value / MiB:,.0f} MiB"


def per_request(peak: int | None, reference: int | None, n: int) -> str:
    """Bytes a request adds to the peak over the same run's peak without the trace."""
    return "-" if peak is None or reference is None else f"{(peak - reference) / n:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1000000,10000000", help="request counts, comma-separated")
    parser.add_argument("--old-max", type=int, default=10_000_000,
                        help="largest count to measure the in-memory trace at (it needs ~124 B a request)")
    parser.add_argument("--fio-max", type=int, default=10_000_000,
                        help="largest count to run fio at (its logs need ~64 B an I/O and ~100 B of text on disk)")
    parser.add_argument("--queues", default="2,4",
                        help="queue counts for the multi-queue replay rows, comma-separated (empty: none)")
    parser.add_argument("--whole-max", type=int, default=10_000_000,
                        help="largest count to replay read whole (it needs ~300 B a request)")
    parser.add_argument("--skip-run-table", action="store_true",
                        help="measure only the replays (the trace is still written by one streamed run)")
    parser.add_argument("--commands", default=",".join(COMMANDS),
                        help=f"rows of the last table, comma-separated, of {', '.join(COMMANDS)} (empty: none)")
    parser.add_argument("--before", metavar="PYTHONPATH",
                        help="also run the last table's commands with this PYTHONPATH (another tree's ftlscope)")
    parser.add_argument("--before-max", type=int, default=10_000_000,
                        help="largest count to run the --before tree's commands at (they read the trace whole)")
    parser.add_argument("--skip-replay-tables", action="store_true",
                        help="leave out the plain replay tables (one queue and --queues): only the last table")
    args = parser.parse_args()
    counts = [int(float(c)) for c in args.counts.split(",")]
    queue_counts = [int(q) for q in args.queues.split(",") if q.strip()]
    table = Table(title=f"Peak RSS with a per-request trace: 4 KiB random reads, QD {QD}, {PRESET}, {SIZE}")
    for col in ("requests", "no trace", "--trace (streamed)", "streamed B/req", "in memory (before)",
                "in memory B/req", "fio --write_lat_log", "fio B/req", "streamed wall"):
        table.add_column(col, justify="right")
    replays = Table(title=f"Peak RSS of `ftlscope replay` of that trace (afap, QD {QD}): streamed in batches, and "
                          "read whole as before; B/req over the run without a trace")
    for col in ("requests", "replay (streamed)", "streamed B/req", "read whole (before)", "whole B/req",
                "streamed wall"):
        replays.add_column(col, justify="right")
    split = Table(title=f"Peak RSS of `ftlscope replay --queues Q` of that trace (afap, QD {QD} a queue, round-robin): "
                        "streamed (a spill file per queue), and read whole as before; B/req over the run without a "
                        "trace")
    for col in ("requests", "queues", "replay (streamed)", "streamed B/req", "read whole (before)", "whole B/req",
                "streamed wall"):
        split.add_column(col, justify="right")
    command_list = [c for c in args.commands.split(",") if c.strip()]
    unknown = set(command_list) - set(COMMANDS)
    if unknown:
        parser.error(f"--commands: unknown {', '.join(sorted(unknown))}; use {', '.join(COMMANDS)}")
    commands = Table(title=f"Peak RSS of the commands that read the trace whole before issue 17's last step (afap, "
                          f"QD {QD}, {PRESET}): this tree (streamed), and the --before tree; B/req over the run "
                          "without a trace")
    for col in ("requests", "command", "streamed", "streamed B/req", "before", "before B/req", "streamed wall",
                "before wall"):
        commands.add_column(col, justify="right")
    console = Console(width=max(Console().width, 160))  # the table stays whole when the output is a file
    for n in counts:
        with tempfile.TemporaryDirectory(prefix="ftlscope-trace-memory-") as tmp:
            tmp = Path(tmp)
            base, _ = peak_rss(ftlscope_run(n, None))
            streamed, wall = peak_rss(ftlscope_run(n, tmp / "t.parquet"))
            for command in command_list:
                (tmp / "profile").mkdir(exist_ok=True)
                (tmp / "profile" / "profile.json").write_text(json.dumps(_PROFILE))
                argv = command_argv(command, tmp / "t.parquet", tmp)
                now, now_wall = peak_rss(argv)
                then = then_wall = None
                if args.before and n <= args.before_max:
                    then, then_wall = peak_rss(argv, args.before)
                commands.add_row(f"{n:,}", command, mib(now), per_request(now, base, n), mib(then),
                                 per_request(then, base, n), f"{now_wall:.0f} s",
                                 "-" if then_wall is None else f"{then_wall:.0f} s")
                console.print(f"[dim]{n:,} {command}: {mib(now)} ({now_wall:.0f} s), before {mib(then)}[/dim]")
            replayed = replay_wall = whole = None
            whole_replay = [sys.executable, "-c", _WHOLE_REPLAY.format(preset=PRESET, size=SIZE, qd=QD),
                            str(tmp / "t.parquet")]
            if not args.skip_replay_tables:
                replayed, replay_wall = peak_rss(ftlscope_replay(tmp / "t.parquet"))
                if n <= args.whole_max:
                    whole, _ = peak_rss([*whole_replay, "1"])
            for q in (queue_counts if not args.skip_replay_tables else []):
                q_streamed, q_wall = peak_rss(ftlscope_replay(tmp / "t.parquet", q))
                q_whole = peak_rss([*whole_replay, str(q)])[0] if n <= args.whole_max else None
                split.add_row(f"{n:,}", str(q), mib(q_streamed), per_request(q_streamed, base, n), mib(q_whole),
                              per_request(q_whole, base, n), f"{q_wall:.0f} s")
            (tmp / "t.parquet").unlink()
            old = None
            if n <= args.old_max and not args.skip_run_table:
                old, _ = peak_rss([sys.executable, "-c", _OLD.format(preset=PRESET, size=SIZE, qd=QD), str(n),
                                   str(tmp / "old.parquet")])
            fio = None
            if n <= args.fio_max and shutil.which("fio") and not args.skip_run_table:
                fio, _ = peak_rss(fio_run(n, tmp))
        fio_base = None
        if fio is not None:
            # fio's own footprint without the log: the same job, no --write_lat_log.
            fio_base, _ = peak_rss([a for a in fio_run(n, Path(".")) if not a.startswith("--write_lat_log")])
        table.add_row(f"{n:,}", mib(base), mib(streamed), per_request(streamed, base, n), mib(old),
                      per_request(old, base, n), mib(fio), per_request(fio, fio_base, n), f"{wall:.0f} s")
        if replayed is not None:
            replays.add_row(f"{n:,}", mib(replayed), per_request(replayed, base, n), mib(whole),
                            per_request(whole, base, n), f"{replay_wall:.0f} s")
        console.print(f"[dim]{n:,} requests measured[/dim]")
    if not args.skip_run_table:
        console.print(table)
    if not args.skip_replay_tables:
        console.print(replays)
        if queue_counts:
            console.print(split)
    if command_list:
        console.print(commands)


if __name__ == "__main__":
    main()
