"""blkparse output read a chunk of lines at a time: the requests (Q, D and C events paired by device and sector,
far apart in the file) come out by arrival through the sort window, the batches put together are the table the
whole read makes, errors name their line across chunks, and `trace convert`, `trace info` and `replay` give what
the whole read gives, in memory flat in the trace's length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamed_traces import assert_streamed_replay_equals_whole, peak_python_memory

from ftlscope.cli import main
from ftlscope.traces import TraceError, blkparse, convert, read_trace
from ftlscope.traces.streamed import text_frames
from ftlscope.traces.window import Unsorted

FIX = Path(__file__).parent / "fixtures" / "traces"


@pytest.fixture
def small_chunks(monkeypatch):
    """About 250 lines of text per chunk: every trace below crosses many chunk edges."""
    monkeypatch.setattr(blkparse, "CHUNK_BYTES", 16 << 10)


def _stamp(t: int) -> str:
    return f"{t // 1_000_000_000}.{t % 1_000_000_000:09d}"


def _blkparse(path: Path, n: int, *, seed: int = 1, lost: tuple[int, ...] = ()) -> tuple[Path, pd.DataFrame]:
    """blkparse output of ``n`` requests (Q, G, I, D, C each; completions out of order; every 40th a flush, every
    7th followed by a bio merged into it, some message lines and blank lines, the closing summary) and the
    requests it holds, by construction: (op, offset, size, arrival, completion, process) by arrival. The C
    events of the requests numbered in ``lost`` are left out."""
    rng = np.random.default_rng(seed)
    sectors = (rng.permutation(1 << 16)[:n] + 1) * 64  # distinct, never 0 (a flush's key)
    events: list[tuple[int, int, str]] = []  # (time, order, text after the time)
    expected = []
    t = 1_000_000_000
    for i in range(n):
        t += int(rng.integers(1, 3_000))
        process = f"proc{i % 3}"
        if i % 40 == 39:
            events += [(t, 0, f"{i}  Q FWS [{process}]"), (t + 1, 0, f"{i}  D  FN [{process}]"),
                       (t + 2, 0, "0  C  FN [0]")]
            expected.append(("flush", 0, 0, t, None, process))
            continue
        sector, nsect = int(sectors[i]), int(rng.choice([8, 16, 256]))
        rwbs, op = [("R", "read"), ("WS", "write"), ("D", "trim")][i % 3]
        issue = t + int(rng.integers(0, 5_000))
        complete = issue + int(rng.integers(1_000, 200_000))
        events += [(t, 0, f"{i}  Q {rwbs:>3} {sector} + {nsect} [{process}]"),
                   (t, 1, f"{i}  G {rwbs:>3} {sector} + {nsect} [{process}]"),
                   (t + 1, 0, f"{i}  I {rwbs:>3} {sector} + {nsect} [{process}]"),
                   (issue + 1, 0, f"{i}  D {rwbs:>3} {sector} + {nsect} [{process}]")]
        if i % 7 == 0:  # a bio queued after it and merged into it: no request of its own
            events += [(t + 1, 1, f"{i}  Q {rwbs:>3} {sector + nsect} + 8 [{process}]"),
                       (t + 1, 2, f"{i}  M {rwbs:>3} {sector + nsect} + 8 [{process}]")]
        if i not in lost:
            events.append((complete + 1, 0, f"0  C {rwbs:>3} {sector} + {nsect} [0]"))
        if i % 11 == 0:
            events.append((t + 1, 3, f"{i}  m   N cfq{i}S / insert_request"))
        expected.append((op, sector * 512, nsect * 512, t, None if i in lost else complete + 1, process))
    events.sort()
    lines = []
    for k, (when, _, text) in enumerate(events):
        lines.append(f"  8,0    {k % 2}  {k + 1:>8}  {_stamp(when)}  {text}")
        if k % 97 == 0:
            lines.append("")
    lines += ["CPU0 (8,0):", " Reads Queued:           2,       12KiB  Writes Queued:           1,        4KiB"]
    path.write_text("\n".join(lines) + "\n")
    table = pd.DataFrame(expected, columns=["op", "offset_bytes", "size", "arrival", "complete", "process"])
    return path, table.sort_values("arrival", kind="stable").reset_index(drop=True)


def _joined(path: Path, **kwargs) -> pd.DataFrame:
    frames = list(text_frames(path, "blkparse", **kwargs))
    joined = pd.concat(frames, ignore_index=True)
    joined.attrs = frames[0].attrs
    return joined


def _as_whole(joined: pd.DataFrame, whole: pd.DataFrame) -> pd.DataFrame:
    """The batches' table with the whole read's column types (batches keep completions nullable: they cannot
    know whether every request of the trace completes)."""
    if "complete_ns" not in whole:
        assert joined["complete_ns"].isna().all()
        joined = joined.drop(columns=["complete_ns", "latency_ns"])
    return joined.astype(whole.dtypes.to_dict())


def test_the_whole_read_pairs_the_events_as_generated(tmp_path, small_chunks):
    path, expected = _blkparse(tmp_path / "b.txt", 400, lost=(5,))
    t = read_trace(path)
    origin = expected["arrival"].iloc[0]
    assert list(t["op"]) == list(expected["op"])
    assert list(t["offset_bytes"]) == list(expected["offset_bytes"])
    assert list(t["size"]) == list(expected["size"])
    assert list(t["submit_ns"]) == list(expected["arrival"] - origin)
    complete = [None if pd.isna(c) else int(c) - origin for c in expected["complete"]]
    assert [None if pd.isna(c) else int(c) for c in t["complete_ns"]] == complete
    assert list(t["process"]) == list(expected["process"])


@pytest.mark.parametrize("name", ["blkparse.txt", "blkparse_misc.txt", "generated"])
def test_the_batches_make_the_table_the_whole_read_makes(tmp_path, small_chunks, name):
    path = _blkparse(tmp_path / "b.txt", 600)[0] if name == "generated" else FIX / name
    whole = read_trace(path)
    for batch_rows in (1, 7, 64, 1_000):
        joined = _joined(path, batch_rows=batch_rows)
        pd.testing.assert_frame_equal(_as_whole(joined, whole), whole)
        assert joined.attrs == whole.attrs


def test_a_request_whose_completion_never_comes_is_read_whole(tmp_path, small_chunks, monkeypatch, capsys):
    """It holds back every later request: past a limit the stream gives up (Unsorted) and each caller reads the
    trace whole, with the same result."""
    from ftlscope.traces import streamed

    path, _ = _blkparse(tmp_path / "b.txt", 600, lost=(3,))
    pd.testing.assert_frame_equal(_joined(path, batch_rows=16), _joined(path, batch_rows=1_000))
    monkeypatch.setattr(streamed, "BLKPARSE_WAITING", 200)
    with pytest.raises(Unsorted):
        _joined(path, batch_rows=16)
    whole = read_trace(path)
    assert pd.isna(whole["complete_ns"][3]) and whole["complete_ns"].notna().sum() == 600 - 1 - 600 // 40
    out = tmp_path / "out.parquet"
    assert main(["trace", "convert", str(path), "--to", "parquet", "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(read_trace(out), read_trace(convert(whole, "parquet", tmp_path / "w.parquet")))


def test_a_merged_bio_lends_no_arrival_to_a_later_request_at_its_sector(tmp_path):
    """A bio queued and merged into another request (Q then M) is no request; its Q used to stay queued and a
    request at that sector much later took its time as arrival (out of order by seconds)."""
    path = tmp_path / "b.txt"
    path.write_text("\n".join([
        "  8,0    1        1     0.000000000  42  Q  WS 2048 + 8 [git]",
        "  8,0    1        2     0.000001000  42  Q  WS 2056 + 8 [git]",
        "  8,0    1        3     0.000002000  42  M  WS 2056 + 8 [git]",
        "  8,0    1        4     0.000004000  42  D  WS 2048 + 16 [git]",
        "  8,0    0        5     0.000100000   0  C  WS 2048 + 16 [0]",
        "  8,0    1        6     5.000000000  42  Q  WS 2056 + 8 [git]",
        "  8,0    1        7     5.000002000  42  D  WS 2056 + 8 [git]",
        "  8,0    0        8     5.000050000   0  C  WS 2056 + 8 [0]",
    ]) + "\n")
    t = read_trace(path)
    assert list(t["offset_bytes"]) == [2048 * 512, 2056 * 512]
    assert list(t["submit_ns"]) == [0, 5_000_000_000]  # its own Q, not the merged bio's at 1 us
    assert list(t["latency_ns"]) == [100_000, 50_000]


def test_a_malformed_line_is_named_across_chunks(tmp_path, small_chunks):
    path, _ = _blkparse(tmp_path / "b.txt", 300)
    lines = path.read_text().splitlines(keepends=True)
    target = next(k for k in range(700, len(lines)) if lines[k].split()[5:6] == ["D"])
    for broken, what in ((lines[target].replace(".", ":", 1), "cannot read"),
                         (lines[target].split(" + ")[0].rsplit(" ", 1)[0] + " [git]\n", "D event without")):
        path.write_text("".join([*lines[:target], broken, *lines[target + 1:]]))
        with pytest.raises(TraceError) as whole:
            read_trace(path)
        with pytest.raises(TraceError) as streamed:
            _joined(path, batch_rows=16)
        assert str(streamed.value) == str(whole.value)
        assert f"b.txt:{target + 1}: {what}" in str(whole.value)


def test_convert_and_info_in_batches_give_what_the_whole_read_gives(tmp_path, small_chunks, capsys):
    from ftlscope.traces.batched import batched_trace_stats
    from ftlscope.traces.cli import info_stats
    from ftlscope.traces.stats import trace_stats
    from ftlscope.traces.writers import convert_frames

    path, _ = _blkparse(tmp_path / "b.txt", 1_000)
    whole = read_trace(path)
    for to in ("parquet", "fio"):
        expected = convert(whole, to, tmp_path / f"whole.{to}")
        out = tmp_path / f"out.{to}"
        assert main(["trace", "convert", str(path), "--to", to, "--out", str(out)]) == 0
        small = convert_frames(text_frames(path, "blkparse", batch_rows=64), to, tmp_path / f"small.{to}")[0]
        for written in (out, small):
            if to == "fio":
                assert written.read_text() == expected.read_text()
            else:
                pd.testing.assert_frame_equal(read_trace(written), read_trace(expected))
    reference = trace_stats(whole)
    for batched in (info_stats(str(path), None, False), batched_trace_stats(path, "blkparse", batch_rows=64)):
        for key in ("requests", "duration_s", "bytes", "mix", "size_histogram", "sequential_share",
                    "working_set_bytes", "offset_range", "format", "processes"):
            assert batched[key] == reference[key], key
        for key in ("interarrival_ns", "latency_ns"):  # merged moments; percentiles from a histogram: 0.1 %
            for stat in ("n", "mean", "p50", "p99", "cv"):
                assert batched[key][stat] == pytest.approx(reference[key][stat], rel=1e-3), (key, stat)


@pytest.mark.parametrize("timing", ["faithful", "afap"])
def test_a_streamed_blkparse_replay_gives_what_the_whole_trace_gives(tmp_path, monkeypatch, timing):
    import ftlscope.replay as replay_module

    path, _ = _blkparse(tmp_path / "b.txt", 1_500)
    monkeypatch.setattr(blkparse, "CHUNK_BYTES", 8192)
    monkeypatch.setattr(replay_module, "STREAM_BATCH_ROWS", 333)
    assert_streamed_replay_equals_whole(path, timing,
                                        ("requests", "trace_requests", "trace_span_ns", "format", "left_out"))


def test_reading_a_longer_trace_in_batches_takes_no_more_memory(tmp_path, monkeypatch):
    """Peak Python-side memory (the pairing's state, numpy and pandas arrays; pyarrow's buffers, one chunk of
    text at a time, are not seen) of reading a trace in batches, for a trace and one four times as long (2,500
    and 10,000 requests, about 14,000 and 56,000 lines), against the whole read of the longer one."""
    monkeypatch.setattr(blkparse, "CHUNK_BYTES", 64 << 10)  # ~1,000 lines a chunk
    short, long = _blkparse(tmp_path / "s.txt", 2_500, seed=2)[0], _blkparse(tmp_path / "l.txt", 10_000, seed=3)[0]

    def drain(path: Path) -> None:
        for _ in text_frames(path, "blkparse", batch_rows=500):
            pass

    peaks = {name: peak_python_memory(lambda p=p: drain(p)) for name, p in (("short", short), ("long", long))}
    whole = peak_python_memory(lambda: read_trace(long))
    assert peaks["long"] <= 1.25 * peaks["short"] + (1 << 20), peaks
    assert peaks["long"] * 3 < whole, (peaks, whole)
