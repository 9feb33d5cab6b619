"""Where attached simulated drives are recorded, and how to read the records.

``ftlscope sim attach`` runs a server per drive and records it in ``RUN_DIR/<id>/state.json`` (its pid, the
loop device, the drive, the measured path overhead). ``sim list``/``detach``, the device list and the
write-safety checks read the records from here; this module imports nothing heavy so :mod:`ftlscope.devices`
can use it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Attachment", "run_dir", "attachments", "attachment_for_device", "pid_alive", "path_measured"]


def run_dir() -> Path:
    """``$FTLSCOPE_RUN_DIR``, or ``/run/ftlscope/attached`` (root's runtime directory: attaching needs root)."""
    return Path(os.environ.get("FTLSCOPE_RUN_DIR", "/run/ftlscope/attached"))


@dataclass
class Attachment:
    """One attached drive, as its server recorded it."""

    directory: Path
    pid: int
    spec: str
    size_bytes: int
    store: str
    device: str | None  # "/dev/loop3" once the loop device is set up
    direct_io: bool | None
    overhead: dict | None  # the path overhead per request: p10_ns, p50_ns, p90_ns, mean_ns, requests
    # Whether the server writes its counters at once on SIGUSR1 (an older one would die of the signal).
    stats_on_sigusr1: bool = False

    @property
    def alive(self) -> bool:
        return pid_alive(self.pid)

    def stats(self) -> dict | None:
        """The server's counters, written every second while it runs."""
        try:
            return json.loads((self.directory / "stats.json").read_text())
        except (OSError, ValueError):
            return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _load(directory: Path) -> Attachment | None:
    try:
        state = json.loads((directory / "state.json").read_text())
        return Attachment(
            directory=directory,
            pid=int(state["pid"]),
            spec=str(state["spec"]),
            size_bytes=int(state["size_bytes"]),
            store=str(state["store"]),
            device=state.get("device"),
            direct_io=state.get("direct_io"),
            overhead=state.get("overhead"),
            stats_on_sigusr1=state.get("stats_on") == "SIGUSR1",
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def attachments() -> list[Attachment]:
    """Every recorded attachment, live or not (a dead server's record is cleaned up by ``sim list``)."""
    try:
        dirs = sorted(p for p in run_dir().iterdir() if p.is_dir())
    except OSError:
        return []
    return [a for a in map(_load, dirs) if a is not None]


def attachment_for_device(name_or_path: str) -> Attachment | None:
    """The live attachment serving ``loop3`` or ``/dev/loop3``, if any."""
    path = name_or_path if name_or_path.startswith("/") else "/dev/" + name_or_path
    path = os.path.realpath(path)
    for a in attachments():
        if a.device and os.path.realpath(a.device) == path and a.alive:
            return a
    return None


def path_measured(after: dict, before: dict | None = None) -> dict | None:
    """The path's time per request between two copies of a server's counters (``stats.json``; ``before``
    None: since the model started), measured on every request rather than once at attach.

    ``server_ns``: the server's own part (from a request's arrival in its handler to its reply written, less
    the model's time it held the answer on purpose); ``kernel_ns``: the loop device's time for its requests
    (the block layer's counters, from a request's start to its completion) less the whole of the server's
    time, i.e. the loop worker, FUSE and the completion; ``path_ns`` their sum. Not included: a program's
    system call up to the block request and its wake-up after the completion (a few microseconds traced).
    None when the server keeps no such counters (an older one) or answered nothing in between.
    """
    keys = ("answered", "server_total_ns", "server_wait_total_ns", "block_requests", "block_time_total_ns")
    if any(k not in after for k in keys) or (before is not None and any(k not in before for k in keys)):
        return None
    d = {k: after[k] - (before[k] if before else 0) for k in keys}
    if d["answered"] <= 0 or d["block_requests"] <= 0:
        return None
    server_total = d["server_total_ns"] / d["answered"]
    server_own = (d["server_total_ns"] - d["server_wait_total_ns"]) / d["answered"]
    # The block layer's sum is kept in milliseconds: exact to 1 ms over all the requests in between.
    kernel = max(0.0, d["block_time_total_ns"] / d["block_requests"] - server_total)
    return {"requests": d["answered"], "server_ns": server_own, "kernel_ns": kernel,
            "path_ns": server_own + kernel}
