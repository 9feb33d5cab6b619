"""`replay --align-reads` aligns each batch of a streamed trace as it reads it: the requests replayed, their times
and latencies, and the align counts are those of the whole trace aligned before the replay (issue 17: traces of
any length in flat memory). Simulated drive, virtual time: every figure is deterministic."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import ftlscope.replay as replay_module
import ftlscope.replay_split as split_module
from ftlscope.cli import main
from ftlscope.errors import UsageError
from ftlscope.newt.align import Alignment, align_reads
from ftlscope.replay import replay
from ftlscope.traces import write_parquet
from ftlscope.workload import OPS

SIM = "sim:kelpie-n1t-i"
KIB = 1024
COLUMNS = ("op", "offset_bytes", "size", "submit_ns", "latency_ns", "issue_lag_ns")


def _trace(tmp_path, n=3_000, seed=11):
    """Reads of 512 B multiples at 512 B offsets (most not page-aligned), writes, a flush now and then, zero-length
    reads (left out), arrivals 50 µs apart."""
    rng = np.random.default_rng(seed)
    ops = rng.choice(["read", "write"], size=n, p=[0.75, 0.25])
    ops[::401] = "flush"
    sizes = rng.integers(1, 40, n) * 512
    sizes[::97] = 0
    frame = pd.DataFrame({"op": pd.Categorical(ops, categories=OPS),
                          "offset_bytes": (rng.integers(0, 1 << 16, n) * 512).astype(np.uint64),
                          "size": sizes.astype(np.uint32),
                          "submit_ns": (np.arange(n) * 50_000).astype(np.uint64)})
    frame.loc[frame["op"] == "flush", ["offset_bytes", "size"]] = 0
    frame.attrs["ftlscope"] = {"format": "test", "synthetic": False}
    return write_parquet(frame, tmp_path / "t.parquet"), frame


@pytest.fixture
def small_batches(monkeypatch):
    # 333-request batches: the trace crosses many batch edges, and the split's queues take 100 a push.
    monkeypatch.setattr(replay_module, "STREAM_BATCH_ROWS", 333)
    monkeypatch.setattr(split_module, "MIN_QUEUE_BATCH", 100)


@pytest.mark.parametrize("alignment", [Alignment(4096), Alignment(4096, ((17 * KIB, 20 * KIB),), whole_pages=False),
                                       Alignment(16 * KIB, ((33 * KIB, 36 * KIB),))])
@pytest.mark.parametrize(("queues", "reads_only"), [(1, False), (3, False), (1, True)])
def test_reads_aligned_batch_by_batch_replay_as_the_whole_trace_aligned_first(tmp_path, small_batches, alignment,
                                                                              queues, reads_only):
    path, frame = _trace(tmp_path)
    aligned, stats = align_reads(frame, alignment)
    kwargs = {"qd": 4, "trace": True, "destructive": SIM, "precondition": False, "queues": queues,
              "reads_only": reads_only, "timing": "afap" if queues == 1 else "faithful"}
    whole = replay(SIM, aligned, **kwargs)
    streamed = replay(SIM, path, align_reads=alignment, **kwargs)
    assert streamed.summary["replay"]["streamed"] and not whole.summary["replay"]["streamed"]
    tables = [r.trace.sort_values(["queue", "submit_seq"], kind="stable").reset_index(drop=True)
              for r in (whole, streamed)]
    assert len(tables[0]) == len(tables[1]) > 0
    for column in COLUMNS:
        assert (tables[0][column].to_numpy() == tables[1][column].to_numpy()).all(), column
    # The align counts are identical, and those of the whole trace's transform.
    assert streamed.summary["replay"]["aligned_reads"] == whole.summary["replay"]["aligned_reads"] == {
        **alignment.to_json(), **stats.to_json()}
    for key in ("requests", "trace_requests", "left_out", "queue_requests"):
        assert streamed.summary["replay"][key] == whole.summary["replay"][key], key


def test_a_read_grown_past_the_largest_request_is_named_by_its_number_in_the_trace(tmp_path, small_batches):
    path, frame = _trace(tmp_path)
    # The only read, request 1,000 (in the fourth batch), grows to a page of 4 GiB.
    frame.loc[frame["op"] == "read", "op"] = "write"
    frame.loc[999, ["op", "size"]] = ["read", 4096]
    write_parquet(frame, path)
    with pytest.raises(UsageError, match=r"--align-reads: request 1000 would grow to 4,294,967,296 B"):
        replay(SIM, path, align_reads=Alignment(1 << 32), destructive=SIM, precondition=False)


def test_replay_align_reads_streams_the_trace_and_says_what_it_did(tmp_path, capsys):
    path, frame = _trace(tmp_path)
    out = tmp_path / "r.json"
    assert main(["replay", SIM, str(path), "--quiet", "--align-reads", "4k", "--timing", "afap", "--destructive",
                 SIM, "--json", str(out)]) == 0
    done = json.loads(out.read_text())["replay"]
    _, stats = align_reads(frame, Alignment(4096))
    assert done["streamed"] and done["aligned_reads"]["changed"] == stats.changed > 0
    assert f"--align-reads: {stats.describe()}" in capsys.readouterr().err.replace("\n", " ")
