"""P8 write buffer capacity (seed 003 §3.1 ``F6_conSeqW``, §4.2, Table 4): concurrent sequential writes into
erased space from an empty buffer (a host flush empties it first). A full buffer makes the write that overflows it
wait for a flush: a latency spike. The bytes written before the first spike are the capacity; when later spikes
come closer together than that, the buffer flushes only part of itself (Table 4's "p"); a rare, much larger spike
after many first-level ones is a second level filling up. The written amount grows until enough spikes are seen
(buffers range from none to hundreds of MiB). A repeat with smaller writes refines the capacity and tells a buffer
counted in bytes from one counted in write commands (§4.2, A200GH). The probe trims what it wrote before it writes
there again, and when it is done.

A buffer that pipelines its flushes (the controller programs what it holds while it takes new writes, so a steady
stream waits only for the room it needs) shows one spike, where it first fills from empty, and no flush lattice
after it. A firmware stall can be as long (harsh noise: 10 ms stalls beside the PM981's 18 ms flush), so no size
rule tells the two apart; where they fall does. Every early spike of a series without a lattice is a candidate,
and a candidate is a buffer only where the other series from an empty buffer spike at the same bytes more often
than their own noise rate explains (:func:`pipelined_agreement`): a stall or background operation falls anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binom, norm, poisson

from .. import plots
from ..analysis.jenks import Classification, classify_series
from ..experiments.context import Context
from ..units import format_size
from ._write_common import (
    KIB,
    MIB,
    QUEUE_DEPTH,
    SPIKE_RATIO,
    WRITE_SIZE,
    Region,
    blocking,
    flatness,
    flush_cache,
    quick_spikes,
    spike_events,
    spike_mask,
    write_series,
)
from .base import ERASED, Answer, Probe, until_stable

GIB = 1 << 30
FIRST_CHUNK = 8 * MIB
MAX_CHUNK = 128 * MIB
# Write at least this much in the first round to meet a second level (Table 4: 126.5 MB to 810 MB) ...
SECOND_LEVEL_SEARCH = 1 * GIB
# ... and never more than this, even when a huge first level has shown fewer than MIN_FLUSHES spikes.
MAX_WRITTEN = 3 * GIB
MIN_FLUSHES = 4
MAX_IOS_WRITE = 4 * MIB  # the largest writes tried to outgrow a buffer that counts write commands
# A second-level flush is at least this many times the first level's spikes.
SECOND_LEVEL_RATIO = 4.0


# ---- analysis: pure functions on latencies (unit-tested on synthetic series) -----------------------------------


def common_interval(values, tolerance: float = 0.05) -> tuple[float, float] | None:
    """The most common value among ``values`` (intervals between neighbouring abnormal points, seed 003 §3.2),
    values within ``tolerance`` of each other counting as one: (value, share of all values)."""
    v = np.sort(np.asarray(values, dtype=float))
    v = v[v > 0]
    if len(v) == 0:
        return None
    groups: list[list[float]] = [[v[0]]]
    for x in v[1:]:
        if x <= groups[-1][0] * (1 + tolerance):
            groups[-1].append(x)
        else:
            groups.append([x])
    best = max(groups, key=len)  # ties: the smaller value, as groups are in increasing order
    return float(np.median(best)), len(best) / len(v)


# A flush lattice (first flush, then one every interval) is accepted when at least this share of its points has a
# spike: a full buffer flushes at every point, noise (background operations, stalls) spikes at random places.
LATTICE_RECALL = 0.75
LATTICE_CANDIDATE_STARTS = 16
# Flush positions agree within this many writes (the write that overflows, the one queued behind it, drift).
LATTICE_TOLERANCE_WRITES = 3
LATTICE_DRIFT = 0.01  # ... or this share of the interval
LATTICE_MIN_HITS = 3  # two spikes always make a lattice
# ... and its hits must be more than the spikes' density puts on that many points by chance, at this family-wise
# level over every (first flush, interval) tried: at harsh noise a 16 KiB series holds a spike of 3x the median
# (host jitter, a slow insert) every 2 MiB, and among hundreds of candidate lattices one caught 4 of 5 points
# (pm981-256g: "10.11 MiB" for a 64 MiB buffer that series had not reached).
LATTICE_SIGNIFICANCE = 0.05
# The confidence of "no buffer" from one series that has spikes but no lattice.
AMBIGUOUS_NO_BUFFER = 0.6
NO_LATTICE_AGREED = 0.8  # ... and of "no buffer" when every series (two or more) had spikes but no lattice
# The first flush where the series agree (:func:`first_flush`). Series of different write sizes see it at the same
# place within this share: the buffer drains a little in the moments the device idles between writes, the more
# the smaller they are (harsh noise: 16 KiB writes flushed first 1.4-2.6 % later than 64 KiB ones).
FIRST_AGREE = 0.05
# The noise model, stated priors (not fitted): the chance that noise hides a series' first flush or moves it by
# more than FIRST_AGREE (harsh noise did so in one series of twelve), and the rate of flush-like spikes noise makes
# per write (a stall that blocks both writes in flight: harsh noise showed 2-3 off the lattice in 16,000 writes).
MISSED_FLUSH = 0.1
NOISE_SPIKE_RATE = 2e-4
DISAGREEMENT = 0.6  # the confidence factor when two or more series saw a buffer and no first flush repeats
# A pipelined buffer (one flush spike, then none): the series must have written this many times the bytes before
# the spike (a buffer that flushes whole would have spiked at each multiple). Its first PIPELINED_CANDIDATES such
# spikes are candidates (a stall may come before the flush).
PIPELINED_REACH = MIN_FLUSHES
PIPELINED_CANDIDATES = 3
# The repetition test's prior: "no buffer" against all the candidates together (an even stated prior, not fitted).
NO_BUFFER_PRIOR = 0.5
# How far apart series place one flush (a share of its bytes, one standard deviation): the same write size within
# 0.7 % (pm981-256g, medium noise), 16 KiB writes 1.4-2.6 % later than 64 KiB ones (harsh).
FLUSH_SPREAD = 0.015
# An answer below this confidence is a close call: the probe measures another series from an empty buffer (each
# one a repeat the agreement tests weigh) rather than settle, up to MAX_ROUNDS rounds (round 0 the main series,
# round 1 the finer and count-limit series, every later round one more series of the main size).
CLOSE_CALL = 0.7
# A series that did not spike at a candidate counts as a miss only if it wrote at least this share of the pace of the
# fastest series of its write size that did spike there (pace: the median latency before it).
PACE_SHARE = 0.8
MAX_ROUNDS = 5


def flush_lattice(positions, end: float, tolerance: float) -> tuple[float, float, list[float], float] | None:
    """The regular pattern in spike positions (bytes): a first flush ``F`` and one every ``I`` after it, found as
    the (F, I) whose points ``F, F+I, ...`` up to ``end`` (bytes written) carry the most spikes, at least
    LATTICE_RECALL of them. A buffer filling at a steady write stream flushes at every point of its lattice;
    noise spikes at random places and forms none. Each hit re-anchors the next point (flush positions drift a
    little when the buffer drains between runs). Returns (F, I, the spike positions on it, recall) or None.

    Hand-written: no library fits a periodic point pattern with a phase and misses to one-dimensional events."""
    pos = np.sort(np.asarray(positions, dtype=float))
    if len(pos) < 2:
        return None
    steps = np.r_[np.diff(pos), pos[2:] - pos[:-2]]
    steps = steps[steps > 2 * tolerance]
    # Intervals within the tolerance of each other are one candidate.
    intervals = np.unique(np.round(steps / tolerance)) * tolerance
    density = len(pos) / max(end, 1.0)
    tried = max(min(len(pos), LATTICE_CANDIDATE_STARTS) * len(intervals), 1)
    best: tuple[float, float, list[float], float] | None = None
    for start in pos[:LATTICE_CANDIDATE_STARTS]:
        for interval in intervals:
            # Flushes drift by a share of the interval (the buffer drains a little between runs, flush times vary).
            near = max(tolerance, LATTICE_DRIFT * interval)
            allowed = (1 - LATTICE_RECALL) * ((end - tolerance - start) // interval + 1)
            on: list[float] = []
            points = 0
            x = start
            while x <= end - tolerance and points - len(on) <= allowed:
                points += 1
                i = int(np.searchsorted(pos, x - near))
                if i < len(pos) and pos[i] <= x + near:
                    on.append(float(pos[i]))
                    x = pos[i]
                x += interval
            recall = len(on) / points if points else 0.0
            if points - len(on) > allowed or len(on) < LATTICE_MIN_HITS or recall < LATTICE_RECALL:
                continue
            chance = min(density * 2 * near, 1.0)  # a spike within ``near`` of a point, were they scattered
            if binom.sf(len(on) - 1, points, chance) * tried > LATTICE_SIGNIFICANCE:
                continue
            if best is None or (len(on), recall) > (len(best[2]), best[3]):
                best = (float(start), float(interval), on, recall)
    if best is not None:
        # The interval as measured (the candidates sit on a grid of the tolerance): the median spacing of the
        # spikes on the lattice, each over the lattice steps it spans.
        gaps = np.diff(best[2])
        spans = np.maximum(np.round(gaps / best[1]), 1)
        best = (best[0], float(np.median(gaps / spans)), best[2], best[3])
    return best


@dataclass
class BufferReading:
    """What one series of writes from an empty buffer says about the buffer (bytes)."""

    size: int
    capacity: int
    first: int | None = None  # bytes written before the first flush
    interval: int | None = None  # most common bytes between flushes
    share: float = 0.0
    partial: int | None = None
    second_level: int | None = None
    flushes: int = 0
    confidence: float | None = None
    classes: int = 0
    noise_spikes: int = 0  # spikes off the flush lattice
    spikes: tuple[int, ...] = ()  # where every flush-like spike began (bytes), on the lattice or not
    pipelined: bool = False  # one whole-buffer flush from empty and none after it (:func:`pipelined_flush`)
    candidates: tuple[int, ...] = ()  # a pipelined reading's candidate flushes (bytes; :func:`pipelined_candidates`)
    written: int = 0  # bytes the series wrote
    writes: int = 0  # writes in the series
    # Each write's place (bytes) and latency (ns): how fast the series wrote before a candidate (:func:`pace`).
    positions: np.ndarray | None = field(default=None, compare=False, repr=False)
    latencies: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def interval_writes(self) -> float | None:
        return None if not self.interval else self.interval / self.size

    def pace(self, before: float) -> float | None:
        """The median latency (ns) of the series' writes before ``before`` bytes (None: none, or not kept): at
        one queue depth and write size, how fast the series filled the buffer up to there."""
        if self.positions is None or self.latencies is None:
            return None
        lat = self.latencies[self.positions < before]
        return float(np.median(lat)) if len(lat) else None


def read_buffer(position, latency_ns, size: int, classification: Classification | None,
                keep=None) -> BufferReading:
    """Seed 003's P8 reading of one series: the flushes are the abnormal writes that fall on a regular lattice
    (:func:`flush_lattice`; spikes off it are noise); the capacity is the bytes before the first flush (the
    buffer started empty) or, when that is shorter, the lattice's interval. Confidence: the classification's
    silhouette times the share of lattice points that spiked; spikes without a lattice give "no buffer" at
    AMBIGUOUS_NO_BUFFER (noise, or a buffer whose flushes this series did not show). ``keep``: the writes that
    may count as spikes (:func:`~._write_common.blocking` leaves out the ones later writes overtook)."""
    lat = np.asarray(latency_ns, dtype=float)
    position = np.asarray(position)
    mask = spike_mask(lat, classification)
    if keep is not None:
        mask &= np.asarray(keep, dtype=bool)
    events = spike_events(position, lat, mask)
    confidence = None if classification is None else classification.silhouette
    classes = 0 if classification is None else classification.n_classes
    end = float(position.max()) + size if len(position) else 0.0
    extent = {"written": int(end), "writes": len(lat), "positions": position, "latencies": lat}
    if events.empty:
        return BufferReading(size, 0, flushes=0, confidence=flatness(lat), classes=classes, **extent)
    lattice = flush_lattice(events["position"].to_numpy(dtype=float), end, LATTICE_TOLERANCE_WRITES * size)
    if lattice is None:
        single = pipelined_flush(events, end)
        spikes = tuple(int(x) for x in events["position"])
        if single is not None:
            return BufferReading(size, single, first=single, share=1.0, flushes=1, confidence=confidence or 0.0,
                                 classes=classes, noise_spikes=len(events) - 1, spikes=spikes, pipelined=True,
                                 candidates=pipelined_candidates(events, end), **extent)
        return BufferReading(size, 0, flushes=0, confidence=AMBIGUOUS_NO_BUFFER, classes=classes,
                             noise_spikes=len(events), spikes=spikes, **extent)
    first_f, interval_f, on, recall = lattice
    spikes = tuple(int(x) for x in events["position"])
    first, interval = int(first_f), int(round(interval_f))
    capacity = first
    partial = None
    if first < 0.9 * interval:
        capacity = interval  # the buffer was not empty at the start: trust the spacing
    elif interval < 0.9 * first:
        partial = interval  # later flushes free only part of it (Table 4 "p")
    flushes = events[events["position"].isin(on)].reset_index(drop=True)
    second = _second_level(flushes, capacity)
    return BufferReading(size, capacity, first, interval, recall, partial, second, len(flushes),
                         (confidence or 0.0) * recall, classes, noise_spikes=len(events) - len(flushes), spikes=spikes,
                         **extent)


def pipelined_candidates(events: pd.DataFrame, end: float) -> tuple[int, ...]:
    """The spikes that may be a pipelined buffer's one flush: the first PIPELINED_CANDIDATES after which the series
    wrote on to PIPELINED_REACH times their bytes (a buffer that flushes whole would have spiked again at each
    multiple: no lattice was found)."""
    pos = events["position"].to_numpy(dtype=float)
    pos = pos[(pos > 0) & (PIPELINED_REACH * pos <= end)]
    return tuple(int(p) for p in pos[:PIPELINED_CANDIDATES])


def pipelined_flush(events: pd.DataFrame, end: float) -> int | None:
    """The bytes before the one flush of a pipelined buffer as one series sees it (None: no candidate): the
    candidate of the longest wait (:func:`pipelined_candidates`). One series cannot tell it from a stall; the
    series together do (:func:`pipelined_agreement`)."""
    candidates = pipelined_candidates(events, end)
    if not candidates:
        return None
    rows = events[events["position"].isin(candidates)]
    return int(rows["position"].iloc[int(np.argmax(rows["peak_ns"].to_numpy(dtype=float)))])


def as_no_buffer(r: BufferReading) -> BufferReading:
    """A pipelined reading set aside (another series saw a flush lattice, or no other series repeats its spike):
    its spikes count as noise, as a series without a lattice."""
    return replace(r, capacity=0, first=None, flushes=0, confidence=AMBIGUOUS_NO_BUFFER,
                   noise_spikes=len(r.spikes), pipelined=False) if r.pipelined else r


def second_level_flushes(events: pd.DataFrame) -> list[int]:
    """The flushes (rows of ``events``) far longer than the first level's (a whole level programmed to NAND)
    and followed by ordinary ones again: a lasting change, e.g. an exhausted SLC cache, is no second level."""
    peaks = events["peak_ns"].to_numpy(dtype=float)
    if len(peaks) < 3:
        return []
    big = peaks >= SECOND_LEVEL_RATIO * float(np.percentile(peaks, 25))
    return [int(i) for i in np.flatnonzero(big) if i + 1 < len(peaks) and not big[i + 1]]


def _second_level(events: pd.DataFrame, first_level: int) -> int | None:
    """A second level's size: the bytes that went into it before its first flush, i.e. everything written but
    what the first level holds."""
    flushes = second_level_flushes(events)
    if not flushes:
        return None
    size = int(events["position"].iloc[flushes[0]]) - first_level
    return size if size > first_level else None


@dataclass
class FirstFlush:
    """Where the series of writes from an empty buffer agree the first flush is: ``position`` (bytes, the
    hypothesis), ``hits`` (per series, by index, the spike it saw there) and ``confidence`` (the posterior mass of
    the hypotheses within FIRST_AGREE of it)."""

    position: float
    hits: dict[int, int]
    confidence: float


def first_flush(readings: list[BufferReading]) -> FirstFlush | None:
    """The first flush that repeats across series (issue 16). Each series of writes from an empty buffer should
    show a flush-like spike where the buffer first fills; noise may hide it (the series' lattice then starts a
    flush late) or add a spike before it. Every spike up to a series' lattice start is a candidate; candidates
    within FIRST_AGREE of each other are one hypothesis ``c``, scored by a stated noise model: each series shows a
    spike within FIRST_AGREE of ``c`` with probability 1 - MISSED_FLUSH, and its spikes before ``c`` are noise,
    Poisson at NOISE_SPIKE_RATE per write; one more hypothesis is that every series missed it. The hypotheses'
    posterior (uniform prior) gives the confidence: a first flush one series alone saw, against flushes the others
    saw later, stays unsure, and so does one only one series looked for; one every series saw before any other
    spike is sure. As P10's step in the gap, a likelihood over a few candidate points (no library fits
    this mixture of misses and Poisson noise to a handful of positions)."""
    series = [(i, r) for i, r in enumerate(readings) if r.capacity > 0 and r.first]
    if not series:
        return None
    spikes = {i: np.asarray(r.spikes or (r.first,), dtype=float) for i, r in series}
    largest = max(r.size for _, r in series)

    def tolerance(c: float) -> float:
        return max(FIRST_AGREE * c, LATTICE_TOLERANCE_WRITES * largest)

    candidates = np.sort(np.concatenate([s[s <= r.first + tolerance(r.first)] for (i, r), s in
                                         zip(series, spikes.values(), strict=True)]))
    groups: list[list[float]] = []
    for c in candidates:
        if groups and c - groups[-1][0] <= tolerance(groups[-1][0]):
            groups[-1].append(float(c))
        else:
            groups.append([float(c)])
    hypotheses = np.array([float(np.median(g)) for g in groups])
    ll = np.zeros(len(hypotheses))
    for h, c in enumerate(hypotheses):
        near = tolerance(c)
        for i, r in series:
            s = spikes[i]
            hit = bool((np.abs(s - c) <= near).any())
            before = int((s < c - near).sum())
            ll[h] += np.log(1 - MISSED_FLUSH if hit else MISSED_FLUSH)
            # The chance of that many noise spikes, relative to none: no hypothesis is favoured for the noise
            # that did not come (the writes after c may hold noise too).
            expected = NOISE_SPIKE_RATE * max(c - near, 0.0) / r.size + 1e-12
            ll[h] += poisson.logpmf(before, expected) - poisson.logpmf(0, expected)
    # One more hypothesis: every series missed the first flush, which came before all the candidates.
    missed = len(series) * np.log(MISSED_FLUSH)
    top = max(float(ll.max()), missed)
    posterior = np.exp(ll - top)
    posterior /= posterior.sum() + np.exp(missed - top)
    best = int(np.argmax(posterior))
    c = float(hypotheses[best])
    near = tolerance(c)
    hits = {}
    for i, _ in series:
        s = spikes[i]
        close = s[np.abs(s - c) <= near]
        if len(close):
            hits[i] = int(close[np.argmin(np.abs(close - c))])
    confidence = float(posterior[np.abs(hypotheses - c) <= FIRST_AGREE * c].sum())
    return FirstFlush(c, hits, confidence)


def count_limited(found: list[BufferReading]) -> tuple[list[BufferReading], list[BufferReading]]:
    """``found`` (series that saw a buffer) split into those a command count flushed and the rest. Counted writes
    flush smaller writes sooner in bytes: only a series of larger writes that held more shows it (a series of
    small writes that read more than the larger ones saw its first flush late, to noise)."""
    limited = [r for r in found
               if any(o.size > r.size and o.capacity - r.capacity > max(0.1 * o.capacity, r.size) for o in found)]
    return limited, [r for r in found if r not in limited]


def combine_buffer_readings(readings: list[BufferReading]) -> tuple[BufferReading, int | None, str]:
    """Series at several write sizes. A buffer that also flushes after a number of write commands (capacity_ios)
    flushes sooner, in bytes, with small writes: a series whose capacity falls short of a series of larger writes
    by more than 10 % and more than one write is limited by the count, which is its bytes before the first flush
    over its write size. The byte capacity is the first flush the other series agree on (:func:`first_flush`),
    read from the finest of them that saw it. Pipelined readings (one flush, no lattice) count only when no series
    saw a lattice and at least two of them place their spike together; else their spikes are noise. Returns
    (reading used, capacity_ios or None, a note)."""
    readings, no_buffer = _pipelined_agreed(readings)
    found = [r for r in readings if r.capacity > 0]
    if not found:
        # Spikes, but on no lattice in any series: noise rather than a buffer, the surer the more series agree
        # (and no surer than the repetition test said, when early spikes were candidates).
        noisy = [r for r in readings if r.noise_spikes]
        confidence = readings[0].confidence
        if len(readings) >= 2 and noisy:
            confidence = max(min(r.confidence or 0 for r in readings), NO_LATTICE_AGREED)
        if no_buffer is not None:
            confidence = min(confidence or 0.0, no_buffer)
        return replace(readings[0], confidence=confidence), None, ""
    if all(r.pipelined for r in found):
        # The repetition test placed the one flush (pipelined_agreement): the finest writes that saw it.
        return min(found, key=lambda r: (r.size, -(r.confidence or 0))), None, ""
    limited, full = count_limited(found)
    ios = int(round(float(np.median([r.capacity / r.size for r in limited])))) if limited else None
    note = ""
    largest = max(found, key=lambda r: r.size)
    if ios is not None and full == [largest] and abs(largest.capacity / largest.size - ios) <= 0.05 * ios:
        note = (f"every write size tried flushed after {ios} writes, so the byte capacity is at least "
                f"{format_size(largest.capacity)}")
    first = first_flush(full)
    if first is None:
        # Every lattice starts at its series' first write: an empty buffer takes writes before it flushes, so the
        # spikes are a periodic cost of the NAND itself (a write-through TLC drive's high-page programs, every 48
        # pages over 16 units, crashed the probe here), not a buffer; unsure, as spikes on no lattice.
        base = next((r for r in readings if r.capacity == 0), readings[0])
        return replace(base, capacity=0, partial=None, second_level=None,
                       confidence=min(base.confidence or 0.0, AMBIGUOUS_NO_BUFFER)), None, ""
    # The finest writes place the flush best, among the series that saw it nearly as clear as the clearest (noise
    # blurs the flushes of small writes most).
    saw = [full[i] for i in first.hits]
    clearest = max(r.confidence or 0 for r in saw)
    clear = [r for r in saw if (r.confidence or 0) >= clearest - 0.1]
    chosen = min(clear, key=lambda r: (r.size, -(r.confidence or 0)))
    at = first.hits[full.index(chosen)]
    capacity = at
    if chosen.interval and at < 0.9 * chosen.interval:
        capacity = chosen.interval  # the buffer was not empty at the start: trust the spacing
    partial = chosen.interval if chosen.interval and chosen.interval < 0.9 * capacity else None
    confidence = min(chosen.confidence or 0.0, first.confidence)
    if len(full) >= 2 and len(first.hits) < 2:
        confidence *= DISAGREEMENT  # no first flush repeats: lattices of noise, or flushes noise moved
    return replace(chosen, capacity=capacity, first=at, partial=partial, confidence=confidence), ios, note


# ---- measurement ------------------------------------------------------------------------------------------------


@dataclass
class Agreement:
    """The repetition test of the pipelined candidates: the most probable flush position (None: no buffer), the
    spike each series saw there (by index), and the posterior of that answer (of "no buffer" when None)."""

    position: float | None
    hits: dict[int, int]
    posterior: float


def pipelined_agreement(readings: list[BufferReading]) -> Agreement | None:
    """Whether the pipelined candidates repeat across the series from an empty buffer (None: no candidate). A pipelined
    buffer spikes again near the same bytes ``c`` in every series that wrote past them: missed with probability
    MISSED_FLUSH, else the nearest spike lies a normal FLUSH_SPREAD x c away. Noise spikes anywhere, Poisson at the rate
    the series shows away from c (spikes per write, at least NOISE_SPIKE_RATE; each series its own: small writes show
    more of the host's jitter), so the nearest spike lies d bytes away with density 2 rate exp(-2 rate d) (noise falls
    on both sides of c: one-sided, a chance exact repeat in dense noise made optane-like's write-through drive a 19.81
    MiB buffer at harsh noise), and no spike within FIRST_AGREE has probability exp(-rate x the writes there). Each
    candidate position's likelihood ratio against noise leaves out the series that proposed it (it spikes there by
    construction); the positions share one half of the prior, "no buffer" the other (NO_BUFFER_PRIOR). Noise dense
    enough to put a spike within a few percent of any position (a write-through drive at medium noise: one every 4 MiB)
    gives weak evidence however many series "repeat" it. Hand-written for the reason first_flush is: a handful of
    positions under a stated miss-and-noise model."""
    pipelined = [(i, r) for i, r in enumerate(readings) if r.pipelined and r.candidates]
    if not pipelined:
        return None
    spikes = [np.asarray(r.spikes, dtype=float) for r in readings]
    largest = max(r.size for r in readings)

    def tolerance(c: float) -> float:
        return max(FIRST_AGREE * c, LATTICE_TOLERANCE_WRITES * largest)

    proposals = sorted((float(c), i) for i, r in pipelined for c in r.candidates)
    groups: list[list[tuple[float, int]]] = []
    for c, i in proposals:
        if groups and c - groups[-1][0][0] <= tolerance(groups[-1][0][0]):
            groups[-1].append((c, i))
        else:
            groups.append([(c, i)])
    ratios, positions = [], []
    for group in groups:
        c = float(np.median([g[0] for g in group]))
        proposer = min(i for _, i in group)
        near = tolerance(c)
        # Each series' pace (median latency before c), whether it spiked at c, and the pace of the fastest
        # series of each write size that did.
        paces = [r.pace(c - near) for r in readings]
        hits = [bool((np.abs(s - c) <= near).any()) for s in spikes]
        paced: dict[int, float] = {}
        for r, at, hit in zip(readings, paces, hits, strict=True):
            if at is not None and hit:
                paced[r.size] = min(paced.get(r.size, at), at)
        log_ratio = 0.0
        for j, r in enumerate(readings):
            if j == proposer or r.written < c + near:
                continue
            offsets = np.abs(spikes[j] - c)
            at = paces[j]
            if not hits[j] and r.size in paced and at is not None and at * PACE_SHARE > paced[r.size]:
                # A buffer overflows only when the writes come faster than it drains: a series of the same writes
                # that came slower than one that spiked at c (the drive busy with folding or background work: its
                # writes took 2-3x as long) is no test of c (consumer-tlc-hmb at medium noise: three of six 64 KiB
                # series at 0.9-1.4 GB/s where the spiking ones wrote 3 GB/s made its 4 MiB buffer "none" at 0.8).
                continue
            # The series' noise rate (spikes per write), its spikes within ``near`` of c counted as one event: a
            # flush (or a stall) blocks the few writes queued behind the one that waited, and counting each made
            # a short series that only repeated the flush dense noise (consumer-tlc-hmb at medium noise: a
            # 16 KiB series' two spikes at 4.0 and 4.06 MiB and nothing else).
            events = int((offsets > near).sum()) + int(hits[j])
            rate = max(events / max(r.writes, 1), NOISE_SPIKE_RATE)
            if hits[j]:
                # The nearest spike's place: a flush repeats within FLUSH_SPREAD of c (normal), noise falls
                # anywhere at the series' rate (spikes per byte, Poisson).
                spread = FLUSH_SPREAD * c
                # Under noise the nearest of spikes on both sides at density rate lies d away with density
                # 2 rate exp(-2 rate d).
                density = rate / r.size
                log_ratio += math.log(1 - MISSED_FLUSH) + norm.logpdf(float(offsets.min()), 0.0, spread) \
                    - math.log(2 * density) + 2 * density * float(offsets.min())
            else:
                log_ratio += math.log(MISSED_FLUSH) + rate * 2 * near / r.size
        ratios.append(log_ratio)
        positions.append(c)
    top = max(max(ratios), 0.0)
    weights = np.exp(np.array(ratios) - top) * (1 - NO_BUFFER_PRIOR) / len(ratios)
    null = NO_BUFFER_PRIOR * math.exp(-top)
    total = float(weights.sum()) + null
    best = int(np.argmax(weights))
    if weights[best] <= null:
        return Agreement(None, {}, null / total)
    c = positions[best]
    near = tolerance(c)
    hits = {}
    for j, s in enumerate(spikes):
        close = s[np.abs(s - c) <= near]
        if len(close):
            hits[j] = int(close[np.argmin(np.abs(close - c))])
    return Agreement(c, hits, float(weights[best]) / total)


def _pipelined_agreed(readings: list[BufferReading]) -> tuple[list[BufferReading], float | None]:
    """``readings`` with the pipelined ones kept only if no series saw a flush lattice and their candidates repeat
    (:func:`pipelined_agreement`): a buffer flushes at the same bytes from empty every time, noise does not. The
    series that spiked at the agreed position read a buffer of those bytes, as sure as the agreement at most; the
    others are set aside. Also returns the posterior of "no buffer" when the candidates did not repeat (None when
    there were none)."""
    if any(r.capacity > 0 and not r.pipelined for r in readings):
        return [as_no_buffer(r) for r in readings], None
    agreement = pipelined_agreement(readings)
    if agreement is None:
        return [as_no_buffer(r) for r in readings], None
    if agreement.position is None:
        return [as_no_buffer(r) for r in readings], agreement.posterior
    # As clear as the clearest pipelined series' classes (a short series that only repeats the spike read "no
    # lattice", not a silhouette) and the repetition, whichever is less.
    clear = max(r.confidence or 0.0 for r in readings if r.pipelined)
    out = []
    for j, r in enumerate(readings):
        if j in agreement.hits:
            at = agreement.hits[j]
            out.append(replace(r, capacity=at, first=at, interval=None, partial=None, share=1.0, flushes=1,
                               pipelined=True, noise_spikes=len(r.spikes) - 1,
                               confidence=min(clear, agreement.posterior)))
        else:
            out.append(as_no_buffer(r))
    return out, None


def fill_until_flushes(ctx: Context, region: Region, size: int, *, second_level: int, limit: int,
                       series: int, expect_buffer: bool = True) -> pd.DataFrame:
    """F6_conSeqW from an empty buffer into erased space, in growing pieces with no pause between them (the
    buffer does not drain), until MIN_FLUSHES spikes are seen (and at least ``second_level`` bytes written, and any
    second-level flush followed by an ordinary one), or ``limit`` bytes."""
    region.recycle()
    flush_cache(ctx)
    frames: list[pd.DataFrame] = []
    written = 0
    chunk = FIRST_CHUNK
    while written < limit:
        chunk = max(min(chunk, limit - written) // size * size, size)
        frame = write_series(ctx, region.take(chunk), chunk, size, QUEUE_DEPTH,
                             f"sequential {format_size(size)} writes, {format_size(written)}+{format_size(chunk)}")
        frame["position"] += written
        frame["run"] = len(frames)  # each run is timed from its own start
        frames.append(frame)
        written += chunk
        if _enough(pd.concat(frames, ignore_index=True), written, second_level, expect_buffer):
            break
        chunk = min(chunk * 2, MAX_CHUNK)
    out = pd.concat(frames, ignore_index=True)
    out["series"] = series
    return out


def _enough(frame: pd.DataFrame, written: int, second_level: int, expect_buffer: bool = True) -> bool:
    if written < second_level:
        return False
    lat = frame["latency_ns"].to_numpy()
    position = frame["position"].to_numpy()
    classification = _best(classify_series(lat, log=True))
    keep = _keep(frame)
    reading = read_buffer(position, lat, int(frame["size"].iloc[0]), classification, keep=keep)
    if reading.capacity == 0:
        # No flush lattice: no buffer, or one beyond reach (the main series has written far enough); a series
        # looking for a buffer the main one saw goes on to its limit. Noise spikes (a background operation, 3x
        # the latency of a small write) are no flushes: counting them stopped series before the buffer filled.
        # When the main series saw no buffer either, MIN_FLUSHES spikes of any kind end the series: writing on
        # into a write-through drive's noise only lets random spikes line up (optane-like at harsh noise read an
        # 11 MiB buffer from 64 MiB of it).
        if not expect_buffer and second_level == 0:
            return int(spike_events(position, lat, quick_spikes(lat) & (True if keep is None else keep)).shape[0]) \
                >= MIN_FLUSHES
        return 0 < second_level <= written
    if reading.pipelined:
        return written >= max(second_level, PIPELINED_REACH * (reading.first or 0))
    if reading.flushes < MIN_FLUSHES:
        return False
    mask = spike_mask(lat, classification) & (True if keep is None else keep)
    peaks = spike_events(position, lat, mask)["peak_ns"].to_numpy(dtype=float)
    return not (peaks[-1] >= SECOND_LEVEL_RATIO * np.percentile(peaks, 25))  # wait for an ordinary flush after


def _series_readings(frame: pd.DataFrame) -> tuple[list[BufferReading], dict[int, Classification | None]]:
    readings, chosen = [], {}
    for sid, s in frame.groupby("series", sort=True):
        classes = classify_series(s["latency_ns"].to_numpy(), log=True)
        c = classes[0] if classes else None
        chosen[int(sid)] = c
        readings.append(read_buffer(s["position"].to_numpy(), s["latency_ns"].to_numpy(), int(s["size"].iloc[0]), c,
                                    keep=_keep(s)))
    return readings, chosen


def probe_write_buffer(ctx: Context, known: dict[str, Answer], directory: Path) -> Answer:
    region = Region(ctx)
    size = max(WRITE_SIZE, ctx.logical_block)
    fine = max(size // 4, ctx.logical_block, 4 * KIB)
    # On a small device, less: the probe must not wear it or fill it (it trims what it wrote between series).
    search = min(SECOND_LEVEL_SEARCH, ctx.capacity // 8 // MIB * MIB)
    most = max(min(MAX_WRITTEN, ctx.capacity // 4 // MIB * MIB), search)
    state: dict[str, Any] = {"series": 0}

    def next_series() -> int:
        state["series"] += 1
        return state["series"] - 1

    def measure_round(index: int) -> pd.DataFrame:
        if index == 0:
            frame = fill_until_flushes(ctx, region, size, second_level=search, limit=most, series=next_series())
            state["main"] = _read_series(frame)
            return frame
        main: BufferReading = state["main"]
        if index > 1:
            return fill_until_flushes(ctx, region, size, second_level=0, limit=_limit(main, size, search),
                                      series=next_series(), expect_buffer=main.capacity > 0)
        frames = [fill_until_flushes(ctx, region, fine, second_level=0, limit=_limit(main, fine, search),
                                     series=next_series(), expect_buffer=main.capacity > 0)]
        reading = _read_series(frames[-1])
        # Flushes sooner (in bytes) with smaller writes: the buffer also counts commands (capacity_ios). While a
        # larger size flushes after as many writes, it is counted too: larger writes, until the bytes fill first.
        if reading.capacity and main.capacity - reading.capacity > max(0.1 * main.capacity, reading.size):
            count = reading.capacity / reading.size
            previous = main
            while abs(previous.capacity / previous.size - count) <= 0.05 * count and previous.size < MAX_IOS_WRITE:
                larger = previous.size * 4
                frames.append(fill_until_flushes(ctx, region, larger, second_level=0,
                                                 limit=_limit(main, larger, search), series=next_series()))
                previous = _read_series(frames[-1])
        # The first flush counts where it repeats (first_flush): when no series of this round saw it where the
        # main one did (a command count flushed them, noise hid their lattice or moved their first flush), the
        # main size again.
        readings = [main] + [_read_series(f) for f in frames]
        _, full = count_limited([r for r in readings if r.capacity > 0])
        first = first_flush(full)
        if main.capacity and (main.pipelined or first is None or len(first.hits) < 2):
            frames.append(fill_until_flushes(ctx, region, size, second_level=0, limit=_limit(main, size, search),
                                             series=next_series()))
        return pd.concat(frames, ignore_index=True)

    answer = until_stable(measure_round, analyse_write_buffer, min_rounds=2, max_rounds=MAX_ROUNDS, settled=_settled)
    region.release()
    answer.figures = [figure_write_buffer(answer.raw, directory, int(answer.value or 0))]
    return answer


def _settled(previous: Answer, answer: Answer) -> bool:
    """Round 0 is one series: its first flush, unrepeated, is never sure. Settled when the next round's series
    place the capacity within FIRST_AGREE of it and the confidence did not fall (it rises once a repeat agrees),
    unless the answer is a close call (below CLOSE_CALL): then another series of the main size is measured, up to
    MAX_ROUNDS (consumer-tlc-hmb at medium noise answered "none" at 0.57 twice, its 4 MiB the alternative at 0.57,
    from three series of which one had not spiked at 4 MiB; the evidence a fourth brings was never asked for)."""
    a, b = float(previous.value or 0), float(answer.value or 0)
    close = a == b or abs(a - b) <= FIRST_AGREE * max(a, b)
    return close and (answer.confidence or 0) >= max((previous.confidence or 0) - 0.02, CLOSE_CALL)


def _best(classes: list[Classification]) -> Classification | None:
    return classes[0] if classes else None


def _read_series(frame: pd.DataFrame) -> BufferReading:
    lat = frame["latency_ns"].to_numpy()
    classification = _best(classify_series(lat, log=True))
    return read_buffer(frame["position"].to_numpy(), lat, int(frame["size"].iloc[0]), classification,
                       keep=_keep(frame))


def _keep(series: pd.DataFrame) -> np.ndarray | None:
    """The writes of one series that may be flush spikes: not overtaken by later writes of their run (a stall)."""
    if "run" not in series or "submit_ns" not in series:
        return None
    lat = series["latency_ns"].to_numpy(dtype=float)
    high = quick_spikes(lat)
    out = np.ones(len(series), dtype=bool)
    for rows in series.groupby("run").indices.values():
        out[rows] = blocking(series["submit_ns"].to_numpy()[rows], series["complete_ns"].to_numpy()[rows],
                             high[rows]) | ~high[rows]
    return out


def _limit(main: BufferReading, size: int, most: int) -> int:
    """Bytes to write for MIN_FLUSHES flushes at ``size``, from what the first round saw (a flush after a
    number of writes comes sooner in bytes with smaller writes, later with larger ones)."""
    if not main.capacity:
        return min(64 * MIB, most)
    if main.pipelined:
        # Only whether the candidates repeat is left to see (the main series found no lattice over far more): up
        # to the last of them, and the drift of small writes' flushes beyond it.
        return int(min(max(main.candidates or (main.capacity,)) * (1 + 5 * FIRST_AGREE) + size, most))
    expected = (main.first or main.capacity) + (MIN_FLUSHES - 1) * (main.interval or main.capacity)
    expected = expected * max(size / main.size, 1.0) + size
    return int(min(max(2 * expected, 64 * MIB), most))


def analyse_write_buffer(frame: pd.DataFrame) -> Answer:
    readings, chosen = _series_readings(frame)
    reading, ios, note = combine_buffer_readings(readings)
    readings = _pipelined_agreed(readings)[0]
    main = readings[0]
    extra: dict[str, Any] = {}
    if reading.partial:
        extra["partial_flush"] = reading.partial
    if main.second_level:
        extra["second_level"] = main.second_level
    if ios:
        extra["capacity_ios"] = ios
    if reading.pipelined and reading.capacity:
        extra["pipelined"] = True
    sid = next(i for i, r in enumerate(readings)
               if (r.size, r.interval, r.flushes, r.spikes) == (reading.size, reading.interval, reading.flushes,
                                                                 reading.spikes))
    series_ids = sorted(chosen)
    raw = _mark_spikes(frame, chosen)
    alternatives = _buffer_alternatives(frame[frame["series"] == series_ids[sid]], reading)
    if reading.capacity == 0:
        used = frame[frame["series"] == series_ids[sid]]
        evidence = (f"no write among {len(used)} ({format_size(int(used['size'].sum()))} written into an empty "
                    f"buffer) waited {SPIKE_RATIO:g}x the normal latency: no blocking write buffer")
        if reading.noise_spikes:
            evidence = (f"{reading.noise_spikes} spikes among {len(used)} writes "
                        f"({format_size(int(used['size'].sum()))} written into an empty buffer), at no regular "
                        f"interval (noise: background operations, stalls): no blocking write buffer")
    else:
        evidence = (f"{reading.flushes} flush spikes in sequential {format_size(reading.size)} writes from an "
                    f"empty buffer; first after {format_size(reading.first or 0)}")
        if reading.pipelined:
            used = frame[frame["series"] == series_ids[sid]]
            evidence = (f"one flush spike in sequential {format_size(reading.size)} writes from an empty buffer, "
                        f"after {format_size(reading.first or 0)}, at the same place in "
                        f"{sum(r.pipelined for r in readings)} series, and none in the "
                        f"{format_size(int(used['size'].sum()) - (reading.first or 0))} written after it: the "
                        "buffer flushes while it takes writes (pipelined), so only its first fill from empty waits")
        if reading.interval:
            evidence += f", then every {format_size(reading.interval)} (a spike at {reading.share:.0%} of those points)"
        if reading.partial:
            evidence += f"; partial flushes of {format_size(reading.partial)}"
        if main.second_level:
            evidence += f"; a second level of {format_size(main.second_level)}"
        if ios:
            evidence += f"; flushes every {ios} writes whatever their size"
    if note:
        evidence += f"; {note}"
    return Answer(value=int(reading.capacity), confidence=reading.confidence, evidence=evidence,
                  alternatives=alternatives, extra=extra, raw=raw)


def _buffer_alternatives(series: pd.DataFrame, reading: BufferReading) -> list[dict[str, Any]]:
    """The capacity other class counts give (seed 003 Table 3), and the most common interval when it differs."""
    out: list[dict[str, Any]] = []
    seen = {reading.capacity}
    lat = series["latency_ns"].to_numpy()
    for c in classify_series(lat, log=True)[1:]:
        alt = read_buffer(series["position"].to_numpy(), lat, reading.size, c, keep=_keep(series))
        if alt.capacity not in seen:
            seen.add(alt.capacity)
            out.append({"value": int(alt.capacity), "confidence": round(c.silhouette, 4)})
    if reading.interval and reading.interval not in seen:
        out.append({"value": int(reading.interval), "confidence": round((reading.confidence or 0) * reading.share, 4)})
    return out


def _mark_spikes(frame: pd.DataFrame, chosen: dict[int, Classification | None]) -> pd.DataFrame:
    """The raw latencies with ``spike`` (waited for a flush) and ``level`` (0 buffered, 1 first-level flush,
    2 second-level flush; marked on the first write of each flush)."""
    parts = []
    for sid, s in frame.groupby("series", sort=True):
        s = s.copy()
        mask = spike_mask(s["latency_ns"].to_numpy(), chosen[int(sid)])
        keep = _keep(s)
        if keep is not None:
            mask &= keep
        s["spike"] = mask
        level = mask.astype(np.int8)
        events = spike_events(s["position"].to_numpy(), s["latency_ns"].to_numpy(), mask)
        for i in second_level_flushes(events):
            level[int(events["index"].iloc[i])] = 2
        s["level"] = level
        parts.append(s)
    return pd.concat(parts, ignore_index=True)


def figure_write_buffer(raw: pd.DataFrame, directory: Path, capacity: int = 0) -> Path:
    """Seed 003 Figure 2: write latency against data written, flush spikes marked, the capacity as a line."""
    series = sorted(raw["series"].unique())[:3]
    fig, axes = plots.panels("P8 write buffer: write latency vs data written", 1, len(series),
                             size=(5.5 * len(series), 4.0))
    for ax, sid in zip(axes, series, strict=True):
        s = raw[raw["series"] == sid]
        x = s["position"].to_numpy() / MIB
        y = s["latency_ns"].to_numpy() / 1e3
        spike = s["spike"].to_numpy(dtype=bool)
        second = s["level"].to_numpy() == 2
        ax.scatter(x[~spike], y[~spike], s=3, color="tab:blue", label="buffered")
        ax.scatter(x[spike], y[spike], s=10, color="tab:red", label="waited for a flush")
        if second.any():
            ax.scatter(x[second], y[second], s=40, marker="D", color="tab:purple", label="second-level flush")
        if capacity:
            ax.axvline(capacity / MIB, color="grey", linestyle="--", linewidth=1,
                       label=f"capacity {format_size(capacity)}")
        ax.set_yscale("log")
        ax.set_xlabel("data written (MiB)")
        ax.set_ylabel("write latency (us)")
        ax.set_title(f"{format_size(int(s['size'].iloc[0]))} writes from an empty buffer", fontsize=9)
    return plots.save(fig, directory, "P8_write_buffer",
                      "Latency of sequential writes into an empty write buffer against the data written: the writes "
                      "that waited for a flush (red) come once the buffer is full, so the data written before the "
                      "first of them is its capacity.")


PROBES = [Probe("P8", "write buffer capacity", ERASED, (), probe_write_buffer, unit="bytes")]
