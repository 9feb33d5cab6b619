"""P6 at harsh noise answered "inconsistent (242-256 KiB)" at 0.71 on the consistent kelpie-t64g-s (one unit, 16 KiB
pages): its 16-page reads came out 600 us dearer than its 17-page ones. The slot-balanced curve fits latency = the
size's own cost + the slot's cost for that many pages, and leaves one constant per page count free; the slot costs
were medians over the sizes of a page count, the sizes' costs means over slots. On right-skewed reads (a read that
meets background work, every 5 ms for 2 ms, waits up to 2 ms) the median of the 32 sizes of 16 pages sits below
their mean, the "median" of the two sizes read above 256 KiB is their mean: every size up to 256 KiB rose by the
skew against the larger ones, and the last sizes before 256 KiB cost "more than a larger read". Now each page
count's slot costs average zero over its slots, so every size's cost is its mean over the slots, whatever the
page count. Synthetic slot reads with seeded noise: no engine, deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ftlscope.probes import p6_read_consistency as p6

PAGE = 16384
SECTOR = 512


def one_unit_reads(rounds: int, seed: int) -> pd.DataFrame:
    """Every size read twice at each slot (four slots a round), as the probe reads: one unit, so the pages of a
    read one after another, 60 us each varying by 30 % (log-normal, harsh noise's latency_cv), plus the transfer;
    half the reads meet background work and wait a uniform 0-2 ms more (a heavy right tail that the outlier rule,
    twice the median, leaves in)."""
    rng = np.random.default_rng(seed)
    sizes = np.repeat(p6.sizes_for(SECTOR, PAGE), p6.READS_PER_SIZE)
    rows = []
    for r in range(rounds):
        for k in range(p6.SLOTS_PER_ROUND):
            slot = r * p6.SLOTS_PER_ROUND + k
            pages = -(-sizes // PAGE)
            each = 60_000 * rng.lognormal(0.0, 0.3, (len(sizes), int(pages.max())))
            cost = np.where(np.arange(each.shape[1]) < pages[:, None], each, 0.0).sum(axis=1) + sizes / 3.0
            cost += np.where(rng.random(len(sizes)) < 0.5, rng.uniform(0, 2e6, len(sizes)), 0.0)
            rows.append(pd.DataFrame({"round": r, "offset_bytes": slot * p6.SLOT, "slot": slot, "size": sizes,
                                      "latency_ns": cost.astype(np.int64)}))
    return pd.concat(rows, ignore_index=True)


def test_sizes_of_many_and_of_few_a_page_count_are_costed_alike():
    raw = p6.drop_outliers(one_unit_reads(11, seed=1))
    table = p6.slot_curve(raw, PAGE)
    plain = raw.groupby("size")["latency_ns"].mean()
    shift = table["mean_ns"] - plain.reindex(table.index)
    many = float(shift[table["pages"] <= 16].median())  # 32 sizes a page count
    few = float(shift[table["pages"] > 16].median())  # two sizes a page count
    # Sizes sit where their plain means put them (give or take reads the outlier rule dropped), whatever their
    # page count: before, the sizes of 32 to a page count rose 367 us over those of two on these reads.
    assert abs(many - few) < 20_000, (many, few)

