//! The memory a queue reads into and writes from: one page-aligned allocation, registered with io_uring
//! once, carved into per-slot read buffers and a write-data area whose layout depends on the data pattern.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::workload::DataPattern;

const ALIGN: usize = 4096;
/// Random write data is taken from a pool this large at varying offsets, so no copy is needed per write.
const RANDOM_POOL: usize = 8 << 20;

/// A zeroed, 4 KiB-aligned allocation that lives as long as the queue.
pub struct AlignedRegion {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the region is plain memory owned by one queue thread; it is only shared with the kernel.
unsafe impl Send for AlignedRegion {}

/// How much of a region is faulted in before the run: a queue's usual buffers whole (32 slots of 1 MiB), without
/// committing gigabytes for a trace with a few huge requests (beyond it pages fault on first use, as before).
const PREFAULT_MAX: usize = 64 << 20;

/// Write every 4 KiB page of `len` bytes at `ptr` once (with what the zeroed memory already holds), so the queue's
/// first use of a buffer page does not fault in the hot loop: a large zeroed allocation comes as untouched pages,
/// and each first touch cost 3.3-3.6 us (p50) on the 2-core build machine (a guest), in the kernel or the loop.
pub(crate) fn prefault(ptr: *mut u8, len: usize) {
    for page in (0..len).step_by(4096) {
        // SAFETY: page < len, inside the allocation the caller owns; volatile so the write is not elided (it
        // writes the 0 the zeroed memory holds, changing nothing).
        unsafe { std::ptr::write_volatile(ptr.add(page), 0) };
    }
}

impl AlignedRegion {
    pub fn new(len: usize) -> AlignedRegion {
        let layout = Layout::from_size_align(len.max(ALIGN), ALIGN).expect("valid buffer layout");
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory allocating {len} B of I/O buffers");
        prefault(ptr, layout.size().min(PREFAULT_MAX));
        AlignedRegion { ptr, layout }
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for AlignedRegion {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Per-queue I/O buffers.
pub struct IoBuffers {
    pub region: AlignedRegion,
    slot_size: usize,
    slots: usize,
    write_base: usize,
    write_len: usize,
    data: DataPattern,
    seed: u64,
    counter: u64,
    /// The run's tag in verify stamps.
    pub verify_tag: u64,
}

impl IoBuffers {
    /// `seed` is the run's seed (stamped into LBA-stamped data); random data also mixes in `queue`, so
    /// queues write different bytes.
    pub fn new(slots: usize, max_size: usize, data: DataPattern, seed: u64, queue: u32, writes: bool) -> IoBuffers {
        let slot_size = max_size.div_ceil(ALIGN) * ALIGN;
        let read_len = slots * slot_size;
        let write_len = if !writes {
            0
        } else {
            match data {
                DataPattern::Zeros | DataPattern::Ones | DataPattern::Alternating => slot_size,
                DataPattern::LbaStamped | DataPattern::Verify => slots * slot_size,
                DataPattern::Random => RANDOM_POOL.max(4 * slot_size),
            }
        };
        let region = AlignedRegion::new(read_len + write_len);
        let mut buffers = IoBuffers {
            region,
            slot_size,
            slots,
            write_base: read_len,
            write_len,
            data,
            seed,
            counter: 0,
            verify_tag: 0,
        };
        buffers.fill_write_area(seed ^ (queue as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        buffers
    }

    fn write_area(&mut self) -> &mut [u8] {
        // SAFETY: [write_base, write_base + write_len) lies inside the region, and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.region.as_ptr().add(self.write_base), self.write_len) }
    }

    fn fill_write_area(&mut self, seed: u64) {
        let data = self.data;
        let area = self.write_area();
        match data {
            DataPattern::Zeros | DataPattern::LbaStamped | DataPattern::Verify => {}
            DataPattern::Ones => area.fill(0xff),
            DataPattern::Alternating => area.fill(0xaa),
            DataPattern::Random => {
                let mut state = seed ^ 0x2545_f491_4f6c_dd1d;
                for chunk in area.chunks_exact_mut(8) {
                    // xorshift64*: fast and incompressible enough for flash controllers.
                    state ^= state >> 12;
                    state ^= state << 25;
                    state ^= state >> 27;
                    chunk.copy_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
                }
            }
        }
    }

    /// The buffer a read in `slot` lands in.
    #[inline]
    pub fn read_buffer(&self, slot: u32) -> *mut u8 {
        debug_assert!((slot as usize) < self.slots);
        // SAFETY: slot < slots, so the offset is inside the region.
        unsafe { self.region.as_ptr().add(slot as usize * self.slot_size) }
    }

    /// The data for a write of `len` bytes at `offset` from `slot`, prepared as the data pattern says.
    /// Runs in the hot loop: no allocation, at most a store per sector (and a checksum per sector in verify
    /// mode). `generation` is the write's sequence number, stamped in verify mode.
    #[inline]
    pub fn write_buffer(&mut self, slot: u32, offset: u64, len: usize, generation: u64) -> *mut u8 {
        let base = self.region.as_ptr();
        match self.data {
            DataPattern::Zeros | DataPattern::Ones | DataPattern::Alternating => {
                // SAFETY: write_base is inside the region; the constant area holds one max-size request.
                unsafe { base.add(self.write_base) }
            }
            DataPattern::LbaStamped => {
                // SAFETY: the slot's stamped buffer lies inside the write area.
                let buf = unsafe { base.add(self.write_base + slot as usize * self.slot_size) };
                let first_lba = offset / 512;
                for sector in 0..len / 512 {
                    let stamp = [first_lba + sector as u64, self.seed];
                    // SAFETY: sector * 512 + 16 <= len <= slot_size, inside the slot's buffer.
                    unsafe { std::ptr::copy_nonoverlapping(stamp.as_ptr().cast::<u8>(), buf.add(sector * 512), 16) };
                }
                buf
            }
            DataPattern::Verify => {
                // SAFETY: the slot's buffer lies inside the write area and holds len <= slot_size bytes.
                let buf = unsafe {
                    std::slice::from_raw_parts_mut(base.add(self.write_base + slot as usize * self.slot_size), len)
                };
                crate::verify::stamp_write(buf, offset, self.verify_tag, generation);
                buf.as_mut_ptr()
            }
            DataPattern::Random => {
                self.counter += 1;
                let positions = (self.write_len - len) / ALIGN + 1;
                let mixed = self.counter.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.seed ^ (self.write_base as u64);
                let start = (mixed >> 17) as usize % positions * ALIGN;
                // SAFETY: start + len <= write_len by construction of `positions`.
                let buf = unsafe { base.add(self.write_base + start) };
                // Make every write unique: stamp a per-write value into each 4 KiB, so a deduplicating
                // controller cannot recognise repeated pool content.
                for block in 0..len.div_ceil(ALIGN) {
                    let tag = mixed ^ (block as u64).wrapping_mul(0xff51_afd7_ed55_8ccd);
                    // SAFETY: block * ALIGN + 8 <= len rounded up, and the pool has room (len <= slot).
                    unsafe { std::ptr::write_unaligned(buf.add(block * ALIGN).cast::<u64>(), tag) };
                }
                buf
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_region_is_faulted_in_up_to_its_limit() {
        let len = 8 << 20;
        let region = AlignedRegion::new(len);
        let before = crate::engine::tests::minor_faults();
        for page in (0..len).step_by(4096) {
            // SAFETY: inside the region.
            unsafe { std::ptr::write_volatile(region.as_ptr().add(page), 1) };
        }
        let faults = crate::engine::tests::minor_faults() - before;
        assert!(faults <= 2, "writing every page of a new region faulted {faults} times over {} pages", len / 4096);
    }

    fn bytes(ptr: *mut u8, len: usize) -> Vec<u8> {
        // SAFETY: test helper on buffers we own.
        unsafe { std::slice::from_raw_parts(ptr, len).to_vec() }
    }

    #[test]
    fn constant_patterns() {
        let mut b = IoBuffers::new(2, 8192, DataPattern::Alternating, 1, 0, true);
        let w = b.write_buffer(1, 0, 8192, 0);
        assert!(bytes(w, 8192).iter().all(|&x| x == 0xaa));
        let mut b = IoBuffers::new(2, 8192, DataPattern::Ones, 1, 0, true);
        assert!(bytes(b.write_buffer(0, 0, 4096, 0), 4096).iter().all(|&x| x == 0xff));
    }

    #[test]
    fn lba_stamps_each_sector() {
        let mut b = IoBuffers::new(4, 4096, DataPattern::LbaStamped, 9, 0, true);
        let w = b.write_buffer(2, 1 << 20, 4096, 0);
        let data = bytes(w, 4096);
        for sector in 0..8 {
            let lba = u64::from_le_bytes(data[sector * 512..sector * 512 + 8].try_into().unwrap());
            assert_eq!(lba, (1 << 20) / 512 + sector as u64);
        }
    }

    #[test]
    fn random_writes_differ() {
        let mut b = IoBuffers::new(1, 4096, DataPattern::Random, 3, 0, true);
        let a = bytes(b.write_buffer(0, 0, 4096, 0), 4096);
        let c = bytes(b.write_buffer(0, 0, 4096, 0), 4096);
        assert_ne!(a, c);
        let zeros = a.iter().filter(|&&x| x == 0).count();
        assert!(zeros < 64, "random data has {zeros} zero bytes of 4096");
    }

    #[test]
    fn read_buffers_are_aligned_and_distinct() {
        let b = IoBuffers::new(3, 6000, DataPattern::Zeros, 1, 0, false);
        let p0 = b.read_buffer(0) as usize;
        let p1 = b.read_buffer(1) as usize;
        assert_eq!(p0 % 4096, 0);
        assert_eq!(p1 - p0, 8192);
    }
}
