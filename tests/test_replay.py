"""`ftlscope replay`: a trace through the Rust engine on simulated drives (virtual time, so every figure is exact),
with run's outputs plus the issue lag, and the one-line refusals of bad traces before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fuzzing import assert_one_line, bounded
from hypothesis import example, given
from hypothesis import strategies as st
from streamed_traces import refusal_without_hanging

from ftlscope.cli import main
from ftlscope.errors import FtlscopeError, UsageError
from ftlscope.replay import MAX_SHIFT, parse_shift, parse_timing
from ftlscope.traces import read_trace, write_parquet

FIX = Path(__file__).parent / "fixtures" / "traces"
SIM = "sim:consumer-tlc-dram"


def _replay(tmp_path, trace, *flags, name="r"):
    out_json, out_trace = tmp_path / f"{name}.json", tmp_path / f"{name}.parquet"
    code = main(["replay", SIM, str(trace), "--quiet", "--json", str(out_json), "--trace", str(out_trace), *flags])
    assert code == 0
    return json.loads(out_json.read_text()), pd.read_parquet(out_trace).sort_values("submit_ns", kind="stable")


def test_run_trace_replayed_afap_on_a_fresh_drive_gives_the_same_latencies(tmp_path):
    # QD 4 with reads and writes: the run's trace is in completion order, so replay orders it by submission
    # (the first four in one nanosecond: by the run's submission sequence).
    original = tmp_path / "run.parquet"
    assert main(["run", SIM, "--rw", "randrw", "--qd", "4", "--ops", "3000", "--no-precondition", "--quiet",
                 "--trace", str(original)]) == 0
    summary, replayed = _replay(tmp_path, original, "--timing", "afap", "--qd", "4", "--no-precondition")
    replayed = replayed.sort_values("submit_seq")
    ran = pd.read_parquet(original).sort_values("submit_seq")
    assert summary["read"]["ops"] + summary["write"]["ops"] == 3000
    assert summary["read"]["ops"] == int((ran["op"] == "read").sum())
    for column in ("op", "offset_bytes", "size", "latency_ns"):
        assert (ran[column].to_numpy() == replayed[column].to_numpy()).all(), column
    start = ran["submit_ns"].iloc[0], replayed["submit_ns"].iloc[0]
    assert ((ran["submit_ns"] - start[0]).to_numpy() == (replayed["submit_ns"] - start[1]).to_numpy()).all()
    assert summary["replay"]["mode"] == "closed" and summary["run"]["issue_lag_ns"]["max"] == 0


def test_open_loop_replay_of_an_msr_trace_reproduces_the_arrivals_exactly(tmp_path):
    summary, replayed = _replay(tmp_path, FIX / "msr.csv")
    arrivals = read_trace(FIX / "msr.csv")["submit_ns"].to_numpy()
    submits = (replayed["submit_ns"] - replayed["submit_ns"].iloc[0]).to_numpy()
    assert (submits == arrivals).all()
    assert (replayed["issue_lag_ns"] == 0).all()
    assert summary["run"]["issue_lag_ns"]["p99"] == summary["run"]["issue_lag_ns"]["max"] == 0
    assert summary["replay"] | {"issue_lag_ns": None} == summary["replay"] | {
        "trace": str(FIX / "msr.csv"), "format": "msr", "timing": "faithful", "mode": "open", "requests": 4,
        "trace_requests": 4, "left_out": {}, "wrapped": 0, "issue_lag_ns": None}
    assert (summary["read"]["ops"], summary["write"]["ops"]) == (2, 2)


def _synthetic(tmp_path, n=400, gap_ns=50_000, ops=("read", "write")):
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({
        "op": pd.Categorical([ops[i % len(ops)] for i in range(n)],
                             categories=["read", "write", "trim", "write_zeroes", "flush"]),
        "offset_bytes": (rng.integers(0, 1 << 14, n) * 4096).astype(np.uint64),
        "size": np.full(n, 4096, dtype=np.uint32),
        "submit_ns": (np.arange(n) * gap_ns + rng.integers(0, max(gap_ns // 2, 1), n)).astype(np.uint64),
    })
    frame.attrs["ftlscope"] = {"format": "test", "synthetic": True}
    return write_parquet(frame, tmp_path / "synthetic.parquet"), frame


def test_scaled_2_halves_the_span(tmp_path):
    trace, frame = _synthetic(tmp_path)
    _, faithful = _replay(tmp_path, trace, name="f")
    _, scaled = _replay(tmp_path, trace, "--timing", "scaled:2", name="s")
    span = lambda t: int(t["submit_ns"].iloc[-1] - t["submit_ns"].iloc[0])  # noqa: E731
    assert span(faithful) == int(frame["submit_ns"].iloc[-1] - frame["submit_ns"].iloc[0])
    recorded = (frame["submit_ns"] - frame["submit_ns"].iloc[0]).to_numpy()
    expected = np.floor(recorded / 2 + 0.5).astype(np.int64)  # Rust's round(): halves away from 0
    assert ((scaled["submit_ns"] - scaled["submit_ns"].iloc[0]).to_numpy() == expected).all()
    assert abs(span(scaled) - span(faithful) / 2) <= 1


def test_closed_loop_at_qd_1_serialises(tmp_path):
    # Every request arrives at once: closed at QD 1 issues each when the one before has completed.
    trace, _ = _synthetic(tmp_path, n=200, gap_ns=1)
    summary, replayed = _replay(tmp_path, trace, "--mode", "closed", "--qd", "1")
    submit, complete = replayed["submit_ns"].to_numpy(), replayed["complete_ns"].to_numpy()
    assert (submit[1:] >= complete[:-1]).all()
    assert summary["run"]["mean_in_flight"] <= 1.0 + 1e-9
    # Open loop at the same depth: they were all due at once, so all but the first went late, and said so.
    summary, replayed = _replay(tmp_path, trace, "--qd", "1", name="open")
    assert summary["run"]["issue_lag_ns"]["max"] > 0 and (replayed["issue_lag_ns"].iloc[1:] > 0).all()


def test_reads_only_offset_shift_and_wrap(tmp_path, capsys):
    trace, frame = _synthetic(tmp_path, n=100)
    summary, replayed = _replay(tmp_path, trace, "--reads-only", "--offset-shift", "4096")
    assert "write" not in summary and summary["read"]["ops"] == 50
    assert summary["replay"]["left_out"] == {"write (--reads-only)": 50}
    reads = frame[frame["op"] == "read"]["offset_bytes"].to_numpy()
    assert (np.sort(replayed["offset_bytes"].to_numpy()) == np.sort(reads + 4096)).all()
    assert "left out 50 write (--reads-only)" in capsys.readouterr().err
    # Beyond the 256 GB drive: refused, or folded into it with --wrap.
    far = tmp_path / "far.json"
    assert main(["replay", SIM, str(trace), "--quiet", "--offset-shift", "300GiB", "--json", str(far)]) == 2
    err = capsys.readouterr().err
    assert "beyond the 256,000,000,000 B target" in err and "--wrap" in err and not far.exists()

    summary, replayed = _replay(tmp_path, trace, "--offset-shift", "300GiB", "--wrap", name="wrapped")
    assert summary["replay"]["wrapped"] == 100
    assert (replayed["offset_bytes"] + replayed["size"] <= 256_000_000_000).all()
    # A request is named by its number in the trace, also when requests before it were left out.
    trace, _ = _synthetic(tmp_path, n=10, ops=("write", "read"))
    capsys.readouterr()
    assert main(["replay", SIM, str(trace), "--quiet", "--reads-only", "--offset-shift", "300GiB"]) == 2
    assert "request 2 ends at byte" in capsys.readouterr().err


def test_flushes_and_trims_are_replayed(tmp_path):
    trace, _ = _synthetic(tmp_path, n=60, ops=("write", "trim", "flush"))
    summary, replayed = _replay(tmp_path, trace, "--mode", "closed")
    assert (summary["write"]["ops"], summary["trim"]["ops"], summary["flush"]["ops"]) == (20, 20, 20)
    # Closed loop: a flush is a sync point, alone in flight.
    for _, flush in replayed[replayed["op"] == "flush"].iterrows():
        others = replayed[replayed["op"] != "flush"]
        overlap = (others["submit_ns"] < flush["complete_ns"]) & (others["complete_ns"] > flush["submit_ns"])
        assert not overlap.any()


@pytest.mark.parametrize(("make", "needle"), [
    ("truncated", "truncated or damaged"),
    ("missing_column", "6 fields where 7 were expected"),
    ("negative", "negative size"),
    ("backwards", "timestamps go backwards at request 2"),
    ("empty", "holds no requests"),
])
def test_bad_traces_are_one_line_exit_2_and_nothing_is_written(tmp_path, capsys, make, needle):
    good = write_parquet(read_trace(FIX / "alibaba.csv"), tmp_path / "good.parquet")
    bad = {
        "truncated": lambda p: p.write_bytes(good.read_bytes()[:-40]),
        "missing_column": lambda p: p.write_text((FIX / "bad_msr_fields.csv").read_text()),
        "negative": lambda p: p.write_text((FIX / "bad_msr_negative.csv").read_text()),
        "backwards": lambda p: p.write_text((FIX / "bad_spc_backwards.csv").read_text()),
        "empty": lambda p: p.write_text((FIX / "empty_alibaba.csv").read_text()),
    }
    fmt = {"missing_column": "msr", "negative": "msr", "backwards": "spc", "empty": "alibaba"}.get(make)
    path = tmp_path / f"{make}.trace"
    bad[make](path)
    target, out = tmp_path / "target.img", tmp_path / "out.json"
    args = ["replay", str(target), str(path), "--size", "64MiB", "--quiet", "--json", str(out)]
    assert main(args + (["--format", fmt] if fmt else [])) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists() and not target.exists(), "nothing written: neither the outputs nor the target"


def test_sort_fixes_backwards_timestamps(tmp_path):
    summary, _ = _replay(tmp_path, FIX / "bad_spc_backwards.csv", "--sort", "--format", "spc")
    assert summary["replay"]["requests"] == 2


@pytest.mark.parametrize(("flags", "needle"), [
    (["--timing", "scaled:0"], "--timing: 'scaled:0' is not a timing"),
    (["--timing", "afap", "--mode", "open"], "--mode open: afap"),
    (["--qd", "0"], "--qd: 0 is out of range"),
    (["--data", "verify"], "--data verify: a replay reads nothing back"),
    (["--offset-shift", "-4GiB"], "moves request 1 below byte 0"),
])
def test_bad_flags_are_refused_in_one_line(tmp_path, capsys, flags, needle):
    assert main(["replay", SIM, str(FIX / "msr.csv"), "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_writes_in_a_trace_need_the_confirmation_a_destructive_run_needs(tmp_path, capsys):
    # A file ftlscope did not create holds someone's data: run's safety check refuses the writes before anything is
    # written; reads only are allowed, and --destructive naming the file allows the writes.
    trace, _ = _synthetic(tmp_path, n=40)
    foreign = tmp_path / "photos.img"
    content = np.random.default_rng(3).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
    foreign.write_bytes(content)
    base = ["replay", str(foreign), str(trace), "--quiet", "--wrap", "--buffered"]
    assert main(base) == 2
    assert f"pass --destructive {foreign}" in capsys.readouterr().err
    assert foreign.read_bytes() == content
    assert main([*base, "--reads-only"]) == 0
    assert foreign.read_bytes() == content
    assert main([*base, "--destructive", str(foreign)]) == 0
    assert foreign.read_bytes() != content


def test_every_format_replays(tmp_path):
    for name, fmt in [("blkparse.txt", "blkparse"), ("alibaba.csv", "alibaba"), ("spc.csv", "spc"),
                      ("fio_v3.log", "fio"), ("fio_v2.log", "fio")]:
        summary, _ = _replay(tmp_path, FIX / name, "--wrap", "--buffered", name=fmt + name)
        assert summary["replay"]["requests"] > 0, name


@bounded(150)
@given(st.text(alphabet=st.sampled_from("0123456789.:-+eE kKmMgGiIbBscaledfithulp_") | st.characters(), max_size=24))
@example("scaled:nan")
@example("scaled:1e400")
@example("-99999999999999999999999")
@example("٣")
def test_timing_and_shift_values_parse_or_are_refused_naming_the_flag(text):
    for parse, flag in ((parse_timing, "--timing"), (parse_shift, "--offset-shift")):
        try:
            value = parse(text)
        except UsageError as exc:
            assert_one_line(exc)
            assert flag in exc.message
            continue
        if parse is parse_shift:
            assert isinstance(value, int) and abs(value) <= MAX_SHIFT
        else:
            assert value in ("faithful", "afap") or float(value.removeprefix("scaled:")) > 0


def test_shift_units():
    assert (parse_shift("4096"), parse_shift("-4k"), parse_shift("1GiB")) == (4096, -4096, 1 << 30)


def test_a_replay_of_a_synthetic_trace_labels_its_own_trace_and_windows(tmp_path):
    # Regression: the replay's --trace and --windows files did not say the replayed trace was synthetic, so a
    # measured trace of a generated workload read back as a captured one.
    from ftlscope.traces.stats import trace_stats

    synth = tmp_path / "db.parquet"
    assert main(["trace", "synth", "db", "--duration", "200ms", "--seed", "3", "--out", str(synth)]) == 0
    windows = tmp_path / "w.csv"
    _, _ = _replay(tmp_path, synth, "--timing", "afap", "--windows", str(windows), "--destructive", SIM)
    back = read_trace(tmp_path / "r.parquet", sort=True)
    meta = back.attrs["ftlscope"]
    assert meta["synthetic"] is True and meta["workload"] == "db" and meta["seed"] == 3
    assert meta["replay_of"] == {"trace": str(synth), "format": "synthetic"}
    assert trace_stats(back)["synthetic"] is True
    assert pd.read_csv(windows)["synthetic_trace"].all()
    # A captured trace's replay says the opposite, in the same places.
    _replay(tmp_path, FIX / "msr.csv", "--windows", str(windows), name="m")
    assert read_trace(tmp_path / "m.parquet", sort=True).attrs["ftlscope"]["synthetic"] is False
    assert not pd.read_csv(windows)["synthetic_trace"].any()


# ---------------------------------------------------------------------------------------------------------
# streamed replays: a Parquet trace replayed while it is read in batches (flat memory)


def _mixed_trace(tmp_path, n=5_000, seed=1):
    rng = np.random.default_rng(seed)
    ops = rng.choice(["read", "write"], size=n, p=[0.7, 0.3])
    ops[::997] = "flush"
    frame = pd.DataFrame({"op": pd.Categorical(ops, categories=["read", "write", "trim", "write_zeroes", "flush"]),
                          "offset_bytes": (rng.integers(0, 1 << 16, n) * 4096).astype(np.uint64),
                          "size": rng.choice([4096, 8192, 65536], n).astype(np.uint32),
                          "submit_ns": np.cumsum(rng.integers(1_000, 40_000, n)).astype(np.uint64)})
    frame.loc[frame["op"] == "flush", ["offset_bytes", "size"]] = 0
    frame.attrs["ftlscope"] = {"format": "test", "synthetic": False}
    return write_parquet(frame, tmp_path / "mixed.parquet"), frame


@pytest.mark.parametrize("timing", ["faithful", "afap"])
def test_a_streamed_replay_gives_what_the_whole_trace_gives_across_many_batches(tmp_path, monkeypatch, timing):
    import ftlscope.replay as replay_module
    from ftlscope.replay import replay

    path, frame = _mixed_trace(tmp_path)
    monkeypatch.setattr(replay_module, "STREAM_BATCH_ROWS", 777)  # 7 batches, chunk ends mid-burst
    runs = {}
    for name, source in (("whole", frame), ("streamed", path)):
        result = replay(SIM, source, timing=timing, qd=8, trace=True, destructive=SIM, precondition=False)
        runs[name] = result
        assert result.summary["replay"]["streamed"] is (name == "streamed")
    whole, streamed = (runs[k].trace.sort_values("submit_ns", kind="stable") for k in ("whole", "streamed"))
    for column in ("op", "offset_bytes", "size", "submit_ns", "latency_ns", "issue_lag_ns"):
        assert (whole[column].to_numpy() == streamed[column].to_numpy()).all(), column
    keys = ("requests", "trace_requests", "trace_span_ns", "left_out", "wrapped")
    assert {k: runs["whole"].summary["replay"][k] for k in keys} == {
        k: runs["streamed"].summary["replay"][k] for k in keys}
    assert runs["streamed"].summary["write"]["ops"] == int((frame["op"] == "write").sum())


def test_a_streamed_replay_checks_every_batch_before_it_starts_and_names_the_request(tmp_path, monkeypatch, capsys):
    import ftlscope.replay as replay_module

    path, frame = _mixed_trace(tmp_path, n=3_000)
    frame.loc[2_500, ["op", "offset_bytes", "size"]] = ["read", 4096 * 3 + 100, 4096]  # unaligned, late in it
    write_parquet(frame, path)
    monkeypatch.setattr(replay_module, "STREAM_BATCH_ROWS", 1_000)
    out = tmp_path / "r.json"
    assert main(["replay", SIM, str(path), "--quiet", "--destructive", SIM, "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert "request 2501" in err and "aligned" in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not out.exists()
    # Timestamps going backwards in a later batch: refused the same way, naming the request.
    frame.loc[2_500, ["op", "offset_bytes", "size"]] = ["read", 0, 4096]
    frame.loc[2_700, "submit_ns"] = 5
    write_parquet(frame, path)
    assert main(["replay", SIM, str(path), "--quiet", "--destructive", SIM, "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert "backwards at request 2701" in err and err.count("\n") == 1 and not out.exists(), err


def test_a_streamed_replay_that_cannot_start_does_not_leave_its_reader_waiting(tmp_path, monkeypatch):
    # Regression guard: the feeder thread waits for room in the engine's chunks; a run refused before it starts
    # (writes on a file target without --destructive) must let it go, or replay would hang.
    import ftlscope.replay as replay_module
    from ftlscope.replay import replay

    path, _ = _mixed_trace(tmp_path, n=20_000)
    monkeypatch.setattr(replay_module, "STREAM_BATCH_ROWS", 500)  # far more batches than the engine holds
    target = tmp_path / "disk.img"
    target.write_bytes(b"\0" * (1 << 20))
    raised = refusal_without_hanging(lambda: replay(str(target), path, timing="afap", size=str(1 << 30)))
    assert isinstance(raised, FtlscopeError) and "--destructive" in str(raised)


def test_a_trace_too_disordered_to_sort_in_batches_is_read_whole(tmp_path, monkeypatch):
    import ftlscope.replay as replay_module
    from ftlscope.replay import replay

    path, frame = _mixed_trace(tmp_path, n=2_000)
    reordered = pd.concat([frame.iloc[1_000:], frame.iloc[:1_000]]).reset_index(drop=True)
    reordered.attrs = frame.attrs
    write_parquet(reordered, path)
    monkeypatch.setattr(replay_module, "STREAM_BATCH_ROWS", 300)
    result = replay(SIM, path, sort=True, timing="afap", qd=4, destructive=SIM, precondition=False)
    assert result.summary["replay"]["streamed"] is False
    assert result.summary["replay"]["requests"] == 2_000
