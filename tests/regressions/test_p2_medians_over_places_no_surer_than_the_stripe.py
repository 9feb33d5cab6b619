"""P2 at harsh noise answered "SLC L" at 0.97 on pm981-256g (TLC, 4 units of 4 KiB chunks) after P4 read a stripe
of 276 at 0.03: P2 takes each page's latency as the median over the units of its place in a unit's write order,
and with a wrong stripe every place holds pages of all three types, whose medians fall on one sharp level that
separated "better" than the single reads' two blurred ones. Now one level from those medians is no surer than the
chunk and stripe that place the pages (the lower of P3's and P4's confidences); levels the medians separate stand
(mixing page types never splits a level). Synthetic single page reads with
seeded noise: no engine, deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ftlscope.probes import layout_probes as lp

PAGE = 4096
UNITS = 4


def tlc_reads(seed: int = 4) -> pd.DataFrame:
    """A sequentially filled TLC drive of 4 units with one-page chunks (page p on unit p mod 4, place p // 4 in
    its write order, types L M H in turn), 4096 pages read once each: 60, 85 and 110 us varying by 15 %
    (log-normal), one read in 50 retried (twice the time)."""
    rng = np.random.default_rng(seed)
    pages = np.arange(4096)
    level = np.array([60e3, 85e3, 110e3])[(pages // UNITS) % 3]
    latency = level * rng.lognormal(0.0, 0.15, len(pages))
    latency *= np.where(rng.random(len(pages)) < 0.02, 2.0, 1.0)
    return pd.DataFrame({"page": pages, "latency_ns": latency, "order": pages[::-1]})


def test_medians_over_a_wrong_stripe_are_as_unsure_as_the_stripe():
    reads = tlc_reads()
    # Uncapped, the medians over a wrong stripe's places read one sharp level: the wrong answer at >= 0.9.
    uncapped = lp.analyse_page_type(reads, PAGE, (1, 276))
    assert uncapped.value["cell"] == "slc" and uncapped.confidence >= 0.9, uncapped.evidence
    answer = lp.analyse_page_type(reads, PAGE, (1, 276), geometry_confidence=0.03)
    assert answer.confidence <= 0.03, answer.evidence
    assert "no surer than the chunk and stripe" in answer.evidence
    # The other readings of the same reads are no surer either (consumer-tlc-hmb at harsh noise: "SLC" at 0.48
    # beside "MLC" at 0.51).
    assert answer.alternatives and all(a["confidence"] <= answer.confidence for a in answer.alternatives), \
        answer.alternatives


def test_a_sure_right_stripe_leaves_the_reading_as_it_was():
    reads = tlc_reads()
    uncapped = lp.analyse_page_type(reads, PAGE, (1, UNITS))
    answer = lp.analyse_page_type(reads, PAGE, (1, UNITS), geometry_confidence=0.97)
    assert answer.value["cell"] == "tlc", answer.evidence
    assert (answer.value, answer.confidence) == (uncapped.value, uncapped.confidence)
