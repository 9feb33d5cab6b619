//! The flash back end: parallel units (chip planes) on channel buses, each a resource that is busy until a
//! known instant. Operations reserve the unit and the bus in order, so contention (two reads on one unit,
//! transfers sharing a channel or a channel group) shows up in the completion times.

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
}

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
        self.unit_free[u] = at.max(self.unit_free[u]) + busy;
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
        let sensed = at.max(self.unit_free[u]) + sense;
        let bus = self.bus(unit);
        let done = self.buses[bus].book(sensed, self.page_transfer);
        // The page register holds the data until it has crossed the bus.
        self.unit_free[u] = done;
        done
    }

    /// Move a page over the bus into `unit` and program it as `page_type`. Returns when it is durable.
    #[inline]
    pub fn program(&mut self, unit: u32, page_type: PageType, at: SimTime) -> SimTime {
        let u = unit as usize;
        let bus = self.bus(unit);
        let transferred = self.buses[bus].book(at.max(self.unit_free[u]), self.page_transfer);
        let done = transferred + self.time(self.program_latency.get(page_type));
        self.unit_free[u] = done;
        done
    }

    pub fn erase(&mut self, unit: u32, at: SimTime) -> SimTime {
        let u = unit as usize;
        let done = at.max(self.unit_free[u]) + self.time(self.erase_latency);
        self.unit_free[u] = done;
        done
    }

    /// When every unit is idle.
    pub fn all_idle_at(&self) -> SimTime {
        self.unit_free.iter().copied().max().unwrap_or(SimTime::ZERO)
    }
}
