"""``--json-format fio``: a run's results in fio's JSON shape, read back the way fio-plot reads fio's output and
by ftlscope's own fio parser (``ftlscope.fio.fio_summary``), to the same numbers as ftlscope's summary."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from ftlscope import from_flags, run
from ftlscope.cli import main
from ftlscope.fio import fio_summary
from ftlscope.fio_json import fio_report

pytestmark = pytest.mark.usefixtures("state_home")


@pytest.fixture(scope="module")
def mixed_run():
    return run("sim:consumer-tlc-dram", from_flags(rw="randrw", rwmixread=70, qd=8, runtime="300ms", data="zeros"),
               trace=True)


def fio_plot_rows(report: dict, mode: str) -> list[dict]:
    """What fio-plot's jsonparsing.py does with one file: global options merged into each job's options, then
    a hard-coded mapping of the nested JSON to a flat row (a KeyError here is a file fio-plot cannot read)."""
    rows = []
    global_options = report.get("global options", {})
    for job in report["jobs"]:
        options = {**job["job options"], **global_options}
        rows.append({
            "iodepth": options["iodepth"], "numjobs": options["numjobs"], "bs": options["bs"], "rw": options["rw"],
            "bw": job[mode]["bw"], "iops": job[mode]["iops"], "iops_stddev": job[mode]["iops_stddev"],
            "lat": job[mode]["lat_ns"]["mean"], "lat_stddev": job[mode]["lat_ns"]["stddev"],
            "p99": job[mode]["clat_ns"]["percentile"]["99.000000"],
            "p99.9": job[mode]["clat_ns"]["percentile"]["99.900000"],
            "latency_ms": job["latency_ms"], "latency_us": job["latency_us"], "latency_ns": job["latency_ns"],
            "cpu_usr": job["usr_cpu"], "cpu_sys": job["sys_cpu"], "fio_version": report["fio version"],
        })
    return rows


def test_a_fio_plot_style_parser_reads_our_numbers(mixed_run):
    report = json.loads(json.dumps(fio_report(mixed_run.summary, mixed_run.windows)))
    for mode in ("read", "write"):
        (row,) = fio_plot_rows(report, mode)
        ours = mixed_run.summary[mode]
        assert row["iops"] == pytest.approx(ours["iops"])
        assert row["bw"] == int(ours["bw_bytes"] / 1024)  # KiB/s, as fio's bw
        assert row["lat"] == pytest.approx(ours["lat_ns"]["mean"])
        assert (row["p99"], row["p99.9"]) == (ours["lat_ns"]["p99"], ours["lat_ns"]["p99.9"])
        assert (row["iodepth"], row["numjobs"], row["bs"], row["rw"]) == ("8", "1", "4096", "randrw")
        # iops_stddev over the run's whole 100 ms windows (the last one, cut short at the end, left out)
        windows = mixed_run.windows[mixed_run.windows["op"] == mode]
        whole = windows.loc[windows["duration_ns"] == 100_000_000, "iops"]
        assert len(whole) == 3 and len(windows) == 4
        assert row["iops_stddev"] == pytest.approx(statistics.stdev(whole))
        assert row["iops_stddev"] < 0.1 * row["iops"]  # a steady simulated run
    job = report["jobs"][0]
    # every percentile fio writes by default, keyed as fio keys them
    assert list(job["read"]["clat_ns"]["percentile"]) == [
        "1.000000", "5.000000", "10.000000", "20.000000", "30.000000", "40.000000", "50.000000", "60.000000",
        "70.000000", "80.000000", "90.000000", "95.000000", "99.000000", "99.500000", "99.900000", "99.950000",
        "99.990000"]
    values = list(job["read"]["clat_ns"]["percentile"].values())
    assert values == sorted(values) and values[0] >= job["read"]["clat_ns"]["min"]
    assert job["job options"]["rwmixread"] == "70"
    assert job["read"]["runtime"] == round(mixed_run.summary["run"]["measured_ns"] / 1e6)
    assert job["trim"]["total_ios"] == 0 and job["trim"]["clat_ns"]["N"] == 0  # as fio writes an idle direction
    # slat is not measured apart: fio's own "not measured" (zeros, N 0), and lat equals clat
    assert job["read"]["slat_ns"] == {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}
    assert job["read"]["lat_ns"]["mean"] == job["read"]["clat_ns"]["mean"]
    # buckets are shares of every read, write and trim request
    total = sum(sum(job[group].values()) for group in ("latency_ns", "latency_us", "latency_ms"))
    assert total == pytest.approx(100.0)
    assert list(job["latency_ms"]) == ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000",
                                       ">=2000"]
    assert job["usr_cpu"] == 0.0 and any("simulated" in n for n in report["ftlscope"]["notes"])
    # fio 3.33's top-level and job keys (those it writes for a run like this one), in its order
    assert list(report)[:4] == ["fio version", "timestamp", "timestamp_ms", "time"]
    assert {"jobs", "disk_util"} <= set(report) and "global options" not in report  # no [global] section
    assert list(job)[:5] == ["jobname", "groupid", "error", "eta", "job options"]
    assert {"read", "write", "trim", "sync", "job_runtime", "usr_cpu", "sys_cpu", "ctx", "majf", "minf",
            "latency_ns", "latency_us", "latency_ms"} <= set(job)
    assert job["sync"] == {"total_ios": 0, "lat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}}


def test_the_buckets_match_the_latencies(mixed_run):
    job = fio_report(mixed_run.summary, mixed_run.windows)["jobs"][0]
    latency = mixed_run.trace.loc[~mixed_run.trace["warmup"], "latency_ns"].to_numpy()
    assert len(latency) == sum(mixed_run.summary[op]["ops"] for op in ("read", "write"))
    edges = [0]
    for group, unit in (("latency_ns", 1), ("latency_us", 1_000), ("latency_ms", 1_000_000)):
        for key, share in job[group].items():
            if key == ">=2000":
                lo, hi = 2_000_000_000, np.inf
            else:
                lo, hi = edges[-1], int(key) * unit
                edges.append(hi)
            exact = 100 * np.count_nonzero((latency >= lo) & (latency < hi)) / len(latency)
            # fio's bucket [previous edge, edge), from a histogram of 3 significant digits
            assert share == pytest.approx(exact, abs=0.5), (group, key)
    # every latency falls in one bucket (this steady mix has none of 1 ms or more: the ms buckets are all 0)
    assert sum(job["latency_us"].values()) > 50
    assert sum(sum(job[group].values()) for group in ("latency_ns", "latency_us", "latency_ms")) == pytest.approx(100)


def test_ftlscopes_fio_parser_reads_it_back_to_the_same_numbers(mixed_run):
    back = fio_summary(json.loads(json.dumps(fio_report(mixed_run.summary, mixed_run.windows))))
    for mode in ("read", "write"):
        ours = mixed_run.summary[mode]
        assert back[mode]["ops"] == ours["ops"]
        assert back[mode]["bytes"] == ours["bytes"]
        assert back[mode]["iops"] == pytest.approx(ours["iops"])
        assert back[mode]["bw_bytes"] == int(ours["bw_bytes"])
        for key in ("mean", "stddev", "min", "max", "p50", "p90", "p95", "p99", "p99.9", "p99.99"):
            assert back[mode]["lat_ns"][key] == pytest.approx(ours["lat_ns"][key]), key
    assert "trim" not in back


def test_the_cli_writes_fio_json(tmp_path, capsys):
    out = tmp_path / "fio.json"
    code = main(["run", "sim:consumer-tlc-dram", "--rw", "randread", "--qd", "4", "--runtime", "100ms",
                 "--json", str(out), "--json-format", "fio", "--quiet"])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["fio version"].startswith("ftlscope-")
    (row,) = fio_plot_rows(report, "read")
    assert row["iops"] > 0 and row["rw"] == "randread"


def test_on_a_file_cpu_fields_are_the_process_usage(scratch):
    out = scratch / "fio.json"
    assert main(["run", str(scratch / "t.img"), "--size", "8m", "--rw", "randread", "--qd", "4",
                 "--runtime", "200ms", "--json", str(out), "--json-format", "fio", "--quiet"]) == 0
    report = json.loads(out.read_text())
    job = report["jobs"][0]
    assert job["usr_cpu"] + job["sys_cpu"] > 0 and job["ctx"] >= 0
    assert any("process" in n for n in report["ftlscope"]["notes"])
    assert job["job options"]["ioengine"] in ("io_uring", "psync")
    assert job["read"]["total_ios"] > 0 and job["read"]["clat_ns"]["percentile"]["50.000000"] > 0
