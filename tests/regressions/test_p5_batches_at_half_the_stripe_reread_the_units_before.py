"""P5 read a noise-free copy of pm981-256g (4 channels x 1 chip, stripe 4) as "2 ch x 2" at 0.67 (and an eight-die
copy, 8 x 1, "4 ch x 2" at 0.997 before the preset's read retries started at the hold's release): its batches were
a strided walk, so at distance d = S/2 every batch read the same two units (0 and S/2; at S/3 a batch met the one
before on one unit). On a drive whose dies hold their register after a read (`nand.register_hold`, 60 us) the next
batch's reads then waited for that hold as if the two units shared a bus. The batch order now never reads a unit
the batch before read. Deterministic: simulated time, fixed seeds."""

from __future__ import annotations

import re

from ftlscope.probes import layout_probes as lp
from ftlscope.probes.validate import validate
from ftlscope.sim import SimDevice


def pm981_copy(tmp_path, *, dies: int, noise: bool):
    """pm981-256g with ``dies`` channels of one chip (stripe = dies), with or without its [noise] section."""
    preset = SimDevice.open("pm981-256g").config_toml
    assert re.search(r'^register_hold = "60us"', preset, re.M), "the preset's register hold changed: refit this test"
    text = preset if noise else preset[:preset.index("\n[noise]")] + "\n"
    text, n = re.subn(r"^channels = 4\b", f"channels = {dies}", text, flags=re.M)
    text, m = re.subn(r"^stripe_width = 4\b", f"stripe_width = {dies}", text, flags=re.M)
    name = f"pm981-{dies}die{'' if noise else '-quiet'}"
    text = re.sub(r'^name = "pm981-256g"', f'name = "{name}"', text, flags=re.M)
    assert n == m == 1
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_consecutive_batches_read_disjoint_units():
    for stripe, rows, batch in [(8, 8, 2), (8, 8, 3), (4, 8, 2), (32, 8, 2), (5, 4, 2)]:
        for distance in range(1, stripe):
            order = lp.batch_order(stripe, rows, distance, batch, 16)
            assert order, (stripe, distance, batch)
            chunks = [c for reads in order for c in reads]
            assert len(chunks) == len(set(chunks)), "a chunk read twice"
            for before, after in zip(order, order[1:], strict=False):
                assert not {c % stripe for c in before} & {c % stripe for c in after}, (stripe, distance, order)
            pairs = [r for r in order if r[-2] // stripe == r[-1] // stripe]
            assert len(pairs) >= len(order) // 2, (stripe, distance, batch)
            assert all(r[-1] - r[-2] == distance for r in pairs)


def test_pm981_copies_read_their_dies(tmp_path):
    # The noise-free four-die copy read "2 ch x 2" (wrong); the eight-die copies must stay right.
    for dies, noise in [(4, False), (8, False), (8, True)]:
        rows = validate([str(pm981_copy(tmp_path, dies=dies, noise=noise))], properties="P5").rows
        row = rows.set_index("property").loc["P5"]
        assert row["answer"] == f"{dies} ch x 1 chips" and bool(row["match"]), row.to_dict()
