"""The summary card: the handful of numbers a datasheet gives, measured — with ✓/✗ against the datasheet's
figures when the user passes them (``--spec seq_read=3500MB/s,random_read_iops=500k``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..units import format_size, parse_duration_ns, parse_size
from .cost import cost_rows
from .facts import Evidence, Facts, format_percent, format_value

# A measured figure within this share of the datasheet's "up to" figure meets it: datasheets round, and
# the card should flag a drive that falls clearly short, not one 3 % under a marketing number.
SPEC_TOLERANCE = 0.10


@dataclass(frozen=True)
class CardItem:
    key: str
    label: str
    unit: str  # the unit values are compared in (and --spec is converted to)
    higher_is_better: bool
    sources: tuple[tuple[str, str], ...]  # (experiment or "probes", finding or property), first found wins
    kinds: tuple[str, ...] = ("flash", "hdd")  # the targets the row is shown for: a flash drive, a hard disk


FLASH, HDD = ("flash",), ("hdd",)
ITEMS = (
    CardItem("qd1_read_latency", "QD 1 4 KiB random read latency (mean)", "us", False,
             (("qd1-baseline", "random_read_lat_mean_us"),), FLASH),
    CardItem("access_time", "Average access time: seek + rotation (4 KiB random read, QD 1, whole disk)", "us", False,
             (("zoning", "random_read_lat_mean_us"),), HDD),
    CardItem("random_read_iops", "Peak 4 KiB random read IOPS", "IOPS", True, (("qd-sweep", "peak_iops"),), FLASH),
    CardItem("random_read_iops_qd1", "4 KiB random read IOPS at QD 1 (whole disk)", "IOPS", True,
             (("zoning", "random_read_iops_qd1"),), HDD),
    CardItem("random_read_iops_qd32", "4 KiB random read IOPS at QD 32 (whole disk)", "IOPS", True,
             (("zoning", "random_read_iops_qd32"),), HDD),
    CardItem("random_write_iops", "4 KiB random write IOPS (QD 32)", "IOPS", True,
             (("corners", "rnd4k_q32t1_write_iops"),)),
    CardItem("seq_read", "Sequential read", "MB/s", True,
             (("bs-sweep", "sequential_peak_mb_s"), ("seq-read-over-time", "mb_s")), FLASH),
    CardItem("outer_seq_read", "Sequential read, outer zone (start of the disk)", "MB/s", True,
             (("zoning", "outer_mb_s"),), HDD),
    CardItem("inner_seq_read", "Sequential read, inner zone (end of the disk)", "MB/s", True,
             (("zoning", "inner_mb_s"),), HDD),
    CardItem("seq_write", "Sequential write", "MB/s", True,
             (("seq-write-over-time", "throughput_before_mb_s"), ("seq-write-over-time", "mb_s"),
              ("bs-sweep-write", "sequential_peak_mb_s")), FLASH),
    CardItem("write_cliff", "Write cliff (bytes at full speed)", "B", True,
             (("seq-write-over-time", "cliff_bytes"),), FLASH),
    CardItem("write_cache", "Write cache (bytes taken at the cache's rate)", "B", True,
             (("seq-write-over-time", "cliff_bytes"),), HDD),
    CardItem("write_buffer", "Write buffer (P8)", "B", True, (("probes", "P8"),), FLASH),
    CardItem("flush_window", "Idle flush window (P10)", "s", False, (("probes", "P10"),), FLASH),
    CardItem("page_size", "Page size (P1)", "B", True, (("probes", "P1"),), FLASH),
)
# The four corners of CrystalDiskMark, read and write, under the card: (label, finding prefix, metric, unit).
CORNERS = (("SEQ1M Q8T1", "seq1m_q8t1", "mb_s", "MB/s"), ("SEQ1M Q1T1", "seq1m_q1t1", "mb_s", "MB/s"),
           ("RND4K Q32T1", "rnd4k_q32t1", "iops", "IOPS"), ("RND4K Q1T1", "rnd4k_q1t1", "iops", "IOPS"))
SPEC_KEYS = {item.key: item for item in ITEMS}


def parse_spec(text: str | None) -> dict[str, dict[str, Any]]:
    """``seq_read=3500MB/s,seq_write=3.3GB/s,random_read_iops=500k,qd1_read_latency=80us,write_cliff=40GB``
    into ``{key: {"value", "unit", "given"}}`` in the card's units; a bad item names itself and the fix."""
    spec: dict[str, dict[str, Any]] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, sep, given = item.partition("=")
        key, given = key.strip(), given.strip()
        if not sep or key not in SPEC_KEYS:
            raise UsageError(f"--spec: '{item}' is not KEY=VALUE with KEY one of {', '.join(SPEC_KEYS)}")
        card = SPEC_KEYS[key]
        spec[key] = {"value": _spec_value(card, given, item), "unit": card.unit, "given": given}
    return spec


_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKMG]?)(B|iB)?/s\s*$")
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKM]?)\s*(IOPS)?\s*$", re.IGNORECASE)


def _spec_value(card: CardItem, given: str, item: str) -> float:
    try:
        if card.unit == "MB/s":
            match = _RATE.match(given)
            if not match:
                raise ValueError
            scale = {"": 1e-6, "k": 1e-3, "K": 1e-3, "M": 1, "G": 1e3}[match.group(2)]
            if match.group(3) == "iB":
                scale *= {"": 1, "k": 1.024, "K": 1.024, "M": 1.048576, "G": 1.073741824}[match.group(2)]
            return float(match.group(1)) * scale
        if card.unit == "IOPS":
            match = _COUNT.match(given)
            if not match:
                raise ValueError
            return float(match.group(1)) * {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[match.group(2)]
        if card.unit == "us":
            return parse_duration_ns(given, f"--spec {card.key}") / 1e3
        if card.unit == "s":
            return parse_duration_ns(given, f"--spec {card.key}") / 1e9
        return float(parse_size(given, f"--spec {card.key}"))
    except (ValueError, KeyError):
        example = {"MB/s": "3500MB/s", "IOPS": "500k", "us": "80us", "s": "50ms", "B": "40GB"}[card.unit]
        raise UsageError(f"--spec: cannot read '{item}'; write e.g. {card.key}={example}") from None


def build_card(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The card's rows for the target's kind: measured value (or why there is none), its source, and the
    datasheet check (``verdict``: ``✓`` or ``✗ 1,650 MB/s, 18 % below 2,000 MB/s``)."""
    facts = Facts(record)
    spec = record.get("spec") or {}
    kind = "hdd" if facts.rotational else "flash"
    rows = []
    for item in ITEMS:
        if kind not in item.kinds:
            continue
        evidence = _first(facts, item)
        given = spec.get(item.key)
        row: dict[str, Any] = {
            "key": item.key, "label": item.label, "value": None, "unit": item.unit, "display": None,
            "source": None, "figure": None, "spec": given, "meets_spec": None, "detail": None,
            "spec_display": format_value(given["value"], item.unit) if given else None, "verdict": None,
        }
        if item.key == "flush_window" and _no_write_buffer(facts):
            row["display"] = "none (write-through)"
            rows.append(row)
            continue
        if evidence is not None:
            row.update(value=evidence.value, display=evidence.display, source=f"{evidence.source}/{evidence.finding}",
                       figure=evidence.figure)
            row["detail"] = _detail(facts, item, evidence)
            if given is not None and isinstance(evidence.value, int | float):
                row["meets_spec"] = _meets(item, float(evidence.value), given["value"])
                row["verdict"] = _verdict(item, float(evidence.value), given["value"], row["meets_spec"])
        else:
            row["display"] = _why_missing(facts, item)
        rows.append(row)
    # The price per unit of what was measured, when the user gave a price (--price / --price-per-gb).
    for cost in cost_rows(record, rows):
        rows.append({**cost, "source": "price", "figure": None, "spec": None, "meets_spec": None,
                     "spec_display": None, "verdict": None})
    return rows


def corner_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """CrystalDiskMark's four corners as measured by the ``corners`` experiment: one row per test, read and
    write; empty when the suite did not run it."""
    facts = Facts(record)
    rows = []
    for label, prefix, metric, _unit in CORNERS:
        read = facts.finding("corners", f"{prefix}_read_{metric}", "corners")
        write = facts.finding("corners", f"{prefix}_write_{metric}", "corners")
        if read is None and write is None:
            continue
        rows.append({"test": label, "read": read.display if read else "-", "write": write.display if write else "-",
                     "figure": (read or write).figure})
    return rows


def _detail(facts: Facts, item: CardItem, evidence: Evidence) -> str | None:
    if item.key == "random_read_iops":
        qd = facts.finding("qd-sweep", "peak_qd")
        return f"at {qd.display}" if qd else None
    if item.key == "seq_write" and evidence.finding == "throughput_before_mb_s":
        return "before the write cliff"
    if item.key == "write_cliff":
        share = facts.finding("seq-write-over-time", "cliff_pct_of_capacity")
        return f"{share.display} of capacity" if share else None
    if item.key == "write_cache":
        before = facts.finding("seq-write-over-time", "throughput_before_mb_s")
        after = facts.finding("seq-write-over-time", "throughput_after_mb_s")
        return f"at {before.display}; the platters then write {after.display}" if before and after else None
    if item.key == "random_write_iops":
        span = facts.param("corners", "span")
        return f"over {format_size(span)}" if span else None
    if item.key == "inner_seq_read":
        ratio = facts.finding("zoning", "inner_to_outer_ratio")
        return f"{ratio.display} the outer rate" if ratio else None
    return None


def _no_write_buffer(facts: Facts) -> bool:
    """P8 found no write buffer: writes go straight to the media, so there is no flush window to speak of."""
    buffer = facts.properties.get("P8")
    return buffer is not None and buffer.get("value") in (0, None) and buffer.get("answer") is not None


def _verdict(item: CardItem, measured: float, spec: float, meets: bool) -> str:
    """``✓``, or ``✗`` with the measured figure and how far it is from the datasheet's."""
    if meets:
        return f"{format_value(spec, item.unit)} ✓"
    shown, target = format_value(measured, item.unit), format_value(spec, item.unit)
    share = abs(measured - spec) / spec * 100 if spec else float("nan")
    side = "below" if item.higher_is_better else "above"
    return f"✗ {shown}, {format_percent(share)} {side} {target}"


def _first(facts: Facts, item: CardItem) -> Evidence | None:
    for source, name in item.sources:
        evidence = facts.prop(name) if source == "probes" else facts.finding(source, name)
        if evidence is not None and isinstance(evidence.value, int | float) and not isinstance(evidence.value, bool):
            return evidence
    return None


def _meets(item: CardItem, measured: float, spec: float) -> bool:
    if item.higher_is_better:
        return measured >= spec * (1 - SPEC_TOLERANCE)
    return measured <= spec * (1 + SPEC_TOLERANCE)


def _why_missing(facts: Facts, item: CardItem) -> str:
    """Say why a figure is absent: not measured by this suite, or measured and not there (no cliff found)."""
    ran = [source for source, _ in item.sources if (source == "probes" and facts.properties) or facts.has(source)]
    if not ran and all(source == "probes" for source, _ in item.sources) and facts.rotational:
        return "not applicable (a rotating disk)"
    if not ran:
        return "not measured in this suite"
    if item.key in ("write_cliff", "write_cache"):
        return "none found in the bytes written"
    if item.key == "write_buffer":
        return "none found"
    if item.key == "flush_window" and "P10" in facts.properties:
        return "does not flush when idle"
    return "not found"
