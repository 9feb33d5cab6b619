"""`ftlscope trace info|convert|synth`: the parser and the commands (cli.py adds the parser with one call)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .names import FORMATS, WORKLOAD_NAMES


def add_trace_parser(sub: Any) -> None:
    p = sub.add_parser("trace", help="block traces: statistics, conversion (fio iolog, Parquet), synthetic workloads")
    tsub = p.add_subparsers(dest="trace_command", required=True, metavar="SUBCOMMAND",
                            parser_class=type(p))
    formats = f"trace format ({', '.join(FORMATS)}); sniffed from the file's start when omitted"

    q = tsub.add_parser("info", help="a trace's statistics: mix, sizes, sequentiality, arrivals, working set")
    q.add_argument("trace", help="trace file")
    q.add_argument("--format", choices=FORMATS, help=formats)
    q.add_argument("--sort", action="store_true", help="order requests by arrival time (for timestamps that go back)")
    q.add_argument("--json", metavar="FILE", help="also write the statistics as JSON")
    q.set_defaults(func=cmd_trace_info)

    q = tsub.add_parser("convert", help="write a trace as fio iolog v3 (fio --read_iolog replays it) or Parquet")
    q.add_argument("trace", help="trace file")
    q.add_argument("--format", choices=FORMATS, help=formats)
    q.add_argument("--sort", action="store_true", help="order requests by arrival time (for timestamps that go back)")
    q.add_argument("--to", required=True, choices=("fio", "parquet"), help="output format")
    q.add_argument("--out", required=True, help="output file")
    q.add_argument("--fio-file", default="target",
                   help="file name written into the fio iolog (default 'target'; fio's --replay_redirect=DEV "
                        "replays it on DEV instead)")
    q.set_defaults(func=cmd_trace_convert)

    q = tsub.add_parser("synth", help="a synthetic trace (db, search, cloud, video) with the statistics "
                                      "docs/traces.md states; labelled synthetic")
    q.add_argument("workload", choices=WORKLOAD_NAMES)
    q.add_argument("--duration", default="60s", help="trace length (default 60s)")
    q.add_argument("--seed", type=int, default=1, help="random seed (default 1); the same seed gives the same trace")
    q.add_argument("--out", required=True, help="output Parquet file")
    q.add_argument("--write-bursts", metavar="SIZE",
                   help="lay bursts of SIZE bytes of sequential 128 KiB writes over the workload (e.g. 12MiB: a "
                        "read-heavy trace carrying write bursts that overflow a drive's write buffer)")
    q.add_argument("--burst-rate", metavar="SPEED",
                   help="how fast a burst's writes arrive (default 128MB/s); with --write-bursts")
    q.add_argument("--burst-every", metavar="DURATION",
                   help="one burst starts every DURATION from the trace's start (default 500ms); with --write-bursts")
    q.set_defaults(func=cmd_trace_synth)


def cmd_trace_info(args: argparse.Namespace) -> int:
    from rich.console import Console

    stats = info_stats(args.trace, args.format, args.sort)
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stats, indent=2) + "\n")
    Console().print(*info_tables(args.trace, stats))
    return 0


def info_stats(path: str, fmt: str | None, sort: bool) -> dict[str, Any]:
    """The statistics ``trace info`` prints (and the replay report shows). A Parquet trace is read in record
    batches, text traces (CSV, fio iolog, blkparse) in batches of text (flat memory); a trace too out of order
    for the sliding sort window whole."""
    return info_stats_and_gaps(path, fmt, sort)[0]


def info_stats_and_gaps(path: str, fmt: str | None, sort: bool) -> tuple[dict[str, Any], Any]:
    """:func:`info_stats`, and the trace's inter-arrival times in log-linear buckets
    (:class:`ftlscope.traces.batched.Quantiles`: what the replay report draws their CDF from)."""
    import numpy as np

    from .batched import Quantiles, batched_stats_and_gaps
    from .readers import read_trace, sniff
    from .schema import TraceError
    from .stats import trace_stats
    from .streamed import STREAMED_FORMATS
    from .window import Unsorted

    if not Path(path).is_file():
        raise TraceError(f"{path}: no such trace file")
    fmt = fmt or sniff(Path(path))
    if fmt == "parquet" or fmt in STREAMED_FORMATS:
        try:
            return batched_stats_and_gaps(path, fmt, sort=sort)
        except Unsorted:
            pass
    frame = read_trace(path, fmt, sort=sort)
    gaps = Quantiles()
    gaps.add(np.diff(frame["submit_ns"].to_numpy(dtype=np.int64)).astype(np.float64))
    return trace_stats(frame), gaps


def _bytes(n: float) -> str:
    from ..units import format_size

    return format_size(n)


def _ns(n: float) -> str:
    from ..units import format_ns

    return format_ns(n)


SYNTHETIC_LABEL = " (SYNTHETIC: generated, not a captured workload)"


def info_rows(stats: dict[str, Any]) -> dict[str, list[tuple[str, ...]]]:
    """What `trace info` prints, as text rows: ``summary`` (statistic, value), ``mix`` (op, requests, share,
    bytes), ``sizes`` (bin, requests, share). The replay report shows the same rows."""
    ia = stats["interarrival_ns"]
    summary = [
        ("requests", f"{stats['requests']:,}"),
        ("duration", f"{stats['duration_s']:.6g} s"),
        ("bytes", _bytes(stats["bytes"])),
        ("mean size", _bytes(stats["mean_size_bytes"])),
        ("sequential share", f"{stats['sequential_share']:.1%}"),
        ("working set (read)", _bytes(stats["working_set_bytes"]["read"])),
        ("working set (write)", _bytes(stats["working_set_bytes"]["write"])),
        ("offset range", f"{stats['offset_range']['min_bytes']:,} .. {stats['offset_range']['max_end_bytes']:,} B"),
    ]
    if ia["n"]:
        summary += [("inter-arrival mean / p50 / p99", f"{_ns(ia['mean'])} / {_ns(ia['p50'])} / {_ns(ia['p99'])}"),
                    ("inter-arrival CV", f"{ia['cv']:.3g}")]
    if "latency_ns" in stats and stats["latency_ns"]["n"]:
        lat = stats["latency_ns"]
        summary.append(("latency mean / p50 / p99", f"{_ns(lat['mean'])} / {_ns(lat['p50'])} / {_ns(lat['p99'])}"))
    if "capture" in stats:
        made = stats["capture"]
        command = " ".join(made.get("command") or []) or "until stopped"
        command = command if len(command) <= 48 else command[:47] + "…"
        summary.append(("captured", f"{made.get('device')} ({command})"))
        if made.get("lost_events"):
            summary.append(("events lost by the kernel", f"{made['lost_events']:,}"))
    if stats["synthetic"]:
        made = stats["workload"]
        summary.append(("synthetic workload", f"{made.get('workload')} (seed {made.get('seed')})"))
    mix = [(op, f"{m['requests']:,}", f"{m['share']:.1%}", _bytes(m["bytes"])) for op, m in stats["mix"].items()]
    sizes = [(b["bin"], f"{b['count']:,}", f"{b['count'] / stats['requests']:.1%}") for b in stats["size_histogram"]]
    return {"summary": summary, "mix": mix, "sizes": sizes}


def info_tables(path: str, stats: dict[str, Any]) -> list[Any]:
    from rich.table import Table

    label = SYNTHETIC_LABEL if stats["synthetic"] else ""
    rows = info_rows(stats)
    top = Table(title=f"{path}: {stats['format']}{label}", show_header=False, title_justify="left")
    top.add_column("statistic")
    top.add_column("value", justify="right")
    for row in rows["summary"]:
        top.add_row(*row)
    mix = Table(title="operation mix", title_justify="left")
    for col in ("op", "requests", "share", "bytes"):
        mix.add_column(col, justify="left" if col == "op" else "right")
    for row in rows["mix"]:
        mix.add_row(*row)
    hist = Table(title="request sizes (power-of-two bins)", title_justify="left")
    for col in ("size", "requests", "share"):
        hist.add_column(col, justify="left" if col == "size" else "right")
    for row in rows["sizes"]:
        hist.add_row(*row)
    tables = [top, mix, hist]
    if stats.get("processes"):
        tables.append(process_table(stats["processes"], stats["requests"]))
    return tables


def process_table(processes: list[dict[str, Any]], requests: int, shown: int = 10) -> Any:
    """The busiest processes, and the rest in one line."""
    from rich.table import Table

    table = Table(title="processes (by requests)", title_justify="left")
    for col in ("process", "requests", "share", "bytes", "reads", "writes"):
        table.add_column(col, justify="left" if col == "process" else "right")
    for p in processes[:shown]:
        table.add_row(p["process"], f"{p['requests']:,}", f"{p['share']:.1%}", _bytes(p["bytes"]),
                      f"{p['reads']:,}", f"{p['writes']:,}")
    rest = processes[shown:]
    if rest:
        n = sum(p["requests"] for p in rest)
        table.add_row(f"({len(rest)} others)", f"{n:,}", f"{n / requests:.1%}", _bytes(sum(p["bytes"] for p in rest)),
                      f"{sum(p['reads'] for p in rest):,}", f"{sum(p['writes'] for p in rest):,}")
    return table


def cmd_trace_convert(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .readers import read_trace, sniff
    from .schema import TraceError
    from .streamed import STREAMED_FORMATS, text_frames
    from .window import Unsorted
    from .writers import convert, convert_frames

    path = Path(args.trace)
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file")
    fmt = args.format or sniff(path)
    written = None
    if fmt in STREAMED_FORMATS:  # text: converted batch by batch, in flat memory
        try:
            written = convert_frames(text_frames(path, fmt, sort=args.sort), args.to, args.out, args.fio_file)
        except Unsorted:
            pass  # too out of order for --sort's window: read whole below
    if written is None:
        frame = read_trace(path, fmt, sort=args.sort)
        written = convert(frame, args.to, args.out, args.fio_file), len(frame)
    out, rows = written
    Console(stderr=True).print(f"[dim]ftlscope: wrote {out} ({rows:,} requests)[/dim]")
    return 0


def cmd_trace_synth(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..units import parse_duration_ns
    from .schema import write_parquet
    from .synthetic import synth

    bursts = write_bursts(args)
    frame = synth(args.workload, parse_duration_ns(args.duration, "--duration"), args.seed, bursts)
    out = write_parquet(frame, args.out)
    extra = "" if bursts is None else f", write bursts of {bursts.size:,} bytes"
    Console(stderr=True).print(f"[dim]ftlscope: wrote {out} ({len(frame):,} requests, synthetic "
                               f"'{args.workload}' workload{extra}, seed {args.seed})[/dim]")
    return 0


def write_bursts(args: argparse.Namespace):
    """``--write-bursts SIZE [--burst-rate SPEED] [--burst-every DURATION]`` as the generator takes them."""
    from ..errors import UsageError
    from ..units import parse_duration_ns, parse_size
    from .synthetic import WriteBursts

    if args.write_bursts is None:
        for flag, value in (("--burst-rate", args.burst_rate), ("--burst-every", args.burst_every)):
            if value is not None:
                raise UsageError(f"{flag} {value}: give --write-bursts SIZE too (it shapes the write bursts)")
        return None
    defaults = WriteBursts(size=1)
    rate = defaults.rate_bps
    if args.burst_rate is not None:
        text = str(args.burst_rate).strip()
        rate = float(parse_size(text[:-2] if text.lower().endswith("/s") else text, "--burst-rate", minimum=1))
    every = defaults.every_ns if args.burst_every is None else \
        parse_duration_ns(args.burst_every, "--burst-every", minimum=1_000_000)
    return WriteBursts(size=parse_size(args.write_bursts, "--write-bursts", minimum=defaults.request),
                       rate_bps=rate, every_ns=every)
