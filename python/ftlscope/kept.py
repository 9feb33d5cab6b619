"""Results that cannot be written where the user asked are kept elsewhere, never lost (issue 14): when a
disk fills up or a mount goes away after the checks before the run passed, the outputs go to a new temporary
directory and one line (exit 1) says where."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .errors import RunError

T = TypeVar("T")


def failure(exc: OSError, where: Path | str) -> str:
    """``cannot write PATH (No space left on device)``: the file that failed, or the directory."""
    return f"cannot write {exc.filename or where} ({exc.strerror or exc})"


def write_or_keep(write: Callable[[Path], T], directory: Path, *, name: str, raw: Path | None = None) -> T:
    """``write(directory)``; when that fails with an OSError, ``write`` again into a new temporary directory
    (with a best-effort copy of ``raw``, the files written during the run) and raise RunError saying where."""
    try:
        return write(directory)
    except OSError as exc:
        problem = failure(exc, directory)
    kept = Path(tempfile.mkdtemp(prefix="ftlscope-kept-")) / name
    kept.mkdir(parents=True)
    copied = ""
    if raw is not None and raw.is_dir():
        try:
            shutil.copytree(raw, kept / raw.name, dirs_exist_ok=True)
        except (OSError, shutil.Error):
            copied = f"; the raw files stay in {raw}/ as far as they were written"
    try:
        write(kept)
    except OSError as again:
        raise RunError(f"{problem}; keeping the results in {kept}/ failed too: {failure(again, kept)}") from None
    raise RunError(f"{problem}; the results are kept in {kept}/{copied}")
