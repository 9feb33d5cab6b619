"""Block traces: read every common format into one table, describe it, convert it, synthesise workloads.

The submodules load on first use, so `ftlscope --help` does not import pyarrow and pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

from .names import FORMATS, WORKLOAD_NAMES

_WHERE = {"read_trace": "readers", "sniff": "readers", "TraceError": "schema", "write_parquet": "schema",
          "trace_stats": "stats", "convert": "writers", "write_fio_iolog": "writers", "synth": "synthetic"}

__all__ = ["FORMATS", "WORKLOAD_NAMES", *_WHERE]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(name)
