"""P8 read the buffer one flush late at harsh noise (issue 16): the 16 KiB series' flush positions drift (the
buffer drains in the moments the device idles between small writes), so its lattice started at the second flush,
and the finest series was taken. Now the first flush is the one the series agree on (``first_flush``): the spike
positions below are those of the seeded harsh runs (``validate-probes --noise harsh``, MiB written before each
flush-like spike), the end-to-end test runs one of them. Bounds: issue 5's 10 %; confidence >= 0.9 where the
series agree."""

from __future__ import annotations

import numpy as np
import pytest
import simdevices  # noqa: F401  (puts tests/ helpers on the path as the other probe tests do)
from write_series import flush_spiked_reading

from ftlscope.probes import p8_write_buffer as p8
from ftlscope.probes.noise_levels import noisy_device_file
from ftlscope.probes.runner import probe_device
from ftlscope.probes.truth import ground_truth, matches
from ftlscope.sim import SimDevice

KIB, MIB = 1 << 10, 1 << 20


def series(size: int, spikes_mib: list[float], end_mib: float, seed: int) -> p8.BufferReading:
    """A series of ``size`` writes (50 us) up to ``end_mib`` whose writes at ``spikes_mib`` (and the one in flight
    beside each) waited 10 ms for a flush."""
    return flush_spiked_reading(size, spikes_mib, end_mib, seed, base_ns=50_000, spike_ns=10_000_000,
                                spike_spread=0.05)


def lattice(first: float, step: float, end: float) -> list[float]:
    return list(np.arange(first, end, step))


# (truth MiB, main 64 KiB series, 16 KiB series, repeat 64 KiB series): spikes as measured.
MISSES = {
    # kelpie-a1.6t-p / kelpie-a960g-ps: 17.64 MiB for 16 at confidence 0.97-0.98.
    "partial flushes of 1 MiB": (16.0, lattice(16.0, 1.0, 60.0),
                                 [16.42, 17.64, 18.7, 19.77, 20.83, 21.91, 22.95], lattice(16.0, 1.0, 23.9)),
    # kelpie-n1.6t-i: 23.36 MiB for 11.5 at 0.96.
    "whole flushes": (11.5, lattice(11.5, 11.5, 300.0), [11.77, 23.36, 35.25, 47.06], lattice(11.5, 11.5, 55.0)),
    # kelpie-n1.6t-s: 46.77 MiB for 40.25 at 0.95.
    "partial flushes of 5.75 MiB": (40.25, lattice(40.25, 5.75, 300.0),
                                    [40.8, 46.77, 52.72, 58.7, 64.61, 70.62, 76.53, 82.52, 88.52, 94.31, 100.23,
                                     106.17, 111.95], [40.25, 45.38, 46.0, 51.81]),
    # kelpie-n1t-i: 37.23 MiB for 11 at 0.77 (the 16 KiB series' flushes wander by 10 %).
    "a first flush the small writes missed": (11.0, lattice(11.06, 3.08, 300.0),
                                              [12.94, 16.86, 20.58, 24.83, 29.09, 33.5, 37.23, 41.23, 45.25, 49.27,
                                               53.09], lattice(11.06, 3.12, 23.9)),
}


@pytest.mark.parametrize("case", list(MISSES))
def test_the_first_flush_is_where_the_series_agree(case):
    truth, main, fine, repeat = MISSES[case]
    readings = [series(64 * KIB, main, max(main) + 1, 1), series(16 * KIB, fine, max(fine) + 1, 2),
                series(64 * KIB, repeat, max(repeat) + 1, 3)]
    chosen, ios, _ = p8.combine_buffer_readings(readings)
    assert abs(chosen.capacity - truth * MIB) <= 0.05 * truth * MIB, chosen
    assert ios is None  # a series of small writes that read more is no command count
    assert chosen.confidence >= 0.9


def test_a_first_flush_one_series_alone_saw_is_not_sure():
    # Two series of the same size, one showing a spike at 8 MiB the other does not: a stall or a hidden flush.
    readings = [series(64 * KIB, [8.0] + lattice(16.0, 4.0, 60.0), 60.0, 1),
                series(64 * KIB, lattice(16.0, 4.0, 60.0), 60.0, 2)]
    unsure, _, _ = p8.combine_buffer_readings(readings)
    assert unsure.confidence < 0.7
    # A third series: the 8 MiB spike does not repeat, so it was noise (or a flush two series missed: the model's
    # 1 % against a 5 % chance of a noise spike before 16 MiB keeps that in doubt).
    readings.append(series(64 * KIB, lattice(16.0, 4.0, 60.0), 60.0, 3))
    chosen, _, _ = p8.combine_buffer_readings(readings)
    assert chosen.capacity == 16 * MIB and unsure.confidence < chosen.confidence < 0.9
    # One series alone is never sure: every flush it showed may have come after one noise hid.
    alone, _, _ = p8.combine_buffer_readings(readings[1:2])
    assert alone.capacity == 16 * MIB and alone.confidence <= 0.9


def test_p8_finds_the_first_flush_on_a_harshly_noisy_drive(tmp_path):
    # kelpie-n1.6t-i at harsh noise read 23.36 MiB for 11.50 at confidence 0.96 (one whole flush late).
    device = SimDevice.open(str(noisy_device_file("kelpie-n1.6t-i", "harsh", tmp_path)))
    answer = probe_device(device, properties="P8", out=tmp_path).answers["P8"]
    assert matches("P8", answer.value, ground_truth(device.config_toml)["P8"]), answer.evidence
    assert answer.confidence >= 0.9
