//! ftlscope's I/O engine: workloads, offset patterns, io_uring and psync backends, calibrated per-request
//! timing, statistics and device health.
//!
//! The public surface is small: describe a [`Workload`], open a [`Target`], and [`Run::start`] it (or
//! [`run`] to completion); the result carries per-operation summaries, time windows and the trace.

pub mod autoselect;
pub mod backend;
pub mod buffers;
pub mod clock;
pub mod engine;
pub mod health;
pub mod pattern;
mod queue;
mod real;
pub mod replay;
pub mod sim_driver;
pub mod stats;
pub mod target;
pub mod verify;
pub mod workload;
pub mod write_shim;

pub use engine::{in_hot_loop, run, run_sim, EngineChoice, OnError, Run, RunOptions, RunResult, StopReason};
pub use sim_driver::SimTarget;
pub use target::{Target, TargetInfo, TargetKind};
pub use workload::{DataPattern, Op, Pattern, Workload};
