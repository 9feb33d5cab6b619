"""Block-device discovery on fake sysfs/proc trees, and signature probing on image files."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from ftlscope import devices
from ftlscope.devices import (
    block_device,
    list_block_devices,
    magic_signatures,
    parse_mountinfo,
    parse_scheduler,
    parse_swaps,
    resolve_block_device,
    signatures,
)
from ftlscope.errors import TargetError

MiB = 1024 * 1024


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


# ---------------------------------------------------------------------------------------------------------
# a fake sysfs + proc tree


def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text + "\n")


def _disk(
    block: Path,
    name: str,
    dev: str,
    sectors: int,
    *,
    lbs: int = 512,
    pbs: int = 512,
    rotational: int = 0,
    scheduler: str = "[none] mq-deadline",
    max_hw_kb: int = 128,
    ro: int = 0,
    base: Path | None = None,
) -> Path:
    """A /sys/block/NAME directory (optionally a symlink into ``base``, as real sysfs does)."""
    if base is not None:
        target = base / name
        target.mkdir(parents=True)
        (block / name).symlink_to(target)
        d = block / name
    else:
        d = block / name
        d.mkdir(parents=True)
    _write(d / "dev", dev)
    _write(d / "size", str(sectors))
    _write(d / "ro", str(ro))
    _write(d / "removable", "0")
    (d / "holders").mkdir()
    _write(d / "queue" / "logical_block_size", str(lbs))
    _write(d / "queue" / "physical_block_size", str(pbs))
    _write(d / "queue" / "rotational", str(rotational))
    _write(d / "queue" / "scheduler", scheduler)
    _write(d / "queue" / "max_hw_sectors_kb", str(max_hw_kb))
    return d


def _partition(
    disk: Path, name: str, dev: str, number: int, sectors: int, holders: tuple[str, ...] = ()
) -> Path:
    p = disk / name
    _write(p / "partition", str(number))
    _write(p / "dev", dev)
    _write(p / "size", str(sectors))
    _write(p / "ro", "0")
    (p / "holders").mkdir()
    for h in holders:
        (p / "holders" / h).mkdir()
    return p


MOUNTINFO = "\n".join(
    [
        "22 27 0:21 / /proc rw,relatime - proc proc rw",
        r"27 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw",
        r"40 27 259:1 /home /mnt/my\040data rw,relatime shared:5 master:2 - ext4 /dev/nvme0n1p1 rw",
        # btrfs shows an anonymous device number: the source names the partition
        r"41 27 0:45 / /srv/tab\011dir rw - btrfs /dev/sda1 rw,space_cache",
        "42 27 7:0 / /mnt/loop rw - ext4 /dev/loop0 rw",
        "garbage line",
    ]
)

SWAPS = (
    "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
    "/dev/nvme0n1p2                          partition\t8388604\t\t0\t\t-2\n"
    "/swap\\040file                          file\t\t1048572\t\t0\t\t-3\n"
)


@pytest.fixture
def fake(tmp_path: Path) -> tuple[Path, Path]:
    sysfs, proc = tmp_path / "sys", tmp_path / "proc"
    block = sysfs / "block"
    block.mkdir(parents=True)

    # SATA hard disk with two partitions; the second one is an LVM PV (held by dm-0)
    sda = _disk(
        block,
        "sda",
        "8:0",
        1953525168,
        pbs=4096,
        rotational=1,
        scheduler="mq-deadline kyber [bfq] none",
        max_hw_kb=32767,
    )
    _write(sda / "device" / "model", "WDC WD10EZEX-08W")
    _write(sda / "device" / "vendor", "ATA     ")
    _write(sda / "device" / "rev", "1A01")
    serial = b"WD-WCC6Y0123456"
    _write(sda / "device" / "vpd_pg80", bytes([0, 0x80, 0, len(serial)]) + serial)
    _partition(sda, "sda1", "8:1", 1, 2048 * 1024)
    _partition(sda, "sda2", "8:2", 2, 4096 * 1024, holders=("dm-0",))

    # USB stick: a SCSI disk whose sysfs path goes through the USB tree
    usb = sysfs / "devices" / "pci0000:00" / "0000:00:14.0" / "usb2" / "2-1" / "host6" / "block"
    _disk(block, "sdb", "8:16", 60063744, rotational=1, base=usb)

    # NVMe namespace: device/ is the controller, which has model, serial and firmware_rev
    nvme = _disk(
        block,
        "nvme0n1",
        "259:0",
        250050816,
        lbs=4096,
        pbs=4096,
        scheduler="[none] mq-deadline",
        max_hw_kb=512,
    )
    ctrl = sysfs / "class" / "nvme" / "nvme0"
    _write(ctrl / "model", "Samsung SSD 980 PRO 1TB                 ")
    _write(ctrl / "serial", "S5GXNX0R123456Z     ")
    _write(ctrl / "firmware_rev", "5B2QGXA7")
    (nvme / "device").symlink_to(ctrl)
    _write(nvme / "metadata_bytes", "0")
    _partition(nvme, "nvme0n1p1", "259:1", 1, 900000000)
    _partition(nvme, "nvme0n1p2", "259:2", 2, 16777208)

    # NVMe namespace whose device/ has no identity: it is one level up (device/../)
    nvme1 = _disk(block, "nvme1n1", "259:3", 7814037168, lbs=512, pbs=512)
    ctrl1 = sysfs / "class" / "nvme" / "nvme1"
    _write(ctrl1 / "model", "WD_BLACK SN850X 4000GB")
    _write(ctrl1 / "serial", "23123A800123")
    _write(ctrl1 / "firmware_rev", "620311WD")
    (ctrl1 / "ns").mkdir()
    (nvme1 / "device").symlink_to(ctrl1 / "ns")

    # virtio disk: serial in /sys/block/vda/serial, no model
    vda = _disk(block, "vda", "254:0", 41943040, rotational=1)
    _write(vda / "serial", "overlayblk")
    _disk(block, "mmcblk0", "179:0", 62333952)

    # loop devices: one attached, one free; ram disks and an unused zram are skipped
    loop0 = _disk(block, "loop0", "7:0", 131072)
    _write(loop0 / "loop" / "backing_file", "/var/tmp/my image.img")
    _disk(block, "loop1", "7:1", 0)
    _disk(block, "loop10", "7:10", 2048)
    _write(block / "loop10" / "loop" / "backing_file", "/var/tmp/ten.img")
    _disk(block, "ram0", "1:0", 131072)
    z0 = _disk(block, "zram0", "252:0", 0)
    _write(z0 / "disksize", "0")
    z1 = _disk(block, "zram1", "252:1", 8388608)
    _write(z1 / "disksize", str(8388608 * 512))

    # an optical drive with no disc: read-only
    _disk(block, "sr0", "11:0", 0, ro=1)

    _write(proc / "self" / "mountinfo", MOUNTINFO)
    _write(proc / "swaps", SWAPS)
    return sysfs, proc


def _by_name(devs):
    return {d.name: d for d in devs}


# ---------------------------------------------------------------------------------------------------------
# parsing


def test_parse_mountinfo_unescapes_and_skips_optional_fields():
    mounts = parse_mountinfo(MOUNTINFO)
    assert len(mounts) == 5  # the garbage line is skipped
    home = mounts[2]
    assert home.major_minor == "259:1"
    assert home.root == "/home"
    assert home.mountpoint == "/mnt/my data"
    assert home.fstype == "ext4"
    assert home.source == "/dev/nvme0n1p1"
    assert mounts[3].mountpoint == "/srv/tab\tdir"
    assert mounts[3].source == "/dev/sda1"


def test_parse_mountinfo_backslash_and_newline():
    line = r"50 27 8:3 / /a\134b\012c rw - ext4 /dev/sda3 rw"
    (m,) = parse_mountinfo(line)
    assert m.mountpoint == "/a\\b\nc"


def test_parse_swaps():
    assert parse_swaps(SWAPS) == ["/dev/nvme0n1p2", "/swap file"]
    assert parse_swaps("Filename Type Size Used Priority\n") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[none] mq-deadline kyber bfq", "none"),
        ("mq-deadline kyber [bfq] none", "bfq"),
        ("noop deadline [cfq]", "cfq"),
        ("none", "none"),
        ("", None),
        (None, None),
    ],
)
def test_parse_scheduler(text, expected):
    assert parse_scheduler(text) == expected


# ---------------------------------------------------------------------------------------------------------
# listing


def test_list_skips_unused_and_sorts_naturally(fake):
    names = [d.name for d in list_block_devices(*fake)]
    assert names == ["loop0", "loop10", "mmcblk0", "nvme0n1", "nvme1n1", "sda", "sdb", "sr0", "vda", "zram1"]


def test_sizes_block_sizes_rotational_scheduler(fake):
    devs = _by_name(list_block_devices(*fake))
    sda, nvme = devs["sda"], devs["nvme0n1"]
    assert sda.size_bytes == 1953525168 * 512
    assert (sda.logical_block_size, sda.physical_block_size) == (512, 4096)
    assert sda.rotational is True
    assert sda.scheduler == "bfq"
    assert sda.max_hw_sectors == 32767 * 2
    assert sda.max_hw_bytes == 32767 * 1024
    assert nvme.rotational is False
    assert (nvme.logical_block_size, nvme.physical_block_size) == (4096, 4096)
    assert nvme.scheduler == "none"
    assert nvme.path == "/dev/nvme0n1"
    assert nvme.major_minor == "259:0"


def test_kinds(fake):
    kinds = {d.name: d.kind for d in list_block_devices(*fake)}
    assert kinds == {
        "loop0": "loop",
        "loop10": "loop",
        "mmcblk0": "mmc",
        "nvme0n1": "nvme",
        "nvme1n1": "nvme",
        "sda": "sata/scsi",
        "sdb": "usb",
        "sr0": "optical",
        "vda": "virtio",
        "zram1": "zram",
    }


def test_identity(fake):
    devs = _by_name(list_block_devices(*fake))
    sda = devs["sda"]
    assert (sda.model, sda.serial, sda.firmware, sda.vendor) == (
        "WDC WD10EZEX-08W",
        "WD-WCC6Y0123456",
        "1A01",
        "ATA",
    )
    nvme = devs["nvme0n1"]
    assert nvme.model == "Samsung SSD 980 PRO 1TB"
    assert (nvme.serial, nvme.firmware) == ("S5GXNX0R123456Z", "5B2QGXA7")
    assert nvme.nvme_lba_format == "4096+0"
    nvme1 = devs["nvme1n1"]  # identity found in device/../
    assert nvme1.model == "WD_BLACK SN850X 4000GB"
    assert (nvme1.serial, nvme1.firmware) == ("23123A800123", "620311WD")
    assert nvme1.nvme_lba_format == "512"
    vda = devs["vda"]
    assert (vda.model, vda.serial, vda.firmware) == (None, "overlayblk", None)
    assert devs["mmcblk0"].model is None and devs["mmcblk0"].serial is None
    assert sda.nvme_lba_format is None


def test_partitions_nested_with_parent(fake):
    devs = _by_name(list_block_devices(*fake))
    sda = devs["sda"]
    assert [p.name for p in sda.partitions] == ["sda1", "sda2"]
    sda1 = sda.partitions[0]
    assert sda1.is_partition and sda1.parent == "sda" and sda1.path == "/dev/sda1"
    assert sda1.size_bytes == 2048 * 1024 * 512
    # a partition shares the disk's queue and identity
    assert sda1.physical_block_size == 4096 and sda1.model == "WDC WD10EZEX-08W" and sda1.rotational
    assert not sda.is_partition and sda.parent is None
    assert devs["vda"].partitions == []


def test_holders_include_partitions(fake):
    devs = _by_name(list_block_devices(*fake))
    sda = devs["sda"]
    assert sda.partitions[1].holders == ["dm-0"]
    assert sda.partitions[0].holders == []
    assert sda.holders == ["dm-0"]
    assert sda.in_use
    assert devs["vda"].holders == [] and not devs["vda"].in_use


def test_mountpoints_by_major_minor_and_source(fake):
    devs = _by_name(list_block_devices(*fake))
    nvme = devs["nvme0n1"]
    p1, p2 = nvme.partitions
    assert p1.mountpoints == ["/", "/mnt/my data"]
    assert p2.mountpoints == []
    assert nvme.mountpoints == ["/", "/mnt/my data"]  # the disk shows its partitions' mounts
    assert devs["sda"].partitions[0].mountpoints == ["/srv/tab\tdir"]  # btrfs: matched by source
    assert devs["loop0"].mountpoints == ["/mnt/loop"]
    assert devs["vda"].mountpoints == []


def test_swap(fake):
    devs = _by_name(list_block_devices(*fake))
    nvme = devs["nvme0n1"]
    assert nvme.partitions[1].swap == ["/dev/nvme0n1p2"]
    assert nvme.swap == ["/dev/nvme0n1p2"]
    assert devs["sda"].swap == []


def test_read_only_and_loop_backing_file(fake):
    devs = _by_name(list_block_devices(*fake))
    assert devs["sr0"].read_only is True
    assert devs["sda"].read_only is False
    assert devs["loop0"].loop_backing_file == "/var/tmp/my image.img"
    assert devs["sda"].loop_backing_file is None


def test_block_device_by_name_finds_partitions_and_skipped(fake):
    sda2 = block_device("sda2", *fake)
    assert sda2 is not None and sda2.is_partition and sda2.parent == "sda" and sda2.holders == ["dm-0"]
    assert block_device("loop1", *fake).loop_backing_file is None  # not listed, but found by name
    assert block_device("nope", *fake) is None


def test_missing_sysfs_gives_empty_list(tmp_path):
    assert list_block_devices(tmp_path / "nosys", tmp_path / "noproc") == []


def test_resolve_non_block_paths(tmp_path):
    f = tmp_path / "file"
    f.write_bytes(b"x")
    assert resolve_block_device(f) is None
    assert resolve_block_device(tmp_path / "missing") is None
    assert resolve_block_device("/dev/null") is None  # a character device


def test_resolve_real_block_device_via_symlink(tmp_path):
    # uses the real /sys; any block device node listed there will do
    devs = [d for d in list_block_devices() if os.path.exists(d.path)]
    if not devs:
        pytest.skip("no block device nodes visible on this machine")
    dev = devs[0]
    link = tmp_path / "by-id-link"
    link.symlink_to(dev.path)
    found = resolve_block_device(link)
    assert found is not None and found.name == dev.name and found.size_bytes == dev.size_bytes


# ---------------------------------------------------------------------------------------------------------
# signatures


def _image(tmp_path: Path, name: str, size: int = 4 * MiB) -> Path:
    img = tmp_path / name
    with open(img, "wb") as f:
        f.truncate(size)
    return img


def _poke(img: Path, offset: int, data: bytes) -> None:
    with open(img, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _without_blkid(monkeypatch):
    real = devices._which
    monkeypatch.setattr(devices, "_which", lambda prog: None if prog in ("blkid", "wipefs") else real(prog))


def test_signatures_empty_image(tmp_path):
    assert signatures(_image(tmp_path, "zero.img")) == []


def test_signatures_unreadable_path(tmp_path):
    with pytest.raises(TargetError, match="cannot read"):
        signatures(tmp_path / "missing.img")


@pytest.mark.skipif(_tool("mkfs.ext4") is None, reason="mkfs.ext4 not installed (Debian package e2fsprogs)")
@pytest.mark.parametrize("use_blkid", [True, False], ids=["blkid", "magic-fallback"])
def test_signatures_ext4(tmp_path, monkeypatch, use_blkid):
    if use_blkid and _tool("blkid") is None:
        pytest.skip("blkid not installed (Debian package util-linux)")
    img = _image(tmp_path, "ext4.img", 64 * MiB)
    subprocess.run([_tool("mkfs.ext4"), "-q", "-F", str(img)], check=True)
    if not use_blkid:
        _without_blkid(monkeypatch)
    assert signatures(img) == ["ext4 file system"]


@pytest.mark.skipif(_tool("sfdisk") is None, reason="sfdisk not installed (Debian package fdisk)")
@pytest.mark.parametrize("label", ["gpt", "dos"])
@pytest.mark.parametrize("use_blkid", [True, False], ids=["blkid", "magic-fallback"])
def test_signatures_partition_tables(tmp_path, monkeypatch, label, use_blkid):
    if use_blkid and _tool("blkid") is None:
        pytest.skip("blkid not installed (Debian package util-linux)")
    img = _image(tmp_path, f"{label}.img", 16 * MiB)
    subprocess.run([_tool("sfdisk"), "-q", str(img)], input=f"label: {label}\n,8M\n", text=True, check=True)
    if not use_blkid:
        _without_blkid(monkeypatch)
    assert signatures(img) == [f"{label} partition table"]


@pytest.mark.skipif(_tool("mkswap") is None, reason="mkswap not installed (Debian package util-linux)")
@pytest.mark.parametrize("use_blkid", [True, False], ids=["blkid", "magic-fallback"])
def test_signatures_swap(tmp_path, monkeypatch, use_blkid):
    if use_blkid and _tool("blkid") is None:
        pytest.skip("blkid not installed (Debian package util-linux)")
    img = _image(tmp_path, "swap.img")
    subprocess.run([_tool("mkswap"), "-q", str(img)], check=True, capture_output=True)
    if not use_blkid:
        _without_blkid(monkeypatch)
    assert signatures(img) == ["swap"]


@pytest.mark.parametrize(
    ("offset", "magic", "expected"),
    [
        (0, b"XFSB", "xfs file system"),
        (65600, b"_BHRfS_M", "btrfs file system"),
        (0, b"LUKS\xba\xbe", "crypto_LUKS"),
        (512, b"EFI PART", "gpt partition table"),
        (4086, b"SWAPSPACE2", "swap"),
        (65526, b"SWAPSPACE2", "swap"),  # made on a 64 KiB-page machine
    ],
)
def test_magic_signatures_synthetic(tmp_path, offset, magic, expected):
    img = _image(tmp_path, "m.img")
    _poke(img, offset, magic)
    assert magic_signatures(img) == [expected]


def test_magic_ext_flavours(tmp_path):
    def ext(compat: int, incompat: int, ro_compat: int) -> list[str]:
        img = _image(tmp_path, "ext.img")
        _poke(img, 1024 + 0x38, b"\x53\xef")
        _poke(img, 1024 + 0x5C, struct.pack("<III", compat, incompat, ro_compat))
        return magic_signatures(img)

    assert ext(0, 0, 0) == ["ext2 file system"]
    assert ext(0x4, 0x2, 0) == ["ext3 file system"]
    assert ext(0x4, 0x2 | 0x40, 0) == ["ext4 file system"]


def test_magic_mbr_needs_a_partition_entry(tmp_path):
    img = _image(tmp_path, "mbr.img")
    _poke(img, 510, b"\x55\xaa")
    assert magic_signatures(img) == []  # boot signature but no partitions: not a partition table
    _poke(img, 446 + 4, b"\x83")
    assert magic_signatures(img) == ["dos partition table"]


def test_magic_lvm(tmp_path):
    img = _image(tmp_path, "lvm.img")
    _poke(img, 512, b"LABELONE")
    _poke(img, 512 + 24, b"LVM2 001")
    assert magic_signatures(img) == ["LVM2_member"]


def test_magic_on_small_and_empty_files(tmp_path):
    small = tmp_path / "small"
    small.write_bytes(b"XFSB")
    assert magic_signatures(small) == ["xfs file system"]
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert magic_signatures(empty) == []


@pytest.mark.skipif(_tool("mkfs.ext4") is None, reason="mkfs.ext4 not installed (Debian package e2fsprogs)")
def test_signatures_ambivalent_lists_all(tmp_path):
    # blkid -p exits 8 ("ambivalent") when it sees two file systems; both must be reported
    img = _image(tmp_path, "two.img", 64 * MiB)
    subprocess.run([_tool("mkfs.ext4"), "-q", "-F", str(img)], check=True)
    _poke(img, 65600, b"_BHRfS_M")
    assert signatures(img) == ["ext4 file system", "btrfs file system"]
