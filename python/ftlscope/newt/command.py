"""`ftlscope newt TARGET TRACE`: what Newt's optimizations buy on this drive with this trace. The trace is
replayed twice from the same starting state, without and with them (:mod:`.measure`); the command prints the
latency percentiles before and after and the gain, and writes the JSON, a report page (latency CDFs before and
after per operation, read latency over time, the bytes the shim held back: Figures 6-8 of "Fantastic SSD
Internals and How to Learn and Use Them") and the run into the store, where the profile report's guidance finds
it."""

from __future__ import annotations

import argparse
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .latency import headline

DEFAULT_OUT = "ftlscope-newt"


def add_newt_parser(sub: Any) -> None:
    from ..cli import _add_db_flag, _add_run_flags
    from ..replay import add_trace_replay_flags
    from .shim import add_flags as add_shim_flags

    p = sub.add_parser("newt", help="measure what read alignment and write rate limiting buy: a trace replayed "
                                    "without and with them, latency before/after and the gain")
    p.add_argument("target", help="block device, regular file, or sim:PRESET (a fresh simulated drive each pass)")
    p.add_argument("trace", help="trace file (any format 'trace info' reads; 'ftlscope trace synth' makes some)")
    o = p.add_argument_group("optimizations (default with --from-profile: those its probes call for)")
    o.add_argument("--align-reads", metavar="auto|SIZE",
                   help="align reads: auto (P1 and P6 of --from-profile) or a page SIZE (e.g. 4k)")
    g = p.add_argument_group("replay (as 'ftlscope replay')")
    add_trace_replay_flags(g)
    g.add_argument("--settle", default="5s",
                   help="on a real target, the pause after each pass's preconditioning (default 5s); a simulated "
                        "drive idles as long as its fill took (no wall time)")
    _add_run_flags(p)
    add_shim_flags(p)  # --rate-limit-writes, --period, --max-held, --from-profile, --allow-noop
    out = p.add_argument_group("output")
    out.add_argument("--json", help="write before, after (each a run's summary JSON), gain_pct (from each request's "
                                    "arrival in an open-loop replay: latency_from says) and gain_pct_device here")
    out.add_argument("--report", metavar="DIR",
                     help=f"write the run's files and report page here (default {DEFAULT_OUT}/RUN_ID)")
    out.add_argument("--traces", metavar="DIR",
                     help="keep each pass's per-request trace here (before.parquet, after.parquet; as 'replay "
                          "--trace' writes it); without it they go to a temporary directory beside the report, "
                          "removed after")
    _add_db_flag(p)
    out.add_argument("--no-store", action="store_true", help="do not add the run to the store")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    out.add_argument("--show-serial", action="store_true", help="write the drive's serial number as it is")
    p.set_defaults(func=cmd_newt)


def plan_from_args(args: argparse.Namespace) -> Any:
    """The optimizations the flags ask for (explicit flags, else what the profile calls for); refuses
    (UsageError) a request that cannot be met, before the trace is read or the device touched."""
    from .align import alignment_from_params, parse_align
    from .measure import Plan
    from .params import NewtParams
    from .shim import ShimSettings, noop_notice, with_shim_flags

    params = NewtParams.from_profile(args.from_profile, _store(args)) if args.from_profile else None
    explicit = bool(args.align_reads or args.rate_limit_writes)
    if not args.from_profile and not explicit:
        raise UsageError("newt: nothing to optimize; give --from-profile RUN (the optimizations its probes call "
                         "for), --align-reads auto|SIZE or --rate-limit-writes auto|SPEED")
    plan = Plan(params=params.to_json() if params is not None else None)
    if args.align_reads:
        plan.alignment = parse_align(args.align_reads, params)
    elif params is not None and not explicit:
        if params.page_size and (params.penalised_reads or params.unaligned_penalty_ns):
            plan.alignment = alignment_from_params(params)
        else:
            plan.notes.append("reads not aligned: the profile finds no read-size penalty (P6)" if params.page_size
                              else "reads not aligned: the profile has no page size (P1)")
    if args.rate_limit_writes:
        shim = with_shim_flags(
            ShimSettings.resolve(args.rate_limit_writes, params, args.period, args.max_held, args.allow_noop), args)
        if shim is not None and shim.active:
            plan.shim = shim
        elif shim is not None:
            plan.notes.append(noop_notice(shim) or "writes not rate-limited")
    elif params is not None and not explicit:
        if params.flush_speed_bps() is not None:
            plan.shim = ShimSettings.resolve("auto", params, args.period, args.max_held)
        else:
            plan.notes.append(f"writes not rate-limited: {params.why_no_flush_speed()}")
    from .premises import forced_warnings

    plan.notes += forced_warnings(args.align_reads, args.rate_limit_writes, params)
    if plan.alignment is None and plan.shim is None and not args.allow_noop:
        raise UsageError(f"--from-profile {args.from_profile}: the profile calls for no optimization ("
                         f"{'; '.join(plan.notes)}); give --align-reads SIZE or --rate-limit-writes SPEED to "
                         "measure one anyway, or --allow-noop to replay twice unoptimized")
    return plan


def _store(args: argparse.Namespace) -> Any:
    from ..store import RunStore

    return RunStore(args.db, create=False)


def newt_document(outcome: Any, *, target: str, trace: str, options: dict[str, Any]) -> dict[str, Any]:
    """The JSON of a newt run: ``before`` and ``after`` (each a run's summary: device latency, submission to
    completion), ``gain_pct`` (per operation and latency statistic, % lower after) measured as ``latency_from``
    says (``arrival``: from each request's time in the trace, whose latencies are in ``arrival``; ``submission``
    where the replay had no arrival times), ``gain_pct_device`` (from submission, always), ``throughput``, what
    was optimized and how."""
    from .measure import gains, held, throughput

    before, after = outcome.before.summary, outcome.after.summary
    aligned = None
    if outcome.plan.alignment is not None:
        aligned = {**outcome.plan.alignment.to_json(), **outcome.align_stats.to_json()}
    shim = outcome.plan.shim
    stops = [r.stop_reason for r in (outcome.before, outcome.after) if r.stop_reason not in (None, "completed")]
    return {
        "target": target, "trace": trace,
        "synthetic": bool(before.get("replay", {}).get("synthetic")),
        "optimizations": {"align_reads": aligned,
                          "rate_limit_writes": shim.to_json() if hasattr(shim, "to_json") else shim},
        "params": outcome.plan.params, "notes": outcome.plan.notes, "options": options,
        "precondition": outcome.precondition,
        "completed": not stops, "stopped": ", ".join(map(str, stops)) or None,
        "before": before, "after": after,
        **gains(outcome.before, outcome.after), "throughput": throughput(before, after),
        "held": held(after),
    }


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in ("from_profile", "align_reads", "rate_limit_writes", "period", "max_held",
                                          "allow_noop", "timing", "mode", "qd", "wrap", "settle")}


def _run_id(identity: str) -> str:
    import re

    slug = re.sub(r"[^a-z0-9]+", "-", identity.removeprefix("sim:").lower()).strip("-")[:40]
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-newt-{slug}"


def _check_outputs(args: argparse.Namespace) -> None:
    from ..cli_checks import check_output_dir, check_output_file

    if args.json:
        check_output_file(args.json, "--json")
    if args.report:
        check_output_dir(args.report, "--report")
    if args.traces:
        check_output_dir(args.traces, "--traces")


def cmd_newt(args: argparse.Namespace) -> int:
    from ..cli import _run_kwargs, err_console
    from ..replay import _read, parse_timing, replay_mode
    from ..units import parse_duration_ns
    from .measure import measure

    replay_mode(parse_timing(args.timing), args.mode)
    settle_s = parse_duration_ns(args.settle, "--settle") / 1e9
    plan = plan_from_args(args)
    _check_outputs(args)
    if not args.no_store:
        from ..store import RunStore

        RunStore(args.db)  # a store that cannot be used is refused before the device is touched
    # A Parquet or text trace stays a path: each pass streams it, as replay does (its reads aligned batch by batch).
    frame, sort = _read(args)
    started = time.monotonic()
    notify = lambda text: err_console.print(f"[dim]ftlscope: {text}[/dim]")  # noqa: E731
    for note in plan.notes:
        notify(note)
    # Each pass streams its own per-request trace to a file while it runs; the gain and the figures are read
    # back from those files in batches, so no pass holds a record per request (issue 17).
    traces_dir = Path(args.traces) if args.traces else _scratch_dir(args)
    try:
        traces_dir.mkdir(parents=True, exist_ok=True)
        outcome = measure(args.target, frame, plan, settle_s=settle_s, progress=not args.quiet, notify=notify,
                          timing=args.timing, mode=args.mode, qd=args.qd, wrap=args.wrap, trace_name=str(args.trace),
                          fmt=args.format, sort=sort, traces=(traces_dir / "before.parquet",
                                                              traces_dir / "after.parquet"),
                          show_serial=args.show_serial, **_run_kwargs(args))
        return _finish(args, outcome, frame, notify, started)
    finally:
        if not args.traces:
            shutil.rmtree(traces_dir, ignore_errors=True)


def _scratch_dir(args: argparse.Namespace) -> Path:
    """A temporary directory for the passes' traces: beside the report (a place the user chose to write to, so
    likely to have room, and not a RAM-backed /tmp)."""
    import tempfile

    from ..errors import RunError

    parent = Path(args.report).absolute().parent if args.report else Path(DEFAULT_OUT).absolute()
    try:
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".ftlscope-newt-traces-", dir=parent))
    except OSError as exc:
        raise RunError(f"newt: cannot make a directory for the passes' traces in {parent} ({exc.strerror or exc}); "
                       "give --report or --traces in a writable directory") from None


def _finish(args: argparse.Namespace, outcome: Any, frame: Any, notify: Any, started: float) -> int:
    """The document, the files, the printed table and the store record of a measured newt run."""
    from ..cli import console, err_console
    from ..jsonable import write_json
    from ..metrics import WRITE_SHIM
    from ..profile.target import describe_target
    from ..sim import SimDevice
    from .latency import write_cost
    from .shim import describe as describe_shim

    doc = newt_document(outcome, target=args.target, trace=str(args.trace), options=_options(args))
    shim_line = describe_shim(outcome.after.summary.get(WRITE_SHIM))
    if shim_line:
        notify(shim_line)
        cost = write_cost(doc)
        if cost:
            notify(f"what the shim cost the writes: {cost}")
    identity = describe_target(SimDevice.open(args.target) if args.target.startswith("sim:") else args.target,
                               show_serial=args.show_serial)
    run_id = _run_id(identity.get("identity") or args.target)
    directory = Path(args.report) if args.report else Path(DEFAULT_OUT) / run_id
    figures = write_run_files(outcome, doc, frame, directory)
    saved = [str(directory / "report.html")]
    if args.json:
        saved.append(str(write_json(Path(args.json), doc)))
    for table in gain_tables(doc, console.width):
        console.print(table)
    if not args.no_store:
        from ..store import RunStore
        from .stored import record

        rec = record(doc, run_id=run_id, created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                     target=identity, figures=figures, wall_time_s=time.monotonic() - started)
        write_json(directory / "profile.json", rec)
        store = RunStore(args.db)
        store.add(rec, directory.resolve())
        notify(f"stored as {run_id} in {store.path}; 'ftlscope report RUN' on this drive's profile cites the gain")
    err_console.print(f"[dim]ftlscope: wrote {', '.join(saved)}[/dim]")
    return 0 if doc["completed"] else 1


def write_run_files(outcome: Any, doc: dict[str, Any], frame: Any, directory: Path) -> list[str]:
    """``newt.json``, ``results.csv`` (one row per latency measure, operation and statistic: before, after, gain)
    and the report page with its figures, into ``directory``. Returns the figures' paths relative to it."""
    import pandas as pd

    from ..jsonable import write_json
    from ..report.newt_page import render_newt_report

    directory.mkdir(parents=True, exist_ok=True)
    write_json(directory / "newt.json", doc)
    pd.DataFrame(result_rows(doc)).to_csv(directory / "results.csv", index=False)
    paths = render_newt_report(outcome, doc, directory)
    return [p.relative_to(directory).as_posix() for p in paths if p.suffix == ".png"]


def result_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per latency measure (``latency_from``: ``arrival`` when the document has it, and ``submission``),
    operation and statistic: before, after and the gain."""
    from ..metrics import NEWT_STATISTICS, column_suffix
    from .latency import SUBMISSION

    measures = [(doc["latency_from"], doc["gain_pct"], headline(doc, "before"), headline(doc, "after"))]
    if doc.get("arrival"):
        measures.append((SUBMISSION, doc["gain_pct_device"], doc["before"], doc["after"]))
    rows = []
    for measured, gain, before, after in measures:
        for op, gains in gain.items():
            for key in NEWT_STATISTICS:
                rows.append({"latency_from": measured, "op": op, "statistic": column_suffix(key),
                             "before_us": before[op]["lat_ns"][key] / 1e3,
                             "after_us": after[op]["lat_ns"][key] / 1e3, "gain_pct": gains[key]})
    return rows


def gain_tables(doc: dict[str, Any], width: int) -> list[Any]:
    """The terminal's table: per operation and percentile, before, after and the gain."""
    from rich.table import Table

    from ..metrics import NEWT_STATISTICS
    from ..units import format_ns

    title = f"{doc['target']} — {Path(doc['trace']).name}{' (SYNTHETIC)' if doc['synthetic'] else ''}: " + \
        "; ".join(_optimized(doc))
    table = Table(title=title, caption=f"latency {doc['latency_from_why']}"
                  + ("; device gain: from submission to completion, as 'ftlscope run' reports it"
                     if doc.get("arrival") else ""))
    for column in ("op", "", *NEWT_STATISTICS):
        table.add_column(column, justify="left" if column in ("op", "") else "right")
    for op, gains in doc["gain_pct"].items():
        b, a = headline(doc, "before")[op]["lat_ns"], headline(doc, "after")[op]["lat_ns"]
        device = (doc.get("gain_pct_device") or {}).get(op) if doc.get("arrival") else None
        table.add_row(op, "before", *(format_ns(b[k]) for k in NEWT_STATISTICS))
        table.add_row("", "after", *(format_ns(a[k]) for k in NEWT_STATISTICS))
        table.add_row("", f"gain ({doc['latency_from']})", *(_pct(gains[k]) for k in NEWT_STATISTICS),
                      end_section=device is None)
        if device is not None:
            table.add_row("", "gain (device)", *(_pct(device[k]) for k in NEWT_STATISTICS), end_section=True)
    return [table]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f} %"


def _optimized(doc: dict[str, Any]) -> list[str]:
    parts = []
    aligned = doc["optimizations"]["align_reads"]
    if aligned:
        parts.append(f"reads aligned to {aligned['page_size']:,} B pages (+{aligned['extra_pct']:.1f} % bytes read)")
    shim = doc["optimizations"]["rate_limit_writes"]
    if shim and shim.get("active"):
        parts.append(f"writes rate-limited to {shim['flush_speed_bps'] / 1e6:.1f} MB/s")
    return parts
