"""The names of every metric column and of every finding the report reads: one place, so the experiments that
write them, the report, guidance and card that read them, and the store and export that pass them on cannot
spell one percentile four ways.

Tabular outputs (results.csv, the windows CSV and Parquet, summaries.parquet, the store's tables) use names a
SQL engine takes unquoted: letters, digits and underscores, no reserved word (``p99.9`` is ``p99_9``, a time
window's number is ``window_index``). The run summary JSON keeps fio's keys (``"lat_ns": {"p99.9": ...}``):
those are :data:`LATENCY_KEYS`, and :func:`latency_column` maps them to column names.
"""

from __future__ import annotations

import re

# The latency statistics of a run summary, as its JSON spells them (fio's keys).
LATENCY_KEYS = ("mean", "stddev", "min", "max", "p50", "p90", "p95", "p99", "p99.9", "p99.99")
# The percentiles among them, in order.
PERCENTILE_KEYS = ("p50", "p90", "p95", "p99", "p99.9", "p99.99")


def column_suffix(key: str) -> str:
    """A latency key as a column name part: ``p99.9`` -> ``p99_9``."""
    return key.replace(".", "_")


def latency_column(key: str, unit: str = "us", prefix: str = "") -> str:
    """``latency_column("p99.9")`` -> ``lat_p99_9_us``; ``("p50", "ns")`` -> ``lat_p50_ns``."""
    return f"{prefix}lat_{column_suffix(key)}_{unit}"


# Columns of an experiment's results.csv (one row per point; ``prefix`` per direction: ``read_iops``).
IOPS = "iops"
MB_S = "mb_s"
OPS = "ops"
SLOW_SHARE = "slow_share"  # share of requests over 1 ms
LAT_MEAN_US = latency_column("mean")
LAT_P50_US = latency_column("p50")
LAT_P99_US = latency_column("p99")
LAT_P99_9_US = latency_column("p99.9")
# (summary key, results column) for every latency statistic, in microseconds.
LATENCY_COLUMNS = tuple((key, latency_column(key)) for key in
                        ("mean", "stddev", "min", "p50", "p90", "p95", "p99", "p99.9", "p99.99", "max"))

# On a simulated drive served by ``ftlscope sim attach``: the drive's own time for a phase's requests (the sum of
# the model's latencies, free of the FUSE/loop path and of the machine's load) and the MB/s that time gives.
DRIVE_S = "drive_s"
DRIVE_MB_S = "drive_mb_s"

# The time-window number in windows CSV/Parquet and in the experiments' window rows.
WINDOW_INDEX = "window_index"
# A request's byte offset in the trace (OFFSET is a reserved word in SQL).
OFFSET_BYTES = "offset_bytes"
# A request's place in the run's submission order over every queue (0 first): the order of requests submitted in
# the same nanosecond, which the trace's rows (in completion order) and submit_ns cannot tell.
SUBMIT_SEQ = "submit_seq"
# The per-request trace (run --trace, capture, the trace readers): one row per request.
TRACE_COLUMNS = ("op", OFFSET_BYTES, "size", "queue", "submit_ns", "complete_ns", "latency_ns", "status", "warmup",
                 SUBMIT_SEQ)
# The engine's windows table (``RunResult.windows``; ``ftlscope run --windows FILE``).
WINDOW_COLUMNS = ((WINDOW_INDEX, "op", "start_ns", "duration_ns", "ops", "bytes", "iops", "bw_bytes",
                   "ops_over_1ms") + tuple(latency_column(key, "ns") for key in LATENCY_KEYS))
# A replay's windows table adds: whether the replayed trace was generated (trace synth), not captured.
SYNTHETIC_TRACE = "synthetic_trace"

# The write rate-limiting shim (Newt, "Fantastic SSD Internals and How to Learn and Use Them" §5.2): its key in
# a run's summary JSON, and the windows column of the most bytes it held back in each window (its Figure 8).
WRITE_SHIM = "write_shim"
HELD_BYTES = "held_bytes"
# The per-write delay statistics under ``write_shim``: writes through the shim, those delayed, and
# ``delay_ns`` {mean, max} of the delayed ones.
SHIM_COUNT_KEYS = ("writes", "delayed_writes", "bound_releases", "flush_releases", "dropped_at_end",
                   "urgent_periods", "periods_with_writes", "overloaded_writes", "sustained_urgency_max",
                   "budget_releases", "reads_held", "reads_free", "backoffs", "storm_holds")
# The geometric mean read latency (ns) while the shim held writes on its schedule and while it held nothing (the
# shim backs off when a sequential test on the held reads finds them 3x slower: holding slowed the reads).
# ``first_backoff_ns``: when (the run's clock) the shim first gave up a hold for the reads, None if it never did.
SHIM_READ_KEYS = ("read_geomean_held_ns", "read_geomean_free_ns", "first_backoff_ns")
SHIM_DELAY = "delay_ns"

# summaries.parquet of ``ftlscope export``: one row per engine run and operation.
SUMMARY_COLUMNS = (("run_id", "experiment", "seq", "repetition", "label", "stop", "device_ns", "wall_ns", "op",
                    "ops", "bytes", "errors", "iops", "bw_bytes")
                   + tuple(latency_column(key, "ns") for key in LATENCY_KEYS) + ("ops_over_1ms",))

# The findings the report reads (card, guidance and the per-experiment sentences), per experiment. Each is
# emitted by that experiment's analysis (a test runs them and checks); a finding may be None when the data
# cannot support it, and the reader then stays silent.
FINDINGS: dict[str, tuple[str, ...]] = {
    "qd1-baseline": ("random_read_lat_mean_us", "random_read_lat_p99_us", "random_read_iops",
                     "random_write_lat_mean_us", "random_write_iops", "sequential_read_mb_s",
                     "sequential_write_mb_s"),
    "bs-sweep": ("sequential_transition_bytes", "sequential_peak_mb_s", "transition_bytes", "random_peak_mb_s",
                 "peak_mb_s"),
    "bs-sweep-write": ("sequential_transition_bytes", "sequential_peak_mb_s", "transition_bytes",
                       "random_peak_mb_s", "peak_mb_s"),
    "qd-sweep": ("peak_iops", "peak_qd", "knee_qd", "practical_knee_qd", "littles_law_error_pct", "p99_growth",
                 "sla_max_qd", "sla_p99_us", "sla_max_qd_p99_us", "qd1_p99_us", "latency_limit_qd",
                 "latency_limit_p99_us"),
    "corners": tuple(f"{corner}_{op}_{metric}" for corner in ("seq1m_q8t1", "seq1m_q1t1", "rnd4k_q32t1", "rnd4k_q1t1")
                     for op in ("read", "write") for metric in ("mb_s", "iops") if metric == "mb_s" or
                     corner.startswith("rnd")),
    "zoning": ("outer_mb_s", "inner_mb_s", "inner_to_outer_ratio", "random_read_lat_mean_us", "random_read_iops_qd1",
               "random_read_iops_qd32"),
    "alignment": ("aligned_from_bytes", "misaligned_penalty_pct", "worst_penalty_pct"),
    "seq-write-over-time": ("cliff_bytes", "cliff_pct_of_capacity", "throughput_before_mb_s",
                            "throughput_after_mb_s", "mb_s", "window_lat_p50_us", "window_lat_p99_us"),
    "seq-read-over-time": ("mb_s", "biggest_drop_ratio", "window_mb_s_min", "window_mb_s_max"),
    "rw-mix": ("r100w0_iops", "r70w30_iops", "r0w100_iops", "r70w30_read_slowdown"),
    "deep-queue": ("qd_throughput_gain_pct", "qd_latency_growth", "littles_law_error_pct"),
    "parallelism": ("peak_mb_s_sequential_fill", "peak_mb_s_random_fill", "random_to_sequential_fill_peak_ratio",
                    "multi_queue_gain_sequential_fill"),
    "locality": ("shuffled_matches_sequential_from_bytes", "sequential_to_shuffled_ratio_4k"),
    "permuted-reads": ("permuted_to_sequential_w2", "permuted_to_sequential_w4", "permuted_to_sequential_w8"),
    "random-fill": ("early_mb_s", "late_mb_s", "slowdown_ratio", "write_amplification", "mb_s"),
    "data-dependence": ("pattern_ratio_empty", "pattern_ratio_full", "write_zeroes_vs_zeros_empty",
                        "write_zeroes_vs_zeros_full"),
    "working-set": ("read_lat_mean_us_smallest", "read_lat_mean_us_full", "read_latency_step_bytes"),
    "burst-vs-steady": ("burst_iops", "steady_iops", "drop_bytes", "burst_to_steady_ratio"),
    "reset-behaviour": ("post_power_cycle_slowdown_recent", "post_reset_slowdown_recent", "post_reset_slowdown"),
    "trim-before-overwrite": ("overwrite_speedup", "write_amplification_overwrite",
                              "write_amplification_trim_first"),
    "interleaved-vs-grouped": ("interleaved_throughput_ratio_qd1", "interleaved_throughput_ratio_qd32"),
    "less-load-latency": ("lone_read_lat_mean_us", "first_returned_lat_mean_us", "less_load_penalty_pct",
                          "order_statistic_gap_pct", "less_load_higher_latency", "faster_than_independent_share"),
    "git-checkout": ("checkouts", "total_s", "mean_checkout_s", "checkout_std_s", "slowest_checkout_s",
                     "writeback_share", "trace_read_q2c_mean_ms", "trace_write_q2c_mean_ms", "trace_read_requests",
                     "trace_write_requests"),
    "tree-traversal": ("directory_s", "inode_s", "physical_s", "inode_speedup", "physical_speedup",
                       "inode_time_saved_share", "physical_time_saved_share"),
}

# The findings of an ``ftlscope newt`` run (stored as the experiment "newt", not one of the suite's): per
# operation, each latency statistic before and after the optimizations (us) and the gain (% lower after; negative
# when worse), the MB/s before and after, and what the optimizations cost (extra bytes read, bytes held back).
NEWT_EXPERIMENT = "newt"
NEWT_STATISTICS = ("mean", "p50", "p90", "p95", "p99", "p99.9")


def newt_gain_finding(op: str, key: str) -> str:
    """``newt_gain_finding("read", "p99.9")`` -> ``read_p99_9_gain_pct``."""
    return f"{op}_{column_suffix(key)}_gain_pct"


def newt_latency_finding(op: str, key: str, when: str) -> str:
    """``newt_latency_finding("read", "p99", "before")`` -> ``read_lat_p99_before_us``."""
    return f"{op}_lat_{column_suffix(key)}_{when}_us"


NEWT_FINDINGS: tuple[str, ...] = tuple(
    name for op in ("read", "write") for key in NEWT_STATISTICS
    for name in (newt_gain_finding(op, key), newt_latency_finding(op, key, "before"),
                 newt_latency_finding(op, key, "after"))
) + tuple(f"{op}_mb_s_{when}" for op in ("read", "write") for when in ("before", "after")) + (
    "extra_read_bytes", "extra_read_pct", "held_bytes_max", "held_bytes_mean", "write_delay_mean_us")

# Words PostgreSQL and DuckDB (the engines people point at Parquet) reserve: a column so named must be quoted
# there. From PostgreSQL's "SQL Key Words" appendix, the words marked reserved.
SQL_RESERVED = frozenset("""
all analyse analyze and any array as asc asymmetric authorization binary both case cast check collate collation
column concurrently constraint create cross current_catalog current_date current_role current_schema current_time
current_timestamp current_user default deferrable desc distinct do else end except false fetch for foreign freeze
from full grant group having ilike in initially inner intersect into is isnull join lateral leading left like limit
localtime localtimestamp natural not notnull null offset on only or order outer overlaps placing primary
references returning right select session_user similar some symmetric system_user table tablesample then to
trailing true union unique user using variadic verbose when where window with
""".split())

_SQL_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def sql_friendly(name: str) -> bool:
    """Whether a column name can be written unquoted in SQL: no dot or other punctuation, not reserved."""
    return bool(_SQL_NAME.match(name)) and name not in SQL_RESERVED
