"""Tables the report adds to an experiment's own: the per-direction pivot tables of "SSD Performance Report" [5]
for deep-queue (read and write throughput and mean latency per mix x queue depth, one pair per access size;
KIOPS up to 64 KiB and MB/s from 128 KiB, as that report switches), and the "% of peak" column of "SSD
Performance Profiling" [2] for the queue-depth sweep."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .. import metrics
from ..units import format_size
from .facts import significant

KIOPS_UP_TO = 64 * 1024  # "SSD Performance Report" gives KIOPS up to 64 KiB and MB/s from 128 KiB


def percent_of_peak(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """qd-sweep's rows with ``pct_of_peak``: each QD's IOPS as a share of the sweep's largest."""
    if name != "qd-sweep" or metrics.IOPS not in frame.columns or frame.empty:
        return frame
    peak = frame[metrics.IOPS].max()
    frame = frame.copy()
    frame.insert(frame.columns.get_loc(metrics.IOPS) + 1, "pct_of_peak", 100 * frame[metrics.IOPS] / peak)
    return frame


def direction_pivots(name: str, frame: pd.DataFrame) -> list[dict[str, Any]]:
    """For deep-queue: per access size and direction, a table with one row per mix and, per queue depth,
    the direction's throughput and mean latency (ms). A mix without the direction leaves its cells empty."""
    needed = {"size", "qd", "mix", "read_share"}
    if name != "deep-queue" or not needed <= set(frame.columns) or frame.empty:
        return []
    tables = []
    mixes = frame.sort_values("read_share", ascending=False)["mix"].drop_duplicates().tolist()
    qds = sorted(frame["qd"].unique())
    for size in sorted(frame["size"].unique()):
        rows_of_size = frame[frame["size"] == size]
        kiops = size <= KIOPS_UP_TO
        unit = "KIOPS" if kiops else "MB/s"
        for op in ("read", "write"):
            throughput = f"{op}_{metrics.IOPS if kiops else metrics.MB_S}"
            latency = f"{op}_{metrics.LAT_MEAN_US}"
            if throughput not in frame.columns or latency not in frame.columns:
                continue
            rows = []
            for mix in mixes:
                cells = [mix]
                for column, scale in ((throughput, 1e-3 if kiops else 1.0), (latency, 1e-3)):
                    for qd in qds:
                        value = rows_of_size.loc[(rows_of_size["mix"] == mix) & (rows_of_size["qd"] == qd), column]
                        cells.append("" if value.empty or pd.isna(value.iloc[0]) or value.iloc[0] == 0
                                     else significant(float(value.iloc[0]) * scale))
                rows.append(cells)
            columns = (["mix"] + [f"{unit} QD {q}" for q in qds] + [f"mean ms QD {q}" for q in qds])
            tables.append({"title": f"{op.capitalize()}s of {format_size(size)}: throughput ({unit}) and mean "
                                    f"latency (ms) per mix and queue depth", "columns": columns, "rows": rows})
    return tables
