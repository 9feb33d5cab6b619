"""Did the target keep what was written? The read-back pass behind ``run --verify`` and ``ftlscope verify``.

A verify run (``data: verify``) stamps every 512-byte sector it writes with its LBA, the run's tag, the
write's generation (a run-wide sequence number) and a CRC-32C, as fio's ``verify`` does with its block
headers. The engine checks the stamps when reading back (the loop is Rust, not Python: a whole device has
billions of sectors) and this module turns its report into the ``verify`` section of the summary and a table.

Kinds of mismatch, counted separately:

- misdirected: a sector holds the (intact) stamp of another LBA;
- stale: a sector holds an older generation than the run last wrote there (needs the run's write record,
  so only ``run --verify`` counts it; a standalone ``ftlscope verify`` cannot know what was written last);
- torn: sectors of one write hold different generations (found from the stamps alone: a write covers its
  whole range, so once a generation landed in one sector every sector of its range must hold it or newer);
- corrupt: a stamp whose checksum does not match; foreign / other run: someone else's data inside this
  run's writes.

Read errors are reported with their offset, narrowed down to the block.

On a simulated device (``run sim:... --verify``) the model keeps each page's last write generation instead
of its bytes, and the pass rebuilds the stamps from it (see :func:`verify_sim`).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from rich.table import Table

from . import _native
from .errors import RunError, TargetError, UsageError
from .units import format_size, parse_size

MISMATCH_KINDS = ("torn", "stale", "misdirected", "corrupt", "foreign", "other_run")


def new_tag() -> int:
    """A run tag no earlier run is likely to share (63 bits, never 0: 0 means "learn it from the data")."""
    return secrets.randbits(63) | 1


def verify_target(
    path: str,
    *,
    offset: int | str = 0,
    size: int | str | None = None,
    tag: int = 0,
    write_record: bytes | None = None,
    direct: bool = True,
) -> dict[str, Any]:
    """Read ``[offset, offset + size)`` of ``path`` back and check the verify stamps of run ``tag``.

    ``tag`` 0 checks the run of the first stamp found. ``write_record`` (a verify run's) adds the stale
    count. Returns the engine's report with a ``mismatch_count`` total.
    """
    if path.startswith("sim:"):
        raise UsageError(
            f"verify: {path} opens a fresh simulated device, which holds nothing yet; 'ftlscope run {path} "
            "--verify' checks a run's writes on the device it wrote to"
        )
    start = parse_size(offset, "--offset") if isinstance(offset, str) else offset
    try:
        info = json.loads(_native.target_info(path, False, direct))
    except _native.TargetOpenError as exc:
        raise TargetError(str(exc)) from None
    length = info["size_bytes"] - start if size is None else (
        parse_size(size, "--size") if isinstance(size, str) else size
    )
    block = max(int(info["logical_block_size"]), 512)
    if start % block or length % block:
        raise UsageError(f"--offset/--size: {start} and {length} must be multiples of the {block} B block size")
    if length <= 0 or start + length > info["size_bytes"]:
        raise UsageError(
            f"--offset/--size: {start} + {length} B is not inside the target ({format_size(info['size_bytes'])})"
        )
    try:
        report = json.loads(_native.verify_target(path, start, length, tag, write_record, direct))
    except _native.TargetOpenError as exc:
        raise TargetError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    report["mismatch_count"] = mismatch_count(report)
    return report


def load_write_record(path: str) -> tuple[int, bytes]:
    """(tag, record bytes) of a write record saved by ``run --verify --verify-record``."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as saved:
            return int(saved["tag"]), saved["generations"].astype("<u4").tobytes()
    except FileNotFoundError:
        raise UsageError(f"--record: {path} does not exist; give the file 'run --verify --verify-record' "
                         "wrote") from None
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"--record: {path} is not a write record saved by 'run --verify --verify-record' "
                         f"({exc})") from None


def mismatch_count(report: dict[str, Any]) -> int:
    """Sectors that do not hold what the run wrote (read errors are counted apart)."""
    stale = report["stale"]["sectors"] if report.get("stale") else 0
    return (report["torn"]["sectors"] + stale + report["misdirected"]["sectors"] + report["corrupt"]
            + report["overwritten"])


def verify_table(report: dict[str, Any], title: str) -> Table:
    """The counters, then the first mismatches and read errors with their offsets."""
    table = Table(title=title, title_justify="left")
    for col in ("check", "sectors", "writes", "meaning"):
        table.add_column(col, justify="left" if col in ("check", "meaning") else "right")
    stale = report.get("stale")
    rows = [
        ("intact", report["ok"], "", "this run's stamp, as expected"),
        ("torn", report["torn"]["sectors"], report["torn"]["writes"], "part of a write holds an older generation"),
        ("stale", stale["sectors"] if stale else "n/a", stale["writes"] if stale else "",
         "older generation than last written" if stale else "needs the run's write record (run --verify)"),
        ("misdirected", report["misdirected"]["sectors"], report["misdirected"]["writes"],
         "another LBA's stamp"),
        ("corrupt", report["corrupt"], "", "stamp with a wrong checksum"),
        ("unreadable", report["unreadable_sectors"], "", f"{len(report['read_errors'])} read error range(s)"),
        ("unwritten", report["unwritten"], "", "zeros: not written by this run"),
        ("foreign", report["foreign"], "", "no stamp: another program's data"),
        ("other runs", report["other_runs"], "", "another run's stamps"),
        ("overwritten", report["overwritten"], "", "of those, inside this run's writes"),
    ]
    for name, sectors, writes, meaning in rows:
        table.add_row(name, f"{sectors:,}" if isinstance(sectors, int) else sectors, str(writes), meaning)
    return table


def mismatch_table(report: dict[str, Any], limit: int = 20) -> Table | None:
    """Where the mismatches and read errors are (the first ``limit``), or None when there are none."""
    if not report["mismatches"] and not report["read_errors"]:
        return None
    table = Table(title=f"Mismatches and read errors (first {limit})", title_justify="left")
    for col in ("offset", "length", "kind", "expected", "found"):
        table.add_column(col, justify="right" if col in ("offset", "length") else "left")
    rows = []
    for m in report["mismatches"]:
        found = m["found"]
        found_text = f"LBA {found['lba']} gen {found['generation']}" if found else "-"
        expected_gen = m["expected_generation"]
        expected_text = f"LBA {m['offset'] // 512}" + (f" gen {expected_gen}" if expected_gen else "")
        rows.append((m["offset"], m["len"], m["kind"], expected_text, found_text))
    for e in report["read_errors"]:
        rows.append((e["offset"], e["len"], "read error", "-", e["error"]))
    for offset, length, kind, expected, found in sorted(rows)[:limit]:
        table.add_row(f"{offset:,}", format_size(length), kind, expected, found)
    return table


def check_verified(report: dict[str, Any]) -> None:
    """Raise RunError (exit 1) when the target did not keep what was written."""
    bad = report["mismatch_count"]
    if report["ok"] == 0 and not bad and not report["read_errors"]:
        raise RunError(f"verify: no sector in the range holds a stamp of run {report['tag']:#x} (written by "
                       "'run --verify'): nothing was checked")
    if bad or report["read_errors"]:
        first = report["mismatches"][0] if report["mismatches"] else None
        where = f"; first at byte {first['offset']:,} ({first['kind']})" if first else ""
        raise RunError(
            f"verify: {bad:,} sector(s) do not hold what was written and {report['unreadable_sectors']:,} "
            f"could not be read{where}; the table and the JSON's verify section list them"
        )


def verify_workload(workload, target: str, data_flag: str):
    """The workload ``run --verify`` runs: ``workload`` writing stamped data under a new tag, or why not."""
    if workload.mix.get("write", 0) == 0:
        raise UsageError(
            "--verify: this workload does not write; give --rw write/randwrite/rw/randrw, "
            "or check an earlier run's data with 'ftlscope verify TARGET'"
        )
    if data_flag not in ("random", "verify"):
        raise UsageError(f"--verify writes stamped data of its own; drop --data {data_flag}")
    return workload.replace(data="verify", verify_tag=new_tag())


def verify_after_run(result, *, direct: bool) -> dict[str, Any]:
    """The read-back pass of ``run --verify``: the range the run wrote, checked against its write record."""
    wl = result.summary["workload"]
    target = result.summary["target"]
    block = max(int(target["logical_block_size"]), 512)
    start = wl["range"]["start"] // block * block
    length = wl["range"]["length"] or target["size_bytes"] - wl["range"]["start"]
    end = min(target["size_bytes"], -(-(wl["range"]["start"] + length + wl.get("align_offset", 0)) // block) * block)
    if result.sim_device is not None:
        return verify_sim(result.sim_device, start, end - start, wl["verify_tag"], result.write_record)
    report = verify_target(
        target["name"], offset=start, size=end - start, tag=wl["verify_tag"], write_record=result.write_record,
        direct=direct,
    )
    return report


def verify_sim(device, offset: int, size: int, tag: int, write_record: bytes | None) -> dict[str, Any]:
    """The read-back pass on a simulated device (the one the run wrote to). The model keeps each page's last
    write generation instead of its bytes; reads go through it, so its ``[faults]`` show as read errors with
    their offsets. It never loses or tears a write by design: what this checks is the model's own bookkeeping
    (buffering, garbage collection) and the faults it injects."""
    try:
        report = json.loads(device.verify(offset, size, tag, write_record))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    report["mismatch_count"] = mismatch_count(report)
    report["source"] = "simulated: page fingerprints (the model keeps no bytes)"
    return report
