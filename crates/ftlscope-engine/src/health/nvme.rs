//! NVMe health log pages: the SMART / Health Information log (log identifier
//! 0x02, NVMe base specification) and the OCP Datacenter NVMe SSD "SMART /
//! Health Information Extended" log (log identifier 0xC0), read with a Get Log
//! Page admin command passed through `NVME_IOCTL_ADMIN_CMD`.
//!
//! The decoders are pure functions over byte slices; the only `unsafe` code in
//! this file is the single `ioctl(2)` call in [`admin_get_log_page`].

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{monotonic_raw_ns, HealthError, HealthSample, HealthSource};

/// Size of both log pages read here.
pub const LOG_PAGE_SIZE: usize = 512;
/// Log identifier of the SMART / Health Information log.
pub const LID_SMART: u8 = 0x02;
/// Log identifier of the OCP SMART / Health Information Extended log.
pub const LID_OCP_SMART_EXTENDED: u8 = 0xC0;
/// Log page GUID of the OCP C0 log, as the specification writes it. It is
/// stored little-endian in bytes 496..512, so byte 496 is 0xC5 and byte 511
/// is 0xAF.
pub const OCP_C0_GUID: u128 = 0xAFD5_14C9_7C6F_4F9C_A4F2_BFEA_2810_AFC5;
/// One SMART "data unit" is 1000 units of 512 bytes.
pub const DATA_UNIT_BYTES: u128 = 512_000;

/// NSID meaning "the controller as a whole / all namespaces".
const NVME_NSID_ALL: u32 = 0xFFFF_FFFF;
/// Admin opcode of Get Log Page.
const NVME_ADMIN_GET_LOG_PAGE: u8 = 0x02;

/// The decoded SMART / Health Information log page (log identifier 0x02).
///
/// Counters are kept raw; the 128-bit ones are little-endian in the page.
/// Temperatures are in Kelvin as the drive reports them; `None` where the
/// drive reports 0 (not implemented).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SmartLog {
    /// Byte 0: critical warning bit field (spare, temperature, reliability,
    /// read-only, volatile backup, persistent memory region).
    pub critical_warning: u8,
    /// Bytes 1..3: composite temperature in Kelvin.
    pub composite_temperature_k: Option<u16>,
    /// Byte 3: available spare, percent.
    pub available_spare_pct: u8,
    /// Byte 4: available spare threshold, percent.
    pub available_spare_threshold_pct: u8,
    /// Byte 5: percentage used (may exceed 100).
    pub percentage_used: u8,
    /// Byte 6: endurance group critical warning summary.
    pub endurance_group_critical_warning: u8,
    /// Bytes 32..48: data units read (units of 512 000 bytes, rounded up).
    pub data_units_read: u128,
    /// Bytes 48..64: data units written (units of 512 000 bytes, rounded up).
    pub data_units_written: u128,
    /// Bytes 64..80.
    pub host_read_commands: u128,
    /// Bytes 80..96.
    pub host_write_commands: u128,
    /// Bytes 96..112: controller busy time, minutes.
    pub controller_busy_time_min: u128,
    /// Bytes 112..128.
    pub power_cycles: u128,
    /// Bytes 128..144.
    pub power_on_hours: u128,
    /// Bytes 144..160.
    pub unsafe_shutdowns: u128,
    /// Bytes 160..176: media and data integrity errors.
    pub media_errors: u128,
    /// Bytes 176..192: number of error information log entries.
    pub error_log_entries: u128,
    /// Bytes 192..196: warning composite temperature time, minutes.
    pub warning_temp_time_min: u32,
    /// Bytes 196..200: critical composite temperature time, minutes.
    pub critical_temp_time_min: u32,
    /// Bytes 200..216: temperature sensors 1-8 in Kelvin.
    pub temperature_sensors_k: [Option<u16>; 8],
    /// Bytes 216..220: thermal management temperature 1 transition count.
    pub thermal_mgmt_t1_transitions: u32,
    /// Bytes 220..224: thermal management temperature 2 transition count.
    pub thermal_mgmt_t2_transitions: u32,
    /// Bytes 224..228: total time for thermal management temperature 1, seconds.
    pub thermal_mgmt_t1_time_s: u32,
    /// Bytes 228..232: total time for thermal management temperature 2, seconds.
    pub thermal_mgmt_t2_time_s: u32,
}

impl SmartLog {
    /// Composite temperature in degrees Celsius.
    pub fn composite_temperature_c(&self) -> Option<f64> {
        self.composite_temperature_k.map(kelvin_to_celsius)
    }

    /// Bytes the host has read, from data units read.
    pub fn host_bytes_read(&self) -> u128 {
        self.data_units_read.saturating_mul(DATA_UNIT_BYTES)
    }

    /// Bytes the host has written, from data units written.
    pub fn host_bytes_written(&self) -> u128 {
        self.data_units_written.saturating_mul(DATA_UNIT_BYTES)
    }
}

/// The decoded OCP "SMART / Health Information Extended" log page (log
/// identifier 0xC0), fields of OCP Datacenter NVMe SSD specification 1.0-2.x
/// up to byte 208 plus the version and GUID trailer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OcpSmartLog {
    /// Bytes 0..16: physical media units written, in bytes.
    pub physical_media_bytes_written: u128,
    /// Bytes 16..32: physical media units read, in bytes.
    pub physical_media_bytes_read: u128,
    /// Bytes 32..38: bad user NAND blocks, raw count.
    pub bad_user_nand_blocks_raw: u64,
    /// Bytes 38..40: bad user NAND blocks, normalized.
    pub bad_user_nand_blocks_normalized: u16,
    /// Bytes 40..46: bad system NAND blocks, raw count.
    pub bad_system_nand_blocks_raw: u64,
    /// Bytes 46..48: bad system NAND blocks, normalized.
    pub bad_system_nand_blocks_normalized: u16,
    /// Bytes 48..56.
    pub xor_recovery_count: u64,
    /// Bytes 56..64.
    pub uncorrectable_read_errors: u64,
    /// Bytes 64..72.
    pub soft_ecc_errors: u64,
    /// Bytes 72..76.
    pub end_to_end_detected_errors: u32,
    /// Bytes 76..80.
    pub end_to_end_corrected_errors: u32,
    /// Byte 80: system data percent used.
    pub system_data_used_pct: u8,
    /// Bytes 81..88: refresh counts (56-bit).
    pub refresh_counts: u64,
    /// Bytes 88..92: maximum user data erase count.
    pub user_data_erase_count_max: u32,
    /// Bytes 92..96: minimum user data erase count.
    pub user_data_erase_count_min: u32,
    /// Byte 96: number of thermal throttling events.
    pub thermal_throttling_events: u8,
    /// Byte 97: current thermal throttling status.
    pub thermal_throttling_status: u8,
    /// Bytes 104..112.
    pub pcie_correctable_errors: u64,
    /// Bytes 112..116.
    pub incomplete_shutdowns: u32,
    /// Byte 120: percent free blocks.
    pub percent_free_blocks: u8,
    /// Bytes 128..130: capacitor health, percent.
    pub capacitor_health: u16,
    /// Bytes 136..144.
    pub unaligned_io: u64,
    /// Bytes 144..152: security version number.
    pub security_version: u64,
    /// Bytes 152..160: total NUSE (namespace utilisation).
    pub total_nuse: u64,
    /// Bytes 160..176.
    pub plp_start_count: u128,
    /// Bytes 176..192: endurance estimate.
    pub endurance_estimate: u128,
    /// Bytes 192..200 (OCP 2.0).
    pub pcie_link_retraining_count: u64,
    /// Bytes 200..208 (OCP 2.0).
    pub power_state_change_count: u64,
    /// Bytes 494..496: log page version.
    pub log_page_version: u16,
}

/// Decode a SMART / Health Information log page (0x02).
///
/// The page must be the full 512 bytes.
pub fn decode_smart_log(page: &[u8]) -> Result<SmartLog, HealthError> {
    check_len(page, LID_SMART)?;
    let mut sensors = [None; 8];
    for (i, s) in sensors.iter_mut().enumerate() {
        *s = nonzero_u16(le_u16(page, 200 + 2 * i));
    }
    Ok(SmartLog {
        critical_warning: page[0],
        composite_temperature_k: nonzero_u16(le_u16(page, 1)),
        available_spare_pct: page[3],
        available_spare_threshold_pct: page[4],
        percentage_used: page[5],
        endurance_group_critical_warning: page[6],
        data_units_read: le_u128(page, 32),
        data_units_written: le_u128(page, 48),
        host_read_commands: le_u128(page, 64),
        host_write_commands: le_u128(page, 80),
        controller_busy_time_min: le_u128(page, 96),
        power_cycles: le_u128(page, 112),
        power_on_hours: le_u128(page, 128),
        unsafe_shutdowns: le_u128(page, 144),
        media_errors: le_u128(page, 160),
        error_log_entries: le_u128(page, 176),
        warning_temp_time_min: le_u32(page, 192),
        critical_temp_time_min: le_u32(page, 196),
        temperature_sensors_k: sensors,
        thermal_mgmt_t1_transitions: le_u32(page, 216),
        thermal_mgmt_t2_transitions: le_u32(page, 220),
        thermal_mgmt_t1_time_s: le_u32(page, 224),
        thermal_mgmt_t2_time_s: le_u32(page, 228),
    })
}

/// Decode an OCP SMART / Health Information Extended log page (0xC0).
///
/// Log identifier 0xC0 is vendor specific, so the page is only trusted when
/// its GUID (bytes 496..512) is the OCP one; otherwise `Ok(None)`.
pub fn decode_ocp_c0(page: &[u8]) -> Result<Option<OcpSmartLog>, HealthError> {
    check_len(page, LID_OCP_SMART_EXTENDED)?;
    if le_u128(page, 496) != OCP_C0_GUID {
        return Ok(None);
    }
    Ok(Some(OcpSmartLog {
        physical_media_bytes_written: le_u128(page, 0),
        physical_media_bytes_read: le_u128(page, 16),
        bad_user_nand_blocks_raw: le_uint(page, 32, 6),
        bad_user_nand_blocks_normalized: le_u16(page, 38),
        bad_system_nand_blocks_raw: le_uint(page, 40, 6),
        bad_system_nand_blocks_normalized: le_u16(page, 46),
        xor_recovery_count: le_u64(page, 48),
        uncorrectable_read_errors: le_u64(page, 56),
        soft_ecc_errors: le_u64(page, 64),
        end_to_end_detected_errors: le_u32(page, 72),
        end_to_end_corrected_errors: le_u32(page, 76),
        system_data_used_pct: page[80],
        refresh_counts: le_uint(page, 81, 7),
        user_data_erase_count_max: le_u32(page, 88),
        user_data_erase_count_min: le_u32(page, 92),
        thermal_throttling_events: page[96],
        thermal_throttling_status: page[97],
        pcie_correctable_errors: le_u64(page, 104),
        incomplete_shutdowns: le_u32(page, 112),
        percent_free_blocks: page[120],
        capacitor_health: le_u16(page, 128),
        unaligned_io: le_u64(page, 136),
        security_version: le_u64(page, 144),
        total_nuse: le_u64(page, 152),
        plp_start_count: le_u128(page, 160),
        endurance_estimate: le_u128(page, 176),
        pcie_link_retraining_count: le_u64(page, 192),
        power_state_change_count: le_u64(page, 200),
        log_page_version: le_u16(page, 494),
    }))
}

/// Build a [`HealthSample`] from decoded log pages.
pub(crate) fn sample_from_logs(t_ns: u64, smart: &SmartLog, ocp: Option<&OcpSmartLog>) -> HealthSample {
    let temperature_c = smart
        .composite_temperature_c()
        .or_else(|| smart.temperature_sensors_k.iter().flatten().next().map(|&k| kelvin_to_celsius(k)));
    let mut s = HealthSample::new(t_ns, if ocp.is_some() { "nvme-smart+ocp" } else { "nvme-smart" });
    s.temperature_c = temperature_c;
    s.host_bytes_read = Some(smart.host_bytes_read());
    s.host_bytes_written = Some(smart.host_bytes_written());
    s.media_bytes_written = ocp.map(|o| o.physical_media_bytes_written);
    s.media_bytes_read = ocp.map(|o| o.physical_media_bytes_read);
    s.media_errors = Some(smart.media_errors);
    s.percentage_used = Some(smart.percentage_used);
    s.critical_warning = Some(smart.critical_warning);
    s.power_on_hours = Some(smart.power_on_hours);
    s.available_spare_pct = Some(smart.available_spare_pct);
    s.unsafe_shutdowns = Some(smart.unsafe_shutdowns);
    s.thermal_throttle_s = Some(f64::from(smart.warning_temp_time_min) * 60.0);
    s
}

fn kelvin_to_celsius(k: u16) -> f64 {
    f64::from(k) - 273.15
}

fn check_len(page: &[u8], lid: u8) -> Result<(), HealthError> {
    if page.len() < LOG_PAGE_SIZE {
        return Err(HealthError::ShortPage { lid, len: page.len(), need: LOG_PAGE_SIZE });
    }
    Ok(())
}

fn nonzero_u16(v: u16) -> Option<u16> {
    (v != 0).then_some(v)
}

// The readers below are only called with constant offsets inside a page whose
// length check_len() has verified.
fn le_u16(p: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([p[off], p[off + 1]])
}

fn le_u32(p: &[u8], off: usize) -> u32 {
    le_uint(p, off, 4) as u32
}

fn le_u64(p: &[u8], off: usize) -> u64 {
    le_uint(p, off, 8)
}

/// Little-endian unsigned integer of `n <= 8` bytes.
fn le_uint(p: &[u8], off: usize, n: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..n].copy_from_slice(&p[off..off + n]);
    u64::from_le_bytes(b)
}

fn le_u128(p: &[u8], off: usize) -> u128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(&p[off..off + 16]);
    u128::from_le_bytes(b)
}

// ---------------------------------------------------------------------------
// Admin passthrough
// ---------------------------------------------------------------------------

/// `struct nvme_admin_cmd` (alias of `struct nvme_passthru_cmd`) from
/// `<linux/nvme_ioctl.h>`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NvmeAdminCmd {
    pub opcode: u8,
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub metadata: u64,
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    pub timeout_ms: u32,
    pub result: u32,
}

const _: () = assert!(std::mem::size_of::<NvmeAdminCmd>() == 72);

// asm-generic/ioctl.h encoding; powerpc, mips and sparc use their own.
#[cfg(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
))]
mod ioc {
    pub const WRITE: u32 = 4;
    pub const READ: u32 = 2;
    pub const SIZEBITS: u32 = 13;
}
#[cfg(not(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
)))]
mod ioc {
    pub const WRITE: u32 = 1;
    pub const READ: u32 = 2;
    pub const SIZEBITS: u32 = 14;
}

/// `_IOC(dir, type, nr, size)`.
const fn ioc_encode(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
    const NRBITS: u32 = 8;
    const TYPEBITS: u32 = 8;
    let sizeshift = NRBITS + TYPEBITS;
    let dirshift = sizeshift + ioc::SIZEBITS;
    (dir << dirshift) | ((size as u32) << sizeshift) | ((ty as u32) << NRBITS) | nr as u32
}

/// `NVME_IOCTL_ADMIN_CMD` = `_IOWR('N', 0x41, struct nvme_admin_cmd)`.
pub(crate) const NVME_IOCTL_ADMIN_CMD: u32 =
    ioc_encode(ioc::READ | ioc::WRITE, b'N', 0x41, std::mem::size_of::<NvmeAdminCmd>());

/// Retain Asynchronous Event: a passive sampler must not clear a SMART event the host is waiting for.
const RAE: u32 = 1 << 15;

/// Get Log Page CDW10: NUMDL (number of dwords minus one, low 16 bits) in
/// bits 31:16, RAE (bit 15) set, LSP (bits 11:8) clear, LID in bits 7:0.
pub(crate) fn get_log_page_cdw10(lid: u8, len: usize) -> u32 {
    let numd = ((len / 4) as u32).saturating_sub(1);
    ((numd & 0xffff) << 16) | RAE | u32::from(lid)
}

/// Get Log Page CDW11: NUMDU (high 16 bits of dwords minus one).
pub(crate) fn get_log_page_cdw11(len: usize) -> u32 {
    let numd = ((len / 4) as u32).saturating_sub(1);
    numd >> 16
}

/// The admin command reading `len` bytes of log `lid` (offset 0) into `addr`.
pub(crate) fn get_log_page_cmd(lid: u8, addr: u64, len: u32) -> NvmeAdminCmd {
    NvmeAdminCmd {
        opcode: NVME_ADMIN_GET_LOG_PAGE,
        nsid: NVME_NSID_ALL,
        addr,
        data_len: len,
        cdw10: get_log_page_cdw10(lid, len as usize),
        cdw11: get_log_page_cdw11(len as usize),
        ..NvmeAdminCmd::default()
    }
}

/// Page-aligned log buffer (the kernel maps it for DMA; alignment avoids a
/// bounce copy).
#[repr(C, align(4096))]
struct LogBuf([u8; LOG_PAGE_SIZE]);

/// Read log page `lid` (512 bytes) from an NVMe controller character device
/// or namespace block device.
pub(crate) fn admin_get_log_page(dev: &File, path: &Path, lid: u8) -> Result<[u8; LOG_PAGE_SIZE], HealthError> {
    let mut buf = Box::new(LogBuf([0u8; LOG_PAGE_SIZE]));
    let mut cmd = get_log_page_cmd(lid, buf.0.as_mut_ptr() as u64, LOG_PAGE_SIZE as u32);
    // SAFETY: `dev` is an open file, so its descriptor is valid for the call.
    // `cmd` is a fully initialised #[repr(C)] struct whose layout matches
    // `struct nvme_admin_cmd` (size checked at compile time), as the request
    // number encodes. Its `addr` points to `buf`, a live heap buffer of
    // exactly `data_len` bytes that is not otherwise borrowed during the call;
    // the kernel writes at most `data_len` bytes there, and into `cmd` itself
    // (the `result` field). `metadata` is 0 with `metadata_len` 0. Both
    // outlive the call, and nothing keeps the pointers afterwards. On a
    // descriptor that is not an NVMe device the call fails with ENOTTY.
    let rc =
        unsafe { libc::ioctl(dev.as_raw_fd(), NVME_IOCTL_ADMIN_CMD as libc::Ioctl, &mut cmd as *mut NvmeAdminCmd) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        let hint = match err.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => " (NVMe admin passthrough needs CAP_SYS_ADMIN; run as root)",
            Some(libc::ENOTTY) => " (not an NVMe device)",
            _ => "",
        };
        return Err(HealthError::Io {
            context: format!("Get Log Page 0x{lid:02x} ioctl on {}{hint}", path.display()),
            source: err,
        });
    }
    if rc > 0 {
        return Err(HealthError::NvmeStatus { lid, path: path.display().to_string(), status: rc as u32 });
    }
    Ok(buf.0)
}

/// Human name for the common Get Log Page failures.
pub(crate) fn nvme_status_name(status: u32) -> &'static str {
    let sct = (status >> 8) & 0x7;
    let sc = status & 0xff;
    match (sct, sc) {
        (0, 0x01) => "Invalid Command Opcode",
        (0, 0x02) => "Invalid Field in Command",
        (0, 0x0b) => "Invalid Namespace or Format",
        (1, 0x09) => "Invalid Log Page",
        _ => "error",
    }
}

// ---------------------------------------------------------------------------
// Health source
// ---------------------------------------------------------------------------

/// Samples the SMART log, and the OCP C0 log when the probe found it.
pub(crate) struct NvmeSource {
    dev: File,
    path: PathBuf,
    ocp: bool,
    note: Option<String>,
}

impl NvmeSource {
    /// Open `path` and probe it once: the SMART log must be readable and
    /// decodable; the OCP C0 log is optional.
    pub(crate) fn probe(path: &Path) -> Result<Self, HealthError> {
        let dev =
            File::open(path).map_err(|e| HealthError::Io { context: format!("open {}", path.display()), source: e })?;
        let page = admin_get_log_page(&dev, path, LID_SMART)?;
        decode_smart_log(&page)?;
        let (ocp, note) = match admin_get_log_page(&dev, path, LID_OCP_SMART_EXTENDED).and_then(|p| decode_ocp_c0(&p)) {
            Ok(Some(_)) => (true, None),
            Ok(None) => (
                false,
                Some(format!(
                    "{}: log page 0xC0 is not the OCP SMART extended log (GUID mismatch); \
                     no media bytes written, so no write amplification",
                    path.display()
                )),
            ),
            Err(e) => (
                false,
                Some(format!(
                    "{}: OCP SMART extended log 0xC0 not available ({e}); \
                     no media bytes written, so no write amplification",
                    path.display()
                )),
            ),
        };
        Ok(NvmeSource { dev, path: path.to_path_buf(), ocp, note })
    }
}

impl HealthSource for NvmeSource {
    fn sample(&mut self) -> Result<HealthSample, HealthError> {
        let t_ns = monotonic_raw_ns();
        let smart = decode_smart_log(&admin_get_log_page(&self.dev, &self.path, LID_SMART)?)?;
        // A failing C0 read mid-run degrades this one sample to SMART only.
        let ocp = if self.ocp {
            admin_get_log_page(&self.dev, &self.path, LID_OCP_SMART_EXTENDED)
                .and_then(|p| decode_ocp_c0(&p))
                .ok()
                .flatten()
        } else {
            None
        };
        Ok(sample_from_logs(t_ns, &smart, ocp.as_ref()))
    }

    fn name(&self) -> &'static str {
        if self.ocp {
            "nvme-smart+ocp"
        } else {
            "nvme-smart"
        }
    }

    fn detail(&self) -> Option<String> {
        self.note.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    const BIG: u128 = 0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210;

    fn put(page: &mut [u8], off: usize, bytes: &[u8]) {
        page[off..off + bytes.len()].copy_from_slice(bytes);
    }

    fn smart_fixture() -> Vec<u8> {
        let mut p = vec![0u8; LOG_PAGE_SIZE];
        p[0] = 0x05; // spare + reliability warnings
        put(&mut p, 1, &318u16.to_le_bytes()); // 44.85 C
        p[3] = 97;
        p[4] = 10;
        p[5] = 3;
        p[6] = 0x01;
        put(&mut p, 32, &BIG.to_le_bytes());
        put(&mut p, 48, &2_000_000u128.to_le_bytes());
        put(&mut p, 64, &3u128.to_le_bytes());
        put(&mut p, 80, &4u128.to_le_bytes());
        put(&mut p, 96, &5u128.to_le_bytes());
        put(&mut p, 112, &6u128.to_le_bytes());
        put(&mut p, 128, &(1u128 << 64 | 7).to_le_bytes());
        put(&mut p, 144, &8u128.to_le_bytes());
        put(&mut p, 160, &9u128.to_le_bytes());
        put(&mut p, 176, &10u128.to_le_bytes());
        put(&mut p, 192, &11u32.to_le_bytes());
        put(&mut p, 196, &12u32.to_le_bytes());
        put(&mut p, 200, &300u16.to_le_bytes()); // sensor 1
        put(&mut p, 202, &301u16.to_le_bytes()); // sensor 2
        put(&mut p, 214, &307u16.to_le_bytes()); // sensor 8
        put(&mut p, 216, &13u32.to_le_bytes());
        put(&mut p, 220, &14u32.to_le_bytes());
        put(&mut p, 224, &15u32.to_le_bytes());
        put(&mut p, 228, &16u32.to_le_bytes());
        p
    }

    fn ocp_fixture() -> Vec<u8> {
        let mut p = vec![0u8; LOG_PAGE_SIZE];
        put(&mut p, 0, &BIG.to_le_bytes());
        put(&mut p, 16, &(1u128 << 100).to_le_bytes());
        put(&mut p, 32, &[1, 2, 3, 4, 5, 6]);
        put(&mut p, 38, &100u16.to_le_bytes());
        put(&mut p, 40, &[6, 5, 4, 3, 2, 1]);
        put(&mut p, 46, &99u16.to_le_bytes());
        put(&mut p, 48, &17u64.to_le_bytes());
        put(&mut p, 56, &18u64.to_le_bytes());
        put(&mut p, 64, &19u64.to_le_bytes());
        put(&mut p, 72, &20u32.to_le_bytes());
        put(&mut p, 76, &21u32.to_le_bytes());
        p[80] = 22;
        put(&mut p, 81, &[1, 0, 0, 0, 0, 0, 0x80]);
        put(&mut p, 88, &23u32.to_le_bytes());
        put(&mut p, 92, &24u32.to_le_bytes());
        p[96] = 25;
        p[97] = 26;
        put(&mut p, 104, &27u64.to_le_bytes());
        put(&mut p, 112, &28u32.to_le_bytes());
        p[120] = 29;
        put(&mut p, 128, &30u16.to_le_bytes());
        put(&mut p, 136, &31u64.to_le_bytes());
        put(&mut p, 144, &32u64.to_le_bytes());
        put(&mut p, 152, &33u64.to_le_bytes());
        put(&mut p, 160, &34u128.to_le_bytes());
        put(&mut p, 176, &(u128::from(u64::MAX) + 35).to_le_bytes());
        put(&mut p, 192, &36u64.to_le_bytes());
        put(&mut p, 200, &37u64.to_le_bytes());
        put(&mut p, 494, &3u16.to_le_bytes());
        // GUID exactly as it appears on the wire (nvme-cli's scao_guid).
        put(
            &mut p,
            496,
            &[0xC5, 0xAF, 0x10, 0x28, 0xEA, 0xBF, 0xF2, 0xA4, 0x9C, 0x4F, 0x6F, 0x7C, 0xC9, 0x14, 0xD5, 0xAF],
        );
        p
    }

    #[test]
    fn decodes_every_smart_field() {
        let s = decode_smart_log(&smart_fixture()).unwrap();
        assert_eq!(s.critical_warning, 0x05);
        assert_eq!(s.composite_temperature_k, Some(318));
        assert!((s.composite_temperature_c().unwrap() - 44.85).abs() < 1e-9);
        assert_eq!(s.available_spare_pct, 97);
        assert_eq!(s.available_spare_threshold_pct, 10);
        assert_eq!(s.percentage_used, 3);
        assert_eq!(s.endurance_group_critical_warning, 1);
        assert_eq!(s.data_units_read, BIG);
        assert_eq!(s.data_units_written, 2_000_000);
        assert_eq!(s.host_read_commands, 3);
        assert_eq!(s.host_write_commands, 4);
        assert_eq!(s.controller_busy_time_min, 5);
        assert_eq!(s.power_cycles, 6);
        assert_eq!(s.power_on_hours, (1u128 << 64) + 7);
        assert_eq!(s.unsafe_shutdowns, 8);
        assert_eq!(s.media_errors, 9);
        assert_eq!(s.error_log_entries, 10);
        assert_eq!(s.warning_temp_time_min, 11);
        assert_eq!(s.critical_temp_time_min, 12);
        assert_eq!(s.temperature_sensors_k, [Some(300), Some(301), None, None, None, None, None, Some(307)]);
        assert_eq!(s.thermal_mgmt_t1_transitions, 13);
        assert_eq!(s.thermal_mgmt_t2_transitions, 14);
        assert_eq!(s.thermal_mgmt_t1_time_s, 15);
        assert_eq!(s.thermal_mgmt_t2_time_s, 16);
        assert_eq!(s.host_bytes_written(), 2_000_000 * 512_000);
        assert_eq!(s.host_bytes_read(), u128::MAX); // saturates
    }

    #[test]
    fn u128_counters_are_little_endian() {
        let mut p = vec![0u8; LOG_PAGE_SIZE];
        p[48] = 0x01; // least significant byte of data units written
        p[63] = 0x80; // most significant byte
        let s = decode_smart_log(&p).unwrap();
        assert_eq!(s.data_units_written, (1u128 << 127) | 1);
        assert_eq!(s.composite_temperature_k, None);
        assert_eq!(s.composite_temperature_c(), None);
    }

    #[test]
    fn short_pages_are_errors() {
        let e = decode_smart_log(&[0u8; 511]).unwrap_err();
        assert!(matches!(e, HealthError::ShortPage { lid: 0x02, len: 511, need: 512 }));
        assert!(matches!(decode_ocp_c0(&[]), Err(HealthError::ShortPage { lid: 0xC0, .. })));
        assert!(e.to_string().contains("511"));
    }

    #[test]
    fn decodes_every_ocp_field() {
        let o = decode_ocp_c0(&ocp_fixture()).unwrap().expect("GUID matches");
        assert_eq!(o.physical_media_bytes_written, BIG);
        assert_eq!(o.physical_media_bytes_read, 1u128 << 100);
        assert_eq!(o.bad_user_nand_blocks_raw, 0x0000_0605_0403_0201);
        assert_eq!(o.bad_user_nand_blocks_normalized, 100);
        assert_eq!(o.bad_system_nand_blocks_raw, 0x0000_0102_0304_0506);
        assert_eq!(o.bad_system_nand_blocks_normalized, 99);
        assert_eq!(o.xor_recovery_count, 17);
        assert_eq!(o.uncorrectable_read_errors, 18);
        assert_eq!(o.soft_ecc_errors, 19);
        assert_eq!(o.end_to_end_detected_errors, 20);
        assert_eq!(o.end_to_end_corrected_errors, 21);
        assert_eq!(o.system_data_used_pct, 22);
        assert_eq!(o.refresh_counts, 0x0080_0000_0000_0001);
        assert_eq!(o.user_data_erase_count_max, 23);
        assert_eq!(o.user_data_erase_count_min, 24);
        assert_eq!(o.thermal_throttling_events, 25);
        assert_eq!(o.thermal_throttling_status, 26);
        assert_eq!(o.pcie_correctable_errors, 27);
        assert_eq!(o.incomplete_shutdowns, 28);
        assert_eq!(o.percent_free_blocks, 29);
        assert_eq!(o.capacitor_health, 30);
        assert_eq!(o.unaligned_io, 31);
        assert_eq!(o.security_version, 32);
        assert_eq!(o.total_nuse, 33);
        assert_eq!(o.plp_start_count, 34);
        assert_eq!(o.endurance_estimate, u128::from(u64::MAX) + 35);
        assert_eq!(o.pcie_link_retraining_count, 36);
        assert_eq!(o.power_state_change_count, 37);
        assert_eq!(o.log_page_version, 3);
    }

    #[test]
    fn ocp_guid_constant_matches_wire_order() {
        assert_eq!(&ocp_fixture()[496..512], &OCP_C0_GUID.to_le_bytes());
    }

    #[test]
    fn ocp_guid_mismatch_is_none() {
        let mut p = ocp_fixture();
        p[511] ^= 0xff;
        assert_eq!(decode_ocp_c0(&p).unwrap(), None);
        // A vendor page with the GUID byte-reversed is not trusted either.
        let mut q = ocp_fixture();
        q[496..512].reverse();
        assert_eq!(decode_ocp_c0(&q).unwrap(), None);
        assert_eq!(decode_ocp_c0(&[0u8; 512]).unwrap(), None);
    }

    #[test]
    fn cdw10_encoding() {
        // 512 bytes = 128 dwords -> NUMDL 127.
        assert_eq!(get_log_page_cdw10(0x02, 512), 0x007F_8002);
        assert_eq!(get_log_page_cdw10(0xC0, 512), 0x007F_80C0);
        assert_eq!(get_log_page_cdw10(0x02, 4096), 0x03FF_8002);
        assert_eq!(get_log_page_cdw11(512), 0);
        // 256 KiB + 4: NUMD - 1 = 0x10000 -> NUMDL 0, NUMDU 1.
        assert_eq!(get_log_page_cdw10(0x02, 0x40004), 0x0000_8002);
        assert_eq!(get_log_page_cdw11(0x40004), 1);
    }

    #[test]
    fn admin_cmd_layout_matches_linux_header() {
        assert_eq!(std::mem::size_of::<NvmeAdminCmd>(), 72);
        assert_eq!(offset_of!(NvmeAdminCmd, opcode), 0);
        assert_eq!(offset_of!(NvmeAdminCmd, flags), 1);
        assert_eq!(offset_of!(NvmeAdminCmd, nsid), 4);
        assert_eq!(offset_of!(NvmeAdminCmd, cdw2), 8);
        assert_eq!(offset_of!(NvmeAdminCmd, metadata), 16);
        assert_eq!(offset_of!(NvmeAdminCmd, addr), 24);
        assert_eq!(offset_of!(NvmeAdminCmd, metadata_len), 32);
        assert_eq!(offset_of!(NvmeAdminCmd, data_len), 36);
        assert_eq!(offset_of!(NvmeAdminCmd, cdw10), 40);
        assert_eq!(offset_of!(NvmeAdminCmd, cdw15), 60);
        assert_eq!(offset_of!(NvmeAdminCmd, timeout_ms), 64);
        assert_eq!(offset_of!(NvmeAdminCmd, result), 68);
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "x86"))]
    #[test]
    fn ioctl_number() {
        // gcc: printf("%lx", NVME_IOCTL_ADMIN_CMD) on x86_64.
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
    }

    #[test]
    fn get_log_page_command_fields() {
        let c = get_log_page_cmd(LID_SMART, 0x1000, 512);
        assert_eq!(c.opcode, 0x02);
        assert_eq!(c.nsid, 0xFFFF_FFFF);
        assert_eq!(c.addr, 0x1000);
        assert_eq!(c.data_len, 512);
        assert_eq!(c.cdw10, 0x007F_8002);
        assert_eq!((c.cdw11, c.cdw12, c.cdw13, c.cdw14, c.cdw15), (0, 0, 0, 0, 0));
        assert_eq!((c.metadata, c.metadata_len, c.timeout_ms), (0, 0, 0));
    }

    #[test]
    fn status_names() {
        assert_eq!(nvme_status_name(0x4109), "Invalid Log Page"); // DNR set
        assert_eq!(nvme_status_name(0x0002), "Invalid Field in Command");
    }

    #[test]
    fn samples_from_logs() {
        let smart = decode_smart_log(&smart_fixture()).unwrap();
        let ocp = decode_ocp_c0(&ocp_fixture()).unwrap().unwrap();
        let s = sample_from_logs(42, &smart, Some(&ocp));
        assert_eq!(s.t_ns, 42);
        assert_eq!(s.source, "nvme-smart+ocp");
        assert!((s.temperature_c.unwrap() - 44.85).abs() < 1e-9);
        assert_eq!(s.host_bytes_written, Some(2_000_000 * 512_000));
        assert_eq!(s.media_bytes_written, Some(BIG));
        assert_eq!(s.media_bytes_read, Some(1u128 << 100));
        assert_eq!(s.media_errors, Some(9));
        assert_eq!(s.percentage_used, Some(3));
        assert_eq!(s.critical_warning, Some(5));
        assert_eq!(s.power_on_hours, Some((1u128 << 64) + 7));
        assert_eq!(s.available_spare_pct, Some(97));
        assert_eq!(s.unsafe_shutdowns, Some(8));

        let mut no_composite = smart.clone();
        no_composite.composite_temperature_k = None;
        let s = sample_from_logs(1, &no_composite, None);
        assert_eq!(s.source, "nvme-smart");
        assert_eq!(s.media_bytes_written, None);
        assert!((s.temperature_c.unwrap() - 26.85).abs() < 1e-9); // sensor 1
    }

    #[test]
    fn probe_of_non_nvme_file_fails_softly() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let err = NvmeSource::probe(f.path()).err().expect("not an NVMe device");
        let msg = err.to_string();
        assert!(msg.contains("Get Log Page 0x02"), "{msg}");
        assert!(msg.contains("not an NVMe device"), "{msg}");
        let missing = NvmeSource::probe(Path::new("/nonexistent/nvme0")).err().unwrap();
        assert!(missing.to_string().contains("open /nonexistent/nvme0"));
    }
}
