//! psync-pool backend: blocking pread/pwrite calls made by a pool of worker threads, one per slot, so the queue's
//! thread only hands a request off and is never held up by one.
//!
//! psync makes each call in the queue's own thread: on a target the kernel completes synchronously (zram,
//! tmpfs) a read slowed by an interrupt delays the next request's issue, which in an open-loop replay is issue
//! lag. io_uring avoids that only where the device completes asynchronously; on zram it hands every read to
//! kernel io-wq workers, which cost a millisecond at p99 under load. Here the queue writes the request into its
//! slot's mailbox and stamps the hand-off as the submission (as io_uring stamps its `io_uring_enter`); the slot's
//! worker makes the call and stamps the completion when it returns. The worker's wake-up is thus inside the
//! request's latency, not in the issue lag.
//!
//! A worker sleeps on a futex between calls, so handing a request to it costs the queue one `FUTEX_WAKE` (after the
//! submission stamp); it may spin a while first (`SPIN_NS`), and the queue reuses the slot freed last (its free
//! list is a stack), so at a steady rate one spinning worker would stay warm and the hand-off make no system call.
//! On a machine without CPUs to spare the spinning costs more than the wake-up (see `SPIN_NS`). The queue waits for completions on a futex too (a
//! counter every worker bumps), so a wait with nothing done costs no CPU. Hand-written because no well-kept crate
//! offers a one-slot mailbox with spin-then-futex wake-ups and no allocation per request.
//!
//! The workers may run on every CPU the process may use (`worker_cpus`), not on the queue's alone: a thread
//! inherits its creator's CPU pin, and workers pinned with the queue woke on its CPU, where the queue's thread spins
//! for the next due time; a woken worker then either waited for the queue's slice to end (the read's latency) or
//! put the queue off its CPU while it read (the next request's issue lag). With a CPU free elsewhere the kernel
//! wakes the worker there. On a machine with no CPU free the wake-up may cross to another busy CPU instead, which
//! measured no better and up to 2x the lag p99 at load 30 (docs/traces.md, "Where psync-pool's lag came from").

use std::cell::UnsafeCell;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::{Backend, Event, Request};
use crate::clock::{wait_until, Clock};
use crate::target::TargetKind;

/// How long a worker spins after its last call before it sleeps, unless `FTLSCOPE_POOL_SPIN_NS` says otherwise
/// (read once per worker, at its start). A request handed to a spinning worker costs the queue no wake-up system
/// call, but a spinning worker takes a CPU: on the 2-CPU build machine under load 24-28, 30 us of spin made a
/// 50,000/s replay on zram fall behind (23,537/s achieved, lag p99 3.3 s) and 5 us gave lag p99 3.1 ms, where no
/// spin gave 66 us (docs/traces.md). So none by default; a machine with CPUs to spare may try some.
const SPIN_NS: u64 = 0;

const IDLE: u32 = 0;
const POSTED: u32 = 1;
const DONE: u32 = 2;
/// The backend is gone: a worker that sees it ends (set in every mailbox, so a worker about to sleep cannot miss it).
const STOP: u32 = 3;

/// One slot's hand-off between the queue and its worker, on a cache line of its own.
#[repr(align(128))]
struct Mailbox {
    state: AtomicU32,
    /// The worker sleeps on `state`: the queue wakes it only then.
    asleep: AtomicBool,
    request: UnsafeCell<Request>,
    result: AtomicI32,
    complete_ns: AtomicU64,
}

/// The call a worker makes for a request (the target's pread/pwrite/fdatasync/discard; a script in tests).
pub type Io = dyn Fn(&Request) -> i32 + Send + Sync;

struct Pool {
    mailboxes: Vec<Mailbox>,
    stop: AtomicBool,
    /// Completions so far (wrapping): the queue sleeps on it.
    done: AtomicU32,
    waiting: AtomicBool,
    clock: Clock,
    io: Box<Io>,
}

// SAFETY: a mailbox's `request` is written by the queue only while the slot is IDLE (before the Release store of
// POSTED) and read by its worker only after the Acquire load of POSTED, so the two never touch it at once; the raw
// buffer pointer in it points into the queue's buffers, which outlive the request.
unsafe impl Sync for Pool {}
// SAFETY: as above.
unsafe impl Send for Pool {}

fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) {
    let ts = timeout_ns
        .map(|ns| libc::timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a live u32; returns at once if it no longer holds `expected` (no lost wake-up).
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, expected, ts_ptr);
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live u32 wakes at most one waiter.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
    }
}

fn worker(pool: Arc<Pool>, slot: usize, cpus: Arc<Vec<usize>>) {
    if !cpus.is_empty() {
        crate::real::pin_current_thread_to(&cpus);
    }
    let mailbox = &pool.mailboxes[slot];
    let mut last_done = pool.clock.now();
    let spin_ns: u64 = std::env::var("FTLSCOPE_POOL_SPIN_NS").ok().and_then(|v| v.parse().ok()).unwrap_or(SPIN_NS);
    loop {
        let state = mailbox.state.load(Ordering::Acquire);
        if state != POSTED {
            if pool.stop.load(Ordering::Relaxed) {
                return;
            }
            if pool.clock.now() < last_done + spin_ns {
                std::hint::spin_loop();
                continue;
            }
            // Asleep first, then look again: either the queue sees `asleep` and wakes us, or we see POSTED.
            mailbox.asleep.store(true, Ordering::SeqCst);
            if mailbox.state.load(Ordering::SeqCst) == state && !pool.stop.load(Ordering::SeqCst) {
                futex_wait(&mailbox.state, state, None);
            }
            mailbox.asleep.store(false, Ordering::Relaxed);
            continue;
        }
        // SAFETY: see `Pool`'s Sync: the request was written before POSTED was stored.
        let request = unsafe { *mailbox.request.get() };
        let result = (pool.io)(&request);
        let now = pool.clock.now();
        mailbox.result.store(result, Ordering::Relaxed);
        mailbox.complete_ns.store(now, Ordering::Relaxed);
        mailbox.state.store(DONE, Ordering::Release);
        pool.done.fetch_add(1, Ordering::SeqCst);
        if pool.waiting.load(Ordering::SeqCst) {
            futex_wake(&pool.done);
        }
        last_done = now;
    }
}

pub struct PoolBackend {
    pool: Arc<Pool>,
    workers: Vec<JoinHandle<()>>,
    /// Pushed and not yet handed off (capacity = queue depth, never grows).
    pending: Vec<(u32, Request)>,
    inflight: u32,
}

// SAFETY: moved into one queue thread; the raw buffer pointers point into that queue's own buffers.
unsafe impl Send for PoolBackend {}

impl PoolBackend {
    /// A pool of `depth` workers making the target's calls (psync's), on `worker_cpus` (empty: the caller's CPUs).
    pub fn new(
        file: Arc<File>,
        kind: TargetKind,
        depth: u32,
        clock: Clock,
        worker_cpus: &[usize],
    ) -> io::Result<PoolBackend> {
        let io = Box::new(move |req: &Request| super::psync::execute(&file, kind, req));
        PoolBackend::with_io(depth, clock, io, worker_cpus)
    }

    /// A pool whose workers make `io`'s calls, on `worker_cpus` (empty: the creating thread's CPUs).
    pub fn with_io(depth: u32, clock: Clock, io: Box<Io>, worker_cpus: &[usize]) -> io::Result<PoolBackend> {
        let cpus = Arc::new(worker_cpus.to_vec());
        let empty = Request { op: crate::workload::Op::Read, offset: 0, len: 0, addr: std::ptr::null_mut() };
        let pool = Arc::new(Pool {
            mailboxes: (0..depth)
                .map(|_| Mailbox {
                    state: AtomicU32::new(IDLE),
                    asleep: AtomicBool::new(false),
                    request: UnsafeCell::new(empty),
                    result: AtomicI32::new(0),
                    complete_ns: AtomicU64::new(0),
                })
                .collect(),
            stop: AtomicBool::new(false),
            done: AtomicU32::new(0),
            waiting: AtomicBool::new(false),
            clock,
            io,
        });
        let mut backend =
            PoolBackend { pool, workers: Vec::new(), pending: Vec::with_capacity(depth as usize), inflight: 0 };
        for slot in 0..depth as usize {
            let pool = Arc::clone(&backend.pool);
            let cpus = Arc::clone(&cpus);
            // (A failure here drops `backend`, which stops the workers already started.)
            backend.workers.push(
                std::thread::Builder::new()
                    .name(format!("ftlscope-io{slot}"))
                    .spawn(move || worker(pool, slot, cpus))?,
            );
        }
        Ok(backend)
    }

    /// Report every finished request; how many.
    #[inline]
    fn reap<F: FnMut(Event)>(&mut self, on_event: &mut F) -> u32 {
        let mut reaped = 0;
        for (slot, mailbox) in self.pool.mailboxes.iter().enumerate() {
            if self.inflight == reaped {
                break;
            }
            if mailbox.state.load(Ordering::Acquire) == DONE {
                let result = mailbox.result.load(Ordering::Relaxed);
                let at_ns = mailbox.complete_ns.load(Ordering::Relaxed);
                mailbox.state.store(IDLE, Ordering::Relaxed);
                on_event(Event::Completed { slot: slot as u32, result, at_ns });
                reaped += 1;
            }
        }
        self.inflight -= reaped;
        reaped
    }
}

impl Backend for PoolBackend {
    fn name(&self) -> &'static str {
        "psync-pool"
    }

    #[inline]
    fn push(&mut self, slot: u32, request: Request) {
        self.pending.push((slot, request));
    }

    /// Hand each pushed request to its slot's worker, then reap completions until `min_complete` have come (or
    /// nothing is in flight) or `timeout_ns` has passed, sleeping on the completion counter meanwhile.
    fn submit_and_wait<F: FnMut(Event)>(
        &mut self,
        min_complete: u32,
        timeout_ns: u64,
        mut on_event: F,
    ) -> io::Result<()> {
        for i in 0..self.pending.len() {
            let (slot, request) = self.pending[i];
            let mailbox = &self.pool.mailboxes[slot as usize];
            // SAFETY: the slot is free (the queue hands a slot out once until its completion is reaped), so its
            // worker is not reading the request.
            unsafe { *mailbox.request.get() = request };
            let at_ns = self.pool.clock.now();
            mailbox.state.store(POSTED, Ordering::SeqCst);
            if mailbox.asleep.load(Ordering::SeqCst) {
                futex_wake(&mailbox.state);
            }
            on_event(Event::Submitted { slot, at_ns });
            self.inflight += 1;
        }
        self.pending.clear();
        let deadline = self.pool.clock.now().saturating_add(timeout_ns);
        let mut reaped = 0;
        loop {
            let seen = self.pool.done.load(Ordering::SeqCst);
            reaped += self.reap(&mut on_event);
            if reaped >= min_complete || self.inflight == 0 {
                return Ok(());
            }
            let now = self.pool.clock.now();
            if now >= deadline {
                return Ok(());
            }
            self.pool.waiting.store(true, Ordering::SeqCst);
            // Returns at once if a worker finished since `seen` was read.
            futex_wait(&self.pool.done, seen, Some(deadline - now));
            self.pool.waiting.store(false, Ordering::Relaxed);
        }
    }

    #[inline]
    fn now(&self) -> u64 {
        self.pool.clock.now()
    }

    fn idle(&mut self, ns: u64) {
        wait_until(&self.pool.clock, self.pool.clock.now() + ns);
    }

    /// A call in a worker cannot be taken back: true only when none is in flight.
    fn cancel_all(&mut self) -> bool {
        self.pending.clear();
        let _ = self.submit_and_wait(0, 0, |_| {});
        self.inflight == 0
    }
}

impl Drop for PoolBackend {
    fn drop(&mut self) {
        self.pool.stop.store(true, Ordering::SeqCst);
        for mailbox in &self.pool.mailboxes {
            // A worker still in a call stores DONE after it, then sees `stop`.
            mailbox.state.store(STOP, Ordering::SeqCst);
            futex_wake(&mailbox.state);
        }
        // A worker still in a call (after a time-out) is left to finish and end on its own.
        let idle = self.inflight == 0;
        for handle in self.workers.drain(..) {
            if idle {
                let _ = handle.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Op;
    use std::sync::mpsc::{channel, Receiver};
    use std::sync::Mutex;

    fn clock() -> Clock {
        crate::real::shared_clock().0
    }

    fn read(offset: u64) -> Request {
        Request { op: Op::Read, offset, len: 4096, addr: std::ptr::null_mut() }
    }

    /// Calls that return what a channel gives them (each waits for its answer), named by the offset.
    fn scripted() -> (Box<Io>, std::sync::mpsc::Sender<i32>, Receiver<u64>) {
        let (answer_tx, answer_rx) = channel::<i32>();
        let (called_tx, called_rx) = channel::<u64>();
        let answers = Mutex::new(answer_rx);
        let called = Mutex::new(called_tx);
        let io = Box::new(move |req: &Request| {
            called.lock().unwrap().send(req.offset).unwrap();
            answers.lock().unwrap().recv().unwrap()
        });
        (io, answer_tx, called_rx)
    }

    #[test]
    fn a_hand_off_returns_while_the_call_is_still_blocked_and_the_completion_comes_later() {
        let (io, answer, called) = scripted();
        let mut backend = PoolBackend::with_io(4, clock(), io, &[]).unwrap();
        let mut events = Vec::new();
        backend.push(2, read(8192));
        backend.submit_and_wait(0, 0, |e| events.push(e)).unwrap();
        // The worker is in its call (it told us), and will stay there until answered: the queue is free already.
        assert_eq!(called.recv().unwrap(), 8192);
        assert!(matches!(events[..], [Event::Submitted { slot: 2, .. }]), "{events:?}");
        // A second request goes to another worker while the first call still blocks.
        backend.push(0, read(0));
        backend.submit_and_wait(0, 0, |e| events.push(e)).unwrap();
        assert_eq!(called.recv().unwrap(), 0);
        assert_eq!(events.len(), 2, "nothing completed yet: {events:?}");
        answer.send(4096).unwrap();
        answer.send(-libc::EIO).unwrap();
        backend.submit_and_wait(2, 10_000_000_000, |e| events.push(e)).unwrap();
        let mut done: Vec<_> = events[2..]
            .iter()
            .map(|e| match *e {
                Event::Completed { slot, result, .. } => (slot, result),
                other => panic!("{other:?}"),
            })
            .collect();
        done.sort();
        assert_eq!(done.len(), 2);
        // Which call got which answer depends on which worker asked first: both answers came, one each.
        let mut results: Vec<_> = done.iter().map(|d| d.1).collect();
        results.sort();
        assert_eq!(results, vec![-libc::EIO, 4096]);
        assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), vec![0, 2]);
        // Completion stamps come after the submission stamps.
        let submitted = |slot| {
            events.iter().find_map(|e| match *e {
                Event::Submitted { slot: s, at_ns } if s == slot => Some(at_ns),
                _ => None,
            })
        };
        for e in &events[2..] {
            if let Event::Completed { slot, at_ns, .. } = *e {
                assert!(at_ns >= submitted(slot).unwrap());
            }
        }
        assert!(backend.cancel_all(), "nothing in flight");
    }

    #[test]
    fn a_wait_ends_at_its_timeout_and_a_call_still_running_cannot_be_cancelled() {
        let (io, answer, called) = scripted();
        let mut backend = PoolBackend::with_io(1, clock(), io, &[]).unwrap();
        backend.push(0, read(0));
        let mut events = Vec::new();
        backend.submit_and_wait(1, 1_000_000, |e| events.push(e)).unwrap();
        called.recv().unwrap();
        assert_eq!(events.len(), 1, "only the submission: the call is unanswered");
        assert!(!backend.cancel_all(), "a call in a worker cannot be taken back");
        answer.send(4096).unwrap();
        backend.submit_and_wait(1, 10_000_000_000, |e| events.push(e)).unwrap();
        assert!(matches!(events[1], Event::Completed { slot: 0, result: 4096, .. }));
        // The slot is reused: the same worker takes the next request (it may be asleep by now: woken).
        std::thread::sleep(std::time::Duration::from_millis(2));
        backend.push(0, read(4096));
        backend.submit_and_wait(0, 0, |e| events.push(e)).unwrap();
        assert_eq!(called.recv().unwrap(), 4096);
        answer.send(4096).unwrap();
        backend.submit_and_wait(1, 10_000_000_000, |e| events.push(e)).unwrap();
        assert_eq!(events.len(), 4);
        drop(backend); // the idle workers end and are joined
    }

    /// The CPUs the calling thread may run on.
    fn my_cpus() -> Vec<usize> {
        crate::real::allowed_cpus()
    }

    #[test]
    fn workers_run_on_the_cpus_given_not_on_the_creators_pin() {
        let all = my_cpus();
        // A queue thread pinned to one CPU makes a pool whose workers may use every CPU.
        let seen = std::thread::spawn(move || {
            assert!(crate::real::pin_current_thread(all[0]));
            let (called_tx, called_rx) = channel::<Vec<usize>>();
            let called = Mutex::new(called_tx);
            let io = Box::new(move |_: &Request| {
                called.lock().unwrap().send(my_cpus()).unwrap();
                4096
            });
            let mut backend = PoolBackend::with_io(1, clock(), io, &all).unwrap();
            backend.push(0, read(0));
            backend.submit_and_wait(1, 10_000_000_000, |_| {}).unwrap();
            let worker = called_rx.recv().unwrap();
            // Without CPUs given, a worker keeps its creator's pin.
            let (called_tx, called_rx) = channel::<Vec<usize>>();
            let called = Mutex::new(called_tx);
            let io = Box::new(move |_: &Request| {
                called.lock().unwrap().send(my_cpus()).unwrap();
                4096
            });
            let mut inherited = PoolBackend::with_io(1, clock(), io, &[]).unwrap();
            inherited.push(0, read(0));
            inherited.submit_and_wait(1, 10_000_000_000, |_| {}).unwrap();
            (worker, called_rx.recv().unwrap(), all)
        })
        .join()
        .unwrap();
        let (worker, inherited, all) = seen;
        assert_eq!(worker, all);
        assert_eq!(inherited, vec![all[0]]);
    }

    #[test]
    fn reads_a_real_file_through_the_pool() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("ftlscope-pool-{}", std::process::id()));
        let mut f = File::create(&dir).unwrap();
        let data: Vec<u8> = (0..16384u32).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        drop(f);
        let file = Arc::new(File::open(&dir).unwrap());
        let mut backend = PoolBackend::new(file, TargetKind::RegularFile, 2, clock(), &[]).unwrap();
        let mut buf = vec![0u8; 8192];
        let addr = buf.as_mut_ptr();
        backend.push(0, Request { op: Op::Read, offset: 0, len: 4096, addr });
        // SAFETY: the second half of the same buffer, a distinct range.
        backend.push(1, Request { op: Op::Read, offset: 8192, len: 4096, addr: unsafe { addr.add(4096) } });
        let mut completed = Vec::new();
        backend
            .submit_and_wait(2, 10_000_000_000, |e| {
                if let Event::Completed { slot, result, .. } = e {
                    completed.push((slot, result));
                }
            })
            .unwrap();
        completed.sort();
        assert_eq!(completed, vec![(0, 4096), (1, 4096)]);
        drop(backend);
        assert_eq!(&buf[..4096], &data[..4096]);
        assert_eq!(&buf[4096..], &data[8192..12288]);
        std::fs::remove_file(&dir).unwrap();
    }
}
