"""P3 chunk size (seed 003 §3.1, F1_pushRead reused): reads of two pages pushed across the pages one page at a
time. Inside a chunk both pages sit on one unit and are read one after the other; where a chunk boundary
falls between them, two units read them in parallel and the read costs *less*. The abnormal points are the
low class, and the chunk size is the most common interval between them.

Each read is set against the same two pages read one at a time (``serial``, two lone one-page reads), so the
figure analysed is ``ratio = two-page read / (first page alone + second page alone)``: close to 1 when one unit
serves both pages, about one half when two do. Low and high pages (tens of microseconds apart) cancel out of
the ratio, which a raw latency would otherwise split into classes of their own.

Every page is read once per pass (reads of two pages at even page offsets, then at odd ones, then the pages
alone); between passes a read buffer, if there is one, is emptied (:class:`Evictor`), so each pass reaches
flash. When no read of two pages costs clearly less than its pages one after the other, every page boundary is
a chunk boundary (or there is one unit): the chunk is one page.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import plots
from ..units import format_size
from ._read_common import (
    Evictor,
    MiB,
    alternatives_from,
    areas,
    interval_candidates,
    read_workload,
    trace,
    unit_interval,
    warm_region,
)
from .base import REFILLED, Answer, Probe, until_stable

SWEEP = 2 * MiB  # eight boundaries of a 256 KiB chunk
ROUND_STRIDE = 16 * MiB
# A read of two pages "costs clearly less" than its pages read one after the other when the two groups of the
# classification are at least this far apart in ratio (serial ~0.9-1, parallel ~0.5-0.7).
MIN_SEPARATION = 0.08
# Chunk boundaries recur at one interval: most intervals between the abnormal points must be that one (low and
# high pages scattered at random give no such regularity).
MIN_SHARE = 0.5


def measure_round(ctx, round_index: int, page: int) -> pd.DataFrame:
    area_start, area_length = areas(ctx)["sweeps"]
    evictor = Evictor(ctx, page)
    slots = max(area_length // ROUND_STRIDE, 1)
    # Regions of their own, after the ones P1 swept (P1 sweeps one per round from the start of the area).
    # The sweep starts one page into a mapping region, whose first page (never swept) warms its translation.
    region = area_start + ((round_index + slots // 2) % slots) * ROUND_STRIDE
    base = region + page
    sweep = SWEEP
    emptied = evictor.settle(ctx) if round_index == 0 else True  # pages other probes read may be buffered
    # Before each pass: translation entries the eviction reads may have pushed out of a DRAM-less drive's
    # cache come back, and no swept page is read.
    warm = region
    pairs: dict[int, int] = {}
    for parity in (0, 1):
        warm_region(ctx, warm, "P3 warm translation")
        start = base + parity * page
        wl = read_workload(start=start, length=sweep, size=2 * page, ops=sweep // (2 * page))
        t = trace(ctx, wl, f"P3 round {round_index} two-page reads at {'odd' if parity else 'even'} pages")
        for offset, latency in zip(t["offset_bytes"].to_numpy(np.int64), t["latency_ns"].to_numpy(np.int64),
                                   strict=True):
            pairs[(int(offset) - base) // page] = int(latency)
        emptied = evictor.settle(ctx) and emptied
    warm_region(ctx, warm, "P3 warm translation")
    wl = read_workload(start=base, length=sweep + page, size=page, ops=sweep // page + 1)
    t = trace(ctx, wl, f"P3 round {round_index} one-page reads")
    alone = {(int(o) - base) // page: int(v)
             for o, v in zip(t["offset_bytes"].to_numpy(np.int64), t["latency_ns"].to_numpy(np.int64),
                                   strict=True)}
    emptied = evictor.settle(ctx) and emptied
    index = sorted(k for k in pairs if k in alone and k + 1 in alone)
    return pd.DataFrame({
        "round": round_index,
        "base": base,
        "page_index": index,
        "position": [k * page for k in index],
        "two_page_ns": [pairs[k] for k in index],
        "first_alone_ns": [alone[k] for k in index],
        "second_alone_ns": [alone[k + 1] for k in index],
        "buffer_emptied": emptied,
    })


def analyse(raw: pd.DataFrame, page: int) -> Answer:
    table = raw.assign(ratio=raw["two_page_ns"] / (raw["first_alone_ns"] + raw["second_alone_ns"]).clip(lower=1))
    # The median over rounds (as P1): a read that met a background operation or a stall on a noisy drive
    # would otherwise move its position's mean into the other class; from three rounds on it is outvoted.
    mean = table.groupby("position")[["two_page_ns", "ratio"]].median().sort_index()
    positions = mean.index.to_numpy(np.int64)
    ratio = mean["ratio"].to_numpy(float)
    table["abnormal"] = False
    caveat = ""
    if "buffer_emptied" in table and not table["buffer_emptied"].all():
        caveat = " (caution: a read buffer larger than this probe can empty served some of these reads)"
    candidates = interval_candidates(positions, ratio, "gap-low", step=page)
    separated = []
    for cand in candidates:
        low, high = ratio[cand.abnormal], ratio[~cand.abnormal]
        if len(high) and float(np.mean(high) - np.mean(low)) >= MIN_SEPARATION and cand.share >= MIN_SHARE:
            separated.append(cand)
    if not separated:
        level = float(np.median(ratio)) if len(ratio) else float("nan")
        # The middle 90 %: a read across a stripe row can meet pages of another type and stand out alone.
        spread = float(np.subtract(*np.percentile(ratio, [95, 5]))) if len(ratio) else 0.0
        kind = "two units read them in parallel" if level < 0.8 else "one unit reads both"
        confidence = float(np.clip(1 - spread / MIN_SEPARATION, 0, 1))
        alternatives = [{"value": c.value, "confidence": round(unit_interval(c.classification.silhouette), 4)}
                        for c in candidates if c.value != page][:3]
        return Answer(page, confidence,
                      f"every read of two pages costs the same against its pages read alone (median ratio "
                      f"{level:.2f}, spread {spread:.2f}: {kind}); no chunk boundary stands out, so a chunk is one "
                      f"page{caveat}", alternatives=alternatives, raw=table)
    best = separated[0]
    table["abnormal"] = table["position"].isin(positions[best.abnormal])
    evidence = (f"{int(best.abnormal.sum())} of {len(positions)} two-page reads cost less than their pages read one "
                f"after the other (ratio {np.mean(ratio[best.abnormal]):.2f} against "
                f"{np.mean(ratio[~best.abnormal]):.2f}; Jenks {best.classification.n_classes} classes, silhouette "
                f"{best.classification.silhouette:.2f}); most common interval between them {format_size(best.value)} "
                f"({best.share:.0%} of the intervals){caveat}")
    return Answer(best.value, unit_interval(best.classification.silhouette), evidence,
                  alternatives=alternatives_from(separated, best.value),
                  extra={"interval_share": round(best.share, 4), "classes": best.classification.n_classes},
                  raw=table)


def figure(answer: Answer, directory: Path, page: int) -> Path:
    table = answer.raw
    mean = table.groupby("position")[["two_page_ns", "ratio"]].median().sort_index()
    x = mean.index.to_numpy() / page
    fig, ax = plots.figure(f"P3 chunk size: reads of two {format_size(page)} pages pushed across pages",
                           "page offset of the read", "latency (us)")
    ax.plot(x, plots.microseconds(mean["two_page_ns"]), marker=".", linewidth=0.8, label="two-page read, alone")
    if table["abnormal"].any():
        marked = np.sort(table.loc[table["abnormal"], "position"].unique())
        ax.scatter(marked / page, plots.microseconds(mean.loc[marked, "two_page_ns"]), color="tab:red", zorder=5, s=30,
                   label=f"abnormal: two units in parallel (chunk {format_size(answer.value)})")
    right = ax.twinx()
    right.plot(x, mean["ratio"], color="tab:grey", linewidth=0.6, alpha=0.7, label="against the pages read alone")
    right.set_ylabel("two-page read / (first page + second page alone)")
    right.set_ylim(0, 1.2)
    return plots.save(fig, directory, "P3_chunk_size",
                      "Latency of a two-page read pushed across pages: it is faster where the two pages sit in "
                      "different chunks (read in parallel), so the spacing of the fast offsets is the chunk size.")


def run(ctx, known, directory: Path) -> Answer:
    page = int(known["P1"].value) if "P1" in known and known["P1"].value else 4096
    answer = until_stable(lambda r: measure_round(ctx, r, page), lambda raw: analyse(raw, page),
                          min_rounds=3, max_rounds=4, tolerance=0.02)
    answer.figures.append(figure(answer, directory, page))
    return answer


PROBES = [Probe("P3", "chunk size", REFILLED, ("P1",), run, unit="bytes")]
