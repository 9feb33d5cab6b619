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
    /// Idle gaps `[start, end)` before `free_at`, unordered.
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
                self.remember_gap(self.free_at, e);
            }
            self.free_at = e + d;
            return SimTime(e + d);
        }
        // Earliest fitting start among the remembered gaps.
        let mut best: Option<(usize, u64)> = None;
        for (i, &(gs, ge)) in self.gaps[..self.len].iter().enumerate() {
            let start = gs.max(e);
            if start + d <= ge && best.is_none_or(|(_, b)| start < b) {
                best = Some((i, start));
            }
        }
        match best {
            Some((i, start)) => {
                let (gs, ge) = self.gaps[i];
                self.forget_gap(i);
                if start > gs {
                    self.remember_gap(gs, start);
                }
                if start + d < ge {
                    self.remember_gap(start + d, ge);
                }
                SimTime(start + d)
            }
            None => {
                self.free_at += d;
                SimTime(self.free_at)
            }
        }
    }

    /// Gaps that have passed need no pruning: a booking never starts before the submission that makes it,
    /// so a passed gap can never fit, and a full calendar replaces the gap that ends first.
    fn remember_gap(&mut self, start: u64, end: u64) {
        if self.len < GAPS {
            self.gaps[self.len] = (start, end);
            self.len += 1;
            return;
        }
        // Full: replace the gap that ends first (the oldest), if the new one ends later.
        let (oldest, _) = self.gaps.iter().enumerate().min_by_key(|(_, g)| g.1).expect("non-empty");
        if end > self.gaps[oldest].1 {
            self.gaps[oldest] = (start, end);
        }
    }

    fn forget_gap(&mut self, i: usize) {
        self.len -= 1;
        self.gaps[i] = self.gaps[self.len];
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
