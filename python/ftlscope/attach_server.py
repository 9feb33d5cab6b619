"""The server behind ``ftlscope sim attach``: one process per attached drive.

Run as ``python -m ftlscope.attach_server DIR SPEC SIZE STORE`` by :mod:`ftlscope.attach` (never by hand). It

1. enters a private mount namespace, so its FUSE mount is seen by no one else and vanishes with the process,
   whatever way it ends;
2. mounts the drive (Rust, crate ``ftlscope-serve``) as one file whose data is the sparse file STORE;
3. puts a loop device over that file with direct I/O and *autoclear*, and keeps it open: the kernel removes
   the loop device when the last opener closes it, so a crash of this process leaves no stale loop device
   (one still mounted goes when it is unmounted);
4. measures the path overhead (QD 1 reads answered at once), then answers on the model's clock; from then on
   the path is measured on every request too (the server's counters beside the loop device's block-layer
   counters, in ``stats.json``: :func:`ftlscope.attach_state.path_measured`);
5. records itself in ``DIR/state.json`` and its counters in ``DIR/stats.json`` every second, and at once when sent
   SIGUSR1 (:func:`ftlscope.experiments._attached.drive_counters` asks so, rather than wait up to a second), until
   SIGTERM or SIGINT, then lets go of the loop device, unmounts and removes DIR.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import select
import shutil
import signal
import struct
import sys
import time
from pathlib import Path

CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
LOOP_CTL_GET_FREE = 0x4C82
LOOP_CONFIGURE = 0x4C0A
LO_FLAGS_AUTOCLEAR = 4
LO_FLAGS_DIRECT_IO = 16
# struct loop_config: fd, block_size, struct loop_info64 (lo_device .. lo_init), __reserved[8]
_LOOP_CONFIG = struct.Struct("=II QQQQQ IIII 64s64s32s 2Q 8Q")
CALIBRATION_REQUESTS = 2000
FILE_NAME = "drive"


def _private_mount_namespace() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    # Without this, a mount under a shared mount (systemd makes / shared) would propagate back to the host.
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")


def _attach_loop(file: str, block: int) -> tuple[int, str]:
    """A free loop device configured over ``file`` (direct I/O asked, autoclear): its open fd and path.

    One LOOP_CONFIGURE ioctl, as ``losetup --direct-io=on --sector-size BLOCK`` issues it, because losetup
    cannot set autoclear, which is what makes a crashed server leave no loop device behind.
    """
    try:
        backing = os.open(file, os.O_RDWR | os.O_DIRECT)
    except OSError:
        backing = os.open(file, os.O_RDWR)
    try:
        ctl = os.open("/dev/loop-control", os.O_RDWR)
        try:
            for _ in range(20):  # another process may take the free device between the two calls
                number = fcntl.ioctl(ctl, LOOP_CTL_GET_FREE)
                path = f"/dev/loop{number}"
                fd = os.open(path, os.O_RDWR)
                config = _LOOP_CONFIG.pack(
                    backing, block, 0, 0, 0, 0, 0, 0, 0, 0, LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO,
                    file.encode()[:63], b"", b"", 0, 0, *([0] * 8),
                )
                try:
                    fcntl.ioctl(fd, LOOP_CONFIGURE, config)
                except OSError as exc:
                    os.close(fd)
                    if exc.errno == errno.EBUSY:
                        continue
                    raise
                return fd, path
            raise OSError(errno.EBUSY, "no free loop device stayed free")
        finally:
            os.close(ctl)
    finally:
        os.close(backing)


def _set_rotational(name: str, spec: str) -> None:
    """Say what the drive is: a hard disk is rotational (the kernel's I/O schedulers and ``ftlscope devices``
    read this), an SSD not."""
    import tomllib

    from ftlscope import _native

    kind = tomllib.loads(_native.SimDevice(spec).config_toml()).get("device", {}).get("kind", "ssd")
    try:
        Path(f"/sys/block/{name}/queue/rotational").write_text("1" if kind == "hdd" else "0")
    except OSError:
        pass  # read-only on some kernels: only the hint is lost


def _complete_on_the_submitting_cpu(name: str) -> str | None:
    """``rq_affinity`` 2: a request completes on the CPU that submitted it, by an interrupt to it, instead of in
    the block softirq the server's reply raises, which from a process runs in ksoftirqd at normal priority.
    Measured with fio 4 KiB random reads at QD 1 on an attached SSD (path-limited, so fio saw the path), seven
    pairs at load 9-19 on 2 CPUs: mean 144 us against 194 at the default 1, lower in six pairs of seven
    (docs/attach.md). The loop device's own queue setting, which outlives the attachment (the loop device is
    reused): the value before, to put back at detach; None if it could not be set."""
    path = Path(f"/sys/block/{name}/queue/rq_affinity")
    try:
        before = path.read_text().strip()
        path.write_text("2")
        return before
    except OSError:
        return None


def _block_counters(name: str) -> tuple[int, int]:
    """The loop device's requests completed and their summed time (ns) from the block layer's counters
    (``/sys/block/NAME/stat``: reads, writes, discards, flushes, each a count and a time in ms)."""
    try:
        f = [int(x) for x in Path(f"/sys/block/{name}/stat").read_text().split()]
    except (OSError, ValueError):
        return 0, 0
    ios = f[0] + f[4] + (f[11] + f[15] if len(f) >= 17 else 0)
    ms = f[3] + f[7] + (f[14] + f[16] if len(f) >= 17 else 0)
    return ios, ms * 1_000_000


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    from ftlscope import _native

    directory, spec, size, store = Path(argv[0]), argv[1], int(argv[2]), argv[3]
    stop = False

    def on_signal(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # SIGUSR1 asks for the counters now: its handler does nothing, the byte Python writes to the wake-up pipe for
    # every signal ends the wait between two writes (select, not sleep: a sleep resumes after a handler).
    signal.signal(signal.SIGUSR1, lambda _sig, _frame: None)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    loop_fd = None
    drive = None
    try:
        _private_mount_namespace()
        mnt = directory / "mnt"
        mnt.mkdir(exist_ok=True)
        drive = _native.AttachedDrive(spec, size, store, str(mnt), FILE_NAME)
        block = json.loads(_native.SimDevice(spec).info())["logical_block_size"]
        loop_fd, device = _attach_loop(drive.file, block)
        name = os.path.basename(device)
        dio = Path(f"/sys/block/{name}/loop/dio").read_text().strip() == "1"
        _set_rotational(name, spec)
        rq_affinity_before = _complete_on_the_submitting_cpu(name)
        overhead = json.loads(drive.calibrate(device, CALIBRATION_REQUESTS))
        # The block layer's counters from here on, beside the server's, measure the path on every request.
        block_base = _block_counters(name)
        drive.start_model(overhead["trimmed_mean_ns"], overhead["ps_per_byte"])
        _write_json(directory / "state.json", {
            "pid": os.getpid(), "spec": spec, "size_bytes": size, "store": store, "device": device,
            "direct_io": dio, "overhead": overhead, "started": time.time(), "stats_on": "SIGUSR1",
            # Put back at detach (None: could not be set).
            "rq_affinity_before": rq_affinity_before,
        })
    except Exception as exc:  # the parent shows this line and exits 2
        (directory / "error").write_text(f"{exc}\n")
        if loop_fd is not None:
            os.close(loop_fd)
        if drive is not None:
            drive.stop()
        return 2
    while not stop:
        # "taken": when the counters were read, so that a reader who asked at time t can wait for a copy taken
        # after t (a write under way when it asked may hold counters from before).
        taken = time.time()
        block = _block_counters(name)
        _write_json(directory / "stats.json", {
            **json.loads(drive.stats()), "block_requests": block[0] - block_base[0],
            "block_time_total_ns": block[1] - block_base[1], "taken": taken,
        })
        if select.select([wake_r], [], [], 1.0)[0]:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
    if rq_affinity_before is not None:
        try:
            Path(f"/sys/block/{name}/queue/rq_affinity").write_text(rq_affinity_before)
        except OSError:
            pass
    os.close(loop_fd)  # the last opener: autoclear removes the loop device (at once, or when it is unmounted)
    deadline = time.monotonic() + 10
    while Path(f"/sys/block/{name}/loop/backing_file").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    drive.stop()
    shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
