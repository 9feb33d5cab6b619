"""P5 read pm981-256g (4 channels x 1 chip, stripe 4) at mild noise as "2 ch x 2 chips" at confidence 1.00: the
noisy path's batches were a strided walk, so at distance S/2 every batch read units 0 and S/2 (and at S/3 batches of
three met the batch before), and on a drive whose dies hold their register after a read (`nand.register_hold`) the
batch before delayed the pair as a shared bus would. The walk now skips ahead after each batch where it would meet
the units of the batch before (it is unchanged at every other distance). Deterministic: simulated time, fixed
seeds."""

from __future__ import annotations

from ftlscope.probes import layout_probes as lp
from ftlscope.probes.validate import validate


def test_the_walk_keeps_consecutive_batches_off_each_others_units():
    # (a stripe of 4 has no room for two batches of three distance-1 reads on disjoint units: no skip there)
    for stripe, batch in [(4, 2), (5, 2), (8, 2), (8, 3), (12, 3), (32, 2), (32, 3), (64, 2)]:
        for distance in range(1, stripe):
            skip = lp.walk_skip(stripe, distance, batch)
            step = batch * distance + skip
            before = {(i * distance) % stripe for i in range(batch)}
            after = {(step + i * distance) % stripe for i in range(batch)}
            assert not before & after, (stripe, batch, distance, skip)


def test_the_walk_is_unchanged_where_it_already_kept_off():
    assert [lp.walk_skip(4, d, 2) for d in (1, 2, 3)] == [0, 1, 0]
    assert [d for d in range(1, 32) if lp.walk_skip(32, d, 2)] == [16]


def test_pm981_at_mild_noise_reads_four_channels():
    result = validate(["pm981-256g"], properties="P5", noise="mild")
    row = result.rows[result.rows["property"] == "P5"].iloc[0]
    assert row["answer"] == "4 ch x 1 chips", row
    assert bool(row["match"])
