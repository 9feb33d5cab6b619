"""A streamed replay's memory grew with the trace (268-288 MiB at 10 M requests, 312 MiB at 100 M): glibc raised
its mmap threshold after the first freed batch column, and the columns allocated and freed batch after batch then
stayed in the threads' heaps. replay, trace info and trace convert now hold the threshold (ftlscope.heap);
bench/trace_memory.py measures the peak."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from ftlscope import heap
from ftlscope.cli import main

FIX = Path(__file__).parent.parent / "fixtures" / "traces"


@pytest.mark.parametrize("argv", [
    ["replay", "sim:consumer-tlc-dram", str(FIX / "msr.csv"), "--quiet", "--wrap"],
    ["trace", "info", str(FIX / "blkparse.txt")],
    ["trace", "convert", str(FIX / "alibaba.csv"), "--to", "fio", "--out", "OUT"],
])
def test_the_streaming_commands_hold_it(tmp_path, monkeypatch, argv):
    calls = []
    monkeypatch.setattr(heap, "hold_mmap_threshold", lambda: calls.append(1) or True)
    argv = [str(tmp_path / "out.iolog") if a == "OUT" else a for a in argv]
    assert main([*argv, *(["--destructive", "sim:consumer-tlc-dram"] if argv[0] == "replay" else [])]) == 0
    assert calls == [1]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's threshold is glibc's")
def test_glibc_takes_it_and_a_users_setting_wins(monkeypatch):
    assert heap.hold_mmap_threshold()
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert not heap.hold_mmap_threshold()
