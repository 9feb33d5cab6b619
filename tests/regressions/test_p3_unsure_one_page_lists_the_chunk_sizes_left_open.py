"""P3's "one page" at harsh noise came with no alternatives (consumer-tlc-hmb: 4 KiB for its 16 KiB chunks at
0.616, alternatives empty), while every other probe lists the candidates it could not rule out (the paper's Table
3). Now an unsure "one page" lists each chunk size whose boundaries lean cheaper (from 1 standard error) or whose
level alone was too noisy to show a chunk, each at most what "one page" leaves; a sure "one page" lists none.
Synthetic sweeps with seeded noise (the P3 regression's generator): deterministic."""

from __future__ import annotations

from test_p3_one_page_not_sure_when_a_chunk_level_alone_cannot_tell import PAGE, sweeps

from ftlscope.probes import p3_chunk_size as p3


def test_an_unsure_one_page_lists_the_chunk_the_noise_may_hide():
    # 16 KiB chunks whose boundaries the noise nearly hides (0.55 against 0.57 inside, 30 % variation).
    answer = p3.analyse(sweeps(3, 4, inside=0.57, across=0.55, cv=0.3), PAGE)
    assert answer.value == PAGE and answer.confidence < 0.9
    listed = {a["value"]: a["confidence"] for a in answer.alternatives}
    assert 16 * 1024 in listed
    # None above what "one page" leaves open, and all chunk sizes (multiples of the page above it).
    assert all(0 < c <= 1 - answer.confidence + 1e-4 for c in listed.values())
    assert all(v > PAGE and v % PAGE == 0 for v in listed)


def test_a_sure_one_page_lists_nothing():
    answer = p3.analyse(sweeps(3, 1, inside=0.52, across=0.52, cv=0.03), PAGE)
    assert answer.value == PAGE and answer.confidence >= 0.99
    assert answer.alternatives == []
