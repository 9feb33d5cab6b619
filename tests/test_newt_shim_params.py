"""Newt's parameters read from a stored profile (issue 19): P1, P6, P8, P10 and the shim's flush speed P8 / P10."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ftlscope.errors import UsageError
from ftlscope.newt import NewtParams
from ftlscope.store import RunStore

MIB = 1 << 20


def profile(directory: Path, properties: dict, run_id: str = "20261125-120000-kelpie-n2t-i") -> Path:
    """A profile directory holding only what NewtParams reads: the run id and the probes' properties."""
    directory.mkdir(parents=True, exist_ok=True)
    record = {"schema": 1, "run_id": run_id, "created_at": "2026-11-25T12:00:00Z", "suite": "quick",
              "target": {"name": "sim:kelpie-n2t-i", "kind": "simulated"}, "experiments": [],
              "probes": {"directory": "probes", "completed": True, "properties": properties}}
    (directory / "profile.json").write_text(json.dumps(record))
    return directory


def prop(name: str, value, **extra) -> dict:
    return {"name": name, "value": value, "answer": str(value), "confidence": 0.9, "device_time_s": 1.0, **extra}


N2T_I = {
    "P1": prop("page size", 4096),
    "P6": prop("read consistency", {"consistent": False, "penalised_sizes": [[20480, 266240]]},
               unaligned_penalty_us=35.0),
    "P8": prop("write buffer", int(11.5 * MIB)),
    "P10": prop("flush window", 0.2),
}


@pytest.fixture
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path / "runs.sqlite")


def test_reads_every_property_from_a_stored_run(store, tmp_path):
    store.add(json.loads((profile(tmp_path / "run", N2T_I) / "profile.json").read_text()), tmp_path / "run")
    params = NewtParams.from_profile("latest", store)
    assert params == NewtParams(page_size=4096, penalised_reads=((20480, 266240),), unaligned_penalty_ns=35_000.0,
                                buffer_bytes=int(11.5 * MIB), flush_window_s=0.2,
                                source="20261125-120000-kelpie-n2t-i")
    # The paper's example: 11.5 MB / 200 ms = 57.5 MB/s.
    assert params.flush_speed_bps() == pytest.approx(11.5 * MIB / 0.2)
    assert params.why_no_flush_speed() == ""
    assert params.to_json()["flush_speed_bps"] == pytest.approx(11.5 * MIB / 0.2)


def test_a_profile_directory_works_without_the_store(store, tmp_path):
    params = NewtParams.from_profile(str(profile(tmp_path / "run", N2T_I)), store)
    assert params.page_size == 4096 and params.flush_window_s == 0.2


@pytest.mark.parametrize(("p8", "p10", "why"), [
    (0, 0.0, "write-through"),                  # no write buffer
    (64 * MIB, None, "never drains"),           # P10 "never": stored as null
    (64 * MIB, "absent", "P10"),                # not probed
    ("absent", "absent", "P8"),
])
def test_no_flush_speed_and_why(store, tmp_path, p8, p10, why):
    properties = {"P1": prop("page size", 4096)}
    if p8 != "absent":
        properties["P8"] = prop("write buffer", p8)
    if p10 != "absent":
        properties["P10"] = prop("flush window", p10)
    params = NewtParams.from_profile(str(profile(tmp_path / "run", properties)), store)
    assert params.flush_speed_bps() is None
    assert why in params.why_no_flush_speed()
    if p10 is None:
        assert math.isinf(params.flush_window_s)
        assert params.to_json()["flush_window_never"] is True
    if p10 == "absent":
        assert params.flush_window_s is None


def test_a_consistent_drive_has_no_penalised_reads(store, tmp_path):
    properties = {"P6": prop("read consistency", {"consistent": True, "penalised_sizes": []})}
    params = NewtParams.from_profile(str(profile(tmp_path / "run", properties)), store)
    assert params.penalised_reads == () and params.unaligned_penalty_ns == 0.0
    assert params.page_size is None


def test_unknown_run_names_the_flag(store):
    with pytest.raises(UsageError, match=r"^--from-profile nope: no stored run matches 'nope'"):
        NewtParams.from_profile("nope", store)


def test_a_missing_store_names_the_flag(tmp_path):
    with pytest.raises(UsageError, match=r"^--from-profile latest: no stored run"):
        NewtParams.from_profile("latest", RunStore(tmp_path / "absent.sqlite", create=False))


def test_a_run_without_probes_is_not_a_profile(store, tmp_path):
    with pytest.raises(UsageError, match=r"--from-profile .*not a profile with probed properties"):
        NewtParams.from_profile(str(profile(tmp_path / "run", {})), store)


def test_a_shim_whose_holding_slowed_the_reads_says_so_with_its_numbers():
    from ftlscope.newt.shim import describe, hurt_notice

    slowed = {"read_geomean_held_ns": 300e3, "read_geomean_free_ns": 193e3, "reads_held": 32, "reads_free": 3000,
              "backoffs": 1}
    text = hurt_notice(slowed)
    assert text.startswith("warning: reads were 1.55x slower") and "gave up 1 hold" in text
    assert "300.0 µs" in text and "193.0 µs" in text
    # Reads as fast under holding (within 5 %), nothing given up: nothing to say.
    assert hurt_notice({**slowed, "read_geomean_held_ns": 200e3, "backoffs": 0}) is None
    # Given up, though over the run the reads under holding were faster: said without the word "slower" for them.
    gave_up = hurt_notice({**slowed, "read_geomean_held_ns": 60e3})
    assert gave_up.startswith("the shim gave up 1 hold") and "60.0 µs" in gave_up
    # The run's line carries it.
    line = describe({"active": True, "flush_speed_bps": 67e6, "source": "P8 / P10", "delayed_writes": 5,
                     "writes": 10, "delay_ns": {"mean": 1e6, "max": 2e6}, "held_bytes": {"max": 1 << 20},
                     **slowed})
    assert line.endswith(text)
