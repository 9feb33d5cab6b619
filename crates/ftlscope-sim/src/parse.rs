//! Reading a device configuration (shared/device-model.md): TOML text in, a checked [`DeviceConfig`] out, and
//! back again with [`to_toml`].
//!
//! Every problem is reported as one [`ConfigError`] whose message is a single line naming the key and what is
//! wrong with it, e.g. `[write_buffer] capacity: cannot read "16MiBs" as a size (...)`. The TOML is first read
//! into a plain table (syntax errors carry a line and column), every section and key is then checked against
//! the known ones (so a misspelt key is an error, never a silently ignored setting), values are read with
//! their units and ranges, and finally the keys are checked against each other (stripe width against parallel
//! units, capacity against logical block, ...). The keys themselves (name, kind, default, range, doc) are one
//! table in `keys.rs`, which drives the known keys, the reading, the range checks and [`to_toml`].
//!
//! Units: sizes take `B`, `KiB`, `MiB`, `GiB`, `TiB` (binary), `KB`, `MB`, `GB`, `TB` (decimal) or a bare
//! integer of bytes; times take `ns`, `us`, `ms`, `s` (and `inf` for idle windows); rates are a size per
//! second, `"800MB/s"`. Fractions are fine as long as they come out whole: `"40.25MiB"`, `"0.8ms"`.

use std::fs;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

use crate::config::{Cell, DeviceConfig, DeviceKind, HddConfig, PagePattern, PageType, PatternSegment};
use crate::keys::{self, SECTIONS};
use crate::time::{Nanos, Rate};

pub use crate::keys::{default_pattern, key_docs, KeyDoc};

/// Why a configuration was rejected. `Display` is always one line naming the section and key.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not TOML.
    #[error("invalid TOML at line {line}, column {column}: {message}")]
    Syntax { line: usize, column: usize, message: String },
    #[error("unknown section [{section}]{hint}")]
    UnknownSection { section: String, hint: String },
    /// A key no section knows; `section` is empty for a key outside any section.
    #[error("unknown key {}{hint}", key_label(.section, .key))]
    UnknownKey { section: String, key: String, hint: String },
    /// One value is missing, of the wrong type, unreadable or out of range.
    #[error("[{section}] {key}: {problem}")]
    Value { section: String, key: String, problem: String },
    /// Values that are fine alone but not together; `message` starts with the key.
    #[error("[{section}] {message}")]
    Invalid { section: String, key: String, message: String },
    #[error("cannot read {}: {message}", .path.display())]
    Io { path: PathBuf, message: String },
    /// An error in a file read by [`load_device`].
    #[error("{}: {inner}", .path.display())]
    InFile { path: PathBuf, inner: Box<ConfigError> },
    #[error("unknown preset {name:?} (presets: {known})")]
    UnknownPreset { name: String, known: String },
}

impl ConfigError {
    /// The key the error is about, as `section.key` (`"write_buffer.capacity"`), when there is one.
    pub fn key_path(&self) -> Option<String> {
        match self {
            ConfigError::UnknownKey { section, key, .. }
            | ConfigError::Value { section, key, .. }
            | ConfigError::Invalid { section, key, .. } => Some(match (section.is_empty(), key.is_empty()) {
                (true, _) => key.clone(),
                (false, true) => section.clone(),
                (false, false) => format!("{section}.{key}"),
            }),
            ConfigError::UnknownSection { section, .. } => Some(section.clone()),
            ConfigError::InFile { inner, .. } => inner.key_path(),
            _ => None,
        }
    }
}

fn key_label(section: &str, key: &str) -> String {
    if section.is_empty() {
        format!("{key} outside any section")
    } else {
        format!("[{section}] {key}")
    }
}

type Result<T> = std::result::Result<T, ConfigError>;

/// The model numbers physical pages with 32 bits, less a few reserved values.
const MAX_PHYSICAL_PAGES: u64 = u32::MAX as u64 - 3;

/// Parse a device from TOML text. A missing `[device] name` becomes `"unnamed"`.
pub fn parse_device(toml_text: &str) -> Result<DeviceConfig> {
    parse_with_name(toml_text, "unnamed")
}

/// Read and parse a device file. A missing `[device] name` becomes the file's stem; errors name the file.
pub fn load_device(path: &Path) -> Result<DeviceConfig> {
    let text =
        fs::read_to_string(path).map_err(|e| ConfigError::Io { path: path.to_path_buf(), message: e.to_string() })?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("unnamed");
    parse_with_name(&text, stem).map_err(|e| ConfigError::InFile { path: path.to_path_buf(), inner: Box::new(e) })
}

fn parse_with_name(text: &str, default_name: &str) -> Result<DeviceConfig> {
    let root: Table = toml::from_str(text).map_err(|e| syntax_error(text, &e))?;
    check_known_keys(&root)?;
    let section = |name: &'static str| -> Result<Option<&Table>> {
        match root.get(name) {
            None => Ok(None),
            Some(Value::Table(t)) => Ok(Some(t)),
            Some(other) => {
                Err(invalid(name, "", format!("must be a section [{name}], found {}", describe_value(other))))
            }
        }
    };

    let device_table = section("device")?;
    if device_table.and_then(|t| t.get("capacity")).is_none() {
        return Err(ConfigError::Value {
            section: "device".into(),
            key: "capacity".into(),
            problem: "missing: every device needs its logical capacity, e.g. capacity = \"1TB\"".into(),
        });
    }
    let device = keys::read_device(device_table, default_name)?;
    let geometry = keys::read_geometry(section("geometry")?)?;
    let units = geometry.channels as u64 * geometry.chips_per_channel as u64 * geometry.planes_per_chip as u64;
    if units > u32::MAX as u64 {
        return Err(invalid(
            "geometry",
            "channels",
            format!("channels x chips_per_channel x planes_per_chip = {units} is too many units"),
        ));
    }
    let cfg = DeviceConfig {
        device,
        mapping: keys::read_mapping(section("mapping")?, units as u32)?,
        nand: keys::read_nand(section("nand")?, geometry.page_size)?,
        geometry,
        read_buffer: keys::read_read_buffer(section("read_buffer")?)?,
        write_buffer: keys::read_write_buffer(section("write_buffer")?)?,
        slc_cache: keys::read_slc_cache(section("slc_cache")?)?,
        ftl: keys::read_ftl(section("ftl")?)?,
        quirks: keys::read_quirks(section("quirks")?)?,
        controller: keys::read_controller(section("controller")?)?,
        hdd: section("hdd")?.map(|t| keys::read_hdd(Some(t))).transpose()?,
        noise: section("noise")?.map(|t| keys::read_noise(Some(t))).transpose()?,
        thermal: section("thermal")?.map(|t| keys::read_thermal(Some(t))).transpose()?,
        faults: section("faults")?.map(|t| keys::read_faults(Some(t))).transpose()?,
    };
    validate(&cfg)?;
    Ok(cfg)
}

fn invalid(section: &str, key: &str, message: String) -> ConfigError {
    ConfigError::Invalid { section: section.into(), key: key.into(), message }
}

/// Checks between keys, and ranges that need more than one value to state.
fn validate(cfg: &DeviceConfig) -> Result<()> {
    let d = &cfg.device;
    if d.logical_block < 512 || !d.logical_block.is_power_of_two() {
        return Err(invalid(
            "device",
            "logical_block",
            format!("logical_block = {} must be a power of two of at least 512", d.logical_block),
        ));
    }
    if !d.capacity.is_multiple_of(d.logical_block) {
        return Err(invalid(
            "device",
            "capacity",
            format!(
                "capacity {} ({} bytes) is not a multiple of logical_block {}",
                format_size(d.capacity),
                d.capacity,
                d.logical_block
            ),
        ));
    }

    match (d.kind, &cfg.hdd) {
        (DeviceKind::Hdd, None) => {
            return Err(invalid(
                "device",
                "kind",
                "kind = \"hdd\" needs an [hdd] section (rpm, seeks, zone rates, cache)".into(),
            ))
        }
        (DeviceKind::Ssd, Some(_)) => {
            return Err(invalid(
                "hdd",
                "",
                "this section is only for kind = \"hdd\", but [device] kind is \"ssd\"".into(),
            ))
        }
        _ => {}
    }
    if let Some(h) = &cfg.hdd {
        for (name, present) in
            [("noise", cfg.noise.is_some()), ("thermal", cfg.thermal.is_some()), ("faults", cfg.faults.is_some())]
        {
            if present {
                return Err(invalid(
                    name,
                    "",
                    "this section is modelled for SSDs only, but [device] kind is \"hdd\" (remove the section)".into(),
                ));
            }
        }
        return validate_hdd(h);
    }

    let g = &cfg.geometry;
    if !g.page_size.is_multiple_of(d.logical_block) {
        return Err(invalid(
            "geometry",
            "page_size",
            format!(
                "page_size {} ({} bytes) is not a multiple of [device] logical_block {}",
                format_size(g.page_size),
                g.page_size,
                d.logical_block
            ),
        ));
    }
    let m = &cfg.mapping;
    if m.chunk_size == 0 || !m.chunk_size.is_multiple_of(g.page_size) {
        return Err(invalid(
            "mapping",
            "chunk_size",
            format!(
                "chunk_size {} is not a multiple of [geometry] page_size {}",
                format_size(m.chunk_size),
                format_size(g.page_size)
            ),
        ));
    }
    if m.stripe_width > g.units() {
        return Err(invalid(
            "mapping",
            "stripe_width",
            format!(
                "stripe_width = {} is larger than the {} parallel units (channels x chips x planes)",
                m.stripe_width,
                g.units()
            ),
        ));
    }
    if m.channel_groups > g.channels {
        return Err(invalid(
            "mapping",
            "channel_groups",
            format!("channel_groups = {} is more than the {} channels", m.channel_groups, g.channels),
        ));
    }
    let stripe = m.stripe_width as u64 * m.chunk_size;
    if d.capacity < stripe {
        return Err(invalid(
            "device",
            "capacity",
            format!(
                "capacity {} is smaller than one stripe (stripe_width x chunk_size = {})",
                format_size(d.capacity),
                format_size(stripe)
            ),
        ));
    }
    let physical = physical_pages(cfg);
    if physical > MAX_PHYSICAL_PAGES {
        return Err(invalid(
            "device",
            "capacity",
            format!(
                "capacity {} needs {physical} physical pages of {}, more than the model's {MAX_PHYSICAL_PAGES} \
                 (use a larger page_size)",
                format_size(d.capacity),
                format_size(g.page_size)
            ),
        ));
    }

    let sized: u64 = cfg.nand.page_pattern.segments.iter().filter_map(|s| s.pages).map(u64::from).sum();
    if sized > g.pages_per_block as u64 {
        return Err(invalid(
            "nand",
            "page_pattern",
            format!(
                "page_pattern {:?} sizes {sized} pages, more than the {} pages of a block (pages_per_block)",
                cfg.nand.page_pattern.text, g.pages_per_block
            ),
        ));
    }
    let n = &cfg.nand;
    if !n.physical_page.is_multiple_of(g.page_size) {
        return Err(invalid(
            "nand",
            "physical_page",
            format!(
                "physical_page {} is not a multiple of [geometry] page_size {}",
                format_size(n.physical_page),
                format_size(g.page_size)
            ),
        ));
    }

    let w = &cfg.write_buffer;
    if w.partial_flush > w.capacity {
        return Err(invalid(
            "write_buffer",
            "partial_flush",
            format!(
                "partial_flush {} is more than the buffer's capacity {}",
                format_size(w.partial_flush),
                format_size(w.capacity)
            ),
        ));
    }
    if w.second_level > 0 && w.second_level_rate.0 <= 0.0 {
        return Err(invalid(
            "write_buffer",
            "second_level_rate",
            "second_level_rate must be more than 0B/s when there is a second_level".into(),
        ));
    }
    if cfg.slc_cache.capacity > d.capacity {
        return Err(invalid(
            "slc_cache",
            "capacity",
            format!(
                "capacity {} is more than the device's capacity {}",
                format_size(cfg.slc_cache.capacity),
                format_size(d.capacity)
            ),
        ));
    }
    if let Some(t) = &cfg.thermal {
        if t.throttle_above < t.ambient {
            return Err(invalid(
                "thermal",
                "throttle_above",
                format!(
                    "throttle_above {}C is below ambient {}C: the drive would throttle at rest",
                    t.throttle_above, t.ambient
                ),
            ));
        }
    }
    if let Some(f) = &cfg.faults {
        for (i, r) in f.bad_ranges.iter().enumerate() {
            if r.length == 0 || r.start.saturating_add(r.length) > d.capacity {
                return Err(invalid(
                    "faults",
                    &format!("bad_ranges[{i}]"),
                    format!(
                        "bad_ranges[{i}] = {} + {} must be a non-empty range inside the capacity {}",
                        format_size(r.start),
                        format_size(r.length),
                        format_size(d.capacity)
                    ),
                ));
            }
        }
    }
    for (i, p) in cfg.quirks.read_size_penalties.iter().enumerate() {
        if p.min > p.max {
            return Err(invalid(
                "quirks",
                &format!("read_size_penalties[{i}]"),
                format!("read_size_penalties[{i}]: min {} is more than max {}", format_size(p.min), format_size(p.max)),
            ));
        }
    }
    Ok(())
}

/// Physical pages the model will lay out: logical pages plus over-provisioning, rounded up to whole blocks on
/// every unit of the stripe (mirrors the FTL's own sizing, including its garbage-collection reserve).
fn physical_pages(cfg: &DeviceConfig) -> u64 {
    let g = &cfg.geometry;
    let width = cfg.mapping.stripe_width as u64;
    let logical = cfg.device.capacity / g.page_size;
    let physical = (logical as f64 * (1.0 + cfg.device.over_provisioning)).ceil() as u64;
    let per_block = width * g.pages_per_block as u64;
    let mut blocks_per_unit = physical.div_ceil(per_block);
    let reserve = ((blocks_per_unit as f64 * cfg.ftl.gc_free_block_threshold).ceil() as u64).max(2);
    blocks_per_unit = blocks_per_unit.max(reserve + 2);
    blocks_per_unit.saturating_mul(per_block)
}

fn validate_hdd(h: &HddConfig) -> Result<()> {
    if h.track_to_track_seek > h.average_seek || h.average_seek > h.full_stroke_seek {
        return Err(invalid(
            "hdd",
            "average_seek",
            format!(
                "seeks must grow with distance: track_to_track_seek {} <= average_seek {} <= full_stroke_seek {}",
                format_time(h.track_to_track_seek),
                format_time(h.average_seek),
                format_time(h.full_stroke_seek)
            ),
        ));
    }
    if h.outer_rate.0 < h.inner_rate.0 {
        return Err(invalid(
            "hdd",
            "outer_rate",
            format!(
                "outer_rate {} is slower than inner_rate {} (outer tracks are the fast ones)",
                format_rate(h.outer_rate),
                format_rate(h.inner_rate)
            ),
        ));
    }
    Ok(())
}

fn syntax_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let at = e.span().map(|s| s.start).unwrap_or(0).min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    ConfigError::Syntax { line, column, message: one_line(e.message()) }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Unknown sections and keys are errors: a misspelt key must never fall back to its default silently.
fn check_known_keys(root: &Table) -> Result<()> {
    for (name, value) in root {
        let Some((_, keys)) = SECTIONS.iter().find(|(s, _)| s == name) else {
            if value.is_table() {
                let names: Vec<&str> = SECTIONS.iter().map(|(s, _)| *s).collect();
                return Err(ConfigError::UnknownSection { section: name.clone(), hint: hint(name, &names) });
            }
            return Err(ConfigError::UnknownKey {
                section: String::new(),
                key: name.clone(),
                hint: " (every key belongs in a section such as [device])".into(),
            });
        };
        if let Value::Table(table) = value {
            for key in table.keys() {
                if !keys.contains(&key.as_str()) {
                    return Err(ConfigError::UnknownKey {
                        section: name.clone(),
                        key: key.clone(),
                        hint: hint(key, keys),
                    });
                }
            }
        }
    }
    Ok(())
}

/// " (did you mean capacity?)" when one known name is close, else the list of known names.
fn hint(name: &str, known: &[&str]) -> String {
    let best = known.iter().map(|k| (edit_distance(name, k), *k)).min();
    match best {
        Some((d, k)) if d <= 2.max(name.len() / 4) => format!(" (did you mean {k}?)"),
        _ => format!(" (known: {})", known.join(", ")),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A short, one-line description of a TOML value for error messages.
pub(crate) fn describe_value(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let mut shown: String = s.chars().take(40).collect();
            if shown.len() < s.len() {
                shown.push_str("...");
            }
            format!("the string {shown:?}")
        }
        Value::Integer(i) => format!("the integer {i}"),
        Value::Float(f) => format!("the number {f}"),
        Value::Boolean(b) => format!("{b}"),
        Value::Datetime(_) => "a date-time".into(),
        Value::Array(_) => "an array".into(),
        Value::Table(_) => "a table".into(),
    }
}

// ----------------------------------------------------------------------------------------------------------
// Cell defaults and page patterns
const PATTERN_HELP: &str =
    "segments are [SIZE:]CYCLE separated by \",\", a cycle is runs like \"4L 2H\", e.g. \"128KiB:L, 2M 2H\"";

/// Parse a page pattern ("4L 2H", "128KiB:L, 2M 2H") for `cell` with pages of `page_size` bytes. The error
/// is the problem alone; the caller names the key.
pub fn parse_page_pattern(text: &str, cell: Cell, page_size: u64) -> std::result::Result<PagePattern, String> {
    let text = text.trim();
    let cannot = |why: String| format!("cannot parse {text:?}: {why} ({PATTERN_HELP})");
    if text.is_empty() {
        return Err(cannot("it is empty".into()));
    }
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let mut segments = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let (size, cycle_text) = match part.split_once(':') {
            Some((size, cycle)) => (Some(size.trim()), cycle.trim()),
            None => (None, *part),
        };
        let pages = match size {
            None if !last => {
                return Err(cannot(format!("only the last segment may leave out its size, but {part:?} does")));
            }
            None => None,
            Some(s) => {
                let bytes = parse_size(s).map_err(cannot)?;
                if bytes == 0 || page_size == 0 || !bytes.is_multiple_of(page_size) {
                    return Err(cannot(format!("{s} is not a whole number of {} pages", format_size(page_size))));
                }
                let pages = bytes / page_size;
                Some(u32::try_from(pages).map_err(|_| cannot(format!("{s} is too many pages")))?)
            }
        };
        if cycle_text.is_empty() {
            return Err(cannot(format!("segment {part:?} has no page types")));
        }
        let mut cycle = Vec::new();
        for run in cycle_text.split_whitespace() {
            let (count, kind) = run.split_at(run.len() - run.chars().last().map_or(0, char::len_utf8));
            let kind = match kind {
                "L" => PageType::L,
                "M" => PageType::M,
                "H" => PageType::H,
                _ => return Err(cannot(format!("{run:?} is not a run of pages like 4L, 2M or 1H"))),
            };
            let count: usize = if count.is_empty() {
                1
            } else {
                match count.parse() {
                    Ok(n) if (1..=65_535).contains(&n) => n,
                    _ => return Err(cannot(format!("{run:?} is not a run of pages like 4L, 2M or 1H"))),
                }
            };
            if cycle.len() + count > 65_535 {
                return Err(cannot("its cycle is longer than 65535 pages".into()));
            }
            cycle.extend(std::iter::repeat_n(kind, count));
        }
        segments.push(PatternSegment { pages, cycle });
    }

    let (allowed, cell_name, has): (&[PageType], &str, &str) = match cell {
        Cell::Slc => (&[PageType::L], "slc", "only L pages"),
        Cell::Mlc => (&[PageType::L, PageType::H], "mlc", "only L and H pages"),
        Cell::Tlc | Cell::Qlc => (&[PageType::L, PageType::M, PageType::H], "", ""),
    };
    for seg in &segments {
        if let Some(bad) = seg.cycle.iter().find(|t| !allowed.contains(t)) {
            return Err(format!("{text:?} uses {bad:?} pages, but cell \"{cell_name}\" has {has}"));
        }
    }
    Ok(PagePattern { text: text.to_string(), segments })
}

// ----------------------------------------------------------------------------------------------------------
// Units

const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("KB", 1_000),
    ("kB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];
const TIME_UNITS: &[(&str, u64)] =
    &[("ns", 1), ("us", 1_000), ("µs", 1_000), ("μs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)];

const SIZE_HELP: &str = "use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB";
const TIME_HELP: &str = "use ns, us, ms, s";

/// `"12.5"` → (125, 1): mantissa and decimal places. None unless plain digits with an optional fraction.
fn parse_decimal(s: &str) -> Option<(u128, u32)> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || (s.contains('.') && frac.is_empty()) {
        return None;
    }
    if int.len() + frac.len() > 30 {
        return None;
    }
    let mantissa = format!("{int}{frac}").parse().ok()?;
    Some((mantissa, frac.len() as u32))
}

/// Split "16 MiB" into ("16", "MiB").
fn split_unit(s: &str) -> (&str, &str) {
    let s = s.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    (&s[..end], s[end..].trim_start())
}

enum Inexact {
    TooLarge,
    Fraction,
}

/// `mantissa / 10^scale * unit`, exactly, if it is a whole number that fits.
fn scale_exact(mantissa: u128, scale: u32, unit: u64) -> std::result::Result<u64, Inexact> {
    let v = mantissa.checked_mul(unit as u128).ok_or(Inexact::TooLarge)?;
    let d = 10u128.pow(scale);
    if v % d != 0 {
        return Err(Inexact::Fraction);
    }
    u64::try_from(v / d).map_err(|_| Inexact::TooLarge)
}

/// Parse a size such as `"16MiB"`, `"1.6TB"`, `"4096"` into bytes. The error is a one-line problem.
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let cannot = || format!("cannot read {s:?} as a size ({SIZE_HELP})");
    let (num, unit) = split_unit(s);
    let (mantissa, scale) = parse_decimal(num).ok_or_else(cannot)?;
    let factor = if unit.is_empty() { 1 } else { SIZE_UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(cannot)?.1 };
    scale_exact(mantissa, scale, factor).map_err(|why| match why {
        Inexact::TooLarge => format!("{s:?} is too large"),
        Inexact::Fraction => format!("{s:?} is not a whole number of bytes"),
    })
}

/// Parse a time such as `"45us"`, `"0.8ms"`, `"2.5s"`.
pub fn parse_time(s: &str) -> std::result::Result<Nanos, String> {
    let cannot = || format!("cannot read {s:?} as a time ({TIME_HELP})");
    let (num, unit) = split_unit(s);
    let (mantissa, scale) = parse_decimal(num).ok_or_else(cannot)?;
    let factor = TIME_UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(cannot)?.1;
    scale_exact(mantissa, scale, factor).map(Nanos).map_err(|why| match why {
        Inexact::TooLarge => format!("{s:?} is too large"),
        Inexact::Fraction => format!("{s:?} is not a whole number of nanoseconds"),
    })
}

/// Parse a rate such as `"800MB/s"`, `"1.2GB/s"`, `"0MB/s"` into bytes per second.
pub fn parse_rate(s: &str) -> std::result::Result<Rate, String> {
    let cannot = || format!("cannot read {s:?} as a rate (a size per second, e.g. \"800MB/s\"; {SIZE_HELP})");
    let body = s.trim().strip_suffix("/s").ok_or_else(cannot)?;
    let (num, unit) = split_unit(body);
    let factor = if unit.is_empty() { 1 } else { SIZE_UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(cannot)?.1 };
    if let Some(Ok(v)) = parse_decimal(num).map(|(m, s)| scale_exact(m, s, factor)) {
        return Ok(Rate(v as f64));
    }
    // Fractions of a byte per second: read as a correctly rounded float, so that a rate written by
    // `format_rate` reads back equal.
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(cannot());
    }
    num.parse::<f64>().map(|v| Rate(v * factor as f64)).map_err(|_| cannot())
}

/// `value / unit` in decimal, exactly, with at most 12 decimal places; None if it needs more.
fn exact_decimal(value: u128, unit: u128) -> Option<String> {
    let int = value / unit;
    let mut rem = value % unit;
    if rem == 0 {
        return Some(int.to_string());
    }
    let mut frac = String::new();
    while rem != 0 {
        if frac.len() == 12 {
            return None;
        }
        rem *= 10;
        frac.push(char::from(b'0' + (rem / unit) as u8));
        rem %= unit;
    }
    Some(format!("{int}.{frac}"))
}

/// The shortest exact spelling among `units` (largest first, ending with the base unit) that is at least one
/// of its unit; ties go to the larger unit ("40.25MiB" rather than "41216KiB").
fn shortest(value: u64, units: &[(&str, u64)]) -> String {
    let mut best: Option<String> = None;
    for (name, unit) in units {
        if value < *unit && *unit != 1 {
            continue;
        }
        if let Some(num) = exact_decimal(value as u128, *unit as u128) {
            let s = format!("{num}{name}");
            if best.as_ref().is_none_or(|b| s.len() < b.len()) {
                best = Some(s);
            }
        }
    }
    best.unwrap_or_else(|| format!("{value}B"))
}

/// A size in its shortest exact spelling: `4096` → `"4KiB"`, `1_600_000_000_000` → `"1.6TB"`, 0 → `"0B"`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: &[(&str, u64)] = &[
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("TB", 1_000_000_000_000),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1_000),
        ("B", 1),
    ];
    shortest(bytes, UNITS)
}

/// A time in its shortest exact spelling: `800_000` → `"800us"`, `2_500_000_000` → `"2.5s"`, 0 → `"0us"`.
pub fn format_time(t: Nanos) -> String {
    if t.0 == 0 {
        return "0us".into();
    }
    const UNITS: &[(&str, u64)] = &[("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000), ("ns", 1)];
    shortest(t.0, UNITS)
}

/// A window: a time, or `"inf"` for never.
pub fn format_window(w: Option<Nanos>) -> String {
    w.map_or_else(|| "inf".into(), format_time)
}

/// A rate as a size per second: `"800MB/s"`, `"1.2GB/s"`, `"0MB/s"`.
pub fn format_rate(r: Rate) -> String {
    if r.0 == 0.0 {
        "0MB/s".into()
    } else if r.0.fract() == 0.0 && r.0 > 0.0 && r.0 < u64::MAX as f64 {
        format!("{}/s", format_size(r.0 as u64))
    } else {
        format!("{}B/s", r.0)
    }
}

// ----------------------------------------------------------------------------------------------------------
// Writing

/// The whole configuration as TOML, every key written out, in the order of shared/device-model.md.
/// `parse_device(&to_toml(cfg))` gives back a config equal to `cfg` (for any config that parsed). Optional
/// sections ([hdd]) are written only when present.
pub fn to_toml(cfg: &DeviceConfig) -> String {
    let mut out = String::new();
    let mut section = |name: &str, keys: Vec<(&str, String)>| {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("[{name}]\n"));
        for (k, v) in keys {
            out.push_str(&format!("{k} = {v}\n"));
        }
    };
    section("device", keys::write_device(&cfg.device));
    section("geometry", keys::write_geometry(&cfg.geometry));
    section("mapping", keys::write_mapping(&cfg.mapping));
    section("nand", keys::write_nand(&cfg.nand));
    section("read_buffer", keys::write_read_buffer(&cfg.read_buffer));
    section("write_buffer", keys::write_write_buffer(&cfg.write_buffer));
    section("slc_cache", keys::write_slc_cache(&cfg.slc_cache));
    section("ftl", keys::write_ftl(&cfg.ftl));
    section("quirks", keys::write_quirks(&cfg.quirks));
    section("controller", keys::write_controller(&cfg.controller));
    if let Some(h) = &cfg.hdd {
        section("hdd", keys::write_hdd(h));
    }
    if let Some(n) = &cfg.noise {
        section("noise", keys::write_noise(n));
    }
    if let Some(t) = &cfg.thermal {
        section("thermal", keys::write_thermal(t));
    }
    if let Some(f) = &cfg.faults {
        section("faults", keys::write_faults(f));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{MappingCache, PerType, Quirks, SlcCache};

    /// A small valid SSD: 8 channels x 4 chips = 32 units, stripe 30, 16KiB chunks (a 480KiB stripe).
    const BASE: &str = r#"
[device]
name = "t"
capacity = "1GiB"

[mapping]
chunk_size = "16KiB"
stripe_width = 30
"#;

    fn with(extra: &str) -> std::result::Result<DeviceConfig, ConfigError> {
        parse_device(&format!("{BASE}\n{extra}"))
    }

    /// Parse `text`, expect an error, check it is one line mentioning `needle`, and return it.
    fn error(text: &str, needle: &str) -> String {
        let e = parse_device(text).expect_err("should be rejected");
        let msg = e.to_string();
        assert!(!msg.contains('\n'), "not one line: {msg}");
        assert!(msg.contains(needle), "{msg:?} does not mention {needle:?}");
        msg
    }

    fn size(s: &str) -> u64 {
        parse_size(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn time(s: &str) -> u64 {
        parse_time(s).unwrap_or_else(|e| panic!("{s}: {e}")).0
    }

    #[test]
    fn every_size_unit() {
        assert_eq!(size("1B"), 1);
        assert_eq!(size("1KiB"), 1024);
        assert_eq!(size("1MiB"), 1 << 20);
        assert_eq!(size("1GiB"), 1 << 30);
        assert_eq!(size("1TiB"), 1 << 40);
        assert_eq!(size("1KB"), 1_000);
        assert_eq!(size("1kB"), 1_000);
        assert_eq!(size("1MB"), 1_000_000);
        assert_eq!(size("1GB"), 1_000_000_000);
        assert_eq!(size("1TB"), 1_000_000_000_000);
        assert_eq!(size("4096"), 4096);
        assert_eq!(size("16 MiB"), 16 << 20);
        assert_eq!(size("40.25MiB"), 42_205_184);
        assert_eq!(size("1.6TB"), 1_600_000_000_000);
        assert_eq!(size("0B"), 0);
        // A bare TOML integer is bytes.
        let cfg = with("[read_buffer]\ncapacity = 8192").unwrap();
        assert_eq!(cfg.read_buffer.capacity, 8192);
        assert!(parse_size("16MiBs").is_err());
        assert!(parse_size("16M").is_err());
        assert!(parse_size("0.3B").unwrap_err().contains("whole number of bytes"));
        assert!(parse_size("99999999999TB").unwrap_err().contains("too large"));
        assert!(parse_size("-1MB").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("1.MB").is_err());
    }

    #[test]
    fn every_time_unit_and_inf() {
        assert_eq!(time("7ns"), 7);
        assert_eq!(time("45us"), 45_000);
        assert_eq!(time("45µs"), 45_000);
        assert_eq!(time("3ms"), 3_000_000);
        assert_eq!(time("0.8ms"), 800_000);
        assert_eq!(time("2.5s"), 2_500_000_000);
        assert!(parse_time("30").is_err(), "a time needs a unit");
        assert!(parse_time("1.5ns").unwrap_err().contains("whole number of nanoseconds"));
        let cfg = with("[write_buffer]\nidle_flush_window = \"inf\"\nsecond_level_idle_flush_window = \"5s\"").unwrap();
        assert_eq!(cfg.write_buffer.idle_flush_window, None);
        assert_eq!(cfg.write_buffer.second_level_idle_flush_window, Some(Nanos(5_000_000_000)));
        // "inf" only where noted.
        let msg =
            error(&format!("{BASE}\n[nand]\nerase_latency = \"inf\""), "[nand] erase_latency: cannot read \"inf\"");
        assert!(!msg.contains("or \"inf\""), "{msg}");
        let msg =
            error(&format!("{BASE}\n[write_buffer]\nidle_flush_window = \"soon\""), "[write_buffer] idle_flush_window");
        assert!(msg.contains("or \"inf\""), "{msg}");
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("800MB/s").unwrap(), Rate(800e6));
        assert_eq!(parse_rate("1.2GB/s").unwrap(), Rate(1.2e9));
        assert_eq!(parse_rate("0MB/s").unwrap(), Rate(0.0));
        assert_eq!(parse_rate("1.5GiB/s").unwrap(), Rate(1.5 * (1u64 << 30) as f64));
        assert_eq!(parse_rate("2.5B/s").unwrap(), Rate(2.5));
        assert!(parse_rate("800MB").unwrap_err().contains("as a rate"));
        assert!(parse_rate("fast/s").is_err());
        error(&format!("{BASE}\n[nand]\nchannel_rate = 800"), "[nand] channel_rate: expected a rate");
    }

    #[test]
    fn formatting_reads_back_exactly() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let v = next() >> (next() % 64);
            assert_eq!(parse_size(&format_size(v)).unwrap(), v, "{}", format_size(v));
            assert_eq!(parse_time(&format_time(Nanos(v))).unwrap(), Nanos(v), "{}", format_time(Nanos(v)));
            let r = Rate((v >> 11) as f64 / 7.0);
            assert_eq!(parse_rate(&format_rate(r)).unwrap(), r, "{}", format_rate(r));
        }
        assert_eq!(format_size(42_205_184), "40.25MiB");
        assert_eq!(format_size(1_600_000_000_000), "1.6TB");
        assert_eq!(format_size(512), "512B");
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_time(Nanos(2_500_000_000)), "2.5s");
        assert_eq!(format_time(Nanos(45_000)), "45us");
        assert_eq!(format_rate(Rate(1.2e9)), "1.2GB/s");
        assert_eq!(format_window(None), "inf");
    }

    #[test]
    fn defaults() {
        let cfg = parse_device("[device]\ncapacity = \"1TB\"").unwrap();
        assert_eq!(cfg.device.name, "unnamed");
        assert_eq!(cfg.device.kind, DeviceKind::Ssd);
        assert_eq!(cfg.device.logical_block, 512);
        assert_eq!(cfg.device.over_provisioning, 0.07);
        assert_eq!(cfg.device.seed, 1);
        assert_eq!(cfg.device.description, "");
        assert_eq!((cfg.geometry.channels, cfg.geometry.chips_per_channel, cfg.geometry.planes_per_chip), (8, 4, 1));
        assert_eq!((cfg.geometry.page_size, cfg.geometry.pages_per_block), (4096, 256));
        assert_eq!(cfg.mapping.chunk_size, 16 * 1024);
        assert_eq!(cfg.mapping.stripe_width, 32, "every unit");
        assert_eq!(cfg.mapping.channel_groups, 0);
        assert_eq!(cfg.nand.cell, Cell::Mlc);
        assert_eq!(cfg.nand.page_pattern.text, "1L 1H");
        assert_eq!(cfg.nand.read_latency, PerType { l: Nanos(45_000), m: Nanos(65_000), h: Nanos(85_000) });
        assert_eq!(cfg.nand.program_latency.h, Nanos(1_400_000));
        assert_eq!(cfg.nand.erase_latency, Nanos(3_000_000));
        assert_eq!(cfg.nand.channel_rate, Rate(800e6));
        assert_eq!(cfg.read_buffer.capacity, 0);
        let w = &cfg.write_buffer;
        assert_eq!((w.capacity, w.capacity_ios, w.partial_flush, w.parallelism), (16 << 20, 0, 0, 1));
        assert_eq!(w.idle_flush_window, Some(Nanos(30_000_000)));
        assert!(!w.serialize_when_idle);
        assert_eq!((w.second_level, w.second_level_idle_flush_window), (0, None));
        assert_eq!((w.second_level_rate, w.second_level_capacity_ios), (Rate(2e9), 0));
        assert_eq!(
            cfg.slc_cache,
            SlcCache {
                capacity: 0,
                fold_rate: Rate(0.0),
                fold_while_writing: 0.0,
                fold_above: 0.0,
                fold_by_valid: false,
                fold_batch: 0
            }
        );
        assert_eq!(cfg.ftl.mapping_cache, MappingCache::Full);
        assert_eq!(cfg.ftl.map_miss_latency, Nanos(50_000));
        assert_eq!(cfg.ftl.gc_free_block_threshold, 0.05);
        assert_eq!(
            cfg.quirks,
            Quirks { unaligned_size_penalty: Nanos(0), read_size_penalties: vec![], low_load_penalty: Nanos(0) }
        );
        let c = &cfg.controller;
        assert_eq!((c.command_overhead, c.host_rate), (Nanos(5_000), Rate(3.5e9)));
        assert_eq!((c.buffer_insert_latency, c.ram_read_latency), (Nanos(10_000), Nanos(3_000)));
        assert_eq!(cfg.hdd, None);

        for (cell, pattern) in [("slc", "L"), ("mlc", "1L 1H"), ("tlc", "1L 1M 1H"), ("qlc", "1L 1M 1H 1H")] {
            let cfg = with(&format!("[nand]\ncell = \"{cell}\"")).unwrap();
            assert_eq!(cfg.nand.page_pattern.text, pattern);
        }
        // SLC: M and H follow L when only L is given; one time for all types also works.
        let cfg = with("[nand]\ncell = \"slc\"\nread_latency = { L = \"30us\" }\nprogram_latency = \"150us\"").unwrap();
        assert_eq!(cfg.nand.read_latency, PerType { l: Nanos(30_000), m: Nanos(30_000), h: Nanos(30_000) });
        assert_eq!(cfg.nand.program_latency.m, Nanos(150_000));
        let hdd = parse_device("[device]\nkind = \"hdd\"\ncapacity = \"2TB\"\n[hdd]").unwrap().hdd.unwrap();
        assert_eq!((hdd.rpm, hdd.average_seek, hdd.cache), (7200, Nanos(8_500_000), 64 << 20));
        let cfg = with("[ftl]\nmapping_cache = \"4MiB\"").unwrap();
        assert_eq!(cfg.ftl.mapping_cache, MappingCache::Bytes(4 << 20));
    }

    #[test]
    fn patterns_and_page_types() {
        use PageType::{H, L, M};
        let p = parse_page_pattern("4L 2H", Cell::Mlc, 4096).unwrap();
        let types: Vec<PageType> = (0..12).map(|i| p.page_type(i)).collect();
        assert_eq!(types, [L, L, L, L, H, H, L, L, L, L, H, H]);

        let p = parse_page_pattern("128KiB:L, 2M 2H", Cell::Tlc, 4096).unwrap();
        assert_eq!(p.segments.len(), 2);
        assert_eq!(p.segments[0], PatternSegment { pages: Some(32), cycle: vec![L] });
        assert_eq!(p.segments[1], PatternSegment { pages: None, cycle: vec![M, M, H, H] });
        assert!((0..32).all(|i| p.page_type(i) == L));
        let rest: Vec<PageType> = (32..40).map(|i| p.page_type(i)).collect();
        assert_eq!(rest, [M, M, H, H, M, M, H, H]);
        assert_eq!(p.page_type(255), H);

        let p = parse_page_pattern(" L ", Cell::Slc, 8192).unwrap();
        assert_eq!(p.text, "L");
        assert!((0..10).all(|i| p.page_type(i) == L));
        let p = parse_page_pattern("1L 1M 1H", Cell::Tlc, 4096).unwrap();
        assert_eq!((p.page_type(3), p.page_type(4), p.page_type(5)), (L, M, H));
        // Sized segments everywhere, and a sized last segment that keeps cycling.
        let p = parse_page_pattern("8KiB:L, 8KiB:H", Cell::Mlc, 4096).unwrap();
        assert_eq!((0..6).map(|i| p.page_type(i)).collect::<Vec<_>>(), [L, L, H, H, H, H]);
    }

    #[test]
    fn pattern_errors() {
        let msg =
            error(&format!("{BASE}\n[nand]\npage_pattern = \"4X 2H\""), "[nand] page_pattern: cannot parse \"4X 2H\"");
        assert!(msg.contains("\"4X\""), "{msg}");
        error(
            &format!("{BASE}\n[nand]\ncell = \"slc\"\npage_pattern = \"2M 2H\""),
            "uses M pages, but cell \"slc\" has only L pages",
        );
        error(&format!("{BASE}\n[nand]\ncell = \"slc\"\npage_pattern = \"1L 1H\""), "uses H pages, but cell \"slc\"");
        error(
            &format!("{BASE}\n[nand]\ncell = \"mlc\"\npage_pattern = \"1L 1M\""),
            "uses M pages, but cell \"mlc\" has only L and H",
        );
        error(
            &format!("{BASE}\n[nand]\ncell = \"tlc\"\npage_pattern = \"L, 2M 2H\""),
            "only the last segment may leave out its size",
        );
        error(
            &format!("{BASE}\n[nand]\ncell = \"tlc\"\npage_pattern = \"6KiB:L, 2M 2H\""),
            "6KiB is not a whole number of 4KiB pages",
        );
        error(&format!("{BASE}\n[nand]\npage_pattern = \"\""), "[nand] page_pattern: cannot parse \"\"");
        error(&format!("{BASE}\n[nand]\npage_pattern = \"0L 1H\""), "\"0L\" is not a run of pages");
        error(
            &format!("{BASE}\n[nand]\npage_pattern = \"2MiB:L, 1H\""),
            "[nand] page_pattern \"2MiB:L, 1H\" sizes 512 pages",
        );
        error(&format!("{BASE}\n[nand]\ncell = \"plc\""), "[nand] cell: \"plc\" is not a cell type");
    }

    #[test]
    fn the_errors_the_contract_names() {
        assert_eq!(
            error(&format!("{BASE}\n[write_buffer]\ncapacity = \"16MiBs\""), "[write_buffer] capacity"),
            "[write_buffer] capacity: cannot read \"16MiBs\" as a size (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
        );
        assert_eq!(
            error(
                "[device]\ncapacity = \"1TB\"\n[geometry]\nchannels = 16\nchips_per_channel = 16\n[mapping]\nstripe_width = 300",
                "stripe_width"
            ),
            "[mapping] stripe_width = 300 is larger than the 256 parallel units (channels x chips x planes)"
        );
        assert_eq!(
            error("[device]\ncapacity = \"256KiB\"\n[mapping]\nstripe_width = 30\nchunk_size = \"16KiB\"", "capacity"),
            "[device] capacity 256KiB is smaller than one stripe (stripe_width x chunk_size = 480KiB)"
        );
        assert_eq!(
            error(&format!("{BASE}\n[write_buffer]\ncapactiy = \"16MiB\""), "capactiy"),
            "unknown key [write_buffer] capactiy (did you mean capacity?)"
        );
        error(
            &format!("{BASE}\n[write_bufer]\ncapacity = \"16MiB\""),
            "unknown section [write_bufer] (did you mean write_buffer?)",
        );
        error(&format!("{BASE}\n[nand]\nzzz = 1"), "unknown key [nand] zzz (known: cell, page_pattern");
        error(&format!("name = \"x\"\n{BASE}"), "unknown key name outside any section");
        error("[device]\nkind = \"hdd\"\ncapacity = \"2TB\"", "[device] kind = \"hdd\" needs an [hdd] section");
        error(&format!("{BASE}\n[hdd]\nrpm = 7200"), "[hdd] this section is only for kind = \"hdd\"");
        error("[device]\ncapacity = 1000", "[device] capacity 1KB (1000 bytes) is not a multiple of logical_block 512");
        error(
            &format!("{BASE}\n[geometry]\npage_size = 3000"),
            "[geometry] page_size 3KB (3000 bytes) is not a multiple of [device] logical_block 512",
        );
        error(
            "[device]\ncapacity = \"1GiB\"\n[geometry]\npage_size = \"8KiB\"\n[mapping]\nchunk_size = \"12KiB\"",
            "[mapping] chunk_size 12KiB is not a multiple of [geometry] page_size 8KiB",
        );
        error(&format!("{BASE}\n[device]\nover_provisioning = -0.1"), "duplicate key");
        error(
            "[device]\ncapacity = \"1GiB\"\nover_provisioning = -0.1",
            "[device] over_provisioning = -0.1 must be between 0 and 4",
        );
        for bad in ["0", "0.0", "1", "1.5", "-0.2"] {
            error(&format!("{BASE}\n[ftl]\ngc_free_block_threshold = {bad}"), "[ftl] gc_free_block_threshold = ");
        }
        error(
            &format!("{BASE}\n[ftl]\ngc = \"fifo\""),
            "[ftl] gc: \"fifo\" is not a supported policy (the only one is \"greedy\")",
        );
    }

    #[test]
    fn other_errors_are_one_line_and_name_the_key() {
        error("[device]\nname = \"x\"", "[device] capacity: missing");
        error(
            &format!("{BASE}\n[geometry]\nchannels = \"8\""),
            "[geometry] channels: expected a whole number, found the string \"8\"",
        );
        error(&format!("{BASE}\n[geometry]\nchannels = 0"), "[geometry] channels = 0 must be at least 1");
        error(&format!("{BASE}\n[geometry]\nchannels = -3"), "[geometry] channels: -3 must not be negative");
        error(&format!("{BASE}\n[geometry]\nchannels = 5000000000"), "[geometry] channels: 5000000000 is too large");
        error(&format!("{BASE}\n[geometry]\npage_size = 0"), "[geometry] page_size = 0 must be more than 0B");
        error(
            &format!("{BASE}\n[geometry]\npages_per_block = 70000"),
            "[geometry] pages_per_block = 70000 must be between 1 and 65535",
        );
        error(
            "[device]\ncapacity = \"1GiB\"\n[mapping]\nstripe_width = 0",
            "[mapping] stripe_width = 0 must be at least 1",
        );
        error(
            "[device]\ncapacity = \"1GiB\"\n[mapping]\nchannel_groups = 9",
            "[mapping] channel_groups = 9 is more than the 8 channels",
        );
        error(&format!("{BASE}\n[device]\nlogical_block = 1000"), "duplicate key");
        error(
            "[device]\ncapacity = \"1GiB\"\nlogical_block = 1000",
            "[device] logical_block = 1000 must be a power of two",
        );
        error("[device]\ncapacity = \"1GiB\"\nkind = \"tape\"", "[device] kind: \"tape\" is not a device kind");
        error("[device]\ncapacity = \"1GiB\"\nseed = \"abc\"", "[device] seed: cannot read \"abc\" as a seed");
        error(
            &format!("{BASE}\n[write_buffer]\npartial_flush = \"32MiB\""),
            "[write_buffer] partial_flush 32MiB is more than the buffer's capacity 16MiB",
        );
        error(&format!("{BASE}\n[write_buffer]\nparallelism = 0"), "[write_buffer] parallelism = 0 must be at least 1");
        error(
            &format!("{BASE}\n[write_buffer]\nserialize_when_idle = 1"),
            "[write_buffer] serialize_when_idle: expected true or false",
        );
        error(
            &format!("{BASE}\n[slc_cache]\ncapacity = \"2GiB\""),
            "[slc_cache] capacity 2GiB is more than the device's capacity 1GiB",
        );
        error(
            &format!("{BASE}\n[ftl]\nmapping_cache = \"some\""),
            "[ftl] mapping_cache: cannot read \"some\" as a size",
        );
        error(
            &format!("{BASE}\n[nand]\nread_latency = {{ L = \"45us\", X = \"1us\" }}"),
            "unknown key [nand] read_latency.X",
        );
        error(
            &format!("{BASE}\n[nand]\nread_latency = {{ L = \"45\" }}"),
            "[nand] read_latency.L: cannot read \"45\" as a time",
        );
        error(
            &format!("{BASE}\n[nand]\nchannel_rate = \"0MB/s\""),
            "[nand] channel_rate = 0MB/s must be more than 0B/s",
        );
        error(
            &format!("{BASE}\n[controller]\nhost_rate = \"0MB/s\""),
            "[controller] host_rate = 0MB/s must be more than 0B/s",
        );
        error(
            &format!(
                "{BASE}\n[quirks]\nread_size_penalties = [{{ min = \"20KiB\", max = \"17KiB\", extra = \"50us\" }}]"
            ),
            "[quirks] read_size_penalties[0]: min 20KiB is more than max 17KiB",
        );
        error(
            &format!("{BASE}\n[quirks]\nread_size_penalties = [{{ min = \"1KiB\", max = \"2KiB\" }}]"),
            "[quirks] read_size_penalties[0].extra: missing",
        );
        error(&format!("{BASE}\n[quirks]\nread_size_penalties = [{{ min = \"1KiB\", max = \"2KiB\", extra = \"1us\", why = 1 }}]"), "unknown key [quirks] read_size_penalties[0].why");
        error(
            &format!("{BASE}\n[quirks]\nread_size_penalties = {{ min = 1 }}"),
            "[quirks] read_size_penalties: expected an array",
        );
        error("device = 3", "[device] must be a section [device], found the integer 3");
        let hdd = "[device]\nkind = \"hdd\"\ncapacity = \"2TB\"\n[hdd]\n";
        error(&format!("{hdd}average_seek = \"20ms\""), "[hdd] seeks must grow with distance");
        error(&format!("{hdd}outer_rate = \"50MB/s\""), "[hdd] outer_rate 50MB/s is slower than inner_rate 100MB/s");
        error(&format!("{hdd}rpm = 0"), "[hdd] rpm = 0 must be at least 1");
        error(&format!("{hdd}cache = true"), "[hdd] cache: expected a size");
        let msg = error("[device]\ncapacity = \"1GiB\"\nname = \"unterminated\n", "invalid TOML at line 3, column");
        assert!(msg.starts_with("invalid TOML"), "{msg}");
    }

    #[test]
    fn out_of_range_values_name_the_key_and_the_range() {
        error(
            &format!("{BASE}\n[nand]\nerase_latency = \"-3ms\""),
            "[nand] erase_latency: \"-3ms\" must not be negative (a time of 0 or more)",
        );
        error(
            &format!("{BASE}\n[read_buffer]\ncapacity = \"-1MiB\""),
            "[read_buffer] capacity: \"-1MiB\" must not be negative",
        );
        error(
            "[device]\ncapacity = \"1GiB\"\nover_provisioning = 4.5",
            "[device] over_provisioning = 4.5 must be between 0 and 4",
        );
        error("[device]\ncapacity = \"1GiB\"\nover_provisioning = nan", "[device] over_provisioning = nan must be");
        error("[device]\ncapacity = 0", "[device] capacity = 0 must be more than 0B");
    }

    #[test]
    fn noise_thermal_and_faults_sections() {
        let cfg = with(
            "[noise]\nlatency_cv = 0.1\nhost_jitter = \"3us\"\nread_retry_rate = 0.002\nbackground_interval = \"20ms\"\n\
             background_busy = \"1ms\"\nstall_rate = 0.0001\nstall_latency = \"3ms\"\n\
             [thermal]\nambient = \"35C\"\nheat_per_gb = \"0.5C\"\ncooling = \"0.2C/s\"\nthrottle_above = \"70C\"\nthrottle_factor = 2.0\n\
             [faults]\nmedia_error_rate = 0.0\nbad_ranges = [ { start = \"512MiB\", length = \"4KiB\" } ]\n\
             stop_responding_after = \"inf\"\nlost_command_rate = 0.0",
        )
        .unwrap();
        let n = cfg.noise.as_ref().unwrap();
        assert_eq!((n.latency_cv, n.host_jitter, n.background_interval), (0.1, Nanos(3_000), Some(Nanos(20_000_000))));
        let t = cfg.thermal.as_ref().unwrap();
        assert_eq!((t.ambient, t.heat_per_gb, t.cooling, t.throttle_above, t.hysteresis), (35.0, 0.5, 0.2, 70.0, 5.0));
        let f = cfg.faults.as_ref().unwrap();
        assert_eq!(f.bad_ranges, vec![crate::config::ByteRange { start: 512 << 20, length: 4096 }]);
        assert_eq!(f.stop_responding_after, None);
        let written = to_toml(&cfg);
        assert!(written.contains("[noise]") && written.contains("cooling = \"0.2C/s\""), "{written}");
        assert_eq!(parse_device(&written).unwrap(), cfg);
        // Absent sections stay absent.
        let plain = with("").unwrap();
        assert_eq!((&plain.noise, &plain.thermal, &plain.faults), (&None, &None, &None));
        assert!(!to_toml(&plain).contains("[noise]"));

        error(&format!("{BASE}\n[noise]\nlatency_cv = 3"), "[noise] latency_cv = 3 must be between 0 and 2");
        error(
            &format!("{BASE}\n[noise]\nread_retry_rate = 1.5"),
            "[noise] read_retry_rate = 1.5 must be between 0 and 1",
        );
        error(
            &format!("{BASE}\n[noise]\nhost_jitter = \"-3us\""),
            "[noise] host_jitter: \"-3us\" must not be negative",
        );
        error(
            &format!("{BASE}\n[noise]\nbackground_interval = \"0ms\""),
            "[noise] background_interval = 0ms must be more than 0us",
        );
        error(
            &format!("{BASE}\n[noise]\nlatency_vc = 0.1"),
            "unknown key [noise] latency_vc (did you mean latency_cv?)",
        );
        error(
            &format!("{BASE}\n[faults]\nlost_command_rate = 2"),
            "[faults] lost_command_rate = 2 must be between 0 and 1",
        );
        error(&format!("{BASE}\n[thermal]\nambient = \"hot\""), "[thermal] ambient: cannot read \"hot\" as degrees");
        error(
            &format!("{BASE}\n[thermal]\nthrottle_factor = 0.5"),
            "[thermal] throttle_factor = 0.5 must be between 1 and 100",
        );
        error(
            &format!("{BASE}\n[thermal]\nthrottle_above = \"20C\""),
            "[thermal] throttle_above 20C is below ambient 35C",
        );
        error(
            &format!("{BASE}\n[faults]\nbad_ranges = [ {{ start = \"2GiB\", length = \"4KiB\" }} ]"),
            "[faults] bad_ranges[0] = 2GiB + 4KiB must be a non-empty range inside the capacity 1GiB",
        );
        error(&format!("{BASE}\n[faults]\nbad_ranges = [ {{ start = 0 }} ]"), "[faults] bad_ranges[0].length: missing");
        error(
            "[device]\nkind = \"hdd\"\ncapacity = \"2TB\"\n[hdd]\n[noise]\nlatency_cv = 0.1",
            "[noise] this section is modelled for SSDs only",
        );
    }

    #[test]
    fn the_key_table_documents_every_known_key() {
        let docs = key_docs();
        let known: Vec<(&str, &str)> =
            SECTIONS.iter().flat_map(|(section, keys)| keys.iter().map(move |k| (*section, *k))).collect();
        let documented: Vec<(&str, &str)> = docs.iter().map(|d| (d.section, d.key)).collect();
        assert_eq!(known, documented);
        assert!(docs.iter().all(|d| !d.doc.is_empty() && !d.default.is_empty()));
        let page_size = docs.iter().find(|d| d.key == "page_size").unwrap();
        assert_eq!(
            (page_size.kind, page_size.default.as_str(), page_size.range.as_str()),
            ("size", "\"4KiB\"", "more than 0B")
        );
        // Every section writes exactly its known keys, in order.
        for text in [
            "[device]\nkind = \"hdd\"\ncapacity = \"2TB\"\n[hdd]",
            "[device]\ncapacity = \"2TB\"\n[noise]\n[thermal]\n[faults]",
        ] {
            let written = to_toml(&parse_device(text).unwrap());
            let mut keys_written = Vec::new();
            let mut sections = Vec::new();
            for line in written.lines() {
                if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                    sections.push(SECTIONS.iter().find(|(s, _)| *s == name).unwrap().0);
                } else if let Some((key, _)) = line.split_once(" = ") {
                    keys_written.push((*sections.last().unwrap(), key));
                }
            }
            let expected: Vec<(&str, &str)> = known.iter().filter(|(s, _)| sections.contains(s)).copied().collect();
            assert_eq!(keys_written, expected);
        }
    }

    #[test]
    fn key_paths() {
        let e = with("[write_buffer]\ncapacity = \"x\"").unwrap_err();
        assert_eq!(e.key_path().as_deref(), Some("write_buffer.capacity"));
        let e = parse_device("[device]\ncapacity = \"1GiB\"\n[mapping]\nstripe_width = 999").unwrap_err();
        assert_eq!(e.key_path().as_deref(), Some("mapping.stripe_width"));
        let e = with("[write_buffer]\ncapactiy = 1").unwrap_err();
        assert_eq!(e.key_path().as_deref(), Some("write_buffer.capactiy"));
    }

    #[test]
    fn round_trip_of_a_config_using_every_feature() {
        let text = r#"
[device]
name = "every \"feature\""
capacity = "40GB"
over_provisioning = 0.125
seed = "18446744073709551615"
description = """two
lines, a tab\t, a backslash \\ and ünïcödé"""

[geometry]
channels = 4
chips_per_channel = 3
planes_per_chip = 2
page_size = "8KiB"
pages_per_block = 192

[mapping]
chunk_size = "24KiB"
stripe_width = 22
channel_groups = 2

[nand]
cell = "tlc"
page_pattern = "64KiB:L, 16KiB:M, 2M 2H"
read_latency = { L = "50.5us", M = "70us", H = "0.1ms" }
program_latency = "1ms"
erase_latency = "3.25ms"
channel_rate = "666.5MB/s"

[read_buffer]
capacity = "3MB"

[write_buffer]
capacity = "40.25MiB"
capacity_ios = 1280
partial_flush = "5.75MiB"
parallelism = 8
idle_flush_window = "inf"
serialize_when_idle = true
second_level = "126.5MiB"
second_level_idle_flush_window = "2.5s"
second_level_rate = "1.5GiB/s"
second_level_capacity_ios = 77

[slc_cache]
capacity = "1.5GB"
fold_rate = "123B/s"

[ftl]
mapping_cache = "3MiB"
map_miss_latency = "65us"
gc_free_block_threshold = 0.1

[quirks]
unaligned_size_penalty = "200us"
read_size_penalties = [{ min = "17KiB", max = "20KiB", extra = "50us" }, { min = 1, max = 2, extra = "1ns" }]
low_load_penalty = "20us"

[controller]
command_overhead = "1.5us"
host_rate = "7.877GB/s"
buffer_insert_latency = "90us"
ram_read_latency = "40us"
"#;
        let cfg = parse_device(text).unwrap();
        assert_eq!(cfg.device.seed, u64::MAX);
        assert!(cfg.device.description.contains("two\nlines"));
        let written = to_toml(&cfg);
        assert!(!written.contains('#'), "no comments");
        assert_eq!(parse_device(&written).unwrap(), cfg, "{written}");
        assert_eq!(to_toml(&parse_device(&written).unwrap()), written, "writing is stable");

        let mut cfg = cfg;
        cfg.slc_cache.fold_rate = Rate(0.1 + 0.2);
        assert_eq!(parse_device(&to_toml(&cfg)).unwrap(), cfg);
    }

    #[test]
    fn load_device_names_the_file() {
        let dir = std::env::temp_dir().join(format!("ftlscope-parse-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let good = dir.join("my-drive.toml");
        fs::write(&good, "[device]\ncapacity = \"1GiB\"\n").unwrap();
        assert_eq!(load_device(&good).unwrap().device.name, "my-drive", "the name defaults to the file stem");
        let bad = dir.join("bad.toml");
        fs::write(&bad, "[device]\ncapacity = \"1GiB\"\n[mapping]\nstripe_width = 999\n").unwrap();
        let msg = load_device(&bad).unwrap_err().to_string();
        assert!(msg.contains("bad.toml: [mapping] stripe_width = 999"), "{msg}");
        let missing = load_device(&dir.join("absent.toml")).unwrap_err();
        assert!(matches!(missing, ConfigError::Io { .. }));
        assert!(missing.to_string().starts_with("cannot read "), "{missing}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
