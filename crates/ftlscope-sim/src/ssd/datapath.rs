//! The controller's DMA engine between its buffer and host memory (`controller.host_segment_time`).
//!
//! Data waits in controller RAM in mapping-page slots; the host hands over its buffer as a list of memory
//! pages (NVMe PRP entries, 4 KiB). The engine copies one segment at a time, a piece that lies in one host
//! page and one slot, and each segment costs about the same whatever its size (descriptor set-up, the buffer
//! access). A request aligned to the mapping page has one segment per host page; one shifted by a part of a
//! mapping page cuts every host page in two, doubling the engine's work. Each direction has its own engine
//! (the link is full duplex, and a read's copy booked for when its flash data is ready must not hold back a
//! write arriving now: one engine for both made the writes of a QD 32 mix wait behind the reads' future
//! copies). The engines run alongside the host link, so it shows only where its work outgrows the link's: large misaligned transfers ("What does the
//! Flash Translation Layer do?" §5.5: the 970 EVO Plus reads ~15 % slower at offsets that are not a multiple
//! of 4 KiB, and not at any multiple of it).

use super::calendar::Calendar;
use crate::time::{Nanos, SimTime};

/// NVMe host memory page (CC.MPS as every driver sets it).
pub const HOST_PAGE: u64 = 4096;

pub struct DataPath {
    /// Device to host (reads) and host to device (writes).
    to_host: Calendar,
    from_host: Calendar,
    segment: Nanos,
    /// Mapping page: the size of a buffer slot.
    slot: u64,
}

impl DataPath {
    /// None when the key is off (no engine to book: completion times stay those without it).
    pub fn new(segment: Nanos, slot: u64) -> Option<DataPath> {
        (segment.0 > 0).then(|| DataPath {
            to_host: Calendar::default(),
            from_host: Calendar::default(),
            segment,
            slot,
        })
    }

    /// The engine of the direction (`write`: host to device) copies the `len` bytes at device `offset`
    /// from `at`: when it is done.
    #[inline]
    pub fn copy(&mut self, write: bool, at: SimTime, offset: u64, len: u64) -> SimTime {
        let n = segments(offset, len, self.slot);
        let engine = if write { &mut self.from_host } else { &mut self.to_host };
        engine.book(at, Nanos(self.segment.0 * n))
    }
}

/// Pieces of `[offset, offset + len)` cut at the slot boundaries (multiples of `slot` on the device) and at
/// the host page boundaries (every HOST_PAGE from the start of the transfer: the host buffer starts on a
/// page).
pub fn segments(offset: u64, len: u64, slot: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let end = offset + len;
    let host_cuts = (len - 1) / HOST_PAGE;
    // Slot boundaries strictly inside the transfer, less those that fall on a host page boundary too.
    let first = offset / slot + 1;
    let last = (end - 1) / slot;
    let mut slot_cuts = 0;
    for k in first..=last {
        if !(k * slot - offset).is_multiple_of(HOST_PAGE) {
            slot_cuts += 1;
        }
    }
    1 + host_cuts + slot_cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_transfers_have_one_segment_per_host_page() {
        assert_eq!(segments(0, 1 << 20, 4096), 256);
        assert_eq!(segments(8192, 4096, 4096), 1);
        assert_eq!(segments(0, 512, 4096), 1);
        // Slots larger than a host page cut nothing the host pages do not.
        assert_eq!(segments(16384, 1 << 20, 16384), 256);
    }

    #[test]
    fn a_shift_within_the_mapping_page_splits_every_host_page() {
        // 1 MiB at 512 B: 255 host cuts and 256 slot cuts between them.
        assert_eq!(segments(512, 1 << 20, 4096), 512);
        assert_eq!(segments(512, 4096, 4096), 2);
        // A shift by a whole mapping page does not.
        assert_eq!(segments(4096, 1 << 20, 4096), 256);
        // Within one slot nothing is cut.
        assert_eq!(segments(512, 1024, 4096), 1);
    }

    #[test]
    fn the_engine_limits_only_when_its_work_outgrows_the_link() {
        let mut dp = DataPath::new(Nanos(700), 4096).expect("on");
        // Back-to-back aligned 1 MiB copies: 256 x 0.7 us each.
        let aligned = (0..4).map(|i| dp.copy(false, SimTime(0), i << 20, 1 << 20)).last().expect("four");
        assert_eq!(aligned, SimTime(4 * 256 * 700));
        let mut dp = DataPath::new(Nanos(700), 4096).expect("on");
        let shifted = (0..4).map(|i| dp.copy(false, SimTime(0), (i << 20) + 512, 1 << 20)).last().expect("four");
        assert_eq!(shifted, SimTime(4 * 512 * 700));
        assert!(DataPath::new(Nanos(0), 4096).is_none());
    }

    #[test]
    fn reads_and_writes_have_an_engine_each() {
        // A read's copy booked for later (its flash data not ready yet) does not hold back a write now.
        let mut dp = DataPath::new(Nanos(700), 4096).expect("on");
        assert_eq!(dp.copy(false, SimTime(50_000), 0, 4096), SimTime(50_700));
        assert_eq!(dp.copy(true, SimTime(0), 8192, 4096), SimTime(700));
        // Within a direction the engine is one: a second read at the same moment waits for the first.
        assert_eq!(dp.copy(false, SimTime(50_000), 4096, 4096), SimTime(51_400));
    }
}
