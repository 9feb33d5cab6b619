#!/usr/bin/env python3
"""What Newt's two optimizations buy on the Kelpie presets the paper used ("Fantastic SSD Internals and How to
Learn and Use Them" §5, issue 19): read-size alignment on kelpie-n1t-i (reads that are not page multiples cost
+200 µs), the write rate-limiting shim on kelpie-n2t-i (11.5 MB buffer, 200 ms flush window) and kelpie-t200g-m
(64 MB, 1 s), each with the synthetic database, search and cloud traces (`ftlscope trace synth`) at several
loads (the trace replayed `scaled:F`, F times its recorded rate: the write intensity column gives the trace's
write MB/s at that load), the same drives with `[noise]` medium, and controls where the optimization does not
apply: drives without a read-size penalty (consumer-tlc-dram, optane-like) for alignment, a write-through drive
(optane-like) and a drive whose buffer drains in 40 ms (consumer-tlc-dram) for the shim, paced at kelpie-n2t-i's
flush speed anyway.

Each row is `ftlscope newt`'s measurement (ftlscope.newt.measure): the trace replayed twice on a fresh simulated
drive with the range it touches written first and drained, without and with the optimization. By default the
parameters are the presets' ground truth (what a correct probe answers: P1, P6, P8, P10), so the rows measure the
optimizations, not the probes; `--probed` takes them as a user would, from `ftlscope probe sim:PRESET
--properties P1,P6,P8,P10` run once per drive (about a minute each), read as `--from-profile` reads a profile.
The table shows the change in latency with the optimization, in the paper's sign: -64 % is 64 % lower (the
JSON's gain_pct is the same number with the opposite sign), measured as `ftlscope newt` measures it: from each
request's arrival in the trace (issue lag + device latency, what an application behind the shim waits; column
"from"), with the device latency's change (from submission, as `run` reports it) in the "device" columns.

Goal (issue 19): read p99 -64 % or better with the shim where it applies (the paper's 64-82 %); no percentile
worse by more than 5 % where it does not apply.

`--bound-mean-delay` runs the shim with the mean write delay kept within the period (docs/newt.md, "The mean
write delay against the period"); `--hold-in-read-storms` with writes held while the reads storm (docs/newt.md,
"Holding writes through read storms"). Each shim row gives the writes' mean and p99 from arrival before -> after, and
a forced row says it in words: a forced speed's cost falls on the writes.

    python bench/newt_gain.py [--duration 10s] [--only align|shim] [--bound-mean-delay] [--[no-]hold-in-read-storms]
                              [--probed] [--markdown out.md]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ftlscope.metrics import NEWT_STATISTICS
from ftlscope.newt.align import Alignment, alignment_from_params
from ftlscope.newt.latency import headline, write_cost
from ftlscope.newt.measure import Plan, gains, held, measure
from ftlscope.newt.params import NewtParams
from ftlscope.newt.shim import ShimSettings
from ftlscope.probes.noise_levels import noisy_device_file
from ftlscope.probes.truth import ground_truth
from ftlscope.sim import show
from ftlscope.traces import synth
from ftlscope.traces.synthetic import WriteBursts
from ftlscope.units import format_ns, parse_duration_ns

SHOWN = ("mean", "p50", "p90", "p95", "p99", "p99.9")


@dataclass(frozen=True)
class Case:
    group: str          # "align" or "shim"
    preset: str
    trace: str
    load: float
    applies: bool       # the optimization addresses a quirk this drive has
    noise: str | None = None
    forced: bool = False  # alignment to 4 KiB pages applied although the drive has no read-size penalty
    # A forced speed with the drive's own profile given (`--rate-limit-writes SPEED --from-profile RUN`): the
    # shim models the buffer the profile finds, none on a write-through drive. Without it a forced shim models a
    # buffer of 200 ms at the speed (kelpie-n2t-i's, the same numbers).
    own_profile: bool = False


def cases() -> list[Case]:
    out = []
    # "db, reads only": the database trace without its writes, so no flush stands in front of a read and the
    # rows show alignment alone.
    for trace in ("db", "db, reads only", "search", "cloud"):
        for noise in (None, "medium"):
            out.append(Case("align", "kelpie-n1t-i", trace, 1.0, True, noise))
    for preset in ("consumer-tlc-dram", "optane-like"):
        out += [Case("align", preset, "db", 1.0, False), Case("align", preset, "db", 1.0, False, forced=True)]
    for preset, traces in (("kelpie-n2t-i", ("search", "db", "cloud")), ("kelpie-t200g-m", ("cloud", "db", "search"))):
        for trace in traces:
            for load in (1.0, 2.0, 4.0):
                out.append(Case("shim", preset, trace, load, True))
            out.append(Case("shim", preset, trace, 2.0, True, "medium"))
        for bursts in BURSTS:
            for noise in (None, "medium"):
                out.append(Case("shim", preset, bursts, 1.0, True, noise))
    for preset in ("optane-like", "consumer-tlc-dram"):
        out += [Case("shim", preset, "cloud", 1.0, False), Case("shim", preset, "cloud", 1.0, False, forced=True)]
    out.append(Case("shim", "optane-like", "cloud", 1.0, False, forced=True, own_profile=True))
    return out


# The synthetic search trace writes 1 % of its requests: too little for a write buffer to matter. The paper's
# search-engine trace carried write bursts (its Figure 7a); these variants add them (`ftlscope trace synth search
# --write-bursts SIZE --burst-rate SPEED --burst-every DURATION`), 128 KiB sequential writes past the trace's 64 GiB:
# - 20 MB every second at 200 MB/s (1.7 of kelpie-n2t-i's buffers; a third of kelpie-t200g-m's). One flush a
#   second reaches under 1 % of the reads: read p99 is set by the reads behind the programs of the 20 MB/s written
#   (the same bytes spread evenly over the second, with no shim, give the same p99 as the shim), not by the flush.
# - 12 MiB every 750 ms at 200 MB/s: the check, a read-heavy trace whose write bursts each overflow
#   kelpie-n2t-i's 11.5 MiB buffer, often enough that more than 1 % of the reads wait behind the flush.
BURSTS = {
    "search + 20 MB bursts / 1 s": WriteBursts(153 * (128 << 10), 200e6, 1_000_000_000),
    "search + 12 MiB bursts / 750 ms": WriteBursts(12 << 20, 200e6, 750_000_000),
}


def target_of(case: Case, directory: Path) -> str:
    if case.noise is None:
        return f"sim:{case.preset}"
    return f"sim:{noisy_device_file(case.preset, case.noise, directory)}"


def probed_params(preset: str, directory: Path) -> NewtParams:
    """The drive's P1, P6, P8 and P10 as `ftlscope probe` answers them (the CLI, as a user runs it), turned into
    what `--from-profile` gives the optimizations."""
    out = directory / f"probe-{preset}.json"
    if not out.exists():
        subprocess.run([sys.executable, "-m", "ftlscope.cli", "probe", f"sim:{preset}", "--properties",
                        "P1,P6,P8,P10", "--out", str(directory / f"probe-{preset}"), "--json", str(out), "--quiet"],
                       check=True, stdout=subprocess.DEVNULL)
    answers = json.loads(out.read_text())["properties"]
    value = lambda p: (answers.get(p) or {}).get("value")  # noqa: E731
    p6 = value("P6") if isinstance(value("P6"), dict) else None
    window = value("P10")
    return NewtParams(
        page_size=value("P1"),
        penalised_reads=None if p6 is None else tuple((int(lo), int(hi)) for lo, hi in p6.get("penalised_sizes") or []),
        unaligned_penalty_ns=None if p6 is None else float(answers["P6"].get("unaligned_penalty_us") or 0) * 1e3,
        buffer_bytes=value("P8"),
        # P10 answers None for "never" (the buffer does not drain while idle), as --from-profile reads it.
        flush_window_s=math.inf if "P10" in answers and window is None else window,
        source=f"ftlscope probe sim:{preset}")


def plan_of(case: Case, probed: Path | None = None) -> Plan:
    if probed is not None and not case.forced:
        # As `ftlscope newt --from-profile RUN` with `--align-reads auto` or `--rate-limit-writes auto`.
        params = probed_params(case.preset, probed)
        if case.group == "align":
            return Plan(alignment=alignment_from_params(params))
        settings = ShimSettings.resolve("auto", params, allow_noop=True)
        return Plan(shim=settings if settings.active else None)
    truth = ground_truth(show(case.preset))
    if case.group == "align":
        if case.forced:
            return Plan(alignment=Alignment(4096))
        # As --align-reads auto reads a profile: whole pages where sizes that are not page multiples cost more.
        quirks = tomllib.loads(show(case.preset))["quirks"]
        whole_pages = parse_duration_ns(str(quirks.get("unaligned_size_penalty", "0us")), "penalty") > 0
        ranges = tuple(tuple(r) for r in truth["P6"]["penalised_sizes"])
        return Plan(alignment=Alignment(truth["P1"], ranges, whole_pages))
    reference = ground_truth(show("kelpie-n2t-i"))
    if case.own_profile:
        # As `--rate-limit-writes 57.5MB/s --from-profile RUN` with the drive's own profile.
        params = probed_params(case.preset, probed) if probed is not None else NewtParams(
            buffer_bytes=int(truth["P8"]), flush_window_s=float(truth["P10"]), source="the preset's ground truth")
        return Plan(shim=ShimSettings.resolve(f"{reference['P8'] / reference['P10'] / 1e6:g}MB/s", params))
    buffer, window = (reference["P8"], reference["P10"]) if case.forced else (truth["P8"], truth["P10"])
    if not buffer or not window:
        return Plan()  # as --rate-limit-writes auto --allow-noop: no write buffer, no shim
    source = f"{'kelpie-n2t-i' if case.forced else 'the preset'}'s ground truth: P8 / P10"
    return Plan(shim=ShimSettings(buffer / window, source=source, buffer_bytes=int(buffer)))


def write_mb_s(frame, load: float) -> float:
    writes = frame[frame["op"] == "write"]
    span_s = int(frame["submit_ns"].iloc[-1]) / 1e9
    return float(writes["size"].sum()) / span_s / 1e6 * load if span_s else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", default="10s", help="length of each synthetic trace (default 10s)")
    parser.add_argument("--only", choices=("align", "shim"))
    parser.add_argument("--traces",
                        help="only these traces (comma-separated, e.g. 'search + 12 MiB bursts / 750 ms,cloud')")
    parser.add_argument("--drives", help="only these presets (comma-separated, e.g. kelpie-n2t-i,optane-like)")
    parser.add_argument("--loads", help="only these loads (comma-separated, e.g. 2,4)")
    parser.add_argument("--markdown", help="also write the table as Markdown here")
    parser.add_argument("--bound-mean-delay", action="store_true",
                        help="run the shim with --bound-mean-delay (the mean write delay kept within the period)")
    parser.add_argument("--hold-in-read-storms", action=argparse.BooleanOptionalAction, default=None,
                        help="run the shim with writes held while the reads storm (default: the shim's default, "
                             "on; --no-hold-in-read-storms turns it off)")
    parser.add_argument("--probed", action="store_true",
                        help="take P1, P6, P8, P10 from 'ftlscope probe' on each drive (as a user would) instead of "
                             "the presets' ground truth")
    args = parser.parse_args()
    duration = parse_duration_ns(args.duration, "--duration")
    console = Console(width=200)
    table = Table(title=f"Newt on simulated drives ({args.duration} synthetic traces): change in latency with the "
                        "optimization (negative: lower, better)")
    columns = ["optimization", "drive", "trace", "load", "write MB/s", "from", *(f"read {p}" for p in SHOWN),
               "write p99", "device: read p90 / p95 / p99 / p99.9", "device: write p99", "extra read",
               "writes delayed", "write mean / p99 from arrival", "held max", "worst read / write", "verdict"]
    for column in columns:
        table.add_column(column, justify="left" if column in (*columns[:3], "from", "verdict") else "right")
    rows = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="newt-gain-") as scratch:
        for case in cases():
            if (args.only and case.group != args.only) or (args.traces and case.trace not in args.traces.split(",")) \
                    or (args.drives and case.preset not in args.drives.split(",")) \
                    or (args.loads and case.load not in [float(x) for x in args.loads.split(",")]):
                continue
            plan = plan_of(case, Path(scratch) if args.probed else None)
            if args.bound_mean_delay and plan.shim is not None:
                plan = replace(plan, shim=replace(plan.shim, bound_mean_delay=True))
            if args.hold_in_read_storms is not None and plan.shim is not None:
                plan = replace(plan, shim=replace(plan.shim, hold_in_read_storms=args.hold_in_read_storms))
            frame = synth(case.trace.split(",")[0].split(" ")[0], duration, seed=1, bursts=BURSTS.get(case.trace))
            if case.trace.endswith("reads only"):
                frame = frame[frame["op"] == "read"].reset_index(drop=True)
            outcome = measure(target_of(case, Path(scratch)), frame, plan,
                              timing=f"scaled:{case.load:g}" if case.load != 1 else "faithful", wrap=True)
            measured = gains(outcome.before, outcome.after)
            gain, device = measured["gain_pct"], measured["gain_pct_device"]
            read = gain.get("read", {})
            shown = [read.get(p) for p in SHOWN]
            shim = held(outcome.after.summary) or {}
            delayed = (f"{shim['delayed_writes']:,} of {shim['writes']:,}, mean over all "
                       f"{format_ns((shim.get('write_delay_mean_us') or 0) * 1e3)}") if shim else "—"
            held_max = f"{(shim.get('held_bytes_max') or 0) / 1e6:.1f} MB" if shim else "—"
            cost = write_cost({**measured, "before": outcome.before.summary, "after": outcome.after.summary}) \
                if shim and case.group == "shim" else None
            write_cells = _write_cells(measured, outcome) if shim and case.group == "shim" else "—"
            worst = {op: max((-v for k, v in values.items() if k in SHOWN and k != "mean" and v is not None),
                             default=0.0) for op, values in gain.items()}
            worst_all = max(worst.values(), default=0.0)
            within = (f"worst {worst_all:+.1f} % ({'ok' if worst_all <= 5 else 'FAILS: over +5 %'}; "
                      + ", ".join(f"{op} {v:+.1f} %" for op, v in worst.items()) + ")")
            if case.group == "shim" and not shim:
                verdict = "control: auto does not apply (no write buffer): no shim"
            elif shim and shim.get("write_through"):
                verdict = (f"forced speed, the drive's profile finds no write buffer: {shim['delayed_writes']:,} held; "
                           f"{within}")
            elif shim and shim.get("overloaded_writes"):
                verdict = (f"{'forced: ' if case.forced else ''}writes outran the flush speed (sustained urgency up "
                           f"to {shim['sustained_urgency_max']:.2f}): {shim['overloaded_writes']:,} not held; "
                           f"{within}")
            elif shim and not shim["delayed_writes"]:
                verdict = "shim idle: writes never came fast enough to be delayed"
            elif case.forced:
                what = "4 KiB pages" if case.group == "align" else "kelpie-n2t-i's flush speed"
                verdict = f"forced {what} (not what auto does): {within}"
            elif outcome.align_stats is not None and outcome.align_stats.changed == 0:
                verdict = ("nothing to align: every read a page multiple" if case.applies
                           else "control: auto aligns nothing (no read-size penalty)")
            elif case.applies:
                verdict = ("p99 -64 % or better" if (read.get("p99") or 0) >= 64 else "p99 short of -64 %") \
                    if case.group == "shim" else ("mean better" if (read.get("mean") or 0) > 0 else "mean not better")
            else:
                verdict = f"control: {within}"
            if case.forced and cost:
                verdict += f"; {cost}"
            if shim and shim.get("storm_holds"):
                verdict += f"; {shim['storm_holds']:,} writes held while the reads stormed"
            if shim and shim.get("budget_releases"):
                verdict += f"; the mean-delay budget let go what was held {shim['budget_releases']} time(s)"
            if shim and shim.get("backoffs"):
                verdict += (f"; gave up {shim['backoffs']} hold(s) that slowed the reads (under holding "
                            f"{shim['read_geomean_held_us']:.0f} µs against {shim['read_geomean_free_us']:.0f} µs, "
                            "geometric means)")
            extra = f"{outcome.align_stats.extra_pct:.1f} %" if outcome.align_stats else "—"
            drive = case.preset + (f" (noise {case.noise})" if case.noise else "")
            drive += (" (forced, its own profile)" if case.own_profile else " (forced)") if case.forced else ""
            device_read = " / ".join(_pct(device.get("read", {}).get(p)) for p in ("p90", "p95", "p99", "p99.9"))
            row = [case.group, drive, case.trace, f"x{case.load:g}", f"{write_mb_s(frame, case.load):.1f}",
                   measured["latency_from"], *(_pct(v) for v in shown), _pct(gain.get("write", {}).get("p99")),
                   device_read, _pct(device.get("write", {}).get("p99")), extra, delayed, write_cells, held_max,
                   " / ".join(f"{worst[op]:+.1f} %" if op in worst else "—" for op in ("read", "write")), verdict]
            rows.append(row)
            table.add_row(*row)
            console.print(" | ".join(row), style="dim")
    console.print(table)
    console.print(f"{len(rows)} rows in {time.monotonic() - started:.0f} s of wall time; statistics: "
                  f"{', '.join(NEWT_STATISTICS)}")
    if args.markdown:
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        Path(args.markdown).write_text("\n".join(lines) + "\n")


def _write_cells(measured: dict, outcome) -> str:
    """Write mean and p99 before -> after, by the measure the gain is on (from arrival in an open-loop replay)."""
    doc = {**measured, "before": outcome.before.summary, "after": outcome.after.summary}
    before, after = (headline(doc, when).get("write", {}).get("lat_ns") or {} for when in ("before", "after"))
    return " / ".join(f"{format_ns(before[k])} → {format_ns(after[k])}" if k in before and k in after else "—"
                      for k in ("mean", "p99"))


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{-value:+.1f} %"


if __name__ == "__main__":
    main()
