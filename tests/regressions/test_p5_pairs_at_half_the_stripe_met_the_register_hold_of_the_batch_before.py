"""P5 read pm981-256g's layout from pairs of reads issued back to back, and one distance, half the stripe width, read
every pair on the same two units as the pair before (the walk moves twice the distance a batch); the others
alternate. With `nand.register_hold` (the controller keeps a unit's register after the sense while it decodes)
the next pair arrived inside the hold, its two reads started at the two releases, and that distance completed
further apart, as if its units shared a bus: the shipped preset (4 x 1) read right at 0.73 only, without its
noise "2 ch x 2" at 0.67, and an 8 x 1 copy "4 ch x 2" at 0.997 (issue 15). Each batch of a distance run now
starts after an idle gap (`layout_probes.PAIR_IDLE_NS`) that outlasts the hold. Seeded noise, virtual time:
deterministic."""

from __future__ import annotations

import re

import pytest

from ftlscope.experiments.context import Context
from ftlscope.probes import layout_probes as lp
from ftlscope.probes.base import Answer
from ftlscope.probes.truth import ground_truth
from ftlscope.sim import SimDevice


def _variant(tmp_path, name: str) -> str:
    text = SimDevice.open("pm981-256g").config_toml
    assert re.search(r'^register_hold = "60us"', text, re.M), "the preset's register hold changed: refit this test"
    if name == "noise-free":
        text, n = re.subn(r"^\[noise\][^\[]*", "", text, flags=re.M | re.S)
    elif name == "8 x 1":
        text, n = re.subn(r"^(channels|stripe_width) = 4\b", r"\1 = 8", text, flags=re.M)
        n -= 1  # both lines
    else:
        n = 1
    assert n == 1, f"the preset's {name} lines changed: refit this test"
    path = tmp_path / f"pm981-{name.replace(' ', '')}.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("name, least", [("as shipped", 0.97), ("noise-free", 0.5), ("8 x 1", 0.97)])
def test_p5_reads_the_register_holding_pm981_layout(tmp_path, name, least):
    device = SimDevice.open(_variant(tmp_path, name))
    truth = ground_truth(device.config_toml)
    ctx = Context(device, raw_dir=tmp_path / "raw", writes=True, health_interval=0)
    span = ctx.span(512 << 20)
    ctx.precondition("purge", span)
    ctx.precondition("sequential-fill", span)
    known = {pid: Answer(truth[pid], 1.0, "truth") for pid in ("P1", "P3", "P4")}
    answer = lp.run_channel_layout(ctx, known, tmp_path)
    # Measured: 4 x 1 at 1.0 (0.73 before), 4 x 1 at 0.5 (the noise-free reading's most; "2 x 2" at 0.67
    # before), 8 x 1 at 0.997 ("4 x 2" at 0.997 before).
    assert answer.value == truth["P5"], answer.evidence
    assert answer.confidence >= least, answer.evidence
