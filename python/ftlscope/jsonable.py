"""Values as JSON that any reader takes: the summaries, findings, records and the store's JSON columns all
go through :func:`plain`, so numpy scalars become Python numbers, NaN and infinities become null (plain JSON
has no NaN), tuples become lists and paths become text."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def plain(value: Any) -> Any:
    """``value`` with every part JSON can hold as it is: recursively through dicts, lists and tuples."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: Path, data: Any) -> Path:
    """``data`` as indented JSON in ``path``; anything :func:`plain` leaves that JSON cannot hold is written as
    its text."""
    path.write_text(json.dumps(plain(data), indent=2, default=str) + "\n")
    return path
