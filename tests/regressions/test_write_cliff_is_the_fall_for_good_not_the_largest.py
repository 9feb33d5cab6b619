"""bench/fidelity.py dates a write cliff where the throughput falls for good (the thesis: the drives "started
out writing quickly ... and deteriorated after some time"), not at the largest fall: a drive whose SLC cache
folds harder as it fills (`slc_cache.fold_by_valid`) slows down gradually from a fast start, and the largest
fall between two of its early levels came before the cliff (issue 15: the NV2 refit's cliff was found after
14 GiB, where its fill had slowed from 1250 to 702 MB/s, instead of after 42 GiB)."""

from __future__ import annotations

import numpy as np

from ftlscope.fidelity.measure import final_drop


def _levels(*pairs: tuple[float, int]) -> np.ndarray:
    rng = np.random.default_rng(5)
    x = np.concatenate([np.full(n, level) for level, n in pairs])
    return x * (1 + 0.01 * rng.standard_normal(len(x)))


def test_a_gradual_slowdown_then_the_cliff_is_dated_at_the_cliff():
    x = _levels((2400, 6), (1250, 20), (700, 40), (560, 40), (215, 60))
    drop = final_drop(x)
    assert drop is not None and drop.index == 106, drop
    assert drop.after < 230


def test_a_single_cliff_is_the_same_as_before():
    drop = final_drop(_levels((850, 100), (213, 60)))
    assert drop is not None and drop.index == 100


def test_a_dip_that_recovers_is_no_cliff():
    assert final_drop(_levels((850, 50), (400, 10), (850, 50))) is None
