//! `nand.register_hold`: after a host read's sense the controller keeps the data in the unit's register while
//! it moves and decodes it. A read already waiting on the unit when the sense ends is pipelined (cache read);
//! one that comes during the hold waits for the release. Simulated time only, stated bounds.

use super::*;

/// The small device with every page type read in 50 us, 16 KiB chunks (four 4 KiB pages on a unit in a row),
/// a fast bus, NAND pages of `physical_page` (16 KiB: reads go through the sense groups; 4 KiB: page by page)
/// and a register hold of `hold`.
fn holding(physical_page: u64, hold: Nanos) -> DeviceConfig {
    let mut cfg = super::read_tests::grouped(physical_page, 1);
    cfg.nand.register_hold = hold;
    cfg
}

/// Latencies of two 4 KiB reads on one unit (offset 0, then the second NAND page of the chunk, another
/// sense), the second submitted `gap` after the first.
fn two_reads(cfg: DeviceConfig, gap: Nanos) -> (Nanos, Nanos) {
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let first = dev.submit(t, &req(SimOp::Read, 0, 4 * KIB)) - t;
    let t2 = t + gap;
    let second = dev.submit(t2, &req(SimOp::Read, 4 * KIB, 4 * KIB)) - t2;
    (first, second)
}

#[test]
fn a_read_arriving_after_the_sense_waits_for_the_register_release() {
    for page in [4 * KIB, 16 * KIB] {
        let (first, alone) = two_reads(holding(page, Nanos(0)), us(60));
        let (held_first, held) = two_reads(holding(page, us(100)), us(60));
        assert_eq!(first, held_first, "a read on an idle unit pays no hold ({page} B pages)");
        // The second read is ready to sense ~60 us after the first: 10 us after its sense ended, 90 us
        // before the release.
        assert!(held.0 >= alone.0 + 80_000 && held.0 <= alone.0 + 100_000, "{held:?} against {alone:?} ({page} B)");
    }
}

#[test]
fn a_read_waiting_when_the_sense_ends_is_pipelined_and_pays_no_hold() {
    for page in [4 * KIB, 16 * KIB] {
        let (_, queued) = two_reads(holding(page, Nanos(0)), us(10));
        let (_, held) = two_reads(holding(page, us(100)), us(10));
        assert_eq!(queued, held, "queued behind the first sense: straight on ({page} B pages)");
    }
}

#[test]
fn a_saturated_unit_never_pays_the_hold() {
    // 64 reads of one unit's pages submitted together: they queue back to back, so the last completes when
    // it would without the hold.
    let last = |hold| {
        let mut dev = SsdDevice::new(holding(16 * KIB, hold));
        let t = fill_sequentially(&mut dev) + ms(100);
        let units = dev.flash.units() as u64;
        (0..64u64).map(|i| dev.submit(t, &req(SimOp::Read, (i * units * 4 + i % 4) * 4 * KIB, 4 * KIB))).max().unwrap()
            - t
    };
    let plain = last(Nanos(0));
    assert!(plain.0 >= 64 * 50_000, "one unit senses 64 times in series: {plain:?}");
    assert_eq!(last(us(100)), plain);
}

#[test]
fn a_read_after_the_release_pays_nothing() {
    let (_, alone) = two_reads(holding(16 * KIB, Nanos(0)), us(300));
    let (_, held) = two_reads(holding(16 * KIB, us(100)), us(300));
    assert_eq!(alone, held);
}

#[test]
fn a_retry_is_issued_once_the_hold_has_ended() {
    // Every page read once more (`read_retry_rate` 1): with a hold the second read waits for the decode of the
    // first to fail, the hold's release, and then senses; without a retry the read ends at the first transfer.
    let lone = |physical_page: u64, retry_rate: f64| {
        let mut cfg = holding(physical_page, us(100));
        cfg.noise = Some(crate::config::Noise {
            latency_cv: 0.0,
            host_jitter: Nanos(0),
            read_retry_rate: retry_rate,
            background_interval: None,
            background_busy: ms(1),
            stall_rate: 0.0,
            stall_latency: ms(3),
        });
        let mut dev = SsdDevice::new(cfg);
        let t = fill_sequentially(&mut dev) + ms(100);
        dev.submit(t, &req(SimOp::Read, 0, 4 * KIB)) - t
    };
    for page in [4 * KIB, 16 * KIB] {
        let (once, twice) = (lone(page, 0.0), lone(page, 1.0));
        // The retry senses (50 us) after the 100 us hold that followed the first sense, then crosses the bus
        // as the first read did.
        assert!(twice.0 >= once.0 + 150_000 && twice.0 <= once.0 + 152_000, "{once:?} then {twice:?} ({page} B)");
    }
}
