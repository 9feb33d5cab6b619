"""``alignment`` (seed 000 §3.3.4, §5.5): sequential reads at the largest request size and queue depth, with
every request shifted by a power of two from one logical block up to half the request size. A read shifted by
less than the device's internal unit (its flash page, or whatever block the controller works in) straddles one
more of them than an aligned read, which may cost.

The seed saw a ~15 % drop on the Samsung for offsets that are not a multiple of 8 x 512 B = 4 KiB ("some part of
the SSD uses a 4KiB block size"), almost no difference elsewhere, and misaligned reads faster on one drive.
Here: the penalty at each offset against offset 0, and the smallest offset from which there is none, which
names that internal unit when there is a penalty below it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis.thresholds import first_sustained, relative_change
from ..errors import UsageError
from ..units import format_size
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context
from .locality import smallest_block

GiB = 1 << 30
MiB = 1 << 20


def offsets(smallest: int, size: int) -> list[int]:
    """0 (aligned), then every power of two from ``smallest`` to half of ``size``."""
    out = [0]
    offset = smallest
    while offset <= size // 2:
        out.append(offset)
        offset *= 2
    return out


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    size = p["size"]
    smallest = p["min_offset"] or smallest_block(ctx)
    if smallest & (smallest - 1):
        raise UsageError(f"--param min_offset: give a power of two, not {smallest} B")
    if size < 2 * smallest:
        raise UsageError(f"--param size: {format_size(size)} leaves no offset between {format_size(smallest)} and "
                         "half the request size")
    if span < 2 * size:
        raise UsageError(f"--param span: {format_size(span)} is too small for {format_size(size)} requests")
    if p["qd"] < 1:
        raise UsageError("--param qd: give at least 1")
    ctx.ensure_readable(span)
    for offset in offsets(smallest, size):
        # The shifted range stays inside the filled span: it starts at ``offset`` and is one request shorter.
        wl = workload("read", size=size, pattern="sequential", qd=p["qd"], span=span - size,
                      total_bytes=(span - size) // size * size, ops=p["max_ops"] or None,
                      runtime_ns=p["runtime"] or None, align_offset=offset)
        result = ctx.run(wl, f"{format_size(size)} sequential read at offset {format_size(offset)}")
        yield {"offset_bytes": offset, "size": size, **op_metrics(result, "read")}


def penalties(table: pd.DataFrame) -> pd.Series:
    """Per offset: how much fewer IOPS than at offset 0, in % (negative = faster than aligned)."""
    iops = table.groupby("offset_bytes")["iops"].mean().sort_index()
    return pd.Series(-100 * relative_change(iops.to_numpy(), iops.loc[0]), index=iops.index)


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    if 0 not in set(table["offset_bytes"]):
        return findings
    size = format_size(int(table["size"].iloc[0]))
    pen = penalties(table)
    aligned = table.loc[table["offset_bytes"] == 0, "iops"].mean()
    findings["aligned_iops"] = finding(aligned, "IOPS", f"results.csv, offset 0, {size} sequential reads")
    shifted = pen.drop(index=0)
    if shifted.empty:
        return findings
    worst = shifted.idxmax()
    findings["worst_penalty_pct"] = finding(
        shifted[worst], "%", f"results.csv: IOPS at offset {format_size(worst)} vs offset 0 "
                             f"({aligned * (1 - shifted[worst] / 100):.0f} vs {aligned:.0f}); negative = faster")
    tolerance = p["tolerance"]
    no_penalty = (shifted < tolerance).to_numpy()
    start = first_sustained(shifted.index.to_numpy(), no_penalty)
    listed = ", ".join(f"{format_size(o)}: {round(v, 1) + 0:+.1f} %" for o, v in shifted.items())
    if start is None:
        findings["aligned_from_bytes"] = finding(
            None, "B", f"results.csv: even the largest offset, {format_size(shifted.index.max())}, costs "
                       f"{tolerance:g} % or more ({listed})")
    else:
        findings["aligned_from_bytes"] = finding(
            int(start), "B", f"results.csv: the smallest offset from which every offset measured costs under "
                             f"{tolerance:g} % against offset 0 ({listed})")
    below = shifted[shifted.index < start] if start is not None else shifted
    if not below.empty:
        findings["misaligned_penalty_pct"] = finding(
            float(below.mean()), "%", f"results.csv: mean IOPS penalty of the offsets "
                                      f"{', '.join(format_size(o) for o in below.index)} against offset 0")
    else:
        findings["misaligned_penalty_pct"] = finding(
            0.0, "%", f"results.csv: no offset costs {tolerance:g} % or more ({listed})")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    # The seed's figure 5.12: IOPS at the maximum read size against the offset.
    t = table.sort_values("offset_bytes")
    labels = ["0" if o == 0 else format_size(o) for o in t["offset_bytes"]]
    x = np.arange(len(t))
    fig, ax = plots.figure(f"{format_size(int(t['size'].iloc[0]))} sequential reads, QD {p['qd']}: IOPS by offset",
                           "offset of every request", "IOPS")
    err = t["iops_std"].fillna(0).to_numpy() if "iops_std" in t else None
    err = err if err is not None and (err > 0).any() else None  # no caps on a single repetition
    colours = ["tab:green" if o == 0 else "tab:blue" for o in t["offset_bytes"]]
    ax.bar(x, t["iops"].to_numpy(), yerr=err, capsize=3, color=colours, alpha=0.85)
    ax.set_xticks(x, labels, rotation=30)
    start = findings.get("aligned_from_bytes", {}).get("value")
    if start is not None and start in set(t["offset_bytes"]):
        ax.axvline(list(t["offset_bytes"]).index(start) - 0.5, color="grey", linestyle=":",
                   label=f"no penalty from {format_size(start)}")
    return [plots.save(fig, directory, "alignment_iops",
                       "IOPS of sequential reads whose start is shifted from an aligned offset by each amount; a "
                       "shift that costs IOPS shows the alignment the drive wants.")]


EXPERIMENTS = [
    Experiment(
        name="alignment",
        summary="sequential reads at the largest size and QD, shifted by powers of two up to half the size: the "
                "misalignment penalty and the offset from which there is none",
        source="“What does the Flash Translation Layer do?” §3.3.4, §5.5",
        writes=False,
        preconditioning="none",
        params=(
            Param("span", "size", 8 * GiB, "region read (from the start of the target); 0 = the whole target",
                  "8GiB"),
            Param("size", "size", MiB, "request size (the seed: the drive's largest, about 1 MiB)", "1MiB"),
            Param("qd", "int", 64, "queue depth (the seed's maximum)", "64"),
            Param("min_offset", "size", 0, "smallest offset (a power of two); 0 = the target's logical block",
                  "0 (logical block)"),
            Param("max_ops", "int", 8192, "reads per offset at most (0 = one pass over the region)", "8192"),
            Param("runtime", "duration", 10 * 10**9, "time limit per offset (0 = none)", "10s"),
            Param("tolerance", "float", 2.0, "an offset 'costs' when its IOPS are this many % below offset 0", "2"),
        ),
        keys=("offset_bytes", "size"),
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
