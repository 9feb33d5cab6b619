//! What makes a simulated drive behave like a real one rather than a clockwork: timing noise (`[noise]`),
//! heat and throttling (`[thermal]`) and failures (`[faults]`), as shared/device-model.md defines them.
//!
//! Every source draws from its own generator seeded from `device.seed` and the source's name, so the runs of
//! one device are repeatable and turning one source on never shifts the draws of another. A device without
//! the three sections carries none of this (`SsdDevice::extras` is None) and times exactly as before.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Geometric, StandardNormal};

use crate::config::{DeviceConfig, Thermal};
use crate::ssd::flash::Flash;
use crate::time::{Nanos, SimTime};

/// A generator of its own for one source of randomness.
fn stream(seed: u64, source: &str) -> SmallRng {
    // FNV-1a of the source's name, mixed with the device's seed.
    let name = source.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    SmallRng::seed_from_u64(seed ^ name)
}

/// An event that happens with probability `rate` at each chance, independently, drawn from its own stream.
///
/// A Bernoulli sequence is the same thing as geometric gaps between its events: the count of chances before
/// the next event is drawn once per event (exactly, by `rand_distr`'s `Geometric`), and each chance counts it
/// down, instead of one uniform draw per chance (a stall coin flip per command, a retry flip per page read).
struct Chance {
    rng: SmallRng,
    gaps: Geometric,
    /// Chances left before the next event.
    left: u64,
}

impl Chance {
    fn new(seed: u64, source: &str, rate: f64) -> Option<Chance> {
        (rate > 0.0).then(|| {
            let gaps = Geometric::new(rate.min(1.0)).expect("a rate in (0, 1]");
            let mut rng = stream(seed, source);
            let left = gaps.sample(&mut rng);
            Chance { rng, gaps, left }
        })
    }

    #[inline]
    fn happens(&mut self) -> bool {
        if self.left == 0 {
            self.left = self.gaps.sample(&mut self.rng);
            return true;
        }
        self.left -= 1;
        false
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

/// Lognormal factors drawn ahead at a time: one loop of normal draws and exponentials is cheaper than a draw per
/// NAND operation (the draws were a fifth of a noisy GC run).
const FACTORS_AHEAD: usize = 64;

/// How long each NAND operation takes: its configured time, times a lognormal factor of mean 1 (the
/// configured coefficient of variation), times the throttling factor while the drive is throttled.
pub struct NandTiming {
    rng: SmallRng,
    sigma: f64,
    mu: f64,
    /// The factors `exp(mu + sigma * z)` drawn ahead, used from `next` on.
    factors: [f64; FACTORS_AHEAD],
    next: usize,
    /// `2^(j/32)` for j = 0..32, for [`exp_close`].
    exp2_32nds: [f64; 32],
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
            exp2_32nds: std::array::from_fn(|j| (j as f64 / 32.0).exp2()),
            factor: 1.0,
        }
    }

    /// The operation's time: `base` times the throttling factor times the next lognormal factor, rounded to
    /// the nanosecond.
    #[inline]
    pub fn apply(&mut self, base: Nanos) -> Nanos {
        // Through i64: one instruction, the same value for any time below 2^63 ns.
        let a = base.0 as i64 as f64 * self.factor;
        if self.sigma <= 0.0 {
            return Nanos(round_positive(a));
        }
        if self.next == FACTORS_AHEAD {
            self.draw_ahead();
        }
        let i = self.next;
        self.next += 1;
        Nanos(round_positive(a * self.factors[i]))
    }

    #[inline(never)]
    fn draw_ahead(&mut self) {
        let (mu, sigma) = (self.mu, self.sigma);
        for f in &mut self.factors {
            let z: f64 = StandardNormal.sample(&mut self.rng);
            *f = mu + sigma * z;
        }
        for f in &mut self.factors {
            let x = *f;
            let close = exp_close(x, &self.exp2_32nds);
            // Beyond exp_close's range (|x| > 30: a normal draw past 23 standard deviations at the largest CV).
            *f = if close.is_nan() { x.exp() } else { close };
        }
        self.next = 0;
    }
}

/// `exp(x)` within 1e-14 (relative) for |x| <= 30, NaN beyond (the caller then falls back to
/// libm). Hand-written because libm's `exp` is a call per NAND operation that cannot be inlined or vectorised
/// (the largest part of a noisy GC run's draws): `x = (k + j/32) ln 2 + r` with |r| <= ln 2 / 64, `2^(j/32)`
/// from a table (`exp2_32nds`), `exp(r)` from its Taylor series to the 6th power (the remainder is below 4e-18).
#[inline]
fn exp_close(x: f64, exp2_32nds: &[f64; 32]) -> f64 {
    const N: f64 = 32.0;
    // Adding 1.5 * 2^52 rounds to the nearest integer, which then sits in the low bits of the sum.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    if x.is_nan() || x.abs() > 30.0 {
        return f64::NAN;
    }
    let kd = x * (N / std::f64::consts::LN_2) + SHIFT;
    // The integer is in the sum's low bits, in two's complement within the low 32 (|k| < 2^11 here).
    let k = kd.to_bits() as u32 as i32;
    let kd = kd - SHIFT;
    // ln 2 / 32 in two parts (fdlibm's split): the first has 32 significant bits, so `kd` times it is exact.
    const LN2_HI: f64 = 6.931_471_803_691_238e-1 / N;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10 / N;
    let r = (x - kd * LN2_HI) - kd * LN2_LO;
    let r2 = r * r;
    let p = 1.0 + r + r2 * (0.5 + r * (1.0 / 6.0)) + r2 * r2 * (1.0 / 24.0 + r * (1.0 / 120.0) + r2 * (1.0 / 720.0));
    let scale = f64::from_bits((((k >> 5) + 1023) as u64) << 52);
    exp2_32nds[(k & 31) as usize] * scale * p
}

/// `t.round() as u64` for a time in nanoseconds (0 <= t < 2^53), without the libm call `round` becomes on
/// x86-64 without SSE4.1 (5 % of a noisy GC run). Exact: the integer part converts back to f64 without loss
/// below 2^53, so `t - whole` is the exact fraction, and a fraction of one half rounds away from zero as
/// `round` does.
#[inline]
pub(crate) fn round_positive(t: f64) -> u64 {
    // Through i64, whose conversions are one instruction each way on x86-64 (u64's take a branch or a
    // five-instruction sequence); the same values below 2^53.
    let whole = t as i64;
    (if t - whole as f64 >= 0.5 { whole + 1 } else { whole }) as u64
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

    /// The sample mean and standard deviation (n - 1) of `xs`.
    fn mean_and_sd(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        (mean, (xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)).sqrt())
    }

    /// A bound on `exp_close`'s relative difference from the true exponential (a few units in the last place,
    /// 2.2e-16 each; the bound leaves a factor of ten).
    const EXP_CLOSE_ERROR: f64 = 1e-14;

    /// The factors drawn ahead are the exponentials of one normal draw per operation, in order: each time is
    /// `base * exp(mu + sigma * z)` to within the rounding of a nanosecond (the exponential is `exp_close`'s,
    /// within 1e-14 of libm's, so a product that lies that close to a half nanosecond may round the other way).
    #[test]
    fn nand_times_drawn_ahead_are_the_draws_one_at_a_time() {
        for (cv, throttle) in [(0.1, 1.0), (0.5, 1.0), (2.0, 1.0), (0.3, 2.5)] {
            let mut timing = NandTiming::new(5, cv);
            timing.factor = throttle;
            let mut rng = stream(5, "nand-time");
            let mut bases = stream(12, "bases");
            for _ in 0..200_000 {
                let base = Nanos(bases.random_range(0..5_000_000));
                let z: f64 = StandardNormal.sample(&mut rng);
                let expected = base.0 as f64 * throttle * (timing.mu + timing.sigma * z).exp();
                let got = timing.apply(base).0 as f64;
                assert!((got - expected).abs() <= 0.5 + 1e-9 * expected, "cv {cv}, base {base:?}: {got} vs {expected}");
            }
        }
    }

    /// The contract's distribution, on a large seeded sample of 1 ms operations: the mean stays the configured
    /// time and the coefficient of variation is the configured one, and the log of a factor is normal with mean
    /// mu = -sigma^2 / 2 and deviation sigma. Bounds: the sample mean's standard error is cv / sqrt(n) (1e-3 at
    /// cv 1, n = 10^6), allowed 0.5 %; the sample CV's relative standard error is about sqrt((kurtosis - 1) / 4n)
    /// (0.3 % at cv 1, where the lognormal's kurtosis is 41), allowed 2 %.
    #[test]
    fn nand_factors_have_the_configured_mean_and_cv() {
        const N: usize = 1_000_000;
        for cv in [0.05, 0.1, 0.3, 1.0] {
            let mut timing = NandTiming::new(21, cv);
            let times: Vec<f64> = (0..N).map(|_| timing.apply(Nanos(1_000_000)).0 as f64 / 1e6).collect();
            let (mean, sd) = mean_and_sd(&times);
            assert!((mean - 1.0).abs() < 0.005, "cv {cv}: mean factor {mean}");
            assert!((sd / mean / cv - 1.0).abs() < 0.02, "cv {cv}: measured cv {}", sd / mean);
            let logs: Vec<f64> = times.iter().map(|t| t.ln()).collect();
            let (log_mean, log_sd) = mean_and_sd(&logs);
            // Standard errors sigma / sqrt(n) and sigma / sqrt(2n): 5 of them allowed.
            assert!((log_mean - timing.mu).abs() < 5.0 * timing.sigma / 1e3, "cv {cv}: log mean {log_mean}");
            assert!((log_sd / timing.sigma - 1.0).abs() < 5.0 / (2.0 * N as f64).sqrt(), "cv {cv}: log sd {log_sd}");
            // A normal's share within one deviation of its mean: 68.27 %, standard error 0.047 % at this n.
            let within = logs.iter().filter(|l| (*l - timing.mu).abs() < timing.sigma).count() as f64 / N as f64;
            assert!((within - 0.6827).abs() < 0.0025, "cv {cv}: {within} within one sigma");
        }
    }

    /// Geometric gaps make the same Bernoulli sequence as a coin flip per chance: the rate, and no memory (the
    /// chance right after an event has the same rate as any other). Bounds: 5 binomial standard errors.
    #[test]
    fn chances_happen_at_their_rate_without_memory() {
        for rate in [0.0001, 0.002, 0.3, 0.9, 1.0] {
            let mut chance = Chance::new(3, "test", rate).expect("a positive rate");
            let n = 4_000_000;
            let flips: Vec<bool> = (0..n).map(|_| chance.happens()).collect();
            let events = flips.iter().filter(|&&f| f).count();
            let se = (rate * (1.0 - rate) / n as f64).sqrt();
            let share = events as f64 / n as f64;
            assert!((share - rate).abs() <= 5.0 * se + 1e-12, "rate {rate}: share {share}");
            let after: Vec<bool> = flips.windows(2).filter(|w| w[0]).map(|w| w[1]).collect();
            let share_after = after.iter().filter(|&&f| f).count() as f64 / after.len() as f64;
            let se_after = (rate * (1.0 - rate) / after.len() as f64).sqrt();
            assert!((share_after - rate).abs() <= 5.0 * se_after + 1e-12, "rate {rate}: {share_after} right after one");
        }
    }

    /// The host jitter is exponential with the configured mean: mean and CV (1 for an exponential) within 1 %
    /// (standard errors 0.1 % and about 0.1 % at n = 10^6), and the share above the mean e^-1.
    #[test]
    fn jitter_is_exponential_with_its_mean() {
        let mut jitter = ExpDelay::new(4, "host-jitter", Nanos(3_000)).expect("a positive mean");
        let n = 1_000_000;
        let xs: Vec<f64> = (0..n).map(|_| jitter.draw().0 as f64).collect();
        let (mean, sd) = mean_and_sd(&xs);
        assert!((mean / 3_000.0 - 1.0).abs() < 0.01, "mean {mean}");
        assert!((sd / mean - 1.0).abs() < 0.01, "cv {}", sd / mean);
        let above = xs.iter().filter(|&&x| x > 3_000.0).count() as f64 / n as f64;
        assert!((above - (-1.0f64).exp()).abs() < 0.003, "share above the mean {above}");
    }

    /// The exponential without libm stays within its bound over the exponents a CV up to 2 draws (and beyond),
    /// and gives NaN (so libm decides) outside its range.
    #[test]
    fn close_exponential_is_within_its_bound_of_libm() {
        let timing = NandTiming::new(1, 0.1);
        let mut rng = stream(9, "exp-close");
        let mut worst = 0.0f64;
        for i in 0..2_000_000 {
            let x = if i % 2 == 0 { rng.random_range(-1.0..1.0) } else { rng.random_range(-30.0..30.0) };
            let (close, exact) = (exp_close(x, &timing.exp2_32nds), x.exp());
            worst = worst.max(((close - exact) / exact).abs());
        }
        for x in [0.0, -0.0, 30.0, -30.0, std::f64::consts::LN_2, -std::f64::consts::LN_2 / 64.0] {
            worst = worst.max(((exp_close(x, &timing.exp2_32nds) - x.exp()) / x.exp()).abs());
        }
        assert!(worst < EXP_CLOSE_ERROR / 4.0, "relative difference up to {worst:e}");
        assert!(exp_close(31.0, &timing.exp2_32nds).is_nan() && exp_close(f64::NAN, &timing.exp2_32nds).is_nan());
    }
}
