#!/usr/bin/env python3
"""Where the slow reads of a `bench/newt_gain.py` shim row come from (issue 19): the row's trace replayed without
and with the shim, as `ftlscope newt` measures it, and each read slower than `--slow` from arrival joined with what
stood around it: the writes in flight when it was submitted (count, MB), the writes among them that took over
5 ms at the drive (a full-buffer flush), its wait at the host (issue lag) and at the drive, and the bytes the shim
held in its window. Prints, per 250 ms of the trace, how many reads were slow before and after, and the slowest
reads of the "after" pass one by one.

    python bench/newt_slow_reads.py [--drive kelpie-t200g-m] [--trace cloud] [--load 1] [--[no-]hold-in-read-storms]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
import pandas as pd
from newt_gain import Case, plan_of

from ftlscope.newt.measure import gains, held, measure
from ftlscope.traces import synth
from ftlscope.units import parse_duration_ns

FLUSH_NS = 5_000_000  # a write this long at the drive waited for a full-buffer flush


def slow_reads(trace: pd.DataFrame, slow_ns: int, held_series: np.ndarray, window_ns: int) -> pd.DataFrame:
    reads = trace[trace.op == "read"]
    writes = trace[trace.op == "write"]
    ws, wc = writes.submit_ns.to_numpy(), writes.complete_ns.to_numpy()
    wsize, wlat = writes["size"].to_numpy(), writes.latency_ns.to_numpy()
    rows = []
    for r in reads[reads.issue_lag_ns + reads.latency_ns >= slow_ns].itertuples():
        inflight = (ws <= r.submit_ns) & (wc > r.submit_ns)
        arrival = r.submit_ns - r.issue_lag_ns
        window = int(arrival // window_ns) if window_ns else 0
        rows.append({"arrival_s": arrival / 1e9, "from_arrival_ms": (r.issue_lag_ns + r.latency_ns) / 1e6,
                     "host_ms": r.issue_lag_ns / 1e6, "drive_ms": r.latency_ns / 1e6,
                     "writes_in_flight": int(inflight.sum()), "in_flight_MB": wsize[inflight].sum() / 1e6,
                     "of_them_over_5ms": int((inflight & (wlat > FLUSH_NS)).sum()),
                     "held_MB": held_series[window] / 1e6 if window < len(held_series) else 0.0})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drive", default="kelpie-t200g-m")
    parser.add_argument("--trace", default="cloud")
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--duration", default="10s")
    parser.add_argument("--slow", default="25ms", help="a read slower than this from arrival is listed")
    parser.add_argument("--hold-in-read-storms", action=argparse.BooleanOptionalAction, default=None,
                        help="writes held while the reads storm (default: the shim's default, on)")
    args = parser.parse_args()
    plan = plan_of(Case("shim", args.drive, args.trace, args.load, True))
    if plan.shim is None:
        raise SystemExit(f"--drive {args.drive}: no shim applies (no write buffer); pick a drive with one")
    if args.hold_in_read_storms is not None:
        plan = replace(plan, shim=replace(plan.shim, hold_in_read_storms=args.hold_in_read_storms))
    frame = synth(args.trace, parse_duration_ns(args.duration, "--duration"), seed=1)
    timing = f"scaled:{args.load:g}" if args.load != 1 else "faithful"
    outcome = measure(f"sim:{args.drive}", frame, plan, timing=timing, wrap=True)
    shim = held(outcome.after.summary) or {}
    series = np.array([w["held_bytes"] for w in shim.get("over_time", [])], dtype=float)
    window_ns = int(outcome.after.summary["write_shim"]["held_bytes"].get("window_ns") or 0)
    slow_ns = parse_duration_ns(args.slow, "--slow")
    tables = {}
    for name, result in (("before", outcome.before), ("after", outcome.after)):
        empty = np.zeros(0) if name == "before" else series
        tables[name] = slow_reads(result.trace, slow_ns, empty, window_ns)
    reads = int((outcome.before.trace.op == "read").sum())
    print(f"{args.drive}, {args.trace} x{args.load:g}: {reads:,} reads; read p99 change "
          f"{-gains(outcome.before, outcome.after)['gain_pct']['read']['p99']:+.1f} %; reads over {args.slow} from "
          f"arrival: before {len(tables['before'])}, after {len(tables['after'])}")
    per = pd.DataFrame({name: (t.arrival_s * 4).astype(int).value_counts() if len(t) else pd.Series(dtype=int)
                        for name, t in tables.items()}).fillna(0).astype(int).sort_index()
    per.index = [f"{i / 4:.2f} s" for i in per.index]
    print(per.T.to_string())
    after = tables["after"]
    if len(after):
        print(after.sort_values("from_arrival_ms", ascending=False).head(20).round(2).to_string(index=False))


if __name__ == "__main__":
    main()
