"""The write rate-limiting shim's settings ("Fantastic SSD Internals and How to Learn and Use Them" §5.2).

The shim itself runs in the engine's submission path (``crates/ftlscope-engine/src/write_shim.rs``, whose
documentation states the algorithm and our reading of the paper's rate-limiting function); this module turns what
a user gives (``--rate-limit-writes auto|SPEED``, ``--period``, ``--max-held``, ``--from-profile``,
``--allow-noop``) into the settings the engine takes, and refuses what cannot work before any device is touched.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any

from ..errors import UsageError
from ..units import format_size, parse_duration_ns, parse_size
from .params import NewtParams

FLAG = "--rate-limit-writes"
DEFAULT_PERIOD = "100ms"
DEFAULT_MAX_HELD = "256MiB"


@dataclass(frozen=True)
class ShimSettings:
    """``flush_speed_bps``: the drive's flush speed (P8 / P10, bytes/s) the shim paces writes to, or None when
    ``--allow-noop`` let a run go on without it (``noop_reason`` says why); ``period_ns``: the monitored period
    over which write intensity is measured; ``max_held_bytes``: the most the shim holds back; ``source``: where
    the flush speed came from, in words; ``buffer_bytes``: the drive's write buffer (P8) the shim models, None
    when not known (a speed given on the command line: the engine takes 200 ms of the flush speed);
    ``write_through``: a speed forced on a drive whose profile found no write buffer (P8 none): no full-buffer
    flush can come, so the shim holds nothing and only measures (it holds a write only when its model of the
    buffer says a flush is imminent); ``bound_mean_delay``: keep the mean write delay within the period (a delay
    budget: ``--bound-mean-delay``); ``hold_in_read_storms``: hold writes while the reads come several times
    faster than usual and the buffer would overflow, so that the flushes writes faster than the drive drains
    force anyway come between read storms (on by default; ``--no-hold-in-read-storms`` turns it off)."""

    flush_speed_bps: float | None
    period_ns: int = 100_000_000
    max_held_bytes: int = 256 << 20
    source: str = ""
    noop_reason: str | None = None
    buffer_bytes: int | None = None
    write_through: bool = False
    bound_mean_delay: bool = False
    hold_in_read_storms: bool = True

    @property
    def active(self) -> bool:
        return self.flush_speed_bps is not None

    @classmethod
    def resolve(cls, spec: str | None, params: NewtParams | None = None, period: str | int = DEFAULT_PERIOD,
                max_held: str | int = DEFAULT_MAX_HELD, allow_noop: bool = False) -> ShimSettings | None:
        """The settings for ``--rate-limit-writes spec`` (None: no shim). ``auto`` takes the flush speed from
        ``params`` (``--from-profile``); a profile without it (a write-through drive, a buffer that never drains
        while idle, P8 or P10 not probed) is a UsageError unless ``allow_noop``, which gives inactive settings
        that run without the shim and say so."""
        if spec is None:
            return None
        period_ns = parse_duration_ns(period, "--period", minimum=1_000_000, maximum=3_600 * 10**9)
        max_held_bytes = parse_size(max_held, "--max-held", minimum=1)
        if spec.strip().lower() == "auto":
            if params is None:
                raise UsageError(f"{FLAG} auto: give --from-profile RUN (a profile whose probes found the write "
                                 "buffer, P8, and its flush window, P10), or a speed (e.g. "
                                 f"{FLAG} 57.5MB/s)")
            speed = params.flush_speed_bps()
            if speed is None:
                why = params.why_no_flush_speed()
                if not allow_noop:
                    raise UsageError(f"{FLAG} auto: no flush speed in profile {params.source}: {why}; give a "
                                     f"speed ({FLAG} SPEED) or --allow-noop to run without the shim")
                return cls(None, period_ns, max_held_bytes, source=f"profile {params.source}", noop_reason=why)
            source = (f"profile {params.source}: P8 {format_size(params.buffer_bytes or 0)} / P10 "
                      f"{(params.flush_window_s or 0) * 1e3:g} ms")
            return cls(speed, period_ns, max_held_bytes, source=source, buffer_bytes=params.buffer_bytes)
        if params is not None and params.write_through():
            # The user forced the speed, not a buffer the profile says the drive does not have.
            return cls(parse_speed(spec), period_ns, max_held_bytes, write_through=True,
                       source=f"{FLAG} {spec}; profile {params.source}: no write buffer (P8 none), no flush to "
                              "hold writes back for")
        return cls(parse_speed(spec), period_ns, max_held_bytes, source=f"{FLAG} {spec}")

    def engine_options(self) -> dict[str, Any] | None:
        """The engine's ``write_shim`` run option (None when inactive)."""
        if not self.active:
            return None
        return {"flush_speed_bps": float(self.flush_speed_bps), "period_ns": int(self.period_ns),
                "max_held_bytes": int(self.max_held_bytes), "buffer_bytes": int(self.buffer_bytes or 0),
                "write_through": bool(self.write_through), "bound_mean_delay": bool(self.bound_mean_delay),
                "hold_in_read_storms": bool(self.hold_in_read_storms)}

    def to_json(self) -> dict[str, Any]:
        return {"active": self.active, "flush_speed_bps": self.flush_speed_bps, "period_ns": self.period_ns,
                "max_held_bytes": self.max_held_bytes, "buffer_bytes": self.buffer_bytes,
                "write_through": self.write_through, "bound_mean_delay": self.bound_mean_delay,
                "hold_in_read_storms": self.hold_in_read_storms,
                "source": self.source,
                "noop_reason": self.noop_reason}


def parse_speed(text: str) -> float:
    """Bytes per second in ``300MB/s``, ``57.5MB/s``, ``1GiB/s`` (``/s`` may be left out)."""
    value = str(text).strip()
    size = value[:-2] if value.lower().endswith("/s") else value
    try:
        speed = parse_size(size, FLAG, minimum=1)
    except UsageError:
        raise UsageError(f"{FLAG}: cannot read '{text}' as a speed; write e.g. 300MB/s or 57.5MB/s, or auto "
                         "with --from-profile RUN") from None
    return float(speed)


# ---- the command line: run and replay declare these flags through one helper ---------------------------------


def add_flags(p: Any) -> None:
    """``--rate-limit-writes``, ``--period``, ``--max-held``, ``--from-profile``, ``--allow-noop`` on ``p``."""
    g = p.add_argument_group("write rate-limiting shim (Newt: 'Fantastic SSD Internals and How to Learn and Use "
                             "Them' §5.2)")
    g.add_argument(FLAG, metavar="auto|SPEED",
                   help="hold writes back so they enter the drive no faster than it flushes its write buffer: auto "
                        "(the flush speed P8 / P10 of --from-profile RUN) or a speed (e.g. 57.5MB/s); writes are "
                        "paced once their intensity over --period reaches half that speed; reads and flushes are "
                        "never delayed, and nothing held crosses a flush")
    g.add_argument("--period", default=DEFAULT_PERIOD,
                   help=f"the monitored period over which write intensity is measured (default {DEFAULT_PERIOD})")
    g.add_argument("--max-held", default=DEFAULT_MAX_HELD,
                   help=f"the most bytes held back at once (default {DEFAULT_MAX_HELD}); at the bound, writes go "
                        "without delay")
    g.add_argument("--bound-mean-delay", action="store_true",
                   help="keep the mean write delay (over every write) within --period: past that budget the shim "
                        "lets what it holds go; costs read gain where long holds are what pays (see docs/newt.md)")
    g.add_argument("--hold-in-read-storms", action=argparse.BooleanOptionalAction, default=None,
                   help="also hold writes while the reads come at least 3x faster than usual and the buffer would "
                        "overflow, and let them go once the storm has passed: the flushes writes faster than the "
                        "drive drains force anyway then come between read storms; costs the writes long delays "
                        "(default: on; --no-hold-in-read-storms turns it off; see docs/newt.md)")
    g.add_argument("--from-profile", metavar="RUN",
                   help="take the drive's properties from this stored profile (a run id, a prefix, latest, or a "
                        "profile directory)")
    g.add_argument("--allow-noop", action="store_true",
                   help="with auto: run without the shim (and say so) when the profile has no flush speed (a "
                        "write-through drive, a hard disk), instead of refusing")


def settings_from_args(args: Any) -> ShimSettings | None:
    """The shim's settings from the flags (None without --rate-limit-writes); UsageError on a bad value. Reads
    the profile when one is given: ``auto`` takes its flush speed, a forced speed whether the drive has a write
    buffer at all."""
    spec = getattr(args, "rate_limit_writes", None)
    if spec is None:
        return None
    params = NewtParams.from_profile(args.from_profile) if args.from_profile else None
    return with_shim_flags(ShimSettings.resolve(spec, params, args.period, args.max_held, args.allow_noop), args)


def with_shim_flags(settings: ShimSettings | None, args: Any) -> ShimSettings | None:
    """``settings`` with ``--bound-mean-delay`` and ``--[no-]hold-in-read-storms`` applied when given (None:
    the settings' own)."""
    if settings is None:
        return None
    bound = settings.bound_mean_delay or bool(getattr(args, "bound_mean_delay", False))
    given = getattr(args, "hold_in_read_storms", None)
    storms = settings.hold_in_read_storms if given is None else bool(given)
    return replace(settings, bound_mean_delay=bound, hold_in_read_storms=storms)


def noop_notice(settings: ShimSettings | None) -> str | None:
    """What to tell a user whose shim --allow-noop turned off."""
    if settings is None or settings.active:
        return None
    return (f"{FLAG} auto: not applied ({settings.noop_reason}, {settings.source}); this run is NOT rate-limited "
            "(--allow-noop)")


def describe(shim: dict[str, Any] | None) -> str | None:
    """One line on what the shim did, from the summary's ``write_shim``."""
    from ..units import format_ns

    if not shim:
        return None
    if not shim.get("active"):
        return f"write shim: not applied ({shim.get('noop_reason')})"
    delay = shim.get("delay_ns") or {}
    held = shim.get("held_bytes") or {}
    delayed, writes = shim.get("delayed_writes", 0), shim.get("writes", 0)
    line = (f"write shim ({shim['flush_speed_bps'] / 1e6:.1f} MB/s, {shim['source']}): {delayed:,} of {writes:,} "
            f"writes delayed, mean {format_ns(delay.get('mean', 0))} over all writes, max "
            f"{format_ns(delay.get('max', 0))}; at most {format_size(held.get('max', 0))} held")
    if shim.get("storm_holds"):
        line += f"; {shim['storm_holds']:,} writes held while the reads stormed"
    if shim.get("write_through"):
        line += "; the drive has no write buffer (its profile): no flush to avoid, nothing held"
    overloaded = shim.get("overloaded_writes") or 0
    if overloaded:
        # Counted apart from the delayed ones, not out of them: such a write starts no hold of its own, but one
        # that arrives behind writes already held still waits its turn (and counts as delayed too).
        line += (f"; {overloaded:,} writes came faster than the drive flushes for good (sustained urgency up to "
                 f"{shim.get('sustained_urgency_max', 0):.2f}), where holding cannot help: none was held for its "
                 "own sake, those behind held writes waited their turn")
    hurt = hurt_notice(shim)
    return f"{line}; {hurt}" if hurt else line


# Reads under holding this much slower (geometric means) than reads with nothing held: said in the output even
# when the shim did not back off (it backs off at 3x, the engine's HURT_RATIO).
HURT_NOTICE_RATIO = 1.05


def read_slowdown(shim: dict[str, Any] | None) -> float | None:
    """How many times slower the reads that completed while the shim held writes were than those that completed
    while it held nothing (geometric means); None without both."""
    held, free = (shim or {}).get("read_geomean_held_ns"), (shim or {}).get("read_geomean_free_ns")
    return held / free if held and free else None


def hurt_notice(shim: dict[str, Any] | None) -> str | None:
    """A warning, with the shim's own numbers, when holding slowed the reads: the shim backed off (at 3x), or
    the reads under holding were more than 5 % slower. A forced shim (a speed on the command line) is the user's
    order and still backs off: the back-off measures the drive, not the premise the user gave."""
    from ..units import format_ns

    ratio = read_slowdown(shim)
    backoffs = (shim or {}).get("backoffs") or 0
    if not shim or ratio is None or (ratio <= HURT_NOTICE_RATIO and not backoffs):
        return None
    means = (f"{format_ns(shim['read_geomean_held_ns'])} geometric mean over {shim.get('reads_held', 0):,} reads "
             f"completed while writes were held, {format_ns(shim['read_geomean_free_ns'])} over "
             f"{shim.get('reads_free', 0):,} with nothing held")
    gave_up = (f"the shim gave up {backoffs:,} hold{'s' if backoffs > 1 else ''} whose recent reads were at least 3x "
               "slower than with nothing held")
    if ratio > HURT_NOTICE_RATIO:
        text = f"warning: reads were {ratio:.2f}x slower while writes were held ({means})"
        return f"{text}; {gave_up}" if backoffs else text
    return f"{gave_up} (over the run: {means})"
