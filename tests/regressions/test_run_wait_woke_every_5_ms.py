"""Waiting for a run polled: the handle's `wait` slept 5 ms at a time until the run ended, so the caller's thread
woke 200 times a second, and the kernel put it now and then on the CPU where a paced queue spins for its next due
time, switching the queue out (bench/lag_sources.py: ~140-170 times a second at 50,000 requests/s, up to 300 us;
docs/traces.md, "psync-pool's lag, measured again"). `wait` now blocks on the run's end signal. Counted by the waiting
thread's voluntary context switches (each sleep and wake-up is one); no wall-time assertions."""

from __future__ import annotations

import resource

import ftlscope


def test_waiting_for_a_run_does_not_wake_the_caller_every_few_ms(tmp_path):
    # A slow rate keeps the run going 2 s (the caller's progress loop looks every 0.2 s: ~10 wake-ups of its own).
    workload = ftlscope.from_flags(rw="randread", qd=1, runtime="2s", rate_iops="100")
    ftlscope.run(str(tmp_path / "f.img"), workload, size="1MiB", engine="psync", health_interval="0s")
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    result = ftlscope.run(str(tmp_path / "f.img"), workload, size="1MiB", engine="psync", health_interval="0s")
    switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before
    assert result.summary["read"]["ops"] > 0
    # Polling every 5 ms: ~400 over 2 s; blocking: the ~10 progress looks and the run's start and end.
    assert switches < 100, f"{switches} voluntary context switches while waiting 2 s for a run"
