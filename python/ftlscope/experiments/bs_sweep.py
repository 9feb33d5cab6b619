"""``bs-sweep`` (seed 001 §3): random and sequential reads of 4 KiB to 1 MiB at a fixed QD 32 — IOPS, MB/s
and latency (mean, p50, p99) against request size, and where the device turns from IOPS-bound to
bandwidth-bound. ``bs-sweep-write`` is the same sweep with writes.

The transition (``transition_bytes``, from the random mode, which the seed calls the IOPS -> MB/s one;
``sequential_transition_bytes`` too): the smallest request size whose bandwidth reaches 80 % of the mode's peak
MB/s over the sweep. Below it, larger requests still buy bandwidth (the device is IOPS-bound: each request
costs about the same, so MB/s grows with size); from it on, they add at most another 25 % while IOPS keep
falling (bandwidth-bound). The seed gives no number, only its reading of its two curves ("knee ≈ 128–256 KiB"
for random read, "≈ 64–128 KiB" for sequential): 80 % of the peak reproduces both (256 KiB and 64 KiB on
its tables), where 90 % would put the random one at 1 MiB because its 512 KiB point reaches 89.97 %.
``--param saturation`` changes the share.

Why the writes are a second experiment rather than a parameter: whether an experiment writes is declared up
front — the safety checks, ``--list`` and the preconditioning depend on it — so a read sweep that wrote on
``include_write=true`` would be a read-only experiment that destroys data. ``bs-sweep`` stays read-only (it
runs on a mounted drive's data); ``bs-sweep-write`` is destructive and purges (TRIMs) the range first, so it
measures the write path — buffer, SLC cache, program parallelism — rather than garbage collection, which
``burst-vs-steady`` and ``random-fill`` study: on a full drive, random overwrites reach garbage collection
within seconds and every later point would measure it, not the request size. For the same reason its points
are shorter (5 s) and the drive rests 30 s between them (``rest``): a drive with an SLC cache folds it in
idle time, so each point starts with the cache as free as the first did (the default simulated drive folds
400 MB/s: 30 s frees 12 GB, more than a 5 s point writes). Without the rest, once the cache is used up the
later points would see native-speed programming; the rows' ``ops`` say how much each point wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .. import plots
from ..analysis import knee
from ..errors import UsageError
from ..units import format_size
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

KiB, MiB = 1 << 10, 1 << 20
SEED_SIZES = [4 * KiB, 16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, MiB]
PATTERNS = ("random", "sequential")
# The transition's share of the peak bandwidth: the one that reproduces the seed's reading of its curves.
TRANSITION_SHARE = 0.80


def _check(p: dict[str, Any]) -> None:
    if p["qd"] < 1:
        raise UsageError(f"--param qd: give a queue depth of 1 or more (got {p['qd']})")
    if not 0 < p["saturation"] <= 1:
        raise UsageError(f"--param saturation: give a share in (0, 1] (got {p['saturation']})")
    if any(size <= 0 for size in p["sizes"]):
        raise UsageError(f"--param sizes: request sizes must be more than 0 B (got {p['sizes']})")


def _measure(op: str):
    def measure(ctx: Context, p: dict[str, Any]):
        for size in p["sizes"]:
            if size % ctx.logical_block:
                raise UsageError(f"--param sizes: {size} B is not a multiple of the target's "
                                 f"{ctx.logical_block} B block")
        span = ctx.span(p["span"], align=max(MiB, *p["sizes"]))
        if op == "read":
            ctx.ensure_readable(span)
        points = [(pattern, size) for pattern in PATTERNS for size in p["sizes"]]
        for i, (pattern, size) in enumerate(points):
            if i:
                # Writes: let the drive fold its SLC cache and drain its buffer between points, so each point
                # measures its request size rather than what the points before it left behind.
                ctx.idle(p.get("rest", 0))
            wl = workload(op, size=size, pattern=pattern, qd=p["qd"], span=span, runtime_ns=p["runtime"],
                          warmup_ns=p["warmup"], seed=1 + ctx.repetition)
            result = ctx.run(wl, f"{format_size(size)} {pattern} {op} QD {p['qd']}")
            yield {"mode": f"{pattern}-{op}", "op": op, "pattern": pattern, "size": size, "qd": p["qd"],
                   **op_metrics(result, op)}

    return measure


def _mode(table: pd.DataFrame, pattern: str) -> pd.DataFrame:
    return table[table["pattern"] == pattern].sort_values("size").reset_index(drop=True)


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    for pattern in PATTERNS:
        t = _mode(table, pattern)
        if t.empty:
            continue
        mode = t["mode"].iloc[0]
        prefix = "" if pattern == "random" else "sequential_"
        peak = int(t["mb_s"].idxmax())
        index = knee.first_reaching(t["size"], t["mb_s"], p["saturation"])
        if index is not None:
            row = t.loc[index]
            findings[f"{prefix}transition_bytes"] = finding(
                int(row["size"]), "B",
                f"{mode}: smallest request size whose MB/s ({row['mb_s']:,.0f}) reaches {p['saturation']:.0%} of "
                f"the mode's peak {t['mb_s'].iloc[peak]:,.0f} MB/s (at {format_size(t['size'].iloc[peak])}); "
                f"{row['iops']:,.0f} IOPS there (bs_sweep.png)")
        findings[f"{pattern}_peak_mb_s"] = finding(
            t["mb_s"].iloc[peak], "MB/s", f"results.csv: largest MB/s of {mode}, at "
                                         f"{format_size(t['size'].iloc[peak])}")
        smallest = t.iloc[0]
        findings[f"{pattern}_small_iops"] = finding(
            smallest["iops"], "IOPS", f"results.csv: {mode} at the smallest size, {format_size(smallest['size'])}")
    if "mb_s" in table:
        best = table.loc[table["mb_s"].idxmax()]
        findings["peak_mb_s"] = finding(best["mb_s"], "MB/s", f"results.csv: largest MB/s of the sweep "
                                                              f"({best['mode']}, {format_size(best['size'])})")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    op = table["op"].iloc[0]
    out = []
    # Seed 001 §3.4: IOPS, MB/s and latency side by side, random and sequential on the same axes.
    fig, axes = plots.panels(f"Request size sweep, {op} at QD {int(table['qd'].iloc[0])}", 1, 3,
                             size=(13.5, 4.2))
    for pattern, color in zip(PATTERNS, ("tab:blue", "tab:green"), strict=True):
        t = _mode(table, pattern)
        if t.empty:
            continue
        plots.line(axes[0], t["size"], t["iops"], t.get("iops_std"), label=pattern, color=color)
        plots.line(axes[1], t["size"], t["mb_s"], t.get("mb_s_std"), label=pattern, color=color)
        plots.line(axes[2], t["size"], t["lat_mean_us"] / 1e3, t.get("lat_mean_us_std", 0) / 1e3,
                   label=f"{pattern} mean", color=color)
        key = "transition_bytes" if pattern == "random" else "sequential_transition_bytes"
        value = (findings.get(key) or {}).get("value")
        if value is not None:
            axes[1].axvline(value, color=color, linestyle="--", alpha=0.6,
                            label=f"{pattern} transition {format_size(value)}")
    for ax, ylabel in zip(axes, ("IOPS", "MB/s", "mean latency (ms)"), strict=True):
        plots.size_axis(ax)
        ax.set_xlabel("request size")
        ax.set_ylabel(ylabel)
    axes[0].set_yscale("log")
    for ax in axes:
        plots.number_axis(ax, "y")
    out.append(plots.save(fig, directory, "bs_sweep",
                          "IOPS, MB/s and mean latency against request size for each access pattern; dashed lines "
                          "mark the transition sizes the analysis found."))

    fig, axes = plots.panels(f"Latency against request size ({op}, QD {int(table['qd'].iloc[0])})", 1, 2,
                             size=(10.5, 4.2))
    for ax, pattern in zip(axes, PATTERNS, strict=True):
        t = _mode(table, pattern)
        ax.set_title(pattern, fontsize=10)
        if t.empty:
            continue
        for column, label in (("lat_mean_us", "mean"), ("lat_p50_us", "p50"), ("lat_p99_us", "p99")):
            plots.line(ax, t["size"], t[column] / 1e3, t.get(f"{column}_std", 0) / 1e3, label=label)
        plots.size_axis(ax)
        ax.set_yscale("log")
        plots.number_axis(ax, "y")
        ax.set_xlabel("request size")
        ax.set_ylabel("latency (ms)")
    out.append(plots.save(fig, directory, "bs_latency",
                          "Latency percentiles against request size, one panel per access pattern, at the sweep's "
                          "queue depth."))
    return out


def _params(runtime_s: int, warmup_s: int, *extra: Param) -> tuple[Param, ...]:
    return (
        Param("span", "size", 0, "range to use; 0 = the whole target", "0 (whole target)"),
        Param("runtime", "duration", runtime_s * 10**9, "measured time per size and pattern", f"{runtime_s}s"),
        Param("warmup", "duration", warmup_s * 10**9, "left out at the start of each point", f"{warmup_s}s"),
        Param("qd", "int", 32, "queue depth (fixed: only the size changes)", "32"),
        Param("sizes", "sizes", SEED_SIZES, "request sizes", "4KiB,16KiB,...,1MiB"),
        Param("saturation", "float", TRANSITION_SHARE, "transition: share of the peak MB/s reached", "0.80"),
        *extra,
    )


EXPERIMENTS = [
    Experiment(
        name="bs-sweep",
        summary="random and sequential read, 4 KiB to 1 MiB at QD 32: IOPS, MB/s, latency; IOPS-to-bandwidth "
                "transition",
        source="“SSD Performance Profiling” §3",
        writes=False,
        preconditioning="none",
        params=_params(30, 5),
        keys=("mode", "op", "pattern", "size", "qd"),
        check=_check,
        measure=_measure("read"),
        analyse=analyse,
        figures=figures,
    ),
    Experiment(
        name="bs-sweep-write",
        summary="bs-sweep with random and sequential writes (destructive): IOPS, MB/s, latency against size",
        source="“SSD Performance Profiling” §3 (write variant)",
        writes=True,
        preconditioning="purge",
        params=_params(5, 1, Param("rest", "duration", 30 * 10**9,
                                         "idle between points (the SLC cache folds, the buffer drains)", "30s")),
        keys=("mode", "op", "pattern", "size", "qd"),
        check=_check,
        measure=_measure("write"),
        analyse=analyse,
        figures=figures,
    ),
]
