"""The sliding sort window every batched trace reader orders its requests in (Parquet, CSV and iolog text,
blkparse): requests come in batches roughly in arrival order and go out exactly in (arrival, tie) order, where the
tie is a run trace's ``submit_seq``, a text trace's line order or blkparse's issue order.

Each batch is merged with the rows held back, sorted (``np.lexsort``: stable), and the first rows go on; what is
held back waits for later batches whose rows may come before it. That is the whole sort whenever no row arrives
after a row that was already let go; a row that does is noticed (:class:`Unsorted`) and the caller reads the
trace whole instead. numpy's sort does the work: the window only decides how much may go.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


class Unsorted(Exception):  # noqa: N818 - a signal to the caller, not an error the user sees
    """The trace is more out of order than ``--sort`` can fix in a sliding window."""


class SortWindow:
    """Rows (a tuple of equally long numpy columns) in, the same rows out in (key, tie) order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._held: tuple[np.ndarray, ...] | None = None  # the columns, then key and tie
        self._last: tuple[int, int] | None = None  # (key, tie) of the last row let go

    def held(self) -> int:
        """Rows held back."""
        return 0 if self._held is None else len(self._held[-1])

    def push(self, cols: tuple[np.ndarray, ...], key: np.ndarray, tie: np.ndarray, *, hold: int = 0,
             before: tuple[int, int] | None = None) -> tuple[np.ndarray, ...] | None:
        """Take a batch and return the rows that may go (None if none): all but the last ``hold`` in order, and
        only those ordered before ``before`` (a (key, tie) whose row is not yet known). :class:`Unsorted` if a
        row of the batch comes before one already let go."""
        if self._last is not None and len(key) and _before(key, tie, self._last).any():
            raise Unsorted(self.path)
        batch = (*cols, key, tie)
        merged = batch if self._held is None else tuple(
            np.concatenate(pair) for pair in zip(self._held, batch, strict=True))
        order = np.lexsort((merged[-1], merged[-2]))
        merged = tuple(c[order] for c in merged)
        ready = max(len(order) - hold, 0)
        if before is not None:
            ready = min(ready, int(_before(merged[-2][:ready], merged[-1][:ready], before).sum()))
        self._held = tuple(c[ready:] for c in merged)
        if not ready:
            return None
        self._last = (int(merged[-2][ready - 1]), int(merged[-1][ready - 1]))
        return tuple(c[:ready] for c in merged[:-2])

    def rest(self) -> tuple[np.ndarray, ...] | None:
        """The rows still held, in order, at the trace's end (None if none)."""
        if not self.held():
            return None
        rest, self._held = self._held, None
        return rest[:-2]


def _before(key: np.ndarray, tie: np.ndarray, last: tuple[int, int]) -> np.ndarray:
    """Which rows come before (key, tie) ``last``."""
    return (key < last[0]) | ((key == last[0]) & (tie < last[1]))
