//! Tests of foreground SLC folding (`slc_cache.fold_while_writing`, `slc_cache.fold_above`): a fresh fill pays
//! for folding the valid pages it wrote, a small span rewritten many times folds nearly empty blocks almost
//! for free, and folding starts only past its watermark. Each compares devices on the simulated clock.

use super::tests::small_config;
use super::*;
use rand::{Rng, SeedableRng};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// A 256 MiB device with a 128 MiB SLC cache (the tests stay below it: no cliff).
fn device(fold: f64, above: f64) -> SsdDevice {
    let mut cfg = small_config();
    cfg.device.capacity = 256 * MIB;
    cfg.slc_cache.capacity = 128 * MIB;
    cfg.slc_cache.fold_while_writing = fold;
    cfg.slc_cache.fold_above = above;
    SsdDevice::new(cfg)
}

/// 4 KiB writes at QD 8 to the offsets `offset(i)`, `count` of them; each completion time.
fn writes_qd8(dev: &mut SsdDevice, count: u64, mut offset: impl FnMut(u64) -> u64) -> Vec<SimTime> {
    let mut slots = [SimTime::ZERO; 8];
    let mut done = Vec::new();
    for i in 0..count {
        let slot = (i % 8) as usize;
        let req = SimRequest { op: SimOp::Write, offset: offset(i), len: 4 * KIB, fingerprint: i as u32 };
        slots[slot] = dev.submit(slots[slot], &req);
        done.push(slots[slot]);
    }
    done
}

fn sequential(dev: &mut SsdDevice, bytes: u64) -> Vec<SimTime> {
    writes_qd8(dev, bytes / (4 * KIB), |i| i * 4 * KIB)
}

/// Random 4 KiB overwrites of the first `span` bytes, `bytes` in all.
fn rewrites(dev: &mut SsdDevice, span: u64, bytes: u64) -> SimTime {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
    let pages = span / (4 * KIB);
    *writes_qd8(dev, bytes / (4 * KIB), |_| rng.random_range(0..pages) * 4 * KIB).last().expect("writes")
}

fn last(times: &[SimTime]) -> f64 {
    times.iter().max().expect("writes").0 as f64
}

#[test]
fn a_fresh_fill_pays_for_folding_its_valid_pages() {
    let plain = last(&sequential(&mut device(0.0, 0.0), 96 * MIB));
    let folding = last(&sequential(&mut device(0.5, 0.0), 96 * MIB));
    assert!(folding > 1.5 * plain, "fill with folding {folding:.0} ns against {plain:.0} ns without");
}

#[test]
fn a_small_rewritten_span_folds_nearly_for_free() {
    // The span is written first, then rewritten randomly: the folded blocks are the oldest, whose pages the
    // rewrites have mostly replaced (only the first rewrites still meet the span's first copy). Folding's
    // extra time is compared with what it costs a fresh fill of as many bytes.
    let span = 8 * MIB;
    let mut plain = device(0.0, 0.0);
    let mut folding = device(0.5, 0.0);
    let start_plain = last(&sequential(&mut plain, span));
    let start_folding = last(&sequential(&mut folding, span));
    let plain = rewrites(&mut plain, span, 96 * MIB).0 as f64 - start_plain;
    let folding = rewrites(&mut folding, span, 96 * MIB).0 as f64 - start_folding;
    let fill_plain = last(&sequential(&mut device(0.0, 0.0), 96 * MIB));
    let fill_folding = last(&sequential(&mut device(0.5, 0.0), 96 * MIB));
    let span_extra = folding / plain - 1.0;
    let fill_extra = fill_folding / fill_plain - 1.0;
    assert!(span_extra < fill_extra / 3.0, "folding adds {span_extra:.2} to the rewrites, {fill_extra:.2} to a fill");
}

#[test]
fn folding_starts_at_its_watermark() {
    // Below half of the 128 MiB cache nothing folds: the same completion times as without the key.
    let plain = sequential(&mut device(0.0, 0.0), 96 * MIB);
    let folding = sequential(&mut device(0.5, 0.5), 96 * MIB);
    let below = (56 * MIB / (4 * KIB)) as usize;
    assert_eq!(plain[..below], folding[..below], "nothing folds below the watermark");
    assert!(last(&folding) > 1.2 * last(&plain), "folding past the watermark slows the fill");
}
