"""P5 at medium noise named wrong channel counts from the median latency of streams of reads (issue 16):
kelpie-n128g-s 29 channels for 16, kelpie-t480g-s 14 for 8, consumer-tlc-dram 26 for 8 (seen through its one
command processor). The streams' medians mixed the bus wait with the page types each stride put side by side.
Pairs of reads of one stripe row at the same place of both units' write order (one page type) complete close
together less often when their units share a bus: read from thousands of pairs, each is right at >= 0.97.
Seeded noise, virtual time: deterministic."""

from __future__ import annotations

import pytest

from ftlscope.experiments.context import Context
from ftlscope.probes import layout_probes as lp
from ftlscope.probes.base import Answer
from ftlscope.probes.noise_levels import noisy_device_file
from ftlscope.probes.truth import ground_truth
from ftlscope.sim import SimDevice


@pytest.mark.parametrize("preset", ["kelpie-n128g-s", "kelpie-t480g-s"])
def test_noisy_layout_from_pairs_completing_close_together(tmp_path, preset):
    device = SimDevice.open(str(noisy_device_file(preset, "medium", tmp_path)))
    truth = ground_truth(device.config_toml)
    ctx = Context(device, raw_dir=tmp_path / "raw", writes=True, health_interval=0)
    span = ctx.span(512 << 20)
    ctx.precondition("purge", span)
    ctx.precondition("sequential-fill", span)
    known = {pid: Answer(truth[pid], 1.0, "truth") for pid in ("P1", "P3", "P4")}
    answer = lp.run_channel_layout(ctx, known, tmp_path)
    assert answer.value == truth["P5"]
    assert answer.confidence >= 0.97
    assert "complete within" in answer.evidence
