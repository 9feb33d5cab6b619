//! `write_buffer.drain_while_reading` (issue 15): the buffer drains between the writes of a read/write mix, so
//! the mix no longer fills it and stalls for the whole flush; writes alone, and reads alone, time as without it.

use super::tests::small_config;
use super::*;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn req(op: SimOp, offset: u64, len: u64) -> SimRequest {
    SimRequest { op, offset, len, fingerprint: (offset / 4096) as u32 }
}

/// A device whose first 4 MiB are written and on NAND (the mix reads them); returns it and when it is ready.
fn device(drain_while_reading: bool) -> (SsdDevice, SimTime) {
    let mut cfg = small_config();
    cfg.write_buffer.idle_flush_window = Some(Nanos(2_000_000));
    cfg.write_buffer.drain_while_reading = drain_while_reading;
    let mut dev = SsdDevice::new(cfg);
    let mut now = SimTime::ZERO;
    for i in 0..(4 * MIB / (128 * KIB)) {
        now = dev.submit(now, &req(SimOp::Write, i * 128 * KIB, 128 * KIB));
    }
    let ready = dev.submit(now, &req(SimOp::Flush, 0, 0));
    (dev, ready)
}

/// A closed loop at QD 2: nine 4 KiB reads of the written data for each 4 KiB write (after it, new space),
/// `count` commands; returns the writes' latencies and the reads'.
fn mix(dev: &mut SsdDevice, start: SimTime, count: u64) -> (Vec<u64>, Vec<u64>) {
    let mut slots = [start; 2];
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for i in 0..count {
        let slot = (0..2).min_by_key(|&s| slots[s]).expect("two slots");
        let now = slots[slot];
        let page = i.wrapping_mul(2_654_435_761) % 1024;
        let done = if i % 10 == 9 {
            let done = dev.submit(now, &req(SimOp::Write, 8 * MIB + i / 10 * 4 * KIB, 4 * KIB));
            writes.push((done - now).0);
            done
        } else {
            let done = dev.submit(now, &req(SimOp::Read, page * 4 * KIB, 4 * KIB));
            reads.push((done - now).0);
            done
        };
        slots[slot] = done;
    }
    (writes, reads)
}

#[test]
fn a_read_write_mix_drains_the_buffer_instead_of_stalling_for_its_whole_flush() {
    let (mut idle_only, at) = device(false);
    let (stalled, _) = mix(&mut idle_only, at, 20_000);
    let (mut draining, at) = device(true);
    let (steady, reads) = mix(&mut draining, at, 20_000);
    let max = |l: &[u64]| *l.iter().max().expect("latencies");
    // Idle-only: the 512 KiB buffer fills and a write waits for all 128 pages to program (8 units, 300-1500 us
    // each: over 10 ms). Draining: a write never waits for a flush.
    assert!(max(&stalled) > 10_000_000, "longest write {} ns without the drain", max(&stalled));
    assert!(max(&steady) < 100_000, "longest write {} ns with the drain", max(&steady));
    // The drained pages' programs share the units with the reads: a read waits at most for one program.
    assert!(max(&reads) < 2_000_000, "longest read {} ns", max(&reads));
}

#[test]
fn writes_alone_time_exactly_as_with_the_idle_only_drain() {
    // A write stream with idle gaps shorter and longer than the window: the spikes P8 and P10 read are the same.
    let run = |drain: bool| {
        let (mut dev, mut now) = device(drain);
        let mut lat = Vec::new();
        for burst in 0..6u64 {
            for i in 0..64 {
                let done = dev.submit(now, &req(SimOp::Write, 8 * MIB + (burst * 64 + i) * 64 * KIB, 64 * KIB));
                lat.push((done - now).0);
                now = done;
            }
            now += Nanos(burst * 700_000);
        }
        lat
    };
    let (idle_only, drained) = (run(false), run(true));
    assert!(idle_only.iter().any(|&l| l > 1_000_000), "no flush spike: {idle_only:?}");
    assert_eq!(idle_only, drained);
}

#[test]
fn reads_alone_leave_recently_written_data_in_the_buffer() {
    // 256 KiB written, then read back at QD 1 for far longer than the window: without writes in progress the
    // reads credit no drain, so every read is served from the buffer (controller RAM), as without the key.
    let run = |drain: bool| {
        let (mut dev, mut now) = device(drain);
        for i in 0..4 {
            now = dev.submit(now, &req(SimOp::Write, 8 * MIB + i * 64 * KIB, 64 * KIB));
        }
        let mut lat = Vec::new();
        for i in 0..2_000u64 {
            let done = dev.submit(now, &req(SimOp::Read, 8 * MIB + i % 64 * 4 * KIB, 4 * KIB));
            lat.push((done - now).0);
            now = done;
        }
        lat
    };
    let (idle_only, drained) = (run(false), run(true));
    assert!(drained.iter().all(|&l| l < 20_000), "a read went to NAND: {:?}", drained.iter().max());
    assert_eq!(idle_only, drained);
}

#[test]
fn the_drain_while_reading_is_off_by_default() {
    assert!(!small_config().write_buffer.drain_while_reading);
}

/// The soft flush's idle gaps and `drain_while_reading`'s time between commands share one proportional drain
/// with the part of a page carried (`BufferLevel::drained_carrying`): stretches too short for a page add up
/// exactly, and the carry is dropped once the level is empty.
#[test]
fn proportional_drain_carries_the_part_of_a_page() {
    let window = Nanos(1_000);
    let mut level = BufferLevel::new(64 * 4096, 0, 0, Some(window), 4096);
    level.fifo.extend(0..100);
    // 100 pages x 3 ns of a 1,000 ns window: 0.3 of a page a call, so a page every third or fourth call.
    let drained: Vec<u64> = (0..10).map(|_| level.drained_carrying(Nanos(3), window)).collect();
    assert_eq!(drained, [0, 0, 0, 1, 0, 0, 1, 0, 0, 1]);
    assert_eq!(level.drain_carry, 0); // 10 x 300 page-ns is exactly 3 pages
    level.drained_carrying(Nanos(5), window);
    assert_eq!(level.drain_carry, 500);
    level.fifo.clear();
    assert_eq!(level.drained_carrying(Nanos(5), window), 0);
    level.fifo.push_back(7);
    assert_eq!(level.drain_carry, 0, "an empty level starts the next page afresh");
    assert_eq!(level.drained_carrying(window, window), 1, "a whole window drains everything");
}
