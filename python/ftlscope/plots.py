"""Figure helpers shared by the experiments: one look (size, grid, labels, error bars) for every PNG, drawn
without a display (the Agg backend), so figures render on a headless server or in CI."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from .units import format_size  # noqa: E402

DPI = 110


def figure(title: str, xlabel: str, ylabel: str, *, size: tuple[float, float] = (7.5, 4.5)):
    """A new figure with one axes, titled and labelled."""
    fig, ax = plt.subplots(figsize=size, dpi=DPI)
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def panels(title: str, rows: int, cols: int, *, size: tuple[float, float] | None = None, sharex: bool = False):
    """A figure with a grid of axes (returned as a flat array)."""
    size = size or (4.2 * cols, 3.2 * rows)
    fig, axes = plt.subplots(rows, cols, figsize=size, dpi=DPI, squeeze=False, sharex=sharex)
    fig.suptitle(title, fontsize=11)
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
    return fig, axes.ravel()


def line(ax, x, y, yerr=None, *, label: str | None = None, marker: str = "o", **kwargs):
    """A line with points; error bars where there is spread (repetitions), none where it is all zero/NaN."""
    y = np.asarray(y, dtype=float)
    err = None if yerr is None else np.nan_to_num(np.asarray(yerr, dtype=float))
    if err is not None and np.any(err > 0):
        return ax.errorbar(x, y, yerr=err, label=label, marker=marker, markersize=4, capsize=3, **kwargs)
    return ax.plot(x, y, label=label, marker=marker, markersize=4, **kwargs)


def size_axis(ax, axis: str = "x", base: int = 2) -> None:
    """Log scale with sizes as 4KiB, 1MiB ... on the ticks."""
    formatter = FuncFormatter(lambda v, _pos: format_size(v) if v > 0 else "0")
    if axis == "x":
        ax.set_xscale("log", base=base)
        ax.xaxis.set_major_formatter(formatter)
    else:
        ax.set_yscale("log", base=base)
        ax.yaxis.set_major_formatter(formatter)


def format_number(value: float) -> str:
    """A tick label: thousands separators from 1,000 up, three significant digits below, no e-notation."""
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 0.001 else f"{value:.1e}"


def number_axis(ax, axis: str = "y") -> None:
    """Plain numbers with thousands separators on an axis; on a log axis, as many labelled ticks per decade as
    fit without colliding (1-2-5 over one to three decades, every integer multiple within one, powers of ten
    beyond), and no labels on the minor ticks, which matplotlib would otherwise print over one another."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    if (ax.get_xscale() if axis == "x" else ax.get_yscale()) == "log":
        low, high = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
        decades = np.log10(high / low) if low > 0 else 99
        subs = (1.0,) if decades > 3 else (1.0, 2.0, 5.0) if decades > 1 else tuple(float(i) for i in range(1, 10))
        target.set_major_locator(LogLocator(base=10, subs=subs))
        target.set_minor_formatter(NullFormatter())
    target.set_major_formatter(FuncFormatter(lambda v, _pos: format_number(v)))


def microseconds(ns):
    """ns -> us (latency axes read in microseconds)."""
    return np.asarray(ns, dtype=float) / 1e3


def save(fig, directory: Path, name: str) -> Path:
    """Write ``directory/name.png`` and free the figure."""
    path = Path(directory) / f"{name}.png"
    if any(ax.get_legend_handles_labels()[0] for ax in fig.axes):
        for ax in fig.axes:
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
