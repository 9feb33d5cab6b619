"""Running one experiment of the suite: resolve its parameters, check the target, precondition, repeat the
measurement, aggregate, analyse, draw, and write ``DIR/EXPERIMENT/``:

- ``results.csv``    one row per point: every metric's mean, ``_std`` and ``_ci`` (95 % t interval) over the
                     repetitions, and ``n``;
- ``findings.json``  what the analysis derived, each ``{"value", "unit", "evidence"}``; an experiment that writes
                     also gets the host and NAND bytes its measurement wrote and the highest temperature
                     the drive reported, from the health counters sampled during its runs;
- ``*.png``          the figures;
- ``experiment.json`` the conditions: target, environment, engine, parameters, preconditioning, repetitions,
                     device and wall time, what the runs did to the device (``health``: host and NAND bytes of
                     the measurement and of the preconditioning, temperatures), and how the run ended;
- ``raw/``           every repetition's points (``points.parquet``) and every engine run's summary JSON and
                     time windows (Parquet).

An interrupted or failed experiment still writes everything measured before it stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis.stats import aggregate
from ..env import system_env
from ..errors import FtlscopeError, RunError, UsageError
from ..jsonable import write_json
from ..kept import failure, write_or_keep
from ..sim import SimDevice
from ..units import format_size
from . import resume as checkpoint
from .base import Experiment, finding
from .context import Context, Interrupted


@dataclass
class ExperimentOutcome:
    experiment: Experiment
    directory: Path
    table: pd.DataFrame
    findings: dict[str, Any]
    figures: list[Path]
    conditions: dict[str, Any]
    error: FtlscopeError | None = None

    @property
    def completed(self) -> bool:
        return self.error is None


def run_experiment(
    experiment: Experiment,
    target: str | SimDevice,
    *,
    out: str | Path = "ftlscope-results",
    params: dict[str, str] | None = None,
    repeat: int = 1,
    destructive: str | None = None,
    force: bool = False,
    size: int | None = None,
    engine: str = "auto",
    progress: bool = False,
    show_serial: bool = False,
    resume: str | Path | None = None,
    keep_elsewhere: bool = True,
) -> ExperimentOutcome:
    """Run ``experiment`` on ``target`` ``repeat`` times and write its directory under ``out``; with ``resume``
    (an earlier run's ``out``), continue that run from its first repetition not completed (see resume.py).
    When the directory cannot be written after the measurement, the results go to a temporary directory and
    RunError says where (``keep_elsewhere``), or the OSError is raised (a profile keeps its own)."""
    if repeat < 1:
        raise UsageError(f"--repeat: give at least 1 (got {repeat})")
    values = experiment.resolve_params(params or {})
    directory = Path(resume if resume is not None else out) / experiment.name
    raw_dir = directory / "raw"
    if resume is None or raw_dir.is_dir():  # --resume DIR must exist: checkpoint.load says so otherwise
        raw_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(
        target, raw_dir=raw_dir, writes=experiment.writes, destructive=destructive, force=force, size=size,
        engine=engine, progress=progress, label=experiment.name, show_serial=show_serial,
    )
    started = time.time()
    rows: list[dict[str, Any]] = []
    error: FtlscopeError | None = None
    first = 0
    if resume is not None:
        rows, first = checkpoint.load(raw_dir, experiment=experiment.name, params=values, repeat=repeat, ctx=ctx)
        if ctx.kind == "simulated":  # rebuild the simulated device's state: it is not kept between processes
            replayed: list[dict[str, Any]] = []
            _repetitions(experiment, ctx, values, range(first), repeat, replayed)
            checkpoint.check_replay(replayed, rows, ctx.target)
        ctx.notes.append(f"resumed after {first} of {repeat} repetition(s) completed")
    try:
        for repetition in range(first, repeat):
            _repetitions(experiment, ctx, values, [repetition], repeat, rows)
            checkpoint.save(raw_dir, experiment=experiment.name, params=values, repeat=repeat,
                            completed=repetition + 1, rows=rows, ctx=ctx)
    except FtlscopeError as exc:
        error = exc
    except KeyboardInterrupt:
        error = Interrupted("interrupted; the results measured so far are kept")
    except OSError as exc:  # a raw file could not be written: stop, keep what was measured (below)
        error = RunError(f"stopped: {failure(exc, raw_dir)}")
    if error is not None:
        try:
            checkpoint.seal(raw_dir, ctx)
        except OSError as exc:
            ctx.notes.append(f"the checkpoint could not be sealed: {failure(exc, raw_dir)}")

    def finish(place: Path) -> ExperimentOutcome:
        return _write_outcome(experiment, place, rows, values, ctx, error, started, repeat)

    if not keep_elsewhere:
        return finish(directory)
    return write_or_keep(finish, directory, name=experiment.name, raw=raw_dir)


def _write_outcome(experiment: Experiment, directory: Path, rows: list[dict[str, Any]], values: dict[str, Any],
                   ctx: Context, error: FtlscopeError | None, started: float, repeat: int) -> ExperimentOutcome:
    """Analyse the points measured and write the experiment's directory: points, table, findings, figures and
    conditions."""
    raw_dir = directory / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    points = pd.DataFrame(rows)
    if not points.empty:
        points.to_parquet(raw_dir / "points.parquet", index=False)
    table = aggregate(points, experiment.keys) if not points.empty else points
    table.to_csv(directory / "results.csv", index=False)

    findings: dict[str, Any] = {}
    figures: list[Path] = []
    analysis_problem = None
    if not table.empty:
        try:
            findings = experiment.analyse(table, values)
            figures = experiment.figures(table, findings, values, directory)
        except Exception as exc:  # a partial table (interrupted run) may not support every finding
            if error is None:
                raise
            analysis_problem = f"analysis of the partial results failed: {exc}"
    health = ctx.health_usage()
    if experiment.writes:
        findings = {**findings, **{k: v for k, v in _health_findings(health).items() if k not in findings}}
    write_json(directory / "findings.json", findings)

    conditions = {
        "experiment": experiment.name,
        "summary": experiment.summary,
        "source": experiment.source,
        "writes": experiment.writes,
        "preconditioning": experiment.preconditioning,
        "params": values,
        "repetitions": repeat,
        "repetitions_completed": len({r["repetition"] for r in rows}),
        "target": _target_conditions(ctx),
        "env": {**system_env(), "engine": (ctx.first_summary or {}).get("env", {}).get("engine")},
        "started_at_unix": started,
        "device_time_s": ctx.device_time_ns / 1e9,
        "wall_time_s": ctx.wall_time_ns / 1e9,
        "health": health,
        "runs": ctx.runs,
        "notes": ctx.notes + ([analysis_problem] if analysis_problem else []),
        "completed": error is None,
        "stopped": None if error is None else error.message,
        "figures": [p.name for p in figures],
    }
    write_json(directory / "experiment.json", conditions)
    return ExperimentOutcome(experiment, directory, table, findings, figures, conditions, error)


def _repetitions(experiment: Experiment, ctx: Context, values: dict[str, Any], repetitions, repeat: int,
                 rows: list[dict[str, Any]]) -> None:
    """Run ``repetitions``, adding their points to ``rows`` as they come (an interruption keeps them)."""
    for repetition in repetitions:
        ctx.repetition = repetition
        ctx.label = f"{experiment.name} [{repetition + 1}/{repeat}]" if repeat > 1 else experiment.name
        if experiment.preconditioning != "none":
            ctx.precondition(experiment.preconditioning, values.get("span"))
        for row in experiment.measure(ctx, values):
            rows.append({"repetition": repetition, **row})


def _target_conditions(ctx: Context) -> dict[str, Any]:
    described = dict((ctx.first_summary or {}).get("target") or {})
    described.setdefault("name", ctx.target)
    described["kind"] = ctx.kind
    described["size_bytes"] = ctx.capacity
    described["logical_block_size"] = ctx.logical_block
    return described


def _health_findings(health: dict[str, Any]) -> dict[str, Any]:
    """What a writing experiment's measurement did to the drive, from its health counters: host and NAND bytes
    written and the highest temperature reported (each only where the drive reports it)."""
    measured = health["measurement"]
    source = f"health counters ({health.get('source') or 'health log'}) at the start and end of every run"
    out: dict[str, Any] = {}
    host, media = measured["host_bytes_written"], measured["media_bytes_written"]
    if host is not None:
        out["host_bytes_written"] = finding(host, "bytes", f"{format_size(host)} written by the host during the "
                                                           f"measurement (preconditioning not counted); {source}")
    if media is not None:
        wa = "" if measured["write_amplification"] is None else \
            f", {measured['write_amplification']:.2f}x the host's"
        out["nand_bytes_written"] = finding(media, "bytes", f"{format_size(media)} written to NAND during the "
                                                            f"measurement{wa}; {source}")
    if health["temperature_max_c"] is not None:
        out["temperature_max_c"] = finding(
            health["temperature_max_c"], "°C",
            f"highest temperature the drive reported during the experiment (first {health['temperature_first_c']}"
            f" °C, last {health['temperature_last_c']} °C); {source}")
    return out
