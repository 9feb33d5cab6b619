"""Which latency Newt's gain is measured on, and that latency's statistics.

An application behind the write shim waits from the moment it issues a request to its completion: any wait in
the replayer for a free queue slot and any hold the shim puts on a write are part of it. So in an open-loop
replay (each request due at its time in the trace) the gain is measured *from arrival*: a request's issue lag
(submission minus its due time, the shim's hold included) plus its device latency (submission to completion).
The device latency alone, as ``ftlscope run`` reports it, is kept beside it. Measured from submission, a replay
that cannot keep the trace's timing (a saturated queue) shows a shim hold that lets reads go earlier as slower
reads, although each of them finished sooner after the application asked for it.

A closed-loop replay (``--mode closed``, ``--timing afap``) has no arrival times: each request goes when the one
before it lets it. There the gain is measured from submission, and the JSON says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..metrics import NEWT_STATISTICS

ARRIVAL = "arrival"
SUBMISSION = "submission"
GAIN_OPS = ("read", "write")


def latency_from(summary: dict[str, Any]) -> tuple[str, str]:
    """(``arrival`` or ``submission``, why) for a replay's summary: from arrival where the replay kept the
    trace's arrival times (open loop), from submission otherwise."""
    replay = summary.get("replay") or {}
    if replay.get("mode") == "open" and replay.get("timing") != "afap":
        return ARRIVAL, ("from each request's time in the trace to its completion (open-loop replay): the wait "
                         "for a free queue slot and the shim's hold of a write count, as an application waits them")
    return SUBMISSION, (f"from submission to completion: a {replay.get('mode') or 'closed'}-loop replay (timing "
                        f"{replay.get('timing') or '?'}) has no arrival times, each request goes when the one before "
                        "it lets it")


def arrival_latencies(trace: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per operation, each measured request's latency from its due time (issue lag + device latency, ns); the
    requests the summary times (not failed, not warm-up). Empty when the trace has no issue lag column."""
    if trace.empty or "issue_lag_ns" not in trace:
        return {}
    timed = ~trace["warmup"].to_numpy(bool) & (trace["status"].to_numpy(np.int64) >= 0)
    ranged = trace["op"].isin(GAIN_OPS).to_numpy()
    # A read or write that moved fewer bytes than asked failed, as the engine counts it.
    timed &= ~ranged | (trace["status"].to_numpy(np.int64) == trace["size"].to_numpy(np.int64))
    total = trace["issue_lag_ns"].to_numpy(np.int64) + trace["latency_ns"].to_numpy(np.int64)
    ops = trace["op"].astype(str).to_numpy()
    return {op: total[timed & (ops == op)] for op in GAIN_OPS if (timed & (ops == op)).any()}


def statistics(values: np.ndarray) -> dict[str, float]:
    """:data:`NEWT_STATISTICS` of latencies in ns (exact percentiles, linear between ranks)."""
    out = {"mean": float(values.mean())}
    for key in NEWT_STATISTICS:
        if key != "mean":
            out[key] = float(np.percentile(values, float(key[1:])))
    return out


def arrival_summary(trace: Any, dropped: int = 0) -> dict[str, Any] | None:
    """Per operation ``{"lat_ns": statistics, "ops": n}`` from arrival, shaped like a run summary's operations;
    None when the trace cannot give it: no issue lag column, or ``dropped`` records past the trace limit
    (statistics of the first requests only would not be the run's). ``trace``: the pass's trace frame (exact
    percentiles), or the path of its streamed Parquet trace, read in record batches (:func:`streamed_arrival`)."""
    if dropped:
        return None
    if not isinstance(trace, pd.DataFrame):
        return streamed_arrival(trace)
    latencies = arrival_latencies(trace)
    if not latencies:
        return None
    return {op: {"lat_ns": statistics(values), "ops": int(values.size)} for op, values in latencies.items()}


def streamed_arrival(path: Any) -> dict[str, Any] | None:
    """:func:`arrival_summary` of a streamed Parquet trace, read in record batches so memory stays flat whatever
    the trace's length (issue 17): counts and means exact, percentiles from log-linear buckets
    (:class:`ftlscope.traces.batched.Quantiles`: numpy's linear percentile over values each within
    :data:`PERCENTILE_TOLERANCE` of itself). None when the trace has no issue lag column."""
    from ..trace_figures import column_batches
    from ..traces.batched import Quantiles

    quantiles = {op: Quantiles() for op in GAIN_OPS}
    totals = dict.fromkeys(GAIN_OPS, 0.0)
    for cols in column_batches(path, ["op", "size", "status", "warmup", "latency_ns", "issue_lag_ns"]):
        if "issue_lag_ns" not in cols:
            return None
        frame = pd.DataFrame(cols)
        for op, values in arrival_latencies(frame).items():
            quantiles[op].add(values)
            totals[op] += float(values.sum())
    out = {}
    for op, q in quantiles.items():
        n = q.n
        if n:
            stats = {"mean": totals[op] / n}
            stats.update({key: q.percentile(float(key[1:]), n) for key in NEWT_STATISTICS if key != "mean"})
            out[op] = {"lat_ns": stats, "ops": n}
    return out or None


# How far a percentile from a streamed trace may be from the exact one: each value stands as its bucket's mean,
# buckets 1/1024 of a power of two wide (ftlscope.traces.batched).
PERCENTILE_TOLERANCE = 1e-3


def gain_pct(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per operation both passes have, per latency statistic: how many percent lower it is after (negative when
    higher). None where the before value is 0. ``before``/``after``: run summaries or :func:`arrival_summary`."""
    out: dict[str, dict[str, float | None]] = {}
    for op in GAIN_OPS:
        if op not in before or op not in after:
            continue
        b, a = before[op]["lat_ns"], after[op]["lat_ns"]
        out[op] = {key: (round((b[key] - a[key]) / b[key] * 100, 2) if b[key] else None) for key in NEWT_STATISTICS}
    return out


def gains(before: Any, after: Any) -> dict[str, Any]:
    """The gain of a newt run's two passes (RunResults, their traces kept), by both measures: ``latency_from``
    (``arrival`` or ``submission``: what ``gain_pct`` is measured from) and why, ``arrival`` (``before`` and
    ``after`` from arrival, per operation ``lat_ns``; None when measured from submission), ``gain_pct`` and
    ``gain_pct_device`` (from submission, the device latency ``run`` reports, always)."""
    from ..trace_figures import trace_source

    measured, why = latency_from(before.summary)
    arrival = None
    if measured == ARRIVAL:
        passes = [arrival_summary(trace_source(r), r.dropped_trace_records) for r in (before, after)]
        if None in passes:
            measured, why = SUBMISSION, ("from submission to completion: the per-request trace does not hold "
                                         "every request (trace limit), so the times from arrival are not known")
        else:
            arrival = {"before": passes[0], "after": passes[1]}
    device = gain_pct(before.summary, after.summary)
    return {"latency_from": measured, "latency_from_why": why, "arrival": arrival,
            "gain_pct": gain_pct(arrival["before"], arrival["after"]) if arrival else device,
            "gain_pct_device": device}


def headline(doc: dict[str, Any], when: str) -> dict[str, Any]:
    """Per operation, the latencies (``lat_ns``) ``gain_pct`` is measured on in a newt document's pass ``when``
    (``before`` or ``after``): from arrival when it has them, else the pass's run summary (from submission)."""
    arrival = doc.get("arrival")
    return arrival[when] if arrival else doc[when]


def write_cost(doc: dict[str, Any]) -> str | None:
    """What the optimizations cost the writes, in words, by the measure ``gain_pct`` is on (from arrival in an
    open-loop replay: what an application behind the shim waits, its holds included): the mean and p99 write
    latency before and after, and their change. None when the trace has no writes. A shim forced on a drive
    that needs none (a speed far below what the drive drains) makes writes wait where they did not: a user must see
    that cost beside the read gain, not only a percentage of a few tens of microseconds."""
    from ..units import format_ns

    before, after = (headline(doc, when).get("write") for when in ("before", "after"))
    if not before or not after or not before.get("lat_ns") or not after.get("lat_ns"):
        return None
    parts = []
    for key in ("mean", "p99"):
        b, a = before["lat_ns"].get(key), after["lat_ns"].get(key)
        if b is None or a is None:
            continue
        change = f" ({(a / b - 1) * 100:+,.0f} %)" if b else ""
        parts.append(f"{key} {format_ns(b)} -> {format_ns(a)}{change}")
    if not parts:
        return None
    return f"write latency from {doc['latency_from']}: " + ", ".join(parts)
