//! Tests of `write_buffer.soft_flush` (the soft, background flush of "Fantastic SSD Internals and How to Learn
//! and Use Them", P10 and §5.2): the idle drain moves the same pages as before, but a read arriving during it
//! waits for at most the one program in progress on its unit, not for the unit's whole chunk.

use super::tests::small_config;
use super::*;
use crate::time::Nanos;

const KIB: u64 = 1 << 10;

pub(super) fn req(op: SimOp, offset: u64, len: u64) -> SimRequest {
    SimRequest { op, offset, len, fingerprint: (offset / 4096) as u32 ^ 0x5f }
}

pub(super) fn ms(n: u64) -> Nanos {
    Nanos(n * 1_000_000)
}

/// 64 KiB chunks (16 pages per unit, as on the Kelpie drives) over 8 units, a 512 KiB buffer drained in
/// `window`; `drain` sets the idle drain's keys (`soft_flush`, `drain_in_gap`: gap_drain_tests.rs shares these).
pub(super) fn device_with(window: Nanos, drain: impl FnOnce(&mut DeviceConfig)) -> SsdDevice {
    let mut cfg = small_config();
    cfg.mapping.chunk_size = 64 * KIB;
    cfg.write_buffer.idle_flush_window = Some(window);
    drain(&mut cfg);
    SsdDevice::new(cfg)
}

fn device(soft: bool, window: Nanos) -> SsdDevice {
    device_with(window, |cfg| cfg.write_buffer.soft_flush = soft)
}

/// QD 1 writes of `len` bytes over `[offset, offset + bytes)` from `at`; their latencies and the last completion.
pub(super) fn write_qd1(dev: &mut SsdDevice, at: SimTime, offset: u64, bytes: u64, len: u64) -> (Vec<u64>, SimTime) {
    let mut now = at;
    let mut lat = Vec::new();
    for i in 0..bytes / len {
        let done = dev.submit(now, &req(SimOp::Write, offset + i * len, len));
        lat.push((done - now).0);
        now = done;
    }
    (lat, now)
}

/// One chunk's worth of data on every unit, flushed; then a full buffer of other writes and a 2 ms idle gap
/// (a fifth of the 10 ms window: 25 of the 128 pages, two units' chunks). Returns the device and the gap's end.
pub(super) fn after_gap(drain: impl FnOnce(&mut DeviceConfig)) -> (SsdDevice, SimTime) {
    let mut dev = device_with(ms(10), drain);
    let (_, t) = write_qd1(&mut dev, SimTime::ZERO, 0, 512 * KIB, 64 * KIB);
    let t = dev.submit(t, &req(SimOp::Flush, 0, 0)) + ms(100);
    let (_, t) = write_qd1(&mut dev, t, 1 << 20, 512 * KIB, 64 * KIB);
    (dev, t + ms(2))
}

fn draining(soft: bool) -> (SsdDevice, SimTime) {
    after_gap(|cfg| cfg.write_buffer.soft_flush = soft)
}

/// The slowest of eight reads submitted together, one on each unit.
pub(super) fn slowest_read(dev: &mut SsdDevice, at: SimTime) -> u64 {
    (0..8).map(|i| (dev.submit(at, &req(SimOp::Read, i * 64 * KIB, 4 * KIB)) - at).0).max().unwrap_or(0)
}

#[test]
fn a_read_during_a_soft_drain_waits_for_one_program_not_a_chunk() {
    let (mut hard, t) = draining(false);
    let behind_chunk = slowest_read(&mut hard, t);
    let (mut soft, t) = draining(true);
    let behind_one = slowest_read(&mut soft, t);
    // Booked at once, the drain holds a unit for its 16 programs (0.3/1.5 ms each): the read waits ~10 ms.
    assert!(behind_chunk > 5_000_000, "{behind_chunk}");
    // Soft: at most the program under way (1.5 ms) plus the read itself.
    assert!(behind_one < 1_500_000 + 200_000, "{behind_one}");
}

#[test]
fn a_soft_drain_empties_the_buffer_in_the_same_window() {
    // P10 stays: after a whole window idle, another buffer's worth of writes waits for no flush; after a
    // tenth of it, the buffer is still mostly full and a write waits for a flush. (The window is longer than
    // a unit takes for its chunk, 16 programs of up to 1.5 ms, as on every drive whose P10 is a soft flush:
    // a soft drain cannot beat the units.)
    for soft in [false, true] {
        let mut dev = device(soft, ms(50));
        let (_, t) = write_qd1(&mut dev, SimTime::ZERO, 0, 512 * KIB, 64 * KIB);
        let (lat, t) = write_qd1(&mut dev, t + ms(51), 1 << 20, 512 * KIB, 64 * KIB);
        assert!(lat.iter().all(|&l| l < 1_000_000), "soft={soft}: {lat:?}");
        let (lat, _) = write_qd1(&mut dev, t + ms(5), 2 << 20, 512 * KIB, 64 * KIB);
        assert!(lat.iter().any(|&l| l > 1_000_000), "soft={soft}: {lat:?}");
    }
}

#[test]
fn a_host_flush_programs_the_pages_the_soft_drain_left_pending() {
    let (mut dev, t) = draining(true);
    let pending = dev.soft.as_ref().map_or(0, |s| s.count);
    let done = dev.submit(t, &req(SimOp::Flush, 0, 0));
    assert!(pending == 0, "nothing is pending before a command runs the drain: {pending}");
    let level = dev.level1.as_ref().expect("buffered");
    assert!(level.fifo.is_empty() && level.draining == 0);
    assert_eq!(dev.soft.as_ref().map(|s| s.count), Some(0));
    // Everything the buffer held is programmed by then: a whole buffer, at least 8 programs per unit.
    assert!(done - t > ms(8), "{:?}", done - t);
}

#[test]
fn soft_flush_is_off_by_default_and_ignored_with_a_second_level() {
    assert!(!small_config().write_buffer.soft_flush);
    let mut cfg = small_config();
    cfg.write_buffer.soft_flush = true;
    cfg.write_buffer.second_level = 4 << 20;
    assert!(SsdDevice::new(cfg).soft.is_none());
}

/// Reads of never-written pages (answered with zeroes, in microseconds) `gap` apart from `at`, `count` of them:
/// the drive is idle between them for a little less than `gap` each.
fn short_gaps(dev: &mut SsdDevice, at: SimTime, gap: Nanos, count: u64) -> SimTime {
    let mut now = at;
    for i in 0..count {
        dev.submit(now, &req(SimOp::Read, (32 << 20) + (i % 64) * 4 * KIB, 4 * KIB));
        now += gap;
    }
    now
}

#[test]
fn idle_gaps_shorter_than_a_pages_share_still_drain_a_soft_flush_buffer() {
    // A full 128-page buffer drained in 10 ms: one page's share of the window is 78 us. Gaps of 50 us each
    // drain 0.6 of a page; rounded down per gap that was nothing, however many gaps passed (a read-heavy load
    // never drained the buffer). With the remainder carried, 400 gaps (20 ms, twice the window) drain most of it.
    for soft in [false, true] {
        let mut dev = device(soft, ms(10));
        let (_, t) = write_qd1(&mut dev, SimTime::ZERO, 0, 512 * KIB, 64 * KIB);
        short_gaps(&mut dev, t, Nanos(50_000), 400);
        let level = dev.level1.as_ref().expect("buffered");
        let held = level.fifo.len();
        if soft {
            assert!(held < 64, "the soft drain carried nothing across the gaps: {held} of 128 pages left");
        } else {
            // The hard drain (no `soft_flush`) keeps its per-gap rounding: its timings stay as they were.
            assert_eq!(held, 128);
        }
    }
}

#[test]
fn a_read_of_a_page_the_soft_drain_has_not_programmed_yet_comes_from_the_buffer() {
    // After the 2 ms gap, each unit the drain reached programs the first of its pages and queues the rest:
    // their data is still in the buffer, and a read of one is answered from RAM, not from NAND behind the
    // program under way.
    let (mut dev, t) = draining(true);
    dev.submit(t, &req(SimOp::Read, 32 << 20, 4 * KIB)); // runs the drain up to t
    let soft = dev.soft.as_ref().expect("soft drain");
    assert!(soft.count > 0 && soft.queued.len() as u64 == soft.count);
    // The first chunk's last page (the drain takes pages in the order written: 16 to a unit).
    let queued = (1 << 20) + 15 * 4 * KIB;
    let ppn = dev.ftl.lookup(queued / (4 * KIB));
    assert!(soft.queued.contains(&ppn), "the page is queued");
    let latency = (dev.submit(t, &req(SimOp::Read, queued, 4 * KIB)) - t).0;
    // From NAND it would wait for the 0.3-1.5 ms program and then its own 50-90 us sense.
    assert!(latency < 50_000, "{latency}");
}
