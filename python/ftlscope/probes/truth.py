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
        "P5": {"channels": int(geometry["channels"]), "chips_per_channel": int(geometry["chips_per_channel"])},
        "P6": {"consistent": unaligned == 0 and not penalties, "penalised_sizes": penalised},
        "P7": _size(read_buffer.get("capacity", "0B")),
        "P8": _size(write_buffer.get("capacity", "0B")),
        "P9": int(write_buffer.get("parallelism", 1)),
        "P10": _seconds(write_buffer.get("idle_flush_window")),
    }


def matches(pid: str, value: Any, truth: Any) -> bool:
    """Issue 5's rule: exact for P1, P3, P5, P7 = 0 and P2's cell; P4 within 2; byte sizes within 10 %; P9
    exact; P10 within a factor of 2 (or both "never"); P6's verdict."""
    if value is None and pid not in ("P10",):
        return False
    if pid in ("P1", "P3"):
        return int(value) == int(truth)
    if pid == "P2":
        return isinstance(value, dict) and str(value.get("cell", "")).lower() == truth["cell"]
    if pid == "P4":
        return abs(int(value) - int(truth)) <= 2
    if pid == "P5":
        return isinstance(value, dict) and value.get("channels") == truth["channels"] and \
            value.get("chips_per_channel") == truth["chips_per_channel"]
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
        return "never" if pid == "P10" else "?"
    if pid in ("P1", "P3", "P7", "P8"):
        return "none" if value == 0 and pid in ("P7", "P8") else format_size(value)
    if pid == "P2":
        return f"{value.get('cell', '?').upper()} {value.get('pattern', '')}".strip()
    if pid == "P5":
        return f"{value.get('channels')} ch x {value.get('chips_per_channel')} chips"
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
