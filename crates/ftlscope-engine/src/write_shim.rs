//! The write rate-limiting shim of "Fantastic SSD Internals and How to Learn and Use Them" (§5.2, Newt):
//! writes are held back and let into the drive no faster than its write buffer drains, so the buffer does not
//! fill and the drive does not stop everything for a full-buffer flush whose ripple reaches the reads.
//!
//! The paper's four steps, and how this module reads them:
//!
//! 1. **Flush speed** `S` = write buffer capacity (P8) / internal flush window (P10), e.g. 11.5 MB / 200 ms =
//!    57.5 MB/s on N2T-I. Given as a setting ([`WriteShimSettings::flush_speed_bps`]); a queue of a run with
//!    several queues takes its share, `S / queues`, as a rate limit does.
//! 2. **Write intensity** `W`: the bytes of writes that arrived at the shim over the last monitored period `P`
//!    (default 100 ms), per second. The paper monitors "a recent time period"; a sliding window of exactly `P`
//!    would need every write's time, so this uses the usual two-bucket estimate of one (the current period's
//!    bytes plus the previous period's, weighted by how much of it the sliding window still covers), which needs
//!    four counters and no history. Arrivals are counted, not what the shim lets through: pacing must not hide
//!    the demand it paces.
//! 3. **Urgency** `u = W / S`.
//! 4. **Delay**: below `u = 0.5` a write goes when it arrives. From 0.5 on, writes are let in one after another,
//!    each `T` after the one before it:
//!
//!    `T = size / S × min(u, 1) × (1 + r)`, with `r` = the reads' share of the bytes that arrived over the period.
//!
//!    The paper says only that `T` (0.1-1 ms on its drives) comes from "a rate-limiting function that
//!    incorporates the proportion of the recent read/write intensity and the flush urgency". Our reading: `size /
//!    S` is the time the drive needs to digest the write at its flush speed, so spacing writes by it lets them in
//!    at the flush speed and the buffer never fills; `min(u, 1)` relaxes the spacing while the writes stay below
//!    the flush speed (only their bursts are smoothed); `1 + r` slows them down to as little as half the flush
//!    speed when reads dominate, because the drive drains its buffer only while it is idle and reads take that
//!    time away (a 4 KiB write at 57.5 MB/s is 71 us apart; 64 KiB, 1.1 ms: the paper's range). A write that
//!    arrives while earlier ones are held waits behind them (writes are never reordered among themselves), so
//!    delays add up over a burst: the held bytes are the paper's Figure 8.
//!
//! Limits (the paper's durability limit, §5.2): a flush is never delayed and nothing held crosses it: everything
//! held goes to the drive, in order, before the flush does. The held bytes are bounded (`max_held_bytes`): a
//! write that would pass the bound goes without delay, after everything held (which is let go at once). Reads
//! are never delayed; a read of data still held reads what the drive holds (a benchmark's reads are not
//! checked; a storage stack's shim would serve them from what it holds).
//!
//! Everything is allocated in [`WriteShim::new`]: the held writes' ring and the held-bytes series.

use serde::{Deserialize, Serialize};

use crate::workload::Op;

/// What the user sets. `flush_speed_bps` is the whole drive's (P8 / P10).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteShimSettings {
    pub flush_speed_bps: f64,
    #[serde(default = "default_period")]
    pub period_ns: u64,
    #[serde(default = "default_max_held")]
    pub max_held_bytes: u64,
}

fn default_period() -> u64 {
    100_000_000
}

fn default_max_held() -> u64 {
    256 << 20
}

/// The urgency from which writes are paced (the paper's threshold).
pub const URGENCY_THRESHOLD: f64 = 0.5;

/// At most this many writes are held at once, whatever their size (a bound on the ring's memory: 64 Ki
/// entries of 40 bytes); a write that finds the ring full goes as one at the byte bound does.
const MAX_HELD_WRITES: usize = 1 << 16;

/// Windows of the held-bytes series kept (at the default 100 ms window, 18 hours); later ones fold into the last.
const MAX_SERIES_WINDOWS: usize = 1 << 19;

impl WriteShimSettings {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.flush_speed_bps > 0.0 && self.flush_speed_bps.is_finite()) {
            return Err(format!("the flush speed must be a positive number of bytes/s, not {}", self.flush_speed_bps));
        }
        if self.period_ns < 1_000_000 {
            return Err(format!("the monitored period must be at least 1 ms (got {} ns)", self.period_ns));
        }
        if self.max_held_bytes == 0 {
            return Err("the bound on held bytes must be above 0".into());
        }
        Ok(())
    }
}

/// One write held back: what to issue, and when.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Held {
    pub op: Op,
    pub size: u64,
    pub offset: u64,
    pub arrival_ns: u64,
    pub release_ns: u64,
}

impl Default for Held {
    fn default() -> Held {
        Held { op: Op::Write, size: 0, offset: 0, arrival_ns: 0, release_ns: 0 }
    }
}

/// What to do with a write that arrives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Admit {
    /// Issue it now.
    Now,
    /// Hold it until this time (the caller hands it to [`WriteShim::hold`]).
    Hold(u64),
    /// It passes the bound: everything held was let go and goes first; ask again once it has.
    AfterHeld,
}

/// The shim's results for one queue (summed over queues by [`ShimReport::merge`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ShimReport {
    pub flush_speed_bps: f64,
    pub period_ns: u64,
    pub max_held_bytes: u64,
    /// Writes that went through the shim, and those of them it delayed.
    pub writes: u64,
    pub delayed_writes: u64,
    pub delay_ns_total: u64,
    pub delay_ns_max: u64,
    /// Times a write passed the bound on held bytes (everything held went at once), and times a flush let
    /// held writes go.
    pub bound_releases: u64,
    pub flush_releases: u64,
    pub max_held_seen: u64,
    /// Writes still held when the run ended (a time limit, a stop): never issued.
    pub dropped_at_end: u64,
    /// Periods whose urgency reached 0.5, of those that saw a write.
    pub urgent_periods: u64,
    pub periods_with_writes: u64,
    /// Held bytes over time: the most held in each window of the run (the run's window length, from its start).
    pub held_bytes_max: Vec<u64>,
    pub window_ns: u64,
    /// Windows past the series' capacity folded into its last entry.
    pub series_truncated: bool,
}

impl ShimReport {
    pub fn mean_delay_ns(&self) -> f64 {
        if self.delayed_writes == 0 {
            0.0
        } else {
            self.delay_ns_total as f64 / self.delayed_writes as f64
        }
    }

    /// The whole run's report from its queues': counts add up, the held series add up window by window.
    pub fn merge(reports: &[&ShimReport]) -> Option<ShimReport> {
        let first = reports.first()?;
        let mut out = ShimReport {
            flush_speed_bps: reports.iter().map(|r| r.flush_speed_bps).sum(),
            period_ns: first.period_ns,
            max_held_bytes: reports.iter().map(|r| r.max_held_bytes).sum(),
            window_ns: first.window_ns,
            ..ShimReport::default()
        };
        for r in reports {
            out.writes += r.writes;
            out.delayed_writes += r.delayed_writes;
            out.delay_ns_total += r.delay_ns_total;
            out.delay_ns_max = out.delay_ns_max.max(r.delay_ns_max);
            out.bound_releases += r.bound_releases;
            out.flush_releases += r.flush_releases;
            out.max_held_seen += r.max_held_seen;
            out.dropped_at_end += r.dropped_at_end;
            out.urgent_periods += r.urgent_periods;
            out.periods_with_writes += r.periods_with_writes;
            out.series_truncated |= r.series_truncated;
            if out.held_bytes_max.len() < r.held_bytes_max.len() {
                out.held_bytes_max.resize(r.held_bytes_max.len(), 0);
            }
            for (o, v) in out.held_bytes_max.iter_mut().zip(&r.held_bytes_max) {
                *o += v;
            }
        }
        Some(out)
    }
}

/// One queue's shim. See the module's documentation for the algorithm.
pub(crate) struct WriteShim {
    /// This queue's share of the flush speed, in bytes per ns.
    speed_per_ns: f64,
    period_ns: u64,
    max_held: u64,
    /// The monitored periods: the current one's start and bytes (read, write) so far, and the previous one's.
    period_start: u64,
    current: [u64; 2],
    previous: [u64; 2],
    current_urgent: bool,
    /// When the next write may go (the previous one's release plus its spacing).
    next_free_ns: u64,
    /// The held writes, oldest first: a ring of `ring.len()` entries from `head`.
    ring: Vec<Held>,
    head: usize,
    count: usize,
    held_bytes: u64,
    /// Held bytes over time (the most held per window, from `origin_ns`).
    origin_ns: u64,
    window_ns: u64,
    report: ShimReport,
}

impl WriteShim {
    /// `queues`: how many queues share the drive (each paces its share); `origin_ns` and `window_ns`: the run's
    /// start and window length, for the held-bytes series; `expected_ns`: how long the run should last, if known,
    /// to size the series (else it gets room for [`MAX_SERIES_WINDOWS`]).
    pub fn new(
        settings: &WriteShimSettings,
        queues: u32,
        origin_ns: u64,
        window_ns: u64,
        expected_ns: Option<u64>,
    ) -> WriteShim {
        let window_ns = window_ns.max(1);
        let windows =
            expected_ns.map_or(MAX_SERIES_WINDOWS, |ns| (ns / window_ns) as usize + 16).min(MAX_SERIES_WINDOWS);
        let share = settings.flush_speed_bps / queues.max(1) as f64;
        let max_held = (settings.max_held_bytes / queues.max(1) as u64).max(1);
        // Room for every write the byte bound allows if each is at least 4 KiB.
        let ring = (max_held / 4096).clamp(64, MAX_HELD_WRITES as u64) as usize;
        WriteShim {
            speed_per_ns: share / 1e9,
            period_ns: settings.period_ns,
            max_held,
            period_start: origin_ns,
            current: [0; 2],
            previous: [0; 2],
            current_urgent: false,
            next_free_ns: 0,
            ring: vec![Held::default(); ring],
            head: 0,
            count: 0,
            held_bytes: 0,
            origin_ns,
            window_ns,
            report: ShimReport {
                flush_speed_bps: share,
                period_ns: settings.period_ns,
                max_held_bytes: max_held,
                window_ns,
                held_bytes_max: Vec::with_capacity(windows),
                ..ShimReport::default()
            },
        }
    }

    /// Move the monitored periods up to `now`.
    #[inline]
    fn advance(&mut self, now: u64) {
        if now < self.period_start + self.period_ns {
            return;
        }
        self.close_period();
        let elapsed = (now - self.period_start) / self.period_ns;
        // More than one period has passed: the one before `now`'s saw nothing.
        self.previous = if elapsed == 1 { self.current } else { [0; 2] };
        self.current = [0; 2];
        self.period_start += elapsed * self.period_ns;
    }

    #[inline]
    fn close_period(&mut self) {
        if self.current[1] > 0 {
            self.report.periods_with_writes += 1;
            self.report.urgent_periods += u64::from(self.current_urgent);
        }
        self.current_urgent = false;
    }

    /// Count a read or write arriving now (once per request, whether or not it is held).
    #[inline]
    pub fn observe(&mut self, op: Op, size: u64, now: u64) {
        self.advance(now);
        match op {
            Op::Read => self.current[0] += size,
            Op::Write => self.current[1] += size,
            _ => {}
        }
    }

    /// (urgency, reads' share of the bytes) over the sliding period ending `now`.
    #[inline]
    fn intensity(&self, now: u64) -> (f64, f64) {
        let into = now.saturating_sub(self.period_start).min(self.period_ns) as f64 / self.period_ns as f64;
        let weight = 1.0 - into;
        let reads = self.current[0] as f64 + self.previous[0] as f64 * weight;
        let writes = self.current[1] as f64 + self.previous[1] as f64 * weight;
        let urgency = writes / self.period_ns as f64 / self.speed_per_ns;
        let total = reads + writes;
        (urgency, if total > 0.0 { reads / total } else { 0.0 })
    }

    /// The spacing after a write of `size` bytes at `urgency` with reads' share `r` (step 4).
    #[inline]
    fn spacing_ns(&self, size: u64, urgency: f64, r: f64) -> u64 {
        if urgency < URGENCY_THRESHOLD {
            return 0;
        }
        (size as f64 / self.speed_per_ns * urgency.min(1.0) * (1.0 + r)) as u64
    }

    /// A write of `size` bytes arrives now (after [`observe`](Self::observe)): when may it go?
    #[inline]
    pub fn admit(&mut self, size: u64, now: u64) -> Admit {
        let (urgency, r) = self.intensity(now);
        if urgency >= URGENCY_THRESHOLD {
            self.current_urgent = true;
        }
        let release = now.max(self.next_free_ns);
        if release == now && self.count == 0 {
            self.next_free_ns = now + self.spacing_ns(size, urgency, r);
            self.report.writes += 1;
            return Admit::Now;
        }
        if self.held_bytes + size > self.max_held || self.count == self.ring.len() {
            // The bound: everything held goes now, in order, then this write, undelayed.
            self.report.bound_releases += 1;
            self.release_all(now);
            if self.count == 0 {
                self.report.writes += 1;
                return Admit::Now;
            }
            return Admit::AfterHeld;
        }
        self.next_free_ns = release + self.spacing_ns(size, urgency, r);
        self.report.writes += 1;
        Admit::Hold(release)
    }

    /// Hold a write [`admit`](Self::admit) said to hold.
    #[inline]
    pub fn hold(&mut self, held: Held, now: u64) {
        self.note(now);
        let tail = (self.head + self.count) % self.ring.len();
        self.ring[tail] = held;
        self.count += 1;
        self.held_bytes += held.size;
        self.report.max_held_seen = self.report.max_held_seen.max(self.held_bytes);
        self.note(now);
    }

    /// Everything held may go now (a flush is coming, or the bound was reached); the next write is not spaced
    /// after them.
    #[inline]
    pub fn release_all(&mut self, now: u64) {
        for k in 0..self.count {
            let i = (self.head + k) % self.ring.len();
            self.ring[i].release_ns = self.ring[i].release_ns.min(now);
        }
        self.next_free_ns = now;
    }

    /// A flush arrives: let everything held go before it. True if anything was held.
    #[inline]
    pub fn flush(&mut self, now: u64) -> bool {
        if self.count == 0 {
            return false;
        }
        self.report.flush_releases += 1;
        self.release_all(now);
        true
    }

    #[cfg(test)]
    pub fn holding(&self) -> bool {
        self.count > 0
    }

    /// When the oldest held write may go.
    #[inline]
    pub fn next_release(&self) -> Option<u64> {
        (self.count > 0).then(|| self.ring[self.head].release_ns)
    }

    /// The oldest held write if it may go at `now` (the caller issues it).
    #[inline]
    pub fn pop_due(&mut self, now: u64) -> Option<Held> {
        if self.count == 0 || self.ring[self.head].release_ns > now {
            return None;
        }
        self.note(now);
        let held = self.ring[self.head];
        self.head = (self.head + 1) % self.ring.len();
        self.count -= 1;
        self.held_bytes -= held.size;
        let delay = now.saturating_sub(held.arrival_ns);
        if delay > 0 {
            self.report.delayed_writes += 1;
            self.report.delay_ns_total += delay;
            self.report.delay_ns_max = self.report.delay_ns_max.max(delay);
        }
        Some(held)
    }

    /// Record the held bytes in `now`'s window: windows since the last change held what was held then.
    #[inline]
    fn note(&mut self, now: u64) {
        let series = &mut self.report.held_bytes_max;
        let index = (now.saturating_sub(self.origin_ns) / self.window_ns) as usize;
        let index = if index >= series.capacity() {
            self.report.series_truncated = true;
            series.capacity().saturating_sub(1)
        } else {
            index
        };
        while series.len() <= index {
            // `len < capacity` here: no allocation.
            series.push(self.held_bytes);
        }
        series[index] = series[index].max(self.held_bytes);
    }

    /// The report, with the writes still held counted as dropped.
    pub fn finish(&mut self, now: u64) -> ShimReport {
        self.advance(now);
        self.close_period();
        self.report.dropped_at_end = self.count as u64;
        self.report.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const KIB: u64 = 1024;

    fn shim(speed: f64, max_held: u64) -> WriteShim {
        let settings = WriteShimSettings { flush_speed_bps: speed, period_ns: 100 * MS, max_held_bytes: max_held };
        WriteShim::new(&settings, 1, 0, 100 * MS, Some(10_000 * MS))
    }

    /// Offer a write now; hold it if told to; returns the decision.
    fn write(s: &mut WriteShim, size: u64, now: u64) -> Admit {
        s.observe(Op::Write, size, now);
        let admit = s.admit(size, now);
        if let Admit::Hold(release) = admit {
            s.hold(Held { op: Op::Write, size, offset: 0, arrival_ns: now, release_ns: release }, now);
        }
        admit
    }

    #[test]
    fn the_papers_example() {
        // N2T-I: 11.5 MB / 200 ms = 57.5 MB/s; 5 MB in the 100 ms monitored period is 50 MB/s: urgency 0.87.
        let mut s = shim(57.5e6, 256 << 20);
        s.observe(Op::Write, 5_000_000, 10 * MS);
        let (urgency, r) = s.intensity(100 * MS - 1);
        assert!((urgency - 50.0 / 57.5).abs() < 1e-6, "{urgency}");
        assert_eq!(r, 0.0);
        // At that urgency and without reads, a 64 KiB write is spaced 64 KiB / 57.5 MB/s x 0.87 = 0.99 ms.
        let t = s.spacing_ns(64 * KIB, urgency, r);
        assert!((t as f64 - 65536.0 / 57.5e6 * 1e9 * urgency).abs() < 2.0, "{t}");
        // Half of the bytes reads: 1.5 times that.
        assert_eq!(s.spacing_ns(64 * KIB, urgency, 0.5), (65536.0 / 0.0575 * urgency * 1.5) as u64);
        // Below an urgency of 0.5, no spacing.
        assert_eq!(s.spacing_ns(64 * KIB, 0.49, 0.9), 0);
    }

    #[test]
    fn light_writes_are_never_delayed() {
        // 1 MB/s of 4 KiB writes against a 57.5 MB/s flush speed: urgency about 0.02.
        let mut s = shim(57.5e6, 256 << 20);
        for k in 0..1000 {
            assert_eq!(write(&mut s, 4 * KIB, k * 4 * MS), Admit::Now);
        }
        let r = s.finish(4000 * MS);
        assert_eq!((r.writes, r.delayed_writes, r.urgent_periods), (1000, 0, 0));
        assert!(r.periods_with_writes >= 39);
        assert!(r.held_bytes_max.is_empty(), "nothing was ever held");
    }

    #[test]
    fn a_burst_is_let_in_at_the_flush_speed_in_order() {
        // 8 MiB of 64 KiB writes at once against 57.5 MB/s: urgency passes 0.5 after 2.875 MB.
        let mut s = shim(57.5e6, 256 << 20);
        let mut releases = Vec::new();
        for _ in 0..128 {
            match write(&mut s, 64 * KIB, 0) {
                Admit::Now => releases.push(0),
                Admit::Hold(at) => releases.push(at),
                Admit::AfterHeld => panic!("under the bound"),
            }
        }
        assert!(releases.windows(2).all(|w| w[1] >= w[0]), "in order");
        let first_held = releases.iter().position(|&t| t > 0).unwrap();
        // 2.875 MB / 64 KiB = 43.9: the first 44 go at once.
        assert_eq!(first_held, 44);
        // From then on, one every 64 KiB / 57.5 MB/s = 1.14 ms (urgency above 1, no reads).
        let gap = releases[100] - releases[99];
        assert_eq!(gap, (65536.0 / 0.0575) as u64);
        // They come out when due, oldest first, and their delay is what they waited.
        assert_eq!(s.pop_due(releases[first_held] - 1), None);
        let h = s.pop_due(releases[first_held]).unwrap();
        assert_eq!(h.release_ns, releases[first_held]);
        let r = s.finish(releases[first_held]);
        assert_eq!(r.delayed_writes, 1);
        assert_eq!(r.delay_ns_max, releases[first_held]);
        assert_eq!(r.max_held_seen, (128 - 44) * 64 * KIB);
        assert_eq!(r.dropped_at_end, 128 - 44 - 1);
    }

    #[test]
    fn reads_slow_the_pace() {
        let mut fast = shim(57.5e6, 256 << 20);
        let mut slow = shim(57.5e6, 256 << 20);
        slow.observe(Op::Read, 64 << 20, 0);
        for _ in 0..128 {
            write(&mut fast, 64 * KIB, 0);
            write(&mut slow, 64 * KIB, 0);
        }
        let (f, s) = (fast.next_free_ns, slow.next_free_ns);
        assert!(s as f64 > 1.5 * f as f64, "{s} vs {f}");
    }

    #[test]
    fn a_flush_lets_everything_held_go_before_it() {
        let mut s = shim(10e6, 256 << 20);
        for _ in 0..64 {
            write(&mut s, 64 * KIB, 0);
        }
        assert!(s.holding());
        assert!(s.flush(5 * MS));
        let mut n = 0;
        while let Some(h) = s.pop_due(5 * MS) {
            assert!(h.release_ns <= 5 * MS);
            n += 1;
        }
        assert!(n > 0 && !s.holding());
        // The next write is not spaced after what the flush let go.
        assert_eq!(s.next_free_ns, 5 * MS);
        assert!(!s.flush(6 * MS), "nothing held, nothing to release");
        assert_eq!(s.finish(6 * MS).flush_releases, 1);
    }

    #[test]
    fn held_bytes_never_pass_the_bound() {
        let bound = 2 << 20;
        let mut s = shim(10e6, bound);
        let mut after_held = 0;
        for k in 0..1000u64 {
            let now = k * 10_000;
            while s.pop_due(now).is_some() {}
            match write(&mut s, 64 * KIB, now) {
                Admit::AfterHeld => {
                    after_held += 1;
                    while s.pop_due(now).is_some() {}
                    assert_eq!(s.admit(64 * KIB, now), Admit::Now, "once the held ones went, it goes");
                }
                Admit::Now | Admit::Hold(_) => {}
            }
            assert!(s.held_bytes <= bound);
        }
        let r = s.finish(10_000 * MS);
        assert!(after_held > 0 && r.bound_releases == after_held);
        assert!(r.max_held_seen <= bound);
        assert!(r.held_bytes_max.iter().all(|&b| b <= bound));
    }

    #[test]
    fn the_held_series_carries_the_level_over_quiet_windows() {
        let mut s = shim(1e6, 256 << 20);
        for _ in 0..40 {
            write(&mut s, 64 * KIB, 0); // 2.5 MiB at 1 MB/s: let in over about 2.6 s
        }
        let mut now = 0;
        while s.holding() {
            now = s.next_release().unwrap();
            s.pop_due(now);
        }
        let r = s.finish(now);
        assert!(r.held_bytes_max.len() >= 25, "{}", r.held_bytes_max.len());
        assert!(r.held_bytes_max.windows(2).all(|w| w[1] <= w[0]), "draining: {:?}", r.held_bytes_max);
        assert!(r.held_bytes_max[5] > 0);
        assert!(r.mean_delay_ns() > 0.0);
        let merged = ShimReport::merge(&[&r, &r]).unwrap();
        assert_eq!(merged.held_bytes_max[0], 2 * r.held_bytes_max[0]);
        assert_eq!(merged.delayed_writes, 2 * r.delayed_writes);
    }

    #[test]
    fn settings_are_checked() {
        let ok = WriteShimSettings { flush_speed_bps: 1e6, period_ns: MS, max_held_bytes: 1 };
        assert!(ok.validate().is_ok());
        assert!(WriteShimSettings { flush_speed_bps: 0.0, ..ok }.validate().is_err());
        assert!(WriteShimSettings { flush_speed_bps: f64::INFINITY, ..ok }.validate().is_err());
        assert!(WriteShimSettings { period_ns: 10, ..ok }.validate().is_err());
        assert!(WriteShimSettings { max_held_bytes: 0, ..ok }.validate().is_err());
        let parsed: WriteShimSettings = serde_json::from_str(r#"{"flush_speed_bps": 57.5e6}"#).unwrap();
        assert_eq!((parsed.period_ns, parsed.max_held_bytes), (100 * MS, 256 << 20));
    }
}
