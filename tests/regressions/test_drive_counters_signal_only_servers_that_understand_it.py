"""drive_counters asks an attach server for its counters at once with SIGUSR1 (instead of waiting up to a second
for the next periodic write). SIGUSR1's default action ends a process: a server from before the signal was
understood (its state.json without ``stats_on``) must not be sent it. A stand-in process plays the server."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from ftlscope import attach_state
from ftlscope.experiments import _attached


@pytest.mark.parametrize("understands", [True, False])
def test_only_a_server_that_says_so_is_signalled(tmp_path, monkeypatch, understands):
    server = subprocess.Popen(["sleep", "60"])
    try:
        record = attach_state.Attachment(directory=tmp_path, pid=server.pid, spec="hdd-7200-consumer",
                                         size_bytes=1 << 20, store="", device="/dev/loop9", direct_io=True,
                                         overhead=None, stats_on_sigusr1=understands)
        # Counters taken after any call made now, so drive_counters returns them without waiting.
        (tmp_path / "stats.json").write_text(json.dumps({"requests": 7, "taken": time.time() + 3600}))
        monkeypatch.setattr(attach_state, "attachment_for_device", lambda device: record)
        assert _attached.drive_counters("/dev/loop9")["requests"] == 7
        if understands:
            assert server.wait(timeout=30) == -signal.SIGUSR1
        else:
            with pytest.raises(subprocess.TimeoutExpired):  # still there: nothing was sent to end it
                server.wait(timeout=0.5)
    finally:
        server.kill()
        server.wait()


def test_the_state_json_flag_is_read(tmp_path):
    state = {"pid": 1, "spec": "x", "size_bytes": 1, "store": "", "device": "/dev/loop9"}
    (tmp_path / "state.json").write_text(json.dumps(state))
    assert not attach_state._load(tmp_path).stats_on_sigusr1
    (tmp_path / "state.json").write_text(json.dumps({**state, "stats_on": "SIGUSR1"}))
    assert attach_state._load(tmp_path).stats_on_sigusr1
