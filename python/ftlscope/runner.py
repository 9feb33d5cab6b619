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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _native, safety
from .devices import hash_serial, resolve_block_device
from .env import system_env
from .errors import RunError, TargetError, UsageError
from .metrics import HELD_BYTES, SHIM_COUNT_KEYS, SHIM_DELAY, SHIM_READ_KEYS, WINDOW_INDEX, WRITE_SHIM
from .newt.shim import ShimSettings
from .progress import format_eta, job_fraction, run_fraction, seconds_left, step_weights
from .results import RunResult, trace_frame, windows_frame
from .sim import SimDevice
from .units import format_size, parse_duration_ns, parse_size
from .workload import OPS, Workload

ENGINES = ("auto", "uring", "psync", "psync-pool")
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


def stat_target(target: str) -> os.stat_result | None:
    """``os.stat`` of a target path; None when it does not exist (a file to create), TargetError when it
    cannot be looked at."""
    try:
        return os.stat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TargetError(f"cannot look at {target}: {exc.strerror}") from exc


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
    st = stat_target(target)

    if st is not None and stat.S_ISBLK(st.st_mode):
        safety.check_write_allowed(target, writes=workload.writes, destructive=destructive, force=force)
        return PreparedTarget(target, "block_device", False, notices)

    if st is not None and not stat.S_ISREG(st.st_mode):
        # Directories, character devices, sockets: the safety module words these refusals.
        safety.check_write_allowed(target, writes=True, destructive=destructive, force=force)
        raise TargetError(f"{target} is neither a block device nor a regular file")

    current = st.st_size if st is not None else 0
    wanted = size if size is not None else current
    if st is None:
        # Where a new file would go (not under /dev, a directory that exists) before asking for --size.
        safety.check_write_allowed(target, writes=True, destructive=destructive, force=force)
    if st is None and size is None:
        raise UsageError(f"--size: {target} does not exist; give --size to create it (e.g. --size 1GiB)")
    if wanted == 0:
        raise UsageError(f"--size: {target} is empty; give --size to make it that large (e.g. --size 1GiB)")
    if size is None and wanted < 4096:
        # No --size was given: the file itself is what is wrong, so name it and its size, not the flag.
        raise UsageError(f"{target} is {wanted:,} B, smaller than the 4 KiB a run needs; give --size to extend it "
                         "(e.g. --size 1GiB) or choose a larger file")
    if size is None and wanted % 4096:
        rounded = -(-wanted // 4096) * 4096
        raise UsageError(f"{target} is {wanted:,} B, not a multiple of 4 KiB; give --size {rounded} to extend it "
                         "to whole 4 KiB blocks")
    if wanted % 4096:
        raise UsageError(f"--size: {wanted} B is not a multiple of 4 KiB; round it "
                         f"(e.g. {wanted // 4096 * 4096 or 4096})")
    grows = wanted > current
    safety.check_write_allowed(
        target, writes=workload.writes or grows, destructive=destructive, force=force
    )
    created = st is None
    if grows:
        _check_room(target, wanted - (st.st_blocks * 512 if st is not None else 0))
        try:
            with open(target, "ab") as f:
                f.truncate(wanted)
        except OSError as exc:
            if created:
                with contextlib.suppress(OSError):
                    os.unlink(target)
            raise TargetError(f"--size: cannot {'create' if created else 'extend'} {target} to "
                              f"{format_size(wanted)} ({exc.strerror or exc}); give another path or size") from None
        if created:
            safety.mark_created(target)
        notices.append(f"{'created' if created else 'extended'} {target} to {format_size(wanted)}")
    if workload.mix.get("read", 0) > 0 and _has_holes(target, wanted):
        if created or grows or safety.was_created_by_ftlscope(target):
            fill_file(target, wanted, direct=direct, engine=engine, progress=progress, remove_on_failure=created)
            notices.append(f"filled {target} with random data so reads hit real data")
        else:
            notices.append(f"{target} has unwritten holes; reads there do not reach the device")
    return PreparedTarget(target, "regular_file", created, notices)


def _check_room(target: str, needed: int) -> None:
    """Refuse a file its file system cannot hold (free space, or the largest file it takes: EFBIG) before
    creating or growing anything; a half-filled file would read as holes."""
    directory = os.path.dirname(os.path.abspath(target))
    try:
        st = os.statvfs(directory)
    except OSError:
        return  # no statistics (some FUSE file systems): the fill's own errors still stop the run
    free = st.f_bavail * st.f_frsize
    if needed > free:
        raise TargetError(f"--size: {target} needs {format_size(needed)} more, and its file system has "
                          f"{format_size(free)} free; give a smaller --size or another place")


def fill_file(path: str, length: int, *, direct: bool, engine: str, progress: bool,
              remove_on_failure: bool = False) -> None:
    """Write the whole file once, sequentially, with incompressible data. A fill that fails (the file system
    filled up meanwhile, an I/O error) raises RunError, after removing the file if ``remove_on_failure``
    (ftlscope created it): reads of a half-filled file would hit holes and time nothing."""
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
    stop = json.loads(handle.result()["summary"])["run"]["stop"]
    if not completed:
        # Ctrl-C during the fill: stop here rather than measure a half-filled file.
        raise KeyboardInterrupt
    if stop.get("reason") != "completed":
        if remove_on_failure:
            with contextlib.suppress(OSError):
                os.unlink(path)
        what = stop.get("message") or stop.get("reason")
        where = f" at byte {stop['offset']}" if stop.get("offset") is not None else ""
        raise RunError(f"filling {path} failed{where}: {what}"
                       f"{'; the file was removed' if remove_on_failure else ''}; nothing was measured")


# A simulated fill writes in large requests: the simulator's cost grows with requests more than with bytes
# (a 256 GB drive fills in about 7 s of wall time in 8 MiB requests, 11 s in 1 MiB ones).
SIM_FILL_REQUEST = 8 << 20
# After the fill, the device idles this long (virtual time) so the write buffer drains and the reads that
# follow measure the flash, not the tail of the fill (as experiments/context.py's preconditioning does).
SIM_SETTLE_NS = 1_000_000_000


def precondition_sim_reads(device: SimDevice, workload: Workload, *, progress: bool) -> dict[str, Any]:
    """Write the range a read workload will read, once, sequentially: a fresh simulated drive answers reads of
    never-written pages without touching flash (as a trimmed real drive does), so they would measure nothing.
    Returns what was done, for the summary (``run.precondition``)."""
    size = device.info["size_bytes"]
    start = workload.range.get("start", 0) // 4096 * 4096
    length = workload.range.get("length", 0)
    end = min(size, start + length if length else size)
    end = min(size, -(-end // 4096) * 4096)
    # filled_bytes is a prefix from LBA 0 that earlier fills on this device (object) wrote.
    begin = max(start, device.filled_bytes // 4096 * 4096) if device.filled_bytes >= start else start
    if begin >= end:
        return {"kind": "already-filled", "bytes": 0, "range": [start, end]}
    started_ns = device.now_ns
    bulk = (end - begin) // SIM_FILL_REQUEST * SIM_FILL_REQUEST
    for offset, length_, request in ((begin, bulk, SIM_FILL_REQUEST), (begin + bulk, end - begin - bulk, 4096)):
        if length_ <= 0:
            continue
        fill = Workload(mix={"write": 100}, sizes=[request], pattern={"kind": "sequential"},
                        range={"start": offset, "length": length_}, queue_depth=8, stop={"bytes": length_},
                        data="random")
        handle = _start_sim(device, fill, {"health_interval_ns": 0})
        completed = _drive(handle, fill, progress=progress, label="filling the range to read")
        handle.result()
        if not completed:
            raise KeyboardInterrupt
    if begin <= device.filled_bytes:
        device.filled_bytes = max(device.filled_bytes, end)
    device.idle(f"{SIM_SETTLE_NS}ns")
    return {"kind": "sequential-fill", "bytes": end - begin, "range": [begin, end],
            "device_ns": device.now_ns - started_ns}


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


# The engine's JSON parser names a column, not a field: the last key before it is the field, known by its flag.
_KEY_FLAGS = {
    "sizes": "--bs", "kind": "--pattern", "window": "--pattern", "stride": "--pattern", "hot_start": "--pattern",
    "hot_length": "--pattern", "hot_share": "--pattern", "theta": "--pattern", "start": "--offset",
    "length": "--size", "align_offset": "--align-offset", "queue_depth": "--qd", "queues": "--queues",
    "size": "--batch", "idle_ns": "--idle", "ops": "--ops/--warmup-ops", "bytes": "--bytes",
    "time_ns": "--runtime/--warmup", "data": "--data", "seed": "--seed",
    **{op: "--mix" for op in OPS},
}


def _workload_error(exc: Exception, workload_json: str = "") -> UsageError:
    message = str(exc)
    match = re.match(r"workload field `([a-z_.]+)`: (.*)", message)
    if match:
        field, problem = match.groups()
        flag = _FIELD_FLAGS.get(field) or _FIELD_FLAGS.get(field.split(".")[0])
        if flag:
            return UsageError(f"{flag}: {problem}")
    match = re.match(r"workload JSON: (.*) at line 1 column (\d+)$", message)
    if match and workload_json:
        keys = re.findall(r'"([a-z_]+)": ', workload_json[: int(match.group(2))])
        if keys and keys[-1] in _KEY_FLAGS:
            return UsageError(f"{_KEY_FLAGS[keys[-1]]}: the engine cannot take this value of {keys[-1]} "
                              f"({match.group(1)})")
    return UsageError(message)


def _start(path: str, workload: Workload, options: dict[str, Any], *, writable: bool, direct: bool,
           replay: dict[str, Any] | None = None):
    text = workload.to_json()
    try:
        if replay is not None:
            return _native.RunHandle.replay(path, text, json.dumps(options), writable, direct, replay)
        return _native.RunHandle(path, text, json.dumps(options), writable, direct)
    except _native.TargetOpenError as exc:
        raise TargetError(str(exc)) from None
    except _native.WorkloadInvalid as exc:
        raise _workload_error(exc, text) from None
    except RuntimeError as exc:
        raise RunError(str(exc)) from None


def _start_sim(device: SimDevice, workload: Workload, options: dict[str, Any], replay: dict[str, Any] | None = None):
    text = workload.to_json()
    try:
        if replay is not None:
            return _native.RunHandle.sim_replay(device._native, text, json.dumps(options), replay)
        return _native.RunHandle.sim(device._native, text, json.dumps(options))
    except _native.WorkloadInvalid as exc:
        raise _workload_error(exc, text) from None


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

    sizes = workload.sizes or [0]
    mean_request = sum(sizes) / len(sizes)

    def fraction(p: dict) -> float | None:
        return run_fraction(stop, workload.warmup, p, total_bytes=total_bytes, mean_request=mean_request)

    last = (0.0, 0, 0)
    with _bar() as bar:
        task = bar.add_task(label, total=1.0, rate="", eta=format_eta(None))
        try:
            while not handle.wait(0.2):
                p = json.loads(handle.progress())
                # Rates and time progress on the device's clock: virtual time on a simulated device.
                now = p["device_ns"] / 1e9
                dt = max(now - last[0], 1e-9)
                iops = (p["ops"] - last[1]) / dt
                mbps = (p["bytes"] - last[2]) / dt / 1e6
                last = (now, p["ops"], p["bytes"])
                done = fraction(p)
                errors = f"  [red]{p['errors']} errors" if p["errors"] else ""
                bar.update(task, completed=done or 0.0, rate=f"{iops:,.0f} IOPS  {mbps:,.1f} MB/s{errors}",
                           eta=format_eta(seconds_left(done, p["elapsed_ns"] / 1e9)))
                if on_progress:
                    on_progress(p)
        except KeyboardInterrupt:
            bar.update(task, description=f"{label} (stopping)")
            handle.stop()
            interrupted = True
            handle.wait(None)
        finally:
            # Show where the run ended (100 % for one that ran to its limit) before the bar goes: polling every
            # 0.2 s would otherwise leave the last sample, which on a fast simulated run is far from the end.
            p = json.loads(handle.progress())
            done = fraction(p)
            bar.update(task, completed=1.0 if p.get("finished") and not interrupted else done or 0.0,
                       eta=format_eta(0.0))
            bar.refresh()
            bar.remove_task(task)
    return not interrupted


# The bar of a longer job (a profile) that runs many workloads: each run's bar joins it below its own line.
_outer_bar: Any = None


def _new_bar():
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA {task.fields[eta]}"),
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
def job_progress(label: str, steps: Sequence[str], suite: str = "quick"):
    """A bar for a job of named ``steps`` (``probes`` or experiment names), each weighed by its expected time
    (rich shows one live display at a time, so the runs inside the job add their bars to this one). Yields
    ``advance(description, done)`` (``done`` steps finished), and the bar's console for messages."""
    global _outer_bar
    weights = step_weights(steps, suite)
    started = time.monotonic()
    with _new_bar() as bar:
        task = bar.add_task(label, total=1.0, rate="", eta=format_eta(None))

        def advance(description: str, done: int) -> None:
            fraction = job_fraction(weights, done)
            bar.update(task, description=description, completed=fraction,
                       eta=format_eta(seconds_left(fraction, time.monotonic() - started)))

        _outer_bar = bar
        try:
            yield advance, bar.console
        finally:
            _outer_bar = None


def _target_description(prepared: PreparedTarget, info: dict[str, Any], device: SimDevice | None,
                        show_serial: bool = False) -> dict[str, Any]:
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
                    # Summaries get shared: the serial is hashed from the first file written, unless asked.
                    "serial": dev.serial if show_serial or not dev.serial else hash_serial(dev.serial),
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
    trace_file: str | Path | None = None,
    trace_chunk_rows: int | None = None,
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
    precondition: bool | None = None,
    show_serial: bool = False,
    replay: dict[str, Any] | None = None,
    trace_metadata: dict[str, Any] | None = None,
    rate_limit_writes: ShimSettings | None = None,
) -> RunResult:
    """Run ``workload`` on ``target`` (a block device, a regular file, or ``sim:...``).

    Writing needs the same confirmations as the CLI: ``destructive`` names the device again, ``force``
    overrides a file-system or partition-table signature. A file that does not exist is created with ``size``
    bytes. Ctrl-C stops the run cleanly; the result then holds everything measured so far. With
    ``precondition=True``, a read workload on a simulated device first writes the range it reads (see
    :func:`precondition_sim_reads`); with True or False the summary's ``run.precondition`` says what was done
    (None, the default, leaves the device's state to the caller, as experiments do). A drive's serial
    number appears hashed (``sha256:...``) unless ``show_serial``. ``replay`` (see :mod:`ftlscope.replay`)
    takes the requests from a recorded trace instead of drawing them from ``workload``. ``rate_limit_writes``
    (:meth:`ftlscope.newt.shim.ShimSettings.resolve`) holds writes back in the engine's write rate-limiting shim;
    the summary's ``write_shim`` and the windows' ``held_bytes`` column say what it did.

    ``trace=True`` keeps the per-request trace in memory (``result.trace``, up to ``trace_limit`` requests);
    ``trace_file`` writes it to that Parquet file while the run goes, in flat memory whatever its length (row
    groups of ``trace_chunk_rows`` requests, default :data:`ftlscope.trace_stream.CHUNK_ROWS`). ``trace_metadata``
    goes into the saved trace's Parquet metadata under the key ``ftlscope``, as trace readers take it (a replay
    of a synthetic trace says so there).
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
    _check_shim(workload, rate_limit_writes)
    device = None
    if isinstance(target, SimDevice) or target.startswith("sim:"):
        # Simulated devices need no safety flags: nothing real is written.
        device = target if isinstance(target, SimDevice) else SimDevice.open(target)
        prepared = PreparedTarget(device.name, "simulated", False, device.notices)
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
        "trace_chunk_rows": None,
        "window_ns": window_ns,
        "pin": pin,
        "health_interval_ns": parse_duration_ns(health_interval, "--health-interval"),
        "write_shim": rate_limit_writes.engine_options() if rate_limit_writes is not None else None,
    }
    conditioned: dict[str, Any] | None = None
    if device is not None and precondition is not None:
        conditioned = {"kind": "none", "bytes": 0}
        if workload.mix.get("read", 0) == 0:
            conditioned["reason"] = "no reads in the workload"
        elif precondition:
            conditioned = precondition_sim_reads(device, workload, progress=progress)
        else:
            conditioned["reason"] = "left out on request: reads of never-written pages do not touch flash"
    if trace_file is not None:
        # Before the run starts: once it runs, a Ctrl-C must land in _drive, which keeps the results. (The
        # writer imports pyarrow on its own thread.)
        from .trace_stream import CHUNK_ROWS, TraceWriter

        options["trace_chunk_rows"] = trace_chunk_rows or CHUNK_ROWS
    started = time.time()
    if device is not None:
        handle = _start_sim(device, workload, options, replay)
    else:
        handle = _start(prepared.path, workload, options, writable=workload.writes, direct=direct, replay=replay)
    writer = None
    if trace_file is not None:
        writer = TraceWriter(handle, trace_file, optional=("issue_lag_ns",) if replay is not None else (),
                             metadata=trace_metadata)
    raw = None
    try:
        if writer is not None:
            writer.start()
        completed = _drive(handle, workload, progress=progress, label=label)
        raw = handle.result()
    finally:
        if writer is not None:
            if raw is None:
                handle.stop()  # something went wrong here: end the run, so the writer gets its last chunk
            streamed = writer.finish()
    native = json.loads(raw["summary"])
    engine_env = native.pop("engine")
    summary: dict[str, Any] = {
        "target": _target_description(prepared, native.pop("target"), device, show_serial),
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
    if conditioned is not None:
        summary["run"]["precondition"] = conditioned
    windows = windows_frame(json.loads(raw["windows"]))
    if rate_limit_writes is not None:
        summary[WRITE_SHIM] = shim_summary(rate_limit_writes, native.pop(WRITE_SHIM, None))
        windows = with_held_bytes(windows, summary[WRITE_SHIM])
    trace_columns = raw["trace"]
    return RunResult(
        summary=summary,
        windows=windows,
        trace=trace_frame(trace_columns),
        dropped_trace_records=trace_columns["dropped"] if trace_columns else 0,
        notices=prepared.notices + engine_env.get("notices", []),
        write_record=raw.get("write_record"),
        sim_device=device,
        streamed_trace=streamed if writer is not None else None,
        trace_metadata=trace_metadata,
    )


def _check_shim(workload: Workload, shim: ShimSettings | None) -> None:
    """The shim paces writes itself: refused beside fio's rate limits and batches, which pace them too."""
    if shim is None or not shim.active:
        return
    if any((workload.rate or {}).get(kind) for kind in ("bytes_per_s", "iops")):
        raise UsageError("--rate-limit-writes: the shim paces writes itself; leave out --rate and --rate-iops")
    if workload.batch:
        raise UsageError("--rate-limit-writes: the shim lets writes in one by one; leave out --batch")


def shim_summary(settings: ShimSettings, engine: dict[str, Any] | None) -> dict[str, Any]:
    """The summary's ``write_shim``: the settings, and (when it ran) what the engine's shim did: the writes it
    delayed and by how much, and the bytes it held per window (``held_bytes.per_window``, Figure 8)."""
    out = settings.to_json()
    if engine is None:
        return out
    out.update({key: engine[key] for key in SHIM_COUNT_KEYS})
    out.update({key: engine.get(key) for key in SHIM_READ_KEYS})
    # The mean over every write through the shim (the "mean write delay": 0 for one not delayed), and over
    # the delayed ones.
    writes = engine["writes"]
    out[SHIM_DELAY] = {"mean": engine["delay_ns_total"] / writes if writes else 0.0,
                       "mean_delayed": engine["mean_delay_ns"], "max": engine["delay_ns_max"]}
    out[HELD_BYTES] = {"max": engine["max_held_seen"], "window_ns": engine["window_ns"],
                       "per_window": engine["held_bytes_max"], "truncated": engine["series_truncated"]}
    return out


def with_held_bytes(windows, shim: dict[str, Any]):
    """The windows table with a ``held_bytes`` column: the most the shim held in each window (0 where it held
    nothing)."""
    per_window = (shim.get(HELD_BYTES) or {}).get("per_window") or []
    if windows.empty:
        return windows
    index = windows[WINDOW_INDEX].to_numpy()
    held = [per_window[i] if 0 <= i < len(per_window) else 0 for i in index]
    return windows.assign(**{HELD_BYTES: held})


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

