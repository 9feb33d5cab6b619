//! `ftl.flush_pipelined_writes_only` (issue 15, the Kingston NV2 of "SSD Performance Report"): writes alone
//! pipeline the flush as `flush_pipelined_slc` does; a write that meets host reads in progress waits for a full
//! buffer's whole flush as without pipelining. Each compares the key on against the same device without it, on
//! the simulated clock.

use super::*;

/// Sequential 128 KiB writes at QD 8 over 32 MiB into a 4 MiB buffer and a 64 MiB SLC cache, pipelined before
/// the cliff; with `reads`, a 4 KiB read of data written before the stream is submitted beside each write.
/// Returns each write's latency.
fn write_latencies(writes_only: bool, pipelined_slc: bool, reads: bool) -> Vec<u64> {
    let mut cfg = pipelined_flush_config(pipelined_slc);
    cfg.ftl.flush_pipelined_writes_only = writes_only;
    let mut dev = SsdDevice::new(cfg);
    // 4 MiB at 64 MiB to read from, on NAND before the stream starts.
    let (_, t) =
        qd1(&mut dev, SimTime::ZERO, (0..32u64).map(|i| req(SimOp::Write, 64 * MIB + i * 128 * KIB, 128 * KIB)));
    let start = dev.submit(t, &req(SimOp::Flush, 0, 0));
    qd8_sequential_writes(&mut dev, start, reads.then_some(64 * MIB))
}

#[test]
fn writes_alone_pipeline_the_flush_with_the_key_as_without_it() {
    assert_eq!(write_latencies(true, true, false), write_latencies(false, true, false));
}

#[test]
fn writes_beside_reads_in_progress_wait_for_the_whole_flush_with_the_key() {
    let keyed = write_latencies(true, true, true);
    // Exactly the device that does not pipeline before the cliff, with the same reads.
    assert_eq!(keyed, write_latencies(false, false, true));
    // ... and not the pipelined one: after the first fill its writes wait only for their room.
    let piped = write_latencies(false, true, true);
    let longest = |l: &[u64]| *l[64..].iter().max().expect("writes");
    assert!(
        longest(&piped) * 3 < longest(&keyed),
        "pipelined {} ns, with the key {} ns",
        longest(&piped),
        longest(&keyed)
    );
}
