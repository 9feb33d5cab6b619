"""Running probes on a target: precondition as the paper requires (a refilled device for P1-P7, an erased one
for P8-P10), run each probe after the ones it builds on, time each on the device's clock, and write the answers:
``properties.json``, the Kelpie-style table as ``properties.md`` and ``properties.csv``, a figure per property
and the raw latencies (``raw/P<n>.parquet``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis.property_marks import legend
from ..env import system_env
from ..errors import FtlscopeError, RunError
from ..jsonable import write_json
from ..kept import failure, write_or_keep
from ..sim import SimDevice
from ..units import format_size
from . import NAMES, PROBES, parse_properties
from .base import ERASED, REFILLED, Answer
from .notation import has_detail, shown
from .truth import describe

DEFAULT_SPAN = 4 << 30


@dataclass
class ProbeReport:
    device: dict[str, Any]
    answers: dict[str, Answer]
    directory: Path | None
    preconditioning_device_time_s: float
    wall_time_s: float
    error: FtlscopeError | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "properties": {pid: a.to_json() for pid, a in self.answers.items()},
            "preconditioning_device_time_s": self.preconditioning_device_time_s,
            "wall_time_s": self.wall_time_s,
            "completed": self.error is None,
            "stopped": None if self.error is None else self.error.message,
            "notes": self.notes,
        }

    def table(self) -> pd.DataFrame:
        rows = []
        for pid, a in self.answers.items():
            alternatives = ", ".join(
                f"{describe(pid, alt['value'])} ({alt['confidence']:.2f})" if alt.get("confidence") is not None
                else describe(pid, alt["value"]) for alt in a.alternatives
            )
            rows.append({
                "property": pid,
                "name": NAMES[pid],
                "answer": describe(pid, a.value),
                "table 4": shown(pid, a.value, a.extra) if has_detail(pid, a.extra) else "",
                "confidence": None if a.confidence is None else round(float(a.confidence), 2),
                "alternatives": alternatives,
                "device_time_s": round(a.device_time_s, 3),
            })
        return pd.DataFrame(rows)


def probe_device(
    target: str | SimDevice,
    *,
    properties: str | None = None,
    out: str | Path | None = None,
    span: int = DEFAULT_SPAN,
    destructive: str | None = None,
    force: bool = False,
    size: int | None = None,
    engine: str = "auto",
    progress: bool = False,
    show_serial: bool = False,
) -> ProbeReport:
    """Probe ``properties`` (``"P1,P4"``; default all) on ``target``. Preconditioning writes: a block device
    needs ``destructive`` naming it again, as for any destructive run."""
    from ..experiments.context import Context, Interrupted

    wanted = parse_properties(properties)
    directory = Path(out) if out is not None else None
    raw_dir = (directory or Path(_scratch_dir())) / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    # No health log read beside the probes' runs: they time single requests, and a SMART log read at a run's
    # start would share the drive with its first ones.
    ctx = Context(target, raw_dir=raw_dir, writes=True, destructive=destructive, force=force, size=size,
                  engine=engine, progress=progress, label="probe", show_serial=show_serial, health_interval=0)
    started = time.monotonic()
    if span > ctx.capacity and span != DEFAULT_SPAN:
        # Said, not refused: the profile asks for its standard span on devices of every size.
        ctx.notes.append(f"--span {format_size(span)} is beyond the end of the device ({format_size(ctx.capacity)}); "
                         "probed the whole device")
    span = ctx.span(span)
    ctx.probe_span = span
    answers: dict[str, Answer] = {}
    preconditioning_ns = 0
    error: FtlscopeError | None = None
    state = None
    try:
        for pid in wanted:
            probe = PROBES[pid]
            if probe.needs != state:
                before = ctx.device_time_ns
                if probe.needs == REFILLED:
                    # Erase, then one full sequential write of the probed range (seed 003 §3.1).
                    ctx.precondition("purge", span)
                    ctx.precondition("sequential-fill", span)
                elif probe.needs == ERASED:
                    ctx.precondition("purge", span)
                preconditioning_ns += ctx.device_time_ns - before
                state = probe.needs
            ctx.label = f"probe {pid} ({NAMES[pid]})"
            before = ctx.device_time_ns
            answer = probe.run(ctx, answers, raw_dir.parent)
            answer.device_time_s = (ctx.device_time_ns - before) / 1e9
            answers[pid] = answer
            if answer.raw is not None and not answer.raw.empty:
                answer.raw.to_parquet(raw_dir / f"{pid}.parquet", index=False)
    except FtlscopeError as exc:
        error = exc
    except KeyboardInterrupt:
        error = Interrupted("interrupted; the answers found so far are kept")
    except OSError as exc:  # a raw file could not be written: stop, keep the answers found (below)
        error = RunError(f"stopped: {failure(exc, raw_dir)}")
    device = {
        "name": ctx.target,
        "kind": ctx.kind,
        "size_bytes": ctx.capacity,
        "logical_block_size": ctx.logical_block,
        "probed_span_bytes": span,
        "model": ((ctx.first_summary or {}).get("target") or {}).get("model"),
        "env": system_env(),
    }
    report = ProbeReport(device, answers, directory, preconditioning_ns / 1e9, time.monotonic() - started, error,
                         list(ctx.notes))
    if directory is not None:
        write_or_keep(lambda place: write_report(report, place), directory, name=directory.name, raw=raw_dir)
    return report


def write_report(report: ProbeReport, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    write_json(directory / "properties.json", report.to_json())
    table = report.table()
    table.to_csv(directory / "properties.csv", index=False)
    (directory / "properties.md").write_text(markdown_table(report))


def markdown_table(report: ProbeReport) -> str:
    lines = [f"Properties of {report.device['name']} ({format_size(report.device['size_bytes'])}, "
             f"probed over the first {format_size(report.device['probed_span_bytes'])})", "",
             "| property | answer | confidence | alternatives | device time |", "| --- | --- | --- | --- | --- |"]
    table = report.table()
    for row in table.to_dict("records"):
        confidence = "" if pd.isna(row["confidence"]) else f"{row['confidence']:.2f}"
        answer = row["table 4"] or row["answer"]  # the answer with its Table 4 notation and marks
        cells = [_cell(answer), confidence, _cell(row["alternatives"])]
        lines.append(f"| {row['property']} {row['name']} | {' | '.join(cells)} | {row['device_time_s']:.2f} s |")
    notes = legend_lines(table)
    lines += ["", *(f"{note}  " for note in notes)] if notes else []
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """A Markdown table cell: Table 4's two-level ``a | b`` would otherwise split the cell."""
    return str(text).replace("|", "\\|")


def legend_lines(table: pd.DataFrame) -> list[str]:
    """The legend under a property table: one line per mark its answers carry."""
    return legend(table["table 4"]) if "table 4" in table else []


def _scratch_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="ftlscope-probe-")
