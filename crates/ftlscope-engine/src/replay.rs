//! A recorded trace as the engine's request source: the requests, in order, and when each may go.
//!
//! The trace arrives as columns (arrival time, operation, offset, length), so a replay of millions of requests
//! never builds one object per request. The queue loop takes the requests from here instead of drawing them
//! from a workload, and paces them the way a rate limit is paced: a request not yet due is held back and the
//! loop waits (in virtual time on a simulated device) until it is.

use thiserror::Error;

use crate::workload::Op;

/// When a request of the trace may be issued.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Timing {
    /// At its recorded time.
    Faithful,
    /// At its recorded time divided by the factor (2: twice as fast).
    Scaled(f64),
    /// As soon as the queue depth allows.
    Afap,
}

/// How a replay keeps time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each request is due at its (scaled) arrival time, counted from the replay's start, whatever is still in
    /// flight; one that finds every slot busy goes late, and its issue lag says by how much.
    Open,
    /// Each request is due its (scaled) recorded gap after the previous one was issued, and needs a free slot;
    /// a flush waits for everything before it and holds back everything after it until it completes (the
    /// trace's sync points).
    Closed,
}

#[derive(Debug, Error, PartialEq)]
pub enum ReplayError {
    #[error("replay: {0}")]
    Invalid(String),
}

/// A trace to replay: one entry per request, in issue order.
#[derive(Clone, Debug)]
pub struct Replay {
    /// When each request is due, in ns from the first one, already scaled by the timing (all 0 for `afap`).
    pub due_ns: Vec<u64>,
    pub op: Vec<Op>,
    pub offset: Vec<u64>,
    pub len: Vec<u32>,
    pub mode: Mode,
}

impl Replay {
    /// Build from columns; `op` holds the indices of [`Op::ALL`]. Arrival times must not go backwards.
    pub fn new(
        arrival_ns: &[u64],
        op: &[u8],
        offset: &[u64],
        len: &[u32],
        timing: Timing,
        mode: Mode,
    ) -> Result<Replay, ReplayError> {
        let n = arrival_ns.len();
        if op.len() != n || offset.len() != n || len.len() != n {
            return Err(ReplayError::Invalid(format!(
                "columns of different lengths (arrival {n}, op {}, offset {}, length {})",
                op.len(),
                offset.len(),
                len.len()
            )));
        }
        if n == 0 {
            return Err(ReplayError::Invalid("the trace holds no requests".into()));
        }
        if let Some(i) = op.iter().position(|&o| o as usize >= Op::ALL.len()) {
            return Err(ReplayError::Invalid(format!("request {} has operation code {}", i + 1, op[i])));
        }
        if let Some(i) = arrival_ns.windows(2).position(|w| w[1] < w[0]) {
            return Err(ReplayError::Invalid(format!("arrival times go backwards at request {}", i + 2)));
        }
        if let Timing::Scaled(factor) = timing {
            if !(factor > 0.0 && factor.is_finite()) {
                return Err(ReplayError::Invalid(format!("the time scale must be a positive number, not {factor}")));
            }
        }
        let first = arrival_ns[0];
        let span = arrival_ns[n - 1] - first;
        let scaled_span = match timing {
            Timing::Scaled(factor) => span as f64 / factor,
            _ => span as f64,
        };
        // Due times are added to clock readings: keep them far from u64's end (2^62 ns is 146 years).
        if scaled_span >= (1u64 << 62) as f64 {
            return Err(ReplayError::Invalid(format!(
                "the replay would last {:.3e} s; give a larger time scale",
                scaled_span / 1e9
            )));
        }
        let due_ns = arrival_ns
            .iter()
            .map(|&t| match timing {
                Timing::Faithful => t - first,
                // Rounded to the nearest ns; f64 holds every gap below 104 days exactly.
                Timing::Scaled(factor) => ((t - first) as f64 / factor).round() as u64,
                Timing::Afap => 0,
            })
            .collect();
        Ok(Replay {
            due_ns,
            op: op.iter().map(|&o| Op::from_index(o)).collect(),
            offset: offset.to_vec(),
            len: len.to_vec(),
            mode,
        })
    }

    pub fn len(&self) -> usize {
        self.op.len()
    }

    pub fn is_empty(&self) -> bool {
        self.op.is_empty()
    }

    /// The largest request, in bytes (what the I/O buffers must hold).
    pub fn max_len(&self) -> u64 {
        self.len.iter().copied().max().unwrap_or(0) as u64
    }

    /// Whether the trace changes what the target holds.
    pub fn writes(&self) -> bool {
        self.op.iter().any(|op| op.modifies_data())
    }

    /// Check every request against a target of `target_size` bytes whose I/O must be aligned to `alignment`;
    /// the error names the first request that does not fit.
    pub fn validate(&self, target_size: u64, alignment: u64) -> Result<(), ReplayError> {
        for i in 0..self.len() {
            let (op, offset, len) = (self.op[i], self.offset[i], self.len[i] as u64);
            if !op.has_range() {
                continue;
            }
            let request = i + 1;
            if len == 0 {
                return Err(ReplayError::Invalid(format!("request {request} ({}) has length 0", op.name())));
            }
            if offset.checked_add(len).is_none_or(|end| end > target_size) {
                return Err(ReplayError::Invalid(format!(
                    "request {request} ({} of {len} B at byte {offset}) ends past the {target_size} B target",
                    op.name()
                )));
            }
            if alignment > 1 && (!offset.is_multiple_of(alignment) || !len.is_multiple_of(alignment)) {
                return Err(ReplayError::Invalid(format!(
                    "request {request} ({} of {len} B at byte {offset}) is not aligned to the target's {alignment} B \
                     block size (O_DIRECT)",
                    op.name()
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns() -> (Vec<u64>, Vec<u8>, Vec<u64>, Vec<u32>) {
        (vec![1_000, 1_000, 5_000, 11_000], vec![0, 1, 4, 0], vec![0, 4096, 0, 8192], vec![4096, 4096, 0, 4096])
    }

    #[test]
    fn due_times_count_from_the_first_request_and_scale() {
        let (t, op, off, len) = columns();
        let r = Replay::new(&t, &op, &off, &len, Timing::Faithful, Mode::Open).unwrap();
        assert_eq!(r.due_ns, vec![0, 0, 4_000, 10_000]);
        assert_eq!(r.op, vec![Op::Read, Op::Write, Op::Flush, Op::Read]);
        let r = Replay::new(&t, &op, &off, &len, Timing::Scaled(2.0), Mode::Open).unwrap();
        assert_eq!(r.due_ns, vec![0, 0, 2_000, 5_000]);
        let r = Replay::new(&t, &op, &off, &len, Timing::Afap, Mode::Closed).unwrap();
        assert_eq!(r.due_ns, vec![0; 4]);
        assert!(r.writes());
        assert_eq!(r.max_len(), 4096);
    }

    #[test]
    fn bad_columns_are_refused_with_the_request() {
        let (mut t, op, off, len) = columns();
        t[2] = 500;
        let err = Replay::new(&t, &op, &off, &len, Timing::Faithful, Mode::Open).unwrap_err();
        assert!(err.to_string().contains("backwards at request 3"), "{err}");
        let err = Replay::new(&[], &[], &[], &[], Timing::Afap, Mode::Closed).unwrap_err();
        assert!(err.to_string().contains("no requests"), "{err}");
        let (t, op, off, len) = columns();
        let err = Replay::new(&t, &op[..3], &off, &len, Timing::Afap, Mode::Closed).unwrap_err();
        assert!(err.to_string().contains("different lengths"), "{err}");
        let err = Replay::new(&t, &[0, 9, 0, 0], &off, &len, Timing::Afap, Mode::Closed).unwrap_err();
        assert!(err.to_string().contains("operation code 9"), "{err}");
        let err = Replay::new(&t, &op, &off, &len, Timing::Scaled(0.0), Mode::Open).unwrap_err();
        assert!(err.to_string().contains("positive"), "{err}");
        let err = Replay::new(&t, &op, &off, &len, Timing::Scaled(1e-300), Mode::Open).unwrap_err();
        assert!(err.to_string().contains("larger time scale"), "{err}");
        let far = [0, u64::MAX];
        let err = Replay::new(&far, &op[..2], &off[..2], &len[..2], Timing::Faithful, Mode::Open).unwrap_err();
        assert!(err.to_string().contains("larger time scale"), "{err}");
    }

    #[test]
    fn validation_names_the_first_request_that_does_not_fit() {
        let (t, op, off, len) = columns();
        let r = Replay::new(&t, &op, &off, &len, Timing::Faithful, Mode::Open).unwrap();
        assert!(r.validate(1 << 20, 4096).is_ok());
        let err = r.validate(8192, 512).unwrap_err();
        assert!(err.to_string().contains("request 4 (read of 4096 B at byte 8192) ends past"), "{err}");
        let err = r.validate(1 << 20, 8192).unwrap_err();
        assert!(err.to_string().contains("request 1") && err.to_string().contains("aligned"), "{err}");
        // Offsets near u64::MAX do not overflow (the debug build would panic).
        let r = Replay::new(&[0], &[0], &[u64::MAX - 10], &[4096], Timing::Afap, Mode::Closed).unwrap();
        assert!(r.validate(1 << 20, 1).unwrap_err().to_string().contains("ends past"));
    }
}
