"""Probing the ten internal properties of seed 003 (Queenie): P1 page size ... P10 flush window.

Each module of this package defines ``PROBES``, a list of :class:`~.base.Probe`; they are found here. ``ORDER``
is the paper's numbering; probes run in that order except where one builds on a later one (P2 on P3 and P4).
"""

from __future__ import annotations

from .._discovery import collect
from ..errors import UsageError
from .base import ERASED, REFILLED, Answer, Probe, until_stable

ORDER = tuple(f"P{i}" for i in range(1, 11))
NAMES = {
    "P1": "page size",
    "P2": "page type",
    "P3": "chunk size",
    "P4": "stripe width",
    "P5": "channel/chip layout",
    "P6": "read performance consistency",
    "P7": "read buffer capacity",
    "P8": "write buffer capacity",
    "P9": "write parallelism",
    "P10": "internal flush window",
}
_FRAMEWORK_MODULES = {"base", "runner", "truth", "validate"}


def _discover() -> dict[str, Probe]:
    found = collect(__name__, __path__, "PROBES", lambda p: p.id, _FRAMEWORK_MODULES)
    return {pid: found[pid] for pid in ORDER if pid in found}


PROBES: dict[str, Probe] = _discover()


def parse_properties(text: str | None) -> list[str]:
    """``P1,P4`` (or ``all`` / None) -> the probe ids, in run order, with the probes they build on added."""
    if not text or text.strip().lower() == "all":
        wanted = list(PROBES)
    else:
        wanted = [t.strip().upper() for t in text.split(",") if t.strip()]
        unknown = [w for w in wanted if w not in NAMES]
        if unknown:
            raise UsageError(f"--properties: unknown {', '.join(unknown)}; use P1..P10, e.g. P1,P4")
        missing = [w for w in wanted if w not in PROBES]
        if missing:
            raise UsageError(f"--properties: {', '.join(missing)} cannot be probed yet; available: "
                             f"{', '.join(PROBES)}")
    needed: set[str] = set()

    def add(pid: str) -> None:
        if pid in needed:
            return
        needed.add(pid)
        for dep in PROBES[pid].depends_on:
            if dep in PROBES:
                add(dep)

    for pid in wanted:
        add(pid)
    # Run order: P-number order, except that a probe waits for the ones it builds on (P2 reads its L/M/H
    # pattern with P3's chunk and P4's stripe, so it runs after them).
    ordered: list[str] = []
    pending = [pid for pid in ORDER if pid in needed]
    while pending:
        ready = next(pid for pid in pending
                     if all(dep in ordered or dep not in needed for dep in PROBES[pid].depends_on))
        ordered.append(ready)
        pending.remove(ready)
    return ordered


__all__ = ["ERASED", "NAMES", "ORDER", "PROBES", "REFILLED", "Answer", "Probe", "parse_properties", "until_stable"]
