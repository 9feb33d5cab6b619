"""What `ftlscope run` shows of a run: the table on an 80-column screen, the title of a mixed run, the figures
(--plots) and the preconditioning of simulated reads (--no-precondition)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from PIL import Image
from rich.console import Console

from ftlscope import from_flags, run
from ftlscope.cli import describe_workload
from ftlscope.run_plots import latency_data, over_time_data
from ftlscope.units import format_ns

pytestmark = pytest.mark.usefixtures("state_home")


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory, state_home):
    """A 70/30 random mix at QD 8 on the first 256 MiB of the default simulated drive, run as a user runs it,
    on an 80-column screen (rich's console as a terminal with COLUMNS=80 makes it)."""
    import io

    import ftlscope.cli as cli_module

    out = tmp_path_factory.mktemp("mixed")
    screen = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli_module, "console", Console(file=screen, width=80))
        mp.setattr(cli_module, "err_console", Console(file=io.StringIO(), width=80))
        code = cli_module.main(["run", "sim:consumer-tlc-dram", "--rw", "randrw", "--rwmixread", "70", "--qd", "8",
                                "--size", "256MiB", "--runtime", "500ms", "--json", str(out / "run.json"),
                                "--windows", str(out / "windows.csv"), "--plots", str(out / "plots"), "--quiet"])
    assert code == 0
    return screen.getvalue(), json.loads((out / "run.json").read_text()), out


def test_the_table_fits_80_columns_and_every_number_is_whole(mixed_run):
    stdout, summary, _ = mixed_run
    lines = stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, stdout
    cells = {cell.strip() for line in lines for cell in re.split(r"[│┃]", line)}
    for op in ("read", "write"):
        s = summary[op]
        expected = [f"{s['ops']:,}", f"{s['iops']:,.0f}", f"{s['bw_bytes'] / 1e6:,.1f}",
                    *(format_ns(s["lat_ns"][k]) for k in ("mean", "p50", "p99", "p99.9", "p99.99", "max"))]
        for number in expected:
            assert number in cells, f"{op}: {number} is not a whole cell of\n{stdout}"


def test_a_mixed_run_is_titled_by_its_mix_and_says_the_range_was_filled(mixed_run):
    stdout, summary, _ = mixed_run
    flat = " ".join(stdout.split())
    assert "read 70 % / write 30 %, random 4 KiB" in flat
    assert "randread" not in flat
    assert "range filled first (256 MiB written)" in flat
    assert summary["run"]["precondition"]["kind"] == "sequential-fill"
    assert summary["run"]["precondition"]["bytes"] == 256 << 20


def test_describe_workload_names_single_operations_and_mixes():
    assert describe_workload({"mix": {"read": 100, "write": 0}, "pattern": {"kind": "random"}, "sizes": [4096]}) \
        == "random read 4 KiB"
    three = {"mix": {"read": 7, "write": 2, "trim": 1}, "pattern": {"kind": "sequential"}, "sizes": [4096, 8192]}
    assert describe_workload(three) == "read 70 % / write 20 % / trim 10 %, sequential 4 KiB/8 KiB"


def test_plots_are_written_per_operation_and_readable(mixed_run):
    _, _, out = mixed_run
    for op in ("read", "write"):
        for kind in ("latency-histogram", "latency-cdf", "over-time"):
            path = out / "plots" / f"{op}-{kind}.png"
            assert path.is_file()
            with Image.open(path) as image:
                assert image.size[0] > 400 and image.size[1] > 300


def test_the_figures_data_match_the_run(state_home):
    result = run("sim:consumer-tlc-dram", from_flags(rw="randrw", rwmixread=70, qd=8, size="64MiB", runtime="300ms",
                                                     warmup="50ms"), trace=True, precondition=True)
    for op in ("read", "write"):
        data = latency_data(result, op)
        # Every measured request and only those: the count is the summary's.
        assert data.latencies_ns.size == result.summary[op]["ops"]
        assert data.counts.sum() == data.latencies_ns.size
        # The CDF's markers are the summary's percentiles, and the curve passes through them: HDR histogram
        # values are bucket tops (3 significant digits), so at least p % of requests lie at or below p's value
        # and fewer than p % below 0.999 of it.
        for name in ("p50", "p99", "p99.9"):
            value = data.markers_ns[name]
            assert value == result.summary[op]["lat_ns"][name]
            level = float(name[1:]) / 100
            assert np.mean(data.latencies_ns <= value) >= level
            assert np.mean(data.latencies_ns < value * 0.999) < level
        windows = over_time_data(result.windows, op)
        rows = result.windows[result.windows["op"] == op]
        assert list(windows["iops"]) == list(rows["iops"])
        assert len(windows) == len(rows)


def test_reads_of_a_fresh_simulated_drive_with_and_without_precondition(cli, scratch):
    for flags, kind in (((), "sequential-fill"), (("--no-precondition",), "none")):
        out = scratch / f"{kind}.json"
        done = cli("run", "sim:consumer-tlc-dram", "--rw", "randread", "--size", "128MiB", "--ops", "2000",
                   "--json", out, "--quiet", *flags)
        assert done.returncode == 0, done.stderr
        summary = json.loads(out.read_text())
        assert summary["run"]["precondition"]["kind"] == kind
        if kind == "none":
            assert "not filled (--no-precondition)" in " ".join(done.stdout.split())
            fresh = summary["read"]["lat_ns"]["p50"]
        else:
            filled = summary["read"]["lat_ns"]["p50"]
    # A never-written page is answered from the mapping table alone; a written one is read from flash.
    assert filled > 5 * fresh


def test_a_second_run_on_the_same_simulated_device_does_not_fill_again(state_home):
    from ftlscope.sim import SimDevice

    device = SimDevice.open("sim:optane-like")
    workload = from_flags(rw="randread", size="32MiB", ops=100)
    first = run(device, workload, precondition=True)
    second = run(device, workload, precondition=True)
    assert first.summary["run"]["precondition"]["kind"] == "sequential-fill"
    assert second.summary["run"]["precondition"]["kind"] == "already-filled"
    assert "precondition" not in run(device, workload).summary["run"]  # library callers keep their own state


def test_figures_of_a_trace_cut_at_its_limit_say_so(tmp_path, state_home):
    from ftlscope.run_plots import _requests, write_run_plots

    result = run("sim:optane-like", from_flags(rw="randread", size="16MiB", ops=5000), trace=True, trace_limit=1000,
                 precondition=True)
    data = latency_data(result, "read")
    assert data.latencies_ns.size <= 1000 < data.measured == 5000
    assert _requests(data) == f"the first {data.latencies_ns.size:,} of 5,000 requests (trace limit)"
    assert [p.name for p in write_run_plots(result, tmp_path)] == [
        "read-latency-histogram.png", "read-latency-cdf.png", "read-over-time.png"]
