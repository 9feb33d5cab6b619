"""Figure helpers shared by the experiments: one look (size, grid, labels, error bars) for every PNG, drawn
without a display (the Agg backend), so figures render on a headless server or in CI."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FuncFormatter,
    LogFormatterSciNotation,
    LogLocator,
    NullFormatter,
    ScalarFormatter,
)

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


# At most this many labelled sizes on an axis: "64 KiB" labels need about 0.7 in each, and a panel of a
# multi-panel figure is 3-5 in wide, so more would run into one another ("64 KiB128 KiB256 KiB").
SIZE_TICKS = 6


def size_axis(ax, axis: str = "x", base: int = 2) -> None:
    """Log scale with sizes as 4 KiB, 1 MiB ... on the ticks, every second or fourth power of two when the
    range is wide, so labels never collide."""
    formatter = FuncFormatter(lambda v, _pos: format_size(v) if v > 0 else "0")
    locator = LogLocator(base=base, numticks=SIZE_TICKS)
    target = ax.xaxis if axis == "x" else ax.yaxis
    if axis == "x":
        ax.set_xscale("log", base=base)
    else:
        ax.set_yscale("log", base=base)
    target.set_major_locator(locator)
    target.set_major_formatter(formatter)
    target.set_minor_formatter(NullFormatter())


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
        base = getattr(target.get_transform(), "base", 10)
        if base == 10:
            low, high = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
            decades = np.log10(high / low) if low > 0 else 99
            subs = (1.0,) if decades > 3 else (1.0, 2.0, 5.0) if decades > 1 else tuple(float(i) for i in range(1, 10))
            target.set_major_locator(LogLocator(base=10, subs=subs))
        else:
            # A power-of-two axis (queue depths) keeps its powers, every second one when there are many.
            target.set_major_locator(LogLocator(base=base, numticks=SIZE_TICKS + 2))
        target.set_minor_formatter(NullFormatter())
    target.set_major_formatter(FuncFormatter(lambda v, _pos: format_number(v)))


# Values spanning more than this ratio go on a log axis: on a linear one the smaller series (a hard disk's
# 200 IOPS beside an SSD's 500,000) is a flat line on zero.
LOG_SPREAD = 10.0


def spread_axis(ax, values, axis: str = "y") -> bool:
    """Log scale when the positive ``values`` differ by more than :data:`LOG_SPREAD` times, then plain numbers
    with thousands separators on the ticks; returns whether the axis is logarithmic."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    log = v.size > 1 and v.max() / v.min() > LOG_SPREAD
    if log:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    number_axis(ax, axis)
    return bool(log)


def microseconds(ns):
    """ns -> us (latency axes read in microseconds)."""
    return np.asarray(ns, dtype=float) / 1e3


# "latency (us)", "time (us, device clock)": the code writes the ASCII unit, the figure shows the µ sign.
_MICRO = re.compile(r"(?<=[(\s\d])us(?=[),\s]|$)")


def readable_axes(fig) -> None:
    """One look for numbers and units on every figure: µs rather than us in axis labels (legends and titles
    too, in :func:`save`), and thousands
    separators (no 1e5 offsets or 10^5 powers) on each axis still using matplotlib's default number formatter.
    Axes with their own formatter (sizes, categories, fixed labels) are left as they are."""
    for ax in fig.axes:
        ax.set_xlabel(_MICRO.sub("µs", ax.get_xlabel()))
        ax.set_ylabel(_MICRO.sub("µs", ax.get_ylabel()))
        for axis in ("x", "y"):
            target = ax.xaxis if axis == "x" else ax.yaxis
            if type(target.get_major_formatter()) in (ScalarFormatter, LogFormatterSciNotation):
                number_axis(ax, axis)


def save(fig, directory: Path, name: str, caption: str = "") -> Path:
    """Write ``directory/name.png`` and free the figure. ``caption``, a sentence saying what the figure shows,
    travels inside the PNG (its Description text), so a report captions the figure wherever the file goes."""
    path = Path(directory) / f"{name}.png"
    readable_axes(fig)
    if any(ax.get_legend_handles_labels()[0] for ax in fig.axes):
        for ax in fig.axes:
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    for ax in fig.axes:
        legend = ax.get_legend()
        for text in legend.get_texts() if legend is not None else []:
            text.set_text(_MICRO.sub("µs", text.get_text()))
        ax.set_title(_MICRO.sub("µs", ax.get_title()))
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
