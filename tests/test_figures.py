"""Probe and experiment figures: one file-name style, captions that are sentences travelling inside the PNG (and
shown by the report), and duration ticks that do not collide (the P10 figure's log axis labelled every minor tick)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ftlscope import plots
from ftlscope.probes import p10_flush_window as p10
from ftlscope.profile.runner import finish, profile
from ftlscope.profile.suites import QUICK, Step, Suite
from ftlscope.report.render import build_view

PROBES_DIR = Path(plots.__file__).parent / "probes"
EXPERIMENTS_DIR = Path(plots.__file__).parent / "experiments"


def is_a_caption_sentence(caption: str) -> bool:
    return caption[:1].isupper() and caption.endswith(".") and len(caption.split()) >= 8


def probe_figure_saves():
    """(module, name, caption) of every plots.save call in the probes package."""
    for module in sorted(PROBES_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "plots.save":
                name = node.args[2].value if isinstance(node.args[2], ast.Constant) else None
                caption = ast.literal_eval(node.args[3]) if len(node.args) > 3 else ""
                yield module.name, name, caption


def test_probe_figures_are_named_in_one_style_and_captioned_with_a_sentence():
    saves = list(probe_figure_saves())
    assert {re.match(r"P\d+", name).group() for _, name, _ in saves} == {f"P{i}" for i in range(1, 11)}
    for module, name, caption in saves:
        assert re.fullmatch(r"P\d+_[a-z_]+", name), (module, name)
        assert is_a_caption_sentence(caption), (module, caption)


def test_every_experiment_figure_is_saved_with_a_caption():
    # Statically, so experiments no quick bench runs (reset-behaviour, random-fill, ...) are covered too.
    saves = 0
    for module in sorted(EXPERIMENTS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "plots.save":
                saves += 1
                assert len(node.args) == 4, (module.name, ast.unparse(node))
                if isinstance(node.args[3], ast.Constant):
                    assert is_a_caption_sentence(node.args[3].value), (module.name, node.args[3].value)
    assert saves >= 30


# The quick suite's experiments at shorter points, on a hard disk so the rotational-only zoning runs too.
QUICK_SHORT = Suite("quick", QUICK.summary, False, steps=(
    Step("bs-sweep", {"runtime": "100ms", "warmup": "20ms", "span": str(1 << 30)}),
    Step("qd-sweep", {"runtime": "100ms", "warmup": "20ms", "span": str(1 << 30)}),
    Step("alignment", {"span": str(1 << 30), "runtime": "200ms"}),
    Step("zoning", {"runtime": "200ms", "random_runtime": "500ms", "warmup": "50ms"}, rotational_only=True),
    Step("qd1-baseline", {"runtime": "300ms", "warmup": "100ms", "span": str(1 << 30)}),
    Step("corners", {"runtime": "200ms", "warmup": "50ms", "span": str(256 << 20)}),
    Step("seq-write-over-time", {"runtime": "2s"}),
))


def test_every_figure_of_a_quick_bench_carries_a_caption_sentence(tmp_path):
    assert [step.experiment for step in QUICK_SHORT.steps] == [step.experiment for step in QUICK.steps]
    outcome = profile("sim:hdd-7200-consumer", suite=QUICK_SHORT, out=tmp_path)
    finish(outcome, store=False)
    assert outcome.error is None, outcome.error
    figures = sorted((outcome.directory / "experiments").rglob("*.png"))
    assert {path.parent.name for path in figures} == {step.experiment for step in QUICK.steps}
    for path in figures:
        caption = plots.caption_of(path)
        assert is_a_caption_sentence(caption), (path.name, caption)
        assert caption != path.stem


def test_the_caption_travels_in_the_png_and_the_report_shows_it(tmp_path):
    fig, ax = plots.figure("t", "x", "y")
    ax.plot([1, 2], [1, 2])
    path = plots.save(fig, tmp_path, "P9_example", "Writes issued at one instant complete in clusters.")
    assert plots.caption_of(path) == "Writes issued at one instant complete in clusters."
    fig, ax = plots.figure("t", "x", "y")
    bare = plots.save(fig, tmp_path, "bare")
    assert plots.caption_of(bare) == ""
    record = {"target": {"name": "sim:test"}, "experiments": [],
              "probes": {"properties": {"P9": {"name": "write parallelism", "value": 2, "answer": "2",
                                               "figures": [path.name, bare.name]}}}}
    view = build_view(record, tmp_path, tmp_path)
    captions = [f["caption"] for f in view["properties"][0]["figures"]]
    assert captions == ["Writes issued at one instant complete in clusters.", "P9 write parallelism"]


def overlapping_tick_labels(fig, axis) -> list[tuple[str, str]]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    lo, hi = sorted(axis.axes.get_xlim())
    labels = [t for t in axis.get_ticklabels(which="both") if t.get_text() and t.get_visible()
              and lo <= t.get_position()[0] <= hi]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
    return [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:] if box_a.overlaps(box_b)]


def test_duration_ticks_do_not_collide():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.scatter([2e6, 5e6, 30e6, 400e6, 5e9], [1, 2, 3, 4, 5])
    plots.duration_axis(ax, "x")
    assert overlapping_tick_labels(fig, ax.xaxis) == []
    fig.canvas.draw()
    shown = [t.get_text() for t in ax.xaxis.get_ticklabels() if t.get_text()]
    assert "10 ms" in shown and "1 s" in shown
    plt.close(fig)


def test_the_flush_window_figure_has_readable_gap_ticks(tmp_path):
    # The gaps of a search between 2 ms and 32 ms (the figure that showed "2x10^0 3x10^0 4x10^0" overlapping).
    gaps = [2e6, 8e6, 16e6, 23e6, 27e6, 32e6]
    rows = []
    for test, gap in enumerate(gaps):
        for batch in range(3):
            latency = 30_000_000 if gap < 30e6 and batch == 2 else 40_000
            rows.append({"round": 0, "test": test, "gap_ns": gap, "batch": batch, "fraction": 1.0,
                         "position": batch * 1 << 20, "latency_ns": latency, "spike": latency > 1e6})
    raw = pd.DataFrame(rows)
    captured = {}
    original = plots.save

    def keep(fig, directory, name, caption=""):
        captured["overlaps"] = overlapping_tick_labels(fig, fig.axes[0].xaxis)
        return original(fig, directory, name, caption)

    plots.save = keep
    try:
        path = p10.figure_flush_window(raw, p10._gap_tests(raw), tmp_path, 0.032)
    finally:
        plots.save = original
    assert path.name == "P10_flush_window.png" and captured["overlaps"] == []
    assert np.isfinite(len(plots.caption_of(path)))
