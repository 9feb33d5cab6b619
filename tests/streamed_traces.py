"""Checks shared by the streamed-trace tests (text formats, blkparse, replay): a streamed replay against the replay
of the whole trace, a replay refused before it starts that must not hang, and the peak Python-side memory of a
call."""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path

from ftlscope.replay import replay
from ftlscope.traces import read_trace

SIM = "sim:consumer-tlc-dram"


def assert_streamed_replay_equals_whole(path: Path, timing: str, keys: tuple[str, ...]) -> None:
    """A replay that streams ``path`` issues what a replay of the whole trace does: the same requests at the
    same times with the same latencies and issue lags, and the same ``replay`` summary ``keys``."""
    runs = {name: replay(SIM, source, timing=timing, qd=8, trace=True, destructive=SIM, precondition=False)
            for name, source in (("whole", read_trace(path)), ("streamed", path))}
    assert runs["streamed"].summary["replay"]["streamed"] and not runs["whole"].summary["replay"]["streamed"]
    whole, streamed = (runs[k].trace.sort_values("submit_ns", kind="stable") for k in ("whole", "streamed"))
    for column in ("op", "offset_bytes", "size", "submit_ns", "latency_ns", "issue_lag_ns"):
        assert (whole[column].to_numpy() == streamed[column].to_numpy()).all(), column
    assert {k: runs["whole"].summary["replay"][k] for k in keys} == {
        k: runs["streamed"].summary["replay"][k] for k in keys}


def refusal_without_hanging(call, within_s: float = 120) -> BaseException:
    """Run ``call`` (a replay expected to be refused before it starts) on a thread of its own and return what it
    raised. A streamed replay's feeder threads wait for room in the engine's chunks: a refused run must let them
    go, or ``call`` never returns (the thread is a daemon, so a hang fails this instead of the whole session)."""
    raised: list[BaseException] = []

    def attempt():
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            raised.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=within_s)
    assert not worker.is_alive(), "the replay hung"
    assert raised, "the replay was not refused"
    return raised[0]


def peak_python_memory(fn) -> int:
    """The peak of the memory Python allocators (numpy's included) held while ``fn`` ran, in bytes."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
