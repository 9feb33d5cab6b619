"""NVMe admin operations the experiments need: a controller reset (seed 000 §3.4).

Linux resets an NVMe controller when its character device (``/dev/nvme0``) receives ``NVME_IOCTL_RESET``; the
kernel tears the queues down, re-enables the controller, and brings its namespaces back. An experiment names a
namespace block device (``/dev/nvme0n1``, a partition of it, or a ``/dev/disk/by-id`` link), so the controller
is found through sysfs:

- ``/sys/dev/block/MAJ:MIN`` names the block device; a partition's directory sits inside its disk's;
- a namespace disk's ``device`` link points at its controller (``.../nvme/nvme0``), or — for a multipath head,
  the usual layout when the kernel has native NVMe multipath — at its subsystem (``nvme-subsys0``), whose
  entries ``nvme0``, ``nvme1`` ... are the controllers it is reached through (``multipath/nvme0c0n1`` ...
  name the paths of this namespace, when the kernel shows them);
- a hidden path device (``nvme0c0n1``: subsystem 0, controller 0, namespace 1) points at its controller.

Every way this cannot work raises :class:`~ftlscope.errors.NotAvailable` with one line saying why,
so an experiment skips the step and records the reason. The sysfs, /proc and /dev roots are parameters, so the
resolution is tested on fake trees.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import re
import stat
import time
from pathlib import Path

from .devices import list_block_devices
from .errors import NotAvailable

__all__ = ["NVME_IOCTL_RESET", "controller_reset", "controllers_of", "block_name"]

# <linux/ioctl.h>: _IO(type, nr) = (_IOC_NONE << 30) | (0 << 16) | (type << 8) | nr; <linux/nvme_ioctl.h>:
# #define NVME_IOCTL_RESET _IO('N', 0x44)
_IOC_NONE = 0


def _io(kind: str, number: int) -> int:
    return (_IOC_NONE << 30) | (0 << 16) | (ord(kind) << 8) | number


NVME_IOCTL_RESET = _io("N", 0x44)  # 0x4E44

_CONTROLLER = re.compile(r"nvme\d+")
_SUBSYSTEM = re.compile(r"nvme-subsys\d+")
READY_TIMEOUT_S = 60.0


def _not_available(reason: str) -> Exception:
    return NotAvailable(f"controller reset is not available on this target: {reason}")


def block_name(target_path: str, sysfs: str | os.PathLike[str] = "/sys") -> str:
    """The kernel name (``nvme0n1``, ``nvme0n1p2``) of the block device ``target_path`` names; raises
    NotAvailable for anything that is not a block device."""
    try:
        st = os.stat(target_path)
    except OSError as exc:
        raise _not_available(f"cannot look at {target_path} ({exc.strerror})") from None
    if stat.S_ISREG(st.st_mode):
        raise _not_available(f"{target_path} is a regular file, not an NVMe namespace")
    if not stat.S_ISBLK(st.st_mode):
        raise _not_available(f"{target_path} is not a block device")
    link = Path(sysfs) / "dev" / "block" / f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    if not link.exists():
        raise _not_available(f"sysfs does not show {target_path} (no {link})")
    return Path(os.path.realpath(link)).name


def controllers_of(name: str, sysfs: str | os.PathLike[str] = "/sys") -> list[str]:
    """The NVMe controllers (``["nvme0"]``) through which the block device ``name`` is reached, from sysfs.
    A partition counts as its disk. Raises NotAvailable for a device that is not an NVMe namespace."""
    entry = Path(sysfs) / "class" / "block" / name
    if not entry.exists():
        raise _not_available(f"no block device {name} in {Path(sysfs) / 'class' / 'block'}")
    disk = Path(os.path.realpath(entry))
    if (disk / "partition").exists():
        disk = disk.parent  # a partition's directory sits inside its disk's
    device = disk / "device"
    if not device.exists():
        raise _not_available(f"/dev/{name} is not an NVMe namespace ({disk.name} has no controller in sysfs)")
    parent = Path(os.path.realpath(device))
    if _CONTROLLER.fullmatch(parent.name):
        return [parent.name]
    if _SUBSYSTEM.fullmatch(parent.name):
        # A multipath head: the controllers of this namespace's paths, else every controller of the subsystem.
        paths = disk / "multipath"
        found: set[str] = set()
        with contextlib.suppress(OSError):
            for path in paths.iterdir():
                link = path / "device"
                if link.exists() and _CONTROLLER.fullmatch(Path(os.path.realpath(link)).name):
                    found.add(Path(os.path.realpath(link)).name)
        if not found:
            with contextlib.suppress(OSError):
                found = {p.name for p in parent.iterdir() if _CONTROLLER.fullmatch(p.name)}
        if not found:
            raise _not_available(f"{parent.name} of /dev/{name} lists no controller in sysfs")
        return sorted(found, key=lambda c: int(c[4:]))
    raise _not_available(f"/dev/{name} is not an NVMe namespace (its device is {parent.name})")


def _controller_devices_in_use(controllers: list[str], sysfs: str | os.PathLike[str],
                               proc: str | os.PathLike[str]) -> list[str]:
    """Block devices behind these controllers that are mounted, used as swap or held (dm/md): a reset
    stalls their I/O while the controller comes back."""
    busy = []
    for dev in list_block_devices(sysfs, proc):
        if not dev.name.startswith("nvme") or not dev.in_use:
            continue
        try:
            theirs = controllers_of(dev.name, sysfs)
        except Exception:  # noqa: BLE001 - a device we cannot place is not ours
            continue
        if set(theirs) & set(controllers):
            uses = dev.mountpoints + dev.swap + dev.holders
            busy.append(f"/dev/{dev.name} ({', '.join(uses)})")
    return busy


def _char_device(controller: str, sysfs: Path, dev_root: Path) -> Path:
    """``/dev/nvme0``, checked against the controller's ``dev`` number in sysfs where it shows one."""
    path = dev_root / controller
    try:
        st = os.stat(path)
    except OSError:
        raise _not_available(f"no {path} (the controller's character device)") from None
    if not stat.S_ISCHR(st.st_mode):
        raise _not_available(f"{path} is not a character device")
    with contextlib.suppress(OSError):
        expected = (sysfs / "class" / "nvme" / controller / "dev").read_text().strip()
        if expected and expected != f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}":
            raise _not_available(f"{path} is not controller {controller} (sysfs says {expected})")
    return path


def _wait_ready(target_path: str, controllers: list[str], sysfs: Path, deadline: float) -> None:
    """Until every controller is ``live`` again and one block of the target can be read with O_DIRECT."""
    for controller in controllers:
        state = sysfs / "class" / "nvme" / controller / "state"
        while state.exists():
            with contextlib.suppress(OSError):
                if state.read_text().strip() == "live":
                    break
            if time.monotonic() > deadline:
                raise _not_available(f"{controller} did not come back to 'live' within {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.001)
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants; 4 KiB covers 512 B and 4 KiB LBAs
    try:
        while True:
            try:
                fd = os.open(target_path, os.O_RDONLY | os.O_DIRECT)
                try:
                    os.preadv(fd, [buf], 0)
                    return
                finally:
                    os.close(fd)
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise _not_available(
                        f"{target_path} was not readable within {READY_TIMEOUT_S:.0f} s of the reset "
                        f"({exc.strerror})") from None
                time.sleep(0.001)
    finally:
        buf.close()


def controller_reset(
    target_path: str,
    *,
    sysfs: str | os.PathLike[str] = "/sys",
    proc: str | os.PathLike[str] = "/proc",
    dev_root: str | os.PathLike[str] = "/dev",
    allow_in_use: bool = False,
) -> int:
    """Reset the NVMe controller(s) behind the namespace ``target_path`` and wait until the namespace reads
    again; returns the nanoseconds from the reset command to the first successful read.

    Raises NotAvailable (one line, the reason) for a regular file, a block device that is not an NVMe
    namespace, a controller that also serves mounted file systems, swap or stacked devices (unless
    ``allow_in_use``), or missing permission (resetting needs root: CAP_SYS_ADMIN)."""
    sysfs = Path(sysfs)
    name = block_name(target_path, sysfs)
    controllers = controllers_of(name, sysfs)
    if not allow_in_use:
        busy = _controller_devices_in_use(controllers, sysfs, proc)
        if busy:
            raise _not_available(
                f"{', '.join(controllers)} also serves {'; '.join(busy)}, whose I/O a reset would stall")
    devices = [_char_device(c, sysfs, Path(dev_root)) for c in controllers]
    started = time.monotonic_ns()
    for controller, path in zip(controllers, devices, strict=True):
        try:
            fd = os.open(path, os.O_RDONLY)
        except PermissionError:
            raise _not_available(f"opening {path} needs root; run ftlscope as root") from None
        except OSError as exc:
            raise _not_available(f"cannot open {path} ({exc.strerror})") from None
        try:
            fcntl.ioctl(fd, NVME_IOCTL_RESET)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise _not_available(f"resetting {controller} needs root (CAP_SYS_ADMIN); run ftlscope as "
                                     "root") from None
            raise _not_available(f"the kernel refused to reset {controller} ({exc.strerror})") from None
        finally:
            os.close(fd)
    _wait_ready(target_path, controllers, sysfs, time.monotonic() + READY_TIMEOUT_S)
    return time.monotonic_ns() - started
