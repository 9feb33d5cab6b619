"""A replay whose --trace output named its own input file (``replay sim:X t.parquet --trace t.parquet``) rewrote
the trace while the replay streamed it: now and then it replayed 0 requests (a regression test wrote over its
input so and failed about one time in twelve). Every output that names the trace is refused before anything
runs: one line naming the flag, exit 2, the trace left as it was."""

from __future__ import annotations

import pytest

from ftlscope.cli import main
from ftlscope.traces import write_parquet

SIM = "sim:consumer-tlc-dram"


@pytest.mark.parametrize("flag", ["--trace", "--json", "--windows"])
def test_an_output_over_the_trace_being_replayed_is_refused(tmp_path, capsys, flag):
    import pandas as pd

    frame = pd.DataFrame({"op": pd.Categorical(["read"] * 4, categories=["read", "write"]),
                          "offset_bytes": [0, 4096, 8192, 12288], "size": [4096] * 4,
                          "submit_ns": [0, 10, 20, 30]})
    path = write_parquet(frame, tmp_path / "t.parquet")
    before = path.read_bytes()
    same = tmp_path / "." / "t.parquet"  # the same file by another spelling
    assert main(["replay", SIM, str(path), "--quiet", flag, str(same)]) == 2
    err = capsys.readouterr().err
    assert f"{flag} {same}: is the trace being replayed" in err and err.count("\n") == 1, err
    assert path.read_bytes() == before
