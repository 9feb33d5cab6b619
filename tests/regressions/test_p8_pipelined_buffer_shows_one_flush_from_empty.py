"""P8 answered "none" (and P10 0 s) on a buffer that pipelines its flushes (`ftl.flush_pipelined_slc`, the PM981
refit): only the first fill from empty waits for the whole flush, after it the buffer refills while it programs, so a
series shows one spike and no flush lattice. That one spike is the buffer where the series of every write size put
it at the same bytes; a spike one series alone shows, or series that place it apart, stay noise. Bounds: the
capacity exactly (noise-free synthetic series), confidence >= 0.9 where two series agree."""

from __future__ import annotations

import numpy as np
import simdevices  # noqa: F401  (puts tests/ helpers on the path as the other probe tests do)

from ftlscope.analysis.jenks import classify_series
from ftlscope.probes import p8_write_buffer as p8

KIB, MIB = 1 << 10, 1 << 20


def series(size: int, spikes_mib: list[float], end_mib: float, seed: int, peak_ns: float = 18e6) -> p8.BufferReading:
    """``size`` writes up to ``end_mib``; the writes at ``spikes_mib`` (and the one in flight beside each) waited
    ``peak_ns``."""
    rng = np.random.default_rng(seed)
    n = int(end_mib * MIB) // size
    lat = 37_000 * (1 + 0.05 * rng.standard_normal(n))
    for at in spikes_mib:
        i = int(at * MIB) // size
        lat[i: i + 2] = peak_ns * (1 + 0.05 * rng.standard_normal(2))
    return p8.read_buffer(np.arange(n) * size, lat, size, classify_series(lat, log=True)[0])


def test_one_flush_from_empty_repeated_across_write_sizes_is_a_pipelined_buffer():
    readings = [series(64 * KIB, [64.0], 1024.0, 1), series(16 * KIB, [64.0], 256.0, 2)]
    assert all(r.pipelined and r.capacity == 64 * MIB for r in readings)
    chosen, ios, _ = p8.combine_buffer_readings(readings)
    assert chosen.capacity == 64 * MIB and chosen.pipelined and ios is None
    assert chosen.confidence >= 0.9
    answer = p8.analyse_write_buffer(_frame([(64 * KIB, [64.0], 1024.0), (16 * KIB, [64.0], 256.0)]))
    assert answer.value == 64 * MIB and answer.extra.get("pipelined") and "pipelined" in answer.evidence


def test_a_single_spike_no_other_series_repeats_is_noise():
    # One series alone, or two that put their one big spike apart (a stall each): no buffer.
    alone, _, _ = p8.combine_buffer_readings([series(64 * KIB, [64.0], 1024.0, 1)])
    assert alone.capacity == 0
    apart, _, _ = p8.combine_buffer_readings([series(64 * KIB, [40.0], 1024.0, 1), series(16 * KIB, [90.0], 512.0, 2)])
    assert apart.capacity == 0


def test_a_flush_lattice_in_any_series_sets_the_single_spikes_aside():
    # A blocking buffer flushes at every multiple: a series of it never reads as pipelined, and a series that shows
    # one spike beside it is a series noise hid the later flushes of.
    whole = series(64 * KIB, list(np.arange(16.0, 200.0, 16.0)), 200.0, 1)
    assert not whole.pipelined and whole.capacity == 16 * MIB
    chosen, _, _ = p8.combine_buffer_readings([whole, series(16 * KIB, [16.0], 80.0, 2)])
    assert chosen.capacity == 16 * MIB and not chosen.pipelined


def test_a_series_that_stopped_soon_after_its_spike_is_not_pipelined():
    # Two spikes of a blocking buffer may not have come yet: a series must write PIPELINED_REACH times the bytes
    # before its spike. A later spike as long (a stall) no longer sets the first aside: it is no candidate
    # itself (the series did not write 4x past it), and the repetition across series decides.
    assert not series(64 * KIB, [64.0], 128.0, 1).pipelined
    later = series(64 * KIB, [64.0, 300.0], 1024.0, 1)
    assert later.pipelined and later.candidates == (64 * MIB,)


def _frame(specs):
    import pandas as pd

    parts = []
    for sid, (size, spikes, end) in enumerate(specs):
        rng = np.random.default_rng(sid + 1)
        n = int(end * MIB) // size
        lat = 37_000 * (1 + 0.05 * rng.standard_normal(n))
        for at in spikes:
            i = int(at * MIB) // size
            lat[i: i + 2] = 18e6
        parts.append(pd.DataFrame({"position": np.arange(n) * size, "size": size, "latency_ns": lat, "series": sid}))
    return pd.concat(parts, ignore_index=True)
