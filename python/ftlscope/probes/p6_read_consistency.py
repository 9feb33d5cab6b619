"""P6 read performance consistency (seed 003 §3.1 and §4.1, F4_incRead): random reads of increasing size in
sector steps, one at a time; does any size cost more than it should?

The sizes, every sector step up to ``FINE_UNTIL``, then every ``COARSE_STEP`` a page multiple and the smallest
size reading as many pages, up to ``MAX_SIZE`` (the paper's largest read), are drawn in a random order within
one engine run. All reads of a run start at the same offset (a "slot", a MiB boundary of the refilled area),
so every size reads the same pages and the run gives a latency curve free of which pages happen to be low or
high ones; each round adds ``SLOTS_PER_ROUND`` slots (runs), and a size is judged by the slots that read it. On
a drive with a read buffer (seen when the probe starts) a slot read again would be served from the buffer, so
there every read goes to a fresh MiB instead, and the sizes are judged on their mean latency over many reads
(against a running median of the larger sizes, which are noisy too).

On a consistent drive a read costs what its pages cost plus the transfer of its bytes: the transfer grows with
the size at a steady rate, which is measured (a fit through the sizes that read as many pages, taken on the
shallow side of its noise) and taken out. What is left never falls as the size grows. So:

- sizes that are not a multiple of the page cost more than the page multiple that reads the same pages (the
  paper's N1TI, 200-400 us more): tested over all page groups at once;
- a size costs more than the cheapest size reading as many pages (N2TI: +50 us for 17-20 KiB), or than some
  larger size (N1.6TW: +300 us for 20-260 KiB, then cheaper again).

"More" means beyond the noise: ``NOISE_SE`` standard errors, and at least ``MIN_EXCESS`` of the latency
(``MIN_EXCESS_FRESH`` on means over fresh MiBs) and ``MIN_EXCESS_NS``; a size flagged alone, with neither
neighbour flagged, is taken for noise. The drive is consistent when nothing is flagged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis.jenks import silhouette_1d
from ..units import format_size
from ._read_common import MAP_REGION, Evictor, MiB, areas, read_workload, trace, unit_interval, warm_region
from .base import REFILLED, Answer, Probe

MAX_SIZE = MiB  # the paper's largest read (Figure 1)
FINE_UNTIL = 256 << 10
COARSE_STEP = 16 << 10  # above FINE_UNTIL: large reads dominate the device time, so fewer of them
SLOT = MiB
SLOTS_PER_ROUND = 4  # runs per round, each reading every size at one slot
READS_PER_SIZE = 2  # per slot (sizes are drawn at random: some sizes miss a slot)
FRESH_SLOTS = 256  # on a drive with a read buffer: MiBs read in turn, at least this many
FRESH_READS_PER_SIZE = 6  # per round, on a drive with a read buffer
# Rounds: at least MIN_ROUNDS; a verdict that settles stops them, except a "consistent" the noise could not have
# told from a penalty (PENALTY_EFFECT_NS), which goes on to MAX_ROUNDS.
MIN_ROUNDS, MAX_ROUNDS = 2, 12
# The smallest penalty looked for: the least the paper reports (N2TI, +50 us for 17-20 KiB reads) ...
PENALTY_EFFECT_NS = 50_000
# ... at the sizes up to this, where it sits (the noise allowance of larger reads, of more pages, is larger).
PENALTY_SIZES = 64 << 10
NOISE_SE = 6.0
MIN_EXCESS = 0.03  # per slot, where every size reads the same pages
MIN_EXCESS_FRESH = 0.06  # on mean latencies over fresh MiBs (noisier)
FRESH_SMOOTH = 5  # sizes in the running median the fresh-MiB curve is compared against
FRESH_SLOPE_SE = 2.0  # standard errors the fresh-MiB curve's transfer slope is taken below its fit
MIN_EXCESS_NS = 8_000
SMALL_GROUPS = 16  # page groups whose latency an unaligned penalty is weighed against
SD_WINDOW = 33  # sizes whose spreads are pooled (a few reads per size give a poor spread of their own)
# Reads further above their size's median than this many robust spreads are outliers (a retried read costs a
# second page read, a stall or a background operation a millisecond or more; the spread of a noisy drive's
# reads is about a tenth of a read).
OUTLIER_SPREADS = 4.0
MIN_RUN = 5  # neighbouring flagged sizes that make a penalised range (2 KiB in sector steps)


def sizes_for(sector: int, page: int) -> list[int]:
    """Every sector step up to ``FINE_UNTIL``; above, every ``COARSE_STEP`` (at least a page) a page multiple
    and the smallest size reading as many pages (one sector past the page multiple before it)."""
    fine = list(range(sector, FINE_UNTIL + 1, sector))
    step = max(page, COARSE_STEP // page * page)
    coarse = [s for k in range(FINE_UNTIL // step + 1, MAX_SIZE // step + 1)
              for s in (k * step - page + sector, k * step)]
    return sorted(set(fine + [s for s in coarse if FINE_UNTIL < s <= MAX_SIZE]))


class Measurement:
    """The rounds of one probe run, each slot (or, on a drive with a read buffer, each fresh MiB) new."""

    def __init__(self, ctx, page: int):
        self.ctx, self.page = ctx, page
        self.sector = ctx.logical_block
        self.start, self.length = areas(ctx)["bulk"]
        evictor = Evictor(ctx, page)
        emptied = evictor.settle(ctx)  # a read buffer may hold pages other probes read
        self.buffered = evictor.evicted_bytes > 0 or not emptied
        self.caution = "" if emptied else "a read buffer larger than this probe can empty"
        # The eviction read this much before the buffer let a page go: it holds no more than that.
        self.buffer_bound = evictor.evicted_bytes
        self.total_slots = max(self.length // SLOT, 1)
        self.next_slot = 0

    def _take(self, count: int) -> int:
        if self.next_slot + count > self.total_slots:
            self.next_slot = 0
        first = self.next_slot
        self.next_slot += count
        return self.start + first * SLOT

    def round(self, round_index: int) -> pd.DataFrame:
        sizes = sizes_for(self.sector, self.page)
        label = f"P6 round {round_index}: sizes {format_size(self.sector)}-{format_size(MAX_SIZE)}"
        frames = []
        if not self.buffered:
            for k in range(SLOTS_PER_ROUND):
                slot = self._take(1)
                warm_region(self.ctx, slot + SLOT - self.sector, "P6 warm translation")
                # Stride = length: every read of the run starts at the slot.
                wl = read_workload(start=slot, length=SLOT, size=sizes, ops=READS_PER_SIZE * len(sizes),
                                   pattern={"kind": "strided", "stride": SLOT}, seed=1 + round_index * 97 + k)
                frames.append(self._frame(trace(self.ctx, wl, f"{label}, slot {format_size(slot)}"), round_index))
        else:
            # Enough MiBs that the reads between two visits of one (sizes/2 on average each) overflow the buffer
            # twice over.
            mean_size = float(np.mean(sizes))
            count = min(self.total_slots, max(FRESH_SLOTS, int(np.ceil(2 * self.buffer_bound / mean_size)) + 1))
            if count * mean_size < self.buffer_bound and not self.caution:
                self.caution = (f"a read buffer of up to {format_size(self.buffer_bound)} may have served MiBs read "
                                f"again after {format_size(count * mean_size)}: probe a larger span")
            start = self._take(count)
            length = count * SLOT
            # Translation entries first: one sector per mapping region, the region's last one, which only
            # the largest reads reach (a read buffer keeps what this reads).
            regions = max(length // MAP_REGION, 1)
            first = start + min(MAP_REGION, length) - self.sector
            self.ctx.run(read_workload(start=first, length=(regions - 1) * MAP_REGION + self.sector,
                                       size=self.sector, ops=regions,
                                       pattern={"kind": "strided", "stride": MAP_REGION}), "P6 warm translation")
            # Whole turns over the MiBs, so the next round, which starts again at the first, comes to it only
            # after a whole turn too.
            ops = -(-FRESH_READS_PER_SIZE * len(sizes) // count) * count
            wl = read_workload(start=start, length=length, size=sizes, ops=ops,
                               pattern={"kind": "strided", "stride": SLOT}, seed=1 + round_index)
            frames.append(self._frame(trace(self.ctx, wl, f"{label}, a fresh MiB each"), round_index))
        return pd.concat(frames, ignore_index=True)

    def _frame(self, t: pd.DataFrame, round_index: int) -> pd.DataFrame:
        offsets = t["offset_bytes"].to_numpy(np.int64)
        return pd.DataFrame({"round": round_index, "offset_bytes": offsets,
                             "slot": -1 if self.buffered else offsets // SLOT,
                             "size": t["size"].to_numpy(np.int64), "latency_ns": t["latency_ns"].to_numpy(np.int64)})


def curve(reads: pd.DataFrame, page: int) -> pd.DataFrame:
    """Per size: mean latency, a standard error from the spreads of the neighbouring sizes (a few reads per
    size give a poor spread of their own), and the pages a read of that size touches."""
    g = reads.groupby("size")["latency_ns"]
    table = pd.DataFrame({"mean_ns": g.mean(), "std_ns": g.std(ddof=1), "reads": g.size()}).sort_index()
    # Pooled as a mean of variances: reads of one size can all meet high pages (no spread) while its
    # neighbours meet both kinds, so a median of spreads would understate the noise.
    variance = (table["std_ns"] ** 2).rolling(SD_WINDOW, center=True, min_periods=1).mean()
    variance = variance.fillna(float(np.nanmean(table["std_ns"] ** 2)) if table["std_ns"].notna().any() else 0.0)
    table["se_ns"] = np.sqrt(variance.fillna(0.0).clip(lower=0)) / np.sqrt(table["reads"])
    table["pages"] = -(-table.index.to_numpy() // page)
    table.attrs["page"] = page
    return table


def slot_curve(reads: pd.DataFrame, page: int) -> pd.DataFrame:
    """Per size, over slots that each read every size at the same pages: latency = the size's own cost + the
    slot's cost for that many pages (which of them are low or high pages) + noise, fitted by alternating
    means and medians, so a size read at fewer slots, or more often at a slow one, is not moved by which slots
    it met, and sizes are compared as on the same pages. Its standard error is the larger of the noise within
    slots (the reads' spread, pooled over neighbouring sizes, over the reads at each slot) and the spread of
    what the fit leaves of the slot means."""
    cell = reads.groupby(["slot", "size"])["latency_ns"].agg(["mean", "var", "count"]).reset_index()
    cell["pages"] = -(-cell["size"] // page)
    own = cell.groupby("size")["mean"].mean()
    slot_pages = pd.Series(0.0, index=cell.index)
    for _ in range(4):
        slot_pages = (cell["mean"] - cell["size"].map(own)).groupby([cell["slot"], cell["pages"]]).transform("median")
        # The fit leaves one constant per page count free (a size's own cost up, its slots' cost down alike):
        # pin it with every page count's slot costs averaging zero over its slots. Left to the medians, a page
        # count of 32 sizes took its slot costs at the median of right-skewed reads (harsh noise: reads that met
        # background work wait up to 2 ms) and one of two sizes at their mean, so the sizes of the first rose by
        # the skew over those of the second: kelpie-t64g-s's 16-page reads 600 us dearer than its 17-page ones.
        per_slot = slot_pages.groupby([cell["slot"], cell["pages"]]).first()
        centre = per_slot.groupby(level="pages").mean()
        slot_pages = slot_pages - cell["pages"].map(centre)
        own = (cell["mean"] - slot_pages).groupby(cell["size"]).mean()
    left = cell["mean"] - slot_pages - cell["size"].map(own)
    cell["inverse_reads"] = 1.0 / cell["count"]
    cell["weighted_var"] = cell["var"].fillna(0.0) * (cell["count"] - 1)
    by_size = cell.groupby("size")
    table = pd.DataFrame({"mean_ns": own, "slots": by_size.size(), "reads": by_size["count"].sum()}).sort_index()
    degrees = (by_size["count"].sum() - by_size.size()).reindex(table.index)
    within = (by_size["weighted_var"].sum().reindex(table.index) / degrees.where(degrees > 0))
    within = within.rolling(SD_WINDOW, center=True, min_periods=1).mean()
    within = within.fillna(float(np.nanmean(within)) if within.notna().any() else 0.0)
    slots = table["slots"].to_numpy(float)
    se_within = np.sqrt(within * by_size["inverse_reads"].sum().reindex(table.index)) / slots
    between = np.sqrt((left ** 2).groupby(cell["size"]).mean().reindex(table.index))
    between = between.rolling(SD_WINDOW, center=True, min_periods=1).mean().fillna(0.0)
    table["std_ns"] = np.sqrt(within)
    table["se_ns"] = np.maximum(se_within, between / np.sqrt(slots))
    table["pages"] = -(-table.index.to_numpy() // page)
    table.attrs["page"] = page
    return table


def fresh_slope(table: pd.DataFrame) -> float:
    """ns per byte the latency grows with the size among sizes that read as many pages (the host transfer), for
    the fresh-MiB curve: one least-squares slope through every page group at once (each group's sizes and
    latencies taken about their own means), less ``FRESH_SLOPE_SE`` of its standard errors. A larger read is
    judged against a smaller one with this slope taken out over their distance (up to a MiB): harsh noise on
    kelpie-a800g-p (host transfer 0.85 us/KiB) gave the median step between neighbouring sizes 3.4 us/KiB (that
    median's standard error was near 5 us/KiB), every larger read looked cheap and 512 B-888 KiB "penalised";
    the pooled fit read 1.35 +- 0.53 there. Too shallow only hides the smallest penalties."""
    sizes = table.index.to_numpy(float)
    value = table["mean_ns"].to_numpy(float)
    pages = pd.Series(table["pages"].to_numpy())
    ds = sizes - pd.Series(sizes).groupby(pages).transform("mean").to_numpy()
    dv = value - pd.Series(value).groupby(pages).transform("mean").to_numpy()
    sxx = float(np.sum(ds * ds))
    if sxx <= 0:
        return 0.0
    slope = float(np.sum(ds * dv)) / sxx
    freedom = len(sizes) - pages.nunique() - 1
    se = float(np.sqrt(np.sum((dv - slope * ds) ** 2) / freedom / sxx)) if freedom > 0 else float("inf")
    return max(slope - FRESH_SLOPE_SE * se, 0.0)


def transfer_slope(table: pd.DataFrame) -> float:
    """ns per byte the latency grows with the size among sizes that read as many pages (the host transfer): the
    median over page groups of each group's least-squares slope through its sizes that are not a page
    multiple (an unaligned penalty, paid by all of those or none, does not tilt it), less three of its
    standard errors on a noisy curve. A larger read is judged against a smaller one with this slope taken
    out over their distance (up to a MiB), so a slope set too steep by the noise would make larger reads look
    cheap and flag every smaller size; set too shallow it only hides the smallest penalties."""
    sizes = table.index.to_numpy(float)
    value = table["mean_ns"].to_numpy(float)
    pages = table["pages"].to_numpy()
    page = table.attrs.get("page", 0)
    slopes = []
    for _, members in pd.Series(np.arange(len(sizes))).groupby(pages):
        index = members.to_numpy()
        if page:
            index = index[sizes[index] % page != 0]
        if len(index) >= 2 and np.ptp(sizes[index]) > 0:
            slopes.append(np.polyfit(sizes[index], value[index], 1)[0])
    if not slopes:
        return 0.0
    s = np.asarray(slopes)
    median = float(np.median(s))
    # Standard error of a median: 1.2533 x the robust spread / sqrt(n).
    se = 1.2533 * 1.4826 * float(np.median(np.abs(s - median))) / np.sqrt(len(s))
    return max(median - 3 * se, 0.0)


def unaligned_penalty(table: pd.DataFrame, page: int) -> tuple[float, float, float]:
    """How much more, on average over the page groups, sizes that are not a page multiple cost than the page
    multiple reading the same pages (transfer taken out): in ns, as a share of the latency of small reads
    (the first ``SMALL_GROUPS`` groups, where a fixed penalty shows most), and in standard errors."""
    level = table["level_ns"]
    diffs, tops = [], []
    for pages, group in level.groupby(table["pages"].to_numpy()):
        top = int(pages) * page
        others = group[group.index % page != 0]
        if top in group.index and len(others):
            diffs.append(float(others.mean() - group.loc[top]))
            tops.append(float(table.loc[top, "mean_ns"]))
    if len(diffs) < 3:
        return 0.0, 0.0, 0.0
    d = np.asarray(diffs)
    spread = float(np.std(d, ddof=1)) / np.sqrt(len(d))
    floor = float(np.median(table["se_ns"])) / np.sqrt(len(d))  # identical groups have no spread at all
    small = float(np.median(tops[:SMALL_GROUPS]))
    return float(np.mean(d)), float(np.mean(d)) / max(small, 1.0), float(np.mean(d)) / max(spread, floor, 1.0)


def flag_sizes(table: pd.DataFrame, page: int, min_excess: float = MIN_EXCESS, smooth: int = 1,
               slope_of=None) -> pd.DataFrame:
    """One latency curve judged: ``excess_ns``, how much more a size costs (transfer taken out) than the
    cheapest size of its page group or than the cheapest larger size, whichever is more; ``limit_ns``, the
    noise allowance; ``flagged`` (over the limit, with a flagged neighbour); ``unaligned``. With ``smooth``
    > 1 the sizes compared against are a running median of that many (a noisy curve's single low point
    would otherwise set the bar for every smaller size). ``slope_of`` estimates the transfer slope
    (``transfer_slope`` unless given)."""
    sizes = table.index.to_numpy(float)
    mean = table["mean_ns"].to_numpy(float)
    se = table["se_ns"].to_numpy(float)
    slope = (slope_of or transfer_slope)(table)
    level = mean - slope * sizes
    out = table.copy()
    out["level_ns"] = level
    penalty, share, strength = unaligned_penalty(out, page)
    unaligned = penalty > MIN_EXCESS_NS and share > min_excess and strength > NOISE_SE
    # With an unaligned penalty only page multiples are compared (the others all carry it).
    considered = (sizes % page == 0) if unaligned else np.ones(len(sizes), bool)
    n = len(level)
    reference = level
    if smooth > 1:
        kept = pd.Series(np.where(considered, level, np.nan))
        reference = kept.rolling(smooth, center=True, min_periods=1).median().fillna(np.inf).to_numpy()
    suffix_min = np.full(n, np.inf)
    best = np.inf
    for i in range(n - 1, -1, -1):
        suffix_min[i] = best
        if considered[i]:
            best = min(best, reference[i])
    grouped = pd.Series(np.where(considered, reference, np.inf), index=table.index)
    group_min = grouped.groupby(table["pages"].to_numpy()).transform("min").to_numpy()
    excess_larger = np.where(np.isfinite(suffix_min), level - suffix_min, 0.0)
    excess_group = np.where(np.isfinite(group_min), level - group_min, 0.0)
    excess = np.where(considered, np.maximum(np.maximum(excess_group, excess_larger), 0.0), 0.0)
    limit = np.maximum.reduce([NOISE_SE * se, min_excess * mean, np.full(n, float(MIN_EXCESS_NS))])
    over = excess > limit
    # A penalty covers a range of sizes: a size flagged with neither neighbour flagged is noise.
    left = np.concatenate([[False], over[:-1]])
    right = np.concatenate([over[1:], [False]])
    out["excess_ns"] = excess
    out["limit_ns"] = limit
    out["flagged"] = long_runs(pd.Series(over & (left | right), index=table.index))
    out["unaligned"] = (sizes % page != 0) & unaligned
    out.attrs.update(transfer_ns_per_kib=slope * 1024, unaligned_penalty_ns=penalty if unaligned else 0.0,
                     unaligned_strength=strength)
    return out


def long_runs(flagged: pd.Series) -> pd.Series:
    """Flagged sizes that are part of a run of at least ``MIN_RUN`` neighbouring flagged sizes; shorter runs
    are noise (the paper's penalised ranges span kilobytes: 17-20 KiB is seven sizes in sector steps)."""
    values = flagged.to_numpy(bool)
    run_id = np.cumsum(np.r_[True, values[1:] != values[:-1]])
    length = pd.Series(run_id).map(pd.Series(run_id).value_counts()).to_numpy()
    return pd.Series(values & (length >= MIN_RUN), index=flagged.index)


def drop_outliers(raw: pd.DataFrame) -> pd.DataFrame:
    """Reads that met a firmware stall or a background operation, left out: a read that costs more than twice
    the median of its own size and more than ``OUTLIER_SPREADS`` robust spreads above it (twice: low and high
    pages differ by less, a stall or background operation of milliseconds by more). The spread is 1.4826 x the median
    absolute deviation of that size's reads (low and high pages make it wide where a read meets either), at
    least the median of it over all sizes. A penalty for a size is paid by every read of it, so it moves that
    size's median and no read of it is left out."""
    size = raw["size"]
    median = raw.groupby(size)["latency_ns"].transform("median")
    deviation = (raw["latency_ns"] - median).abs()
    own = 1.4826 * deviation.groupby(size).transform("median")
    spread = np.maximum(own, max(float(own.median()), 1.0))
    outlier = (raw["latency_ns"] > 2 * median) & (raw["latency_ns"] > median + OUTLIER_SPREADS * spread)
    return raw[~outlier]


def judge(raw: pd.DataFrame, page: int) -> pd.DataFrame:
    """Every size's verdict, on one curve: where slots were read at every size, the slot-balanced curve (every
    slot reads the same pages at every size, so the shifted slot means compare sizes on equal pages; a vote of
    per-slot verdicts, each on two or three reads a size, cannot see a 50 us penalty under 15 % noise);
    otherwise (fresh MiBs) one curve of means, compared with a running median of the larger sizes."""
    raw = drop_outliers(raw)
    if (raw["slot"] >= 0).any():
        table = slot_curve(raw[raw["slot"] >= 0], page)
        return flag_sizes(table, page, smooth=FRESH_SMOOTH)
    out = flag_sizes(curve(raw, page), page, MIN_EXCESS_FRESH, smooth=FRESH_SMOOTH, slope_of=fresh_slope)
    out["slots"] = 1
    return out


def power(table: pd.DataFrame) -> float:
    """How surely a penalty of ``PENALTY_EFFECT_NS`` on a run of sizes up to ``PENALTY_SIZES`` would have been
    flagged: 1 when it is at least the noise part of the allowance (``NOISE_SE`` standard errors, the median over
    those sizes), less as the noise grows. "Nothing flagged" means "consistent" only as far as this goes."""
    se = table.loc[table.index <= PENALTY_SIZES, "se_ns"].to_numpy(float)
    allowance = NOISE_SE * float(np.median(se)) if len(se) else 0.0
    return float(np.clip(PENALTY_EFFECT_NS / allowance, 0.0, 1.0)) if allowance > 0 else 1.0


def ranges(sizes: np.ndarray, gap: int) -> list[list[int]]:
    """Sizes no more than ``gap`` apart merged into ``[min, max]`` ranges."""
    out: list[list[int]] = []
    for s in np.sort(sizes):
        if out and s - out[-1][1] <= gap:
            out[-1][1] = int(s)
        else:
            out.append([int(s), int(s)])
    return out


def analyse(raw: pd.DataFrame, page: int, sector: int) -> Answer:
    table = judge(raw, page)
    sizes = table.index.to_numpy(np.int64)
    flagged = table["flagged"].to_numpy(bool)
    penalty = float(table.attrs["unaligned_penalty_ns"])
    extra: dict[str, Any] = {"transfer_us_per_kib": round(float(table.attrs["transfer_ns_per_kib"]) / 1e3, 4)}
    where = (f"at {int(table['slots'].median())} offsets" if int(table["slots"].max()) > 1 else
             "every read at a fresh MiB")
    described = (f"{len(sizes)} read sizes {format_size(sizes.min())}-{format_size(sizes.max())}, "
                 f"{int(table['reads'].median())} reads of each, {where}")
    if not flagged.any() and penalty == 0:
        ratio = table["excess_ns"] / table["limit_ns"]
        worst = float(ratio.max()) if len(ratio) else 0.0
        # A penalty is a run of sizes over the allowance; noise lifts single sizes. So the confidence falls as
        # the strongest run of MIN_RUN neighbouring sizes (its least excess) nears the allowance: full up to
        # half of it, none at it.
        run = float(ratio.rolling(MIN_RUN).min().max()) if len(ratio) >= MIN_RUN else 0.0
        run = 0.0 if np.isnan(run) else run
        # As sure as a penalty of PENALTY_EFFECT_NS would have stood out from this noise (harsh noise on
        # kelpie-n2t-i: its +50 us sizes against an allowance of ~60 us read "consistent" at 0.92).
        seen = power(table)
        confidence = float(np.clip((1 - run) / 0.5, 0, 1)) * seen
        extra["power"] = round(seen, 4)
        evidence = (f"{described}: no size costs more than a larger one or than the cheapest size reading as many "
                    f"pages, and sizes that are not a page multiple cost what the multiple does "
                    f"(largest excess {worst:.2f} of the noise allowance, {run:.2f} over {MIN_RUN} neighbouring "
                    f"sizes)" + (f"; a {PENALTY_EFFECT_NS / 1e3:.0f} us penalty would have stood out with "
                                 f"confidence {seen:.2f} at this noise" if seen < 1 else ""))
        value = {"consistent": True, "penalised_sizes": []}
        alternatives = [{"value": {"consistent": False, "penalised_sizes": []}, "confidence": round(1 - confidence, 4)}]
        return Answer(value, confidence, evidence, alternatives=alternatives, extra=extra, raw=_raw(raw, table))
    # Neighbouring flagged sizes make one range (up to a coarse step apart where only two sizes a step are read).
    listed = sizes[flagged]
    penalised = []
    if len(listed):
        fine = ranges(listed[listed <= FINE_UNTIL], sector)
        step = max(page, COARSE_STEP // page * page)
        coarse = ranges(listed[listed > FINE_UNTIL], step)
        if fine and coarse and coarse[0][0] - fine[-1][1] <= step:
            fine[-1][1] = coarse.pop(0)[1]
        penalised = fine + coarse
    parts = []
    abnormal = flagged | table["unaligned"].to_numpy(bool)
    if penalty:
        extra["unaligned_penalty_us"] = round(penalty / 1e3, 1)
        parts.append(f"sizes that are not a multiple of {format_size(page)} cost {penalty / 1e3:.0f} us more than the "
                     f"multiple reading the same pages")
    if penalised:
        parts.append("sizes " + ", ".join(f"{format_size(a)}-{format_size(b)}" for a, b in penalised) +
                     " cost more than larger reads or than reads of as many pages")
    # Confidence: how cleanly the excesses split into abnormal and not (silhouette of that two-class split).
    excess = np.where(table["unaligned"], penalty, table["excess_ns"])
    confidence = unit_interval(silhouette_1d(excess, abnormal.astype(int))) if 0 < abnormal.sum() < len(abnormal) \
        else 1.0
    value = {"consistent": False, "penalised_sizes": penalised}
    alternatives = [{"value": {"consistent": True, "penalised_sizes": []}, "confidence": round(1 - confidence, 4)}]
    return Answer(value, confidence, f"{described}: " + "; ".join(parts), alternatives=alternatives, extra=extra,
                  raw=_raw(raw, table))


def _raw(raw: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Every read, with its size's figures and verdict alongside."""
    columns = ["level_ns", "excess_ns", "limit_ns", "flagged", "unaligned"]
    return raw.merge(table[columns], left_on="size", right_index=True).sort_values(["round", "size"])


def figure(answer: Answer, directory: Path, page: int) -> Path:
    """Mean latency against read size (the paper's Figure 1), abnormal sizes in red."""
    per = answer.raw.groupby("size").agg(mean_ns=("latency_ns", "mean"), flagged=("flagged", "first"),
                                         unaligned=("unaligned", "first"))
    x = per.index.to_numpy() / 1024
    y = plots.microseconds(per["mean_ns"])
    fig, ax = plots.figure("P6 read performance consistency: random reads of increasing size",
                           "read size (KiB)", "mean latency (us)")
    ax.plot(x, y, marker=".", markersize=2, linewidth=0.5, label="mean latency")
    multiples = per.index.to_numpy() % page == 0
    ax.scatter(x[multiples], y[multiples], s=6, color="tab:green", label=f"multiples of the page ({format_size(page)})",
               zorder=4)
    bad = (per["flagged"] | per["unaligned"]).to_numpy(bool)
    if bad.any():
        ax.scatter(x[bad], y[bad], s=8, color="tab:red", zorder=5, label="abnormal: costs more than it should")
    return plots.save(fig, directory, "P6_read_consistency",
                      "Mean latency of random reads of increasing size: a consistent drive's latency grows smoothly "
                      "with the size; a size that costs more than its neighbours is penalised.")


def run(ctx, known, directory: Path) -> Answer:
    page = int(known["P1"].value) if "P1" in known and known["P1"].value else 4096
    sector = ctx.logical_block
    measurement = Measurement(ctx, page)
    # Early stopping on the verdict and its confidence (the listed ranges may still move by a size from round
    # to round, which base.until_stable would count as a change).
    frames: list[pd.DataFrame] = []
    previous: Answer | None = None
    answer: Answer | None = None
    for round_index in range(MAX_ROUNDS):
        frames.append(measurement.round(round_index))
        answer = analyse(pd.concat(frames, ignore_index=True), page, sector)
        answer.rounds = round_index + 1
        if previous is not None and round_index + 1 >= MIN_ROUNDS and \
                previous.value["consistent"] == answer.value["consistent"] and \
                abs((previous.confidence or 0) - (answer.confidence or 0)) <= 0.05 and \
                (not answer.value["consistent"] or answer.extra.get("power", 1.0) >= 1.0):
            break
        previous = answer
    assert answer is not None
    if measurement.buffered:
        answer.extra["read_buffer_seen"] = True
    if measurement.caution:
        # The verdict may rest on reads the buffer served: say so, and trust it less.
        answer.extra["caution"] = measurement.caution
        answer.evidence += f" (caution: {measurement.caution})"
        answer.confidence = None if answer.confidence is None else answer.confidence / 2
    answer.figures.append(figure(answer, directory, page))
    return answer


PROBES = [Probe("P6", "read performance consistency", REFILLED, ("P1",), run)]
