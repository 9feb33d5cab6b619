"""`--engine psync-pool`: psync's blocking calls made by a worker thread per slot, so the queue's thread only hands
requests off (the issue lag of a replay on a synchronous target no longer waits for the read before it). On a
file target: the data written and read back is right, and a replay keeps its queue depth (plain psync replays one
request at a time). No wall-time assertions."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ftlscope.cli import main
from ftlscope.traces import write_parquet


def test_a_verified_run_through_the_pool_reads_back_every_write(tmp_path):
    out = tmp_path / "v.json"
    assert main(["run", str(tmp_path / "v.img"), "--size", "16MiB", "--rw", "randrw", "--qd", "8", "--ops", "2000",
                 "--verify", "--engine", "psync-pool", "--quiet", "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    engine, verify = summary["env"]["engine"], summary["verify"]
    assert (engine["backend"], engine["queue_depth"]) == ("psync-pool", 8)
    assert verify["ok"] > 0 and verify["mismatches_total"] == 0 and verify["corrupt"] == 0
    assert all(verify[k]["sectors"] == 0 for k in ("torn", "stale", "misdirected"))


def test_a_replay_through_the_pool_keeps_its_queue_depth(tmp_path):
    n = 400
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({
        "op": pd.Categorical(["read"] * n, categories=["read", "write", "trim", "write_zeroes", "flush"]),
        "offset_bytes": (rng.integers(0, 1 << 12, n) * 4096).astype(np.uint64),
        "size": np.full(n, 4096, dtype=np.uint32),
        "submit_ns": np.zeros(n, dtype=np.uint64),  # all due at once: up to --qd in flight
    })
    frame.attrs["ftlscope"] = {"format": "test"}
    trace = write_parquet(frame, tmp_path / "t.parquet")
    out, out_trace = tmp_path / "r.json", tmp_path / "r.parquet"
    assert main(["replay", str(tmp_path / "f.img"), str(trace), "--size", "16MiB", "--engine", "psync-pool",
                 "--qd", "4", "--queues", "2", "--quiet", "--json", str(out), "--trace", str(out_trace)]) == 0
    summary = json.loads(out.read_text())
    assert summary["env"]["engine"]["backend"] == "psync-pool" and summary["env"]["engine"]["queue_depth"] == 4
    assert not any("effective queue depth 1" in n for n in summary["env"]["engine"]["notices"])
    replayed = pd.read_parquet(out_trace)
    assert len(replayed) == n and (replayed["status"] == 4096).all()
    assert sorted(replayed["offset_bytes"].tolist()) == sorted(frame["offset_bytes"].tolist())
    assert summary["replay"]["queue_requests"] == [200, 200] and (replayed["issue_lag_ns"] >= 0).all()
