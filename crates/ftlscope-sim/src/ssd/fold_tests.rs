//! Tests of foreground SLC folding (`slc_cache.fold_while_writing`, `slc_cache.fold_above`): a fresh fill pays
//! for folding the valid pages it wrote, a small span rewritten many times folds nearly empty blocks almost
//! for free, and folding starts only past its watermark; with `slc_cache.fold_by_valid` folding grows with the
//! valid data in the cache; with `slc_cache.fold_batch` a full cache folds whole blocks in one blocking batch.
//! Each compares devices on the simulated clock.

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

/// [`device`] folding at `fold` times the share of the cache holding valid data (`fold_by_valid`).
fn device_by_valid(fold: f64) -> SsdDevice {
    let mut cfg = small_config();
    cfg.device.capacity = 256 * MIB;
    cfg.slc_cache.capacity = 128 * MIB;
    cfg.slc_cache.fold_while_writing = fold;
    cfg.slc_cache.fold_by_valid = true;
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

/// The time the writes `from..to` (indices into `times`) took, from the completion before them.
fn stretch(times: &[SimTime], from: usize, to: usize) -> f64 {
    (times[to - 1].0 - times[from - 1].0) as f64
}

#[test]
fn folding_by_valid_data_grows_as_a_fresh_fill_fills_the_cache() {
    // 96 MiB into a 128 MiB cache: the first 8 MiB fold at most 1/16 of the full rate, the last 8 MiB about
    // 3/4 of it. Early on the fill runs nearly as fast as without folding; at its end well slower than early.
    let plain = sequential(&mut device(0.0, 0.0), 96 * MIB);
    let by_valid = sequential(&mut device_by_valid(0.5), 96 * MIB);
    let mib8 = (8 * MIB / (4 * KIB)) as usize;
    let n = plain.len();
    let (early, early_plain) = (stretch(&by_valid, 1, mib8), stretch(&plain, 1, mib8));
    let (late, late_plain) = (stretch(&by_valid, n - mib8, n), stretch(&plain, n - mib8, n));
    assert!(early < 1.1 * early_plain, "first 8 MiB {early:.0} ns against {early_plain:.0} without folding");
    assert!(late > 1.3 * late_plain, "last 8 MiB {late:.0} ns against {late_plain:.0} without folding");
    assert!(late > 1.2 * early, "last 8 MiB {late:.0} ns against the first {early:.0}");
    // It still pays for what it folds: the whole fill is slower than without folding.
    assert!(last(&by_valid) > 1.1 * last(&plain));
}

#[test]
fn folding_by_valid_data_spares_a_small_rewritten_span() {
    // An 8 MiB span rewritten at random holds at most 8 MiB of valid data in the 128 MiB cache: folding by
    // valid data costs it under a tenth of what folding at the full rate from the start does.
    let span = 8 * MIB;
    let extra = |mut dev: SsdDevice| {
        let start = last(&sequential(&mut dev, span));
        rewrites(&mut dev, span, 96 * MIB).0 as f64 - start
    };
    let plain = extra(device(0.0, 0.0));
    let full_rate = extra(device(0.5, 0.0)) / plain - 1.0;
    let by_valid = extra(device_by_valid(0.5)) / plain - 1.0;
    assert!(full_rate > 0.05, "folding at the full rate adds {full_rate:.3}");
    assert!(by_valid < full_rate / 10.0, "folding by valid data adds {by_valid:.3}, at the full rate {full_rate:.3}");
}

/// A 256 MiB device with a 32 MiB SLC cache that folds `batch` bytes at once when it is full (`fold_batch`;
/// 8 units of 256 KiB blocks: 2 MiB is one block a unit).
fn device_batch(batch: u64) -> SsdDevice {
    let mut cfg = small_config();
    cfg.device.capacity = 256 * MIB;
    cfg.slc_cache.capacity = 32 * MIB;
    cfg.slc_cache.fold_batch = batch;
    SsdDevice::new(cfg)
}

/// The longest time between two consecutive write completions (the longest stall the host saw).
fn longest_gap(times: &[SimTime]) -> f64 {
    let mut sorted: Vec<u64> = times.iter().map(|t| t.0).collect();
    sorted.sort_unstable();
    sorted.windows(2).map(|w| w[1] - w[0]).max().expect("writes") as f64
}

#[test]
fn a_full_cache_stalls_for_a_whole_fold_batch_then_writes_in_slc_mode_again() {
    // 96 MiB into a 32 MiB cache. Without the key the writes after the cliff go to native-mode blocks and
    // wait at most for a buffer flush; with a 2 MiB batch every 2 MiB written after the cliff first waits
    // while each unit folds a whole block (64 pages read in SLC mode and programmed natively, ~60 ms).
    let mut plain_dev = device_batch(0);
    let mut batch_dev = device_batch(2 * MIB);
    let plain = sequential(&mut plain_dev, 96 * MIB);
    let batched = sequential(&mut batch_dev, 96 * MIB);
    let below = (24 * MIB / (4 * KIB)) as usize;
    assert_eq!(plain[..below], batched[..below], "nothing changes before the cache is full");
    assert_eq!(plain_dev.ftl.counters.batch_folded_blocks, 0);
    let (plain_gap, batch_gap) = (longest_gap(&plain), longest_gap(&batched));
    assert!(batch_gap > 40e6, "longest stall {batch_gap:.0} ns: a whole block a unit is ~60 ms of folding");
    assert!(batch_gap > 2.0 * plain_gap, "longest stall {batch_gap:.0} ns against {plain_gap:.0} ns without");
    // Each batch frees the room the next 2 MiB are written to in SLC mode: the 64 MiB after the cliff need
    // about 32 batches of 8 blocks (without SLC room again it would fold once and write natively).
    let folded = batch_dev.ftl.counters.batch_folded_blocks;
    assert!((200..=272).contains(&folded), "{folded} blocks folded in batches");
}

#[test]
fn a_bigger_fold_batch_stalls_longer() {
    // Two blocks a unit fold twice as many pages as one: the longest stall about doubles.
    let one = longest_gap(&sequential(&mut device_batch(2 * MIB), 96 * MIB));
    let two = longest_gap(&sequential(&mut device_batch(4 * MIB), 96 * MIB));
    assert!((1.5..=2.5).contains(&(two / one)), "stall {two:.0} ns with two blocks a unit, {one:.0} ns with one");
}
