"""``bench --resume``: an experiment interrupted after its first repetition continues from the second, with the
same results as a run that was never interrupted, and refuses when the target was written meanwhile."""

from __future__ import annotations

import dataclasses
import os

import pandas as pd
import pytest

from ftlscope.errors import UsageError
from ftlscope.experiments import get, run_experiment
from ftlscope.experiments.context import Interrupted
from ftlscope.experiments.resume import CHECKPOINT, SAMPLE_BYTES

pytestmark = pytest.mark.usefixtures("state_home")

MiB = 1 << 20
SMALL = {"span": "64MiB", "runtime": "20ms", "warmup": "0s"}


def _interrupted_in_second_repetition(experiment):
    """The experiment, with Ctrl-C arriving after the first point of repetition 2."""

    def measure(ctx, params):
        for row in experiment.measure(ctx, params):
            yield row
            if ctx.repetition == 1:
                raise KeyboardInterrupt

    return dataclasses.replace(experiment, measure=measure)


def test_a_resumed_simulated_run_gives_the_uninterrupted_results(tmp_path):
    experiment = get("qd1-baseline")
    whole = run_experiment(experiment, "sim:consumer-tlc-dram", out=tmp_path / "whole", params=SMALL, repeat=2)
    cut = run_experiment(_interrupted_in_second_repetition(experiment), "sim:consumer-tlc-dram",
                         out=tmp_path / "cut", params=SMALL, repeat=2)
    assert isinstance(cut.error, Interrupted) and cut.conditions["repetitions_completed"] == 2  # 1 and a part
    resumed = run_experiment(experiment, "sim:consumer-tlc-dram", resume=tmp_path / "cut", params=SMALL, repeat=2)
    assert resumed.completed and "resumed after 1 of 2 repetition(s) completed" in resumed.conditions["notes"]
    a = pd.read_parquet(whole.directory / "raw" / "points.parquet")
    b = pd.read_parquet(resumed.directory / "raw" / "points.parquet")
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(whole.table, resumed.table)
    assert resumed.conditions["device_time_s"] == whole.conditions["device_time_s"]
    with pytest.raises(UsageError, match="all 2 repetitions .* completed; nothing to resume"):
        run_experiment(experiment, "sim:consumer-tlc-dram", resume=tmp_path / "cut", params=SMALL, repeat=2)


def test_resume_refuses_other_parameters_and_a_missing_checkpoint(tmp_path):
    experiment = get("qd1-baseline")
    run_experiment(_interrupted_in_second_repetition(experiment), "sim:consumer-tlc-dram", out=tmp_path / "cut",
                   params=SMALL, repeat=2)
    with pytest.raises(UsageError, match="other parameters or --repeat"):
        run_experiment(experiment, "sim:consumer-tlc-dram", resume=tmp_path / "cut", params=SMALL, repeat=3)
    with pytest.raises(UsageError, match="holds no checkpoint"):
        run_experiment(experiment, "sim:consumer-tlc-dram", resume=tmp_path / "elsewhere", params=SMALL)
    assert not (tmp_path / "elsewhere").exists()


def test_a_file_written_meanwhile_is_not_resumed(scratch):
    experiment = get("qd1-baseline")
    target = scratch / "t.img"
    params = {"span": "8MiB", "runtime": "20ms", "warmup": "0s"}
    cut = run_experiment(_interrupted_in_second_repetition(experiment), str(target), out=scratch / "cut",
                         params=params, repeat=2, size=8 * MiB, destructive=str(target))
    assert isinstance(cut.error, Interrupted)
    assert (cut.directory / "raw" / CHECKPOINT).exists()
    # Someone writes the first sampled block.
    fd = os.open(target, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\x5a" * SAMPLE_BYTES, 0)
    finally:
        os.close(fd)
    with pytest.raises(UsageError, match=r"was written since the run stopped \(1 of 64 sampled blocks changed\)"):
        run_experiment(experiment, str(target), resume=scratch / "cut", params=params, repeat=2,
                       destructive=str(target))


def test_a_file_not_written_meanwhile_is_resumed(scratch):
    experiment = get("qd1-baseline")
    target = scratch / "t.img"
    params = {"span": "8MiB", "runtime": "20ms", "warmup": "0s"}
    run_experiment(_interrupted_in_second_repetition(experiment), str(target), out=scratch / "cut",
                   params=params, repeat=2, size=8 * MiB, destructive=str(target))
    resumed = run_experiment(experiment, str(target), resume=scratch / "cut", params=params, repeat=2,
                             destructive=str(target))
    assert resumed.completed
    points = pd.read_parquet(resumed.directory / "raw" / "points.parquet")
    assert sorted(points["repetition"].unique()) == [0, 1]
    assert resumed.conditions["repetitions_completed"] == 2
    assert len({r["repetition"] for r in resumed.conditions["runs"]}) == 2
