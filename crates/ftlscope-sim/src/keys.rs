//! The table of configuration keys: every key of every section is one line here (name, kind, default, range,
//! one-line doc), and that line drives the four things a key needs: the list of known keys (so a misspelt
//! key is an error), reading it with its unit and default, checking its range, and writing it back. The
//! checks between keys (stripe width against parallel units, ...) stay in `parse.rs`.
//!
//! A line reads `field: Codec = default, range, "doc";`. The codec says how the value is spelt (a size, a
//! time, a rate, ...). A default may use the fields above it in the same section and the values the section
//! is given (`units`, `page_size`, ...); such a default also says how the docs show it (`=> "text"`).

use toml::{Table, Value};

use crate::config::*;
use crate::parse::{
    describe_value, format_rate, format_size, format_time, format_window, parse_page_pattern, parse_rate, parse_size,
    parse_time, ConfigError,
};
use crate::time::{Nanos, Rate};

type Result<T> = std::result::Result<T, ConfigError>;

/// Where a value sits, for its error messages.
pub(crate) struct At<'a> {
    pub section: &'static str,
    pub key: &'a str,
}

impl At<'_> {
    pub fn err(&self, problem: impl Into<String>) -> ConfigError {
        self.err_at(self.key, problem)
    }

    /// An error about a part of the value (`read_latency.L`, `read_size_penalties[0].min`).
    pub fn err_at(&self, key: &str, problem: impl Into<String>) -> ConfigError {
        ConfigError::Value { section: self.section.into(), key: key.into(), problem: problem.into() }
    }

    fn unknown(&self, key: String, hint: &str) -> ConfigError {
        ConfigError::UnknownKey { section: self.section.into(), key, hint: hint.into() }
    }
}

/// How one kind of value is read from TOML and written back.
pub(crate) trait Codec {
    type V;
    /// What else reading needs (the cell type of a page pattern, ...); `()` for most.
    type Arg;
    /// The kind, as the key docs name it.
    const KIND: &'static str;
    fn read(v: &Value, at: &At, arg: &Self::Arg, default: &Self::V) -> Result<Self::V>;
    fn write(v: &Self::V) -> String;
    /// The number a range is checked against; None for values without one.
    fn magnitude(_v: &Self::V) -> Option<f64> {
        None
    }
    /// A range bound, spelt in this kind's unit.
    fn bound(x: f64) -> String {
        format!("{x}")
    }
}

/// The values a key may take, checked after it is read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Range {
    Any,
    AtLeast(f64),
    MoreThan(f64),
    /// Inclusive.
    Between(f64, f64),
    /// Exclusive.
    Inside(f64, f64),
}

impl Range {
    fn holds(self, x: f64) -> bool {
        match self {
            Range::Any => true,
            Range::AtLeast(lo) => x >= lo,
            Range::MoreThan(lo) => x > lo,
            Range::Between(lo, hi) => x >= lo && x <= hi,
            Range::Inside(lo, hi) => x > lo && x < hi,
        }
    }

    fn describe<C: Codec>(self) -> String {
        match self {
            Range::Any => "any value".into(),
            Range::AtLeast(lo) => format!("at least {}", C::bound(lo)),
            Range::MoreThan(lo) => format!("more than {}", C::bound(lo)),
            Range::Between(lo, hi) => format!("between {} and {}", C::bound(lo), C::bound(hi)),
            Range::Inside(lo, hi) => format!("between {} and {} (exclusive)", C::bound(lo), C::bound(hi)),
        }
    }
}

/// The one place a key is read: its default when absent, else its value, checked against its range.
fn read_key<C: Codec>(table: Option<&Table>, at: At, arg: &C::Arg, default: C::V, range: Range) -> Result<C::V> {
    let Some(raw) = table.and_then(|t| t.get(at.key)) else {
        return Ok(default);
    };
    let value = C::read(raw, &at, arg, &default)?;
    if let Some(x) = C::magnitude(&value) {
        if !range.holds(x) {
            let shown = match raw {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            return Err(ConfigError::Invalid {
                section: at.section.into(),
                key: at.key.into(),
                message: format!("{} = {shown} must be {}", at.key, range.describe::<C>()),
            });
        }
    }
    Ok(value)
}

/// One key, as the docs list it.
#[derive(Clone, Debug)]
pub struct KeyDoc {
    pub section: &'static str,
    pub key: &'static str,
    pub kind: &'static str,
    pub default: String,
    pub range: String,
    pub doc: &'static str,
}

fn key_doc<C: Codec>(
    section: &'static str,
    key: &'static str,
    default: String,
    range: Range,
    doc: &'static str,
) -> KeyDoc {
    let range = match range {
        Range::Any => String::new(),
        r => r.describe::<C>(),
    };
    KeyDoc { section, key, kind: C::KIND, default, range, doc }
}

macro_rules! section {
    (
        [$name:literal] $ty:ident, fn $read:ident($($p:ident: $pty:ty),*), fn $write:ident, $keys:ident, fn $docs:ident {
            $( $field:ident: $codec:ty $([$arg:expr])? = $default:expr $(=> $shown:literal)?, $range:expr, $doc:literal; )*
        }
    ) => {
        /// The keys of this section, in the order they are written.
        pub(crate) const $keys: &[&str] = &[$(stringify!($field)),*];

            pub(crate) fn $read(table: Option<&Table>, $($p: $pty),*) -> Result<$ty> {
            $(
                let $field = read_key::<$codec>(
                    table,
                    At { section: $name, key: stringify!($field) },
                    &section!(@arg $($arg)?),
                    $default,
                    $range,
                )?;
            )*
            Ok($ty { $($field),* })
        }

        pub(crate) fn $write(s: &$ty) -> Vec<(&'static str, String)> {
            vec![$((stringify!($field), <$codec as Codec>::write(&s.$field))),*]
        }

        fn $docs() -> Vec<KeyDoc> {
            vec![$(key_doc::<$codec>(
                $name,
                stringify!($field),
                section!(@shown $codec, $default $(, $shown)?),
                $range,
                $doc,
            )),*]
        }
    };
    (@arg) => { () };
    (@arg $a:expr) => { $a };
    (@shown $codec:ty, $default:expr) => { <$codec as Codec>::write(&$default) };
    (@shown $codec:ty, $default:expr, $shown:literal) => { $shown.to_string() };
}

use Range::{Any, AtLeast, Between, Inside, MoreThan};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// Over-provisioning beyond 4x the logical capacity describes no real drive (and most likely a typo).
const MAX_OVER_PROVISIONING: f64 = 4.0;

section! {
    ["device"] DeviceSection, fn read_device(default_name: &str), fn write_device, DEVICE_KEYS, fn device_docs {
        name: Text = default_name.to_string() => "the file's name", Any, "what the device is called";
        kind: DeviceKindC = DeviceKind::Ssd, Any, "\"ssd\" or \"hdd\"";
        capacity: Size = 0 => "required", MoreThan(0.0), "logical capacity exposed to the host";
        logical_block: Bytes = 512, Any, "LBA size exposed to the host (a power of two, 512 or more)";
        over_provisioning: Float = 0.07, Between(0.0, MAX_OVER_PROVISIONING), "physical capacity beyond logical, as a fraction of logical";
        seed: Seed = 1, Any, "every random choice inside the model derives from this";
        description: Text = String::new(), Any, "free text: where the numbers come from";
    }
}

section! {
    ["geometry"] Geometry, fn read_geometry(), fn write_geometry, GEOMETRY_KEYS, fn geometry_docs {
        channels: U32 = 8, AtLeast(1.0), "channels (P5)";
        chips_per_channel: U32 = 4, AtLeast(1.0), "chips on each channel (P5)";
        planes_per_chip: U32 = 1, AtLeast(1.0), "planes of each chip; units = channels x chips x planes";
        page_size: Size = 4 * KIB, MoreThan(0.0), "smallest unit the NAND reads or programs (P1)";
        pages_per_block: U32 = 256, Between(1.0, u16::MAX as f64), "pages of an erase block (the model counts them in 16 bits)";
    }
}

section! {
    ["mapping"] Mapping, fn read_mapping(units: u32), fn write_mapping, MAPPING_KEYS, fn mapping_docs {
        chunk_size: Size = 16 * KIB, Any, "consecutive pages placed on one unit before the next (P3)";
        stripe_width: U32 = units => "every unit", AtLeast(1.0), "units the chunks rotate over (P4)";
        channel_groups: U32 = 0, Any, "0 = none; N = channels pooled into N groups that contend";
    }
}

section! {
    ["nand"] Nand, fn read_nand(page_size: u64), fn write_nand, NAND_KEYS, fn nand_docs {
        cell: CellC = Cell::Mlc, Any, "\"slc\", \"mlc\", \"tlc\" or \"qlc\" (P2)";
        page_pattern: Pattern[(cell, page_size)] = default_pattern_of(cell, page_size) => "by cell", Any, "repeating L/M/H pattern over a unit's pages, in write order (P2)";
        read_latency: PerTypeC[cell] = cell_defaults(cell).0 => "by cell", Any, "read time of an L, M and H page";
        program_latency: PerTypeC[cell] = cell_defaults(cell).1 => "by cell", Any, "program time of an L, M and H page";
        erase_latency: Time = cell_defaults(cell).2 => "by cell", Any, "block erase time";
        channel_rate: RateC = Rate(800e6), MoreThan(0.0), "transfer rate of one channel bus";
        physical_page: Size = page_size => "page_size", MoreThan(0.0), "bytes of one NAND page (a multiple of page_size): the mapping pages of one read that share a physical page cost one sense, each still crosses the bus";
        multi_plane: U32 = 1, Between(1.0, 16.0), "consecutive physical pages of a unit one read senses at once (a multi-plane read)";
        cache_read: Bool = false, Any, "NAND cache read: a unit senses its next page while the last one still waits for the bus";
        register_hits: Bool = false, Any, "a unit keeps the pages it sensed last until it programs or erases: reading more of them (a later command) costs only the transfer";
        stream_register_hits: Bool = false, Any, "as register_hits, but only for a read that starts where the previous read ended (a sequential stream the controller follows); other reads sense anew";
        stream_queued: Bool = false, Any, "with stream_register_hits: a read continues the stream only while the read before it is still in progress (contiguous commands queued together, which the controller follows as one stream); reads issued one at a time sense anew";
        program_whole_page: Bool = false, Any, "a buffer flush programs the mapping pages that share a physical page (physical_page x multi_plane, as a read senses them) in one program (program_latency is then that program's), each still crossing the bus";
        program_suspend: Bool = false, Any, "a host read suspends a program or erase in progress or queued on its unit and goes first (the program resumes after it)";
        suspend_latency: Time = Nanos(20_000), Any, "what suspending a program or erase adds to the read (with program_suspend)";
        suspend_limit: U32 = 0, Any, "with program_suspend: reads in a row that may suspend a unit's programs; the next waits for the program in progress (one L-page program time) so programs cannot starve under a read stream; 0 = no limit";
        read_bus_shared: Bool = false, Any, "with program_suspend: a host read's transfers still go before the programs' but take their time on the channel bus, so programs booked after them wait for it and reads and writes together never move more than the bus carries (false: host reads have a bus of their own)";
        register_hold: Time = Nanos(0), Any, "after a host read's sense the unit keeps the data in its register this long (transfer and ECC decode: a failed decode reads it again from there); a read already waiting when the sense ends is pipelined (cache read into the other register) and goes straight on, one arriving later waits for the release: die collisions at shallow queues last longer, a saturated die never pays it; a read retry (noise.read_retry_rate) is issued at the release, once the decode has failed; 0 = none";
        read_bus_wait: Time = Nanos(0), Any, "with read_bus_shared: the longest a host read's transfer waits on the channel bus for the program transfers booked before it (the channel moves data in the order it was booked; a flush books its pages' transfers when it starts, so a mix's reads wait for its writes' data in proportion to the bus share those take); a read that would wait longer waits this long and then goes before the programs; the read still suspends the programs on its die; 0 = it goes first";
    }
}

section! {
    ["read_buffer"] ReadBuffer, fn read_read_buffer(), fn write_read_buffer, READ_BUFFER_KEYS, fn read_buffer_docs {
        capacity: Size = 0, Any, "recently read data served from controller RAM (P7); 0 = none";
    }
}

section! {
    ["write_buffer"] WriteBuffer, fn read_write_buffer(), fn write_write_buffer, WRITE_BUFFER_KEYS, fn write_buffer_docs {
        capacity: Size = 16 * MIB, Any, "bytes absorbed before a flush must happen (P8); 0 = write-through";
        capacity_ios: U64 = 0, Any, "if > 0, a flush is also forced after this many write commands";
        partial_flush: Size = 0, Any, "if > 0, a full buffer flushes only this much, otherwise all of it";
        parallelism: U32 = 1, AtLeast(1.0), "writes the buffer admits at the same instant (P9)";
        idle_flush_window: Window = Some(Nanos(30_000_000)), Any, "idle time after which the buffer has drained (P10)";
        serialize_when_idle: Bool = false, Any, "a write batch arriving at an empty queue is served one by one";
        soft_flush: Bool = false, Any, "the idle drain programs a page only when its unit is free (P10's soft flush)";
        drain_while_reading: Bool = false, Any, "the idle drain also counts the time reads and writes are both in progress (the controller flushes between a mix's writes), so a read/write mix keeps the buffer part full; writes alone still overflow it, reads alone leave it as it is (false: only idle time drains)";
        second_level: Size = 0, Any, "a second, larger buffer level; 0 = none";
        second_level_idle_flush_window: Window = None, Any, "the second level's idle drain window";
        second_level_rate: RateC = Rate(2e9), Any, "how fast the first level moves into the second";
        second_level_capacity_ios: U64 = 0, Any, "the second level's write-count trigger";
        drain_in_gap: Bool = false, Any, "the idle drain without soft_flush programs during the idle gap, as a drive draining while idle: the gap's share of the buffer leaves it as before (P8, P10 unchanged), its pages are released one after another over the gap (the whole buffer over idle_flush_window), each program starts once its unit is free, and those that could not start before the next command arrives wait for later idle time on their unit, their data still in RAM, instead of being booked ahead of that command (a buffer flush or a host flush takes them along; single-level buffer only; false: the gap's share is booked at once from the gap's start)";
    }
}

section! {
    ["slc_cache"] SlcCache, fn read_slc_cache(), fn write_slc_cache, SLC_CACHE_KEYS, fn slc_cache_docs {
        capacity: Size = 0, Any, "bytes written in SLC mode before writes fall to native speed";
        fold_rate: RateC = Rate(0.0), Any, "background folding speed while idle (frees SLC capacity)";
        fold_while_writing: Float = 0.0, Between(0.0, 1.0), "pages of the oldest SLC-mode blocks folded in the foreground for each page the host writes in SLC mode (a valid page is read and programmed in native mode on its die, a replaced one costs nothing: a fresh fill pays for every page it wrote, a small rewritten span almost nothing; 0: fold only while idle)";
        fold_above: Float = 0.0, Between(0.0, 1.0), "foreground folding (fold_while_writing) starts once this share of the SLC capacity is in use";
        fold_by_valid: Bool = false, Any, "foreground folding runs at fold_while_writing times the share of the SLC capacity that holds valid data: a filling cache folds harder and harder, a small span rewritten in SLC mode (its old copies replaced) folds almost nothing (false: fold_while_writing from the start)";
        fold_batch: Size = 0, Any, "once the SLC cache is full, the write that needs a new block waits while every die folds its oldest closed SLC-mode blocks, this many bytes over all dies (whole blocks, at least one a die), in the foreground; writes then go on in SLC mode into the room freed, so after the cliff they alternate SLC-speed bursts with stalls of a whole fold (0: after the cliff writes go to native-mode blocks)";
    }
}

section! {
    ["ftl"] Ftl, fn read_ftl(), fn write_ftl, FTL_KEYS, fn ftl_docs {
        mapping_cache: MappingCacheC = MappingCache::Full, Any, "\"full\", or the bytes of mapping table kept in RAM";
        map_miss_latency: Time = Nanos(50_000), Any, "extra flash read on a mapping-cache miss";
        gc: GcC = GcPolicy::Greedy, Any, "victim choice: \"greedy\" (fewest valid pages)";
        gc_free_block_threshold: Float = 0.05, Inside(0.0, 1.0), "GC starts below this share of free blocks";
        flush_pipelined: Bool = false, Any, "once the SLC cache is full (or without one), a full write buffer frees each page's room when that page is programmed, so a write waits only for the room it needs (false: for the whole flush)";
        flush_pipelined_slc: Bool = false, Any, "with flush_pipelined: pipeline the flush before the SLC cliff too, once the buffer has flushed whole since it was last empty (the first fill after idle keeps its spike; a steady write stream then waits only for its room)";
        flush_pipelined_writes_only: Bool = false, Any, "with flush_pipelined: pipeline only while no host read is in progress (a stream of writes alone); a write that meets reads in progress waits for a full buffer's whole flush as without flush_pipelined, while the mix's reads drain it between the writes (write_buffer.drain_while_reading)";
        write_map_lookup: Bool = false, Any, "writes look up their mapping entry in the mapping cache too: a miss reads the translation page first and evicting a changed one programs it (DRAM-less drives)";
        map_program_latency: Time = Nanos(0), Any, "with write_map_lookup: programming an evicted changed translation page, a lone page program that no flush batches with data (a whole physical page in SLC mode); 0 = the L-page program_latency";
        merge_partial_writes: Bool = false, Any, "a write covering only part of a mapping page (page_size) first reads the page's old data from NAND to merge with it (read-modify-write: a sense and a transfer on the host-read path), unless the page was never written, is unmapped or is still in the write buffer";
        gc_idle_after: Window = None, Any, "idle time after which background GC collects blocks; \"inf\" = never";
        gc_idle_free: Float = 0.0, Between(0.0, 1.0), "background GC collects while fewer than this share of a unit's blocks are free";
    }
}

section! {
    ["quirks"] Quirks, fn read_quirks(), fn write_quirks, QUIRKS_KEYS, fn quirks_docs {
        unaligned_size_penalty: Time = Nanos(0), Any, "extra latency when a read's size is not a multiple of page_size (P6)";
        read_size_penalties: Penalties = Vec::new(), Any, "extra latency for reads of sizes in [min, max] (P6)";
        low_load_penalty: Time = Nanos(0), Any, "a lone read is slower than one in a busy queue";
    }
}

section! {
    ["controller"] Controller, fn read_controller(), fn write_controller, CONTROLLER_KEYS, fn controller_docs {
        command_overhead: Time = Nanos(5_000), Any, "fixed cost of every command";
        host_rate: RateC = Rate(3.5e9), MoreThan(0.0), "host link rate (PCIe/SATA), per direction";
        buffer_insert_latency: Time = Nanos(10_000), Any, "time to insert one write into the write buffer";
        ram_read_latency: Time = Nanos(3_000), Any, "time to serve a page from controller RAM";
        cores: U32 = 0, Any, "command processors, each serving one command at a time for command_time; 0 = unlimited";
        command_time: Time = Nanos(0), Any, "processor time of one command (with cores > 0: the command rate is cores / command_time)";
        read_command_time: Time = command_time => "command_time", Any, "processor time of one read command (with cores > 0): a read's mapping lookup and decoding cost more than a write the buffer takes, so reads may be capped at a lower rate";
        host_write_rate: RateC = host_rate => "host_rate", MoreThan(0.0), "host link rate for writes (host_rate is then the read rate)";
        host_total_rate: RateC = Rate(0.0), Any, "a limit on reads and writes together (the controller's data path); 0 = none";
        write_command_time: Time = command_time => "command_time", Any, "processor time of one write command (with cores > 0); a DRAM-less write also updates its map";
        sense_command_time: Time = Nanos(0), Any, "processor time (with cores > 0) for each NAND sense a host read needs (flash read command, ECC decode); pages in a page register or controller RAM need none";
        host_segment_time: Time = Nanos(0), Any, "the DMA engine's time for each segment of a transfer (a piece between one 4KiB host memory page and one mapping page of controller buffer), whatever its size; it works alongside the host link, so it limits only transfers of many segments: a request not aligned to the mapping page splits every host page in two; 0 = none";
        host_link_gaps: U32 = 8, Between(1.0, 4096.0), "idle gaps of the host link (each direction) that a transfer whose data is ready early can still take, the latest kept: the link sends data as it is ready, so at a deep queue a read whose die is idle completes before reads booked earlier behind busy dies; with too few gaps it waits after them (latencies bunch up, the tails narrow)";
        command_slots: U32 = 0, Any, "commands the controller holds at once (NVMe: fetched from the submission queue into its internal command slots); the rest wait in the submission queue and are fetched in order as commands complete, so at a queue deeper than this a read waits behind the writes submitted before it; 0 = unlimited (every command is taken the moment it is submitted)";
    }
}

section! {
    ["hdd"] HddConfig, fn read_hdd(), fn write_hdd, HDD_KEYS, fn hdd_docs {
        rpm: U32 = 7200, AtLeast(1.0), "spindle speed";
        track_to_track_seek: Time = Nanos(800_000), Any, "seek to the next track";
        average_seek: Time = Nanos(8_500_000), Any, "seek over a third of the stroke";
        full_stroke_seek: Time = Nanos(17_000_000), Any, "seek over the whole stroke";
        outer_rate: RateC = Rate(200e6), Any, "sequential transfer at LBA 0";
        inner_rate: RateC = Rate(100e6), MoreThan(0.0), "sequential transfer at the last LBA (zoning)";
        cache: Size = 64 * MIB, Any, "the disk's read-ahead and write cache";
        queue_depth: U32 = 32, Between(1.0, 256.0), "commands the disk reorders, shortest positioning time first (SATA NCQ: 32); 1 = in arrival order";
        scheduling_margin: Time = Nanos(1_000_000), Any, "reordering plans each seek this much longer (a late arrival costs a revolution)";
    }
}

section! {
    ["noise"] Noise, fn read_noise(), fn write_noise, NOISE_KEYS, fn noise_docs {
        latency_cv: Float = 0.0, Between(0.0, 2.0), "coefficient of variation of each NAND read, program and erase time (lognormal, mean kept)";
        host_jitter: Time = Nanos(0), Any, "mean of an exponential extra delay added to every completion";
        read_retry_rate: Float = 0.0, Between(0.0, 1.0), "share of page reads that need one more read of the page (with nand.register_hold issued when the hold ends: the decode of the first read failed)";
        background_interval: Window = None, MoreThan(0.0), "mean gap (exponential) between background operations; \"inf\" = none";
        background_busy: Time = Nanos(1_000_000), Any, "each occupies one random unit for this long";
        stall_rate: Float = 0.0, Between(0.0, 1.0), "share of commands that meet a firmware stall ...";
        stall_latency: Time = Nanos(3_000_000), Any, "... and wait this much longer";
    }
}

section! {
    ["thermal"] Thermal, fn read_thermal(), fn write_thermal, THERMAL_KEYS, fn thermal_docs {
        ambient: Celsius = 35.0, Between(-40.0, 150.0), "temperature at rest";
        heat_per_gb: Celsius = 0.5, Between(0.0, 100.0), "rise per GB of NAND programmed or read";
        cooling: CelsiusPerSecond = 0.2, Between(0.0, 1000.0), "fall per second towards ambient";
        throttle_above: Celsius = 70.0, Between(-40.0, 150.0), "above this every NAND operation slows down ...";
        throttle_factor: Float = 2.0, Between(1.0, 100.0), "... by this factor, until back under throttle_above minus hysteresis";
        hysteresis: Celsius = 5.0, Between(0.0, 50.0), "how far below throttle_above throttling ends";
    }
}

section! {
    ["faults"] Faults, fn read_faults(), fn write_faults, FAULTS_KEYS, fn faults_docs {
        media_error_rate: Float = 0.0, Between(0.0, 1.0), "share of page reads that fail after the retries (unrecovered read error)";
        bad_ranges: ByteRanges = Vec::new(), Any, "byte ranges whose reads always fail: [ { start = \"1GiB\", length = \"4KiB\" } ]";
        stop_responding_after: Window = None, Any, "device time after which no command completes any more; \"inf\" = never";
        lost_command_rate: Float = 0.0, Between(0.0, 1.0), "share of commands that never complete";
    }
}

/// Every section with its keys, in the order `to_toml` writes them.
pub(crate) const SECTIONS: &[(&str, &[&str])] = &[
    ("device", DEVICE_KEYS),
    ("geometry", GEOMETRY_KEYS),
    ("mapping", MAPPING_KEYS),
    ("nand", NAND_KEYS),
    ("read_buffer", READ_BUFFER_KEYS),
    ("write_buffer", WRITE_BUFFER_KEYS),
    ("slc_cache", SLC_CACHE_KEYS),
    ("ftl", FTL_KEYS),
    ("quirks", QUIRKS_KEYS),
    ("controller", CONTROLLER_KEYS),
    ("hdd", HDD_KEYS),
    ("noise", NOISE_KEYS),
    ("thermal", THERMAL_KEYS),
    ("faults", FAULTS_KEYS),
];

/// Every key with its kind, default, range and doc, in the order `to_toml` writes them.
pub fn key_docs() -> Vec<KeyDoc> {
    [
        device_docs(),
        geometry_docs(),
        mapping_docs(),
        nand_docs(),
        read_buffer_docs(),
        write_buffer_docs(),
        slc_cache_docs(),
        ftl_docs(),
        quirks_docs(),
        controller_docs(),
        hdd_docs(),
        noise_docs(),
        thermal_docs(),
        faults_docs(),
    ]
    .concat()
}

/// docs/device-model-keys.md: every key as a table per section, generated from this file.
pub fn keys_markdown() -> String {
    let mut out = String::from(
        "# Simulated device keys\n\n\
         Every key a device file may hold, generated from the key table in `crates/ftlscope-sim/src/keys.rs` \
         (a test checks this page against it). The meaning of the keys is fixed by the device-model contract; \
         [presets.md](presets.md#the-model-noise-heat-faults-and-command-queueing) explains the sections added \
         since. Sizes take `B`, `KiB`, `MiB`, `GiB`, `TiB`, `KB`, `MB`, `GB`, `TB`; times `ns`, `us`, `ms`, `s`; \
         rates are a size per second (`\"800MB/s\"`); temperatures are degrees Celsius (`\"35C\"`, `\"0.2C/s\"`). \
         `[hdd]` is only for `kind = \"hdd\"`; `[noise]`, `[thermal]` and `[faults]` are optional and only for SSDs \
         (absent = a noise-free device that never heats up or fails).\n",
    );
    let mut section = "";
    for k in key_docs() {
        if k.section != section {
            section = k.section;
            out.push_str(&format!(
                "\n## [{section}]\n\n| key | kind | default | range | meaning |\n| --- | --- | --- | --- | --- |\n"
            ));
        }
        let cell = |s: &str| s.replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | {} | `{}` | {} | {} |\n",
            k.key,
            cell(k.kind),
            cell(&k.default),
            cell(&k.range),
            cell(k.doc)
        ));
    }
    out
}

// ----------------------------------------------------------------------------------------------------------
// Defaults that depend on other keys

/// The page pattern a cell type gets when `page_pattern` is left out. QLC has four page types but the model
/// has three, so its two upper bits are both H (the slowest).
pub fn default_pattern(cell: Cell) -> &'static str {
    match cell {
        Cell::Slc => "L",
        Cell::Mlc => "1L 1H",
        Cell::Tlc => "1L 1M 1H",
        Cell::Qlc => "1L 1M 1H 1H",
    }
}

fn default_pattern_of(cell: Cell, page_size: u64) -> PagePattern {
    parse_page_pattern(default_pattern(cell), cell, page_size).expect("the default patterns parse")
}

/// Default read latency, program latency and erase latency of a cell type. An SLC cell has only L pages
/// (its M and H equal L); an MLC cell's M (unused by its patterns) sits between L and H.
pub(crate) fn cell_defaults(cell: Cell) -> (PerType, PerType, Nanos) {
    let us = |l: u64, m: u64, h: u64| PerType { l: Nanos(l * 1000), m: Nanos(m * 1000), h: Nanos(h * 1000) };
    match cell {
        Cell::Slc => (us(25, 25, 25), us(200, 200, 200), Nanos(3_000_000)),
        Cell::Mlc => (us(45, 65, 85), us(400, 900, 1400), Nanos(3_000_000)),
        Cell::Tlc => (us(60, 80, 100), us(500, 1500, 3000), Nanos(4_000_000)),
        Cell::Qlc => (us(80, 110, 140), us(700, 2500, 5000), Nanos(5_000_000)),
    }
}

// ----------------------------------------------------------------------------------------------------------
// Codecs

/// A TOML basic string on one line.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn size_value(v: &Value) -> std::result::Result<u64, String> {
    match v {
        Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        Value::Integer(i) => Err(format!("{i} must not be negative")),
        Value::String(s) if s.trim_start().starts_with('-') => Err(format!("{s:?} must not be negative")),
        Value::String(s) => parse_size(s),
        other => Err(format!("expected a size such as \"16MiB\", found {}", describe_value(other))),
    }
}

fn time_value(v: &Value, inf: bool) -> std::result::Result<Option<Nanos>, String> {
    match v {
        Value::String(s) if inf && matches!(s.trim(), "inf" | "∞") => Ok(None),
        Value::String(s) if s.trim_start().starts_with('-') => {
            Err(format!("{s:?} must not be negative (a time of 0 or more)"))
        }
        Value::String(s) => {
            parse_time(s).map(Some).map_err(
                |p| {
                    if inf {
                        format!("{} or \"inf\")", p.trim_end_matches(')'))
                    } else {
                        p
                    }
                },
            )
        }
        other => Err(format!(
            "expected a time such as \"30ms\"{}, found {}",
            if inf { " or \"inf\"" } else { "" },
            describe_value(other)
        )),
    }
}

pub(crate) struct Size;
impl Codec for Size {
    type V = u64;
    type Arg = ();
    const KIND: &'static str = "size";
    fn read(v: &Value, at: &At, _: &(), _: &u64) -> Result<u64> {
        size_value(v).map_err(|p| at.err(p))
    }
    fn write(v: &u64) -> String {
        quote(&format_size(*v))
    }
    fn magnitude(v: &u64) -> Option<f64> {
        Some(*v as f64)
    }
    fn bound(x: f64) -> String {
        format_size(x as u64)
    }
}

/// A size written back as a plain number of bytes (the LBA size: 512, 4096).
pub(crate) struct Bytes;
impl Codec for Bytes {
    type V = u64;
    type Arg = ();
    const KIND: &'static str = "bytes";
    fn read(v: &Value, at: &At, arg: &(), default: &u64) -> Result<u64> {
        Size::read(v, at, arg, default)
    }
    fn write(v: &u64) -> String {
        v.to_string()
    }
}

pub(crate) struct Time;
impl Codec for Time {
    type V = Nanos;
    type Arg = ();
    const KIND: &'static str = "time";
    fn read(v: &Value, at: &At, _: &(), _: &Nanos) -> Result<Nanos> {
        time_value(v, false).map(|t| t.expect("no inf")).map_err(|p| at.err(p))
    }
    fn write(v: &Nanos) -> String {
        quote(&format_time(*v))
    }
    fn magnitude(v: &Nanos) -> Option<f64> {
        Some(v.0 as f64)
    }
    fn bound(x: f64) -> String {
        format_time(Nanos(x as u64))
    }
}

/// A time or `"inf"` (None).
pub(crate) struct Window;
impl Codec for Window {
    type V = Option<Nanos>;
    type Arg = ();
    const KIND: &'static str = "time or \"inf\"";
    fn read(v: &Value, at: &At, _: &(), _: &Option<Nanos>) -> Result<Option<Nanos>> {
        time_value(v, true).map_err(|p| at.err(p))
    }
    fn write(v: &Option<Nanos>) -> String {
        quote(&format_window(*v))
    }
    fn magnitude(v: &Option<Nanos>) -> Option<f64> {
        Some(v.map_or(f64::INFINITY, |t| t.0 as f64))
    }
    fn bound(x: f64) -> String {
        format_time(Nanos(x as u64))
    }
}

pub(crate) struct RateC;
impl Codec for RateC {
    type V = Rate;
    type Arg = ();
    const KIND: &'static str = "rate";
    fn read(v: &Value, at: &At, _: &(), _: &Rate) -> Result<Rate> {
        match v {
            Value::String(s) => parse_rate(s).map_err(|p| at.err(p)),
            other => Err(at.err(format!("expected a rate such as \"800MB/s\", found {}", describe_value(other)))),
        }
    }
    fn write(v: &Rate) -> String {
        quote(&format_rate(*v))
    }
    fn magnitude(v: &Rate) -> Option<f64> {
        Some(v.0)
    }
    fn bound(x: f64) -> String {
        format!("{}B/s", format_size(x as u64).trim_end_matches('B'))
    }
}

fn whole<T: TryFrom<i64>>(v: &Value, at: &At) -> Result<T> {
    match v {
        Value::Integer(i) if *i < 0 => Err(at.err(format!("{i} must not be negative"))),
        Value::Integer(i) => T::try_from(*i).map_err(|_| at.err(format!("{i} is too large"))),
        other => Err(at.err(format!("expected a whole number, found {}", describe_value(other)))),
    }
}

pub(crate) struct U32;
impl Codec for U32 {
    type V = u32;
    type Arg = ();
    const KIND: &'static str = "count";
    fn read(v: &Value, at: &At, _: &(), _: &u32) -> Result<u32> {
        whole(v, at)
    }
    fn write(v: &u32) -> String {
        v.to_string()
    }
    fn magnitude(v: &u32) -> Option<f64> {
        Some(*v as f64)
    }
}

pub(crate) struct U64;
impl Codec for U64 {
    type V = u64;
    type Arg = ();
    const KIND: &'static str = "count";
    fn read(v: &Value, at: &At, _: &(), _: &u64) -> Result<u64> {
        whole(v, at)
    }
    fn write(v: &u64) -> String {
        v.to_string()
    }
    fn magnitude(v: &u64) -> Option<f64> {
        Some(*v as f64)
    }
}

/// The seed: an integer, or a string of digits for seeds beyond TOML's signed 64-bit integers.
pub(crate) struct Seed;
impl Codec for Seed {
    type V = u64;
    type Arg = ();
    const KIND: &'static str = "whole number";
    fn read(v: &Value, at: &At, _: &(), _: &u64) -> Result<u64> {
        match v {
            Value::String(s) => s.parse().map_err(|_| at.err(format!("cannot read {s:?} as a seed (a whole number)"))),
            other => whole(other, at),
        }
    }
    fn write(v: &u64) -> String {
        if *v <= i64::MAX as u64 {
            v.to_string()
        } else {
            quote(&v.to_string())
        }
    }
}

pub(crate) struct Float;
impl Codec for Float {
    type V = f64;
    type Arg = ();
    const KIND: &'static str = "number";
    fn read(v: &Value, at: &At, _: &(), _: &f64) -> Result<f64> {
        match v {
            Value::Float(f) => Ok(*f),
            Value::Integer(i) => Ok(*i as f64),
            other => Err(at.err(format!("expected a number, found {}", describe_value(other)))),
        }
    }
    fn write(v: &f64) -> String {
        format!("{v:?}")
    }
    fn magnitude(v: &f64) -> Option<f64> {
        Some(*v)
    }
}

pub(crate) struct Bool;
impl Codec for Bool {
    type V = bool;
    type Arg = ();
    const KIND: &'static str = "true or false";
    fn read(v: &Value, at: &At, _: &(), _: &bool) -> Result<bool> {
        match v {
            Value::Boolean(b) => Ok(*b),
            other => Err(at.err(format!("expected true or false, found {}", describe_value(other)))),
        }
    }
    fn write(v: &bool) -> String {
        v.to_string()
    }
}

fn string<'v>(v: &'v Value, at: &At) -> Result<&'v str> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(at.err(format!("expected a string, found {}", describe_value(other)))),
    }
}

pub(crate) struct Text;
impl Codec for Text {
    type V = String;
    type Arg = ();
    const KIND: &'static str = "text";
    fn read(v: &Value, at: &At, _: &(), _: &String) -> Result<String> {
        string(v, at).map(str::to_string)
    }
    fn write(v: &String) -> String {
        quote(v)
    }
}

/// A codec for a choice among fixed words.
macro_rules! choice {
    ($codec:ident, $ty:ty, $what:literal, $use:literal, { $($word:literal => $variant:expr),* $(,)? }) => {
        pub(crate) struct $codec;
        impl Codec for $codec {
            type V = $ty;
            type Arg = ();
            const KIND: &'static str = "choice";
            fn read(v: &Value, at: &At, _: &(), _: &$ty) -> Result<$ty> {
                match string(v, at)? {
                    $($word => Ok($variant),)*
                    other => Err(at.err(format!("{other:?} is not {} ({})", $what, $use))),
                }
            }
            fn write(v: &$ty) -> String {
                $(if *v == $variant { return quote($word); })*
                unreachable!("every variant has a word")
            }
        }
    };
}

choice!(DeviceKindC, DeviceKind, "a device kind", "use \"ssd\" or \"hdd\"", {
    "ssd" => DeviceKind::Ssd, "hdd" => DeviceKind::Hdd,
});
choice!(CellC, Cell, "a cell type", "use \"slc\", \"mlc\", \"tlc\" or \"qlc\"", {
    "slc" => Cell::Slc, "mlc" => Cell::Mlc, "tlc" => Cell::Tlc, "qlc" => Cell::Qlc,
});
choice!(GcC, GcPolicy, "a supported policy", "the only one is \"greedy\"", { "greedy" => GcPolicy::Greedy });

pub(crate) struct Pattern;
impl Codec for Pattern {
    type V = PagePattern;
    type Arg = (Cell, u64);
    const KIND: &'static str = "page pattern";
    fn read(v: &Value, at: &At, &(cell, page_size): &(Cell, u64), _: &PagePattern) -> Result<PagePattern> {
        parse_page_pattern(string(v, at)?, cell, page_size).map_err(|p| at.err(p))
    }
    fn write(v: &PagePattern) -> String {
        quote(&v.text)
    }
}

/// `{ L = "45us", M = "65us", H = "85us" }`, or one time for every page type. Types left out take the
/// default (an SLC cell's M and H take its L).
pub(crate) struct PerTypeC;
impl Codec for PerTypeC {
    type V = PerType;
    type Arg = Cell;
    const KIND: &'static str = "time per page type";
    fn read(v: &Value, at: &At, cell: &Cell, default: &PerType) -> Result<PerType> {
        let key = at.key;
        match v {
            Value::Table(t) => {
                if let Some(k) = t.keys().find(|k| !matches!(k.as_str(), "L" | "M" | "H")) {
                    return Err(at.unknown(format!("{key}.{k}"), " (page types are L, M and H)"));
                }
                let get = |k: &str, d: Nanos| -> Result<Nanos> {
                    t.get(k).map_or(Ok(d), |v| {
                        time_value(v, false)
                            .map(|t| t.expect("no inf"))
                            .map_err(|p| at.err_at(&format!("{key}.{k}"), p))
                    })
                };
                let l = get("L", default.l)?;
                let (dm, dh) = if *cell == Cell::Slc { (l, l) } else { (default.m, default.h) };
                Ok(PerType { l, m: get("M", dm)?, h: get("H", dh)? })
            }
            v => {
                let t = time_value(v, false)
                    .map(|t| t.expect("no inf"))
                    .map_err(|p| at.err(format!("{p}; or a table {{ L = \"45us\", M = \"65us\", H = \"85us\" }}")))?;
                Ok(PerType { l: t, m: t, h: t })
            }
        }
    }
    fn write(p: &PerType) -> String {
        format!(
            "{{ L = {}, M = {}, H = {} }}",
            quote(&format_time(p.l)),
            quote(&format_time(p.m)),
            quote(&format_time(p.h))
        )
    }
}

pub(crate) struct MappingCacheC;
impl Codec for MappingCacheC {
    type V = MappingCache;
    type Arg = ();
    const KIND: &'static str = "size or \"full\"";
    fn read(v: &Value, at: &At, _: &(), _: &MappingCache) -> Result<MappingCache> {
        match v {
            Value::String(s) if s == "full" => Ok(MappingCache::Full),
            v => size_value(v)
                .map(MappingCache::Bytes)
                .map_err(|p| at.err(format!("{p}; or \"full\" for a mapping table wholly in RAM"))),
        }
    }
    fn write(v: &MappingCache) -> String {
        match v {
            MappingCache::Full => quote("full"),
            MappingCache::Bytes(b) => quote(&format_size(*b)),
        }
    }
}

/// The items of an array of small tables (`[ { min = .., max = .., extra = .. }, ... ]`), each checked for
/// unknown fields, handed to `item` with its key path (`read_size_penalties[0]`).
fn table_items<T>(
    v: &Value,
    at: &At,
    example: &str,
    fields: &[&str],
    mut item: impl FnMut(&Table, &str) -> Result<T>,
) -> Result<Vec<T>> {
    let Value::Array(items) = v else {
        return Err(at.err(format!("expected an array like [{example}], found {}", describe_value(v))));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, value) in items.iter().enumerate() {
        let here = format!("{}[{i}]", at.key);
        let Value::Table(t) = value else {
            return Err(at.err_at(
                &here,
                format!("expected a table {{ {} }}, found {}", fields.join(", "), describe_value(value)),
            ));
        };
        if let Some(k) = t.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(at.unknown(format!("{here}.{k}"), &format!(" (known: {})", fields.join(", "))));
        }
        out.push(item(t, &here)?);
    }
    Ok(out)
}

/// A field of one item of [`table_items`], required.
fn item_field<'t>(t: &'t Table, at: &At, here: &str, k: &str, needs: &str) -> Result<&'t Value> {
    t.get(k).ok_or_else(|| at.err_at(&format!("{here}.{k}"), format!("missing (each {needs})")))
}

/// `[ { min = "17KiB", max = "20KiB", extra = "50us" }, ... ]`
pub(crate) struct Penalties;
impl Codec for Penalties {
    type V = Vec<SizePenalty>;
    type Arg = ();
    const KIND: &'static str = "list of { min, max, extra }";
    fn read(v: &Value, at: &At, _: &(), _: &Vec<SizePenalty>) -> Result<Vec<SizePenalty>> {
        let needs = "penalty needs min, max and extra";
        table_items(
            v,
            at,
            "{ min = \"17KiB\", max = \"20KiB\", extra = \"50us\" }",
            &["min", "max", "extra"],
            |t, here| {
                let size = |k: &str| {
                    size_value(item_field(t, at, here, k, needs)?).map_err(|p| at.err_at(&format!("{here}.{k}"), p))
                };
                let (min, max) = (size("min")?, size("max")?);
                let extra = time_value(item_field(t, at, here, "extra", needs)?, false)
                    .map(|t| t.expect("no inf"))
                    .map_err(|p| at.err_at(&format!("{here}.extra"), p))?;
                Ok(SizePenalty { min, max, extra })
            },
        )
    }
    fn write(v: &Vec<SizePenalty>) -> String {
        let items: Vec<String> = v
            .iter()
            .map(|p| {
                format!(
                    "{{ min = {}, max = {}, extra = {} }}",
                    quote(&format_size(p.min)),
                    quote(&format_size(p.max)),
                    quote(&format_time(p.extra))
                )
            })
            .collect();
        format!("[{}]", items.join(", "))
    }
}

/// A temperature or a temperature difference in degrees Celsius: `"35C"`, `"0.5C"` (a bare number works too).
pub(crate) struct Celsius;
impl Codec for Celsius {
    type V = f64;
    type Arg = ();
    const KIND: &'static str = "temperature";
    fn read(v: &Value, at: &At, _: &(), _: &f64) -> Result<f64> {
        degrees(v, at, "C", "\"35C\"")
    }
    fn write(v: &f64) -> String {
        quote(&format!("{v}C"))
    }
    fn magnitude(v: &f64) -> Option<f64> {
        Some(*v)
    }
    fn bound(x: f64) -> String {
        format!("{x}C")
    }
}

/// A rate of temperature change: `"0.2C/s"`.
pub(crate) struct CelsiusPerSecond;
impl Codec for CelsiusPerSecond {
    type V = f64;
    type Arg = ();
    const KIND: &'static str = "temperature per second";
    fn read(v: &Value, at: &At, _: &(), _: &f64) -> Result<f64> {
        degrees(v, at, "C/s", "\"0.2C/s\"")
    }
    fn write(v: &f64) -> String {
        quote(&format!("{v}C/s"))
    }
    fn magnitude(v: &f64) -> Option<f64> {
        Some(*v)
    }
    fn bound(x: f64) -> String {
        format!("{x}C/s")
    }
}

fn degrees(v: &Value, at: &At, unit: &str, example: &str) -> Result<f64> {
    let cannot = |what: String| at.err(format!("cannot read {what} as degrees (write it like {example})"));
    let x = match v {
        Value::Float(f) => *f,
        Value::Integer(i) => *i as f64,
        Value::String(s) => {
            let body = s.trim().strip_suffix(unit).unwrap_or(s.trim()).trim_end();
            let body = body.strip_suffix('°').unwrap_or(body);
            if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'-') {
                return Err(cannot(format!("{s:?}")));
            }
            body.parse().map_err(|_| cannot(format!("{s:?}")))?
        }
        other => return Err(cannot(describe_value(other))),
    };
    if !x.is_finite() {
        return Err(cannot(x.to_string()));
    }
    Ok(x)
}

/// `[ { start = "1GiB", length = "4KiB" }, ... ]`
pub(crate) struct ByteRanges;
impl Codec for ByteRanges {
    type V = Vec<ByteRange>;
    type Arg = ();
    const KIND: &'static str = "list of { start, length }";
    fn read(v: &Value, at: &At, _: &(), _: &Vec<ByteRange>) -> Result<Vec<ByteRange>> {
        let needs = "range needs start and length";
        table_items(v, at, "{ start = \"1GiB\", length = \"4KiB\" }", &["start", "length"], |t, here| {
            let size = |k: &str| {
                size_value(item_field(t, at, here, k, needs)?).map_err(|p| at.err_at(&format!("{here}.{k}"), p))
            };
            Ok(ByteRange { start: size("start")?, length: size("length")? })
        })
    }
    fn write(v: &Vec<ByteRange>) -> String {
        let items: Vec<String> = v
            .iter()
            .map(|r| {
                format!("{{ start = {}, length = {} }}", quote(&format_size(r.start)), quote(&format_size(r.length)))
            })
            .collect();
        format!("[{}]", items.join(", "))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn docs_list_every_key() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/device-model-keys.md");
        let want = super::keys_markdown();
        if std::env::var_os("FTLSCOPE_BLESS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let Ok(docs) = std::fs::read_to_string(&path) else {
            eprintln!("skipped: {} is not there (crate built outside the repository)", path.display());
            return;
        };
        assert!(
            docs == want,
            "docs/device-model-keys.md is out of date: FTLSCOPE_BLESS=1 cargo test -p ftlscope-sim docs_list_every_key"
        );
    }
}
