"""Wall time of ``ftlscope profile --suite system`` on a simulated SSD and hard disk served to the kernel (issue
18's goal: the pair at ``--size 16GiB`` in under 20 minutes). Each preset is attached (``ftlscope sim attach
--size``), profiled on its loop device with the system suite's defaults as ``ftlscope profile /dev/loopN
--suite system --destructive /dev/loopN`` runs it, and detached; the table gives each experiment's wall time.
The profiles are kept in ``--out`` (with a store, runs.sqlite) for ``ftlscope compare``.

    sudo python bench/system_suite_runtime.py [--presets consumer-tlc-dram hdd-7200-consumer] [--size 16GiB]
        [--out DIR] [--only scheduler-impact ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ftlscope import attach
from ftlscope.profile.runner import finish, profile
from ftlscope.profile.suites import Suite, get_suite

GOAL_S = 20 * 60


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="*", default=["consumer-tlc-dram", "hdd-7200-consumer"])
    parser.add_argument("--size", default="16GiB")
    parser.add_argument("--out", help="keep the profiles here (default: a temporary directory)")
    parser.add_argument("--only", nargs="*", help="run just these experiments of the suite")
    args = parser.parse_args()
    console = Console(width=None if sys.stdout.isatty() else 150)
    root = Path(args.out or tempfile.mkdtemp(prefix="ftlscope-system-bench-"))
    table = Table(title=f"ftlscope profile --suite system on attached drives (--size {args.size})",
                  title_justify="left")
    for col in ("preset", "experiment", "wall s", "completed"):
        table.add_column(col, justify="right" if col == "wall s" else "left")
    total = 0.0
    suite = get_suite("system")
    if args.only:
        steps = tuple(step for step in suite.steps if step.experiment in args.only)
        suite = Suite(suite.name, suite.summary, suite.probes, steps)
    for preset in args.presets:
        started = time.monotonic()
        store = root / "store" / preset
        record = attach.attach(preset, args.size, str(store))
        try:
            outcome = profile(record.device, suite=suite, out=root / preset, destructive=record.device)
            finish(outcome, db=root / "runs.sqlite")
        finally:
            attach.detach(record.device)
        wall = time.monotonic() - started
        total += wall
        for entry in outcome.record["experiments"]:
            table.add_row(preset, entry["name"], f"{entry['wall_time_s']:,.1f}",
                          "yes" if entry["completed"] else f"no: {entry['stopped']}")
        table.add_row(preset, "whole profile (with attach and detach)", f"{wall:,.1f}",
                      "yes" if outcome.error is None else f"no: {outcome.error}")
        table.add_section()
        console.print(f"[dim]{preset}: {wall:.1f} s wall ({outcome.directory})[/dim]")
    verdict = "met" if total < GOAL_S else "NOT met"
    table.add_row("total", "", f"{total:,.1f}", f"goal < {GOAL_S / 60:.0f} min: {verdict}")
    console.print(table)
    console.print(f"profiles and store in {root}")
    return 0 if total < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
