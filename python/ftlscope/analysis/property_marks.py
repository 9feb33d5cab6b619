"""The marks a property table may hold and their legend, read from the answers as shown (text only: the report
and ``compare`` use it on stored runs without the probes). The marks are Table 4's notation of "Fantastic SSD
Internals and How to Learn and Use Them" (two-level buffers ``a | b``, partial flush ``p``, an I/O-count limit,
serialised writes ``✗``, ``∞``) and this tool's own ``‡`` (controller-limited); :mod:`ftlscope.probes.notation`
writes them."""

from __future__ import annotations

import re

# ftlscope's own mark (Table 4 has none for it): a serial stage in front of the flash paced the probe's requests.
CONTROLLER_MARK = "‡"

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


def legend(texts) -> list[str]:
    """The legend lines for the marks found in ``texts`` (the answers a table shows), none when it has none."""
    texts = [str(t) for t in texts if t]
    return [line for pattern, line in _LEGEND if any(pattern.search(t) for t in texts)]
