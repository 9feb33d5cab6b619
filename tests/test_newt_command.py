"""`ftlscope newt TARGET TRACE`: a small trace replayed twice on fresh simulated drives, without and with the
optimizations; its JSON (before, after, gain_pct), report page, stored findings, the guidance that cites them,
and the one-line refusals of bad input before any device is touched."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_newt_align import _unaligned_reads

from ftlscope.cli import main
from ftlscope.metrics import NEWT_FINDINGS
from ftlscope.report.guidance import build_guidance
from ftlscope.store import RunStore
from ftlscope.traces import write_parquet


def _profile(tmp_path: Path, name: str, properties: dict, identity: str = "sim:kelpie-n1t-i") -> Path:
    """A profile directory holding only what --from-profile reads: the probes' answers."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / "profile.json").write_text(json.dumps({
        "run_id": name, "created_at": "2026-11-25T00:00:00Z", "suite": "quick",
        "target": {"name": identity, "identity": identity}, "experiments": [],
        "probes": {"properties": properties}}))
    return directory


N1T_PROPERTIES = {"P1": {"value": 4096, "answer": "4 KiB"},
                  "P6": {"value": {"consistent": False, "penalised_sizes": []}, "answer": "inconsistent",
                         "unaligned_penalty_us": 200.0}}


@pytest.fixture(scope="module")
def newt_run(tmp_path_factory):
    """One `ftlscope newt` on kelpie-n1t-i with the profile's alignment (auto), stored in a fresh store."""
    root = tmp_path_factory.mktemp("newt")
    trace = write_parquet(_unaligned_reads(300), root / "reads.parquet")
    profile = _profile(root, "n1t-profile", N1T_PROPERTIES)
    db = root / "runs.sqlite"
    code = main(["newt", "sim:kelpie-n1t-i", str(trace), "--from-profile", str(profile), "--quiet",
                 "--json", str(root / "newt.json"), "--report", str(root / "page"), "--db", str(db)])
    assert code == 0
    return root, json.loads((root / "newt.json").read_text()), db


def test_newt_writes_before_after_and_the_gain(newt_run):
    root, doc, _ = newt_run
    for when in ("before", "after"):
        assert set(doc[when]["read"]["lat_ns"]) >= {"p50", "p90", "p95", "p99", "p99.9"}
        assert doc[when]["read"]["ops"] == 300
    # An open-loop replay: the gain is measured from each request's arrival; the device's beside it.
    assert doc["latency_from"] == "arrival" and doc["arrival"]["before"]["read"]["ops"] == 300
    before, after = doc["arrival"]["before"]["read"]["lat_ns"], doc["arrival"]["after"]["read"]["lat_ns"]
    assert doc["gain_pct"]["read"]["p99"] == round((before["p99"] - after["p99"]) / before["p99"] * 100, 2)
    before, after = doc["before"]["read"]["lat_ns"], doc["after"]["read"]["lat_ns"]
    assert doc["gain_pct_device"]["read"]["p99"] == round((before["p99"] - after["p99"]) / before["p99"] * 100, 2)
    # kelpie-n1t-i adds 200 µs to every read that is not a page multiple; the profile's P6 says so.
    assert doc["gain_pct"]["read"]["mean"] > 30
    assert doc["optimizations"]["align_reads"]["page_size"] == 4096
    assert doc["optimizations"]["align_reads"]["extra_bytes"] > 0
    assert doc["params"]["source"] == "n1t-profile"
    # Same starting state: each pass on a fresh drive with the same range written first.
    assert doc["before"]["run"]["precondition"] == doc["after"]["run"]["precondition"]
    assert doc["precondition"]["kind"] == "sequential-fill"


def test_newt_writes_a_report_page_with_the_figures(newt_run):
    root, _, _ = newt_run
    page = root / "page"
    html, md = (page / "report.html").read_text(), (page / "report.md").read_text()
    assert "Latency before and after" in html and "data:image/png;base64," in html
    assert "| read | before |" in md and "**gain**" in md
    assert (page / "figures" / "read-latency-cdf-before-after.png").is_file()
    assert (page / "figures" / "read-latency-over-time-before-after.png").is_file()
    assert (page / "results.csv").read_text().startswith("latency_from,op,statistic,before_us,after_us,gain_pct")


def test_newt_stores_its_findings_and_the_guidance_cites_them(newt_run):
    root, doc, db = newt_run
    store = RunStore(db, create=False)
    runs = store.list_runs()
    assert len(runs) == 1
    findings = store.findings([runs["run_id"][0]]).set_index("name")
    assert set(findings.index) <= set(NEWT_FINDINGS)
    assert findings.loc["read_p99_gain_pct", "value"] == doc["gain_pct"]["read"]["p99"]
    # A profile of the same drive, re-rendered: its read-size advice cites the measured gain.
    from ftlscope.newt.stored import attach_newt_runs

    record = json.loads((root / "n1t-profile" / "profile.json").read_text())
    attach_newt_runs(record, store)
    advice = {a["rule"]: a for a in build_guidance(record)}["read-sizes"]
    assert "Measured ('ftlscope newt'" in advice["text"] and "not measured" not in advice["text"]
    gain = next(e for e in advice["evidence"] if e["finding"] == "read_p99_gain_pct")
    assert gain["value"] == doc["gain_pct"]["read"]["p99"]
    for evidence in advice["evidence"]:
        assert evidence["display"] in advice["text"]
    # Another drive has no newt run: its advice says the gain is not measured.
    other = {**record, "target": {"identity": "sim:kelpie-n2t-i"}}
    attach_newt_runs(other, store)
    assert "not measured" in {a["rule"]: a for a in build_guidance(other)}["read-sizes"]["text"]


def test_on_a_consistent_drive_alignment_costs_at_most_the_extra_bytes(tmp_path):
    trace = write_parquet(_unaligned_reads(300), tmp_path / "reads.parquet")
    out = tmp_path / "n.json"
    assert main(["newt", "sim:consumer-tlc-dram", str(trace), "--align-reads", "4k", "--quiet", "--no-store",
                 "--json", str(out), "--report", str(tmp_path / "page")]) == 0
    doc = json.loads(out.read_text())
    assert doc["after"]["read"]["bytes"] - doc["before"]["read"]["bytes"] == \
        doc["optimizations"]["align_reads"]["extra_bytes"]
    for key in ("mean", "p50", "p90", "p95", "p99"):
        assert doc["gain_pct"]["read"][key] > -5, key


@pytest.mark.parametrize(("flags", "words"), [
    ([], "newt: nothing to optimize; give --from-profile RUN"),
    (["--align-reads", "auto"], "--align-reads auto: it reads the page size (P1)"),
    (["--from-profile", "{no_p1}", "--align-reads", "auto"], "the profile no-p1 has no page size (P1)"),
    (["--from-profile", "{consistent}"], "the profile calls for no optimization"),
    (["--from-profile", "nonexistent-run"], "--from-profile nonexistent-run:"),
    (["--align-reads", "4k", "--timing", "sideways"], "--timing: 'sideways' is not a timing"),
])
def test_bad_input_is_refused_in_one_line_before_the_device(tmp_path, capsys, flags, words):
    trace = write_parquet(_unaligned_reads(10), tmp_path / "t.parquet")
    places = {"{no_p1}": str(_profile(tmp_path, "no-p1", {"P6": N1T_PROPERTIES["P6"]})),
              "{consistent}": str(_profile(tmp_path, "consistent", {
                  "P1": {"value": 4096}, "P6": {"value": {"consistent": True, "penalised_sizes": []}}}))}
    flags = [places.get(f, f) for f in flags]
    code = main(["newt", "sim:kelpie-n1t-i", str(trace), "--quiet", "--db", str(tmp_path / "db.sqlite"),
                 "--report", str(tmp_path / "page"), *flags])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert words in err
    assert not (tmp_path / "page" / "report.html").exists()


def test_read_size_advice_for_a_drive_that_penalises_sizes_which_are_not_page_multiples():
    # P6 inconsistent without a penalised range is kelpie-n1t-i's answer: sizes that are not page multiples cost
    # more. The advice said "no read size is penalised" before.
    record = {"target": {"identity": "sim:kelpie-n1t-i"}, "experiments": [],
              "probes": {"properties": N1T_PROPERTIES}}
    advice = {a["rule"]: a for a in build_guidance(record)}["read-sizes"]
    assert advice["text"].startswith("Read whole pages: reads whose size is not a multiple of the 4 KiB page")
    assert "not measured" in advice["text"] and "No read size is penalised" not in advice["text"]


def test_a_stored_newt_run_renders_with_report(newt_run, tmp_path):
    _, _, db = newt_run
    run_id = RunStore(db, create=False).list_runs()["run_id"][0]
    assert main(["report", run_id, "--db", str(db), "--out", str(tmp_path / "again")]) == 0
    assert "read mean gain pct" in (tmp_path / "again" / "report.md").read_text()


def test_report_of_a_newt_run_without_out_keeps_its_page(newt_run, capsys):
    # Regression: 'ftlscope report NEWT_RUN' rendered the profile page over the newt page in the run's directory.
    root, _, db = newt_run
    run_id = RunStore(db, create=False).list_runs()["run_id"][0]
    page = (root / "page" / "report.md").read_text()
    assert main(["report", run_id, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "--out DIR" in err and "Traceback" not in err
    assert (root / "page" / "report.md").read_text() == page


WRITE_THROUGH = {"P1": {"value": 4096, "answer": "4 KiB"},
                 "P6": {"value": {"consistent": True, "penalised_sizes": []}, "answer": "consistent"},
                 "P8": {"value": 0, "answer": "none"}, "P10": {"value": 0.0, "answer": "0 s"}}


def _bursty(seconds: int = 2) -> pd.DataFrame:
    """Reads of 4 KiB every 500 µs over 64 MiB, and every 500 ms a 100 ms burst of 128 KiB writes at 200 MB/s
    (well above kelpie-n2t-i's flush speed, 11.5 MiB / 200 ms): the read-heavy trace with write bursts of issue
    19's check."""
    rng = np.random.default_rng(5)
    reads = np.arange(0, seconds * 1_000_000_000, 500_000)
    bursts = np.concatenate([start + np.arange(0, 100_000_000, 655_360)
                             for start in range(0, seconds * 1_000_000_000, 500_000_000)])
    submit = np.concatenate([reads, bursts])
    op = np.array(["read"] * len(reads) + ["write"] * len(bursts), dtype=object)
    size = np.concatenate([np.full(len(reads), 4096), np.full(len(bursts), 128 << 10)])
    offset = np.concatenate([rng.integers(0, (64 << 20) // 4096, len(reads)) * 4096,
                             (64 << 20) + np.arange(len(bursts)) * (128 << 10)])
    order = np.argsort(submit, kind="stable")
    ops = ["read", "write", "trim", "write_zeroes", "flush"]
    frame = pd.DataFrame({"op": pd.Categorical(op[order], categories=ops),
                          "offset_bytes": offset[order].astype(np.uint64), "size": size[order].astype(np.uint32),
                          "submit_ns": submit[order].astype(np.uint64)})
    frame.attrs["ftlscope"] = {"format": "synthetic", "synthetic": True}
    return frame


def test_rate_limit_auto_needs_a_flush_speed_or_allow_noop(tmp_path, capsys):
    trace = write_parquet(_bursty(1), tmp_path / "t.parquet")
    profile = _profile(tmp_path, "write-through", WRITE_THROUGH, identity="sim:optane-like")
    base = ["newt", "sim:optane-like", str(trace), "--from-profile", str(profile), "--rate-limit-writes", "auto",
            "--quiet", "--no-store"]
    assert main([*base, "--report", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--rate-limit-writes auto: no flush speed" in err and "--allow-noop" in err
    assert not (tmp_path / "refused" / "report.html").exists()
    out = tmp_path / "n.json"
    assert main([*base, "--allow-noop", "--json", str(out), "--report", str(tmp_path / "noop")]) == 0
    doc = json.loads(out.read_text())
    assert doc["optimizations"]["rate_limit_writes"] is None and doc["held"] is None
    assert any("NOT rate-limited" in note for note in doc["notes"])
    # Nothing applied: the same trace on the same fresh drive twice gives the same latencies, exactly.
    assert all(value == 0 for value in doc["gain_pct"]["read"].values())


def test_newt_with_the_shim_reports_the_bytes_held_over_time(tmp_path, capsys):
    trace = write_parquet(_bursty(), tmp_path / "t.parquet")
    out = tmp_path / "n.json"
    assert main(["newt", "sim:kelpie-n2t-i", str(trace), "--rate-limit-writes", "57.5MB/s", "--quiet", "--no-store",
                 "--json", str(out), "--report", str(tmp_path / "page")]) == 0
    doc = json.loads(out.read_text())
    shim = doc["optimizations"]["rate_limit_writes"]
    assert shim["active"] and shim["flush_speed_bps"] == 57.5e6
    assert doc["held"]["held_bytes_max"] > 0 and doc["held"]["over_time"]
    assert "write_shim" in doc["after"] and "write_shim" not in doc["before"]
    assert (tmp_path / "page" / "figures" / "held-bytes-over-time.png").is_file()
    assert "Writes held back" in (tmp_path / "page" / "report.html").read_text()
    # What the holds cost the writes, from arrival, in times and not only a percentage.
    err = " ".join(capsys.readouterr().err.split())
    assert f"what the shim cost the writes: write latency from {doc['latency_from']}: mean " in err
    assert " p99 " in err and " -> " in err


def test_a_forced_shim_on_a_drive_without_its_premise_is_warned_about(tmp_path, capsys):
    # A speed forced on a write-through drive (P8 none): newt says which premise is missing, and the shim, whose
    # model has no buffer to overflow, holds nothing.
    trace = write_parquet(_bursty(1), tmp_path / "t.parquet")
    profile = _profile(tmp_path, "write-through", WRITE_THROUGH, identity="sim:optane-like")
    out = tmp_path / "n.json"
    assert main(["newt", "sim:optane-like", str(trace), "--from-profile", str(profile), "--rate-limit-writes",
                 "57.5MB/s", "--quiet", "--no-store", "--json", str(out), "--report", str(tmp_path / "p")]) == 0
    err = capsys.readouterr().err
    assert "warning: --rate-limit-writes 57.5MB/s is forced" in err and "P8 none" in err
    assert "holds nothing" in err
    doc = json.loads(out.read_text())
    assert any("is forced" in note for note in doc["notes"])
    assert doc["optimizations"]["rate_limit_writes"]["write_through"]
    assert doc["held"]["write_through"] and doc["held"]["delayed_writes"] == 0


def test_forced_warnings_name_the_missing_premise():
    from ftlscope.newt.params import NewtParams
    from ftlscope.newt.premises import forced_warnings

    consistent = NewtParams(page_size=4096, penalised_reads=(), unaligned_penalty_ns=0, buffer_bytes=64 << 20,
                            flush_window_s=1.0, source="p")
    (warning,) = forced_warnings("4k", "57.5MB/s", consistent)
    assert "--align-reads 4k" in warning and "P6" in warning
    assert forced_warnings("auto", "auto", consistent) == []
    assert forced_warnings("4k", "57.5MB/s", None) == [], "without a profile nothing is known to warn about"
