"""A shim line read '3,423 of 4,930 writes delayed ... 3,393 writes not held': the writes that outran the flush speed
start no hold of their own, but those arriving behind held writes still wait their turn and count as delayed too, so
'not held' contradicted the count beside it. The line now says what is true of both counts."""
from ftlscope.newt.shim import describe


def test_outrun_writes_are_not_said_to_be_unheld_beside_the_delayed_count():
    shim = {"active": True, "flush_speed_bps": 57.5e6, "source": "--rate-limit-writes 57.5MB/s",
            "writes": 4930, "delayed_writes": 3423, "delay_ns": {"mean": 191e6, "max": 530e6},
            "held_bytes": {"max": 107 << 20}, "overloaded_writes": 3393, "sustained_urgency_max": 2.95}
    line = describe(shim)
    assert "3,423 of 4,930 writes delayed" in line
    assert "not held" not in line
    assert "3,393 writes came faster than the drive flushes for good" in line
    assert "those behind held writes waited their turn" in line
