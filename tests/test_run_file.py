"""``ftlscope.run`` on regular files: the summary's names, stop conditions, mixes, queues, batches, warm-up,
time windows, the per-request trace, trim/write-zeroes, written data, both engines, and the file-safety rules.

Runs are short (a few hundred requests, or 0.2-0.3 s) on files of 1-32 MiB in a directory that takes O_DIRECT.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ftlscope
from ftlscope import from_flags, run
from ftlscope.errors import SafetyError, TargetError, UsageError
from ftlscope.results import LATENCY_KEYS

pytestmark = pytest.mark.usefixtures("state_home")

KiB, MiB = 1 << 10, 1 << 20
MS = 10**6
SHARED_SIZE = 32 * MiB

TOP_LEVEL = {"target", "workload", "env", "health", "run"}
OP_KEYS = {"ops", "iops", "bw_bytes", "bytes", "errors", "ops_over_1ms", "lat_ns", "lat_ns_below",
           "lat_ns_fio_percentiles"}
LAT_KEYS = {"mean", "stddev", "min", "max", "p50", "p90", "p95", "p99", "p99.9", "p99.99"}
PERCENTILES = ("p50", "p90", "p95", "p99", "p99.9", "p99.99")
TRACE_COLUMNS = ["op", "offset_bytes", "size", "queue", "submit_ns", "complete_ns", "latency_ns", "status", "warmup",
                 "submit_seq"]


@pytest.fixture(scope="module")
def shared_file(module_scratch) -> str:
    """A 32 MiB file ftlscope created and filled, for the read-only runs."""
    path = module_scratch / "shared.img"
    result = run(str(path), from_flags(rw="randread", ops=1), size="32MiB")
    assert any("filled" in n for n in result.notices)
    return str(path)


def _ops(result) -> dict[str, int]:
    return {op: s["ops"] for op, s in result.ops.items()}


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _hole_offset(path) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------------------
# the summary


@pytest.fixture(scope="module")
def four_op_result(module_scratch):
    """One run doing reads, writes, trims and write-zeroes, on a file ftlscope creates."""
    path = module_scratch / "four-ops.img"
    return run(
        str(path), from_flags(mix="read=40,write=30,trim=15,write_zeroes=15", qd=4, ops=2000), size="16MiB",
        trace=True,
    )


def test_summary_key_names(four_op_result):
    s = four_op_result.summary
    assert set(s) == TOP_LEVEL | {"read", "write", "trim", "write_zeroes"}
    for op in ("read", "write", "trim", "write_zeroes"):
        assert set(s[op]) == OP_KEYS, op
        assert set(s[op]["lat_ns"]) == LAT_KEYS, op
        assert set(LATENCY_KEYS) == LAT_KEYS
        assert s[op]["ops"] > 0 and s[op]["errors"] == 0
    assert s["run"]["stop"] == {"reason": "completed"}
    assert s["run"]["errors"] == 0
    assert s["target"]["kind"] == "regular_file"
    assert s["target"]["size_bytes"] == 16 * MiB
    assert s["target"]["created_by_ftlscope"] is True
    assert s["workload"]["mix"] == {"read": 40, "write": 30, "trim": 15, "write_zeroes": 15, "flush": 0}
    assert {"engine", "options", "kernel", "ftlscope_version"} <= set(s["env"])
    assert s["env"]["ftlscope_version"] == ftlscope.__version__
    # the summary is plain JSON
    assert json.loads(json.dumps(s)) == s


def test_summary_leaves_out_operations_not_run(shared_file):
    s = run(shared_file, from_flags(rw="randread", ops=50)).summary
    assert set(s) == TOP_LEVEL | {"read"}


def test_summary_figures_are_consistent(four_op_result):
    s = four_op_result.summary
    seconds = s["run"]["measured_ns"] / 1e9
    assert seconds > 0
    total = 0
    for op in ("read", "write", "trim", "write_zeroes"):
        o = s[op]
        total += o["ops"]
        lat = o["lat_ns"]
        chain = [lat["min"], *(lat[p] for p in PERCENTILES)]
        assert chain == sorted(chain), f"{op}: percentiles not monotone: {lat}"
        assert 0 < lat["min"] <= lat["mean"] <= lat["max"], f"{op}: {lat}"
        assert lat["stddev"] >= 0
        assert math.isclose(o["iops"], o["ops"] / seconds, rel_tol=1e-6)
        assert math.isclose(o["bw_bytes"], o["bytes"] / seconds, rel_tol=1e-6)
        assert o["bytes"] == o["ops"] * 4096
    assert total == 2000


def test_percentiles_never_exceed_the_max(four_op_result):
    rows = [four_op_result.summary[op]["lat_ns"] for op in ("read", "write", "trim", "write_zeroes")]
    over = [(lat["max"], p, lat[p]) for lat in rows for p in PERCENTILES if lat[p] > lat["max"]]
    w = four_op_result.windows
    for _, row in w[w["ops"] > 0].iterrows():
        over += [(row["lat_max_ns"], p, row[f"lat_{p.replace('.', '_')}_ns"]) for p in PERCENTILES
                 if row[f"lat_{p.replace('.', '_')}_ns"] > row["lat_max_ns"]]
    assert not over, f"(max, percentile, value) with the percentile above the max: {over[:5]}"


# ---------------------------------------------------------------------------------------------------------
# stop conditions, mixes, queues, batches, warm-up


@pytest.mark.parametrize(("queues", "qd", "ops"), [(1, 1, 300), (2, 8, 1001), (1, 16, 500)])
def test_stop_by_ops_is_exact(shared_file, queues, qd, ops):
    result = run(shared_file, from_flags(rw="randread", qd=qd, queues=queues, ops=ops), trace=True)
    assert _ops(result) == {"read": ops}
    assert len(result.trace) == ops
    assert result.summary["run"]["stop"] == {"reason": "completed"}
    assert sum(q["completed"] for q in result.summary["run"]["queues"]) == ops


def test_stop_by_bytes(shared_file):
    result = run(shared_file, from_flags(rw="read", bs="64k", qd=4, total_bytes="1MiB"))
    assert result.summary["read"]["bytes"] == MiB
    assert result.summary["read"]["ops"] == 16
    # with mixed sizes, the run stops before going past the budget
    mixed = run(shared_file, from_flags(rw="randread", bs="4k,64k", total_bytes="1MiB"))
    assert MiB - 64 * KiB < mixed.summary["read"]["bytes"] <= MiB


def test_stop_by_time(shared_file):
    result = run(shared_file, from_flags(rw="randread", runtime="0.2s"))
    measured = result.summary["run"]["measured_ns"]
    assert 0.19e9 <= measured <= 0.3e9, measured
    assert result.summary["read"]["ops"] > 0


def test_mix_70_30(scratch):
    n = 2000
    result = run(str(scratch / "mix.img"), from_flags(rw="randrw", rwmixread=70, qd=4, ops=n), size="16MiB")
    ops = _ops(result)
    assert ops["read"] + ops["write"] == n
    sd = math.sqrt(n * 0.7 * 0.3)
    assert abs(ops["read"] - 0.7 * n) < 5 * sd, ops


def test_multiple_queues_each_do_work(shared_file):
    result = run(shared_file, from_flags(rw="randread", qd=4, queues=2, runtime="0.2s"), trace=True)
    queues = result.summary["run"]["queues"]
    assert [q["queue"] for q in queues] == [0, 1]
    assert all(q["completed"] > 0 for q in queues)
    per_queue = result.trace["queue"].value_counts().to_dict()
    assert set(per_queue) == {0, 1} and all(n > 0 for n in per_queue.values())
    assert sum(per_queue.values()) == result.summary["read"]["ops"]
    assert result.summary["workload"]["queues"] == 2


@pytest.mark.parametrize("engine", ["uring", "psync"])
def test_batches_with_idle_gaps(shared_file, engine):
    result = run(shared_file, from_flags(rw="randread", batch=4, idle="20ms", ops=40), engine=engine, trace=True)
    assert result.summary["read"]["ops"] == 40
    assert result.summary["run"]["wall_ns"] >= 9 * 20 * MS
    t = result.trace.sort_values("submit_ns").reset_index(drop=True)
    batches = [t.iloc[i : i + 4] for i in range(0, 40, 4)]
    for before, after in zip(batches[:-1], batches[1:], strict=True):
        gap = int(after["submit_ns"].min()) - int(before["complete_ns"].max())
        assert gap >= 20 * MS - 50_000, f"idle gap of {gap} ns between batches, want 20 ms"


def _most_in_flight(trace: pd.DataFrame) -> int:
    """The largest number of requests outstanding at once in a trace."""
    events = np.concatenate([np.stack([trace["submit_ns"], np.ones(len(trace))], axis=1),
                             np.stack([trace["complete_ns"], -np.ones(len(trace))], axis=1)])
    # at equal times completions come first: a request that ends as the next starts did not overlap it
    order = np.lexsort((events[:, 1], events[:, 0]))
    return int(np.cumsum(events[order, 1]).max())


def test_psync_keeps_a_random_queue_depth_with_threads(shared_file):
    result = run(shared_file, from_flags(rw="randread", qd=4, ops=400), engine="psync", trace=True)
    assert result.summary["workload"]["queue_depth"] == 4, "the result states the workload asked for"
    assert result.summary["read"]["ops"] == 400
    assert any("queue depth 4 with 4 threads" in n for n in result.notices), result.notices
    assert result.summary["env"]["engine"]["queue_depth"] == 4
    assert 2 <= _most_in_flight(result.trace) <= 4


def test_psync_threads_share_a_sequential_stream(shared_file):
    result = run(shared_file, from_flags(rw="read", qd=4, ops=200), engine="psync", trace=True)
    assert any("queue depth 4 with 4 threads" in n for n in result.notices), result.notices
    assert 2 <= _most_in_flight(result.trace) <= 4
    # the four threads take turns along one stream: together they read the first 200 blocks, each once
    assert sorted(result.trace["offset_bytes"]) == [i * 4096 for i in range(200)]


def test_psync_runs_a_permutation_one_request_at_a_time(shared_file):
    result = run(shared_file, from_flags(rw="randread", pattern="permutation", qd=4, ops=200), engine="psync",
                 trace=True)
    assert any("effective queue depth 1" in n for n in result.notices), result.notices
    assert result.summary["env"]["engine"]["queue_depth"] == 1
    assert _most_in_flight(result.trace) == 1


def test_warmup_ops_are_left_out(shared_file):
    result = run(shared_file, from_flags(rw="randread", ops=200, warmup_ops=50), trace=True)
    s = result.summary
    assert s["read"]["ops"] == 200
    assert s["run"]["warmup_ops"] == 50
    t = result.trace
    assert len(t) == 250 and int(t["warmup"].sum()) == 50
    # at QD 1 the warm-up requests are the first 50
    assert t.loc[t["warmup"], "submit_ns"].max() < t.loc[~t["warmup"], "submit_ns"].min()
    assert result.windows["ops"].sum() == 200


def test_warmup_time_is_left_out(shared_file):
    result = run(shared_file, from_flags(rw="randread", ops=100, warmup="50ms"), trace=True)
    s = result.summary
    assert s["read"]["ops"] == 100
    t = result.trace
    warm, measured = t[t["warmup"]], t[~t["warmup"]]
    assert len(warm) == s["run"]["warmup_ops"] > 0
    first = int(t["submit_ns"].min())
    assert int(warm["submit_ns"].max()) - first <= 50 * MS + 5 * MS
    assert int(measured["submit_ns"].min()) - first >= 50 * MS - MS


# ---------------------------------------------------------------------------------------------------------
# time windows


@pytest.mark.parametrize("engine", ["uring", "psync"])
def test_windows_cover_the_run(scratch, engine):
    window = 25 * MS
    result = run(
        str(scratch / "w.img"), from_flags(rw="randrw", qd=8, queues=2, runtime="0.25s"), size="16MiB",
        window="25ms", engine=engine,
    )
    w = result.windows
    assert {"window_index", "start_ns", "duration_ns", "op", "ops", "iops", "bw_bytes"} <= set(w.columns)
    assert {f"lat_{k.replace('.', '_')}_ns" for k in LAT_KEYS} <= set(w.columns)
    # one row per (window, op)
    assert not w.duplicated(["window_index", "op"]).any()
    assert (w.groupby("window_index")["op"].nunique() == 2).all()
    windows = np.sort(w["window_index"].unique())
    assert (np.diff(windows) == 1).all(), "windows are consecutive, stalls included"
    assert (w["start_ns"] == w["window_index"] * window).all()
    assert (w["duration_ns"] <= window).all() and (w["duration_ns"] > 0).all()
    assert len(windows) >= 9
    # every measured request is in exactly one window
    assert w.groupby("op")["ops"].sum().to_dict() == _ops(result)


def test_windows_have_a_row_for_every_operation_in_every_window(scratch):
    # one request every ~2 ms in 1 ms windows; with seed 8 the first write is the 8th request, so several
    # windows close before the engine has seen a write
    result = run(
        str(scratch / "rare.img"), from_flags(mix="read=9,write=1", batch=1, idle="2ms", ops=16, seed=8),
        size="4MiB", window="1ms", trace=True,
    )
    ops = list(result.trace.sort_values("submit_ns")["op"].astype(str))
    assert "write" in ops and ops.index("write") >= 3, f"precondition (seed 8): reads first, then a write: {ops}"
    w = result.windows
    rows = w.groupby("window_index")["op"].nunique()
    assert (rows == 2).all(), f"windows without a row for one of the operations: {list(rows[rows < 2].index)}"


# ---------------------------------------------------------------------------------------------------------
# the trace


def test_trace_has_one_row_per_request(shared_file):
    result = run(shared_file, from_flags(rw="randread", qd=4, queues=2, ops=500), trace=True)
    t = result.trace
    assert list(t.columns) == TRACE_COLUMNS
    assert len(t) == 500
    assert set(t["op"].astype(str)) == {"read"}
    assert (t["size"] == 4096).all()
    assert (t["offset_bytes"] % 4096 == 0).all()
    assert (t["offset_bytes"] + t["size"] <= SHARED_SIZE).all()
    assert (t["status"] == t["size"]).all(), "a read's status is the bytes it moved"
    assert (t["latency_ns"] == (t["complete_ns"] - t["submit_ns"]).astype(np.int64)).all()
    assert (t["latency_ns"] > 0).all()
    assert not t["warmup"].any()
    assert result.dropped_trace_records == 0
    # the trace agrees with the summary
    assert int(t["latency_ns"].min()) == result.summary["read"]["lat_ns"]["min"]
    assert int(t["latency_ns"].max()) == result.summary["read"]["lat_ns"]["max"]


def test_no_trace_unless_asked(shared_file):
    result = run(shared_file, from_flags(rw="randread", ops=20))
    assert len(result.trace) == 0
    assert list(result.trace.columns)[:6] == TRACE_COLUMNS[:6]


def test_trace_respects_range_and_alignment(shared_file):
    w = from_flags(rw="randread", bs="8k,16k", offset="1MiB", size="4MiB", ops=400)
    t = run(shared_file, w, trace=True).trace
    assert set(t["size"]) == {8192, 16384}
    assert (t["offset_bytes"] >= MiB).all() and (t["offset_bytes"] + t["size"] <= 5 * MiB).all()
    assert ((t["offset_bytes"] - MiB) % 8192 == 0).all(), "offsets are multiples of the smallest size from the start"


def test_sequential_offsets_increase_per_queue(shared_file):
    n_per_queue = 1000
    t = run(shared_file, from_flags(rw="read", queues=2, ops=2 * n_per_queue), trace=True).trace
    half = SHARED_SIZE // 2
    for q in (0, 1):
        offsets = t[t["queue"] == q].sort_values("submit_ns")["offset_bytes"].to_numpy(dtype=np.int64)
        assert len(offsets) == n_per_queue
        assert offsets[0] == q * half, "each queue walks its own half of the range"
        assert (np.diff(offsets) == 4096).all(), "strictly increasing, one request after the other"


def test_permutation_touches_every_block_once(shared_file):
    blocks = SHARED_SIZE // 4096
    t = run(shared_file, from_flags(rw="read", pattern="permutation", qd=8, queues=2, ops=blocks), trace=True).trace
    assert len(t) == blocks
    assert np.array_equal(np.sort(t["offset_bytes"].to_numpy(dtype=np.int64)), np.arange(blocks, dtype=np.int64) * 4096)
    # and it is not just sequential
    q0 = t[t["queue"] == 0].sort_values("submit_ns")["offset_bytes"].to_numpy(dtype=np.int64)
    assert (np.diff(q0) < 0).any()


READ_BACK = r"""
import json, sys
import pandas as pd
import pyarrow.parquet as pq
path = sys.argv[1]
frame = pd.read_parquet(path)
table = pq.read_table(path)
assert not any(m == "ftlscope" or m.startswith("ftlscope.") for m in sys.modules), "ftlscope got imported"
print(json.dumps({
    "pandas_columns": list(frame.columns),
    "pandas_rows": len(frame),
    "arrow_columns": table.column_names,
    "arrow_rows": table.num_rows,
    "offset_sum": int(frame["offset_bytes"].astype("int64").sum()),
    "latency_sum": int(table.column("latency_ns").to_pandas().sum()),
    "ops": sorted(set(frame["op"].astype(str))),
}))
"""


def test_trace_parquet_reads_back_without_ftlscope(shared_file, scratch):
    result = run(shared_file, from_flags(rw="randrw", qd=4, ops=300), trace=True, destructive=shared_file)
    path = result.save_trace(scratch / "trace.parquet")
    # a clean interpreter, from a directory where the ftlscope source is not importable by accident
    done = subprocess.run([sys.executable, "-c", READ_BACK, str(path)], capture_output=True, text=True,
                          cwd=tempfile.gettempdir(), timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["pandas_columns"] == got["arrow_columns"] == TRACE_COLUMNS
    assert got["pandas_rows"] == got["arrow_rows"] == 300
    assert got["offset_sum"] == int(result.trace["offset_bytes"].astype("int64").sum())
    assert got["latency_sum"] == int(result.trace["latency_ns"].sum())
    assert got["ops"] == ["read", "write"]


def test_summary_and_windows_files(shared_file, scratch):
    result = run(shared_file, from_flags(rw="randread", ops=200))
    summary = json.loads(result.save_json(scratch / "out" / "s.json").read_text())
    assert summary["read"]["ops"] == 200
    windows = pd.read_csv(result.save_windows(scratch / "out" / "w.csv"))
    assert windows["ops"].sum() == 200


# ---------------------------------------------------------------------------------------------------------
# trim, write zeroes, data patterns, engines


@pytest.mark.parametrize("engine", ["uring", "psync"])
@pytest.mark.parametrize("op", ["trim", "write_zeroes"])
def test_trim_and_write_zeroes_leave_zeros(scratch, op, engine):
    path = str(scratch / f"{op}.img")
    run(path, from_flags(rw="write", bs="64k", total_bytes="1MiB", data="ones"), size="1MiB", engine=engine)
    assert set(Path(path).read_bytes()) == {0xFF}
    result = run(path, from_flags(rw="write", mix=f"{op}=100", bs="64k", total_bytes="512KiB"), engine=engine)
    s = result.summary
    assert s["run"]["errors"] == 0 and s[op]["errors"] == 0
    assert s[op]["ops"] == 8 and s[op]["bytes"] == 512 * KiB
    assert s["run"]["stop"] == {"reason": "completed"}
    data = Path(path).read_bytes()
    assert len(data) == MiB, "trim and write zeroes keep the file's size"
    assert set(data[: 512 * KiB]) == {0}
    assert set(data[512 * KiB :]) == {0xFF}, "nothing past the range is touched"


def _lba_ok(data: bytes) -> bool:
    return all(struct.unpack_from("<Q", data, i)[0] == i // 512 for i in range(0, len(data), 512))


@pytest.mark.parametrize("engine", ["uring", "psync"])
@pytest.mark.parametrize(("data", "byte"), [("zeros", 0x00), ("ones", 0xFF), ("0xaa", 0xAA), ("lba", None)])
def test_written_data_patterns(scratch, data, byte, engine):
    path = str(scratch / "data.img")
    result = run(path, from_flags(rw="write", bs="64k", qd=4, total_bytes="1MiB", data=data), size="1MiB",
                 engine=engine)
    assert result.summary["write"]["bytes"] == MiB
    written = Path(path).read_bytes()
    if byte is None:
        assert _lba_ok(written), "every 512-byte sector starts with its LBA (little-endian u64)"
    else:
        assert set(written) == {byte}


def test_random_data_differs_between_writes(scratch):
    path = str(scratch / "random.img")
    run(path, from_flags(rw="write", bs="64k", total_bytes="1MiB", data="random"), size="1MiB")
    data = Path(path).read_bytes()
    blocks = {data[i : i + 4096] for i in range(0, MiB, 4096)}
    assert len(blocks) == MiB // 4096, "no two 4 KiB blocks alike"
    assert len(set(data)) == 256


def test_lba_stamp_carries_the_run_seed_on_every_queue(scratch):
    path = str(scratch / "lba2.img")
    run(path, from_flags(rw="write", bs="64k", queues=2, total_bytes="1MiB", data="lba", seed=7), size="1MiB")
    data = Path(path).read_bytes()
    assert _lba_ok(data)
    seeds = {struct.unpack_from("<Q", data, i + 8)[0] for i in range(0, MiB, 512)}
    assert seeds == {7}


@pytest.mark.parametrize(("engine", "backend"), [("psync", "psync"), ("uring", "io_uring")])
def test_engine_choice_is_reported(shared_file, engine, backend):
    result = run(shared_file, from_flags(rw="randread", qd=4, ops=200), engine=engine)
    env = result.summary["env"]
    assert env["engine"]["backend"] == backend
    assert "requested" in env["engine"]["backend_reason"]
    assert env["options"]["engine"] == engine
    assert result.summary["read"]["ops"] == 200
    if engine == "psync":
        assert any("queue depth 4 with 4 threads" in n for n in result.notices), result.notices


def test_auto_engine_on_a_disk_file_is_io_uring(shared_file):
    env = run(shared_file, from_flags(rw="randread", ops=20)).summary["env"]
    if "unavailable" in env["engine"]["backend_reason"]:
        pytest.skip(f"io_uring unavailable here: {env['engine']['backend_reason']}")
    assert env["engine"]["backend"] == "io_uring"


def test_auto_engine_on_tmpfs_is_psync():
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm")
    # ftlscope will not create files under /dev, so the file is made here and only read
    with tempfile.TemporaryDirectory(dir=shm) as d:
        path = Path(d) / "t.img"
        path.write_bytes(b"\x5a" * 4 * MiB)
        try:
            result = run(str(path), from_flags(rw="randread", ops=50))
        except TargetError as exc:
            pytest.skip(f"tmpfs here takes no O_DIRECT: {exc}")
    engine = result.summary["env"]["engine"]
    assert engine["backend"] == "psync"
    assert "tmpfs" in engine["backend_reason"]


def test_unknown_engine():
    with pytest.raises(UsageError, match=r"^--engine: .*spdk"):
        run("/nonexistent", from_flags(), engine="spdk")


# ---------------------------------------------------------------------------------------------------------
# files: creating, filling, and not destroying what is not ours


def test_created_file_is_filled_before_reading(scratch):
    path = str(scratch / "new.img")
    result = run(path, from_flags(rw="randread", ops=10), size="16MiB")
    assert os.path.getsize(path) == 16 * MiB
    assert _hole_offset(path) == 16 * MiB, "no holes: reads hit real data"
    assert any(n.startswith("created") for n in result.notices)
    assert any(n.startswith("filled") for n in result.notices)
    assert result.summary["target"]["created_by_ftlscope"] is True
    # the data is incompressible, not zeros
    assert len(set(Path(path).read_bytes()[:65536])) == 256


def test_grown_file_is_filled(scratch):
    path = str(scratch / "grow.img")
    run(path, from_flags(rw="write", ops=1), size="4MiB")
    result = run(path, from_flags(rw="randread", ops=10), size="8MiB")
    assert os.path.getsize(path) == 8 * MiB
    assert _hole_offset(path) == 8 * MiB
    assert any(n.startswith("extended") for n in result.notices)


def test_new_file_needs_a_size(scratch):
    with pytest.raises(UsageError, match=r"^--size: "):
        run(str(scratch / "nope.img"), from_flags(ops=1))
    assert not (scratch / "nope.img").exists()


def test_size_must_be_whole_blocks(scratch):
    with pytest.raises(UsageError, match=r"^--size: "):
        run(str(scratch / "odd.img"), from_flags(ops=1), size="10000")


def test_foreign_file_read_is_untouched(scratch):
    path = scratch / "foreign.img"
    path.write_bytes(os.urandom(4 * MiB))
    before = _sha(path)
    result = run(str(path), from_flags(rw="randread", ops=100))
    assert result.summary["read"]["ops"] == 100
    assert result.summary["target"]["created_by_ftlscope"] is False
    assert _sha(path) == before


def test_foreign_sparse_file_is_not_filled(scratch):
    path = scratch / "sparse.img"
    with open(path, "wb") as f:
        f.truncate(8 * MiB)
    result = run(str(path), from_flags(rw="randread", ops=20))
    assert _hole_offset(path) == 0, "ftlscope must not write into a file it did not create"
    assert any("holes" in n for n in result.notices), result.notices


def test_foreign_file_write_needs_destructive(scratch):
    path = scratch / "precious.img"
    path.write_bytes(os.urandom(4 * MiB))
    before = _sha(path)
    with pytest.raises(SafetyError) as exc:
        run(str(path), from_flags(rw="randwrite", ops=10))
    message = str(exc.value)
    assert "\n" not in message and f"--destructive {path}" in message
    assert _sha(path) == before
    # naming another file is not a confirmation
    other = scratch / "other.img"
    other.write_bytes(b"x" * 4096)
    with pytest.raises(SafetyError, match="--destructive"):
        run(str(path), from_flags(rw="randwrite", ops=10), destructive=str(other))
    assert _sha(path) == before
    # naming it is
    result = run(str(path), from_flags(rw="randwrite", ops=10), destructive=str(path))
    assert result.summary["write"]["ops"] == 10
    assert _sha(path) != before


def test_trim_on_a_foreign_file_needs_destructive(scratch):
    path = scratch / "precious-trim.img"
    path.write_bytes(b"\x55" * MiB)
    with pytest.raises(SafetyError, match="--destructive"):
        run(str(path), from_flags(rw="trim", ops=4))
    assert set(path.read_bytes()) == {0x55}


def test_directory_is_not_a_target(scratch):
    with pytest.raises(TargetError, match="directory"):
        run(str(scratch), from_flags(ops=1))
