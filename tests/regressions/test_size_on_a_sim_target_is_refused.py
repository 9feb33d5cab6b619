"""``profile sim:PRESET --size 16GiB`` ran over the preset's whole capacity: for bench, probe and profile ``--size``
is the size of a file they create, and a simulated drive ignored it (zoning then filled 238 GiB first). It is now
refused in one line that names the flag that confines the ranges."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(("argv", "hint"), [
    (["profile", "sim:optane-like", "--size", "1GiB"], "--span 1GiB"),
    (["probe", "sim:optane-like", "--size", "1GiB"], "--span 1GiB"),
    (["bench", "sim:optane-like", "zoning", "--size", "1GiB"], "--param span=1GiB"),
])
def test_size_on_a_simulated_drive_is_one_line_naming_the_flag_to_use(argv, hint, tmp_path):
    done = subprocess.run([sys.executable, "-m", "ftlscope.cli", *argv, "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "--size 1GiB" in lines[0] and hint in lines[0]
    assert not (tmp_path / "out").exists()  # refused before anything ran
