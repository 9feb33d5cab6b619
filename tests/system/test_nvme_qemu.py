"""The NVMe paths against QEMU's emulated NVMe controller (tests/system/nvme_qemu.sh).

Opt-in: it boots a virtual machine and takes about ten minutes under TCG emulation, so it runs only with
FTLSCOPE_SYSTEM_TESTS=1, as root, where qemu-system-x86_64 can be installed and Debian's kernel package is
in the archive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.system

SCRIPT = Path(__file__).with_name("nvme_qemu.sh")
SKIP_EXIT = 77


def test_nvme_paths_in_a_qemu_guest(tmp_path):
    if os.environ.get("FTLSCOPE_SYSTEM_TESTS") != "1":
        pytest.skip("boots a QEMU guest for ~10 min: set FTLSCOPE_SYSTEM_TESTS=1 to run it")
    if os.geteuid() != 0:
        pytest.skip("needs root: it installs qemu-system-x86 and nvme-cli with apt-get and runs ftlscope as root")
    if shutil.which("apt-get") is None and shutil.which("qemu-system-x86_64") is None:
        pytest.skip("no qemu-system-x86_64 and no apt-get to install it")
    work = os.environ.get("FTLSCOPE_QEMU_DIR", str(tmp_path / "qemu"))
    proc = subprocess.run(["sh", str(SCRIPT), work], capture_output=True, text=True,
                          timeout=int(os.environ.get("FTLSCOPE_QEMU_TIMEOUT", "1500")) + 600)
    if proc.returncode == SKIP_EXIT:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    checks = [line for line in proc.stdout.splitlines() if line.startswith("CHECK ")]
    failed = [line for line in checks if " FAIL" in line]
    assert proc.returncode == 0 and checks and not failed, proc.stdout + proc.stderr
