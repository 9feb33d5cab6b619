"""P4 at harsh noise answered a stripe of 64 at confidence 0.83 on consumer-tlc-hmb (16 chunks of 16 KiB) while P3
had answered its chunk "4 KiB" at 0.49 (issue 16): the stripe is a count of P3's chunks, so a wrong chunk makes it
wrong however clear its pairs. P4 is now no surer than P3."""

from __future__ import annotations

from ftlscope.probes.base import Answer
from ftlscope.probes.layout_probes import no_surer_than_chunk


def test_stripe_capped_at_an_unsure_chunk():
    stripe = no_surer_than_chunk(Answer(64, 0.827, "pairs"), {"P3": Answer(4096, 0.485, "levels")})
    assert stripe.confidence == 0.485 and "P3, 0.48" in stripe.evidence


def test_stripe_keeps_its_own_confidence_under_a_surer_chunk():
    stripe = no_surer_than_chunk(Answer(16, 0.7, "pairs"), {"P3": Answer(16384, 1.0, "levels")})
    assert stripe.confidence == 0.7 and stripe.evidence == "pairs"
    assert no_surer_than_chunk(Answer(16, 0.7, "pairs"), {}).confidence == 0.7
