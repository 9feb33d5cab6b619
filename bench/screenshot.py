#!/usr/bin/env python3
"""Screenshot of a report's first screen, for the README: the report opened in headless Chromium (the harness
of tests/browser.py: no network, a fresh profile), its viewport saved as a PNG of exactly the asked size.

Console errors are printed and make the exit code 1 (the screenshot is still saved), so a broken report is
never pictured unnoticed.

    python bench/screenshot.py REPORT.html OUT.png [--width 1280 --height 900] [--phone] [--timeout 60]

``--phone`` is a 390 x 844 viewport with mobile emulation (the page's ``<meta name="viewport">`` applies).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import browser  # noqa: E402  (lives in tests/, found through the path above)

PHONE = (390, 844)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="the report's HTML file")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1280, help="viewport width in pixels (default 1280)")
    parser.add_argument("--height", type=int, default=900, help="viewport height in pixels (default 900)")
    parser.add_argument("--phone", action="store_true", help="a 390 x 844 phone viewport instead")
    parser.add_argument("--timeout", type=float, default=60, help="seconds before giving up (default 60)")
    args = parser.parse_args(argv)
    if args.width <= 0 or args.height <= 0:
        parser.error("--width and --height must be positive")
    width, height = PHONE if args.phone else (args.width, args.height)

    try:
        result = browser.open_headless(args.report, args.out, width=width, height=height, timeout=args.timeout,
                                       mobile=args.phone)
    except browser.BrowserError as exc:
        print(f"screenshot: {exc}", file=sys.stderr)
        return 2
    for error in result.console_errors:
        print(f"console error: {error}", file=sys.stderr)
    for url in result.requests:
        print(f"not self-contained: the report loads {url}", file=sys.stderr)
    print(f"{result.screenshot} ({width} x {height})")
    return 1 if result.console_errors or result.requests else 0


if __name__ == "__main__":
    sys.exit(main())
