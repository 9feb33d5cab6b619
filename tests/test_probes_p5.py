"""P5 channel/chip layout on noisy drives and behind controller limits (issue 16).

The stream analysis is checked on synthetic cells with a known answer; the probe on small simulated drives
written here as TOML (so these tests do not depend on the presets' timings), with P1, P3 and P4 given from the
ground truth. Every draw derives from the device's seed: deterministic, in virtual time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ftlscope.experiments.context import Context
from ftlscope.probes import _layout_analysis as la
from ftlscope.probes import _p5_analysis as p5
from ftlscope.probes import layout_probes as lp
from ftlscope.probes.base import Answer
from ftlscope.probes.truth import ground_truth
from ftlscope.sim import SimDevice


def stream_cells(stripe: int, channels: int | None, *, wait_ns: float, se_ns: float, drift_ns: float = 0.0,
                 serial_ns: float = 0.0, seed: int = 2) -> pd.DataFrame:
    """Cells of P5's streams: median latency 60 us plus ``wait_ns`` per pair of in-flight reads sharing a
    channel, plus ``drift_ns`` per unit of distance (the page types in flight), at least depth x ``serial_ns``
    (a serial stage in front of the buses), measured with standard error ``se_ns``."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in (2, 4, 8):
        for d in range(1, min(stripe - 1, 40) + 1):
            load = la.channel_load(q, d, stripe, channels or stripe)
            if load is not None:
                median = max(60e3 + wait_ns * (load - 1), q * serial_ns) + drift_ns * d + rng.normal(0, se_ns)
                rows.append({"q": q, "d": d, "n": 4000, "se_ns": se_ns, "median_ns": median})
    return pd.DataFrame(rows)


def test_channels_from_streams_of_reads():
    reading = p5.channels_from_streams(stream_cells(124, 16, wait_ns=150, se_ns=100), 124)
    assert reading.found and reading.layout == {"channels": 16, "chips_per_channel": 8}
    assert reading.confidence >= 0.97 and not reading.controller_limited
    flat = p5.channels_from_streams(stream_cells(8, None, wait_ns=0, se_ns=100), 8)
    assert not flat.found and flat.layout == {"channels": 8, "chips_per_channel": 1}


def test_channels_from_streams_says_when_it_cannot_tell():
    # The bus wait far below the medians' standard errors: no channel count explains the cells clearly better
    # than its neighbours, and the confidence says so instead of naming one.
    reading = p5.channels_from_streams(stream_cells(32, 8, wait_ns=5, se_ns=400), 32)
    assert reading.posterior < 0.9 and reading.confidence < 0.9


def test_a_drift_with_the_distance_is_the_page_types_in_flight_not_a_channel_count():
    # The median rises 30 ns per unit of distance (more neighbours cross into the next stripe row, another page
    # type): the line in the fit takes it, and the channel count is read from what repeats.
    reading = p5.channels_from_streams(stream_cells(64, 4, wait_ns=120, se_ns=60, drift_ns=30), 64)
    assert reading.layout == {"channels": 4, "chips_per_channel": 16} and reading.confidence >= 0.9


def test_cells_more_spread_than_their_errors_lower_the_confidence():
    # The same layout measured with errors four times smaller than the cells really vary: the dispersion is
    # taken from the fit, so the posterior is that of the real spread, not of the optimistic errors.
    honest = p5.channels_from_streams(stream_cells(32, 8, wait_ns=40, se_ns=200), 32)
    cells = stream_cells(32, 8, wait_ns=40, se_ns=200)
    cells["se_ns"] = 50.0
    optimistic = p5.channels_from_streams(cells, 32)
    assert optimistic.confidence == pytest.approx(honest.confidence, abs=0.15)


def test_a_stream_confined_to_its_in_flight_units_gets_an_offset_of_its_own():
    # q x d a multiple of the stripe: the walk never leaves the q units in flight, which fall into lock-step on
    # their bus (kelpie-n500g-s read 8 channels for 4 at posterior 1.0 at medium noise from these cells).
    assert p5.lock_step(2, 32, 64) and p5.lock_step(4, 16, 64) and p5.lock_step(8, 8, 64)
    assert not p5.lock_step(8, 4, 64)
    cells = stream_cells(64, 4, wait_ns=120, se_ns=60)
    slow = [p5.lock_step(int(q), int(d), 64) for q, d in zip(cells["q"], cells["d"], strict=True)]
    cells.loc[slow, "median_ns"] += 3000  # lock-step streams 3 us slower than their load says
    reading = p5.channels_from_streams(cells, 64)
    assert reading.layout == {"channels": 4, "chips_per_channel": 16} and reading.confidence >= 0.9


def test_a_serial_stage_that_can_hide_the_buses_is_said_with_low_confidence():
    # Every in-flight read waits for one command processor (9 us each): the deepest streams complete one read
    # per 9 us whatever the distance, and a bus wait shorter than that would not show.
    reading = p5.channels_from_streams(stream_cells(16, None, wait_ns=0, se_ns=100, serial_ns=9e3), 16)
    assert reading.controller_limited and reading.serial_stage_ns == pytest.approx(9e3, rel=0.05)
    assert not reading.found and reading.confidence <= p5.HIDDEN_CONFIDENCE
    # The same stage with sharing seen through it: the layout stands.
    seen = p5.channels_from_streams(stream_cells(16, 4, wait_ns=2e3, se_ns=100, serial_ns=9e3), 16)
    assert seen.found and seen.layout == {"channels": 4, "chips_per_channel": 4}


# ---- the probe on drives written here ---------------------------------------------------------------------

DRIVE = """
[device]
name = "p5-test"
kind = "ssd"
capacity = "512MiB"
over_provisioning = 0.15
seed = {seed}

[geometry]
channels = {channels}
chips_per_channel = {chips}
page_size = "4KiB"
pages_per_block = 64

[mapping]
chunk_size = "4KiB"
stripe_width = {stripe}

[nand]
cell = "mlc"
page_pattern = "1L 1H"
read_latency = {{ L = "{read}", M = "{read}", H = "{read_high}" }}
program_latency = {{ L = "200us", M = "500us", H = "800us" }}
erase_latency = "1ms"
channel_rate = "{bus}"

[write_buffer]
capacity = "1MiB"
parallelism = 2

[controller]
host_rate = "{host}"
cores = {cores}
command_time = "{command}"
"""

NOISE = """
[noise]
latency_cv = {cv}
host_jitter = "{jitter}"
read_retry_rate = 0.005
background_interval = "20ms"
background_busy = "1ms"
"""


def drive(tmp_path: Path, *, noise: dict | None = None, **keys) -> SimDevice:
    values = {"seed": 3, "channels": 2, "chips": 4, "stripe": 8, "read": "6us", "read_high": "6us",
              "bus": "1.6GB/s", "host": "900MB/s", "cores": 0, "command": "0us"} | keys
    text = DRIVE.format(**values) + (NOISE.format(**noise) if noise else "")
    path = tmp_path / "drive.toml"
    path.write_text(text)
    return SimDevice.open(str(path))


def probe_p5(device: SimDevice, directory: Path) -> tuple[Answer, dict]:
    truth = ground_truth(device.config_toml)
    ctx = Context(device, raw_dir=directory / "raw", writes=True)
    span = ctx.span(256 << 20)
    ctx.precondition("purge", span)
    ctx.precondition("sequential-fill", span)
    known = {pid: Answer(truth[pid], 1.0, "test") for pid in ("P1", "P3", "P4")}
    return lp.run_channel_layout(ctx, known, directory), truth


@pytest.mark.parametrize("noise", [None, {"cv": 0.05, "jitter": "500ns"}], ids=["noise-free", "jitter"])
def test_a_host_link_slower_than_a_channel_does_not_hide_the_buses(tmp_path, noise):
    """optane-like's shape: 6 us reads, 1.6 GB/s channels behind a 900 MB/s host link. Page reads queued on the
    host link and every pair and stream read "no bus shared" (8 ch x 1, wrong even without noise); one-block
    reads move the page over the bus but only 512 B over the link."""
    answer, truth = probe_p5(drive(tmp_path, noise=noise), tmp_path)
    assert answer.value == truth["P5"] == {"channels": 2, "chips_per_channel": 4}


def test_a_one_core_controller_slower_than_the_bus_is_said_not_guessed(tmp_path):
    """One command processor at 8 us a command in front of 4 KiB transfers of 5.1 us (800 MB/s): no read ever
    waits for a bus, so the layout cannot be seen; the answer must say so (low confidence, controller-limited):
    before, the streams read 13 channels at 0.71 on this seeded drive. Two reads issued together complete a
    command time apart on units that share no bus: that is what marks the serial stage. Single reads of k
    chunks do not see through it here: the sensing spread (15 % of 40-60 us) is wider than a 5 us transfer, so
    the reads of one command rarely meet on a bus, and the answer stays the controller-limited one."""
    device = drive(tmp_path, channels=4, chips=4, stripe=16, read="40us", read_high="60us", bus="800MB/s",
                   host="3GB/s", cores=1, command="8us", noise={"cv": 0.15, "jitter": "5us"})
    answer, truth = probe_p5(device, tmp_path)
    assert answer.extra["controller_limited"] and answer.extra["serial_stage_us"] > 1
    assert answer.extra["seen_through"] is False
    assert answer.confidence <= p5.SERIAL_FOUND_CONFIDENCE


def test_a_quiet_drive_is_seen_through_its_one_command_processor(tmp_path):
    """Noise-free, one command processor at 8 us: every pair completes 8 us apart at every distance, so "no bus
    shared" (16 channels x 1) was answered, marked controller-limited at HIDDEN_CONFIDENCE. One read of k
    whole chunks passes the processor once; behind it the read takes one 5.1 us transfer longer each time k
    passes a multiple of the 4 channels: 4 ch x 4, still marked controller-limited (seen through)."""
    device = drive(tmp_path, channels=4, chips=4, stripe=16, read="40us", read_high="60us", bus="800MB/s",
                   host="3GB/s", cores=1, command="8us")
    answer, truth = probe_p5(device, tmp_path)
    assert answer.extra["controller_limited"] and answer.extra["serial_stage_us"] == pytest.approx(8, rel=0.05)
    assert answer.extra["seen_through"] is True
    assert answer.value == truth["P5"] == {"channels": 4, "chips_per_channel": 4}


def span_cells(stripe: int, channels: int | None, *, step_ns: float, se_ns: float, curve_ns: float = 0.0,
               largest: int | None = None, seed: int = 4) -> pd.DataFrame:
    """Cells of single reads of k chunks: 60 us plus 2 us a chunk (the host link) plus ``curve_ns`` x sqrt(k)
    (the slowest of k sensing times) plus ``step_ns`` per chunk on the busiest of ``channels`` buses."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(1, (largest or stripe) + 1):
        busiest = -(-k // channels) if channels else 1
        mean = 60e3 + 2e3 * k + curve_ns * np.sqrt(k) + step_ns * busiest + rng.normal(0, se_ns)
        rows.append({"k": k, "n": 1000, "mean_ns": mean, "se_ns": se_ns})
    return pd.DataFrame(rows)


def test_single_reads_of_k_chunks_step_at_the_channel_count():
    reading = p5.channels_from_spans(span_cells(16, 4, step_ns=5000, se_ns=300, curve_ns=3000), 16)
    assert reading.found and reading.layout == {"channels": 4, "chips_per_channel": 4}
    assert reading.confidence >= 0.97 and list(reading.abnormal) == [5, 9, 13]
    # A divisor of the channel count would need its extra steps to be zero: equal steps do not fit it.
    wide = p5.channels_from_spans(span_cells(32, 8, step_ns=2500, se_ns=200), 32)
    assert wide.layout == {"channels": 8, "chips_per_channel": 4} and wide.confidence >= 0.9


def test_single_reads_without_a_step_are_not_a_layout():
    # A concave rise (the slowest of more noisy senses) and no bus step: nothing is found, and the caller keeps
    # the controller-limited answer instead of reading "no bus shared" from it.
    reading = p5.channels_from_spans(span_cells(16, None, step_ns=0, se_ns=300, curve_ns=8000), 16)
    assert not reading.found


def test_the_layout_is_no_surer_than_the_stripe_it_was_read_over(tmp_path):
    """At harsh noise P4 read a stripe of 1 at confidence 0.54 and P5 answered "1 ch x 1" at 1.0 from it."""
    device = SimDevice.open("kelpie-t64g-s")
    ctx = Context(device, raw_dir=tmp_path, writes=True)
    answer = lp.run_channel_layout(ctx, {"P1": Answer(16384, 1.0, "t"), "P3": Answer(16384, 0.9, "t"),
                                         "P4": Answer(1, 0.54, "t")}, tmp_path)
    assert answer.value == {"channels": 1, "chips_per_channel": 1} and answer.confidence == 0.54
