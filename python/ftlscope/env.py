"""The conditions a result was measured under: kernel, distribution, CPU and its governor, memory, versions.

A number without its conditions cannot be compared (seed 001 §1), so every summary carries this.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _distribution() -> str | None:
    text = _read("/etc/os-release") or ""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def _memory_bytes() -> int | None:
    text = _read("/proc/meminfo") or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def system_env() -> dict:
    """What a reader needs to judge or repeat a measurement."""
    from . import __version__

    governors = sorted(
        {
            g
            for g in (
                _read(f"/sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor") for i in range(os.cpu_count() or 1)
            )
            if g
        }
    )
    return {
        "ftlscope_version": __version__,
        "kernel": platform.release(),
        "distribution": _distribution(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "cpu_governor": ",".join(governors) if governors else "not exposed",
        "memory_bytes": _memory_bytes(),
        "python": platform.python_version(),
        "io_uring_disabled": _read("/proc/sys/kernel/io_uring_disabled"),
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
    }
