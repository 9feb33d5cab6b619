//! The engine's measurement loop never allocates (seed 000 §4.3.1: an allocation can mean a syscall and a
//! page fault in the middle of a timed request). A counting global allocator watches every allocation made
//! while a queue thread is inside the loop, across workloads that exercise every code path of the loop.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use ftlscope_engine::engine::{with_hot_loop_flag, EngineChoice, RunOptions};
use ftlscope_engine::{in_hot_loop, run, Target, Workload};

struct CountingAllocator;

static HOT_LOOP_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; the counter is a lock-free atomic and `in_hot_loop` reads a
// const-initialised thread-local without allocating.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if in_hot_loop() {
            HOT_LOOP_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if in_hot_loop() {
            HOT_LOOP_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if in_hot_loop() {
            HOT_LOOP_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if in_hot_loop() {
            HOT_LOOP_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn scratch_file(len: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    // /var/tmp rather than /tmp: O_DIRECT needs a file system that supports it.
    let dir = tempfile::Builder::new().prefix("ftlscope-noalloc").tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("target.img");
    std::fs::write(&path, vec![0x5au8; len]).unwrap();
    (dir, path)
}

fn run_counting(path: &std::path::Path, workload_json: &str, engine: EngineChoice) -> u64 {
    let workload = Workload::from_json(workload_json).unwrap();
    let target = Target::open(path, workload.mix.writes(), true).unwrap();
    let options = RunOptions { engine, trace_limit: Some(1 << 20), health_interval_ns: 0, ..RunOptions::default() };
    let before = HOT_LOOP_ALLOCATIONS.load(Ordering::Relaxed);
    let result = run(target, workload, options).unwrap();
    let total: u64 = result.stats.per_op.values().map(|s| s.ops).sum();
    assert!(total > 0, "the workload ran");
    HOT_LOOP_ALLOCATIONS.load(Ordering::Relaxed) - before
}

#[test]
fn the_counter_sees_allocations_made_inside_the_loop() {
    let before = HOT_LOOP_ALLOCATIONS.load(Ordering::Relaxed);
    let v = with_hot_loop_flag(|| vec![1u8; 64]);
    assert_eq!(v.len(), 64);
    assert!(HOT_LOOP_ALLOCATIONS.load(Ordering::Relaxed) > before);
}

#[test]
fn the_measurement_loop_does_not_allocate() {
    let (_dir, path) = scratch_file(8 << 20);
    let workloads = [
        r#"{"mix":{"read":100},"pattern":{"kind":"random"},"queue_depth":32,"stop":{"ops":20000}}"#,
        r#"{"mix":{"read":60,"write":30,"trim":5,"write_zeroes":3,"flush":2},"sizes":[4096,8192,16384],
            "pattern":{"kind":"zipf","theta":1.1},"queue_depth":16,"queues":2,"data":"lba_stamped",
            "stop":{"ops":10000},"warmup":{"ops":500}}"#,
        r#"{"mix":{"write":100},"pattern":{"kind":"permuted_windows","window":4},"queue_depth":8,
            "data":"random","stop":{"bytes":4194304}}"#,
        r#"{"mix":{"read":100},"pattern":{"kind":"strided","stride":65536},"batch":{"size":8,"idle_ns":100000},
            "stop":{"ops":2000}}"#,
        r#"{"mix":{"read":100},"pattern":{"kind":"hot_set","hot_start":0,"hot_length":1048576,"hot_share":0.9},
            "queue_depth":4,"stop":{"time_ns":200000000}}"#,
        r#"{"mix":{"read":50,"write":50},"pattern":{"kind":"random"},"queue_depth":4,"stop":{"ops":1000},
            "rate":{"iops":{"read":20000},"bytes_per_s":{"write":40960000}}}"#,
    ];
    for (i, w) in workloads.iter().enumerate() {
        for engine in [EngineChoice::Uring, EngineChoice::Psync, EngineChoice::PsyncPool] {
            if engine == EngineChoice::Uring && ftlscope_engine::backend::uring::available().is_err() {
                eprintln!("skipping io_uring: not available on this machine");
                continue;
            }
            let allocations = run_counting(&path, w, engine);
            assert_eq!(allocations, 0, "workload {i} on {engine:?} allocated {allocations} times in the hot loop");
        }
    }
}

#[test]
fn a_replay_does_not_allocate_in_the_loop_either() {
    use ftlscope_engine::engine::Run;
    use ftlscope_engine::replay::{Mode, Replay, Timing};
    use std::sync::Arc;

    let (_dir, path) = scratch_file(8 << 20);
    let n = 4000u64;
    let arrivals: Vec<u64> = (0..n).map(|i| i * 20_000).collect();
    let ops: Vec<u8> = (0..n).map(|i| [0u8, 1, 1, 4][(i % 4) as usize]).collect();
    let offsets: Vec<u64> = (0..n).map(|i| i * 4096 % (8 << 20)).collect();
    let lens: Vec<u32> = ops.iter().map(|&o| if o == 4 { 0 } else { 4096 }).collect();
    // The write shim (holding writes, letting them go, its held-bytes series) allocates nothing in the loop either:
    // at 5 MB/s against 400 MB/s of writes and a buffer one write fills, it holds the second write of each pair
    // until the flush after it lets it go (a flush empties the drive's buffer, so the first goes at once).
    let shim = ftlscope_engine::write_shim::WriteShimSettings {
        flush_speed_bps: 5e6,
        period_ns: 10_000_000,
        max_held_bytes: 256 << 20,
        // One write fills it: the writes between flushes are held.
        buffer_bytes: 4096,
        target_fill: 0.5,
        write_through: false,
        bound_mean_delay: false,
        hold_in_read_storms: false,
    };
    for (timing, mode, write_shim) in [
        (Timing::Scaled(4.0), Mode::Open, None),
        (Timing::Afap, Mode::Closed, None),
        (Timing::Scaled(4.0), Mode::Open, Some(shim)),
        (Timing::Afap, Mode::Closed, Some(shim)),
    ] {
        for engine in [EngineChoice::Uring, EngineChoice::Psync, EngineChoice::PsyncPool] {
            if engine == EngineChoice::Uring && ftlscope_engine::backend::uring::available().is_err() {
                continue;
            }
            let replay = Arc::new(Replay::new(&arrivals, &ops, &offsets, &lens, timing, mode).unwrap());
            let workload = Workload::from_json(
                r#"{"mix":{"read":1,"write":1,"flush":1},"queue_depth":8,"stop":{"ops":4000},"data":"lba_stamped"}"#,
            )
            .unwrap();
            let target = Target::open(&path, true, true).unwrap();
            let options = RunOptions {
                engine,
                trace_limit: Some(1 << 20),
                health_interval_ns: 0,
                write_shim,
                ..RunOptions::default()
            };
            let before = HOT_LOOP_ALLOCATIONS.load(Ordering::Relaxed);
            let result = Run::start_replay(target, workload, options, Some(replay)).unwrap().join();
            if write_shim.is_some() {
                let report = result.write_shim.as_ref().expect("the shim's report");
                assert_eq!(report.writes, n / 2);
                assert!(report.flush_releases > 0, "{report:?}");
            }
            let total: u64 = result.stats.per_op.values().map(|s| s.ops).sum();
            assert_eq!(total, n, "{timing:?} {mode:?} on {engine:?}");
            assert_eq!(result.stats.trace.as_ref().unwrap().issue_lag_ns.len(), n as usize);
            let allocations = HOT_LOOP_ALLOCATIONS.load(Ordering::Relaxed) - before;
            assert_eq!(allocations, 0, "{timing:?} {mode:?} on {engine:?} allocated {allocations} times");
        }
    }
}
