"""Wall time of `ftlscope profile` per suite on the default simulated drive, against issue 6's goals: quick
under 2 minutes, standard under 15 minutes (on this 2-core machine). Each suite runs in a fresh process-state
device exactly as `ftlscope profile --suite S` runs it (probes, experiments, report, store), and the table
gives wall and device time per part and in total, with the ratio to the goal.

    python bench/profile_runtime.py [--suites quick standard full] [--preset consumer-tlc-dram] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ftlscope.profile.runner import finish, profile
from ftlscope.sim import DEFAULT_PRESET

GOALS_S = {"quick": 2 * 60, "standard": 15 * 60, "full": None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", nargs="*", default=["quick", "standard"], choices=list(GOALS_S))
    parser.add_argument("--preset", default=DEFAULT_PRESET)
    parser.add_argument("--out", help="keep the profiles here (default: a temporary directory)")
    args = parser.parse_args()
    console = Console(width=None if sys.stdout.isatty() else 150)
    root = Path(args.out or tempfile.mkdtemp(prefix="ftlscope-profile-bench-"))
    summary = Table(title=f"ftlscope profile on sim:{args.preset}", title_justify="left")
    for col in ("suite", "parts", "wall s", "device s", "goal s", "wall / goal", "completed"):
        summary.add_column(col, justify="left" if col in ("suite", "completed") else "right")
    for suite in args.suites:
        started = time.monotonic()
        outcome = profile(f"sim:{args.preset}", suite=suite, out=root / suite)
        finish(outcome, db=root / "runs.sqlite")
        wall = time.monotonic() - started
        record = outcome.record
        parts = Table(title=f"{suite}: wall and device time per part", title_justify="left")
        for col in ("part", "wall s", "device s"):
            parts.add_column(col, justify="left" if col == "part" else "right")
        if record["probes"]:
            parts.add_row("probes P1-P10", f"{record['probes']['wall_time_s']:.1f}",
                          f"{record['probes']['device_time_s']:,.0f}")
        for entry in record["experiments"]:
            parts.add_row(entry["name"], f"{entry['wall_time_s']:.1f}", f"{entry['device_time_s']:,.0f}")
        parts.add_row("report, store", f"{wall - record['wall_time_s']:.1f}", "")
        console.print(parts)
        goal = GOALS_S[suite]
        summary.add_row(suite, str(len(record["experiments"]) + bool(record["probes"])), f"{wall:.1f}",
                        f"{record['device_time_s']:,.0f}", str(goal or "-"), f"{wall / goal:.2f}" if goal else "-",
                        "yes" if record["completed"] else f"no: {record['stopped']}")
    console.print(summary)
    console.print(f"profiles in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
