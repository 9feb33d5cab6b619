"""The profile runner on small targets: an interrupted profile keeps what it measured and still gets its
report; a regular file is profiled like any target; safety refusals come before anything is written."""

from __future__ import annotations

import json

import pytest
from simdevices import small_ssd

import ftlscope.profile.runner as runner
from ftlscope.errors import FtlscopeError
from ftlscope.profile.suites import Step, Suite, get_suite
from ftlscope.profile.target import hash_serial

TINY = Suite("tiny", "two short experiments", probes=False, steps=(
    Step("qd1-baseline", {"runtime": "100ms", "warmup": "0s", "random_size": "4KiB", "sequential_size": "64KiB"}),
    Step("qd-sweep", {"runtime": "100ms", "warmup": "0s", "qds": "1,4,16"}),
))


def test_an_interrupted_profile_keeps_what_was_measured(tmp_path, monkeypatch):
    calls = []
    real = runner.run_experiment

    def interrupt_second(*args, **kwargs):
        calls.append(args[0].name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "run_experiment", interrupt_second)
    outcome = runner.profile(small_ssd(tmp_path), suite=TINY, out=tmp_path / "run")
    assert outcome.error is not None and outcome.error.exit_code == 130
    runner.finish(outcome, db=tmp_path / "runs.sqlite")
    record = json.loads((tmp_path / "run" / "profile.json").read_text())
    assert record["completed"] is False and "interrupted" in record["stopped"]
    assert [e["name"] for e in record["experiments"]] == ["qd1-baseline"]
    assert record["experiments"][0]["findings"]["random_read_lat_mean_us"]["value"] > 0
    assert "stopped" in (tmp_path / "run" / "report.html").read_text()


def test_a_regular_file_is_profiled_and_reported(tmp_path, state_home):
    target = tmp_path / "scratch.img"
    outcome = runner.profile(str(target), suite=TINY, out=tmp_path / "run", size=64 << 20)
    assert outcome.error is None
    runner.finish(outcome, store=False)
    record = outcome.record
    assert record["target"]["kind"] == "file" and record["target"]["size_bytes"] == 64 << 20
    assert record["experiments"][1]["findings"]["peak_iops"]["value"] > 0
    assert (tmp_path / "run" / "report.html").stat().st_size > 0


def test_an_existing_file_needs_destructive_before_anything_is_written(tmp_path, state_home):
    target = tmp_path / "precious.img"
    target.write_bytes(b"keep me" * 4096)
    with pytest.raises(FtlscopeError) as err:
        runner.profile(str(target), suite=TINY, out=tmp_path / "run")
    assert "--destructive" in err.value.message
    assert not (tmp_path / "run").exists()
    assert target.read_bytes().startswith(b"keep me")


def test_out_must_not_hold_another_profile(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "profile.json").write_text("{}")
    with pytest.raises(FtlscopeError) as err:
        runner.profile(small_ssd(tmp_path), suite=TINY, out=tmp_path / "run")
    assert err.value.message.startswith("--out:")


def test_suites_and_span():
    quick = get_suite("quick")
    assert [s.experiment for s in quick.for_target(rotational=False).steps] == [
        "bs-sweep", "qd-sweep", "alignment", "qd1-baseline", "corners", "seq-write-over-time"]
    # A hard disk also gets the read-only zoning and access-time measurement.
    assert [s.experiment for s in quick.for_target(rotational=True).steps] == [
        "bs-sweep", "qd-sweep", "alignment", "zoning", "qd1-baseline", "corners", "seq-write-over-time"]
    full = get_suite("full")
    assert len(full.steps) == 22 and full.probes
    assert "zoning" not in {s.experiment for s in full.for_target(rotational=False).steps}
    # The file-system experiments make file systems: their own suite, never in "full".
    assert "fs-impact" not in {s.experiment for s in full.steps}
    system = get_suite("system")
    names = [s.experiment for s in system.for_target(rotational=False).steps]
    assert names == ["zoning", "fs-impact", "scheduler-impact", "video-streaming", "git-checkout", "tree-traversal"]
    assert {"git-checkout", "tree-traversal", "scheduler-impact", "video-streaming"}.isdisjoint(
        s.experiment for s in full.steps)
    assert not system.probes
    standard = {s.experiment for s in get_suite("standard").steps}
    assert "random-fill" not in standard and "trim-before-overwrite" not in standard
    from ftlscope.experiments import get

    assert runner._params(get("qd-sweep"), {"span": "8GiB"}, 4 << 30, 256 * 10**9) == {"span": str(4 << 30)}
    assert runner._params(get("qd-sweep"), {}, 4 << 30, 256 * 10**9) == {"span": str(4 << 30)}
    assert runner._params(get("qd-sweep"), {"runtime": "1s"}, None, 256 * 10**9) == {"runtime": "1s"}
    with pytest.raises(FtlscopeError):
        get_suite("huge")


def test_serial_hash_is_stable_and_hides_the_serial():
    assert hash_serial("S4EWNX0R123456") == hash_serial("S4EWNX0R123456")
    assert "S4EWNX0R" not in hash_serial("S4EWNX0R123456")
    assert hash_serial("A") != hash_serial("B")


def test_a_block_device_needs_destructive_and_then_is_profiled(make_loop, tmp_path, state_home):
    device, backing = make_loop(64 << 20)
    with pytest.raises(FtlscopeError) as err:
        runner.profile(device, suite=TINY, out=tmp_path / "refused")
    assert "--destructive" in err.value.message and not (tmp_path / "refused").exists()
    assert backing.stat().st_blocks == 0, "nothing may be written before the safety check"

    outcome = runner.profile(device, suite=TINY, out=tmp_path / "run", destructive=device)
    runner.finish(outcome, store=False)
    record = outcome.record
    assert outcome.error is None and record["target"]["kind"] == "block device"
    assert record["target"]["size_bytes"] == 64 << 20 and record["target"]["scheduler"] is not None
    assert record["env"]["engine"]["backend"] in ("io_uring", "psync")
    assert record["experiments"][1]["findings"]["peak_iops"]["value"] > 0
    assert "Device health" in (tmp_path / "run" / "report.html").read_text()


def test_a_broken_store_or_spec_is_refused_before_the_device_is_touched(tmp_path, capsys):
    from ftlscope.cli import main

    bad = tmp_path / "not-a-db.sqlite"
    bad.write_text("hello")
    assert main(["profile", "--db", str(bad), "--out", str(tmp_path / "a")]) == 2
    assert main(["profile", "--spec", "seq_read=fast", "--out", str(tmp_path / "b"), "--no-store"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors[0].startswith("ftlscope: error: --db:") and errors[1].startswith("ftlscope: error: --spec:")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_sla_p99_is_checked_first_and_reaches_the_queue_depth_sweep(tmp_path, capsys):
    from ftlscope.cli import main, sla_suite

    assert main(["profile", "--sla-p99", "fast", "--out", str(tmp_path / "c"), "--no-store"]) == 2
    assert main(["profile", "--sla-p99", "0us", "--out", str(tmp_path / "d"), "--no-store"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors[0].startswith("ftlscope: error: --sla-p99") and errors[1].startswith("ftlscope: error: --sla-p99")
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()
    suite = sla_suite("quick", "500us")
    assert {s.experiment: s.params for s in suite.steps}["qd-sweep"]["sla_p99"] == "500us"
    assert sla_suite("quick", None) == "quick"
    # Profiled with it, the latency line follows the target.
    tiny = Suite("tiny", "qd-sweep", probes=False, steps=(
        Step("qd-sweep", {"runtime": "100ms", "warmup": "0s", "qds": "1,4,16", "sla_p99": "2ms"}),))
    outcome = runner.profile(small_ssd(tmp_path), suite=tiny, out=tmp_path / "run")
    runner.finish(outcome, store=False)
    latency = next(a for a in outcome.record["guidance"] if a["rule"] == "queue-depth-latency")
    assert "--sla-p99" in latency["text"] and "2 ms" in latency["text"]
