"""The three suites of ``ftlscope profile``: which probes and experiments run, in which order, with which
parameters.

- ``quick``: the probes and the short sweeps (QD 1 baseline, block size, queue depth, alignment) on the first
  8 GiB, the four corners of CrystalDiskMark on 1 GiB, on a hard disk the zoning and access-time reads over the
  whole disk, and a sequential write of at most 60 s of device time from an empty drive, long enough to pass the SLC
  cache of the drives seed 000 measured (their cliffs came after 5-30 s at full speed). Goal: under 2 minutes
  of wall time on the default simulated drive.
- ``standard``: the probes and every experiment that does not need the whole drive, with shorter runtimes
  than the seeds' (3-5 s a point instead of 30 s: the simulated drive and a real one settle in far less); the
  experiments that would fill the whole drive work on its first 16 GiB, and the sequential write over time
  stops after 120 s. Goal: under 15 minutes on the default simulated drive.
- ``full``: every experiment at the seeds' parameters, over the whole drive (random fill, trim before
  overwrite, burst vs steady state for 30 minutes, ...).

Order matters because the drive keeps its state: the read-only experiments come first, on a sequentially
filled range (a hard disk would otherwise still be writing back the scattered writes of the experiments before,
and its sequential reads would measure that), then the experiments that write, whole-range writes last.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UsageError

GiB = 1 << 30


@dataclass(frozen=True)
class Step:
    """One experiment of a suite and the parameters it overrides (as ``--param`` strings)."""

    experiment: str
    params: dict[str, str] = field(default_factory=dict)
    rotational_only: bool = False  # a hard disk's measurement (zoning): left out on flash drives


@dataclass(frozen=True)
class Suite:
    name: str
    summary: str
    probes: bool
    steps: tuple[Step, ...]

    def for_target(self, rotational: bool) -> Suite:
        """The steps that apply to the target: a flash drive leaves out the hard-disk-only ones."""
        if rotational:
            return self
        return Suite(self.name, self.summary, self.probes, tuple(s for s in self.steps if not s.rotational_only))


_SHORT = {"runtime": "1s", "warmup": "200ms"}
_QUICK_SPAN = str(8 * GiB)
_STANDARD_SPAN = str(16 * GiB)

QUICK = Suite(
    "quick",
    "probes P1-P10, QD 1 baseline, block-size and queue-depth sweeps, alignment, the four corners "
    "(CrystalDiskMark's tests), zoning on hard disks, and the write cliff",
    probes=True,
    steps=(
        Step("bs-sweep", {**_SHORT, "span": _QUICK_SPAN}),
        Step("qd-sweep", {**_SHORT, "span": _QUICK_SPAN}),
        Step("alignment", {"span": _QUICK_SPAN}),
        Step("zoning", {"runtime": "500ms", "random_runtime": "1s", "warmup": "100ms"}, rotational_only=True),
        Step("qd1-baseline", {"runtime": "2s", "warmup": "500ms", "span": _QUICK_SPAN}),
        Step("corners", {"runtime": "1s", "warmup": "200ms"}),
        Step("seq-write-over-time", {"runtime": "60s"}),
    ),
)

_POINT = {"runtime": "3s", "warmup": "1s"}

STANDARD = Suite(
    "standard",
    "the probes and every experiment that does not need the whole drive, at shorter runtimes",
    probes=True,
    steps=(
        Step("bs-sweep", {**_POINT, "span": _STANDARD_SPAN}),
        Step("qd-sweep", {**_POINT, "span": _STANDARD_SPAN}),
        Step("locality", {}),
        Step("permuted-reads", {}),
        Step("alignment", {}),
        Step("zoning", {}, rotational_only=True),
        Step("seq-read-over-time", {"span": _STANDARD_SPAN}),
        Step("qd1-baseline", {"runtime": "5s", "warmup": "1s", "span": _STANDARD_SPAN}),
        Step("rw-mix", {**_POINT, "span": _STANDARD_SPAN}),
        Step("corners", {"runtime": "3s", "warmup": "1s"}),
        Step("deep-queue", {"runtime": "2s", "warmup": "500ms"}),
        Step("parallelism", {"span": _STANDARD_SPAN, "runtime": "2s"}),
        Step("working-set", {"span": _STANDARD_SPAN, "runtime": "3s", "warmup": "1s"}),
        Step("reset-behaviour", {}),
        Step("interleaved-vs-grouped", {"span": _STANDARD_SPAN}),
        Step("data-dependence", {"span": _STANDARD_SPAN}),
        Step("bs-sweep-write", {"span": _STANDARD_SPAN}),
        Step("burst-vs-steady", {"span": _STANDARD_SPAN, "runtime": "5min"}),
        Step("seq-write-over-time", {"runtime": "120s"}),
    ),
)


# The experiments that put a file system between ftlscope and the drive ("Performance comparison of SSDs and
# HDDs"): they make file systems on the device, so they run in their own suite, not in "full".
SYSTEM_EXPERIMENTS = (
    "zoning",
    "fs-impact",
    "scheduler-impact",
    "video-streaming",
    "git-checkout",
    "tree-traversal",
)
# Parameters of the system suite's steps, where they differ from the experiment's defaults (its budget: the
# whole suite on a simulated SSD and hard disk pair at --size 16GiB in under 20 minutes of wall time).
_SYSTEM_PARAMS: dict[str, dict[str, str]] = {}
# A tenth of the thesis's kernel tree and 30 of its 160 tags: 10 tags took 39 s on the simulated 7,200 rpm disk
# (27 s on the simulated SSD), repository and file system included (docs/experiments.md).
_SYSTEM_PARAMS["git-checkout"] = {"files": "3000", "dirs": "180", "tags": "30", "span": "2GiB"}
_SYSTEM_PARAMS["tree-traversal"] = {"files": "3000", "dirs": "180", "span": "2GiB"}

SYSTEM = Suite(
    "system",
    "SSD or hard disk through the whole stack: the zoning of the drive, then file systems, I/O schedulers and "
    "applications between the programs and the drive (iozone's four operations per file system and per "
    "scheduler, video streams, git checkouts of a kernel-like tree, reading it in directory, inode and physical "
    "order; needs root; makes file systems)",
    probes=False,
    steps=tuple(Step(name, _SYSTEM_PARAMS.get(name, {})) for name in SYSTEM_EXPERIMENTS),
)


def _full_steps() -> tuple[Step, ...]:
    from ..experiments import EXPERIMENTS

    return tuple(Step(name, rotational_only=name == "zoning") for name in EXPERIMENTS
                 if name == "zoning" or name not in SYSTEM_EXPERIMENTS)


SUITES = {"quick": QUICK, "standard": STANDARD, "system": SYSTEM}


def with_params(suite: Suite, experiment: str, params: dict[str, str]) -> Suite:
    """``suite`` with ``params`` added to every step of ``experiment`` (``profile --sla-p99`` sets qd-sweep's)."""
    steps = tuple(Step(s.experiment, {**s.params, **params}, s.rotational_only) if s.experiment == experiment else s
                  for s in suite.steps)
    return Suite(suite.name, suite.summary, suite.probes, steps)


def get_suite(name: str) -> Suite:
    if name == "full":
        return Suite("full", "the probes and every experiment at the seeds' parameters, over the whole drive",
                     probes=True, steps=_full_steps())
    try:
        return SUITES[name]
    except KeyError:
        raise UsageError(f"--suite: '{name}' is not a suite; give quick, standard, full or system") from None
