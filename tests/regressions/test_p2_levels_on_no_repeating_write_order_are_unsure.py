"""P2 at harsh noise answered kelpie-t64g-s (SLC) "MLC 5L 1H 20L 1H 10L 1H 13L ..." at confidence 0.985 (issue 16):
reads that met a retry (twice a page read) or background work formed a second latency level, and places of the
write order took it, so the check for levels no place takes passed. Page types repeat with a unit's write order;
those reads land anywhere. A pattern that follows no cycle or composite now leaves the cell type unsure. Synthetic
single-page reads (seeded noise), no engine, deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ftlscope.probes import _layout_analysis as la
from ftlscope.probes.layout_probes import UNUSED_LEVEL_CONFIDENCE, analyse_page_type

PAGES = 4096


def reads(kind: np.ndarray, retry_rate: float, seed: int = 5) -> pd.DataFrame:
    """One read per page: ``kind`` (us) with 5 % variation, a share ``retry_rate`` of them read twice over."""
    rng = np.random.default_rng(seed)
    latency = kind * rng.lognormal(0.0, 0.05, len(kind)) * np.where(rng.random(len(kind)) < retry_rate, 2.0, 1.0)
    return pd.DataFrame({"page": np.arange(len(kind)), "latency_ns": (latency * 1e3).astype(np.int64),
                         "order": np.arange(len(kind))})


def test_retried_reads_on_an_slc_drive_are_no_page_type():
    answer = analyse_page_type(reads(np.full(PAGES, 60.0), 0.03), 16384, (1, 1), geometry_confidence=0.98)
    assert answer.value["cell"] == "slc" or answer.confidence <= UNUSED_LEVEL_CONFIDENCE, answer.evidence
    if answer.value["cell"] != "slc":
        assert "slc" in [a["value"]["cell"] for a in answer.alternatives]


def test_mlc_pages_in_a_repeating_order_stay_sure():
    kind = np.where(np.arange(PAGES) % 2 == 0, 60.0, 120.0)  # "1L 1H"
    answer = analyse_page_type(reads(kind, 0.0), 16384, (1, 1), geometry_confidence=0.98)
    assert answer.value == {"cell": "mlc", "pattern": "1L 1H"} and answer.confidence >= 0.9


def test_repeating_pattern_is_none_for_a_sequence_written_out():
    assert la.repeating_pattern(np.array([0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]), "LH",
                                16384) is None
    assert la.repeating_pattern(np.resize([0, 0, 0, 1], 64), "LH", 16384) == "3L 1H"
