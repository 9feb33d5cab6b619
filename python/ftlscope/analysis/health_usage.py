"""What a run did to the device, from the health samples the engine took during it (at its start, every
interval, and at its end): host and media (NAND) bytes moved, write amplification, and the temperatures."""

from __future__ import annotations

from typing import Any

COUNTERS = ("host_bytes_written", "host_bytes_read", "media_bytes_written")


def run_usage(health: dict[str, Any] | None) -> dict[str, Any]:
    """One run's ``summary["health"]`` -> each counter's growth between its first and last sample (None where
    fewer than two samples hold it), and the first, last and highest temperature (°C; None where none)."""
    samples = (health or {}).get("samples") or []
    out: dict[str, Any] = {}
    for key in COUNTERS:
        values = [s[key] for s in samples if s.get(key) is not None]
        out[key] = values[-1] - values[0] if len(values) >= 2 and values[-1] >= values[0] else None
    temperatures = [s["temperature_c"] for s in samples if s.get("temperature_c") is not None]
    out["temperature_first_c"] = temperatures[0] if temperatures else None
    out["temperature_last_c"] = temperatures[-1] if temperatures else None
    out["temperature_max_c"] = max(temperatures) if temperatures else None
    return out


def total_usage(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`run_usage` of several runs in order, added up: counters summed over the runs that hold them,
    the highest temperature of all, the first and last temperature seen, and media / host bytes written."""
    out: dict[str, Any] = {}
    for key in COUNTERS:
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = sum(values) if values else None
    firsts = [r["temperature_first_c"] for r in runs if r.get("temperature_first_c") is not None]
    lasts = [r["temperature_last_c"] for r in runs if r.get("temperature_last_c") is not None]
    highs = [r["temperature_max_c"] for r in runs if r.get("temperature_max_c") is not None]
    out["temperature_first_c"] = firsts[0] if firsts else None
    out["temperature_last_c"] = lasts[-1] if lasts else None
    out["temperature_max_c"] = max(highs) if highs else None
    host, media = out["host_bytes_written"], out["media_bytes_written"]
    out["write_amplification"] = media / host if host and media is not None else None
    return out
