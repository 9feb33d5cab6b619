"""One naming module (ftlscope.metrics): every finding the report reads is declared there and emitted by its
experiment, and every column name of the tabular outputs is SQL-friendly (no dot, no reserved word)."""

from __future__ import annotations

import inspect
import re
import string
import sys

import pandas as pd
import pytest

from ftlscope import metrics
from ftlscope.experiments import EXPERIMENTS
from ftlscope.report import guidance
from ftlscope.report.card import CORNERS, ITEMS, build_card, corner_rows
from ftlscope.report.facts import Facts
from ftlscope.report.sentences import TEMPLATES, sentence
from ftlscope.store import COLUMNS


def _record_with_every_finding(rotational: bool = False) -> dict:
    """A record in which every declared finding has a value, so every rule reads as far as it can."""
    experiments = []
    for name, keys in metrics.FINDINGS.items():
        found = {key: {"value": 2.0, "unit": "", "evidence": "test"} for key in keys}
        experiments.append({"name": name, "findings": found, "figures": [], "params": {}})
    return {"target": {"name": "sim:test", "rotational": rotational}, "experiments": experiments,
            "probes": {"properties": {}}, "spec": {}}


def _reads(monkeypatch) -> set[tuple[str, str]]:
    """Every (experiment, finding) the guidance, the card and the sentences look up."""
    read: set[tuple[str, str]] = set()
    lookup = Facts.finding

    def spy(self, experiment, name, figure=None):
        read.add((experiment, name))
        return lookup(self, experiment, name, figure)

    monkeypatch.setattr(Facts, "finding", spy)
    for rotational in (False, True):
        record = _record_with_every_finding(rotational)
        guidance.build_guidance(record)
        build_card(record)
        corner_rows(record)
        facts = Facts(record)
        for name in TEMPLATES:
            sentence(facts, name)
    return read


def test_every_finding_the_report_reads_is_declared(monkeypatch):
    read = _reads(monkeypatch)
    declared = {(name, key) for name, keys in metrics.FINDINGS.items() for key in keys}
    # Statically too: the card's sources and every sentence template's fields.
    for item in ITEMS:
        read |= {(source, key) for source, key in item.sources if source != "probes"}
    for _label, prefix, metric, _unit in CORNERS:
        read |= {("corners", f"{prefix}_{op}_{metric}") for op in ("read", "write")}
    for name, templates in TEMPLATES.items():
        for template in templates:
            text = template[0] if isinstance(template, tuple) else template
            read |= {(name, field) for _, field, _, _ in string.Formatter().parse(text) if field}
    assert read - declared == set(), "read by the report but not declared in ftlscope.metrics.FINDINGS"


def _emitted_patterns(experiment) -> list[re.Pattern]:
    """The finding names an experiment's analysis writes, from its source: literal names, and f-string names
    with each ``{...}`` standing for any text."""
    source = inspect.getsource(sys.modules[experiment.analyse.__module__])
    names = re.findall(r"""(?:findings|found)\[(f?)["']([^"']+)["']\]""", source)
    names += re.findall(r"""(f?)["']([a-z0-9_{}]+)["']\s*:\s*finding\(""", source)
    patterns = []
    for is_f, name in names:
        regex = re.escape(name) if not is_f else "".join(
            ".*" if part.startswith("{") else re.escape(part) for part in re.split(r"(\{[^}]*\})", name))
        patterns.append(re.compile(f"^{regex}$"))
    return patterns


def _reset_behaviour_emits() -> set[str]:
    """reset-behaviour builds its names from parts (``key + suffix``): run its analysis on a table with every
    step done instead of reading its source."""
    steps = ("baseline", "pre-reset", "post-reset", "post-power-cycle")
    rows = [{"step": step, "data": data, "status": "done", "service_us": 10.0 + i, "first_lat_mean_us": 20.0 + i}
            for i, step in enumerate(steps) for data in ("resident", "recent")]
    rows += [{"step": action, "data": "-", "status": "done", "duration_ms": 5.0}
             for action in ("controller-reset", "power-cycle")]
    experiment = EXPERIMENTS["reset-behaviour"]
    return set(experiment.analyse(pd.DataFrame(rows), experiment.defaults()))


@pytest.mark.parametrize("name", sorted(metrics.FINDINGS))
def test_every_declared_finding_is_one_its_experiment_emits(name):
    assert name in EXPERIMENTS, f"{name} is declared but is no experiment"
    if name == "reset-behaviour":
        missing = sorted(set(metrics.FINDINGS[name]) - _reset_behaviour_emits())
    else:
        patterns = _emitted_patterns(EXPERIMENTS[name])
        missing = [key for key in metrics.FINDINGS[name] if not any(p.match(key) for p in patterns)]
    assert not missing, f"{name} never writes {missing}"


def test_column_names_are_sql_friendly():
    columns = set(metrics.WINDOW_COLUMNS) | set(metrics.SUMMARY_COLUMNS)
    columns |= {column for _, column in metrics.LATENCY_COLUMNS}
    columns |= {name for table in COLUMNS.values() for name in table}
    columns |= set(metrics.TRACE_COLUMNS)
    for experiment in EXPERIMENTS.values():
        columns |= set(experiment.keys)
    bad = sorted(c for c in columns if not metrics.sql_friendly(c))
    assert not bad, f"not SQL-friendly: {bad}"
    assert not metrics.sql_friendly("lat_p99.9_ns") and not metrics.sql_friendly("window")
    assert not metrics.sql_friendly("offset")


def test_the_trace_has_the_columns_the_naming_module_declares(tmp_path):
    import ftlscope

    result = ftlscope.run("sim:consumer-tlc-dram", ftlscope.from_flags(rw="randread", ops=16), trace=True)
    assert tuple(result.trace.columns) == metrics.TRACE_COLUMNS
    result.save_trace(tmp_path / "t.parquet")
    assert tuple(pd.read_parquet(tmp_path / "t.parquet").columns) == metrics.TRACE_COLUMNS
    assert metrics.latency_column("p99.9") == "lat_p99_9_us" == metrics.LAT_P99_9_US


def test_the_report_table_asks_for_the_p99_9_column_the_experiments_write():
    from ftlscope.experiments._common import LATENCY_COLUMNS
    from ftlscope.report.render import MAIN_METRICS

    written = {column for _, column in LATENCY_COLUMNS}
    assert metrics.LAT_P99_9_US in MAIN_METRICS and metrics.LAT_P99_9_US in written
