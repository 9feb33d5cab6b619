"""``ftlscope profile``: from a device to a report in one command.

It checks the target (safety first: everything a suite does is refused before anything is touched), records
who the device is and the conditions, reads its health, runs the suite's probes and experiments one after
another on the same device (a simulated one is opened once, so its state carries over as a real drive's
would), reads the health again, and writes ``DIR/profile.json`` — the record the report, the store of runs,
``compare`` and ``export`` read. The record is rewritten after every step, so an interrupted profile (Ctrl-C,
a device error) keeps everything measured so far and still gets its report.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..env import system_env
from ..errors import FtlscopeError, RunError, UsageError
from ..experiments import get as get_experiment
from ..experiments import run_experiment
from ..experiments.context import Context, Interrupted
from ..jsonable import write_json
from ..probes import NAMES
from ..probes.notation import MARK_KEYS, has_detail, shown
from ..probes.runner import DEFAULT_SPAN as PROBE_SPAN
from ..probes.runner import probe_device
from ..probes.truth import NOTATION_KEYS, describe
from ..runner import job_progress
from ..sim import SimDevice
from ..units import parse_size
from .suites import Suite, get_suite
from .target import describe_target, hash_serial

DEFAULT_TARGET = "sim:consumer-tlc-dram"
SCHEMA = 1


@dataclass
class ProfileOutcome:
    record: dict[str, Any]
    directory: Path
    error: FtlscopeError | None = None
    reports: list[Path] = field(default_factory=list)
    store_path: Path | None = None

    @property
    def run_id(self) -> str:
        return self.record["run_id"]


class _LateFailure(RunError):
    """The surroundings failed after the checks passed (a full disk, a mount gone) while a step wrote its files:
    the profile stops there and keeps, and stores, what it measured before, as an interrupted one does."""

    @classmethod
    def of(cls, exc: OSError, directory: Path) -> _LateFailure:
        where = f"{exc.filename}: " if exc.filename else ""
        return cls(f"{where}{exc.strerror or exc}; the results measured before it are kept in {directory}/")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")[:48] or "device"


def profile(
    target: str | SimDevice | None = None,
    *,
    suite: str | Suite = "quick",
    out: str | Path | None = None,
    span: int | None = None,
    spec: dict[str, Any] | None = None,
    show_serial: bool = False,
    destructive: str | None = None,
    force: bool = False,
    size: int | None = None,
    engine: str = "auto",
    repeat: int = 1,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> ProfileOutcome:
    """Profile ``target`` (default: the built-in simulated consumer SSD) with ``suite`` and write ``out``.
    The report and the store are the caller's (see :func:`finish`), so a profile can be re-rendered."""
    say = log or (lambda _text: None)
    chosen = suite if isinstance(suite, Suite) else get_suite(suite)
    target = DEFAULT_TARGET if target is None else target
    device = target if isinstance(target, SimDevice) else SimDevice.open(target) if target.startswith("sim:") \
        else None
    subject: str | SimDevice = device if device is not None else str(target)

    identity = describe_target(subject, show_serial=show_serial)
    chosen = chosen.for_target(bool(identity.get("rotational")))
    started = datetime.now(UTC)
    run_id = f"{started:%Y%m%d-%H%M%S}-{_slug(identity['identity'].removeprefix('sim:'))}"
    directory = Path(out) if out is not None else Path("ftlscope-profiles") / run_id
    if (directory / "profile.json").exists():
        # Mixing two runs' files in one directory would mislead the report and the store's file list.
        raise UsageError(f"--out: {directory} already holds a profile; choose another directory or remove it")
    # The profile's own view of the target: the safety checks of a writing run happen here, before the
    # health read, the probes or any experiment touch the device (and a file target is created with --size).
    ctx = Context(subject, raw_dir=directory / "raw", writes=True, destructive=destructive, force=force, size=size,
                  engine=engine, progress=progress, label="profile", show_serial=show_serial)
    directory.mkdir(parents=True, exist_ok=True)
    identity["size_bytes"] = identity.get("size_bytes") or ctx.capacity
    identity["logical_block_size"] = identity.get("logical_block_size") or ctx.logical_block

    record: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": run_id,
        "created_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "suite": chosen.name,
        "suite_summary": chosen.summary,
        "options": {"span": span, "repeat": repeat, "show_serial": show_serial, "engine": engine},
        "target": identity,
        "env": system_env(),
        "health_before": _health(ctx),
        "health_after": None,
        "spec": spec or {},
        "probes": None,
        "experiments": [],
        "notes": list(ctx.notes),
        "completed": False,
        "stopped": None,
        "wall_time_s": 0.0,
        "device_time_s": 0.0,
    }
    run = _Run(record, directory, ctx, time.monotonic(), ctx.device_time_ns)
    # What every probe and experiment is run with: the target's safety flags, the engine, progress bars.
    io = {"destructive": destructive, "force": force, "engine": engine, "progress": progress,
          "show_serial": show_serial}
    steps = [*([None] if chosen.probes else []), *chosen.steps]
    names = ["probes" if step is None else step.experiment for step in steps]
    bar = (job_progress(f"{chosen.name} profile", names, chosen.name) if progress
           else contextlib.nullcontext((None, None)))
    try:
        with bar as (advance, bar_console):
            error = _run_steps(run, steps, subject, span, repeat, io, advance,
                               say if bar_console is None else lambda text: bar_console.print(f"[bold]{text}[/bold]"))
    except KeyboardInterrupt:
        error = Interrupted("interrupted; the results measured so far are kept")
    except FtlscopeError as exc:
        error = exc
    except OSError as exc:
        error = _LateFailure.of(exc, directory)
    record["health_after"] = _health(ctx)
    record["completed"] = error is None
    record["stopped"] = None if error is None else error.message
    run.save()
    if identity.get("serial_hash") and not show_serial:
        _redact_serial(directory, ctx, identity["serial_hash"])
    return ProfileOutcome(record, directory, error)


@dataclass
class _Run:
    """A profile in progress: its record, where it is written, and the clocks its times are taken from."""

    record: dict[str, Any]
    directory: Path
    ctx: Context
    wall_start: float
    device_start: int

    def save(self) -> None:
        record = self.record
        record["env"]["engine"] = _engine(record)
        record["wall_time_s"] = time.monotonic() - self.wall_start
        record["device_time_s"] = (self.ctx.device_time_ns - self.device_start) / 1e9
        write_json(self.directory / "profile.json", record)


def _run_steps(run: _Run, steps, subject, span, repeat, io, advance, say) -> FtlscopeError | None:
    """Run the probes and experiments in order; the error that stops the profile (an interruption), if any."""
    record, directory, ctx = run.record, run.directory, run.ctx
    for number, step in enumerate(steps, 1):
        name = "probes P1-P10" if step is None else step.experiment
        if advance is not None:
            advance(f"profile {number}/{len(steps)}: {name}", number - 1)
        if step is None:
            say(f"[{number}/{len(steps)}] probes P1-P10")
            error = _run_probes(record, subject, directory, span, io)
        else:
            experiment = get_experiment(step.experiment)
            say(f"[{number}/{len(steps)}] {experiment.name}: {experiment.summary}")
            params = _params(experiment, step.params, span, ctx.capacity)
            # keep_elsewhere=False: a late write failure ends the profile, which keeps and stores what it has
            outcome = run_experiment(experiment, subject, out=directory / "experiments", params=params,
                                     repeat=repeat, keep_elsewhere=False, **io)
            record["experiments"].append(_experiment_entry(outcome, directory))
            error = outcome.error
            if experiment.writes and error is None:
                _flush(ctx, record)
            if error is not None and not isinstance(error, Interrupted):
                # One experiment failing (a command the target lacks, a device error) does not void the
                # others: note it and go on; an interruption stops the profile.
                record["notes"].append(f"{experiment.name} stopped: {error.message}")
                error = None
        if error is not None:
            return error
        run.save()
    return None


def _params(experiment, given: dict[str, str], span: int | None, capacity: int) -> dict[str, str]:
    """The step's parameters, with every range confined to the first ``span`` bytes when the user asked."""
    params = dict(given)
    if span is not None and any(p.name == "span" for p in experiment.params):
        current = parse_size(params["span"], "span") if "span" in params else experiment.defaults()["span"]
        current = capacity if current in (0, None) else current
        params["span"] = str(min(current, span))
    return params


def _run_probes(record, subject, directory, span, io) -> FtlscopeError | None:
    if record["target"].get("rotational"):
        record["notes"].append("probes skipped: they infer flash internals, and this is a rotating disk")
        return None
    report = probe_device(subject, out=directory / "probes", span=min(PROBE_SPAN, span or PROBE_SPAN), **io)
    properties = {}
    for pid, answer in report.answers.items():
        properties[pid] = {
            "name": NAMES[pid],
            "value": answer.value,
            "answer": describe(pid, answer.value),
            "confidence": answer.confidence,
            "alternatives": [{**alt, "answer": describe(pid, alt.get("value"))} for alt in answer.alternatives],
            "device_time_s": answer.device_time_s,
            "figures": [f"probes/{Path(p).name}" for p in answer.figures],
        }
        if has_detail(pid, answer.extra):
            # Table 4's notation (``11.50 MiB p 7.50 MiB | 406 MiB``, ``4 ✗``, ``200 ms | 2.5 s``), ftlscope's
            # marks (``4 ch x 4 chips ‡``) and their parts.
            properties[pid]["notation"] = shown(pid, answer.value, answer.extra)
            properties[pid]["details"] = {k: v for k, v in answer.extra.items()
                                          if k in NOTATION_KEYS.get(pid, ()) or k in MARK_KEYS}
    record["probes"] = {
        "directory": "probes",
        "completed": report.error is None,
        "stopped": None if report.error is None else report.error.message,
        "device_time_s": report.preconditioning_device_time_s + sum(a.device_time_s for a in report.answers.values()),
        "wall_time_s": report.wall_time_s,
        "span_bytes": report.device["probed_span_bytes"],
        "properties": properties,
    }
    record["notes"].extend(report.notes)
    error = report.error
    if error is not None and not isinstance(error, Interrupted):
        record["notes"].append(f"probes stopped: {error.message}")
        return None
    return error


def _experiment_entry(outcome, directory: Path) -> dict[str, Any]:
    rel = outcome.directory.relative_to(directory).as_posix()
    conditions = outcome.conditions
    return {
        "name": outcome.experiment.name,
        "summary": outcome.experiment.summary,
        "source": outcome.experiment.source,
        "writes": outcome.experiment.writes,
        "preconditioning": outcome.experiment.preconditioning,
        "directory": rel,
        "keys": list(outcome.experiment.keys),
        "params": conditions["params"],
        "params_shown": {p.name: p.show(conditions["params"].get(p.name)) for p in outcome.experiment.params},
        "completed": outcome.error is None,
        "stopped": conditions["stopped"],
        "device_time_s": conditions["device_time_s"],
        "wall_time_s": conditions["wall_time_s"],
        "findings": outcome.findings,
        "figures": [f"{rel}/{p.name}" for p in outcome.figures],
        "results": f"{rel}/results.csv",
        "runs": [{**run, "summary": f"{rel}/raw/{run['summary']}"} for run in conditions["runs"]],
        "notes": conditions["notes"],
        "engine": conditions["env"].get("engine"),
    }


def _flush(ctx: Context, record: dict[str, Any]) -> None:
    """After an experiment that writes, the next one should find nothing pending in the device's caches."""
    before = ctx.device_time_ns
    try:
        ctx.flush()
    except Interrupted:
        raise
    except FtlscopeError as exc:
        record["notes"].append(f"the write cache could not be flushed between experiments: {exc.message}")
        return
    record.setdefault("flushes", []).append({"after": record["experiments"][-1]["name"],
                                             "device_time_s": (ctx.device_time_ns - before) / 1e9})


def _engine(record: dict[str, Any]) -> Any:
    for entry in record["experiments"]:
        if entry.get("engine"):
            return entry["engine"]
    return record["env"].get("engine")


def _health(ctx: Context) -> dict[str, Any] | None:
    try:
        return ctx.health()
    except Exception as exc:  # a health log the target cannot give is a gap in the report, not a failure
        return {"available": False, "reason": str(exc)}


def _redact_serial(directory: Path, ctx: Context, serial_hash: str) -> None:
    """The engine's summaries name the drive's serial number; without --show-serial, the profile directory
    holds only its hash (the report may be shared)."""
    from ..devices import resolve_block_device

    dev = resolve_block_device(ctx.target)
    serial = dev.serial if dev is not None else None
    if not serial or hash_serial(serial) != serial_hash:
        return
    for path in directory.rglob("*.json"):
        text = path.read_text()
        if serial in text:
            path.write_text(text.replace(serial, serial_hash))


def finish(outcome: ProfileOutcome, *, db: str | Path | None = None, store: bool = True) -> ProfileOutcome:
    """Derive the card and the guidance, write the reports, and add the run to the store."""
    from ..report.card import build_card
    from ..report.guidance import build_guidance
    from ..report.render import render_report
    from ..store import RunStore

    record = outcome.record
    if store:  # the guidance cites a gain 'ftlscope newt' measured on this drive before
        from ..newt.stored import attach_newt_runs

        attach_newt_runs(record, RunStore(db, create=False))
    record["card"] = build_card(record)
    record["guidance"] = build_guidance(record)
    write_json(outcome.directory / "profile.json", record)
    outcome.reports = render_report(record, outcome.directory)
    if store:
        run_store = RunStore(db)
        run_store.add(record, outcome.directory.resolve())
        outcome.store_path = run_store.path
        if isinstance(outcome.error, _LateFailure):  # the one line the user sees says where the results are
            outcome.error = RunError(f"{outcome.error.message} and stored as {outcome.run_id} in {run_store.path}")
    return outcome
