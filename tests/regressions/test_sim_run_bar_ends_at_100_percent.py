"""A simulated run's bar showed "ETA 51:01:47" and ended at 49 %: rich estimated the time left from the last
seconds' pace (nothing moves while the simulator sets up), and the bar was removed at the last 0.2 s poll,
before the end. The bar now shows the part of the limit done on the device's clock, the time left at the whole
run's pace, and the end."""

import contextlib
import json

from ftlscope import runner
from ftlscope.workload import Workload


class _Handle:
    """Progress as a simulated run reports it: a second of set-up with nothing done, then virtual time racing."""

    def __init__(self, samples):
        self.samples = list(samples)
        self.polls = 0

    def wait(self, _timeout):
        self.polls += 1
        return self.polls >= len(self.samples)

    def progress(self):
        return json.dumps(self.samples[min(self.polls, len(self.samples)) - 1])


class _Bar:
    def __init__(self):
        self.updates = []
        self.console = None

    def add_task(self, label, **fields):
        self.updates.append(dict(fields))
        return 0

    def update(self, _task, **fields):
        self.updates.append(fields)

    def refresh(self):
        pass

    def remove_task(self, _task):
        self.updates.append({"removed": True})


def _sample(device_s, wall_s, finished=False):
    return {"ops": int(device_s * 1000), "bytes": int(device_s * 4096000), "errors": 0,
            "elapsed_ns": int(wall_s * 1e9), "device_ns": int(device_s * 1e9), "finished": finished}


def test_the_bar_of_a_simulated_run_ends_at_100_percent_with_an_honest_eta(monkeypatch):
    bar = _Bar()
    monkeypatch.setattr(runner, "_bar", lambda: contextlib.nullcontext(bar))
    samples = [_sample(0, 0.2), _sample(0.00005, 1.2), _sample(4.9, 2.2), _sample(20, 2.9, finished=True)]
    workload = Workload(mix={"read": 100}, stop={"time_ns": 20_000_000_000})
    assert runner._drive(_Handle(samples), workload, progress=True, label="running")
    shown = [u for u in bar.updates if "completed" in u]
    # Set-up: nothing done, no estimate rather than days.
    assert shown[0]["completed"] == 0.0 and shown[0]["eta"] == "-:--"
    # A quarter done after 2.2 s of wall time: 6.6 s left at that pace.
    assert abs(shown[2]["completed"] - 0.245) < 1e-9 and shown[2]["eta"] == "0:07"
    # The last thing shown before the bar goes is the end.
    assert shown[-1]["completed"] == 1.0 and shown[-1]["eta"] == "0:00"
    assert bar.updates[-1] == {"removed": True}
