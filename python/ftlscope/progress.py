"""How far a run or a profile has got, as a fraction, and the time left: pure arithmetic, so it can be tested
without a device, and shared by the bars of ``run``, ``bench``, ``probe`` and ``profile``.

A simulated run reports its progress on the device's (virtual) clock; a real one on the wall clock. Both are
compared with the limit the workload asked for (runtime, requests or bytes), so the bar ends at 100 % and its
percentage means the same thing on every target. The time left is the wall time so far scaled by the part still
to do (the average rate over the whole run): rich's own estimate averages only the last seconds, and a
simulated drive that spends its first second setting up would show days left ("ETA 51:01:47").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def run_fraction(stop: Mapping[str, Any], warmup: Mapping[str, Any], progress: Mapping[str, Any], *,
                 total_bytes: int | None = None, mean_request: float = 0.0) -> float | None:
    """The part of a run done, in [0, 1], or None when nothing bounds it.

    ``stop`` and ``warmup`` are the workload's limits (``time_ns``, ``ops``, ``bytes``; 0 or absent = none),
    ``progress`` the engine's live figures (``device_ns``, ``ops``, ``bytes``, all counting warm-up requests).
    Where several limits apply the run ends at the first reached, so the largest fraction is the truthful one.
    """
    fractions = []
    warm_ns = warmup.get("time_ns") or 0
    warm_ops = warmup.get("ops") or 0
    if stop.get("time_ns"):
        fractions.append(progress["device_ns"] / (stop["time_ns"] + warm_ns))
    if stop.get("ops"):
        fractions.append(progress["ops"] / (stop["ops"] + warm_ops))
    limit = total_bytes or stop.get("bytes")
    if limit:
        # Warm-up requests move bytes too but do not count against the limit.
        fractions.append(progress["bytes"] / (limit + warm_ops * mean_request))
    if not fractions:
        return None
    return min(1.0, max(0.0, max(fractions)))


def seconds_left(fraction: float | None, wall_s: float) -> float | None:
    """Wall seconds still to go at the run's average pace so far; None until there is a pace to go by."""
    if fraction is None or fraction <= 0 or wall_s <= 0:
        return None
    return wall_s * (1.0 - fraction) / fraction


def format_eta(seconds: float | None) -> str:
    """``1:02:03``, ``4:05``, or ``-:--`` when unknown."""
    if seconds is None:
        return "-:--"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


# Wall seconds of each step of a profile on the default simulated drive, as bench/profile_runtime.py measured
# them (sim:consumer-tlc-dram on a 2-core AMD EPYC VM, 2026-11-25: quick 22.3 s in all on an idle machine,
# standard 308 s while the machine was shared). Only their ratios within a suite matter: they weigh the steps of
# the profile's outer bar, so the probes, half of a quick profile, move it by their share rather than by one step
# in seven. The same
# experiment costs more in the standard suite (longer points, wider spans), hence a table per suite; the full
# suite, not measured, goes by the standard one, and a step not measured weighs its suite's median.
STEP_WALL_S = {
    "quick": {
        "probes": 11.4, "bs-sweep": 2.3, "qd-sweep": 2.4, "alignment": 1.0, "qd1-baseline": 0.6, "corners": 0.7,
        "seq-write-over-time": 3.3,
    },
    "standard": {
        "probes": 52.8, "bs-sweep": 14.9, "qd-sweep": 21.8, "locality": 11.8, "permuted-reads": 3.9,
        "alignment": 4.2, "seq-read-over-time": 4.1, "qd1-baseline": 3.9, "rw-mix": 8.5, "deep-queue": 19.8,
        "parallelism": 42.2, "working-set": 7.5, "reset-behaviour": 6.2, "interleaved-vs-grouped": 13.8,
        "data-dependence": 11.6, "bs-sweep-write": 24.0, "burst-vs-steady": 39.7, "seq-write-over-time": 14.1,
    },
}


def step_weights(steps: Sequence[str], suite: str = "quick") -> list[float]:
    """Relative expected time of each named step (``probes`` or an experiment name) of ``suite``."""
    measured = STEP_WALL_S.get(suite, STEP_WALL_S["standard"])
    known = sorted(measured.values())
    median = known[len(known) // 2]
    return [measured.get(name, median) for name in steps]


def job_fraction(weights: Sequence[float], done: int, within: float = 0.0) -> float:
    """The part of a job done when ``done`` steps are finished and the next is ``within`` (0-1) through."""
    total = sum(weights)
    if total <= 0:
        return 0.0
    finished = sum(weights[:done])
    current = weights[done] * min(max(within, 0.0), 1.0) if done < len(weights) else 0.0
    return min(1.0, (finished + current) / total)
