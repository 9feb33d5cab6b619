//! The flash translation layer: page-level mapping, the striped write frontier, blocks, the SLC cache's
//! accounting and greedy garbage collection with over-provisioning.
//!
//! Memory: 4 bytes of logical-to-physical map per logical page and a bit-packed physical-to-logical map of
//! just enough bits per physical page (26 for a 256 GB drive: 7.5 bytes per logical page in all at 7.4 %
//! over-provisioning), plus a 4-byte content fingerprint per logical page (stored beside its map entry) for
//! the integrity check. Both arrays are allocated lazily in 2 Mi-entry chunks, so a 2 TB preset that is
//! only probed costs almost nothing.

use std::collections::VecDeque;

use strength_reduce::StrengthReducedU32;

use crate::config::{DeviceConfig, PageType};
use crate::ssd::flash::Flash;
use crate::time::SimTime;

/// Logical page never written, or trimmed.
pub const UNMAPPED: u32 = u32::MAX;
/// Logical page written with Write Zeroes (no NAND behind it).
pub const ZEROED: u32 = u32::MAX - 1;
/// Logical page whose latest data sits in the write buffer.
pub const BUFFERED: u32 = u32::MAX - 2;
/// Largest physical page number the map can hold.
const MAX_PPN: u64 = (u32::MAX - 3) as u64;

const NONE: u32 = u32::MAX;
/// 2 Mi entries a chunk: large enough that most of each chunk can sit on transparent huge pages.
const CHUNK_BITS: u32 = 21;

/// `len` copies of `fill` in an allocation aligned to, and a whole number of, 2 MiB huge pages, asked of the
/// kernel as transparent huge pages before the first touch.
///
/// The maps are hundreds of MiB touched at random: with 4 KiB pages nearly every access also misses the
/// TLB, and in profiles the CPU stalled on the GC's prefetches for that reason. A chunk from the ordinary
/// allocator starts at no particular 2 MiB boundary, so its partial huge pages at both ends stayed on 4 KiB
/// pages (about a fifth of the mapping state, measured in `smaps`); aligning the allocation covers all of it.
/// `Box<[T]>` cannot carry the alignment its deallocation needs, hence this small owner.
pub struct HugeChunk<T> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
    layout: std::alloc::Layout,
}

// SAFETY: the chunk owns its allocation exclusively, like a Box<[T]>.
unsafe impl<T: Send> Send for HugeChunk<T> {}
// SAFETY: shared access only reads, like a Box<[T]>.
unsafe impl<T: Sync> Sync for HugeChunk<T> {}

impl<T: Copy> HugeChunk<T> {
    pub fn new(len: usize, fill: T) -> HugeChunk<T> {
        const HUGE: usize = 2 << 20;
        let bytes = (len.max(1) * std::mem::size_of::<T>()).next_multiple_of(HUGE);
        let layout = std::alloc::Layout::from_size_align(bytes, HUGE.max(std::mem::align_of::<T>()))
            .expect("a chunk size far below isize::MAX");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = std::ptr::NonNull::new(raw.cast::<T>()) else { std::alloc::handle_alloc_error(layout) };
        // SAFETY: [raw, raw + bytes) is the allocation just made; MADV_HUGEPAGE only changes how the kernel
        // backs it and fails harmlessly where THP is off.
        unsafe { libc::madvise(raw.cast(), bytes, libc::MADV_HUGEPAGE) };
        for i in 0..len {
            // SAFETY: i < len and len * size_of::<T>() <= bytes: inside the allocation, suitably aligned.
            unsafe { ptr.as_ptr().add(i).write(fill) };
        }
        HugeChunk { ptr, len, layout }
    }
}

impl<T> std::ops::Deref for HugeChunk<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised values live at `ptr` for as long as the chunk.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for HugeChunk<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for HugeChunk<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the values are `Copy` (nothing to drop).
        unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), self.layout) };
    }
}

/// An array that allocates its chunks on first write.
pub struct LazyArray<T> {
    chunks: Vec<Option<HugeChunk<T>>>,
    fill: T,
}

impl<T: Copy> LazyArray<T> {
    pub fn new(len: u64, fill: T) -> LazyArray<T> {
        let chunks = len.div_ceil(1 << CHUNK_BITS) as usize;
        LazyArray { chunks: (0..chunks).map(|_| None).collect(), fill }
    }

    #[inline]
    pub fn get(&self, i: u64) -> T {
        match &self.chunks[(i >> CHUNK_BITS) as usize] {
            Some(chunk) => chunk[(i & ((1 << CHUNK_BITS) - 1)) as usize],
            None => self.fill,
        }
    }

    /// Entry `i`, to change (its chunk is allocated if this is the first write to it).
    #[inline]
    pub fn get_mut(&mut self, i: u64) -> &mut T {
        let fill = self.fill;
        let chunk =
            self.chunks[(i >> CHUNK_BITS) as usize].get_or_insert_with(|| HugeChunk::new(1 << CHUNK_BITS, fill));
        &mut chunk[(i & ((1 << CHUNK_BITS) - 1)) as usize]
    }

    /// Ask the CPU to start loading entry `i` into cache (a hint; no effect on results).
    #[inline]
    pub fn prefetch(&self, i: u64) {
        #[cfg(target_arch = "x86_64")]
        if let Some(chunk) = &self.chunks[(i >> CHUNK_BITS) as usize] {
            let entry = &chunk[(i & ((1 << CHUNK_BITS) - 1)) as usize];
            // SAFETY: prefetch is a hint on a valid address; it never faults.
            unsafe { core::arch::x86_64::_mm_prefetch((entry as *const T).cast(), core::arch::x86_64::_MM_HINT_T0) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// Bytes allocated so far.
    pub fn allocated_bytes(&self) -> u64 {
        self.chunks.iter().filter(|c| c.is_some()).count() as u64 * (std::mem::size_of::<T>() << CHUNK_BITS) as u64
    }
}

/// What the FTL keeps per logical page: where its data is (a physical page, or UNMAPPED, ZEROED,
/// BUFFERED) and, for the integrity check, a fingerprint of what it holds. Side by side, so that a write's
/// lookup and its fingerprint cost one cache miss (and one TLB miss) rather than two.
#[derive(Clone, Copy)]
pub struct LogicalPage {
    ppn: u32,
    fingerprint: u32,
}

/// An array of `width`-bit unsigned values (all ones = [`UNMAPPED`]), bit-packed into chunks allocated on
/// first write.
///
/// The physical-to-logical map needs only enough bits for a logical page number: 26 of them for a 256 GB
/// drive at 4 KiB pages. Packing it keeps the whole mapping state (4-byte L2P + packed P2L over 7.4 %
/// more physical pages) under 8 bytes per logical page. Each value is read and written through one
/// unaligned 8-byte word starting at its first byte (a value of at most 32 bits plus at most 7 bits of
/// offset always fits), so no value needs two accesses. Written by hand: fixed-width packing with lazy
/// chunks is a few shifts, and the bit-vector crates either pull in far more or store whole words.
pub struct PackedArray {
    chunks: Vec<Option<HugeChunk<u8>>>,
    width: u32,
    mask: u64,
}

impl PackedArray {
    /// An array of `len` values able to hold every value below `max_value` (plus the UNMAPPED sentinel).
    pub fn new(len: u64, max_value: u64) -> PackedArray {
        let width = (64 - (max_value + 1).leading_zeros()).clamp(1, 32);
        let chunks = len.div_ceil(1 << CHUNK_BITS) as usize;
        PackedArray { chunks: (0..chunks).map(|_| None).collect(), width, mask: (1u64 << width) - 1 }
    }

    /// Bytes of one chunk: its values, plus one word so that the last value's 8-byte access stays inside.
    fn chunk_bytes(&self) -> usize {
        ((self.width as usize) << (CHUNK_BITS - 3)) + 8
    }

    /// The byte where entry `i`'s word starts within its chunk, and the value's bit offset in that word.
    #[inline]
    fn position(&self, i: u64) -> (usize, u32) {
        let bit = (i & ((1 << CHUNK_BITS) - 1)) * self.width as u64;
        ((bit >> 3) as usize, (bit & 7) as u32)
    }

    #[inline]
    pub fn get(&self, i: u64) -> u32 {
        let Some(chunk) = &self.chunks[(i >> CHUNK_BITS) as usize] else { return UNMAPPED };
        let (byte, shift) = self.position(i);
        let word = u64::from_le_bytes(chunk[byte..byte + 8].try_into().expect("8 bytes"));
        let value = (word >> shift) & self.mask;
        if value == self.mask {
            UNMAPPED
        } else {
            value as u32
        }
    }

    #[inline]
    pub fn set(&mut self, i: u64, value: u32) {
        let value = if value == UNMAPPED { self.mask } else { value as u64 & self.mask };
        let (byte, shift) = self.position(i);
        let (mask, bytes) = (self.mask, self.chunk_bytes());
        // Chunks start all ones: every entry UNMAPPED.
        let chunk = self.chunks[(i >> CHUNK_BITS) as usize].get_or_insert_with(|| HugeChunk::new(bytes, u8::MAX));
        let place: &mut [u8; 8] = (&mut chunk[byte..byte + 8]).try_into().expect("8 bytes");
        let word = u64::from_le_bytes(*place);
        *place = ((word & !(mask << shift)) | (value << shift)).to_le_bytes();
    }

    pub fn allocated_bytes(&self) -> u64 {
        self.chunks.iter().filter(|c| c.is_some()).count() as u64 * self.chunk_bytes() as u64
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockState {
    Free,
    Active,
    Closed,
}

/// Counters a SMART log would hold, in pages.
#[derive(Clone, Copy, Debug, Default)]
pub struct FtlCounters {
    pub pages_programmed: u64,
    pub pages_read: u64,
    pub erases: u64,
    pub gc_pages_copied: u64,
    /// Blocks folded whole by `slc_cache.fold_batch` (what the tests count; no SMART field shows it).
    pub batch_folded_blocks: u64,
}

pub struct Ftl {
    pages_per_block: u32,
    chunk_pages: u64,
    stripe_width: u32,
    // Divisions by these run for every page programmed, read or invalidated; strength-reduced divisors turn
    // each ~25-cycle `div` into a multiply and a shift.
    ppb_div: StrengthReducedU32,
    bpu_div: StrengthReducedU32,
    /// The L/M/H type of each page index within a block (the pattern, unrolled once).
    page_types: Vec<PageType>,
    /// The write frontier, kept incrementally: the unit it is on and the pages left in its chunk.
    frontier_unit: u32,
    frontier_left: u64,
    l2p: LazyArray<LogicalPage>,
    p2l: PackedArray,
    valid: Vec<u16>,
    state: Vec<BlockState>,
    slc_block: Vec<bool>,
    bucket_prev: Vec<u32>,
    bucket_next: Vec<u32>,
    /// Per unit, per valid count: the first closed block with that many valid pages.
    bucket_head: Vec<u32>,
    free: Vec<Vec<u32>>,
    /// Per unit: the open block and its next page.
    active: Vec<(u32, u32)>,
    gc_reserve: usize,
    gc_pending: Vec<u32>,
    in_gc: bool,
    /// The pages of the block being collected that may hold data, with their logical pages (kept to
    /// reuse the allocation).
    victim_pages: Vec<(u32, u32)>,
    slc_capacity_pages: u64,
    slc_used_pages: u64,
    /// SLC-mode blocks in the order they were opened (folding converts the oldest first).
    slc_blocks: VecDeque<u32>,
    fold_credit: u64,
    /// `slc_cache.fold_while_writing` (pages of old SLC blocks folded per host page written in SLC mode) and
    /// `fold_above` in pages; per unit, the pages owed and the block being folded with its next page.
    fold_per_page: f64,
    fold_above_pages: f64,
    fold_owed: Vec<f64>,
    fold_cursor: Vec<(u32, u32)>,
    /// `slc_cache.fold_by_valid`: scale foreground folding by the share of the SLC capacity holding valid data,
    /// counted in `slc_valid_pages` (kept whatever the key says: counting changes no time).
    fold_by_valid: bool,
    slc_valid_pages: u64,
    /// `slc_cache.fold_batch` in whole blocks a unit (0 = off): folded in one go when the cache is full.
    fold_batch_blocks: u32,
    logical_pages: u64,
    pub counters: FtlCounters,
}

impl Ftl {
    pub fn new(cfg: &DeviceConfig) -> Ftl {
        let page = cfg.geometry.page_size;
        let ppb = cfg.geometry.pages_per_block;
        // A capacity that is not a whole number of pages still exposes its last bytes: round up.
        let logical_pages = cfg.device.capacity.div_ceil(page);
        let width = cfg.mapping.stripe_width;
        let physical_pages = (logical_pages as f64 * (1.0 + cfg.device.over_provisioning)).ceil() as u64;
        let threshold = cfg.ftl.gc_free_block_threshold;
        let mut blocks_per_unit = physical_pages.div_ceil(width as u64 * ppb as u64) as u32;
        // GC needs somewhere to copy to: at least the threshold's blocks plus two per unit.
        let gc_reserve = ((blocks_per_unit as f64 * threshold).ceil() as usize).max(2);
        blocks_per_unit = blocks_per_unit.max(gc_reserve as u32 + 2);
        let blocks = width as usize * blocks_per_unit as usize;
        let total_pages = blocks as u64 * ppb as u64;
        assert!(total_pages <= MAX_PPN, "device too large for 32-bit physical page numbers");
        Ftl {
            pages_per_block: ppb,
            chunk_pages: (cfg.mapping.chunk_size / page).max(1),
            stripe_width: width,
            ppb_div: StrengthReducedU32::new(ppb),
            bpu_div: StrengthReducedU32::new(blocks_per_unit),
            page_types: (0..ppb).map(|i| cfg.nand.page_pattern.page_type(i)).collect(),
            frontier_unit: 0,
            frontier_left: (cfg.mapping.chunk_size / page).max(1),
            l2p: LazyArray::new(logical_pages, LogicalPage { ppn: UNMAPPED, fingerprint: 0 }),
            p2l: PackedArray::new(total_pages, logical_pages),
            valid: vec![0; blocks],
            state: vec![BlockState::Free; blocks],
            slc_block: vec![false; blocks],
            bucket_prev: vec![NONE; blocks],
            bucket_next: vec![NONE; blocks],
            bucket_head: vec![NONE; width as usize * (ppb as usize + 1)],
            // Pop from the end: block 0 of each unit is used first.
            free: (0..width).map(|u| (0..blocks_per_unit).rev().map(|b| u * blocks_per_unit + b).collect()).collect(),
            active: vec![(NONE, 0); width as usize],
            gc_reserve,
            gc_pending: Vec::new(),
            in_gc: false,
            victim_pages: Vec::with_capacity(ppb as usize),
            slc_capacity_pages: cfg.slc_cache.capacity / page,
            slc_used_pages: 0,
            slc_blocks: VecDeque::new(),
            fold_credit: 0,
            fold_per_page: cfg.slc_cache.fold_while_writing,
            fold_above_pages: cfg.slc_cache.fold_above * (cfg.slc_cache.capacity / page) as f64,
            fold_owed: vec![0.0; width as usize],
            fold_cursor: vec![(NONE, 0); width as usize],
            fold_by_valid: cfg.slc_cache.fold_by_valid,
            slc_valid_pages: 0,
            fold_batch_blocks: cfg.slc_cache.fold_batch.div_ceil(width as u64 * ppb as u64 * page) as u32,
            logical_pages,
            counters: FtlCounters::default(),
        }
    }

    /// The next block opened will be programmed at native speed: the SLC cache is full (or there is none).
    pub fn slc_exhausted(&self) -> bool {
        self.slc_used_pages + self.pages_per_block as u64 > self.slc_capacity_pages
    }

    pub fn logical_pages(&self) -> u64 {
        self.logical_pages
    }

    #[inline]
    pub fn lookup(&self, lpn: u64) -> u32 {
        self.l2p.get(lpn).ppn
    }

    /// Start loading `lpn`'s map entry into cache (a hint; no effect on results).
    #[inline]
    pub fn prefetch_entry(&self, lpn: u64) {
        self.l2p.prefetch(lpn);
    }

    /// Load the map entries of `lpns` into cache, all at once (no effect on results): a tight loop of
    /// independent loads, whose misses and page walks the CPU overlaps (see [`Ftl::collect`]), where a
    /// prefetch instruction on this kind of virtual machine waits for its page walk before the next starts.
    #[inline]
    pub fn gather_entries(&self, lpns: &[u64]) {
        let mut any = 0u32;
        for &lpn in lpns {
            any ^= self.l2p.get(lpn).ppn;
        }
        std::hint::black_box(any);
    }

    #[inline]
    pub fn fingerprint(&self, lpn: u64) -> u32 {
        self.l2p.get(lpn).fingerprint
    }

    pub fn mapping_bytes(&self) -> u64 {
        // The logical-to-physical half of each entry (the other half is the integrity check's fingerprint).
        self.l2p.allocated_bytes() / 2 + self.p2l.allocated_bytes()
    }

    fn unit_of_block(&self, block: u32) -> u32 {
        block / self.bpu_div
    }

    /// Unit and page type of a physical page, for reading it.
    #[inline]
    pub fn locate(&self, ppn: u32) -> (u32, PageType) {
        let (block, page) = StrengthReducedU32::div_rem(ppn, self.ppb_div);
        (self.unit_of_block(block), self.page_type(block, page))
    }

    /// The type of page `page` of `block`: L in an SLC-mode block, else the cell pattern's.
    #[inline]
    fn page_type(&self, block: u32, page: u32) -> PageType {
        if self.slc_block[block as usize] {
            PageType::L
        } else {
            self.page_types[page as usize]
        }
    }

    // --- bucket lists of closed blocks by valid count (greedy victim selection in O(1) per update) ---

    fn bucket_index(&self, block: u32) -> usize {
        self.unit_of_block(block) as usize * (self.pages_per_block as usize + 1) + self.valid[block as usize] as usize
    }

    fn bucket_insert(&mut self, block: u32) {
        let head = self.bucket_index(block);
        let first = self.bucket_head[head];
        self.bucket_prev[block as usize] = NONE;
        self.bucket_next[block as usize] = first;
        if first != NONE {
            self.bucket_prev[first as usize] = block;
        }
        self.bucket_head[head] = block;
    }

    fn bucket_remove(&mut self, block: u32) {
        let (prev, next) = (self.bucket_prev[block as usize], self.bucket_next[block as usize]);
        if prev != NONE {
            self.bucket_next[prev as usize] = next;
        } else {
            let head = self.bucket_index(block);
            self.bucket_head[head] = next;
        }
        if next != NONE {
            self.bucket_prev[next as usize] = prev;
        }
        self.bucket_prev[block as usize] = NONE;
        self.bucket_next[block as usize] = NONE;
    }

    // --- mapping updates ---

    /// The physical page `ppn` no longer holds current data.
    fn invalidate(&mut self, ppn: u32, at: SimTime, flash: &mut Flash) {
        let block = ppn / self.ppb_div;
        let b = block as usize;
        let closed = self.state[b] == BlockState::Closed;
        if closed {
            self.bucket_remove(block);
        }
        self.valid[b] -= 1;
        if self.slc_block[b] {
            self.slc_valid_pages -= 1;
        }
        if closed {
            if self.valid[b] == 0 && !self.in_gc {
                // Nothing left to copy: erase it in the background now (this is also how trimmed SLC
                // blocks give their SLC capacity back).
                self.erase_block(block, at, flash);
            } else {
                self.bucket_insert(block);
            }
        }
    }

    /// Drop whatever `lpn` pointed to and point it at `target` (UNMAPPED, ZEROED or BUFFERED).
    pub fn unmap(&mut self, lpn: u64, target: u32, at: SimTime, flash: &mut Flash) {
        let old = self.l2p.get(lpn).ppn;
        if old < BUFFERED {
            self.invalidate(old, at, flash);
        }
        self.l2p.get_mut(lpn).ppn = target;
    }

    /// Record new host data for `lpn` (kept in the write buffer until it is programmed).
    pub fn buffer_write(&mut self, lpn: u64, fingerprint: u32, at: SimTime, flash: &mut Flash) -> bool {
        let already = self.l2p.get(lpn).ppn == BUFFERED;
        self.unmap(lpn, BUFFERED, at, flash);
        self.l2p.get_mut(lpn).fingerprint = fingerprint;
        already
    }

    /// Record new host data for `lpn` without a buffer (write-through devices): program it now.
    pub fn write_through(&mut self, lpn: u64, fingerprint: u32, at: SimTime, flash: &mut Flash) -> SimTime {
        self.unmap(lpn, BUFFERED, at, flash);
        self.l2p.get_mut(lpn).fingerprint = fingerprint;
        self.program(lpn, at, flash)
    }

    /// Give the buffered data of `lpn` its place on NAND through the write frontier (the mapping changes
    /// now; the caller reserves the program on the returned unit). None for a page trimmed or re-pointed
    /// since it was buffered. Garbage collection the placement made necessary runs here, from `at`.
    pub fn assign(&mut self, lpn: u64, at: SimTime, flash: &mut Flash) -> Option<(u32, PageType)> {
        if self.l2p.get(lpn).ppn != BUFFERED {
            return None;
        }
        if self.fold_batch_blocks > 0 {
            self.fold_batch_if_full(at, flash);
        }
        let placed = self.place(lpn);
        self.run_pending_gc(at, flash);
        if self.fold_per_page > 0.0 {
            self.fold_while_writing(placed.0, at, flash);
        }
        Some(placed)
    }

    /// Program the buffered data of `lpn` right away (write-through devices); returns when it is durable.
    pub fn program(&mut self, lpn: u64, at: SimTime, flash: &mut Flash) -> SimTime {
        match self.assign(lpn, at, flash) {
            Some((unit, page_type)) => flash.program(unit, page_type, at),
            None => at,
        }
    }

    /// The frontier: the n-th programmed page goes to unit (n / chunk_pages) mod stripe_width.
    #[inline]
    fn place(&mut self, lpn: u64) -> (u32, PageType) {
        let unit = self.frontier_unit;
        self.frontier_left -= 1;
        if self.frontier_left == 0 {
            self.frontier_left = self.chunk_pages;
            self.frontier_unit = if unit + 1 == self.stripe_width { 0 } else { unit + 1 };
        }
        let (block, page) = self.take_page(unit);
        let ppn = block * self.pages_per_block + page;
        let page_type = self.page_type(block, page);
        self.l2p.get_mut(lpn).ppn = ppn;
        self.p2l.set(ppn as u64, lpn as u32);
        self.valid[block as usize] += 1;
        if self.slc_block[block as usize] {
            self.slc_valid_pages += 1;
        }
        self.counters.pages_programmed += 1;
        (unit, page_type)
    }

    fn program_page(&mut self, lpn: u64, at: SimTime, flash: &mut Flash) -> SimTime {
        let (unit, page_type) = self.place(lpn);
        flash.program(unit, page_type, at)
    }

    pub fn stripe_width(&self) -> u32 {
        self.stripe_width
    }

    #[inline]
    fn take_page(&mut self, unit: u32) -> (u32, u32) {
        let u = unit as usize;
        let (block, page) = self.active[u];
        if block != NONE && page < self.pages_per_block {
            self.active[u] = (block, page + 1);
            return (block, page);
        }
        self.open_block(unit)
    }

    /// Close `unit`'s full block (if any) and open a free one; returns its first page.
    #[cold]
    fn open_block(&mut self, unit: u32) -> (u32, u32) {
        let u = unit as usize;
        let (full, _) = self.active[u];
        if full != NONE {
            self.state[full as usize] = BlockState::Closed;
            self.bucket_insert(full);
        }
        let block = self.free[u].pop().expect("GC keeps free blocks in reserve");
        self.state[block as usize] = BlockState::Active;
        let slc = self.slc_used_pages + self.pages_per_block as u64 <= self.slc_capacity_pages;
        self.slc_block[block as usize] = slc;
        if slc {
            self.slc_used_pages += self.pages_per_block as u64;
            self.slc_blocks.push_back(block);
        }
        if self.free[u].len() < self.gc_reserve && !self.gc_pending.contains(&unit) {
            self.gc_pending.push(unit);
        }
        self.active[u] = (block, 1);
        (block, 0)
    }

    fn run_pending_gc(&mut self, at: SimTime, flash: &mut Flash) {
        if self.in_gc || self.gc_pending.is_empty() {
            return;
        }
        self.in_gc = true;
        while let Some(unit) = self.gc_pending.pop() {
            while self.free[unit as usize].len() < self.gc_reserve {
                if !self.collect(unit, at, flash) {
                    break;
                }
            }
        }
        self.in_gc = false;
    }

    /// Greedy GC on `unit`: copy the valid pages of its closed block with the fewest, then erase it.
    fn collect(&mut self, unit: u32, at: SimTime, flash: &mut Flash) -> bool {
        let ppb = self.pages_per_block as usize;
        let base = unit as usize * (ppb + 1);
        let Some(valid) = (0..ppb).find(|&v| self.bucket_head[base + v] != NONE) else {
            return false; // every closed block is full of valid data (or there is none): nothing to gain
        };
        let victim = self.bucket_head[base + valid];
        self.bucket_remove(victim);
        self.state[victim as usize] = BlockState::Free; // out of the buckets while it is copied
        let first = victim * self.pages_per_block;
        // The map entries of a victim's pages are scattered over the whole logical space: each check is a
        // cache miss and, on a virtual machine, a nested page walk (measured on this kind of VM: 250-400 ns
        // one after another, 25-35 ns each when a tight loop issues them independently). The pages that may
        // hold data are listed first (a sequential read of the reverse map); then, `GATHER` at a time, a
        // tight loop of independent loads checks which are still current (the processor overlaps a dozen
        // misses there; prefetching them ahead of the copies, as before, overlapped few: each prefetch
        // waited for its page walk behind a copy's hundred instructions), and the current ones are copied
        // while their entries are still in cache (the copy re-points them). Checking a batch before its
        // copies answers as checking each just before its copy would: a copy only re-points the page it
        // copies, and a block holds at most one current copy of a logical page (its latest).
        const GATHER: usize = 128;
        let mut candidates = std::mem::take(&mut self.victim_pages);
        candidates.clear();
        for page in 0..self.pages_per_block {
            let lpn = self.p2l.get((first + page) as u64);
            if lpn != UNMAPPED {
                candidates.push((page, lpn));
            }
        }
        let mut copied = 0u16;
        let mut last = at;
        for batch in candidates.chunks(GATHER) {
            // Still current (not rewritten or trimmed since)? One bit per candidate.
            let mut current = [0u64; GATHER / 64];
            for (i, &(page, lpn)) in batch.iter().enumerate() {
                current[i / 64] |= ((self.l2p.get(lpn as u64).ppn == first + page) as u64) << (i % 64);
            }
            for (i, &(page, lpn)) in batch.iter().enumerate() {
                if current[i / 64] & (1 << (i % 64)) == 0 {
                    continue;
                }
                copied += 1;
                let read = flash.read(unit, self.page_type(victim, page), at);
                let done = self.program_page(lpn as u64, read, flash);
                last = last.max(done);
            }
        }
        self.valid[victim as usize] -= copied;
        if self.slc_block[victim as usize] {
            self.slc_valid_pages -= copied as u64;
        }
        self.counters.pages_read += copied as u64;
        self.counters.gc_pages_copied += copied as u64;
        self.victim_pages = candidates;
        self.erase_block(victim, last, flash);
        true
    }

    /// Background GC (`ftl.gc_idle_after`): from `from` until `until`, while the flash has nothing else to
    /// do, collect the emptiest closed blocks of each unit with fewer than `free_share` of its blocks free,
    /// one block per unit in turn. A block's collection is not interrupted, so the last may run a little
    /// past `until` (a command arriving then waits for it, as on a drive busy with GC). Returns the blocks
    /// collected.
    pub fn collect_idle(&mut self, from: SimTime, until: SimTime, free_share: f64, flash: &mut Flash) -> u64 {
        let blocks_per_unit = self.valid.len() / self.stripe_width as usize;
        let target = ((blocks_per_unit as f64 * free_share) as usize).min(blocks_per_unit);
        if target <= self.gc_reserve || self.in_gc {
            return 0;
        }
        self.in_gc = true;
        let mut collected = 0;
        loop {
            let mut progress = false;
            for unit in 0..self.stripe_width {
                let start = from.max(flash.all_idle_at());
                if start >= until {
                    self.in_gc = false;
                    return collected;
                }
                if self.free[unit as usize].len() < target && self.collect(unit, start, flash) {
                    collected += 1;
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        self.in_gc = false;
        collected
    }

    fn erase_block(&mut self, block: u32, at: SimTime, flash: &mut Flash) {
        let b = block as usize;
        let unit = self.unit_of_block(block);
        flash.erase(unit, at);
        self.counters.erases += 1;
        self.state[b] = BlockState::Free;
        if self.slc_block[b] {
            self.slc_valid_pages -= self.valid[b] as u64;
        }
        self.valid[b] = 0;
        if self.fold_cursor[unit as usize].0 == block {
            self.fold_cursor[unit as usize] = (NONE, 0); // emptied while being folded: nothing left to fold
        }
        if self.slc_block[b] {
            self.slc_used_pages = self.slc_used_pages.saturating_sub(self.pages_per_block as u64);
            self.slc_block[b] = false;
            if let Some(i) = self.slc_blocks.iter().position(|&x| x == block) {
                self.slc_blocks.remove(i);
            }
        }
        self.free[unit as usize].push(block);
    }

    /// `slc_cache.fold_while_writing` (once `fold_above` of the SLC capacity is in use): a host page just went
    /// into an SLC-mode block on `unit`, so `unit` folds its share of pages of its oldest closed SLC-mode block,
    /// from `at`, in the foreground. A still-valid page is read in SLC mode and programmed again in native mode
    /// on that unit (the block keeps its place: the cost, not the destination, is what shows); a page replaced
    /// since costs nothing. So a fresh fill pays for every page it wrote while a small span rewritten many
    /// times finds its old blocks nearly empty. Folding page by page interleaves it with the host's programs,
    /// as firmware does, instead of holding a die for a whole block. A folded block is native from then on.
    fn fold_while_writing(&mut self, unit: u32, at: SimTime, flash: &mut Flash) {
        let u = unit as usize;
        let open = self.active[u].0;
        if !self.slc_block[open as usize] || self.slc_used_pages as f64 <= self.fold_above_pages {
            return;
        }
        self.fold_owed[u] += if self.fold_by_valid {
            self.fold_per_page * (self.slc_valid_pages as f64 / self.slc_capacity_pages as f64).min(1.0)
        } else {
            self.fold_per_page
        };
        while self.fold_owed[u] >= 1.0 {
            let (block, page) = match self.fold_cursor[u] {
                (NONE, _) => match self.oldest_slc_block(unit) {
                    Some(block) => (block, 0),
                    None => {
                        self.fold_owed[u] = 0.0;
                        return;
                    }
                },
                cursor => cursor,
            };
            self.fold_owed[u] -= 1.0;
            self.fold_page(unit, block, page, at, flash);
            if page + 1 < self.pages_per_block {
                self.fold_cursor[u] = (block, page + 1);
                continue;
            }
            self.fold_cursor[u] = (NONE, 0);
            self.retire_folded(block);
        }
    }

    /// Fold page `page` of SLC-mode `block` on `unit` from `at`: a page still valid is read in SLC mode and
    /// programmed in native mode on that unit; a page replaced since costs nothing.
    fn fold_page(&mut self, unit: u32, block: u32, page: u32, at: SimTime, flash: &mut Flash) {
        let ppn = block * self.pages_per_block + page;
        let lpn = self.p2l.get(ppn as u64);
        if lpn != UNMAPPED && self.l2p.get(lpn as u64).ppn == ppn {
            let read = flash.read(unit, PageType::L, at);
            flash.program(unit, self.page_types[page as usize], read);
            self.counters.pages_read += 1;
            self.counters.pages_programmed += 1;
        }
    }

    /// Every page of `block` has been folded: it is native from then on and gives its SLC capacity back.
    fn retire_folded(&mut self, block: u32) {
        self.slc_block[block as usize] = false;
        self.slc_valid_pages -= self.valid[block as usize] as u64;
        self.slc_used_pages = self.slc_used_pages.saturating_sub(self.pages_per_block as u64);
        if let Some(i) = self.slc_blocks.iter().position(|&x| x == block) {
            self.slc_blocks.remove(i);
        }
    }

    /// `slc_cache.fold_batch`: the page about to be placed needs a new block on the frontier's unit and the
    /// SLC cache is full, so before it is placed every unit folds its `fold_batch_blocks` oldest closed
    /// SLC-mode blocks whole (from the page a foreground fold had reached), from `at`: the firmware frees
    /// SLC room in one blocking batch rather than writing in native mode. The folds are booked on the units
    /// ahead of the flush that needed the block, so its programs, and the writes waiting for buffer room
    /// behind them, wait for the whole batch. The block is then opened in SLC mode in the room freed.
    fn fold_batch_if_full(&mut self, at: SimTime, flash: &mut Flash) {
        let (open, next) = self.active[self.frontier_unit as usize];
        if (open != NONE && next < self.pages_per_block) || !self.slc_exhausted() {
            return;
        }
        // Each unit's blocks to fold, oldest first, with the page a foreground fold had reached on the first.
        let mut batch: Vec<Vec<(u32, u32)>> = Vec::with_capacity(self.stripe_width as usize);
        for unit in 0..self.stripe_width {
            let cursor = self.fold_cursor[unit as usize];
            let blocks = self
                .slc_blocks
                .iter()
                .copied()
                .filter(|&b| self.unit_of_block(b) == unit && self.state[b as usize] == BlockState::Closed)
                .take(self.fold_batch_blocks as usize)
                .map(|b| (b, if cursor.0 == b { cursor.1 } else { 0 }))
                .collect();
            batch.push(blocks);
        }
        // Page by page across the units, as the dies fold in parallel: the channel buses are then booked in
        // time order (a bus remembers only a few idle gaps, so one unit's whole batch booked first would
        // push the other units' transfers behind it and serialize the dies of a channel).
        for step in 0..self.fold_batch_blocks * self.pages_per_block {
            let (k, page) = ((step / self.pages_per_block) as usize, step % self.pages_per_block);
            for unit in 0..self.stripe_width {
                if let Some(&(block, first)) = batch[unit as usize].get(k) {
                    if page >= first {
                        self.fold_page(unit, block, page, at, flash);
                    }
                }
            }
        }
        for (unit, blocks) in batch.into_iter().enumerate() {
            for (block, _) in blocks {
                if self.fold_cursor[unit].0 == block {
                    self.fold_cursor[unit] = (NONE, 0);
                }
                self.retire_folded(block);
                self.counters.batch_folded_blocks += 1;
            }
        }
    }

    /// `unit`'s oldest closed SLC-mode block.
    fn oldest_slc_block(&self, unit: u32) -> Option<u32> {
        self.slc_blocks
            .iter()
            .copied()
            .find(|&b| self.unit_of_block(b) == unit && self.state[b as usize] == BlockState::Closed)
    }

    /// Idle-time folding: the oldest SLC-mode blocks are rewritten in native mode (counted as NAND writes,
    /// their pages read at native latencies from then on), which frees SLC capacity. `pages` is how much
    /// the fold rate allowed during the idle time; whole blocks are folded, the remainder carries over.
    pub fn fold_slc(&mut self, pages: u64) -> u64 {
        self.fold_credit += pages;
        let mut folded = 0;
        while self.fold_credit >= self.pages_per_block as u64 {
            let Some(block) = self.slc_blocks.pop_front() else {
                self.fold_credit = 0;
                break;
            };
            self.fold_credit -= self.pages_per_block as u64;
            self.slc_block[block as usize] = false;
            self.slc_valid_pages -= self.valid[block as usize] as u64;
            self.slc_used_pages = self.slc_used_pages.saturating_sub(self.pages_per_block as u64);
            let valid = self.valid[block as usize] as u64;
            self.counters.pages_programmed += valid;
            folded += valid;
        }
        folded
    }
}

#[cfg(test)]
mod packed_tests {
    use super::*;

    #[test]
    fn packed_values_round_trip_across_word_boundaries() {
        for max in [1u64, 5, 1000, 62_500_000, (u32::MAX - 4) as u64] {
            let mut a = PackedArray::new(200_000, max);
            assert_eq!(a.get(7), UNMAPPED, "fresh entries are unmapped");
            let value = |i: u64| ((i * 2_654_435_761) % (max + 1)) as u32;
            for i in (0..200_000).step_by(7) {
                a.set(i, value(i));
            }
            for i in 0..200_000u64 {
                let want = if i % 7 == 0 { value(i) } else { UNMAPPED };
                assert_eq!(a.get(i), want, "entry {i} with max {max}");
            }
            a.set(14, UNMAPPED);
            assert_eq!(a.get(14), UNMAPPED);
            assert_eq!(a.get(21), value(21), "neighbours untouched");
        }
    }

    #[test]
    fn a_256_gb_drive_needs_26_bits_a_page() {
        let a = PackedArray::new(1, 62_500_000);
        assert_eq!(a.width, 26);
    }
}
