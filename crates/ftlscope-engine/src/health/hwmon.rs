//! Temperature from the Linux hwmon class (`tempN_input`, millidegrees
//! Celsius). NVMe controllers (kernel >= 5.5, read by the kernel itself, so no
//! privileges needed) and SATA disks with the `drivetemp` module register one.
//!
//! Everything takes the sysfs root as a parameter so it can be tested against
//! a directory tree.

use std::fs;
use std::path::{Path, PathBuf};

use super::{monotonic_raw_ns, HealthError, HealthSample, HealthSource};

/// hwmon directories belonging to `device_dir` (a device directory in sysfs,
/// e.g. `/sys/block/nvme0n1/device`), lowest hwmon number first.
///
/// Looks at `DEVICE/hwmonN` (class-device parents such as an NVMe controller),
/// `DEVICE/hwmon/hwmonN` (bus-device parents such as a SCSI device), and
/// finally every `SYS/class/hwmon/*` whose `device` link resolves to the
/// device.
pub(crate) fn find_hwmon_dirs(sys_root: &Path, device_dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = Vec::new();
    let mut add = |p: PathBuf| {
        if let Some(n) = hwmon_number(&p) {
            let canon = fs::canonicalize(&p).unwrap_or(p);
            if !found.iter().any(|(_, q)| *q == canon) {
                found.push((n, canon));
            }
        }
    };
    for dir in [device_dir.to_path_buf(), device_dir.join("hwmon")] {
        for p in list_dir(&dir) {
            add(p);
        }
    }
    if let Ok(device) = fs::canonicalize(device_dir) {
        for p in list_dir(&sys_root.join("class/hwmon")) {
            if fs::canonicalize(p.join("device")).is_ok_and(|d| d == device) {
                add(p);
            }
        }
    }
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// The temperature input to sample in one hwmon directory: the one labelled
/// "Composite" (NVMe) if any, else the lowest-numbered `tempN_input`.
pub(crate) fn pick_temp_input(hwmon_dir: &Path) -> Option<PathBuf> {
    let mut inputs: Vec<(u32, PathBuf)> = list_dir(hwmon_dir)
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let n = name.strip_prefix("temp")?.strip_suffix("_input")?;
            Some((n.parse().ok()?, p))
        })
        .collect();
    inputs.sort();
    let composite = inputs.iter().find(|(n, _)| {
        fs::read_to_string(hwmon_dir.join(format!("temp{n}_label")))
            .is_ok_and(|l| l.trim().eq_ignore_ascii_case("composite"))
    });
    composite.or_else(|| inputs.first()).map(|(_, p)| p.clone())
}

/// The temperature input for a device: the first hwmon directory of the
/// device that has one.
pub(crate) fn find_temp_input(sys_root: &Path, device_dir: &Path) -> Option<PathBuf> {
    find_hwmon_dirs(sys_root, device_dir).iter().find_map(|d| pick_temp_input(d))
}

/// Parse a `tempN_input` value (integer millidegrees Celsius).
pub(crate) fn parse_millidegrees(text: &str) -> Result<f64, HealthError> {
    let t = text.trim();
    t.parse::<i64>()
        .map(|m| m as f64 / 1000.0)
        .map_err(|_| HealthError::Parse(format!("hwmon temperature {t:?} is not an integer")))
}

/// Read a `tempN_input` file in degrees Celsius.
pub(crate) fn read_temp_c(input: &Path) -> Result<f64, HealthError> {
    let text = fs::read_to_string(input)
        .map_err(|e| HealthError::Io { context: format!("read {}", input.display()), source: e })?;
    parse_millidegrees(&text)
}

/// Temperature-only health source.
pub(crate) struct HwmonSource {
    input: PathBuf,
    note: Option<String>,
}

impl HwmonSource {
    /// A source reading `input`; fails unless it is readable now.
    pub(crate) fn open(input: PathBuf, note: Option<String>) -> Result<Self, HealthError> {
        read_temp_c(&input)?;
        Ok(HwmonSource { input, note })
    }
}

impl HealthSource for HwmonSource {
    fn sample(&mut self) -> Result<HealthSample, HealthError> {
        let t_ns = monotonic_raw_ns();
        let mut s = HealthSample::new(t_ns, "hwmon");
        s.temperature_c = Some(read_temp_c(&self.input)?);
        Ok(s)
    }

    fn name(&self) -> &'static str {
        "hwmon"
    }

    fn detail(&self) -> Option<String> {
        let base = format!("temperature only, from {}", self.input.display());
        Some(match &self.note {
            Some(n) => format!("{n}; {base}"),
            None => base,
        })
    }
}

fn hwmon_number(p: &Path) -> Option<u32> {
    p.file_name()?.to_str()?.strip_prefix("hwmon")?.parse().ok()
}

fn list_dir(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir).map(|rd| rd.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn write(p: &Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn parses_millidegrees() {
        assert_eq!(parse_millidegrees("41850\n").unwrap(), 41.85);
        assert_eq!(parse_millidegrees("-5000").unwrap(), -5.0);
        assert!(matches!(parse_millidegrees("hot"), Err(HealthError::Parse(_))));
    }

    #[test]
    fn nvme_style_hwmon_under_controller() {
        // /sys/devices/pci/nvme/nvme0/{nvme0n1, hwmon2}; block link device -> nvme0.
        let t = tempfile::tempdir().unwrap();
        let sys = t.path();
        let ctrl = sys.join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        let hw = ctrl.join("hwmon2");
        write(&hw.join("temp1_input"), "41850\n");
        write(&hw.join("temp1_label"), "Composite\n");
        write(&hw.join("temp2_input"), "50000\n");
        write(&hw.join("temp2_label"), "Sensor 1\n");
        fs::create_dir_all(ctrl.join("nvme0n1")).unwrap();
        symlink("..", ctrl.join("nvme0n1/device")).unwrap();

        let device = ctrl.join("nvme0n1/device");
        let dirs = find_hwmon_dirs(sys, &device);
        assert_eq!(dirs, vec![fs::canonicalize(&hw).unwrap()]);
        let input = find_temp_input(sys, &device).unwrap();
        assert_eq!(input.file_name().unwrap(), "temp1_input");
        assert_eq!(read_temp_c(&input).unwrap(), 41.85);

        let mut src = HwmonSource::open(input, None).unwrap();
        let s = src.sample().unwrap();
        assert_eq!(s.source, "hwmon");
        assert_eq!(s.temperature_c, Some(41.85));
        assert_eq!(s.host_bytes_written, None);
        assert!(src.detail().unwrap().contains("temperature only"));
    }

    #[test]
    fn composite_label_wins_over_lower_number() {
        let t = tempfile::tempdir().unwrap();
        write(&t.path().join("temp1_input"), "20000");
        write(&t.path().join("temp1_label"), "Sensor 1");
        write(&t.path().join("temp3_input"), "30000");
        write(&t.path().join("temp3_label"), "Composite");
        let p = pick_temp_input(t.path()).unwrap();
        assert_eq!(p.file_name().unwrap(), "temp3_input");
        // Without labels the lowest number is used.
        fs::remove_file(t.path().join("temp3_label")).unwrap();
        write(&t.path().join("temp10_input"), "1");
        let p = pick_temp_input(t.path()).unwrap();
        assert_eq!(p.file_name().unwrap(), "temp1_input");
    }

    #[test]
    fn drivetemp_style_and_class_scan() {
        let t = tempfile::tempdir().unwrap();
        let sys = t.path();
        // SCSI device: DEVICE/hwmon/hwmon4
        let sdev = sys.join("devices/pci/ata1/host0/target0:0:0/0:0:0:0");
        write(&sdev.join("hwmon/hwmon4/temp1_input"), "35000");
        assert_eq!(read_temp_c(&find_temp_input(sys, &sdev).unwrap()).unwrap(), 35.0);

        // Elsewhere, found only through /sys/class/hwmon/hwmon9/device.
        let other = sys.join("devices/platform/thing");
        fs::create_dir_all(&other).unwrap();
        let hw9 = sys.join("devices/virtual/hwmon/hwmon9");
        write(&hw9.join("temp2_input"), "27500");
        symlink(&other, hw9.join("device")).unwrap();
        fs::create_dir_all(sys.join("class/hwmon")).unwrap();
        symlink(&hw9, sys.join("class/hwmon/hwmon9")).unwrap();
        let input = find_temp_input(sys, &other).unwrap();
        assert_eq!(read_temp_c(&input).unwrap(), 27.5);

        // A device without any sensor.
        let bare = sys.join("devices/virtio1");
        fs::create_dir_all(&bare).unwrap();
        assert!(find_temp_input(sys, &bare).is_none());
        assert!(find_hwmon_dirs(sys, Path::new("/nonexistent")).is_empty());
    }

    #[test]
    fn unreadable_input_is_an_error() {
        let err = HwmonSource::open(PathBuf::from("/nonexistent/temp1_input"), None).err().unwrap();
        assert!(err.to_string().contains("/nonexistent/temp1_input"));
    }
}
