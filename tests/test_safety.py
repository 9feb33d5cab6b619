"""The write-safety policy, on regular files and on real loop devices.

The loop-device tests need root and util-linux's losetup; they are skipped (with the reason) otherwise. Every
loop device and mount a test makes is undone in a fixture/finally, even when the test fails.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ftlscope import safety
from ftlscope.devices import resolve_block_device
from ftlscope.errors import SafetyError, TargetError
from ftlscope.safety import (
    XATTR_NAME,
    check_write_allowed,
    describe_write_verdict,
    mark_created,
    registry_path,
    was_created_by_ftlscope,
)

MiB = 1024 * 1024


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    """Keep the created-files registry inside the test's tmp_path."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def _allowed(target, **kw) -> None:
    kw.setdefault("writes", True)
    kw.setdefault("destructive", None)
    kw.setdefault("force", False)
    check_write_allowed(str(target), **kw)


def _refused(target, exc=SafetyError, **kw) -> str:
    with pytest.raises(exc) as info:
        _allowed(target, **kw)
    message = str(info.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------------------------------------------
# targets that are not devices


def test_sim_targets_always_pass():
    _allowed("sim:tlc-1tb", writes=True)
    _allowed("sim:qlc", writes=False)


def test_read_only_on_missing_path_is_a_target_error(tmp_path):
    missing = tmp_path / "nope"
    msg = _refused(missing, TargetError, writes=False)
    assert msg == (
        f"no such file or device: {missing}; "
        "give an existing block device, a regular file path, or sim:PRESET"
    )


def test_read_only_passes_on_anything_that_exists(tmp_path):
    foreign = tmp_path / "data.bin"
    foreign.write_bytes(b"precious")
    _allowed(foreign, writes=False)
    _allowed(tmp_path, writes=False)
    _allowed("/dev/null", writes=False)


def test_new_file_needs_no_flag(tmp_path):
    _allowed(tmp_path / "new.img")


def test_new_file_in_missing_directory(tmp_path):
    msg = _refused(tmp_path / "no" / "dir" / "x.img", TargetError)
    assert "no such directory" in msg


def test_new_file_under_dev_is_refused():
    msg = _refused("/dev/ftlscope-no-such-disk", TargetError)
    assert msg.startswith("TARGET /dev/ftlscope-no-such-disk: no such block device")


def test_directory_and_character_device_are_target_errors(tmp_path):
    assert "is a directory" in _refused(tmp_path, TargetError)
    assert "character device" in _refused("/dev/null", TargetError)


def test_dangling_symlink(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    assert "does not exist" in _refused(link, TargetError)


# ---------------------------------------------------------------------------------------------------------
# regular files


def test_created_and_marked_file_needs_no_flag(tmp_path):
    f = tmp_path / "ftl.img"
    f.write_bytes(b"x" * 4096)
    mark_created(f)
    assert was_created_by_ftlscope(f)
    _allowed(f)


def test_foreign_nonempty_file_needs_destructive(tmp_path):
    f = tmp_path / "photos.tar"
    f.write_bytes(b"precious")
    assert not was_created_by_ftlscope(f)
    msg = _refused(f)
    assert msg == (
        f"refusing to overwrite {f}: it is a non-empty file ftlscope did not create; "
        f"pass --destructive {f} to confirm"
    )


def test_foreign_file_with_destructive_naming_it(tmp_path, monkeypatch):
    f = tmp_path / "photos.tar"
    f.write_bytes(b"precious")
    _allowed(f, destructive=str(f))
    monkeypatch.chdir(tmp_path)
    _allowed(f, destructive="photos.tar")  # a relative path to the same file
    link = tmp_path / "alias"
    link.symlink_to(f)
    _allowed(link, destructive=str(f))


def test_foreign_file_with_destructive_naming_another(tmp_path):
    f = tmp_path / "photos.tar"
    f.write_bytes(b"precious")
    other = tmp_path / "other.tar"
    other.write_bytes(b"y")
    msg = _refused(f, destructive=str(other))
    assert f"--destructive names {other}" in msg and f"pass --destructive {f}" in msg


def test_empty_existing_file_needs_no_flag(tmp_path):
    f = tmp_path / "empty.img"
    f.touch()
    _allowed(f)


def test_created_by_ftlscope_override(tmp_path):
    f = tmp_path / "x.img"
    f.write_bytes(b"data")
    _allowed(f, created_by_ftlscope=True)
    mark_created(f)
    assert "--destructive" in _refused(f, created_by_ftlscope=False)


def test_mark_uses_xattr_with_inode(tmp_path):
    f = tmp_path / "x.img"
    f.write_bytes(b"data")
    mark_created(f)
    try:
        value = os.getxattr(f, XATTR_NAME)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            pytest.skip("tmp_path's file system has no user xattrs")
        raise
    assert value == str(f.stat().st_ino).encode()
    assert not registry_path().exists()


def test_copy_with_xattrs_does_not_count(tmp_path):
    f = tmp_path / "x.img"
    f.write_bytes(b"data")
    mark_created(f)
    copy = tmp_path / "copy.img"
    shutil.copy2(f, copy)  # copies user xattrs too
    assert not was_created_by_ftlscope(copy)
    os.replace(copy, f)
    assert not was_created_by_ftlscope(f)


def _no_xattrs(monkeypatch):
    def refuse(*_args, **_kw):
        raise OSError(errno.ENOTSUP, "Operation not supported")

    monkeypatch.setattr(os, "setxattr", refuse)
    monkeypatch.setattr(os, "getxattr", refuse)


def test_registry_fallback_without_xattrs(tmp_path, monkeypatch, _state_home):
    _no_xattrs(monkeypatch)
    f = tmp_path / "x.img"
    f.write_bytes(b"data")
    assert not was_created_by_ftlscope(f)
    mark_created(f)
    assert was_created_by_ftlscope(f)
    _allowed(f)
    reg = _state_home / "ftlscope" / "created-files.json"
    assert registry_path() == reg
    entry = json.loads(reg.read_text())["files"][os.path.realpath(f)]
    assert (entry["dev"], entry["ino"]) == (f.stat().st_dev, f.stat().st_ino)


def test_registry_replaced_file_does_not_count(tmp_path, monkeypatch):
    _no_xattrs(monkeypatch)
    f = tmp_path / "x.img"
    f.write_bytes(b"data")
    mark_created(f)
    replacement = tmp_path / "new"
    replacement.write_bytes(b"someone else's data")  # made while f exists: surely another inode
    os.replace(replacement, f)
    assert not was_created_by_ftlscope(f)
    assert "--destructive" in _refused(f)


def test_registry_forgets_deleted_files(tmp_path, monkeypatch, _state_home):
    _no_xattrs(monkeypatch)
    a, b = tmp_path / "a.img", tmp_path / "b.img"
    a.write_bytes(b"1")
    b.write_bytes(b"2")
    mark_created(a)
    a.unlink()
    mark_created(b)
    files = json.loads((_state_home / "ftlscope" / "created-files.json").read_text())["files"]
    assert list(files) == [os.path.realpath(b)]


def test_registry_survives_corruption(tmp_path, monkeypatch, _state_home):
    _no_xattrs(monkeypatch)
    reg = _state_home / "ftlscope" / "created-files.json"
    reg.parent.mkdir(parents=True)
    reg.write_text("{not json")
    f = tmp_path / "x.img"
    f.write_bytes(b"1")
    assert not was_created_by_ftlscope(f)
    mark_created(f)
    assert was_created_by_ftlscope(f)


def test_registry_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert registry_path() == tmp_path / ".local" / "state" / "ftlscope" / "created-files.json"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    assert registry_path() == tmp_path / ".local" / "state" / "ftlscope" / "created-files.json"


# ---------------------------------------------------------------------------------------------------------
# real loop devices


def _run(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False, **kw)


@pytest.fixture
def losetup() -> str:
    """losetup's path; skips the test when loop devices cannot be used here."""
    if os.geteuid() != 0:
        pytest.skip("loop-device tests need root")
    found = _tool("losetup")
    if found is None:
        pytest.skip("losetup not installed (Debian package mount)")
    return found


@pytest.fixture
def make_loop(tmp_path, losetup):
    """Attach small sparse image files to loop devices; always detached afterwards."""
    attached: list[str] = []

    def make(name: str = "disk", size: int = 64 * MiB, *extra: str) -> str:
        img = tmp_path / f"{name}.img"
        with open(img, "wb") as f:
            f.truncate(size)
        done = _run(losetup, "--find", "--show", "--partscan", *extra, str(img))
        if done.returncode != 0:
            pytest.skip(f"cannot attach a loop device here: {done.stderr.strip()}")
        dev = done.stdout.strip()
        attached.append(dev)
        return dev

    yield make
    for dev in reversed(attached):
        if _tool("partx"):
            _run(_tool("partx"), "-d", dev)
        _run(losetup, "--detach", dev)


@contextlib.contextmanager
def _mounted(dev: str, where: Path):
    where.mkdir(exist_ok=True)
    done = _run("mount", "-t", "ext4", dev, str(where))
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        if _run("umount", str(where)).returncode != 0:
            _run("umount", "-l", str(where))


def _mkfs(dev: str) -> None:
    mkfs = _tool("mkfs.ext4")
    if mkfs is None:
        pytest.skip("mkfs.ext4 not installed (Debian package e2fsprogs)")
    subprocess.run([mkfs, "-q", "-F", dev], check=True, capture_output=True)


def _sfdisk_gpt(dev: str) -> None:
    sfdisk = _tool("sfdisk")
    if sfdisk is None:
        pytest.skip("sfdisk not installed (Debian package fdisk)")
    subprocess.run(
        [sfdisk, "-q", dev], input="label: gpt\n,32M\n", text=True, check=True, capture_output=True
    )


def _partition_gpt(dev: str) -> str:
    """Write a GPT with one partition; return the partition's device path."""
    _sfdisk_gpt(dev)
    name = os.path.basename(dev)
    part = f"{dev}p1"
    sys_part = Path("/sys/block") / name / f"{name}p1"
    # Kernels built without partition-table parsers (or with partscan off) never add the partition: ask
    # partx (userspace parsing, BLKPG ioctl) to add it.
    for _ in range(20):
        if sys_part.exists():
            break
        time.sleep(0.05)
    if not sys_part.exists():
        partx = _tool("partx")
        if partx is None:
            pytest.skip("the kernel did not add the partition and partx is not installed (util-linux)")
        _run(partx, "-a", dev)
    for _ in range(40):
        if sys_part.exists() and os.path.exists(part):
            return part
        time.sleep(0.05)
    pytest.skip(f"the partition {part} did not appear")


def test_loop_clean_refused_without_destructive(make_loop):
    dev = make_loop()
    msg = _refused(dev)
    assert msg == (
        f"refusing to write to {dev}: writing destroys its data; pass --destructive {dev} to confirm"
    )
    # --force alone is not enough
    assert f"pass --destructive {dev}" in _refused(dev, force=True)


def test_loop_refused_when_destructive_names_another_device(make_loop):
    dev, other = make_loop("a"), make_loop("b")
    msg = _refused(dev, destructive=other)
    assert f"--destructive names {other}" in msg and f"pass --destructive {dev} to confirm" in msg


def test_loop_allowed_with_destructive_naming_it(make_loop, tmp_path):
    dev = make_loop()
    _allowed(dev, destructive=dev)
    link = tmp_path / "by-id-ftlscope-test"
    link.symlink_to(dev)
    _allowed(dev, destructive=str(link))  # --destructive through a symlink
    _allowed(str(link), destructive=dev)  # target through a symlink
    assert f"pass --destructive {link}" in _refused(link)


def test_loop_with_ext4_needs_force(make_loop):
    dev = make_loop()
    _mkfs(dev)
    msg = _refused(dev, destructive=dev)
    assert msg == f"{dev} holds an ext4 file system; pass --force as well to overwrite it"
    _allowed(dev, destructive=dev, force=True)


def test_loop_with_gpt_needs_force(make_loop):
    dev = make_loop()
    _sfdisk_gpt(dev)
    msg = _refused(dev, destructive=dev)
    assert msg == f"{dev} holds a gpt partition table; pass --force as well to overwrite it"
    _allowed(dev, destructive=dev, force=True)


def test_loop_mounted_refused_even_with_force(make_loop, tmp_path):
    dev = make_loop()
    _mkfs(dev)
    with _mounted(dev, tmp_path / "mnt") as where:
        msg = _refused(dev, destructive=dev, force=True)
        assert msg == f"refusing to write to {dev}: it is mounted at {where}; unmount it first"
        assert "unmount" in _refused(dev)  # the mount is the first thing to fix
        _allowed(dev, writes=False)  # reading a mounted device is fine
        verdict = describe_write_verdict(resolve_block_device(dev))
        assert verdict == (False, f"no (mounted at {where})")
    _allowed(dev, destructive=dev, force=True)


def test_loop_mount_point_with_space(make_loop, tmp_path):
    dev = make_loop()
    _mkfs(dev)
    with _mounted(dev, tmp_path / "my mnt") as where:
        assert resolve_block_device(dev).mountpoints == [str(where)]
        assert f"mounted at {where}" in _refused(dev, destructive=dev, force=True)


def test_loop_partition_mounted_refuses_disk_and_partition(make_loop, tmp_path):
    dev = make_loop()
    part = _partition_gpt(dev)
    _mkfs(part)
    found = resolve_block_device(part)
    assert found is not None and found.is_partition and found.parent == os.path.basename(dev)
    with _mounted(part, tmp_path / "mnt") as where:
        msg = _refused(dev, destructive=dev, force=True)
        assert msg == (
            f"refusing to write to {dev}: its partition {part} is mounted at {where}; unmount it first"
        )
        msg = _refused(part, destructive=part, force=True)
        assert msg == f"refusing to write to {part}: it is mounted at {where}; unmount it first"
        disk = resolve_block_device(dev)
        assert disk.mountpoints == [str(where)] and [p.path for p in disk.partitions] == [part]
    # unmounted: the partition holds ext4, the disk a GPT
    assert "ext4 file system; pass --force" in _refused(part, destructive=part)
    assert "gpt partition table; pass --force" in _refused(dev, destructive=dev)
    _allowed(part, destructive=part, force=True)


def test_loop_busy_exclusive_open(make_loop):
    dev = make_loop()
    fd = os.open(dev, os.O_RDONLY | os.O_EXCL)  # what a kernel user (dm, md, a mount) would hold
    try:
        msg = _refused(dev, destructive=dev, force=True)
        assert msg.startswith(f"refusing to write to {dev}: it is in use")
    finally:
        os.close(fd)
    _allowed(dev, destructive=dev)


def test_loop_read_only(make_loop):
    dev = make_loop("ro", 64 * MiB, "--read-only")
    msg = _refused(dev, TargetError, destructive=dev, force=True)
    assert msg.startswith(f"{dev} is read-only")
    assert describe_write_verdict(resolve_block_device(dev)) == (False, "no (read-only)")
    _allowed(dev, writes=False)


def test_backing_file_of_mounted_loop_is_refused(make_loop, tmp_path):
    dev = make_loop("backing")
    img = tmp_path / "backing.img"
    _mkfs(dev)
    mark_created(img)  # even a file ftlscope made
    with _mounted(dev, tmp_path / "mnt"):
        msg = _refused(img, destructive=str(img))
        assert f"it is the backing file of {dev}" in msg and "unmount" in msg
    _allowed(img)


def test_verdicts(make_loop):
    dev = make_loop()
    assert describe_write_verdict(resolve_block_device(dev)) == (True, "yes with --destructive")
    _mkfs(dev)
    assert describe_write_verdict(resolve_block_device(dev)) == (
        True,
        "yes with --destructive --force (ext4 signature)",
    )


def test_verdict_from_given_signatures_and_holders(make_loop):
    dev = resolve_block_device(make_loop())
    assert describe_write_verdict(dev, sigs=["gpt partition table"]) == (
        True,
        "yes with --destructive --force (gpt partition table)",
    )
    dev.holders = ["dm-3"]
    assert describe_write_verdict(dev) == (False, "no (held by dm-3)")
    dev.holders = []
    dev.swap = [dev.path]
    assert describe_write_verdict(dev) == (False, "no (used as swap)")


def test_holders_refuse_with_no_override(make_loop, monkeypatch):
    dev = make_loop()
    real = safety.resolve_block_device

    def with_holder(path):
        found = real(path)
        found.holders = ["dm-0"]
        return found

    monkeypatch.setattr(safety, "resolve_block_device", with_holder)
    msg = _refused(dev, destructive=dev, force=True)
    assert msg.startswith(f"refusing to write to {dev}: it is held by dm-0")
