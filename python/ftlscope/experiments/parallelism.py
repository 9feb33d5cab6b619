"""``parallelism`` (seed 000 §3.3.1, §5.1, §5.2): how sequential-read throughput scales with the two knobs of
parallel work an NVMe host has, the number of queues and the queue depth, at reads of 1 to 4 blocks — first on
a sequentially filled device, then again after the same range was TRIMmed and written once in random order.

Sequential reads of small blocks are the cheapest requests there are (the seed's reasoning), so what limits
them is how many the device serves at once. The seed found throughput grows with QD but not with the number of
queues ("a single queue suffices", §5.1), and that DRAM-less drives read much slower after a random fill (§5.2).

A "block" here is 4 KiB by default (param ``block``): the flash page / physical block of most drives. The
seed counted in its drives' logical blocks (512 B LBAs on the Samsung), so pass ``block=512`` to repeat it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis.knee import first_reaching
from ..errors import UsageError
from ..units import format_size
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

PHASES = ("sequential-fill", "random-fill")


def _check(p: dict[str, Any]) -> list[str]:
    for name, low, high in (("queues", 1, 256), ("qds", 1, 65536), ("blocks", 1, 1 << 16)):
        bad = [v for v in p[name] if not low <= v <= high]
        if bad:
            raise UsageError(f"--param {name}: {bad[0]} is outside {low}..{high}")
    if p["block"] <= 0 or p["block"] % 512:
        raise UsageError(f"--param block: give a multiple of 512 B, not {p['block']}")
    if p["ops"] <= 0 and p["runtime"] <= 0:
        raise UsageError("--param ops: give ops or runtime above 0, or every point would read forever")
    unknown = [ph for ph in p["phases"] if ph not in PHASES]
    if unknown:
        raise UsageError(f"--param phases: unknown phase '{unknown[0]}'; use {', '.join(PHASES)}")
    return list(dict.fromkeys(p["phases"]))  # keep the order given, once each


def measure(ctx: Context, p: dict[str, Any]):
    phases = _check(p)
    span = ctx.span(p["span"])
    for i, phase in enumerate(phases):
        if phase == "random-fill":
            # The seed's drives were "filled randomly": every block written once in a random order. TRIM first,
            # so the random fill writes an empty range (no garbage collection of the sequential fill).
            ctx.precondition("purge", span)
            ctx.precondition("random-fill", span)
        elif i > 0:
            ctx.precondition("sequential-fill", span)
        # (the first phase's sequential fill is the experiment's declared preconditioning)
        for queues in p["queues"]:
            for qd in p["qds"]:
                for blocks in p["blocks"]:
                    size = blocks * p["block"]
                    wl = workload("read", size=size, pattern="sequential", qd=qd, queues=queues, span=span,
                                  ops=p["ops"] or None, runtime_ns=p["runtime"] or None)
                    result = ctx.run(wl, f"{phase} {queues}q qd{qd} {format_size(size)} sequential read")
                    yield {"phase": phase, "queues": queues, "qd": qd, "outstanding": queues * qd,
                           "blocks": blocks, "size": size, **op_metrics(result, "read")}


def _slug(phase: str) -> str:
    return phase.replace("-", "_")


def _where(row: pd.Series, block: int) -> str:
    return (f"{int(row['queues'])} queue(s) x QD {int(row['qd'])}, {int(row['blocks'])} x "
            f"{format_size(block)} reads")


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    share = p["saturation"]
    block = p["block"]
    peaks: dict[str, float] = {}
    for phase in [ph for ph in PHASES if ph in set(table["phase"])]:
        t = table[table["phase"] == phase].reset_index(drop=True)
        s = _slug(phase)
        best = t.loc[t["mb_s"].idxmax()]
        peaks[phase] = float(best["mb_s"])
        findings[f"peak_mb_s_{s}"] = finding(best["mb_s"], "MB/s", f"results.csv, phase {phase}: the best point, "
                                             f"{_where(best, block)}")
        best_iops = t.loc[t["iops"].idxmax()]
        findings[f"peak_iops_{s}"] = finding(best_iops["iops"], "IOPS", f"results.csv, phase {phase}: the best "
                                             f"point, {_where(best_iops, block)}")
        for blocks in sorted(t["blocks"].unique()):
            b = t[t["blocks"] == blocks].reset_index(drop=True)
            i = first_reaching(b["outstanding"].to_numpy(), b["mb_s"].to_numpy(), share)
            if i is None:
                continue
            row = b.loc[i]
            evidence = (f"results.csv, phase {phase}, {blocks} x {format_size(block)} reads: the fewest requests "
                        f"in flight (queues x QD) whose MB/s reaches {share:.0%} of the best "
                        f"({b['mb_s'].max():.0f} MB/s), first at {_where(row, block)} ({row['mb_s']:.0f} MB/s)")
            value = finding(int(row["outstanding"]), "requests", evidence)
            findings[f"saturation_outstanding_{s}_{blocks}blk"] = value
            if blocks == t["blocks"].max():
                findings[f"saturation_outstanding_{s}"] = value
        one, many = t[t["queues"] == 1], t[t["queues"] > 1]
        if not one.empty and not many.empty:
            findings[f"multi_queue_gain_{s}"] = finding(
                many["mb_s"].max() / one["mb_s"].max(), "ratio",
                f"results.csv, phase {phase}: best MB/s with more than one queue / best MB/s with one queue "
                f"({many['mb_s'].max():.0f} / {one['mb_s'].max():.0f}); about 1 = a single queue suffices")
    if len(peaks) == 2:
        findings["random_to_sequential_fill_peak_ratio"] = finding(
            peaks["random-fill"] / peaks["sequential-fill"], "ratio",
            f"peak MB/s after the random fill / after the sequential fill ({peaks['random-fill']:.0f} / "
            f"{peaks['sequential-fill']:.0f}); below 1 = the write order slows later reads")
        keys = ["queues", "qd", "blocks"]
        pair = table[table["phase"] == "sequential-fill"].merge(
            table[table["phase"] == "random-fill"], on=keys, suffixes=("_seq", "_rnd"))
        if not pair.empty:
            ratio = pair["mb_s_rnd"] / pair["mb_s_seq"]
            findings["random_to_sequential_fill_median_ratio"] = finding(
                float(np.median(ratio)), "ratio",
                f"median over the {len(pair)} points of MB/s after the random fill / after the sequential fill "
                f"(from {ratio.min():.2f} to {ratio.max():.2f})")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    out = []
    phases = [ph for ph in PHASES if ph in set(table["phase"])]
    queues = sorted(table["queues"].unique())
    block = format_size(p["block"])
    # The seed's figures 5.4 (sequentially written) and 5.5 (randomly written): throughput against QD, one panel
    # per number of queues, one line per read size.
    for metric, unit in (("mb_s", "MB/s"), ("iops", "IOPS")):
        fig, axes = plots.panels(f"Sequential read {unit} by queues, QD and read size (blocks of {block})",
                                 len(phases), len(queues), sharex=True)
        for r, phase in enumerate(phases):
            for c, q in enumerate(queues):
                ax = axes[r * len(queues) + c]
                t = table[(table["phase"] == phase) & (table["queues"] == q)]
                for blocks in sorted(t["blocks"].unique()):
                    b = t[t["blocks"] == blocks].sort_values("qd")
                    plots.line(ax, b["qd"], b[metric], b.get(f"{metric}_std"), label=f"{blocks} blk")
                ax.set_xscale("log", base=2)
                ax.set_title(f"after {phase}, {q} queue(s)", fontsize=9)
                ax.set_xlabel("queue depth")
                ax.set_ylabel(unit)
        out.append(plots.save(fig, directory, f"parallelism_{metric}",
                              f"Sequential read {unit} against queue depth, one panel per queue count and phase, "
                              "one line per read size in blocks."))
    # Both phases against the requests in flight, where saturation shows.
    sizes = sorted(table["blocks"].unique())
    fig, axes = plots.panels("Sequential read MB/s against requests in flight (queues x QD)", 1, len(sizes))
    for ax, blocks in zip(axes, sizes, strict=True):
        for phase, style in zip(phases, ("-", "--"), strict=False):
            t = table[(table["phase"] == phase) & (table["blocks"] == blocks)]
            best = t.groupby("outstanding")["mb_s"].max()
            plots.line(ax, best.index, best.to_numpy(), label=phase, linestyle=style)
            sat = findings.get(f"saturation_outstanding_{_slug(phase)}_{blocks}blk")
            if sat and sat["value"] is not None:
                ax.axvline(sat["value"], color=ax.lines[-1].get_color(), alpha=0.4, linestyle=":")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{blocks} x {block}", fontsize=9)
        ax.set_xlabel("requests in flight")
        ax.set_ylabel("MB/s (best at each count)")
    out.append(plots.save(fig, directory, "parallelism_outstanding",
                          "The best sequential read MB/s at each number of requests in flight (queues times "
                          "depth); marks show where it saturates."))
    return out


EXPERIMENTS = [
    Experiment(
        name="parallelism",
        summary="sequential reads of 1-4 blocks at 1/2/4 queues x QD 1-64, after a sequential and after a random "
                "fill: throughput, saturation, the write order's effect",
        source="“What does the Flash Translation Layer do?” §3.3.1, §5.1, §5.2",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", 0, "range filled and read; 0 = the whole target", "0 (whole target)"),
            Param("queues", "ints", [1, 2, 4], "numbers of queues", "1,2,4"),
            Param("qds", "ints", [1, 2, 4, 8, 16, 64], "queue depths (per queue)", "1,2,4,8,16,64"),
            Param("blocks", "ints", [1, 2, 3, 4], "read sizes in blocks", "1,2,3,4"),
            Param("block", "size", 4096, "the block the sizes count: 4 KiB = the physical block of most drives "
                  "(the seed counted its drives' 512 B logical blocks)", "4KiB"),
            Param("ops", "int", 65536, "reads per point (0 = only the time limit); the seed read the whole "
                  "drive per point", "65536"),
            Param("runtime", "duration", 5 * 10**9, "time limit per point (0 = only the ops limit)", "5s"),
            Param("phases", "strs", list(PHASES), "device states to measure, in order: sequential-fill, "
                  "random-fill (TRIM, then every 4 KiB block written once in random order)",
                  "sequential-fill,random-fill"),
            Param("saturation", "float", 0.9, "throughput counts as saturated from this share of the best", "0.9"),
        ),
        keys=("phase", "queues", "qd", "outstanding", "blocks", "size"),
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
