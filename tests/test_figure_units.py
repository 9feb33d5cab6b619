"""Axes people can read: thousands separators, no colliding size labels, a log axis where the curves compared
differ by orders of magnitude."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ftlscope import plots
from ftlscope.report import compare


def _labels(ax, axis: str = "x") -> list[str]:
    ax.figure.canvas.draw()
    target = ax.xaxis if axis == "x" else ax.yaxis
    low, high = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    return [t.get_text() for t in target.get_ticklabels(minor=False) + target.get_ticklabels(minor=True)
            if t.get_text() and low <= (t.get_position()[0] if axis == "x" else t.get_position()[1]) <= high]


def test_number_axis_uses_thousands_separators_and_no_e_notation():
    fig, ax = plots.figure("t", "x", "IOPS")
    ax.plot([1, 2, 3], [2_000, 50_000, 400_000])
    ax.set_yscale("log")
    plots.number_axis(ax, "y")
    labels = _labels(ax, "y")
    assert "100,000" in labels and "10,000" in labels
    assert not any("e" in label or "$" in label for label in labels)
    assert plots.format_number(1234567) == "1,234,567" and plots.format_number(0.25) == "0.25"


def test_size_axis_labels_a_wide_sweep_without_collisions():
    # The bs-sweep latency figure once printed every power of two from 4 KiB to 1 MiB: "64 KiB128 KiB256 KiB".
    fig, axes = plots.panels("t", 1, 2, size=(10.5, 4.2))
    sizes = [4096 * 2**i for i in range(9)]
    axes[0].plot(sizes, np.arange(9))
    plots.size_axis(axes[0])
    labels = _labels(axes[0])
    assert labels[0] == "4 KiB" and labels[-1] == "1 MiB"
    assert len(labels) <= plots.SIZE_TICKS
    # No two labels overlap on the rendered figure.
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = sorted((t.get_window_extent(renderer) for t in axes[0].get_xticklabels() if t.get_text()
                    and t.get_visible()), key=lambda b: b.x0)
    boxes = [b for b in boxes if axes[0].bbox.x0 - 30 <= b.x0 <= axes[0].bbox.x1 + 30]
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:], strict=False))


@pytest.mark.parametrize(("values", "log"), [([200, 180, 500_000], True), ([900, 2_000, 2_600], False)])
def test_spread_axis_goes_logarithmic_past_an_order_of_magnitude(values, log):
    fig, ax = plots.figure("t", "x", "y")
    ax.plot(range(len(values)), values)
    assert plots.spread_axis(ax, values) is log
    assert ax.get_yscale() == ("log" if log else "linear")


def test_compare_draws_an_ssd_beside_a_hard_disk_on_log_axes(monkeypatch, tmp_path):
    qd = pd.DataFrame({"qd": [1, 4, 32], "iops": [12_000.0, 90_000.0, 480_000.0], "lat_mean_us": [80.0, 44, 66]})
    hdd_qd = pd.DataFrame({"qd": [1, 4, 32], "iops": [80.0, 120.0, 210.0], "lat_mean_us": [12_000.0, 33_000, 150_000]})
    bs = pd.DataFrame({"size": [4096, 65536, 1 << 20] * 2, "mb_s": [50.0, 800, 3000, 1000, 2900, 3100],
                       "pattern": ["random"] * 3 + ["sequential"] * 3})
    hdd_bs = pd.DataFrame({"size": [4096, 65536, 1 << 20] * 2, "mb_s": [0.3, 5.0, 60, 150, 190, 200],
                           "pattern": ["random"] * 3 + ["sequential"] * 3})
    tables = {"qd-sweep": [("ssd", qd), ("hdd", hdd_qd)], "bs-sweep": [("ssd", bs), ("hdd", hdd_bs)]}
    monkeypatch.setattr(compare, "_tables", lambda runs, labels, experiment, columns: tables[experiment])
    drawn = []

    def keep(fig, directory, name):
        drawn.append((name, [(ax.get_yscale(), ax.get_ylabel()) for ax in fig.axes]))
        return tmp_path / f"{name}.png"

    monkeypatch.setattr(plots, "save", keep)
    compare._qd_figure([], [], tmp_path)
    compare._bs_figure([], [], tmp_path)
    scales = dict(drawn)
    assert scales["compare_qd_sweep"][0] == ("log", "IOPS (log scale)")
    assert scales["compare_qd_sweep"][1][1] == "mean latency (µs, log scale)"
    assert [s for s, _ in scales["compare_bs_sweep"]] == ["log", "log"]


def test_saved_figures_write_microseconds_with_the_micro_sign(tmp_path, monkeypatch):
    fig, ax = plots.figure("latency (us) by size", "time (us, device clock)", "latency (us)")
    ax.plot([1, 2], [1500, 250_000], label="SLA p99 1000 us")
    shown = {}
    real_close = plots.plt.close

    def close(figure):
        shown.update(x=ax.get_xlabel(), y=ax.get_ylabel(), title=ax.get_title(),
                     legend=[t.get_text() for t in ax.get_legend().get_texts()],
                     ticks=[t.get_text() for t in ax.get_yticklabels()])
        real_close(figure)

    monkeypatch.setattr(plots.plt, "close", close)
    plots.save(fig, tmp_path, "units")
    assert shown["x"] == "time (µs, device clock)" and shown["y"] == "latency (µs)"
    assert shown["title"] == "latency (µs) by size" and shown["legend"] == ["SLA p99 1000 µs"]
    assert "250,000" in shown["ticks"] or "200,000" in shown["ticks"]
    assert (tmp_path / "units.png").is_file()
