"""The SQLite run store (issue 6): adding, finding, replacing and removing runs, and reading it without ftlscope."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ftlscope.store as store_module
from ftlscope.errors import UsageError
from ftlscope.store import COLUMNS, RunStore, default_db_path


def make_record(run_id: str = "20261122-153012-consumer-tlc-dram", created_at: str = "2026-11-22T15:30:12Z",
                knee_qd=512, target: str = "sim:consumer-tlc-dram") -> dict:
    """A profile record of the documented shape: probes P1 (a number) and P2 (a dict), two experiments."""
    return {
        "schema": 1, "run_id": run_id, "created_at": created_at, "suite": "quick",
        "options": {"span": None, "repeat": 1, "show_serial": False},
        "target": {"name": target, "kind": "simulated", "model": None, "serial_hash": None, "serial": None,
                   "firmware": None, "size_bytes": 256_000_000_000, "logical_block_size": 512,
                   "physical_block_size": 4096, "scheduler": None, "rotational": False, "identity": target},
        "env": {"ftlscope_version": "0.1.0", "kernel": "6.18", "cpu_model": "EPYC", "memory_bytes": 1 << 34,
                "engine": {"backend": "sim", "clock": {"source": "virtual"}}, "cpus": [0, 1]},
        "health_before": {"media_errors": 0, "host_bytes_written": 0},
        "health_after": {"media_errors": 0, "host_bytes_written": 4096},
        "spec": {"seq_read": {"value": 3.5e9, "unit": "B/s", "given": "3500MB/s"}},
        "probes": {"directory": "probes", "completed": True, "stopped": None, "device_time_s": 40.1, "properties": {
            "P1": {"name": "page size", "value": 4096, "answer": "4 KiB", "confidence": 0.93,
                   "figures": ["probes/P1.png"], "device_time_s": 0.4},
            "P2": {"name": "page type", "value": {"cell": "tlc", "pattern": "1L 1M 1H"}, "answer": "TLC",
                   "confidence": 0.8, "figures": [], "device_time_s": 1.5},
        }},
        "experiments": [
            {"name": "qd-sweep", "summary": "queue depth sweep", "source": "seed 001 §5",
             "directory": "experiments/qd-sweep", "params": {"qds": [1, 32, 512]}, "completed": True,
             "stopped": None, "device_time_s": 13.0, "wall_time_s": 2.5,
             "findings": {"knee_qd": {"value": knee_qd, "unit": "QD", "evidence": "knee of IOPS"},
                          "saturates": {"value": True, "unit": None, "evidence": "flat after the knee"},
                          "plateaus": {"value": [1, 2], "unit": "QD", "evidence": "list"},
                          "lost": {"value": None, "unit": None, "evidence": "not enough points"}},
             "figures": ["experiments/qd-sweep/qd_scaling.png"],
             "results": "experiments/qd-sweep/results.csv",
             "runs": [{"repetition": 0, "label": f"4 KiB random read QD {qd}",
                       "summary": f"experiments/qd-sweep/raw/rep0/00{i}-qd{qd}.summary.json",
                       "device_ns": 1_000_000 * qd, "wall_ns": 2_000, "stop": "completed"}
                      for i, qd in enumerate((1, 32))]},
            {"name": "qd1-baseline", "summary": "QD 1 latency", "source": "seed 000", "params": {},
             "directory": "experiments/qd1-baseline", "completed": False, "stopped": "interrupted",
             "device_time_s": 1.0, "wall_time_s": 0.5,
             "findings": {"random_read_lat_mean_us": {"value": 67.4, "unit": "µs", "evidence": "mean"}},
             "figures": [], "results": "experiments/qd1-baseline/results.csv", "runs": []},
        ],
        "card": [{"key": "qd1_read_latency", "label": "QD 1 4 KiB read latency", "value": 67.4, "unit": "µs",
                  "display": "67 µs", "source": "qd1-baseline/random_read_lat_mean_us", "spec": None,
                  "meets_spec": None}],
        "guidance": [{"rule": "queue-depth", "topic": "Queue depth", "text": "Use QD 512.",
                      "evidence": [{"source": "qd-sweep", "finding": "knee_qd", "value": 512, "unit": "QD"}]}],
        "completed": True, "stopped": None, "wall_time_s": 35.2, "device_time_s": 1290.0,
    }


def write_run(directory: Path, record: dict) -> Path:
    """The run's directory as ftlscope profile leaves it: profile.json, results.csv files, summary JSON."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "profile.json").write_text(json.dumps(record))
    for experiment in record["experiments"]:
        results = directory / experiment["results"]
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text("qd,iops,lat_mean_us\n1,15000,66.5\n32,400000,80.0\n")
        for run in experiment["runs"]:
            summary = directory / run["summary"]
            summary.parent.mkdir(parents=True, exist_ok=True)
            summary.write_text(json.dumps({"run": {"stop": {"reason": "completed"}}, "read": {
                "ops": 100, "bytes": 409600, "errors": 0, "iops": 15000.0, "bw_bytes": 6.1e7, "ops_over_1ms": 0,
                "lat_ns": {"mean": 66500.0, "stddev": 100.0, "min": 60000, "max": 90000, "p50": 66000,
                           "p90": 70000, "p95": 72000, "p99": 80000, "p99.9": 85000, "p99.99": 89000}}}))
    (directory / "probes/raw/rep0").mkdir(parents=True, exist_ok=True)
    (directory / "probes/P1.png").write_bytes(b"png")
    (directory / "probes/raw/P1.parquet").write_bytes(b"parquet")
    (directory / "probes/raw/rep0/000-p1-pairs.summary.json").write_text("{}")
    return directory


@pytest.fixture
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path / "db" / "runs.sqlite")


def test_default_path_follows_ftlscope_db_then_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("FTLSCOPE_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_db_path() == tmp_path / "data" / "ftlscope" / "runs.sqlite"
    monkeypatch.setenv("FTLSCOPE_DB", str(tmp_path / "mine.sqlite"))
    assert default_db_path() == tmp_path / "mine.sqlite"
    assert RunStore().path == tmp_path / "mine.sqlite"
    assert (tmp_path / "mine.sqlite").is_file()


def test_add_and_get_by_id_prefix_latest_and_index(store, tmp_path):
    older = make_record("20261121-090000-a", "2026-11-21T09:00:00Z")
    newer = make_record("20261122-090000-b", "2026-11-22T09:00:00Z")
    assert store.add(older, tmp_path / "a") == "20261121-090000-a"
    store.add(newer, tmp_path / "b")
    run = store.get("20261121-090000-a")
    assert run.record == older and run.directory == tmp_path / "a"
    assert store.get("20261121").run_id == "20261121-090000-a"
    assert store.get("latest").run_id == store.get("-1").run_id == "20261122-090000-b"
    assert store.get("-2").run_id == "20261121-090000-a"
    with pytest.raises(UsageError, match=r"^no stored run matches '-3' \(ftlscope runs lists them\)$"):
        store.get("-3")


def test_get_reads_a_run_directory_that_is_not_stored(store, tmp_path):
    directory = write_run(tmp_path / "elsewhere", make_record("20260101-000000-x"))
    for ref in (str(directory), str(directory / "profile.json")):
        run = store.get(ref)
        assert run.run_id == "20260101-000000-x" and run.directory == directory
    assert store.list_runs().empty
    with pytest.raises(UsageError, match="has no profile.json; give a directory written by ftlscope profile"):
        store.get(str(tmp_path))


def test_a_bare_word_is_a_run_id_even_where_a_directory_has_that_name(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "2026").mkdir()
    store.add(make_record("20260101-000000-x"), tmp_path)
    assert store.get("2026").run_id == "20260101-000000-x"


def test_unknown_and_ambiguous_references(store, tmp_path):
    with pytest.raises(UsageError, match=r"^no stored run matches 'latest' \(ftlscope runs lists them\)$"):
        store.get("latest")
    for i in range(7):
        store.add(make_record(f"20261122-15301{i}-dev", f"2026-11-22T15:30:1{i}Z"), tmp_path)
    with pytest.raises(UsageError, match=r"^no stored run matches 'nope' \(ftlscope runs lists them\)$"):
        store.get("nope")
    with pytest.raises(UsageError) as caught:
        store.get("2026")
    message = str(caught.value)
    assert message.startswith("'2026' matches 7 stored runs (20261122-153016-dev, 20261122-153015-dev, ")
    assert message.count("-dev") == 5 and message.endswith("and 2 more); give more of the run id")


def test_readding_a_run_replaces_it(store, tmp_path):
    store.add(make_record(knee_qd=64), tmp_path / "first")
    store.add(make_record(knee_qd=512), tmp_path / "second")
    assert len(store.list_runs()) == 1
    findings = store.findings(["latest"])
    assert findings.loc[findings["name"] == "knee_qd", "value"].tolist() == [512.0]
    assert store.get("latest").directory == tmp_path / "second"
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT count(*) FROM findings").fetchone()[0] == 5


def test_remove_deletes_the_run_and_every_row_of_it(store, tmp_path):
    store.add(make_record("20261122-153012-keep"), tmp_path / "keep")
    directory = write_run(tmp_path / "gone", make_record("20261122-153013-gone"))
    store.add(make_record("20261122-153013-gone"), directory)
    assert store.remove("20261122-153013") == "20261122-153013-gone"
    assert store.list_runs()["run_id"].tolist() == ["20261122-153012-keep"]
    with pytest.raises(UsageError, match="no stored run matches '20261122-153013-gone'"):
        store.get("20261122-153013-gone")
    assert (directory / "profile.json").is_file()  # the files stay
    with sqlite3.connect(store.path) as conn:
        for table in COLUMNS:
            gone = conn.execute(f"SELECT count(*) FROM {table} WHERE run_id LIKE '%gone'").fetchone()[0]
            kept = conn.execute(f"SELECT count(*) FROM {table} WHERE run_id LIKE '%keep'").fetchone()[0]
            assert gone == 0 and kept > 0, table


def test_list_runs_is_newest_first(store, tmp_path):
    for run_id, created in (("b", "2026-11-21T00:00:00Z"), ("c", "2026-11-23T00:00:00Z"),
                            ("a", "2026-11-22T00:00:00Z")):
        store.add(make_record(run_id, created), tmp_path / run_id)
    runs = store.list_runs()
    assert runs["run_id"].tolist() == ["c", "a", "b"]
    assert list(runs.columns[:9]) == ["run_id", "created_at", "suite", "target_name", "model", "size_bytes",
                                      "completed", "wall_time_s", "directory"]
    assert runs["completed"].tolist() == [True, True, True]
    assert runs["directory"].tolist() == [str(tmp_path / r) for r in "cab"]


def test_numbers_go_to_value_and_everything_else_to_value_json(store, tmp_path):
    record = make_record()
    record["experiments"][0]["findings"]["knee_qd"]["value"] = np.int64(512)  # as analysis code returns them
    record["experiments"][0]["findings"]["lost"]["value"] = float("nan")
    store.add(record, tmp_path)
    findings = store.findings([record["run_id"]]).set_index("name")
    assert findings.loc["knee_qd", "value"] == 512 and pd.isna(findings.loc["knee_qd", "value_json"])
    assert np.isnan(findings.loc["saturates", "value"]) and findings.loc["saturates", "value_json"] == "true"
    assert json.loads(findings.loc["plateaus", "value_json"]) == [1, 2]
    assert np.isnan(findings.loc["lost", "value"]) and pd.isna(findings.loc["lost", "value_json"])
    assert findings.loc["random_read_lat_mean_us", "unit"] == "µs"
    properties = store.properties(["latest"]).set_index("property")
    assert properties.loc["P1", "value"] == 4096 and properties.loc["P1", "answer"] == "4 KiB"
    assert json.loads(properties.loc["P2", "value_json"]) == {"cell": "tlc", "pattern": "1L 1M 1H"}
    assert store.get("latest").record["experiments"][0]["findings"]["knee_qd"]["value"] == 512


def test_plain_sqlite3_reads_the_store(store, tmp_path):
    directory = write_run(tmp_path / "run", make_record())
    store.add(make_record(), directory)
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT value FROM findings WHERE name = 'knee_qd'").fetchall() == [(512.0,)]
        assert conn.execute("SELECT value_json FROM properties WHERE property = 'P2'").fetchone()[0] == (
            '{"cell": "tlc", "pattern": "1L 1M 1H"}')
        assert conn.execute("SELECT target_name, size_bytes, completed, directory, kernel FROM runs").fetchone() == (
            "sim:consumer-tlc-dram", 256_000_000_000, 1, str(directory), "6.18")
        assert json.loads(conn.execute("SELECT env_json FROM runs").fetchone()[0])["engine"]["backend"] == "sim"
        assert conn.execute("SELECT experiment, completed, stopped FROM experiments ORDER BY experiment").fetchall() \
            == [("qd-sweep", 1, None), ("qd1-baseline", 0, "interrupted")]
        labels = conn.execute("SELECT label, device_ns, path FROM summaries ORDER BY seq").fetchall()
        assert [row[:2] for row in labels] == [("4 KiB random read QD 1", 1_000_000),
                                                ("4 KiB random read QD 32", 32_000_000)]
        assert all(Path(row[2]).is_file() for row in labels)
        files = dict(conn.execute("SELECT path, kind FROM files").fetchall())
        assert files[str(directory / "experiments/qd-sweep/results.csv")] == "results"
        assert files[str(directory / "experiments/qd-sweep/qd_scaling.png")] == "figure"  # named, not on disk
        assert files[str(directory / "experiments/qd-sweep/raw/rep0/000-qd1.summary.json")] == "summary"
        assert files[str(directory / "probes/P1.png")] == "probe_figure"
        assert files[str(directory / "probes/raw/P1.parquet")] == "probe_raw"
        assert files[str(directory / "probes/raw/rep0/000-p1-pairs.summary.json")] == "probe_summary"
        assert files[str(directory / "profile.json")] == "profile"
        assert conn.execute("SELECT display, value FROM card").fetchone() == ("67 µs", 67.4)
        assert json.loads(conn.execute("SELECT evidence_json FROM guidance").fetchone()[0])[0]["value"] == 512
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store_module.SCHEMA_VERSION


def test_files_that_are_not_stores_are_refused(tmp_path):
    not_db = tmp_path / "notes.txt"
    not_db.write_text("hello, this is not SQLite\n" * 10)
    with pytest.raises(UsageError, match=rf"^--db: {not_db} is not an ftlscope store \(file is not a database\); "
                                         "give another path$"):
        RunStore(not_db)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE songs (title TEXT)")
    with pytest.raises(UsageError, match=r"is not an ftlscope store \(it holds other tables: songs\)"):
        RunStore(other)
    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(UsageError, match=r"newer ftlscope \(store schema 99; this one reads up to 1\); upgrade"):
        RunStore(newer)
    with pytest.raises(UsageError, match=r"is a directory, not a store file"):
        RunStore(tmp_path)
    with pytest.raises(UsageError, match=r"^--db: .*/notes.txt/runs.sqlite cannot be created \(.*\); give another"):
        RunStore(not_db / "runs.sqlite")  # a file where the directory should be


def test_the_default_location_suggests_db(monkeypatch, tmp_path):
    monkeypatch.delenv("FTLSCOPE_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    (tmp_path / "ftlscope").mkdir()
    (tmp_path / "ftlscope" / "runs.sqlite").write_text("garbage " * 100)
    with pytest.raises(UsageError, match=r"^run store: .* is not an ftlscope store .*; give another path with --db$"):
        RunStore()


def test_the_store_reopens(tmp_path):
    RunStore(tmp_path / "runs.sqlite").add(make_record(), tmp_path)
    assert RunStore(tmp_path / "runs.sqlite").get("latest").record["suite"] == "quick"


def test_the_docstring_documents_every_column():
    for table, columns in COLUMNS.items():
        assert f"``{table}``" in store_module.__doc__
        for column in columns:
            assert f"``{column}``" in store_module.__doc__, f"{table}.{column}"
