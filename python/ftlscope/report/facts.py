"""What the report knows about a run: the findings of its experiments and the answers of its probes, looked
up by name, each carried with its unit, a display string and the figure it can be seen in — so every line of
the summary card and of the guidance can cite exactly the number it rests on."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..units import format_size

PROBES = "probes"


@dataclass(frozen=True)
class Evidence:
    source: str  # experiment name, or "probes"
    finding: str  # finding name, or property id (P1..P10)
    value: Any
    unit: str
    display: str
    figure: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "finding": self.finding, "value": self.value, "unit": self.unit,
                "display": self.display, "figure": self.figure}


def format_value(value: Any, unit: str) -> str:
    """A finding's value as the report prints it: ``13.0 GB``, ``67 µs``, ``494,596 IOPS``, ``QD 32``. Never in
    e-notation; a share under 0.1 % prints as ``< 0.1 %``; a ratio always with its decimals (``1.00x``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if unit in ("B", "bytes"):
        return format_bytes(value)
    if unit == "us":
        return format_us(value)
    if unit == "ms":
        return format_us(value * 1e3)
    if unit == "s":
        return format_seconds(value)
    if unit == "QD":
        return f"QD {value:g}"
    if unit == "IOPS":
        return f"{value:,.0f} IOPS"
    if unit == "MB/s":
        return f"{value:,.0f} MB/s" if value >= 100 else f"{significant(value)} MB/s"
    if unit == "%":
        return format_percent(value)
    if unit == "share":
        return format_percent(value * 100)
    if unit == "ratio":
        return format_ratio(value)
    return f"{significant(value, 4)} {unit}".strip()


def significant(value: float, digits: int = 3) -> str:
    """``digits`` significant digits, positional (never ``2.68e-05``), thousands separated from 1,000 up."""
    if abs(value) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    return np.format_float_positional(value, precision=digits, unique=False, fractional=False, trim="-")


def format_percent(value: float) -> str:
    if 0 < abs(value) < 0.1:
        return "< 0.1 %" if value > 0 else "> -0.1 %"
    return f"{significant(value)} %"


def format_ratio(value: float) -> str:
    """``8.23x``, ``1.00x`` (not ``1x``: two decimals under 10, so a ratio never reads as a bare integer)."""
    if abs(value) >= 100:
        return f"{value:,.0f}x"
    if abs(value) >= 10:
        return f"{value:.1f}x"
    return f"{value:.2f}x"


def format_bytes(value: float) -> str:
    """Powers of two read best in binary units (16 KiB), everything else in decimal ones (13.0 GB), as drive
    datasheets write them."""
    if value >= 1024 and int(value) == value and int(value) & (int(value) - 1) == 0:
        return format_size(value)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            return f"{significant(value / scale)} {unit}"
    return f"{value:.0f} B"


def format_us(value: float) -> str:
    if value >= 1e6:
        return format_seconds(value / 1e6)
    if value >= 1000:
        return f"{significant(value / 1000)} ms"
    return f"{significant(value)} µs"


def format_seconds(value: float) -> str:
    if value < 1:
        return f"{significant(value * 1000)} ms"
    if value >= 120:
        return f"{significant(value / 60)} min"
    return f"{significant(value)} s"


class Facts:
    """Findings and probe answers of one profile record."""

    def __init__(self, record: dict[str, Any]):
        self.record = record
        self.experiments = {e["name"]: e for e in record.get("experiments") or []}
        self.properties = ((record.get("probes") or {}).get("properties")) or {}
        self.rotational = bool((record.get("target") or {}).get("rotational"))

    def has(self, experiment: str) -> bool:
        return experiment in self.experiments

    def finding(self, experiment: str, name: str, figure: str | None = None) -> Evidence | None:
        """The finding, or None when the experiment did not run or its analysis could not support it."""
        entry = self.experiments.get(experiment)
        found = (entry or {}).get("findings", {}).get(name)
        if not isinstance(found, dict) or found.get("value") is None:
            return None
        value, unit = found["value"], found.get("unit") or ""
        return Evidence(experiment, name, value, unit, format_value(value, unit), self.figure(experiment, figure))

    def param(self, experiment: str, name: str) -> Any:
        """The value an experiment ran with (durations in ns, sizes in bytes), None when it did not run."""
        return ((self.experiments.get(experiment) or {}).get("params") or {}).get(name)

    def confined_span(self, experiment: str) -> str | None:
        """"the first 8 GiB of 2 TB" when the experiment read only part of the target (a suite confines its sweeps
        to save time), None when it covered the whole target or did not run."""
        span = self.param(experiment, "span")
        size = (self.record.get("target") or {}).get("size_bytes")
        if not span or not size or span >= size:
            return None
        return f"the first {format_bytes(span)} of {format_bytes(size)}"

    def prop(self, pid: str) -> Evidence | None:
        answer = self.properties.get(pid)
        if not answer or (answer.get("value") is None and pid != "P10"):
            return None
        figures = answer.get("figures") or []
        unit = {"P1": "B", "P3": "B", "P7": "B", "P8": "B", "P10": "s"}.get(pid, "")
        value = answer.get("value")
        display = answer.get("answer") or str(value)
        if unit == "B" and isinstance(value, int | float) and value:
            display = format_size(value)  # binary, as the property table (and seed 003's Table 4) writes sizes
        elif pid == "P10" and isinstance(value, int | float):
            display = format_seconds(value)
        return Evidence(PROBES, pid, value, unit, display, figures[0] if figures else None)

    def figure(self, experiment: str, hint: str | None = None) -> str | None:
        figures = (self.experiments.get(experiment) or {}).get("figures") or []
        if hint:
            for path in figures:
                if hint in path:
                    return path
        return figures[0] if figures else None
