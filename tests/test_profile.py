"""`ftlscope profile` end to end (issue 6's done-when): two simulated presets profiled with the quick suite,
compared, re-rendered and exported; the report's figures exist and are embedded, every guidance line cites a
number present in the findings, and the store holds both runs. Where Chromium is installed the report is opened
headless and must show no console error."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from browser import find_chromium, open_headless

from ftlscope.cli import main

PRESETS = ("consumer-tlc-dram", "consumer-tlc-hmb")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> dict:
    """Profile the two presets once for every test of this module (about 20 s of wall time each)."""
    root = tmp_path_factory.mktemp("profiles")
    db = root / "runs.sqlite"
    directories = {}
    for preset in PRESETS:
        out = root / preset
        spec = ["--spec", "seq_read=2000MB/s,qd1_read_latency=20us"] if preset == PRESETS[0] else []
        assert main(["profile", f"sim:{preset}", "--out", str(out), "--db", str(db), "--quiet", *spec]) == 0
        directories[preset] = out
    return {"root": root, "db": db, "dirs": directories}


def _record(directory: Path) -> dict:
    return json.loads((directory / "profile.json").read_text())


def _findings_values(record: dict) -> dict[tuple[str, str], object]:
    values: dict[tuple[str, str], object] = {}
    for entry in record["experiments"]:
        for name, found in entry["findings"].items():
            values[(entry["name"], name)] = found["value"]
    for pid, answer in (record["probes"] or {}).get("properties", {}).items():
        values[("probes", pid)] = answer["value"]
    return values


def test_profile_writes_report_record_and_parts(profiled):
    for preset, directory in profiled["dirs"].items():
        record = _record(directory)
        assert record["completed"] and record["suite"] == "quick"
        assert record["target"]["name"] == f"sim:{preset}"
        assert record["health_before"] is not None and record["health_after"]["host_bytes_written"] > 0
        assert set(record["probes"]["properties"]) == {f"P{i}" for i in range(1, 11)}
        assert [e["name"] for e in record["experiments"]] == [
            "bs-sweep", "qd-sweep", "alignment", "qd1-baseline", "corners", "seq-write-over-time"]
        for entry in record["experiments"]:
            assert (directory / entry["results"]).is_file()
            assert (directory / entry["directory"] / "findings.json").is_file()
        for name in ("report.html", "report.md", "profile.json"):
            assert (directory / name).stat().st_size > 0
        # The summary card carries the measured figures (not placeholders) the issue lists.
        card = {row["key"]: row for row in record["card"]}
        for key in ("qd1_read_latency", "random_read_iops", "random_write_iops", "seq_read", "seq_write",
                    "write_cliff", "write_buffer", "flush_window", "page_size"):
            assert card[key]["value"] is not None, key


def test_every_figure_the_reports_reference_exists_and_html_embeds_them(profiled):
    for directory in profiled["dirs"].values():
        record = _record(directory)
        html = (directory / "report.html").read_text()
        sources = re.findall(r'<img src="([^"]+)"', html)
        figures = [p for e in record["experiments"] for p in e["figures"]] + [
            p for a in record["probes"]["properties"].values() for p in a["figures"]]
        assert figures and len(sources) == len(figures)
        assert all(src.startswith("data:image/png;base64,") for src in sources)
        assert not re.search(r'(src|href)="(https?:)?//', html), "the report must not fetch anything"
        markdown = (directory / "report.md").read_text()
        linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
        assert linked and all((directory / path).is_file() for path in linked)
        assert all((directory / path).is_file() for path in figures)


def test_every_guidance_line_cites_a_number_present_in_the_findings(profiled):
    for directory in profiled["dirs"].values():
        record = _record(directory)
        values = _findings_values(record)
        assert len(record["guidance"]) >= 5
        for advice in record["guidance"]:
            assert advice["evidence"], advice["rule"]
            cited_numbers = 0
            for evidence in advice["evidence"]:
                assert values[(evidence["source"], evidence["finding"])] == evidence["value"], advice["rule"]
                assert evidence["display"] in advice["text"], (advice["rule"], evidence["display"])
                cited_numbers += isinstance(evidence["value"], int | float) and not isinstance(evidence["value"], bool)
            assert cited_numbers, f"{advice['rule']} cites no number"
        html = (directory / "report.html").read_text()
        for advice in record["guidance"]:
            assert advice["topic"] in html


def test_spec_figures_are_checked(profiled):
    card = {row["key"]: row for row in _record(profiled["dirs"][PRESETS[0]])["card"]}
    assert card["seq_read"]["spec"]["value"] == pytest.approx(2000)
    assert card["seq_read"]["meets_spec"] is (card["seq_read"]["value"] >= 1800)
    assert card["qd1_read_latency"]["meets_spec"] is (card["qd1_read_latency"]["value"] <= 22)
    assert card["random_read_iops"]["meets_spec"] is None


def test_store_holds_both_runs_and_lists_them(profiled, capsys):
    with sqlite3.connect(profiled["db"]) as conn:
        targets = sorted(row[0] for row in conn.execute("SELECT target_name FROM runs"))
        knees = conn.execute("SELECT count(*) FROM findings WHERE name = 'knee_qd' OR name = 'peak_iops'").fetchone()
        properties = conn.execute("SELECT count(*) FROM properties").fetchone()[0]
    assert targets == [f"sim:{p}" for p in sorted(PRESETS)]
    assert knees[0] >= 2 and properties == 20
    assert main(["runs", "--db", str(profiled["db"])]) == 0
    listed = capsys.readouterr().out
    assert all(preset in listed for preset in PRESETS)


def test_compare_overlays_the_curves_of_both_runs(profiled):
    out = profiled["root"] / "compare"
    assert main(["compare", "-1", "-2", "--db", str(profiled["db"]), "--out", str(out)]) == 0
    for name in ("compare.html", "compare.md", "compare_qd_sweep.png", "compare_bs_sweep.png",
                 "compare_seq_write.png"):
        assert (out / name).stat().st_size > 0, name
    html = (out / "compare.html").read_text()
    assert all(preset in html for preset in PRESETS)
    assert html.count('<img src="data:image/png;base64,') == 3
    assert "P4 stripe width" in html


def test_report_rerenders_from_the_store_without_the_device(profiled, tmp_path):
    directory = profiled["dirs"][PRESETS[1]]
    run_id = _record(directory)["run_id"]
    (directory / "report.html").unlink()
    assert main(["report", run_id, "--db", str(profiled["db"])]) == 0
    assert (directory / "report.html").is_file()
    # Rendering elsewhere: figures are still embedded from the run's directory, and Markdown links reach them.
    elsewhere = tmp_path / "elsewhere"
    assert main(["report", run_id[:12] + run_id[12:], "--db", str(profiled["db"]), "--out", str(elsewhere)]) == 0
    markdown = (elsewhere / "report.md").read_text()
    assert all((elsewhere / p).is_file() for p in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown))


def test_export_writes_parquet_a_user_can_read(profiled, tmp_path):
    out = tmp_path / "parquet"
    assert main(["export", "-1", "-2", "--db", str(profiled["db"]), "--parquet", str(out)]) == 0
    findings = pd.read_parquet(out / "findings.parquet")
    assert set(findings["run_id"]) == {_record(d)["run_id"] for d in profiled["dirs"].values()}
    qd = pd.read_parquet(out / "results_qd-sweep.parquet")
    assert {"run_id", "qd", "iops"} <= set(qd.columns)


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium installed")
def test_report_opens_in_headless_chromium_without_console_errors(profiled):
    directory = profiled["dirs"][PRESETS[0]]
    for mobile, (width, height) in ((False, (1280, 900)), (True, (390, 844))):
        shot = profiled["root"] / f"report-{width}.png"
        result = open_headless(directory / "report.html", shot, width, height, mobile=mobile)
        assert result.console_errors == []
        assert result.requests == []
        assert shot.stat().st_size > 10_000


def test_every_figure_opens_full_size_when_tapped(profiled):
    # A checkbox inside a label around each image holds the zoomed state (CSS only: the page allows no script).
    pages = [profiled["dirs"][PRESETS[0]] / "report.html"]
    out = profiled["root"] / "compare-zoom"
    assert main(["compare", "-1", "-2", "--db", str(profiled["db"]), "--out", str(out)]) == 0
    pages.append(out / "compare.html")
    for page in pages:
        html = page.read_text()
        images = re.findall(r"<img [^>]*>", html)
        assert images, page
        zoomable = re.findall(r'<label class="zoom"><input type="checkbox"[^>]*><img [^>]*></label>', html)
        assert len(zoomable) == len(images), page
        assert ".zoom input:checked + img" in html and "position: fixed" in html
