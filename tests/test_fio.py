"""fio as the reference: the command line for each workload feature, reading fio's JSON, and one real
fio-check (skipped without fio or the native engine)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from ftlscope import fio as fiomod
from ftlscope.errors import RunError, TargetError, UsageError
from ftlscope.fio import (
    comparison_frame,
    fio_available,
    fio_command,
    fio_summary,
    format_comparison,
    parse_engines,
    parse_fio_output,
    require_fio,
    round_schedule,
    run_fio,
)
from ftlscope.workload import Workload, from_flags

FIXTURE = Path(__file__).parent / "fixtures" / "fio_randread.json"
MiB = 1 << 20
SIZE = 64 * MiB
TAIL = [
    "--output-format=json",
    "--lat_percentiles=1",
    "--percentile_list=50:90:95:99:99.9:99.99",
]
URING = ["--fixedbufs", "--registerfiles", "--hipri=0", "--sqthread_poll=0"]


def cmd(workload: Workload, engine: str = "io_uring", **kw) -> list[str]:
    kw.setdefault("target_size_bytes", SIZE)
    return fio_command("/dev/x", workload, engine, **kw)


def flags(command: list[str]) -> dict[str, str | None]:
    """``--key=value`` -> {"key": "value"}, ``--flag`` -> {"flag": None}."""
    out: dict[str, str | None] = {}
    for item in command[1:]:
        assert item.startswith("--"), item
        key, eq, value = item[2:].partition("=")
        assert key not in out, f"{key} given twice"
        out[key] = value if eq else None
    return out


# ---------------------------------------------------------------------------------------------------------
# fio_command


def test_default_random_read_is_exactly_this_command():
    w = from_flags(rw="randread", bs="4k", qd=32, runtime="10s")
    assert cmd(w) == [
        "fio", "--name=ftlscope", "--filename=/dev/x", "--direct=1", "--ioengine=io_uring", "--rw=randread",
        "--bs=4096", "--iodepth=32", "--numjobs=1", "--group_reporting", "--offset=0", f"--size={SIZE}",
        "--norandommap=1", "--randrepeat=1", "--randseed=1", "--runtime=10s", "--time_based", *URING, *TAIL,
    ]


def test_sequential_queues_each_get_their_own_share():
    w = from_flags(rw="read", bs="128k", qd=8, queues=4, runtime="1s")
    f = flags(cmd(w))
    assert f["rw"] == "read"
    assert f["numjobs"] == "4"
    assert f["offset"] == "0"
    assert f["size"] == str(16 * MiB)
    assert f["offset_increment"] == str(16 * MiB)
    assert "norandommap" not in f


def test_share_is_rounded_down_to_the_smallest_size():
    w = from_flags(rw="read", bs="4k", queues=3, runtime="1s")
    f = flags(cmd(w, target_size_bytes=10 * 4096 + 100))
    assert f["size"] == f["offset_increment"] == str(3 * 4096)


def test_random_queues_share_the_whole_range():
    w = from_flags(rw="randread", qd=4, queues=2, runtime="1s")
    f = flags(cmd(w))
    assert f["size"] == str(SIZE)
    assert "offset_increment" not in f
    assert f["numjobs"] == "2"


def test_range_and_align_offset():
    w = from_flags(rw="randread", offset="1MiB", size="8MiB", align_offset="512", runtime="1s")
    f = flags(cmd(w, target_size_bytes=None))  # the range has a length: no need to size the target
    assert f["offset"] == str(MiB + 512)
    assert f["size"] == str(8 * MiB - 512)


def test_range_to_the_end_of_a_file_looks_up_its_size(tmp_path):
    path = tmp_path / "t.img"
    path.write_bytes(b"\0" * (3 * MiB))
    w = from_flags(rw="randread", offset="1MiB", runtime="1s")
    f = flags(fio_command(str(path), w))
    assert f["offset"] == str(MiB)
    assert f["size"] == str(2 * MiB)


def test_several_sizes_become_an_even_bssplit():
    f = flags(cmd(from_flags(bs="4k,8k,16k", runtime="1s")))
    assert f["bssplit"] == "4096/:8192/:16384/"
    assert "bs" not in f


def test_repeated_sizes_become_weights():
    f = flags(cmd(Workload(sizes=[4096, 4096, 4096, 8192], pattern={"kind": "random"}, stop={"time_ns": 10**9})))
    assert f["bssplit"] == "4096/75:8192/25"
    with pytest.raises(UsageError, match="bssplit"):
        cmd(Workload(sizes=[4096, 4096, 8192], stop={"time_ns": 10**9}))


def test_read_write_mix():
    f = flags(cmd(from_flags(rw="randrw", rwmixread=70, runtime="1s")))
    assert f["rw"] == "randrw"
    assert f["rwmixread"] == "70"
    f = flags(cmd(from_flags(rw="rw", runtime="1s")))
    assert (f["rw"], f["rwmixread"]) == ("rw", "50")
    with pytest.raises(UsageError, match="whole percentage"):
        cmd(from_flags(rw="randrw", mix="read=1,write=2", runtime="1s"))


def test_trim_alone_and_refused_mixes():
    assert flags(cmd(from_flags(rw="randtrim", runtime="1s")))["rw"] == "randtrim"
    assert flags(cmd(from_flags(rw="trim", runtime="1s")))["rw"] == "trim"
    with pytest.raises(UsageError, match="trim"):
        cmd(from_flags(mix="read=50,trim=50", runtime="1s"))
    with pytest.raises(UsageError, match="write_zeroes"):
        cmd(from_flags(rw="writezeroes", runtime="1s"))
    with pytest.raises(UsageError, match="flush"):
        cmd(from_flags(rw="flush", runtime="1s"))


def test_permutation_touches_every_block_once():
    f = flags(cmd(from_flags(pattern="permutation", runtime="1s")))
    assert f["rw"] == "randread"
    assert f["random_generator"] == "lfsr"
    assert f["norandommap"] == "0"
    f = flags(cmd(from_flags(pattern="permutation", bs="4k,8k", runtime="1s")))
    assert "random_generator" not in f  # the LFSR repeats blocks with several sizes; the random map does not
    assert f["norandommap"] == "0"


def test_permutation_queues_split_the_range():
    f = flags(cmd(from_flags(pattern="permutation", queues=2, runtime="1s")))
    assert f["size"] == f["offset_increment"] == str(SIZE // 2)


def test_zipf():
    f = flags(cmd(from_flags(pattern="zipf:1.2", runtime="1s")))
    assert f["random_distribution"] == "zipf:1.2"
    assert f["norandommap"] == "1"
    with pytest.raises(UsageError, match="theta 1.0"):
        cmd(from_flags(pattern="zipf:1", runtime="1s"))


def test_hotset_becomes_absolute_zones():
    f = flags(cmd(from_flags(pattern="hotset:0:4MiB:0.9", runtime="1s")))
    assert f["random_distribution"] == f"zoned_abs:90/{4 * MiB}:10/{60 * MiB}"
    f = flags(cmd(from_flags(pattern="hotset:8MiB:8MiB:0.8", runtime="1s")))
    # the cold 20 % split over 8 MiB before and 48 MiB after, in whole percentages
    assert f["random_distribution"] == f"zoned_abs:3/{8 * MiB}:80/{8 * MiB}:17/{48 * MiB}"
    assert f["norandommap"] == "1"
    with pytest.raises(UsageError, match="whole percentages"):
        cmd(from_flags(pattern="hotset:0:4MiB:0.905", runtime="1s"))


def test_strided_becomes_a_gap_after_each_request():
    assert flags(cmd(from_flags(rw="read", pattern="strided:16k", runtime="1s")))["rw"] == "read:12288"
    assert flags(cmd(from_flags(rw="write", pattern="strided:4k", runtime="1s")))["rw"] == "write"
    with pytest.raises(UsageError, match="strided"):
        cmd(from_flags(rw="read", bs="4k,8k", pattern="strided:16k", runtime="1s"))
    with pytest.raises(UsageError, match="strided"):
        cmd(from_flags(rw="read", bs="8k", pattern="strided:4k", runtime="1s"))


def test_permuted_windows_is_refused_by_name():
    with pytest.raises(UsageError, match="permuted_windows"):
        cmd(from_flags(pattern="permuted-windows:4", runtime="1s"))


def test_stop_by_time_and_the_runtime_override():
    f = flags(cmd(from_flags(runtime="10s")))
    assert (f["runtime"], f["time_based"]) == ("10s", None)
    f = flags(cmd(from_flags(runtime="10s"), runtime_ns=2_500_000_000))
    assert f["runtime"] == "2500ms"
    f = flags(cmd(from_flags(runtime="250us")))
    assert f["runtime"] == "250us"


def test_stop_by_ops_is_divided_per_job():
    f = flags(cmd(from_flags(ops=1000, queues=3)))
    assert f["number_ios"] == "334"
    assert f["io_size"] == str(334 * 4096)  # lets fio wrap past --size; number_ios stops it
    assert "runtime" not in f and "time_based" not in f


def test_stop_by_bytes_and_by_ops_or_time():
    f = flags(cmd(from_flags(total_bytes="1MiB", queues=2)))
    assert f["io_size"] == str(MiB // 2)
    assert "number_ios" not in f
    f = flags(cmd(from_flags(ops=100, runtime="5s")))
    assert f["number_ios"] == "100"
    assert f["runtime"] == "5s"
    assert "time_based" not in f  # fio ignores number_ios when time_based
    with pytest.raises(UsageError, match="no limit"):
        cmd(Workload())


def test_warmup():
    assert flags(cmd(from_flags(runtime="5s", warmup="2s")))["ramp_time"] == "2s"
    with pytest.raises(UsageError, match="warm up for a time"):
        cmd(from_flags(runtime="5s", warmup_ops=100))


def test_batches():
    f = flags(cmd(from_flags(batch=8, idle="1ms", runtime="1s")))
    assert f["iodepth"] == "8"
    assert f["iodepth_batch_submit"] == f["iodepth_batch_complete_min"] == "8"
    assert (f["thinktime"], f["thinktime_blocks"]) == ("1ms", "8")
    f = flags(cmd(from_flags(batch=4, runtime="1s")))
    assert "thinktime" not in f


def test_engines():
    w = from_flags(qd=32, runtime="1s")
    f = flags(cmd(w, "libaio"))
    assert (f["ioengine"], f["iodepth"]) == ("libaio", "32")
    assert "fixedbufs" not in f
    assert flags(cmd(from_flags(qd=1, runtime="1s"), "psync"))["iodepth"] == "1"
    with pytest.raises(UsageError, match="unknown fio engine"):
        cmd(w, "spdk")


def test_psync_keeps_a_random_depth_with_one_job_per_request():
    f = flags(cmd(from_flags(qd=32, queues=2, ops=6400), "psync"))
    assert (f["ioengine"], f["iodepth"], f["numjobs"]) == ("psync", "1", "64")
    assert "thread" in f and "registerfiles" not in f
    assert f["number_ios"] == "100"  # the ops are shared by the 64 jobs
    assert (f["rw"], f["offset"], f["size"]) == ("randread", "0", str(SIZE))  # each job draws over the range


def test_psync_threads_take_turns_along_one_sequential_walk():
    f = flags(cmd(from_flags(rw="read", bs="128k", qd=4, runtime="1s"), "psync"))
    assert (f["numjobs"], f["iodepth"]) == ("4", "1")
    # job j starts j requests in and skips the other three jobs' requests after each of its own
    assert (f["rw"], f["offset"], f["offset_increment"]) == (f"read:{3 * 128 * 1024}", "0", str(128 * 1024))
    assert f["size"] == str(SIZE - 3 * 128 * 1024)


@pytest.mark.parametrize("flag_set", [
    {"rw": "randread", "pattern": "permutation"},  # an ordered walk: one stream
    {"rw": "read", "queues": 2},  # offset_increment cannot also step between the queues' shares
    {"rw": "read", "bs": "4k,8k"},  # mixed sizes: job j's requests do not start at fixed steps
    {"rw": "randread", "batch": 4},
])
def test_psync_without_a_thread_plan_is_refused_or_runs_at_qd1(flag_set):
    w = from_flags(**{"qd": 4, "runtime": "1s", **flag_set})
    with pytest.raises(UsageError, match="psync engine has one request in flight per job"):
        cmd(w, "psync")
    f = flags(cmd(w, "psync", sync_at_qd1=True))
    assert (f["iodepth"], f["numjobs"]) == ("1", str(w.queues))
    assert "thread" not in f


def test_psync_beyond_256_threads_runs_at_qd1():
    f = flags(cmd(from_flags(qd=128, queues=4, runtime="1s"), "psync", sync_at_qd1=True))
    assert (f["iodepth"], f["numjobs"]) == ("1", "4")


def test_written_data():
    assert flags(cmd(from_flags(rw="randwrite", data="zeros", runtime="1s")))["zero_buffers"] == "1"
    assert flags(cmd(from_flags(rw="randwrite", data="ones", runtime="1s")))["buffer_pattern"] == "0xff"
    assert flags(cmd(from_flags(rw="randwrite", data="aa", runtime="1s")))["buffer_pattern"] == "0xaa"
    assert flags(cmd(from_flags(rw="randwrite", runtime="1s")))["scramble_buffers"] == "1"
    with pytest.raises(UsageError, match="lba"):
        cmd(from_flags(rw="randwrite", data="lba", runtime="1s"))
    f = flags(cmd(from_flags(rw="randread", data="lba", runtime="1s")))  # reads: the data does not matter
    assert not {"zero_buffers", "buffer_pattern", "scramble_buffers"} & set(f)


def test_seed_buffered_and_file_names():
    w = from_flags(seed=42, runtime="1s")
    f = flags(fio_command("/data/a:b.img", w, target_size_bytes=SIZE, direct=False))
    assert f["randseed"] == "42"
    assert f["direct"] == "0"
    assert f["filename"] == "/data/a\\:b.img"  # fio splits file names at ':'


# ---------------------------------------------------------------------------------------------------------
# reading fio's output


def test_fio_summary_of_a_real_report():
    s = fio_summary(json.loads(FIXTURE.read_text()))
    assert set(s) >= {"read", "engine", "run", "cpu"}
    assert "write" not in s and "trim" not in s  # only what ran
    read = s["read"]
    assert read["ops"] == 75912
    assert read["iops"] == pytest.approx(75836.163836)
    assert read["bw_bytes"] == 310624927
    assert read["bytes"] == 310935552
    assert read["lat_ns"] == {
        "mean": pytest.approx(51286.299254), "stddev": pytest.approx(83959.704504), "min": 12649,
        "max": 8690244, "p50": 47360, "p90": 62720, "p95": 71168, "p99": 96768, "p99.9": 337920,
        "p99.99": 4014080,
    }
    assert s["engine"] == {"backend": "io_uring", "iodepth": 4, "numjobs": 1}
    assert s["run"]["measured_ns"] == 1_001_000_000
    assert s["cpu"]["cpu_s"] == pytest.approx((5.7 + 59.8) / 100 * 1.0)
    assert s["cpu"]["ns_per_io"] == pytest.approx(0.655e9 / 75912)


def test_percentiles_fall_back_to_clat():
    report = json.loads(FIXTURE.read_text())
    read = report["jobs"][0]["read"]
    read["clat_ns"]["percentile"] = {"50.000000": 111, "99.900000": 222}
    del read["lat_ns"]["percentile"]
    lat = fio_summary(report)["read"]["lat_ns"]
    assert (lat["p50"], lat["p99.9"]) == (111, 222)
    assert lat["mean"] == pytest.approx(51286.299254)  # still submit-to-completion


def test_several_jobs_are_refused():
    report = json.loads(FIXTURE.read_text())
    report["jobs"].append(report["jobs"][0])
    with pytest.raises(RunError, match="group_reporting"):
        fio_summary(report)


def test_warnings_before_the_json_are_skipped():
    text = FIXTURE.read_text()
    noisy = "note: both iodepth >= 1 and synchronous I/O engine are selected {really}\n" + text + "\ntrailing\n"
    assert parse_fio_output(noisy) == json.loads(text)
    assert parse_fio_output("fio: no JSON here") is None


def _fake_fio(monkeypatch, stdout: str, stderr: str = "", returncode: int = 0) -> None:
    monkeypatch.setattr(fiomod.shutil, "which", lambda name: "/usr/bin/fio")

    def fake_run(args, **kw):
        return subprocess.CompletedProcess(args, returncode, stdout, stderr)

    monkeypatch.setattr(fiomod.subprocess, "run", fake_run)


def test_run_fio_reports_a_failed_job(monkeypatch):
    report = json.loads(FIXTURE.read_text())
    report["jobs"][0]["error"] = errno.ENOTTY
    _fake_fio(monkeypatch, json.dumps(report), "fio: pid=1, err=25/file:ioengines.c:399, func=td_io_queue", 1)
    with pytest.raises(RunError, match="error 25 .*td_io_queue"):
        run_fio(["fio", "--name=x"])


def test_run_fio_without_json(monkeypatch):
    _fake_fio(monkeypatch, "", "fio: failed parsing random_distribution=zipf:1.0", 1)
    with pytest.raises(RunError, match="failed parsing"):
        run_fio(["fio", "--name=x"])


def test_run_fio_returns_the_report(monkeypatch):
    _fake_fio(monkeypatch, "warning\n" + FIXTURE.read_text())
    assert run_fio(["fio"])["jobs"][0]["read"]["total_ios"] == 75912


# ---------------------------------------------------------------------------------------------------------
# fio missing


def test_missing_fio_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(fiomod.shutil, "which", lambda name: None)
    assert fio_available() is None
    with pytest.raises(TargetError, match="fio is not installed; apt-get install fio"):
        require_fio()
    with pytest.raises(TargetError, match="apt-get install fio"):
        run_fio(["fio", "--name=x"])
    with pytest.raises(TargetError, match="apt-get install fio"):
        fiomod.fio_check("/nonexistent", from_flags(runtime="1s"))


def test_rounds_take_turns_and_every_other_round_runs_backwards():
    assert round_schedule(2, ["io_uring", "psync"], ["auto"]) == [
        (1, "fio", "io_uring"), (1, "ftlscope", "auto"), (1, "fio", "psync"),
        (2, "fio", "psync"), (2, "ftlscope", "auto"), (2, "fio", "io_uring"),
    ]
    schedule = round_schedule(4, ["io_uring"], ["auto", "psync"])
    assert [(tool, engine) for r, tool, engine in schedule if r == 1] == [
        ("fio", "io_uring"), ("ftlscope", "auto"), ("ftlscope", "psync")]
    assert [(tool, engine) for r, tool, engine in schedule if r == 2] == [
        ("ftlscope", "psync"), ("ftlscope", "auto"), ("fio", "io_uring")]
    # over each pair of rounds, each run comes as often before as after each other run
    assert [r for r, _, _ in schedule] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]


def test_engine_list():
    assert parse_engines("io_uring, libaio,psync") == ["io_uring", "libaio", "psync"]
    with pytest.raises(UsageError, match="posixaio"):
        parse_engines("io_uring,posixaio")


# ---------------------------------------------------------------------------------------------------------
# the comparison


def _row(rnd, tool, engine, backend, iops, p50, cpu, clamped=False):
    return {"round": rnd, "seq": 0, "tool": tool, "engine": engine, "backend": backend, "qd": 1 if clamped else 32,
            "queues": 1, "clamped": clamped, "op": "read", "ops": int(iops), "iops": iops, "bw_bytes": iops * 4096,
            "mean": p50, "stddev": 1.0, "min": 1.0, "max": 1.0, "p50": p50, "p90": p50, "p95": p50,
            "p99": 2 * p50, "p99.9": 3 * p50, "p99.99": 4 * p50, "cpu_ns_per_io": cpu, "measured_ns": 10**9,
            "in_flight": iops * p50 / 1e9}


def _frame():
    return pd.DataFrame([
        _row(1, "fio", "io_uring", "io_uring", 100_000, 300_000, 5000),
        _row(1, "fio", "psync", "psync", 20_000, 50_000, 4000, clamped=True),
        _row(1, "ftlscope", "auto", "io_uring", 110_000, 290_000, 3000),
        _row(2, "fio", "io_uring", "io_uring", 120_000, 310_000, 5000),
        _row(2, "fio", "psync", "psync", 21_000, 50_000, 4000, clamped=True),
        _row(2, "ftlscope", "auto", "io_uring", 130_000, 280_000, 3000),
        _row(3, "fio", "io_uring", "io_uring", 90_000, 305_000, 5000),
        _row(3, "fio", "psync", "psync", 22_000, 50_000, 4000, clamped=True),
        _row(3, "ftlscope", "auto", "io_uring", 99_000, 300_000, 3000),
    ])


def test_comparison_uses_medians_and_fios_best_engine():
    comp = comparison_frame(_frame()).set_index(["tool", "engine"])
    ours = comp.loc[("ftlscope", "auto")]
    assert ours["iops"] == 110_000
    assert ours["rounds"] == 3
    assert ours["reference"] == "io_uring"
    assert ours["iops_ratio"] == pytest.approx(110_000 / 100_000)
    assert ours["p50_ratio"] == pytest.approx(290_000 / 305_000)
    assert ours["cpu_ns_per_io_ratio"] == pytest.approx(3000 / 5000)
    assert comp.loc[("fio", "io_uring"), "iops_ratio"] == pytest.approx(1.0)
    assert ours["in_flight"] == pytest.approx(110_000 * 290_000 / 1e9)  # the median of the rounds' depths


def test_the_table_marks_the_reference_and_qd1():
    console = Console(record=True, width=200)
    console.print(format_comparison(_frame(), "t"))
    text = console.export_text()
    assert "ref" in text
    assert "psync (QD 1)" in text
    assert "auto → io_uring" in text
    assert "in flight" in text and "31.9" in text  # ours: 110 K IOPS x 290 us
    assert "1.10" in text  # the IOPS ratio


# ---------------------------------------------------------------------------------------------------------
# end to end


def _takes_o_direct(base: Path) -> bool:
    probe = base / "probe"
    probe.write_bytes(b"\0" * 4096)
    try:
        os.close(os.open(probe, os.O_RDONLY | os.O_DIRECT))
        return True
    except OSError:
        return False
    finally:
        probe.unlink()


def _direct_dir(tmp_path: Path) -> Path:
    """A directory whose file system takes O_DIRECT (tmpfs before Linux 6.6 does not)."""
    if _takes_o_direct(tmp_path):
        return tmp_path
    base = Path(tempfile.mkdtemp(prefix="ftlscope-test-", dir="/var/tmp"))
    if _takes_o_direct(base):
        return base
    shutil.rmtree(base, ignore_errors=True)
    pytest.skip("no directory here supports O_DIRECT")


def _needs_fio_and_engine():
    if fio_available() is None:
        pytest.skip("fio is not installed (apt-get install fio)")
    try:
        import ftlscope._native  # noqa: F401
    except ImportError:
        pytest.skip("the native engine is not built (maturin develop)")


def test_fio_check_end_to_end(tmp_path):
    _needs_fio_and_engine()
    base = _direct_dir(tmp_path)
    target = str(base / "target.img")
    try:
        df = fiomod.fio_check(target, from_flags(rw="randread", bs="4k", qd=4, runtime="1s"), rounds=2,
                              engines=("io_uring", "psync"), run_kwargs={"size": "64MiB"})
    finally:
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)
    assert list(df["tool"]) == ["fio", "ftlscope", "fio"] * 2
    assert list(df["round"]) == [1, 1, 1, 2, 2, 2]
    assert list(df["seq"]) == [1, 2, 3, 4, 5, 6]
    assert set(df["op"]) == {"read"}
    assert (df["ops"] > 100).all()
    assert (df["p50"] > 0).all() and (df["cpu_ns_per_io"] > 0).all()
    assert list(df.loc[df["tool"] == "fio", "backend"]) == ["io_uring", "psync", "psync", "io_uring"]
    # fio's psync kept the depth with four jobs: every row ran at QD 4
    assert (df["qd"] == 4).all() and not df["clamped"].any()
    # Little's law on each run's own figures: never more in flight than the depth asked for
    assert ((df["in_flight"] > 0.5) & (df["in_flight"] <= 4.4)).all(), df["in_flight"]
    comp = comparison_frame(df)
    ours = comp[comp["tool"] == "ftlscope"].iloc[0]
    assert ours["reference"] in ("io_uring", "psync")
    assert 0.1 < ours["iops_ratio"] < 10


def test_fio_check_refuses_a_simulated_device(capsys):
    from ftlscope.cli import main

    assert main(["fio-check", "sim:consumer-tlc-dram", "--runtime", "1s"]) == 2
    err = capsys.readouterr().err
    assert "simulated device" in err and err.count("\n") == 1


def test_fio_psync_threads_read_what_our_psync_threads_read(tmp_path):
    """The sequential thread plan on both sides: fio's four psync jobs (from its I/O log) and our four psync
    threads (from the trace) read the same blocks, each once."""
    from ftlscope import run

    _needs_fio_and_engine()
    base = _direct_dir(tmp_path)
    target = base / "target.img"
    try:
        workload = from_flags(rw="read", bs="4k", qd=4, ops=64)
        ours = run(str(target), workload, engine="psync", size="1MiB", trace=True)
        log = base / "fio.iolog"
        command = fio_command(str(target), workload, "psync") + [f"--write_iolog={log}"]
        fio_json = run_fio(command, timeout_s=60)
        fio_offsets = [int(line.split()[3]) for line in log.read_text().splitlines()
                       if len(line.split()) == 5 and line.split()[2] == "read"]
    finally:
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)
    assert fio_summary(fio_json)["engine"] == {"backend": "psync", "iodepth": 1, "numjobs": 4}
    assert ours.summary["env"]["engine"]["queue_depth"] == 4
    assert sorted(fio_offsets) == sorted(ours.trace["offset_bytes"]) == [i * 4096 for i in range(64)]
