"""``first_sustained`` and ``relative_change`` on sweeps whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ftlscope.analysis.thresholds import first_sustained, relative_change


def test_the_condition_holding_from_a_point_on_gives_that_point():
    sizes = [4096 * 2**i for i in range(9)]  # 4 KiB .. 1 MiB
    ok = [s >= 512 * 1024 for s in sizes]
    assert first_sustained(sizes, ok) == 512 * 1024


def test_an_early_pass_that_fails_again_does_not_count():
    # Holds at 1 (e.g. sub-page shuffled reads that happen to be fast), fails at 2..4, holds from 8 on.
    assert first_sustained([1, 2, 4, 8, 16], [True, False, False, True, True]) == 8


def test_order_does_not_matter_and_every_point_at_one_x_must_hold():
    assert first_sustained([16, 4, 8, 1], [True, False, True, True]) == 8
    assert first_sustained([1, 2, 2, 4], [True, True, False, True]) == 4


def test_always_holding_gives_the_first_x_and_never_at_the_end_gives_none():
    assert first_sustained([2, 4, 8], [True, True, True]) == 2
    assert first_sustained([2, 4, 8], [True, True, False]) is None
    assert first_sustained([], []) is None
    with pytest.raises(ValueError):
        first_sustained([1, 2], [True])


def test_relative_change_is_the_ratio_minus_one():
    change = relative_change([90.0, 110.0, 5.0], [100.0, 100.0, 0.0])
    assert change[0] == pytest.approx(-0.1) and change[1] == pytest.approx(0.1)
    assert math.isnan(change[2])
    assert np.isscalar(float(relative_change(3.0, 2.0)))
