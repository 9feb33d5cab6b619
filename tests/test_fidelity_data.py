"""The published-numbers table of bench/fidelity.py is well-formed, and its measuring functions measure what
they say on a tiny simulated drive whose answer is known from its configuration."""

from __future__ import annotations

import math
import re
import tomllib
from collections import defaultdict

import pytest
from simdevices import small_ssd

from ftlscope.fidelity import measure, published
from ftlscope.fidelity.published import DRIVES, POINTS, SHAPES, SOURCES, UNITS, Point, Shape
from ftlscope.sim import presets
from ftlscope.units import parse_size

PRESETS = {p["name"] for p in presets()}
REQUIRED = {"steady": {"rw", "bs", "qd", "span"}, "alignment": {"bs", "qd", "offset", "span"},
            "cliff": {"bs", "qd", "total"}, "random_fill": {"bs", "qd"}}


def _numbers(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}


def test_every_drive_has_a_preset_and_its_sources():
    for key, drive in DRIVES.items():
        assert drive.preset in PRESETS, f"{key}: no preset {drive.preset}"
        assert set(drive.sources) <= set(SOURCES)
        assert {p.source for p in POINTS if p.drive == key} <= set(drive.sources)


@pytest.mark.parametrize("point", POINTS, ids=lambda p: p.id)
def test_point_is_well_formed(point: Point):
    assert point.drive in DRIVES and point.source in SOURCES and point.unit in UNITS
    assert point.kind in measure.KINDS and REQUIRED[point.kind] <= set(point.params)
    assert point.where and point.metric
    assert math.isfinite(point.value) and point.value > 0
    # The quote is the source's words or cell: it holds the number itself.
    assert point.value in _numbers(point.quote), f"{point.value} is not in {point.quote!r}"
    for size_key in ("bs", "span", "total", "offset"):
        if size_key in point.params:
            assert parse_size(point.params[size_key]) > 0


def test_points_are_unique_and_cover_the_documents():
    ids = [p.id for p in POINTS]
    assert len(ids) == len(set(ids))
    by_source = defaultdict(int)
    for p in POINTS:
        by_source[p.source] += 1
    # The Report's 12 tables x 3 non-zero rows x 3 queue depths; the Profiling study's QD 1 table (16),
    # block-size sweeps (16), mix sweep (4), QD sweep (8 + 32 percentiles).
    assert by_source[published.REPORT] == 108
    assert by_source[published.PROFILING] == 76


def test_plausible_magnitudes():
    for p in POINTS:
        if p.unit in ("us", "ms", "s"):
            longest = 600e9 if p.metric == "cliff_time" else 10e9  # a request: 1 us .. 10 s; a cliff: 10 min
            assert 1e3 <= p.value * UNITS[p.unit] <= longest, p.id
        if p.unit in ("MB/s", "MiB/s", "KB/s"):
            assert 1e5 <= p.value * UNITS[p.unit] <= 8e9, p.id  # 100 KB/s .. the fastest PCIe 4.0 x4


def test_report_latency_columns_are_microseconds_by_littles_law():
    """IOPS x latency = requests in flight, at most the queue depth: with the cells read as microseconds every
    point holds 0.5-1.0 x its queue depth (one cell 1.25 x, see published.py), the single-direction 32 and 128
    KiB reads 0.94-0.99 x; read as milliseconds they would hold 1000x the queue depth."""
    rates, in_flight = {}, defaultdict(float)
    for p in POINTS:
        if p.source == published.REPORT and not p.metric.endswith("lat_mean"):
            per_second = p.value * UNITS[p.unit] / (parse_size(p.params["bs"]) if p.metric.endswith("bw") else 1)
            rates[(p.params["bs"], p.params["rw"], p.params.get("rwmixread"), p.params["qd"], p.metric[:5])] = \
                per_second
    for p in POINTS:
        if p.source == published.REPORT and p.metric.endswith("lat_mean"):
            key = (p.params["bs"], p.params["rw"], p.params.get("rwmixread"), p.params["qd"])
            n = rates[(*key, p.metric[:5])] * p.value * UNITS[p.unit] / 1e9
            in_flight[key] += n
            if p.params["rw"] == "randread" and p.params["bs"] != "4k":
                assert 0.93 * p.params["qd"] <= n <= p.params["qd"], p.id
    assert len(in_flight) == 36
    for (bs, rw, mix, qd), n in in_flight.items():
        assert 0.5 * qd <= n <= 1.3 * qd, f"{bs} {rw} {mix} QD {qd}: {n:.0f} in flight"


def test_report_latencies_of_cells_without_a_full_queue_are_marked():
    """The latency points whose cell holds under 0.85 x its queue depth in flight (every 4 KiB cell, 32 KiB
    writes at QD 64: 0.70) carry ``queue_not_full`` and say so in their note; no other point does."""
    marked = {p.id for p in POINTS if p.queue_not_full}
    assert all(p.metric.endswith("lat_mean") and p.source == published.REPORT for p in POINTS if p.queue_not_full)
    assert all("x the queue depth" in p.note for p in POINTS if p.queue_not_full)
    assert {p.params["bs"] for p in POINTS if p.queue_not_full} == {"4k", "32k"}
    assert len(marked) == 19
    # Each such cell runs with the requests in flight its published numbers hold (fio's, not its nominal depth).
    for p in POINTS:
        if p.queue_not_full:
            mix = {50: "5:5", 70: "7:3"}.get(p.params.get("rwmixread"),
                                              "only read" if p.params["rw"] == "randread" else "only write")
            held = published.report_in_flight(p.params["bs"], mix, p.params["qd"]) * p.params["qd"]
            assert p.params["in_flight"] == round(held) < p.params["qd"], p.id
    assert published.report_in_flight("32k", "only write", 64) == pytest.approx(0.696, abs=0.005)
    assert published.report_in_flight("128k", "only write", 64) == pytest.approx(0.99, abs=0.01)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.name}-{s.drive}")
def test_shape_is_well_formed(shape: Shape):
    assert shape.kind in measure.SHAPES and shape.drive in DRIVES and shape.source in SOURCES
    assert shape.preset in PRESETS and shape.published and shape.quote


# ---- the measuring functions on a drive whose answers follow from its configuration -----------------------

# One channel, one die, 100 us reads, fast buses, no command overhead: a QD 1 4 KiB read takes 100 us plus
# two ~1 us transfers, and the die serves at most 1 / 102 us = ~9,800 reads per second at any depth.
TINY = {
    "geometry": {"channels": 1, "chips_per_channel": 1},
    "mapping": {"chunk_size": "4KiB", "stripe_width": 1},
    "nand": {"read_latency": {"L": "100us", "M": "100us", "H": "100us"}, "channel_rate": "4GB/s"},
    "controller": {"command_overhead": "0us", "host_rate": "4GB/s"},
    "write_buffer": {"capacity": "0B"},  # no read may find its data still in RAM
}
SETTINGS = measure.Settings(runtime="200ms", warmup="20ms", window="5ms")


def _fidelity(tmp_path, **sections) -> measure.Fidelity:
    merged = {**TINY, **sections}
    return measure.Fidelity(SETTINGS, device_opener=lambda _preset: small_ssd(tmp_path, "tiny", **merged))


def test_steady_measures_latency_and_the_die_limit(tmp_path):
    fid = _fidelity(tmp_path)
    qd1 = fid.metrics("tiny", "steady", {"rw": "randread", "bs": "4k", "qd": 1, "span": "16MiB"})
    assert 100e3 <= qd1["read.lat_mean"] <= 104e3
    assert qd1["read.iops"] == pytest.approx(1e9 / qd1["read.lat_mean"], rel=0.02)
    qd8 = fid.metrics("tiny", "steady", {"rw": "randread", "bs": "4k", "qd": 8, "span": "16MiB"})
    assert 9_500 <= qd8["read.iops"] <= 10_000
    assert qd8["read.lat_mean"] == pytest.approx(8e9 / qd8["read.iops"], rel=0.03)  # Little's law
    # A point converts into its own unit, and the run is not repeated for a second metric of it.
    point = Point("NV2", published.REPORT, "test", "steady", {"rw": "randread", "bs": "4k", "qd": 1, "span": "16MiB"},
                  "read.lat_mean", 100.0, "us", "100")
    assert fid.measure(point) == pytest.approx(qd1["read.lat_mean"] / 1e3)
    assert measure.error_pct(point.value, fid.measure(point)) == pytest.approx(qd1["read.lat_mean"] / 1e3 - 100)


def test_measurements_are_deterministic(tmp_path):
    params = {"rw": "randrw", "rwmixread": 70, "bs": "4k", "qd": 4, "span": "16MiB"}
    first = _fidelity(tmp_path).metrics("tiny", "steady", params)
    second = _fidelity(tmp_path).metrics("tiny", "steady", params)
    assert first == second and first["all.iops"] == pytest.approx(first["read.iops"] + first["write.iops"])


def test_cliff_finds_the_end_of_the_slc_cache(tmp_path):
    # 8 MiB of SLC-mode writes at 100 us per 4 KiB page (~41 MB/s), then native MLC pages at 100/1500 us.
    fid = _fidelity(tmp_path, nand={**TINY["nand"], "program_latency": {"L": "100us", "M": "900us", "H": "1500us"}},
                    slc_cache={"capacity": "8MiB", "fold_rate": "0MB/s"})
    m = fid.metrics("tiny", "cliff", {"bs": "128k", "qd": 4, "total": "16MiB"})
    assert m["cliff_bytes"] == pytest.approx(8 * 2**20, rel=0.05)
    assert m["cliff_time"] == pytest.approx(8 * 2**20 / 4096 * 100e3, rel=0.1)
    assert m["after.bw"] < 0.3 * m["before.bw"]


def test_no_cliff_is_none(tmp_path):
    m = _fidelity(tmp_path).metrics("tiny", "cliff", {"bs": "128k", "qd": 4, "total": "4MiB"})
    assert math.isnan(m["cliff_bytes"])


def test_saturation_shape_on_one_die(tmp_path):
    # One die is saturated by a single request: QD 1 already gives over 90 % of the peak.
    shape = Shape("saturation QD", "PM981", published.PROFILING, "test", "saturation",
                  {"rw": "randread", "bs": "4k", "span": "16MiB", "qds": (1, 2, 4)}, {"qd_min": 1, "qd_max": 1},
                  "", "")
    result = _fidelity(tmp_path).check(shape)
    assert result.passed, result.measured
    assert "first at QD 1" in result.measured


def test_summary_counts_a_missing_value_as_worst():
    assert measure.summarise([10.0, -30.0, 5.0]) == (10.0, 30.0)
    assert measure.summarise([10.0, 20.0, math.nan])[1] == math.inf


def test_seeded_opener_changes_only_the_noise_draws(tmp_path):
    # bench/fidelity.py --noise-seed: the same drive with another device.seed gives other [noise] draws; without a
    # seed the device file is opened as it is, so the default table does not change.
    path = small_ssd(tmp_path, "noisy", **TINY, noise={"latency_cv": 0.3}).spec
    params = {"rw": "randread", "bs": "4k", "qd": 4, "span": "16MiB"}

    def mean_latency(seed):
        opener = measure.seeded_opener({"noisy": path}, seed, tmp_path)
        assert (seed is None) == (opener("noisy").spec == path)
        assert tomllib.loads(opener("noisy").config_toml)["device"]["seed"] == (1 if seed is None else seed)
        return measure.Fidelity(SETTINGS, device_opener=opener).metrics("noisy", "steady", params)["read.lat_mean"]

    default, one, seven = mean_latency(None), mean_latency(1), mean_latency(7)
    assert default == one  # the device file's own seed is 1
    assert seven != one and seven == pytest.approx(one, rel=0.05)  # another draw of the same 100 us reads
