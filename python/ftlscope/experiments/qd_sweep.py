"""``qd-sweep`` (seed 001 §5): 4 KiB random read at QD 1, 2, 4, ... — the throughput-latency trade-off.

Findings:

- ``knee_qd`` by the seed's marginal-gain rule: the first QD step whose IOPS gain is below 5 % while the mean
  latency grows more than 20 %, and after which no step gains 5 % again (:func:`..analysis.knee.knee_by_rule`);
  the reported QD is the step's upper one (the seed's QD 64 -> 128 step gave knee 128). None, with the last
  step's numbers as evidence, when no step of the sweep meets the rule.
- ``practical_knee_qd``: the smallest QD reaching 90 % of the observed peak IOPS (the seed's practical knee,
  "at QD 32 reaches 90 % of peak").
- ``littles_law_error_pct``: the largest |error| over all QDs of Little's law, predicted IOPS = QD / mean
  latency against the observed IOPS (the evidence also gives the mean |error|).
- ``peak_iops`` (and ``peak_qd``, ``peak_mb_s``); ``p99_growth``: p99 at the knee over p99 at a moderate QD
  (§5.3 compares QD 16 with the knee); ``sla_max_qd``: the largest QD whose p99 still meets ``sla_p99``
  (1 ms, §5.3's example SLA).
- ``latency_limit_qd`` (with ``latency_limit_p99_us`` and ``qd1_p99_us``): the latency rule the guidance gives
  latency-sensitive work — the deepest QD whose p99, and every shallower QD's, stays within ``latency_factor``
  (2) times the p99 at QD 1.

The default sweep runs to QD 1024, beyond the seed's 128: the rule only fires once throughput has flattened,
and a drive with many parallel units (32 on the default simulated SSD, which still gains 13 % from QD 64 to
128) does not flatten by QD 128. QD 512 and 1024 are seed 004's deep queues; ``--param qds=1,2,...,128``
gives the seed's exact list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from .. import plots
from ..analysis import knee, littles_law, percentiles
from ..errors import UsageError
from ..units import format_size
from ._common import finding_value, op_metrics, workload
from .base import Experiment, Param, finding
from .context import Context

DEFAULT_QDS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def _check(p: dict[str, Any]) -> None:
    if not p["qds"] or any(q < 1 for q in p["qds"]):
        raise UsageError(f"--param qds: queue depths must be 1 or more (got {p['qds']})")
    if len(set(p["qds"])) != len(p["qds"]):
        raise UsageError(f"--param qds: a queue depth is listed twice ({p['qds']})")
    if not 0 < p["practical_share"] <= 1:
        raise UsageError(f"--param practical_share: give a share in (0, 1] (got {p['practical_share']})")


def measure(ctx: Context, p: dict[str, Any]):
    span = ctx.span(p["span"])
    ctx.ensure_readable(span)
    for qd in sorted(p["qds"]):
        wl = workload("read", size=p["size"], pattern="random", qd=qd, span=span, runtime_ns=p["runtime"],
                      warmup_ns=p["warmup"], seed=1 + ctx.repetition)
        result = ctx.run(wl, f"{format_size(p['size'])} random read QD {qd}")
        yield {"qd": qd, "size": p["size"], **op_metrics(result, "read")}


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    t = table.sort_values("qd").reset_index(drop=True)
    qd = t["qd"].to_numpy()
    iops = t["iops"].to_numpy(dtype=float)
    lat_us = t["lat_mean_us"].to_numpy(dtype=float)
    findings: dict[str, Any] = {}

    peak = int(np.nanargmax(iops))
    findings["peak_iops"] = finding(iops[peak], "IOPS", f"results.csv: largest IOPS of the sweep, at QD {qd[peak]}")
    findings["peak_qd"] = finding(int(qd[peak]), "QD", "results.csv: the QD of peak_iops")
    findings["peak_mb_s"] = finding(t["mb_s"].iloc[peak], "MB/s", f"results.csv row QD {qd[peak]}")

    rule = f"IOPS gain < {p['max_gain']:.0%} while mean latency grows > {p['min_latency_growth']:.0%}"
    step = knee.knee_by_rule(qd, iops, lat_us, max_gain=p["max_gain"], min_latency_growth=p["min_latency_growth"])
    knee_qd = None
    if step is not None:
        knee_qd = int(step.x_to)
        findings["knee_qd"] = finding(
            knee_qd, "QD",
            f"first step meeting the rule of “SSD Performance Profiling” ({rule}) after which no step gains "
            f"{p['max_gain']:.0%} or more again: QD {step.x_from:g} -> {step.x_to:g} gained "
            f"{step.gain:+.1%} IOPS for {step.latency_growth:+.1%} mean latency; the knee is the step's upper "
            f"QD, as in “SSD Performance Profiling” (qd_throughput_latency.png)")
    else:
        last = knee.steps(qd, iops, lat_us)
        detail = (f"the last step, QD {last[-1].x_from:g} -> {last[-1].x_to:g}, still gained {last[-1].gain:+.1%} "
                  f"IOPS (latency {last[-1].latency_growth:+.1%}): sweep deeper queues (--param qds)"
                  if last else "a single QD has no step")
        findings["knee_qd"] = finding(
            None, "QD", f"no step of the sweep met the rule of “SSD Performance Profiling” ({rule}); {detail}")

    index = knee.practical_knee(qd, iops, p["practical_share"])
    practical_qd = int(qd[index]) if index is not None else None
    findings["practical_knee_qd"] = finding(
        practical_qd, "QD",
        f"smallest QD reaching {p['practical_share']:.0%} of the peak {iops[peak]:,.0f} IOPS: "
        f"{iops[index]:,.0f} IOPS = {iops[index] / iops[peak]:.1%} "
        "(the practical knee of “SSD Performance Profiling” §5.1)")

    errors = littles_law.error_pct(qd, lat_us / 1e6, iops)
    worst = int(np.nanargmax(np.abs(errors)))
    predicted = littles_law.predicted_iops(qd, lat_us / 1e6)
    findings["littles_law_error_pct"] = finding(
        float(np.abs(errors[worst])), "%",
        f"largest |QD / mean latency - observed IOPS| / observed IOPS over {len(qd)} QDs, at QD {qd[worst]} "
        f"(predicted {predicted[worst]:,.0f}, observed {iops[worst]:,.0f}); mean |error| "
        f"{np.nanmean(np.abs(errors)):.2f} %")

    at = knee_qd if knee_qd is not None else practical_qd
    growth = percentiles.growth(qd, t["lat_p99_us"], p["moderate_qd"], at) if at is not None else float("nan")
    if np.isfinite(growth):
        findings["p99_growth"] = finding(
            growth, "ratio", f"p99 at QD {at} ({'knee' if knee_qd is not None else 'practical knee'}) / p99 at "
                             f"the moderate QD {p['moderate_qd']} (“SSD Performance Profiling” §5.3; qd_tail_bars.png)")
    sla_us = p["sla_p99"] / 1e3
    sla_qd = percentiles.largest_within(qd, t["lat_p99_us"], sla_us)
    findings["sla_max_qd"] = finding(
        sla_qd, "QD", f"largest QD whose p99 (and every smaller QD's) is at most {sla_us:g} us "
                      f"(--param sla_p99; qd_percentiles.png)" if sla_qd is not None else
                      f"even QD {qd[0]} has p99 {t['lat_p99_us'].iloc[0]:.0f} us > {sla_us:g} us")
    findings["sla_p99_us"] = finding(sla_us, "us", "the p99 target sla_max_qd is measured against (--param sla_p99)")
    if sla_qd is not None:
        findings["sla_max_qd_p99_us"] = finding(_p99_at(t, sla_qd), "us", f"results.csv: p99 at QD {sla_qd}")
    findings.update(_latency_limit(t, p["latency_factor"]))
    return findings


def _p99_at(t: pd.DataFrame, qd: int) -> float:
    return float(t.loc[t["qd"] == qd, "lat_p99_us"].iloc[0])


def _latency_limit(t: pd.DataFrame, factor: float) -> dict[str, Any]:
    """The latency rule for latency-sensitive work: the deepest queue whose p99 (and every shallower one's)
    stays within ``factor`` times the p99 at the shallowest QD measured (QD 1 by default) — the depth up to
    which queueing has not yet made the tail much worse than the device's own service time."""
    base_qd = int(t["qd"].iloc[0])
    base = _p99_at(t, base_qd)
    found = {"qd1_p99_us": finding(base, "us", f"results.csv: p99 at QD {base_qd}, the shallowest measured")}
    limit = percentiles.largest_within(t["qd"], t["lat_p99_us"], factor * base)
    if limit is not None:
        found["latency_limit_qd"] = finding(
            int(limit), "QD", f"largest QD whose p99 (and every smaller QD's) is at most {factor:g} x the p99 at "
                              f"QD {base_qd} ({factor * base:.0f} us; --param latency_factor; qd_percentiles.png)")
        found["latency_limit_p99_us"] = finding(_p99_at(t, limit), "us", f"results.csv: p99 at QD {limit}")
    return found


def _qd_axis(ax) -> None:
    """Log 2 queue-depth axis with the QDs written out (1, 4, 16, ... rather than 2^n)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    t = table.sort_values("qd").reset_index(drop=True)
    qd = t["qd"].to_numpy()
    knee_qd, practical = finding_value(findings, "knee_qd"), finding_value(findings, "practical_knee_qd")
    out = []

    # The seed's throughput-latency curve, every point labelled with its QD.
    title = (f"{format_size(p['size'])} random read: throughput vs latency "
             f"(knee QD {knee_qd if knee_qd is not None else 'not reached'}, practical knee QD {practical})")
    fig, ax = plots.figure(title, "mean latency (us)", "IOPS")
    ax.errorbar(t["lat_mean_us"], t["iops"], xerr=t.get("lat_mean_us_std"), yerr=t.get("iops_std"), marker="o",
                markersize=4, capsize=3, label="measured")
    ax.plot(t["lat_mean_us"], littles_law.predicted_iops(qd, t["lat_mean_us"] / 1e6), "x", color="tab:gray",
            label="Little's law QD / mean latency")
    for x, y, q in zip(t["lat_mean_us"], t["iops"], qd, strict=True):
        ax.annotate(f"QD {q}", (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
    for value, color, name in ((knee_qd, "tab:red", "knee (rule)"), (practical, "tab:orange", "practical knee")):
        if value is not None:
            row = t[t["qd"] == value].iloc[0]
            ax.plot(row["lat_mean_us"], row["iops"], "o", markersize=12, markerfacecolor="none", color=color,
                    label=f"{name}: QD {value}")
    ax.set_xscale("log")
    out.append(plots.save(fig, directory, "qd_throughput_latency",
                          "IOPS against mean latency as the queue deepens, with what Little's law predicts from "
                          "depth and latency; the circled points are the knee by the rule and the practical knee."))

    fig, axes = plots.panels(f"{format_size(p['size'])} random read against queue depth", 1, 2, sharex=True)
    plots.line(axes[0], qd, t["mb_s"], t.get("mb_s_std"), label="MB/s")
    axes[0].set_ylabel("MB/s")
    plots.line(axes[1], qd, t["lat_mean_us"], t.get("lat_mean_us_std"), label="mean latency")
    axes[1].set_ylabel("mean latency (us)")
    for ax in axes:
        _qd_axis(ax)
        ax.set_xlabel("queue depth")
        for value, color in ((knee_qd, "tab:red"), (practical, "tab:orange")):
            if value is not None:
                ax.axvline(value, color=color, linestyle="--", alpha=0.6)
    out.append(plots.save(fig, directory, "qd_scaling",
                          "Random read MB/s and mean latency against queue depth; dashed lines mark the knee by "
                          "the rule and the practical knee."))

    fig, ax = plots.figure("Latency percentiles against queue depth", "queue depth", "latency (us)")
    long = percentiles.tidy(t, "qd")
    for label, group in long.groupby("percentile", sort=False):
        plots.line(ax, group["qd"], group["lat_us"], group["lat_us_std"], label=label)
    ax.axhline(p["sla_p99"] / 1e3, color="tab:gray", linestyle=":", label=f"SLA p99 {p['sla_p99'] / 1e3:g} us")
    _qd_axis(ax)
    ax.set_yscale("log")
    out.append(plots.save(fig, directory, "qd_percentiles",
                          "Latency percentiles against queue depth, with the p99 service-level target as a dotted "
                          "line."))

    # §5.0: bars of p50/p95/p99/p99.9 at a moderate QD and at the knee.
    chosen = [q for q in dict.fromkeys((p["moderate_qd"], knee_qd if knee_qd is not None else practical))
              if q is not None and q in set(qd)]
    if chosen:
        fig, ax = plots.figure("Tail latency at a moderate QD and at the knee", "", "latency (us)")
        labels = [lab for lab in percentiles.SEED_PERCENTILES if percentiles.column(lab) in t.columns]
        width = 0.8 / len(chosen)
        for i, q in enumerate(chosen):
            row = t[t["qd"] == q].iloc[0]
            ax.bar(np.arange(len(labels)) + i * width, [row[percentiles.column(lab)] for lab in labels], width,
                   label=f"QD {q}")
        ax.set_xticks(np.arange(len(labels)) + width * (len(chosen) - 1) / 2, labels)
        out.append(plots.save(fig, directory, "qd_tail_bars",
                              "Tail latency percentiles at a moderate queue depth and at the knee, side by side."))
    return out


EXPERIMENTS = [
    Experiment(
        name="qd-sweep",
        summary="4 KiB random read at QD 1..1024: throughput-latency curve, knee, Little's law, p50-p99.9",
        source="“SSD Performance Profiling” §5",
        writes=False,
        preconditioning="none",
        params=(
            Param("span", "size", 0, "range to read; 0 = the whole target", "0 (whole target)"),
            Param("runtime", "duration", 30 * 10**9, "measured time per QD", "30s"),
            Param("warmup", "duration", 5 * 10**9, "left out at the start of each QD", "5s"),
            Param("size", "size", 4096, "request size", "4KiB"),
            Param("qds", "ints", DEFAULT_QDS,
                  "queue depths (“SSD Performance Profiling”: 1..128; 256..1024 to reach the knee)",
                  "1,2,4,...,1024"),
            Param("max_gain", "float", knee.MAX_GAIN, "knee rule: IOPS gain below this", "0.05"),
            Param("min_latency_growth", "float", knee.MIN_LATENCY_GROWTH, "knee rule: latency growth above this",
                  "0.20"),
            Param("practical_share", "float", knee.PRACTICAL_SHARE, "practical knee: share of the peak IOPS",
                  "0.90"),
            Param("moderate_qd", "int", 16, "the moderate QD whose tail is compared with the knee's", "16"),
            Param("sla_p99", "duration", 10**6, "p99 target for sla_max_qd (profile --sla-p99 sets it)", "1ms"),
            Param("latency_factor", "float", 2.0, "latency rule: deepest QD whose p99 stays within this factor "
                  "of QD 1's", "2"),
        ),
        keys=("qd", "size"),
        check=_check,
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
