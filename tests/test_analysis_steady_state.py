"""The SNIA steady-state rule and the burst end, on synthetic series with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from ftlscope.analysis import steady_state as ss


def settling(n: int = 30, start: float = 100_000.0, final: float = 20_000.0, tau: float = 3.0) -> np.ndarray:
    """IOPS per round falling exponentially from ``start`` to ``final``."""
    return final + (start - final) * np.exp(-np.arange(n) / tau)


def test_a_flat_window_is_steady_with_its_average():
    w = ss.check_window([100.0, 102.0, 98.0, 101.0, 99.0], 0)
    assert w.reached
    assert w.average == pytest.approx(100.0)
    assert w.excursion == pytest.approx(0.04)
    assert (w.start, w.stop) == (0, 5)


def test_the_slope_excursion_is_the_fitted_lines_change_across_the_window():
    # A straight line rising 2 per round: the fit is exact, its change across five rounds is 4 x 2 = 8.
    y = 100.0 + 2.0 * np.arange(5)
    w = ss.check_window(y, 0)
    assert w.slope == pytest.approx(2.0)
    assert w.slope_excursion == pytest.approx(8.0 / 104.0)
    assert w.excursion == pytest.approx(8.0 / 104.0)
    assert w.reached  # 7.7 % < 10 % and < 20 %
    steeper = ss.check_window(100.0 + 3.0 * np.arange(5), 0)  # 12 / 106 = 11.3 % > 10 %
    assert steeper.excursion < ss.MAX_EXCURSION and not steeper.reached


def test_a_big_excursion_fails_even_without_a_slope():
    # Symmetric around the average: the fitted line is flat, but max - min is 50 % of the average.
    w = ss.check_window([100.0, 125.0, 75.0, 75.0, 125.0], 0)
    assert w.slope == pytest.approx(0.0, abs=1e-9)
    assert w.excursion == pytest.approx(50.0 / 100.0)
    assert not w.reached


def test_a_settling_series_reaches_steady_state_where_the_decay_has_faded():
    y = settling()
    final = ss.final_window(y)
    assert final.reached and final.average == pytest.approx(20_000, rel=0.01)
    since = ss.steady_since(y)
    # With E = e^{-s/3}, a window starting at round s has range 80k E (1 - e^{-4/3}) = 58.9k E and average about
    # 20k + 44.2k E: the 20 % excursion rule holds from E <= 0.080 (s >= 7.6), the fitted line's change (nearly
    # the range) stays within 10 % from E <= 0.039 (s >= 9.8). So steady from round 10, the slope rule binding.
    assert since == 10
    assert ss.check_window(y, 8).excursion <= ss.MAX_EXCURSION < ss.check_window(y, 7).excursion
    assert ss.check_window(y, 9).slope_excursion > ss.MAX_SLOPE_EXCURSION >= ss.check_window(y, 10).slope_excursion
    assert all(w.reached for w in ss.windows(y)[since:]) and not any(w.reached for w in ss.windows(y)[:since])
    assert ss.first_steady_window(y).start == since


def test_a_series_that_still_drifts_is_not_steady():
    y = 50_000.0 * (1 - 0.04 * np.arange(20))  # falls 4 % of the start per round, for good
    assert ss.final_window(y).reached is False
    assert ss.steady_since(y) is None
    assert ss.first_steady_window(y) is None


def test_first_steady_window_can_skip_a_flat_stretch_before_the_drop():
    y = np.concatenate([np.full(8, 90_000.0), np.full(8, 20_000.0)])
    assert ss.first_steady_window(y).start == 0  # the plateau before the drop meets the rule
    assert ss.first_steady_window(y, start=8).start == 8
    assert ss.steady_since(y) == 8  # windows straddling the drop fail, so steadiness starts with the low level


def test_too_few_rounds_give_no_window():
    assert ss.final_window([1.0, 2.0, 3.0]) is None
    assert ss.steady_since([1.0, 2.0]) is None
    with pytest.raises(ValueError):
        ss.check_window([1.0, 2.0, 3.0], 0)


def test_round_averages_cut_windows_into_complete_rounds():
    start = np.arange(0, 10.5, 0.5)  # 21 windows of 0.5 s, the last one cut short
    duration = np.full(start.size, 0.5)
    duration[-1] = 0.1
    ops = np.where(start < 4, 1000.0, 200.0)  # 2000 IOPS for 4 s, then 400 IOPS
    round_start, values = ss.round_averages(start, duration, ops, 2.0)
    np.testing.assert_allclose(round_start, [0, 2, 4, 6, 8])
    np.testing.assert_allclose(values, [2000, 2000, 400, 400, 400])


def windows(rates, window: float = 1.0):
    rates = np.asarray(rates, dtype=float)
    return np.arange(rates.size) * window, np.full(rates.size, window), rates


def test_the_burst_ends_inside_the_window_where_the_rate_fell():
    # 100k IOPS until t = 10.4 s, then 25k: window 10 is 40 % burst.
    rate = np.array([100_000.0] * 10 + [0.4 * 100_000 + 0.6 * 25_000] + [25_000.0] * 20)
    end = ss.burst_end(*windows(rate))
    assert end.index == 10
    assert end.seconds == pytest.approx(10.4)
    assert end.burst == pytest.approx(100_000) and end.after == pytest.approx(25_000, rel=0.02)


def test_a_single_slow_window_inside_the_burst_is_not_its_end():
    rate = np.array([100_000.0] * 5 + [10_000.0] + [100_000.0] * 5 + [20_000.0] * 10)
    end = ss.burst_end(*windows(rate))
    assert end.index == 11 and end.seconds == pytest.approx(11.0)


def test_a_flat_or_slightly_falling_series_has_no_burst():
    assert ss.burst_end(*windows(np.full(30, 200_000.0))) is None
    assert ss.burst_end(*windows(np.linspace(200_000, 160_000, 30))) is None  # 20 % < 25 %


def test_the_end_falls_between_windows_when_the_rate_fell_at_a_window_edge():
    rate = np.array([80_000.0] * 6 + [8_000.0] * 6)
    end = ss.burst_end(*windows(rate, 0.5))
    assert end.index == 6 and end.seconds == pytest.approx(3.0)


def test_a_rate_that_dips_and_recovers_again_and_again_has_no_end_of_burst():
    # Regression: the default drive's buffer flushes make 4 KiB random writes ripple (236K, 236K, 204K, 169K,
    # 171K IOPS, over and over) within its SLC cache; the dip was read as the end of the burst.
    ripple = np.tile([236_000.0, 236_000.0, 204_000.0, 169_000.0, 171_000.0], 6)
    assert ss.burst_end(*windows(ripple)) is None
    # ... while a fall that stays down is found, with a later blip that does not reach the burst level.
    fall = np.r_[np.full(10, 236_000.0), np.full(20, 60_000.0)]
    fall[20] = 150_000.0
    end = ss.burst_end(*windows(fall))
    assert end is not None and end.index == 10
