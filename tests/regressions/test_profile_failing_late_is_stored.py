"""A profile whose files stop being writable after the checks passed (a disk filled up) keeps and stores what it
measured before, as an interrupted one does, and its one error line says where (issue 14's leftover: such a
profile used to be left out of the store)."""

from __future__ import annotations

import errno

import pandas as pd

from ftlscope import cli
from ftlscope.profile import runner
from ftlscope.profile.suites import QUICK, Step, Suite
from ftlscope.store import RunStore

SHORT = Suite("quick", QUICK.summary, False, steps=(
    Step("qd1-baseline", {"runtime": "100ms", "warmup": "20ms", "span": str(1 << 30)}),
    Step("corners", {"runtime": "100ms", "warmup": "20ms", "span": str(256 << 20)}),
))


def test_a_profile_failing_to_write_late_is_stored_and_says_so(tmp_path, monkeypatch, capsys):
    real_to_csv = pd.DataFrame.to_csv

    def disk_full_at_corners(frame, path=None, *args, **kwargs):
        if path is not None and "corners" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_to_csv(frame, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", disk_full_at_corners)
    monkeypatch.setattr(runner, "get_suite", lambda _name: SHORT)
    out, db = tmp_path / "profile", tmp_path / "runs.db"
    assert cli.main(["profile", "sim:consumer-tlc-dram", "--out", str(out), "--db", str(db), "--quiet"]) == 1

    stored = RunStore(db).get("latest")
    assert stored.record["completed"] is False
    assert [e["name"] for e in stored.record["experiments"]] == ["qd1-baseline"]
    assert (out / "profile.json").is_file() and (out / "report.html").is_file()
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ftlscope: error:")]
    assert errors == [f"ftlscope: error: {out / 'experiments' / 'corners' / 'results.csv'}: No space left on device; "
                      f"the results measured before it are kept in {out}/ and stored as {stored.run_id} in {db}"]
    assert stored.record["stopped"].startswith(f"{out / 'experiments' / 'corners' / 'results.csv'}: No space left")
