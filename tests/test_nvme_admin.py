"""The NVMe controller reset at its boundary: the controller found from fake sysfs trees (plain namespaces,
partitions, multipath heads and their hidden paths, non-NVMe disks), the ioctl number, the call itself against
a stand-in character device, and the one-line refusal everywhere a reset cannot be done."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ftlscope import nvme_admin
from ftlscope.errors import NotAvailable
from ftlscope.nvme_admin import NVME_IOCTL_RESET, block_name, controller_reset, controllers_of

PCI = "devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def _controller(sysfs: Path, name: str, dev: str) -> Path:
    ctrl = sysfs / PCI / name
    _write(ctrl / "dev", dev)
    _write(ctrl / "state", "live")
    _link(sysfs / "class" / "nvme" / name, f"../../{PCI}/{name}")
    return ctrl


def _disk(sysfs: Path, directory: Path, name: str, dev: str, device_link: str | None) -> Path:
    """A block device directory (as in /sys/devices/...) with its /sys/class/block and /sys/block links."""
    d = directory / name
    _write(d / "dev", dev)
    _write(d / "size", "2048")
    (d / "holders").mkdir()
    if device_link is not None:
        _link(d / "device", device_link)
    relative = os.path.relpath(d, sysfs / "class" / "block")
    _link(sysfs / "class" / "block" / name, relative)
    _link(sysfs / "block" / name, os.path.relpath(d, sysfs / "block"))
    return d


def _partition(sysfs: Path, disk: Path, name: str, dev: str) -> Path:
    p = disk / name
    _write(p / "dev", dev)
    _write(p / "partition", "1")
    _write(p / "size", "1024")
    _link(sysfs / "class" / "block" / name, os.path.relpath(p, sysfs / "class" / "block"))
    return p


@pytest.fixture
def sysfs(tmp_path) -> Path:
    """nvme0 (plain namespace nvme0n1 with partition nvme0n1p1), subsystem nvme-subsys1 reached through nvme1
    and nvme2 (head nvme1n1 with paths nvme1c1n1 and nvme1c2n1; head nvme1n2 without a multipath/ listing),
    a SCSI disk sda and a loop device."""
    root = tmp_path / "sys"
    ctrl0 = _controller(root, "nvme0", "239:0")
    ns = _disk(root, ctrl0, "nvme0n1", "259:0", "../../nvme0")
    _partition(root, ns, "nvme0n1p1", "259:1")

    ctrl1 = _controller(root, "nvme1", "239:1")
    ctrl2 = _controller(root, "nvme2", "239:2")
    subsys = root / "devices" / "virtual" / "nvme-subsystem" / "nvme-subsys1"
    subsys.mkdir(parents=True)
    _link(subsys / "nvme1", os.path.relpath(ctrl1, subsys))
    _link(subsys / "nvme2", os.path.relpath(ctrl2, subsys))
    path1 = _disk(root, ctrl1, "nvme1c1n1", "259:5", "../../nvme1")
    path2 = _disk(root, ctrl2, "nvme1c2n1", "259:6", "../../nvme2")
    head = _disk(root, subsys, "nvme1n1", "259:4", "../../nvme-subsys1")
    _link(head / "multipath" / "nvme1c1n1", os.path.relpath(path1, head / "multipath"))
    _link(head / "multipath" / "nvme1c2n1", os.path.relpath(path2, head / "multipath"))
    _disk(root, subsys, "nvme1n2", "259:7", "../../nvme-subsys1")

    scsi = root / "devices" / "pci0000:00" / "0000:00:17.0" / "ata1" / "host0" / "target0:0:0" / "0:0:0:0"
    scsi.mkdir(parents=True)
    _disk(root, scsi / "block", "sda", "8:0", "../../../0:0:0:0")
    _disk(root, root / "devices" / "virtual" / "block", "loop0", "7:0", None)
    return root


def test_the_ioctl_number_is_nvme_ioctl_reset():
    # <linux/nvme_ioctl.h>: #define NVME_IOCTL_RESET _IO('N', 0x44); _IO has no direction and no size
    assert NVME_IOCTL_RESET == (ord("N") << 8 | 0x44) == 0x4E44


def test_a_namespace_and_its_partition_belong_to_their_controller(sysfs):
    assert controllers_of("nvme0n1", sysfs) == ["nvme0"]
    assert controllers_of("nvme0n1p1", sysfs) == ["nvme0"]


def test_a_hidden_path_names_its_controller(sysfs):
    assert controllers_of("nvme1c1n1", sysfs) == ["nvme1"]
    assert controllers_of("nvme1c2n1", sysfs) == ["nvme2"]


def test_a_multipath_head_is_reached_through_its_paths_controllers(sysfs):
    assert controllers_of("nvme1n1", sysfs) == ["nvme1", "nvme2"]
    # without a multipath/ listing: every controller of the subsystem
    assert controllers_of("nvme1n2", sysfs) == ["nvme1", "nvme2"]


@pytest.mark.parametrize("name", ["sda", "loop0"])
def test_other_block_devices_are_not_nvme_namespaces(sysfs, name):
    with pytest.raises(NotAvailable, match=rf"^controller reset is not available on this target: /dev/{name} is "
                                          r"not an NVMe namespace"):
        controllers_of(name, sysfs)


def test_an_unknown_name_is_not_available(sysfs):
    with pytest.raises(NotAvailable, match="no block device nvme9n1"):
        controllers_of("nvme9n1", sysfs)


def test_a_regular_file_is_refused_in_one_line(tmp_path):
    target = tmp_path / "disk.img"
    target.write_bytes(b"\0" * 4096)
    with pytest.raises(NotAvailable) as caught:
        controller_reset(str(target))
    message = str(caught.value)
    assert message == f"controller reset is not available on this target: {target} is a regular file, not an " \
                      "NVMe namespace"
    assert "\n" not in message


def test_a_missing_path_is_refused(tmp_path):
    with pytest.raises(NotAvailable, match="cannot look at"):
        block_name(str(tmp_path / "nothing"))


def test_a_loop_device_is_refused(make_loop):
    device, _ = make_loop(size=8 << 20)
    with pytest.raises(NotAvailable, match=r"is not an NVMe namespace"):
        controller_reset(device)


# ---- the call itself, against a stand-in controller device --------------------------------------------------


@pytest.fixture
def stand_in(sysfs, tmp_path, monkeypatch):
    """nvme0's character device is /dev/null (its sysfs dev number made to match), the namespace resolves to
    nvme0n1 and reads from an ordinary file: everything but the ioctl is real."""
    null = os.stat("/dev/null").st_rdev
    (sysfs / PCI / "nvme0" / "dev").write_text(f"{os.major(null)}:{os.minor(null)}\n")
    dev_root = tmp_path / "dev"
    dev_root.mkdir()
    (dev_root / "nvme0").symlink_to("/dev/null")
    namespace = tmp_path / "namespace.img"
    namespace.write_bytes(b"\0" * 8192)
    monkeypatch.setattr(nvme_admin, "block_name", lambda path, sysfs="/sys": "nvme0n1")
    proc = tmp_path / "proc"
    _write(proc / "self" / "mountinfo", "22 27 0:21 / /proc rw,relatime - proc proc rw")
    return {"sysfs": sysfs, "dev_root": dev_root, "proc": proc, "target": str(namespace)}


def _direct_io_works(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    os.close(fd)
    return True


def test_the_reset_ioctl_goes_to_the_controller_and_the_time_is_returned(stand_in, monkeypatch):
    if not _direct_io_works(stand_in["target"]):
        pytest.skip("the tmp directory does not take O_DIRECT")
    calls = []

    def fake_ioctl(fd, request, *args):
        calls.append((os.readlink(f"/proc/self/fd/{fd}"), request))
        return 0

    monkeypatch.setattr(nvme_admin.fcntl, "ioctl", fake_ioctl)
    took = controller_reset(stand_in["target"], sysfs=stand_in["sysfs"], proc=stand_in["proc"],
                            dev_root=stand_in["dev_root"])
    assert calls == [("/dev/null", NVME_IOCTL_RESET)]
    assert took > 0


def test_the_kernel_refusing_the_ioctl_is_not_available(stand_in):
    # /dev/null knows no NVMe ioctl: the real call fails with ENOTTY
    with pytest.raises(NotAvailable, match=r"the kernel refused to reset nvme0 \(Inappropriate ioctl"):
        controller_reset(stand_in["target"], sysfs=stand_in["sysfs"], proc=stand_in["proc"],
                         dev_root=stand_in["dev_root"])


def test_missing_permission_says_to_run_as_root(stand_in, monkeypatch):
    def denied(*args, **kwargs):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(nvme_admin.fcntl, "ioctl", denied)
    with pytest.raises(NotAvailable, match=r"resetting nvme0 needs root \(CAP_SYS_ADMIN\); run ftlscope as root"):
        controller_reset(stand_in["target"], sysfs=stand_in["sysfs"], proc=stand_in["proc"],
                         dev_root=stand_in["dev_root"])
    real_open = os.open

    def no_open(path, *args, **kwargs):
        if str(path).endswith("nvme0"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(nvme_admin.os, "open", no_open)
    with pytest.raises(NotAvailable, match=r"needs root; run ftlscope as root"):
        controller_reset(stand_in["target"], sysfs=stand_in["sysfs"], proc=stand_in["proc"],
                         dev_root=stand_in["dev_root"])


def test_a_controller_serving_mounted_file_systems_is_not_reset(stand_in, monkeypatch):
    _write(stand_in["proc"] / "self" / "mountinfo", "27 1 259:1 / / rw,relatime - ext4 /dev/nvme0n1p1 rw")
    monkeypatch.setattr(nvme_admin.fcntl, "ioctl", lambda *a: pytest.fail("reset a busy controller"))
    with pytest.raises(NotAvailable, match=r"nvme0 also serves /dev/nvme0n1 \(/\), whose I/O a reset would stall"):
        controller_reset(stand_in["target"], sysfs=stand_in["sysfs"], proc=stand_in["proc"],
                         dev_root=stand_in["dev_root"])


def test_a_character_device_of_another_controller_is_refused(stand_in):
    (stand_in["sysfs"] / PCI / "nvme0" / "dev").write_text("239:0\n")
    with pytest.raises(NotAvailable, match=r"is not controller nvme0 \(sysfs says 239:0\)"):
        controller_reset(stand_in["target"], sysfs=stand_in["sysfs"], proc=stand_in["proc"],
                         dev_root=stand_in["dev_root"])
