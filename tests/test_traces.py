"""Trace reading (every format, by sniffing and by --format), statistics, conversion, synthetic workloads, and the
one-line errors for bad traces. Fixtures are a few lines each in tests/fixtures/traces/."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ftlscope.cli import main
from ftlscope.traces import TraceError, convert, read_trace, sniff, synth, trace_stats, write_parquet
from ftlscope.traces.synthetic import VIDEO, WORKLOADS

FIX = Path(__file__).parent / "fixtures" / "traces"


@pytest.mark.parametrize(("name", "fmt"), [
    ("blkparse.txt", "blkparse"), ("msr.csv", "msr"), ("alibaba.csv", "alibaba"), ("spc.csv", "spc"),
    ("fio_v3.log", "fio"), ("fio_v2.log", "fio"),
])
def test_sniffing_names_the_format(name, fmt):
    assert sniff(FIX / name) == fmt


def test_blkparse_pairs_queue_issue_and_completion():
    t = read_trace(FIX / "blkparse.txt")
    assert list(t["op"]) == ["write", "read", "read"]
    assert list(t["offset_bytes"]) == [2048 * 512, 4096 * 512, 4112 * 512]
    assert list(t["size"]) == [8 * 512, 16 * 512, 8 * 512]
    assert list(t["submit_ns"]) == [0, 10_000, 300_000]            # arrival = Q
    assert list(t["latency_ns"]) == [120_000, 190_000, 100_000]   # C - Q
    assert list(t["process"]) == ["git", "cat", "cat"]


def test_msr_filetime_ticks_become_nanoseconds():
    t = read_trace(FIX / "msr.csv")
    assert list(t["op"]) == ["read", "write", "write", "read"]
    assert t["submit_ns"][1] == (128166372016382155 - 128166372003061629) * 100
    assert t["latency_ns"][0] == 2329 * 100
    assert t["offset_bytes"][0] == 3218866176 and t["size"][3] == 65536


def test_alibaba_microseconds_and_opcodes():
    t = read_trace(FIX / "alibaba.csv")
    assert list(t["op"]) == ["write", "write", "read", "write"]
    assert list(t["submit_ns"]) == [0, 100_000, 350_000, 1_000_000]
    assert "latency_ns" not in t


def test_spc_sectors_and_seconds():
    t = read_trace(FIX / "spc.csv")
    assert list(t["op"]) == ["write", "write", "read", "write", "read"]
    assert t["offset_bytes"][0] == 303567 * 512 and t["size"][4] == 12288
    assert t["submit_ns"][4] == 78_643_000


def test_fio_v3_microseconds_and_actions():
    t = read_trace(FIX / "fio_v3.log")
    assert list(t["op"]) == ["write", "write", "read", "trim", "flush"]
    assert list(t["submit_ns"]) == [0, 15_000, 30_000, 45_000, 50_000]
    assert t.attrs["ftlscope"]["format"] == "fio-v3"


def test_fio_v2_wait_lines_set_the_arrivals():
    t = read_trace(FIX / "fio_v2.log")
    assert list(t["op"]) == ["read", "read", "write"]
    assert list(t["submit_ns"]) == [0, 100_000, 100_000]


def test_run_trace_parquet_reads_back(tmp_path):
    from ftlscope import from_flags, run

    result = run(str(tmp_path / "f.img"), from_flags(rw="randrw", ops=50), size="4MiB", trace=True)
    path = result.save_trace(tmp_path / "run.parquet")
    t = read_trace(path)
    assert len(t) == len(result.trace) == 50
    assert (t["latency_ns"].to_numpy() == result.trace["latency_ns"].to_numpy()).all()
    assert t["submit_ns"].iloc[0] == 0


@pytest.mark.parametrize(("name", "needle"), [
    ("bad_fio_action.log", "bad_fio_action.log:5: action 'scribble'"),
    ("bad_alibaba_offset.csv", "bad_alibaba_offset.csv:4: offset is 'zero'"),
    ("bad_msr_fields.csv", "bad_msr_fields.csv:2: 6 fields where 7 were expected"),
    ("bad_msr_negative.csv", "negative size"),
    ("bad_spc_backwards.csv", "timestamps go backwards at request 2"),
    ("bad_blkparse.txt", "bad_blkparse.txt:1:"),
    ("empty_alibaba.csv", "holds no requests"),
])
def test_bad_traces_are_one_line_exit_2(name, needle, capsys):
    assert main(["trace", "info", str(FIX / name)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_truncated_parquet_and_missing_column(tmp_path, capsys):
    good = write_parquet(read_trace(FIX / "alibaba.csv"), tmp_path / "t.parquet")
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[:-40])
    with pytest.raises(TraceError, match="truncated or damaged"):
        read_trace(cut, "parquet")
    pd.DataFrame({"op": ["read"], "offset": [0]}).to_parquet(tmp_path / "nosize.parquet")
    assert main(["trace", "info", str(tmp_path / "nosize.parquet")]) == 2
    assert "lacks column(s) size, submit_ns" in capsys.readouterr().err


def test_sort_fixes_backwards_timestamps():
    t = read_trace(FIX / "bad_spc_backwards.csv", sort=True)
    assert list(t["submit_ns"]) == [0, 300_000_000] and list(t["op"]) == ["read", "write"]


def test_info_statistics_of_a_known_trace(tmp_path, capsys):
    out = tmp_path / "info.json"
    assert main(["trace", "info", str(FIX / "alibaba.csv"), "--json", str(out)]) == 0
    s = json.loads(out.read_text())
    assert s["requests"] == 4 and s["duration_s"] == pytest.approx(0.001)
    assert s["mix"]["write"] == {"requests": 3, "share": 0.75, "bytes": 16384}
    assert s["mix"]["read"]["bytes"] == 16384
    assert {b["le_bytes"]: b["count"] for b in s["size_histogram"]} == {4096: 2, 8192: 1, 16384: 1}
    # writes 1 MiB, +4 KiB, +8 KiB follow each other; the read is alone: 2 of 4 requests are sequential
    assert s["sequential_share"] == 0.5
    assert s["interarrival_ns"]["p50"] == pytest.approx(250_000)
    assert s["working_set_bytes"] == {"read": 16384, "write": 16384}
    assert s["offset_range"] == {"min_bytes": 0, "max_end_bytes": 1056768 + 8192}
    assert "operation mix" in capsys.readouterr().out


def test_working_set_counts_blocks_once():
    from ftlscope.traces.stats import working_set_blocks

    # 0..8 KiB, 4..12 KiB (overlaps one block), 5000 B spanning blocks 1..2 again: blocks 0, 1, 2
    assert working_set_blocks(np.array([0, 4096, 4096]), np.array([8192, 8192, 5000])) == 3


def test_convert_round_trips_through_parquet_and_fio(tmp_path):
    t = read_trace(FIX / "msr.csv")
    back = read_trace(convert(t, "parquet", tmp_path / "t.parquet"))
    pd.testing.assert_frame_equal(back, t, check_like=True)
    assert back.attrs["ftlscope"]["converted_from"] == "msr"
    fio = read_trace(convert(t, "fio", tmp_path / "t.log"))
    assert list(fio["op"]) == list(t["op"]) and list(fio["size"]) == list(t["size"])
    assert list(fio["submit_ns"]) == list(t["submit_ns"] // 1000 * 1000)  # fio keeps microseconds


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_fio_replays_a_converted_trace(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"\0" * (1 << 20))
    frame = synth("db", 200_000_000, seed=5)
    frame = frame[frame["offset_bytes"] + frame["size"] <= 1 << 20]  # keep what fits the 1 MiB file
    frame = pd.concat([frame, pd.DataFrame({"op": pd.Categorical(["read", "write"] * 10, categories=frame["op"]
                                                                  .cat.categories),
                                            "offset_bytes": np.arange(20, dtype=np.uint64) * 4096,
                                            "size": np.full(20, 4096, dtype=np.uint32),
                                            "submit_ns": np.arange(20, dtype=np.uint64) * 1000})])
    frame = frame.sort_values("submit_ns", kind="stable").reset_index(drop=True)
    log = convert(frame, "fio", tmp_path / "t.log", fio_file=str(target))
    res = subprocess.run(["fio", "--name=replay", f"--read_iolog={log}", "--ioengine=psync",
                          "--output-format=json", f"--output={tmp_path / 'o.json'}"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    job = json.loads((tmp_path / "o.json").read_text())["jobs"][0]
    assert job["read"]["total_ios"] == int((frame["op"] == "read").sum())
    assert job["write"]["total_ios"] == int((frame["op"] == "write").sum())


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_synthetic_workloads_have_their_stated_statistics(name):
    wl = WORKLOADS[name]
    frame = synth(name, 10_000_000_000, seed=7)
    s = trace_stats(frame)
    assert s["synthetic"] and frame.attrs["ftlscope"]["workload"] == name
    # Bounds: binomial/Poisson sampling over ~15-30 K requests; each stated in docs/traces.md.
    assert s["requests"] == pytest.approx(wl.iops * 10, rel=0.05)
    assert s["mix"]["read"]["share"] == pytest.approx(wl.read_share, abs=0.02)
    assert s["mean_size_bytes"] == pytest.approx(wl.mean_size(), rel=0.05)
    assert s["sequential_share"] == pytest.approx(wl.sequential_share(), abs=0.02)
    assert s["interarrival_ns"]["cv"] == pytest.approx(wl.interarrival_cv(), abs=0.06)
    assert s["interarrival_ns"]["cv"] > 1.05  # burstier than Poisson
    reads = frame[frame["op"] == "read"]
    if name == "db":  # 65% of reads are 512 B multiples that are not 4 KiB multiples
        assert ((reads["size"] % 4096) != 0).mean() == pytest.approx(0.65, abs=0.02)
    else:
        assert ((reads["size"] % 4096) == 0).all()
    # hot region: hot_share of run starts plus the cold starts that land there too
    starts = frame[frame["offset_bytes"].astype(np.int64) < int((wl.span_bytes - 2**30) * wl.hot_space)]
    expected_hot = wl.hot_share + (1 - wl.hot_share) * wl.hot_space
    assert len(starts) / len(frame) == pytest.approx(expected_hot, abs=0.05)


def test_video_streams_at_the_stated_rate():
    frame = synth("video", 10_000_000_000, seed=7)
    s = trace_stats(frame)
    assert set(s["mix"]) == {"read"}
    rate = s["bytes"] / 10
    assert rate == pytest.approx(VIDEO["clients"] * VIDEO["rate_bytes_per_s"], rel=0.05)
    for _, client in frame.groupby("process"):  # each client reads its file strictly sequentially
        off = client["offset_bytes"].to_numpy(dtype=np.int64)
        assert (np.diff(off) == VIDEO["chunk_bytes"]).all()


def test_synth_is_reproducible_and_labelled(tmp_path, capsys):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert main(["trace", "synth", "search", "--duration", "2s", "--seed", "3", "--out", str(a)]) == 0
    assert main(["trace", "synth", "search", "--duration", "2s", "--seed", "3", "--out", str(b)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))
    meta = read_trace(a).attrs["ftlscope"]
    assert meta["synthetic"] and meta["seed"] == 3 and meta["workload"] == "search"
    capsys.readouterr()
    assert main(["trace", "info", str(a)]) == 0
    assert "SYNTHETIC" in capsys.readouterr().out


def test_write_bursts_lay_the_stated_bursts_over_the_workload(tmp_path):
    out = tmp_path / "b.parquet"
    assert main(["trace", "synth", "search", "--duration", "2s", "--write-bursts", "12MiB", "--burst-rate",
                 "200MB/s", "--burst-every", "750ms", "--out", str(out)]) == 0
    frame, plain = read_trace(out), synth("search", 2_000_000_000, seed=1)
    bursts = frame[frame["offset_bytes"] >= 70 << 30]
    # The workload is untouched: the same requests, with the bursts' writes between them.
    pd.testing.assert_frame_equal(frame[frame["offset_bytes"] < 70 << 30].reset_index(drop=True), plain,
                                  check_categorical=False)
    # Bursts at 0, 750 and 1500 ms, each 96 writes of 128 KiB (12 MiB) 655 us apart (200 MB/s), one sequential run.
    assert len(bursts) == 3 * 96 and (bursts["op"] == "write").all() and (bursts["size"] == 128 << 10).all()
    submit = bursts["submit_ns"].to_numpy(dtype=np.int64)
    assert submit[[0, 96, 192]].tolist() == [0, 750_000_000, 1_500_000_000]
    assert submit[95] == round(95 * 131072 / 200e6 * 1e9)
    assert (np.diff(bursts["offset_bytes"].to_numpy(dtype=np.int64)) == 128 << 10).all()
    assert frame["submit_ns"].is_monotonic_increasing
    assert read_trace(out).attrs["ftlscope"]["parameters"]["write_bursts"]["every_ns"] == 750_000_000


@pytest.mark.parametrize(("flags", "needle"), [
    (["--burst-rate", "1GB/s"], "--burst-rate 1GB/s: give --write-bursts SIZE too"),
    (["--write-bursts", "100MiB"], "takes 819.2 ms, longer than --burst-every (500 ms)"),
    (["--write-bursts", "4KiB"], "--write-bursts: '4KiB' is out of range"),
    (["--write-bursts", "1MiB", "--burst-every", "0.5us"], "--burst-every: '0.5us' is out of range"),
])
def test_bad_write_bursts_are_one_line(tmp_path, capsys, flags, needle):
    out = tmp_path / "b.parquet"
    assert main(["trace", "synth", "search", "--duration", "1s", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and err.count("\n") == 1, err
    assert not out.exists()


def test_a_bad_trace_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out.log"
    assert main(["trace", "convert", str(FIX / "bad_alibaba_offset.csv"), "--to", "fio", "--out", str(out)]) == 2
    assert not out.exists()
    assert "bad_alibaba_offset.csv:4:" in capsys.readouterr().err


def test_line_numbers_hold_across_csv_batches(tmp_path, monkeypatch):
    from ftlscope.traces import readers

    monkeypatch.setattr(readers, "_BLOCK", 1024)  # ~40 lines per batch
    lines = ["device_id,opcode,offset,length,timestamp"]
    lines += [f"1,R,{i * 4096},4096,{i}" for i in range(500)]
    path = tmp_path / "big.csv"
    path.write_text("\n".join(lines) + "\n")
    assert len(read_trace(path)) == 500
    lines[451] = "1,R,4096,4096,ten"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match=r"big\.csv:452: timestamp is 'ten'"):
        read_trace(path)


def test_spc_extra_fields_are_ignored(tmp_path):
    path = tmp_path / "six.spc"
    path.write_text("0,100,4096,r,0.5,x\n0,108,4096,w,0.75,y\n")
    t = read_trace(path)
    assert list(t["op"]) == ["read", "write"] and list(t["submit_ns"]) == [0, 250_000_000]


def test_unknown_operation_in_parquet_is_refused(tmp_path):
    pd.DataFrame({"op": ["read", "scrub"], "offset": [0, 0], "size": [4096, 4096],
                  "submit_ns": [0, 1]}).to_parquet(tmp_path / "t.parquet")
    with pytest.raises(TraceError, match="request 2 has operation 'scrub'"):
        read_trace(tmp_path / "t.parquet")


def test_blkparse_flushes_discards_and_other_events():
    t = read_trace(FIX / "blkparse_misc.txt")
    assert list(t["op"]) == ["write", "flush", "trim"]   # m, G, P, U and the passthrough D are not requests
    assert list(t["size"]) == [4096, 0, 2048 * 512]
    assert t["latency_ns"][0] == 120_000 and pd.isna(t["latency_ns"][1]) and t["latency_ns"][2] == 100_000
