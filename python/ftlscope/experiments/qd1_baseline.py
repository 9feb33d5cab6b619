"""``qd1-baseline`` (seed 001 §2): one request at a time — the device's own service time, no queueing.
4 KiB random read and write, 128 KiB sequential read and write; mean, p50/p95/p99/p99.9, IOPS and MB/s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .. import plots
from ..units import format_size
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

# (mode, operation, request size parameter, offset pattern)
MODES = (
    ("4k-random-read", "read", "random_size", "random"),
    ("4k-random-write", "write", "random_size", "random"),
    ("128k-sequential-read", "read", "sequential_size", "sequential"),
    ("128k-sequential-write", "write", "sequential_size", "sequential"),
)


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    for mode, op, size_key, pattern in MODES:
        size = p[size_key]
        label = f"{format_size(size)} {pattern} {op}"
        wl = workload(op, size=size, pattern=pattern, qd=1, span=span, runtime_ns=p["runtime"],
                      warmup_ns=p["warmup"])
        result = ctx.run(wl, label)
        yield {"mode": mode, "op": op, "pattern": pattern, "size": size, **op_metrics(result, op)}


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    by_mode = table.set_index("mode")
    findings: dict[str, Any] = {}
    for mode, short in (("4k-random-read", "random_read"), ("4k-random-write", "random_write"),
                        ("128k-sequential-read", "sequential_read"),
                        ("128k-sequential-write", "sequential_write")):
        if mode not in by_mode.index:
            continue
        row = by_mode.loc[mode]
        evidence = f"results.csv row {mode}, QD 1"
        findings[f"{short}_lat_mean_us"] = finding(row["lat_mean_us"], "us", evidence)
        findings[f"{short}_lat_p99_us"] = finding(row["lat_p99_us"], "us", evidence)
        findings[f"{short}_iops"] = finding(row["iops"], "IOPS", evidence)
        findings[f"{short}_mb_s"] = finding(row["mb_s"], "MB/s", evidence)
    if {"4k-random-read", "4k-random-write"} <= set(by_mode.index):
        ratio = by_mode.loc["4k-random-write", "lat_mean_us"] / by_mode.loc["4k-random-read", "lat_mean_us"]
        findings["write_to_read_latency_ratio"] = finding(
            ratio, "ratio", "mean latency of 4 KiB random write / 4 KiB random read (below 1: writes are "
                            "absorbed by a cache)")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    labels = table["mode"].tolist()
    x = range(len(labels))
    out = []
    fig, ax = plots.figure("QD 1 mean latency (bars) with p99 (marks)", "", "latency (us)")
    ax.bar(x, table["lat_mean_us"], yerr=table.get("lat_mean_us_std"), capsize=4, color="tab:blue", alpha=0.8,
           label="mean")
    ax.plot(x, table["lat_p99_us"], "v", color="tab:red", label="p99")
    ax.set_xticks(list(x), labels, rotation=15)
    out.append(plots.save(fig, directory, "qd1_mean_latency",
                          "Mean latency (bars) and p99 (marks) of each access pattern at queue depth 1."))
    fig, ax = plots.figure("QD 1 IOPS", "", "IOPS")
    ax.bar(x, table["iops"], yerr=table.get("iops_std"), capsize=4, color="tab:green", alpha=0.8)
    ax.set_xticks(list(x), labels, rotation=15)
    out.append(plots.save(fig, directory, "qd1_iops", "IOPS of each access pattern at queue depth 1."))
    return out


EXPERIMENTS = [
    Experiment(
        name="qd1-baseline",
        summary="4 KiB random and 128 KiB sequential read/write at QD 1: latency percentiles, IOPS, MB/s",
        source="“SSD Performance Profiling” §2",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", 0, "range to use; 0 = the whole target", "0 (whole target)"),
            Param("runtime", "duration", 30 * 10**9, "measured time per mode", "30s"),
            Param("warmup", "duration", 5 * 10**9, "left out at the start of each mode", "5s"),
            Param("random_size", "size", 4096, "request size of the random modes", "4KiB"),
            Param("sequential_size", "size", 128 * 1024, "request size of the sequential modes", "128KiB"),
        ),
        keys=("mode", "op", "pattern", "size"),
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
