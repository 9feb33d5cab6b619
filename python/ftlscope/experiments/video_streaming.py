"""``video-streaming`` (after the video-streaming scenario of "Solid State Disks vs Magnetic Disks: Making the
right choice", its §4.4 and Figures 4.13-4.18): how many clients, each streaming its own video at a fixed rate
(1 MB/s, DVD quality or better), a drive serves before clients fall behind.

The thesis laid out 200 MB files in an otherwise empty ext4 and streamed 50 to 100 clients, each from a
different file (the worst case: no two clients share data). Here: ``mkfs.ext4`` (``filesystem``) on the block
device, mount it, create one file of ``span`` bytes (filled, so every read hits written blocks), and for each
number of clients N of ``clients`` in turn run the engine with N queues on that file: each queue is one client,
reading its own 1/N share of the file sequentially at QD 1 in ``request_size`` requests, paced at ``rate``
(the engine's rate limit, whose whole-run value N x ``rate`` it splits evenly over the queues, so each client is
paced on its own schedule from its first request; a client that falls behind issues back to back). One file
split into N shares stands for N files: ext4 lays files created one after the other in the same consecutive
extents, so the drive sees the same N streams. The engine does the pacing (a sleep, then a short spin, per
request) and waits for completions blocking, so hundreds of clients cost little CPU; a Python thread per client
would not keep such schedules on a busy machine.

Per client, its achieved rate: a client's k-th request is due k request periods after its first (the engine's
pacing); of the requests due in its window (from the first due after the warm-up to the last due time before the
run ended, a whole number of periods) the bytes that had arrived by the window's end, over its length. A client
on schedule gets exactly its rate (a late request that catches up within the window costs nothing, as a
player's buffer absorbs it); one that falls behind gets the share of its schedule it received, and latency
jitter at the window's ends cannot blur the 99 % criterion on a short run. A client keeps its rate when it gets
99 % of it; N clients are served when 99 % of them keep their rate (the thesis's criterion). N steps up through
``clients`` until a step is not served; the page cache is dropped before each step (every read is O_DIRECT
anyway).

Needs root and ``--destructive DEVICE`` (it makes a file system); a ``sim:PRESET`` target is attached as a
loop device for the run (``attach_size``) and detached after.

Findings: ``max_clients_served`` (the largest N served), ``first_clients_missed`` with the mean, std and lowest
client rate there, and ``served_mb_s`` (the drive's total rate at the largest N served).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import plots
from ..errors import UsageError
from ..units import format_size
from ._attached import block_device, check_block_target, on_block_device
from ._common import workload
from .base import Experiment, Param, finding
from .context import Context
from .fs_impact import FILESYSTEMS, _mkfs, _on_file, _Skip, drop_caches, mounted

MiB = 1 << 20
GiB = 1 << 30
KEEP = 0.99  # a client keeps its rate at 99 % of it; N clients are served when 99 % of them keep it (§4.4.2)
MAX_CLIENTS = 256  # the engine's most queues
MAX_SHARE = 0.7  # of the device for the file: the file system needs the rest


def _check(p: dict[str, Any]) -> None:
    bad = [n for n in p["clients"] if not 1 <= n <= MAX_CLIENTS]
    if bad:
        raise UsageError(f"--param clients: {bad[0]} is out of range; give 1 to {MAX_CLIENTS} clients per step "
                         "(the engine's most queues)")
    if p["rate"] <= 0:
        raise UsageError("--param rate: give a rate above 0 (e.g. 1MB for 1 MB/s)")
    if p["request_size"] <= 0 or p["request_size"] % 4096:
        raise UsageError(f"--param request_size: give a multiple of 4 KiB (got {p['request_size']})")
    if p["runtime"] < 2 * p["request_size"] * 1e9 / p["rate"]:
        raise UsageError(f"--param runtime: give at least two of a client's periods ({p['request_size']} B at "
                         f"{p['rate']} B/s every {p['request_size'] / p['rate']:g} s), so its rate can be measured")
    if p["filesystem"] not in FILESYSTEMS:
        raise UsageError(f"--param filesystem: unknown file system {p['filesystem']} (known: {','.join(FILESYSTEMS)})")


def _file_size(ctx: Context, p: dict[str, Any], capacity: int) -> int:
    room = int(capacity * MAX_SHARE) // MiB * MiB
    size = (p["span"] or min(capacity // 2, 2 * GiB)) // MiB * MiB
    if size > room:
        if ctx.repetition == 0:
            ctx.notes.append(f"video-streaming: the file is {format_size(room)}, not {format_size(size)}: "
                             f"{MAX_SHARE:.0%} of the device, so the file system has room for its metadata")
        size = room
    largest = max(p["clients"])
    if size < largest * p["request_size"]:
        raise UsageError(f"--param span: a {format_size(size)} file gives {largest} clients less than one "
                         f"{format_size(p['request_size'])} request each; give a larger span or fewer clients")
    return size


def client_rates(trace: pd.DataFrame, clients: int, rate: float, request_size: int, warmup_ns: int) -> pd.DataFrame:
    """Per client (queue): its achieved rate in bytes/s, whether it kept its rate, and its requests' latency.

    A client's k-th request is due k x ``request_size`` / ``rate`` after its first (the engine's pacing). Its
    window runs from its first request due after the warm-up to the last due time before the run ended, a whole
    number of periods; the achieved rate is the bytes of the requests due in the window that had arrived by its
    end, over its length. A client on schedule gets exactly its rate (a late request that catches up before
    the window ends costs nothing, as a player's buffer absorbs it); one that falls behind gets the share of its
    schedule it received. Endpoint jitter, which would blur a 99 % criterion on a short run, does not enter.
    """
    period = request_size * 1e9 / rate
    ok = trace[trace["status"] >= 0]
    if ok.empty:
        return pd.DataFrame({"client": range(clients), "achieved_mb_s": 0.0, "kept": 0.0, "requests": 0,
                             "lat_mean_ms": np.nan, "lat_max_ms": np.nan})
    start = int(ok["submit_ns"].min()) + warmup_ns
    end = int(ok["complete_ns"].max())
    rows = []
    for client in range(clients):
        mine = ok[ok["queue"] == client].sort_values("submit_ns")
        complete = mine["complete_ns"].to_numpy(dtype=np.int64)
        achieved = 0.0
        if len(mine):
            anchor = int(mine["submit_ns"].iloc[0])
            first = max(0, int(np.ceil((start - anchor) / period)))
            last = int((end - anchor) // period)
            if last > first:
                deadline = anchor + last * period
                due = complete[first:last]
                achieved = rate * float(np.count_nonzero(due <= deadline)) / (last - first)
        measured = mine[~mine["warmup"]]
        rows.append({"client": client, "achieved_mb_s": achieved / 1e6, "kept": float(achieved >= KEEP * rate),
                     "requests": len(measured),
                     "lat_mean_ms": float(measured["latency_ns"].mean()) / 1e6 if len(measured) else np.nan,
                     "lat_max_ms": float(measured["latency_ns"].max()) / 1e6 if len(measured) else np.nan})
    return pd.DataFrame(rows)


def _stream(ctx: Context, p: dict[str, Any], point: Path, size: int):
    for n in sorted(set(p["clients"])):
        drop_caches(point)
        wl = workload("read", size=p["request_size"], pattern="sequential", qd=1, queues=n, span=size,
                      runtime_ns=p["runtime"], warmup_ns=p["warmup"],
                      rate={"bytes_per_s": {"read": n * p["rate"], "write": 0, "trim": 0}})
        result = ctx.run(wl, f"{n} clients at {p['rate'] / 1e6:g} MB/s", trace=True)
        per_client = client_rates(result.trace, n, p["rate"], p["request_size"], p["warmup"])
        for row in per_client.to_dict("records"):
            yield {"clients": n, **row}
        if per_client["kept"].mean() < KEEP:
            if ctx.repetition == 0:
                ctx.notes.append(f"video-streaming: stopped after {n} clients, the first step at which fewer than "
                                 f"{KEEP:.0%} of the clients kept {KEEP:.0%} of their rate")
            return


def measure(ctx: Context, p: dict[str, Any]):
    check_block_target(ctx, "video-streaming", "it makes a file system")
    capacity = ctx.capacity if ctx.kind != "simulated" else min(p["attach_size"], ctx.capacity)
    _file_size(ctx, p, capacity)  # refuse a bad span before anything is attached
    with block_device(ctx, "video-streaming", p["attach_size"]) as (device, capacity), \
            on_block_device(ctx, device):
        size = _file_size(ctx, p, capacity)
        try:
            _mkfs(device, p["filesystem"])
            with mounted(device, p["filesystem"]) as point, _on_file(ctx, point / "video-streaming.data", size):
                yield from _stream(ctx, p, point, size)
        except _Skip as skip:
            raise UsageError(f"--param filesystem: {skip}; give another file system") from None
        finally:
            _wipe(ctx, device)


def _wipe(ctx: Context, device: str) -> None:
    import subprocess

    # As fs-impact: leave the device without the file system's signature, so the next run needs no --force.
    done = subprocess.run(["wipefs", "--all", "--quiet", device], capture_output=True, text=True)
    if done.returncode != 0:
        ctx.notes.append(f"video-streaming: wipefs {device} failed after the run ({done.stderr.strip()})")


def per_step(table: pd.DataFrame) -> pd.DataFrame:
    """Per number of clients: mean, std and lowest achieved rate over the clients, and the share keeping it."""
    grouped = table.groupby("clients")
    return pd.DataFrame({
        "mean_mb_s": grouped["achieved_mb_s"].mean(),
        "std_mb_s": grouped["achieved_mb_s"].std(ddof=0),
        "min_mb_s": grouped["achieved_mb_s"].min(),
        "kept_share": grouped["kept"].mean(),
        "total_mb_s": grouped["achieved_mb_s"].sum(),
    }).sort_index()


def analyse(table: pd.DataFrame, p: dict[str, Any]) -> dict[str, Any]:
    findings: dict[str, Any] = {}
    if table.empty:
        return findings
    steps = per_step(table)
    rate = p["rate"] / 1e6
    missed = steps[steps["kept_share"] < KEEP]
    first_missed = int(missed.index[0]) if not missed.empty else None
    served = steps[steps["kept_share"] >= KEEP]
    if first_missed is not None:
        served = served[served.index < first_missed]
    findings["rate_mb_s"] = finding(rate, "MB/s", "the rate each client streams at (--param rate)")
    findings["most_clients_measured"] = finding(int(steps.index.max()), "clients", "results.csv: the largest step")
    if not served.empty:
        n = int(served.index.max())
        findings["max_clients_served"] = finding(
            n, "clients", f"results.csv: the largest number of clients at which {KEEP:.0%} of them kept {KEEP:.0%} "
                        f"of {rate:g} MB/s" + ("" if first_missed is not None else
                                                 " (every step measured was served: the limit lies beyond)"))
        findings["served_mb_s"] = finding(steps.loc[n, "total_mb_s"], "MB/s",
                                          f"results.csv: the clients' rates summed at {n} clients")
    elif first_missed is not None:
        findings["max_clients_served"] = finding(0, "clients", f"results.csv: even {first_missed} clients, the "
                                                             "fewest measured, were not served")
    if first_missed is not None:
        row = steps.loc[first_missed]
        findings["first_clients_missed"] = finding(first_missed, "clients", f"results.csv: the first step at which "
                                                                          f"fewer than {KEEP:.0%} kept their rate")
        findings["missed_kept_share"] = finding(row["kept_share"], "share",
                                                f"results.csv: clients keeping their rate at {first_missed} clients")
        findings["missed_mean_mb_s"] = finding(row["mean_mb_s"], "MB/s", f"results.csv: mean client rate at "
                                                                         f"{first_missed} clients")
        findings["missed_std_mb_s"] = finding(row["std_mb_s"], "MB/s", f"results.csv: std of the client rates at "
                                                                       f"{first_missed} clients")
        findings["missed_min_mb_s"] = finding(row["min_mb_s"], "MB/s", f"results.csv: the slowest client at "
                                                                       f"{first_missed} clients")
    return findings


def figures(table: pd.DataFrame, findings: dict[str, Any], p: dict[str, Any], directory: Path) -> list[Path]:
    if table.empty:
        return []
    steps = per_step(table)
    rate = p["rate"] / 1e6
    fig, axes = plots.panels(f"Clients streaming at {rate:g} MB/s each", 1, 2, size=(12, 4.5))
    x = np.arange(len(steps))
    labels = [str(n) for n in steps.index]
    # The thesis's Figures 4.13-4.18 (one bar per drive, mean and std over the clients), one bar per N here.
    axes[0].bar(x, steps["mean_mb_s"], 0.6, yerr=steps["std_mb_s"], capsize=3, color="C0", label="mean ± std")
    axes[0].plot(x, steps["min_mb_s"], "v", color="C3", label="slowest client")
    axes[0].axhline(rate, color="0.4", linestyle="--", linewidth=1, label=f"target {rate:g} MB/s")
    axes[0].set_ylabel("achieved rate per client (MB/s)")
    axes[0].set_ylim(bottom=0)
    axes[1].plot(x, 100 * steps["kept_share"], "o-", color="C1")
    axes[1].axhline(100 * KEEP, color="0.4", linestyle="--", linewidth=1, label=f"{KEEP:.0%} of the clients")
    axes[1].set_ylabel(f"clients getting ≥ {KEEP:.0%} of the rate (%)")
    axes[1].set_ylim(0, 105)
    for ax in axes:
        ax.set_xticks(x, labels)
        ax.set_xlabel("concurrent clients")
        ax.legend(fontsize=8)
    caption = (f"Each client reads its own share of one file on {p['filesystem']} sequentially at {rate:g} MB/s in "
               f"{format_size(p['request_size'])} requests: the mean, std and slowest achieved rate over the clients "
               "per number of clients, and the share of the clients that kept 99 % of the rate.")
    return [plots.save(fig, directory, "video_streaming", caption)]


EXPERIMENTS = [
    Experiment(
        name="video-streaming",
        summary="N clients each streaming its own file at a fixed rate (1 MB/s), N stepped up until fewer than 99 % "
                "of them keep 99 % of it: per-client rate mean and std per N (makes a file system: needs root and "
                "a block device)",
        source='"Solid State Disks vs Magnetic Disks: Making the right choice" §4.4',
        writes=True,
        preconditioning="none",
        params=(
            Param("clients", "ints", [16, 32, 48, 64, 96, 128, 192, 256], "numbers of clients, stepped up in order",
                  "16,32,48,64,96,128,192,256"),
            Param("rate", "size", 10**6, "bytes per second each client streams", "1MB (1 MB/s)"),
            Param("request_size", "size", 512 * 1024,
                  "size of each client's reads (512 KiB: the largest a loop device passes on whole)", "512KiB"),
            Param("span", "size", 0, "size of the file the clients share; 0 = half the device, at most 2 GiB",
                  "0 (half, ≤ 2GiB)"),
            Param("filesystem", "str", "ext4", "the file system the file is on (the thesis's)", "ext4"),
            Param("runtime", "duration", 4 * 10**9, "measured time per number of clients", "4s"),
            Param("warmup", "duration", 2 * 10**9, "left out at the start of each step (all clients start at once)",
                  "2s"),
            Param("attach_size", "size", 4 * GiB, "on a sim: target, the size it is attached at (sim attach)",
                  "4GiB"),
        ),
        keys=("clients", "client"),
        check=_check,
        measure=measure,
        analyse=analyse,
        figures=figures,
    )
]
