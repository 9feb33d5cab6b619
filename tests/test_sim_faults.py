"""A simulated device's `[faults]` and `[thermal]` through ``ftlscope run sim:FILE.toml``, as a user sees them:
a failed read names its offset, a command that never completes is caught by ``--io-timeout``, a device that
stops responding ends the run with one line and keeps what was measured, and temperature shows in health."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ftlscope as ftlscope_api
from ftlscope.cli import main
from ftlscope.sim import SimDevice

pytestmark = pytest.mark.usefixtures("state_home")

DEVICE = '[device]\ncapacity = "64MiB"\n[geometry]\nchannels = 4\nchips_per_channel = 2\n'


def device(tmp_path: Path, extra: str) -> str:
    path = tmp_path / "dev.toml"
    path.write_text(DEVICE + extra)
    return f"sim:{path}"


def ftlscope(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("ftlscope: error:")]


def test_a_read_of_a_bad_range_fails_with_its_offset(tmp_path, capsys):
    target = device(tmp_path, '[faults]\nbad_ranges = [{ start = "1MiB", length = "64KiB" }]\n')
    out = tmp_path / "out.json"
    code, _, err = ftlscope(capsys, "run", target, "--rw", "randread", "--ops", "50000", "--json", out, "--quiet")
    assert code == 1
    [line] = error_lines(err)
    assert "Traceback" not in err
    stop = json.loads(out.read_text())["run"]["stop"]
    assert stop["reason"] == "io_error" and stop["errno"] == 5
    assert (1 << 20) <= stop["offset"] < (1 << 20) + 65536
    assert f"read at byte {stop['offset']} failed" in line


def test_a_lost_command_is_caught_by_the_io_timeout(tmp_path, capsys):
    target = device(tmp_path, "[faults]\nlost_command_rate = 0.001\n")
    out = tmp_path / "out.json"
    code, _, err = ftlscope(capsys, "run", target, "--rw", "randread", "--qd", "8", "--ops", "100000",
                            "--io-timeout", "2s", "--json", out, "--quiet")
    assert code == 1
    [line] = error_lines(err)
    assert "outstanding for 2.0 s, past --io-timeout" in line
    summary = json.loads(out.read_text())
    assert summary["run"]["stop"]["reason"] == "timeout"
    assert summary["read"]["ops"] > 100, "what completed before the time-out is kept"


def test_a_device_that_stops_responding_ends_the_run_in_one_line(tmp_path, capsys):
    target = device(tmp_path, '[faults]\nstop_responding_after = "1s"\n')
    out = tmp_path / "out.json"
    # Read fresh (--no-precondition): filling the range first would use up the second before the hang.
    code, _, err = ftlscope(capsys, "run", target, "--rw", "randread", "--runtime", "10s", "--io-timeout", "1s",
                            "--no-precondition", "--json", out, "--quiet")
    assert code == 1
    [line] = error_lines(err)
    assert "the device may be hung; results so far are kept" in line
    summary = json.loads(out.read_text())
    assert summary["read"]["ops"] > 1000
    assert summary["run"]["stop"]["reason"] == "timeout"


def test_temperature_and_throttle_time_show_in_the_health_samples(tmp_path):
    path = tmp_path / "hot.toml"
    path.write_text(DEVICE + '[thermal]\nheat_per_gb = "50C"\nthrottle_above = "37C"\n')
    result = ftlscope_api.run(SimDevice.open(str(path)), ftlscope_api.from_flags(rw="write", bs="128k", qd=4,
                                                                                    ops=2048),
                              health_interval="10ms")
    samples = result.summary["health"]["samples"]
    temperatures = [s["temperature_c"] for s in samples]
    assert temperatures[0] == 35.0 and max(temperatures) > 37.0
    assert samples[-1]["thermal_throttle_s"] > 0
