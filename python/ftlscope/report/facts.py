"""What the report knows about a run: the findings of its experiments and the answers of its probes, looked
up by name, each carried with its unit, a display string and the figure it can be seen in — so every line of
the summary card and of the guidance can cite exactly the number it rests on."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

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
    """A finding's value as the report prints it: ``13.0 GB``, ``67 µs``, ``494,596 IOPS``, ``QD 32``."""
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
        return f"{value:,.0f} MB/s" if value >= 100 else f"{value:.3g} MB/s"
    if unit == "%":
        return f"{value:.3g} %"
    if unit == "ratio":
        return f"{value:,.0f}x" if abs(value) >= 1000 else f"{value:.3g}x"
    if unit == "share":
        return f"{value * 100:.3g} %"
    return f"{value:,.4g} {unit}".strip()


def format_bytes(value: float) -> str:
    """Powers of two read best in binary units (16 KiB), everything else in decimal ones (13.0 GB), as drive
    datasheets write them."""
    if value >= 1024 and int(value) == value and int(value) & (int(value) - 1) == 0:
        return format_size(value)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def format_us(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.3g} ms"
    return f"{value:.3g} µs"


def format_seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.3g} ms"
    if value >= 120:
        return f"{value / 60:.3g} min"
    return f"{value:.3g} s"


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
