"""Issue 19: a write the shim held was recorded as due at its release, so its issue lag left the hold out and
`ftlscope newt`'s latency from arrival (issue lag + device latency) would have shown held writes as if they went
at once (the lag of the longest-held write, 188 ms, read 3.3 ms at most). A held write is now late from its time
in the trace: its issue lag counts the hold, as an application behind the shim waits it."""

from __future__ import annotations

import numpy as np

from ftlscope.newt.latency import gains
from ftlscope.newt.measure import Plan, measure
from ftlscope.newt.shim import ShimSettings
from ftlscope.traces import synth
from ftlscope.traces.synthetic import WriteBursts

MIB = 1 << 20


def test_a_held_writes_issue_lag_holds_its_hold():
    # kelpie-n2t-i's 11.5 MiB buffer and a 12 MiB burst: the shim holds writes; from arrival each held write's
    # latency holds its hold (its issue lag counts from its time in the trace, not from its release).
    frame = synth("search", 1_000_000_000, seed=1, bursts=WriteBursts(12 * MIB, 200e6, 750_000_000))
    shim = ShimSettings(11.5 * MIB / 0.2, buffer_bytes=int(11.5 * MIB))
    outcome = measure("sim:kelpie-n2t-i", frame, Plan(shim=shim), timing="faithful", wrap=True)
    report = outcome.after.summary["write_shim"]
    assert report["delayed_writes"] > 0, report
    trace = outcome.after.trace
    lag = trace.loc[trace["op"] == "write", "issue_lag_ns"].to_numpy(np.int64)
    assert lag.max() >= report["delay_ns"]["max"], (lag.max(), report["delay_ns"])
    doc = gains(outcome.before, outcome.after)
    arrival, device = doc["arrival"]["after"]["write"]["lat_ns"], outcome.after.summary["write"]["lat_ns"]
    assert arrival["mean"] - device["mean"] >= report["delay_ns"]["mean"] * 0.99, (arrival, device, report)
