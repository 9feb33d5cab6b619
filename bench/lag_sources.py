#!/usr/bin/env python3
"""Where does a replay's issue lag come from? (issue 17: "on a real target issue lag p99 under 20 us at 50,000
requests/s"; bench/replay_speed.py measures the lag, this says what the queue's CPU did while a request was late.)

One faithful (open-loop) replay of evenly spaced random 4 KiB reads, as bench/replay_speed.py's lag table runs it,
with the kernel's tracepoints recorded meanwhile in a tracefs instance of its own (so another user of ftrace is not
disturbed), on the engine's clock (``trace_clock`` mono_raw: the engine stamps on CLOCK_MONOTONIC_RAW). With
psync the k-th pread64 the queue thread enters is the k-th request it submitted, which puts the replay's per-request
trace on the tracepoints' time line; with psync-pool and io_uring (no pread in the queue thread) the two share the
clock, to the engine's calibration error (printed). For every request later than ``--threshold-us``, its late
interval (from when it was due to when it was submitted) is split into what the queue's CPU did then:

- ``off CPU``: the queue thread was switched out (the table names what ran instead),
- ``hardirq`` / ``softirq``: interrupt handlers (the local timer, IPIs, devices) and softirqs on its CPU,
- ``previous read``: the read before it was still in the kernel (a slow pread; its time switched out or in
  interrupts is counted under those),
- ``user``: the rest, on the CPU in the engine's own code (the spin, the loop) or taken by the hypervisor
  (steal time, invisible to the guest's tracepoints; /proc/stat's steal over the run is printed beside it).

Page faults of the queue thread inside a late interval are counted (a fault in the hot loop would show there).
Over the whole run it also prints how often the queue thread was switched out and for what (its own psync-pool
workers woken on its CPU count there), and on which CPUs the workers (``ftlscope-io*``) were woken.

    sudo python bench/lag_sources.py --zram 1GiB [--rate 50000] [--seconds 3] [--engine psync] [--no-pin]

Needs root (tracefs and, for --zram, a zram device of its own). The load average at the start and the end is
printed: on a shared machine the queue thread is switched out for other processes, which this shows by name.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_speed import LAG_SPAN, lag_target, reads  # noqa: E402

from ftlscope.replay import replay  # noqa: E402

TRACEFS = Path("/sys/kernel/tracing")
EVENTS = ("sched/sched_switch", "sched/sched_wakeup", "irq/irq_handler_entry", "irq/irq_handler_exit",
          "irq/softirq_entry", "irq/softirq_exit", "irq_vectors/local_timer_entry", "irq_vectors/local_timer_exit",
          "irq_vectors/reschedule_entry", "irq_vectors/reschedule_exit", "irq_vectors/call_function_entry",
          "irq_vectors/call_function_exit", "irq_vectors/call_function_single_entry",
          "irq_vectors/call_function_single_exit", "irq_vectors/irq_work_entry", "irq_vectors/irq_work_exit",
          "exceptions/page_fault_user", "exceptions/page_fault_kernel", "syscalls/sys_enter_pread64",
          "syscalls/sys_exit_pread64", "task/task_newtask")
QUEUE_COMM = "ftlscope-q0"
# "comm-pid [cpu] flags timestamp: event: fields"
LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+\.\d+):\s+(?P<event>\w+):"
                  r"\s*(?P<fields>.*)$")


@contextlib.contextmanager
def tracing(name: str, buffer_kb: int) -> Iterator[Path]:
    """A tracefs instance of its own with EVENTS on the mono_raw clock; removed afterwards."""
    inst = TRACEFS / "instances" / name
    if inst.exists():
        inst.rmdir()
    inst.mkdir()
    try:
        (inst / "trace_clock").write_text("mono_raw")
        (inst / "buffer_size_kb").write_text(str(buffer_kb))
        for event in EVENTS:
            enable = inst / "events" / event / "enable"
            if enable.exists():
                enable.write_text("1")
        (inst / "tracing_on").write_text("0")
        yield inst
    finally:
        with contextlib.suppress(OSError):
            (inst / "tracing_on").write_text("0")
        for _ in range(50):
            try:
                inst.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def cpu_times() -> dict[str, int]:
    """Jiffies of /proc/stat's first line (user ... steal)."""
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
    return dict(zip(names, map(int, fields), strict=True))


def own_threads(text: str, roots: set[int]) -> set[int]:
    """This process's threads: those alive at the start and every task they (or theirs) created meanwhile."""
    ours = set(roots)
    for creator, child in re.findall(r"-(\d+)\s+\[\d+\].*?task_newtask: pid=(\d+)", text):
        if int(creator) in ours:
            ours.add(int(child))
    return ours


def parse(text: str):
    """The queue thread's page faults, and every CPU's switches and interrupt intervals."""
    faults = []
    switches = []  # (t, cpu, prev_pid, next_pid, next_comm)
    irq_open: dict[int, tuple[float, str]] = {}
    soft_open: dict[int, tuple[float, str]] = {}
    irqs: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    softs: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        t = float(m["ts"])
        cpu = int(m["cpu"])
        event, fields = m["event"], m["fields"]
        if event == "sched_switch":
            f = dict(re.findall(r"(\w+)=(\S+)", fields))
            switches.append((t, cpu, int(f["prev_pid"]), int(f["next_pid"]), f.get("next_comm", "?")))
            continue
        if event.endswith("_entry") and event not in ("softirq_entry",):
            irq_open[cpu] = (t, event.removesuffix("_entry") if event != "irq_handler_entry" else
                             "irq " + dict(re.findall(r"(\w+)=(\S+)", fields)).get("name", "?"))
            continue
        if event.endswith("_exit") and event not in ("softirq_exit",) and cpu in irq_open:
            start, what = irq_open.pop(cpu)
            irqs[cpu].append((start, t, what))
            continue
        if event == "softirq_entry":
            soft_open[cpu] = (t, dict(re.findall(r"(\w+)=(\w+)", fields)).get("action", "?"))
            continue
        if event == "softirq_exit" and cpu in soft_open:
            start, what = soft_open.pop(cpu)
            softs[cpu].append((start, t, what))
            continue
        if event.startswith("page_fault") and m["comm"].strip() == QUEUE_COMM:
            faults.append(t)
    return faults, switches, irqs, softs


def parse_syscalls(text: str):
    """pread64 entries and exits of the queue thread (their lines read 'sys_pread64(...)' and 'sys_pread64 -> x')."""
    enters, exits = [], []
    for line in text.splitlines():
        if QUEUE_COMM not in line or "sys_pread64" not in line:
            continue
        m = re.search(r"\s(\d+\.\d+):\s+sys_pread64(\(| -> )", line)
        if not m:
            continue
        (enters if m[2] == "(" else exits).append(float(m[1]))
    return np.array(enters), np.array(exits)


def overlap(intervals: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Seconds of ``intervals`` (n x 2) inside each window [lo, hi]: the covered time up to t, F(t), is piecewise
    linear over the merged intervals, and a window's share is F(hi) - F(lo)."""
    if len(intervals) == 0:
        return np.zeros(len(lo))
    merged = union_of(intervals[:, 0], intervals[:, 1])
    starts, ends = merged[:, 0], merged[:, 1]
    before = np.concatenate([[0.0], np.cumsum(ends - starts)])

    def covered(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(starts, t, side="right") - 1
        inside = np.minimum(t, ends[np.maximum(i, 0)]) - starts[np.maximum(i, 0)]
        return np.where(i < 0, 0.0, before[np.maximum(i, 0)] + inside)

    return covered(np.asarray(hi, dtype=float)) - covered(np.asarray(lo, dtype=float))


def union_of(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The windows [lo, hi] merged into sorted disjoint intervals."""
    order = np.argsort(lo)
    merged: list[list[float]] = []
    for a, b in zip(lo[order], hi[order], strict=True):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return np.array(merged).reshape(-1, 2)


def intersection(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The time both interval lists cover (each merged first), as intervals."""
    a = union_of(a[:, 0], a[:, 1]) if len(a) else a
    b = union_of(b[:, 0], b[:, 1]) if len(b) else b
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i, 0], b[j, 0]), min(a[i, 1], b[j, 1])
        if lo < hi:
            out.append((lo, hi))
        if a[i, 1] < b[j, 1]:
            i += 1
        else:
            j += 1
    return np.array(out).reshape(-1, 2)


def off_cpu_intervals(switches, pid: int) -> tuple[np.ndarray, list[tuple[float, float, str, int]]]:
    """When the queue thread was switched out, and what ran on its CPU instead (each switch in that time)."""
    out, ran, gone, where = [], [], None, None
    for t, cpu, prev, nxt, comm in switches:
        if prev == pid and gone is None:
            gone, where = t, cpu
            ran.append([t, None, comm, nxt])
        elif gone is not None and cpu == where and nxt != pid and ran:
            ran[-1][1] = t
            ran.append([t, None, comm, nxt])
        if nxt == pid and gone is not None:
            out.append((gone, t))
            if ran:
                ran[-1][1] = t
            gone = None
    return np.array(out).reshape(-1, 2), [tuple(r) for r in ran if r[1] is not None]


def switched_out(switches, pid: int, ours: set[int]) -> dict[str, list[float]]:
    """Each time the queue thread was switched out over the whole run, in us, by what ran first instead (digits at
    the end of a name folded, this process's threads marked)."""
    off, ran = off_cpu_intervals(switches, pid)
    first: dict[float, tuple[str, int]] = {}
    for start, _, comm, nxt in ran:
        first.setdefault(start, (comm, nxt))
    spans: dict[str, list[float]] = defaultdict(list)
    for start, end in off:
        comm, nxt = first.get(start, ("?", -1))
        spans[re.sub(r"\d+$", "N", comm) + (" (this process)" if nxt in ours else "")].append((end - start) * 1e6)
    return dict(spans)


def spans_table(title: str, first: str, spans: dict[str, list[float]]) -> Table:
    """The ten causes that took the most time (``spans``: durations in us by cause), with count, total and
    percentiles: one layout for the queue's switch-outs and for its CPU's interrupts."""
    table = Table(title=title, title_justify="left")
    for col in (first, "count", "total ms", "p50 us", "p99 us", "max us"):
        table.add_column(col, justify="right")
    for name, us in sorted(spans.items(), key=lambda kv: -sum(kv[1]))[:10]:
        table.add_row(name, f"{len(us):,}", f"{sum(us) / 1e3:,.2f}", f"{np.percentile(us, 50):,.1f}",
                      f"{np.percentile(us, 99):,.1f}", f"{max(us):,.1f}")
    return table


def print_switched_out(console: Console, spans: dict[str, list[float]]) -> None:
    console.print(spans_table("The queue thread switched out over the run, by what ran first instead",
                              "ran instead", spans))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=50_000, help="requests per second (default 50,000)")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--engine", default="psync", help="psync (default), psync-pool or uring")
    parser.add_argument("--zram", metavar="SIZE", help="on a zram device of this size made for the bench (root)")
    parser.add_argument("--device", help="on this block device (reads only)")
    parser.add_argument("--dir", default="/dev/shm", help="else a file here")
    parser.add_argument("--threshold-us", type=float, default=5.0, help="a request this late is looked into")
    parser.add_argument("--no-pin", action="store_true", help="leave the queue thread unpinned")
    parser.add_argument("--buffer-kb", type=int, default=65536, help="tracefs buffer per CPU")
    parser.add_argument("--trace-file", action="store_true",
                        help="also stream the replay's per-request trace to a Parquet file, as `replay --trace FILE` "
                             "does (its writer thread then runs beside the queue)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("lag_sources: tracefs needs root")
    console = Console(width=160)
    console.print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
                  f"on {os.cpu_count()} CPUs")
    target, _ = lag_target(args)
    n = int(args.rate * args.seconds)
    gap = 1_000_000_000 // args.rate
    with target as (path, direct), tracing("ftlscope_lag_sources", args.buffer_kb) as inst:
        roots = {int(tid) for tid in os.listdir("/proc/self/task")}
        before = cpu_times()
        (inst / "trace").write_text("")
        (inst / "tracing_on").write_text("1")
        with tempfile.TemporaryDirectory() as tmp:
            result = replay(path, reads(n, gap, LAG_SPAN), timing="faithful", qd=32, direct=direct,
                            engine=args.engine, window="1s", health_interval="0s", trace=True, pin=not args.no_pin,
                            trace_file=str(Path(tmp) / "replay.parquet") if args.trace_file else None)
        (inst / "tracing_on").write_text("0")
        after = cpu_times()
        text = (inst / "trace").read_text()
    trace = result.trace.sort_values("submit_seq").reset_index(drop=True)
    lag_ns = trace["issue_lag_ns"].to_numpy().astype(np.int64)
    submit_ns = trace["submit_ns"].to_numpy().astype(np.int64)
    enters, exits = parse_syscalls(text)
    faults, switches, irqs, softs = parse(text)
    pids = {int(m) for m in re.findall(rf"{QUEUE_COMM}-(\d+)", text)}
    console.print(f"engine {result.summary['env']['engine']['backend']}, pinned CPUs "
                  f"{result.summary['env']['engine'].get('pinned_cpus')}; {len(trace):,} requests, "
                  f"{len(enters):,} pread64 entries traced; lag p50 / p99 / p99.9 / max "
                  + " / ".join(f"{np.percentile(lag_ns, q) / 1e3:,.1f}" for q in (50, 99, 99.9, 100)) + " us")
    jiffies = {k: after[k] - before[k] for k in after}
    total = sum(jiffies.values()) or 1
    console.print("CPU time over the run (both CPUs, /proc/stat): "
                  + ", ".join(f"{k} {100 * v / total:.1f} %" for k, v in jiffies.items() if v))
    in_queue = result.summary["env"]["engine"]["backend"] == "psync"
    if (in_queue and len(enters) != len(trace)) or len(pids) != 1:
        console.print(f"[red]cannot line up the trace: {len(enters)} preads for {len(trace)} requests, queue "
                      f"threads {pids} (the tracefs buffer too small? try --buffer-kb)")
        return
    pid = pids.pop()
    if in_queue:
        offset = float(np.median(enters - submit_ns / 1e9))
        spread = np.percentile(np.abs(enters - submit_ns / 1e9 - offset), 99) * 1e9
        console.print(f"the requests' submission stamps lie {spread:.0f} ns (p99) from their pread64 entry, aligned")
    else:
        # The engine's TSC clock is calibrated on CLOCK_MONOTONIC_RAW, the tracepoints' clock here; the trace's
        # stamps count from the run's start.
        run = next(v for v in result.summary.values() if isinstance(v, dict) and "t0_monotonic_raw_ns" in v)
        offset = run["t0_monotonic_raw_ns"] / 1e9
        check = (result.summary["env"]["engine"].get("clock") or {}).get("check_error_ns")
        console.print(f"the requests' stamps put on the tracepoints' clock as they are (calibration error {check} ns)")
        if len(enters) == 0:
            enters = submit_ns[:1] / 1e9
    print_switched_out(console, switched_out(switches, pid, own_threads(text, roots)))
    woken = Counter(int(cpu) for cpu in re.findall(r"sched_wakeup: comm=ftlscope-io\d+ .*?target_cpu=(\d+)", text))
    if woken:
        console.print("psync-pool workers woken on CPU: " + ", ".join(f"{c}: {n:,}" for c, n in sorted(woken.items())))
    late = np.flatnonzero(lag_ns > args.threshold_us * 1e3)
    submit = submit_ns[late] / 1e9 + offset
    due = submit - lag_ns[late] / 1e9
    off, ran = off_cpu_intervals(switches, pid)
    queue_cpus = Counter(cpu for t, cpu, prev, nxt, _ in switches if nxt == pid)
    cpu = queue_cpus.most_common(1)[0][0] if queue_cpus else None

    def intervals(per_cpu):
        rows = sorted((s, e) for c, spans in per_cpu.items() if c == cpu or cpu is None for s, e, _ in spans)
        return np.array(rows).reshape(-1, 2)

    pread_spans = np.column_stack([enters, exits[:len(enters)]]) if len(exits) >= len(enters) else np.zeros((0, 2))
    parts = {
        "off CPU": overlap(off, due, submit),
        "hardirq": overlap(intervals(irqs), due, submit),
        "softirq": overlap(intervals(softs), due, submit),
    }
    # A read's time in the kernel, less what it spent switched out or in interrupts (counted above).
    in_read = overlap(intersection(pread_spans, off), due, submit)
    parts["previous read"] = np.maximum(0.0, overlap(pread_spans, due, submit) - in_read - parts["hardirq"]
                                        - parts["softirq"])
    lag_s = lag_ns[late] / 1e9
    parts["user"] = np.maximum(0.0, lag_s - sum(parts.values()))

    table = Table(title=f"Where the lag of the {len(late):,} requests later than {args.threshold_us:g} us went "
                        f"(of {len(trace):,}; {args.rate:,} req/s, {args.engine})", title_justify="left")
    for col in ("what the queue's CPU did", "share of their lag", "requests it took >= 5 us of", "its p99 (us)"):
        table.add_column(col, justify="right")
    whole = lag_s.sum() or 1
    for name, values in parts.items():
        hit = values >= 5e-6
        table.add_row(name, f"{100 * values.sum() / whole:.1f} %", f"{int(hit.sum()):,}",
                      f"{np.percentile(values, 99) * 1e6:,.1f}" if len(values) else "-")
    console.print(table)
    # What ran instead, weighted by the time it held the queue's CPU inside late intervals.
    who: Counter[str] = Counter()
    union = union_of(due, submit)
    ours = own_threads(text, roots)
    if ran:
        held = overlap(union, np.array([r[0] for r in ran]), np.array([r[1] for r in ran]))
        for (_, _, comm, nxt), t in zip(ran, held, strict=True):
            who[f"{comm} (this process)" if nxt in ours else comm] += t
    if who:
        console.print("ran instead of the queue thread (time inside late intervals): "
                      + ", ".join(f"{comm} {t * 1e3:,.2f} ms" for comm, t in who.most_common(10)))
    fault_times = np.sort(np.array(faults)).reshape(-1, 1).repeat(2, axis=1)
    during = int((fault_times[:, 0] >= enters[0]).sum())
    console.print(f"page faults of the queue thread: {len(faults) - during} while it set up, {during} from its first "
                  "request on, "
                  f"{int(overlap(union, fault_times[:, 0], fault_times[:, 0] + 1e-9).astype(bool).sum())} "
                  "inside late intervals")
    kinds: dict[str, list[float]] = defaultdict(list)
    for per_cpu in (irqs, softs):
        for start, end, what in per_cpu.get(cpu, []):
            kinds[what].append((end - start) * 1e6)
    if kinds:
        console.print(spans_table(f"Interrupts on the queue's CPU {cpu} over the run", "handler", kinds))
    console.print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
