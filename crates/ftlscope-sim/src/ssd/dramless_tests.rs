//! A DRAM-less drive's order-sensitive behaviour (issue 15, the Kingston NV2 of "What does the Flash
//! Translation Layer do?" §5.2 and §5.9): a sequential stream followed only while its commands are queued
//! together (`nand.stream_queued`), and translation pages written back as lone programs
//! (`ftl.map_program_latency`). Each compares the key against the same device without it, on the simulated clock.

use super::*;
use crate::config::MappingCache as MappingCacheConfig;

/// The tests' paged device with page-register hits for sequential streams.
fn paged() -> DeviceConfig {
    let mut cfg = paged_config();
    cfg.nand.stream_register_hits = true;
    cfg
}

#[test]
fn a_queued_stream_is_followed_and_reads_one_at_a_time_are_not() {
    let mut cfg = paged();
    cfg.nand.stream_queued = true;
    let offsets = [0, 4 * KIB, 8 * KIB, 12 * KIB];
    // One at a time (as a latency probe reads): every read senses its page.
    let alone = reads_after_sequential_fill(cfg.clone(), &offsets);
    assert!(alone.iter().all(|&l| l >= 50_000), "{alone:?}");
    // Submitted together: each continues a read still in progress, so the sensed page serves the rest.
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let done: Vec<u64> = offsets.iter().map(|&o| (dev.submit(t, &req(SimOp::Read, o, 4 * KIB)) - t).0).collect();
    let sense_more = done[3] - done[0];
    assert!(sense_more < 20_000, "the queued stream's later pages need no sense of their own: {done:?}");
}

#[test]
fn a_stream_over_randomly_written_data_senses_more_than_over_sequential_data() {
    // 8 MiB written sequentially, or as 4 KiB pages in a shuffled order; then read back in order, 2 KiB reads
    // queued 16 at a time.
    let mut cfg = paged();
    cfg.nand.stream_queued = true;
    let pages = 2048u64;
    let mut order: Vec<u64> = (0..pages).collect();
    // A fixed shuffle (multiplicative step coprime to the page count).
    order.sort_by_key(|&p| (p * 1237) % pages);
    let mut times = Vec::new();
    for shuffled in [false, true] {
        let mut dev = SsdDevice::new(cfg.clone());
        let writes = (0..pages).map(|i| {
            let page = if shuffled { order[i as usize] } else { i };
            req(SimOp::Write, page * 4 * KIB, 4 * KIB)
        });
        let (_, t) = qd1(&mut dev, SimTime::ZERO, writes);
        let t = dev.submit(t, &req(SimOp::Flush, 0, 0)) + ms(100);
        // 16 reads submitted together, the next 16 when they are done.
        let mut now = t;
        for batch in 0..2 * pages / 16 {
            let batch_done = (0..16)
                .map(|i| dev.submit(now, &req(SimOp::Read, (batch * 16 + i) * 2 * KIB, 2 * KIB)))
                .max()
                .expect("16 reads");
            now = batch_done;
        }
        times.push((now - t).0 as f64);
    }
    // Sequentially written: one sense serves eight 2 KiB reads; shuffled: each 4 KiB page has its own NAND page.
    assert!(times[1] > 1.5 * times[0], "sequentially written {:.0} ns, shuffled {:.0} ns", times[0], times[1]);
}

/// Mean QD 1 latency of 512 B writes, each in another 4 MiB mapping region than the last, on a DRAM-less drive
/// whose mapping cache holds two regions.
fn random_small_writes(map_program_latency: Nanos) -> (f64, u64) {
    let mut cfg = small_config();
    cfg.device.capacity = 64 * MIB;
    cfg.ftl.mapping_cache = MappingCacheConfig::Bytes(2 * 4096);
    cfg.ftl.write_map_lookup = true;
    cfg.ftl.map_program_latency = map_program_latency;
    let mut dev = SsdDevice::new(cfg);
    let offsets = (0..400u64).map(|i| ((i * 7) % 16) * 4 * MIB + (i * 4096) % (4 * MIB));
    let (lat, done) = qd1(&mut dev, SimTime::ZERO, offsets.map(|o| req(SimOp::Write, o, 512)));
    (lat.iter().sum::<u64>() as f64 / lat.len() as f64, dev.counters(done).media_bytes_written)
}

#[test]
fn evicted_translation_pages_take_the_lone_program_time() {
    // small_config's L-page program is 300 us; a lone translation-page program of 1 ms instead.
    let (default, written) = random_small_writes(Nanos(0));
    let (lone, lone_written) = random_small_writes(ms(1));
    // Nearly every write evicts a changed region (two cached, 16 visited in turn): ~700 us more each.
    assert!(lone > default + 600_000.0 && lone < default + 800_000.0, "{lone:.0} ns against {default:.0} ns");
    // The same translation pages are written either way.
    assert_eq!(written, lone_written);
}
