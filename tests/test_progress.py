"""The progress fraction and time left of runs and profiles: pure arithmetic, checked without a device."""

import pytest

from ftlscope.progress import format_eta, job_fraction, run_fraction, seconds_left, step_weights


def _p(device_ns=0, ops=0, bytes_=0, elapsed_ns=0):
    return {"device_ns": device_ns, "ops": ops, "bytes": bytes_, "elapsed_ns": elapsed_ns}


def test_a_runtime_bounded_run_follows_device_time_including_warmup():
    stop, warmup = {"time_ns": 10_000_000_000}, {"time_ns": 2_000_000_000}
    assert run_fraction(stop, warmup, _p(device_ns=6_000_000_000)) == pytest.approx(0.5)
    assert run_fraction(stop, warmup, _p(device_ns=12_000_000_000)) == 1.0
    # Past the limit (the last requests complete after it) it stays at 100 %.
    assert run_fraction(stop, warmup, _p(device_ns=13_000_000_000)) == 1.0


def test_an_ops_bounded_run_counts_warmup_requests_too():
    assert run_fraction({"ops": 800}, {"ops": 200}, _p(ops=250)) == pytest.approx(0.25)


def test_a_bytes_bounded_run_and_the_first_limit_reached_wins():
    assert run_fraction({"bytes": 1000}, {}, _p(bytes_=400)) == pytest.approx(0.4)
    both = run_fraction({"bytes": 1000, "time_ns": 100}, {}, _p(bytes_=400, device_ns=90))
    assert both == pytest.approx(0.9)
    assert run_fraction({}, {}, _p(ops=5)) is None


def test_time_left_uses_the_average_pace_of_the_whole_run():
    # A simulated drive that set up for 1 s and then did 0.00024 % would show days left with a windowed
    # rate; the whole-run average gives the honest (large, but finite and shrinking) figure.
    assert seconds_left(0.25, 10.0) == pytest.approx(30.0)
    assert seconds_left(0.0, 10.0) is None
    assert seconds_left(1.0, 10.0) == 0.0
    assert format_eta(None) == "-:--"
    assert format_eta(65) == "1:05"
    assert format_eta(3723) == "1:02:03"


def test_the_profile_bar_weighs_the_probes_by_their_measured_share():
    steps = ["probes", "bs-sweep", "qd-sweep", "alignment", "qd1-baseline", "seq-write-over-time"]
    weights = step_weights(steps)
    after_probes = job_fraction(weights, 1)
    # bench/profile_runtime.py measured the probes at about 60 % of a quick profile's wall time.
    assert 0.5 < after_probes < 0.7
    assert job_fraction(weights, 0) == 0.0
    assert job_fraction(weights, len(steps)) == 1.0
    assert job_fraction(weights, 1, within=0.5) == pytest.approx(after_probes + weights[1] / 2 / sum(weights))
    # A step the bench did not measure weighs the median of those it did.
    assert step_weights(["unknown-step"])[0] in step_weights(steps)
    # The standard suite has its own measurements (the same experiment runs longer there); full uses them.
    assert step_weights(["burst-vs-steady"], "standard") == step_weights(["burst-vs-steady"], "full")
    assert step_weights(["bs-sweep"], "standard")[0] > step_weights(["bs-sweep"], "quick")[0]
