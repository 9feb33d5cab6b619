"""The sweeps of seeds 001 and 004 (qd-sweep, bs-sweep, bs-sweep-write, rw-mix, deep-queue) on the default
simulated SSD with small parameters, checked against what the device was built with (its TOML), and the
read-only ones on a regular file.

Runs use no warm-up: the engine leaves out the completions of requests issued during a warm-up, which on a
100 ms run at deep queues would bias throughput low by a latency's worth; without one, the queue simply starts
full."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pandas as pd
import pytest

from ftlscope.errors import UsageError
from ftlscope.experiments import get, run_experiment
from ftlscope.sim import SimDevice
from ftlscope.units import parse_duration_ns, parse_size

PRESET = "sim:consumer-tlc-dram"
KiB, MiB = 1 << 10, 1 << 20
SMALL = {"span": "256MiB", "warmup": "0s"}


@pytest.fixture(scope="module")
def truth() -> dict:
    return tomllib.loads(SimDevice.open(PRESET).config_toml)


def _rate(text: str) -> float:
    """'800MB/s' -> bytes per second."""
    return float(parse_size(text.removesuffix("/s"), "rate"))


def _mean_read_s(nand: dict) -> float:
    """Mean sense time over the page types a unit's pages cycle through ('1L 1M 1H')."""
    weights = {}
    for token in nand["page_pattern"].split():
        weights[token[-1]] = weights.get(token[-1], 0) + int(token[:-1] or 1)
    total = sum(weights.values())
    return sum(n * parse_duration_ns(nand["read_latency"][t]) for t, n in weights.items()) / total / 1e9


def _units(truth: dict) -> int:
    g = truth["geometry"]
    return g["channels"] * g["chips_per_channel"] * g.get("planes_per_chip", 1)


def _page_time_s(truth: dict) -> float:
    """How long a unit is held per page read: the sense, then the page across its channel."""
    page = parse_size(truth["geometry"]["page_size"])
    return _mean_read_s(truth["nand"]) + page / _rate(truth["nand"]["channel_rate"])


def _outputs(outcome, figures: set[str]) -> dict:
    assert outcome.completed, outcome.error
    directory = outcome.directory
    table = pd.read_csv(directory / "results.csv")
    assert len(table) == len(outcome.table) > 0
    assert {p.name for p in outcome.figures} == figures
    assert all((directory / name).stat().st_size > 0 for name in figures)
    return json.loads((directory / "findings.json").read_text())


def _value(findings: dict, key: str):
    return findings[key]["value"]


# ---- qd-sweep --------------------------------------------------------------------------------------------


def test_qd_sweep_finds_the_knee_where_the_flash_units_saturate(tmp_path, truth):
    outcome = run_experiment(get("qd-sweep"), PRESET, out=tmp_path, params={**SMALL, "runtime": "100ms"})
    findings = _outputs(outcome, {"qd_throughput_latency.png", "qd_scaling.png", "qd_percentiles.png",
                                  "qd_tail_bars.png"})
    t = outcome.table.sort_values("qd").set_index("qd")
    units = _units(truth)  # 8 channels x 4 chips = 32 units that read in parallel
    page_s = _page_time_s(truth)

    # QD 1 is the device's own service time: command overhead, the sense, the channel and the host link.
    # A read also takes a command processor for read_command_time (the preset's cap on reads per second).
    c = truth["controller"]
    read_core_s = parse_duration_ns(c.get("read_command_time", "0us")) / 1e9 if c.get("cores", 0) else 0.0
    service_us = (parse_duration_ns(c["command_overhead"]) / 1e9 + read_core_s + page_s
                  + 4096 / _rate(c["host_rate"])) * 1e6
    assert t.loc[1, "lat_mean_us"] == pytest.approx(service_us, rel=0.02)

    # Little's law: QD / mean latency predicts the IOPS at every QD.
    assert _value(findings, "littles_law_error_pct") < 5
    lat_s = t["lat_mean_us"] / 1e6
    assert np.all(np.abs(t.index / lat_s / t["iops"] - 1) < 0.05)

    # The units and the command processors bound the throughput, and by Little's law reaching a share of the
    # peak needs that share of the peak times the lone request's service time in flight.
    peak = _value(findings, "peak_iops")
    bound = units / page_s if not read_core_s else min(units / page_s, c["cores"] / read_core_s)
    assert peak == t["iops"].max() <= bound * 1.001
    saturating = t.index[t["iops"] >= 0.8 * peak]
    assert saturating.min() >= 0.8 * peak * service_us / 1e6, "80 % of the peak needs that many requests in flight"
    practical = _value(findings, "practical_knee_qd")
    assert practical == t.index[t["iops"] >= 0.9 * peak].min() >= 0.9 * peak * service_us / 1e6
    # The knee by the seed's rule lies in the saturated range: at or beyond the practical knee, near the peak.
    knee_qd = _value(findings, "knee_qd")
    assert knee_qd is not None and knee_qd >= practical
    assert t.loc[knee_qd, "iops"] >= 0.9 * peak
    below = t.index[t.index < knee_qd].max()
    assert t.loc[knee_qd, "iops"] / t.loc[below, "iops"] - 1 < 0.05
    assert t.loc[knee_qd, "lat_mean_us"] / t.loc[below, "lat_mean_us"] - 1 > 0.20
    # The tail grows with the queue: p99 at the knee is several times p99 at QD 16.
    assert _value(findings, "p99_growth") == pytest.approx(t.loc[knee_qd, "lat_p99_us"] / t.loc[16, "lat_p99_us"])
    assert _value(findings, "p99_growth") > 2
    sla = _value(findings, "sla_max_qd")
    assert t.loc[sla, "lat_p99_us"] <= 1000 < t.loc[t.index[t.index > sla].min(), "lat_p99_us"]


@pytest.mark.parametrize(("name", "param", "value"), [
    ("qd-sweep", "qds", "1,0"), ("qd-sweep", "practical_share", "1.5"), ("bs-sweep", "saturation", "0"),
    ("bs-sweep-write", "qd", "0"), ("rw-mix", "read_shares", "70,130"), ("rw-mix", "pattern", "zigzag"),
    ("deep-queue", "qds", "64,0"),
])
def test_a_bad_parameter_is_refused_before_the_device_is_touched(tmp_path, name, param, value):
    with pytest.raises(UsageError, match=f"--param {param}: "):
        run_experiment(get(name), PRESET, out=tmp_path, params={param: value})
    assert not (tmp_path / name).exists()


def test_qd_sweep_on_a_file(scratch):
    outcome = run_experiment(get("qd-sweep"), str(scratch / "qd.img"), out=scratch / "out", size=16 * MiB,
                             params={"runtime": "50ms", "warmup": "0s", "qds": "1,4,16"})
    findings = _outputs(outcome, {"qd_throughput_latency.png", "qd_scaling.png", "qd_percentiles.png",
                                  "qd_tail_bars.png"})
    assert outcome.conditions["target"]["kind"] == "regular_file"
    assert list(outcome.table["qd"]) == [1, 4, 16] and (outcome.table["iops"] > 0).all()
    assert {"knee_qd", "practical_knee_qd", "littles_law_error_pct", "peak_iops"} <= set(findings)


# ---- bs-sweep --------------------------------------------------------------------------------------------


def test_bs_sweep_turns_bandwidth_bound_where_requests_cover_the_stripe(tmp_path, truth):
    outcome = run_experiment(get("bs-sweep"), PRESET, out=tmp_path, params={**SMALL, "runtime": "200ms"})
    findings = _outputs(outcome, {"bs_sweep.png", "bs_latency.png"})
    table = outcome.table
    assert set(table["mode"]) == {"random-read", "sequential-read"} and (table["qd"] == 32).all()

    # The read ceiling: every unit busy (sense + channel per page), unless the channels or the host link cap it.
    page = parse_size(truth["geometry"]["page_size"])
    nand, g = truth["nand"], truth["geometry"]
    ceiling = min(_units(truth) * page / _page_time_s(truth), g["channels"] * _rate(nand["channel_rate"]),
                  _rate(truth["controller"]["host_rate"])) / 1e6
    assert _value(findings, "peak_mb_s") == pytest.approx(ceiling, rel=0.03)

    # The write frontier striped the fill over the units in chunks: a request reaches every unit once it spans
    # stripe_width chunks. Random requests must each span it; 32 queued sequential ones span it together.
    stripe = truth["mapping"]["stripe_width"] * parse_size(truth["mapping"]["chunk_size"])
    assert _value(findings, "transition_bytes") == stripe
    sizes = sorted(table["size"].unique())
    assert _value(findings, "sequential_transition_bytes") == min(s for s in sizes if 32 * s >= stripe)
    for pattern, key in (("random", "transition_bytes"), ("sequential", "sequential_transition_bytes")):
        mode = table[table["pattern"] == pattern].set_index("size")["mb_s"]
        at = _value(findings, key)
        assert mode[at] >= 0.8 * ceiling  # bandwidth-bound from the transition on ...
        assert (mode[mode.index < at] < 0.8 * mode.max()).all()  # ... IOPS-bound below it
    # Latency grows with size at a fixed QD: each request carries more pages.
    random = table[table["pattern"] == "random"].sort_values("size")
    assert random["lat_mean_us"].is_monotonic_increasing


def test_bs_sweep_on_a_file(scratch):
    outcome = run_experiment(get("bs-sweep"), str(scratch / "bs.img"), out=scratch / "out", size=16 * MiB,
                             params={"runtime": "50ms", "warmup": "0s",
                                     "sizes": "4KiB,64KiB,1MiB"})
    findings = _outputs(outcome, {"bs_sweep.png", "bs_latency.png"})
    assert len(outcome.table) == 6 and (outcome.table["mb_s"] > 0).all()
    assert _value(findings, "transition_bytes") in (4 * KiB, 64 * KiB, MiB)


def test_bs_sweep_write_is_the_destructive_variant(tmp_path, truth):
    assert get("bs-sweep").writes is False and get("bs-sweep-write").writes is True
    outcome = run_experiment(get("bs-sweep-write"), PRESET, out=tmp_path,
                             params={**SMALL, "runtime": "100ms", "sizes": "4KiB,64KiB,1MiB"})
    findings = _outputs(outcome, {"bs_sweep.png", "bs_latency.png"})
    assert set(outcome.table["op"]) == {"write"} and len(outcome.table) == 6
    assert _value(findings, "peak_mb_s") <= _rate(truth["controller"]["host_rate"]) / 1e6
    assert "transition_bytes" in findings and "sequential_transition_bytes" in findings


# ---- rw-mix and deep-queue ---------------------------------------------------------------------------------


def _per_direction_consistent(table: pd.DataFrame) -> None:
    for _, row in table.iterrows():
        share = row["read_share"]
        read = row["read_iops"] if share > 0 else 0.0
        write = row["write_iops"] if share < 100 else 0.0
        # The directions the mix does not have are empty, the others add up to the totals.
        assert share > 0 or np.isnan(row["read_iops"])
        assert share < 100 or np.isnan(row["write_iops"])
        assert row["iops"] == pytest.approx(read + write)
        # The read share of the operations is the mix's, within a few points.
        assert 100 * read / (read + write) == pytest.approx(share, abs=2)
        assert row["read_share_measured"] == pytest.approx(share, abs=2)
        lat = [(row[f"{op}_ops"], row[f"{op}_lat_mean_us"]) for op, s in (("read", share), ("write", 100 - share))
               if s > 0]
        assert row["lat_mean_us"] == pytest.approx(sum(n * v for n, v in lat) / sum(n for n, _ in lat))


def test_rw_mix_reports_each_direction(tmp_path):
    outcome = run_experiment(get("rw-mix"), PRESET, out=tmp_path, params={**SMALL, "runtime": "200ms"})
    findings = _outputs(outcome, {"rw_mix_throughput.png", "rw_mix_latency.png"})
    table = outcome.table
    assert list(table["mix"]) == ["R100/W0", "R70/W30", "R50/W50", "R0/W100"]
    for op in ("read", "write"):
        for column in ("iops", "mb_s", "lat_mean_us", "lat_p50_us", "lat_p99_us"):
            assert f"{op}_{column}" in table
    _per_direction_consistent(table)
    assert _value(findings, "r70w30_iops") == pytest.approx(table.set_index("read_share").loc[70, "iops"])
    assert "r100w0_write_lat_mean_us" not in findings and "r70w30_write_lat_mean_us" in findings
    # Flushes of the buffered writes occupy the flash units the reads need: mixed-in writes delay the reads.
    for key in ("r70w30", "r50w50"):
        assert _value(findings, f"{key}_read_slowdown") > 1


def test_deep_queue_reports_each_direction_and_obeys_littles_law(tmp_path):
    params = {**SMALL, "runtime": "100ms", "sizes": "4KiB,128KiB", "qds": "64,1024", "read_shares": "100,0,50"}
    outcome = run_experiment(get("deep-queue"), PRESET, out=tmp_path, params=params)
    findings = _outputs(outcome, {"deep_queue_size.png", "deep_queue_mix.png", "deep_queue_qd.png"})
    table = outcome.table
    assert len(table) == 2 * 2 * 3
    _per_direction_consistent(table)
    # 4 KiB requests complete fast enough for a 100 ms run to hold many queue turns: L = λW holds there.
    small = table[table["size"] == 4 * KiB]
    assert np.all(np.abs(small["qd"] / (small["lat_mean_us"] / 1e6) / small["iops"] - 1) < 0.05)
    # Seed 004: sixteen times the queue buys little throughput and costs latency. By Little's law the two
    # factors multiply to the QD ratio; most of it goes into waiting.
    growth, gain = _value(findings, "qd_latency_growth"), _value(findings, "qd_throughput_gain_pct")
    assert growth > 1 + gain / 100 and growth > 4
    assert {"littles_law_error_pct", "read_to_write_latency_ratio"} <= set(findings)
