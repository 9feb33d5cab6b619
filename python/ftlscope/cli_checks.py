"""Checks of the command line made before any device is touched, and the outputs' last resort.

Every place a command will write (``--json``, ``--trace``, ``--windows``, ``--out``, ``--markdown``,
``--parquet``) is tried here first: a directory that must exist, a file that can be created or appended to, a
file system with room. A refusal is one line naming the flag and exits 2 before anything is measured. A file
that still cannot be written at the end (the disk filled up meanwhile) does not lose the measurements:
:func:`save_run_outputs` writes them to a fresh temporary directory and says where.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import RunError, UsageError
from .units import format_size, parse_size

KiB, MiB = 1 << 10, 1 << 20
# Room asked of a file system before a run, as far as what it will write can be known: a summary JSON or a
# window table stays well under these; a trace takes about 20 B a request in Parquet (measured here: 100,000
# 4 KiB random reads gave a 1.9 MB trace), so a trace of a known number of requests asks for that much.
ROOM_SMALL_FILE = 64 * KiB
ROOM_DIRECTORY = 1 * MiB
TRACE_BYTES_PER_REQUEST = 20

_NEGATIVE = re.compile(r"^-[0-9.]")


def negative_values_as_values(argv: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """``--size -1m`` as ``--size=-1m``: argparse takes ``-1m`` for an option and says "expected one argument";
    joined, the value reaches the flag's own check, which says what range it accepts. Only options that take a
    value are joined, so ``compare --quiet -1`` style run references stay positional."""
    takes_value = _options_taking_a_value(parser)
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in takes_value and i + 1 < len(argv) and _NEGATIVE.match(argv[i + 1]):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _options_taking_a_value(parser: argparse.ArgumentParser) -> set[str]:
    # argparse has no public way to list a parser's actions; _actions has been stable since Python 3.2.
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options_taking_a_value(sub)
        elif action.option_strings and action.nargs != 0:
            found.update(o for o in action.option_strings if o.startswith("--"))
    return found


# ---------------------------------------------------------------------------------------------------------
# output places


def _free_bytes(directory: Path) -> int:
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def _is_dev_full(st: os.stat_result) -> bool:
    # /dev/full (char 1:7) takes an open but fails every write with ENOSPC.
    return stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 7


def _check_room(directory: Path, flag: str, shown: str, room: int) -> None:
    try:
        free = _free_bytes(directory)
    except OSError:
        return  # a file system that cannot say (some FUSE ones) is tried by writing
    if free < room:
        raise UsageError(f"{flag}: {shown}: the file system holding {directory} has {format_size(free)} free, "
                         f"less than the {format_size(room)} needed; free some space or give another place")


def _try_create(directory: Path, flag: str, shown: str) -> None:
    """Create and remove a file in ``directory``: the only test that catches every reason (read-only mount,
    permissions, /proc, a full inode table)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".ftlscope-check-", dir=directory)
    except OSError as exc:
        raise UsageError(f"{flag}: {shown} cannot be written in {directory} ({exc.strerror or exc}); "
                         "give another place") from None
    os.close(fd)
    os.unlink(name)


def check_output_file(path: str | os.PathLike, flag: str, room: int = ROOM_SMALL_FILE) -> None:
    """``path`` can be written as a file: its directory exists (it is not created: the user did not ask for
    one), it is not a directory, it can be opened for writing, and its file system has ``room`` free."""
    shown = str(path)
    p = Path(path).expanduser()
    if Path(os.path.realpath(p)).parts[1:2] in (("proc",), ("sys",)):
        raise UsageError(f"{flag}: {shown} is in the kernel's {Path(os.path.realpath(p)).parts[1]} file system, "
                         "which holds no files; give a file path")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{flag}: cannot look at {shown} ({exc.strerror}); give another path") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{flag}: {shown} is a directory; give a file path (e.g. {p / 'out'}{p.suffix})")
        if _is_dev_full(st):
            raise UsageError(f"{flag}: {shown}: every write to /dev/full fails; give a file path")
        if not stat.S_ISREG(st.st_mode):
            return  # /dev/stdout, a pipe, /dev/null: written as a stream; nothing to check ahead
        try:
            # Append mode: the test neither truncates nor changes the file.
            os.close(os.open(p, os.O_WRONLY | os.O_APPEND))
        except OSError as exc:
            raise UsageError(f"{flag}: {shown} cannot be written ({exc.strerror}); give another path") from None
        _check_room(p.parent, flag, shown, max(room - st.st_size, 0))
        return
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{flag}: {shown}: the directory {parent} does not exist; create it first or give "
                         "another path")
    _try_create(parent, flag, shown)
    _check_room(parent, flag, shown, room)


def check_output_dir(path: str | os.PathLike, flag: str, room: int = ROOM_DIRECTORY) -> None:
    """``path`` can hold a command's files: an existing directory that can be written, or a new one (it is
    what the user asked for) whose nearest existing parent is a writable directory with ``room`` free."""
    shown = str(path)
    p = Path(path).expanduser().absolute()
    existing = p
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == p else f"lies under {existing}, which is a file"
        raise UsageError(f"{flag}: {shown} {what}, not a directory; give a directory path")
    _try_create(existing, flag, shown)
    _check_room(existing, flag, shown, room)


def trace_room(workload) -> int:
    ops = workload.stop.get("ops")
    return max(ROOM_SMALL_FILE, ops * TRACE_BYTES_PER_REQUEST) if ops else ROOM_DIRECTORY


# ---------------------------------------------------------------------------------------------------------
# the commands' flags


def _check_force(args: argparse.Namespace) -> None:
    if getattr(args, "force", False) and not getattr(args, "destructive", None):
        raise UsageError("--force: only overrides the file-system check of --destructive DEVICE; add "
                         "--destructive naming the target again, or drop --force")


def _check_span(args: argparse.Namespace, default: str) -> None:
    span = getattr(args, "span", None)
    if span is None:
        return
    value = parse_size(span, "--span")
    if value < MiB:
        raise UsageError(f"--span: {span} is less than 1 MiB, the smallest span the probes and experiments "
                         f"work in (they round to whole MiB); give 1MiB or more, or leave it out for {default}")


def _check_properties(args: argparse.Namespace) -> None:
    text = getattr(args, "properties", None)
    if text is not None and text.strip().lower() != "all" and not any(t.strip() for t in text.split(",")):
        raise UsageError(f"--properties: '{text}' names no property; give e.g. P1,P4, or leave it out for all")


def _check_repeat(args: argparse.Namespace) -> None:
    repeat = getattr(args, "repeat", None)
    if repeat is not None and repeat < 1:
        raise UsageError(f"--repeat: {repeat} is out of range; give 1 or more")


def check_run_outputs(args: argparse.Namespace, trace: str | None, room: int = ROOM_DIRECTORY) -> None:
    """The outputs every run-shaped command (run, replay) may write: --json, --windows, --trace (``trace``,
    needing ``room``), checked before the device is touched; --force needs --destructive."""
    _check_force(args)
    if args.json:
        check_output_file(args.json, "--json")
    if args.windows:
        check_output_file(args.windows, "--windows")
    if trace:
        check_output_file(trace, "--trace", room)


def _check_run(args: argparse.Namespace) -> None:
    room = ROOM_DIRECTORY
    if args.trace and args.ops:
        from .workload import from_flags

        room = trace_room(from_flags(ops=args.ops))
    check_run_outputs(args, args.trace, room)
    if getattr(args, "verify_record", None):
        if not args.verify:
            raise UsageError("--verify-record: saves a --verify run's write record; add --verify")
        check_output_file(args.verify_record, "--verify-record", ROOM_DIRECTORY)


def _check_new_file_size(args: argparse.Namespace, confine: str) -> None:
    """--size of bench, probe and profile is the size of a file they create: on a simulated drive, which has its
    preset's capacity, it would confine nothing, and a user who meant a range is told which flag does that."""
    if getattr(args, "size", None) and str(getattr(args, "target", "") or "").startswith("sim:"):
        raise UsageError(f"--size {args.size}: is the size of a file to create; {args.target} has its preset's "
                         f"capacity: to confine the ranges use {confine.format(size=args.size)}")


def _check_bench(args: argparse.Namespace) -> None:
    if args.list:
        return
    _check_new_file_size(args, "--param span={size}")
    _check_force(args)
    _check_repeat(args)
    check_output_dir(args.out, "--out")


def _check_probe(args: argparse.Namespace) -> None:
    _check_new_file_size(args, "--span {size}")
    _check_force(args)
    _check_properties(args)
    _check_span(args, "the default 4GiB")
    check_output_dir(args.out, "--out")
    if args.json:
        check_output_file(args.json, "--json")


def _check_profile(args: argparse.Namespace) -> None:
    _check_new_file_size(args, "--span {size}")
    _check_force(args)
    _check_repeat(args)
    _check_span(args, "the whole device")
    if args.out:
        check_output_dir(args.out, "--out")
    else:
        check_output_dir("ftlscope-profiles", "--out (default ftlscope-profiles/)")


def _check_validate_probes(args: argparse.Namespace) -> None:
    _check_properties(args)
    if args.out:
        check_output_dir(args.out, "--out")
    if args.markdown:
        check_output_file(args.markdown, "--markdown")


def _check_report(args: argparse.Namespace) -> None:
    if args.out:
        check_output_dir(args.out, "--out")


def _check_compare(args: argparse.Namespace) -> None:
    check_output_dir(args.out, "--out")


def _check_export(args: argparse.Namespace) -> None:
    check_output_dir(args.parquet, "--parquet")


_CHECKS: dict[str, Callable[[argparse.Namespace], None]] = {
    "run": _check_run, "bench": _check_bench, "probe": _check_probe, "profile": _check_profile,
    "validate-probes": _check_validate_probes, "report": _check_report, "compare": _check_compare,
    "export": _check_export, "fio-check": _check_force,
}


def check_args(args: argparse.Namespace) -> None:
    """Refuse (UsageError, exit 2) what the command's flags ask for but cannot be done, before it starts."""
    check = _CHECKS.get(getattr(args, "command", ""))
    if check is not None:
        check(args)


# ---------------------------------------------------------------------------------------------------------
# writing at the end


def save_run_outputs(result, *, json: str | None, trace: str | None, windows: str | None,
                     plots: str | None = None, json_writer=None, plots_writer=None,
                     verify_record: str | None = None) -> list[str]:
    """Write a run's files where asked (``json_writer(path)`` in place of the summary JSON, e.g. fio's shape;
    ``plots_writer(directory)`` for the figures). When one cannot be written (the disk filled up during the run,
    a mount went away), every asked-for file goes to a new temporary directory instead, and RunError (exit 1)
    says where; the measurements are never lost to an unwritable place."""
    wanted = [(path, save) for path, save in ((json, json_writer or result.save_json),
                                                (trace, result.save_trace), (windows, result.save_windows),
                                                (plots, plots_writer),
                                                (verify_record, result.save_write_record)) if path and save]
    saved: list[str] = []
    streamed = getattr(result, "streamed_trace", None)
    for path, save in wanted:
        try:
            saved.append(str(save(path)))
        except OSError as exc:
            # A trace that failed while it was written went on in a kept directory: the rest joins it there.
            kept = (streamed.kept_dir if streamed is not None else None) or Path(
                tempfile.mkdtemp(prefix="ftlscope-kept-"))
            lost = []
            for other, other_save in wanted:
                try:
                    other_save(kept / Path(other).name)
                except OSError as kept_exc:  # e.g. a streamed trace whose writer failed: say so, keep the rest
                    lost.append(f"{Path(other).name}: {kept_exc.strerror or kept_exc}")
            kept_names = [Path(p).name for p, _ in wanted if not any(x.startswith(f"{Path(p).name}:") for x in lost)]
            not_kept = f"; not kept: {'; '.join(lost)}" if lost else ""
            raise RunError(f"cannot write {path} ({exc.strerror or exc}); the results are kept in {kept}/ "
                           f"({', '.join(kept_names)}){not_kept}") from None
    return saved
