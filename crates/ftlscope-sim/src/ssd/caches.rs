//! The controller's small caches: the read buffer (P7) and the mapping-table cache of DRAM-less drives.

use std::collections::HashMap;

/// Recently read pages served from controller RAM. A page is in the buffer while fewer than `capacity`
/// pages have been read after it (FIFO replacement).
pub struct ReadBuffer {
    capacity_pages: u64,
    stamps: HashMap<u64, u64>,
    counter: u64,
}

impl ReadBuffer {
    pub fn new(capacity_pages: u64) -> ReadBuffer {
        ReadBuffer { capacity_pages, stamps: HashMap::new(), counter: 0 }
    }

    pub fn contains(&self, lpn: u64) -> bool {
        self.stamps.get(&lpn).is_some_and(|&s| self.counter - s < self.capacity_pages)
    }

    pub fn insert(&mut self, lpn: u64) {
        self.counter += 1;
        self.stamps.insert(lpn, self.counter);
        if self.stamps.len() as u64 > 4 * self.capacity_pages + 1024 {
            let (counter, cap) = (self.counter, self.capacity_pages);
            self.stamps.retain(|_, s| counter - *s < cap);
        }
    }

    pub fn clear(&mut self) {
        self.stamps.clear();
    }
}

const NONE: usize = usize::MAX;

/// Exact LRU over mapping-table regions (1024 entries = one 4 KiB translation page each).
pub struct MappingCache {
    capacity: usize,
    slot_of: HashMap<u64, usize>,
    region: Vec<u64>,
    prev: Vec<usize>,
    next: Vec<usize>,
    /// Per slot: the region's entries changed since it was loaded (only writes that look up their entry
    /// mark them, `ftl.write_map_lookup`), so evicting it means programming its translation page.
    dirty: Vec<bool>,
    head: usize,
    tail: usize,
}

pub const REGION_PAGES: u64 = 1024;

/// What one mapping-cache lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapAccess {
    pub hit: bool,
    /// The miss pushed out a region whose entries writes had changed.
    pub evicted_dirty: bool,
}

impl MappingCache {
    /// A cache holding `bytes` of mapping table (4 bytes per page).
    pub fn new(bytes: u64) -> MappingCache {
        let capacity = ((bytes / 4) / REGION_PAGES).max(1) as usize;
        MappingCache {
            capacity,
            slot_of: HashMap::new(),
            region: Vec::new(),
            prev: Vec::new(),
            next: Vec::new(),
            dirty: Vec::new(),
            head: NONE,
            tail: NONE,
        }
    }

    fn unlink(&mut self, slot: usize) {
        let (p, n) = (self.prev[slot], self.next[slot]);
        if p != NONE {
            self.next[p] = n
        } else {
            self.head = n
        }
        if n != NONE {
            self.prev[n] = p
        } else {
            self.tail = p
        }
    }

    fn push_front(&mut self, slot: usize) {
        self.prev[slot] = NONE;
        self.next[slot] = self.head;
        if self.head != NONE {
            self.prev[self.head] = slot;
        }
        self.head = slot;
        if self.tail == NONE {
            self.tail = slot;
        }
    }

    /// Look up the entry of `lpn`; true on a hit. A miss loads the region, evicting the least recent.
    pub fn access(&mut self, lpn: u64) -> bool {
        self.access_marking(lpn, false).hit
    }

    /// Look up the entry of `lpn` and, for a write, mark its region changed. Says whether it hit and whether
    /// the miss evicted a changed region (whose translation page must be programmed first).
    pub fn access_marking(&mut self, lpn: u64, write: bool) -> MapAccess {
        let region = lpn / REGION_PAGES;
        if let Some(&slot) = self.slot_of.get(&region) {
            if self.head != slot {
                self.unlink(slot);
                self.push_front(slot);
            }
            self.dirty[slot] |= write;
            return MapAccess { hit: true, evicted_dirty: false };
        }
        let mut evicted_dirty = false;
        let slot = if self.region.len() < self.capacity {
            self.region.push(region);
            self.prev.push(NONE);
            self.next.push(NONE);
            self.dirty.push(false);
            self.region.len() - 1
        } else {
            let victim = self.tail;
            self.unlink(victim);
            self.slot_of.remove(&self.region[victim]);
            self.region[victim] = region;
            evicted_dirty = self.dirty[victim];
            victim
        };
        self.dirty[slot] = write;
        self.slot_of.insert(region, slot);
        self.push_front(slot);
        MapAccess { hit: false, evicted_dirty }
    }

    pub fn clear(&mut self) {
        self.slot_of.clear();
        self.region.clear();
        self.prev.clear();
        self.next.clear();
        self.dirty.clear();
        self.head = NONE;
        self.tail = NONE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_buffer_keeps_the_last_capacity_pages() {
        let mut rb = ReadBuffer::new(4);
        for lpn in 0..4 {
            rb.insert(lpn);
        }
        assert!(rb.contains(0));
        rb.insert(4);
        assert!(!rb.contains(0));
        assert!(rb.contains(1) && rb.contains(4));
    }

    #[test]
    fn mapping_cache_is_lru() {
        let mut mc = MappingCache::new(2 * 4 * REGION_PAGES); // two regions
        assert!(!mc.access(0));
        assert!(!mc.access(REGION_PAGES));
        assert!(mc.access(5)); // region 0 again: now most recent
        assert!(!mc.access(2 * REGION_PAGES)); // evicts region 1
        assert!(mc.access(0));
        assert!(!mc.access(REGION_PAGES));
    }

    #[test]
    fn evicting_a_region_a_write_changed_says_so() {
        let mut mc = MappingCache::new(2 * 4 * REGION_PAGES); // two regions
        assert_eq!(mc.access_marking(0, true), MapAccess { hit: false, evicted_dirty: false });
        assert!(!mc.access(REGION_PAGES)); // clean
        assert_eq!(mc.access_marking(2 * REGION_PAGES, false), MapAccess { hit: false, evicted_dirty: true });
        assert_eq!(mc.access_marking(3 * REGION_PAGES, false), MapAccess { hit: false, evicted_dirty: false });
        assert!(mc.access_marking(3 * REGION_PAGES + 1, true).hit);
        mc.clear();
        assert_eq!(mc.access_marking(0, false), MapAccess { hit: false, evicted_dirty: false });
    }
}
