"""Issue 19: a speed forced on a write-through drive (`--rate-limit-writes 57.5MB/s --from-profile RUN` on
optane-like, whose profile finds no write buffer, P8 none) held writes anyway: the shim modelled a buffer of 200 ms
at the speed, held a burst past 0.8 of it, and when it gave the hold up the backlog and the writes let through
meanwhile cost the synthetic cloud trace's reads p99 / p99.9 +15 / +28 %, for a flush the drive never does. The
shim now holds a write only when its model of the buffer says a full-buffer flush is imminent, and with no buffer
none ever is: the forced shim holds nothing, and the run is the run without it, request for request."""

from __future__ import annotations

from ftlscope.newt.measure import Plan, measure
from ftlscope.newt.params import NewtParams
from ftlscope.newt.shim import ShimSettings
from ftlscope.traces import synth
from ftlscope.traces.synthetic import WriteBursts

MIB = 1 << 20
SPEED = "57.5MB/s"  # kelpie-n2t-i's P8 / P10, forced


def _search_with_bursts():
    # 12 MiB write bursts at 200 MB/s every 750 ms: each one more than a 11.5 MB buffer at the forced speed.
    return synth("search", 2_000_000_000, seed=1, bursts=WriteBursts(12 * MIB, 200e6, 750_000_000))


def test_a_forced_shim_with_a_write_through_profile_holds_nothing():
    frame = _search_with_bursts()
    write_through = NewtParams(buffer_bytes=0, flush_window_s=0.0, source="optane-like's profile")
    shim = ShimSettings.resolve(SPEED, write_through)
    assert shim.active and shim.write_through and "no write buffer" in shim.source
    outcome = measure("sim:optane-like", frame, Plan(shim=shim), timing="faithful", wrap=True)
    before, after = outcome.before.summary, outcome.after.summary
    report = after["write_shim"]
    assert report["write_through"] and report["writes"] > 0
    assert (report["delayed_writes"], report["held_bytes"]["max"], report["backoffs"]) == (0, 0, 0), report
    # The bursts are urgent (the shim measured them) but nothing waits: every latency as without the shim.
    assert report["urgent_periods"] > 0, report
    for op in ("read", "write"):
        assert after[op]["lat_ns"] == before[op]["lat_ns"], op


def test_without_the_profile_the_same_forced_shim_still_holds():
    # The control: with no profile the shim assumes a buffer (200 ms at the speed) and holds the bursts, so the
    # test above measures the profile's "no buffer", not a trace the shim would not hold anyway.
    shim = ShimSettings.resolve(SPEED)
    assert not shim.write_through
    outcome = measure("sim:optane-like", _search_with_bursts(), Plan(shim=shim), timing="faithful", wrap=True)
    assert outcome.after.summary["write_shim"]["delayed_writes"] > 0
