//! `noise.read_retry_rate` on a drive with `program_suspend`: the page read again is a host read like the
//! first, so it suspends the unit's programs and the reads after it queue behind it as behind any read.
//! Simulated time only, stated bounds.

use super::*;
use crate::config::Noise;

/// The small device with every page type read in 50 us, a fast bus, program suspend (20 us) and every host
/// page read once more (`read_retry_rate` 1: which reads meet a retry is then no matter of chance).
fn retrying() -> DeviceConfig {
    let mut cfg = small_config();
    cfg.nand.read_latency = PerType { l: us(50), m: us(50), h: us(50) };
    cfg.nand.channel_rate = Rate(4e9);
    cfg.nand.program_suspend = true;
    cfg.nand.suspend_latency = us(20);
    cfg.write_buffer.idle_flush_window = None;
    cfg.noise = Some(Noise {
        latency_cv: 0.0,
        host_jitter: Nanos(0),
        read_retry_rate: 1.0,
        background_interval: None,
        background_busy: ms(1),
        stall_rate: 0.0,
        stall_latency: ms(3),
    });
    cfg
}

/// One host read's latency on an idle device, for the controller's own share of it.
fn lone_read(dev: &mut SsdDevice, t: SimTime, offset: u64) -> Nanos {
    dev.submit(t, &req(SimOp::Read, offset, 4 * KIB)) - t
}

#[test]
fn a_retried_read_suspends_the_programs_as_its_first_read_did() {
    let mut dev = SsdDevice::new(retrying());
    let t = fill_sequentially(&mut dev) + ms(100);
    let idle = lone_read(&mut dev, t, 0);
    // A buffer's worth of writes flushed at once: every unit has milliseconds of programs queued.
    let t = t + ms(100);
    let (_, t) = qd1(&mut dev, t, (0..64).map(|i| req(SimOp::Write, 1024 * KIB + i * 16 * KIB, 16 * KIB)));
    dev.submit(t, &req(SimOp::Flush, 0, 0));
    let t = t + us(10);
    assert!(dev.flash.all_idle_at() > t + ms(1), "the programs are still pending");
    let busy = lone_read(&mut dev, t, 0);
    // Both reads suspend the programs (20 us each); neither waits for them.
    assert_eq!(busy.0, idle.0 + 2 * 20_000, "idle {idle:?}, among programs {busy:?}");
}

#[test]
fn a_read_after_a_retry_queues_behind_it_without_a_suspend() {
    let mut dev = SsdDevice::new(retrying());
    let t = fill_sequentially(&mut dev) + ms(100);
    let first = lone_read(&mut dev, t, 0);
    assert!(first.0 >= 2 * 50_000, "sensed twice: {first:?}");
    // Two reads of one unit submitted together: the second (with its own retry) waits for the first's two
    // senses, and pays no suspend latency, as nothing but reads is on the unit.
    let t = t + ms(10);
    // Two-page chunks striped over every unit: page 2 x units is on page 0's unit again.
    let same_unit = 2 * dev.flash.units() as u64 * 4 * KIB;
    let a = lone_read(&mut dev, t, 0);
    let b = lone_read(&mut dev, t, same_unit);
    assert_eq!(a, first);
    assert!(b.0 >= a.0 + 2 * 50_000, "queued behind both senses of the first: {a:?} then {b:?}");
    assert!(b.0 < a.0 + 2 * 50_000 + 20_000, "no suspend latency: {a:?} then {b:?}");
}
