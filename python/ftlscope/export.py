"""Stored runs as Parquet files for analysis elsewhere (``ftlscope export RUN... --parquet DIR``).

``export_runs`` writes, for the runs chosen (any reference :meth:`RunStore.get` takes):

- ``runs.parquet``: one row per run, the columns of the store's ``runs`` table (see :mod:`ftlscope.store`)
  without its JSON ones; instead the environment, options, spec and health counters are flattened to one
  column per value (``env_kernel``, ``env_engine_backend``, ``option_repeat``, ``spec_seq_read_value``,
  ``health_before_media_errors``, ...), lists as JSON text.
- ``experiments.parquet``, ``findings.parquet``, ``properties.parquet``, ``card.parquet``: the store's tables of
  the same names.
- ``summaries.parquet``: one row per engine run and operation: ``run_id``, ``experiment``, ``seq``,
  ``repetition``, ``label``, ``stop``, ``device_ns``, ``wall_ns``, ``op``, ``ops``, ``bytes``, ``errors``,
  ``iops``, ``bw_bytes``, ``lat_mean_ns``, ``lat_stddev_ns``, ``lat_min_ns``, ``lat_max_ns``, ``lat_p50_ns`` ...
  ``lat_p99_9_ns``, ``lat_p99_99_ns``, ``ops_over_1ms``, read from each run's summary JSON (the JSON's ``p99.9``
  becomes ``p99_9``: column names are SQL-friendly, see :mod:`ftlscope.metrics`).
- ``results_<experiment>.parquet``: the results.csv rows of that experiment from every run, with a ``run_id``
  column first (the columns are the union over the runs).

The first four come from the store, so they are written even when a run's directory has gone; the last two
need the run's files, and each file that is missing is named in the notes returned.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import UsageError
from .metrics import LATENCY_KEYS, SUMMARY_COLUMNS, latency_column
from .store import COLUMNS, RunStore, StoredRun, results_path, table_frame
from .workload import OPS

_SUMMARY_COLUMNS = SUMMARY_COLUMNS
_MISSING_SHOWN = 3


@dataclass
class ExportResult:
    """The files written, and one note for each thing that could not be exported (to print to the user)."""

    paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def export_runs(store: RunStore, refs: Sequence[str], directory: str | Path) -> ExportResult:
    """Write the Parquet files described in the module docstring for the runs ``refs`` name into ``directory``."""
    if not refs:
        raise UsageError("export: give at least one run (ftlscope runs lists them)")
    # Every reference is resolved before anything is written, so a wrong one leaves nothing behind.
    runs: dict[str, StoredRun] = {}
    for ref in refs:
        run = store.get(ref)
        runs.setdefault(run.run_id, run)  # the same run named twice is exported once
    chosen = list(runs.values())
    directory = Path(directory).expanduser()
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--parquet: {directory} is a file; give a directory (it is created if missing)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or exc
        raise UsageError(f"--parquet: cannot create {directory} ({reason}); give another directory") from None


    result = ExportResult()

    def write(name: str, frame: pd.DataFrame) -> None:
        path = directory / name
        _parquet_ready(frame).to_parquet(path, index=False)
        result.paths.append(path)

    write("runs.parquet", _runs_frame(chosen))
    for table in ("experiments", "findings", "properties", "card"):
        write(f"{table}.parquet", table_frame(table, chosen))

    on_disk = []
    for run in chosen:
        if run.directory.is_dir():
            on_disk.append(run)
        else:
            result.notes.append(
                f"run {run.run_id}: its directory {run.directory} is missing; exported what the store holds "
                "(runs, experiments, findings, properties, card) but not its summaries or results"
            )
    write("summaries.parquet", _summaries_frame(on_disk, result.notes))
    for experiment, frame in _results_frames(on_disk, result.notes).items():
        write(f"results_{re.sub(r'[^A-Za-z0-9_.-]', '_', experiment)}.parquet", frame)
    return result


def _runs_frame(runs: Sequence[StoredRun]) -> pd.DataFrame:
    """The runs table without its JSON columns, and every scalar of env, options, spec and health as a column."""
    frame = table_frame("runs", runs)
    frame = frame.drop(columns=[c for c in frame.columns if c.endswith("_json")] + ["added_at"])
    frame["completed"] = frame["completed"].astype(bool)
    extras = []
    for run in runs:
        record = run.record
        row: dict[str, Any] = {}
        for key, value in (record.get("target") or {}).items():
            if key not in COLUMNS["runs"] and f"target_{key}" not in COLUMNS["runs"]:
                row.update(_flatten(f"target_{key}", value))
        for prefix, key in (("env", "env"), ("option", "options"), ("spec", "spec"),
                            ("health_before", "health_before"), ("health_after", "health_after")):
            if isinstance(record.get(key), dict):
                row.update(_flatten(prefix, record[key]))
        extras.append(row)
    extra = pd.DataFrame(extras, index=frame.index)
    return pd.concat([frame, extra], axis=1)


def _flatten(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(f"{prefix}_{key}", item))
        return flat
    return {prefix: value}


def _summaries_frame(runs: Sequence[StoredRun], notes: list[str]) -> pd.DataFrame:
    rows = []
    for run in runs:
        missing, unreadable = [], []
        for experiment in run.record.get("experiments") or []:
            for seq, engine_run in enumerate(experiment.get("runs") or []):
                relative = engine_run.get("summary")
                if not relative:
                    continue
                path = run.directory / relative
                if not path.is_file():
                    missing.append(relative)
                    continue
                try:
                    summary = json.loads(path.read_text())
                except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                    unreadable.append(relative)
                    continue
                base = {"run_id": run.run_id, "experiment": experiment["name"], "seq": seq,
                        "repetition": engine_run.get("repetition"), "label": engine_run.get("label"),
                        "stop": engine_run.get("stop"), "device_ns": engine_run.get("device_ns"),
                        "wall_ns": engine_run.get("wall_ns")}
                for op in OPS:
                    metrics = summary.get(op)
                    if not isinstance(metrics, dict):
                        continue
                    latency = metrics.get("lat_ns") or {}
                    rows.append({
                        **base, "op": op,
                        **{key: metrics.get(key) for key in ("ops", "bytes", "errors", "iops", "bw_bytes")},
                        **{latency_column(key, "ns"): latency.get(key) for key in LATENCY_KEYS},
                        "ops_over_1ms": metrics.get("ops_over_1ms"),
                    })
        for files, what in ((missing, "missing"), (unreadable, "unreadable")):
            if files:
                notes.append(f"run {run.run_id}: {_some(files)} {what}; summaries.parquet leaves "
                             f"{'it' if len(files) == 1 else 'them'} out")
    return pd.DataFrame(rows, columns=list(_SUMMARY_COLUMNS))


def _results_frames(runs: Sequence[StoredRun], notes: list[str]) -> dict[str, pd.DataFrame]:
    """Experiment name → the rows of its results.csv from every run, ``run_id`` first."""
    parts: dict[str, list[pd.DataFrame]] = {}
    for run in runs:
        for experiment in run.record.get("experiments") or []:
            relative = results_path(experiment)
            path = run.directory / relative
            if not path.is_file():
                notes.append(f"run {run.run_id}: {relative} missing; results_{experiment['name']}.parquet "
                             "leaves it out")
                continue
            try:
                table = pd.read_csv(path)
            except pd.errors.EmptyDataError:  # an experiment stopped before its first point
                continue
            table.insert(0, "run_id", run.run_id)
            parts.setdefault(experiment["name"], []).append(table)
    return {name: pd.concat(frames, ignore_index=True, sort=False) for name, frames in parts.items()}


def _some(files: list[str]) -> str:
    shown = ", ".join(files[:_MISSING_SHOWN])
    if len(files) > _MISSING_SHOWN:
        return f"{len(files)} summary files ({shown}, ...)"
    return shown


def _parquet_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns Parquet can type: a column mixing kinds across runs (null in one, text in another is fine; a
    number in one and text in another is not) becomes text, and dicts and lists become JSON text."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype != object:
            continue
        values = [v for v in frame[column] if not _missing(v)]
        kinds = {type(v) for v in values}
        if kinds <= {int, float} and len(kinds) == 2:
            frame[column] = frame[column].astype(float)
        elif len(kinds) > 1 or kinds & {dict, list}:
            frame[column] = [None if _missing(v) else v if isinstance(v, str) else json.dumps(v, default=str)
                             for v in frame[column]]
    return frame


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
