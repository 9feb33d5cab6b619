"""Synthetic write-latency series for the P8 tests: writes of one size at a base latency with a relative spread,
and at each given place two writes (the one that waited and the one in flight beside it) that waited for a flush."""

from __future__ import annotations

import numpy as np

from ftlscope.analysis.jenks import classify_series
from ftlscope.probes import p8_write_buffer as p8

MIB = 1 << 20


def flush_spiked_reading(size: int, spikes_mib, end_mib: float, seed: int, base_ns: float, spike_ns: float,
                         spike_spread: float) -> p8.BufferReading:
    """P8's reading of ``size`` writes up to ``end_mib``: each ``base_ns`` (5 % spread), and at every place of
    ``spikes_mib`` (MiB written before it) two writes of ``spike_ns`` (``spike_spread`` relative spread)."""
    rng = np.random.default_rng(seed)
    n = int(end_mib * MIB) // size
    lat = base_ns * (1 + 0.05 * rng.standard_normal(n))
    for at in spikes_mib:
        i = int(at * MIB) // size
        lat[i: i + 2] = spike_ns * (1 + spike_spread * rng.standard_normal(2))
    return p8.read_buffer(np.arange(n) * size, lat, size, classify_series(lat, log=True)[0])
