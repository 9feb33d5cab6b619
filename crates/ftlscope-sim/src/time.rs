//! Units as types: virtual time, byte counts and rates, so a page count is never passed as bytes.

use std::ops::{Add, AddAssign, Sub};

/// Virtual time in nanoseconds since the device was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const NEVER: SimTime = SimTime(u64::MAX);

    pub fn ns(self) -> u64 {
        self.0
    }

    pub fn max(self, other: SimTime) -> SimTime {
        if self.0 >= other.0 {
            self
        } else {
            other
        }
    }
}

/// A span of virtual time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Add<Nanos> for SimTime {
    type Output = SimTime;
    fn add(self, d: Nanos) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}

impl AddAssign<Nanos> for SimTime {
    fn add_assign(&mut self, d: Nanos) {
        self.0 = self.0.saturating_add(d.0);
    }
}

impl Sub for SimTime {
    type Output = Nanos;
    fn sub(self, other: SimTime) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(other.0))
    }
}

/// A transfer rate in bytes per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Rate(pub f64);

impl Rate {
    /// How long `bytes` take at this rate (zero rate = instantaneous is never wanted: treated as infinite).
    pub fn time_for(self, bytes: u64) -> Nanos {
        if self.0 <= 0.0 {
            return Nanos(0);
        }
        Nanos((bytes as f64 * 1e9 / self.0).round() as u64)
    }
}
