"""``corners``: the four corners CrystalDiskMark users compare drives by — SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1 and
RND4K Q1T1, each read and then written, over a 1 GiB range as CrystalDiskMark's default test file.

Every corner is one engine run of one thread (``T1``): 1 MiB sequential requests at QD 8 and QD 1, 4 KiB random
requests at QD 32 and QD 1. All reads run first, then all writes (CrystalDiskMark's order), so a write's garbage
does not slow the reads. Findings: ``<corner>_<op>_mb_s`` for every corner and ``<corner>_<op>_iops`` for the
random ones (``rnd4k_q32t1_write_iops`` is the card's random-write figure).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .. import plots
from ..units import format_size
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

MiB = 1 << 20
# (finding prefix, label, request size, queue depth, offset pattern)
CORNERS = (
    ("seq1m_q8t1", "SEQ1M Q8T1", MiB, 8, "sequential"),
    ("seq1m_q1t1", "SEQ1M Q1T1", MiB, 1, "sequential"),
    ("rnd4k_q32t1", "RND4K Q32T1", 4096, 32, "random"),
    ("rnd4k_q1t1", "RND4K Q1T1", 4096, 1, "random"),
)
LABELS = {key: label for key, label, *_ in CORNERS}


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    ctx.ensure_readable(span)
    for op in ("read", "write"):
        for _key, label, size, qd, pattern in CORNERS:
            wl = workload(op, size=size, pattern=pattern, qd=qd, span=span, runtime_ns=p["runtime"],
                          warmup_ns=p["warmup"], seed=1 + ctx.repetition)
            result = ctx.run(wl, f"{label} {op} over {format_size(span)}")
            yield {"corner": label, "op": op, "size": size, "qd": qd, **op_metrics(result, op)}


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    for key, label, _size, _qd, pattern in CORNERS:
        for op in ("read", "write"):
            rows = table[(table["corner"] == label) & (table["op"] == op)]
            if rows.empty:
                continue
            row = rows.iloc[0]
            evidence = f"results.csv row {label} {op}"
            findings[f"{key}_{op}_mb_s"] = finding(row["mb_s"], "MB/s", evidence)
            if pattern == "random":
                findings[f"{key}_{op}_iops"] = finding(row["iops"], "IOPS", evidence)
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    fig, axes = plots.panels("The four corners (CrystalDiskMark's tests): read and write", 1, 2, size=(12, 4.5))
    for ax, pattern, metric, unit in ((axes[0], "sequential", "mb_s", "MB/s"), (axes[1], "random", "iops", "IOPS")):
        labels = [label for _key, label, _size, _qd, kind in CORNERS if kind == pattern]
        x = range(len(labels))
        for offset, op, colour in ((-0.2, "read", "tab:blue"), (0.2, "write", "tab:orange")):
            values = [table.loc[(table["corner"] == label) & (table["op"] == op), metric].mean() for label in labels]
            bars = ax.bar([i + offset for i in x], values, width=0.4, color=colour, label=op)
            ax.bar_label(bars, labels=[f"{v:,.0f}" for v in values], fontsize=8)
        ax.set_xticks(list(x), labels)
        ax.set_ylabel(unit)
        ax.legend(fontsize=8)
    return [plots.save(fig, directory, "corners",
                       "The four corners, as CrystalDiskMark measures them: sequential and random reads and "
                       "writes at a deep and a shallow queue.")]


EXPERIMENTS = [
    Experiment(
        name="corners",
        summary="CrystalDiskMark's four corners, read and write: SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1",
        source="CrystalDiskMark's default tests: 1 GiB, one thread",
        writes=True,
        preconditioning="none",
        params=(
            Param("span", "size", 1 << 30, "range to use (CrystalDiskMark's default test size)", "1GiB"),
            Param("runtime", "duration", 5 * 10**9, "measured time per corner and direction", "5s"),
            Param("warmup", "duration", 10**9, "left out at the start of each", "1s"),
        ),
        keys=("corner", "op"),
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
