"""A streamed replay's memory grew with the trace (268-288 MiB at 10 M requests, 312 MiB at 100 M): glibc raised
its mmap threshold after the first freed batch column, and the columns allocated and freed batch after batch then
stayed in the threads' heaps. The threshold is held (ftlscope.heap) where a streamed trace is read (the batch
readers) and where one is written while a run goes (the trace writer), so every entry that streams a trace gets it:
replay, trace info, trace convert, run --trace, and the Python API's run(trace_file=...) and replay of a trace file
(these two did not, when the three commands set it themselves). bench/trace_memory.py measures the peak."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

import ftlscope
from ftlscope import heap
from ftlscope.cli import main
from ftlscope.replay import replay
from ftlscope.sim import SimDevice

FIX = Path(__file__).parent.parent / "fixtures" / "traces"
SIM = "sim:consumer-tlc-dram"


@pytest.fixture
def calls(monkeypatch) -> list[int]:
    seen: list[int] = []
    monkeypatch.setattr(heap, "hold_mmap_threshold", lambda: seen.append(1) or True)
    return seen


@pytest.mark.parametrize("argv", [
    ["replay", SIM, str(FIX / "msr.csv"), "--quiet", "--wrap", "--destructive", SIM],
    ["trace", "info", str(FIX / "blkparse.txt")],
    ["trace", "convert", str(FIX / "alibaba.csv"), "--to", "fio", "--out", "OUT"],
    ["run", SIM, "--rw", "randread", "--ops", "200", "--quiet", "--trace", "OUT"],
])
def test_the_streaming_commands_hold_it(tmp_path, calls, argv):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert main(argv) == 0
    assert calls, f"{argv[0]} streamed a trace without holding the threshold"


def test_the_python_apis_trace_file_holds_it(tmp_path, calls):
    ftlscope.run(SIM, ftlscope.from_flags(rw="randread", ops=200), trace_file=tmp_path / "t.parquet")
    assert calls


def test_the_python_apis_replay_of_a_trace_file_holds_it(calls):
    result = replay(SimDevice.open("consumer-tlc-dram"), str(FIX / "msr.csv"), wrap=True)
    assert result.summary["replay"]["streamed"]
    assert calls


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's threshold is glibc's")
def test_glibc_takes_it_and_a_users_setting_wins(monkeypatch):
    assert heap.hold_mmap_threshold()
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert not heap.hold_mmap_threshold()
