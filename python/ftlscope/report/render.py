"""Rendering a profile record into ``report.html`` (one self-contained file: figures embedded as data URIs,
inline CSS, no script and no network fetch, laid out to read on a phone) and ``report.md`` (figures
referenced beside it). Both come from the same view of the record, built here; the Jinja2 templates only lay
it out."""

from __future__ import annotations

import base64
import math
import re
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from .. import metrics, plots
from ..analysis.property_marks import legend
from ..units import format_size
from .card import SPEC_TOLERANCE, build_card, corner_rows
from .facts import Facts, format_bytes, significant
from .guidance import build_guidance
from .references import REFERENCES, cite
from .sentences import sentence
from .tables import direction_pivots, percent_of_peak

MAX_TABLE_ROWS = 24
# Columns a reader scans first; the full table is in results.csv beside the report.
MAIN_METRICS = (metrics.IOPS, "pct_of_peak", metrics.MB_S, metrics.LAT_MEAN_US, metrics.LAT_P50_US,
                metrics.LAT_P99_US, metrics.LAT_P99_9_US, metrics.SLOW_SHARE)
# Columns shown as percentages: (column, factor to %).
PERCENT_COLUMNS = {metrics.SLOW_SHARE: 100.0, "pct_of_peak": 1.0}
PROPERTY_ORDER = ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ftlscope.report", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return env


def anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")


def figure_id(path: str | None) -> str | None:
    """The HTML id a figure is shown under, so the card, the guidance and the property table can link to it."""
    return "fig-" + anchor(path) if path else None


def render_report(record: dict[str, Any], directory: Path, out: Path | None = None) -> list[Path]:
    """Write ``report.html`` and ``report.md`` for ``record`` (whose files live in ``directory``) into ``out``
    (default: ``directory``). Returns the two paths."""
    out = Path(out) if out is not None else Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    return write_pages("report", build_view(record, Path(directory), out), out)


def write_pages(name: str, view: dict[str, Any], out: Path, template: str | None = None) -> list[Path]:
    """Render ``templates/TEMPLATE.html.j2`` and ``TEMPLATE.md.j2`` (``template`` defaults to ``name``) with
    ``view`` into ``out/NAME.html`` and ``.md``."""
    env = _environment()
    pages = []
    for suffix in ("html", "md"):
        page = out / f"{name}.{suffix}"
        page.write_text(env.get_template(f"{template or name}.{suffix}.j2").render(**view))
        pages.append(page)
    return pages


def build_view(record: dict[str, Any], directory: Path, out: Path) -> dict[str, Any]:
    """Everything the templates show, as plain strings and lists."""
    facts = Facts(record)
    target = record.get("target") or {}
    missing: list[str] = []

    def figure(path: str | None, caption: str = "") -> dict[str, Any] | None:
        if not path:
            return None
        file = directory / path
        if not file.is_file():
            missing.append(path)
            return None
        # A figure's own caption (a sentence saved in the PNG) first; a probe's name or the file name only for
        # figures saved without one.
        own = plots.caption_of(file)
        return {**embed_figure(file, out), "id": figure_id(path), "caption": own or caption or Path(path).stem}

    card = build_card(record)
    for row in card:
        row["figure_id"] = figure_id(row.get("figure"))
    guidance = build_guidance(record)
    for advice in guidance:
        for evidence in advice["evidence"]:
            evidence["figure_id"] = figure_id(evidence.get("figure"))
            evidence["figure_path"] = _relative(directory / evidence["figure"], out) if evidence.get("figure") else None

    properties = []
    for pid in PROPERTY_ORDER:
        answer = facts.properties.get(pid)
        if answer is None:
            continue
        alternatives = ", ".join(
            f"{alt.get('answer') or alt.get('value')}"
            + (f" ({alt['confidence']:.2f})" if alt.get("confidence") is not None else "")
            for alt in answer.get("alternatives") or []
        )
        figures = [f for f in (figure(p, f"{pid} {answer.get('name', '')}") for p in answer.get("figures") or []) if f]
        properties.append({
            "pid": pid, "name": answer.get("name", ""), "answer": answer_text(facts, pid, answer),
            "confidence": "" if answer.get("confidence") is None else f"{answer['confidence']:.2f}",
            "alternatives": alternatives, "device_time": f"{answer.get('device_time_s') or 0:.2f} s",
            "figures": figures,
        })

    sections = []
    for entry in record.get("experiments") or []:
        figures = [f for f in (figure(p) for p in entry.get("figures") or []) if f]
        sections.append({
            "name": entry["name"], "anchor": "exp-" + anchor(entry["name"]), "summary": cite(entry.get("summary", "")),
            "source": cite(entry.get("source", "")), "sentence": sentence(facts, entry["name"]),
            "figures": figures, "table": _table(directory / entry["results"], entry.get("keys") or [], entry["name"]),
            "pivots": _pivots(directory / entry["results"], entry["name"]),
            "results_path": _relative(directory / entry["results"], out), "completed": entry.get("completed", True),
            "stopped": entry.get("stopped"), "params": _shown_params(entry),
            "device_time": _seconds(entry.get("device_time_s")), "wall_time": _seconds(entry.get("wall_time_s")),
        })

    probes = record.get("probes") or None
    return {
        "record": record,
        "title": target.get("model") or target.get("name") or "device",
        "target": target,
        "target_rows": _target_rows(target),
        "card": card,
        "corners": corner_rows(record),
        "references": list(REFERENCES),
        "spec_tolerance_pct": round(SPEC_TOLERANCE * 100),
        "has_spec": bool(record.get("spec")),
        "guidance": guidance,
        "properties": properties,
        "property_legend": legend(p["answer"] for p in properties),
        "probes": probes,
        "sections": sections,
        "environment_rows": _environment_rows(record),
        "health_rows": _health_rows(record.get("health_before"), record.get("health_after")),
        "notes": list(record.get("notes") or []) + [f"figure missing from the run directory: {p}" for p in missing],
    }


def answer_text(facts: Facts, pid: str, answer: dict[str, Any]) -> str:
    """A probe's answer in the card's units (P10 ``32 ms``, not ``0.032 s``): sizes and the flush window are
    formatted as the card formats them; other answers are the probe's words."""
    if answer.get("notation"):
        return answer["notation"]  # Table 4's notation: the value with its partial flush, second level, ...
    evidence = facts.prop(pid)
    if evidence is not None and evidence.unit and isinstance(evidence.value, int | float) and evidence.value:
        return evidence.display
    return answer.get("answer") or str(answer.get("value"))


def embed_figure(file: Path, out: Path) -> dict[str, Any]:
    """A PNG as the report uses it: its path relative to the report (Markdown), its bytes as a data URI
    (HTML: one self-contained file), and whether it is wide (several panels side by side: a full row)."""
    data = file.read_bytes()
    # A PNG's IHDR chunk holds width and height as big-endian 32-bit integers at bytes 16-24.
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return {"path": _relative(file, out), "data_uri": "data:image/png;base64," + base64.b64encode(data).decode(),
            "wide": height > 0 and width / height > 2.2}


def _relative(path: Path, start: Path) -> str:
    import os

    return Path(os.path.relpath(path, start)).as_posix()


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 3600:
        return f"{value / 3600:.2f} h"
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s"


def _shown_params(entry: dict[str, Any]) -> str:
    """The parameters as the user writes them (``span=16 GiB``); records from before ``params_shown`` existed
    fall back to the raw values."""
    shown = entry.get("params_shown")
    return ", ".join(f"{k}={v}" for k, v in shown.items()) if shown else _params(entry.get("params") or {})


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_cell(v)}" for k, v in params.items())


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if float(value).is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value)
    return str(value)


def _read(path: Path) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return None


def _pivots(path: Path, name: str) -> list[dict[str, Any]]:
    frame = _read(path)
    return [] if frame is None else direction_pivots(name, frame)


def _table(path: Path, keys: list[str], name: str = "") -> dict[str, Any] | None:
    """The experiment's results as a short table: its key columns and the main metrics (mean ± 95 % CI when
    there were repetitions); long time series are thinned, and the note says where the full table is."""
    frame = _read(path)
    if frame is None or frame.empty:
        return None
    frame = percent_of_peak(name, frame)
    note = ""
    total = len(frame)
    if "phase" in frame.columns and (frame["phase"] == "window").any() and (frame["phase"] != "window").any():
        frame = frame[frame["phase"] != "window"]
        note = f"time windows left out ({total - len(frame)} rows)"
    if len(frame) > MAX_TABLE_ROWS:
        step = math.ceil(len(frame) / MAX_TABLE_ROWS)
        frame = frame.iloc[::step]
        note = f"every {step}th of {total} rows"
    key_columns = [k for k in keys if k in frame.columns and frame[k].nunique(dropna=False) > 1] or \
        [k for k in keys if k in frame.columns][:1]
    metrics = [m for m in MAIN_METRICS if m in frame.columns]
    repeated = "n" in frame.columns and frame["n"].max() > 1
    columns = [*key_columns, *metrics]
    rows = []
    for _, row in frame.iterrows():
        cells = []
        for column in columns:
            value = row[column]
            if column in ("size", "working_set", "offset") and isinstance(value, int | float) and not pd.isna(value):
                text = format_size(value)
            elif column.endswith("_bytes") and isinstance(value, int | float) and not pd.isna(value):
                text = format_bytes(value)
            elif column in PERCENT_COLUMNS and isinstance(value, int | float) and not pd.isna(value):
                text = significant(float(value) * PERCENT_COLUMNS[column]) if value else "0"
            else:
                text = _cell(value.item() if hasattr(value, "item") else value)
            if repeated and column in metrics and f"{column}_ci" in frame.columns and not pd.isna(row[f"{column}_ci"]):
                text += f" ± {_cell(float(row[f'{column}_ci']) * PERCENT_COLUMNS.get(column, 1.0))}"
            cells.append(text)
        rows.append(cells)
    headers = [_header(c) for c in columns]
    return {"columns": headers, "rows": rows, "note": note}


def _header(column: str) -> str:
    names = {metrics.IOPS: "IOPS", metrics.MB_S: "MB/s", metrics.LAT_MEAN_US: "mean µs", metrics.LAT_P50_US: "p50 µs",
             metrics.LAT_P99_US: "p99 µs", metrics.LAT_P99_9_US: "p99.9 µs", metrics.SLOW_SHARE: "% > 1 ms",
             "qd": "QD", "pct_of_peak": "% of peak", "offset_bytes": "offset", "window_index": "window",
             "position_bytes": "position"}
    return names.get(column, column.replace("_", " "))


def _target_rows(target: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [
        ("target", target.get("name")), ("kind", target.get("kind")), ("model", target.get("model")),
        ("serial", target.get("serial") or target.get("serial_hash")), ("firmware", target.get("firmware")),
        ("capacity", f"{format_bytes(target['size_bytes'])} ({target['size_bytes']:,} B)"
         if target.get("size_bytes") else None),
        ("LBA format", _lba(target)), ("I/O scheduler", target.get("scheduler")),
        ("rotational", None if target.get("rotational") is None else "yes" if target["rotational"] else "no"),
        ("transport", target.get("transport")), ("description", target.get("description")),
    ]
    return [(k, cite(str(v))) for k, v in rows if v not in (None, "")]


def _lba(target: dict[str, Any]) -> str | None:
    logical, physical = target.get("logical_block_size"), target.get("physical_block_size")
    if not logical:
        return None
    text = f"{logical} B logical" + (f", {physical} B physical" if physical else "")
    return text + (f" (NVMe LBA format {target['lba_format']})" if target.get("lba_format") else "")


def _environment_rows(record: dict[str, Any]) -> list[tuple[str, str]]:
    env = record.get("env") or {}
    engine = env.get("engine") or {}
    memory = env.get("memory_bytes")
    rows = [
        ("ftlscope", env.get("ftlscope_version")),
        ("suite", f"{record.get('suite')} — {record.get('suite_summary', '')}"),
        ("run", record.get("run_id")), ("started (UTC)", record.get("created_at")),
        ("kernel", env.get("kernel")), ("distribution", env.get("distribution")),
        ("CPU", f"{env.get('cpu_model')} ({env.get('cpus')} CPUs, governor {env.get('cpu_governor')})"),
        ("memory", format_size(memory) if memory else None), ("clock source", env.get("clocksource")),
        ("engine", _engine_text(engine)),
        ("options", _options(record.get("options") or {})),
        ("time", f"{_seconds(record.get('wall_time_s'))} wall, {_seconds(record.get('device_time_s'))} device"),
        ("completed", "yes" if record.get("completed") else f"no — {record.get('stopped')}"),
    ]
    return [(k, str(v)) for k, v in rows if v not in (None, "")]


def _options(options: dict[str, Any]) -> str:
    shown = dict(options)
    if "span" in shown:
        shown["span"] = format_size(shown["span"]) if shown["span"] else "whole target"
    return _params(shown)


def _engine_text(engine: Any) -> str | None:
    if not isinstance(engine, dict):
        return None if engine is None else str(engine)
    setup = engine.get("backend_setup") or {}
    clock = engine.get("clock") or {}
    parts = [
        engine.get("backend_reason") or engine.get("backend"),
        "registered file and buffers" if setup.get("registered_file") and setup.get("registered_buffers") else None,
        f"pinned to CPU {', '.join(map(str, engine['pinned_cpus']))}" if engine.get("pinned_cpus") else None,
        f"clock {clock['source']}" + (f" at {clock['tsc_hz'] / 1e9:.3f} GHz" if clock.get("tsc_hz") else "")
        if clock.get("source") else None,
    ]
    return ", ".join(str(p) for p in parts if p) or None


HEALTH_COUNTERS = (
    ("temperature_c", "temperature (°C)"), ("host_bytes_written", "host bytes written"),
    ("media_bytes_written", "NAND bytes written"), ("host_bytes_read", "host bytes read"),
    ("percentage_used", "percentage used"), ("media_errors", "media errors"), ("erase_count", "erase count"),
    ("power_on_hours", "power-on hours"), ("available_spare_pct", "available spare (%)"),
    ("unsafe_shutdowns", "unsafe shutdowns"), ("thermal_throttle_s", "time throttled (s)"),
)


def _health_rows(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[dict[str, str]]:
    before, after = before or {}, after or {}
    rows = []
    for key, label in HEALTH_COUNTERS:
        b, a = before.get(key), after.get(key)
        if b is None and a is None:
            continue
        delta = a - b if isinstance(a, int | float) and isinstance(b, int | float) else None
        fmt = format_bytes if "bytes" in key else _cell
        rows.append({"counter": label, "before": "" if b is None else fmt(b), "after": "" if a is None else fmt(a),
                     "change": "" if delta is None else (fmt(delta) if delta >= 0 else "-" + fmt(-delta))})
    host = (after.get("host_bytes_written") or 0) - (before.get("host_bytes_written") or 0)
    media = (after.get("media_bytes_written") or 0) - (before.get("media_bytes_written") or 0)
    if host > 0 and media > 0:
        rows.append({"counter": "write amplification during the profile", "before": "", "after": "",
                     "change": f"{media / host:.2f}"})
    return rows
