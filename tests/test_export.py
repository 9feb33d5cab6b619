"""Export of stored runs to Parquet (issue 6): what a user gets to analyse elsewhere, and what is noted missing."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from test_store import make_record, write_run

import ftlscope
from ftlscope.errors import UsageError
from ftlscope.export import export_runs
from ftlscope.store import RunStore


@pytest.fixture
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path / "runs.sqlite")


def two_runs(store: RunStore, tmp_path):
    """Two stored runs; the second's results.csv has an extra column and one summary is a real engine one."""
    first = make_record("20261121-100000-a", "2026-11-21T10:00:00Z", knee_qd=256)
    second = make_record("20261122-100000-b", "2026-11-22T10:00:00Z", knee_qd=512)
    first["options"]["span"] = 1 << 30
    second["options"]["span"] = "64GiB"  # a number in one run, text in the other: Parquet needs one type
    a = write_run(tmp_path / "a", first)
    b = write_run(tmp_path / "b", second)
    (b / "experiments/qd-sweep/results.csv").write_text("qd,iops,lat_mean_us,lat_p99_us\n1,16000,62.0,90.0\n")
    real = ftlscope.run("sim:consumer-tlc-dram", ftlscope.from_flags(rw="randrw", ops=64, size="16MiB"))
    real.save_json(b / second["experiments"][0]["runs"][0]["summary"])
    store.add(first, a)
    store.add(second, b)
    return a, b


def test_export_writes_files_pandas_reads_back(store, tmp_path):
    two_runs(store, tmp_path)
    out = tmp_path / "export"
    result = export_runs(store, ["20261121", "latest", "-2"], out)
    assert result.notes == []
    assert sorted(p.name for p in result.paths) == sorted([
        "runs.parquet", "experiments.parquet", "findings.parquet", "properties.parquet", "card.parquet",
        "summaries.parquet", "results_qd-sweep.parquet", "results_qd1-baseline.parquet"])

    runs = pd.read_parquet(out / "runs.parquet")
    assert runs["run_id"].tolist() == ["20261121-100000-a", "20261122-100000-b"]  # named twice, exported once
    assert runs["completed"].dtype == bool and runs["size_bytes"].tolist() == [256_000_000_000] * 2
    assert runs["env_engine_backend"].tolist() == ["sim", "sim"]
    assert runs["env_engine_clock_source"].tolist() == ["virtual", "virtual"]
    assert runs["env_cpus"].tolist() == ["[0, 1]"] * 2  # a list: JSON text
    assert runs["option_span"].tolist() == ["1073741824", "64GiB"]
    assert runs["option_show_serial"].tolist() == [False, False]
    assert runs["spec_seq_read_value"].tolist() == [3.5e9, 3.5e9]
    assert runs["health_after_host_bytes_written"].tolist() == [4096, 4096]
    assert "record_json" not in runs and "env_json" not in runs

    findings = pd.read_parquet(out / "findings.parquet")
    knee = findings[findings["name"] == "knee_qd"]
    assert knee[["run_id", "value"]].values.tolist() == [["20261121-100000-a", 256.0], ["20261122-100000-b", 512.0]]
    properties = pd.read_parquet(out / "properties.parquet")
    assert properties.loc[properties["property"] == "P1", "value"].tolist() == [4096.0, 4096.0]

    summaries = pd.read_parquet(out / "summaries.parquet")
    # 4 engine runs: three synthetic (read only), one real randrw (read and write)
    assert len(summaries) == 5 and set(summaries["op"]) == {"read", "write"}
    real = summaries[(summaries["run_id"] == "20261122-100000-b") & (summaries["seq"] == 0)]
    assert real["op"].tolist() == ["read", "write"] and real["ops"].sum() == 64
    assert (real["lat_p99_99_ns"] >= real["lat_p50_ns"]).all() and (real["lat_mean_ns"] > 0).all()
    assert summaries["label"].iloc[0] == "4 KiB random read QD 1"

    results = pd.read_parquet(out / "results_qd-sweep.parquet")
    assert list(results.columns) == ["run_id", "qd", "iops", "lat_mean_us", "lat_p99_us"]  # union, run_id first
    assert results["run_id"].tolist() == ["20261121-100000-a"] * 2 + ["20261122-100000-b"]
    assert results["lat_p99_us"].isna().tolist() == [True, True, False]


def test_missing_directory_and_files_are_noted(store, tmp_path):
    a, b = two_runs(store, tmp_path)
    shutil.rmtree(a)
    (b / "experiments/qd-sweep/results.csv").unlink()
    (b / "experiments/qd-sweep/raw/rep0/001-qd32.summary.json").unlink()
    result = export_runs(store, ["-1", "-2"], tmp_path / "export")
    assert len(result.notes) == 3
    assert result.notes[0].startswith(f"run 20261121-100000-a: its directory {a} is missing; exported what the "
                                      "store holds")
    assert "experiments/qd-sweep/raw/rep0/001-qd32.summary.json missing" in result.notes[1]
    assert result.notes[2] == ("run 20261122-100000-b: experiments/qd-sweep/results.csv missing; "
                               "results_qd-sweep.parquet leaves it out")
    # what the store holds is there for both runs; the files only for the run that still has them
    findings = pd.read_parquet(tmp_path / "export/findings.parquet")
    assert set(findings["run_id"]) == {"20261121-100000-a", "20261122-100000-b"}
    summaries = pd.read_parquet(tmp_path / "export/summaries.parquet")
    assert set(summaries["run_id"]) == {"20261122-100000-b"} and summaries["seq"].tolist() == [0, 0]
    assert not (tmp_path / "export/results_qd-sweep.parquet").exists()
    assert pd.read_parquet(tmp_path / "export/results_qd1-baseline.parquet")["run_id"].tolist() == [
        "20261122-100000-b"] * 2


def test_a_run_directory_exports_without_being_stored(store, tmp_path):
    directory = write_run(tmp_path / "run", make_record("20260101-000000-x"))
    result = export_runs(store, [str(directory)], tmp_path / "export")
    assert pd.read_parquet(tmp_path / "export/runs.parquet")["directory"].tolist() == [str(directory)]
    assert len(pd.read_parquet(tmp_path / "export/summaries.parquet")) == 2 and result.notes == []
    assert store.list_runs().empty


def test_export_refuses_nothing_to_export_and_a_file_as_directory(store, tmp_path):
    with pytest.raises(UsageError, match="give at least one run"):
        export_runs(store, [], tmp_path / "export")
    (tmp_path / "file").write_text("x")
    store.add(make_record(), tmp_path)
    with pytest.raises(UsageError, match=r"^--parquet: .*/file is a file; give a directory"):
        export_runs(store, ["latest"], tmp_path / "file")
    with pytest.raises(UsageError, match="no stored run matches 'nope'"):
        export_runs(store, ["nope"], tmp_path / "export")
    assert not (tmp_path / "export").exists()  # a wrong reference leaves nothing behind
