//! The simulated hard disk: one actuator over zoned platters, a read-ahead segment and a write-back
//! cache, on the virtual clock (seed 002 §3.1.2: access time = seek + rotational delay + transfer;
//! §3.3.6: zoning).
//!
//! Everything is closed-form and deterministic: no randomness, O(1) work per request (content is kept as
//! runs in 1 MiB buckets; destaging the write-back queue is amortised O(1)).
//!
//! # Geometry and zoning
//!
//! Constant bit density: a track's capacity is proportional to its radius, the radius falls linearly with the
//! cylinder fraction `x` (0 = outer edge, 1 = inner edge), so the sustained sequential rate is linear in `x`:
//!
//! ```text
//! R(x) = outer - (outer - inner) * x                        (bytes/s, sustained, track switches included)
//! f(x) = (outer * x - (outer - inner) * x^2 / 2) / mean     byte fraction below cylinder fraction x,
//!                                                           mean = (outer + inner) / 2
//! x(f) = (outer + inner) * f / (outer + sqrt(outer^2 - (outer^2 - inner^2) * f))   its inverse
//! ```
//!
//! Seen from the LBA space the sustained rate is therefore `R(f) = sqrt(outer^2 - (outer^2 - inner^2) f)`:
//! `outer_rate` exactly at LBA 0 and `inner_rate` exactly at the last LBA, as device-model.md defines them,
//! and in between the curve a real zoned disk shows (concave, not a straight line in LBA).
//!
//! The platter is cut into `N = capacity / (mean * (P + s))` tracks evenly spaced in `x`, where
//! `P = 60e9 / rpm` ns is the rotation period and `s = track_to_track_seek` the track switch. Track `n`
//! holds the bytes `[capacity * f(n/N), capacity * f((n+1)/N))`, about `R(x) * (P + s)`: one revolution of
//! data. The model has one "surface": a real drive with H heads has N/H cylinders and switches heads rather
//! than cylinders on most track boundaries; both are charged `s` here (a modern head switch costs about a
//! track-to-track seek).
//!
//! # Rotation
//!
//! The platter angle at time `t` is `(t * rpm / 60e9) mod 1`. Byte `b` of track `n` sits at angle
//! `(n * s/P + (b - start(n)) / len(n)) mod 1`: the data fills one revolution, and each track is skewed by
//! `s/P` so that after reading a track to its end and switching, the next track's first byte arrives just as
//! the head settles. Hence a sequential stream costs exactly `P + s` per track, i.e. runs at `R(x)`, and
//! the media rate inside a track is `len(n) / P = R(x) * (P + s) / P`.
//!
//! # Seek
//!
//! For a move of cylinder fraction `d` (0 < d <= 1): `seek(d) = t2t + A sqrt(d) + B d`, with `A`, `B` solved
//! from `seek(1) = full_stroke_seek` and, for start and end uniform over the stroke (distance density
//! `2(1 - d)`, `E[sqrt d] = 8/15`, `E[d] = 1/3`), mean seek `= average_seek`:
//!
//! ```text
//! A + B = full - t2t
//! 8/15 A + 1/3 B = avg - t2t     =>  A = 5 (avg - t2t) - 5/3 (full - t2t),  B = full - t2t - A
//! ```
//!
//! (7200 rpm, 0.8/8.5/17 ms: A = 11.5 ms, B = 4.7 ms.) `seek(0) = 0` (same track). Between tracks `dn`
//! apart the model uses `d = (dn - 1) / (N - 2)`: adjacent tracks cost exactly `t2t`, the outermost to the
//! innermost exactly `full_stroke_seek`. The result is never below `t2t`.
//!
//! # Serving a request
//!
//! Commands are served one at a time: a command starts at `max(arrival, previous completion)` and pays
//! `command_overhead`. Through [`SimDevice::submit`] they are served in submission order. Through
//! [`SimDevice::enqueue`] and [`SimDevice::dispatch`] (the engine's path) the disk reorders as SATA NCQ does:
//! when it becomes free it starts, among the first `queue_depth` commands waiting, the one with the shortest
//! positioning time (seek plus rotational wait from where the head will be; a read the cache holds counts as
//! zero), the oldest on a tie. A write, trim or flush starts only once it is the oldest waiting (they keep
//! their order), a read passes an earlier write only if their bytes do not overlap, and nothing passes a
//! flush, so reordering changes timing only. There
//! is no aging: a command far from the head can wait while nearer ones keep arriving (the window of
//! `queue_depth` bounds how many pass it, as the drive sees only that many). A media access (read miss, write-through,
//! destage) then waits for the head (`head_free`), seeks, waits for the target angle and transfers:
//! `t_done = t_head + seek + rotational wait + pass_time(bytes)`, where `pass_time` is the exact streaming
//! time (`P * bytes / len(n)` inside a track, plus `s` per track boundary crossed). Host transfer
//! (`len / host_rate`) overlaps the media transfer: a miss completes at `max(media end, data start + host)`.
//!
//! # Cache (`cache` bytes)
//!
//! - Read-ahead, one segment: after a read miss the head keeps streaming the following bytes into the cache
//!   while it has nothing else to do, up to `cache` bytes beyond the furthest byte the host has read (the
//!   window grows with idle time at the media rate). A read that starts inside the segment (or exactly at the
//!   streaming frontier) completes at `max(start + overhead + len / host_rate, time the stream reaches its
//!   end)`: a sequential reader runs at the media rate, a reader slower than the disk at host speed. A
//!   stream that reached its window limit resumes (after a rotational wait) when the host consumes data.
//!   Any media work (a read miss, a destage, a write-through) stops the stream; what it read stays cached
//!   until the next read miss replaces the segment. A write overlapping the segment discards it.
//! - Write-back: a write completes after `overhead + len / host_rate` while the dirty bytes fit in `cache`;
//!   otherwise it first waits for enough destaging. Dirty data is destaged FIFO (contiguous writes merge into
//!   extents of up to 1 MiB), each extent a media access, whenever the head has nothing else to do; read
//!   misses go before queued (not yet started) destages. No elevator reordering: once the cache is full,
//!   random writes run at random-access speed. A write larger than the cache is written through (after all
//!   dirty data). A read is served from the write cache only if the most recent dirty extent holds it (O(1)
//!   check); other reads of dirty data take the media path (timing only: content is always exact).
//! - Flush waits until every dirty byte is on the platter.
//!
//! # Other commands
//!
//! - Trim: HDDs do not implement TRIM/UNMAP. It completes after `command_overhead` with no effect; the
//!   blocks keep their content.
//! - Write Zeroes: a write of zeroes (no data crosses the host link; the zeroes are destaged like data and
//!   count as media bytes written, not as host bytes written).
//! - Controller reset: in-flight commands finish, caches and the read-ahead stream are kept.
//! - Power cycle: all dirty data is destaged (that time is part of the returned instant), the cache is
//!   emptied. Spin-up is not modelled (ready as soon as the destage ends), so that experiments which power
//!   cycle often are not dominated by it.
//!
//! # Approximations
//!
//! A sector that passed the head less than 16 ns ago still counts as reachable (a sector gap), so that
//! nanosecond rounding never turns a perfectly aligned sequential access into a lost revolution. Partial
//! logical blocks written take the write's content. An idle head stays where it is (no parking).

use std::collections::{HashMap, VecDeque};

use crate::config::{Controller, DeviceSection, HddConfig};
use crate::device::{Counters, PageContent, SimDevice, SimOp, SimRequest};

/// A command waiting in the disk's queue.
#[derive(Clone, Copy)]
struct Queued {
    request: SimRequest,
    tag: u64,
}
use crate::time::{Nanos, Rate, SimTime};

/// A target sector that passed the head less than this long ago is still caught (see the module docs).
const ALIGN_TOLERANCE_NS: f64 = 16.0;
/// Contiguous dirty writes merge into destage extents of at most this many bytes (bounds how long a read
/// miss can wait behind a destage already under way).
const MAX_EXTENT: u64 = 1 << 20;
/// Time from power-on to ready. Not modelled (a real drive spins up in a few seconds).
const SPIN_UP: Nanos = Nanos(0);

fn frac(v: f64) -> f64 {
    v - v.floor()
}

/// An internal instant (f64 ns) as the virtual clock sees it: rounded up, never before zero.
fn to_sim(t: f64) -> SimTime {
    SimTime(t.max(0.0).ceil() as u64)
}

/// Zoned platter geometry: where tracks start, their angles, and how long streaming takes.
#[derive(Clone, Debug)]
struct Platter {
    capacity: u64,
    tracks: u64,
    rpm: u128,
    /// Rotation period P, ns.
    period: f64,
    /// Track switch s, ns.
    switch: f64,
    outer: f64,
    inner: f64,
}

impl Platter {
    fn new(capacity: u64, hdd: &HddConfig) -> Platter {
        let capacity = capacity.max(1);
        let rpm = hdd.rpm.max(1);
        let period = 60e9 / f64::from(rpm);
        let switch = hdd.track_to_track_seek.0 as f64;
        // Rates must be positive for the geometry; the parser rejects anything else.
        let outer = hdd.outer_rate.0.max(1.0);
        let inner = hdd.inner_rate.0.max(1.0);
        let per_track = (outer + inner) / 2.0 * (period + switch) / 1e9;
        let tracks = ((capacity as f64 / per_track).round() as u64).clamp(1, capacity);
        Platter { capacity, tracks, rpm: u128::from(rpm), period, switch, outer, inner }
    }

    /// Cylinder fraction of byte fraction `f` (inverse of [`Platter::byte_fraction`]).
    fn cylinder_fraction(&self, f: f64) -> f64 {
        let (o, i) = (self.outer, self.inner);
        let root = (o * o - (o * o - i * i) * f).max(0.0).sqrt();
        (o + i) * f / (o + root)
    }

    /// Fraction of the capacity stored outside cylinder fraction `x`.
    fn byte_fraction(&self, x: f64) -> f64 {
        let (o, i) = (self.outer, self.inner);
        (o * x - (o - i) * x * x / 2.0) / ((o + i) / 2.0)
    }

    fn track_start(&self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        if n >= self.tracks {
            return self.capacity;
        }
        let f = self.byte_fraction(n as f64 / self.tracks as f64);
        ((self.capacity as f64 * f).round() as u64).min(self.capacity)
    }

    fn track_len(&self, n: u64) -> f64 {
        (self.track_start(n + 1) - self.track_start(n)).max(1) as f64
    }

    fn track_of(&self, byte: u64) -> u64 {
        let b = byte.min(self.capacity - 1);
        let x = self.cylinder_fraction(b as f64 / self.capacity as f64);
        let mut n = ((x * self.tracks as f64) as u64).min(self.tracks - 1);
        // The float estimate is off by at most one track near a boundary.
        while n > 0 && self.track_start(n) > b {
            n -= 1;
        }
        while n + 1 < self.tracks && self.track_start(n + 1) <= b {
            n += 1;
        }
        n
    }

    /// Angular position (fraction of a revolution) of byte `byte`, skew included.
    fn angle(&self, byte: u64) -> f64 {
        let n = self.track_of(byte);
        let within = (byte.min(self.capacity) - self.track_start(n)) as f64 / self.track_len(n);
        frac(n as f64 * (self.switch / self.period) + within)
    }

    /// Platter angle at instant `t` (ns): `(t * rpm / 60e9) mod 1`, exact in the integer part.
    fn phase(&self, t: f64) -> f64 {
        let t = t.max(0.0);
        let whole = t.floor();
        let turns = (whole as u128 * self.rpm) % 60_000_000_000;
        frac(turns as f64 / 60e9 + (t - whole) / self.period)
    }

    /// The first instant at or after `t` (within the tolerance) at which angle `target` is under the head.
    fn align(&self, t: f64, target: f64) -> f64 {
        let wait = frac(target - self.phase(t)) * self.period;
        let late = self.period - wait;
        if late < ALIGN_TOLERANCE_NS {
            // Just passed: anchor on the platter, not on `t`, so rounding never accumulates.
            t - late
        } else {
            t + wait
        }
    }

    /// ns to stream bytes `[from, to)` starting with the head on `from`'s track, in phase.
    fn pass_time(&self, from: u64, to: u64) -> f64 {
        if to <= from {
            return 0.0;
        }
        let n0 = self.track_of(from);
        let n1 = self.track_of(to - 1);
        if n0 == n1 {
            return self.period * (to - from) as f64 / self.track_len(n0);
        }
        let first = self.period * (self.track_start(n0 + 1) - from) as f64 / self.track_len(n0);
        let last = self.period * (to - self.track_start(n1)) as f64 / self.track_len(n1);
        let crossed = (n1 - n0) as f64;
        first + (crossed - 1.0) * self.period + crossed * self.switch + last
    }

    /// How far a stream that was in phase at `from` has read after `elapsed` ns (inverse of `pass_time`).
    fn stream_pos(&self, from: u64, elapsed: f64) -> u64 {
        if from >= self.capacity {
            return self.capacity;
        }
        if elapsed <= 0.0 {
            return from;
        }
        let n0 = self.track_of(from);
        let end0 = self.track_start(n0 + 1);
        let first = self.period * (end0 - from) as f64 / self.track_len(n0);
        if elapsed < first {
            let bytes = (elapsed / self.period * self.track_len(n0)) as u64;
            return (from + bytes).min(end0);
        }
        let rest = elapsed - first;
        let cycle = self.period + self.switch;
        let k = (rest / cycle).floor();
        let m = (n0 + 1).saturating_add(k as u64);
        if m >= self.tracks {
            return self.capacity;
        }
        let r = rest - k * cycle;
        let start = self.track_start(m);
        if r < self.switch {
            return start;
        }
        let bytes = ((r - self.switch) / self.period * self.track_len(m)) as u64;
        (start + bytes).min(self.track_start(m + 1))
    }

    /// Sustained sequential rate at `byte`: one track per revolution plus a switch.
    fn sustained_rate(&self, byte: u64) -> f64 {
        self.track_len(self.track_of(byte)) / (self.period + self.switch) * 1e9
    }
}

/// `seek(d) = t2t + A sqrt(d) + B d` (ns), see the module docs.
#[derive(Clone, Copy, Debug)]
struct SeekCurve {
    t2t: f64,
    a: f64,
    b: f64,
}

impl SeekCurve {
    fn new(hdd: &HddConfig) -> SeekCurve {
        let t2t = hdd.track_to_track_seek.0 as f64;
        let full = hdd.full_stroke_seek.0 as f64 - t2t;
        let avg = hdd.average_seek.0 as f64 - t2t;
        let a = 5.0 * avg - 5.0 / 3.0 * full;
        SeekCurve { t2t, a, b: full - a }
    }

    /// Seek of cylinder fraction `d` in [0, 1], counting `d = 0` as the adjacent track (t2t).
    fn between(&self, d: f64) -> f64 {
        let d = d.clamp(0.0, 1.0);
        (self.t2t + self.a * d.sqrt() + self.b * d).max(self.t2t)
    }
}

/// Where the actuator is: on `track`, free of committed work from `free` (ns) on.
#[derive(Clone, Copy, Debug)]
struct Head {
    free: f64,
    track: u64,
}

/// The read-ahead segment: bytes `[first, origin)` are cached; from `t0` the head streams `origin..` in
/// phase, up to `limit`, until stopped at `stop` (infinite while running).
#[derive(Clone, Copy, Debug)]
struct Stream {
    first: u64,
    origin: u64,
    t0: f64,
    limit: u64,
    stop: f64,
}

impl Stream {
    fn limit_time(&self, p: &Platter) -> f64 {
        self.t0 + p.pass_time(self.origin, self.limit)
    }

    /// When byte `b` (exclusive end) is in the cache.
    fn avail(&self, p: &Platter, b: u64) -> f64 {
        if b <= self.origin {
            f64::NEG_INFINITY
        } else {
            self.t0 + p.pass_time(self.origin, b)
        }
    }

    /// The end of the cached bytes at instant `t`.
    fn hi(&self, p: &Platter, t: f64) -> u64 {
        let t = t.min(self.stop);
        if t <= self.t0 {
            return self.origin;
        }
        p.stream_pos(self.origin, t - self.t0).min(self.limit)
    }
}

/// A dirty range waiting for destage, in the cache since `added`.
#[derive(Clone, Copy, Debug)]
struct Extent {
    start: u64,
    end: u64,
    added: f64,
}

/// Logical blocks per bucket of the content map (1 MiB of 512-byte blocks).
const BUCKET_BLOCKS: u64 = 2048;

/// A run of blocks `[start, end)` holding one content.
type Run = (u64, u64, PageContent);

/// Content per logical block, kept lazily as runs: a bucket of [`BUCKET_BLOCKS`] blocks holds its written
/// runs sorted and non-overlapping, so a random small write costs a hash lookup and a short vector edit,
/// and a large sequential write one run per bucket (never one entry per block).
#[derive(Clone, Debug, Default)]
struct ContentMap {
    buckets: HashMap<u64, Vec<Run>>,
}

impl ContentMap {
    fn get(&self, block: u64) -> PageContent {
        let Some(runs) = self.buckets.get(&(block / BUCKET_BLOCKS)) else {
            return PageContent::Unwritten;
        };
        let i = runs.partition_point(|r| r.1 <= block);
        match runs.get(i) {
            Some(&(s, _, c)) if s <= block => c,
            _ => PageContent::Unwritten,
        }
    }

    fn set(&mut self, start: u64, end: u64, content: PageContent) {
        let mut s = start;
        while s < end {
            let bucket = s / BUCKET_BLOCKS;
            let e = end.min((bucket + 1) * BUCKET_BLOCKS);
            let runs = self.buckets.entry(bucket).or_default();
            if s == bucket * BUCKET_BLOCKS && e == (bucket + 1) * BUCKET_BLOCKS {
                runs.clear();
                runs.push((s, e, content));
            } else {
                Self::set_in(runs, s, e, content);
            }
            s = e;
        }
    }

    /// Overwrite `[s, e)` inside one bucket's sorted runs, merging with equal neighbours.
    fn set_in(runs: &mut Vec<Run>, s: u64, e: u64, c: PageContent) {
        // runs[i..j] overlap [s, e) (ends are sorted like starts: the runs do not overlap).
        let i = runs.partition_point(|r| r.1 <= s);
        let j = runs.partition_point(|r| r.0 < e);
        let left = (i < j && runs[i].0 < s).then(|| (runs[i].0, s, runs[i].2));
        let right = (i < j && runs[j - 1].1 > e).then(|| (e, runs[j - 1].1, runs[j - 1].2));
        runs.splice(i..j, [left, Some((s, e, c)), right].into_iter().flatten());
        let mut m = i + usize::from(left.is_some());
        if m + 1 < runs.len() && runs[m + 1].0 == e && runs[m + 1].2 == c {
            runs[m].1 = runs[m + 1].1;
            runs.remove(m + 1);
        }
        if m > 0 && runs[m - 1].1 == s && runs[m - 1].2 == c {
            runs[m - 1].1 = runs[m].1;
            runs.remove(m);
            m -= 1;
        }
        debug_assert!(runs[m].0 <= s && runs[m].1 >= e);
    }
}

/// A simulated hard disk (see the module docs for the model).
pub struct HddDevice {
    capacity: u64,
    block: u64,
    cache: u64,
    overhead: f64,
    host_rate: Rate,
    platter: Platter,
    seek: SeekCurve,
    /// Completion of the previous command (FIFO).
    cmd_free: SimTime,
    head: Head,
    stream: Option<Stream>,
    /// Dirty extents not yet started, FIFO.
    dirty: VecDeque<Extent>,
    /// Destages started: (end, bytes), in end order.
    in_flight: VecDeque<(f64, u64)>,
    /// Queued plus in-flight dirty bytes.
    dirty_bytes: u64,
    content: ContentMap,
    host_read: u64,
    host_written: u64,
    /// Bytes whose destage (or write-through) has been started.
    media_written: u64,
    /// Media bytes read by misses and by finished read-ahead streams.
    media_read: u64,
    power_cycles: u64,
    /// Commands the disk reorders among (NCQ).
    queue_depth: usize,
    scheduling_margin: f64,
    /// Commands waiting, in arrival order.
    queue: VecDeque<Queued>,
    /// When the first waiting command arrived.
    queue_front_arrival: SimTime,
}

impl HddDevice {
    pub fn new(device: &DeviceSection, controller: &Controller, hdd: &HddConfig) -> HddDevice {
        let capacity = device.capacity.max(1);
        let platter = Platter::new(capacity, hdd);
        HddDevice {
            capacity,
            block: device.logical_block.max(1),
            cache: hdd.cache,
            overhead: controller.command_overhead.0 as f64,
            host_rate: controller.host_rate,
            seek: SeekCurve::new(hdd),
            head: Head { free: 0.0, track: platter.tracks / 2 },
            platter,
            cmd_free: SimTime::ZERO,
            stream: None,
            dirty: VecDeque::new(),
            in_flight: VecDeque::new(),
            dirty_bytes: 0,
            content: ContentMap::default(),
            host_read: 0,
            host_written: 0,
            media_written: 0,
            media_read: 0,
            power_cycles: 0,
            queue_depth: hdd.queue_depth.max(1) as usize,
            scheduling_margin: hdd.scheduling_margin.0 as f64,
            queue: VecDeque::new(),
            queue_front_arrival: SimTime::ZERO,
        }
    }

    /// The positioning time (seek and rotational wait) a read of `[a, b)` started at `s` would pay; zero when
    /// the cache serves it.
    fn positioning(&self, s: f64, a: u64, b: u64) -> f64 {
        let t_cmd = s + self.overhead;
        if self.dirty.back().is_some_and(|last| last.start <= a && b <= last.end) {
            return 0.0;
        }
        let mut head = self.head;
        if let Some(st) = self.stream {
            let hi = st.hi(&self.platter, s);
            if self.cache > 0 && st.first.max(hi.saturating_sub(self.cache)) <= a && a <= hi {
                return 0.0;
            }
            if st.stop.is_infinite() {
                let (stop, pos) = self.halt_point(&st, t_cmd);
                head.free = head.free.max(stop);
                head.track = self.platter.track_of(pos.max(1) - 1);
            }
        }
        let ready = t_cmd.max(head.free);
        // The firmware plans as if the seek took `scheduling_margin` longer: arriving a little late costs a
        // whole revolution, so a target that passes under the head just after the predicted arrival is
        // planned as the next revolution's.
        let (data_start, _) = self.plan(&mut head, t_cmd + self.scheduling_margin, a, b);
        data_start - ready
    }

    /// Which waiting command to start at `s`: shortest positioning time first among the reads that may go
    /// now (see the module docs), the oldest on a tie.
    fn choose(&self, s: f64) -> usize {
        let mut best = (f64::INFINITY, 0);
        // Byte ranges of earlier waiting writes (a read of the same bytes may not pass them).
        let mut barriers: [(u64, u64); 4] = [(0, 0); 4];
        let mut n_barriers = 0;
        for (i, q) in self.queue.iter().take(self.queue_depth).enumerate() {
            let (a, b) = (q.request.offset, q.request.offset.saturating_add(q.request.len));
            if q.request.op != SimOp::Read {
                if i == 0 {
                    return 0;
                }
                if q.request.op == SimOp::Flush || n_barriers == barriers.len() {
                    break; // nothing after a flush (or after many writes) is considered
                }
                barriers[n_barriers] = (a, b);
                n_barriers += 1;
                continue;
            }
            if barriers[..n_barriers].iter().any(|&(wa, wb)| a < wb && wa < b) {
                continue;
            }
            let a = a.min(self.capacity);
            let b = b.min(self.capacity);
            let cost = if b > a { self.positioning(s, a, b) } else { 0.0 };
            if cost < best.0 {
                best = (cost, i);
            }
        }
        best.1
    }

    /// Seek time for a move of cylinder fraction `distance` (0 = same track: no seek; 1 = full stroke).
    pub fn seek_time(&self, distance: f64) -> Nanos {
        if distance <= 0.0 {
            return Nanos(0);
        }
        Nanos(self.seek.between(distance).round() as u64)
    }

    pub fn rotation_period(&self) -> Nanos {
        Nanos(self.platter.period.round() as u64)
    }

    /// The model's sustained sequential rate at byte `offset` (the ground truth of a zoning probe).
    pub fn sequential_rate(&self, offset: u64) -> Rate {
        Rate(self.platter.sustained_rate(offset))
    }

    /// Number of tracks the platter is cut into.
    pub fn tracks(&self) -> u64 {
        self.platter.tracks
    }

    fn host_time(&self, bytes: u64) -> f64 {
        self.host_rate.time_for(bytes).0 as f64
    }

    fn seek_tracks(&self, from: u64, to: u64) -> f64 {
        let dn = from.abs_diff(to);
        if dn == 0 {
            0.0
        } else if self.platter.tracks <= 2 {
            self.seek.t2t
        } else {
            // dn runs from 1 (adjacent: t2t) to N - 1 (outermost to innermost: full stroke).
            self.seek.between((dn - 1) as f64 / (self.platter.tracks - 2) as f64)
        }
    }

    /// Plan a media access to `[from, to)` on a copy of the head state: returns (data start, data end).
    fn plan(&self, head: &mut Head, ready: f64, from: u64, to: u64) -> (f64, f64) {
        let p = &self.platter;
        let begin = ready.max(head.free);
        let target = p.track_of(from);
        let arrive = begin + self.seek_tracks(head.track, target);
        let t2 = p.align(arrive, p.angle(from));
        let t3 = t2 + p.pass_time(from, to);
        head.free = t3;
        head.track = p.track_of(to.max(1) - 1);
        (t2, t3)
    }

    fn media_access(&mut self, ready: f64, from: u64, to: u64) -> (f64, f64) {
        let mut head = self.head;
        let r = self.plan(&mut head, ready, from, to);
        self.head = head;
        r
    }

    /// Where a running stream leaves the head if stopped at `t`: (stop instant, bytes reached).
    fn halt_point(&self, st: &Stream, t: f64) -> (f64, u64) {
        let stop = t.max(st.t0).min(st.limit_time(&self.platter));
        (stop, st.hi(&self.platter, stop))
    }

    /// Stop the read-ahead stream at `t` (the head is wanted for something else); its data stays cached.
    fn halt_stream(&mut self, t: f64) {
        let Some(st) = self.stream else { return };
        if st.stop.is_finite() {
            return;
        }
        let (stop, pos) = self.halt_point(&st, t);
        self.media_read += pos - st.origin;
        self.head.free = self.head.free.max(stop);
        self.head.track = self.platter.track_of(pos.max(1) - 1);
        self.stream = Some(Stream { stop, ..st });
    }

    /// The host consumed up to `new_limit - cache`: let the stream read further, resuming it (after a
    /// rotational wait) if it had stopped at its old limit. A stopped-by-preemption stream stays stopped.
    fn extend_stream(&mut self, at: f64, new_limit: u64) {
        let Some(mut st) = self.stream else { return };
        if st.stop.is_finite() || new_limit <= st.limit {
            return;
        }
        let reached = st.limit_time(&self.platter);
        if at >= reached && st.limit < self.capacity {
            let p = &self.platter;
            self.media_read += st.limit - st.origin;
            let origin = st.limit;
            // At a track start the head still sits on the previous track.
            let ready = if p.track_start(p.track_of(origin)) == origin { at + p.switch } else { at };
            st.t0 = p.align(ready, p.angle(origin));
            st.origin = origin;
            self.head.free = self.head.free.max(reached);
            self.head.track = p.track_of(origin - 1);
        }
        st.limit = new_limit;
        self.stream = Some(st);
    }

    fn retire(&mut self, t: f64) {
        while let Some(&(end, bytes)) = self.in_flight.front() {
            if end > t {
                break;
            }
            self.in_flight.pop_front();
            self.dirty_bytes -= bytes;
        }
    }

    /// Start destaging the oldest dirty extent as soon as the head is free; returns its end.
    fn destage_next(&mut self) -> Option<f64> {
        let ext = self.dirty.pop_front()?;
        let begin = self.head.free.max(ext.added);
        self.halt_stream(begin);
        let (_, end) = self.media_access(begin, ext.start, ext.end);
        let bytes = ext.end - ext.start;
        self.in_flight.push_back((end, bytes));
        self.media_written += bytes;
        Some(end)
    }

    /// Background work up to `t`: destages that the idle head starts before `t`.
    fn advance(&mut self, t: f64) {
        self.retire(t);
        while let Some(front) = self.dirty.front() {
            let mut begin = self.head.free.max(front.added);
            if let Some(st) = self.stream.filter(|s| s.stop.is_infinite()) {
                begin = self.halt_point(&st, begin).0.max(begin);
            }
            if begin >= t {
                break;
            }
            self.destage_next();
            self.retire(t);
        }
    }

    /// Destage everything; returns when the last byte is on the platter.
    fn destage_all(&mut self, t: f64) -> f64 {
        while self.destage_next().is_some() {}
        let end = self.in_flight.back().map_or(t, |&(end, _)| end.max(t));
        self.retire(end);
        end
    }

    /// Wait (destaging) until `bytes` more fit in the cache; returns that instant.
    fn make_room(&mut self, t: f64, bytes: u64) -> f64 {
        let mut t = t;
        loop {
            self.retire(t);
            if self.dirty_bytes + bytes <= self.cache {
                return t;
            }
            match self.in_flight.front() {
                Some(&(end, _)) => t = t.max(end),
                None => {
                    if self.destage_next().is_none() {
                        return t;
                    }
                }
            }
        }
    }

    fn read(&mut self, start: f64, a: u64, b: u64) -> f64 {
        let len = b - a;
        let t_cmd = start + self.overhead;
        if len == 0 {
            return t_cmd;
        }
        let host = self.host_time(len);
        self.host_read += len;
        if let Some(last) = self.dirty.back() {
            if last.start <= a && b <= last.end {
                return t_cmd + host;
            }
        }
        let mut media_from = a;
        if self.cache > 0 {
            if let Some(st) = self.stream {
                let hi = st.hi(&self.platter, start);
                let lo = st.first.max(hi.saturating_sub(self.cache));
                if lo <= a && a <= hi {
                    self.extend_stream(t_cmd, b.saturating_add(self.cache).min(self.capacity));
                    let st = self.stream.expect("stream present");
                    let ready = st.avail(&self.platter, b);
                    if b <= st.limit && ready <= st.stop {
                        return (t_cmd + host).max(ready);
                    }
                    media_from = st.hi(&self.platter, st.stop).max(a);
                    if media_from >= b {
                        // The stopped stream did read it all (float rounding of the two directions).
                        return t_cmd + host;
                    }
                }
            }
        }
        self.halt_stream(t_cmd);
        let (t2, t3) = self.media_access(t_cmd, media_from, b);
        self.media_read += b - media_from;
        self.stream = None;
        if self.cache > 0 && b < self.capacity {
            let p = &self.platter;
            let t0 = if p.track_start(p.track_of(b)) == b { t3 + p.switch } else { t3 };
            self.stream = Some(Stream {
                first: a,
                origin: b,
                t0,
                limit: b.saturating_add(self.cache).min(self.capacity),
                stop: f64::INFINITY,
            });
        }
        t3.max(t2 + host)
    }

    fn write(&mut self, start: f64, a: u64, b: u64, content: PageContent, host_bytes: u64) -> f64 {
        let len = b - a;
        let t_cmd = start + self.overhead;
        self.host_written += host_bytes;
        if len == 0 {
            return t_cmd;
        }
        let lb = self.block;
        self.content.set(a / lb, b.div_ceil(lb), content);
        if let Some(st) = self.stream {
            if a < st.limit && st.first < b {
                self.halt_stream(start);
                self.stream = None;
            }
        }
        let host = self.host_time(host_bytes);
        if len > self.cache {
            // Write-through, behind everything already dirty.
            let clean = self.destage_all(start);
            self.halt_stream(t_cmd);
            let (t2, t3) = self.media_access(t_cmd.max(clean), a, b);
            self.media_written += len;
            return t3.max(t2 + host);
        }
        let room = self.make_room(start, len);
        let done = room + self.overhead + host;
        self.dirty_bytes += len;
        match self.dirty.back_mut() {
            Some(last) if last.end == a && b - last.start <= MAX_EXTENT => {
                last.end = b;
                last.added = last.added.max(done);
            }
            _ => self.dirty.push_back(Extent { start: a, end: b, added: done }),
        }
        done
    }
}

impl SimDevice for HddDevice {
    fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    fn logical_block(&self) -> u64 {
        self.block
    }

    fn submit(&mut self, now: SimTime, request: &SimRequest) -> SimTime {
        let start = now.max(self.cmd_free);
        let s = start.ns() as f64;
        self.advance(s);
        let a = request.offset.min(self.capacity);
        let b = request.offset.saturating_add(request.len).min(self.capacity);
        let done = match request.op {
            SimOp::Read => self.read(s, a, b),
            SimOp::Write => self.write(s, a, b, PageContent::Data(request.fingerprint), b - a),
            SimOp::WriteZeroes => self.write(s, a, b, PageContent::Zeroes, 0),
            // No TRIM on a hard disk: acknowledged, nothing changes.
            SimOp::Trim => s + self.overhead,
            SimOp::Flush => self.destage_all(s) + self.overhead,
        };
        let done = to_sim(done).max(start);
        self.cmd_free = done;
        done
    }

    fn queue_depth(&self) -> u32 {
        self.queue_depth as u32
    }

    fn enqueue(&mut self, now: SimTime, request: &SimRequest, tag: u64) {
        if self.queue.is_empty() {
            self.queue_front_arrival = now;
        }
        self.queue.push_back(Queued { request: *request, tag });
    }

    fn dispatch(&mut self, now: SimTime) -> Option<(u64, SimTime)> {
        if self.queue.is_empty() || self.cmd_free > now {
            return None;
        }
        let chosen = if self.queue.len() == 1 { 0 } else { self.choose(now.ns() as f64) };
        let q = self.queue.remove(chosen).expect("chosen from the queue");
        // Every waiting command arrived by now (the caller dispatches as soon as the disk is free).
        self.queue_front_arrival = now;
        Some((q.tag, self.submit(now, &q.request)))
    }

    fn next_dispatch(&self) -> Option<SimTime> {
        (!self.queue.is_empty()).then(|| self.cmd_free.max(self.queue_front_arrival))
    }

    fn content(&self, lpn: u64) -> PageContent {
        self.content.get(lpn)
    }

    fn content_granularity(&self) -> u64 {
        self.block
    }

    fn counters(&self, now: SimTime) -> Counters {
        let t = now.ns() as f64;
        let mut written = self.media_written;
        for &(end, bytes) in &self.in_flight {
            if end > t {
                written -= bytes;
            }
        }
        // Replay, without changing anything, the destages the idle head has started since the last command.
        let mut head = self.head;
        let mut stream = self.stream.filter(|s| s.stop.is_infinite());
        let mut read = self.media_read;
        for ext in &self.dirty {
            let mut begin = head.free.max(ext.added);
            if let Some(st) = stream.take() {
                let (stop, pos) = self.halt_point(&st, begin);
                begin = begin.max(stop);
                if begin < t {
                    read += pos - st.origin;
                    head.free = head.free.max(stop);
                    head.track = self.platter.track_of(pos.max(1) - 1);
                } else {
                    stream = Some(st);
                }
            }
            if begin >= t {
                break;
            }
            let (_, end) = self.plan(&mut head, begin, ext.start, ext.end);
            if end <= t {
                written += ext.end - ext.start;
            }
        }
        if let Some(st) = stream {
            read += st.hi(&self.platter, t) - st.origin;
        }
        Counters {
            host_bytes_read: self.host_read,
            host_bytes_written: self.host_written,
            media_bytes_written: written,
            media_bytes_read: read,
            erase_count: 0,
            power_on_ns: now.ns(),
            power_cycles: self.power_cycles,
            ..Counters::default()
        }
    }

    fn controller_reset(&mut self, now: SimTime) -> SimTime {
        let ready = now.max(self.cmd_free);
        self.cmd_free = ready;
        ready
    }

    fn power_cycle(&mut self, now: SimTime) -> SimTime {
        let start = now.max(self.cmd_free);
        let s = start.ns() as f64;
        self.advance(s);
        let clean = self.destage_all(s);
        self.halt_stream(s);
        self.stream = None;
        let ready = to_sim(clean.max(self.head.free).max(s)) + SPIN_UP;
        self.head.free = ready.ns() as f64;
        self.cmd_free = ready;
        self.power_cycles += 1;
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceKind;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    const MS: f64 = 1e6;

    fn configs(cache: u64) -> (DeviceSection, Controller, HddConfig) {
        let device = DeviceSection {
            name: "test-hdd-1t".into(),
            kind: DeviceKind::Hdd,
            capacity: 1_000_000_000_000,
            logical_block: 512,
            over_provisioning: 0.0,
            seed: 1,
            description: String::new(),
        };
        let controller = Controller {
            command_overhead: Nanos(20_000),
            host_rate: Rate(600e6),
            buffer_insert_latency: Nanos(10_000),
            ram_read_latency: Nanos(5_000),
            cores: 0,
            command_time: Nanos(0),
            write_command_time: Nanos(0),
            sense_command_time: Nanos(0),
            read_command_time: Nanos(0),
            host_write_rate: Rate(600e6),
            host_total_rate: Rate(0.0),
            host_segment_time: Nanos(0),
            host_link_gaps: 8,
            command_slots: 0,
        };
        let hdd = HddConfig {
            rpm: 7200,
            track_to_track_seek: Nanos(800_000),
            average_seek: Nanos(8_500_000),
            full_stroke_seek: Nanos(17_000_000),
            outer_rate: Rate(200e6),
            inner_rate: Rate(100e6),
            cache,
            queue_depth: 32,
            scheduling_margin: Nanos(1_000_000),
        };
        (device, controller, hdd)
    }

    fn disk_with_cache(cache: u64) -> HddDevice {
        let (d, c, h) = configs(cache);
        HddDevice::new(&d, &c, &h)
    }

    fn disk() -> HddDevice {
        disk_with_cache(64 * MIB)
    }

    fn req(op: SimOp, offset: u64, len: u64, fingerprint: u32) -> SimRequest {
        SimRequest { op, offset, len, fingerprint }
    }

    fn read(offset: u64, len: u64) -> SimRequest {
        req(SimOp::Read, offset, len, 0)
    }

    fn write(offset: u64, len: u64, fingerprint: u32) -> SimRequest {
        req(SimOp::Write, offset, len, fingerprint)
    }

    /// Sequential QD1 reads of `chunk` from `from` for `total` bytes; bytes/s, first request excluded.
    fn sequential_read_rate(dev: &mut HddDevice, from: u64, total: u64, chunk: u64) -> f64 {
        let mut now = dev.submit(SimTime(1_000_000), &read(from, chunk));
        let t_first = now;
        let mut off = from + chunk;
        while off < from + total {
            now = dev.submit(now, &read(off, chunk));
            off += chunk;
        }
        (total - chunk) as f64 / ((now - t_first).0 as f64 / 1e9)
    }

    #[test]
    fn seek_curve_endpoints_and_mean() {
        let dev = disk();
        assert_eq!(dev.seek_time(0.0), Nanos(0));
        let small = dev.seek_time(1e-7).0 as f64;
        assert!((small - 0.8 * MS).abs() < 0.01 * MS, "seek(small) = {small}");
        assert_eq!(dev.seek_time(1.0), Nanos(17_000_000));
        // Mean over uniform start/end positions: distance density 2(1 - d), midpoint rule.
        let steps = 200_000;
        let mean: f64 = (0..steps)
            .map(|i| {
                let d = (i as f64 + 0.5) / steps as f64;
                dev.seek_time(d).0 as f64 * 2.0 * (1.0 - d) / steps as f64
            })
            .sum();
        assert!((mean - 8.5 * MS).abs() < 0.005 * MS, "mean seek {mean}");
        // And by sampling positions.
        let mut rng = SmallRng::seed_from_u64(7);
        let n = 200_000;
        let sampled: f64 = (0..n)
            .map(|_| {
                let d = (rng.random::<f64>() - rng.random::<f64>()).abs();
                dev.seek_time(d).0 as f64
            })
            .sum::<f64>()
            / n as f64;
        eprintln!("mean seek: integrated {:.3} ms, sampled {:.3} ms", mean / MS, sampled / MS);
        assert!((sampled - 8.5 * MS).abs() < 0.1 * MS);
        // Monotone.
        let mut last = 0;
        for i in 1..=1000 {
            let t = dev.seek_time(i as f64 / 1000.0).0;
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn adjacent_tracks_cost_track_to_track() {
        let dev = disk();
        assert_eq!(dev.seek_tracks(10, 10), 0.0);
        assert!((dev.seek_tracks(10, 11) - 0.8 * MS).abs() < 1.0);
        assert!((dev.seek_tracks(0, dev.tracks() - 1) - 17.0 * MS).abs() < 1.0);
    }

    #[test]
    fn zoning_geometry_is_consistent() {
        let dev = disk();
        let p = &dev.platter;
        for f in [0.0, 0.1, 0.37, 0.5, 0.9, 1.0] {
            let x = p.cylinder_fraction(f);
            assert!((p.byte_fraction(x) - f).abs() < 1e-12);
        }
        // Track lookup agrees with track starts everywhere, including boundaries.
        for n in [0, 1, 2, p.tracks / 3, p.tracks / 2, p.tracks - 2, p.tracks - 1] {
            let s = p.track_start(n);
            assert_eq!(p.track_of(s), n);
            if s > 0 {
                assert_eq!(p.track_of(s - 1), n - 1);
            }
        }
        // Streaming time and position are inverses.
        let from = 123_456_789;
        for bytes in [1u64, 4096, MIB, 10 * MIB, 300 * MIB] {
            let t = p.pass_time(from, from + bytes);
            let pos = p.stream_pos(from, t + 0.5);
            assert!(pos.abs_diff(from + bytes) <= 1, "{bytes}: {pos}");
        }
        let r0 = dev.sequential_rate(0).0;
        let r1 = dev.sequential_rate(dev.capacity - 1).0;
        assert!((r0 / 200e6 - 1.0).abs() < 0.001, "{r0}");
        assert!((r1 / 100e6 - 1.0).abs() < 0.001, "{r1}");
    }

    #[test]
    fn random_reads_cost_average_seek_plus_half_a_rotation() {
        let mut dev = disk();
        let mut rng = SmallRng::seed_from_u64(1);
        let blocks = dev.capacity / 4096;
        let n = 4000;
        let mut now = SimTime(0);
        let mut total = 0u64;
        for _ in 0..n {
            let off = rng.random_range(0..blocks) * 4096;
            let done = dev.submit(now, &read(off, 4 * KIB));
            total += (done - now).0;
            now = done + Nanos(1_000_000);
        }
        let mean = total as f64 / n as f64;
        let transfer = 4096.0 / 150e6 * 1e9;
        let expected = 8.5 * MS + dev.platter.period / 2.0 + transfer + 20_000.0 + dev.host_time(4096);
        eprintln!(
            "random 4 KiB read: mean {:.3} ms, expected {:.3} ms ({:+.1} %)",
            mean / MS,
            expected / MS,
            (mean / expected - 1.0) * 100.0
        );
        assert!((mean / expected - 1.0).abs() < 0.10);
    }

    #[test]
    fn sequential_reads_run_at_outer_and_inner_rates() {
        let mut dev = disk();
        let outer = sequential_read_rate(&mut dev, 0, 256 * MIB, MIB);
        let end = dev.capacity - 256 * MIB;
        let inner = sequential_read_rate(&mut dev, end, 256 * MIB, MIB);
        eprintln!("sequential 1 MiB reads: outer {:.2} MB/s, inner {:.2} MB/s", outer / 1e6, inner / 1e6);
        assert!((outer / 200e6 - 1.0).abs() < 0.05, "outer {outer}");
        assert!((inner / 100e6 - 1.0).abs() < 0.05, "inner {inner}");
        // Without a cache each request loses most of a revolution: far slower.
        let mut bare = disk_with_cache(0);
        let slow = sequential_read_rate(&mut bare, 0, 64 * MIB, MIB);
        eprintln!("sequential 1 MiB reads without cache: {:.2} MB/s", slow / 1e6);
        assert!(slow < 0.7 * outer);
    }

    #[test]
    fn sequential_writes_settle_at_the_media_rate() {
        let mut dev = disk();
        let mut now = SimTime(0);
        let mut off = 0;
        let mut mark = None;
        while off < 512 * MIB {
            now = dev.submit(now, &write(off, MIB, 9));
            off += MIB;
            if off == 256 * MIB {
                mark = Some(now);
            }
        }
        let rate = (256 * MIB) as f64 / ((now - mark.unwrap()).0 as f64 / 1e9);
        eprintln!("sequential 1 MiB writes past the cache: {:.2} MB/s", rate / 1e6);
        assert!((rate / 200e6 - 1.0).abs() < 0.05, "{rate}");
    }

    #[test]
    fn read_ahead_serves_the_next_sequential_read_at_host_speed() {
        let mut dev = disk();
        let off = 400_000_000_000;
        let t = dev.submit(SimTime(0), &read(off, 64 * KIB));
        assert!(t.0 > 500_000, "first read is a miss");
        let later = t + Nanos(50_000_000);
        let done = dev.submit(later, &read(off + 64 * KIB, 64 * KIB));
        let expect = 20_000 + dev.host_rate.time_for(64 * KIB).0;
        assert!((done - later).0.abs_diff(expect) <= 1, "{:?}", done - later);
        // Data the drive read ahead long ago but within the window also hits; data beyond it does not.
        let again = dev.submit(done, &read(off + 2 * MIB, 4 * KIB));
        assert!((again - done).0 < 100_000);
        let far = dev.submit(again, &read(off + 200 * MIB, 4 * KIB));
        assert!((far - again).0 > 500_000);
    }

    #[test]
    fn write_back_cache_absorbs_writes_until_full() {
        let mut dev = disk();
        let mut rng = SmallRng::seed_from_u64(3);
        let blocks = dev.capacity / 4096;
        let fast = 20_000 + dev.host_rate.time_for(4096).0;
        let mut now = SimTime(0);
        let mut lat = Vec::new();
        for i in 0..17_500u32 {
            let off = rng.random_range(0..blocks) * 4096;
            let done = dev.submit(now, &write(off, 4 * KIB, i));
            lat.push((done - now).0);
            now = done;
        }
        assert!(lat[..16_000].iter().all(|&l| l == fast), "cached writes take {fast} ns");
        let full: f64 = lat[17_000..].iter().map(|&l| l as f64).sum::<f64>() / 500.0;
        eprintln!("write-back: cached write {:.1} us, with the cache full {:.2} ms", fast as f64 / 1e3, full / MS);
        assert!(full > 5.0 * MS);
    }

    #[test]
    fn flush_waits_for_destage() {
        let mut dev = disk();
        let mut rng = SmallRng::seed_from_u64(4);
        let blocks = dev.capacity / 4096;
        let mut now = SimTime(0);
        for i in 0..500u32 {
            now = dev.submit(now, &write(rng.random_range(0..blocks) * 4096, 4 * KIB, i));
        }
        let before = dev.counters(now);
        assert_eq!(before.host_bytes_written, 500 * 4096);
        assert!(before.media_bytes_written < before.host_bytes_written);
        let done = dev.submit(now, &req(SimOp::Flush, 0, 0, 0));
        let took = (done - now).0 as f64;
        eprintln!("flush of 500 random dirty 4 KiB writes: {:.2} s", took / 1e9);
        assert!(took > 400.0 * 5.0 * MS);
        let after = dev.counters(done);
        assert_eq!(after.media_bytes_written, after.host_bytes_written);
        // Nothing dirty: a second flush is just a command.
        let again = dev.submit(done, &req(SimOp::Flush, 0, 0, 0));
        assert_eq!((again - done).0, 20_000);
    }

    #[test]
    fn background_destage_shows_in_the_counters() {
        let mut dev = disk();
        let now = dev.submit(SimTime(0), &write(0, 4 * MIB, 1));
        assert_eq!(dev.counters(now).media_bytes_written, 0);
        let later = now + Nanos(1_000_000_000);
        assert_eq!(dev.counters(later).media_bytes_written, 4 * MIB);
        dev.submit(later, &read(MIB, 4 * KIB));
        assert_eq!(dev.counters(later).media_bytes_written, 4 * MIB);
    }

    #[test]
    fn reads_return_what_was_written() {
        let mut dev = disk();
        let mut now = SimTime(0);
        now = dev.submit(now, &write(0, 8 * KIB, 11));
        now = dev.submit(now, &write(4 * KIB, 4 * KIB, 12));
        now = dev.submit(now, &req(SimOp::WriteZeroes, 8 * KIB, 4 * KIB, 0));
        now = dev.submit(now, &write(1_000_000 * 512 + 100, 200, 13));
        let t = dev.submit(now, &read(0, 12 * KIB));
        assert!(t > now);
        assert_eq!(dev.content(0), PageContent::Data(11));
        assert_eq!(dev.content(7), PageContent::Data(11));
        assert_eq!(dev.content(8), PageContent::Data(12));
        assert_eq!(dev.content(15), PageContent::Data(12));
        assert_eq!(dev.content(16), PageContent::Zeroes);
        assert_eq!(dev.content(23), PageContent::Zeroes);
        assert_eq!(dev.content(24), PageContent::Unwritten);
        assert_eq!(dev.content(1_000_000), PageContent::Data(13));
        assert_eq!(dev.content(1_000_001), PageContent::Unwritten);
        // TRIM is not supported: acknowledged after the command overhead, content unchanged.
        let trim = dev.submit(t, &req(SimOp::Trim, 0, 8 * KIB, 0));
        assert_eq!((trim - t).0, 20_000);
        assert_eq!(dev.content(0), PageContent::Data(11));
        // Survives a power cycle.
        dev.power_cycle(trim);
        assert_eq!(dev.content(8), PageContent::Data(12));
        assert_eq!(dev.content_granularity(), 512);
        // A read of the most recent dirty data is served from the cache.
        let w = dev.submit(SimTime(10_000_000_000), &write(500 * MIB, 64 * KIB, 5));
        let r = dev.submit(w, &read(500 * MIB, 64 * KIB));
        assert!((r - w).0 < 200_000);
    }

    #[test]
    fn requests_are_served_fifo() {
        let mut dev = disk();
        let now = SimTime(5_000_000);
        let a = dev.submit(now, &read(100_000_000_000, 4 * KIB));
        let b = dev.submit(now, &read(800_000_000_000, 4 * KIB));
        assert!(a > now);
        assert!(b.0 >= a.0 + 800_000, "second waits for the first: {a:?} {b:?}");
        let c = dev.submit(now, &write(0, 4 * KIB, 1));
        let d = dev.submit(now, &write(MIB, 4 * KIB, 2));
        assert_eq!((c - b).0, (d - c).0);
        assert_eq!((d - c).0, 20_000 + dev.host_rate.time_for(4096).0);
    }

    #[test]
    fn power_cycle_destages_and_empties_the_cache() {
        let mut dev = disk();
        let mut now = SimTime(0);
        for i in 0..20u32 {
            now = dev.submit(now, &write(u64::from(i) * 10_000_000_000, 4 * KIB, i));
        }
        let ready = dev.power_cycle(now);
        assert!((ready - now).0 as f64 > 15.0 * MS);
        let c = dev.counters(ready);
        assert_eq!(c.media_bytes_written, c.host_bytes_written);
        assert_eq!(c.power_cycles, 1);
        assert_eq!(c.power_on_ns, ready.0);
        assert!(dev.dirty.is_empty() && dev.stream.is_none());
        // Controller reset keeps the cache and returns when in-flight work is done.
        let r = dev.submit(ready, &read(0, 64 * KIB));
        let reset = dev.controller_reset(ready);
        assert_eq!(reset, r);
        let idle = reset + Nanos(10_000_000);
        let hit = dev.submit(idle, &read(64 * KIB, 64 * KIB));
        assert!((hit - idle).0 < 200_000);
    }

    #[test]
    fn deterministic() {
        let run = || {
            let mut dev = disk();
            let mut rng = SmallRng::seed_from_u64(9);
            let mut now = SimTime(0);
            let mut out = Vec::new();
            for i in 0..3000u32 {
                let off = rng.random_range(0..1_000_000u64) * 4096;
                let r = match i % 4 {
                    0 | 1 => read(off, 4 * KIB),
                    2 => write(off, 16 * KIB, i),
                    _ => read(off, 256 * KIB),
                };
                now = dev.submit(now + Nanos(rng.random_range(0..200_000)), &r);
                out.push(now);
            }
            (out, dev.counters(now).media_bytes_written)
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn content_map_matches_a_per_block_model() {
        let mut map = ContentMap::default();
        let mut naive = std::collections::HashMap::new();
        let mut rng = SmallRng::seed_from_u64(5);
        let span = 5 * BUCKET_BLOCKS;
        for i in 0..4_000u32 {
            let start = rng.random_range(0..span);
            let len = match i % 3 {
                0 => rng.random_range(1..16),
                1 => rng.random_range(1..300),
                _ => rng.random_range(1..3 * BUCKET_BLOCKS),
            };
            let end = (start + len).min(span);
            let c = match rng.random_range(0..4) {
                0 => PageContent::Zeroes,
                k => PageContent::Data(k),
            };
            map.set(start, end, c);
            for b in start..end {
                naive.insert(b, c);
            }
            if i % 500 == 499 {
                for b in 0..span + 10 {
                    let want = naive.get(&b).copied().unwrap_or(PageContent::Unwritten);
                    assert_eq!(map.get(b), want, "block {b} after {i} writes");
                }
                for runs in map.buckets.values() {
                    for w in runs.windows(2) {
                        assert!(w[0].1 <= w[1].0, "sorted, disjoint");
                        assert!(w[0].1 < w[1].0 || w[0].2 != w[1].2, "merged");
                    }
                }
            }
        }
    }

    #[test]
    fn hdd_presets_meet_their_datasheets() {
        for name in ["hdd-7200-consumer", "hdd-15k-enterprise"] {
            let cfg = crate::presets::load(name).expect("preset loads");
            let h = cfg.hdd.clone().expect("an [hdd] section");
            let new = || HddDevice::new(&cfg.device, &cfg.controller, &h);
            let mut dev = new();
            let mut rng = SmallRng::seed_from_u64(2);
            let blocks = dev.capacity / 4096;
            let (n, mut total, mut now) = (2000, 0u64, SimTime(0));
            for _ in 0..n {
                let done = dev.submit(now, &read(rng.random_range(0..blocks) * 4096, 4 * KIB));
                total += (done - now).0;
                now = done + Nanos(1_000_000);
            }
            let mean = total as f64 / n as f64;
            let expected = h.average_seek.0 as f64
                + dev.platter.period / 2.0
                + 4096.0 / ((h.outer_rate.0 + h.inner_rate.0) / 2.0) * 1e9
                + cfg.controller.command_overhead.0 as f64
                + dev.host_time(4096);
            let outer = sequential_read_rate(&mut new(), 0, 256 * MIB, MIB);
            let inner = sequential_read_rate(&mut new(), dev.capacity - 256 * MIB, 256 * MIB, MIB);
            eprintln!(
                "{name}: random 4 KiB read {:.3} ms (expected {:.3} ms), sequential {:.2} / {:.2} MB/s",
                mean / MS,
                expected / MS,
                outer / 1e6,
                inner / 1e6
            );
            assert!((mean / expected - 1.0).abs() < 0.10, "{name}");
            assert!((outer / h.outer_rate.0 - 1.0).abs() < 0.05, "{name}");
            assert!((inner / h.inner_rate.0 - 1.0).abs() < 0.05, "{name}");
        }
    }

    /// Random 4 KiB reads over the whole disk kept `qd` deep, as the engine drives a queueing device: a
    /// new read arrives as each completes, and the disk starts the next whenever it is free.
    fn closed_loop_iops(dev: &mut HddDevice, qd: usize, n: usize, seed: u64) -> f64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let blocks = dev.capacity_bytes() / 4096;
        let mut completions = std::collections::BinaryHeap::new();
        let mut now = SimTime::ZERO;
        let (mut issued, mut done) = (0usize, 0usize);
        let next = |rng: &mut SmallRng| read(rng.random_range(0..blocks) * 4096, 4096);
        while done < n {
            while issued - done < qd && issued < n {
                dev.enqueue(now, &next(&mut rng), issued as u64);
                issued += 1;
            }
            while let Some((_, at)) = dev.dispatch(now) {
                completions.push(std::cmp::Reverse(at));
            }
            let std::cmp::Reverse(at) = completions.pop().expect("one in flight");
            now = at.max(now);
            done += 1;
        }
        n as f64 / (now.ns() as f64 / 1e9)
    }

    #[test]
    fn command_queueing_roughly_doubles_random_read_iops_at_qd_32() {
        let preset = || {
            let cfg = crate::presets::load("hdd-7200-consumer").unwrap();
            HddDevice::new(&cfg.device, &cfg.controller, cfg.hdd.as_ref().unwrap())
        };
        let qd1 = closed_loop_iops(&mut preset(), 1, 3000, 1);
        // QD 1 through the queue is the FIFO model: the same times as submitting one by one.
        let mut fifo = preset();
        let mut rng = SmallRng::seed_from_u64(1);
        let blocks = fifo.capacity_bytes() / 4096;
        let mut now = SimTime::ZERO;
        for _ in 0..3000 {
            now = fifo.submit(now, &read(rng.random_range(0..blocks) * 4096, 4096));
        }
        assert_eq!(qd1, 3000.0 / (now.ns() as f64 / 1e9));
        // Average seek plus half a rotation: 1 / (8.5 ms + 4.17 ms) = 79 IOPS over the whole disk.
        assert!((70.0..90.0).contains(&qd1), "QD 1: {qd1:.0} IOPS");
        let qd32 = closed_loop_iops(&mut preset(), 32, 6000, 2);
        let ratio = qd32 / qd1;
        assert!((1.7..2.6).contains(&ratio), "QD 32: {qd32:.0} IOPS = {ratio:.2} x QD 1");
        // Without queueing, depth buys nothing.
        let mut cfg = crate::presets::load("hdd-7200-consumer").unwrap();
        cfg.hdd.as_mut().unwrap().queue_depth = 1;
        let mut fifo32 = HddDevice::new(&cfg.device, &cfg.controller, cfg.hdd.as_ref().unwrap());
        let flat = closed_loop_iops(&mut fifo32, 32, 3000, 2) / qd1;
        assert!((0.9..1.1).contains(&flat), "queue_depth = 1 at QD 32: {flat:.2} x QD 1");
    }

    #[test]
    fn queued_reads_never_pass_an_overlapping_write() {
        let mut dev = disk();
        dev.enqueue(SimTime::ZERO, &read(500 * MIB, 4096), 0);
        dev.enqueue(SimTime::ZERO, &write(900 * MIB, 4096, 7), 1);
        dev.enqueue(SimTime::ZERO, &read(900 * MIB, 4096), 2);
        dev.enqueue(SimTime::ZERO, &read(100 * MIB, 4096), 3);
        let mut order = Vec::new();
        let mut now = SimTime::ZERO;
        while let Some(t) = dev.next_dispatch() {
            now = t.max(now);
            let (tag, done) = dev.dispatch(now).unwrap();
            order.push(tag);
            now = done;
        }
        let pos = |tag: u64| order.iter().position(|&t| t == tag).unwrap();
        assert!(pos(1) < pos(2), "{order:?}");
        assert_eq!(dev.content(900 * MIB / 512), PageContent::Data(7));
    }
}
