"""`replay --queues N` of a trace file streams: split by queue into one spill file each, then each queue fed from
its own (ftlscope.replay_split). The replay is the one the whole trace gives, request for request (simulated
drive, virtual time: open loop submits each request at its recorded time, afap is deterministic), across many
batch edges, split round-robin or by a column, with --sort and --reads-only; a bad line late in the trace is one
error before anything is written, and the spill directory is gone after every replay."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
from streamed_traces import refusal_without_hanging

import ftlscope.replay as replay_module
import ftlscope.replay_split as split_module
from ftlscope.cli import main
from ftlscope.replay import replay
from ftlscope.traces import read_trace, write_parquet

SIM = "sim:consumer-tlc-dram"
OPS = ["read", "write", "trim", "write_zeroes", "flush"]
COLUMNS = ("queue", "op", "offset_bytes", "size", "submit_ns", "latency_ns", "issue_lag_ns")
SUMMARY = ("requests", "trace_requests", "trace_span_ns", "left_out", "wrapped", "queues", "split_by",
           "queue_requests")


def _trace(tmp_path, n=4_000, seed=5, processes=("a", "b", "c", None)):
    """Reads and writes in bursts (several requests in one ns), a flush now and then, and a process column with
    missing values."""
    rng = np.random.default_rng(seed)
    ops = rng.choice(["read", "write"], size=n, p=[0.7, 0.3])
    ops[::601] = "flush"
    frame = pd.DataFrame({"op": pd.Categorical(ops, categories=OPS),
                          "offset_bytes": (rng.integers(0, 1 << 14, n) * 4096).astype(np.uint64),
                          "size": rng.choice([4096, 8192, 65536], n).astype(np.uint32),
                          "submit_ns": (np.arange(n) // 3 * 200_000 + rng.integers(0, 2, n)).astype(np.uint64)})
    frame["submit_ns"] = np.maximum.accumulate(frame["submit_ns"].to_numpy())
    frame.loc[frame["op"] == "flush", ["offset_bytes", "size"]] = 0
    frame["process"] = pd.array([processes[k] for k in rng.integers(0, len(processes), n)], dtype="string")
    frame.attrs["ftlscope"] = {"format": "test", "synthetic": False}
    return write_parquet(frame, tmp_path / "t.parquet"), frame


@pytest.fixture
def small_batches(monkeypatch):
    # 777-request batches read, 130 a queue per push (6 queues share them): hundreds of batch and chunk edges.
    monkeypatch.setattr(replay_module, "STREAM_BATCH_ROWS", 777)
    monkeypatch.setattr(split_module, "MIN_QUEUE_BATCH", 130)


def _both(path, whole_frame, **kwargs):
    """The replay of the trace read whole and of the file streamed, each request in (queue, submission) order."""
    runs = {name: replay(SIM, source, qd=4, trace=True, destructive=SIM, precondition=False, **kwargs)
            for name, source in (("whole", whole_frame), ("streamed", path))}
    assert runs["streamed"].summary["replay"]["streamed"] and not runs["whole"].summary["replay"]["streamed"]
    tables = {k: r.trace.sort_values(["queue", "submit_seq"], kind="stable").reset_index(drop=True)
              for k, r in runs.items()}
    return runs, tables


def _assert_same(runs, tables):
    assert len(tables["whole"]) == len(tables["streamed"]) > 0
    for column in COLUMNS:
        assert (tables["whole"][column].to_numpy() == tables["streamed"][column].to_numpy()).all(), column
    assert {k: runs["whole"].summary["replay"][k] for k in SUMMARY} == {
        k: runs["streamed"].summary["replay"][k] for k in SUMMARY}


@pytest.mark.parametrize("split_by", ["round-robin", "process"])
@pytest.mark.parametrize("timing", ["faithful", "afap"])
def test_a_split_replay_streams_what_the_whole_trace_gives_across_many_batch_edges(tmp_path, small_batches,
                                                                                   timing, split_by):
    path, frame = _trace(tmp_path)
    runs, tables = _both(path, read_trace(path), timing=timing, queues=6, split_by=split_by)
    _assert_same(runs, tables)
    streamed = tables["streamed"]
    assert sum(runs["streamed"].summary["replay"]["queue_requests"]) == len(frame)
    if split_by == "process":  # four values (one of them missing) on six queues: each on a queue of its own
        per_queue = streamed.groupby("queue").size()
        assert len(per_queue) == 4
    if timing == "faithful":  # open loop in virtual time: every request due at its recorded time, whatever its
        # queue, and submitted then, or late by exactly the issue lag it reports (a queue whose QD was full)
        start = int(streamed["submit_ns"].min())
        due = (streamed["submit_ns"] - streamed["issue_lag_ns"] - start).to_numpy()
        assert sorted(due.tolist()) == sorted((frame["submit_ns"] - frame["submit_ns"].min()).tolist())
        assert (streamed["issue_lag_ns"] == 0).mean() > 0.9


def test_queues_that_drift_far_apart_in_trace_order_do_not_wait_for_each_other(tmp_path, small_batches):
    # Process a's requests all come before process b's: queue 1's first request is thousands of requests (many
    # batches) into the trace. One window of chunks shared by the queues would deadlock the simulated drive's
    # single stepping thread here; a spill file per queue does not.
    path, frame = _trace(tmp_path, n=6_000)
    frame["process"] = pd.array(["a"] * 3_000 + ["b"] * 3_000, dtype="string")
    write_parquet(frame, path)
    done: list = []
    worker = threading.Thread(target=lambda: done.append(_both(path, read_trace(path), timing="afap", queues=2,
                                                               split_by="process")), daemon=True)
    worker.start()
    worker.join(timeout=300)
    assert not worker.is_alive(), "the split replay hung"
    _assert_same(*done[0])
    assert done[0][0]["streamed"].summary["replay"]["queue_requests"] == [3_000, 3_000]


def test_sort_and_reads_only_stream_over_queues_as_the_whole_read_replays(tmp_path, small_batches):
    path, frame = _trace(tmp_path, n=3_000)
    # A little disorder (a later request recorded first, within a batch): --sort fixes it in its window.
    submit = frame["submit_ns"].to_numpy().copy()
    submit[100::250], submit[101::250] = submit[101::250] + 7, submit[100::250]
    frame["submit_ns"] = submit
    write_parquet(frame, path)
    runs, tables = _both(path, read_trace(path, sort=True), timing="faithful", queues=3, sort=True)
    _assert_same(runs, tables)
    runs, tables = _both(path, read_trace(path, sort=True), timing="afap", queues=3, split_by="process", sort=True,
                         reads_only=True)
    _assert_same(runs, tables)
    assert (tables["streamed"]["op"] == "read").all()
    assert runs["streamed"].summary["replay"]["left_out"]["write (--reads-only)"] == int((frame["op"] == "write").sum())


def test_a_text_trace_split_by_its_column_streams_as_the_whole_read(tmp_path, small_batches):
    # MSR Cambridge CSV, split by DiskNumber (its own field name): each disk's requests on one queue.
    n = 2_000
    lines = [f"{128166372000000000 + 1000 * i},{'web' if i % 5 else 'prxy'},{(i * 7) % 3},"
             f"{'Read' if i % 3 else 'Write'},{4096 * (i % 1000)},4096,{100 + i}" for i in range(n)]
    path = tmp_path / "t.msr.csv"
    path.write_text("\n".join(lines) + "\n")
    runs, tables = _both(path, read_trace(path), timing="faithful", queues=3, split_by="DiskNumber")
    _assert_same(runs, tables)
    assert runs["streamed"].summary["replay"]["queue_requests"] == [667, 667, 666]


def _spill_dirs(root):
    return [p for p in root.rglob(".ftlscope-replay-split-*")]


def test_a_bad_line_late_in_a_split_trace_leaves_nothing_written(tmp_path, small_batches, capsys):
    n = 3_000
    lines = [f"{128166372000000000 + 1000 * i},web,{i % 2},Read,{4096 * (i % 1000)},4096,{100 + i}" for i in range(n)]
    lines[2_800] = "128166372002800000,web,0,Read,notanumber,4096,100"
    path = tmp_path / "t.msr.csv"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    code = main(["replay", SIM, str(path), "--quiet", "--queues", "2", "--split-by", "disk_number",
                 "--json", str(out / "r.json"), "--trace", str(out / "r.parquet")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "2801" in err and "Traceback" not in err, err
    assert list(out.iterdir()) == [] and _spill_dirs(tmp_path) == []
    # A request that does not fit the target late in a Parquet trace: the same.
    ppath, frame = _trace(tmp_path, n=3_000)
    frame.loc[2_900, ["op", "offset_bytes", "size"]] = ["read", 4096 * 3 + 100, 4096]  # unaligned
    write_parquet(frame, ppath)
    code = main(["replay", SIM, str(ppath), "--quiet", "--queues", "3", "--destructive", SIM,
                 "--json", str(out / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "request 2901" in err and "aligned" in err, err
    assert list(out.iterdir()) == [] and _spill_dirs(tmp_path) == []


def test_the_spill_directory_is_beside_the_outputs_and_gone_after_the_replay(tmp_path, small_batches, monkeypatch):
    path, _ = _trace(tmp_path, n=1_000)
    out = tmp_path / "out"
    out.mkdir()
    seen: list = []
    spill = split_module.spill_pass

    def watching(*args, **kwargs):
        notes, spilled = spill(*args, **kwargs)
        seen.append((spilled.directory, sorted(p.name for p in spilled.directory.iterdir())))
        return notes, spilled

    monkeypatch.setattr(split_module, "spill_pass", watching)
    code = main(["replay", SIM, str(path), "--quiet", "--queues", "3", "--destructive", SIM, "--no-precondition",
                 "--json", str(out / "r.json")])
    assert code == 0
    directory, files = seen[0]
    assert directory.parent == out and files == ["queue-0.bin", "queue-1.bin", "queue-2.bin"]
    assert not directory.exists() and sorted(p.name for p in out.iterdir()) == ["r.json"]


def test_a_split_replay_that_cannot_start_lets_every_feeder_go_and_removes_its_spill(tmp_path, small_batches):
    # Writes on a file target without --destructive: refused once the trace is split. Every queue's feeder waits
    # for room in its chunks; none may be left waiting (the replay would hang), and the spill files go.
    from ftlscope.errors import FtlscopeError

    path, _ = _trace(tmp_path, n=20_000)
    target = tmp_path / "disk.img"
    target.write_bytes(b"\0" * (1 << 20))
    spill = tmp_path / "spill"
    spill.mkdir()
    raised = refusal_without_hanging(
        lambda: replay(str(target), path, timing="afap", size=str(1 << 30), queues=3, spill_dir=spill))
    assert isinstance(raised, FtlscopeError) and "--destructive" in str(raised)
    assert list(spill.iterdir()) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("ftlscope-replay-feed")]
