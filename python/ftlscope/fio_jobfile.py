"""fio job files for ``ftlscope run JOBFILE.fio``: fio's common options, mapped onto ``run``'s own flags.

:func:`read_jobfile` reads a job file (``[global]`` then one job section; ``[global]`` options are inherited
and the job's override them, as in fio) and returns the ``run`` flags it sets. fio's syntax is INI with two
twists that :mod:`configparser` takes with the right settings: options without a value (``time_based``) and
repeated options (the last wins). Comments are lines starting with ``;`` or ``#``.

What maps (fio's option → ``run``'s flag):

=====================================  ===================================================================
``filename``                           the target (``sim\\:PRESET`` for a simulated drive: fio escapes ``:``)
``rw``/``readwrite``                   ``--rw`` (read, write, randread, randwrite, rw, readwrite, randrw,
                                       trim, randtrim); random ones walk every block once per pass
                                       (``--pattern permutation``) as fio's random map does, or draw
                                       offsets independently with ``norandommap``
``bs``/``blocksize``                   ``--bs`` (one size; per-direction sizes are refused)
``iodepth``, ``numjobs``               ``--qd``, ``--queues`` (each job one queue)
``size``, ``offset``                   ``--size`` (per job, as fio's), ``--offset``; without ``time_based``
                                       fio stops after ``size`` bytes per job: ``--bytes size x numjobs``
``runtime``, ``time_based``            ``--runtime`` (``time_based`` needs ``runtime``)
``ramp_time``                          ``--warmup``
``rwmixread``/``rwmixwrite``           ``--rwmixread``
``rate``, ``rate_iops``                ``--rate``, ``--rate-iops`` x numjobs (fio's limits are per job)
``direct``/``buffered``                ``--buffered`` when not direct
``ioengine``                           io_uring → ``uring``; psync, sync, pvsync → ``psync`` (one request in
                                       flight per job, as fio's: ``iodepth`` is ignored with a notice);
                                       libaio → ``uring`` with a notice
``randseed``, ``kb_base``              ``--seed``; the unit base of this file's sizes
``name``, ``description``,             accepted, no effect (one job, reported as one group; ftlscope's queues
``group_reporting``, ``thread``,       are threads; its offsets are seeded)
``randrepeat``
=====================================  ===================================================================

Everything else is refused in one line naming each unsupported option, and so is a file of several jobs
(ftlscope runs one workload at a time: split the file, one job each).
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError
from .units import parse_duration_ns, parse_fio_size
from .workload import RW_MODES, parse_rate

ENGINES = {"io_uring": "uring", "psync": "psync", "sync": "psync", "pvsync": "psync", "libaio": "uring"}
FIO_RW = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim")
ALIASES = {"readwrite": "rw", "blocksize": "bs"}
NO_EFFECT = ("name", "description", "group_reporting", "thread", "randrepeat")
SUPPORTED = (
    "filename", "rw", "bs", "iodepth", "numjobs", "size", "offset", "runtime", "time_based", "ramp_time",
    "rwmixread", "rwmixwrite", "rate", "rate_iops", "direct", "buffered", "ioengine", "randseed", "kb_base",
    "norandommap", *NO_EFFECT,
)


@dataclass
class JobFile:
    """A job file's one job, as ``run`` flags (``flags``: argparse destinations of ``run``), plus what fio
    would report as its options and anything the user should know about the mapping."""

    path: str
    job: str
    flags: dict[str, Any]
    global_options: dict[str, str]
    job_options: dict[str, str]
    notices: list[str] = field(default_factory=list)


def looks_like_jobfile(target: str) -> bool:
    """A path ending in ``.fio``, or a regular file whose first non-blank character is ``[``."""
    if target.endswith(".fio"):
        return True
    try:
        if not Path(target).is_file():
            return False
        with open(target, "rb") as f:
            head = f.read(4096).lstrip()
    except OSError:
        return False
    return head.startswith(b"[")


def _parser() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(
        allow_no_value=True,  # time_based, norandommap, ... take no value
        strict=False,  # fio lets a later line set an option again
        delimiters=("=",),
        comment_prefixes=("#", ";"),
        inline_comment_prefixes=None,
        interpolation=None,
        default_section="\x00none",  # [global] is an ordinary section, inherited by hand below
    )
    parser.optionxform = str.lower  # type: ignore[assignment,method-assign]
    return parser


def _flag(value: str | None) -> bool:
    """fio's bool options: bare (``time_based``) or 0/1."""
    if value is None or value.strip() == "":
        return True
    if value.strip() in ("0", "1"):
        return value.strip() == "1"
    raise UsageError(f"'{value}' is not 0 or 1")


def _fio_time(value: str, what: str) -> int:
    """fio's time values: seconds by default; ``sec``, ``msec``, ``usec`` are also written."""
    text = value.strip().lower()
    for long, short in (("msec", "ms"), ("usec", "us"), ("sec", "s")):
        if text.endswith(long):
            text = text[: -len(long)] + short
            break
    return parse_duration_ns(text, what)


def read_jobfile(path: str) -> JobFile:
    """The run flags of the job file at ``path``; UsageError naming what cannot be run."""
    parser = _parser()
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f, source=path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the job file ({exc.strerror})") from None
    except configparser.Error as exc:
        first = str(exc).splitlines()[0]
        raise UsageError(f"{path}: not a fio job file ({first})") from None
    jobs = [s for s in parser.sections() if s != "global"]
    if not jobs:
        raise UsageError(f"{path}: no job section; add one, e.g. [job] after [global]")
    if len(jobs) > 1:
        raise UsageError(
            f"{path}: {len(jobs)} jobs ({', '.join(jobs)}): ftlscope runs one job per run; split the file, one job each"
        )
    job = jobs[0]
    global_options = dict(parser["global"]) if parser.has_section("global") else {}
    job_options = dict(parser[job])
    options = {ALIASES.get(k, k): v for k, v in {**global_options, **job_options}.items()}
    unsupported = sorted(k for k in options if k not in SUPPORTED)
    if unsupported:
        runs = ", ".join(SUPPORTED[: -len(NO_EFFECT)])
        raise UsageError(f"{path}: fio option(s) ftlscope does not run: {', '.join(unsupported)} (it runs {runs})")
    flags, notices = _flags(path, options)
    return JobFile(path, job, flags, {k: v or "" for k, v in global_options.items()},
                   {k: v or "" for k, v in job_options.items()}, notices)


def _flags(path: str, options: dict[str, str | None]) -> tuple[dict[str, Any], list[str]]:
    def value(name: str) -> str:
        text = options.get(name)
        if text is None or not text.strip():
            raise UsageError(f"{path}: {name} needs a value")
        return text.strip()

    def option(name: str, convert: Any) -> Any:
        try:
            return convert(value(name))
        except UsageError as exc:
            raise UsageError(f"{path}: {name}={options.get(name)}: {exc.message}") from None
        except ValueError:
            raise UsageError(f"{path}: {name}={options.get(name)} is not a whole number") from None

    flags: dict[str, Any] = {}
    notices: list[str] = []
    kb_base = option("kb_base", int) if "kb_base" in options else 1024
    if kb_base not in (1000, 1024):
        raise UsageError(f"{path}: kb_base={kb_base}: fio takes 1000 or 1024")

    def switch(name: str) -> bool:
        if name not in options:
            return False
        try:
            return _flag(options[name])
        except UsageError as exc:
            raise UsageError(f"{path}: {name}={options[name]}: {exc.message}") from None

    def size(name: str) -> int:
        return option(name, lambda t: parse_fio_size(t, name, kb_base))

    if "filename" not in options:
        raise UsageError(f"{path}: no filename; add filename=/dev/... (or filename=sim\\:PRESET for a simulated drive)")
    target = value("filename")
    if ":" in target.replace("\\:", ""):
        raise UsageError(f"{path}: filename={target}: several files (':'-separated); ftlscope runs one target")
    flags["target"] = target.replace("\\:", ":")

    rw = option("rw", str) if "rw" in options else "read"  # fio's default
    if rw not in FIO_RW:
        raise UsageError(f"{path}: rw={rw}: ftlscope runs {', '.join(FIO_RW)}")
    flags["rw"] = rw
    random = RW_MODES[rw][1] == "random"
    if random and not switch("norandommap"):
        # fio's random map: every block once per pass, as --pattern permutation walks them
        flags["pattern"] = "permutation"

    if "bs" in options:
        sizes = {size_part for size_part in value("bs").split(",") if size_part.strip()}
        if len(sizes) != 1:
            raise UsageError(f"{path}: bs={value('bs')}: per-direction sizes are not run; give one size")
        flags["bs"] = str(option("bs", lambda t: parse_fio_size(t.split(",")[0], "bs", kb_base)))
    numjobs = option("numjobs", int) if "numjobs" in options else 1
    if "iodepth" in options:
        flags["qd"] = option("iodepth", int)
    flags["queues"] = numjobs
    if "offset" in options:
        flags["offset"] = str(size("offset"))
    job_size = size("size") if "size" in options else None
    if job_size is not None:
        flags["size"] = str(job_size)
    time_based = switch("time_based")
    runtime_ns = option("runtime", lambda t: _fio_time(t, "runtime")) if "runtime" in options else None
    if time_based:
        if not runtime_ns:
            raise UsageError(f"{path}: time_based needs runtime (how long to run)")
    elif job_size is None:
        raise UsageError(f"{path}: without time_based fio runs until size bytes per job are done; give size= "
                         "or time_based with runtime=")
    else:
        flags["total_bytes"] = str(job_size * numjobs)
    if runtime_ns:
        flags["runtime"] = f"{runtime_ns}ns"
    if "ramp_time" in options:
        flags["warmup"] = f"{option('ramp_time', lambda t: _fio_time(t, 'ramp_time'))}ns"
    if "rwmixread" in options:
        flags["rwmixread"] = option("rwmixread", int)
    elif "rwmixwrite" in options:
        flags["rwmixread"] = 100 - option("rwmixwrite", int)
    for name, dest in (("rate", "rate"), ("rate_iops", "rate_iops")):
        if name in options:
            limits = option(name, lambda t, n=name: parse_rate(t, n, kb_base))
            flags[dest] = ",".join(str(limits[d] * numjobs) for d in ("read", "write", "trim"))
    if "direct" in options:
        direct = switch("direct")
    elif "buffered" in options:
        direct = not switch("buffered")
    else:
        direct = False
        notices.append("the job file sets no direct=1: buffered I/O through the page cache, as fio's default; "
                       "add direct=1 to measure the device")
    flags["buffered"] = not direct
    if "ioengine" in options:
        engine = value("ioengine")
        if engine not in ENGINES:
            raise UsageError(f"{path}: ioengine={engine}: ftlscope runs {', '.join(ENGINES)}")
        flags["engine"] = ENGINES[engine]
        if engine == "libaio":
            notices.append("ioengine=libaio runs on io_uring (ftlscope has no libaio engine)")
        if ENGINES[engine] == "psync" and flags.get("qd", 1) > 1:
            # fio's HOWTO (iodepth): a synchronous engine keeps one request in flight per job whatever iodepth says
            notices.append(f"ioengine={engine} keeps one request in flight per job, as in fio: iodepth={flags['qd']} "
                           "has no effect (use numjobs for more)")
            flags["qd"] = 1
    if "randseed" in options:
        flags["seed"] = option("randseed", int)
    return flags, notices
