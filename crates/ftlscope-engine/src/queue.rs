//! One queue's measurement loop: choose the next request, hand it to the backend, record its completion.
//!
//! The same loop serves every target. Real targets drive it with [`QueueLoop::run`] on the queue's own
//! pinned thread; the simulator's driver steps it with [`QueueLoop::fill`] and [`QueueLoop::on_event`] on
//! virtual time. Everything is allocated in [`QueueLoop::new`]; nothing in the loop allocates.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::backend::{Backend, Event, Request};
use crate::buffers::IoBuffers;
use crate::engine::{OnError, QueueReport, StopReason};
use crate::pattern::OffsetGenerator;
use crate::replay::{Cursor, Mode, Replay};
use crate::stats::Record;
use crate::workload::{Op, Workload};
use crate::write_shim::{Admit, Held, WriteShim, WriteShimSettings};

thread_local! {
    static IN_HOT_LOOP: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is inside the engine's measurement loop. A test's counting allocator uses
/// this to prove the loop never allocates.
pub fn in_hot_loop() -> bool {
    IN_HOT_LOOP.with(|c| c.get())
}

/// Run `f` as if inside the measurement loop: lets an allocation-counting test prove that it would see an
/// allocation there (so its "zero allocations" result is not vacuous).
#[doc(hidden)]
pub fn with_hot_loop_flag<R>(f: impl FnOnce() -> R) -> R {
    IN_HOT_LOOP.with(|c| c.set(true));
    let result = f();
    IN_HOT_LOOP.with(|c| c.set(false));
    result
}

pub(crate) struct QueueProgress {
    pub ops: AtomicU64,
    pub bytes: AtomicU64,
    pub errors: AtomicU64,
}

impl QueueProgress {
    pub fn new() -> QueueProgress {
        QueueProgress { ops: AtomicU64::new(0), bytes: AtomicU64::new(0), errors: AtomicU64::new(0) }
    }
}

/// A counter on a cache line of its own: every queue's thread bumps it once a request, and sharing a line with
/// the flags each queue reads before every request (`stop`) would make those reads miss too.
#[repr(align(128))]
pub(crate) struct OwnLine(pub AtomicU64);

/// What the queues and the caller share while a run is on.
pub(crate) struct Shared {
    pub stop: AtomicBool,
    /// Requests submitted so far over every queue: the next one's `submit_seq`.
    pub submitted: OwnLine,
    /// Device time since the run started (virtual on a simulated device), for progress reports.
    pub device_now: AtomicU64,
    pub setup_failed: AtomicBool,
    pub progress: Vec<QueueProgress>,
    pub reason: Mutex<Option<StopReason>>,
    /// Verify runs: the last write generation handed out, and what each sector should hold now.
    pub generation: AtomicU64,
    pub write_record: Option<crate::verify::WriteRecord>,
}

impl Shared {
    pub fn new(queues: u32) -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            submitted: OwnLine(AtomicU64::new(0)),
            device_now: AtomicU64::new(0),
            setup_failed: AtomicBool::new(false),
            progress: (0..queues).map(|_| QueueProgress::new()).collect(),
            reason: Mutex::new(None),
            generation: AtomicU64::new(0),
            write_record: None,
        }
    }

    pub fn stop_with(&self, reason: StopReason) {
        let mut current = self.reason.lock().expect("stop reason lock");
        if current.as_ref().is_none_or(|c| reason.rank() > c.rank()) {
            *current = Some(reason);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What one queue needs to know about its run.
pub(crate) struct QueueContext {
    pub queue: u32,
    /// How many consecutive queues share one sequential stream (1: each queue its own).
    pub lanes: u32,
    pub workload: Workload,
    pub target_size: u64,
    pub shared: std::sync::Arc<Shared>,
    pub on_error: OnError,
    pub io_timeout_ns: u64,
    /// A recorded trace to replay: the queue issues its requests, in order and on its timing, instead of
    /// drawing them from the workload.
    pub replay: Option<std::sync::Arc<Replay>>,
    /// The write rate-limiting shim, if the run has one; the run's start and window length (for its held-bytes
    /// series) and how long the run should last, where known.
    pub write_shim: Option<WriteShimSettings>,
    pub t0_ns: u64,
    pub window_ns: u64,
    pub expected_ns: Option<u64>,
}

/// Requests are chosen this many ahead of being issued (same order, same choices), so that a backend can
/// be told what is coming: the simulator loads the mapping entries a request will need while it works
/// on the ones before it, instead of stalling on each in turn.
const LOOKAHEAD: usize = 4;

/// A request due this soon is waited for by polling rather than by a blocking wait (`clock::wait_until` spins
/// the same last stretch when nothing is in flight).
const POLL_NS: u64 = 200_000;

/// What one attempt to issue came to.
enum Step {
    Issued,
    /// Nothing may go now (no slot, not due, the end).
    Blocked,
    /// Try again: the write shim took a write, or let held writes go ahead.
    Again,
}

/// A request chosen but not issued yet.
#[derive(Clone, Copy)]
struct Planned {
    op: Op,
    size: u64,
    offset: u64,
    /// Replays: when it is due (ns from the replay's start), and whether the trace has ended before it.
    due_ns: u64,
    end: bool,
}

#[derive(Clone, Copy, Default)]
struct SlotState {
    submit_ns: u64,
    offset: u64,
    len: u32,
    op: u8,
    warmup: bool,
    busy: bool,
    generation: u64,
    /// Replays: when the request should have been submitted (its issue lag is the submission after it).
    scheduled_ns: u64,
    /// Its place in the run's submission order (see `Record::submit_seq`).
    submit_seq: u64,
}

/// The state of one queue's measurement loop. Everything is allocated in `new`; `run` never allocates.
pub(crate) struct QueueLoop<'a> {
    ctx: &'a QueueContext,
    generator: OffsetGenerator,
    producer: rtrb::Producer<Record>,
    slots: Vec<SlotState>,
    free: Vec<u32>,
    inflight: u32,
    /// Writes in flight, and the most the write shim lets in while it releases writes it held (the rest of the
    /// queue stays free for reads: see `release_limit`).
    writes_inflight: u32,
    release_limit: u32,
    /// Cumulative op weights, for the weighted choice.
    op_cumulative: [u64; 5],
    op_total: u64,
    single_op: Option<Op>,
    /// The next requests, in the order they will be issued (a ring starting at `planned_head`).
    planned: [Planned; LOOKAHEAD],
    planned_head: usize,
    ops_budget: u64,
    bytes_budget: u64,
    warmup_ops: u64,
    issued_measured: u64,
    bytes_measured: u64,
    issued_warmup: u64,
    completed_ops: u64,
    completed_bytes: u64,
    errors: u64,
    measure_start: Option<u64>,
    start_ns: u64,
    limit_reached: bool,
    local_stop: bool,
    /// Batch mode: the batch in flight has been issued, so an idle gap comes before the next one.
    idle_due: bool,
    /// Whether the workload has a rate limit; bytes and requests issued so far per direction (read, write,
    /// trim) for its schedule; and how long the next request must still be held back (set by `issue`).
    paced: bool,
    /// When the schedule starts: the first request's issue, which is also where a time limit starts when
    /// there is no warm-up (so a queue whose first request comes late cannot fit one more in).
    pace_anchor: Option<u64>,
    paced_bytes: [u64; 3],
    paced_ops: [u64; 3],
    pace_wait_ns: u64,
    /// Replays: the next request of the trace to plan; the previous issue's time and due time (closed mode
    /// counts the next gap from it); a flush in flight that holds back what follows (closed mode).
    replay_cursor: usize,
    /// A streamed replay's requests (the trace arrives in chunks while the queue runs).
    replay_stream: Option<Cursor>,
    replay_last: Option<(u64, u64)>,
    replay_barrier: bool,
    /// The write rate-limiting shim; whether it has seen the planned request at the ring's head (it counts each
    /// request once, however often it is looked at); the clock when last looked at.
    shim: Option<WriteShim>,
    planned_seen: bool,
    last_now: u64,
}

/// The pacing direction of an operation (fio's read, write, trim), or None for flushes.
#[inline]
fn direction(op: Op) -> Option<usize> {
    match op {
        Op::Read => Some(0),
        Op::Write | Op::WriteZeroes => Some(1),
        Op::Trim => Some(2),
        Op::Flush => None,
    }
}

/// This queue's share of a total split over `queues` (the first queues take the remainder).
pub(crate) fn share_of(total: u64, queues: u32, queue: u32) -> u64 {
    if total == 0 {
        return 0;
    }
    let q = queues as u64;
    total / q + u64::from((queue as u64) < total % q)
}

/// The most writes in flight while the write shim releases writes it held: a quarter of the queue is kept for
/// reads (none under a depth of 4, where one slot kept would be a third of the queue or more).
fn release_limit(depth: u32) -> u32 {
    depth - depth / 4
}

impl<'a> QueueLoop<'a> {
    pub fn new(ctx: &'a QueueContext, generator: OffsetGenerator, producer: rtrb::Producer<Record>) -> QueueLoop<'a> {
        let depth = ctx.workload.inflight_per_queue() as usize;
        let mix = &ctx.workload.mix;
        let mut op_cumulative = [0u64; 5];
        let mut acc = 0;
        let mut used = Op::ALL.iter().filter(|&&op| mix.weight(op) > 0);
        let single_op = if used.clone().count() == 1 { used.next().copied() } else { None };
        for op in Op::ALL {
            acc += mix.weight(op) as u64;
            op_cumulative[op as usize] = acc;
        }
        let w = &ctx.workload;
        let mut queue_loop = QueueLoop {
            ctx,
            generator,
            producer,
            slots: vec![SlotState::default(); depth],
            free: (0..depth as u32).rev().collect(),
            inflight: 0,
            writes_inflight: 0,
            release_limit: release_limit(depth as u32),
            op_cumulative,
            op_total: acc,
            single_op,
            planned: [Planned { op: Op::Read, size: 0, offset: 0, due_ns: 0, end: false }; LOOKAHEAD],
            planned_head: 0,
            // A replay's queue issues its part of the trace, however the trace was split.
            ops_budget: ctx
                .replay
                .as_deref()
                .map_or(share_of(w.stop.ops, w.queues, ctx.queue), |r| r.part_len(ctx.queue)),
            bytes_budget: share_of(w.stop.bytes, w.queues, ctx.queue),
            warmup_ops: share_of(w.warmup.ops, w.queues, ctx.queue),
            issued_measured: 0,
            bytes_measured: 0,
            issued_warmup: 0,
            completed_ops: 0,
            completed_bytes: 0,
            errors: 0,
            measure_start: None,
            start_ns: 0,
            limit_reached: false,
            local_stop: false,
            idle_due: false,
            paced: w.rate.limited(),
            pace_anchor: None,
            paced_bytes: [0; 3],
            paced_ops: [0; 3],
            pace_wait_ns: 0,
            replay_cursor: 0,
            replay_stream: ctx.replay.as_deref().and_then(|r| r.take_cursor(ctx.queue)),
            replay_last: None,
            replay_barrier: false,
            shim: ctx
                .write_shim
                .map(|settings| WriteShim::new(&settings, w.queues, ctx.t0_ns, ctx.window_ns, ctx.expected_ns)),
            planned_seen: false,
            last_now: 0,
        };
        for i in 0..LOOKAHEAD {
            queue_loop.planned[i] = queue_loop.choose();
        }
        queue_loop
    }

    /// The next request of the workload: its operation, size and offset, drawn in that order.
    #[inline]
    fn choose(&mut self) -> Planned {
        if let Some(stream) = self.replay_stream.as_mut() {
            return match stream.next() {
                Some((op, offset, len, due_ns)) => Planned { op, size: len as u64, offset, due_ns, end: false },
                None => Planned { op: Op::Read, size: 0, offset: 0, due_ns: 0, end: true },
            };
        }
        if let Some(replay) = self.ctx.replay.as_deref() {
            let (start, end) = replay.part(self.ctx.queue);
            let i = start + self.replay_cursor;
            if i >= end {
                return Planned { op: Op::Read, size: 0, offset: 0, due_ns: 0, end: true };
            }
            self.replay_cursor += 1;
            let op = replay.op[i];
            return Planned {
                op,
                size: replay.len[i] as u64,
                offset: replay.offset[i],
                due_ns: replay.due_ns[i],
                end: false,
            };
        }
        let op = self.pick_op();
        let size = if op.has_range() { self.pick_size() } else { 0 };
        let offset = if op.has_range() { self.generator.next_offset(size) } else { 0 };
        Planned { op, size, offset, due_ns: 0, end: false }
    }

    #[inline]
    fn pick_op(&mut self) -> Op {
        if let Some(op) = self.single_op {
            return op;
        }
        let r = self.generator.pick(self.op_total);
        for op in Op::ALL {
            if r < self.op_cumulative[op as usize] {
                return op;
            }
        }
        Op::Read
    }

    #[inline]
    fn pick_size(&mut self) -> u64 {
        let sizes = &self.ctx.workload.sizes;
        if sizes.len() == 1 {
            sizes[0]
        } else {
            sizes[self.generator.pick(sizes.len() as u64) as usize]
        }
    }

    /// When the rate limit lets a request of `op` go: the k-th byte (request) of a direction is due k / limit
    /// seconds after `anchor` (the queue's first request). This queue's share of a limit is limit / queues, so
    /// its k-th is due at k * queues / limit. Integer arithmetic on u128: no rounding drift over long runs, and
    /// no overflow.
    #[inline]
    fn due_ns(&self, op: Op, anchor: u64) -> u64 {
        let Some(d) = direction(op) else {
            return 0;
        };
        let rate = &self.ctx.workload.rate;
        let queues = self.ctx.workload.queues as u128;
        let mut due = anchor;
        for (limit, done) in [(rate.bytes_per_s.of(op), self.paced_bytes[d]), (rate.iops.of(op), self.paced_ops[d])] {
            if limit > 0 {
                let offset = (done as u128 * 1_000_000_000 * queues / limit as u128).min(u64::MAX as u128) as u64;
                due = due.max(anchor.saturating_add(offset));
            }
        }
        due
    }

    /// Whether no further request will be issued (known without looking at the clock).
    fn exhausted(&self) -> bool {
        let warm = self.issued_warmup < self.warmup_ops;
        self.local_stop
            || self.limit_reached
            || self.ctx.shared.stop.load(Ordering::Relaxed)
            || (!warm && self.ops_budget > 0 && self.issued_measured >= self.ops_budget)
            || (!warm && self.bytes_budget > 0 && self.bytes_measured >= self.bytes_budget)
    }

    /// Prepare and push one request; false when the stop condition says no more, or nothing may go yet.
    #[inline]
    fn issue<B: Backend>(&mut self, backend: &mut B, buffers: &mut IoBuffers) -> bool {
        loop {
            match self.try_issue(backend, buffers) {
                Step::Issued => return true,
                Step::Blocked => return false,
                // A write went into the write shim, or the shim let what it held go ahead of the next request.
                Step::Again => {}
            }
        }
    }

    #[inline]
    fn try_issue<B: Backend>(&mut self, backend: &mut B, buffers: &mut IoBuffers) -> Step {
        if self.local_stop || self.limit_reached || self.ctx.shared.stop.load(Ordering::Relaxed) {
            return Step::Blocked;
        }
        let w = &self.ctx.workload;
        let now = backend.now();
        self.last_now = now;
        let warmup =
            self.issued_warmup < self.warmup_ops || (w.warmup.time_ns > 0 && now < self.start_ns + w.warmup.time_ns);
        if !warmup {
            let start = *self.measure_start.get_or_insert(now);
            if (self.ops_budget > 0 && self.issued_measured >= self.ops_budget)
                || (w.stop.time_ns > 0 && now - start >= w.stop.time_ns)
            {
                self.limit_reached = true;
                return Step::Blocked;
            }
        }
        // Writes the shim held whose time has come go first, oldest first, but never into the slots kept for
        // reads: a released backlog that took every slot would make the reads due wait behind it at the host,
        // the delay the shim exists to spare them. Before a flush everything held goes at once (nothing held
        // crosses a flush, and the flush waits for it all).
        let held_next = self.shim.as_ref().and_then(WriteShim::next_release);
        let held_due = held_next.is_some_and(|t| t <= now);
        let capped =
            held_due && self.writes_inflight >= self.release_limit && self.planned[self.planned_head].op != Op::Flush;
        if held_due && !capped {
            if self.free.is_empty() {
                return Step::Blocked;
            }
            // The shim may find the drive has not drained enough yet and move the write later: ask again.
            let Some(held) = self.shim.as_mut().and_then(|s| s.pop_due(now)) else {
                return Step::Again;
            };
            let slot = self.free.pop().expect("a free slot");
            let request = Planned { op: held.op, size: held.size, offset: held.offset, due_ns: 0, end: false };
            // Late from the time the trace had it due, not from its release: the hold is lag the application waits.
            self.push(backend, buffers, slot, request, warmup, held.due_ns);
            return Step::Issued;
        }
        // How long until the next held write may go, to wait no longer than that for anything else (capped: until
        // a write completes, which the loop waits for anyway).
        let held_wait = if capped { u64::MAX } else { held_next.map_or(u64::MAX, |t| t - now) };
        let planned = self.planned[self.planned_head];
        let Planned { op, size, due_ns, end, .. } = planned;
        // Capped, the trace goes on: a read takes a free slot, a write goes to the shim (held behind the others).
        // At the trace's end there is nothing else to issue: wait for a write to complete.
        if capped && end {
            return Step::Blocked;
        }
        if end {
            // The trace has ended; what the shim still holds goes on its schedule.
            if held_wait < u64::MAX {
                self.pace_wait_ns = held_wait;
            } else {
                self.limit_reached = true;
            }
            return Step::Blocked;
        }
        if !warmup && self.bytes_budget > 0 && self.bytes_measured + size > self.bytes_budget {
            self.limit_reached = true;
            return Step::Blocked;
        }
        if self.paced {
            let anchor = *self.pace_anchor.get_or_insert(now);
            let due = self.due_ns(op, anchor);
            if now < due {
                // Not due before the time limit: the run is over for this queue, rather than waiting past its end.
                let ends = self.measure_start.filter(|_| w.stop.time_ns > 0).map(|s| s + w.stop.time_ns);
                if !warmup && ends.is_some_and(|end| due >= end) {
                    self.limit_reached = true;
                } else {
                    self.pace_wait_ns = due - now;
                }
                return Step::Blocked;
            }
        }
        let mut scheduled_ns = 0;
        if let Some(replay) = self.ctx.replay.as_deref() {
            let due = match replay.mode {
                // Due times count from one start shared by every queue the trace is split over.
                Mode::Open => self.pace_anchor.get_or_insert_with(|| replay.anchor(now)).saturating_add(due_ns),
                Mode::Closed => {
                    // A sync point: what follows a flush waits for it.
                    if self.replay_barrier {
                        return Step::Blocked;
                    }
                    self.replay_last.map_or(now, |(issued, last_due)| issued.saturating_add(due_ns - last_due))
                }
            };
            if now < due {
                self.pace_wait_ns = (due - now).min(held_wait);
                return Step::Blocked;
            }
            // Closed mode: due once its gap has passed and a slot is free, which is now if it got this far.
            scheduled_ns = if replay.mode == Mode::Closed { now } else { due };
        }
        // The request arrives now: the write shim sees it, and may hold a write back.
        if let Some(shim) = self.shim.as_mut() {
            if !self.planned_seen {
                shim.observe(op, size, now);
                self.planned_seen = true;
            }
            match op {
                // Nothing held crosses a flush: it all goes first.
                Op::Flush if shim.flush(now) => return Step::Again,
                Op::Write => {
                    let held = Held {
                        op,
                        size,
                        offset: planned.offset,
                        arrival_ns: now,
                        release_ns: now,
                        due_ns: scheduled_ns,
                    };
                    match shim.admit(size, now) {
                        Admit::Now => {}
                        admitted => {
                            if let Admit::Hold(release_ns) = admitted {
                                shim.hold(Held { release_ns, ..held }, now);
                            } else if !shim.queue_behind(held, now) {
                                // It goes after everything held (`Admit::AfterHeld`), in the shim's queue behind
                                // them so the reads after it in the trace need not wait for the backlog to be
                                // issued; with no room there it waits for them to go, and with no slot for them
                                // (capped) for a write to complete.
                                return if capped { Step::Blocked } else { Step::Again };
                            }
                            if self.ctx.replay.is_some() {
                                // Handed to the shim is issued, for the trace's timing (closed mode counts from it).
                                self.replay_last = Some((now, due_ns));
                            }
                            self.advance_planned(backend);
                            return Step::Again;
                        }
                    }
                }
                _ => {}
            }
        }
        let closed = self.ctx.replay.as_deref().is_some_and(|r| r.mode == Mode::Closed);
        // Closed mode: a flush waits for everything before it.
        if closed && op == Op::Flush && self.inflight > 0 {
            return Step::Blocked;
        }
        let Some(slot) = self.free.pop() else {
            return Step::Blocked;
        };
        if self.ctx.replay.is_some() {
            self.replay_last = Some((now, due_ns));
            self.replay_barrier = op == Op::Flush && closed;
        }
        self.advance_planned(backend);
        self.push(backend, buffers, slot, planned, warmup, scheduled_ns);
        Step::Issued
    }

    /// The planned request has been taken: its place in the ring goes to the request LOOKAHEAD after it.
    #[inline]
    fn advance_planned<B: Backend>(&mut self, backend: &mut B) {
        let next = self.choose();
        self.planned[self.planned_head] = next;
        self.planned_head = (self.planned_head + 1) % LOOKAHEAD;
        self.planned_seen = false;
        if next.op.has_range() {
            backend.coming(next.op, next.offset, next.size as u32);
        }
    }

    /// Hand `request` to the backend in `slot`.
    #[inline]
    fn push<B: Backend>(
        &mut self,
        backend: &mut B,
        buffers: &mut IoBuffers,
        slot: u32,
        request: Planned,
        warmup: bool,
        scheduled_ns: u64,
    ) {
        let Planned { op, size, offset, .. } = request;
        let generation = if op == Op::Write && self.ctx.shared.write_record.is_some() {
            self.ctx.shared.generation.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            0
        };
        let addr = match op {
            Op::Write => buffers.write_buffer(slot, offset, size as usize, generation),
            _ => buffers.read_buffer(slot),
        };
        self.slots[slot as usize] = SlotState {
            submit_ns: 0,
            offset,
            len: size as u32,
            op: op as u8,
            warmup,
            busy: true,
            generation,
            scheduled_ns,
            submit_seq: 0,
        };
        if self.inflight == 0 {
            // The drive's idle time ends: the shim's model of its buffer drains only in idle time.
            if let Some(shim) = self.shim.as_mut() {
                shim.busy(self.last_now);
            }
        }
        backend.push(slot, Request { op, offset, len: size as u32, addr });
        self.inflight += 1;
        self.writes_inflight += u32::from(op == Op::Write);
        if let Some(d) = direction(op) {
            self.paced_bytes[d] += size;
            self.paced_ops[d] += 1;
        }
        if warmup {
            self.issued_warmup += 1;
        } else {
            self.issued_measured += 1;
            self.bytes_measured += size;
        }
    }

    #[inline]
    pub fn on_event(&mut self, event: Event) {
        match event {
            Event::Submitted { slot, at_ns } => {
                let s = &mut self.slots[slot as usize];
                s.submit_ns = at_ns;
                s.submit_seq = self.ctx.shared.submitted.0.fetch_add(1, Ordering::Relaxed);
            }
            Event::Completed { slot, result, at_ns } => {
                let s = self.slots[slot as usize];
                self.slots[slot as usize].busy = false;
                if s.op == Op::Flush as u8 {
                    self.replay_barrier = false;
                }
                let mut record = Record {
                    submit_ns: s.submit_ns,
                    complete_ns: at_ns,
                    offset: s.offset,
                    len: s.len,
                    result,
                    op: s.op,
                    queue: self.ctx.queue as u16,
                    // A request issued during warm-up that completes after it ended counts: leaving it out
                    // would leave the measured interval's first latency period short of completions (a bias
                    // of about latency / runtime in IOPS).
                    warmup: s.warmup && self.measure_start.is_none_or(|start| at_ns < start),
                    issued_in_warmup: s.warmup,
                    issue_lag_ns: if self.ctx.replay.is_some() {
                        s.submit_ns.saturating_sub(s.scheduled_ns)
                    } else {
                        0
                    },
                    submit_seq: s.submit_seq,
                };
                if record.failed() {
                    self.errors += 1;
                    self.ctx.shared.progress[self.ctx.queue as usize].errors.store(self.errors, Ordering::Relaxed);
                    if self.ctx.on_error == OnError::Stop && !s.warmup {
                        self.local_stop = true;
                        let errno = if result < 0 { -result } else { libc::EIO };
                        self.ctx.shared.stop_with(StopReason::IoError {
                            op: Op::from_index(s.op).name().to_string(),
                            offset: s.offset,
                            errno,
                            message: crate::stats::errno_message(errno),
                        });
                    }
                } else {
                    if let (Some(record), true) = (&self.ctx.shared.write_record, s.generation > 0) {
                        record.record(s.offset, s.len as u64, s.generation);
                    }
                    self.completed_ops += 1;
                    self.completed_bytes += s.len as u64;
                    if s.op == Op::Read as u8 {
                        // The shim weighs what holding costs the reads (it backs off when they slow down).
                        if let Some(shim) = self.shim.as_mut() {
                            shim.read_done(s.submit_ns, at_ns);
                        }
                    }
                    let progress = &self.ctx.shared.progress[self.ctx.queue as usize];
                    progress.ops.store(self.completed_ops, Ordering::Relaxed);
                    progress.bytes.store(self.completed_bytes, Ordering::Relaxed);
                }
                // The aggregator is behind: wait for room rather than drop a measurement.
                loop {
                    match self.producer.push(record) {
                        Ok(()) => break,
                        Err(rtrb::PushError::Full(back)) => {
                            record = back;
                            std::hint::spin_loop();
                        }
                    }
                }
                self.free.push(slot);
                self.inflight -= 1;
                self.writes_inflight -= u32::from(s.op == Op::Write as u8);
                if self.inflight == 0 {
                    if let Some(shim) = self.shim.as_mut() {
                        shim.idle(at_ns);
                    }
                }
            }
        }
    }

    /// The oldest request still in flight: (age, op, offset).
    fn oldest_inflight(&self, now: u64) -> Option<(u64, u8, u64)> {
        self.slots
            .iter()
            .filter(|s| s.busy && s.submit_ns > 0)
            .map(|s| (now.saturating_sub(s.submit_ns), s.op, s.offset))
            .max_by_key(|x| x.0)
    }

    /// Issue what the workload allows now. Returns how long to wait before calling again when something
    /// other than completions holds the next request back: in batch mode the idle gap after a completed
    /// batch (nothing is in flight then), under a rate limit the time until the next request is due
    /// (requests may be in flight then; the caller keeps reaping their completions meanwhile).
    pub fn fill<B: Backend>(&mut self, backend: &mut B, buffers: &mut IoBuffers) -> Option<u64> {
        match self.ctx.workload.batch.as_ref().map(|b| (b.size, b.idle_ns)) {
            Some((size, idle_ns)) => {
                if self.inflight == 0 {
                    if self.idle_due && idle_ns > 0 && !self.exhausted() {
                        self.idle_due = false;
                        return Some(idle_ns);
                    }
                    self.idle_due = true;
                    for _ in 0..size {
                        if !self.issue(backend, buffers) {
                            break;
                        }
                    }
                }
            }
            None => {
                let depth = self.ctx.workload.queue_depth;
                let submit_each = backend.submits_each();
                while self.inflight < depth {
                    if !self.issue(backend, buffers) {
                        break;
                    }
                    // Send it now unless it is the last to go: that one goes with the wait, in one call.
                    // (A failed submission stays queued; the wait that follows tries again and ends the run
                    // if it fails too.)
                    if submit_each
                        && self.inflight < depth
                        && backend.submit_and_wait(0, 0, |event| self.on_event(event)).is_err()
                    {
                        break;
                    }
                }
            }
        }
        if self.pace_wait_ns > 0 {
            return Some(std::mem::take(&mut self.pace_wait_ns));
        }
        None
    }

    /// Mark the start of measurement (time limits and warm-up count from here).
    pub fn begin(&mut self, now: u64) {
        self.start_ns = now;
        IN_HOT_LOOP.with(|c| c.set(true));
    }

    /// Mark the end and fill in the queue's report.
    pub fn finish(&mut self, report: &mut QueueReport, leak: bool) {
        IN_HOT_LOOP.with(|c| c.set(false));
        if self.limit_reached {
            // Recorded only if nothing more serious ended the run.
            let mut reason = self.ctx.shared.reason.lock().expect("stop reason lock");
            if reason.is_none() {
                *reason = Some(StopReason::Completed);
            }
        }
        report.issued = self.issued_measured + self.issued_warmup;
        report.completed = self.completed_ops;
        report.leaked_buffers = leak;
        report.write_shim = self.shim.as_mut().map(|s| s.finish(self.last_now));
    }

    /// The measurement loop for a real target. Returns true when buffers must be leaked (a request could
    /// not be cancelled).
    pub fn run<B: Backend>(&mut self, backend: &mut B, buffers: &mut IoBuffers, report: &mut QueueReport) -> bool {
        let batch = self.ctx.workload.batch.is_some();
        let wait_ns = self.ctx.io_timeout_ns.clamp(1_000_000, 100_000_000);
        let mut leak = false;
        // Whether the last poll left the clock where it was: a virtual clock, which moves only with completions.
        let mut poll_stuck = false;
        self.begin(backend.now());
        loop {
            let held_back = self.fill(backend, buffers);
            let (want, timeout_ns) = match held_back {
                // Nothing in flight: a plain wait (a sleep, then a spin for the last 200 us: the one syscall
                // the loop makes besides the I/O, and only when a batch gap or a rate limit asks for it).
                // A rate gap is waited at most `wait_ns` at a time (the next `fill` works out the rest), so a
                // stop request is seen even under a very low rate; a batch's idle gap is waited whole.
                Some(gap_ns) if self.inflight == 0 => {
                    backend.idle(if batch { gap_ns } else { gap_ns.min(wait_ns) });
                    continue;
                }
                // Held back (rate limit, replay schedule) with requests in flight and the next one due within the
                // spin range of `clock::wait_until`: poll, reaping completions (stamped as they are reaped) without
                // blocking, because a wait in the kernel ends by a timer that may fire up to the thread's timer
                // slack (50 us by default) late, and the next request would go that late.
                Some(gap_ns) if gap_ns <= POLL_NS && !poll_stuck => (0, 0),
                // Due later: wait for a completion, at most until the spin range before the next request is due
                // (then the arm above polls the rest), so completions are still stamped as they arrive and the
                // request does not go a timer's lateness after its time. A clock the poll did not move (virtual)
                // waits the whole gap.
                Some(gap_ns) => {
                    (1, if gap_ns > POLL_NS && !poll_stuck { gap_ns - POLL_NS } else { gap_ns }.min(wait_ns))
                }
                None if self.inflight == 0 => break,
                None => (if batch { self.inflight } else { 1 }, wait_ns),
            };
            let before = backend.now();
            let result = backend.submit_and_wait(want, timeout_ns, |event| self.on_event(event));
            if let Err(e) = result {
                self.ctx.shared.stop_with(StopReason::EngineFailure { message: format!("submission failed: {e}") });
                self.local_stop = true;
                leak = !backend.cancel_all();
                break;
            }
            let now = backend.now();
            poll_stuck = want == 0 && now == before;
            if let Some((age, op, offset)) = self.oldest_inflight(now) {
                if age > self.ctx.io_timeout_ns {
                    self.ctx.shared.stop_with(StopReason::Timeout {
                        op: Op::from_index(op).name().to_string(),
                        offset,
                        outstanding_ns: age,
                    });
                    self.local_stop = true;
                    leak = !backend.cancel_all();
                    break;
                }
            }
        }
        self.finish(report, leak);
        leak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::Timing;
    use crate::stats::Aggregator;

    #[test]
    fn shares_split_evenly_with_remainder_first() {
        let parts: Vec<u64> = (0..3).map(|q| share_of(10, 3, q)).collect();
        assert_eq!(parts, vec![4, 3, 3]);
        assert_eq!(share_of(0, 3, 1), 0);
    }

    /// A deterministic backend on a virtual clock: every request takes `latency_ns`; requests at
    /// `fail_offset` fail with EIO; with `hang`, nothing ever completes.
    struct ScriptedBackend {
        now: u64,
        latency_ns: u64,
        fail_offset: Option<u64>,
        hang: bool,
        pending: Vec<(u32, Request)>,
        inflight: Vec<(u32, Request, u64)>,
        idle_calls: Vec<u64>,
        /// Every (op, offset, len) announced through `coming`, and every request pushed, in order.
        announced: Vec<(Op, u64, u32)>,
        pushed: Vec<(Op, u64, u32)>,
        /// What `submits_each` answers, and the time each submit_and_wait call takes.
        submit_each: bool,
        submit_cost_ns: u64,
        /// (requests submitted, min_complete) of every submit_and_wait call.
        calls: Vec<(usize, u32)>,
        /// A clock that moves on its own, as a real one: each call that waits for nothing (a poll) takes this
        /// long and reaps the completions due by then.
        poll_ns: u64,
        /// How late a wait that ends by its timeout returns (a kernel timer's slack, a scheduler's delay).
        wake_late_ns: u64,
    }

    impl ScriptedBackend {
        fn new(latency_ns: u64) -> ScriptedBackend {
            ScriptedBackend {
                now: 1_000,
                latency_ns,
                fail_offset: None,
                hang: false,
                pending: Vec::new(),
                inflight: Vec::new(),
                idle_calls: Vec::new(),
                announced: Vec::new(),
                pushed: Vec::new(),
                submit_each: false,
                submit_cost_ns: 0,
                calls: Vec::new(),
                poll_ns: 0,
                wake_late_ns: 0,
            }
        }
    }

    impl Backend for ScriptedBackend {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn push(&mut self, slot: u32, request: Request) {
            self.pushed.push((request.op, request.offset, request.len));
            self.pending.push((slot, request));
        }
        fn coming(&mut self, op: Op, offset: u64, len: u32) {
            self.announced.push((op, offset, len));
        }
        fn submits_each(&self) -> bool {
            self.submit_each
        }
        fn submit_and_wait<F: FnMut(Event)>(
            &mut self,
            min: u32,
            timeout_ns: u64,
            mut on_event: F,
        ) -> std::io::Result<()> {
            self.calls.push((self.pending.len(), min));
            self.now += self.submit_cost_ns;
            for (slot, req) in self.pending.drain(..) {
                on_event(Event::Submitted { slot, at_ns: self.now });
                self.inflight.push((slot, req, self.now + self.latency_ns));
            }
            if self.hang {
                self.now += timeout_ns;
                return Ok(());
            }
            if min == 0 && self.poll_ns > 0 {
                self.now += self.poll_ns;
                while self.inflight.first().is_some_and(|r| r.2 <= self.now) {
                    let (slot, req, _) = self.inflight.remove(0);
                    on_event(Event::Completed { slot, result: req.len as i32, at_ns: self.now });
                }
            }
            let mut done = 0;
            while done < min && !self.inflight.is_empty() {
                if timeout_ns > 0 && self.inflight[0].2 > self.now + timeout_ns {
                    self.now += timeout_ns + self.wake_late_ns;
                    break;
                }
                let (slot, req, at) = self.inflight.remove(0);
                self.now = self.now.max(at);
                let result = if Some(req.offset) == self.fail_offset { -libc::EIO } else { req.len as i32 };
                on_event(Event::Completed { slot, result, at_ns: self.now });
                done += 1;
            }
            Ok(())
        }
        fn now(&self) -> u64 {
            self.now
        }
        fn idle(&mut self, ns: u64) {
            self.idle_calls.push(ns);
            self.now += ns;
        }
        fn cancel_all(&mut self) -> bool {
            self.inflight.clear();
            true
        }
    }

    fn context(workload: Workload, on_error: OnError) -> QueueContext {
        QueueContext {
            queue: 0,
            lanes: 1,
            workload,
            target_size: 1 << 20,
            shared: std::sync::Arc::new(Shared::new(1)),
            on_error,
            io_timeout_ns: 5_000_000_000,
            replay: None,
            write_shim: None,
            t0_ns: 0,
            window_ns: 100_000_000,
            expected_ns: None,
        }
    }

    fn drive(ctx: &QueueContext, backend: &mut ScriptedBackend) -> (QueueReport, Vec<Record>) {
        let (producer, mut consumer) = rtrb::RingBuffer::<Record>::new(1 << 16);
        let generator = OffsetGenerator::new(&ctx.workload, ctx.target_size, 0);
        let mut buffers =
            IoBuffers::new(ctx.workload.inflight_per_queue() as usize, 4096, ctx.workload.data, 1, 0, true);
        let mut report =
            QueueReport { queue: 0, cpu: None, issued: 0, completed: 0, leaked_buffers: false, write_shim: None };
        QueueLoop::new(ctx, generator, producer).run(backend, &mut buffers, &mut report);
        let mut records = Vec::new();
        while let Ok(r) = consumer.pop() {
            records.push(r);
        }
        (report, records)
    }

    fn workload(json: &str) -> Workload {
        Workload::from_json(json).unwrap()
    }

    #[test]
    fn stops_after_exactly_the_requested_ops_and_times_each_one() {
        let ctx = context(workload(r#"{"queue_depth":4,"stop":{"ops":100}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(10_000);
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(report.completed, 100);
        assert_eq!(records.len(), 100);
        assert!(records.iter().all(|r| r.latency_ns() >= 10_000));
        assert_eq!(*ctx.shared.reason.lock().unwrap(), Some(StopReason::Completed));
    }

    #[test]
    fn requests_are_announced_lookahead_ahead_and_drawn_as_without_it() {
        let ctx = context(
            workload(
                r#"{"mix":{"read":70,"write":30},"sizes":[4096,8192],"pattern":{"kind":"random"},"queue_depth":4,"stop":{"ops":200}}"#,
            ),
            OnError::Stop,
        );
        let mut backend = ScriptedBackend::new(10_000);
        drive(&ctx, &mut backend);
        assert_eq!(backend.pushed.len(), 200);
        // The k-th announcement is the request pushed LOOKAHEAD + k-th (the first LOOKAHEAD are chosen
        // before there is a backend to tell).
        assert_eq!(backend.announced.len(), 200);
        assert_eq!(backend.announced[..200 - LOOKAHEAD], backend.pushed[LOOKAHEAD..]);
        // Choosing ahead changes nothing: the same draws, in the same order, as one request at a time.
        let mut generator = OffsetGenerator::new(&ctx.workload, ctx.target_size, 0);
        let ops = [Op::Read, Op::Write];
        for &(op, offset, len) in &backend.pushed {
            let r = generator.pick(100);
            assert_eq!(op, ops[usize::from(r >= 70)]);
            let size = [4096u64, 8192][generator.pick(2) as usize];
            assert_eq!((len as u64, offset), (size, generator.next_offset(size)));
        }
    }

    #[test]
    fn a_backend_that_submits_each_request_gets_them_one_per_call() {
        let ctx = context(workload(r#"{"queue_depth":4,"stop":{"ops":40}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(10_000);
        backend.submit_each = true;
        backend.submit_cost_ns = 1_000;
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(report.completed, 40);
        // Filling the queue: three requests on their own, the fourth with the wait for a completion.
        assert_eq!(backend.calls[..4], [(1, 0), (1, 0), (1, 0), (1, 1)]);
        // Every call carries at most one request, and each request is stamped at its own call: the four
        // first submissions are a microsecond apart, not one stamp for all.
        assert!(backend.calls.iter().all(|&(n, _)| n <= 1));
        let submits: Vec<u64> = records[..4].iter().map(|r| r.submit_ns).collect();
        assert_eq!(submits, [2_000, 3_000, 4_000, 5_000]);

        let mut batched = ScriptedBackend::new(10_000);
        drive(&ctx, &mut batched);
        assert_eq!(batched.calls[0], (4, 1), "by default the free slots go in one call");
    }

    #[test]
    fn batch_mode_submits_its_batch_in_one_call_even_so() {
        let ctx = context(workload(r#"{"batch":{"size":8},"stop":{"ops":32}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(10_000);
        backend.submit_each = true;
        drive(&ctx, &mut backend);
        assert_eq!(backend.calls, [(8, 8), (8, 8), (8, 8), (8, 8)]);
    }

    #[test]
    fn an_io_error_stops_the_run_and_names_the_offset() {
        let ctx = context(workload(r#"{"queue_depth":1,"stop":{"ops":100}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(1_000);
        backend.fail_offset = Some(10 * 4096);
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(records.len(), 11, "the failed request is recorded, nothing after it is issued");
        assert_eq!(report.completed, 10);
        let reason = ctx.shared.reason.lock().unwrap().clone();
        match reason {
            Some(StopReason::IoError { offset, errno, .. }) => {
                assert_eq!(offset, 40960);
                assert_eq!(errno, libc::EIO);
            }
            other => panic!("unexpected stop reason {other:?}"),
        }
    }

    #[test]
    fn on_error_continue_carries_on() {
        let ctx = context(workload(r#"{"queue_depth":2,"stop":{"ops":300}}"#), OnError::Continue);
        let mut backend = ScriptedBackend::new(1_000);
        backend.fail_offset = Some(0); // sequential wraps every 256 requests: two failures
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(records.len(), 300);
        assert_eq!(records.iter().filter(|r| r.failed()).count(), 2);
        assert_eq!(report.completed, 298);
    }

    #[test]
    fn a_request_outstanding_past_the_timeout_ends_the_run() {
        let mut ctx = context(workload(r#"{"queue_depth":2,"stop":{"ops":100}}"#), OnError::Stop);
        ctx.io_timeout_ns = 300_000_000;
        let mut backend = ScriptedBackend::new(1_000);
        backend.hang = true;
        let (report, _) = drive(&ctx, &mut backend);
        assert_eq!(report.completed, 0);
        let reason = ctx.shared.reason.lock().unwrap().clone();
        match reason {
            Some(StopReason::Timeout { outstanding_ns, .. }) => {
                assert!(outstanding_ns > 300_000_000)
            }
            other => panic!("unexpected stop reason {other:?}"),
        }
        assert!(backend.now < 1_000_000_000, "noticed within a few waits, not after every request");
    }

    #[test]
    fn batch_mode_issues_whole_batches_with_idle_gaps() {
        let ctx = context(workload(r#"{"batch":{"size":8,"idle_ns":50000},"stop":{"ops":32}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(1_000);
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(report.completed, 32);
        assert_eq!(backend.calls, [(8, 8); 4]);
        assert_eq!(backend.idle_calls, vec![50_000; 3], "idle between batches, not before the first");
        // All eight of a batch are submitted at the same instant.
        assert!(records[..8].iter().all(|r| r.submit_ns == records[0].submit_ns));
    }

    #[test]
    fn each_request_carries_its_place_in_the_submission_order() {
        // Eight at a time in the same nanosecond: only the sequence tells their order apart.
        let ctx = context(
            workload(r#"{"pattern":{"kind":"random"},"batch":{"size":8,"idle_ns":50000},"stop":{"ops":32}}"#),
            OnError::Stop,
        );
        let mut backend = ScriptedBackend::new(1_000);
        let (_, records) = drive(&ctx, &mut backend);
        for r in &records {
            assert_eq!(backend.pushed[r.submit_seq as usize], (Op::from_index(r.op), r.offset, r.len));
        }
        let mut seqs: Vec<u64> = records.iter().map(|r| r.submit_seq).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, (0..32).collect::<Vec<u64>>());
    }

    #[test]
    fn warmup_requests_are_flagged_and_not_counted_against_the_limit() {
        let ctx = context(workload(r#"{"stop":{"ops":50},"warmup":{"ops":20}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(1_000);
        let (_, records) = drive(&ctx, &mut backend);
        assert_eq!(records.len(), 70);
        assert_eq!(records.iter().filter(|r| r.warmup).count(), 20);
        assert!(records[..20].iter().all(|r| r.warmup));
        let mut agg = Aggregator::new(0, 1_000_000, 1, None, &[]);
        records.iter().for_each(|r| agg.add(r));
        assert_eq!(agg.finish().per_op["read"].ops, 50);
    }

    #[test]
    fn a_time_limit_is_measured_from_the_end_of_warmup() {
        let ctx = context(workload(r#"{"stop":{"time_ns":100000},"warmup":{"time_ns":50000}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(1_000);
        let (_, records) = drive(&ctx, &mut backend);
        let warm = records.iter().filter(|r| r.warmup).count();
        let measured = records.len() - warm;
        assert!((49..=51).contains(&warm), "{warm}");
        assert!((99..=101).contains(&measured), "{measured}");
    }

    #[test]
    fn requests_issued_in_warmup_that_complete_after_it_count_without_shortening_the_rate() {
        // QD 8, 1 us per request: when warm-up ends, seven warm-up requests are still in flight.
        let ctx = context(workload(r#"{"queue_depth":8,"stop":{"ops":800},"warmup":{"ops":80}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(1_000);
        let (_, records) = drive(&ctx, &mut backend);
        let late = records.iter().filter(|r| r.issued_in_warmup && !r.warmup).count();
        assert!(late > 0, "some warm-up requests complete after the first measured one is issued");
        let mut agg = Aggregator::new(0, 1_000_000, 1, None, &[]);
        records.iter().for_each(|r| agg.add(r));
        let result = agg.finish();
        assert_eq!(result.per_op["read"].ops, 800 + late as u64);
        // The scripted device completes 8 requests per us; the measured rate says so (within one request
        // per QD at either end of the interval).
        let per_us = result.per_op["read"].iops / 1e6;
        assert!((7.6..=8.4).contains(&per_us), "{per_us} per us");
    }

    fn replay_context(qd: u32, arrivals: &[u64], ops: &[u8], timing: Timing, mode: Mode) -> QueueContext {
        let n = arrivals.len();
        let offsets: Vec<u64> = (0..n as u64).map(|i| i * 4096 % (1 << 20)).collect();
        let lens: Vec<u32> = ops.iter().map(|&o| if o == Op::Flush as u8 { 0 } else { 4096 }).collect();
        let replay = Replay::new(arrivals, ops, &offsets, &lens, timing, mode).unwrap();
        let mut ctx = context(
            workload(&format!(r#"{{"mix":{{"read":1,"write":1,"flush":1}},"queue_depth":{qd},"stop":{{"ops":{n}}}}}"#)),
            OnError::Stop,
        );
        ctx.replay = Some(std::sync::Arc::new(replay));
        ctx
    }

    #[test]
    fn an_open_loop_replay_submits_each_request_at_its_recorded_time() {
        // Arrivals 0, 0, 50 us, 51 us, 2 ms; the device answers in 10 us; QD 8 never fills.
        let arrivals = [5_000, 5_000, 55_000, 56_000, 2_005_000];
        let ctx = replay_context(8, &arrivals, &[0, 1, 0, 0, 1], Timing::Faithful, Mode::Open);
        let mut backend = ScriptedBackend::new(10_000);
        let (report, mut records) = drive(&ctx, &mut backend);
        assert_eq!(report.completed, 5);
        records.sort_by_key(|r| r.submit_ns);
        let submits: Vec<u64> = records.iter().map(|r| r.submit_ns - 1_000).collect();
        assert_eq!(submits, [0, 0, 50_000, 51_000, 2_000_000]);
        assert!(records.iter().all(|r| r.issue_lag_ns == 0 && r.latency_ns() == 10_000));
        let ops: Vec<u8> = records.iter().map(|r| r.op).collect();
        assert_eq!(ops, [0, 1, 0, 0, 1], "the trace's order");

        // Twice as fast: every gap halves.
        let ctx = replay_context(8, &arrivals, &[0, 1, 0, 0, 1], Timing::Scaled(2.0), Mode::Open);
        let (_, mut records) = drive(&ctx, &mut ScriptedBackend::new(10_000));
        records.sort_by_key(|r| r.submit_ns);
        let submits: Vec<u64> = records.iter().map(|r| r.submit_ns - 1_000).collect();
        assert_eq!(submits, [0, 0, 25_000, 25_500, 1_000_000]);
    }

    #[test]
    fn a_trace_split_over_two_queues_keeps_its_timing_from_one_start_whatever_queue_starts_later() {
        // Six reads 10 us apart, dealt to queues 0, 1, 0, 1, ...; queue 1's thread starts 30 us after queue 0's.
        let arrivals: Vec<u64> = (0..6).map(|i| i * 10_000).collect();
        let mut base = replay_context(4, &arrivals, &[0; 6], Timing::Faithful, Mode::Open);
        let whole = std::sync::Arc::into_inner(base.replay.take().expect("a replay")).expect("one owner");
        let replay = std::sync::Arc::new(whole.split(&[0, 1, 0, 1, 0, 1], 2).unwrap());
        let shared = std::sync::Arc::new(Shared::new(2));
        let queue = |q: u32| {
            let mut ctx = context(Workload { queues: 2, ..base.workload.clone() }, OnError::Stop);
            (ctx.queue, ctx.replay, ctx.shared) = (q, Some(replay.clone()), shared.clone());
            ctx
        };
        let (first, second) = (queue(0), queue(1));
        let (report, records) = drive(&first, &mut ScriptedBackend::new(1_000));
        assert_eq!(report.completed, 3);
        assert_eq!(records.iter().map(|r| r.submit_ns).collect::<Vec<_>>(), [1_000, 21_000, 41_000]);
        let mut late = ScriptedBackend::new(1_000);
        late.now = 31_000;
        let (report, records) = drive(&second, &mut late);
        assert_eq!(report.completed, 3);
        // Due at 10, 30 and 50 us from queue 0's start (1 us on the clock): the first goes late, the others on time
        // (each queue counting from its own start would issue them at 41, 61 and 81 us).
        let got: Vec<_> = records.iter().map(|r| (r.submit_ns, r.issue_lag_ns, r.queue)).collect();
        assert_eq!(got, [(31_000, 20_000, 1), (31_000, 0, 1), (51_000, 0, 1)]);
    }

    #[test]
    fn an_open_loop_replay_that_finds_the_queue_full_goes_late_and_says_by_how_much() {
        // Four requests at once at QD 2 on a device that takes 10 us: the last two wait for a slot.
        let ctx = replay_context(2, &[0, 0, 0, 0], &[0; 4], Timing::Faithful, Mode::Open);
        let (_, mut records) = drive(&ctx, &mut ScriptedBackend::new(10_000));
        records.sort_by_key(|r| r.submit_ns);
        let lags: Vec<u64> = records.iter().map(|r| r.issue_lag_ns).collect();
        assert_eq!(lags, [0, 0, 10_000, 10_000]);
    }

    #[test]
    fn a_closed_loop_replay_at_qd_1_serialises_and_keeps_the_gaps() {
        // Gaps of 0, 100 us, 0 after each issue; each request takes 30 us, so a request waits for the one before.
        let ctx = replay_context(1, &[0, 0, 100_000, 100_000], &[0; 4], Timing::Faithful, Mode::Closed);
        let (_, records) = drive(&ctx, &mut ScriptedBackend::new(30_000));
        let submits: Vec<u64> = records.iter().map(|r| r.submit_ns - 1_000).collect();
        assert_eq!(submits, [0, 30_000, 130_000, 160_000]);
        assert!(records.windows(2).all(|w| w[1].submit_ns >= w[0].complete_ns), "one at a time");
        assert!(records.iter().all(|r| r.issue_lag_ns == 0), "waiting for the slot is the rule, not lag");

        // As fast as possible at QD 2: two in flight at every instant, back to back.
        let ctx = replay_context(2, &[0, 7, 9, 500, 900, 1000], &[0; 6], Timing::Afap, Mode::Closed);
        let (_, records) = drive(&ctx, &mut ScriptedBackend::new(30_000));
        let submits: Vec<u64> = records.iter().map(|r| r.submit_ns - 1_000).collect();
        assert_eq!(submits, [0, 0, 30_000, 30_000, 60_000, 60_000]);
    }

    #[test]
    fn a_request_due_soon_is_waited_for_by_polling_so_it_goes_on_time() {
        // Requests every 50 us, each taking 80 us: one is always in flight when the next is due. On a clock that
        // moves by itself (1 us per poll) the loop polls rather than blocks, so each goes within a poll of its
        // time, and completions are reaped within a poll of theirs.
        let arrivals: Vec<u64> = (0..20).map(|i| i * 50_000).collect();
        let ctx = replay_context(8, &arrivals, &[0; 20], Timing::Faithful, Mode::Open);
        let mut backend = ScriptedBackend::new(80_000);
        backend.poll_ns = 1_000;
        let (_, mut records) = drive(&ctx, &mut backend);
        records.sort_by_key(|r| r.submit_ns);
        assert!(backend.calls.iter().any(|&(_, min)| min == 0), "it polled");
        for (k, r) in records.iter().enumerate() {
            assert!(r.submit_ns - 1_000 - k as u64 * 50_000 <= 1_000, "request {k} went late: {}", r.submit_ns);
            assert!((80_000..=81_000).contains(&r.latency_ns()), "request {k}: {}", r.latency_ns());
            assert!(r.issue_lag_ns <= 1_000);
        }
    }

    #[test]
    fn a_request_due_later_is_not_waited_for_by_a_timer_that_wakes_late() {
        // Requests every 1 ms, each taking 5 ms, so several are always in flight when the next is due; a wait in
        // the kernel that ends by its timeout returns 50 us late (the default timer slack). The loop blocks only
        // until the spin range before the due time and polls the rest, so each request goes within a poll of its
        // time instead of 50 us late.
        let arrivals: Vec<u64> = (0..20).map(|i| i * 1_000_000).collect();
        let ctx = replay_context(16, &arrivals, &[0; 20], Timing::Faithful, Mode::Open);
        let mut backend = ScriptedBackend::new(5_000_000);
        backend.poll_ns = 1_000;
        backend.wake_late_ns = 50_000;
        let (_, mut records) = drive(&ctx, &mut backend);
        records.sort_by_key(|r| r.submit_ns);
        assert_eq!(records.len(), 20);
        for (k, r) in records.iter().enumerate() {
            assert!(r.issue_lag_ns <= 1_000, "request {k} went {} ns late", r.issue_lag_ns);
        }
    }

    #[test]
    fn a_closed_loop_flush_waits_for_what_came_before_and_holds_back_what_follows() {
        // read, read, flush, read at QD 4, all at once: the flush goes when both reads are done, the last read
        // when the flush is.
        let ctx = replay_context(4, &[0; 4], &[0, 0, Op::Flush as u8, 0], Timing::Afap, Mode::Closed);
        let (_, records) = drive(&ctx, &mut ScriptedBackend::new(10_000));
        let submits: Vec<(u8, u64)> = records.iter().map(|r| (r.op, r.submit_ns - 1_000)).collect();
        assert_eq!(submits, [(0, 0), (0, 0), (4, 10_000), (0, 20_000)]);
    }

    #[test]
    fn a_rate_limit_spaces_submissions_and_keeps_the_wait_out_of_latency() {
        // 1000 requests/s for 1 s at QD 4 on a device that answers in 10 us: one request per ms.
        let ctx = context(
            workload(r#"{"queue_depth":4,"stop":{"time_ns":1000000000},"rate":{"iops":{"read":1000}}}"#),
            OnError::Stop,
        );
        let mut backend = ScriptedBackend::new(10_000);
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(report.completed, 1000, "the 1001st is due when the time limit ends the run");
        for (k, r) in records.iter().enumerate() {
            assert_eq!(r.submit_ns, 1_000 + k as u64 * 1_000_000, "request {k} is submitted when due");
            assert_eq!(r.latency_ns(), 10_000, "the time held back is not latency (fio's clat starts at submission)");
        }
    }

    #[test]
    fn a_long_rate_gap_is_waited_in_slices_so_a_stop_is_seen() {
        // One request a second: the loop waits at most 100 ms at a time, then works out the rest again.
        let ctx = context(workload(r#"{"stop":{"ops":2},"rate":{"iops":{"read":1}}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(1_000);
        let (_, records) = drive(&ctx, &mut backend);
        assert_eq!(records[1].submit_ns - records[0].submit_ns, 1_000_000_000);
        assert!(backend.idle_calls.iter().all(|&ns| ns <= 100_000_000), "{:?}", backend.idle_calls);
    }

    #[test]
    fn a_bandwidth_limit_paces_by_bytes_per_direction_over_the_queues() {
        // 2 queues share 8 MB/s of writes: each queue 4 MB/s, so one 4 KiB write per 1.024 ms; reads unlimited.
        let mut ctx = context(
            workload(
                r#"{"mix":{"write":100},"queues":2,"queue_depth":2,"stop":{"time_ns":100000000},
                    "rate":{"bytes_per_s":{"write":8000000}}}"#,
            ),
            OnError::Stop,
        );
        ctx.shared = std::sync::Arc::new(Shared::new(2));
        let mut backend = ScriptedBackend::new(5_000);
        let (_, records) = drive(&ctx, &mut backend);
        assert_eq!(records.len(), 98, "100 ms / 1.024 ms per request, the first at 0");
        assert_eq!(records[1].submit_ns - records[0].submit_ns, 1_024_000);
    }

    #[test]
    fn with_requests_in_flight_a_held_back_queue_still_reaps_completions_as_they_arrive() {
        // Requests take 3 ms but are due every 1 ms: the loop waits for completions at most until the next is
        // due, so three stay in flight and each completes exactly 3 ms after its submission.
        let ctx =
            context(workload(r#"{"queue_depth":8,"stop":{"ops":50},"rate":{"iops":{"read":1000}}}"#), OnError::Stop);
        let mut backend = ScriptedBackend::new(3_000_000);
        let (_, records) = drive(&ctx, &mut backend);
        assert_eq!(records.len(), 50);
        assert!(records.iter().all(|r| r.latency_ns() == 3_000_000));
        let mut submits: Vec<u64> = records.iter().map(|r| r.submit_ns).collect();
        submits.sort_unstable();
        assert!(submits.windows(2).all(|w| w[1] - w[0] == 1_000_000), "{submits:?}");
    }

    fn shim_context(qd: u32, arrivals: &[u64], ops: &[u8], flush_speed_bps: f64) -> QueueContext {
        let mut ctx = replay_context(qd, arrivals, ops, Timing::Faithful, Mode::Open);
        // A 202 kB buffer: 49 writes of 4 KiB fit, and the urgency reaches 0.5 at 4 MB/s with the 49th; the 50th
        // would overflow it (a full-buffer flush is imminent): from then on writes are held, and let in as the
        // model's buffer drains to half full.
        let buffer_bytes = 202_000;
        let period_ns = 100_000_000;
        ctx.write_shim = Some(WriteShimSettings {
            flush_speed_bps,
            period_ns,
            max_held_bytes: 256 << 20,
            buffer_bytes,
            target_fill: 0.5,
            write_through: false,
            bound_mean_delay: false,
            hold_in_read_storms: false,
        });
        ctx
    }

    /// 100 writes at once, then a read every 50 us for 10 ms.
    fn burst_then_reads() -> (Vec<u64>, Vec<u8>) {
        let arrivals: Vec<u64> = (0..300u64).map(|i| if i < 100 { 0 } else { (i - 100) * 50_000 }).collect();
        let ops: Vec<u8> = (0..300).map(|i| if i < 100 { Op::Write as u8 } else { Op::Read as u8 }).collect();
        (arrivals, ops)
    }

    #[test]
    fn the_write_shim_spaces_a_burst_in_order_and_never_delays_a_read() {
        // 4 MB/s: urgency reaches 0.5 at 2 MB per 100 ms, the 49th 4 KiB write, and the 50th would overflow the
        // buffer; the rest are let in one by one.
        let (arrivals, ops) = burst_then_reads();
        let ctx = shim_context(64, &arrivals, &ops, 4e6);
        let (report, records) = drive(&ctx, &mut ScriptedBackend::new(10_000));
        assert_eq!(records.len(), 300);
        let mut writes: Vec<(u64, u64)> =
            records.iter().filter(|r| r.op == Op::Write as u8).map(|r| (r.offset, r.submit_ns - 1_000)).collect();
        writes.sort_unstable();
        assert_eq!(writes.iter().filter(|w| w.1 == 0).count(), 49, "the writes before the overflow go at once");
        assert!(writes.windows(2).all(|w| w[1].1 >= w[0].1), "in the trace's order: {writes:?}");
        assert!(writes[49..].windows(2).all(|w| w[1].1 - w[0].1 >= 500_000), "spaced at least 0.5 ms");
        for r in records.iter().filter(|r| r.op == Op::Read as u8) {
            assert_eq!(r.issue_lag_ns, 0, "a read goes on time");
        }
        let shim = report.write_shim.expect("the shim's report");
        assert_eq!((shim.writes, shim.delayed_writes, shim.dropped_at_end), (100, 51, 0));
        assert_eq!(shim.delay_ns_max, writes[99].1);
        assert_eq!(shim.max_held_seen, 51 * 4096);
        assert_eq!(shim.held_bytes_max[0], 51 * 4096);
    }

    #[test]
    fn a_held_write_is_late_from_its_time_in_the_trace_so_its_issue_lag_counts_the_hold() {
        // The burst's writes are all due at 0: each one's issue lag is its whole wait, the shim's hold included
        // (submission minus due time), so lag + latency is what an application behind the shim waits.
        let (arrivals, ops) = burst_then_reads();
        let ctx = shim_context(64, &arrivals, &ops, 4e6);
        let (_, records) = drive(&ctx, &mut ScriptedBackend::new(10_000));
        let writes: Vec<&Record> = records.iter().filter(|r| r.op == Op::Write as u8).collect();
        assert_eq!(writes.len(), 100);
        assert!(writes.iter().all(|r| r.issue_lag_ns == r.submit_ns - 1_000), "late from due time 0");
        assert_eq!(writes.iter().filter(|r| r.issue_lag_ns >= 500_000).count(), 51, "the 51 held ones");
    }

    #[test]
    fn a_flush_in_a_replay_lets_everything_held_go_before_it() {
        // The burst, and a flush 20 ms later: what is still held then goes before the flush does.
        let (mut arrivals, mut ops) = burst_then_reads();
        arrivals.truncate(101);
        ops.truncate(101);
        arrivals[100] = 20_000_000;
        ops[100] = Op::Flush as u8;
        let ctx = shim_context(64, &arrivals, &ops, 4e6);
        let (report, records) = drive(&ctx, &mut ScriptedBackend::new(10_000));
        let flush = records.iter().find(|r| r.op == Op::Flush as u8).unwrap();
        assert_eq!(flush.submit_ns - 1_000, 20_000_000, "the flush itself is not delayed");
        let writes: Vec<u64> = records.iter().filter(|r| r.op == Op::Write as u8).map(|r| r.submit_ns).collect();
        assert_eq!(writes.len(), 100);
        assert!(writes.iter().all(|&w| w <= flush.submit_ns), "no write held past the flush");
        assert!(writes.iter().filter(|&&w| w == flush.submit_ns).count() > 10, "the flush let the rest go");
        assert_eq!(report.write_shim.unwrap().flush_releases, 1);
    }

    #[test]
    fn released_writes_keep_a_quarter_of_the_queue_for_reads() {
        // No slot is kept under a depth of 4 (one kept would be a third of the queue or more); from 4 on, a quarter.
        let limits: Vec<u32> = [1, 2, 3, 4, 8, 32, 33].iter().map(|&d| release_limit(d)).collect();
        assert_eq!(limits, [1, 2, 3, 3, 6, 24, 25]);
        // The burst on a drive slow enough (10 ms a request) that the held writes, let in at least 0.5 ms apart,
        // would pile up some twenty deep if nothing capped them: at QD 8 at most 6 writes are ever in flight
        // once the shim releases, and the cap is reached.
        let (arrivals, ops) = burst_then_reads();
        let ctx = shim_context(8, &arrivals, &ops, 4e6);
        let (report, records) = drive(&ctx, &mut ScriptedBackend::new(10_000_000));
        assert_eq!(records.len(), 300);
        let writes: Vec<&Record> = records.iter().filter(|r| r.op == Op::Write as u8).collect();
        let mut offsets: Vec<u64> = writes.iter().map(|r| r.offset).collect();
        offsets.sort_unstable();
        // The trace writes in offset order, and the shim holds the last ones (the burst's tail).
        let shim = report.write_shim.expect("the shim's report");
        assert_eq!((shim.writes, shim.dropped_at_end), (100, 0));
        let held = shim.delayed_writes as usize;
        assert!(held > 20, "{held} held");
        let first_held = offsets[100 - held];
        let in_flight_at = |t: u64| writes.iter().filter(|w| w.submit_ns <= t && t < w.complete_ns).count();
        let at_release: Vec<usize> =
            writes.iter().filter(|w| w.offset >= first_held).map(|w| in_flight_at(w.submit_ns)).collect();
        assert_eq!(at_release.len(), held);
        assert_eq!(*at_release.iter().max().unwrap(), release_limit(8) as usize, "{at_release:?}");
        // The slots kept for reads were used: reads went in while the held writes were being let in.
        let (first, last) = (
            writes.iter().filter(|w| w.offset >= first_held).map(|w| w.submit_ns).min().unwrap(),
            writes.iter().map(|w| w.submit_ns).max().unwrap(),
        );
        assert!(records.iter().any(|r| r.op == Op::Read as u8 && (first..last).contains(&r.submit_ns)));
    }

    #[test]
    fn a_shim_whose_urgency_stays_low_changes_nothing() {
        let (arrivals, ops) = burst_then_reads();
        let plain = replay_context(64, &arrivals, &ops, Timing::Faithful, Mode::Open);
        let (_, without) = drive(&plain, &mut ScriptedBackend::new(10_000));
        let ctx = shim_context(64, &arrivals, &ops, 10e9);
        let (report, with) = drive(&ctx, &mut ScriptedBackend::new(10_000));
        let key = |r: &Record| (r.op, r.offset, r.submit_ns, r.complete_ns, r.issue_lag_ns);
        assert_eq!(with.iter().map(key).collect::<Vec<_>>(), without.iter().map(key).collect::<Vec<_>>());
        let shim = report.write_shim.unwrap();
        assert_eq!((shim.writes, shim.delayed_writes, shim.urgent_periods), (100, 0, 0));
    }
}
