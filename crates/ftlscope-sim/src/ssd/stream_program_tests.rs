//! Keys fitted to the PM981 of "SSD Performance Profiling" (issue 15): page-register hits for sequential
//! streams only, whole-page programs, the pipelined flush before the SLC cliff and the limit on program
//! suspends. Each compares the key on against the same device without it, on the simulated clock.

use super::*;

#[test]
fn stream_register_hits_serve_a_sequential_stream_but_not_a_jump_back() {
    let mut cfg = paged_config();
    cfg.nand.stream_register_hits = true;
    // 0, 4, 8 KiB: a stream (the page sensed by the first serves the next two); then 4 KiB again, which is in
    // the register too but does not continue the stream.
    let lat = reads_after_sequential_fill(cfg, &[0, 4 * KIB, 8 * KIB, 4 * KIB]);
    assert!(lat[0] >= 50_000, "{lat:?}");
    assert!(lat[1] < 20_000 && lat[2] < 20_000, "the stream's next pages come from the register: {lat:?}");
    assert!(lat[3] >= 50_000, "a read that does not continue the stream senses again: {lat:?}");
    // The same reads without the key all sense.
    let plain = reads_after_sequential_fill(paged_config(), &[0, 4 * KIB, 8 * KIB, 4 * KIB]);
    assert!(plain.iter().all(|&l| l >= 50_000), "{plain:?}");
}

/// 4 MiB of 4 KiB writes at QD 1 (a buffer flush in between), then a flush; returns when the last is durable.
fn program_4mib(cfg: DeviceConfig) -> (u64, u64) {
    let mut dev = SsdDevice::new(cfg);
    let (_, t) = qd1(&mut dev, SimTime::ZERO, (0..1024u64).map(|i| req(SimOp::Write, i * 4 * KIB, 4 * KIB)));
    let done = dev.submit(t, &req(SimOp::Flush, 0, 0));
    (done.0, dev.counters(done).media_bytes_written)
}

#[test]
fn whole_page_programs_write_the_mapping_pages_of_a_physical_page_at_once() {
    let mut cfg = paged_config();
    cfg.write_buffer.idle_flush_window = None;
    let (paged_ns, pages) = program_4mib(cfg.clone());
    cfg.nand.program_whole_page = true;
    let (whole_ns, whole_pages) = program_4mib(cfg);
    // Four 4 KiB pages a program: the flushes take about a quarter of the time (the bus and the buffer's
    // inserts stay), and the same mapping pages are counted as programmed.
    assert_eq!(pages, whole_pages);
    assert!(whole_ns * 2 < paged_ns, "whole pages {whole_ns} ns, page by page {paged_ns} ns");
}

/// Sequential 128 KiB writes at QD 8 over 32 MiB into a 4 MiB buffer and a 64 MiB SLC cache: each latency.
fn write_latencies(pipelined_slc: bool) -> Vec<u64> {
    qd8_sequential_writes(&mut SsdDevice::new(pipelined_flush_config(pipelined_slc)), SimTime::ZERO, None)
}

#[test]
fn the_flush_is_pipelined_before_the_slc_cliff_after_the_first_fill_with_flush_pipelined_slc() {
    let whole = write_latencies(false);
    let piped = write_latencies(true);
    let longest = |l: &[u64]| *l.iter().max().expect("writes");
    // The first fill (4 MiB: 32 writes) waits for a whole flush either way: the spike P8 looks for.
    assert_eq!(longest(&whole[..40]), longest(&piped[..40]));
    // After it, without the key every fill waits for a whole flush again; with it, a write waits for its room.
    let (w, p) = (longest(&whole[64..]), longest(&piped[64..]));
    assert!(p * 4 < w, "longest later write {p} ns with the key, {w} ns without");
}

/// `programming` of the read tests, with a limit on suspends: a buffer-sized burst flushed at once.
fn busy(limit: u32) -> (SsdDevice, SimTime) {
    let mut cfg = paged_config();
    cfg.nand.physical_page = 4 * KIB;
    cfg.nand.program_suspend = true;
    cfg.nand.suspend_latency = us(20);
    cfg.nand.suspend_limit = limit;
    cfg.write_buffer.idle_flush_window = None;
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let t = dev.submit(t, &req(SimOp::Flush, 0, 0)) + ms(100);
    let (_, t) = qd1(&mut dev, t, (0..64).map(|i| req(SimOp::Write, 1024 * KIB + i * 16 * KIB, 16 * KIB)));
    dev.submit(t, &req(SimOp::Flush, 0, 0));
    (dev, t + us(10))
}

#[test]
fn a_suspend_limit_makes_every_few_reads_wait_for_a_program() {
    // Reads of one unit (its 16 KiB chunks are 128 KiB apart), one after another while it programs.
    let offsets: Vec<u64> = (0..9u64).map(|i| i * 128 * KIB).collect();
    let run = |limit| {
        let (mut dev, t) = busy(limit);
        qd1(&mut dev, t, offsets.iter().map(|&o| req(SimOp::Read, o, 4 * KIB))).0
    };
    let unlimited = run(0);
    let limited = run(2);
    // Unlimited: every read suspends (20 us + a 50 us sense + transfer).
    assert!(unlimited.iter().all(|&l| l < 100_000), "{unlimited:?}");
    // Limit 2: the third read in a row waits for an L program (300 us in this device), then the count restarts.
    assert!(limited[0] < 100_000 && limited[1] < 100_000, "{limited:?}");
    assert!(limited[2] >= 300_000, "{limited:?}");
    assert!(limited[3] < 100_000 && limited[4] < 100_000 && limited[5] >= 300_000, "{limited:?}");
}
