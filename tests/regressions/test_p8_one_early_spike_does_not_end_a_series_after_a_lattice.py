"""P8 lost a held-out drive's command-count limit at harsh noise (issue 16): 64 MiB of buffer or 2048 write
commands, so 16 KiB writes flush every 32 MiB. The main 64 KiB series saw a lattice at 64 MiB; the 16 KiB series
that looks for the count met a noise spike 4.39 MiB in, read it as a pipelined buffer's one flush, and stopped at
4x its bytes (56 MiB, one count flush in), so no lattice and no "or 2048 writes". Now a series whose main series
saw a lattice does not stop on a pipelined reading: it writes on to its flushes or its limit. Latencies are
seeded draws of that series' shape."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ftlscope.probes import p8_write_buffer as p8

KIB, MIB = 1 << 10, 1 << 20


def fine_series(end_mib: int, seed: int) -> pd.DataFrame:
    """16 KiB writes of ~40 us; a 10 ms stall at 4.39 MiB and a 4 ms count flush at 32 MiB."""
    rng = np.random.default_rng(seed)
    size = 16 * KIB
    n = end_mib * MIB // size
    lat = 40_000 * (1 + 0.1 * rng.standard_normal(n))
    for at, ns in ((4.39, 10e6), (32.0, 4e6)):
        lat[int(at * MIB) // size] = ns
    return pd.DataFrame({"position": np.arange(n) * size, "latency_ns": lat.astype(np.int64), "size": size})


def test_a_series_after_a_lattice_goes_on_past_one_early_spike():
    frame = fine_series(56, 1)
    assert p8._read_series(frame).pipelined  # one spike, written 4x past it: read as a pipelined flush
    assert p8._enough(frame, 56 * MIB, 0, expect_buffer=True)  # what a series alone still does
    assert not p8._enough(frame, 56 * MIB, 0, expect_buffer=True, lattice_seen=True)
