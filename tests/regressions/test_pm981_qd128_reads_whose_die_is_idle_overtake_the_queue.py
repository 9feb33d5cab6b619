"""On pm981-256g (Samsung PM981, "SSD Performance Profiling"), 4 KiB random reads at QD 128 keep the wide
tail of a queue spread unevenly over the dies: the published p50 / p99 / p99.9 are 692 / 3140 / 3839 us. Issue
15: the host link's calendar remembered only its 8 latest idle gaps, so at a deep queue a read whose die was
idle found no gap before the transfers booked for the reads queued behind busy dies and completed after all of
them: every read came out about as late as the slowest die's (881 / 1275 / 1402 us, p99.9 -63 %). The preset
now keeps 1024 gaps (`controller.host_link_gaps`), so data leaves the link as it is ready."""

from __future__ import annotations

import re

from ftlscope.sim import SimDevice


def test_qd128_read_tail_is_as_wide_as_the_die_queues(preset_with, random_reads_after_fill):
    preset = SimDevice.open("pm981-256g").config_toml
    assert re.search(r"^host_link_gaps = 1024\b", preset, re.M), "the preset's host link changed: refit this test"
    eight = preset_with("pm981-256g", "host_link_gaps", "8")
    wide = random_reads_after_fill(SimDevice.open("pm981-256g"), 128)["lat_ns"]
    narrow = random_reads_after_fill(SimDevice.open(eight), 128)["lat_ns"]
    # A die queue of 128 reads on 4 dies: the p99 ~3x the median (published 4.5x); with 8 gaps ~1.4x.
    assert wide["p99"] > 2.5 * wide["p50"], wide
    assert narrow["p99"] < 1.6 * narrow["p50"], narrow
    # The reads that overtake are the early ones: the median falls, the tail grows.
    assert wide["p50"] < narrow["p50"] and wide["p99.9"] > 1.5 * narrow["p99.9"], (wide, narrow)
