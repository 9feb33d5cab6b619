"""SIGTERM and SIGHUP stop ftlscope the way Ctrl-C does.

``kill``, systemd and CI runners send SIGTERM, a closed terminal SIGHUP; by default either ends the process at
once and everything measured is lost. Inside :func:`on_termination` both raise KeyboardInterrupt instead, so
every place that keeps the results on Ctrl-C (a run's JSON, trace and windows; a profile's parts and its store
entry) keeps them on these too. The exit code then follows the shell's convention, 128 + the signal's number:
130 for Ctrl-C (SIGINT), 143 for SIGTERM, 129 for SIGHUP, so a caller can tell what stopped the run.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_received: int | None = None


def _stop(signum: int, frame: object) -> None:
    global _received
    if _received is not None:
        return  # already stopping: a repeated signal must not cut the clean-up short (SIGKILL still does)
    _received = signum
    raise KeyboardInterrupt


@contextlib.contextmanager
def on_termination() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise KeyboardInterrupt (in the main thread, as SIGINT does). A
    signal the parent set to be ignored (``nohup`` ignores SIGHUP) stays ignored."""
    global _received
    _received = None
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in _SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, _stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_code() -> int:
    """128 + the number of the signal that stopped the run (SIGINT when it was Ctrl-C)."""
    return 128 + (_received or signal.SIGINT)


def what_stopped() -> str:
    return f"interrupted by {signal.Signals(_received).name}" if _received else "interrupted by Ctrl-C"
