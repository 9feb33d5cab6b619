"""P8 crashed (AssertionError in combine_buffer_readings) on a held-out noise-free write-through TLC drive (issue
16): its 16 KiB writes spiked every 192 KiB from the very first write (a high page's 2 ms program every 48 pages
over 16 units), a perfect lattice starting at 0 bytes, which no first flush can be (an empty buffer takes writes
before it flushes), while the 64 KiB series saw no spike. Now lattices that all start at their series' first write
are no buffer, at the confidence of spikes on no lattice (0.6). Latencies are the drive's shape, seeded."""

from __future__ import annotations

import numpy as np
import simdevices  # noqa: F401  (puts tests/ helpers on the path as the other probe tests do)

from ftlscope.analysis.jenks import classify_series
from ftlscope.probes import p8_write_buffer as p8

KIB, MIB = 1 << 10, 1 << 20


def series(size: int, end_mib: float, period: int | None, seed: int) -> p8.BufferReading:
    """``size`` writes of ~300 us; with ``period``, every write starting a ``period``-byte step (from 0) ~2 ms."""
    rng = np.random.default_rng(seed)
    n = int(end_mib * MIB) // size
    position = np.arange(n) * size
    lat = 300_000 * (1 + 0.02 * rng.standard_normal(n))
    if period:
        lat[position % period == 0] = 2.0e6
    return p8.read_buffer(position, lat, size, classify_series(lat, log=True)[0] if period else None)


def test_a_lattice_from_the_first_write_is_no_buffer():
    main = series(64 * KIB, 64.0, None, 1)
    fine = series(16 * KIB, 8.0, 192 * KIB, 2)
    assert fine.capacity > 0 and fine.first == 0  # the lattice the crash came from
    chosen, ios, _ = p8.combine_buffer_readings([main, main, fine])
    assert chosen.capacity == 0 and ios is None
    assert chosen.confidence <= p8.AMBIGUOUS_NO_BUFFER
