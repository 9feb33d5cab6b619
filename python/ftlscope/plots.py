"""Figure helpers shared by the experiments: one look (size, grid, labels, error bars) for every PNG, drawn
without a display (the Agg backend), so figures render on a headless server or in CI."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

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


def microseconds(ns):
    """ns -> us (latency axes read in microseconds)."""
    return np.asarray(ns, dtype=float) / 1e3


def save(fig, directory: Path, name: str, caption: str = "") -> Path:
    """Write ``directory/name.png`` and free the figure. ``caption``, a sentence saying what the figure shows,
    travels inside the PNG (its Description text), so a report captions the figure wherever the file goes."""
    path = Path(directory) / f"{name}.png"
    if any(ax.get_legend_handles_labels()[0] for ax in fig.axes):
        for ax in fig.axes:
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Description": caption} if caption else None)
    plt.close(fig)
    return path


def caption_of(path: Path) -> str:
    """The caption :func:`save` put into a PNG ("" for a figure saved without one)."""
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as image:
        return str(image.info.get("Description", ""))


def duration_axis(ax, axis: str = "x") -> None:
    """Log scale for durations given in ns, labelled "2 ms", "500 µs", "1 s": decades always, 2 and 5 between
    them while the axis spans less than 1.5 decades (matplotlib's own log ticks label minor ticks as "3x10^0"
    once the axis spans one decade, and those labels collide)."""
    from matplotlib.ticker import LogLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")

    def minor(v: float, _pos) -> str:
        lo, hi = sorted(target.get_view_interval())
        return _duration_label(v) if lo > 0 and np.log10(hi / lo) < 1.5 else ""

    target.set_major_locator(LogLocator(base=10))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: _duration_label(v)))
    target.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
    target.set_minor_formatter(FuncFormatter(minor))


def _duration_label(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:g} {unit}"
    return f"{ns:g} ns"
