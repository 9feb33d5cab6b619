"""Sizes and durations as people type them.

Sizes follow device-model.md: ``KiB``/``MiB``/``GiB``/``TiB`` are binary, ``KB``/``MB``/``GB``/``TB``
decimal; fio's single letters (``4k``, ``1m``, ``2g``) are binary, as fio users expect. Durations take
``ns``, ``us``, ``ms``, ``s``, ``m``, ``h`` (a bare number is seconds).

The flags fio also has (``run``'s ``--bs``, ``--offset``, ``--size``, ``--rate`` and fio job files) read sizes
as fio does (:func:`parse_fio_size`): fio's HOWTO ("Parameter types", ``int``; option ``kb_base``) makes the
suffix case-insensitive and the trailing ``B`` optional, so with its default ``kb_base=1024`` ``4k``,
``4kb``, ``4kB`` and ``4KB`` are all 4096, and with ``kb_base=1000`` they are 4000. fio's default also reads
the IEC forms backwards (``4KiB`` = 4000, kept for its old scripts); ftlscope keeps ``KiB``/``MiB``/... binary
under either base, which is what fio means by them with ``kb_base=1000`` and what ftlscope always documented.
"""

from __future__ import annotations

import re
from fractions import Fraction

from .errors import UsageError

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "m": 1 << 20,
    "g": 1 << 30,
    "t": 1 << 40,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}

_TIME_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "": 10**9, "m": 60 * 10**9,
               "min": 60 * 10**9, "h": 3600 * 10**9}

_NUMBER = re.compile(r"^\s*([-+]?)([0-9]*\.?[0-9]+)\s*([a-zA-Zµ]*)\s*$")

# The engine keeps byte counts, offsets and nanoseconds as unsigned 64-bit integers.
U64_MAX = 2**64 - 1


def parse_size(text: str | int, what: str = "size", *, minimum: int = 0, maximum: int = U64_MAX) -> int:
    """Bytes in ``text`` (``4k``, ``4KiB``, ``1GB``, ``512``); raises UsageError naming ``what`` when the text
    is not a size or the value lies outside ``minimum`` .. ``maximum``."""
    if isinstance(text, int):
        value = Fraction(text)
    else:
        match = _NUMBER.match(str(text))
        unit = match.group(3).lower() if match else None
        if not match or unit not in _SIZE_UNITS:
            raise UsageError(f"{what}: cannot read '{text}' as a size; write e.g. 4k, 128KiB, 1GiB or 500GB")
        # Exact arithmetic: 4.1MB is 4,100,000 bytes, not 4099999.9999999995.
        value = Fraction(match.group(1) + match.group(2)) * _SIZE_UNITS[unit]
    if value.denominator != 1:
        raise UsageError(f"{what}: '{text}' is not a whole number of bytes")
    if not minimum <= value <= maximum:
        raise UsageError(f"{what}: '{text}' is out of range; give {_size_range(minimum, maximum)}")
    return int(value)


_PREFIX_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_fio_size(text: str | int, what: str = "size", kb_base: int = 1024, *, minimum: int = 0,
                   maximum: int = U64_MAX) -> int:
    """Bytes in ``text`` read as fio reads an ``int`` option (see the module docstring): ``4k``/``4kb``/``4KB``
    are ``4 * kb_base``; ``4KiB`` is 4096 whatever the base. Raises UsageError naming ``what`` when the text is
    not a size or the value lies outside ``minimum`` .. ``maximum``."""
    if kb_base not in (1000, 1024):
        raise UsageError(f"kb_base: '{kb_base}' is not 1000 or 1024")
    if isinstance(text, int):
        value = Fraction(text)
    else:
        match = _NUMBER.match(str(text))
        unit = match.group(3).lower() if match else ""
        unit = unit.removesuffix("b")
        iec = unit.endswith("i")
        prefix = unit.removesuffix("i")
        if not match or prefix not in _PREFIX_POWER or (iec and not prefix):
            raise UsageError(f"{what}: cannot read '{text}' as a size; write e.g. 4k, 128KiB, 1g or 4096 "
                             "(fio's units: k, kb and KB are 1024)")
        value = Fraction(match.group(1) + match.group(2)) * (1024 if iec else kb_base) ** _PREFIX_POWER[prefix]
    if value.denominator != 1:
        raise UsageError(f"{what}: '{text}' is not a whole number of bytes")
    if not minimum <= value <= maximum:
        raise UsageError(f"{what}: '{text}' is out of range; give {_size_range(minimum, maximum)}")
    return int(value)


def _size_range(minimum: int, maximum: int) -> str:
    low = "0" if minimum == 0 else f"{minimum} B" if minimum < 1024 else format_size(minimum)
    high = f"{maximum} B" if maximum >= U64_MAX else f"{maximum} B ({format_size(maximum)})"
    return f"a size from {low} to {high}"


def parse_duration_ns(text: str | int | float, what: str = "duration", *, minimum: int = 0,
                      maximum: int = U64_MAX) -> int:
    """Nanoseconds in ``text`` (``10s``, ``100ms``, ``50us``, ``1.5``); raises UsageError naming ``what`` when
    the text is not a duration or the value lies outside ``minimum`` .. ``maximum`` nanoseconds."""
    if isinstance(text, (int, float)):
        value = int(Fraction(text) * 10**9) if isinstance(text, int) else round(text * 10**9)
    else:
        match = _NUMBER.match(str(text))
        unit = match.group(3).lower() if match else None
        if not match or unit not in _TIME_UNITS:
            raise UsageError(f"{what}: cannot read '{text}' as a duration; write e.g. 10s, 250ms or 50us")
        value = round(Fraction(match.group(1) + match.group(2)) * _TIME_UNITS[unit])
    if not minimum <= value <= maximum:
        low = "0" if minimum == 0 else format_ns(minimum)
        high = f"{maximum / 1e9:.0f} s (about {maximum / 1e9 / 3.156e7:.0f} years)" if maximum >= 10**15 \
            else format_ns(maximum)
        raise UsageError(f"{what}: '{text}' is out of range; give a duration from {low} to {high}")
    return value


def format_size(n: float) -> str:
    """``4096`` -> ``4 KiB``, ``1.5e9`` -> ``1.40 GiB``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.2f} {unit}"
    return f"{n:.0f} B"


def format_ns(ns: float) -> str:
    """A latency in the unit that reads best: ``812 ns``, ``85.3 µs``, ``12.1 ms``, ``3.20 s`` (the µ sign, as the
    report writes microseconds; one terminal column wide, so tables still align)."""
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"
