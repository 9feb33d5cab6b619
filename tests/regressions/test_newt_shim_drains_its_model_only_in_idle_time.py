"""Issue 19: on kelpie-n2t-i with the synthetic search trace and 20 MB write bursts (bench/newt_gain.py's
"search + 20 MB bursts / 1 s"), the shim's model of the drive's buffer drained as if reads took `1 + r` of the time
(`r` the reads' share of the bytes). During a burst `r` is small, but the search trace's reads keep the drive busy
about half of the time, and the drive drains its buffer only while idle: the model drained faster than the
drive, and now and then a burst still filled the buffer and flushed it whole with the shim on (reads and writes
waiting 20 ms). The shim now measures the drive's idle time itself (nothing of its queue in flight) and drains
its model only in it."""

from __future__ import annotations

from ftlscope.newt.measure import Plan, measure
from ftlscope.newt.shim import ShimSettings
from ftlscope.traces import synth
from ftlscope.traces.synthetic import WriteBursts

MIB = 1 << 20


def test_no_full_buffer_flush_with_the_shim_on_a_busy_drive():
    seconds = 6
    # bench/newt_gain.py's "search + 20 MB bursts / 1 s": 153 writes of 128 KiB at 200 MB/s every second.
    bursts = WriteBursts(153 * (128 << 10), 200e6, 1_000_000_000)
    frame = synth("search", seconds * 1_000_000_000, seed=1, bursts=bursts)
    # kelpie-n2t-i's P8 / P10: 11.5 MiB in 200 ms.
    shim = ShimSettings(11.5 * MIB / 0.2, buffer_bytes=int(11.5 * MIB))
    outcome = measure("sim:kelpie-n2t-i", frame, Plan(shim=shim), timing="faithful", wrap=True)
    for result in (outcome.before, outcome.after):
        assert result.summary["write"]["ops"] == len(frame[frame["op"] == "write"])
    before, after = outcome.before.summary, outcome.after.summary
    # Without the shim every burst fills the buffer: a full flush holds the writes and reads behind it ~20 ms.
    assert before["write"]["lat_ns"]["p99"] > 10_000_000 and before["read"]["lat_ns"]["max"] > 10_000_000
    # With it no write and no read waits for a full flush (a read waits at most for the programs under way on
    # its unit: a few TLC programs of 1.5 ms).
    assert after["write"]["lat_ns"]["max"] < 5_000_000, after["write"]["lat_ns"]
    assert after["read"]["lat_ns"]["max"] < 5_000_000, after["read"]["lat_ns"]
    report = after["write_shim"]
    assert report["bound_releases"] == 0 and report["overloaded_writes"] == 0, report
    # The bursts (20 MB in 100 ms, 1.7 buffers) are let in over the second that follows each.
    assert report["delay_ns"]["max"] < 1_000_000_000, report["delay_ns"]
