//! The simulated SSD: host interface, controller (write buffer with an optional second level, read
//! buffer, SLC cache), FTL and flash back end. Every request's completion time is computed when it is
//! submitted, by reserving the resources it needs in order (host link, buffer slots, NAND units, channel
//! buses); background work (idle-time buffer drain, SLC folding) is accounted when the next command
//! arrives and finds the device idle. See shared/device-model.md for the meaning of every key.

pub mod caches;
pub mod calendar;
pub mod datapath;
pub mod flash;
pub mod ftl;
mod merge;
pub mod noise;
pub mod slots;

use std::collections::{HashSet, VecDeque};

use crate::config::{DeviceConfig, MappingCache as MappingCacheConfig, PageType};
use crate::device::{Completion, Counters, PageContent, SimDevice, SimOp, SimRequest, Status};
use crate::time::{Nanos, Rate, SimTime};
use caches::{MappingCache, ReadBuffer};
use calendar::{Calendar, HostLink};
use datapath::DataPath;
use flash::Flash;
use ftl::{Ftl, BUFFERED, UNMAPPED, ZEROED};
use noise::Extras;
use slots::CommandSlots;

/// One level of write buffering: pages wait here, in arrival order, until they are flushed.
struct BufferLevel {
    capacity_pages: u64,
    capacity_ios: u64,
    partial_pages: u64,
    idle_window: Option<Nanos>,
    fifo: VecDeque<u64>,
    ios: u64,
    /// A flush of this level is in progress until then; writes that need room wait for it.
    busy_until: SimTime,
    /// `ftl.flush_pipelined`: when each page flushed but not yet programmed gives its room back, earliest
    /// first (those pages still occupy the buffer until then). Kept sorted (see [`InFlight`]).
    in_flight: InFlight,
    /// `write_buffer.soft_flush`: pages the idle drain has placed whose program has not started yet (they
    /// still occupy the buffer).
    draining: u64,
    /// The part of a page the proportional drain had reached when its last stretch of drain time ended, in
    /// page-ns (a page is `idle_window` of them at a whole buffer's pace); the next stretch goes on from there.
    /// See [`BufferLevel::drained_carrying`].
    drain_carry: u128,
}

/// Times taken out earliest first. After the buffer has filled, each write adds one page's program to thousands in
/// flight and takes the earliest out: a binary heap's pop sifted through 14 levels each time (about a tenth of a
/// noisy GC run in profiles). A new program is booked after those before it on its unit, so it mostly belongs at
/// or near the back of a sorted deque: the insertion scans from there. One that belongs further forward (NAND
/// time noise puts many there) goes to a small heap instead, rather than moving thousands of times in the deque
/// (the copying and the search were 6 % of a noisy GC run). Equal times are interchangeable, so the times taken
/// out are exactly a heap's.
#[derive(Default)]
struct InFlight {
    sorted: VecDeque<SimTime>,
    early: std::collections::BinaryHeap<std::cmp::Reverse<SimTime>>,
}

impl InFlight {
    #[inline]
    fn push(&mut self, t: SimTime) {
        let q = &mut self.sorted;
        let mut i = q.len();
        while i > 0 && q[i - 1] > t {
            i -= 1;
            if q.len() - i == 64 {
                self.early.push(std::cmp::Reverse(t));
                return;
            }
        }
        q.insert(i, t);
    }

    #[inline]
    fn peek(&self) -> Option<SimTime> {
        match (self.sorted.front(), self.early.peek()) {
            (Some(&a), Some(&std::cmp::Reverse(b))) => Some(a.min(b)),
            (a, b) => a.copied().or(b.map(|r| r.0)),
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<SimTime> {
        match (self.sorted.front(), self.early.peek()) {
            (Some(&a), Some(&std::cmp::Reverse(b))) if b < a => self.early.pop().map(|r| r.0),
            (Some(_), _) => self.sorted.pop_front(),
            (None, _) => self.early.pop().map(|r| r.0),
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.sorted.len() + self.early.len()
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.sorted.is_empty() && self.early.is_empty()
    }
}

/// `write_buffer.soft_flush`: the background drain's programs, per unit, not yet started. A real controller
/// issues a background program only to an idle die, so a read arriving meanwhile waits for at most the one
/// program in progress; a unit's 64 KiB chunk is not booked at once ahead of the reads.
/// `write_buffer.drain_in_gap` keeps the hard drain's programs here too (see [`SsdDevice::drain_in_gap`]).
struct SoftDrain {
    /// The pending pages still count as held by the buffer (`soft_flush`: the buffer has room for them only
    /// once they are programmed); false for `drain_in_gap`, whose drained pages gave their room back at once.
    counted: bool,
    /// Per unit: the page types still to program, the earliest instant (the idle period they were drained in
    /// began then) and the physical page they go to.
    pending: Vec<VecDeque<(PageType, SimTime, u32)>>,
    count: u64,
    /// The physical pages in `pending`: their data is still in the buffer (a program not started has nothing
    /// on NAND yet), so a read of one is served from the buffer's RAM.
    queued: HashSet<u32>,
}

/// Pages drained by `idle` out of `pages`, when a full buffer drains in `window`.
fn proportional(pages: u64, idle: Nanos, window: Nanos) -> u64 {
    if idle >= window || window.0 == 0 {
        pages
    } else {
        (pages as u128 * idle.0 as u128 / window.0 as u128) as u64
    }
}

impl BufferLevel {
    fn new(capacity: u64, capacity_ios: u64, partial: u64, idle_window: Option<Nanos>, page: u64) -> BufferLevel {
        BufferLevel {
            capacity_pages: capacity / page,
            capacity_ios,
            partial_pages: partial / page,
            idle_window,
            fifo: VecDeque::new(),
            ios: 0,
            busy_until: SimTime::ZERO,
            in_flight: InFlight::default(),
            draining: 0,
            drain_carry: 0,
        }
    }

    fn needs_flush(&self, new_pages: u64) -> bool {
        let held = self.fifo.len() as u64 + self.draining;
        (held + new_pages > self.capacity_pages && held > 0)
            || (self.capacity_ios > 0 && self.ios + 1 > self.capacity_ios)
    }

    /// The pages `time` of draining moves out, as [`proportional`], with the part of a page left over carried to
    /// the next call (and dropped when the level empties). Rounding each stretch down would drain nothing in
    /// stretches shorter than one page's share of the window (68 us on a 200 ms, 11.5 MB buffer), so a read-heavy
    /// load would never see its buffer drain; a drive's background program, once started, finishes. Serves the
    /// soft flush's idle gaps and `drain_while_reading`'s time between commands.
    fn drained_carrying(&mut self, time: Nanos, window: Nanos) -> u64 {
        let held = self.fifo.len() as u64;
        if held == 0 || time >= window || window.0 == 0 {
            self.drain_carry = 0;
            return held;
        }
        let total = held as u128 * time.0 as u128 + self.drain_carry;
        let pages = total / window.0 as u128;
        if pages >= held as u128 {
            self.drain_carry = 0;
            return held;
        }
        self.drain_carry = total - pages * window.0 as u128;
        pages as u64
    }

    /// Pages a triggered flush moves out: the partial amount, or all of it.
    fn flush_amount(&self) -> u64 {
        let all = self.fifo.len() as u64;
        if self.partial_pages > 0 {
            self.partial_pages.min(all)
        } else {
            all
        }
    }
}

pub struct SsdDevice {
    cfg: DeviceConfig,
    page: u64,
    flash: Flash,
    ftl: Ftl,
    level1: Option<BufferLevel>,
    level2: Option<BufferLevel>,
    second_level_rate: Rate,
    read_buffer: Option<ReadBuffer>,
    mapping_cache: Option<MappingCache>,
    /// Host link, per direction (PCIe and SAS are full duplex).
    host_read: HostLink,
    host_write: HostLink,
    /// Buffer insert slots (`write_buffer.parallelism`).
    insert_slots: Vec<SimTime>,
    /// When the last command submitted so far completes.
    busy_until: SimTime,
    writes_busy_until: SimTime,
    /// Writes arriving at this instant met an empty queue and are served one by one.
    serial_batch_at: Option<SimTime>,
    host_bytes_read: u64,
    host_bytes_written: u64,
    power_cycles: u64,
    /// `[noise]`, `[thermal]` and `[faults]`; None (the common case) costs one test per command.
    extras: Option<Box<Extras>>,
    /// The read being served met a media error.
    read_failed: bool,
    // Read side and controller (issue 15).
    /// Mapping pages one NAND read senses (physical page x multi-plane).
    sense_pages: u64,
    /// Host reads go through sense + transfer (grouped senses, page register, suspend); false = one NAND
    /// read per mapping page, as before these keys.
    grouped_reads: bool,
    /// Per unit: the read request (its sequence number) that last sensed a group there, the group and when
    /// it was sensed, so that the request's other pages in that group need no sense of their own.
    sensed: Vec<(u64, u64, SimTime)>,
    read_seq: u64,
    /// `nand.stream_register_hits`: where the last read ended, and whether the read being served starts there.
    last_read_end: u64,
    streaming: bool,
    /// When the last read completes (`nand.stream_queued`).
    last_read_done: SimTime,
    /// `nand.program_whole_page`: mapping pages one program writes (as one read senses); 1 = each its own.
    program_pages: u64,
    /// `ftl.flush_pipelined_slc`: the buffer has flushed whole since it was last empty, so it now pipelines.
    slc_pipelining: bool,
    /// The command processors' bookings (`controller.cores`; empty = unlimited).
    cores: Vec<Calendar>,
    /// Both directions together (`controller.host_total_rate`).
    host_total: HostLink,
    /// The DMA engine (`controller.host_segment_time`; None = no limit of its own).
    datapath: Option<DataPath>,
    /// `write_buffer.soft_flush` on a single-level buffer; None = the idle drain books its programs at once.
    soft: Option<SoftDrain>,
    /// `write_buffer.drain_while_reading`: when the last command arrived, when the reads submitted so far
    /// complete (the part of a page drained so far is the first level's `drain_carry`).
    last_arrival: SimTime,
    reads_busy_until: SimTime,
    /// `controller.command_slots`; None = unlimited (every command taken when it is submitted).
    slots: Option<CommandSlots>,
}

impl SsdDevice {
    pub fn new(cfg: DeviceConfig) -> SsdDevice {
        let page = cfg.geometry.page_size;
        let wb = &cfg.write_buffer;
        let level1 = (wb.capacity > 0)
            .then(|| BufferLevel::new(wb.capacity, wb.capacity_ios, wb.partial_flush, wb.idle_flush_window, page));
        let level2 = (wb.capacity > 0 && wb.second_level > 0).then(|| {
            BufferLevel::new(wb.second_level, wb.second_level_capacity_ios, 0, wb.second_level_idle_flush_window, page)
        });
        let read_buffer = (cfg.read_buffer.capacity > 0).then(|| ReadBuffer::new(cfg.read_buffer.capacity / page));
        let mapping_cache = match cfg.ftl.mapping_cache {
            MappingCacheConfig::Full => None,
            MappingCacheConfig::Bytes(bytes) => Some(MappingCache::new(bytes)),
        };
        SsdDevice {
            page,
            flash: Flash::new(&cfg),
            ftl: Ftl::new(&cfg),
            level1,
            level2,
            second_level_rate: wb.second_level_rate,
            read_buffer,
            mapping_cache,
            host_read: HostLink::with_gaps(cfg.controller.host_link_gaps),
            host_write: HostLink::with_gaps(cfg.controller.host_link_gaps),
            insert_slots: vec![SimTime::ZERO; wb.parallelism.max(1) as usize],
            busy_until: SimTime::ZERO,
            writes_busy_until: SimTime::ZERO,
            serial_batch_at: None,
            host_bytes_read: 0,
            host_bytes_written: 0,
            power_cycles: 0,
            extras: Extras::new(&cfg).map(Box::new),
            read_failed: false,
            sense_pages: cfg.nand.sense_pages(page),
            grouped_reads: cfg.nand.sense_pages(page) > 1
                || cfg.nand.cache_read
                || cfg.nand.register_hits
                || cfg.nand.stream_register_hits
                || cfg.nand.program_suspend,
            sensed: vec![(u64::MAX, 0, SimTime::ZERO); cfg.geometry.units() as usize],
            read_seq: 0,
            last_read_end: u64::MAX,
            streaming: false,
            last_read_done: SimTime::ZERO,
            slc_pipelining: false,
            program_pages: if cfg.nand.program_whole_page { cfg.nand.sense_pages(page) } else { 1 },
            cores: (0..cfg.controller.cores).map(|_| Calendar::default()).collect(),
            host_total: HostLink::with_gaps(cfg.controller.host_link_gaps),
            datapath: DataPath::new(cfg.controller.host_segment_time, page),
            soft: ((wb.soft_flush || wb.drain_in_gap) && wb.capacity > 0 && wb.second_level == 0).then(|| SoftDrain {
                counted: wb.soft_flush,
                pending: vec![VecDeque::new(); cfg.geometry.units() as usize],
                count: 0,
                queued: HashSet::new(),
            }),
            last_arrival: SimTime::ZERO,
            reads_busy_until: SimTime::ZERO,
            slots: CommandSlots::new(cfg.controller.command_slots),
            cfg,
        }
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.cfg
    }

    /// Logical pages touched by `[offset, offset + len)`.
    fn pages(&self, offset: u64, len: u64) -> std::ops::Range<u64> {
        let first = offset / self.page;
        let last = (offset + len.max(1)).div_ceil(self.page);
        first..last.min(self.ftl.logical_pages())
    }

    /// Background work while nobody was asking: drain the buffers in proportion to the idle time, fold SLC.
    fn catch_up_idle(&mut self, now: SimTime) {
        let idle_start = self.busy_until;
        if now <= idle_start {
            return;
        }
        let idle = now - idle_start;
        let to_level2 = self.level2.is_some();
        // Some(true): soft_flush; Some(false): drain_in_gap; None: the gap's share booked at once.
        let soft = self.soft.as_ref().map(|s| s.counted);
        if let Some(level) = &mut self.level1 {
            if let Some(window) = level.idle_window {
                let held = level.fifo.len() as u64;
                let pages = if soft == Some(true) {
                    level.drained_carrying(idle, window)
                } else {
                    proportional(held, idle, window)
                };
                match soft {
                    _ if pages == 0 => {}
                    Some(true) => self.drain_softly(pages, idle_start, None),
                    Some(false) => self.drain_in_gap(pages, idle_start, held, window),
                    None => {
                        self.flush_level1(pages, idle_start, to_level2);
                    }
                }
            }
        }
        if let Some(level) = &self.level2 {
            if let Some(window) = level.idle_window {
                let pages = proportional(level.fifo.len() as u64, idle, window);
                if pages > 0 {
                    self.flush_level2(pages, idle_start);
                }
            }
        }
        let fold_rate = self.cfg.slc_cache.fold_rate.0;
        if fold_rate > 0.0 {
            let pages = (fold_rate * idle.0 as f64 / 1e9 / self.page as f64) as u64;
            self.ftl.fold_slc(pages);
        }
        if let Some(after) = self.cfg.ftl.gc_idle_after {
            if idle > after {
                self.ftl.collect_idle(idle_start + after, now, self.cfg.ftl.gc_idle_free, &mut self.flash);
            }
        }
    }

    /// `write_buffer.drain_while_reading`: a read arriving credits the first level's drain with the time since
    /// the previous command during which reads and writes were both in progress, as if it were idle time (the
    /// drive's idle time is drained by [`Self::catch_up_idle`]): in a mix of reads and writes the controller
    /// flushes between the writes, so the buffer stays part full instead of filling and stalling for its
    /// whole flush. Writes alone credit
    /// nothing, so a stream of writes still overflows the whole buffer (P8) and only idle gaps drain it (P10);
    /// reads alone credit nothing either, so recently written data stays in the buffer while it is read.
    fn note_arrival(&mut self, now: SimTime, op: SimOp) {
        if op == SimOp::Read {
            self.drain_while_reading(now);
        } else {
            self.last_arrival = now;
        }
    }

    /// See [`Self::note_arrival`].
    fn drain_while_reading(&mut self, now: SimTime) {
        let from = self.last_arrival;
        self.last_arrival = now;
        let until = now.min(self.busy_until).min(self.writes_busy_until).min(self.reads_busy_until);
        let Some(level) = self.level1.as_mut() else { return };
        let Some(window) = level.idle_window else { return };
        if level.fifo.is_empty() {
            level.drain_carry = 0;
            return;
        }
        if until <= from || window.0 == 0 {
            return;
        }
        // A few us between commands drain a fraction of a page: carried until it makes one.
        let held = level.fifo.len() as u64;
        let pages = level.drained_carrying(until - from, window);
        let soft = self.soft.as_ref().map(|s| s.counted);
        if pages > 0 && soft == Some(true) {
            self.drain_softly(pages, from, None);
        } else if pages > 0 && soft == Some(false) {
            self.drain_in_gap(pages, from, held, window);
        } else if pages > 0 {
            let to_level2 = self.level2.is_some();
            self.flush_level1(pages, from, to_level2);
        }
    }

    /// `write_buffer.soft_flush`: the idle drain places `pages` (frontier order, as a flush would) but
    /// leaves their programs pending; [`Self::issue_soft`] starts them as their units come free. `pace`:
    /// (pages held, window): the n-th page is released `window * n / held` after `from` (a whole buffer over
    /// the window, [`Self::drain_in_gap`]); None: every page from `from`.
    fn drain_softly(&mut self, pages: u64, from: SimTime, pace: Option<(u64, Nanos)>) {
        let level = self.level1.as_mut().expect("buffered device");
        let take = (pages as usize).min(level.fifo.len());
        let moved: Vec<u64> = level.fifo.drain(..take).collect();
        level.ios = 0;
        let mut placed = 0;
        let soft = self.soft.as_mut().expect("soft drain");
        for (n, lpn) in moved.into_iter().enumerate() {
            let at = match pace {
                Some((held, window)) => from + Nanos((window.0 as u128 * n as u128 / held.max(1) as u128) as u64),
                None => from,
            };
            if let Some((unit, page_type)) = self.ftl.assign(lpn, at, &mut self.flash) {
                let ppn = self.ftl.lookup(lpn);
                soft.pending[unit as usize].push_back((page_type, at, ppn));
                soft.queued.insert(ppn);
                placed += 1;
            }
        }
        soft.count += placed;
        if soft.counted {
            self.level1.as_mut().expect("buffered device").draining += placed;
        }
    }

    /// `write_buffer.drain_in_gap`: the hard idle drain as a drive that drains while idle. The gap's share of the
    /// buffer (`pages` of the `held` it held when the gap began) leaves it as without the key, so the buffer's
    /// room, and P8 and P10, are unchanged; but the pages are released one after another over the gap (the
    /// whole buffer over `window`, as the contract defines the window), each program starts once its unit is
    /// free, and [`Self::issue_soft`] starts only those that begin before the next command arrives. The rest
    /// wait for their unit's later idle time (their data still in RAM, as a drive that has not yet issued them
    /// holds it) instead of being booked at once from the gap's start, ahead of that command: so a command after
    /// the gap waits only for the programs still running at its arrival. A buffer flush or a host flush takes
    /// them along ([`Self::flush_level1`]).
    fn drain_in_gap(&mut self, pages: u64, from: SimTime, held: u64, window: Nanos) {
        self.drain_softly(pages, from, Some((held, window)));
    }

    /// Start the soft drain's programs that begin before `now` (or all of them, `force`, for a foreground
    /// flush): on each unit one after another, each once the unit is free. Returns when the last is durable.
    fn issue_soft(&mut self, now: SimTime, force: bool) -> SimTime {
        let mut done = now;
        let Some(soft) = self.soft.as_mut() else { return done };
        if soft.count == 0 {
            return done;
        }
        if !soft.counted {
            return self.issue_in_time_order(now, force);
        }
        let mut started = 0;
        for (unit, queue) in soft.pending.iter_mut().enumerate() {
            while let Some(&(page_type, from, ppn)) = queue.front() {
                let start = if force { from.max(now) } else { from.max(self.flash.free_at(unit as u32)) };
                if !force && start >= now {
                    break;
                }
                done = done.max(self.flash.program(unit as u32, page_type, start));
                queue.pop_front();
                soft.queued.remove(&ppn);
                started += 1;
            }
        }
        soft.count -= started;
        if let Some(level) = &mut self.level1 {
            level.draining -= started;
        }
        done
    }

    /// [`Self::issue_soft`] for `write_buffer.drain_in_gap`: the pending programs in the order they start across
    /// the units (earliest first), as the drive issued them during the gap. Unit by unit, a unit's backlog would
    /// book its channel's bus far ahead before the next unit's programs, and those then find only the gaps the
    /// bus calendar remembers (a long idle gap can drain a buffer's worth of pages: the next unit's would queue
    /// behind it, past the next command).
    fn issue_in_time_order(&mut self, now: SimTime, force: bool) -> SimTime {
        use std::cmp::Reverse;
        let mut done = now;
        let Some(soft) = self.soft.as_mut() else { return done };
        let flash = &mut self.flash;
        let start_of = |flash: &Flash, unit: usize, from: SimTime| {
            let free = flash.free_at(unit as u32);
            if force {
                from.max(now).max(free)
            } else {
                from.max(free)
            }
        };
        let mut next: std::collections::BinaryHeap<Reverse<(SimTime, usize)>> = soft
            .pending
            .iter()
            .enumerate()
            .filter_map(|(unit, queue)| queue.front().map(|&(_, from, _)| Reverse((start_of(flash, unit, from), unit))))
            .collect();
        let mut started = 0;
        while let Some(Reverse((start, unit))) = next.pop() {
            if !force && start >= now {
                break;
            }
            let queue = &mut soft.pending[unit];
            let Some((page_type, _, ppn)) = queue.pop_front() else { continue };
            done = done.max(flash.program(unit as u32, page_type, start));
            soft.queued.remove(&ppn);
            started += 1;
            if let Some(&(_, from, _)) = queue.front() {
                next.push(Reverse((start_of(flash, unit, from), unit)));
            }
        }
        soft.count -= started;
        done
    }

    /// Move `pages` from the first level to NAND (or to the second level); returns when done.
    fn flush_level1(&mut self, pages: u64, at: SimTime, to_level2: bool) -> SimTime {
        // A foreground flush takes the soft drain's pending pages along (they are in the buffer too).
        let forced = self.issue_soft(at, true);
        let mut moved = Vec::new();
        if let Some(level) = &mut self.level1 {
            for _ in 0..pages {
                match level.fifo.pop_front() {
                    Some(lpn) => moved.push(lpn),
                    None => break,
                }
            }
            level.ios = 0;
            if level.fifo.is_empty() {
                level.drain_carry = 0;
            }
        }
        if to_level2 {
            let mut start = at;
            let level2_full = self.level2.as_ref().is_some_and(|l2| l2.needs_flush(moved.len() as u64));
            if level2_full {
                let amount = self.level2.as_ref().map_or(0, |l2| l2.fifo.len() as u64);
                start = self.flush_level2(amount, at);
            }
            let level2 = self.level2.as_mut().expect("second level present");
            level2.fifo.extend(moved.iter().copied());
            level2.ios += 1;
            let done = start + self.second_level_rate.time_for(moved.len() as u64 * self.page);
            level2.busy_until = level2.busy_until.max(done);
            return done;
        }
        self.program_batch(&moved, at).max(forced)
    }

    /// Program a flush's pages: placed in frontier order, then issued to the units round-robin (every unit's
    /// first page, then every unit's second, ...), as a controller drives its dies in parallel rather than
    /// finishing one die's chunk before starting the next.
    fn program_batch(&mut self, lpns: &[u64], at: SimTime) -> SimTime {
        self.program_batch_timed(lpns, at, None)
    }

    /// [`Self::program_batch`], also pushing when each page is durable onto `times` (in the order issued).
    /// Each page is its own program, or with `nand.program_whole_page` the mapping pages of a unit that share a
    /// physical page (counted from their block's first page, as read senses are) are one program, of the type
    /// of the first of them; each is durable when that program is done.
    fn program_batch_timed(&mut self, lpns: &[u64], at: SimTime, mut times: Option<&mut Vec<SimTime>>) -> SimTime {
        if let &[lpn] = lpns {
            let durable = self.program_one(lpn, at);
            if let (Some(times), Some(durable)) = (times, durable) {
                times.push(durable);
            }
            return durable.map_or(at, |d| d.max(at));
        }
        let group = self.program_pages;
        let ppb = self.cfg.geometry.pages_per_block as u64;
        // Per unit, its programs in placement order: (physical page when grouped, type, mapping pages).
        let mut per_unit: Vec<Vec<(Option<u64>, PageType, u32)>> = vec![Vec::new(); self.ftl.stripe_width() as usize];
        // The buffered pages' map entries are scattered: load `GATHER` of them at a time, before their
        // assignments, in one loop the CPU overlaps (prefetching each a few pages ahead spent 84 % of this
        // function waiting on the prefetches' page walks one after another, 6 % of a steady-GC run).
        const GATHER: usize = 64;
        for (i, &lpn) in lpns.iter().enumerate() {
            if i % GATHER == 0 {
                self.ftl.gather_entries(&lpns[i..lpns.len().min(i + GATHER)]);
            }
            let Some((unit, page_type)) = self.ftl.assign(lpn, at, &mut self.flash) else { continue };
            let programs = &mut per_unit[unit as usize];
            let physical = (group > 1).then(|| {
                let ppn = self.ftl.lookup(lpn) as u64;
                ppn - (ppn % ppb) % group
            });
            match programs.last_mut() {
                Some(last) if physical.is_some() && last.0 == physical => last.2 += 1,
                _ => programs.push((physical, page_type, 1)),
            }
        }
        // Round by round across the units (see [`Self::program_batch`]).
        let rounds = per_unit.iter().map(Vec::len).max().unwrap_or(0);
        let mut done = at;
        for k in 0..rounds {
            for (unit, programs) in per_unit.iter().enumerate() {
                if let Some(&(_, page_type, count)) = programs.get(k) {
                    let durable = self.flash.program_pages(unit as u32, page_type, count, at);
                    if let Some(times) = times.as_deref_mut() {
                        times.extend(std::iter::repeat_n(durable, count as usize));
                    }
                    done = done.max(durable);
                }
            }
        }
        done
    }

    /// [`Self::program_batch_timed`] of one page: when it is durable (None if it was trimmed or re-pointed
    /// since it was buffered). After the buffer has filled, each write flushes the one page before it: this
    /// path spares that write the batch's allocations.
    #[inline]
    fn program_one(&mut self, lpn: u64, at: SimTime) -> Option<SimTime> {
        let (unit, page_type) = self.ftl.assign(lpn, at, &mut self.flash)?;
        Some(self.flash.program(unit, page_type, at))
    }

    fn flush_level2(&mut self, pages: u64, at: SimTime) -> SimTime {
        let mut moved = Vec::new();
        if let Some(level) = &mut self.level2 {
            for _ in 0..pages {
                match level.fifo.pop_front() {
                    Some(lpn) => moved.push(lpn),
                    None => break,
                }
            }
        }
        let done = self.program_batch(&moved, at);
        if let Some(level) = &mut self.level2 {
            level.ios = 0;
            level.busy_until = level.busy_until.max(done);
        }
        done
    }

    /// Flush everything buffered (a host flush, or before power goes away).
    fn flush_all(&mut self, at: SimTime) -> SimTime {
        let to_level2 = self.level2.is_some();
        let mut done = at;
        if let Some(pages) = self.level1.as_ref().map(|l| l.fifo.len() as u64) {
            let start = at.max(self.level1.as_ref().map_or(at, |l| l.busy_until));
            done = done.max(self.flush_level1(pages, start, to_level2));
        }
        if let Some(pages) = self.level2.as_ref().map(|l| l.fifo.len() as u64) {
            let start = done.max(self.level2.as_ref().map_or(at, |l| l.busy_until));
            done = done.max(self.flush_level2(pages, start));
        }
        done
    }

    /// A command processor takes the command for `time`: when it is done with it (`now` without a core limit).
    /// Commands are taken in arrival order by the first free core, so a full controller caps the command rate.
    #[inline]
    fn admit(&mut self, now: SimTime) -> SimTime {
        self.process(now, self.cfg.controller.command_time)
    }

    /// The first free command processor works `time` on something from `at`: when it is done (`at` without a
    /// core limit).
    #[inline]
    fn process(&mut self, at: SimTime, time: Nanos) -> SimTime {
        match self.cores.as_mut_slice() {
            [] => return at,
            // One processor (the usual case): no need to try a copy of it first, as choosing among several does.
            [core] => return core.book(at, time),
            _ => {}
        }
        // Interval-booked: a sense's processing booked ahead of its command's admission (after the command
        // overhead, a translation read) leaves the processor free for the commands arriving meanwhile.
        let core =
            (0..self.cores.len()).min_by_key(|&i| self.cores[i].clone().book(at, time)).expect("at least one core");
        self.cores[core].book(at, time)
    }

    /// `len` bytes cross the host link from `at`, in one direction, and within the limit on both together.
    #[inline]
    fn host_transfer(&mut self, write: bool, at: SimTime, offset: u64, len: u64) -> SimTime {
        let c = &self.cfg.controller;
        let mut done = if write {
            self.host_write.book(at, c.host_write_rate.time_for(len))
        } else {
            self.host_read.book(at, c.host_rate.time_for(len))
        };
        if let Some(dp) = &mut self.datapath {
            done = done.max(dp.copy(write, at, offset, len));
        }
        if c.host_total_rate.0 > 0.0 {
            let total = c.host_total_rate.time_for(len);
            return done.max(self.host_total.book(at, total));
        }
        done
    }

    /// A host read of mapping page `ppn` on `unit`: one sense per sense group (shared with the request's
    /// other pages in it, or found in the page register), then its own transfer.
    fn read_grouped(&mut self, unit: u32, page_type: PageType, ppn: u32, at: SimTime) -> SimTime {
        let ppn = ppn as u64;
        let group = if self.sense_pages == 1 {
            ppn
        } else {
            // Groups never straddle blocks: count from the block's first page.
            let ppb = self.cfg.geometry.pages_per_block as u64;
            let page = ppn % ppb;
            ppn - page % self.sense_pages
        };
        let u = unit as usize;
        let (seq, last, when) = self.sensed[u];
        let sensed = if seq == self.read_seq && last == group {
            when
        } else if let Some(ready) = self.register_hit(unit, group) {
            ready.max(at)
        } else {
            // The firmware issues the flash read and decodes what it returns (`sense_command_time`).
            let at = self.sense_processing(at);
            self.flash.sense(unit, page_type, group, at)
        };
        self.sensed[u] = (self.read_seq, group, sensed);
        self.flash.transfer(unit, sensed)
    }

    /// When `group` is in `unit`'s page register and this read may use it: always with `register_hits`, only
    /// for a read continuing a sequential stream with `stream_register_hits`.
    #[inline]
    fn register_hit(&self, unit: u32, group: u64) -> Option<SimTime> {
        if !self.cfg.nand.register_hits && !self.streaming {
            return None;
        }
        self.flash.in_register(unit, group)
    }

    /// `controller.sense_command_time`: a command processor handles a host read's NAND sense before it is
    /// issued; returns when the sense may start.
    #[inline]
    fn sense_processing(&mut self, at: SimTime) -> SimTime {
        let time = self.cfg.controller.sense_command_time;
        if time.0 == 0 {
            return at;
        }
        self.process(at, time)
    }

    /// Whether the page at `ppn` is still in controller RAM: in the write buffer, or drained but queued for a
    /// soft flush that has not programmed it yet (a read of it, or a merge with it, needs no NAND).
    #[inline]
    fn in_write_buffer(&self, ppn: u32) -> bool {
        ppn == BUFFERED || self.soft.as_ref().is_some_and(|s| s.count > 0 && s.queued.contains(&ppn))
    }

    fn write(&mut self, now: SimTime, req: &SimRequest) -> SimTime {
        let admitted = self.process(now, self.cfg.controller.write_command_time);
        let c = &self.cfg.controller;
        let (overhead, insert) = (c.command_overhead, c.buffer_insert_latency);
        let mut transferred = self.host_transfer(true, admitted + overhead, req.offset, req.len);
        self.host_bytes_written += req.len;
        let pages = self.pages(req.offset, req.len);
        if self.cfg.ftl.write_map_lookup && self.mapping_cache.is_some() {
            transferred = self.write_map_lookups(pages.clone(), transferred);
        }
        if self.cfg.ftl.merge_partial_writes {
            transferred = self.merge_partial(req.offset, req.len, transferred);
        }
        if self.level1.is_none() {
            // Write-through: every page is programmed before the write completes.
            let mut done = transferred;
            for lpn in pages {
                done = done.max(self.ftl.write_through(lpn, req.fingerprint, transferred, &mut self.flash));
            }
            return done;
        }
        let new_pages = pages.clone().filter(|&lpn| self.ftl.lookup(lpn) != BUFFERED).count() as u64;
        let to_level2 = self.level2.is_some();
        let mut start = transferred.max(self.level1.as_ref().expect("buffered device").busy_until);
        let pipelined = self.cfg.ftl.flush_pipelined
            && !to_level2
            && !self.reads_in_progress_stop_pipelining(now)
            && (self.ftl.slc_exhausted() || self.pipelines_in_slc(start));
        let level = self.level1.as_ref().expect("buffered device");
        if pipelined {
            start = self.make_room(new_pages, start);
        } else if level.needs_flush(new_pages) {
            // The buffer is full: this write waits while it flushes (the spike P8 looks for).
            let amount = level.flush_amount();
            let flushed = self.flush_level1(amount, start, to_level2);
            let level = self.level1.as_mut().expect("buffered device");
            level.busy_until = flushed;
            start = flushed;
            self.slc_pipelining = self.cfg.ftl.flush_pipelined_slc;
        }
        // Buffer insert slots: `parallelism` writes enter at once, the rest wait a slot. A batch that
        // meets an empty write queue on a `serialize_when_idle` drive goes through one slot.
        if self.cfg.write_buffer.serialize_when_idle && now >= self.writes_busy_until {
            self.serial_batch_at = Some(now);
        }
        let slot = if self.serial_batch_at == Some(now) {
            0
        } else {
            (0..self.insert_slots.len()).min_by_key(|&i| self.insert_slots[i]).expect("at least one slot")
        };
        let inserted = start.max(self.insert_slots[slot]) + insert;
        self.insert_slots[slot] = inserted;
        for lpn in pages {
            let already = self.ftl.buffer_write(lpn, req.fingerprint, now, &mut self.flash);
            if !already {
                self.level1.as_mut().expect("buffered device").fifo.push_back(lpn);
            }
        }
        self.level1.as_mut().expect("buffered device").ios += 1;
        self.writes_busy_until = self.writes_busy_until.max(inserted);
        inserted
    }

    /// `ftl.flush_pipelined_writes_only`: a write that arrives while host reads are in progress does not pipeline
    /// the flush. A stream of writes alone streams the buffer to NAND as each page's room comes back (the
    /// "SSD Performance Report"'s writes alone move the same bytes at every depth); in a mix the reads suspend
    /// those programs, and the buffer is drained between the writes instead (`drain_while_reading`).
    fn reads_in_progress_stop_pipelining(&self, now: SimTime) -> bool {
        self.cfg.ftl.flush_pipelined_writes_only && self.reads_busy_until > now
    }

    /// `ftl.flush_pipelined_slc`: before the SLC cliff, the flush is pipelined once the buffer has filled and
    /// flushed whole since it was last empty. The first fill after the buffer drained still waits for the whole
    /// flush (the spike P8 and P10 look for); a steady write stream then waits only for its room.
    fn pipelines_in_slc(&mut self, at: SimTime) -> bool {
        if !self.slc_pipelining {
            return false;
        }
        let level = self.level1.as_mut().expect("buffered device");
        while level.in_flight.peek().is_some_and(|t| t <= at) {
            level.in_flight.pop();
        }
        if level.fifo.is_empty() && level.in_flight.is_empty() && level.draining == 0 && at >= level.busy_until {
            self.slc_pipelining = false;
        }
        self.slc_pipelining
    }

    /// `ftl.flush_pipelined` (once the SLC cache is full): wait only until the buffer has room for `new_pages`.
    /// Before the cliff the whole-buffer flush stays, so the buffer's spike (P8, P10) shows as before. Pages programmed by `at`
    /// have given their room back; a full buffer starts flushing what it holds and the write waits for the
    /// earliest pages in flight to be programmed, not for the whole flush (a real controller reuses a buffer
    /// slot as soon as its page is on NAND, so writes after the SLC cliff see steady latencies).
    fn make_room(&mut self, new_pages: u64, at: SimTime) -> SimTime {
        let level = self.level1.as_mut().expect("buffered device");
        while level.in_flight.peek().is_some_and(|t| t <= at) {
            level.in_flight.pop();
        }
        let occupied = |l: &BufferLevel| l.fifo.len() as u64 + l.in_flight.len() as u64 + l.draining;
        let full = (occupied(level) + new_pages > level.capacity_pages && occupied(level) > 0)
            || (level.capacity_ios > 0 && level.ios + 1 > level.capacity_ios);
        if !full {
            return at;
        }
        if level.draining > 0 {
            self.issue_soft(at, true);
        }
        let level = self.level1.as_mut().expect("buffered device");
        if level.fifo.len() == 1 {
            // The steady state after the cliff: the write before this one left one page.
            let lpn = level.fifo.pop_front().expect("one page");
            level.ios = 0;
            if let Some(durable) = self.program_one(lpn, at) {
                self.level1.as_mut().expect("buffered device").in_flight.push(durable);
            }
        } else if !level.fifo.is_empty() {
            let amount = level.flush_amount();
            let moved: Vec<u64> = level.fifo.drain(..amount as usize).collect();
            level.ios = 0;
            let mut times = Vec::with_capacity(moved.len());
            self.program_batch_timed(&moved, at, Some(&mut times));
            let level = self.level1.as_mut().expect("buffered device");
            for t in times {
                level.in_flight.push(t);
            }
        }
        let level = self.level1.as_mut().expect("buffered device");
        let mut start = at;
        while occupied(level) + new_pages > level.capacity_pages {
            match level.in_flight.pop() {
                Some(t) => start = start.max(t),
                None => break,
            }
        }
        start
    }

    /// `ftl.write_map_lookup`: a write needs the mapping entries of its pages (to invalidate the old copies):
    /// once per region, a miss reads the translation page, after programming the changed one it evicts.
    fn write_map_lookups(&mut self, pages: std::ops::Range<u64>, at: SimTime) -> SimTime {
        let mut ready = at;
        let mut region = u64::MAX;
        for lpn in pages {
            if lpn / caches::REGION_PAGES == region {
                continue;
            }
            region = lpn / caches::REGION_PAGES;
            ready = self.map_access(lpn, true, ready);
        }
        ready
    }

    /// Look up `lpn`'s mapping entry from `at`; returns when it is in the cache. Evicting a changed region
    /// programs its translation page (SLC mode, on the unit the region hashes to) before the miss's read.
    fn map_access(&mut self, lpn: u64, write: bool, at: SimTime) -> SimTime {
        let cache = self.mapping_cache.as_mut().expect("a mapping cache");
        let access = cache.access_marking(lpn, write);
        if access.hit {
            return at;
        }
        let mut at = at;
        if access.evicted_dirty {
            let unit = ((lpn / caches::REGION_PAGES) % self.flash.units() as u64) as u32;
            at = match self.cfg.ftl.map_program_latency {
                Nanos(0) => self.flash.program(unit, PageType::L, at),
                lone => self.flash.program_for(unit, lone, at),
            };
            self.ftl.counters.pages_programmed += 1;
        }
        at + self.cfg.ftl.map_miss_latency
    }

    fn read(&mut self, now: SimTime, req: &SimRequest) -> SimTime {
        let admitted = self.process(now, self.cfg.controller.read_command_time);
        self.read_seq += 1;
        if self.cfg.nand.stream_register_hits {
            self.streaming =
                req.offset == self.last_read_end && (!self.cfg.nand.stream_queued || now < self.last_read_done);
            self.last_read_end = req.offset + req.len;
        }
        let c = &self.cfg.controller;
        let mut start = admitted + c.command_overhead;
        if now >= self.busy_until {
            start += self.cfg.quirks.low_load_penalty; // seed 003 §4.6: a lone read is slower
        }
        let ram = start + c.ram_read_latency;
        let mut ready = start;
        let mut missed_region = u64::MAX;
        let mut map_ready = start;
        for lpn in self.pages(req.offset, req.len) {
            let ppn = self.ftl.lookup(lpn);
            if ppn == UNMAPPED || ppn == ZEROED {
                continue; // nothing on NAND: the controller answers zeroes
            }
            if self.in_write_buffer(ppn) || self.read_buffer.as_ref().is_some_and(|rb| rb.contains(lpn)) {
                ready = ready.max(ram);
                continue;
            }
            let mut at = start;
            if self.cfg.ftl.write_map_lookup && self.mapping_cache.is_some() {
                let region = lpn / caches::REGION_PAGES;
                if region != missed_region {
                    let ready = self.map_access(lpn, false, start);
                    if ready > start {
                        missed_region = region;
                        map_ready = ready;
                    }
                }
                if region == missed_region {
                    at = map_ready;
                }
            } else if let Some(cache) = &mut self.mapping_cache {
                let region = lpn / caches::REGION_PAGES;
                if !cache.access(lpn) || region == missed_region {
                    // The translation page has to come from flash first (once per region and request).
                    missed_region = region;
                    at += self.cfg.ftl.map_miss_latency;
                }
            }
            let (unit, page_type) = self.ftl.locate(ppn);
            let page_ready = if self.grouped_reads {
                self.read_grouped(unit, page_type, ppn, at)
            } else {
                let at = self.sense_processing(at);
                self.flash.host_read(unit, page_type, at)
            };
            ready = ready.max(page_ready);
            self.ftl.counters.pages_read += 1;
            if let Some(x) = &mut self.extras {
                if x.retry() {
                    // The page is read once more; the second read queues behind the first on its unit. With
                    // register_hold it is issued once the first read's decode has failed (the hold's release).
                    let at = self.flash.decoded(unit, at);
                    ready = ready.max(self.flash.read_again(unit, page_type, at));
                    self.ftl.counters.pages_read += 1;
                }
                if x.media_error() {
                    self.read_failed = true;
                }
            }
            if let Some(rb) = &mut self.read_buffer {
                rb.insert(lpn);
            }
        }
        let q = &self.cfg.quirks;
        if !req.len.is_multiple_of(self.page) {
            ready += q.unaligned_size_penalty;
        }
        for penalty in &q.read_size_penalties {
            if (penalty.min..=penalty.max).contains(&req.len) {
                ready += penalty.extra;
            }
        }
        let done = self.host_transfer(false, ready, req.offset, req.len);
        self.host_bytes_read += req.len;
        self.last_read_done = done;
        done
    }

    /// A command the controller has taken at `now` (submitted then, or fetched then from the submission queue):
    /// its completion as the host sees it, and when the device is done with it (before host jitter).
    fn taken(&mut self, now: SimTime, req: &SimRequest) -> (Completion, SimTime) {
        if self.cfg.write_buffer.drain_while_reading {
            self.note_arrival(now, req.op);
        }
        self.catch_up_idle(now);
        self.issue_soft(now, false);
        if let Some(x) = &mut self.extras {
            let c = &self.ftl.counters;
            x.before(now, &mut self.flash, c.pages_read + c.pages_programmed);
        }
        let mut done = match req.op {
            SimOp::Read => self.read(now, req),
            SimOp::Write => self.write(now, req),
            SimOp::Trim => self.unmap(now, req, UNMAPPED),
            SimOp::WriteZeroes => self.unmap(now, req, ZEROED),
            SimOp::Flush => {
                let admitted = self.admit(now);
                self.flush_all(admitted + self.cfg.controller.command_overhead)
            }
        };
        let reads_tracked = self.cfg.write_buffer.drain_while_reading || self.cfg.ftl.flush_pipelined_writes_only;
        if reads_tracked && req.op == SimOp::Read {
            self.reads_busy_until = self.reads_busy_until.max(done);
        }
        let Some(x) = &mut self.extras else {
            self.busy_until = self.busy_until.max(done);
            return (Completion { at: done, status: Status::Ok }, done);
        };
        // A firmware stall keeps the device busy; host jitter happens after the device is done.
        done += x.stall();
        self.busy_until = self.busy_until.max(done);
        let device_done = done;
        done += x.jitter();
        let mut status = Status::Ok;
        if req.op == SimOp::Read && (std::mem::take(&mut self.read_failed) || x.in_bad_range(req.offset, req.len)) {
            x.media_errors += 1;
            status = Status::MediaError;
        }
        if x.lost(now, done) {
            return (Completion { at: SimTime::NEVER, status: Status::Lost }, device_done);
        }
        (Completion { at: done, status }, device_done)
    }

    fn unmap(&mut self, now: SimTime, req: &SimRequest, target: u32) -> SimTime {
        // Only whole pages can be unmapped; a partial page keeps its data (as real drives do).
        let first = req.offset.div_ceil(self.page);
        let end = ((req.offset + req.len) / self.page).min(self.ftl.logical_pages());
        for lpn in first..end {
            self.ftl.unmap(lpn, target, now, &mut self.flash);
        }
        self.admit(now) + self.cfg.controller.command_overhead
    }
}

impl SimDevice for SsdDevice {
    fn capacity_bytes(&self) -> u64 {
        self.cfg.device.capacity
    }

    fn logical_block(&self) -> u64 {
        self.cfg.device.logical_block
    }

    fn submit(&mut self, now: SimTime, req: &SimRequest) -> SimTime {
        self.submit_checked(now, req).at
    }

    fn submit_checked(&mut self, now: SimTime, req: &SimRequest) -> Completion {
        let Some(slots) = &mut self.slots else { return self.taken(now, req).0 };
        // The command waits in the submission queue until the controller fetches it into a free slot; from
        // then on the device sees it arrive (`controller.command_slots`).
        let fetched = slots.fetch(now);
        let (completion, device_done) = self.taken(fetched, req);
        self.slots.as_mut().expect("slots").hold(device_done);
        completion
    }

    fn prepare(&self, request: &SimRequest) {
        // Every read and write starts by looking up its first page's map entry, which sits at a random
        // place in an array of hundreds of MiB. A prefetch, not a load: for one lone entry a load made steady
        // GC slower (0.75-0.87 M writes per CPU second against 0.85-0.98, side by side at load 14-22).
        if matches!(request.op, SimOp::Read | SimOp::Write) {
            let lpn = request.offset / self.page;
            if lpn < self.ftl.logical_pages() {
                self.ftl.prefetch_entry(lpn);
            }
        }
    }

    fn content(&self, lpn: u64) -> PageContent {
        match self.ftl.lookup(lpn) {
            UNMAPPED => PageContent::Unwritten,
            ZEROED => PageContent::Zeroes,
            _ => PageContent::Data(self.ftl.fingerprint(lpn)),
        }
    }

    fn content_granularity(&self) -> u64 {
        self.page
    }

    fn mapping_bytes(&self) -> u64 {
        self.ftl.mapping_bytes()
    }

    fn counters(&self, now: SimTime) -> Counters {
        let c = self.ftl.counters;
        Counters {
            host_bytes_read: self.host_bytes_read,
            host_bytes_written: self.host_bytes_written,
            media_bytes_written: c.pages_programmed * self.page,
            media_bytes_read: c.pages_read * self.page,
            erase_count: c.erases,
            power_on_ns: now.ns(),
            power_cycles: self.power_cycles,
            temperature_c: self.extras.as_ref().and_then(|x| x.thermal_state(now)).map(|(t, _)| t),
            throttle_ns: self.extras.as_ref().and_then(|x| x.thermal_state(now)).map_or(0, |(_, ns)| ns),
            media_errors: self.extras.as_ref().map_or(0, |x| x.media_errors),
        }
    }

    fn controller_reset(&mut self, now: SimTime) -> SimTime {
        // Outstanding work finishes; buffers and caches survive a controller reset (seed 000 §3.4).
        let ready = now.max(self.busy_until) + Nanos(1_000_000);
        self.busy_until = ready;
        ready
    }

    fn power_cycle(&mut self, now: SimTime) -> SimTime {
        self.catch_up_idle(now);
        let start = now.max(self.busy_until);
        let flushed = self.flush_all(start).max(self.flash.all_idle_at());
        if let Some(rb) = &mut self.read_buffer {
            rb.clear();
        }
        if let Some(mc) = &mut self.mapping_cache {
            mc.clear();
        }
        self.power_cycles += 1;
        let ready = flushed + Nanos(1_000_000);
        self.busy_until = ready;
        ready
    }
}

#[cfg(test)]
mod drain_tests;
#[cfg(test)]
mod fold_tests;
#[cfg(test)]
mod gap_drain_tests;
#[cfg(test)]
mod merge_tests;
#[cfg(test)]
mod soft_flush_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod write_tests;

#[cfg(test)]
mod in_flight_tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::InFlight;
    use crate::time::SimTime;

    #[test]
    fn in_flight_takes_out_what_a_heap_would() {
        let mut rng = SmallRng::seed_from_u64(3);
        let (mut sorted, mut heap) = (InFlight::default(), BinaryHeap::new());
        for step in 0..20_000u64 {
            // Mostly near the back, sometimes far before it (past the 64-element scan), with ties.
            let t = if rng.random_range(0..10) == 0 {
                rng.random_range(0..step + 1)
            } else {
                step + rng.random_range(0..40)
            };
            sorted.push(SimTime(t));
            heap.push(Reverse(SimTime(t)));
            if rng.random_range(0..3) == 0 {
                assert_eq!(sorted.pop(), heap.pop().map(|Reverse(t)| t));
            }
            assert_eq!(sorted.peek(), heap.peek().map(|&Reverse(t)| t));
            assert_eq!(sorted.len(), heap.len());
        }
        while let Some(Reverse(t)) = heap.pop() {
            assert_eq!(sorted.pop(), Some(t));
        }
        assert_eq!(sorted.pop(), None);
    }
}

#[cfg(test)]
mod slots_tests;
