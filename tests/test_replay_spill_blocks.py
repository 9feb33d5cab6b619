"""The spill files of `replay --queues N` hold zstd blocks of columns with arrival times as differences: what goes in
comes back request for request (also out of order in time, and read back in batches other than those written), and
takes far less than the 21 packed bytes a request."""
import numpy as np

from ftlscope.replay_split import SPILL_DTYPE, SpilledTrace


def _columns(records):
    return {name: records[name].tobytes() for name in SPILL_DTYPE.names}


def test_spilled_requests_come_back_exactly_in_any_batch_size(tmp_path):
    rng = np.random.default_rng(7)
    spilled = SpilledTrace(tmp_path, 3)
    written = []
    for n in (5000, 1, 0, 2345):
        records = np.empty(n, dtype=SPILL_DTYPE)
        records["arrival"] = np.sort(rng.integers(0, 10**12, n)).astype(np.uint64)
        if n > 2:
            records["arrival"][1], records["arrival"][2] = records["arrival"][2], records["arrival"][1]  # backwards
        records["op"] = rng.integers(0, 5, n)
        records["offset"] = rng.integers(0, 2**40, n) // 4096 * 4096
        records["size"] = rng.choice([4096, 16384, 131072], n)
        queue = rng.integers(0, 3, n)
        spilled.write(_columns(records), queue)
        written.append((records, queue))
    try:
        for q in range(3):
            expected = np.concatenate([r[qq == q] for r, qq in written])
            for rows in (1000, 4096, 10**6):
                batches = list(spilled.batches(q, rows))
                assert all(len(b) <= rows for b in batches)
                got = np.concatenate(batches) if batches else np.empty(0, dtype=SPILL_DTYPE)
                assert got.tobytes() == expected.tobytes()
        assert spilled.requests.sum() == 7346
    finally:
        spilled.remove()
    assert not spilled.directory.exists()


def test_random_4k_reads_spill_in_well_under_the_packed_size(tmp_path):
    rng = np.random.default_rng(1)
    n = 100_000
    records = np.empty(n, dtype=SPILL_DTYPE)
    records["arrival"] = np.cumsum(rng.exponential(20_000, n)).astype(np.uint64)  # 50 K requests/s
    records["op"] = 0
    records["offset"] = rng.integers(0, 1 << 18, n) * 4096  # random 4 KiB over 1 GiB
    records["size"] = 4096
    spilled = SpilledTrace(tmp_path, 2)
    try:
        spilled.write(_columns(records), np.arange(n) % 2)
        per_request = spilled.spilled_bytes / n
        assert per_request < 0.5 * SPILL_DTYPE.itemsize, per_request
    finally:
        spilled.remove()
