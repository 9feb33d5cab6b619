"""Jenks classification, the silhouette confidence and the interval rule, on series with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from ftlscope.analysis.jenks import classify, classify_best, most_common_intervals, silhouette_1d


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
