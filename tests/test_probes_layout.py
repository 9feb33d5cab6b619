"""The layout probes (issue 5): P2 page type, P4 stripe width, P5 channel/chip layout.

The analysis is checked on synthetic latencies with a known answer; the probes on simulated devices (presets
and small custom ones), with P1 and P3 given from the ground truth so these tests do not depend on the probes
that find them. Everything runs in virtual time: deterministic, a few seconds of wall time per device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ftlscope import probes
from ftlscope.experiments.context import Context
from ftlscope.probes import _layout_analysis as la
from ftlscope.probes import layout_probes as lp
from ftlscope.probes.base import REFILLED, Answer
from ftlscope.probes.truth import ground_truth, matches
from ftlscope.sim import SimDevice

L, M, H = 0, 1, 2


def logical_codes(cycle, chunk_pages: int, stripe: int, pages: int, block: int | None = None) -> np.ndarray:
    """The page type of every logical page after a sequential fill: page p is on unit (p / chunk) mod stripe
    at place k of its write order, whose type is the pattern at k (restarting every ``block`` places)."""
    _, k = la.unit_index(np.arange(pages), chunk_pages, stripe)
    cycle = np.asarray(cycle)
    place = k % block if block else k
    return cycle[place % len(cycle)]


def composite(opening: int, cycle, block: int) -> list[int]:
    return [L] * opening + list(np.resize(cycle, block - opening))


# ---- analysis on synthetic latencies ----------------------------------------------------------------------


def test_latency_levels_count_page_types_and_drop_outliers():
    rng = np.random.default_rng(3)
    slc = 60 + rng.normal(0, 0.3, 5000)
    assert la.latency_levels(slc)[0].cell == "slc"
    assert la.latency_levels(np.full(100, 60.0))[0].cell == "slc"
    mlc = np.where(rng.random(5000) < 2 / 3, 60.0, 100.0) + rng.normal(0, 0.5, 5000)
    mlc[::200] = 10.0  # 0.5 % read-buffer hits: not a page type
    best = la.latency_levels(mlc)[0]
    assert best.cell == "mlc" and best.confidence > 0.8
    assert np.all(best.codes[::200] == -1)
    tlc = rng.choice([45.0, 55.0, 70.0], 20000) + rng.normal(0, 0.4, 20000)  # more than Jenks is given
    assert la.latency_levels(tlc)[0].cell == "tlc"


@pytest.mark.parametrize(
    ("cycle", "chunk_pages", "stripe", "block", "pattern"),
    [
        ([L, M, H], 4, 32, 1536, "1L 1M 1H"),
        ([L, L, L, L, H, H], 1, 124, 256, "4L 2H"),  # 256 places end in the middle of a cycle
        ([L] * 4 + [H] * 4, 1, 64, 256, "4L 4H"),
        ([L, H], 32, 122, 256, "1L 1H"),
        (composite(32, [M, M, H, H], 256), 16, 186, None, "128KiB:L, 2M 2H"),
    ],
)
def test_the_pattern_in_a_units_write_order(cycle, chunk_pages, stripe, block, pattern):
    pages = 60000
    codes = logical_codes(cycle, chunk_pages, stripe, pages, block)
    letters = la.level_letters(len(np.unique(codes)))
    codes = np.searchsorted(np.unique(codes), codes)  # levels present, lowest first
    sequence = la.unit_sequence(np.arange(pages), codes, chunk_pages, stripe)
    assert la.render_pattern(sequence, letters, 4096) == pattern


def test_chunk_and_stripe_read_off_the_page_sequence_when_they_show():
    codes = logical_codes([L, M, H], 4, 32, 16384)
    assert la.estimate_geometry(codes) == (4, 32)
    # A long low-page opening hides the rows: no guess rather than a wrong one.
    assert la.estimate_geometry(logical_codes(composite(32, [M, M, H, H], 256), 16, 186, 16384)) is None


def pairs(stripe: int, *, channels: int = 0, n: int = 20000, window: int = 1024, seed: int = 1):
    """Synthetic P4 pairs: two reads at random chunks; one unit doubles the pair's latency, one channel adds
    a transfer; page types add their spread."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, window, n), rng.integers(0, window, n)
    increment = np.abs(a - b)
    first = rng.choice([60e3, 80e3, 100e3], n)
    latency = first + rng.choice([0.0, 20e3, 40e3], n) * (rng.random(n) < 0.5) + 1.5e3
    if channels:
        latency = np.where(increment % channels == 0, first + 8e3, latency)
    latency = np.where(increment % stripe == 0, 2 * first + 5e3, latency)
    return increment, latency, first


def test_stripe_width_from_pairs_of_concurrent_reads():
    reading = la.stripe_from_pairs(*pairs(124, channels=16))
    assert reading.value == 124 and reading.confirmed and reading.confidence > 0.8
    assert set(reading.abnormal) >= {124, 248, 372}


def test_a_stripe_beyond_the_window_or_a_single_unit():
    increment, latency, first = pairs(5000)  # no increment inside the window is a multiple
    beyond = la.stripe_from_pairs(increment, latency, first)
    assert beyond.value is None or not beyond.confirmed  # at most one noisy increment: look wider
    increment, latency, first = pairs(1)  # every pair queues on the one unit
    one = la.stripe_from_pairs(increment, latency, first)
    assert one.value == 1 and one.confirmed


def test_a_contention_level_split_by_page_types_is_read_as_one():
    # Same-unit increments at two levels (low+low and high+high pages): the top class alone would give 90.
    positions = np.arange(0, 512)
    values = np.full(len(positions), 113.0)
    values[positions % 30 == 0] = 169.0
    values[[300, 390]] = 209.0
    values[[7, 99, 211]] = 83.0
    best = la.interval_readings(positions, values, min_contrast=1.15)[0]
    assert best.value == 30 and best.fit > 0.9


def test_channels_from_completion_gaps():
    rng = np.random.default_rng(2)
    distance = rng.integers(1, 124, 4000)
    gap = np.where(distance % 16 == 0, 7.7e3, 1.4e3) + rng.normal(0, 100, len(distance))
    reading = la.channels_from_gaps(distance, gap, 124)
    assert reading.found and reading.layout == {"channels": 16, "chips_per_channel": 8}
    flat = la.channels_from_gaps(rng.integers(1, 8, 400), np.full(400, 14.9e3), 8)
    assert not flat.found and flat.layout == {"channels": 8, "chips_per_channel": 1}


# ---- the probes on simulated devices ----------------------------------------------------------------------

SMALL_TLC = """
[device]
name = "small-tlc"
kind = "ssd"
capacity = "512MiB"
over_provisioning = 0.15

[geometry]
channels = 4
chips_per_channel = 4
page_size = "4KiB"
pages_per_block = 96

[mapping]
chunk_size = "8KiB"
stripe_width = 14

[nand]
cell = "tlc"
page_pattern = "2L 1M 1H"
read_latency = {{ L = "40us", M = "60us", H = "80us" }}
program_latency = {{ L = "300us", M = "900us", H = "1500us" }}
erase_latency = "3ms"
channel_rate = "400MB/s"

[write_buffer]
capacity = "1MiB"
parallelism = 2
idle_flush_window = "10ms"

[slc_cache]
capacity = "{slc}"
fold_rate = "2MB/s"

[quirks]
low_load_penalty = "{penalty}"
"""


def probe_layout(device: SimDevice, directory: Path) -> tuple[dict[str, Answer], dict]:
    """P2, P4 and P5 as the runner would run them on a refilled device, with P1 and P3 from the truth."""
    truth = ground_truth(device.config_toml)
    ctx = Context(device, raw_dir=directory / "raw", writes=True)
    span = ctx.span(4 << 30)
    ctx.precondition("purge", span)
    ctx.precondition("sequential-fill", span)
    known = {pid: Answer(truth[pid], 1.0, "test") for pid in ("P1", "P3")}
    for pid in probes.parse_properties("P2,P4,P5"):
        if pid not in known:  # the runner's order: P4 before P2, which reads its pattern with P3 and P4
            known[pid] = probes.PROBES[pid].run(ctx, known, directory)
    return known, truth


@pytest.mark.parametrize("preset", ["consumer-tlc-dram", "kelpie-n2t-i", "kelpie-a960g-ps", "kelpie-t64g-i"])
def test_layout_probes_find_the_truth_of_presets(preset, tmp_path):
    known, truth = probe_layout(SimDevice.open(preset), tmp_path)
    for pid in ("P2", "P4", "P5"):
        assert matches(pid, known[pid].value, truth[pid]), f"{pid}: {known[pid].value} vs {truth[pid]}"
        assert known[pid].figures and known[pid].figures[0].exists()
        assert known[pid].raw is not None and len(known[pid].raw)
    # With P3's chunk and P4's stripe, P2's pattern is the unit's write order, exactly as configured.
    assert known["P2"].value["pattern"] == truth["P2"]["pattern"]
    assert known["P4"].value == truth["P4"]


@pytest.mark.parametrize(("slc", "penalty"), [("0B", "15us"), ("256MiB", "0us")])
def test_layout_probes_on_a_small_tlc_device(tmp_path, slc, penalty):
    """Stripe 14 of 16 units (not a multiple of the 4 channels); with a low-load penalty P5 (pairs, on this
    noise-free drive) takes its pairs from batches of three; with an SLC cache that folds slowly P2 first sees
    one level and waits."""
    path = tmp_path / "small.toml"
    path.write_text(SMALL_TLC.format(slc=slc, penalty=penalty))
    known, truth = probe_layout(SimDevice.open(str(path)), tmp_path)
    assert known["P2"].value == {"cell": "tlc", "pattern": "2L 1M 1H"}
    assert known["P4"].value == 14
    assert known["P5"].value == {"channels": 4, "chips_per_channel": 4}
    if penalty != "0us":
        assert (known["P5"].raw["batch_size"] == 3).all()


def test_the_layout_probes_are_registered_for_a_refilled_device():
    for pid, depends in (("P2", ("P1", "P3", "P4")), ("P4", ("P1", "P3")), ("P5", ("P1", "P3", "P4"))):
        probe = probes.PROBES[pid]
        assert probe.needs == REFILLED and probe.depends_on == depends
    assert probes.parse_properties("P5") == ["P1", "P3", "P4", "P5"]
    assert probes.parse_properties("P2,P5") == ["P1", "P3", "P4", "P2", "P5"]


def test_stripe_width_one_needs_no_measurement(tmp_path):
    device = SimDevice.open("kelpie-t64g-s")
    ctx = Context(device, raw_dir=tmp_path, writes=True)
    before = ctx.device_time_ns
    answer = lp.run_channel_layout(ctx, {"P1": Answer(16384, 1.0, "t"), "P3": Answer(16384, 1.0, "t"),
                                         "P4": Answer(1, 1.0, "t")}, tmp_path)
    assert answer.value == {"channels": 1, "chips_per_channel": 1} and ctx.device_time_ns == before
