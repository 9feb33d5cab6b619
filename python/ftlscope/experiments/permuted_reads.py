"""``permuted-reads`` (seed 000 §3.3.3, §5.8): does the device reorder queued commands, as native command
queuing lets a disk do? The region is read in ascending order, except that the requests inside each window of
N consecutive ones are shuffled (N = 2, 4, 8), with 2 x N requests in flight, so a device that reorders what
is queued could restore the sequential order. Compared with sequential and shuffled (random-order) reads of the
same region, size and queue depth: permuted throughput near sequential = the device reorders or does not care
about order; near random = it does neither.

The seed compared against its locality results at QD 64 and so "refrain[ed] from making direct numerical
comparisons"; here the three patterns run at the same QD, so the comparison is direct.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..errors import UsageError
from ..units import format_size
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

GiB = 1 << 30
# Sequential and random must differ by at least this share for "where permuted sits between them" to mean
# anything; closer than that the scale is noise.
MIN_SPREAD = 0.05


def _patterns(window: int) -> tuple[tuple[str, dict[str, Any]], ...]:
    return (
        ("sequential", {"kind": "sequential"}),
        ("permuted", {"kind": "permuted_windows", "window": window}),
        # Every request-sized piece once, in random order: the seed's shuffled read (§3.3.2).
        ("random", {"kind": "permutation"}),
    )


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    bad = [w for w in p["windows"] if not 1 <= w <= 4096]
    if bad:
        raise UsageError(f"--param windows: {bad[0]} is outside 1..4096")
    if p["size"] <= 0:
        raise UsageError("--param size: give a request size above 0")
    if p["ops"] <= 0 and p["runtime"] <= 0:
        raise UsageError("--param ops: give ops or runtime above 0, or every point would read forever")
    ctx.ensure_readable(span)
    for window in p["windows"]:
        qd = p["qd_per_window"] * window
        for label, pattern in _patterns(window):
            wl = workload("read", size=p["size"], pattern=pattern, qd=qd, span=span, ops=p["ops"] or None,
                          runtime_ns=p["runtime"] or None, seed=1 + ctx.repetition)
            result = ctx.run(wl, f"window {window} qd {qd} {format_size(p['size'])} {label} read")
            yield {"permutation_window": window, "qd": qd, "pattern": label, **op_metrics(result, "read")}


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    iops = table.pivot_table(index=["permutation_window", "qd"], columns="pattern", values="iops", aggfunc="mean")
    for (window, qd), row in iops.iterrows():
        if not {"sequential", "permuted", "random"} <= set(row.dropna().index):
            continue
        seq, perm, rnd = row["sequential"], row["permuted"], row["random"]
        where = (f"results.csv, window {window}, QD {qd}: IOPS permuted {perm:.0f}, sequential {seq:.0f}, "
                 f"random {rnd:.0f}")
        findings[f"permuted_to_sequential_w{window}"] = finding(perm / seq, "ratio", f"{where}; permuted / sequential")
        findings[f"permuted_to_random_w{window}"] = finding(perm / rnd, "ratio", f"{where}; permuted / random")
        spread = abs(seq - rnd) / max(seq, rnd)
        if spread >= MIN_SPREAD:
            findings[f"permuted_position_w{window}"] = finding(
                (perm - rnd) / (seq - rnd), "fraction",
                f"{where}; (permuted - random) / (sequential - random): 0 = like random, 1 = like sequential")
        else:
            findings[f"permuted_position_w{window}"] = finding(
                None, "fraction", f"{where}; sequential and random differ by {spread:.1%}, under "
                                  f"{MIN_SPREAD:.0%}: there is no scale to place permuted reads on")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    # The seed's figure 5.16: read throughput of permuted reads by window size, here beside sequential and
    # random at the same queue depth.
    windows = sorted(table["permutation_window"].unique())
    labels = ("sequential", "permuted", "random")
    x = np.arange(len(windows))
    width = 0.27
    fig, ax = plots.figure(f"{format_size(p['size'])} reads, QD = {p['qd_per_window']} x window", "shuffle window",
                           "IOPS")
    for i, label in enumerate(labels):
        t = table[table["pattern"] == label].set_index("permutation_window").reindex(windows)
        err = t["iops_std"].fillna(0).to_numpy() if "iops_std" in t else None
        err = err if err is not None and (err > 0).any() else None  # no caps on a single repetition
        ax.bar(x + (i - 1) * width, t["iops"].to_numpy(), width, yerr=err, capsize=3, label=label, alpha=0.85)
    ax.set_xticks(x, [f"{w} (QD {p['qd_per_window'] * w})" for w in windows])
    return [plots.save(fig, directory, "permuted_reads_iops",
                       "Read IOPS when requests are shuffled within windows of each size, with the queue as deep "
                       "as the window.")]


EXPERIMENTS = [
    Experiment(
        name="permuted-reads",
        summary="reads shuffled inside windows of 2/4/8 at QD 2 x window, against sequential and random at the "
                "same QD: does the device reorder queued commands",
        source="“What does the Flash Translation Layer do?” §3.3.3, §5.8",
        writes=False,
        preconditioning="none",
        params=(
            Param("span", "size", 8 * GiB, "region read (from the start of the target); 0 = the whole target",
                  "8GiB"),
            Param("windows", "ints", [2, 4, 8], "shuffle window sizes, in requests", "2,4,8"),
            Param("qd_per_window", "int", 2, "queue depth = this x the window", "2"),
            Param("size", "size", 4096, "request size: 1 block (the seed's was one 512 B LBA; 4 KiB = one "
                  "flash page on most drives)", "4KiB"),
            Param("ops", "int", 262144, "reads per point (0 = only the time limit)", "262144"),
            Param("runtime", "duration", 10 * 10**9, "time limit per point (0 = only the ops limit)", "10s"),
        ),
        keys=("permutation_window", "qd", "pattern"),
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
