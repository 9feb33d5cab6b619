//! The engine: one loop per queue, each on its own pinned thread with its own ring, feeding an
//! aggregator thread; a health sampler beside them (seed 000 §3.1's three-thread design).

use std::cell::Cell;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::backend::psync::PsyncBackend;
use crate::backend::uring::{self, UringBackend};
use crate::backend::{Backend, Event, Request};
use crate::buffers::IoBuffers;
use crate::clock::{Clock, ClockInfo};
use crate::health::{open_health_source, HealthReport, HealthSampler};
use crate::pattern::OffsetGenerator;
use crate::stats::{AggregateResult, Aggregator, Record};
use crate::target::{Target, TargetInfo};
use crate::workload::{Op, Workload, WorkloadError};

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

/// Which backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineChoice {
    Auto,
    Uring,
    Psync,
}

impl std::str::FromStr for EngineChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(EngineChoice::Auto),
            "uring" | "io_uring" => Ok(EngineChoice::Uring),
            "psync" => Ok(EngineChoice::Psync),
            other => Err(format!(
                "unknown engine `{other}`; use auto, uring or psync"
            )),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    Stop,
    Continue,
}

/// How to run (as opposed to what to run, which is the [`Workload`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunOptions {
    pub engine: EngineChoice,
    /// A request outstanding this long ends the run.
    pub io_timeout_ns: u64,
    pub on_error: OnError,
    /// Keep the per-request trace, up to this many requests.
    pub trace_limit: Option<usize>,
    pub window_ns: u64,
    /// Pin each queue thread to its own CPU.
    pub pin: bool,
    /// Sample device health this often (0 = not at all).
    pub health_interval_ns: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            engine: EngineChoice::Auto,
            io_timeout_ns: 30_000_000_000,
            on_error: OnError::Stop,
            trace_limit: None,
            window_ns: 100_000_000,
            pin: true,
            health_interval_ns: 5_000_000_000,
        }
    }
}

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error("the workload writes but {0} was opened read-only")]
    ReadOnlyTarget(String),
    #[error("io_uring is not available here ({0}); use --engine psync or auto")]
    UringUnavailable(String),
    #[error("setting up queue {queue}: {message}")]
    Setup { queue: u32, message: String },
}

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StopReason {
    /// The workload's stop condition (ops, bytes or time) was met.
    Completed,
    /// Someone asked it to stop (Ctrl-C, a caller's deadline).
    Interrupted,
    /// A request failed and `on_error` is `stop`.
    IoError {
        op: String,
        offset: u64,
        errno: i32,
        message: String,
    },
    /// A request stayed outstanding past the I/O time-out.
    Timeout {
        op: String,
        offset: u64,
        outstanding_ns: u64,
    },
    /// The engine's own submission failed.
    EngineFailure { message: String },
}

impl StopReason {
    fn rank(&self) -> u8 {
        match self {
            StopReason::Completed => 0,
            StopReason::Interrupted => 1,
            StopReason::IoError { .. } => 2,
            StopReason::EngineFailure { .. } => 3,
            StopReason::Timeout { .. } => 4,
        }
    }
}

struct QueueProgress {
    ops: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
}

struct Shared {
    stop: AtomicBool,
    setup_failed: AtomicBool,
    progress: Vec<QueueProgress>,
    reason: Mutex<Option<StopReason>>,
}

impl Shared {
    fn stop_with(&self, reason: StopReason) {
        let mut current = self.reason.lock().expect("stop reason lock");
        if current.as_ref().is_none_or(|c| reason.rank() > c.rank()) {
            *current = Some(reason);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Live figures for a progress bar.
#[derive(Clone, Debug, Serialize)]
pub struct Progress {
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    pub elapsed_ns: u64,
    pub finished: bool,
}

/// What each queue reports when it ends.
#[derive(Clone, Debug, Serialize)]
pub struct QueueReport {
    pub queue: u32,
    pub cpu: Option<usize>,
    pub issued: u64,
    pub completed: u64,
    /// The kernel may still write into this queue's buffers (a request timed out and could not be
    /// cancelled), so they were leaked rather than freed.
    pub leaked_buffers: bool,
}

/// Everything about how a run was carried out, for the summary's `env`.
#[derive(Clone, Debug, Serialize)]
pub struct EngineEnv {
    pub backend: &'static str,
    pub backend_reason: String,
    pub backend_setup: Option<uring::UringSetup>,
    pub clock: ClockInfo,
    pub pinned_cpus: Vec<usize>,
    pub aggregator_cpu: Option<usize>,
    pub notices: Vec<String>,
}

pub struct RunResult {
    pub target: TargetInfo,
    pub workload: Workload,
    pub options: RunOptions,
    pub env: EngineEnv,
    pub stop_reason: StopReason,
    pub stats: AggregateResult,
    pub queues: Vec<QueueReport>,
    pub health: HealthReport,
    pub wall_ns: u64,
    /// Monotonic-raw time at which the run started; trace and window times are relative to it.
    pub t0_ns: u64,
}

fn shared_clock() -> (Clock, ClockInfo) {
    static CLOCK: OnceLock<(Clock, ClockInfo)> = OnceLock::new();
    CLOCK
        .get_or_init(|| Clock::calibrate(Duration::from_millis(50)))
        .clone()
}

fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and size for the current thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    // SAFETY: `set` was filled by the kernel.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

fn pin_current_thread(cpu: usize) -> bool {
    // SAFETY: as above; the set names one CPU the process may use.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Decide the backend for `choice`, with the reason in words.
fn choose_backend(choice: EngineChoice, target: &Target) -> Result<(bool, String), EngineError> {
    let uring_ok = uring::available();
    match choice {
        EngineChoice::Psync => Ok((false, "psync requested".into())),
        EngineChoice::Uring => match uring_ok {
            Ok(()) => Ok((true, "io_uring requested".into())),
            Err(e) => Err(EngineError::UringUnavailable(e.to_string())),
        },
        EngineChoice::Auto => match uring_ok {
            Err(e) => Ok((false, format!("io_uring unavailable ({e}); using psync"))),
            Ok(()) => match crate::autoselect::completes_synchronously(target) {
                Some(why) => Ok((
                    false,
                    format!("{why}: psync avoids io_uring's worker-thread hand-off"),
                )),
                None => Ok((true, "io_uring (asynchronous target)".into())),
            },
        },
    }
}

/// A running (or finished) measurement.
pub struct Run {
    shared: Arc<Shared>,
    queues: Vec<JoinHandle<QueueReport>>,
    aggregator: JoinHandle<AggregateResult>,
    health: Option<HealthSampler>,
    health_unavailable: Option<String>,
    target_info: TargetInfo,
    workload: Workload,
    options: RunOptions,
    env: EngineEnv,
    started: Instant,
    t0: u64,
}

impl Run {
    /// Validate, set up every queue, and start measuring. Returns once all queues are running.
    pub fn start(
        target: Target,
        workload: Workload,
        options: RunOptions,
    ) -> Result<Run, EngineError> {
        workload.validate(target.info.size_bytes, target.info.logical_block_size)?;
        if workload.mix.writes() && !target.info.writable {
            return Err(EngineError::ReadOnlyTarget(
                target.info.path.display().to_string(),
            ));
        }
        let (use_uring, backend_reason) = choose_backend(options.engine, &target)?;
        let (clock, clock_info) = shared_clock();
        let mut notices = Vec::new();
        if !use_uring && workload.inflight_per_queue() > 1 {
            notices.push(format!(
                "psync runs one request at a time per queue: effective queue depth 1, not {}",
                workload.inflight_per_queue()
            ));
        }

        let queues = workload.queues;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            setup_failed: AtomicBool::new(false),
            progress: (0..queues)
                .map(|_| QueueProgress {
                    ops: AtomicU64::new(0),
                    bytes: AtomicU64::new(0),
                    errors: AtomicU64::new(0),
                })
                .collect(),
            reason: Mutex::new(None),
        });
        let cpus = if options.pin {
            allowed_cpus()
        } else {
            Vec::new()
        };
        // Queues on CPUs 1, 2, ... and the aggregator on the first CPU, away from the queues where the
        // machine has room.
        let queue_cpu = |q: usize| (!cpus.is_empty()).then(|| cpus[(q + 1) % cpus.len()]);
        let aggregator_cpu = cpus.first().copied();

        let (health, health_unavailable) = if options.health_interval_ns > 0 {
            match open_health_source(&target.info.path) {
                Ok(source) => (
                    Some(HealthSampler::spawn(
                        source,
                        Duration::from_nanos(options.health_interval_ns),
                    )),
                    None,
                ),
                Err(unavailable) => (None, Some(unavailable.to_string())),
            }
        } else {
            (None, Some("health sampling turned off".to_string()))
        };

        let t0 = clock.now();
        let file = Arc::new(target.file);
        let info = target.info.clone();
        let ring_capacity = (workload.inflight_per_queue() as usize * 64).clamp(1 << 14, 1 << 20);
        let mut consumers = Vec::new();
        let barrier = Arc::new(Barrier::new(queues as usize + 1));
        let (setup_tx, setup_rx) =
            std::sync::mpsc::channel::<Result<Option<uring::UringSetup>, String>>();
        let mut handles = Vec::new();
        for q in 0..queues {
            let (producer, consumer) = rtrb::RingBuffer::<Record>::new(ring_capacity);
            consumers.push(consumer);
            let ctx = QueueContext {
                queue: q,
                workload: workload.clone(),
                target_size: info.size_bytes,
                kind: info.kind,
                file: Arc::clone(&file),
                shared: Arc::clone(&shared),
                on_error: options.on_error,
                io_timeout_ns: options.io_timeout_ns,
                clock,
                cpu: queue_cpu(q as usize),
                use_uring,
            };
            let barrier = Arc::clone(&barrier);
            let setup_tx = setup_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("ftlscope-q{q}"))
                .spawn(move || queue_thread(ctx, producer, barrier, setup_tx))
                .expect("spawn queue thread");
            handles.push(handle);
        }
        drop(setup_tx);
        let mut backend_setup = None;
        let mut setup_error = None;
        for _ in 0..queues {
            match setup_rx.recv() {
                Ok(Ok(setup)) => backend_setup = backend_setup.or(setup),
                Ok(Err(message)) => setup_error = Some(message),
                Err(_) => setup_error = Some("a queue thread ended during set-up".into()),
            }
        }
        if setup_error.is_some() {
            shared.setup_failed.store(true, Ordering::Relaxed);
        }
        barrier.wait();
        let window_ns = options.window_ns;
        let trace_limit = options.trace_limit;
        let aggregator = std::thread::Builder::new()
            .name("ftlscope-agg".into())
            .spawn(move || {
                if let Some(cpu) = aggregator_cpu {
                    pin_current_thread(cpu);
                }
                aggregate(
                    consumers,
                    Aggregator::new(t0, window_ns, queues as usize, trace_limit),
                )
            })
            .expect("spawn aggregator thread");
        if let Some(message) = setup_error {
            for h in handles {
                let _ = h.join();
            }
            let _ = aggregator.join();
            if let Some(h) = health {
                h.stop();
            }
            return Err(EngineError::Setup { queue: 0, message });
        }
        let env = EngineEnv {
            backend: if use_uring { "io_uring" } else { "psync" },
            backend_reason,
            backend_setup,
            clock: clock_info,
            pinned_cpus: (0..queues as usize).filter_map(queue_cpu).collect(),
            aggregator_cpu,
            notices,
        };
        Ok(Run {
            shared,
            queues: handles,
            aggregator,
            health,
            health_unavailable,
            target_info: info,
            workload,
            options,
            env,
            started: Instant::now(),
            t0,
        })
    }

    pub fn progress(&self) -> Progress {
        let mut p = Progress {
            ops: 0,
            bytes: 0,
            errors: 0,
            elapsed_ns: self.started.elapsed().as_nanos() as u64,
            finished: self.is_finished(),
        };
        for q in &self.shared.progress {
            p.ops += q.ops.load(Ordering::Relaxed);
            p.bytes += q.bytes.load(Ordering::Relaxed);
            p.errors += q.errors.load(Ordering::Relaxed);
        }
        p
    }

    /// Ask every queue to stop issuing; in-flight requests still complete and are kept.
    pub fn request_stop(&self) {
        self.shared.stop_with(StopReason::Interrupted);
    }

    pub fn is_finished(&self) -> bool {
        self.queues.iter().all(|h| h.is_finished())
    }

    pub fn env(&self) -> &EngineEnv {
        &self.env
    }

    /// Wait for the end and collect the results.
    pub fn join(self) -> RunResult {
        let mut reports = Vec::new();
        for h in self.queues {
            match h.join() {
                Ok(report) => reports.push(report),
                Err(_) => self.shared.stop_with(StopReason::EngineFailure {
                    message: "a queue thread panicked".into(),
                }),
            }
        }
        let stats = self.aggregator.join().expect("aggregator thread");
        let health = match (self.health, self.health_unavailable) {
            (Some(sampler), _) => sampler.stop(),
            (None, reason) => HealthReport::unavailable(reason.unwrap_or_default()),
        };
        let stop_reason = self
            .shared
            .reason
            .lock()
            .expect("stop reason lock")
            .clone()
            .unwrap_or(StopReason::Completed);
        RunResult {
            target: self.target_info,
            workload: self.workload,
            options: self.options,
            env: self.env,
            stop_reason,
            stats,
            queues: reports,
            health,
            wall_ns: self.started.elapsed().as_nanos() as u64,
            t0_ns: self.t0,
        }
    }
}

/// Run to the end on the calling thread's behalf.
pub fn run(
    target: Target,
    workload: Workload,
    options: RunOptions,
) -> Result<RunResult, EngineError> {
    Ok(Run::start(target, workload, options)?.join())
}

fn aggregate(mut consumers: Vec<rtrb::Consumer<Record>>, mut agg: Aggregator) -> AggregateResult {
    let mut done = vec![false; consumers.len()];
    loop {
        let mut drained = 0usize;
        for (q, consumer) in consumers.iter_mut().enumerate() {
            if done[q] {
                continue;
            }
            let abandoned = consumer.is_abandoned();
            let n = consumer.slots();
            if n > 0 {
                let chunk = consumer.read_chunk(n).expect("slots are available");
                let (a, b) = chunk.as_slices();
                for rec in a.iter().chain(b.iter()) {
                    agg.add(rec);
                }
                chunk.commit_all();
                drained += n;
            }
            if abandoned && consumer.is_empty() {
                done[q] = true;
                agg.queue_done(q);
            }
        }
        agg.close_windows();
        if done.iter().all(|&d| d) {
            break;
        }
        if drained == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    agg.finish()
}

struct QueueContext {
    queue: u32,
    workload: Workload,
    target_size: u64,
    kind: crate::target::TargetKind,
    file: Arc<File>,
    shared: Arc<Shared>,
    on_error: OnError,
    io_timeout_ns: u64,
    clock: Clock,
    cpu: Option<usize>,
    use_uring: bool,
}

fn queue_thread(
    ctx: QueueContext,
    producer: rtrb::Producer<Record>,
    barrier: Arc<Barrier>,
    setup_tx: std::sync::mpsc::Sender<Result<Option<uring::UringSetup>, String>>,
) -> QueueReport {
    let pinned = ctx.cpu.filter(|&cpu| pin_current_thread(cpu));
    let depth = ctx.workload.inflight_per_queue();
    let writes = ctx.workload.mix.writes();
    let mut buffers = IoBuffers::new(
        depth as usize,
        ctx.workload.max_size() as usize,
        ctx.workload.data,
        ctx.workload.seed ^ ctx.queue as u64,
        writes,
    );
    let generator = OffsetGenerator::new(&ctx.workload, ctx.target_size, ctx.queue);
    let mut report = QueueReport {
        queue: ctx.queue,
        cpu: pinned,
        issued: 0,
        completed: 0,
        leaked_buffers: false,
    };
    if ctx.use_uring {
        let region = (buffers.region.as_ptr(), buffers.region.len());
        match UringBackend::new(Arc::clone(&ctx.file), ctx.kind, depth, region, ctx.clock) {
            Ok(mut backend) => {
                let _ = setup_tx.send(Ok(Some(backend.setup().clone())));
                barrier.wait();
                if ctx.shared.setup_failed.load(Ordering::Relaxed) {
                    return report;
                }
                let leak = QueueLoop::new(&ctx, generator, producer).run(
                    &mut backend,
                    &mut buffers,
                    &mut report,
                );
                if leak {
                    // The kernel may still DMA into these buffers: never free them, nor the ring.
                    std::mem::forget(backend);
                    std::mem::forget(buffers);
                }
            }
            Err(e) => {
                let _ = setup_tx.send(Err(format!("io_uring set-up failed: {e}")));
                barrier.wait();
            }
        }
    } else {
        let mut backend = PsyncBackend::new(Arc::clone(&ctx.file), ctx.kind, depth, ctx.clock);
        let _ = setup_tx.send(Ok(None));
        barrier.wait();
        if !ctx.shared.setup_failed.load(Ordering::Relaxed) {
            QueueLoop::new(&ctx, generator, producer).run(&mut backend, &mut buffers, &mut report);
        }
    }
    report
}

#[derive(Clone, Copy, Default)]
struct SlotState {
    submit_ns: u64,
    offset: u64,
    len: u32,
    op: u8,
    warmup: bool,
    busy: bool,
}

/// The state of one queue's measurement loop. Everything is allocated in `new`; `run` never allocates.
struct QueueLoop<'a> {
    ctx: &'a QueueContext,
    generator: OffsetGenerator,
    producer: rtrb::Producer<Record>,
    slots: Vec<SlotState>,
    free: Vec<u32>,
    inflight: u32,
    /// Cumulative op weights, for the weighted choice.
    op_cumulative: [u64; 5],
    op_total: u64,
    single_op: Option<Op>,
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
}

/// This queue's share of a total split over `queues` (the first queues take the remainder).
fn share_of(total: u64, queues: u32, queue: u32) -> u64 {
    if total == 0 {
        return 0;
    }
    let q = queues as u64;
    total / q + u64::from((queue as u64) < total % q)
}

impl<'a> QueueLoop<'a> {
    fn new(
        ctx: &'a QueueContext,
        generator: OffsetGenerator,
        producer: rtrb::Producer<Record>,
    ) -> QueueLoop<'a> {
        let depth = ctx.workload.inflight_per_queue() as usize;
        let mix = &ctx.workload.mix;
        let mut op_cumulative = [0u64; 5];
        let mut acc = 0;
        let mut used = Op::ALL.iter().filter(|&&op| mix.weight(op) > 0);
        let single_op = if used.clone().count() == 1 {
            used.next().copied()
        } else {
            None
        };
        for op in Op::ALL {
            acc += mix.weight(op) as u64;
            op_cumulative[op as usize] = acc;
        }
        let w = &ctx.workload;
        QueueLoop {
            ctx,
            generator,
            producer,
            slots: vec![SlotState::default(); depth],
            free: (0..depth as u32).rev().collect(),
            inflight: 0,
            op_cumulative,
            op_total: acc,
            single_op,
            ops_budget: share_of(w.stop.ops, w.queues, ctx.queue),
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
        }
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

    /// Whether no further request will be issued (known without looking at the clock).
    fn exhausted(&self) -> bool {
        let warm = self.issued_warmup < self.warmup_ops;
        self.local_stop
            || self.limit_reached
            || self.ctx.shared.stop.load(Ordering::Relaxed)
            || (!warm && self.ops_budget > 0 && self.issued_measured >= self.ops_budget)
            || (!warm && self.bytes_budget > 0 && self.bytes_measured >= self.bytes_budget)
    }

    /// Prepare and push one request; false when the stop condition says no more.
    #[inline]
    fn issue<B: Backend>(&mut self, backend: &mut B, buffers: &mut IoBuffers) -> bool {
        if self.local_stop || self.limit_reached || self.ctx.shared.stop.load(Ordering::Relaxed) {
            return false;
        }
        let w = &self.ctx.workload;
        let now = backend.now();
        let warmup = self.issued_warmup < self.warmup_ops
            || (w.warmup.time_ns > 0 && now < self.start_ns + w.warmup.time_ns);
        if !warmup {
            let start = *self.measure_start.get_or_insert(now);
            if (self.ops_budget > 0 && self.issued_measured >= self.ops_budget)
                || (w.stop.time_ns > 0 && now - start >= w.stop.time_ns)
            {
                self.limit_reached = true;
                return false;
            }
        }
        let op = self.pick_op();
        let size = if op.has_range() { self.pick_size() } else { 0 };
        if !warmup && self.bytes_budget > 0 && self.bytes_measured + size > self.bytes_budget {
            self.limit_reached = true;
            return false;
        }
        let offset = if op.has_range() {
            self.generator.next_offset(size)
        } else {
            0
        };
        let Some(slot) = self.free.pop() else {
            return false;
        };
        let addr = match op {
            Op::Write => buffers.write_buffer(slot, offset, size as usize),
            _ => buffers.read_buffer(slot),
        };
        self.slots[slot as usize] = SlotState {
            submit_ns: 0,
            offset,
            len: size as u32,
            op: op as u8,
            warmup,
            busy: true,
        };
        backend.push(
            slot,
            Request {
                op,
                offset,
                len: size as u32,
                addr,
            },
        );
        self.inflight += 1;
        if warmup {
            self.issued_warmup += 1;
        } else {
            self.issued_measured += 1;
            self.bytes_measured += size;
        }
        true
    }

    #[inline]
    fn on_event(&mut self, event: Event) {
        match event {
            Event::Submitted { slot, at_ns } => self.slots[slot as usize].submit_ns = at_ns,
            Event::Completed {
                slot,
                result,
                at_ns,
            } => {
                let s = self.slots[slot as usize];
                self.slots[slot as usize].busy = false;
                let mut record = Record {
                    submit_ns: s.submit_ns,
                    complete_ns: at_ns,
                    offset: s.offset,
                    len: s.len,
                    result,
                    op: s.op,
                    queue: self.ctx.queue as u16,
                    warmup: s.warmup,
                };
                if record.failed() {
                    self.errors += 1;
                    self.ctx.shared.progress[self.ctx.queue as usize]
                        .errors
                        .store(self.errors, Ordering::Relaxed);
                    if self.ctx.on_error == OnError::Stop && !s.warmup {
                        self.local_stop = true;
                        let errno = if result < 0 { -result } else { libc::EIO };
                        self.ctx.shared.stop_with(StopReason::IoError {
                            op: Op::from_index(s.op).name().to_string(),
                            offset: s.offset,
                            errno,
                            message: std::io::Error::from_raw_os_error(errno).to_string(),
                        });
                    }
                } else {
                    self.completed_ops += 1;
                    self.completed_bytes += s.len as u64;
                    let progress = &self.ctx.shared.progress[self.ctx.queue as usize];
                    progress.ops.store(self.completed_ops, Ordering::Relaxed);
                    progress
                        .bytes
                        .store(self.completed_bytes, Ordering::Relaxed);
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

    /// The measurement loop. Returns true when buffers must be leaked (a request could not be cancelled).
    fn run<B: Backend>(
        &mut self,
        backend: &mut B,
        buffers: &mut IoBuffers,
        report: &mut QueueReport,
    ) -> bool {
        let batch = self.ctx.workload.batch.clone();
        let depth = self.ctx.workload.inflight_per_queue();
        let wait_ns = self.ctx.io_timeout_ns.clamp(1_000_000, 100_000_000);
        self.start_ns = backend.now();
        let mut first_batch = true;
        let mut leak = false;
        IN_HOT_LOOP.with(|c| c.set(true));
        loop {
            match &batch {
                Some(b) => {
                    if self.inflight == 0 {
                        if !first_batch && b.idle_ns > 0 && !self.exhausted() {
                            backend.idle(b.idle_ns);
                        }
                        first_batch = false;
                        for _ in 0..b.size {
                            if !self.issue(backend, buffers) {
                                break;
                            }
                        }
                    }
                }
                None => {
                    while self.inflight < depth {
                        if !self.issue(backend, buffers) {
                            break;
                        }
                    }
                }
            }
            if self.inflight == 0 {
                break;
            }
            let want = if batch.is_some() { self.inflight } else { 1 };
            let result = backend.submit_and_wait(want, wait_ns, |event| self.on_event(event));
            if let Err(e) = result {
                self.ctx.shared.stop_with(StopReason::EngineFailure {
                    message: format!("submission failed: {e}"),
                });
                self.local_stop = true;
                leak = !backend.cancel_all();
                break;
            }
            let now = backend.now();
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
        leak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Aggregator;
    use crate::target::TargetKind;

    #[test]
    fn shares_split_evenly_with_remainder_first() {
        let parts: Vec<u64> = (0..3).map(|q| share_of(10, 3, q)).collect();
        assert_eq!(parts, vec![4, 3, 3]);
        assert_eq!(share_of(0, 3, 1), 0);
    }

    #[test]
    fn engine_choice_parses() {
        assert_eq!("auto".parse::<EngineChoice>().unwrap(), EngineChoice::Auto);
        assert!("spdk"
            .parse::<EngineChoice>()
            .unwrap_err()
            .contains("auto, uring or psync"));
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
        submit_calls: Vec<usize>,
        idle_calls: Vec<u64>,
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
                submit_calls: Vec::new(),
                idle_calls: Vec::new(),
            }
        }
    }

    impl Backend for ScriptedBackend {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn push(&mut self, slot: u32, request: Request) {
            self.pending.push((slot, request));
        }
        fn submit_and_wait<F: FnMut(Event)>(
            &mut self,
            min: u32,
            timeout_ns: u64,
            mut on_event: F,
        ) -> std::io::Result<()> {
            self.submit_calls.push(self.pending.len());
            for (slot, req) in self.pending.drain(..) {
                on_event(Event::Submitted {
                    slot,
                    at_ns: self.now,
                });
                self.inflight.push((slot, req, self.now + self.latency_ns));
            }
            if self.hang {
                self.now += timeout_ns;
                return Ok(());
            }
            let mut done = 0;
            while done < min && !self.inflight.is_empty() {
                let (slot, req, at) = self.inflight.remove(0);
                self.now = self.now.max(at);
                let result = if Some(req.offset) == self.fail_offset {
                    -libc::EIO
                } else {
                    req.len as i32
                };
                on_event(Event::Completed {
                    slot,
                    result,
                    at_ns: self.now,
                });
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
        let file = tempfile::tempfile().unwrap();
        QueueContext {
            queue: 0,
            workload,
            target_size: 1 << 20,
            kind: TargetKind::RegularFile,
            file: Arc::new(file),
            shared: Arc::new(Shared {
                stop: AtomicBool::new(false),
                setup_failed: AtomicBool::new(false),
                progress: vec![QueueProgress {
                    ops: AtomicU64::new(0),
                    bytes: AtomicU64::new(0),
                    errors: AtomicU64::new(0),
                }],
                reason: Mutex::new(None),
            }),
            on_error,
            io_timeout_ns: 5_000_000_000,
            clock: Clock::monotonic(),
            cpu: None,
            use_uring: false,
        }
    }

    fn drive(ctx: &QueueContext, backend: &mut ScriptedBackend) -> (QueueReport, Vec<Record>) {
        let (producer, mut consumer) = rtrb::RingBuffer::<Record>::new(1 << 16);
        let generator = OffsetGenerator::new(&ctx.workload, ctx.target_size, 0);
        let mut buffers = IoBuffers::new(
            ctx.workload.inflight_per_queue() as usize,
            4096,
            ctx.workload.data,
            1,
            true,
        );
        let mut report = QueueReport {
            queue: 0,
            cpu: None,
            issued: 0,
            completed: 0,
            leaked_buffers: false,
        };
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
        let ctx = context(
            workload(r#"{"queue_depth":4,"stop":{"ops":100}}"#),
            OnError::Stop,
        );
        let mut backend = ScriptedBackend::new(10_000);
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(report.completed, 100);
        assert_eq!(records.len(), 100);
        assert!(records.iter().all(|r| r.latency_ns() >= 10_000));
        assert_eq!(
            *ctx.shared.reason.lock().unwrap(),
            Some(StopReason::Completed)
        );
    }

    #[test]
    fn an_io_error_stops_the_run_and_names_the_offset() {
        let ctx = context(
            workload(r#"{"queue_depth":1,"stop":{"ops":100}}"#),
            OnError::Stop,
        );
        let mut backend = ScriptedBackend::new(1_000);
        backend.fail_offset = Some(10 * 4096);
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(
            records.len(),
            11,
            "the failed request is recorded, nothing after it is issued"
        );
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
        let ctx = context(
            workload(r#"{"queue_depth":2,"stop":{"ops":300}}"#),
            OnError::Continue,
        );
        let mut backend = ScriptedBackend::new(1_000);
        backend.fail_offset = Some(0); // sequential wraps every 256 requests: two failures
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(records.len(), 300);
        assert_eq!(records.iter().filter(|r| r.failed()).count(), 2);
        assert_eq!(report.completed, 298);
    }

    #[test]
    fn a_request_outstanding_past_the_timeout_ends_the_run() {
        let mut ctx = context(
            workload(r#"{"queue_depth":2,"stop":{"ops":100}}"#),
            OnError::Stop,
        );
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
        assert!(
            backend.now < 1_000_000_000,
            "noticed within a few waits, not after every request"
        );
    }

    #[test]
    fn batch_mode_issues_whole_batches_with_idle_gaps() {
        let ctx = context(
            workload(r#"{"batch":{"size":8,"idle_ns":50000},"stop":{"ops":32}}"#),
            OnError::Stop,
        );
        let mut backend = ScriptedBackend::new(1_000);
        let (report, records) = drive(&ctx, &mut backend);
        assert_eq!(report.completed, 32);
        assert_eq!(backend.submit_calls, vec![8, 8, 8, 8]);
        assert_eq!(
            backend.idle_calls,
            vec![50_000; 3],
            "idle between batches, not before the first"
        );
        // All eight of a batch are submitted at the same instant.
        assert!(records[..8]
            .iter()
            .all(|r| r.submit_ns == records[0].submit_ns));
    }

    #[test]
    fn warmup_requests_are_flagged_and_not_counted_against_the_limit() {
        let ctx = context(
            workload(r#"{"stop":{"ops":50},"warmup":{"ops":20}}"#),
            OnError::Stop,
        );
        let mut backend = ScriptedBackend::new(1_000);
        let (_, records) = drive(&ctx, &mut backend);
        assert_eq!(records.len(), 70);
        assert_eq!(records.iter().filter(|r| r.warmup).count(), 20);
        assert!(records[..20].iter().all(|r| r.warmup));
        let mut agg = Aggregator::new(0, 1_000_000, 1, None);
        records.iter().for_each(|r| agg.add(r));
        assert_eq!(agg.finish().per_op["read"].ops, 50);
    }

    #[test]
    fn a_time_limit_is_measured_from_the_end_of_warmup() {
        let ctx = context(
            workload(r#"{"stop":{"time_ns":100000},"warmup":{"time_ns":50000}}"#),
            OnError::Stop,
        );
        let mut backend = ScriptedBackend::new(1_000);
        let (_, records) = drive(&ctx, &mut backend);
        let warm = records.iter().filter(|r| r.warmup).count();
        let measured = records.len() - warm;
        assert!((49..=51).contains(&warm), "{warm}");
        assert!((99..=101).contains(&measured), "{measured}");
    }
}
