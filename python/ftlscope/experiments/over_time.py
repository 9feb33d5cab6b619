"""``seq-read-over-time`` and ``seq-write-over-time`` (seed 000 §5.3, §5.4): one sequential pass over the span,
measured in short time windows on the device's clock: throughput and latency percentiles over time, and the
latency distribution of the whole pass.

The write pass starts on a purged (empty) device, as the seed's fresh drives; where its throughput falls — the
seed saw it after 5-15 % of capacity, when the SLC cache ran out — is the write cliff, found by change-point
detection on the per-window throughput (analysis/changepoint.py). Findings of ``seq-write-over-time``:

- ``cliff_bytes``: bytes written before the cliff (the sum of the windows before the first window of the lower
  level; within one window's bytes of the true point); ``cliff_seconds`` the device time to it;
  ``cliff_pct_of_capacity`` the bytes as a share of the target's capacity; ``throughput_before_mb_s`` and
  ``throughput_after_mb_s`` the mean window throughput of the two levels around it. All None (with the reason)
  when no change point is a fall of at least ``min_drop``;
- ``change_points_s``: every level shift found, in device seconds; ``mb_s``, ``lat_p50_us``, ``lat_p99_us`` of
  the whole pass.

``seq-read-over-time`` reads a filled span (a simulated device is filled first) and reports the same pass
figures, ``window_mb_s_cv`` (how steady the read rate is; the seed found one drive that could not hold its
rate), the change points and the biggest fall, if any.

Windows shorter than half the nominal window (the run's last, partial one) are left out of the detection.
Each window is one table row (``phase`` = window); one more row (``phase`` = run) holds the whole pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis import changepoint
from ..errors import UsageError
from ..metrics import LAT_P50_US, LAT_P99_US, WINDOW_INDEX
from ..units import format_size
from ._common import check_qd, check_size, check_window, device_seconds, op_metrics, window_rows, workload
from .base import Experiment, Param, finding
from .context import Context

S = 10**9
PERCENTILES = (("p50", "lat_p50_us"), ("p90", "lat_p90_us"), ("p99", "lat_p99_us"), ("p99.9", "lat_p99_9_us"))
RUN_PERCENTILES = (("min", "lat_min_us"), ("50", "lat_p50_us"), ("90", "lat_p90_us"), ("95", "lat_p95_us"),
                   ("99", "lat_p99_us"), ("99.9", "lat_p99_9_us"), ("99.99", "lat_p99_99_us"),
                   ("max", "lat_max_us"))


def _check(p: dict[str, Any]) -> None:
    check_size(p)
    check_qd(p)
    check_window(p)
    if p["runtime"] < 0:
        raise UsageError("--param runtime: give 0 (the whole span) or a duration")
    if not 0 <= p["min_drop"] < 1:
        raise UsageError(f"--param min_drop: give a fraction between 0 and 1 (got {p['min_drop']})")
    if p["penalty"] <= 0:
        raise UsageError(f"--param penalty: give a scale above 0 (got {p['penalty']})")


def _measure(ctx: Context, p: dict[str, Any], op: str):
    _check(p)
    span = ctx.span(p["span"], align=max(p["size"], 4096))
    if op == "read":
        ctx.ensure_readable(span)
    wl = workload(op, size=p["size"], pattern="sequential", qd=p["qd"], span=span, total_bytes=span,
                  runtime_ns=p["runtime"] or None)
    result = ctx.run(wl, f"{format_size(p['size'])} sequential {op} QD {p['qd']} over {format_size(span)}",
                     window=f"{p['window']}ns")
    for row in window_rows(result, op).to_dict("records"):
        yield {"phase": "window", **row}
    yield {"phase": "run", WINDOW_INDEX: -1, "capacity": ctx.capacity, "span": span,
           "seconds": device_seconds(result), **op_metrics(result, op)}


def measure_write(ctx: Context, p: dict[str, Any]):
    yield from _measure(ctx, p, "write")


def measure_read(ctx: Context, p: dict[str, Any]):
    yield from _measure(ctx, p, "read")


# ---- analysis -------------------------------------------------------------------------------------------


def _windows(table: pd.DataFrame) -> pd.DataFrame:
    w = table[table["phase"] == "window"].sort_values(WINDOW_INDEX).reset_index(drop=True)
    return w


def _whole(table: pd.DataFrame, p: dict[str, Any]) -> pd.DataFrame:
    """The windows that count for detection: all but partial ones (shorter than half the nominal window)."""
    w = _windows(table)
    return w[w["duration_s"] >= 0.5 * p["window"] / S].reset_index(drop=True)


def _run_row(table: pd.DataFrame) -> pd.Series | None:
    run = table[table["phase"] == "run"]
    return None if run.empty else run.iloc[0]


def _levels(table: pd.DataFrame, p: dict[str, Any]):
    """(detection windows, change point indices into them, biggest fall or None)."""
    w = _whole(table, p)
    if len(w) < 4:
        return w, [], None
    x = w["mb_s"].to_numpy(dtype=float)
    points = changepoint.change_points(x, penalty=changepoint.default_penalty(x, p["penalty"]))
    drop = changepoint.biggest_drop(x, points, min_drop=p["min_drop"])
    return w, points, drop


def _pass_findings(table: pd.DataFrame, op: str) -> dict[str, Any]:
    run = _run_row(table)
    if run is None or "mb_s" not in run or pd.isna(run["mb_s"]):
        return {}
    evidence = f"results.csv row phase=run: the whole sequential {op} pass"
    return {
        "mb_s": finding(run["mb_s"], "MB/s", evidence),
        "lat_p50_us": finding(run["lat_p50_us"], "us", evidence),
        "lat_p99_us": finding(run["lat_p99_us"], "us", evidence),
        "pass_seconds": finding(run["seconds"], "s", evidence + " (device time)"),
    }


def _change_findings(w: pd.DataFrame, points: list[int]) -> dict[str, Any]:
    t0 = float(w["t_s"].iloc[0]) if len(w) else 0.0
    times = [round(float(w["t_s"].iloc[i]) - t0, 3) for i in points]
    return {"change_points_s": finding(times, "s", f"binary segmentation (l2) of the {len(w)} full windows' "
                                                   "MB/s (results.csv phase=window)")}


def analyse_write(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings = _pass_findings(table, "write")
    w, points, drop = _levels(table, p)
    findings.update(_change_findings(w, points))
    run = _run_row(table)
    capacity = float(run["capacity"]) if run is not None else float("nan")
    if drop is None:
        why = (f"no level shift in the window throughput is a fall of {p['min_drop']:.0%} or more "
               f"({len(points)} change point(s) found): no write cliff within this pass")
        if len(w) < 4:
            why = f"only {len(w)} full time window(s): too few to look for a cliff; use a smaller --param window"
        for key, unit in (("cliff_bytes", "B"), ("cliff_seconds", "s"), ("cliff_pct_of_capacity", "%"),
                          ("throughput_before_mb_s", "MB/s"), ("throughput_after_mb_s", "MB/s")):
            findings[key] = finding(None, unit, why)
        findings.update(_window_latency(w, "every full window (no cliff)"))
        return findings
    first_low = int(w[WINDOW_INDEX].iloc[drop.index])
    every = _windows(table)
    cliff_bytes = float(every.loc[every[WINDOW_INDEX] < first_low, "bytes"].sum())
    cliff_s = float(w["t_s"].iloc[drop.index] - every["t_s"].iloc[0])
    last_high = every.loc[every[WINDOW_INDEX] < first_low, "bytes"]
    resolution = float(last_high.iloc[-1]) if len(last_high) else 0.0
    evidence = (f"the biggest fall among the change points of the per-window throughput: from window "
                f"{first_low} (t = {cliff_s:.2f} s) the mean falls from {drop.before:.0f} to {drop.after:.0f} MB/s; "
                f"bytes = sum of results.csv 'bytes' of the windows before it (exact to one window: "
                f"{resolution / 1e6:.0f} MB)")
    findings["cliff_bytes"] = finding(cliff_bytes, "B", evidence)
    findings["cliff_seconds"] = finding(cliff_s, "s", evidence)
    findings["cliff_pct_of_capacity"] = finding(100 * cliff_bytes / capacity, "%",
                                                f"cliff_bytes / the target's capacity ({capacity:.0f} B)")
    findings["throughput_before_mb_s"] = finding(drop.before, "MB/s", "mean window MB/s of the level before "
                                                                      "the cliff")
    findings["throughput_after_mb_s"] = finding(drop.after, "MB/s", "mean window MB/s of the level after "
                                                                    "the cliff (to the next change point)")
    findings.update(_window_latency(w[w[WINDOW_INDEX] < first_low], f"the full windows before the cliff "
                                                                   f"(window {first_low})"))
    return findings


def _window_latency(w: pd.DataFrame, which: str) -> dict[str, Any]:
    """The typical write latency of a window at the rate the level runs at: the median over ``w`` of each
    window's p50 and p99 (a median, so a single window with a flush does not stand for the level)."""
    if w.empty:
        return {}
    evidence = f"median over {which} of each window's {{}} (results.csv phase=window, {len(w)} windows)"
    return {"window_lat_p50_us": finding(float(w[LAT_P50_US].median()), "us", evidence.format("p50")),
            "window_lat_p99_us": finding(float(w[LAT_P99_US].median()), "us", evidence.format("p99"))}


def analyse_read(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings = _pass_findings(table, "read")
    w, points, drop = _levels(table, p)
    if len(w):
        x = w["mb_s"].to_numpy(dtype=float)
        evidence = f"the {len(w)} full time windows of results.csv (phase=window)"
        findings["window_mb_s_min"] = finding(float(x.min()), "MB/s", evidence)
        findings["window_mb_s_max"] = finding(float(x.max()), "MB/s", evidence)
        findings["window_mb_s_cv"] = finding(float(x.std() / x.mean()) if x.mean() else None, "ratio",
                                             evidence + ": stddev / mean of the window MB/s")
    findings.update(_change_findings(w, points))
    if drop is None:
        findings["biggest_drop_ratio"] = finding(None, "ratio", f"no fall of {p['min_drop']:.0%} or more")
    else:
        t = float(w["t_s"].iloc[drop.index] - w["t_s"].iloc[0])
        findings["biggest_drop_ratio"] = finding(
            drop.ratio, "ratio", f"window MB/s after / before the biggest fall, at t = {t:.2f} s "
                                 f"({drop.before:.0f} -> {drop.after:.0f} MB/s)")
        findings["biggest_drop_seconds"] = finding(t, "s", "device time of the biggest fall")
    return findings


# ---- figures --------------------------------------------------------------------------------------------


def _mark_cliff(ax, findings: dict[str, Any]) -> None:
    cliff = findings.get("cliff_seconds", {}).get("value")
    if cliff is not None:
        gb = findings["cliff_bytes"]["value"] / 1e9
        ax.axvline(cliff, color="tab:red", linestyle="--", linewidth=1,
                   label=f"cliff after {gb:.2f} GB written ({findings['cliff_pct_of_capacity']['value']:.1f} % "
                         "of capacity)")


def _figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path, op: str):
    w = _windows(table)
    out: list[Path] = []
    if w.empty:
        return out
    t = w["t_s"].to_numpy(dtype=float) - float(w["t_s"].iloc[0])
    what = f"{format_size(p['size'])} sequential {op}, QD {p['qd']}"

    fig, ax = plots.figure(f"Throughput over time ({what})", "time (s, device clock)", "MB/s")
    mb = w["mb_s"].to_numpy(dtype=float)
    ax.plot(t, mb, color="tab:blue", linewidth=0.5, alpha=0.35, label=f"per {p['window'] / 1e6:g} ms window")
    # Flush stalls make neighbouring windows swing between 0 and the peak; a moving average over about
    # 1 % of the pass (at least 1 s) shows the rate a user gets.
    smooth = max(int(round(max(1e9, 0.01 * len(mb) * p["window"]) / p["window"])), 1)
    if smooth > 1:
        rolling = pd.Series(mb).rolling(smooth, center=True, min_periods=1).mean().to_numpy()
        ax.plot(t, rolling, color="tab:blue", linewidth=1.2,
                label=f"moving average over {smooth * p['window'] / 1e9:g} s")
    if "mb_s_std" in w and np.nan_to_num(w["mb_s_std"].to_numpy(dtype=float)).any():
        sd = np.nan_to_num(w["mb_s_std"].to_numpy(dtype=float))
        ax.fill_between(t, mb - sd, mb + sd, color="tab:blue", alpha=0.2, label="± stddev over repetitions")
    full, points, _drop = _levels(table, p)
    if len(full):
        tf = full["t_s"].to_numpy(dtype=float) - float(w["t_s"].iloc[0])
        for seg in changepoint.segments(full["mb_s"].to_numpy(dtype=float), points):
            ax.hlines(seg.mean, tf[seg.start], tf[seg.end - 1], color="black", linewidth=1.5)
        ax.plot([], [], color="black", label="level between change points")
    _mark_cliff(ax, findings)
    ax.set_ylim(bottom=0)
    out.append(plots.save(fig, directory, f"seq_{op}_throughput_over_time",
                          f"Throughput per window over one pass of {what}, with its moving average and the levels "
                          "between change points."))

    fig, ax = plots.figure(f"Latency percentiles over time ({what})", "time (s, device clock)", "latency (us)")
    busy = w["ops"].to_numpy(dtype=float) > 0
    for name, column in PERCENTILES:
        ax.plot(t[busy], w.loc[busy, column], linewidth=0.8, label=name)
    ax.set_yscale("log")
    _mark_cliff(ax, findings)
    out.append(plots.save(fig, directory, f"seq_{op}_latency_over_time",
                          f"Latency percentiles per window over one pass of {what}."))

    run = _run_row(table)
    if run is not None and "lat_p50_us" in run and not pd.isna(run["lat_p50_us"]):
        fig, ax = plots.figure(f"Latency by percentile, whole pass ({what})", "percentile", "latency (us)")
        labels = [name for name, _ in RUN_PERCENTILES]
        values = [run[column] for _, column in RUN_PERCENTILES]
        errors = [run.get(f"{column}_std", 0.0) for _, column in RUN_PERCENTILES]
        plots.line(ax, range(len(labels)), values, errors, color="tab:purple")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_yscale("log")
        out.append(plots.save(fig, directory, f"seq_{op}_latency_percentiles",
                              f"Latency at each percentile over the whole pass of {what} (error bars: the spread over "
                              "repetitions)."))
    return out


def figures_write(table, findings, p, directory):
    return _figures(table, findings, p, directory, "write")


def figures_read(table, findings, p, directory):
    return _figures(table, findings, p, directory, "read")


def _params(min_drop: float) -> tuple[Param, ...]:
    return (
        Param("span", "size", 0, "range to pass over; 0 = the whole target", "0 (whole target)"),
        Param("size", "size", 128 * 1024, "request size (the seed used the largest the drive took)", "128KiB"),
        Param("qd", "int", 64, "queue depth (the seed's maximum, 64)", "64"),
        Param("window", "duration", 100 * 10**6, "time window of the series, on the device clock", "100ms"),
        Param("runtime", "duration", 0, "stop after this long; 0 = when the span is passed over", "0 (whole span)"),
        Param("min_drop", "float", min_drop, "a level shift down by at least this fraction counts as a fall",
              f"{min_drop:g}"),
        Param("penalty", "float", 1.0, "change-point penalty, x 2 var ln(n) of the window MB/s (lower finds "
                                       "smaller shifts)", "1.0"),
    )


KEYS = ("phase", WINDOW_INDEX)

EXPERIMENTS = [
    Experiment(
        name="seq-write-over-time",
        summary="one sequential write pass over an empty device: MB/s and latency percentiles over time, and "
                "the write cliff (bytes and seconds before the SLC cache runs out)",
        source="“What does the Flash Translation Layer do?” §5.4",
        writes=True,
        preconditioning="purge",
        params=_params(0.25),
        keys=KEYS,
        measure=measure_write,
        analyse=analyse_write,
        figures=figures_write,
        check=_check,
    ),
    Experiment(
        name="seq-read-over-time",
        summary="one sequential read pass over a filled span: MB/s and latency percentiles over time, and "
                "whether the rate holds",
        source="“What does the Flash Translation Layer do?” §5.3",
        writes=False,
        preconditioning="none",
        params=_params(0.1),
        keys=KEYS,
        measure=measure_read,
        analyse=analyse_read,
        figures=figures_read,
        check=_check,
    ),
]
