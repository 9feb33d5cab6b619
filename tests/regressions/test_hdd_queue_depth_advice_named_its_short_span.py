"""Regression: on a 2 TB hard disk the quick profile's summary said 166 IOPS at QD 32 (zoning, whole disk) while
the queue-depth advice said "QD 32 already gives 90 % of the peak 369 IOPS" without saying that the sweep read only
the first 8 GiB, where seeks are short. The advice now names the span and, on a disk, the whole-disk rate."""

from __future__ import annotations

from ftlscope.report.guidance import build_guidance

GiB = 1 << 30


def _finding(value, unit):
    return {"value": value, "unit": unit, "evidence": "test"}


def _record(span, size, rotational, zoning=True):
    sweep = {"peak_iops": _finding(369.0, "IOPS"), "peak_qd": _finding(1024, "QD"),
             "practical_knee_qd": _finding(32, "QD"), "knee_qd": _finding(64, "QD")}
    experiments = [{"name": "qd-sweep", "findings": sweep, "params": {"span": span},
                    "figures": ["experiments/qd-sweep/qd_scaling.png"]}]
    if zoning:
        experiments.append({"name": "zoning", "findings": {"random_read_iops_qd32": _finding(166.0, "IOPS")},
                            "params": {"span": 0}, "figures": ["experiments/zoning/zoning.png"]})
    return {"target": {"name": "sim:test", "rotational": rotational, "size_bytes": size},
            "experiments": experiments, "probes": None, "spec": {}}


def _throughput(rec):
    return {a["rule"]: a for a in build_guidance(rec)}["queue-depth-throughput"]


def test_a_disk_sweep_over_part_of_the_disk_names_the_span_and_the_whole_disk_rate():
    advice = _throughput(_record(8 * GiB, 2 * 10**12, rotational=True))
    assert "measured over the first 8 GiB of 2 TB" in advice["text"]
    assert "over the whole disk 4 KiB random reads at QD 32 gave 166 IOPS" in advice["text"]
    assert any(e["finding"] == "random_read_iops_qd32" for e in advice["evidence"])


def test_a_flash_drive_gets_the_span_only_and_a_whole_target_sweep_says_nothing_more():
    flash = _throughput(_record(8 * GiB, 500 * 10**9, rotational=False))["text"]
    assert "measured over the first 8 GiB of 500 GB" in flash and "whole disk" not in flash
    whole = _throughput(_record(0, 2 * 10**12, rotational=True))["text"]
    assert "measured over" not in whole
    no_zoning = _throughput(_record(8 * GiB, 2 * 10**12, rotational=True, zoning=False))["text"]
    assert "measured over the first 8 GiB" in no_zoning and "whole disk" not in no_zoning
