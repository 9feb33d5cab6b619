//! A recorded trace as the engine's request source: the requests, in order, and when each may go.
//!
//! The trace arrives as columns (arrival time, operation, offset, length), so a replay of millions of requests
//! never builds one object per request. The queue loop takes the requests from here instead of drawing them
//! from a workload, and paces them the way a rate limit is paced: a request not yet due is held back and the
//! loop waits (in virtual time on a simulated device) until it is.
//!
//! A trace too long to hold arrives while it runs instead ([`Replay::streamed`]): the caller reads it in batches
//! and pushes each through a [`Feeder`] into one of a few recycled chunks, which the queue takes in order through
//! a [`Cursor`]. Memory stays flat in the trace's length; the checks a whole trace gets up front are made on each
//! chunk as it is pushed (the caller has checked the whole trace in a first pass, so they do not fail there).
//!
//! A whole trace may be split over several queues ([`Replay::split`]): each queue issues its share in trace
//! order, every due time still counted from the trace's first request and from one start shared by the queues
//! ([`Replay::anchor`]), so together they keep the trace's timing.
//!
//! A streamed trace split over several queues ([`Replay::streamed_split`]) has one feeder and one cursor per
//! queue, each with chunks of its own: the caller has already split the trace by queue (one spill file each), so
//! no queue ever waits for a chunk another queue still holds. That is what makes it safe on a simulated drive,
//! where one thread steps every queue: a queue that needs its next chunk waits only for its own feeder, which
//! waits for nothing but room in that queue's chunks. (One window of chunks shared by the queues would deadlock
//! there as soon as the queues drift a window apart in trace order; see docs/traces.md.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

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

/// A trace to replay: one entry per request, in issue order (all of them here, or arriving through `stream`).
#[derive(Debug)]
pub struct Replay {
    /// When each request is due, in ns from the first one, already scaled by the timing (all 0 for `afap`).
    pub due_ns: Vec<u64>,
    pub op: Vec<Op>,
    pub offset: Vec<u64>,
    pub len: Vec<u32>,
    pub mode: Mode,
    /// A streamed replay: the columns above stay empty.
    pub stream: Option<Stream>,
    /// A trace split over several queues: queue q's requests are `parts[q].0..parts[q].1` of the columns
    /// (empty: one queue takes them all).
    parts: Vec<(usize, usize)>,
    /// The clock reading the open-loop due times count from: the first queue to issue sets it, the others
    /// take it (`UNSET` until then).
    anchor: AtomicU64,
}

/// No queue has issued yet (a virtual clock may read 0 at the start, so 0 cannot mean that).
const UNSET: u64 = u64::MAX;

/// What is known of a streamed trace before it runs (from the caller's first pass), and the queue's end of
/// the chunk channels until the queue takes it.
#[derive(Debug)]
pub struct Stream {
    /// Each queue's requests (one entry: the trace is not split).
    requests: Vec<u64>,
    max_len: u64,
    ops: [bool; Op::ALL.len()],
    /// The target the caller checked the requests against (size, alignment): the engine checks it has that.
    target: (u64, u64),
    /// Each queue's cursor, until its queue takes it.
    ends: Vec<Mutex<Option<Cursor>>>,
}

/// Up to this many chunks wait filled for the queue (plus the one it reads and the one being filled).
const CHUNKS_AHEAD: usize = 2;

/// One batch of a streamed trace, as the queue reads it (the storage is recycled between batches).
#[derive(Debug, Default)]
struct Chunk {
    due_ns: Vec<u64>,
    op: Vec<Op>,
    offset: Vec<u64>,
    len: Vec<u32>,
}

/// The queue's end of a streamed trace: the requests in order, chunk after chunk.
#[derive(Debug)]
pub struct Cursor {
    current: Chunk,
    pos: usize,
    full: Receiver<Chunk>,
    empty: SyncSender<Chunk>,
}

/// The requests (operation, offset, length, due time) in order, each waiting for its chunk if the feeder is
/// behind; None at the trace's end (the feeder finished, or gave up).
impl Iterator for Cursor {
    type Item = (Op, u64, u32, u64);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos == self.current.op.len() {
            let next = self.full.recv().ok()?;
            let done = std::mem::replace(&mut self.current, next);
            // Back to the feeder for reuse; a feeder that is gone needs it no more.
            let _ = self.empty.try_send(done);
            self.pos = 0;
            if self.current.op.is_empty() {
                return None;
            }
        }
        let i = self.pos;
        self.pos += 1;
        Some((self.current.op[i], self.current.offset[i], self.current.len[i], self.current.due_ns[i]))
    }
}

/// The caller's end of a streamed trace (see [`Replay::streamed`]).
#[derive(Debug)]
pub struct Feeder {
    full: SyncSender<Chunk>,
    empty: Receiver<Chunk>,
    /// A chunk taken for a batch that was refused: the next batch uses it (chunks are few and never made anew).
    spare: Option<Chunk>,
    timing: Timing,
    /// Whether `first` is known before the first push (a split trace: the trace's first request, which may be
    /// on another queue); else the first request pushed sets it.
    anchored: bool,
    first: u64,
    last: u64,
    pushed: u64,
    requests: u64,
    ops: [bool; Op::ALL.len()],
    max_len: u64,
    target: (u64, u64),
}

/// Little-endian values from column bytes (numpy's `tobytes()` on the machines ftlscope runs on).
fn le_values<'a, const N: usize>(
    name: &str,
    bytes: &'a [u8],
) -> Result<impl Iterator<Item = [u8; N]> + 'a, ReplayError> {
    if !bytes.len().is_multiple_of(N) {
        return Err(ReplayError::Invalid(format!(
            "column {name}: {} bytes is not a whole number of values",
            bytes.len()
        )));
    }
    Ok(bytes.chunks_exact(N).map(|c| c.try_into().expect("N bytes")))
}

impl Feeder {
    /// Push the next batch of requests (columns as little-endian bytes: arrival u64 ns, op u8, offset u64,
    /// length u32), waiting for a free chunk. Ok(false) when the replay has ended and takes no more (stopped
    /// early); an error names the first request that breaks what the first pass promised.
    pub fn push(&mut self, arrival: &[u8], op: &[u8], offset: &[u8], len: &[u8]) -> Result<bool, ReplayError> {
        let n = op.len();
        if n == 0 {
            return Ok(true); // (an empty chunk would read as the trace's end)
        }
        if arrival.len() != n * 8 || offset.len() != n * 8 || len.len() != n * 4 {
            return Err(ReplayError::Invalid(format!(
                "a batch's columns differ in length (arrival {} B, op {n} B, offset {} B, length {} B)",
                arrival.len(),
                offset.len(),
                len.len()
            )));
        }
        if self.pushed + n as u64 > self.requests {
            return Err(ReplayError::Invalid(format!("more requests than the {} announced", self.requests)));
        }
        let mut chunk = match self.spare.take() {
            Some(chunk) => chunk,
            None => match self.empty.recv() {
                Ok(chunk) => chunk,
                Err(_) => return Ok(false),
            },
        };
        let filled = self.fill(&mut chunk, arrival, op, offset, len);
        if let Err(e) = filled {
            self.spare = Some(chunk);
            return Err(e);
        }
        self.pushed += n as u64;
        Ok(self.full.send(chunk).is_ok())
    }

    /// Fill `chunk` with a batch, checking each request; the feeder's arrival times move on only when the whole
    /// batch is good.
    fn fill(
        &mut self,
        chunk: &mut Chunk,
        arrival: &[u8],
        op: &[u8],
        offset: &[u8],
        len: &[u8],
    ) -> Result<(), ReplayError> {
        chunk.due_ns.clear();
        chunk.op.clear();
        chunk.offset.clear();
        chunk.len.clear();
        let (size, alignment) = self.target;
        let (mut first, mut last) = (self.first, self.last);
        let values = le_values::<8>("arrival", arrival)?
            .zip(op)
            .zip(le_values::<8>("offset", offset)?)
            .zip(le_values::<4>("length", len)?);
        for (k, (((t, &code), off), l)) in values.enumerate() {
            let (t, off, l) = (u64::from_le_bytes(t), u64::from_le_bytes(off), u32::from_le_bytes(l));
            let request = self.pushed + k as u64 + 1;
            let bad = |problem: String| Err(ReplayError::Invalid(format!("request {request}: {problem}")));
            if code as usize >= Op::ALL.len() || !self.ops[code as usize] {
                return bad(format!("operation code {code} was not announced"));
            }
            if !self.anchored && self.pushed + (k as u64) == 0 {
                (first, last) = (t, t);
            }
            if t < last {
                return bad("arrival time goes backwards".into());
            }
            last = t;
            let op = Op::from_index(code);
            if op.has_range() {
                let end = off.checked_add(l as u64);
                if l as u64 > self.max_len || end.is_none_or(|e| e > size) {
                    return bad(format!("{} of {l} B at byte {off} does not fit the announced trace", op.name()));
                }
                if alignment > 1 && (!off.is_multiple_of(alignment) || !(l as u64).is_multiple_of(alignment)) {
                    return bad(format!("{} of {l} B at byte {off} is not aligned to {alignment} B", op.name()));
                }
            }
            chunk.due_ns.push(due(self.timing, t - first));
            chunk.op.push(op);
            chunk.offset.push(off);
            chunk.len.push(l);
        }
        (self.first, self.last) = (first, last);
        Ok(())
    }

    /// Requests pushed so far.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }
}

/// A request's due time from its arrival since the trace's first, by the timing.
fn due(timing: Timing, since_first: u64) -> u64 {
    match timing {
        Timing::Faithful => since_first,
        // Rounded to the nearest ns; f64 holds every gap below 104 days exactly.
        Timing::Scaled(factor) => (since_first as f64 / factor).round() as u64,
        Timing::Afap => 0,
    }
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
        let due_ns = arrival_ns.iter().map(|&t| due(timing, t - first)).collect();
        Ok(Replay {
            due_ns,
            op: op.iter().map(|&o| Op::from_index(o)).collect(),
            offset: offset.to_vec(),
            len: len.to_vec(),
            mode,
            stream: None,
            parts: Vec::new(),
            anchor: AtomicU64::new(UNSET),
        })
    }

    /// The same trace split over `queues` queues: request i goes to queue `queue_of[i]`. Each queue keeps its
    /// requests in trace order and their due times (counted from the trace's first request); in closed mode a
    /// queue's gaps and sync points are those between its own requests. Only a whole trace splits.
    pub fn split(self, queue_of: &[u16], queues: u32) -> Result<Replay, ReplayError> {
        let invalid = |problem: String| Err(ReplayError::Invalid(problem));
        if self.stream.is_some() {
            return invalid("a streamed trace replays on one queue".into());
        }
        if queues == 0 || queues > u16::MAX as u32 + 1 {
            return invalid(format!("{queues} queues: give 1 to {}", u16::MAX as u32 + 1));
        }
        if queue_of.len() != self.op.len() {
            return invalid(format!("{} queue numbers for {} requests", queue_of.len(), self.op.len()));
        }
        if let Some(i) = queue_of.iter().position(|&q| q as u32 >= queues) {
            return invalid(format!("request {} goes to queue {}, of {queues}", i + 1, queue_of[i]));
        }
        // A stable counting sort: each queue's requests together, in trace order.
        let mut next = vec![0usize; queues as usize];
        for &q in queue_of {
            next[q as usize] += 1;
        }
        let mut parts = Vec::with_capacity(queues as usize);
        let mut start = 0;
        for count in next.iter_mut() {
            parts.push((start, start + *count));
            (start, *count) = (start + *count, start);
        }
        let mut order = vec![0usize; queue_of.len()];
        for (i, &q) in queue_of.iter().enumerate() {
            order[next[q as usize]] = i;
            next[q as usize] += 1;
        }
        Ok(Replay {
            due_ns: order.iter().map(|&i| self.due_ns[i]).collect(),
            op: order.iter().map(|&i| self.op[i]).collect(),
            offset: order.iter().map(|&i| self.offset[i]).collect(),
            len: order.iter().map(|&i| self.len[i]).collect(),
            parts,
            ..self
        })
    }

    /// How many queues the trace is split over.
    pub fn queues(&self) -> u32 {
        match &self.stream {
            Some(s) => s.requests.len() as u32,
            None => self.parts.len().max(1) as u32,
        }
    }

    /// Queue `queue`'s requests: a range of the columns (a whole trace).
    #[inline]
    pub fn part(&self, queue: u32) -> (usize, usize) {
        match self.parts.get(queue as usize) {
            Some(&range) => range,
            None if self.parts.is_empty() => (0, self.op.len()),
            None => (0, 0),
        }
    }

    /// How many requests queue `queue` issues.
    pub fn part_len(&self, queue: u32) -> u64 {
        match &self.stream {
            Some(s) => s.requests.get(queue as usize).copied().unwrap_or(0),
            None => {
                let (start, end) = self.part(queue);
                (end - start) as u64
            }
        }
    }

    /// The last request's due time (a whole trace; None for a streamed one).
    pub fn last_due_ns(&self) -> Option<u64> {
        self.due_ns.iter().copied().max()
    }

    /// The clock reading open-loop due times count from: `now` for the first queue to ask, the same for every
    /// queue after it (one atomic operation, once per queue and run).
    pub fn anchor(&self, now: u64) -> u64 {
        match self.anchor.compare_exchange(UNSET, now, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => now,
            Err(set) => set,
        }
    }

    /// A replay whose requests are pushed through the returned [`Feeder`] while it runs. The caller has read
    /// the whole trace once and announces what it found: `requests` in all, the largest length, the operation
    /// codes present, and the target (size, alignment) every request was checked to fit. A trace's span is
    /// checked by the caller too (see [`Replay::new`]'s limit).
    pub fn streamed(
        requests: u64,
        max_len: u64,
        ops: &[u8],
        target: (u64, u64),
        timing: Timing,
        mode: Mode,
    ) -> Result<(Replay, Feeder), ReplayError> {
        let (replay, mut feeders) = Replay::streamed_split(&[requests], None, max_len, ops, target, timing, mode)?;
        Ok((replay, feeders.pop().expect("one feeder")))
    }

    /// A streamed replay split over `queue_requests.len()` queues, queue q issuing `queue_requests[q]` requests
    /// pushed through the q-th [`Feeder`] returned (each with chunks of its own: see the module's docs). Due
    /// times count from `origin`, the arrival of the trace's first request (on whichever queue; None: the
    /// first pushed, for one queue). A queue with no requests ends as soon as its feeder is dropped.
    pub fn streamed_split(
        queue_requests: &[u64],
        origin: Option<u64>,
        max_len: u64,
        ops: &[u8],
        target: (u64, u64),
        timing: Timing,
        mode: Mode,
    ) -> Result<(Replay, Vec<Feeder>), ReplayError> {
        let queues = queue_requests.len();
        if queues == 0 || queues > u16::MAX as usize + 1 {
            return Err(ReplayError::Invalid(format!("{queues} queues: give 1 to {}", u16::MAX as u32 + 1)));
        }
        if queue_requests.iter().sum::<u64>() == 0 {
            return Err(ReplayError::Invalid("the trace holds no requests".into()));
        }
        if queues > 1 && origin.is_none() {
            return Err(ReplayError::Invalid("a trace split over queues needs its first arrival".into()));
        }
        if let Timing::Scaled(factor) = timing {
            if !(factor > 0.0 && factor.is_finite()) {
                return Err(ReplayError::Invalid(format!("the time scale must be a positive number, not {factor}")));
            }
        }
        let mut present = [false; Op::ALL.len()];
        for &code in ops {
            let Some(slot) = present.get_mut(code as usize) else {
                return Err(ReplayError::Invalid(format!("operation code {code}")));
            };
            *slot = true;
        }
        let mut ends = Vec::with_capacity(queues);
        let mut feeders = Vec::with_capacity(queues);
        for &requests in queue_requests {
            let (full_tx, full_rx) = sync_channel(CHUNKS_AHEAD);
            let (empty_tx, empty_rx) = sync_channel(CHUNKS_AHEAD + 2);
            for _ in 0..CHUNKS_AHEAD + 1 {
                empty_tx.try_send(Chunk::default()).expect("room for the first chunks");
            }
            ends.push(Mutex::new(Some(Cursor { current: Chunk::default(), pos: 0, full: full_rx, empty: empty_tx })));
            feeders.push(Feeder {
                full: full_tx,
                empty: empty_rx,
                spare: None,
                timing,
                anchored: origin.is_some(),
                first: origin.unwrap_or(0),
                last: origin.unwrap_or(0),
                pushed: 0,
                requests,
                ops: present,
                max_len,
                target,
            });
        }
        let stream = Stream { requests: queue_requests.to_vec(), max_len, ops: present, target, ends };
        let replay = Replay {
            due_ns: Vec::new(),
            op: Vec::new(),
            offset: Vec::new(),
            len: Vec::new(),
            mode,
            stream: Some(stream),
            parts: Vec::new(),
            anchor: AtomicU64::new(UNSET),
        };
        Ok((replay, feeders))
    }

    /// Queue `queue`'s end of a streamed replay (None for a whole one, or once taken).
    pub fn take_cursor(&self, queue: u32) -> Option<Cursor> {
        let end = self.stream.as_ref()?.ends.get(queue as usize)?;
        end.lock().expect("replay stream lock").take()
    }

    pub fn len(&self) -> usize {
        match &self.stream {
            Some(s) => s.requests.iter().sum::<u64>() as usize,
            None => self.op.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The largest request, in bytes (what the I/O buffers must hold).
    pub fn max_len(&self) -> u64 {
        match &self.stream {
            Some(s) => s.max_len,
            None => self.len.iter().copied().max().unwrap_or(0) as u64,
        }
    }

    /// Whether the trace has requests of `op`.
    pub fn has(&self, op: Op) -> bool {
        match &self.stream {
            Some(s) => s.ops[op as usize],
            None => self.op.contains(&op),
        }
    }

    /// Whether the trace changes what the target holds.
    pub fn writes(&self) -> bool {
        Op::ALL.into_iter().any(|op| op.modifies_data() && self.has(op))
    }

    /// Check every request against a target of `target_size` bytes whose I/O must be aligned to `alignment`;
    /// the error names the first request that does not fit. A streamed trace was checked against the target it
    /// announced: that must be this one (or a larger one with a coarser alignment).
    pub fn validate(&self, target_size: u64, alignment: u64) -> Result<(), ReplayError> {
        if let Some(s) = &self.stream {
            let (size, aligned_to) = s.target;
            if size > target_size || (alignment > 1 && !aligned_to.is_multiple_of(alignment)) {
                return Err(ReplayError::Invalid(format!(
                    "the trace was checked for a {size} B target aligned to {aligned_to} B, not this {target_size} B \
                     one aligned to {alignment} B"
                )));
            }
            return Ok(());
        }
        for i in 0..self.len() {
            let (op, offset, len) = (self.op[i], self.offset[i], self.len[i] as u64);
            if !op.has_range() {
                continue;
            }
            // A split trace names the request by its queue (its columns are in queue order, not trace order).
            let request = match self.parts.iter().position(|&(start, end)| (start..end).contains(&i)) {
                Some(q) if self.parts.len() > 1 => format!("{} of queue {q}", i - self.parts[q].0 + 1),
                _ => (i + 1).to_string(),
            };
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

    #[test]
    fn a_split_keeps_each_queues_requests_in_trace_order_with_the_traces_due_times() {
        let (t, op, off, len) = columns();
        let r = Replay::new(&t, &op, &off, &len, Timing::Faithful, Mode::Open).unwrap();
        let r = r.split(&[1, 0, 1, 1], 3).unwrap();
        assert_eq!(r.queues(), 3);
        assert_eq!((r.part(0), r.part(1), r.part(2)), ((0, 1), (1, 4), (4, 4)));
        assert_eq!((r.part_len(0), r.part_len(1), r.part_len(2)), (1, 3, 0));
        assert_eq!(r.due_ns, vec![0, 0, 4_000, 10_000], "due times from the trace's first request");
        assert_eq!(r.op, vec![Op::Write, Op::Read, Op::Flush, Op::Read]);
        assert_eq!(r.offset, vec![4096, 0, 0, 8192]);
        assert_eq!(r.last_due_ns(), Some(10_000));
        // The split trace names a request that does not fit by its queue.
        let err = r.validate(8192, 512).unwrap_err();
        assert!(err.to_string().contains("request 3 of queue 1 (read of 4096 B at byte 8192)"), "{err}");
        // One start for every queue: the first to ask sets it.
        assert_eq!((r.anchor(500), r.anchor(900)), (500, 500));
        let fresh = Replay::new(&t, &op, &off, &len, Timing::Afap, Mode::Closed).unwrap();
        assert_eq!((fresh.queues(), fresh.part(0), fresh.part_len(0)), (1, (0, 4), 4));
        assert_eq!(fresh.anchor(0), 0, "a virtual clock's 0 is a start like any other");
        assert_eq!(fresh.anchor(7), 0);
    }

    #[test]
    fn a_split_that_does_not_fit_the_trace_is_refused() {
        let (t, op, off, len) = columns();
        let whole = || Replay::new(&t, &op, &off, &len, Timing::Faithful, Mode::Open).unwrap();
        assert!(whole().split(&[0, 1, 0], 2).unwrap_err().to_string().contains("3 queue numbers for 4"));
        assert!(whole().split(&[0, 1, 2, 0], 2).unwrap_err().to_string().contains("request 3 goes to queue 2"));
        assert!(whole().split(&[0; 4], 0).is_err());
        let (streamed, _feeder) = Replay::streamed(4, 4096, &[0], (1 << 20, 512), Timing::Afap, Mode::Closed).unwrap();
        assert!(streamed.split(&[0; 4], 2).unwrap_err().to_string().contains("streamed"));
    }

    fn le<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| to(v)).collect()
    }

    fn push(feeder: &mut Feeder, t: &[u64], op: &[u8], off: &[u64], len: &[u32]) -> Result<bool, ReplayError> {
        feeder.push(&le(t, u64::to_le_bytes), op, &le(off, u64::to_le_bytes), &le(len, u32::to_le_bytes))
    }

    #[test]
    fn a_streamed_trace_arrives_in_order_across_chunks_with_its_due_times() {
        let (replay, mut feeder) =
            Replay::streamed(5, 8192, &[0, 1], (1 << 20, 512), Timing::Scaled(2.0), Mode::Open).unwrap();
        assert_eq!((replay.len(), replay.max_len(), replay.writes()), (5, 8192, true));
        assert!(replay.has(Op::Read) && !replay.has(Op::Flush));
        let mut cursor = replay.take_cursor(0).unwrap();
        assert!(replay.take_cursor(0).is_none(), "one queue takes it");
        assert!(replay.take_cursor(1).is_none(), "one queue only");
        assert!(push(&mut feeder, &[1_000, 1_000], &[0, 1], &[0, 4096], &[4096, 8192]).unwrap());
        assert!(push(&mut feeder, &[], &[], &[], &[]).unwrap(), "an empty batch is no end");
        assert!(push(&mut feeder, &[5_000, 11_000, 11_000], &[0, 0, 1], &[0, 8192, 0], &[4096, 4096, 512]).unwrap());
        drop(feeder); // the end of the trace
        let got: Vec<_> = std::iter::from_fn(|| cursor.next()).collect();
        assert_eq!(
            got,
            vec![
                (Op::Read, 0, 4096, 0),
                (Op::Write, 4096, 8192, 0),
                (Op::Read, 0, 4096, 2_000),
                (Op::Read, 8192, 4096, 5_000),
                (Op::Write, 0, 512, 5_000)
            ]
        );
        assert!(cursor.next().is_none());
    }

    #[test]
    fn a_streamed_batch_that_breaks_what_was_announced_is_refused_with_the_request() {
        let (_replay, mut feeder) =
            Replay::streamed(10, 4096, &[0], (1 << 20, 512), Timing::Faithful, Mode::Open).unwrap();
        let err = push(&mut feeder, &[0, 1], &[0, 1], &[0, 0], &[4096, 4096]).unwrap_err();
        assert!(err.to_string().contains("request 2: operation code 1"), "{err}");
        let (_replay, mut feeder) =
            Replay::streamed(10, 4096, &[0], (1 << 20, 512), Timing::Faithful, Mode::Open).unwrap();
        assert!(push(&mut feeder, &[10], &[0], &[0], &[4096]).unwrap());
        let err = push(&mut feeder, &[9], &[0], &[0], &[4096]).unwrap_err();
        assert!(err.to_string().contains("request 2: arrival time goes backwards"), "{err}");
        let err = push(&mut feeder, &[20], &[0], &[1 << 20], &[4096]).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
        let err = push(&mut feeder, &[20], &[0], &[100], &[4096]).unwrap_err();
        assert!(err.to_string().contains("not aligned"), "{err}");
        let err = push(&mut feeder, &[20; 10], &[0; 10], &[0; 10], &[4096; 10]).unwrap_err();
        assert!(err.to_string().contains("more requests than the 10 announced"), "{err}");
        // Refused batches gave their chunk back: a good one still goes (it would wait forever otherwise).
        assert!(push(&mut feeder, &[30], &[0], &[0], &[4096]).unwrap());
        assert_eq!(feeder.pushed(), 2);
        // A streamed trace checked for another target is refused before the run.
        let (replay, _) = Replay::streamed(1, 4096, &[0], (1 << 20, 512), Timing::Afap, Mode::Closed).unwrap();
        assert!(replay.validate(1 << 20, 512).is_ok() && replay.validate(1 << 30, 512).is_ok());
        assert!(replay.validate(1 << 19, 512).unwrap_err().to_string().contains("checked for"));
        assert!(replay.validate(1 << 20, 4096).is_err());
    }

    #[test]
    fn a_feeder_whose_replay_is_gone_hears_so_instead_of_waiting() {
        let (replay, mut feeder) =
            Replay::streamed(100, 4096, &[0], (1 << 20, 512), Timing::Afap, Mode::Closed).unwrap();
        drop(replay); // never started (or ended early): nobody will read
        let mut answers = Vec::new();
        for k in 0..10u64 {
            answers.push(push(&mut feeder, &[k], &[0], &[0], &[4096]).unwrap());
        }
        assert!(answers.iter().all(|&a| !a), "{answers:?}");
    }

    #[test]
    fn a_streamed_split_feeds_each_queue_on_its_own_with_due_times_from_the_traces_first_request() {
        let (replay, mut feeders) = Replay::streamed_split(
            &[2, 3, 0],
            Some(1_000),
            4096,
            &[0, 4],
            (1 << 20, 512),
            Timing::Faithful,
            Mode::Open,
        )
        .unwrap();
        assert_eq!((replay.queues(), replay.len()), (3, 5));
        assert_eq!((replay.part_len(0), replay.part_len(1), replay.part_len(2)), (2, 3, 0));
        let mut cursors: Vec<_> = (0..3).map(|q| replay.take_cursor(q).unwrap()).collect();
        let mut third = feeders.pop().unwrap();
        let mut second = feeders.pop().unwrap();
        let mut first = feeders.pop().unwrap();
        // Queue 1 is fed and read to its end while queue 0 has nothing yet: no queue waits for another's chunk.
        assert!(push(&mut second, &[2_000], &[0], &[4096], &[4096]).unwrap());
        assert!(push(&mut second, &[3_000, 9_000], &[4, 0], &[0, 0], &[0, 512]).unwrap());
        drop(second);
        let got: Vec<_> = std::iter::from_fn(|| cursors[1].next()).collect();
        assert_eq!(got, vec![(Op::Read, 4096, 4096, 1_000), (Op::Flush, 0, 0, 2_000), (Op::Read, 0, 512, 8_000)]);
        // An arrival before the trace's first is refused, as going backwards.
        let err = push(&mut first, &[999], &[0], &[0], &[4096]).unwrap_err();
        assert!(err.to_string().contains("request 1: arrival time goes backwards"), "{err}");
        assert!(push(&mut first, &[1_000, 4_000], &[0, 0], &[0, 0], &[4096, 4096]).unwrap());
        drop(first);
        let got: Vec<_> = std::iter::from_fn(|| cursors[0].next()).collect();
        assert_eq!(got, vec![(Op::Read, 0, 4096, 0), (Op::Read, 0, 4096, 3_000)]);
        // An idle queue takes nothing, and ends once its feeder is gone.
        let err = push(&mut third, &[5_000], &[0], &[0], &[4096]).unwrap_err();
        assert!(err.to_string().contains("more requests than the 0 announced"), "{err}");
        drop(third);
        assert!(cursors[2].next().is_none());
        let no_origin = Replay::streamed_split(&[1, 1], None, 4096, &[0], (1 << 20, 512), Timing::Afap, Mode::Closed);
        assert!(no_origin.unwrap_err().to_string().contains("first arrival"));
        let empty = Replay::streamed_split(&[0, 0], Some(0), 4096, &[0], (1 << 20, 512), Timing::Afap, Mode::Closed);
        assert!(empty.unwrap_err().to_string().contains("no requests"));
    }
}
