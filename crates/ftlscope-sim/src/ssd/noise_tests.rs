//! `[noise]`, `[thermal]` and `[faults]`: seeded, with stated bounds.

use super::*;
use crate::device::Status;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The small device with every page type read in 50 us and a fast bus and host link, so a single-page
/// read's latency is mostly its sense time.
fn plain() -> DeviceConfig {
    let mut cfg = small_config();
    cfg.nand.read_latency = PerType { l: us(50), m: us(50), h: us(50) };
    cfg.nand.channel_rate = Rate(4e9);
    cfg
}

fn noise() -> Noise {
    Noise {
        latency_cv: 0.0,
        host_jitter: Nanos(0),
        read_retry_rate: 0.0,
        background_interval: None,
        background_busy: ms(1),
        stall_rate: 0.0,
        stall_latency: ms(3),
    }
}

fn faults() -> Faults {
    Faults { media_error_rate: 0.0, bad_ranges: vec![], stop_responding_after: None, lost_command_rate: 0.0 }
}

/// A written, flushed device and the instant it is idle.
fn filled(cfg: DeviceConfig) -> (SsdDevice, SimTime) {
    let mut dev = SsdDevice::new(cfg);
    let t = fill_sequentially(&mut dev) + ms(100);
    (dev, t)
}

/// `n` random single-page reads 1 ms apart (nothing queues): each one's completion.
fn spaced_reads(dev: &mut SsdDevice, start: SimTime, n: usize, seed: u64) -> Vec<Completion> {
    let pages = dev.capacity_bytes() / 4096;
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let at = start + ms(i as u64);
            let c = dev.submit_checked(at, &req(SimOp::Read, rng.random_range(0..pages) * 4096, 4096));
            Completion { at: SimTime(c.at.0.saturating_sub(at.0)), status: c.status }
        })
        .collect()
}

fn mean_cv(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt() / mean)
}

#[test]
fn empty_sections_time_exactly_like_no_sections() {
    let (mut quiet, t) = filled(plain());
    let mut cfg = plain();
    cfg.noise = Some(noise());
    cfg.faults = Some(faults());
    let (mut noisy, t2) = filled(cfg);
    assert_eq!(t, t2);
    let a: Vec<_> = spaced_reads(&mut quiet, t, 2000, 1);
    let b: Vec<_> = spaced_reads(&mut noisy, t, 2000, 1);
    assert_eq!(a, b);
}

#[test]
fn nand_times_are_lognormal_with_the_configured_cv_and_mean() {
    let (mut quiet, t) = filled(plain());
    let base = spaced_reads(&mut quiet, t, 1, 1)[0].at.0 as f64;
    let sense = 50_000.0;
    for cv in [0.1, 0.3, 1.0] {
        let mut cfg = plain();
        cfg.noise = Some(Noise { latency_cv: cv, ..noise() });
        let (mut dev, t) = filled(cfg);
        // The sense time's factor, from each read's latency.
        let factors: Vec<f64> =
            spaced_reads(&mut dev, t, 20_000, 2).iter().map(|c| (c.at.0 as f64 - base + sense) / sense).collect();
        let (mean, measured) = mean_cv(&factors);
        assert!((mean - 1.0).abs() < 0.05, "cv {cv}: mean factor {mean}");
        assert!((measured / cv - 1.0).abs() < 0.2, "cv {cv}: measured {measured}");
    }
}

#[test]
fn retries_read_the_page_again_and_count_as_nand_reads() {
    let mut cfg = plain();
    cfg.noise = Some(Noise { read_retry_rate: 0.05, ..noise() });
    let (mut dev, t) = filled(cfg);
    let before = dev.counters(t).media_bytes_read / 4096;
    let n = 20_000;
    let lat = spaced_reads(&mut dev, t, n, 3);
    let retries = dev.counters(t + ms(n as u64)).media_bytes_read / 4096 - before - n as u64;
    let share = retries as f64 / n as f64;
    assert!((0.04..0.06).contains(&share), "retry share {share}");
    // A retried read senses twice: exactly as many reads as retries are slower by about one sense time.
    let slow = lat.iter().filter(|c| c.at.0 > lat.iter().map(|c| c.at.0).min().unwrap() + 40_000).count();
    assert_eq!(slow as u64, retries);
}

#[test]
fn jitter_stalls_and_background_add_latency_within_bounds() {
    let (mut quiet, t) = filled(plain());
    let base = spaced_reads(&mut quiet, t, 1, 1)[0].at.0 as f64;
    let run = |n: Noise| {
        let mut cfg = plain();
        cfg.noise = Some(n);
        let (mut dev, t) = filled(cfg);
        spaced_reads(&mut dev, t, 20_000, 4).iter().map(|c| c.at.0 as f64 - base).collect::<Vec<f64>>()
    };
    let jitter = run(Noise { host_jitter: us(10), ..noise() });
    let (mean, cv) = mean_cv(&jitter);
    assert!((9_000.0..11_000.0).contains(&mean) && (0.9..1.1).contains(&cv), "jitter mean {mean} cv {cv}");

    let stalls = run(Noise { stall_rate: 0.01, stall_latency: ms(3), ..noise() });
    let share = stalls.iter().filter(|&&x| x == 3e6).count() as f64 / stalls.len() as f64;
    assert!((0.007..0.013).contains(&share), "stall share {share}");
    assert!(stalls.iter().all(|&x| x == 0.0 || x == 3e6));

    // One operation every 1 ms on average holds one of 8 units for 0.5 ms: a read finds its unit busy
    // 1/16 of the time and then waits 0.25 ms on average, about 16 us more per read.
    let background = run(Noise { background_interval: Some(ms(1)), background_busy: us(500), ..noise() });
    let (extra, _) = mean_cv(&background);
    assert!((10_000.0..24_000.0).contains(&extra), "background adds {extra} ns");
    let hit = background.iter().filter(|&&x| x > 0.0).count() as f64 / background.len() as f64;
    assert!((0.045..0.08).contains(&hit), "share of reads delayed {hit}");
}

#[test]
fn each_source_draws_from_its_own_stream() {
    let run = |n: Noise| {
        let mut cfg = plain();
        cfg.noise = Some(n);
        let (mut dev, t) = filled(cfg);
        spaced_reads(&mut dev, t, 5_000, 5).iter().map(|c| c.at.0).collect::<Vec<u64>>()
    };
    let nand = run(Noise { latency_cv: 0.3, ..noise() });
    let with_stalls = run(Noise { latency_cv: 0.3, stall_rate: 0.02, stall_latency: ms(1), ..noise() });
    let stalled = nand.iter().zip(&with_stalls).filter(|(a, b)| a != b).count();
    assert!(nand.iter().zip(&with_stalls).all(|(a, b)| b - a == 0 || b - a == 1_000_000));
    assert!(stalled > 50, "{stalled} stalls");
}

#[test]
fn temperature_rises_with_traffic_throttles_and_recovers() {
    let mut cfg = plain();
    cfg.thermal = Some(Thermal {
        ambient: 30.0,
        heat_per_gb: 100.0,
        cooling: 1.0,
        throttle_above: 40.0,
        throttle_factor: 3.0,
        hysteresis: 5.0,
    });
    let mut dev = SsdDevice::new(cfg);
    assert_eq!(dev.counters(SimTime::ZERO).temperature_c, Some(30.0));
    let cool = spaced_reads(&mut dev, SimTime::ZERO, 1, 1)[0].at; // unwritten: no NAND, no heat
                                                                  // Rewrite the 64 MiB device four times (256 MiB+ of NAND programs: +27 C less cooling), without pausing.
    let mut now = SimTime::ZERO;
    for round in 0..4 {
        for i in 0..64u64 {
            now = dev.submit(now, &req(SimOp::Write, i * MIB, MIB));
            let _ = round;
        }
    }
    now = dev.submit(now, &req(SimOp::Flush, 0, 0));
    let c = dev.counters(now);
    let hot = c.temperature_c.unwrap();
    assert!(hot > 40.0, "temperature {hot}");
    // Throttled: a read's sense time is three times as long.
    let t = now + ms(1);
    let throttled = dev.submit(t, &req(SimOp::Read, 0, 4096)) - t;
    let t = t + ms(2);
    let c = dev.counters(t);
    assert!(c.throttle_ns > 0, "throttle time shows in the counters");
    // Cooling at 1 C/s back under 35 C takes a while; then reads are fast again and throttle time stops.
    let later = t + Nanos(((hot - 34.0) * 1e9) as u64);
    let recovered = dev.submit(later, &req(SimOp::Read, 0, 4096)) - later;
    assert!(throttled.0 >= recovered.0 + 90_000, "throttled {throttled:?}, recovered {recovered:?}");
    let at_recovery = dev.counters(later).throttle_ns;
    assert_eq!(dev.counters(later + ms(5000)).throttle_ns, at_recovery);
    assert!(dev.counters(later + ms(5000)).temperature_c.unwrap() < 35.0);
    assert!(cool.0 < 20_000);
}

#[test]
fn bad_ranges_always_fail_and_media_errors_have_their_rate() {
    let mut cfg = plain();
    cfg.faults = Some(Faults { bad_ranges: vec![ByteRange { start: MIB, length: 64 * KIB }], ..faults() });
    let (mut dev, t) = filled(cfg);
    for i in 0..2048u64 {
        let offset = i * 2 * KIB;
        let c = dev.submit_checked(t + ms(i), &req(SimOp::Read, offset, 4 * KIB));
        let inside = offset < MIB + 64 * KIB && offset + 4 * KIB > MIB;
        assert_eq!(c.status == Status::MediaError, inside, "read at {offset}");
    }
    // Writes into a bad range succeed, and the data is intact.
    let w = dev.submit_checked(t + ms(5000), &req(SimOp::Write, MIB, 4096));
    assert_eq!(w.status, Status::Ok);
    assert!(matches!(dev.content(MIB / 4096), PageContent::Data(_)));

    let mut cfg = plain();
    cfg.faults = Some(Faults { media_error_rate: 0.01, ..faults() });
    let (mut dev, t) = filled(cfg);
    let done = spaced_reads(&mut dev, t, 20_000, 6);
    let failed = done.iter().filter(|c| c.status == Status::MediaError).count() as f64 / done.len() as f64;
    assert!((0.007..0.013).contains(&failed), "media error share {failed}");
    assert_eq!(dev.counters(t).media_errors as usize, done.iter().filter(|c| c.status == Status::MediaError).count());
}

#[test]
fn lost_commands_and_a_hung_device_never_complete() {
    let mut cfg = plain();
    cfg.faults = Some(Faults { lost_command_rate: 0.01, ..faults() });
    let (mut dev, t) = filled(cfg);
    let done = spaced_reads(&mut dev, t, 20_000, 7);
    let lost = done.iter().filter(|c| c.status == Status::Lost).count() as f64 / done.len() as f64;
    assert!((0.007..0.013).contains(&lost), "lost share {lost}");
    assert!(done.iter().all(|c| (c.status == Status::Lost) == (c.at.0 > 1_000_000_000)));

    let mut cfg = plain();
    cfg.faults = Some(Faults { stop_responding_after: Some(ms(2000)), ..faults() });
    let mut dev = SsdDevice::new(cfg);
    let before = dev.submit_checked(ms(1000).into_time(), &req(SimOp::Write, 0, 4096));
    assert_eq!(before.status, Status::Ok);
    let after = dev.submit_checked(ms(2000).into_time(), &req(SimOp::Write, 0, 4096));
    assert_eq!((after.status, after.at), (Status::Lost, SimTime::NEVER));
    assert_eq!(dev.submit(ms(3000).into_time(), &req(SimOp::Read, 0, 4096)), SimTime::NEVER);
}

trait IntoTime {
    fn into_time(self) -> SimTime;
}

impl IntoTime for Nanos {
    fn into_time(self) -> SimTime {
        SimTime(self.0)
    }
}

#[test]
fn the_fast_rounding_of_nand_times_agrees_with_round() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
    let edges = [0.0, 0.5, 1.5, 2.5, 0.49999999999999994, 4503599627370495.5, 1e15 + 0.5, 123456.5];
    for t in edges.into_iter().chain((0..100_000).map(|_| rng.random_range(0.0..1e10))) {
        assert_eq!(super::noise::round_positive(t), t.round() as u64, "{t}");
    }
}
