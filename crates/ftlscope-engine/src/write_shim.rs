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
//! 4. **Delay**: below `u = 0.5` a write goes when it arrives. From 0.5 on, a write goes when the drive's buffer
//!    has room for it, by the shim's model of that buffer, and otherwise waits `T` for the room:
//!
//!    `T = (W / f) × ln(L / (0.8 B − size))`, with `B` the buffer (P8), `W` the flush window (P10, `B / S`),
//!    `L` the bytes the model holds when the write would go, `f` the drive's idle share over the last second.
//!
//!    The paper says only that `T` (0.1-1 ms on its drives) comes from "a rate-limiting function that
//!    incorporates the proportion of the recent read/write intensity and the flush urgency". Our reading: what
//!    must not happen is the buffer filling up, so the shim keeps a model of it: every write it lets in adds its
//!    size, and the model drains as the paper's P10 describes the drive doing, the whole buffer in `W` of idle
//!    time, a part of it in proportion (so `L` decays with time constant `W` of idle time), and only while the
//!    drive is idle. The shim measures that idle time itself: the time this queue has nothing in flight (the
//!    caller reports the first request in flight, [`WriteShim::busy`], and the last completion,
//!    [`WriteShim::idle`]). Reads take it away; so do the writes themselves. A held write's time is planned
//!    with the idle share `f` of the last [`IDLE_PERIODS`] periods, and checked when it comes: if the drive was
//!    busier than planned, the model has not drained enough and the write waits on (up to the horizon after it
//!    arrived). Before, the model took reads as taking `1 + r` of the time, `r` the reads' share of the bytes:
//!    on the synthetic search trace the drive was idle about half the time while a burst's arrivals made `r`
//!    small, so the model drained faster than the drive and a burst now and then still overflowed the buffer.
//!    Writes are let in while the model is under [`TARGET_FILL`] (0.8) of the buffer; beyond that each waits
//!    until the model has drained its size, `T` above. For a steady stream on an idle drive that is
//!    `size / (0.8 S)` apart (a 4 KiB write at 57.5 MB/s: 89 us; 64 KiB: 1.4 ms), so writes enter no faster
//!    than the flush speed, and the buffer the drive sees keeps 20 % free. Past the target fill a write is held
//!    only when a flush is imminent: when the model says the buffer would overflow within the monitored period
//!    were the writes to go on at the period's intensity ([`WriteShim::overflow_imminent`]). A stream under the
//!    drive's drain never overflows it, however full the model is, and is not held; a drive with no write buffer
//!    at all ([`WriteShimSettings::write_through`], a forced speed on a write-through profile) holds nothing. A
//!    write that arrives while earlier ones are held waits behind them (writes are never reordered among
//!    themselves), so delays add up over a burst: the held bytes are the paper's Figure 8.
//!
//!    Holding helps only when the drive can take the backlog soon: when a write would wait longer than
//!    [`HORIZON_NS`] (1 s, or `W / 0.8` if longer: the time paced writes take to fill a whole buffer), the
//!    writes are coming faster than the drive drains them for good and holding would only add delay. The shim
//!    then gives up: what it holds goes [`CATCH_UP`] (2) times as fast as it arrived, the writes arriving
//!    behind it follow at that pace until it is gone, and then writes go as they come until the urgency falls
//!    below 0.5. (It let the backlog go at once before:
//!    it then entered the drive at the host's speed, as no trace sent it, and on a write-through drive the
//!    synthetic cloud trace's reads were 38-54 % slower with a forced shim; 9-29 % now.) At the bound on held
//!    bytes everything held still goes at once.
//!
//!    Holding cannot help either when the writes' *sustained* urgency, their intensity over the horizon (not the
//!    monitored period) divided by the flush speed, reaches 1: the drive then cannot drain what arrives even
//!    with the reads gone, so every byte held would have to go later into a buffer the writes keep full (on
//!    the synthetic cloud trace, 85 MB/s against T200G-M's 67 MB/s, the backlog let go at the horizon made read
//!    p90/p95 15-259 % worse). While it is 1 or more the shim holds nothing new (and gives up what it holds, as
//!    at the horizon); the run
//!    reports how many writes went so (`overloaded_writes`) and the highest sustained urgency it measured. The
//!    sustained intensity is an exponentially weighted sum of the write bytes with the horizon as time
//!    constant, over the time since the run started (at least two time constants: the run starts on an idle,
//!    drained buffer, so one burst that the buffer and the idle time after it can absorb does not count as
//!    overload).
//!
//!    Holding must not cost the reads more than it saves them. P10 is the time a drive needs to dump its buffer
//!    "softly", "without causing severe contention"; a drive whose idle-time drain books its programs ahead of
//!    the reads breaks that premise, and then every read during holding pays for it (kelpie-t200g-m: 1.6-2.9
//!    ms instead of 0.1-0.4 ms on the synthetic cloud trace at x2, where the flush the holding was for came
//!    anyway: read p95 +65 %). So the shim measures the effect of its holding on the reads
//!    ([`WriteShim::read_done`]): each read completed while it holds writes on its own schedule is weighed
//!    against every read completed while it held nothing, by a sequential test on their log latency that
//!    decides as soon as the evidence for "[`HURT_RATIO`] (3) times slower" reaches odds of 1000 to 1
//!    ([`HURT_EVIDENCE`]). Then it gives up, as at the horizon: what it holds goes at twice the pace
//!    it came, and writes go as they arrive until the urgency falls below 0.5 (`backoffs` in the report). A
//!    drive that drains softly (kelpie-n2t-i: 233 against 226 us on the issue's burst trace) is held as
//!    before; so is kelpie-t200g-m once its reads under holding are fast again (the cloud trace's later,
//!    long holds at x1: 144 against 167 us, read p99 -97 %).
//!
//!    The mean write delay is bounded only if asked ([`WriteShimSettings::bound_mean_delay`],
//!    `--bound-mean-delay`): a delay budget in which each write earns one monitored period, which the delays
//!    issued and planned never pass ([`WriteShim::within_budget`]). Off by default: kelpie-t200g-m's read gain on
//!    the synthetic cloud trace at x1 (p90 -85 %) comes from holds that take the mean to 107 ms; bounded, 47 ms
//!    and p90 -16 %.
//!
//!    Writes can also be held through read storms ([`WriteShimSettings::hold_in_read_storms`]; the Python
//!    settings turn it on by default, `--no-hold-in-read-storms` off): where the writes outrun the flush speed some full-buffer flushes cannot be
//!    avoided, only moved, and one inside a storm of reads (the last [`STORM_READS`] reads [`STORM_RATIO`] times
//!    faster than their long-run rate) catches several times the reads it would between storms. While the reads
//!    storm and a write would make the buffer overflow within the period (urgency 0.5 or more), the write is held
//!    (up to one buffer's worth, a horizon after its arrival); once the storm has passed, what was held goes on
//!    the model's schedule again where the drive keeps up with the writes, else at the catch-up pace from then
//!    ([`WriteShim::storm_hold`], [`WriteShim::repace_after_storm`]). kelpie-t200g-m, synthetic cloud trace at x1:
//!    read p99 -23 % without it, -65 % with it, mean hold 107 -> 38 ms.
//!
//! Limits (the paper's durability limit, §5.2): a flush is never delayed and nothing held crosses it: everything
//! held goes to the drive, in order, before the flush does (and the model's buffer is empty after it). The held
//! bytes are bounded (`max_held_bytes`): a write that would pass the bound goes without delay, after everything
//! held (which is let go at once). Reads
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
    /// The drive's write buffer (P8), whole drive; 0 = not known, taken as [`ASSUMED_WINDOW_NS`] of the flush
    /// speed.
    #[serde(default)]
    pub buffer_bytes: u64,
    /// The share of the buffer the shim lets its writes fill by its model before it holds them.
    #[serde(default = "default_target_fill")]
    pub target_fill: f64,
    /// The drive has no write buffer (a profile's P8 found none: write-through): no full-buffer flush can come, so
    /// no write is ever held (a speed forced on such a drive measures and reports, and holds nothing).
    #[serde(default)]
    pub write_through: bool,
    /// Keep the mean write delay (over every write through the shim) within the monitored period: a delay
    /// budget (see [`WriteShim::within_budget`]). Off by default: on the synthetic cloud trace kelpie-t200g-m's
    /// read gain comes from holds that take the mean past the period (see docs/newt.md).
    #[serde(default)]
    pub bound_mean_delay: bool,
    /// Hold writes while the reads storm and the buffer would overflow, so that the full-buffer flushes writes
    /// that outrun the drive force anyway come between the storms (see [`WriteShim::storm_hold`]). Off when
    /// not given, so that settings written before it keep their numbers; the Python settings
    /// (`ShimSettings.hold_in_read_storms`) turn it on by default: it trades write delays for read tails (see
    /// docs/newt.md).
    #[serde(default)]
    pub hold_in_read_storms: bool,
}

fn default_target_fill() -> f64 {
    TARGET_FILL
}

fn default_period() -> u64 {
    100_000_000
}

fn default_max_held() -> u64 {
    256 << 20
}

/// The monitored periods over which the drive's idle share is measured: a burst's own writes in flight take
/// a period's idle time away for a moment, which says little about how fast the drive will drain what follows.
const IDLE_PERIODS: usize = 10;

/// The least idle share the shim plans with (a drive busy all the time would make every planned wait endless).
const MIN_IDLE_SHARE: f64 = 0.05;

/// The urgency from which writes are paced (the paper's threshold).
pub const URGENCY_THRESHOLD: f64 = 0.5;

/// The share of the drive's buffer the shim lets its writes fill (by its model of the buffer) before it holds
/// them. Lower leaves the drive more room for what the model misses and delays writes longer. With the drain
/// measured in idle time: at 0.7 the synthetic search trace's 20 MB bursts on N2T-I waited 338 ms on average
/// and one passed the horizon (let go at once: a full flush), and T200G-M's test bursts up to 1.34 s; at 0.85
/// the T200G-M test's read p99 was 35 % worse (its buffer drains by booking whole chunks ahead of the reads,
/// larger the fuller it is); 0.8 keeps both. (0.6 when the model guessed the idle time from the reads' bytes,
/// which drained it too fast.)
pub const TARGET_FILL: f64 = 0.8;

/// With no buffer size given (a speed on the command line), the buffer is taken as this long at the flush speed:
/// the middle of the 2-300 ms the paper found for P10 on most drives.
pub const ASSUMED_WINDOW_NS: u64 = 200_000_000;

/// Holding helps only if the drive can take the backlog in time: a write that would wait longer than this, or
/// than the flush window divided by the target fill if that is longer (the time the paced writes take to fill a
/// whole buffer), tells the shim the writes come faster than the drive drains them for good, and it stops
/// holding (see [`WriteShim::admit`]).
pub const HORIZON_NS: u64 = 1_000_000_000;

/// When holding is given up with writes held, the backlog goes this many times as fast as it arrived (see
/// [`WriteShim::give_up`]).
pub const CATCH_UP: u64 = 2;

/// Holding is measured against the reads: the reads that complete while the shim holds writes on its own
/// schedule are compared with those that complete while it holds nothing (their geometric means: a few reads
/// behind a full-buffer flush, tens of ms, do not swamp hundreds of ordinary ones as they would a mean). When
/// the first are [`HURT_RATIO`] times slower, holding costs the reads more than it saves them, and the shim backs
/// off (see [`WriteShim::read_done`]). It decides by a sequential test on the held reads' log latency, as soon as
/// the evidence for "3 times slower" over "no slower" reaches [`HURT_EVIDENCE`] (odds of 1000 to 1), with at
/// least [`HURT_READS`] reads with nothing held to compare with.
pub const HURT_RATIO: f64 = 3.0;
pub const HURT_READS: u64 = 8;
pub const HURT_EVIDENCE: f64 = 6.907_755_278_982_137; // ln(1000)

/// Reads storm when their rate over the last [`STORM_READS`] reads is this many times their long-run rate.
pub const STORM_RATIO: f64 = 3.0;

/// The reads whose arrival span measures the storm: at 1,600 reads/s (the synthetic cloud trace's bursts) 10 ms.
const STORM_READS: usize = 16;

/// While the reads storm, a write held for it is asked again this often.
const STORM_RECHECK_NS: u64 = 5_000_000;

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
        if !(self.target_fill > 0.0 && self.target_fill <= 1.0) {
            return Err(format!("the target fill must be in (0, 1], not {}", self.target_fill));
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
    /// When the trace had it due (open-loop replay; `arrival_ns` in a closed loop, 0 outside a replay): its issue
    /// lag counts from here, so the hold is part of it, as an application behind the shim waits it.
    pub due_ns: u64,
}

impl Default for Held {
    fn default() -> Held {
        Held { op: Op::Write, size: 0, offset: 0, arrival_ns: 0, release_ns: 0, due_ns: 0 }
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
    /// The settings said the drive has no write buffer: nothing was held.
    pub write_through: bool,
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
    /// Writes let in as they came because the sustained urgency was 1 or more (holding could not help), and the
    /// highest sustained urgency measured.
    pub overloaded_writes: u64,
    pub sustained_urgency_max: f64,
    /// Times holding was given up because holding on would have taken the mean write delay (over every write
    /// through the shim so far, the held ones at their planned delay) past the monitored period.
    pub budget_releases: u64,
    /// Reads that completed while the shim held writes on its own schedule (`held`) and while it held nothing
    /// (`free`), with the sums of the natural log of their latencies in ns (their geometric means:
    /// [`ShimReport::read_geomean_ns`]); the times holding was backed off because the first were
    /// [`HURT_RATIO`] times slower than the second.
    pub reads_held: u64,
    pub reads_free: u64,
    pub read_log_ns_held: f64,
    pub read_log_ns_free: f64,
    pub backoffs: u64,
    /// When (ns since the shim's start) the first of those holds was given up (None: none was), so that the reads
    /// around it can be found in the per-request trace.
    pub first_backoff_ns: Option<u64>,
    /// Writes held because they came in a read storm with a flush imminent (see [`WriteShim::storm_hold`]).
    pub storm_holds: u64,
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

    /// The geometric mean read latency (ns) while holding and while holding nothing (None: no such read).
    pub fn read_geomean_ns(&self) -> (Option<f64>, Option<f64>) {
        let mean = |sum: f64, n: u64| (n > 0).then(|| (sum / n as f64).exp());
        (mean(self.read_log_ns_held, self.reads_held), mean(self.read_log_ns_free, self.reads_free))
    }

    /// The whole run's report from its queues': counts add up, the held series add up window by window.
    pub fn merge(reports: &[&ShimReport]) -> Option<ShimReport> {
        let first = reports.first()?;
        let mut out = ShimReport {
            flush_speed_bps: reports.iter().map(|r| r.flush_speed_bps).sum(),
            period_ns: first.period_ns,
            max_held_bytes: reports.iter().map(|r| r.max_held_bytes).sum(),
            write_through: first.write_through,
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
            out.overloaded_writes += r.overloaded_writes;
            out.budget_releases += r.budget_releases;
            out.sustained_urgency_max = out.sustained_urgency_max.max(r.sustained_urgency_max);
            out.reads_held += r.reads_held;
            out.reads_free += r.reads_free;
            out.read_log_ns_held += r.read_log_ns_held;
            out.read_log_ns_free += r.read_log_ns_free;
            out.backoffs += r.backoffs;
            out.storm_holds += r.storm_holds;
            out.first_backoff_ns = match (out.first_backoff_ns, r.first_backoff_ns) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
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
    /// This queue's share of the drive's write buffer, and the flush window (buffer / speed).
    buffer: f64,
    window_ns: f64,
    /// How long a write may wait before holding is given up (see [`HORIZON_NS`]).
    horizon_ns: u64,
    target_fill: f64,
    /// No write buffer: no overflow is ever imminent.
    write_through: bool,
    /// The delay budget is kept (see [`WriteShim::within_budget`]).
    bound_mean_delay: bool,
    /// Writes are held while the reads storm (see [`WriteShim::storm_hold`]).
    hold_in_read_storms: bool,
    /// The monitored periods: the current one's start and write bytes so far, and the previous one's.
    period_start: u64,
    current: u64,
    previous: u64,
    current_urgent: bool,
    /// The model of the drive's buffer: bytes this queue let in that the drive has not drained, as of the idle
    /// time `level_idle_ns` (the drive drains only while idle: P10).
    level: f64,
    level_idle_ns: u64,
    /// The drive's idle time as this queue sees it (nothing of its own in flight): the total up to `idle_since`,
    /// and since when it has been idle (None while requests are in flight).
    idle_total_ns: u64,
    idle_since: Option<u64>,
    /// The idle total and the time at the start of each of the last [`IDLE_PERIODS`] monitored periods (oldest
    /// first), for the idle share over them.
    idle_marks: [(u64, u64); IDLE_PERIODS],
    /// While writes are held: when the last of them goes, and the model's level just after it went.
    next_free_ns: u64,
    tail_level: f64,
    /// Holding was given up (writes come faster than the drive drains them): writes go as they arrive until
    /// the urgency falls below the threshold.
    passing: bool,
    /// The sustained write intensity: the write bytes weighted by `exp(-age / horizon)`, as of `sustained_ns`.
    sustained_bytes: f64,
    sustained_ns: u64,
    /// The oldest held writes let go (by a flush, the bound, or holding given up): they go without waiting for
    /// room.
    let_go: usize,
    /// Holding was given up with writes held: (the oldest held write's arrival, when holding was given up).
    /// Those writes, and the ones arriving until the backlog is gone, go [`CATCH_UP`] times as fast as they
    /// arrived, from then on (see [`WriteShim::give_up`]).
    catch_up: Option<(u64, u64)>,
    /// The most write bytes the host sent in one monitored period so far (the current one's so far included when
    /// read): a backlog let go never goes into the drive faster than that, by a byte clock whose next free
    /// instant is `catch_up_next` (see [`WriteShim::give_up`]).
    peak_period_bytes: u64,
    catch_up_next: f64,
    catch_up_capped: bool,
    /// Reads completed under holding since the shim last gave up for them (see [`WriteShim::read_done`]), and
    /// their recent mean log latency.
    hurt_evidence: f64,
    /// The sum of the squared log latencies of the reads completed while nothing was held (their spread).
    log2_free: f64,
    /// The held writes, oldest first: a ring of `ring.len()` entries from `head`.
    ring: Vec<Held>,
    head: usize,
    count: usize,
    held_bytes: u64,
    /// The held writes' planned delays (release minus arrival), summed: with the delays of the writes already
    /// issued (`report.delay_ns_total`) what the shim has committed against its delay budget (see
    /// [`WriteShim::within_budget`]).
    planned_ns: u64,
    /// The reads weighted by `exp(-age / horizon)` as of `sustained_reads_ns` (their long-run rate: see
    /// [`WriteShim::read_storm`]).
    sustained_reads: f64,
    sustained_reads_ns: u64,
    /// The arrival times of the last [`STORM_READS`] reads (a ring from `recent_head`), and whether writes were
    /// held for a storm since the last one passed.
    recent_reads: [u64; STORM_READS],
    recent_head: usize,
    storm_backlog: bool,
    /// Held bytes over time (the most held per window, from `origin_ns`).
    origin_ns: u64,
    series_window_ns: u64,
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
        let queues = queues.max(1);
        let share = settings.flush_speed_bps / queues as f64;
        let max_held = (settings.max_held_bytes / queues as u64).max(1);
        let buffer_bytes = if settings.buffer_bytes > 0 {
            settings.buffer_bytes as f64
        } else {
            settings.flush_speed_bps * ASSUMED_WINDOW_NS as f64 / 1e9
        };
        let flush_window_ns = buffer_bytes / settings.flush_speed_bps * 1e9;
        // Room for every write the byte bound allows if each is at least 4 KiB.
        let ring = (max_held / 4096).clamp(64, MAX_HELD_WRITES as u64) as usize;
        WriteShim {
            speed_per_ns: share / 1e9,
            period_ns: settings.period_ns,
            max_held,
            buffer: buffer_bytes / queues as f64,
            window_ns: flush_window_ns,
            horizon_ns: HORIZON_NS.max((flush_window_ns / settings.target_fill) as u64),
            target_fill: settings.target_fill,
            write_through: settings.write_through,
            bound_mean_delay: settings.bound_mean_delay,
            hold_in_read_storms: settings.hold_in_read_storms,
            period_start: origin_ns,
            current: 0,
            previous: 0,
            current_urgent: false,
            level: 0.0,
            level_idle_ns: 0,
            idle_total_ns: 0,
            idle_since: Some(origin_ns),
            idle_marks: [(0, origin_ns); IDLE_PERIODS],
            next_free_ns: 0,
            tail_level: 0.0,
            passing: false,
            sustained_bytes: 0.0,
            sustained_ns: origin_ns,
            let_go: 0,
            catch_up: None,
            peak_period_bytes: 0,
            catch_up_next: 0.0,
            catch_up_capped: false,
            hurt_evidence: 0.0,
            log2_free: 0.0,
            ring: vec![Held::default(); ring],
            head: 0,
            count: 0,
            held_bytes: 0,
            planned_ns: 0,
            sustained_reads: 0.0,
            sustained_reads_ns: origin_ns,
            recent_reads: [0; STORM_READS],
            recent_head: 0,
            storm_backlog: false,
            origin_ns,
            series_window_ns: window_ns,
            report: ShimReport {
                flush_speed_bps: share,
                write_through: settings.write_through,
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
        self.peak_period_bytes = self.peak_period_bytes.max(self.current);
        let elapsed = (now - self.period_start) / self.period_ns;
        // More than one period has passed: the one before `now`'s saw nothing.
        self.previous = if elapsed == 1 { self.current } else { 0 };
        self.current = 0;
        self.period_start += elapsed * self.period_ns;
        self.idle_marks.rotate_left(1);
        self.idle_marks[IDLE_PERIODS - 1] = (self.idle_at(now), now);
    }

    /// The idle time (nothing in flight) up to `now`.
    #[inline]
    fn idle_at(&self, now: u64) -> u64 {
        self.idle_total_ns + self.idle_since.map_or(0, |since| now.saturating_sub(since))
    }

    /// The queue's first request in flight: the drive is busy from `now`.
    #[inline]
    pub fn busy(&mut self, now: u64) {
        if let Some(since) = self.idle_since.take() {
            self.idle_total_ns += now.saturating_sub(since);
        }
    }

    /// The queue's last request in flight completed at `now`: the drive is idle from then.
    #[inline]
    pub fn idle(&mut self, now: u64) {
        if self.idle_since.is_none() {
            self.idle_since = Some(now);
        }
    }

    /// The drive's idle share over the last [`IDLE_PERIODS`] periods (at least [`MIN_IDLE_SHARE`]: a
    /// drive never idle would make every wait endless, and the horizon gives up on those anyway).
    #[inline]
    fn idle_share(&self, now: u64) -> f64 {
        let (idle, at) = self.idle_marks[0];
        let span = now.saturating_sub(at);
        if span == 0 {
            return 1.0;
        }
        ((self.idle_at(now) - idle) as f64 / span as f64).clamp(MIN_IDLE_SHARE, 1.0)
    }

    /// The model's level at `now`: drained by the idle time since it was last set.
    #[inline]
    fn level_now(&self, now: u64) -> f64 {
        let idle = self.idle_at(now).saturating_sub(self.level_idle_ns);
        Self::drained(self.level, idle, self.window_ns)
    }

    /// The model's level once the drive has taken `level` bytes: past the whole buffer the drive flushes it all
    /// (the full-buffer flush the shim exists to avoid, which it could not here) and keeps what came after.
    /// Without this the model holds on to bytes the drive has flushed and thinks the buffer full for a flush
    /// window: on kelpie-t200g-m's synthetic cloud trace at x1, with writes held in read storms, it let 20 MB/s
    /// in against 60 MB/s arriving for 2 s after a backlog let go at 4.8 s had overflowed the buffer, and held
    /// 60-130 MB until the bound. Only with [`WriteShimSettings::hold_in_read_storms`]: without it the default
    /// shim keeps its numbers bit for bit (its read gain there, p99 -23 %, comes in part from that stale model:
    /// corrected alone, p99 +0.6 %; see docs/newt.md).
    #[inline]
    fn after_overflow(&self, level: f64) -> f64 {
        if self.hold_in_read_storms && level > self.buffer {
            level % self.buffer
        } else {
            level
        }
    }

    #[inline]
    fn set_level(&mut self, level: f64, now: u64) {
        self.level = self.after_overflow(level);
        self.level_idle_ns = self.idle_at(now);
    }

    #[inline]
    fn close_period(&mut self) {
        if self.current > 0 {
            self.report.periods_with_writes += 1;
            self.report.urgent_periods += u64::from(self.current_urgent);
        }
        self.current_urgent = false;
    }

    /// Count a read or write arriving now (once per request, whether or not it is held).
    #[inline]
    pub fn observe(&mut self, op: Op, size: u64, now: u64) {
        self.advance(now);
        if op == Op::Write {
            self.current += size;
            self.sustained_bytes = self.sustained_at(now) + size as f64;
            self.sustained_ns = self.sustained_ns.max(now);
        } else if op == Op::Read {
            let age = now.saturating_sub(self.sustained_reads_ns) as f64;
            self.sustained_reads = self.sustained_reads * (-age / self.horizon_ns as f64).exp() + 1.0;
            self.sustained_reads_ns = self.sustained_reads_ns.max(now);
            self.recent_reads[self.recent_head] = now;
            self.recent_head = (self.recent_head + 1) % STORM_READS;
        }
    }

    /// The weighted write bytes as of `now`.
    #[inline]
    fn sustained_at(&self, now: u64) -> f64 {
        let age = now.saturating_sub(self.sustained_ns) as f64;
        self.sustained_bytes * (-age / self.horizon_ns as f64).exp()
    }

    /// The sustained urgency at `now`: the write intensity over the horizon divided by the flush speed. The
    /// weighted bytes of a steady stream started `E` ago are its rate times `tau (1 - exp(-E / tau))`; dividing by
    /// that gives the rate of the writes since the run started, over at most the last few time constants, sooner
    /// than the weighted sum alone would reach it. `E` counts as at least two time constants, so that one early
    /// burst the idle time after it can absorb is not taken for a stream (at one, T200G-M's test burst of 72 MiB
    /// at 400 MB/s, more than its buffer, read as 1.06 and went unheld).
    #[inline]
    fn sustained_urgency(&self, now: u64) -> f64 {
        let tau = self.horizon_ns as f64;
        let elapsed = (now.saturating_sub(self.origin_ns) as f64).max(2.0 * tau);
        self.sustained_at(now) / (tau * (1.0 - (-elapsed / tau).exp())) / self.speed_per_ns
    }

    /// The urgency over the sliding period ending `now`.
    #[inline]
    fn urgency(&self, now: u64) -> f64 {
        let into = now.saturating_sub(self.period_start).min(self.period_ns) as f64 / self.period_ns as f64;
        let writes = self.current as f64 + self.previous as f64 * (1.0 - into);
        writes / self.period_ns as f64 / self.speed_per_ns
    }

    /// The model's drain time constant in wall time, for planning: a full buffer drains at the flush speed, a
    /// part of one in proportion ("a shorter idle gap drains it in proportion"), and only while the drive is
    /// idle, which it was `idle_share` of the recent time.
    #[inline]
    fn drain_ns(&self, idle_share: f64) -> f64 {
        self.window_ns / idle_share
    }

    /// What the model holds `dt` ns after holding `level`, draining with time constant `tau`.
    #[inline]
    fn drained(level: f64, dt: u64, tau: f64) -> f64 {
        if level <= 0.0 {
            0.0
        } else {
            level * (-(dt as f64) / tau).exp()
        }
    }

    /// How long after holding `level` the model has room for `size` more below [`TARGET_FILL`] (step 4's `T`).
    #[inline]
    fn wait_ns(&self, level: f64, size: u64, tau: f64) -> u64 {
        let target = self.target_fill * self.buffer;
        // A write larger than the target waits for the buffer to be nearly empty, not forever.
        let room = (target - size as f64).max(target / 16.0);
        if level <= room {
            0
        } else {
            (tau * (level / room).ln()) as u64
        }
    }

    /// Would the drive's buffer overflow (a full-buffer flush) within the monitored period, by the model, if it
    /// held `level` now and the writes went on arriving at the period's intensity? The model drains with time
    /// constant `tau` (wall time) while the writes fill it, so its level `t` from now is
    /// `level e^(-t/tau) + W tau (1 - e^(-t/tau))`, which approaches `W tau` from either side: the largest it reaches
    /// within the period is at one of its ends. A stream steadily under the drive's drain (`W tau` under the
    /// buffer) never overflows it, however full the model is; a burst that would fill it does.
    #[inline]
    fn overflow_imminent(&self, level: f64, now: u64, tau: f64) -> bool {
        if self.write_through {
            // No buffer, no full-buffer flush: nothing to hold writes back for.
            return false;
        }
        let intensity = self.urgency(now) * self.speed_per_ns;
        let decay = (-(self.period_ns as f64) / tau).exp();
        let at_end = level * decay + intensity * tau * (1.0 - decay);
        level.max(at_end) > self.buffer
    }

    /// Are the reads storming at `now`: their rate over the last [`STORM_READS`] reads at least [`STORM_RATIO`]
    /// times their long-run rate (weighted over the horizon, as the sustained write intensity)? Not before a
    /// horizon of history, nor before that many reads have come.
    #[inline]
    fn read_storm(&self, now: u64) -> bool {
        let elapsed = now.saturating_sub(self.origin_ns) as f64;
        let tau = self.horizon_ns as f64;
        if elapsed < tau {
            return false;
        }
        // The oldest of the last STORM_READS reads: they came within `span`.
        let oldest = self.recent_reads[self.recent_head];
        let span = now.saturating_sub(oldest).max(1) as f64;
        let age = now.saturating_sub(self.sustained_reads_ns) as f64;
        let weighted = self.sustained_reads * (-age / tau).exp();
        let long_run = weighted / (tau * (1.0 - (-elapsed / tau).exp()));
        oldest > self.origin_ns && STORM_READS as f64 / span >= STORM_RATIO * long_run
    }

    /// Hold a write of `size` (or keep the oldest held one) because the reads storm and the buffer would
    /// overflow: the full-buffer flush the writes force anyway then comes once the storm has passed, among
    /// fewer reads.
    #[inline]
    fn storm_hold(&self, size: u64, arriving: bool, now: u64) -> bool {
        let held = self.held_bytes + if arriving { size } else { 0 };
        if !self.hold_in_read_storms
            || self.write_through
            || self.urgency(now) < URGENCY_THRESHOLD
            || held as f64 > self.buffer
            || !self.read_storm(now)
        {
            return false;
        }
        let tau = self.drain_ns(self.idle_share(now));
        self.overflow_imminent(self.level_now(now) + size as f64, now, tau)
    }

    /// A write of `size` bytes arrives now (after [`observe`](Self::observe)): when may it go?
    #[inline]
    pub fn admit(&mut self, size: u64, now: u64) -> Admit {
        let urgent = self.urgency(now) >= URGENCY_THRESHOLD;
        self.current_urgent |= urgent;
        let tau = self.drain_ns(self.idle_share(now));
        if self.held_bytes + size <= self.max_held && self.count < self.ring.len() && self.storm_hold(size, true, now) {
            let release = self.next_free_ns.max(now) + STORM_RECHECK_NS;
            self.next_free_ns = release;
            self.tail_level = if self.count > 0 { self.tail_level } else { self.level_now(now) } + size as f64;
            self.report.storm_holds += 1;
            self.report.writes += 1;
            self.storm_backlog = true;
            return Admit::Hold(release);
        }
        if urgent {
            let sustained = self.sustained_urgency(now);
            self.report.sustained_urgency_max = self.report.sustained_urgency_max.max(sustained);
            if sustained >= 1.0 {
                // The drive cannot keep up even without reads: hold nothing new, let go what is held (at twice
                // the pace it came: `give_up`).
                if self.count > 0 && self.catch_up.is_none() {
                    if self.let_go == self.count {
                        // Let go at once already (a flush, the bound): asked again once those have gone.
                        return Admit::AfterHeld;
                    }
                    self.report.bound_releases += 1;
                    self.give_up(now);
                }
                // With nothing held there is nothing to give up, but the writes go as they come all the same.
                self.passing = true;
                self.report.overloaded_writes += 1;
            }
        }
        if let Some(admit) = self.behind_backlog(size, now) {
            return admit;
        }
        if self.count == 0 {
            self.set_level(self.level_now(now), now);
            if !urgent {
                self.passing = false;
            }
            // Below the threshold (the paper's step 4), after holding was given up (it could not help, or it
            // slowed the reads), with room, or with no flush in sight: it goes.
            if !urgent
                || self.passing
                || self.wait_ns(self.level, size, tau) == 0
                || !self.overflow_imminent(self.level + size as f64, now, tau)
            {
                self.level = self.after_overflow(self.level + size as f64);
                self.report.writes += 1;
                return Admit::Now;
            }
        }
        let (from, level) =
            if self.count > 0 { (self.next_free_ns.max(now), self.tail_level) } else { (now, self.level) };
        let release = (from + self.wait_ns(level, size, tau)).max(now);
        let hopeless = release - now > self.horizon_ns;
        if hopeless && self.held_bytes + size <= self.max_held && self.count < self.ring.len() {
            // Holding cannot help (the drive would not take this write within the horizon: writes come faster
            // than it drains them): what is held goes at twice the pace it came, then this write, and writes go
            // as they arrive until the urgency falls below the threshold (holding again would only build the
            // same backlog).
            self.report.bound_releases += 1;
            self.give_up(now);
            if let Some(admit) = self.behind_backlog(size, now) {
                return admit;
            }
            self.level = self.after_overflow(self.level + size as f64);
            self.report.writes += 1;
            return Admit::Now;
        }
        if hopeless || self.held_bytes + size > self.max_held || self.count == self.ring.len() {
            // Holding cannot help (the drive would not take this write within the horizon: writes come faster
            // than it drains them), or the bound: everything held goes now, in order, then this write, and
            // writes go as they arrive until the urgency falls below the threshold (holding again would only
            // build the same backlog and let it go at once again).
            self.report.bound_releases += 1;
            self.passing = true;
            self.release_all(now);
            if self.count == 0 {
                self.level = self.after_overflow(self.level + size as f64);
                self.report.writes += 1;
                return Admit::Now;
            }
            return Admit::AfterHeld;
        }
        if !self.within_budget(release - now, 1) {
            // Holding this write as long would take the mean write delay past the period (see
            // `within_budget`): what is held goes at twice the pace it came (no write later than planned, so
            // within the budget already committed), then this write, as at the horizon.
            self.report.budget_releases += 1;
            if self.count > 0 {
                self.give_up(now);
            }
            self.passing = false;
            if let Some(admit) = self.behind_backlog(size, now) {
                return admit;
            }
            self.level = self.after_overflow(self.level + size as f64);
            self.report.writes += 1;
            return Admit::Now;
        }
        self.tail_level = Self::drained(level, release - from, tau) + size as f64;
        self.next_free_ns = release;
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
        self.planned_ns += held.release_ns.saturating_sub(held.arrival_ns);
        self.report.max_held_seen = self.report.max_held_seen.max(self.held_bytes);
        self.note(now);
    }

    /// A write [`admit`](Self::admit) said must go after everything held ([`Admit::AfterHeld`]) joins them, let
    /// go at once in its turn: the requests after it in the trace (the reads) go on instead of waiting at the
    /// host until the whole backlog has been issued. False when there is no room (the bound): the write then
    /// waits for the held ones to go, and what follows it with it.
    #[inline]
    pub fn queue_behind(&mut self, held: Held, now: u64) -> bool {
        if self.count == self.ring.len() || self.held_bytes + held.size > self.max_held {
            return false;
        }
        self.hold(Held { release_ns: now, ..held }, now);
        self.let_go += 1;
        self.report.writes += 1;
        true
    }

    /// Everything held may go now (a flush is coming, or the bound was reached); the next write is not spaced
    /// after them.
    #[inline]
    pub fn release_all(&mut self, now: u64) {
        for k in 0..self.count {
            let i = (self.head + k) % self.ring.len();
            self.ring[i].release_ns = self.ring[i].release_ns.min(now);
        }
        self.let_go = self.count;
        self.catch_up = None;
        self.next_free_ns = now;
        self.tail_level = self.level_now(now) + self.held_bytes as f64;
        self.replan();
    }

    /// The held writes' planned delays summed again, after their release times changed.
    #[inline]
    fn replan(&mut self) {
        self.planned_ns = (0..self.count)
            .map(|k| {
                let held = &self.ring[(self.head + k) % self.ring.len()];
                held.release_ns.saturating_sub(held.arrival_ns)
            })
            .sum();
    }

    /// Would the mean write delay stay within the monitored period if the shim committed `extra_ns` more of it,
    /// with `writes` more writes through it? The paper's shim delays writes "slightly" (its `T`: 0.1-1 ms) and
    /// issue 19 checks that the mean write delay stays under the period; a burst paced into a drive whose idle time
    /// the reads take can wait far longer (kelpie-n2t-i, the synthetic search trace with 20 MB bursts each second:
    /// 282 ms on average over all writes; kelpie-t200g-m, the cloud trace: 107 ms). So the shim keeps a budget: each
    /// write through it earns one period of delay, and what it has committed (the delays of the writes issued, and
    /// the planned delays of those held) never passes what they earned. Past it, holding is given up as at the
    /// horizon. The budget is the whole run's: writes that went undelayed leave room for a later burst, and the
    /// mean the run reports stays under the period.
    #[inline]
    fn within_budget(&self, extra_ns: u64, writes: u64) -> bool {
        let committed = self.report.delay_ns_total as f64 + self.planned_ns as f64 + extra_ns as f64;
        !self.bound_mean_delay || committed <= self.period_ns as f64 * (self.report.writes + writes) as f64
    }

    /// Holding is given up with writes held (they come faster than the drive drains them): the backlog goes
    /// [`CATCH_UP`] times as fast as it arrived, from now, each write no later than planned, and the writes
    /// arriving behind it follow at the same pace until it is gone ([`catching_up`](Self::catching_up)). Let
    /// go all at once, it came into the drive at the host's speed, as no trace sent it: the early backlog of
    /// the synthetic cloud trace (up to 56 MB) made the reads of the next 50-250 ms on kelpie-t200g-m wait
    /// 2-3 ms behind it (read p95 +65 % at x2), and a write-through drive's reads 38-54 % slower.
    ///
    /// Giving up is also what makes the writes that follow go as they arrive (`passing`) until the urgency falls
    /// below the threshold, whether or not anything was held: holding again at once would only build the same
    /// backlog. (Each caller used to set `passing` beside its call; all did, so it was redundant, not a bug, but
    /// a caller that forgot it would have held the next write again right behind the backlog.)
    #[inline]
    fn give_up(&mut self, now: u64) {
        self.passing = true;
        if self.count == 0 {
            return;
        }
        let first = self.ring[self.head].arrival_ns;
        let mut last = now;
        self.catch_up_next = now as f64;
        // Only a backlog larger than the whole buffer is held to the host's peak rate: one the buffer can take
        // goes at twice the pace it came and is over sooner (kelpie-t200g-m's 10 MB against its 64 MB buffer:
        // held to the peak it lingered among the reads, read p95 +2.7 -> +47 % at x2; a steady 90 MB/s stream
        // on it, whose backlog the buffer's level made too much, read p99 +5.5 %).
        self.catch_up_capped = self.held_bytes as f64 > self.buffer;
        // The same for every write of the backlog: nothing it depends on changes while they are scheduled.
        let rate = self.catch_up_rate(now);
        for k in 0..self.count {
            let i = (self.head + k) % self.ring.len();
            let paced = (now + (self.ring[i].arrival_ns - first) / CATCH_UP).max(self.catch_up_next as u64);
            // In order: never before the one ahead of it.
            last = self.ring[i].release_ns.min(paced).max(last);
            self.ring[i].release_ns = last;
            self.catch_up_next = last as f64 + self.ring[i].size as f64 / rate;
        }
        self.let_go = self.count;
        self.catch_up = Some((first, now));
        self.next_free_ns = last;
        self.tail_level = self.level_now(now) + self.held_bytes as f64;
        self.replan();
    }

    /// The fastest a backlog let go goes into the drive (bytes per ns), when it is larger than the whole buffer
    /// (`catch_up_capped`, else no limit): the most the host ever wrote in one monitored period, or
    /// [`CATCH_UP`] times its sustained rate if more (a steady stream that outruns the drive still catches up).
    /// At [`CATCH_UP`] times the pace they came alone, the writes of a burst at the host's peak went in at twice
    /// that peak, a rate no trace sent: on a drive whose buffer drains in 40 ms (consumer-tlc-dram, forced at
    /// kelpie-n2t-i's speed) 60 MB let go in 40 ms after the cloud trace's 75 MB burst stalled the drive for
    /// 140 ms (one read 143 ms; read p99.9 +19 %).
    #[inline]
    fn catch_up_rate(&self, now: u64) -> f64 {
        if !self.catch_up_capped {
            return f64::INFINITY;
        }
        let peak = self.peak_period_bytes.max(self.current) as f64 / self.period_ns as f64;
        let sustained = self.sustained_urgency(now) * self.speed_per_ns;
        peak.max(CATCH_UP as f64 * sustained).max(f64::MIN_POSITIVE)
    }

    /// While a backlog given up on is still held, a write arriving now goes behind it, at its pace (None: no
    /// such backlog). The bound on held bytes holds here too: past it, everything goes at once.
    #[inline]
    fn behind_backlog(&mut self, size: u64, now: u64) -> Option<Admit> {
        let (first, from) = self.catch_up?;
        if self.count == 0 {
            self.catch_up = None;
            return None;
        }
        let release = (from + now.saturating_sub(first) / CATCH_UP)
            .max(self.next_free_ns)
            .max(now)
            .max(self.catch_up_next as u64);
        let over_budget = !self.within_budget(release - now, 1);
        if self.held_bytes + size > self.max_held || self.count == self.ring.len() || over_budget {
            // The bound, or the backlog's pace would take the mean write delay past the period: everything held
            // goes at once.
            if over_budget {
                self.report.budget_releases += 1;
            } else {
                self.report.bound_releases += 1;
            }
            self.release_all(now);
            return Some(Admit::AfterHeld);
        }
        self.catch_up_next = release as f64 + size as f64 / self.catch_up_rate(now);
        self.let_go += 1;
        self.next_free_ns = release;
        self.report.writes += 1;
        Some(Admit::Hold(release))
    }

    /// A read submitted at `submit_ns` completed at `now`: the shim weighs what its holding costs the reads
    /// (see the module's documentation). Reads completed while it holds nothing are the baseline (all of them:
    /// the reads behind a full-buffer flush count there too, which holding is for); reads completed while it
    /// holds writes on its own schedule are weighed one by one, by a one-sided sequential test (a CUSUM: Page's
    /// test) on their log latency: each adds the log-likelihood ratio of "[`HURT_RATIO`] times the baseline's
    /// geometric mean" against "the baseline's", with the baseline's spread (at least `ln 3`, so that a baseline of
    /// identical reads does not make one read decide), and the sum, floored at 0, is the evidence that holding
    /// now hurts. At [`HURT_EVIDENCE`] the shim gives up, as at the horizon: reads far slower decide it within a
    /// few (10 times slower: 5), reads 3 times slower within about 14, and a slow start the drive recovers from
    /// drains away (the floor at 0 forgets it). Each read's shift counts up to twice `ln 3`, so a read behind one
    /// long program cannot decide alone. The fixed count it replaces (the mean of the last 8 at 3 times) gave up
    /// kelpie-t200g-m's first hold on the synthetic cloud trace after about 32 reads. Reads while a backlog is let
    /// go are in neither.
    #[inline]
    pub fn read_done(&mut self, submit_ns: u64, now: u64) {
        let log = (now.saturating_sub(submit_ns).max(1) as f64).ln();
        if self.count == 0 {
            self.report.reads_free += 1;
            self.report.read_log_ns_free += log;
            self.log2_free += log * log;
            return;
        }
        if self.let_go > 0 || self.catch_up.is_some() {
            // Let go already: not holding on the shim's schedule.
            return;
        }
        self.report.reads_held += 1;
        self.report.read_log_ns_held += log;
        let free = self.report.reads_free;
        if free < HURT_READS {
            return;
        }
        let free_mean = self.report.read_log_ns_free / free as f64;
        let shift = HURT_RATIO.ln();
        let spread = (self.log2_free / free as f64 - free_mean * free_mean).max(shift * shift);
        // The log-likelihood ratio of a normal shifted by `shift` against one not shifted, with the baseline's
        // spread, for this read's shift (bounded: one read alone never decides).
        let z = (log - free_mean).clamp(-shift, 2.0 * shift);
        self.hurt_evidence = (self.hurt_evidence + shift / spread * (z - shift / 2.0)).max(0.0);
        if self.hurt_evidence < HURT_EVIDENCE {
            return;
        }
        self.report.first_backoff_ns.get_or_insert(now.saturating_sub(self.origin_ns));
        self.report.backoffs += 1;
        self.hurt_evidence = 0.0;
        self.give_up(now);
    }

    /// A flush arrives: let everything held go before it. True if anything was held.
    #[inline]
    pub fn flush(&mut self, now: u64) -> bool {
        if self.count == 0 {
            // The drive empties its buffer for the flush.
            self.set_level(0.0, now);
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

    /// The storm has passed with writes held for it and the drive keeps up with the writes (sustained urgency
    /// under 1): what was held goes on the model's schedule again, each write when the buffer has room for it,
    /// as it would have without the storm. True if so; false (nothing changed) when the writes outrun the drive
    /// or the schedule would hold one past the horizon from its arrival, where holding cannot help and the
    /// backlog is given up. Given up at the catch-up pace instead, a 20 MB burst at 200 MB/s held through a storm
    /// went on at twice the pace it came (held less than a buffer, nothing capped it): on kelpie-n2t-i's
    /// synthetic search trace with 20 MB bursts each second, 14 MB in the 80 ms after a storm at 3.05 s
    /// overflowed its 11.5 MB buffer (a write 21.6 ms, a read 20.4 ms; read p99 -91.5 % without the storm
    /// hold, -16.2 % with it).
    fn repace_after_storm(&mut self, now: u64) -> bool {
        if self.catch_up.is_some() || self.let_go > 0 || self.sustained_urgency(now) >= 1.0 {
            return false;
        }
        let tau = self.drain_ns(self.idle_share(now));
        let (mut from, mut level) = (now, self.level_now(now));
        let mut plan = Vec::with_capacity(self.count);
        for k in 0..self.count {
            let held = &self.ring[(self.head + k) % self.ring.len()];
            let release = from + self.wait_ns(level, held.size, tau);
            if release > held.arrival_ns + self.horizon_ns {
                return false;
            }
            level = Self::drained(level, release - from, tau) + held.size as f64;
            from = release;
            plan.push(release);
        }
        for (k, release) in plan.into_iter().enumerate() {
            let i = (self.head + k) % self.ring.len();
            self.ring[i].release_ns = release;
        }
        self.next_free_ns = from;
        self.tail_level = level;
        self.replan();
        true
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
        // The schedule was planned on the idle share then; the drive drains only in the idle time it really
        // gets, so the write waits on if the model has no room for it yet (up to the horizon from its arrival:
        // a drive that never idles drains nothing, and holding longer would not help).
        let head = self.ring[self.head];
        if (self.let_go == 0 || self.catch_up.is_some())
            && now + STORM_RECHECK_NS <= head.arrival_ns + self.horizon_ns
            && self.storm_hold(head.size, false, now)
        {
            self.ring[self.head].release_ns = now + STORM_RECHECK_NS;
            self.planned_ns += STORM_RECHECK_NS;
            self.storm_backlog = true;
            return None;
        }
        if std::mem::take(&mut self.storm_backlog) && (self.catch_up.is_some() || self.let_go < self.count) {
            // The storm has passed: what was held for it goes on the model's schedule where the drive keeps up
            // ([`Self::repace_after_storm`]), else it is given up and goes at the catch-up pace from now; never at
            // once (the writes behind a head kept through the storm would find their times past: on
            // consumer-tlc-dram, forced at kelpie-n2t-i's speed, 73 MB entered in 50 ms after the cloud trace's
            // storm at 4.9 s and a read waited 144 ms).
            if !self.repace_after_storm(now) {
                for k in 0..self.count {
                    let i = (self.head + k) % self.ring.len();
                    self.ring[i].release_ns = u64::MAX;
                }
                self.give_up(now);
                return None;
            }
            if self.ring[self.head].release_ns > now {
                return None;
            }
        }
        let level = self.level_now(now);
        let wait = self.wait_ns(level, head.size, self.drain_ns(self.idle_share(now)));
        let later = (now + wait).saturating_sub(head.release_ns);
        if wait > 0
            && self.let_go == 0
            && now + wait <= head.arrival_ns + self.horizon_ns
            && self.within_budget(later, 0)
        {
            self.ring[self.head].release_ns = now + wait;
            self.planned_ns += later;
            return None;
        }
        self.let_go = self.let_go.saturating_sub(1);
        self.note(now);
        let held = self.ring[self.head];
        self.head = (self.head + 1) % self.ring.len();
        self.count -= 1;
        self.held_bytes -= held.size;
        self.planned_ns = self.planned_ns.saturating_sub(held.release_ns.saturating_sub(held.arrival_ns));
        self.set_level(level + held.size as f64, now);
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
        let index = (now.saturating_sub(self.origin_ns) / self.series_window_ns) as usize;
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
        // The buffer 200 ms at the flush speed (N2T-I: 11.5 MB at 57.5 MB/s).
        let settings = WriteShimSettings {
            flush_speed_bps: speed,
            period_ns: 100 * MS,
            max_held_bytes: max_held,
            buffer_bytes: (speed * 0.2) as u64,
            target_fill: TARGET_FILL,
            write_through: false,
            bound_mean_delay: false,
            hold_in_read_storms: false,
        };
        WriteShim::new(&settings, 1, 0, 100 * MS, Some(10_000 * MS))
    }

    /// Offer a write now; hold it if told to; returns the decision.
    fn write(s: &mut WriteShim, size: u64, now: u64) -> Admit {
        s.observe(Op::Write, size, now);
        let admit = s.admit(size, now);
        if let Admit::Hold(release) = admit {
            s.hold(Held { op: Op::Write, size, offset: 0, arrival_ns: now, release_ns: release, due_ns: now }, now);
        }
        admit
    }

    #[test]
    fn a_write_queued_behind_the_held_ones_goes_after_them_without_waiting_on_the_model() {
        // Held writes all let go at once (a flush, the bound), and one more that must go after them: it joins
        // the queue, last, and is let go as soon as its turn comes; with no room (the bound) it is refused.
        let mut s = shim(57.5e6, 8 * KIB);
        let held = |arrival_ns| Held { op: Op::Write, size: 4 * KIB, offset: 0, arrival_ns, release_ns: MS, due_ns: 0 };
        s.hold(held(0), 0);
        s.release_all(MS);
        assert!(s.queue_behind(Held { offset: 7, ..held(2 * MS) }, 2 * MS));
        assert_eq!((s.count, s.let_go, s.held_bytes), (2, 2, 8 * KIB));
        assert!(!s.queue_behind(held(3 * MS), 3 * MS), "over --max-held");
        assert_eq!(s.pop_due(3 * MS).map(|h| h.offset), Some(0));
        let last = s.pop_due(3 * MS).expect("let go in its turn, not paced by the model");
        assert_eq!((last.offset, last.due_ns), (7, 0));
        assert_eq!(s.count, 0);
    }

    #[test]
    fn the_papers_example() {
        // N2T-I: 11.5 MB / 200 ms = 57.5 MB/s; 5 MB in the 100 ms monitored period is 50 MB/s: urgency 0.87.
        let mut s = shim(57.5e6, 256 << 20);
        s.observe(Op::Write, 5_000_000, 10 * MS);
        let urgency = s.urgency(100 * MS - 1);
        assert!((urgency - 50.0 / 57.5).abs() < 1e-6, "{urgency}");
        // With the model's buffer at the target (0.8 of 11.5 MB), a 64 KiB write waits until 64 KiB have
        // drained: ln(9.2 / (9.2 - 0.0655)) x 200 ms = 1.43 ms, about 64 KiB / (57.5 MB/s x 0.8).
        let full = TARGET_FILL * 11.5e6;
        let t = s.wait_ns(full, 64 * KIB, s.drain_ns(1.0)) as f64;
        let paced = 65536.0 / (TARGET_FILL * 57.5e6) * 1e9;
        assert!((t / paced - 1.0).abs() < 0.01, "{t} vs {paced}");
        // The drive idle half of the time: it drains only while idle, twice slower.
        let slower = s.wait_ns(full, 64 * KIB, s.drain_ns(0.5)) as f64;
        assert!((slower / t - 2.0).abs() < 1e-3, "{slower} vs {t}");
        // With room in the buffer, no wait.
        assert_eq!(s.wait_ns(1e6, 64 * KIB, s.drain_ns(1.0)), 0);
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

    /// Writes of `size` arriving every `gap_ns` from 0, `n` of them, through `s`; each held one issued when its
    /// time comes, as the engine does. Returns the arrival times in the order the writes were issued.
    fn replay_writes(s: &mut WriteShim, n: u64, size: u64, gap_ns: u64) -> Vec<u64> {
        let mut issued = Vec::new();
        let pop_until = |s: &mut WriteShim, now: u64, issued: &mut Vec<u64>| {
            while let Some(at) = s.next_release().filter(|&at| at <= now) {
                match s.pop_due(at.max(1)) {
                    Some(h) => issued.push(h.arrival_ns),
                    // Waits on for room (the model): asked again at its new time.
                    None => continue,
                }
            }
        };
        for k in 0..n {
            let now = k * gap_ns;
            pop_until(s, now, &mut issued);
            match write(s, size, now) {
                Admit::Now => issued.push(now),
                Admit::Hold(_) => {}
                Admit::AfterHeld => {
                    let held = Held { op: Op::Write, size, offset: 0, arrival_ns: now, release_ns: now, due_ns: now };
                    assert!(s.queue_behind(held, now), "under the bound");
                }
            }
        }
        pop_until(s, u64::MAX, &mut issued);
        issued
    }

    #[test]
    fn the_delay_budget_keeps_the_mean_write_delay_within_the_period() {
        // 40 MB of 64 KiB writes at 200 MB/s against 57.5 MB/s and an 11.5 MB buffer: paced, the burst takes about
        // 0.7 s to enter and its writes wait more than 150 ms on average, past the 100 ms period. With the budget the shim
        // lets the backlog go (at twice the pace it came) once holding on would take the mean past the period.
        let run = |bound: bool| {
            let mut s = shim(57.5e6, 256 << 20);
            s.bound_mean_delay = bound;
            let issued = replay_writes(&mut s, 610, 64 * KIB, 327_680);
            assert_eq!(issued.len(), 610, "every write issued");
            assert!(issued.windows(2).all(|w| w[1] >= w[0]), "in order");
            s.finish(u64::MAX / 2)
        };
        let unbounded = run(false);
        let mean = |r: &ShimReport| r.delay_ns_total as f64 / r.writes as f64;
        assert!(mean(&unbounded) > 150.0 * MS as f64, "the case needs the budget: {}", mean(&unbounded));
        assert_eq!(unbounded.budget_releases, 0);
        let bounded = run(true);
        assert!(bounded.budget_releases >= 1);
        assert!(mean(&bounded) <= 100.0 * MS as f64, "{}", mean(&bounded));
        // It still holds: the budget is spent, not refused.
        assert!(mean(&bounded) > 25.0 * MS as f64 && bounded.delayed_writes > 100, "{bounded:?}");
    }

    #[test]
    fn a_held_write_waits_on_for_room_only_within_the_budget() {
        // One write through the shim (a budget of one period, 100 ms), held 90 ms. When its time comes the drive
        // has been busy (no idle time: the model has not drained) and the model has no room: it would wait on
        // about 270 ms more. Without the budget it does; with it, the wait would pass the budget and it goes.
        let at_release = |bound: bool| {
            let mut s = shim(57.5e6, 256 << 20);
            s.bound_mean_delay = bound;
            s.busy(0);
            s.set_level(0.85 * s.buffer, 0);
            s.report.writes = 1;
            s.hold(Held { op: Op::Write, size: 64 * KIB, offset: 0, arrival_ns: 0, release_ns: 90 * MS, due_ns: 0 }, 0);
            assert_eq!(s.planned_ns, 90 * MS);
            (s.pop_due(90 * MS), s.next_release(), s.planned_ns)
        };
        let (popped, next, planned) = at_release(false);
        assert!(popped.is_none() && next.unwrap() > 300 * MS, "{next:?}");
        assert_eq!(planned, next.unwrap(), "the longer wait is committed");
        let (popped, _, planned) = at_release(true);
        assert_eq!(popped.map(|h| h.arrival_ns), Some(0));
        assert_eq!(planned, 0, "nothing held, nothing planned");
    }

    #[test]
    fn a_forced_speed_far_above_the_writes_holds_nothing() {
        // A steady 57.5 MB/s of 64 KiB writes (kelpie-n2t-i's flush speed) with the shim forced at ten times
        // that: the urgency stays near 0.1, under the paper's 0.5, and no write waits.
        let mut s = shim(575e6, 256 << 20);
        let issued = replay_writes(&mut s, 2000, 64 * KIB, (65536.0 / 0.0575) as u64);
        assert_eq!(issued.len(), 2000);
        let r = s.finish(u64::MAX / 2);
        assert_eq!((r.delayed_writes, r.delay_ns_total, r.urgent_periods), (0, 0, 0));
    }

    #[test]
    fn a_burst_is_let_in_at_the_drain_speed_in_order() {
        // 16 MiB of 64 KiB writes at once against 57.5 MB/s and 11.5 MB: the model's buffer reaches the target
        // fill (0.8 of 11.5 MB) after 140 writes.
        let mut s = shim(57.5e6, 256 << 20);
        let mut releases = Vec::new();
        for _ in 0..256 {
            match write(&mut s, 64 * KIB, 0) {
                Admit::Now => releases.push(0),
                Admit::Hold(at) => releases.push(at),
                Admit::AfterHeld => panic!("under the bound and the horizon"),
            }
        }
        assert!(releases.windows(2).all(|w| w[1] >= w[0]), "in order");
        let first_held = releases.iter().position(|&t| t > 0).unwrap();
        assert_eq!(first_held, (TARGET_FILL * 11.5e6 / 65536.0) as usize);
        // From then on, one every 64 KiB / (57.5 MB/s x 0.8) = 1.4 ms, the speed at which an idle drive drains a
        // buffer 0.8 full.
        let gap = (releases[200] - releases[199]) as f64;
        assert!((gap / (65536.0 / 0.0575 / TARGET_FILL) - 1.0).abs() < 0.01, "{gap}");
        // They come out when due, oldest first, and their delay is what they waited.
        assert_eq!(s.pop_due(releases[first_held] - 1), None);
        let h = s.pop_due(releases[first_held]).unwrap();
        assert_eq!(h.release_ns, releases[first_held]);
        let r = s.finish(releases[first_held]);
        assert_eq!(r.delayed_writes, 1);
        assert_eq!(r.delay_ns_max, releases[first_held]);
        assert_eq!(r.max_held_seen, (256 - first_held as u64) * 64 * KIB);
        assert_eq!(r.dropped_at_end, 256 - first_held as u64 - 1);
        assert_eq!(r.budget_releases, 0, "no budget unless asked for");
    }

    #[test]
    fn writes_are_held_only_when_the_buffer_would_overflow_within_the_period() {
        // The model's buffer 0.9 full (past the target fill, where the pacing alone would hold every write), and
        // writes urgent in both cases. At 0.6 of the flush speed the drain keeps up (the level tends to 0.6 of the
        // buffer): no flush is coming, the write goes. After a burst at 1.6 times the flush speed the level would
        // pass the buffer within the period: the write is held.
        let buffer = 0.2 * 57.5e6;
        let at = |intensity: f64| {
            let mut s = shim(57.5e6, 256 << 20);
            s.set_level(0.9 * buffer, 0);
            // The period's writes so far, this one last: `intensity` times the flush speed.
            s.observe(Op::Write, (intensity * 57.5e6 * 0.1) as u64 - 64 * KIB, 0);
            let admit = write(&mut s, 64 * KIB, 0);
            assert!(s.urgency(0) >= URGENCY_THRESHOLD);
            assert!(s.wait_ns(0.9 * buffer, 64 * KIB, s.drain_ns(1.0)) > 0, "past the target fill");
            admit
        };
        assert_eq!(at(0.6), Admit::Now);
        assert!(matches!(at(1.6), Admit::Hold(_)));
    }

    #[test]
    fn a_steady_stream_under_the_drain_speed_is_never_held() {
        // 64 KiB writes at 0.9 of the flush speed for 3 s, on an idle drive: urgent all along, and the model's
        // level settles near 0.9 of the buffer, past the target fill, but never overflows it: nothing is held.
        let mut s = shim(57.5e6, 256 << 20);
        let gap = (65536.0 / (0.9 * 57.5e6) * 1e9) as u64;
        let n = 3_000_000_000 / gap;
        for k in 0..n {
            assert_eq!(write(&mut s, 64 * KIB, k * gap), Admit::Now, "write {k}");
        }
        let level = s.level_now(n * gap);
        assert!(level > TARGET_FILL * s.buffer && level < s.buffer, "{level}");
        let r = s.finish(n * gap);
        assert_eq!(r.delayed_writes, 0);
        assert!(r.urgent_periods >= 25, "{}", r.urgent_periods);
    }

    #[test]
    fn a_drive_without_a_write_buffer_holds_nothing() {
        // A speed forced on a write-through drive (its profile's P8 found none): the burst that a_burst_is_let_in_…
        // holds from its 141st write goes at once, all of it; the urgency is still measured and reported.
        let settings = WriteShimSettings {
            flush_speed_bps: 57.5e6,
            period_ns: 100 * MS,
            max_held_bytes: 256 << 20,
            buffer_bytes: 0,
            target_fill: TARGET_FILL,
            write_through: true,
            bound_mean_delay: false,
            hold_in_read_storms: false,
        };
        let mut s = WriteShim::new(&settings, 1, 0, 100 * MS, Some(10_000 * MS));
        for _ in 0..256 {
            assert_eq!(write(&mut s, 64 * KIB, 0), Admit::Now);
        }
        let r = s.finish(1000 * MS);
        assert!(r.write_through);
        assert_eq!((r.writes, r.delayed_writes, r.max_held_seen, r.urgent_periods), (256, 0, 0, 1));
    }

    #[test]
    fn writes_faster_than_the_drive_drains_are_not_held_for_nothing() {
        // 200 MB/s of 64 KiB writes for 3 s against 57.5 MB/s: the backlog would grow without end. Once a write
        // would wait past the horizon, holding is given up: what is held goes twice as fast as it came, the
        // writes behind it follow at that pace, and once it is gone writes go as they arrive.
        let mut s = shim(57.5e6, 256 << 20);
        let gap = 327_680; // 64 KiB every 328 us: 200 MB/s
        let mut held_after_catching_up = 0;
        let mut caught_up_at = None;
        for k in 0..9155u64 {
            let now = k * gap;
            while s.pop_due(now).is_some() {}
            match write(&mut s, 64 * KIB, now) {
                Admit::Hold(_) => {
                    assert!(released_in_order(&s));
                    if caught_up_at.is_some() {
                        held_after_catching_up += 1;
                    }
                }
                Admit::Now if s.report.bound_releases > 0 => {
                    caught_up_at.get_or_insert(now);
                }
                Admit::AfterHeld => panic!("under the bound: no release at once"),
                Admit::Now => {}
            }
        }
        let r = s.finish(3000 * MS);
        assert_eq!(r.bound_releases, 1);
        assert!(r.delay_ns_max <= HORIZON_NS, "{}", r.delay_ns_max);
        assert!(r.max_held_seen < 256 << 20);
        // The backlog, at most a horizon old, is gone within two horizons of giving up, and nothing is held after.
        let caught_up_at = caught_up_at.expect("caught up");
        assert!(caught_up_at < 3 * HORIZON_NS, "{caught_up_at}");
        assert_eq!(held_after_catching_up, 0);
    }

    fn released_in_order(s: &WriteShim) -> bool {
        let release = |k: usize| s.ring[(s.head + k) % s.ring.len()].release_ns;
        (1..s.count).all(|k| release(k) >= release(k - 1))
    }

    #[test]
    fn a_backlog_given_up_on_goes_twice_as_fast_as_it_came() {
        // 10 writes of 64 KiB, 1 ms apart, 8 of them held; then holding is given up (the writes' sustained
        // urgency passed 1): the held ones go from then on at half their arrival gaps, not all at once, and no
        // faster than the host's busiest monitored period (here the current one: 655 kB in 100 ms), each no later
        // than planned. At 1 MB/s and a 200 kB buffer, 2 go and each held 64 KiB write is planned about 80 ms
        // after the one before (all within the horizon).
        let mut s = shim(1e6, 256 << 20);
        for k in 0..10u64 {
            write(&mut s, 64 * KIB, k * MS);
        }
        assert_eq!((s.count, s.report.bound_releases), (8, 0));
        let planned: Vec<u64> = (0..s.count).map(|k| s.ring[(s.head + k) % s.ring.len()].release_ns).collect();
        let held = s.count;
        let now = 10 * MS;
        s.give_up(now);
        let releases: Vec<u64> = (0..s.count).map(|k| s.ring[(s.head + k) % s.ring.len()].release_ns).collect();
        assert_eq!(releases.len(), held);
        let first = s.ring[s.head].arrival_ns;
        let peak = (10 * 64 * KIB) as f64 / (100 * MS) as f64;
        let mut clock = now as f64;
        let mut last = now;
        for (k, &r) in releases.iter().enumerate() {
            let arrival = s.ring[(s.head + k) % s.ring.len()].arrival_ns;
            let expected = (now + (arrival - first) / CATCH_UP).max(clock as u64).min(planned[k]).max(last);
            assert_eq!(r, expected, "write {k}");
            assert!(r <= planned[k] && r >= last);
            clock = r as f64 + (64 * KIB) as f64 / peak;
            last = r;
        }
        // The byte clock binds here (the burst came at 10 times its period's mean rate): 10 ms a write.
        assert_eq!(releases[1] - releases[0], 10 * MS);
        // The same backlog where the model's buffer could take it goes at twice the pace it came, nothing more.
        let mut roomy = shim(1e6, 256 << 20);
        for k in 0..10u64 {
            write(&mut roomy, 64 * KIB, k * MS);
        }
        roomy.buffer = 1e12;
        roomy.give_up(now);
        for k in 0..roomy.count {
            let held = &roomy.ring[(roomy.head + k) % roomy.ring.len()];
            assert_eq!(held.release_ns, now + (held.arrival_ns - first) / CATCH_UP, "write {k}");
        }
        // A write arriving now follows at the same pace, behind the last held one.
        let arrival = now + 2 * MS;
        let Admit::Hold(release) = write(&mut s, 64 * KIB, arrival) else { panic!("behind the backlog") };
        assert_eq!(release, (now + (arrival - first) / CATCH_UP).max(last).max(clock as u64));
        // Each goes when due, without waiting for the model's room.
        let mut n = 0;
        for &r in &releases {
            assert!(s.pop_due(r).is_some());
            n += 1;
        }
        assert_eq!(n, held);
        assert!(s.pop_due(release).is_some() && !s.holding());
        // The backlog gone, the next write is not held behind anything.
        assert!(s.catch_up.is_some());
        // Giving up alone (no caller's flag) lets the writes that follow go as they come.
        let later = release + MS;
        assert!(s.passing);
        assert_eq!(write(&mut s, 64 * KIB, later), Admit::Now);
        assert!(s.catch_up.is_none());
    }

    #[test]
    fn a_backlog_given_up_on_never_goes_faster_than_the_host_ever_wrote() {
        // A 600 MB/s burst for 100 ms (60 MB) after a quiet start, held, then given up: released at twice the
        // pace it came it would enter the drive at 1.2 GB/s, a rate the host never sent. The byte clock holds it
        // to the busiest period's 600 MB/s: the last write goes no sooner than 60 MB / 600 MB/s after the first.
        let mut s = shim(57.5e6, 256 << 20);
        let size = 128 * KIB;
        let gap = (size as f64 / 600e6 * 1e9) as u64;
        let n = 100 * MS / gap;
        let start = 200 * MS;
        for k in 0..n {
            write(&mut s, size, start + k * gap);
        }
        // The next period starts: the burst's period is the busiest so far.
        let now = start + 100 * MS + MS;
        s.observe(Op::Read, 4096, now);
        assert!(s.holding());
        let planned: Vec<u64> = (0..s.count).map(|k| s.ring[(s.head + k) % s.ring.len()].release_ns).collect();
        s.give_up(now);
        let releases: Vec<u64> = (0..s.count).map(|k| s.ring[(s.head + k) % s.ring.len()].release_ns).collect();
        let burst_rate = (n * size) as f64 / (100 * MS) as f64;
        let spacing = size as f64 / burst_rate;
        // Each write goes a burst-rate spacing after the one before, unless its own plan (from when the buffer
        // still had room) was sooner; at twice the pace it came the spacing would be half that.
        let mut on_clock = 0;
        for k in 1..releases.len() {
            let gap = (releases[k] - releases[k - 1]) as f64;
            assert!(
                gap >= spacing - 1.0 || releases[k] == planned[k].max(releases[k - 1]),
                "write {k}: {gap} ns apart"
            );
            on_clock += usize::from((gap - spacing).abs() <= 1.0);
        }
        // The writes planned before the give-up (the buffer had room for them; the test never pops them) go at
        // once; the rest, most of the backlog, on the clock.
        assert!(on_clock * 2 >= releases.len(), "{on_clock} of {}", releases.len());
    }

    /// 64 KiB writes at `mb_s` during the first `on_ms` of every second for `seconds`, against N2T-I's 57.5 MB/s:
    /// (writes held at or after `late_ns`, the report).
    fn on_off(mb_s: f64, on_ms: u64, seconds: u64, late_ns: u64) -> (u64, ShimReport) {
        let mut s = shim(57.5e6, 256 << 20);
        let gap = (65536.0 / mb_s * 1e3) as u64;
        let mut held_late = 0;
        for second in 0..seconds {
            let mut now = second * 1000 * MS;
            while now < second * 1000 * MS + on_ms * MS {
                while s.pop_due(now).is_some() {}
                match write(&mut s, 64 * KIB, now) {
                    Admit::AfterHeld => {
                        while s.pop_due(now).is_some() {}
                        assert_eq!(s.admit(64 * KIB, now), Admit::Now);
                    }
                    Admit::Hold(_) if now >= late_ns => held_late += 1,
                    _ => {}
                }
                now += gap;
            }
        }
        while let Some(release) = s.next_release() {
            s.pop_due(release);
        }
        (held_late, s.finish(seconds * 1000 * MS))
    }

    #[test]
    fn writes_that_outrun_the_flush_speed_for_good_are_not_held() {
        // 100 MB/s for 800 ms of every second: 80 MB/s sustained against 57.5 MB/s. The monitored period sees
        // the writes stop every second (urgency under 0.5), but the sustained urgency stays above 1: once it got
        // there the shim holds nothing, whatever the period says.
        let (held_late, r) = on_off(100.0, 800, 10, 2000 * MS);
        assert_eq!(held_late, 0);
        assert!(r.overloaded_writes > 10_000, "{}", r.overloaded_writes);
        assert!(r.sustained_urgency_max > 1.2 && r.sustained_urgency_max < 1.75, "{}", r.sustained_urgency_max);
        assert!(r.delay_ns_max < 500 * MS, "{}", r.delay_ns_max);
    }

    #[test]
    fn bursts_the_drive_can_absorb_are_still_held() {
        // 200 MB/s for 100 ms every second (the bench's search trace with write bursts): 20 MB/s sustained. Each
        // burst fills more than the buffer, and the idle time after it drains it: holding helps, and goes on.
        let (held_late, r) = on_off(200.0, 100, 5, 2000 * MS);
        assert!(held_late > 0);
        assert_eq!(r.overloaded_writes, 0);
        assert!(r.sustained_urgency_max < 1.0, "{}", r.sustained_urgency_max);
        assert!(r.delayed_writes > 0);
    }

    #[test]
    fn a_busy_drive_drains_slower() {
        // The same burst on a drive idle all the time and on one busy (requests in flight) half of each
        // millisecond for the last 200 ms: the model drains only in idle time, so the held writes are planned
        // about twice as far apart.
        let mut idle = shim(57.5e6, 256 << 20);
        let mut busy = shim(57.5e6, 256 << 20);
        for k in 0..200u64 {
            busy.busy(k * MS);
            busy.idle(k * MS + MS / 2);
        }
        let now = 200 * MS;
        for _ in 0..256 {
            write(&mut idle, 64 * KIB, now);
            write(&mut busy, 64 * KIB, now);
        }
        let (i, b) = (idle.next_free_ns - now, busy.next_free_ns - now);
        assert!((b as f64 / i as f64 - 2.0).abs() < 0.05, "{b} vs {i}");
    }

    #[test]
    fn a_held_write_waits_on_when_the_drive_was_busier_than_planned() {
        // Planned on an idle drive; the drive then stays busy: the first held write does not go when planned,
        // since the model has drained nothing, but no later than the horizon after it arrived.
        let mut s = shim(57.5e6, 256 << 20);
        for _ in 0..256 {
            write(&mut s, 64 * KIB, 0);
        }
        let planned = s.next_release().unwrap();
        s.busy(1);
        assert_eq!(s.pop_due(planned), None);
        let later = s.next_release().unwrap();
        assert!(later > planned);
        assert!(later <= HORIZON_NS.max((0.2e9 / TARGET_FILL) as u64));
        // Idle again: the model drains and the write goes once it has room.
        s.idle(later);
        let release = s.next_release().unwrap();
        let mut now = release;
        while s.pop_due(now).is_none() {
            now = s.next_release().unwrap();
        }
        assert!(now > planned);
    }

    /// A burst held on N2T-I's numbers, with `free` reads of `free_us` completed before it (nothing held).
    fn held_burst_after_reads(free: u64, free_us: u64) -> WriteShim {
        let mut s = shim(57.5e6, 256 << 20);
        for k in 0..free {
            s.read_done(k * MS, k * MS + free_us * 1000);
        }
        let now = free * MS;
        for _ in 0..256 {
            write(&mut s, 64 * KIB, now);
        }
        assert!(s.holding() && s.catch_up.is_none());
        s
    }

    #[test]
    fn holding_that_slows_the_reads_is_given_up() {
        // Reads took 200 us with nothing held; under holding they take 2 ms (a drive whose idle drain books its
        // programs ahead of the reads): the evidence grows by (2 ln 3 - ln 3 / 2) / ln 3 = 1.5 a read (10 times
        // slower counts as 9), so after the 5th of them the shim gives up what it holds, at twice the pace it
        // came, and lets writes through until the urgency falls below the threshold.
        let mut s = held_burst_after_reads(20, 200);
        let start = 20 * MS;
        let deciding = 5;
        // One after the other.
        for k in 0..deciding - 1 {
            s.read_done(start + k * 2 * MS, start + (k + 1) * 2 * MS);
            assert_eq!(s.report.backoffs, 0, "read {k}: the evidence is not enough yet");
        }
        let now = start + deciding * 2 * MS;
        s.read_done(now - 2 * MS, now);
        assert_eq!(s.report.backoffs, 1);
        assert!(s.catch_up.is_some() && s.passing);
        // The backlog goes no later than twice its arrival pace (all arrived at once: now), and a write arriving
        // behind it follows it, not held for room.
        assert_eq!(s.next_release(), Some(now));
        let r = s.finish(now);
        assert_eq!((r.reads_free, r.reads_held, r.backoffs), (20, deciding, 1));
        let (held, free) = r.read_geomean_ns();
        assert!((held.unwrap() / 2e6 - 1.0).abs() < 1e-9 && (free.unwrap() / 2e5 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn holding_that_leaves_the_reads_alone_goes_on() {
        // Under holding the reads take 260 us against 200 us (a drive draining softly: a read waits for at most
        // the one program under way): no back-off, however many.
        let mut s = held_burst_after_reads(20, 200);
        let start = 20 * MS;
        for k in 0..1000u64 {
            let at = start + k * 10_000;
            // Now and then one behind a TLC program (1.5 ms).
            let latency = if k % 10 == 0 { 1_500_000 } else { 260_000 };
            s.read_done(at, at + latency);
        }
        assert_eq!(s.report.backoffs, 0);
        assert!(s.catch_up.is_none() && s.holding());
    }

    #[test]
    fn a_slow_start_of_holding_is_judged_on_its_recent_reads() {
        // The reads under holding recover (2 slow, then fast): the evidence of the slow start (3.0) drains away
        // with the fast reads (each takes ln 3 / 2 / ln 3 = 0.5 off, down to 0), so it does not make the shim give
        // up later.
        let mut s = held_burst_after_reads(20, 200);
        let start = 20 * MS;
        for k in 0..HURT_READS / 4 {
            s.read_done(start + k * 10_000, start + k * 10_000 + 2 * MS);
        }
        for k in 0..200u64 {
            let at = start + MS + k * 10_000;
            s.read_done(at, at + 200_000);
        }
        assert_eq!(s.report.backoffs, 0);
        // Without enough reads with nothing held to compare with, nothing is decided.
        let mut fresh = held_burst_after_reads(HURT_READS - 1, 200);
        for k in 0..100u64 {
            fresh.read_done(k * 10_000, k * 10_000 + 10 * MS);
        }
        assert_eq!(fresh.report.backoffs, 0);
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
            // 640 KiB against 1 MB/s and a 200 kB buffer: 9 go at once, the rest one every 20 ms.
            write(&mut s, 16 * KIB, 0);
        }
        let mut now = 0;
        while s.holding() {
            now = s.next_release().unwrap();
            s.pop_due(now);
        }
        let r = s.finish(now);
        assert!(r.held_bytes_max.len() >= 6, "{}", r.held_bytes_max.len());
        assert!(r.held_bytes_max.windows(2).all(|w| w[1] <= w[0]), "draining: {:?}", r.held_bytes_max);
        assert!(r.held_bytes_max[5] > 0);
        assert!(r.mean_delay_ns() > 0.0);
        let merged = ShimReport::merge(&[&r, &r]).unwrap();
        assert_eq!(merged.held_bytes_max[0], 2 * r.held_bytes_max[0]);
        assert_eq!(merged.delayed_writes, 2 * r.delayed_writes);
    }

    #[test]
    fn settings_are_checked() {
        let ok = WriteShimSettings {
            flush_speed_bps: 1e6,
            period_ns: MS,
            max_held_bytes: 1,
            buffer_bytes: 0,
            target_fill: TARGET_FILL,
            write_through: false,
            bound_mean_delay: false,
            hold_in_read_storms: false,
        };
        assert!(WriteShimSettings { target_fill: 0.0, ..ok }.validate().is_err());
        assert!(ok.validate().is_ok());
        assert!(WriteShimSettings { flush_speed_bps: 0.0, ..ok }.validate().is_err());
        assert!(WriteShimSettings { flush_speed_bps: f64::INFINITY, ..ok }.validate().is_err());
        assert!(WriteShimSettings { period_ns: 10, ..ok }.validate().is_err());
        assert!(WriteShimSettings { max_held_bytes: 0, ..ok }.validate().is_err());
        let parsed: WriteShimSettings = serde_json::from_str(r#"{"flush_speed_bps": 57.5e6}"#).unwrap();
        assert_eq!((parsed.period_ns, parsed.max_held_bytes), (100 * MS, 256 << 20));
    }

    /// A read-heavy run with a steady write stream, then a storm: reads 8 times as fast and a 100 MB/s write
    /// burst for 100 ms (10 MB, under the 11.5 MB buffer the shim holds at most for a storm), then the steady load. Returns the shim's report and, per write, (arrival, issue).
    fn storm_run(hold_in_read_storms: bool) -> (ShimReport, Vec<(u64, u64)>) {
        storm_run_with(hold_in_read_storms, 655_360)
    }

    /// [`storm_run`] with the storm's 64 KiB writes `burst_gap_ns` apart.
    fn storm_run_with(hold_in_read_storms: bool, burst_gap_ns: u64) -> (ShimReport, Vec<(u64, u64)>) {
        let mut s = shim(57.5e6, 256 << 20);
        s.hold_in_read_storms = hold_in_read_storms;
        let (storm_from, storm_to) = (1_500 * MS, 1_600 * MS);
        let mut events: Vec<(u64, Op)> = Vec::new();
        // Reads at 300/s, 2,400/s in the storm; 64 KiB writes at 32.8 MB/s (urgency 0.57), 100 MB/s in the storm.
        let mut t = 0;
        while t < 2_500 * MS {
            events.push((t, Op::Read));
            t += if (storm_from..storm_to).contains(&t) { 416_667 } else { 3_333_333 };
        }
        let mut t = 0;
        while t < 2_500 * MS {
            events.push((t, Op::Write));
            t += if (storm_from..storm_to).contains(&t) { burst_gap_ns } else { 2 * MS };
        }
        events.sort_by_key(|&(t, op)| (t, op == Op::Write));
        let mut issued = Vec::new();
        let pop_until = |s: &mut WriteShim, now: u64, issued: &mut Vec<(u64, u64)>| {
            while let Some(at) = s.next_release().filter(|&at| at <= now) {
                if let Some(h) = s.pop_due(at) {
                    issued.push((h.arrival_ns, at));
                }
            }
        };
        for (now, op) in events {
            pop_until(&mut s, now, &mut issued);
            if op == Op::Read {
                s.observe(Op::Read, 4 * KIB, now);
                continue;
            }
            match write(&mut s, 64 * KIB, now) {
                Admit::Now => issued.push((now, now)),
                Admit::Hold(_) => {}
                Admit::AfterHeld => {
                    let held = Held {
                        op: Op::Write,
                        size: 64 * KIB,
                        offset: 0,
                        arrival_ns: now,
                        release_ns: now,
                        due_ns: now,
                    };
                    assert!(s.queue_behind(held, now), "under the bound");
                }
            }
        }
        pop_until(&mut s, u64::MAX / 2, &mut issued);
        (s.finish(u64::MAX / 2), issued)
    }

    #[test]
    fn writes_held_in_a_read_storm_go_once_it_has_passed() {
        let (report, issued) = storm_run(true);
        assert_eq!(issued.len() as u64, report.writes, "every write issued");
        assert!(issued.windows(2).all(|w| w[1].0 >= w[0].0), "in order");
        assert!(report.storm_holds > 50, "the burst is held while the reads storm: {report:?}");
        // The burst goes in while the model has room; from the first write held for the storm, none enters the
        // drive until the storm has passed.
        let first_held = issued.iter().find(|&&(arrival, at)| arrival >= 1_500 * MS && at > arrival).expect("held").0;
        assert!(first_held < 1_600 * MS);
        let in_storm = |t: u64| (first_held..1_600 * MS).contains(&t);
        assert_eq!(issued.iter().filter(|&&(_, at)| in_storm(at)).count(), 0, "held from {first_held}");
        // Once it has passed they go on the model's schedule (the drive keeps up: urgency 0.57), not at once.
        let held: Vec<(u64, u64)> =
            issued.iter().copied().filter(|&(arrival, _)| (first_held..1_600 * MS).contains(&arrival)).collect();
        let (first, last) = (held[0], held[held.len() - 1]);
        assert!(held.len() > 50 && first.1 >= 1_600 * MS, "{held:?}");
        assert!(3 * (last.1 - first.1) >= last.0 - first.0, "{held:?}");
        assert!(issued.iter().all(|&(arrival, at)| at <= arrival + HORIZON_NS + 10 * MS));
        // Before the storm the steady stream goes as it comes.
        assert!(issued.iter().filter(|&&(arrival, _)| arrival < 1_500 * MS).all(|&(arrival, at)| at == arrival));
        // Without the setting nothing is held for the reads, and the burst enters as the model lets it.
        let (plain, issued) = storm_run(false);
        assert_eq!(plain.storm_holds, 0);
        assert!(issued.iter().any(|&(_, at)| in_storm(at)));
    }

    #[test]
    fn a_burst_held_through_a_storm_enters_no_faster_than_the_drive_drains() {
        // 200 MB/s in the storm: 20 MB, more than the 11.5 MB buffer. The drive keeps up on average (the steady
        // stream's urgency 0.57), so once the storm has passed what was held goes as the model has room, not at
        // twice the pace it came (400 MB/s: a whole buffer in 30 ms, the full-buffer flush the hold moved).
        let (report, issued) = storm_run_with(true, 327_680);
        assert!(report.storm_holds > 50, "{report:?}");
        assert_eq!(issued.len() as u64, report.writes, "every write issued");
        let mut windows = std::collections::BTreeMap::<u64, u64>::new();
        for &(_, at) in issued.iter().filter(|&&(_, at)| at >= 1_650 * MS) {
            *windows.entry(at / (10 * MS)).or_default() += 64 * KIB;
        }
        let busiest = windows.values().copied().max().unwrap_or(0);
        assert!(busiest as f64 <= 2.0 * 57.5e6 * 0.01, "{busiest} bytes in 10 ms");
        assert!(issued.iter().all(|&(arrival, at)| at <= arrival + HORIZON_NS + 10 * MS));
    }

    #[test]
    fn a_steady_read_load_is_no_storm() {
        // 300 reads/s, evenly: the last 16 span 50 ms, never a third of that.
        let mut s = shim(57.5e6, 256 << 20);
        s.hold_in_read_storms = true;
        for k in 0..900 {
            s.observe(Op::Read, 4 * KIB, k * 3_333_333);
            assert!(!s.read_storm(k * 3_333_333), "read {k}");
        }
        // Eight times as fast: a storm within 16 reads.
        let start = 900 * 3_333_333;
        let stormy = (1..=16).any(|k| {
            s.observe(Op::Read, 4 * KIB, start + k * 416_667);
            s.read_storm(start + k * 416_667)
        });
        assert!(stormy);
    }

    #[test]
    fn a_model_past_the_buffer_keeps_only_what_came_after_the_flush() {
        // The drive flushes its whole buffer when it overflows: with writes held in read storms the model keeps
        // what came after; without, it keeps its old numbers.
        for (storms, expected) in [(true, 0.25), (false, 1.25)] {
            let mut s = shim(57.5e6, 256 << 20);
            s.hold_in_read_storms = storms;
            s.busy(0);
            s.set_level(1.25 * s.buffer, 0);
            assert!((s.level / s.buffer - expected).abs() < 1e-9, "{storms}: {}", s.level / s.buffer);
        }
    }
}
