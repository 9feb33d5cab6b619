"""The ``ftlscope`` command as a user runs it: in a subprocess, looking only at exit codes, stdout/stderr and the
files it writes.

Bad inputs must each give one line on stderr starting ``ftlscope: error:``, exit code 2 and no traceback. The
bad inputs go through ``ftlscope.cli.main`` in-process (a new interpreter spends half a second importing);
a few of them, and everything about signals and permissions, run the installed command in a subprocess.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import ftlscope
from ftlscope import from_flags, run
from ftlscope.cli import main

pytestmark = pytest.mark.usefixtures("state_home")

MiB = 1 << 20


@pytest.fixture(scope="module")
def files(module_scratch) -> dict[str, Path]:
    """An ftlscope-made 16 MiB file, a foreign non-empty file, and a directory."""
    existing = module_scratch / "existing.img"
    run(str(existing), from_flags(rw="randread", ops=1), size="16MiB")
    foreign = module_scratch / "foreign.img"
    foreign.write_bytes(os.urandom(MiB))
    directory = module_scratch / "a-directory"
    directory.mkdir()
    return {"existing": existing, "foreign": foreign, "dir": directory, "root": module_scratch}


# ---------------------------------------------------------------------------------------------------------
# a normal run


def test_run_writes_json_trace_and_windows(cli, scratch):
    target = scratch / "c.img"
    done = cli("run", target, "--size", "32MiB", "--rw", "randread", "--runtime", "0.3s", "--json", "out.json",
               "--trace", "out.parquet", "--windows", "w.csv", cwd=scratch)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    summary = json.loads((scratch / "out.json").read_text())
    assert set(summary) == {"target", "workload", "env", "health", "run", "read"}
    ops = summary["read"]["ops"]
    assert ops > 0 and summary["read"]["errors"] == 0
    assert summary["run"]["stop"] == {"reason": "completed"}
    assert summary["target"]["size_bytes"] == 32 * MiB and summary["target"]["kind"] == "regular_file"
    assert summary["workload"]["stop"]["time_ns"] == 300_000_000
    trace = pd.read_parquet(scratch / "out.parquet")
    assert len(trace) == ops
    assert list(trace.columns) == ["op", "offset_bytes", "size", "queue", "submit_ns", "complete_ns", "latency_ns",
                                   "status", "warmup", "submit_seq"]
    windows = pd.read_csv(scratch / "w.csv")
    assert windows["ops"].sum() == ops
    assert set(windows["op"]) == {"read"}
    # the table on stdout, and the notices on stderr
    assert "read" in done.stdout and "p99.9" in done.stdout
    assert f"{ops:,}" in done.stdout
    assert "created" in done.stderr and "filled" in done.stderr and "wrote" in done.stderr
    assert os.path.getsize(target) == 32 * MiB


def test_run_on_an_existing_file_needs_no_size(cli, files):
    done = cli("run", files["existing"], "--ops", "100", "--quiet", "--json", files["root"] / "e.json")
    assert done.returncode == 0, done.stderr
    assert json.loads((files["root"] / "e.json").read_text())["read"]["ops"] == 100


# ---------------------------------------------------------------------------------------------------------
# bad inputs

BAD_INPUTS = {
    "unknown_rw": (["run", "{existing}", "--rw", "randomread"], "--rw"),
    "bs_not_a_block_multiple": (["run", "{existing}", "--bs", "1000", "--ops", "10"], "--bs"),
    "size_garbage": (["run", "{root}/new.img", "--size", "garbage"], "--size"),
    "missing_without_size": (["run", "{root}/missing.img", "--ops", "10"], "--size"),
    "directory": (["run", "{dir}", "--ops", "10"], "directory"),
    "unknown_engine": (["run", "{existing}", "--engine", "spdk", "--ops", "10"], "--engine"),
    "idle_without_batch": (["run", "{existing}", "--idle", "10ms", "--ops", "10"], "--idle"),
    "unknown_on_error": (["run", "{existing}", "--on-error", "maybe", "--ops", "10"], "--on-error"),
    "bad_runtime": (["run", "{existing}", "--runtime", "soon"], "--runtime"),
    "bad_pattern": (["run", "{existing}", "--pattern", "spiral"], "--pattern"),
    "bad_mix": (["run", "{existing}", "--mix", "read=70,wirte=30"], "--mix"),
    "negative_ops": (["run", "{existing}", "--ops", "-5"], "--ops"),
    "foreign_file_write": (["run", "{foreign}", "--rw", "randwrite", "--ops", "10"], "--destructive"),
    "qd_not_a_number": (["run", "{existing}", "--qd", "abc"], "--qd"),
}

@pytest.fixture
def in_process(capsys) -> Callable[..., subprocess.CompletedProcess]:
    """``in_process("run", ...)``: ``ftlscope.cli.main`` in this process (much faster than a new interpreter,
    which spends half a second importing). Anything but a return or SystemExit from main would be a traceback
    for the user, and fails the test."""

    def call(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse
            code = exc.code
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(["ftlscope", *args], code, captured.out, captured.err)

    return call


@pytest.fixture
def bad(files, in_process) -> Callable[[str], subprocess.CompletedProcess]:
    fields = {k: str(v) for k, v in files.items()}

    def call(case: str) -> subprocess.CompletedProcess:
        return in_process(*(a.format(**fields) for a in BAD_INPUTS[case][0]), "--quiet")

    return call


@pytest.mark.parametrize(
    "case",
    list(BAD_INPUTS),
)
def test_bad_input_is_one_error_line_with_exit_2(bad, case, error_line):
    done = bad(case)
    assert done.returncode == 2, (done.returncode, done.stderr)
    error_line(done)


@pytest.mark.parametrize(
    "case",
    [name for name in BAD_INPUTS if name != "qd_not_a_number"],
)
def test_bad_input_message_names_the_flag(bad, case):
    done = bad(case)
    assert "Traceback" not in done.stderr
    assert BAD_INPUTS[case][1] in done.stderr, done.stderr


def test_bad_inputs_leave_no_files_behind(bad, files):
    bad("size_garbage")
    bad("missing_without_size")
    assert not (files["root"] / "new.img").exists()
    assert not (files["root"] / "missing.img").exists()


def test_foreign_file_refusal_names_the_file_and_leaves_it_alone(bad, files, error_line):
    before = files["foreign"].read_bytes()
    line = error_line(bad("foreign_file_write"))
    assert f"--destructive {files['foreign']}" in line
    assert files["foreign"].read_bytes() == before


@pytest.mark.parametrize("case", ["unknown_rw", "bs_not_a_block_multiple", "directory", "window_zero"])
def test_bad_input_from_the_installed_command(cli, files, case, error_line):
    """The same rules hold for the real console script, in its own process. (A zero --window once made the
    engine emit a window row per nanosecond until memory ran out; --ops 2 keeps that small should it return.)"""
    fields = {k: str(v) for k, v in files.items()}
    args, flag = {**BAD_INPUTS, "window_zero": (["run", "{existing}", "--window", "0", "--ops", "2"], "--window")}[case]
    done = cli(*(a.format(**fields) for a in args), "--quiet")
    assert done.returncode == 2, (done.returncode, done.stderr)
    line = error_line(done)
    if case == "window_zero":
        assert flag in line


@pytest.mark.parametrize("option", [["--window", "0"], ["--io-timeout", "0"]])
def test_refused_run_options_create_no_file(in_process, files, option):
    target = files["root"] / f"not-created{option[0]}.img"
    done = in_process("run", target, "--size", "16MiB", *option, "--ops", "2", "--quiet")
    assert done.returncode == 2
    assert not target.exists()


def _drop_dac_override() -> None:
    """In the child, before exec: give up root's power to ignore file permissions (CAP_DAC_OVERRIDE,
    CAP_DAC_READ_SEARCH). Dropping them from the bounding set means the exec'd process, though uid 0, does not
    get them back."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.fixture
def unreadable_file(scratch):
    """A filled file with mode 000, and how to run a command that permissions apply to.

    As root, permission checks do not apply; setuid to nobody does not work either when Python lives under
    /root (mode 700). So the child keeps uid 0 but drops CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH, which makes
    mode 000 binding for it, as it is for any ordinary user."""
    path = scratch / "locked.img"
    run(str(path), from_flags(rw="randread", ops=1), size="4MiB")
    path.chmod(0)
    preexec = None
    if os.geteuid() == 0:
        probe = subprocess.run(["cat", str(path)], capture_output=True, preexec_fn=_drop_dac_override)
        if probe.returncode == 0:
            pytest.skip("dropping CAP_DAC_OVERRIDE did not make mode 000 binding here")
        preexec = _drop_dac_override
    try:
        yield path, preexec
    finally:
        path.chmod(0o600)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(
            ["--rw", "randread"],
            id="read",
        ),
        pytest.param(["--rw", "randwrite", "--destructive", "{path}"], id="write"),
    ],
)
def test_permission_problem_is_one_error_line(cli, unreadable_file, args, error_line):
    path, preexec = unreadable_file
    done = cli("run", path, *(a.format(path=path) for a in args), "--ops", "10", "--quiet", preexec_fn=preexec)
    assert done.returncode == 2, (done.returncode, done.stderr)
    line = error_line(done)
    assert "permission" in line.lower()


# ---------------------------------------------------------------------------------------------------------
# Ctrl-C


def _engine_running(pid: int) -> bool:
    """Whether the process has an engine queue thread (named ftlscope-q0) right now."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tasks:
        try:
            if Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip() == "ftlscope-q0":
                return True
        except OSError:
            continue
    return False


def _wait_for_engine(proc: subprocess.Popen, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while not _engine_running(proc.pid):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the engine never started (exit {proc.returncode}):\n{err}")
        time.sleep(0.005)


def test_ctrl_c_keeps_the_results(files, scratch, spawn):
    out = scratch / "out.json"
    proc = spawn("run", files["existing"], "--runtime", "30s", "--json", out, "--trace", scratch / "t.parquet")
    try:
        _wait_for_engine(proc)
        time.sleep(0.7)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert took < 5
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    summary = json.loads(out.read_text())
    assert summary["run"]["stop"]["reason"] == "interrupted"
    ops = summary["read"]["ops"]
    assert ops > 0
    assert 0.3e9 < summary["run"]["measured_ns"] < 5e9
    assert len(pd.read_parquet(scratch / "t.parquet")) == ops
    assert f"{ops:,}" in stdout, "the table shows what was measured"


def test_ctrl_c_while_filling_a_new_file_stops(scratch, spawn):
    target = scratch / "big.img"
    out = scratch / "out.json"
    size = 4 << 30  # sparse; at ~3 GB/s only about a third of it gets written before Ctrl-C
    proc = spawn("run", target, "--size", size, "--runtime", "1s", "--json", out, "--quiet")
    try:
        _wait_for_engine(proc)  # the first engine run is the fill
        time.sleep(0.3)  # well inside the fill's progress loop
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    fd = os.open(target, os.O_RDONLY)
    try:
        filled_up_to = os.lseek(fd, 0, os.SEEK_HOLE)
    finally:
        os.close(fd)
    if filled_up_to == size:
        pytest.skip("the fill finished before Ctrl-C arrived; cannot test interrupting it")
    assert "Traceback" not in stderr
    assert proc.returncode == 130, f"exit {proc.returncode}; stderr:\n{stderr}"
    assert "filled" not in stderr


# ---------------------------------------------------------------------------------------------------------
# other commands


def test_devices(cli):
    done = cli("devices")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "device" in done.stdout and "ftlscope would write" in done.stdout
    if Path("/sys/block/vda").exists():
        assert "/dev/vda" in done.stdout


def test_version(cli):
    done = cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"ftlscope {ftlscope.__version__}"


def test_no_command_is_a_usage_error(cli):
    done = cli()
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
