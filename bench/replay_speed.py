#!/usr/bin/env python3
"""How fast and how punctual is `ftlscope replay`? (issue 17's targets: on a simulated drive at least 1,000,000
requests per second in afap mode; on a real target an issue lag p99 under 20 us at 50,000 requests per second.)

Two tables:

1. Replay speed on a simulated drive, afap (closed loop): a trace of N random 4 KiB reads over 1 GiB (the range
   written first, so reads reach the modelled flash), at QD 1 and 32, beside `run` generating the same workload
   itself, so the cost of taking requests from a trace shows. Requests per second of the engine's own wall time
   (trace reading and Python set-up are left out, and shown apart as "set-up s") and per CPU second (the engine's
   threads: the simulator's driver and the aggregator). The whole process is confined to one CPU, as in
   bench/sim_speed.py.
2. Issue lag on a file target (a file in /dev/shm, O_DIRECT where the kernel allows it on tmpfs, else buffered;
   --dir picks another place) at fixed rates, faithful (open loop): evenly spaced random 4 KiB reads, the lag
   being each request's submission time minus its recorded time, on the engine's clock.

Wall-clock figures depend on what else the machine runs; the load average at the start is printed with them.

    python bench/replay_speed.py [--ops 2000000] [--rates 10000,50000] [--seconds 3] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

import ftlscope
from ftlscope.errors import FtlscopeError
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
    return rows


def file_lag(directory: str, rates: list[int], seconds: float, engines: list[str]) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = str(Path(tmp) / "target.img")
        span = 256 << 20
        try:
            ftlscope.run(path, ftlscope.from_flags(rw="read", ops=1), size=str(span))  # creates and fills it
            direct = True
        except FtlscopeError:
            ftlscope.run(path, ftlscope.from_flags(rw="read", ops=1), size=str(span), direct=False)
            direct = False
        for engine, rate in ((engine, rate) for engine in engines for rate in rates):
            n = int(rate * seconds)
            result = replay(path, reads(n, 1_000_000_000 // rate, span), timing="faithful", qd=32, direct=direct,
                            engine=engine, window="1s", health_interval="0s")
            lag = result.summary["run"]["issue_lag_ns"]
            read = result.summary["read"]
            rows.append({"rate": rate, "n": n, "lag": lag, "iops": read["iops"], "p99_lat": read["lat_ns"]["p99"],
                         "backend": f"{result.summary['env']['engine']['backend']} ({engine})",
                         "io": "O_DIRECT" if direct else "buffered"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="consumer-tlc-dram")
    parser.add_argument("--ops", type=int, default=2_000_000, help="requests per simulated replay")
    parser.add_argument("--rates", default="10000,50000", help="requests per second of the file-target replays")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each file-target replay")
    parser.add_argument("--dir", default="/dev/shm", help="where the file target goes (default /dev/shm, tmpfs)")
    parser.add_argument("--engines", default="auto,uring",
                        help="engines of the file-target replays (default auto,uring: auto picks psync on tmpfs, one "
                             "request at a time, so a request due while another is served waits for it)")
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)),
                        help="the one CPU the simulated replays use")
    args = parser.parse_args()
    console = Console(width=160)
    console.print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
                  f"on {os.cpu_count()} CPUs")

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

    rows = file_lag(args.dir, [int(r) for r in args.rates.split(",")], args.seconds, args.engines.split(","))
    table = Table(title=f"Issue lag of a faithful (open-loop) replay on a file in {args.dir}, random 4 KiB reads, "
                        "QD 32 (goal p99 < 20 us at 50,000 req/s)", title_justify="left")
    for col in ("rate req/s", "requests", "I/O", "backend", "achieved IOPS", "lag p50", "lag p99", "lag p99.9",
                "lag max", "read p99"):
        table.add_column(col, justify="right")
    us = lambda ns: f"{ns / 1000:,.1f} us"  # noqa: E731
    for r in rows:
        lag = r["lag"]
        table.add_row(f"{r['rate']:,}", f"{r['n']:,}", r["io"], r["backend"], f"{r['iops']:,.0f}", us(lag["p50"]),
                      us(lag["p99"]), us(lag["p99.9"]), us(lag["max"]), us(r["p99_lat"]))
    console.print(table)


if __name__ == "__main__":
    main()
