"""Table 4's notation and ftlscope's controller-limited mark in every property table (issue 16): the probe's
table (terminal and properties.md), the report (Markdown and HTML) and ``compare``, each with the legend of the
marks it shows. Synthetic answers and records: no device is run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftlscope import cli
from ftlscope.analysis import property_marks
from ftlscope.probes import notation as nt
from ftlscope.probes import runner as probe_runner
from ftlscope.probes.base import Answer
from ftlscope.probes.runner import ProbeReport, markdown_table
from ftlscope.profile import runner as profile_runner
from ftlscope.report.compare import render_compare
from ftlscope.report.render import render_report

MIB = 1 << 20
LAYOUT = {"channels": 4, "chips_per_channel": 4}
LIMITED = {"controller_limited": True, "serial_stage_us": 6.3, "seen_through": True}
CONTROLLER_LEGEND = "‡ controller-limited"


def probe_report() -> ProbeReport:
    answers = {
        "P5": Answer(LAYOUT, 0.97, "seen through", extra=dict(LIMITED)),
        "P8": Answer(int(11.5 * MIB), 0.9, "t", extra={"partial_flush": int(7.5 * MIB), "second_level": 406 * MIB}),
        "P9": Answer(4, 0.9, "t", extra={"serialized_when_idle": True}),
    }
    device = {"name": "sim:test", "size_bytes": 1 << 30, "probed_span_bytes": 1 << 30}
    return ProbeReport(device, answers, None, 0.0, 0.0)


def test_one_place_formats_an_answer_with_its_notation_and_marks():
    assert nt.shown("P5", LAYOUT, LIMITED) == "4 ch x 4 chips ‡"
    assert nt.shown("P5", LAYOUT, {"controller_limited": False}) == "4 ch x 4 chips"
    assert nt.shown("P9", 2, {"controller_limited": True}) == "2 ‡"
    assert nt.shown("P9", 4, {"serialized_when_idle": True}) == "4 ✗"
    assert nt.shown("P8", 20 * MIB, {"second_level": 126 * MIB + MIB // 2, "second_level_capacity_ios": 1280}) == \
        "20 MiB | 126.50 MiB †1280"
    lines = property_marks.legend(["4 ch x 4 chips ‡", "11.50 MiB p 7.50 MiB | 406 MiB", "4 ✗", "2 MiB or 64 writes",
                       "300 ms | ∞"])
    assert [line.split(" ")[0] for line in lines] == ["‡", "p", "or", "a", "N", "∞"]
    assert property_marks.legend(["4 KiB", "TLC 1L 1M 1H", "consistent", "8 ch x 2 chips"]) == []


def test_the_probe_table_shows_the_mark_with_its_legend(monkeypatch, capsys, tmp_path):
    report = probe_report()
    table = report.table().set_index("property")
    assert table.loc["P5", "table 4"] == "4 ch x 4 chips ‡" and table.loc["P5", "answer"] == "4 ch x 4 chips"
    markdown = markdown_table(report)
    assert "| P5 channel/chip layout | 4 ch x 4 chips ‡ |" in markdown
    assert "| 11.50 MiB p 7.50 MiB \\| 406 MiB |" in markdown and "| 4 ✗ |" in markdown  # the cell stays one
    assert CONTROLLER_LEGEND in markdown and "p partial flush" in markdown and "N ✗ serialised" in markdown
    # ``ftlscope probe`` prints the same legend under its table.
    monkeypatch.setattr(probe_runner, "probe_device", lambda *a, **k: report)
    assert cli.main(["probe", "sim:consumer-tlc-dram", "--out", str(tmp_path / "p"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "‡" in out and CONTROLLER_LEGEND in out


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[tuple[dict, Path]]:
    """Two runs' records, their property entries written by the profile's own code from probe answers."""
    root = tmp_path_factory.mktemp("notation")
    out = []
    for name, report in (("limited", probe_report()),
                         ("plain", ProbeReport({"name": "sim:plain", "size_bytes": 1 << 30,
                                                "probed_span_bytes": 1 << 30},
                                               {"P5": Answer({"channels": 8, "chips_per_channel": 2}, 0.99, "t")},
                                               None, 0.0, 0.0))):
        record = {"target": {"name": f"sim:{name}", "rotational": False, "size_bytes": 1 << 30}, "experiments": [],
                  "notes": [], "health_before": None, "health_after": None,
                  "env": {"ftlscope_version": "test", "os": "test"}, "stopped": None,
                  "spec": {}, "run_id": name, "suite": "quick", "created_at": "2026-11-25T00:00:00Z",
                  "completed": True}
        directory = root / name
        directory.mkdir()
        original = profile_runner.probe_device
        profile_runner.probe_device = lambda *a, _r=report, **k: _r
        try:
            profile_runner._run_probes(record, "sim:test", directory, 1 << 30, {})
        finally:
            profile_runner.probe_device = original
        out.append((record, directory))
    return out


def test_the_record_keeps_the_mark_and_its_details(records):
    p5 = records[0][0]["probes"]["properties"]["P5"]
    assert p5["notation"] == "4 ch x 4 chips ‡" and p5["details"]["controller_limited"] is True
    assert "notation" not in records[1][0]["probes"]["properties"]["P5"]


def test_the_report_shows_the_mark_with_its_legend(records, tmp_path):
    record, directory = records[0]
    paths = render_report(record, directory, tmp_path)
    markdown = next(p for p in paths if p.suffix == ".md").read_text()
    html = next(p for p in paths if p.suffix == ".html").read_text()
    assert "| P5 channel/chip layout | 4 ch x 4 chips ‡ |" in markdown and CONTROLLER_LEGEND in markdown
    assert "| 11.50 MiB p 7.50 MiB \\| 406 MiB |" in markdown and "a | b two-level" in markdown
    assert "4 ch x 4 chips ‡" in html and '<ul class="legend">' in html and CONTROLLER_LEGEND in html
    # No mark, no legend.
    plain = render_report(records[1][0], records[1][1], tmp_path / "plain")
    assert "controller-limited" not in next(p for p in plain if p.suffix == ".md").read_text()


def test_compare_shows_the_mark_with_its_legend(records, tmp_path):
    paths = render_compare(records, tmp_path)
    markdown = next(p for p in paths if p.name == "compare.md").read_text()
    html = next(p for p in paths if p.name == "compare.html").read_text()
    assert "| P5 channel/chip layout | 4 ch x 4 chips ‡ | 8 ch x 2 chips |" in markdown
    assert CONTROLLER_LEGEND in markdown and CONTROLLER_LEGEND in html and "4 ch x 4 chips ‡" in html
