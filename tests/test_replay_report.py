"""`ftlscope replay --report DIR`: the page of a replayed trace on a simulated drive (virtual time, so every number
is exact): every section and figure, the summary's percentiles, `trace info`'s statistics, the synthetic label."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from ftlscope.cli import main
from ftlscope.traces.cli import info_rows
from ftlscope.units import format_ns

FIX = Path(__file__).parent / "fixtures" / "traces"
SIM = "sim:consumer-tlc-dram"
SECTIONS = ("conditions", "latency", "over-time", "issue-lag", "trace")
FIGURES = {"read-latency-histogram", "read-latency-cdf", "read-over-time", "write-latency-histogram",
           "write-latency-cdf", "write-over-time", "issue-lag-cdf", "issue-lag-over-time", "trace-size-histogram",
           "trace-interarrival-cdf"}


@pytest.fixture(scope="module")
def synthetic_replay(tmp_path_factory):
    """A 2 s synthetic database trace replayed 4x as fast at QD 1, so some requests find the slot busy and go
    late (the issue-lag figures have something to draw); no preconditioning, to keep the test short."""
    tmp = tmp_path_factory.mktemp("replay_report")
    trace = tmp / "db.parquet"
    assert main(["trace", "synth", "db", "--duration", "2s", "--out", str(trace)]) == 0
    info = tmp / "info.json"
    assert main(["trace", "info", str(trace), "--json", str(info)]) == 0
    report, summary, requests = tmp / "report", tmp / "summary.json", tmp / "requests.parquet"
    assert main(["replay", SIM, str(trace), "--quiet", "--qd", "1", "--timing", "scaled:4", "--no-precondition",
                 "--json", str(summary), "--trace", str(requests), "--report", str(report)]) == 0
    return {"report": report, "summary": json.loads(summary.read_text()), "info": json.loads(info.read_text()),
            "requests": pd.read_parquet(requests),
            "html": (report / "report.html").read_text(), "md": (report / "report.md").read_text()}


def _section(html: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', html, re.S)
    assert match, f"no section {name}"
    return match.group(1)


def test_the_page_has_every_section_and_figure(synthetic_replay):
    html, md, report = synthetic_replay["html"], synthetic_replay["md"], synthetic_replay["report"]
    for name in SECTIONS:
        _section(html, name)
    for heading in ("## Conditions", "## Latency per operation", "## IOPS and latency over time", "## Issue lag",
                    "## The trace (synthetic)"):
        assert heading in md
    shown = re.findall(r"!\[[^]]*\]\(figures/([^)]+)\.png\)", md)
    assert set(shown) == FIGURES and len(shown) == len(FIGURES)
    assert all((report / "figures" / f"{name}.png").is_file() for name in shown)
    # The HTML page is self-contained: every figure is embedded, nothing is fetched.
    assert html.count('src="data:image/png;base64,') == len(FIGURES)
    assert "figures/" not in html


def test_the_percentiles_are_the_summarys(synthetic_replay):
    html, md, summary = synthetic_replay["html"], synthetic_replay["md"], synthetic_replay["summary"]
    latency = _section(html, "latency")
    for op in ("read", "write"):
        lat = summary[op]["lat_ns"]
        row = re.search(rf"<tr><td>{op}</td>(.*?)</tr>", latency).group(1)
        assert [float(v) for v in re.findall(r'data-ns="([^"]+)"', row)] == [
            lat[p] for p in ("p50", "p90", "p95", "p99", "p99.9")]
        md_row = next(line for line in md.splitlines() if line.startswith(f"| {op} | {summary[op]['ops']:,} |"))
        cells = [c.strip() for c in md_row.strip("|").split("|")]
        assert cells[5:] == [format_ns(lat[p]) for p in ("mean", "p50", "p90", "p95", "p99", "p99.9", "max")]
    lag = summary["run"]["issue_lag_ns"]
    assert lag["max"] > 0, "QD 1 at 4x speed: some requests went late"
    shown = [float(v) for v in re.findall(r'data-ns="([^"]+)"', _section(html, "issue-lag"))]
    assert shown == [lag[p] for p in ("p50", "p90", "p95", "p99", "p99.9", "max")]
    # The shares issued late are counted from every request's lag in the trace.
    lags = synthetic_replay["requests"]["issue_lag_ns"]
    for text, over in (("10.0 µs", 10_000), ("100.0 µs", 100_000), ("1.00 ms", 1_000_000)):
        late = int((lags > over).sum())
        assert f"| {text} | {late:,} | {late / len(lags):.2%} |" in md
    assert 0 < (lags > 10_000).sum() < len(lags)
    assert f"{(lags == 0).mean():.2%} of {len(lags):,} requests were issued exactly on time" in md


def test_the_trace_statistics_are_trace_infos(synthetic_replay, capsys):
    md, info = synthetic_replay["md"], synthetic_replay["info"]
    rows = info_rows(info)
    for key, value in rows["summary"]:
        assert f"| {key} | {value} |" in md
    for row in rows["mix"] + rows["sizes"]:
        assert f"| {' | '.join(row)} |" in md
    assert ("synthetic workload", "db (seed 1)") in rows["summary"]
    # ... and those rows are what `trace info` prints.
    capsys.readouterr()
    assert main(["trace", "info", str(synthetic_replay["report"].parent / "db.parquet")]) == 0
    printed = capsys.readouterr().out
    for key, value in rows["summary"]:
        assert re.search(rf"{re.escape(key)}\s.*{re.escape(value)}", printed), key


def test_a_synthetic_trace_is_labelled_everywhere(synthetic_replay):
    html, md, summary = synthetic_replay["html"], synthetic_replay["md"], synthetic_replay["summary"]
    assert summary["replay"]["synthetic"] is True
    assert "SYNTHETIC" in re.search(r"<title>(.*?)</title>", html).group(1)
    assert "SYNTHETIC" in md.splitlines()[0]
    assert "| synthetic | yes" in md
    captions = re.findall(r"!\[([^]]*)\]", md)
    assert captions and all(c.endswith("(synthetic trace)") for c in captions)
    assert html.count("<figcaption>") == len(FIGURES) == html.count("(synthetic trace)</figcaption>")


def test_a_captured_trace_on_time_with_requests_left_out_and_shifted(tmp_path):
    # An MSR file, reads only, shifted by 4 KiB: the conditions say so, nothing is called synthetic, and an open-loop
    # replay on a simulated drive is on time (lag 0: no lag figure, the page says why).
    report = tmp_path / "r"
    assert main(["replay", SIM, str(FIX / "msr.csv"), "--quiet", "--reads-only", "--offset-shift", "4k",
                 "--report", str(report), "--plots", str(tmp_path / "plots")]) == 0
    md = (report / "report.md").read_text()
    assert "SYNTHETIC" not in md and "synthetic trace" not in md and "| synthetic | no |" in md
    for row in ("| timing | faithful |", "| mode | open loop |", "| queue depth | 32 |",
                "| requests replayed | 2 of the trace's 4 |", "| requests left out | 2 write (--reads-only) |",
                "| offset shift | 4,096 B |", "| offsets folded into the target (--wrap) | 0 |"):
        assert row in md, row
    assert "100.00% of 2 requests were issued exactly on time" in md
    assert "Every request was issued exactly on time: no lag to draw." in md
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "read-latency-cdf.png", "read-latency-histogram.png", "read-over-time.png"]


def test_a_report_directory_that_is_a_file_is_refused_before_the_replay(tmp_path, capsys):
    blocker = tmp_path / "taken"
    blocker.write_text("")
    out = tmp_path / "s.json"
    assert main(["replay", SIM, str(FIX / "msr.csv"), "--quiet", "--json", str(out), "--report", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert "--report:" in err and "not a directory" in err and err.count("\n") == 1
    assert not out.exists()
