"""Synthetic traces shaped like the workloads "Fantastic SSD Internals and How to Learn and Use Them" replays
(database, search engine, cloud storage; its traces are not public) and the video streaming of "Solid State
Disks vs Magnetic Disks: Making the right choice". Every statistic below is a parameter of the generator and is
stated in docs/traces.md with where it comes from; where no paper gives a number, it is *chosen to resemble* the
published characterisation, and the docs say so. Every trace is labelled synthetic in its metadata.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .names import WORKLOAD_NAMES as NAMES
from .schema import TraceError

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


@dataclass(frozen=True)
class Workload:
    description: str
    source: str
    iops: float                       # mean arrival rate (requests/s)
    read_share: float                 # share of requests that are reads
    read_sizes: dict[int, float]      # size (bytes) -> probability
    write_sizes: dict[int, float]
    seq_prob: float                   # probability a request continues the previous same-op request
    hot_space: float                  # hot region: this share of the span ...
    hot_share: float                  # ... receives this share of the random (non-sequential) requests
    burst_time_share: float           # share of 100 ms slots that are bursts
    burst_factor: float               # arrival rate in a burst slot / mean rate
    span_bytes: int = 64 * GIB
    align: int = 4096

    def mean_size(self) -> float:
        mean = {op: sum(s * p for s, p in sizes.items())
                for op, sizes in (("read", self.read_sizes), ("write", self.write_sizes))}
        return self.read_share * mean["read"] + (1 - self.read_share) * mean["write"]

    def interarrival_cv(self) -> float:
        """The inter-arrival CV of the burst/calm process, read as a mixture of two exponentials weighted by
        the share of arrivals in each state (slot edges ignored); a Poisson process has 1."""
        calm = (1 - self.burst_time_share * self.burst_factor) / (1 - self.burst_time_share)
        q = self.burst_time_share * self.burst_factor  # share of arrivals that fall in bursts
        mean = q / self.burst_factor + (1 - q) / calm
        second = 2 * (q / self.burst_factor**2 + (1 - q) / calm**2)
        return float(np.sqrt(second / mean**2 - 1))

    def sequential_share(self) -> float:
        """Expected share of requests continuing the previous same-op request (hot/cold starts rarely meet)."""
        return self.seq_prob


# Database reads: 65% of sizes are multiples of 512 B but not of 4 KiB ("Fantastic SSD Internals ...", §5.1).
_DB_READS = {8 * KIB: 0.35, 512: 0.11, 1536: 0.11, 2560: 0.11, 3584: 0.11, 5632: 0.11, 7680: 0.10}

WORKLOADS: dict[str, Workload] = {
    "db": Workload(
        description="OLTP database: small random requests, 70% reads, 65% of reads not 4 KiB multiples",
        source="read sizes from 'Fantastic SSD Internals and How to Learn and Use Them' §5.1 (65% of the DB "
               "trace's reads are multiples of 512 B, not 4 KiB); mix, locality and burstiness chosen to "
               "resemble OLTP traces such as the UMass/SPC Financial traces (small, random, skewed)",
        iops=2000, read_share=0.70, read_sizes=_DB_READS,
        write_sizes={4 * KIB: 0.5, 8 * KIB: 0.4, 16 * KIB: 0.1},
        seq_prob=0.05, hot_space=0.2, hot_share=0.8, burst_time_share=0.1, burst_factor=3.0, align=512),
    "search": Workload(
        description="search engine: read-only in practice, page-aligned 8-64 KiB reads, skewed",
        source="page-aligned sizes from 'Fantastic SSD Internals and How to Learn and Use Them' §5.1 (the "
               "search-engine trace has mostly page-aligned I/Os); read share and sizes chosen to resemble "
               "the UMass/SPC WebSearch traces (almost all reads)",
        iops=3000, read_share=0.99, read_sizes={8 * KIB: 0.5, 16 * KIB: 0.3, 32 * KIB: 0.15, 64 * KIB: 0.05},
        write_sizes={4 * KIB: 0.5, 64 * KIB: 0.5},
        seq_prob=0.10, hot_space=0.1, hot_share=0.6, burst_time_share=0.05, burst_factor=4.0),
    "cloud": Workload(
        description="cloud block storage: write-dominated, mixed sizes, strong write bursts",
        source="write dominance chosen to resemble 'An In-Depth Analysis of Cloud Block Storage Workloads in "
               "Large-Scale Production' (Li et al., IISWC 2020, the Alibaba traces); write bursts as in the "
               "CloudStore trace of 'Fantastic SSD Internals and How to Learn and Use Them' §5.2; numbers chosen",
        iops=1500, read_share=0.30,
        read_sizes={4 * KIB: 0.4, 16 * KIB: 0.2, 64 * KIB: 0.2, 128 * KIB: 0.2},
        write_sizes={4 * KIB: 0.45, 8 * KIB: 0.1, 16 * KIB: 0.1, 64 * KIB: 0.15, 128 * KIB: 0.1, 512 * KIB: 0.1},
        seq_prob=0.30, hot_space=0.1, hot_share=0.5, burst_time_share=0.05, burst_factor=8.0),
}

# Video: concurrent clients each streaming one file at 1 MB/s ('Solid State Disks vs Magnetic Disks: Making
# the right choice', §4.4); chunk size and client count chosen.
VIDEO = {"clients": 20, "rate_bytes_per_s": 1_000_000, "chunk_bytes": 256 * KIB, "jitter_share": 0.1,
         "file_bytes": 4 * GIB,
         "source": "1 MB/s per client from 'Solid State Disks vs Magnetic Disks: Making the right choice' "
                   "§4.4 (concurrent video streaming); 20 clients, 256 KiB chunks and 10% jitter chosen",
         "description": "video streaming: 20 clients each reading its own file sequentially at 1 MB/s"}

_SLOT_NS = 100_000_000  # burstiness is modulated per 100 ms slot


@dataclass(frozen=True)
class WriteBursts:
    """Bursts of sequential writes laid over a workload (``trace synth --write-bursts``): every ``every_ns`` from
    the trace's start, ``size`` bytes of ``request``-byte writes arriving evenly at ``rate_bps``, each burst
    continuing where the last ended, from ``offset`` (past the workloads' 64 GiB span, so the bursts never
    overwrite what the workload reads). The shape "Fantastic SSD Internals and How to Learn and Use Them" §5.2
    describes for its search-engine trace: a read-heavy load carrying write bursts that overflow a drive's write
    buffer and make reads wait behind its flushes."""

    size: int
    rate_bps: float = 128e6
    every_ns: int = 500_000_000
    request: int = 128 * KIB
    offset: int = 70 * GIB

    def check(self) -> None:
        if self.size < self.request:
            raise TraceError(f"--write-bursts {self.size}: give at least one {self.request // KIB} KiB write")
        if self.rate_bps <= 0 or self.every_ns <= 0:
            raise TraceError("--burst-rate and --burst-every must be above 0")
        if self.size / self.rate_bps * 1e9 > self.every_ns:
            raise TraceError(f"--write-bursts: a burst of {self.size:,} bytes at {self.rate_bps / 1e6:g} MB/s "
                             f"takes {self.size / self.rate_bps * 1e3:g} ms, longer than --burst-every "
                             f"({self.every_ns / 1e6:g} ms); raise --burst-rate or --burst-every")

    def frame(self, duration_ns: int, categories: list[str]) -> pd.DataFrame:
        per_burst = self.size // self.request
        gap = self.request / self.rate_bps * 1e9
        starts = np.arange(0, duration_ns, self.every_ns, dtype=np.int64)
        submit = (starts[:, None] + np.round(np.arange(per_burst) * gap).astype(np.int64)[None, :]).ravel()
        submit = submit[submit < duration_ns]
        n = len(submit)
        return pd.DataFrame({"op": pd.Categorical(["write"] * n, categories=categories),
                             "offset_bytes": (self.offset + np.arange(n, dtype=np.uint64) * self.request),
                             "size": np.full(n, self.request, dtype=np.uint32),
                             "submit_ns": submit.astype(np.uint64)})


def synth(name: str, duration_ns: int, seed: int, bursts: WriteBursts | None = None) -> pd.DataFrame:
    """A synthetic trace of the named workload, reproducible from the seed (numpy's default Generator), with
    ``bursts`` of writes laid over it if given."""
    if name not in NAMES:
        raise TraceError(f"trace synth: unknown workload {name!r}; use one of {', '.join(NAMES)}")
    if duration_ns < _SLOT_NS:
        raise TraceError(f"--duration {duration_ns / 1e9:g}s: too short; give at least 100ms")
    rng = np.random.default_rng(seed)
    if name == "video":
        frame, params = _video(rng, duration_ns), dict(VIDEO)
    else:
        wl = WORKLOADS[name]
        frame, params = _generic(wl, rng, duration_ns), asdict(wl)
        params["read_sizes"] = {str(k): v for k, v in wl.read_sizes.items()}
        params["write_sizes"] = {str(k): v for k, v in wl.write_sizes.items()}
    if bursts is not None:
        bursts.check()
        extra = bursts.frame(duration_ns, list(frame["op"].cat.categories))
        # Stable: a request of the workload and a burst's write at the same instant keep that order.
        frame = pd.concat([frame, extra]).sort_values("submit_ns", kind="stable").reset_index(drop=True)
        if "process" in frame:
            frame["process"] = frame["process"].astype("string")
        params["write_bursts"] = asdict(bursts)
    frame.attrs["ftlscope"] = {"format": "synthetic", "synthetic": True, "workload": name, "seed": seed,
                               "duration_ns": int(duration_ns), "parameters": params}
    return frame


def _arrivals(rng: np.random.Generator, wl: Workload, duration_ns: int) -> np.ndarray:
    """A Poisson process whose rate switches per 100 ms slot between burst and calm (a two-state MMPP)."""
    slots = int(duration_ns // _SLOT_NS)
    # Exactly the stated share of slots are bursts (placed at random), so the mean rate holds on short traces.
    burst = np.zeros(slots, dtype=bool)
    burst[rng.choice(slots, size=round(slots * wl.burst_time_share), replace=False)] = True
    calm = (1 - wl.burst_time_share * wl.burst_factor) / (1 - wl.burst_time_share)
    rate = wl.iops * np.where(burst, wl.burst_factor, calm) * _SLOT_NS / 1e9
    counts = rng.poisson(rate)
    starts = np.repeat(np.arange(slots, dtype=np.int64) * _SLOT_NS, counts)
    return np.sort(starts + rng.integers(0, _SLOT_NS, size=len(starts)))


def _sizes(rng: np.random.Generator, table: dict[int, float], n: int) -> np.ndarray:
    sizes = np.fromiter(table, dtype=np.int64)
    return rng.choice(sizes, size=n, p=np.fromiter(table.values(), dtype=np.float64))


def _generic(wl: Workload, rng: np.random.Generator, duration_ns: int) -> pd.DataFrame:
    submit = _arrivals(rng, wl, duration_ns)
    n = len(submit)
    is_read = rng.random(n) < wl.read_share
    size = np.where(is_read, _sizes(rng, wl.read_sizes, n), _sizes(rng, wl.write_sizes, n))
    offset = np.empty(n, dtype=np.int64)
    for mask in (is_read, ~is_read):
        idx = np.flatnonzero(mask)
        offset[idx] = _offsets(rng, wl, size[idx])
    op = np.where(is_read, "read", "write")
    return pd.DataFrame({"op": pd.Categorical(op, categories=["read", "write", "trim", "write_zeroes", "flush"]),
                         "offset_bytes": offset.astype(np.uint64), "size": size.astype(np.uint32),
                         "submit_ns": submit.astype(np.uint64)})


def _offsets(rng: np.random.Generator, wl: Workload, size: np.ndarray) -> np.ndarray:
    """One operation's offsets: runs that start at a random (hot or cold) place and continue sequentially."""
    n = len(size)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    seq = rng.random(n) < wl.seq_prob
    seq[0] = False
    run = np.cumsum(~seq) - 1
    starts_needed = int(run[-1]) + 1
    # Keep run starts 1 GiB short of the end so a sequential run never wraps (a wrap would break its sequence).
    room = wl.span_bytes - GIB
    hot = rng.random(starts_needed) < wl.hot_share
    region = np.where(hot, int(room * wl.hot_space), room)
    starts = (rng.integers(0, region // wl.align) * wl.align).astype(np.int64)
    # Within a run, each request starts where the previous one ended: start + sizes so far in the run.
    before = np.cumsum(size) - size
    run_first = np.flatnonzero(~seq)
    return starts[run] + before - before[run_first][run]


def _video(rng: np.random.Generator, duration_ns: int) -> pd.DataFrame:
    v = VIDEO
    period = v["chunk_bytes"] / v["rate_bytes_per_s"] * 1e9
    per_client = int(duration_ns // period)
    frames = []
    for client in range(v["clients"]):
        phase = rng.uniform(0, period)
        jitter = rng.uniform(-v["jitter_share"], v["jitter_share"], per_client) * period / 2
        t = np.clip(phase + np.arange(per_client) * period + jitter, 0, duration_ns - 1).astype(np.int64)
        base = client * v["file_bytes"]
        frames.append(pd.DataFrame({"offset": base + np.arange(per_client, dtype=np.int64) * v["chunk_bytes"],
                                    "submit_ns": t, "process": f"client-{client}"}))
    frame = pd.concat(frames).sort_values("submit_ns", kind="stable").reset_index(drop=True)
    n = len(frame)
    return pd.DataFrame({
        "op": pd.Categorical(["read"] * n, categories=["read", "write", "trim", "write_zeroes", "flush"]),
        "offset_bytes": frame["offset"].to_numpy().astype(np.uint64),
        "size": np.full(n, v["chunk_bytes"], dtype=np.uint32),
        "submit_ns": frame["submit_ns"].to_numpy().astype(np.uint64),
        "process": pd.array(frame["process"], dtype="string"),
    })

