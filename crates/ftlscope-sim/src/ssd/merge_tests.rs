//! Tests of `ftl.merge_partial_writes`: a write covering part of a mapping page reads the page's old data
//! from NAND first when (and only when) there is old data on NAND. Each compares a device with the key against
//! the same device without it, on the simulated clock.

use super::tests::small_config;
use super::*;

const KIB: u64 = 1 << 10;

fn write(offset: u64, len: u64) -> SimRequest {
    SimRequest { op: SimOp::Write, offset, len, fingerprint: 7 }
}

/// A device with or without the key, its first 1 MiB written in 4 KiB pages and flushed to NAND, idle 1 s.
fn written(merge: bool) -> (SsdDevice, SimTime) {
    let mut cfg = small_config();
    cfg.ftl.merge_partial_writes = merge;
    let mut dev = SsdDevice::new(cfg);
    let mut t = SimTime::ZERO;
    for page in 0..256 {
        t = dev.submit(t, &write(page * 4 * KIB, 4 * KIB));
    }
    t = dev.submit(t, &SimRequest { op: SimOp::Flush, offset: 0, len: 0, fingerprint: 0 });
    (dev, t + Nanos(1_000_000_000))
}

/// Latency of one write submitted to an idle device.
fn latency(dev: &mut SsdDevice, at: SimTime, req: &SimRequest) -> u64 {
    (dev.submit(at, req) - at).0
}

#[test]
fn a_partial_write_over_data_on_nand_waits_for_one_read_of_it() {
    let read = small_config().nand.read_latency.l.0; // the tests' pages: L and H; page 0 is an L page or H
    let (mut plain, t) = written(false);
    let (mut merging, _) = written(true);
    let base = latency(&mut plain, t, &write(512, 512));
    let merged = latency(&mut merging, t, &write(512, 512));
    assert!(merged >= base + read, "a 512 B write into a 4 KiB page on NAND: {merged} ns against {base} ns");
    // A read of a page: sense (50-90 us) and one 4 KiB transfer at 400 MB/s (~10 us).
    assert!(merged <= base + 120_000, "one read, not more: {merged} ns against {base} ns");
    // A write straddling two pages merges both ends, on their own dies, at once.
    let straddling = latency(&mut merging, t + Nanos(1_000_000), &write(3 * 4 * KIB + 2 * KIB, 4 * KIB));
    assert!(straddling >= base + read && straddling <= base + 120_000, "{straddling} ns");
    // The merge reads show in the counters.
    let c = merging.counters(t + Nanos(10_000_000));
    let p = plain.counters(t + Nanos(10_000_000));
    assert_eq!(c.media_bytes_read, p.media_bytes_read + 3 * 4 * KIB);
}

#[test]
fn whole_pages_unwritten_pages_and_buffered_pages_merge_without_a_read() {
    let (mut plain, t) = written(false);
    let (mut merging, _) = written(true);
    let cases = [
        write(8 * 4 * KIB, 4 * KIB),  // a whole page over data on NAND: nothing to merge
        write(4096 * KIB, 8 * KIB),   // whole pages never written
        write(5000 * KIB + 512, 512), // part of a page never written: merged with zeroes
    ];
    let mut at = t;
    for case in &cases {
        assert_eq!(latency(&mut merging, at, case), latency(&mut plain, at, case), "{:?}", case.offset);
        at += Nanos(10_000_000);
    }
    // A page still in the write buffer merges in RAM: write 512 B twice into one page on NAND, back to back.
    let first = latency(&mut merging, at, &write(20 * 4 * KIB, 512));
    let second = latency(&mut merging, at + Nanos(first), &write(20 * 4 * KIB + 512, 512));
    let plain_second = {
        latency(&mut plain, at, &write(20 * 4 * KIB, 512));
        latency(&mut plain, at + Nanos(first), &write(20 * 4 * KIB + 512, 512))
    };
    assert!(first > second, "the first merges from NAND ({first} ns), the second in the buffer ({second} ns)");
    assert_eq!(second, plain_second);
}
