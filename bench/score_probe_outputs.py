#!/usr/bin/env python3
"""Score what a long ``validate-probes --out DIR`` run has finished so far: every ``DIR/<preset>/properties.json``
against the preset's (or held-out device file's) ground truth with validate-probes' rule (the truth does not change
with ``--noise``).

A full ``validate-probes --presets all --noise harsh`` takes an hour or more on a loaded machine and prints its
tables only at the end; this prints, per run directory: right/answers per property, the calibration bins
(>= 0.9, 0.7-0.9, 0.5-0.7, < 0.5), P10 within 20 % of a finite window (issue 16), the most device time on one
drive (the sum of the probes' device time, without preconditioning), and every wrong answer.

    python bench/score_probe_outputs.py mild=/tmp/out_mild medium=/tmp/out_medium harsh=/tmp/out_harsh
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from ftlscope.probes.truth import describe, ground_truth
from ftlscope.probes.validate import CONFIDENCE_BINS, answer_row
from ftlscope.sim import SimDevice

PROPERTIES = [f"P{i}" for i in range(1, 11)]
# validate-probes' bins, surest first (the last includes 1.0).
BINS = [(f"conf >= {lo}" if hi == 1.0 else f"< {hi}" if lo == 0.0 else f"{lo}-{hi}", lo, 2.0 if hi == 1.0 else hi)
        for lo, hi in reversed(CONFIDENCE_BINS)]
P10_WITHIN = 0.2
HELD_OUT = Path(__file__).resolve().parent / "devices" / "heldout"


def device_spec(name: str) -> str:
    """A preset's name, or the held-out device file of that name (bench/devices/heldout, whose probe outputs a
    ``validate-probes --device F.toml --out DIR`` run keeps under the device's name)."""
    held_out = HELD_OUT / f"{name}.toml"
    return str(held_out) if held_out.is_file() else name


def score(label: str, directory: Path) -> pd.DataFrame:
    rows = []
    for device in sorted(p for p in directory.iterdir() if (p / "properties.json").is_file()):
        report = json.loads((device / "properties.json").read_text())
        truth = ground_truth(SimDevice.open(device_spec(device.name)).config_toml)
        for pid, a in report["properties"].items():
            value, expected = a["value"], truth[pid]
            finite = pid == "P10" and isinstance(expected, (int, float)) and expected > 0
            rows.append({
                "run": label, **answer_row(device.name, pid, value, a["confidence"], a["device_time_s"], expected),
                "p10_ratio": (float(value or 0) / expected) if finite else None,
                "alternatives": "; ".join(
                    describe(pid, x["value"]) + (f" ({x['confidence']:.2f})" if x.get("confidence") is not None else "")
                    for x in a.get("alternatives") or []),
            })
    return pd.DataFrame(rows)


def table(scored: pd.DataFrame) -> str:
    head = (["run", "drives", "right"] + PROPERTIES + [b[0] for b in BINS]
            + ["P10 within 20 %", "most device time a drive"])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for run, g in scored.groupby("run", sort=False):
        cells = [run, str(g["device"].nunique()), f"{int(g['match'].sum())}/{len(g)} ({g['match'].mean():.1%})"]
        for pid in PROPERTIES:
            p = g[g["property"] == pid]
            cells.append(f"{int(p['match'].sum())}/{len(p)}")
        conf = g["confidence"].astype(float)
        for _, lo, hi in BINS:
            inside = g[(conf >= lo) & (conf < hi)]
            cells.append(f"{int(inside['match'].sum())}/{len(inside)}")
        p10 = g["p10_ratio"].dropna().astype(float)
        within = int(((p10 - 1).abs() <= P10_WITHIN).sum())
        cells.append(f"{within}/{len(p10)}" + (f" ({p10.min():.2f}-{p10.max():.2f}x)" if len(p10) else ""))
        worst = g.groupby("device")["device_time_s"].sum()
        cells.append(f"{worst.max():.0f} s ({worst.idxmax()})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    runs = []
    for arg in argv:
        label, _, path = arg.rpartition("=")
        if not Path(path).is_dir():
            print(f"run: {path} is not a directory; give LABEL=DIR of a validate-probes --out run", file=sys.stderr)
            return 2
        runs.append(score(label or path, Path(path)))
    scored = pd.concat(runs, ignore_index=True) if runs else pd.DataFrame()
    if scored.empty:
        print("run: no finished device (DIR/<preset>/properties.json) in the given directories", file=sys.stderr)
        return 2
    print(table(scored) + "\n")
    for run, g in scored.groupby("run", sort=False):
        print(f"- {run}, drives: {', '.join(g['device'].unique())}")
    print("\nWrong answers:\n")
    for r in scored[~scored["match"]].itertuples():
        alternatives = f"; alternatives {r.alternatives}" if r.alternatives else ""
        print(f"- {r.run}: {r.device} {r.property} {r.answer} (truth {r.truth}) at {r.confidence:.2f}{alternatives}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
