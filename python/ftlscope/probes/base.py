"""What a probe is (seed 003 §3.1): a property id (P1..P10), the device state it needs, and a function that
measures through a :class:`~ftlscope.experiments.context.Context` and returns an :class:`Answer`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..experiments.context import Context

# The device state a probe needs: P1-P7 read a "refilled" device (erased, then one full sequential write);
# P8-P10 write into erased space, so every write lands on an empty page (seed 003 §3.1).
REFILLED = "refilled"
ERASED = "erased"


@dataclass
class Answer:
    """A probe's answer. ``value`` uses the units of issue 5's JSON (bytes, counts, seconds, dicts for P2, P5,
    P6); ``confidence`` is the silhouette score of the classification the answer came from (0..1);
    ``alternatives`` are the other candidates with their confidences, as the paper's Table 3."""

    value: Any
    confidence: float | None
    evidence: str
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. P8's second_level, P9's serialized_when_idle
    raw: pd.DataFrame | None = None  # the latencies behind the answer (written as Parquet)
    figures: list[Path] = field(default_factory=list)
    device_time_s: float = 0.0
    rounds: int = 1

    def to_json(self) -> dict[str, Any]:
        out = {
            "value": self.value,
            "confidence": None if self.confidence is None else round(float(self.confidence), 4),
            "alternatives": self.alternatives,
            "device_time_s": self.device_time_s,
            "rounds": self.rounds,
            "evidence": self.evidence,
        }
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class Probe:
    """``run(ctx, known, directory)``: ``known`` holds the answers of the probes already run (P3 builds on P1,
    P4 on P3, ...); figures go to ``directory``."""

    id: str
    name: str
    needs: str
    depends_on: tuple[str, ...]
    run: Callable[[Context, dict[str, Answer], Path], Answer]
    unit: str = ""


def until_stable(
    measure_round: Callable[[int], pd.DataFrame],
    analyse: Callable[[pd.DataFrame], Answer],
    *,
    min_rounds: int = 2,
    max_rounds: int = 8,
    tolerance: float = 0.02,
    settled: Callable[[Answer, Answer], bool] | None = None,
) -> Answer:
    """Early stopping (issue 5): measure round after round, re-analysing all rounds so far, and stop once the
    answer's value is the same as after the previous round and its confidence moved less than ``tolerance`` (or
    ``settled(previous, answer)`` says so, for a probe whose rounds differ in kind).
    The paper repeated every measurement 5,000-10,000 times; most answers settle after a few rounds."""
    frames: list[pd.DataFrame] = []
    previous: Answer | None = None
    answer: Answer | None = None
    for round_index in range(max_rounds):
        frame = measure_round(round_index)
        frames.append(frame.assign(round=round_index))
        answer = analyse(pd.concat(frames, ignore_index=True))
        answer.rounds = round_index + 1
        same = settled(previous, answer) if settled is not None and previous is not None else \
            previous is not None and _same(previous, answer, tolerance)
        if round_index + 1 >= min_rounds and same:
            break
        previous = answer
    assert answer is not None
    return answer


def _same(a: Answer, b: Answer, tolerance: float) -> bool:
    if a.value != b.value:
        return False
    if a.confidence is None or b.confidence is None:
        return a.confidence is None and b.confidence is None
    return abs(a.confidence - b.confidence) <= tolerance
