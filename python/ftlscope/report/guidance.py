"""Guidance: rules that turn findings into advice (the practical recommendations of "SSD Performance
Profiling", the findings of "What does the Flash Translation Layer do?", and the two optimisations of "Fantastic
SSD Internals and How to Learn and Use Them"), each citing the numbers and figures it rests on, and saying
which rule it applies.

A rule whose premise does not hold in the data (a comparison with a queue that is not shallower, a tail that
did not grow) stays silent about it or says it differently.

A rule whose evidence is missing (the experiment was not in the suite, or its analysis could not support the
finding) says nothing: no advice is better than a guess. Every number a rule's text shows is an
:class:`~.facts.Evidence` display string, so the text cannot drift from the findings it cites.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..metrics import newt_gain_finding, newt_latency_finding
from .facts import Evidence, Facts, format_bytes, format_value
from .references import FANTASTIC, FTL_THESIS, PROFILING

SLA_DEFAULT_NS = 10**6  # qd-sweep's sla_p99 default: a different value was given with --sla-p99
# p99 more than this many times p50 at the rate writes arrive: they already wait for flushes.
TAIL_FACTOR = 3.0


@dataclass(frozen=True)
class Advice:
    rule: str
    topic: str
    text: str
    evidence: tuple[Evidence, ...]

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "topic": self.topic, "text": self.text,
                "evidence": [e.to_json() for e in self.evidence]}


Rule = Callable[[Facts], Advice | None]


def _compose(rule: str, topic: str, lead: str, parts: list[str], cited: list[Evidence]) -> Advice | None:
    """Advice made of the clauses whose evidence was there; none when no clause was."""
    if not parts:
        return None
    return Advice(rule, topic, lead + "; ".join(parts) + ".", tuple(cited))


def _present(*evidence: Evidence | None) -> bool:
    return all(e is not None for e in evidence)


def queue_depth_latency(f: Facts) -> Advice | None:
    """Latency rule: the deepest queue whose p99 stays within a factor of QD 1's — or, when the user gave a p99
    target (``profile --sla-p99``), the deepest whose p99 stays under it."""
    target = f.finding("qd-sweep", "sla_p99_us", "qd_percentiles")
    lead = "Latency-sensitive work (databases, key-value stores): "
    if f.param("qd-sweep", "sla_p99") not in (None, SLA_DEFAULT_NS) and target is not None:
        sla = f.finding("qd-sweep", "sla_max_qd", "qd_percentiles")
        if sla is None:
            base = f.finding("qd-sweep", "qd1_p99_us", "qd_percentiles")
            if base is None:
                return None
            return Advice("queue-depth-latency", "Queue depth",
                          f"{lead}no queue depth measured meets the p99 target of {target.display} (--sla-p99): "
                          f"even at QD 1 p99 is {base.display} (rule: p99 under --sla-p99).", (target, base))
        at = f.finding("qd-sweep", "sla_max_qd_p99_us", "qd_percentiles")
        if at is None:
            return None
        return Advice("queue-depth-latency", "Queue depth",
                      f"{lead}keep at most {sla.display} in flight, the deepest queue whose p99 ({at.display}) stays "
                      f"under your target of {target.display} (rule: p99 under --sla-p99).",
                      (sla, at, target))
    limit = f.finding("qd-sweep", "latency_limit_qd", "qd_percentiles")
    at = f.finding("qd-sweep", "latency_limit_p99_us", "qd_percentiles")
    base = f.finding("qd-sweep", "qd1_p99_us", "qd_percentiles")
    factor = f.param("qd-sweep", "latency_factor")
    if not _present(limit, at, base) or factor is None:
        return None
    return Advice("queue-depth-latency", "Queue depth",
                  f"{lead}keep at most {limit.display} in flight, the deepest queue whose p99 ({at.display}) stays "
                  f"within {factor:g} times the p99 at QD 1 ({base.display}) (rule: p99 within {factor:g}x QD 1's; "
                  f"profile --sla-p99 sets your own target).", (limit, at, base))


def queue_depth_throughput(f: Facts) -> Advice | None:
    """Throughput rule: the smallest QD reaching 90 % of the peak IOPS, and the knee of "SSD Performance
    Profiling" (a doubling adds under 5 % IOPS while mean latency grows over 20 %)."""
    practical = f.finding("qd-sweep", "practical_knee_qd", "qd_scaling")
    knee = f.finding("qd-sweep", "knee_qd", "qd_throughput_latency")
    peak_qd = f.finding("qd-sweep", "peak_qd", "qd_scaling")
    peak = f.finding("qd-sweep", "peak_iops", "qd_scaling")
    if not _present(peak_qd, peak):
        return None
    lead = "Throughput work (batch loads, backups): "
    if practical is None:
        return None
    text = (f"{lead}{practical.display} already gives 90 % of the peak {peak.display} (reached at "
            f"{peak_qd.display}; rule: 90 % of peak IOPS)")
    cited = [practical, peak, peak_qd]
    if knee is None:
        text += ("; IOPS still grew at the deepest queue measured, so submit as much at once as the application "
                 f"can ({FTL_THESIS})")
    else:
        text += (f"; past the knee at {knee.display} a doubling adds under 5 % IOPS while mean latency grows over "
                 f"20 % (rule: the knee of {PROFILING})")
        cited.append(knee)
        growth = f.finding("qd-sweep", "p99_growth", "qd_tail_bars")
        moderate = f.param("qd-sweep", "moderate_qd")
        # Only a comparison with a shallower queue, and only when the tail did grow, reads as one.
        if growth is not None and moderate is not None and knee.value > moderate and growth.value >= 1.05:
            text += f". At the knee p99 is {growth.display} the p99 at QD {moderate:g}"
            cited.append(growth)
    text += _span_clause(f, cited)
    return Advice("queue-depth-throughput", "Queue depth", text + ".", tuple(cited))


def _span_clause(f: Facts, cited: list[Evidence]) -> str:
    """Where the queue-depth sweep read only part of the target, say so: on a hard disk a short span means short
    seeks, so the whole disk gives fewer IOPS at the same depth (the zoning experiment's whole-disk rate, when it
    ran, is cited so the line agrees with the summary table)."""
    span = f.confined_span("qd-sweep")
    if span is None:
        return ""
    clause = f". These IOPS were measured over {span}"
    whole = f.finding("zoning", "random_read_iops_qd32", "zoning")
    if f.rotational and whole is not None:
        cited.append(whole)
        return (f"{clause}, where a hard disk's seeks are short; over the whole disk 4 KiB random reads at QD 32 "
                f"gave {whole.display}")
    return clause


def request_size(f: Facts) -> Advice | None:
    sequential = f.finding("bs-sweep", "sequential_transition_bytes", "bs_sweep")
    sequential_peak = f.finding("bs-sweep", "sequential_peak_mb_s", "bs_sweep")
    random = f.finding("bs-sweep", "transition_bytes", "bs_sweep")
    random_peak = f.finding("bs-sweep", "random_peak_mb_s", "bs_sweep")
    parts, cited = [], []
    if _present(sequential, sequential_peak):
        parts.append(f"sequential reads of {sequential.display} already reach 80 % of the peak "
                     f"{sequential_peak.display}; larger requests add little")
        cited += [sequential, sequential_peak]
    smallest = min(f.param("bs-sweep", "sizes") or [0])
    if _present(random, random_peak) and random.value > smallest:
        parts.append(f"random reads need {random.display} requests to reach 80 % of their peak "
                     f"{random_peak.display} — below that they are bound by IOPS, not bandwidth, so read "
                     f"what you need rather than padding small random reads")
        cited += [random, random_peak]
    elif _present(random, random_peak):
        # The smallest size measured already reaches it: there is no "below that" to warn about.
        parts.append(f"random reads reach 80 % of their peak {random_peak.display} already with {random.display} "
                     f"requests, the smallest measured: small random reads cost no more per byte than large ones")
        cited += [random, random_peak]
    return _compose("request-size", "Request size", "At QD 32, ", parts, cited)


def alignment(f: Facts) -> Advice | None:
    aligned_from = f.finding("alignment", "aligned_from_bytes", "alignment")
    penalty = f.finding("alignment", "misaligned_penalty_pct", "alignment")
    worst = f.finding("alignment", "worst_penalty_pct", "alignment")
    page = f.prop("P1")
    cited: list[Evidence] = []
    if _present(aligned_from, penalty) and penalty.value > 0:
        text = (f"Align offsets to {aligned_from.display}: requests shifted by less cost "
                f"{penalty.display} of their IOPS.")
        cited += [aligned_from, penalty]
    elif worst is not None and worst.value > 0:
        text = (f"Alignment beyond the logical block hardly matters here: the worst misaligned offset cost "
                f"{worst.display} of the IOPS.")
        cited.append(worst)
    elif worst is not None:
        # The worst "cost" is zero or a gain here: say a gain as a gain, not as a negative cost ("> -0.1 %").
        if worst.value == 0:
            gain = worst
            text = ("Alignment beyond the logical block does not matter here: every misaligned offset was as fast "
                    f"as aligned reads (the worst cost {gain.display}).")
        else:
            shown = "less than 0.1 %" if worst.value > -0.1 else format_value(-worst.value, worst.unit)
            gain = replace(worst, display=shown)
            text = (f"Alignment beyond the logical block does not matter here: no misaligned offset was slower "
                    f"than aligned reads (even the least favourable one was faster, by {gain.display}).")
        cited.append(gain)
    else:
        return None
    if page is not None and isinstance(page.value, int | float):
        # "page", not "flash page": the same line serves drives whose medium is no flash (Optane-like).
        text += (f" The drive's page is {page.display} (P1): file systems and databases should keep "
                 f"{page.display} blocks.")
        cited.append(page)
    return Advice("alignment", "Alignment", text, tuple(cited))


def _measured_gain(f: Facts, optimization: str, doing: str) -> tuple[str, list[Evidence]]:
    """A sentence citing the newest ``ftlscope newt`` run of this device that applied ``optimization``
    (``align_reads`` or ``rate_limit_writes``): read p99 before, after and the gain; or, when there is none,
    that the gain is not measured and how to measure it."""
    runs = [r for r in f.record.get("newt_runs") or [] if (r.get("optimizations") or {}).get(optimization)]
    found = (runs[0].get("findings") or {}) if runs else {}
    names = (newt_gain_finding("read", "p99"), newt_latency_finding("read", "p99", "before"),
             newt_latency_finding("read", "p99", "after"))
    if not runs or any((found.get(n) or {}).get("value") is None for n in names):
        return (" The gain is not measured for this drive: 'ftlscope newt TARGET TRACE --from-profile RUN' replays "
                "a trace without and with it.", [])
    source = f"newt {runs[0]['run_id']}"
    gain, before, after = (Evidence(source, n, found[n]["value"], found[n].get("unit") or "",
                                    format_value(found[n]["value"], found[n].get("unit") or "")) for n in names)
    if gain.value < 0:
        gain = replace(gain, display=format_value(-gain.value, "%"))
    direction = "lower" if gain.value >= 0 else "higher"
    # Measured from each read's arrival in the trace (as the application waits it) or, in a closed-loop replay,
    # from its submission: the sentence says which.
    since = "arrival" if runs[0].get("latency_from") == "arrival" else "submission"
    return (f" Measured ('ftlscope newt', {runs[0]['trace']}): {doing} made read p99 (from {since} to completion) "
            f"{gain.display} {direction}, {before.display} before, {after.display} after.", [gain, before, after])


def read_sizes(f: Facts) -> Advice | None:
    consistency = f.prop("P6")
    page = f.prop("P1")
    if consistency is None or not isinstance(consistency.value, dict):
        return None
    penalised = consistency.value.get("penalised_sizes") or []
    if penalised:
        ranges = ", ".join(f"{format_bytes(a)}-{format_bytes(b)}" for a, b in penalised)
        text = (f"Read sizes to avoid: {ranges} cost more than their neighbours (P6, {consistency.display}); "
                f"round such reads up past the range (as {FANTASTIC} does: a 20 KB read made 24 KB).")
        measured, cited = _measured_gain(f, "align_reads", "aligning reads")
        return Advice("read-sizes", "Read sizes", text + measured, (consistency, *cited))
    if page is None:
        return None
    measured, cited = _measured_gain(f, "align_reads", "aligning reads")
    if consistency.value.get("consistent") is False:
        # No range, yet not consistent: P6 found that sizes which are not page multiples cost more.
        text = (f"Read whole pages: reads whose size is not a multiple of the {page.display} page (P1) cost more "
                f"(P6, {consistency.display}); round them up (as {FANTASTIC} does: a 7 KB read made 8 KB).")
        return Advice("read-sizes", "Read sizes", text + measured, (consistency, page, *cited))
    text = (f"No read size is penalised ({consistency.display}, P6): any multiple of the {page.display} page "
            f"(P1) reads at the cost its size predicts.")
    return Advice("read-sizes", "Read sizes", text + measured, (consistency, page, *cited))


def write_cliff(f: Facts) -> Advice | None:
    cliff = f.finding("seq-write-over-time", "cliff_bytes", "seq_write")
    before = f.finding("seq-write-over-time", "throughput_before_mb_s", "seq_write")
    after = f.finding("seq-write-over-time", "throughput_after_mb_s", "seq_write")
    if not _present(cliff, before, after):
        return None
    if f.rotational:
        return Advice(
            "write-cliff", "Sustained writes",
            f"The disk's write cache takes the first {cliff.display} of a burst at {before.display}; after that "
            f"writes run at the platters' rate, {after.display}. Plan bulk loads for the platters' rate.",
            (cliff, before, after))
    return Advice(
        "write-cliff", "Sustained writes",
        f"Bursts of up to {cliff.display} are written at full speed ({before.display}); after that writes run at "
        f"{after.display} until the drive has emptied its fast write cache (the SLC cache of a flash drive) in "
        f"idle time. Keep bulk loads under {cliff.display} at a time, or plan for the slower rate.",
        (cliff, before, after),
    )


def write_rate(f: Facts) -> Advice | None:
    """The rate limiter of "Fantastic SSD Internals and How to Learn and Use Them": write no faster than the
    buffer drains (buffer / flush window). It says no limit is needed only when writes arrive slower than that
    AND their measured latency shows no waiting (p99 within TAIL_FACTOR of p50 in the windows before the
    cliff)."""
    buffer = f.prop("P8")
    window = f.prop("P10")
    if buffer is None or not isinstance(buffer.value, int | float) or not buffer.value or window is None:
        return None
    if window.value is None:
        return Advice("write-rate", "Write rate",
                      f"Writes go through a {buffer.display} buffer (P8) that the drive does not drain in idle "
                      f"time (P10): pauses do not avoid flush spikes; spread writes evenly instead.", (buffer, window))
    rate = buffer.value / float(window.value) / 1e6
    sustained = f.finding("seq-write-over-time", "throughput_before_mb_s", "seq_write") \
        or f.finding("seq-write-over-time", "mb_s", "seq_write")
    p50 = f.finding("seq-write-over-time", "window_lat_p50_us", "seq_write_latency")
    p99 = f.finding("seq-write-over-time", "window_lat_p99_us", "seq_write_latency")
    text = (f"Writes land in a {buffer.display} buffer (P8) that the drive drains within {window.display} of "
            f"idle time (P10), about {format_value(rate, 'MB/s')} (buffer / window, the rate limiter of "
            f"{FANTASTIC}).")
    cited = [buffer, window]
    pause = f"pausing {window.display} after every {buffer.display}"
    calm = _present(p50, p99) and p99.value <= TAIL_FACTOR * p50.value
    if sustained is not None and rate >= sustained.value and calm:
        text += (f" That is faster than sequential writes arrive ({sustained.display}), and their latency shows no "
                 f"waiting (p99 {p99.display} against p50 {p50.display}), so no rate limit is needed; "
                 f"latency-critical writes can still avoid flush spikes by {pause}.")
        cited += [sustained, p50, p99]
    elif _present(p50, p99) and not calm:
        text += (f" Sequential writes{f' at {sustained.display}' if sustained is not None else ''} already wait "
                 f"for flushes: their p99 is {p99.display} against a p50 of {p50.display}.")
        if sustained is not None and sustained.value < rate:
            # Slower than buffer / window and waiting all the same: the drive drains in idle time, which a
            # continuous stream never leaves it, so pacing below that rate would not help (a profile of the
            # default simulated SSD advised it for 1,160 MB/s writes against a 1,617 MB/s drain).
            text += (f" They arrive slower than that rate and wait all the same: the drive drains its buffer in idle "
                     f"time, which a continuous stream never leaves it. For latency-critical writes pause "
                     f"{window.display} after every {buffer.display}.")
        else:
            text += (f" Pace latency-critical writes below the full write rate, or pause {window.display} after "
                     f"every {buffer.display}.")
        cited += ([sustained] if sustained is not None else []) + [p50, p99]
    else:
        text += f" Writing below that rate, or {pause}, avoids the latency spikes of a full-buffer flush."
    measured, gained = _measured_gain(f, "rate_limit_writes", "pacing writes to the flush speed")
    return Advice("write-rate", "Write rate", text + measured, (*cited, *gained))


def write_sequentially(f: Facts) -> Advice | None:
    slowdown = f.finding("random-fill", "slowdown_ratio", "random_fill")
    amplification = f.finding("random-fill", "write_amplification", "random_fill")
    reads_after = f.finding("parallelism", "random_to_sequential_fill_peak_ratio", "parallelism_mb_s")
    parts, cited = [], []
    if amplification is not None and isinstance(amplification.value, int | float):
        parts.append(f"random 4 KiB writes over the full drive made the flash write {amplification.display} the "
                     f"host's bytes (write amplification)")
        cited.append(amplification)
    if slowdown is not None:
        if slowdown.value >= 1.05:
            parts.append(f"and ran {slowdown.display} slower at the end of the fill than at its start")
        elif slowdown.value <= 0.95:
            parts.append(f"and ended the fill faster than it started (end / start speed {slowdown.display})")
        else:
            parts.append(f"and ran as fast at the end of the fill as at its start ({slowdown.display})")
        cited.append(slowdown)
    if reads_after is not None:
        effect = "slower" if reads_after.value < 0.95 else "no slower" if reads_after.value <= 1.05 else "faster"
        parts.append(f"data written in random order reads {effect} at peak than sequentially written data "
                     f"({reads_after.display} the throughput)")
        cited.append(reads_after)
    if not parts:
        return None
    worse = (amplification is not None and isinstance(amplification.value, int | float) and amplification.value > 1.5) \
        or (slowdown is not None and slowdown.value > 1.2) or (reads_after is not None and reads_after.value < 0.95)
    verdict = "Write sequentially where you can (log-structured, append-only layouts)" if worse else \
        "The write order matters little on this drive"
    return Advice("write-order", "Write order", f"{verdict}: " + "; ".join(parts) + ".", tuple(cited))


def zeroes_and_trim(f: Facts) -> Advice | None:
    parts, cited = [], []
    for state in ("empty", "full"):
        ratio = f.finding("data-dependence", f"write_zeroes_vs_zeros_{state}", "data_dependence")
        if ratio is not None and isinstance(ratio.value, int | float):
            verb = "beats" if ratio.value > 1.05 else "does not beat" if ratio.value >= 0.95 else "is slower than"
            parts.append(f"on the {state} drive Write Zeroes {verb} writing zeroes ({ratio.display} the MB/s)")
            cited.append(ratio)
    speedup = f.finding("trim-before-overwrite", "overwrite_speedup", "trim")
    without = f.finding("trim-before-overwrite", "write_amplification_overwrite", "trim")
    with_trim = f.finding("trim-before-overwrite", "write_amplification_trim_first", "trim")
    if speedup is not None:
        parts.append(f"discarding a region before overwriting it made the overwrite {speedup.display} as fast")
        cited.append(speedup)
    if _present(without, with_trim):
        parts.append(f"write amplification {'fell' if with_trim.value < without.value else 'went'} from "
                     f"{without.display} to {with_trim.display} with the discard")
        cited += [without, with_trim]
    return _compose("zeroes-trim", "Write Zeroes and TRIM", "Zeroing and discarding: ", parts, cited)


def sustained_random_writes(f: Facts) -> Advice | None:
    burst = f.finding("burst-vs-steady", "burst_iops", "burst")
    steady = f.finding("burst-vs-steady", "steady_iops", "burst")
    drop = f.finding("burst-vs-steady", "drop_bytes", "burst")
    if not _present(burst, steady):
        return None
    text = (f"Random 4 KiB writes at QD 32 start at {burst.display} and settle at {steady.display}: size a "
            f"write-heavy service for the steady figure, not the datasheet's burst.")
    cited = [burst, steady]
    if drop is not None:
        text += f" The burst lasted {drop.display}."
        cited.append(drop)
    return Advice("sustained-random-writes", "Sustained writes", text, tuple(cited))


RULES: tuple[Rule, ...] = (
    queue_depth_latency, queue_depth_throughput, request_size, alignment, read_sizes, write_cliff,
    sustained_random_writes, write_rate, write_sequentially, zeroes_and_trim,
)


def build_guidance(record: dict[str, Any]) -> list[dict[str, Any]]:
    facts = Facts(record)
    return [advice.to_json() for rule in RULES if (advice := rule(facts)) is not None]
