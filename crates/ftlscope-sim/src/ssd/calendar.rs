//! A shared transfer resource (a channel bus, the host link) booked by interval.
//!
//! Requests reserve resources when they are submitted, but their data becomes ready at different times: a
//! read of a slow page submitted first must not hold the bus against a fast page submitted after it. So a
//! bus is not a single "free at" watermark (which would serve transfers in submission order): a transfer
//! takes the first idle gap long enough at or after the moment its data is ready.
//!
//! The calendar keeps the time after which the bus is free, plus the most recent idle gaps before it (a
//! fixed handful, so booking costs a few comparisons and never allocates: an interval tree made garbage
//! collection five times slower). Gaps beyond the handful are forgotten, which can only make a transfer
//! wait a little longer than it would have to; the gaps that matter are the recent ones. Written by hand:
//! no crate offers bounded interval booking.
//!
//! The handful is 8 for the channel buses and the command processors (a fixed array: they are booked in
//! the garbage collector's hot loop and cloned to compare processors). The host link's is the device's
//! `controller.host_link_gaps` (a [`HostLink`], sized once): a real controller's DMA sends each read's data
//! when it is ready, so at a deep queue a read whose die is idle leaves long before the reads queued
//! behind busy dies; with too few gaps remembered it is booked after all of them instead.

use crate::time::{Nanos, SimTime};

const GAPS: usize = 8;

/// The idle gaps a calendar remembers: a fixed array, or (the host link) a slice sized by the device.
pub type Gaps = [(u64, u64); GAPS];

/// The host link's calendar: as many gaps as `controller.host_link_gaps` says.
pub type HostLink = Calendar<Box<[(u64, u64)]>>;

#[derive(Clone)]
pub struct Calendar<S = Gaps> {
    /// The bus is free from here on.
    free_at: u64,
    /// Idle gaps `[start, end)` before `free_at`, in time order. Gaps never overlap, so ordering them by
    /// start orders them by end too: the first one that fits is the earliest, and the first one is the
    /// one to forget when the calendar is full.
    gaps: S,
    len: usize,
}

impl Default for Calendar {
    fn default() -> Calendar {
        Calendar { free_at: 0, gaps: [(0, 0); GAPS], len: 0 }
    }
}

impl HostLink {
    /// A host link that remembers `gaps` idle gaps (at least one).
    pub fn with_gaps(gaps: u32) -> HostLink {
        Calendar { free_at: 0, gaps: vec![(0, 0); gaps.max(1) as usize].into_boxed_slice(), len: 0 }
    }
}

impl<S: AsRef<[(u64, u64)]> + AsMut<[(u64, u64)]>> Calendar<S> {
    /// Book `len` at the first free moment at or after `earliest`; returns when the booking ends.
    #[inline]
    pub fn book(&mut self, earliest: SimTime, len: Nanos) -> SimTime {
        let (e, d) = (earliest.0, len.0);
        if e >= self.free_at {
            if e > self.free_at {
                // After every remembered gap: it goes last.
                self.insert_gap(self.len, (self.free_at, e));
            }
            self.free_at = e + d;
            return SimTime(e + d);
        }
        self.book_in_gap(e, d)
    }

    /// A booking that wants to start before `free_at`: the earliest remembered gap it fits in, or after
    /// everything booked.
    fn book_in_gap(&mut self, e: u64, d: u64) -> SimTime {
        // Gaps that end before `e` cannot take the booking: skip them by bisection (a host link that keeps
        // hundreds of gaps holds many that have passed).
        let first = self.gaps.as_ref()[..self.len].partition_point(|&(_, ge)| ge < e);
        for i in first..self.len {
            let (gs, ge) = self.gaps.as_ref()[i];
            let start = gs.max(e);
            if start + d <= ge {
                // What is left of the gap on either side of the booking takes its place, in order.
                match (start > gs, start + d < ge) {
                    (true, true) => {
                        self.gaps.as_mut()[i] = (gs, start);
                        self.insert_gap(i + 1, (start + d, ge));
                    }
                    (true, false) => self.gaps.as_mut()[i] = (gs, start),
                    (false, true) => self.gaps.as_mut()[i] = (start + d, ge),
                    (false, false) => self.remove_gap(i),
                }
                return SimTime(start + d);
            }
        }
        self.free_at += d;
        SimTime(self.free_at)
    }

    /// Put `gap` at position `at` (the caller keeps time order). Gaps that have passed need no pruning: a
    /// booking never starts before the submission that makes it, so a passed gap can never fit, and a
    /// full calendar forgets the gap that ends first (the oldest), which is always the first.
    fn insert_gap(&mut self, mut at: usize, gap: (u64, u64)) {
        if self.len == self.gaps.as_ref().len() {
            if at == 0 {
                return; // it would end before every gap kept: it is the one forgotten
            }
            self.remove_gap(0);
            at -= 1;
        }
        let gaps = self.gaps.as_mut();
        gaps.copy_within(at..self.len, at + 1);
        gaps[at] = gap;
        self.len += 1;
    }

    fn remove_gap(&mut self, i: usize) {
        self.gaps.as_mut().copy_within(i + 1..self.len, i);
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_requests_fill_earlier_gaps() {
        let mut c = Calendar::default();
        assert_eq!(c.book(SimTime(100), Nanos(10)), SimTime(110)); // booked [100, 110)
        assert_eq!(c.book(SimTime(50), Nanos(10)), SimTime(60)); // fits before it
        assert_eq!(c.book(SimTime(95), Nanos(10)), SimTime(120)); // would overlap: after it
        assert_eq!(c.book(SimTime(60), Nanos(30)), SimTime(90)); // the gap [60, 95) holds 30
        assert_eq!(c.book(SimTime(60), Nanos(10)), SimTime(100)); // [90, 100) is exactly 10 long
        assert_eq!(c.book(SimTime(60), Nanos(10)), SimTime(130)); // no gap left before 120
    }

    #[test]
    fn a_full_calendar_forgets_the_oldest_gap() {
        let mut c = Calendar::default();
        for i in 0..=GAPS as u64 + 1 {
            c.book(SimTime(i * 100), Nanos(10)); // gaps [10, 100), [110, 200), ... one more than it keeps
        }
        assert_eq!(c.book(SimTime(20), Nanos(5)), SimTime(115), "the first gap was forgotten");
        assert_eq!(c.book(SimTime(210), Nanos(5)), SimTime(215));
    }

    #[test]
    fn a_host_link_of_eight_gaps_books_as_the_fixed_calendar() {
        // The default `controller.host_link_gaps` must keep every completion time: same bookings, same answers.
        let (mut fixed, mut link) = (Calendar::default(), HostLink::with_gaps(GAPS as u32));
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for i in 0..10_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (earliest, len) = (SimTime(i * 50 + x % 2_000), Nanos(1 + (x >> 32) % 40));
            assert_eq!(fixed.book(earliest, len), link.book(earliest, len), "booking {i}");
        }
    }

    #[test]
    fn a_host_link_with_more_gaps_remembers_the_early_ones() {
        let (mut eight, mut many) = (HostLink::with_gaps(8), HostLink::with_gaps(32));
        for i in 1..=20u64 {
            eight.book(SimTime(i * 100), Nanos(10)); // gaps [0, 100), [110, 200), ... [1910, 2000)
            many.book(SimTime(i * 100), Nanos(10));
        }
        assert_eq!(many.book(SimTime(20), Nanos(5)), SimTime(25), "the gap [0, 100) is still there");
        assert_eq!(eight.book(SimTime(20), Nanos(5)), SimTime(1215), "only the latest eight gaps are kept");
    }
}

#[cfg(test)]
#[path = "host_link_tests.rs"]
mod host_link_tests;
