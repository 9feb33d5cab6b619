"""Issue 19: on kelpie-t200g-m (64 MiB buffer, 1 s flush window) with the synthetic cloud trace at x1 (10 s,
``bench/newt_gain.py``) the shim bought read p99 only -23 % (the paper: -64 to -82 %). Per read, the reads at p95
and p99 of the "after" pass waited 35-55 ms behind full-buffer flushes that came inside the trace's read storms
(its burst slots bring reads and writes 5-6 times as fast): at 4.75-5.0 s a backlog of 88 MB let go at the host's
peak pace while the second burst's reads arrived, and at 7.4 s a burst the shim did not hold at all (it stayed
"passing" after that give-up while the steady writes kept the urgency above 0.5). The writes outrun the drive's
flush speed (85 MB/s against 67 MB/s): some full-buffer flushes cannot be avoided, only moved. With
``--hold-in-read-storms`` the shim holds writes while the reads storm and the buffer would overflow and lets them
go once the storm has passed, so the flushes come among the steady reads."""

from __future__ import annotations

from dataclasses import replace

from ftlscope.newt.measure import Plan, gains, measure
from ftlscope.newt.shim import ShimSettings
from ftlscope.traces import synth

BUFFER = 64 << 20  # kelpie-t200g-m's P8; P10 1 s


def read_p99_gain(storms: bool) -> tuple[float, dict]:
    frame = synth("cloud", 10_000_000_000, seed=1)
    shim = replace(ShimSettings(BUFFER / 1.0, buffer_bytes=BUFFER), hold_in_read_storms=storms)
    outcome = measure("sim:kelpie-t200g-m", frame, Plan(shim=shim), timing="faithful", wrap=True)
    return gains(outcome.before, outcome.after)["gain_pct"]["read"]["p99"], outcome.after.summary["write_shim"]


def test_holding_writes_through_read_storms_reaches_the_papers_p99_gain():
    default, plain = read_p99_gain(False)
    assert plain["storm_holds"] == 0 and default < 64  # the case: the default shim falls short (23 %)
    held, summary = read_p99_gain(True)
    assert summary["hold_in_read_storms"] is True and summary["storm_holds"] > 0
    assert held >= 64, summary  # measured 65.2 % (seed 1), mean hold 38 ms
