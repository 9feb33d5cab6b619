"""A damaged store is refused with the way out, writes are all-or-nothing, reading creates nothing, and
``ftlscope store rebuild`` makes a new store from the runs' directories (issue 14, defect 3)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ftlscope import store as store_module
from ftlscope.cli import main
from ftlscope.errors import UsageError
from ftlscope.store import RunStore, rebuild


def _record(run_id: str, note: str = "") -> dict:
    return {"run_id": run_id, "created_at": f"2026-11-25T10:00:{run_id[-2:]}Z", "suite": "quick", "note": note}


def _profile_dir(root: Path, run_id: str) -> Path:
    directory = root / run_id
    directory.mkdir(parents=True)
    (directory / "profile.json").write_text(json.dumps(_record(run_id)))
    return directory


def _damage(path: Path) -> None:
    with open(path, "r+b") as f:
        for page in (2, 3):
            f.seek(page * 4096)
            f.write(b"\xde\xad\xbe\xef" * 1024)


@pytest.fixture
def damaged(tmp_path) -> Path:
    path = tmp_path / "runs.db"
    store = RunStore(path)
    for i in range(30):
        store.add(_record(f"run-{i:02d}", "x" * 2000), tmp_path)
    _damage(path)
    store_module._CHECKED.clear()  # a new process would check it again
    return path


def test_a_damaged_store_is_refused_with_one_line_saying_how_to_recover(damaged):
    with pytest.raises(UsageError) as exc:
        RunStore(damaged)
    message = exc.value.message
    assert "\n" not in message
    assert message.startswith(f"--db: {damaged} is damaged")
    assert "ftlscope store rebuild" in message


def test_an_interrupted_write_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs.db")
    store.add(_record("run-01", "first"), tmp_path)
    real_rows = store_module.table_rows

    def interrupted_rows(record, directory):
        rows = real_rows(record, directory)
        first = rows["files"][:1]

        def files():
            yield from first
            raise KeyboardInterrupt  # Ctrl-C (or SIGTERM) in the middle of the inserts

        rows["files"] = files()
        return rows

    monkeypatch.setattr(store_module, "table_rows", interrupted_rows)
    with pytest.raises(KeyboardInterrupt):
        store.add(_record("run-01", "second"), tmp_path)
    monkeypatch.undo()
    assert store.get("run-01").record["note"] == "first", "the replaced run is still the old one, whole"
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_commands_that_only_read_create_no_store_and_no_directory(tmp_path, capsys):
    path = tmp_path / "not-yet" / "runs.db"
    assert main(["runs", "--db", str(path)]) == 0
    assert main(["report", "latest", "--db", str(path)]) == 2
    assert "no store at" in capsys.readouterr().err
    assert not path.parent.exists()
    store = RunStore(path, create=False)
    assert store.list_runs().empty and not path.parent.exists()


def test_rebuild_reimports_profile_directories_and_keeps_the_old_file(damaged, tmp_path):
    profiles = tmp_path / "ftlscope-profiles"
    for run_id in ("20261125-100001-a", "20261125-100002-b"):
        _profile_dir(profiles, run_id)
    broken = profiles / "20261125-100003-c"
    broken.mkdir()
    (broken / "profile.json").write_text("{not json")
    done = rebuild([profiles], damaged)
    assert sorted(done.run_ids) == ["20261125-100001-a", "20261125-100002-b"]
    assert len(done.skipped) == 1 and "profile.json" in done.skipped[0]
    assert done.set_aside is not None and done.set_aside.read_bytes()[:16] == b"SQLite format 3\x00"
    store_module._CHECKED.clear()
    assert sorted(RunStore(damaged).list_runs()["run_id"]) == sorted(done.run_ids)


def test_store_rebuild_command(tmp_path, capsys):
    one = _profile_dir(tmp_path, "20261125-100001-a")
    db = tmp_path / "new.db"
    assert main(["store", "rebuild", str(one), "--db", str(db)]) == 0
    assert "stored 1 run(s)" in capsys.readouterr().err
    assert list(RunStore(db).list_runs()["run_id"]) == ["20261125-100001-a"]
    assert main(["store", "rebuild", str(tmp_path / "nothing-here"), "--db", str(db)]) == 2


def test_a_schema_page_with_text_that_is_not_utf8_is_refused_as_damaged(tmp_path):
    # Found by tests/test_fuzz_store.py: one byte of a table name on the schema page made not UTF-8 raised
    # UnicodeDecodeError from RunStore's open instead of the one-line refusal.
    path = tmp_path / "runs.db"
    RunStore(path).add(_record("run-01"), tmp_path)
    data = bytearray(path.read_bytes())
    at = data.index(b"tableruns", 100, 4096) + len(b"table")  # the name column of the runs table's schema row
    data[at] = 0x80
    path.write_bytes(bytes(data))
    store_module._CHECKED.clear()
    with pytest.raises(UsageError) as exc:
        RunStore(path).list_runs()
    message = exc.value.message
    assert "\n" not in message
    assert message.startswith(f"--db: {path} is damaged (text that is not UTF-8")
    assert "ftlscope store rebuild" in message
