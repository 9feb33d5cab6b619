"""The headless-Chromium harness (tests/browser.py) itself: a clean page passes and is captured at the asked size;
each way a report can break in a browser shows up as a console error. Skipped where no Chromium is installed."""

from __future__ import annotations

import base64
import struct
import time
import zlib
from pathlib import Path

import browser
import pytest

pytestmark = pytest.mark.skipif(browser.find_chromium() is None,
                                reason="no Chromium on PATH (Debian/Ubuntu: apt-get install chromium)")


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A one-colour PNG, made here so the test needs no image library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))  # filter byte 0, then the pixels
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def page(tmp_path: Path, body: str) -> Path:
    html = tmp_path / "report.html"
    html.write_text('<!doctype html><html><head><meta charset="utf-8">'
                    '<meta name="viewport" content="width=device-width, initial-scale=1">'
                    f"<title>harness test</title></head><body>{body}</body></html>")
    return html


@pytest.mark.parametrize(("width", "height", "mobile"), [(1280, 900, False), (390, 844, True)],
                         ids=["desktop", "phone"])
def test_a_clean_page_has_no_errors_and_is_captured_at_the_asked_size(tmp_path, width, height, mobile):
    figure = base64.b64encode(png(40, 30, (200, 40, 40))).decode()
    html = page(tmp_path, "<h1>ftlscope profile</h1>"
                f'<img alt="figure" src="data:image/png;base64,{figure}">'
                # log and warn are not errors: a report may print them without failing
                '<script>console.log("rendered"); console.warn("a warning")</script>')

    result = browser.open_headless(html, tmp_path / "shot" / "first-screen.png", width=width, height=height,
                                   mobile=mobile)

    assert result.console_errors == []
    assert result.requests == []
    assert result.screenshot == tmp_path / "shot" / "first-screen.png"
    assert png_size(result.screenshot) == (width, height)
    assert result.screenshot.stat().st_size > 1000


NOT_A_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n truncated").decode()


@pytest.mark.parametrize(("body", "expected", "requested"), [
    ('<script>console.error("boom")</script>', "boom (file://", None),
    ('<script>console.assert(1 === 2, "sizes differ")</script>', "Assertion failed: sizes differ", None),
    ('<script>throw new Error("kaboom")</script>', "Uncaught Error: kaboom", None),
    ('<script>Promise.reject(new TypeError("no data"))</script>', "Uncaught (in promise) TypeError: no data", None),
    ('<img alt="figure" src="missing.png">', "net::ERR_FILE_NOT_FOUND", "missing.png"),
    ('<img alt="figure" src="https://example.com/x.png">', "net::ERR_NAME_NOT_RESOLVED", "https://example.com/x.png"),
    (f'<img alt="figure" src="data:image/png;base64,{NOT_A_PNG}">', "Image does not decode: data:image/png", None),
], ids=["console.error", "console.assert", "throw", "rejected-promise", "missing-image", "network-image",
        "undecodable-data-uri"])
def test_each_way_a_page_breaks_is_a_console_error(tmp_path, body, expected, requested):
    result = browser.open_headless(page(tmp_path, "<h1>broken</h1>" + body), tmp_path / "shot.png")

    assert len(result.console_errors) == 1, result.console_errors
    assert expected in result.console_errors[0]
    if requested is None:
        assert result.requests == []
    else:
        assert len(result.requests) == 1 and result.requests[0].endswith(requested)
    assert png_size(result.screenshot) == (1280, 900)  # a broken page is still captured


def test_a_page_that_never_finishes_loading_times_out_and_chromium_is_stopped(tmp_path):
    html = page(tmp_path, "<script>while (true) {}</script>")

    started = time.monotonic()
    with pytest.raises(browser.BrowserError, match="timed out"):
        browser.open_headless(html, tmp_path / "shot.png", timeout=2)

    # the time-out, then Chromium quits when asked (the browser process is not the one stuck) or is killed
    assert time.monotonic() - started < 2 + browser.QUIT_GRACE_S
    assert not (tmp_path / "shot.png").exists()


def test_a_missing_file_is_refused_before_starting_chromium(tmp_path):
    with pytest.raises(browser.BrowserError, match="no such file"):
        browser.open_headless(tmp_path / "nowhere.html", tmp_path / "shot.png")
