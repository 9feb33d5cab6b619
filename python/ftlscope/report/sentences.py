"""One sentence of finding per experiment, for the report. Each experiment has templates tried in order; the
first whose findings are all present is used (an analysis leaves out what the data cannot support, so a
sentence never states a number that was not measured); a template may also hold only for some values (no
"smaller shifts cost 0 %"). Without a matching template the sentence lists the experiment's first findings."""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

from .facts import Facts

# A template, or (template, condition on the findings' values) where the wording holds only for some values.
Template = str | tuple[str, Callable[[dict[str, Any]], bool]]

TEMPLATES: dict[str, tuple[Template, ...]] = {
    "qd1-baseline": (
        "At QD 1 a 4 KiB random read takes {random_read_lat_mean_us} on average (p99 {random_read_lat_p99_us}), "
        "a 4 KiB random write {random_write_lat_mean_us}; 128 KiB sequential reads reach {sequential_read_mb_s} "
        "and writes {sequential_write_mb_s}.",
        "At QD 1 a 4 KiB random read takes {random_read_lat_mean_us} on average (p99 {random_read_lat_p99_us}).",
    ),
    "bs-sweep": (
        "Sequential reads reach 80 % of their peak {sequential_peak_mb_s} from {sequential_transition_bytes} "
        "requests; random reads reach 80 % of theirs ({random_peak_mb_s}) from {transition_bytes}.",
        "Reads peak at {peak_mb_s}.",
    ),
    "bs-sweep-write": (
        "Sequential writes reach 80 % of their peak {sequential_peak_mb_s} from {sequential_transition_bytes} "
        "requests; random writes reach 80 % of theirs ({random_peak_mb_s}) from {transition_bytes}.",
        "Writes peak at {peak_mb_s}.",
    ),
    "rw-mix": (
        "4 KiB random I/O at QD 32 runs at {r100w0_iops} read-only, {r70w30_iops} at 70/30 and {r0w100_iops} "
        "write-only; at 70/30 reads take {r70w30_read_slowdown} as long as alone.",
        "4 KiB random I/O at QD 32 runs at {r100w0_iops} read-only.",
    ),
    "deep-queue": (
        ("From QD 64 to 1024 throughput gains {qd_throughput_gain_pct} while latency grows {qd_latency_growth}; "
         "Little's law holds within {littles_law_error_pct}.",
         lambda v: v["qd_throughput_gain_pct"] > 0 and v["qd_latency_growth"] > 1),
        ("From QD 64 to 1024 throughput changes by {qd_throughput_gain_pct} and latency by a factor of "
         "{qd_latency_growth}; Little's law holds within {littles_law_error_pct}.", lambda v: True),
    ),
    "corners": (
        "CrystalDiskMark's corners: SEQ1M Q8T1 reads at {seq1m_q8t1_read_mb_s} and writes at "
        "{seq1m_q8t1_write_mb_s}; RND4K Q32T1 reads {rnd4k_q32t1_read_iops} and writes {rnd4k_q32t1_write_iops}; "
        "RND4K Q1T1 reads {rnd4k_q1t1_read_iops} and writes {rnd4k_q1t1_write_iops}.",
    ),
    "zoning": (
        ("Sequential reads run at {outer_mb_s} in the outer zone and {inner_mb_s} in the inner one "
         "({inner_to_outer_ratio} the outer rate); a 4 KiB random read at QD 1 takes {random_read_lat_mean_us} "
         "(seek and rotation), {random_read_iops_qd1} at QD 1 and {random_read_iops_qd32} at QD 32.",
         lambda v: v["inner_to_outer_ratio"] < 0.95),
        "Sequential reads run at {outer_mb_s} at the start and {inner_mb_s} at the end (no zoning); a 4 KiB "
        "random read at QD 1 takes {random_read_lat_mean_us}, {random_read_iops_qd1} at QD 1 and "
        "{random_read_iops_qd32} at QD 32.",
    ),
    "qd-sweep": (
        "4 KiB random reads peak at {peak_iops} at {peak_qd}; the knee (where a doubling adds under 5 % IOPS "
        "while mean latency grows over 20 %) is at {knee_qd}, 90 % of the peak is reached at {practical_knee_qd}, "
        "and Little's law holds within {littles_law_error_pct}.",
        "4 KiB random reads peak at {peak_iops} at {peak_qd} (no knee within the depths measured); 90 % of the "
        "peak is reached at {practical_knee_qd}.",
    ),
    "parallelism": (
        "Sequential reads peak at {peak_mb_s_sequential_fill} after a sequential fill and "
        "{peak_mb_s_random_fill} after a random one ({random_to_sequential_fill_peak_ratio}); more queues give "
        "{multi_queue_gain_sequential_fill} the best single-queue throughput.",
        "Sequential reads peak at {peak_mb_s_sequential_fill}; more queues give {multi_queue_gain_sequential_fill} "
        "the best single-queue throughput.",
    ),
    "locality": (
        "Shuffled reads keep up with sequential ones from {shuffled_matches_sequential_from_bytes} requests; at "
        "4 KiB sequential reads run {sequential_to_shuffled_ratio_4k} as fast as shuffled ones.",
        "At 4 KiB sequential reads run {sequential_to_shuffled_ratio_4k} as fast as shuffled ones.",
    ),
    "permuted-reads": (
        "Reads shuffled within windows of 2, 4 and 8 run at {permuted_to_sequential_w2}, "
        "{permuted_to_sequential_w4} and {permuted_to_sequential_w8} of sequential reads' IOPS.",
    ),
    "alignment": (
        ("Offsets aligned to {aligned_from_bytes} or more cost nothing; smaller shifts cost "
         "{misaligned_penalty_pct} of the IOPS.", lambda v: v["misaligned_penalty_pct"] > 0),
        "No misaligned offset costs more than the tolerance; the worst cost {worst_penalty_pct} of the IOPS.",
    ),
    "seq-read-over-time": (
        "A sequential read pass runs at {mb_s}; at its biggest drop it falls to {biggest_drop_ratio} of the level "
        "before.",
        "A sequential read pass runs at {mb_s}, every window between {window_mb_s_min} and {window_mb_s_max}.",
    ),
    "seq-write-over-time": (
        "Sequential writes run at {throughput_before_mb_s} for {cliff_bytes} ({cliff_pct_of_capacity} of the "
        "capacity), then fall to {throughput_after_mb_s}: the write cliff.",
        "Sequential writes run at {mb_s} with no cliff in the bytes written.",
    ),
    "random-fill": (
        ("Filling the drive with random 4 KiB writes runs at {early_mb_s} early and {late_mb_s} late "
         "({slowdown_ratio} slower), with write amplification {write_amplification}.",
         lambda v: v["slowdown_ratio"] >= 1.05),
        ("Filling the drive with random 4 KiB writes runs at {early_mb_s} early and {late_mb_s} late "
         "({slowdown_ratio} slower).", lambda v: v["slowdown_ratio"] >= 1.05),
        "Filling the drive with random 4 KiB writes runs at {early_mb_s} early and {late_mb_s} late.",
        "Filling the drive with random 4 KiB writes runs at {mb_s}.",
    ),
    "data-dependence": (
        "The written data changes the speed by at most {pattern_ratio_empty} (empty drive) and "
        "{pattern_ratio_full} (full drive); Write Zeroes runs at {write_zeroes_vs_zeros_full} the rate of "
        "writing zeroes.",
        "The written data changes the speed by at most {pattern_ratio_empty} on the empty drive.",
    ),
    "working-set": (
        "4 KiB random reads take {read_lat_mean_us_smallest} over the smallest working set and "
        "{read_lat_mean_us_full} over the whole span; the mapping-cache step comes at {read_latency_step_bytes}.",
        "4 KiB random reads take {read_lat_mean_us_smallest} over the smallest working set and "
        "{read_lat_mean_us_full} over the whole span: no mapping-cache step.",
    ),
    "burst-vs-steady": (
        ("4 KiB random writes at QD 32 start at {burst_iops} and settle at {steady_iops} after {drop_bytes}: the "
         "burst runs at {burst_to_steady_ratio} the steady rate.", lambda v: v["burst_to_steady_ratio"] >= 1.05),
        "4 KiB random writes at QD 32 run at {burst_iops} at first and {steady_iops} in the steady state.",
        "4 KiB random writes at QD 32 start at {burst_iops}.",
    ),
    "reset-behaviour": (
        "Reading recently written data takes {post_power_cycle_slowdown_recent} as long after a power cycle as "
        "before it, and {post_reset_slowdown_recent} as long after a controller reset.",
        "Reading resident data takes {post_reset_slowdown} as long after a controller reset as before it.",
    ),
    "trim-before-overwrite": (
        "Discarding a region before overwriting it makes the overwrite {overwrite_speedup} as fast; write "
        "amplification goes from {write_amplification_overwrite} to {write_amplification_trim_first}.",
        "Discarding a region before overwriting it makes the overwrite {overwrite_speedup} as fast.",
    ),
    "interleaved-vs-grouped": (
        "Interleaving reads and writes gives {interleaved_throughput_ratio_qd1} the throughput of grouping them "
        "at QD 1 and {interleaved_throughput_ratio_qd32} at QD 32.",
    ),
    "git-checkout": (
        "{checkouts} of tag after tag with a cold cache took {total_s} ({mean_checkout_s} each on average, the "
        "slowest {slowest_checkout_s}), {writeback_share} of it writing the changes back; in the traced checkout a "
        "read took {trace_read_q2c_mean_ms} from queue to completion on average and a write "
        "{trace_write_q2c_mean_ms}.",
        "{checkouts} of tag after tag with a cold cache took {total_s} ({mean_checkout_s} each on average).",
    ),
    "tree-traversal": (
        ("Reading the whole tree in inode order took {inode_s} against {directory_s} in directory order (as tar "
         "does), {inode_time_saved_share} less; in the data's physical order {physical_s}.",
         lambda v: v["inode_s"] < v["directory_s"]),
        "Reading the whole tree took {directory_s} in directory order (as tar does) and {inode_s} in inode order.",
    ),
}


def sentence(facts: Facts, experiment: str) -> str | None:
    entry = facts.experiments.get(experiment)
    if entry is None:
        return None
    for entry_template in TEMPLATES.get(experiment, ()):
        template, applies = entry_template if isinstance(entry_template, tuple) else (entry_template, None)
        names = [field for _, field, _, _ in string.Formatter().parse(template) if field]
        found = {name: facts.finding(experiment, name) for name in names}
        if all(e is not None for e in found.values()) and (
                applies is None or applies({name: e.value for name, e in found.items()})):
            return template.format(**{name: e.display for name, e in found.items()})
    listed = [e for name in list(entry.get("findings") or {})[:3] if (e := facts.finding(experiment, name))]
    if not listed:
        return None
    return "; ".join(f"{e.finding.replace('_', ' ')}: {e.display}" for e in listed) + "."
