"""The ``[noise]`` levels ``validate-probes --noise`` adds to every preset (issue 16): a device file is the
preset's own TOML with one ``[noise]`` section appended, so the ground truth is unchanged (shared/device-model.md:
noise never changes a property) and every draw derives from the preset's seed, so a run is repeatable."""

from __future__ import annotations

import re
import tempfile
import tomllib
from pathlib import Path

from ..errors import UsageError
from ..sim import show

# One table, one row per level. What each models:
# - mild: a healthy, cool, idle datacenter drive: NAND times vary a little, a few microseconds of interrupt and
#   driver jitter, one read in a thousand retried, no housekeeping and no firmware stalls.
# - medium: a typical consumer drive in use: NAND times vary by 15 %, a background operation (patrol read, map
#   journal) every 20 ms occupying a unit for 1 ms, one read in 200 retried, one command in 10 000 stalled 3 ms.
# - harsh: an old or busy drive: 30 % variation, housekeeping every 5 ms for 2 ms, one read in 50 retried, one
#   command in 1000 stalled for 10 ms.
NOISE_LEVELS: dict[str, dict[str, object]] = {
    "mild": {"latency_cv": 0.05, "host_jitter": "2us", "read_retry_rate": 0.001,
             "background_interval": "inf", "background_busy": "1ms", "stall_rate": 0.0, "stall_latency": "3ms"},
    "medium": {"latency_cv": 0.15, "host_jitter": "5us", "read_retry_rate": 0.005,
               "background_interval": "20ms", "background_busy": "1ms", "stall_rate": 1e-4, "stall_latency": "3ms"},
    "harsh": {"latency_cv": 0.30, "host_jitter": "10us", "read_retry_rate": 0.02,
              "background_interval": "5ms", "background_busy": "2ms", "stall_rate": 1e-3, "stall_latency": "10ms"},
}


def noise_section(level: str) -> str:
    if level not in NOISE_LEVELS:
        raise UsageError(f"--noise: '{level}' is not a noise level; use one of {', '.join(NOISE_LEVELS)}")
    lines = ["[noise]"]
    for key, value in NOISE_LEVELS[level].items():
        lines.append(f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value!r}")
    return "\n".join(lines) + "\n"


def noisy_device_file(spec: str, level: str, directory: str | Path | None = None) -> Path:
    """Write ``spec`` (a preset name or device file) with the ``level`` noise section as a device file. A
    ``[noise]`` section of its own (some presets carry one, fitted to their drive) is replaced, so every drive
    of a validation runs at the one level asked for."""
    section = noise_section(level)
    # show() writes one table per section header and no line of a value starts with "[": the section ends
    # at the next header.
    text = re.sub(r"^\[noise\]\n(?:(?!\[).*\n?)*", "", show(spec), flags=re.M)
    name = tomllib.loads(text)["device"]["name"]
    folder = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="ftlscope-noisy-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{level}.toml"
    path.write_text(text.rstrip("\n") + "\n\n" + section)
    return path
