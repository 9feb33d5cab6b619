//! Device health during a run.
//!
//! A [`HealthSampler`] thread records a [`HealthSample`] every few seconds
//! from a [`HealthSource`]:
//!
//! * NVMe: the SMART / Health log (0x02) and, where the drive has it, the OCP
//!   SMART extended log (0xC0), whose physical media bytes written give true
//!   write amplification ([`HealthReport::write_amplification`]);
//! * other disks with an hwmon sensor (or NVMe without admin privileges):
//!   temperature only;
//! * anything else: [`Unavailable`], with the reason.
//!
//! [`open_health_source`] picks the source for a target path: a block device,
//! an NVMe controller character device, or a regular file (whose backing
//! device is found through `st_dev`).

mod hwmon;
mod nvme;

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use nvme::{decode_ocp_c0, decode_smart_log, OcpSmartLog, SmartLog, DATA_UNIT_BYTES, OCP_C0_GUID};

/// One health reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthSample {
    /// `CLOCK_MONOTONIC_RAW` nanoseconds when the sample was taken.
    pub t_ns: u64,
    /// "nvme-smart", "nvme-smart+ocp", "hwmon" or "sim".
    pub source: &'static str,
    pub temperature_c: Option<f64>,
    /// Host bytes read, from SMART data units (granularity 512 000 bytes).
    pub host_bytes_read: Option<u128>,
    /// Host bytes written, from SMART data units (granularity 512 000 bytes).
    pub host_bytes_written: Option<u128>,
    /// Bytes written to the media (OCP C0 physical media units written).
    pub media_bytes_written: Option<u128>,
    /// Bytes read from the media (OCP C0 physical media units read).
    pub media_bytes_read: Option<u128>,
    pub media_errors: Option<u128>,
    pub percentage_used: Option<u8>,
    pub critical_warning: Option<u8>,
    pub power_on_hours: Option<u128>,
    pub available_spare_pct: Option<u8>,
    pub unsafe_shutdowns: Option<u128>,
    /// Seconds spent above the warning temperature, throttled (NVMe: warning composite temperature time).
    pub thermal_throttle_s: Option<f64>,
}

impl HealthSample {
    /// A sample with every reading absent.
    pub fn new(t_ns: u64, source: &'static str) -> Self {
        HealthSample {
            t_ns,
            source,
            temperature_c: None,
            host_bytes_read: None,
            host_bytes_written: None,
            media_bytes_written: None,
            media_bytes_read: None,
            media_errors: None,
            percentage_used: None,
            critical_warning: None,
            power_on_hours: None,
            available_spare_pct: None,
            unsafe_shutdowns: None,
            thermal_throttle_s: None,
        }
    }
}

/// Why reading health failed.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "Get Log Page 0x{lid:02x} on {path}: NVMe status 0x{status:04x} ({})",
        nvme::nvme_status_name(*status)
    )]
    NvmeStatus { lid: u8, path: String, status: u32 },
    #[error("log page 0x{lid:02x} is {len} bytes, need {need}")]
    ShortPage { lid: u8, len: usize, need: usize },
    #[error("{0}")]
    Parse(String),
    #[error("{0}")]
    Other(String),
}

/// The target has no health source; `reason` says why, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unavailable {
    pub reason: String,
}

impl Unavailable {
    pub fn new(reason: impl Into<String>) -> Self {
        Unavailable { reason: reason.into() }
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device health not available: {}", self.reason)
    }
}

impl std::error::Error for Unavailable {}

/// Something that can take a health sample.
pub trait HealthSource: Send {
    fn sample(&mut self) -> Result<HealthSample, HealthError>;
    /// Same vocabulary as [`HealthSample::source`].
    fn name(&self) -> &'static str;
    /// What a reader of the report should know about this source, e.g. why
    /// it is degraded (temperature only, no OCP log). Goes into
    /// [`HealthReport::reason`].
    fn detail(&self) -> Option<String> {
        None
    }
}

// ---------------------------------------------------------------------------
// Choosing the source
// ---------------------------------------------------------------------------

/// Find the health source for `target_path`: a block device (a partition
/// stands for its disk, a single-disk device-mapper/md device for that disk),
/// an NVMe controller character device, or a regular file or directory (the
/// block device it lives on). NVMe is probed once here: the SMART log must be
/// readable, the OCP C0 log is optional.
pub fn open_health_source(target_path: &Path) -> Result<Box<dyn HealthSource>, Unavailable> {
    open_with_roots(target_path, &Roots::system())
}

/// Where sysfs, device nodes and the mount table are; tests use a fake tree.
struct Roots {
    sys: PathBuf,
    dev: PathBuf,
    mountinfo: PathBuf,
}

impl Roots {
    fn system() -> Self {
        Roots {
            sys: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
        }
    }
}

/// A whole disk, as found in sysfs.
#[derive(Debug, Clone, PartialEq)]
struct Disk {
    /// Kernel name, e.g. "nvme0n1".
    name: String,
    /// Its canonical sysfs directory (…/block/NAME).
    sys_dir: PathBuf,
    /// How the target led here, prefixed to reasons ("regular file on /dev/vda1").
    context: String,
}

#[derive(Debug)]
enum Target {
    Disk(Disk),
    NvmeCtrl { name: String, node: PathBuf, context: String },
}

fn open_with_roots(target: &Path, roots: &Roots) -> Result<Box<dyn HealthSource>, Unavailable> {
    match resolve(target, roots, 0)? {
        Target::Disk(d) => {
            let d = unstack(d, roots)?;
            open_disk(&d, roots)
        }
        Target::NvmeCtrl { name, node, context } => {
            open_nvme(&[node], &[roots.sys.join("class/nvme").join(&name)], roots)
                .map_err(|why| Unavailable::new(format!("{context}: {why}")))
        }
    }
}

fn resolve(target: &Path, roots: &Roots, depth: u32) -> Result<Target, Unavailable> {
    let shown = target.display();
    let meta = fs::metadata(target).map_err(|e| Unavailable::new(format!("cannot stat {shown}: {e}")))?;
    let ft = meta.file_type();
    if ft.is_block_device() {
        let (maj, min) = split_dev(meta.rdev());
        let (_, mut disk) = disk_from_devnum(roots, maj, min).ok_or_else(|| {
            Unavailable::new(format!(
                "{shown}: block device {maj}:{min} is not in {}",
                roots.sys.join("dev/block").display()
            ))
        })?;
        disk.context = shown.to_string();
        return Ok(Target::Disk(disk));
    }
    if ft.is_char_device() {
        return nvme_ctrl_from_char(target, meta.rdev(), roots);
    }
    if !(ft.is_file() || ft.is_dir()) {
        return Err(Unavailable::new(format!("{shown} is neither a file nor a device")));
    }
    let kind = if ft.is_dir() { "directory" } else { "regular file" };
    let (maj, min) = split_dev(meta.dev());
    if let Some((node, mut disk)) = disk_from_devnum(roots, maj, min) {
        disk.context = format!("{kind} on {}", roots.dev.join(node).display());
        return Ok(Target::Disk(disk));
    }
    // No block device behind st_dev (btrfs, tmpfs, overlay, NFS, FUSE…):
    // the mount table may still name one.
    let mount = fs::read_to_string(&roots.mountinfo).ok().and_then(|t| mount_for_devnum(&t, maj, min));
    match mount {
        Some(m) => {
            let context = format!("{kind} on {} {}", m.fstype, m.source);
            let source_is_block = fs::metadata(&m.source).is_ok_and(|s| s.file_type().is_block_device());
            if source_is_block && depth < 4 {
                match resolve(Path::new(&m.source), roots, depth + 1) {
                    Ok(Target::Disk(mut d)) => {
                        d.context = context;
                        Ok(Target::Disk(d))
                    }
                    Ok(other) => Ok(other),
                    Err(u) => Err(Unavailable::new(format!("{context}: {}", u.reason))),
                }
            } else {
                Err(Unavailable::new(format!(
                    "{kind} on {} ({}, device {maj}:{min}): no backing block device, so no device health log",
                    m.fstype, m.source
                )))
            }
        }
        None => Err(Unavailable::new(format!(
            "{kind} on device {maj}:{min}, which is not a block device and not in the mount table"
        ))),
    }
}

/// The disk for block device `maj:min`; also returns the node's own name
/// (the partition, for a partition).
fn disk_from_devnum(roots: &Roots, maj: u32, min: u32) -> Option<(String, Disk)> {
    let p = fs::canonicalize(roots.sys.join(format!("dev/block/{maj}:{min}"))).ok()?;
    let node = file_name(&p)?;
    let disk = disk_from_sys_dir(p)?;
    Some((node, disk))
}

/// The whole disk for a block device's sysfs directory (partitions live in
/// their disk's directory).
fn disk_from_sys_dir(p: PathBuf) -> Option<Disk> {
    let sys_dir = if p.join("partition").exists() { p.parent()?.to_path_buf() } else { p };
    Some(Disk { name: file_name(&sys_dir)?, sys_dir, context: String::new() })
}

fn nvme_ctrl_from_char(target: &Path, rdev: u64, roots: &Roots) -> Result<Target, Unavailable> {
    let (maj, min) = split_dev(rdev);
    let shown = target.display().to_string();
    let not_nvme = || Unavailable::new(format!("{shown} is a character device but not an NVMe controller"));
    let p = fs::canonicalize(roots.sys.join(format!("dev/char/{maj}:{min}"))).map_err(|_| not_nvme())?;
    let name = file_name(&p).ok_or_else(not_nvme)?;
    if is_nvme_ctrl(&name) {
        return Ok(Target::NvmeCtrl { name, node: target.to_path_buf(), context: shown });
    }
    // A generic namespace node (ngXnY) sits under its controller.
    match p.parent().and_then(file_name) {
        Some(ctrl) if is_nvme_ctrl(&ctrl) && name.starts_with("ng") => {
            Ok(Target::NvmeCtrl { node: roots.dev.join(&ctrl), name: ctrl, context: shown })
        }
        _ => Err(not_nvme()),
    }
}

/// Follow device-mapper / md devices down to a single underlying disk.
fn unstack(mut d: Disk, roots: &Roots) -> Result<Disk, Unavailable> {
    for _ in 0..8 {
        let slaves = list_names(&d.sys_dir.join("slaves"));
        let Some(first) = slaves.first() else {
            return Ok(d);
        };
        if slaves.len() > 1 {
            return Err(Unavailable::new(format!(
                "{}: {} is a {} device over {} disks ({}); health is per physical device, \
                 so point ftlscope at one of them",
                d.context,
                d.name,
                stacked_kind(&d.name),
                slaves.len(),
                slaves.join(", ")
            )));
        }
        let next =
            fs::canonicalize(roots.sys.join("class/block").join(first)).ok().and_then(disk_from_sys_dir).ok_or_else(
                || Unavailable::new(format!("{}: {} is stacked on {first}, which is not in sysfs", d.context, d.name)),
            )?;
        let context = format!("{}, {} -> {first}", d.context, d.name);
        d = Disk { context, ..next };
    }
    Err(Unavailable::new(format!("{}: block devices stacked too deep", d.context)))
}

fn stacked_kind(name: &str) -> &'static str {
    if name.starts_with("dm-") {
        "device-mapper"
    } else if name.starts_with("md") {
        "md RAID"
    } else {
        "stacked"
    }
}

fn open_disk(d: &Disk, roots: &Roots) -> Result<Box<dyn HealthSource>, Unavailable> {
    let fail = |why: String| Unavailable::new(format!("{}: {why}", d.context));
    if let Some(why) = no_health_device(d) {
        return Err(fail(why));
    }
    if is_nvme_namespace(&d.name) {
        let ctrls = nvme_controllers(d, roots);
        let mut nodes: Vec<PathBuf> = ctrls.iter().map(|c| roots.dev.join(c)).collect();
        nodes.push(roots.dev.join(&d.name));
        let mut sensors: Vec<PathBuf> = ctrls.iter().map(|c| roots.sys.join("class/nvme").join(c)).collect();
        sensors.push(d.sys_dir.join("device"));
        return open_nvme(&nodes, &sensors, roots).map_err(|why| fail(format!("{}: {why}", d.name)));
    }
    match hwmon::find_temp_input(&roots.sys, &d.sys_dir.join("device")) {
        Some(input) => hwmon::HwmonSource::open(input, None)
            .map(|s| Box::new(s) as Box<dyn HealthSource>)
            .map_err(|e| fail(format!("{}: hwmon temperature unreadable: {e}", d.name))),
        None => Err(fail(no_sensor_reason(d))),
    }
}

/// Probe the admin nodes in order; if none gives a SMART log, fall back to
/// the first hwmon sensor of the listed devices.
fn open_nvme(nodes: &[PathBuf], sensor_devices: &[PathBuf], roots: &Roots) -> Result<Box<dyn HealthSource>, String> {
    let mut errors = Vec::new();
    for node in nodes {
        match nvme::NvmeSource::probe(node) {
            Ok(s) => return Ok(Box::new(s)),
            Err(e) => errors.push(e.to_string()),
        }
    }
    let why = format!("SMART log not readable ({})", errors.join("; "));
    for dev in sensor_devices {
        if let Some(input) = hwmon::find_temp_input(&roots.sys, dev) {
            if let Ok(s) = hwmon::HwmonSource::open(input, Some(why.clone())) {
                return Ok(Box::new(s));
            }
        }
    }
    Err(format!("{why}, and no hwmon temperature sensor"))
}

/// Disks that by their nature have no health log.
fn no_health_device(d: &Disk) -> Option<String> {
    let n = d.name.as_str();
    if n.starts_with("zram") || n.starts_with("ram") {
        Some(format!("{n} is a RAM block device and has no health log"))
    } else if n.starts_with("loop") {
        let backing = fs::read_to_string(d.sys_dir.join("loop/backing_file"))
            .map(|b| format!(" backed by {}", b.trim()))
            .unwrap_or_default();
        Some(format!(
            "{n} is a loop device{backing} and has no health log; \
             point ftlscope at the backing file instead"
        ))
    } else if n.starts_with("nbd") {
        Some(format!("{n} is a network block device and has no health log"))
    } else if n.starts_with("pmem") {
        Some(format!("{n} is a persistent-memory block device and has no NVMe health log"))
    } else {
        None
    }
}

fn no_sensor_reason(d: &Disk) -> String {
    let n = d.name.as_str();
    let driver = fs::canonicalize(d.sys_dir.join("device/driver")).ok().and_then(|p| file_name(&p)).unwrap_or_default();
    if driver == "virtio_blk" || n.starts_with("vd") {
        format!("{n} is a virtio block device and reports no health log")
    } else if driver == "vbd" || n.starts_with("xvd") {
        format!("{n} is a Xen virtual block device and reports no health log")
    } else if driver == "sd" || n.starts_with("sd") {
        format!(
            "{n} is a SCSI/SATA/USB disk: its SMART data is not read by ftlscope and it has \
             no hwmon temperature sensor (for SATA, load the drivetemp module)"
        )
    } else if n.starts_with("mmcblk") {
        format!("{n} is an MMC/SD device and reports no health log")
    } else if driver.is_empty() {
        format!("{n} has no NVMe health log and no hwmon temperature sensor")
    } else {
        format!("{n} (driver {driver}) has no NVMe health log and no hwmon temperature sensor")
    }
}

/// Controllers that can answer admin commands for namespace disk `d`, best
/// first.
fn nvme_controllers(d: &Disk, roots: &Roots) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(dev) = fs::canonicalize(d.sys_dir.join("device")) {
        match file_name(&dev) {
            Some(n) if is_nvme_ctrl(&n) => out.push(n),
            // Native multipath: the namespace head hangs off the subsystem,
            // which lists its controllers.
            Some(n) if n.starts_with("nvme-subsys") => {
                out.extend(list_names(&dev).into_iter().filter(|c| is_nvme_ctrl(c)));
            }
            _ => {}
        }
    }
    if let Some(c) = parse_nvme_namespace(&d.name).map(|(ctrl, _)| format!("nvme{ctrl}")) {
        if !out.contains(&c) && roots.dev.join(&c).exists() {
            out.push(c);
        }
    }
    out
}

/// "nvme12" -> true.
fn is_nvme_ctrl(name: &str) -> bool {
    name.strip_prefix("nvme").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn is_nvme_namespace(name: &str) -> bool {
    parse_nvme_namespace(name).is_some()
}

/// "nvme0n1" -> (0, 1); "nvme0c2n1" (a multipath path) -> (2, 1): the
/// controller instance and namespace id.
fn parse_nvme_namespace(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix("nvme")?;
    let (head, ns) = rest.split_once('n')?;
    let ctrl = match head.split_once('c') {
        Some((_, c)) => c,
        None => head,
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(ctrl) || !digits(ns) || !head.split('c').all(digits) {
        return None;
    }
    Some((ctrl.parse().ok()?, ns.parse().ok()?))
}

#[derive(Debug, PartialEq)]
struct MountEntry {
    fstype: String,
    source: String,
}

/// The first /proc/self/mountinfo entry for device `maj:min`.
fn mount_for_devnum(mountinfo: &str, maj: u32, min: u32) -> Option<MountEntry> {
    let want = format!("{maj}:{min}");
    mountinfo.lines().find_map(|line| {
        let (pre, post) = line.split_once(" - ")?;
        if pre.split(' ').nth(2)? != want {
            return None;
        }
        let mut f = post.split(' ');
        Some(MountEntry { fstype: unescape_mount(f.next()?), source: unescape_mount(f.next()?) })
    })
}

/// Undo the kernel's octal escaping of ' ', '\t', '\n' and '\\'.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = (b[i] == b'\\' && i + 3 < b.len())
            .then(|| &b[i + 1..i + 4])
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::try_from(d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'))).ok());
        if let Some(v) = octal {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// glibc's `major()` / `minor()` of a `dev_t`.
fn split_dev(dev: u64) -> (u32, u32) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff);
    (major as u32, minor as u32)
}

fn file_name(p: &Path) -> Option<String> {
    p.file_name()?.to_str().map(str::to_owned)
}

/// Sorted entry names of a directory; empty if unreadable.
fn list_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

pub(crate) use crate::clock::monotonic_raw_ns;

// ---------------------------------------------------------------------------
// Sampler and report
// ---------------------------------------------------------------------------

/// Health over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthReport {
    /// The source's name ("nvme-smart+ocp", "hwmon", …), "none" if unavailable.
    pub source: String,
    pub available: bool,
    /// Why health is unavailable, or what limits the source (e.g. "temperature
    /// only", "OCP log not available").
    pub reason: Option<String>,
    pub samples: Vec<HealthSample>,
    /// Failed samples, "t=<ns>ns: <error>".
    pub errors: Vec<String>,
}

impl HealthReport {
    pub fn unavailable(reason: impl Into<String>) -> Self {
        HealthReport {
            source: "none".to_owned(),
            available: false,
            reason: Some(reason.into()),
            samples: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Media bytes written over host bytes written between the first and the
    /// last sample that have both; `None` without two such samples or when
    /// the host wrote nothing in between (or a counter went backwards).
    ///
    /// Host bytes come in SMART data units of 512 000 bytes (rounded up by
    /// the drive), so short runs that write little are imprecise.
    pub fn write_amplification(&self) -> Option<f64> {
        let mut both = self.samples.iter().filter_map(|s| Some((s.host_bytes_written?, s.media_bytes_written?)));
        let (h0, m0) = both.next()?;
        let (h1, m1) = both.next_back()?;
        let host = h1.checked_sub(h0).filter(|&d| d > 0)?;
        let media = m1.checked_sub(m0)?;
        Some(media as f64 / host as f64)
    }
}

impl From<Unavailable> for HealthReport {
    fn from(u: Unavailable) -> Self {
        HealthReport::unavailable(u.reason)
    }
}

/// Shortest sampling interval; shorter requests are raised to this.
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Sampling errors kept in the report; later ones are only counted.
const MAX_ERRORS: usize = 100;

/// Background thread sampling a [`HealthSource`]: once at start, every
/// `interval`, and once at [`stop`](HealthSampler::stop).
pub struct HealthSampler {
    stop_tx: Option<mpsc::Sender<()>>,
    handle: Option<JoinHandle<Collected>>,
    source_name: &'static str,
    detail: Option<String>,
    spawn_error: Option<String>,
}

#[derive(Default)]
struct Collected {
    samples: Vec<HealthSample>,
    errors: Vec<String>,
    suppressed: usize,
}

impl Collected {
    fn take(&mut self, source: &mut dyn HealthSource) {
        match source.sample() {
            Ok(s) => self.samples.push(s),
            Err(e) if self.errors.len() < MAX_ERRORS => {
                self.errors.push(format!("t={}ns: {e}", monotonic_raw_ns()));
            }
            Err(_) => self.suppressed += 1,
        }
    }
}

impl HealthSampler {
    /// Start the "ftlscope-health" thread. It takes its first sample at once.
    pub fn spawn(source: Box<dyn HealthSource>, interval: Duration) -> Self {
        let source_name = source.name();
        let detail = source.detail();
        let interval = interval.max(MIN_INTERVAL);
        let (stop_tx, stop_rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("ftlscope-health".to_owned())
            .spawn(move || run_sampler(source, interval, stop_rx));
        let (handle, spawn_error) = match spawned {
            Ok(h) => (Some(h), None),
            Err(e) => (None, Some(format!("cannot start the health thread: {e}"))),
        };
        HealthSampler { stop_tx: Some(stop_tx), handle, source_name, detail, spawn_error }
    }

    /// Take the final sample, end the thread and return what it collected.
    pub fn stop(mut self) -> HealthReport {
        let mut c = self.finish();
        if let Some(e) = self.spawn_error.take() {
            c.errors.push(e);
        }
        if c.suppressed > 0 {
            c.errors.push(format!("{} more sampling errors not kept", c.suppressed));
        }
        let available = !c.samples.is_empty();
        let reason = if available {
            self.detail.take()
        } else {
            Some(
                c.errors
                    .first()
                    .map(|e| format!("no health sample succeeded: {e}"))
                    .unwrap_or_else(|| "no health sample was taken".to_owned()),
            )
        };
        HealthReport { source: self.source_name.to_owned(), available, reason, samples: c.samples, errors: c.errors }
    }

    fn finish(&mut self) -> Collected {
        // Dropping the sender would also wake the thread; sending is explicit.
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(c)) => c,
            Some(Err(_)) => Collected { errors: vec!["the health thread panicked".to_owned()], ..Collected::default() },
            None => Collected::default(),
        }
    }
}

impl Drop for HealthSampler {
    fn drop(&mut self) {
        self.finish();
    }
}

fn run_sampler(mut source: Box<dyn HealthSource>, interval: Duration, stop: mpsc::Receiver<()>) -> Collected {
    let mut c = Collected::default();
    c.take(source.as_mut());
    let mut next = Instant::now().checked_add(interval);
    loop {
        let woke = match next {
            Some(t) => stop.recv_timeout(t.saturating_duration_since(Instant::now())),
            None => stop.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match woke {
            Err(RecvTimeoutError::Timeout) => {
                c.take(source.as_mut());
                // Keep a steady cadence, but never try to catch up on
                // intervals a slow sample overran.
                let now = Instant::now();
                next = next.and_then(|t| t.checked_add(interval)).map(|t| if t < now { now + interval } else { t });
            }
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    c.take(source.as_mut());
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    // ----- source selection on the real machine -----

    #[test]
    fn regular_file_never_panics_and_explains() {
        let f = tempfile::NamedTempFile::new().unwrap();
        match open_health_source(f.path()) {
            // A privileged machine with an NVMe or hwmon-equipped disk.
            Ok(src) => assert!(!src.name().is_empty()),
            Err(u) => {
                assert!(u.reason.starts_with("regular file on"), "{}", u.reason);
                assert!(u.to_string().contains(&u.reason));
            }
        }
        let d = tempfile::tempdir().unwrap();
        if let Err(u) = open_health_source(d.path()) {
            assert!(u.reason.starts_with("directory on"), "{}", u.reason);
        }
    }

    #[test]
    fn missing_and_non_nvme_char_device_are_unavailable() {
        let u = open_health_source(Path::new("/nonexistent/ftlscope")).err().unwrap();
        assert!(u.reason.starts_with("cannot stat /nonexistent/ftlscope"));
        let u = open_health_source(Path::new("/dev/null")).err().unwrap();
        assert!(u.reason.contains("not an NVMe controller"), "{}", u.reason);
    }

    #[test]
    fn split_dev_matches_the_kernel() {
        let null = fs::metadata("/dev/null").unwrap();
        assert_eq!(split_dev(null.rdev()), (1, 3));
        // makedev(259, 0x12345) with glibc's encoding.
        let (maj, min) = (259u64, 0x12345u64);
        let dev = ((maj & 0xffff_f000) << 32) | ((maj & 0xfff) << 8) | ((min & 0xffff_ff00) << 12) | (min & 0xff);
        assert_eq!(split_dev(dev), (259, 0x12345));
    }

    // ----- source selection on a fake tree -----

    struct Fake {
        _tmp: tempfile::TempDir,
        roots: Roots,
    }

    impl Fake {
        fn new() -> Self {
            let tmp = tempfile::tempdir().unwrap();
            let roots = Roots {
                sys: tmp.path().join("sys"),
                dev: tmp.path().join("dev"),
                mountinfo: tmp.path().join("mountinfo"),
            };
            fs::create_dir_all(&roots.dev).unwrap();
            Fake { _tmp: tmp, roots }
        }

        fn sys(&self, rel: &str) -> PathBuf {
            self.roots.sys.join(rel)
        }

        fn write(&self, rel: &str, text: &str) {
            let p = self.sys(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }

        fn mkdir(&self, rel: &str) {
            fs::create_dir_all(self.sys(rel)).unwrap();
        }

        /// Symlink sys/`link` -> sys/`to` (absolute, which sysfs does not do
        /// but canonicalize does not mind).
        fn link(&self, link: &str, to: &str) {
            let l = self.sys(link);
            fs::create_dir_all(l.parent().unwrap()).unwrap();
            symlink(self.sys(to), l).unwrap();
        }

        /// A block device: its directory, /sys/dev/block and /sys/class/block entries.
        fn block(&self, dir: &str, devnum: &str) {
            self.mkdir(dir);
            let name = dir.rsplit('/').next().unwrap();
            self.link(&format!("dev/block/{devnum}"), dir);
            self.link(&format!("class/block/{name}"), dir);
        }

        fn disk(&self, devnum: &str, context: &str) -> Disk {
            let (maj, min) = devnum.split_once(':').unwrap();
            let (_, mut d) = disk_from_devnum(&self.roots, maj.parse().unwrap(), min.parse().unwrap()).unwrap();
            d.context = context.to_owned();
            d
        }

        fn open(&self, d: Disk) -> Result<Box<dyn HealthSource>, Unavailable> {
            let d = unstack(d, &self.roots)?;
            open_disk(&d, &self.roots)
        }
    }

    const NVME0: &str = "devices/pci0000:00/0000:00:04.0/nvme/nvme0";

    fn fake_nvme(f: &Fake, with_hwmon: bool) {
        f.block(&format!("{NVME0}/nvme0n1"), "259:0");
        f.block(&format!("{NVME0}/nvme0n1/nvme0n1p2"), "259:2");
        f.write(&format!("{NVME0}/nvme0n1/nvme0n1p2/partition"), "2\n");
        f.link(&format!("{NVME0}/nvme0n1/device"), NVME0);
        f.link("class/nvme/nvme0", NVME0);
        if with_hwmon {
            f.write(&format!("{NVME0}/hwmon1/temp1_input"), "38850\n");
            f.write(&format!("{NVME0}/hwmon1/temp1_label"), "Composite\n");
        }
        // Device nodes that are not NVMe devices: the ioctl fails with ENOTTY.
        fs::write(f.roots.dev.join("nvme0"), b"").unwrap();
        fs::write(f.roots.dev.join("nvme0n1"), b"").unwrap();
    }

    #[test]
    fn partition_resolves_to_its_disk() {
        let f = Fake::new();
        fake_nvme(&f, false);
        let (node, d) = disk_from_devnum(&f.roots, 259, 2).unwrap();
        assert_eq!(node, "nvme0n1p2");
        assert_eq!(d.name, "nvme0n1");
        assert_eq!(nvme_controllers(&d, &f.roots), vec!["nvme0".to_owned()]);
        assert!(disk_from_devnum(&f.roots, 8, 0).is_none());
    }

    #[test]
    fn nvme_without_admin_access_falls_back_to_hwmon() {
        let f = Fake::new();
        fake_nvme(&f, true);
        let mut src = f.open(f.disk("259:2", "regular file on /dev/nvme0n1p2")).unwrap_or_else(|u| panic!("{u}"));
        assert_eq!(src.name(), "hwmon");
        let detail = src.detail().unwrap();
        assert!(detail.contains("SMART log not readable"), "{detail}");
        assert!(detail.contains("not an NVMe device"), "{detail}");
        assert!(detail.contains("temperature only"), "{detail}");
        assert_eq!(src.sample().unwrap().temperature_c, Some(38.85));
    }

    #[test]
    fn nvme_without_anything_is_unavailable() {
        let f = Fake::new();
        fake_nvme(&f, false);
        let u = f.open(f.disk("259:0", "/dev/nvme0n1")).err().unwrap();
        assert!(u.reason.starts_with("/dev/nvme0n1: nvme0n1: SMART log not readable ("));
        // Both the controller and the namespace node were tried.
        assert!(u.reason.contains("nvme0 (not an NVMe device)"), "{}", u.reason);
        assert!(u.reason.contains("nvme0n1 (not an NVMe device)"), "{}", u.reason);
        assert!(u.reason.ends_with("and no hwmon temperature sensor"));
    }

    #[test]
    fn multipath_namespace_lists_subsystem_controllers() {
        let f = Fake::new();
        f.mkdir("devices/pci/nvme/nvme1");
        f.mkdir("devices/pci/nvme/nvme3");
        let subsys = "devices/virtual/nvme-subsystem/nvme-subsys0";
        f.block(&format!("{subsys}/nvme0n1"), "259:5");
        f.link(&format!("{subsys}/nvme0n1/device"), subsys);
        f.link(&format!("{subsys}/nvme3"), "devices/pci/nvme/nvme3");
        f.link(&format!("{subsys}/nvme1"), "devices/pci/nvme/nvme1");
        fs::write(f.roots.dev.join("nvme0"), b"").unwrap();
        let d = f.disk("259:5", "x");
        assert_eq!(nvme_controllers(&d, &f.roots), vec!["nvme1", "nvme3", "nvme0"]);
    }

    #[test]
    fn virtio_zram_loop_reasons() {
        let f = Fake::new();
        f.block("devices/pci0000:00/0000:00:02.0/virtio1/block/vda", "254:0");
        f.block("devices/pci0000:00/0000:00:02.0/virtio1/block/vda/vda1", "254:1");
        f.write("devices/pci0000:00/0000:00:02.0/virtio1/block/vda/vda1/partition", "1");
        f.link("devices/pci0000:00/0000:00:02.0/virtio1/block/vda/device", "devices/pci0000:00/0000:00:02.0/virtio1");
        f.mkdir("bus/virtio/drivers/virtio_blk");
        f.link("devices/pci0000:00/0000:00:02.0/virtio1/driver", "bus/virtio/drivers/virtio_blk");
        let u = f.open(f.disk("254:1", "regular file on /dev/vda1")).err().unwrap();
        assert_eq!(u.reason, "regular file on /dev/vda1: vda is a virtio block device and reports no health log");

        f.block("devices/virtual/block/zram0", "253:0");
        let u = f.open(f.disk("253:0", "/dev/zram0")).err().unwrap();
        assert_eq!(u.reason, "/dev/zram0: zram0 is a RAM block device and has no health log");

        f.block("devices/virtual/block/loop3", "7:3");
        f.write("devices/virtual/block/loop3/loop/backing_file", "/srv/img\n");
        let u = f.open(f.disk("7:3", "/dev/loop3")).err().unwrap();
        assert!(u.reason.contains("loop3 is a loop device backed by /srv/img"), "{}", u.reason);
    }

    #[test]
    fn sata_disk_with_drivetemp_gives_hwmon() {
        let f = Fake::new();
        let sdev = "devices/pci/ata1/host0/target0:0:0/0:0:0:0";
        f.block(&format!("{sdev}/block/sda"), "8:0");
        f.link(&format!("{sdev}/block/sda/device"), sdev);
        f.write(&format!("{sdev}/hwmon/hwmon3/temp1_input"), "31000");
        let mut src = f.open(f.disk("8:0", "/dev/sda")).unwrap_or_else(|u| panic!("{u}"));
        assert_eq!(src.name(), "hwmon");
        assert_eq!(src.sample().unwrap().temperature_c, Some(31.0));

        fs::remove_dir_all(f.sys(&format!("{sdev}/hwmon"))).unwrap();
        let u = f.open(f.disk("8:0", "/dev/sda")).err().unwrap();
        assert!(u.reason.contains("drivetemp"), "{}", u.reason);
    }

    #[test]
    fn device_mapper_is_followed_to_a_single_disk() {
        let f = Fake::new();
        fake_nvme(&f, true);
        f.block("devices/virtual/block/dm-0", "252:0");
        f.mkdir("devices/virtual/block/dm-0/slaves");
        f.link("devices/virtual/block/dm-0/slaves/nvme0n1p2", &format!("{NVME0}/nvme0n1/nvme0n1p2"));
        let d = unstack(f.disk("252:0", "regular file on /dev/dm-0"), &f.roots).unwrap();
        assert_eq!(d.name, "nvme0n1");
        assert_eq!(d.context, "regular file on /dev/dm-0, dm-0 -> nvme0n1p2");
        assert_eq!(f.open(f.disk("252:0", "c")).unwrap().name(), "hwmon");

        f.block("devices/virtual/block/md0", "9:0");
        f.mkdir("devices/virtual/block/md0/slaves/sda");
        f.mkdir("devices/virtual/block/md0/slaves/sdb");
        let u = f.open(f.disk("9:0", "/dev/md0")).err().unwrap();
        assert!(u.reason.contains("md0 is a md RAID device over 2 disks (sda, sdb)"), "{}", u.reason);
    }

    #[test]
    fn nvme_namespace_names() {
        assert_eq!(parse_nvme_namespace("nvme0n1"), Some((0, 1)));
        assert_eq!(parse_nvme_namespace("nvme10n12"), Some((10, 12)));
        assert_eq!(parse_nvme_namespace("nvme0c2n1"), Some((2, 1)));
        assert_eq!(parse_nvme_namespace("nvme0"), None);
        assert_eq!(parse_nvme_namespace("nvme0n1p1"), None);
        assert_eq!(parse_nvme_namespace("nvmen1"), None);
        assert!(is_nvme_ctrl("nvme7"));
        assert!(!is_nvme_ctrl("nvme"));
        assert!(!is_nvme_ctrl("nvme-subsys0"));
        assert!(!is_nvme_ctrl("nvme0n1"));
    }

    #[test]
    fn mountinfo_lookup() {
        let text = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
40 27 0:45 / /data rw - btrfs /dev/nvme0n1p2 rw,ssd\n\
41 27 0:46 / /mnt/my\\040disk rw shared:1 - fuse.sshfs host:/a\\040b\\777\\0 rw\n";
        assert_eq!(
            mount_for_devnum(text, 0, 45),
            Some(MountEntry { fstype: "btrfs".into(), source: "/dev/nvme0n1p2".into() })
        );
        assert_eq!(mount_for_devnum(text, 0, 46).unwrap().source, "host:/a b\\777\\0");
        assert_eq!(mount_for_devnum(text, 0, 47), None);
    }

    // ----- sampler -----

    struct Counting {
        n: Arc<AtomicU64>,
        fail_every: u64,
    }

    impl HealthSource for Counting {
        fn sample(&mut self) -> Result<HealthSample, HealthError> {
            let n = self.n.fetch_add(1, Ordering::SeqCst) + 1;
            if n.checked_rem(self.fail_every) == Some(0) {
                return Err(HealthError::Other(format!("failure {n}")));
            }
            let mut s = HealthSample::new(monotonic_raw_ns(), "sim");
            s.temperature_c = Some(40.0);
            s.host_bytes_written = Some(u128::from(n) * 1_000);
            s.media_bytes_written = Some(u128::from(n) * 2_500);
            Ok(s)
        }

        fn name(&self) -> &'static str {
            "sim"
        }

        fn detail(&self) -> Option<String> {
            Some("fake".into())
        }
    }

    #[test]
    fn sampler_collects_and_stops_promptly() {
        let n = Arc::new(AtomicU64::new(0));
        let src = Counting { n: n.clone(), fail_every: 0 };
        let sampler = HealthSampler::spawn(Box::new(src), Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(70));
        let t = Instant::now();
        let r = sampler.stop();
        assert!(t.elapsed() < Duration::from_millis(100), "{:?}", t.elapsed());
        assert!(r.samples.len() >= 2, "{}", r.samples.len());
        assert_eq!(r.samples.len() as u64, n.load(Ordering::SeqCst));
        assert!(r.samples.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
        assert!(r.available);
        assert_eq!(r.source, "sim");
        assert_eq!(r.reason.as_deref(), Some("fake"));
        assert!(r.errors.is_empty());
        assert!((r.write_amplification().unwrap() - 2.5).abs() < 1e-12);
    }

    #[test]
    fn long_interval_still_samples_at_start_and_stop() {
        let n = Arc::new(AtomicU64::new(0));
        let src = Counting { n, fail_every: 0 };
        let sampler = HealthSampler::spawn(Box::new(src), Duration::from_secs(3600));
        std::thread::sleep(Duration::from_millis(5));
        let t = Instant::now();
        let r = sampler.stop();
        assert!(t.elapsed() < Duration::from_millis(100));
        assert_eq!(r.samples.len(), 2);
        // Duration::MAX must not overflow the deadline arithmetic.
        let src = Counting { n: Arc::new(AtomicU64::new(0)), fail_every: 0 };
        let r = HealthSampler::spawn(Box::new(src), Duration::MAX).stop();
        assert_eq!(r.samples.len(), 2);
    }

    #[test]
    fn sampler_records_errors() {
        let src = Counting { n: Arc::new(AtomicU64::new(0)), fail_every: 2 };
        let sampler = HealthSampler::spawn(Box::new(src), Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(50));
        let r = sampler.stop();
        assert!(!r.errors.is_empty());
        assert!(r.errors[0].contains("failure 2"), "{}", r.errors[0]);
        assert!(r.errors[0].starts_with("t="));
        assert!(r.available);

        let always = Counting { n: Arc::new(AtomicU64::new(0)), fail_every: 1 };
        let r = HealthSampler::spawn(Box::new(always), Duration::from_millis(10)).stop();
        assert!(!r.available);
        assert!(r.samples.is_empty());
        assert!(r.reason.unwrap().starts_with("no health sample succeeded: t="));
    }

    #[test]
    fn dropping_a_sampler_stops_its_thread() {
        let n = Arc::new(AtomicU64::new(0));
        let src = Counting { n: n.clone(), fail_every: 0 };
        drop(HealthSampler::spawn(Box::new(src), Duration::from_millis(10)));
        let after = n.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(n.load(Ordering::SeqCst), after);
    }

    // ----- report -----

    fn s(host: Option<u128>, media: Option<u128>) -> HealthSample {
        let mut s = HealthSample::new(0, "sim");
        s.host_bytes_written = host;
        s.media_bytes_written = media;
        s
    }

    fn report(samples: Vec<HealthSample>) -> HealthReport {
        HealthReport { source: "sim".into(), available: true, reason: None, samples, errors: vec![] }
    }

    #[test]
    fn write_amplification_math() {
        let gb = 1_000_000_000u128;
        let r = report(vec![
            s(Some(10 * gb), Some(30 * gb)),
            s(Some(11 * gb), None), // no OCP in this one: skipped
            s(Some(14 * gb), Some(39 * gb)),
        ]);
        assert!((r.write_amplification().unwrap() - 2.25).abs() < 1e-12);
        // Huge lifetime counters: only the deltas matter.
        let base = u128::from(u64::MAX) << 20;
        let r = report(vec![s(Some(base), Some(base)), s(Some(base + 4), Some(base + 5))]);
        assert_eq!(r.write_amplification(), Some(1.25));
        // No host writes in between, a single sample, no media counter,
        // a counter going backwards.
        assert_eq!(report(vec![s(Some(5), Some(1)), s(Some(5), Some(9))]).write_amplification(), None);
        assert_eq!(report(vec![s(Some(5), Some(1))]).write_amplification(), None);
        assert_eq!(report(vec![s(Some(1), None), s(Some(5), None)]).write_amplification(), None);
        assert_eq!(report(vec![s(Some(1), Some(9)), s(Some(5), Some(3))]).write_amplification(), None);
        assert_eq!(HealthReport::unavailable("x").write_amplification(), None);
    }

    #[test]
    fn reports_serialize() {
        let u: HealthReport = Unavailable::new("zram0 is a RAM block device").into();
        assert!(!u.available);
        assert_eq!(u.source, "none");
        let v = serde_json::to_value(&u).unwrap();
        assert_eq!(v["reason"], "zram0 is a RAM block device");
        assert_eq!(v["available"], false);

        let mut big = s(Some(u128::from(u64::MAX) + 1), None);
        big.temperature_c = Some(41.5);
        let text = serde_json::to_string(&report(vec![big])).unwrap();
        assert!(text.contains("\"host_bytes_written\":18446744073709551616"), "{text}");
        assert!(text.contains("\"media_bytes_written\":null"), "{text}");
        assert!(text.contains("\"source\":\"sim\""), "{text}");
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_raw_ns();
        std::thread::sleep(Duration::from_millis(1));
        let b = monotonic_raw_ns();
        assert!(a > 0 && b > a);
    }
}
