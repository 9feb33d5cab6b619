"""Runs on real block devices: loop devices over files in the test's directory, and zram.

Root only (and losetup / a zram device): skipped with the reason otherwise. Every loop device is detached and
zram is reset in the fixtures' teardown, even when a test fails.

I/O errors come from a loop device whose backing file is truncated after the device was attached: reads past
the new end of the file fail with EIO (the kernel's loop driver; older kernels zero-filled instead, and the
tests that need errors are then skipped).
"""

from __future__ import annotations

import errno
import json
import mmap
import os
from pathlib import Path

import pandas as pd
import pytest

from ftlscope import from_flags, run
from ftlscope.errors import SafetyError

pytestmark = pytest.mark.usefixtures("state_home")

KiB, MiB = 1 << 10, 1 << 20


def _untouched(backing: Path) -> bool:
    """Whether a sparse backing file is still all hole (nothing was ever written to the device)."""
    fd = os.open(backing, os.O_RDONLY)
    try:
        os.lseek(fd, 0, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return True
        raise
    finally:
        os.close(fd)
    return False


@pytest.fixture
def loop(make_loop) -> tuple[str, Path]:
    """A 64 MiB loop device over a sparse file: (device, backing file)."""
    return make_loop(64 * MiB)


# ---------------------------------------------------------------------------------------------------------
# reading, and the write confirmation


def test_read_only_run_needs_no_flags(cli, loop, scratch):
    dev, backing = loop
    out = scratch / "read.json"
    done = cli("run", dev, "--rw", "randread", "--runtime", "0.2s", "--json", out, "--quiet")
    assert done.returncode == 0, done.stderr
    s = json.loads(out.read_text())
    target = s["target"]
    assert target["kind"] == "block_device"
    assert target["name"] == dev
    assert target["size_bytes"] == 64 * MiB
    assert target["logical_block_size"] == 512
    assert target["physical_block_size"] >= 512
    assert target["writable"] is False
    assert target["device"] == os.path.basename(dev)
    assert target["device_kind"] == "loop"
    assert s["read"]["ops"] > 0 and s["read"]["errors"] == 0
    engine = s["env"]["engine"]
    if "unavailable" not in engine["backend_reason"]:
        assert engine["backend"] == "io_uring", "a loop device completes asynchronously"
    assert _untouched(backing), "a read run wrote to the device"


def test_size_is_a_range_on_a_block_device(cli, loop, scratch):
    dev, _ = loop
    out, trace = scratch / "range.json", scratch / "range.parquet"
    done = cli("run", dev, "--rw", "randread", "--size", "8MiB", "--ops", "300", "--json", out, "--trace", trace,
               "--quiet")
    assert done.returncode == 0, done.stderr
    s = json.loads(out.read_text())
    assert s["workload"]["range"] == {"start": 0, "length": 8 * MiB}
    assert s["target"]["size_bytes"] == 64 * MiB, "the device is not resized"
    t = pd.read_parquet(trace)
    assert len(t) == 300 and (t["offset_bytes"] + t["size"] <= 8 * MiB).all()


def test_write_needs_destructive(cli, loop, error_line):
    dev, backing = loop
    done = cli("run", dev, "--rw", "randwrite", "--ops", "100", "--quiet")
    assert done.returncode == 2
    line = error_line(done)
    assert f"--destructive {dev}" in line
    assert _untouched(backing)


def test_write_with_destructive(cli, loop, scratch):
    dev, backing = loop
    out = scratch / "write.json"
    done = cli("run", dev, "--rw", "randwrite", "--ops", "100", "--destructive", dev, "--json", out, "--quiet")
    assert done.returncode == 0, done.stderr
    s = json.loads(out.read_text())
    assert s["write"]["ops"] == 100 and s["write"]["errors"] == 0
    assert s["target"]["writable"] is True
    assert not _untouched(backing)


def test_destructive_must_name_this_device(make_loop):
    dev, backing = make_loop(16 * MiB, "a.img")
    other, _ = make_loop(16 * MiB, "b.img")
    with pytest.raises(SafetyError) as exc:
        run(dev, from_flags(rw="randwrite", ops=10), destructive=other)
    assert f"--destructive {dev}" in str(exc.value)
    assert _untouched(backing)


# ---------------------------------------------------------------------------------------------------------
# trim and write zeroes


@pytest.mark.parametrize("engine", ["uring", "psync"])
@pytest.mark.parametrize("op", ["trim", "write_zeroes"])
def test_trim_and_write_zeroes(loop, op, engine):
    dev, backing = loop
    run(dev, from_flags(rw="write", bs="64k", qd=4, size="8MiB", total_bytes="8MiB", data="ones"), destructive=dev,
        engine=engine)
    assert set(backing.read_bytes()[: 8 * MiB]) == {0xFF}
    result = run(dev, from_flags(rw="write", mix=f"{op}=100", bs="64k", qd=4, total_bytes="4MiB"), destructive=dev,
                 engine=engine)
    s = result.summary
    assert s["run"]["stop"] == {"reason": "completed"}
    assert s["run"]["errors"] == 0 and s[op]["errors"] == 0
    assert s[op]["ops"] == 64 and s[op]["bytes"] == 4 * MiB
    data = backing.read_bytes()
    assert set(data[: 4 * MiB]) == {0}, f"{op} left non-zero data"
    assert set(data[4 * MiB : 8 * MiB]) == {0xFF}, "nothing past the range is touched"


# ---------------------------------------------------------------------------------------------------------
# I/O errors


@pytest.fixture
def failing_loop(make_loop) -> tuple[str, int]:
    """A 64 MiB loop device whose reads succeed below 32 MiB and fail with EIO above: (device, boundary)."""
    dev, backing = make_loop(64 * MiB)
    with open(backing, "r+b") as f:
        f.write(b"\x11" * (32 * MiB))
        f.truncate(32 * MiB)
    buf = mmap.mmap(-1, 4096)
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        os.preadv(fd, [buf], 0)
        try:
            os.preadv(fd, [buf], 48 * MiB)
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
        else:
            pytest.skip("this kernel's loop driver zero-fills reads past the backing file's end: no EIO to test")
    finally:
        os.close(fd)
        buf.close()
    return dev, 32 * MiB


def test_on_error_continue_counts_every_failure(failing_loop):
    dev, boundary = failing_loop
    result = run(dev, from_flags(rw="randread", qd=4, ops=400), on_error="continue", trace=True)
    s = result.summary
    assert s["run"]["stop"] == {"reason": "completed"}
    read = s["read"]
    assert read["ops"] > 0 and read["errors"] > 0
    assert read["ops"] + read["errors"] == 400
    assert s["run"]["errors"] == read["errors"]
    assert all(e["errno"] == errno.EIO and e["offset"] >= boundary and e["op"] == "read"
               for e in s["run"]["error_samples"])
    assert len(s["run"]["error_samples"]) == read["errors"]
    t = result.trace
    assert len(t) == 400
    beyond = t["offset_bytes"] >= boundary
    assert (t.loc[beyond, "status"] == -errno.EIO).all()
    assert (t.loc[~beyond, "status"] == t.loc[~beyond, "size"]).all()
    assert result.windows["errors"].sum() == read["errors"]
    assert result.windows["ops"].sum() == read["ops"]


def test_on_error_stop_ends_the_run_at_the_first_error(failing_loop):
    dev, boundary = failing_loop
    result = run(dev, from_flags(rw="randread", ops=400), on_error="stop")
    s = result.summary
    stop = s["run"]["stop"]
    assert stop["reason"] == "io_error"
    assert stop["op"] == "read" and stop["errno"] == errno.EIO and stop["offset"] >= boundary
    assert s["run"]["errors"] >= 1
    assert s["read"]["ops"] < 400


def test_cli_on_error_stop_exits_1_and_keeps_results(cli, failing_loop, scratch, error_line):
    dev, boundary = failing_loop
    out = scratch / "stop.json"
    done = cli("run", dev, "--rw", "randread", "--ops", "400", "--json", out, "--quiet")
    assert done.returncode == 1, done.stderr
    line = error_line(done)
    assert "--on-error continue" in line and "failed" in line
    s = json.loads(out.read_text())
    assert s["run"]["stop"]["reason"] == "io_error"
    assert s["run"]["stop"]["offset"] >= boundary


def test_cli_on_error_continue_finishes(cli, failing_loop, scratch):
    dev, _ = failing_loop
    out = scratch / "continue.json"
    done = cli("run", dev, "--rw", "randread", "--ops", "400", "--on-error", "continue", "--json", out, "--quiet")
    assert "Traceback" not in done.stderr
    # the run carried on as asked; the errors are in the table and the summary, not in the exit code
    assert done.returncode == 0, done.stderr
    s = json.loads(out.read_text())
    assert s["run"]["stop"] == {"reason": "completed"}
    assert s["read"]["errors"] > 0 and s["read"]["ops"] + s["read"]["errors"] == 400


# ---------------------------------------------------------------------------------------------------------
# zram


def test_auto_engine_on_zram_is_psync(zram_device):
    result = run(zram_device, from_flags(rw="randread", runtime="0.2s"))
    s = result.summary
    assert s["target"]["kind"] == "block_device"
    assert s["target"]["size_bytes"] == 256 * MiB
    engine = s["env"]["engine"]
    assert engine["backend"] == "psync"
    assert "zram" in engine["backend_reason"]
    assert s["read"]["ops"] > 0


def test_forced_io_uring_on_zram_leaves_queue_threads_unpinned(zram_device):
    result = run(zram_device, from_flags(rw="randread", qd=8, runtime="0.2s"), engine="uring")
    engine = result.summary["env"]["engine"]
    assert engine["backend"] == "io_uring"
    assert engine["pinned_cpus"] == [], "io_uring's workers need every CPU"
    assert result.summary["read"]["ops"] > 0


def test_zram_with_io_uring_and_writes(zram_device):
    result = run(zram_device, from_flags(rw="randwrite", qd=4, ops=500), engine="uring", destructive=zram_device)
    s = result.summary
    assert s["env"]["engine"]["backend"] == "io_uring"
    assert s["write"]["ops"] == 500 and s["write"]["errors"] == 0
