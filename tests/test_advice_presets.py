"""The report's words on real profiles of every kind of preset (flash with DRAM, DRAM-less flash, a hard disk,
an Optane-like drive): every sentence of the guidance, the card and the experiment sections must read as a
measurement, not a broken template — no "grows" with a ratio below 1, no bare "1x", no e-notation, no knee
compared with a queue that is not shallower — and every guidance line must agree with what it cites.

The profiles run a shortened quick suite (the same steps, shorter points) once for the whole module."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from ftlscope.profile.runner import finish, profile
from ftlscope.profile.suites import QUICK, Step, Suite
from ftlscope.report.card import build_card, corner_rows
from ftlscope.report.facts import Facts
from ftlscope.report.guidance import TAIL_FACTOR
from ftlscope.report.sentences import sentence

PRESETS = ("consumer-tlc-dram", "hdd-7200-consumer", "optane-like", "consumer-tlc-hmb")
_FAST = {"runtime": "100ms", "warmup": "20ms"}
_SPAN = str(1 << 30)
# The quick suite's steps at shorter points; seq-write-over-time still runs long enough to pass the default
# drive's SLC cache (13 GB at 1.4 GB/s) and the hard disk's write cache. The probes (most of a profile's time)
# run where the rules that read them differ: a drive with a write buffer and one without.
PROBED = ("consumer-tlc-dram", "optane-like")
SUITE = Suite("quick", QUICK.summary, probes=True, steps=(
    Step("bs-sweep", {**_FAST, "span": _SPAN}),
    Step("qd-sweep", {**_FAST, "span": _SPAN}),
    Step("alignment", {"span": _SPAN, "runtime": "200ms"}),
    Step("zoning", {"runtime": "200ms", "random_runtime": "500ms", "warmup": "50ms"}, rotational_only=True),
    Step("qd1-baseline", {"runtime": "300ms", "warmup": "100ms", "span": _SPAN}),
    Step("corners", {"runtime": "200ms", "warmup": "50ms", "span": str(256 << 20)}),
    Step("seq-write-over-time", {"runtime": "15s"}),
))


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> dict[str, tuple[dict, Path]]:
    root = tmp_path_factory.mktemp("advice")
    out = {}
    for preset in PRESETS:
        suite = SUITE if preset in PROBED else Suite(SUITE.name, SUITE.summary, False, SUITE.steps)
        outcome = profile(f"sim:{preset}", suite=suite, out=root / preset)
        finish(outcome, store=False)
        assert outcome.error is None, outcome.error
        out[preset] = (json.loads((outcome.directory / "profile.json").read_text()), outcome.directory)
    return out


def _texts(record: dict) -> list[tuple[str, str]]:
    """Every sentence a reader sees: (where, text)."""
    facts = Facts(record)
    texts = [(f"guidance {a['rule']}", a["text"]) for a in record["guidance"]]
    for row in build_card(record):
        texts.append((f"card {row['key']}", " ".join(str(row[k]) for k in ("display", "detail", "verdict") if row[k])))
    for row in corner_rows(record):
        texts.append((f"corners {row['test']}", f"{row['read']} {row['write']}"))
    for entry in record["experiments"]:
        said = sentence(facts, entry["name"])
        if said:
            texts.append((f"sentence {entry['name']}", said))
    return texts


RATIO = re.compile(r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?)x\b")


@pytest.mark.parametrize("preset", PRESETS)
def test_no_sentence_reads_as_a_broken_template(profiles, preset):
    record, _ = profiles[preset]
    for where, text in _texts(record):
        assert not re.search(r"\d[eE][+-]?\d", text), (where, text)  # no e-notation
        assert not re.search(r"(?<![\d.,])1x\b", text), (where, text)  # a ratio keeps its decimals
        if re.search(r"\bgrow", text):
            ratios = [float(r.replace(",", "")) for r in RATIO.findall(text)]
            assert all(r >= 1 for r in ratios), (where, text)
        knee = re.search(r"knee at QD (\d+).*the p99 at QD (\d+)", text)
        if knee:
            assert int(knee.group(1)) > int(knee.group(2)), (where, text)
        assert not re.search(r"seed 00\d|Newt|Kelpie|F\d_\w+", text), (where, text)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_guidance_line_agrees_with_what_it_cites(profiles, preset):
    record, directory = profiles[preset]
    findings = {(e["name"], k): v["value"] for e in record["experiments"] for k, v in e["findings"].items()}
    findings |= {("probes", pid): a["value"] for pid, a in ((record["probes"] or {}).get("properties") or {}).items()}
    assert record["guidance"], preset
    for advice in record["guidance"]:
        for evidence in advice["evidence"]:
            assert findings[(evidence["source"], evidence["finding"])] == evidence["value"], advice["rule"]
            assert evidence["display"] in advice["text"], (advice["rule"], evidence["display"])
    rules = {a["rule"]: a for a in record["guidance"]}
    sweep = pd.read_csv(directory / "experiments" / "qd-sweep" / "results.csv").set_index("qd")
    latency = rules["queue-depth-latency"]
    cited = {e["finding"]: e["value"] for e in latency["evidence"]}
    # The latency line's QD keeps p99 within 2x QD 1's, and the next deeper QD does not.
    limit = cited["latency_limit_qd"]
    assert sweep.loc[limit, "lat_p99_us"] <= 2 * sweep.loc[1, "lat_p99_us"]
    deeper = [q for q in sweep.index if q > limit]
    if deeper:
        assert sweep.loc[min(deeper), "lat_p99_us"] > 2 * sweep.loc[1, "lat_p99_us"]
    if "write-rate" in rules and "no rate limit is needed" in rules["write-rate"]["text"]:
        cited = {e["finding"]: e["value"] for e in rules["write-rate"]["evidence"]}
        assert cited["window_lat_p99_us"] <= TAIL_FACTOR * cited["window_lat_p50_us"]


def test_a_hard_disk_card_shows_a_disks_figures(profiles):
    record, _ = profiles["hdd-7200-consumer"]
    card = {row["key"]: row for row in record["card"]}
    assert not {"write_cliff", "seq_write", "page_size"} & set(card)
    zoning = next(e for e in record["experiments"] if e["name"] == "zoning")["findings"]
    # Outer zone faster than inner; access time = seek + half a rotation (8.5 ms + 4.2 ms on this preset).
    assert card["outer_seq_read"]["value"] > card["inner_seq_read"]["value"] > 0
    assert 10_000 < card["access_time"]["value"] < 16_000
    assert card["random_read_iops_qd1"]["value"] == zoning["random_read_iops_qd1"]["value"]
    assert card["random_read_iops_qd32"]["value"] > 0 and card["random_write_iops"]["value"] > 0


def test_the_report_shows_p99_9_the_corners_and_the_references(profiles):
    for preset, (_record, directory) in profiles.items():
        md = (directory / "report.md").read_text()
        assert "p99.9 µs" in md, preset
        assert "| SEQ1M Q8T1 |" in md and "| RND4K Q1T1 |" in md, preset
        assert "## References" in md and "Fantastic SSD Internals and How to Learn and Use Them" in md
        assert not re.search(r"seed 00\d|Kelpie|Newt", md), preset
    optane = {row["key"]: row for row in profiles["optane-like"][0]["card"]}
    assert optane["flush_window"]["display"] == "none (write-through)"
