"""Whether a forced optimization fits the drive: ``--align-reads SIZE`` and ``--rate-limit-writes SPEED`` are
applied whatever the drive is, and on a drive without the quirk they address they only cost (aligned reads read
more bytes; held writes wait for a flush that never comes). This says so in one line per optimization, naming the
premise the profile does not show, so a user does not take the forced run for the optimization's gain."""

from __future__ import annotations

from .params import NewtParams

ALIGN_FLAG, SHIM_FLAG = "--align-reads", "--rate-limit-writes"


def forced_warnings(align: str | None, shim: str | None, params: NewtParams | None) -> list[str]:
    """Warnings for the optimizations forced by ``align`` / ``shim`` (the flags' values; ``auto`` is not forced
    and checks its own premise) against ``params`` (``--from-profile``; None: nothing to check against)."""
    out: list[str] = []
    if params is None:
        return out  # no profile: nothing known about the drive to check the premise against
    forced_align = bool(align) and align.strip().lower() != "auto"
    if forced_align and params.penalised_reads is not None and not params.penalised_reads \
            and not params.unaligned_penalty_ns:
        out.append(f"warning: {ALIGN_FLAG} {align} is forced, but profile {params.source} finds no read-size "
                   "penalty (P6 consistent), the premise of alignment: aligned reads will only read more bytes and "
                   "can be slower")
    if shim and shim.strip().lower() != "auto" and params.flush_speed_bps() is None:
        # With no buffer at all the shim sees no flush coming and holds nothing; otherwise (a buffer that never
        # drains while idle, P8 or P10 not probed) it holds by its assumed buffer.
        what = ("the shim holds nothing (no flush can come) and only measures" if params.write_through()
                else "held writes will only wait")
        out.append(f"warning: {SHIM_FLAG} {shim} is forced, but in profile {params.source} "
                   f"{params.why_no_flush_speed()}: {what}")
    return out
