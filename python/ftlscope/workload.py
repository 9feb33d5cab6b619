"""The workload description, mirroring the engine's JSON (crates/ftlscope-engine/src/workload.rs).

Build one directly (``Workload(mix={"read": 70, "write": 30}, sizes=[4096], queue_depth=32)``), from fio-like
flags (:func:`from_flags`), or from JSON (:meth:`Workload.from_json`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .errors import UsageError
from .units import parse_duration_ns, parse_size

OPS = ("read", "write", "trim", "write_zeroes", "flush")
DATA_PATTERNS = ("zeros", "ones", "0xaa", "lba_stamped", "verify", "random")


@dataclass
class Workload:
    """What to run. Every field has the engine's default; see the README's workload reference."""

    mix: dict[str, int] = field(default_factory=lambda: {"read": 100})
    sizes: list[int] = field(default_factory=lambda: [4096])
    pattern: dict[str, Any] = field(default_factory=lambda: {"kind": "sequential"})
    range: dict[str, int] = field(default_factory=lambda: {"start": 0, "length": 0})
    align_offset: int = 0
    queue_depth: int = 1
    queues: int = 1
    batch: dict[str, int] | None = None
    stop: dict[str, int] = field(default_factory=dict)
    warmup: dict[str, int] = field(default_factory=dict)
    data: str = "random"
    seed: int = 1
    # With data "verify": tells this run's stamps from another run's (see verify.py).
    verify_tag: int = 0

    def __post_init__(self) -> None:
        unknown = set(self.mix) - set(OPS)
        if unknown:
            raise UsageError(f"mix: unknown operation(s) {sorted(unknown)}; use {', '.join(OPS)}")
        if self.data not in DATA_PATTERNS:
            raise UsageError(f"--data: unknown pattern '{self.data}'; use zeros, ones, 0xaa, lba, verify or random")

    @property
    def writes(self) -> bool:
        return any(self.mix.get(op, 0) > 0 for op in ("write", "trim", "write_zeroes"))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["batch"] is None:
            del d["batch"]
        if not d["verify_tag"]:
            del d["verify_tag"]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Workload:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise UsageError(f"workload: unknown field(s) {sorted(unknown)}")
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> Workload:
        return cls.from_dict(json.loads(text))

    def replace(self, **changes: Any) -> Workload:
        return dataclasses.replace(self, **changes)


# fio's --rw names: (mix, pattern kind)
RW_MODES = {
    "read": ({"read": 100}, "sequential"),
    "write": ({"write": 100}, "sequential"),
    "randread": ({"read": 100}, "random"),
    "randwrite": ({"write": 100}, "random"),
    "rw": (None, "sequential"),
    "readwrite": (None, "sequential"),
    "randrw": (None, "random"),
    "trim": ({"trim": 100}, "sequential"),
    "randtrim": ({"trim": 100}, "random"),
    "writezeroes": ({"write_zeroes": 100}, "sequential"),
    "flush": ({"flush": 100}, "sequential"),
}


def parse_pattern(text: str) -> dict[str, Any]:
    """``sequential``, ``random``, ``permutation``, ``permuted-windows:4``, ``strided:64k``,
    ``hotset:START:LENGTH:SHARE``, ``zipf:1.2``."""
    name, _, args = text.partition(":")
    parts = args.split(":") if args else []
    name = name.replace("-", "_")
    try:
        if name in ("sequential", "random", "permutation") and not parts:
            return {"kind": name}
        if name == "permuted_windows" and len(parts) == 1:
            return {"kind": name, "window": int(parts[0])}
        if name == "strided" and len(parts) == 1:
            return {"kind": name, "stride": parse_size(parts[0], "--pattern strided")}
        if name == "hotset" and len(parts) == 3:
            return {"kind": "hot_set", "hot_start": parse_size(parts[0], "--pattern hotset start"),
                    "hot_length": parse_size(parts[1], "--pattern hotset length"),
                    "hot_share": float(parts[2])}
        if name == "zipf" and len(parts) == 1:
            return {"kind": name, "theta": float(parts[0])}
    except ValueError:
        pass
    raise UsageError(
        f"--pattern: cannot read '{text}'; use sequential, random, permutation, permuted-windows:N, "
        "strided:SIZE, hotset:START:LENGTH:SHARE or zipf:THETA"
    )


def parse_mix(text: str) -> dict[str, int]:
    """``read=70,write=30``."""
    mix: dict[str, int] = {}
    for item in text.split(","):
        op, _, weight = item.partition("=")
        op = op.strip().replace("-", "_")
        # ASCII digits only: str.isdigit() also takes '²', which int() then rejects with a traceback.
        if op not in OPS or not (weight.strip().isascii() and weight.strip().isdigit()):
            raise UsageError(f"--mix: cannot read '{item}'; write e.g. read=70,write=30 (ops: {', '.join(OPS)})")
        mix[op] = int(weight)
    return mix


def from_flags(
    rw: str = "randread",
    bs: str = "4k",
    qd: int = 1,
    queues: int = 1,
    rwmixread: int | None = None,
    mix: str | None = None,
    pattern: str | None = None,
    offset: str = "0",
    size: str | None = None,
    align_offset: str = "0",
    batch: int | None = None,
    idle: str | None = None,
    runtime: str | None = None,
    ops: int | None = None,
    total_bytes: str | None = None,
    warmup: str | None = None,
    warmup_ops: int | None = None,
    data: str = "random",
    seed: int = 1,
) -> Workload:
    """A workload from fio-like flags (the CLI's ``run`` and ``fio-check`` share this)."""
    if rw not in RW_MODES:
        raise UsageError(f"--rw: unknown mode '{rw}'; use one of {', '.join(RW_MODES)}")
    base_mix, kind = RW_MODES[rw]
    if base_mix is None:
        read = 50 if rwmixread is None else rwmixread
        if not 0 <= read <= 100:
            raise UsageError("--rwmixread: give a percentage between 0 and 100")
        base_mix = {"read": read, "write": 100 - read}
    the_mix = parse_mix(mix) if mix else dict(base_mix)
    the_pattern = parse_pattern(pattern) if pattern else {"kind": kind}
    sizes = [parse_size(s, "--bs") for s in bs.split(",")]
    if qd < 1:
        raise UsageError("--qd: give a queue depth of at least 1")
    for flag, value in (("--ops", ops), ("--batch", batch), ("--seed", seed), ("--warmup-ops", warmup_ops)):
        if value is not None and value < 0:
            raise UsageError(f"{flag}: give a number of at least 0, not {value}")
    if queues < 1:
        raise UsageError("--queues: give at least 1 queue")
    stop: dict[str, int] = {}
    if runtime:
        stop["time_ns"] = parse_duration_ns(runtime, "--runtime")
    if ops:
        stop["ops"] = ops
    if total_bytes:
        stop["bytes"] = parse_size(total_bytes, "--bytes")
    if not stop:
        stop["time_ns"] = 10 * 10**9
    warm: dict[str, int] = {}
    if warmup:
        warm["time_ns"] = parse_duration_ns(warmup, "--warmup")
    if warmup_ops:
        warm["ops"] = warmup_ops
    the_batch = None
    if batch:
        the_batch = {"size": batch, "idle_ns": parse_duration_ns(idle, "--idle") if idle else 0}
    elif idle:
        raise UsageError("--idle: idle gaps go between batches; give --batch N as well")
    data = {"lba": "lba_stamped", "aa": "0xaa"}.get(data, data)
    return Workload(
        mix=the_mix,
        sizes=sizes,
        pattern=the_pattern,
        range={"start": parse_size(offset, "--offset"), "length": parse_size(size, "--size") if size else 0},
        align_offset=parse_size(align_offset, "--align-offset"),
        queue_depth=batch or qd,
        queues=queues,
        batch=the_batch,
        stop=stop,
        warmup=warm,
        data=data,
        seed=seed,
    )
