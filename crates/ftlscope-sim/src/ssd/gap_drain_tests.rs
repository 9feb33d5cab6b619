//! Tests of `write_buffer.drain_in_gap` (issues 15, 19): the hard idle drain programs during the idle gap, as a
//! drive draining while idle. The gap's share of the buffer leaves it exactly as without the key (the buffer's
//! room, P8 and P10, are unchanged); a command after the gap waits only for the programs still running at its
//! arrival, not for the gap's share booked at once from the gap's start.

use super::soft_flush_tests::{after_gap as after, device_with, ms, req, slowest_read, write_qd1};
use super::tests::small_config;
use super::*;
use crate::time::Nanos;

const KIB: u64 = 1 << 10;

/// 64 KiB chunks over 8 units, a 512 KiB buffer drained in `window`, the hard drain with or without the key.
fn device(in_gap: bool, window: Nanos) -> SsdDevice {
    device_with(window, |cfg| cfg.write_buffer.drain_in_gap = in_gap)
}

/// A chunk on every unit, flushed, a full buffer of other writes and a 2 ms idle gap (25 of the 128 pages).
fn after_gap(in_gap: bool) -> (SsdDevice, SimTime) {
    after(|cfg| cfg.write_buffer.drain_in_gap = in_gap)
}

#[test]
fn a_read_after_an_idle_gap_waits_only_for_the_program_running_at_its_arrival() {
    let (mut booked, t) = after_gap(false);
    let behind_lump = slowest_read(&mut booked, t);
    let (mut in_gap, t) = after_gap(true);
    let behind_one = slowest_read(&mut in_gap, t);
    // Booked at once from the gap's start, a unit's 16 programs (0.3 / 1.5 ms each) run past the arrival.
    assert!(behind_lump > 5_000_000, "{behind_lump}");
    // In the gap: at most the program under way at the arrival (1.5 ms) plus the read itself.
    assert!(behind_one < 1_500_000 + 200_000, "{behind_one}");
    // The drained pages the units could not program during the gap wait, in RAM, for their unit's later idle
    // time; they no longer take buffer room.
    let soft = in_gap.soft.as_ref().expect("pending programs kept");
    assert!(!soft.counted && soft.count > 0, "{}", soft.count);
    assert_eq!(in_gap.level1.as_ref().map(|l| l.draining), Some(0));
}

#[test]
fn the_gap_releases_its_pages_one_after_another_over_the_window() {
    let (mut dev, t) = after_gap(true);
    let gap_start = dev.busy_until;
    dev.catch_up_idle(t);
    let soft = dev.soft.as_ref().expect("pending programs kept");
    let mut released: Vec<SimTime> = soft.pending.iter().flatten().map(|&(_, at, _)| at).collect();
    released.sort();
    // 25 of 128 pages in a 2 ms gap of a 10 ms window: the n-th page at 10 ms * n / 128 after the gap began.
    assert_eq!(released.len(), 25);
    for (n, at) in released.iter().enumerate() {
        assert_eq!(*at, gap_start + Nanos(10_000_000 * n as u64 / 128));
    }
}

#[test]
fn the_buffer_keeps_the_room_and_the_flush_spikes_of_the_booked_drain() {
    // P8 and P10: idle gaps shorter and longer than the window between bursts of writes leave the same pages
    // in the buffer, and the writes that wait for a full buffer's flush are the same ones.
    let run = |in_gap: bool| {
        let mut dev = device(in_gap, ms(10));
        let mut now = SimTime::ZERO;
        let (mut held, mut spikes) = (Vec::new(), Vec::new());
        for (burst, gap) in [1u64, 3, 7, 12, 2, 30].into_iter().enumerate() {
            let (lat, t) = write_qd1(&mut dev, now, (burst as u64) << 21, 384 * KIB, 32 * KIB);
            spikes.extend(lat.iter().enumerate().filter(|(_, &l)| l > 1_000_000).map(|(i, _)| (burst, i)));
            now = t + ms(gap);
            dev.catch_up_idle(now);
            held.push(dev.level1.as_ref().map_or(0, |l| l.fifo.len() + l.draining as usize));
        }
        (held, spikes)
    };
    let (booked, in_gap) = (run(false), run(true));
    assert_eq!(booked, in_gap);
    assert!(!booked.1.is_empty(), "the bursts overflow the buffer: {booked:?}");
}

#[test]
fn a_host_flush_programs_the_pages_the_gap_left_pending() {
    let (mut dev, t) = after_gap(true);
    dev.catch_up_idle(t);
    let pending = dev.soft.as_ref().map_or(0, |s| s.count);
    assert!(pending > 0, "{pending}");
    let done = dev.submit(t, &req(SimOp::Flush, 0, 0));
    assert_eq!(dev.soft.as_ref().map(|s| s.count), Some(0));
    assert!(dev.level1.as_ref().is_some_and(|l| l.fifo.is_empty()));
    // The whole buffer is programmed by then: at least 8 programs on a unit.
    assert!(done - t > ms(8), "{:?}", done - t);
}

#[test]
fn drain_in_gap_is_off_by_default_and_ignored_with_a_second_level_or_a_soft_flush() {
    assert!(!small_config().write_buffer.drain_in_gap);
    assert!(device(false, ms(10)).soft.is_none());
    let mut cfg = small_config();
    cfg.write_buffer.drain_in_gap = true;
    cfg.write_buffer.second_level = 4 << 20;
    assert!(SsdDevice::new(cfg).soft.is_none());
    let mut cfg = small_config();
    cfg.write_buffer.drain_in_gap = true;
    cfg.write_buffer.soft_flush = true;
    assert!(SsdDevice::new(cfg).soft.as_ref().is_some_and(|s| s.counted));
}
