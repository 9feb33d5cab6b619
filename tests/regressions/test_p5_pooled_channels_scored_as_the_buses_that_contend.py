"""P5 on a held-out drive of 10 channels x 4 chips pooled into 5 groups read 5 ch x 8 chips at 1.00 and was
scored wrong: the simulator's pools contend as one bus per group (channels c and c' when c mod 5 == c' mod 5), so
the drive times exactly as 5 channels x 8 chips and no read timing can tell them apart. P5 is a contention
measurement, so the answer is the buses that contend, listed with the pooled layouts that time the same, and
validate scores it against the buses (truth.observable_layout). Deterministic: the noise-free drive, fixed seed."""

from __future__ import annotations

from pathlib import Path

from ftlscope.probes import layout_probes as lp
from ftlscope.probes.base import Answer
from ftlscope.probes.truth import describe, matches, observable_layout
from ftlscope.probes.validate import validate

POOLED = Path(__file__).resolve().parents[2] / "bench" / "devices" / "heldout" / "ho-mlc-10x4-partial.toml"


def test_a_pooled_layout_is_scored_as_its_buses():
    truth = {"channels": 10, "chips_per_channel": 4, "channel_groups": 5}
    assert observable_layout(truth) == {"channels": 5, "chips_per_channel": 8}
    assert matches("P5", {"channels": 5, "chips_per_channel": 8}, truth)
    assert not matches("P5", {"channels": 10, "chips_per_channel": 4}, truth)  # what timing cannot show
    assert not matches("P5", {"channels": 5, "chips_per_channel": 4}, truth)
    # Without pools the rule is the contract's channels x chips, as before.
    assert matches("P5", {"channels": 8, "chips_per_channel": 4}, {"channels": 8, "chips_per_channel": 4})
    assert describe("P5", truth) == "10 ch x 4 chips in 5 groups"


def test_the_answer_lists_the_pooled_layouts_that_time_the_same():
    answer = lp.said_as_buses(Answer({"channels": 5, "chips_per_channel": 8}, 0.99, "pairs"), 40)
    same = answer.extra["pooled_equivalents"]
    assert {"channels": 10, "chips_per_channel": 4, "channel_groups": 5} in same
    assert [v["channels"] for v in same] == [10, 20, 40] and answer.confidence == 0.99
    assert "pooled into 5 groups would time the same" in answer.evidence
    # One unit a channel, or no confidence: nothing to list.
    assert "pooled_equivalents" not in lp.said_as_buses(Answer({"channels": 8, "chips_per_channel": 1}, 1.0, ""),
                                                        8).extra


def test_the_pooled_held_out_drive_is_right_as_five_buses(tmp_path):
    rows = validate([str(POOLED)], properties="P5").rows.set_index("property")
    assert rows.loc["P5", "answer"] == "5 ch x 8 chips" and bool(rows.loc["P5", "match"]), rows.loc["P5"].to_dict()
    assert rows.loc["P5", "truth"] == "10 ch x 4 chips in 5 groups"
