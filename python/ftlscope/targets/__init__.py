"""Where experiments and probes run: one :class:`Target` type with a simulated and a real implementation, so the
session layer (:class:`~ftlscope.experiments.context.Context`) never asks which kind it holds."""

from __future__ import annotations

from .base import Target
from .real import RealTarget
from .simulated import SimulatedTarget

__all__ = ["RealTarget", "SimulatedTarget", "Target", "open_target"]


def open_target(
    target: str | object,
    *,
    writes: bool,
    destructive: str | None = None,
    force: bool = False,
    size: int | None = None,
    engine: str = "auto",
    progress: bool = False,
) -> Target:
    """A simulated target for a :class:`~ftlscope.sim.SimDevice` or a ``sim:...`` name; a real one (file or
    block device, with the write permission checked before anything is touched) for a path."""
    from ..sim import SimDevice

    if isinstance(target, SimDevice) or str(target).startswith("sim:"):
        return SimulatedTarget(target if isinstance(target, SimDevice) else SimDevice.open(str(target)))
    return RealTarget.open(str(target), writes=writes, destructive=destructive, force=force, size=size,
                           engine=engine, progress=progress)
