"""Text traces (MSR, Alibaba and SNIA CSV; fio iologs) read in batches: the batches, put together, are the table
the whole read makes (times, order with --sort, errors naming file and line or request), and `trace convert`,
`trace info` and `replay` give what they give reading the trace whole, with memory flat in the trace's length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamed_traces import SIM, assert_streamed_replay_equals_whole, peak_python_memory

from ftlscope.cli import main
from ftlscope.traces import TraceError, convert, read_trace, readers
from ftlscope.traces.streamed import text_frames
from ftlscope.traces.window import Unsorted

FIX = Path(__file__).parent / "fixtures" / "traces"


@pytest.fixture
def small_batches(monkeypatch):
    """About 40 CSV lines, or 37 iolog lines, per batch: every trace below crosses many batch edges."""
    monkeypatch.setattr(readers, "_BLOCK", 2048)
    monkeypatch.setattr(readers, "FIO_CHUNK_LINES", 37)


def _msr(path: Path, n: int, *, seed: int = 1, swaps: int = 0, every: int = 1) -> Path:
    """An MSR Cambridge CSV of ``n`` requests (4 KiB aligned); ``swaps`` adjacent pairs of timestamps swapped
    (disorder a sliding window fixes), ``every``: only every so many lines carry a ResponseTime above 1."""
    rng = np.random.default_rng(seed)
    ticks = 128166372000000000 + np.cumsum(rng.integers(1, 2_000, n))
    for i in rng.choice(n - 1, size=swaps, replace=False):
        ticks[i], ticks[i + 1] = ticks[i + 1], ticks[i]
    kind = np.where(rng.random(n) < 0.7, "Read", "Write")
    offset = rng.integers(0, 1 << 18, n) * 4096
    size = rng.choice([4096, 8192, 65536], n)
    response = rng.integers(100, 20_000, n)
    path.write_text("".join(f"{t},hm,1,{k},{o},{s},{r}\n"
                            for t, k, o, s, r in zip(ticks, kind, offset, size, response, strict=True)))
    return path


def _fio_v2(path: Path, n: int) -> Path:
    lines = ["fio version 2 iolog", "/dev/x add", "/dev/x open"]
    for i in range(n):
        lines.append(f"/dev/x {'read' if i % 3 else 'write'} {i * 4096} 4096")
        if i % 5 == 0:
            lines.append(f"/dev/x wait {10 + i}")
    lines.append("/dev/x close")
    path.write_text("\n".join(lines) + "\n")
    return path


def _joined(path: Path, fmt: str, **kwargs) -> pd.DataFrame:
    frames = list(text_frames(path, fmt, **kwargs))
    joined = pd.concat(frames, ignore_index=True)
    joined["op"] = pd.Categorical(joined["op"], categories=frames[0]["op"].cat.categories)
    joined.attrs = frames[0].attrs
    return joined


@pytest.mark.parametrize(("name", "fmt"), [("msr.csv", "msr"), ("alibaba.csv", "alibaba"), ("spc.csv", "spc"),
                                           ("fio_v3.log", "fio"), ("fio_v2.log", "fio"), ("gen-msr", "msr"),
                                           ("gen-fio-v2", "fio")])
def test_the_batches_make_the_table_the_whole_read_makes(tmp_path, small_batches, name, fmt):
    path = (_msr(tmp_path / "m.csv", 3_000) if name == "gen-msr" else _fio_v2(tmp_path / "f.log", 500)
            if name == "gen-fio-v2" else FIX / name)
    whole = read_trace(path, fmt)
    joined = _joined(path, fmt, batch_rows=64)
    pd.testing.assert_frame_equal(joined, whole)
    assert joined.attrs == whole.attrs


def test_sort_in_the_window_gives_the_whole_sort_and_without_it_the_same_refusal(tmp_path, small_batches):
    path = _msr(tmp_path / "m.csv", 3_000, swaps=40)
    pd.testing.assert_frame_equal(_joined(path, "msr", sort=True, batch_rows=64), read_trace(path, sort=True))
    with pytest.raises(TraceError) as whole:
        read_trace(path)
    with pytest.raises(TraceError) as streamed:
        _joined(path, "msr", batch_rows=64)
    assert str(streamed.value) == str(whole.value)
    # Disorder wider than the window: the stream says so (the callers read such a trace whole).
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[1:], lines[0]]))
    with pytest.raises(Unsorted):
        _joined(path, "msr", sort=True, batch_rows=64)


@pytest.mark.parametrize("to", ["parquet", "fio"])
def test_convert_streams_and_writes_what_the_whole_read_writes(tmp_path, small_batches, capsys, to):
    path = _msr(tmp_path / "m.csv", 3_000)
    out = tmp_path / f"out.{to}"
    assert main(["trace", "convert", str(path), "--to", to, "--out", str(out)]) == 0
    assert "(3,000" in capsys.readouterr().err
    expected = convert(read_trace(path), to, tmp_path / f"whole.{to}")
    if to == "fio":
        assert out.read_text() == expected.read_text()
    else:
        pd.testing.assert_frame_equal(read_trace(out), read_trace(expected))
        assert read_trace(out).attrs == read_trace(expected).attrs
    # --sort on a trace too out of order for the window: read whole instead, same result
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[1:], lines[0]]))
    assert main(["trace", "convert", str(path), "--sort", "--to", to, "--out", str(out)]) == 0
    expected = convert(read_trace(path, sort=True), to, tmp_path / f"whole.{to}")
    if to == "fio":
        assert out.read_text() == expected.read_text()
    else:
        pd.testing.assert_frame_equal(read_trace(out), read_trace(expected))


def test_a_bad_line_late_in_a_long_trace_leaves_nothing_written(tmp_path, small_batches, capsys):
    path = _msr(tmp_path / "m.csv", 3_000)
    lines = path.read_text().splitlines(keepends=True)
    lines[2_899] = lines[2_899].replace(",hm,1,Read,", ",hm,1,Scribble,").replace(",hm,1,Write,", ",hm,1,Scribble,")
    path.write_text("".join(lines))
    out = tmp_path / "out.parquet"
    assert main(["trace", "convert", str(path), "--to", "parquet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2900: Type is 'Scribble'" in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv"]  # no output, no partial file
    assert main(["replay", SIM, str(path), "--quiet", "--json", str(tmp_path / "r.json")]) == 2
    assert f"{path}:2900: Type is 'Scribble'" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_info_in_batches_matches_the_whole_reads_statistics(tmp_path, small_batches):
    from ftlscope.traces.cli import info_stats
    from ftlscope.traces.stats import trace_stats

    for path in (_fio_v2(tmp_path / "f.log", 500), _msr(tmp_path / "m.csv", 3_000)):
        batched, whole = info_stats(str(path), None, False), trace_stats(read_trace(path))
        for key in ("requests", "duration_s", "bytes", "mix", "size_histogram", "sequential_share",
                    "working_set_bytes", "offset_range", "format"):
            assert batched[key] == whole[key], key
        for key in ("interarrival_ns", "latency_ns"):  # merged moments; percentiles from a histogram: 0.1 %
            assert (key in batched) == (key in whole)
            for stat in ("n", "mean", "p50", "p99", "cv") if key in whole else ():
                assert batched[key][stat] == pytest.approx(whole[key][stat], rel=1e-3), (key, stat)


@pytest.mark.parametrize("timing", ["faithful", "afap"])
def test_a_streamed_msr_replay_gives_what_the_whole_trace_gives(tmp_path, monkeypatch, timing):
    import ftlscope.replay as replay_module

    path = _msr(tmp_path / "m.csv", 2_000)
    monkeypatch.setattr(readers, "_BLOCK", 8192)
    monkeypatch.setattr(replay_module, "STREAM_BATCH_ROWS", 333)
    assert_streamed_replay_equals_whole(path, timing, ("requests", "trace_requests", "trace_span_ns", "format"))


def test_converting_a_longer_trace_takes_no_more_memory(tmp_path, monkeypatch):
    """Peak Python-side memory (numpy and pandas arrays included: numpy reports them to tracemalloc; pyarrow's
    own buffers, one batch of text at a time, are not seen) of a streamed convert, for a trace and one four times
    as long, against the whole read of the longer one. Measured: 0.51 and 0.52 MB for 10,000 and 40,000
    requests, 7.5 MB for the whole read of the 40,000."""
    monkeypatch.setattr(readers, "_BLOCK", 64 << 10)  # ~1,300 lines a batch
    short, long = _msr(tmp_path / "s.csv", 5_000, seed=2), _msr(tmp_path / "l.csv", 20_000, seed=3)
    peaks = {name: peak_python_memory(lambda p=p, out=tmp_path / f"{name}.parquet": main(
        ["trace", "convert", str(p), "--to", "parquet", "--out", str(out)])) for name, p in (("short", short),
                                                                                            ("long", long))}
    whole = peak_python_memory(lambda: read_trace(long))
    # flat in the trace's length (4x the requests: at most 25 % more, plus 1 MiB of slack), and well below
    # what reading the longer trace whole takes
    assert peaks["long"] <= 1.25 * peaks["short"] + (1 << 20), peaks
    assert peaks["long"] * 3 < whole, (peaks, whole)


def test_an_fio_iolog_error_names_its_line_across_chunks(tmp_path, small_batches):
    lines = ["fio version 3 iolog", "0 x add", "0 x open"] + [f"{i} x read {i * 4096} 4096" for i in range(500)]
    lines[299] = "299 x scribble 0 4096"
    path = tmp_path / "f.log"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match=r"f\.log:300: action 'scribble'"):
        list(text_frames(path, "fio"))
