//! What makes a simulated drive behave like a real one rather than a clockwork: timing noise (`[noise]`),
//! heat and throttling (`[thermal]`) and failures (`[faults]`), as shared/device-model.md defines them.
//!
//! Every source draws from its own generator seeded from `device.seed` and the source's name, so the runs of
//! one device are repeatable and turning one source on never shifts the draws of another. A device without
//! the three sections carries none of this (`SsdDevice::extras` is None) and times exactly as before.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, StandardNormal};

use crate::config::{DeviceConfig, Thermal};
use crate::ssd::flash::Flash;
use crate::time::{Nanos, SimTime};

/// A generator of its own for one source of randomness.
fn stream(seed: u64, source: &str) -> SmallRng {
    // FNV-1a of the source's name, mixed with the device's seed.
    let name = source.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    SmallRng::seed_from_u64(seed ^ name)
}

/// An event that happens with probability `rate`, drawn from its own stream.
struct Chance {
    rng: SmallRng,
    rate: f64,
}

impl Chance {
    fn new(seed: u64, source: &str, rate: f64) -> Option<Chance> {
        (rate > 0.0).then(|| Chance { rng: stream(seed, source), rate })
    }

    #[inline]
    fn happens(&mut self) -> bool {
        self.rng.random::<f64>() < self.rate
    }
}

/// An exponential delay, drawn from its own stream.
struct ExpDelay {
    rng: SmallRng,
    dist: Exp<f64>,
}

impl ExpDelay {
    fn new(seed: u64, source: &str, mean: Nanos) -> Option<ExpDelay> {
        (mean.0 > 0)
            .then(|| ExpDelay { rng: stream(seed, source), dist: Exp::new(1.0 / mean.0 as f64).expect("positive") })
    }

    #[inline]
    fn draw(&mut self) -> Nanos {
        Nanos(round_positive(self.dist.sample(&mut self.rng)))
    }
}

/// Lognormal factors drawn ahead at a time: one loop of normal draws and `exp`s is cheaper than a draw per NAND
/// operation (the draws were a fifth of a noisy GC run). The factors are the draws one at a time would give, in
/// the same order, so every completion time is as it was.
const FACTORS_AHEAD: usize = 64;

/// How long each NAND operation takes: its configured time, times a lognormal factor of mean 1 (the
/// configured coefficient of variation), times the throttling factor while the drive is throttled.
pub struct NandTiming {
    rng: SmallRng,
    sigma: f64,
    mu: f64,
    /// The lognormal factors drawn ahead, used from `next` on.
    factors: [f64; FACTORS_AHEAD],
    next: usize,
    /// 1 normally; `throttle_factor` while throttled.
    pub factor: f64,
}

impl NandTiming {
    pub fn new(seed: u64, cv: f64) -> NandTiming {
        // A lognormal exp(N(mu, sigma^2)) has CV^2 = exp(sigma^2) - 1 and mean exp(mu + sigma^2 / 2): mu
        // = -sigma^2 / 2 keeps the mean at the configured time.
        let sigma = (1.0 + cv * cv).ln().sqrt();
        NandTiming {
            rng: stream(seed, "nand-time"),
            sigma,
            mu: -sigma * sigma / 2.0,
            factors: [1.0; FACTORS_AHEAD],
            next: FACTORS_AHEAD,
            factor: 1.0,
        }
    }

    #[inline]
    pub fn apply(&mut self, base: Nanos) -> Nanos {
        let mut t = base.0 as f64 * self.factor;
        if self.sigma > 0.0 {
            if self.next == FACTORS_AHEAD {
                self.draw_ahead();
            }
            t *= self.factors[self.next];
            self.next += 1;
        }
        Nanos(round_positive(t))
    }

    #[inline(never)]
    fn draw_ahead(&mut self) {
        let (mu, sigma) = (self.mu, self.sigma);
        for f in &mut self.factors {
            let z: f64 = StandardNormal.sample(&mut self.rng);
            *f = (mu + sigma * z).exp();
        }
        self.next = 0;
    }
}

/// `t.round() as u64` for a time in nanoseconds (0 <= t < 2^53), without the libm call `round` becomes on
/// x86-64 without SSE4.1 (5 % of a noisy GC run). Exact: the integer part converts back to f64 without loss
/// below 2^53, so `t - whole` is the exact fraction, and a fraction of one half rounds away from zero as
/// `round` does.
#[inline]
pub(crate) fn round_positive(t: f64) -> u64 {
    let whole = t as u64;
    if t - whole as f64 >= 0.5 {
        whole + 1
    } else {
        whole
    }
}

/// Background housekeeping: a Poisson stream of operations, each holding one random unit busy.
struct Background {
    gaps: ExpDelay,
    units: SmallRng,
    busy: Nanos,
    next: SimTime,
}

/// Temperature: heated by NAND traffic, cooling linearly towards ambient, throttling with hysteresis.
struct Heat {
    cfg: Thermal,
    page_bytes: u64,
    temperature: f64,
    at: SimTime,
    media_pages: u64,
    throttling: bool,
    throttled_ns: u64,
}

impl Heat {
    fn cooled(&self, now: SimTime) -> f64 {
        let dt = (now - self.at).0 as f64 / 1e9;
        if self.temperature > self.cfg.ambient {
            (self.temperature - self.cfg.cooling * dt).max(self.cfg.ambient)
        } else {
            self.temperature
        }
    }

    /// Advance to `now`, with `media_pages` pages read or programmed in all so far; returns the NAND time
    /// factor from here on.
    fn update(&mut self, now: SimTime, media_pages: u64) -> f64 {
        if now > self.at {
            if self.throttling {
                self.throttled_ns += (now - self.at).0;
            }
            self.temperature = self.cooled(now);
            self.at = now;
        }
        let pages = media_pages - self.media_pages;
        self.media_pages = media_pages;
        self.temperature += pages as f64 * self.page_bytes as f64 / 1e9 * self.cfg.heat_per_gb;
        if self.temperature > self.cfg.throttle_above {
            self.throttling = true;
        } else if self.temperature < self.cfg.throttle_above - self.cfg.hysteresis {
            self.throttling = false;
        }
        if self.throttling {
            self.cfg.throttle_factor
        } else {
            1.0
        }
    }
}

/// Everything `[noise]`, `[thermal]` and `[faults]` add to a device.
pub struct Extras {
    jitter: Option<ExpDelay>,
    stall: Option<(Chance, Nanos)>,
    retry: Option<Chance>,
    background: Option<Background>,
    heat: Option<Heat>,
    media_error: Option<Chance>,
    bad_ranges: Vec<(u64, u64)>,
    stop_after: Option<SimTime>,
    lost: Option<Chance>,
    pub media_errors: u64,
}

impl Extras {
    /// None for a device without `[noise]`, `[thermal]` and `[faults]`.
    pub fn new(cfg: &DeviceConfig) -> Option<Extras> {
        if cfg.noise.is_none() && cfg.thermal.is_none() && cfg.faults.is_none() {
            return None;
        }
        let seed = cfg.device.seed;
        let mut x = Extras {
            jitter: None,
            stall: None,
            retry: None,
            background: None,
            heat: None,
            media_error: None,
            bad_ranges: Vec::new(),
            stop_after: None,
            lost: None,
            media_errors: 0,
        };
        if let Some(n) = &cfg.noise {
            x.jitter = ExpDelay::new(seed, "host-jitter", n.host_jitter);
            x.stall = Chance::new(seed, "stall", n.stall_rate).map(|c| (c, n.stall_latency));
            x.retry = Chance::new(seed, "read-retry", n.read_retry_rate);
            x.background = n.background_interval.and_then(|mean| {
                let mut gaps = ExpDelay::new(seed, "background-gap", mean)?;
                let first = SimTime::ZERO + gaps.draw();
                Some(Background { gaps, units: stream(seed, "background-unit"), busy: n.background_busy, next: first })
            });
        }
        if let Some(t) = &cfg.thermal {
            x.heat = Some(Heat {
                cfg: t.clone(),
                page_bytes: cfg.geometry.page_size,
                temperature: t.ambient,
                at: SimTime::ZERO,
                media_pages: 0,
                throttling: false,
                throttled_ns: 0,
            });
        }
        if let Some(f) = &cfg.faults {
            x.media_error = Chance::new(seed, "media-error", f.media_error_rate);
            x.bad_ranges = f.bad_ranges.iter().map(|r| (r.start, r.start + r.length)).collect();
            x.stop_after = f.stop_responding_after.map(|t| SimTime::ZERO + t);
            x.lost = Chance::new(seed, "lost-command", f.lost_command_rate);
        }
        Some(x)
    }

    /// The NAND timing a device with these extras needs: noise, throttling or both.
    pub fn nand_timing(cfg: &DeviceConfig) -> Option<NandTiming> {
        let cv = cfg.noise.as_ref().map_or(0.0, |n| n.latency_cv);
        (cv > 0.0 || cfg.thermal.is_some()).then(|| NandTiming::new(cfg.device.seed, cv))
    }

    /// Before a command at `now`: background operations that have started by now take their units, and the
    /// temperature (after `media_pages` pages of NAND traffic) sets the throttling factor.
    pub fn before(&mut self, now: SimTime, flash: &mut Flash, media_pages: u64) {
        if let Some(bg) = &mut self.background {
            if bg.next + bg.busy < now {
                // Operations that ended before now delay nothing any more: the stream of operations is
                // memoryless, so it may as well start again just before now (a long idle period costs
                // nothing).
                bg.next = SimTime(now.0 - bg.busy.0) + bg.gaps.draw();
            }
            while bg.next <= now {
                let unit = bg.units.random_range(0..flash.units());
                flash.occupy(unit, bg.next, bg.busy);
                bg.next += bg.gaps.draw();
            }
        }
        if let Some(heat) = &mut self.heat {
            let factor = heat.update(now, media_pages);
            flash.set_throttle(factor);
        }
    }

    /// Whether a page read needs one more read.
    #[inline]
    pub fn retry(&mut self) -> bool {
        self.retry.as_mut().is_some_and(Chance::happens)
    }

    /// Whether a page read fails after its retries.
    #[inline]
    pub fn media_error(&mut self) -> bool {
        self.media_error.as_mut().is_some_and(Chance::happens)
    }

    /// Whether a read of `[offset, offset + len)` touches a bad range.
    pub fn in_bad_range(&self, offset: u64, len: u64) -> bool {
        self.bad_ranges.iter().any(|&(start, end)| offset < end && start < offset + len.max(1))
    }

    /// A firmware stall this command meets (zero for most).
    #[inline]
    pub fn stall(&mut self) -> Nanos {
        match &mut self.stall {
            Some((chance, latency)) => {
                if chance.happens() {
                    *latency
                } else {
                    Nanos(0)
                }
            }
            None => Nanos(0),
        }
    }

    /// The host-side delay added to a completion.
    #[inline]
    pub fn jitter(&mut self) -> Nanos {
        self.jitter.as_mut().map_or(Nanos(0), ExpDelay::draw)
    }

    /// Whether a command submitted at `now` that would complete at `done` never completes.
    #[inline]
    pub fn lost(&mut self, now: SimTime, done: SimTime) -> bool {
        let hung = self.stop_after.is_some_and(|t| now >= t || done > t);
        // The lost-command draw is made for every command, so a hang does not shift later draws.
        let dropped = self.lost.as_mut().is_some_and(Chance::happens);
        hung || dropped
    }

    /// The temperature at `now` and the time spent throttled so far; None without `[thermal]`.
    pub fn thermal_state(&self, now: SimTime) -> Option<(f64, u64)> {
        self.heat.as_ref().map(|h| {
            let extra = if h.throttling { (now - h.at).0 } else { 0 };
            (h.cooled(now), h.throttled_ns + extra)
        })
    }
}

#[cfg(test)]
mod factors_ahead_tests {
    use super::*;

    /// The factors drawn ahead are those one draw per operation gives, in the same order: noisy completion
    /// times do not depend on the batching.
    #[test]
    fn nand_times_drawn_ahead_are_the_draws_one_at_a_time() {
        let mut timing = NandTiming::new(5, 0.3);
        let mut rng = stream(5, "nand-time");
        for i in 0..3 * FACTORS_AHEAD as u64 + 7 {
            let base = Nanos(1_000 + 37 * i);
            let z: f64 = StandardNormal.sample(&mut rng);
            let expected = base.0 as f64 * (timing.mu + timing.sigma * z).exp();
            assert_eq!(timing.apply(base).0, expected.round() as u64);
        }
    }
}
