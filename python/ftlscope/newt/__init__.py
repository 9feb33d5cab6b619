"""Newt ("Fantastic SSD Internals and How to Learn and Use Them" §5): optimizations that use what the probes
learned about a drive. :mod:`.params` reads the probed properties they need from a stored profile; :mod:`.shim`
holds the write rate-limiting shim's settings (the shim itself runs in the engine's submission path)."""

from .params import NewtParams

__all__ = ["NewtParams"]
