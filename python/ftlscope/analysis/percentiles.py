"""Latency percentile curves (seed 001 §5.3): p50/p95/p99/p99.9 against a swept variable, how much the tail
grows between two points of the sweep, and the largest point that still meets a latency target (§5.4: "identify
the critical QD where latency exceeds the SLA threshold").

Tables name percentile columns ``[prefix]lat_p50_us``, ``lat_p99_9_us`` (p99.9) ...; :func:`tidy` turns the
ones present into one row per (point, percentile), the form the figures draw from.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# The seed's percentile list (fio --percentile_list=50:95:99:99.9).
SEED_PERCENTILES = ("p50", "p95", "p99", "p99.9")


def column(label: str, prefix: str = "") -> str:
    """The table column of a percentile label: ``p99.9`` -> ``lat_p99_9_us`` (``prefix`` e.g. ``read_``)."""
    if not label.startswith("p"):
        raise ValueError(f"a percentile label looks like p99.9, not {label!r}")
    return f"{prefix}lat_{label.replace('.', '_')}_us"


def quantile(label: str) -> float:
    """``p99.9`` -> 0.999."""
    return float(label[1:]) / 100.0


def tidy(table: pd.DataFrame, x: str, labels=SEED_PERCENTILES, prefix: str = "") -> pd.DataFrame:
    """Long form: columns ``x``, ``percentile`` (label), ``quantile``, ``lat_us`` and ``lat_us_std`` (0 where
    the table has no spread column), one row per point and percentile whose column exists, in table order."""
    rows = []
    for label in labels:
        name = column(label, prefix)
        if name not in table.columns:
            continue
        std = table[f"{name}_std"] if f"{name}_std" in table.columns else pd.Series(0.0, index=table.index)
        rows.append(pd.DataFrame({
            x: table[x].to_numpy(),
            "percentile": label,
            "quantile": quantile(label),
            "lat_us": table[name].to_numpy(dtype=float),
            "lat_us_std": std.fillna(0.0).to_numpy(dtype=float),
        }))
    if not rows:
        return pd.DataFrame(columns=[x, "percentile", "quantile", "lat_us", "lat_us_std"])
    return pd.concat(rows, ignore_index=True)


def growth(x, y, x_from, x_to) -> float:
    """``y`` at ``x_to`` over ``y`` at ``x_from`` (e.g. p99 at QD 128 / p99 at QD 16: the seed's "≈ 8x");
    NaN when either point is missing."""
    x = np.asarray(x)
    y = np.asarray(y, dtype=float)
    a, b = y[x == x_from], y[x == x_to]
    if a.size != 1 or b.size != 1 or a[0] == 0:
        return float("nan")
    return float(b[0] / a[0])


def largest_within(x, y, limit: float):
    """The largest ``x`` such that ``y`` stays at or below ``limit`` there and at every smaller ``x`` (the last
    point before a latency target is first broken); None when the smallest point already breaks it."""
    x = np.asarray(x)
    y = np.asarray(y, dtype=float)
    order = np.argsort(x, kind="stable")
    best = None
    for i in order:
        if not y[i] <= limit:  # NaN counts as broken: nothing measured is not a met target
            break
        best = x[i].item() if hasattr(x[i], "item") else x[i]
    return best
