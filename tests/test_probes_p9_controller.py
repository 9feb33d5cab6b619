"""P9 write parallelism behind a controller that paces every command (issue 16): ``[controller] cores`` x
``command_time`` slower than the write buffer's inserts. The buffer's parallelism then does not show in the
writes' completions; P9 must say so (a lower bound, low confidence, ``controller_limited``) instead of reading
the controller's pace as the buffer's. Drives written here as TOML; deterministic, in virtual time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ftlscope.experiments.context import Context
from ftlscope.probes import p9_write_parallelism as p9
from ftlscope.probes.truth import ground_truth
from ftlscope.sim import SimDevice

DRIVE = """
[device]
name = "p9-test"
kind = "ssd"
capacity = "512MiB"
over_provisioning = 0.15
seed = 5

[geometry]
channels = 4
chips_per_channel = 2
page_size = "4KiB"
pages_per_block = 64

[mapping]
chunk_size = "4KiB"
stripe_width = 8

[nand]
cell = "mlc"
page_pattern = "1L 1H"
read_latency = {{ L = "40us", M = "50us", H = "60us" }}
program_latency = {{ L = "200us", M = "500us", H = "800us" }}
channel_rate = "800MB/s"

[write_buffer]
capacity = "4MiB"
parallelism = 2
idle_flush_window = "5ms"

[controller]
buffer_insert_latency = "10us"
cores = {cores}
command_time = "{command}"
"""


def run_p9(tmp_path, cores: int, command: str, noise: str = ""):
    path = tmp_path / "drive.toml"
    path.write_text(DRIVE.format(cores=cores, command=command) + noise)
    device = SimDevice.open(str(path))
    ctx = Context(device, raw_dir=tmp_path / "raw", writes=True)
    ctx.precondition("purge", ctx.span(256 << 20))
    return p9.probe_write_parallelism(ctx, {}, tmp_path), ground_truth(device.config_toml)


def series(latencies, n=20) -> pd.DataFrame:
    return pd.concat([pd.DataFrame({"batch": b, "latency_ns": np.asarray(latencies, dtype=float)})
                      for b in range(n)], ignore_index=True)


def test_writes_in_the_reads_clusters_are_the_controllers_pace():
    # One command processor at 6.3 us: reads of never-written blocks complete one per 6.3 us, and so do the
    # writes, each 10 us later (its buffer insert): at least ceil(10 / 6.3) = 2 inserts run together.
    reads = series([8_000 + 6_300 * i for i in range(16)])
    writes_frame = series([18_000 + 6_300 * i for i in range(16)])
    writes = p9.read_batches(writes_frame)
    limited = p9.controller_paced(writes, writes_frame, reads)
    assert limited is not None and limited["cluster"] == 1 and limited["bound"] == 2
    # Writes two at a time every 10 us, reads one at a time every 6.3 us: the buffer shows, nothing is hidden.
    own = series([18_000 + 10_000 * (i // 2) for i in range(16)])
    assert p9.controller_paced(p9.read_batches(own), own, reads) is None


def test_a_one_core_controller_is_said_not_read_as_parallelism_one(tmp_path):
    """Before: the writes completed one per 6.3 us, as a serial buffer's would, and P9 answered 1 (truth 2) at
    high confidence (consumer-tlc-hmb's unshipped one-core fit)."""
    answer, truth = run_p9(tmp_path, 1, "6.3us")
    assert answer.extra["controller_limited"]
    assert answer.value == truth["P9"] == 2  # the least parallelism that keeps up with the controller
    assert answer.confidence <= p9.LOWER_BOUND_CONFIDENCE


@pytest.mark.parametrize(("cores", "command"), [(0, "0us"), (8, "50us")])
def test_a_controller_that_leaves_the_buffer_visible_changes_nothing(tmp_path, cores, command):
    # Eight processors at 50 us take a batch's first eight writes together; the buffer then inserts them two
    # at a time, which the reads (eight at once) do not show: inside the controller's clusters of eight, the
    # writes' clusters of two are the buffer's (before: 8 read for 2).
    answer, truth = run_p9(tmp_path, cores, command)
    assert answer.value == truth["P9"] and not answer.extra["controller_limited"]
    assert answer.confidence >= (0.9 if cores == 0 else 0.5)
