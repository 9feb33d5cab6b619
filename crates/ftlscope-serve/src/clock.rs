//! The simulated drive on the wall clock: requests are submitted to the model at the virtual instant they
//! arrive (virtual time = wall time since attach), and each is answered when the model says it completes.
//!
//! The answer is sent `overhead` early: a request reaches us `inbound` after the program issued it and the
//! answer reaches the program `outbound` after we send it, and the calibrated path overhead is their sum.
//! Sending it that much early makes the latency the program sees the model's, wherever the model's
//! latency exceeds the path's; below that the path is the bottleneck (counted in [`Stats::path_limited`]).
//! A closed loop at QD 1 then reaches the model at exactly the instant its previous command completed, as in
//! the engine's virtual-time runs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use ftlscope_sim::device::{SimDevice, SimOp, SimRequest, Status};
use ftlscope_sim::time::SimTime;
use serde::Serialize;

/// What to do when a request completes: send the FUSE reply (with the data, or an error).
pub type Answer = Box<dyn FnOnce(Result<(), i32>) + Send>;

/// Below this, the clock thread spins instead of sleeping: a sleep wakes up tens of microseconds late even
/// at real-time priority, which would be a good part of an SSD read's latency. Short, so that a fast drive's
/// clock thread does not hold a core.
const SPIN_NS: u64 = 20_000;

/// A read or write at least this long may be the first fragment of a request the loop device split. The block
/// layer splits a request of more than 128 segments (the loop device's `max_segments`, which neither sysfs
/// nor `LOOP_CONFIGURE` can raise) into one of 128 segments and the rest, and a program's buffer is in 4 KiB
/// pages: a 1 MiB read reaches us as about 524 KiB and 500 KiB. A real drive's block layer passes it whole.
pub const SPLIT_MIN: u64 = 128 * 4096;
/// Fragments are merged back up to 1 MiB, the largest request FUSE passes whole (256 pages, the kernel's
/// `fuse.max_pages_limit`): a request that arrives this long was not split and is never held.
pub const MERGE_MAX: u64 = 1 << 20;
/// How long (wall ns) a possible first fragment waits for its continuation before it is started alone. The
/// loop worker sends a split request's fragments back to back (a few microseconds apart, tens when the
/// server's thread holds the CPU the worker runs on); a fragment's model time starts at its arrival
/// whatever this wait, so it delays an answer only where the model is faster than the wait.
pub const HOLD_NS: u64 = 100_000;

/// Counters the served drive reports (`ftlscope sim list`, the attach output).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Stats {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
    pub flushes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Requests whose model latency was below the path overhead: answered at once, so the path, not the
    /// model, set their latency.
    pub path_limited: u64,
    /// Answers sent after their due instant, and by how much in total and at most (the clock thread's
    /// wake-up error, on top of the path overhead).
    pub late: u64,
    pub late_total_ns: u64,
    pub late_max_ns: u64,
    pub media_errors: u64,
    /// Sum of the model's latencies (completion - arrival, queueing in the disk included) of the requests
    /// answered so far: divided by `requests`, what a program should see on average.
    pub model_latency_total_ns: u64,
    /// FUSE requests that are not I/O (attributes, open, release): each is a round trip of the path too.
    pub metadata_requests: u64,
    /// Virtual ns since attach (the model's clock; equals wall time since attach).
    pub virtual_ns: u64,
    /// Requests that continued the one before them (the loop device's split of one larger request) and were
    /// served with it as one command (see [`SPLIT_MIN`]).
    pub merged: u64,
    /// How long (wall ns) the merged requests' first fragments waited for them, in total and at most.
    pub merge_wait_total_ns: u64,
    pub merge_wait_max_ns: u64,
    /// Requests held as a possible first fragment whose continuation did not come within [`HOLD_NS`].
    pub held_alone: u64,
    /// Requests answered so far, and the path's part of their time that this server measures on every
    /// request (see [`Drive::submit_received`]): `server_total_ns` from each request's arrival in its handler
    /// to its reply written, of which `server_wait_total_ns` was the model's time held on purpose (until
    /// the answer's instant); the rest, `server_total_ns - server_wait_total_ns`, is the server's own cost
    /// (copying the data, the clock thread's lateness, the reply's system call). The kernel's part (loop,
    /// FUSE, completion) is the block layer's time for the same requests less `server_total_ns`
    /// (`ftlscope.attach_server` reads the loop device's counters beside these).
    pub answered: u64,
    pub server_total_ns: u64,
    pub server_wait_total_ns: u64,
}

/// When a command arrived, started (arrival, or dispatch from a disk's queue) and completes, in virtual ns.
struct Timing {
    started: u64,
    arrived: u64,
    done: u64,
    len: u64,
}

/// A possible first fragment of a split request, waiting for its continuation (see [`SPLIT_MIN`]).
struct Held {
    request: SimRequest,
    /// Virtual ns of the first fragment's arrival: the merged command's arrival.
    arrived: u64,
    answers: Vec<Pending>,
    /// Wall ns when it arrived, and after which it is started as it is.
    since: u64,
    until: u64,
}

impl Held {
    fn continued_by(&self, next: &SimRequest) -> bool {
        self.continued_at(next.op, next.offset) && self.request.len + next.len <= MERGE_MAX
    }

    fn continued_at(&self, op: SimOp, offset: u64) -> bool {
        op == self.request.op && offset == self.request.offset + self.request.len
    }
}

fn may_be_split(request: &SimRequest) -> bool {
    matches!(request.op, SimOp::Read | SimOp::Write) && request.len >= SPLIT_MIN && request.len < MERGE_MAX
}

/// A request's answer with the wall instants (ns since attach) the server's own time is measured from: when
/// its handler received it and when it was submitted to the drive.
struct Pending {
    answer: Answer,
    received: u64,
    submitted: u64,
}

struct Due {
    at: u64,
    arrived: u64,
    done: u64,
    path_limited: bool,
    pending: Pending,
    result: Result<(), i32>,
}

struct State {
    device: Box<dyn SimDevice>,
    /// The last virtual instant anything was submitted at: submissions must not go back in time.
    last_v: u64,
    writes: u64,
    sequence: u64,
    /// Answers waiting for their wall-clock instant, by (instant, sequence).
    order: BinaryHeap<Reverse<(u64, u64)>>,
    due: HashMap<u64, Due>,
    /// Commands queued in a disk's NCQ, not yet started, by tag, with their arrival, length and answers (one
    /// per fragment).
    queued: HashMap<u64, (u64, u64, Vec<Pending>)>,
    /// Possible first fragments, in arrival order (several at QD > 1: another request's fragments may come
    /// between a fragment and its continuation).
    held: Vec<Held>,
    stats: Stats,
}

/// The model, its clock and the answers waiting for their instant; shared by the FUSE threads (which
/// submit) and the clock thread (which answers).
pub struct Drive {
    state: Mutex<State>,
    wake: Condvar,
    t0: Instant,
    queueing: bool,
    /// Calibrated path overhead (ns): answers go out this much before the model's completion.
    overhead_ns: AtomicU64,
    /// ... plus this many picoseconds per byte of data (copying the data through FUSE costs per byte).
    overhead_ps_per_byte: AtomicU64,
    /// False while the path is being calibrated: every request is answered at once and the model is not
    /// touched.
    model_on: AtomicBool,
    stop: AtomicBool,
    metadata: AtomicU64,
    /// How long a possible first fragment waits for its continuation: [`HOLD_NS`]; the tests lengthen it, so
    /// that their submitting thread, descheduled between two fragments, cannot decide whether they merge.
    hold_ns: u64,
    /// [`Stats::answered`], [`Stats::server_total_ns`], [`Stats::server_wait_total_ns`]: counted after each
    /// reply is written, outside the drive's lock.
    answered: AtomicU64,
    server_ns: AtomicU64,
    server_wait_ns: AtomicU64,
}

impl Drive {
    pub fn new(device: Box<dyn SimDevice>) -> Drive {
        let queueing = device.queue_depth() > 1;
        Drive {
            state: Mutex::new(State {
                device,
                last_v: 0,
                writes: 0,
                sequence: 0,
                order: BinaryHeap::new(),
                due: HashMap::new(),
                queued: HashMap::new(),
                held: Vec::new(),
                stats: Stats::default(),
            }),
            wake: Condvar::new(),
            t0: Instant::now(),
            queueing,
            overhead_ns: AtomicU64::new(0),
            overhead_ps_per_byte: AtomicU64::new(0),
            model_on: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            metadata: AtomicU64::new(0),
            hold_ns: HOLD_NS,
            answered: AtomicU64::new(0),
            server_ns: AtomicU64::new(0),
            server_wait_ns: AtomicU64::new(0),
        }
    }

    fn wall_ns(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    /// Start answering with the model's timing, `overhead_ns` plus `ps_per_byte` for each byte of the
    /// request early (see the module comment).
    pub fn start_model(&self, overhead_ns: u64, ps_per_byte: u64) {
        self.overhead_ns.store(overhead_ns, Ordering::SeqCst);
        self.overhead_ps_per_byte.store(ps_per_byte, Ordering::SeqCst);
        self.model_on.store(true, Ordering::SeqCst);
    }

    /// The path's overhead for a request of `len` bytes.
    pub fn overhead_ns(&self, len: u64) -> u64 {
        self.overhead_ns.load(Ordering::SeqCst) + self.overhead_ps_per_byte.load(Ordering::SeqCst) * len / 1000
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.state.lock().expect("drive lock").stats;
        s.virtual_ns = self.wall_ns();
        s.metadata_requests = self.metadata.load(Ordering::Relaxed);
        s.answered = self.answered.load(Ordering::Relaxed);
        s.server_total_ns = self.server_ns.load(Ordering::Relaxed);
        s.server_wait_total_ns = self.server_wait_ns.load(Ordering::Relaxed);
        s
    }

    /// Count a FUSE request that is not I/O.
    pub fn note_metadata(&self) {
        self.metadata.fetch_add(1, Ordering::Relaxed);
    }

    /// Wall ns since attach, the clock a request's `received` instant is read from.
    pub fn now_ns(&self) -> u64 {
        self.wall_ns()
    }

    /// A write starting at `offset` has just been received: its data is copied to the store before it is
    /// submitted. If it continues a held fragment, the fragment waits [`HOLD_NS`] more from now, so that the
    /// copy (tens to hundreds of microseconds for the 500 KiB second half of a split 1 MiB write, on a busy
    /// machine) does not decide whether the two are served as one command.
    pub fn receiving(&self, op: SimOp, offset: u64) {
        if !self.model_on.load(Ordering::Relaxed) {
            return;
        }
        let mut st = self.state.lock().expect("drive lock");
        let until = self.wall_ns() + self.hold_ns;
        if let Some(held) = st.held.iter_mut().find(|h| h.continued_at(op, offset)) {
            held.until = held.until.max(until);
        }
    }

    /// Submit `request` now; `answer` runs when the model completes it (at once while calibrating).
    pub fn submit(&self, request: SimRequest, answer: Answer) {
        self.submit_received(request, self.wall_ns(), answer);
    }

    /// Submit `request`, which its handler received at wall `received` ([`Drive::now_ns`]) and prepared since
    /// (a small read's data, a write's copy to the store): that time counts in the server's own part of the
    /// path ([`Stats::server_total_ns`]).
    pub fn submit_received(&self, request: SimRequest, received: u64, answer: Answer) {
        if !self.model_on.load(Ordering::SeqCst) {
            answer(Ok(()));
            return;
        }
        let mut st = self.state.lock().expect("drive lock");
        let wall = self.wall_ns();
        let answer = Pending { answer, received: received.min(wall), submitted: wall };
        count(&mut st.stats, &request);
        let mut lost = Vec::new();
        if let Some(i) = st.held.iter().position(|h| h.continued_by(&request)) {
            st.stats.merged += 1;
            let held = &mut st.held[i];
            let wait = wall.saturating_sub(held.since);
            held.request.len += request.len;
            held.answers.push(answer);
            // A fragment this long may itself be followed by one more (a three-way split).
            let more = may_be_split(&request) && held.request.len < MERGE_MAX;
            if more {
                (held.since, held.until) = (wall, wall + self.hold_ns);
            }
            st.stats.merge_wait_total_ns += wait;
            st.stats.merge_wait_max_ns = st.stats.merge_wait_max_ns.max(wait);
            if !more {
                lost.extend(self.start_held(&mut st, i));
            }
        } else if may_be_split(&request) {
            let now = wall.max(st.last_v);
            // A write's continuation carries as much data again, which the kernel copies out of /dev/fuse
            // before this server sees it: the first half waits as long again as its own data took from its
            // receipt to here (its copy to the store), on top of the hold. Without it, at load 30 on 2 CPUs,
            // 11 of 5,050 1 MiB writes at QD 8 were merged (every one split).
            let copy = if request.op == SimOp::Write { wall - answer.received } else { 0 };
            st.held.push(Held {
                request,
                arrived: now,
                answers: vec![answer],
                since: wall,
                until: wall + self.hold_ns + copy,
            });
        } else {
            // Everything held arrived before this request: started first, in arrival order.
            if let Some(last) = st.held.len().checked_sub(1) {
                lost.extend(self.start_held(&mut st, last));
            }
            let now = wall.max(st.last_v);
            lost.extend(self.start(&mut st, request, now, vec![answer]));
        }
        // Answers due already (the model was faster than the path) go from this thread, without waking the
        // clock thread, as the calibration's answers were sent.
        let now = st.last_v.max(wall);
        let ready = take_ready(&mut st, now);
        let waiting = !st.held.is_empty() || !st.order.is_empty() || !st.queued.is_empty();
        drop(st);
        self.answer_lost(lost);
        self.answer_due(ready);
        if waiting {
            self.wake.notify_one();
        }
    }

    /// Start the held command `i` and, before it, every one held since earlier (alone: submissions keep the
    /// order of arrival).
    fn start_held(&self, st: &mut State, i: usize) -> Vec<Pending> {
        let mut lost = Vec::new();
        for held in st.held.drain(..=i).collect::<Vec<_>>() {
            if held.answers.len() == 1 {
                st.stats.held_alone += 1;
            }
            lost.extend(self.start(st, held.request, held.arrived, held.answers));
        }
        lost
    }

    /// Submit a command to the model at virtual `arrived` (never before the last submission): `answers`, one
    /// per request it serves, are scheduled for its completion. Returns the answers of a command the model
    /// never completes (a `[faults]` model's lost command): the caller answers them with an error at once,
    /// rather than hang the loop device, as the kernel would time it out.
    fn start(&self, st: &mut State, request: SimRequest, arrived: u64, answers: Vec<Pending>) -> Vec<Pending> {
        let now = arrived.max(st.last_v);
        st.last_v = now;
        let mut request = request;
        if request.op == SimOp::Write {
            // The same fingerprint the engine's simulated runs give a write: offset and a write counter.
            st.writes += 1;
            request.fingerprint = (request.offset / 512) as u32 ^ (st.writes as u32).rotate_left(16);
        }
        if self.queueing {
            st.sequence += 1;
            let tag = st.sequence;
            st.device.enqueue(SimTime(now), &request, tag);
            st.queued.insert(tag, (now, request.len, answers));
            self.dispatch(st, now);
            return Vec::new();
        }
        let done = st.device.submit_checked(SimTime(now), &request);
        let result = match done.status {
            Status::Ok => Ok(()),
            Status::MediaError => {
                st.stats.media_errors += 1;
                Err(libc::EIO)
            }
            Status::Lost => return answers,
        };
        let timing = Timing { started: now, arrived: now, done: done.at.ns(), len: request.len };
        self.schedule(st, timing, answers, result);
        Vec::new()
    }

    /// Queue the answers of a command the model started at `started` (its arrival, or its dispatch from the
    /// disk's queue) and completes at `done`: one per request it serves (two for a 1 MiB read the loop device
    /// split), each early by the path's overhead for the whole command, which the calibration measured the
    /// same way (its 1 MiB reads were split too).
    fn schedule(&self, st: &mut State, timing: Timing, answers: Vec<Pending>, result: Result<(), i32>) {
        let Timing { started, arrived, done, len } = timing;
        let at = done.saturating_sub(self.overhead_ns(len));
        // The model served it faster than the path carries it: the path sets its latency.
        let path_limited = at <= started;
        for answer in answers {
            if path_limited {
                st.stats.path_limited += 1;
            }
            st.sequence += 1;
            let seq = st.sequence;
            st.order.push(Reverse((at, seq)));
            st.due.insert(seq, Due { at, arrived, done, path_limited, pending: answer, result });
        }
    }

    /// Start what a queueing disk can start at virtual `now` (its NCQ picks among the waiting commands).
    fn dispatch(&self, st: &mut State, now: u64) {
        while let Some(next) = st.device.next_dispatch() {
            if next.ns() > now {
                break;
            }
            // Start it when the disk became free, not when this thread noticed: a late wake-up must not
            // slow the disk down.
            let start = next.ns().max(st.last_v);
            st.last_v = start;
            let Some((tag, done)) = st.device.dispatch(SimTime(start)) else { break };
            let (arrived, len, answers) = st.queued.remove(&tag).expect("a dispatched tag was queued");
            self.schedule(st, Timing { started: start, arrived, done: done.ns(), len }, answers, Ok(()));
        }
    }

    /// The clock thread: answers each request at its instant, starts queued commands when the disk is free.
    pub fn run_clock(&self) {
        let mut st = self.state.lock().expect("drive lock");
        loop {
            let now = self.wall_ns();
            let mut lost = Vec::new();
            if let Some(i) = st.held.iter().rposition(|h| h.until <= now) {
                lost = self.start_held(&mut st, i);
            }
            if self.queueing {
                self.dispatch(&mut st, now);
            }
            let ready = take_ready(&mut st, now);
            if !ready.is_empty() || !lost.is_empty() {
                drop(st);
                self.answer_lost(lost);
                self.answer_due(ready);
                st = self.state.lock().expect("drive lock");
                continue;
            }
            let next_answer = st.order.peek().map(|Reverse((at, _))| *at);
            let next_dispatch = if self.queueing { st.device.next_dispatch().map(|t| t.ns()) } else { None };
            let next_held = st.held.iter().map(|h| h.until).min();
            let next = [next_answer, next_dispatch, next_held].into_iter().flatten().min();
            match next {
                None => {
                    if self.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    st = self.wake.wait_timeout(st, Duration::from_millis(100)).expect("drive lock").0;
                }
                Some(at) if at > now + SPIN_NS => {
                    let sleep = Duration::from_nanos(at - now - SPIN_NS);
                    st = self.wake.wait_timeout(st, sleep).expect("drive lock").0;
                }
                Some(_) => {
                    drop(st);
                    std::hint::spin_loop();
                    st = self.state.lock().expect("drive lock");
                }
            }
        }
    }

    /// Answer commands the model lost with an error (see [`Drive::start`]).
    fn answer_lost(&self, lost: Vec<Pending>) {
        for p in lost {
            (p.answer)(Err(libc::EIO));
            self.count_answer(p.received, 0);
        }
    }

    /// Send the answers that are due, and count the server's part of each request's path.
    fn answer_due(&self, ready: Vec<Due>) {
        for due in ready {
            // The model's time this server held the answer on purpose: from submission to its instant.
            let wait = due.at.saturating_sub(due.pending.submitted);
            (due.pending.answer)(due.result);
            self.count_answer(due.pending.received, wait);
        }
    }

    fn count_answer(&self, received: u64, wait: u64) {
        let total = self.wall_ns().saturating_sub(received);
        self.answered.fetch_add(1, Ordering::Relaxed);
        self.server_ns.fetch_add(total, Ordering::Relaxed);
        self.server_wait_ns.fetch_add(wait.min(total), Ordering::Relaxed);
    }

    /// Let the clock thread finish: it answers what is pending, then returns.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.notify_all();
    }
}

/// The answers due at `now`, taken off the queue in order; lateness counted.
fn take_ready(st: &mut State, now: u64) -> Vec<Due> {
    let mut ready = Vec::new();
    while let Some(Reverse((at, seq))) = st.order.peek().copied() {
        if at > now {
            break;
        }
        st.order.pop();
        let due = st.due.remove(&seq).expect("an ordered answer is due");
        st.stats.model_latency_total_ns += due.done.saturating_sub(due.arrived);
        // A path-limited answer was due before it was known: its wait is the path's, not the clock's.
        if !due.path_limited && now > due.at {
            let late = now - due.at;
            st.stats.late += 1;
            st.stats.late_total_ns += late;
            st.stats.late_max_ns = st.stats.late_max_ns.max(late);
        }
        ready.push(due);
    }
    ready
}

fn count(stats: &mut Stats, request: &SimRequest) {
    stats.requests += 1;
    match request.op {
        SimOp::Read => {
            stats.reads += 1;
            stats.bytes_read += request.len;
        }
        SimOp::Write => {
            stats.writes += 1;
            stats.bytes_written += request.len;
        }
        SimOp::Trim | SimOp::WriteZeroes => stats.trims += 1,
        SimOp::Flush => stats.flushes += 1,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;
    use std::sync::{mpsc, Arc};

    use ftlscope_sim::device::{SimOp, SimRequest};

    use super::*;

    fn drive(preset: &str) -> Arc<Drive> {
        let cfg = ftlscope_sim::presets::load(preset).expect("a preset");
        let mut drive = Drive::new(ftlscope_sim::device::build(cfg));
        drive.hold_ns = 50 * HOLD_NS;
        Arc::new(drive)
    }

    fn read(offset: u64) -> SimRequest {
        SimRequest { op: SimOp::Read, offset, len: 4096, fingerprint: 0 }
    }

    #[test]
    fn while_calibrating_every_request_is_answered_at_once_and_the_model_is_untouched() {
        let d = drive("hdd-7200-consumer");
        let answered = Arc::new(AtomicU32::new(0));
        for i in 0..10 {
            let a = Arc::clone(&answered);
            d.submit(
                read(i * 1_000_000),
                Box::new(move |r| {
                    assert_eq!(r, Ok(()));
                    a.fetch_add(1, Ordering::SeqCst);
                }),
            );
        }
        assert_eq!(answered.load(Ordering::SeqCst), 10);
        assert_eq!(d.stats().requests, 0);
    }

    #[test]
    fn answers_the_path_would_delay_anyway_go_from_the_submitting_thread() {
        // An overhead above any of the model's latencies: every answer is due when it is known.
        // A drive without command queueing (a queueing disk holds the second command until it is free).
        for preset in ["consumer-tlc-dram", "kelpie-n2t-i"] {
            let d = drive(preset);
            d.start_model(10_000_000_000, 0);
            let answered = Arc::new(AtomicU32::new(0));
            for i in 0..20 {
                let a = Arc::clone(&answered);
                d.submit(
                    read(i * 7_777_777 / 4096 * 4096),
                    Box::new(move |_| {
                        a.fetch_add(1, Ordering::SeqCst);
                    }),
                );
                assert_eq!(answered.load(Ordering::SeqCst), i as u32 + 1, "{preset}: answered inline");
            }
            let s = d.stats();
            assert_eq!((s.requests, s.reads, s.path_limited, s.late), (20, 20, 20, 0), "{preset}");
            assert!(s.model_latency_total_ns > 0, "{preset}: the model's latencies are counted");
        }
    }

    #[test]
    fn every_answer_counts_the_servers_own_time_apart_from_the_models_wait() {
        // Path-limited (an overhead above any latency): answered inline, nothing held on purpose.
        let d = drive("consumer-tlc-dram");
        d.start_model(10_000_000_000, 0);
        for i in 0..20u64 {
            let received = d.now_ns();
            d.submit_received(read(i * 7_777_777 / 4096 * 4096), received, Box::new(|_| {}));
        }
        let s = d.stats();
        assert_eq!((s.answered, s.server_wait_total_ns), (20, 0), "{s:?}");
        assert!(s.server_total_ns > 0, "{s:?}");
        // Answered by the clock thread at the model's instant: the wait is at least the model's latency (the
        // request waits from its submission, at or before its arrival in virtual time), and never more than
        // the time the request spent in the server.
        let s = serve_all("consumer-tlc-dram", &(0..20u64).map(|i| read(i * 1_048_576)).collect::<Vec<_>>());
        assert_eq!(s.answered, 20, "{s:?}");
        assert!(s.server_wait_total_ns >= s.model_latency_total_ns, "{s:?}");
        assert!(s.server_total_ns >= s.server_wait_total_ns, "{s:?}");
    }

    #[test]
    fn the_clock_thread_answers_every_request_of_a_queue_once() {
        let d = drive("hdd-7200-consumer");
        d.start_model(0, 0);
        let clock = {
            let d = Arc::clone(&d);
            std::thread::spawn(move || d.run_clock())
        };
        let (tx, rx) = mpsc::channel();
        for i in 0..16u64 {
            let tx = tx.clone();
            d.submit(read(i * 50_000_000 / 4096 * 4096), Box::new(move |r| tx.send((i, r)).expect("receiver")));
        }
        let mut seen: Vec<u64> = (0..16).map(|_| rx.recv().expect("an answer").0).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..16).collect::<Vec<_>>());
        d.stop();
        clock.join().expect("the clock thread ends");
        let s = d.stats();
        assert_eq!((s.requests, s.path_limited), (16, 0));
        // The disk queued them (NCQ): the latencies include waiting for the ones before.
        assert!(s.model_latency_total_ns / 16 > 5_000_000, "{s:?}");
    }

    fn with_clock(preset: &str) -> (Arc<Drive>, std::thread::JoinHandle<()>) {
        let d = drive(preset);
        d.start_model(0, 0);
        let clock = {
            let d = Arc::clone(&d);
            std::thread::spawn(move || d.run_clock())
        };
        (d, clock)
    }

    fn read_of(offset: u64, len: u64) -> SimRequest {
        SimRequest { op: SimOp::Read, offset, len, fingerprint: 0 }
    }

    /// Submit `requests` back to back, wait for every answer, stop: the counters.
    fn serve_all(preset: &str, requests: &[SimRequest]) -> Stats {
        let (d, clock) = with_clock(preset);
        let (tx, rx) = mpsc::channel();
        for (i, r) in requests.iter().enumerate() {
            let tx = tx.clone();
            d.submit(*r, Box::new(move |res| tx.send((i, res)).expect("receiver")));
        }
        for _ in requests {
            assert_eq!(rx.recv().expect("an answer").1, Ok(()));
        }
        d.stop();
        clock.join().expect("the clock thread ends");
        d.stats()
    }

    #[test]
    fn a_1mib_read_the_loop_device_split_is_served_as_one_command() {
        // The fragments the block layer makes of a 1 MiB read on a loop device (128 segments, then the rest).
        let (first, rest) = (1048 * 512, 1000 * 512);
        for preset in ["consumer-tlc-dram", "hdd-7200-consumer"] {
            let whole = serve_all(preset, &[read_of(0, first + rest)]);
            let split = serve_all(preset, &[read_of(0, first), read_of(first, rest)]);
            assert_eq!((split.requests, split.merged, split.held_alone), (2, 1, 0), "{preset}");
            assert_eq!(split.bytes_read, first + rest);
            // Each fragment is answered at the one command's completion: the model's latency is the whole read's
            // (exactly on the SSD; a disk's depends on the wall-clock instant of arrival, its rotation).
            if preset == "consumer-tlc-dram" {
                assert_eq!(whole.model_latency_total_ns, split.model_latency_total_ns / 2);
            }
        }
    }

    #[test]
    fn a_fragment_without_continuation_is_served_alone_after_the_hold() {
        let s = serve_all("consumer-tlc-dram", &[read_of(0, SPLIT_MIN)]);
        assert_eq!((s.requests, s.merged, s.held_alone), (1, 0, 1));
        // Its model time started at its arrival, not after the hold.
        let alone = serve_all("consumer-tlc-dram", &[read_of(0, SPLIT_MIN - 4096)]);
        let per_byte = |s: &Stats| s.model_latency_total_ns as f64 / s.bytes_read as f64;
        assert!(per_byte(&s) < per_byte(&alone) * 1.2, "{s:?} against {alone:?}");
    }

    #[test]
    fn fragments_of_requests_in_flight_together_are_merged_each_with_its_own() {
        // Two 1 MiB reads at QD 2, their fragments interleaved as two loop workers may send them.
        let half = SPLIT_MIN;
        let b = 64 * MERGE_MAX;
        let s = serve_all(
            "consumer-tlc-dram",
            &[read_of(0, half), read_of(b, half), read_of(half, half), read_of(b + half, half)],
        );
        assert_eq!((s.requests, s.merged, s.held_alone), (4, 2, 0));
        // A request arriving whole at 1 MiB is not held: it cannot have been split.
        let s = serve_all("consumer-tlc-dram", &[read_of(0, MERGE_MAX)]);
        assert_eq!((s.merged, s.held_alone), (0, 0));
    }

    #[test]
    fn a_continuation_announced_while_its_data_is_copied_is_merged_after_the_hold() {
        // The second half of a split write is received within the hold, then copied to the store for longer
        // than the hold: announced on receipt, it still merges with the first. Wall-clock margins of 20 ms
        // and more either side (the hold is 100 ms here).
        let mut d = drive("consumer-tlc-dram");
        Arc::get_mut(&mut d).expect("not shared yet").hold_ns = 100_000_000;
        d.start_model(0, 0);
        let clock = {
            let d = Arc::clone(&d);
            std::thread::spawn(move || d.run_clock())
        };
        let write = |offset, len| SimRequest { op: SimOp::Write, offset, len, fingerprint: 0 };
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        d.submit(write(0, SPLIT_MIN), Box::new(move |r| tx.send(r).expect("receiver")));
        std::thread::sleep(Duration::from_millis(40));
        d.receiving(SimOp::Write, SPLIT_MIN);
        std::thread::sleep(Duration::from_millis(80));
        d.submit(write(SPLIT_MIN, 1000 * 512), Box::new(move |r| tx2.send(r).expect("receiver")));
        for _ in 0..2 {
            assert_eq!(rx.recv().expect("an answer"), Ok(()));
        }
        d.stop();
        clock.join().expect("the clock thread ends");
        let s = d.stats();
        assert_eq!((s.requests, s.merged, s.held_alone), (2, 1, 0), "{s:?}");
    }

    #[test]
    fn only_a_contiguous_request_of_the_same_kind_is_merged() {
        let write = SimRequest { op: SimOp::Write, offset: SPLIT_MIN, len: 4096, fingerprint: 0 };
        for next in [read_of(SPLIT_MIN + 4096, 4096), write, read_of(0, 4096), read_of(SPLIT_MIN, MERGE_MAX)] {
            let s = serve_all("consumer-tlc-dram", &[read_of(0, SPLIT_MIN), next]);
            assert_eq!((s.requests, s.merged, s.held_alone), (2, 0, 1), "{next:?}");
        }
        // Small requests are never held: a 4 KiB read at QD 1 pays no wait.
        let s = serve_all("consumer-tlc-dram", &[read_of(0, 4096), read_of(4096, 4096)]);
        assert_eq!((s.merged, s.held_alone), (0, 0));
    }
}
