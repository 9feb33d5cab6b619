"""The run store: every profile run in one SQLite file, readable without ftlscope.

The store lives at ``$XDG_DATA_HOME/ftlscope/runs.sqlite`` (``~/.local/share/ftlscope/runs.sqlite``; the user's
data directory elsewhere); ``--db PATH`` or the environment variable ``FTLSCOPE_DB`` choose another file. Open it
with ``sqlite3``, pandas (``pd.read_sql("SELECT * FROM findings", sqlite3.connect(path))``) or DuckDB: the tables
are plain, one value per column, and JSON text only where the shape is open. Every path in the store is
absolute. Every table but ``runs`` refers to ``runs.run_id`` with ``ON DELETE CASCADE``, so deleting a run
deletes all its rows; nothing here deletes files on disk.

``runs``: one row per profile run.
    ``run_id`` (UTC time and target slug, e.g. ``20261122-153012-consumer-tlc-dram``), ``created_at`` (ISO 8601
    UTC), ``suite`` (quick, standard, full); the target: ``target_name``, ``target_kind`` (simulated, block
    device, file), ``model``, ``serial_hash`` (``sha256:...``; the serial itself is kept only if the user asked
    for it), ``firmware``, ``size_bytes``, ``logical_block_size``, ``physical_block_size``, ``scheduler``,
    ``rotational`` (0/1), ``identity`` (what identifies the same device across runs); the machine:
    ``ftlscope_version``, ``kernel``, ``cpu_model``; the outcome: ``completed`` (1 if every part ran to the
    end), ``stopped`` (why not, else NULL), ``wall_time_s``, ``device_time_s``; ``directory`` (the run's
    files), ``added_at`` (when it was stored); as JSON text: ``env_json`` (the whole environment),
    ``options_json``, ``spec_json`` (the figures given with ``--spec``), ``health_before_json``,
    ``health_after_json`` (the device's health counters) and ``record_json`` (the whole profile.json record,
    from which ``ftlscope report`` re-renders).
``experiments``: one row per experiment of a run.
    ``run_id``, ``experiment`` (its name, e.g. ``qd-sweep``), ``summary`` (what it measures), ``source`` (the
    paper section), ``directory``, ``completed``, ``stopped``, ``device_time_s``, ``wall_time_s``,
    ``params_json`` (the parameters it ran with), ``results_path`` (its results.csv).
``findings``: one row per finding of an experiment.
    ``run_id``, ``experiment``, ``name`` (e.g. ``knee_qd``), ``value`` (the number, when it is one; else NULL),
    ``value_json`` (the value as JSON text when it is not a number: true/false, a list, a string; NULL when
    ``value`` holds it or the value is null), ``unit``, ``evidence`` (how it was found).
    ``SELECT value FROM findings WHERE name = 'knee_qd'``.
``properties``: one row per probed internal property (P1 to P10).
    ``run_id``, ``property`` (``P1``), ``name`` (page size), ``answer`` (``4 KiB``), ``value`` / ``value_json``
    (as in ``findings``; P2's value is ``{"cell": "tlc", "pattern": "1L 1M 1H"}``), ``confidence`` (0 to 1),
    ``device_time_s``.
``summaries``: one row per engine run (one workload measured) of an experiment.
    ``run_id``, ``experiment``, ``seq`` (its position in the experiment), ``repetition``, ``label`` (e.g.
    ``4 KiB random read QD 1``), ``path`` (its summary JSON: throughput and latency percentiles per operation),
    ``device_ns``, ``wall_ns``, ``stop`` (completed, time-out, ...).
``card``: the report's headline figures, in order.
    ``run_id``, ``position``, ``key`` (``qd1_read_latency``), ``label``, ``value`` / ``value_json`` (as in
    ``findings``), ``unit``, ``display`` (``67 µs``), ``source`` (``experiment/finding``), ``spec`` (the
    datasheet figure it is checked against, or NULL), ``meets_spec`` (0/1, or NULL).
``guidance``: the report's advice, in order.
    ``run_id``, ``position``, ``rule``, ``topic``, ``text``, ``evidence_json`` (the findings it rests on).
``files``: every file of the run: the record's and whatever was in the run's directory when it was stored.
    ``run_id``, ``experiment`` (NULL for the probes' and the run's own files), ``kind`` (``profile``,
    ``report``, ``results``, ``findings``, ``conditions`` (experiment.json), ``figure``, ``summary``,
    ``windows``, ``trace``, ``points``, ``raw``, ``properties``, for the probes ``probe_figure``, ``probe_raw``
    (raw/P<n>.parquet), ``probe_summary``, ``probe_windows``, ``probe_trace``, and ``other``), ``path``.
    ``SELECT path FROM files WHERE kind = 'trace'`` lists the experiments' per-request traces (Parquet).

The schema's version is SQLite's ``PRAGMA user_version``.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import platformdirs

from .errors import UsageError
from .jsonable import plain

SCHEMA_VERSION = 1
_RECORD_FILE = "profile.json"
_CHILD = "TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE"

# One place for each table's columns: the DDL, the inserts and the empty frames all come from here.
_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "runs": (
        ("run_id", "TEXT PRIMARY KEY"), ("created_at", "TEXT NOT NULL"), ("suite", "TEXT"),
        ("target_name", "TEXT"), ("target_kind", "TEXT"), ("model", "TEXT"), ("serial_hash", "TEXT"),
        ("firmware", "TEXT"), ("size_bytes", "INTEGER"), ("logical_block_size", "INTEGER"),
        ("physical_block_size", "INTEGER"), ("scheduler", "TEXT"), ("rotational", "INTEGER"),
        ("identity", "TEXT"), ("ftlscope_version", "TEXT"), ("kernel", "TEXT"), ("cpu_model", "TEXT"),
        ("completed", "INTEGER NOT NULL"), ("stopped", "TEXT"), ("wall_time_s", "REAL"),
        ("device_time_s", "REAL"), ("directory", "TEXT NOT NULL"), ("added_at", "TEXT NOT NULL"),
        ("env_json", "TEXT"), ("options_json", "TEXT"), ("spec_json", "TEXT"), ("health_before_json", "TEXT"),
        ("health_after_json", "TEXT"), ("record_json", "TEXT NOT NULL"),
    ),
    "experiments": (
        ("run_id", _CHILD), ("experiment", "TEXT NOT NULL"), ("summary", "TEXT"), ("source", "TEXT"),
        ("directory", "TEXT"), ("completed", "INTEGER"), ("stopped", "TEXT"), ("device_time_s", "REAL"),
        ("wall_time_s", "REAL"), ("params_json", "TEXT"), ("results_path", "TEXT"),
    ),
    "findings": (
        ("run_id", _CHILD), ("experiment", "TEXT NOT NULL"), ("name", "TEXT NOT NULL"), ("value", "REAL"),
        ("value_json", "TEXT"), ("unit", "TEXT"), ("evidence", "TEXT"),
    ),
    "properties": (
        ("run_id", _CHILD), ("property", "TEXT NOT NULL"), ("name", "TEXT"), ("answer", "TEXT"),
        ("value", "REAL"), ("value_json", "TEXT"), ("confidence", "REAL"), ("device_time_s", "REAL"),
    ),
    "summaries": (
        ("run_id", _CHILD), ("experiment", "TEXT NOT NULL"), ("seq", "INTEGER NOT NULL"),
        ("repetition", "INTEGER"), ("label", "TEXT"), ("path", "TEXT"), ("device_ns", "INTEGER"),
        ("wall_ns", "INTEGER"), ("stop", "TEXT"),
    ),
    "card": (
        ("run_id", _CHILD), ("position", "INTEGER NOT NULL"), ("key", "TEXT"), ("label", "TEXT"),
        ("value", "REAL"), ("value_json", "TEXT"), ("unit", "TEXT"), ("display", "TEXT"), ("source", "TEXT"),
        ("spec", "REAL"), ("meets_spec", "INTEGER"),
    ),
    "guidance": (
        ("run_id", _CHILD), ("position", "INTEGER NOT NULL"), ("rule", "TEXT"), ("topic", "TEXT"),
        ("text", "TEXT"), ("evidence_json", "TEXT"),
    ),
    "files": (
        ("run_id", _CHILD), ("experiment", "TEXT"), ("kind", "TEXT NOT NULL"), ("path", "TEXT NOT NULL"),
    ),
}
# Each child's key starts with run_id, so its index also serves lookups and cascading deletes by run.
_KEYS = {
    "experiments": ("run_id", "experiment"),
    "findings": ("run_id", "experiment", "name"),
    "properties": ("run_id", "property"),
    "summaries": ("run_id", "experiment", "seq"),
    "card": ("run_id", "position"),
    "guidance": ("run_id", "position"),
    "files": ("run_id", "path"),
}
COLUMNS = {table: tuple(name for name, _ in spec) for table, spec in _TABLES.items()}


def _ddl() -> list[str]:
    statements = []
    for table, spec in _TABLES.items():
        parts = [f"{name} {kind}" for name, kind in spec]
        if table in _KEYS:
            parts.append(f"PRIMARY KEY ({', '.join(_KEYS[table])})")
        statements.append(f"CREATE TABLE {table} (\n    " + ",\n    ".join(parts) + "\n)")
    statements.append("CREATE INDEX runs_created_at ON runs (created_at)")
    return statements


def default_db_path() -> Path:
    """``$FTLSCOPE_DB`` if set, else ``runs.sqlite`` in the user's data directory (honours XDG_DATA_HOME)."""
    chosen = os.environ.get("FTLSCOPE_DB")
    if chosen:
        return Path(chosen).expanduser()
    return platformdirs.user_data_path("ftlscope", appauthor=False) / "runs.sqlite"


@dataclass
class StoredRun:
    """One run: its profile record (profile.json) and the directory its relative paths start from."""

    run_id: str
    record: dict[str, Any]
    directory: Path


# Stores whose integrity was checked in this process: PRAGMA quick_check reads every page, once is enough.
_CHECKED: set[Path] = set()
# What to do with a damaged store: the runs' directories still hold everything the store had.
_RECOVER = ("the runs' own files are intact: rebuild the store from them with 'ftlscope store rebuild DIR...' "
            "(DIR: the profile directories, e.g. ftlscope-profiles/), or give another store with --db")
_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


class RunStore:
    """The SQLite store of profile runs. ``RunStore()`` opens (or creates) the default store;
    ``RunStore(path, create=False)`` (for commands that only read) never creates a file or a directory: a
    store that does not exist yet reads as empty."""

    def __init__(self, path: str | Path | None = None, *, create: bool = True):
        if path is not None:
            self.path, self._flag = Path(path).expanduser(), "--db"
        else:
            self.path = default_db_path()
            self._flag = "FTLSCOPE_DB" if os.environ.get("FTLSCOPE_DB") else "run store"
        self.missing = not create and not self.path.exists()
        if not self.missing:
            self._open()

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    # ---- opening -----------------------------------------------------------------------------------------

    def _problem(self, what: str, fix: str = "give another path") -> UsageError:
        if self._flag == "run store":  # the default location: say how to choose another
            fix += " with --db"
        return UsageError(f"{self._flag}: {self.path} {what}; {fix}")

    def _damaged(self, detail: str) -> UsageError:
        detail = " ".join(detail.replace("*** in database main ***", "").split())  # one line, as all errors
        detail = detail if len(detail) <= 100 else detail[:97] + "..."
        return UsageError(f"{self._flag}: {self.path} is damaged ({detail}); {_RECOVER}")

    def _open(self) -> None:
        if self.path.is_dir():
            raise self._problem("is a directory, not a store file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._problem(f"cannot be created ({exc.strerror or exc})") from None
        with self._connect() as conn:
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            except sqlite3.DatabaseError as exc:
                if getattr(exc, "sqlite_errorname", None) == "SQLITE_CORRUPT":
                    raise self._damaged(str(exc)) from None
                raise self._problem(f"is not an ftlscope store ({exc})") from None
            resolved = self.path.resolve()
            if resolved not in _CHECKED and tables:
                try:
                    problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
                except sqlite3.DatabaseError as exc:
                    problems = [str(exc)]
                if problems != ["ok"]:
                    raise self._damaged(f"integrity check: {problems[0]}")
                _CHECKED.add(resolved)
            if version > SCHEMA_VERSION:
                raise self._problem(
                    f"was written by a newer ftlscope (store schema {version}; this one reads up to "
                    f"{SCHEMA_VERSION})", "upgrade ftlscope or give another path"
                )
            if version == 0 and tables:
                listed = ", ".join(sorted(tables)[:5])
                raise self._problem(f"is not an ftlscope store (it holds other tables: {listed})")
            if version == 0:
                for statement in _ddl():
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif "runs" not in tables:
                raise self._problem("is not an ftlscope store (no runs table)")
            elif version == SCHEMA_VERSION:
                # A damaged schema page can still read as valid SQL that names other columns (the integrity
                # check does not compare it with anything): every query would then fail with "no such column".
                for table, names in COLUMNS.items():
                    have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                    lacking = [name for name in names if name not in have]
                    if lacking:
                        raise self._damaged(f"schema: table {table} lacks column {lacking[0]}")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection whose block is one transaction, closed afterwards: committed when the block ends,
        rolled back when it raises (an interrupted write, Ctrl-C included, leaves the store as it was)."""
        try:
            # Autocommit mode and an explicit BEGIN: Python's implicit transactions leave out DDL, so a store
            # being created could otherwise be left with half its tables.
            conn = sqlite3.connect(self.path, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._problem(f"cannot be opened ({exc})") from None
        try:
            conn.execute("PRAGMA foreign_keys = ON")  # off by default in SQLite; the cascades need it
            conn.execute("BEGIN")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:  # SQLite rolls back by itself after some errors (SQLITE_FULL)
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            # The errors the place or the moment cause; anything else is a bug and keeps its traceback. Not
            # every error carries a name (those raised by the sqlite3 module itself do not).
            name = getattr(exc, "sqlite_errorname", None)
            # The sqlite3 module's own "Could not decode to UTF-8 column ..." is text that is not UTF-8, as below.
            if name in _DAMAGED or str(exc).startswith("Could not decode to UTF-8"):
                raise self._damaged(str(exc)) from None
            if name in ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_PERM"):
                raise self._problem(f"cannot be written ({exc})") from None
            if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):
                raise UsageError(f"{self._flag}: {self.path} is busy ({exc}); try again when the other "
                                 "ftlscope using it has finished") from None
            raise
        except UnicodeDecodeError as exc:
            # ftlscope writes only UTF-8 text: text that is not UTF-8 (a table name on a damaged schema page, a
            # damaged row) means damaged pages that SQLite's own checks let through.
            raise self._damaged(f"text that is not UTF-8: {exc.reason} at byte {exc.start}") from None
        finally:
            conn.close()

    # ---- writing -----------------------------------------------------------------------------------------

    def add(self, record: dict[str, Any], directory: str | Path) -> str:
        """Store one profile record whose relative paths start at ``directory``; a stored run of the same
        run_id is replaced (a re-rendered or resumed run). Returns the run_id."""
        run_id = record.get("run_id")
        if not isinstance(run_id, str) or not run_id or not record.get("created_at"):
            raise ValueError("a profile record needs a run_id and a created_at")
        directory = Path(directory).expanduser().resolve()
        rows = table_rows(record, directory)
        self._create_if_missing()
        with self._connect() as conn:
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))  # cascades to every other table
            for table, values in rows.items():
                names = COLUMNS[table]
                conn.executemany(
                    f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(':' + n for n in names)})", values
                )
        return run_id

    def _create_if_missing(self) -> None:
        if self.missing:
            self._open()
            self.missing = False

    def remove(self, ref: str) -> str:
        """Delete a stored run (its rows, not its files). Returns its run_id."""
        run_id = self._resolve(ref)
        with self._connect() as conn:
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        return run_id

    # ---- reading -----------------------------------------------------------------------------------------

    def get(self, ref: str) -> StoredRun:
        """A run by run_id, unique prefix, ``latest``, ``-1`` / ``-2`` (newest, second newest), or the path of a
        directory holding profile.json (read from the file; it need not be in the store)."""
        from_file = _read_directory(ref)
        if from_file is not None:
            return from_file
        run_id = self._resolve(ref)
        with self._connect() as conn:
            record_json, directory = conn.execute(
                "SELECT record_json, directory FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        return StoredRun(run_id=run_id, record=json.loads(record_json), directory=Path(directory))

    def _resolve(self, ref: str) -> str:
        """The stored run_id ``ref`` names (see :meth:`get`); a directory counts by the run_id it holds."""
        from_file = _read_directory(ref)
        if from_file is not None:
            ref = from_file.run_id
        if self.missing:
            raise UsageError(f"no stored run matches '{ref}': there is no store at {self.path} yet ('ftlscope "
                             "profile' makes one; a profile directory works without it)")
        unknown = UsageError(f"no stored run matches '{ref}' (ftlscope runs lists them)")
        newest_first = "ORDER BY created_at DESC, run_id DESC"
        with self._connect() as conn:
            if ref == "latest" or re.fullmatch(r"-[1-9][0-9]*", ref):
                back = 1 if ref == "latest" else -int(ref)
                row = conn.execute(f"SELECT run_id FROM runs {newest_first} LIMIT 1 OFFSET ?", (back - 1,)).fetchone()
                if row is None:
                    raise unknown
                return row[0]
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (ref,)).fetchone():
                return ref
            matches = [row[0] for row in conn.execute(
                f"SELECT run_id FROM runs WHERE substr(run_id, 1, length(?)) = ? {newest_first}", (ref, ref)
            )] if ref else []
        if not matches:
            raise unknown
        if len(matches) > 1:
            shown = ", ".join(matches[:5]) + (f" and {len(matches) - 5} more" if len(matches) > 5 else "")
            raise UsageError(f"'{ref}' matches {len(matches)} stored runs ({shown}); give more of the run id")
        return matches[0]

    def list_runs(self) -> pd.DataFrame:
        """The stored runs, newest first."""
        columns = ("run_id", "created_at", "suite", "target_name", "model", "size_bytes", "completed",
                   "wall_time_s", "directory", "stopped", "device_time_s", "identity")
        rows = []
        if not self.missing:
            with self._connect() as conn:
                rows = conn.execute(
                    f"SELECT {', '.join(columns)} FROM runs ORDER BY created_at DESC, run_id DESC"
                ).fetchall()
        frame = pd.DataFrame(rows, columns=list(columns))
        frame["completed"] = frame["completed"].astype(bool)
        return frame

    def findings(self, refs: Sequence[str]) -> pd.DataFrame:
        """The findings of the runs ``refs`` name (any form :meth:`get` takes), as in the findings table."""
        return self.frame("findings", refs)

    def properties(self, refs: Sequence[str]) -> pd.DataFrame:
        """The probed properties of the runs ``refs`` name, as in the properties table."""
        return self.frame("properties", refs)

    def card(self, refs: Sequence[str]) -> pd.DataFrame:
        """The report cards of the runs ``refs`` name, as in the card table."""
        return self.frame("card", refs)

    def frame(self, table: str, refs: Sequence[str]) -> pd.DataFrame:
        """``table``'s rows for the runs ``refs`` name, in that order. Built from each run's record, so a run
        directory that was never stored works too."""
        return table_frame(table, [self.get(ref) for ref in refs])


# ---- rebuilding ----------------------------------------------------------------------------------------------


@dataclass
class Rebuilt:
    """What :func:`rebuild` did: the new store, the runs it holds, what it skipped and where the old one went."""

    path: Path
    run_ids: list[str]
    skipped: list[str]
    set_aside: Path | None


def _profile_directories(places: Sequence[str | Path]) -> list[Path]:
    found: list[Path] = []
    for place in places:
        path = Path(place).expanduser()
        if (path / _RECORD_FILE).is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(record.parent for record in path.glob(f"*/{_RECORD_FILE}")))
        else:
            raise UsageError(f"store rebuild: {place} is not a directory; give profile directories or the "
                             "directory holding them (e.g. ftlscope-profiles/)")
    return found


def rebuild(places: Sequence[str | Path], path: str | Path | None = None) -> Rebuilt:
    """A new store at ``path`` (default: the default store) holding the runs in ``places``: profile directories
    (each with its profile.json) or directories holding them. The new store is built beside the old one and
    takes its place only when complete; the old file (damaged, most likely) is kept as ``NAME.replaced-TIME``."""
    target = Path(path).expanduser() if path is not None else default_db_path()
    directories = _profile_directories(places)
    if not directories:
        raise UsageError(f"store rebuild: no {_RECORD_FILE} in {', '.join(map(str, places))}; give the directories "
                         "ftlscope profile wrote (e.g. ftlscope-profiles/)")
    building = target.with_name(target.name + ".rebuilding")
    for leftover in (building, building.with_name(building.name + "-journal")):
        leftover.unlink(missing_ok=True)
    store = RunStore(building)
    run_ids, skipped = [], []
    for directory in directories:
        try:
            stored = _read_directory(str(directory))
        except UsageError as exc:
            skipped.append(exc.message)
            continue
        if stored is not None:
            run_ids.append(store.add(stored.record, stored.directory))
    set_aside = None
    if target.exists():
        set_aside = target.with_name(f"{target.name}.replaced-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}")
        os.replace(target, set_aside)
        # A journal left beside the old file belongs to it: beside the new one SQLite would replay it.
        for suffix in ("-journal", "-wal", "-shm"):
            companion = target.with_name(target.name + suffix)
            if companion.exists():
                os.replace(companion, set_aside.with_name(set_aside.name + suffix))
    os.replace(building, target)
    _CHECKED.discard(target.resolve())
    return Rebuilt(path=target, run_ids=run_ids, skipped=skipped, set_aside=set_aside)


# ---- records to rows ---------------------------------------------------------------------------------------


def table_frame(table: str, runs: Sequence[StoredRun]) -> pd.DataFrame:
    """``table``'s rows (see the module docstring) for ``runs``, with the table's columns even when empty."""
    rows = [row for run in runs for row in _BUILDERS[table](plain(run.record), run.directory)]
    return pd.DataFrame(rows, columns=list(COLUMNS[table]))


def table_rows(record: dict[str, Any], directory: Path) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows for one record whose relative paths start at ``directory``."""
    record = plain(record)
    return {table: build(record, directory) for table, build in _BUILDERS.items()}


def _run_rows(record: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    target, env = record.get("target") or {}, record.get("env") or {}
    return [{
        "run_id": record["run_id"], "created_at": record["created_at"], "suite": record.get("suite"),
        "target_name": target.get("name"), "target_kind": target.get("kind"), "model": target.get("model"),
        "serial_hash": target.get("serial_hash"), "firmware": target.get("firmware"),
        "size_bytes": target.get("size_bytes"), "logical_block_size": target.get("logical_block_size"),
        "physical_block_size": target.get("physical_block_size"), "scheduler": target.get("scheduler"),
        "rotational": target.get("rotational"), "identity": target.get("identity"),
        "ftlscope_version": env.get("ftlscope_version"), "kernel": env.get("kernel"),
        "cpu_model": env.get("cpu_model"), "completed": bool(record.get("completed")),
        "stopped": record.get("stopped"), "wall_time_s": record.get("wall_time_s"),
        "device_time_s": record.get("device_time_s"), "directory": str(directory),
        "added_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "env_json": _json(env), "options_json": _json(record.get("options")), "spec_json": _json(record.get("spec")),
        "health_before_json": _json(record.get("health_before")),
        "health_after_json": _json(record.get("health_after")), "record_json": _json(record),
    }]


def _experiment_dir(experiment: dict[str, Any]) -> str:
    return experiment.get("directory") or f"experiments/{experiment['name']}"


def _experiment_rows(record: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    return [{
        "run_id": record["run_id"], "experiment": experiment["name"], "summary": experiment.get("summary"),
        "source": experiment.get("source"), "directory": str(directory / _experiment_dir(experiment)),
        "completed": experiment.get("completed"), "stopped": experiment.get("stopped"),
        "device_time_s": experiment.get("device_time_s"), "wall_time_s": experiment.get("wall_time_s"),
        "params_json": _json(experiment.get("params")),
        "results_path": str(directory / results_path(experiment)),
    } for experiment in record.get("experiments") or []]


def results_path(experiment: dict[str, Any]) -> str:
    """The experiment's results.csv, relative to the run's directory."""
    return experiment.get("results") or f"{_experiment_dir(experiment)}/results.csv"


def _finding_rows(record: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    rows = []
    for experiment in record.get("experiments") or []:
        for name, finding in (experiment.get("findings") or {}).items():
            finding = finding if isinstance(finding, dict) else {"value": finding}
            value, value_json = _split_value(finding.get("value"))
            rows.append({
                "run_id": record["run_id"], "experiment": experiment["name"], "name": name, "value": value,
                "value_json": value_json, "unit": finding.get("unit"), "evidence": finding.get("evidence"),
            })
    return rows


def _property_rows(record: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    rows = []
    for pid, prop in ((record.get("probes") or {}).get("properties") or {}).items():
        value, value_json = _split_value(prop.get("value"))
        rows.append({
            "run_id": record["run_id"], "property": pid, "name": prop.get("name"),
            "answer": _text(prop.get("answer")), "value": value, "value_json": value_json,
            "confidence": _number(prop.get("confidence")), "device_time_s": prop.get("device_time_s"),
        })
    return rows


def _summary_rows(record: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    return [{
        "run_id": record["run_id"], "experiment": experiment["name"], "seq": seq,
        "repetition": run.get("repetition"), "label": run.get("label"),
        "path": str(directory / run["summary"]) if run.get("summary") else None,
        "device_ns": run.get("device_ns"), "wall_ns": run.get("wall_ns"), "stop": run.get("stop"),
    } for experiment in record.get("experiments") or [] for seq, run in enumerate(experiment.get("runs") or [])]


def _card_rows(record: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    rows = []
    for position, item in enumerate(record.get("card") or []):
        value, value_json = _split_value(item.get("value"))
        spec = item.get("spec")
        rows.append({
            "run_id": record["run_id"], "position": position, "key": item.get("key"), "label": item.get("label"),
            "value": value, "value_json": value_json, "unit": item.get("unit"), "display": item.get("display"),
            "source": item.get("source"), "spec": _number(spec.get("value") if isinstance(spec, dict) else spec),
            "meets_spec": item.get("meets_spec"),
        })
    return rows


def _guidance_rows(record: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    return [{
        "run_id": record["run_id"], "position": position, "rule": item.get("rule"), "topic": item.get("topic"),
        "text": item.get("text"), "evidence_json": _json(item.get("evidence")),
    } for position, item in enumerate(record.get("guidance") or [])]


def _file_rows(record: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    """The files the record names and those in ``directory`` now, each classified by where it is."""
    named: set[str] = {_RECORD_FILE}
    for prop in ((record.get("probes") or {}).get("properties") or {}).values():
        named.update(prop.get("figures") or [])
    for experiment in record.get("experiments") or []:
        named.update(experiment.get("figures") or [])
        named.add(results_path(experiment))
        named.update(run["summary"] for run in experiment.get("runs") or [] if run.get("summary"))
    if directory.is_dir():
        named.update(path.relative_to(directory).as_posix() for path in directory.rglob("*") if path.is_file())
    rows = []
    for relative in sorted(named):
        experiment, kind = _classify(relative)
        rows.append({"run_id": record["run_id"], "experiment": experiment, "kind": kind,
                     "path": str(directory / relative)})
    return rows


_EXPERIMENT_FILES = {"results.csv": "results", "findings.json": "findings", "experiment.json": "conditions",
                     "points.parquet": "points"}
_EXPERIMENT_SUFFIXES = ((".summary.json", "summary"), (".windows.parquet", "windows"), (".trace.parquet", "trace"),
                        (".png", "figure"), (".parquet", "raw"))


def _classify(relative: str) -> tuple[str | None, str]:
    """(experiment or None, kind) of a path relative to the run's directory."""
    parts = Path(relative).parts
    file = parts[-1]
    by_suffix = next((kind for suffix, kind in _EXPERIMENT_SUFFIXES if file.endswith(suffix)), "other")
    if len(parts) >= 3 and parts[0] == "experiments":
        return parts[1], _EXPERIMENT_FILES.get(file, by_suffix)
    if len(parts) >= 2 and parts[0] == "probes":
        if file.startswith("properties."):
            return None, "properties"
        # raw/P<n>.parquet holds a probe's measurements; the engine runs behind them sit in raw/rep<k>/
        return None, "other" if by_suffix == "other" else f"probe_{by_suffix}"
    if len(parts) == 1 and file == _RECORD_FILE:
        return None, "profile"
    if len(parts) == 1 and file.startswith("report."):
        return None, "report"
    return None, "other"


_BUILDERS = {
    "runs": _run_rows, "experiments": _experiment_rows, "findings": _finding_rows, "properties": _property_rows,
    "summaries": _summary_rows, "card": _card_rows, "guidance": _guidance_rows, "files": _file_rows,
}


def _read_directory(ref: str) -> StoredRun | None:
    """The run in directory ``ref`` (or ``ref`` itself, a profile.json), or None if ``ref`` is not one."""
    path = Path(ref).expanduser()
    if path.is_dir():
        record_path = path / _RECORD_FILE
        if not record_path.is_file():
            if os.sep not in ref and ref not in (".", ".."):
                return None  # a bare word that happens to name a directory here: a run id or prefix first
            raise UsageError(f"{path} has no {_RECORD_FILE}; give a directory written by ftlscope profile or a "
                             "stored run (ftlscope runs lists them)")
    elif path.name == _RECORD_FILE and path.is_file():
        record_path, path = path, path.parent
    else:
        return None
    try:
        record = json.loads(record_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{record_path} cannot be read as a profile record ({exc}); run ftlscope profile "
                         "again or give another run") from None
    if not isinstance(record, dict) or not isinstance(record.get("run_id"), str):
        raise UsageError(f"{record_path} is not a profile record (no run_id); give a directory written by "
                         "ftlscope profile")
    return StoredRun(run_id=record["run_id"], record=record, directory=path.resolve())


# ---- values --------------------------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _split_value(value: Any) -> tuple[float | None, str | None]:
    """(number, None) for a number, (None, JSON text) for anything else, (None, None) for null."""
    if value is None:
        return None, None
    number = _number(value)
    return (number, None) if number is not None else (None, _json(value))


def _json(value: Any) -> str | None:
    # Not ASCII-escaped, so "µs" reads as itself in the sqlite3 shell.
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else _json(value)
