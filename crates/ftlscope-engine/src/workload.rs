//! The one description of a workload, shared by Rust and Python through JSON.
//!
//! Every field has a default except what the experiment must decide; `Workload::validate` checks the
//! description against the target it will run on and names the offending field in its error.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// An operation the engine can issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Op {
    Read = 0,
    Write = 1,
    Trim = 2,
    WriteZeroes = 3,
    Flush = 4,
}

impl Op {
    pub const ALL: [Op; 5] = [Op::Read, Op::Write, Op::Trim, Op::WriteZeroes, Op::Flush];

    /// The key used for this operation in summaries ("read", "write", "trim", "write_zeroes", "flush").
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Trim => "trim",
            Op::WriteZeroes => "write_zeroes",
            Op::Flush => "flush",
        }
    }

    pub fn from_index(i: u8) -> Op {
        Op::ALL[i as usize]
    }

    /// Whether the operation changes what the device holds.
    pub fn modifies_data(self) -> bool {
        matches!(self, Op::Write | Op::Trim | Op::WriteZeroes)
    }

    /// Whether the operation carries a byte range (flush does not).
    pub fn has_range(self) -> bool {
        !matches!(self, Op::Flush)
    }
}

/// Relative weights of the operations, e.g. read 70 / write 30. Operations left out weigh 0; a workload
/// without any mix reads only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpMix {
    #[serde(default)]
    pub read: u32,
    #[serde(default)]
    pub write: u32,
    #[serde(default)]
    pub trim: u32,
    #[serde(default)]
    pub write_zeroes: u32,
    #[serde(default)]
    pub flush: u32,
}

impl Default for OpMix {
    fn default() -> Self {
        OpMix { read: 100, write: 0, trim: 0, write_zeroes: 0, flush: 0 }
    }
}

impl OpMix {
    pub fn weight(&self, op: Op) -> u32 {
        match op {
            Op::Read => self.read,
            Op::Write => self.write,
            Op::Trim => self.trim,
            Op::WriteZeroes => self.write_zeroes,
            Op::Flush => self.flush,
        }
    }

    pub fn total(&self) -> u64 {
        Op::ALL.iter().map(|&op| self.weight(op) as u64).sum()
    }

    pub fn writes(&self) -> bool {
        Op::ALL.iter().any(|&op| op.modifies_data() && self.weight(op) > 0)
    }
}

/// Where the next request goes, within the workload's range.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Pattern {
    // Empty struct variants rather than unit variants: serde ignores unknown fields on unit variants of an
    // internally tagged enum, and `{"kind": "sequential", "stride": 4096}` must be refused.
    /// One request after the other; wraps at the end of the range.
    Sequential {},
    /// Uniformly random, aligned to the smallest request size.
    Random {},
    /// A random permutation of the range's blocks: each block once per pass.
    Permutation {},
    /// Sequential order, shuffled inside consecutive windows of `window` requests (seed 000 §3.3.3).
    PermutedWindows { window: u32 },
    /// Offsets `k * stride` (modulo the range length) for k = 0, 1, 2, ...
    Strided { stride: u64 },
    /// The given byte offsets (relative to the range start) in this order, again from the first after the
    /// last: a probe that needs an order no walk gives (P5's batches that never reread a unit one batch later).
    Offsets { offsets: Vec<u64> },
    /// `hot_share` of the requests fall uniformly in `[hot_start, hot_start + hot_length)` (relative to the
    /// range start), the rest uniformly in the remainder of the range.
    HotSet { hot_start: u64, hot_length: u64, hot_share: f64 },
    /// Zipf-distributed block popularity with exponent `theta`; popular blocks are scattered over the range.
    Zipf { theta: f64 },
}

impl Pattern {
    /// Whether each queue walks its own share of the range (sequential, permuted and strided walks), rather
    /// than drawing offsets over the whole range independently of the other queues.
    pub fn splits_range(&self) -> bool {
        matches!(
            self,
            Pattern::Sequential {}
                | Pattern::Permutation {}
                | Pattern::PermutedWindows { .. }
                | Pattern::Strided { .. }
        )
    }
}

impl Default for Pattern {
    fn default() -> Self {
        Pattern::Sequential {}
    }
}

/// The byte range the workload runs in. `length = 0` means "to the end of the target".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Range {
    pub start: u64,
    pub length: u64,
}

/// Batch mode: issue `size` requests at once, wait for all of them, idle for `idle_ns`, repeat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    pub size: u32,
    #[serde(default)]
    pub idle_ns: u64,
}

/// When a run stops: whichever limit comes first. All zero = run until stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Stop {
    pub ops: u64,
    pub bytes: u64,
    pub time_ns: u64,
}

/// Requests excluded from the results at the start of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Warmup {
    pub ops: u64,
    pub time_ns: u64,
}

/// What written data looks like. Compressing or deduplicating drives care (seed 000 §3.3.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DataPattern {
    Zeros,
    Ones,
    #[serde(rename = "0xaa")]
    Alternating,
    /// Every 512-byte sector starts with its byte offset / 512 (its LBA at 512 B) and the run's seed.
    LbaStamped,
    /// Every 512-byte sector carries a verifiable stamp: its LBA, the run's `verify_tag`, the write's
    /// generation and a CRC-32C (see `verify`).
    Verify,
    /// Incompressible pseudo-random bytes, different for every request.
    #[default]
    Random,
}

/// A limit per direction, as fio's comma form `rate=READ,WRITE,TRIM` gives it; 0 means no limit. Writes
/// and Write Zeroes share the write limit; flushes are never held back (they move no data).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct DirectionLimits {
    pub read: u64,
    pub write: u64,
    pub trim: u64,
}

impl DirectionLimits {
    /// The limit that applies to `op` (0: none).
    pub fn of(&self, op: Op) -> u64 {
        match op {
            Op::Read => self.read,
            Op::Write | Op::WriteZeroes => self.write,
            Op::Trim => self.trim,
            Op::Flush => 0,
        }
    }

    pub fn any(&self) -> bool {
        self.read > 0 || self.write > 0 || self.trim > 0
    }
}

/// Submission pacing, as fio's `rate` and `rate_iops`: the whole run's limit, split evenly over its queues.
/// A request is held back until its direction's schedule allows it (the k-th byte or request of a direction
/// may go at k / limit seconds after the run started); it is stamped when it is submitted, so the time it
/// was held back is not part of its latency, as in fio, whose completion latency starts at submission.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Rate {
    pub bytes_per_s: DirectionLimits,
    pub iops: DirectionLimits,
}

impl Rate {
    pub fn limited(&self) -> bool {
        self.bytes_per_s.any() || self.iops.any()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    #[serde(default)]
    pub mix: OpMix,
    /// Request sizes in bytes; with several, each request picks one at random (seeded).
    #[serde(default = "default_sizes")]
    pub sizes: Vec<u64>,
    #[serde(default)]
    pub pattern: Pattern,
    #[serde(default)]
    pub range: Range,
    /// Added to every offset (to test misaligned access).
    #[serde(default)]
    pub align_offset: u64,
    #[serde(default = "one")]
    pub queue_depth: u32,
    /// Number of queues, each its own thread and ring.
    #[serde(default = "one")]
    pub queues: u32,
    #[serde(default)]
    pub batch: Option<Batch>,
    #[serde(default)]
    pub stop: Stop,
    #[serde(default)]
    pub warmup: Warmup,
    #[serde(default)]
    pub data: DataPattern,
    /// Submission pacing (fio's `rate` / `rate_iops`); no limit by default.
    #[serde(default)]
    pub rate: Rate,
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// With `data: verify`, the tag that tells this run's stamps from another run's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub verify_tag: u64,
}

fn default_sizes() -> Vec<u64> {
    vec![4096]
}
fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}
fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Default for Workload {
    fn default() -> Self {
        serde_json::from_str("{}").expect("the empty workload parses")
    }
}

/// A workload field that does not fit the target; the message names the field.
#[derive(Debug, Error, PartialEq)]
pub enum WorkloadError {
    #[error("workload field `{field}`: {problem}")]
    Invalid { field: &'static str, problem: String },
    #[error("workload JSON: {0}")]
    Json(String),
}

fn invalid(field: &'static str, problem: impl Into<String>) -> WorkloadError {
    WorkloadError::Invalid { field, problem: problem.into() }
}

impl Workload {
    pub fn from_json(text: &str) -> Result<Workload, WorkloadError> {
        serde_json::from_str(text).map_err(|e| WorkloadError::Json(e.to_string()))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a workload always serialises")
    }

    pub fn min_size(&self) -> u64 {
        self.sizes.iter().copied().min().unwrap_or(0)
    }

    pub fn max_size(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(0)
    }

    /// The requests in flight per queue: the batch size in batch mode, else the queue depth.
    pub fn inflight_per_queue(&self) -> u32 {
        self.batch.as_ref().map_or(self.queue_depth, |b| b.size)
    }

    /// The absolute byte range `[start, end)` for a target of `target_size` bytes.
    pub fn resolved_range(&self, target_size: u64) -> (u64, u64) {
        let end = if self.range.length == 0 { target_size } else { self.range.start.saturating_add(self.range.length) };
        (self.range.start, end)
    }

    /// Check the workload against a target of `target_size` bytes whose I/O must be aligned to `alignment`.
    pub fn validate(&self, target_size: u64, alignment: u64) -> Result<(), WorkloadError> {
        if self.mix.total() == 0 {
            return Err(invalid("mix", "every weight is zero; give at least one operation a weight"));
        }
        if self.sizes.is_empty() || self.sizes.contains(&0) {
            return Err(invalid("sizes", "request sizes must be non-empty and above zero"));
        }
        for &size in &self.sizes {
            if alignment > 1 && !size.is_multiple_of(alignment) {
                return Err(invalid(
                    "sizes",
                    format!("{size} B is not a multiple of the target's {alignment} B block size (O_DIRECT)"),
                ));
            }
            if size > u32::MAX as u64 {
                return Err(invalid("sizes", format!("{size} B is larger than 4 GiB")));
            }
        }
        if alignment > 1 && !self.align_offset.is_multiple_of(alignment) {
            return Err(invalid(
                "align_offset",
                format!("{} B is not a multiple of the target's {alignment} B block size", self.align_offset),
            ));
        }
        if alignment > 1 && !self.range.start.is_multiple_of(alignment) {
            return Err(invalid("range.start", format!("not a multiple of the {alignment} B block size")));
        }
        if self.queue_depth == 0 {
            return Err(invalid("queue_depth", "must be at least 1"));
        }
        if self.queue_depth > 65536 {
            return Err(invalid("queue_depth", "must be at most 65536"));
        }
        if self.queues == 0 || self.queues > 256 {
            return Err(invalid("queues", "must be between 1 and 256"));
        }
        if let Some(batch) = &self.batch {
            if batch.size == 0 || batch.size > 65536 {
                return Err(invalid("batch.size", "must be between 1 and 65536"));
            }
        }
        if self.batch.is_some() && self.rate.limited() {
            return Err(invalid("rate", "batch mode sets its own pace (batch and idle gap); drop one of the two"));
        }
        let (start, end) = self.resolved_range(target_size);
        if end > target_size {
            return Err(invalid("range", format!("ends at byte {end}, past the end of the {target_size} B target")));
        }
        let usable = end.saturating_sub(start).saturating_sub(self.align_offset);
        let per_queue = usable / self.queues as u64;
        if per_queue < self.max_size() {
            return Err(invalid(
                "range",
                format!(
                    "{usable} B shared by {} queue(s) leaves less than one {} B request each",
                    self.queues,
                    self.max_size()
                ),
            ));
        }
        match &self.pattern {
            Pattern::PermutedWindows { window } if *window < 1 || *window > 4096 => {
                return Err(invalid("pattern.window", "must be between 1 and 4096"));
            }
            Pattern::Strided { stride } if *stride == 0 || (alignment > 1 && !stride.is_multiple_of(alignment)) => {
                return Err(invalid("pattern.stride", "must be a non-zero multiple of the block size"));
            }
            Pattern::Offsets { offsets } if offsets.is_empty() => {
                return Err(invalid("pattern.offsets", "must list at least one offset"));
            }
            Pattern::Offsets { offsets } if offsets.iter().any(|o| alignment > 1 && !o.is_multiple_of(alignment)) => {
                return Err(invalid("pattern.offsets", "every offset must be a multiple of the block size"));
            }
            Pattern::HotSet { hot_start, hot_length, hot_share } => {
                if !(0.0..=1.0).contains(hot_share) {
                    return Err(invalid("pattern.hot_share", "must be between 0 and 1"));
                }
                if *hot_length < self.max_size() || hot_start + hot_length > end - start {
                    return Err(invalid(
                        "pattern.hot_length",
                        "the hot set must hold one request and lie inside the range",
                    ));
                }
            }
            Pattern::Zipf { theta } if !(*theta > 0.0 && theta.is_finite()) => {
                return Err(invalid("pattern.theta", "must be a positive number"));
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_json_gives_the_documented_defaults() {
        let w = Workload::from_json("{}").unwrap();
        assert_eq!(w.mix, OpMix::default());
        assert_eq!(w.sizes, vec![4096]);
        assert_eq!(w.pattern, Pattern::Sequential {});
        assert_eq!(w.queue_depth, 1);
        assert_eq!(w.queues, 1);
        assert_eq!(w.data, DataPattern::Random);
    }

    #[test]
    fn json_round_trips() {
        let w = Workload::from_json(r#"{"mix":{"write":100}}"#).unwrap();
        assert_eq!(w.mix.read, 0, "operations left out of a mix weigh nothing");
        let text = r#"{"mix":{"read":70,"write":30},"sizes":[4096,8192],
            "pattern":{"kind":"permuted_windows","window":4},"range":{"start":4096,"length":1048576},
            "queue_depth":8,"queues":2,"batch":{"size":8,"idle_ns":1000},"stop":{"ops":100},
            "warmup":{"ops":10},"data":"0xaa","seed":7,"rate":{"bytes_per_s":{"read":1000000},"iops":{"write":50}}}"#;
        let w = Workload::from_json(text).unwrap();
        assert_eq!(w.mix.read, 70);
        assert_eq!(w.mix.write, 30);
        assert_eq!(w.pattern, Pattern::PermutedWindows { window: 4 });
        assert_eq!(w.data, DataPattern::Alternating);
        assert_eq!(w.rate.bytes_per_s.of(Op::Read), 1_000_000);
        assert_eq!(w.rate.iops.of(Op::WriteZeroes), 50, "Write Zeroes share the write limit");
        assert_eq!(w.rate.iops.of(Op::Flush), 0, "flushes are never held back");
        let again = Workload::from_json(&w.to_json()).unwrap();
        assert_eq!(w, again);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = Workload::from_json(r#"{"queue_dpeth": 4}"#).unwrap_err();
        assert!(err.to_string().contains("queue_dpeth"), "{err}");
        let err = Workload::from_json(r#"{"pattern": {"kind": "sequential", "stride": 4096}}"#).unwrap_err();
        assert!(err.to_string().contains("stride"), "{err}");
    }

    #[test]
    fn validation_names_the_field() {
        let mut w = Workload { sizes: vec![1000], ..Workload::default() };
        let err = w.validate(1 << 20, 512).unwrap_err();
        assert!(err.to_string().contains("`sizes`"), "{err}");
        w.sizes = vec![4096];
        w.range = Range { start: 0, length: 2 << 20 };
        let err = w.validate(1 << 20, 512).unwrap_err();
        assert!(err.to_string().contains("`range`"), "{err}");
        w.range = Range::default();
        w.mix = OpMix { read: 0, ..OpMix::default() };
        assert!(w.validate(1 << 20, 512).unwrap_err().to_string().contains("`mix`"));
    }

    #[test]
    fn writes_are_detected_from_the_mix() {
        assert!(!OpMix::default().writes());
        assert!(OpMix { trim: 1, ..OpMix::default() }.writes());
        assert!(!OpMix { read: 0, flush: 1, ..OpMix::default() }.writes());
    }
}
