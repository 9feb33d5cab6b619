"""``working-set`` (seed 001 §6.1, §6.3): 4 KiB random reads, then random writes, confined to working sets of
increasing size up to the whole span: latency (mean, p99, p99.9), tail and IOPS against working-set size.

The working set is the workload's ``range`` (offset 0, length = the set), requests uniformly random in it.
Not the ``hot_set`` pattern with share 1.0: that draws from the same set, but ``range`` says it directly,
keeps every run's summary plain (range 0..W), and works the same on every engine.

The range is filled sequentially first (the declared preconditioning), then the device idles ``settle`` so
its write buffer drains and its SLC cache folds: otherwise the first GBs written (still in fast SLC pages)
read faster than the rest, and that difference of data *placement* would look like a working-set effect.
All reads run before the first write, so they see the filled layout.

Findings, per direction (``read_``/``write_``): ``lat_mean_us``, ``lat_p99_us``, ``iops`` at the smallest and
the largest working set (``_smallest``/``_full``), ``lat_p99_9_us_full``, and ``latency_growth_pct`` /
``p99_growth_pct`` (largest over smallest, in %). Then:

- ``read_latency_step_bytes``: the smallest working set from which the mean read latency stays more than
  ``step`` (10 %) above the smallest set's (None: no step, e.g. a drive with the whole mapping table in DRAM);
- ``mapping_cache_coverage_bytes``: the working set the step points to, from a fit of the model of a
  mapping cache holding the entries of C bytes of data: reads over a set W > C miss with probability 1 - C/W
  (uniform random accesses, LRU), so mean latency = base + miss x max(0, 1 - C/W) (:func:`coverage_fit`);
  ``map_miss_us`` is the fitted miss cost; ``mapping_cache_bytes_estimate`` = C / 4 KiB x 4 B, the RAM such a
  cache needs with 4-byte entries per 4 KiB page (the usual FTL ratio, 1/1024). Reported with the step only;
  a step can also have another cause (data of slower pages beyond some size), which the evidence says;
- ``littles_law_max_error_pct``: the worst |QD / mean latency - IOPS| / IOPS over all points (§6.3: at one
  concurrency, longer service time means proportionally lower throughput).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis import littles_law, thresholds
from ..errors import UsageError
from ..units import format_size
from ._common import check_qd, finding_value, op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

MiB, GiB = 1 << 20, 1 << 30
S = 10**9
OPS = ("read", "write")
# Bytes of mapping entry per 4 KiB page in a page-mapped FTL (a 32-bit physical page number).
ENTRY_BYTES = 4
ENTRY_PAGE = 4096


def sizes_for(p: dict[str, Any], span: int) -> list[int]:
    """The working-set sizes: ``sizes`` if given (each at most the span), else powers of two from
    ``min_size`` up to the span, and the span itself; each rounded down to a whole number of requests."""
    request = p["size"]
    if p["sizes"]:
        too_big = [s for s in p["sizes"] if s > span]
        if too_big:
            raise UsageError(f"--param sizes: {format_size(too_big[0])} is larger than the span "
                             f"({format_size(span)})")
        chosen = sorted(set(p["sizes"]))
    else:
        chosen = []
        size = p["min_size"]
        while size < span:
            chosen.append(size)
            size *= 2
        chosen.append(span)
    out = sorted({s // request * request for s in chosen})
    if not out or out[0] < request:
        raise UsageError(f"--param sizes: a working set must hold at least one {format_size(request)} request")
    return out


def _check(p: dict[str, Any]) -> None:
    unknown = [op for op in p["ops"] if op not in OPS]
    if unknown or not p["ops"]:
        raise UsageError(f"--param ops: use read, write or both (got {','.join(p['ops'])})")
    check_qd(p)
    if p["min_size"] < p["size"]:
        raise UsageError(f"--param min_size: give at least the request size {format_size(p['size'])}")
    if p["span"] > 0 and any(s > p["span"] for s in p["sizes"]):
        raise UsageError(f"--param sizes: {format_size(max(p['sizes']))} is larger than the span "
                         f"({format_size(p['span'])})")


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    sizes = sizes_for(p, span)
    ctx.ensure_readable(span)
    ctx.idle(p["settle"])
    for op in (o for o in OPS if o in p["ops"]):  # reads first: they see the filled layout
        for ws in sizes:
            wl = workload(op, size=p["size"], pattern="random", qd=p["qd"], span=ws, runtime_ns=p["runtime"],
                          warmup_ns=p["warmup"], seed=1 + ctx.repetition)
            result = ctx.run(wl, f"{format_size(p['size'])} random {op} QD {p['qd']} over {format_size(ws)}")
            yield {"op": op, "working_set": ws, "size": p["size"], "qd": p["qd"], **op_metrics(result, op)}


# ---- analysis ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Coverage:
    """Mean latency = base + miss x max(0, 1 - coverage / working set): the fit of a cache covering
    ``coverage`` bytes of data, whose misses cost ``miss`` (same unit as the latencies)."""

    coverage: float
    base: float
    miss: float
    residual: float  # root mean square of the fit


def coverage_fit(working_set, latency, *, grid: int = 400) -> Coverage | None:
    """Fit :class:`Coverage` to mean latencies measured at several working-set sizes: a search over the
    coverage (a log grid from half the smallest to the largest size, plus the sizes themselves) with a linear
    least-squares fit of base and miss cost at each. None with fewer than three sizes or no rise.
    Hand-written because the model has a kink (no miss below the coverage) that gradient fits handle badly,
    and a one-dimensional search is exact enough and cannot diverge."""
    w = np.asarray(working_set, dtype=float)
    y = np.asarray(latency, dtype=float)
    ok = np.isfinite(w) & np.isfinite(y) & (w > 0)
    w, y = w[ok], y[ok]
    if len(np.unique(w)) < 3:
        return None
    candidates = np.unique(np.concatenate([np.geomspace(w.min() / 2, w.max(), grid), w]))
    best: Coverage | None = None
    for c in candidates:
        x = np.clip(1.0 - c / w, 0.0, None)
        if not np.any(x > 0):
            continue
        design = np.column_stack([np.ones_like(x), x])
        (base, miss), *_ = np.linalg.lstsq(design, y, rcond=None)
        if miss <= 1e-9 * max(float(np.abs(y).max()), 1.0):
            continue  # no rise (a flat curve fits with a zero miss cost at any coverage)
        rms = float(np.sqrt(np.mean((design @ np.array([base, miss]) - y) ** 2)))
        if best is None or rms < best.residual - 1e-12:
            best = Coverage(float(c), float(base), float(miss), rms)
    return best


def _row_findings(findings: dict[str, Any], t: pd.DataFrame, op: str) -> None:
    small, full = t.iloc[0], t.iloc[-1]
    at_small = f"results.csv {op} row at the smallest working set, {format_size(small['working_set'])}"
    at_full = f"results.csv {op} row at the largest working set, {format_size(full['working_set'])}"
    for column, unit in (("lat_mean_us", "us"), ("lat_p99_us", "us"), ("iops", "IOPS")):
        findings[f"{op}_{column}_smallest"] = finding(small[column], unit, at_small)
        findings[f"{op}_{column}_full"] = finding(full[column], unit, at_full)
    findings[f"{op}_lat_p99_9_us_full"] = finding(full["lat_p99_9_us"], "us", at_full)
    for column, name in (("lat_mean_us", "latency_growth_pct"), ("lat_p99_us", "p99_growth_pct")):
        if small[column] > 0:
            findings[f"{op}_{name}"] = finding(
                (full[column] / small[column] - 1) * 100, "%",
                f"{column} at {format_size(full['working_set'])} over {format_size(small['working_set'])}, minus 1")


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    for op in OPS:
        t = table[table["op"] == op].sort_values("working_set").reset_index(drop=True)
        if not t.empty:
            _row_findings(findings, t, op)

    reads = table[table["op"] == "read"].sort_values("working_set").reset_index(drop=True)
    if len(reads) >= 2:
        ws, lat = reads["working_set"].to_numpy(dtype=float), reads["lat_mean_us"].to_numpy(dtype=float)
        rise = thresholds.relative_change(lat, lat[0])
        step = thresholds.first_sustained(ws, rise > p["step"])
        if step is None or step == ws[0]:
            findings["read_latency_step_bytes"] = finding(
                None, "bytes",
                f"the mean read latency never stayed more than {p['step']:.0%} above the smallest set's "
                f"{lat[0]:.1f} us (largest rise {np.nanmax(rise):+.1%}): no working-set step")
        else:
            below = ws[ws < step].max()
            findings["read_latency_step_bytes"] = finding(
                step, "bytes",
                f"smallest working set from which the mean read latency stays more than {p['step']:.0%} above the "
                f"{format_size(ws[0])} set's {lat[0]:.1f} us; {format_size(below)} was still within it "
                "(working_set_latency.png)")
            fit = coverage_fit(ws, lat)
            if fit is not None:
                cause = ("a mapping cache holding the entries of that much data (DRAM-less/HMB drives), or data "
                         "in slower pages beyond it")
                findings["mapping_cache_coverage_bytes"] = finding(
                    fit.coverage, "bytes",
                    f"fit of mean read latency = {fit.base:.1f} us + {fit.miss:.1f} us x max(0, 1 - C / working "
                    f"set) over {len(ws)} sizes (rms {fit.residual:.2f} us): C = {format_size(fit.coverage)}; "
                    f"the step points to {cause}")
                findings["map_miss_us"] = finding(fit.miss, "us", "the fit's extra latency of a miss")
                findings["mapping_cache_bytes_estimate"] = finding(
                    fit.coverage / ENTRY_PAGE * ENTRY_BYTES, "bytes",
                    f"mapping_cache_coverage_bytes / {ENTRY_PAGE} B x {ENTRY_BYTES} B: the RAM of a cache of "
                    "4-byte entries per 4 KiB page covering that working set")

    if {"qd", "lat_mean_us", "iops"} <= set(table.columns) and not table.empty:
        errors = littles_law.error_pct(table["qd"], table["lat_mean_us"] / 1e6, table["iops"])
        worst = int(np.nanargmax(np.abs(errors)))
        row = table.iloc[worst]
        findings["littles_law_max_error_pct"] = finding(
            float(abs(errors[worst])), "%",
            f"largest |QD / mean latency - IOPS| / IOPS over {len(table)} points, at {row['op']} over "
            f"{format_size(row['working_set'])} "
            "(“SSD Performance Profiling” §6.3: at one concurrency, latency sets throughput)")
    return findings


# ---- figures ---------------------------------------------------------------------------------------------------

def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    ops = [op for op in OPS if op in set(table["op"])]
    if not ops:
        return []
    step = finding_value(findings, "read_latency_step_bytes")
    coverage = finding_value(findings, "mapping_cache_coverage_bytes")
    qd = int(table["qd"].iloc[0])
    fig, axes = plots.panels(f"{format_size(p['size'])} random I/O at QD {qd} against working-set size",
                             2, len(ops), size=(5.0 * len(ops), 7.0))
    axes = axes.reshape(2, len(ops))
    for i, op in enumerate(ops):
        t = table[table["op"] == op].sort_values("working_set")
        lat_ax, iops_ax = axes[0, i], axes[1, i]
        for column, label in (("lat_mean_us", "mean"), ("lat_p99_us", "p99"), ("lat_p99_9_us", "p99.9")):
            plots.line(lat_ax, t["working_set"], t[column], t.get(f"{column}_std"), label=label)
        lat_ax.set_title(f"random {op}: latency", fontsize=10)
        lat_ax.set_ylabel("latency (us)")
        spread = t[["lat_mean_us", "lat_p99_9_us"]].to_numpy(dtype=float)
        if np.nanmin(spread) > 0 and np.nanmax(spread) / np.nanmin(spread) > 10:
            lat_ax.set_yscale("log")  # a tail far above the mean
        else:
            lat_ax.set_ylim(bottom=0)
        plots.line(iops_ax, t["working_set"], t["iops"], t.get("iops_std"), label="IOPS", color="tab:green")
        iops_ax.set_title(f"random {op}: IOPS", fontsize=10)
        iops_ax.set_ylabel("IOPS")
        iops_ax.set_ylim(bottom=0)
        for ax in (lat_ax, iops_ax):
            plots.size_axis(ax)
            ax.set_xlabel("working set")
            if op == "read" and coverage is not None:
                ax.axvline(coverage, color="tab:red", linestyle="--", alpha=0.7,
                           label=f"fitted cache coverage {format_size(coverage)}")
            elif op == "read" and step is not None:
                ax.axvline(step, color="tab:red", linestyle="--", alpha=0.7, label=f"step at {format_size(step)}")
    return [plots.save(fig, directory, "working_set_latency",
                       "Random I/O latency and IOPS against working-set size; a step or fitted coverage marks how "
                       "much the drive's mapping cache covers.")]


EXPERIMENTS = [
    Experiment(
        name="working-set",
        summary="4 KiB random read and write over working sets up to the full span: latency, tail, IOPS; "
                "the mapping-cache step",
        source="“SSD Performance Profiling” §6.1, §6.3",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", 0, "range to use; 0 = the whole target", "0 (whole target)"),
            Param("sizes", "sizes", [], "working-set sizes; empty = powers of two from min_size to the span, "
                                        "and the span", "(powers of two)"),
            Param("min_size", "size", 256 * MiB, "smallest working set of the automatic sizes", "256MiB"),
            Param("ops", "strs", list(OPS), "directions to measure, reads first", "read,write"),
            Param("size", "size", 4096, "request size", "4KiB"),
            Param("qd", "int", 1, "queue depth (1: the device's service time, no queueing)", "1"),
            Param("runtime", "duration", 10 * S, "measured time per point", "10s"),
            Param("warmup", "duration", 2 * S, "left out at the start of each point (caches fill)", "2s"),
            Param("settle", "duration", 300 * S, "idle after the fill: write buffer drains, SLC cache folds",
                  "5min"),
            Param("step", "float", 0.10, "mean read latency rise over the smallest set that counts as a step",
                  "0.10"),
        ),
        keys=("op", "working_set", "size", "qd"),
        measure=measure,
        analyse=analyse,
        figures=figures,
        check=_check,
    )
]
