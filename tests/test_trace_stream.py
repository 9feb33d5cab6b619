"""``run --trace FILE`` streams the trace to Parquet row groups while the run goes (ftlscope.trace_stream): the file
equals the in-memory trace of the same seeded run, schema and metadata included; an interrupted run and a disk
that fills up mid-run still leave a whole, readable file."""

from __future__ import annotations

import errno
import json
import signal
import tempfile
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest

from ftlscope import from_flags, run
from ftlscope import trace_stream as ts
from ftlscope.cli_checks import save_run_outputs
from ftlscope.errors import RunError

SIM = "sim:optane-like"


def _workload():
    return from_flags(rw="randrw", rwmixread=70, size="32MiB", ops=9_000, qd=8, seed=11)


@pytest.fixture(scope="module")
def streamed(tmp_path_factory, state_home):
    out = tmp_path_factory.mktemp("stream") / "t.parquet"
    result = run(SIM, _workload(), trace=True, trace_file=out, trace_chunk_rows=1_000)
    return result, out


def test_a_streamed_trace_is_several_row_groups_equal_to_the_in_memory_trace(streamed):
    result, out = streamed
    meta = pq.ParquetFile(out).metadata
    assert meta.num_rows == len(result.trace) == 9_000
    assert meta.num_row_groups == 9
    assert result.streamed_trace.rows == 9_000 and result.streamed_trace.row_groups == 9
    pd.testing.assert_frame_equal(pd.read_parquet(out), result.trace)


def test_a_streamed_trace_has_the_schema_and_metadata_of_one_written_at_the_end(streamed, tmp_path):
    result, out = streamed
    whole = tmp_path / "whole.parquet"
    result.trace.to_parquet(whole, compression="zstd", index=False)  # how traces were written before streaming
    assert pq.read_schema(out).equals(pq.read_schema(whole), check_metadata=True)


def test_the_same_seeded_run_streams_the_same_file_contents(streamed, tmp_path):
    _, out = streamed
    again = tmp_path / "again.parquet"
    run(SIM, _workload(), trace_file=again, trace_chunk_rows=4_096)
    pd.testing.assert_frame_equal(pd.read_parquet(again), pd.read_parquet(out))


def test_a_run_that_only_streams_keeps_no_trace_in_memory(streamed, tmp_path):
    result = run(SIM, _workload(), trace_file=tmp_path / "t.parquet")
    assert result.trace.empty
    assert result.save_trace(tmp_path / "t.parquet") == tmp_path / "t.parquet"
    copy = result.save_trace(tmp_path / "copy.parquet")  # elsewhere (a kept directory): a copy
    pd.testing.assert_frame_equal(pd.read_parquet(copy), pd.read_parquet(tmp_path / "t.parquet"))


class _FillsUp:
    """A file that takes ``room`` bytes and then fails as a full disk does."""

    def __init__(self, raw, room: int) -> None:
        self._raw, self._room = raw, room

    def write(self, data) -> int:
        if self._room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = self._raw.write(bytes(data)[:self._room])
        self._room -= n
        return n

    def close(self) -> None:
        self._raw.close()


def test_a_disk_that_fills_up_mid_run_moves_the_whole_trace_to_a_kept_directory(tmp_path, monkeypatch, streamed):
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    original = ts._FailoverFile.__init__

    def small_disk(self, path):
        original(self, path)
        self._file = _FillsUp(self._file, 20_000)  # a few row groups in

    monkeypatch.setattr(ts._FailoverFile, "__init__", small_disk)
    out = tmp_path / "t.parquet"
    result = run(SIM, _workload(), trace=True, trace_file=out, trace_chunk_rows=1_000)
    stream = result.streamed_trace
    assert stream.failure.errno == errno.ENOSPC and stream.row_groups == 9
    assert not out.exists(), "a trace without its footer is left behind"
    kept = stream.kept_dir
    assert kept.parent == tmp_path / "tmp" and kept.name.startswith("ftlscope-kept-")
    pd.testing.assert_frame_equal(pd.read_parquet(kept / "t.parquet"), result.trace)
    # At the end the other outputs join it there: one error naming the trace, exit 1 (RunError).
    with pytest.raises(RunError) as exc:
        save_run_outputs(result, json=str(tmp_path / "r.json"), trace=str(out), windows=None)
    assert "t.parquet" in exc.value.message and f"kept in {kept}/" in exc.value.message
    assert "No space left" in exc.value.message
    assert json.loads((kept / "r.json").read_text())["run"]["stop"]["reason"] == "completed"


def test_an_interrupted_run_leaves_a_readable_trace_of_everything_measured(spawn, scratch):
    trace, summary = scratch / "t.parquet", scratch / "r.json"
    proc = spawn("run", "sim:consumer-tlc-dram", "--runtime", "1h", "--no-precondition", "--trace", trace,
                 "--json", summary, "--quiet")
    try:
        deadline = time.monotonic() + 60
        # The first row group lands while the run goes: the trace is being written, not kept for the end.
        while not (trace.exists() and trace.stat().st_size > 100_000):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    measured = json.loads(summary.read_text())["read"]["ops"]
    meta = pq.ParquetFile(trace).metadata
    assert meta.num_row_groups >= 2
    assert meta.num_rows == measured > 0


def test_a_writer_that_breaks_neither_hangs_the_run_nor_loses_the_other_outputs(tmp_path, monkeypatch, streamed):
    calls = []
    original = ts.chunk_table

    def breaks_on_the_third(columns, schema):
        calls.append(1)
        if len(calls) == 3:
            raise ValueError("a broken conversion")
        return original(columns, schema)

    monkeypatch.setattr(ts, "chunk_table", breaks_on_the_third)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = tmp_path / "t.parquet"
    result = run(SIM, _workload(), trace_file=out, trace_chunk_rows=1_000)
    assert result.summary["read"]["ops"] + result.summary["write"]["ops"] == 9_000  # the run went on to its end
    assert isinstance(result.streamed_trace.error, ValueError)
    assert not out.exists(), "a trace without its footer is left behind"
    with pytest.raises(RunError) as exc:
        save_run_outputs(result, json=str(tmp_path / "r.json"), trace=str(out), windows=None)
    kept = next(tmp_path.glob("ftlscope-kept-*"))
    assert "not kept: t.parquet: the trace could not be written: a broken conversion" in exc.value.message
    assert f"kept in {kept}/ (r.json)" in exc.value.message
    assert (kept / "r.json").is_file()


def test_a_streamed_replay_trace_carries_its_issue_lag(tmp_path, state_home):
    # Regression (merge of streaming and replay): the streamed writer takes the engine's columns generically,
    # so a replay's optional issue_lag_ns column reaches the file, and a plain run's file has none.
    import pyarrow.parquet as pq

    from ftlscope import from_flags, run
    from ftlscope.replay import replay
    from ftlscope.traces import synth

    plain = tmp_path / "plain.parquet"
    run("sim:optane-like", from_flags(rw="randread", ops=3000, size="64MiB"), trace_file=plain,
        trace_chunk_rows=1000)
    assert "issue_lag_ns" not in pq.read_schema(plain).names
    trace = synth("db", 500_000_000, 3)
    replayed = tmp_path / "replayed.parquet"
    result = replay("sim:optane-like", trace, wrap=True, trace_file=replayed, trace_chunk_rows=200)
    frame = pq.read_table(replayed).to_pandas()
    assert len(frame) == result.summary["replay"]["requests"] > 200  # several row groups
    assert pq.ParquetFile(replayed).num_row_groups > 1
    assert (frame["issue_lag_ns"] == 0).all()  # open loop on a simulated drive: every request on time
