"""fio as the reference: run the same workload with fio and with ftlscope, and compare.

- :func:`fio_command` translates a :class:`~ftlscope.workload.Workload` into one fio job on the command line
  (raising :class:`~ftlscope.errors.UsageError` for what fio cannot express, naming the feature);
- :func:`run_fio` runs it and returns fio's JSON; :func:`fio_summary` turns that JSON into ftlscope's summary
  shape (``read``/``write``/``trim`` with ``ops``, ``iops``, ``bw_bytes``, ``lat_ns``), plus CPU time per I/O;
- :func:`fio_check` alternates fio and ftlscope rounds on one target and returns a DataFrame (one row per round,
  tool, engine and operation); :func:`comparison_frame` takes medians over rounds and the ratios ours/fio
  against fio's best engine; :func:`format_comparison` renders that as a rich table;
- :func:`fio_check_cli` is what ``ftlscope fio-check`` calls.

Latency is fio's ``lat_ns`` (submission to completion, what ftlscope measures), not ``clat_ns``; with
``--lat_percentiles=1`` fio puts its percentiles there.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import zip_longest
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from .errors import RunError, TargetError, UsageError
from .units import format_ns, format_size
from .workload import Workload

FIO_MISSING = "fio is not installed; apt-get install fio"
FIO_ENGINES = ("io_uring", "libaio", "psync")
SYNC_ENGINES = ("psync",)
PERCENTILES = ("50", "90", "95", "99", "99.9", "99.99")
LAT_KEYS = ("mean", "stddev", "min", "max", *(f"p{p}" for p in PERCENTILES))
FIO_OPS = ("read", "write", "trim")
# Patterns whose offsets walk the range in order: the engine gives each queue its own share of the range.
SPLIT_PATTERNS = ("sequential", "permutation", "permuted_windows", "strided")
# As the engine's psync backend: more threads than this and the workload stays at QD 1.
PSYNC_MAX_THREADS = 256


# ---------------------------------------------------------------------------------------------------------
# finding fio


def fio_available() -> str | None:
    """fio's version (``"3.33"``), or None when fio is not installed or does not run."""
    path = shutil.which("fio")
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout.strip() or out.stderr.strip()).splitlines()
    if out.returncode != 0 or not text:
        return None
    return text[0].strip().removeprefix("fio-")


def require_fio() -> str:
    """fio's version; raises TargetError saying how to install it when it is missing."""
    version = fio_available()
    if version is None:
        raise TargetError(FIO_MISSING)
    return version


# ---------------------------------------------------------------------------------------------------------
# workload -> fio command line


def target_size(path: str) -> int:
    """The size in bytes of a block device or regular file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise TargetError(f"cannot open {path} to find its size: {exc.strerror}") from exc
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def _fio_time(ns: int) -> str:
    """A duration as fio reads it: whole seconds, milliseconds or microseconds."""
    if ns % 1_000_000_000 == 0:
        return f"{ns // 1_000_000_000}s"
    if ns % 1_000_000 == 0:
        return f"{ns // 1_000_000}ms"
    return f"{max(1, round(ns / 1000))}us"


def _per_job(total: int, jobs: int) -> int:
    """Each of ``jobs`` fio jobs does the same amount; round up so the total is at least ``total``."""
    return -(-total // jobs)


def _rw_base(mix: dict[str, int]) -> tuple[str, int | None]:
    """fio's ``--rw`` stem (read, write, rw, trim) and the read percentage for a read/write mix."""
    active = {op: w for op, w in mix.items() if w > 0}
    if not active:
        raise UsageError("mix: every weight is zero; give at least one operation a weight")
    for op in ("write_zeroes", "flush"):
        if op in active:
            raise UsageError(
                f"fio cannot issue {op} requests in a job; compare a workload of read, write or trim only"
            )
    if "trim" in active:
        if len(active) > 1:
            raise UsageError("fio cannot mix trim with other operations; compare trim on its own (--rw trim)")
        return "trim", None
    if set(active) == {"read"}:
        return "read", None
    if set(active) == {"write"}:
        return "write", None
    read, write = active["read"], active["write"]
    percent = 100 * read / (read + write)
    if percent != int(percent):
        raise UsageError(
            f"fio takes the read share as a whole percentage; mix read={read},write={write} is {percent:.2f} %"
        )
    return "rw", int(percent)


def _size_flags(sizes: list[int]) -> list[str]:
    if len(set(sizes)) == 1:
        return [f"--bs={sizes[0]}"]
    counts = Counter(sizes)
    if len(set(counts.values())) == 1:
        # Blank percentages: fio splits evenly, as the engine picks each listed size equally often.
        return ["--bssplit=" + ":".join(f"{size}/" for size in counts)]
    shares = {size: 100 * n / len(sizes) for size, n in counts.items()}
    if any(share != int(share) for share in shares.values()):
        raise UsageError(
            "fio's bssplit takes whole percentages; the request sizes listed give "
            + ", ".join(f"{size} B {share:.2f} %" for size, share in shares.items())
        )
    return ["--bssplit=" + ":".join(f"{size}/{int(share)}" for size, share in shares.items())]


def _hotset_zones(pattern: dict[str, Any], length: int) -> str:
    """``zoned_abs`` zones (relative to ``--offset``) for the engine's hot set: the hot share inside the hot
    range, the rest spread over the cold parts in proportion to their lengths."""
    hot_start, hot_length, share = int(pattern["hot_start"]), int(pattern["hot_length"]), float(pattern["hot_share"])
    hot = share * 100
    if abs(hot - round(hot)) > 1e-9:
        raise UsageError(f"pattern hotset: fio's zoned distribution takes whole percentages, not {hot:g} %")
    hot = round(hot)
    before, after = hot_start, length - hot_start - hot_length
    if hot_length <= 0 or after < 0:
        raise UsageError("pattern hotset: the hot set must lie inside the range")
    cold = 100 - hot
    cold_total = before + after
    if cold_total == 0:
        zones = [(100, hot_length)]
    else:
        cold_before = round(cold * before / cold_total)
        zones = [(cold_before, before), (hot, hot_length), (cold - cold_before, after)]
        if any(pct > 0 and size == 0 for pct, size in zones):
            raise UsageError("pattern hotset: the hot set leaves no cold range for the cold share")
    return "zoned_abs:" + ":".join(f"{pct}/{size}" for pct, size in zones if size > 0)


def _rate_flags(rate: dict[str, dict[str, int]], jobs: int) -> list[str]:
    """fio's ``--rate``/``--rate_iops`` for the workload's limits: fio's apply to each job, ours to the whole run,
    so each job gets its share (rounded up); an empty value leaves that direction unlimited."""
    flags = []
    for key, flag in (("bytes_per_s", "rate"), ("iops", "rate_iops")):
        limits = rate.get(key) or {}
        if any(limits.values()):
            values = [str(_per_job(int(limits[d]), jobs)) if limits.get(d) else "" for d in FIO_OPS]
            flags.append(f"--{flag}=" + ",".join(values))
    return flags


def sync_threads(workload: Workload) -> int | None:
    """How many fio jobs of one request each give fio's psync engine the workload's depth, or None where that
    would not be the same workload. The same rule as our psync backend (``real::psync_workload``): offsets
    drawn at random, or one sequential walk of a single size taken in turns (fio: job j starts j requests in
    and skips the other jobs' requests, ``--rw=read:GAP`` with ``--offset_increment``; one queue only, as
    fio's offset_increment cannot also step between queues' shares); no batch mode; at most 256 threads."""
    depth = _inflight(workload)
    kind = dict(workload.pattern).get("kind", "sequential")
    queues = int(workload.queues)
    if depth <= 1 or workload.batch or queues * depth > PSYNC_MAX_THREADS:
        return None
    independent = kind not in SPLIT_PATTERNS
    shared_walk = kind == "sequential" and len(workload.sizes) == 1 and queues == 1
    return queues * depth if independent or shared_walk else None


def fio_command(
    target: str,
    workload: Workload,
    engine: str = "io_uring",
    runtime_ns: int | None = None,
    *,
    target_size_bytes: int | None = None,
    direct: bool = True,
    sync_at_qd1: bool = False,
    fio: str = "fio",
) -> list[str]:
    """fio's command line for ``workload`` on ``target`` as one job (``--numjobs`` = queues).

    ``runtime_ns`` replaces the workload's time limit. ``target_size_bytes`` is needed when the range runs to
    the end of the target (length 0); without it the target is opened to find its size. fio's psync engine
    has one request in flight per job: a deeper workload runs as that many jobs (threads) where that is the
    same workload (:func:`sync_threads`); otherwise it is refused unless ``sync_at_qd1`` (then it runs at
    QD 1). Raises UsageError naming whatever fio cannot express.
    """
    if engine not in FIO_ENGINES:
        raise UsageError(f"--fio-engines: unknown fio engine '{engine}'; use {', '.join(FIO_ENGINES)}")
    base, rwmixread = _rw_base(workload.mix)
    pattern = dict(workload.pattern)
    kind = pattern.get("kind", "sequential")
    sizes = [int(s) for s in workload.sizes]
    if not sizes or min(sizes) <= 0:
        raise UsageError("sizes: give at least one request size above zero")
    grain, largest = min(sizes), max(sizes)
    queues = int(workload.queues)

    # --rw, and the random-offset flags
    random_flags: list[str] = []
    if kind == "sequential":
        rw = base
    elif kind == "strided":
        stride = int(pattern["stride"])
        if len(set(sizes)) != 1 or stride < sizes[0]:
            raise UsageError(
                "pattern strided: fio can only skip a fixed gap after each request; "
                "give one request size no larger than the stride"
            )
        rw = base if stride == sizes[0] else f"{base}:{stride - sizes[0]}"
    elif kind == "permuted_windows":
        raise UsageError(
            "pattern permuted_windows: fio cannot shuffle requests inside windows; "
            "compare with sequential, permutation or random"
        )
    elif kind in ("random", "permutation", "zipf", "hot_set"):
        rw = "rand" + base
        if kind == "random":
            random_flags = ["--norandommap=1"]
        elif kind == "permutation":
            # Every block once per pass: the LFSR never repeats (one size); the random map does it for several.
            random_flags = (["--random_generator=lfsr"] if len(set(sizes)) == 1 else []) + ["--norandommap=0"]
        elif kind == "zipf":
            theta = float(pattern["theta"])
            if theta == 1.0:
                raise UsageError("pattern zipf: fio refuses theta 1.0; use 0.999 or 1.001")
            random_flags = [f"--random_distribution=zipf:{theta:g}", "--norandommap=1"]
        # hot_set: the zones need the range length; added below
    else:
        raise UsageError(f"pattern {kind}: fio has no equivalent")

    # the range: the engine adds align_offset to the range start; queues of ordered patterns split it
    start = int(workload.range.get("start", 0))
    length = int(workload.range.get("length", 0))
    if length == 0:
        size = target_size_bytes if target_size_bytes is not None else target_size(target)
        end = size
    else:
        end = start + length
    first = start + int(workload.align_offset)
    usable = end - first
    if usable < largest:
        raise UsageError(f"range: {usable} B cannot hold one {largest} B request")
    range_flags = [f"--offset={first}"]
    if kind in SPLIT_PATTERNS and queues > 1:
        share = (usable // queues) // grain * grain
        if share < largest:
            raise UsageError(f"range: {usable} B shared by {queues} queues leaves less than one request each")
        range_flags += [f"--size={share}", f"--offset_increment={share}"]
    else:
        range_flags += [f"--size={usable}"]
    if kind == "hot_set":
        random_flags = [f"--random_distribution={_hotset_zones(pattern, usable)}", "--norandommap=1"]

    # depth and batches
    batch = workload.batch
    inflight = _inflight(workload)
    jobs = queues
    thread_flags: list[str] = []
    if engine in SYNC_ENGINES and inflight > 1:
        threads = sync_threads(workload)
        if threads is None and not sync_at_qd1:
            raise UsageError(
                f"fio's {engine} engine has one request in flight per job, and this workload cannot be split "
                f"into {inflight} jobs (batch mode, or an ordered walk); use io_uring or libaio, or --qd 1"
            )
        if threads is not None:
            jobs = threads
            thread_flags = ["--thread"]
            if kind == "sequential":
                # Job j reads requests j, j+N, j+2N, ... of the one walk: it starts j requests in and skips
                # the N-1 requests of the other jobs after each of its own.
                step = sizes[0]
                rw = f"{base}:{(inflight - 1) * step}"
                region = (usable - (inflight - 1) * step) // step * step
                range_flags = [f"--offset={first}", f"--size={region}", f"--offset_increment={step}"]
    depth = 1 if engine in SYNC_ENGINES else inflight
    batch_flags: list[str] = []
    if batch and engine not in SYNC_ENGINES:
        batch_flags = [f"--iodepth_batch_submit={inflight}", f"--iodepth_batch_complete_min={inflight}"]
        if int(batch.get("idle_ns", 0)) > 0:
            batch_flags += [f"--thinktime={_fio_time(int(batch['idle_ns']))}", f"--thinktime_blocks={inflight}"]

    # when to stop
    stop = dict(workload.stop)
    if runtime_ns is not None:
        stop["time_ns"] = int(runtime_ns)
    time_ns, ops, nbytes = int(stop.get("time_ns", 0)), int(stop.get("ops", 0)), int(stop.get("bytes", 0))
    stop_flags: list[str] = []
    if ops or nbytes:
        # number_ios alone never goes past one pass over --size; io_size lets fio wrap around.
        if ops:
            stop_flags.append(f"--number_ios={_per_job(ops, jobs)}")
        io_size = _per_job(nbytes, jobs) if nbytes else _per_job(ops, jobs) * largest
        stop_flags.append(f"--io_size={io_size}")
        if time_ns:
            stop_flags.append(f"--runtime={_fio_time(time_ns)}")
    elif time_ns:
        stop_flags += [f"--runtime={_fio_time(time_ns)}", "--time_based"]
    else:
        raise UsageError("stop: the workload has no limit; give --runtime, --ops or --bytes")
    warmup = dict(workload.warmup)
    if int(warmup.get("ops", 0)):
        raise UsageError("warmup: fio can only warm up for a time (ramp_time); use --warmup TIME, not --warmup-ops")
    if int(warmup.get("time_ns", 0)):
        stop_flags.append(f"--ramp_time={_fio_time(int(warmup['time_ns']))}")

    # written data
    data_flags: list[str] = []
    if workload.writes and base != "trim":
        data = workload.data
        if data == "zeros":
            data_flags = ["--zero_buffers=1"]
        elif data == "ones":
            data_flags = ["--buffer_pattern=0xff"]
        elif data == "0xaa":
            data_flags = ["--buffer_pattern=0xaa"]
        elif data == "random":
            data_flags = ["--scramble_buffers=1"]
        else:
            raise UsageError(f"data {data}: fio cannot write this pattern; use --data random, zeros, ones or 0xaa")

    engine_flags: list[str] = []
    if engine == "io_uring":
        engine_flags = ["--fixedbufs", "--registerfiles", "--hipri=0", "--sqthread_poll=0"]

    cmd = [
        fio,
        "--name=ftlscope",
        "--filename=" + target.replace(":", "\\:"),  # fio splits file names at ':'
        f"--direct={1 if direct else 0}",
        f"--ioengine={engine}",
        f"--rw={rw}",
        *_size_flags(sizes),
        f"--iodepth={depth}",
        *batch_flags,
        f"--numjobs={jobs}",
        *thread_flags,
        "--group_reporting",
        *range_flags,
        *random_flags,
        "--randrepeat=1",
        f"--randseed={int(workload.seed)}",
    ]
    if rwmixread is not None:
        cmd.append(f"--rwmixread={rwmixread}")
    cmd += _rate_flags(dict(workload.rate or {}), jobs)
    cmd += [
        *stop_flags,
        *data_flags,
        *engine_flags,
        "--output-format=json",
        "--lat_percentiles=1",
        "--percentile_list=" + ":".join(PERCENTILES),
    ]
    return cmd


# ---------------------------------------------------------------------------------------------------------
# running fio and reading its JSON


def parse_fio_output(text: str) -> dict[str, Any] | None:
    """fio's JSON report from its standard output, skipping any warnings printed before it."""
    decoder = json.JSONDecoder()
    index = text.find("{")
    while index != -1:
        try:
            value, _ = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict) and "jobs" in value:
            return value
        index = text.find("{", index + 1)
    return None


def _last_lines(text: str, n: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-n:])


def run_fio(cmd: Sequence[str], timeout_s: float | None = None) -> dict[str, Any]:
    """Run fio and return its parsed JSON report; RunError (with fio's own message) if it fails."""
    cmd = list(cmd)
    if os.path.basename(cmd[0]) == "fio" and os.sep not in cmd[0]:
        path = shutil.which("fio")
        if path is None:
            raise TargetError(FIO_MISSING)
        cmd[0] = path
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise TargetError(FIO_MISSING) from None
    except subprocess.TimeoutExpired:
        raise RunError(f"fio did not finish within {timeout_s:.0f} s; it was stopped") from None
    report = parse_fio_output(proc.stdout)
    if report is None:
        why = _last_lines(proc.stderr) or _last_lines(proc.stdout) or "no output"
        raise RunError(f"fio failed (exit {proc.returncode}): {why}")
    for job in report.get("jobs", []):
        err = int(job.get("error", 0) or 0)
        if err:
            why = _last_lines(proc.stderr) or _last_lines(proc.stdout.split("{", 1)[0])
            raise RunError(f"fio's job failed with error {err} ({os.strerror(err)}): {why}")
    if proc.returncode != 0:
        raise RunError(f"fio failed (exit {proc.returncode}): {_last_lines(proc.stderr) or 'no message'}")
    return report


def _lat_figures(ddir: dict[str, Any]) -> dict[str, float]:
    lat = ddir.get("lat_ns") or {}
    percentiles = lat.get("percentile") or (ddir.get("clat_ns") or {}).get("percentile") or {}
    figures: dict[str, float] = {
        "mean": float(lat.get("mean", 0.0)),
        "stddev": float(lat.get("stddev", 0.0)),
        "min": int(lat.get("min", 0)),
        "max": int(lat.get("max", 0)),
    }
    for key, value in percentiles.items():
        name = f"p{float(key):g}"
        if name in LAT_KEYS:
            figures[name] = int(value)
    return figures


def fio_summary(fio_json: dict[str, Any]) -> dict[str, Any]:
    """fio's JSON (one job, ``--group_reporting``) in ftlscope's summary shape.

    Per operation (``read``/``write``/``trim``, those that ran): ``ops``, ``iops``, ``bw_bytes``, ``bytes``,
    ``errors`` and ``lat_ns`` (mean, stddev, min, max, p50 ... p99.99 from fio's ``lat_ns``). Plus ``engine``
    (``backend``: fio's ioengine), ``run`` (``measured_ns``) and ``cpu`` (usr/sys %, CPU seconds of the jobs,
    ``ns_per_io``: ``(usr_cpu + sys_cpu) / 100 * job_runtime / ops``).
    """
    jobs = fio_json.get("jobs") or []
    if len(jobs) != 1:
        raise RunError(f"fio's report has {len(jobs)} jobs; run one job with --group_reporting")
    job = jobs[0]
    options = job.get("job options") or {}
    summary: dict[str, Any] = {"tool": "fio", "version": str(fio_json.get("fio version", "")).removeprefix("fio-")}
    total_ops = 0
    runtime_ms = 0
    for op in FIO_OPS:
        ddir = job.get(op)
        if not ddir or not int(ddir.get("total_ios", 0)):
            continue
        ops = int(ddir["total_ios"])
        total_ops += ops
        runtime_ms = max(runtime_ms, int(ddir.get("runtime", 0)))
        summary[op] = {
            "ops": ops,
            "iops": float(ddir.get("iops", 0.0)),
            "bw_bytes": float(ddir.get("bw_bytes", 0.0)),
            "bytes": int(ddir.get("io_bytes", 0)),
            "errors": 0,
            "lat_ns": _lat_figures(ddir),
        }
    usr, sys_ = float(job.get("usr_cpu", 0.0)), float(job.get("sys_cpu", 0.0))
    job_runtime_ms = float(job.get("job_runtime", 0.0))
    cpu_s = (usr + sys_) / 100 * job_runtime_ms / 1000
    summary["engine"] = {
        "backend": options.get("ioengine", "psync"),
        "iodepth": int(options.get("iodepth", 1)),
        "numjobs": int(options.get("numjobs", 1)),
    }
    summary["run"] = {"measured_ns": runtime_ms * 1_000_000, "job_runtime_ns": int(job_runtime_ms * 1e6)}
    summary["cpu"] = {
        "usr_pct": usr,
        "sys_pct": sys_,
        "cpu_s": cpu_s,
        "ns_per_io": cpu_s * 1e9 / total_ops if total_ops else None,
    }
    return summary


# ---------------------------------------------------------------------------------------------------------
# fio-check: alternate the tools, compare


def _backend(summary: dict[str, Any]) -> str:
    """Our backend from a run summary (``summary["engine"]`` or ``summary["env"]["engine"]``)."""
    engine = summary.get("engine") or (summary.get("env") or {}).get("engine") or {}
    return str(engine.get("backend", "?"))


def _rows(summary: dict[str, Any], base: dict[str, Any], cpu_ns_per_io: float | None) -> list[dict[str, Any]]:
    rows = []
    for op in ("read", "write", "trim", "write_zeroes", "flush"):
        s = summary.get(op)
        if not s or not s.get("ops"):
            continue
        lat = s.get("lat_ns", {})
        rows.append({
            **base,
            "op": op,
            "ops": int(s["ops"]),
            "iops": float(s["iops"]),
            "bw_bytes": float(s["bw_bytes"]),
            **{key: float(lat.get(key, math.nan)) for key in LAT_KEYS},
            "cpu_ns_per_io": math.nan if cpu_ns_per_io is None else float(cpu_ns_per_io),
            "measured_ns": int(summary.get("run", {}).get("measured_ns", 0)),
            # Little's law on each tool's own stamps: the depth it kept, as its latencies count it.
            "in_flight": float(s["iops"]) * float(lat.get("mean", math.nan)) / 1e9,
        })
    return rows


def _run_ours(target: str, workload: Workload, engine: str, run_kwargs: dict[str, Any]):
    from .runner import run

    return run(target, workload, engine=engine, **run_kwargs)


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _default_timeout_s(workload: Workload) -> float:
    time_ns = int(workload.stop.get("time_ns", 0))
    if time_ns and not workload.stop.get("ops") and not workload.stop.get("bytes"):
        return (time_ns + int(workload.warmup.get("time_ns", 0))) / 1e9 + 120
    return 3600.0


def _inflight(workload: Workload) -> int:
    return int(workload.batch["size"]) if workload.batch else int(workload.queue_depth)


def round_schedule(rounds: int, fio_engines: Sequence[str], ours: Sequence[str]) -> list[tuple[int, str, str]]:
    """The order of the runs, as (round, tool, engine): fio's engines and ours take turns (fio e1, ours o1,
    fio e2, ours o2, ...), and every other round runs backwards (..., ours o2, fio e2, ours o1, fio e1).
    Counterbalanced (ABBA), so a target that drifts, or warms up after a run, favours neither tool."""
    forward: list[tuple[str, str]] = []
    for fio_engine, our_engine in zip_longest(fio_engines, ours):
        if fio_engine is not None:
            forward.append(("fio", fio_engine))
        if our_engine is not None:
            forward.append(("ftlscope", our_engine))
    schedule = []
    for r in range(1, rounds + 1):
        order = forward if r % 2 else forward[::-1]
        schedule += [(r, tool, engine) for tool, engine in order]
    return schedule


def fio_check(
    target: str,
    workload: Workload,
    rounds: int = 3,
    engines: Iterable[str] = ("io_uring",),
    ours_engine: str | Sequence[str] = "auto",
    *,
    runtime_ns: int | None = None,
    run_kwargs: dict[str, Any] | None = None,
    timeout_s: float | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Run ``workload`` on ``target`` with fio and with ftlscope, alternating (fio, ours, fio, ours, ...)
    for ``rounds`` rounds; one row per (round, tool, engine, operation).

    ``engines`` are fio's engines; ``ours_engine`` is one of ours (auto, uring, psync) or several. In each
    round fio's engines and ours take turns, every other round backwards (:func:`round_schedule`). fio's
    psync keeps the depth with one job per request in flight where :func:`sync_threads` allows, and runs at
    QD 1 otherwise (its rows then have ``clamped`` set, as do ours where our psync does the same).
    ``run_kwargs`` go to :func:`ftlscope.run` (``destructive``, ``force``, ``size``, ``direct``, ``pin``,
    ...); the same safety rules cover fio's writes, and a file target is created and filled (``size``) before
    the first round. CPU time per I/O is fio's usr+sys of its jobs, and ours ``getrusage(RUSAGE_SELF)`` around
    the run (the whole process).
    """
    from .runner import prepare_target
    from .units import parse_size

    require_fio()
    if rounds < 1:
        raise UsageError("--rounds: give at least 1 round")
    fio_engines = list(engines)
    ours = [ours_engine] if isinstance(ours_engine, str) else list(ours_engine)
    if not fio_engines and not ours:
        raise UsageError("--fio-engines: give at least one engine")
    kwargs = dict(run_kwargs or {})
    for key in ("engine", "progress", "trace"):
        kwargs.pop(key, None)
    direct = bool(kwargs.get("direct", True))
    if runtime_ns is not None:
        workload = workload.replace(stop={**workload.stop, "time_ns": int(runtime_ns)})
    size = kwargs.pop("size", None)
    # Build every command first: a workload fio cannot express fails before anything runs.
    probe_size = parse_size(size, "--size") if size is not None else None
    if probe_size is None:
        probe_size = target_size(target) if os.path.exists(target) else None
    if probe_size is None:
        raise UsageError(f"--size: {target} does not exist; give --size to create it (e.g. --size 1GiB)")
    commands = {
        e: fio_command(target, workload, e, target_size_bytes=probe_size, direct=direct, sync_at_qd1=True)
        for e in fio_engines
    }
    prepared = prepare_target(
        target, workload, size=parse_size(size, "--size") if size is not None else None,
        destructive=kwargs.get("destructive"), force=bool(kwargs.get("force", False)), direct=direct,
        engine=ours[0] if ours else "auto",
    )
    for notice in prepared.notices:
        if on_progress:
            on_progress(notice)
    actual = target_size(target)
    if actual != probe_size:
        commands = {
            e: fio_command(target, workload, e, target_size_bytes=actual, direct=direct, sync_at_qd1=True)
            for e in fio_engines
        }
    timeout = timeout_s if timeout_s is not None else _default_timeout_s(workload)
    inflight = _inflight(workload)
    rows: list[dict[str, Any]] = []
    for seq, (r, tool, engine) in enumerate(round_schedule(rounds, fio_engines, ours), start=1):
        if on_progress:
            on_progress(f"round {r}/{rounds}: {tool} {engine}")
        base = {"round": r, "seq": seq, "tool": tool, "engine": engine, "queues": int(workload.queues)}
        if tool == "fio":
            summary = fio_summary(run_fio(commands[engine], timeout))
            # Requests in flight per queue: psync's depth is its jobs (threads), not its iodepth.
            engine_info = summary["engine"]
            qd = engine_info["iodepth"] * engine_info["numjobs"] // max(1, int(workload.queues))
            base |= {"backend": engine, "qd": qd, "clamped": qd < inflight}
            rows += _rows(summary, base, summary["cpu"]["ns_per_io"])
        else:
            before = _cpu_seconds()
            result = _run_ours(target, workload, engine, kwargs)
            cpu_s = _cpu_seconds() - before
            summary = result.summary
            stop = (summary.get("run") or {}).get("stop") or {}
            if stop.get("reason", "completed") not in ("completed",):
                from .runner import check_outcome

                check_outcome(result)
                if stop.get("reason") == "interrupted":
                    raise KeyboardInterrupt
            ops = sum(int((summary.get(op) or {}).get("ops", 0)) for op in
                      ("read", "write", "trim", "write_zeroes", "flush"))
            # The depth the engine kept (psync runs some walks one request at a time).
            qd = int(summary["env"]["engine"].get("queue_depth", inflight))
            base |= {"backend": _backend(summary), "qd": qd, "clamped": qd < inflight}
            rows += _rows(summary, base, cpu_s * 1e9 / ops if ops else None)
    return pd.DataFrame(rows)


RATIO_KEYS = ("iops", "mean", "p50", "p99", "p99.9", "cpu_ns_per_io")


def comparison_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Medians over rounds per (tool, engine, backend, op), and each row's ratios to fio's best engine for
    that op (highest median IOPS, psync included, even where it ran at QD 1: a fio user would pick it where it wins):
    ``iops_ratio``, ``p50_ratio``, ... (ours/fio: IOPS above 1 and latency below 1 are better).
    ``reference`` names that fio engine; ``clamped`` marks rows that ran at QD 1 below the workload's depth."""
    if df.empty:
        return df.copy()
    keys = ["tool", "engine", "backend", "op"]
    numeric = ["ops", "iops", "bw_bytes", *LAT_KEYS, "cpu_ns_per_io", "in_flight"]
    med = df.groupby(keys, sort=False)[numeric].median().reset_index()
    extra = df.groupby(keys, sort=False).agg(rounds=("round", "nunique"), qd=("qd", "first"),
                                             clamped=("clamped", "first")).reset_index()
    med = med.merge(extra, on=keys)
    med["reference"] = ""
    for key in RATIO_KEYS:
        med[f"{key}_ratio"] = math.nan
    for op, group in med.groupby("op", sort=False):
        fio_rows = group[group["tool"] == "fio"]
        if fio_rows.empty:
            continue
        ref = fio_rows.loc[fio_rows["iops"].idxmax()]
        mask = med["op"] == op
        med.loc[mask, "reference"] = ref["engine"]
        for key in RATIO_KEYS:
            med.loc[mask, f"{key}_ratio"] = med.loc[mask, key] / ref[key] if ref[key] else math.nan
    ops_order = {op: i for i, op in enumerate(dict.fromkeys(df["op"]))}
    med["_order"] = med["op"].map(ops_order) * 2 + (med["tool"] != "fio")
    return med.sort_values("_order", kind="stable").drop(columns="_order").reset_index(drop=True)


def _engine_label(row: pd.Series) -> str:
    if row["tool"] == "fio":
        label = str(row["engine"])
    elif row["engine"] == "auto":
        label = f"auto → {row['backend']}"
    else:
        label = str(row["backend"])
    return f"{label} (QD 1)" if bool(row["clamped"]) else label


def _ns(value: float) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format_ns(value)


def _ratio(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}"


def _depth(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}"


def format_comparison(df: pd.DataFrame, title: str | None = None) -> Table:
    """A rich table of :func:`comparison_frame` (given the raw :func:`fio_check` frame or the comparison):
    tool, engine, op, IOPS, mean, p50, p99, p99.9, CPU/IO, and ours/fio ratios of IOPS, p50, p99 and CPU."""
    comp = comparison_frame(df) if "round" in df.columns else df
    rounds = int(comp["rounds"].max()) if "rounds" in comp.columns and not comp.empty else 0
    table = Table(title=title or f"fio vs ftlscope (medians of {rounds} round(s))", title_justify="left")
    for col in ("tool", "engine", "op", "IOPS", "in flight", "mean", "p50", "p99", "p99.9", "CPU/IO",
                "IOPS ×", "p50 ×", "p99 ×", "CPU ×"):
        table.add_column(col, justify="left" if col in ("tool", "engine", "op") else "right")
    for _, row in comp.iterrows():
        if row["tool"] == "fio":
            ratios = ["ref", "", "", ""] if row["engine"] == row["reference"] else ["", "", "", ""]
        else:
            ratios = [_ratio(row["iops_ratio"]), _ratio(row["p50_ratio"]), _ratio(row["p99_ratio"]),
                      _ratio(row["cpu_ns_per_io_ratio"])]
        table.add_row(
            str(row["tool"]), _engine_label(row), str(row["op"]), f"{row['iops']:,.0f}",
            _depth(row.get("in_flight", math.nan)), _ns(row["mean"]),
            _ns(row["p50"]), _ns(row["p99"]), _ns(row["p99.9"]), _ns(row["cpu_ns_per_io"]), *ratios,
        )
    table.caption = ("× = ours / fio's best engine at this point (IOPS: higher is better; latency, CPU: lower). "
                     "in flight = IOPS x mean latency: the depth each tool kept, by its own timestamps")
    return table


def parse_engines(text: str | Sequence[str]) -> list[str]:
    """``io_uring,libaio,psync`` -> a checked list of fio engines."""
    items = text.split(",") if isinstance(text, str) else list(text)
    engines = [item.strip() for item in items if item.strip()]
    for engine in engines:
        if engine not in FIO_ENGINES:
            raise UsageError(f"--fio-engines: unknown fio engine '{engine}'; use {', '.join(FIO_ENGINES)}")
    if not engines:
        raise UsageError("--fio-engines: give at least one of " + ", ".join(FIO_ENGINES))
    return engines


def fio_check_cli(args: Any, workload: Workload, run_kwargs: dict[str, Any], console: Console) -> int:
    """``ftlscope fio-check``: ``args`` has ``target``, ``rounds`` and ``fio_engines`` (and optionally
    ``csv``: a path to save every round); ``run_kwargs`` are ``ftlscope.run``'s keyword arguments (its
    ``engine`` is ours)."""
    if str(args.target).startswith("sim:"):
        raise UsageError(
            f"fio-check: {args.target} is a simulated device, which only ftlscope's engine can drive; "
            "give a block device or a file to compare with fio"
        )
    version = require_fio()
    engines = parse_engines(getattr(args, "fio_engines", "io_uring"))
    kwargs = dict(run_kwargs)
    ours = kwargs.pop("engine", "auto")
    err = Console(stderr=True)

    def progress(message: str) -> None:
        err.print(f"[dim]ftlscope: {message}[/dim]")

    df = fio_check(args.target, workload, rounds=int(getattr(args, "rounds", 3)), engines=engines,
                   ours_engine=ours, run_kwargs=kwargs, on_progress=progress)
    sizes = "/".join(format_size(s) for s in workload.sizes)
    title = (f"{args.target} — {getattr(args, 'rw', '')} {sizes}, QD {_inflight(workload)} x {workload.queues}, "
             f"fio {version} vs ftlscope, medians of {int(getattr(args, 'rounds', 3))} round(s)")
    console.print(format_comparison(df, title))
    csv_path = getattr(args, "csv", None)
    if csv_path:
        df.to_csv(csv_path, index=False)
        progress(f"wrote {csv_path}")
    return 0
