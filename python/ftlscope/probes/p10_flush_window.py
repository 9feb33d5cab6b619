"""P10 internal flush window (seed 003 §3.1 ``F7_seqwSleep``, Table 4): batches of the whole buffer (P8's
capacity) separated by idle gaps, the gap found by a geometric binary search between 2 ms and 5 s: the shortest gap
after which the next batches see no spike. Never ("inf") when even 5 s does not drain the buffer; 0 when there is
no buffer to drain. The probe trims what it wrote before it writes there again, and when it is done.

Why the whole buffer: the window is the time the device needs to empty *all* of it. A batch of a share ``f`` of
the buffer fits again once the buffer has drained ``f`` of itself, which a drive whose idle drain is proportional
(the device model's write buffer: a gap of ``g`` drains ``g / window`` of what is held) reaches well before the
window: on the presets, batches of 75 % read 0.75-0.86 of it. Only a full batch needs the buffer empty, whatever
the shape of the drain. Where a full batch overflows the empty buffer (P8 read it too large), the bytes it held
before overflowing become the batch; should that overflow too, the batches shrink and the analysis scales their
gaps by the proportional drain (:func:`drained_share`).

A buffer that pipelines its flushes (P8's ``pipelined``: only the first fill from empty waits for a whole flush)
is tested with two batches: the batch after the gap overflows a buffer the gap left part full and waits for the
whole flush, but a third batch finds the flush pipelined and waits only for room, so it says nothing of the gap.

Noise (issue 16): a firmware stall or a background operation can make one test spike after a long gap, and a
single test per gap sent the search astray (a 10 ms stall after 105 ms of idle read as an unfinished flush: 114 ms
for 40 ms). An unfinished flush repeats at every gap shorter than the window and never at a longer one, a step in
the gap; a stall is rare and unrelated to it. So every gap's tests are votes, the window is the step that explains
the votes best (:func:`flush_step`, a likelihood over the cut points), the gaps either side of it are tested again
until their votes are clear, and the confidence is the step's posterior mass within 20 % of the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis.jenks import classify_series
from ..experiments.context import Context
from ..units import format_ns, format_size
from ._write_common import (
    KIB,
    MIB,
    MS,
    QUEUE_DEPTH,
    SPIKE_RATIO,
    WRITE_SIZE,
    Region,
    S,
    blocking,
    flatness,
    flush_cache,
    power_of_two_above,
    power_of_two_below,
    quick_spikes,
    spike_mask,
    write_series,
)
from .base import ERASED, Answer, Probe

# F7_seqwSleep's binary search over idle gaps.
GAP_MIN_NS = 2 * MS
GAP_MAX_NS = 5 * S
GAP_FLOOR_NS = 62_500  # below 2 ms the search halves down to this before giving up on finding a spike
GAP_GROWTH = 4
GAP_RESOLUTION = 1.1  # stop when the clean and the spiked gap are this close (factor): the answer within 10 %
BATCH_FRACTION = 1.0  # of the P8 capacity per batch: the buffer must be empty again for the next batch to fit
SHRINK = 0.8  # when a batch overflowed the empty buffer (P8 read it too large), the next batch is this much smaller
MIN_FRACTION = 0.5  # ... down to this share (with GAP_BATCHES batches their sum still overflows a buffer)
GAP_BATCHES = 3
PIPELINED_BATCHES = 2  # a pipelined buffer: only the batch after the first gap meets a whole flush
# ... and only when its first batch filled it after idle time: a buffer whose last flush was still programming when
# the next test began goes on pipelining (pm981-256g at medium noise: no spike after 4 and 8 ms gaps of a 40 ms
# window, so the search ended at 152 ms). Each test of a pipelined buffer starts after this much idle time (far
# longer than the whole-buffer flushes P8 saw there, 18-160 ms; ~8 s of device time over MAX_TESTS tests).
PIPELINED_SETTLE_NS = 200 * MS
RECOUNT_MARGIN = 0.01
OVERFLOW_AGREE = 0.1  # two runs of a batch overflow at the same place when their overflows are this close (share)
# The step model: the share of tests a stall, a background operation or a missed flush turns over (a stated
# prior, not fitted). On the harsh noise level a batch of a whole 64 MiB buffer meets ~1 stall in 1000 writes,
# which blocks the writes in flight in about one batch in eight; a whole-buffer test needs every later batch to
# spike, so it turns over in about 2 % of tests, a smaller-batch test (the last batch alone) in about 12 %.
TURNOVER = 0.1
CLEAR_VOTES = 2  # a gap beside the step is clear once its tests agree by this many more votes than disagree
MAX_TESTS = 40  # tests per probe: far more than a clean drive needs (~10); the search stops, unsure, after that
ANSWER_TOLERANCE = 1.2  # the confidence is the step's posterior mass within this factor of the answer


# ---- analysis: pure functions on latencies (unit-tested on synthetic series) -----------------------------------


def drained_share(fraction: float, batches: int) -> float | None:
    """The share of the flush window a gap must last for ``batches`` batches of ``fraction`` of the buffer each
    to meet no flush, when a gap of ``g`` drains ``g / window`` of what the buffer holds (device-model.md's write
    buffer): with ``x = 1 - g / window`` left after each gap, the last batch finds ``fraction * (1 + x + ... +
    x^(batches-1))`` of the buffer taken, which must not exceed 1. 1 for a full batch; None when the batches fit
    without any drain (the test sees nothing)."""
    if fraction >= 1.0:
        return 1.0
    if fraction * batches <= 1.0:
        return None
    # fraction * (x^(k-1) + ... + x + 1) - 1 = 0 has exactly one root in [0, 1): the sum grows with x.
    roots = np.roots([fraction] * (batches - 1) + [fraction - 1.0])
    x = min(float(r.real) for r in roots if abs(r.imag) < 1e-9 and -1e-9 <= r.real < 1.0)
    return 1.0 - max(x, 0.0)


@dataclass
class Step:
    """Where the spikes stop: ``window`` the shortest gap on the clean side (seconds; None = every gap tried
    spiked), ``longest_spiked`` the longest on the spiked side (None = none), ``confidence`` the posterior mass
    of the steps within ANSWER_TOLERANCE of ``window``, times the share of the bracket that is within it."""

    window: float | None
    longest_spiked: float | None
    confidence: float


def flush_step(tests: pd.DataFrame, turnover: float = TURNOVER) -> Step:
    """``tests``: one row per idle-gap test with ``gap_ns`` and ``spiked``. The step in the gap that explains the
    tests best: a gap shorter than the window spikes, a longer one does not, each test turned over with
    probability ``turnover`` (noise). Every cut between two gaps tried is a step; its log-likelihood sums the
    votes on each side, and the cuts' posterior (uniform prior) gives the confidence. A monotone fit (isotonic
    regression) would place the step too, but gives no probability for it; the cuts are few (the gaps tried)."""
    if tests.empty:
        return Step(None, None, 0.0)
    votes = tests.groupby("gap_ns")["spiked"].agg(["sum", "count"]).sort_index()
    gaps = votes.index.to_numpy(dtype=float)
    k = votes["sum"].to_numpy(dtype=float)
    n = votes["count"].to_numpy(dtype=float)
    hit, miss = math.log(1 - turnover), math.log(turnover)
    below = k * hit + (n - k) * miss  # the gap is shorter than the window: its tests should spike
    above = k * miss + (n - k) * hit
    # Cut c: gaps[:c] below the window, gaps[c:] above it (c = len(gaps): every gap tried is too short).
    ll = np.r_[0.0, np.cumsum(below)] + np.r_[np.cumsum(above[::-1])[::-1], 0.0]
    posterior = np.exp(ll - ll.max())
    posterior /= posterior.sum()
    cut = int(np.argmax(posterior))
    windows = [float(g) for g in gaps] + [None]

    def near(w):
        if w is None or windows[cut] is None:
            return w is None and windows[cut] is None
        return max(w, windows[cut]) <= ANSWER_TOLERANCE * min(w, windows[cut])

    confidence = float(sum(p for p, w in zip(posterior, windows, strict=True) if near(w)))
    window = windows[cut]
    longest = float(gaps[cut - 1]) if cut > 0 else None
    if window is not None and longest is not None and window / longest > ANSWER_TOLERANCE:
        # An unresolved bracket: the window is anywhere in it (log-uniform), the answer its upper end.
        confidence *= math.log(ANSWER_TOLERANCE) / math.log(window / longest)
    return Step(None if window is None else window / 1e9, None if longest is None else longest / 1e9, confidence)


def clear_votes(tests: pd.DataFrame, step: Step) -> pd.Series:
    """Per gap tried: the votes for its side of ``step`` less those against (spiked below the window, clean above)."""
    votes = tests.groupby("gap_ns")["spiked"].agg(["sum", "count"]).sort_index()
    spikes = votes["sum"].astype(int)
    below = votes.index.to_numpy(dtype=float) < (math.inf if step.window is None else step.window * 1e9 * (1 - 1e-9))
    return pd.Series(np.where(below, 2 * spikes - votes["count"], votes["count"] - 2 * spikes), index=votes.index)


def next_gap(tests: pd.DataFrame) -> int | None:
    """The adaptive search (seed 003's F7_seqwSleep binary search, made robust): the next window gap to test,
    or None when the step is placed to GAP_RESOLUTION with its gaps clear. Up from GAP_MIN_NS in steps of
    GAP_GROWTH until a gap is clean (GAP_MAX_NS at most: never), down by halves to GAP_FLOOR_NS while even the
    shortest is clean; a gap whose votes are not CLEAR_VOTES on its side of the step is tested again (the one
    nearest the step first): more repetitions only where a gap is unclear. Single tests while the search
    bisects between the step's gaps; the two it ends on are tested until clear (should one turn over, the step
    moves and the search goes on from there)."""
    if tests.empty:
        return GAP_MIN_NS
    step = flush_step(tests)
    net = clear_votes(tests, step)
    lo = None if step.longest_spiked is None else round(step.longest_spiked * 1e9)
    hi = None if step.window is None else round(step.window * 1e9)
    unclear = net[net < CLEAR_VOTES]
    # Gaps on the wrong side of the step (a stall's spike after a long gap) first, then the step's two gaps.
    wrong = unclear[unclear <= 0]
    if not wrong.empty:
        pivot = hi if hi is not None else lo
        return int(wrong.index[np.argmin(np.abs(np.log(wrong.index.to_numpy(float) / pivot)))])
    if lo is None and hi > GAP_FLOOR_NS:
        return max(hi // 2, GAP_FLOOR_NS)
    if hi is None and lo < GAP_MAX_NS:
        return min(lo * GAP_GROWTH, GAP_MAX_NS)
    if lo is not None and hi is not None and hi / lo > GAP_RESOLUTION:
        return int(math.sqrt(lo * hi))
    for gap in (lo, hi):
        if gap is not None and gap in unclear.index:
            return int(gap)
    return None


# ---- measurement ------------------------------------------------------------------------------------------------


def probe_flush_window(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    region = Region(ctx)
    buffer = known.get("P8")
    capacity = int(buffer.value) if buffer is not None and buffer.value else 0
    if capacity == 0:
        # Nothing buffered, nothing to drain: a write never waits for a flush, whatever the gap.
        frame = gap_test(ctx, region, 4 * MIB, WRITE_SIZE, 0, batches=2)
        region.release()
        frame["spiked"] = False
        answer = Answer(value=0.0, confidence=None if buffer is None else buffer.confidence,
                        evidence="no write buffer (P8): writes never wait for a flush, with or without idle time",
                        raw=frame)
        answer.figures = [figure_flush_window(frame, pd.DataFrame(), directory)]
        return answer
    ios = (buffer.extra or {}).get("capacity_ios")
    size = min(WRITE_SIZE, power_of_two_below(capacity // 8))
    if ios:
        size = max(size, power_of_two_above(capacity / ios))
    size = max(size, ctx.logical_block, 4 * KIB)
    state: dict[str, Any] = {"fraction": BATCH_FRACTION, "test": 0, "capacity": capacity, "frames": []}
    pipelined = bool((buffer.extra or {}).get("pipelined"))
    batches = PIPELINED_BATCHES if pipelined else GAP_BATCHES

    def test(window_gap_ns: int) -> bool:
        """One F7_seqwSleep test: is there a spike after ``window_gap_ns`` of idle time (the gap a whole-buffer
        batch needs; smaller batches idle the share of it that drains theirs, :func:`drained_share`)?"""
        seen: list[float] = []  # the first overflow's position in each run of the same batch (inf: none)
        while True:
            batch = max(int(state["capacity"] * state["fraction"]) // size, 1) * size
            share = drained_share(batch / state["capacity"], batches) or 1.0
            frame = gap_test(ctx, region, batch, size, max(int(window_gap_ns * share), 1), batches=batches,
                             settle_ns=PIPELINED_SETTLE_NS if pipelined else 0)
            frame["test"] = state["test"]
            frame["fraction"] = batch / state["capacity"]
            frame["window_gap_ns"] = window_gap_ns
            state["test"] += 1
            first = frame[frame["batch"] == 0]
            # A stall in the first batch is no overflow: only writes nothing overtook (blocking).
            overflow = blocking(first["submit_ns"], first["complete_ns"], quick_spikes(first["latency_ns"].to_numpy()))
            at = float(first["position"].to_numpy()[np.flatnonzero(overflow)[0]]) if overflow.any() else math.inf
            if seen or math.isfinite(at):
                # A stall that blocks the writes in flight looks like an overflow (harsh noise: one shrank the
                # batches to 80 %, another to a third), but it falls anywhere; an overflow of the empty buffer
                # falls where the buffer is full, run after run. So the same batch runs again: an overflow at the
                # same place (within OVERFLOW_AGREE of the batch) counts; none the second time, no overflow; two
                # that disagree, a third run and the median of the three.
                seen.append(at)
                if len(seen) == 1 or (len(seen) == 2 and math.isfinite(at)
                                      and abs(seen[0] - at) > OVERFLOW_AGREE * batch):
                    continue
                at = min(seen) if len(seen) == 2 and math.isfinite(at) else float(np.median(seen))
                seen = []
            if math.isfinite(at):
                # The first batch overflowed the empty buffer, so the test says nothing about the gap. P8 read the
                # buffer too large: the bytes written before the overflow are its capacity (as P8 reads it), once;
                # after that the batches shrink, and their gaps with them (drained_share).
                # Less RECOUNT_MARGIN (to the nearest write): the overflow point moves a little with noise (the
                # buffer drains in the moments the device idles between writes), and a batch that just overflows
                # again would send the search to shrinking batches; (1 - margin) of the buffer reads (1 - margin)
                # of the window.
                held = int(round(at * (1 - RECOUNT_MARGIN) / size)) * size
                if not state.get("recounted") and size <= held < state["capacity"]:
                    state["capacity"] = held
                    state["recounted"] = True
                    continue
                if state["fraction"] * SHRINK >= MIN_FRACTION:
                    state["fraction"] *= SHRINK
                    continue
            state["frames"].append(frame)
            high = frame["latency_ns"].to_numpy() >= SPIKE_RATIO * np.median(first["latency_ns"].to_numpy())
            high &= frame["batch"].to_numpy() > 0
            # A write that later ones overtook met a stall, not a flush: the buffer blocks every write.
            marked = frame.assign(spike=_blocking_spikes(frame, high))
            return bool(_test_spiked(marked[marked["batch"] > 0], batch / state["capacity"]))

    votes: list[dict[str, Any]] = []
    while len(votes) < MAX_TESTS:
        gap = next_gap(pd.DataFrame(votes, columns=["gap_ns", "spiked"]))
        if gap is None:
            break
        votes.append({"gap_ns": gap, "spiked": test(gap)})
    frame = pd.concat(state["frames"], ignore_index=True)
    frame["round"] = 0
    answer = analyse_flush_window(frame)
    if buffer.confidence is not None and answer.confidence is not None and buffer.confidence < answer.confidence:
        # The batches are P8's capacity: a window measured with batches of a buffer P8 is unsure of is no surer
        # (pm981-256g at harsh noise: batches of a false 10 MiB never spiked, "62.5 us" at 0.95 for 40 ms).
        answer.confidence = float(buffer.confidence)
        answer.evidence += f"; no surer than P8's capacity ({buffer.confidence:.2f})"
    if len(votes) >= MAX_TESTS:
        answer.evidence += f"; the search stopped after {MAX_TESTS} tests without a clear step"
    region.release()
    if state["capacity"] != capacity:
        answer.evidence += (f"; batches of {format_size(state['capacity'])}, the bytes a first batch held before it "
                            f"overflowed the empty buffer (P8 read {format_size(capacity)})")
    tests = _gap_tests(answer.raw)
    tests = _window_tests(tests) if not tests.empty else tests  # drawn at the gaps the answer is in
    answer.figures = [figure_flush_window(answer.raw, tests, directory, answer.value)]
    second = int((buffer.extra or {}).get("second_level") or 0)
    if second > state["capacity"]:
        window2, evidence2 = second_level_window(ctx, Region(ctx), state["capacity"], second, answer.value)
        answer.extra["second_level_window"] = window2
        answer.evidence += "; " + evidence2
    return answer


# The second level's own window (Table 4's "10ms | 5s"): the gaps tried, from a few first-level windows up.
SECOND_GAP_MIN_NS = 20 * MS
SECOND_GAP_MAX_NS = 20 * S
SECOND_GAP_RESOLUTION = 1.15
SECOND_WRITE_SIZE = 256 * KIB  # the second level is hundreds of MiB: large writes keep the test short
SECOND_LEVEL_RATIO = 4.0  # a second-level flush is this many times the longest write of a batch that fits


def second_level_window(ctx: Context, region: Region, first: int, second: int,
                        first_window: float | None) -> tuple[float | None, str]:
    """The idle time after which the second level has drained (seconds; None = never within 20 s): batches of
    the second level's size (whole first-level flushes, so the batch itself never overflows it) from empty
    levels, a gap, and the same again; the second batch waits for a second-level flush (a write
    SECOND_LEVEL_RATIO times the longest of the first batch, blocking) until the gap lets the second level
    drain. The same geometric search as the first level's, to SECOND_GAP_RESOLUTION."""
    batch = max(second // first, 1) * first
    size = max(min(SECOND_WRITE_SIZE, first // 8) // KIB * KIB, 4 * KIB)
    batch = batch // size * size

    def spiked(gap_ns: int) -> bool:
        frame = gap_test(ctx, region, batch, size, gap_ns, batches=2)
        base = float(frame.loc[frame["batch"] == 0, "latency_ns"].max())
        high = (frame["latency_ns"].to_numpy() >= SECOND_LEVEL_RATIO * base) & (frame["batch"].to_numpy() > 0)
        frame["test"] = gap_ns
        return bool(_blocking_spikes(frame, high).any())

    lo = None
    hi = max(SECOND_GAP_MIN_NS, int(2 * first_window * 1e9) if first_window else 0)
    while spiked(hi):
        lo, hi = hi, hi * GAP_GROWTH
        if lo >= SECOND_GAP_MAX_NS:
            region.release()
            return None, (f"the second level ({format_size(second)}) did not drain in {format_ns(lo)} of idle time: "
                          f"never")
        hi = min(hi, SECOND_GAP_MAX_NS)
    if lo is None:
        region.release()
        return hi / 1e9, (f"the second level ({format_size(second)}) drained within {format_ns(hi)} (the shortest gap "
                          f"tried)")
    while hi / lo > SECOND_GAP_RESOLUTION:
        mid = int(math.sqrt(lo * hi))
        if spiked(mid):
            lo = mid
        else:
            hi = mid
    region.release()
    return hi / 1e9, (f"the second level ({format_size(second)}): a second-level flush after {format_ns(lo)} idle, "
                      f"none after {format_ns(hi)}")


def gap_test(ctx: Context, region: Region, batch_bytes: int, size: int, gap_ns: int, *, batches: int,
             settle_ns: int = 0) -> pd.DataFrame:
    """From an empty buffer into erased space: ``batches`` sequential batches of ``batch_bytes``, ``gap_ns`` of
    idle time between them; ``settle_ns`` of idle time after the host flush, before the first batch."""
    region.recycle()
    flush_cache(ctx)
    if settle_ns:
        ctx.idle(settle_ns)
    frames = []
    for b in range(batches):
        if b:
            ctx.idle(gap_ns)
        frame = write_series(ctx, region.take(batch_bytes), batch_bytes, size, QUEUE_DEPTH,
                             f"batch {b + 1} of {format_size(batch_bytes)} after {format_ns(gap_ns)} idle")
        frame["batch"] = b
        frame["position"] += b * batch_bytes
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    out["gap_ns"] = gap_ns
    return out


def _test_spiked(later: pd.DataFrame, fraction: float) -> bool:
    """Whether a gap test's later batches met the flush a too-short gap causes. Whole-buffer batches: every one
    of them (each finds the buffer as the gap left it, so each overflows); a stall that blocks the writes in
    flight spikes one batch only. Smaller batches fill the buffer over several: the last one."""
    per_batch = later.groupby("batch")["spike"].any()
    if per_batch.empty:
        return False
    return bool(per_batch.all()) if fraction >= 0.99 else bool(per_batch.iloc[-1])


def _gap_tests(raw: pd.DataFrame) -> pd.DataFrame:
    if raw is None or raw.empty or "spike" not in raw:
        return pd.DataFrame()
    batches = raw.groupby(["round", "test"])["batch"].max().rename("batches") + 1
    later = raw[raw["batch"] > 0]
    columns = {"gap_ns": ("gap_ns", "first"), "worst_ns": ("latency_ns", "max"), "fraction": ("fraction", "first")}
    if "window_gap_ns" in later:
        columns["window_gap_ns"] = ("window_gap_ns", "first")
    tests = later.groupby(["round", "test"]).agg(**columns)
    tests["spiked"] = [_test_spiked(g, float(g["fraction"].iloc[0])) for _, g in later.groupby(["round", "test"])]
    return tests.join(batches).reset_index()


def _window_tests(tests: pd.DataFrame) -> pd.DataFrame:
    """The gap tests with each gap as the share of the window it stands for (:func:`drained_share`): the gap
    itself for full-buffer batches; tests whose batches fit without any drain are left out. Tests that carry the
    window gap they were run for (``window_gap_ns``, the probe's own) keep it exactly, so repeated tests of one
    gap are votes on one gap."""
    if "window_gap_ns" in tests:
        return tests.assign(gap_ns=tests["window_gap_ns"])
    share = [drained_share(f, int(b)) for f, b in zip(tests["fraction"], tests["batches"], strict=True)]
    kept = np.array([s is not None for s in share], dtype=bool)
    out = tests[kept].copy()
    out["gap_ns"] = out["gap_ns"] / np.array([s for s in share if s is not None], dtype=float)
    return out


def _blocking_spikes(frame: pd.DataFrame, mask: np.ndarray) -> np.ndarray:
    """``mask`` without the spikes that later writes of the same test overtook (stalls, not flushes)."""
    out = np.zeros(len(frame), dtype=bool)
    # Each batch is a run of its own, timed from its start.
    keys = [k for k in ("round", "test", "batch") if k in frame]
    groups = frame.groupby(keys).indices.values() if keys else [np.arange(len(frame))]
    for rows in groups:
        out[rows] = blocking(frame["submit_ns"].to_numpy()[rows], frame["complete_ns"].to_numpy()[rows], mask[rows])
    return out


def analyse_flush_window(frame: pd.DataFrame) -> Answer:
    lat = frame["latency_ns"].to_numpy()
    classes = classify_series(lat, log=True)
    answers: list[tuple[float | None, float | None, float]] = []
    raw = None
    for c in classes or [None]:
        marked = frame.copy()
        marked["spike"] = _blocking_spikes(marked, spike_mask(lat, c))
        step = flush_step(_window_tests(_gap_tests(marked)))
        # As sure as the classes are apart (silhouette) and the step is clear, whichever is less.
        separation = c.silhouette if c is not None else flatness(lat)
        answers.append((step.window, step.longest_spiked, min(separation, step.confidence)))
        if raw is None:
            raw = marked
    window, longest_spiked, confidence = answers[0]
    alternatives = []
    for w, _, s in answers[1:]:
        if w != window and all(a["value"] != w for a in alternatives):
            alternatives.append({"value": w, "confidence": round(s, 4)})
    fraction = float(frame["fraction"].min())
    if window is None:
        evidence = (f"writes after {format_ns(longest_spiked * 1e9)} of idle time still waited for a flush: the "
                    f"buffer never drains while idle")
    else:
        evidence = f"batches of {fraction:.0%} of the buffer: no spike after {format_ns(window * 1e9)} idle"
        if longest_spiked is not None:
            evidence += f", a spike after {format_ns(longest_spiked * 1e9)}"
        if fraction < 1.0:
            evidence += (" (gaps scaled to the whole buffer: a full batch overflowed the empty buffer, and a smaller "
                         "one fits once the proportional idle drain has emptied its share)")
    return Answer(value=window, confidence=confidence, evidence=evidence, alternatives=alternatives, raw=raw)


def figure_flush_window(raw: pd.DataFrame, tests: pd.DataFrame, directory: Path,
                        window: float | None = None) -> Path:
    """Seed 003 Figure 3: the longest write latency after each idle gap tried; and the writes of the two tests
    either side of the answer (the longest gap that still spiked, the shortest that did not)."""
    fig, (left, right) = plots.panels("P10 internal flush window: write batches separated by idle gaps",
                                      1, 2, size=(11, 4.0))
    shown: list[tuple[pd.DataFrame, str, str]] = []
    if not tests.empty:
        for spiked, color, label in ((True, "tab:red", "spike"), (False, "tab:green", "no spike")):
            t = tests[tests["spiked"] == spiked]
            left.scatter(t["gap_ns"], t["worst_ns"] / 1e3, color=color, label=label)
        if window:
            left.axvline(window * 1e9, color="grey", linestyle="--", linewidth=1,
                         label=f"flush window {format_ns(window * 1e9)}")
        plots.duration_axis(left, "x")
        left.set_yscale("log")
        spiked = tests[tests["spiked"]]
        clean = tests[~tests["spiked"]]
        if window:
            # The tests either side of the step: a stall's spike after a longer gap is not the one to show.
            spiked = spiked[spiked["gap_ns"] < window * 1e9 * (1 - 1e-9)]
            clean = clean[clean["gap_ns"] >= window * 1e9 * (1 - 1e-9)]
        if not spiked.empty:
            row = spiked.loc[spiked["gap_ns"].idxmax()]
            shown.append((raw[(raw["round"] == row["round"]) & (raw["test"] == row["test"])], "tab:red",
                          f"after {format_ns(row['gap_ns'])}: spike"))
            clean = clean[clean["gap_ns"] > row["gap_ns"]]
        if not clean.empty:
            row = clean.loc[clean["gap_ns"].idxmin()]
            shown.append((raw[(raw["round"] == row["round"]) & (raw["test"] == row["test"])], "tab:green",
                          f"after {format_ns(row['gap_ns'])}: no spike"))
    elif raw is not None and not raw.empty:
        left.text(0.5, 0.5, "no write buffer (P8): no idle time needed", ha="center", va="center",
                  transform=left.transAxes)
        shown.append((raw, "tab:blue", "two batches back to back: no spike"))
    left.set_xlabel("idle gap between batches")
    left.set_ylabel("longest write latency after the gap (us)")
    for frame, color, label in shown:
        right.scatter(frame["position"] / MIB, frame["latency_ns"] / 1e3, s=4, color=color, label=label)
    right.set_yscale("log")
    right.set_xlabel("data written in the test (MiB; batches back to back, gaps not drawn)")
    right.set_ylabel("write latency (us)")
    return plots.save(fig, directory, "P10_flush_window",
                      "Write batches separated by idle gaps of growing length: the shortest gap after which no write "
                      "waits for a flush is the flush window (left); the writes of the tests either side of it "
                      "(right).")


PROBES = [Probe("P10", "internal flush window", ERASED, ("P8",), probe_flush_window, unit="seconds")]
