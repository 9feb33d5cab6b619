"""P7 read buffer capacity (seed 003 §3.1 and §4.5, F5_reRead): a large read, then a re-read of its first page.
If the drive keeps recently read data in RAM and the large read fitted, the re-read comes back in a fraction of
a flash read (the paper's A800GP: 60 us instead of 320 us); once the large read is larger than the buffer, the
first page has been pushed out and the re-read costs a flash read again.

Each trial reads, in a region nobody has read for a while, the first page alone (its cold latency), then
``size`` bytes from that page on, then the first page again: ``ratio = re-read / cold``. A ratio under
``HIT_RATIO`` is a hit (a read that reaches flash again costs what the first did). The size doubles from one
page while the re-read hits, then a bisection between the last hit and the first miss narrows the capacity to
``PRECISION`` of it. No hit even for a one-page read: no read buffer (0). The confidence is the silhouette of
the trials' ratios split into hits and misses.

A buffer that still holds a region read a whole probe area earlier (its "cold" read is as fast as a hit) is
larger than this probe can fill on the span it was given: the answer is then a lower bound (``at_least``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import plots
from ..analysis.jenks import classify_best, silhouette_1d
from ..units import format_size
from ._read_common import (
    COLD_READS,
    HIT_RATIO,
    MAP_REGION,
    Evictor,
    MiB,
    abnormal_mask,
    areas,
    read_workload,
    trace,
    unit_interval,
    warm_region,
)
from .base import REFILLED, Answer, Probe, until_stable

PRECISION = 1 / 64  # bisect until the gap between hit and miss is this share of the capacity (or one page)
MIN_DOUBLINGS = 4  # sizes tried even when the first misses (one page .. 8 pages): "none" rests on several
MAX_SIZE = 1 << 30
LOWER_BOUND_CONFIDENCE = 0.5  # an "at least" answer (the buffer outlasted the trials) is no surer than this


class Trials:
    """Trials in fresh regions of the ``bulk`` area, one after the other."""

    def __init__(self, ctx, page: int):
        self.ctx, self.page = ctx, page
        self.start, self.length = areas(ctx)["bulk"]
        self.cursor = 0
        self.served_ns: list[int] = []  # latencies of re-reads served from the buffer (its RAM latency)
        self.cold_ns: list[int] = []  # latencies of first reads that reached flash
        self.reference_ns: list[int] = []  # cold reads of fresh pages taken only as a reference
        # The largest size tried: half the area, so a trial's region was last read long before.
        self.max_size = max(min(MAX_SIZE, self.length // 2 // MiB * MiB), 16 * page)

    def _region(self, size: int, extra: int) -> int:
        # Trials follow each other closely (a small trial reads little), so the area comes round again only
        # after many bytes have been read; a region's first pages (and the ``extra`` reference pages after the
        # large read, read only by a trial whose large read is small) stay in one mapping region.
        need = size + (2 + extra) * self.page
        head = need if extra else 2 * self.page
        if self.cursor + need > self.length:
            self.cursor = 0
        if (self.start + self.cursor) // MAP_REGION != (self.start + self.cursor + head - 1) // MAP_REGION:
            self.cursor = -(-(self.start + self.cursor) // MAP_REGION) * MAP_REGION - self.start
        region = self.start + self.cursor
        self.cursor += need
        return region

    def run(self, size: int, round_index: int) -> dict:
        ctx, page = self.ctx, self.page
        # Until the trials have COLD_READS cold reads between them, a trial also reads fresh pages just after
        # its large read (before it: they are cold then) so its reference is never one cold read alone.
        extra = max(COLD_READS - 1 - len(self.cold_ns) - len(self.reference_ns), 0)
        region = self._region(size, extra)
        first = region + page  # page 0 of the region stays unread: the translation warm-up reads it
        warm_region(ctx, region, "P7 warm translation")
        one = read_workload(start=first, length=page, size=page, ops=1)
        cold = int(trace(ctx, one, f"P7 cold read before {format_size(size)}")["latency_ns"].iloc[0])
        references = [int(trace(ctx, read_workload(start=first + size + k * page, length=page, size=page, ops=1),
                                f"P7 cold reference read {k + 1}")["latency_ns"].iloc[0]) for k in range(extra)]
        # Whole MiBs, then the rest: the large read covers exactly ``size`` bytes, in order.
        whole, rest = divmod(size, MiB)
        if whole:
            ctx.run(read_workload(start=first, length=whole * MiB, size=MiB, ops=whole, queue_depth=4),
                    f"P7 large read {format_size(size)}")
        if rest:
            ctx.run(read_workload(start=first + whole * MiB, length=rest, size=rest, ops=1),
                    f"P7 large read {format_size(size)} (the rest)")
        # Two re-reads, the slower counts: a buffered page is served fast both times; a flash re-read that came
        # back fast by chance (NAND time varies) is not fast twice, and when the first re-read reached flash the
        # second may be a hit, which the first outweighs.
        again = max(int(trace(ctx, one, f"P7 re-read after {format_size(size)}")["latency_ns"].iloc[0])
                    for _ in range(2))
        # The reference: this cold read, or the median of the trials' cold reads when this one met a retry, a
        # stall or a background operation (it is then far above them; the first trial of a noisy drive whose
        # cold read met a 1 ms background operation saw every flash re-read as a hit).
        reference = min(cold, float(np.median(self.cold_ns + self.reference_ns + references + [cold])))
        self.reference_ns.extend(references)
        return {"round": round_index, "size": size, "offset_bytes": first, "cold_ns": cold, "reread_ns": again,
                "ratio": again / max(reference, 1)}


def measure_round(trials: Trials, round_index: int) -> pd.DataFrame:
    page = trials.page
    evictor = Evictor(trials.ctx, page)
    if not evictor.settle(trials.ctx):  # what other probes (or the last round) left in a buffer
        # Reading the whole eviction area did not push a fresh page out: the buffer is larger than that.
        return pd.DataFrame([{"round": round_index, "size": evictor.evicted_bytes, "offset_bytes": -1, "cold_ns": 0,
                              "reread_ns": 0, "ratio": 0.0, "warm": False, "unflushable": True}])
    rows: list[dict] = []

    def trial(size: int) -> dict | None:
        row = trials.run(size, round_index)
        rows.append(row)
        served, colds = trials.served_ns, trials.cold_ns
        cold_level = float(np.median(colds + trials.reference_ns)) if colds else 0.0
        # Only re-reads surely served from RAM (their median a hit against the cold reads' median) make a cold
        # read "warm": one flash re-read taken for a hit would otherwise end every later trial as warm.
        if (served and colds and float(np.median(served)) < HIT_RATIO * cold_level
                and row["cold_ns"] < (float(np.median(served)) + cold_level) / 2):
            # The "cold" read was a hit: the region, read a whole area ago, is still buffered. The buffer is
            # larger than this probe can fill; stop here.
            row["warm"] = True
            return None
        colds.append(row["cold_ns"])
        if row["ratio"] < HIT_RATIO:
            served.append(row["reread_ns"])
        return row

    size = page
    last_hit, first_miss = 0, None
    doublings = 0
    while size <= trials.max_size:
        row = trial(size)
        if row is None:
            return pd.DataFrame(rows)
        doublings += 1
        if row["ratio"] < HIT_RATIO:
            last_hit = size
        elif first_miss is None:
            first_miss = size
        if first_miss is not None and doublings >= MIN_DOUBLINGS:
            break
        size *= 2
    if last_hit and first_miss and first_miss > last_hit:
        lo, hi = last_hit, first_miss
        while hi - lo > max(page, int(lo * PRECISION)):
            mid = (lo + hi) // 2 // page * page
            if mid <= lo:
                break
            row = trial(mid)
            if row is None:
                break
            if row["ratio"] < HIT_RATIO:
                lo = mid
            else:
                hi = mid
    return pd.DataFrame(rows)


def analyse(raw: pd.DataFrame) -> Answer:
    """The capacity from the trials' ``ratio`` (re-read / cold) per size: the largest size still a hit."""
    for column in ("warm", "unflushable"):
        if column not in raw:
            raw = raw.assign(**{column: False})
        raw = raw.assign(**{column: raw[column].fillna(False).astype(bool)})
    if raw["unflushable"].any():
        read = int(raw.loc[raw["unflushable"], "size"].max())
        return Answer(read, 0.5, f"a page read once was still served from RAM after {format_size(read)} of other "
                                 f"data had been read: the read buffer holds at least that (more than this probe "
                                 f"can fill on the span given; probe a larger span to size it)",
                      extra={"at_least": True}, raw=raw.assign(hit=False))
    valid = raw[~raw["warm"]]
    # The median over a size's trials: one trial a stall disturbed is outvoted once a size has three.
    per = valid.groupby("size")["ratio"].median().sort_index()
    hits = per[per < HIT_RATIO]
    ratios = per.to_numpy(float)
    labels = (ratios < HIT_RATIO).astype(int)
    table = raw.assign(hit=raw["ratio"] < HIT_RATIO)
    alternatives = []
    # Other readings (Table 3): each Jenks classification's low side, when it holds the hits and only them.
    for c in classify_best(ratios, 2, 5):
        low = abnormal_mask(c, ratios, "gap-low")
        if low.any() and (~low).any() and np.mean(ratios[low]) < HIT_RATIO <= np.mean(ratios[~low]):
            alternatives.append({"value": int(per.index[low].max()),
                                 "confidence": round(unit_interval(c.silhouette), 4)})
    if hits.empty:
        confidence = float(np.clip((ratios.min() - HIT_RATIO) / (1 - HIT_RATIO), 0, 1)) if len(ratios) else 0.0
        evidence = (f"re-reading the first page after reads of {format_size(per.index.min())}-"
                    f"{format_size(per.index.max())} costs what its first read did (re-read / cold "
                    f"{ratios.min():.2f}-{ratios.max():.2f}): no read buffer")
        return Answer(0, confidence, evidence, alternatives=[a for a in alternatives if a["value"] != 0],
                      raw=table)
    capacity = int(hits.index.max())
    misses = per[(per >= HIT_RATIO) & (per.index > capacity)]
    confidence = unit_interval(silhouette_1d(ratios, labels)) if 0 < labels.sum() < len(labels) else 1.0
    # A buffer rests on its hits: a flash re-read fast twice by chance, or against a cold read that met a
    # background operation, is one trial; each further hit halves the doubt (one hit alone: at most 0.5).
    hit_trials = int((valid["ratio"] < HIT_RATIO).sum())
    confidence *= 1.0 - 0.5 ** hit_trials
    extra = {"first_miss_bytes": int(misses.index.min()) if len(misses) else None, "hit_trials": hit_trials}
    if misses.empty:
        # A lower bound, as when the buffer could not be emptied: no more sure than that (harsh noise on
        # kelpie-a800g-p: a cold read of a fast page type taken for "still buffered" ended the trials at 4 MiB
        # of 16, answered at 1.0).
        confidence = min(confidence, LOWER_BOUND_CONFIDENCE)
        extra["at_least"] = True
        why = ("a region read a whole probe area earlier was still buffered" if raw["warm"].any() else
               "the largest size tried")
        evidence = (f"the first page is still served from the buffer after reading {format_size(capacity)} "
                    f"({why}; re-read / cold {hits.iloc[-1]:.2f}): the buffer holds at least that")
    else:
        evidence = (f"the first page is re-read from the buffer (re-read / cold {hits.mean():.2f}) after reads of up "
                    f"to {format_size(capacity)}, and from flash ({misses.iloc[0]:.2f}) after "
                    f"{format_size(int(misses.index.min()))}")
    return Answer(capacity, confidence, evidence,
                  alternatives=[a for a in alternatives if a["value"] != capacity][:3], extra=extra, raw=table)


def figure(answer: Answer, directory: Path) -> Path:
    table = answer.raw[answer.raw["offset_bytes"] >= 0].sort_values("size")  # trials only
    per = table.groupby("size")[["cold_ns", "reread_ns", "hit"]].agg({"cold_ns": "mean", "reread_ns": "mean",
                                                                      "hit": "mean"})
    x = per.index.to_numpy()
    fig, ax = plots.figure("P7 read buffer: re-reading the first page of a large read", "size of the large read",
                           "latency of the first page (us)")
    plots.line(ax, x, plots.microseconds(per["cold_ns"]), label="first read (cold)", marker=".")
    plots.line(ax, x, plots.microseconds(per["reread_ns"]), label="re-read after the large read", marker="o")
    hit = per["hit"].to_numpy() > 0.5
    if hit.any():
        ax.scatter(x[hit], plots.microseconds(per["reread_ns"])[hit], color="tab:red", zorder=5, s=30,
                   label=f"abnormal: served from the buffer (up to {format_size(answer.value)})")
    plots.size_axis(ax, "x")
    return plots.save(fig, directory, "P7_read_buffer",
                      "Latency of re-reading the first page of a large read, against that read's size: the re-read "
                      "is served from the read buffer while the large read fits in it.")


def run(ctx, known, directory: Path) -> Answer:
    page = int(known["P1"].value) if "P1" in known and known["P1"].value else 4096
    trials = Trials(ctx, page)
    answer = until_stable(lambda r: measure_round(trials, r), analyse,
                          min_rounds=2, max_rounds=3, tolerance=0.05)
    answer.figures.append(figure(answer, directory))
    return answer


PROBES = [Probe("P7", "read buffer capacity", REFILLED, ("P1",), run, unit="bytes")]
