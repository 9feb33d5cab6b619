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
    how many repetitions measured the point. Non-numeric columns keep their first value. Vectorised with
    pandas (time-series experiments have thousands of points)."""
    keys = list(keys)
    if rows.empty:
        return rows.copy()
    rest = [c for c in rows.columns if c not in keys and c != "repetition"]
    metrics = [c for c in rest if pd.api.types.is_numeric_dtype(rows[c]) and not pd.api.types.is_bool_dtype(rows[c])]
    others = [c for c in rest if c not in metrics]
    grouped = rows.assign(_one=1).groupby(keys if keys else (lambda _: 0), sort=False, dropna=False)
    mean = grouped[metrics].mean()
    std = grouped[metrics].std(ddof=1)
    count = grouped[metrics].count()
    # Student t quantile per point (by its number of non-missing repetitions); no spread with one value.
    dof = (count - 1).clip(lower=1)
    t = pd.DataFrame(scipy_stats.t.ppf(0.5 + confidence / 2, dof.to_numpy()), index=count.index,
                     columns=metrics)
    single = count <= 1
    std = std.mask(single, 0.0)
    half = (t * std / np.sqrt(count.clip(lower=1))).mask(single, 0.0)
    parts = [grouped[others].first()] if others else []
    columns = {}
    for m in metrics:
        columns[m] = mean[m]
        columns[f"{m}_std"] = std[m]
        columns[f"{m}_ci"] = half[m]
    parts.append(pd.DataFrame(columns, index=mean.index))
    parts.append(grouped["_one"].sum().rename("n").to_frame())
    table = pd.concat(parts, axis=1)
    return table.reset_index(drop=not keys)
