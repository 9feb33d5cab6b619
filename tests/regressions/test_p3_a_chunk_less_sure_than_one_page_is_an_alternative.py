"""P3 at harsh noise answered "512 KiB" at confidence 0.08 for kelpie-n1.6t-s's one-page (4 KiB) chunks (issue 16):
the 48 reads at 512 KiB boundaries leaned cheaper at z -2.3, just past the 2 standard errors where a level starts
to differ, and any chunk with a confidence above 0 was the answer, though "one page" was surer (0.61). Now the
surer of the two is the answer and the other an alternative. Synthetic sweeps with seeded noise (the P3
regression's generator): a slight effect at 512 KiB boundaries that one seed leans just past 2 standard errors."""

from __future__ import annotations

from test_p3_one_page_not_sure_when_a_chunk_level_alone_cannot_tell import PAGE, sweeps

from ftlscope.probes import _boundary_levels as bl
from ftlscope.probes import p3_chunk_size as p3


def test_a_chunk_less_sure_than_one_page_is_listed_not_answered():
    answer = p3.analyse(sweeps(12, 128, inside=0.52, across=0.46, cv=0.3, seed=3), PAGE)
    chunk, chunk_confidence, _ = bl.decide(p3.level_tests(answer.raw, PAGE), p3.MIN_SEPARATION, 0.0)
    assert chunk == 512 * 1024 and 0 < chunk_confidence < 0.2  # what the old code answered
    assert answer.value == PAGE and answer.confidence > chunk_confidence
    listed = {a["value"]: a["confidence"] for a in answer.alternatives}
    assert abs(listed[512 * 1024] - chunk_confidence) < 1e-3
    # No alternative above the answer.
    assert max(listed.values()) <= answer.confidence


def test_a_clear_chunk_stays_the_answer():
    answer = p3.analyse(sweeps(3, 4, inside=0.58, across=0.50, cv=0.03), PAGE)
    assert answer.value == 4 * PAGE and answer.confidence >= 0.9
