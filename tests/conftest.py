"""Shared fixtures for the run, CLI and block-device tests.

Nothing here is autouse: the modules that need a fixture ask for it, so the other test modules run exactly as
they would without this file. Every loop device, zram set-up and scratch directory made here is undone in the
fixture's teardown, even when the test fails.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

MiB = 1 << 20


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def _supports_o_direct(directory: Path) -> bool:
    probe = directory / ".ftlscope-o-direct-probe"
    try:
        fd = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
    except OSError:
        return False
    try:
        buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants
        try:
            os.pwritev(fd, [buf], 0)
            os.preadv(fd, [buf], 0)
        finally:
            buf.close()
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def state_home(tmp_path_factory) -> Iterator[Path]:
    """Keep ftlscope's created-files registry out of the real home directory (for this process and for every
    CLI subprocess, which inherits the environment)."""
    state = tmp_path_factory.mktemp("xdg-state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(state))
        yield state


@pytest.fixture(scope="session")
def _scratch_root(tmp_path_factory) -> Iterator[Path]:
    """A directory on a file system that takes O_DIRECT: pytest's tmp dir when it does (ext4 here), else a
    directory under /var/tmp (tmpfs /tmp before Linux 6.6 refuses O_DIRECT)."""
    base = tmp_path_factory.mktemp("scratch")
    if _supports_o_direct(base):
        yield base
        return
    other = Path(tempfile.mkdtemp(prefix="ftlscope-test-", dir="/var/tmp"))
    if not _supports_o_direct(other):
        shutil.rmtree(other, ignore_errors=True)
        pytest.skip("no directory here supports O_DIRECT (tried pytest's tmp dir and /var/tmp)")
    try:
        yield other
    finally:
        shutil.rmtree(other, ignore_errors=True)


@pytest.fixture
def scratch(_scratch_root, request, state_home) -> Iterator[Path]:
    """A fresh, empty directory for one test, on a file system that supports O_DIRECT."""
    safe = "".join(c if c.isalnum() else "_" for c in request.node.name)[:60]
    d = Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=_scratch_root))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def module_scratch(_scratch_root, request, state_home) -> Iterator[Path]:
    """Like ``scratch``, shared by one module's tests (for files that are costly to make)."""
    d = Path(tempfile.mkdtemp(prefix=f"{request.module.__name__}-", dir=_scratch_root))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# the command line


def _ftlscope_command() -> list[str]:
    """The installed ``ftlscope`` console script (the one next to this Python, not a pyenv shim), or
    ``python -m ftlscope.cli`` when there is none."""
    beside = Path(sys.executable).parent / "ftlscope"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("ftlscope")
    if found:
        return [found]
    return [sys.executable, "-m", "ftlscope.cli"]


def _default_sigint() -> None:
    # A shell without job control starts background jobs with SIGINT ignored, and Python keeps an ignored
    # SIGINT ignored: give the child the default disposition so its own Ctrl-C handling is what we test.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def ftlscope_argv() -> list[str]:
    """How to start the ftlscope command."""
    return _ftlscope_command()


@pytest.fixture(scope="session")
def spawn(ftlscope_argv, state_home) -> Callable[..., subprocess.Popen]:
    """``spawn("run", path, ...)``: start the ftlscope command (text pipes, default SIGINT), don't wait."""

    def start(*args: str | os.PathLike, preexec_fn: Callable[[], None] | None = None,
              cwd: str | os.PathLike | None = None) -> subprocess.Popen:
        def setup() -> None:
            _default_sigint()
            if preexec_fn is not None:
                preexec_fn()

        return subprocess.Popen([*ftlscope_argv, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=cwd, preexec_fn=setup)

    return start


@pytest.fixture(scope="session")
def cli(spawn) -> Callable[..., subprocess.CompletedProcess]:
    """``cli("run", path, "--rw", "read", ...)``: run the ftlscope command to the end and return the
    CompletedProcess (text stdout/stderr)."""

    def run(*args: str | os.PathLike, timeout: float = 60, cwd: str | os.PathLike | None = None,
            preexec_fn: Callable[[], None] | None = None) -> subprocess.CompletedProcess:
        proc = spawn(*args, preexec_fn=preexec_fn, cwd=cwd)
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    return run


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single ``ftlscope: error: ...`` line a failed command must print on stderr; fails otherwise."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ftlscope: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], f"expected one 'ftlscope: error:' line:\n{proc.stderr}"
    # notices ("ftlscope: created ...") may come first, but nothing else: no usage text, no second error
    assert all(line.startswith("ftlscope: ") for line in lines), proc.stderr
    return errors[0]


@pytest.fixture(scope="session")
def error_line() -> Callable[[subprocess.CompletedProcess], str]:
    """``error_line(done)``: the one ``ftlscope: error:`` line on stderr (fails the test if there is not
    exactly one, if anything else is printed, or on a traceback)."""
    return _one_error_line


# ---------------------------------------------------------------------------------------------------------
# block devices (root only)


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True)


@pytest.fixture
def losetup() -> str:
    """losetup's path; skips the test (with the reason) when loop devices cannot be used here."""
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    found = _tool("losetup")
    if found is None:
        pytest.skip("losetup not installed (Debian package mount)")
    if not os.path.exists("/dev/loop-control"):
        pytest.skip("no /dev/loop-control: the kernel has no loop driver")
    return found


@pytest.fixture
def make_loop(losetup, scratch) -> Iterator[Callable[..., tuple[str, Path]]]:
    """``make_loop(size=64 * MiB)`` attaches a loop device over a fresh sparse file in ``scratch`` and returns
    (device path, backing file). Every device is detached in teardown."""
    attached: list[str] = []

    def make(size: int = 64 * MiB, name: str = "loop-backing.img") -> tuple[str, Path]:
        backing = scratch / name
        with open(backing, "wb") as f:
            f.truncate(size)
        done = _run(losetup, "--find", "--show", str(backing))
        if done.returncode != 0:
            pytest.skip(f"losetup cannot attach a loop device here: {done.stderr.strip()}")
        dev = done.stdout.strip()
        attached.append(dev)
        return dev, backing

    try:
        yield make
    finally:
        for dev in reversed(attached):
            for _ in range(50):  # udev may still hold the device for a moment after a run
                if _run(losetup, "--detach", dev).returncode == 0:
                    break
                time.sleep(0.05)


def _reset_zram(sysfs: Path) -> None:
    # udev's probe after a write run may hold the device for a moment: reset fails with EBUSY meanwhile
    for attempt in range(100):
        try:
            (sysfs / "reset").write_text("1")
            return
        except OSError:
            if attempt == 99:
                raise
            time.sleep(0.02)


@pytest.fixture
def zram_device() -> Iterator[str]:
    """/dev/zram0, reset and sized 256 MiB; reset again in teardown (and given back its earlier size)."""
    if os.geteuid() != 0:
        pytest.skip("setting up zram needs root")
    sysfs = Path("/sys/block/zram0")
    if not (sysfs.exists() and os.path.exists("/dev/zram0")):
        pytest.skip("no /dev/zram0 (modprobe zram)")
    holders = list((sysfs / "holders").iterdir()) if (sysfs / "holders").exists() else []
    mounts = Path("/proc/mounts").read_text().split()
    swaps = Path("/proc/swaps").read_text()
    if holders or "/dev/zram0" in mounts or "/dev/zram0" in swaps:
        pytest.skip("/dev/zram0 is in use here; not touching it")
    earlier = (sysfs / "disksize").read_text().strip()
    try:
        _reset_zram(sysfs)
        (sysfs / "disksize").write_text("256M")
    except OSError as exc:
        pytest.skip(f"cannot set up /dev/zram0: {exc}")
    try:
        yield "/dev/zram0"
    finally:
        with contextlib.suppress(OSError):
            _reset_zram(sysfs)
        if earlier not in ("", "0"):
            with contextlib.suppress(OSError):
                (sysfs / "disksize").write_text(earlier)


# Under pytest-xdist (`pytest -n auto --dist loadgroup`, the README's test command) a module runs whole on one
# worker, so its module-scoped fixtures (a profile of a preset, a stored run) are computed once, not once per
# worker. The modules that change machine-wide state (loop devices, zram0, mounts, FUSE attach servers, ftrace)
# or check that none of ftlscope's is left attached share one group: they run one after another, and one never
# sees another's devices. A new module that attaches or mounts anything belongs in MACHINE_STATE_MODULES.
MACHINE_STATE_MODULES = frozenset({
    "test_blockdev", "test_capture", "test_compare_system", "test_devices", "test_fs_impact", "test_git_checkout",
    "test_safety", "test_scheduler_impact", "test_sim_attach", "test_tree_traversal", "test_video_streaming",
    "test_zoning",
})


# ... and any test elsewhere that asks for one of these fixtures.
MACHINE_STATE_FIXTURES = frozenset({"losetup", "make_loop", "zram_device"})


# tryfirst: pytest-xdist's worker reads the groups in its own collection hook, which is registered after this
# file and so would run first (without it every test ran on either worker, groups ignored).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rpartition(".")[2]
        shared = module in MACHINE_STATE_MODULES or not MACHINE_STATE_FIXTURES.isdisjoint(item.fixturenames)
        item.add_marker(pytest.mark.xdist_group("machine-state" if shared else module))
