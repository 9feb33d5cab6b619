"""An ``ftlscope newt`` run as the store keeps it: a record shaped like a profile's (suite ``newt``, one
experiment ``newt`` whose findings are :data:`ftlscope.metrics.NEWT_FINDINGS`), so ``runs``, ``export`` and SQL
see it like any run; and the lookup the report's guidance uses to cite the measured gain for a device."""

from __future__ import annotations

from typing import Any

from ..metrics import NEWT_EXPERIMENT, NEWT_STATISTICS, newt_gain_finding, newt_latency_finding
from .latency import headline

SOURCE = "Fantastic SSD Internals and How to Learn and Use Them, §5 (read-size alignment, write rate limiting)"


def findings(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The findings of a newt run, from its JSON document (see :func:`ftlscope.newt.command.newt_document`)."""
    out: dict[str, dict[str, Any]] = {}
    trace = doc["trace"]

    def put(name: str, value: Any, unit: str, evidence: str) -> None:
        out[name] = {"value": value, "unit": unit, "evidence": evidence}

    # The latencies the gain is measured on: from each request's arrival in an open-loop replay (as the
    # application waits), else from submission (the document's latency_from).
    measured = f"latency from {doc['latency_from']}"
    for op, gains in doc["gain_pct"].items():
        for key in NEWT_STATISTICS:
            before, after = headline(doc, "before")[op]["lat_ns"][key], headline(doc, "after")[op]["lat_ns"][key]
            put(newt_latency_finding(op, key, "before"), before / 1e3, "us",
                f"{op} {key} ({measured}) replaying {trace} as it is")
            put(newt_latency_finding(op, key, "after"), after / 1e3, "us",
                f"{op} {key} ({measured}) replaying {trace} with the optimizations")
            put(newt_gain_finding(op, key), gains[key], "%", f"{op} {key} ({measured}): (before - after) / before")
    for op, row in doc["throughput"].items():
        put(f"{op}_mb_s_before", row["before_mb_s"], "MB/s", f"{op} MB/s replaying {trace} as it is")
        put(f"{op}_mb_s_after", row["after_mb_s"], "MB/s", f"{op} MB/s replaying {trace} with the optimizations")
    aligned = (doc["optimizations"] or {}).get("align_reads")
    if aligned:
        put("extra_read_bytes", aligned["extra_bytes"], "B", "bytes the aligned reads read beyond the trace's")
        put("extra_read_pct", aligned["extra_pct"], "%", "extra bytes as a share of the trace's read bytes")
    held = doc.get("held") or {}
    for key, unit, what in (("held_bytes_max", "B", "most write bytes the shim held back at once"),
                            ("held_bytes_mean", "B", "write bytes the shim held back, mean over time"),
                            ("write_delay_mean_us", "us", "mean delay the shim added to a write")):
        if held.get(key) is not None:
            put(key, held[key], unit, what)
    return out


def record(doc: dict[str, Any], *, run_id: str, created_at: str, target: dict[str, Any],
           figures: list[str], wall_time_s: float) -> dict[str, Any]:
    """The store's record of a newt run whose files (``newt.json``, ``results.csv``, the figures) are in one
    directory."""
    device_s = sum((doc[when]["run"].get("measured_ns") or 0) for when in ("before", "after")) / 1e9
    return {
        "run_id": run_id, "created_at": created_at, "suite": NEWT_EXPERIMENT, "target": target,
        "env": doc["before"].get("env") or {}, "completed": doc["completed"], "stopped": doc.get("stopped"),
        "wall_time_s": wall_time_s, "device_time_s": device_s, "options": doc["options"], "spec": {},
        "health_before": doc["before"].get("health"), "health_after": doc["after"].get("health"),
        "probes": None, "card": [], "guidance": [],
        "experiments": [{
            "name": NEWT_EXPERIMENT, "summary": "a trace replayed without and with Newt's optimizations",
            "source": SOURCE, "directory": ".", "results": "results.csv", "figures": figures,
            "findings": findings(doc), "params": doc["options"], "completed": doc["completed"],
            "device_time_s": device_s, "wall_time_s": wall_time_s,
        }],
        "newt": {key: doc.get(key) for key in ("trace", "optimizations", "latency_from", "gain_pct", "gain_pct_device",
                                               "throughput", "params")},
        "notes": doc.get("notes") or [],
    }


def newt_runs_for(store: Any, identity: str | None) -> list[dict[str, Any]]:
    """The newt runs stored for the device ``identity``, newest first, each as the guidance reads it:
    ``run_id``, ``created_at``, ``trace``, ``optimizations``, ``findings``."""
    if not identity or getattr(store, "missing", False):
        return []
    runs = store.list_runs()
    out = []
    for run_id in runs.loc[runs["identity"] == identity, "run_id"]:
        stored = store.get(run_id).record
        if stored.get("suite") != NEWT_EXPERIMENT or not stored.get("newt"):
            continue
        experiment = next((e for e in stored.get("experiments") or [] if e.get("name") == NEWT_EXPERIMENT), {})
        out.append({"run_id": run_id, "created_at": stored["created_at"], "trace": stored["newt"]["trace"],
                    # Runs stored before the gain was measured from arrival have no latency_from: submission.
                    "latency_from": stored["newt"].get("latency_from") or "submission",
                    "optimizations": stored["newt"]["optimizations"], "findings": experiment.get("findings") or {}})
    return out


def attach_newt_runs(record: dict[str, Any], store: Any) -> dict[str, Any]:
    """Put the newt runs of ``record``'s device (from ``store``) into ``record["newt_runs"]``, where the
    guidance's write-rate and read-size rules look for a measured gain. Returns ``record``."""
    record["newt_runs"] = newt_runs_for(store, (record.get("target") or {}).get("identity"))
    return record
