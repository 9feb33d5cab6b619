"""The experiment suite: every experiment of the seeds, runnable on any target.

Each module of this package defines ``EXPERIMENTS``, a list of :class:`~.base.Experiment`; they are found
here, so adding an experiment is adding a module. ``ORDER`` is the order ``ftlscope bench --list`` shows and
a full suite runs them in (the issue's numbering: cheap and read-only first, whole-drive writes last).
"""

from __future__ import annotations

from .._discovery import collect
from ..errors import UsageError
from .base import Experiment, Param, finding
from .suite import ExperimentOutcome, run_experiment

ORDER = (
    "qd1-baseline",
    "bs-sweep",
    "bs-sweep-write",
    "rw-mix",
    "corners",
    "deep-queue",
    "qd-sweep",
    "parallelism",
    "locality",
    "permuted-reads",
    "alignment",
    "zoning",
    "seq-read-over-time",
    "seq-write-over-time",
    "random-fill",
    "data-dependence",
    "working-set",
    "less-load-latency",
    "burst-vs-steady",
    "reset-behaviour",
    "trim-before-overwrite",
    "interleaved-vs-grouped",
)

_FRAMEWORK_MODULES = {"base", "context", "suite"}


def _discover() -> dict[str, Experiment]:
    found = collect(__name__, __path__, "EXPERIMENTS", lambda e: e.name, _FRAMEWORK_MODULES)
    rank = {name: i for i, name in enumerate(ORDER)}
    return dict(sorted(found.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


EXPERIMENTS: dict[str, Experiment] = _discover()


def get(name: str) -> Experiment:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise UsageError(
            f"unknown experiment '{name}'; 'ftlscope bench --list' shows them ({', '.join(EXPERIMENTS)})"
        ) from None


__all__ = ["EXPERIMENTS", "ORDER", "Experiment", "ExperimentOutcome", "Param", "finding", "get", "run_experiment"]
