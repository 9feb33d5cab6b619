#!/usr/bin/env python3
"""How fast and how punctual is `ftlscope replay`? (issue 17's targets: on a simulated drive at least 1,000,000
requests per second in afap mode; on a real target an issue lag p99 under 20 us at 50,000 requests per second.)

Two tables:

1. Replay speed on a simulated drive, afap (closed loop): a trace of N random 4 KiB reads over 1 GiB (the range
   written first, so reads reach the modelled flash), at QD 1 and 32, beside `run` generating the same workload
   itself, so the cost of taking requests from a trace shows; and the trace split round-robin over 2 and 4 queues
   (`--queues`, QD 32 each; one simulated drive under them all, stepped by one thread as `run` steps several
   queues). Requests per second of the engine's own wall time (trace reading and Python set-up are left out, and
   shown apart as "set-up s") and per CPU second (the engine's
   threads: the simulator's driver and the aggregator). The whole process is confined to one CPU, as in
   bench/sim_speed.py.
2. Issue lag on a real target at fixed rates, faithful (open loop): evenly spaced random 4 KiB reads over its
   first 256 MiB, the lag being each request's submission time minus its recorded time, on the engine's clock.
   The target is a file in /dev/shm (O_DIRECT where the kernel allows it on tmpfs, else buffered; --dir picks
   another place), a block device the user names (--device, read only: what it holds is read as it is), or a
   zram device the bench makes for itself (--zram SIZE, root: a new device from /sys/class/zram-control, filled
   with random data, removed afterwards; any zram device already there is left alone). Block devices are read
   with O_DIRECT, with both engines by default. Each engine and rate runs on one queue and on 2 (`--queues 1,2`:
   round-robin, QD 32 each, every request still due at its recorded time from one start the queues share).

Wall-clock figures depend on what else the machine runs; the load average at the start and the end is printed.

    python bench/replay_speed.py [--ops 2000000] [--rates 10000,50000] [--seconds 3] [--dir /dev/shm]
    sudo python bench/replay_speed.py --lag-only --zram 1GiB       # the punctuality goal on a fast block device
    python bench/replay_speed.py --lag-only --device /dev/nvme0n1   # the same on a drive of yours (reads only)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

import ftlscope
from ftlscope.errors import FtlscopeError, UsageError
from ftlscope.replay import replay
from ftlscope.sim import SimDevice
from ftlscope.workload import OPS

SPAN = 1 << 30


def reads(n: int, gap_ns: int, span: int, seed: int = 1) -> pd.DataFrame:
    """n random 4 KiB reads over ``span`` bytes, one every ``gap_ns``."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "op": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=list(OPS)),
        "offset_bytes": (rng.integers(0, span // 4096, n) * 4096).astype(np.uint64),
        "size": np.full(n, 4096, dtype=np.uint32),
        "submit_ns": np.arange(n, dtype=np.uint64) * gap_ns,
    })


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _filled_device(preset: str) -> SimDevice:
    device = SimDevice.open(preset)
    ftlscope.run(device, ftlscope.from_flags(rw="write", bs="1m", qd=8, total_bytes=str(SPAN)), window="1s",
                 health_interval="10s")
    device.idle("1s")
    return device


def sim_speed(preset: str, n: int) -> list[dict]:
    frame = reads(n, 1_000, SPAN)
    rows = []
    for qd in (1, 32):
        device = _filled_device(preset)
        started, cpu = time.perf_counter(), _cpu()
        result = replay(device, frame, timing="afap", qd=qd, window="1s", health_interval="10s")
        total, cpu = time.perf_counter() - started, _cpu() - cpu
        engine_s = result.summary["run"]["wall_ns"] / 1e9
        rows.append({"what": f"replay afap, QD {qd}", "n": n, "engine_s": engine_s, "setup_s": total - engine_s,
                     "cpu_s": cpu, "virtual_s": result.summary["run"]["virtual_ns"] / 1e9})
        device = _filled_device(preset)
        started, cpu = time.perf_counter(), _cpu()
        result = ftlscope.run(device, ftlscope.from_flags(rw="randread", qd=qd, ops=n, size=str(SPAN)), window="1s",
                              health_interval="10s")
        total, cpu = time.perf_counter() - started, _cpu() - cpu
        engine_s = result.summary["run"]["wall_ns"] / 1e9
        rows.append({"what": f"run randread (generated), QD {qd}", "n": n, "engine_s": engine_s,
                     "setup_s": total - engine_s, "cpu_s": cpu,
                     "virtual_s": result.summary["run"]["virtual_ns"] / 1e9})
    for queues in (2, 4):
        device = _filled_device(preset)
        started, cpu = time.perf_counter(), _cpu()
        result = replay(device, frame, timing="afap", qd=32, queues=queues, window="1s", health_interval="10s")
        total, cpu = time.perf_counter() - started, _cpu() - cpu
        engine_s = result.summary["run"]["wall_ns"] / 1e9
        rows.append({"what": f"replay afap, {queues} queues x QD 32 (round-robin)", "n": n, "engine_s": engine_s,
                     "setup_s": total - engine_s, "cpu_s": cpu, "virtual_s": result.summary["run"]["virtual_ns"] / 1e9})
    return rows


LAG_SPAN = 256 << 20
ZRAM_CONTROL = Path("/sys/class/zram-control")


def lag_target(args: argparse.Namespace) -> tuple[contextlib.AbstractContextManager[tuple[str, bool]], str]:
    """The lag benches' target from ``--zram``, ``--device`` or ``--dir`` (the path and whether it takes O_DIRECT,
    as a context that cleans up), and how to name it."""
    if args.zram:
        return zram_target(args.zram), f"a zram device of {args.zram} made for the bench"
    if args.device:
        return contextlib.nullcontext((args.device, True)), args.device
    return file_target(args.dir), f"a file in {args.dir}"


@contextlib.contextmanager
def file_target(directory: str) -> Iterator[tuple[str, bool]]:
    """A 256 MiB file in ``directory`` and whether it takes O_DIRECT; removed afterwards."""
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = str(Path(tmp) / "target.img")
        try:
            ftlscope.run(path, ftlscope.from_flags(rw="read", ops=1), size=str(LAG_SPAN))  # creates and fills it
            direct = True
        except FtlscopeError:
            ftlscope.run(path, ftlscope.from_flags(rw="read", ops=1), size=str(LAG_SPAN), direct=False)
            direct = False
        yield path, direct


@contextlib.contextmanager
def zram_target(size: str) -> Iterator[tuple[str, bool]]:
    """A zram device of its own (hot-added, so a zram0 someone else uses is not touched), its first 256 MiB filled
    with random data (an unwritten zram page reads as zeros without decompressing anything); removed afterwards."""
    from ftlscope.units import parse_size

    if os.geteuid() != 0 or not (ZRAM_CONTROL / "hot_add").exists():
        raise UsageError("--zram: making a zram device needs root and the zram module (modprobe zram)")
    index = int((ZRAM_CONTROL / "hot_add").read_text())
    device = f"/dev/zram{index}"
    try:
        Path(f"/sys/block/zram{index}/disksize").write_text(str(parse_size(size)))
        ftlscope.run(device, ftlscope.from_flags(rw="write", bs="1m", qd=8, total_bytes=str(LAG_SPAN)),
                     destructive=device, health_interval="0s")
        yield device, True
    finally:
        # udev's probe after the writes may hold the device a moment: removal fails with EBUSY meanwhile.
        for attempt in range(100):
            try:
                (ZRAM_CONTROL / "hot_remove").write_text(str(index))
                break
            except OSError:
                if attempt == 99:
                    raise
                time.sleep(0.05)


def lag_rows(target: str, direct: bool, rates: list[int], seconds: float, engines: list[str],
             queue_counts: list[int]) -> list[dict]:
    rows = []
    for engine, queues, rate in ((e, q, r) for e in engines for q in queue_counts for r in rates):
        n = int(rate * seconds)
        load = os.getloadavg()[0]
        result = replay(target, reads(n, 1_000_000_000 // rate, LAG_SPAN), timing="faithful", qd=32, direct=direct,
                        engine=engine, window="1s", health_interval="0s", queues=queues)
        lag = result.summary["run"]["issue_lag_ns"]
        read = result.summary["read"]
        rows.append({"rate": rate, "n": n, "lag": lag, "iops": read["iops"], "p99_lat": read["lat_ns"]["p99"],
                     "backend": f"{result.summary['env']['engine']['backend']} ({engine})", "queues": queues,
                     "io": "O_DIRECT" if direct else "buffered", "load": (load, os.getloadavg()[0])})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="consumer-tlc-dram")
    parser.add_argument("--ops", type=int, default=2_000_000, help="requests per simulated replay")
    parser.add_argument("--rates", default="10000,50000", help="requests per second of the file-target replays")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each file-target replay")
    parser.add_argument("--dir", default="/dev/shm", help="where the file target goes (default /dev/shm, tmpfs)")
    parser.add_argument("--device", help="measure the issue lag on this block device instead (reads only)")
    parser.add_argument("--zram", metavar="SIZE",
                        help="measure the issue lag on a zram device of this size made for the bench (root)")
    parser.add_argument("--lag-only", action="store_true", help="skip the simulated drive's speed table")
    parser.add_argument("--engines",
                        help="engines of the lag replays (default auto,psync-pool,uring on a file: auto picks psync "
                             "on tmpfs, one request at a time, so a request due while another is served waits for it; "
                             "psync-pool hands each to a worker thread; psync,psync-pool,uring on a block device)")
    parser.add_argument("--queues", default="1,2",
                        help="queue counts of the lag replays (default 1,2: round-robin, QD 32 each)")
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)),
                        help="the one CPU the simulated replays use")
    args = parser.parse_args()
    console = Console(width=160)
    console.print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
                  f"on {os.cpu_count()} CPUs")

    if args.device and args.zram:
        raise SystemExit("--device and --zram: give one target for the lag table")
    if not args.lag_only:
        allowed = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {args.cpu})
        rows = sim_speed(args.preset, args.ops)
        os.sched_setaffinity(0, allowed)
        table = Table(title=f"Replay speed on sim:{args.preset}, one CPU (goal >= 1,000,000 req/s afap)",
                      title_justify="left")
        for col in ("workload", "requests", "engine wall s", "req / wall s", "CPU s", "req / CPU s", "set-up s",
                    "virtual s"):
            table.add_column(col, justify="left" if col == "workload" else "right")
        for r in rows:
            table.add_row(r["what"], f"{r['n']:,}", f"{r['engine_s']:.2f}", f"{r['n'] / r['engine_s']:,.0f}",
                          f"{r['cpu_s']:.2f}", f"{r['n'] / r['cpu_s']:,.0f}", f"{r['setup_s']:.2f}",
                          f"{r['virtual_s']:.2f}")
        console.print(table)

    target, where = lag_target(args)
    engines = (args.engines or ("auto,psync-pool,uring" if not (args.zram or args.device)
                                else "psync,psync-pool,uring")).split(",")
    with target as (path, direct):
        rows = lag_rows(path, direct, [int(r) for r in args.rates.split(",")], args.seconds, engines,
                        [int(q) for q in args.queues.split(",")])
    table = Table(title=f"Issue lag of a faithful (open-loop) replay on {where}, random 4 KiB reads, "
                        "QD 32 (goal p99 < 20 us at 50,000 req/s)", title_justify="left")
    for col in ("rate req/s", "requests", "I/O", "backend", "queues", "achieved IOPS", "lag p50", "lag p99",
                "lag p99.9", "lag max", "read p99", "load (start-end)"):
        table.add_column(col, justify="right")
    us = lambda ns: f"{ns / 1000:,.1f} us"  # noqa: E731
    for r in rows:
        lag = r["lag"]
        table.add_row(f"{r['rate']:,}", f"{r['n']:,}", r["io"], r["backend"], str(r["queues"]), f"{r['iops']:,.0f}",
                      us(lag["p50"]), us(lag["p99"]), us(lag["p99.9"]), us(lag["max"]), us(r["p99_lat"]),
                      "{:.1f}-{:.1f}".format(*r["load"]))
    console.print(table)
    console.print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    try:
        main()
    except FtlscopeError as exc:
        # A target that cannot be opened (or a bad flag value) is one line, as on the command line, not a traceback.
        raise SystemExit(f"replay_speed.py: {exc}") from None
