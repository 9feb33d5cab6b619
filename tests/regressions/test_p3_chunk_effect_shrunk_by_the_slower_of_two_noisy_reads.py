"""P3 at harsh noise answered "one page" for consumer-tlc-hmb's 16 KiB chunks at confidence 0.82 (0.45 in another
run; issue 16): across a chunk boundary a two-page read waits for the slower of two pages read in parallel, which
30 % noise makes about a sixth dearer, while inside a chunk one sense serves both pages; the 0.58 against 0.50 of
a noise-free drive shrank to ~0.015, and the test's power still assumed the noise-free 0.08. The power now takes
the effect the measured spread of the reads leaves. Pinned on synthetic sweeps built from that mechanism (seeded
noise): no engine, deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ftlscope.probes import p3_chunk_size as p3

PAGE = 4096
SENSE_NS, TRANSFER_NS = 45e3, 8.6e3  # inside a chunk: (45 + 2 * 8.6) / (2 * (45 + 8.6)) = 0.58; across: 0.50


def sweeps(rounds: int, chunk_pages: int, cv: float, seed: int = 7) -> pd.DataFrame:
    """``rounds`` sweeps over ``p3.SWEEP``: a page read alone is a sense (lognormal with ``cv``) and a transfer;
    a pair inside a chunk of ``chunk_pages`` pages is one sense and two transfers, a pair across a boundary the
    slower of two page reads."""
    rng = np.random.default_rng(seed)
    pages = p3.SWEEP // PAGE
    frames = []

    def read(n: int) -> np.ndarray:
        return SENSE_NS * rng.lognormal(-cv * cv / 2, cv, n) + TRANSFER_NS

    for r in range(rounds):
        base = (r + 1) * p3.ROUND_STRIDE + PAGE
        index = np.arange(pages)
        boundary = ((base // PAGE + index + 1) % chunk_pages) == 0
        inside = SENSE_NS * rng.lognormal(-cv * cv / 2, cv, pages) + 2 * TRANSFER_NS
        across = np.maximum(read(pages), read(pages))
        frames.append(pd.DataFrame({
            "round": r, "base": base, "page_index": index, "position": index * PAGE,
            "two_page_ns": np.where(boundary, across, inside).astype(np.int64),
            "first_alone_ns": read(pages).astype(np.int64), "second_alone_ns": read(pages).astype(np.int64),
            "buffer_emptied": True}))
    return pd.concat(frames, ignore_index=True)


def test_a_chunk_the_slower_of_two_reads_hides_leaves_one_page_unsure():
    # 30 % noise, 12 rounds (P3's most): whatever the levels show, no answer but 16 KiB is given at more than 0.5,
    # and an unsure "one page" lists 16 KiB among the chunks it leaves open.
    for seed in range(4):
        answer = p3.analyse(sweeps(12, 4, 0.3, seed), PAGE)
        if answer.value != 4 * PAGE:
            assert answer.confidence <= 0.5, (seed, answer.value, answer.confidence)
        if answer.value == PAGE:
            assert 4 * PAGE in [a["value"] for a in answer.alternatives], (seed, answer.alternatives)
            assert answer.extra["effect"] < 0.03


def test_the_same_chunk_without_noise_is_sure():
    answer = p3.analyse(sweeps(3, 4, 0.0), PAGE)
    assert answer.value == 4 * PAGE and answer.confidence >= 0.9


def test_one_page_chunks_at_low_noise_stay_sure():
    # Every pair across a boundary (chunk = one page) at 3 % noise: the effect a chunk would leave (0.08 - 0.01)
    # would have shown on every level.
    answer = p3.analyse(sweeps(3, 1, 0.03), PAGE)
    assert answer.value == PAGE and answer.confidence >= 0.9


def test_read_spread_is_the_noise_not_the_page_types():
    # Pages alternate between 40 and 90 us (page types) and every read varies by 20 %: the spread is the 20 %,
    # the page types cancel out of the ratios; without noise it is 0.
    rng = np.random.default_rng(3)
    pages, rounds = 512, 6
    kind = np.where(np.arange(pages + 1) % 2 == 0, 40e3, 90e3)

    def table(cv: float) -> pd.DataFrame:
        def read(k: np.ndarray) -> np.ndarray:
            return k * rng.lognormal(0.0, cv, len(k))
        return pd.concat([pd.DataFrame({
            "round": r, "base": PAGE, "page_index": np.arange(pages), "position": np.arange(pages) * PAGE,
            "two_page_ns": read(np.maximum(kind[:-1], kind[1:]) + 10e3), "first_alone_ns": read(kind[:-1]),
            "second_alone_ns": read(kind[1:])}) for r in range(rounds)], ignore_index=True)

    assert abs(p3.read_spread(table(0.2), PAGE) - 0.2) < 0.03
    assert p3.read_spread(table(0.0), PAGE) == 0.0
    assert p3.expected_effect(0.0) == p3.CHUNK_EFFECT and p3.expected_effect(1.0) == 0.0
