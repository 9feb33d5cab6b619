#!/usr/bin/env python3
"""The least mean write delay any write shim can reach on the synthetic search trace with 20 MB write bursts
(`bench/newt_gain.py`'s "search + 20 MB bursts / 1 s") on kelpie-n2t-i, without the buffer overflowing (issue 19).

A fluid model of the drive as P10 describes it ("Fantastic SSD Internals and How to Learn and Use Them" §3, and the
simulator's idle drain): the buffer drains `level x idle share / window` (a part of a buffer in proportion, only
while the drive is idle). A clairvoyant shim lets each 128 KiB write in as soon as the buffer, at that rate, has
room for it below `cap x buffer`. Hand-written: a few lines of arithmetic no library does for us.

    python bench/newt_burst_delay_bound.py [--idle-share 0.46]

The idle share 0.46 is the share of the replay's time kelpie-n2t-i had nothing in flight on that trace (measured
from the replay's per-request trace, with or without the shim).
"""

from __future__ import annotations

import argparse

import numpy as np

CHUNK = 128 << 10


def mean_delay(cap: float, idle_share: float, buffer: float = 11.5e6, window_s: float = 0.2, burst: float = 20e6,
               rate: float = 200e6, every_s: float = 1.0, bursts: int = 6, dt: float = 1e-5) -> tuple[float, float]:
    """(mean, max) delay in s over the burst writes after the first (which finds the buffer empty)."""
    arrivals = sorted(k * every_s + i * CHUNK / rate for k in range(bursts) for i in range(int(burst // CHUNK)))
    level, t, nxt, waiting, delays = 0.0, 0.0, 0, [], []
    while t < bursts * every_s:
        level -= level * idle_share * dt / window_s
        while nxt < len(arrivals) and arrivals[nxt] <= t:
            waiting.append(arrivals[nxt])
            nxt += 1
        while waiting and level + CHUNK <= cap * buffer:
            level += CHUNK
            arrived = waiting.pop(0)
            if arrived >= every_s:
                delays.append(t - arrived)
        t += dt
    return float(np.mean(delays)), float(np.max(delays))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle-share", type=float, default=0.46)
    args = parser.parse_args()
    for cap in (0.8, 0.9, 1.0):
        mean, most = mean_delay(cap, args.idle_share)
        print(f"cap {cap:.1f} of the buffer, idle share {args.idle_share:.2f}: mean delay of a burst write "
              f"{mean * 1e3:.1f} ms, max {most * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
