"""Jenks classification, the silhouette confidence and the interval rule, on series with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from ftlscope.analysis.jenks import classify, classify_best, classify_series, most_common_intervals, silhouette_1d


def test_two_levels_split_where_they_differ_and_spikes_are_the_smaller_class():
    rng = np.random.default_rng(1)
    latencies = rng.normal(50, 1, 400)
    spikes = np.arange(7, 400, 8)  # a page boundary every 8 positions
    latencies[spikes] += 30
    best = classify_best(latencies)[0]
    assert best.n_classes == 2 and best.silhouette > 0.8
    assert set(np.flatnonzero(best.abnormal())) == set(spikes)
    assert set(np.flatnonzero(best.abnormal("high"))) == set(spikes)
    assert most_common_intervals(np.flatnonzero(best.abnormal()))[0] == (8, 1.0)


def test_three_levels_prefer_three_classes():
    values = np.concatenate([np.full(100, 10.0), np.full(30, 20.0), np.full(10, 40.0)])
    values += np.random.default_rng(2).normal(0, 0.2, len(values))
    ranked = classify_best(values)
    assert ranked[0].n_classes == 3
    assert list(ranked[0].counts()) == [100, 30, 10]
    assert set(np.flatnonzero(ranked[0].abnormal("low"))) == set()


def test_silhouette_matches_the_definition():
    x = np.array([1.0, 2.0, 10.0, 12.0])
    labels = np.array([0, 0, 1, 1])

    def brute(i):
        own = [abs(x[i] - x[j]) for j in range(4) if labels[j] == labels[i] and j != i]
        other = [abs(x[i] - x[j]) for j in range(4) if labels[j] != labels[i]]
        a, b = np.mean(own), np.mean(other)
        return (b - a) / max(a, b)

    assert silhouette_1d(x, labels) == pytest.approx(np.mean([brute(i) for i in range(4)]))


def test_flat_series_cannot_be_split():
    assert classify(np.full(50, 3.0), 2) is None
    assert classify_best(np.full(50, 3.0)) == []


def test_intervals_rank_by_count():
    ranked = most_common_intervals([0, 4, 8, 12, 20, 24])
    assert ranked[0] == (4, 0.8) and ranked[1] == (8, 0.2)


def test_a_long_series_is_classified_on_a_sample_that_keeps_its_rare_spikes():
    # 50,000 writes near 50 us, 40 of them waiting ~2 ms for a flush (0.08 %): an evenly spread quantile sample
    # of 3,000 points would hold at most a few of them; the sample keeps the largest values, so the spikes form
    # their own class and every one of the 50,000 values is labelled.
    rng = np.random.default_rng(3)
    latency = 50_000 * (1 + 0.05 * rng.standard_normal(50_000))
    spikes = rng.choice(50_000, 40, replace=False)
    latency[spikes] = 2_000_000 * (1 + 0.02 * rng.standard_normal(40))
    best = classify_series(latency, log=True)[0]
    assert len(best.labels) == 50_000
    high = best.abnormal("high")
    assert set(np.flatnonzero(high)) == set(spikes.tolist())
    assert best.silhouette > 0.9


def test_a_short_series_is_classified_whole():
    values = np.r_[np.full(20, 1.0), np.full(5, 10.0)] + np.linspace(0, 0.01, 25)
    assert [c.n_classes for c in classify_series(values)] == [c.n_classes for c in classify_best(values)]
    assert classify_series(values, log=True)[0].breaks == classify_best(np.log10(values))[0].breaks
