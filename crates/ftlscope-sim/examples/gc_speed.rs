//! Steady-state garbage-collection speed of the simulated SSD alone (no engine): a random-order fill of
//! the whole drive, then rounds of 4 KiB random writes at queue depth 32, each round timed.
//!
//!     cargo run --release -p ftlscope-sim --example gc_speed [--noise] [PRESET|DEVICE.toml] [MILLIONS_PER_ROUND] [ROUNDS]
//!
//! The default device is `examples/gc_speed_device.toml` (the consumer-tlc-dram preset before its 1 MiB read fit).
//! `--noise` gives the device device-model.md's example `[noise]` section (issue 15: noise must keep steady GC
//! above 1 M requests per CPU second); the checksums then pin nothing (noisy times may change with the draws).
//!
//! Instruction counts without a PMU (virtual machines often have none):
//!     valgrind --tool=callgrind --collect-atstart=no --toggle-collect='gc_speed::steady_round' ...

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use ftlscope_sim::config::Noise;
use ftlscope_sim::device::{build, open, SimDevice, SimOp, SimRequest};
use ftlscope_sim::time::{Nanos, SimTime};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The device and its 32 outstanding writes.
struct Host {
    device: Box<dyn SimDevice>,
    completions: BinaryHeap<Reverse<u64>>,
    writes: u64,
    /// A hash of every completion time: any change to the model's timing changes it.
    checksum: u64,
}

impl Host {
    /// Write page `lpn` as soon as one of the 32 slots completes.
    #[inline]
    fn write(&mut self, lpn: u64) {
        let Reverse(now) = self.completions.pop().expect("32 in flight");
        self.writes += 1;
        let req = SimRequest { op: SimOp::Write, offset: lpn * 4096, len: 4096, fingerprint: self.writes as u32 };
        let done = self.device.submit(SimTime(now), &req);
        self.checksum = (self.checksum ^ done.ns()).wrapping_mul(0x100_0000_01b3);
        self.completions.push(Reverse(done.ns().max(now)));
    }

    fn report(&self, label: &str, n: u64, start: (Instant, f64), media_before: u64) {
        let wall = start.0.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - start.1;
        let media = self.device.counters(SimTime(0)).media_bytes_written - media_before;
        let wa = media as f64 / (n * 4096) as f64;
        let rate = n as f64 / cpu;
        println!(
            "{label:>8}: {n:>11} writes {wall:6.2} s wall {cpu:6.2} s CPU {rate:>12.0} req/CPU-s  WA {wa:.2}  \
             timing {:016x}",
            self.checksum
        );
    }
}

/// CPU time this process has used: on a shared machine wall time says more about the neighbours.
fn cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Every page once, in a scattered order (an odd multiplier modulo a power of two is a permutation).
#[inline(never)]
fn fill(host: &mut Host, pages: u64) {
    let span = pages.next_power_of_two();
    let mut i = 0u64;
    for _ in 0..pages {
        let lpn = loop {
            let lpn = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & (span - 1);
            i += 1;
            if lpn < pages {
                break lpn;
            }
        };
        host.write(lpn);
    }
}

/// Uniform random pages, each announced to the device a few writes ahead (as the engine does).
#[inline(never)]
fn steady_round(host: &mut Host, rng: &mut SmallRng, pages: u64, n: u64) {
    const AHEAD: usize = 4;
    let mut coming = [0u64; AHEAD];
    for lpn in &mut coming {
        *lpn = rng.random_range(0..pages);
    }
    for i in 0..n as usize {
        let lpn = coming[i % AHEAD];
        coming[i % AHEAD] = rng.random_range(0..pages);
        let hint = SimRequest { op: SimOp::Write, offset: coming[i % AHEAD] * 4096, len: 4096, fingerprint: 0 };
        host.device.prepare(&hint);
        host.write(lpn);
    }
}

/// device-model.md's example `[noise]` section.
fn example_noise() -> Noise {
    Noise {
        latency_cv: 0.10,
        host_jitter: Nanos(3_000),
        read_retry_rate: 0.002,
        background_interval: Some(Nanos(20_000_000)),
        background_busy: Nanos(1_000_000),
        stall_rate: 0.0001,
        stall_latency: Nanos(3_000_000),
    }
}

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let noisy = all.iter().any(|a| a == "--noise");
    let mut args = all.into_iter().filter(|a| a != "--noise");
    // The default device is a frozen copy of consumer-tlc-dram (gc_speed_device.toml), so refitting the preset
    // does not move the checksums that pin the simulator's timing.
    let spec =
        args.next().unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gc_speed_device.toml").into());
    let millions: f64 = args.next().map_or(5.0, |s| s.parse().expect("a number of millions"));
    let mut cfg = open(&spec).expect("a preset or a device file");
    if noisy {
        cfg.noise = Some(example_noise());
        println!("with device-model.md's example [noise] section");
    }
    let device = build(cfg);
    let pages = device.capacity_bytes() / 4096;
    let mut host = Host { device, completions: (0..32).map(|_| Reverse(0)).collect(), writes: 0, checksum: 0 };
    let media = |h: &Host| h.device.counters(SimTime(0)).media_bytes_written;
    let (start, before) = ((Instant::now(), cpu_seconds()), media(&host));
    fill(&mut host, pages);
    host.report("fill", pages, start, before);
    let mut rng = SmallRng::seed_from_u64(7);
    let n = (millions * 1e6) as u64;
    let rounds: usize = args.next().map_or(4, |s| s.parse().expect("a number of rounds"));
    for round in 0..rounds {
        let (start, before) = ((Instant::now(), cpu_seconds()), media(&host));
        steady_round(&mut host, &mut rng, pages, n);
        host.report(&format!("random{round}"), n, start, before);
    }
}
