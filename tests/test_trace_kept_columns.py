"""The text trace formats keep who issued each request (MSR Cambridge's Hostname and DiskNumber, the Alibaba block
traces' device_id, SPC's ASU, blkparse's device, CPU and pid beside the process), read whole or in batches, so
`replay --queues N --split-by COLUMN` gives each host, disk, device, unit, CPU or process a queue of its own."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ftlscope.cli import main
from ftlscope.traces import read_trace
from ftlscope.traces.streamed import text_frames

SIM = "sim:consumer-tlc-dram"
N = 12


def _msr(tmp_path):
    hosts, disks = ["web", "prxy", "web"], [0, 1, 2]
    lines = [f"{128166372000000000 + 1000 * i},{hosts[i % 3]},{disks[i % 3]},{'Read' if i % 2 else 'Write'},"
             f"{4096 * (i + 1)},4096,{100 + i}" for i in range(N)]
    path = tmp_path / "t.msr.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, {"hostname": [hosts[i % 3] for i in range(N)], "disk_number": [disks[i % 3] for i in range(N)]}


def _alibaba(tmp_path):
    devices = [7, 3]
    lines = ["device_id,opcode,offset,length,timestamp"] + [
        f"{devices[i % 2]},{'R' if i % 3 else 'W'},{4096 * (i + 1)},4096,{1577808000000000 + 100 * i}"
        for i in range(N)]
    path = tmp_path / "t.alibaba.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, {"device_id": [devices[i % 2] for i in range(N)]}


def _spc(tmp_path):
    units = [0, 1, 1, 2]
    lines = [f"{units[i % 4]},{8 * (i + 1)},4096,{'r' if i % 2 else 'w'},{0.0001 * i:.6f}" for i in range(N)]
    path = tmp_path / "t.spc.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, {"asu": [units[i % 4] for i in range(N)]}


def _blkparse(tmp_path):
    lines, seq = [], 0
    for i in range(N):
        cpu, pid, name = i % 2, 4000 + i % 3, f"app{i % 3}"
        t = i * 100_000
        for dt, action in ((0, "Q"), (1_000, "D"), (50_000, "C")):
            seq += 1
            tail = f"{8 * (i + 1)} + 8 [{name if action != 'C' else 0}]"
            lines.append(f"  8,0   {cpu:2d} {seq:8d} {(t + dt) // 1_000_000_000:5d}.{(t + dt) % 1_000_000_000:09d} "
                         f"{pid:5d}  {action}  R {tail}")
    path = tmp_path / "t.blkparse.txt"
    path.write_text("\n".join(lines) + "\n")
    return path, {"device": ["8,0"] * N, "cpu": [i % 2 for i in range(N)], "pid": [4000 + i % 3 for i in range(N)],
                  "process": [f"app{i % 3}" for i in range(N)]}


FORMATS = {"msr": _msr, "alibaba": _alibaba, "spc": _spc, "blkparse": _blkparse}


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_keeps_who_issued_a_request_read_whole_or_in_batches(tmp_path, fmt):
    path, expected = FORMATS[fmt](tmp_path)
    whole = read_trace(path, fmt)
    assert len(whole) == N
    for name, values in expected.items():
        assert whole[name].tolist() == values, name
    for sort in (False, True):
        batches = list(text_frames(path, fmt, sort=sort, batch_rows=5))
        streamed = pd.concat(batches, ignore_index=True)
        for name, values in expected.items():
            assert streamed[name].tolist() == values, (name, sort)


@pytest.mark.parametrize(("fmt", "column", "flag"), [
    ("msr", "disk_number", "disk_number"), ("msr", "disk_number", "DiskNumber"), ("msr", "hostname", "Hostname"),
    ("alibaba", "device_id", "device_id"), ("spc", "asu", "ASU"), ("blkparse", "cpu", "cpu"),
    ("blkparse", "pid", "pid"),
])
def test_replay_splits_a_text_trace_by_its_kept_column(tmp_path, fmt, column, flag):
    path, expected = FORMATS[fmt](tmp_path)
    out_json, out_trace = tmp_path / "r.json", tmp_path / "r.parquet"
    assert main(["replay", SIM, str(path), "--quiet", "--queues", "2", "--split-by", flag, "--no-precondition",
                 "--json", str(out_json), "--trace", str(out_trace)]) == 0
    summary = json.loads(out_json.read_text())
    # Each value to queue (order of first appearance) mod 2; every request of a value on that one queue.
    codes, _ = pd.factorize(pd.Series(expected[column], dtype=object))
    queue_of_request = codes % 2
    assert summary["replay"]["queue_requests"] == [int((queue_of_request == q).sum()) for q in range(2)]
    replayed = pd.read_parquet(out_trace)
    queue_of_offset = {4096 * (i + 1): int(queue_of_request[i]) for i in range(N)}
    assert len(replayed) == N
    assert all(queue_of_offset[int(o)] == int(q) for o, q in zip(replayed["offset_bytes"], replayed["queue"],
                                                                    strict=True))


def test_convert_to_parquet_keeps_the_columns(tmp_path, capsys):
    path, expected = _msr(tmp_path)
    out = tmp_path / "t.parquet"
    assert main(["trace", "convert", str(path), "--to", "parquet", "--out", str(out)]) == 0
    back = read_trace(out)
    assert back["hostname"].tolist() == expected["hostname"]
    assert back["disk_number"].tolist() == expected["disk_number"]


def test_a_disk_number_that_is_no_integer_is_one_line_naming_it(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("128166372000000000,web,0,Read,4096,4096,100\n128166372000001000,web,d1,Read,8192,4096,100\n")
    assert main(["trace", "info", str(path), "--format", "msr"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: DiskNumber is 'd1'" in err and err.count("\n") == 1
