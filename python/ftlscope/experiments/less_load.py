"""``less-load-latency`` ("Fantastic SSD Internals and How to Learn and Use Them" §4.6, Figure 5): batches of C
concurrent random page reads, each batch issued at one instant once the previous one has completed, for several
C; the mean latency of the i-th returned read of a batch, for every i and C. Usually a lone read is the fastest;
the paper found a drive (N2TI) where it is slower than the first reads of a batch of 16 ("less load, higher
latency": the drive seems to favour throughput).

Per (batch size, i): the mean latency (the paper's figure), the median, its standard error and the batches
counted. Findings:

- ``lone_read_lat_mean_us``: the mean latency of batches of one (the smallest batch size, when it is not 1);
- ``first_returned_lat_mean_us``: the mean latency of the first returned read of the largest batches;
- ``less_load_penalty_pct``: how much longer the lone read takes than that first returned read, in %;
  That alone says little: the first of 16 reads is the quickest of 16, sooner than an average lone read on any
  drive whose reads vary (page types). So, beside each point, ``independent_mean_us``: the i-th smallest of C
  lone-read latencies drawn independently (what a batch would give if its reads neither helped nor hindered);
- ``order_statistic_gap_pct``: how much sooner the first of the largest batch returns than that expectation;
- ``less_load_higher_latency``: whether it returns sooner by more than ``min_effect`` (%) and three standard
  errors: load itself shortens latency (the paper's N2TI). False where reads only contend;
- ``faster_than_independent_share``: the share of all (C > 1, i) points that beat their independent expectation
  by the same test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..units import format_size
from ._common import workload
from .base import Experiment, Param, finding
from .context import Context

SIGNIFICANCE = 3.0  # standard errors of a difference that make it real


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    lone: np.ndarray | None = None
    for c in sorted(set(p["batch_sizes"])):
        wl = workload("read", size=p["size"], pattern="random", qd=c, span=span, ops=c * p["batches"],
                      batch={"size": c, "idle_ns": 0})
        trace = ctx.run(wl, f"{p['batches']} batches of {c} concurrent {format_size(p['size'])} random reads",
                        trace=True).trace
        reads = trace[trace["op"] == "read"]
        if c == 1:
            lone = reads["latency_ns"].to_numpy(dtype=float) / 1e3
        yield from returned_order(reads, c, lone)


def independent_order(lone: np.ndarray, batch_size: int, draws: int = 4000, seed: int = 1) -> np.ndarray:
    """The mean i-th smallest of ``batch_size`` lone-read latencies drawn independently (i = 1..batch_size):
    what the i-th returned read of a batch would take if its reads neither helped nor hindered each other.
    The first of 16 returns sooner than a lone read on every drive whose reads vary (page types, noise): only
    a batch faster than this says that load itself shortens latency. Monte Carlo, seeded (repeatable)."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(lone, size=(draws, batch_size)), axis=1).mean(axis=0)


def returned_order(trace: pd.DataFrame, batch_size: int, lone: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Rows per i-th returned read: a batch is the reads submitted at one instant; within it, the i-th to
    complete; beside it the same order statistic of independent lone reads (:func:`independent_order`)."""
    t = trace.sort_values(["submit_ns", "complete_ns"])
    batch = np.unique(t["submit_ns"].to_numpy(), return_inverse=True)[1]
    frame = pd.DataFrame({"batch": batch, "lat": t["latency_ns"].to_numpy(dtype=float) / 1e3})
    sizes = frame.groupby("batch")["lat"].transform("size")
    frame = frame[sizes == batch_size]  # a batch the engine split (end of the run) says nothing about order
    frame = frame.assign(i=frame.groupby("batch").cumcount() + 1)
    independent = independent_order(lone, batch_size) if lone is not None and len(lone) else None
    rows = []
    for i, g in frame.groupby("i"):
        lat = g["lat"].to_numpy()
        rows.append({"batch_size": batch_size, "i": int(i), "lat_mean_us": float(lat.mean()),
                     "lat_median_us": float(np.median(lat)),
                     "lat_sem_us": float(lat.std(ddof=1) / np.sqrt(len(lat))) if len(lat) > 1 else float("nan"),
                     "batches": int(len(lat)),
                     "independent_mean_us": float(independent[int(i) - 1]) if independent is not None
                     else float("nan")})
    return rows


def _slower(a: pd.Series, b: pd.Series, min_effect: float) -> bool:
    """Whether ``a`` (a row's mean and standard error) is really slower than ``b``."""
    diff = a["lat_mean_us"] - b["lat_mean_us"]
    sem = float(np.hypot(a["lat_sem_us"], b["lat_sem_us"]))
    return bool(diff > min_effect / 100 * b["lat_mean_us"] and diff > SIGNIFICANCE * sem)


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    sizes = sorted(table["batch_size"].unique())
    if len(sizes) < 2:
        return {}
    smallest, largest = int(sizes[0]), int(sizes[-1])
    lone = table[(table["batch_size"] == smallest) & (table["i"] == 1)].iloc[0]
    first = table[(table["batch_size"] == largest) & (table["i"] == 1)].iloc[0]
    penalty = (lone["lat_mean_us"] - first["lat_mean_us"]) / first["lat_mean_us"] * 100
    where = f"results.csv: batch_size {smallest} i 1 against batch_size {largest} i 1"
    findings = {
        "lone_read_lat_mean_us": finding(float(lone["lat_mean_us"]), "us", f"results.csv batch_size {smallest}"),
        "first_returned_lat_mean_us": finding(float(first["lat_mean_us"]), "us",
                                              f"results.csv batch_size {largest}, i 1"),
        "less_load_penalty_pct": finding(float(penalty), "%", where + " (the paper's comparison)"),
        "less_load_higher_latency": finding(None, "bool", "needs batch size 1"),
        "faster_than_independent_share": finding(None, "share", "needs batch size 1"),
    }
    if smallest != 1 or table["independent_mean_us"].isna().all():
        return findings
    # Against independent lone reads: the i-th returned of a batch beating the i-th smallest of as many lone
    # reads means the batch itself made reads faster.
    expected = pd.Series({"lat_mean_us": first["independent_mean_us"], "lat_sem_us": lone["lat_sem_us"]})
    findings["order_statistic_gap_pct"] = finding(
        float((first["independent_mean_us"] - first["lat_mean_us"]) / first["lat_mean_us"] * 100), "%",
        f"results.csv batch_size {largest} i 1: independent_mean_us over lat_mean_us")
    findings["less_load_higher_latency"] = finding(
        _slower(expected, first, p["min_effect"]), "bool",
        f"the first of {largest} concurrent reads returns more than {p['min_effect']:g} % and {SIGNIFICANCE:g} "
        f"standard errors sooner than the first of {largest} independent lone reads would")
    faster = [_slower(pd.Series({"lat_mean_us": r["independent_mean_us"], "lat_sem_us": lone["lat_sem_us"]}), r,
                      p["min_effect"]) for _, r in table[table["batch_size"] > 1].iterrows()]
    findings["faster_than_independent_share"] = finding(
        float(np.mean(faster)) if faster else None, "share",
        "share of the (batch size, i) points whose read returned sooner than the same order statistic of "
        "independent lone reads")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    fig, ax = plots.figure("Less load, higher latency? Latency of the i-th returned read of a batch",
                           "i-th returned read of the batch", "mean latency (us)")
    for c, g in table.groupby("batch_size"):
        marker = "s" if c == 1 else "o"
        line = ax.errorbar(g["i"], g["lat_mean_us"], yerr=g["lat_sem_us"], marker=marker, markersize=4, capsize=2,
                           label=f"C = {int(c)}")
        if c > 1 and g["independent_mean_us"].notna().any():
            ax.plot(g["i"], g["independent_mean_us"], linestyle=":", color=line[0].get_color(), linewidth=1)
    ax.legend(fontsize=8)
    return [plots.save(fig, directory, "less_load_latency",
                       "Mean latency of the i-th read to return in batches of C concurrent random reads (the "
                       "paper's Figure 5); dotted: the same order statistic of independent lone reads. A batch "
                       "below its dotted line returned sooner than lone reads would: less load, higher latency.")]


EXPERIMENTS = [
    Experiment(
        name="less-load-latency",
        summary="latency of the i-th returned read in batches of C concurrent random reads, for several C "
                "(less load, higher latency?)",
        source="Fantastic SSD Internals §4.6, Figure 5",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", 1 << 30, "range read (filled first)", "1GiB"),
            Param("batch_sizes", "ints", [1, 2, 4, 8, 16], "concurrent reads per batch (C)", "1,2,4,8,16"),
            Param("batches", "int", 2000, "batches per batch size", "2000"),
            Param("size", "size", 4096, "read size (a page)", "4KiB"),
            Param("min_effect", "float", 5.0, "smallest difference (%) reported as an effect", "5"),
        ),
        keys=("batch_size", "i"),
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
