"""The experiment framework (issue 4): parameters, repetitions, output files, interruption, the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest

from ftlscope.errors import UsageError
from ftlscope.experiments import EXPERIMENTS, Experiment, Param, finding, get, run_experiment
from ftlscope.experiments.context import Interrupted
from ftlscope.sim import SimDevice

MiB = 1 << 20
QD1_SMALL = {"span": "64MiB", "runtime": "20ms", "warmup": "0s"}


def _toy(measure, name="toy") -> Experiment:
    def analyse(table, p):
        return {"mean_iops": finding(table["iops"].mean(), "IOPS", "results.csv column iops")}

    return Experiment(
        name=name, summary="toy", source="test", writes=False, preconditioning="none",
        params=(Param("span", "size", 16 * MiB, "range"), Param("qds", "ints", [1, 2], "queue depths")),
        keys=("qd",), measure=measure, analyse=analyse, figures=lambda table, f, p, d: [],
    )


def _read_points(ctx, p):
    span = ctx.span(p["span"])
    ctx.ensure_readable(span)
    from ftlscope.experiments._common import op_metrics, workload

    for qd in p["qds"]:
        result = ctx.run(workload("read", size=4096, pattern="random", qd=qd, span=span, ops=200,
                                  seed=1 + ctx.repetition), f"qd {qd}")
        yield {"qd": qd, **op_metrics(result, "read")}


def test_every_experiment_declares_what_the_list_needs():
    assert "qd1-baseline" in EXPERIMENTS
    for e in EXPERIMENTS.values():
        assert e.summary and e.source and e.keys
        assert e.preconditioning in ("none", "purge", "sequential-fill", "random-fill")
        assert any(p.name == "span" for p in e.params), f"{e.name} has no span parameter"


def test_what_a_user_reads_cites_the_documents_by_title():
    # Regression: `bench --list`, docs/experiments.md and findings.json said "seed 001 §2", the documents'
    # file numbering, which means nothing to a reader; they cite titles, and the report numbers them.
    from ftlscope.report.references import REFERENCES, SHORT_TITLES, cite

    for e in EXPERIMENTS.values():
        shown = " ".join([e.summary, e.source, *(p.help for p in e.params)])
        assert not re.search(r"seed \d", shown, re.IGNORECASE), (e.name, shown)
    assert all(title.strip("“”") in reference for title, reference in zip(SHORT_TITLES, REFERENCES, strict=True))
    assert cite("“SSD Performance Profiling” §3") == "[2] §3"
    assert cite("seed 000 §5.4") == "[1] §5.4"  # records written before the titles
    assert cite("“SSD Performance Profiling” [2]") == "“SSD Performance Profiling” [2]"


def test_parameters_parse_and_bad_ones_name_the_key():
    e = get("qd1-baseline")
    values = e.resolve_params({"runtime": "2s", "span": "1GiB"})
    assert values["runtime"] == 2 * 10**9 and values["span"] == 1 << 30
    assert values["random_size"] == 4096  # untouched default
    with pytest.raises(UsageError, match="--param nope: qd1-baseline has no parameter 'nope'"):
        e.resolve_params({"nope": "1"})
    with pytest.raises(UsageError, match="--param runtime: cannot read 'soon'"):
        e.resolve_params({"runtime": "soon"})
    with pytest.raises(UsageError, match="unknown experiment 'nosuch'"):
        get("nosuch")


def test_repetitions_are_aggregated_into_mean_and_stddev(tmp_path):
    outcome = run_experiment(_toy(_read_points), "sim:consumer-tlc-dram", out=tmp_path, repeat=3)
    assert outcome.completed
    points = pd.read_parquet(outcome.directory / "raw" / "points.parquet")
    table = pd.read_csv(outcome.directory / "results.csv")
    assert sorted(points["repetition"].unique()) == [0, 1, 2]
    assert list(table["qd"]) == [1, 2] and list(table["n"]) == [3, 3]
    for qd in (1, 2):
        iops = points.loc[points["qd"] == qd, "iops"]
        row = table.loc[table["qd"] == qd].iloc[0]
        assert row["iops"] == pytest.approx(iops.mean())
        assert row["iops_std"] == pytest.approx(iops.std(ddof=1))
        assert row["iops_ci"] > 0
    findings = json.loads((outcome.directory / "findings.json").read_text())
    assert findings["mean_iops"]["unit"] == "IOPS"
    assert findings["mean_iops"]["value"] == pytest.approx(table["iops"].mean())
    conditions = json.loads((outcome.directory / "experiment.json").read_text())
    assert conditions["completed"] and conditions["repetitions_completed"] == 3
    assert conditions["target"]["kind"] == "simulated" and "sim_config_toml" in conditions["target"]
    assert conditions["env"]["engine"]["backend"]
    assert conditions["params"]["qds"] == [1, 2]
    # Device time: the fill, its 1 s settle and 6 short runs (a unit slip once made the settle 31 years).
    assert 1.0 < conditions["device_time_s"] < 5.0
    # Every engine run left its summary and windows behind.
    assert len(conditions["runs"]) == 1 + 6  # the sequential fill of the simulated device, then 3 x 2 points
    for run in conditions["runs"]:
        assert (outcome.directory / "raw" / run["summary"]).exists()


def test_an_interrupted_experiment_keeps_what_it_measured(tmp_path):
    def measure(ctx, p):
        yield from _read_points(ctx, {**p, "qds": [1]})
        raise KeyboardInterrupt

    outcome = run_experiment(_toy(measure), "sim:consumer-tlc-dram", out=tmp_path)
    assert isinstance(outcome.error, Interrupted)
    table = pd.read_csv(outcome.directory / "results.csv")
    assert list(table["qd"]) == [1]
    conditions = json.loads((outcome.directory / "experiment.json").read_text())
    assert conditions["completed"] is False and "interrupted" in conditions["stopped"]


def test_a_simulated_device_is_filled_once_for_several_read_experiments(tmp_path):
    device = SimDevice.open()
    run_experiment(_toy(_read_points, "a"), device, out=tmp_path)
    second = run_experiment(_toy(_read_points, "b"), device, out=tmp_path)
    labels = [r["label"] for r in second.conditions["runs"]]
    assert not any("precondition" in label for label in labels), labels


def test_qd1_baseline_on_the_default_simulated_ssd(tmp_path):
    outcome = run_experiment(get("qd1-baseline"), "sim:consumer-tlc-dram", out=tmp_path, params=QD1_SMALL)
    table = outcome.table.set_index("mode")
    assert set(table.index) == {"4k-random-read", "4k-random-write", "128k-sequential-read",
                                "128k-sequential-write"}
    # Latency and IOPS agree at QD 1: one request at a time.
    for mode, row in table.iterrows():
        assert row["iops"] * row["lat_mean_us"] / 1e6 == pytest.approx(1.0, rel=0.05), mode
    # The 4 KiB random read costs at least a flash read of the preset's fastest page type.
    assert table.loc["4k-random-read", "lat_mean_us"] >= 45
    # Writes land in the DRAM write buffer: faster than a flash read (the preset's buffer is 64 MiB).
    assert outcome.findings["write_to_read_latency_ratio"]["value"] < 1
    assert {p.name for p in outcome.figures} == {"qd1_mean_latency.png", "qd1_iops.png"}


def test_qd1_baseline_on_a_file_ftlscope_creates(scratch):
    target = scratch / "qd1.img"
    outcome = run_experiment(get("qd1-baseline"), str(target), out=scratch / "out", size=16 * MiB,
                             params={"runtime": "50ms", "warmup": "0s"})
    assert outcome.completed
    assert set(outcome.table["op"]) == {"read", "write"}
    assert (outcome.table["iops"] > 0).all()
    assert outcome.conditions["target"]["kind"] == "regular_file"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ftlscope.cli", *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_lists_runs_and_refuses_with_one_line(tmp_path, state_home):
    listing = _cli("bench", "--list")
    assert listing.returncode == 0
    assert "qd1-baseline" in listing.stdout and "sequential-fill" in listing.stdout

    ok = _cli("bench", "sim:consumer-tlc-dram", "qd1-baseline", "--out", str(tmp_path), "--quiet",
              *[f"--param={k}={v}" for k, v in QD1_SMALL.items()])
    assert ok.returncode == 0, ok.stderr
    assert "random_read_lat_mean_us" in ok.stdout
    assert (tmp_path / "qd1-baseline" / "results.csv").exists()

    for args, message in [
        (("bench", "sim:consumer-tlc-dram", "nosuch"), "unknown experiment 'nosuch'"),
        (("bench", "sim:consumer-tlc-dram", "qd1-baseline", "--param", "runtime"), "--param: 'runtime' is not k=v"),
        (("bench", "sim:consumer-tlc-dram", "qd1-baseline", "--param", "span=lots"), "--param span: cannot read"),
        (("bench", str(tmp_path / "missing.img"), "qd1-baseline"), "--size"),
        (("bench",), "give TARGET and EXPERIMENT"),
    ]:
        bad = _cli(*args, "--out", str(tmp_path / "bad"))
        assert bad.returncode == 2, (args, bad.stderr)
        assert message in bad.stderr, (args, bad.stderr)
        assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_a_destructive_experiment_needs_the_flag_on_a_file_ftlscope_did_not_create(scratch):
    target = scratch / "precious.img"
    target.write_bytes(b"\x5a" * (4 * MiB))
    result = _cli("bench", str(target), "qd1-baseline", "--out", str(scratch / "out"), "--quiet",
                  "--param", "runtime=10ms", "--param", "warmup=0s")
    assert result.returncode == 2
    assert "--destructive" in result.stderr
    assert target.read_bytes() == b"\x5a" * (4 * MiB), "nothing was written"


def test_the_documented_catalogue_matches_the_experiments():
    from pathlib import Path

    from ftlscope.experiments._catalog import markdown

    docs = (Path(__file__).parents[1] / "docs" / "experiments.md").read_text()
    assert markdown() in docs, "regenerate: python -m ftlscope.experiments._catalog, paste into docs/experiments.md"


def test_parameters_are_shown_as_people_write_them():
    from ftlscope.experiments import get

    experiment = get("bs-sweep")
    values = experiment.resolve_params({"span": "16GiB", "warmup": "200ms", "sizes": "4k,1m"})
    shown = {p.name: p.show(values[p.name]) for p in experiment.params}
    assert shown["span"] == "16 GiB" and shown["runtime"] == "30 s" and shown["warmup"] == "200 ms"
    assert shown["sizes"] == "4 KiB, 1 MiB" and shown["qd"] == "32"
    assert get("qd-sweep").params[0].show(0) == "0 (whole target)"
