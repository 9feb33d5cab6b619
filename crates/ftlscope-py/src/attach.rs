//! `ftlscope sim attach`'s server, seen from Python: the drive mounted as a FUSE file, calibrated, then
//! answering on the model's clock (crate `ftlscope-serve`).

use std::path::Path;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

/// A simulated drive served as a file in a FUSE mount until [`AttachedDrive::stop`].
#[pyclass(module = "ftlscope._native")]
pub struct AttachedDrive {
    served: Option<ftlscope_serve::Served>,
    block: u64,
}

#[pymethods]
impl AttachedDrive {
    /// Build the model from `spec` (a preset or a TOML path) and mount it at `mountpoint` as file `name`,
    /// its data in `backing` (`size` bytes, sparse).
    #[new]
    fn new(py: Python<'_>, spec: &str, size: u64, backing: &str, mountpoint: &str, name: &str) -> PyResult<Self> {
        let cfg = ftlscope_sim::device::open(spec).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let device = ftlscope_sim::device::build(cfg);
        let block = device.logical_block();
        let served = py
            .allow_threads(|| ftlscope_serve::serve(device, size, Path::new(backing), Path::new(mountpoint), name))
            .map_err(|e| PyOSError::new_err(format!("cannot mount the drive at {mountpoint}: {e}")))?;
        Ok(AttachedDrive { served: Some(served), block })
    }

    /// The served file's path (inside the mount).
    #[getter]
    fn file(&self) -> String {
        self.served.as_ref().map(|s| s.file.display().to_string()).unwrap_or_default()
    }

    /// Time `count` QD 1 reads of the loop device `device` while the drive answers at once: the path's
    /// overhead per request, as JSON.
    fn calibrate(&self, py: Python<'_>, device: &str, count: u32) -> PyResult<String> {
        let block = self.block;
        let overhead = py
            .allow_threads(|| ftlscope_serve::calibrate(Path::new(device), count, block))
            .map_err(|e| PyOSError::new_err(format!("calibrating the path through {device}: {e}")))?;
        Ok(serde_json::to_string(&overhead).expect("serialisable"))
    }

    /// Answer on the model's clock from now on, early by the calibrated path overhead: `overhead_ns` plus
    /// `ps_per_byte` per byte of the request.
    fn start_model(&self, overhead_ns: u64, ps_per_byte: u64) {
        if let Some(s) = &self.served {
            s.drive.start_model(overhead_ns, ps_per_byte);
        }
    }

    /// The served drive's counters, as JSON.
    fn stats(&self) -> String {
        let stats = self.served.as_ref().map(|s| s.drive.stats()).unwrap_or_default();
        serde_json::to_string(&stats).expect("serialisable")
    }

    /// Unmount and stop serving.
    fn stop(&mut self, py: Python<'_>) -> PyResult<()> {
        if let Some(mut served) = self.served.take() {
            py.allow_threads(|| served.stop()).map_err(|e| PyOSError::new_err(format!("unmounting: {e}")))?;
        }
        Ok(())
    }
}
