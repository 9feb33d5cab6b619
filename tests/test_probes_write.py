"""P8 write buffer capacity, P9 write parallelism, P10 internal flush window (issue 5): the analysis on synthetic
latencies, then the probes end to end on simulated devices whose write buffers are known."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import simdevices

from ftlscope.analysis.jenks import classify_series
from ftlscope.experiments.context import Context
from ftlscope.probes import Answer
from ftlscope.probes import p8_write_buffer as p8
from ftlscope.probes import p9_write_parallelism as p9
from ftlscope.probes import p10_flush_window as p10
from ftlscope.probes.runner import probe_device
from ftlscope.probes.truth import ground_truth, matches
from ftlscope.sim import SimDevice

KIB, MIB = 1 << 10, 1 << 20


# ---- synthetic latencies ----------------------------------------------------------------------------------------


def writes(n: int, size: int, spikes_at: list[int], *, normal=50_000.0, spike=2_000_000.0, seed=1,
           big_at: tuple[int, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """``n`` writes of ``size``: buffered ones near ``normal`` ns, the write at each index of ``spikes_at`` (and
    the one after it, a second write in flight) waiting ``spike`` ns; ``big_at`` 100x longer."""
    rng = np.random.default_rng(seed)
    lat = normal * (1 + 0.05 * rng.standard_normal(n))
    for i in spikes_at:
        lat[i: i + 2] = spike * (1 + 0.02 * rng.standard_normal(len(lat[i: i + 2])))
    for i in big_at:
        lat[i: i + 2] = 100 * spike
    return np.arange(n) * size, lat


def reading_of(position, lat, size) -> p8.BufferReading:
    return p8.read_buffer(position, lat, size, classify_series(lat, log=True)[0])


def test_the_bytes_before_the_first_spike_are_the_capacity():
    size = 64 * KIB
    every = (11 * MIB + MIB // 2) // size  # an 11.5 MiB buffer
    position, lat = writes(2000, size, list(range(every, 2000, every)))
    r = reading_of(position, lat, size)
    assert r.capacity == 11 * MIB + MIB // 2 and r.interval == r.capacity and r.partial is None
    assert r.flushes == len(range(every, 2000, every)) and r.confidence > 0.9 and r.second_level is None


def test_a_partial_flush_shows_as_closer_spikes_after_the_first():
    size = 64 * KIB
    first, then = 40 * MIB // size, 6 * MIB // size  # flushes 6 MiB of a 40 MiB buffer at a time
    position, lat = writes(3000, size, list(range(first, 3000, then)))
    r = reading_of(position, lat, size)
    assert (r.capacity, r.partial, r.first) == (40 * MIB, 6 * MIB, 40 * MIB)


def test_a_buffer_not_empty_at_the_start_is_read_from_the_spacing():
    size = 64 * KIB
    position, lat = writes(1000, size, list(range(10, 1000, 64)))  # 4 MiB apart, the first after 640 KiB
    assert reading_of(position, lat, size).capacity == 4 * MIB


def test_a_much_longer_flush_followed_by_ordinary_ones_is_a_second_level():
    size = 64 * KIB
    every = 2 * MIB // size
    spikes = list(range(every, 9000, every))
    position, lat = writes(9000, size, spikes, big_at=(spikes[128],))  # 2 MiB + 256 MiB written before it
    r = reading_of(position, lat, size)
    assert r.capacity == 2 * MIB and r.second_level == 256 * MIB
    # A lasting change (every later flush longer, e.g. the SLC cache used up) is no second level.
    lat2 = lat.copy()
    lat2[position >= position[spikes[128]]] *= np.where(lat2[position >= position[spikes[128]]] > 1e6, 100, 1)
    assert reading_of(position, lat2, size).second_level is None


def test_no_spike_means_no_buffer_and_flat_latencies_give_high_confidence():
    position, lat = writes(5000, 64 * KIB, [])
    classes = classify_series(lat, log=True)
    r = p8.read_buffer(position, lat, 64 * KIB, classes[0] if classes else None)
    assert r.capacity == 0 and r.flushes == 0 and r.confidence > 0.5


def test_long_series_are_classified_on_a_sample_and_keep_rare_spikes():
    size = 16 * KIB
    position, lat = writes(40_000, size, [4096, 8192, 12288, 16384, 20480, 24576, 28672, 32768, 36864])
    classes = classify_series(lat, log=True)
    assert len(classes[0].labels) == 40_000
    assert reading_of(position, lat, size).capacity == 64 * MIB


def test_common_interval_groups_values_within_the_tolerance():
    assert p8.common_interval([100, 101, 99, 100, 300, 50]) == (100.0, 4 / 6)
    assert p8.common_interval([]) is None


def test_a_buffer_counting_write_commands_is_told_from_one_counting_bytes():
    def r(size, interval):
        return p8.BufferReading(size, interval, first=interval, interval=interval, flushes=5, confidence=1.0)

    # 64 writes between flushes at 16 KiB, 64 KiB and 256 KiB; the bytes fill first with 1 MiB writes.
    readings = [r(64 * KIB, 4 * MIB), r(16 * KIB, MIB), r(256 * KIB, 16 * MIB), r(MIB, 16 * MIB)]
    chosen, ios, _ = p8.combine_buffer_readings(readings)
    assert ios == 64 and chosen.capacity == 16 * MIB and chosen.size >= 256 * KIB
    # Counted at the small size only: 768 KiB is 12 writes of 64 KiB, 24 of 16 KiB flush it.
    chosen, ios, _ = p8.combine_buffer_readings([r(64 * KIB, 768 * KIB), r(16 * KIB, 384 * KIB)])
    assert ios == 24 and chosen.capacity == 768 * KIB
    # A buffer counted in bytes: the finest writes place the flush best.
    chosen, ios, _ = p8.combine_buffer_readings([r(64 * KIB, 576 * KIB), r(16 * KIB, 592 * KIB)])
    assert ios is None and chosen.capacity == 592 * KIB


def batches(latencies_of_one_batch, n=20, flush_in=(3,)) -> pd.DataFrame:
    rows = []
    for b in range(n):
        lat = np.array(latencies_of_one_batch, dtype=float)
        if b in flush_in:
            lat[len(lat) // 2:] += 3e6  # this batch met a buffer flush
        rows.append(pd.DataFrame({"batch": b, "latency_ns": lat}))
    return pd.concat(rows, ignore_index=True)


def test_the_first_completion_cluster_of_a_batch_is_the_parallelism():
    # 16 writes, 4 slots, 10 us per insert, 170 ns of link transfer between writes.
    lat = [15_000 + 10_000 * (i // 4) + 170 * (i % 4) for i in range(16)]
    r = p9.read_batches(batches(lat))
    assert r.parallelism == 4 and not r.serial and r.period_ns == pytest.approx(10_000, rel=0.01)
    assert r.confidence > 0.9


def test_a_serialised_batch_completes_one_write_at_a_time():
    r = p9.read_batches(batches([55_000 + 40_000 * i for i in range(16)]))
    assert r.parallelism == 1 and r.serial and r.period_ns == pytest.approx(40_000)


def test_a_batch_completing_all_at_once_asks_for_a_larger_batch():
    assert p9.read_batches(batches([15_000 + 50 * i for i in range(16)], flush_in=())).parallelism is None


def test_a_busy_queue_gives_the_parallelism_a_serialised_batch_hides():
    # A queue 16 deep on a buffer admitting 4 writes per 40 us: 4 completions every 40 us, latency 160 us, and a
    # 3 ms flush in the middle.
    depth, n = 16, 800
    complete = np.array([40_000 * (i // 4 + 1) for i in range(n)], dtype=float)
    complete[400:] += 3e6
    submit = np.r_[np.zeros(depth), complete[:-depth]]
    frame = pd.DataFrame({"submit_ns": submit, "complete_ns": complete, "latency_ns": complete - submit})
    assert p9.busy_parallelism(frame, depth, 40_000) == pytest.approx(4, rel=0.02)


def test_the_flush_window_is_the_shortest_gap_after_which_nothing_spikes():
    tests = pd.DataFrame({"gap_ns": [2e6, 8e6, 32e6, 128e6, 64e6, 45e6], "spiked": [1, 1, 1, 0, 0, 1]}).astype(
        {"spiked": bool})
    step = p10.flush_step(tests)
    assert (step.window, step.longest_spiked) == (pytest.approx(0.064), pytest.approx(0.045))
    never = pd.DataFrame({"gap_ns": [2e6, 5e9], "spiked": [True, True]})
    assert p10.flush_step(never).window is None


# ---- simulated devices ------------------------------------------------------------------------------------------

SMALL = """
[device]
name = "small-buffered"
kind = "ssd"
capacity = "8GiB"
over_provisioning = 0.1

[geometry]
channels = 4
chips_per_channel = 2
page_size = "4KiB"
pages_per_block = 128

[mapping]
chunk_size = "8KiB"
stripe_width = 8

[nand]
cell = "mlc"
page_pattern = "1L 1H"
read_latency = { L = "50us", M = "70us", H = "90us" }
program_latency = { L = "300us", M = "900us", H = "1500us" }
erase_latency = "3ms"
channel_rate = "400MB/s"

[write_buffer]
capacity = "768KiB"
capacity_ios = {ios}
parallelism = 3
idle_flush_window = "12ms"
serialize_when_idle = {serial}
"""


def probe(device: SimDevice, tmp_path):
    report = probe_device(device, properties="P8,P9,P10", out=tmp_path)
    assert report.error is None
    return report, ground_truth(device.config_toml)


@pytest.mark.parametrize("preset", ["consumer-tlc-hmb", "kelpie-a960g-ps", "kelpie-n1.6t-m", "optane-like"])
def test_presets_answer_their_ground_truth(preset, tmp_path):
    report, truth = probe(SimDevice.open(preset), tmp_path)
    for pid in ("P8", "P9", "P10"):
        answer = report.answers[pid]
        assert matches(pid, answer.value, truth[pid]), (pid, answer.value, truth[pid], answer.evidence)
        assert answer.figures and answer.figures[0].exists() and answer.raw is not None and len(answer.raw)
        assert answer.device_time_s < 60
    if truth["P10"]:  # a finite window: within 20 % (issue 16), not only the factor of 2 of the match rule
        assert 0.8 * truth["P10"] <= report.answers["P10"].value <= 1.2 * truth["P10"], report.answers["P10"].evidence
    serial = preset == "kelpie-a960g-ps"
    assert report.answers["P9"].extra["serialized_when_idle"] is serial
    if preset == "kelpie-a960g-ps":
        assert report.answers["P8"].extra["partial_flush"] == MIB
    written = json.loads((tmp_path / "properties.json").read_text())["properties"]
    assert written["P9"]["serialized_when_idle"] is serial


@pytest.mark.parametrize(("ios", "serial"), [(0, "true"), (24, "false")])
def test_a_small_custom_device(ios, serial, tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(SMALL.replace("{ios}", str(ios)).replace("{serial}", serial))
    report, truth = probe(SimDevice.open(str(path)), tmp_path)
    for pid in ("P8", "P9", "P10"):
        assert matches(pid, report.answers[pid].value, truth[pid]), (pid, report.answers[pid].evidence)
    assert report.answers["P9"].extra["serialized_when_idle"] is (serial == "true")
    assert report.answers["P8"].extra.get("capacity_ios") == (ios or None)


# ---- P10 against the proportional idle drain (issue 16: batches of 75 % of the buffer read 0.79 of the window) ----


def proportional_spike(fraction: float, batches: int, gap_share: float) -> bool:
    """The device model's buffer (device-model.md): ``batches`` batches of ``fraction`` of the buffer, a gap of
    ``gap_share`` of the window between them draining that share of what is held; does a batch overflow?"""
    held = 0.0
    for b in range(batches):
        if b:
            held *= 1 - min(gap_share, 1.0)
        held += fraction
        if held > 1 + 1e-12:
            return True
    return False


@pytest.mark.parametrize(("fraction", "batches"), [(1.0, 3), (0.9, 3), (0.75, 3), (0.6, 3), (0.75, 2)])
def test_drained_share_is_where_a_proportional_drain_stops_overflowing(fraction, batches):
    share = p10.drained_share(fraction, batches)
    assert proportional_spike(fraction, batches, share * 0.999)
    assert not proportional_spike(fraction, batches, share * 1.001)
    assert p10.drained_share(0.3, 3) is None  # three batches of 30 % fit without any drain: the test is blind


def test_gaps_of_smaller_batches_are_scaled_to_the_whole_buffer():
    # Batches of 75 % on a 40 ms window: spikes stop at 0.736 of it; scaled, the window is found again.
    window = 40e6
    gaps = np.geomspace(2e6, 80e6, 40)
    tests = pd.DataFrame({"gap_ns": gaps, "fraction": 0.75, "batches": 3,
                          "spiked": [proportional_spike(0.75, 3, g / window) for g in gaps]})
    unscaled = p10.flush_step(tests).window
    found = p10.flush_step(p10._window_tests(tests)).window
    assert unscaled * 1e9 / window == pytest.approx(0.76, abs=0.05)  # the old bias
    assert found * 1e9 / window == pytest.approx(1.0, abs=0.1)


# Held-out drives (not presets): windows from 3 ms to 1 s, buffers from 512 KiB to 8 MiB, one flushing only part
# of itself, one also counting write commands.
HELD_OUT = [
    ("10ms", "512KiB", "64MiB", {}),
    ("50ms", "2MiB", "128MiB", {}),
    ("200ms", "768KiB", "64MiB", {"partial_flush": "256KiB"}),
    ("1s", "8MiB", "512MiB", {}),
    ("3ms", "1MiB", "64MiB", {"capacity_ios": 64}),
]


@pytest.mark.parametrize(("window", "capacity", "device", "extra"), HELD_OUT)
def test_the_flush_window_lands_on_the_window_of_held_out_drives(window, capacity, device, extra, tmp_path):
    drive = simdevices.small_ssd(tmp_path, "held-out", device={"capacity": device},
                                 write_buffer={"capacity": capacity, "idle_flush_window": window, **extra})
    report = probe_device(drive, properties="P8,P10", out=tmp_path)
    truth = ground_truth(drive.config_toml)["P10"]
    value = report.answers["P10"].value
    # Issue 16 asks for 20 %; a full-buffer batch fits only once the buffer is empty, so the answer is the window
    # up to the search's resolution (10 % above), less the few microseconds between a batch and its gap.
    assert 0.95 * truth <= value <= p10.GAP_RESOLUTION * truth, report.answers["P10"].evidence


def test_a_buffer_p8_read_too_large_is_recounted_from_the_overflow(tmp_path):
    drive = simdevices.small_ssd(tmp_path, "overestimated", write_buffer={"capacity": "1MiB",
                                                                          "idle_flush_window": "20ms"})
    known = {"P8": Answer(value=int(1.25 * MIB), confidence=1.0, evidence="read 25 % too large")}
    ctx = Context(drive, raw_dir=tmp_path / "raw", writes=True)
    ctx.precondition("purge")
    answer = p10.probe_flush_window(ctx, known, tmp_path)
    assert 0.95 * 0.020 <= answer.value <= p10.GAP_RESOLUTION * 0.020, answer.evidence
    assert "batches of 1 MiB" in answer.evidence and "P8 read 1.25 MiB" in answer.evidence


def test_a_buffer_p8_read_twice_too_large_is_recounted_from_the_first_overflow(tmp_path):
    # kelpie-n1.6t-i at harsh noise: P8 read 23.36 MiB for 11.5 MiB (one flush missed), the first batch overflowed at
    # half its length, which P10 then took for a stall (only the last quarter counted): batches of twice the buffer
    # flushed inside themselves and P10 read "never" for 10 ms at confidence 0.98. Now an overflow counts where it
    # repeats in a second run of the batch.
    drive = simdevices.small_ssd(tmp_path, "halved", write_buffer={"capacity": "1MiB", "idle_flush_window": "20ms"})
    known = {"P8": Answer(value=2 * MIB, confidence=1.0, evidence="read twice too large")}
    ctx = Context(drive, raw_dir=tmp_path / "raw", writes=True)
    ctx.precondition("purge")
    answer = p10.probe_flush_window(ctx, known, tmp_path)
    assert 0.95 * 0.020 <= answer.value <= p10.GAP_RESOLUTION * 0.020, answer.evidence
    assert "P8 read 2 MiB" in answer.evidence
