"""Errors a person can act on.

Every error ftlscope raises on purpose is an :class:`FtlscopeError`. The CLI prints its message as one line
(``ftlscope: <message>``) and exits with :attr:`FtlscopeError.exit_code`; no traceback. Messages say what is
wrong *and* what to change, naming the flag where there is one.
"""

from __future__ import annotations


class FtlscopeError(Exception):
    """Base class: one line for the user, and the process exit code."""

    exit_code = 2

    def __init__(self, message: str):
        # One line even where the message quotes what the user typed: a value can hold a newline or another
        # control character (found by tests/test_fuzz_cli_values.py).
        message = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in message)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(FtlscopeError):
    """A flag, value or path the user gave is wrong (exit 2)."""


class TargetError(FtlscopeError):
    """The target cannot be opened or used as asked (missing, no permission, unsupported)."""


class SafetyError(FtlscopeError):
    """ftlscope refuses to write where it could destroy data the user did not mean to give up."""


class ConfigError(FtlscopeError):
    """A configuration file is broken; the message names the key."""


class RunError(FtlscopeError):
    """A run failed part-way (I/O error, time-out). Results measured so far are kept."""

    exit_code = 1


class NotAvailable(Exception):
    """An operation (power cycle, controller reset, health log) the target cannot do; the text says why. Not an
    FtlscopeError: an experiment catches it, skips the step and records the reason."""
