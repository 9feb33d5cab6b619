"""``locality`` (seed 000 §3.3.2, §5.7): the same region read sequentially and in a shuffled order (every
request-sized piece once, in a random permutation), at every power-of-two request size.

The seed read an 8 GiB section of each drive at "all supported read sizes that are a power of two" and found
sequential reads scale with size while shuffled ones do not always, sequential being over 10 times faster in
some cases. Here the question is also asked the other way: from which size on do shuffled reads keep up?
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .. import plots
from ..analysis.thresholds import first_sustained
from ..errors import UsageError
from ..units import format_size
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

GiB = 1 << 30
PATTERNS = (("sequential", "sequential"), ("shuffled", "permutation"))


def power_of_two_sizes(smallest: int, largest: int, limit: int) -> list[int]:
    """Every power of two from ``smallest`` to ``largest`` (both powers of two), none above ``limit``."""
    sizes = []
    size = smallest
    while size <= min(largest, limit):
        sizes.append(size)
        size *= 2
    return sizes


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def smallest_block(ctx: Context) -> int:
    """The smallest request the target takes: its logical block, at least 512 B (a file reports 1 B, but
    O_DIRECT on it needs the file system's alignment, 512 B or more)."""
    return max(int(ctx.logical_block), 512)


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    smallest = p["min_size"] or smallest_block(ctx)
    for name in ("min_size", "max_size"):
        if p[name] and not _is_power_of_two(p[name]):
            raise UsageError(f"--param {name}: give a power of two, not {p[name]} B")
    if smallest > p["max_size"]:
        raise UsageError(f"--param min_size: {format_size(smallest)} is above max_size {format_size(p['max_size'])}")
    if p["qd"] < 1:
        raise UsageError("--param qd: give at least 1")
    ctx.ensure_readable(span)
    for size in power_of_two_sizes(smallest, p["max_size"], span):
        for label, kind in PATTERNS:
            # One pass over the region, as the seed; the ops and time limits cut it short at small sizes.
            wl = workload("read", size=size, pattern=kind, qd=p["qd"], span=span, total_bytes=span // size * size,
                          ops=p["max_ops"] or None, runtime_ns=p["runtime"] or None, seed=1 + ctx.repetition)
            result = ctx.run(wl, f"{format_size(size)} {label} read")
            yield {"pattern": label, "size": size, **op_metrics(result, "read")}


def _pivot(table: pd.DataFrame, column: str) -> pd.DataFrame:
    return table.pivot_table(index="size", columns="pattern", values=column, aggfunc="mean").dropna()


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    for label, _ in PATTERNS:
        t = table[table["pattern"] == label]
        if t.empty:
            continue
        best = t.loc[t["mb_s"].idxmax()]
        findings[f"peak_{label}_mb_s"] = finding(best["mb_s"], "MB/s", f"results.csv, {label} reads: the best size, "
                                                 f"{format_size(best['size'])}")
    mb = _pivot(table, "mb_s")
    if not {"sequential", "shuffled"} <= set(mb.columns) or mb.empty:
        return findings
    ratio = mb["sequential"] / mb["shuffled"]
    if 4096 in ratio.index:
        findings["sequential_to_shuffled_ratio_4k"] = finding(
            ratio[4096], "ratio", f"results.csv, 4 KiB: sequential / shuffled MB/s ({mb.loc[4096, 'sequential']:.0f}"
                                  f" / {mb.loc[4096, 'shuffled']:.0f})")
    worst = ratio.idxmax()
    findings["max_sequential_to_shuffled_ratio"] = finding(
        ratio[worst], "ratio", f"results.csv: the size where sequential reads lead most is {format_size(worst)} "
                               f"({mb.loc[worst, 'sequential']:.0f} / {mb.loc[worst, 'shuffled']:.0f} MB/s)")
    tolerance = p["tolerance"] / 100
    keeps_up = (mb["shuffled"] >= (1 - tolerance) * mb["sequential"]).to_numpy()
    sizes = mb.index.to_numpy()
    from_size = first_sustained(sizes, keeps_up)
    if from_size is None:
        findings["shuffled_matches_sequential_from_bytes"] = finding(
            None, "B", f"results.csv: shuffled reads are more than {p['tolerance']:g} % slower than sequential "
                       f"ones at the largest size, {format_size(sizes.max())}")
    else:
        findings["shuffled_matches_sequential_from_bytes"] = finding(
            int(from_size), "B", f"results.csv: from {format_size(from_size)} on, shuffled reads are within "
                                 f"{p['tolerance']:g} % of sequential ones (or faster) at every size measured, up to "
                                 f"{format_size(sizes.max())}")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    out = []
    # The seed's figures 5.14 (sequential) and 5.15 (random) as two lines on one plot, MB/s and IOPS.
    for metric, unit in (("mb_s", "MB/s"), ("iops", "IOPS")):
        region = format_size(p["span"]) if p["span"] else "whole-target"
        fig, ax = plots.figure(f"Read {unit}, {region} region, QD {p['qd']}: sequential vs shuffled",
                               "request size", unit)
        for label, _ in PATTERNS:
            t = table[table["pattern"] == label].sort_values("size")
            plots.line(ax, t["size"], t[metric], t.get(f"{metric}_std"), label=label)
        plots.size_axis(ax)
        if metric == "iops":
            ax.set_yscale("log")
        matched = findings.get("shuffled_matches_sequential_from_bytes", {}).get("value")
        if matched:
            ax.axvline(matched, color="grey", linestyle=":", label="shuffled keeps up from here")
        out.append(plots.save(fig, directory, f"locality_{metric}",
                              f"Read {unit} against request size for sequential and shuffled order in the {region} "
                              "region; the mark is where shuffled order keeps up."))
    mb = _pivot(table, "mb_s")
    if {"sequential", "shuffled"} <= set(mb.columns) and not mb.empty:
        fig, ax = plots.figure("Sequential / shuffled throughput", "request size", "ratio")
        plots.line(ax, mb.index, mb["sequential"] / mb["shuffled"])
        ax.axhline(1.0, color="grey", linewidth=0.8)
        plots.size_axis(ax)
        out.append(plots.save(fig, directory, "locality_ratio",
                              "Sequential throughput divided by shuffled throughput at each request size; 1 means "
                              "the order does not matter."))
    return out


EXPERIMENTS = [
    Experiment(
        name="locality",
        summary="an 8 GiB region read sequentially and shuffled at every power-of-two size: throughput, and the "
                "size from which shuffled reads keep up",
        source="“What does the Flash Translation Layer do?” §3.3.2, §5.7",
        writes=False,
        preconditioning="none",
        params=(
            Param("span", "size", 8 * GiB, "region read (from the start of the target); 0 = the whole target",
                  "8GiB"),
            Param("min_size", "size", 0, "smallest request (a power of two); 0 = the target's logical block",
                  "0 (logical block)"),
            Param("max_size", "size", 1 << 20, "largest request (a power of two)", "1MiB"),
            Param("qd", "int", 64, "queue depth (the seed's maximum)", "64"),
            Param("max_ops", "int", 262144, "reads per point at most (0 = no limit): small sizes read only part "
                  "of the region", "262144"),
            Param("runtime", "duration", 10 * 10**9, "time limit per point (0 = none)", "10s"),
            Param("tolerance", "float", 10.0, "shuffled reads 'keep up' when at most this many % slower", "10"),
        ),
        keys=("pattern", "size"),
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
