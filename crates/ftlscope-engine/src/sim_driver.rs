//! Simulated targets: every queue's loop stepped on one thread against the simulator's virtual clock.
//!
//! The queues are the same [`QueueLoop`]s that drive real devices; only the clock and the backend differ.
//! The driver lets each queue issue what it may at the current virtual instant, submits those requests to
//! the device (which answers with their completion times), then jumps to the next completion or the end
//! of a queue's idle gap. Nothing waits in real time, so a whole-drive experiment takes seconds, and the
//! result is the same on every run for the same seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use ftlscope_sim::device::{SimDevice, SimOp, SimRequest, Status};
use ftlscope_sim::time::SimTime;

use crate::backend::{Backend, Event, Request};
use crate::buffers::IoBuffers;
use crate::engine::{QueueReport, StopReason};
use crate::health::{HealthReport, HealthSample};
use crate::pattern::OffsetGenerator;
use crate::queue::{QueueContext, QueueLoop, Shared};
use crate::stats::Record;
use crate::target::{TargetInfo, TargetKind};
use crate::verify::{ReadAt, Stamp, SECTOR};
use crate::workload::Op;

/// A simulated device and where its virtual clock stands. Runs on it continue from `now`, so
/// preconditioning, idle periods and measurements follow each other as on a real drive.
pub struct SimTarget {
    pub name: String,
    pub device: Box<dyn SimDevice>,
    pub now: SimTime,
}

impl SimTarget {
    pub fn new(name: impl Into<String>, device: Box<dyn SimDevice>) -> SimTarget {
        SimTarget { name: name.into(), device, now: SimTime::ZERO }
    }

    pub fn info(&self) -> TargetInfo {
        TargetInfo {
            path: PathBuf::from(format!("sim:{}", self.name)),
            kind: TargetKind::Simulated,
            size_bytes: self.device.capacity_bytes(),
            logical_block_size: self.device.logical_block(),
            physical_block_size: self.device.content_granularity(),
            direct: true,
            writable: true,
        }
    }

    /// Let `ns` of virtual time pass with nothing submitted (background work happens).
    pub fn idle(&mut self, ns: u64) {
        self.now = SimTime(self.now.0 + ns);
    }

    /// The model's counters as a health sample (what a SMART log would say).
    pub fn health_sample(&self) -> HealthSample {
        counters_sample(&*self.device, self.now.ns())
    }
}

fn sim_op(op: Op) -> SimOp {
    match op {
        Op::Read => SimOp::Read,
        Op::Write => SimOp::Write,
        Op::Trim => SimOp::Trim,
        Op::WriteZeroes => SimOp::WriteZeroes,
        Op::Flush => SimOp::Flush,
    }
}

/// A completion waiting in virtual time: (time, sequence) orders it; the sequence keeps ties deterministic.
type Pending = Reverse<(u64, u64, u32, u32, i32)>;

/// A command the device will never complete (`[faults]`): the run's `--io-timeout` catches it.
struct Lost {
    submitted_ns: u64,
    op: Op,
    offset: u64,
}

/// The state the queues share on the driver thread.
struct Clockwork<'a> {
    device: &'a mut dyn SimDevice,
    now: u64,
    sequence: u64,
    completions: BinaryHeap<Pending>,
    writes: u64,
    /// Commands that will never complete, oldest first.
    lost: Vec<Lost>,
    /// The device reorders queued commands (a disk's NCQ): commands are queued, and started by
    /// [`Clockwork::dispatch`] whenever the device is free.
    queueing: bool,
    /// A verify run: each write's fingerprint is its generation, marked (see [`SimSource`]).
    verify: bool,
}

/// A queued command's tag: its queue, slot and the result it completes with.
fn tag(queue: u32, slot: u32, result: i32) -> u64 {
    ((queue as u64) << 52) | ((slot as u64) << 32) | result as u32 as u64
}

fn untag(tag: u64) -> (u32, u32, i32) {
    ((tag >> 52) as u32, ((tag >> 32) & 0xf_ffff) as u32, tag as u32 as i32)
}

impl Clockwork<'_> {
    /// Start what a queueing device can start now.
    fn dispatch(&mut self) {
        while let Some((tag, done)) = self.device.dispatch(SimTime(self.now)) {
            let (queue, slot, result) = untag(tag);
            self.sequence += 1;
            self.completions.push(Reverse((done.ns().max(self.now), self.sequence, queue, slot, result)));
        }
    }
}

/// One queue's view of the simulator, as a [`Backend`].
struct SimPort<'a, 'b> {
    clockwork: &'a mut Clockwork<'b>,
    queue: u32,
    unsubmitted: &'a mut Vec<(u32, Request)>,
}

impl Backend for SimPort<'_, '_> {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn push(&mut self, slot: u32, request: Request) {
        self.unsubmitted.push((slot, request));
    }

    fn coming(&mut self, op: Op, offset: u64, len: u32) {
        let request = SimRequest { op: sim_op(op), offset, len: len as u64, fingerprint: 0 };
        self.clockwork.device.prepare(&request);
    }

    /// Submits at the current virtual instant; completions are delivered by the driver when their time
    /// comes, so this never waits.
    fn submit_and_wait<F: FnMut(Event)>(&mut self, _min: u32, _timeout: u64, mut on_event: F) -> io::Result<()> {
        let cw = &mut *self.clockwork;
        for (slot, req) in self.unsubmitted.drain(..) {
            let fingerprint = if req.op == Op::Write {
                cw.writes += 1;
                if cw.verify {
                    // SAFETY: a write's buffer holds `len` >= 512 stamped bytes inside the queue's region.
                    let sector = unsafe { std::slice::from_raw_parts(req.addr, SECTOR) };
                    verify_fingerprint(sector)
                } else {
                    ((req.offset / 512) as u32 ^ (cw.writes as u32).rotate_left(16)) & !VERIFY_MARK
                }
            } else {
                0
            };
            let sim_req = SimRequest { op: sim_op(req.op), offset: req.offset, len: req.len as u64, fingerprint };
            if cw.queueing {
                let result = if matches!(req.op, Op::Read | Op::Write) { req.len as i32 } else { 0 };
                cw.device.enqueue(SimTime(cw.now), &sim_req, tag(self.queue, slot, result));
                on_event(Event::Submitted { slot, at_ns: cw.now });
                continue;
            }
            let done = cw.device.submit_checked(SimTime(cw.now), &sim_req);
            on_event(Event::Submitted { slot, at_ns: cw.now });
            let result = match done.status {
                Status::Lost => {
                    cw.lost.push(Lost { submitted_ns: cw.now, op: req.op, offset: req.offset });
                    continue;
                }
                // An unrecovered read error completes with -EIO, as the kernel reports it.
                Status::MediaError => -libc::EIO,
                Status::Ok if matches!(req.op, Op::Read | Op::Write) => req.len as i32,
                Status::Ok => 0,
            };
            cw.sequence += 1;
            cw.completions.push(Reverse((done.at.ns().max(cw.now), cw.sequence, self.queue, slot, result)));
        }
        Ok(())
    }

    fn now(&self) -> u64 {
        self.clockwork.now
    }

    fn idle(&mut self, _ns: u64) {
        // The driver schedules idle gaps itself (QueueLoop::fill hands them back); a queue never sleeps here.
        debug_assert!(false, "SimPort::idle is not used: the driver schedules idle gaps");
    }

    fn cancel_all(&mut self) -> bool {
        true
    }
}

struct SimQueue<'a> {
    lp: QueueLoop<'a>,
    buffers: IoBuffers,
    unsubmitted: Vec<(u32, Request)>,
    wake_at: Option<u64>,
}

/// Simulated requests carry no data: the buffers only give the loop somewhere to point, except in a verify
/// run, whose writes are stamped so the device can keep each write's generation (see [`SimSource`]).
fn sim_buffers(ctx: &QueueContext, depth: usize) -> IoBuffers {
    let w = &ctx.workload;
    if ctx.shared.write_record.is_none() {
        return IoBuffers::new(depth, 4096, crate::workload::DataPattern::Zeros, w.seed, ctx.queue, true);
    }
    let mut buffers =
        IoBuffers::new(depth, w.max_size() as usize, crate::workload::DataPattern::Verify, w.seed, ctx.queue, true);
    buffers.verify_tag = w.verify_tag;
    buffers
}

/// What the driver hands back when the run is over.
pub(crate) struct SimOutcome {
    pub reports: Vec<QueueReport>,
    pub health: HealthReport,
    pub virtual_ns: u64,
}

/// Run every queue of the workload to the end on `target`'s virtual clock.
pub(crate) fn drive(
    target: &mut SimTarget,
    contexts: &[QueueContext],
    producers: Vec<rtrb::Producer<Record>>,
    shared: &Shared,
    health_interval_ns: u64,
) -> SimOutcome {
    let start = target.now.ns();
    let mut samples = vec![target.health_sample()];
    let mut queues: Vec<SimQueue> = contexts
        .iter()
        .zip(producers)
        .map(|(ctx, producer)| {
            let w = &ctx.workload;
            let depth = w.inflight_per_queue() as usize;
            SimQueue {
                lp: QueueLoop::new(ctx, OffsetGenerator::new(w, ctx.target_size, ctx.queue), producer),
                buffers: sim_buffers(ctx, depth),
                unsubmitted: Vec::with_capacity(depth),
                wake_at: None,
            }
        })
        .collect();
    let queueing = target.device.queue_depth() > 1;
    debug_assert!(queues.len() < 1 << 12 && contexts.iter().all(|c| c.workload.inflight_per_queue() < 1 << 20));
    let mut clockwork = Clockwork {
        queueing,
        device: &mut *target.device,
        now: start,
        sequence: 0,
        completions: BinaryHeap::new(),
        writes: 0,
        lost: Vec::new(),
        verify: shared.write_record.is_some(),
    };
    // A command outstanding longer than this ends the run, as on a real device.
    let io_timeout_ns = contexts.iter().map(|c| c.io_timeout_ns).min().unwrap_or(u64::MAX);
    for q in &mut queues {
        q.lp.begin(start);
    }
    let mut next_health = start.saturating_add(health_interval_ns.max(1));
    loop {
        let now = clockwork.now;
        for (i, q) in queues.iter_mut().enumerate() {
            if q.wake_at.is_some_and(|w| w > now) {
                continue;
            }
            q.wake_at = None;
            let mut port = SimPort { clockwork: &mut clockwork, queue: i as u32, unsubmitted: &mut q.unsubmitted };
            let idle = q.lp.fill(&mut port, &mut q.buffers);
            let lp = &mut q.lp;
            port.submit_and_wait(0, 0, |event| lp.on_event(event)).expect("the simulator cannot fail");
            if let Some(idle_ns) = idle {
                q.wake_at = Some(now + idle_ns);
            }
        }
        if clockwork.queueing {
            clockwork.dispatch();
        }
        let next_completion = clockwork.completions.peek().map(|Reverse(c)| c.0);
        let next_wake = queues.iter().filter_map(|q| q.wake_at).min();
        // The virtual clock runs on to the time-out of a command that will never complete.
        let next_timeout =
            clockwork.lost.first().map(|l| l.submitted_ns.saturating_add(io_timeout_ns).saturating_add(1));
        let next_dispatch = clockwork.device.next_dispatch().map(SimTime::ns);
        let Some(next) = [next_completion, next_wake, next_timeout, next_dispatch].into_iter().flatten().min() else {
            break; // nothing in flight, nobody waiting: every queue is done
        };
        clockwork.now = next.max(now);
        if let Some(oldest) = clockwork.lost.first() {
            let age = clockwork.now - oldest.submitted_ns;
            if age > io_timeout_ns {
                shared.stop_with(StopReason::Timeout {
                    op: oldest.op.name().to_string(),
                    offset: oldest.offset,
                    outstanding_ns: age,
                });
                // The queues issue nothing more; what is lost stays lost (as a real run abandons it).
                clockwork.lost.clear();
            }
        }
        while clockwork.completions.peek().is_some_and(|Reverse(c)| c.0 <= clockwork.now) {
            let Reverse((at_ns, _, queue, slot, result)) = clockwork.completions.pop().expect("peeked");
            queues[queue as usize].lp.on_event(Event::Completed { slot, result, at_ns });
        }
        shared.device_now.store(clockwork.now - start, Ordering::Relaxed);
        if health_interval_ns > 0 && clockwork.now >= next_health {
            samples.push(counters_sample(clockwork.device, clockwork.now));
            next_health = clockwork.now + health_interval_ns;
        }
    }
    let end = clockwork.now;
    let mut reports = Vec::new();
    for (i, q) in queues.iter_mut().enumerate() {
        let mut report = QueueReport {
            queue: i as u32,
            cpu: None,
            issued: 0,
            completed: 0,
            leaked_buffers: false,
            write_shim: None,
        };
        q.lp.finish(&mut report, false);
        reports.push(report);
    }
    drop(queues);
    target.now = SimTime(end);
    samples.push(target.health_sample());
    SimOutcome {
        reports,
        health: HealthReport { source: "sim".into(), available: true, reason: None, samples, errors: Vec::new() },
        virtual_ns: end - start,
    }
}

fn counters_sample(device: &dyn SimDevice, now: u64) -> HealthSample {
    let c = device.counters(SimTime(now));
    let mut sample = HealthSample::new(now, "sim");
    sample.host_bytes_read = Some(c.host_bytes_read as u128);
    sample.host_bytes_written = Some(c.host_bytes_written as u128);
    sample.media_bytes_written = Some(c.media_bytes_written as u128);
    sample.media_bytes_read = Some(c.media_bytes_read as u128);
    sample.power_on_hours = Some((c.power_on_ns / 3_600_000_000_000) as u128);
    sample.media_errors = Some(c.media_errors as u128);
    sample.temperature_c = c.temperature_c;
    if c.temperature_c.is_some() {
        sample.thermal_throttle_s = Some(c.throttle_ns as f64 / 1e9);
    }
    sample
}

/// The top bit of a simulated page's fingerprint marks a verify run's write; the other 31 bits are its
/// generation. Other writes' fingerprints keep the bit clear, so they never pass for a verify stamp.
const VERIFY_MARK: u32 = 1 << 31;

/// The fingerprint a verify write leaves: its generation (from the stamp in its first sector), marked.
fn verify_fingerprint(first_sector: &[u8]) -> u32 {
    let generation = u64::from_le_bytes(first_sector[24..32].try_into().expect("8 bytes"));
    VERIFY_MARK | (generation.min((VERIFY_MARK - 1) as u64) as u32)
}

/// The read-back pass of a verify run on a simulated device. The model keeps no bytes, only each page's
/// last write fingerprint, which a verify run sets to the write's generation: a read goes through the
/// simulated drive (so `[faults]` fail it with the offset, as on a real drive) and its bytes are the stamps
/// that generation wrote, rebuilt sector by sector. The model never loses or tears a write (the contract:
/// faults never corrupt stored data), so what this pass checks is the FTL's bookkeeping through buffering
/// and garbage collection, and the read errors `[faults]` inject. Pages of one write are rebuilt as
/// page-sized writes: a tear inside a page cannot be represented, and a sector rewritten by a smaller write
/// shows its page's newest generation.
pub struct SimSource<'a> {
    target: std::cell::RefCell<&'a mut SimTarget>,
    tag: u64,
}

impl<'a> SimSource<'a> {
    /// Read back the writes of the verify run tagged `tag` (its stamps carry that tag).
    pub fn new(target: &'a mut SimTarget, tag: u64) -> SimSource<'a> {
        SimSource { target: std::cell::RefCell::new(target), tag }
    }
}

impl ReadAt for SimSource<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut guard = self.target.borrow_mut();
        let target = &mut **guard;
        let now = target.now;
        let request = SimRequest { op: SimOp::Read, offset, len: buf.len() as u64, fingerprint: 0 };
        let done = target.device.submit_checked(now, &request);
        match done.status {
            Status::Lost => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the simulated device did not answer (a lost command or a hung controller)",
                ))
            }
            Status::MediaError => return Err(io::Error::from_raw_os_error(libc::EIO)),
            Status::Ok => {}
        }
        target.now = done.at.max(now);
        let page = target.device.content_granularity().max(SECTOR as u64);
        for (i, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
            let at = offset + (i * SECTOR) as u64;
            match target.device.content(at / page) {
                ftlscope_sim::device::PageContent::Data(fp) if fp & VERIFY_MARK != 0 => {
                    let stamp = Stamp {
                        lba: at / SECTOR as u64,
                        tag: self.tag,
                        generation: (fp & !VERIFY_MARK) as u64,
                        index: ((at % page) / SECTOR as u64) as u32,
                        sectors: (page / SECTOR as u64) as u32,
                    };
                    stamp.write_to(sector);
                }
                // Another program's data: bytes that are no stamp.
                ftlscope_sim::device::PageContent::Data(_) => sector.fill(0xa5),
                _ => sector.fill(0),
            }
        }
        Ok(())
    }

    fn block(&self) -> u64 {
        self.target.borrow().device.content_granularity().max(SECTOR as u64)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use ftlscope_sim::device::build;
    use ftlscope_sim::parse::parse_device;

    use super::*;
    use crate::engine::{run_sim, RunOptions};
    use crate::workload::Workload;

    const DEVICE: &str = "[device]\ncapacity = \"64MiB\"\n[geometry]\nchannels = 4\nchips_per_channel = 2\n";

    fn target(extra: &str) -> Arc<Mutex<SimTarget>> {
        let cfg = parse_device(&format!("{DEVICE}{extra}")).unwrap();
        Arc::new(Mutex::new(SimTarget::new("faulty", build(cfg))))
    }

    fn run(target: &Arc<Mutex<SimTarget>>, workload: &str, io_timeout_ns: u64) -> crate::engine::RunResult {
        let workload = Workload::from_json(workload).unwrap();
        let options = RunOptions { io_timeout_ns, health_interval_ns: 100_000_000, ..RunOptions::default() };
        run_sim(Arc::clone(target), workload, options).unwrap()
    }

    const FILL: &str = r#"{"mix":{"write":100},"pattern":{"kind":"sequential"},"sizes":[131072],"queue_depth":4,"stop":{"bytes":67108864}}"#;
    const READS: &str = r#"{"mix":{"read":100},"pattern":{"kind":"random"},"queue_depth":8,"stop":{"ops":20000}}"#;

    #[test]
    fn a_read_of_a_bad_range_stops_the_run_with_its_offset() {
        let t = target("[faults]\nbad_ranges = [{ start = \"32MiB\", length = \"1MiB\" }]\n");
        run(&t, FILL, 1_000_000_000);
        let result = run(&t, READS, 1_000_000_000);
        match result.stop_reason {
            StopReason::IoError { offset, errno, .. } => {
                assert!((32 << 20..33 << 20).contains(&offset), "offset {offset}");
                assert_eq!(errno, libc::EIO);
            }
            other => panic!("{other:?}"),
        }
        let health = result.health.samples.last().unwrap();
        assert!(health.media_errors.unwrap() >= 1);
    }

    #[test]
    fn a_lost_command_is_caught_by_the_io_timeout_on_the_virtual_clock() {
        let t = target("[faults]\nlost_command_rate = 0.001\n");
        run(&t, FILL, 1_000_000_000);
        let before = t.lock().unwrap().now;
        let result = run(&t, READS, 2_000_000_000);
        match result.stop_reason {
            StopReason::Timeout { outstanding_ns, .. } => assert!(outstanding_ns > 2_000_000_000),
            other => panic!("{other:?}"),
        }
        let ops: u64 = result.stats.per_op.values().map(|s| s.ops).sum();
        assert!(ops > 100, "what completed before the time-out is kept: {ops}");
        // The clock ran on to the time-out, not further.
        let elapsed = (t.lock().unwrap().now - before).0;
        assert!((2_000_000_000..2_500_000_000).contains(&elapsed), "{elapsed}");
    }

    #[test]
    fn a_device_that_stops_responding_ends_the_run_and_keeps_what_was_measured() {
        let t = target("[faults]\nstop_responding_after = \"2s\"\n");
        let result = run(&t, FILL, 1_000_000_000);
        assert!(matches!(result.stop_reason, StopReason::Completed), "{:?}", result.stop_reason);
        let result = run(
            &t,
            r#"{"mix":{"read":100},"pattern":{"kind":"random"},"queue_depth":4,"stop":{"time_ns":5000000000}}"#,
            1_000_000_000,
        );
        assert!(matches!(result.stop_reason, StopReason::Timeout { .. }), "{:?}", result.stop_reason);
        let ops: u64 = result.stats.per_op.values().map(|s| s.ops).sum();
        assert!(ops > 1000, "{ops}");
    }

    #[test]
    fn temperature_shows_in_the_health_samples() {
        let t = target("[thermal]\nheat_per_gb = \"50C\"\nthrottle_above = \"37C\"\n");
        let result = run(&t, FILL, 1_000_000_000);
        let temps: Vec<f64> = result.health.samples.iter().map(|s| s.temperature_c.unwrap()).collect();
        assert_eq!(temps[0], 35.0);
        assert!(*temps.last().unwrap() > 37.0, "{temps:?}");
        assert!(result.health.samples.last().unwrap().thermal_throttle_s.unwrap() > 0.0);
    }

    #[test]
    fn a_disk_with_command_queueing_reorders_what_the_engine_keeps_queued() {
        let iops = |qd: u32| {
            let cfg = ftlscope_sim::presets::load("hdd-7200-consumer").unwrap();
            let t = Arc::new(Mutex::new(SimTarget::new("hdd", build(cfg))));
            let w = format!(
                r#"{{"mix":{{"read":100}},"pattern":{{"kind":"random"}},"queue_depth":{qd},"stop":{{"ops":3000}}}}"#
            );
            let result = run(&t, &w, 30_000_000_000);
            let ops: u64 = result.stats.per_op.values().map(|s| s.ops).sum();
            ops as f64 / (result.virtual_ns.unwrap() as f64 / 1e9)
        };
        let (qd1, qd32) = (iops(1), iops(32));
        assert!((70.0..90.0).contains(&qd1), "QD 1: {qd1:.0} IOPS");
        assert!((1.7..2.6).contains(&(qd32 / qd1)), "QD 32: {qd32:.0} IOPS, QD 1: {qd1:.0}");
    }
}
