//! The flash back end: parallel units (chip planes) on channel buses, each a resource that is busy until a
//! known instant. Operations reserve the unit and the bus in order, so contention (two reads on one unit,
//! transfers sharing a channel or a channel group) shows up in the completion times.
//!
//! Host reads go through [`Flash::sense`] and [`Flash::transfer`]: one sense can serve several mapping pages
//! (a physical page larger than the mapping page, multi-plane reads), and with `program_suspend` a read does
//! not wait for the programs and erases on its unit: it goes first (after the suspend latency) and pushes
//! them back by the time it held the unit. Internal reads (garbage collection) queue like programs.

use crate::config::{DeviceConfig, PageType, PerType};
use crate::ssd::calendar::Calendar;
use crate::ssd::noise::NandTiming;
use crate::time::{Nanos, SimTime};

pub struct Flash {
    /// A unit (die plane) serves its operations in order.
    unit_free: Vec<SimTime>,
    /// A bus carries transfers as their data becomes ready, whatever the order they were booked in.
    buses: Vec<Calendar>,
    /// The bus each unit's transfers use: its channel, or with channel groups the group its channel is in
    /// (channels c and c' contend when c mod N == c' mod N). A table: looked up for every page moved.
    bus_of_unit: Vec<u32>,
    page_transfer: Nanos,
    read_latency: PerType,
    program_latency: PerType,
    erase_latency: Nanos,
    /// Noise and throttling of operation times; None = the configured times exactly.
    timing: Option<NandTiming>,
    /// With `program_suspend`: what a suspending read costs, and when each unit's host reads are done
    /// (`unit_free` is then when its programs and erases are). None = reads queue behind everything.
    suspend: Option<Nanos>,
    read_free: Vec<SimTime>,
    /// With `program_suspend`, host reads have the bus first too: their transfers book these (one per bus)
    /// and wait only for each other, not for the programs' data moving in.
    read_buses: Vec<Calendar>,
    /// `suspend_limit` (0 = none) and, per unit, the reads that suspended its programs in a row.
    suspend_limit: u32,
    suspended: Vec<u32>,
    /// `read_bus_shared`: a host read's transfer, booked first on its read bus, also takes its time on the bus
    /// the programs book.
    read_bus_shared: bool,
    /// `read_bus_wait` (None = 0): how long a host read's transfer waits on its bus for the program transfers
    /// booked before it.
    read_bus_wait: Option<Nanos>,
    /// With `register_hits`: the sense group each unit's page register holds (NO_GROUP = nothing usable) and
    /// when its data is there.
    register: Vec<(u64, SimTime)>,
    /// With `cache_read`, a unit senses its next page while the last one still waits for the bus (page and
    /// cache registers), so its host-read transfers do not hold it.
    cache_read: bool,
    /// `register_hold` (empty when 0): how long a host read's data stays in its unit's register after the
    /// sense, and per unit when its last host sense ended and when its register is released.
    hold: Nanos,
    held: Vec<(SimTime, SimTime)>,
}

/// A page register holding nothing a read can use.
pub const NO_GROUP: u64 = u64::MAX;

impl Flash {
    pub fn new(cfg: &DeviceConfig) -> Flash {
        let units = cfg.geometry.units() as usize;
        let buses = if cfg.mapping.channel_groups > 0 { cfg.mapping.channel_groups } else { cfg.geometry.channels };
        Flash {
            unit_free: vec![SimTime::ZERO; units],
            buses: (0..buses).map(|_| Calendar::default()).collect(),
            bus_of_unit: (0..units as u32)
                .map(|unit| {
                    let channel = unit % cfg.geometry.channels;
                    if cfg.mapping.channel_groups > 0 {
                        channel % cfg.mapping.channel_groups
                    } else {
                        channel
                    }
                })
                .collect(),
            page_transfer: cfg.nand.channel_rate.time_for(cfg.geometry.page_size),
            read_latency: cfg.nand.read_latency.clone(),
            program_latency: cfg.nand.program_latency.clone(),
            erase_latency: cfg.nand.erase_latency,
            timing: crate::ssd::noise::Extras::nand_timing(cfg),
            suspend: cfg.nand.program_suspend.then_some(cfg.nand.suspend_latency),
            read_free: if cfg.nand.program_suspend { vec![SimTime::ZERO; units] } else { Vec::new() },
            read_buses: if cfg.nand.program_suspend {
                (0..buses).map(|_| Calendar::default()).collect()
            } else {
                Vec::new()
            },
            suspend_limit: cfg.nand.suspend_limit,
            read_bus_shared: cfg.nand.program_suspend && cfg.nand.read_bus_shared,
            read_bus_wait: (cfg.nand.program_suspend && cfg.nand.read_bus_shared && cfg.nand.read_bus_wait.0 > 0)
                .then_some(cfg.nand.read_bus_wait),
            suspended: if cfg.nand.program_suspend && cfg.nand.suspend_limit > 0 { vec![0; units] } else { Vec::new() },
            register: if cfg.nand.register_hits || cfg.nand.stream_register_hits {
                vec![(NO_GROUP, SimTime::ZERO); units]
            } else {
                Vec::new()
            },
            cache_read: cfg.nand.cache_read,
            hold: cfg.nand.register_hold,
            held: if cfg.nand.register_hold.0 > 0 { vec![(SimTime::ZERO, SimTime::ZERO); units] } else { Vec::new() },
        }
    }

    /// How long an operation configured to take `base` takes this time.
    #[inline]
    fn time(&mut self, base: Nanos) -> Nanos {
        match &mut self.timing {
            None => base,
            Some(t) => t.apply(base),
        }
    }

    pub fn units(&self) -> u32 {
        self.unit_free.len() as u32
    }

    /// Throttling: every operation from now on takes `factor` times as long.
    pub fn set_throttle(&mut self, factor: f64) {
        if let Some(t) = &mut self.timing {
            t.factor = factor;
        }
    }

    /// Hold `unit` busy for `busy` from `at` (or from when it is free): background housekeeping.
    pub fn occupy(&mut self, unit: u32, at: SimTime, busy: Nanos) {
        let u = unit as usize;
        // Reads do not suspend housekeeping: it holds the unit against them too.
        let start = match self.read_free.get(u) {
            Some(&r) => at.max(self.unit_free[u]).max(r),
            None => at.max(self.unit_free[u]),
        };
        self.unit_free[u] = start + busy;
        if let Some(r) = self.read_free.get_mut(u) {
            *r = self.unit_free[u];
        }
        self.forget_register(u);
    }

    #[inline]
    fn forget_register(&mut self, u: usize) {
        if let Some(g) = self.register.get_mut(u) {
            g.0 = NO_GROUP;
        }
    }

    /// When sense group `group` is in `unit`'s page register, if `register_hits` keeps it there.
    #[inline]
    pub fn in_register(&self, unit: u32, group: u64) -> Option<SimTime> {
        match self.register.get(unit as usize) {
            Some(&(g, ready)) if g == group => Some(ready),
            _ => None,
        }
    }

    /// A host read senses sense group `group` (a page of type `page_type`) on `unit`, starting no earlier than
    /// `at`. Returns when the data is in the page register; [`Flash::transfer`] then moves each mapping page.
    #[inline]
    pub fn sense(&mut self, unit: u32, page_type: PageType, group: u64, at: SimTime) -> SimTime {
        let u = unit as usize;
        let at = self.released(u, at);
        let sense = self.time(self.read_latency.get(page_type));
        let sensed = match self.suspend {
            None => {
                let sensed = at.max(self.unit_free[u]) + sense;
                self.unit_free[u] = sensed;
                sensed
            }
            Some(suspend) => {
                let from = at.max(self.read_free[u]);
                if self.unit_free[u] > from && self.suspend_refused(u) {
                    // The program in progress finishes first (its time is the programs' progress), then the read.
                    let start = self.unit_free[u].min(from + self.program_latency.get(PageType::L));
                    let sensed = start + sense;
                    self.hold_for_read(u, start, sensed);
                    sensed
                } else {
                    // A program or erase in progress or queued is suspended (it resumes after the read).
                    let start = if self.unit_free[u] > from {
                        from + suspend
                    } else {
                        if let Some(count) = self.suspended.get_mut(u) {
                            *count = 0; // nothing pending: the programs have caught up
                        }
                        from
                    };
                    let sensed = start + sense;
                    self.hold_for_read(u, from, sensed);
                    sensed
                }
            }
        };
        if let Some(g) = self.register.get_mut(u) {
            *g = (group, sensed);
        }
        self.note_sensed(u, sensed);
        sensed
    }

    /// `register_hold`: when a host read ready to sense on unit `u` at `at` may start. A read that was already
    /// waiting when the unit's last host sense ended goes straight on (cache read: it senses into the other
    /// register while the last data is decoded); one that comes after that end, while the controller still
    /// holds the register, waits for the release. So the hold lengthens a collision at a shallow queue and a
    /// die whose reads queue back to back (a saturated drive) never pays it.
    #[inline]
    fn released(&self, u: usize, at: SimTime) -> SimTime {
        match self.held.get(u) {
            Some(&(end, release)) if at > end && at < release => release,
            _ => at,
        }
    }

    /// `register_hold`: a host sense on unit `u` ended at `sensed`; its register is held from then.
    #[inline]
    fn note_sensed(&mut self, u: usize, sensed: SimTime) {
        let hold = self.hold;
        if let Some(h) = self.held.get_mut(u) {
            *h = (sensed, sensed + hold);
        }
    }

    /// Move one mapping page sensed on `unit` (ready in its page register at `ready`) over the bus. Returns
    /// when it is in the controller; the register is held until then.
    #[inline]
    pub fn transfer(&mut self, unit: u32, ready: SimTime) -> SimTime {
        let u = unit as usize;
        let bus = self.bus(unit);
        let (ready, in_order) = match self.read_bus_wait {
            Some(wait) => self.transfer_in_order(bus, ready, wait),
            None => (ready, None),
        };
        let done = if let Some(done) = in_order {
            done
        } else {
            let calendar = if self.suspend.is_some() { &mut self.read_buses[bus] } else { &mut self.buses[bus] };
            calendar.book(ready, self.page_transfer)
        };
        if self.read_bus_shared && in_order.is_none() {
            // The read went first; the bus time it took is not the programs' any more: those booked from now
            // on find it taken (those booked before keep their slots: the unit hold already delays them).
            self.buses[bus].book(SimTime(done.0 - self.page_transfer.0), self.page_transfer);
        }
        if self.cache_read {
            // Cache read: the page waits in the cache register for the bus while the array senses the next.
            return done;
        }
        if self.suspend.is_none() {
            self.unit_free[u] = self.unit_free[u].max(done);
        } else if done > self.read_free[u] {
            let from = self.read_free[u];
            self.hold_for_read(u, from, done);
        }
        done
    }

    /// `read_bus_wait`: a host read's transfer on `bus`, its data ready at `ready`. The channel moves data in the
    /// order it was booked, up to `wait`: if the first free time after the program transfers already booked on
    /// the bus (a flush books its pages' transfers when it starts) comes within `wait`, the read takes it
    /// (returned as the second value: when the transfer ends); otherwise the read waits `wait` and then goes
    /// before the programs as without the key (returned: the time it may start). It still suspends the programs
    /// on its die (`program_suspend`): only the bus is in order. A mix's reads so wait for its writes' data in
    /// proportion to the share of the bus those take.
    #[inline]
    fn transfer_in_order(&mut self, bus: usize, ready: SimTime, wait: Nanos) -> (SimTime, Option<SimTime>) {
        let transfer = self.page_transfer;
        let done = self.buses[bus].clone().book(ready, transfer);
        if done.0 - transfer.0 > ready.0 + wait.0 {
            return (ready + wait, None);
        }
        let done = self.buses[bus].book(ready, transfer);
        // The reads' own calendar keeps the read too, so reads going first later do not overlap it.
        self.read_buses[bus].book(SimTime(done.0 - transfer.0), transfer);
        (ready, Some(done))
    }

    /// `suspend_limit`: whether the read now meeting unit `u`'s pending programs may not suspend them (the
    /// limit of reads in a row is reached; the count starts again).
    #[inline]
    fn suspend_refused(&mut self, u: usize) -> bool {
        let Some(count) = self.suspended.get_mut(u) else { return false };
        *count += 1;
        if *count > self.suspend_limit {
            *count = 0;
            return true;
        }
        false
    }

    /// A host read holds unit `u` over `[from, to)` (program_suspend): programs and erases that were due to run
    /// then move back by as much.
    #[inline]
    fn hold_for_read(&mut self, u: usize, from: SimTime, to: SimTime) {
        self.unit_free[u] = if self.unit_free[u] > from { self.unit_free[u] + (to - from) } else { to };
        self.read_free[u] = to;
    }

    #[inline]
    fn bus(&self, unit: u32) -> usize {
        self.bus_of_unit[unit as usize] as usize
    }

    /// Sense a page of type `page_type` on `unit` and move it over the bus, starting no earlier than `at`.
    /// Returns when the data is in the controller.
    #[inline]
    pub fn read(&mut self, unit: u32, page_type: PageType, at: SimTime) -> SimTime {
        let u = unit as usize;
        let sense = self.time(self.read_latency.get(page_type));
        let mut free = self.unit_free[u];
        if let Some(&r) = self.read_free.get(u) {
            free = free.max(r);
        }
        self.forget_register(u);
        let sensed = at.max(free) + sense;
        let bus = self.bus(unit);
        let done = self.buses[bus].book(sensed, self.page_transfer);
        // The page register holds the data until it has crossed the bus.
        self.unit_free[u] = done;
        done
    }

    /// A host read of a page (not sensed by sense group): [`Flash::read`] after the register of the unit's
    /// last host read is released (`register_hold`). Returns when the data is in the controller.
    #[inline]
    pub fn host_read(&mut self, unit: u32, page_type: PageType, at: SimTime) -> SimTime {
        if self.held.is_empty() {
            return self.read(unit, page_type, at);
        }
        let u = unit as usize;
        let at = self.released(u, at);
        let done = self.read(unit, page_type, at);
        // The register was held until the data crossed the bus; the hold counts from the sense's end.
        self.note_sensed(u, SimTime(done.0 - self.page_transfer.0));
        done
    }

    /// `register_hold`: when a failed decode of the host read just sensed on `unit` is known, so its retry can
    /// start: the release of the unit's register (the hold is the transfer and the decode), not before `at`.
    /// Without a hold, `at`: the retry queues behind the first read at once.
    #[inline]
    pub fn decoded(&self, unit: u32, at: SimTime) -> SimTime {
        match self.held.get(unit as usize) {
            Some(&(_, release)) => release.max(at),
            None => at,
        }
    }

    /// `noise.read_retry_rate`: a host read of a page on `unit` needs one more read, starting no earlier than
    /// `at`. Returns when the data is in the controller. The retry is a host read like the first: with
    /// `program_suspend` it suspends programs and queues behind the unit's other host reads only, and its unit
    /// is free for them once the data has crossed (a retry booked as an internal read would wait for every
    /// program pending on the unit, and the reads after it would take it for a program to suspend: at QD 16 a
    /// 0.3 % retry rate stretched the read p99 from 250 to 650 us). Without suspend it queues like any read.
    #[inline]
    pub fn read_again(&mut self, unit: u32, page_type: PageType, at: SimTime) -> SimTime {
        if self.suspend.is_none() {
            return self.host_read(unit, page_type, at);
        }
        // The register then holds the page read again, which no sense group names: a stream senses afresh.
        let sensed = self.sense(unit, page_type, NO_GROUP, at);
        self.transfer(unit, sensed)
    }

    /// Move a page over the bus into `unit` and program it as `page_type`. Returns when it is durable.
    #[inline]
    pub fn program(&mut self, unit: u32, page_type: PageType, at: SimTime) -> SimTime {
        let latency = self.program_latency.get(page_type);
        self.program_for(unit, latency, at)
    }

    /// Move one page over the bus into `unit` and program it for `latency` (a page of a known program time,
    /// such as a translation page written alone). Returns when it is durable.
    #[inline]
    pub fn program_for(&mut self, unit: u32, latency: Nanos, at: SimTime) -> SimTime {
        let u = unit as usize;
        let bus = self.bus(unit);
        let transferred = self.buses[bus].book(at.max(self.unit_free[u]), self.page_transfer);
        let done = transferred + self.time(latency);
        self.unit_free[u] = done;
        self.forget_register(u);
        done
    }

    /// `program_whole_page`: move `pages` mapping pages over the bus into `unit` and program them as one
    /// physical page of type `page_type`. Returns when they are durable.
    #[inline]
    pub fn program_pages(&mut self, unit: u32, page_type: PageType, pages: u32, at: SimTime) -> SimTime {
        let u = unit as usize;
        let bus = self.bus(unit);
        let transfer = Nanos(self.page_transfer.0 * pages as u64);
        let transferred = self.buses[bus].book(at.max(self.unit_free[u]), transfer);
        let done = transferred + self.time(self.program_latency.get(page_type));
        self.unit_free[u] = done;
        self.forget_register(u);
        done
    }

    pub fn erase(&mut self, unit: u32, at: SimTime) -> SimTime {
        let u = unit as usize;
        let done = at.max(self.unit_free[u]) + self.time(self.erase_latency);
        self.unit_free[u] = done;
        self.forget_register(u);
        done
    }

    /// When `unit` is free of everything booked on it (reads included).
    pub fn free_at(&self, unit: u32) -> SimTime {
        let u = unit as usize;
        self.read_free.get(u).map_or(self.unit_free[u], |&r| r.max(self.unit_free[u]))
    }

    /// When every unit is idle.
    pub fn all_idle_at(&self) -> SimTime {
        let reads = self.read_free.iter().copied().max().unwrap_or(SimTime::ZERO);
        self.unit_free.iter().copied().max().unwrap_or(SimTime::ZERO).max(reads)
    }
}
