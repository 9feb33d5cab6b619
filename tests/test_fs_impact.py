"""fs-impact on a loop device (root only): the four operations on ext4 and ext2 make the table, the findings and
the figure, and nothing stays mounted; refusals without --destructive, of a mounted device (the CLI's one line),
the refusal of a file, and a simulated drive attached
for the run and detached; the mount is undone when the run is interrupted."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile

import pandas as pd
import pytest

from ftlscope import plots
from ftlscope.errors import SafetyError, UsageError
from ftlscope.experiments import get, run_experiment
from ftlscope.experiments.context import Context

MiB = 1 << 20
TINY = {"span": "4MiB", "runtime": "50ms", "warmup": "0", "filesystems": "ext4,ext2"}


def _need_mkfs(*systems: str) -> None:
    for fs in systems:
        if shutil.which(f"mkfs.{fs}") is None:
            pytest.skip(f"mkfs.{fs} not installed (Debian package e2fsprogs)")


def _mounted(device: str) -> list[str]:
    real = os.path.realpath(device)
    with open("/proc/self/mounts") as f:
        return [line for line in f if os.path.realpath(line.split()[0]) == real]


def _mount_points() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "ftlscope-fs-impact-*")))


def _signatures(device: str) -> str:
    return subprocess.run(["wipefs", "--noheadings", device], capture_output=True, text=True).stdout.strip()


def test_unknown_file_system_is_named():
    with pytest.raises(UsageError, match="--param filesystems: unknown file system zfs"):
        get("fs-impact").resolve_params({"filesystems": "ext4,zfs"})


def test_four_operations_on_two_file_systems(make_loop, tmp_path):
    _need_mkfs("ext4", "ext2")
    device, _ = make_loop(64 * MiB)
    before = _mount_points()
    outcome = run_experiment(get("fs-impact"), device, out=tmp_path, params=TINY, destructive=device, repeat=2)
    assert outcome.completed, outcome.error
    table = pd.read_csv(outcome.directory / "results.csv")
    assert set(zip(table["filesystem"], table["operation"], strict=True)) == {
        (fs, op) for fs in ("ext4", "ext2")
        for op in ("sequential_write", "sequential_read", "random_read", "random_write")}
    assert (table["status"] == "measured").all()
    assert (table["mb_s"] > 0).all() and (table["n"] == 2).all() and "mb_s_std" in table
    assert (table["file_bytes"] == 4 * MiB).all()
    findings = outcome.findings
    assert findings["filesystems_measured"]["value"] == 2
    for op in ("sequential_write", "sequential_read", "random_read", "random_write"):
        best, worst = findings[f"{op}_best_mb_s"]["value"], findings[f"{op}_worst_mb_s"]["value"]
        assert best >= worst > 0
        assert findings[f"{op}_spread_ratio"]["value"] == pytest.approx(best / worst)
        assert set(table.loc[table["operation"] == op, "mb_s"]) == {best, worst} or best == worst
    (figure,) = outcome.figures
    assert figure.name == "fs_impact.png" and "file system" in plots.caption_of(figure)
    # every run went to the file on the mounted file system, through the engine, and was kept in raw/
    labels = [run["label"] for run in outcome.conditions["runs"]]
    assert len(labels) == 2 * 2 * 4 and labels[0] == "ext4 sequential write 1 MiB"
    # nothing left behind: no mount of the device, no mount point, no file system signature
    assert _mounted(device) == []
    assert _mount_points() <= before
    assert _signatures(device) == ""


def test_an_interrupted_run_unmounts(make_loop, tmp_path, monkeypatch):
    _need_mkfs("ext4")
    device, _ = make_loop(64 * MiB)
    before = _mount_points()
    real_run = Context.run
    calls = []

    def run_then_interrupt(self, workload, label, **kwargs):
        calls.append(label)
        if len(calls) == 2:
            assert _mounted(device), "the second run happens on the mounted file system"
            raise KeyboardInterrupt
        return real_run(self, workload, label, **kwargs)

    monkeypatch.setattr(Context, "run", run_then_interrupt)
    outcome = run_experiment(get("fs-impact"), device, out=tmp_path, params={**TINY, "filesystems": "ext4"},
                             destructive=device)
    assert not outcome.completed and "interrupted" in outcome.error.message
    assert _mounted(device) == []
    assert _mount_points() <= before
    assert _signatures(device) == ""


def test_refused_without_destructive(make_loop, tmp_path):
    device, _ = make_loop(64 * MiB)
    with pytest.raises(SafetyError, match=f"pass --destructive {device} to confirm"):
        run_experiment(get("fs-impact"), device, out=tmp_path, params=TINY)


def test_refused_on_a_mounted_device(make_loop, cli, error_line, scratch):
    _need_mkfs("ext4")
    device, _ = make_loop(64 * MiB)
    assert subprocess.run(["mkfs.ext4", "-F", "-q", device], capture_output=True).returncode == 0
    point = scratch / "mnt"
    point.mkdir()
    assert subprocess.run(["mount", device, str(point)], capture_output=True).returncode == 0
    try:
        done = cli("bench", device, "fs-impact", "--destructive", device, "--force", "--param", "runtime=50ms")
        assert done.returncode == 2
        assert "mounted" in error_line(done) and "unmount it first" in error_line(done)
        assert len(_mounted(device)) == 1  # still the one mount the test made
    finally:
        subprocess.run(["umount", str(point)], capture_output=True)


def test_a_file_target_is_refused_with_the_way_out(tmp_path):
    outcome = run_experiment(get("fs-impact"), str(tmp_path / "file.img"), out=tmp_path, params=TINY,
                             size=16 * MiB)
    assert isinstance(outcome.error, UsageError) and "give a block device" in outcome.error.message


def test_a_simulated_target_is_attached_for_the_run_and_detached(losetup, tmp_path):
    _need_mkfs("ext4")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("attaching a simulated drive needs /dev/fuse")
    loops_before = subprocess.run([losetup, "--list", "--noheadings"], capture_output=True, text=True).stdout
    outcome = run_experiment(get("fs-impact"), "sim:consumer-tlc-dram", out=tmp_path,
                             params={**TINY, "filesystems": "ext4", "attach_size": "64MiB"})
    assert outcome.completed, outcome.error
    table = outcome.table
    assert list(table["status"]) == ["measured"] * 4 and (table["mb_s"] > 0).all()
    # The drive's own time for each phase (the server's counters, read before and after it).
    assert (table["drive_s"] > 0).all() and (table["drive_mb_s"] > 0).all()
    assert any("sim:consumer-tlc-dram attached as /dev/loop" in note for note in outcome.conditions["notes"])
    loops_after = subprocess.run([losetup, "--list", "--noheadings"], capture_output=True, text=True).stdout
    assert loops_after == loops_before  # the loop device the attach made is gone
    assert not glob.glob(os.path.join(tempfile.gettempdir(), "ftlscope-fs-impact-*"))
