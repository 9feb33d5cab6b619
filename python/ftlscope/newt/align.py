"""Read-size alignment: the first optimisation of "Fantastic SSD Internals and How to Learn and Use Them" (§5.1).

Some drives read slower when a read's size is not a multiple of the flash page (P1), or when it falls in certain
size ranges (P6: "17-20 KB" on one of the paper's drives). The remedy is to read a little more: each read's offset
is rounded down to a page boundary and its end up to one, so it covers the same pages, and a size that then falls
in a penalised range is grown past the range (the paper's "a 20 KB read made 24 KB"). Writes, trims and flushes
are left as they are: they carry data or promises the host cannot pad.

The side effect is bytes read that nobody asked for; :class:`AlignStats` reports them.

>>> import pandas as pd
>>> trace = pd.DataFrame({"op": pd.Categorical(["read", "write"]), "offset_bytes": [512, 512],
...                       "size": [7 * 1024, 7 * 1024], "submit_ns": [0, 10]})
>>> aligned, stats = align_reads(trace, Alignment(4096))
>>> aligned["offset_bytes"].tolist(), aligned["size"].tolist()
([0, 512], [8192, 7168])
>>> stats.extra_bytes
1024
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import UsageError
from ..units import format_size
from .params import NewtParams

U32_MAX = (1 << 32) - 1


@dataclass(frozen=True)
class Alignment:
    """What the drive serves without penalty: sizes outside every ``penalised`` range (P6's ``[min, max]`` byte
    ranges, both ends penalised) and, when ``whole_pages`` (the drive penalises sizes that are not page
    multiples), multiples of ``page_size`` (P1). A size grown past a range becomes a page multiple either way."""

    page_size: int
    penalised: tuple[tuple[int, int], ...] = field(default=())
    whole_pages: bool = True

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise UsageError(f"--align-reads: a page size of {self.page_size} B cannot be aligned to; give 512 or more")
        ranges = sorted((int(lo), int(hi)) for lo, hi in self.penalised)
        for lo, hi in ranges:
            if lo > hi or lo < 0:
                raise UsageError(f"--align-reads: the penalised size range {lo}-{hi} B is empty; give ranges as "
                                 "[min, max] bytes, min <= max")
        object.__setattr__(self, "penalised", tuple(ranges))

    @property
    def changes_anything(self) -> bool:
        return self.whole_pages or bool(self.penalised)

    def describe(self) -> str:
        parts = [f"whole {format_size(self.page_size)} pages"] if self.whole_pages else []
        if self.penalised:
            parts.append("sizes past " + ", ".join(f"{format_size(lo)}-{format_size(hi)}" for lo, hi in self.penalised))
        return ", ".join(parts) or "nothing (no read size is penalised)"

    def to_json(self) -> dict[str, Any]:
        return {"page_size": self.page_size, "penalised_sizes": [list(r) for r in self.penalised],
                "whole_pages": self.whole_pages}


@dataclass(frozen=True)
class AlignStats:
    """What alignment did to a trace's reads."""

    reads: int
    changed: int
    bytes_before: int
    bytes_after: int

    @property
    def extra_bytes(self) -> int:
        return self.bytes_after - self.bytes_before

    def plus(self, other: AlignStats | None) -> AlignStats:
        """The stats of this batch and the next (``other``; None: none yet) together."""
        if other is None:
            return self
        return AlignStats(self.reads + other.reads, self.changed + other.changed,
                          self.bytes_before + other.bytes_before, self.bytes_after + other.bytes_after)

    @property
    def extra_pct(self) -> float:
        return 100.0 * self.extra_bytes / self.bytes_before if self.bytes_before else 0.0

    def describe(self) -> str:
        return (f"{self.changed:,} of {self.reads:,} reads aligned; {format_size(self.extra_bytes)} more read "
                f"({self.extra_pct:.1f} % of the reads' {format_size(self.bytes_before)})")

    def to_json(self) -> dict[str, Any]:
        return {"reads": self.reads, "changed": self.changed, "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "extra_bytes": self.extra_bytes,
                "extra_pct": round(self.extra_pct, 4)}


def served_sizes(sizes: np.ndarray, alignment: Alignment) -> np.ndarray:
    """Each size grown to the smallest size the drive serves without penalty (see :class:`Alignment`). Sizes of 0
    stay 0."""
    page = alignment.page_size
    out = np.asarray(sizes, dtype=np.int64)
    if alignment.whole_pages:
        out = -(-out // page) * page
    # Ranges ascend, and growing only moves a size up: one pass lands past every range it could meet.
    for lo, hi in alignment.penalised:
        inside = (out >= lo) & (out <= hi) & (out > 0)
        out = np.where(inside, (hi // page + 1) * page, out)
    return out


def align_columns(op: np.ndarray, offset: np.ndarray, size: np.ndarray, alignment: Alignment,
                  first_row: int = 0) -> tuple[np.ndarray, np.ndarray, AlignStats]:
    """The transform on columns (op codes as :data:`ftlscope.workload.OPS` numbers them, offsets, sizes; a
    batch of a streamed trace whose first request is number ``first_row + 1``, or a whole one): the new offsets
    and sizes (int64) and what changed. Per request, so a trace aligned batch by batch is aligned exactly as it
    is whole, and the batches' stats add up (:meth:`AlignStats.plus`) to the whole trace's."""
    from ..workload import OPS

    reads = (np.asarray(op) == OPS.index("read")) & (np.asarray(size) > 0)
    offset = np.asarray(offset).astype(np.int64)
    size = np.asarray(size).astype(np.int64)
    page = alignment.page_size
    if alignment.whole_pages:
        start = offset[reads] // page * page
        cover = -(-(offset[reads] + size[reads]) // page) * page - start
    else:
        start, cover = offset[reads], size[reads]
    new_size = served_sizes(cover, alignment)
    if len(new_size) and int(new_size.max()) > U32_MAX:
        i = int(np.flatnonzero(reads)[int(np.argmax(new_size > U32_MAX))])
        raise UsageError(f"--align-reads: request {first_row + i + 1} would grow to {int(new_size.max()):,} B, "
                         f"beyond the largest request ({U32_MAX:,} B); split it or give a smaller page size")
    new_offset, grown = offset.copy(), size.copy()
    new_offset[reads], grown[reads] = start, new_size
    stats = AlignStats(reads=int(reads.sum()),
                       changed=int(((new_offset != offset) | (grown != size))[reads].sum()),
                       bytes_before=int(size[reads].sum()), bytes_after=int(new_size.sum()))
    return new_offset, grown, stats


def align_reads(frame: pd.DataFrame, alignment: Alignment) -> tuple[pd.DataFrame, AlignStats]:
    """A copy of ``frame`` (ftlscope's trace table) whose reads have a size the drive serves without penalty;
    every other request as it was. With ``whole_pages`` the reads' offsets move down to a page boundary and their
    ends up, so each covers whole pages and still reads every byte it read before; without, offsets stay and
    only sizes in a penalised range grow. (:func:`align_columns` on the frame's columns.)"""
    from ..workload import OPS

    op = frame["op"].astype(pd.CategoricalDtype(list(OPS))).cat.codes.to_numpy()
    new_offset, grown, stats = align_columns(op, frame["offset_bytes"].to_numpy(), frame["size"].to_numpy(),
                                             alignment)
    out = frame.copy()
    out["offset_bytes"] = new_offset.astype(frame["offset_bytes"].dtype)
    out["size"] = grown.astype(frame["size"].dtype)
    out.attrs = {**frame.attrs, "ftlscope": {**frame.attrs.get("ftlscope", {}),
                                             "aligned_reads": {**alignment.to_json(), **stats.to_json()}}}
    return out, stats


def alignment_from_params(params: NewtParams) -> Alignment:
    """The alignment a profile's probe answers call for: P6's penalised ranges, and whole P1 pages when P6 found
    that sizes which are not page multiples cost more (or was not probed: then the paper's page rounding). On a
    drive whose P6 found every size served alike it changes nothing. A profile without P1 is refused (exit 2),
    naming it."""
    if not params.page_size:
        raise UsageError(f"--align-reads auto: the profile {params.source} has no page size (P1); probe it "
                         "('ftlscope probe TARGET --properties P1,P6') or give the size: --align-reads 4k")
    whole_pages = params.penalised_reads is None or bool(params.unaligned_penalty_ns)
    return Alignment(params.page_size, params.penalised_reads or (), whole_pages)


def parse_align(text: str, params: NewtParams | None) -> Alignment:
    """``--align-reads auto`` (from the profile's properties, ``params``) or ``--align-reads SIZE`` (pages of
    SIZE, no size range penalised)."""
    from ..units import parse_size

    if text == "auto":
        if params is None:
            raise UsageError("--align-reads auto: it reads the page size (P1) and penalised read sizes (P6) from a "
                             "profile; give --from-profile RUN, or the size: --align-reads 4k")
        return alignment_from_params(params)
    return Alignment(parse_size(text, "--align-reads", minimum=1, maximum=U32_MAX))


def alignment_for_replay(args: Any, notify: Callable[[str], None] | None = None) -> Alignment | None:
    """``replay --align-reads``: the alignment the flag asks for (None without it), the profile's warnings heard
    by ``notify``. The replay aligns each batch of the trace as it reads it (:func:`align_columns`), so the trace
    is never held whole for it; what it did is in the summary's ``replay.aligned_reads``."""
    text = getattr(args, "align_reads", None)
    if not text:
        return None
    ref = getattr(args, "from_profile", None)
    params = NewtParams.from_profile(ref) if ref else None
    alignment = parse_align(text, params)
    if notify:
        from .premises import forced_warnings

        for warning in forced_warnings(text, None, params):
            notify(warning)
    return alignment
