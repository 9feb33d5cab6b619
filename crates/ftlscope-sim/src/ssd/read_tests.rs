//! The read side and the controller: sense groups (physical pages, multi-plane reads), the page register,
//! program suspend, command processors and the host link limits. Simulated time only, stated bounds.

use super::*;

/// The small device with one read time for every page type, 16 KiB chunks (four 4 KiB pages on a unit in a
/// row) and a fast bus, so a read's latency is mostly its senses.
pub(super) fn grouped(physical_page: u64, multi_plane: u32) -> DeviceConfig {
    let mut cfg = small_config();
    cfg.nand.read_latency = PerType { l: us(50), m: us(50), h: us(50) };
    cfg.nand.channel_rate = Rate(4e9);
    cfg.mapping.chunk_size = 16 * KIB;
    cfg.nand.physical_page = physical_page;
    cfg.nand.multi_plane = multi_plane;
    cfg
}

/// Latency of one read of `len` bytes at offset 0 on a sequentially filled device, and the NAND bytes it read.
fn one_read(cfg: DeviceConfig, offset: u64, len: u64) -> (u64, u64) {
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let before = dev.counters(t).media_bytes_read;
    let done = dev.submit(t, &req(SimOp::Read, offset, len));
    ((done - t).0, dev.counters(done).media_bytes_read - before)
}

#[test]
fn a_16k_read_on_16k_nand_pages_costs_one_sense() {
    let (four_senses, bytes_4k) = one_read(grouped(4 * KIB, 1), 0, 16 * KIB);
    let (one_sense, bytes_16k) = one_read(grouped(16 * KIB, 1), 0, 16 * KIB);
    assert!(four_senses >= 4 * 50_000, "4 KiB NAND pages: four senses in series, {four_senses} ns");
    assert!(one_sense < 50_000 + 20_000, "16 KiB NAND pages: one sense and four transfers, {one_sense} ns");
    assert_eq!(bytes_4k, bytes_16k, "the same mapping pages cross the bus either way");
}

#[test]
fn a_multi_plane_read_senses_consecutive_pages_of_a_unit_at_once() {
    let (plain, _) = one_read(grouped(4 * KIB, 1), 0, 16 * KIB);
    let (two_planes, _) = one_read(grouped(4 * KIB, 2), 0, 16 * KIB);
    let (sixteen_k, _) = one_read(grouped(16 * KIB, 1), 0, 16 * KIB);
    let (both, _) = one_read(grouped(8 * KIB, 2), 0, 16 * KIB);
    assert!(two_planes < plain * 6 / 10, "two pages a sense: two senses, {two_planes} against {plain}");
    assert_eq!(both, sixteen_k, "8 KiB pages x 2 planes sense as much as one 16 KiB page");
}

#[test]
fn a_sense_group_never_joins_pages_of_two_requests_without_cache_read() {
    let cfg = grouped(16 * KIB, 1);
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let first = dev.submit(t, &req(SimOp::Read, 0, 4 * KIB)) - t;
    let t2 = t + ms(1);
    let second = dev.submit(t2, &req(SimOp::Read, 4 * KIB, 4 * KIB)) - t2;
    assert_eq!(first, second, "each request senses the page again");
}

#[test]
fn register_hits_serve_the_rest_of_a_sensed_page_from_the_register() {
    let mut cfg = grouped(16 * KIB, 1);
    cfg.nand.register_hits = true;
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let first = dev.submit(t, &req(SimOp::Read, 0, 4 * KIB)) - t;
    let t2 = t + ms(1);
    let second = dev.submit(t2, &req(SimOp::Read, 4 * KIB, 4 * KIB)) - t2;
    assert!(first.0 >= 50_000, "{first:?}");
    assert!(second.0 < 20_000, "the page is still in the register: transfer only, {second:?}");
    // Reads submitted together with the first: they wait for its sense, not for a sense of their own.
    let t3 = t2 + ms(1);
    let a = dev.submit(t3, &req(SimOp::Read, 16 * KIB, 4 * KIB)) - t3;
    let b = dev.submit(t3, &req(SimOp::Read, 20 * KIB, 4 * KIB)) - t3;
    assert!(a.0 >= 50_000 && b.0 >= 50_000 && b.0 < a.0 + 20_000, "{a:?} {b:?}");
    // A program on the unit replaces the register's contents: one 16 KiB chunk programmed on every unit.
    let t4 = t3 + ms(1);
    let hit = dev.submit(t4, &req(SimOp::Read, 8 * KIB, 4 * KIB)) - t4;
    assert!(hit.0 < 20_000, "{hit:?}");
    let t5 = t4 + ms(1);
    dev.submit(t5, &req(SimOp::Write, MIB, 128 * KIB));
    let flushed = dev.submit(t5, &req(SimOp::Flush, 0, 0)) + ms(10);
    let again = dev.submit(flushed, &req(SimOp::Read, 12 * KIB, 4 * KIB)) - flushed;
    assert!(again.0 >= 50_000, "sensed again after the program, {again:?}");
}

/// A device whose units are busy programming from `t` on: a buffer-sized burst of writes flushed at once.
fn programming(suspend: bool) -> (SsdDevice, SimTime) {
    let mut cfg = grouped(4 * KIB, 1);
    cfg.nand.program_suspend = suspend;
    cfg.nand.suspend_latency = us(20);
    cfg.write_buffer.idle_flush_window = None;
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let flushed = dev.submit(t, &req(SimOp::Flush, 0, 0));
    let t = flushed + ms(100);
    let (_, t) = qd1(&mut dev, t, (0..64).map(|i| req(SimOp::Write, 1024 * KIB + i * 16 * KIB, 16 * KIB)));
    dev.submit(t, &req(SimOp::Flush, 0, 0));
    (dev, t + us(10))
}

#[test]
fn program_suspend_lets_a_read_go_before_the_programs_on_its_unit() {
    let (mut waits, t) = programming(false);
    let waited = waits.submit(t, &req(SimOp::Read, 0, 4 * KIB)) - t;
    let (mut suspends, t) = programming(true);
    let suspended = suspends.submit(t, &req(SimOp::Read, 0, 4 * KIB)) - t;
    assert!(waited.0 > 1_000_000, "without suspend the read queues behind the flush: {waited:?}");
    assert!(suspended.0 < 20_000 + 50_000 + 20_000, "suspend: 20 us + a sense + transfers, {suspended:?}");
    assert!(suspended.0 >= 20_000 + 50_000, "{suspended:?}");
}

#[test]
fn a_suspending_read_pushes_the_programs_back() {
    let (mut dev, t) = programming(true);
    let idle_before = dev.flash.all_idle_at();
    for i in 0..16u64 {
        dev.submit(t, &req(SimOp::Read, i * 16 * KIB, 4 * KIB));
    }
    assert!(dev.flash.all_idle_at() > idle_before, "the suspended programs resume later");
}

#[test]
fn command_processors_cap_the_command_rate() {
    // Fast senses (5 us), so that 200 reads over 8 units are well under the cores' 1 ms without a core limit
    // (with 50 us senses the NAND alone takes 25 x 50 us: the comparison below could not hold).
    let fast = || {
        let mut cfg = grouped(4 * KIB, 1);
        cfg.nand.read_latency = PerType { l: us(5), m: us(5), h: us(5) };
        cfg
    };
    let mut cfg = fast();
    cfg.controller.cores = 2;
    cfg.controller.command_time = us(10);
    cfg.controller.read_command_time = us(10);
    let mut dev = SsdDevice::new(cfg.clone());
    let t = fill_sequentially(&mut dev) + ms(100);
    // 200 reads at once over every unit: two cores of 10 us each take 1 ms for them, whatever the NAND does.
    let last = (0..200u64).map(|i| dev.submit(t, &req(SimOp::Read, i * 16 * KIB, 4 * KIB))).max().unwrap();
    assert!((last - t).0 >= 1_000_000, "{:?}", last - t);
    let mut unlimited = SsdDevice::new(fast());
    let t = fill_sequentially(&mut unlimited) + ms(100);
    let free = (0..200u64).map(|i| unlimited.submit(t, &req(SimOp::Read, i * 16 * KIB, 4 * KIB))).max().unwrap();
    assert!((free - t).0 < (last - t).0 / 2, "unlimited {:?} against {:?}", free - t, last - t);
    // A lone command pays its processing time once.
    let t2 = last + ms(10);
    let lone = dev.submit(t2, &req(SimOp::Read, 0, 4 * KIB)) - t2;
    let t3 = free + ms(10);
    let lone_free = unlimited.submit(t3, &req(SimOp::Read, 0, 4 * KIB)) - t3;
    assert_eq!(lone.0, lone_free.0 + 10_000);
}

#[test]
fn reads_may_cost_the_command_processors_more_than_writes() {
    let mut cfg = grouped(4 * KIB, 1);
    cfg.controller.cores = 1;
    cfg.controller.command_time = Nanos(0);
    cfg.controller.read_command_time = us(10);
    cfg.write_buffer.capacity = 64 * MIB;
    let mut dev = SsdDevice::new(cfg.clone());
    let t = fill_sequentially(&mut dev) + ms(100);
    // 100 reads at once: one core at 10 us a read takes 1 ms for them.
    let last = (0..100u64).map(|i| dev.submit(t, &req(SimOp::Read, i * 16 * KIB, 4 * KIB))).max().unwrap();
    assert!((last - t).0 >= 1_000_000, "{:?}", last - t);
    // 100 buffered writes at once cost the core nothing: the same as without a core limit.
    let t = last + ms(100);
    let writes = (0..100u64).map(|i| dev.submit(t, &req(SimOp::Write, i * 4 * KIB, 4 * KIB))).max().unwrap() - t;
    cfg.controller.cores = 0;
    let mut free = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut free) + ms(100);
    let t = (0..100u64).map(|i| free.submit(t, &req(SimOp::Read, i * 16 * KIB, 4 * KIB))).max().unwrap() + ms(100);
    let free_writes = (0..100u64).map(|i| free.submit(t, &req(SimOp::Write, i * 4 * KIB, 4 * KIB))).max().unwrap() - t;
    assert_eq!(writes, free_writes);
}

#[test]
fn the_write_direction_has_its_own_host_rate_and_both_share_a_total() {
    let mut cfg = grouped(4 * KIB, 1);
    cfg.controller.host_write_rate = Rate(100e6);
    cfg.write_buffer.capacity = 64 * MIB;
    cfg.device.capacity = 256 * MIB;
    let mut dev = SsdDevice::new(cfg.clone());
    // 10 MB of writes at once: the link moves them at 100 MB/s, 100 ms.
    let last = (0..10u64).map(|i| dev.submit(SimTime::ZERO, &req(SimOp::Write, i * MIB, MIB))).max().unwrap();
    assert!(last.0 >= 104_857_600 && last.0 < 110_000_000, "{last:?}");
    // Reads keep host_rate (3.5 GB/s): 10 MiB of the written data well within the 105 ms the write rate
    // would take (the NAND reads bound them).
    let t = last + ms(1);
    let read = (0..10u64).map(|i| dev.submit(t, &req(SimOp::Read, i * MIB, MIB))).max().unwrap() - t;
    assert!(read.0 < 50_000_000, "{read:?}");
    // With a 1 GB/s total, 10 MiB of reads and 10 MiB of writes together take 21 ms at least.
    cfg.controller.host_write_rate = Rate(3.5e9);
    cfg.controller.host_total_rate = Rate(1e9);
    let mut dev = SsdDevice::new(cfg);
    let t = SimTime::ZERO;
    let w = (0..10u64).map(|i| dev.submit(t, &req(SimOp::Write, i * MIB, MIB))).max().unwrap();
    let r = (0..10u64).map(|i| dev.submit(t, &req(SimOp::Read, i * MIB, MIB))).max().unwrap();
    assert!(w.max(r).0 >= 20_971_520, "{w:?} {r:?}");
}

#[test]
fn the_read_side_keys_left_out_change_nothing() {
    let cfg = small_config();
    assert_eq!(cfg.nand.sense_pages(cfg.geometry.page_size), 1);
    let dev = SsdDevice::new(cfg);
    assert!(!dev.grouped_reads && dev.cores.is_empty());
}

#[test]
fn a_physical_page_that_is_not_whole_mapping_pages_is_refused_with_the_key_named() {
    let base = "[device]\ncapacity = \"1GiB\"\n[geometry]\npage_size = \"4KiB\"\n";
    let err = crate::parse::parse_device(&format!("{base}[nand]\nphysical_page = \"6KiB\"\n")).unwrap_err();
    assert!(err.to_string().contains("physical_page 6KiB is not a multiple of [geometry] page_size 4KiB"), "{err}");
    let err = crate::parse::parse_device(&format!("{base}[nand]\nmulti_plane = 0\n")).unwrap_err();
    assert!(err.to_string().contains("multi_plane = 0 must be between 1 and 16"), "{err}");
    let err = crate::parse::parse_device(&format!("{base}[controller]\nhost_write_rate = \"0MB/s\"\n")).unwrap_err();
    assert!(err.to_string().contains("host_write_rate"), "{err}");
    let cfg = crate::parse::parse_device(base).unwrap();
    assert_eq!((cfg.nand.physical_page, cfg.controller.host_write_rate), (4 * KIB, cfg.controller.host_rate));
}

#[test]
fn cache_read_senses_the_next_page_while_the_last_crosses_a_slow_bus() {
    // A slow bus (4 KiB in ~41 us) and 50 us senses: 32 pages of one unit (different sense groups).
    let run = |cache_read: bool| {
        let mut cfg = grouped(4 * KIB, 1);
        cfg.nand.channel_rate = Rate(100e6);
        cfg.nand.cache_read = cache_read;
        let mut dev = SsdDevice::new(cfg);
        let t = fill_sequentially(&mut dev) + ms(100);
        let stripe = 16 * KIB * 8;
        (0..32u64).map(|i| dev.submit(t, &req(SimOp::Read, i * stripe, 4 * KIB))).max().unwrap() - t
    };
    let (serial, overlapped) = (run(false), run(true));
    assert!(serial.0 >= 32 * (50_000 + 40_000), "sense then transfer, page after page: {serial:?}");
    assert!(overlapped.0 < 32 * 52_000, "senses overlap the transfers: {overlapped:?}");
}

#[test]
fn writes_take_their_own_command_time_on_the_shared_processors() {
    let mut cfg = grouped(4 * KIB, 1);
    cfg.controller.cores = 1;
    cfg.controller.command_time = us(2);
    cfg.controller.write_command_time = us(20);
    cfg.write_buffer.capacity = 64 * MIB;
    let mut dev = SsdDevice::new(cfg);
    // 50 writes at once on one processor of 20 us a write: the last is admitted after 1 ms.
    let last = (0..50u64).map(|i| dev.submit(SimTime::ZERO, &req(SimOp::Write, i * 4 * KIB, 4 * KIB))).max().unwrap();
    assert!(last.0 >= 1_000_000 && last.0 < 1_100_000, "{last:?}");
    // A read arriving then waits for the writes on the processor, then pays its own 2 us.
    let t = SimTime(10_000);
    let mut fresh = SsdDevice::new(dev.cfg.clone());
    let alone = fresh.submit(t, &req(SimOp::Read, 0, 4 * KIB)) - t;
    let behind = dev.submit(t, &req(SimOp::Read, 0, 4 * KIB)) - t;
    assert!(behind.0 >= alone.0 + 900_000, "the read queues behind the writes: {behind:?} against {alone:?}");
}

#[test]
fn each_sense_a_read_needs_costs_processor_time_and_register_hits_cost_none() {
    let run = |register_hits: bool, sense_time: u64| {
        let mut cfg = grouped(16 * KIB, 1);
        cfg.nand.register_hits = register_hits;
        cfg.controller.cores = 1;
        cfg.controller.command_time = us(1);
        cfg.controller.read_command_time = us(1); // (parsing makes it command_time; a built config says so)
        cfg.controller.sense_command_time = us(sense_time);
        let mut dev = SsdDevice::new(cfg);
        let t = fill_sequentially(&mut dev) + ms(100);
        // 64 sequential 4 KiB reads at once: 16 physical pages of four mapping pages each.
        (0..64u64).map(|i| dev.submit(t, &req(SimOp::Read, i * 4 * KIB, 4 * KIB))).max().unwrap() - t
    };
    let (plain, with_senses, hits) = (run(false, 0), run(false, 20), run(true, 20));
    // Every request senses its page again without register hits: 64 x (1 + 20) us on the one processor.
    assert!(with_senses.0 >= 64 * 21_000, "{with_senses:?}");
    assert!(plain.0 < with_senses.0 / 2, "{plain:?} against {with_senses:?}");
    // With register hits only the first read of each page senses: 16 x 20 us + 64 x 1 us, well under.
    assert!(hits.0 < with_senses.0 / 2, "{hits:?} against {with_senses:?}");
    assert!(hits.0 >= 16 * 20_000 + 64 * 1_000, "{hits:?}");
}

#[test]
fn the_dram_less_controller_keys_default_to_the_model_without_them() {
    let base = "[device]\ncapacity = \"1GiB\"\n[controller]\ncores = 2\ncommand_time = \"7us\"\n";
    let cfg = crate::parse::parse_device(base).unwrap();
    assert_eq!(cfg.controller.write_command_time, us(7), "a write takes command_time unless told");
    assert_eq!(cfg.controller.sense_command_time, Nanos(0));
    let err = crate::parse::parse_device(&format!("{base}sense_command_time = \"-1us\"\n")).unwrap_err();
    assert!(err.to_string().contains("sense_command_time"), "{err}");
}

/// When a program booked on unit `channels` (the same channel as unit 0) after ten suspending reads on unit 0
/// is durable, with host reads on a bus of their own or sharing it (`read_bus_shared`). A slow bus (4 KiB in
/// ~41 us) and 1 us senses make the reads' transfers fill the bus nearly back to back.
fn program_after_reads(shared: bool) -> (SimTime, SimTime) {
    let mut cfg = small_config();
    cfg.nand.program_suspend = true;
    cfg.nand.read_bus_shared = shared;
    cfg.nand.channel_rate = Rate(100e6);
    cfg.nand.read_latency = PerType { l: us(1), m: us(1), h: us(1) };
    let same_channel = cfg.geometry.channels;
    let mut flash = crate::ssd::flash::Flash::new(&cfg);
    let mut reads_done = SimTime::ZERO;
    for group in 0..10 {
        let sensed = flash.sense(0, PageType::L, group, SimTime::ZERO);
        reads_done = reads_done.max(flash.transfer(0, sensed));
    }
    (reads_done, flash.program(same_channel, PageType::L, SimTime::ZERO))
}

#[test]
fn reads_sharing_the_bus_go_first_and_later_programs_wait_for_their_transfers() {
    let (reads_own, program_own) = program_after_reads(false);
    let (reads_shared, program_shared) = program_after_reads(true);
    assert_eq!(reads_own, reads_shared, "the reads go first either way");
    let transfer = Rate(100e6).time_for(4 * KIB).0;
    // On a bus of their own the reads leave the program's transfer where it would be alone; shared, the
    // program's transfer waits for the ten reads' transfers.
    assert!(program_own.0 < 2 * transfer + 1_000_000, "{program_own:?}");
    assert!(program_shared.0 >= program_own.0 + 9 * transfer, "{program_shared:?} against {program_own:?}");
}

/// When a host read of unit 0, sensed at once, has crossed the bus after a flush booked two L-page programs
/// on unit `channels` (the same channel) at time 0, with `read_bus_wait` = `wait`, and the program's transfer.
/// A slow bus (4 KiB in ~41 us) and 1 us senses.
fn read_after_programs(wait: Nanos) -> (SimTime, Nanos) {
    let mut cfg = small_config();
    cfg.nand.program_suspend = true;
    cfg.nand.read_bus_shared = true;
    cfg.nand.read_bus_wait = wait;
    cfg.nand.suspend_latency = Nanos(0);
    cfg.nand.channel_rate = Rate(100e6);
    cfg.nand.read_latency = PerType { l: us(1), m: us(1), h: us(1) };
    let transfer = cfg.nand.channel_rate.time_for(cfg.geometry.page_size);
    let same_channel = cfg.geometry.channels;
    let mut flash = crate::ssd::flash::Flash::new(&cfg);
    // The first page's transfer is booked from 0, the second's after the first page is programmed (300 us).
    flash.program(same_channel, PageType::L, SimTime::ZERO);
    flash.program(same_channel, PageType::L, SimTime::ZERO);
    let sensed = flash.sense(0, PageType::L, 0, SimTime::ZERO);
    (flash.transfer(0, sensed), transfer)
}

#[test]
fn a_read_waits_on_the_bus_for_program_transfers_booked_before_it_up_to_read_bus_wait() {
    let (first, transfer) = read_after_programs(Nanos(0));
    assert_eq!(first, SimTime(us(1).0 + transfer.0), "without the key the read's transfer goes first");
    // In order: the read's transfer follows the first program's (the second's comes 300 us later).
    let (in_order, _) = read_after_programs(us(100));
    assert_eq!(in_order, SimTime(2 * transfer.0), "within the wait the read takes the bus after the program's data");
    // The bus is booked further ahead than the wait: the read waits that long, then goes first.
    let (capped, _) = read_after_programs(us(10));
    assert_eq!(capped, SimTime(us(1).0 + us(10).0 + transfer.0), "past the wait the read goes first");
}
