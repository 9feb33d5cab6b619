"""Measured accuracy of the probes: probe simulated devices whose insides are known and score every answer
against the ground truth of shared/device-model.md with issue 5's match rule."""

from __future__ import annotations

import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import UsageError
from ..sim import SimDevice, presets
from . import NAMES
from .noise_levels import noise_section, noisy_device_file
from .runner import probe_device
from .truth import NOTATION_KEYS, describe, ground_truth, matches, notation_matches, notation_truth

GOAL_ACCURACY = 0.90
GOAL_DEVICE_TIME_S = 15 * 60
# Issue 16's calibration bins: an answer given with confidence >= 0.9 should be right >= 97 % of the time.
CONFIDENCE_BINS = [(0.0, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.0)]


def ssd_presets() -> list[str]:
    """Every built-in simulated SSD (the HDDs have no FTL to probe)."""
    names = []
    for p in presets():
        config = tomllib.loads(SimDevice.open(p["name"]).config_toml)
        if config["device"]["kind"] == "ssd":
            names.append(p["name"])
    return names


@dataclass
class Validation:
    rows: pd.DataFrame  # one row per (device, property): answer, truth, match, confidence, device time
    # One row per (device, property, Table 4 detail: partial flush, second level, serialised writes, ...): scored
    # apart from the ten answers, so the accuracy above stays the ten properties'.
    notation_rows: pd.DataFrame = field(default_factory=pd.DataFrame)

    def notation_per_key(self) -> pd.DataFrame:
        if self.notation_rows.empty:
            return pd.DataFrame(columns=["property", "detail", "right", "answers", "accuracy"])
        grouped = self.notation_rows.groupby(["property", "detail"], sort=False)["match"]
        return pd.DataFrame({"right": grouped.sum(), "answers": grouped.count(),
                             "accuracy": grouped.mean()}).reset_index()

    def notation_markdown(self) -> str:
        lines = ["| property | detail (Table 4) | right | accuracy |", "| --- | --- | --- | --- |"]
        for r in self.notation_per_key().itertuples():
            lines.append(f"| {r.property} | {r.detail} | {int(r.right)}/{int(r.answers)} | {r.accuracy:.1%} |")
        return "\n".join(lines) + "\n"

    def per_property(self) -> pd.DataFrame:
        grouped = self.rows.groupby("property", sort=False)
        return pd.DataFrame({
            "right": grouped["match"].sum(),
            "answers": grouped["match"].count(),
            "accuracy": grouped["match"].mean(),
            "device_time_s_max": grouped["device_time_s"].max(),
        }).reset_index()

    def per_device(self) -> pd.DataFrame:
        grouped = self.rows.groupby("device", sort=False)
        return pd.DataFrame({
            "right": grouped["match"].sum(),
            "answers": grouped["match"].count(),
            "device_time_s": grouped["device_time_s"].sum(),
        }).reset_index()

    def markdown(self) -> str:
        """One row per device: each property's answer, with the truth beside a wrong one."""
        pids = list(dict.fromkeys(self.rows["property"]))
        lines = ["| device | " + " | ".join(f"{p} {NAMES[p]}" for p in pids) + " | device time |",
                 "| --- | " + " | ".join("---" for _ in pids) + " | --- |"]
        for device, group in self.rows.groupby("device", sort=False):
            by_pid = group.set_index("property")
            cells = []
            for pid in pids:
                if pid not in by_pid.index:
                    cells.append("")
                    continue
                row = by_pid.loc[pid]
                cells.append(f"✓ {row['answer']}" if row["match"] else f"✗ {row['answer']} (truth {row['truth']})")
            lines.append(f"| {device} | " + " | ".join(cells) + f" | {group['device_time_s'].sum():.0f} s |")
        per = self.per_property()
        lines.append("| **right** | " + " | ".join(
            f"{int(r.right)}/{int(r.answers)}" for r in per.itertuples()) + f" | {self.accuracy:.1%} overall |")
        return "\n".join(lines) + "\n"

    def calibration(self) -> pd.DataFrame:
        """Share of answers right per confidence bin (the last bin includes 1.0); answers without a confidence
        figure get their own row."""
        rows = []
        confidence = pd.to_numeric(self.rows["confidence"], errors="coerce") if len(self.rows) else pd.Series()
        for low, high in CONFIDENCE_BINS:
            inside = (confidence >= low) & ((confidence <= high) if high == 1.0 else (confidence < high))
            rows.append(self._bin_row(f"{low:.1f}-{high:.1f}", inside))
        rows.append(self._bin_row("none", confidence.isna()))
        return pd.DataFrame(rows)

    def _bin_row(self, label: str, inside: pd.Series) -> dict[str, Any]:
        matched = self.rows["match"][inside] if len(self.rows) else pd.Series(dtype=bool)
        return {"confidence": label, "answers": int(matched.count()), "right": int(matched.sum()),
                "share_right": float(matched.mean()) if matched.count() else float("nan")}

    def calibration_markdown(self) -> str:
        lines = ["| confidence | answers | right | share right |", "| --- | --- | --- | --- |"]
        for r in self.calibration().itertuples():
            share = "" if pd.isna(r.share_right) else f"{r.share_right:.1%}"
            lines.append(f"| {r.confidence} | {r.answers} | {r.right} | {share} |")
        return "\n".join(lines) + "\n"

    def per_property_markdown(self) -> str:
        lines = ["| property | right | accuracy |", "| --- | --- | --- |"]
        for r in self.per_property().itertuples():
            lines.append(f"| {r.property} {NAMES[r.property]} | {int(r.right)}/{int(r.answers)} | {r.accuracy:.1%} |")
        return "\n".join(lines) + "\n"

    @property
    def accuracy(self) -> float:
        return float(self.rows["match"].mean()) if len(self.rows) else 0.0

    @property
    def goal_met(self) -> bool:
        return self.accuracy >= GOAL_ACCURACY and bool(
            (self.per_device()["device_time_s"] < GOAL_DEVICE_TIME_S).all())


def validate(specs: list[str], *, properties: str | None = None, out: str | Path | None = None,
             progress: bool = False, on_device=None, noise: str | None = None) -> Validation:
    """Probe each simulated device (a preset name or a device TOML path) and score the answers. ``noise``
    (a level of noise_levels.NOISE_LEVELS) appends that ``[noise]`` section to every device first."""
    rows: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    if noise is not None:
        noise_section(noise)  # refuse an unknown level before any device is touched
    with tempfile.TemporaryDirectory(prefix="ftlscope-noisy-") as scratch:
        for spec in specs:
            device = SimDevice.open(str(noisy_device_file(spec, noise, scratch)) if noise is not None else spec)
            _score(device, rows, properties, out, progress, details)
            if on_device is not None:
                on_device(tomllib.loads(device.config_toml)["device"]["name"], rows)
    return Validation(pd.DataFrame(rows), pd.DataFrame(details))


def answer_row(device: str, pid: str, value: Any, confidence: float | None, device_time_s: float,
               expected: Any) -> dict[str, Any]:
    """One answer scored against its truth: the row validate-probes tabulates (and bench/score_probe_outputs.py
    for the drives a run has finished)."""
    return {"device": device, "property": pid, "name": NAMES[pid], "answer": describe(pid, value),
            "truth": describe(pid, expected), "match": bool(matches(pid, value, expected)),
            "confidence": confidence, "device_time_s": device_time_s}


def _score(device: SimDevice, rows: list[dict[str, Any]], properties: str | None, out: str | Path | None,
           progress: bool, details: list[dict[str, Any]] | None = None) -> None:
    """Probe one device and add a row per answer, scored against its ground truth."""
    truth = ground_truth(device.config_toml)
    name = tomllib.loads(device.config_toml)["device"]["name"]
    report = probe_device(device, properties=properties, out=Path(out) / name if out else None,
                          progress=progress)
    for pid, answer in report.answers.items():
        rows.append(answer_row(name, pid, answer.value, answer.confidence, answer.device_time_s, truth[pid]))
        if details is not None:
            _score_notation(name, pid, answer.extra, notation_truth(device.config_toml), details)
    if report.error is not None:
        raise report.error


def _score_notation(device: str, pid: str, extra: dict[str, Any], truth: dict[str, dict[str, Any]],
                    details: list[dict[str, Any]]) -> None:
    """A row per Table 4 detail of ``pid`` that the device has or the probe reported (a detail absent on both
    sides says nothing and is left out)."""
    expected_all = truth.get(pid, {})
    for key in NOTATION_KEYS.get(pid, ()):
        known, reported = key in expected_all, key in extra
        if key == "second_level_window":
            if not known and not reported:
                continue
            right = known and notation_matches(key, extra.get(key), expected_all[key])
        else:
            if not expected_all.get(key) and not extra.get(key):
                continue
            right = notation_matches(key, extra.get(key), expected_all.get(key))
        details.append({"device": device, "property": pid, "detail": key, "answer": extra.get(key),
                        "truth": expected_all.get(key), "match": bool(right)})


def resolve_specs(preset_args: list[str] | None, device_files: list[str] | None) -> list[str]:
    """``--presets all | NAME ...`` and ``--device FILE.toml ...`` -> device specs."""
    specs: list[str] = []
    available = ssd_presets()
    for name in preset_args or ([] if device_files else ["all"]):
        if name == "all":
            specs.extend(available)
        elif name.removeprefix("sim:") in available:
            specs.append(name.removeprefix("sim:"))
        else:
            raise UsageError(f"--presets: '{name}' is not a simulated SSD preset; 'ftlscope sim presets' lists them")
    for path in device_files or []:
        if not Path(path).is_file():
            raise UsageError(f"--device: {path} does not exist; give a device TOML file")
        specs.append(str(path))
    return specs
