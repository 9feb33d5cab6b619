"""Shared settings for the property-based (fuzzing) tests: bounded and deterministic, so CI sees the same
examples every time (derandomized, no example database), and no per-example deadline (the machine is shared).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from ftlscope.errors import FtlscopeError


def bounded(max_examples: int):
    return settings(
        max_examples=max_examples, deadline=None, derandomize=True, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


def assert_one_line(exc: FtlscopeError) -> None:
    message = exc.message
    assert message and "\n" not in message and "Traceback" not in message, repr(message)
