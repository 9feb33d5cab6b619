"""The C heap's setting for streaming long traces: applied where a streamed trace is read (the Parquet and text
batch readers: replay, trace info, trace convert, the Python API's replay of a trace file) and where one is written
while a run goes (the trace writer: run --trace, replay --trace, the Python API's ``trace_file``).

glibc's malloc serves a block of 128 KiB or more with a mapping of its own, given back when freed, until the first
such block is freed: from then on it raises that threshold to the freed block's size (up to 32 MiB). The columns
a streamed trace allocates and frees batch after batch (numpy and Arrow arrays of about 0.5 MiB, in the reader
thread and pyarrow's threads) then come from the threads' heaps, whose freed space each heap keeps for its own
later requests: the process held 268-288 MiB replaying 10 M requests and 312 MiB at 100 M (bench/trace_memory.py),
against 244-251 MiB and 237 MiB with the threshold held at 128 KiB (docs/traces.md). ``mallopt`` is how glibc
takes the setting at run time (its ``MALLOC_MMAP_THRESHOLD_`` variable is read only when a process starts).
"""

from __future__ import annotations

import ctypes
import os

_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
THRESHOLD = 128 << 10  # glibc's own starting value


def hold_mmap_threshold() -> bool:
    """Keep glibc from raising its mmap threshold (see the module's docstring); False where the C library is not
    glibc or the user set ``MALLOC_MMAP_THRESHOLD_`` (theirs wins)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018 - glibc only: another C library's mallopt differs
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, THRESHOLD))
