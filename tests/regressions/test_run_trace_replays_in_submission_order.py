"""A run trace lists its requests in completion order, and a simulated drive submits a whole batch in one
nanosecond: before the trace had ``submit_seq``, replay ordered such ties by completion, so an afap replay issued
them in another order than the run (with one command processor serving reads in arrival order, latencies then
differed). The run's submission order now travels in the trace and replay issues in it."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq

from ftlscope.cli import main
from ftlscope.metrics import SUBMIT_SEQ

SIM = "sim:consumer-tlc-dram"
KEY = ["op", "offset_bytes", "size"]


def _replay_order(tmp_path, trace, name):
    out = tmp_path / f"{name}-replayed.parquet"  # not the trace itself ("without.parquet" once was: now refused)
    assert main(["replay", SIM, str(trace), "--quiet", "--timing", "afap", "--qd", "32", "--no-precondition",
                 "--destructive", SIM, "--trace", str(out)]) == 0
    return pd.read_parquet(out).sort_values(SUBMIT_SEQ)[KEY].reset_index(drop=True)


def test_an_afap_replay_issues_same_nanosecond_requests_in_the_runs_order(tmp_path):
    run_trace = tmp_path / "run.parquet"
    # Batches of 32 random reads and writes, each submitted in one nanosecond, completing in another order.
    assert main(["run", SIM, "--rw", "randrw", "--batch", "32", "--ops", "1024", "--no-precondition", "--quiet",
                 "--trace", str(run_trace)]) == 0
    ran = pd.read_parquet(run_trace)
    assert sorted(ran[SUBMIT_SEQ]) == list(range(1024))
    assert ran["submit_ns"].value_counts().max() == 32  # a batch's requests share their submission time
    in_run_order = ran.sort_values(SUBMIT_SEQ)[KEY].reset_index(drop=True)
    in_completion_order = ran.sort_values("submit_ns", kind="stable")[KEY].reset_index(drop=True)
    assert not in_run_order.equals(in_completion_order)  # the ties are out of order in the file
    pd.testing.assert_frame_equal(_replay_order(tmp_path, run_trace, "replayed"), in_run_order)
    # Without the column the same trace replays its ties in completion order: the column is what fixes it.
    without = tmp_path / "without.parquet"
    table = pq.read_table(run_trace)
    pq.write_table(table.drop_columns([SUBMIT_SEQ]), without)
    pd.testing.assert_frame_equal(_replay_order(tmp_path, without, "without"), in_completion_order)
