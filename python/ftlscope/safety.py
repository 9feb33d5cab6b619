"""The write-safety policy: whether ftlscope may write to a target.

The CLI and the engine call :func:`check_write_allowed` before every run that writes. It either returns or
raises one :class:`~ftlscope.errors.SafetyError` / :class:`~ftlscope.errors.TargetError` whose one-line
message says what is wrong and which flag (if any) makes it go.

The rules, in the order they are checked:

* ``sim:PRESET`` targets are simulated: always allowed.
* Read-only runs are always allowed on anything that exists.
* A block device (or partition) is refused outright, whatever the flags, while it or one of its partitions is
  mounted, used as swap, held by a stacked device (dm, md, LVM), read-only, or busy (an ``O_EXCL`` open fails
  with EBUSY: the kernel has it claimed). Otherwise it needs ``--destructive DEVICE`` naming the same device
  again, and if it carries a file system or partition table, ``--force`` as well.
* A regular file that ftlscope created (see :func:`mark_created`) or an empty one needs no flag; a non-empty
  file ftlscope did not create needs ``--destructive FILE``. A file backing a loop device that is in use, or
  used as a swap file, is refused outright. A path that does not exist yet is a new file ftlscope will create.
* A simulated drive that ``ftlscope sim attach`` serves (its loop device, see :mod:`ftlscope.attach`) is a device
  ftlscope made, holding only what was written to it: like a ``sim:PRESET`` target it needs no
  ``--destructive`` while it is blank; once it carries a file system or partition table (the user's mkfs),
  the usual ``--destructive DEVICE --force`` apply, since that data is the user's. Mounted or held, it is
  refused as any device is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
from pathlib import Path

from ftlscope.devices import (
    BlockDevice,
    list_block_devices,
    parse_swaps,
    resolve_block_device,
    signatures,
)
from ftlscope.errors import SafetyError, TargetError

__all__ = [
    "XATTR_NAME",
    "check_write_allowed",
    "describe_write_verdict",
    "mark_created",
    "was_created_by_ftlscope",
    "registry_path",
]

XATTR_NAME = "user.ftlscope.created"

_TARGET_HINT = "give an existing block device, a regular file path, or sim:PRESET"


# ---------------------------------------------------------------------------------------------------------
# the policy


def check_write_allowed(
    target_path: str,
    *,
    writes: bool,
    destructive: str | None,
    force: bool,
    created_by_ftlscope: bool | None = None,
) -> None:
    """Return if a run may use ``target_path`` as asked; raise SafetyError/TargetError otherwise.

    ``destructive`` is the value of ``--destructive`` (a path naming the target again) or None; ``force`` is
    ``--force``. ``created_by_ftlscope`` overrides the check of :func:`was_created_by_ftlscope` for a
    regular file (None: look it up).
    """
    if not target_path:
        raise TargetError(f"no target given; {_TARGET_HINT}")
    if target_path.startswith("sim:"):
        return
    try:
        st = os.stat(target_path)
    except FileNotFoundError:
        if not writes:
            raise TargetError(f"no such file or device: {target_path}; {_TARGET_HINT}") from None
        _check_new_file(target_path)
        return
    except OSError as exc:
        raise TargetError(f"cannot look at {target_path}: {exc.strerror}; {_TARGET_HINT}") from exc

    if not writes:
        return
    if stat.S_ISBLK(st.st_mode):
        _check_block_device(target_path, st, destructive, force)
    elif stat.S_ISREG(st.st_mode):
        _check_regular_file(target_path, st, destructive, created_by_ftlscope)
    elif stat.S_ISDIR(st.st_mode):
        raise TargetError(
            f"{target_path} is a directory; give a file path inside it "
            f"(e.g. {os.path.join(target_path, 'ftlscope.img')}), a block device, or sim:PRESET"
        )
    elif stat.S_ISCHR(st.st_mode):
        raise TargetError(
            f"{target_path} is a character device, not a block device; give the block device "
            "(e.g. /dev/nvme0n1 rather than /dev/nvme0 or /dev/ng0n1)"
        )
    else:
        raise TargetError(f"{target_path} is neither a block device nor a regular file; {_TARGET_HINT}")


def describe_write_verdict(dev: BlockDevice, *, sigs: list[str] | None = None) -> tuple[bool, str]:
    """Whether a write run could use ``dev``, and what it takes, for ``ftlscope devices``.

    Returns e.g. ``(False, "no (mounted at /)")``, ``(True, "yes with --destructive")`` or
    ``(True, "yes with --destructive --force (ext4 signature)")``. ``sigs`` are the device's signatures when
    the caller already has them; otherwise they are probed (which needs read access to the device).
    """
    if dev.mountpoints:
        return False, f"no (mounted at {', '.join(dev.mountpoints)})"
    if dev.swap:
        return False, "no (used as swap)"
    if dev.holders:
        return False, f"no (held by {', '.join(dev.holders)})"
    if dev.read_only:
        return False, "no (read-only)"
    if dev.size_bytes == 0:
        return False, "no (empty: size 0)"
    if sigs is None:
        try:
            sigs = signatures(dev.path)
        except TargetError:
            return True, "yes with --destructive (--force too if it holds data: could not read it to check)"
    if sigs:
        return True, f"yes with --destructive --force ({', '.join(_short(s) for s in sigs)})"
    if dev.ftlscope_drive:
        return True, f"yes (ftlscope's simulated drive {dev.ftlscope_drive}, no file system on it)"
    return True, "yes with --destructive"


# ---------------------------------------------------------------------------------------------------------
# block devices


def _check_block_device(target_path: str, st: os.stat_result, destructive: str | None, force: bool) -> None:
    dev = resolve_block_device(target_path)
    if dev is None:
        # no sysfs entry: we cannot see mounts or holders, so we cannot say writing is safe
        raise SafetyError(
            f"refusing to write to {target_path}: /sys/block does not describe it, so ftlscope cannot check "
            "whether it is in use; mount sysfs at /sys (or run on the host, not in a container)"
        )
    label = target_path if os.path.realpath(target_path) == dev.path else f"{target_path} ({dev.path})"
    refusing = f"refusing to write to {label}"

    reason = _in_use_reason(dev)
    if reason:
        raise SafetyError(f"{refusing}: {reason}")
    if dev.read_only:
        raise TargetError(f"{label} is read-only; make it writable first (blockdev --setrw {dev.path})")
    if not os.access(target_path, os.W_OK):
        raise TargetError(f"no permission to write to {label}; run as root or get write access to it")
    _check_not_busy(target_path, refusing)

    if dev.ftlscope_drive and not signatures(target_path):
        return
    if not destructive:
        raise SafetyError(
            f"{refusing}: writing destroys its data; pass --destructive {target_path} to confirm"
        )
    if not _same_target(destructive, target_path, st):
        raise SafetyError(
            f"{refusing}: --destructive names {destructive}, which is not this device; "
            f"pass --destructive {target_path} to confirm"
        )

    found = signatures(target_path)
    if found and not force:
        raise SafetyError(f"{label} holds {_phrase(found)}; pass --force as well to overwrite it")


def _in_use_reason(dev: BlockDevice) -> str | None:
    """Why nothing may write to ``dev`` whatever the flags, or None."""
    for part in dev.partitions:
        if part.mountpoints:
            return f"its partition {part.path} is mounted at {', '.join(part.mountpoints)}; unmount it first"
    if dev.mountpoints:  # none of them a partition's (checked above), so the device's own
        return f"it is mounted at {', '.join(dev.mountpoints)}; unmount it first"
    for part in dev.partitions:
        if part.swap:
            return f"its partition {part.path} is in use as swap; swapoff {part.path} first"
    if dev.swap:
        return f"it is in use as swap; swapoff {dev.swap[0]} first"
    if dev.holders:
        held = ", ".join(dev.holders)
        return (
            f"it is held by {held} (device-mapper, md RAID or LVM on top of it); "
            "remove those first (dmsetup remove, mdadm --stop, vgchange -an)"
        )
    return None


def _check_not_busy(target_path: str, refusing: str) -> None:
    # O_EXCL on a block device (without O_CREAT) asks the kernel for an exclusive claim: it fails with EBUSY
    # when a file system, dm, md or anything else in the kernel holds the device, even in another mount
    # namespace, which mountinfo would not show us.
    try:
        fd = os.open(target_path, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            raise SafetyError(
                f"{refusing}: it is in use (the kernel refuses an exclusive open: device busy); "
                "stop whatever uses it (a mount in another namespace, dm, md, a VM) first"
            ) from exc
        raise TargetError(
            f"cannot open {target_path}: {exc.strerror}; run as root or get access to it"
        ) from exc
    os.close(fd)


def _same_target(named: str, target_path: str, target_st: os.stat_result) -> bool:
    """Whether the ``--destructive`` value names the target (same real path, device number or inode)."""
    if os.path.realpath(named) == os.path.realpath(target_path):
        return True
    try:
        named_st = os.stat(named)
    except OSError:
        return False
    if stat.S_ISBLK(target_st.st_mode):
        return stat.S_ISBLK(named_st.st_mode) and named_st.st_rdev == target_st.st_rdev
    return (named_st.st_dev, named_st.st_ino) == (target_st.st_dev, target_st.st_ino)


def _article(noun: str) -> str:
    # "an ext4 ...", "an xfs ...", "an LVM2_member ..." but "a gpt ...", "a btrfs ..."
    lowered = noun.lower()
    vowel_sound = lowered[:1] in "aeiou" or lowered.startswith(("xfs", "lvm", "ntfs", "hfs", "f2fs", "mbr"))
    return "an" if vowel_sound else "a"


def _phrase(found: list[str]) -> str:
    parts = []
    for sig in found:
        if sig.endswith((" file system", " partition table")):
            noun = sig
        elif sig == "swap":
            noun = "swap area"
        else:
            noun = f"{sig} signature"
        parts.append(f"{_article(noun)} {noun}")
    return " and ".join(parts)


def _short(sig: str) -> str:
    if sig.endswith(" file system"):
        return sig[: -len(" file system")] + " signature"
    if sig.endswith(" partition table"):
        return sig
    return f"{sig} signature"


# ---------------------------------------------------------------------------------------------------------
# regular files


def _check_new_file(target_path: str) -> None:
    parent = os.path.dirname(os.path.abspath(target_path))
    if os.path.islink(target_path):
        raise TargetError(
            f"{target_path} is a symlink to {os.readlink(target_path)}, which does not exist; {_TARGET_HINT}"
        )
    real_parent = os.path.realpath(parent)
    if real_parent == "/dev" or (real_parent.startswith("/dev/") and not real_parent.startswith("/dev/shm")):
        raise TargetError(f"TARGET {target_path}: no such block device (ftlscope creates files only outside "
                          "/dev); `ftlscope devices` lists the block devices")
    if not os.path.isdir(parent):
        raise TargetError(f"no such directory: {parent}; create it first or give another path for the file")


def _check_regular_file(
    target_path: str, st: os.stat_result, destructive: str | None, created: bool | None
) -> None:
    reason = _file_in_use_reason(target_path, st)
    if reason:
        raise SafetyError(f"refusing to write to {target_path}: {reason}")
    if st.st_size == 0:
        return
    if created is None:
        created = was_created_by_ftlscope(target_path)
    if created:
        return
    if not destructive:
        raise SafetyError(
            f"refusing to overwrite {target_path}: it is a non-empty file ftlscope did not create; "
            f"pass --destructive {target_path} to confirm"
        )
    if not _same_target(destructive, target_path, st):
        raise SafetyError(
            f"refusing to overwrite {target_path}: --destructive names {destructive}, "
            f"which is not this file; pass --destructive {target_path} to confirm"
        )


def _file_in_use_reason(target_path: str, st: os.stat_result) -> str | None:
    """A swap file, or the backing file of a loop device that is mounted or otherwise in use."""
    real = os.path.realpath(target_path)
    try:
        swaps = parse_swaps(Path("/proc/swaps").read_bytes())
    except OSError:
        swaps = []
    for swap in swaps:
        if os.path.realpath(swap) == real:
            return f"it is in use as a swap file; swapoff {swap} first"
    for dev in list_block_devices():
        backing = dev.loop_backing_file
        if not backing:
            continue
        if not _same_file(backing, real, st):
            continue
        reason = _in_use_reason(dev)
        if reason:
            return f"it is the backing file of {dev.path}, and {reason.replace('it is', 'that is', 1)}"
    return None


def _same_file(path: str, real: str, st: os.stat_result) -> bool:
    if os.path.realpath(path) == real:
        return True
    try:
        other = os.stat(path)
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)


# ---------------------------------------------------------------------------------------------------------
# remembering which files ftlscope created
#
# ftlscope may overwrite a file it made itself without asking, so it needs to recognise those files later
# (in another run, another process). The mark lives on the file itself as an extended attribute holding the
# inode number: it follows renames, disappears with the file, and a copy made with its xattrs (cp -a) lands
# on another inode, so it does not count. Not every file system takes user xattrs (tmpfs before Linux 6.6,
# NFS, many FUSE file systems, some container overlays answer ENOTSUP), so there the mark goes into a small
# JSON registry keyed by real path and holding (st_dev, st_ino): a file replaced at the same path by another
# one is a new inode and no longer counts. (An inode number freed and reused at once for a new file at the
# very same path would still count; that is the price of not storing more state.)


def registry_path() -> Path:
    """``$XDG_STATE_HOME/ftlscope/created-files.json`` (``~/.local/state`` when unset or relative)."""
    base = os.environ.get("XDG_STATE_HOME", "")
    state = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return state / "ftlscope" / "created-files.json"


def mark_created(path: str | os.PathLike[str]) -> None:
    """Record that ftlscope created ``path`` (call it right after creating the file)."""
    st = os.stat(path)
    try:
        os.setxattr(path, XATTR_NAME, str(st.st_ino).encode("ascii"))
        return
    except AttributeError:  # no xattr support in this Python (not Linux)
        pass
    except OSError:  # ENOTSUP/EOPNOTSUPP on tmpfs, NFS, FUSE; EPERM, ENOSPC: all mean "not here"
        pass
    _registry_update(os.path.realpath(path), st)


def was_created_by_ftlscope(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file :func:`mark_created` marked, and still the same file (same inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    value = None
    # ENODATA means "not marked here"; ENOTSUP means "no xattrs here": the registry may know it either way
    with contextlib.suppress(AttributeError, OSError):
        value = os.getxattr(path, XATTR_NAME)
    if value is not None:
        return value == str(st.st_ino).encode("ascii")
    return _entry_matches(_registry_load().get(os.path.realpath(path)), st)


def _entry_matches(entry: object, st: os.stat_result) -> bool:
    return isinstance(entry, dict) and (entry.get("dev"), entry.get("ino")) == (st.st_dev, st.st_ino)


def _registry_load() -> dict[str, object]:
    try:
        data = json.loads(registry_path().read_text())
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return files if isinstance(files, dict) else {}


def _registry_update(real: str, st: os.stat_result) -> None:
    reg = registry_path()
    reg.parent.mkdir(parents=True, exist_ok=True)
    with open(reg.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        files = _registry_load()
        # forget files that are gone or were replaced, so the registry stays small
        kept: dict[str, object] = {}
        for name, entry in files.items():
            try:
                other = os.stat(name)
            except OSError:
                continue
            if _entry_matches(entry, other):
                kept[name] = entry
        kept[real] = {"dev": st.st_dev, "ino": st.st_ino}
        fd, tmp = tempfile.mkstemp(dir=reg.parent, prefix=".created-files.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"version": 1, "files": kept}, f, indent=1, sort_keys=True)
            os.replace(tmp, reg)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
