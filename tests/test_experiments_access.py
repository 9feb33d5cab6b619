"""The access-pattern experiments of seed 000 (parallelism, locality, permuted-reads, alignment) recover what the
simulated devices were built with, read from their TOML: saturation at about channels x chips requests in
flight, shuffled reads keeping up from one full stripe, no reordering, a penalty for offsets below the page
size and none from it. The read-only ones also run on a regular file. Small spans and few requests per point
keep every run to a second or two of wall time."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import simdevices

from ftlscope.errors import UsageError
from ftlscope.experiments import get, run_experiment
from ftlscope.units import parse_size

KiB, MiB = 1 << 10, 1 << 20
PRESET = "sim:consumer-tlc-dram"
PAGE = 4096



truth = simdevices.config


def bench(name: str, target, out, file_size: int | None = None, **params):
    outcome = run_experiment(get(name), target, out=out, size=file_size, params={k: str(v) for k, v in params.items()})
    assert outcome.completed, outcome.error
    saved = json.loads((outcome.directory / "findings.json").read_text())
    assert set(saved) == set(outcome.findings)
    assert outcome.figures and all(p.exists() for p in outcome.figures)
    return outcome


def value(outcome, key: str):
    return outcome.findings[key]["value"]


def test_parallelism_saturates_at_the_parallel_units_and_a_random_fill_lowers_the_peak(tmp_path):
    cfg = truth(PRESET)
    geometry = cfg["geometry"]
    units = geometry["channels"] * geometry["chips_per_channel"] * geometry.get("planes_per_chip", 1)
    chunk_blocks = parse_size(cfg["mapping"]["chunk_size"]) // PAGE  # a chunk-sized read keeps one unit busy
    outcome = bench("parallelism", PRESET, tmp_path, span="256MiB", queues="1,2", qds="1,4,16,64",
                    blocks=f"1,{chunk_blocks}", ops=3000)
    table = outcome.table
    assert set(table["phase"]) == {"sequential-fill", "random-fill"} and len(table) == 2 * 2 * 4 * 2
    # After a sequential fill, consecutive chunks sit on consecutive units: throughput of chunk-sized reads
    # keeps growing until every unit has one (units requests in flight; the grid's nearest counts are 16/32/64).
    saturation = value(outcome, f"saturation_outstanding_sequential_fill_{chunk_blocks}blk")
    assert units / 2 < saturation <= 2 * units
    # ... so one queue deep enough gets there: more queues add nothing (the seed's §5.1 conclusion).
    assert value(outcome, "multi_queue_gain_sequential_fill") < 1.05
    # A random fill scatters the chunks, so concurrent reads collide on units and the peak drops (§5.2) ...
    assert value(outcome, "random_to_sequential_fill_peak_ratio") < 0.95
    # ... while one lone page read costs the same wherever the page lies.
    lone = table[(table["queues"] == 1) & (table["qd"] == 1) & (table["blocks"] == 1)].set_index("phase")["mb_s"]
    assert lone["random-fill"] == pytest.approx(lone["sequential-fill"], rel=0.1)


def test_parallelism_refuses_an_unknown_phase(tmp_path):
    outcome = run_experiment(get("parallelism"), PRESET, out=tmp_path,
                             params={"span": "64MiB", "phases": "sequential-fill,trimmed"})
    assert isinstance(outcome.error, UsageError)
    assert outcome.error.message.startswith("--param phases: unknown phase 'trimmed'")


def test_locality_shuffled_reads_keep_up_from_one_full_stripe(tmp_path):
    cfg = truth(PRESET)
    chunk = parse_size(cfg["mapping"]["chunk_size"])
    stripe = cfg["mapping"]["stripe_width"] * chunk
    outcome = bench("locality", PRESET, tmp_path, span="256MiB", min_size="4KiB", max_size="1MiB", max_ops=2000)
    assert sorted(outcome.table["size"].unique()) == [4 * KiB << i for i in range(9)]
    # A request covering the whole stripe keeps every unit equally busy in any order; smaller shuffled requests
    # land on random units and collide, where sequential ones take the units in turn.
    assert value(outcome, "shuffled_matches_sequential_from_bytes") == stripe
    assert value(outcome, "max_sequential_to_shuffled_ratio") > 1.1
    assert "sequential_to_shuffled_ratio_4k" in outcome.findings


def test_permuted_reads_cost_what_sequential_ones_do_on_a_device_that_does_not_reorder(tmp_path):
    cfg = truth(PRESET)
    chunk_pages = parse_size(cfg["mapping"]["chunk_size"]) // parse_size(cfg["geometry"]["page_size"])
    outcome = bench("permuted-reads", PRESET, tmp_path, span="256MiB", windows="2,4", ops=4000)
    assert set(outcome.table["pattern"]) == {"sequential", "permuted", "random"}
    assert list(outcome.table.drop_duplicates("permutation_window")["qd"]) == [4, 8]
    for window in (2, 4):
        # The simulated controller serves each unit's queue in arrival order: which pages are in flight decides
        # the throughput, not their order, and a window keeps the same pages in flight as sequential reads.
        assert value(outcome, f"permuted_to_sequential_w{window}") == pytest.approx(1.0, abs=0.15)
        assert value(outcome, f"permuted_position_w{window}") > 0.5
        # With several pages per chunk, consecutive small reads queue on one unit; random ones spread.
        if chunk_pages > 1:
            assert value(outcome, f"permuted_to_random_w{window}") < 1.0


@pytest.mark.parametrize("device", ["preset", "page16k"])
def test_alignment_costs_below_the_page_size_and_not_from_it(tmp_path, device):
    if device == "preset":
        target = PRESET
    else:
        # A small SSD whose flash page is 16 KiB (the default preset's is 4 KiB).
        target = simdevices.small_ssd(
            tmp_path, "page16k", device={"capacity": "512MiB"}, geometry={"page_size": "16KiB"},
            mapping={"chunk_size": "32KiB"}, write_buffer={"capacity": "1MiB"},
        )
    page = parse_size(truth(target)["geometry"]["page_size"])
    outcome = bench("alignment", target, tmp_path / "out", span="256MiB", size="64KiB", qd=16, max_ops=1500)
    assert list(outcome.table["offset_bytes"]) == [0] + [512 << i for i in range(7)]  # 512 B .. 32 KiB
    # A read shifted by less than a page straddles one more page than an aligned one; shifted by whole pages,
    # it reads as many pages as aligned.
    assert value(outcome, "aligned_from_bytes") == page
    assert value(outcome, "misaligned_penalty_pct") > get("alignment").defaults()["tolerance"]
    assert value(outcome, "worst_penalty_pct") > 5


FILE_RUNS = {
    "locality": {"span": "16MiB", "min_size": "4KiB", "max_size": "64KiB", "max_ops": 300},
    "permuted-reads": {"span": "16MiB", "windows": "2", "ops": 300},
    "alignment": {"span": "16MiB", "size": "64KiB", "min_offset": "4KiB", "qd": 4, "max_ops": 200},
}
FILE_FINDINGS = {
    "locality": {"shuffled_matches_sequential_from_bytes", "sequential_to_shuffled_ratio_4k"},
    "permuted-reads": {"permuted_to_sequential_w2", "permuted_to_random_w2"},
    "alignment": {"aligned_iops", "aligned_from_bytes", "worst_penalty_pct"},
}


@pytest.mark.parametrize("name", sorted(FILE_RUNS))
def test_the_read_only_ones_run_on_a_regular_file(scratch, tmp_path, name):
    outcome = bench(name, str(scratch / "target.img"), tmp_path, file_size=32 * MiB, **FILE_RUNS[name])
    assert FILE_FINDINGS[name] <= set(outcome.findings)
    table = pd.read_csv(outcome.directory / "results.csv")
    assert (table["iops"] > 0).all() and (table["n"] == 1).all()
    conditions = json.loads((outcome.directory / "experiment.json").read_text())
    assert conditions["target"]["kind"] == "regular_file" and not conditions["writes"]
