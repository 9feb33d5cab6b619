"""A run's results in fio's JSON shape (``ftlscope run --json FILE --json-format fio``).

fio-plot and the many scripts that read ``fio --output-format=json`` read this file as they read fio's: one job
in ``jobs[]`` with ``job options`` (as strings, as fio writes them), ``read``/``write``/``trim`` (each
``io_bytes``, ``io_kbytes``, ``bw_bytes``, ``bw`` in KiB/s, ``iops``, ``runtime`` in ms, ``total_ios``,
``slat_ns``, ``clat_ns`` with ``percentile`` keyed as fio keys it, ``"99.900000"``, ``lat_ns``, and the
``bw_*``/``iops_*`` sample statistics), ``sync`` for flushes, ``job_runtime``, ``usr_cpu``/``sys_cpu``, ``ctx``,
and the ``latency_ns``/``latency_us``/``latency_ms`` buckets (percent of requests).

Only what was measured goes in, mapped to fio's meaning:

- ``clat_ns`` is our latency: fio's completion latency runs from submission to completion, as ours does.
  ``slat_ns`` (fio's time to submit) is not measured apart (our stamp is taken right before the submitting
  call), so it is written as fio writes it when it does not measure it (``disable_slat``): all zeros, ``N`` 0.
  ``lat_ns`` (slat + clat in fio) is therefore the same as ``clat_ns``, without percentiles (fio writes
  them there only with ``lat_percentiles=1``).
- Percentiles are at fio's default ``percentile_list`` (1, 5, 10, 20, ... 99.5, 99.9, 99.95, 99.99), from the
  engine's HDR histogram of 3 significant digits (the summary's p50 ... p99.99 are the same figures).
- ``bw_*``/``iops_*`` statistics are over the run's whole time windows (``--window``, default 100 ms; fio
  samples every 500 ms by default); the last window, cut short by the end of the run, is left out.
- The latency buckets come from the same histogram, so a request within 0.1 % under an edge may count above it.
- ``usr_cpu``/``sys_cpu``/``ctx``/``majf``/``minf`` are the ftlscope process's CPU time, context switches and
  page faults over the run call (fio's are the job's), CPU as a percentage of that call's wall time (setting up
  the target, e.g. filling a new file, included); on a simulated device they are 0 (no I/O went through the
  host: the CPU time was the simulator's).
- Write Zeroes has no place in fio's report and is left out (a note says so); ``disk_util`` is empty.

``ftlscope`` at the top level says which tool wrote the file and lists these notes.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

# Our percentile keys and fio's.
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99.9": 99.9, "p99.99": 99.99}
# fio's bucket edges within each of its latency_ns/_us/_ms groups (fio's stat.c).
BUCKET_EDGES = (2, 4, 10, 20, 50, 100, 250, 500, 750, 1000)
FIO_DIRECTIONS = ("read", "write", "trim")

NOTES = (
    "clat_ns is ftlscope's latency (submission to completion); slat_ns is not measured apart and is zero, "
    "as fio writes it with disable_slat, so lat_ns equals clat_ns",
    "bw_*/iops_* sample statistics are over ftlscope's whole time windows, not fio's 500 ms samples",
    "latency_* buckets and percentiles come from an HDR histogram with 3 significant digits",
)


def _zero_stat() -> dict[str, Any]:
    return {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}


def _samples(windows: pd.DataFrame | None, op: str, column: str, scale: float) -> dict[str, Any]:
    """min, max, mean, stddev and count of one op's per-window figure (fio's ``bw_*``/``iops_*``)."""
    if windows is None or windows.empty or "op" not in windows:
        return {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "samples": 0}
    rows = windows[windows["op"] == op]
    if "duration_ns" in rows and not rows.empty:
        # Whole windows only, as fio's samples are whole intervals: the last, cut short by the end of the run,
        # would count a handful of requests over microseconds as a rate.
        rows = rows[rows["duration_ns"] == rows["duration_ns"].max()]
    values = rows[column].astype(float) / scale
    if values.empty:
        return {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "samples": 0}
    return {
        "min": int(values.min()),
        "max": int(values.max()),
        "mean": float(values.mean()),
        "stddev": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
        "samples": len(values),
    }


def _percentiles(s: dict[str, Any]) -> dict[str, int]:
    """fio's ``percentile`` object: fio's default list (1 ... 99.99) from the engine's ``lat_ns_fio_percentiles``,
    or the summary's six where a summary lacks them."""
    if s.get("lat_ns_fio_percentiles"):
        return {f"{p:f}": int(ns) for p, ns in s["lat_ns_fio_percentiles"]}
    return {f"{p:f}": int(s["lat_ns"][key]) for key, p in PERCENTILES.items() if key in s["lat_ns"]}


def _direction(s: dict[str, Any] | None, windows: pd.DataFrame | None, op: str, measured_ns: int) -> dict[str, Any]:
    if not s or not s.get("ops"):
        d: dict[str, Any] = {"io_bytes": 0, "io_kbytes": 0, "bw_bytes": 0, "bw": 0, "iops": 0.0, "runtime": 0,
                             "total_ios": 0, "short_ios": 0, "drop_ios": 0, "slat_ns": _zero_stat(),
                             "clat_ns": _zero_stat(), "lat_ns": _zero_stat()}
        bw = iops = {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "samples": 0}
        agg = 0.0
    else:
        lat = s["lat_ns"]
        stat = {"min": int(lat["min"]), "max": int(lat["max"]), "mean": float(lat["mean"]),
                "stddev": float(lat["stddev"]), "N": int(s["ops"])}
        percentile = _percentiles(s)
        d = {
            "io_bytes": int(s["bytes"]),
            "io_kbytes": int(s["bytes"]) // 1024,
            "bw_bytes": int(s["bw_bytes"]),
            "bw": int(s["bw_bytes"] / 1024),
            "iops": float(s["iops"]),
            "runtime": round(measured_ns / 1e6),
            "total_ios": int(s["ops"]),
            "short_ios": 0,
            "drop_ios": 0,
            "slat_ns": _zero_stat(),
            "clat_ns": {**stat, "percentile": percentile},
            "lat_ns": dict(stat),
        }
        bw = _samples(windows, op, "bw_bytes", 1024)
        iops = _samples(windows, op, "iops", 1)
        agg = 100.0  # one job: all of its group's bandwidth
    d.update({"bw_min": bw["min"], "bw_max": bw["max"], "bw_agg": agg, "bw_mean": bw["mean"],
              "bw_dev": bw["stddev"], "bw_samples": bw["samples"], "iops_min": iops["min"],
              "iops_max": iops["max"], "iops_mean": iops["mean"], "iops_stddev": iops["stddev"],
              "iops_samples": iops["samples"]})
    return d


def _buckets(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    """fio's ``latency_ns``/``latency_us``/``latency_ms``: percent of read, write and trim requests whose
    latency falls in [previous edge, edge), from the engine's counts below each edge."""
    below: dict[int, int] = {}
    total = 0
    for op in FIO_DIRECTIONS:
        s = summary.get(op) or {}
        if not s.get("ops"):
            continue
        total += int(s["ops"])
        for edge, count in s.get("lat_ns_below", []):
            below[int(edge)] = below.get(int(edge), 0) + int(count)

    def share(count: int) -> float:
        return 100.0 * count / total if total else 0.0

    groups: dict[str, dict[str, float]] = {}
    previous = 0
    for name, unit in (("latency_ns", 1), ("latency_us", 1_000), ("latency_ms", 1_000_000)):
        group = {}
        for edge in BUCKET_EDGES:
            upto = below.get(edge * unit, 0)
            group[str(edge)] = share(upto - previous)
            previous = upto
        groups[name] = group
    upto = below.get(2_000_000_000, 0)
    groups["latency_ms"]["2000"] = share(upto - previous)
    groups["latency_ms"][">=2000"] = share(total - upto)
    return groups


def _rw(workload: dict[str, Any]) -> str:
    """fio's ``rw`` for the workload's mix and pattern."""
    mix = {op: w for op, w in (workload.get("mix") or {}).items() if w}
    kind = (workload.get("pattern") or {}).get("kind", "sequential")
    prefix = "" if kind == "sequential" else "rand"
    if "read" in mix and "write" in mix:
        return prefix + "rw"
    if "trim" in mix and "write" in mix:
        return prefix + "trimwrite"
    for op in ("read", "write", "trim"):
        if op in mix:
            return prefix + op
    return "read"


def job_options(summary: dict[str, Any]) -> dict[str, str]:
    """The run's workload as fio's ``job options`` (strings, as fio writes them)."""
    w = summary.get("workload") or {}
    engine = (summary.get("env") or {}).get("engine") or {}
    mix = {op: weight for op, weight in (w.get("mix") or {}).items() if weight}
    sizes = [int(size) for size in w.get("sizes", [4096])]
    options = {
        "name": "ftlscope",
        "filename": str((summary.get("target") or {}).get("path", "")),
        "rw": _rw(w),
        "bs": str(sizes[0]) if len(set(sizes)) == 1 else ":".join(str(size) for size in sizes),
        "iodepth": str(w.get("queue_depth", 1)),
        "numjobs": str(w.get("queues", 1)),
        "ioengine": {"io_uring": "io_uring", "psync": "psync"}.get(engine.get("backend"), "ftlscope-sim"),
        "direct": "1" if (summary.get("target") or {}).get("direct", True) else "0",
        "offset": str((w.get("range") or {}).get("start", 0)),
    }
    length = int((w.get("range") or {}).get("length", 0))
    if length:
        options["size"] = str(length)
    if "read" in mix and "write" in mix:
        options["rwmixread"] = str(round(100 * mix["read"] / (mix["read"] + mix["write"])))
    stop, warmup = w.get("stop") or {}, w.get("warmup") or {}
    if stop.get("time_ns"):
        options["runtime"] = f"{int(stop['time_ns']) // 1_000_000}ms"
        options["time_based"] = "1"
    if warmup.get("time_ns"):
        options["ramp_time"] = f"{int(warmup['time_ns']) // 1_000_000}ms"
    for key, name in (("bytes_per_s", "rate"), ("iops", "rate_iops")):
        limits = (w.get("rate") or {}).get(key) or {}
        if any(limits.values()):
            options[name] = ",".join(str(limits.get(d, 0) or "") for d in FIO_DIRECTIONS)
    return options


def fio_report(
    summary: dict[str, Any],
    windows: pd.DataFrame | None = None,
    cpu: dict[str, float] | None = None,
    global_options: dict[str, str] | None = None,
    jobname: str | None = None,
) -> dict[str, Any]:
    """``summary`` (a run's, with its ``windows``) as fio's JSON report. ``cpu``: the process's ``usr_s``,
    ``sys_s``, ``ctx``, ``majf``, ``minf`` and ``wall_s`` over the run (None or a simulated target: zeros)."""
    from . import __version__

    env = summary.get("env") or {}
    run = summary.get("run") or {}
    measured_ns = int(run.get("measured_ns", 0))
    started = float(env.get("started_at_unix") or time.time())
    simulated = (summary.get("target") or {}).get("kind") == "simulated"
    notes = list(NOTES)
    usage = {"usr_cpu": 0.0, "sys_cpu": 0.0, "ctx": 0, "majf": 0, "minf": 0}
    if simulated:
        notes.append("usr_cpu, sys_cpu and ctx are 0: a simulated device does no host I/O")
    elif cpu and cpu.get("wall_s"):
        usage = {"usr_cpu": 100 * cpu["usr_s"] / cpu["wall_s"], "sys_cpu": 100 * cpu["sys_s"] / cpu["wall_s"],
                 "ctx": int(cpu["ctx"]), "majf": int(cpu["majf"]), "minf": int(cpu["minf"])}
        notes.append("usr_cpu, sys_cpu and ctx are the whole ftlscope process's over the run call's wall time "
                     "(setting up the target, e.g. filling a new file, included)")
    else:
        notes.append("usr_cpu, sys_cpu and ctx were not measured and are 0")
    if (summary.get("write_zeroes") or {}).get("ops"):
        notes.append("write_zeroes requests have no place in fio's report and are left out")
    stop = run.get("stop") or {}
    job: dict[str, Any] = {
        "jobname": jobname or "ftlscope",
        "groupid": 0,
        "error": int(stop.get("errno", 0) or 0),
        "eta": 0,
        "job options": job_options(summary),
    }
    for op in FIO_DIRECTIONS:
        job[op] = _direction(summary.get(op), windows, op, measured_ns)
    flush = summary.get("flush") or {}
    job["sync"] = {"total_ios": 0, "lat_ns": _zero_stat()}  # as fio writes it without syncs
    if flush.get("ops"):
        lat = flush["lat_ns"]
        job["sync"] = {"total_ios": int(flush["ops"]), "lat_ns": {
            "min": int(lat["min"]), "max": int(lat["max"]), "mean": float(lat["mean"]),
            "stddev": float(lat["stddev"]), "N": int(flush["ops"]),
            "percentile": _percentiles(flush)}}
    job["job_runtime"] = round(measured_ns / 1e6)
    job.update(usage)
    job.update(_buckets(summary))
    report: dict[str, Any] = {
        "fio version": f"ftlscope-{__version__}",
        "timestamp": int(started),
        "timestamp_ms": int(started * 1000),
        "time": time.ctime(started),
    }
    if global_options:  # fio writes the key only for a job file with a [global] section
        report["global options"] = dict(global_options)
    report.update({"jobs": [job], "disk_util": [], "ftlscope": {"version": __version__, "notes": notes}})
    return report
