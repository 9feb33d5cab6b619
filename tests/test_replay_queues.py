"""`ftlscope replay --queues N`: a trace split over several engine queues (round-robin in arrival order, or by a
column such as the process), each request still due at its recorded time from one start the queues share, the
per-request results merged into run's outputs. Simulated drives (virtual time: exact and deterministic) and a file
target (no wall-time assertions)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ftlscope.cli import main
from ftlscope.replay import split_queues
from ftlscope.traces import write_parquet

SIM = "sim:consumer-tlc-dram"
OPS = ["read", "write", "trim", "write_zeroes", "flush"]


def _trace(tmp_path, n=600, gap_ns=20_000, processes=3):
    rng = np.random.default_rng(11)
    frame = pd.DataFrame({
        "op": pd.Categorical(["write" if i % 4 == 0 else "read" for i in range(n)], categories=OPS),
        "offset_bytes": (rng.integers(0, 1 << 12, n) * 4096).astype(np.uint64),
        "size": np.full(n, 4096, dtype=np.uint32),
        # Bursts: several requests in one nanosecond, then gaps, so queues overlap in time.
        "submit_ns": (np.arange(n) // 3 * gap_ns + rng.integers(0, 3, n)).astype(np.uint64),
    })
    frame["submit_ns"] = np.maximum.accumulate(frame["submit_ns"].to_numpy()) - frame["submit_ns"].iloc[0]
    frame["process"] = pd.array([f"proc-{rng.integers(0, processes)}" for _ in range(n)], dtype="string")
    frame.attrs["ftlscope"] = {"format": "test", "synthetic": True}
    return write_parquet(frame, tmp_path / "t.parquet"), frame


def _replay(tmp_path, target, trace, *flags, name="r"):
    out_json, out_trace = tmp_path / f"{name}.json", tmp_path / f"{name}.parquet"
    code = main(["replay", target, str(trace), "--quiet", "--json", str(out_json), "--trace", str(out_trace),
                 *flags])
    assert code == 0
    return json.loads(out_json.read_text()), pd.read_parquet(out_trace)


def _in_arrival_order(replayed):
    # Requests due in the same nanosecond on different queues: their trace order is their offsets' order here
    # only by chance, so match by (submit time, queue, order within the queue).
    return replayed.sort_values(["submit_ns", "submit_seq"], kind="stable").reset_index(drop=True)


def test_round_robin_over_three_queues_keeps_every_arrival_on_a_simulated_drive(tmp_path):
    trace, frame = _trace(tmp_path)
    summary, replayed = _replay(tmp_path, SIM, trace, "--queues", "3", "--no-precondition")
    assert summary["replay"]["queues"] == 3 and summary["replay"]["split_by"] == "round-robin"
    assert summary["replay"]["queue_requests"] == [200, 200, 200]
    assert [q["issued"] for q in summary["run"]["queues"]] == [200, 200, 200]
    assert (summary["read"]["ops"], summary["write"]["ops"]) == (450, 150)
    # Open loop in virtual time: every request submitted exactly at its recorded arrival, whatever its queue.
    start = int(replayed["submit_ns"].min())
    for q in range(3):
        mine = replayed[replayed["queue"] == q].sort_values("submit_seq")
        expected = frame.iloc[q::3]
        assert ((mine["submit_ns"] - start).to_numpy() == expected["submit_ns"].to_numpy()).all(), q
        assert (mine["offset_bytes"].to_numpy() == expected["offset_bytes"].to_numpy()).all(), q
        assert (mine["op"].astype(str).to_numpy() == expected["op"].astype(str).to_numpy()).all(), q
    assert (replayed["issue_lag_ns"] == 0).all() and summary["run"]["issue_lag_ns"]["max"] == 0


def test_split_by_process_puts_each_process_on_one_queue(tmp_path, capsys):
    trace, frame = _trace(tmp_path, processes=3)
    summary, replayed = _replay(tmp_path, SIM, trace, "--queues", "2", "--split-by", "process", "--no-precondition")
    codes, names = pd.factorize(frame["process"])
    expected_queue = codes % 2
    assert summary["replay"]["queue_requests"] == [int((expected_queue == q).sum()) for q in range(2)]
    start = int(replayed["submit_ns"].min())
    for q in range(2):
        mine = replayed[replayed["queue"] == q].sort_values("submit_seq")
        expected = frame[expected_queue == q]
        assert ((mine["submit_ns"] - start).to_numpy() == expected["submit_ns"].to_numpy()).all(), q
        assert (mine["offset_bytes"].to_numpy() == expected["offset_bytes"].to_numpy()).all(), q
    # More queues than processes: the idle queues are said, and the replay still runs every request.
    summary, _ = _replay(tmp_path, SIM, trace, "--queues", "5", "--split-by", "process", "--no-precondition",
                         name="five")
    assert sorted(summary["replay"]["queue_requests"]) == [0, 0, *sorted(np.bincount(codes).tolist())]
    assert "2 of 5 queues have no requests" in capsys.readouterr().err


def test_an_afap_replay_on_two_queues_is_deterministic_and_shares_one_drive(tmp_path):
    trace, _ = _trace(tmp_path, n=900)
    flags = ("--queues", "2", "--timing", "afap", "--qd", "4", "--no-precondition")
    first, a = _replay(tmp_path, SIM, trace, *flags, name="a")
    second, b = _replay(tmp_path, SIM, trace, *flags, name="b")
    a, b = a.sort_values("submit_seq"), b.sort_values("submit_seq")
    for column in ("queue", "op", "offset_bytes", "submit_ns", "latency_ns"):
        assert (a[column].to_numpy() == b[column].to_numpy()).all(), column
    assert first["replay"]["mode"] == "closed" and first["replay"]["queue_requests"] == [450, 450]
    # One simulated drive under both queues: up to 2 x QD 4 in flight at once (one queue alone holds 4 at most).
    events = np.concatenate([np.stack([a["submit_ns"], np.ones(len(a))], 1),
                             np.stack([a["complete_ns"], -np.ones(len(a))], 1)])
    events = events[np.lexsort((events[:, 1], events[:, 0]))]
    assert 4 < np.cumsum(events[:, 1]).max() <= 8


def test_a_file_target_replays_every_request_once_on_its_queue(tmp_path):
    trace, frame = _trace(tmp_path, n=300, gap_ns=50_000)
    target = tmp_path / "target.img"
    summary, replayed = _replay(tmp_path, str(target), trace, "--queues", "2", "--timing", "scaled:10",
                                "--size", "64MiB", "--buffered", "--no-pin")
    assert summary["replay"]["queue_requests"] == [150, 150]
    assert len(replayed) == 300 and (replayed["status"] == replayed["size"]).all()  # bytes moved
    for q in range(2):
        mine = replayed[replayed["queue"] == q].sort_values("submit_seq")
        expected = frame.iloc[q::2]
        assert (mine["offset_bytes"].to_numpy() == expected["offset_bytes"].to_numpy()).all(), q
    # Each request's lag is its submission against its due time: never negative (no wall-time bound asserted).
    assert (replayed["issue_lag_ns"] >= 0).all() and summary["run"]["issue_lag_ns"]["min"] >= 0


@pytest.mark.parametrize(("flags", "needle"), [
    (["--queues", "0"], "--queues: 0 is out of range; give 1 to 256"),
    (["--queues", "2", "--split-by", "cpu"], "--split-by: the trace has no column 'cpu'"),
])
def test_bad_queue_flags_are_refused_in_one_line(tmp_path, capsys, flags, needle):
    trace, _ = _trace(tmp_path, n=30)
    out = tmp_path / "out.json"
    assert main(["replay", SIM, str(trace), "--quiet", "--json", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and not out.exists()


def test_split_rules():
    assert split_queues(None, 7, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    key = np.array(["b", "a", "b", None, "c", "a"], dtype=object)
    assert split_queues(key, 6, 2).tolist() == [0, 1, 0, 0, 1, 1]  # b, a, None, c by first appearance
