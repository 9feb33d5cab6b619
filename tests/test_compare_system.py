"""``ftlscope compare`` on system-suite profiles: the system experiments' figures side by side and the guidance
on which drive suits which workload. Rules on synthetic records (a premise that fails keeps its sentence silent;
every sentence agrees with what it cites), then a small simulated SSD and hard disk profiled through the kernel
(root and FUSE only; skipped with the reason elsewhere)."""

from __future__ import annotations

import os
import shutil

import pytest

from ftlscope.profile.runner import finish, profile
from ftlscope.profile.suites import Step, Suite
from ftlscope.report.compare import render_compare
from ftlscope.report.compare_guidance import build_compare_guidance
from ftlscope.report.cost import price_of

GB = 10**9


def _finding(value, unit):
    return {"value": value, "unit": unit, "evidence": "synthetic"}


def _record(name: str, *, fs: dict[str, float] | None = None, zoning: float | None = None,
            video: tuple[int, int | None, float | None] | None = None, spread: float | None = None,
            price: str | None = None, rotational: bool = False) -> dict:
    experiments = []
    if fs is not None:
        experiments.append({"name": "fs-impact", "params": {"random_size": 4096}, "figures": [],
                            "findings": {f"{op}_best_mb_s": _finding(v, "MB/s") for op, v in fs.items()}})
    if zoning is not None:
        experiments.append({"name": "zoning", "params": {}, "figures": [], "findings": {
            "outer_mb_s": _finding(200.0, "MB/s"), "inner_mb_s": _finding(200.0 * zoning, "MB/s"),
            "inner_to_outer_ratio": _finding(zoning, "ratio")}})
    if video is not None:
        served, missed, std = video
        findings = {"rate_mb_s": _finding(1.0, "MB/s"), "max_clients_served": _finding(served, "clients")}
        if missed is not None:
            findings |= {"first_clients_missed": _finding(missed, "clients"),
                         "missed_std_mb_s": _finding(std, "MB/s"), "missed_min_mb_s": _finding(0.4, "MB/s")}
        experiments.append({"name": "video-streaming", "params": {}, "figures": [], "findings": findings})
    if spread is not None:
        experiments.append({"name": "scheduler-impact", "params": {}, "figures": [], "findings": {
            "scheduler_spread_max": _finding(spread, "ratio")}})
    record = {"target": {"name": name, "size_bytes": 500 * GB, "rotational": rotational}, "experiments": experiments}
    record["price"] = price_of(record, price, None) if price else None
    return record


def _fs_finding(record: dict, key: str) -> float:
    (fs,) = (e for e in record["experiments"] if e["name"] == "fs-impact")
    return fs["findings"][key]["value"]


def _rules(a: dict, b: dict) -> dict[str, dict]:
    return {advice["rule"]: advice for advice in build_compare_guidance([("SSD", a), ("DISK", b)])}


def test_a_clear_winner_is_named_and_agrees_with_what_it_cites():
    rules = _rules(_record("ssd", fs={"random_read": 240.0, "sequential_read": 500.0}),
                   _record("disk", fs={"random_read": 0.6, "sequential_read": 180.0}))
    advice = rules["random-reads"]
    assert advice["text"].startswith("SSD suits random reads")
    ssd, disk = advice["evidence"]
    assert (ssd["run"], disk["run"]) == ("SSD", "DISK") and ssd["value"] >= 1.5 * disk["value"]
    assert ssd["display"] in advice["text"] and disk["display"] in advice["text"]
    assert "sequential-reads" in rules and "sequential-reads-alike" not in rules


def test_a_premise_that_fails_keeps_the_sentence_silent():
    # random reads within 1.5x: no drive "suits" them better; sequential reads alike: the alike rule speaks
    rules = _rules(_record("a", fs={"random_read": 100.0, "sequential_read": 180.0}, zoning=0.98,
                           video=(64, None, None), spread=1.05),
                   _record("b", fs={"random_read": 90.0, "sequential_read": 170.0}, zoning=0.97,
                           video=(32, None, None), spread=1.1))
    assert "random-reads" not in rules
    assert "sequential-reads" not in rules and "sequential-reads-alike" in rules
    assert "zoning" not in rules  # neither drive is zoned
    assert "video-clients" not in rules  # neither reached its limit: which serves more is unknown
    assert "schedulers" not in rules  # the scheduler changed little on either drive
    assert "cost" not in rules  # no price given
    assert "video-overload" not in rules
    # a flash drive whose reads vary across the range (unwritten space) is not a zoned disk
    rules = _rules(_record("ssd", zoning=0.2), _record("disk", zoning=1.02, rotational=True))
    assert "zoning" not in rules


def test_zoning_streaming_and_cost_rules():
    rules = _rules(_record("ssd", fs={"random_read": 200.0, "sequential_read": 500.0}, zoning=0.99,
                           video=(256, None, None), price="100EUR"),
                   _record("disk", fs={"random_read": 0.5, "sequential_read": 150.0}, zoning=0.55,
                           video=(48, 64, 0.3), price="50EUR", rotational=True))
    assert rules["zoning"]["text"].startswith("Where data lies matters on the hard disk DISK and not on SSD")
    video = rules["video-clients"]
    assert video["text"].startswith("SSD suits serving many streams: at least 256 clients")
    cost = rules["cost"]
    # 50 EUR for 500 GB is 0.10 EUR per GB: the disk is cheaper per GB, the SSD per random read IOPS
    assert "per GB DISK is cheaper (0.10 EUR" in cost["text"]
    assert "per 1,000 random read IOPS SSD is cheaper" in cost["text"]
    assert any(e["finding"] == "random_read_best_mb_s" for e in cost["evidence"])


@pytest.fixture(scope="module")
def system_pair(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the system suite makes file systems and attaches drives: it needs root")
    if not os.path.exists("/dev/fuse") or not os.path.exists("/dev/loop-control"):
        pytest.skip("attaching a simulated drive needs /dev/fuse and loop devices")
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 not installed (Debian package e2fsprogs)")
    # The system suite at small sizes: one file system, two schedulers, two steps of clients.
    suite = Suite("system", "the system suite, small", probes=False, steps=(
        Step("zoning", {"positions": "3", "region": "16MiB", "runtime": "200ms", "random_runtime": "300ms",
                        "warmup": "0", "span": "1GiB"}),
        Step("fs-impact", {"filesystems": "ext4", "span": "16MiB", "runtime": "300ms", "warmup": "0",
                           "attach_size": "128MiB"}),
        Step("scheduler-impact", {"schedulers": "none,mq-deadline", "span": "16MiB", "runtime": "200ms",
                                  "random_write_bytes": "256KiB",
                                  "warmup": "0", "attach_size": "64MiB"}),
        Step("video-streaming", {"clients": "16,128", "span": "256MiB", "runtime": "2s", "warmup": "1s",
                                 "attach_size": "1GiB"}),
    ))
    root = tmp_path_factory.mktemp("system-pair")
    runs = []
    for preset in ("consumer-tlc-dram", "hdd-7200-consumer"):
        outcome = profile(f"sim:{preset}", suite=suite, out=root / preset)
        finish(outcome, db=root / "runs.sqlite")
        assert outcome.error is None, outcome.error
        runs.append((outcome.record, outcome.directory))
    return root, runs


def test_compare_shows_the_system_figures_and_says_which_drive_suits_what(system_pair):
    root, runs = system_pair
    for record, _ in runs:
        assert all(e["completed"] for e in record["experiments"]), record["notes"]
    runs = [({**record, "price": price_of(record, price, None)}, directory)
            for (record, directory), price in zip(runs, ("60EUR", "40EUR"), strict=True)]
    out = root / "compare"
    paths = {p.name for p in render_compare(runs, out)}
    assert {"compare.html", "compare.md", "compare_fs_impact.png", "compare_zoning.png",
            "compare_scheduler_impact.png", "compare_video_streaming.png"} <= paths
    ssd, disk = (f"{r['target']['model'].removeprefix('simulated ')}" for r, _ in runs)
    rules = {a["rule"]: a for a in build_compare_guidance([(ssd, runs[0][0]), (disk, runs[1][0])])}
    # the check: the SSD's random reads at least 5x the disk's, and the guidance says so. The guidance
    # cites the wall clock (what a program gets), where the FUSE/loop path on a machine loaded by other tests
    # can take most of an SSD read's time (4.97x seen at load 15); the drives' own times keep the 5x.
    reads = rules["random-reads"]
    assert reads["text"].startswith(f"{ssd} suits random reads")
    assert reads["evidence"][0]["value"] >= 1.5 * reads["evidence"][1]["value"]
    drive = [_fs_finding(record, "random_read_best_drive_mb_s") for record, _ in runs]
    assert drive[0] >= 5 * drive[1], drive
    assert rules["video-clients"]["text"].startswith(f"{ssd} suits serving many streams")
    assert "cost" in rules
    markdown = (out / "compare.md").read_text()
    assert "## Which drive for which workload" in markdown and "suits random reads" in markdown
