"""P9 write parallelism (seed 003 §4.3-4.4, Table 4): batches of smallest-size writes into erased space, issued at
the same instant, each batch meeting an empty queue; the writes of a batch complete in clusters, and the size of
the first cluster is the parallelism. A device that serialises such batches (§4.4) shows clusters of one; then a
queue that never drains tells its parallelism from the completion rate (writes per buffer-insert time).

A controller whose command processors are slower than the buffer (``[controller] cores`` x ``command_time``)
paces every command, reads included: the same batches of reads of never-written blocks (answered by the
controller without touching the flash) show its clusters. When the writes complete in the reads' clusters, at the
reads' pace, the clusters are the controller's and the buffer's parallelism is hidden: the answer is then the
least parallelism that keeps up with the controller (each write's buffer insert, the first write's latency less
the first read's, spread over the controller's pace), at a low confidence, marked ``controller_limited``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import f as f_dist

from .. import plots
from ..analysis.jenks import classify_series
from ..experiments.context import Context
from ..units import format_ns, format_size
from ..workload import Workload
from ._write_common import SPIKE_RATIO, Region
from .base import ERASED, Answer, Probe, until_stable

# Batches of writes issued at the same instant.
FIRST_BATCH = 16
MAX_BATCH = 256
BATCHES = 24
BOUNDARY_RATIO = 3.0  # the step between two completion clusters against the steps inside one
# Writes keep the controller's pace when their cluster period is within this share of the reads'.
PACE_TOLERANCE = 0.2
# The confidence of a parallelism that is only a lower bound (the controller hides the buffer).
LOWER_BOUND_CONFIDENCE = 0.4
# The most confidence a finer cluster inside the controller's clusters is given.
FINER_CONFIDENCE = 0.8


# ---- analysis: pure functions on latencies (unit-tested on synthetic series) -----------------------------------


@dataclass
class BatchReading:
    """What batches of simultaneous writes say: the writes of the first completion cluster (None: the whole
    batch completed as one cluster), the time between clusters, and how clear the clusters are."""

    parallelism: int | None
    period_ns: float
    confidence: float
    alternatives: list[dict[str, Any]]
    serial: bool  # every write its own cluster, evenly spaced


def read_batches(frame: pd.DataFrame) -> BatchReading:
    """``frame``: ``batch`` and ``latency_ns`` per write. The sorted latencies of a batch rise in steps; the large
    steps (Jenks' highest class of the steps) separate completion clusters. Batches that met a flush (their last
    completion more than twice the quickest batch's) are left out."""
    # Each batch's latencies in submission order (the rows' order): the buffer takes the writes in the order they
    # arrive, so the k-th write waits for slot k // parallelism whatever the host adds to its completion. The
    # median over the batches of each k is one curve: the host's completion jitter, which reorders completions
    # inside a batch (sorted latencies lose their steps), and stalls average out of it.
    curve = batch_curve(frame)
    if curve is None:
        return BatchReading(None, 0.0, 0.0, [], False)
    batch = len(curve)
    groups = [curve]
    steps = [np.diff(g) for g in groups]
    pooled = np.concatenate(steps)
    readings: list[tuple[int | None, float, float]] = []
    for c in classify_series(pooled, log=False):
        top = c.labels == c.n_classes - 1
        bottom = c.labels == 0
        if pooled[top].mean() < BOUNDARY_RATIO * max(pooled[bottom].mean(), 1.0):
            continue
        breaks = np.asarray(c.breaks[1:-1])
        threshold = breaks[-1]
        firsts, periods = [], []
        for g, d in zip(groups, steps, strict=True):
            big = np.flatnonzero(d > threshold)
            if len(big) == 0:
                firsts.append(len(g))
                continue
            firsts.append(int(big[0]) + 1)
            periods.append(g[big[0] + 1] - g[0])
        values, counts = np.unique(firsts, return_counts=True)
        p = int(values[np.argmax(counts)])
        readings.append((None if p >= batch else p, float(np.median(periods)) if periods else 0.0, c.silhouette))
    if readings and not _straight(curve):
        p, period, confidence = readings[0]
        alternatives = []
        for q, _, s in readings[1:]:
            if q != p and all(a["value"] != q for a in alternatives):
                alternatives.append({"value": q, "confidence": round(s, 4)})
        return BatchReading(p, period, confidence, alternatives, False)
    # One level of steps: evenly spaced completions (one at a time), or all at once. (Also where Jenks split the
    # steps of a straight curve: harsh noise spreads a 7.8 us insert's steps from 1.6 to 12.5 us.)
    step = float(np.median(pooled))
    first = float(np.median([g[0] for g in groups]))
    if step >= 0.1 * first:
        spread = float(np.std(pooled) / max(step, 1.0))
        return BatchReading(1, step, float(np.clip(1 - spread, 0, 1)), [], True)
    return BatchReading(None, 0.0, 1.0, [], False)


def batch_curve(frame: pd.DataFrame) -> np.ndarray | None:
    """The median over the batches (those of the most writes; batches that met a flush, their last completion
    more than twice the quickest batch's, left out) of the k-th submitted write's latency, made non-decreasing.
    None when no batch had two writes."""
    groups = [g.to_numpy(dtype=float) for _, g in frame.groupby("batch", sort=False)["latency_ns"]]
    groups = [g for g in groups if len(g) >= 2]
    if not groups:
        return None
    batch = max(len(g) for g in groups)
    groups = [g for g in groups if len(g) == batch]
    worst = np.array([g.max() for g in groups])
    groups = [g for g, w in zip(groups, worst, strict=True) if w <= 2 * worst.min()]
    return np.maximum.accumulate(np.median(np.vstack(groups), axis=0))


# The family-wise level at which a staircase must beat the straight line (F test, Bonferroni over the cluster sizes).
STRAIGHT_LEVEL = 0.05
# A straight curve is a serialised batch when each write adds at least this share of the first one's latency.
SERIAL_STEP = 0.1


def _straight(curve: np.ndarray) -> bool:
    """Whether a batch curve is a straight line of steps, each write one insert after the one before: no staircase
    (:func:`staircase_fit`) removes significantly more of the line's misfit than noise would (an F test on its one
    extra parameter, Bonferroni over the cluster sizes tried), and each step adds SERIAL_STEP of the first write's
    latency. Jenks always splits the steps into classes: at harsh noise the steps of pm981-256g's one 7.8 us insert
    slot ran from 1.6 to 12.5 us, and the large ones read as a cluster boundary (5 writes, 0.5). A staircase hidden
    in noise over a flat curve (steps near 0) is not straight here, and is left to the staircase check."""
    n = len(curve)
    if n < 6 or curve[0] <= 0 or float(np.median(np.diff(curve))) < SERIAL_STEP * float(curve[0]):
        return False
    fit = staircase_fit(curve)
    if fit.parallelism is None:
        return True
    threshold = float(f_dist.ppf(1 - STRAIGHT_LEVEL / len(fit.posteriors), 1, n - 3))
    return (fit.gain - 1) * (n - 3) < threshold


@dataclass
class StaircaseFit:
    """The cluster size whose staircase (latency = a + b k + c floor(k / p), c > 0) best fits the batch curve,
    its posterior against the other cluster sizes, and how much of the straight line's misfit it removes."""

    parallelism: int | None
    posterior: float
    gain: float  # the straight line's residual over the staircase's
    posteriors: dict[int, float]


def staircase_fit(curve: np.ndarray) -> StaircaseFit:
    """Every cluster size p of 2 .. half the batch fitted to the whole batch curve by least squares. The first
    step alone (what :func:`read_batches` reads off) is one difference of two noisy medians; the staircase uses
    every write, so on a harsh drive a first step lost in the noise (kelpie-n1.6t-s at harsh noise read 1 for 8;
    gigabyte-nvme-256g 4 for 2) is carried by the later ones. The posterior takes the noise as the best fit's
    residual variance (the writes of one batch are not independent, so it is used only when decisive)."""
    n = len(curve)
    k = np.arange(n, dtype=float)
    line = np.column_stack([np.ones(n), k])
    rss_line = float(np.sum((curve - line @ np.linalg.lstsq(line, curve, rcond=None)[0]) ** 2))
    rss: dict[int, float] = {}
    for p in range(2, n // 2 + 1):
        design = np.column_stack([np.ones(n), k, np.floor(k / p)])
        beta = np.linalg.lstsq(design, curve, rcond=None)[0]
        if beta[2] > 0:
            rss[p] = float(np.sum((curve - design @ beta) ** 2))
    if not rss or n <= 4:
        return StaircaseFit(None, 0.0, 1.0, {})
    best = min(rss, key=lambda p: (rss[p], p))
    variance = max(rss[best] / (n - 3), 1e-9 * max(rss_line, 1.0), 1e-12)
    weights = {p: float(np.exp(-(r - rss[best]) / (2 * variance))) for p, r in rss.items()}
    total = sum(weights.values())
    posteriors = {p: w / total for p, w in weights.items()}
    return StaircaseFit(best, posteriors[best], rss_line / max(rss[best], 1e-12), posteriors)


# The staircase overrules the first step only when it removes most of the straight line's misfit and is sure.
STAIRCASE_GAIN = 3.0
STAIRCASE_SURE = 0.95
# The confidence an answer keeps when the staircase points elsewhere without being sure.
STAIRCASE_DOUBT = 0.5


def busy_parallelism(frame: pd.DataFrame, depth: int, period_ns: float) -> float:
    """Writes the buffer admits per insert time, from a queue kept ``depth`` deep: the completion rate times the
    time between completion clusters. ``frame``: ``submit_ns``, ``complete_ns``, ``latency_ns`` in submission
    order. The rate is counted from when the first ``depth`` writes (which met an empty queue, and may have been
    serialised) have completed, to the last submission (then the queue drains); gaps between completions longer
    than SPIKE_RATIO times the median latency are flushes, not the buffer's pace, and are left out."""
    if period_ns <= 0 or len(frame) <= 2 * depth:
        return 0.0
    start = float(frame["complete_ns"].iloc[:depth].max())
    end = float(frame["submit_ns"].iloc[-1])
    done = np.sort(frame["complete_ns"].to_numpy(dtype=float))
    done = done[(done >= start) & (done <= end)]
    gaps = np.diff(done)
    if len(gaps) == 0:
        return 0.0
    kept = gaps[gaps <= SPIKE_RATIO * float(np.median(frame["latency_ns"].to_numpy(dtype=float)))]
    return float(len(kept) / kept.sum() * period_ns) if kept.sum() > 0 else 0.0


# ---- measurement ------------------------------------------------------------------------------------------------


def probe_write_parallelism(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    region = Region(ctx)
    size = max(ctx.logical_block, 512)
    state = {"batch": FIRST_BATCH, "depth": FIRST_BATCH}

    def measure_round(index: int) -> pd.DataFrame:
        while True:
            batch = state["batch"]
            frame = batch_series(ctx, region, size, batch, BATCHES)
            reading = read_batches(frame)
            if batch >= MAX_BATCH or (reading.parallelism is not None and reading.parallelism <= batch // 2
                                      and not (batch == FIRST_BATCH and _staircase_elsewhere(frame, reading))):
                break
            # Too few clusters in a batch to read one off, or (once) too few steps for the staircase to decide
            # between its cluster size and the first step's.
            state["batch"] = min(batch * 4, MAX_BATCH)
        frame["kind"], frame["depth"] = "batch", batch
        reads = batch_series(ctx, region, size, batch, BATCHES, op="read")
        reads["kind"], reads["depth"] = "read", batch
        frames = [frame, reads]
        while True:
            depth = max(state["depth"], batch)
            busy = busy_series(ctx, region, size, depth, depth * max(32, depth))
            busy["kind"], busy["depth"] = "busy", depth
            frames.append(busy)
            if depth >= MAX_BATCH or 2 * busy_parallelism(busy, depth, reading.period_ns) <= depth:
                break
            state["depth"] = min(depth * 4, MAX_BATCH)  # the queue ran short of writes: deeper
        out = pd.concat(frames, ignore_index=True)
        out["series"] = index
        return out

    answer = until_stable(measure_round, analyse_write_parallelism, min_rounds=2, max_rounds=4, settled=_settled)
    region.release()
    answer.figures = [figure_write_parallelism(answer.raw, directory)]
    return without_buffer(answer, known.get("P8"))


def without_buffer(answer: Answer, buffer: Answer | None) -> Answer:
    """P9 is the write buffer's parallelism (how many writes it takes in at one instant). When P8 found no write
    buffer, every write is a program on the flash, and the clusters the batches showed are the flash's units or
    channels, not a buffer's: the answer is "not applicable" (None, as Table 4 leaves a write-through drive's P9
    blank), as sure as P8's "no buffer", with what the batches showed kept in the evidence and in
    ``program_parallelism``. The batches are measured all the same, so every later probe meets the drive as
    before (the same device time, the same noise draws). Without P8 (P9 probed alone) the answer stays a count."""
    if buffer is None or buffer.value != 0:
        return answer
    answer.extra["program_parallelism"] = answer.value
    answer.evidence = (f"not applicable: P8 found no write buffer (a write is a program on the flash), so there is no "
                       f"buffer parallelism; the batches showed {answer.value} writes at a time at confidence "
                       f"{_confidence(answer.confidence)}, the flash's program parallelism: {answer.evidence}")
    answer.alternatives = []
    answer.value, answer.confidence = None, buffer.confidence
    answer.extra["serialized_when_idle"] = False
    return answer


def _confidence(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f}"


def _staircase_elsewhere(frame: pd.DataFrame, reading: BatchReading) -> bool:
    """Whether the staircase fitted to one round's batch curve prefers another cluster size than its first step,
    with too few clusters in a batch to be sure (:func:`_checked_by_staircase` would keep the answer at
    STAIRCASE_DOUBT): at harsh noise kelpie-n1.6t-s's batches of 16 held two clusters of 8, the first step read 2,
    and the staircase's 8 stayed at a posterior of 0.91 over every round. Larger batches give it more steps."""
    if reading.serial or reading.parallelism is None:
        return False
    curve = batch_curve(frame)
    fit = staircase_fit(curve) if curve is not None else None
    return fit is not None and fit.parallelism not in (None, reading.parallelism) and \
        fit.posterior < STAIRCASE_SURE and len(curve) < 4 * fit.parallelism


def _settled(previous: Answer, answer: Answer) -> bool:
    """The same answer at the same confidence (2 %), unless the staircase still points elsewhere: more rounds
    (more batches in the median curve) may decide it."""
    if answer.extra.get("staircase_disagrees"):
        return False
    return previous.value == answer.value and previous.confidence is not None and answer.confidence is not None \
        and abs(previous.confidence - answer.confidence) <= 0.02


def batch_series(ctx: Context, region: Region, size: int, batch: int, batches: int,
                 op: str = "write") -> pd.DataFrame:
    """Batches of ``batch`` writes issued at one instant; each batch waits for the previous one to complete,
    so it meets an empty queue. ``op="read"``: the same batches reading erased space the probe never wrote
    (the controller answers them without the flash or the buffer: only its own pace shows)."""
    length = batch * batches * size
    start = region.take(length)
    wl = Workload(mix={op: 100}, sizes=[size], pattern={"kind": "sequential"},
                  range={"start": start, "length": length}, queue_depth=batch,
                  batch={"size": batch, "idle_ns": 0}, stop={"ops": batch * batches})
    t = ctx.run(wl, f"{batches} batches of {batch} concurrent {format_size(size)} {op}s", trace=True).trace
    t = t[t["op"] == op].sort_values(["submit_ns", "offset_bytes"])
    submit = t["submit_ns"].to_numpy(dtype=np.int64)
    return pd.DataFrame({
        "batch": np.unique(submit, return_inverse=True)[1],
        "latency_ns": t["latency_ns"].to_numpy(dtype=np.int64),
        "submit_ns": submit,
        "complete_ns": t["complete_ns"].to_numpy(dtype=np.int64),
    })


def busy_series(ctx: Context, region: Region, size: int, depth: int, ops: int) -> pd.DataFrame:
    """A queue kept ``depth`` deep: every write arrives while others are pending."""
    length = ops * size
    wl = Workload(mix={"write": 100}, sizes=[size], pattern={"kind": "sequential"},
                  range={"start": region.take(length), "length": length}, queue_depth=depth, stop={"ops": ops})
    t = ctx.run(wl, f"{ops} {format_size(size)} writes at queue depth {depth}", trace=True).trace
    t = t[t["op"] == "write"].sort_values(["submit_ns", "offset_bytes"])
    return pd.DataFrame({
        "latency_ns": t["latency_ns"].to_numpy(dtype=np.int64),
        "submit_ns": t["submit_ns"].to_numpy(dtype=np.int64),
        "complete_ns": t["complete_ns"].to_numpy(dtype=np.int64),
    })


def analyse_write_parallelism(frame: pd.DataFrame) -> Answer:
    batch_kind, busy_kind = frame[frame["kind"] == "batch"], frame[frame["kind"] == "busy"]
    largest = int(batch_kind["depth"].max())
    batches = batch_kind[batch_kind["depth"] == largest].copy()
    batches["batch"] = batches["series"] * 1_000_000 + batches["batch"]
    reading = read_batches(batches)
    depth = int(busy_kind["depth"].max()) if not busy_kind.empty else 0
    estimates = [busy_parallelism(s, depth, reading.period_ns)
                 for _, s in busy_kind[busy_kind["depth"] == depth].groupby("series")]
    busy = float(np.median(estimates)) if estimates else 0.0
    rate = busy / reading.period_ns if reading.period_ns > 0 else 0.0
    serialised = reading.serial and round(busy) >= 2
    alternatives = list(reading.alternatives)
    if serialised:
        value = int(round(busy))
        evidence = (f"a batch meeting an empty queue completes one write every {format_ns(reading.period_ns)} "
                    f"(serialised); with the queue kept {depth} deep, {rate * 1e9:,.0f} writes/s = "
                    f"{busy:.2f} writes per {format_ns(reading.period_ns)}")
    elif reading.parallelism is None:
        value = largest
        evidence = f"all {largest} writes of a batch completed together: at least {largest} in parallel"
    else:
        value = reading.parallelism
        evidence = (f"of {largest} writes issued at once, the first {value} complete together, the next cluster "
                    f"{format_ns(reading.period_ns)} later")
        if reading.serial:
            evidence = (f"writes of a batch complete one at a time, {format_ns(reading.period_ns)} apart, also with "
                        f"a busy queue ({busy:.2f} writes per step): parallelism 1")
        elif busy and round(busy) != value:
            evidence += f"; a busy queue gives {busy:.2f} writes per cluster period"
            alternatives.append({"value": int(round(busy)), "confidence": None})
    confidence = reading.confidence
    disagrees = False
    if not reading.serial and reading.parallelism is not None and not serialised:
        checked = _checked_by_staircase(batches, value, confidence, alternatives, evidence)
        disagrees = checked[1] <= STAIRCASE_DOUBT and checked[0] == value and checked[3] != evidence
        value, confidence, alternatives, evidence = checked
    reads = frame[(frame["kind"] == "read") & (frame["depth"] == largest)].copy()
    reads["batch"] = reads["series"] * 1_000_000 + reads["batch"]
    limited = None if serialised else controller_paced(reading, batches, reads)
    finer = _inside_controller_clusters(reading, limited)
    if finer is not None:
        value, confidence = finer
        alternatives = [{"value": limited["cluster"], "confidence": round(reading.confidence, 4)}]
        evidence = (f"the command processors take {limited['cluster']} writes every "
                    f"{format_ns(limited['period_ns'])} (reads of never-written blocks batched alike complete so "
                    f"too); inside each such cluster the writes complete {value} at a time: the buffer's "
                    "parallelism")
        limited = None
    elif limited is not None:
        value, confidence = limited["bound"], min(confidence, LOWER_BOUND_CONFIDENCE)
        alternatives = [{"value": value + 1, "confidence": None}]
        evidence = (f"writes issued at once complete in the controller's clusters: reads of never-written blocks "
                    f"batched alike complete {limited['cluster']} per {format_ns(limited['period_ns'])} too, so the "
                    f"command processors, not the buffer, set the pace; a buffer insert takes "
                    f"{format_ns(limited['insert_ns'])} (first write less first read), so keeping up needs at least "
                    f"{value} writes in parallel (a lower bound: the buffer may take more)")
    raw = frame.copy()
    extra: dict[str, Any] = {"serialized_when_idle": bool(serialised), "controller_limited": limited is not None,
                             "staircase_disagrees": bool(disagrees)}
    if limited is not None:
        extra["controller_pace_ns"] = round(limited["period_ns"] / limited["cluster"], 1)
    return Answer(value=int(value), confidence=confidence, evidence=evidence, alternatives=alternatives,
                  extra=extra, raw=raw)


def _checked_by_staircase(batches: pd.DataFrame, value: int, confidence: float,
                          alternatives: list[dict[str, Any]], evidence: str):
    """The first step's reading set against the staircase fitted to the whole batch curve: a sure staircase
    that removes most of the straight line's misfit replaces it (its confidence at most the posterior); an unsure
    one that points elsewhere leaves it at STAIRCASE_DOUBT at most, the staircase's size as an alternative."""
    curve = batch_curve(batches)
    fit = staircase_fit(curve) if curve is not None else None
    if fit is None or fit.parallelism is None or fit.parallelism == value:
        return value, confidence, alternatives, evidence
    others = [a for a in alternatives if a["value"] not in (value, fit.parallelism)]
    if fit.gain >= STAIRCASE_GAIN and fit.posterior >= STAIRCASE_SURE:
        evidence = (f"the latency of the k-th write of a batch (median over the batches) rises in steps of "
                    f"{fit.parallelism} writes (a staircase fitted to all {len(curve)} leaves {1 / fit.gain:.0%} of "
                    f"a straight line's misfit; posterior {fit.posterior:.2f}); the first step alone read {value}")
        first_step = {"value": int(value), "confidence": round(fit.posteriors.get(value, 0.0), 4)}
        return (fit.parallelism, min(fit.posterior, max(confidence, STAIRCASE_SURE)), [first_step] + others,
                evidence)
    evidence += (f"; a staircase fitted to the whole batch curve prefers {fit.parallelism} (posterior "
                 f"{fit.posterior:.2f}), so this is unsure")
    return (value, min(confidence, STAIRCASE_DOUBT),
            [{"value": int(fit.parallelism), "confidence": round(fit.posterior, 4)}] + others, evidence)


def controller_paced(writes: BatchReading, writes_frame: pd.DataFrame,
                     reads_frame: pd.DataFrame) -> dict[str, Any] | None:
    """When batches of writes complete as batches of reads of never-written blocks do (the same first cluster,
    or both one at a time, at the same period within PACE_TOLERANCE), the controller paces both and the
    buffer's parallelism does not show. Then: the controller's cluster and period, the buffer insert time (the
    median first write's latency less the median first read's: both paid admission and the command overhead)
    and the least parallelism that keeps up, ceil(insert x cluster / period). None when the writes show a pace
    of their own (or there were no read batches). Both frames: ``batch`` (unique per batch) and ``latency_ns``
    in submission order."""
    if reads_frame.empty or writes.period_ns <= 0:
        return None
    reads = read_batches(reads_frame)
    if reads.period_ns <= 0:
        return None  # the reads completed all at once: nothing paces them
    read_cluster = 1 if reads.serial else reads.parallelism
    write_cluster = 1 if writes.serial else writes.parallelism
    if read_cluster is None or write_cluster != read_cluster:
        return None
    if abs(writes.period_ns - reads.period_ns) > PACE_TOLERANCE * reads.period_ns:
        return None
    insert = _first_latency(writes_frame) - _first_latency(reads_frame)
    bound = max(1, int(np.ceil(insert * read_cluster / reads.period_ns - 0.05)))
    return {"cluster": int(read_cluster), "period_ns": float(reads.period_ns), "insert_ns": float(insert),
            "bound": bound}


def _inside_controller_clusters(writes: BatchReading, limited: dict[str, Any] | None) -> tuple[int, float] | None:
    """When the controller takes several writes at once (its cluster of k), the buffer may still insert them
    fewer at a time: then the writes' classifications also hold a finer cluster, a divisor of k, which is the
    buffer's parallelism (given at most FINER_CONFIDENCE: the coarser reading fitted the steps better)."""
    if limited is None or limited["cluster"] <= 1:
        return None
    for alternative in writes.alternatives:
        value = alternative["value"]
        if value is not None and 1 <= value < limited["cluster"] and limited["cluster"] % value == 0:
            return int(value), min(float(alternative["confidence"] or 0.0), FINER_CONFIDENCE)
    return None


def _first_latency(frame: pd.DataFrame) -> float:
    """The median over the batches of the first-submitted request's latency."""
    return float(frame.groupby("batch", sort=False)["latency_ns"].first().median())


def figure_write_parallelism(raw: pd.DataFrame, directory: Path) -> Path:
    """Seed 003 Figure 4: completion latency of the i-th write of a batch; and completions in a busy queue."""
    fig, (left, right) = plots.panels("P9 write parallelism: concurrent writes", 1, 2, size=(11, 4.0))
    largest = int(raw.loc[raw["kind"] == "batch", "depth"].max())
    batches = raw[(raw["kind"] == "batch") & (raw["depth"] == largest) & (raw["series"] == raw["series"].min())]
    for _, g in batches.groupby("batch"):
        lat = np.sort(g["latency_ns"].to_numpy()) / 1e3
        left.plot(np.arange(1, len(lat) + 1), lat, marker="o", markersize=3, alpha=0.4, color="tab:blue")
    left.set_xlabel("i-th completion in a batch issued at once")
    left.set_ylabel("latency (us)")
    left.set_title(f"batches of {largest} meeting an empty queue", fontsize=9)
    deepest = int(raw.loc[raw["kind"] == "busy", "depth"].max())
    busy = raw[(raw["kind"] == "busy") & (raw["depth"] == deepest) & (raw["series"] == raw["series"].min())]
    done = np.sort(busy["complete_ns"].to_numpy())
    done = done[len(done) // 2: len(done) // 2 + 4 * deepest]
    if len(done):
        right.step((done - done[0]) / 1e3, np.arange(1, len(done) + 1), where="post")
    right.set_xlabel("time (us)")
    right.set_ylabel("writes completed")
    right.set_title(f"queue kept {deepest} deep", fontsize=9)
    return plots.save(fig, directory, "P9_write_parallelism",
                      "Latency of the i-th completion of writes issued at one instant (left): the writes that "
                      "complete together are the ones the buffer takes in parallel; completions over time with the "
                      "queue kept deep (right).")


PROBES = [Probe("P9", "write parallelism", ERASED, (), probe_write_parallelism, unit="writes")]
