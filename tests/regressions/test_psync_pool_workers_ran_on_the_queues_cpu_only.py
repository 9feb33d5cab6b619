"""psync-pool's workers inherited the queue thread's one-CPU pin (the queue starts them after it pins itself), so
every request woke a worker on the CPU where the queue's thread spins for the next due time: the worker waited for
the queue's slice (in the read's latency) or put the queue off its CPU (issue lag; docs/traces.md, "Where
psync-pool's lag came from"). The workers now may run on every CPU the process may use. Read from the threads'
CPU lists while a run goes; no wall-time assertions."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import ftlscope


def _threads_cpus(prefix: str) -> dict[str, str]:
    """The CPU list of each of this process's threads whose name starts with ``prefix``."""
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            if name.startswith(prefix):
                status = (task / "status").read_text()
                found[name] = next(line.split(":", 1)[1].strip() for line in status.splitlines()
                                   if line.startswith("Cpus_allowed_list"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
    return found


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to tell a pin from none")
def test_the_pools_workers_may_use_every_cpu_while_the_queue_is_pinned(tmp_path):
    errors = []

    def run():
        try:
            # A slow rate keeps the run going (and the machine free) while its threads are read.
            workload = ftlscope.from_flags(rw="randread", qd=4, runtime="2s", rate_iops="200")
            ftlscope.run(str(tmp_path / "f.img"), workload, size="16MiB", engine="psync-pool", health_interval="0s")
        except Exception as exc:  # noqa: BLE001 - handed to the test's thread
            errors.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    queues, workers = {}, {}
    deadline = time.monotonic() + 60
    while runner.is_alive() and time.monotonic() < deadline and not (queues and len(workers) == 4):
        queues, workers = _threads_cpus("ftlscope-q"), _threads_cpus("ftlscope-io")
        time.sleep(0.01)
    runner.join()
    assert not errors, errors
    assert queues and len(workers) == 4, (queues, workers)
    pinned = set(queues.values())
    assert len(pinned) == 1 and "," not in next(iter(pinned)) and "-" not in next(iter(pinned)), queues
    mine = Path("/proc/self/status").read_text().split("Cpus_allowed_list:", 1)[1].split()[0]
    assert set(workers.values()) == {mine}, (workers, mine)
