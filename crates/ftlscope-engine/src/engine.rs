//! The engine's public face: options, results, and [`Run`], which starts the queues (one pinned thread
//! each on a real target, one virtual-time driver on a simulated one), the aggregator thread and the
//! health sampler (seed 000 §3.1's three-thread design).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::backend::uring;
use crate::clock::ClockInfo;
use crate::health::{open_health_source, HealthReport, HealthSampler};
use crate::queue::{QueueContext, Shared};
use crate::real::{
    allowed_cpus, choose_backend, pin_current_thread, psync_workload, queue_thread, shared_clock, BackendChoice,
    RealQueue,
};
use crate::replay::{Replay, ReplayError};
use crate::sim_driver::{drive, SimTarget};
use crate::stats::{AggregateResult, Aggregator, Record, TraceChunks};
use crate::target::{Target, TargetInfo};
use crate::verify::WriteRecord;
use crate::workload::{DataPattern, Op, Workload, WorkloadError};
use crate::write_shim::{ShimReport, WriteShimSettings};

pub use crate::queue::{in_hot_loop, with_hot_loop_flag};

/// Which backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineChoice {
    Auto,
    Uring,
    Psync,
    /// psync's calls made by a pool of worker threads, one per slot (see `backend::pool`).
    #[serde(rename = "psync-pool")]
    PsyncPool,
}

impl std::str::FromStr for EngineChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(EngineChoice::Auto),
            "uring" | "io_uring" => Ok(EngineChoice::Uring),
            "psync" => Ok(EngineChoice::Psync),
            "psync-pool" => Ok(EngineChoice::PsyncPool),
            other => Err(format!("unknown engine `{other}`; use auto, uring, psync or psync-pool")),
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
    /// Hand the per-request trace out while the run goes, in chunks of this many records (see
    /// [`Run::take_trace_chunks`]): a trace of any length in bounded memory, whatever `trace_limit` keeps.
    pub trace_chunk_rows: Option<usize>,
    pub window_ns: u64,
    /// Pin each queue thread to its own CPU.
    pub pin: bool,
    /// Sample device health this often (0 = not at all).
    pub health_interval_ns: u64,
    /// The write rate-limiting shim (see [`crate::write_shim`]); None = writes go as they come.
    pub write_shim: Option<WriteShimSettings>,
}

impl RunOptions {
    /// Refuse options that cannot work (a zero-length window would mean a window per nanosecond).
    pub fn validate(&self) -> Result<(), EngineError> {
        if self.window_ns < 1_000_000 {
            return Err(EngineError::Options {
                field: "window_ns",
                problem: format!("time windows must be at least 1 ms long (got {} ns)", self.window_ns),
            });
        }
        if self.io_timeout_ns < 1_000_000 {
            return Err(EngineError::Options {
                field: "io_timeout_ns",
                problem: format!("the I/O time-out must be at least 1 ms (got {} ns)", self.io_timeout_ns),
            });
        }
        if self.trace_limit == Some(0) {
            return Err(EngineError::Options { field: "trace_limit", problem: "must be above 0".into() });
        }
        if self.trace_chunk_rows == Some(0) {
            return Err(EngineError::Options { field: "trace_chunk_rows", problem: "must be above 0".into() });
        }
        if let Some(shim) = &self.write_shim {
            shim.validate().map_err(|problem| EngineError::Options { field: "write_shim", problem })?;
        }
        Ok(())
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            engine: EngineChoice::Auto,
            io_timeout_ns: 30_000_000_000,
            on_error: OnError::Stop,
            trace_limit: None,
            trace_chunk_rows: None,
            window_ns: 100_000_000,
            pin: true,
            health_interval_ns: 5_000_000_000,
            write_shim: None,
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
    #[error("run option `{field}`: {problem}")]
    Options { field: &'static str, problem: String },
    #[error("setting up queue {queue}: {message}")]
    Setup { queue: u32, message: String },
    #[error(transparent)]
    Replay(#[from] ReplayError),
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
    IoError { op: String, offset: u64, errno: i32, message: String },
    /// A request stayed outstanding past the I/O time-out.
    Timeout { op: String, offset: u64, outstanding_ns: u64 },
    /// The engine's own submission failed.
    EngineFailure { message: String },
}

impl StopReason {
    pub(crate) fn rank(&self) -> u8 {
        match self {
            StopReason::Completed => 0,
            StopReason::Interrupted => 1,
            StopReason::IoError { .. } => 2,
            StopReason::EngineFailure { .. } => 3,
            StopReason::Timeout { .. } => 4,
        }
    }
}

/// Live figures for a progress bar.
#[derive(Clone, Debug, Serialize)]
pub struct Progress {
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Wall time since the run started.
    pub elapsed_ns: u64,
    /// Device time since the run started: virtual on a simulated device, else the wall time.
    pub device_ns: u64,
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
    /// The write shim's results for this queue (merged into [`RunResult::write_shim`]).
    #[serde(skip)]
    pub write_shim: Option<ShimReport>,
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
    /// Requests kept in flight per requested queue: the workload's depth, or 1 where psync runs them one at
    /// a time (see `psync_workload`).
    pub queue_depth: u32,
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
    /// Virtual device time the run took, on a simulated device.
    pub virtual_ns: Option<u64>,
    /// Monotonic-raw time at which the run started; trace and window times are relative to it.
    pub t0_ns: u64,
    /// Verify runs: the generation last written to each 512 B sector from offset 0, and the last
    /// generation handed out.
    pub write_record: Option<(Vec<u32>, u64)>,
    /// The write shim's results, the queues' merged (None without the shim).
    pub write_shim: Option<ShimReport>,
}

/// What a worker thread hands back: the queue reports, and for a simulated target its health record and
/// the virtual time the run took.
struct WorkerOutput {
    reports: Vec<QueueReport>,
    health: Option<HealthReport>,
    virtual_ns: Option<u64>,
}

/// A running (or finished) measurement.
pub struct Run {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<WorkerOutput>>,
    /// Counts `workers` as they end (see [`Ended`]).
    ended: Arc<Ended>,
    aggregator: JoinHandle<AggregateResult>,
    health: Option<HealthSampler>,
    health_unavailable: Option<String>,
    target_info: TargetInfo,
    workload: Workload,
    options: RunOptions,
    env: EngineEnv,
    started: Instant,
    t0: u64,
    trace_chunks: Option<TraceChunks>,
}

/// How many of a run's worker threads (queues, or the simulator's) have ended, so that a caller can wait for the
/// end without polling: a thread that wakes every few ms to look may be put on a queue's CPU, and there it preempts
/// a queue that spins for its next due time (measured with bench/lag_sources.py: the replay's Python thread, woken
/// 200 times a second by a 5 ms poll, switched the queue out ~190 times a second, up to 300 us at a time).
#[derive(Default)]
pub struct Ended {
    count: Mutex<usize>,
    changed: Condvar,
}

impl Ended {
    /// Counts its thread as ended when dropped (also when the thread panics).
    fn guard(self: &Arc<Ended>) -> EndGuard {
        EndGuard(Arc::clone(self))
    }

    /// Wait until `threads` have ended or `timeout` has passed (None: no limit); true when they have.
    pub fn wait(&self, threads: usize, timeout: Option<Duration>) -> bool {
        let count = self.count.lock().expect("ended lock");
        match timeout {
            None => *self.changed.wait_while(count, |n| *n < threads).expect("ended lock") >= threads,
            Some(timeout) => {
                let (count, _) = self.changed.wait_timeout_while(count, timeout, |n| *n < threads).expect("ended lock");
                *count >= threads
            }
        }
    }
}

struct EndGuard(Arc<Ended>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        // A poisoned lock only means another worker panicked: still count this one.
        let mut count = self.0.count.lock().unwrap_or_else(|e| e.into_inner());
        *count += 1;
        self.0.changed.notify_all();
    }
}

/// What `start_aggregator` starts: one record ring per queue, the thread, and the streamed trace's chunks.
type AggregatorParts = (Vec<rtrb::Producer<Record>>, JoinHandle<AggregateResult>, Option<TraceChunks>);

/// Take a record ring once round before the run: its memory is fresh from the allocator (untouched pages), and each
/// 4 KiB page's first write (every 73rd record) would fault in the queue's hot loop on its first lap (3.3-3.6 us a
/// fault measured here, up to ~230 of them at 50,000 requests/s in the first third of a second).
pub(crate) fn prefault_ring(producer: &mut rtrb::Producer<Record>, consumer: &mut rtrb::Consumer<Record>) {
    while producer.push(Record::default()).is_ok() {}
    while consumer.pop().is_ok() {}
}

/// The aggregator thread and one record ring per queue.
fn start_aggregator(
    workload: &Workload,
    options: &RunOptions,
    t0: u64,
    cpu: Option<usize>,
    replay: bool,
) -> AggregatorParts {
    let ring_capacity = (workload.inflight_per_queue() as usize * 64).clamp(1 << 14, 1 << 20);
    let (producers, consumers): (Vec<_>, Vec<_>) = (0..workload.queues)
        .map(|_| {
            let (mut producer, mut consumer) = rtrb::RingBuffer::<Record>::new(ring_capacity);
            prefault_ring(&mut producer, &mut consumer);
            (producer, consumer)
        })
        .unzip();
    let ops: Vec<Op> = Op::ALL.into_iter().filter(|&op| workload.mix.weight(op) > 0).collect();
    let mut aggregator = Aggregator::new(t0, options.window_ns, workload.queues as usize, options.trace_limit, &ops);
    let trace_chunks = options.trace_chunk_rows.map(|rows| aggregator.stream_trace(rows));
    if replay {
        aggregator.track_issue_lag();
    }
    let handle = std::thread::Builder::new()
        .name("ftlscope-agg".into())
        .spawn(move || {
            if let Some(cpu) = cpu {
                pin_current_thread(cpu);
            }
            aggregate(consumers, aggregator)
        })
        .expect("spawn aggregator thread");
    (producers, handle, trace_chunks)
}

/// One context per queue; `lanes` consecutive queues share one sequential stream (see `psync_workload`).
fn queue_contexts(
    workload: &Workload,
    target_size: u64,
    shared: &Arc<Shared>,
    options: &RunOptions,
    lanes: u32,
    replay: &Option<Arc<Replay>>,
    t0: u64,
) -> Vec<QueueContext> {
    // How long the run should last, where that is known, to size the write shim's held-bytes series.
    let expected_ns = match replay {
        Some(r) => r.last_due_ns().filter(|&ns| ns > 0),
        None => (workload.stop.time_ns > 0).then(|| workload.stop.time_ns + workload.warmup.time_ns),
    };
    (0..workload.queues)
        .map(|q| QueueContext {
            queue: q,
            lanes,
            workload: workload.clone(),
            target_size,
            shared: Arc::clone(shared),
            on_error: options.on_error,
            io_timeout_ns: options.io_timeout_ns,
            replay: replay.clone(),
            write_shim: options.write_shim,
            t0_ns: t0,
            window_ns: options.window_ns,
            expected_ns,
        })
        .collect()
}

impl Run {
    /// Validate, set up every queue, and start measuring a real target. Returns once all queues run.
    pub fn start(target: Target, workload: Workload, options: RunOptions) -> Result<Run, EngineError> {
        Run::start_replay(target, workload, options, None)
    }

    /// As [`Run::start`], with the requests taken from `replay` (a recorded trace) rather than drawn from the
    /// workload, whose queue depth, data and options still apply.
    pub fn start_replay(
        target: Target,
        workload: Workload,
        options: RunOptions,
        replay: Option<Arc<Replay>>,
    ) -> Result<Run, EngineError> {
        workload.validate(target.info.size_bytes, target.info.logical_block_size)?;
        check_write_shim(&workload, &options)?;
        if let Some(replay) = &replay {
            check_replay(&workload, replay, &target.info)?;
        }
        if workload.mix.writes() && !target.info.writable {
            return Err(EngineError::ReadOnlyTarget(target.info.path.display().to_string()));
        }
        let BackendChoice { use_uring, use_pool, worker_driven, reason: backend_reason } =
            choose_backend(options.engine, &target)?;
        let (clock, clock_info) = shared_clock();
        let mut notices = Vec::new();
        if !use_uring && options.engine == EngineChoice::Auto {
            // Say so whenever auto did not pick io_uring: the user may have expected it.
            notices.push(format!("engine: {backend_reason}"));
        }
        // What the user asked for goes into the result; the queues run `workload`, which for psync may keep
        // the queue depth with threads.
        let requested = workload.clone();
        let (workload, lanes, queue_depth) = if use_uring || use_pool {
            let depth = workload.inflight_per_queue();
            (workload, 1, depth)
        } else if replay.is_some() {
            // A trace is one stream in one order: psync's thread per request in flight would replay it once per
            // thread, so each queue replays its part one request at a time.
            if workload.queue_depth > 1 {
                notices.push(format!(
                    "psync replays one request at a time on each queue: effective queue depth 1, not {}",
                    workload.queue_depth
                ));
            }
            (workload, 1, 1)
        } else {
            let plan = psync_workload(&workload);
            notices.extend(plan.notice);
            (plan.workload, plan.lanes, plan.queue_depth)
        };
        let queues = workload.queues;
        let mut shared = Shared::new(queues);
        shared.write_record = write_record(&workload, target.info.size_bytes)?;
        let shared = Arc::new(shared);
        let cpus = if options.pin && !worker_driven { allowed_cpus() } else { Vec::new() };
        // Queues on CPUs 1, 2, ... and the aggregator on the first CPU, away from the queues where the
        // machine has room.
        let queue_cpu = |q: usize| (!cpus.is_empty()).then(|| cpus[(q + 1) % cpus.len()]);
        let aggregator_cpu = cpus.first().copied();

        let (health, health_unavailable) = if options.health_interval_ns > 0 {
            match open_health_source(&target.info.path) {
                Ok(source) => {
                    (Some(HealthSampler::spawn(source, Duration::from_nanos(options.health_interval_ns))), None)
                }
                Err(unavailable) => (None, Some(unavailable.to_string())),
            }
        } else {
            (None, Some("health sampling turned off".to_string()))
        };

        let t0 = clock.now();
        let file = Arc::new(target.file);
        let info = target.info.clone();
        let (producers, aggregator, trace_chunks) =
            start_aggregator(&workload, &options, t0, aggregator_cpu, replay.is_some());
        let barrier = Arc::new(Barrier::new(queues as usize + 1));
        let (setup_tx, setup_rx) = std::sync::mpsc::channel::<Result<Option<uring::UringSetup>, String>>();
        let mut workers = Vec::new();
        let ended = Arc::new(Ended::default());
        for (ctx, producer) in
            queue_contexts(&workload, info.size_bytes, &shared, &options, lanes, &replay, t0).into_iter().zip(producers)
        {
            let q = ctx.queue;
            let real = RealQueue {
                file: Arc::clone(&file),
                kind: info.kind,
                clock,
                cpu: queue_cpu(q as usize),
                worker_cpus: if cpus.len() > 1 { cpus.clone() } else { Vec::new() },
                use_uring,
                use_pool,
            };
            let barrier = Arc::clone(&barrier);
            let setup_tx = setup_tx.clone();
            let end = ended.guard();
            let handle = std::thread::Builder::new()
                .name(format!("ftlscope-q{q}"))
                .spawn(move || {
                    let _end = end;
                    WorkerOutput {
                        reports: vec![queue_thread(ctx, real, producer, barrier, setup_tx)],
                        health: None,
                        virtual_ns: None,
                    }
                })
                .expect("spawn queue thread");
            workers.push(handle);
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
        if let Some(message) = setup_error {
            drop(trace_chunks);
            for h in workers {
                let _ = h.join();
            }
            let _ = aggregator.join();
            if let Some(h) = health {
                h.stop();
            }
            return Err(EngineError::Setup { queue: 0, message });
        }
        let env = EngineEnv {
            backend: if use_uring {
                "io_uring"
            } else if use_pool {
                "psync-pool"
            } else {
                "psync"
            },
            backend_reason,
            backend_setup,
            clock: clock_info,
            pinned_cpus: (0..queues as usize).filter_map(queue_cpu).collect(),
            aggregator_cpu,
            queue_depth,
            notices,
        };
        Ok(Run {
            shared,
            workers,
            ended,
            aggregator,
            health,
            health_unavailable,
            target_info: info,
            workload: requested,
            options,
            env,
            started: Instant::now(),
            t0,
            trace_chunks,
        })
    }

    /// Start a run on a simulated device. The device is locked for the run and its virtual clock moves on;
    /// all queues run on one thread in virtual time.
    pub fn start_sim(
        target: Arc<Mutex<SimTarget>>,
        workload: Workload,
        options: RunOptions,
    ) -> Result<Run, EngineError> {
        Run::start_sim_replay(target, workload, options, None)
    }

    /// As [`Run::start_sim`], replaying a recorded trace (see [`Run::start_replay`]).
    pub fn start_sim_replay(
        target: Arc<Mutex<SimTarget>>,
        workload: Workload,
        options: RunOptions,
        replay: Option<Arc<Replay>>,
    ) -> Result<Run, EngineError> {
        let (info, t0) = {
            let t = target.lock().expect("simulated device lock");
            (t.info(), t.now.ns())
        };
        options.validate()?;
        workload.validate(info.size_bytes, info.logical_block_size)?;
        check_write_shim(&workload, &options)?;
        if let Some(replay) = &replay {
            check_replay(&workload, replay, &info)?;
        }
        // A verify run on a simulated device: the model keeps each page's last write generation as its
        // content fingerprint (see `sim_driver::SimSource`), so the read-back pass can check it.
        let mut shared = Shared::new(workload.queues);
        shared.write_record = write_record(&workload, info.size_bytes)?;
        let shared = Arc::new(shared);
        let (producers, aggregator, trace_chunks) = start_aggregator(&workload, &options, t0, None, replay.is_some());
        let contexts = queue_contexts(&workload, info.size_bytes, &shared, &options, 1, &replay, t0);
        let worker_shared = Arc::clone(&shared);
        let health_interval = options.health_interval_ns;
        let ended = Arc::new(Ended::default());
        let end = ended.guard();
        let worker = std::thread::Builder::new()
            .name("ftlscope-sim".into())
            .spawn(move || {
                let _end = end;
                let mut target = target.lock().expect("simulated device lock");
                let outcome = drive(&mut target, &contexts, producers, &worker_shared, health_interval);
                WorkerOutput {
                    reports: outcome.reports,
                    health: Some(outcome.health),
                    virtual_ns: Some(outcome.virtual_ns),
                }
            })
            .expect("spawn simulator thread");
        let env = EngineEnv {
            backend: "sim",
            backend_reason: "simulated device: every queue stepped on the simulator's virtual clock".into(),
            backend_setup: None,
            clock: ClockInfo { source: "virtual", tsc_hz: None, calibration_ns: 0, check_error_ns: None },
            pinned_cpus: Vec::new(),
            aggregator_cpu: None,
            queue_depth: workload.inflight_per_queue(),
            notices: Vec::new(),
        };
        Ok(Run {
            shared,
            workers: vec![worker],
            ended,
            aggregator,
            health: None,
            health_unavailable: None,
            target_info: info,
            workload,
            options,
            env,
            started: Instant::now(),
            t0,
            trace_chunks,
        })
    }

    pub fn progress(&self) -> Progress {
        let elapsed_ns = self.started.elapsed().as_nanos() as u64;
        let device_ns = match self.env.backend {
            "sim" => self.shared.device_now.load(Ordering::Relaxed),
            _ => elapsed_ns,
        };
        let mut p = Progress { ops: 0, bytes: 0, errors: 0, elapsed_ns, device_ns, finished: self.is_finished() };
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
        self.workers.iter().all(|h| h.is_finished())
    }

    /// What to wait on for the end of the run's workers without holding the run (`Ended::wait` with
    /// [`Run::worker_count`]).
    pub fn ended(&self) -> Arc<Ended> {
        Arc::clone(&self.ended)
    }

    pub fn worker_count(&self) -> usize {
        self.workers.len()
    }

    pub fn env(&self) -> &EngineEnv {
        &self.env
    }

    /// The streamed trace's chunks (with `trace_chunk_rows`), once. The taker must drain them (or drop them,
    /// which stops the streaming) while the run goes: a full stream holds the run back.
    pub fn take_trace_chunks(&mut self) -> Option<TraceChunks> {
        self.trace_chunks.take()
    }

    /// Wait for the end and collect the results.
    pub fn join(mut self) -> RunResult {
        // Chunks nobody took would fill up and hold the run back for ever: dropping them ends the streaming.
        drop(self.trace_chunks.take());
        let mut reports = Vec::new();
        let mut sim_health = None;
        let mut virtual_ns = None;
        for h in self.workers {
            match h.join() {
                Ok(output) => {
                    reports.extend(output.reports);
                    sim_health = sim_health.or(output.health);
                    virtual_ns = virtual_ns.or(output.virtual_ns);
                }
                Err(_) => {
                    self.shared.stop_with(StopReason::EngineFailure { message: "a worker thread panicked".into() })
                }
            }
        }
        let stats = self.aggregator.join().expect("aggregator thread");
        let health = match (sim_health, self.health, self.health_unavailable) {
            (Some(report), _, _) => report,
            (None, Some(sampler), _) => sampler.stop(),
            (None, None, reason) => HealthReport::unavailable(reason.unwrap_or_default()),
        };
        let stop_reason = self.shared.reason.lock().expect("stop reason lock").clone().unwrap_or(StopReason::Completed);
        let shims: Vec<&ShimReport> = reports.iter().filter_map(|r| r.write_shim.as_ref()).collect();
        let write_shim = ShimReport::merge(&shims);
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
            virtual_ns,
            t0_ns: self.t0,
            write_record: self
                .shared
                .write_record
                .as_ref()
                .map(|r| (r.snapshot(), self.shared.generation.load(Ordering::Relaxed))),
            write_shim,
        }
    }
}

/// The write shim paces writes by itself: not beside a rate limit or batches, which pace them too.
fn check_write_shim(workload: &Workload, options: &RunOptions) -> Result<(), EngineError> {
    let Some(shim) = &options.write_shim else {
        return Ok(());
    };
    let problem = if let Err(problem) = shim.validate() {
        problem
    } else if workload.rate.limited() {
        "the write shim and a rate limit both pace the requests: use one".into()
    } else if workload.batch.is_some() {
        "the write shim paces writes one by one: not with batches".into()
    } else {
        return Ok(());
    };
    Err(EngineError::Options { field: "write_shim", problem })
}

/// What a replay needs of the workload that carries it: as many queues as the trace is split over (one, unless
/// [`Replay::split`]), no pacing of its own, buffers and a mix that cover the trace's requests (the mix decides
/// whether the target is opened for writing), and requests that fit the target.
fn check_replay(workload: &Workload, replay: &Replay, info: &TargetInfo) -> Result<(), EngineError> {
    let invalid = |problem: String| EngineError::Replay(ReplayError::Invalid(problem));
    if workload.queues != replay.queues() {
        return Err(invalid(format!(
            "the trace is split over {} queue(s), the workload has {}",
            replay.queues(),
            workload.queues
        )));
    }
    if workload.batch.is_some() || workload.rate.limited() || workload.warmup != Default::default() {
        return Err(invalid("the trace sets the pace: no batch, rate limit or warm-up".into()));
    }
    if workload.max_size() < replay.max_len() {
        return Err(invalid(format!(
            "the workload's largest size ({} B) is below the trace's largest request ({} B)",
            workload.max_size(),
            replay.max_len()
        )));
    }
    if let Some(op) = Op::ALL.into_iter().find(|&op| replay.has(op) && workload.mix.weight(op) == 0) {
        return Err(invalid(format!("the trace has {} requests, which the workload's mix leaves out", op.name())));
    }
    replay.validate(info.size_bytes, info.logical_block_size)?;
    Ok(())
}

/// A verify run's write record (what each sector should hold after the run), or None for other runs.
fn write_record(workload: &Workload, target_size: u64) -> Result<Option<WriteRecord>, EngineError> {
    if workload.data != DataPattern::Verify || !workload.mix.writes() {
        return Ok(None);
    }
    let length = if workload.range.length > 0 {
        workload.range.length
    } else {
        target_size.saturating_sub(workload.range.start)
    };
    WriteRecord::new(0, workload.range.start + length + workload.align_offset)
        .map(Some)
        .map_err(|problem| WorkloadError::Invalid { field: "data", problem }.into())
}

/// Run to the end.
pub fn run(target: Target, workload: Workload, options: RunOptions) -> Result<RunResult, EngineError> {
    Ok(Run::start(target, workload, options)?.join())
}

/// Run to the end on a simulated device.
pub fn run_sim(
    target: Arc<Mutex<SimTarget>>,
    workload: Workload,
    options: RunOptions,
) -> Result<RunResult, EngineError> {
    Ok(Run::start_sim(target, workload, options)?.join())
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_wait_for_the_end_returns_when_the_last_worker_ends_and_not_before() {
        let ended = Arc::new(Ended::default());
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let quick = {
            let end = ended.guard();
            std::thread::spawn(move || drop(end))
        };
        let slow = {
            let end = ended.guard();
            std::thread::spawn(move || {
                let _end = end;
                go_rx.recv().unwrap();
            })
        };
        quick.join().unwrap();
        // One of two has ended: a bounded wait times out and says so.
        let t = Instant::now();
        assert!(!ended.wait(2, Some(Duration::from_millis(30))));
        assert!(t.elapsed() >= Duration::from_millis(30));
        assert!(ended.wait(1, Some(Duration::ZERO)), "one has ended");
        // The unbounded wait returns once the second ends.
        let waiter = {
            let ended = Arc::clone(&ended);
            std::thread::spawn(move || ended.wait(2, None))
        };
        go_tx.send(()).unwrap();
        assert!(waiter.join().unwrap());
        slow.join().unwrap();
        // A worker that panics still counts as ended.
        let panicked = {
            let end = ended.guard();
            std::thread::spawn(move || {
                let _end = end;
                panic!("a worker's panic");
            })
        };
        assert!(panicked.join().is_err());
        assert!(ended.wait(3, Some(Duration::from_secs(10))));
    }

    /// Minor page faults of the calling thread so far.
    pub(crate) fn minor_faults() -> i64 {
        // SAFETY: rusage is plain data that getrusage fills.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer; RUSAGE_THREAD reads the calling thread's counters.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }, 0);
        usage.ru_minflt
    }

    #[test]
    fn a_prefaulted_record_ring_takes_its_first_lap_without_page_faults() {
        // One lap as a run makes it: the queue pushes a record, the aggregator takes it.
        fn lap(producer: &mut rtrb::Producer<Record>, consumer: &mut rtrb::Consumer<Record>, capacity: usize) -> i64 {
            let before = minor_faults();
            for _ in 0..capacity {
                producer.push(Record::default()).expect("room");
                consumer.pop().expect("a record");
            }
            minor_faults() - before
        }
        let capacity = 1 << 16;
        let pages = (capacity * std::mem::size_of::<Record>() / 4096) as i64;
        let (mut producer, mut consumer) = rtrb::RingBuffer::<Record>::new(capacity);
        let cold = lap(&mut producer, &mut consumer, capacity);
        assert!(cold >= pages / 2, "a fresh ring's first lap faulted {cold} times over {pages} pages");
        let (mut producer, mut consumer) = rtrb::RingBuffer::<Record>::new(capacity);
        prefault_ring(&mut producer, &mut consumer);
        let warm = lap(&mut producer, &mut consumer, capacity);
        assert!(warm <= 2, "a prefaulted ring's first lap faulted {warm} times over {pages} pages");
    }

    #[test]
    fn engine_choice_parses() {
        assert_eq!("auto".parse::<EngineChoice>().unwrap(), EngineChoice::Auto);
        assert!("spdk".parse::<EngineChoice>().unwrap_err().contains("auto, uring, psync or psync-pool"));
    }
}
