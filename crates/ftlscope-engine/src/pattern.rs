//! Offset generators: where each request of a queue goes.
//!
//! Generators never allocate after construction, so they can run in the engine's hot loop. Patterns that
//! walk the range in order (sequential, permutation, permuted windows, strided) split the range evenly
//! between queues, so N queues together still touch every block once per pass; random patterns (random,
//! hot set, zipf) use the whole range in every queue, each queue with its own seed.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::workload::{Pattern, Workload};

/// A bijection on `[0, n)` that needs O(1) memory: a 4-round Feistel network over the next even power of
/// two, with cycle walking back into `[0, n)`.
///
/// Written by hand because a whole-drive random fill (62.5 M blocks on a 256 GB drive) must visit every
/// block once without storing a 500 MB shuffled array, and no maintained crate offers a seeded
/// format-preserving permutation of arbitrary domain size.
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    half_mask: u64,
    keys: [u64; 4],
}

fn mix64(mut z: u64) -> u64 {
    // splitmix64's finaliser: a fast, well-distributed 64-bit mixer.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Permutation {
    pub fn new(n: u64, seed: u64) -> Permutation {
        assert!(n > 0, "a permutation needs a non-empty domain");
        let bits = (64 - (n - 1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        let mut keys = [0u64; 4];
        for (i, key) in keys.iter_mut().enumerate() {
            *key = mix64(seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1)));
        }
        Permutation { n, half_bits, half_mask: (1u64 << half_bits) - 1, keys }
    }

    fn encrypt(&self, x: u64) -> u64 {
        let mut left = x >> self.half_bits;
        let mut right = x & self.half_mask;
        for key in self.keys {
            let next = left ^ (mix64(right ^ key) & self.half_mask);
            left = right;
            right = next;
        }
        (left << self.half_bits) | right
    }

    /// The image of `i` (which must be below `n`).
    pub fn apply(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        // Cycle walking: the Feistel domain is at most 4n, so this loops a few times on average.
        let mut x = self.encrypt(i);
        while x >= self.n {
            x = self.encrypt(x);
        }
        x
    }
}

enum Walk {
    /// `lane` of `lanes` threads sharing one stream takes every `lanes`-th request of it.
    Sequential {
        pos: u64,
        lane: u64,
        lanes: u64,
    },
    Random,
    Permutation {
        perm: Permutation,
        pass: u64,
        seed: u64,
    },
    PermutedWindows {
        window: u64,
        order: Vec<u64>,
    },
    Strided {
        stride: u64,
    },
    Offsets {
        offsets: Vec<u64>,
    },
    HotSet {
        hot_first_slot: u64,
        hot_slots: u64,
        share: f64,
    },
    Zipf {
        zipf: Zipf<f64>,
        scatter: Permutation,
    },
}

/// The offsets of one queue.
pub struct OffsetGenerator {
    walk: Walk,
    /// First byte of this generator's range, alignment offset included.
    start: u64,
    /// Length of the range in bytes.
    length: u64,
    /// Offsets are multiples of `grain` (the smallest request size) from `start`.
    grain: u64,
    slots: u64,
    counter: u64,
    rng: SmallRng,
}

impl OffsetGenerator {
    /// The generator for `queue` of `workload` on a target of `target_size` bytes. The workload must have
    /// been validated against the target.
    pub fn new(workload: &Workload, target_size: u64, queue: u32) -> OffsetGenerator {
        OffsetGenerator::for_thread(workload, target_size, queue, 1)
    }

    /// The generator for thread `thread` when every `lanes` consecutive threads share one queue's
    /// sequential stream (psync keeping a queue depth with threads): the workload's queues are
    /// `workload.queues / lanes`, and thread `thread` takes every `lanes`-th request of queue
    /// `thread / lanes`'s stream. With `lanes` = 1 it is [`OffsetGenerator::new`].
    pub fn for_thread(workload: &Workload, target_size: u64, thread: u32, lanes: u32) -> OffsetGenerator {
        let lanes = lanes.max(1);
        let (queue, lane) = (thread / lanes, (thread % lanes) as u64);
        let (range_start, range_end) = workload.resolved_range(target_size);
        let grain = workload.min_size();
        let usable_start = range_start + workload.align_offset;
        let usable_len = range_end.saturating_sub(usable_start);
        let mut seed = mix64(workload.seed ^ (queue as u64).wrapping_mul(0xd6e8_feb8_6659_fd93));
        if lanes > 1 {
            seed = mix64(seed ^ lane.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        let queues = (workload.queues / lanes).max(1) as u64;
        let (start, length) = if workload.pattern.splits_range() {
            // Each queue gets an equal, grain-aligned share of the range.
            let share = (usable_len / queues) / grain * grain;
            (usable_start + share * queue as u64, share)
        } else {
            (usable_start, usable_len)
        };
        let slots = (length / grain).max(1);
        let walk = match &workload.pattern {
            Pattern::Sequential {} => Walk::Sequential { pos: lane * grain, lane, lanes: lanes as u64 },
            Pattern::Random {} => Walk::Random,
            Pattern::Permutation {} => Walk::Permutation { perm: Permutation::new(slots, seed), pass: 0, seed },
            Pattern::PermutedWindows { window } => {
                let window = (*window as u64).min(slots).max(1);
                Walk::PermutedWindows { window, order: (0..window).collect() }
            }
            Pattern::Strided { stride } => Walk::Strided { stride: *stride },
            Pattern::Offsets { offsets } => Walk::Offsets { offsets: offsets.clone() },
            Pattern::HotSet { hot_start, hot_length, hot_share } => Walk::HotSet {
                hot_first_slot: hot_start / grain,
                hot_slots: (hot_length / grain).max(1),
                share: *hot_share,
            },
            Pattern::Zipf { theta } => Walk::Zipf {
                zipf: Zipf::new(slots as f64, *theta).expect("validated zipf parameters"),
                scatter: Permutation::new(slots, seed ^ 0x5a5a),
            },
        };
        OffsetGenerator { walk, start, length, grain, slots, counter: 0, rng: SmallRng::seed_from_u64(seed) }
    }

    /// The byte offset of the next request of `size` bytes.
    #[inline]
    pub fn next_offset(&mut self, size: u64) -> u64 {
        let k = self.counter;
        self.counter += 1;
        let slot = match &mut self.walk {
            Walk::Sequential { pos, lane, lanes } => {
                if *pos + size > self.length {
                    // Back to the start: this lane's first request (the first one, in a range that small).
                    *pos = if (*lane + 1) * size <= self.length { *lane * size } else { 0 };
                }
                let offset = self.start + *pos;
                *pos += size * *lanes;
                return offset;
            }
            Walk::Random => self.rng.random_range(0..self.slots),
            Walk::Permutation { perm, pass, seed } => {
                let i = k % self.slots;
                let this_pass = k / self.slots;
                if this_pass != *pass {
                    // A new pass visits the blocks in a fresh order.
                    *pass = this_pass;
                    *perm = Permutation::new(self.slots, mix64(*seed ^ this_pass));
                }
                perm.apply(i)
            }
            Walk::PermutedWindows { window, order } => {
                let w = *window;
                let windows = (self.slots / w).max(1);
                let j = k % (windows * w);
                let inside = j % w;
                if inside == 0 {
                    // Fisher-Yates over the preallocated window: no allocation in the hot loop.
                    for i in (1..order.len()).rev() {
                        let pick = self.rng.random_range(0..=i);
                        order.swap(i, pick);
                    }
                }
                (j / w) * w + order[inside as usize]
            }
            Walk::Strided { stride } => {
                let pos = (k.wrapping_mul(*stride)) % self.length;
                pos / self.grain
            }
            Walk::Offsets { offsets } => (offsets[(k % offsets.len() as u64) as usize] % self.length) / self.grain,
            Walk::HotSet { hot_first_slot, hot_slots, share } => {
                let cold_slots = self.slots.saturating_sub(*hot_slots);
                if cold_slots == 0 || self.rng.random::<f64>() < *share {
                    *hot_first_slot + self.rng.random_range(0..*hot_slots)
                } else {
                    let c = self.rng.random_range(0..cold_slots);
                    if c < *hot_first_slot {
                        c
                    } else {
                        c + *hot_slots
                    }
                }
            }
            Walk::Zipf { zipf, scatter } => {
                let rank = zipf.sample(&mut self.rng) as u64;
                scatter.apply(rank.clamp(1, self.slots) - 1)
            }
        };
        let mut pos = slot * self.grain;
        if pos + size > self.length {
            // A larger request near the end: pull it back so it stays inside the range.
            pos = (self.length - size) / self.grain * self.grain;
        }
        self.start + pos
    }

    /// A uniform random index in `[0, n)` from this queue's generator (used for size and op choice).
    #[inline]
    pub fn pick(&mut self, n: u64) -> u64 {
        self.rng.random_range(0..n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn workload(pattern: Pattern, queues: u32) -> Workload {
        Workload { pattern, queues, ..Workload::default() }
    }

    #[test]
    fn permutation_is_a_bijection_for_awkward_sizes() {
        for n in [1u64, 2, 3, 7, 100, 1000, 4097] {
            let p = Permutation::new(n, 42);
            let image: HashSet<u64> = (0..n).map(|i| p.apply(i)).collect();
            assert_eq!(image.len() as u64, n, "n = {n}");
            assert!(image.iter().all(|&x| x < n));
        }
    }

    #[test]
    fn permutation_depends_on_the_seed_and_is_not_identity() {
        let a: Vec<u64> = (0..64).map(|i| Permutation::new(64, 1).apply(i)).collect();
        let b: Vec<u64> = (0..64).map(|i| Permutation::new(64, 2).apply(i)).collect();
        assert_ne!(a, b);
        assert_ne!(a, (0..64).collect::<Vec<_>>());
    }

    #[test]
    fn sequential_walks_and_wraps() {
        let w = workload(Pattern::Sequential {}, 1);
        let mut g = OffsetGenerator::new(&w, 4 * 4096, 0);
        let offs: Vec<u64> = (0..6).map(|_| g.next_offset(4096)).collect();
        assert_eq!(offs, vec![0, 4096, 8192, 12288, 0, 4096]);
    }

    #[test]
    fn sequential_queues_split_the_range() {
        let w = workload(Pattern::Sequential {}, 2);
        let mut g1 = OffsetGenerator::new(&w, 8 * 4096, 1);
        assert_eq!(g1.next_offset(4096), 4 * 4096);
    }

    #[test]
    fn permutation_pattern_touches_every_block_once_across_queues() {
        let w = workload(Pattern::Permutation {}, 3);
        let size = 96 * 4096;
        let mut seen = HashSet::new();
        for q in 0..3 {
            let mut g = OffsetGenerator::new(&w, size, q);
            for _ in 0..32 {
                assert!(seen.insert(g.next_offset(4096)));
            }
        }
        assert_eq!(seen.len(), 96);
    }

    #[test]
    fn permuted_windows_keep_window_order() {
        let w = workload(Pattern::PermutedWindows { window: 4 }, 1);
        let mut g = OffsetGenerator::new(&w, 64 * 4096, 0);
        let blocks: Vec<u64> = (0..16).map(|_| g.next_offset(4096) / 4096).collect();
        for (i, chunk) in blocks.chunks(4).enumerate() {
            let mut sorted = chunk.to_vec();
            sorted.sort();
            let expect: Vec<u64> = (i as u64 * 4..i as u64 * 4 + 4).collect();
            assert_eq!(sorted, expect);
        }
        assert_ne!(blocks, (0..16).collect::<Vec<_>>(), "windows are shuffled");
    }

    #[test]
    fn strided_steps_by_the_stride() {
        let w = workload(Pattern::Strided { stride: 3 * 4096 }, 1);
        let mut g = OffsetGenerator::new(&w, 8 * 4096, 0);
        let blocks: Vec<u64> = (0..4).map(|_| g.next_offset(4096) / 4096).collect();
        assert_eq!(blocks, vec![0, 3, 6, 1]);
    }

    #[test]
    fn offsets_replay_the_list_in_order() {
        let w = workload(Pattern::Offsets { offsets: vec![5 * 4096, 0, 2 * 4096] }, 1);
        let mut g = OffsetGenerator::new(&w, 8 * 4096, 0);
        let blocks: Vec<u64> = (0..5).map(|_| g.next_offset(4096) / 4096).collect();
        assert_eq!(blocks, vec![5, 0, 2, 5, 0]);
    }

    #[test]
    fn hot_set_concentrates_requests() {
        let pattern = Pattern::HotSet { hot_start: 0, hot_length: 16 * 4096, hot_share: 0.9 };
        let w = workload(pattern, 1);
        let mut g = OffsetGenerator::new(&w, 1024 * 4096, 0);
        let hot = (0..10_000).filter(|_| g.next_offset(4096) < 16 * 4096).count();
        assert!((8_700..9_300).contains(&hot), "hot share {hot}");
    }

    #[test]
    fn random_stays_in_range_and_is_aligned() {
        let mut w = workload(Pattern::Random {}, 1);
        w.range.start = 4096;
        w.range.length = 100 * 4096;
        w.align_offset = 512;
        w.sizes = vec![4096, 8192];
        let mut g = OffsetGenerator::new(&w, 200 * 4096, 0);
        for _ in 0..10_000 {
            let o = g.next_offset(8192);
            assert!(o >= 4096 + 512 && o + 8192 <= 101 * 4096, "{o}");
            assert_eq!((o - 512) % 4096, 0);
        }
    }

    #[test]
    fn zipf_favours_a_few_blocks() {
        let w = workload(Pattern::Zipf { theta: 1.2 }, 1);
        let mut g = OffsetGenerator::new(&w, 4096 * 4096, 0);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..20_000 {
            *counts.entry(g.next_offset(4096)).or_insert(0u32) += 1;
        }
        let top = counts.values().max().copied().unwrap();
        assert!(top > 1000, "most popular block got {top} of 20000");
    }
}
