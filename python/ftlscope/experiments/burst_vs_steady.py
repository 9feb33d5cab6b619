"""``burst-vs-steady`` (seed 001 §6.2): one long 4 KiB random write at QD 32 on a purged (fresh-out-of-box)
range, measured in short time windows: the burst plateau while the SLC cache and write buffer absorb the
writes, the drop, and the lower plateau that garbage collection sets, judged by the SNIA PTS steady-state rule.

Rounds are consecutive blocks of ``round`` seconds of the one run (SNIA's are one-minute rounds); the tracked
value is each round's IOPS. Findings:

- ``burst_iops``: the median IOPS of the windows before the drop (of all windows when there is no drop);
- ``drop_seconds``, ``drop_bytes``: when the burst ended, in device seconds from the start of the run and in
  bytes written by then: the first window whose 3-window rolling median falls more than ``drop`` below the
  first windows' level, placed inside its window from the cumulative bytes (analysis/steady_state.py). None
  when the throughput never fell that far (no burst);
- ``steady_state_reached``: whether the run's last ``rounds`` rounds meet the SNIA rule (max - min within
  ``max_excursion`` of their average, the fitted line's change across them within ``max_slope_excursion``);
  ``steady_iops`` is their average, reported also when the rule rejects it (the evidence says so);
  ``steady_window_first_round`` / ``steady_window_last_round`` (and ``_s``) the window judged;
  ``steady_excursion_pct``, ``steady_slope_excursion_pct`` its two measures;
- ``steady_since_round`` / ``steady_since_seconds``: from which round on every five-round window met the rule
  (a lasting steady state rather than a flat stretch before garbage collection starts);
- ``first_steady_round``: the first window after the drop the rule accepts (where SNIA would have stopped);
- ``burst_to_steady_ratio``; ``burst_lat_mean_us``, ``steady_lat_mean_us`` and ``_lat_p99_us``,
  ``_lat_p99_9_us`` (medians of the windows' percentiles) for the tail in each phase.

Preconditioning is a purge (TRIM of the range), then ``settle`` of idle so the drive can recover its SLC cache
after the TRIM, as a fresh drive would have it. The default 30 minutes of 1-minute rounds see the SLC cliff
and the start of garbage collection on the default simulated 256 GB SSD (about 1 minute of wall time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..analysis import steady_state
from ..errors import UsageError
from ..metrics import WINDOW_INDEX
from ..units import format_size
from ._common import check_qd, check_window, finding_value, window_rows, workload
from .base import Experiment, Param, finding
from .context import Context

S = 10**9


def _check(p: dict[str, Any]) -> None:
    check_window(p)
    if p["round"] < p["window"] or p["round"] % p["window"]:
        raise UsageError(f"--param round: a round must be a whole number of windows ({p['window'] / S:g} s)")
    if p["rounds"] < 2:
        raise UsageError(f"--param rounds: a measurement window needs at least 2 rounds (got {p['rounds']})")
    if p["runtime"] < p["round"] * p["rounds"]:
        raise UsageError(f"--param runtime: run at least rounds x round = {p['rounds'] * p['round'] / S:g} s")
    if not 0 < p["drop"] < 1:
        raise UsageError(f"--param drop: give a fraction between 0 and 1 (got {p['drop']})")
    check_qd(p)


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    ctx.idle(p["settle"])
    wl = workload("write", size=p["size"], pattern="random", qd=p["qd"], span=span, runtime_ns=p["runtime"],
                  seed=1 + ctx.repetition)
    result = ctx.run(wl, f"{format_size(p['size'])} random write QD {p['qd']} for {p['runtime'] / S:g} s",
                     window=p["window"])
    rows = window_rows(result, "write")
    if rows.empty:
        return
    rows["written_bytes"] = rows["bytes"].cumsum()
    for row in rows.to_dict("records"):
        yield {WINDOW_INDEX: int(row.pop(WINDOW_INDEX)), **row}


# ---- analysis ------------------------------------------------------------------------------------------------

def _complete(table: pd.DataFrame) -> pd.DataFrame:
    """The table's windows in time order, without a last window cut short by the end of the run."""
    t = table.sort_values(WINDOW_INDEX).reset_index(drop=True)
    full = t["duration_s"].max()
    return t[t["duration_s"] >= 0.5 * full].reset_index(drop=True)


def _limits(p: dict[str, Any]) -> dict[str, float]:
    return {"max_excursion": p["max_excursion"], "max_slope_excursion": p["max_slope_excursion"]}


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    t = _complete(table)
    findings: dict[str, Any] = {}
    if t.empty:
        return findings
    start, duration, iops = t["t_s"].to_numpy(), t["duration_s"].to_numpy(), t["iops"].to_numpy(dtype=float)
    window_s = float(np.median(duration))

    end = steady_state.burst_end(start, duration, iops, drop=p["drop"])
    if end is not None:
        done = np.concatenate([[0.0], t["written_bytes"].to_numpy(dtype=float)])
        edges = np.concatenate([[start[0]], start + duration])
        drop_bytes = float(np.interp(end.seconds, edges, done))
        burst = end.burst
        burst_rows = t.iloc[:end.index]
        findings["drop_seconds"] = finding(
            end.seconds - start[0], "s",
            f"window {int(t[WINDOW_INDEX].iloc[end.index])} (t = {start[end.index]:.3g} s) is the first whose 3-window "
            f"rolling median is more than {p['drop']:.0%} below the first windows' {burst:,.0f} IOPS; placed "
            f"inside its window from the cumulative bytes (results.csv written_bytes; burst_vs_steady_iops.png)")
        findings["drop_bytes"] = finding(
            drop_bytes, "bytes", f"bytes written up to drop_seconds ({format_size(drop_bytes)}, "
                                 f"{drop_bytes / 1e9:.3g} GB), interpolated in results.csv written_bytes")
        burst_evidence = (f"median IOPS of the {end.index} windows of {window_s:g} s before the drop "
                          f"(results.csv iops)")
    else:
        burst = float(np.median(iops))
        burst_rows = t
        none = (f"the IOPS never fell more than {p['drop']:.0%} below the first windows' level for good: "
                "no burst ended during the run")
        findings["drop_seconds"] = finding(None, "s", none)
        findings["drop_bytes"] = finding(None, "bytes", none)
        burst_evidence = f"median IOPS of all {len(t)} windows (no drop: one level throughout)"
    findings["burst_iops"] = finding(burst, "IOPS", burst_evidence)

    round_s = p["round"] / S
    round_start, round_iops = steady_state.round_averages(start, duration, t["ops"].to_numpy(), round_s)
    rounds = p["rounds"]
    final = steady_state.final_window(round_iops, rounds, **_limits(p))
    if final is None:
        reason = (f"only {len(round_iops)} complete rounds of {round_s:g} s; the rule needs {rounds} "
                  "(--param runtime or round)")
        findings["steady_state_reached"] = finding(False, "bool", reason)
        findings["steady_iops"] = finding(None, "IOPS", reason)
        return findings

    rule = (f"SNIA PTS rule: max - min <= {p['max_excursion']:.0%} and the fitted line's change <= "
            f"{p['max_slope_excursion']:.0%} of the window average")
    where = (f"rounds {final.start}..{final.stop - 1} ({round_start[final.start]:.4g}-"
             f"{round_start[final.stop - 1] + round_s:.4g} s, rounds of {round_s:g} s)")
    findings["steady_state_reached"] = finding(
        final.reached, "bool",
        f"the last {rounds} rounds, {where}: excursion {final.excursion:.1%}, slope excursion "
        f"{final.slope_excursion:.1%} ({rule}); steady_state.png")
    findings["steady_iops"] = finding(
        final.average, "IOPS",
        f"average IOPS of {where}" + ("" if final.reached else
                                      "; NOT a steady state by the SNIA rule: the device was still changing"))
    findings["steady_window_first_round"] = finding(final.start, "round", f"first round of {where}")
    findings["steady_window_last_round"] = finding(final.stop - 1, "round", f"last round of {where}")
    findings["steady_window_start_s"] = finding(round_start[final.start] - start[0], "s", f"start of {where}")
    findings["steady_window_end_s"] = finding(round_start[final.stop - 1] + round_s - start[0], "s",
                                              f"end of {where}")
    findings["steady_excursion_pct"] = finding(final.excursion * 100, "%", f"(max - min) / average over {where}")
    findings["steady_slope_excursion_pct"] = finding(
        final.slope_excursion * 100, "%", f"|slope| x {rounds - 1} rounds / average of the least-squares line "
                                          f"over {where} (slope {final.slope:,.1f} IOPS per round)")
    since = steady_state.steady_since(round_iops, rounds, **_limits(p))
    findings["steady_since_round"] = finding(
        since, "round", f"earliest round from which every window of {rounds} rounds to the end of the run met the rule"
        if since is not None else "the last window did not meet the rule")
    findings["steady_since_seconds"] = finding(
        None if since is None else round_start[since] - start[0], "s", "start of steady_since_round")
    after_drop = 0 if end is None else int(np.searchsorted(round_start, start[end.index], side="right"))
    first = steady_state.first_steady_window(round_iops, rounds, start=after_drop, **_limits(p))
    findings["first_steady_round"] = finding(
        None if first is None else first.start, "round",
        (f"first window {'after the drop ' if end is not None else ''}meeting the rule (where a SNIA run "
         f"stops): rounds {first.start}..{first.stop - 1}, average {first.average:,.0f} IOPS" if first is not None
         else "no window after the drop met the rule"))

    if final.average > 0:
        findings["burst_to_steady_ratio"] = finding(burst / final.average, "ratio", "burst_iops / steady_iops")
    # Windows in which nothing completed (a drive stalled by a flush or GC) have no latency to take a median of.
    busy = t["ops"] > 0
    burst_rows = burst_rows[burst_rows["ops"] > 0]
    steady_rows = t[busy & (start >= round_start[final.start]) & (start < round_start[final.stop - 1] + round_s)]
    phases = (("burst", burst_rows, "the burst windows"), ("steady", steady_rows, f"the windows of {where}"))
    for name, rows, what in phases:
        if rows.empty:
            continue
        mean = float(np.average(rows["lat_mean_us"], weights=rows["ops"]))
        findings[f"{name}_lat_mean_us"] = finding(mean, "us", f"mean latency over {what} (weighted by their ops)")
        for column, label in (("lat_p99_us", "p99"), ("lat_p99_9_us", "p99.9")):
            findings[f"{name}_{column}"] = finding(float(rows[column].median()), "us",
                                                   f"median of the {label} of {what} (burst_vs_steady_latency.png)")
    return findings


# ---- figures ---------------------------------------------------------------------------------------------------

def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    t = _complete(table)
    if t.empty:
        return []
    out = []
    x = t["t_s"] - t["t_s"].iloc[0]
    round_s = p["round"] / S
    round_start, round_iops = steady_state.round_averages(x, t["duration_s"], t["ops"], round_s)
    burst, steady = finding_value(findings, "burst_iops"), finding_value(findings, "steady_iops")
    drop_s, drop_bytes = finding_value(findings, "drop_seconds"), finding_value(findings, "drop_bytes")
    first = finding_value(findings, "steady_window_first_round")
    last = finding_value(findings, "steady_window_last_round")
    reached = finding_value(findings, "steady_state_reached")

    title = f"{format_size(p['size'])} random write QD {p['qd']} from purged: IOPS over time"
    fig, ax = plots.figure(title, "time (s)", "IOPS")
    ax.plot(x, t["iops"], color="tab:blue", linewidth=0.7, alpha=0.6, label=f"{t['duration_s'].median():g} s windows")
    if "iops_std" in t and np.any(t["iops_std"].fillna(0) > 0):
        ax.fill_between(x, t["iops"] - t["iops_std"], t["iops"] + t["iops_std"], color="tab:blue", alpha=0.15)
    if len(round_iops):
        ax.step(np.append(round_start, round_start[-1] + round_s), np.append(round_iops, round_iops[-1]),
                where="post", color="black", linewidth=1.2, label=f"rounds of {round_s:g} s")
    end_x = drop_s if drop_s is not None else float(x.iloc[-1])
    if burst is not None:
        name = "burst plateau" if drop_s is not None else "no drop; median"
        ax.hlines(burst, 0, end_x, color="tab:red", linewidth=2, label=f"{name} {burst:,.0f} IOPS")
    if drop_s is not None:
        ax.axvline(drop_s, color="tab:red", linestyle="--", alpha=0.7,
                   label=f"drop after {drop_s:.3g} s, {format_size(drop_bytes)} written")
    if first is not None and steady is not None:
        a, b = round_start[first], round_start[last] + round_s
        ax.axvspan(a, b, color="tab:green" if reached else "tab:orange", alpha=0.15,
                   label=f"SNIA window rounds {first}-{last} ({'steady' if reached else 'not steady'})")
        ax.hlines(steady, a, b, color="tab:green", linewidth=2, label=f"steady plateau {steady:,.0f} IOPS")
    ax.set_ylim(0, 1.3 * float(np.nanmax(t["iops"])))  # room above the plateaus for the legend
    out.append(plots.save(fig, directory, "burst_vs_steady_iops",
                          "Write IOPS over time from a fresh burst to the steady state: the burst level, the drop "
                          "and the steady plateau as measured."))

    fig, ax = plots.figure("Write latency over time: windows (dots) and rounds (lines)", "time (s)",
                           "latency (us)")
    busy = t["ops"] > 0  # a window in which nothing completed has no latency
    per_round = t[busy].assign(round=np.floor(x[busy] / round_s + 1e-9).astype(int))
    per_round = per_round.assign(weighted=per_round["lat_mean_us"] * per_round["ops"]).groupby("round")
    for column, label, color in (("lat_mean_us", "mean", "tab:blue"), ("lat_p99_us", "p99", "tab:orange"),
                                 ("lat_p99_9_us", "p99.9", "tab:green")):
        ax.plot(x[busy], t.loc[busy, column], ".", markersize=1.5, alpha=0.3, color=color)
        level = (per_round["weighted"].sum() / per_round["ops"].sum() if column == "lat_mean_us"
                 else per_round[column].median())
        edges = level.index.to_numpy() * round_s
        ax.step(np.append(edges, edges[-1] + round_s), np.append(level.to_numpy(), level.to_numpy()[-1]),
                where="post", color=color, linewidth=1.5,
                label=f"{label} (round {'mean' if column == 'lat_mean_us' else 'median of windows'})")
    if drop_s is not None:
        ax.axvline(drop_s, color="tab:red", linestyle="--", alpha=0.7, label="drop")
    ax.set_yscale("log")
    out.append(plots.save(fig, directory, "burst_vs_steady_latency",
                          "Write latency over time as windows (dots) and rounds (lines), with the drop marked "
                          "where the burst ended."))

    if len(round_iops):
        fig, ax = plots.figure(f"SNIA steady-state check: IOPS per round of {round_s:g} s", "round", "IOPS")
        rounds = np.arange(len(round_iops))
        plots.line(ax, rounds, round_iops, label="round IOPS")
        if first is not None and steady is not None:
            w = steady_state.check_window(round_iops, first, last - first + 1, **_limits(p))
            span_x = np.arange(first, last + 1)
            ax.hlines([w.average, 1.1 * w.average, 0.9 * w.average], first, last,
                      colors=["tab:green", "tab:gray", "tab:gray"], linestyles=["-", ":", ":"],
                      label="window average, ±10 %")
            ax.plot(span_x, w.slope * span_x + w.intercept, "--", color="tab:red", label="least-squares fit")
            ax.axvspan(first - 0.5, last + 0.5, color="tab:green" if reached else "tab:orange", alpha=0.1)
        ax.set_ylim(bottom=0)
        out.append(plots.save(fig, directory, "steady_state",
                              "IOPS per round with the SNIA steady-state window: the rounds must stay within 10 % "
                              "of their average and the fitted slope must be flat."))
    return out


EXPERIMENTS = [
    Experiment(
        name="burst-vs-steady",
        summary="long 4 KiB random write at QD 32 from purged: burst and steady IOPS, the drop, SNIA steady state",
        source="“SSD Performance Profiling” §6.2",
        writes=True,
        preconditioning="purge",
        params=(
            Param("span", "size", 0, "range to write; 0 = the whole target", "0 (whole target)"),
            Param("runtime", "duration", 1800 * S, "length of the write", "30min"),
            Param("window", "duration", S, "time window of the IOPS series", "1s"),
            Param("round", "duration", 60 * S, "SNIA round: consecutive time block whose IOPS is one value", "60s"),
            Param("rounds", "int", steady_state.ROUNDS, "rounds in the SNIA measurement window", "5"),
            Param("max_excursion", "float", steady_state.MAX_EXCURSION,
                  "SNIA: max - min within the window, share of its average", "0.20"),
            Param("max_slope_excursion", "float", steady_state.MAX_SLOPE_EXCURSION,
                  "SNIA: change of the fitted line across the window, share of its average", "0.10"),
            Param("drop", "float", steady_state.DROP, "the burst ends where IOPS fall this far below it", "0.25"),
            Param("size", "size", 4096, "request size", "4KiB"),
            Param("qd", "int", 32, "queue depth", "32"),
            Param("settle", "duration", 300 * S, "idle after the purge, so the drive recovers its SLC cache",
                  "5min"),
        ),
        keys=(WINDOW_INDEX,),
        measure=measure,
        analyse=analyse,
        figures=figures,
        check=_check,
    )
]
