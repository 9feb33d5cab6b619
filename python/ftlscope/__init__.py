"""ftlscope: what does your SSD really do?

Precisely timed I/O on block devices, files and simulated drives; the storage literature's experiments;
inferred FTL internals; reports. The public surface:

- :func:`run` — run a :class:`Workload` on a target, get a :class:`RunResult` (``.summary``, ``.windows``,
  ``.trace``).
- :func:`from_flags` — a workload from fio-like flags.
"""

import os
from importlib.metadata import PackageNotFoundError, version

# ftlscope does no linear algebra worth threads, and OpenBLAS's idle worker threads spin on the CPUs the
# engine measures with (seen in profiles of simulated runs). One thread, unless the user asked otherwise.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    __version__ = version("ftlscope")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+source"

from .errors import FtlscopeError  # noqa: E402

__all__ = ["FtlscopeError", "RunResult", "Workload", "__version__", "from_flags", "run"]

# Imported on first use: pandas and the engine take most of a second to import, and the command line refuses
# a bad flag (or lists presets) without either.
_LAZY = {"RunResult": ".results", "run": ".runner", "Workload": ".workload", "from_flags": ".workload"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
