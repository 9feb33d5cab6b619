"""scheduler-impact on a loop device over a tmpfs file and on an attached simulated drive (root only): the four
operations and the mixed pair under each scheduler make the table, the findings (fairness index) and the figure;
the device's scheduler is restored after a run, an error and Ctrl-C; refusals name the fix; no loop device or
mount is left behind."""

from __future__ import annotations

import os
import subprocess

import pandas as pd
import pytest
from attached_drives import attached_devices, still_ours

from ftlscope import plots
from ftlscope.errors import UsageError
from ftlscope.experiments import get, run_experiment
from ftlscope.experiments.context import Context
from ftlscope.experiments.scheduler_impact import fairness, read_schedulers, scheduler_file

MiB = 1 << 20
TINY = {"span": "16MiB", "runtime": "100ms", "warmup": "0", "schedulers": "none,mq-deadline",
        "random_write_bytes": "256KiB"}
OPERATIONS = {"sequential_write", "sequential_read", "random_read", "random_write", "mixed_read", "mixed_write"}


def _offering(device: str, *names: str) -> str:
    path = scheduler_file(device)
    if not path.exists():
        pytest.skip(f"{device} has no I/O scheduler file ({path})")
    offered, active = read_schedulers(path)
    missing = [n for n in names if n not in offered]
    if missing:
        pytest.skip(f"this kernel offers no {', '.join(missing)} scheduler (offers {', '.join(offered)})")
    return active


@pytest.fixture
def scheduler_of():
    """``scheduler_of(device, name)`` sets a loop device's scheduler for the test and puts the one it had back
    after (the kernel keeps a loop device's queue, and its scheduler, from one attach to the next)."""
    changed: list[tuple[str, str]] = []

    def set_it(device: str, name: str) -> None:
        changed.append((device, read_schedulers(scheduler_file(device))[1]))
        scheduler_file(device).write_text(name)

    yield set_it
    for device, name in reversed(changed):
        scheduler_file(device).write_text(name)


def _mounts(device: str) -> str:
    return subprocess.run(["findmnt", "--source", device], capture_output=True, text=True).stdout


def test_two_schedulers_on_a_loop_device_and_the_original_restored(make_loop, tmp_path, scheduler_of):
    device, _ = make_loop(64 * MiB)
    _offering(device, "none", "mq-deadline", "kyber")
    scheduler_of(device, "kyber")  # neither of the two measured: the run must put it back
    outcome = run_experiment(get("scheduler-impact"), device, out=tmp_path, params=TINY, destructive=device)
    assert outcome.completed, outcome.error
    table = pd.read_csv(outcome.directory / "results.csv")
    assert set(zip(table["scheduler"], table["operation"], strict=True)) == {
        (s, op) for s in ("none", "mq-deadline") for op in OPERATIONS}
    assert (table["mb_s"] > 0).all()
    assert read_schedulers(scheduler_file(device))[1] == "kyber"
    findings = outcome.findings
    assert findings["schedulers_measured"]["value"] == 2
    for scheduler in ("none", "mq_deadline"):
        assert 0.5 <= findings[f"fairness_{scheduler}"]["value"] <= 1.0  # Jain's index over two sides
    fair = fairness(table).set_index("scheduler")
    assert findings["fairest_index"]["value"] == pytest.approx(fair["jain"].max())
    row = table.set_index(["scheduler", "operation"])
    assert fair.loc["none", "read_share"] == pytest.approx(row.loc[("none", "mixed_read"), "mb_s"]
                                                           / row.loc[("none", "random_read"), "mb_s"])
    (figure,) = outcome.figures
    assert figure.name == "scheduler_impact.png" and "scheduler" in plots.caption_of(figure)
    labels = [run["label"] for run in outcome.conditions["runs"]]
    assert sum("mixed" in label for label in labels) == 4  # reader and writer, per scheduler, both kept in raw/


@pytest.mark.parametrize("failure", [KeyboardInterrupt, RuntimeError])
def test_the_scheduler_is_restored_after_ctrl_c_and_an_error(make_loop, tmp_path, monkeypatch, failure,
                                                              scheduler_of):
    device, _ = make_loop(64 * MiB)
    _offering(device, "none", "mq-deadline", "bfq")
    scheduler_of(device, "bfq")
    real_run = Context.run
    calls = []

    def run_then_fail(self, workload, label, **kwargs):
        calls.append(label)
        if len(calls) == 3:  # the fill, then the sequential write under mq-deadline, then this
            assert read_schedulers(scheduler_file(device))[1] == "mq-deadline"
            raise failure("stop here")
        return real_run(self, workload, label, **kwargs)

    monkeypatch.setattr(Context, "run", run_then_fail)
    params = {**TINY, "schedulers": "mq-deadline"}
    if failure is RuntimeError:
        with pytest.raises(RuntimeError):
            run_experiment(get("scheduler-impact"), device, out=tmp_path, params=params, destructive=device)
    else:
        outcome = run_experiment(get("scheduler-impact"), device, out=tmp_path, params=params, destructive=device)
        assert not outcome.completed and "interrupted" in outcome.error.message
    assert read_schedulers(scheduler_file(device))[1] == "bfq"


def test_a_scheduler_the_device_lacks_is_named_with_what_it_offers(make_loop, tmp_path):
    device, _ = make_loop(64 * MiB)
    active = _offering(device)
    outcome = run_experiment(get("scheduler-impact"), device, out=tmp_path, params={**TINY, "schedulers": "cfq"},
                             destructive=device)
    assert isinstance(outcome.error, UsageError)
    assert "does not offer cfq" in outcome.error.message and "it offers" in outcome.error.message
    assert read_schedulers(scheduler_file(device))[1] == active


def test_a_file_target_is_refused_with_the_way_out(tmp_path):
    outcome = run_experiment(get("scheduler-impact"), str(tmp_path / "file.img"), out=tmp_path, params=TINY,
                             size=16 * MiB)
    assert isinstance(outcome.error, UsageError) and "give a block device" in outcome.error.message


def test_bad_parameters_are_named():
    with pytest.raises(UsageError, match="--param random_size: give a multiple of 4 KiB"):
        get("scheduler-impact").resolve_params({"random_size": "1000"})
    with pytest.raises(UsageError, match="--param qd"):
        get("scheduler-impact").resolve_params({"qd": "0"})


def test_an_attached_simulated_drive_goes_through_the_loop_devices_scheduler(losetup, tmp_path):
    if not os.path.exists("/dev/fuse"):
        pytest.skip("attaching a simulated drive needs /dev/fuse")
    outcome = run_experiment(get("scheduler-impact"), "sim:hdd-7200-consumer", out=tmp_path,
                             params={**TINY, "schedulers": "mq-deadline", "attach_size": "64MiB",
                                     "runtime": "300ms"})
    assert outcome.completed, outcome.error
    table = outcome.table
    assert set(table["operation"]) == OPERATIONS and (table["mb_s"] > 0).all()
    notes = outcome.conditions["notes"]
    assert any("sim:hdd-7200-consumer attached as /dev/loop" in n for n in notes)
    (device,) = attached_devices(notes)
    assert any(n.startswith(f"scheduler-impact: {device} offers") for n in notes)
    # a hard disk: 1 MiB sequential reads are many times its 4 KiB random reads
    rows = table.set_index("operation")["mb_s"]
    assert rows["sequential_read"] > 5 * rows["random_read"]
    assert not still_ours(device)  # the attach's loop device is gone
    assert _mounts(device) == ""
