"""Finding the pieces of a plug-in package (experiments, probes): every module of the package that is not a
framework module or private defines a list under one name; adding a piece is adding a module."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from typing import Any


def collect(package: str, path: Iterable[str], attribute: str, key: Callable[[Any], str],
            framework: set[str]) -> dict[str, Any]:
    """``{key(item): item}`` for every item in the ``attribute`` lists of ``package``'s modules (modules in
    ``framework`` or starting with ``_`` are skipped). A key defined twice is a programming error."""
    found: dict[str, Any] = {}
    for module_info in pkgutil.iter_modules(path):
        if module_info.name in framework or module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{module_info.name}")
        for item in getattr(module, attribute, ()):
            name = key(item)
            if name in found:
                raise RuntimeError(f"{package}: {name} is defined twice")
            found[name] = item
    return found
