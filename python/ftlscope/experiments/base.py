"""What an experiment is: a declaration (name, whether it writes, preconditioning, parameters) and three
functions, one per layer — ``measure`` drives the engine, ``analyse`` reads the measured table, ``figures``
draws from the table and the findings. Keeping them apart is what lets a report be re-rendered from stored
data without touching the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..errors import UsageError
from ..units import parse_duration_ns, parse_size

if TYPE_CHECKING:
    from pathlib import Path

    from .context import Context

PRECONDITIONING = ("none", "purge", "sequential-fill", "random-fill")


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"'{text}' is not true or false")


def _parse_list(item: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        parts = [p for p in text.replace(" ", "").split(",") if p]
        if not parts:
            raise ValueError("an empty list")
        return [item(p) for p in parts]

    return parse


# Parameter kinds: how a ``--param k=v`` string becomes a value, and how a value prints in --list.
KINDS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "bool": _parse_bool,
    "size": lambda t: parse_size(t, "size"),
    "duration": lambda t: parse_duration_ns(t, "duration"),
    "ints": _parse_list(int),
    "sizes": _parse_list(lambda t: parse_size(t, "size")),
    "strs": _parse_list(str),
}


@dataclass(frozen=True)
class Param:
    """One parameter. ``default`` is in the parsed form (bytes for sizes, ns for durations); ``shown`` is how
    the seeds write it, for ``--list``."""

    name: str
    kind: str
    default: Any
    help: str
    shown: str = ""

    def show(self, value: Any) -> str:
        """A parsed value as a person writes it (``16 GiB``, ``3 s``, ``4 KiB, 16 KiB``), for reports."""
        from ..units import format_size

        if value is None:
            return ""
        if self.kind == "size":
            return format_size(value) if value else "0 (whole target)" if self.name == "span" else "0"
        if self.kind == "duration":
            for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
                if value >= scale:
                    return f"{value / scale:g} {unit}"
            return f"{value} ns" if value else "0"
        if self.kind == "sizes":
            return ", ".join(format_size(v) for v in value)
        if self.kind in ("ints", "strs"):
            return ",".join(str(v) for v in value)
        return str(value)

    def parse(self, text: str) -> Any:
        try:
            value = KINDS[self.kind](text)
        except (ValueError, UsageError) as exc:
            detail = exc.message if isinstance(exc, UsageError) else str(exc)
            raise UsageError(f"--param {self.name}: cannot read '{text}' as {self.kind} ({detail})") from None
        self._check_amount(text, value)
        return value

    def _check_amount(self, text: str, value: Any) -> None:
        """Counts, sizes and durations are never negative; a limit (runtime, ops, bytes) is not zero where its
        default is not, since zero means "no limit" to the engine and the run would not end."""
        if self.kind not in ("int", "float", "size", "duration", "ints", "sizes"):
            return
        values = value if isinstance(value, list) else [value]
        zero_refused = self.name in _LIMITS and self.default != 0
        if any(v < 0 or (v == 0 and zero_refused) for v in values):
            shown = self.shown or self.show(self.default)
            need = "give a value above 0" if zero_refused else "it cannot be negative"
            raise UsageError(f"--param {self.name}: '{text}' is out of range; {need} (default {shown})")


# Parameters that bound a run: zero would be no bound at all.
_LIMITS = ("runtime", "ops", "max_ops", "bytes")


@dataclass(frozen=True)
class Experiment:
    """An experiment of the suite.

    ``measure(ctx, params)`` runs one repetition and returns one dict per point: the ``keys`` columns say
    which point, every other numeric column is a metric (mean and stddev over repetitions go to results.csv).
    ``analyse(table, params)`` turns the aggregated table into findings; ``figures(table, findings, params,
    directory)`` draws PNGs and returns their paths. Neither of the two may touch the engine.
    """

    name: str
    summary: str
    source: str
    writes: bool
    preconditioning: str
    params: tuple[Param, ...]
    keys: tuple[str, ...]
    measure: Callable[[Context, dict[str, Any]], list[dict[str, Any]]]
    analyse: Callable[[pd.DataFrame, dict[str, Any]], dict[str, Any]]
    figures: Callable[[pd.DataFrame, dict[str, Any], dict[str, Any], Path], list[Path]]
    # Checks parameter values together (raising UsageError naming the parameter) before anything touches
    # the device, so a bad value does not cost a whole-drive preconditioning first.
    check: Callable[[dict[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        if self.preconditioning not in PRECONDITIONING:
            raise ValueError(f"{self.name}: unknown preconditioning {self.preconditioning}")

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def resolve_params(self, given: dict[str, str]) -> dict[str, Any]:
        """The defaults, overridden by ``--param k=v`` strings; an unknown key is named with the known ones."""
        by_name = {p.name: p for p in self.params}
        values = self.defaults()
        for key, text in given.items():
            if key not in by_name:
                known = ", ".join(sorted(by_name)) or "none"
                raise UsageError(f"--param {key}: {self.name} has no parameter '{key}' (it has: {known})")
            values[key] = by_name[key].parse(text)
        if self.check is not None:
            self.check(values)
        return values


def finding(value: Any, unit: str, evidence: str) -> dict[str, Any]:
    """A finding as findings.json holds it: the number, its unit, and where it came from."""
    if hasattr(value, "item"):  # numpy scalars -> plain Python numbers for JSON
        value = value.item()
    return {"value": value, "unit": unit, "evidence": evidence}
