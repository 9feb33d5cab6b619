#!/usr/bin/env python3
"""Do a mix's reads wait in proportion to its writes? The NV2's mixed cells of the "SSD Performance Report", each
5:5 cell against the 7:3 cell of the same request size and queue depth, published against simulated.

For every request size (4, 32, 128 KiB) and queue depth (64, 512, 1024) of the Report's Tables 1-12 it measures the
5:5 and the 7:3 mix on the NV2's preset (each cell as ``bench/fidelity.py`` does: a device of its own, the cell's
requests in flight) once per ``device.seed``, and prints the ratios 5:5 / 7:3 of the reads' mean latency, of the
writes' mean latency and of the read traffic (reads per second), the Report's and the model's (the mean over the
seeds, with their range), and each mix's reads and writes in flight (rate x mean latency). A mechanism that makes a
mix's reads wait in proportion to its writes shows as a read-latency ratio that stays near 1 while the read traffic
falls to ~0.6; a model whose reads cost only what they queue behind gives a ratio that falls with the traffic.

    python bench/fidelity_mix_ratios.py [--seeds 1-4] [--device FILE.toml] [--csv ratios.csv]

About 10 s of wall time a seed at a load of ~8 (18 cells, each filling a 1 GiB span first).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from fidelity_seeds import seeds_from
from rich.console import Console
from rich.table import Table

from ftlscope.fidelity import measure, published

console = Console(width=200)
SIZES = ("4k", "32k", "128k")
MIXES = ("5:5", "7:3")
METRICS = ("read.lat_mean", "write.lat_mean", "read.iops", "write.iops")


def published_cell(bs: str, mix: str, qd: int) -> dict[str, float]:
    """The Report's read and write rate (requests/s) and mean latency (us) of one mixed cell."""
    out: dict[str, float] = {}
    column = published._REPORT_QDS.index(qd)
    for _table, tbs, op, stat, _unit, rows in published._REPORT_TABLES:
        if tbs != bs or mix not in rows:
            continue
        value = float(rows[mix][column])
        if stat == "lat_mean":
            out[f"{op}.lat_mean"] = value
        else:
            out[f"{op}.iops"] = value * 1e3 if stat == "iops" else value * 1e6 / (int(bs[:-1]) * 1024)
    return out


def simulated_cell(fid: measure.Fidelity, bs: str, mix: str, qd: int) -> dict[str, float]:
    """The same cell on the preset, as bench/fidelity.py measures it (latency in us, rates in requests/s)."""
    params = published.report_params(bs, mix, qd)
    metrics = fid.metrics(published.DRIVES["NV2"].preset, "steady", params)
    return {m: metrics[m] / (1e3 if m.endswith("lat_mean") else 1.0) for m in METRICS}


def measure_all(seeds: list[int], files: dict[str, str], settings: measure.Settings) -> pd.DataFrame:
    rows = []
    with tempfile.TemporaryDirectory(prefix="fidelity-mix-") as scratch:
        for seed in seeds:
            fid = measure.Fidelity(settings, device_opener=measure.seeded_opener(files, seed, Path(scratch)))
            for bs in SIZES:
                for qd in published._REPORT_QDS:
                    for mix in MIXES:
                        rows.append({"seed": seed, "bs": bs, "qd": qd, "mix": mix, **simulated_cell(fid, bs, mix, qd)})
    return pd.DataFrame(rows)


def ratio(cells: dict[str, dict[str, float]], metric: str) -> float:
    return cells["5:5"][metric] / cells["7:3"][metric]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1-4", help="device seeds: a range 1-4 or a list 1,4,6 (default 1-4)")
    parser.add_argument("--device", metavar="FILE.toml", help="measure this device file instead of the NV2's preset")
    parser.add_argument("--runtime", default=measure.Settings.runtime, help="each measuring run (default 2s)")
    parser.add_argument("--csv", help="also write every simulated cell (per seed) to this CSV file")
    args = parser.parse_args()
    seeds = seeds_from(parser, args.seeds)
    files = {published.DRIVES["NV2"].preset: args.device} if args.device else {}

    started = time.perf_counter()
    sim = measure_all(seeds, files, measure.Settings(runtime=args.runtime))
    if args.csv:
        sim.to_csv(args.csv, index=False)

    table = Table(title="NV2 mixes: 5:5 / 7:3 at the same request size and depth, Report against model "
                        f"(model: mean over seeds {args.seeds}, \\[lowest-highest])")
    for column in ("size", "QD", "read traffic R / M", "read latency R / M", "write latency R / M",
                   "reads in flight 5:5 / 7:3, R | M", "writes in flight 5:5 / 7:3, R | M"):
        table.add_column(column, justify="right")
    for bs in SIZES:
        for qd in published._REPORT_QDS:
            report = {mix: published_cell(bs, mix, qd) for mix in MIXES}
            per_seed = sim[(sim.bs == bs) & (sim.qd == qd)]
            model_ratios = {m: [] for m in METRICS}
            for _seed, group in per_seed.groupby("seed"):
                cells = {row.mix: {m: getattr(row, m.replace(".", "_")) for m in METRICS}
                         for row in group.rename(columns=lambda c: c.replace(".", "_")).itertuples()}
                for m in METRICS:
                    model_ratios[m].append(ratio(cells, m))
            mean = per_seed.groupby("mix")[list(METRICS)].mean()

            def both(metric: str, report=report, model_ratios=model_ratios) -> str:
                values = model_ratios[metric]
                return (f"{ratio(report, metric):.2f} / {np.mean(values):.2f} "
                        f"[{min(values):.2f}-{max(values):.2f}]")

            def in_flight(op: str, report=report, mean=mean) -> str:
                held = [report[mix][f"{op}.iops"] * report[mix][f"{op}.lat_mean"] * 1e-6 for mix in MIXES]
                model = [mean.loc[mix, f"{op}.iops"] * mean.loc[mix, f"{op}.lat_mean"] * 1e-6 for mix in MIXES]
                return f"{held[0]:.0f} / {held[1]:.0f} | {model[0]:.0f} / {model[1]:.0f}"

            table.add_row(bs, str(qd), both("read.iops"), both("read.lat_mean"), both("write.lat_mean"),
                          in_flight("read"), in_flight("write"))
    console.print(table)
    console.print(f"R = the Report, M = the model; wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
