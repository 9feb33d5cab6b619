#!/usr/bin/env python3
"""Which reads the write shim moves, and why their latency changes (issue 19): one `bench/newt_gain.py` shim row
replayed without and with the shim, the two per-request traces (`replay --trace`) compared read for read.

A read's latency in the bench is from its submission to the drive to its completion. When the replay's queue is
full (every slot busy), a read due now waits at the host first (its issue lag); the table shows that wait too,
and the read's time from its arrival in the trace to its completion, which the shim cannot make worse by
holding writes back without it showing here.

    python bench/newt_shim_read_order.py [--drive kelpie-t200g-m] [--trace cloud] [--load 2] [--noise medium]

Seed 1, 10 s synthetic traces, the preset's ground truth for the shim: `bench/newt_gain.py`'s rows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
import newt_gain  # noqa: E402  (the bench's own cases, plans and traces)

from ftlscope.newt.measure import gain_pct, measure  # noqa: E402
from ftlscope.units import parse_duration_ns  # noqa: E402


def reads_by_identity(trace: pd.DataFrame) -> pd.DataFrame:
    """The trace's reads keyed by (offset, size, n-th such read): the same read in both replays."""
    reads = trace[trace["op"] == "read"].sort_values("submit_seq").copy()
    reads["arrival_ns"] = reads["submit_ns"] - reads["issue_lag_ns"]
    reads["k"] = reads.groupby(["offset_bytes", "size"]).cumcount()
    return reads.set_index(["offset_bytes", "size", "k"])[["submit_ns", "complete_ns", "latency_ns",
                                                           "issue_lag_ns", "arrival_ns"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drive", default="kelpie-t200g-m")
    parser.add_argument("--trace", default="cloud", help="one of bench/newt_gain.py's traces")
    parser.add_argument("--load", type=float, default=2.0)
    parser.add_argument("--noise", choices=("medium",))
    parser.add_argument("--duration", default="10s")
    args = parser.parse_args()
    case = newt_gain.Case("shim", args.drive, args.trace, args.load, True, args.noise)
    frame = newt_gain.synth(args.trace.split(",")[0].split(" ")[0], parse_duration_ns(args.duration, "--duration"),
                            seed=1, bursts=newt_gain.BURSTS.get(args.trace))
    with tempfile.TemporaryDirectory(prefix="newt-read-order-") as scratch:
        outcome = measure(newt_gain.target_of(case, Path(scratch)), frame, newt_gain.plan_of(case),
                          timing=f"scaled:{args.load:g}" if args.load != 1 else "faithful", wrap=True)
    before, after = reads_by_identity(outcome.before.trace), reads_by_identity(outcome.after.trace)
    both = before.merge(after, how="inner", left_index=True, right_index=True, suffixes=("_b", "_a"))
    moved = both[both["latency_ns_b"] != both["latency_ns_a"]]
    p90_before = np.percentile(both["latency_ns_b"], 90)
    gains = gain_pct(outcome.before.summary, outcome.after.summary).get("read", {})
    console = Console(width=160)
    console.print(f"{args.drive}{' (noise ' + args.noise + ')' if args.noise else ''}, {args.trace}, "
                  f"x{args.load:g}: read p90 / p95 change {-gains.get('p90', 0):+.1f} / {-gains.get('p95', 0):+.1f} %"
                  f"; {len(moved)} of {len(both):,} reads differ, {int((moved['latency_ns_a'] > p90_before).sum())} "
                  f"of them over the run's p90 ({p90_before / 1e3:.0f} µs) with the shim, "
                  f"{int((moved['latency_ns_b'] > p90_before).sum())} without")
    table = Table(title="the reads the shim moves, and every read")
    for column in ("", "without the shim", "with the shim"):
        table.add_column(column, justify="left" if not column else "right")
    if len(moved):
        for label, column, scale, unit, how in (
                ("moved reads: submitted from", "submit_ns", 1e6, "ms", "min"),
                ("moved reads: submitted until", "submit_ns", 1e6, "ms", "max"),
                ("moved reads: mean submission to completion", "latency_ns", 1e3, "µs", "mean"),
                ("moved reads: mean wait for a queue slot", "issue_lag_ns", 1e6, "ms", "mean")):
            table.add_row(label, *(f"{getattr(moved[f'{column}_{s}'], how)() / scale:.2f} {unit}" for s in "ba"))
        e2e = {s: moved[f"complete_ns_{s}"] - moved[f"arrival_ns_{s}"] for s in "ba"}
        table.add_row("moved reads: mean arrival to completion", *(f"{e2e[s].mean() / 1e6:.2f} ms" for s in "ba"))
        table.add_row("moved reads: complete sooner with the shim", "", f"{int((e2e['a'] < e2e['b']).sum())}")
    lagged = {s: both[f"issue_lag_ns_{s}"] for s in "ba"}
    table.add_row("all reads: waited over 1 ms for a queue slot", *(f"{int((lagged[s] > 1e6).sum()):,}" for s in "ba"))
    table.add_row("all reads: mean wait for a queue slot", *(f"{lagged[s].mean() / 1e6:.2f} ms" for s in "ba"))
    for p in (90, 95):
        table.add_row(f"all reads: p{p} submission to completion",
                      *(f"{np.percentile(both[f'latency_ns_{s}'], p) / 1e3:.1f} µs" for s in "ba"))
        table.add_row(f"all reads: p{p} arrival to completion",
                      *(f"{np.percentile(both[f'complete_ns_{s}'] - both[f'arrival_ns_{s}'], p) / 1e6:.2f} ms"
                        for s in "ba"))
    console.print(table)


if __name__ == "__main__":
    main()
