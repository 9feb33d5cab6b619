"""Little's law (analysis/littles_law.py) against the seed's worked numbers and a closed-loop queue simulated
here, where L = λW holds by construction."""

from __future__ import annotations

import numpy as np
import pytest

from ftlscope.analysis import littles_law


def closed_loop(in_flight: int, requests: int, seed: int = 7) -> tuple[float, float]:
    """One FIFO server with random service times, ``in_flight`` requests always outstanding (each completion
    submits the next). Returns (observed IOPS, mean response time in s)."""
    service = np.random.default_rng(seed).exponential(50e-6, requests)
    done = np.cumsum(service)  # the server never idles: someone is always waiting
    submitted = np.concatenate([np.zeros(in_flight), done[:-in_flight]])  # request k follows k - L's completion
    response = done - submitted
    return requests / done[-1], float(response.mean())


def test_the_seeds_worked_examples():
    # Seed 001 §5.2: "QD=32: predicted IOPS ≈ 32 / 0.0002389 ≈ 134k; observed 133.8k"
    assert littles_law.predicted_iops(32, 0.0002389) == pytest.approx(133_947, rel=1e-4)
    errors = littles_law.error_pct([32, 64], [0.0002389, 0.0004409], [133_806, 145_254])
    assert errors == pytest.approx([0.105, -0.07], abs=0.01)
    assert littles_law.max_abs_error_pct([32, 64], [0.0002389, 0.0004409], [133_806, 145_254]) == \
        pytest.approx(0.105, abs=0.01)


@pytest.mark.parametrize("in_flight", [1, 4, 32, 256])
def test_a_simulated_closed_loop_obeys_the_law(in_flight):
    iops, mean_latency = closed_loop(in_flight, 200_000)
    assert abs(littles_law.error_pct(in_flight, mean_latency, iops)) < 0.5
    # ... and a wrong concurrency is caught: the queue holding half as many requests as claimed.
    assert littles_law.error_pct(2 * in_flight, mean_latency, iops) == pytest.approx(100, abs=1)


def test_sign_and_missing_points():
    assert littles_law.error_pct(10, 0.1, 90) == pytest.approx(100 / 90 * 100 - 100)  # predicts more: positive
    assert littles_law.error_pct(10, 0.1, 125) == pytest.approx(-20)
    # predicted 100 against 110 (-9.1 %) and 95 (+5.3 %); the NaN point is left out
    assert littles_law.max_abs_error_pct([10, 10, 10], [0.1, np.nan, 0.1], [110, 100, 95]) == \
        pytest.approx(10 / 110 * 100)
    assert np.isnan(littles_law.max_abs_error_pct([1], [np.nan], [1.0]))
