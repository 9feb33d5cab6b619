"""Statistics across repetitions, on numbers whose answer is known."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ftlscope.analysis.stats import aggregate, estimate


def test_estimate_matches_the_textbook_t_interval():
    e = estimate([10.0, 12.0, 14.0])
    assert e.mean == 12.0 and e.stddev == pytest.approx(2.0) and e.n == 3
    # t(0.975, 2) = 4.302653; half-width = t * s / sqrt(n)
    assert e.ci_half_width == pytest.approx(4.302653 * 2.0 / math.sqrt(3), rel=1e-6)
    assert e.ci_low < e.mean < e.ci_high


def test_one_value_has_no_spread_and_nans_are_ignored():
    e = estimate([5.0, float("nan")])
    assert (e.mean, e.stddev, e.ci_low, e.ci_high, e.n) == (5.0, 0.0, 5.0, 5.0, 1)
    assert math.isnan(estimate([]).mean)


def test_aggregate_gives_one_row_per_point():
    rows = pd.DataFrame({
        "repetition": [0, 0, 1, 1],
        "qd": [1, 2, 1, 2],
        "op": ["read"] * 4,
        "iops": [100.0, 180.0, 110.0, 200.0],
    })
    table = aggregate(rows, ["qd"])
    assert list(table["qd"]) == [1, 2]
    assert list(table["iops"]) == [105.0, 190.0]
    assert table["iops_std"].tolist() == pytest.approx([math.sqrt(50), math.sqrt(200)])
    assert list(table["n"]) == [2, 2] and list(table["op"]) == ["read", "read"]
