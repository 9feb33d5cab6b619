"""P5 at medium noise answered wrong at high confidence (issue 16): kelpie-n1.6t-w 32 channels for 16 at 0.90,
kelpie-n128g-s 29 for 16, pooled channels 4 x 31 for 16 x 8. Pinned here on synthetic cells (seeded) and
answers: no engine, deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ftlscope.probes import _layout_analysis as la
from ftlscope.probes import _p5_analysis as p5
from ftlscope.probes import layout_probes as lp
from ftlscope.probes.base import Answer


def uneven_cells(stripe: int, channels: int, *, seed: int = 5) -> pd.DataFrame:
    """Streams whose cells with in-flight reads on one channel rise by different amounts at the same load (how
    much two reads wait for a bus depends on the page types the stride puts side by side: kelpie-n128g-s at
    medium noise read 75.8, 74.4, 73.0 and 69.6 us at one load), the others on a 67.8 us baseline, each
    measured with a 170 ns standard error."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in (2, 4, 8):
        for d in range(1, stripe):
            load = la.channel_load(q, d, stripe, channels)
            if load is None:
                continue
            rise = rng.uniform(1.0e3, 8.0e3) if load > 1 else 0.0
            rows.append({"q": q, "d": d, "n": 4000, "se_ns": 170.0,
                         "median_ns": 67.8e3 + rise + rng.normal(0, 170.0)})
    return pd.DataFrame(rows)


def test_uneven_rises_at_one_load_are_read_by_which_cells_rise():
    cells = uneven_cells(32, 16)
    other, posterior = p5.second_opinion(cells, 32)
    assert other == 16 and posterior > 0.9


def test_a_layout_the_second_reading_contradicts_is_not_given_at_high_confidence():
    cells = uneven_cells(32, 16)
    wrong = lp.second_opinion_cap(Answer({"channels": 29, "chips_per_channel": 2}, 0.95, "streams"), cells, 32)
    assert wrong.confidence == p5.DISAGREE_CONFIDENCE
    assert wrong.alternatives[0]["value"] == {"channels": 16, "chips_per_channel": 2}
    right = lp.second_opinion_cap(Answer({"channels": 16, "chips_per_channel": 2}, 0.95, "streams"), cells, 32)
    assert right.confidence == 0.95 and right.alternatives == []


def test_more_chips_a_channel_than_any_drive_carries_is_said_as_possibly_pooled():
    answer = Answer({"channels": 4, "chips_per_channel": 31}, 1.0, "streams")
    capped = lp.pooled_cap(answer, 124)
    assert capped.confidence == p5.POOLED_CONFIDENCE and capped.extra["pooled_channels_possible"]
    assert {"channels": 16, "chips_per_channel": 8} in [a["value"] for a in capped.alternatives]
    deep = lp.pooled_cap(Answer({"channels": 4, "chips_per_channel": 16}, 0.99, "streams"), 64)
    assert deep.confidence == 0.99 and "pooled_channels_possible" not in deep.extra
