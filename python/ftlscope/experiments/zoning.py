"""``zoning`` (after the zoning measurements of "Solid State Disks vs Magnetic Disks: Making the right
choice"): what a hard disk's datasheet gives, measured, read-only.

- Sequential rate across the platters: 1 MiB sequential reads at QD 1 at ``positions`` evenly spaced points
  from the first byte to the last region of the range. A disk's outer tracks hold more sectors than its inner
  ones, so the rate falls from the outer (LBA 0) to the inner (last LBA) zone; a flash drive reads flat.
- Access time: 4 KiB random reads over the whole range at QD 1 (mean = average seek + rotational latency +
  transfer, the figure a datasheet splits into "average seek" and "average latency") and at QD 32 (how much
  the disk gains from reordering a queue).

Findings: ``outer_mb_s``, ``inner_mb_s``, ``inner_to_outer_ratio``, ``random_read_lat_mean_us``,
``random_read_iops_qd1``, ``random_read_iops_qd32``. In the quick and standard suites of rotating disks only; in
the system suite on every drive, so an SSD's flat rate stands beside a disk's zones.

A flash drive answers reads of never-written pages without touching flash, so on a simulated flash drive (a
``sim:`` target, or one ``ftlscope sim attach`` serves: its model starts empty at attach) the range is written
once, sequentially, before it is read, as the thesis's drives held data. A hard disk's reads cost the same on
written and unwritten blocks, and a real drive is read as it is: neither is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .. import plots
from ..errors import SafetyError, UsageError
from ..units import format_size
from ._attached import attached_flash_drive, writing
from ._common import op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

MiB = 1 << 20


def _check(p: dict[str, Any]) -> None:
    if p["positions"] < 2:
        raise UsageError(f"--param positions: give at least 2 (the outer and the inner zone; got {p['positions']})")


def starts(span: int, region: int, positions: int) -> list[int]:
    """Region starts from 0 to ``span - region``, evenly spaced and MiB-aligned."""
    last = max(span - region, 0) // MiB * MiB
    return sorted({round(last * i / (positions - 1)) // MiB * MiB for i in range(positions)})


def write_what_is_read(ctx: Context, span: int) -> None:
    """Write the first ``span`` bytes once on a simulated flash drive, so its reads reach flash (see the module's
    docstring). On an attached drive with the user's data on it the write needs --destructive DEVICE --force;
    without them the reads go ahead on what is there, said in a note."""
    if ctx.kind == "simulated":
        if not ctx.device.hard_disk:
            ctx.ensure_readable(span)
        return
    if ctx.kind != "block_device" or ctx.repetition > 0:
        return
    drive = attached_flash_drive(ctx.target)
    if drive is None:
        return
    try:
        with writing(ctx):
            ctx.precondition("sequential-fill", span)
    except SafetyError as exc:  # the user's data on it, and no --destructive DEVICE --force
        ctx.notes.append(f"zoning: {ctx.target} ({drive}, attached) was not written first ({exc.message}), so its "
                         "reads of blocks not written since attach touch no flash and measure the path alone")
        return
    ctx.notes.append(f"zoning: {ctx.target} ({drive}, attached) had its first {format_size(span)} written "
                     "sequentially before the reads: its model starts empty at attach")


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    write_what_is_read(ctx, span)
    region = min(p["region"], span)
    for start in starts(span, region, p["positions"]):
        wl = workload("read", size=MiB, pattern="sequential", qd=1, span=region, start=start,
                      runtime_ns=p["runtime"], warmup_ns=p["warmup"])
        result = ctx.run(wl, f"1 MiB sequential read at {format_size(start)}")
        yield {"mode": "sequential", "position_bytes": start, "position_pct": 100 * start / span, "qd": 1,
               **op_metrics(result, "read")}
    for qd in (1, 32):
        wl = workload("read", size=4096, pattern="random", qd=qd, span=span, runtime_ns=p["random_runtime"],
                      warmup_ns=p["warmup"], seed=1 + ctx.repetition)
        result = ctx.run(wl, f"4 KiB random read QD {qd} over {format_size(span)}")
        yield {"mode": "random", "position_bytes": 0, "position_pct": 0.0, "qd": qd, **op_metrics(result, "read")}


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    seq = table[table["mode"] == "sequential"].sort_values("position_bytes")
    if len(seq) >= 2:
        outer, inner = seq.iloc[0], seq.iloc[-1]
        findings["outer_mb_s"] = finding(outer["mb_s"], "MB/s", "results.csv: sequential read at the first byte")
        findings["inner_mb_s"] = finding(inner["mb_s"], "MB/s", f"results.csv: sequential read at "
                                                                f"{inner['position_pct']:.0f} % of the range")
        findings["inner_to_outer_ratio"] = finding(inner["mb_s"] / outer["mb_s"], "ratio", "inner_mb_s / outer_mb_s")
    rnd = table[table["mode"] == "random"].set_index("qd")
    if 1 in rnd.index:
        findings["random_read_lat_mean_us"] = finding(
            rnd.loc[1, "lat_mean_us"], "us", "results.csv: mean latency of 4 KiB random reads at QD 1 over the whole "
                                             "range (average seek + rotational latency + transfer)")
        findings["random_read_iops_qd1"] = finding(rnd.loc[1, "iops"], "IOPS", "results.csv: random, QD 1")
    if 32 in rnd.index:
        findings["random_read_iops_qd32"] = finding(rnd.loc[32, "iops"], "IOPS", "results.csv: random, QD 32")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    seq = table[table["mode"] == "sequential"].sort_values("position_bytes")
    fig, ax = plots.figure("Sequential read rate from the outer (start) to the inner (end) zone",
                           "position (% of the range)", "MB/s")
    plots.line(ax, seq["position_pct"], seq["mb_s"], seq.get("mb_s_std"), label="1 MiB sequential read, QD 1")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return [plots.save(fig, directory, "zoning",
                       "Sequential read rate from the outer (start) to the inner (end) zone of the disk.")]


EXPERIMENTS = [
    Experiment(
        name="zoning",
        summary="sequential read rate from the outer to the inner zone, and random-read access time at QD 1 and "
                "32 over the whole range (read-only; a simulated flash drive is written first)",
        source="“Solid State Disks vs Magnetic Disks”, its zoning measurements",
        writes=False,
        preconditioning="none",
        params=(
            Param("span", "size", 0, "range to read; 0 = the whole target", "0 (whole target)"),
            Param("positions", "int", 5, "points from the first to the last region", "5"),
            Param("region", "size", 256 * MiB, "bytes each point's sequential read may cover", "256MiB"),
            Param("runtime", "duration", 2 * 10**9, "measured time per point", "2s"),
            Param("random_runtime", "duration", 5 * 10**9, "measured time of each random read", "5s"),
            Param("warmup", "duration", 2 * 10**8, "left out at the start of each run", "200ms"),
        ),
        keys=("mode", "position_bytes", "qd"),
        check=_check,
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
