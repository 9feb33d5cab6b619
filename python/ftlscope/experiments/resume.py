"""Resuming an interrupted experiment (``ftlscope bench ... --resume DIR``) at repetition granularity.

After every completed repetition the experiment writes ``raw/checkpoint.json`` (what ran, with which
parameters, on which target, the repetitions done and their engine runs) and ``raw/checkpoint.parquet`` (their
points). ``--resume DIR`` starts at the first repetition not completed, when it is the same experiment with
the same parameters and repetitions on the same target, and the target was not written by anyone else since:

- a block device or file: 64 blocks of 4 KiB spread over the target are fingerprinted (SHA-256) when the
  experiment stops, and must read the same on resume. A sample: a write elsewhere can go unseen, and a process
  killed outright (SIGKILL) leaves the fingerprints of the last checkpoint, which its own unfinished
  repetition then fails (the resume is refused: start again);
- a simulated device is not kept between processes: its state is rebuilt by running the completed repetitions
  again (deterministic in virtual time, so the state is the one they left). That costs their simulation time
  again; their points must come out identical to the checkpoint's, else the resume is refused.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import UsageError
from ..jsonable import plain, write_json

CHECKPOINT = "checkpoint.json"
POINTS = "checkpoint.parquet"
SAMPLES = 64
SAMPLE_BYTES = 4096


def _canonical(value: Any) -> str:
    return json.dumps(plain(value), sort_keys=True, default=str)


def fingerprints(path: str, capacity: int) -> list[str]:
    """SHA-256 of 64 blocks of 4 KiB evenly spread over the target, read with O_DIRECT where it works (so
    the device is read, not the page cache)."""
    step = max(capacity // SAMPLES // SAMPLE_BYTES, 1) * SAMPLE_BYTES
    offsets = [i * step for i in range(SAMPLES) if i * step + SAMPLE_BYTES <= capacity]
    buf = mmap.mmap(-1, SAMPLE_BYTES)  # page-aligned, as O_DIRECT needs
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError:
        fd = os.open(path, os.O_RDONLY)
    try:
        digests = []
        for offset in offsets:
            n = os.preadv(fd, [buf], offset)
            digests.append(hashlib.sha256(buf[:n]).hexdigest()[:16])
        return digests
    finally:
        os.close(fd)
        buf.close()


def save(raw_dir: Path, *, experiment: str, params: dict[str, Any], repeat: int, completed: int,
         rows: list[dict[str, Any]], ctx) -> None:
    """The checkpoint after ``completed`` repetitions (fingerprints are taken by :func:`seal`)."""
    pd.DataFrame(rows).to_parquet(raw_dir / POINTS, index=False)
    write_json(raw_dir / CHECKPOINT, {
        "experiment": experiment,
        "params": plain(params),
        "repeat": repeat,
        "completed": completed,
        "target": {"name": ctx.target, "kind": ctx.kind, "size_bytes": ctx.capacity},
        "runs": ctx.runs,
        "fingerprints": None,
    })


def seal(raw_dir: Path, ctx) -> None:
    """Record what the target holds now (a real target), for resume to check nobody wrote it meanwhile."""
    path = raw_dir / CHECKPOINT
    if ctx.kind == "simulated" or not path.exists():
        return
    state = json.loads(path.read_text())
    state["fingerprints"] = fingerprints(ctx.target, ctx.capacity)
    write_json(path, state)


def load(raw_dir: Path, *, experiment: str, params: dict[str, Any], repeat: int, ctx) -> tuple[list[dict], int]:
    """The points and the number of repetitions already done, or UsageError saying why not to resume."""
    path = raw_dir / CHECKPOINT
    where = raw_dir.parent.parent
    if not path.exists():
        raise UsageError(f"--resume: {where} holds no checkpoint of {experiment} (none of its repetitions "
                         "completed); run it without --resume")
    state = json.loads(path.read_text())
    if state["params"] != json.loads(_canonical(params)) or state["repeat"] != repeat:
        raise UsageError(f"--resume: {where} ran {experiment} with other parameters or --repeat "
                         f"({state['params']}, --repeat {state['repeat']}); give the same, or run afresh")
    target = state["target"]
    if (target["name"], target["size_bytes"]) != (ctx.target, ctx.capacity):
        raise UsageError(f"--resume: {where} ran on {target['name']} ({target['size_bytes']} B), not "
                         f"{ctx.target} ({ctx.capacity} B)")
    if state["completed"] >= repeat:
        raise UsageError(f"--resume: all {repeat} repetitions in {where} completed; nothing to resume")
    if ctx.kind != "simulated":
        if state["fingerprints"] is None:
            raise UsageError(f"--resume: {where} has no record of what {ctx.target} held when the run stopped "
                             "(it was killed outright); run afresh")
        now = fingerprints(ctx.target, ctx.capacity)
        changed = sum(a != b for a, b in zip(now, state["fingerprints"], strict=False))
        if changed or len(now) != len(state["fingerprints"]):
            raise UsageError(f"--resume: {ctx.target} was written since the run stopped ({changed} of "
                             f"{len(now)} sampled blocks changed); run afresh without --resume")
        ctx.runs = list(state["runs"])
        if ctx.runs:  # the target's description in experiment.json comes from the first run
            ctx.first_summary = json.loads((raw_dir / ctx.runs[0]["summary"]).read_text())
    rows = pd.read_parquet(raw_dir / POINTS).to_dict("records") if state["completed"] else []
    return rows, int(state["completed"])


def check_replay(replayed: list[dict[str, Any]], saved: list[dict[str, Any]], target: str) -> None:
    """A simulated device's replayed repetitions must give the checkpoint's points exactly."""
    try:
        pd.testing.assert_frame_equal(pd.DataFrame(replayed), pd.DataFrame(saved), check_dtype=False)
    except AssertionError:
        raise UsageError(f"--resume: replaying the completed repetitions on {target} (a simulated device is not "
                         "kept between processes) did not give the saved points; run afresh without --resume") from None
