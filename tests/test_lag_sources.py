"""bench/lag_sources.py's interval arithmetic and tracefs parsing, on made-up events: how much of each late
request's interval a kind of activity covered, and when the queue thread was switched out and for whom."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def lag_sources():
    spec = importlib.util.spec_from_file_location("lag_sources", BENCH / "lag_sources.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def test_overlap_counts_each_windows_covered_time_once(lag_sources):
    # Overlapping intervals are merged first: [1, 4] and [3, 5] cover [1, 5].
    intervals = np.array([[1.0, 4.0], [3.0, 5.0], [8.0, 9.0]])
    lo, hi = np.array([0.0, 2.0, 4.5, 5.0, 0.0]), np.array([1.0, 3.0, 8.5, 8.0, 10.0])
    assert lag_sources.overlap(intervals, lo, hi).tolist() == [0.0, 1.0, 1.0, 0.0, 5.0]
    assert lag_sources.overlap(np.zeros((0, 2)), lo, hi).tolist() == [0.0] * 5


def test_intersection_and_union(lag_sources):
    a = np.array([[0.0, 2.0], [4.0, 6.0]])
    b = np.array([[1.0, 5.0]])
    assert lag_sources.intersection(a, b).tolist() == [[1.0, 2.0], [4.0, 5.0]]
    assert lag_sources.union_of(np.array([3.0, 0.0, 1.0]), np.array([4.0, 2.0, 2.5])).tolist() == [[0.0, 2.5],
                                                                                                     [3.0, 4.0]]


def test_the_queue_thread_is_off_cpu_from_its_switch_out_to_its_switch_in(lag_sources):
    q = 100
    switches = [  # (t, cpu, prev_pid, next_pid, next_comm)
        (1.0, 1, q, 7, "rustc"),
        (1.5, 0, 9, 8, "python"),  # the other CPU: not the queue's
        (2.0, 1, 7, 6, "kworker"),
        (3.0, 1, 6, q, "ftlscope-q0"),
        (5.0, 1, q, 7, "rustc"),
        (5.5, 1, 7, q, "ftlscope-q0"),
    ]
    off, ran = lag_sources.off_cpu_intervals(switches, q)
    assert off.tolist() == [[1.0, 3.0], [5.0, 5.5]]
    assert [(start, end, comm) for start, end, comm, _ in ran] == [(1.0, 2.0, "rustc"), (2.0, 3.0, "kworker"),
                                                                   (5.0, 5.5, "rustc")]


def test_tracefs_lines_become_interrupts_switches_and_preads(lag_sources):
    text = "\n".join([
        "     ftlscope-q0-4321    [001] d.h1.   100.000010: local_timer_entry: vector=236",
        "     ftlscope-q0-4321    [001] d.h1.   100.000030: local_timer_exit: vector=236",
        "     ftlscope-q0-4321    [001] ..s1.   100.000040: softirq_entry: vec=9 [action=RCU]",
        "     ftlscope-q0-4321    [001] ..s1.   100.000047: softirq_exit: vec=9 [action=RCU]",
        "     ftlscope-q0-4321    [001] .....   100.000050: sys_pread64(fd: 5, buf: 7f, count: 1000, pos: 0)",
        "     ftlscope-q0-4321    [001] .....   100.000055: sys_pread64 -> 0x1000",
        "     ftlscope-q0-4321    [001] .....   100.000060: page_fault_user: address=0x7f ip=0x55 error_code=0x6",
        "     ftlscope-q0-4321    [001] d..2.   100.000070: sched_switch: prev_comm=ftlscope-q0 prev_pid=4321 "
        "prev_prio=120 prev_state=R ==> next_comm=rustc next_pid=77 next_prio=120",
    ])
    faults, switches, irqs, softs = lag_sources.parse(text)
    assert faults == [100.00006]
    assert switches == [(100.00007, 1, 4321, 77, "rustc")]
    assert [(round(e - s, 9), what) for s, e, what in irqs[1]] == [(0.00002, "local_timer")]
    assert [(round(e - s, 9), what) for s, e, what in softs[1]] == [(0.000007, "RCU")]
    enters, exits = lag_sources.parse_syscalls(text)
    assert enters.tolist() == [100.00005] and exits.tolist() == [100.000055]


def test_the_queue_threads_switch_outs_are_counted_by_what_ran_first_instead(lag_sources):
    q = 100
    switches = [  # (t, cpu, prev_pid, next_pid, next_comm)
        (1.0, 1, q, 201, "ftlscope-io3"),  # its own worker (pid 201) preempts it for 4 us
        (1.000004, 1, 201, q, "ftlscope-q0"),
        (2.0, 1, q, 7, "python"),  # another session's process, then a kworker, for 300 us in all
        (2.0001, 1, 7, 6, "kworker/1:2"),
        (2.0003, 1, 6, q, "ftlscope-q0"),
        (3.0, 1, q, 202, "ftlscope-io17"),
        (3.000002, 1, 202, q, "ftlscope-q0"),
    ]
    spans = lag_sources.switched_out(switches, q, ours={q, 201, 202})
    assert sorted(spans) == ["ftlscope-ioN (this process)", "python"]
    assert np.allclose(spans["ftlscope-ioN (this process)"], [4.0, 2.0], atol=1e-3)
    assert np.allclose(spans["python"], [300.0], atol=1e-3)
