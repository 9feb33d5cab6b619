"""Wall and device time of every experiment of the suite at its default parameters, on a simulated drive.

The issue's goal: the whole suite at default sizes on the simulated 256 GB drive (the default preset) finishes
in under 30 minutes of wall time. All experiments run one after the other on one simulated device, as
``ftlscope profile`` would run them, so each finds the device in the state the previous one left (and
preconditions it as it declares).

    python bench/suite_runtime.py [--preset consumer-tlc-dram] [--only qd-sweep random-fill] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from rich.console import Console
from rich.table import Table

from ftlscope.experiments import EXPERIMENTS, get, run_experiment
from ftlscope.sim import DEFAULT_PRESET, SimDevice

GOAL_S = 30 * 60


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default=DEFAULT_PRESET)
    parser.add_argument("--only", nargs="*", help="run just these experiments")
    parser.add_argument("--out", help="keep the results here (default: a temporary directory)")
    args = parser.parse_args()
    names = args.only or list(EXPERIMENTS)
    device = SimDevice.open(args.preset)
    console = Console(width=None if sys.stdout.isatty() else 150)
    table = Table(title=f"Suite at default parameters on sim:{args.preset} "
                        f"({device.info['size_bytes'] / 1e9:.0f} GB)", title_justify="left")
    for col in ("experiment", "wall s", "device s", "engine runs", "points", "findings", "status"):
        table.add_column(col, justify="left" if col in ("experiment", "status") else "right")
    total_wall = total_device = 0.0
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or scratch
        for name in names:
            started = time.monotonic()
            outcome = run_experiment(get(name), device, out=out)
            wall = time.monotonic() - started
            device_s = outcome.conditions["device_time_s"]
            total_wall += wall
            total_device += device_s
            status = "ok" if outcome.completed else f"stopped: {outcome.error}"
            failures += not outcome.completed
            table.add_row(name, f"{wall:,.1f}", f"{device_s:,.1f}", str(len(outcome.conditions["runs"])),
                          str(len(outcome.table)), str(len(outcome.findings)), status)
            console.print(f"[dim]{name}: {wall:.1f} s wall, {device_s:.1f} s device[/dim]")
    table.add_section()
    verdict = "met" if total_wall < GOAL_S else "NOT met"
    table.add_row("total", f"{total_wall:,.1f}", f"{total_device:,.1f}", "", "", "",
                  f"goal < {GOAL_S / 60:.0f} min wall: {verdict}")
    console.print(table)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
