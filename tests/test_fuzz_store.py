"""Fuzzing the run store as ``--db``: random bytes, and a real store with bytes damaged, open and list as a
store or are refused with one line (a FtlscopeError), never another exception.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

import pytest
from fuzzing import assert_one_line, bounded
from hypothesis import example, given
from hypothesis import strategies as st

from ftlscope.errors import FtlscopeError
from ftlscope.store import RunStore


def _open_and_list(path: Path) -> None:
    try:
        RunStore(path).list_runs()
    except FtlscopeError as exc:
        assert_one_line(exc)


@bounded(30)
@given(st.binary(max_size=8192))
@example(b"")
@example(b"SQLite format 3\x00" + bytes(84))
@example(b"SQLite format 3\x00" + b"\xff" * 4096)
def test_random_bytes_as_a_store(data):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "runs.sqlite"
        path.write_bytes(data)
        _open_and_list(path)


@pytest.fixture(scope="module")
def valid_store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("store") / "runs.sqlite"
    RunStore(path)
    with sqlite3.connect(path) as conn:  # some rows, so the damage can hit data pages too
        conn.execute("INSERT INTO runs (run_id, created_at, completed, directory, added_at, record_json) "
                     "VALUES ('r1', 'now', 1, '/x', 'now', '{}')")
    return path


# Found by this test: a store whose schema page is damaged (one byte of a table name not UTF-8) raised
# UnicodeDecodeError from RunStore._open, and one whose schema text names another column raised "no such column"
# from list_runs; the explicit examples pin them (tests/regressions has the one-line check).
@bounded(30)
@given(st.lists(st.tuples(st.integers(0, 1 << 16), st.binary(min_size=1, max_size=64)), min_size=1, max_size=4))
@example(damage=[(980, b"\x80")])
@example(damage=[(940, b"\x80")])  # a column name not UTF-8: sqlite3's "Could not decode to UTF-8 column"
@example(damage=[(3426, b"_")])  # a column name on the schema page changed: "no such column" at the first query
def test_a_damaged_store(valid_store, damage):
    data = bytearray(valid_store.read_bytes())
    for offset, chunk in damage:
        at = offset % len(data)
        data[at:at + len(chunk)] = chunk
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "runs.sqlite"
        path.write_bytes(bytes(data))
        os.chmod(path, 0o600)
        _open_and_list(path)
