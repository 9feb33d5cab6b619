//! Tests of the write side's optional mechanisms (issue 15): the pipelined buffer flush, writes that look up
//! their mapping entries on a DRAM-less drive, and background GC in idle time. Each compares a device with
//! the key on against the same device without it, on the simulated clock.

use super::tests::small_config;
use super::*;
use crate::config::MappingCache as MappingCacheConfig;
use crate::time::Nanos;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn write(offset: u64, len: u64, fingerprint: u32) -> SimRequest {
    SimRequest { op: SimOp::Write, offset, len, fingerprint }
}

/// Sequential 128 KiB writes at QD 8 over `bytes`; returns each write's latency and when the last completed.
fn sequential_qd8(dev: &mut SsdDevice, bytes: u64) -> (Vec<u64>, SimTime) {
    let size = 128 * KIB;
    let mut slots = [SimTime::ZERO; 8];
    let mut lat = Vec::new();
    for i in 0..bytes / size {
        let slot = (i % 8) as usize;
        let now = slots[slot];
        let done = dev.submit(now, &write(i * size, size, i as u32));
        lat.push((done - now).0);
        slots[slot] = done;
    }
    (lat, slots.into_iter().max().unwrap_or(SimTime::ZERO))
}

#[test]
fn a_pipelined_flush_makes_writes_wait_for_their_room_not_the_whole_flush() {
    let mut cfg = small_config();
    cfg.device.capacity = 128 * MIB;
    cfg.write_buffer.capacity = 4 * MIB;
    let (batch, batch_end) = sequential_qd8(&mut SsdDevice::new(cfg.clone()), 64 * MIB);
    cfg.ftl.flush_pipelined = true;
    let (piped, piped_end) = sequential_qd8(&mut SsdDevice::new(cfg), 64 * MIB);
    let max = |l: &[u64]| *l.iter().max().expect("writes");
    // The whole-buffer flush holds a write for the time 4 MiB takes to program; pipelined, a write waits for
    // one 128 KiB request's room.
    assert!(max(&piped) * 4 < max(&batch), "longest write {} ns pipelined, {} ns batched", max(&piped), max(&batch));
    // The NAND does the same work either way: the run takes as long within 10 %.
    let (a, b) = (batch_end.0 as f64, piped_end.0 as f64);
    assert!((b - a).abs() / a < 0.10, "run {a} ns batched, {b} ns pipelined");
    // Steady: no 10 ms window of the pipelined run goes without a completed write.
    let mut done: Vec<u64> = Vec::new();
    let mut t = [0u64; 8];
    for (i, l) in piped.iter().enumerate() {
        t[i % 8] += l;
        done.push(t[i % 8]);
    }
    done.sort_unstable();
    let longest_gap = done.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    assert!(longest_gap < 10_000_000, "a {longest_gap} ns gap between completions");
}

#[test]
fn the_pipelined_flush_is_off_by_default_and_keeps_the_spikes() {
    let cfg = small_config();
    assert!(!cfg.ftl.flush_pipelined);
    let (lat, _) = sequential_qd8(&mut SsdDevice::new(cfg), 8 * MIB);
    // Every 512 KiB buffer-full, one write waits for the whole flush (what P8 probes).
    let spikes = lat.iter().filter(|&&l| l > 1_000_000).count();
    assert!(spikes >= 8, "{spikes} spikes in {lat:?}");
}

#[test]
fn the_pipelined_flush_waits_for_the_slc_cliff() {
    // While the SLC cache lasts the buffer flushes whole (its spike is what P8 and P10 probe); after the
    // cliff, writes wait for their room only.
    let mut cfg = small_config();
    cfg.device.capacity = 128 * MIB;
    cfg.write_buffer.capacity = 4 * MIB;
    cfg.slc_cache.capacity = 16 * MIB;
    cfg.ftl.flush_pipelined = true;
    let (lat, _) = sequential_qd8(&mut SsdDevice::new(cfg), 64 * MIB);
    let per_mib = 8; // 128 KiB writes
    let spread = |l: &[u64]| {
        let mut l = l.to_vec();
        l.sort_unstable();
        l[l.len() - 1] as f64 / l[l.len() / 2] as f64
    };
    // In SLC: most writes wait for nothing, one in 32 for a whole 4 MiB flush.
    let before = spread(&lat[..12 * per_mib]);
    // After the cliff: every write waits about as long (buffer plus queue over the native rate), none longer.
    let after = spread(&lat[32 * per_mib..]);
    assert!(before > 10.0 && after < 1.5, "longest over median write: {before:.1} in SLC, {after:.2} after the cliff");
}

/// QD 1 writes of `len` at `offsets`; returns the mean latency in ns.
fn qd1_mean(dev: &mut SsdDevice, offsets: &[u64], len: u64) -> f64 {
    let mut now = SimTime::ZERO;
    let mut total = 0u64;
    for (i, &o) in offsets.iter().enumerate() {
        let done = dev.submit(now, &write(o, len, i as u32));
        total += (done - now).0;
        now = done;
    }
    total as f64 / offsets.len() as f64
}

#[test]
fn random_writes_on_a_dram_less_drive_pay_translation_reads_and_write_backs() {
    let mut cfg = small_config();
    cfg.device.capacity = 64 * MIB;
    cfg.ftl.mapping_cache = MappingCacheConfig::Bytes(2 * 4096); // two regions of 4 MiB each
    let map_read = cfg.ftl.map_miss_latency.0 as f64;
    // 512 B writes, each in another 4 MiB region than the last (a random fill over the whole drive).
    let offsets: Vec<u64> = (0..400u64).map(|i| ((i * 7) % 16) * 4 * MIB + (i * 4096) % (4 * MIB)).collect();
    let mut plain = SsdDevice::new(cfg.clone());
    let before = qd1_mean(&mut plain, &offsets, 512);
    cfg.ftl.write_map_lookup = true;
    let mut looked_up = SsdDevice::new(cfg.clone());
    let after = qd1_mean(&mut looked_up, &offsets, 512);
    let program_l = cfg.nand.program_latency.l.0 as f64;
    assert!(after > before + map_read + 0.8 * program_l, "{after:.0} ns with lookups, {before:.0} ns without");
    // The translation pages written back count as NAND writes (write amplification above the data's).
    let (p, l) = (plain.counters(SimTime::ZERO), looked_up.counters(SimTime::ZERO));
    assert!(
        l.media_bytes_written >= p.media_bytes_written + 300 * 4096,
        "{} vs {}",
        l.media_bytes_written,
        p.media_bytes_written
    );
    // Writes inside the cached regions cost nothing extra.
    let local: Vec<u64> = (0..400u64).map(|i| (i * 4096) % (4 * MIB)).collect();
    let near = qd1_mean(&mut SsdDevice::new(cfg.clone()), &local, 4096);
    cfg.ftl.write_map_lookup = false;
    let near_plain = qd1_mean(&mut SsdDevice::new(cfg), &local, 4096);
    assert!(near < near_plain + map_read / 50.0, "{near:.0} ns vs {near_plain:.0} ns within one region");
}

/// Random 4 KiB overwrites at QD 32 from `start`; returns when the last completes.
fn random_burst(dev: &mut SsdDevice, rng: &mut rand::rngs::SmallRng, start: SimTime, n: u64) -> SimTime {
    use rand::Rng;
    let pages = dev.capacity_bytes() / 4096;
    let mut slots = [start; 32];
    for i in 0..n {
        let slot = (i % 32) as usize;
        let lpn = rng.random_range(0..pages);
        slots[slot] = dev.submit(slots[slot], &write(lpn * 4096, 4096, i as u32));
    }
    slots.into_iter().max().unwrap_or(start)
}

fn gc_device(idle_gc: bool) -> (SsdDevice, SimTime) {
    use rand::SeedableRng;
    let mut cfg = small_config();
    cfg.device.capacity = 32 * MIB;
    cfg.ftl.flush_pipelined = true;
    if idle_gc {
        cfg.ftl.gc_idle_after = Some(Nanos(50_000_000));
        cfg.ftl.gc_idle_free = 0.3;
    }
    let mut dev = SsdDevice::new(cfg);
    let pages = dev.capacity_bytes() / 4096;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
    // Fill, then overwrite at random until GC runs in the foreground.
    let t = random_burst(&mut dev, &mut rng, SimTime::ZERO, pages * 3);
    (dev, t)
}

#[test]
fn idle_time_gc_frees_blocks_that_a_later_burst_uses() {
    use rand::SeedableRng;
    let idle = Nanos(5_000_000_000);
    let mut results = Vec::new();
    for idle_gc in [false, true] {
        let (mut dev, t) = gc_device(idle_gc);
        let erases_before = dev.counters(t).erase_count;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        // A burst after a long idle gap: the idle time is accounted when it arrives.
        let start = t + idle;
        let end = random_burst(&mut dev, &mut rng, start, 1500);
        let c = dev.counters(end);
        results.push(((end - start).0, c.erase_count - erases_before));
    }
    let ((plain_time, plain_erases), (idle_time, idle_erases)) = (results[0], results[1]);
    assert!(idle_erases > plain_erases, "erases {idle_erases} with idle GC, {plain_erases} without");
    assert!(
        (idle_time as f64) < 0.8 * plain_time as f64,
        "the burst took {idle_time} ns after idle GC, {plain_time} ns without"
    );
}

#[test]
fn idle_gc_stays_idle_while_the_host_keeps_the_drive_busy() {
    // Back-to-back bursts with no gap longer than gc_idle_after: identical completion times with and without.
    let (mut a, ta) = gc_device(false);
    let (mut b, tb) = gc_device(true);
    assert_eq!(ta, tb, "the run never idled for 50 ms");
    assert_eq!(a.counters(ta).erase_count, b.counters(tb).erase_count);
    let ra = a.submit(ta + Nanos(10_000_000), &write(0, 4096, 1));
    let rb = b.submit(tb + Nanos(10_000_000), &write(0, 4096, 1));
    assert_eq!(ra, rb);
}
