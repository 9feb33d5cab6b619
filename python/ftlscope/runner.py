"""``ftlscope.run``: prepare a target safely, run a workload on the engine, return ordinary data.

The safety policy is applied here, before the engine opens anything for writing; the engine itself only
opens what it is handed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _native, safety
from .devices import resolve_block_device
from .env import system_env
from .errors import RunError, TargetError, UsageError
from .results import RunResult, trace_frame, windows_frame
from .sim import SimDevice
from .units import format_size, parse_duration_ns, parse_size
from .workload import OPS, Workload

ENGINES = ("auto", "uring", "psync")
FILL_REQUEST = 1 << 20


@dataclass
class PreparedTarget:
    path: str
    kind: str  # "block_device" | "regular_file" | "simulated"
    created: bool
    notices: list[str]


def _has_holes(path: str, length: int) -> bool:
    """Whether a file has unwritten regions before ``length`` (reads there would not touch the device)."""
    if length == 0:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except PermissionError:
        raise TargetError(f"permission denied reading {path}; run as a user who may read it") from None
    except OSError as exc:
        raise TargetError(f"cannot open {path}: {exc.strerror}") from None
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE) < length
    except OSError:
        return False
    finally:
        os.close(fd)


def prepare_target(
    target: str,
    workload: Workload,
    *,
    size: int | None,
    destructive: str | None,
    force: bool,
    direct: bool = True,
    engine: str = "auto",
    progress: bool = False,
) -> PreparedTarget:
    """Check the safety rules and make a file target ready: created or extended to ``size`` and filled, so a
    read-only run reads real data rather than holes."""
    notices: list[str] = []
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise TargetError(f"cannot look at {target}: {exc.strerror}") from exc

    if st is not None and stat.S_ISBLK(st.st_mode):
        safety.check_write_allowed(target, writes=workload.writes, destructive=destructive, force=force)
        return PreparedTarget(target, "block_device", False, notices)

    if st is not None and not stat.S_ISREG(st.st_mode):
        # Directories, character devices, sockets: the safety module words these refusals.
        safety.check_write_allowed(target, writes=True, destructive=destructive, force=force)
        raise TargetError(f"{target} is neither a block device nor a regular file")

    current = st.st_size if st is not None else 0
    wanted = size if size is not None else current
    if st is None and size is None:
        raise UsageError(f"--size: {target} does not exist; give --size to create it (e.g. --size 1GiB)")
    if wanted == 0:
        raise UsageError(f"--size: {target} is empty; give --size to make it that large (e.g. --size 1GiB)")
    if wanted % 4096:
        raise UsageError(f"--size: {wanted} B is not a multiple of 4 KiB; round it (e.g. {wanted // 4096 * 4096})")
    grows = wanted > current
    safety.check_write_allowed(
        target, writes=workload.writes or grows, destructive=destructive, force=force
    )
    created = st is None
    if grows:
        with open(target, "ab") as f:
            f.truncate(wanted)
        if created:
            safety.mark_created(target)
        notices.append(f"{'created' if created else 'extended'} {target} to {format_size(wanted)}")
    if workload.mix.get("read", 0) > 0 and _has_holes(target, wanted):
        if created or grows or safety.was_created_by_ftlscope(target):
            fill_file(target, wanted, direct=direct, engine=engine, progress=progress)
            notices.append(f"filled {target} with random data so reads hit real data")
        else:
            notices.append(f"{target} has unwritten holes; reads there do not reach the device")
    return PreparedTarget(target, "regular_file", created, notices)


def fill_file(path: str, length: int, *, direct: bool, engine: str, progress: bool) -> None:
    """Write the whole file once, sequentially, with incompressible data."""
    request = FILL_REQUEST if length % FILL_REQUEST == 0 else 4096
    fill = Workload(
        mix={"write": 100},
        sizes=[request],
        pattern={"kind": "sequential"},
        queue_depth=4,
        stop={"bytes": length},
        data="random",
    )
    handle = _start(path, fill, {"engine": engine, "health_interval_ns": 0}, writable=True, direct=direct)
    completed = _drive(handle, fill, progress=progress, label="filling", total_bytes=length)
    handle.result()
    if not completed:
        # Ctrl-C during the fill: stop here rather than measure a half-filled file.
        raise KeyboardInterrupt


# The engine names workload fields; a CLI user knows them by their flags.
_FIELD_FLAGS = {
    "sizes": "--bs",
    "mix": "--rw/--mix",
    "pattern": "--pattern",
    "range.start": "--offset",
    "range": "--offset/--size",
    "align_offset": "--align-offset",
    "queue_depth": "--qd",
    "queues": "--queues",
    "batch.size": "--batch",
    "stop": "--runtime/--ops/--bytes",
}


def _workload_error(exc: Exception) -> UsageError:
    message = str(exc)
    match = re.match(r"workload field `([a-z_.]+)`: (.*)", message)
    if match:
        field, problem = match.groups()
        flag = _FIELD_FLAGS.get(field) or _FIELD_FLAGS.get(field.split(".")[0])
        if flag:
            return UsageError(f"{flag}: {problem}")
    return UsageError(message)


def _start(path: str, workload: Workload, options: dict[str, Any], *, writable: bool, direct: bool):
    try:
        return _native.RunHandle(path, workload.to_json(), json.dumps(options), writable, direct)
    except _native.TargetOpenError as exc:
        raise TargetError(str(exc)) from None
    except _native.WorkloadInvalid as exc:
        raise _workload_error(exc) from None
    except RuntimeError as exc:
        raise RunError(str(exc)) from None


def _start_sim(device: SimDevice, workload: Workload, options: dict[str, Any]):
    try:
        return _native.RunHandle.sim(device._native, workload.to_json(), json.dumps(options))
    except _native.WorkloadInvalid as exc:
        raise _workload_error(exc) from None


def _drive(handle, workload: Workload, *, progress: bool, label: str, total_bytes: int | None = None,
           on_progress: Callable[[dict], None] | None = None) -> bool:
    """Wait for the run, showing a progress bar; returns False if interrupted by Ctrl-C (the run is
    stopped cleanly and everything measured so far is kept)."""
    stop = workload.stop
    if total_bytes is None and stop.get("bytes"):
        total_bytes = stop["bytes"]
    interrupted = False
    if not progress:
        try:
            while not handle.wait(0.2):
                if on_progress:
                    on_progress(json.loads(handle.progress()))
        except KeyboardInterrupt:
            handle.stop()
            interrupted = True
            handle.wait(None)
        return not interrupted

    if stop.get("time_ns"):
        total, unit = stop["time_ns"] / 1e9 + workload.warmup.get("time_ns", 0) / 1e9, "s"
    elif stop.get("ops"):
        total, unit = stop["ops"] + workload.warmup.get("ops", 0), "ops"
    elif total_bytes:
        total, unit = total_bytes, "bytes"
    else:
        total, unit = None, "ops"
    last = (0.0, 0, 0)
    with _bar() as bar:
        task = bar.add_task(label, total=total, rate="")
        try:
            while not handle.wait(0.2):
                p = json.loads(handle.progress())
                # Rates and time progress on the device's clock: virtual time on a simulated device.
                now = p["device_ns"] / 1e9
                dt = max(now - last[0], 1e-9)
                iops = (p["ops"] - last[1]) / dt
                mbps = (p["bytes"] - last[2]) / dt / 1e6
                last = (now, p["ops"], p["bytes"])
                done = {"s": now, "ops": p["ops"], "bytes": p["bytes"]}[unit]
                errors = f"  [red]{p['errors']} errors" if p["errors"] else ""
                bar.update(task, completed=done, rate=f"{iops:,.0f} IOPS  {mbps:,.1f} MB/s{errors}")
                if on_progress:
                    on_progress(p)
        except KeyboardInterrupt:
            bar.update(task, description=f"{label} (stopping)")
            handle.stop()
            interrupted = True
            handle.wait(None)
        finally:
            bar.remove_task(task)
    return not interrupted


# The bar of a longer job (a profile) that runs many workloads: each run's bar joins it below its own line.
_outer_bar: Any = None


def _new_bar():
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]
    # Progress goes to stderr: stdout keeps only results (tables), clean for a pipe or a file.
    return Progress(*columns, transient=True, console=Console(stderr=True))


@contextlib.contextmanager
def _bar():
    if _outer_bar is not None:
        yield _outer_bar
        return
    with _new_bar() as bar:
        yield bar


@contextlib.contextmanager
def job_progress(label: str, steps: int):
    """A bar for a job of ``steps`` parts (rich shows one live display at a time, so the runs inside the job
    add their bars to this one). Yields ``advance(description)``, and the bar's console for messages."""
    global _outer_bar
    with _new_bar() as bar:
        task = bar.add_task(label, total=steps, rate="")

        def advance(description: str, done: int) -> None:
            bar.update(task, description=description, completed=done)

        _outer_bar = bar
        try:
            yield advance, bar.console
        finally:
            _outer_bar = None


def _target_description(prepared: PreparedTarget, info: dict[str, Any], device: SimDevice | None) -> dict[str, Any]:
    description = {"name": prepared.path, **info, "created_by_ftlscope": prepared.created}
    if device is not None:
        description["sim_config_toml"] = device.config_toml
    if prepared.kind == "block_device":
        dev = resolve_block_device(prepared.path)
        if dev is not None:
            description.update(
                {
                    "device": dev.name,
                    "model": dev.model,
                    "serial": dev.serial,
                    "firmware": dev.firmware,
                    "rotational": dev.rotational,
                    "device_kind": dev.kind,
                    "scheduler": dev.scheduler,
                    "nvme_lba_format": dev.nvme_lba_format,
                }
            )
    return description


def run(
    target: str | SimDevice,
    workload: Workload,
    *,
    engine: str = "auto",
    trace: bool = False,
    trace_limit: int = 50_000_000,
    window: str | int = "100ms",
    io_timeout: str | int = "30s",
    on_error: str = "stop",
    destructive: str | None = None,
    force: bool = False,
    size: str | int | None = None,
    direct: bool = True,
    pin: bool = True,
    health_interval: str | int = "5s",
    progress: bool = False,
    label: str = "running",
) -> RunResult:
    """Run ``workload`` on ``target`` (a block device, a regular file, or ``sim:...``).

    Writing needs the same confirmations as the CLI: ``destructive`` names the device again, ``force``
    overrides a file-system or partition-table signature. A file that does not exist is created with ``size``
    bytes. Ctrl-C stops the run cleanly; the result then holds everything measured so far.
    """
    if engine not in ENGINES:
        raise UsageError(f"--engine: unknown engine '{engine}'; use {', '.join(ENGINES)}")
    if on_error not in ("stop", "continue"):
        raise UsageError(f"--on-error: unknown value '{on_error}'; use stop or continue")
    window_ns = parse_duration_ns(window, "--window")
    if window_ns < 1_000_000:
        raise UsageError(f"--window: time windows must be at least 1ms long (got {window})")
    io_timeout_ns = parse_duration_ns(io_timeout, "--io-timeout")
    if io_timeout_ns < 1_000_000:
        raise UsageError(f"--io-timeout: give at least 1ms (got {io_timeout})")
    size_bytes = parse_size(size, "--size") if size is not None else None
    device = None
    if isinstance(target, SimDevice) or target.startswith("sim:"):
        # Simulated devices need no safety flags: nothing real is written.
        device = target if isinstance(target, SimDevice) else SimDevice.open(target)
        prepared = PreparedTarget(device.name, "simulated", False, [])
    else:
        prepared = prepare_target(
            target, workload, size=size_bytes, destructive=destructive, force=force, direct=direct,
            engine=engine, progress=progress,
        )
    options = {
        "engine": engine,
        "io_timeout_ns": io_timeout_ns,
        "on_error": on_error,
        "trace_limit": trace_limit if trace else None,
        "window_ns": window_ns,
        "pin": pin,
        "health_interval_ns": parse_duration_ns(health_interval, "--health-interval"),
    }
    started = time.time()
    if device is not None:
        handle = _start_sim(device, workload, options)
    else:
        handle = _start(prepared.path, workload, options, writable=workload.writes, direct=direct)
    completed = _drive(handle, workload, progress=progress, label=label)
    raw = handle.result()
    native = json.loads(raw["summary"])
    engine_env = native.pop("engine")
    summary: dict[str, Any] = {
        "target": _target_description(prepared, native.pop("target"), device),
        "workload": native.pop("workload"),
        "env": {**system_env(), "engine": engine_env, "options": native.pop("options"),
                "started_at_unix": started},
        "health": native.pop("health"),
        "run": native.pop("run"),
    }
    for op in OPS:
        if op in native:
            summary[op] = native.pop(op)
    if not completed:
        summary["run"]["stop"] = {"reason": "interrupted"}
    trace_columns = raw["trace"]
    return RunResult(
        summary=summary,
        windows=windows_frame(json.loads(raw["windows"])),
        trace=trace_frame(trace_columns),
        dropped_trace_records=trace_columns["dropped"] if trace_columns else 0,
        notices=prepared.notices + engine_env.get("notices", []),
        write_record=raw.get("write_record"),
    )


def check_outcome(result: RunResult) -> None:
    """Raise RunError (after the results were saved) when the run ended on an error or a time-out."""
    stop = result.summary["run"]["stop"]
    reason = stop["reason"]
    if reason == "io_error":
        raise RunError(
            f"{stop['op']} at byte {stop['offset']} failed: {stop['message']} (errno {stop['errno']}); "
            "results so far are kept; pass --on-error continue to carry on past errors"
        )
    if reason == "timeout":
        raise RunError(
            f"a {stop['op']} at byte {stop['offset']} was outstanding for {stop['outstanding_ns'] / 1e9:.1f} s, "
            "past --io-timeout; the device may be hung; results so far are kept"
        )
    if reason == "engine_failure":
        raise RunError(f"the engine failed: {stop['message']}; results so far are kept")

