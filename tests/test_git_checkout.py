"""git-checkout: the synthetic repository is deterministic (same seed, same commit ids) and has the shape asked
for; on a loop device (root) the checkouts make the table, the trace rows, the findings and the figures, and
nothing stays mounted or attached; a simulated disk is attached for the run and detached; without git the
experiment is skipped with the reason; bad parameters are refused by name."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pandas as pd
import pytest

from ftlscope import plots
from ftlscope.errors import UsageError
from ftlscope.experiments import get, git_checkout, run_experiment
from ftlscope.experiments._synthetic_tree import (
    TreeShape,
    directories,
    git,
    git_program,
    history,
    initial_files,
    make_repository,
    tag_name,
)

MiB = 1 << 20
SMALL = {"files": "200", "dirs": "20", "tags": "3", "change_share": "0.05", "trace_checkout": "2",
         "span": "256MiB"}


def _need_git() -> None:
    if git_program() is None:
        pytest.skip("git not installed (Debian package git)")


def _tags(repo) -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/tags").stdout
    return dict(line.split() for line in out.splitlines())


def _mounts_of(device: str) -> str:
    return subprocess.run(["findmnt", "--noheadings", "--source", device], capture_output=True, text=True).stdout


def my_loops(losetup: str) -> list[str]:
    """Loop devices this test process's attaches made (their backing file is under a run directory named with
    this pid); other processes on the machine may attach their own meanwhile."""
    out = subprocess.run([losetup, "--list", "--noheadings"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if f"-{os.getpid()}-" in line]


def test_same_seed_same_repository(tmp_path):
    _need_git()
    shape = TreeShape(files=150, dirs=15, tags=4, change_share=0.1, seed=7)
    make_repository(tmp_path / "a", shape)
    make_repository(tmp_path / "b", shape)
    make_repository(tmp_path / "c", TreeShape(150, 15, 4, 0.1, seed=8))
    a, b, c = _tags(tmp_path / "a"), _tags(tmp_path / "b"), _tags(tmp_path / "c")
    assert sorted(a) == [tag_name(i) for i in range(5)]
    assert a == b  # same seed: the same commits, byte for byte
    assert not set(a.values()) & set(c.values())  # another seed: another history
    files = git(tmp_path / "a", "ls-tree", "-r", "--name-only", tag_name(0)).stdout.split()
    assert len(files) == 150


def test_the_tree_has_the_shape_asked_for():
    shape = TreeShape(files=3000, dirs=180, tags=10, change_share=0.03, seed=1)
    dirs = directories(shape)
    assert len(dirs) == 181 and len(set(dirs)) == 181  # the root and 180 more
    files = initial_files(shape)
    assert len(files) == 3000
    # every directory holds a file (git keeps no empty directory), so a checkout makes all of them
    homes = {os.path.dirname(path) for path, _, _ in files.values()}
    assert homes == set(dirs)
    sizes = np.array([size for _, size, _ in files.values()])
    assert 3 * 1024 < np.median(sizes) < 8 * 1024 and sizes.max() <= 2 * MiB and sizes.min() >= 1
    snapshots = list(history(shape))
    assert len(snapshots) == 11 and len(snapshots[0].written) == 3000
    # each tag changes change_share of the files then present
    live = 3000
    for snap in snapshots[1:]:
        changed = len(snap.written) + len(snap.deleted)
        assert changed == round(0.03 * live)
        live = live + sum(1 for f in snap.written if f >= 3000 and snap.written[f][2] == 0) - len(snap.deleted)


@pytest.mark.parametrize(("param", "value", "message"), [
    ("change_share", "0", "--param change_share: give a share above 0"),
    ("trace_checkout", "9", "--param trace_checkout: give 0 (no trace) or a checkout from 1 to tags=3"),
    ("tags", "0", "--param tags: give at least 1"),
    ("fs", "zfs", "--param fs: unknown file system zfs"),
])
def test_bad_parameters_are_named(param, value, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        get("git-checkout").resolve_params({**SMALL, param: value})


def test_a_file_target_is_refused(tmp_path):
    outcome = run_experiment(get("git-checkout"), str(tmp_path / "file.img"), out=tmp_path, params=SMALL,
                             size=16 * MiB)
    assert isinstance(outcome.error, UsageError) and "give a block device" in outcome.error.message


def test_checkouts_on_a_loop_device(make_loop, tmp_path):
    _need_git()
    device, _ = make_loop(256 * MiB)
    outcome = run_experiment(get("git-checkout"), device, out=tmp_path, params=SMALL, destructive=device)
    assert outcome.completed, outcome.error
    table = pd.read_csv(outcome.directory / "results.csv")
    checkouts = table[table["kind"] == "checkout"].sort_values("index")
    assert list(checkouts["index"]) == [1, 2, 3] and (checkouts["status"] == "measured").all()
    assert (checkouts["checkout_s"] > 0).all() and (checkouts["sync_s"] >= 0).all()
    assert np.allclose(checkouts["cumulative_s"], checkouts["total_s"].cumsum())
    assert list(checkouts["traced"]) == [False, True, False]
    assert (checkouts["files_changed"] == 10).all()  # 5 % of 200
    trace = table[table["kind"] == "trace"].set_index("op")
    # the traced checkout starts with a cold cache: it reads the index, the pack and the inodes
    assert trace.loc["read", "requests"] > 0 and trace.loc["read", "q2c_mean_ms"] > 0
    assert trace.loc["read", "q2c_p10_ms"] <= trace.loc["read", "q2c_p50_ms"] <= trace.loc["read", "q2c_p90_ms"]
    windows = table[table["kind"] == "window"]
    assert windows["requests"].sum() == trace["requests"].sum()
    assert (outcome.directory / "raw" / "rep0" / "checkout-0002.trace.parquet").exists()
    f = outcome.findings
    assert f["checkouts"]["value"] == 3
    assert f["total_s"]["value"] == pytest.approx(checkouts["total_s"].sum())
    assert f["mean_checkout_s"]["value"] == pytest.approx(checkouts["total_s"].mean())
    assert f["trace_read_requests"]["value"] == trace.loc["read", "requests"]
    assert [p.name for p in outcome.figures] == ["git_checkout.png", "git_checkout_trace.png"]
    assert "accumulated" in plots.caption_of(outcome.figures[0])
    notes = " ".join(outcome.conditions["notes"])
    assert "ext4" in notes and "dropped before each timed step" in notes and "200 files in 20 directories" in notes
    assert "the thesis's kernel tree: almost 29,000 files" in notes  # the conditions say how it compares
    # nothing left: no mount, no file system signature
    assert _mounts_of(device) == ""
    assert subprocess.run(["wipefs", "--noheadings", device], capture_output=True, text=True).stdout == ""


def test_without_git_it_is_skipped_with_the_reason(make_loop, tmp_path, monkeypatch):
    device, _ = make_loop(64 * MiB)
    monkeypatch.setattr(git_checkout, "git_program", lambda: None)
    outcome = run_experiment(get("git-checkout"), device, out=tmp_path, params=SMALL, destructive=device)
    assert outcome.completed, outcome.error
    assert list(outcome.table["status"]) == ["skipped"]
    assert "git is not installed" in outcome.table["reason"].iloc[0]
    assert any("git-checkout skipped: git is not installed" in n for n in outcome.conditions["notes"])
    assert outcome.figures == []


def test_without_a_capture_the_checkouts_run_untraced(make_loop, tmp_path, monkeypatch):
    _need_git()
    device, _ = make_loop(128 * MiB)
    monkeypatch.setattr(git_checkout, "capture_command",
                        lambda device, out: ["sh", "-c", "echo 'tracefs: not mounted' >&2"])
    outcome = run_experiment(get("git-checkout"), device, out=tmp_path,
                             params={**SMALL, "tags": "1", "trace_checkout": "1", "span": "0"}, destructive=device)
    assert outcome.completed, outcome.error
    table = outcome.table
    assert list(table["kind"]) == ["checkout"] and not table["traced"].any()
    assert any("no block trace: ftlscope capture did not start (tracefs: not mounted)" in n
               for n in outcome.conditions["notes"])
    assert [p.name for p in outcome.figures] == ["git_checkout.png"]
    assert _mounts_of(device) == ""


def test_on_an_attached_simulated_disk(losetup, tmp_path):
    _need_git()
    if not os.path.exists("/dev/fuse"):
        pytest.skip("attaching a simulated drive needs /dev/fuse (FUSE)")
    outcome = run_experiment(get("git-checkout"), "sim:hdd-7200-consumer", out=tmp_path,
                             params={**SMALL, "tags": "2", "trace_checkout": "1"}, size=1 << 30)
    assert outcome.completed, outcome.error
    checkouts = outcome.table[outcome.table["kind"] == "checkout"]
    assert len(checkouts) == 2 and (checkouts["total_s"] > 0).all()
    (note,) = [n for n in outcome.conditions["notes"] if "sim:hdd-7200-consumer attached as /dev/loop" in n]
    device = note.split(" attached as ")[1].split()[0]
    assert my_loops(losetup) == []  # the attach's loop device is gone
    assert _mounts_of(device) == ""
