"""``run --verify`` and ``ftlscope verify``: stamped writes read back, and each kind of damage counted apart.

The file is written by one sequential pass of 16 writes of 4 KiB (write i, generation i + 1, covers bytes
i*4096 .. (i+1)*4096), so every stamp on it is known; the tests then damage it as a drive could.
"""

from __future__ import annotations

import json
import os

import pytest

from ftlscope import _native, from_flags, run
from ftlscope.errors import RunError, UsageError
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
    out = cli("run", "sim:consumer-tlc-dram", "--rw", "randwrite", "--ops", "10", "--verify")
    assert out.returncode == 2 and "keeps a fingerprint per page" in out.stderr
    out = cli("run", scratch / "r.img", "--size", "1m", "--rw", "randread", "--ops", "10", "--verify")
    assert out.returncode == 2 and "does not write" in out.stderr
    assert not (scratch / "r.img").exists()
    out = cli("run", scratch / "r.img", "--size", "1m", "--rw", "write", "--ops", "10", "--verify", "--data", "zeros")
    assert out.returncode == 2 and "drop --data zeros" in out.stderr
    (scratch / "zeros.img").write_bytes(bytes(1 << 20))
    out = cli("verify", scratch / "zeros.img")
    assert out.returncode == 1 and "nothing was checked" in out.stderr
    out = cli("verify", "sim:consumer-tlc-dram")
    assert out.returncode == 2 and "nothing to read back" in out.stderr
    with pytest.raises(UsageError, match="--offset/--size"):
        path, _ = _written(scratch)
        verify_target(str(path), offset=1000)
