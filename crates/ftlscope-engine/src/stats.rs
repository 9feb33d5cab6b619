//! Turning completion records into results: per-operation summaries (HDR histograms), time windows and
//! the optional per-request trace.
//!
//! This runs on the aggregator thread (seed 000's "logger thread"), never in the engine's hot loop, so it
//! may allocate freely.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::workload::Op;

/// What an errno means, in words ("Input/output error"), without Rust's " (os error 5)" suffix.
pub fn errno_message(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Largest latency the histograms track exactly: one hour. Longer ones saturate (and still count).
const MAX_TRACKED_NS: u64 = 3_600_000_000_000;

/// One finished request, as the engine loop hands it to the aggregator.
#[derive(Clone, Copy, Debug, Default)]
pub struct Record {
    pub submit_ns: u64,
    pub complete_ns: u64,
    pub offset: u64,
    pub len: u32,
    /// Bytes transferred, 0, or `-errno`.
    pub result: i32,
    pub op: u8,
    pub queue: u16,
    /// Completed during warm-up: left out of the results.
    pub warmup: bool,
    /// Issued during warm-up but completed after it: counted (as fio counts every completion after its
    /// ramp), but its submit time does not open the measured interval, which starts when warm-up ends.
    pub issued_in_warmup: bool,
    /// Replays: how much later than its schedule the request was submitted (0 otherwise).
    pub issue_lag_ns: u64,
    /// Where the request came in the run's submission order, over every queue (0 first). Requests submitted
    /// in the same nanosecond (a simulated drive's whole batch) are told apart by it, so a replay can issue
    /// them in the order the run did.
    pub submit_seq: u64,
}

impl Record {
    pub fn latency_ns(&self) -> u64 {
        self.complete_ns.saturating_sub(self.submit_ns)
    }

    /// An error, or a read/write that moved fewer bytes than asked.
    pub fn failed(&self) -> bool {
        self.result < 0 || (matches!(Op::from_index(self.op), Op::Read | Op::Write) && self.result as u32 != self.len)
    }
}

/// Latency figures in ns, under the names scripts rely on.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LatencyFigures {
    pub mean: f64,
    pub stddev: f64,
    pub min: u64,
    pub max: u64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    #[serde(rename = "p99.9")]
    pub p99_9: u64,
    #[serde(rename = "p99.99")]
    pub p99_99: u64,
}

/// The latency above which a request counts as slow in `ops_over_1ms`.
const SLOW_REQUEST_NS: u64 = 1_000_000;

/// One operation's results: `{"ops", "iops", "bw_bytes", "lat_ns": {...}}` plus bytes and errors.
#[derive(Clone, Debug, Default, Serialize)]
pub struct OpSummary {
    pub ops: u64,
    pub iops: f64,
    pub bw_bytes: f64,
    pub bytes: u64,
    pub errors: u64,
    /// Requests that took longer than 1 ms: seed 000's measure of a slow request (§5.9), kept per window so
    /// a whole-drive fill needs no per-request trace to draw the share of slow requests over time.
    pub ops_over_1ms: u64,
    pub lat_ns: LatencyFigures,
    /// The whole run only (not windows): `[edge_ns, requests faster than edge_ns]` at fio's latency bucket
    /// edges (2, 4, 10, 20, 50, 100, 250, 500, 750, 1000 ns, the same in us and ms, and 2 s), from the
    /// histogram (3 significant digits), so fio's `latency_ns`/`latency_us`/`latency_ms` shares can be
    /// written without a per-request trace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lat_ns_below: Vec<[u64; 2]>,
    /// The whole run only: `[percentile, ns]` at fio's default `percentile_list` (1, 5, 10, 20, ..., 99.99), so
    /// fio's JSON shape can carry every percentile key fio writes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lat_ns_fio_percentiles: Vec<[f64; 2]>,
}

/// fio's default `percentile_list`.
const FIO_PERCENTILES: [f64; 17] =
    [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99];

/// fio's latency bucket edges within a decade group (fio's stat.c: `latency_ns`, `latency_us`, `latency_ms`).
const FIO_BUCKET_EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];

/// Running figures for one operation: a histogram for percentiles, exact moments for mean and stddev.
struct Accumulator {
    hist: Histogram<u64>,
    ops: u64,
    bytes: u64,
    errors: u64,
    mean: f64,
    m2: f64,
    min: u64,
    max: u64,
}

impl Accumulator {
    fn new(significant_figures: u8) -> Accumulator {
        Accumulator {
            hist: Histogram::new_with_bounds(1, MAX_TRACKED_NS, significant_figures).expect("valid histogram bounds"),
            ops: 0,
            bytes: 0,
            errors: 0,
            mean: 0.0,
            m2: 0.0,
            min: u64::MAX,
            max: 0,
        }
    }

    fn add(&mut self, latency_ns: u64, bytes: u64, failed: bool) {
        if failed {
            // Failed requests are counted, not timed: their latency says nothing about the device's speed.
            self.errors += 1;
            return;
        }
        self.hist.saturating_record(latency_ns.max(1));
        self.ops += 1;
        self.bytes += bytes;
        // Welford's update: exact mean and variance without storing every latency.
        let x = latency_ns as f64;
        let delta = x - self.mean;
        self.mean += delta / self.ops as f64;
        self.m2 += delta * (x - self.mean);
        self.min = self.min.min(latency_ns);
        self.max = self.max.max(latency_ns);
    }

    /// Requests faster than each of fio's bucket edges (see `OpSummary::lat_ns_below`).
    fn counts_below_fio_edges(&self) -> Vec<[u64; 2]> {
        let edges = [1, 1_000, 1_000_000]
            .into_iter()
            .flat_map(|unit| FIO_BUCKET_EDGES.map(|edge| edge * unit))
            .chain([2_000_000_000]);
        // Up to the histogram bucket below the one holding the edge: a request at exactly the edge (common on
        // a simulated device) counts above it, as in fio; one within 0.1 % under it may count above it too.
        let below = |edge: u64| match self.hist.lowest_equivalent(edge).checked_sub(1) {
            Some(high) if self.ops > 0 && high >= 1 => self.hist.count_between(1, high),
            _ => 0,
        };
        edges.map(|edge| [edge, below(edge)]).collect()
    }

    /// Latency at each of fio's default percentiles (see `OpSummary::lat_ns_fio_percentiles`), within [min, max]
    /// as the summary's own percentiles are.
    fn fio_percentiles(&self) -> Vec<[f64; 2]> {
        if self.ops == 0 {
            return Vec::new();
        }
        FIO_PERCENTILES
            .iter()
            .map(|&p| [p, self.hist.value_at_quantile(p / 100.0).clamp(self.min, self.max) as f64])
            .collect()
    }

    fn summary(&self, duration_ns: u64) -> OpSummary {
        let seconds = duration_ns as f64 / 1e9;
        let rate = |n: f64| if seconds > 0.0 { n / seconds } else { 0.0 };
        // HDR buckets report their upper edge; keep percentiles inside the exact [min, max].
        let q = |p: f64| if self.ops == 0 { 0 } else { self.hist.value_at_quantile(p).clamp(self.min, self.max) };
        OpSummary {
            ops: self.ops,
            iops: rate(self.ops as f64),
            bw_bytes: rate(self.bytes as f64),
            bytes: self.bytes,
            errors: self.errors,
            ops_over_1ms: if self.max > SLOW_REQUEST_NS {
                self.hist.count_between(SLOW_REQUEST_NS + 1, u64::MAX)
            } else {
                0
            },
            lat_ns: LatencyFigures {
                mean: self.mean,
                stddev: if self.ops > 1 { (self.m2 / (self.ops - 1) as f64).sqrt() } else { 0.0 },
                min: if self.ops == 0 { 0 } else { self.min },
                max: self.max,
                p50: q(0.50),
                p90: q(0.90),
                p95: q(0.95),
                p99: q(0.99),
                p99_9: q(0.999),
                p99_99: q(0.9999),
            },
            lat_ns_below: Vec::new(),
            lat_ns_fio_percentiles: Vec::new(),
        }
    }
}

/// One row of the time-window table: one operation in one window.
#[derive(Clone, Debug, Serialize)]
pub struct WindowRow {
    pub window: u64,
    /// Window start and length, relative to the run's start.
    pub start_ns: u64,
    pub duration_ns: u64,
    pub op: &'static str,
    #[serde(flatten)]
    pub summary: OpSummary,
}

/// The per-request trace's columns, one line each: name, element type, and the value taken from a record `rec`
/// of a run that started at `t0`. `Trace` (the columns), its `push` and its `columns()` (what the Python side
/// and the streaming writer read, generically) all come from this list, so a new column is one line here.
/// Columns after `optional` are kept only by runs that ask for them (a replay's issue lag): otherwise they
/// stay empty and `columns()` leaves them out.
macro_rules! trace_columns {
    (|$rec:ident, $t0:ident| { $($name:ident: $ty:ty = $value:expr;)* }
     optional { $($opt:ident: $oty:ty = $ovalue:expr;)* }) => {
        /// The per-request trace, column by column (so it converts to Parquet without a copy per row).
        #[derive(Clone, Debug, Default)]
        pub struct Trace {
            $(pub $name: Vec<$ty>,)*
            $(pub $opt: Vec<$oty>,)*
            /// Records dropped because the trace reached its limit.
            pub dropped: u64,
        }

        impl Trace {
            /// An empty trace with room for `rows` records in every column (a reusable streaming chunk).
            pub fn with_capacity(rows: usize) -> Trace {
                Trace { $($name: Vec::with_capacity(rows),)* $($opt: Vec::new(),)* dropped: 0 }
            }

            /// Add a record; `optional`: the optional columns too.
            fn push(&mut self, $rec: &Record, $t0: u64, optional: bool) {
                $(self.$name.push($value);)*
                if optional {
                    $(self.$opt.push($ovalue);)*
                }
            }

            /// Empty every column, keeping its memory (a chunk goes back to be filled again).
            pub fn clear(&mut self) {
                $(self.$name.clear();)*
                $(self.$opt.clear();)*
                self.dropped = 0;
            }

            /// Every column as (name, raw little-endian bytes), in the order above; optional columns only
            /// where they were kept.
            pub fn columns(&self) -> Vec<(&'static str, &[u8])> {
                let mut all = vec![$((stringify!($name), column_bytes(&self.$name)),)*];
                $(if !self.$opt.is_empty() {
                    all.push((stringify!($opt), column_bytes(&self.$opt)));
                })*
                all
            }
        }
    };
}

trace_columns!(|rec, t0| {
    op: u8 = rec.op;
    offset: u64 = rec.offset;
    size: u32 = rec.len;
    queue: u16 = rec.queue;
    submit_ns: u64 = rec.submit_ns.saturating_sub(t0);
    complete_ns: u64 = rec.complete_ns.saturating_sub(t0);
    status: i32 = rec.result;
    warmup: bool = rec.warmup;
    submit_seq: u64 = rec.submit_seq;
} optional {
    // a replay's: how late each request was submitted against its schedule
    issue_lag_ns: u64 = rec.issue_lag_ns;
});

/// The column types a trace holds: plain integers and bools, whose memory is their value.
trait PlainColumn: Copy {}
impl PlainColumn for u8 {}
impl PlainColumn for u16 {}
impl PlainColumn for u32 {}
impl PlainColumn for u64 {}
impl PlainColumn for i32 {}
impl PlainColumn for i64 {}
impl PlainColumn for bool {}

fn column_bytes<T: PlainColumn>(column: &[T]) -> &[u8] {
    // SAFETY: PlainColumn types have no padding and no invalid bit patterns to expose (bool is one byte, 0 or 1).
    unsafe { std::slice::from_raw_parts(column.as_ptr().cast::<u8>(), std::mem::size_of_val(column)) }
}

impl Trace {
    pub fn len(&self) -> usize {
        self.op.len()
    }

    pub fn is_empty(&self) -> bool {
        self.op.is_empty()
    }
}

/// Chunks of a few hundred thousand records in flight at once: one filling, the rest queued for the writer or
/// being copied out. Bounds the streaming trace's memory whatever the run's length.
const STREAM_CHUNKS: usize = 4;

/// The consumer's side of a streamed trace: full chunks arrive on `full` (in completion order; the channel
/// closes after the last, partial one), and go back, cleared, on `empty` to be filled again.
pub struct TraceChunks {
    pub full: std::sync::mpsc::Receiver<Trace>,
    pub empty: std::sync::mpsc::Sender<Trace>,
}

/// The aggregator's side: fills one chunk at a time and hands it over when full. The chunks are recycled, so
/// once `STREAM_CHUNKS` exist nothing is allocated; a writer that falls behind holds the aggregator back (and
/// so, through the record rings, the queues) rather than letting memory grow.
struct TraceStream {
    rows: usize,
    filling: Trace,
    full: std::sync::mpsc::SyncSender<Trace>,
    empty: std::sync::mpsc::Receiver<Trace>,
    allocated: usize,
    /// The consumer went away (its writer failed): records are counted, no longer kept.
    closed: bool,
    dropped: u64,
}

impl TraceStream {
    fn new(rows: usize) -> (TraceStream, TraceChunks) {
        let rows = rows.max(1);
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel(STREAM_CHUNKS);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel();
        let stream = TraceStream {
            rows,
            filling: Trace::with_capacity(rows),
            full: full_tx,
            empty: empty_rx,
            allocated: 1,
            closed: false,
            dropped: 0,
        };
        (stream, TraceChunks { full: full_rx, empty: empty_tx })
    }

    fn push(&mut self, rec: &Record, t0: u64, optional: bool) {
        if self.closed {
            self.dropped += 1;
            return;
        }
        self.filling.push(rec, t0, optional);
        if self.filling.len() >= self.rows {
            self.hand_over();
        }
    }

    fn hand_over(&mut self) {
        use std::sync::mpsc::TryRecvError;
        let next = match self.empty.try_recv() {
            Ok(chunk) => Some(chunk),
            Err(TryRecvError::Empty) if self.allocated < STREAM_CHUNKS => {
                self.allocated += 1;
                Some(Trace::with_capacity(self.rows))
            }
            Err(TryRecvError::Empty) => self.empty.recv().ok(),
            Err(TryRecvError::Disconnected) => None,
        };
        let Some(next) = next else {
            self.close();
            return;
        };
        let full = std::mem::replace(&mut self.filling, next);
        if self.full.send(full).is_err() {
            self.close();
        }
    }

    fn close(&mut self) {
        self.closed = true;
        self.dropped += self.filling.len() as u64;
        self.filling.clear();
    }

    /// Hand over the last, partial chunk; dropping the stream then closes the channel.
    fn finish(mut self) -> u64 {
        if !self.closed && !self.filling.is_empty() {
            let last = std::mem::take(&mut self.filling);
            if self.full.send(last).is_err() {
                self.closed = true;
            }
        }
        self.dropped
    }
}

/// A failed request, with where it went and the errno.
#[derive(Clone, Debug, Serialize)]
pub struct IoErrorRecord {
    pub op: &'static str,
    pub offset: u64,
    pub len: u32,
    pub errno: i32,
    pub message: String,
    pub at_ns: u64,
}

/// Collects records from all queues.
pub struct Aggregator {
    t0: u64,
    window_ns: u64,
    totals: [Option<Accumulator>; 5],
    /// Windows not yet closed, by index; a window closes once every queue has completed past its end.
    open: BTreeMap<u64, [Option<Accumulator>; 5]>,
    closed: Vec<WindowRow>,
    first_window: Option<u64>,
    last_closed: Option<u64>,
    ops_seen: [bool; 5],
    watermarks: Vec<u64>,
    trace: Option<Trace>,
    trace_limit: usize,
    stream: Option<TraceStream>,
    errors: Vec<IoErrorRecord>,
    error_count: u64,
    first_submit: Option<u64>,
    last_complete: u64,
    warmup_ops: u64,
    /// Replays: the issue lag of every measured request.
    issue_lag: Option<Accumulator>,
}

const KEPT_ERRORS: usize = 1000;

impl Aggregator {
    /// `ops` are the operations the workload issues: every window gets a row for each, even before the
    /// first of them completes.
    pub fn new(t0: u64, window_ns: u64, queues: usize, trace_limit: Option<usize>, ops: &[Op]) -> Aggregator {
        let mut ops_seen = [false; 5];
        for &op in ops {
            ops_seen[op as usize] = true;
        }
        Aggregator {
            t0,
            window_ns: window_ns.max(1),
            totals: Default::default(),
            open: BTreeMap::new(),
            closed: Vec::new(),
            first_window: None,
            last_closed: None,
            ops_seen,
            watermarks: vec![0; queues],
            trace: trace_limit.map(|_| Trace::default()),
            trace_limit: trace_limit.unwrap_or(0),
            stream: None,
            errors: Vec::new(),
            error_count: 0,
            first_submit: None,
            last_complete: 0,
            warmup_ops: 0,
            issue_lag: None,
        }
    }

    /// Also hand every record out in chunks of `rows` while the run goes (see [`TraceChunks`]), for a trace
    /// of any length in bounded memory.
    pub fn stream_trace(&mut self, rows: usize) -> TraceChunks {
        let (stream, chunks) = TraceStream::new(rows);
        self.stream = Some(stream);
        chunks
    }

    /// Keep each request's issue lag (a replay's): its figures in the result, and a trace column.
    pub fn track_issue_lag(&mut self) {
        self.issue_lag = Some(Accumulator::new(3));
    }

    pub fn add(&mut self, rec: &Record) {
        if let Some(trace) = &mut self.trace {
            if trace.len() < self.trace_limit {
                trace.push(rec, self.t0, self.issue_lag.is_some());
            } else {
                trace.dropped += 1;
            }
        }
        if let Some(stream) = &mut self.stream {
            stream.push(rec, self.t0, self.issue_lag.is_some());
        }
        let q = rec.queue as usize;
        if q < self.watermarks.len() {
            self.watermarks[q] = self.watermarks[q].max(rec.complete_ns);
        }
        if rec.warmup {
            self.warmup_ops += 1;
            return;
        }
        if let Some(lag) = &mut self.issue_lag {
            // Every issued request counts, a failed one too: it was late or not regardless of its outcome.
            lag.add(rec.issue_lag_ns, 0, false);
        }
        let failed = rec.failed();
        if failed {
            self.error_count += 1;
            if self.errors.len() < KEPT_ERRORS {
                let errno = if rec.result < 0 { -rec.result } else { libc::EIO };
                let message = if rec.result >= 0 {
                    format!("short transfer: {} of {} bytes", rec.result, rec.len)
                } else {
                    errno_message(errno)
                };
                self.errors.push(IoErrorRecord {
                    op: Op::from_index(rec.op).name(),
                    offset: rec.offset,
                    len: rec.len,
                    errno,
                    message,
                    at_ns: rec.complete_ns.saturating_sub(self.t0),
                });
            }
        }
        let op = rec.op as usize;
        self.ops_seen[op] = true;
        if !rec.issued_in_warmup {
            self.first_submit = Some(self.first_submit.map_or(rec.submit_ns, |f| f.min(rec.submit_ns)));
        }
        self.last_complete = self.last_complete.max(rec.complete_ns);
        let latency = rec.latency_ns();
        let bytes = if Op::from_index(rec.op).has_range() { rec.len as u64 } else { 0 };
        self.totals[op].get_or_insert_with(|| Accumulator::new(3)).add(latency, bytes, failed);
        let index = rec.complete_ns.saturating_sub(self.t0) / self.window_ns;
        if self.last_closed.is_some_and(|closed| index <= closed) {
            // A straggler for a window already closed: counted in the totals, not re-opened.
            return;
        }
        self.first_window = Some(self.first_window.map_or(index, |f| f.min(index)));
        let window = self.open.entry(index).or_default();
        window[op].get_or_insert_with(|| Accumulator::new(2)).add(latency, bytes, failed);
    }

    /// Queue `queue` will send no more records.
    pub fn queue_done(&mut self, queue: usize) {
        if queue < self.watermarks.len() {
            self.watermarks[queue] = u64::MAX;
        }
        self.close_windows();
    }

    /// Close every window that ended before all queues' latest completion.
    pub fn close_windows(&mut self) {
        let Some(first) = self.first_window else {
            return;
        };
        let low = self.watermarks.iter().copied().min().unwrap_or(u64::MAX);
        let last_index = self.last_complete.saturating_sub(self.t0) / self.window_ns;
        // Once every queue is done, everything up to the last completion's window can close.
        let closable = if low == u64::MAX { last_index + 1 } else { low.saturating_sub(self.t0) / self.window_ns };
        let mut next = self.last_closed.map_or(first, |c| c + 1);
        while next < closable {
            // Windows without a single completion are real (a stall) and appear as zero rows.
            let accs = self.open.remove(&next);
            self.emit(next, accs);
            next += 1;
        }
    }

    fn emit(&mut self, index: u64, accs: Option<[Option<Accumulator>; 5]>) {
        let start_ns = index * self.window_ns;
        let end_rel = self.last_complete.saturating_sub(self.t0);
        let duration_ns = self.window_ns.min(end_rel.saturating_sub(start_ns)).max(1);
        for op in Op::ALL {
            if !self.ops_seen[op as usize] {
                continue;
            }
            let summary = accs
                .as_ref()
                .and_then(|a| a[op as usize].as_ref())
                .map(|acc| acc.summary(duration_ns))
                .unwrap_or_default();
            self.closed.push(WindowRow { window: index, start_ns, duration_ns, op: op.name(), summary });
        }
        self.last_closed = Some(index);
    }

    /// Close everything and produce the results.
    pub fn finish(mut self) -> AggregateResult {
        for q in 0..self.watermarks.len() {
            self.watermarks[q] = u64::MAX;
        }
        self.close_windows();
        let duration_ns = match self.first_submit {
            Some(first) => self.last_complete.saturating_sub(first),
            None => 0,
        };
        let mut per_op = BTreeMap::new();
        for op in Op::ALL {
            if let Some(acc) = &self.totals[op as usize] {
                let mut summary = acc.summary(duration_ns);
                summary.lat_ns_below = acc.counts_below_fio_edges();
                summary.lat_ns_fio_percentiles = acc.fio_percentiles();
                per_op.insert(op.name(), summary);
            }
        }
        // Rows for operations first seen after their window was emitted would be missing; sort for a
        // stable table.
        self.closed.sort_by_key(|row| (row.window, row.op));
        let stream_dropped = self.stream.take().map_or(0, TraceStream::finish);
        AggregateResult {
            per_op,
            windows: self.closed,
            trace: self.trace,
            stream_dropped,
            errors: self.errors,
            error_count: self.error_count,
            measured_ns: duration_ns,
            warmup_ops: self.warmup_ops,
            first_submit_ns: self.first_submit.map(|f| f.saturating_sub(self.t0)),
            issue_lag_ns: self.issue_lag.as_ref().map(|acc| acc.summary(0).lat_ns),
        }
    }
}

pub struct AggregateResult {
    pub per_op: BTreeMap<&'static str, OpSummary>,
    pub windows: Vec<WindowRow>,
    pub trace: Option<Trace>,
    /// Records the streamed trace could not hand out because its consumer had gone (0 when not streaming).
    pub stream_dropped: u64,
    pub errors: Vec<IoErrorRecord>,
    pub error_count: u64,
    /// From the first measured submission to the last measured completion.
    pub measured_ns: u64,
    pub warmup_ops: u64,
    pub first_submit_ns: Option<u64>,
    /// Replays: how late requests were submitted against their schedule (ns).
    pub issue_lag_ns: Option<LatencyFigures>,
}

impl AggregateResult {
    /// Requests in flight on average over the measured time (Little's law: the measured requests' summed
    /// latency over the time). Below the queue depth when the queue cannot refill as fast as requests
    /// complete: a submitting thread at full load, or a target that completes in bursts.
    pub fn mean_in_flight(&self) -> f64 {
        if self.measured_ns == 0 {
            return 0.0;
        }
        let busy_ns: f64 = self.per_op.values().map(|s| s.ops as f64 * s.lat_ns.mean).sum();
        busy_ns / self.measured_ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(op: Op, submit: u64, latency: u64, queue: u16) -> Record {
        Record {
            submit_ns: submit,
            complete_ns: submit + latency,
            offset: 0,
            len: 4096,
            result: 4096,
            op: op as u8,
            queue,
            warmup: false,
            issued_in_warmup: false,
            issue_lag_ns: 0,
            submit_seq: 0,
        }
    }

    #[test]
    fn summary_matches_known_latencies() {
        let mut agg = Aggregator::new(0, 100_000_000, 1, None, &[]);
        // 1000 requests, latencies 1..=1000 us, one after another.
        let mut t = 0;
        for i in 1..=1000u64 {
            agg.add(&rec(Op::Read, t, i * 1000, 0));
            t += i * 1000;
        }
        let result = agg.finish();
        let read = &result.per_op["read"];
        assert_eq!(read.ops, 1000);
        assert!((read.lat_ns.mean - 500_500.0).abs() < 1.0);
        let exact_sd = ((1..=1000).map(|i| (i as f64 * 1000.0 - 500_500.0).powi(2)).sum::<f64>() / 999.0).sqrt();
        assert!((read.lat_ns.stddev - exact_sd).abs() < 1.0);
        assert_eq!(read.lat_ns.min, 1000);
        assert_eq!(read.lat_ns.max, 1_000_000);
        for (got, want) in [(read.lat_ns.p50, 500_000.0), (read.lat_ns.p99, 990_000.0), (read.lat_ns.p90, 900_000.0)] {
            assert!((got as f64 - want).abs() / want < 0.01, "{got} vs {want}");
        }
        let seconds = result.measured_ns as f64 / 1e9;
        assert!((read.iops - 1000.0 / seconds).abs() < 1e-6);
        assert!((read.bw_bytes - 4096.0 * 1000.0 / seconds).abs() < 1e-3);
        // 1..=1000 us: none is over 1 ms, the last is exactly 1 ms.
        assert_eq!(read.ops_over_1ms, 0);
    }

    #[test]
    fn mean_in_flight_is_the_summed_latency_over_the_measured_time() {
        let mut agg = Aggregator::new(0, 100_000_000, 1, None, &[]);
        // From 0 to 100 us: two reads of 100 us side by side, then a write of 50 us alongside one of them.
        agg.add(&rec(Op::Read, 0, 100_000, 0));
        agg.add(&rec(Op::Read, 0, 100_000, 0));
        agg.add(&rec(Op::Write, 50_000, 50_000, 0));
        let result = agg.finish();
        assert_eq!(result.measured_ns, 100_000);
        assert!((result.mean_in_flight() - 2.5).abs() < 1e-9, "{}", result.mean_in_flight());
    }

    #[test]
    fn slow_requests_are_counted_per_window() {
        let mut agg = Aggregator::new(0, 10_000_000, 1, None, &[]);
        // Window 0: three fast requests; window 1: two over 1 ms and one fast.
        for (submit, latency) in [(0, 100_000), (1_000_000, 200_000), (2_000_000, 900_000)] {
            agg.add(&rec(Op::Write, submit, latency, 0));
        }
        for (submit, latency) in [(10_000_000, 1_500_000), (12_000_000, 4_000_000), (17_000_000, 50_000)] {
            agg.add(&rec(Op::Write, submit, latency, 0));
        }
        let result = agg.finish();
        assert_eq!(result.per_op["write"].ops_over_1ms, 2);
        // fio's bucket edges: 100, 200, 900 us, 1.5, 4 ms and 50 us fall below 1 ms four times, below 2 ms five.
        let below: BTreeMap<u64, u64> = result.per_op["write"].lat_ns_below.iter().map(|&[e, n]| (e, n)).collect();
        assert_eq!(below.len(), 31);
        assert_eq!((below[&50_000], below[&100_000], below[&1_000_000]), (0, 1, 4));
        assert_eq!((below[&2_000_000], below[&10_000_000], below[&2_000_000_000]), (5, 6, 6));
        assert!(result.windows.iter().all(|w| w.summary.lat_ns_below.is_empty()), "windows stay flat");
        let write = &result.per_op["write"];
        let percentiles: Vec<f64> = write.lat_ns_fio_percentiles.iter().map(|&[p, _]| p).collect();
        assert_eq!(percentiles, FIO_PERCENTILES);
        let at = |p: f64| write.lat_ns_fio_percentiles.iter().find(|x| x[0] == p).unwrap()[1] as u64;
        assert_eq!((at(50.0), at(90.0), at(99.0)), (write.lat_ns.p50, write.lat_ns.p90, write.lat_ns.p99));
        let per_window: Vec<u64> = result.windows.iter().map(|w| w.summary.ops_over_1ms).collect();
        assert_eq!(per_window, vec![0, 2]);
    }

    #[test]
    fn windows_cover_the_run_and_include_stalls() {
        let mut agg = Aggregator::new(0, 10, 1, None, &[]);
        agg.add(&rec(Op::Read, 0, 5, 0)); // window 0
        agg.add(&rec(Op::Read, 5, 30, 0)); // completes at 35: window 3
        let result = agg.finish();
        let windows: Vec<u64> = result.windows.iter().map(|w| w.window).collect();
        assert_eq!(windows, vec![0, 1, 2, 3]);
        assert_eq!(result.windows[1].summary.ops, 0);
        assert_eq!(result.windows[3].summary.ops, 1);
    }

    #[test]
    fn windows_wait_for_the_slowest_queue() {
        let mut agg = Aggregator::new(0, 10, 2, None, &[]);
        agg.add(&rec(Op::Write, 0, 25, 0));
        agg.close_windows();
        assert!(agg.closed.is_empty(), "queue 1 has not reported yet");
        agg.add(&rec(Op::Write, 0, 5, 1));
        agg.add(&rec(Op::Write, 5, 20, 1));
        agg.close_windows();
        assert_eq!(agg.closed.len(), 2, "windows 0 and 1 are closed");
    }

    #[test]
    fn warmup_and_errors_are_kept_apart() {
        let mut agg = Aggregator::new(0, 1000, 1, Some(10), &[]);
        let mut warm = rec(Op::Read, 0, 10, 0);
        warm.warmup = true;
        agg.add(&warm);
        let mut bad = rec(Op::Read, 10, 10, 0);
        bad.result = -libc::EIO;
        agg.add(&bad);
        agg.add(&rec(Op::Read, 20, 10, 0));
        let result = agg.finish();
        assert_eq!(result.warmup_ops, 1);
        assert_eq!(result.error_count, 1);
        assert_eq!(result.errors[0].errno, libc::EIO);
        assert_eq!(result.per_op["read"].ops, 1);
        assert_eq!(result.per_op["read"].errors, 1);
        let trace = result.trace.unwrap();
        assert_eq!(trace.len(), 3);
        assert_eq!(trace.warmup, vec![true, false, false]);
    }

    #[test]
    fn a_streamed_trace_arrives_in_chunks_equal_to_the_kept_trace() {
        let mut agg = Aggregator::new(0, 1000, 1, Some(100), &[]);
        let chunks = agg.stream_trace(3);
        // The consumer drains on its own thread and gives every chunk back, as the Python writer does.
        let consumer = std::thread::spawn(move || {
            let mut streamed = Trace::default();
            let mut sizes = Vec::new();
            let mut buffers = std::collections::BTreeSet::new();
            while let Ok(mut chunk) = chunks.full.recv() {
                sizes.push(chunk.len());
                buffers.insert(chunk.offset.as_ptr() as usize);
                assert!(chunk.op.capacity() >= 3, "chunks are made for their size, not grown");
                streamed.offset.extend(&chunk.offset);
                streamed.submit_ns.extend(&chunk.submit_ns);
                chunk.clear();
                let _ = chunks.empty.send(chunk);
            }
            (streamed, sizes, buffers.len())
        });
        for i in 0..100 {
            let mut r = rec(Op::Write, 1000 + i * 10, 5, 0);
            r.offset = i * 4096;
            agg.add(&r);
        }
        let result = agg.finish();
        let (streamed, sizes, buffers) = consumer.join().unwrap();
        assert_eq!(sizes.len(), 34);
        assert!(sizes[..33].iter().all(|&n| n == 3) && sizes[33] == 1, "{sizes:?}");
        assert!(buffers <= STREAM_CHUNKS, "34 chunks in {buffers} recycled buffers");
        let kept = result.trace.unwrap();
        assert_eq!(streamed.offset, kept.offset);
        assert_eq!(streamed.submit_ns, kept.submit_ns);
        assert_eq!(result.stream_dropped, 0);
    }

    #[test]
    fn a_stream_whose_consumer_went_away_counts_what_it_could_not_hand_out() {
        let mut agg = Aggregator::new(0, 1000, 1, None, &[]);
        drop(agg.stream_trace(2));
        for i in 0..7 {
            agg.add(&rec(Op::Read, i * 10, 5, 0));
        }
        assert_eq!(agg.finish().stream_dropped, 7);
    }

    #[test]
    fn trace_columns_are_named_in_order_with_their_bytes() {
        let mut trace = Trace::with_capacity(2);
        trace.push(&rec(Op::Read, 7, 5, 1), 2, false);
        let columns = trace.columns();
        let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            ["op", "offset", "size", "queue", "submit_ns", "complete_ns", "status", "warmup", "submit_seq"]
        );
        assert_eq!(columns[4].1, 5u64.to_le_bytes());
        assert_eq!(columns[3].1, 1u16.to_le_bytes());
    }

    #[test]
    fn issue_lag_is_summarised_and_traced_only_when_tracked() {
        let mut agg = Aggregator::new(0, 1000, 1, Some(10), &[]);
        agg.track_issue_lag();
        for lag in [0, 10, 10, 500] {
            agg.add(&Record { issue_lag_ns: lag, ..rec(Op::Read, 100, 5, 0) });
        }
        let result = agg.finish();
        let lag = result.issue_lag_ns.unwrap();
        assert_eq!((lag.min, lag.p50, lag.max), (0, 10, 500));
        assert_eq!(result.trace.unwrap().issue_lag_ns, vec![0, 10, 10, 500]);
        let mut plain = Aggregator::new(0, 1000, 1, Some(10), &[]);
        plain.add(&rec(Op::Read, 100, 5, 0));
        let result = plain.finish();
        assert!(result.issue_lag_ns.is_none());
        assert!(result.trace.unwrap().issue_lag_ns.is_empty());
    }

    #[test]
    fn trace_stops_at_its_limit() {
        let mut agg = Aggregator::new(0, 1000, 1, Some(2), &[]);
        for i in 0..5 {
            agg.add(&rec(Op::Read, i * 10, 5, 0));
        }
        let trace = agg.finish().trace.unwrap();
        assert_eq!(trace.len(), 2);
        assert_eq!(trace.dropped, 3);
    }
}
