"""The tables the report adds: deep-queue's per-direction pivots ("SSD Performance Report": KIOPS up to 64 KiB,
MB/s from 128 KiB, mean latency in ms) and qd-sweep's "% of peak" column ("SSD Performance Profiling")."""

from __future__ import annotations

import pandas as pd

from ftlscope.report.render import _table
from ftlscope.report.tables import direction_pivots, percent_of_peak


def _deep_queue() -> pd.DataFrame:
    rows = []
    for size in (4096, 128 * 1024):
        for share, mix in ((100, "R100/W0"), (0, "R0/W100"), (70, "R70/W30")):
            for qd in (64, 512):
                row = {"size": size, "qd": qd, "mix": mix, "read_share": share}
                if share:
                    row |= {"read_iops": 300_000.0 * share / 100, "read_mb_s": 1200.0 * share / 100,
                            "read_lat_mean_us": 200.0 * qd / 64}
                if share < 100:
                    row |= {"write_iops": 100_000.0, "write_mb_s": 400.0, "write_lat_mean_us": 150.0 * qd / 64}
                rows.append(row)
    return pd.DataFrame(rows)


def test_deep_queue_pivots_per_direction_in_the_reports_units():
    tables = {t["title"].split(":")[0]: t for t in direction_pivots("deep-queue", _deep_queue())}
    assert set(tables) == {"Reads of 4 KiB", "Writes of 4 KiB", "Reads of 128 KiB", "Writes of 128 KiB"}
    small = tables["Reads of 4 KiB"]
    assert small["columns"] == ["mix", "KIOPS QD 64", "KIOPS QD 512", "mean ms QD 64", "mean ms QD 512"]
    assert small["rows"][0] == ["R100/W0", "300", "300", "0.2", "1.6"]
    assert small["rows"][1] == ["R70/W30", "210", "210", "0.2", "1.6"]
    assert small["rows"][2][0] == "R0/W100" and small["rows"][2][1:] == ["", "", "", ""]  # no reads in it
    large = tables["Writes of 128 KiB"]
    assert large["columns"][1] == "MB/s QD 64" and large["rows"][2] == ["R0/W100", "400", "400", "0.15", "1.2"]
    assert direction_pivots("rw-mix", _deep_queue()) == []


def test_qd_sweep_table_has_a_percent_of_peak_column(tmp_path):
    frame = pd.DataFrame({"qd": [1, 2, 4], "size": 4096, "iops": [100.0, 180.0, 200.0], "slow_share": [0, 0, 0.25]})
    assert list(percent_of_peak("qd-sweep", frame)["pct_of_peak"]) == [50.0, 90.0, 100.0]
    assert "pct_of_peak" not in percent_of_peak("bs-sweep", frame)
    frame.to_csv(tmp_path / "results.csv", index=False)
    table = _table(tmp_path / "results.csv", ["qd", "size"], "qd-sweep")
    assert table["columns"] == ["QD", "IOPS", "% of peak", "% > 1 ms"]
    assert [row[2] for row in table["rows"]] == ["50", "90", "100"] and table["rows"][2][3] == "25"
