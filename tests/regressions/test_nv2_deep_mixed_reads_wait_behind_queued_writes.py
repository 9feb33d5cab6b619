"""consumer-tlc-hmb (Kingston NV2) against "SSD Performance Report" Tables 9-12: at QD 1024 the 128 KiB 5:5 mix's
reads took 36.4 ms on average and its writes 78.9 ms (1132 and 1158 MB/s: by Little's law the queue was full). A
read in a queue that deep waits its turn behind the writes submitted before it. The model's controller took every
command at once, so its reads overtook the whole queue of writes (program suspend, read priority): 0.55 ms
(-98.5 %), and the writes absorbed all the waiting (Table 12's 7:3 cell +87 %). Issue 15: the controller holds
`controller.command_slots` commands (the NV2: 384); the rest wait in the submission queue and are fetched in order.
Each cell on its own sequentially filled 1 GiB span, simulated time, the bench's fixed seeds."""

from __future__ import annotations

from ftlscope.fidelity import measure, published
from ftlscope.sim import SimDevice

SETTINGS = measure.Settings(runtime="400ms", warmup="300ms")
PRESET = "consumer-tlc-hmb"


def _mix(opener=None) -> dict[str, float]:
    fidelity = measure.Fidelity(SETTINGS, device_opener=opener)
    return fidelity.metrics(PRESET, "steady", published.report_params("128k", "5:5", 1024))


def test_deep_mixed_reads_wait_behind_the_writes_queued_before_them(preset_with):
    m = _mix()
    # Published 36.4 ms; 0.55 ms when the controller took every command at once.
    assert m["read.lat_mean"] > 10e6, m["read.lat_mean"]  # ns
    # Inside the controller reads still go first: they stay faster than the writes (78.9 ms published).
    assert m["read.lat_mean"] < m["write.lat_mean"], (m["read.lat_mean"], m["write.lat_mean"])
    # Both directions still move what the drive moves (1132 / 1158 MB/s published): the slots reorder, not slow.
    assert 0.8e9 < m["read.bw"] < 1.5e9, m["read.bw"]

    unlimited = preset_with(PRESET, "command_slots", "0")
    u = _mix(lambda _name: SimDevice.open(unlimited))
    assert u["read.lat_mean"] < 2e6, u["read.lat_mean"]  # the controller takes all: reads overtake the queue
    assert m["read.lat_mean"] > 5 * u["read.lat_mean"]
