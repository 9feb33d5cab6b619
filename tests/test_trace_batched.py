"""``trace info`` of a Parquet trace in record batches (ftlscope.traces.batched) gives the statistics of the whole
table: exact everywhere but the inter-arrival and latency percentiles, which are within 0.1 %."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ftlscope import from_flags, run
from ftlscope.cli import main
from ftlscope.traces import TraceError, batched, read_trace, synth, trace_stats, write_parquet
from ftlscope.traces.stats import working_set_blocks
from ftlscope.traces.window import Unsorted

PERCENTILES = {("interarrival_ns", "p50"), ("interarrival_ns", "p99"), ("latency_ns", "p50"), ("latency_ns", "p99")}


def _assert_same(whole: dict, streamed: dict, where: tuple = ()) -> None:
    if isinstance(whole, dict):
        assert whole.keys() == streamed.keys(), where
        for key in whole:
            _assert_same(whole[key], streamed[key], (*where, key))
    elif isinstance(whole, list):
        assert len(whole) == len(streamed), where
        for i, (a, b) in enumerate(zip(whole, streamed, strict=True)):
            _assert_same(a, b, (*where, i))
    elif where[-2:] in PERCENTILES:
        assert streamed == pytest.approx(whole, rel=1e-3), where
    elif isinstance(whole, float):
        assert streamed == pytest.approx(whole, rel=1e-9), where  # merged moments: float rounding only
    else:
        assert streamed == whole, where


@pytest.fixture(scope="module")
def run_trace(tmp_path_factory, state_home):
    """A mixed run at QD 16 with 4 KiB to 1 MiB requests: listed in completion order, so out of arrival order."""
    out = tmp_path_factory.mktemp("batched") / "run.parquet"
    workload = from_flags(rw="randrw", rwmixread=60, bs="4k,64k,1m", size="256MiB", ops=12_000, qd=16, seed=3)
    run("sim:optane-like", workload, trace_file=out, trace_chunk_rows=2_000)
    return out


def test_a_run_trace_read_in_batches_has_the_whole_tables_statistics(run_trace, monkeypatch):
    monkeypatch.setattr(batched, "_BLOCKS_PER_STEP", 5_000)  # 1 MiB requests: several expansion steps a batch
    whole = trace_stats(read_trace(run_trace, sort=True))
    streamed = batched.parquet_trace_stats(run_trace, sort=True, batch_rows=1_500)
    _assert_same(whole, streamed)
    assert streamed["requests"] == 12_000 and streamed["latency_ns"]["n"] == 12_000


def test_backwards_timestamps_without_sort_are_refused_as_the_whole_read_refuses_them(run_trace):
    with pytest.raises(TraceError) as whole:
        read_trace(run_trace)
    with pytest.raises(TraceError) as streamed:
        batched.parquet_trace_stats(run_trace, batch_rows=1_000)
    assert streamed.value.message == whole.value.message


def test_a_synthetic_trace_in_batches_keeps_its_label_and_statistics(tmp_path):
    frame = synth("db", 3_000_000_000, 5)
    path = write_parquet(frame, tmp_path / "db.parquet")
    streamed = batched.parquet_trace_stats(path, batch_rows=1_000)
    _assert_same(trace_stats(read_trace(path)), streamed)
    assert streamed["synthetic"] and streamed["workload"]["workload"] == "db"


def test_a_trace_too_out_of_order_for_the_window_is_read_whole(tmp_path, capsys):
    rng = np.random.default_rng(4)
    n = 5_000
    submit = np.arange(n, dtype=np.int64) * 1000
    submit[-1] = 5  # the last request arrived first: no sliding window of a batch can place it
    frame = pd.DataFrame({"op": pd.Categorical(rng.choice(["read", "write"], n), categories=["read", "write"]),
                          "offset_bytes": rng.integers(0, 1 << 20, n).astype(np.uint64) * 4096,
                          "size": np.full(n, 4096, dtype=np.uint32), "submit_ns": submit.astype(np.uint64)})
    path = tmp_path / "late.parquet"
    frame.to_parquet(path)
    with pytest.raises(Unsorted):
        batched.parquet_trace_stats(path, sort=True, batch_rows=1_000)
    out = tmp_path / "info.json"
    assert main(["trace", "info", str(path), "--sort", "--json", str(out)]) == 0
    assert json.loads(out.read_text()) == json.loads(json.dumps(trace_stats(read_trace(path, sort=True))))


def test_the_working_set_bitmap_counts_what_the_expansion_counts():
    rng = np.random.default_rng(9)
    offset = rng.integers(0, 1 << 30, 4_000)
    size = rng.choice([0, 512, 4096, 5000, 1 << 20], 4_000)
    bitmap = batched._BlockBitmap()
    for part in np.array_split(np.arange(4_000), 7):
        bitmap.add(offset[part], size[part])
    assert bitmap.blocks() == working_set_blocks(offset, size)


def test_a_trace_naming_processes_gets_the_same_breakdown_in_batches(tmp_path):
    # Regression (merge of capture and batched reading): Parquet traces went through the batched path, which
    # left out the per-process breakdown that captures carry.
    frame = synth("db", 2_000_000_000, 5)
    rng = np.random.default_rng(1)
    frame["process"] = pd.array(rng.choice(["postgres", "kworker/u8:2", "jbd2/loop0-8", None], len(frame)),
                                dtype="string")
    path = write_parquet(frame, tmp_path / "named.parquet")
    whole = trace_stats(read_trace(path))
    streamed = batched.parquet_trace_stats(path, batch_rows=700)
    assert "processes" in whole
    _assert_same(whole, streamed)


def test_a_run_traces_ties_come_in_submission_order_whole_and_in_batches(tmp_path):
    # Batches of 16 submitted in one nanosecond each: no timestamp goes backwards, but the rows (completion order)
    # list each batch's requests out of submission order, and batches of 7 rows cut through the ties.
    path = tmp_path / "batches.parquet"
    run("sim:consumer-tlc-dram", from_flags(rw="randrw", batch=16, ops=480, seed=2), trace_file=path)
    ran = pd.read_parquet(path)
    submitted = ran.sort_values("submit_seq")["offset_bytes"].to_numpy()
    assert not (ran["offset_bytes"].to_numpy() == submitted).all()
    assert (read_trace(path)["offset_bytes"].to_numpy() == submitted).all()
    streamed = np.concatenate([cols[1] for cols in batched.parquet_batches(path, batch_rows=7)])
    assert (streamed == submitted).all()
    _assert_same(trace_stats(read_trace(path)), batched.parquet_trace_stats(path, batch_rows=7))
