"""The figures of one ``ftlscope run`` (``--plots DIR``), as fio-plot users expect them, per operation:

- ``OP-latency-histogram.png``: requests per latency bin, bins spaced evenly on a log axis;
- ``OP-latency-cdf.png``: the share of requests at or below each latency, with the run's p50/p99/p99.9 marked;
- ``OP-over-time.png``: IOPS and latency (p50, p99, p99.9) per time window.

The histogram and CDF are drawn from the per-request trace (every measured request, warm-up left out); the
markers are the summary's percentiles, so the figure and the table agree. The over-time figure reads the run's
time windows. A trace streamed to a file (a replay's ``--plots`` and ``--report``) is read back in batches
(:mod:`ftlscope.trace_figures`): the histogram's counts are exact, the CDF steps through 0.1 %-wide buckets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import plots
from .results import RunResult

if TYPE_CHECKING:
    from .trace_figures import TraceFigures

MARKED = ("p50", "p99", "p99.9")
HISTOGRAM_BINS = 60


@dataclass
class LatencyFigureData:
    """What the latency figures of one operation show, in nanoseconds (kept for tests and callers)."""

    op: str
    measured: int  # requests the summary counts; more than ``shown`` when the trace hit its limit
    latencies_ns: np.ndarray  # sorted: every latency of a trace held in memory (empty for a streamed one)
    bin_edges_ns: np.ndarray
    counts: np.ndarray
    markers_ns: dict[str, float]
    # The CDF's points: latency (ns) and the share of requests at or below it (%); every latency of a trace in
    # memory, each 0.1 %-wide bucket's mean of a streamed one. ``shown``: the requests the figures hold.
    cdf_ns: np.ndarray | None = None
    cdf_pct: np.ndarray | None = None
    shown: int = 0

    def __post_init__(self) -> None:
        if self.cdf_ns is None:
            self.cdf_ns = self.latencies_ns
            self.cdf_pct = np.arange(1, self.latencies_ns.size + 1) / max(self.latencies_ns.size, 1) * 100
            self.shown = int(self.latencies_ns.size)


def latency_data(result: RunResult, op: str) -> LatencyFigureData:
    """The measured requests of ``op`` from the trace, their log-spaced histogram and the summary's markers."""
    trace = result.trace
    rows = trace[(trace["op"] == op) & ~trace["warmup"] & (trace["status"] >= 0)]
    lat = np.sort(rows["latency_ns"].to_numpy(dtype=np.int64))
    markers = {k: float(result.summary[op]["lat_ns"][k]) for k in MARKED}
    measured = int(result.summary[op]["ops"])
    if lat.size == 0:
        return LatencyFigureData(op, measured, lat, np.array([]), np.array([]), markers)
    from .trace_figures import histogram_edges

    edges = histogram_edges(int(lat[0]), int(lat[-1]), HISTOGRAM_BINS)
    counts, _ = np.histogram(lat, bins=edges)
    return LatencyFigureData(op, measured, lat, edges, counts, markers)


def streamed_latency_data(figures: TraceFigures, result: RunResult, op: str) -> LatencyFigureData:
    """:func:`latency_data` from a trace read back in batches (:func:`ftlscope.trace_figures.gather`)."""
    markers = {k: float(result.summary[op]["lat_ns"][k]) for k in MARKED}
    measured = int(result.summary[op]["ops"])
    data = figures.latencies.get(op)
    empty = np.array([], dtype=np.int64)
    if data is None or data.low is None:
        return LatencyFigureData(op, measured, empty, np.array([]), np.array([]), markers)
    edges, counts = figures.histograms[op]
    cdf_ns, cdf_pct = data.quantiles.cdf()
    return LatencyFigureData(op, measured, empty, edges, counts, markers, cdf_ns=cdf_ns, cdf_pct=cdf_pct,
                             shown=data.quantiles.n)


def _requests(data: LatencyFigureData) -> str:
    """How many requests a figure shows; says so when the trace kept only the first of them."""
    if data.shown < data.measured:
        return f"the first {data.shown:,} of {data.measured:,} requests (trace limit)"
    return f"{data.shown:,} requests"


def _unit(markers_ns: dict[str, float]) -> tuple[float, str]:
    """One latency unit per figure, chosen by the percentiles people read (not by a stray maximum): ms when
    p99.9 is 1 ms or more, else µs."""
    return (1e6, "ms") if markers_ns["p99.9"] >= 1e6 else (1e3, "µs")


def write_run_plots(result: RunResult, directory: str | Path, *, note: str = "",
                    figures: TraceFigures | None = None) -> list[Path]:
    """Write the figures of every operation the run measured; returns their paths. ``note`` ends every title
    (a replay of a synthetic trace says so on each figure). ``figures``: the trace read back in batches
    (:func:`ftlscope.trace_figures.gather`), for a run whose trace was streamed to a file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if result.trace.empty and figures is None:
        raise ValueError("write_run_plots needs the run's trace: run it with trace=True")
    paths = []
    for op in result.ops:
        data = latency_data(result, op) if figures is None else streamed_latency_data(figures, result, op)
        if data.shown:
            paths.append(_histogram(data, directory, note))
            paths.append(_cdf(data, directory, note))
        if not result.windows.empty:
            paths.append(_over_time(result.windows, op, directory, note))
    return paths


def _histogram(data: LatencyFigureData, directory: Path, note: str = "") -> Path:
    scale, unit = _unit(data.markers_ns)
    fig, ax = plots.figure(f"{data.op}: latency histogram ({_requests(data)}){note}",
                           f"latency ({unit}, log scale)", "requests (log scale)")
    edges = data.bin_edges_ns / scale
    ax.stairs(data.counts, edges, fill=True, alpha=0.7)
    ax.set_xscale("log")
    # Counts on a log scale too: the tail (a few slow requests in thousands) is what a reader looks for.
    ax.set_yscale("log")
    plots.number_axis(ax, "x")
    plots.number_axis(ax, "y")
    _mark_percentiles(ax, data.markers_ns, scale, unit, levels=False)
    return plots.save(fig, directory, f"{data.op}-latency-histogram")


def _mark_percentiles(ax, markers_ns: dict[str, float], scale: float, unit: str, *, levels: bool) -> None:
    """A dashed line per percentile (and its point on the CDF), the values listed in one box in a corner rather
    than beside each line: p99 and p99.9 are often a pixel apart."""
    lines = []
    for n, (name, value) in enumerate(markers_ns.items()):
        color = f"C{n + 1}"
        ax.axvline(value / scale, linestyle="--", linewidth=0.9, color=color)
        if levels:
            ax.plot([value / scale], [float(name[1:])], marker="o", linestyle="none", color=color)
        lines.append(f"{name:>5}  {plots.format_number(value / scale)} {unit}")
    ax.text(0.98, 0.04 if levels else 0.96, "\n".join(lines), transform=ax.transAxes, ha="right",
            va="bottom" if levels else "top", fontsize=9, family="monospace",
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "0.7"})


def _cdf(data: LatencyFigureData, directory: Path, note: str = "") -> Path:
    scale, unit = _unit(data.markers_ns)
    fig, ax = plots.figure(f"{data.op}: latency CDF ({_requests(data)}){note}",
                           f"latency ({unit}, log scale)", "requests at or below (%)")
    ax.step(data.cdf_ns / scale, data.cdf_pct, where="post", linewidth=1.5)
    ax.set_xscale("log")
    plots.number_axis(ax, "x")
    ax.set_ylim(0, 100.5)
    _mark_percentiles(ax, data.markers_ns, scale, unit, levels=True)
    return plots.save(fig, directory, f"{data.op}-latency-cdf")


def _latency_column(windows: pd.DataFrame, key: str) -> str:
    """The window table's column for a percentile, whichever spelling this version writes."""
    for name in (f"lat_{key}_ns", f"lat_{key.replace('.', '_')}_ns"):
        if name in windows.columns:
            return name
    raise KeyError(f"the windows table has no column for {key}")


def over_time_data(windows: pd.DataFrame, op: str) -> pd.DataFrame:
    """Per window of ``op``: start (s), IOPS, and the marked percentiles in ns."""
    rows = windows[windows["op"] == op]
    frame = pd.DataFrame({"start_s": rows["start_ns"].to_numpy() / 1e9, "iops": rows["iops"].to_numpy()})
    for key in MARKED:
        frame[key] = rows[_latency_column(windows, key)].to_numpy(dtype=float)
    # A window in which no request completed has no latency (the table writes 0): leave a gap, not a zero.
    frame.loc[rows["ops"].to_numpy() == 0, list(MARKED)] = np.nan
    return frame


def _over_time(windows: pd.DataFrame, op: str, directory: Path, note: str = "") -> Path:
    data = over_time_data(windows, op)
    fig, (top, bottom) = plots.panels(f"{op}: IOPS and latency over time ({len(data):,} windows){note}", 2, 1,
                                      size=(7.5, 6.0), sharex=True)
    plots.line(top, data["start_s"], data["iops"], marker=".")
    top.set_ylabel("IOPS")
    top.set_ylim(bottom=0)
    plots.number_axis(top, "y")
    scale, unit = _unit({"p99.9": float(np.nanmedian(data["p99.9"])) if len(data) else 0.0})
    for key in MARKED:
        plots.line(bottom, data["start_s"], data[key] / scale, marker=".", label=key)
    # Log scale: one window's stall (tens of ms) would otherwise flatten p50 and p99 onto the axis.
    bottom.set_yscale("log")
    bottom.set_ylabel(f"latency ({unit}, log scale)")
    bottom.set_xlabel("time since the start (s)")
    plots.number_axis(bottom, "y")
    return plots.save(fig, directory, f"{op}-over-time")
