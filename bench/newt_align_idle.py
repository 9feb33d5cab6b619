"""Why read-size alignment can slow reads from arrival ("Fantastic SSD Internals and How to Learn and Use Them"
§5.1, issue 19): the synthetic database trace on kelpie-n1t-i with the drive's idle flush window (P10) varied.

Aligned reads cover exactly the pages they covered before (the same flash reads: media bytes read equal in both
passes), so alignment changes no flash work; it only ends each read that was not a page multiple 200 µs sooner,
which moves when the drive is idle and so when it drains its write buffer. Whether the read tail from arrival is
then better or worse depends on which drains land on bursts of arrivals (32 reads stuck behind a drain fill the
queue and the next ones wait at the host). The table varies the drive's idle flush window (P10) and the trace's
seed to show how much that outcome moves; per window and seed, the change in read latency with alignment
(negative: lower) from arrival and at the device, and the reads that waited at the host before -> after.

    python bench/newt_align_idle.py [--windows 1ms,3ms,30ms] [--seeds 1] [--soft-flush]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from newt_gain import Case, plan_of  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ftlscope.newt.latency import gains  # noqa: E402
from ftlscope.newt.measure import measure  # noqa: E402
from ftlscope.sim import show  # noqa: E402
from ftlscope.traces import synth  # noqa: E402
from ftlscope.units import parse_duration_ns  # noqa: E402

SHOWN = ("mean", "p50", "p90", "p95", "p99", "p99.9")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", default="1ms,3ms,30ms", help="idle flush windows to try (kelpie-n1t-i: 3ms)")
    parser.add_argument("--seeds", default="1", help="trace seeds (comma-separated)")
    parser.add_argument("--duration", default="10s")
    parser.add_argument("--soft-flush", action="store_true",
                        help="the idle drain programs a page only when its unit is free (soft_flush = true)")
    args = parser.parse_args()
    case = Case("align", "kelpie-n1t-i", "db", 1.0, True)
    plan = plan_of(case)
    preset = show("kelpie-n1t-i")
    table = Table(title="kelpie-n1t-i, db trace: change with aligned reads by idle flush window (negative: lower)")
    for column in ("idle window", "seed", *(f"arrival {p}" for p in SHOWN), "device p90 / p95 / p99",
                   "reads waited at the host"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory(prefix="newt-align-idle-") as scratch:
        for window in args.windows.split(","):
            device = Path(scratch) / f"n1t-idle-{window}.toml"
            text = preset.replace('idle_flush_window = "3ms"', f'idle_flush_window = "{window}"', 1)
            if args.soft_flush:
                text = text.replace("soft_flush = false", "soft_flush = true", 1)
            device.write_text(text)
            for seed in (int(s) for s in args.seeds.split(",")):
                frame = synth("db", parse_duration_ns(args.duration, "--duration"), seed=seed, bursts=None)
                outcome = measure(f"sim:{device}", frame, plan, timing="faithful", wrap=True)
                measured = gains(outcome.before, outcome.after)
                read, device_read = measured["gain_pct"]["read"], measured["gain_pct_device"]["read"]
                waited = [int(((r.trace["op"] == "read") & (r.trace["issue_lag_ns"] > 0)).sum())
                          for r in (outcome.before, outcome.after)]
                table.add_row(window, str(seed), *(_pct(read.get(p)) for p in SHOWN),
                              " / ".join(_pct(device_read.get(p)) for p in ("p90", "p95", "p99")),
                              f"{waited[0]:,} -> {waited[1]:,}")
    Console(width=200).print(table)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{-value:+.1f} %"


if __name__ == "__main__":
    main()
