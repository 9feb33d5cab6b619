"""What the read-side probes (P1 page size, P3 chunk size, P6 read consistency, P7 read buffer) share: where on
the refilled device they read, how a sweep is issued as one engine run, and the interval rule of seed 003 §3.2
applied to every Jenks classification so the answer comes with its alternatives (the paper's Table 3)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.jenks import Classification, classify_best, most_common_intervals
from ..experiments.context import Context
from ..workload import Workload

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

# The span the runner refills by default (runner.DEFAULT_SPAN); a probe reads inside it.
DEFAULT_FILLED = 4 * GiB
# Mapping-table regions of a DRAM-less drive hold 1024 entries (4 MiB of 4 KiB pages): the first read in a
# region pays a translation read. Probes read one sector of a region before measuring in it.
MAP_REGION = 4 * MiB
# A re-read of a page that comes back in under this share of its first read was served from RAM (a read
# buffer: the paper's A800GP re-reads in 60 us what takes 320 us from flash, a ratio of 0.19); a read that
# reached flash again costs what the first did. Not closer to 1: on a noisy drive two flash reads of one page
# differ by tens of percent (15 % NAND time variation each, host jitter), so a ratio of 0.8 happens by chance.
HIT_RATIO = 0.6
# A cold read is taken as the reference of a re-read only together with this many more cold reads of fresh
# pages (their median): one cold read that met a retry, a stall or a background operation would otherwise make
# every flash re-read look like a hit.
COLD_READS = 3


def unit_interval(x: float | None) -> float | None:
    """A confidence kept to [0, 1] (a silhouette computed in floating point can come out a hair above 1)."""
    return None if x is None else float(min(max(x, 0.0), 1.0))


def filled_span(ctx: Context) -> int:
    """Bytes from LBA 0 that hold data written by the refill (the runner's span). A simulated device remembers
    it; elsewhere the runner's default span is assumed (capped to the target)."""
    if ctx.probe_span:
        return int(ctx.probe_span)
    if ctx.filled_bytes > 0:
        return ctx.filled_bytes
    return ctx.span(DEFAULT_FILLED)


def read_area(ctx: Context) -> tuple[int, int]:
    """``(start, length)`` of the area read probes use: the first half of the refilled span. The refill wrote
    the span from the start, so the end of it may still sit in a write buffer (a drive whose buffer never
    drains while idle keeps the last hundreds of MiB in RAM) and read as fast as a cache hit; the first half
    has long reached flash."""
    span = filled_span(ctx)
    return 0, max(span // 2 // MiB * MiB, 4 * MiB)


def areas(ctx: Context) -> dict[str, tuple[int, int]]:
    """The read area split so that no probe reads what another left in a read buffer: ``sweeps`` (P1, P3:
    small regions, one per round), ``evict`` (fresh data read to empty a read buffer) and ``bulk`` (P6's
    one-MiB slots, P7's large reads)."""
    start, length = read_area(ctx)
    quarter = max(length // 4 // MiB * MiB, MiB)
    return {
        "sweeps": (start, quarter),
        "evict": (start + quarter, quarter),
        "bulk": (start + 2 * quarter, length - 2 * quarter),
    }


def read_workload(*, start: int, length: int, size: int | list[int], ops: int, batch: int = 1,
                  pattern: dict[str, Any] | None = None, queue_depth: int | None = None, seed: int = 1) -> Workload:
    """Reads of ``size`` over ``[start, start + length)``: by default sequential, ``batch`` requests issued
    together and waited for (batch 1 = one read at a time, as the paper's blocking pread)."""
    sizes = [int(s) for s in size] if isinstance(size, list) else [int(size)]
    return Workload(
        mix={"read": 100},
        sizes=sizes,
        pattern=pattern or {"kind": "sequential"},
        range={"start": int(start), "length": int(length)},
        queue_depth=int(queue_depth or batch),
        batch={"size": int(batch), "idle_ns": 0} if queue_depth is None else None,
        stop={"ops": int(ops)},
        seed=seed,
    )


def descending(length: int, step: int) -> dict[str, Any]:
    """A walk over ``[start, start + length)`` in ``step``-byte steps from high to low offsets (the first read at
    ``start``, then the top one and downwards: a strided walk with stride ``length - step``). No read then starts
    where the one before it ended, so a forward-stream detector (a drive's read-ahead, or page-register hits for
    a read continuing a sequential stream) serves none of them: a sweep measures each read's own cost."""
    return {"kind": "strided", "stride": int(length - step)}


def trace(ctx: Context, workload: Workload, label: str) -> pd.DataFrame:
    """Run ``workload`` and return its per-request trace (offset, size, submit_ns, latency_ns)."""
    result = ctx.run(workload, label, trace=True)
    frame = result.trace
    frame = frame[frame["op"] == "read"] if "op" in frame else frame
    return frame.reset_index(drop=True)


def warm_region(ctx: Context, offset: int, label: str) -> None:
    """One sector read at ``offset``: loads the translation entries of its region on a drive that caches them,
    so the first measured read there does not pay a translation read."""
    ctx.run(read_workload(start=offset, length=ctx.logical_block, size=ctx.logical_block, ops=1), label)


@dataclass(frozen=True)
class IntervalCandidate:
    """One reading of a series: a classification, the abnormal positions it gives and the most common
    interval between neighbouring ones."""

    value: int
    share: float
    classification: Classification
    abnormal: np.ndarray


def interval_candidates(positions: np.ndarray, values: np.ndarray, side: str, *, max_classes: int = 5,
                        step: int = 1) -> list[IntervalCandidate]:
    """Seed 003 §3.2 for every class count 2..``max_classes``: classify ``values`` with Jenks, take the
    abnormal points (``side``: see :func:`abnormal_mask`), and read the most common interval between
    neighbouring abnormal ``positions``. Best silhouette first; intervals that are not a multiple of ``step``
    are dropped."""
    out: list[IntervalCandidate] = []
    for c in classify_best(values, 2, max_classes):
        mask = abnormal_mask(c, values, side)
        if mask.sum() < 2:
            continue
        ranked = most_common_intervals(positions[mask], top=1)
        if not ranked:
            continue
        value, share = ranked[0]
        value = int(round(value))
        if value <= 0 or value % step:
            continue
        out.append(IntervalCandidate(value, float(share), c, mask))
    return out


def abnormal_mask(c: Classification, values: np.ndarray, side: str) -> np.ndarray:
    """The abnormal points of a classification. ``lowest`` / ``highest``: the one extreme class; ``gap``: the
    classes on the smaller side of the widest gap between neighbouring class means (with two classes this
    is the paper's "smaller class"; with more it keeps levels that differ for other reasons, such as
    low and high pages, together on their side); ``gap-low`` / ``gap-high``: the side below / above that gap;
    anything else is a rule of :meth:`Classification.abnormal`."""
    if side == "lowest":
        return c.labels == 0
    if side == "highest":
        return c.labels == c.n_classes - 1
    if side.startswith("gap"):
        counts = c.counts()
        means = {k: float(np.mean(values[c.labels == k])) for k in range(c.n_classes) if counts[k] > 0}
        # A class of one point (a translation read, a hiccup) is no level of its own: the widest gap is looked
        # for between the others, and a lone point goes with the side it is nearer to.
        solid = [k for k in means if counts[k] > 1]
        if len(solid) < 2:
            solid = list(means)
        levels = np.array([means[k] for k in solid])
        cut = int(np.argmax(np.diff(levels))) if len(levels) > 1 else 0
        threshold = (levels[cut] + levels[cut + 1]) / 2 if len(levels) > 1 else np.inf
        below = np.isin(c.labels, [k for k, m in means.items() if m <= threshold])
        if side == "gap-low":
            return below
        if side == "gap-high":
            return ~below
        return below if below.sum() <= (~below).sum() else ~below
    return c.abnormal(side)


def alternatives_from(candidates: list[IntervalCandidate], chosen: int) -> list[dict[str, Any]]:
    """The other answers the classifications gave, each with its best confidence (Table 3 of the paper)."""
    best: dict[int, float] = {}
    for cand in candidates:
        if cand.value != chosen:
            best[cand.value] = max(best.get(cand.value, 0.0), cand.classification.silhouette)
    return [{"value": v, "confidence": round(unit_interval(conf), 4)}
            for v, conf in sorted(best.items(), key=lambda kv: -kv[1])]


class Evictor:
    """Makes sure a probe's next reads reach flash, not a read buffer (P7) that still holds pages read before.

    ``settle(ctx)`` reads a page it has never read (its cold latency), then re-reads it: a re-read that comes
    back in well under the cold time was served from a buffer, so fresh data is read from the ``evict`` area
    (doubling) until the page is gone. Pages read before it are gone too (a buffer drops its oldest pages
    first). On a drive without a read buffer this costs three small reads. A buffer larger than the fresh part
    of the ``evict`` area cannot be emptied this way (``settle`` returns False). Where the evictors of one
    context are in the area is shared, so no evictor reads a page another has read."""

    def __init__(self, ctx: Context, page: int, limit: int = GiB):
        self.start, self.length = areas(ctx)["evict"]
        self.page, self.limit = page, limit
        self.evicted_bytes = 0
        self.state = _EVICTION.setdefault(ctx, {"cursor": 0, "checks": 0})
        # The back half of the area (at least one region) holds check pages, one mapping region each; the
        # front holds the fresh data.
        self.check_regions = max(self.length // 2 // MAP_REGION, 1)
        self.room = max(self.length - self.check_regions * MAP_REGION, MiB)

    def _read_fresh(self, ctx: Context, amount: int) -> None:
        amount = min(amount, self.room)
        if self.state["cursor"] + amount > self.room:
            self.state["cursor"] = 0
        request = min(MiB, amount)
        ctx.run(read_workload(start=self.start + self.state["cursor"], length=amount, size=request,
                              ops=max(amount // request, 1), queue_depth=8), "evict read buffer")
        self.state["cursor"] += amount
        self.evicted_bytes += amount

    def _check_page(self) -> int:
        index = self.state["checks"]
        self.state["checks"] += 1
        region = self.start + self.length - (index % self.check_regions + 1) * MAP_REGION
        # Each time round the regions, the next 128 KiB of each (a page never read before).
        return max(region, self.start) + (index // self.check_regions) * 128 * KiB % (MAP_REGION // 2)

    def settle(self, ctx: Context) -> bool:
        """True once a re-read of a fresh page reaches flash again (False: still buffered after reading the
        whole fresh part of the area, or ``limit``). The page's cold latency is the median of its first read
        and the first reads of ``COLD_READS - 1`` fresh neighbours; a re-read counts as served from a buffer
        only when two re-reads in a row are (a buffered page stays buffered; a flash read that came back fast
        by chance is not repeated)."""
        check = self._check_page()
        # A sector 64 KiB on first (another page, the same translation region): on a drive that caches
        # translation entries the cold read must not pay a translation read the re-read does not.
        warm_region(ctx, check + 64 * KiB, "read-buffer check (translation)")
        wl = read_workload(start=check, length=self.page, size=self.page, ops=1)
        colds = [int(trace(ctx, wl, "read-buffer check (cold)")["latency_ns"].iloc[0])]
        # Neighbours from high to low (see :func:`descending`): none starts where the read before it ended.
        for k in range(COLD_READS - 1, 0, -1):
            other = read_workload(start=check + k * self.page, length=self.page, size=self.page, ops=1)
            colds.append(int(trace(ctx, other, "read-buffer check (cold, reference)")["latency_ns"].iloc[0]))
        cold = float(np.median(colds))
        amount = 4 * MiB
        spent = 0
        while True:
            again = max(int(trace(ctx, wl, "read-buffer check (re-read)")["latency_ns"].iloc[0])
                        for _ in range(2))
            if again >= HIT_RATIO * cold:
                return True
            # Once the whole fresh part has been read, more reads of it would only be served from the buffer.
            if spent >= min(self.limit, self.room):
                return False
            self._read_fresh(ctx, amount)
            spent += amount
            amount *= 2


# Evictor positions per context (weakly held: they go with the context).
_EVICTION: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
