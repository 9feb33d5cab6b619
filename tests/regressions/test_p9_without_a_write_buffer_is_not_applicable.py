"""P9 on the held-out write-through drive (no write buffer) at harsh noise read 16 writes at a time at 0.97
against the file's ``parallelism = 4``: without a buffer a write is a program and that key (the buffer's insert
slots) has no effect, so the batches showed the flash's units. P9 is the buffer's parallelism: when P8 finds no
buffer it answers "not applicable" (None) as sure as P8, keeps what the batches showed in
``program_parallelism``, and validate's truth for a drive without a buffer is None. Deterministic: answers, and
the noise-free optane-like preset (no write buffer)."""

from __future__ import annotations

from ftlscope.probes.base import Answer
from ftlscope.probes.p9_write_parallelism import without_buffer
from ftlscope.probes.runner import probe_device
from ftlscope.probes.truth import describe, ground_truth, matches
from ftlscope.sim import SimDevice


def test_no_buffer_makes_p9_not_applicable_as_sure_as_p8():
    answer = without_buffer(Answer(16, 0.97, "clusters of 16"), Answer(0, 0.93, "no buffer"))
    assert answer.value is None and answer.confidence == 0.93 and answer.extra["program_parallelism"] == 16
    assert answer.evidence.startswith("not applicable: P8 found no write buffer")
    # A buffer found, or P9 probed without P8: the count stands.
    assert without_buffer(Answer(4, 0.97, ""), Answer(64 << 20, 0.9, "")).value == 4
    assert without_buffer(Answer(4, 0.97, ""), None).value == 4


def test_the_match_rule_without_a_buffer():
    assert matches("P9", None, None) and not matches("P9", 16, None) and not matches("P9", None, 4)
    assert describe("P9", None) == "— (no buffer)"


def test_a_write_through_drive_answers_not_applicable(tmp_path):
    device = SimDevice.open("optane-like")
    truth = ground_truth(device.config_toml)
    assert truth["P8"] == 0 and truth["P9"] is None
    answer = probe_device(device, properties="P8,P9", out=tmp_path).answers["P9"]
    assert answer.value is None and answer.extra["program_parallelism"] >= 1, answer.evidence
    assert matches("P9", answer.value, truth["P9"])
