"""The probed properties Newt's optimizations use, read from a stored profile (``--from-profile RUN``).

P1 (page size) and P6 (penalised read sizes) serve read-size alignment; P8 (write buffer capacity) and P10 (idle
flush window) give the write rate-limiting shim its flush speed, P8 / P10 ("Fantastic SSD Internals and How to
Learn and Use Them" §5.2: 11.5 MB / 200 ms = 57.5 MB/s on N2T-I). Values are in the probes' units: bytes and
seconds. A property a profile did not probe, or could not answer, is None.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from ..store import RunStore

FLAG = "--from-profile"


@dataclass(frozen=True)
class NewtParams:
    """``page_size`` (P1, bytes); ``penalised_reads``: the read sizes P6 found penalised, as inclusive
    (lo, hi) byte ranges ([] on a consistent drive, None when P6 was not probed); ``unaligned_penalty_ns``: what
    P6 found a read that is not a page multiple costs extra (0 when none); ``buffer_bytes`` (P8; 0 = no write
    buffer, a write-through drive); ``flush_window_s`` (P10; ``math.inf`` = the buffer never drains while idle,
    0 = nothing to drain); ``source``: the run they came from (its id), or ``"flags"``."""

    page_size: int | None = None
    penalised_reads: tuple[tuple[int, int], ...] | None = None
    unaligned_penalty_ns: float | None = None
    buffer_bytes: int | None = None
    flush_window_s: float | None = None
    source: str = "flags"

    @classmethod
    def from_profile(cls, ref: str, store: RunStore | None = None) -> NewtParams:
        """The properties of the stored profile ``ref`` (a run id, a unique prefix, ``latest``, or a profile
        directory). A run that does not exist, or holds no probed properties, is a :class:`UsageError` that
        names ``--from-profile``."""
        from ..store import RunStore

        store = store if store is not None else RunStore(create=False)
        try:
            frame = store.properties([ref])
        except UsageError as exc:
            raise UsageError(f"{FLAG} {ref}: {exc.message}") from None
        if frame.empty:
            raise UsageError(f"{FLAG} {ref}: that run is not a profile with probed properties (P1-P10); profile "
                             "the drive with its probes ('ftlscope profile', or 'ftlscope probe') and give that run")
        values = {row.property: _value(row.value, row.value_json) for row in frame.itertuples()}
        p6 = values.get("P6")
        penalised = None
        penalty = None
        if isinstance(p6, dict):
            penalised = tuple((int(lo), int(hi)) for lo, hi in p6.get("penalised_sizes") or [])
        run = store.get(ref)
        details = ((run.record.get("probes") or {}).get("properties") or {}).get("P6") or {}
        if isinstance(p6, dict):
            penalty = float(details.get("unaligned_penalty_us") or 0.0) * 1e3
        p10 = values.get("P10", _MISSING)
        if p10 is _MISSING:
            window = None
        elif p10 is None:
            window = math.inf  # P10 answers None for "never": the buffer does not drain while idle
        else:
            window = float(p10)
        return cls(
            page_size=_int(values.get("P1")),
            penalised_reads=penalised,
            unaligned_penalty_ns=penalty,
            buffer_bytes=_int(values.get("P8")),
            flush_window_s=window,
            source=run.run_id,
        )

    def flush_speed_bps(self) -> float | None:
        """P8 / P10 in bytes per second: how fast the drive digests its write buffer while idle. None when
        either is unknown, when the buffer never drains while idle (P10 infinite), or when the drive has no write
        buffer (P8 or P10 zero: write-through, nothing for the shim to pace)."""
        if not self.buffer_bytes or not self.flush_window_s or math.isinf(self.flush_window_s):
            return None
        return self.buffer_bytes / self.flush_window_s

    def write_through(self) -> bool:
        """The profile found no write buffer (P8 or P10 zero): a write-through drive, where no full-buffer flush
        can come."""
        return self.buffer_bytes == 0 or self.flush_window_s == 0

    def why_no_flush_speed(self) -> str:
        """Why :meth:`flush_speed_bps` is None, in words (empty when it is not)."""
        if self.buffer_bytes is None:
            return "P8 (write buffer capacity) was not probed"
        if self.buffer_bytes == 0 or self.flush_window_s == 0:
            return "the drive has no write buffer (P8 none: write-through), so there is no flush to avoid"
        if self.flush_window_s is None:
            return "P10 (internal flush window) was not probed"
        if math.isinf(self.flush_window_s):
            return "the write buffer never drains while idle (P10 never), so there is no flush speed to pace to"
        return ""

    def to_json(self) -> dict[str, Any]:
        return {
            "page_size": self.page_size,
            "penalised_reads": None if self.penalised_reads is None else [list(r) for r in self.penalised_reads],
            "unaligned_penalty_ns": self.unaligned_penalty_ns,
            "buffer_bytes": self.buffer_bytes,
            "flush_window_s": None if self.flush_window_s is None or math.isinf(self.flush_window_s)
            else self.flush_window_s,
            "flush_window_never": self.flush_window_s is not None and math.isinf(self.flush_window_s),
            "flush_speed_bps": self.flush_speed_bps(),
            "source": self.source,
        }


_MISSING = object()


def _value(number: Any, text: Any) -> Any:
    """A property's value from its store row: the number, else the JSON text decoded, else None."""
    if number is not None and not (isinstance(number, float) and math.isnan(number)):
        return number
    if isinstance(text, str):
        return json.loads(text)
    return None


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
