"""The workload description, mirroring the engine's JSON (crates/ftlscope-engine/src/workload.rs).

Build one directly (``Workload(mix={"read": 70, "write": 30}, sizes=[4096], queue_depth=32)``), from fio-like
flags (:func:`from_flags`), or from JSON (:meth:`Workload.from_json`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from .errors import UsageError
from .units import U64_MAX, parse_duration_ns, parse_fio_size, parse_size

OPS = ("read", "write", "trim", "write_zeroes", "flush")
WRITING_OPS = ("write", "trim", "write_zeroes")
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
    # fio's rate / rate_iops for the whole run: {"bytes_per_s": {"read", "write", "trim"}, "iops": {...}};
    # missing or 0 means no limit (see the engine's workload.rs `Rate`).
    rate: dict[str, dict[str, int]] = field(default_factory=dict)
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
        return any(self.mix.get(op, 0) > 0 for op in WRITING_OPS)

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


# The engine's limits (crates/ftlscope-engine/src/workload.rs), checked here so the message names the flag.
MAX_REQUEST = 2**32 - 1  # request sizes are u32
MAX_DEPTH = 65536
MAX_QUEUES = 256
MAX_WINDOW = 4096
MAX_WEIGHT = 2**32 - 1
# Above this theta a Zipf walk is one offset: rank 1 takes 1/zeta(10) = 99.9% of the requests.
MAX_ZIPF_THETA = 10.0


def _count(text: str, what: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{what}: cannot read '{text}' as a whole number; give {low} to {high}") from None
    if not low <= value <= high:
        raise UsageError(f"{what}: {value} is out of range; give {low} to {high}")
    return value


def _fraction(text: str, what: str, low: float, high: float, *, low_open: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value > high or value < low or (low_open and value == low):
        bounds = f"above {low:g} and at most {high:g}" if low_open else f"from {low:g} to {high:g}"
        raise UsageError(f"{what}: '{text}' is not a number {bounds}")
    return value


def parse_pattern(text: str) -> dict[str, Any]:
    """``sequential``, ``random``, ``permutation``, ``permuted-windows:4``, ``strided:64k``,
    ``hotset:START:LENGTH:SHARE``, ``zipf:1.2``."""
    name, _, args = text.partition(":")
    parts = args.split(":") if args else []
    name = name.replace("-", "_")
    if name in ("sequential", "random", "permutation") and not parts:
        return {"kind": name}
    if name == "permuted_windows" and len(parts) == 1:
        return {"kind": name, "window": _count(parts[0], "--pattern permuted-windows:N", 1, MAX_WINDOW)}
    if name == "strided" and len(parts) == 1:
        return {"kind": name, "stride": parse_size(parts[0], "--pattern strided:SIZE", minimum=1)}
    if name == "hotset" and len(parts) == 3:
        return {"kind": "hot_set", "hot_start": parse_size(parts[0], "--pattern hotset:START"),
                "hot_length": parse_size(parts[1], "--pattern hotset:LENGTH", minimum=1),
                "hot_share": _fraction(parts[2], "--pattern hotset:SHARE", 0.0, 1.0)}
    if name == "zipf" and len(parts) == 1:
        theta = _fraction(parts[0], "--pattern zipf:THETA", 0.0, MAX_ZIPF_THETA, low_open=True)
        return {"kind": name, "theta": theta}
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
        if op in mix:
            raise UsageError(f"--mix: {op} is given twice in '{text}'; give each operation once")
        mix[op] = _count(weight.strip(), f"--mix {op}", 0, MAX_WEIGHT)
    if not any(mix.values()):
        raise UsageError(f"--mix: every weight in '{text}' is zero; give at least one operation a weight")
    return mix


DIRECTIONS = ("read", "write", "trim")


def parse_rate(text: str, what: str = "--rate", kb_base: int = 1024) -> dict[str, int]:
    """fio's per-direction form ``READ[,WRITE[,TRIM]]`` (``10m``, ``10m,5m``, ``,5m``): a value not followed
    by a comma also applies to the directions after it, an empty one means no limit (fio's HOWTO, ``bs``).
    Sizes follow fio's units; a ``/s`` after a value is accepted (``10MB/s``)."""
    parts = [part.strip() for part in str(text).split(",")]
    if len(parts) > 3:
        raise UsageError(f"{what}: '{text}' has more than three values; give READ[,WRITE[,TRIM]]")
    while len(parts) < 3 and parts[-1]:
        parts.append(parts[-1])
    limits = {}
    for direction, part in zip(DIRECTIONS, parts + [""] * (3 - len(parts)), strict=True):
        limits[direction] = parse_fio_size(part.removesuffix("/s"), what, kb_base) if part else 0
    if not any(limits.values()):
        raise UsageError(f"{what}: '{text}' sets no limit; give e.g. 10m or 10m,5m")
    return limits


def from_flags(
    rw: str | None = None,
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
    rate: str | None = None,
    rate_iops: str | None = None,
    kb_base: int = 1024,
) -> Workload:
    """A workload from fio-like flags (the CLI's ``run`` and ``fio-check`` share this). ``rw`` defaults to
    randread; given together with ``mix``, it sets the pattern and the mix may use only its operations."""
    mode = rw or "randread"
    if mode not in RW_MODES:
        raise UsageError(f"--rw: unknown mode '{mode}'; use one of {', '.join(RW_MODES)}")
    base_mix, kind = RW_MODES[mode]
    if base_mix is None:
        read = 50 if rwmixread is None else rwmixread
        if not 0 <= read <= 100:
            raise UsageError(f"--rwmixread: {read} is not a percentage; give 0 to 100")
        base_mix = {"read": read, "write": 100 - read}
    the_mix = parse_mix(mix) if mix else dict(base_mix)
    if mix and rw and set(base_mix) == {"read"}:
        # A read mode says "do not write": a mix that writes anyway would destroy what the user meant to read.
        extra = sorted(op for op, weight in the_mix.items() if weight and op in WRITING_OPS)
        if extra:
            raise UsageError(f"--mix: {mix} writes ({', '.join(extra)}) while --rw {rw} asks for reads only; "
                             "drop --rw (the mix alone sets the operations) or give a mix of reads")
    the_pattern = parse_pattern(pattern) if pattern else {"kind": kind}
    # fio's flags read sizes as fio does (``4kb`` is 4096; units.parse_fio_size).
    sizes = [parse_fio_size(s, "--bs", kb_base, minimum=1, maximum=MAX_REQUEST) for s in bs.split(",")]
    qd = _count(str(qd), "--qd", 1, MAX_DEPTH)
    queues = _count(str(queues), "--queues", 1, MAX_QUEUES)
    seed = _count(str(seed), "--seed", 0, U64_MAX)
    stop: dict[str, int] = {}
    # Zero would mean "no limit" to the engine (a run without end), so a limit the user gives must be above 0.
    if runtime is not None:
        stop["time_ns"] = parse_duration_ns(runtime, "--runtime", minimum=1)
    if ops is not None:
        stop["ops"] = _count(str(ops), "--ops", 1, U64_MAX)
    if total_bytes is not None:
        stop["bytes"] = parse_size(total_bytes, "--bytes", minimum=1)
    if not stop:
        stop["time_ns"] = 10 * 10**9
    warm: dict[str, int] = {}
    if warmup:
        warm["time_ns"] = parse_duration_ns(warmup, "--warmup")
    if warmup_ops is not None and _count(str(warmup_ops), "--warmup-ops", 0, U64_MAX):
        warm["ops"] = warmup_ops
    the_batch = None
    if batch is not None:
        batch = _count(str(batch), "--batch", 1, MAX_DEPTH)
        the_batch = {"size": batch, "idle_ns": parse_duration_ns(idle, "--idle") if idle else 0}
    elif idle:
        raise UsageError("--idle: idle gaps go between batches; give --batch N as well")
    data = {"lba": "lba_stamped", "aa": "0xaa"}.get(data, data)
    the_rate = {}
    if rate:
        the_rate["bytes_per_s"] = parse_rate(rate, "--rate", kb_base)
    if rate_iops:
        the_rate["iops"] = parse_rate(rate_iops, "--rate-iops", kb_base)
    if the_rate and batch:
        raise UsageError("--rate: batch mode sets its own pace (--batch and --idle); drop one of the two")
    return Workload(
        mix=the_mix,
        sizes=sizes,
        pattern=the_pattern,
        range={"start": parse_fio_size(offset, "--offset", kb_base),
               "length": parse_fio_size(size, "--size", kb_base, minimum=1) if size else 0},
        align_offset=parse_size(align_offset, "--align-offset"),
        queue_depth=batch or qd,
        queues=queues,
        batch=the_batch,
        stop=stop,
        warmup=warm,
        data=data,
        rate=the_rate,
        seed=seed,
    )
