//! Behaviour tests of the SSD model, driven directly (the engine-level tests live in the engine crate).

use super::*;
use crate::config::*;
use crate::time::{Nanos, Rate};

fn us(n: u64) -> Nanos {
    Nanos(n * 1_000)
}

fn ms(n: u64) -> Nanos {
    Nanos(n * 1_000_000)
}

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

/// A small MLC device: 8 units (4 channels x 2 chips), 4 KiB pages, 2-page chunks, 64-page blocks.
pub(crate) fn small_config() -> DeviceConfig {
    DeviceConfig {
        device: DeviceSection {
            name: "test-small".into(),
            kind: DeviceKind::Ssd,
            capacity: 64 * MIB,
            logical_block: 512,
            over_provisioning: 0.15,
            seed: 1,
            description: String::new(),
        },
        geometry: Geometry {
            channels: 4,
            chips_per_channel: 2,
            planes_per_chip: 1,
            page_size: 4 * KIB,
            pages_per_block: 64,
        },
        mapping: Mapping { chunk_size: 8 * KIB, stripe_width: 8, channel_groups: 0 },
        nand: Nand {
            cell: Cell::Mlc,
            page_pattern: PagePattern {
                text: "1L 1H".into(),
                segments: vec![PatternSegment { pages: None, cycle: vec![PageType::L, PageType::H] }],
            },
            read_latency: PerType { l: us(50), m: us(70), h: us(90) },
            program_latency: PerType { l: us(300), m: us(900), h: us(1500) },
            erase_latency: ms(3),
            channel_rate: Rate(400e6),
            physical_page: 4 * KIB,
            multi_plane: 1,
            cache_read: false,
            register_hits: false,
            stream_register_hits: false,
            stream_queued: false,
            program_whole_page: false,
            program_suspend: false,
            suspend_latency: us(20),
            suspend_limit: 0,
            read_bus_shared: false,
            register_hold: Nanos(0),
            read_bus_wait: Nanos(0),
        },
        read_buffer: crate::config::ReadBuffer { capacity: 0 },
        write_buffer: WriteBuffer {
            capacity: 512 * KIB,
            capacity_ios: 0,
            partial_flush: 0,
            parallelism: 2,
            idle_flush_window: Some(ms(10)),
            serialize_when_idle: false,
            soft_flush: false,
            drain_while_reading: false,
            second_level: 0,
            second_level_idle_flush_window: None,
            second_level_rate: Rate(2e9),
            second_level_capacity_ios: 0,
            drain_in_gap: false,
        },
        slc_cache: SlcCache {
            capacity: 0,
            fold_rate: Rate(0.0),
            fold_while_writing: 0.0,
            fold_above: 0.0,
            fold_by_valid: false,
            fold_batch: 0,
        },
        ftl: crate::config::Ftl {
            mapping_cache: MappingCacheConfig::Full,
            map_miss_latency: us(50),
            gc: GcPolicy::Greedy,
            gc_free_block_threshold: 0.05,
            flush_pipelined: false,
            flush_pipelined_slc: false,
            flush_pipelined_writes_only: false,
            write_map_lookup: false,
            map_program_latency: Nanos(0),
            merge_partial_writes: false,
            gc_idle_after: None,
            gc_idle_free: 0.0,
        },
        quirks: Quirks { unaligned_size_penalty: Nanos(0), read_size_penalties: vec![], low_load_penalty: Nanos(0) },
        controller: Controller {
            command_overhead: us(5),
            host_rate: Rate(3.5e9),
            buffer_insert_latency: us(10),
            ram_read_latency: us(3),
            cores: 0,
            command_time: Nanos(0),
            write_command_time: Nanos(0),
            sense_command_time: Nanos(0),
            read_command_time: Nanos(0),
            host_write_rate: Rate(3.5e9),
            host_total_rate: Rate(0.0),
            host_segment_time: Nanos(0),
            host_link_gaps: 8,
            command_slots: 0,
        },
        hdd: None,
        noise: None,
        thermal: None,
        faults: None,
    }
}

fn req(op: SimOp, offset: u64, len: u64) -> SimRequest {
    SimRequest { op, offset, len, fingerprint: (offset / 4096) as u32 ^ 0xabc }
}

/// Submit requests one at a time, each when the previous completes; returns each latency.
fn qd1(dev: &mut SsdDevice, start: SimTime, reqs: impl IntoIterator<Item = SimRequest>) -> (Vec<u64>, SimTime) {
    let mut now = start;
    let mut lat = Vec::new();
    for r in reqs {
        let done = dev.submit(now, &r);
        lat.push((done - now).0);
        // A lost command (faults) never completes: the next one goes at once rather than at SimTime::NEVER.
        if done != SimTime::NEVER {
            now = done;
        }
    }
    (lat, now)
}

/// The device of the pipelined-flush tests (stream_program_tests.rs, writes_only_tests.rs): 128 MiB, a 4 MiB
/// buffer and a 64 MiB SLC cache, `flush_pipelined` on, `flush_pipelined_slc` as given.
fn pipelined_flush_config(pipelined_slc: bool) -> DeviceConfig {
    let mut cfg = small_config();
    cfg.device.capacity = 128 * MIB;
    cfg.write_buffer.capacity = 4 * MIB;
    cfg.slc_cache.capacity = 64 * MIB;
    cfg.ftl.flush_pipelined = true;
    cfg.ftl.flush_pipelined_slc = pipelined_slc;
    cfg
}

/// Sequential 128 KiB writes at QD 8 over 32 MiB from `start`; with `read_from`, a 4 KiB read there (cycling
/// over 4 MiB) is submitted beside each write and must still be in progress when the write arrives. Each
/// write's latency.
fn qd8_sequential_writes(dev: &mut SsdDevice, start: SimTime, read_from: Option<u64>) -> Vec<u64> {
    let mut slots = [start; 8];
    let mut lat = Vec::new();
    for i in 0..256u64 {
        let now = slots[(i % 8) as usize];
        if let Some(base) = read_from {
            let read = dev.submit(now, &req(SimOp::Read, base + (i % 1024) * 4 * KIB, 4 * KIB));
            assert!(read > now, "the read is in progress when the write arrives");
        }
        let done = dev.submit(now, &req(SimOp::Write, i * 128 * KIB, 128 * KIB));
        lat.push((done - now).0);
        slots[(i % 8) as usize] = done;
    }
    lat
}

fn fill_sequentially(dev: &mut SsdDevice) -> SimTime {
    let cap = dev.capacity_bytes();
    let (_, t) = qd1(dev, SimTime::ZERO, (0..cap / (128 * KIB)).map(|i| req(SimOp::Write, i * 128 * KIB, 128 * KIB)));
    // Long idle so the buffer drains.
    dev.submit(t + ms(1000), &req(SimOp::Flush, 0, 0))
}

/// The small device with one read time for every page type, 16 KiB NAND pages and a fast bus (the register
/// and stream tests of stream_program_tests.rs and dramless_tests.rs).
fn paged_config() -> DeviceConfig {
    let mut cfg = small_config();
    cfg.nand.read_latency = PerType { l: us(50), m: us(50), h: us(50) };
    cfg.nand.channel_rate = Rate(4e9);
    cfg.mapping.chunk_size = 16 * KIB;
    cfg.nand.physical_page = 16 * KIB;
    cfg
}

/// Latencies of 4 KiB reads at `offsets`, one after another, on a sequentially filled device.
fn reads_after_sequential_fill(cfg: DeviceConfig, offsets: &[u64]) -> Vec<u64> {
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    qd1(&mut dev, t, offsets.iter().map(|&o| req(SimOp::Read, o, 4 * KIB))).0
}

#[test]
fn reads_of_unwritten_pages_do_not_touch_nand() {
    let mut dev = SsdDevice::new(small_config());
    let done = dev.submit(SimTime::ZERO, &req(SimOp::Read, 0, 4096));
    assert!(done.0 < 10_000, "{done:?}");
    assert_eq!(dev.counters(done).media_bytes_read, 0);
}

#[test]
fn a_read_straddling_a_page_boundary_costs_more_than_one_inside_a_page() {
    let mut dev = SsdDevice::new(small_config());
    let t = fill_sequentially(&mut dev) + ms(100);
    // Pages 0 and 1 are one chunk (same unit): a two-sector read across them reads two pages in series.
    let inside = dev.submit(t, &req(SimOp::Read, 1024, 1024)) - t;
    let t2 = t + ms(10);
    let across = dev.submit(t2, &req(SimOp::Read, 4096 - 512, 1024)) - t2;
    assert!(across.0 > inside.0 + 30_000, "inside {inside:?} across {across:?}");
}

#[test]
fn reads_a_stripe_apart_contend_and_reads_in_other_chunks_do_not() {
    let cfg = small_config();
    let chunk = cfg.mapping.chunk_size;
    let stripe = chunk * cfg.mapping.stripe_width as u64;
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let batch = |dev: &mut SsdDevice, at: SimTime, step: u64| {
        (0..4).map(|i| dev.submit(at, &req(SimOp::Read, i * step, 4096)) - at).max().unwrap()
    };
    let same_unit = batch(&mut dev, t, stripe);
    let different_units = batch(&mut dev, t + ms(10), chunk);
    assert!(same_unit.0 > 2 * different_units.0, "same unit {same_unit:?}, different {different_units:?}");
}

#[test]
fn a_write_spike_comes_every_buffer_capacity_and_idle_gaps_remove_it() {
    let cfg = small_config();
    let buffer = cfg.write_buffer.capacity;
    let window = cfg.write_buffer.idle_flush_window.unwrap();
    let mut dev = SsdDevice::new(cfg);
    let writes = (0..(4 * buffer / 4096)).map(|i| req(SimOp::Write, i * 4096, 4096));
    let (lat, t) = qd1(&mut dev, SimTime::ZERO, writes);
    let spikes: Vec<usize> = lat.iter().enumerate().filter(|(_, &l)| l > 1_000_000).map(|(i, _)| i).collect();
    let per_buffer = (buffer / 4096) as usize;
    assert_eq!(spikes.len(), 3, "{spikes:?}");
    for pair in spikes.windows(2) {
        assert_eq!(pair[1] - pair[0], per_buffer);
    }
    // Buffer-sized batches separated by a full idle window: no spikes at all.
    let mut now = t + window;
    for batch in 0..4u64 {
        let writes = (0..per_buffer as u64).map(|i| req(SimOp::Write, (batch * per_buffer as u64 + i) * 4096, 4096));
        let (lat, end) = qd1(&mut dev, now, writes);
        assert!(lat.iter().all(|&l| l < 1_000_000), "batch {batch}: max {}", lat.iter().max().unwrap());
        now = end + window;
    }
}

/// Sizes of the groups of latencies separated by jumps of more than `gap` ns.
fn clusters(lat: &[u64], gap: u64) -> Vec<usize> {
    let mut sizes = vec![1];
    for pair in lat.windows(2) {
        if pair[1] - pair[0] > gap {
            sizes.push(1);
        } else {
            *sizes.last_mut().unwrap() += 1;
        }
    }
    sizes
}

#[test]
fn write_parallelism_admits_that_many_writes_at_once() {
    let mut cfg = small_config();
    cfg.write_buffer.parallelism = 4;
    let insert = cfg.controller.buffer_insert_latency.0;
    let mut dev = SsdDevice::new(cfg.clone());
    let t = SimTime(1_000_000);
    // Writes arriving together still cross the host link one after the other (~1.2 us each at 4 KiB),
    // so the clusters are separated by the buffer insert time rather than identical.
    let lat: Vec<u64> = (0..8).map(|i| (dev.submit(t, &req(SimOp::Write, i * 4096, 4096)) - t).0).collect();
    assert_eq!(clusters(&lat, insert / 2), vec![4, 4], "{lat:?}");
    // The quirk: the same batch at an empty queue is served one by one.
    cfg.write_buffer.serialize_when_idle = true;
    let mut dev = SsdDevice::new(cfg);
    let lat: Vec<u64> = (0..8).map(|i| (dev.submit(t, &req(SimOp::Write, i * 4096, 4096)) - t).0).collect();
    assert_eq!(clusters(&lat, insert / 2), vec![1; 8], "{lat:?}");
}

#[test]
fn sequential_writes_slow_down_after_the_slc_cache_fills() {
    let mut cfg = small_config();
    cfg.device.capacity = 256 * MIB;
    cfg.slc_cache.capacity = 64 * MIB;
    let slc = cfg.slc_cache.capacity;
    let mut dev = SsdDevice::new(cfg);
    let size = 128 * KIB;
    let mut now = SimTime::ZERO;
    let mut rate_per_mib = Vec::new();
    let mut window_start = now;
    for i in 0..(160 * MIB / size) {
        now = dev.submit(now, &req(SimOp::Write, i * size, size));
        if ((i + 1) * size).is_multiple_of(4 * MIB) {
            rate_per_mib.push((4 * MIB) as f64 / (now - window_start).0 as f64);
            window_start = now;
        }
    }
    let fast = rate_per_mib[2];
    let cliff = rate_per_mib.iter().position(|&r| r < 0.6 * fast).expect("throughput falls") as u64 * 4 * MIB;
    let error = (cliff as f64 - slc as f64).abs() / slc as f64;
    assert!(error <= 0.05, "cliff at {} MiB, SLC {} MiB", cliff / MIB, slc / MIB);
    let slow = rate_per_mib[rate_per_mib.len() - 1];
    assert!(slow < 0.5 * fast, "native speed {slow:.3} vs SLC {fast:.3} B/ns");
}

#[test]
fn random_overwrites_run_gc_and_every_read_returns_the_last_write() {
    use rand::{Rng, SeedableRng};
    let mut cfg = small_config();
    cfg.device.capacity = 16 * MIB;
    let mut dev = SsdDevice::new(cfg);
    let pages = dev.capacity_bytes() / 4096;
    let mut expect = vec![PageContent::Unwritten; pages as usize];
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut now = SimTime::ZERO;
    for i in 0..(pages * 6) {
        let lpn = rng.random_range(0..pages);
        let roll = rng.random_range(0..100);
        let r = if roll < 85 {
            let fp = i as u32;
            expect[lpn as usize] = PageContent::Data(fp);
            SimRequest { op: SimOp::Write, offset: lpn * 4096, len: 4096, fingerprint: fp }
        } else if roll < 92 {
            expect[lpn as usize] = PageContent::Unwritten;
            req(SimOp::Trim, lpn * 4096, 4096)
        } else if roll < 95 {
            expect[lpn as usize] = PageContent::Zeroes;
            req(SimOp::WriteZeroes, lpn * 4096, 4096)
        } else {
            let got = dev.content(lpn);
            assert_eq!(got, expect[lpn as usize], "page {lpn} after {i} requests");
            req(SimOp::Read, lpn * 4096, 4096)
        };
        now = dev.submit(now, &r);
    }
    for lpn in 0..pages {
        assert_eq!(dev.content(lpn), expect[lpn as usize], "page {lpn}");
    }
    let c = dev.counters(now);
    let wa = c.media_bytes_written as f64 / c.host_bytes_written as f64;
    assert!(c.erase_count > 0, "GC ran");
    assert!(wa > 1.1, "write amplification {wa}");
}

#[test]
fn power_cycle_empties_caches_and_reset_keeps_them() {
    let mut cfg = small_config();
    cfg.read_buffer.capacity = MIB;
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(10);
    let first = dev.submit(t, &req(SimOp::Read, 0, 4096)) - t;
    let t = t + ms(10);
    let again = dev.submit(t, &req(SimOp::Read, 0, 4096)) - t;
    assert!(again.0 < first.0 / 2, "read buffer hit: {again:?} vs {first:?}");
    let t = dev.controller_reset(t + ms(10));
    let after_reset = dev.submit(t, &req(SimOp::Read, 0, 4096)) - t;
    assert_eq!(after_reset, again, "reset keeps the read buffer");
    let t = dev.power_cycle(t + ms(10));
    let after_power = dev.submit(t, &req(SimOp::Read, 0, 4096)) - t;
    assert!(after_power.0 > again.0 * 2, "power cycle clears it: {after_power:?}");
}

#[test]
fn a_mapping_cache_miss_costs_a_map_read() {
    let mut cfg = small_config();
    cfg.ftl.mapping_cache = MappingCacheConfig::Bytes(4096); // one region: 4 MiB of mapped data
    let miss = cfg.ftl.map_miss_latency;
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(10);
    let a = dev.submit(t, &req(SimOp::Read, 0, 4096)) - t; // loads region 0
    let t = t + ms(1);
    let hit = dev.submit(t, &req(SimOp::Read, 8192, 4096)) - t;
    let t = t + ms(1);
    let far = dev.submit(t, &req(SimOp::Read, 32 * MIB, 4096)) - t;
    assert!(a.0 >= hit.0 + miss.0 - 20_000, "{a:?} {hit:?}");
    assert!(far.0 >= hit.0 + miss.0 - 20_000, "{far:?} {hit:?}");
}

/// Latencies of `n` QD 1 writes of 4 KiB, sequential from 0, on a fresh device.
fn qd1_write_latencies(cfg: DeviceConfig, n: u64) -> Vec<u64> {
    let mut dev = SsdDevice::new(cfg);
    qd1(&mut dev, SimTime::ZERO, (0..n).map(|i| req(SimOp::Write, i * 4096, 4096))).0
}

fn spike_positions(lat: &[u64]) -> Vec<usize> {
    lat.iter().enumerate().filter(|(_, &l)| l > 500_000).map(|(i, _)| i).collect()
}

#[test]
fn a_partial_flush_empties_only_part_of_the_buffer() {
    let mut cfg = small_config();
    cfg.write_buffer.capacity = 512 * KIB;
    cfg.write_buffer.partial_flush = 128 * KIB;
    let spikes = spike_positions(&qd1_write_latencies(cfg, 512));
    // The first spike when the buffer is full (128 writes), then one every 32 writes (128 KiB freed).
    assert_eq!(spikes[0], 128, "{spikes:?}");
    assert!(spikes.windows(2).all(|p| p[1] - p[0] == 32), "{spikes:?}");
}

#[test]
fn an_io_count_trigger_flushes_after_that_many_writes() {
    let mut cfg = small_config();
    cfg.write_buffer.capacity = 4 * MIB;
    cfg.write_buffer.capacity_ios = 50;
    let spikes = spike_positions(&qd1_write_latencies(cfg, 200));
    assert_eq!(spikes, vec![50, 100, 150], "a flush every 50 writes of any size");
}

#[test]
fn a_second_level_buffer_gives_small_and_large_spikes() {
    let mut cfg = small_config();
    cfg.write_buffer.capacity = 128 * KIB;
    cfg.write_buffer.second_level = MIB;
    cfg.write_buffer.second_level_rate = Rate(500e6);
    let lat = qd1_write_latencies(cfg, 1024);
    let small: Vec<usize> =
        lat.iter().enumerate().filter(|(_, &l)| (200_000..2_000_000).contains(&l)).map(|(i, _)| i).collect();
    let large: Vec<usize> = lat.iter().enumerate().filter(|(_, &l)| l >= 2_000_000).map(|(i, _)| i).collect();
    assert!(small.len() >= 6, "first-level flushes every 32 writes: {small:?}");
    assert!(!large.is_empty() && large.len() <= 4, "second-level flushes every ~256 writes: {large:?}");
}

#[test]
fn page_types_alternate_in_write_order() {
    let cfg = small_config(); // "1L 1H", 2-page chunks: pages 0,1 of a block are L,H on one unit
    let (read_l, read_h) = (cfg.nand.read_latency.l.0, cfg.nand.read_latency.h.0);
    let mut dev = SsdDevice::new(cfg);
    let mut t = fill_sequentially(&mut dev);
    let mut lat = Vec::new();
    for page in 0..2u64 {
        t += ms(10);
        lat.push((dev.submit(t, &req(SimOp::Read, page * 4096, 4096)) - t).0);
    }
    assert_eq!(lat[1] - lat[0], read_h - read_l, "{lat:?}");
}

#[test]
fn channel_groups_make_other_channels_contend() {
    let mut cfg = small_config();
    cfg.nand.channel_rate = Rate(40e6); // slow buses so the transfer dominates
    let chunk = cfg.mapping.chunk_size;
    let batch = |cfg: DeviceConfig| {
        let mut dev = SsdDevice::new(cfg);
        let t = fill_sequentially(&mut dev) + ms(100);
        // Units 0 and 2 are on channels 0 and 2.
        (0..2).map(|i| dev.submit(t, &req(SimOp::Read, i * 2 * chunk, 4096)) - t).max().unwrap()
    };
    let independent = batch(cfg.clone());
    cfg.mapping.channel_groups = 2; // channels 0 and 2 share a group
    let grouped = batch(cfg);
    assert!(grouped.0 > independent.0 + 50_000, "{grouped:?} vs {independent:?}");
}

#[test]
fn a_lone_read_pays_the_low_load_penalty_and_size_penalties_apply() {
    let mut cfg = small_config();
    cfg.quirks.low_load_penalty = us(20);
    cfg.quirks.read_size_penalties = vec![SizePenalty { min: 17 * KIB, max: 20 * KIB, extra: us(50) }];
    cfg.quirks.unaligned_size_penalty = us(7);
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let lone = dev.submit(t, &req(SimOp::Read, 0, 4096)) - t;
    let t = t + ms(10);
    let _busy = dev.submit(t, &req(SimOp::Read, MIB + 8192, 4096)); // unit 1; page 0 is on unit 0
    let accompanied = dev.submit(t, &req(SimOp::Read, 0, 4096)) - t;
    assert_eq!(lone.0, accompanied.0 + 20_000, "lone {lone:?} vs busy {accompanied:?}");
    let t = t + ms(10);
    let plain = dev.submit(t, &req(SimOp::Read, 4 * MIB, 16 * KIB)) - t;
    let t = t + ms(10);
    let penalised = dev.submit(t, &req(SimOp::Read, 8 * MIB, 18 * KIB)) - t;
    assert!(penalised.0 >= plain.0 + 50_000 + 7_000 - 5_000, "{penalised:?} vs {plain:?}");
}

#[path = "noise_tests.rs"]
mod noise_tests;

#[path = "read_tests.rs"]
mod read_tests;

#[path = "stream_program_tests.rs"]
mod stream_program_tests;

#[path = "seq_read_tests.rs"]
mod seq_read_tests;

#[path = "dramless_tests.rs"]
mod dramless_tests;

#[path = "retry_tests.rs"]
mod retry_tests;

#[path = "hold_tests.rs"]
mod hold_tests;

#[path = "writes_only_tests.rs"]
mod writes_only_tests;
