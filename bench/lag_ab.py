#!/usr/bin/env python3
"""Issue lag of two builds of ftlscope, interleaved A/B/A/B on one target (issue 17: on a shared machine only runs
made at the same load compare).

Each build is a directory holding an ``ftlscope`` package (its own ``_native.abi3.so``): ``--builds
old=/tmp/old_py,new=python``. Every round replays, with each build in turn in a process of its own, the faithful
(open-loop) trace of bench/replay_speed.py's lag table: evenly spaced random 4 KiB reads over the target's first
256 MiB, QD 32. The target is a zram device made for the bench (``--zram SIZE``, root), a block device
(``--device``, read only) or a file in ``--dir``.

``--fifo`` is a diagnostic, not a measurement of what a user gets: each replay's process (and so every engine
thread) runs SCHED_FIFO at priority 1, so other sessions' threads cannot take its CPUs, as on a quiet machine.
A thread that spins as the queue does then hits the kernel's real-time throttling, which hands its CPU to
ordinary threads for tens of ms once a second; those stalls are counted apart ("in stalls": the run of late
requests around any request more than 5 ms late), and "late > 20 us" and "p99 rest" are over the other requests.

    sudo python bench/lag_ab.py --builds old=/tmp/old_py,new=python --zram 1GiB --engine psync-pool --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

STALL_NS = 5_000_000
LATE_NS = 20_000


def lag_stats(lag: np.ndarray, latency_p99: float) -> dict:
    """Lag percentiles of a run's requests (in submission order), and the same without the stalls."""
    late = lag > LATE_NS
    stall = np.zeros(len(lag), dtype=bool)
    idx = np.flatnonzero(late)
    if len(idx):
        breaks = np.diff(idx) > 1
        for start, end in zip(idx[np.r_[True, breaks]], idx[np.r_[breaks, True]], strict=True):
            if (lag[start:end + 1] > STALL_NS).any():
                stall[start:end + 1] = True
    rest = lag[~stall]
    pct = lambda a, p: float(np.percentile(a, p)) if len(a) else float("nan")  # noqa: E731
    return {"p50": pct(lag, 50), "p99": pct(lag, 99), "p999": pct(lag, 99.9), "in_stalls": int(stall.sum()),
            "late_rest": int((rest > LATE_NS).sum()), "p99_rest": pct(rest, 99), "p999_rest": pct(rest, 99.9),
            "read_p99": latency_p99}


def child(args: argparse.Namespace) -> None:
    """One replay with the build first on sys.path; prints its statistics as JSON."""
    sys.path.insert(0, args.build)
    sys.path.insert(1, str(Path(__file__).parent))
    if args.fifo:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    from replay_speed import LAG_SPAN, reads

    from ftlscope.replay import replay

    n = int(args.rate * args.seconds)
    result = replay(args.target, reads(n, 1_000_000_000 // args.rate, LAG_SPAN), timing="faithful", qd=32,
                    direct=bool(args.direct), engine=args.engine, window="1s", health_interval="0s", queues=args.queues,
                    trace=True)
    trace = result.trace.sort_values("submit_ns")
    stats = lag_stats(trace["issue_lag_ns"].to_numpy(), result.summary["read"]["lat_ns"]["p99"])
    stats["iops"] = result.summary["read"]["iops"]
    print(json.dumps(stats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--builds", help="NAME=DIR,NAME=DIR: directories holding an ftlscope package")
    parser.add_argument("--engine", default="psync-pool")
    parser.add_argument("--queues", type=int, default=1)
    parser.add_argument("--rate", type=int, default=50_000, help="requests per second")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fifo", action="store_true", help="run each replay SCHED_FIFO (a diagnostic; root)")
    parser.add_argument("--zram", metavar="SIZE", help="a zram device of this size made for the bench (root)")
    parser.add_argument("--device", help="a block device to read (read only)")
    parser.add_argument("--dir", default="/dev/shm", help="where a file target goes otherwise")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--build", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--direct", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if not args.builds or any("=" not in item for item in args.builds.split(",")):
        raise SystemExit(f"lag_ab.py: --builds {args.builds}: give NAME=DIR,NAME=DIR (directories holding an ftlscope "
                         "package)")
    builds = dict(item.split("=", 1) for item in args.builds.split(","))
    for name, directory in builds.items():
        if not (Path(directory) / "ftlscope" / "__init__.py").exists():
            raise SystemExit(f"lag_ab.py: --builds {name}={directory}: no ftlscope package there; give a directory "
                             "holding one")
    sys.path.insert(0, str(Path(__file__).parent))
    from replay_speed import lag_target

    target, _ = lag_target(args)
    rows = []
    with target as (path, direct):
        for rnd in range(1, args.rounds + 1):
            for name, directory in builds.items():
                load = os.getloadavg()[0]
                cmd = [sys.executable, __file__, "--child", "--build", str(Path(directory).resolve()), "--target", path,
                       "--direct", str(int(direct)), "--engine", args.engine, "--queues", str(args.queues),
                       "--rate", str(args.rate), "--seconds", str(args.seconds)] + (["--fifo"] if args.fifo else [])
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"lag_ab.py: the replay with {name} failed:\n{done.stderr.strip()}")
                stats = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append((rnd, name, load, os.getloadavg()[0], stats))
                print(f"round {rnd} {name}: load {load:.1f}, lag p99 {stats['p99'] / 1e3:,.1f} us", flush=True)
    us = lambda ns: f"{ns / 1e3:,.1f}"  # noqa: E731
    print(f"\n{args.engine}, {args.queues} queue(s), {args.rate:,} req/s, {args.seconds} s a run"
          f"{', SCHED_FIFO (diagnostic)' if args.fifo else ''}; lag in us; 'rest' leaves out the stalls")
    header = ["round", "build", "load", "lag p50", "p99", "p99.9", "in stalls", "late > 20 us", "p99 rest",
              "p99.9 rest", "read p99", "IOPS"]
    print(" | ".join(header))
    for rnd, name, load0, load1, s in rows:
        print(" | ".join([str(rnd), name, f"{load0:.1f}-{load1:.1f}", us(s["p50"]), us(s["p99"]), us(s["p999"]),
                          f"{s['in_stalls']:,}", f"{s['late_rest']:,}", us(s["p99_rest"]), us(s["p999_rest"]),
                          us(s["read_p99"]), f"{s['iops']:,.0f}"]))


if __name__ == "__main__":
    main()
