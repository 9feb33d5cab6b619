"""P8 read a flush lattice of 3x jitter spikes on pm981-256g at medium noise (issue 16: 117 MiB for 64 at 0.43): a
16 KiB write delayed to 61 us while two writes submitted after it completed (at 33 and 56 us) was kept as
"blocking", since only completions in the first half of its wait counted. Now any later-submitted write that
completes before it counts; a flush lets only the one queued beside it through. The times below are that write's
neighbourhood in the seeded medium run (ns from its submission). And a lattice must hold more hits than the
spikes' density puts on its points by chance (harsh noise: 28 such spikes in 56 MiB made a "10.11 MiB" lattice)."""

from __future__ import annotations

import numpy as np

from ftlscope.probes import _write_common as wc
from ftlscope.probes import p8_write_buffer as p8

MIB = 1 << 20


def test_a_spike_two_later_writes_overtook_is_not_blocking():
    submit = np.array([-15_461, -2_300, 0, 12_292, 33_447, 56_520])
    complete = np.array([0, 12_292, 61_119, 33_447, 56_520, 71_488])
    spike = np.array([False, False, True, False, False, False])
    assert not wc.blocking(submit, complete, spike)[2]


def test_a_flush_that_lets_only_its_neighbour_through_is_blocking():
    # Both writes in flight wait 18 ms; the one beside completes first by the host's jitter.
    submit = np.array([0, 10_000, 18_010_000, 18_030_000])
    complete = np.array([18_005_000, 18_004_000, 18_030_000, 18_050_000])
    spike = np.array([True, True, False, False])
    assert wc.blocking(submit, complete, spike)[:2].all()


def test_dense_random_spikes_make_no_lattice():
    rng = np.random.default_rng(1)
    positions = np.sort(rng.uniform(0, 56 * MIB, 28))
    assert p8.flush_lattice(positions, 56 * MIB, 3 * 16 * 1024) is None


def test_a_real_lattice_of_four_flushes_stands():
    positions = np.array([16.0, 32.0, 48.0, 64.0, 23.0]) * MIB
    lattice = p8.flush_lattice(positions, 70 * MIB, 3 * 64 * 1024)
    assert lattice is not None and abs(lattice[1] - 16 * MIB) <= 0.01 * 16 * MIB
