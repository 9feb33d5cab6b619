"""Re-measure the published numbers (:mod:`.published`) on simulated devices, through ftlscope's public API.

One function per kind of measurement, each parameterised by a point's ``params`` and returning every metric
it yields in base units (per second, bytes per second, ns, bytes, percent); one function per kind of shape
check. A :class:`Fidelity` keeps the devices and the measurements, so the points that share a run (the read
IOPS and the read latency of one Report cell) run it once, and the shape checks reuse the points' runs.

Devices: a ``steady`` or ``alignment`` measurement runs on one device per (preset, span), filled sequentially
once and then measured in the order the points are listed (the documents' own order: later runs see the writes
of earlier ones, as on the real drives). A ``steady`` point whose params say ``"device": "own"`` (the "SSD
Performance Report"'s cells, :func:`.published.report_params`, and the PM981's QD sweep) runs instead on a
device of its own in one stated state: fresh, its span written once sequentially, then idle for :data:`SETTLE`
(the fill's buffer flushed, its idle garbage collection and SLC folding done); a Report cell read after smaller
random writes (``params["prior"]``, :func:`.published.report_prior_writes`) has its span rewritten by them first,
before it idles. Each such point then measures the
same drive whatever ran before it: on one shared device the 32 and 128 KiB mixes, which come after the random
writes, moved by up to 50 % with the measuring order and the device's noise seed, and the PM981's sweep read the
offsets in the order its 4 KiB mixes had written them. ``cliff`` and the random-fill shape check start from a
fresh device each; ``random_fill`` from a smaller copy of the preset, written whole sequentially
(:func:`random_fill`).
"""

from __future__ import annotations

import math
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w

import ftlscope
from ftlscope.analysis import changepoint
from ftlscope.metrics import WINDOW_INDEX
from ftlscope.sim import SimDevice
from ftlscope.units import parse_duration_ns, parse_size

from .published import OWN, UNITS, Point, Shape, report_params

OPS = ("read", "write")
PERCENTILES = ("p50", "p90", "p95", "p99", "p99.9")
# A level shift counts as the write cliff when throughput falls by at least this much (as over_time's default).
CLIFF_MIN_DROP = 0.3
# Throughput within this share of the peak counts as saturated (the Profiling study's QD 32 is at 90.0 %).
SATURATED = 0.9
# A read rate within this share of the sequentially filled drive's counts as "unaffected" by a random fill.
UNAFFECTED = 0.1
# How long a point's own device idles after its fill, before the point is measured: far longer than any preset's
# idle flush window and idle-GC delay (the NAND consumer presets' 500 ms), and long enough for the HMB preset's
# idle folding (200 MB/s) to move a 1 GiB fill out of its SLC cache: the data at rest, as on a partition written
# well before it is measured.
SETTLE = "10s"


@dataclass(frozen=True)
class Settings:
    """How long each measurement runs (device time). ``quick`` trades precision for wall time."""

    runtime: str = "2s"
    warmup: str = "500ms"
    # The random fill runs on a copy of the preset this many times smaller (:func:`scaled_config`). The NV2's
    # fill: 891 KB/s on a 1/8 copy (its own 1536-page blocks; 15 min of wall time), 913 at 1/32, 953 at 1/64
    # (40 s), 1126 at 1/256: smaller blocks let greedy GC find emptier victims, so the default reads ~7 % fast.
    fill_scale: int = 64
    window: str = "500ms"

    @classmethod
    def quick(cls) -> Settings:
        return cls(runtime="400ms", warmup="100ms", fill_scale=256)


@dataclass(frozen=True)
class ShapeResult:
    passed: bool
    measured: str


def _key(preset: str, kind: str, params: dict[str, Any]) -> tuple:
    return (preset, kind, tuple(sorted(params.items())))


class Fidelity:
    """Measures points and checks shapes on the presets; ``settings`` sets the run lengths."""

    def __init__(self, settings: Settings | None = None, *, device_opener: Callable[[str], SimDevice] | None = None):
        self.settings = settings or Settings()
        self._open = device_opener or SimDevice.open
        self._filled: dict[tuple[str, int], SimDevice] = {}
        self._cache: dict[tuple, dict[str, float]] = {}

    # ---- devices ----

    def fresh(self, preset: str) -> SimDevice:
        """A new device, as it leaves the factory (nothing written)."""
        return self._open(preset)

    def filled(self, preset: str, span: int) -> SimDevice:
        """The preset's shared device with its first ``span`` bytes written sequentially."""
        key = (preset, span)
        if key not in self._filled:
            device = self._open(preset)
            fill(device, span, pattern="sequential")
            self._filled[key] = device
        return self._filled[key]

    def own(self, preset: str, span: int, prior: str | None = None) -> SimDevice:
        """A device of its own for one point: fresh, its first ``span`` bytes written sequentially (and then,
        with ``prior``, rewritten in random writes of that size, every block once), then idle for
        :data:`SETTLE`."""
        device = self._open(preset)
        fill(device, span, pattern="sequential")
        if prior is not None:
            fill(device, span, pattern="permutation", bs=prior)
        device.idle(SETTLE)
        return device

    def run(self, device: SimDevice, **flags: Any) -> ftlscope.RunResult:
        # Nothing here reads the health samples: one at the start and end of a run is enough.
        return ftlscope.run(device, ftlscope.from_flags(**flags), window=self.settings.window,
                            health_interval="1000s")

    # ---- measuring ----

    def metrics(self, preset: str, kind: str, params: dict[str, Any]) -> dict[str, float]:
        """Every metric of one measurement, in base units (memoised)."""
        key = _key(preset, kind, params)
        if key not in self._cache:
            self._cache[key] = KINDS[kind](self, preset, params)
        return self._cache[key]

    def measure(self, point: Point) -> float:
        """The point's number as the preset gives it, in the point's unit (NaN when the run shows none, e.g. no
        write cliff)."""
        value = self.metrics(point.preset, point.kind, point.params).get(point.metric, math.nan)
        return value / UNITS[point.unit]

    def check(self, shape: Shape) -> ShapeResult:
        return SHAPES[shape.kind](self, shape)


def seeded_opener(files: dict[str, str], seed: int | None, scratch: Path) -> Callable[[str], SimDevice]:
    """Opens a preset, or the device file ``files`` gives for it; with ``seed``, a copy of its configuration
    (written under ``scratch``) whose ``device.seed`` is ``seed``: the same drive with other ``[noise]`` draws,
    to see how much a point moves with the draw alone. Without ``seed`` the device is opened as it is."""
    def open_device(preset: str) -> SimDevice:
        spec = files.get(preset, preset)
        if seed is None:
            return SimDevice.open(spec)
        cfg = tomllib.loads(SimDevice.open(spec).config_toml)
        cfg["device"]["seed"] = seed
        path = scratch / f"{Path(preset).stem}-seed-{seed}.toml"
        path.write_text(tomli_w.dumps(cfg))
        return SimDevice.open(str(path))
    return open_device


def error_pct(published: float, simulated: float) -> float:
    """Signed relative error in percent (NaN when nothing was measured)."""
    return (simulated - published) / published * 100.0


def fill(device: SimDevice, span: int, *, pattern: str, bs: str = "4k") -> None:
    """Write the first ``span`` bytes once: ``sequential`` (1 MiB requests) or ``permutation`` (every ``bs``
    block once in a random order, as fio's random map writes a span), as the documents' drives were prepared."""
    bs, qd = ("1m", 8) if pattern == "sequential" else (bs, 32)
    ftlscope.run(device, ftlscope.from_flags(rw="write", bs=bs, qd=qd, pattern=pattern, size=str(span),
                                             total_bytes=str(span)), health_interval="1000s")


def _op_metrics(result: ftlscope.RunResult) -> dict[str, float]:
    out: dict[str, float] = {}
    iops = bw = weighted = 0.0
    for op in OPS:
        s = result.summary.get(op)
        if not s or not s["ops"]:
            continue
        lat = s["lat_ns"]
        out.update({f"{op}.iops": s["iops"], f"{op}.bw": s["bw_bytes"], f"{op}.lat_mean": lat["mean"]})
        out.update({f"{op}.{p}": lat[p] for p in PERCENTILES})
        iops += s["iops"]
        bw += s["bw_bytes"]
        weighted += s["iops"] * lat["mean"]
    if iops:
        out.update({"all.iops": iops, "all.bw": bw, "all.lat_mean": weighted / iops})
    return out


def _flags(params: dict[str, Any]) -> dict[str, Any]:
    # A Report cell whose fio held fewer requests in flight than its nominal depth runs at the depth it held.
    flags = {"rw": params["rw"], "bs": params["bs"], "qd": params.get("in_flight", params["qd"]),
             "size": params["span"]}
    if "rwmixread" in params:
        flags["rwmixread"] = params["rwmixread"]
    return flags


def steady(fid: Fidelity, preset: str, params: dict[str, Any]) -> dict[str, float]:
    """A workload (``rw``, ``bs``, ``qd``, ``rwmixread``) over the preset's filled ``span``, after a warm-up: on
    the preset's shared filled device, or with ``"device": "own"`` on a device of its own (:meth:`Fidelity.own`)."""
    span = parse_size(params["span"])
    device = fid.own(preset, span, params.get("prior")) if params.get("device") == OWN else fid.filled(preset, span)
    result = fid.run(device, **_flags(params), runtime=fid.settings.runtime, warmup=fid.settings.warmup)
    return _op_metrics(result)


def alignment(fid: Fidelity, preset: str, params: dict[str, Any]) -> dict[str, float]:
    """Sequential reads of ``bs`` at ``qd``, aligned and shifted by ``offset`` bytes: ``read.iops_drop`` (%)."""
    device = fid.filled(preset, parse_size(params["span"]))
    flags = {"rw": "read", "bs": params["bs"], "qd": params["qd"], "size": params["span"],
             "runtime": fid.settings.runtime, "warmup": fid.settings.warmup}
    aligned = fid.run(device, **flags).summary["read"]["iops"]
    shifted = fid.run(device, **flags, align_offset=params["offset"]).summary["read"]["iops"]
    return {"read.iops_drop": (1.0 - shifted / aligned) * 100.0, "read.iops": aligned}


def cliff(fid: Fidelity, preset: str, params: dict[str, Any]) -> dict[str, float]:
    """Sequential writes of ``bs`` at ``qd`` onto a fresh device until ``total`` bytes: where the per-window
    throughput falls for good (change-point detection, as ``seq-write-over-time``), ``cliff_bytes`` and
    ``cliff_time`` (NaN without a cliff), and ``write.p95_peak``, the highest window 95th percentile."""
    device = fid.fresh(preset)
    result = fid.run(device, rw="write", bs=params["bs"], qd=params["qd"], total_bytes=params["total"])
    w = result.windows
    w = w[w["op"] == "write"].sort_values(WINDOW_INDEX).reset_index(drop=True)
    window_ns = parse_duration_ns(fid.settings.window)
    full = w[w["duration_ns"] >= window_ns // 2].reset_index(drop=True)
    out = {"cliff_bytes": math.nan, "cliff_time": math.nan, "write.bw": result.summary["write"]["bw_bytes"],
           "write.p95_peak": float(w["lat_p95_ns"].max()) if len(w) else math.nan}
    if len(full) >= 4:
        x = full["bw_bytes"].to_numpy(dtype=float)
        drop = final_drop(x)
        if drop is not None:
            out["cliff_bytes"] = float(full["bytes"].iloc[:drop.index].sum())
            out["cliff_time"] = float(full["start_ns"].iloc[drop.index] - full["start_ns"].iloc[0])
            out["before.bw"], out["after.bw"] = drop.before, drop.after
    return out


def final_drop(x: np.ndarray) -> changepoint.Drop | None:
    """Where the throughput falls for good, as the thesis dates its write cliff ("started out writing quickly
    ... and deteriorated after some time"): the last fall of at least :data:`CLIFF_MIN_DROP` between adjacent
    segments after which no later segment climbs back to within that share of the level before it. The
    largest fall would take a drive that slows down gradually while its cache fills (folding harder as it
    fills) for one with a cliff at the start; on a drive whose only fall is the cliff both are that fall."""
    segs = changepoint.segments(x, changepoint.change_points(x))
    found = None
    for i, (left, right) in enumerate(zip(segs[:-1], segs[1:], strict=True)):
        ceiling = (1 - CLIFF_MIN_DROP) * left.mean
        if right.mean < ceiling and all(s.mean < ceiling for s in segs[i + 2:]):
            found = changepoint.Drop(right.start, left.mean, right.mean)
    return found


# A scaled copy keeps at least this many blocks on each die (blocks made smaller, their erase shorter alike):
# greedy GC's write amplification depends on the spare share and, with few blocks, on how many there are.
MIN_SCALED_BLOCKS = 256


def scaled_config(config_toml: str, scale: int) -> str:
    """A device ``scale`` times smaller than ``config_toml``'s with the same shares: capacity, SLC cache and
    mapping cache divided by ``scale`` (the same spare share, the same share of the drive in SLC mode and in the
    mapping cache). With few blocks left on a die, blocks are made smaller by the least power of two (at most
    ``scale``) that keeps :data:`MIN_SCALED_BLOCKS` on each (whole physical pages and page-type cycles in a
    block), and their erase as much shorter, so an erase costs each page written the same die time. Dies, page
    timings, buffers and the controller stay as they are."""
    cfg = tomllib.loads(config_toml)
    page = parse_size(cfg["geometry"]["page_size"])
    cfg["device"]["capacity"] = parse_size(cfg["device"]["capacity"]) // scale // page * page
    if "slc_cache" in cfg:
        cfg["slc_cache"]["capacity"] = parse_size(cfg["slc_cache"]["capacity"]) // scale
    cache = cfg.get("ftl", {}).get("mapping_cache")
    if cache not in (None, "full"):
        cfg["ftl"]["mapping_cache"] = max(parse_size(cache) // scale, 4096)
    geometry, nand = cfg["geometry"], cfg.get("nand", {})
    ppb = geometry["pages_per_block"]
    dies = geometry["channels"] * geometry["chips_per_channel"]
    physical = parse_size(nand.get("physical_page", page))
    whole = 12 * max(1, physical // page)  # whole NAND pages of any cell's page-type cycle (1, 2, 3 or 4 types)
    spare = 1 + cfg["device"].get("over_provisioning", 0.0)
    shrink = 1
    while (cfg["device"]["capacity"] * spare / (dies * page * ppb // shrink) < MIN_SCALED_BLOCKS
           and shrink * 2 <= scale and ppb % (shrink * 2 * whole) == 0):
        shrink *= 2
    geometry["pages_per_block"] = ppb // shrink
    if shrink > 1 and "erase_latency" in nand:
        nand["erase_latency"] = f"{parse_duration_ns(nand['erase_latency']) // shrink}ns"
    cfg["device"]["name"] = f"{cfg['device']['name']}-scaled-{scale}"
    return tomli_w.dumps(cfg)


def random_fill(fid: Fidelity, preset: str, params: dict[str, Any]) -> dict[str, float]:
    """A whole-drive random fill as "What does the Flash Translation Layer do?" §5.9 ran it: every ``bs`` block
    written once, in a random order, at ``qd``, the rate over the whole fill; on a drive as the thesis's earlier
    experiments left it, written whole sequentially (§3.3.1-3.3.4 ran on sequentially filled drives, and the
    thesis does not say it trimmed them before the fill), then idle for :data:`SETTLE`. The thesis's 250 GB at
    512 B is 490 M writes (about half an hour of simulation); the bench fills a copy of the preset
    :attr:`Settings.fill_scale` times smaller with the same shares (:func:`scaled_config`), whose fill goes
    through the same states in as many times fewer writes."""
    base = fid.fresh(preset)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scaled.toml"
        path.write_text(scaled_config(base.config_toml, fid.settings.fill_scale))
        device = SimDevice.open(str(path))
    span = device.info["size_bytes"]
    fill(device, span, pattern="sequential")
    device.idle(SETTLE)
    result = fid.run(device, rw="write", bs=params["bs"], qd=params["qd"], pattern="permutation", size=str(span),
                     total_bytes=str(span))
    return _op_metrics(result)


KINDS: dict[str, Callable[[Fidelity, str, dict[str, Any]], dict[str, float]]] = {
    "steady": steady,
    "alignment": alignment,
    "cliff": cliff,
    "random_fill": random_fill,
}


# ---- shapes ---------------------------------------------------------------------------------------------------


def _mb(bw: float) -> str:
    return f"{bw / 1e6:.0f}"


def saturation(fid: Fidelity, shape: Shape) -> ShapeResult:
    """The first queue depth whose read throughput is within :data:`SATURATED` of the sweep's peak."""
    p = shape.params
    run = {k: v for k, v in p.items() if k != "qds"}
    bws = [fid.metrics(shape.preset, "steady", {**run, "qd": qd})["read.bw"] for qd in p["qds"]]
    peak = max(bws)
    first = next(qd for qd, bw in zip(p["qds"], bws, strict=True) if bw >= SATURATED * peak)
    curve = ", ".join(f"QD {qd} {_mb(bw)}" for qd, bw in zip(p["qds"], bws, strict=True))
    return ShapeResult(shape.expect["qd_min"] <= first <= shape.expect["qd_max"],
                       f"{SATURATED:.0%} of peak first at QD {first} (MB/s: {curve})")


def u_shape(fid: Fidelity, shape: Shape) -> ShapeResult:
    """Throughput at both ends of the read-share sweep above every mixed point."""
    p = shape.params
    bws = {share: fid.metrics(shape.preset, "steady", {"rw": "randrw", "rwmixread": share, "bs": p["bs"],
                                                      "qd": p["qd"], "span": p["span"]})["all.bw"]
           for share in p["shares"]}
    ends = [bws[s] for s in p["shares"] if s in (0, 100)]
    middle = [bws[s] for s in p["shares"] if s not in (0, 100)]
    curve = " → ".join(f"{bws[s] / 2**20:.0f}" for s in p["shares"])  # MiB/s, the study's unit
    return ShapeResult(max(middle) < min(ends), f"{curve} MiB/s across read shares {'/'.join(map(str, p['shares']))} %")


def mix_order(fid: Fidelity, shape: Shape) -> ShapeResult:
    """In every mixed point, the direction ``expect["faster"]`` has the lower mean latency."""
    p = shape.params
    right, cells = 0, []
    for bs in p["bs"]:
        for mix in p["mixes"]:
            for qd in p["qds"]:
                m = fid.metrics(shape.preset, "steady", report_params(bs, mix, qd))
                read, write = m.get("read.lat_mean", math.nan), m.get("write.lat_mean", math.nan)
                faster = "read" if read < write else "write"
                right += faster == shape.expect["faster"]
                cells.append(f"{bs} {mix} QD{qd} {read / 1e3:.0f}/{write / 1e3:.0f}")
    total = len(cells)
    return ShapeResult(right == total, f"{shape.expect['faster']}s faster at {right}/{total} points (read/write us: "
                                       f"{'; '.join(cells)})")


def fill_order(fid: Fidelity, shape: Shape) -> ShapeResult:
    """Sequential read throughput over ``span`` after a random fill against after a sequential fill."""
    p = shape.params
    span = parse_size(p["span"])
    rates = {}
    for pattern in ("sequential", "permutation"):
        device = fid.fresh(shape.preset)
        fill(device, span, pattern=pattern)
        result = fid.run(device, rw="read", bs=p["bs"], qd=p["qd"], size=p["span"], runtime=fid.settings.runtime,
                         warmup=fid.settings.warmup)
        rates[pattern] = result.summary["read"]["bw_bytes"]
    ratio = rates["permutation"] / rates["sequential"]
    passed = ratio < 1 - UNAFFECTED if shape.expect["slower"] else abs(ratio - 1) <= UNAFFECTED
    return ShapeResult(passed, f"{_mb(rates['sequential'])} MB/s after a sequential fill, {_mb(rates['permutation'])} "
                               f"after a random fill ({ratio:.2f}x)")


def cliff_position(fid: Fidelity, shape: Shape) -> ShapeResult:
    """The write cliff within ``tolerance`` of the published position, or none where none was seen."""
    m = fid.metrics(shape.preset, "cliff", shape.params)
    gib = m["cliff_bytes"] / 2**30
    rates = f"{_mb(m.get('before.bw', m['write.bw']))} → {_mb(m.get('after.bw', m['write.bw']))} MB/s"
    if shape.expect["gib"] is None:
        return ShapeResult(math.isnan(gib), "no cliff" if math.isnan(gib) else f"cliff after {gib:.1f} GiB ({rates})")
    if math.isnan(gib):
        return ShapeResult(False, f"no cliff in {shape.params['total']} (mean {_mb(m['write.bw'])} MB/s)")
    off = gib / shape.expect["gib"] - 1
    return ShapeResult(abs(off) <= shape.expect["tolerance"], f"cliff after {gib:.1f} GiB ({off:+.0%}; {rates})")


SHAPES: dict[str, Callable[[Fidelity, Shape], ShapeResult]] = {
    "saturation": saturation,
    "u_shape": u_shape,
    "mix_order": mix_order,
    "fill_order": fill_order,
    "cliff_position": cliff_position,
}


def summarise(errors: list[float]) -> tuple[float, float]:
    """(median, worst) of the absolute errors; a NaN (nothing measured) counts as the worst."""
    a = np.abs(np.asarray(errors, dtype=float))
    a = np.where(np.isnan(a), np.inf, a)
    return float(np.median(a)), float(a.max())
