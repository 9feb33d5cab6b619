"""Health sampling in experiments (issue 14): a write experiment reports the host and NAND bytes its
measurement wrote and the temperature the drive reached, in experiment.json and its findings."""

from __future__ import annotations

import json

import simdevices

from ftlscope.analysis.health_usage import run_usage, total_usage
from ftlscope.experiments import get, run_experiment

MiB = 1 << 20


def sample(t, host, media, temperature=None):
    return {"t_ns": t, "host_bytes_written": host, "host_bytes_read": 0, "media_bytes_written": media,
            "temperature_c": temperature}


def test_runs_add_up_to_the_bytes_moved_and_the_highest_temperature():
    first = run_usage({"samples": [sample(0, 100, 300, 40), sample(5, 600, 900, 47), sample(7, 700, 1000, 45)]})
    assert first["host_bytes_written"] == 600 and first["media_bytes_written"] == 700
    assert (first["temperature_first_c"], first["temperature_last_c"], first["temperature_max_c"]) == (40, 45, 47)
    second = run_usage({"samples": [sample(0, 700, 1000, 44), sample(3, 900, 1500, 46)]})
    no_log = run_usage({"available": False, "reason": "a regular file has no health log", "samples": []})
    assert no_log["host_bytes_written"] is None and no_log["temperature_max_c"] is None
    total = total_usage([first, no_log, second])
    assert total["host_bytes_written"] == 800 and total["media_bytes_written"] == 1200
    assert total["write_amplification"] == 1.5
    assert (total["temperature_first_c"], total["temperature_last_c"], total["temperature_max_c"]) == (40, 46, 47)
    assert total_usage([no_log])["write_amplification"] is None


def test_a_simulated_write_experiment_reports_host_and_nand_bytes(tmp_path):
    device = simdevices.small_ssd(tmp_path, "health", device={"capacity": "64MiB"})
    before = device.health()
    outcome = run_experiment(get("seq-write-over-time"), device, out=tmp_path / "out",
                             params={"span": "32MiB", "window": "2ms"})
    assert outcome.completed, outcome.error
    after = device.health()
    conditions = json.loads((outcome.directory / "experiment.json").read_text())
    health = conditions["health"]
    assert health["available"] and health["source"] == "sim"
    measured = health["measurement"]
    # The measurement wrote the span once; the purge before it wrote nothing (TRIM).
    assert measured["host_bytes_written"] == 32 * MiB
    assert health["preconditioning"]["host_bytes_written"] == 0
    assert measured["host_bytes_written"] + health["preconditioning"]["host_bytes_written"] == \
        after["host_bytes_written"] - before["host_bytes_written"]
    media = after["media_bytes_written"] - before["media_bytes_written"]
    assert 0 < measured["media_bytes_written"] <= media
    assert measured["write_amplification"] == measured["media_bytes_written"] / measured["host_bytes_written"]
    # Every run says what it did, and which phase it belonged to.
    assert {run["phase"] for run in conditions["runs"]} == {"preconditioning", "measurement"}
    found = json.loads((outcome.directory / "findings.json").read_text())
    assert found["host_bytes_written"]["value"] == 32 * MiB and found["host_bytes_written"]["unit"] == "bytes"
    assert found["nand_bytes_written"]["value"] == measured["media_bytes_written"]
    assert "cliff_bytes" in found  # the experiment's own findings are kept
    # The simulated drive reports no temperature: no temperature finding, and none invented.
    assert health["temperature_max_c"] is None and "temperature_max_c" not in found


def test_a_read_experiment_gets_the_health_section_but_no_write_findings(tmp_path):
    device = simdevices.small_ssd(tmp_path, "reads", device={"capacity": "64MiB"})
    outcome = run_experiment(get("seq-read-over-time"), device, out=tmp_path / "out", params={"span": "16MiB"})
    assert outcome.completed, outcome.error
    conditions = json.loads((outcome.directory / "experiment.json").read_text())
    assert conditions["health"]["measurement"]["host_bytes_written"] == 0
    assert conditions["health"]["preconditioning"]["host_bytes_written"] == 16 * MiB  # the fill before reading
    assert "host_bytes_written" not in outcome.findings
