"""Read-size alignment ("Fantastic SSD Internals and How to Learn and Use Them" §5.1): the transform itself, its
effect on a drive that penalises reads that are not page multiples (kelpie-n1t-i: +200 µs) and on one that does
not, and `replay --align-reads`'s refusals. Simulated drives, virtual time: every figure is deterministic."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ftlscope.cli import main
from ftlscope.errors import UsageError
from ftlscope.newt.align import Alignment, align_reads, parse_align, served_sizes
from ftlscope.replay import replay
from ftlscope.sim import SimDevice
from ftlscope.traces import write_parquet

KIB = 1024


def _frame(ops, offsets, sizes, gap_ns=200_000) -> pd.DataFrame:
    n = len(ops)
    frame = pd.DataFrame({
        "op": pd.Categorical(ops, categories=["read", "write", "trim", "write_zeroes", "flush"]),
        "offset_bytes": np.asarray(offsets, dtype=np.uint64), "size": np.asarray(sizes, dtype=np.uint32),
        "submit_ns": np.arange(n, dtype=np.uint64) * gap_ns})
    frame.attrs["ftlscope"] = {"format": "synthetic", "synthetic": True}
    return frame


def _unaligned_reads(n=600, seed=3) -> pd.DataFrame:
    """Random reads at 512 B offsets in 64 MiB, sizes 512 B multiples that are not 4 KiB multiples (as 65 % of
    the paper's database reads), one every 200 µs: QD 1 in effect, so latency is the drive's own."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 32, n) * 512
    sizes = np.where(sizes % 4096 == 0, sizes + 512, sizes)
    offsets = rng.integers(0, (64 << 20) // 512 - 64, n) * 512
    return _frame(["read"] * n, offsets, sizes)


def test_reads_cover_whole_pages_and_writes_stay_as_they_were():
    frame = _frame(["read", "write", "read", "read", "flush"], [512, 512, 8192, 4096 * 3 - 512, 0],
                   [7 * KIB, 7 * KIB, 4 * KIB, 1024, 0])
    aligned, stats = align_reads(frame, Alignment(4096))
    assert aligned["offset_bytes"].tolist() == [0, 512, 8192, 8192, 0]
    # 512+7 KiB ends at 7.5 KiB: one page; 8 KiB..12 KiB stays; 11.5 KiB..12.5 KiB straddles two pages.
    assert aligned["size"].tolist() == [8192, 7 * KIB, 4096, 8192, 0]
    assert (stats.reads, stats.changed) == (3, 2)
    assert stats.bytes_before == 7 * KIB + 4 * KIB + 1024
    assert stats.extra_bytes == 8192 + 4096 + 8192 - stats.bytes_before
    assert aligned.dtypes.equals(frame.dtypes)
    assert aligned.attrs["ftlscope"]["aligned_reads"]["extra_bytes"] == stats.extra_bytes
    assert frame["size"].tolist()[0] == 7 * KIB  # the input is not changed


def test_aligned_reads_touch_exactly_the_pages_they_touched_before():
    # Why alignment adds no flash work (issue 19: the db trace's slower tail from arrival is not more pages read,
    # nor a read grown over a page a write holds): whole-page alignment reads the same pages, only whole.
    frame = _unaligned_reads(2000, seed=7)
    aligned, stats = align_reads(frame, Alignment(4096))
    assert stats.changed == 2000
    first = lambda f: f["offset_bytes"].to_numpy(np.int64) // 4096  # noqa: E731
    last = lambda f: (f["offset_bytes"].to_numpy(np.int64) + f["size"].to_numpy(np.int64) - 1) // 4096  # noqa: E731
    assert (first(aligned) == first(frame)).all() and (last(aligned) == last(frame)).all()
    assert (aligned["offset_bytes"].to_numpy() % 4096 == 0).all() and (aligned["size"].to_numpy() % 4096 == 0).all()


def test_sizes_in_a_penalised_range_grow_past_it():
    # kelpie-n2t-i's ranges (paper §4.1): 17-20, 33-36, 49-52 KiB.
    ranges = ((17 * KIB, 20 * KIB), (33 * KIB, 36 * KIB), (49 * KIB, 52 * KIB))
    sizes = np.array([16, 17, 20, 21, 24, 33, 36, 52, 53, 0]) * KIB
    assert (served_sizes(sizes, Alignment(4096, ranges)) // KIB).tolist() == [16, 24, 24, 24, 24, 40, 40, 56, 56, 0]
    # Ranges that touch: a size grown past one lands past the next too.
    assert served_sizes(np.array([20 * KIB]), Alignment(4096, ((24 * KIB, 28 * KIB), (17 * KIB, 20 * KIB)))) \
        .tolist() == [32 * KIB]


def test_aligned_reads_are_faster_on_a_drive_that_penalises_unaligned_sizes():
    frame = _unaligned_reads()
    aligned, stats = align_reads(frame, Alignment(4096))
    assert stats.changed == stats.reads == len(frame)
    before = replay(SimDevice.open("kelpie-n1t-i"), frame, precondition=True).summary["read"]["lat_ns"]
    after = replay(SimDevice.open("kelpie-n1t-i"), aligned, precondition=True).summary["read"]["lat_ns"]
    # The drive adds 200 µs to every read whose size is not a multiple of 4 KiB: aligning removes it.
    assert after["mean"] < before["mean"] - 150_000, (before["mean"], after["mean"])
    assert after["p99"] < before["p99"]


def test_on_a_consistent_drive_alignment_changes_nothing_but_the_bytes_read():
    frame = _unaligned_reads()
    aligned, stats = align_reads(frame, Alignment(4096))
    before = replay(SimDevice.open("consumer-tlc-dram"), frame, precondition=True).summary["read"]
    after = replay(SimDevice.open("consumer-tlc-dram"), aligned, precondition=True).summary["read"]
    assert after["ops"] == before["ops"] == len(frame)
    assert after["bytes"] - before["bytes"] == stats.extra_bytes > 0
    # The aligned reads touch the same pages; the extra bytes only cross the host link (3.5 GB/s: ~1 µs each).
    for key in ("mean", "p50", "p99"):
        assert abs(after["lat_ns"][key] - before["lat_ns"][key]) <= 0.05 * before["lat_ns"][key], key


def test_replay_align_reads_size_flag_records_what_it_did(tmp_path):
    trace = write_parquet(_unaligned_reads(50), tmp_path / "t.parquet")
    out = tmp_path / "r.json"
    assert main(["replay", "sim:kelpie-n1t-i", str(trace), "--quiet", "--align-reads", "4k", "--json", str(out)]) == 0
    done = json.loads(out.read_text())["replay"]["aligned_reads"]
    assert done["page_size"] == 4096 and done["reads"] == done["changed"] == 50 and done["extra_bytes"] > 0


@pytest.mark.parametrize(("flags", "words"), [
    (["--align-reads", "auto"], "--align-reads auto: it reads the page size (P1)"),
    (["--align-reads", "4q"], "--align-reads: cannot read '4q' as a size"),
    (["--align-reads", "0"], "--align-reads: '0' is out of range"),
])
def test_bad_align_flags_are_refused_in_one_line(tmp_path, capsys, flags, words):
    trace = write_parquet(_unaligned_reads(10), tmp_path / "t.parquet")
    assert main(["replay", "sim:kelpie-n1t-i", str(trace), "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert words in err


def test_auto_without_a_page_size_says_which_profile_lacks_it():
    from ftlscope.newt.params import NewtParams

    with pytest.raises(UsageError, match=r"the profile RUN-X has no page size \(P1\)"):
        parse_align("auto", NewtParams(source="RUN-X"))
    # Ranges but no penalty for sizes that are not page multiples (kelpie-n2t-i): only sizes in a range grow.
    assert parse_align("auto", NewtParams(page_size=4096, penalised_reads=((1, 2),), source="R")) == \
        Alignment(4096, ((1, 2),), whole_pages=False)
    # P6 found every size served alike: auto changes nothing (the extra bytes would be all cost).
    consistent = parse_align("auto", NewtParams(page_size=4096, penalised_reads=(), unaligned_penalty_ns=0.0))
    assert not consistent.changes_anything
    frame = _unaligned_reads(20)
    aligned, stats = align_reads(frame, consistent)
    assert stats.changed == stats.extra_bytes == 0 and aligned["size"].tolist() == frame["size"].tolist()
    assert parse_align("auto", NewtParams(page_size=4096, penalised_reads=(), unaligned_penalty_ns=2e5)).whole_pages


def test_without_whole_pages_only_sizes_in_a_range_grow_and_offsets_stay():
    frame = _frame(["read", "read", "read"], [512, 4096, 1024], [20 * KIB, 21 * KIB + 512, 7 * KIB])
    aligned, _ = align_reads(frame, Alignment(4096, ((17 * KIB, 20 * KIB),), whole_pages=False))
    assert aligned["offset_bytes"].tolist() == [512, 4096, 1024]
    assert aligned["size"].tolist() == [24 * KIB, 21 * KIB + 512, 7 * KIB]
