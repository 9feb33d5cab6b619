"""The ground truth of a simulated device for the ten properties (shared/device-model.md, "Ground truth for
the ten properties"), and issue 5's rule for when an answer matches it."""

from __future__ import annotations

import math
import re
import tomllib
from typing import Any

from ..units import parse_duration_ns, parse_size


def _size(text: Any) -> int:
    return parse_size(str(text).replace(" ", ""), "size") if text not in (None, "") else 0


def _seconds(text: Any) -> float | None:
    if text is None or str(text).strip().lower() in ("inf", "never", "none"):
        return None
    return parse_duration_ns(str(text).replace(" ", ""), "duration") / 1e9


def ground_truth(config: dict[str, Any] | str) -> dict[str, Any]:
    """The expected answer per property, in the units of issue 5's JSON, from a device's configuration (a
    dict, or its TOML text as ``SimDevice.config_toml`` gives it)."""
    if isinstance(config, str):
        config = tomllib.loads(config)
    geometry, mapping, nand = config["geometry"], config["mapping"], config["nand"]
    read_buffer = config.get("read_buffer", {})
    write_buffer = config.get("write_buffer", {})
    quirks = config.get("quirks", {})
    unaligned = parse_duration_ns(str(quirks.get("unaligned_size_penalty", "0us")), "penalty")
    penalties = quirks.get("read_size_penalties", []) or []
    penalised = []
    for entry in penalties:
        if isinstance(entry, dict):
            lo, hi = entry.get("min", entry.get("from")), entry.get("max", entry.get("to"))
            penalised.append([_size(lo), _size(hi)])
    return {
        "P1": _size(geometry["page_size"]),
        "P2": {"cell": str(nand["cell"]).lower(), "pattern": str(nand.get("page_pattern", ""))},
        "P3": _size(mapping["chunk_size"]),
        "P4": int(mapping["stripe_width"]),
        "P5": _layout(geometry, mapping),
        "P6": {"consistent": unaligned == 0 and not penalties, "penalised_sizes": penalised},
        "P7": _size(read_buffer.get("capacity", "0B")),
        "P8": _size(write_buffer.get("capacity", "0B")),
        # Without a write buffer a write is a program and ``parallelism`` (the buffer's insert slots) has no
        # effect: P9 is "not applicable" (None), as Table 4 leaves it blank for a write-through drive.
        "P9": int(write_buffer.get("parallelism", 1)) if _size(write_buffer.get("capacity", "0B")) else None,
        "P10": _seconds(write_buffer.get("idle_flush_window")),
    }


def _layout(geometry: dict[str, Any], mapping: dict[str, Any]) -> dict[str, int]:
    """P5's truth: channels x chips, and the groups they are pooled into (shared/device-model.md:
    ``channel_groups``) when there are fewer groups than channels."""
    out = {"channels": int(geometry["channels"]), "chips_per_channel": int(geometry["chips_per_channel"])}
    groups = int(mapping.get("channel_groups", 0) or 0)
    if 0 < groups < out["channels"]:
        out["channel_groups"] = groups
    return out


def observable_layout(truth: dict[str, int]) -> dict[str, int]:
    """The layout read timing shows: channels pooled into N groups contend as one bus per group (a unit on
    channel c waits for every unit on a channel c' with c mod N == c' mod N), so they time exactly as N channels
    of (channels x chips / N) chips. P5 is a contention measurement ("Fantastic SSD Internals and How to Learn and
    Use Them" §3: F3_strideRead reveals channel-level contention, whose stride "hints the number of channels");
    the paper found N1.6TS's pools only by a further investigation beyond the probes. So P5 is scored against
    the buses: on a drive without pools, its channels x chips."""
    groups = truth.get("channel_groups")
    if not groups:
        return {"channels": truth["channels"], "chips_per_channel": truth["chips_per_channel"]}
    return {"channels": groups, "chips_per_channel": truth["channels"] * truth["chips_per_channel"] // groups}


def matches(pid: str, value: Any, truth: Any) -> bool:
    """Issue 5's rule: exact for P1, P3, P5 (its buses: :func:`observable_layout`), P7 = 0 and P2's cell; P4
    within 2; byte sizes within 10 %; P9 exact, or "not applicable" (None) on a drive without a write buffer;
    P10 within a factor of 2 (or both "never"); P6's verdict."""
    if pid == "P9" and (value is None or truth is None):
        return value is None and truth is None
    if value is None and pid not in ("P10",):
        return False
    if pid in ("P1", "P3"):
        return int(value) == int(truth)
    if pid == "P2":
        return isinstance(value, dict) and str(value.get("cell", "")).lower() == truth["cell"]
    if pid == "P4":
        return abs(int(value) - int(truth)) <= 2
    if pid == "P5":
        seen = observable_layout(truth)
        return isinstance(value, dict) and value.get("channels") == seen["channels"] and \
            value.get("chips_per_channel") == seen["chips_per_channel"]
    if pid == "P6":
        return isinstance(value, dict) and bool(value.get("consistent")) == truth["consistent"]
    if pid in ("P7", "P8"):
        if truth == 0 or value == 0:
            return int(value) == int(truth)
        return abs(int(value) - truth) <= 0.1 * truth
    if pid == "P9":
        return int(value) == int(truth)
    if pid == "P10":
        if value is None or truth is None:
            return value is None and truth is None
        return truth / 2 <= float(value) <= truth * 2 and math.isfinite(float(value))
    raise ValueError(f"unknown property {pid}")


def describe(pid: str, value: Any) -> str:
    """A value as the property table prints it (4 KiB, "tlc 1L 1M 1H", 8x4, 0.04 s, never)."""
    from ..units import format_size

    if value is None:
        return {"P10": "never", "P9": "— (no buffer)"}.get(pid, "?")
    if pid in ("P1", "P3", "P7", "P8"):
        return "none" if value == 0 and pid in ("P7", "P8") else format_size(value)
    if pid == "P2":
        return f"{value.get('cell', '?').upper()} {value.get('pattern', '')}".strip()
    if pid == "P5":
        text = f"{value.get('channels')} ch x {value.get('chips_per_channel')} chips"
        return text + (f" in {value['channel_groups']} groups" if value.get("channel_groups") else "")
    if pid == "P6":
        if value.get("consistent"):
            return "consistent"
        ranges = ", ".join(f"{format_size(a)}-{format_size(b)}" for a, b in value.get("penalised_sizes", []))
        return f"inconsistent ({ranges})" if ranges else "inconsistent"
    if pid == "P10":
        return f"{float(value):.3g} s"
    return re.sub(r"\s+", " ", str(value))


# ---- Kelpie's Table 4 notation (issue 16): the details of P8-P10 beside their values -------------------------------

NOTATION_KEYS = {
    "P8": ("partial_flush", "capacity_ios", "second_level", "second_level_capacity_ios"),
    "P9": ("serialized_when_idle",),
    "P10": ("second_level_window",),
}


def notation_truth(config: dict[str, Any] | str) -> dict[str, dict[str, Any]]:
    """The details Table 4 writes beside P8-P10, from a device's configuration: a partial flush ("p"), a flush
    after a number of write commands, a second level ("a | b", its own command count "†"), serialised writes
    ("✗") and the second level's idle window. 0 / None = absent; ``second_level_window`` is None for "never" and
    absent without a second level."""
    if isinstance(config, str):
        config = tomllib.loads(config)
    wb = config.get("write_buffer", {})
    second = _size(wb.get("second_level", "0B"))
    out: dict[str, dict[str, Any]] = {
        "P8": {"partial_flush": _size(wb.get("partial_flush", "0B")), "capacity_ios": int(wb.get("capacity_ios", 0)),
               "second_level": second,
               "second_level_capacity_ios": int(wb.get("second_level_capacity_ios", 0)) if second else 0},
        "P9": {"serialized_when_idle": bool(wb.get("serialize_when_idle", False))},
        "P10": {},
    }
    if second and _size(wb.get("capacity", "0B")):
        out["P10"]["second_level_window"] = _seconds(wb.get("second_level_idle_flush_window", "inf"))
    return out


def notation_matches(key: str, value: Any, truth: Any) -> bool:
    """Sizes within 10 %, counts within 10 %, flags exact, the second level's window within a factor of 2 (as
    P10's own), absent (0 / None / False) only against absent."""
    if key == "serialized_when_idle":
        return bool(value) == bool(truth)
    if key == "second_level_window":
        return matches("P10", value, truth)
    if not truth or not value:
        return not truth and not value
    return abs(float(value) - float(truth)) <= 0.1 * float(truth)


def notation(pid: str, value: Any, extra: dict[str, Any] | None) -> str:
    """An answer as Table 4 writes it: ``11.50 MiB p 7.50 MiB | 406 MiB``, ``20 MiB | 126.50 MiB †1280``,
    ``4 ✗``, ``200 ms | 2.5 s``, ``∞``. Without details, :func:`describe`."""
    from ..units import format_size

    extra = extra or {}
    if pid == "P8" and value:
        text = format_size(int(value))
        if extra.get("partial_flush"):
            text += f" p {format_size(int(extra['partial_flush']))}"
        if extra.get("capacity_ios"):
            text += f" or {int(extra['capacity_ios'])} writes"
        if extra.get("second_level"):
            text += f" | {format_size(int(extra['second_level']))}"
            if extra.get("second_level_capacity_ios"):
                text += f" †{int(extra['second_level_capacity_ios'])}"
        return text
    if pid == "P9" and value is not None:
        return f"{int(value)} ✗" if extra.get("serialized_when_idle") else str(int(value))
    if pid == "P10":
        def window(v: Any) -> str:
            return "∞" if v is None else _duration(float(v))
        if value == 0 and not extra:
            return "— (no buffer)"
        if "second_level_window" in extra:
            return f"{window(value)} | {window(extra['second_level_window'])}"
        return window(value)
    return describe(pid, value)


def has_notation(pid: str, extra: dict[str, Any] | None) -> bool:
    """Whether an answer carries a Table 4 detail beyond its value (a partial flush, a second level, ...)."""
    extra = extra or {}
    return any(extra.get(k) for k in NOTATION_KEYS.get(pid, ()) if k != "second_level_window") or \
        "second_level_window" in extra


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"
