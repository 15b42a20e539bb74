//! Rechecks: a floor, or memory's run times, under suspicion, compared
//! with the runs learned afresh at the level below.
//!
//! **The check below.** Processor sharing says how: below the knee a run
//! takes its work's time whatever else runs; past it every run is stretched
//! by the level over the knee (and by thrash). So at a floor F past the
//! knee, the level m = F / `probe_gain` under it runs faster, by at least F
//! / m where the knee is at or under m, by F over the knee (times its
//! thrash) where it is between; at a floor below the knee, as fast. The
//! site drains to m and a sequential test weighs the runs there against F's
//! baseline, as a probe above is weighed, with the alternatives "κ ×
//! `STRETCH` times faster" (the healthy side's scale profiled down as far
//! as it is profiled up for a probe above, in `estimator`: a baseline
//! learned long is its false alarm); undecided after as many runs as F's
//! baseline holds, it ends "as fast". Faster: m is the floor, a first
//! window again (its runs, once ready, the baseline), and F the ceiling. It
//! is checked below in turn where the search converges on it, and at once,
//! its runs ready, where they ran F / m times faster or more: a knee
//! between m and F speeds them by F over the knee, less than that while the
//! resource only shares, so m may be past the knee as well (bisecting up
//! from it would thrash a probe to prove what the check just showed). As
//! fast: F is back, checked for good, where its baseline ran at more than
//! m; where waits kept fewer of F's first cohort running at once (the level
//! a running job saw), the check compared a level with itself, and what ran
//! is the floor. Where the check is made because the search converged on F,
//! only while more than a probe's reach (`probe_gain` × F) of jobs is left:
//! with fewer, the level below could not pay back its cost before the run
//! ends. Its cost on a healthy site, once per run: the site runs at most F
//! for the drain (the jobs past m end, under a run) and m for the test (as
//! many runs at m as F's baseline holds, at most: about a run where that
//! baseline is one window's), about a wave of the site's jobs at `1 −
//! 1/probe_gain` of its throughput.

use super::*;

/// A level under suspicion, checked against the runs learned afresh at the
/// level below once the site has drained there.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Recheck {
    /// The level under suspicion.
    pub(super) floor: f64,
    /// What at that level is under suspicion.
    pub(super) suspect: Suspect,
    /// Its baseline (distribution and observations), set aside once the
    /// site has drained below it and the fresh sample begins.
    pub(super) baseline: Option<(Distribution, Vec<Observation>)>,
}

/// What a recheck puts to the test.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) enum Suspect {
    /// The floor itself: a probe above it proved the site thrashes (or its
    /// runs were slow against the other sites'), and it is where the
    /// baseline was learned, healthy only by assumption. If its runs were
    /// slowed by the level, the level below is the floor
    /// ([`Site::settle_recheck`]).
    Floor,
    /// Memory's run times: the level memory held healthy ran degraded by
    /// them ([`Site::check_memory`]). `ceiling` is the one before that
    /// verdict, the knee memory knew, which comes back if memory's runs
    /// prove to be another job's (the shared resource is the site's, not
    /// the run times'); it comes back as seen, as the verdict had made it
    /// (`degraded` drops an assumed ceiling's assumption first).
    Memory { ceiling: f64 },
}

impl Site {
    /// A level that a past run proved healthy ran degraded, judged by the
    /// run times that run remembered. Either the capacity dropped, and the
    /// jobs run at full speed at the level the cut leaves, or the jobs (or
    /// the site's hardware) changed since, and they run there as slowly as
    /// at `held`: a slowdown that does not fall when our level falls is not
    /// ours. Left untested, a job three times longer than the one remembered
    /// was cut to a third at every level in turn, down to one job per site
    /// (a hundred times the oracle's makespan). So the runs at the
    /// level cut to are learned afresh and compared with memory's
    /// (`settle_recheck`). Once per run: what this run learned is its own.
    pub(super) fn check_memory(&mut self, held: f64, ceiling: f64) {
        let remembered = self.dist.as_ref().is_some_and(Distribution::is_remembered);
        if remembered && !self.memory_checked && self.recheck().is_none() && self.floor < held {
            self.suspect(Recheck { floor: held, suspect: Suspect::Memory { ceiling }, baseline: None });
        }
    }

    /// What a degraded verdict put under suspicion, to be checked once the
    /// site has drained (only a draining site holds one to check).
    fn suspect(&mut self, suspect: Recheck) {
        if let Phase::Draining { recheck, .. } = &mut self.phase {
            *recheck = Some(suspect);
        }
    }

    /// The floor comes under suspicion: the window goes to the level below,
    /// and once the site has drained, the runs there are learned afresh
    /// (`begin_recheck`) and compared with the floor's (`settle_recheck`).
    pub(super) fn check_below(&mut self) {
        self.suspect(Recheck { floor: self.floor, suspect: Suspect::Floor, baseline: None });
        self.floor = (self.floor / self.rules.gain).floor().max(1.0);
    }

    /// Drained below a floor under suspicion: its baseline is set aside and
    /// the runs at the level below become the sample.
    pub(super) fn begin_recheck(&mut self, mut recheck: Recheck) {
        if recheck.baseline.is_none() {
            if let Some(dist) = self.dist.take() {
                recheck.baseline = Some((dist, std::mem::take(&mut self.observations)));
                self.clean.clear();
                self.sample_runs.clear();
                self.levels.clear();
            }
        }
        self.phase = Phase::Rechecking(recheck);
    }

    /// A floor under suspicion is settled by the sequential test of the
    /// runs below it against its baseline ([`Site::weigh_below`]): runs
    /// there faster by κ or more prove the floor's were slowed by its
    /// level, so the level below is the floor, a first window again (its
    /// runs, once known, are the baseline: `searched` false), and the old
    /// floor the ceiling. Else the old floor and its baseline come back,
    /// with these runs added to its sample. Memory's run times are
    /// compared by the two means instead ([`Site::settle_memory`]): there
    /// the question is which of two baselines holds, not whether one was
    /// slowed.
    pub(super) fn settle_recheck(&mut self, now: Time) -> Option<(Verdict, Vec<JobId>)> {
        let Phase::Rechecking(recheck) = &self.phase else { return None };
        let level = recheck.floor;
        if let Suspect::Memory { ceiling } = recheck.suspect {
            let (old, _) = recheck.baseline.as_ref()?;
            let new = self.dist.as_ref().filter(|_| self.ready())?;
            let error =
                (old.spread.powi(2) / old.ended as f64 + new.spread.powi(2) / new.ended as f64).sqrt();
            // At a polled site each sample's runs may read a poll off, all
            // alike: an error no number of runs averages.
            let margin = self.rules.scale_z * error + poll_lag(self.poll_period, new);
            let slowdown = old.mean() / new.mean();
            return self.settle_memory(now, level, ceiling, slowdown, margin);
        }
        let verdict = match self.weigh_below(now)? {
            Some(slowdown) => {
                self.phase = Phase::Testing;
                self.unchecked_baseline = Some(self.floor);
                // The floor judged may be all the site holds: a ceiling at
                // the cap would read as none, so it is the level a job under.
                self.ceiling = self.ceiling.min(level).min(self.cap - 1.0).max(self.floor + 1.0);
                self.ceiling_assumed = false;
                self.window = self.floor;
                self.searched = false;
                self.faster_than_ceiling = Some(slowdown);
                Verdict::Degraded { level, slowdown }
            }
            None => {
                let Phase::Rechecking(Recheck { baseline: Some((dist, observations)), .. }) =
                    std::mem::replace(&mut self.phase, Phase::Testing)
                else {
                    return None;
                };
                // What ran below counts too, where the floor's runs showed
                // less than the floor (`shown_healthy`).
                let level = match self.shown_healthy(level) {
                    shown if shown < level => shown.max(self.level_run(now).unwrap_or(0.0)).min(level),
                    _ => level,
                };
                self.unchecked_baseline = None;
                self.floor = level;
                self.window = level;
                self.dist = Some(dist);
                self.observations.extend(observations);
                self.estimate(now);
                Verdict::Healthy { level }
            }
        };
        self.conclude(now, verdict)
    }

    /// What a floor's baseline showed healthy: the floor, unless its runs
    /// ran at no more than the level below it (`floor / probe_gain`, where
    /// it is checked), where waits kept fewer of them running at once than
    /// the window. Then a check below compares a level with itself, and
    /// "as fast" says nothing of the floor: what is known healthy is the
    /// level they ran at.
    pub(super) fn shown_healthy(&self, floor: f64) -> f64 {
        match self.baseline_level {
            Some(ran) if ran <= floor / self.rules.gain => ran.max(1.0),
            _ => floor,
        }
    }

    /// The sequential test below a floor under suspicion: Wald's, as above
    /// a floor, with the alternatives "runs here are `κ × STRETCH` times
    /// faster than the floor's baseline" ([`Site::factors`]) against "as
    /// fast". Processor sharing predicts both: below the knee a run takes
    /// its work's time whatever else runs, so at a floor below the knee the
    /// level under it runs as fast; past the knee every run is stretched by
    /// the level over the knee (and by thrash), so a floor past it runs
    /// slower than the level under it by at least the two levels' ratio, or
    /// the floor's over the knee where that is less. Returns the least
    /// speedup proven, or `None` for "as fast" (below the lower threshold,
    /// or as many runs weighed as the baseline holds with no verdict);
    /// nothing while undecided.
    pub(super) fn weigh_below(&mut self, now: Time) -> Option<Option<f64>> {
        let (mean, sample) = self.floor_below().map(|d| (d.mean(), d.ended.max(READY_ENDED)))?;
        if now < self.next_eval {
            return None;
        }
        self.next_eval = now + (mean / EVALS).max(1.0);
        self.advance(now);
        if self.test.above <= 0.0 {
            return None;
        }
        let (llrs, _) = self.llrs(self.floor_below()?, now);
        let llr = llrs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if llr >= self.rules.upper {
            let k = llrs.iter().position(|&l| l >= self.rules.upper).unwrap_or(0);
            return Some(Some(self.rules.kappa * STRETCH[k]));
        }
        // Undecided after as many runs as the floor's baseline holds: the
        // comparison cannot resolve more than that baseline's own error.
        if llr > self.rules.lower && self.test.weighed < sample as f64 {
            return None;
        }
        Some(None)
    }

    /// Memory's run times against the runs at the level a verdict cut to
    /// (`check_memory`), `slowdown` the ratio of memory's mean to theirs,
    /// `margin` the relative error of that ratio (the two means' standard
    /// errors times `z`, and at a polled site one poll over the mean run).
    /// Runs there `κ` times slower than memory's and more, beyond that
    /// margin, mean the slowdown did not fall with our level: it was
    /// not the site's but the job's (or the hardware's), so `held`, the
    /// level judged, is the floor again under `ceiling`, the one memory knew, and
    /// this run's runs are the baseline. Runs there that much faster mean
    /// memory's runs were slowed (its floor past a knee, as when a first
    /// window is checked) or the job got shorter: either way the cut stands
    /// and this run's runs are the baseline. Within, memory holds and so
    /// does the cut (the capacity dropped); memory's distribution, the
    /// larger sample, is the baseline again.
    pub(super) fn settle_memory(
        &mut self,
        now: Time,
        held: f64,
        ceiling: f64,
        slowdown: f64,
        margin: f64,
    ) -> Option<(Verdict, Vec<JobId>)> {
        let bound = self.rules.kappa * (1.0 + margin);
        let Phase::Rechecking(Recheck { baseline: Some((memory, _)), .. }) =
            std::mem::replace(&mut self.phase, Phase::Testing)
        else {
            return None;
        };
        self.memory_checked = true;
        if slowdown * bound < 1.0 {
            self.floor = held;
            self.window = held;
            self.ceiling = ceiling.max(held);
            self.ceiling_assumed = false;
            if self.converged() {
                self.phase = Phase::Holding { since: now };
            }
        } else if slowdown <= bound {
            self.dist = Some(memory);
            self.observations.clear();
            self.clean.clear();
            self.sample_runs.clear();
            self.levels.clear();
        }
        self.conclude(now, Verdict::Healthy { level: self.floor })
    }
}
