"""Every number the source documents publish for the drives ftlscope's presets are shaped after, and the
qualitative shapes they describe, as data: one :class:`Point` per published number, one :class:`Shape` per
described behaviour. Each carries its document, the table or section, and the document's own words or table
cell (``quote``), so a row can be checked against the source by reading it.

The documents (short forms used in ``source``):

- ``FTL thesis``: "What does the Flash Translation Layer do? Exploring Modern NVMe SSD Performance
  Characteristics" (bachelor's thesis, KIT, 2025): Samsung 970 EVO Plus 250GB, Kingston NV2 250GB, Gigabyte NVMe
  SSD 256GB, Intel Optane Memory M10 16GB. Its figures are lost in the text extraction; only numbers written in
  the text and Table 4.2 survive.
- ``Profiling``: "SSD Performance Profiling" (fio study of a Samsung MZVLB256HBHQ, PM981 256GB): QD 1 table,
  block-size, mix and queue-depth sweeps, tail percentiles.
- ``Report``: "SSD Performance Report" (2024, fio on a 1GB partition of a Kingston NV2): Tables 1-12.

Reading the documents:

- The Report's latency tables are labelled "ms" but hold microseconds: by Little's law IOPS x latency (summed
  over the directions) is the number of requests in flight, at most the queue depth. Read as microseconds,
  every point holds 0.5-1.0 x its queue depth (read only at 32 and 128 KiB 0.94-0.99 x: Tables 5 and 6 at QD
  64, 33.3 KIOPS x 1911.70 us = 63.7); read as milliseconds, 1000x. The 4 KiB points hold only 0.5-0.8 x:
  fio's one thread could not keep the queue full with the smallest requests (the rows keep the nominal depth;
  such a cell is measured with the requests in flight its numbers hold, ``params["in_flight"]``).
  One cell does not add up: write only at 128 KiB and QD 1024 (Tables 11, 12), 3345 MB/s x 50320.52 us = 1284
  in flight, more than 1024. ``tests/test_fidelity_data.py`` checks the reading.
- The Report's 128 KiB throughput is decimal MB/s: read only at QD 512, 3085 MB/s / 128 KiB x 20899.89 us = 492
  in flight; as MiB/s it would be 516, more than the queue holds.
- The Profiling study's "MB/s" is MiB/s (fio's unit): its QD table converts "BW x 1024 / 4" to IOPS, and
  145,508.7 IOPS x 4 KiB = 568.4 MiB/s in the block-size table.
- Where a table gives both throughput and mean latency at a fixed queue depth, the two are one measurement by
  Little's law; only the throughput is a row (the Profiling study's QD 1 table keeps the mean latency instead,
  with its percentiles). All 108 of the Report's non-zero cells are kept: its 4 KiB runs did not
  keep the queue full, and each direction of a mix has its own latency.
- The Report's "only write" rows of its read tables (and the reverse) are zeros, not measurements: left out.

Conditions the documents leave open, and the choice made (``params`` holds it, ``note`` says so):

- Span: the Report used a 1GB partition (read as 1 GiB); the Profiling study does not say how large its file or
  partition region was (assumed 8 GiB); the thesis read "the entire SSD" (8 GiB here, over the 4 GiB that the
  HMB preset's mapping cache covers). Reads always go to data written first (sequentially), as on the
  documents' filled drives. Each Report cell runs on a device of its own, its span written sequentially and
  left idle 10 s before the cell (the Report ran each cell as its own fio job and does not say in what
  order or on what state; one stated state per cell keeps a cell from depending on the ones before it).
  One thing the cells before it do change is where a read's data lies: a cell that reads requests larger than
  the random writes that last rewrote the partition before it, in the order of the Report's tables (request
  sizes in turn, each size's queue depths left to right, each depth's rows top to bottom), reads data scattered
  over as many NAND pages as those writes were small. Its device has its span rewritten by such writes, every
  block once in a random order, before it idles (``params["prior"]``, :func:`report_prior_writes`). In that
  order this is the first 32 KiB cell, read only at QD 64, after nine 4 KiB cells that wrote ~700K
  requests per second of their runs over the 262,144 4 KiB blocks: the one pure-read cell that moved less
  than half of what the mixes at its size and depth moved (1091 MB/s against 2041 and 2287; 0.91-1.45 x at
  every other size and depth) and fewer reads (33.3K/s) than the 7:3 mix beside it (48.9K/s, while it also
  wrote 20.9K/s). The 128 KiB read at QD 64 comes after 32 KiB writes, whose pieces a 128 KiB read senses
  as it senses sequential data (measured: 2787 against 2792 MB/s); every other cell comes after writes of
  its own size.
- Request size and depth of the thesis's "maximum" runs: 2028 blocks (~1 MiB, §3.2.1) for the Samsung; 64 x 512
  B = 32 KiB for the Kingston (§5.4); not given for the Gigabyte and the Optane (128 KiB assumed). The maximum
  queue depth is not given: 64, the deepest of §3.3.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FTL_THESIS = "FTL thesis"
PROFILING = "Profiling"
REPORT = "Report"

SOURCES = {
    FTL_THESIS: '"What does the Flash Translation Layer do? Exploring Modern NVMe SSD Performance '
                'Characteristics" (KIT, 2025)',
    PROFILING: '"SSD Performance Profiling" (fio study of a Samsung MZVLB256HBHQ)',
    REPORT: '"SSD Performance Report" (2024, fio on a Kingston NV2)',
}

# Units a Point may use: what ftlscope measures (ns, B/s, IOPS, bytes) divided by the factor gives the unit.
UNITS = {
    "IOPS": 1.0, "KIOPS": 1e3,
    "MB/s": 1e6, "MiB/s": 2**20, "KB/s": 1e3,
    "us": 1e3, "ms": 1e6, "s": 1e9,
    "GiB": 2**30,
    "%": 1.0,
}


# ``params["device"]`` of a point measured on a device of its own (:meth:`.measure.Fidelity.own`).
OWN = "own"

@dataclass(frozen=True)
class Drive:
    name: str
    preset: str
    sources: tuple[str, ...]


DRIVES = {
    "970 EVO Plus": Drive("Samsung 970 EVO Plus 250GB", "consumer-tlc-dram", (FTL_THESIS,)),
    "NV2": Drive("Kingston NV2 250GB", "consumer-tlc-hmb", (FTL_THESIS, REPORT)),
    "Gigabyte": Drive("Gigabyte NVMe SSD 256GB (GP-GSM2NE3256GNTD)", "gigabyte-nvme-256g", (FTL_THESIS,)),
    "PM981": Drive("Samsung PM981 256GB (MZVLB256HBHQ)", "pm981-256g", (PROFILING,)),
    "Optane M10": Drive("Intel Optane Memory M10 16GB", "optane-like", (FTL_THESIS,)),
}


@dataclass(frozen=True)
class Point:
    """One published number. ``kind`` names the measurement (:data:`ftlscope.fidelity.measure.KINDS`),
    ``params`` its conditions, ``metric`` which of its outputs the number is (``read.iops``, ``all.bw``,
    ``write.p99``, ``cliff_bytes``, ...), ``value`` in ``unit``; ``quote`` the document's words or cell."""

    drive: str
    source: str
    where: str
    kind: str
    params: dict[str, Any]
    metric: str
    value: float
    unit: str
    quote: str
    note: str = ""
    # The document's own numbers for this cell hold fewer requests in flight than its queue depth (the note
    # says how many; the cell is measured at that depth, ``params["in_flight"]``): the bench also summarises
    # without such points.
    queue_not_full: bool = False

    @property
    def preset(self) -> str:
        return DRIVES[self.drive].preset

    @property
    def id(self) -> str:
        conditions = " ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.drive} | {self.where} | {conditions} | {self.metric}"


@dataclass(frozen=True)
class Shape:
    """A behaviour a document describes (or its numbers show) that a preset must reproduce: ``kind`` names
    the check (:data:`ftlscope.fidelity.measure.SHAPES`), ``expect`` what passes, ``published`` the numbers
    or words behind it."""

    name: str
    drive: str
    source: str
    where: str
    kind: str
    params: dict[str, Any]
    expect: dict[str, Any]
    published: str
    quote: str

    @property
    def preset(self) -> str:
        return DRIVES[self.drive].preset


def _cell(text: str) -> float:
    """A table cell's number: "2,212.6 \\pm 0.18" -> 2212.6 (the mean; the +- is the spread of 3 runs)."""
    return float(text.replace("\\pm", "±").split("±")[0].replace(",", "").strip())


POINTS: list[Point] = []


def _add(drive: str, source: str, where: str, kind: str, params: dict[str, Any], metric: str, cell: str,
         unit: str, quote: str, note: str = "", *, queue_not_full: bool = False) -> None:
    POINTS.append(Point(drive, source, where, kind, dict(params), metric, _cell(cell), unit, quote, note,
                        queue_not_full))


# ---- FTL thesis: 970 EVO Plus, NV2, Gigabyte, Optane M10 ------------------------------------------------------

_SEQ_READ_TABLE_4_2 = (
    # drive, the table's row label, request, cell "ours [MB/s]", fio io_uring, specification
    ("970 EVO Plus", "Samsung", "1m", "3560", "3594", "3500"),
    ("NV2", "Kingston", "32k", "2304", "2281", "3000"),
    ("Gigabyte", "Gigabyte", "128k", "1701", "1508", "1700"),
    ("Optane M10", "Intel", "128k", "926", "929", "900"),
)
for _drive, _row, _bs, _ours, _fio, _spec in _SEQ_READ_TABLE_4_2:
    _add(_drive, FTL_THESIS, "§4.4.3 Table 4.2", "steady",
         {"rw": "read", "bs": _bs, "qd": 64, "span": "8GiB"}, "read.bw", _ours, "MB/s",
         f'Table 4.2, row "{_row}", column "ours [MB/s]": "{_ours}" (fio io_uring {_fio}, specification {_spec}); '
         '"using the maximum read size, maximum queue depth supported by each device, and with a sequentially '
         'written drive"',
         "request size and queue depth assumed (the thesis says 'maximum')"
         + ("; the Gigabyte's run was cut to ~10 s because it slows down after ~15 s" if _drive == "Gigabyte"
            else ""))

_CLIFFS = (
    # drive, request, GiB, seconds, how much to write
    ("970 EVO Plus", "1m", "14.7", "10", "30GiB", "10s, 14.7GiB written for Samsung"),
    ("NV2", "32k", "42.5", "56", "64GiB", "after 56s and 42.5GiB written for Kingston"),
    ("Gigabyte", "128k", "14.5", "20", "30GiB", "after 20s and 14.5GiB written for Gigabyte"),
)
for _drive, _bs, _gib, _sec, _total, _words in _CLIFFS:
    _params = {"bs": _bs, "qd": 64, "total": _total}
    _quote = f'"This falloff in performance occurred at {_words}" (sequential write, maximum queue depth and ' \
             'request size, fresh drive)'
    _add(_drive, FTL_THESIS, "§5.4", "cliff", _params, "cliff_bytes", _gib, "GiB", _quote)
    _add(_drive, FTL_THESIS, "§5.4", "cliff", _params, "cliff_time", _sec, "s", _quote,
         "the time to the cliff measures the write rate before it")

_add("970 EVO Plus", FTL_THESIS, "§5.5", "alignment",
     {"bs": "1m", "qd": 64, "offset": "512", "span": "8GiB"}, "read.iops_drop", "15", "%",
     '"in the case of the Samsung SSD offsets not a multiple of 8 lead to a significant (≈15%) performance drop" '
     "(sequential reads at the maximum read size, offset by powers of two)",
     "the drop at a 512 B offset against aligned reads")

_add("NV2", FTL_THESIS, "§5.9", "random_fill", {"bs": "512", "qd": 1}, "write.bw", "876", "KB/s",
     '"The Kingston drive took 79.2 hours to complete this test, averaging 876KB/s." (filled "one block at a '
     'time in a random order")',
     "the whole fill, every 512 B block once in a random order at queue depth 1 (read from §5.9: 'it would have "
     "performed much better with a queue depth of 4'), on a drive written whole sequentially (the earlier "
     "experiments' state, §3.3.1-3.3.4; the Kingston 'performed badly from the start'), on a 1/64 copy of the "
     "preset (measure.scaled_config)")

_add("NV2", FTL_THESIS, "§5.4", "cliff", {"bs": "32k", "qd": 64, "total": "64GiB"}, "write.p95_peak", "2", "s",
     '"The Kingston drive has the least predictable latency, with especially the 95th percentile varying by '
     'over four times, peaking at almost two seconds." (read as 2 s)',
     "the highest 95th percentile of any 500 ms window of the sequential write")

_add("Optane M10", FTL_THESIS, "§4.3", "steady", {"rw": "randread", "bs": "512", "qd": 1, "span": "8GiB"},
     "read.lat_mean", "14", "us",
     '"A single 512B read has an average latency of about 14 us on the Intel Optane SSD"',
     "random reads assumed (the thesis does not say where the reads went)")


# ---- Report: Kingston NV2, Tables 1-12 ----------------------------------------------------------------------

_REPORT_QDS = (64, 512, 1024)
_REPORT_MIXES = {"only read": ("randread", None), "only write": ("randwrite", None),
                 "5:5": ("randrw", 50), "7:3": ("randrw", 70)}
# table number, request size, direction, statistic, unit, then each row's three cells (QD 64, 512, 1024).
_REPORT_TABLES = (
    (1, "4k", "read", "iops", "KIOPS", {"only read": ("161", "168", "175"), "5:5": ("72.4", "71.3", "71.1"),
                                        "7:3": ("108", "105", "109")}),
    (2, "4k", "read", "lat_mean", "us", {"only read": ("327.96", "1831.15", "3173.94"),
                                         "5:5": ("301.19", "1930.31", "3801.79"),
                                         "7:3": ("302.62", "1857.84", "3390.31")}),
    (3, "4k", "write", "iops", "KIOPS", {"only write": ("112", "114", "114"), "5:5": ("72.5", "71.3", "71.1"),
                                         "7:3": ("46.2", "45.1", "46.9")}),
    (4, "4k", "write", "lat_mean", "us", {"only write": ("289.42", "2268.58", "4519.26"),
                                          "5:5": ("207.51", "1831.60", "3698.13"),
                                          "7:3": ("172.84", "1699.98", "3255.19")}),
    (5, "32k", "read", "iops", "KIOPS", {"only read": ("33.3", "87.4", "78.2"), "5:5": ("31.2", "29.1", "27.2"),
                                         "7:3": ("48.9", "42.4", "41.3")}),
    (6, "32k", "read", "lat_mean", "us", {"only read": ("1911.70", "5628.61", "12838.15"),
                                          "5:5": ("645.96", "1808.06", "11465.11"),
                                          "7:3": ("762.87", "2293.80", "10874.12")}),
    (7, "32k", "write", "iops", "KIOPS", {"only write": ("83", "84.9", "86.2"), "5:5": ("31.1", "29", "27.2"),
                                          "7:3": ("20.9", "18", "17.6")}),
    (8, "32k", "write", "lat_mean", "us", {"only write": ("536.63", "5521.99", "11068.75"),
                                           "5:5": ("1383.56", "14073.43", "25894.34"),
                                           "7:3": ("1247.93", "22822.04", "32067.89")}),
    (9, "128k", "read", "bw", "MB/s", {"only read": ("2350", "3085", "2811"), "5:5": ("1011", "1129", "1132"),
                                       "7:3": ("1788", "1553", "1650")}),
    (10, "128k", "read", "lat_mean", "us", {"only read": ("3529.50", "20899.89", "44997.52"),
                                            "5:5": ("1238.41", "7460.42", "36419.98"),
                                            "7:3": ("1270.03", "9840.12", "37447.28")}),
    (11, "128k", "write", "bw", "MB/s", {"only write": ("2848", "2833", "3345"), "5:5": ("1034", "1155", "1158"),
                                         "7:3": ("787", "683", "726")}),
    (12, "128k", "write", "lat_mean", "us", {"only write": ("2923.11", "23415.33", "50320.52"),
                                             "5:5": ("5970.79", "50412.56", "78862.06"),
                                             "7:3": ("7730.49", "75175.44", "97940.73")}),
)
_REPORT_LABELS = {"iops": "Throughput (Kilo IOPS)", "bw": "Throughput (MB/s)", "lat_mean": "Average Latency (ms)"}


# The order the Report ran its cells in, read from its tables: the request sizes in turn (Tables 1-4, 5-8, 9-12),
# within a size the queue depths left to right, within a depth the rows top to bottom. Only the 32 KiB read at
# QD 64 depends on it (the module docstring): read after the partition's rewrite in 4 KiB pieces, the order of
# the rows and depths within a size changes nothing else.
_REPORT_ORDER = tuple((bs, qd, mix) for bs in ("4k", "32k", "128k") for qd in _REPORT_QDS for mix in _REPORT_MIXES)


def report_prior_writes(bs: str, mix: str, qd: int) -> str | None:
    """The request size of the random writes that last rewrote the partition before this cell, in the Report's
    order (:data:`_REPORT_ORDER`), when this cell reads and those writes were smaller than its requests (each of
    its reads then senses as many NAND pages as the pieces it covers); None otherwise."""
    if _REPORT_MIXES[mix][0] == "randwrite":
        return None
    earlier = _REPORT_ORDER[:_REPORT_ORDER.index((bs, qd, mix))]
    written = [b for b, _q, m in earlier if _REPORT_MIXES[m][0] != "randread"]
    if not written or _request_kib(written[-1]) >= _request_kib(bs):
        return None
    return written[-1]


def _request_kib(size: str) -> int:
    return int(size.removesuffix("k"))


def report_params(bs: str, mix: str, qd: int) -> dict[str, Any]:
    """The conditions of one Report point: random I/O over the 1GB partition (read as 1 GiB, filled first), each
    cell on a device of its own in one stated state (``"device": OWN``: the Report gives every cell its own
    fio run and says nothing of what ran before it, so no cell inherits another's writes)."""
    rw, share = _REPORT_MIXES[mix]
    params: dict[str, Any] = {"rw": rw, "bs": bs, "qd": qd, "span": "1GiB", "device": OWN}
    if share is not None:
        params["rwmixread"] = share
    held = report_in_flight(bs, mix, qd)
    if held < REPORT_FULL_QUEUE:
        # fio held fewer requests in flight than its nominal depth (its own numbers say how many, by Little's
        # law): the drive is measured at the depth it was given.
        params["in_flight"] = round(held * qd)
    prior = report_prior_writes(bs, mix, qd)
    if prior is not None:
        # The span was last rewritten by random writes smaller than these reads (the module docstring).
        params["prior"] = prior
    return params


# Below this share of the queue depth in flight (published IOPS x latency, both directions), a latency cell and
# its throughput cannot both be met by a device that keeps the queue full (the simulator obeys Little's law).
REPORT_FULL_QUEUE = 0.85


def report_in_flight(bs: str, mix: str, qd: int) -> float:
    """Published requests in flight of one Report cell as a share of its queue depth: each direction's IOPS
    (128 KiB throughput in decimal MB/s) x its mean latency in microseconds, summed."""
    total = 0.0
    for _table, tbs, op, stat, _unit, rows in _REPORT_TABLES:
        if tbs != bs or stat == "lat_mean" or mix not in rows:
            continue
        rate = float(rows[mix][_REPORT_QDS.index(qd)])
        iops = rate * 1e3 if stat == "iops" else rate * 1e6 / (int(bs[:-1]) * 1024)
        lat_rows = next(r for t, b, o, s, _u, r in _REPORT_TABLES if b == bs and o == op and s == "lat_mean")
        total += iops * float(lat_rows[mix][_REPORT_QDS.index(qd)]) * 1e-6
    return total / qd


def _report_note(stat: str, share: float, qd: int) -> str:
    """The note of one Report cell whose published requests in flight are ``share`` x its queue depth ``qd``."""
    if stat != "lat_mean":
        return "random access assumed (the Report does not say)"
    note = "labelled ms, microseconds by Little's law"
    if share < REPORT_FULL_QUEUE:
        note += (f"; published IOPS x latency = {share:.2f} x the queue depth: fio did not keep its queue full "
                 f"(the Report does not say how fio ran: ioengine, jobs, which latency), so the cell is measured "
                 f"with the {round(share * qd)} requests in flight that its numbers hold")
    return note


for _table, _bs, _op, _stat, _unit, _rows in _REPORT_TABLES:
    for _mix, _cells in _rows.items():
        for _qd, _text in zip(_REPORT_QDS, _cells, strict=True):
            _share = report_in_flight(_bs, _mix, _qd)
            _label = f"{'Read' if _op == 'read' else 'Write'} {_REPORT_LABELS[_stat]}"
            _params = report_params(_bs, _mix, _qd)
            _note = _report_note(_stat, _share, _qd)
            if "prior" in _params:
                _note += (f"; read after the span's rewrite in random {_params['prior'][:-1]} KiB writes (the cells "
                          f"before it in the Report's tables' order)")
            _add("NV2", REPORT, f"Table {_table}", "steady", _params, f"{_op}.{_stat}", _text,
                 _unit, f'Table {_table} ({_label} of {_bs[:-1]}KB Data Access Size), row "{_mix}", column '
                        f'"{_qd}": "{_text}"', _note,
                 queue_not_full=_stat == "lat_mean" and _share < REPORT_FULL_QUEUE)


# ---- Profiling: Samsung PM981 256GB -------------------------------------------------------------------------

_PM981_SPAN = "8GiB"
_PM981_NOTE = "span assumed (the study does not say how much of the drive its runs covered)"

# §2.3 "QD=1 Baseline Table": mode, request, rw, then the cells Avg, p50, p95, p99 (ms).
_QD1_TABLE = (
    ("Random 4k Read", "randread", "4k", "read", ("0.07970±0.00029", "0.07424", "0.09097", "0.10018")),
    ("Random 4k Write", "randwrite", "4k", "write", ("0.01486±0.00008", "0.01210", "0.01602", "0.03085")),
    ("Sequential 128k Read", "read", "128k", "read", ("0.13311±0.00002", "0.11930", "0.18739", "0.22972")),
    ("Sequential 128k Write", "write", "128k", "write", ("0.07345±0.00139", "0.05914", "0.06409", "0.09370")),
)
for _mode, _rw, _bs, _op, _cells in _QD1_TABLE:
    for _stat, _column, _text in zip(("lat_mean", "p50", "p95", "p99"),
                                     ("Avg Latency(ms)", "p50(ms)", "p95(ms)", "p99(ms)"), _cells, strict=True):
        _add("PM981", PROFILING, "§2.3 QD=1 Baseline Table", "steady",
             {"rw": _rw, "bs": _bs, "qd": 1, "span": _PM981_SPAN}, f"{_op}.{_stat}", _text, "ms",
             f'QD=1 Baseline Table, row "{_mode}", column "{_column}": "{_text}"', _PM981_NOTE)

# §3.3 block-size sweeps at QD 32, the "MB/s (mean ± std)" column.
_BS_SWEEP = (
    ("randread", "Random Read (randread, QD = 32)",
     ("568.4 ± 0.10", "627.2 ± 0.02", "956.9 ± 0.22", "1,553.0 ± 0.53", "2,212.6 \\pm 0.18", "2,570.7 \\pm 1.44",
      "2,657.1 \\pm 358.1", "2,953.2 \\pm 22.39")),
    ("read", "Sequential Read (read, QD = 32)",
     ("1,568.1 ± 14.40", "2,108.1 ± 1.13", "2,235.3 ± 2.30", "3,227.3 ± 21.90", "3,253.6 ± 5.40",
      "3,256.3 ± 2.25", "3,068.0 ± 100.57", "2,910.2 ± 233.49")),
)
for _rw, _title, _cells in _BS_SWEEP:
    for _kib, _text in zip((4, 16, 32, 64, 128, 256, 512, 1024), _cells, strict=True):
        _add("PM981", PROFILING, f"§3.3 {_title}", "steady",
             {"rw": _rw, "bs": f"{_kib}k", "qd": 32, "span": _PM981_SPAN}, "read.bw", _text, "MiB/s",
             f'{_title}, row "{_kib:,}", column "MB/s (mean ± std)": "{_text}"', _PM981_NOTE)

# §4.3 mix sweep, 4 KiB random at QD 32: "Throughput (MB/s)" (reads and writes together).
for _label, _share, _text in (("R100/W0", 100, "578.7"), ("R70/W30", 70, "376.1"), ("R50/W50", 50, "376.9"),
                              ("R0/W100", 0, "502.6")):
    _add("PM981", PROFILING, "§4.3 Summary of Results", "steady",
         {"rw": "randrw", "rwmixread": _share, "bs": "4k", "qd": 32, "span": _PM981_SPAN}, "all.bw", _text,
         "MiB/s", f'Mix Ratio "{_label}", column "Throughput (MB/s)": "{_text}"', _PM981_NOTE)

# §5.1 QD sweep (4 KiB random read): BW, and §5.3's percentile table.
_QD_SWEEP = {
    1: ("49.0", ("0.0736", "0.0906", "0.1015", "0.1553")),
    2: ("92.5", ("0.0783", "0.1155", "0.1430", "0.1690")),
    4: ("164.8", ("0.0855", "0.1485", "0.1853", "0.2345")),
    8: ("268.4", ("0.0981", "0.2079", "0.2724", "0.3488")),
    16: ("398.2", ("0.1362", "0.3052", "0.3871", "0.4908")),
    32: ("522.7", ("0.2181", "0.4608", "0.5857", "0.7523")),
    64: ("566.7", ("0.3830", "0.9544", "1.2315", "1.6138")),
    128: ("580.3", ("0.6922", "2.2883", "3.1403", "3.8393")),
}
# The sweep reads on a device of its own (sequentially filled, idle): on the shared device it read the offsets in
# the very order the 4 KiB mixes before it had written them (the same workload seed), which the write path had
# spread over the dies in turn, so every queue found its dies free by construction.
for _qd, (_bw, _tails) in _QD_SWEEP.items():
    _params = {"rw": "randread", "bs": "4k", "qd": _qd, "span": _PM981_SPAN, "device": OWN}
    _add("PM981", PROFILING, "§5.1 QD table", "steady", _params, "read.bw", _bw, "MiB/s",
         f'QD table, row "{_qd}", column "Throughput BW (MB/s)": "{_bw}"', _PM981_NOTE)
    for _stat, _text in zip(("p50", "p95", "p99", "p99.9"), _tails, strict=True):
        _add("PM981", PROFILING, "§5.3 percentile table", "steady", _params, f"read.{_stat}", _text, "ms",
             f'QD {_qd} row, column "{_stat} Latency (ms)": "{_text}"', _PM981_NOTE)


# ---- Shapes -------------------------------------------------------------------------------------------------

SHAPES: list[Shape] = [
    Shape("saturation QD", "PM981", PROFILING, "§5.1, §5.5", "saturation",
          {"rw": "randread", "bs": "4k", "span": _PM981_SPAN, "qds": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
           "device": OWN},
          {"qd_min": 32, "qd_max": 64},
          "90.0 % of the peak at QD 32, 97.7 % at 64, +2.4 % from 64 to 128",
          '"throughput rises rapidly at first, but saturates around QD≈32–64"'),
    Shape("saturation QD", "Optane M10", FTL_THESIS, "§5.1", "saturation",
          {"rw": "read", "bs": "512", "span": "8GiB", "qds": (1, 2, 4, 8, 16, 64)},
          {"qd_min": 1, "qd_max": 4},
          "maximum at QD 4",
          '"The Intel Optane SSD reaches its maximum performance already at queue-depth 4"'),
    Shape("saturation QD", "NV2", REPORT, "Table 1", "saturation",
          {"rw": "randread", "bs": "4k", "span": "1GiB", "qds": (64, 512, 1024), "device": OWN},
          {"qd_min": 64, "qd_max": 64},
          "161 / 168 / 175 KIOPS at QD 64 / 512 / 1024: 92 % of the peak at QD 64",
          'Table 1, row "only read": "161", "168", "175"'),
    Shape("U-shaped mix curve", "PM981", PROFILING, "§4.3", "u_shape",
          {"bs": "4k", "qd": 32, "span": _PM981_SPAN, "shares": (100, 70, 50, 0)},
          {},
          "578.7 → 376.1 → 376.9 → 502.6 MiB/s across read shares 100/70/50/0 %",
          '"Under full write load, bandwidth recovers"'),
    Shape("read/write order in mixes", "NV2", REPORT, "Tables 6, 8, 10, 12", "mix_order",
          {"bs": ("32k", "128k"), "mixes": ("5:5", "7:3"), "qds": _REPORT_QDS},
          {"faster": "read"},
          "reads faster than writes at all 12 mixed 32/128 KiB points (e.g. 645.96 against 1383.56 us at 32 KiB 5:5 "
          "QD 64)",
          'Table 6, row "5:5", column "64": "645.96"; Table 8, row "5:5", column "64": "1383.56" (and so on for '
          "every mixed 32 and 128 KiB cell of Tables 6, 8, 10 and 12)"),
]

for _drive, _slower in (("970 EVO Plus", False), ("NV2", True), ("Gigabyte", True), ("Optane M10", False)):
    SHAPES.append(Shape(
        "after random fill", _drive, FTL_THESIS, "§5.2", "fill_order",
        {"bs": "2k", "qd": 64, "span": "8GiB"},
        {"slower": _slower},
        "sequential reads slower after a random fill" if _slower else "sequential reads unaffected by a random fill",
        '"While Samsung\'s and Intel\'s performance remains unaffected, Kingston\'s and Gigabyte\'s performance '
        'significantly deteriorates."'))

for _drive, _bs, _gib, _sec, _total, _words in _CLIFFS:
    SHAPES.append(Shape(
        "write cliff position", _drive, FTL_THESIS, "§5.4", "cliff_position",
        {"bs": _bs, "qd": 64, "total": _total}, {"gib": _cell(_gib), "tolerance": 0.15},
        f"cliff after {_gib} GiB", f'"{_words}"'))
SHAPES.append(Shape(
    "write cliff position", "Optane M10", FTL_THESIS, "§5.4", "cliff_position",
    {"bs": "128k", "qd": 64, "total": "12GiB"}, {"gib": None, "tolerance": 0.15},
    "no cliff", '"While the Intel Optane drive maintained low but constant performance"'))


def by_drive(drive: str | None = None) -> tuple[list[Point], list[Shape]]:
    """The points and shapes of one drive (all when None)."""
    if drive is None:
        return list(POINTS), list(SHAPES)
    return [p for p in POINTS if p.drive == drive], [s for s in SHAPES if s.drive == drive]


__all__ = ["DRIVES", "POINTS", "SHAPES", "SOURCES", "UNITS", "Drive", "Point", "Shape", "by_drive",
           "report_params", "report_prior_writes"]
