//! The healthy run-time distribution of one site, and the likelihood of a
//! job's run under "healthy" and "slowed by κ".
//!
//! Healthy run times are learned from jobs that ran only at levels already
//! known healthy. Jobs still running are right-censored observations, so the
//! distribution is the Kaplan–Meier estimate: an early look at a cohort
//! started together sees its short jobs end first, and a plain mean of the
//! ended ones would call every site fast and then every later job slow.
//!
//! The KM steps are smoothed with a Gaussian kernel (Silverman's bandwidth,
//! at least 1% of the mean): the longest of m healthy runs is not the longest
//! possible one, and a distribution that stopped dead at the sample's maximum
//! would take every job a little longer for proof of slowdown. What the KM
//! leaves unseen (jobs still running past the longest ended one), and at
//! least the 1/(n + 1) chance that the next run is the longest yet, goes
//! into an exponential tail as long as half a run — heavy on purpose, so
//! that jobs in it testify little. For a first cohort that share is taken
//! at its upper bound ([`Distribution::estimate_with_unseen_error`]).
//! Likelihoods also mix in `OUTLIERS`: one job in a hundred may be slow for
//! reasons of its own (a bad node, a slow file).

/// Share of jobs that may run outside the learned distribution for reasons
/// unrelated to load.
pub const OUTLIERS: f64 = 0.01;

/// Healthy run times stop being collected after this many ended jobs: the
/// jobs' own work does not change during a run, and a closed sample cannot be
/// drifted by jobs slowed by a later capacity drop.
pub const SAMPLE: usize = 64;

/// The share of the distribution that may still be unseen (jobs running past
/// the longest run ended) before a test may judge anything against it.
pub const READY_UNSEEN: f64 = 0.5;

/// Points of the density and survival table.
const TABLE: usize = 1024;

/// One observation: a run time, ended (`true`) or still running/cut short by
/// a failure (`false`, censored).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Observation {
    pub time: f64,
    pub ended: bool,
}

/// The learned distribution (see the module docs), tabulated.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Distribution {
    /// The table covers [start, start + step × TABLE).
    start: f64,
    step: f64,
    density: Vec<f64>,
    survival: Vec<f64>,
    /// Mass left unseen by the KM, spread from `tail_from` with this scale.
    unseen_mass: f64,
    first_seen: f64,
    tail_from: f64,
    tail_scale: f64,
    mean: f64,
    /// Ended observations it was built from.
    pub ended: usize,
    /// KM survival past the longest ended run (0: every job seen ended).
    pub unseen: f64,
    /// Standard deviation over mean of the runs seen end (0 if unknown).
    pub spread: f64,
    /// Where it was built from memory ([`Distribution::from_quantiles`]):
    /// the quantiles and range it came from, to be remembered again as they
    /// came (see [`Distribution::to_remember`]).
    remembered: Option<Remembered>,
}

/// Run-time quantiles at probabilities 0, 1/n, …, 1, and the shortest and
/// longest run they were taken from: a distribution as memory keeps it.
pub type Remembered = (Vec<f64>, Option<(f64, f64)>);

fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Upper tail of the standard normal (Abramowitz & Stegun 26.2.17, error <
/// 1e-7), given `pdf` = `normal_pdf(z)`: the kernel smoothing needs both,
/// and the exponential is most of their cost.
fn normal_upper_with_pdf(z: f64, pdf: f64) -> f64 {
    let x = z.abs();
    let t = 1.0 / (1.0 + 0.231_641_9 * x);
    let poly = t
        * (0.319_381_53
            + t * (-0.356_563_782 + t * (1.781_477_937 + t * (-1.821_255_978 + t * 1.330_274_429))));
    // The density is even: pdf(−z) = pdf(z) to the bit.
    let upper = pdf * poly;
    if z < 0.0 {
        1.0 - upper
    } else {
        upper
    }
}

impl Distribution {
    /// The smoothed Kaplan–Meier estimate from `obs`; `None` until at least
    /// two runs ended.
    #[cfg(test)]
    pub fn estimate(obs: &[Observation]) -> Option<Distribution> {
        Self::estimate_with_unseen_error(obs, 0.0)
    }

    /// The smoothed Kaplan–Meier estimate, with the mass put past the longest run
    /// seen taken `z` standard errors above the KM's unseen share. That share
    /// rests on the few jobs still at risk at the last runs seen; where jobs
    /// started together are censored together (a first cohort, once the
    /// probe above it begins), one run ending among the last four at risk
    /// takes a quarter of the survival left with it, and the tail that the
    /// cohort's still-running half will end in is made thin. The standard
    /// error is Greenwood's; where the last run seen emptied the risk set
    /// (survival 0 with jobs censored just before it), the bound is
    /// Wilson's on surviving that step with none of n having done so,
    /// z² / (n + z²). The bound never exceeds [`READY_UNSEEN`], and
    /// [`Distribution::unseen`] stays the KM's own.
    pub fn estimate_with_unseen_error(obs: &[Observation], z: f64) -> Option<Distribution> {
        let mut sorted: Vec<Observation> = obs.iter().copied().filter(|o| o.time > 0.0).collect();
        // Ended before censored at equal times (the KM convention).
        sorted.sort_by(|a, b| a.time.total_cmp(&b.time).then(b.ended.cmp(&a.ended)));
        let ended = sorted.iter().filter(|o| o.ended).count();
        if ended < 2 {
            return None;
        }
        let mut at_risk = sorted.len() as f64;
        let mut survival = 1.0;
        // Greenwood's Σ d / (n (n − d)), and the survival before a step that
        // emptied the risk set, with the jobs at risk there.
        let mut greenwood = 0.0;
        let mut emptied: Option<(f64, f64)> = None;
        let mut steps: Vec<(f64, f64)> = Vec::new(); // (time, mass)
        let mut i = 0;
        while i < sorted.len() {
            let t = sorted[i].time;
            let (mut d, mut c) = (0.0, 0.0);
            while i < sorted.len() && sorted[i].time == t {
                if sorted[i].ended {
                    d += 1.0;
                } else {
                    c += 1.0;
                }
                i += 1;
            }
            if d > 0.0 {
                if at_risk > d {
                    greenwood += d / (at_risk * (at_risk - d));
                } else {
                    emptied = Some((survival, at_risk));
                }
                let after = survival * (1.0 - d / at_risk);
                steps.push((t, survival - after));
                survival = after;
            }
            at_risk -= d + c;
        }
        let censored = ended < sorted.len();
        let bound = match emptied {
            _ if z <= 0.0 || !censored => survival,
            _ if survival > 0.0 => survival * (1.0 + z * greenwood.sqrt()),
            Some((before, n)) => before * z * z / (n + z * z),
            None => survival,
        };
        let bound = bound.min(READY_UNSEEN.max(survival));
        Some(Self::smoothed(&steps, survival, bound, ended))
    }

    /// From remembered quantiles (probabilities 0, 1/n, …, 1), e.g. of an
    /// earlier run: each quantile stands for an equal share of the runs.
    /// `seen` is the shortest and longest run that earlier run saw end: the
    /// quantiles come from a smoothed estimate, whose extremes lie outside
    /// what was seen by the kernel's spread; smoothed again, a warm start
    /// would take running jobs younger than any healthy run as evidence of
    /// a slowdown (hundreds of them at once on a big site). So no quantile
    /// is taken below the shortest run seen. The longest is left as it is:
    /// there the spread errs towards health (a point mass at the longest
    /// run would call every healthy job just past it slowed).
    pub fn from_quantiles(q: &[f64], seen: Option<(f64, f64)>) -> Option<Distribution> {
        if q.len() < 3
            || q.windows(2).any(|w| w[1] < w[0])
            || q[0].partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
            || q.iter().any(|x| !x.is_finite())
        {
            return None;
        }
        let shortest = match seen {
            Some((lo, hi)) if lo > 0.0 && lo <= hi => lo.min(q[q.len() - 1]),
            _ => q[0],
        };
        let share = 1.0 / q.len() as f64;
        let steps: Vec<(f64, f64)> = q.iter().map(|&t| (t.max(shortest), share)).collect();
        let mut d = Self::smoothed(&steps, 0.0, 0.0, SAMPLE);
        d.remembered = Some((q.to_vec(), seen));
        Some(d)
    }

    /// Whether it was built from memory, not from this run's own runs.
    pub fn is_remembered(&self) -> bool {
        self.remembered.is_some()
    }

    /// What memory keeps of it: `n + 1` quantiles and the range of the runs
    /// it was built from. One built from memory gives back what it was built
    /// from. Its quantiles lie outside the remembered ones by the kernel's
    /// spread, so a site that takes no sample of its own (a warm start
    /// never does) would remember them wider with every run: over four runs
    /// of train G0101 the 1/16 quantile went 139 → 128 → 114 → 90 s, runs
    /// of 137–312 s, until hundreds of healthy jobs survived past the
    /// shortest expected and a site of 988 slots was called 1.9 times
    /// slowed (docs/experiments.md, "Memory and warm starts").
    pub fn to_remember(&self, n: usize) -> Remembered {
        match &self.remembered {
            Some(remembered) => remembered.clone(),
            None => (self.quantiles(n), Some((self.shortest_seen(), self.longest_seen()))),
        }
    }

    /// `unseen` is the KM's survival past the last step, `bound` the mass
    /// to put there (at least `unseen`).
    fn smoothed(steps: &[(f64, f64)], unseen: f64, bound: f64, ended: usize) -> Distribution {
        // The next of n + 1 draws is the longest with probability 1/(n + 1):
        // that much mass lies past the longest run seen even when every run
        // ended, or a healthy job a little longer than all before it would
        // read as slowed.
        let unseen_mass = bound.max(unseen).max(1.0 / (ended as f64 + 1.0));
        let seen_total: f64 = steps.iter().map(|&(_, m)| m).sum();
        let scale = (1.0 - unseen_mass) / seen_total.max(1e-12);
        let steps: Vec<(f64, f64)> = steps.iter().map(|&(t, m)| (t, m * scale)).collect();
        let steps = &steps[..];
        let seen = 1.0 - unseen_mass;
        let mean_seen = steps.iter().map(|(t, m)| t * m).sum::<f64>() / seen.max(1e-12);
        let var = steps.iter().map(|(t, m)| m * (t - mean_seen).powi(2)).sum::<f64>() / seen.max(1e-12);
        let n = ended.max(2) as f64;
        let bandwidth = (1.06 * var.sqrt() * n.powf(-0.2)).max(0.01 * mean_seen).max(1.0);
        let first = steps[0].0;
        let last = steps[steps.len() - 1].0;
        let tail_scale = (0.5 * last).max(2.0 * bandwidth);
        let start = (first - 4.0 * bandwidth).max(0.0);
        let step = (last + 4.0 * bandwidth - start) / TABLE as f64;
        let mut density = Vec::with_capacity(TABLE);
        let mut survival = Vec::with_capacity(TABLE);
        for k in 0..TABLE {
            let t = start + step * k as f64;
            let (mut f, mut s) = (0.0, 0.0);
            for &(tk, m) in steps {
                let z = (t - tk) / bandwidth;
                let pdf = normal_pdf(z);
                f += m * pdf / bandwidth;
                s += m * normal_upper_with_pdf(z, pdf);
            }
            // The unseen mass waits past the last ended run.
            let dt = (t - last).max(0.0);
            f += if t >= last { unseen_mass / tail_scale * (-dt / tail_scale).exp() } else { 0.0 };
            s += unseen_mass * (-dt / tail_scale).exp();
            density.push(f);
            survival.push(s.min(1.0));
        }
        let mean = mean_seen * seen + unseen_mass * (last + tail_scale);
        Distribution {
            start,
            step,
            density,
            survival,
            unseen_mass,
            first_seen: first,
            tail_from: last,
            tail_scale,
            mean,
            ended,
            unseen,
            spread: var.sqrt() / mean_seen.max(1e-12),
            remembered: None,
        }
    }

    /// `n + 1` quantiles at probabilities 0, 1/n, …, 1 (to remember).
    pub fn quantiles(&self, n: usize) -> Vec<f64> {
        (0..=n).map(|i| self.quantile(i as f64 / n as f64)).collect()
    }

    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The run that a share `p` of runs ends by: the first table point
    /// whose survival falls to 1 − p.
    pub fn quantile(&self, p: f64) -> f64 {
        let k = self.survival.partition_point(|&s| s > 1.0 - p.clamp(0.005, 0.995));
        self.start + self.step * k.min(TABLE - 1) as f64
    }

    /// The shortest run that ended among those it was built from.
    pub fn shortest_seen(&self) -> f64 {
        self.first_seen
    }

    /// The longest run that ended among those it was built from.
    pub fn longest_seen(&self) -> f64 {
        self.tail_from
    }

    /// The outliers' density: uniform over twenty times the span.
    pub fn outlier_density(&self) -> f64 {
        1.0 / self.outlier_span()
    }

    /// The outliers' survival at `t`.
    pub fn outlier_survival(&self, t: f64) -> f64 {
        (1.0 - t / self.outlier_span()).max(0.0)
    }

    fn outlier_span(&self) -> f64 {
        20.0 * (self.start + self.step * TABLE as f64 + self.tail_scale)
    }

    /// Interpolates `table` at `t`; `None` past its end.
    fn lookup(&self, table: &[f64], t: f64) -> Option<f64> {
        let x = (t - self.start) / self.step;
        if x <= 0.0 {
            return Some(table[0]);
        }
        let k = x.floor() as usize;
        if k + 1 >= TABLE {
            return None;
        }
        let frac = x - k as f64;
        Some(table[k] * (1.0 - frac) + table[k + 1] * frac)
    }

    /// P(run time > t).
    pub fn survival(&self, t: f64) -> f64 {
        self.lookup(&self.survival, t)
            .unwrap_or_else(|| self.unseen_mass * (-(t - self.tail_from).max(0.0) / self.tail_scale).exp())
    }

    /// Density of run times at t.
    pub fn density(&self, t: f64) -> f64 {
        self.lookup(&self.density, t).unwrap_or_else(|| {
            self.unseen_mass / self.tail_scale * (-(t - self.tail_from).max(0.0) / self.tail_scale).exp()
        })
    }
}

/// How a job's run counts in a test of "run time past level L is slowed by
/// κ": `age` seconds since its start, `before` of them before the test began,
/// `above` of them (since) with more than L jobs running. Under the slowdown
/// the job has done `age − above (1 − 1/κ)` seconds of healthy work.
///
/// Both hypotheses allow the same 1% of outliers, whose run times have
/// nothing to do with load (uniform over twenty times the distribution's
/// span): a job far slower than either hypothesis says little about which
/// one holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exposure {
    pub age: f64,
    pub before: f64,
    pub above: f64,
}

impl Exposure {
    /// The same job as seen at `age` (younger than now): its time before
    /// the test and above the level shrunk in proportion.
    pub fn truncated(self, age: f64) -> Exposure {
        let f = if self.age > 0.0 { (age / self.age).clamp(0.0, 1.0) } else { 1.0 };
        Exposure { age: self.age * f, before: self.before * f, above: self.above * f }
    }

    /// The job as it was at `age` (younger than now), its time before the
    /// test first; its time above the level after that shrunk in
    /// proportion, since when in the test it ran above is not kept.
    pub fn cut_at(self, age: f64) -> Exposure {
        if age >= self.age {
            return self;
        }
        if age <= self.before {
            return Exposure { age, before: age, above: 0.0 };
        }
        let during = self.age - self.before;
        Exposure { age, before: self.before, above: self.above * (age - self.before) / during }
    }

    fn healthy_work(&self, kappa: f64) -> f64 {
        (self.age - self.above * (1.0 - 1.0 / kappa)).max(0.0)
    }

    /// Log-likelihood ratio of the job ending now, under "every run is
    /// `scale` times what the learned distribution says, and its time with
    /// more than L running is slowed by κ" ÷ healthy as learned;
    /// `slowed_now` says whether it ended while more than L ran. κ = 1 is
    /// the rescaled healthy hypothesis. `healthy` is the job's
    /// [`Exposure::ended_healthy`].
    pub fn ended_llr(
        &self,
        d: &Distribution,
        kappa: f64,
        scale: f64,
        slowed_now: bool,
        healthy: &Healthy,
    ) -> f64 {
        let rate = if slowed_now { 1.0 / kappa } else { 1.0 };
        let slowed =
            (1.0 - OUTLIERS) * d.density(self.healthy_work(kappa) / scale) * rate / scale + healthy.outlier;
        slowed.ln() - healthy.ln
    }

    /// The healthy side of [`Exposure::ended_llr`], which depends on neither
    /// κ nor the scale: a test weighs dozens of (κ, scale) hypotheses per
    /// job and takes this once.
    pub fn ended_healthy(&self, d: &Distribution) -> Healthy {
        let outlier = OUTLIERS * d.outlier_density();
        Healthy { outlier, ln: ((1.0 - OUTLIERS) * d.density(self.age) + outlier).ln() }
    }

    /// The same for the job having run this long without ending (still
    /// running, or cut short by a failure unrelated to load); `healthy` is
    /// its [`Exposure::running_healthy`].
    pub fn running_llr(&self, d: &Distribution, kappa: f64, scale: f64, healthy: &Healthy) -> f64 {
        let slowed = (1.0 - OUTLIERS) * d.survival(self.healthy_work(kappa) / scale) + healthy.outlier;
        slowed.ln() - healthy.ln
    }

    /// [`Exposure::ended_llr`] for a job taken to have ended somewhere
    /// between `since` (itself at an earlier age, [`Exposure::cut_at`]) and
    /// now: by the chance of that interval, S(since) − S(now), under each
    /// hypothesis, not by the density at its end. `healthy` is its
    /// [`Exposure::ended_between_healthy`].
    pub fn ended_between_llr(
        &self,
        since: &Exposure,
        d: &Distribution,
        kappa: f64,
        scale: f64,
        healthy: &Healthy,
    ) -> f64 {
        let survival = |e: &Exposure| d.survival(e.healthy_work(kappa) / scale);
        let slowed = (1.0 - OUTLIERS) * (survival(since) - survival(self)).max(0.0) + healthy.outlier;
        slowed.ln() - healthy.ln
    }

    /// The healthy side of [`Exposure::ended_between_llr`].
    pub fn ended_between_healthy(&self, since: &Exposure, d: &Distribution) -> Healthy {
        // The outliers' share of the interval, kept above zero so that no
        // hypothesis is ever impossible.
        let outlier = OUTLIERS * (d.outlier_survival(since.age) - d.outlier_survival(self.age)).max(1e-12);
        let chance = (d.survival(since.age) - d.survival(self.age)).max(0.0);
        Healthy { outlier, ln: ((1.0 - OUTLIERS) * chance + outlier).ln() }
    }

    /// The healthy side of [`Exposure::running_llr`].
    pub fn running_healthy(&self, d: &Distribution) -> Healthy {
        let outlier = OUTLIERS * d.outlier_survival(self.age);
        Healthy { outlier, ln: ((1.0 - OUTLIERS) * d.survival(self.age) + outlier).ln() }
    }
}

/// What a job that stopped testifies to in a test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Testimony {
    /// It ended at its age: the density there.
    Ended(Exposure),
    /// It ran at least this long: the survival to there (a job cut short
    /// by a failure, or one whose end is taken as no more than that).
    Survived(Exposure),
    /// It ended somewhere between the first (itself at an earlier age) and
    /// the second: the chance of that interval.
    EndedBetween(Exposure, Exposure),
}

impl Testimony {
    /// The job as weighed: its time above the level over its age.
    pub fn exposure(&self) -> Exposure {
        match *self {
            Testimony::Ended(e) | Testimony::Survived(e) | Testimony::EndedBetween(_, e) => e,
        }
    }

    /// Its likelihood under healthy as learned.
    pub fn healthy(&self, d: &Distribution) -> Healthy {
        match self {
            Testimony::Ended(e) => e.ended_healthy(d),
            Testimony::Survived(e) => e.running_healthy(d),
            Testimony::EndedBetween(since, e) => e.ended_between_healthy(since, d),
        }
    }

    /// Its log-likelihood ratio for κ and the scale (see
    /// [`Exposure::ended_llr`]); `healthy` is [`Testimony::healthy`].
    pub fn llr(&self, d: &Distribution, kappa: f64, scale: f64, slowed_now: bool, healthy: &Healthy) -> f64 {
        match self {
            Testimony::Ended(e) => e.ended_llr(d, kappa, scale, slowed_now, healthy),
            Testimony::Survived(e) => e.running_llr(d, kappa, scale, healthy),
            Testimony::EndedBetween(since, e) => e.ended_between_llr(since, d, kappa, scale, healthy),
        }
    }
}

/// A job's likelihood under "healthy as learned" (log), and the outliers'
/// share that every hypothesis mixes in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Healthy {
    outlier: f64,
    ln: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator for the tests (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn stream(seed: u64, stream: u64) -> Self {
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ stream.wrapping_add(0xD1B5_4A32_D192_ED03) | 1)
        }
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    fn ended(times: &[f64]) -> Vec<Observation> {
        times.iter().map(|&time| Observation { time, ended: true }).collect()
    }

    #[test]
    fn kaplan_meier_is_not_fooled_by_a_cohort_half_ended() {
        // Ten jobs of 100..=190 s started together; at t = 145 the five
        // shortest ended and five are still running. The median of what
        // ended (120) is short; the KM median is where half of all ten end.
        let mut obs = ended(&[100.0, 110.0, 120.0, 130.0, 140.0]);
        obs.extend((0..5).map(|_| Observation { time: 145.0, ended: false }));
        let d = Distribution::estimate(&obs).unwrap();
        let median = d.quantiles(2)[1];
        assert!(median >= 140.0, "KM median {median}");
        assert!((d.unseen - 0.5).abs() < 1e-12);
        // Nothing is known past 145, so a survival there is the tail's, not zero.
        assert!(d.survival(160.0) > 0.1);
    }

    #[test]
    fn densities_and_survivals_are_floored_and_consistent() {
        let d = Distribution::estimate(&ended(&[90.0, 100.0, 110.0, 120.0])).unwrap();
        assert!((d.survival(0.0) - 1.0).abs() < 1e-3 && d.survival(1e9) < 1e-12);
        assert!(d.density(1e9) < 1e-12 && d.density(0.0) < 1e-3 * d.density(105.0));
        // A job far slower than healthy is not evidence for "25% slower" alone.
        let late = Exposure { age: 1000.0, before: 0.0, above: 1000.0 };
        assert!(
            late.ended_llr(&d, 1.25, 1.0, true, &late.ended_healthy(&d)).abs() < 0.3,
            "{}",
            late.ended_llr(&d, 1.25, 1.0, true, &late.ended_healthy(&d))
        );
        // The mean is the knots' (a symmetric sample, centred on 105) but for
        // the share 1/(n + 1) = 1/5 reserved past the longest run (120), whose
        // tail reaches no further than a mean half a run beyond it.
        let reserved = 0.2 * (120.0 + 0.5 * 120.0 - 105.0);
        assert!(d.mean() > 105.0 && d.mean() <= 105.0 + reserved + 1.0, "{}", d.mean());
        let q = d.quantiles(4);
        assert_eq!(q.len(), 5);
        let back = Distribution::from_quantiles(&q, None).unwrap();
        assert!((back.mean() - d.mean()).abs() < 0.15 * d.mean(), "{} vs {}", back.mean(), d.mean());
    }

    /// What a warm start was given is what it hands the next run, however
    /// many runs it passes through; quantiles of the smoothed estimate
    /// would spread with every run.
    #[test]
    fn what_memory_gave_is_remembered_as_it_came_through_any_number_of_runs() {
        let runs: Vec<f64> = (0..32).map(|k| 336.0 + 396.0 * f64::from(k) / 31.0).collect();
        let d = Distribution::estimate(&ended(&runs)).unwrap();
        let first = d.to_remember(16);
        assert_eq!(
            first,
            (d.quantiles(16), Some((336.0, 732.0))),
            "learned: its quantiles and the runs' range"
        );
        let mut kept = first.clone();
        for run in 2..=6 {
            kept = Distribution::from_quantiles(&kept.0, kept.1).unwrap().to_remember(16);
            assert_eq!(kept, first, "run {run}");
        }
        // Taken through the smoothed estimate instead, the spread widens.
        let again = Distribution::from_quantiles(&first.0, first.1).unwrap().quantiles(16);
        assert!(again[1] < first.0[1] && again[15] > first.0[15], "{again:?} against {:?}", first.0);
    }

    /// A warm start judges running jobs no younger than the shortest run the
    /// earlier run saw, not from the smoothed quantiles' lowest, which the
    /// kernel spreads below it.
    #[test]
    fn remembered_quantiles_start_at_the_shortest_run_seen() {
        let runs: Vec<f64> = (0..32).map(|k| 336.0 + 396.0 * f64::from(k) / 31.0).collect();
        let d = Distribution::estimate(&ended(&runs)).unwrap();
        let seen = (d.shortest_seen(), d.longest_seen());
        assert_eq!(seen, (336.0, 732.0));
        let q = d.quantiles(16);
        // The smoothed estimate's extremes lie outside what was seen.
        assert!(q[0] < seen.0 && q[16] > seen.1, "{q:?}");
        let unbounded = Distribution::from_quantiles(&q, None).unwrap();
        assert!(unbounded.shortest_seen() < seen.0);
        let back = Distribution::from_quantiles(&q, Some(seen)).unwrap();
        assert_eq!(back.shortest_seen(), seen.0);
        assert!(back.longest_seen() >= seen.1);
        assert!((back.mean() - d.mean()).abs() < 0.05 * d.mean(), "{} vs {}", back.mean(), d.mean());
    }

    /// The test's false alarms: healthy runs (uniform jitter from none to
    /// ±50%) judged against a distribution learned from 32 other healthy
    /// runs. Of 200 healthy cohorts of 40 jobs, none may reach the verdict
    /// threshold for "25% slower" (ln 950 at α = 0.001, β = 0.05) and nearly
    /// all must lean healthy, whatever the spread.
    #[test]
    fn healthy_runs_do_not_look_slowed_whatever_the_jitter() {
        for (jitter, seed) in [(0.0, 1), (0.05, 2), (0.2, 3), (0.5, 4)] {
            let mut rng = Rng::stream(seed, 9);
            let mut draw = || 400.0 * (1.0 + jitter * (2.0 * rng.uniform() - 1.0));
            let base: Vec<f64> = (0..32).map(|_| draw()).collect();
            let d = Distribution::estimate(&ended(&base)).unwrap();
            let (mut alarms, mut leaning) = (0, 0);
            for _ in 0..200 {
                let llr: f64 = (0..40)
                    .map(|_| draw())
                    .map(|t| {
                        let e = Exposure { age: t, before: 0.0, above: t };
                        e.ended_llr(&d, 1.25, 1.0, true, &e.ended_healthy(&d))
                    })
                    .sum();
                alarms += usize::from(llr >= (0.95f64 / 0.001).ln());
                leaning += usize::from(llr > 0.0);
            }
            assert_eq!(alarms, 0, "jitter {jitter}: {alarms} of 200 healthy cohorts called slowed");
            assert!(leaning <= 10, "jitter {jitter}: {leaning} of 200 healthy cohorts leaned slowed");
        }
    }

    #[test]
    fn slowed_runs_are_told_apart_from_healthy_ones() {
        for (jitter, seed) in [(0.05, 5), (0.5, 6)] {
            let mut rng = Rng::stream(seed, 9);
            let mut draw = || 400.0 * (1.0 + jitter * (2.0 * rng.uniform() - 1.0));
            let base: Vec<f64> = (0..32).map(|_| draw()).collect();
            let d = Distribution::estimate(&ended(&base)).unwrap();
            let llr: f64 = (0..40)
                .map(|_| 1.3 * draw())
                .map(|t| {
                    let e = Exposure { age: t, before: 0.0, above: t };
                    e.ended_llr(&d, 1.25, 1.0, true, &e.ended_healthy(&d))
                })
                .sum();
            assert!(llr > 6.9, "jitter {jitter}: 40 jobs 30% slow give only {llr}");
        }
    }

    #[test]
    fn a_job_cut_at_an_earlier_age_keeps_its_time_before_the_test_first() {
        let job = Exposure { age: 650.0, before: 570.0, above: 60.0 };
        // Cut while the test had not begun: nothing of it was above.
        let early = job.cut_at(560.0);
        assert_eq!((early.age, early.before, early.above), (560.0, 560.0, 0.0));
        // Cut halfway through its time in the test: half its time above.
        let mid = job.cut_at(610.0);
        assert_eq!((mid.age, mid.before), (610.0, 570.0));
        assert!((mid.above - 30.0).abs() < 1e-9, "{mid:?}");
        // An age past its own is the job as it is.
        assert_eq!(job.cut_at(700.0), job);
    }

    fn observed(ended: &[f64], censored: &[f64]) -> Vec<Observation> {
        let ended = ended.iter().map(|&time| Observation { time, ended: true });
        ended.chain(censored.iter().map(|&time| Observation { time, ended: false })).collect()
    }

    #[test]
    fn the_unseen_share_taken_up_is_greenwoods_bound_or_wilsons_where_the_risk_set_emptied() {
        let estimate = |obs: &[Observation], z| Distribution::estimate_with_unseen_error(obs, z).unwrap();
        // Eight ended, four still running past them: the KM leaves a third
        // unseen, and one standard error up is more, but at most half.
        let ended: Vec<f64> = (0..8).map(|i| 100.0 + f64::from(i)).collect();
        let obs = observed(&ended, &[107.5; 4]);
        let (own, up) = (estimate(&obs, 0.0), estimate(&obs, 1.0));
        assert!(up.unseen_mass > own.unseen_mass, "{} vs {}", up.unseen_mass, own.unseen_mass);
        assert!(up.unseen_mass <= READY_UNSEEN, "{}", up.unseen_mass);
        assert_eq!(up.unseen, own.unseen, "the KM's own share is kept");
        // The last run ended as the only one at risk, the others censored
        // just before it: survival 0, and Wilson's bound on that step is
        // (survival before it) × z² / (1 + z²) = 6/9 × 1/2.
        let obs = observed(&[100.0, 101.0, 102.0, 110.0], &[105.0, 106.0, 107.0, 108.0, 109.0]);
        let (own, up) = (estimate(&obs, 0.0), estimate(&obs, 1.0));
        assert_eq!(own.unseen, 0.0);
        assert!((own.unseen_mass - 1.0 / 5.0).abs() < 1e-12, "1/(n + 1) of 4 ended: {}", own.unseen_mass);
        assert!((up.unseen_mass - 1.0 / 3.0).abs() < 1e-12, "{}", up.unseen_mass);
        // Nothing censored: nothing to take up.
        let all_ended = observed(&ended, &[]);
        assert_eq!(estimate(&all_ended, 1.0).unseen_mass, estimate(&all_ended, 0.0).unseen_mass);
    }
}
