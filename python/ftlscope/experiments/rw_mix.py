"""``rw-mix`` (seed 001 §4) and ``deep-queue`` (seed 004): read/write mixes, reported per direction.

``rw-mix``: 4 KiB random I/O at QD 32 with R100/W0, R70/W30, R50/W50, R0/W100. Every row carries the read
and the write side apart (``read_iops``, ``read_lat_mean_us`` ..., ``write_iops`` ...; a direction the mix
does not have is empty), their sums (``iops``, ``mb_s``), the combined mean latency (``lat_mean_us``,
weighted by operations, the seed's "mean latency" column) and the measured read share of operations.

``deep-queue``: seed 004's grid — 4/32/128/512 KiB x QD 64/512/1024 x only read, only write, 5:5, 7:3 —
on a 1 GiB range (the seed's 1 GB partition), per direction as in its tables.

Findings of ``rw-mix``, per mix (``r70w30_iops`` ...): total IOPS and MB/s, combined and per-direction mean
latency, and for the mixed ones ``read_slowdown``: mean read latency in the mix over mean read latency with
reads alone — how much the writes (their flushes, garbage collection) delay the reads sharing the flash
(seed 001 §4.5, "cache flush conflicts ... block subsequent reads"). Not a comparison of the mixes' totals
with the pure-read and pure-write rates: the mixes run one after another, and the writes of the earlier ones
change the drive (its SLC cache fills, garbage collection starts) under the later ones, so the R0/W100 rate
measured last does not describe the drive the R70/W30 mix ran on.

Findings of ``deep-queue``: ``littles_law_error_pct`` (largest |QD / combined mean latency - IOPS| / IOPS
over the grid: seed 004 says L = λW "keeps consistent on our data"), ``qd_throughput_gain_pct`` and
``qd_latency_growth`` (median over sizes and mixes of the change from the shallowest to the deepest QD: seed
004's "throughput slightly increases ... latency severely increases") and ``read_to_write_latency_ratio``
(median over the mixed points: seed 004's Figure 3, reads slower than writes).

Both write, so both are destructive and fill their range sequentially first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis import littles_law
from ..errors import UsageError
from ..units import format_size
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
DIRECTIONS = ("read", "write")


def mix_label(read_share: int) -> str:
    return f"R{read_share}/W{100 - read_share}"


def _key(read_share: int) -> str:
    return f"r{read_share}w{100 - read_share}"


def _check(p: dict[str, Any]) -> None:
    shares = p["read_shares"]
    if not shares or any(not 0 <= s <= 100 for s in shares):
        raise UsageError(f"--param read_shares: give read percentages from 0 to 100 (got {shares})")
    if len(set(shares)) != len(shares):
        raise UsageError(f"--param read_shares: a mix is listed twice ({shares})")
    if p["pattern"] not in ("random", "sequential"):
        raise UsageError(f"--param pattern: give random or sequential (got {p['pattern']})")
    for name in ("qd", "qds"):
        if name in p and min(p[name] if isinstance(p[name], list) else [p[name]]) < 1:
            raise UsageError(f"--param {name}: queue depths must be 1 or more (got {p[name]})")
    if "sizes" in p and any(size <= 0 for size in p["sizes"]):
        raise UsageError(f"--param sizes: access sizes must be more than 0 B (got {p['sizes']})")


def _point(ctx: Context, p: dict[str, Any], span: int, *, read_share: int, size: int, qd: int) -> dict[str, Any]:
    mix = {op: share for op, share in (("read", read_share), ("write", 100 - read_share)) if share}
    wl = workload(mix, size=size, pattern=p["pattern"], qd=qd, span=span, runtime_ns=p["runtime"],
                  warmup_ns=p["warmup"], seed=1 + ctx.repetition)
    result = ctx.run(wl, f"{mix_label(read_share)} {format_size(size)} {p['pattern']} QD {qd}")
    row: dict[str, Any] = {"mix": mix_label(read_share), "read_share": read_share, "size": size, "qd": qd}
    for op in DIRECTIONS:
        row.update(op_metrics(result, op, f"{op}_"))
    ops = {op: row.get(f"{op}_ops", 0) for op in DIRECTIONS}
    total = sum(ops.values())
    row["iops"] = sum(row.get(f"{op}_iops", 0.0) for op in DIRECTIONS)
    row["mb_s"] = sum(row.get(f"{op}_mb_s", 0.0) for op in DIRECTIONS)
    row["lat_mean_us"] = (sum(ops[op] * row[f"{op}_lat_mean_us"] for op in DIRECTIONS if ops[op]) / total
                          if total else float("nan"))
    row["read_share_measured"] = 100.0 * ops["read"] / total if total else float("nan")
    return row


# ---- rw-mix ----------------------------------------------------------------------------------------------


def measure_mix(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    for share in p["read_shares"]:
        yield _point(ctx, p, span, read_share=share, size=p["size"], qd=p["qd"])


def analyse_mix(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    by_share = table.set_index("read_share")
    for share, row in by_share.iterrows():
        key, evidence = _key(share), f"results.csv row {row['mix']}"
        findings[f"{key}_iops"] = finding(row["iops"], "IOPS", f"{evidence}: read_iops + write_iops")
        findings[f"{key}_mb_s"] = finding(row["mb_s"], "MB/s", f"{evidence}: read_mb_s + write_mb_s")
        findings[f"{key}_lat_mean_us"] = finding(row["lat_mean_us"], "us",
                                                 f"{evidence}: mean latency of all operations")
        for op in DIRECTIONS:
            value = row.get(f"{op}_lat_mean_us")
            if value is not None and np.isfinite(value):
                findings[f"{key}_{op}_lat_mean_us"] = finding(value, "us", f"{evidence}: {op}_lat_mean_us")
    if 100 in by_share.index:
        alone = by_share.loc[100, "read_lat_mean_us"]
        for share, row in by_share.iterrows():
            if share in (0, 100):
                continue
            findings[f"{_key(share)}_read_slowdown"] = finding(
                row["read_lat_mean_us"] / alone, "ratio",
                f"{row['mix']}: mean read latency {row['read_lat_mean_us']:,.1f} us / {alone:,.1f} us with reads "
                f"alone (R100/W0): how much the writes of the mix delay the reads (rw_mix_latency.png)")
    return findings


def figures_mix(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    t = table.reset_index(drop=True)
    x = np.arange(len(t))
    labels = t["mix"].tolist()
    title = f"{format_size(p['size'])} {p['pattern']} at QD {p['qd']}"
    out = []
    fig, ax = plots.figure(f"Throughput per direction, {title}", "read/write mix", "MB/s")
    bottom = np.zeros(len(t))
    for op, color in zip(DIRECTIONS, ("tab:blue", "tab:red"), strict=True):
        values = t.get(f"{op}_mb_s", pd.Series(np.nan, index=t.index)).fillna(0).to_numpy()
        err = t.get(f"{op}_mb_s_std", pd.Series(0.0, index=t.index)).fillna(0).to_numpy()
        ax.bar(x, values, bottom=bottom, yerr=err, capsize=3, color=color, alpha=0.8, label=op)
        bottom += values
    ax.set_xticks(x, labels)
    out.append(plots.save(fig, directory, "rw_mix_throughput", "Read and write MB/s stacked for each read/write mix."))

    fig, ax = plots.figure(f"Latency per direction (bars: mean, marks: p99), {title}", "read/write mix",
                           "latency (us)")
    width = 0.38
    for i, (op, color) in enumerate(zip(DIRECTIONS, ("tab:blue", "tab:red"), strict=True)):
        if f"{op}_lat_mean_us" not in t:
            continue
        offset = (i - 0.5) * width
        ax.bar(x + offset, t[f"{op}_lat_mean_us"], width, yerr=t.get(f"{op}_lat_mean_us_std"), capsize=3,
               color=color, alpha=0.8, label=f"{op} mean")
        ax.plot(x + offset, t[f"{op}_lat_p99_us"], "v", color="black" if op == "read" else "tab:brown",
                label=f"{op} p99")
    ax.plot(x, t["lat_mean_us"], "D-", color="tab:gray", label="all operations, mean")
    ax.set_xticks(x, labels)
    out.append(plots.save(fig, directory, "rw_mix_latency",
                          "Read and write latency for each read/write mix (bars mean, marks p99), with the mean "
                          "over all operations as a line."))
    return out


# ---- deep-queue ------------------------------------------------------------------------------------------


def measure_deep(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"], align=max(MiB, *p["sizes"]))
    for size in p["sizes"]:
        for qd in p["qds"]:
            for share in p["read_shares"]:
                yield _point(ctx, p, span, read_share=share, size=size, qd=qd)


def analyse_deep(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    t = table.dropna(subset=["iops", "lat_mean_us"])
    errors = littles_law.error_pct(t["qd"], t["lat_mean_us"] / 1e6, t["iops"])
    if len(t):
        worst = t.iloc[int(np.nanargmax(np.abs(errors)))]
        findings["littles_law_error_pct"] = finding(
            float(np.nanmax(np.abs(errors))), "%",
            f"largest |QD / mean latency of all operations - IOPS| / IOPS over {len(t)} points, at "
            f"{worst['mix']} {format_size(worst['size'])} QD {worst['qd']}; mean |error| "
            f"{np.nanmean(np.abs(errors)):.2f} %")

    shallow, deep = t["qd"].min(), t["qd"].max()
    if deep > shallow:
        gains, growths = [], []
        for _, group in t.groupby(["size", "read_share"]):
            g = group.set_index("qd")
            if shallow in g.index and deep in g.index:
                gains.append((g.loc[deep, "iops"] / g.loc[shallow, "iops"] - 1) * 100)
                growths.append(g.loc[deep, "lat_mean_us"] / g.loc[shallow, "lat_mean_us"])
        if gains:
            findings["qd_throughput_gain_pct"] = finding(
                float(np.median(gains)), "%",
                f"median over {len(gains)} (size, mix) pairs of the IOPS change from QD {shallow} to QD {deep} "
                f"(range {min(gains):+.1f} % to {max(gains):+.1f} %; deep_queue_qd.png)")
            findings["qd_latency_growth"] = finding(
                float(np.median(growths)), "ratio",
                f"median over {len(growths)} (size, mix) pairs of mean latency at QD {deep} / at QD {shallow} "
                f"(range {min(growths):.1f} to {max(growths):.1f}; the QD ratio is {deep / shallow:g})")
    mixed = t[(t["read_share"] > 0) & (t["read_share"] < 100)]
    if len(mixed):
        ratio = mixed["read_lat_mean_us"] / mixed["write_lat_mean_us"]
        findings["read_to_write_latency_ratio"] = finding(
            float(np.nanmedian(ratio)), "ratio",
            f"median over {len(mixed)} mixed points of read_lat_mean_us / write_lat_mean_us (range "
            f"{np.nanmin(ratio):.2f} to {np.nanmax(ratio):.2f}; deep_queue_mix.png)")
    return findings


def _nearest(values, wanted):
    values = sorted(set(values))
    return min(values, key=lambda v: (abs(v - wanted), v))


def _per_direction(ax_lat, ax_tp, t: pd.DataFrame, x: str, *, throughput: str) -> None:
    for op, color in zip(DIRECTIONS, ("tab:blue", "tab:red"), strict=True):
        if f"{op}_lat_mean_us" not in t or t[f"{op}_lat_mean_us"].isna().all():
            continue
        plots.line(ax_lat, t[x], t[f"{op}_lat_mean_us"] / 1e3, t.get(f"{op}_lat_mean_us_std", 0) / 1e3,
                   label=op, color=color)
        scale = 1e3 if throughput == "iops" else 1
        plots.line(ax_tp, t[x], t[f"{op}_{throughput}"] / scale, t.get(f"{op}_{throughput}_std", 0) / scale,
                   label=op, color=color)
    ax_lat.set_ylabel("mean latency (ms)")
    ax_tp.set_ylabel("KIOPS" if throughput == "iops" else "MB/s")


def figures_deep(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    """Seed 004's six figures, in three PNGs of two panels: against access size (5:5, deepest QD), against
    the read ratio (32 KiB, QD 512) and against QD (5:5, 4 KiB); the nearest measured slice when the grid
    was changed."""
    out = []
    share = _nearest(table["read_share"], 50)
    deep_qd = table["qd"].max()
    t = table[(table["read_share"] == share) & (table["qd"] == deep_qd)].sort_values("size")
    fig, axes = plots.panels(f"Against access size ({mix_label(share)}, QD {deep_qd})", 1, 2, size=(10.5, 4.2))
    _per_direction(axes[0], axes[1], t, "size", throughput="mb_s")
    for ax in axes:
        plots.size_axis(ax)
        ax.set_xlabel("access size")
    out.append(plots.save(fig, directory, "deep_queue_size",
                          "Read and write mean latency and throughput against access size at a deep queue."))

    size = _nearest(table["size"], 32 * KiB)
    qd = _nearest(table["qd"], 512)
    t = table[(table["size"] == size) & (table["qd"] == qd)].sort_values("read_share")
    fig, axes = plots.panels(f"Against read ratio ({format_size(size)}, QD {qd})", 1, 2, size=(10.5, 4.2))
    _per_direction(axes[0], axes[1], t, "read_share", throughput="iops")
    for ax in axes:
        ax.set_xlabel("read share (%)")
    out.append(plots.save(fig, directory, "deep_queue_mix",
                          "Read and write mean latency and throughput against the read share at a deep queue."))

    size = _nearest(table["size"], 4 * KiB)
    t = table[(table["size"] == size) & (table["read_share"] == share)].sort_values("qd")
    fig, axes = plots.panels(f"Against queue depth ({mix_label(share)}, {format_size(size)})", 1, 2,
                             size=(10.5, 4.2))
    _per_direction(axes[0], axes[1], t, "qd", throughput="iops")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("queue depth")
    out.append(plots.save(fig, directory, "deep_queue_qd",
                          "Read and write mean latency and throughput against queue depth."))
    return out


EXPERIMENTS = [
    Experiment(
        name="rw-mix",
        summary="4 KiB random at QD 32 with R100/W0, R70/W30, R50/W50, R0/W100, per direction; how much "
                "writes delay reads",
        source="“SSD Performance Profiling” §4",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", 0, "range to use; 0 = the whole target", "0 (whole target)"),
            Param("runtime", "duration", 30 * 10**9, "measured time per mix", "30s"),
            Param("warmup", "duration", 5 * 10**9, "left out at the start of each mix", "5s"),
            Param("read_shares", "ints", [100, 70, 50, 0], "read percentages of the mixes", "100,70,50,0"),
            Param("size", "size", 4096, "request size", "4KiB"),
            Param("qd", "int", 32, "queue depth", "32"),
            Param("pattern", "str", "random", "offsets: random or sequential", "random"),
        ),
        keys=("mix", "read_share", "size", "qd"),
        check=_check,
        measure=measure_mix,
        analyse=analyse_mix,
        figures=figures_mix,
    ),
    Experiment(
        name="deep-queue",
        summary="4/32/128/512 KiB x QD 64/512/1024 x read only, write only, 5:5, 7:3, per direction",
        source="“SSD Performance Report”",
        writes=True,
        preconditioning="sequential-fill",
        params=(
            Param("span", "size", GiB,
                  "range to use (“SSD Performance Report”: a 1 GB partition); 0 = the whole target", "1GiB"),
            Param("runtime", "duration", 5 * 10**9, "measured time per point", "5s"),
            Param("warmup", "duration", 10**9, "left out at the start of each point", "1s"),
            Param("sizes", "sizes", [4 * KiB, 32 * KiB, 128 * KiB, 512 * KiB], "access sizes",
                  "4KiB,32KiB,128KiB,512KiB"),
            Param("qds", "ints", [64, 512, 1024], "queue depths", "64,512,1024"),
            Param("read_shares", "ints", [100, 0, 50, 70], "read percentages (only read, only write, 5:5, 7:3)",
                  "100,0,50,70"),
            Param("pattern", "str", "random", "offsets: random or sequential", "random"),
        ),
        keys=("size", "qd", "mix", "read_share"),
        check=_check,
        measure=measure_deep,
        analyse=analyse_deep,
        figures=figures_deep,
    ),
]
