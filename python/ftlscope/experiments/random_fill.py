"""``random-fill`` (seed 000 §3.3.5, §5.9): every block of the span written exactly once, in a random order, one
request at a time — the seed's worst case, which took one of its drives 79 hours. The drive starts sequentially
filled, as the seed's did ("up until now, all writes were performed sequentially"), so every random write
overwrites data and the FTL must collect the garbage it leaves.

Measured in time windows: throughput over time and, as a rolling curve, the share of requests slower than 1 ms
(seed 000 Fig. 5.18: the requests that waited for an erase). Findings:

- ``write_amplification``: media (NAND) bytes written / host bytes written during the fill, from the health
  counters before and after it; None with the reason where the target has no health log or its log has no
  media-bytes counter (most consumer drives, seed 000 §3.2.1);
- ``slowdown_ratio``: throughput over the first ``early`` share of the bytes written divided by throughput over
  the last ``early`` share (each = those bytes / the device time they took). Above 1: the fill slowed down as
  it went; 1: it kept its pace (``early_mb_s``, ``late_mb_s`` are the two levels);
- ``burst_to_mean_ratio``: the first window's throughput / the whole fill's — the slowdown from the fresh
  drive's first moments, which a fill that is slow almost from its start (garbage collection beginning once
  the over-provisioned blocks are used) shows where ``slowdown_ratio`` does not;
- ``slow_share_final``: the share of requests over 1 ms in the last ``rolling`` windows; ``slow_share`` over
  the whole fill;
- ``fill_seconds``, ``mb_s``, ``iops``, ``lat_p50_us``, ``lat_p99_us``, ``lat_max_us`` of the whole fill.

One table row per time window (``phase`` = window), one for the whole fill (``phase`` = run).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis import rolling
from ..errors import UsageError
from ..metrics import WINDOW_INDEX
from ..units import format_size
from ._common import check_qd, check_size, check_window, device_seconds, op_metrics, window_rows, workload
from .base import Experiment, Param, finding
from .context import Context

S = 10**9


def _check(p: dict[str, Any]) -> None:
    check_size(p)
    check_qd(p)
    check_window(p)
    if p["runtime"] < 0:
        raise UsageError("--param runtime: give 0 (until every block is written) or a duration")
    if p["rolling"] < 1:
        raise UsageError(f"--param rolling: give at least 1 window (got {p['rolling']})")
    if not 0 < p["early"] <= 0.5:
        raise UsageError(f"--param early: give a fraction in (0, 0.5] (got {p['early']})")


def _amplification(before: dict[str, Any] | None, after: dict[str, Any] | None) -> tuple[float, str]:
    """(media / host bytes written between the two health samples, where they came from or why it is
    missing)."""
    if before is None or after is None:
        return math.nan, "the target has no health log (a regular file, or no NVMe/SMART log readable here)"
    try:
        host = after["host_bytes_written"] - before["host_bytes_written"]
        media = after["media_bytes_written"] - before["media_bytes_written"]
    except (KeyError, TypeError):
        return math.nan, ("the health log has no media (NAND) bytes written counter — most consumer drives "
                          "report only host writes (“What does the Flash Translation Layer do?” §3.2.1)")
    if host <= 0:
        return math.nan, "the health log's host bytes written did not move during the fill (coarse units?)"
    return media / host, f"health counters ({after.get('source', 'health log')}) read before and after the fill"


def measure(ctx: Context, p: dict[str, Any]):
    _check(p)
    span = ctx.span(p["span"], align=max(p["size"], 4096))
    before = ctx.health()
    wl = workload("write", size=p["size"], pattern="permutation", qd=p["qd"], span=span, total_bytes=span,
                  runtime_ns=p["runtime"] or None, seed=1 + ctx.repetition)
    result = ctx.run(wl, f"random fill {format_size(span)} in {format_size(p['size'])} writes QD {p['qd']}",
                     window=f"{p['window']}ns")
    after = ctx.health()
    wa, source = _amplification(before, after)
    for row in window_rows(result, "write").to_dict("records"):
        yield {"phase": "window", **row}
    yield {"phase": "run", WINDOW_INDEX: -1, "span": span, "seconds": device_seconds(result),
           "write_amplification": wa, "wa_source": source, **op_metrics(result, "write")}


# ---- analysis -------------------------------------------------------------------------------------------


def _split(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series | None]:
    w = table[table["phase"] == "window"].sort_values(WINDOW_INDEX).reset_index(drop=True)
    run = table[table["phase"] == "run"]
    return w, (None if run.empty else run.iloc[0])


def _slow_curve(w: pd.DataFrame, k: int) -> np.ndarray:
    ops = w["ops"].to_numpy(dtype=float)
    return rolling.rolling_share(w["slow_share"].to_numpy(dtype=float) * ops, ops, k)


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    w, run = _split(table)
    findings: dict[str, Any] = {}
    if run is not None and "mb_s" in run and not pd.isna(run["mb_s"]):
        evidence = "results.csv row phase=run: the whole random fill"
        findings["fill_seconds"] = finding(run["seconds"], "s", evidence + " (device time)")
        findings["mb_s"] = finding(run["mb_s"], "MB/s", evidence)
        findings["iops"] = finding(run["iops"], "IOPS", evidence)
        for column in ("lat_p50_us", "lat_p99_us", "lat_max_us"):
            findings[column] = finding(run[column], "us", evidence)
        findings["slow_share"] = finding(run["slow_share"], "share", evidence + ": requests over 1 ms / all")
        wa = run.get("write_amplification")
        source = str(run.get("wa_source", ""))
        if wa is not None and not pd.isna(wa):
            findings["write_amplification"] = finding(wa, "ratio", "media bytes written / host bytes written, "
                                                                    f"from {source}")
        else:
            findings["write_amplification"] = finding(None, "ratio", f"not measurable: {source}")
    if len(w):
        early, late = rolling.early_late(w["bytes"].to_numpy(dtype=float), w["duration_s"].to_numpy(dtype=float),
                                         p["early"])
        share = f"{p['early']:.0%}"
        findings["early_mb_s"] = finding(early / 1e6, "MB/s", f"bytes / device time of the windows holding the "
                                                               f"first {share} of the bytes written")
        findings["late_mb_s"] = finding(late / 1e6, "MB/s", f"the same over the last {share}")
        findings["slowdown_ratio"] = finding(
            early / late if late > 0 else None, "ratio",
            f"early_mb_s / late_mb_s (first vs last {share} of the bytes); above 1 = slower at the end")
        if run is not None and run.get("mb_s", 0) > 0:
            findings["burst_to_mean_ratio"] = finding(
                float(w["mb_s"].iloc[0]) / float(run["mb_s"]), "ratio",
                "the first time window's MB/s / the whole fill's MB/s; above 1 = slower than its start")
        curve = _slow_curve(w, p["rolling"])
        final = curve[-1] if len(curve) else math.nan
        findings["slow_share_final"] = finding(
            None if pd.isna(final) else final, "share",
            f"requests over 1 ms / all requests in the last {p['rolling']} time windows (the rolling curve's "
            "end)")
    return findings


# ---- figures --------------------------------------------------------------------------------------------


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    w, _run = _split(table)
    out: list[Path] = []
    if w.empty:
        return out
    t = w["t_s"].to_numpy(dtype=float) - float(w["t_s"].iloc[0])
    # the seed's fills took hours to days; a small one takes seconds: label the axis in the unit that reads
    unit, scale = ("h", 3600) if t[-1] > 7200 else ("min", 60) if t[-1] > 120 else ("s", 1)
    t = t / scale
    xlabel = f"time ({unit}, device clock)"
    what = f"{format_size(p['size'])} writes in random order, QD {p['qd']}"
    window = f"{p['window'] / S:g} s"

    fig, ax = plots.figure(f"Random fill: throughput over time ({what})", xlabel, "MB/s")
    ax.plot(t, w["mb_s"], color="tab:blue", linewidth=0.6, alpha=0.5, label=f"per {window} window")
    ax.plot(t, rolling.rolling_mean(w["mb_s"].to_numpy(dtype=float), p["rolling"]), color="tab:blue",
            label=f"rolling mean of {p['rolling']} windows")
    ax.set_ylim(bottom=0)
    out.append(plots.save(fig, directory, "random_fill_throughput_over_time",
                          f"Throughput per window while filling the drive with {what}, with a rolling mean."))

    fig, ax = plots.figure(f"Random fill: requests over 1 ms ({what})", xlabel,
                           "requests over 1 ms (%)")
    ax.plot(t, 100 * _slow_curve(w, p["rolling"]), color="tab:red",
            label=f"pooled over the last {p['rolling']} windows of {window}")
    ax.set_ylim(bottom=0)
    out.append(plots.save(fig, directory, "random_fill_slow_share_over_time",
                          f"The share of requests taking over 1 ms while filling the drive with {what}."))
    return out


EXPERIMENTS = [
    Experiment(
        name="random-fill",
        summary="every block written once in random order at QD 1 on a sequentially filled drive: throughput "
                "and the share of requests over 1 ms over time, write amplification where the drive reports it",
        source="“What does the Flash Translation Layer do?” §3.3.5, §5.9",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", 0, "range to fill; 0 = the whole target", "0 (whole target)"),
            Param("size", "size", 4096, "block (request) size", "4KiB"),
            Param("qd", "int", 1, "queue depth (the seed: 1; it suspected QD 4 would help low-latency drives)",
                  "1"),
            Param("window", "duration", 10 * S, "time window of the series, on the device clock", "10s"),
            Param("rolling", "int", 10, "windows pooled in the rolling share of slow requests", "10"),
            Param("early", "float", 0.1, "share of the bytes that makes the early and the late level", "0.1"),
            Param("runtime", "duration", 0, "stop after this long; 0 = when every block is written",
                  "0 (until done)"),
        ),
        keys=("phase", WINDOW_INDEX),
        measure=measure,
        analyse=analyse,
        figures=figures,
        check=_check,
    )
]
