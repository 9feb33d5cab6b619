"""The ``ftlscope`` command line.

Every error ftlscope raises on purpose is printed as one line (``ftlscope: error: ...``) with exit code 2
(1 for a run that failed part-way, 128 + the signal for Ctrl-C, SIGTERM or SIGHUP: 130, 143, 129); never a
traceback.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .errors import FtlscopeError, RunError, UsageError
from .newt.shim import add_flags as add_shim_flags
from .units import format_ns, format_size, parse_fio_size

# Tables keep their columns readable when output goes to a pipe or a file (rich would assume 80 columns).
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


def _add_workload_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workload (fio-like)")
    g.add_argument("--rw",
                   help="read, write, randread, randwrite, rw, randrw, trim, randtrim, writezeroes, flush "
                        "(default randread; with --mix it sets only the pattern)")
    g.add_argument("--bs", default="4k",
                   help="request size, or several: 4k,8k (default 4k). --bs, --offset, --size and --rate read "
                        "sizes as fio does: k, kb, KB are all 1024 (fio's default kb_base=1024); KiB, MiB, GiB "
                        "are binary too")
    g.add_argument("--qd", type=int, default=1, help="queue depth per queue (default 1)")
    g.add_argument("--queues", type=int, default=1, help="queues, each its own thread and ring (default 1)")
    g.add_argument("--rwmixread", type=int, help="read percentage for rw/randrw (default 50)")
    g.add_argument("--mix", help="explicit operation weights, e.g. read=70,write=20,trim=10")
    g.add_argument("--pattern", help="offset pattern: sequential, random, permutation, permuted-windows:N, "
                                     "strided:SIZE, hotset:START:LENGTH:SHARE, zipf:THETA")
    g.add_argument("--offset", default="0", help="start of the range (default 0)")
    g.add_argument("--size", help="length of the range; for a file that does not exist, its size")
    g.add_argument("--align-offset", default="0", help="added to every offset, to test misalignment")
    g.add_argument("--batch", type=int, help="batch mode: issue N at once, wait for all, repeat")
    g.add_argument("--idle", help="idle gap between batches (e.g. 10ms)")
    g.add_argument("--runtime", help="stop after this long (default 10s if no other limit)")
    g.add_argument("--ops", type=int, help="stop after this many requests")
    g.add_argument("--bytes", dest="total_bytes", help="stop after this many bytes")
    g.add_argument("--warmup", help="leave out requests issued in the first ... (e.g. 2s)")
    g.add_argument("--warmup-ops", type=int, help="leave out the first N requests")
    g.add_argument("--data", default="random", help="written data: zeros, ones, 0xaa, lba, verify, random (default)")
    g.add_argument("--rate", help="fio's rate: cap bytes per second for the whole run, READ[,WRITE[,TRIM]] "
                                  "(e.g. 10m or 10MB/s, 10m,5m); requests wait before submission, so the wait "
                                  "is not in their latency (as in fio)")
    g.add_argument("--rate-iops", help="fio's rate_iops: cap requests per second, READ[,WRITE[,TRIM]] (e.g. 1000)")
    g.add_argument("--seed", type=int, default=1, help="seed for every random choice (default 1)")


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine and safety")
    g.add_argument("--engine", default="auto",
                   help="auto (default), uring, psync, or psync-pool (psync calls from a worker thread per slot)")
    g.add_argument("--io-timeout", default="30s", help="end the run if a request is outstanding this long")
    g.add_argument("--on-error", default="stop", help="stop (default) or continue after an I/O error")
    g.add_argument("--window", default="100ms", help="length of the time windows (default 100ms)")
    g.add_argument("--no-pin", action="store_true", help="do not pin the queue threads to CPUs")
    g.add_argument("--buffered", action="store_true", help="go through the page cache (no O_DIRECT)")
    g.add_argument("--destructive", metavar="DEVICE",
                   help="allow writing to DEVICE (name the target again); its data is destroyed")
    g.add_argument("--force", action="store_true",
                   help="with --destructive: overwrite even a device holding a file system or partition table")


def add_output_flags(p: argparse.ArgumentParser, title: str, *, json_help: str, trace_help: str,
                     trace_dest: str = "trace") -> argparse._ArgumentGroup:
    """The outputs run and replay share (--json, --trace, --windows, --plots, --quiet, --show-serial), in a group
    the command adds its own to."""
    g = p.add_argument_group(title)
    g.add_argument("--json", help=json_help)
    g.add_argument("--trace", dest=trace_dest, metavar="FILE", help=trace_help)
    g.add_argument("--windows", help="write the time-window table (CSV) here")
    g.add_argument("--plots", metavar="DIR",
                   help="write figures here, per operation: latency histogram, latency CDF with p50/p99/p99.9, "
                        "IOPS and latency over time (PNG)")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    g.add_argument("--show-serial", action="store_true",
                   help="write the drive's serial number as it is (default: a hash)")
    return g


def shim_settings(args: argparse.Namespace):
    """The write shim's settings from run's and replay's flags (see :func:`ftlscope.newt.shim.add_flags`), checked
    before anything is opened; a shim --allow-noop turned off is said here."""
    from .newt.params import NewtParams
    from .newt.premises import forced_warnings
    from .newt.shim import noop_notice, settings_from_args

    settings = settings_from_args(args)
    notice = noop_notice(settings)
    if notice:
        err_console.print(f"ftlscope: {notice}")
    spec, ref = getattr(args, "rate_limit_writes", None), getattr(args, "from_profile", None)
    if spec and spec.strip().lower() != "auto":
        for warning in forced_warnings(None, spec, NewtParams.from_profile(ref) if ref else None):
            err_console.print(f"ftlscope: {warning}")
    return settings


def print_shim(summary: dict) -> None:
    from .metrics import WRITE_SHIM
    from .newt.shim import describe

    line = describe(summary.get(WRITE_SHIM))
    if line:
        console.print(line)


def _add_suite_flags(p: argparse.ArgumentParser, what_writing_does: str) -> None:
    """Target and safety flags of the commands that run many workloads (bench, probe)."""
    p.add_argument("--size", help="for a regular file that does not exist: create it this large")
    p.add_argument("--engine", default="auto",
                   help="auto (default), uring, psync, or psync-pool (psync calls from a worker thread per slot)")
    p.add_argument("--destructive", metavar="DEVICE",
                   help=f"allow writing to DEVICE (name the target again): {what_writing_does}")
    p.add_argument("--force", action="store_true",
                   help="with --destructive: overwrite even a device holding a file system or partition table")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--show-serial", action="store_true",
                   help="write the drive's serial number as it is (default: a hash)")


def _add_db_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help="the SQLite store of runs (default: $FTLSCOPE_DB, else the user's data directory)")


def _workload_from_args(args: argparse.Namespace):
    from .workload import from_flags

    return from_flags(
        rw=args.rw, bs=args.bs, qd=args.qd, queues=args.queues, rwmixread=args.rwmixread, mix=args.mix,
        pattern=args.pattern, offset=args.offset, size=None if _creates_file(args) else args.size,
        align_offset=args.align_offset, batch=args.batch, idle=args.idle, runtime=args.runtime, ops=args.ops,
        total_bytes=args.total_bytes, warmup=args.warmup, warmup_ops=args.warmup_ops, data=args.data,
        seed=args.seed, rate=args.rate, rate_iops=args.rate_iops,
    )


def _creates_file(args: argparse.Namespace) -> bool:
    """For a regular file (or a path that does not exist yet), --size is the file's size, not a sub-range."""
    import os
    import stat

    if args.target.startswith("sim:"):
        return False
    try:
        return not stat.S_ISBLK(os.stat(args.target).st_mode)
    except OSError:
        return True


def _run_kwargs(args: argparse.Namespace) -> dict:
    return dict(
        engine=args.engine, io_timeout=args.io_timeout, on_error=args.on_error, window=args.window,
        pin=not args.no_pin, direct=not args.buffered, destructive=args.destructive, force=args.force,
        # fio's units, as for the range (--size 1GB is 1 GiB either way).
        size=parse_fio_size(args.size, "--size") if args.size and _creates_file(args) else None,
    )


_SUMMARY_COLUMNS = ("op", "ops", "IOPS", "MB/s", "errors", "mean", "p50", "p99", "p99.9", "p99.99", "max")


def _summary_rows(summary: dict) -> list[list[str]]:
    from .workload import OPS

    rows = []
    for op in OPS:
        s = summary.get(op)
        if not s:
            continue
        lat = s["lat_ns"]
        rows.append([
            op, f"{s['ops']:,}", f"{s['iops']:,.0f}", f"{s['bw_bytes'] / 1e6:,.1f}", str(s.get("errors", 0)),
            *(format_ns(lat[k]) for k in ("mean", "p50", "p99", "p99.9", "p99.99", "max")),
        ])
    return rows


def _table(title: str | None, columns: Sequence[str], rows: list[list[str]], picks: Sequence[int]) -> Table:
    table = Table(title=title, title_justify="left")
    for i in picks:
        # no_wrap: a number is never split over lines nor cut; tables are split instead (summary_tables).
        table.add_column(columns[i], justify="left" if i == 0 else "right", no_wrap=True)
    for row in rows:
        table.add_row(*(row[i] for i in picks))
    return table


def summary_tables(summary: dict, title: str, width: int) -> list[Table | Text]:
    """The end-of-run table, one row per operation; on a screen too narrow for it (an 80-column terminal),
    stacked tables that each repeat the op column: counts and throughput, then latency."""
    rows = _summary_rows(summary)
    measure = Console(width=10_000)

    def fits(picks: list[int]) -> bool:
        return measure.measure(_table(None, _SUMMARY_COLUMNS, rows, picks)).maximum <= width

    everything = list(range(len(_SUMMARY_COLUMNS)))
    if fits(everything):
        return [_table(title, _SUMMARY_COLUMNS, rows, everything)]
    groups: list[list[int]] = []
    # Split where the meaning changes (counts | latency), and further only if a part is still too wide.
    for part in (everything[1:5], everything[5:]):
        current = [0]
        for i in part:
            if len(current) > 1 and not fits([*current, i]):
                groups.append(current)
                current = [0]
            current.append(i)
        groups.append(current)
    # The title goes above the stack on its own, wrapped to the screen rather than to the narrower first table.
    return [Text(title), *(_table(None, _SUMMARY_COLUMNS, rows, picks) for picks in groups)]


def describe_workload(workload: dict) -> str:
    """The workload as a reader names it: "random read 4 KiB", or by its mix for a mixed run
    ("read 70 % / write 30 %, random 4 KiB")."""
    mix = {op: w for op, w in workload["mix"].items() if w > 0}
    total = sum(mix.values()) or 1
    kind = workload["pattern"]["kind"]
    sizes = "/".join(format_size(s) for s in workload["sizes"])
    if len(mix) == 1:
        return f"{kind} {next(iter(mix)).replace('_', ' ')} {sizes}"
    shares = " / ".join(f"{op.replace('_', ' ')} {w * 100 / total:.3g} %" for op, w in mix.items())
    return f"{shares}, {kind} {sizes}"


def _precondition_text(run_info: dict) -> str:
    done = run_info.get("precondition")
    if not done:
        return ""
    if done["kind"] == "sequential-fill":
        return f", range filled first ({format_size(done['bytes'])} written)"
    if done["kind"] == "already-filled":
        return ", range already written"
    if done.get("reason", "").startswith("left out"):
        return ", fresh drive: never-written range, not filled (--no-precondition)"
    return ""


def run_title(summary: dict, target: str) -> str:
    env = summary["env"]["engine"]
    run_info = summary["run"]
    wl = summary["workload"]
    title = (
        f"{target} — {describe_workload(wl)} QD {wl['queue_depth']} x {wl['queues']} queue(s), {env['backend']}, "
        f"{run_info['measured_ns'] / 1e9:.2f} s measured{_precondition_text(run_info)}"
    )
    if "mean_in_flight" in run_info and (wl["queue_depth"] > 1 or wl["queues"] > 1):
        # Little's law: a queue depth the engine could not keep shows here, not only in a lower IOPS.
        title += f", {run_info['mean_in_flight']:.1f} in flight on average"
    return title


def _write_plots(result, directory: str) -> str:
    from .run_plots import write_run_plots

    paths = write_run_plots(result, directory)
    return f"{directory}/ ({', '.join(p.name for p in paths)})"


def _usage_since(before: resource.struct_rusage, wall_before: float) -> dict[str, float]:
    """The process's CPU time, context switches and page faults since ``before`` (for fio's usr_cpu ...)."""
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "usr_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime,
        "ctx": (after.ru_nvcsw + after.ru_nivcsw) - (before.ru_nvcsw + before.ru_nivcsw),
        "majf": after.ru_majflt - before.ru_majflt, "minf": after.ru_minflt - before.ru_minflt,
        "wall_s": time.monotonic() - wall_before,
    }


def _apply_jobfile(args: argparse.Namespace):
    """``run JOBFILE``: the job file's options become run's flags (fio_jobfile); a flag given as well as the job
    file option that sets it is refused, so nothing is silently overridden."""
    from .fio_jobfile import read_jobfile

    job = read_jobfile(args.target)
    defaults = build_parser().parse_args(["run", args.target])
    for dest, value in job.flags.items():
        if dest != "target" and getattr(args, dest) not in (getattr(defaults, dest), value):
            flag = "--" + {"qd": "qd", "total_bytes": "bytes", "rate_iops": "rate-iops"}.get(dest, dest)
            raise UsageError(f"{flag}: the job file sets it too; drop {flag} or the option in {job.path}")
        setattr(args, dest, value)
    if "offset" in job.flags and "size" in job.flags and _creates_file(args):
        # A file fio lays out holds the job's range: offset + size bytes.
        args.size = str(int(job.flags["offset"]) + int(job.flags["size"]))
    return job


def cmd_run(args: argparse.Namespace) -> int:
    from .fio_jobfile import looks_like_jobfile

    if args.json_format == "fio" and not args.json:
        raise UsageError("--json-format fio: give --json FILE as well (where to write it)")
    job = _apply_jobfile(args) if looks_like_jobfile(args.target) else None
    for notice in job.notices if job else ():
        err_console.print(f"[dim]ftlscope: {notice}[/dim]")
    workload = _workload_from_args(args)  # before importing the engine and pandas: a bad flag is refused at once
    shim = shim_settings(args)
    if args.verify:
        from .verify import verify_workload

        workload = verify_workload(workload, args.target, args.data)
    from .runner import run

    # --trace is written while the run goes, in flat memory; the figures need every request's latency, so
    # --plots keeps the trace in memory as well.
    usage_before, wall_before = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    result = run(args.target, workload, trace=bool(args.plots), trace_file=args.trace, progress=not args.quiet,
                 precondition=not args.no_precondition, show_serial=args.show_serial, rate_limit_writes=shim,
                 **_run_kwargs(args))
    usage = _usage_since(usage_before, wall_before)
    for notice in result.notices:
        err_console.print(f"[dim]ftlscope: {notice}[/dim]")
    if args.verify:
        from .verify import verify_after_run

        result.summary["verify"] = verify_after_run(result, direct=not args.buffered)
    from .cli_checks import save_run_outputs

    json_writer = None
    if args.json_format == "fio":
        from .fio_json import fio_report
        from .jsonable import write_json

        def json_writer(path):
            return write_json(Path(path), fio_report(result.summary, result.windows, cpu=usage,
                                                global_options=job.global_options if job else None,
                                                jobname=job.job if job else None))

    try:
        saved = save_run_outputs(result, json=args.json, trace=args.trace, windows=args.windows,
                                 plots=args.plots, json_writer=json_writer, verify_record=args.verify_record,
                                 plots_writer=lambda directory: _write_plots(result, directory))
        unsaved = None
    except RunError as exc:  # shown after the table: what was measured is printed and kept either way
        saved, unsaved = [], exc
    for table in summary_tables(result.summary, run_title(result.summary, args.target), console.width):
        console.print(table)
    print_shim(result.summary)
    if args.verify:
        _print_verify(result.summary["verify"], f"{args.target} — verify (read back after the run)")
    code = end_of_run(result, saved, unsaved)
    if code == 0 and args.verify:
        from .verify import check_verified

        check_verified(result.summary["verify"])
    return code


def end_of_run(result, saved: list[str], unsaved: Exception | None) -> int:
    """The end a run-shaped command (run, replay) shares once its tables are printed: say what was written,
    then an output that could not be written (exit 1), an interruption (its exit code) or a failed run."""
    from .runner import check_outcome

    if saved:
        err_console.print(f"[dim]ftlscope: wrote {', '.join(saved)}[/dim]")
    if unsaved is not None:
        raise unsaved
    if result.stop_reason == "interrupted":
        from . import stopping

        err_console.print(f"ftlscope: {stopping.what_stopped()}; the results above cover what was measured "
                          "before it")
        return stopping.exit_code()
    check_outcome(result)
    return 0


def _print_verify(report: dict, title: str) -> None:
    from .verify import mismatch_table, verify_table

    console.print(verify_table(report, title))
    where = mismatch_table(report)
    if where is not None:
        console.print(where)


def cmd_verify(args: argparse.Namespace) -> int:
    from .jsonable import write_json
    from .verify import check_verified, verify_target

    tag, record = args.tag, None
    if args.record:
        from .verify import load_write_record

        tag, record = load_write_record(args.record)
        if args.tag and args.tag != tag:
            raise UsageError(f"--tag: {args.tag:#x} is not the tag of the run whose record --record gives "
                             f"({tag:#x}); drop --tag")
    report = verify_target(
        args.target, offset=args.offset, size=args.size, tag=tag, write_record=record, direct=not args.buffered
    )
    _print_verify(report, f"{args.target} — verify {format_size(report['size'])} at {report['offset']:,} "
                          f"(run tag {report['tag']:#x})")
    if args.json:
        write_json(Path(args.json), {"verify": report})
        err_console.print(f"[dim]ftlscope: wrote {args.json}[/dim]")
    check_verified(report)
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    from .devices import list_block_devices
    from .safety import describe_write_verdict

    table = Table(title="Block devices", title_justify="left")
    for col in ("device", "size", "model", "kind", "rotational", "in use", "ftlscope would write"):
        table.add_column(col)
    for dev in list_block_devices():
        for d in [dev, *dev.partitions]:
            use = ", ".join([*(f"mounted {m}" for m in d.mountpoints), *(f"holder {h}" for h in d.holders),
                             *(["swap"] if d.swap else [])]) or "no"
            _, verdict = describe_write_verdict(d)
            table.add_row(
                ("  " if d.is_partition else "") + d.path, format_size(d.size_bytes), d.model or "-", d.kind,
                "yes" if d.rotational else "no", use, verdict,
            )
    console.print(table)
    return 0


def cmd_sim_presets(args: argparse.Namespace) -> int:
    from .sim import presets

    table = Table(title="Simulated devices (use as sim:NAME)", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("what it is")
    for p in presets():
        summary = p["summary"] or ""
        table.add_row(p["name"], summary.split(": ", 1)[-1])
    console.print(table)
    return 0


def cmd_sim_show(args: argparse.Namespace) -> int:
    from .sim import show

    print(show(args.preset), end="")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag gets the same one-line error as everything else (exit 2)."""

    def error(self, message: str):  # type: ignore[override]
        print(f"ftlscope: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="ftlscope", description="What does your SSD really do? Precisely timed I/O and its analysis."
    )
    parser.add_argument("--version", action="version", version=f"ftlscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("run", help="run one workload and report latency and throughput")
    p.add_argument("target", help="block device, regular file (created with --size), or sim:PRESET; or a fio job "
                                  "file (JOBFILE.fio, or a file starting with '['): its one job runs, with its "
                                  "filename as the target (filename=sim\\:PRESET for a simulated drive)")
    _add_workload_flags(p)
    _add_run_flags(p)
    add_shim_flags(p)
    g = add_output_flags(p, "output", json_help="write the summary JSON here",
                         trace_help="write the per-request trace (Parquet) here")
    g.add_argument("--json-format", choices=("ftlscope", "fio"), default="ftlscope",
                   help="ftlscope's summary (default), or fio's --output-format=json shape (jobs[], read/write "
                        "with iops, bw, clat_ns percentiles, lat_ns ...) for fio-plot and fio parsers")
    g.add_argument("--no-precondition", action="store_true",
                   help="on a simulated drive, read the range as it is: by default a read workload first writes "
                        "it once, since never-written pages are answered without touching flash")
    g.add_argument("--verify", action="store_true",
                   help="write verifiable data (LBA, generation, CRC-32C per sector) and read it all back after "
                        "the run: counts torn, stale and misdirected writes (exit 1 on any)")
    g.add_argument("--verify-record", metavar="FILE",
                   help="with --verify: save the write record (what each sector should hold, numpy .npz), so a "
                        "later 'ftlscope verify TARGET --record FILE' counts stale writes too")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("verify", help="read a target back and check the stamps a 'run --verify' wrote")
    p.add_argument("target", help="block device or regular file")
    p.add_argument("--offset", default="0", help="start of the range to check (default 0)")
    p.add_argument("--size", help="length of the range (default: to the end)")
    p.add_argument("--tag", type=lambda v: int(v, 0), default=0,
                   help="the run tag to check (from the run's JSON verify.tag; default: the first stamp's)")
    p.add_argument("--record", help="the run's write record ('run --verify --verify-record FILE'): stale writes "
                                    "are counted too")
    p.add_argument("--buffered", action="store_true", help="read through the page cache (no O_DIRECT)")
    p.add_argument("--json", help="write the report (JSON) here")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("devices", help="list block devices and whether ftlscope would write to them")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("sim", help="simulated devices: list the presets, show one as TOML, attach one to the kernel")
    sim_sub = p.add_subparsers(dest="sim_command", required=True, metavar="SUBCOMMAND", parser_class=_Parser)
    q = sim_sub.add_parser("presets", help="list the built-in simulated devices")
    q.set_defaults(func=cmd_sim_presets)
    q = sim_sub.add_parser("show", help="print a preset (or a device file) as TOML, every key filled in")
    q.add_argument("preset", help="preset name, or path to a device TOML file")
    q.set_defaults(func=cmd_sim_show)
    from .attach import register as register_attach

    register_attach(sim_sub)

    p = sub.add_parser("bench", help="run one experiment of the suite (--list shows them)")
    p.add_argument("target", nargs="?", help="block device, regular file (created with --size), or sim:PRESET")
    p.add_argument("experiment", nargs="?", help="experiment name (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--param", action="append", metavar="K=V", help="set a parameter (repeatable)")
    p.add_argument("--repeat", type=int, default=1, help="repetitions; results give mean and stddev (default 1)")
    p.add_argument("--out", default="ftlscope-results", help="output directory (default ftlscope-results)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the interrupted run in DIR (its --out) from its first repetition not completed, "
                        "if the target was not written since")
    _add_suite_flags(p, "its data is destroyed")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("probe", help="infer the ten internal properties (page size ... flush window) as "
                                     "'Fantastic SSD Internals and How to Learn and Use Them' does")
    p.add_argument("target", help="block device, regular file (created with --size), or sim:PRESET")
    p.add_argument("--properties", help="which, e.g. P1,P4 (default all; the ones they build on are added)")
    p.add_argument("--out", default="ftlscope-probe", help="output directory (default ftlscope-probe)")
    p.add_argument("--json", help="also write the answers as JSON here")
    p.add_argument("--span", default="4GiB", help="probe within the first ... of the device (default 4GiB)")
    _add_suite_flags(p, "probing erases and refills it")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("validate-probes", help="probe simulated devices and score the answers against their truth")
    p.add_argument("--presets", nargs="*", help="preset names, or all (default all when no --device)")
    p.add_argument("--device", action="append", metavar="FILE.toml", help="a device file (repeatable)")
    p.add_argument("--properties", help="which, e.g. P1,P4 (default all)")
    p.add_argument("--out", help="keep every device's probe output here")
    p.add_argument("--markdown", help="also write the answers-against-truth, per-property and calibration tables "
                                      "as Markdown here")
    p.add_argument("--noise", choices=("mild", "medium", "harsh"),
                   help="add a [noise] section of this level to every device first (docs/probes.md gives the levels)")
    p.set_defaults(func=cmd_validate_probes)

    p = sub.add_parser("profile", help="profile a device end to end: probes, experiments, report, guidance")
    p.add_argument("target", nargs="?", default=None,
                   help="block device, regular file (created with --size), or sim:PRESET "
                        "(default: the simulated sim:consumer-tlc-dram)")
    p.add_argument("--suite", default="quick", choices=("quick", "standard", "full", "system"),
                   help="quick (probes + short sweeps, default), standard (every experiment that does not need "
                        "the whole drive), full (everything, over the whole drive) or system (zoning and the "
                        "file-system experiments: root, makes file systems)")
    p.add_argument("--out", help="output directory (default ftlscope-profiles/RUN_ID)")
    p.add_argument("--span", help="confine every experiment and probe to the first ... of the device (e.g. 64GiB)")
    p.add_argument("--spec", metavar="K=V,...",
                   help="datasheet figures to check, e.g. seq_read=3500MB/s,seq_write=3000MB/s,"
                        "random_read_iops=500k,qd1_read_latency=80us,write_cliff=40GB")
    p.add_argument("--sla-p99", metavar="TIME",
                   help="your p99 latency target (e.g. 500us): the queue-depth guidance for latency-sensitive work "
                        "gives the deepest queue whose p99 stays under it (default: within 2x QD 1's p99)")
    p.add_argument("--repeat", type=int, default=1, help="repetitions of each experiment (default 1)")
    p.add_argument("--price", metavar="AMOUNT", help="the drive's price (e.g. 89EUR, $120): the card adds the price "
                                                    "per GB, per 1,000 random read IOPS and per 100 MB/s")
    p.add_argument("--price-per-gb", metavar="AMOUNT", help="the price per GB instead (e.g. 0.35EUR)")
    _add_db_flag(p)
    p.add_argument("--no-store", action="store_true", help="do not add the run to the store")
    _add_suite_flags(p, "profiling erases and rewrites it")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("runs", help="list the profile runs in the store")
    _add_db_flag(p)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("report", help="re-render a stored run's report (the device is not touched)")
    p.add_argument("run", help="run id (or a unique prefix, latest, -1, -2, or a profile directory)")
    p.add_argument("--out", help="where to write report.html and report.md (default: the run's directory)")
    _add_db_flag(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="several stored runs side by side: properties, summary, overlaid curves")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run ids (or prefixes, latest, -1, ..., directories)")
    p.add_argument("--out", default="ftlscope-compare", help="output directory (default ftlscope-compare)")
    p.add_argument("--price", metavar="A,B,...", help="each run's price, in the order of RUN (e.g. 89EUR,45EUR; '-' "
                                                     "keeps a run's stored price): price per GB, 1,000 IOPS, 100 MB/s")
    p.add_argument("--price-per-gb", metavar="A,B,...", help="each run's price per GB instead")
    _add_db_flag(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("export", help="write stored runs as Parquet tables for analysis elsewhere")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run ids (or prefixes, latest, -1, ..., directories)")
    p.add_argument("--parquet", required=True, metavar="DIR", help="directory for the Parquet files")
    _add_db_flag(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("store", help="look after the run store: rebuild it from the runs' directories")
    store_sub = p.add_subparsers(dest="store_command", required=True, metavar="SUBCOMMAND", parser_class=_Parser)
    q = store_sub.add_parser("rebuild", help="a new store from profile directories (the old file is kept aside)")
    q.add_argument("directories", nargs="+", metavar="DIR",
                   help="profile directories, or directories holding them (e.g. ftlscope-profiles/)")
    _add_db_flag(q)
    q.set_defaults(func=cmd_store_rebuild)

    p = sub.add_parser("fio-check", help="run fio and ftlscope back to back on the same workload and compare")
    p.add_argument("target", help="block device or regular file (created with --size)")
    _add_workload_flags(p)
    _add_run_flags(p)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of each tool (default 3)")
    p.add_argument("--fio-engines", default="io_uring", help="fio engines to compare, e.g. io_uring,libaio,psync")
    p.set_defaults(func=cmd_fio_check)

    from .traces.cli import add_trace_parser

    add_trace_parser(sub)
    from .replay import add_replay_parser

    add_replay_parser(sub)
    from .newt.command import add_newt_parser

    add_newt_parser(sub)

    from .traces.capture_cli import add_capture_parser

    add_capture_parser(sub)

    p = sub.add_parser("completion", help="print the shell completion script for bash or zsh")
    p.add_argument("shell", choices=("bash", "zsh"),
                   help="bash: add 'eval \"$(ftlscope completion bash)\"' to ~/.bashrc; zsh: write it to a file "
                        "named _ftlscope in a directory on $fpath")
    p.set_defaults(func=cmd_completion)

    p = sub.add_parser("man", help="print the manual page (roff), generated from these commands' help")
    p.set_defaults(func=cmd_man)
    return parser


def cmd_bench(args: argparse.Namespace) -> int:
    from .experiments import EXPERIMENTS, get, run_experiment
    from .units import parse_size

    if args.list:
        table = Table(title="Experiments (ftlscope bench TARGET NAME)", title_justify="left")
        for col in ("name", "what it measures", "writes", "preconditioning", "parameters (defaults)"):
            table.add_column(col, no_wrap=col == "name")
        for e in EXPERIMENTS.values():
            params = ", ".join(f"{p.name}={p.shown or p.default}" for p in e.params)
            table.add_row(e.name, f"{e.summary} ({e.source})", "yes" if e.writes else "no", e.preconditioning,
                          params)
        console.print(table)
        return 0
    if not args.target or not args.experiment:
        raise UsageError("bench: give TARGET and EXPERIMENT (e.g. ftlscope bench sim:consumer-tlc-dram qd-sweep), "
                         "or --list")
    experiment = get(args.experiment)
    params: dict[str, str] = {}
    for item in args.param or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param: '{item}' is not k=v (e.g. --param runtime=10s)")
        params[key.strip()] = value.strip()
    outcome = run_experiment(
        experiment, args.target, out=args.out, params=params, repeat=args.repeat, destructive=args.destructive,
        force=args.force, size=parse_size(args.size, "--size") if args.size else None, engine=args.engine,
        progress=not args.quiet, show_serial=args.show_serial, resume=args.resume,
    )
    for note in outcome.conditions["notes"]:
        err_console.print(f"[dim]ftlscope: {note}[/dim]")
    console.print(findings_table(outcome.findings, f"{experiment.name} on {args.target}"))
    files = ["results.csv", "findings.json", "experiment.json", *(p.name for p in outcome.figures)]
    err_console.print(f"[dim]ftlscope: wrote {outcome.directory}/ ({', '.join(files)}, raw/)[/dim]")
    if outcome.error is not None:
        raise outcome.error
    return 0


def findings_table(findings: dict, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("finding", "value", "unit", "evidence"):
        table.add_column(col, justify="right" if col == "value" else "left")
    for name, f in findings.items():
        value, unit, evidence = (f.get("value"), f.get("unit", ""), f.get("evidence", "")) if isinstance(f, dict) \
            else (f, "", "")
        if isinstance(value, float):
            value = f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
        table.add_row(name, str(value), unit, evidence)
    return table


def cmd_probe(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .jsonable import write_json
    from .probes.runner import legend_lines, probe_device
    from .units import parse_size

    report = probe_device(
        args.target, properties=args.properties, out=args.out, span=parse_size(args.span, "--span"),
        destructive=args.destructive, force=args.force, size=parse_size(args.size, "--size") if args.size else None,
        engine=args.engine, progress=not args.quiet, show_serial=args.show_serial,
    )
    for note in report.notes:
        err_console.print(f"[dim]ftlscope: {note}[/dim]")
    table = report.table()
    console.print(_rich_frame(table, f"Properties of {args.target}"))
    for note in legend_lines(table):
        console.print(note, markup=False, highlight=False)
    if args.json:
        write_json(Path(args.json), report.to_json())
    err_console.print(f"[dim]ftlscope: wrote {args.out}/ (properties.json, .md, .csv, figures, raw/)"
                      f"{' and ' + args.json if args.json else ''}[/dim]")
    if report.error is not None:
        raise report.error
    return 0


def cmd_validate_probes(args: argparse.Namespace) -> int:
    from .probes.validate import GOAL_ACCURACY, GOAL_DEVICE_TIME_S, resolve_specs, validate

    specs = resolve_specs(args.presets, args.device)

    def show_progress(name: str, rows: list) -> None:
        right = sum(r["match"] for r in rows if r["device"] == name)
        total = sum(1 for r in rows if r["device"] == name)
        err_console.print(f"[dim]{name}: {right}/{total} right[/dim]")

    result = validate(specs, properties=args.properties, out=args.out, progress=False, on_device=show_progress,
                      noise=args.noise)
    rows = result.rows.copy()
    rows["match"] = rows["match"].map({True: "✓", False: "✗"})
    console.print(_rich_frame(rows, "Answers against the ground truth"))
    console.print(_rich_frame(result.per_property(), "Per property"))
    console.print(_rich_frame(result.per_device(), "Per device"))
    console.print(_rich_frame(result.calibration(), "Calibration: share right per confidence bin"))
    if not result.notation_rows.empty:
        console.print(_rich_frame(result.notation_per_key(), "Table 4 details (partial flush, levels, ✗, ...)"))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(result.markdown() + "\n" + result.per_property_markdown() + "\n" + result.calibration_markdown())
            if not result.notation_rows.empty:
                f.write("\n" + result.notation_markdown())
    worst = result.per_device()["device_time_s"].max()
    console.print(
        f"overall: {result.rows['match'].sum()}/{len(result.rows)} right = {result.accuracy:.1%} "
        f"(goal {GOAL_ACCURACY:.0%}); most device time on one device {worst:.0f} s (goal < {GOAL_DEVICE_TIME_S} s)"
    )
    return 0


def _rich_frame(frame, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in frame.columns:
        table.add_column(str(col))
    for row in frame.itertuples(index=False):
        table.add_row(*("" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v) for v in row))
    return table


def cmd_profile(args: argparse.Namespace) -> int:
    from .profile.runner import finish, profile
    from .report.card import parse_spec
    from .units import parse_size

    spec = parse_spec(args.spec)
    check_prices(args.price, args.price_per_gb)
    suite = sla_suite(args.suite, args.sla_p99)
    if not args.no_store:
        from .store import RunStore

        RunStore(args.db)  # a store that cannot be used is refused before the device is touched
    if args.repeat < 1:
        raise UsageError(f"--repeat: give at least 1 (got {args.repeat})")
    outcome = profile(
        args.target, suite=suite, out=args.out, span=parse_size(args.span, "--span") if args.span else None,
        spec=spec, show_serial=args.show_serial, destructive=args.destructive, force=args.force,
        size=parse_size(args.size, "--size") if args.size else None, engine=args.engine, repeat=args.repeat,
        progress=not args.quiet, log=_step_log(args.quiet),
    )
    from .report.cost import price_of

    outcome.record["price"] = price_of(outcome.record, args.price, args.price_per_gb)
    finish(outcome, db=args.db, store=not args.no_store)
    record = outcome.record
    for note in record["notes"]:
        err_console.print(f"[dim]ftlscope: {note}[/dim]")
    console.print(card_table(record["card"], f"{record['target'].get('model') or record['target']['name']}"
                                             f" — {record['suite']} profile"))
    for advice in record["guidance"]:
        console.print(f"• [bold]{advice['topic']}.[/bold] {escape(advice['text'])}")
    stored = f"; stored as {outcome.run_id} in {outcome.store_path}" if outcome.store_path else ""
    err_console.print(f"[dim]ftlscope: wrote {outcome.directory}/ (report.html, report.md, profile.json, "
                      f"probes/, experiments/){stored}[/dim]")
    if outcome.error is not None:
        raise outcome.error
    return 0


def _step_log(quiet: bool):
    """Where a profile's "[n/N] step" lines go: stderr, or nowhere with --quiet (as the bars)."""
    if quiet:
        return lambda _text: None
    return lambda text: err_console.print(f"[bold]{text}[/bold]")


def sla_suite(name: str, sla_p99: str | None):
    """The suite to run: ``name``, with qd-sweep measuring against ``--sla-p99`` when it is given."""
    from .profile.suites import get_suite, with_params
    from .units import parse_duration_ns

    if sla_p99 is None:
        return name
    if parse_duration_ns(sla_p99, "--sla-p99") <= 0:
        raise UsageError(f"--sla-p99: give a latency above 0, e.g. 500us (got {sla_p99})")
    return with_params(get_suite(name), "qd-sweep", {"sla_p99": sla_p99})


def card_table(card: list[dict], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("", "measured", "datasheet"):
        table.add_column(col)
    for row in card:
        measured = row["display"] + (f" ({row['detail']})" if row.get("detail") else "")
        datasheet = ""
        if row.get("spec"):
            # The datasheet figure in the card's units, and by how much the drive falls short of it.
            datasheet = row.get("verdict") or f"{row.get('spec_display') or row['spec']['given']} (not measured)"
        table.add_row(row["label"], measured, datasheet)
    return table


def cmd_runs(args: argparse.Namespace) -> int:
    import pandas as pd

    from .report.facts import format_bytes
    from .store import RunStore

    store = RunStore(args.db, create=False)  # listing never creates a store
    runs = store.list_runs()
    if runs.empty:
        err_console.print(f"ftlscope: no runs in {store.path} yet; 'ftlscope profile' makes one")
        return 0
    table = Table(title=f"Profile runs in {store.path}", title_justify="left")
    rows = [
        [
            row.run_id, str(row.created_at), str(row.suite), str(row.target_name), str(row.model or ""),
            format_bytes(row.size_bytes) if pd.notna(row.size_bytes) and row.size_bytes else "",
            "yes" if row.completed else "no", f"{row.wall_time_s:.0f} s" if pd.notna(row.wall_time_s) else "",
            str(row.directory),
        ]
        for row in runs.itertuples(index=False)
    ]
    # The target and the times are shown whole, however narrow the screen (rich would shorten the widest
    # columns first, the target among them); the run id, model and directory fold onto further lines.
    whole = {"created (UTC)", "suite", "target", "size", "done", "wall"}
    names = ("run", "created (UTC)", "suite", "target", "model", "size", "done", "wall", "directory")
    for i, col in enumerate(names):
        widest = max([len(col), *(len(r[i]) for r in rows)])
        table.add_column(col, no_wrap=col in whole, overflow="fold",
                         min_width=widest if col in whole else max(len(col), min(widest, 6)))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .metrics import NEWT_EXPERIMENT
    from .newt.stored import attach_newt_runs
    from .report.render import render_report
    from .store import RunStore

    store = RunStore(args.db, create=False)
    stored = store.get(args.run)
    if stored.record.get("suite") == NEWT_EXPERIMENT and args.out is None:
        # Its report.html/report.md are the newt page, drawn from the replays themselves; the store holds only
        # their findings, so re-rendering in place would replace the page with a poorer one.
        raise UsageError(f"run {stored.record['run_id']} is an 'ftlscope newt' run whose page "
                         f"({stored.directory / 'report.html'}) would be overwritten; give --out DIR to render its "
                         "stored findings elsewhere")
    if not stored.directory.is_dir() and args.out is None:
        raise UsageError(f"{stored.directory} (the run's directory) is gone; give --out DIR to render there "
                         "from the store alone")
    attach_newt_runs(stored.record, store)  # the guidance cites a gain 'ftlscope newt' measured on this drive
    paths = render_report(stored.record, stored.directory, Path(args.out) if args.out else None)
    err_console.print(f"[dim]ftlscope: wrote {', '.join(str(p) for p in paths)}[/dim]")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .report.compare import render_compare
    from .store import RunStore

    prices = [_per_run(args.price, "--price", len(args.runs)), _per_run(args.price_per_gb, "--price-per-gb",
                                                                          len(args.runs))]
    store = RunStore(args.db, create=False)
    stored = [store.get(ref) for ref in args.runs]
    records = []
    for i, s in enumerate(stored):
        record = dict(s.record)
        price, per_gb = prices[0][i], prices[1][i]
        if price or per_gb:  # given here: overrides the price the profile was run with
            from .report.cost import price_of

            record["price"] = price_of(record, price, per_gb)
        records.append((record, s.directory))
    paths = render_compare(records, Path(args.out))
    err_console.print(f"[dim]ftlscope: wrote {', '.join(str(p) for p in paths)}[/dim]")
    return 0


def check_prices(price: str | None, price_per_gb: str | None) -> None:
    """Refuse a bad --price/--price-per-gb before the device is touched."""
    from .report.cost import parse_price

    if price and price_per_gb:
        raise UsageError("--price/--price-per-gb: give one of them, not both")
    for flag, value in (("--price", price), ("--price-per-gb", price_per_gb)):
        if value:
            parse_price(value, flag)


def _per_run(text: str | None, flag: str, runs: int) -> list[str | None]:
    """compare's ``--price 89EUR,45EUR``: one price per RUN, in order; ``-`` keeps a run's stored price."""
    from .report.cost import parse_price

    if not text:
        return [None] * runs
    items = [item.strip() for item in text.split(",")]
    if len(items) != runs:
        raise UsageError(f"{flag}: {len(items)} price(s) for {runs} run(s); give one per RUN, in order "
                         f"('-' keeps a run's stored price), e.g. {flag} 89EUR,45EUR")
    chosen = [None if item == "-" else item for item in items]
    for item in chosen:
        if item:
            parse_price(item, flag)
    return chosen


def cmd_export(args: argparse.Namespace) -> int:
    from .export import export_runs
    from .store import RunStore

    result = export_runs(RunStore(args.db, create=False), args.runs, args.parquet)
    for note in result.notes:
        err_console.print(f"[dim]ftlscope: {note}[/dim]")
    err_console.print(f"[dim]ftlscope: wrote {', '.join(str(p) for p in result.paths)}[/dim]")
    return 0


def cmd_store_rebuild(args: argparse.Namespace) -> int:
    from .store import rebuild

    done = rebuild(args.directories, args.db)
    for reason in done.skipped:
        err_console.print(f"[dim]ftlscope: skipped: {reason}[/dim]")
    aside = f"; the old store is kept as {done.set_aside}" if done.set_aside else ""
    err_console.print(f"ftlscope: stored {len(done.run_ids)} run(s) in {done.path}{aside}")
    return 0


def cmd_fio_check(args: argparse.Namespace) -> int:
    from .fio import fio_check_cli

    return fio_check_cli(args, _workload_from_args(args), _run_kwargs(args), console)


def cmd_completion(args: argparse.Namespace) -> int:
    # shtab generates the script from the parser itself, so completion never lags behind a new flag.
    import shtab

    print(shtab.complete(build_parser(), shell=args.shell), end="")
    return 0


def man_page() -> str:
    """The manual page, generated from the parser by argparse-manpage (every command, flag and help text)."""
    from argparse_manpage.manpage import Manpage

    from . import __version__

    parser = build_parser()
    # The page's date is today's unless SOURCE_DATE_EPOCH is set (argparse-manpage honours it), for packagers.
    return str(Manpage(parser, _data={"version": __version__, "project_name": "ftlscope",
                                      "description": parser.description, "url": "",
                                      "manual_title": "ftlscope manual"}))


def cmd_man(args: argparse.Namespace) -> int:
    print(man_page(), end="")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    # pyarrow's default pool (mimalloc) keeps freed segments for reuse: a streamed replay drops thousands of
    # record batches and its peak grew with the trace (312 MiB at 100 M requests, bench/trace_memory.py); the
    # system allocator gives them back (273 against 287-305 MiB at 10 M). Arrow reads this once, when pyarrow
    # first allocates, which no command has done yet; a user's own setting wins.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    from . import stopping
    from .cli_checks import check_args, negative_values_as_values

    parser = build_parser()
    args = parser.parse_args(negative_values_as_values(sys.argv[1:] if argv is None else list(argv), parser))
    try:
        with stopping.on_termination():
            check_args(args)
            return args.func(args)
    except FtlscopeError as exc:
        print(f"ftlscope: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"ftlscope: {stopping.what_stopped()}", file=sys.stderr)
        return stopping.exit_code()
    except OSError as exc:
        # The surroundings failed after the checks passed (a disk filled up, a mount went away): one line.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"ftlscope: error: {where}{exc.strerror or exc}; the files written before it are kept",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
