"""Simulated devices through the engine: every behaviour the device model promises is visible from outside
through ordinary timed I/O (issue 3). Small custom devices keep each test to a fraction of a second of wall
time; everything runs in virtual time, so the numbers are exact and the same on every run."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from simdevices import device_toml
from simdevices import small_ssd as shared_small_ssd

import ftlscope
from ftlscope.errors import ConfigError
from ftlscope.sim import SimDevice, presets, show

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30

def small_ssd(tmp_path, name="small", capacity="64MiB", buffer="512KiB", slc="0B") -> SimDevice:
    """The shared small SSD (tests/simdevices.py) with this module's three knobs."""
    return shared_small_ssd(tmp_path, name, device={"capacity": capacity}, write_buffer={"capacity": buffer},
                            slc_cache={"capacity": slc})


def run(device, **flags):
    trace = flags.pop("trace", False)
    return ftlscope.run(device, ftlscope.from_flags(**flags), trace=trace, window="1ms")


def fill(device, size: int) -> None:
    run(device, rw="write", bs="128k", qd=4, total_bytes=str(size))
    device.idle("1s")


def test_presets_are_listed_and_shown():
    names = [p["name"] for p in presets()]
    assert "consumer-tlc-dram" in names and "hdd-7200-consumer" in names
    assert any(n.startswith("kelpie-") for n in names)
    text = show("sim:kelpie-n2t-i")
    assert 'stripe_width = 186' in text and "[write_buffer]" in text


def test_a_broken_device_file_is_refused_with_one_line_naming_the_key(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text(device_toml(device={"name": "b"}, write_buffer={"capacity": "16MiBs"}))
    with pytest.raises(ConfigError) as err:
        SimDevice.open(str(path))
    message = str(err.value)
    assert "[write_buffer] capacity" in message and "\n" not in message
    done = subprocess.run([sys.executable, "-m", "ftlscope.cli", "run", f"sim:{path}", "--ops", "1"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "[write_buffer] capacity" in done.stderr


def test_runs_are_deterministic(tmp_path):
    results = []
    for _ in range(2):
        dev = small_ssd(tmp_path)
        r = run(dev, rw="randrw", rwmixread=70, qd=8, ops=5000)
        results.append((r.summary["read"], r.summary["write"], r.summary["run"]["virtual_ns"]))
    assert results[0] == results[1]


def test_state_and_virtual_time_carry_over_between_runs(tmp_path):
    dev = small_ssd(tmp_path)
    first = run(dev, rw="randread", ops=100).summary["read"]["lat_ns"]["mean"]
    assert first < 20_000, "reads of a fresh device touch no NAND"
    fill(dev, 64 * MIB)
    after = run(dev, rw="randread", ops=100).summary["read"]["lat_ns"]["mean"]
    assert after > 50_000, "after a fill the reads go to flash"
    assert dev.now_ns > 1e9


def test_sequential_write_slows_down_after_the_slc_cache(tmp_path):
    slc = 64 * MIB
    dev = small_ssd(tmp_path, capacity="256MiB", slc="64MiB")
    r = run(dev, rw="write", bs="128k", qd=1, total_bytes="160MiB", trace=True)
    done = r.trace["complete_ns"].to_numpy()
    per_chunk = 4 * MIB // (128 * KIB)  # throughput over every 4 MiB written
    ends = done[per_chunk - 1 :: per_chunk]
    rate = 4 * MIB / np.diff(np.concatenate([[0], ends]))
    fast = np.median(rate[2:8])
    slow_at = int(np.argmax(rate < 0.6 * fast))
    cliff = slow_at * 4 * MIB
    assert abs(cliff - slc) / slc <= 0.05, f"cliff after {cliff / MIB:.1f} MiB, SLC {slc / MIB:.0f} MiB"
    assert np.median(rate[-5:]) < 0.5 * fast


def test_qd1_writes_spike_every_buffer_and_idle_gaps_remove_the_spikes(tmp_path):
    buffer = 512 * KIB
    per_buffer = buffer // (4 * KIB)
    dev = small_ssd(tmp_path, buffer="512KiB")
    r = run(dev, rw="write", bs="4k", qd=1, ops=4 * per_buffer, trace=True)
    lat = r.trace["latency_ns"].to_numpy()
    spikes = np.flatnonzero(lat > 1_000_000)
    assert len(spikes) == 3
    assert set(np.diff(spikes)) == {per_buffer}
    dev.idle("20ms")
    # Buffer-sized batches with an idle gap of at least the flush window (10 ms) between them.
    r = run(dev, rw="write", bs="4k", batch=per_buffer, idle="12ms", ops=4 * per_buffer, trace=True, offset="8MiB")
    assert r.trace["latency_ns"].max() < 1_000_000, "no spikes with idle gaps"


def test_a_read_across_a_page_boundary_costs_more(tmp_path):
    dev = small_ssd(tmp_path)
    fill(dev, 64 * MIB)
    inside = run(dev, rw="read", bs="1k", ops=50, offset="1KiB", pattern="strided:64KiB")
    across = run(dev, rw="read", bs="1k", ops=50, offset="3584", pattern="strided:64KiB")
    assert across.summary["read"]["lat_ns"]["p50"] > inside.summary["read"]["lat_ns"]["p50"] + 30_000


def test_reads_a_stripe_apart_contend(tmp_path):
    dev = small_ssd(tmp_path)
    fill(dev, 64 * MIB)
    stripe = 8 * 8 * KIB  # stripe_width chunks
    same_unit = run(dev, rw="read", bs="4k", batch=4, ops=400, pattern=f"strided:{stripe}")
    spread = run(dev, rw="read", bs="4k", batch=4, ops=400, pattern="strided:8KiB")
    assert same_unit.summary["read"]["lat_ns"]["mean"] > 1.8 * spread.summary["read"]["lat_ns"]["mean"]


def test_random_overwrites_raise_write_amplification_and_reads_see_the_data(tmp_path):
    dev = small_ssd(tmp_path, capacity="32MiB")
    fill(dev, 32 * MIB)
    r = run(dev, rw="randwrite", bs="4k", qd=8, ops=4 * 32 * MIB // (4 * KIB))
    assert r.summary["run"]["write_amplification"] > 1.1
    pages = 32 * MIB // (4 * KIB)
    assert all(dev.content(lpn) not in ("unwritten", "zeroes") for lpn in range(0, pages, 97))
    run(dev, rw="trim", bs="4k", ops=16)
    assert dev.content(0) == "unwritten"


def test_gc_slows_random_fill_down(tmp_path):
    dev = small_ssd(tmp_path, capacity="32MiB")
    first = run(dev, rw="randwrite", bs="4k", qd=1, ops=2000).summary["write"]["iops"]
    run(dev, rw="randwrite", bs="4k", qd=8, ops=3 * 32 * MIB // (4 * KIB))
    steady = run(dev, rw="randwrite", bs="4k", qd=1, ops=4000).summary["write"]["iops"]
    assert steady < 0.8 * first


def test_hdd_random_reads_take_a_seek_and_half_a_rotation():
    dev = SimDevice.open("hdd-7200-consumer")
    r = run(dev, rw="randread", bs="4k", qd=1, ops=2000)
    expected = 8.5e6 + 0.5 * 60e9 / 7200
    assert abs(r.summary["read"]["lat_ns"]["mean"] - expected) / expected < 0.10


def test_hdd_sequential_rate_follows_the_zones():
    dev = SimDevice.open("hdd-7200-consumer")
    size = dev.info["size_bytes"]
    outer = run(dev, rw="read", bs="1m", qd=1, total_bytes="256MiB").summary["read"]["bw_bytes"]
    inner = run(dev, rw="read", bs="1m", qd=1, total_bytes="256MiB",
                offset=str((size - 256 * MIB) // MIB * MIB)).summary["read"]["bw_bytes"]
    assert abs(outer - 200e6) / 200e6 < 0.05
    assert abs(inner - 100e6) / 100e6 < 0.05


def test_power_cycle_and_reset_through_python(tmp_path):
    dev = small_ssd(tmp_path)
    fill(dev, 8 * MIB)
    before = dev.now_ns
    assert dev.controller_reset() > 0
    assert dev.power_cycle() > 0
    assert dev.now_ns > before
    health = dev.health()
    assert health["source"] == "sim" and health["media_bytes_written"] >= 8 * MIB


def test_the_summary_reports_virtual_and_wall_time(tmp_path):
    dev = small_ssd(tmp_path)
    r = run(dev, rw="randread", runtime="3s")
    assert r.summary["env"]["engine"]["backend"] == "sim"
    assert r.summary["run"]["virtual_ns"] >= 3e9
    assert r.summary["run"]["wall_ns"] < 3e9
    assert r.summary["health"]["available"] and r.summary["health"]["source"] == "sim"
    assert "[geometry]" in r.summary["target"]["sim_config_toml"]
    json.dumps(r.summary)


def test_mean_in_flight_follows_littles_law(tmp_path):
    """Requests in flight on average: the simulated device takes every request at once, so the queue keeps its
    depth exactly; the figure is the summed latency over the measured time (checked against the trace)."""
    device = small_ssd(tmp_path)
    for qd in (1, 8):
        r = run(device, rw="randread", bs="4k", qd=qd, ops=4000, trace=True)
        in_flight = r.summary["run"]["mean_in_flight"]
        t = r.trace
        summed = float((t["complete_ns"] - t["submit_ns"]).sum()) / r.summary["run"]["measured_ns"]
        assert in_flight == pytest.approx(summed, rel=1e-6)
        assert in_flight == pytest.approx(qd, rel=0.02)
