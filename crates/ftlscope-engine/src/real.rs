//! Real targets (block devices and files): one pinned thread per queue, each with its own io_uring or psync
//! backend, on the calibrated TSC clock.

use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Duration;

use crate::backend::psync::PsyncBackend;
use crate::backend::uring::{self, UringBackend};
use crate::buffers::IoBuffers;
use crate::clock::{Clock, ClockInfo};
use crate::engine::{EngineChoice, EngineError, QueueReport};
use crate::pattern::OffsetGenerator;
use crate::queue::{QueueContext, QueueLoop};
use crate::stats::Record;
use crate::target::{Target, TargetKind};

/// How a queue reaches a real target.
pub(crate) struct RealQueue {
    pub file: Arc<File>,
    pub kind: TargetKind,
    pub clock: Clock,
    pub cpu: Option<usize>,
    /// CPUs for io_uring's worker threads: every CPU the process may use, not just the queue's own.
    pub worker_cpus: Vec<usize>,
    pub use_uring: bool,
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
    // SAFETY: as above; the set names one CPU the process may use.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The backend for a run, and why, in words.
pub(crate) struct BackendChoice {
    pub use_uring: bool,
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
        worker_driven: use_uring && synchronous.is_some(),
        reason,
    };
    let uring_ok = uring::available();
    match choice {
        EngineChoice::Psync => Ok(pick(false, "psync requested".into())),
        EngineChoice::Uring => match uring_ok {
            Ok(()) => Ok(pick(true, "io_uring requested".into())),
            Err(e) => Err(EngineError::UringUnavailable(e.to_string())),
        },
        EngineChoice::Auto => match (uring_ok, &synchronous) {
            (Err(e), _) => Ok(pick(false, format!("io_uring unavailable ({e}); using psync"))),
            (Ok(()), None) => Ok(pick(true, "io_uring (asynchronous target)".into())),
            // psync beats io_uring's hand-off of every request to a worker thread here: 3x at QD 1 on zram,
            // and at QD 32 a single psync thread matched io_uring's workers on 4 KiB and beat them on 128 KiB.
            (Ok(()), Some(why)) => Ok(pick(false, format!("{why}: psync avoids io_uring's worker-thread hand-off"))),
        },
    }
}

pub(crate) fn queue_thread(
    ctx: QueueContext,
    real: RealQueue,
    producer: rtrb::Producer<Record>,
    barrier: Arc<Barrier>,
    setup_tx: std::sync::mpsc::Sender<Result<Option<uring::UringSetup>, String>>,
) -> QueueReport {
    let pinned = real.cpu.filter(|&cpu| pin_current_thread(cpu));
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
    let generator = OffsetGenerator::new(&ctx.workload, ctx.target_size, ctx.queue);
    let mut report = QueueReport { queue: ctx.queue, cpu: pinned, issued: 0, completed: 0, leaked_buffers: false };
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
