"""Guidance across drives (``ftlscope compare``): which of two profiled drives suits which measured workload and
why — the question of "Solid State Disks vs Magnetic Disks: Making the right choice" (SSD or hard disk, for my
file system, scheduler and application), answered from the system suite's findings.

Each rule compares one workload's findings of the two runs and cites them (every number in its text is an
:class:`~.facts.Evidence` display string, so the text cannot drift from the findings). A rule whose premise does
not hold stays silent: "X suits random reads" only when X is clearly faster (:data:`CLEAR`), "both suit it"
only when neither is; a rule whose evidence is missing on either side says nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .cost import format_money
from .facts import Evidence, Facts, format_ratio

# One drive suits a workload better when it is at least this many times as fast; under it the two are alike.
CLEAR = 1.5
# A disk's zoning: the outer zone at least this many times the inner one (the check); flat within 10 %.
ZONED = 1.5
FLAT = 0.10
# The choice of scheduler matters on a drive when the best is at least this many times the worst.
SCHEDULER_MATTERS = 1.2
# Past their limit, clients fell behind unevenly on one drive when its std of client rates is this many times
# the other's (the thesis's Figures 4.16-4.18: the disk starves some clients, the SSD slows all a little).
UNEVEN = 2.0
THESIS = '"Solid State Disks vs Magnetic Disks: Making the right choice"'


@dataclass(frozen=True)
class Run:
    label: str
    facts: Facts


@dataclass(frozen=True)
class Cited:
    run: str
    evidence: Evidence

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, **self.evidence.to_json()}


@dataclass(frozen=True)
class Advice:
    rule: str
    topic: str
    text: str
    evidence: tuple[Cited, ...]

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "topic": self.topic, "text": self.text,
                "evidence": [c.to_json() for c in self.evidence]}


Rule = Callable[[Run, Run], "Advice | None"]


def _pair(a: Run, b: Run, experiment: str, name: str) -> tuple[Evidence, Evidence] | None:
    ea, eb = a.facts.finding(experiment, name), b.facts.finding(experiment, name)
    if ea is None or eb is None or not all(isinstance(e.value, int | float) for e in (ea, eb)):
        return None
    return ea, eb


def _ordered(a: Run, b: Run, ea: Evidence, eb: Evidence) -> tuple[Run, Evidence, Run, Evidence]:
    """(faster run, its evidence, slower run, its evidence)."""
    return (a, ea, b, eb) if ea.value >= eb.value else (b, eb, a, ea)


def _faster_rule(rule: str, topic: str, experiment: str, name: str, workload: str, why: str) -> Rule:
    """``X suits <workload>`` when X's finding is at least CLEAR times Y's; silent otherwise."""
    def apply(a: Run, b: Run) -> Advice | None:
        pair = _pair(a, b, experiment, name)
        if pair is None:
            return None
        fast, ef, slow, es = _ordered(a, b, *pair)
        if es.value <= 0 or ef.value / es.value < CLEAR:
            return None
        text = (f"{fast.label} suits {workload}: {ef.display} against {slow.label}'s {es.display}, "
                f"{format_ratio(ef.value / es.value)} as fast ({why}).")
        return Advice(rule, topic, text, (Cited(fast.label, ef), Cited(slow.label, es)))
    return apply


def _alike_rule(rule: str, topic: str, experiment: str, name: str, workload: str) -> Rule:
    """``both suit <workload>`` when neither is CLEAR times the other; silent otherwise."""
    def apply(a: Run, b: Run) -> Advice | None:
        pair = _pair(a, b, experiment, name)
        if pair is None:
            return None
        fast, ef, slow, es = _ordered(a, b, *pair)
        if es.value <= 0 or ef.value / es.value >= CLEAR:
            return None
        text = (f"For {workload} either drive will do: {fast.label} {ef.display}, {slow.label} {es.display} "
                f"(within {format_ratio(CLEAR)} of each other), so choose by capacity and price.")
        return Advice(rule, topic, text, (Cited(fast.label, ef), Cited(slow.label, es)))
    return apply


FS = "fs-impact"
random_reads = _faster_rule(
    "random-reads", "Random reads", FS, "random_read_best_mb_s",
    "random reads on a file system (databases, many small files, searches)",
    "4 KiB random reads at QD 1 on a file, each drive's best file system")
random_writes = _faster_rule(
    "random-writes", "Random writes", FS, "random_write_best_mb_s",
    "random writes on a file system (databases, mail spools, virtual machine images)",
    "4 KiB random writes at QD 1 on a file, each drive's best file system")
sequential_reads = _faster_rule(
    "sequential-reads", "Sequential reads", FS, "sequential_read_best_mb_s",
    "large sequential reads (media, backups, scans)", "1 MiB sequential reads on a file, each drive's best")
sequential_reads_alike = _alike_rule("sequential-reads-alike", "Sequential reads", FS, "sequential_read_best_mb_s",
                                     "large sequential reads (media, backups, scans)")
sequential_writes = _faster_rule(
    "sequential-writes", "Sequential writes", FS, "sequential_write_best_mb_s",
    "large sequential writes (logs, recordings, backups)", "1 MiB sequential writes on a file, each drive's best")
sequential_writes_alike = _alike_rule("sequential-writes-alike", "Sequential writes", FS,
                                      "sequential_write_best_mb_s", "large sequential writes (logs, recordings)")


def zoning(a: Run, b: Run) -> Advice | None:
    """A zoned hard disk (rotational, outer at least ZONED times inner) against a flat flash drive (within FLAT).
    A flash drive whose reads vary across the range is not zoned (its unwritten space reads at another speed
    than its written data), and a disk measured over its outer zone alone reads flat: both keep the rule silent."""
    pairs = [(run, run.facts.finding("zoning", "inner_to_outer_ratio"), run.facts.finding("zoning", "outer_mb_s"),
              run.facts.finding("zoning", "inner_mb_s")) for run in (a, b)]
    if any(None in p[1:] for p in pairs):
        return None
    zoned = [p for p in pairs if p[0].facts.rotational and p[1].value > 0 and 1 / p[1].value >= ZONED]
    flat = [p for p in pairs if not p[0].facts.rotational and abs(1 - p[1].value) <= FLAT]
    if len(zoned) != 1 or len(flat) != 1:
        return None
    (z, zr, zo, zi), (f, fr, _, _) = zoned[0], flat[0]
    text = (f"Where data lies matters on the hard disk {z.label} and not on {f.label}: {z.label} reads "
            f"{zo.display} at the start of the drive (the outer zone) and {zi.display} at its end ({zr.display} of "
            f"the outer rate), while "
            f"{f.label} reads flat ({fr.display}). On {z.label} put what must stream fastest in the first "
            f"partition ({THESIS}, zoning).")
    return Advice("zoning", "Data placement", text, (Cited(z.label, zo), Cited(z.label, zi), Cited(z.label, zr),
                                                     Cited(f.label, fr)))


def _served(run: Run) -> tuple[Evidence, bool] | None:
    served = run.facts.finding("video-streaming", "max_clients_served")
    if served is None:
        return None
    at_least = run.facts.finding("video-streaming", "first_clients_missed") is None
    return served, at_least


def video_clients(a: Run, b: Run) -> Advice | None:
    """The drive that served more streaming clients; silent when both served the same number (or neither
    reached its limit, so which serves more is unknown)."""
    sa, sb = _served(a), _served(b)
    rate = a.facts.finding("video-streaming", "rate_mb_s")
    if sa is None or sb is None or rate is None:
        return None
    if sa[1] and sb[1]:
        return None  # neither reached its limit: which serves more is not known
    (more, (em, more_open)), (fewer, (ef, _)) = ((a, sa), (b, sb)) if sa[0].value >= sb[0].value else ((b, sb), (a, sa))
    if em.value <= ef.value or (not more_open and _served(fewer)[1]):
        return None  # the same number, or the one that served fewer never reached its limit
    bound = "at least " if more_open else ""
    text = (f"{more.label} suits serving many streams: {bound}{em.display} kept "
            f"{rate.display} each (99 % of them within 99 % of the rate), against {ef.display} on {fewer.label} "
            f"(N clients each reading its own file, {THESIS} §4.4).")
    return Advice("video-clients", "Streaming", text, (Cited(more.label, em), Cited(fewer.label, ef),
                                                       Cited(a.label, rate)))


def video_overload(a: Run, b: Run) -> Advice | None:
    """Past their limits: one drive's clients fell behind unevenly (std UNEVEN times the other's)."""
    pairs = [(run, run.facts.finding("video-streaming", "missed_std_mb_s"),
              run.facts.finding("video-streaming", "missed_min_mb_s")) for run in (a, b)]
    if any(p[1] is None or p[2] is None for p in pairs):
        return None
    (even, se, _), (uneven, su, mu) = sorted(pairs, key=lambda p: p[1].value)
    if su.value <= 0 or su.value < UNEVEN * se.value:
        return None
    text = (f"Overloaded, {uneven.label} starves some clients (the std of the client rates {su.display}, the slowest "
            f"{mu.display}) where {even.label} slows all about evenly (std {se.display}): buffering on "
            f"{even.label} can plan for a predictable rate ({THESIS} §4.4.3).")
    return Advice("video-overload", "Streaming", text, (Cited(uneven.label, su), Cited(uneven.label, mu),
                                                        Cited(even.label, se)))


def schedulers(a: Run, b: Run) -> Advice | None:
    """On which drive the choice of scheduler matters (its largest spread at least SCHEDULER_MATTERS), and the
    fairest scheduler for a reader beside a writer there."""
    parts, cited = [], []
    for run in (a, b):
        spread = run.facts.finding("scheduler-impact", "scheduler_spread_max")
        if spread is None or spread.value < SCHEDULER_MATTERS:
            continue
        clause = f"on {run.label} the best scheduler gives up to {spread.display} the worst's throughput"
        cited.append(Cited(run.label, spread))
        fairest = run.facts.finding("scheduler-impact", "fairest_scheduler")
        index = run.facts.finding("scheduler-impact", "fairest_index")
        least = run.facts.finding("scheduler-impact", "least_fair_index")
        if fairest is not None and index is not None and least is not None and index.value - least.value >= 0.05:
            clause += (f", and {fairest.display} shares it most fairly between a reader and a writer (Jain's index "
                       f"{index.display} against {least.display} for the least fair)")
            cited += [Cited(run.label, fairest), Cited(run.label, index), Cited(run.label, least)]
        parts.append(clause)
    if not parts:
        return None
    text = "The I/O scheduler matters: " + "; ".join(parts) + f" ({THESIS} §4.3.3)."
    return Advice("schedulers", "I/O scheduler", text, tuple(cited))


def _money(record: dict[str, Any]) -> dict[str, Any] | None:
    price = record.get("price")
    return price if price and price.get("amount") else None


def cost(a: Run, b: Run) -> Advice | None:
    """Per GB of capacity, per 1,000 random read IOPS and per 100 MB/s of sequential reads (Table 3.1's comparison
    with the user's prices), when both runs have a price in the same currency."""
    prices = [_money(run.facts.record) for run in (a, b)]
    if None in prices or prices[0]["currency"] != prices[1]["currency"]:
        return None
    currency = prices[0]["currency"]
    measures = []
    for key, label, divisor in (("per_gb", "per GB", _capacity_gb), ("per_kiops", "per 1,000 random read IOPS",
                                                                     _kiops), ("per_100mb_s", "per 100 MB/s "
                                                                               "of sequential reads", _per_100mb)):
        sides = [divisor(run) for run in (a, b)]
        if any(s is None or s[0] <= 0 for s in sides):
            continue
        costs = [Evidence("price", f"cost_{key}", price["amount"] / s[0], f"{currency}/{key}",
                          format_money(price["amount"] / s[0], currency))
                 for price, s in zip(prices, sides, strict=True)]
        measures.append((label, costs, [s[1] for s in sides]))
    if not measures:
        return None
    parts, cited = [], []
    for label, costs, sources in measures:
        cheap = 0 if costs[0].value <= costs[1].value else 1
        runs = (a, b)
        parts.append(f"{label} {runs[cheap].label} is cheaper ({costs[cheap].display} against "
                     f"{costs[1 - cheap].display})")
        for i in (0, 1):
            cited.append(Cited(runs[i].label, costs[i]))
            if sources[i] is not None:
                cited.append(Cited(runs[i].label, sources[i]))
    text = "Cost, at the prices given: " + "; ".join(parts) + f" ({THESIS}, Table 3.1's comparison)."
    return Advice("cost", "Cost", text, tuple(cited))


def _capacity_gb(run: Run) -> tuple[float, Evidence | None] | None:
    size = (run.facts.record.get("target") or {}).get("size_bytes")
    return (size / 1e9, None) if size else None


def _kiops(run: Run) -> tuple[float, Evidence] | None:
    mb = run.facts.finding(FS, "random_read_best_mb_s")
    size = run.facts.param(FS, "random_size")
    return (mb.value * 1e6 / size / 1e3, mb) if mb is not None and size else None


def _per_100mb(run: Run) -> tuple[float, Evidence] | None:
    mb = run.facts.finding(FS, "sequential_read_best_mb_s")
    return (mb.value / 100, mb) if mb is not None else None


RULES: tuple[Rule, ...] = (
    random_reads, random_writes, sequential_reads, sequential_reads_alike, sequential_writes,
    sequential_writes_alike, zoning, video_clients, video_overload, schedulers, cost,
)


def build_compare_guidance(runs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Advice for two runs (label, record); none for another number of runs (a comparison of two drives)."""
    if len(runs) != 2:
        return []
    a, b = (Run(label, Facts(record)) for label, record in runs)
    return [advice.to_json() for rule in RULES if (advice := rule(a, b)) is not None]
