//! The controller's command slots (`controller.command_slots`) on a whole device: a read submitted behind a
//! deep queue of buffered writes waits for the writes before it to leave the submission queue, where a
//! controller that takes every command at once lets it overtake them all. Simulated time only.

use crate::device::{SimDevice, SimOp, SimRequest};
use crate::ssd::tests::small_config;
use crate::ssd::SsdDevice;
use crate::time::{Nanos, SimTime};

const KIB: u64 = 1 << 10;

fn req(op: SimOp, offset: u64) -> SimRequest {
    SimRequest { op, offset, len: 16 * KIB, fingerprint: 1 }
}

/// A device whose first 32 MiB were written and flushed, idle from the instant returned.
fn written(slots: u32) -> (SsdDevice, SimTime) {
    let mut cfg = small_config();
    cfg.controller.command_slots = slots;
    let mut dev = SsdDevice::new(cfg);
    let mut now = SimTime::ZERO;
    for i in 0..(32 << 20) / (128 * KIB) {
        now = dev.submit(now, &SimRequest { op: SimOp::Write, offset: i * 128 * KIB, len: 128 * KIB, fingerprint: 0 });
    }
    let flushed = dev.submit(now, &SimRequest { op: SimOp::Flush, offset: 0, len: 0, fingerprint: 0 });
    (dev, flushed + Nanos(100_000_000))
}

/// 256 writes of 16 KiB (1 MiB more than the small device's buffer holds), then one read, all submitted at the
/// same instant: the writes' completions and the read's.
fn writes_then_a_read(slots: u32) -> (Vec<SimTime>, SimTime) {
    let (mut dev, t) = written(slots);
    let writes = (0..256).map(|k| dev.submit(t, &req(SimOp::Write, (32 << 20) + k * 16 * KIB))).collect();
    let read = dev.submit(t, &req(SimOp::Read, 0));
    (writes, read)
}

#[test]
fn without_slots_a_read_overtakes_every_queued_write() {
    let (writes, read) = writes_then_a_read(0);
    let last_write = *writes.iter().max().expect("writes");
    assert!(read < last_write, "the read ({read:?}) completes before the writes queued before it ({last_write:?})");
}

#[test]
fn with_slots_a_read_waits_until_the_writes_before_it_are_fetched() {
    let slots = 16;
    let (writes, read) = writes_then_a_read(slots);
    // The read is the 257th command: it is fetched when the 241st command (256 - 16 + 1) before it has
    // completed, in completion order, and completes after that.
    let mut sorted = writes.clone();
    sorted.sort();
    let fetched_after = sorted[256 - slots as usize];
    assert!(read > fetched_after, "the read ({read:?}) is fetched only once a slot frees ({fetched_after:?})");
    let (_, unlimited) = writes_then_a_read(0);
    assert!(read > unlimited, "{read:?} against {unlimited:?} without slots");
}

#[test]
fn slots_never_all_taken_change_nothing() {
    // Fewer commands outstanding than slots: every completion time as without the key.
    let (a, ra) = writes_then_a_read(0);
    let (b, rb) = writes_then_a_read(1024);
    assert_eq!((a, ra), (b, rb));
}

#[test]
fn the_controller_never_holds_more_commands_than_its_slots() {
    let slots = 8usize;
    let (mut dev, t) = written(slots as u32);
    // A mixed queue submitted at once: each command's fetch (read off the slots) and completion.
    let mut held = Vec::new();
    for k in 0..200u64 {
        let op = if k % 2 == 0 { SimOp::Write } else { SimOp::Read };
        let done = dev.submit(t, &req(op, (k * 48 * KIB) % (24 << 20)));
        let fetched = dev.slots.as_ref().expect("slots").last_fetch();
        held.push((fetched, done));
    }
    assert!(held.windows(2).all(|w| w[0].0 <= w[1].0), "the submission queue is fetched in order");
    // At every fetch, the commands fetched and not yet complete (that one included) fit in the slots.
    for &(at, _) in &held {
        let inside = held.iter().filter(|&&(f, d)| f <= at && d > at).count();
        assert!(inside <= slots, "{inside} commands held at {at:?}");
    }
    assert!(held[199].0 > t, "200 commands at once cannot all be fetched at once");
}
