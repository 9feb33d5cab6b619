#!/usr/bin/env python3
"""How far does each published point's error move with the simulated drive's noise draw alone?

Measures every published number of one drive (as bench/fidelity.py does) once per ``device.seed`` (the seed the
``[noise]`` draws derive from; nothing else changes), and prints per seed the median and worst absolute error and
the points above 50 %, then the points whose error swings most across the seeds or comes near the 50 % line in any
of them: each seed's error, their mean, and their spread (highest - lowest). A point whose error swings by tens of
points with the seed is not measured by one run; ``--runtime`` shows whether a longer measuring run steadies it.

    python bench/fidelity_seeds.py [--drive NV2] [--seeds 1-8] [--runtime 2s] [--near 35] [--csv seeds.csv]
                                   [--device FILE.toml]

The NV2 takes ~20 s of wall time a seed on a quiet machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from ftlscope.fidelity import measure, published

console = Console(width=200)
GOAL_WORST = 50.0


def parse_seeds(text: str) -> list[int]:
    """``1-8`` or ``1,4,6`` (or both: ``1-4,9``)."""
    seeds: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        seeds += list(range(int(first), int(last or first) + 1))
    return seeds


def seeds_from(parser: argparse.ArgumentParser, text: str) -> list[int]:
    """``--seeds`` parsed, or the parser's one-line error naming the flag (both seed benches take it)."""
    try:
        seeds = parse_seeds(text)
    except ValueError:
        parser.error(f"--seeds: give a range like 1-8 or a list like 1,4,6 (got {text!r})")
    if not seeds or min(seeds) < 0:
        parser.error(f"--seeds: give seeds of 0 or more (got {text!r})")
    return seeds


def errors_by_seed(drive: str, seeds: list[int], settings: measure.Settings,
                   files: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per point of ``drive`` (its parameters and metric), one column of signed errors (%) per seed;
    ``files`` maps a preset to a device file measured in its place (as bench/fidelity.py's --device)."""
    points, _shapes = published.by_drive(drive)
    columns = {}
    with tempfile.TemporaryDirectory(prefix="fidelity-seeds-") as scratch:
        for seed in seeds:
            fid = measure.Fidelity(settings, device_opener=measure.seeded_opener(files or {}, seed, Path(scratch)))
            columns[seed] = [measure.error_pct(p.value, fid.measure(p)) for p in points]
    index = [f"{p.where}: {' '.join(f'{k}={v}' for k, v in p.params.items() if k not in ('device', 'span'))} "
             f"{p.metric}" for p in points]
    return pd.DataFrame(columns, index=index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drive", default="NV2", choices=sorted(published.DRIVES))
    parser.add_argument("--seeds", default="1-8", help="device seeds: a range 1-8 or a list 1,4,6 (default 1-8)")
    parser.add_argument("--runtime", default=measure.Settings.runtime, help="each measuring run (default 2s)")
    parser.add_argument("--near", type=float, default=35.0,
                        help="list points whose |error| reaches this in any seed, or that swing by 15+ points")
    parser.add_argument("--csv", help="also write every point's error per seed to this CSV file")
    parser.add_argument("--device", metavar="FILE.toml",
                        help="measure the drive on this device file instead of its preset")
    args = parser.parse_args()
    seeds = seeds_from(parser, args.seeds)

    started = time.perf_counter()
    files = {published.DRIVES[args.drive].preset: args.device} if args.device else {}
    errors = errors_by_seed(args.drive, seeds, measure.Settings(runtime=args.runtime), files)
    if args.csv:
        errors.to_csv(args.csv)
    summary = Table(title=f"{args.drive}: error per seed (goal: median <= 15 %, worst <= {GOAL_WORST:.0f} %)")
    for column in ("device.seed", "points", "median %", "worst %", f"points above {GOAL_WORST:.0f} %"):
        summary.add_column(column, justify="right")
    for seed in seeds:
        a = errors[seed].abs()
        summary.add_row(str(seed), str(len(a)), f"{a.median():.1f}", f"{a.max():.0f}", str(int((a > GOAL_WORST).sum())))
    console.print(summary)

    spread = errors.max(axis=1) - errors.min(axis=1)
    near = errors[(errors.abs().max(axis=1) >= args.near) | (spread >= 15)]
    table = Table(title=f"Points near the line or moving with the seed (runtime {args.runtime})")
    table.add_column("point")
    for seed in seeds:
        table.add_column(f"seed {seed}", justify="right")
    for column in ("mean", "spread"):
        table.add_column(column, justify="right")
    for name, row in near.iterrows():
        table.add_row(name, *(f"{v:+.0f}" for v in row), f"{np.mean(row):+.0f}", f"{spread[name]:.0f}")
    console.print(table)
    console.print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
