"""Change points (analysis/changepoint.py) and rolling curves (analysis/rolling.py) on synthetic series whose
steps, shares and levels are known."""

from __future__ import annotations

import numpy as np
import pytest

from ftlscope.analysis import changepoint, rolling


def _noisy(levels_and_lengths, noise: float, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.concatenate([np.full(n, level, dtype=float) for level, n in levels_and_lengths])
    return x + rng.normal(0.0, noise, len(x))


def test_one_step_is_found_where_it_is_with_both_levels():
    x = _noisy([(1400.0, 90), (430.0, 2000)], noise=60.0)
    assert changepoint.change_points(x) == [90]
    drop = changepoint.biggest_drop(x)
    assert drop.index == 90
    assert drop.before == pytest.approx(1400.0, rel=0.02)
    assert drop.after == pytest.approx(430.0, rel=0.02)
    assert drop.ratio == pytest.approx(430 / 1400, rel=0.03)


def test_the_cliff_is_found_in_a_series_that_stalls_and_bursts_after_it():
    # After an SLC cliff a drive often alternates between full-speed windows and windows with no completions
    # (a large buffer flushing): the mean level falls, the window-to-window spread grows.
    before = np.tile([1507.0, 1342.0, 1342.0], 30)  # 90 windows
    after = np.tile([671.0, 671.0, 0.0], 700)
    x = np.concatenate([before, after])
    drop = changepoint.biggest_drop(x)
    assert drop is not None and drop.index == 90
    assert drop.after == pytest.approx(447.3, rel=0.01)


def test_pure_noise_and_a_constant_series_have_no_change_points():
    rng = np.random.default_rng(3)
    for seed in range(5):
        x = 1000.0 + np.random.default_rng(seed).normal(0, 50, 3000)
        assert changepoint.change_points(x) == [], f"seed {seed}"
    assert changepoint.change_points(np.full(500, 2122.0)) == []
    assert changepoint.change_points(rng.normal(0, 1, 3)) == []  # too short to split
    assert changepoint.biggest_drop(np.full(500, 2122.0)) is None


def test_several_levels_and_the_biggest_fall_among_them():
    x = _noisy([(2000.0, 100), (1600.0, 200), (1700.0, 150), (500.0, 300)], noise=20.0)
    # The default penalty scales with the whole series' variance (the big fall included): the 100 MB/s rise
    # next to the 1,200 MB/s fall shows only with a lower one.
    assert changepoint.change_points(x) == [100, 450]
    points = changepoint.change_points(x, penalty=changepoint.default_penalty(x, 0.05))
    assert points == [100, 300, 450]
    segs = changepoint.segments(x, points)
    assert [(s.start, s.end) for s in segs] == [(0, 100), (100, 300), (300, 450), (450, 750)]
    assert [round(s.mean, -2) for s in segs] == [2000, 1600, 1700, 500]
    drop = changepoint.biggest_drop(x, points)
    assert drop.index == 450 and drop.before == pytest.approx(1700, rel=0.01)


def test_a_rise_is_no_drop_and_min_drop_keeps_only_big_falls():
    rise = _noisy([(400.0, 100), (1400.0, 100)], noise=10.0)
    assert changepoint.change_points(rise) == [100]
    assert changepoint.biggest_drop(rise) is None
    small = _noisy([(1000.0, 200), (900.0, 200)], noise=5.0)
    assert changepoint.biggest_drop(small).index == 200
    assert changepoint.biggest_drop(small, min_drop=0.25) is None


def test_a_higher_penalty_keeps_only_the_big_step():
    x = _noisy([(1000.0, 300), (950.0, 300), (300.0, 300)], noise=5.0)
    assert changepoint.change_points(x, penalty=changepoint.default_penalty(x, 0.01)) == [300, 600]
    assert changepoint.change_points(x) == [600]


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        changepoint.change_points([1.0, np.nan, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError):
        changepoint.change_points(np.ones((4, 4)))


def test_changepoint_doctest_example():
    x = [100.0] * 50 + [40.0] * 50
    assert changepoint.change_points(x) == [50]
    assert changepoint.biggest_drop(x) == changepoint.Drop(index=50, before=100.0, after=40.0)


# ---- rolling curves --------------------------------------------------------------------------------------


def test_rolling_share_pools_counts_over_the_last_k_windows():
    slow = [1, 0, 3, 0, 0]
    ops = [10, 0, 10, 80, 100]
    share = rolling.rolling_share(slow, ops, 2)
    # window 1 pools windows 0-1 (1/10); window 2 pools 1-2 (3/10); window 3: 3/90; window 4: 0/180
    assert share[0] == pytest.approx(0.1)
    assert share[1] == pytest.approx(0.1)
    assert share[2] == pytest.approx(0.3)
    assert share[3] == pytest.approx(3 / 90)
    assert share[4] == 0.0
    assert np.isnan(rolling.rolling_share([0, 0], [0, 0], 1)).all()
    with pytest.raises(ValueError):
        rolling.rolling_share(slow, ops, 0)


def test_rolling_mean_is_trailing():
    assert rolling.rolling_mean([2, 4, 6, 8], 2).tolist() == [2, 3, 5, 7]


def test_early_and_late_levels_weigh_windows_by_their_time():
    # 10 windows of 1 s: 100 B/s for the first 5, then 50 B/s (idle included as duration)
    amounts = [100] * 5 + [50] * 5
    durations = [1.0] * 10
    early, late = rolling.early_late(amounts, durations, 0.1)  # 75 B: the first window / the last two
    assert early == pytest.approx(100.0)
    assert late == pytest.approx(50.0)
    early, late = rolling.early_late([10, 0, 0, 10, 80], [1, 1, 1, 1, 1], 0.1)
    assert early == 10.0 and late == 80.0
    with pytest.raises(ValueError):
        rolling.early_late(amounts, durations, 0.7)
    assert np.isnan(rolling.early_late([], [], 0.1)[0])
