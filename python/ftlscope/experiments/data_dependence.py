"""``data-dependence`` (seed 000 §3.3.6, §5.10): does what is written change how fast it is written? Sequential
writes of all-zero, all-one (0xff), alternating-bit (0xaa), LBA-stamped (the first 8 bytes of each block its
LBA, the rest 0xff) and random data, and the NVMe Write Zeroes command, each on an empty (purged) and on a full
(sequentially filled) device. A drive that compresses or deduplicates, or keeps all-zero pages as a mapping
flag, writes some patterns faster; the seed's four drives did not, but all of them wrote zeroes much faster
with Write Zeroes.

Each case writes ``bytes`` from the start of the span. A drive's speed also depends on its history (how full
its SLC cache is, where garbage collection stands), so the patterns are written in ``rounds`` rounds in
alternating order (zeros ... random, then random ... zeros: a trend over the run favours no pattern), and the
data is called decisive only when the patterns differ by more than the same pattern differs between rounds.

- Empty state: the span is purged (TRIM) before every case, as the seed's "erased then rewritten".
- Full state: the span is filled sequentially once; every data case overwrites the first ``bytes`` of it; the
  Write Zeroes rounds come last, each on the next untouched ``bytes`` (it leaves its range zeroed, no longer
  full).
- Every case starts after ``settle`` of idle.

Findings:

- ``pattern_ratio_empty``, ``pattern_ratio_full``: the fastest data pattern's mean MB/s / the slowest's;
- ``round_spread_empty``, ``round_spread_full``: the largest spread of one pattern between rounds ((max -
  min) / mean of its MB/s): what history alone changes;
- ``data_changes_speed``: a pattern ratio above 1 + ``threshold`` that the rounds' spread does not explain (a
  one-way ANOVA of MB/s by pattern, p < 0.01; with one round only the ratio decides);
- ``write_zeroes_vs_zeros_empty``, ``write_zeroes_vs_zeros_full``: Write Zeroes MB/s / MB/s of writing zeroes
  with ordinary writes (above 1: Write Zeroes is faster); ``write_zeroes_lat_p50_us_empty`` / ``_full`` its
  median command latency.

Where the target refuses Write Zeroes, those cases are left out and experiment.json's notes say why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from .. import plots
from ..errors import FtlscopeError, UsageError
from ..units import format_size
from ..workload import DATA_PATTERNS
from ._common import device_seconds, op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context, Interrupted

GiB = 1 << 30
STATES = ("empty", "full")
ZEROES = "write_zeroes"
ALPHA = 0.01


def _check(p: dict[str, Any]) -> None:
    unknown = [d for d in p["patterns"] if d not in DATA_PATTERNS]
    if unknown:
        raise UsageError(f"--param patterns: unknown data pattern(s) {', '.join(unknown)}; use "
                         f"{', '.join(DATA_PATTERNS)}")
    bad = [s for s in p["states"] if s not in STATES]
    if bad:
        raise UsageError(f"--param states: unknown state(s) {', '.join(bad)}; use empty, full")
    for name, low in (("size", 1), ("qd", 1), ("rounds", 1), ("bytes", 0), ("runtime", 0), ("settle", 0)):
        if p[name] < low:
            raise UsageError(f"--param {name}: give at least {low} (got {p[name]})")
    if p["threshold"] < 0:
        raise UsageError(f"--param threshold: give a fraction of at least 0 (got {p['threshold']})")


class _Cases:
    """Runs the cases of one repetition, keeping track of whether the span is still freshly purged."""

    def __init__(self, ctx: Context, p: dict[str, Any], span: int, length: int):
        self.ctx, self.p, self.span, self.length = ctx, p, span, length
        self.purged = True  # the declared preconditioning has just purged the span

    def purge(self) -> None:
        if not self.purged:
            self.ctx.precondition("purge", self.span)
        self.purged = True

    def fill(self) -> None:
        self.ctx.precondition("sequential-fill", self.span)
        self.purged = False

    def run(self, state: str, op: str, data: str, rnd: int, start: int = 0) -> dict[str, Any]:
        p = self.p
        # Every case starts after the same idle time, so none finds the write buffer still busy with the
        # case before it.
        self.ctx.idle(p["settle"])
        wl = workload(op, size=p["size"], pattern="sequential", qd=p["qd"], span=self.length, start=start,
                      total_bytes=self.length, runtime_ns=p["runtime"] or None, data=data)
        what = "Write Zeroes" if op == ZEROES else f"{data} data"
        result = self.ctx.run(wl, f"{state} device, round {rnd + 1}: {what}, {format_size(self.length)} "
                                  f"sequential in {format_size(p['size'])} QD {p['qd']}")
        self.purged = False
        return {"state": state, "write_case": ZEROES if op == ZEROES else data, "op": op,
                "data": "-" if op == ZEROES else data, "round": rnd,
                "seconds": device_seconds(result), **op_metrics(result, op)}


def measure(ctx: Context, p: dict[str, Any]):
    _check(p)
    align = max(p["size"], 4096)
    span = ctx.span(p["span"], align=align)
    length = span if p["bytes"] == 0 else max(min(p["bytes"], span) // align * align, align)
    cases = _Cases(ctx, p, span, length)
    for state in p["states"]:
        if state == "full":
            cases.fill()
        for rnd in range(p["rounds"]):
            order = p["patterns"] if rnd % 2 == 0 else p["patterns"][::-1]
            for data in order:
                if state == "empty":
                    cases.purge()
                yield cases.run(state, "write", data, rnd)
        if not p["write_zeroes"]:
            continue
        for rnd in range(p["rounds"]):
            if state == "empty":
                cases.purge()
            # on the full device each round zeroes a range the earlier ones left full
            start = (rnd + 1) * length if state == "full" and (rnd + 2) * length <= span else 0
            try:
                yield cases.run(state, ZEROES, "zeros", rnd, start)
            except FtlscopeError as exc:
                if isinstance(exc, Interrupted):
                    raise
                ctx.notes.append(f"Write Zeroes on the {state} device failed, so it is left out: {exc.message}")
                break


# ---- analysis -------------------------------------------------------------------------------------------


def _by_pattern(table: pd.DataFrame, state: str) -> dict[str, np.ndarray]:
    """MB/s of every round, per data pattern, in one state."""
    rows = table[(table["state"] == state) & (table["op"] == "write")]
    return {data: group.sort_values("round")["mb_s"].to_numpy(dtype=float)
            for data, group in rows.groupby("data", sort=False)}


def _anova_p(groups: list[np.ndarray]) -> float | None:
    """p of a one-way ANOVA (do the group means differ beyond the spread inside the groups?); None with one
    value per group. With no spread inside the groups the answer is certain: 0 if the means differ, else 1."""
    if min(len(g) for g in groups) < 2:
        return None
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    means = np.array([g.mean() for g in groups])
    if within == 0.0:
        return 0.0 if np.ptp(means) > 0 else 1.0
    return float(scipy_stats.f_oneway(*groups).pvalue)


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    verdicts = []
    for state in STATES:
        groups = _by_pattern(table, state)
        means = {data: float(v.mean()) for data, v in groups.items()}
        if len(means) >= 2:
            fast, slow = max(means, key=means.get), min(means, key=means.get)
            ratio = means[fast] / means[slow]
            which = (f"mean MB/s of {fast} (fastest) / {slow} (slowest)" if ratio > 1
                     else "every pattern wrote at the same MB/s")
            findings[f"pattern_ratio_{state}"] = finding(
                ratio, "ratio", f"results.csv rows state={state}, op=write, over {len(means)} data patterns and "
                                f"{p['rounds']} round(s): {which}")
            spread = max(float(np.ptp(v) / v.mean()) if v.mean() else 0.0 for v in groups.values())
            findings[f"round_spread_{state}"] = finding(
                spread, "ratio", f"the largest (max - min) / mean of one pattern's MB/s over the rounds, "
                                 f"state={state}: what the device's history alone changed")
            pvalue = _anova_p(list(groups.values()))
            decisive = ratio > 1 + p["threshold"] and (pvalue is None or pvalue < ALPHA)
            verdicts.append((state, ratio, pvalue, decisive))
        zeroes = table[(table["state"] == state) & (table["op"] == ZEROES)]
        if len(zeroes) and "zeros" in means:
            wz = float(zeroes["mb_s"].mean())
            findings[f"write_zeroes_vs_zeros_{state}"] = finding(
                wz / means["zeros"], "ratio",
                f"results.csv state={state}: mean Write Zeroes MB/s / mean MB/s of ordinary writes of zeroes "
                "(above 1: Write Zeroes is faster)")
        if len(zeroes):
            findings[f"write_zeroes_lat_p50_us_{state}"] = finding(
                float(zeroes["lat_p50_us"].mean()), "us", f"results.csv rows state={state}, write_case=write_zeroes")
    if verdicts:
        parts = [f"{state}: ratio {ratio:.3f}" + ("" if pv is None else f", ANOVA p = {pv:.3g}")
                 for state, ratio, pv, _ in verdicts]
        findings["data_changes_speed"] = finding(
            any(v[3] for v in verdicts), "bool",
            "; ".join(parts) + f" — data-dependent when the fastest/slowest ratio is above 1 + {p['threshold']:g} "
                               f"and the patterns differ beyond the rounds' spread (p < {ALPHA:g})")
    return findings


# ---- figures --------------------------------------------------------------------------------------------


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    out: list[Path] = []
    states = [s for s in STATES if s in set(table["state"])]
    # one value per (state, case): the mean over rounds, and the spread over rounds and repetitions
    per_case = table.groupby(["state", "write_case"], sort=False).agg(
        seconds=("seconds", "mean"), seconds_sd=("seconds", "std"), mb_s=("mb_s", "mean"),
        mb_s_sd=("mb_s", "std"), lat_p50_us=("lat_p50_us", "mean"), lat_p99_us=("lat_p99_us", "mean"),
        op=("op", "first")).fillna({"seconds_sd": 0.0, "mb_s_sd": 0.0})
    width = 0.8 / max(len(states), 1)
    writes = per_case[per_case["op"] == "write"]
    if not writes.empty:
        patterns = list(dict.fromkeys(writes.index.get_level_values("write_case")))
        fig, ax = plots.figure("Relative write duration by data pattern (1 = random data)", "data pattern",
                               "duration / duration with random data")
        for i, state in enumerate(states):
            if state not in writes.index.get_level_values("state"):
                continue
            rows = writes.loc[state]
            base = rows.loc["random", "seconds"] if "random" in rows.index else rows["seconds"].iloc[0]
            x = np.arange(len(patterns)) + (i - (len(states) - 1) / 2) * width
            y = [rows.loc[d, "seconds"] / base if d in rows.index else np.nan for d in patterns]
            err = [rows.loc[d, "seconds_sd"] / base if d in rows.index else 0.0 for d in patterns]
            ax.bar(x, y, width, yerr=err, capsize=3, label=f"{state} device", alpha=0.85)
        ax.set_xticks(range(len(patterns)), patterns)
        ax.axhline(1.0, color="black", linewidth=0.8)
        out.append(plots.save(fig, directory, "data_dependence_relative_duration",
                              "Time to write the same amount with each data pattern, relative to random data, on "
                              "a fresh and on a used device."))

    cases = list(dict.fromkeys(per_case.index.get_level_values("write_case")))
    fig, axes = plots.panels(f"Sequential writes by content, and Write Zeroes ({format_size(p['size'])}, "
                             f"QD {p['qd']})", 1, 2, size=(11, 4.2))
    for i, state in enumerate(states):
        rows = per_case.loc[state]
        x = np.arange(len(cases)) + (i - (len(states) - 1) / 2) * width
        mb = [rows.loc[c, "mb_s"] if c in rows.index else np.nan for c in cases]
        err = [rows.loc[c, "mb_s_sd"] if c in rows.index else 0.0 for c in cases]
        axes[0].bar(x, mb, width, yerr=err, capsize=3, label=f"{state} device", alpha=0.85)
        p50 = [rows.loc[c, "lat_p50_us"] if c in rows.index else np.nan for c in cases]
        p99 = [rows.loc[c, "lat_p99_us"] if c in rows.index else np.nan for c in cases]
        axes[1].bar(x, p50, width, label=f"p50, {state} device", alpha=0.85)
        axes[1].plot(x, p99, "v", color="black" if i == 0 else "tab:red", label=f"p99, {state} device")
    for ax, ylabel in ((axes[0], "MB/s"), (axes[1], "latency (us)")):
        ax.set_xticks(range(len(cases)), cases, rotation=20)
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
    out.append(plots.save(fig, directory, "data_dependence_throughput_latency",
                          "Sequential write throughput and latency (p50 bars, p99 marks) by data content, with "
                          "Write Zeroes alongside."))
    return out


EXPERIMENTS = [
    Experiment(
        name="data-dependence",
        summary="sequential writes of 0x00, 0xff, 0xaa, LBA-stamped and random data, and Write Zeroes, on an "
                "empty and a full device: does the content change the write speed?",
        source="“What does the Flash Translation Layer do?” §3.3.6, §5.10",
        writes=True,
        preconditioning="purge",
        params=(
            Param("span", "size", 0, "range purged (empty) or filled (full); 0 = the whole target",
                  "0 (whole target)"),
            Param("bytes", "size", GiB, "bytes each case writes from the start of the span; 0 = the whole span",
                  "1GiB"),
            Param("size", "size", 128 * 1024, "request size", "128KiB"),
            Param("qd", "int", 64, "queue depth (the seed's 64)", "64"),
            Param("patterns", "strs", ["zeros", "ones", "0xaa", "lba_stamped", "random"],
                  "data patterns written", "zeros,ones,0xaa,lba_stamped,random"),
            Param("states", "strs", ["empty", "full"], "device states: empty (purged), full (filled)",
                  "empty,full"),
            Param("write_zeroes", "bool", True, "also run the Write Zeroes command in each state", "true"),
            Param("rounds", "int", 2, "times every case is run, in alternating order", "2"),
            Param("settle", "duration", 10**9, "idle time before each case", "1s"),
            Param("runtime", "duration", 0, "stop each case after this long; 0 = when its bytes are written",
                  "0 (all bytes)"),
            Param("threshold", "float", 0.05, "a fastest/slowest pattern ratio above 1 + this can count as "
                                              "data-dependent", "0.05"),
        ),
        keys=("state", "write_case", "op", "data", "round"),
        measure=measure,
        analyse=analyse,
        figures=figures,
        check=_check,
    )
]
