//! What every simulated device offers the engine: submit a request at a virtual instant, learn when it
//! completes. Requests must be submitted in non-decreasing time order; the device is sequentially
//! consistent in that order (a read returns what the writes submitted before it left).

use serde::Serialize;

use crate::time::SimTime;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimOp {
    Read,
    Write,
    Trim,
    WriteZeroes,
    Flush,
}

#[derive(Clone, Copy, Debug)]
pub struct SimRequest {
    pub op: SimOp,
    pub offset: u64,
    pub len: u64,
    /// For writes: a fingerprint of the data written (the same for every page of the request).
    pub fingerprint: u32,
}

/// What a logical page holds, as a read would see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageContent {
    /// Never written, or trimmed: reads return zeroes without touching NAND.
    Unwritten,
    /// Written with Write Zeroes.
    Zeroes,
    /// Written with data of this fingerprint.
    Data(u32),
}

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// An unrecovered read error (`[faults]`): the command completes at its time, with an error, no data.
    MediaError,
    /// The command never completes (`[faults]` lost commands, or a device that stopped responding).
    Lost,
}

/// When and how a command completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// [`SimTime::NEVER`] for a lost command.
    pub at: SimTime,
    pub status: Status,
}

/// The counters a SMART log would hold.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Counters {
    pub host_bytes_read: u64,
    pub host_bytes_written: u64,
    pub media_bytes_written: u64,
    pub media_bytes_read: u64,
    pub erase_count: u64,
    pub power_on_ns: u64,
    pub power_cycles: u64,
    /// Degrees Celsius, when the model has `[thermal]`.
    pub temperature_c: Option<f64>,
    /// Time spent throttled (a real drive's warning-temperature time).
    pub throttle_ns: u64,
    /// Reads that failed with an unrecovered media error.
    pub media_errors: u64,
}

pub trait SimDevice: Send {
    /// Logical capacity exposed to the host.
    fn capacity_bytes(&self) -> u64;
    /// The LBA size exposed to the host.
    fn logical_block(&self) -> u64;
    /// Submit `request` at `now` (never earlier than a previous submission); returns its completion time.
    fn submit(&mut self, now: SimTime, request: &SimRequest) -> SimTime;
    /// Like [`SimDevice::submit`], with how the command ended: a model with `[faults]` can fail a read or
    /// never complete a command ([`SimDevice::submit`] then answers [`SimTime::NEVER`]).
    fn submit_checked(&mut self, now: SimTime, request: &SimRequest) -> Completion {
        Completion { at: self.submit(now, request), status: Status::Ok }
    }
    /// Commands the device reorders among (a disk's NCQ). A device with more than 1 is driven by
    /// [`SimDevice::enqueue`] and [`SimDevice::dispatch`], so that it can choose among the commands waiting
    /// when it becomes free; [`SimDevice::submit`] still serves one command at a time in arrival order.
    fn queue_depth(&self) -> u32 {
        1
    }
    /// Queue `request` (arrived at `now`, never earlier than a previous one) under `tag`.
    fn enqueue(&mut self, _now: SimTime, _request: &SimRequest, _tag: u64) {
        unreachable!("only a device with queue_depth() > 1 queues commands")
    }
    /// Start the next queued command if the device is free at `now`: its tag and completion.
    fn dispatch(&mut self, _now: SimTime) -> Option<(u64, SimTime)> {
        None
    }
    /// When the device will next be free to start a queued command, if one is waiting.
    fn next_dispatch(&self) -> Option<SimTime> {
        None
    }
    /// A hint that `request` will be submitted soon: the model may start loading the state it will need
    /// (a host-side cache prefetch). It must not change any result.
    fn prepare(&self, _request: &SimRequest) {}
    /// What logical page `lpn` (in units of [`SimDevice::content_granularity`]) holds now.
    fn content(&self, lpn: u64) -> PageContent;
    /// The unit of [`SimDevice::content`]: the page size of an SSD, the logical block of an HDD.
    fn content_granularity(&self) -> u64;
    fn counters(&self, now: SimTime) -> Counters;
    /// Bytes the model holds for its mapping state (logical-to-physical and back), allocated so far.
    fn mapping_bytes(&self) -> u64 {
        0
    }
    /// Controller reset (seed 000 §3.4): in-flight work finishes, caches are kept.
    fn controller_reset(&mut self, now: SimTime) -> SimTime;
    /// Power cycle: volatile caches are flushed (as on a clean shutdown) and then empty.
    fn power_cycle(&mut self, now: SimTime) -> SimTime;
}

/// The model a configuration describes: the SSD or the HDD.
pub fn build(cfg: crate::config::DeviceConfig) -> Box<dyn SimDevice> {
    use crate::config::DeviceKind;
    match cfg.device.kind {
        DeviceKind::Ssd => Box::new(crate::ssd::SsdDevice::new(cfg)),
        DeviceKind::Hdd => {
            let hdd = cfg.hdd.as_ref().expect("the parser requires [hdd] for kind = \"hdd\"");
            Box::new(crate::hdd::HddDevice::new(&cfg.device, &cfg.controller, hdd))
        }
    }
}

/// A device from `spec`: a preset name, or a path to a TOML file (`sim:` already stripped).
pub fn open(spec: &str) -> Result<crate::config::DeviceConfig, crate::parse::ConfigError> {
    let path = std::path::Path::new(spec);
    if crate::presets::get(spec).is_some() || !(path.exists() || spec.contains('/') || spec.ends_with(".toml")) {
        // A bare name that is no file: it was meant as a preset (the error lists them).
        return crate::presets::load(spec);
    }
    crate::parse::load_device(path)
}
