"""`ftlscope newt` in flat memory (issue 17): each pass writes its per-request trace to a Parquet file while it
runs, and the gain from arrival and the page's figures are read back from those files in batches. Counts and
means are exact; percentiles come from log-linear buckets, each within 0.1 % (PERCENTILE_TOLERANCE) of the exact
one, so a gain moves by at most 0.2 * after/before percentage points (+ rounding). Simulated drive, virtual time:
deterministic."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ftlscope.cli import main
from ftlscope.metrics import NEWT_STATISTICS
from ftlscope.newt.align import Alignment
from ftlscope.newt.latency import PERCENTILE_TOLERANCE, gains
from ftlscope.newt.measure import Plan, measure
from ftlscope.report.newt_page import MAX_DOTS, _PassLatencies
from ftlscope.traces import write_parquet
from ftlscope.workload import OPS

SIM = "sim:kelpie-n1t-i"


def _trace(tmp_path, n=3_000, seed=11):
    """Unaligned reads and writes in 32 MiB, due faster than QD 4 keeps up with now and then (issue lag)."""
    rng = np.random.default_rng(seed)
    ops = rng.choice(["read", "write"], size=n, p=[0.7, 0.3])
    frame = pd.DataFrame({"op": pd.Categorical(ops, categories=OPS),
                          "offset_bytes": (rng.integers(8, (32 << 20) // 512, n) * 512).astype(np.uint64),
                          "size": (rng.integers(1, 64, n) * 512).astype(np.uint32),
                          "submit_ns": np.cumsum(rng.exponential(40_000, n)).astype(np.uint64)})
    frame.attrs["ftlscope"] = {"format": "test", "synthetic": False}
    return write_parquet(frame, tmp_path / "t.parquet")


def test_the_gain_from_the_streamed_traces_is_the_in_memory_one_within_the_tolerance(tmp_path):
    path = _trace(tmp_path)
    plan = Plan(alignment=Alignment(4096))
    kwargs = {"timing": "faithful", "qd": 4, "trace_name": "t", "fmt": "parquet"}
    whole = measure(SIM, path, plan, **kwargs)
    flat = measure(SIM, path, plan, traces=(tmp_path / "before.parquet", tmp_path / "after.parquet"), **kwargs)
    # Nothing per request held in memory by the streamed passes: their traces are the files.
    assert flat.before.trace.empty and flat.after.trace.empty
    # Each pass's simulated drive is let go once it is done: the two drives' state is never held at once.
    assert flat.before.sim_device is None and flat.after.sim_device is None
    assert (tmp_path / "before.parquet").is_file() and (tmp_path / "after.parquet").is_file()
    want, got = gains(whole.before, whole.after), gains(flat.before, flat.after)
    assert got["latency_from"] == want["latency_from"] == "arrival"
    assert got["gain_pct_device"] == want["gain_pct_device"]  # from the engine's summaries, as before
    for when in ("before", "after"):
        for op in ("read", "write"):
            g, w = got["arrival"][when][op], want["arrival"][when][op]
            assert g["ops"] == w["ops"] > 0
            assert g["lat_ns"]["mean"] == pytest.approx(w["lat_ns"]["mean"], rel=1e-9)
            for key in NEWT_STATISTICS:
                assert g["lat_ns"][key] == pytest.approx(w["lat_ns"][key], rel=PERCENTILE_TOLERANCE), (when, op, key)
    lagged = 0
    for op in ("read", "write"):
        for key in NEWT_STATISTICS:
            b, a = (want["arrival"][w][op]["lat_ns"][key] for w in ("before", "after"))
            bound = 2 * PERCENTILE_TOLERANCE * 100 * a / b * 1.01 + 0.01  # two 0.1 % errors, and rounding
            assert abs(got["gain_pct"][op][key] - want["gain_pct"][op][key]) <= bound, (op, key)
            lagged += want["arrival"]["before"][op]["lat_ns"][key] > whole.before.summary[op]["lat_ns"][key]
    assert lagged  # the trace does wait in the replayer: from arrival is not the device latency


def test_newt_removes_the_passes_traces_unless_asked_to_keep_them(tmp_path):
    path = _trace(tmp_path, n=400)
    base = ["newt", SIM, str(path), "--align-reads", "4k", "--quiet", "--no-store", "--qd", "4"]
    assert main([*base, "--report", str(tmp_path / "page")]) == 0
    assert not list(tmp_path.glob(".ftlscope-newt-traces-*"))
    assert (tmp_path / "page" / "figures" / "read-latency-cdf-before-after.png").is_file()
    assert main([*base, "--report", str(tmp_path / "page2"), "--traces", str(tmp_path / "kept")]) == 0
    doc = json.loads((tmp_path / "page2" / "newt.json").read_text())
    for when in ("before", "after"):
        kept = pd.read_parquet(tmp_path / "kept" / f"{when}.parquet")
        assert (kept["op"] == "read").sum() == doc[when]["read"]["ops"]


@pytest.mark.parametrize("batch", [777, 1_000, 50_000])
def test_the_read_dots_are_every_kth_read_of_the_whole_pass(batch):
    n = 3 * MAX_DOTS + 17
    time, latency = np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) * 3
    dots = _PassLatencies()
    for start in range(0, n, batch):
        dots.add_reads(time[start:start + batch], latency[start:start + batch])
    got_t, got_v = dots.read_dots()
    assert (got_t == time[::dots.step]).all() and (got_v == latency[::dots.step]).all()
    assert MAX_DOTS <= got_t.size <= 2 * MAX_DOTS and dots.reads == n
