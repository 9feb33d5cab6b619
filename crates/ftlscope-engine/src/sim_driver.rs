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

use ftlscope_sim::device::{SimDevice, SimOp, SimRequest};
use ftlscope_sim::time::SimTime;

use crate::backend::{Backend, Event, Request};
use crate::buffers::IoBuffers;
use crate::engine::QueueReport;
use crate::health::{HealthReport, HealthSample};
use crate::pattern::OffsetGenerator;
use crate::queue::{QueueContext, QueueLoop, Shared};
use crate::stats::Record;
use crate::target::{TargetInfo, TargetKind};
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

/// The state the queues share on the driver thread.
struct Clockwork<'a> {
    device: &'a mut dyn SimDevice,
    now: u64,
    sequence: u64,
    completions: BinaryHeap<Pending>,
    writes: u64,
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
                (req.offset / 512) as u32 ^ (cw.writes as u32).rotate_left(16)
            } else {
                0
            };
            let sim_req = SimRequest { op: sim_op(req.op), offset: req.offset, len: req.len as u64, fingerprint };
            let done = cw.device.submit(SimTime(cw.now), &sim_req);
            on_event(Event::Submitted { slot, at_ns: cw.now });
            let result = if matches!(req.op, Op::Read | Op::Write) { req.len as i32 } else { 0 };
            cw.sequence += 1;
            cw.completions.push(Reverse((done.ns().max(cw.now), cw.sequence, self.queue, slot, result)));
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
                // Simulated requests carry no data: the buffers only give the loop somewhere to point.
                buffers: IoBuffers::new(depth, 4096, crate::workload::DataPattern::Zeros, w.seed, ctx.queue, true),
                unsubmitted: Vec::with_capacity(depth),
                wake_at: None,
            }
        })
        .collect();
    let mut clockwork =
        Clockwork { device: &mut *target.device, now: start, sequence: 0, completions: BinaryHeap::new(), writes: 0 };
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
        let next_completion = clockwork.completions.peek().map(|Reverse(c)| c.0);
        let next_wake = queues.iter().filter_map(|q| q.wake_at).min();
        let Some(next) = [next_completion, next_wake].into_iter().flatten().min() else {
            break; // nothing in flight, nobody waiting: every queue is done
        };
        clockwork.now = next.max(now);
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
        let mut report = QueueReport { queue: i as u32, cpu: None, issued: 0, completed: 0, leaked_buffers: false };
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
    sample.media_errors = Some(0);
    sample
}
