"""`replay --report` and `--plots` draw from the replay's own trace read back in batches (issue 17: traces of any
length in flat memory): against the same trace held whole, every count, share and maximum is identical, the
latency histograms' bins and counts are identical, and every CDF point and per-window lag percentile is within
its bucket (1/1024 of a power of two) of the exact value. Simulated drive, virtual time: deterministic."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ftlscope.trace_figures as figures_module
from ftlscope.cli import main
from ftlscope.replay import replay
from ftlscope.report.replay_page import _window_ns
from ftlscope.run_plots import HISTOGRAM_BINS, latency_data, streamed_latency_data
from ftlscope.trace_figures import LATE_NS, gather
from ftlscope.traces import read_trace
from ftlscope.traces.batched import Quantiles
from ftlscope.traces.cli import info_stats_and_gaps

SIM = "sim:consumer-tlc-dram"
# A bucket's mean is within one bucket width of every value in it: 1/1024 of the value at most.
RESOLUTION = 1 / 1024


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    """A 2 s synthetic database trace replayed 4x as fast at QD 1 (some requests go late), its trace streamed to
    a file and read back in 1,000-row batches (the whole run is a few thousand requests: many batch edges)."""
    tmp = tmp_path_factory.mktemp("report_streamed")
    trace = tmp / "db.parquet"
    assert main(["trace", "synth", "db", "--duration", "2s", "--out", str(trace)]) == 0
    result = replay(SIM, trace, qd=1, timing="scaled:4", precondition=False, trace_file=tmp / "requests.parquet")
    whole = pd.read_parquet(tmp / "requests.parquet")
    return {"trace": trace, "result": result, "whole": whole, "in_memory": dataclasses.replace(result, trace=whole)}


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(figures_module, "FIGURE_BATCH_ROWS", 1_000)


def _within_bucket(got: np.ndarray, exact: np.ndarray) -> bool:
    return bool((np.abs(got - exact) <= exact * RESOLUTION + 1e-9).all())


def test_the_latency_figures_have_the_whole_traces_bins_and_counts(streamed, small_batches):
    result = streamed["result"]
    assert result.trace.empty and len(streamed["whole"]) > 4_000
    figures = gather(result.streamed_trace.path, list(result.ops), _window_ns(result), HISTOGRAM_BINS)
    for op in result.ops:
        exact, got = latency_data(streamed["in_memory"], op), streamed_latency_data(figures, result, op)
        assert got.shown == exact.latencies_ns.size == result.summary[op]["ops"] > 0
        assert (got.bin_edges_ns == exact.bin_edges_ns).all() and (got.counts == exact.counts).all()
        assert got.markers_ns == exact.markers_ns
        # Each CDF point: the share at or below a bucket, at the bucket's mean; the exact latency at that share.
        ranks = np.round(got.cdf_pct / 100 * exact.latencies_ns.size).astype(int) - 1
        assert got.cdf_pct[-1] == pytest.approx(100)
        assert _within_bucket(got.cdf_ns, exact.latencies_ns[ranks].astype(float))


def test_the_issue_lag_counts_are_exact_and_its_percentiles_within_a_bucket(streamed, small_batches):
    result, whole = streamed["result"], streamed["whole"]
    lags = whole["issue_lag_ns"].to_numpy(np.int64)
    lag = gather(result.streamed_trace.path, [], _window_ns(result), 1).lag
    assert lag.requests == len(lags) and lag.on_time == int((lags == 0).sum())
    assert lag.late == {t: int((lags > t).sum()) for t in LATE_NS}
    assert 0 < lag.late[10_000] < len(lags), "QD 1 at 4x speed: some requests went late, not all"
    # Per time window, as the in-memory figure grouped them (pandas' linear quantile, exact values).
    window = _window_ns(result)
    grouped = pd.DataFrame({"w": whole["submit_ns"].to_numpy(np.int64) // window,
                            "lag": lags.astype(float)}).groupby("w")["lag"]
    table = lag.over_time
    assert (table["requests"].to_numpy() == grouped.size().to_numpy()).all()
    assert (table["max"].to_numpy() == grouped.max().to_numpy()).all()
    assert np.allclose(table["late_1ms_pct"].to_numpy(), grouped.apply(lambda v: (v > 1e6).mean() * 100).to_numpy())
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        assert _within_bucket(table[name].to_numpy(), grouped.quantile(q).to_numpy()), name
    assert np.allclose(table.index.to_numpy(), grouped.size().index.to_numpy() * window / 1e9)


def test_the_interarrival_buckets_hold_every_gap_of_the_trace(streamed):
    stats, gaps = info_stats_and_gaps(str(streamed["trace"]), None, False)
    exact = np.sort(np.diff(read_trace(streamed["trace"])["submit_ns"].to_numpy(np.int64)).astype(float))
    assert gaps.n == exact.size == stats["interarrival_ns"]["n"]
    values, share = gaps.cdf()
    ranks = np.round(share / 100 * exact.size).astype(int) - 1
    assert _within_bucket(values, exact[ranks])
    for q in (50, 99):
        assert abs(gaps.percentile(q, gaps.n) - np.percentile(exact, q)) <= np.percentile(exact, q) * RESOLUTION


def test_a_frame_in_memory_gives_what_its_file_gives(streamed):
    result = streamed["result"]
    from_file = gather(result.streamed_trace.path, list(result.ops), _window_ns(result), HISTOGRAM_BINS)
    from_frame = gather(streamed["whole"], list(result.ops), _window_ns(result), HISTOGRAM_BINS)
    for op in result.ops:
        assert (from_file.histograms[op][1] == from_frame.histograms[op][1]).all()
        assert (from_file.latencies[op].quantiles.counts == from_frame.latencies[op].quantiles.counts).all()
    assert from_file.lag.late == from_frame.lag.late
    pd.testing.assert_frame_equal(from_file.lag.over_time, from_frame.lag.over_time)


def test_quantiles_cdf_steps_through_every_value_below_2048_ns_exactly():
    q = Quantiles()
    values = np.array([0, 0, 1, 5, 5, 2047, 3000], dtype=float)
    q.add(values[:4])
    q.add(values[4:])
    points, share = q.cdf()
    assert points.tolist()[:4] == [0, 1, 5, 2047] and abs(points[-1] - 3000) <= 3000 * RESOLUTION
    assert share.tolist() == pytest.approx([2 / 7 * 100, 3 / 7 * 100, 5 / 7 * 100, 6 / 7 * 100, 100])


def test_the_report_leaves_no_trace_file_behind_and_writes_every_figure(tmp_path, streamed):
    report, plots = tmp_path / "out" / "report", tmp_path / "out" / "plots"
    assert main(["replay", SIM, str(streamed["trace"]), "--quiet", "--qd", "1", "--timing", "scaled:4",
                 "--no-precondition", "--report", str(report), "--plots", str(plots)]) == 0
    assert (report / "report.html").is_file() and len(list((report / "figures").glob("*.png"))) == 10
    assert sorted(p.name for p in plots.iterdir()) == sorted(
        f"{op}-{kind}.png" for op in ("read", "write") for kind in ("latency-histogram", "latency-cdf", "over-time"))
    assert sorted(p.name for p in Path(tmp_path / "out").iterdir()) == ["plots", "report"]
