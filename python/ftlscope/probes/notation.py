"""A property's answer as every table shows it (the probe's property table, the report's, ``compare``'s): the
value in the notation of Table 4 of "Fantastic SSD Internals and How to Learn and Use Them" (two-level buffers
``a | b``, partial flush ``p``, an I/O-count limit, serialised writes ``✗``, ``∞``) plus the marks this tool
adds (``‡`` controller-limited); the legend for the marks a table holds is
:mod:`ftlscope.analysis.property_marks`. One place each, so the three tables cannot disagree about a mark or its
meaning."""

from __future__ import annotations

from typing import Any

from ..analysis.property_marks import CONTROLLER_MARK
from .truth import describe, has_notation, notation

# Extra keys kept beside a marked answer in a stored run (the report reads them, not the probe's evidence).
MARK_KEYS = ("controller_limited", "serial_stage_us", "seen_through")


def marked(extra: dict[str, Any] | None) -> bool:
    """Whether an answer carries ftlscope's controller-limited mark."""
    return bool((extra or {}).get("controller_limited"))


def has_detail(pid: str, extra: dict[str, Any] | None) -> bool:
    """Whether an answer shows more than its bare value (a Table 4 detail or a mark)."""
    return has_notation(pid, extra) or marked(extra)


def shown(pid: str, value: Any, extra: dict[str, Any] | None) -> str:
    """The answer as the tables show it: ``11.50 MiB p 7.50 MiB | 406 MiB``, ``4 ✗``, ``4 ch x 4 chips ‡``."""
    text = notation(pid, value, extra) if has_notation(pid, extra) else describe(pid, value)
    return f"{text} {CONTROLLER_MARK}" if marked(extra) else text
