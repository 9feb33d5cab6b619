"""Sizes, durations and workloads as a user writes them: fio-like flags, JSON, and the engine's reading of it.

No I/O here; everything runs in-process and takes milliseconds.
"""

from __future__ import annotations

import io
import json

import pytest

from ftlscope import Workload, _native, from_flags
from ftlscope.errors import FtlscopeError, UsageError
from ftlscope.units import format_ns, parse_duration_ns, parse_fio_size, parse_size
from ftlscope.workload import DATA_PATTERNS, OPS, RW_MODES

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
S, MS, US = 10**9, 10**6, 10**3


def _one_line_usage_error(exc: pytest.ExceptionInfo) -> str:
    assert isinstance(exc.value, UsageError) and isinstance(exc.value, FtlscopeError)
    assert exc.value.exit_code == 2
    message = str(exc.value)
    assert message and "\n" not in message
    return message


# ---------------------------------------------------------------------------------------------------------
# sizes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # fio's single letters are binary
        ("4k", 4 * KiB), ("4K", 4 * KiB), ("1m", MiB), ("1M", MiB), ("2g", 2 * GiB), ("1t", TiB),
        # IEC units are binary
        ("4KiB", 4 * KiB), ("4kib", 4 * KiB), ("128KiB", 128 * KiB), ("1MiB", MiB), ("1GiB", GiB), ("1TiB", TiB),
        # SI units are decimal
        ("4KB", 4000), ("1MB", 10**6), ("500GB", 500 * 10**9), ("1TB", 10**12), ("1kb", 1000),
        # bare numbers and bytes
        ("512", 512), ("512b", 512), ("512B", 512), ("0", 0),
        # fractions that come out whole, and spaces people type
        ("1.5k", 1536), ("0.5KiB", 512), ("1.5MiB", 3 * MiB // 2), ("1.5GB", 1_500_000_000), (" 4 KiB ", 4096),
        # already a number of bytes
        (8192, 8192),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "kb_base", "expected"),
    [
        # fio's HOWTO, "int" examples with kb_base=1024 (the default): 4k = 4kb = 4kB = 4K = 4KB = 4096 ...
        *((t, 1024, 4 * KiB) for t in ("4096", "4096b", "4096B", "4k", "4kb", "4kB", "4K", "4KB")),
        ("1m", 1024, MiB), ("1mb", 1024, MiB), ("1MB", 1024, MiB), ("1024k", 1024, MiB), ("1t", 1024, TiB),
        ("1024g", 1024, TiB), ("2gb", 1024, 2 * GiB),
        # ... and with kb_base=1000: 4k = 4000, while 4ki = 4KiB = 4096
        ("4k", 1000, 4000), ("4KB", 1000, 4000), ("1m", 1000, 10**6), ("4ki", 1000, 4 * KiB),
        ("4KiB", 1000, 4 * KiB), ("1mi", 1000, MiB), ("1ti", 1000, TiB),
        # where ftlscope departs from fio's default: the IEC forms stay binary (fio's kb_base=1024 reads 4KiB
        # as 4000, for its old scripts)
        ("4KiB", 1024, 4 * KiB), ("1MiB", 1024, MiB), ("1.5k", 1024, 1536),
    ],
)
def test_parse_fio_size_follows_fio(text, kb_base, expected):
    assert parse_fio_size(text, "--bs", kb_base) == expected


def test_run_flags_read_kb_as_fio_does():
    w = from_flags(bs="4kb,8KB", offset="1mb", size="1GB")
    assert w.sizes == [4 * KiB, 8 * KiB]
    assert w.range == {"start": MiB, "length": GiB}
    assert from_flags(bs="4k", kb_base=1000).sizes == [4000]
    with pytest.raises(UsageError, match="--bs"):
        from_flags(bs="4xb")


@pytest.mark.parametrize(("text", "expected"), [("4.1MB", 4_100_000), ("16.1MB", 16_100_000), ("8.2MB", 8_200_000)])
def test_parse_size_decimal_fractions_that_are_whole(text, expected):
    assert parse_size(text, "--size") == expected


@pytest.mark.parametrize("text", ["", "abc", "4x", "4kk", "-4k", "1e3", "k", "4 k i b", "4.7k", "0.1"])
def test_parse_size_errors_name_the_flag(text):
    with pytest.raises(UsageError) as exc:
        parse_size(text, "--bs")
    message = _one_line_usage_error(exc)
    assert message.startswith("--bs: "), message
    assert f"'{text}'" in message


def test_parse_size_default_name():
    with pytest.raises(UsageError, match=r"^size: "):
        parse_size("lots")


# ---------------------------------------------------------------------------------------------------------
# durations


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10s", 10 * S), ("0.3s", 300 * MS), ("100ms", 100 * MS), ("50us", 50 * US), ("50µs", 50 * US),
        ("250ns", 250), ("1.5", 1500 * MS), ("2", 2 * S), ("2m", 120 * S), ("2min", 120 * S), ("1h", 3600 * S),
        ("20ms", 20 * MS), ("10MS", 10 * MS), (1.5, 1500 * MS), (2, 2 * S),
    ],
)
def test_parse_duration_ns(text, expected):
    assert parse_duration_ns(text) == expected


@pytest.mark.parametrize(("text", "expected"), [("1.001s", 1_001_000_000), ("1.015s", 1_015_000_000)])
def test_parse_duration_is_exact(text, expected):
    assert parse_duration_ns(text, "--runtime") == expected


@pytest.mark.parametrize("text", ["", "ten", "10x", "10 sec", "-1s", "s", "1.2.3s"])
def test_parse_duration_errors_name_the_flag(text):
    with pytest.raises(UsageError) as exc:
        parse_duration_ns(text, "--runtime")
    message = _one_line_usage_error(exc)
    assert message.startswith("--runtime: "), message


# ---------------------------------------------------------------------------------------------------------
# fio-like flags

EXPECTED_RW = {
    "read": ({"read": 100}, "sequential"),
    "write": ({"write": 100}, "sequential"),
    "randread": ({"read": 100}, "random"),
    "randwrite": ({"write": 100}, "random"),
    "rw": ({"read": 50, "write": 50}, "sequential"),
    "readwrite": ({"read": 50, "write": 50}, "sequential"),
    "randrw": ({"read": 50, "write": 50}, "random"),
    "trim": ({"trim": 100}, "sequential"),
    "randtrim": ({"trim": 100}, "random"),
    "writezeroes": ({"write_zeroes": 100}, "sequential"),
    "flush": ({"flush": 100}, "sequential"),
}


def test_every_rw_mode_is_covered_here():
    assert set(EXPECTED_RW) == set(RW_MODES)


@pytest.mark.parametrize("rw", sorted(EXPECTED_RW))
def test_from_flags_rw_modes(rw):
    mix, kind = EXPECTED_RW[rw]
    w = from_flags(rw=rw)
    assert w.mix == mix
    assert w.pattern == {"kind": kind}
    assert w.writes == any(op in mix for op in ("write", "trim", "write_zeroes"))
    # the engine takes it as it is, filling in only the operations left out
    engine = json.loads(_native.normalise_workload(w.to_json()))
    assert engine["mix"] == {op: mix.get(op, 0) for op in OPS}
    assert engine["pattern"] == {"kind": kind}


def test_from_flags_defaults():
    w = from_flags()
    assert w.mix == {"read": 100}
    assert w.pattern == {"kind": "random"}
    assert w.sizes == [4096]
    assert w.queue_depth == 1 and w.queues == 1
    assert w.batch is None
    assert w.stop == {"time_ns": 10 * S}, "no limit given: 10 s, as the help says"
    assert w.warmup == {}
    assert w.data == "random" and w.seed == 1
    assert w.range == {"start": 0, "length": 0}


def test_unknown_rw_names_the_flag():
    with pytest.raises(UsageError) as exc:
        from_flags(rw="randomread")
    message = _one_line_usage_error(exc)
    assert message.startswith("--rw: ") and "randomread" in message and "randread" in message


@pytest.mark.parametrize(("rwmixread", "read"), [(None, 50), (70, 70), (0, 0), (100, 100)])
def test_rwmixread(rwmixread, read):
    w = from_flags(rw="randrw", rwmixread=rwmixread)
    assert w.mix == {"read": read, "write": 100 - read}


@pytest.mark.parametrize("rwmixread", [101, -1])
def test_rwmixread_out_of_range(rwmixread):
    with pytest.raises(UsageError) as exc:
        from_flags(rw="rw", rwmixread=rwmixread)
    assert _one_line_usage_error(exc).startswith("--rwmixread: ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("read=70,write=30", {"read": 70, "write": 30}),
        ("read=70, write=20, trim=10", {"read": 70, "write": 20, "trim": 10}),
        ("trim=100", {"trim": 100}),
        ("write_zeroes=100", {"write_zeroes": 100}),
        ("write-zeroes=5,flush=1", {"write_zeroes": 5, "flush": 1}),
    ],
)
def test_mix_flag(text, expected):
    w = from_flags(rw="randwrite", mix=text)
    assert w.mix == expected
    assert w.pattern == {"kind": "random"}, "--mix replaces the weights, --rw still says where requests go"
    assert json.loads(_native.normalise_workload(w.to_json()))["mix"] == {op: expected.get(op, 0) for op in OPS}


@pytest.mark.parametrize("text", ["raed=70", "read", "read=x", "read=-1", "read=70;write=30", ","])
def test_mix_flag_errors(text):
    with pytest.raises(UsageError) as exc:
        from_flags(mix=text)
    assert _one_line_usage_error(exc).startswith("--mix: ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sequential", {"kind": "sequential"}),
        ("random", {"kind": "random"}),
        ("permutation", {"kind": "permutation"}),
        ("permuted-windows:4", {"kind": "permuted_windows", "window": 4}),
        ("permuted_windows:16", {"kind": "permuted_windows", "window": 16}),
        ("strided:64k", {"kind": "strided", "stride": 64 * KiB}),
        ("strided:1MiB", {"kind": "strided", "stride": MiB}),
        ("hotset:0:1MiB:0.9", {"kind": "hot_set", "hot_start": 0, "hot_length": MiB, "hot_share": 0.9}),
        ("hotset:4k:64k:1", {"kind": "hot_set", "hot_start": 4096, "hot_length": 65536, "hot_share": 1.0}),
        ("zipf:1.2", {"kind": "zipf", "theta": 1.2}),
    ],
)
def test_pattern_forms(text, expected):
    w = from_flags(rw="read", pattern=text)
    assert w.pattern == expected
    # the engine reads exactly what Python wrote
    assert json.loads(_native.normalise_workload(w.to_json()))["pattern"] == expected


@pytest.mark.parametrize(
    "text",
    ["bogus", "zipf", "zipf:abc", "hotset:1:2", "hotset:0:1MiB:lots", "strided", "strided:lots",
     "permuted-windows:x", "permuted-windows", "random:3", "sequential:1"],
)
def test_pattern_errors_name_the_flag(text):
    with pytest.raises(UsageError) as exc:
        from_flags(pattern=text)
    assert _one_line_usage_error(exc).startswith("--pattern"), str(exc.value)


def test_request_sizes():
    assert from_flags(bs="4k,8k,64KiB").sizes == [4096, 8192, 65536]
    assert from_flags(bs="512").sizes == [512]
    with pytest.raises(UsageError) as exc:
        from_flags(bs="4k,huge")
    assert _one_line_usage_error(exc).startswith("--bs: ")


def test_queue_depth_and_queues():
    w = from_flags(qd=32, queues=4)
    assert (w.queue_depth, w.queues) == (32, 4)
    for kwargs, flag in (({"qd": 0}, "--qd"), ({"queues": 0}, "--queues")):
        with pytest.raises(UsageError) as exc:
            from_flags(**kwargs)
        assert _one_line_usage_error(exc).startswith(f"{flag}: ")


def test_batch_and_idle():
    w = from_flags(batch=4, idle="20ms", qd=32)
    assert w.batch == {"size": 4, "idle_ns": 20 * MS}
    assert w.queue_depth == 4, "in batch mode the batch is what is in flight"
    assert from_flags(batch=8).batch == {"size": 8, "idle_ns": 0}
    engine = json.loads(_native.normalise_workload(w.to_json()))
    assert engine["batch"] == {"size": 4, "idle_ns": 20 * MS}
    assert "batch" not in from_flags().to_dict(), "no batch: left out, the engine's default is none"
    assert json.loads(_native.normalise_workload(from_flags().to_json()))["batch"] is None


def test_idle_without_batch():
    with pytest.raises(UsageError) as exc:
        from_flags(idle="10ms")
    message = _one_line_usage_error(exc)
    assert message.startswith("--idle: ") and "--batch" in message


def test_bad_idle_names_the_flag():
    with pytest.raises(UsageError) as exc:
        from_flags(batch=4, idle="soon")
    assert _one_line_usage_error(exc).startswith("--idle: ")


@pytest.mark.parametrize(
    ("kwargs", "stop"),
    [
        ({}, {"time_ns": 10 * S}),
        ({"runtime": "0.5s"}, {"time_ns": 500 * MS}),
        ({"ops": 1000}, {"ops": 1000}),
        ({"total_bytes": "1GiB"}, {"bytes": GiB}),
        ({"runtime": "2s", "ops": 10, "total_bytes": "4k"}, {"time_ns": 2 * S, "ops": 10, "bytes": 4096}),
    ],
)
def test_stop_conditions(kwargs, stop):
    w = from_flags(**kwargs)
    assert w.stop == stop
    engine = json.loads(_native.normalise_workload(w.to_json()))["stop"]
    assert engine == {"ops": 0, "bytes": 0, "time_ns": 0, **stop}


@pytest.mark.parametrize(
    ("kwargs", "warmup"),
    [
        ({}, {}),
        ({"warmup": "2s"}, {"time_ns": 2 * S}),
        ({"warmup_ops": 100}, {"ops": 100}),
        ({"warmup": "50ms", "warmup_ops": 10}, {"time_ns": 50 * MS, "ops": 10}),
    ],
)
def test_warmup(kwargs, warmup):
    w = from_flags(ops=10, **kwargs)
    assert w.warmup == warmup
    assert json.loads(_native.normalise_workload(w.to_json()))["warmup"] == {"ops": 0, "time_ns": 0, **warmup}


def test_range_and_alignment_flags():
    w = from_flags(offset="1MiB", size="16MiB", align_offset="512")
    assert w.range == {"start": MiB, "length": 16 * MiB}
    assert w.align_offset == 512
    for kwargs, flag in (({"offset": "x"}, "--offset"), ({"size": "big"}, "--size"),
                         ({"align_offset": "odd"}, "--align-offset"), ({"runtime": "long"}, "--runtime"),
                         ({"total_bytes": "all"}, "--bytes"), ({"warmup": "a bit"}, "--warmup")):
        with pytest.raises(UsageError) as exc:
            from_flags(**kwargs)
        assert _one_line_usage_error(exc).startswith(f"{flag}: "), str(exc.value)


@pytest.mark.parametrize(
    ("flag", "pattern"),
    [("zeros", "zeros"), ("ones", "ones"), ("0xaa", "0xaa"), ("aa", "0xaa"), ("lba", "lba_stamped"),
     ("lba_stamped", "lba_stamped"), ("random", "random")],
)
def test_data_patterns(flag, pattern):
    w = from_flags(rw="write", data=flag)
    assert w.data == pattern
    assert json.loads(_native.normalise_workload(w.to_json()))["data"] == pattern


def test_every_data_pattern_is_accepted_by_the_engine():
    for pattern in DATA_PATTERNS:
        assert json.loads(_native.normalise_workload(json.dumps({"data": pattern})))["data"] == pattern


def test_unknown_data_pattern_is_a_usage_error():
    with pytest.raises(UsageError) as exc:
        from_flags(data="0x55")
    assert "0x55" in _one_line_usage_error(exc)


def test_unknown_data_pattern_names_the_flag():
    with pytest.raises(UsageError) as exc:
        from_flags(data="0x55")
    assert _one_line_usage_error(exc).startswith("--data: ")


# ---------------------------------------------------------------------------------------------------------
# the workload as JSON, and the engine's reading of it

ENGINE_DEFAULTS = {
    "mix": {"read": 100, "write": 0, "trim": 0, "write_zeroes": 0, "flush": 0},
    "sizes": [4096],
    "pattern": {"kind": "sequential"},
    "range": {"start": 0, "length": 0},
    "align_offset": 0,
    "queue_depth": 1,
    "queues": 1,
    "batch": None,
    "stop": {"ops": 0, "bytes": 0, "time_ns": 0},
    "warmup": {"ops": 0, "time_ns": 0},
    "data": "random",
    "rate": {"bytes_per_s": {"read": 0, "write": 0, "trim": 0}, "iops": {"read": 0, "write": 0, "trim": 0}},
    "seed": 1,
}


def test_engine_fills_every_default():
    assert json.loads(_native.normalise_workload("{}")) == ENGINE_DEFAULTS


def test_python_defaults_match_the_engine():
    assert json.loads(_native.normalise_workload(Workload().to_json())) == ENGINE_DEFAULTS


def test_engine_fills_operations_left_out_of_a_mix():
    engine = json.loads(_native.normalise_workload('{"mix": {"write": 100}}'))
    assert engine["mix"] == {"read": 0, "write": 100, "trim": 0, "write_zeroes": 0, "flush": 0}


def test_workload_json_round_trip():
    w = from_flags(
        rw="randrw", rwmixread=70, bs="4k,8k", qd=4, queues=2, pattern="hotset:0:1MiB:0.9", offset="4k",
        size="16MiB", align_offset="512", batch=4, idle="1ms", ops=1000, warmup="1s", warmup_ops=5, data="lba",
        seed=42,
    )
    # Python -> JSON -> Python is the identity
    assert Workload.from_json(w.to_json()) == w
    # the engine keeps every value and only adds the defaults left out
    engine = json.loads(_native.normalise_workload(w.to_json()))
    assert engine == {
        "mix": {"read": 70, "write": 30, "trim": 0, "write_zeroes": 0, "flush": 0},
        "sizes": [4096, 8192],
        "pattern": {"kind": "hot_set", "hot_start": 0, "hot_length": MiB, "hot_share": 0.9},
        "range": {"start": 4096, "length": 16 * MiB},
        "align_offset": 512,
        "queue_depth": 4,
        "queues": 2,
        "batch": {"size": 4, "idle_ns": MS},
        "stop": {"ops": 1000, "bytes": 0, "time_ns": 0},
        "warmup": {"ops": 5, "time_ns": S},
        "data": "lba_stamped",
        "rate": {"bytes_per_s": {"read": 0, "write": 0, "trim": 0}, "iops": {"read": 0, "write": 0, "trim": 0}},
        "seed": 42,
    }
    # the normalised form reads back into Python and normalises to itself
    again = Workload.from_json(_native.normalise_workload(w.to_json()))
    assert json.loads(_native.normalise_workload(again.to_json())) == engine
    assert json.loads(_native.normalise_workload(json.dumps(engine))) == engine


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        ({"queue_dpeth": 4}, "queue_dpeth"),
        ({"mix": {"raed": 100}}, "raed"),
        ({"stop": {"opps": 10}}, "opps"),
        ({"warmup": {"seconds": 1}}, "seconds"),
        ({"range": {"begin": 0}}, "begin"),
        ({"batch": {"size": 4, "idle": 1000}}, "idle"),
        ({"pattern": {"kind": "zipf", "theta": 1.2, "thetta": 1}}, "thetta"),
        ({"pattern": {"kind": "spiral"}}, "spiral"),
        ({"data": "lba"}, "lba"),
    ],
)
def test_engine_refuses_unknown_fields_naming_them(workload, field):
    with pytest.raises(_native.WorkloadInvalid) as exc:
        _native.normalise_workload(json.dumps(workload))
    assert f"`{field}`" in str(exc.value)
    assert isinstance(exc.value, ValueError)


@pytest.mark.parametrize(
    ("pattern", "field"),
    [({"kind": "sequential", "stride": 65536}, "stride"), ({"kind": "random", "theta": 1.2}, "theta"),
     ({"kind": "permutation", "window": 4}, "window")],
)
def test_engine_refuses_unknown_fields_on_simple_patterns(pattern, field):
    with pytest.raises(_native.WorkloadInvalid) as exc:
        _native.normalise_workload(json.dumps({"pattern": pattern}))
    assert f"`{field}`" in str(exc.value)


def test_python_refuses_unknown_fields_naming_them():
    with pytest.raises(UsageError) as exc:
        Workload.from_dict({"queue_dpeth": 4})
    assert "queue_dpeth" in _one_line_usage_error(exc)
    with pytest.raises(UsageError) as exc:
        Workload.from_json('{"mix": {"raed": 100}}')
    assert "raed" in _one_line_usage_error(exc)


def test_malformed_json_is_refused():
    with pytest.raises(_native.WorkloadInvalid, match="workload JSON"):
        _native.normalise_workload("{")
    with pytest.raises(_native.WorkloadInvalid, match="workload JSON"):
        _native.normalise_workload('{"queue_depth": -1}')


@pytest.mark.parametrize(("ns", "text"), [(812, "812 ns"), (85_300, "85.3 µs"), (12_100_000, "12.10 ms"),
                                          (3_200_000_000, "3.20 s")])
def test_latencies_print_with_the_micro_sign(ns, text):
    assert format_ns(ns) == text


def test_a_table_of_latencies_in_microseconds_still_aligns():
    # µ is one terminal column wide, so a column mixing µs and ms keeps its right edge.
    from rich.console import Console
    from rich.table import Table

    table = Table("p99")
    table.columns[0].justify = "right"
    for ns in (85_300, 12_100_000, 812):
        table.add_row(format_ns(ns))
    console = Console(width=40, record=True, color_system=None, file=io.StringIO())
    console.print(table)
    rows = [line for line in console.export_text().splitlines() if line.startswith("│")]
    assert [row.strip("│ ") for row in rows] == ["85.3 µs", "12.10 ms", "812 ns"]
    assert len({len(row) for row in rows}) == 1  # the same width in characters ...
    assert all(row.endswith("s │") for row in rows)  # ... and the units end in the same column
