"""``ftlscope sim attach|detach|list``: a simulated drive served to the kernel as a loop device.

The server (:mod:`ftlscope.attach_server`, hot path in the Rust crate ``ftlscope-serve``) serves the drive as a
file in a private FUSE mount and puts a loop device over it; each request completes when the simulated drive
would complete it, on the wall clock. This module checks what the user asked, starts the server in the
background, waits until it is ready, and finds, lists and stops servers through their records
(:mod:`ftlscope.attach_state`). docs/attach.md says why FUSE + loop and what the path costs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ftlscope.attach_state import (
    Attachment,
    attachment_for_device,
    attachments,
    path_measured,
    pid_alive,
    run_dir,
)
from ftlscope.errors import ConfigError, SafetyError, TargetError, UsageError
from ftlscope.units import format_ns, format_size, parse_size

__all__ = ["register", "attach", "detach", "cleanup_stale", "default_store", "check_can_attach"]

DEFAULT_SIZE = "16GiB"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


def default_store() -> Path:
    """``$XDG_CACHE_HOME/ftlscope/attached`` (``~/.cache/ftlscope/attached``)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "ftlscope" / "attached"


def check_can_attach() -> None:
    """Raise (exit 2, one line) unless this process can mount FUSE and make loop devices."""
    if os.geteuid() != 0:
        raise TargetError("sim attach needs root (it mounts FUSE and makes a loop device); run it with sudo")
    for path, what in (("/dev/fuse", "FUSE (modprobe fuse)"), ("/dev/loop-control", "loop devices (modprobe loop)")):
        if not os.path.exists(path):
            raise TargetError(f"sim attach needs {path}: this kernel or container lacks {what}")


def _drive_info(spec: str) -> dict:
    from ftlscope import _native

    try:
        return json.loads(_native.SimDevice(spec).info())
    except ValueError as exc:
        raise ConfigError(f"sim attach: {exc}") from None


def _loop_bound(device: str) -> bool:
    return Path(f"/sys/block/{os.path.basename(device)}/loop/backing_file").exists()


def cleanup_stale() -> list[str]:
    """Remove the records of servers that died (a crash, kill -9); what was cleaned, one line each.

    The server's loop device is autocleared by the kernel when the server dies and its FUSE mount lived in the
    server's own mount namespace, so normally only the record is left; a loop device still bound to a dead
    server's file (held open by someone) is detached here as soon as that is possible.
    """
    import fcntl

    cleaned = []
    for a in attachments():
        if a.alive:
            continue
        note = f"removed the record of a crashed server (pid {a.pid}, sim:{a.spec})"
        if a.device and _loop_bound(a.device) and (a.directory.name in _backing_file(a.device)):
            try:
                fd = os.open(a.device, os.O_RDONLY)
                try:
                    fcntl.ioctl(fd, 0x4C01)  # LOOP_CLR_FD
                finally:
                    os.close(fd)
                note += f"; detached {a.device}"
            except OSError as exc:
                note += f"; {a.device} is still in use ({exc.strerror}): it goes when its last user closes it"
        _restore_rq_affinity(a)
        shutil.rmtree(a.directory, ignore_errors=True)
        cleaned.append(note)
    # A directory without a record: a server that died before it was ready.
    try:
        for d in run_dir().iterdir():
            if d.is_dir() and not (d / "state.json").exists():
                pid = _pid_of(d)
                if pid is None or not pid_alive(pid):
                    shutil.rmtree(d, ignore_errors=True)
    except OSError:
        pass
    return cleaned


def _restore_rq_affinity(a: Attachment) -> None:
    """Put back the loop device's completion setting a dead server changed (it does so itself when it stops),
    unless the device serves someone else by now."""
    try:
        before = json.loads((a.directory / "state.json").read_text()).get("rq_affinity_before")
    except (OSError, ValueError):
        return
    if not before or not a.device or (_loop_bound(a.device) and a.directory.name not in _backing_file(a.device)):
        return
    try:
        Path(f"/sys/block/{os.path.basename(a.device)}/queue/rq_affinity").write_text(before)
    except OSError:
        pass


def _backing_file(device: str) -> str:
    try:
        return Path(f"/sys/block/{os.path.basename(device)}/loop/backing_file").read_text().strip()
    except OSError:
        return ""


def _pid_of(directory: Path) -> int | None:
    try:
        return int((directory / "pid").read_text())
    except (OSError, ValueError):
        return None


def attach(spec: str, size_text: str | None, store: str | None, *, foreground: bool = False) -> Attachment:
    """Start a server for ``spec`` and return its record once the loop device is ready."""
    info = _drive_info(spec)
    capacity, block = int(info["size_bytes"]), int(info["logical_block_size"])
    size = parse_size(size_text or DEFAULT_SIZE, "--size", minimum=block)
    if size > capacity:
        raise UsageError(
            f"--size {size_text} is larger than sim:{spec}'s capacity ({format_size(capacity)}); "
            f"give --size {format_size(capacity).replace(' ', '')} or less"
        )
    if size % block:
        raise UsageError(f"--size {size_text} is not a multiple of sim:{spec}'s {block}-byte logical block")
    store_dir = Path(store) if store else default_store()
    name = Path(spec).stem if spec.endswith(".toml") else spec
    backing = store_dir / f"{name}.img"
    if backing.exists() and backing.stat().st_size != size:
        have = backing.stat().st_size
        raise UsageError(
            f"--size {size_text or DEFAULT_SIZE}: {backing} holds a {format_size(have)} drive from an earlier "
            f"attach; give --size {have} to attach it again, or another --store (or remove the file) for a new one"
        )
    check_can_attach()
    cleanup_stale()
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
        run_dir().mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TargetError(
            f"--store {store_dir}: cannot create it ({exc.strerror}); give a writable directory"
        ) from None
    if any(a.alive and Path(a.store) == backing for a in attachments()):
        raise UsageError(f"sim:{spec} is already attached with its data in {backing}; detach it first, or give "
                         "another --store")
    directory = run_dir() / f"{name}-{os.getpid()}-{int(time.time() * 1000) % 100000}"
    directory.mkdir()
    log = open(directory / "server.log", "wb")  # noqa: SIM115 - handed to the server process
    server = subprocess.Popen(
        [sys.executable, "-m", "ftlscope.attach_server", str(directory), spec, str(size), str(backing)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=not foreground,
        # The server imports the same ftlscope as this process, whether installed or from a source tree.
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    log.close()
    (directory / "pid").write_text(str(server.pid))
    try:
        record = _wait_ready(server, directory)
    except BaseException:
        _terminate(server)
        shutil.rmtree(directory, ignore_errors=True)
        raise
    if foreground:
        record.foreground_server = server  # type: ignore[attr-defined]
    return record


def _wait_ready(server: subprocess.Popen, directory: Path) -> Attachment:
    from ftlscope.attach_state import _load

    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        record = _load(directory)
        if record is not None:
            return record
        if server.poll() is not None:
            reason = _first_line(directory / "error") or _first_line(directory / "server.log", last=True)
            raise TargetError(f"sim attach: the server failed: {reason or f'exit status {server.returncode}'}")
        time.sleep(0.05)
    raise TargetError(f"sim attach: the server was not ready within {READY_TIMEOUT_S:.0f} s (log: "
                      f"{directory / 'server.log'})")


def _first_line(path: Path, *, last: bool = False) -> str | None:
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return None
    return (lines[-1] if last else lines[0]) if lines else None


def _terminate(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def detach(device: str) -> Attachment:
    """Stop the server of ``device`` (``/dev/loop3``, ``loop3``); refuse while it is mounted or held."""
    from ftlscope.devices import resolve_block_device

    record = attachment_for_device(device)
    if record is None:
        cleanup_stale()
        raise UsageError(f"{device} is not a simulated drive ftlscope attached; 'ftlscope sim list' shows them")
    dev = resolve_block_device(record.device or device)
    if dev is not None and (dev.mountpoints or dev.holders):
        where = ", ".join([*dev.mountpoints, *dev.holders])
        raise SafetyError(f"{record.device} is in use ({where}); unmount it first, then detach")
    os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while pid_alive(record.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
        _reap(record.pid)
    if pid_alive(record.pid):
        os.kill(record.pid, signal.SIGKILL)
    cleanup_stale()
    return record


def _reap(pid: int) -> None:
    # A server started by this process (tests, the bench) is our child: reap it so it does not linger.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def path_text(path: dict | None) -> str:
    """The path measured on every request (:func:`ftlscope.attach_state.path_measured`), in one cell."""
    if not path:
        return "-"
    return (f"{format_ns(path['path_ns'])} ({format_ns(path['kernel_ns'])} + {format_ns(path['server_ns'])}; "
            f"{path['requests']:,} requests)")


def overhead_text(record: Attachment) -> str:
    o = record.overhead or {}
    if not o:
        return "-"
    return (f"{format_ns(o['trimmed_mean_ns'])} per request (mean; p10 {format_ns(o['p10_ns'])}, p50 "
            f"{format_ns(o['p50_ns'])}, p90 {format_ns(o['p90_ns'])}; FUSE + loop, {o['requests']} QD 1 reads; "
            f"{format_ns(o['large_trimmed_mean_ns'])} for a {format_size(o['large_request_bytes'])} read)")


# ---------------------------------------------------------------------------------------------------------
# the CLI


def cmd_attach(args: argparse.Namespace) -> int:
    from rich.console import Console

    # The device alone on stdout (dev=$(ftlscope sim attach ...)); the rest on stderr.
    out = Console(stderr=True)
    record = attach(args.drive, args.size, args.store, foreground=args.foreground)
    server = getattr(record, "foreground_server", None)
    try:
        print(record.device, flush=True)
        out.print(
            f"[dim]sim:{record.spec}, {format_size(record.size_bytes)}, data kept in {record.store}; "
            f"direct I/O {'on' if record.direct_io else 'off (the kernel refused it)'}; path overhead "
            f"{overhead_text(record)}, subtracted from each request's simulated latency; "
            f"detach with: ftlscope sim detach {record.device}[/dim]",
            highlight=False,
        )
        if server is None:
            return 0
        out.print("[dim]serving in the foreground: Ctrl-C detaches[/dim]")
        server.wait()
    except KeyboardInterrupt:
        if server is None:
            raise
    finally:
        # Ctrl-C reached the server too (same process group): wait until it has let go of everything.
        if server is not None:
            _terminate(server)
            cleanup_stale()
    return 0


def cmd_detach(args: argparse.Namespace) -> int:
    record = detach(args.device)
    print(f"detached {record.device} (sim:{record.spec}; its data stays in {record.store})")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    out = Console(width=None if sys.stdout.isatty() else 200)
    for line in cleanup_stale():
        out.print(f"[dim]{line}[/dim]", highlight=False)
    live = [a for a in attachments() if a.alive]
    if not live:
        out.print("no simulated drives attached ('ftlscope sim attach PRESET' attaches one)")
        return 0
    table = Table(title="Attached simulated drives", title_justify="left")
    table.add_column("device", no_wrap=True)
    for col in ("drive", "size", "data in", "path at attach (mean)", "path since (kernel + server)", "requests",
                "path-limited", "answered late (mean)", "server pid"):
        table.add_column(col)
    for a in live:
        s = a.stats() or {}
        late = f"{s.get('late', 0):,} ({format_ns(s['late_total_ns'] / s['late'])})" if s.get("late") else "0"
        table.add_row(
            a.device or "-", f"sim:{a.spec}", format_size(a.size_bytes), a.store,
            format_ns(a.overhead["trimmed_mean_ns"]) if a.overhead else "-", path_text(path_measured(s)),
            f"{s.get('requests', 0):,}", f"{s.get('path_limited', 0):,}", late, str(a.pid),
        )
    out.print(table)
    return 0


def register(sim_sub: argparse._SubParsersAction) -> None:
    """Add ``attach``, ``detach`` and ``list`` to ``ftlscope sim``."""
    q = sim_sub.add_parser("attach", help="serve a simulated drive to the kernel as a loop device (needs root)")
    q.add_argument("drive", metavar="PRESET|FILE.toml", help="preset name, or path to a device TOML file")
    q.add_argument("--size", help=f"size of the device (default {DEFAULT_SIZE}; at most the drive's capacity)")
    q.add_argument("--store", help=f"directory for the drive's data, a sparse file (default {default_store()})")
    q.add_argument("--foreground", action="store_true", help="serve until Ctrl-C instead of in the background")
    q.set_defaults(func=cmd_attach)
    q = sim_sub.add_parser("detach", help="stop serving an attached drive and remove its loop device")
    q.add_argument("device", help="the loop device 'sim attach' printed (e.g. /dev/loop3)")
    q.set_defaults(func=cmd_detach)
    q = sim_sub.add_parser("list", help="list the attached simulated drives and their path overhead")
    q.set_defaults(func=cmd_list)
