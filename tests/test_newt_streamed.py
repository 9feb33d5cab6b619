"""`ftlscope newt` streams its trace in both passes (issue 17): the file is checked and fed in batches as `replay`
streams it, its reads aligned batch by batch in the second pass, and the range both passes precondition found in
a batched pass; every figure is what the trace read whole gives. Simulated drive, virtual time: deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ftlscope.replay as replay_module
from ftlscope.newt.align import Alignment, align_reads
from ftlscope.newt.measure import Plan, measure, trace_extent
from ftlscope.traces import read_trace, write_parquet
from ftlscope.workload import OPS

SIM = "sim:kelpie-n1t-i"
KIB = 1024
COLUMNS = ("op", "offset_bytes", "size", "submit_ns", "latency_ns", "issue_lag_ns")


def _trace(tmp_path, n=1_200, seed=7):
    """Unaligned reads and writes in 32 MiB, a flush now and then, one every 100 µs."""
    rng = np.random.default_rng(seed)
    ops = rng.choice(["read", "write"], size=n, p=[0.7, 0.3])
    ops[::301] = "flush"
    frame = pd.DataFrame({"op": pd.Categorical(ops, categories=OPS),
                          "offset_bytes": (rng.integers(8, (32 << 20) // 512, n) * 512).astype(np.uint64),
                          "size": (rng.integers(1, 24, n) * 512).astype(np.uint32),
                          "submit_ns": (np.arange(n) * 100_000).astype(np.uint64)})
    frame.loc[frame["op"] == "flush", ["offset_bytes", "size"]] = 0
    frame.attrs["ftlscope"] = {"format": "test", "synthetic": False}
    return write_parquet(frame, tmp_path / "t.parquet")


def _old_extent(frames):
    """The range newt preconditioned before it streamed: both frames' reads and writes, 4 KiB boundaries."""
    starts, ends = [], []
    for frame in frames:
        ranged = (frame["op"] != "flush").to_numpy() & (frame["size"].to_numpy() > 0)
        offset = frame["offset_bytes"].to_numpy()[ranged].astype(np.int64)
        starts.append(offset.min())
        ends.append((offset + frame["size"].to_numpy()[ranged].astype(np.int64)).max())
    return int(min(starts)) // 4096 * 4096, -(-int(max(ends)) // 4096) * 4096


@pytest.mark.parametrize("alignment", [Alignment(4096), Alignment(16 * KIB, ((17 * KIB, 20 * KIB),))])
def test_the_extent_read_in_batches_is_the_whole_traces(tmp_path, alignment):
    path = _trace(tmp_path)
    frame = read_trace(path)
    aligned, _ = align_reads(frame, alignment)
    assert trace_extent(path, alignment, fmt="parquet") == trace_extent(frame, alignment) == (
        _old_extent([frame, aligned]), True)
    assert trace_extent(path, None)[0] == _old_extent([frame])


def test_both_passes_streamed_measure_what_the_whole_trace_measures(tmp_path, monkeypatch):
    monkeypatch.setattr(replay_module, "STREAM_BATCH_ROWS", 250)  # a few batch edges per pass
    path = _trace(tmp_path)
    frame = read_trace(path)
    plan = Plan(alignment=Alignment(4096))
    kwargs = {"timing": "faithful", "qd": 8, "trace_name": "t"}
    whole = measure(SIM, frame, plan, **kwargs)
    streamed = measure(SIM, path, plan, fmt="parquet", **kwargs)
    _, stats = align_reads(frame, plan.alignment)
    assert streamed.align_stats == whole.align_stats == stats and stats.changed > 0
    assert streamed.precondition == whole.precondition
    assert streamed.precondition["range"] == list(_old_extent([frame, align_reads(frame, plan.alignment)[0]]))
    for when in ("before", "after"):
        got, want = getattr(streamed, when), getattr(whole, when)
        assert got.summary["replay"]["streamed"] and not want.summary["replay"]["streamed"]
        for op in ("read", "write"):
            assert got.summary[op]["lat_ns"] == want.summary[op]["lat_ns"], (when, op)
        tables = [r.trace.sort_values("submit_seq", kind="stable").reset_index(drop=True) for r in (got, want)]
        for column in COLUMNS:
            assert (tables[0][column].to_numpy() == tables[1][column].to_numpy()).all(), (when, column)
