"""P5 on kelpie-n1.6t-s (16 channels pooled into 4 groups that contend as one bus) read 4 ch x 31 at 1.0: more
chips a channel than any drive measured carries is said as possibly pooled channels, at most 0.5, with the
pooled layouts listed. Answers only: no engine, deterministic."""

from __future__ import annotations

from ftlscope.probes import _p5_analysis as p5
from ftlscope.probes import layout_probes as lp
from ftlscope.probes.base import Answer


def test_more_chips_a_channel_than_any_drive_carries_is_said_as_possibly_pooled():
    answer = Answer({"channels": 4, "chips_per_channel": 31}, 1.0, "pairs")
    capped = lp.pooled_cap(answer, 124)
    assert capped.confidence == p5.POOLED_CONFIDENCE and capped.extra["pooled_channels_possible"]
    assert {"channels": 16, "chips_per_channel": 8} in [a["value"] for a in capped.alternatives]
    deep = lp.pooled_cap(Answer({"channels": 4, "chips_per_channel": 16}, 0.99, "pairs"), 64)
    assert deep.confidence == 0.99 and "pooled_channels_possible" not in deep.extra
