//! Ready-made devices, embedded in the binary: every SSD of the Kelpie study (seed 003, Table 4) whose row the
//! configuration can express, three modern consumer drives shaped like seed 000's, two fitted to the published
//! measurements of seed 000's Gigabyte drive and seed 001's PM981, and two hard disks.
//! docs/presets.md lists each preset's ten properties beside the paper's row and every assumption made.

use crate::config::{Cell, DeviceConfig, DeviceKind, MappingCache};
use crate::parse::{format_rate, format_size, format_time, format_window, parse_device, ConfigError};

/// The preset `ftlscope profile` targets when no device is named.
pub const DEFAULT: &str = "consumer-tlc-dram";

macro_rules! presets {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../presets/", $name, ".toml")))),*]
    };
}

/// Name and TOML text of every preset, in the order [`names`] lists them.
const PRESETS: &[(&str, &str)] = presets![
    "consumer-tlc-dram",
    "consumer-tlc-hmb",
    "optane-like",
    "hdd-7200-consumer",
    "hdd-15k-enterprise",
    // Seed 003 Table 4, in the table's order.
    "kelpie-n1.6t-s",
    "kelpie-n500g-s",
    "kelpie-n128g-s",
    "kelpie-n2t-i",
    "kelpie-n1.6t-i",
    "kelpie-n1t-i",
    "kelpie-n1.6t-w",
    "kelpie-n1.6t-m",
    "kelpie-a1.6t-p",
    "kelpie-a960g-ps",
    "kelpie-a960g-pt",
    "kelpie-a800g-p",
    "kelpie-a800g-g",
    "kelpie-a200g-h",
    "kelpie-t480g-s",
    "kelpie-t200g-s",
    "kelpie-t128g-s",
    "kelpie-t100g-s",
    "kelpie-t64g-s",
    "kelpie-t64g-i",
    "kelpie-t200g-m",
    // Fitted to the drives of seed 000 and seed 001 that had no preset (docs/presets.md).
    "gigabyte-nvme-256g",
    "pm981-256g",
];

/// Every preset name: the consumer drives and disks first, then the Kelpie drives in Table 4's order, then the
/// drives fitted to published measurements.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// The TOML text of a preset.
pub fn get(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// A preset, parsed.
pub fn load(name: &str) -> Result<DeviceConfig, ConfigError> {
    let text =
        get(name).ok_or_else(|| ConfigError::UnknownPreset { name: name.to_string(), known: names().join(", ") })?;
    parse_device(text)
}

/// One line about a preset: what it is, then its main parameters. None for an unknown name.
pub fn describe(name: &str) -> Option<String> {
    load(name).ok().map(|cfg| summary(&cfg))
}

/// One line about any device: its name, the first sentence of its description, and its main parameters.
pub fn summary(cfg: &DeviceConfig) -> String {
    let d = &cfg.device;
    let headline = d.description.split(". ").next().unwrap_or("").trim_end_matches('.');
    let params = match (&d.kind, &cfg.hdd) {
        (DeviceKind::Hdd, Some(h)) => format!(
            "{} HDD, {} rpm, seek {}/{}/{}, {}..{}, cache {}",
            format_size(d.capacity),
            h.rpm,
            format_time(h.track_to_track_seek),
            format_time(h.average_seek),
            format_time(h.full_stroke_seek),
            format_rate(h.outer_rate),
            format_rate(h.inner_rate),
            format_size(h.cache)
        ),
        _ => {
            let p = properties(cfg);
            let mut s = format!(
                "{} {} SSD, page {}, chunk {} x {}, {} layout, write buffer {}, parallelism {}, window {}",
                format_size(d.capacity),
                p[1],
                p[0],
                p[2],
                p[3],
                p[4],
                p[7],
                p[8],
                p[9]
            );
            if cfg.read_buffer.capacity > 0 {
                s.push_str(&format!(", read buffer {}", p[6]));
            }
            if cfg.slc_cache.capacity > 0 {
                s.push_str(&format!(", SLC cache {}", format_size(cfg.slc_cache.capacity)));
            }
            if let MappingCache::Bytes(b) = cfg.ftl.mapping_cache {
                s.push_str(&format!(", mapping cache {}", format_size(b)));
            }
            if p[5] != "✓" {
                s.push_str(&format!(", reads {}", p[5]));
            }
            s
        }
    };
    if headline.is_empty() {
        format!("{}: {params}", d.name)
    } else {
        format!("{}: {headline} ({params})", d.name)
    }
}

/// The ten properties of seed 003 (P1..P10) as the configuration fixes them, in Table 4's notation:
/// `"4KiB"`, `"MLC 4L 2H"`, `"64KiB"`, `"186"`, `"12×16"`, `"✓"` or `"✗ (...)"`, `"—"` or a size,
/// `"11.5MiB p 3MiB | 406MiB †1280"`, `"4✗"`, `"200ms | 2.5s"`. These are the ground truth probes are
/// checked against.
pub fn properties(cfg: &DeviceConfig) -> [String; 10] {
    let g = &cfg.geometry;
    let n = &cfg.nand;
    let w = &cfg.write_buffer;
    let q = &cfg.quirks;
    let cell = match n.cell {
        Cell::Slc => "SLC",
        Cell::Mlc => "MLC",
        Cell::Tlc => "TLC",
        Cell::Qlc => "QLC",
    };
    let p2 = if n.cell == Cell::Slc && n.page_pattern.text == "L" {
        cell.to_string()
    } else {
        format!("{cell} {}", n.page_pattern.text)
    };
    let mut notes = Vec::new();
    if g.planes_per_chip > 1 {
        notes.push(format!("{} planes", g.planes_per_chip));
    }
    if cfg.mapping.channel_groups > 0 {
        notes.push(format!("{} channel groups", cfg.mapping.channel_groups));
    }
    let mut p5 = format!("{}×{}", g.channels, g.chips_per_channel);
    if !notes.is_empty() {
        p5.push_str(&format!(" ({})", notes.join(", ")));
    }
    let mut bad = Vec::new();
    if q.unaligned_size_penalty.0 > 0 {
        bad.push(format!("+{} unless a multiple of the page", format_time(q.unaligned_size_penalty)));
    }
    for p in &q.read_size_penalties {
        bad.push(format!("+{} for {}-{}", format_time(p.extra), format_size(p.min), format_size(p.max)));
    }
    let p6 = if bad.is_empty() { "✓".to_string() } else { format!("✗ ({})", bad.join(", ")) };
    let p7 = if cfg.read_buffer.capacity == 0 { "—".to_string() } else { format_size(cfg.read_buffer.capacity) };
    let p8 = if w.capacity == 0 {
        "— (write-through)".to_string()
    } else {
        let mut s = format_size(w.capacity);
        if w.partial_flush > 0 {
            s.push_str(&format!(" p {}", format_size(w.partial_flush)));
        }
        if w.capacity_ios > 0 {
            s.push_str(&format!(" or {} writes", w.capacity_ios));
        }
        if w.second_level > 0 {
            s.push_str(&format!(" | {}", format_size(w.second_level)));
            if w.second_level_capacity_ios > 0 {
                s.push_str(&format!(" †{}", w.second_level_capacity_ios));
            }
        }
        s
    };
    let p9 = format!("{}{}", w.parallelism, if w.serialize_when_idle { "✗" } else { "" });
    let window = |x: Option<_>| {
        if x.is_none() {
            "∞".to_string()
        } else {
            format_window(x)
        }
    };
    let p10 = if w.capacity == 0 {
        "—".to_string()
    } else if w.second_level > 0 {
        format!("{} | {}", window(w.idle_flush_window), window(w.second_level_idle_flush_window))
    } else {
        window(w.idle_flush_window)
    };
    [
        format_size(g.page_size),
        p2,
        format_size(cfg.mapping.chunk_size),
        cfg.mapping.stripe_width.to_string(),
        p5,
        p6,
        p7,
        p8,
        p9,
        p10,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::to_toml;

    /// Seed 003 Table 4, transcribed a second time (independently of the preset files): the paper's label,
    /// its row as printed, and the properties the preset must have in [`properties`]' notation. `*` = the
    /// paper gives no value the configuration can hold (an assumption, see docs/presets.md); a trailing `*`
    /// = the value must start with what precedes it.
    const TABLE_4: &[(&str, &str, [&str; 10], [&str; 10])] = &[
        (
            "kelpie-n1.6t-s",
            "N1.6TS",
            ["4K", "MLC 4L 2H", "4K", "124", "16×8", "✓", "—", "40.25M p", "8", "50ms"],
            ["4KiB", "MLC 4L 2H", "4KiB", "124", "16×8*", "✓", "—", "40.25MiB p 5.75MiB", "8", "50ms"],
        ),
        (
            "kelpie-n500g-s",
            "N500GS",
            ["4K", "MLC 4L 2H", "4K", "64", "4×16", "✓", "—", "2M", "1", "4ms"],
            ["4KiB", "MLC 4L 2H", "4KiB", "64", "4×16", "✓", "—", "2MiB", "1", "4ms"],
        ),
        (
            "kelpie-n128g-s",
            "N128GS",
            ["4K", "MLC 4L 2H", "4K", "32", "16×2", "✓", "—", "1M", "1", "2ms"],
            ["4KiB", "MLC 4L 2H", "4KiB", "32", "16×2*", "✓", "—", "1MiB", "1", "2ms"],
        ),
        (
            "kelpie-n2t-i",
            "N2TI",
            ["4K", "TLC", "64K", "186", "12×16", "✗", "—", "11.5M", "4", "200ms"],
            ["4KiB", "TLC 128KiB:L, 2M 2H", "64KiB", "186", "12×16", "✗*", "—", "11.5MiB", "4", "200ms"],
        ),
        (
            "kelpie-n1.6t-i",
            "N1.6TI",
            ["4K", "MLC 1L 1H", "128K", "122", "32×4", "✓", "—", "11.5M", "2", "10ms"],
            ["4KiB", "MLC 1L 1H", "128KiB", "122", "32×4", "✓", "—", "11.5MiB", "2", "10ms"],
        ),
        (
            "kelpie-n1t-i",
            "N1TI",
            ["4K", "TLC", "256K", "?", "?", "✗", "—", "11M p", "2", "3ms"],
            ["4KiB", "TLC*", "256KiB", "*", "*", "✗*", "—", "11MiB p 3MiB", "2", "3ms"],
        ),
        (
            "kelpie-n1.6t-w",
            "N1.6TW",
            ["4K", "MLC 1L 1H", "64K", "124", "16×8", "✗", "—", "NB+P", "4✗", "—"],
            ["4KiB", "MLC 1L 1H", "64KiB", "124", "16×8", "✗*", "—", "*", "4✗", "*"],
        ),
        (
            "kelpie-n1.6t-m",
            "N1.6TM",
            ["4K", "MLC 1L 1H", "128K", "128", "16×8", "✓", "—", "15M", "4", "∞"],
            ["4KiB", "MLC 1L 1H", "128KiB", "128", "16×8", "✓", "—", "15MiB", "4", "∞"],
        ),
        (
            "kelpie-a1.6t-p",
            "A1.6TP",
            ["4K", "TLC", "16K", "247", "16×16", "✓", "—", "NB+P", "4✗", "—"],
            ["4KiB", "TLC*", "16KiB", "247", "16×16", "✓", "—", "*", "4✗", "*"],
        ),
        (
            "kelpie-a960g-ps",
            "A960GPS",
            ["4K", "MLC 4L 4H", "4K", "64", "32×2", "✓", "—", "NB+P", "4✗", "—"],
            ["4KiB", "MLC 4L 4H", "4KiB", "64", "32×2*", "✓", "—", "*", "4✗", "*"],
        ),
        (
            "kelpie-a960g-pt",
            "A960GPT",
            ["4K", "MLC 1L 1H", "16K", "200", "20×10", "✓", "—", "11.5M p | 406M", "4✗", "200ms | 2.5s"],
            ["4KiB", "MLC 1L 1H", "16KiB", "200", "20×10", "✓", "—", "11.5MiB p 7.5MiB | 406MiB", "4✗", "200ms | 2.5s"],
        ),
        (
            "kelpie-a800g-p",
            "A800GP",
            ["8K", "MLC 1L 1H", "32K", "128", "16×8", "✓", "16M", "2M | 512M", "4", "∞"],
            ["8KiB", "MLC 1L 1H", "32KiB", "128", "16×8", "✓", "16MiB", "2MiB | 512MiB", "4", "∞ | ∞"],
        ),
        (
            "kelpie-a800g-g",
            "A800GG",
            ["4K", "MLC 1L 1H", "64K", "30", "8×4", "✓", "—", "3.75M", "2", "30ms"],
            ["4KiB", "MLC 1L 1H", "64KiB", "30", "8×4", "✓", "—", "3.75MiB", "2", "30ms"],
        ),
        (
            "kelpie-a200g-h",
            "A200GH",
            ["8K", "SLC", "8K", "253", "16×16", "✓", "—", "20M | 126.5M †", "1", "∞"],
            ["8KiB", "SLC", "8KiB", "253", "16×16", "✓", "—", "20MiB | 126.5MiB †1280", "1", "∞ | ∞"],
        ),
        (
            "kelpie-t480g-s",
            "T480GS",
            ["4K", "MLC 4L 4H", "4K", "16", "8×2", "✓", "—", "2M | 256M", "1", "10ms | 5s"],
            ["4KiB", "MLC 4L 4H", "4KiB", "16", "8×2", "✓", "—", "2MiB | 256MiB", "1", "10ms | 5s"],
        ),
        (
            "kelpie-t200g-s",
            "T200GS",
            ["8K", "SLC", "8K", "64", "8×8", "✓", "—", "1M", "1", "35ms"],
            ["8KiB", "SLC", "8KiB", "64", "8×8", "✓", "—", "1MiB", "1", "35ms"],
        ),
        (
            "kelpie-t128g-s",
            "T128GS",
            ["4K", "MLC 4L 4H", "4K", "32", "16×2", "✓", "—", "1M", "1", "2ms"],
            ["4KiB", "MLC 4L 4H", "4KiB", "32", "16×2", "✓", "—", "1MiB", "1", "2ms"],
        ),
        (
            "kelpie-t100g-s",
            "T100GS",
            ["8K", "SLC", "8K", "8", "8×1", "✓", "—", "512K", "1", "40ms"],
            ["8KiB", "SLC", "8KiB", "8", "8×1", "✓", "—", "512KiB", "1", "40ms"],
        ),
        (
            "kelpie-t64g-s",
            "T64GS",
            ["16K", "SLC", "—", "1", "1×1", "✓", "—", "4M", "2", "∞"],
            ["16KiB", "SLC", "*", "1", "1×1", "✓", "—", "4MiB", "2", "∞"],
        ),
        (
            "kelpie-t64g-i",
            "T64GI",
            ["4K", "SLC", "4K", "20", "10×2", "✓", "—", "10M p | 810M", "1", "300ms | ∞"],
            ["4KiB", "SLC", "4KiB", "20", "10×2", "✓", "—", "10MiB p 4MiB | 810MiB", "1", "300ms | ∞"],
        ),
        (
            "kelpie-t200g-m",
            "T200GM",
            ["4K", "SLC", "4K", "128", "8×16", "✓", "—", "64M", "1", "1s"],
            ["4KiB", "SLC", "4KiB", "128", "8×16", "✓", "—", "64MiB", "1", "1s"],
        ),
    ];

    #[test]
    fn every_preset_parses_round_trips_and_is_named_after_itself() {
        let all = names();
        assert_eq!(all.len(), 28);
        for name in &all {
            let cfg = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(cfg.device.name, *name);
            assert!(!cfg.device.description.is_empty(), "{name} has no description");
            let text = to_toml(&cfg);
            assert_eq!(parse_device(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}")), cfg, "{name}");
            let line = describe(name).unwrap();
            assert!(!line.contains('\n') && line.starts_with(&format!("{name}: ")), "{line}");
        }
        let mut sorted = all.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len(), "names are unique");
    }

    #[test]
    fn default_and_named_presets_exist() {
        for name in [
            DEFAULT,
            "consumer-tlc-dram",
            "consumer-tlc-hmb",
            "optane-like",
            "hdd-7200-consumer",
            "hdd-15k-enterprise",
            "kelpie-n1.6t-s",
            "kelpie-n500g-s",
            "kelpie-n128g-s",
            "kelpie-n2t-i",
            "kelpie-n1.6t-i",
            "kelpie-a800g-p",
            "kelpie-t480g-s",
        ] {
            assert!(get(name).is_some(), "{name}");
        }
        assert_eq!(names().iter().filter(|n| n.starts_with("kelpie-")).count(), TABLE_4.len());
        assert_eq!(get("nope"), None);
        assert_eq!(describe("nope"), None);
        let e = load("nope").unwrap_err().to_string();
        assert!(e.starts_with("unknown preset \"nope\" (presets: consumer-tlc-dram, ") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn kelpie_presets_hold_table_4() {
        for (name, label, _, expected) in TABLE_4 {
            let cfg = load(name).unwrap();
            let got = properties(&cfg);
            for (i, (want, have)) in expected.iter().zip(&got).enumerate() {
                let ok = match want.strip_suffix('*') {
                    Some("") => true,
                    Some(prefix) => have.starts_with(prefix),
                    None => have == want,
                };
                assert!(ok, "{name} ({label}) P{}: preset has {have:?}, Table 4 says {want:?}", i + 1);
            }
        }
    }

    #[test]
    fn consumer_drives_and_disks() {
        let dram = load("consumer-tlc-dram").unwrap();
        assert_eq!(dram.ftl.mapping_cache, MappingCache::Full);
        // "What does the Flash Translation Layer do?" §5.4: the write cliffs after 14.7GiB (970 EVO Plus) and
        // 42.5GiB (NV2), which it reads as SLC caches of about 5 % and 15 % of the drives.
        let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
        let cliff = gib(dram.slc_cache.capacity);
        assert!((cliff - 14.7).abs() < 0.5, "SLC cache {cliff} GiB");
        let hmb = load("consumer-tlc-hmb").unwrap();
        assert!(matches!(hmb.ftl.mapping_cache, MappingCache::Bytes(b) if b < 16 << 20));
        assert!(hmb.ftl.write_map_lookup, "a DRAM-less drive's writes need their mapping entries too");
        // "SSD Performance Report" Table 3: 4KiB random writes at 112-114K IOPS from QD 64 to 1024, per command.
        let writes_per_s = hmb.controller.cores as f64 * 1e9 / hmb.controller.write_command_time.0 as f64;
        assert!((writes_per_s - 114e3).abs() < 2e3, "{writes_per_s} writes/s");
        // Table 1: 4KiB random reads at 161-175K IOPS from QD 64 to 1024: a read command and its one sense.
        let read_ns = (hmb.controller.read_command_time.0 + hmb.controller.sense_command_time.0) as f64;
        let reads_per_s = hmb.controller.cores as f64 * 1e9 / read_ns;
        assert!((161e3..=180e3).contains(&reads_per_s), "{reads_per_s} reads/s");
        // The NV2 folds while it writes: its cache fills by the share of each write that folding does not free.
        // Folding by valid data, a fresh fill's cache holds U after W written with dU/dW = 1 - f U / C, so it is
        // full after W = -(C / f) ln(1 - f); at the full rate from the start after C / (1 - f).
        let (capacity, f) = (gib(hmb.slc_cache.capacity), hmb.slc_cache.fold_while_writing);
        let cliff = if hmb.slc_cache.fold_by_valid { -capacity / f * (1.0 - f).ln() } else { capacity / (1.0 - f) };
        assert!((cliff - 42.5).abs() < 1.5, "cliff after {cliff} GiB");
        let optane = load("optane-like").unwrap();
        assert_eq!((optane.write_buffer.capacity, optane.slc_cache.capacity), (0, 0));
        assert_eq!(optane.nand.cell, Cell::Slc);
        // One processor spaces the reads; the media read stays longer, so reads of one partition still queue
        // (the page-size and stripe probes time that).
        assert_eq!(optane.controller.cores, 1);
        assert!(optane.nand.read_latency.l > optane.controller.read_command_time);
        for name in ["hdd-7200-consumer", "hdd-15k-enterprise"] {
            let cfg = load(name).unwrap();
            assert_eq!(cfg.device.kind, DeviceKind::Hdd);
            assert!(cfg.hdd.is_some());
        }
    }

    #[test]
    fn fitted_drives_hold_their_published_numbers() {
        // "What does the Flash Translation Layer do?" §5.4: the Gigabyte's write cliff after 14.5GiB; it has no DRAM.
        let gigabyte = load("gigabyte-nvme-256g").unwrap();
        let cliff_gib = gigabyte.slc_cache.capacity as f64 / (1u64 << 30) as f64;
        assert!((cliff_gib - 14.5).abs() < 0.1, "SLC cache {cliff_gib} GiB");
        assert!(matches!(gigabyte.ftl.mapping_cache, MappingCache::Bytes(_)));
        // "SSD Performance Profiling": a DRAM drive.
        let pm981 = load("pm981-256g").unwrap();
        assert_eq!(pm981.ftl.mapping_cache, MappingCache::Full);
        for cfg in [&gigabyte, &pm981] {
            assert_eq!(cfg.device.capacity, 256_000_000_000);
        }
    }

    #[test]
    fn only_the_drives_that_claim_real_ones_carry_noise() {
        // Noise fitted to published percentiles (docs/presets.md) on the presets that name real drives; the
        // Kelpie presets keep their Table 4 timing exactly, and consumer-tlc-dram stays noise-free (its
        // completion times were the checksum of examples/gc_speed.rs, which now runs on a frozen copy of it).
        let noisy = ["pm981-256g", "consumer-tlc-hmb", "gigabyte-nvme-256g", "optane-like"];
        for name in names() {
            let cfg = load(name).unwrap();
            assert_eq!(cfg.noise.is_some(), noisy.contains(&name), "{name}: [noise]");
            assert!(cfg.thermal.is_none() && cfg.faults.is_none(), "{name}: [thermal] or [faults]");
        }
        // Any NAND time spread makes the page-type probe (P2) misread pm981-256g: its noise has none.
        let pm981 = load("pm981-256g").unwrap().noise.unwrap();
        assert_eq!(pm981.latency_cv, 0.0);
        assert!(pm981.host_jitter.0 > 0 && pm981.read_retry_rate > 0.0 && pm981.stall_rate > 0.0);
    }

    /// The preset table of docs/presets.md, as the presets make it.
    fn docs_table() -> String {
        let mut out = String::from(
            "| preset | source | P1 page | P2 type | P3 chunk | P4 stripe | P5 layout | P6 reads | P7 rbuf | P8 wbuf | \
             P9 par. | P10 window |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        );
        let row = |out: &mut String, name: &str, source: &str, cells: &[String]| {
            let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
            out.push_str(&format!("| {name} | {source} | {} |\n", cells.join(" | ")));
        };
        for name in names() {
            let cfg = load(name).unwrap();
            if cfg.device.kind == DeviceKind::Hdd {
                continue;
            }
            match TABLE_4.iter().find(|(n, ..)| *n == name) {
                Some((_, label, paper, _)) => {
                    let paper: Vec<String> = paper.iter().map(|s| s.to_string()).collect();
                    row(&mut out, &format!("`{name}`"), "preset", &properties(&cfg));
                    row(&mut out, "", &format!("paper {label}"), &paper);
                }
                None => row(&mut out, &format!("`{name}`"), "preset", &properties(&cfg)),
            }
        }
        out
    }

    #[test]
    fn docs_list_every_preset_with_its_properties() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/presets.md");
        let Ok(docs) = std::fs::read_to_string(&path) else {
            eprintln!("skipped: {} is not there (crate built outside the repository)", path.display());
            return;
        };
        let table = docs_table();
        assert!(docs.contains(&table), "docs/presets.md is out of date; its table should read:\n{table}");
        for name in names() {
            assert!(docs.contains(&format!("`{name}`")), "docs/presets.md does not mention {name}");
        }
    }
}
