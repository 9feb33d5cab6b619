//! Large sequential reads (issue 15, the 970 EVO Plus fit): the DMA engine's segments
//! (`controller.host_segment_time`) slow transfers not aligned to the mapping page, compared against the same
//! device without the key.

use super::*;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// Completion of eight 1 MiB reads from `shift`, all submitted at once on a sequentially filled device.
fn eight_mib(cfg: DeviceConfig, shift: u64) -> u64 {
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    let last = (0..8).map(|i| dev.submit(t, &req(SimOp::Read, i * MIB + shift, MIB))).max().expect("eight");
    (last - t).0
}

#[test]
fn misaligned_transfers_cost_the_dma_engine_twice_the_segments() {
    // 10 us a segment: 2.56 ms a 1 MiB aligned transfer, above the NAND's ~1.6 ms, so the engine sets the pace.
    let mut cfg = small_config();
    cfg.controller.host_segment_time = us(10);
    let aligned = eight_mib(cfg.clone(), 0);
    let shifted = eight_mib(cfg.clone(), 512);
    let by_page = eight_mib(cfg, 4 * KIB);
    let ratio = shifted as f64 / aligned as f64;
    assert!((1.8..2.1).contains(&ratio), "aligned {aligned} ns, shifted by 512 B {shifted} ns");
    assert!(by_page.abs_diff(aligned) * 50 < aligned, "a whole-page shift splits nothing: {by_page} vs {aligned}");
    // Without the key the 512 B shift costs only its one more page.
    let plain = eight_mib(small_config(), 0);
    let plain_shifted = eight_mib(small_config(), 512);
    assert!(plain_shifted * 10 < plain * 11, "{plain} vs {plain_shifted}");
    assert!(plain < aligned, "the engine is the limit here: {plain} vs {aligned}");
}
