#!/usr/bin/env python3
"""How closely do the simulated presets reproduce the real drives they are shaped after?

Re-measures every number the source documents publish for those drives (ftlscope.fidelity.published: the
document, its table or section, the conditions and the cell) on the preset, prints published against
simulated with the relative error, the median and worst absolute error per drive, and the qualitative shape
checks (saturation queue depth, the U-shaped mix curve, read/write order in mixes, reads after a random fill,
the write cliff position) as pass/fail with the numbers. Everything runs on the simulator's virtual clock.

    python bench/fidelity.py [--drive NV2] [--quick] [--points-only | --shapes-only] [--csv points.csv]
                             [--device PM981=my-pm981.toml] [--noise-seed N]

The whole bench takes about two minutes of wall time on a quiet machine (each "SSD Performance Report" cell
fills a drive of its own; the NV2 alone ~120 s, ~40 s of it the whole random fill of a 1/64 copy of the preset);
--quick shortens the measuring runs and fills a 1/256 copy (the other fills and the write-cliff runs stay as
they are). --device measures a drive on a device file instead of its
preset, to calibrate a preset without rebuilding the simulator. --noise-seed sets every measured device's
``device.seed`` (the seed its ``[noise]`` draws derive from; default: the preset's own), to see how much a
point moves with the noise draw alone.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from ftlscope.errors import FtlscopeError
from ftlscope.fidelity import measure, published

console = Console(width=240)


def _params(point: published.Point) -> str:
    skip = {"span"} if point.kind in ("steady", "alignment") else set()
    text = " ".join(f"{k}={v}" for k, v in point.params.items() if k not in skip)
    return text + (f" span={point.params['span']}" if skip else "")


def _num(value: float) -> str:
    if math.isnan(value):
        return "none"
    return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.0f}"


def _worst(worst: float) -> str:
    return "no value" if math.isinf(worst) else f"{worst:.0f}"


def points_table(fid: measure.Fidelity, points: list[published.Point], csv: str | None) -> dict[str, list[float]]:
    table = Table(title="Published numbers, re-measured on the presets", show_lines=False)
    for column in ("drive (preset)", "source", "parameters", "metric", "published", "simulated", "error %"):
        table.add_column(column, justify="right" if column in ("published", "simulated", "error %") else "left")
    errors: dict[str, list[float]] = {}
    full_queue: dict[str, list[float]] = {}
    rows = []
    for point in points:
        simulated = fid.measure(point)
        error = measure.error_pct(point.value, simulated)
        errors.setdefault(point.drive, []).append(error)
        if not point.queue_not_full:
            full_queue.setdefault(point.drive, []).append(error)
        rows.append({"drive": point.drive, "preset": point.preset, "source": point.source, "where": point.where,
                     "kind": point.kind, "parameters": _params(point), "metric": point.metric,
                     "published": point.value, "simulated": simulated, "unit": point.unit, "error_pct": error,
                     "quote": point.quote, "note": point.note})
        table.add_row(f"{point.drive} ({point.preset})", f"{point.source}, {point.where}", _params(point),
                      point.metric, f"{_num(point.value)} {point.unit}", f"{_num(simulated)} {point.unit}",
                      "n/a" if math.isnan(error) else f"{error:+.0f}")
    console.print(table)
    if csv:
        pd.DataFrame(rows).to_csv(csv, index=False)
    summary = Table(title="Error per drive (absolute relative error; goal: median <= 15 %, worst <= 50 %)")
    for column in ("drive", "preset", "points", "median error %", "worst error %",
                   "without queue-not-full points: points, median / worst %"):
        summary.add_column(column)
    for drive, errs in errors.items():
        median, worst = measure.summarise(errs)
        kept = full_queue.get(drive, [])
        kept_median, kept_worst = measure.summarise(kept) if kept else (math.nan, math.nan)
        summary.add_row(drive, published.DRIVES[drive].preset, str(len(errs)), f"{median:.0f}", _worst(worst),
                        f"{len(kept)}: {kept_median:.0f} / {_worst(kept_worst)}")
    console.print(summary)
    if any(p.queue_not_full for p in points):
        console.print("queue-not-full points: the document's own throughput x mean latency holds fewer requests "
                      "in flight than the queue depth (the note says how many; the cell runs with that many, "
                      "in_flight=); they are shown and counted above.")
    return errors


def shapes_table(fid: measure.Fidelity, shapes: list[published.Shape]) -> None:
    table = Table(title="Shape checks")
    for column in ("check", "drive (preset)", "source", "published", "simulated", "result"):
        table.add_column(column)
    for shape in shapes:
        result = fid.check(shape)
        table.add_row(shape.name, f"{shape.drive} ({shape.preset})", f"{shape.source}, {shape.where}",
                      shape.published, result.measured, "[green]pass[/]" if result.passed else "[red]fail[/]")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drive", choices=sorted(published.DRIVES), help="one drive only")
    parser.add_argument("--quick", action="store_true", help="shorter measuring runs (less precise)")
    parser.add_argument("--device", action="append", default=[], metavar="DRIVE=FILE.toml",
                        help="measure DRIVE on this device file instead of its preset (repeatable)")
    parser.add_argument("--noise-seed", type=int, metavar="N",
                        help="measure every drive with device.seed = N (its noise draws; default: the preset's)")
    parser.add_argument("--csv", help="also write every point (with its quote and note) to this CSV file")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--points-only", action="store_true", help="skip the shape checks")
    only.add_argument("--shapes-only", action="store_true", help="skip the published numbers")
    args = parser.parse_args()

    files = {}
    for item in args.device:
        drive, _, path = item.partition("=")
        if drive not in published.DRIVES or not path:
            parser.error(f"--device: give DRIVE=FILE.toml with DRIVE one of {', '.join(published.DRIVES)} "
                         f"(got {item!r})")
        files[published.DRIVES[drive].preset] = path
    if args.noise_seed is not None and not 0 <= args.noise_seed < 2**63:
        parser.error(f"--noise-seed: give a seed from 0 to 2^63 - 1 (got {args.noise_seed})")
    settings = measure.Settings.quick() if args.quick else measure.Settings()
    scratch = tempfile.TemporaryDirectory(prefix="fidelity-")
    fid = measure.Fidelity(settings, device_opener=measure.seeded_opener(files, args.noise_seed, Path(scratch.name)))
    points, shapes = published.by_drive(args.drive)
    started = time.perf_counter()
    try:
        for preset in {p.preset for p in points} | {s.preset for s in shapes}:
            fid.fresh(preset)  # a bad device file fails here, before any measuring
    except FtlscopeError as exc:
        parser.error(str(exc))
    if not args.shapes_only:
        points_table(fid, points, args.csv)
    if not args.points_only:
        shapes_table(fid, shapes)
    seed = "" if args.noise_seed is None else f"; device.seed = {args.noise_seed}"
    console.print(f"settings: {fid.settings}{seed}; wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
