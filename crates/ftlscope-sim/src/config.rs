//! The typed configuration of a simulated device: shared/device-model.md, parsed and checked.
//!
//! `parse.rs` turns a TOML file into these types (with one-line errors naming the key); the models read
//! only these.

use crate::time::{Nanos, Rate};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Ssd,
    Hdd,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSection {
    pub name: String,
    pub kind: DeviceKind,
    /// Logical capacity in bytes.
    pub capacity: u64,
    pub logical_block: u64,
    pub over_provisioning: f64,
    pub seed: u64,
    /// Free text: where the numbers come from (shown by `ftlscope sim show`).
    pub description: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub planes_per_chip: u32,
    pub page_size: u64,
    pub pages_per_block: u32,
}

impl Geometry {
    /// Parallel units: channels x chips x planes.
    pub fn units(&self) -> u32 {
        self.channels * self.chips_per_channel * self.planes_per_chip
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Mapping {
    pub chunk_size: u64,
    pub stripe_width: u32,
    pub channel_groups: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageType {
    L,
    M,
    H,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    Slc,
    Mlc,
    Tlc,
    Qlc,
}

/// One segment of a page pattern: `pages` pages (None = the rest of the block) cycling through `cycle`.
#[derive(Clone, Debug, PartialEq)]
pub struct PatternSegment {
    pub pages: Option<u32>,
    pub cycle: Vec<PageType>,
}

/// The L/M/H type of each page of a block, in write order ("4L 2H", "128KiB:L, 2M 2H").
#[derive(Clone, Debug, PartialEq)]
pub struct PagePattern {
    pub text: String,
    pub segments: Vec<PatternSegment>,
}

impl PagePattern {
    /// The type of the page at `index` within its block.
    pub fn page_type(&self, index: u32) -> PageType {
        let mut start = 0u32;
        for seg in &self.segments {
            match seg.pages {
                Some(n) if index >= start + n => start += n,
                _ => return seg.cycle[((index - start) as usize) % seg.cycle.len()],
            }
        }
        // The last segment ended before the block did: keep cycling its pattern.
        let last = self.segments.last().expect("a pattern has at least one segment");
        last.cycle[(index as usize) % last.cycle.len()]
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PerType {
    pub l: Nanos,
    pub m: Nanos,
    pub h: Nanos,
}

impl PerType {
    pub fn get(&self, t: PageType) -> Nanos {
        match t {
            PageType::L => self.l,
            PageType::M => self.m,
            PageType::H => self.h,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Nand {
    pub cell: Cell,
    pub page_pattern: PagePattern,
    pub read_latency: PerType,
    pub program_latency: PerType,
    pub erase_latency: Nanos,
    pub channel_rate: Rate,
    // Read side (issue 15): what one NAND read senses, and reads going before programs.
    /// Bytes of one NAND page; mapping pages of one read that share a physical page cost one sense.
    pub physical_page: u64,
    /// Physical pages of a unit one read senses at once (a multi-plane read).
    pub multi_plane: u32,
    /// NAND cache read: a unit's senses overlap the previous page's transfer.
    pub cache_read: bool,
    /// A unit keeps the pages it sensed last in its register: more of them cost only the transfer.
    pub register_hits: bool,
    /// As `register_hits`, but only for a read that starts where the previous read ended (a sequential
    /// stream): other reads sense anew.
    pub stream_register_hits: bool,
    /// With `stream_register_hits`: only a read arriving while the one it continues is in progress streams.
    pub stream_queued: bool,
    /// A flush programs the mapping pages that share a physical page in one program of that page.
    pub program_whole_page: bool,
    /// A host read suspends a program or erase in progress (or queued) on its unit and goes first.
    pub program_suspend: bool,
    /// What suspending costs the read.
    pub suspend_latency: Nanos,
    /// Reads in a row that may suspend a unit's programs; then one waits for the program in progress. 0 = no limit.
    pub suspend_limit: u32,
    /// Added key: with program_suspend, host reads' transfers also occupy the bus the programs use.
    pub read_bus_shared: bool,
    /// Added key: after a host read's sense its unit holds the register this long; only a read that was not
    /// yet waiting when the sense ended waits for the release (0 = none).
    pub register_hold: Nanos,
    /// Added key: with read_bus_shared, the longest a host read's transfer waits for the program transfers
    /// booked before it on its bus (0 = it goes first).
    pub read_bus_wait: Nanos,
}

impl Nand {
    /// Mapping pages one NAND read senses at once.
    pub fn sense_pages(&self, page_size: u64) -> u64 {
        (self.physical_page / page_size).max(1) * self.multi_plane.max(1) as u64
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReadBuffer {
    pub capacity: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct WriteBuffer {
    pub capacity: u64,
    pub capacity_ios: u64,
    pub partial_flush: u64,
    pub parallelism: u32,
    /// None = never ("inf").
    pub idle_flush_window: Option<Nanos>,
    pub serialize_when_idle: bool,
    /// Added key: the idle drain is a soft, background flush ("Fantastic SSD Internals and How to Learn and
    /// Use Them", P10 and §5.2): its programs start one at a time per unit, only while the unit is free, so
    /// a read waits for at most the one program in progress, not for a unit's whole chunk.
    pub soft_flush: bool,
    /// Added key (issue 15): the idle drain also counts the time reads and writes are both in progress, so a
    /// mix that keeps the drive busy no longer stops the buffer draining (a real controller flushes between
    /// the writes); a stream of writes still fills the buffer and meets its flush.
    pub drain_while_reading: bool,
    pub second_level: u64,
    pub second_level_idle_flush_window: Option<Nanos>,
    /// Added key: how fast the first level moves into the second level.
    pub second_level_rate: Rate,
    /// Added key: the second level's write-count trigger (seed 003: A200GH flushes after 1280 I/Os).
    pub second_level_capacity_ios: u64,
    /// Added key (issues 15, 19): the hard idle drain programs during the idle gap, paced over it, and leaves
    /// the programs it could not start before the next command for later idle time (see `SsdDevice`).
    pub drain_in_gap: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SlcCache {
    pub capacity: u64,
    pub fold_rate: Rate,
    /// Added key: foreground folding, old SLC pages folded per host page written in SLC mode (0 = none).
    pub fold_while_writing: f64,
    /// Added key: the share of the SLC capacity in use above which foreground folding runs.
    pub fold_above: f64,
    /// Added key: foreground folding scaled by the share of the SLC capacity holding valid data.
    pub fold_by_valid: bool,
    /// Added key: bytes folded in one blocking batch when a write needs a block and the SLC cache is full (0 = none).
    pub fold_batch: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum MappingCache {
    Full,
    /// Bytes of mapping table kept in RAM (4 bytes per page).
    Bytes(u64),
}

/// How garbage collection picks its victim block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcPolicy {
    /// The block with the fewest valid pages.
    Greedy,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ftl {
    pub mapping_cache: MappingCache,
    pub map_miss_latency: Nanos,
    pub gc: GcPolicy,
    pub gc_free_block_threshold: f64,
    // The write side of issue 15; every default is the model as it was before these keys.
    pub flush_pipelined: bool,
    /// `flush_pipelined` before the SLC cliff too, once the buffer has flushed whole since it was last empty.
    pub flush_pipelined_slc: bool,
    /// `flush_pipelined` only while no host read is in progress: a mix keeps the whole-buffer flush.
    pub flush_pipelined_writes_only: bool,
    pub write_map_lookup: bool,
    /// Programming an evicted changed translation page (a lone program); 0 = the L-page program time.
    pub map_program_latency: Nanos,
    /// A write covering part of a mapping page reads the page's old data first (read-modify-write).
    pub merge_partial_writes: bool,
    pub gc_idle_after: Option<Nanos>,
    pub gc_idle_free: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SizePenalty {
    pub min: u64,
    pub max: u64,
    pub extra: Nanos,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Quirks {
    pub unaligned_size_penalty: Nanos,
    pub read_size_penalties: Vec<SizePenalty>,
    pub low_load_penalty: Nanos,
}

/// Added section: the controller's own costs, which device-model.md leaves implicit.
#[derive(Clone, Debug, PartialEq)]
pub struct Controller {
    /// Fixed cost of every command (submission, doorbell, completion).
    pub command_overhead: Nanos,
    /// Host link rate (PCIe/SATA): data crosses it once per request.
    pub host_rate: Rate,
    /// Time to insert one write into the write buffer ("tens of microseconds").
    pub buffer_insert_latency: Nanos,
    /// Time to serve a page from controller RAM (write buffer or read buffer).
    pub ram_read_latency: Nanos,
    // Controller throughput (issue 15): a finite command rate and per-direction host limits.
    /// Command processors; 0 = unlimited (command_overhead then only adds latency).
    pub cores: u32,
    /// Processor time each command takes on one core.
    pub command_time: Nanos,
    /// Processor time of a read command (mapping lookup, ECC and DMA set-up): command_time unless given.
    pub read_command_time: Nanos,
    /// Host link rate for writes (host_rate is then the read rate).
    pub host_write_rate: Rate,
    /// A limit on both directions together (the controller's data path); 0 = none.
    pub host_total_rate: Rate,
    // DRAM-less controller (issue 15, the NV2 fit): per-direction command cost, and firmware work per flash read.
    /// Processor time of one write command (default `command_time`): a DRAM-less write updates its map.
    pub write_command_time: Nanos,
    /// Processor time for each NAND sense a host read needs (the flash read command and its ECC decode);
    /// pages found in a page register, the write buffer or the read buffer need none. 0 = none.
    pub sense_command_time: Nanos,
    /// DMA engine time per transfer segment (one host memory page x one mapping page of buffer); 0 = none.
    pub host_segment_time: Nanos,
    /// Idle gaps of the host link a transfer whose data is ready early can still take (the latest kept).
    pub host_link_gaps: u32,
    /// Commands the controller holds at once; the rest wait in the submission queue, fetched in order. 0 = unlimited.
    pub command_slots: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HddConfig {
    pub rpm: u32,
    pub track_to_track_seek: Nanos,
    pub average_seek: Nanos,
    pub full_stroke_seek: Nanos,
    pub outer_rate: Rate,
    pub inner_rate: Rate,
    pub cache: u64,
    /// Added key: commands the disk reorders among (NCQ / TCQ); 1 = served in submission order.
    pub queue_depth: u32,
    /// Added key: how much later than predicted the reordering plans each seek to end.
    pub scheduling_margin: Nanos,
}

/// Timing noise of a real drive (device-model.md `[noise]`); absent = a noise-free device.
#[derive(Clone, Debug, PartialEq)]
pub struct Noise {
    /// Coefficient of variation of every NAND read, program and erase time (lognormal, mean kept).
    pub latency_cv: f64,
    /// Mean of an exponential extra delay added to every completion.
    pub host_jitter: Nanos,
    /// Share of page reads that need one more read of the page.
    pub read_retry_rate: f64,
    /// Mean gap between background housekeeping operations; None = none.
    pub background_interval: Option<Nanos>,
    /// How long each background operation occupies its unit.
    pub background_busy: Nanos,
    /// Share of commands that meet a firmware stall ...
    pub stall_rate: f64,
    /// ... and wait this much longer.
    pub stall_latency: Nanos,
}

/// Temperature and throttling (device-model.md `[thermal]`), in degrees Celsius.
#[derive(Clone, Debug, PartialEq)]
pub struct Thermal {
    pub ambient: f64,
    /// Rise per GB (1e9 bytes) of NAND programmed or read.
    pub heat_per_gb: f64,
    /// Fall per second towards ambient.
    pub cooling: f64,
    pub throttle_above: f64,
    pub throttle_factor: f64,
    /// Added key: throttling ends below `throttle_above - hysteresis` (the contract's 5C).
    pub hysteresis: f64,
}

/// A byte range of the logical space.
#[derive(Clone, Debug, PartialEq)]
pub struct ByteRange {
    pub start: u64,
    pub length: u64,
}

/// Failures (device-model.md `[faults]`); absent = a device that never fails.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// Share of page reads that fail after the retries.
    pub media_error_rate: f64,
    /// Ranges whose reads always fail.
    pub bad_ranges: Vec<ByteRange>,
    /// Device time after which no command completes any more; None = never.
    pub stop_responding_after: Option<Nanos>,
    /// Share of commands that never complete.
    pub lost_command_rate: f64,
}

/// A whole device. For `kind = Hdd` only `device`, `controller` and `hdd` matter.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceConfig {
    pub device: DeviceSection,
    pub geometry: Geometry,
    pub mapping: Mapping,
    pub nand: Nand,
    pub read_buffer: ReadBuffer,
    pub write_buffer: WriteBuffer,
    pub slc_cache: SlcCache,
    pub ftl: Ftl,
    pub quirks: Quirks,
    pub controller: Controller,
    pub hdd: Option<HddConfig>,
    pub noise: Option<Noise>,
    pub thermal: Option<Thermal>,
    pub faults: Option<Faults>,
}
