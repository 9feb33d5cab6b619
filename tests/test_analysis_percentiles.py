"""Latency percentile curves (analysis/percentiles.py) on seed 001 §5.3's table, whose answers the seed gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ftlscope.analysis import percentiles

# Seed 001 §5.3, in microseconds.
SEED = pd.DataFrame({
    "qd": [1, 2, 4, 8, 16, 32, 64, 128],
    "lat_p50_us": [73.6, 78.3, 85.5, 98.1, 136.2, 218.1, 383.0, 692.2],
    "lat_p95_us": [90.6, 115.5, 148.5, 207.9, 305.2, 460.8, 954.4, 2288.3],
    "lat_p99_us": [101.5, 143.0, 185.3, 272.4, 387.1, 585.7, 1231.5, 3140.3],
    "lat_p99_9_us": [155.3, 169.0, 234.5, 348.8, 490.8, 752.3, 1613.8, 3839.3],
})


def test_column_names_follow_the_tables():
    assert percentiles.column("p99.9") == "lat_p99_9_us"
    assert percentiles.column("p50", "read_") == "read_lat_p50_us"
    assert percentiles.quantile("p99.9") == pytest.approx(0.999)
    with pytest.raises(ValueError):
        percentiles.column("99")


def test_tidy_gives_one_row_per_point_and_percentile():
    table = SEED.assign(lat_p99_us_std=np.linspace(0, 7, 8)).drop(columns="lat_p95_us")
    long = percentiles.tidy(table, "qd")
    assert list(long.columns) == ["qd", "percentile", "quantile", "lat_us", "lat_us_std"]
    assert len(long) == 3 * 8  # p95 is missing from the table, so left out
    assert list(dict.fromkeys(long["percentile"])) == ["p50", "p99", "p99.9"]
    p999 = long[long["percentile"] == "p99.9"]
    assert list(p999["qd"]) == list(SEED["qd"]) and list(p999["lat_us"]) == list(SEED["lat_p99_9_us"])
    assert long.loc[long["percentile"] == "p99", "lat_us_std"].iloc[-1] == pytest.approx(7)
    assert (long.loc[long["percentile"] == "p50", "lat_us_std"] == 0).all()
    assert percentiles.tidy(table, "qd", labels=("p90",)).empty


def test_tail_growth_and_the_sla_limit_match_the_seed():
    # "p99 ~0.39 ms -> ~3.14 ms, ≈ 8x" from QD 16 to QD 128
    assert percentiles.growth(SEED["qd"], SEED["lat_p99_us"], 16, 128) == pytest.approx(8.11, abs=0.01)
    assert np.isnan(percentiles.growth(SEED["qd"], SEED["lat_p99_us"], 16, 3))
    # "p99 < 1 ms": met up to QD 32, broken from QD 64 (1.23 ms)
    assert percentiles.largest_within(SEED["qd"], SEED["lat_p99_us"], 1000) == 32
    assert percentiles.largest_within(SEED["qd"], SEED["lat_p99_9_us"], 10_000) == 128
    assert percentiles.largest_within(SEED["qd"], SEED["lat_p99_us"], 100) is None


def test_the_sla_limit_stops_at_the_first_broken_or_missing_point():
    qd = [8, 1, 4, 2]  # unsorted on purpose
    assert percentiles.largest_within(qd, [50, 10, 12, 11], 20) == 4
    assert percentiles.largest_within(qd, [5, 10, np.nan, 11], 20) == 2
