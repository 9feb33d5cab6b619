//! Real targets (block devices and files): one pinned thread per queue, each with its own io_uring or psync
//! backend, on the calibrated TSC clock.

use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Duration;

use crate::backend::pool::PoolBackend;
use crate::backend::psync::PsyncBackend;
use crate::backend::uring::{self, UringBackend};
use crate::buffers::IoBuffers;
use crate::clock::{Clock, ClockInfo};
use crate::engine::{EngineChoice, EngineError, QueueReport};
use crate::pattern::OffsetGenerator;
use crate::queue::{QueueContext, QueueLoop};
use crate::stats::Record;
use crate::target::{Target, TargetKind};
use crate::workload::{Pattern, Workload};

/// The most threads psync starts to keep a queue depth (queues x depth); beyond it, depth 1 per queue.
const PSYNC_MAX_THREADS: u32 = 256;

/// How a queue reaches a real target.
pub(crate) struct RealQueue {
    pub file: Arc<File>,
    pub kind: TargetKind,
    pub clock: Clock,
    pub cpu: Option<usize>,
    /// CPUs for io_uring's and psync-pool's worker threads: every CPU the process may use, not just the queue's
    /// own (empty: the queue is not pinned, and the workers inherit its CPUs).
    pub worker_cpus: Vec<usize>,
    pub use_uring: bool,
    /// psync's calls from a pool of worker threads (when not io_uring).
    pub use_pool: bool,
}

pub(crate) fn shared_clock() -> (Clock, ClockInfo) {
    static CLOCK: OnceLock<(Clock, ClockInfo)> = OnceLock::new();
    CLOCK.get_or_init(|| Clock::calibrate(Duration::from_millis(50))).clone()
}

pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and size for the current thread.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    // SAFETY: `set` was filled by the kernel.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

pub(crate) fn pin_current_thread(cpu: usize) -> bool {
    pin_current_thread_to(&[cpu])
}

/// Let the calling thread run on `cpus` only (CPUs the process may use); false if the kernel refused.
pub(crate) fn pin_current_thread_to(cpus: &[usize]) -> bool {
    // SAFETY: cpu_set_t is plain data; each cpu < CPU_SETSIZE (it came from sched_getaffinity).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Let this thread's timed sleeps and waits end when asked: the kernel may otherwise defer a timer by the thread's
/// timer slack (50 us by default) to batch wake-ups, and a sleep before a due request, or a wait for a completion
/// bounded by the due time, would end that much later. Costs only the batching the kernel forgoes for this thread.
fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and changes only the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// The backend for a run, and why, in words.
pub(crate) struct BackendChoice {
    pub use_uring: bool,
    /// psync-pool: a worker thread per slot makes the calls (the queue keeps its depth, no threads per request).
    pub use_pool: bool,
    /// io_uring will hand every request to its worker threads (the target completes synchronously), so
    /// the queue threads are not pinned: the workers must spread over the CPUs, and a pinned queue thread
    /// halved io_uring's throughput at QD 32 on zram here.
    pub worker_driven: bool,
    pub reason: String,
}

/// Decide the backend for `choice` on `target`.
pub(crate) fn choose_backend(choice: EngineChoice, target: &Target) -> Result<BackendChoice, EngineError> {
    let synchronous = crate::autoselect::completes_synchronously(target);
    let pick = |use_uring: bool, reason: String| BackendChoice {
        use_uring,
        use_pool: false,
        worker_driven: use_uring && synchronous.is_some(),
        reason,
    };
    let uring_ok = uring::available();
    match choice {
        EngineChoice::Psync => Ok(pick(false, "psync requested".into())),
        EngineChoice::PsyncPool => Ok(BackendChoice {
            use_pool: true,
            ..pick(false, "psync-pool requested (a worker thread per slot)".into())
        }),
        EngineChoice::Uring => match uring_ok {
            Ok(()) => Ok(pick(true, "io_uring requested".into())),
            Err(e) => Err(EngineError::UringUnavailable(e.to_string())),
        },
        EngineChoice::Auto => match (uring_ok, &synchronous) {
            (Err(e), _) => Ok(pick(false, format!("io_uring unavailable ({e}); using psync"))),
            (Ok(()), None) => Ok(pick(true, "io_uring (asynchronous target)".into())),
            // psync beats io_uring's hand-off of every request to a worker thread here: 15x at QD 1 on zram,
            // and at QD 32 psync's threads (see `psync_workload`) do 1.6-1.7x what io_uring's workers do.
            (Ok(()), Some(why)) => Ok(pick(false, format!("{why}: psync avoids io_uring's worker-thread hand-off"))),
        },
    }
}

/// How psync runs a workload: the workload its threads run (one queue each), how many consecutive
/// threads share one of the requested queues' streams, and what to tell the user.
pub(crate) struct PsyncPlan {
    pub workload: Workload,
    pub lanes: u32,
    /// Requests in flight per requested queue: the workload's depth, or 1.
    pub queue_depth: u32,
    pub notice: Option<String>,
}

/// psync has one request in flight per thread, so a queue depth of N is kept by N threads, each a queue of
/// depth 1 (what fio's psync does with `numjobs`). Where every queue draws its offsets independently over
/// the whole range (uniform random, hot set, zipf), N such threads are the same workload. A sequential
/// walk of one request size is shared: thread j of N takes requests j, j + N, j + 2N, ... of the queue's
/// stream, so N consecutive requests are in flight as at depth N. Permuted and strided walks (each queue
/// a stream with its own order), sequential walks of mixed sizes and batch mode keep depth 1, and the
/// notice says so.
pub(crate) fn psync_workload(workload: &Workload) -> PsyncPlan {
    let depth = workload.inflight_per_queue();
    let unchanged = |notice| PsyncPlan { workload: workload.clone(), lanes: 1, queue_depth: 1, notice };
    if depth <= 1 {
        return unchanged(None);
    }
    let independent = !workload.pattern.splits_range();
    let shared_stream = matches!(workload.pattern, Pattern::Sequential {}) && workload.sizes.len() == 1;
    let threads = workload.queues.saturating_mul(depth);
    if (independent || shared_stream) && workload.batch.is_none() && threads <= PSYNC_MAX_THREADS {
        let mut threaded = workload.clone();
        threaded.queues = threads;
        threaded.queue_depth = 1;
        let notice = format!("psync keeps queue depth {depth} with {depth} threads per queue, one request each");
        let lanes = if independent { 1 } else { depth };
        return PsyncPlan { workload: threaded, lanes, queue_depth: depth, notice: Some(notice) };
    }
    let why = if workload.batch.is_some() {
        "batch mode issues one batch at a time".to_string()
    } else if matches!(workload.pattern, Pattern::Sequential {}) {
        "a sequential walk of mixed sizes is one stream per queue".to_string()
    } else if !independent {
        "this offset pattern is one stream per queue".to_string()
    } else {
        format!("that would take more than {PSYNC_MAX_THREADS} threads")
    };
    unchanged(Some(format!("psync runs one request at a time per queue ({why}): effective queue depth 1, not {depth}")))
}

pub(crate) fn queue_thread(
    ctx: QueueContext,
    real: RealQueue,
    producer: rtrb::Producer<Record>,
    barrier: Arc<Barrier>,
    setup_tx: std::sync::mpsc::Sender<Result<Option<uring::UringSetup>, String>>,
) -> QueueReport {
    let pinned = real.cpu.filter(|&cpu| pin_current_thread(cpu));
    precise_timers();
    let depth = ctx.workload.inflight_per_queue();
    let writes = ctx.workload.mix.writes();
    let mut buffers = IoBuffers::new(
        depth as usize,
        ctx.workload.max_size() as usize,
        ctx.workload.data,
        ctx.workload.seed,
        ctx.queue,
        writes,
    );
    buffers.verify_tag = ctx.workload.verify_tag;
    let generator = OffsetGenerator::for_thread(&ctx.workload, ctx.target_size, ctx.queue, ctx.lanes);
    let mut report =
        QueueReport { queue: ctx.queue, cpu: pinned, issued: 0, completed: 0, leaked_buffers: false, write_shim: None };
    if real.use_uring {
        let region = (buffers.region.as_ptr(), buffers.region.len());
        match UringBackend::new(Arc::clone(&real.file), real.kind, depth, region, real.clock, &real.worker_cpus) {
            Ok(mut backend) => {
                let _ = setup_tx.send(Ok(Some(backend.setup().clone())));
                barrier.wait();
                if ctx.shared.setup_failed.load(Ordering::Relaxed) {
                    return report;
                }
                let leak = QueueLoop::new(&ctx, generator, producer).run(&mut backend, &mut buffers, &mut report);
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
    } else if real.use_pool {
        // The workers may run on every CPU the process may use, not on the queue's alone (see `backend::pool`).
        match PoolBackend::new(Arc::clone(&real.file), real.kind, depth, real.clock, &real.worker_cpus) {
            Ok(mut backend) => {
                let _ = setup_tx.send(Ok(None));
                barrier.wait();
                if ctx.shared.setup_failed.load(Ordering::Relaxed) {
                    return report;
                }
                let leak = QueueLoop::new(&ctx, generator, producer).run(&mut backend, &mut buffers, &mut report);
                if leak {
                    // A worker may still read into these buffers: never free them.
                    std::mem::forget(buffers);
                }
            }
            Err(e) => {
                let _ = setup_tx.send(Err(format!("psync-pool could not start its worker threads: {e}")));
                barrier.wait();
            }
        }
    } else {
        let mut backend = PsyncBackend::new(Arc::clone(&real.file), real.kind, depth, real.clock);
        let _ = setup_tx.send(Ok(None));
        barrier.wait();
        if !ctx.shared.setup_failed.load(Ordering::Relaxed) {
            QueueLoop::new(&ctx, generator, producer).run(&mut backend, &mut buffers, &mut report);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Batch;

    fn random_at_depth(depth: u32) -> Workload {
        Workload { queue_depth: depth, pattern: Pattern::Random {}, ..Workload::default() }
    }

    #[test]
    fn psync_keeps_a_random_workload_s_depth_with_threads() {
        let plan = psync_workload(&Workload { queues: 2, ..random_at_depth(8) });
        assert_eq!((plan.workload.queues, plan.workload.queue_depth, plan.lanes, plan.queue_depth), (16, 1, 1, 8));
        assert!(plan.notice.expect("a notice").contains("queue depth 8 with 8 threads per queue"));
        let plan = psync_workload(&random_at_depth(1));
        assert_eq!((plan.workload.queues, plan.workload.queue_depth, plan.notice), (1, 1, None));
    }

    #[test]
    fn psync_threads_share_a_sequential_stream() {
        let plan = psync_workload(&Workload { pattern: Pattern::Sequential {}, queues: 2, ..random_at_depth(4) });
        assert_eq!((plan.workload.queues, plan.workload.queue_depth, plan.lanes, plan.queue_depth), (8, 1, 4, 4));
        // Threads 0-3 take turns along queue 0's half of the range, threads 4-7 along queue 1's.
        let size = 1 << 20;
        let offsets = |thread| {
            let mut g = OffsetGenerator::for_thread(&plan.workload, size, thread, plan.lanes);
            (0..3).map(|_| g.next_offset(4096)).collect::<Vec<_>>()
        };
        assert_eq!(offsets(0), [0, 4 * 4096, 8 * 4096]);
        assert_eq!(offsets(3), [3 * 4096, 7 * 4096, 11 * 4096]);
        assert_eq!(offsets(5), [size / 2 + 4096, size / 2 + 5 * 4096, size / 2 + 9 * 4096]);
    }

    #[test]
    fn psync_stays_at_depth_1_where_threads_would_change_the_workload() {
        let permutation = Workload { pattern: Pattern::Permutation {}, ..random_at_depth(8) };
        let mixed = Workload { pattern: Pattern::Sequential {}, sizes: vec![4096, 8192], ..random_at_depth(8) };
        let batched = Workload { batch: Some(Batch { size: 8, idle_ns: 0 }), ..random_at_depth(1) };
        let huge = Workload { queues: 4, ..random_at_depth(128) };
        for (workload, why) in [
            (permutation, "one stream per queue"),
            (mixed, "mixed sizes"),
            (batched, "one batch at a time"),
            (huge, "more than 256 threads"),
        ] {
            let plan = psync_workload(&workload);
            assert_eq!((plan.workload.queues, plan.workload.queue_depth), (workload.queues, workload.queue_depth));
            assert_eq!(plan.queue_depth, 1);
            let notice = plan.notice.expect("a notice");
            assert!(notice.contains(why) && notice.contains("effective queue depth 1"), "{notice}");
        }
    }
}
