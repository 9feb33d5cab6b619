"""``ftlscope compare``: several profiled devices side by side — the property table, the summary card's
numbers, and overlaid curves drawn from each run's results: the queue-depth sweep, block-size sweep and
sequential write over time, and the system suite's figures (file systems, zoning, I/O schedulers, video
streaming) with each drive's bars side by side — and, for two drives, guidance on which suits which measured
workload (:mod:`.compare_guidance`). It reads stored records and result files only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.ticker import ScalarFormatter

from .. import plots
from ..analysis.property_marks import legend
from ..metrics import WINDOW_INDEX
from .card import build_card
from .compare_guidance import build_compare_guidance
from .facts import Facts
from .render import PROPERTY_ORDER, answer_text, embed_figure, write_pages


def run_label(record: dict[str, Any]) -> str:
    """A short column heading: the model (or target) and the date of the run."""
    target = record.get("target") or {}
    name = target.get("model") or target.get("name") or record.get("run_id", "run")
    # A drive served by ftlscope sim attach: its preset says what it is, the loop device's model does not.
    attached = re.fullmatch(r"ftlscope simulated drive \((sim:[^)]+)\)", name)
    name = f"{attached.group(1)}, attached" if attached else name.removeprefix("simulated ")
    return f"{name} ({(record.get('created_at') or '')[:10]})"


def render_compare(runs: list[tuple[dict[str, Any], Path]], out: Path) -> list[Path]:
    """Write ``compare.html``, ``compare.md`` and the overlaid figures into ``out`` for ``runs`` — pairs of
    (record, the run's directory)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    labels = _unique([run_label(record) for record, _ in runs])
    figures = [f for f in (_qd_figure(runs, labels, out), _bs_figure(runs, labels, out),
                           _write_figure(runs, labels, out), *_system_figures(runs, labels, out)) if f is not None]
    view = {
        "labels": labels,
        "runs": [{"label": label, "run_id": record["run_id"], "target": (record.get("target") or {}).get("name"),
                  "suite": record.get("suite"), "created_at": record.get("created_at"),
                  "completed": record.get("completed")} for label, (record, _) in zip(labels, runs, strict=True)],
        "card_rows": _card_rows(runs),
        "property_rows": (property_rows := _property_rows(runs)),
        "property_legend": legend(cell for row in property_rows for cell in row["cells"]),
        "figures": [{**embed_figure(path, out), "caption": caption} for path, caption in figures],
        "guidance": build_compare_guidance([(label, record) for label, (record, _) in zip(labels, runs,
                                                                                           strict=True)]),
    }
    return [*write_pages("compare", view, out), *(path for path, _ in figures)]


def _unique(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    result = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        result.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return result


def _card_rows(runs) -> list[dict[str, Any]]:
    # A flash drive's card and a hard disk's have different rows: one line per row any card has.
    cards = [{row["key"]: row for row in build_card(record)} for record, _ in runs]
    labels: dict[str, str] = {}
    for card in cards:
        labels.update({key: row["label"] for key, row in card.items() if key not in labels})
    rows = []
    for key, label in labels.items():
        cells = []
        for card in cards:
            row = card.get(key)
            cells.append("" if row is None else (row["display"] or "") + (f" ({row['detail']})" if row.get("detail")
                                                                            else ""))
        rows.append({"label": label, "cells": cells})
    return rows


def _property_rows(runs) -> list[dict[str, Any]]:
    facts = [Facts(record) for record, _ in runs]
    rows = []
    for pid in PROPERTY_ORDER:
        answers = [f.properties.get(pid) for f in facts]
        if not any(answers):
            continue
        name = next(a.get("name", "") for a in answers if a)
        rows.append({"label": f"{pid} {name}", "cells": [
            "" if a is None else answer_text(f, pid, a) for f, a in zip(facts, answers, strict=True)]})
    return rows


def _results(record: dict[str, Any], directory: Path, experiment: str) -> pd.DataFrame | None:
    entry = Facts(record).experiments.get(experiment)
    if entry is None:
        return None
    path = directory / entry["results"]
    if not path.is_file():
        return None
    frame = pd.read_csv(path)
    return None if frame.empty else frame


def _tables(runs, labels, experiment: str, columns: set[str]) -> list[tuple[str, pd.DataFrame]]:
    """(label, results table) of every run that has ``experiment`` with ``columns``."""
    found = []
    for label, (record, directory) in zip(labels, runs, strict=True):
        table = _results(record, directory, experiment)
        if table is not None and columns <= set(table.columns):
            found.append((label, table))
    return found


def _qd_figure(runs, labels, out: Path) -> tuple[Path, str] | None:
    tables = _tables(runs, labels, "qd-sweep", {"qd", "iops", "lat_mean_us"})
    if not tables:
        return None
    fig, axes = plots.panels("4 KiB random read against queue depth", 1, 2, size=(12, 4.5))
    for label, table in tables:
        plots.line(axes[0], table["qd"], table["iops"], label=label)
        plots.line(axes[1], table["qd"], table["lat_mean_us"], label=label)
    log_iops = plots.spread_axis(axes[0], pd.concat([t["iops"] for _, t in tables]))
    axes[1].set_yscale("log")
    plots.number_axis(axes[1], "y")
    for ax, ylabel in zip(axes, ("IOPS" + (" (log scale)" if log_iops else ""), "mean latency (µs, log scale)"),
                          strict=True):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("queue depth")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    return plots.save(fig, out, "compare_qd_sweep"), "queue-depth sweep: IOPS and mean latency"


def _bs_figure(runs, labels, out: Path) -> tuple[Path, str] | None:
    tables = _tables(runs, labels, "bs-sweep", {"size", "mb_s", "pattern"})
    if not tables:
        return None
    fig, axes = plots.panels("Read MB/s against request size (QD 32)", 1, 2, size=(12, 4.5))
    for ax, pattern in zip(axes, ("sequential", "random"), strict=True):
        shown = []
        for label, table in tables:
            rows = table[table["pattern"] == pattern].sort_values("size")
            if not rows.empty:
                plots.line(ax, rows["size"], rows["mb_s"], label=label)
                shown.append(rows["mb_s"])
        ax.set_title(pattern)
        plots.size_axis(ax)
        ax.set_xlabel("request size")
        log = plots.spread_axis(ax, pd.concat(shown)) if shown else False
        ax.set_ylabel("MB/s" + (" (log scale)" if log else ""))
        ax.legend(fontsize=8)
    return plots.save(fig, out, "compare_bs_sweep"), "block-size sweep: sequential and random read MB/s"


def _write_figure(runs, labels, out: Path) -> tuple[Path, str] | None:
    fig = None
    for label, table in _tables(runs, labels, "seq-write-over-time", {"phase", "bytes", "mb_s", WINDOW_INDEX}):
        windows = table[table["phase"] == "window"].sort_values(WINDOW_INDEX)
        if windows.empty:
            continue
        if fig is None:
            fig, ax = plots.figure("Sequential write from an empty drive: MB/s against bytes written",
                                   "GB written", "MB/s", size=(12, 4.5))
        ax.plot(windows["bytes"].cumsum() / 1e9, windows["mb_s"].rolling(5, min_periods=1).mean(), label=label,
                linewidth=1.2)
    if fig is None:
        return None
    log = plots.spread_axis(ax, np.concatenate([line.get_ydata() for line in ax.get_lines()]))
    if log:
        ax.set_ylabel("MB/s (log scale)")
    plots.number_axis(ax, "x")
    ax.legend(fontsize=8)
    return plots.save(fig, out, "compare_seq_write"), "sequential write over time (0.5 s rolling mean)"



# ---------------------------------------------------------------------------------------------------------
# the system suite ("Solid State Disks vs Magnetic Disks: Making the right choice"): each drive's bars side by side


def _system_figures(runs, labels, out: Path) -> list[tuple[Path, str] | None]:
    return [_fs_figure(runs, labels, out), _zoning_figure(runs, labels, out), _scheduler_figure(runs, labels, out),
            _video_figure(runs, labels, out)]


def _grouped_bars(ax, tables: list[tuple[str, pd.DataFrame]], category: str, categories: list[str],
                  value: str = "mb_s", legend: bool = False) -> None:
    """One group per category, one bar per run in it (with the std over repetitions where there is one); the
    runs named in this panel's legend only when ``legend`` (one legend per figure: the colours are the same)."""
    x = np.arange(len(categories))
    width = 0.8 / max(len(tables), 1)
    for i, (label, table) in enumerate(tables):
        rows = table.drop_duplicates(category).set_index(category).reindex(categories)
        err = rows[f"{value}_std"].fillna(0.0).to_numpy() if f"{value}_std" in rows else None
        ax.bar(x - 0.4 + width * (i + 0.5), rows[value].to_numpy(), width, yerr=err, capsize=2, color=f"C{i}",
               label=label if legend else None)
    ax.set_xticks(x, categories, fontsize=8, rotation=20)


def _operations_figure(tables, category: str, title: str, name: str, out: Path, caption: str,
                       extra=None) -> tuple[Path, str]:
    operations = ("sequential_write", "sequential_read", "random_read", "random_write")
    categories = list(dict.fromkeys(pd.concat([t[category] for _, t in tables])))
    fig, axes = plots.panels(title, 2, 3 if extra else 2, size=(max(12.0, 1.6 * len(categories) * len(tables) + 4),
                                                                 7.0))
    for i, (ax, operation) in enumerate(zip(axes, operations, strict=False)):
        _grouped_bars(ax, [(label, t[t["operation"] == operation]) for label, t in tables], category, categories,
                      legend=i == 0)
        ax.set_title(operation.replace("_", " "), fontsize=10)
        ax.set_ylabel("MB/s")
        # A hard disk's 4 KiB random MB/s are a hundredth of an SSD's: a log scale shows both.
        values = pd.concat([t.loc[t["operation"] == operation, "mb_s"] for _, t in tables]).dropna()
        if plots.spread_axis(ax, values):
            ax.set_ylabel("MB/s (log scale)")
        else:
            ax.set_ylim(bottom=0)
    if extra:
        extra(axes[4:], categories)
    return plots.save(fig, out, name), caption


def _fs_figure(runs, labels, out: Path) -> tuple[Path, str] | None:
    tables = [(label, t[t["status"] == "measured"]) for label, t in
              _tables(runs, labels, "fs-impact", {"filesystem", "operation", "status", "mb_s"})]
    tables = [(label, t) for label, t in tables if not t.empty]
    if not tables:
        return None
    return _operations_figure(tables, "filesystem", "iozone's four operations per file system", "compare_fs_impact",
                              out, "fs-impact: sequential and random read and write MB/s on one file per file "
                                   "system (QD 1, O_DIRECT), each drive's bars side by side (Figures 4.1-4.7)")


def _scheduler_figure(runs, labels, out: Path) -> tuple[Path, str] | None:
    tables = _tables(runs, labels, "scheduler-impact", {"scheduler", "operation", "mb_s"})
    if not tables:
        return None
    from ..experiments.scheduler_impact import fairness

    def fairness_panels(axes, schedulers):
        fair = [(label, fairness(t)) for label, t in tables]
        fair = [(label, f) for label, f in fair if not f.empty]
        _grouped_bars(axes[0], [(label, f.rename(columns={"jain": "mb_s"})) for label, f in fair], "scheduler",
                      schedulers)
        axes[0].set_ylim(0, 1.05)
        axes[0].set_title("reader beside a writer: Jain's index (1 = even)", fontsize=10)
        axes[1].axis("off")

    return _operations_figure(tables, "scheduler", "The four operations per I/O scheduler", "compare_scheduler_impact",
                              out, "scheduler-impact: the four operations under each I/O scheduler and the "
                                   "fairness of a random reader beside a sequential writer, each drive side by side",
                              extra=fairness_panels)


def _zoning_figure(runs, labels, out: Path) -> tuple[Path, str] | None:
    tables = _tables(runs, labels, "zoning", {"mode", "position_pct", "mb_s"})
    if not tables:
        return None
    fig, ax = plots.figure("Sequential read rate from the start (outer zone) to the end of the drive",
                           "position (% of the range)", "MB/s", size=(12, 4.5))
    for label, table in tables:
        seq = table[table["mode"] == "sequential"].sort_values("position_pct")
        plots.line(ax, seq["position_pct"], seq["mb_s"], seq.get("mb_s_std"), label=label)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return plots.save(fig, out, "compare_zoning"), "zoning: 1 MiB sequential reads across each drive (Figure 3.7)"


def _video_figure(runs, labels, out: Path) -> tuple[Path, str] | None:
    tables = _tables(runs, labels, "video-streaming", {"clients", "client", "achieved_mb_s", "kept"})
    if not tables:
        return None
    from ..experiments.video_streaming import KEEP, per_step

    fig, axes = plots.panels("Streaming clients: achieved rate and clients keeping their rate", 1, 2, size=(12, 4.5))
    for i, (label, table) in enumerate(tables):
        steps = per_step(table)
        axes[0].errorbar(steps.index, steps["mean_mb_s"], yerr=steps["std_mb_s"], marker="o", capsize=3,
                         color=f"C{i}", label=f"{label} (mean ± std)")
        axes[1].plot(steps.index, 100 * steps["kept_share"], "o-", color=f"C{i}", label=label)
    axes[0].set_ylabel("achieved rate per client (MB/s)")
    axes[0].set_ylim(bottom=0)
    axes[1].axhline(100 * KEEP, color="0.4", linestyle="--", linewidth=1, label=f"{KEEP:.0%} of the clients")
    axes[1].set_ylabel(f"clients getting ≥ {KEEP:.0%} of the rate (%)")
    axes[1].set_ylim(0, 105)
    for ax in axes:
        ax.set_xlabel("concurrent clients")
        ax.legend(fontsize=8)
    return (plots.save(fig, out, "compare_video_streaming"),
            "video-streaming: per-client rate (mean ± std over the clients) and the share keeping 99 % of it, per "
            "number of clients (Figures 4.13-4.18)")
