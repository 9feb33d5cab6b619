"""Fuzzing the device TOML through the Python API: mutations of a preset's full TOML (as ``ftlscope sim show``
prints it) open as a device or fail with a ConfigError of one line, never another exception or a crash.
"""

from __future__ import annotations

import os
import tempfile

from fuzzing import assert_one_line, bounded
from hypothesis import example, given
from hypothesis import strategies as st

from ftlscope.errors import FtlscopeError
from ftlscope.sim import SimDevice, show

BASE = show("consumer-tlc-dram")
LINES = BASE.splitlines()
# Values a person (or a corrupted file) might put anywhere.
VALUES = st.sampled_from([
    '""', '"0B"', '"1PB"', '"-1MiB"', "0", "-1", "1e308", "nan", "inf", "true", "[]", "{}", '"inf"', '"10x"',
    "18446744073709551616", "9223372036854775807", '"1 L 1M"', '"0.5KiB"', '{ L = "0us" }', "0.0", "5.0",
]) | st.integers().map(str) | st.floats(allow_nan=True).map(repr) | st.text(max_size=12).map(repr)


@st.composite
def mutated(draw) -> str:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["value", "drop", "duplicate", "bytes", "swap"]))
        if how == "value" and "=" in lines[i]:
            key = lines[i].split("=", 1)[0]
            lines[i] = f"{key}= {draw(VALUES)}"
        elif how == "drop":
            del lines[i]
        elif how == "duplicate":
            lines.insert(i, lines[i])
        elif how == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            line = lines[i]
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + draw(st.text(max_size=3)) + line[at + draw(st.integers(0, 3)):]
        if not lines:
            break
    return "\n".join(lines) + "\n"


def _open(text: str) -> None:
    fd, path = tempfile.mkstemp(suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        try:
            device = SimDevice.open(path)
        except FtlscopeError as exc:
            assert_one_line(exc)
            return
        assert device.info["size_bytes"] > 0
    finally:
        os.unlink(path)


@bounded(80)
@given(mutated())
@example(BASE.replace('capacity = "256GB"', 'capacity = "0B"'))
@example(BASE.replace("over_provisioning = 0.074", "over_provisioning = 5.0"))
@example(BASE.replace("pages_per_block = 1536", "pages_per_block = 18446744073709551616"))
@example(BASE.replace("channels = 8", "channels = 0"))
@example(BASE.replace("[geometry]", "[geometry]\n[geometry]"))
def test_a_mutated_device_file_opens_or_fails_with_one_line(text):
    _open(text)
