"""P8 read consumer-tlc-hmb's pipelined 4 MiB buffer as "none" at 0.57-0.80 at medium noise (issue 16): the main
64 KiB series and the 16 KiB series spiked at exactly 4 MiB, but the later 64 KiB series, written while the drive
was busy (their writes took 60-107 us where the main series' took 41 us: 0.9-2.2 GB/s against 3 GB/s), never
filled the buffer faster than it drained and showed no spike there. The repetition test counted each as a miss,
and the 16 KiB series' two spikes at 4.0 and 4.06 MiB (one flush blocking the writes queued behind) as dense
noise. Now a series of the same write size that wrote slower than one that spiked at a candidate is no test of it,
the spikes at a candidate count as one event in a series' noise rate, and a close call (< 0.7) measures another
series. Spike positions and paces below are those of the seeded medium run (device seed 1); the latencies between
them are drawn from fixed seeds. Bounds: the 4 MiB buffer at >= 0.6 (issue 5's match rule: within the 5 % the
first flush may move); with the later series as fast as the main one, their misses count and the answer is no
sure buffer (< 0.5)."""

from __future__ import annotations

import re

import simdevices  # noqa: F401  (puts tests/ helpers on the path as the other probe tests do)
from write_series import flush_spiked_reading

from ftlscope.probes import p8_write_buffer as p8
from ftlscope.probes.noise_levels import noisy_device_file
from ftlscope.probes.runner import probe_device
from ftlscope.probes.truth import ground_truth, matches
from ftlscope.sim import SimDevice

KIB, MIB = 1 << 10, 1 << 20


def readings(later_ns: list[float]) -> list[p8.BufferReading]:
    """The six series of the medium run; ``later_ns``: the base latency of the four later 64 KiB series."""
    main = flush_spiked_reading(64 * KIB, [4.0, 1037.81, 1084.44, 1093.5], 1144.0, 1, base_ns=41_000,
                                spike_ns=1.93e6, spike_spread=0.02)
    fine = flush_spiked_reading(16 * KIB, [4.0, 4.06], 5.0, 2, base_ns=33_000, spike_ns=36.7e6, spike_spread=0.02)
    spikes = [[0.56], [2.94, 3.38, 3.69, 4.38], [], []]
    later = [flush_spiked_reading(64 * KIB, s, 5.0, 3 + i, base_ns=ns, spike_ns=0.7e6, spike_spread=0.05)
             for i, (s, ns) in enumerate(zip(spikes, later_ns, strict=True))]
    return [main, fine, *later]


def test_slower_series_that_did_not_fill_the_buffer_are_no_test_of_its_first_flush():
    chosen, ios, _ = p8.combine_buffer_readings(readings([93_000, 107_000, 89_000, 61_000]))
    assert ios is None and chosen.pipelined
    assert abs(chosen.capacity - 4 * MIB) <= 0.05 * 4 * MIB
    assert chosen.confidence >= 0.6


def test_series_as_fast_that_did_not_spike_still_count_as_misses():
    chosen, _, _ = p8.combine_buffer_readings(readings([41_000, 41_000, 41_000, 41_000]))
    assert chosen.capacity == 0 or chosen.confidence < 0.5


def test_a_close_call_is_not_settled():
    def none(confidence: float) -> p8.Answer:
        return p8.Answer(value=0, confidence=confidence, evidence="")

    assert not p8._settled(none(0.5), none(0.57))  # the medium run's two rounds: "none" at 0.5, then 0.57
    assert p8._settled(none(0.75), none(0.8))


def test_end_to_end_consumer_tlc_hmb_at_medium_noise(tmp_path):
    """The drive itself, medium noise, device seeds 1, 2 and 4 (each read "none" at 0.69-0.80 before; with only
    the close-call rule, more slow series made seeds 1 and 4 "none" at 0.80). Bounds: 4 MiB (issue 5's rule) at
    >= 0.6 on each, about 0.65 s of device time."""
    for seed in (1, 2, 4):
        path = noisy_device_file("consumer-tlc-hmb", "medium", tmp_path / str(seed))
        path.write_text(re.sub(r"(?m)^seed = \d+$", f"seed = {seed}", path.read_text(), count=1))
        device = SimDevice.open(str(path))
        answer = probe_device(device, properties="P8", out=tmp_path / str(seed)).answers["P8"]
        assert matches("P8", answer.value, ground_truth(device.config_toml)["P8"]), (seed, answer.evidence)
        assert answer.confidence >= 0.6, (seed, answer.confidence)
