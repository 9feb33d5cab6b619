"""A split replay (`replay --queues N`) whose spill files fill their file system: one line naming the directory,
what a request takes there and the fix, exit 2, nothing written and no spill left behind. The full file system is a
tmpfs of 64 KiB, mounted for the test (root only: skipped where mounting is not allowed)."""

from __future__ import annotations

import subprocess

import pytest
from test_replay_queues_streamed import _spill_dirs, _trace

from ftlscope.cli import main

SIM = "sim:consumer-tlc-dram"


@pytest.fixture
def small_file_system(tmp_path):
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "ftlscope-test", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def test_a_split_trace_that_fills_its_disk_is_one_line_and_leaves_nothing(tmp_path, small_file_system, capsys):
    # 60,000 requests take ~300 KB of spill files at ~5 B each (zstd blocks; 21 B packed): the 64 KiB file system
    # fills during the split.
    path, _ = _trace(tmp_path, n=60_000)
    code = main(["replay", SIM, str(path), "--quiet", "--queues", "3", "--destructive", SIM, "--no-precondition",
                 "--timing", "afap", "--json", str(small_file_system / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "--queues" in err and "cannot write the split trace" in err and str(small_file_system) in err, err
    assert "21 B a request" in err and "free room" in err, err
    assert list(small_file_system.iterdir()) == [] and _spill_dirs(tmp_path) == []
