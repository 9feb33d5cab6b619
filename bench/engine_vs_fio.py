#!/usr/bin/env python3
"""Engine vs fio: is ftlscope's engine at least as fast as fio, with the same latency?

On a file target and on zram (and, with --targets ramfile, a file on ext4 on a loop device in RAM: an
asynchronous target like the file, whose "device" is the loop driver's worker on the same CPUs, so it needs no
disk at all): 4 KiB random read at QD 1 and QD 32, and 128 KiB sequential read at QD 32,
alternating ours and fio (each of fio's io_uring, libaio and psync engines) for N rounds each. Prints a
table of the IOPS ratio against fio's best engine at that point, the p50 ratio, and CPU time per I/O.
Goal: IOPS ratio >= 1.0 at every point and p50 within 5 %. Each round runs the engines in turn, every other
round backwards (ABBA), and the verdict comes from the paired per-round ratios' 95 % interval: 'yes' above
1.0; 'at parity' when it holds 1.0 but rules out a shortfall beyond 5 % (where the kernel or the device sets
the pace, as the same syscalls on both sides do, the two tools can only tie); 'within noise' when wider.

Both psync engines keep the depth with one thread per request in flight: fio with one job each
(``--numjobs``, threads), ours the same way (README, "Engines"); at the sequential point both split one walk
the same way (thread j reads requests j, j+N, ...), so every engine, fio's and ours, is compared at the same
depth, latency included. Where a psync cannot keep the depth it runs at QD 1 (marked in the table).

CPU time per I/O: fio's usr+sys of its jobs; ours ``getrusage(RUSAGE_SELF)`` around ``ftlscope.run`` (the
whole process: queue threads, aggregator, Python), divided by the I/Os.

zram (/dev/zram0) needs root: the script resets it, sizes it (--zram-size), fills it with random data so
reads hit stored pages, and resets it again at the end. It refuses a zram0 that is set up already or in use
unless --zram-reset. ramfile needs root too (mount, losetup, mkfs.ext4) and undoes all of it at the end.

    python bench/engine_vs_fio.py --rounds 5 --runtime 3s --out bench/results
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from ftlscope.errors import FtlscopeError, UsageError
from ftlscope.fio import comparison_frame, fio_check, parse_engines, require_fio
from ftlscope.units import format_ns, parse_duration_ns, parse_size
from ftlscope.workload import from_flags

POINTS = (
    ("4k randread QD1", {"rw": "randread", "bs": "4k", "qd": 1}),
    ("4k randread QD32", {"rw": "randread", "bs": "4k", "qd": 32}),
    ("128k read QD32", {"rw": "read", "bs": "128k", "qd": 32}),
)
IOPS_GOAL = 1.0
P50_GOAL = 1.05
# A paired interval that holds 1.0 and stays above this: the same speed, to within the p50 goal's 5 %.
PARITY_LOW = 1 / P50_GOAL
ZRAM = Path("/sys/block/zram0")

console = Console(width=None if sys.stdout.isatty() else 170)
err = Console(stderr=True)


def log(message: str) -> None:
    err.print(f"[dim]{time.strftime('%H:%M:%S')} {message}[/dim]")


# ---------------------------------------------------------------------------------------------------------
# zram


def zram_in_use() -> str | None:
    """Why /dev/zram0 must not be touched (swap, mounted, held), or None."""
    swaps = Path("/proc/swaps").read_text() if Path("/proc/swaps").exists() else ""
    if any(line.split()[0] == "/dev/zram0" for line in swaps.splitlines()[1:] if line.split()):
        return "it is used as swap"
    mounts = Path("/proc/mounts").read_text()
    if any(line.split()[0] == "/dev/zram0" for line in mounts.splitlines() if line.split()):
        return "it is mounted"
    holders = ZRAM / "holders"
    if holders.exists() and any(holders.iterdir()):
        return "another device holds it"
    return None


def setup_zram(size: int, allow_reset: bool) -> tuple[str, int] | None:
    """Reset, size and fill /dev/zram0; its path and the disksize it had before (to restore), or None (with a
    message) when it cannot be used."""
    if os.geteuid() != 0:
        log("skipping zram: setting up /dev/zram0 needs root")
        return None
    if not ZRAM.exists() or not Path("/dev/zram0").exists():
        log("skipping zram: there is no /dev/zram0 (and modprobe zram is not done here)")
        return None
    why = zram_in_use()
    if why:
        log(f"skipping zram: /dev/zram0 is in use ({why})")
        return None
    current = int((ZRAM / "disksize").read_text().strip() or 0)
    if current and not allow_reset:
        log(f"skipping zram: /dev/zram0 is already set up ({current} B); pass --zram-reset to discard its data "
            "(its disksize is restored, empty, at the end)")
        return None
    try:
        (ZRAM / "reset").write_text("1\n")  # EBUSY while anyone has it open
        (ZRAM / "disksize").write_text(f"{size}\n")
    except OSError as exc:
        log(f"skipping zram: cannot set up /dev/zram0: {exc.strerror}")
        return None
    log(f"zram0: {size >> 20} MiB, filling with random data")
    try:
        subprocess.run(
            ["dd", "if=/dev/urandom", "of=/dev/zram0", "bs=1M", f"count={size >> 20}", "oflag=direct",
             "status=none"],
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        reset_zram(current)
        log(f"skipping zram: filling /dev/zram0 failed: {exc}")
        return None
    return "/dev/zram0", current


def reset_zram(previous_disksize: int) -> None:
    """Reset /dev/zram0 (freeing its memory) and give it back the disksize it had before, empty."""
    try:
        (ZRAM / "reset").write_text("1\n")
        if previous_disksize:
            (ZRAM / "disksize").write_text(f"{previous_disksize}\n")
        log("zram0 reset" + (f" (disksize {previous_disksize} B restored)" if previous_disksize else ""))
    except OSError as exc:
        log(f"could not reset zram0: {exc}")


# ---------------------------------------------------------------------------------------------------------
# ramfile: a file on ext4 on a loop device backed by RAM


class RamFile:
    """A file on ext4 on a loop device whose backing file lives on tmpfs: an asynchronous target (the loop
    driver completes requests from its own worker thread) that needs no disk. Not a quiet one: the worker
    shares the CPUs with the tools, so where the scheduler puts it moves QD 1 by up to 2x between runs.
    Needs root, losetup and mkfs.ext4; ``path`` is None (and the reason logged) where it cannot be set up.
    Everything is undone by ``close``."""

    def __init__(self, size: int):
        import tempfile

        self.path: str | None = None
        self._steps: list[list[str]] = []  # the commands that undo the set-up, last first
        self._base: Path | None = None  # the temporary directory holding both mount points
        if os.geteuid() != 0:
            log("skipping ramfile: a loop device needs root")
            return
        base = Path(tempfile.mkdtemp(prefix="ftlscope-ramfile-"))
        ram, mnt = base / "ram", base / "ext4"
        ram.mkdir()
        mnt.mkdir()
        self._base = base
        image = ram / "disk.img"
        try:
            self._do(["mount", "-t", "tmpfs", "-o", f"size={size + (size >> 2) + (128 << 20)}", "tmpfs", str(ram)],
                     ["umount", str(ram)])
            with open(image, "wb") as backing:
                backing.truncate(size + (size >> 3) + (64 << 20))  # room for ext4's metadata
            loop = subprocess.run(["losetup", "-f", "--show", str(image)], check=True, capture_output=True,
                                  text=True).stdout.strip()
            self._steps.append(["losetup", "-d", loop])
            self._do(["mkfs.ext4", "-q", loop], None)
            self._do(["mount", loop, str(mnt)], ["umount", str(mnt)])
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", None) or exc
            log(f"skipping ramfile: cannot set up a loop device on tmpfs: {str(detail).strip()}")
            self.close()
            return
        self.path = str(mnt / "target.img")
        log(f"ramfile: {self.path} (ext4 on {loop}, backed by tmpfs)")

    def _do(self, command: list[str], undo: list[str] | None) -> None:
        subprocess.run(command, check=True, capture_output=True, text=True)
        if undo:
            self._steps.append(undo)

    def close(self) -> None:
        for command in reversed(self._steps):
            subprocess.run(command, capture_output=True)
        self._steps.clear()
        if self._base is not None:
            for sub in ("ext4", "ram"):
                if (self._base / sub).exists():
                    (self._base / sub).rmdir()
            self._base.rmdir()
            self._base = None


# ---------------------------------------------------------------------------------------------------------
# the table


def paired_ratio(rounds: pd.DataFrame, ours_engine: str, fio_engine: str) -> tuple[float, float, float]:
    """Ours / fio's IOPS per round (the two ran back to back, so a drift of the target over the rounds cancels
    out), as a geometric mean and its 95 % Student-t interval over the rounds: (low, mean, high). On a shared
    virtual disk a single median can be 20 % off either way; the interval says whether a ratio below 1 is a
    real shortfall or noise."""
    ours = rounds[(rounds["tool"] == "ftlscope") & (rounds["engine"] == ours_engine)].set_index("round")["iops"]
    fio = rounds[(rounds["tool"] == "fio") & (rounds["engine"] == fio_engine)].set_index("round")["iops"]
    logs = (ours / fio).dropna().map(math.log)
    logs = logs[logs.map(math.isfinite)]
    if logs.empty:
        return math.nan, math.nan, math.nan
    mean = float(logs.mean())
    if len(logs) < 2:
        return math.exp(mean), math.exp(mean), math.exp(mean)
    from scipy import stats

    half = float(stats.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs)))
    return math.exp(mean - half), math.exp(mean), math.exp(mean + half)


def verdict(low: float, high: float, p50_ratio: float) -> str:
    """From the paired interval of the IOPS ratio and the p50 ratio: 'yes' when the whole interval is at or
    above the goal; 'at parity' when it holds 1.0 and rules out a shortfall beyond the 5 % the p50 goal
    allows (both tools wait on the same kernel path or device, and the engine cannot be faster than that);
    'within noise' when it is too wide to tell; 'no' when the whole interval is short, or p50 is."""
    if math.isnan(low) or p50_ratio > P50_GOAL:
        return "no"
    if low >= IOPS_GOAL:
        return "yes"
    if high < IOPS_GOAL:
        return "no"
    if low >= PARITY_LOW:
        return "at parity"
    return "within noise"


def summary_rows(comp: pd.DataFrame, target: str, point: str, rounds: pd.DataFrame | None = None) -> list[dict]:
    """One row per engine of ours at one (target, point), against fio's best engine there."""
    rows = []
    fio_rows = comp[comp["tool"] == "fio"]
    if fio_rows.empty:
        return rows
    ref = fio_rows.loc[fio_rows["iops"].idxmax()]
    fio_iops = {r["engine"]: r["iops"] for _, r in fio_rows.iterrows()}
    for _, ours in comp[comp["tool"] == "ftlscope"].iterrows():
        iops_ratio, p50_ratio = ours["iops_ratio"], ours["p50_ratio"]
        low, paired, high = paired_ratio(rounds, ours["engine"], ref["engine"]) if rounds is not None \
            else (math.nan, math.nan, math.nan)
        rows.append({
            "target": target,
            "point": point,
            "ours": ours["engine"],
            "backend": ours["backend"] + (" (QD 1)" if ours["clamped"] else ""),
            "iops": ours["iops"],
            "fio_best": ref["engine"] + (" (QD 1)" if ref["clamped"] else ""),
            "fio_best_iops": ref["iops"],
            "iops_ratio": iops_ratio,
            "p50": ours["p50"],
            "fio_p50": ref["p50"],
            "p50_ratio": p50_ratio,
            "cpu_ns_per_io": ours["cpu_ns_per_io"],
            "fio_cpu_ns_per_io": ref["cpu_ns_per_io"],
            "in_flight": ours["in_flight"],
            "fio_in_flight": ref["in_flight"],
            **{f"fio_{engine}_iops": iops for engine, iops in fio_iops.items()},
            "paired_ratio": paired,
            "paired_ratio_low": low,
            "paired_ratio_high": high,
            "goal_met": bool(iops_ratio >= IOPS_GOAL and p50_ratio <= P50_GOAL),
            "verdict": verdict(low, high, p50_ratio),
            "rounds": int(ours["rounds"]),
        })
    return rows


def _interval(r) -> str:
    if math.isnan(r.get("paired_ratio", math.nan)):
        return "-"
    return f"{r['paired_ratio']:.2f} ({r['paired_ratio_low']:.2f}-{r['paired_ratio_high']:.2f})"


def _in_flight(r) -> str:
    """Ours / fio's requests in flight on average (IOPS x mean latency, each by its own stamps)."""
    return f"{r['in_flight']:.1f} / {r['fio_in_flight']:.1f}"


def _fmt_ns(value: float) -> str:
    return "-" if value is None or math.isnan(value) else format_ns(value)


def rich_table(df: pd.DataFrame, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    columns = ["target", "point", "ours", "IOPS", "fio best", "fio IOPS", "IOPS ×", "paired × (95 % CI)", "p50",
               "fio p50", "p50 ×", "in flight", "CPU/IO", "fio CPU/IO", "goal"]
    for col in columns:
        table.add_column(col, justify="left" if col in ("target", "point", "ours", "fio best", "goal") else "right")
    for _, r in df.iterrows():
        ours = f"auto → {r['backend']}" if r["ours"] == "auto" else r["backend"]
        ratio_style = "green" if r["iops_ratio"] >= IOPS_GOAL else "red"
        p50_style = "green" if r["p50_ratio"] <= P50_GOAL else "red"
        table.add_row(
            r["target"], r["point"], ours, f"{r['iops']:,.0f}", r["fio_best"], f"{r['fio_best_iops']:,.0f}",
            f"[{ratio_style}]{r['iops_ratio']:.2f}[/{ratio_style}]", _interval(r), _fmt_ns(r["p50"]),
            _fmt_ns(r["fio_p50"]), f"[{p50_style}]{r['p50_ratio']:.2f}[/{p50_style}]", _in_flight(r),
            _fmt_ns(r["cpu_ns_per_io"]), _fmt_ns(r["fio_cpu_ns_per_io"]), r["verdict"],
        )
    table.caption = (f"× = ours / fio's best engine at that point (medians over rounds); paired × = geometric "
                     f"mean of the per-round ratios (back-to-back runs) with its 95 % interval. Goal: IOPS × >= "
                     f"{IOPS_GOAL:.1f}, p50 × <= {P50_GOAL:.2f}; 'at parity' = the interval holds 1.0 and lies above "
                     f"{PARITY_LOW:.2f}; 'within noise' = it reaches lower. in flight = IOPS x mean latency, ours "
                     f"/ fio's best (the depth each kept, by its own stamps). "
                     f"psync keeps the depth with one thread per request; (QD 1) marks where it cannot.")
    return table


def markdown(df: pd.DataFrame, title: str) -> str:
    header = ["target", "point", "ours", "backend", "IOPS", "fio best", "fio IOPS", "IOPS ×",
              "paired × (95 % CI)", "p50", "fio p50", "p50 ×", "in flight (ours / fio)", "CPU/IO", "fio CPU/IO",
              "goal"]
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, r in df.iterrows():
        cells = [r["target"], r["point"], r["ours"], r["backend"], f"{r['iops']:,.0f}", r["fio_best"],
                 f"{r['fio_best_iops']:,.0f}", f"{r['iops_ratio']:.2f}", _interval(r), _fmt_ns(r["p50"]),
                 _fmt_ns(r["fio_p50"]), f"{r['p50_ratio']:.2f}", _in_flight(r), _fmt_ns(r["cpu_ns_per_io"]),
                 _fmt_ns(r["fio_cpu_ns_per_io"]), r["verdict"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", f"Ratios are ours / fio's best engine at that point (medians over rounds). Goal: IOPS ratio >= "
                  f"{IOPS_GOAL:.1f} and p50 ratio <= {P50_GOAL:.2f}; goal 'yes' when the paired 95 % interval is at or "
                  f"above 1.0, 'at parity' when it holds 1.0 and lies above {PARITY_LOW:.2f}, 'within noise' when "
                  f"it reaches lower. Both psync engines keep the depth with one thread per request in flight; "
                  f"(QD 1) marks where one cannot.", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per tool and engine (default 5)")
    p.add_argument("--runtime", default="3s", help="length of each run (default 3s)")
    p.add_argument("--file-size", default="1GiB", help="size of the file target (default 1GiB)")
    p.add_argument("--targets", default="file,zram",
                   help="any of file (in --dir), zram, ramfile (a file on ext4 on a loop device in RAM) "
                        "(default file,zram)")
    p.add_argument("--engines", default="auto,uring,psync", help="our engines (default auto,uring,psync)")
    p.add_argument("--fio-engines", default="io_uring,libaio,psync",
                   help="fio's engines (default io_uring,libaio,psync)")
    p.add_argument("--points", help="comma-separated subset of: " + ", ".join(name for name, _ in POINTS))
    p.add_argument("--dir", default="/var/tmp", help="where the file target goes (not tmpfs; default /var/tmp)")
    p.add_argument("--keep-file", action="store_true", help="keep the file target for the next run")
    p.add_argument("--zram-size", default="2GiB", help="disksize of /dev/zram0 (default 2GiB)")
    p.add_argument("--zram-reset", action="store_true", help="reset /dev/zram0 even if it is already set up")
    p.add_argument("--out", help="write engine_vs_fio.csv, engine_vs_fio.md and engine_vs_fio_rounds.csv here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        version = require_fio()
        runtime_ns = parse_duration_ns(args.runtime, "--runtime")
        file_size = parse_size(args.file_size, "--file-size")
        zram_size = parse_size(args.zram_size, "--zram-size")
        ours = [e.strip() for e in args.engines.split(",") if e.strip()]
        fio_engines = parse_engines(args.fio_engines)
        targets = [t.strip() for t in args.targets.split(",") if t.strip()]
        unknown = set(targets) - {"file", "zram", "ramfile"}
        if unknown:
            raise UsageError(f"--targets: unknown target(s) {sorted(unknown)}; use file, zram, ramfile")
        points = POINTS
        if args.points:
            wanted = [p.strip() for p in args.points.split(",")]
            points = tuple(p for p in POINTS if p[0] in wanted)
            if len(points) != len(wanted):
                raise UsageError(f"--points: use {', '.join(n for n, _ in POINTS)}")
    except FtlscopeError as exc:
        print(f"engine_vs_fio: error: {exc}", file=sys.stderr)
        return 2

    summary: list[dict] = []
    every_round: list[pd.DataFrame] = []
    file_path = Path(args.dir) / "ftlscope-engine-vs-fio.img"
    try:
        for target_name in targets:
            run_kwargs: dict = {}
            previous_disksize = 0
            ramfile = None
            if target_name == "file":
                path = str(file_path)
                run_kwargs["size"] = file_size
            elif target_name == "ramfile":
                ramfile = RamFile(file_size)
                if ramfile.path is None:
                    continue
                path = ramfile.path
                run_kwargs["size"] = file_size
            else:
                zram = setup_zram(zram_size, args.zram_reset)
                if zram is None:
                    continue
                path, previous_disksize = zram
            try:
                for point_name, flags in points:
                    log(f"{target_name}: {point_name} ({args.rounds} rounds x {len(fio_engines)} fio + "
                        f"{len(ours)} ours, {args.runtime} each)")
                    workload = from_flags(**flags, runtime=args.runtime)
                    df = fio_check(path, workload, rounds=args.rounds, engines=fio_engines, ours_engine=ours,
                                   runtime_ns=runtime_ns, run_kwargs=run_kwargs,
                                   on_progress=lambda m, t=target_name, p=point_name: log(f"{t} {p}: {m}"))
                    every_round.append(df.assign(target=target_name, point=point_name))
                    summary += summary_rows(comparison_frame(df), target_name, point_name, df)
            finally:
                if target_name == "zram":
                    reset_zram(previous_disksize)
                if ramfile is not None:
                    ramfile.close()
    except FtlscopeError as exc:
        print(f"engine_vs_fio: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("engine_vs_fio: interrupted", file=sys.stderr)
        return 130
    finally:
        if not args.keep_file and file_path.exists():
            file_path.unlink()

    if not summary:
        print("engine_vs_fio: nothing was measured", file=sys.stderr)
        return 1
    table = pd.DataFrame(summary)
    title = (f"ftlscope engine vs fio {version}: medians of {args.rounds} round(s) x {args.runtime} "
             f"(kernel {os.uname().release}, {os.cpu_count()} CPUs)")
    console.print(rich_table(table, title))
    counts = table["verdict"].value_counts()
    console.print(f"goal met at {counts.get('yes', 0)} of {len(table)} (target, point, engine) combinations, "
                  f"at parity at {counts.get('at parity', 0)}, within noise at {counts.get('within noise', 0)}, "
                  f"short at {counts.get('no', 0)}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "engine_vs_fio.csv", index=False)
        pd.concat(every_round, ignore_index=True).to_csv(out / "engine_vs_fio_rounds.csv", index=False)
        (out / "engine_vs_fio.md").write_text(markdown(table, title))
        log(f"wrote {out / 'engine_vs_fio.csv'}, {out / 'engine_vs_fio.md'}, {out / 'engine_vs_fio_rounds.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
