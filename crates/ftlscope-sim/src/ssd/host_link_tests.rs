//! The host link's remembered gaps (`controller.host_link_gaps`): at a deep queue a read whose die is idle
//! sends its data as soon as it is ready, in a gap between the transfers booked for reads queued behind a
//! busy die, as a real controller's DMA does; a link that remembers too few gaps books it after all of them.
//! Simulated time only.

use crate::config::DeviceConfig;
use crate::device::{SimDevice, SimOp, SimRequest};
use crate::ssd::tests::small_config;
use crate::ssd::SsdDevice;
use crate::time::{Nanos, SimTime};

const KIB: u64 = 1 << 10;

fn read(offset: u64) -> SimRequest {
    SimRequest { op: SimOp::Read, offset, len: 4 * KIB, fingerprint: 0 }
}

/// A device written sequentially, then idle: when it is ready for reads.
fn filled(cfg: DeviceConfig) -> (SsdDevice, SimTime) {
    let mut dev = SsdDevice::new(cfg);
    let mut now = SimTime::ZERO;
    for i in 0..dev.capacity_bytes() / (128 * KIB) {
        let w = SimRequest { op: SimOp::Write, offset: i * 128 * KIB, len: 128 * KIB, fingerprint: i as u32 };
        now = dev.submit(now, &w);
    }
    let flushed =
        dev.submit(now + Nanos(1_000_000_000), &SimRequest { op: SimOp::Flush, offset: 0, len: 0, fingerprint: 0 });
    (dev, flushed + Nanos(100_000_000))
}

/// 24 reads queued on one die (every 64 KiB on the small device's 8 dies of 8 KiB chunks), then one read of an
/// idle die, all at the same instant: the latencies of the queued reads and of the lone one.
fn queued_then_lone(host_link_gaps: u32) -> (Vec<u64>, u64) {
    let mut cfg = small_config();
    cfg.controller.host_link_gaps = host_link_gaps;
    let (mut dev, t) = filled(cfg);
    let queued = (0..24).map(|k| (dev.submit(t, &read(k * 64 * KIB)) - t).0).collect();
    let lone = (dev.submit(t, &read(8 * KIB)) - t).0;
    (queued, lone)
}

fn alone() -> u64 {
    let (mut dev, t) = filled(small_config());
    (dev.submit(t, &read(8 * KIB)) - t).0
}

#[test]
fn the_reads_of_one_die_queue_behind_each_other() {
    let (queued, _) = queued_then_lone(8);
    let (first, last) = (queued[0], queued[23]);
    assert!(last > first + 20 * 50_000, "24 reads of one die take at least 20 senses: {first} .. {last} ns");
}

#[test]
fn a_read_of_an_idle_die_leaves_in_an_early_gap_when_the_link_remembers_it() {
    let (queued, lone) = queued_then_lone(32);
    // As on an idle drive, but for at most one 4 KiB transfer (1.17 us at 3.5 GB/s): the first queued read's
    // data is ready at the same moment and was booked first.
    let idle = alone();
    assert!(lone <= idle + 1_200, "with 32 gaps the lone read completes as on an idle drive: {lone} against {idle} ns");
    assert!(lone < queued[2], "it overtakes the reads queued behind the busy die: {lone} ns against {queued:?}");
}

#[test]
fn with_eight_gaps_the_lone_read_waits_after_the_queue_as_before() {
    let (queued8, lone8) = queued_then_lone(8);
    let (queued32, _) = queued_then_lone(32);
    assert_eq!(queued8, queued32, "the queued reads book the link in order either way");
    assert!(lone8 > queued8[23 - 8], "the early gaps were forgotten: {lone8} ns against {queued8:?}");
    assert!(lone8 > 10 * alone(), "{lone8} ns against {} alone", alone());
}
