//! `ftl.merge_partial_writes`: a write that covers only part of a mapping page (a 512 B write on a drive that
//! maps 4 KiB) replaces part of that page, so the controller reads the rest of it from NAND and merges before
//! the whole page can be buffered and programmed (a read-modify-write). A page never written (or unmapped)
//! merges with zeroes and one still in the write buffer merges in RAM: neither reads NAND. This is what makes
//! a whole-drive fill in 512 B writes in a random order slower the fuller the drive gets ("What does the
//! Flash Translation Layer do?" §5.9: the Kingston NV2 averaged 876 KB/s over its 79-hour fill).

use super::ftl::{UNMAPPED, ZEROED};
use super::{SimTime, SsdDevice};

impl SsdDevice {
    /// The merge reads of a write of `len` bytes at `offset`, starting no earlier than `at`: when the old data
    /// of its partly covered first and last mapping pages is in the controller (`at` when none is on NAND).
    pub(super) fn merge_partial(&mut self, offset: u64, len: u64, at: SimTime) -> SimTime {
        let page = self.page;
        let end = offset + len;
        let first = offset / page;
        let last = (end - 1) / page;
        let mut partial = [None, None];
        if !offset.is_multiple_of(page) || (first == last && !end.is_multiple_of(page)) {
            partial[0] = Some(first);
        }
        if !end.is_multiple_of(page) && last != first {
            partial[1] = Some(last);
        }
        let mut ready = at;
        for lpn in partial.into_iter().flatten() {
            if lpn >= self.ftl.logical_pages() {
                continue;
            }
            let ppn = self.ftl.lookup(lpn);
            if matches!(ppn, UNMAPPED | ZEROED) || self.in_write_buffer(ppn) {
                continue;
            }
            let (unit, page_type) = self.ftl.locate(ppn);
            let start = self.sense_processing(at);
            // A read on the host-read path (sense and transfer; with program suspend it goes before the
            // programs pending on its die), as `read_again` books a retry.
            ready = ready.max(self.flash.read_again(unit, page_type, start));
            self.ftl.counters.pages_read += 1;
        }
        ready
    }
}
