//! ftlscope's simulated devices: an SSD (host interface, controller, FTL, flash back end) and an HDD, each a
//! deterministic model on a virtual clock whose configuration (shared/device-model.md) is the ground truth
//! every probe and experiment is checked against.

pub mod config;
pub mod device;
pub mod hdd;
pub mod keys;
pub mod parse;
pub mod presets;
pub mod ssd;
pub mod time;
