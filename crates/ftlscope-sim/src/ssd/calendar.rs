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

use crate::time::{Nanos, SimTime};

const GAPS: usize = 8;

#[derive(Clone, Default)]
pub struct Calendar {
    /// The bus is free from here on.
    free_at: u64,
    /// Idle gaps `[start, end)` before `free_at`, in time order. Gaps never overlap, so ordering them by
    /// start orders them by end too: the first one that fits is the earliest, and the first one is the
    /// one to forget when the calendar is full.
    gaps: [(u64, u64); GAPS],
    len: usize,
}

impl Calendar {
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
        for i in 0..self.len {
            let (gs, ge) = self.gaps[i];
            let start = gs.max(e);
            if start + d <= ge {
                // What is left of the gap on either side of the booking takes its place, in order.
                match (start > gs, start + d < ge) {
                    (true, true) => {
                        self.gaps[i] = (gs, start);
                        self.insert_gap(i + 1, (start + d, ge));
                    }
                    (true, false) => self.gaps[i] = (gs, start),
                    (false, true) => self.gaps[i] = (start + d, ge),
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
        if self.len == GAPS {
            if at == 0 {
                return; // it would end before every gap kept: it is the one forgotten
            }
            self.remove_gap(0);
            at -= 1;
        }
        self.gaps.copy_within(at..self.len, at + 1);
        self.gaps[at] = gap;
        self.len += 1;
    }

    fn remove_gap(&mut self, i: usize) {
        self.gaps.copy_within(i + 1..self.len, i);
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
}
