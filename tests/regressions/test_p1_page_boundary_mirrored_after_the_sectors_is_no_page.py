"""P1 at harsh noise answered "1 KiB" at confidence 1.0 for kelpie-n1.6t-s's 4 KiB pages (issue 16). P1 reads each
sweep position's page boundaries two ways: between the two sectors, and just after them (a read buffer's first
read of a page). The "after" family's level 0 (odd sectors) holds every position with a page boundary *between* its
sectors, where the difference drops to nothing; so on a drive without a read buffer every other "after" level is
dearer than level 0, at every size from 1 KiB: the page boundary's mirror image (z +6.0 at 1 KiB), while the
boundaries between the sectors said 4 KiB at z -17.7 but at 0.91 (the 1 KiB level leaned at z -2.4). The larger
confidence won. Now only levels that make the difference smaller count, in both families (a page boundary
between the sectors or a read buffer's first touch never makes it larger). Synthetic sweeps with seeded harsh noise:
no engine, deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ftlscope.probes import _boundary_levels as bl
from ftlscope.probes import p1_page_size as p1

SECTOR = 512
PAGE = 4096


def harsh_sweeps(rounds: int, seed: int = 3) -> pd.DataFrame:
    """One-page chunks, no read buffer: a two-sector read inside a page costs one page read, its sectors read
    apart two (the second queues on the page's unit); across a page boundary both cost the two pages read in
    parallel. Page reads vary log-normally (30 %), plus host jitter and one read in 50 retried."""
    rng = np.random.default_rng(seed)

    def page_read() -> float:
        t = 60_000 * rng.lognormal(0.0, 0.3)
        return t * (2 if rng.random() < 0.02 else 1) + rng.exponential(10_000)

    rows = []
    for r in range(rounds):
        base = (r + 1) * (16 << 20) + 64 * 1024
        for x in range(0, p1.SWEEP, SECTOR):
            across = (base + x + SECTOR) % PAGE == 0
            if across:
                lone = max(page_read(), page_read())
                pair = max(page_read(), page_read())
            else:
                lone = page_read()
                pair = page_read() + page_read()
            rows.append({"round": r, "base": base, "position": x, "lone_ns": lone, "pair_ns": pair})
    return pd.DataFrame(rows)


def test_the_after_family_reads_no_page_from_the_mirror_of_the_boundaries_between():
    answer = p1.analyse(harsh_sweeps(5), SECTOR)
    after = p1.level_tests(answer.raw, SECTOR, "after")
    # Unfiltered, the after family's levels all read dearer than its level 0 (the old code's 1 KiB) ...
    raw_after = bl.level_tests(p1._sectors(answer.raw, SECTOR) + p1.FAMILIES["after"], answer.raw["relative"],
                               answer.raw["extra_ns"], SECTOR, p1._top(SECTOR))
    assert bl.decide(raw_after, p1.MIN_SEPARATION, p1.MIN_SEPARATION_NS)[0] == 1024
    # ... and now give no page at all.
    assert bl.decide(after, p1.MIN_SEPARATION, p1.MIN_SEPARATION_NS)[0] is None
    assert answer.value == PAGE and answer.extra["boundary"] == "between"
    assert answer.confidence >= 0.9
