"""``run --verify`` and ``ftlscope verify``: stamped writes read back, and each kind of damage counted apart.

The file is written by one sequential pass of 16 writes of 4 KiB (write i, generation i + 1, covers bytes
i*4096 .. (i+1)*4096), so every stamp on it is known; the tests then damage it as a drive could.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import simdevices

from ftlscope import _native, from_flags, run
from ftlscope.errors import RunError, UsageError
from ftlscope.sim import SimDevice
from ftlscope.verify import check_verified, verify_after_run, verify_target, verify_workload

pytestmark = pytest.mark.usefixtures("state_home")

KiB = 1024
BLOCKS = 16


def _written(scratch):
    path = scratch / "v.img"
    workload = verify_workload(from_flags(rw="write", ops=BLOCKS, size=str(BLOCKS * 4 * KiB)), "file", "random")
    workload = workload.replace(range={"start": 0, "length": BLOCKS * 4 * KiB})
    result = run(str(path), workload, size=f"{BLOCKS * 4}KiB")
    return path, result


def _patch(path, offset: int, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def _sector(path, offset: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(512)


def test_a_clean_write_verifies_clean(scratch):
    path, result = _written(scratch)
    report = verify_after_run(result, direct=True)
    assert report["tag"] == result.summary["workload"]["verify_tag"]
    assert (report["ok"], report["mismatch_count"], report["unreadable_sectors"]) == (BLOCKS * 8, 0, 0)
    assert report["stale"] == {"sectors": 0, "writes": 0}
    check_verified(report)


def test_each_kind_of_damage_is_counted_apart(scratch):
    path, result = _written(scratch)
    tag = result.summary["workload"]["verify_tag"]
    # Misdirected: block 3's first sector holds block 9's first sector (another LBA's intact stamp).
    _patch(path, 3 * 4096, _sector(path, 9 * 4096))
    # Stale: block 5 holds an older write (generation 2) of the same LBAs instead of its generation 6.
    _patch(path, 5 * 4096, _native.verify_stamp(5 * 4096, 4096, tag, 2))
    # Torn: only the first half of block 11's write (generation 12) landed; its second half is older.
    _patch(path, 11 * 4096 + 2048, _native.verify_stamp(11 * 4096 + 2048, 2048, tag, 1))
    # Corrupt: one flipped byte.
    sector = bytearray(_sector(path, 14 * 4096))
    sector[200] ^= 0x40
    _patch(path, 14 * 4096, bytes(sector))

    report = verify_after_run(result, direct=True)
    assert report["misdirected"] == {"sectors": 1, "writes": 1}
    assert report["stale"] == {"sectors": 8, "writes": 1}
    assert report["torn"] == {"sectors": 4, "writes": 1}
    assert report["corrupt"] == 1
    assert report["mismatch_count"] == 1 + 8 + 4 + 1
    kinds = {(m["kind"], m["offset"], m["len"]) for m in report["mismatches"]}
    assert kinds == {("misdirected", 3 * 4096, 512), ("stale", 5 * 4096, 4096), ("torn", 11 * 4096 + 2048, 2048),
                     ("corrupt", 14 * 4096, 512)}
    misdirected = next(m for m in report["mismatches"] if m["kind"] == "misdirected")
    assert (misdirected["expected_generation"], misdirected["found"]["lba"]) == (4, 9 * 8)
    torn = next(m for m in report["mismatches"] if m["kind"] == "torn")
    assert (torn["expected_generation"], torn["found"]["generation"]) == (12, 1)
    with pytest.raises(RunError, match="14 sector"):
        check_verified(report)

    # Without the write record (a standalone verify) the stale write cannot be told; the rest can.
    alone = verify_target(str(path), tag=0)
    assert alone["tag"] == tag and alone["stale"] is None
    assert (alone["misdirected"]["sectors"], alone["torn"]["sectors"], alone["corrupt"]) == (1, 4, 1)


def test_the_cli_verifies_and_exits_1_on_a_mismatch(scratch, cli):
    path = scratch / "c.img"
    out = cli("run", path, "--size", "1m", "--rw", "randwrite", "--qd", "4", "--ops", "500", "--verify",
              "--quiet", "--json", scratch / "run.json")
    assert out.returncode == 0, out.stderr
    summary = json.loads((scratch / "run.json").read_text())
    assert summary["verify"]["mismatch_count"] == 0 and summary["verify"]["ok"] > 0
    tag = summary["verify"]["tag"]
    out = cli("verify", path, "--tag", hex(tag), "--json", scratch / "v.json")
    assert out.returncode == 0, out.stderr
    assert "intact" in out.stdout
    # One sector now holds another LBA's stamp.
    first = json.loads((scratch / "v.json").read_text())["verify"]
    assert first["ok"] + first["unwritten"] == 2048
    with open(path, "rb") as f:
        data = f.read()
    written = [i for i in range(2048) if data[i * 512:i * 512 + 4] == b"FTLV"]
    _patch(path, written[0] * 512, data[written[1] * 512:written[1] * 512 + 512])
    out = cli("verify", path, "--tag", str(tag))
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and "verify: 1 sector(s)" in out.stderr
    assert "misdirected" in out.stdout


def test_refusals_name_the_reason(scratch, cli):
    out = cli("run", scratch / "r.img", "--size", "1m", "--rw", "randread", "--ops", "10", "--verify")
    assert out.returncode == 2 and "does not write" in out.stderr
    assert not (scratch / "r.img").exists()
    out = cli("run", scratch / "r.img", "--size", "1m", "--rw", "write", "--ops", "10", "--verify", "--data", "zeros")
    assert out.returncode == 2 and "drop --data zeros" in out.stderr
    (scratch / "zeros.img").write_bytes(bytes(1 << 20))
    out = cli("verify", scratch / "zeros.img")
    assert out.returncode == 1 and "nothing was checked" in out.stderr
    out = cli("verify", "sim:consumer-tlc-dram")
    assert out.returncode == 2 and "holds nothing yet" in out.stderr and "--verify" in out.stderr
    with pytest.raises(UsageError, match="--offset/--size"):
        path, _ = _written(scratch)
        verify_target(str(path), offset=1000)


# ---- simulated devices: the model keeps each page's last write generation -------------------------------


def _verify_sim(device, *, rw="randwrite", ops, bs="4k", qd=8, size=None, keep=None):
    flags = {"rw": rw, "ops": ops, "bs": bs, "qd": qd, **({"size": size} if size else {})}
    workload = verify_workload(from_flags(**flags), device.spec, "random")
    result = run(device, workload)
    if keep is not None:
        keep.append(result)
    return verify_after_run(result, direct=True)


def test_a_simulated_drive_keeps_every_write_through_garbage_collection(tmp_path):
    # 4x the small drive's capacity in random writes: the FTL moves valid pages many times over, and every
    # sector must still hold the generation the run wrote last.
    device = simdevices.small_ssd(tmp_path, ftl={"gc": "greedy"})
    report = _verify_sim(device, ops=4 * 64 * 256, size="64MiB")
    health = device.health()
    assert health["media_bytes_written"] > 1.2 * health["host_bytes_written"]  # garbage collection copied pages
    assert report["mismatch_count"] == 0 and not report["read_errors"]
    assert report["ok"] > 0.95 * (64 << 20) // 512 and report["stale"]["sectors"] == 0
    assert report["source"].startswith("simulated")
    check_verified(report)


def test_verify_on_a_simulated_drive_sees_data_written_over_the_runs(tmp_path):
    # The check is not vacuous: another program's writes over part of the range are found, with their offset.
    device = simdevices.small_ssd(tmp_path)
    kept = []
    _verify_sim(device, rw="write", ops=1024, bs="4k", qd=1, size="4MiB", keep=kept)
    run(device, from_flags(rw="write", ops=4, bs="4k", offset="2MiB", size="16KiB"))
    report = verify_after_run(kept[0], direct=True)
    assert report["foreign"] == report["overwritten"] == 32
    # one range per overwritten write of the run (each expected its own generation)
    assert [(m["offset"], m["len"], m["kind"]) for m in report["mismatches"]] == [
        ((2 << 20) + i * 4 * KiB, 4 * KiB, "foreign") for i in range(4)]


def test_a_simulated_drives_bad_range_is_caught_by_verify_with_its_offset(tmp_path):
    device = simdevices.small_ssd(tmp_path, faults={"bad_ranges": [{"start": "1MiB", "length": "8KiB"}]})
    report = _verify_sim(device, rw="write", ops=512, bs="8k", qd=1, size="4MiB")
    assert report["unreadable_sectors"] == 16
    assert [(e["offset"], e["len"]) for e in report["read_errors"]] == [(1 << 20, 8 * KiB)]
    assert report["mismatch_count"] == 0
    with pytest.raises(RunError, match="16 could not be read"):
        check_verified(report)


def test_a_simulated_hard_disk_verifies_sector_by_sector():
    device = SimDevice.open("sim:hdd-7200-consumer")
    report = _verify_sim(device, rw="randwrite", ops=2000, bs="512", qd=4, size="1MiB")
    assert report["mismatch_count"] == 0 and report["ok"] > 0
    check_verified(report)


def test_the_cli_verifies_a_simulated_drive(cli):
    out = cli("run", "sim:consumer-tlc-dram", "--rw", "randwrite", "--size", "16m", "--ops", "5000", "--verify")
    assert out.returncode == 0, out.stderr
    assert "intact" in out.stdout


def test_a_saved_write_record_lets_a_later_verify_count_stale_writes(scratch, cli):
    path, record = scratch / "s.img", scratch / "s.npz"
    out = cli("run", path, "--size", "64k", "--rw", "write", "--bs", "4k", "--ops", "32", "--verify",
              "--verify-record", record)
    assert out.returncode == 0, out.stderr
    saved = np.load(record)
    tag, generations = int(saved["tag"]), saved["generations"]
    assert len(generations) == 128 and generations[8] == 18  # write 18 (the second pass) covers sectors 8-15
    # The drive "lost" write 18: sectors 8-15 still hold write 2, intact and consistent.
    _patch(path, 4096, _native.verify_stamp(4096, 4096, tag, 2))
    out = cli("verify", path, "--json", scratch / "later.json")
    assert out.returncode == 0, out.stderr  # without the record, an older intact write is no mismatch
    out = cli("verify", path, "--record", record, "--json", scratch / "later.json")
    assert out.returncode == 1 and "8 sector(s)" in out.stderr
    report = json.loads((scratch / "later.json").read_text())["verify"]
    assert report["stale"] == {"sectors": 8, "writes": 1} and report["tag"] == tag
    assert [(m["offset"], m["kind"], m["expected_generation"]) for m in report["mismatches"]] == [(4096, "stale", 18)]


def test_bad_write_records_are_refused_naming_the_flag(scratch, cli):
    (scratch / "t.img").write_bytes(bytes(1 << 16))
    (scratch / "bad.npz").write_text("not a record")
    for record, says in ((scratch / "none.npz", "does not exist"), (scratch / "bad.npz", "not a write record")):
        out = cli("verify", scratch / "t.img", "--record", record)
        assert out.returncode == 2 and out.stderr.startswith("ftlscope: error: --record:") and says in out.stderr
    out = cli("run", scratch / "t.img", "--rw", "write", "--ops", "4", "--verify-record", scratch / "r.npz")
    assert out.returncode == 2 and "--verify-record" in out.stderr and "add --verify" in out.stderr
