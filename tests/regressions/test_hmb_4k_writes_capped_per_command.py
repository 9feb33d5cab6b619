"""consumer-tlc-hmb's 4 KiB random writes stay at the Kingston NV2's 112-114K IOPS from QD 64 to 1024 ("SSD
Performance Report" Table 3): two command processors at 17.5 us a write cap them. Before, they grew with the
depth (106K, 138K, 194K at QD 64, 512, 1024) as nothing in the model limited the write command rate."""

from __future__ import annotations

import pytest

from ftlscope.fidelity import measure

SETTINGS = measure.Settings(runtime="200ms", warmup="50ms")


def test_hmb_4k_random_writes_stop_at_the_write_command_rate():
    fid = measure.Fidelity(SETTINGS)
    params = {"rw": "randwrite", "bs": "4k", "qd": 1024, "span": "1GiB"}
    iops = fid.metrics("consumer-tlc-hmb", "steady", params)["write.iops"]
    assert iops == pytest.approx(114e3, rel=0.05)
    # Reads have their own processor time (6 us a command + 5.4 us a sense): 4 KiB random reads stop at the
    # Report's Table 1 rate (161-175K at QD 64-1024), not at the writes' (they were 386-395K before).
    reads = fid.metrics("consumer-tlc-hmb", "steady", {**params, "rw": "randread"})["read.iops"]
    assert 161e3 * 0.95 <= reads <= 175e3 * 1.05
