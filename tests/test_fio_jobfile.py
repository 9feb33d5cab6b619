"""``ftlscope run JOBFILE.fio``: fio's common options map onto run's flags ([global] inherited, the job's own
override it), everything else is refused in one line naming each option (exit 2, before any I/O)."""

from __future__ import annotations

import json
import textwrap

import pytest

from ftlscope.cli import main
from ftlscope.errors import UsageError
from ftlscope.fio_jobfile import looks_like_jobfile, read_jobfile

pytestmark = pytest.mark.usefixtures("state_home")

MiB = 1 << 20


def jobfile(tmp_path, text: str, name: str = "job.fio"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_common_options_map_onto_runs_flags(tmp_path):
    job = read_jobfile(jobfile(tmp_path, r"""
        ; comments and options without a value, as fio takes them
        [global]
        ioengine=io_uring
        direct=1
        bs=64kb
        iodepth=16
        rw=randread
        # the job's own options override [global]
        [mixed]
        filename=sim\:consumer-tlc-dram
        rw=randrw
        rwmixwrite=30
        numjobs=2
        size=1g
        offset=4m
        time_based
        runtime=2s
        ramp_time=500ms
        rate=10m,5m
        rate_iops=1000
        randseed=7
        group_reporting
    """))
    assert job.job == "mixed"
    assert job.flags == {
        "target": "sim:consumer-tlc-dram", "rw": "randrw", "pattern": "permutation", "bs": str(64 * 1024),
        "qd": 16, "queues": 2, "offset": str(4 * MiB), "size": str(1 << 30), "runtime": f"{2 * 10**9}ns",
        "warmup": f"{500 * 10**6}ns", "rwmixread": 70,
        # fio's limits are per job: two jobs, twice the run's limit
        "rate": f"{20 * MiB},{10 * MiB},{10 * MiB}", "rate_iops": "2000,2000,2000",
        "buffered": False, "engine": "uring", "seed": 7,
    }
    assert job.global_options["bs"] == "64kb"


@pytest.mark.parametrize(("line", "flags"), [
    ("ioengine=psync", {"engine": "psync"}),
    ("ioengine=sync", {"engine": "psync"}),
    ("ioengine=pvsync", {"engine": "psync"}),
    ("ioengine=libaio", {"engine": "uring"}),
    ("norandommap", {"pattern": None}),  # offsets drawn independently, as fio's without its random map
    ("kb_base=1000", {"bs": "4000", "total_bytes": "1000000"}),
    ("direct=0", {"buffered": True}),
    ("buffered=0", {"buffered": False}),
    ("direct=1", {"buffered": False}),
    ("readwrite=randwrite", {"rw": "randwrite"}),
    ("blocksize=8k", {"bs": "8192"}),
])
def test_each_mapping(tmp_path, line, flags):
    job = read_jobfile(jobfile(tmp_path, f"""
        [j]
        filename=/dev/x
        rw=randread
        bs=4k
        size=1m
        {line}
    """))
    for key, expected in flags.items():
        assert job.flags.get(key) == expected, key
    if line == "ioengine=libaio":
        assert any("libaio" in n for n in job.notices)


def test_a_synchronous_engine_keeps_one_request_per_job_as_fio(tmp_path):
    job = read_jobfile(jobfile(tmp_path, """
        [j]
        filename=/dev/x
        size=1m
        ioengine=psync
        iodepth=8
        numjobs=4
    """))
    assert (job.flags["engine"], job.flags["qd"], job.flags["queues"]) == ("psync", 1, 4)
    assert any("iodepth=8 has no effect" in n for n in job.notices)


def test_without_time_based_size_per_job_is_the_stop_and_buffered_is_fios_default(tmp_path):
    job = read_jobfile(jobfile(tmp_path, """
        [j]
        filename=/var/tmp/x.img
        rw=write
        size=8m
        numjobs=4
    """))
    assert job.flags["total_bytes"] == str(32 * MiB)
    assert "pattern" not in job.flags  # sequential
    assert job.flags["buffered"] is True
    assert any("direct=1" in n for n in job.notices)


@pytest.mark.parametrize(("text", "message"), [
    ("[global]\nbs=4k\nverify=md5\n[j]\nfilename=/dev/x\nbssplit=4k/50:8k/50\nsize=1m\n",
     "fio option(s) ftlscope does not run: bssplit, verify ("),
    ("[a]\nfilename=/dev/x\nsize=1m\n[b]\nfilename=/dev/y\nsize=1m\n", "2 jobs (a, b): ftlscope runs one job"),
    ("[j]\nfilename=/dev/x:/dev/y\nsize=1m\n", "several files"),
    ("[j]\nsize=1m\n", "no filename"),
    ("[j]\nfilename=/dev/x\nbs=4k,8k\nsize=1m\n", "per-direction sizes"),
    ("[j]\nfilename=/dev/x\nrw=randread:8\nsize=1m\n", "rw=randread:8"),
    ("[j]\nfilename=/dev/x\nioengine=sg\nsize=1m\n", "ioengine=sg"),
    ("[j]\nfilename=/dev/x\n", "give size= or time_based"),
    ("[j]\nfilename=/dev/x\ntime_based\n", "time_based needs runtime"),
    ("[j]\nfilename=/dev/x\nsize=10%\n", "size=10%"),
    ("[j]\nfilename=/dev/x\nsize=1m\niodepth=deep\n", "iodepth=deep"),
    ("[j]\nfilename=/dev/x\nsize=1m\nkb_base=1023\n", "kb_base"),
    ("bs=4k\n[j]\n", "not a fio job file"),
    ("[global]\nbs=4k\n", "no job section"),
])
def test_refusals_are_one_line(tmp_path, text, message):
    with pytest.raises(UsageError, match=None) as info:
        read_jobfile(jobfile(tmp_path, text))
    assert message in info.value.message
    assert "\n" not in info.value.message


def test_a_jobfile_is_recognised_by_its_name_or_its_first_bracket(tmp_path):
    assert looks_like_jobfile(jobfile(tmp_path, "[j]\n", "plain.txt"))
    assert looks_like_jobfile(str(tmp_path / "missing.fio"))
    assert not looks_like_jobfile(jobfile(tmp_path, "data", "disk.img"))
    assert not looks_like_jobfile("sim:consumer-tlc-dram")


def test_run_jobfile_end_to_end(tmp_path, capsys):
    path = jobfile(tmp_path, r"""
        [global]
        direct=1
        bs=4k
        time_based
        runtime=1
        [paced]
        filename=sim\:consumer-tlc-dram
        rw=randread
        iodepth=4
        rate_iops=500
    """)
    out = tmp_path / "out.json"
    assert main(["run", path, "--json", str(out), "--json-format", "fio", "--quiet"]) == 0
    report = json.loads(out.read_text())
    job = report["jobs"][0]
    assert job["jobname"] == "paced" and report["global options"]["bs"] == "4k"
    assert job["read"]["total_ios"] == 500
    assert job["job options"]["iodepth"] == "4"


def test_a_flag_that_the_jobfile_also_sets_is_refused(tmp_path, capsys):
    path = jobfile(tmp_path, "[j]\nfilename=sim\\:consumer-tlc-dram\niodepth=4\nsize=1m\n")
    assert main(["run", path, "--qd", "8", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ftlscope: error: --qd: the job file sets it too; drop --qd or the option in {path}"
