"""A property's answer as every table shows it (the probe's property table, the report's, ``compare``'s): the
value in the notation of Table 4 of "Fantastic SSD Internals and How to Learn and Use Them" (two-level buffers
``a | b``, partial flush ``p``, an I/O-count limit, serialised writes ``✗``, ``∞``) plus the marks this tool
adds (``‡`` controller-limited), and the legend for the marks a table holds. One place, so the three tables
cannot disagree about a mark or its meaning."""

from __future__ import annotations

import re
from typing import Any

from .truth import describe, has_notation, notation

# ftlscope's own mark (Table 4 has none for it): a serial stage in front of the flash paced the probe's requests.
CONTROLLER_MARK = "‡"

# Extra keys kept beside a marked answer in a stored run (the report reads them, not the probe's evidence).
MARK_KEYS = ("controller_limited", "serial_stage_us", "seen_through")

# (how to find the mark in a shown answer, its legend line), in the order a legend lists them.
_LEGEND: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(re.escape(CONTROLLER_MARK)),
     f"{CONTROLLER_MARK} controller-limited: a serial stage in front of the flash (the controller's command "
     "processors, or the host link) paced the probe's requests and can hide what is behind it; the value was "
     "seen through it (single reads over several units) or is only what the timing could show, at low confidence"),
    (re.compile(r" p \d"), "p partial flush: the write buffer flushes this much at a time before it is full"),
    (re.compile(r" or \d+ writes"), "or N writes: the buffer also flushes after N write commands (an I/O-count "
                                    "limit)"),
    (re.compile(r" \| "), "a | b two-level write buffer: first | second level (P8 sizes, P10 idle flush windows)"),
    (re.compile("†"), "†N the second level also flushes after N write commands"),
    (re.compile("✗"), "N ✗ serialised writes: concurrent writes are served one at a time when they arrive at an "
                      "idle device"),
    (re.compile("∞"), "∞ never flushed by idling: some writes wait for a flush whatever the idle time before them"),
)


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


def legend(texts) -> list[str]:
    """The legend lines for the marks found in ``texts`` (the answers a table shows), none when it has none."""
    texts = [str(t) for t in texts if t]
    return [line for pattern, line in _LEGEND if any(pattern.search(t) for t in texts)]
