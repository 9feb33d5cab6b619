"""Statistics across repetitions: mean, standard deviation and a Student-t confidence interval."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats


@dataclass(frozen=True)
class Estimate:
    mean: float
    stddev: float
    ci_low: float
    ci_high: float
    n: int

    @property
    def ci_half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


def estimate(values, confidence: float = 0.95) -> Estimate:
    """Mean, sample stddev (ddof=1; 0 for one value) and the two-sided t interval for the mean. With one
    value the interval is just that value: there is no spread to estimate it from."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    n = len(x)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if n == 1:
        return Estimate(mean, 0.0, mean, mean, 1)
    sd = float(x.std(ddof=1))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return Estimate(mean, sd, mean - half, mean + half, n)


def aggregate(rows: pd.DataFrame, keys: list[str] | tuple[str, ...], confidence: float = 0.95) -> pd.DataFrame:
    """One row per point (the ``keys`` columns): for every numeric metric ``m``, ``m`` = mean over the
    repetitions, ``m_std`` = their stddev and ``m_ci`` = the half-width of the confidence interval; ``n`` =
    how many repetitions measured the point. Non-numeric columns keep their first value."""
    keys = list(keys)
    if rows.empty:
        return rows.copy()
    metric_columns = [
        c for c in rows.columns
        if c not in keys and c != "repetition" and pd.api.types.is_numeric_dtype(rows[c])
        and not pd.api.types.is_bool_dtype(rows[c])
    ]
    other_columns = [c for c in rows.columns if c not in keys and c != "repetition" and c not in metric_columns]
    out = []
    grouped = rows.groupby(keys, sort=False, dropna=False) if keys else [((), rows)]
    for key_values, group in grouped:
        key_values = key_values if isinstance(key_values, tuple) else (key_values,)
        record = dict(zip(keys, key_values, strict=True))
        for column in other_columns:
            record[column] = group[column].iloc[0]
        for column in metric_columns:
            e = estimate(group[column].to_numpy(), confidence)
            record[column] = e.mean
            record[f"{column}_std"] = e.stddev
            record[f"{column}_ci"] = e.ci_half_width
        record["n"] = len(group)
        out.append(record)
    return pd.DataFrame(out)
