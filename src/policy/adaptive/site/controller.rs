//! The window controller: what a verdict does to the floor, the ceiling
//! and the window; draining, re-probing, giving a site up; and what the
//! planner is told of the site.
//!
//! **The rule, in full.**
//! - *Start* at `initial_window` jobs (a site's own in sites.toml, where
//!   its operator knows better), taken as below any knee: their runs are
//!   the baseline.
//! - *Healthy at level n*: the floor goes to n, the window to `probe_gain`
//!   × the floor while no ceiling is known (to every job left of the run
//!   where they are within one more probe's overshoot, `probe_gain` × that:
//!   the search would end about when they do, and its last step would
//!   leave a wave of its own; not on the first window's runs, which are
//!   taken healthy, not shown so), else to the geometric middle of floor
//!   and ceiling (the thesis's binary search).
//! - *Degraded at n*, with s the least slowdown the evidence proves: the
//!   site delivered what n / s jobs at full speed would, so the window goes
//!   there (never below the floor; to the floor where the proof rests on
//!   jobs still running, as s is then only a bound) and the ceiling to n.
//!   The site drains, getting nothing, while its test goes on; a larger s
//!   proven later cuts deeper. Running jobs are removed only where that
//!   costs less than keeping them: n / s more than κ below the window
//!   proves the resource thrashes, and the youngest jobs past the window go
//!   back to the pool.
//! - *Converged* (ceiling within 1 + `precision` of the floor): the level is
//!   held and watched for a drop, and after `reprobe_after` mean run times
//!   the level above is tried, with the ceiling assumed at `probe_gain`
//!   times the old one; a floor that reaches an assumed ceiling healthy
//!   probes on as if no ceiling were known. A search that saw no knee ends
//!   at the slots.
//! - *A wrong start.* A first window past the knee slows the baseline too,
//!   so nothing at that level tells floor from knee. It is checked against
//!   the level below when a probe proves thrash, when its baseline is
//!   more than `SPEED_SPREAD` (2, hardware's spread) times slower than the
//!   other sites' beyond that quantile's error (a site checking its own
//!   floor below is known meanwhile by that floor's baseline, slowed if
//!   anything), or when the search converges on it (the first window is
//!   all the site holds, or the level above ran no worse than a knee at
//!   the floor would make it): then
//!   nothing above will ever check it, and where every site is past its
//!   knee alike no other site's speed tells. Once the pool is empty, a
//!   first cohort that never ends moves when older than `SILENT_PAST` (4)
//!   times the median site's longest healthy run.
//!
//! The check below, and what it settles, are `recheck`'s.
//!
//! **What the planner is told.** Routing is the
//! [`Planner`](crate::policy::plan::Planner)'s, shared with the oracle. A
//! job queued past the window runs as soon as the site starts it, so jobs
//! are queued ahead only where the site starts them one by one, as room
//! frees (its waits are other users'). Where it starts every job waiting at
//! its next cycle (a negotiation, a gridmanager's poll: it has room past
//! our window), a queue would start past the window all at once: there the
//! jobs out are the window's, and should all of them start now, the site is
//! at its window. Which of the two, the site's first cohort shows (sent
//! together, its jobs' starts spread over more than their mean wait, or
//! not: `Starting`, in `site/estimator.rs`), and until it has, nothing is
//! queued ahead. It shows "one by one" as soon as its starts so far spread
//! past the mean wait it would have were the jobs still waiting all to
//! start at once (later starts widen the range more than the mean): under
//! exponential waits, within half a mean wait, not the `H(n)` mean waits
//! the whole cohort takes. A site seen running more of our jobs than its
//! slots starts what it is sent. Where jobs are queued ahead: Little's law
//! keeps rate × wait of them, the wait that of the jobs starting lately (no
//! more than a probe's overshoot); while probes climb, the jobs a window
//! lacks are queued as many times over as it takes for them to start by the
//! next verdict; and where one site is left open and its search ended at
//! its slots, every job left waits there. The pool is water-filled by
//! expected finish time, a site's run time its own runs' or, while it has
//! none (none ended yet, or all learned afresh after a verdict), the median
//! ready site's (while none is ready, the median of the first cohorts' runs
//! so far), but never less than its youngest running job's age (a first
//! cohort far past a knee ends long after the others' runs would; counting
//! on it to end soon held the jobs left for the slots it would free). Once
//! the pool is empty, idle jobs, and jobs running past a draining site's
//! window, move where they would finish sooner by a margin. A site's
//! `max_jobs` and `max_idle` (sites.toml) bound all of it.
//!
//! **Unresponsive sites.** HTCondor's "grid resource down" (026) closes a
//! site until "up" (027). A site that starts nothing within `idle_timeout`
//! is given up for twice that, then tried with one job, given up the same
//! way should it not start. A job held for a cause of the site goes
//! elsewhere (the book bars it there); a site that ran no job to its end
//! since it was last given up and holds every job it has is given up the
//! same way as one that starts nothing. The sites not closed are the live
//! ones the book gives up a job against once each has held it.

use super::*;

/// Sites' speeds are compared at the run a quarter of runs end by
/// ([`Site::check_slow_baseline`]): a first verdict comes with up to half
/// the first cohort unseen, so its median is at the edge of the data and
/// its mean is the tail's assumption (both overstate a slow site's
/// slowness: `docs/experiments.md`, "The adaptive policy's constants"), while hardware
/// scales every quantile alike.
pub const SPEED_QUANTILE: f64 = 0.25;

/// How much slower than the median site a healthy site may run its jobs:
/// hardware differs between sites (by about a factor 3 from the slowest to
/// the fastest on the grids we know), so a site is taken for collapsed on
/// speed alone only once its jobs are [`FAR_PAST`] times past the longest
/// healthy run of a site this much slower than the median one, and a first
/// window's runs slower than this are taken for slowed by a knee under it
/// ([`Site::check_slow_baseline`]).
pub(super) const SPEED_SPREAD: f64 = 2.0;

/// A job at a site with no healthy runs of its own yet is past where a
/// healthy run is unlikely once it is this many times older than the median
/// site's longest healthy run (see [`Site::silent_stragglers`]).
pub const SILENT_PAST: f64 = FAR_PAST * SPEED_SPREAD;

impl Site {
    /// The site's own `initial_window` from sites.toml, where memory holds
    /// less: the operator's word that `level` is below the knee stands
    /// unless a run saw the site degraded at or below it. (Without memory
    /// the site already starts there.)
    pub fn take_operators_window(&mut self, level: f64) {
        let level = level.min(self.cap);
        let seen_degraded = self.ceiling < self.cap && self.ceiling <= level;
        if self.floor >= level || seen_degraded {
            return;
        }
        self.floor = level;
        self.window = self.window.max(level);
        if self.converged() {
            self.phase = Phase::Holding { since: 0.0 };
        }
        self.new_test(0.0);
    }

    /// The site as the planner should see it. `fallback_run` stands in for
    /// the run time until the site has its own (`None`: nothing known
    /// anywhere yet, so nothing is queued ahead on a guess).
    pub fn model(&self, now: Time, fallback_run: Option<f64>) -> SiteModel {
        if self.closed(now) {
            return SiteModel::CLOSED;
        }
        // While this run's runs are checked against memory's, memory's stay
        // the best guess of how long a job takes here.
        let checking = (self.recheck())
            .filter(|r| matches!(r.suspect, Suspect::Memory { .. }))
            .and_then(|r| r.baseline.as_ref());
        let own = self.dist.as_ref().or(checking.map(|(d, _)| d)).map(Distribution::mean);
        // None of its own runs known: every job running has run at least as
        // long as the youngest of them, whatever the other sites' runs say.
        let running_for = own.is_none().then(|| self.by_start.last().map(|(start, _)| now - start.time()));
        let run = own.or(fallback_run).into_iter().chain(running_for.flatten()).reduce(f64::max);
        let success = (self.successes as f64 + 1.0) / ((self.successes + self.failures) as f64 + 1.0);
        let mut model = SiteModel {
            open: true,
            window: self.window,
            run: run.unwrap_or(1.0),
            wait: self.waits.pessimistic(now),
            proven_wait: self.waits.proven(now),
            dead_time: self.waits.dead_time(),
            // Jobs kept waiting ahead start whenever the queue lets them, so
            // more than the window would run: not while the first cohort's
            // runs are still to become the baseline at that level, and only
            // where jobs are known to start one by one (not together, nor
            // while the first cohort has not told). The wait they cover is
            // that of the jobs starting now: where they start sooner than
            // they did, the queue shrinks with them.
            ahead: if self.ready() && self.waits.one_by_one() {
                self.waits.recent_mean(now).unwrap_or(0.0)
            } else {
                0.0
            },
            success,
            draining: self.draining() && f64::from(self.running) > self.window,
            // How fast throughput falls past the window is not known here;
            // the caps below bound the queue instead.
            queue_gain: 1.0,
            // The user's limits are the policy's to add (`Adaptive::model`).
            max_out: None,
            max_idle: None,
        };
        // Queued jobs start whenever the queue lets them, so more than the
        // window would run. Each starts after its own exponential wait `w`,
        // a fraction `1 − e^(−R/w)` of them within a run `R`: keep no more
        // queued than would start `probe_gain − 1` windows' worth within a
        // run, the overshoot a probe risks anyway before ended jobs make room
        // or a test can see it (past a steep knee, more is a collapse the
        // site takes a long time to drain). Where waits are short that is a
        // window's worth; where they are long, up to Little's law's whole
        // queue (a cap of one window left such a healthy site half used).
        // But a negotiation cycle can match many queued jobs together: never
        // so many that all of them starting at once would take the site past
        // `probe_gain²` times its window, two probes' overshoot.
        let rate = model.attempt_rate();
        if rate > 0.0 && model.ahead > 0.0 {
            let gain = self.rules.gain;
            let starting_within_a_run = 1.0 - (-model.run / model.ahead).exp();
            let within_a_run = (gain - 1.0) * self.window / (rate * starting_within_a_run.max(1e-3));
            let at_once = (gain * gain - 1.0) * self.window / rate;
            // A probe is judged at the level that ran, and Little's law
            // fills a raised window only as its jobs' waits end: where waits
            // are long against a test, probes were judged at about 0.7 of
            // their windows, and each doubling raised the floor 1.4 times.
            // While the probes climb (no ceiling known), the verdict comes
            // about as long after a probe begins as the last one took, `T`
            // (a run before any), and a job queued now starts by then with
            // chance `1 − e^(−T/w)`: the jobs the window lacks are queued
            // that many times over, within the caps. Where waits are short
            // against `T`, that is the jobs it lacks and no more.
            let climbing = self.probing()
                && self.ceiling >= self.cap
                && matches!(self.phase, Phase::Testing | Phase::Holding { .. });
            if climbing {
                let took = self.probe_took.unwrap_or(model.run);
                let starting_by_verdict = 1.0 - (-took / model.ahead).exp();
                let lacking = (self.window - f64::from(self.running)).max(0.0);
                model.ahead += lacking * (1.0 / starting_by_verdict.max(1e-3) - 1.0) / rate;
            }
            model.ahead = model.ahead.min(within_a_run).min(at_once);
        }
        model
    }

    /// Runs the test at `now`; on a verdict, applies it (the rule, in full
    /// at the top of this file) and returns it with the running jobs to
    /// shed. While the site drains after a degraded verdict, that verdict's
    /// test goes on (`refine`).
    pub fn check(&mut self, now: Time) -> Option<(Verdict, Vec<JobId>)> {
        self.judge(now, false)
    }

    /// [`Site::check`], told whether this is the tail.
    pub(super) fn judge(&mut self, now: Time, tail: bool) -> Option<(Verdict, Vec<JobId>)> {
        match self.phase {
            Phase::Draining { .. } => {
                // Drained once no whole job is past the window (what `thrashing`
                // and `stragglers` shed or move): 93 running under a window of
                // 92.9 are drained, or the site stayed draining, with no test,
                // until a job ended, which past a dropped capacity took 600 s.
                // In the tail no job starts here again, so no later test could
                // see what the jobs still running past the floor suffer: the
                // verdict's own test goes on while any of them runs.
                let past_window = f64::from(self.running) - self.window >= 1.0;
                if past_window || (tail && self.past_floor(self.running)) {
                    return self.refine(now);
                }
                self.drained(now);
                self.judge(now, tail)
            }
            Phase::Rechecking(_) => self.settle_recheck(now),
            Phase::Testing | Phase::Holding { .. } => self.weigh(now),
        }
    }

    /// The site drained after a degraded verdict: what ran through the
    /// overload is no evidence for the next test, and how far it got is
    /// unknown. A floor or memory under suspicion is checked now.
    fn drained(&mut self, now: Time) {
        let Phase::Draining { recheck, .. } = std::mem::replace(&mut self.phase, Phase::Testing) else {
            return;
        };
        for run in self.runs.values_mut() {
            run.overloaded = true;
        }
        if let Some(recheck) = recheck {
            self.begin_recheck(recheck);
        }
        self.new_test(now);
    }

    /// Weighs the test's evidence at `now` (while testing or holding); the
    /// first window's verdict is its runs, taken healthy.
    fn weigh(&mut self, now: Time) -> Option<(Verdict, Vec<JobId>)> {
        if !self.ready() || now < self.next_eval {
            return None;
        }
        let mean = self.dist.as_ref().map_or(1.0, Distribution::mean);
        self.next_eval = now + (mean / EVALS).max(1.0);
        if !self.searched && self.window <= self.floor {
            // The first cohort's runs are the baseline, healthy by assumption:
            // that is the first verdict, and probing starts above it.
            let level = self.floor;
            self.baseline_level = self.level_run(now);
            self.healthy(now, level);
            self.searched = true;
            self.baseline_taken_at = Some(now);
            // A check below proved these runs faster than the ceiling's by
            // the levels' ratio or more. Processor sharing makes a knee
            // between the two cost less than that ratio (the ceiling's level
            // over the knee): the knee may be under the floor too, so the
            // floor is checked below at once rather than bisected up from.
            let ratio = self.ceiling / self.floor;
            if self.faster_than_ceiling.take().is_some_and(|s| s >= ratio) && !self.holding() {
                self.check_held_floor();
            }
            return self.conclude(now, Verdict::Healthy { level });
        }
        self.advance(now);
        if self.test.above <= 0.0 {
            return None;
        }
        let (llrs, truncated) = self.llrs(self.dist.as_ref()?, now);
        let llr = llrs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let level = self.test.above_jobs / self.test.above;
        if llr >= self.rules.upper {
            // The slowdown the evidence proves: the least one past the threshold.
            let k = llrs.iter().position(|&l| l >= self.rules.upper).unwrap_or(0);
            self.searched = true;
            // The test goes on while the site drains: its jobs keep testifying.
            return Some(self.cut(now, level, k, &llrs, truncated));
        }
        // Undecided after weighing as many whole runs above the level as a
        // full sample holds: what the test cannot prove is within the
        // baseline's own error (docs/adaptive.md, "Degraded or not"), so the
        // level is healthy.
        if llr > self.rules.lower && self.test.weighed < SAMPLE as f64 {
            return None;
        }
        if self.probing() {
            self.probe_took = Some(now - self.test.started);
        }
        self.healthy(now, level);
        self.searched = true;
        self.conclude(now, Verdict::Healthy { level })
    }

    /// While the probes climb (no ceiling known), the next probe goes at
    /// least to `level` (within the slots): how far the site is proven
    /// healthy if every job loaded its resource as much as any could
    /// (`adaptive::kinds`, "What carries over between kinds"). The probe's
    /// own test judges it, as any probe's. Returns whether the window grew.
    pub fn widen_probe(&mut self, level: f64) -> bool {
        let climbing = self.ceiling >= self.cap && matches!(self.phase, Phase::Testing);
        let level = level.min(self.cap);
        if !climbing || !self.probing() || level <= self.window {
            return false;
        }
        self.window = level;
        true
    }

    /// A verdict that changes the test: told, and a new test begins.
    pub(super) fn conclude(&mut self, now: Time, verdict: Verdict) -> Option<(Verdict, Vec<JobId>)> {
        self.verdicts.push((now, verdict, self.window));
        self.new_test(now);
        Some((verdict, Vec::new()))
    }

    /// A degraded verdict at `level`, slowdown `STRETCH[k]` × κ proven:
    /// applies it and returns it with the running jobs to shed.
    pub(super) fn cut(
        &mut self,
        now: Time,
        level: f64,
        k: usize,
        llrs: &[f64; STRETCH.len()],
        truncated: bool,
    ) -> (Verdict, Vec<JobId>) {
        let slowdown = self.rules.kappa * STRETCH[k];
        let likeliest = (k..llrs.len()).max_by(|&a, &b| llrs[a].total_cmp(&llrs[b])).unwrap_or(k);
        let likeliest = self.rules.kappa * STRETCH[likeliest];
        self.degraded(Proven { level, k, likeliest }, truncated);
        let verdict = Verdict::Degraded { level, slowdown };
        self.verdicts.push((now, verdict, self.window));
        (verdict, self.thrashing(verdict))
    }

    /// While the site drains after a degraded verdict, the verdict's test
    /// goes on: the jobs that ran through the level judged keep testifying,
    /// and a verdict reached at the first moment the evidence sufficed
    /// proves the least slowdown it could (κ), however slow the jobs run.
    /// Once the evidence proves "at least `s`" against every smaller
    /// slowdown (a generalized likelihood ratio of the slowdowns from `s` up
    /// against those below, healthy included, past the same threshold), the
    /// cut follows the larger `s`, as if the verdict had said so.
    ///
    /// Known cost: the evidence reaches back to the verdict, so where the
    /// site's capacity came back in between, a later proof can shed jobs
    /// that no longer run slowed (docs/experiments.md, G0121; the guards tried
    /// against it are there too).
    pub(super) fn refine(&mut self, now: Time) -> Option<(Verdict, Vec<JobId>)> {
        let Phase::Draining { proven: Some(Proven { level, k: proven, .. }), .. } = self.phase else {
            return None;
        };
        if now < self.next_eval {
            return None;
        }
        let mean = self.dist.as_ref().map_or(1.0, Distribution::mean);
        self.next_eval = now + (mean / EVALS).max(1.0);
        self.advance(now);
        let (llrs, truncated) = self.llrs(self.dist.as_ref()?, now);
        let at_least = |k: usize| {
            let above = llrs[k..].iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let below = llrs[..k].iter().copied().fold(0.0, f64::max);
            above - below >= self.rules.upper
        };
        let k = (proven + 1..STRETCH.len()).rev().find(|&k| at_least(k))?;
        Some(self.cut(now, level, k, &llrs, truncated))
    }

    pub(super) fn healthy(&mut self, now: Time, level: f64) {
        if self.holding() {
            return;
        }
        let before = self.floor;
        self.floor = self.floor.max(level.min(self.window));
        if self.floor > before {
            self.resample(now);
        }
        if self.ceiling_assumed && self.floor * (1.0 + self.rules.precision) >= self.ceiling {
            // A re-probe's ceiling was only assumed, and the floor reached it
            // healthy: no knee lies under it, so the search goes on as if
            // none were known (a ceiling one false alarm set took a cycle of
            // `reprobe_after` run times per doubling to leave).
            self.ceiling = self.cap;
            self.ceiling_assumed = false;
        }
        if self.converged() {
            // With no level seen degraded, the slots end the search, not a
            // knee: the probe that reached them stays (the level that ran
            // falls short of the window by the jobs between a start and the
            // next, and holding it there would idle those slots all run).
            self.window = if self.ceiling < self.cap { self.floor } else { self.cap };
            self.phase = Phase::Holding { since: now };
            self.check_held_floor();
        } else if self.ceiling < self.cap {
            self.window = (self.floor * self.ceiling).sqrt().max(self.floor + 1.0).min(self.ceiling);
        } else {
            let probe = (self.rules.gain * self.floor).max(self.floor + 1.0);
            // Every job left within one more probe's overshoot: the search
            // would end about when they do, so they all run now. Not on the
            // first window's own runs (`searched` is set after this): they
            // are taken healthy, not shown so, and past a knee below them
            // the larger probe only thrashes harder (held-out G1117).
            let last_wave = self.searched && self.left <= self.rules.gain * probe;
            let probe = if last_wave { probe.max(self.left) } else { probe };
            self.window = probe.min(self.cap);
        }
    }

    /// Jobs ran `slowdown` (`STRETCH[k]` × κ) times slower at `level`: the
    /// site delivered what `level / slowdown` jobs at full speed would (its
    /// knee if the resource only shares, less if it thrashes), so that is
    /// where the window goes, and the site drains.
    fn degraded(&mut self, proven: Proven, bound_only: bool) {
        let Proven { level, k, .. } = proven;
        let slowdown = self.rules.kappa * STRETCH[k];
        let mut delivered = (level / slowdown).max(1.0);
        if bound_only {
            // Jobs still running past where a healthy run is unlikely prove a
            // slowdown only from below: the level delivered less than
            // `level / slowdown`, by how much is unknown, so the window goes
            // back to the level known healthy (a thrashing site would
            // otherwise be held at a window it cannot run). Running jobs
            // are removed only on what was proven (`thrashing`).
            delivered = delivered.min(self.floor.max(1.0));
        }
        // A verdict while draining keeps what is to be checked once drained.
        let recheck = match std::mem::replace(&mut self.phase, Phase::Testing) {
            Phase::Draining { recheck, .. } => recheck,
            _ => None,
        };
        self.phase = Phase::Draining { proven: Some(proven), recheck };
        self.ceiling_assumed = false;
        if self.test.level == 0.0 {
            // The floor itself ran degraded: the capacity dropped, or the
            // floor was a miss of an earlier test.
            let (held, ceiling) = (self.floor, self.ceiling);
            self.floor = delivered.min(self.floor);
            self.ceiling = level.max(self.floor + 1.0);
            self.check_memory(held, ceiling);
        } else {
            self.ceiling = self.ceiling.min(level.max(self.floor + 1.0));
        }
        self.window = delivered.max(self.floor).min(self.ceiling);
        if self.converged() {
            self.window = self.floor;
        }
        // Delivering less than the floor would at full speed proves the
        // resource thrashes past its knee; a floor that is the baseline's
        // own level was never compared with a level below, so the knee may
        // lie under it, every run of the baseline slowed.
        if self.recheck().is_none()
            && self.floor_is_first_windows()
            && self.test.level > 0.0
            && level / slowdown < self.floor
        {
            self.check_below();
        }
        if self.recheck().is_some() {
            self.window = self.floor;
        }
    }

    /// Whether the floor is the level the baseline was learned at, never
    /// compared with a level below.
    pub(super) fn floor_is_first_windows(&self) -> bool {
        self.unchecked_baseline.is_some_and(|b| self.floor <= b)
    }

    /// After a degraded verdict, the running jobs to remove. The site
    /// delivered what `level / slowdown` jobs at full speed would; with
    /// sharing alone that is its knee, at least the window the cut leaves.
    /// κ times less (the thesis's degradation, which also covers most of the
    /// test's resolution of slowdowns) means the jobs past the window make
    /// the resource deliver less than the window alone would (it thrashes):
    /// the youngest of them, which have done the least work, go back to the
    /// pool.
    pub(super) fn thrashing(&self, verdict: Verdict) -> Vec<JobId> {
        let Verdict::Degraded { level, slowdown } = verdict else { return Vec::new() };
        let window = self.judged_window();
        let excess = f64::from(self.running) - window;
        if (level / slowdown).max(1.0) * self.rules.kappa >= window || excess < 1.0 {
            return Vec::new();
        }
        self.by_start.iter().rev().take(excess as usize).map(|&(_, job)| job).collect()
    }

    /// The window that running jobs are judged by, to be shed or moved:
    /// under a floor being checked, the jobs between the level below and the
    /// floor cost throughput only if the floor was slowed, which is not known
    /// yet, so they drain where they are.
    pub(super) fn judged_window(&self) -> f64 {
        (self.recheck())
            .filter(|r| r.suspect == Suspect::Floor)
            .map_or(self.window, |r| r.floor.max(self.window))
    }

    /// While the site drains past its window after a degraded verdict: the
    /// running jobs past the window, youngest first, each with the time it
    /// is expected to need here still. That is its run at the most likely
    /// slowdown when the verdict came, less its age, until the job is past
    /// where a healthy run is unlikely ([`past_longest`]): there the test
    /// stops weighing its age (see `llrs`), and how much slower it runs is
    /// unknown. Under a scale-free prior on its total time, knowing only
    /// that it exceeds the age, the median of what is left is the age itself.
    pub fn stragglers(&self, now: Time) -> Vec<(JobId, f64)> {
        let excess = f64::from(self.running) - self.judged_window();
        let Phase::Draining { proven: Some(Proven { likeliest: slowdown, .. }), .. } = self.phase else {
            return Vec::new();
        };
        let (Some(d), true) = (&self.dist, excess >= 1.0) else { return Vec::new() };
        self.by_start
            .iter()
            .rev()
            .take(excess as usize)
            .map(|&(start, job)| {
                let age = now - start.time();
                let unknown = age >= past_longest(d, self.test.scales[SCALES.len() - 1]);
                (job, if unknown { age } else { slowdown * d.mean() - age })
            })
            .collect()
    }

    /// With no healthy runs of its own yet (not [`Site::ready`]): the
    /// running jobs older than `past`, each with its age as what it still
    /// needs. The caller sets `past` from the other sites' runs, far enough
    /// past them that a healthy site slower than they are is not taken for a
    /// collapsed one; a first window past a steep knee otherwise holds its
    /// whole cohort, which never ends and so never teaches the site a
    /// distribution to test by, for many run times. How much slower these
    /// run is unknown, so, as for a straggler past [`past_longest`], the
    /// median of what is left is taken as the age. An end at a grid site
    /// reaches us only when the gridmanager next polls it, so a job is
    /// taken as running on only from [`START_NEWS`] past `past`.
    pub fn silent_stragglers(&self, now: Time, past: f64) -> Vec<(JobId, f64)> {
        if self.ready() {
            return Vec::new();
        }
        self.by_start
            .iter()
            .map(|&(start, job)| (job, now - start.time()))
            .take_while(|&(_, age)| age >= past + START_NEWS)
            .collect()
    }

    /// The first cohort outlasted `median_longest`, the median site's
    /// longest healthy run, `age / median_longest` times: a healthy site
    /// [`SPEED_SPREAD`] times slower than the median one would have ended
    /// its jobs, so they ran at least `age / (SPEED_SPREAD ×
    /// median_longest)` times slow, and the level delivered what that many
    /// times fewer jobs at full speed would: the same rule as a degraded
    /// verdict, the least slowdown proven. The site starts again there, with
    /// what it learned at the level that ran slowed forgotten: its runs
    /// there are no baseline.
    ///
    /// Once per cohort: the jobs it gave up on stay counted as running
    /// until they are gone, and are no new evidence.
    pub fn restart_below(&mut self, now: Time, silent: &[(JobId, f64)], median_longest: f64) {
        let fresh = silent.iter().filter(|(job, _)| self.runs.get(job).is_some_and(|r| !r.overloaded));
        let Some(age) = fresh.map(|&(_, age)| age).reduce(f64::max) else { return };
        let slowdown = (age - START_NEWS) / (SPEED_SPREAD * median_longest);
        let level = f64::from(self.running);
        if self.ready() || slowdown <= 1.0 {
            return;
        }
        self.window = (level / slowdown).floor().max(1.0);
        self.floor = self.window;
        self.unchecked_baseline = Some(self.floor);
        match &mut self.phase {
            Phase::Draining { recheck, .. } => *recheck = None,
            Phase::Rechecking(_) => self.phase = Phase::Testing,
            Phase::Testing | Phase::Holding { .. } => {}
        }
        self.ceiling = level.max(self.floor + 1.0).min(self.cap);
        self.ceiling_assumed = false;
        self.searched = false;
        // What a check below proved was of the floor given up on.
        self.faster_than_ceiling = None;
        self.dist = None;
        self.observations.clear();
        self.clean.clear();
        self.sample_runs.clear();
        self.levels.clear();
        for run in self.runs.values_mut() {
            run.overloaded = true;
        }
        self.new_test(now);
        self.test.level = self.floor;
    }

    /// The capacity found, for people (decisions, the report): the floor,
    /// once it is knowledge or a level above it was seen degraded (a first
    /// window found slowed leaves the level below as the floor before any
    /// verdict there), as memory keeps it (`capacity_memory`).
    pub fn capacity_found(&self) -> Option<f64> {
        (self.searched || self.ceiling < self.cap).then_some(self.floor)
    }

    /// Whether the floor is still the first window's, its runs taken as
    /// healthy and never compared with a level below (see
    /// [`Site::check_slow_baseline`]).
    pub fn baseline_unchecked(&self) -> bool {
        self.searched
            && matches!(self.phase, Phase::Testing | Phase::Holding { .. })
            && self.floor >= 2.0
            && self.floor_is_first_windows()
            && self.ready()
    }

    /// The first window's runs, healthy by assumption, against the other
    /// sites' (`others`: the median over them of the run a
    /// [`SPEED_QUANTILE`] of theirs end by): hardware makes a site at most
    /// [`SPEED_SPREAD`] times slower than the median one, so runs slower
    /// than that, beyond the error of the quantile, were slowed by what ran
    /// beside them: the first window is past a knee. Then the floor is
    /// checked against the level below, as when a probe proves thrash
    /// (`degraded`).
    pub fn check_slow_baseline(&mut self, others: f64) {
        let slow = self.dist.as_ref().is_some_and(|d| {
            // The quantile's standard error, relative: √(p(1 − p)/n) over
            // the density there, times the quantile.
            let (p, q) = (SPEED_QUANTILE, d.quantile(SPEED_QUANTILE));
            let error = (p * (1.0 - p) / d.ended.max(1) as f64).sqrt() / (d.density(q) * q).max(1e-9);
            // Plus the minute HTCondor-G may take to hear of an end at a
            // remote site, which lengthens short runs there and not at a
            // local pool.
            q > SPEED_SPREAD * others * (1.0 + self.rules.scale_z * error) + START_NEWS
        });
        if !slow || !self.baseline_unchecked() {
            return;
        }
        self.probe_below();
    }

    /// The floor (a baseline's level never compared with a level below) is
    /// checked from the level below: the site drains there, with no verdict
    /// proven, and the runs there are weighed against the floor's
    /// (`check_below`, [`Site::weigh_below`]).
    fn probe_below(&mut self) {
        self.phase = Phase::Draining { proven: None, recheck: None };
        self.check_below();
        self.window = self.floor;
    }

    /// The search converged on a floor that is still the first window's:
    /// nothing above it will ever check its runs (the level above was seen
    /// degraded no more than a knee at the floor would make it, or the floor
    /// is all the site holds), and where every site is past its knee alike
    /// no other site's speed tells either. Past a knee, fewer jobs run
    /// faster, so it is checked from the level below, once per floor (a
    /// floor that comes back is checked; one the check moves down is the
    /// next first window). Not where the jobs left are within a probe's
    /// reach of the floor: the check could not pay back its cost, the
    /// level below run for a drain and a test, before the run ends.
    pub fn check_held_floor(&mut self) {
        let pays = self.left > self.rules.gain * self.floor;
        if pays
            && self.floor >= 2.0
            && self.floor_is_first_windows()
            && self.ready()
            && self.recheck().is_none()
        {
            self.probe_below();
        }
    }

    /// [`Site::check`] once every job has been sent (the tail; see `judge`
    /// for the drain then). A verdict changes no window then, but it
    /// decides the tail: whether the jobs past the
    /// window thrash (shed) or are stuck (moved), which a capacity that
    /// drops near the end makes the run's last jobs. A verdict on the
    /// floor itself is not remembered, though: the run's last few jobs
    /// judge it (a knee of 50 was measured to be remembered as 4), and
    /// the next run would start there.
    pub fn check_in_tail(&mut self, now: Time) -> Option<(Verdict, Vec<JobId>)> {
        let before = (!self.probing() && self.tail_memory.is_none()).then(|| self.capacity_memory());
        // A floor under a check whose baseline ran no higher than the level
        // checked ([`Site::shown_healthy`]): "as fast" settles it at what
        // ran, a fact of that baseline, not a verdict of the tail's last
        // jobs, so the next run is told.
        let unshown = self
            .recheck()
            .is_some_and(|r| r.suspect == Suspect::Floor && self.shown_healthy(r.floor) < r.floor);
        let verdict = self.judge(now, true)?;
        if let Some(before) = before {
            self.tail_memory = Some(before);
        }
        let settled = unshown && self.recheck().is_none();
        if let (true, Verdict::Healthy { level }) = (settled, verdict.0) {
            if let Some(Bounds { floor: Some(floor), .. }) = &mut self.tail_memory {
                *floor = floor.min(level);
            }
        }
        Some(verdict)
    }

    /// After holding a converged level for a while, tries the one above (a
    /// capacity that dropped may have come back), under a ceiling assumed
    /// at `probe_gain` times the old one (see `Site::healthy` for what
    /// reaching it means).
    pub fn maybe_reprobe(&mut self, now: Time) -> bool {
        let Phase::Holding { since } = self.phase else { return false };
        let Some(run) = self.dist.as_ref().map(Distribution::mean) else { return false };
        if now < since + self.rules.reprobe_after * run || self.window >= self.cap {
            return false;
        }
        self.reprobe(now);
        true
    }

    /// The ceiling was seen degraded under a load that has since left the
    /// site (`adaptive::kinds`, "A ceiling under another kind's load"): the
    /// knee in this kind's jobs moved up by that load, unknown, so the
    /// ceiling becomes one a re-probe assumes, `probe_gain` × the old one,
    /// and a level held is re-probed now. Not while draining or rechecking
    /// (`None`: look again later): the verdict behind those is being
    /// refined or checked. Returns whether the window grew.
    pub fn ceiling_stale(&mut self, now: Time) -> Option<bool> {
        if self.ceiling >= self.cap || self.ceiling_assumed {
            return Some(false);
        }
        match self.phase {
            Phase::Holding { .. } => {
                self.reprobe(now);
                Some(true)
            }
            Phase::Testing => {
                self.ceiling = (self.ceiling * self.rules.gain).min(self.cap);
                self.ceiling_assumed = true;
                Some(false)
            }
            Phase::Draining { .. } | Phase::Rechecking(_) => None,
        }
    }

    fn reprobe(&mut self, now: Time) {
        self.phase = Phase::Testing;
        self.ceiling = (self.ceiling.max(self.floor) * self.rules.gain).min(self.cap);
        self.ceiling_assumed = true;
        self.window = (self.floor * self.ceiling).sqrt().max(self.floor + 1.0).min(self.cap);
        self.new_test(now);
    }

    /// When this site next needs looking at; `reprobe`: whether a level
    /// held may be re-probed now (not in the tail, where the caller tries
    /// none: a re-probe due then came due again every second).
    pub fn next_check(&self, now: Time, reprobe: bool) -> Option<Time> {
        let mut next: Option<Time> = None;
        let mut at = |t: Time| next = Some(next.map_or(t, |n: Time| n.min(t)));
        if let Some(d) = &self.dist {
            // A draining site is looked at again when a job ends there, or
            // when its verdict's test may prove more.
            let testing = self.ready() || self.floor_below().is_some();
            if self.running > 0 && testing && !matches!(self.phase, Phase::Draining { proven: None, .. }) {
                at(self.next_eval.max(now + (d.mean() / EVALS).max(1.0) * 0.1));
            }
            // As `maybe_reprobe`: none at the slots.
            if let (&Phase::Holding { since }, true) = (&self.phase, reprobe && self.window < self.cap) {
                at((since + self.rules.reprobe_after * d.mean()).max(now + 1.0));
            }
        }
        if let (Some(first), false) = (self.first_submit, self.any_started) {
            if !self.idle.is_empty() {
                at((first + self.idle_timeout).max(now + 1e-3));
                // A site that starts nothing sends no events, but its wait
                // grows with the waiting: look again each time it doubles, so
                // routing and the tail see it (O(log) looks, not a poll).
                at((first + 2.0 * (now - first)).max(now + 1.0));
            }
        }
        if let Some(t) = self.closed_until.filter(|&t| t > now) {
            at(t);
        }
        next
    }

    /// Nothing started within the idle timeout: give the site up for twice
    /// the timeout, then try one job. Returns whether that happened now.
    /// The one-job try is given up the same way if it starts nothing: a
    /// site given up before counts as closed only until its time is over
    /// (were it still counted closed, the try would wait there for good,
    /// and the check due at its timeout would come due every millisecond).
    pub fn time_out(&mut self, now: Time) -> bool {
        let timed_out = !self.any_started
            && !self.idle.is_empty()
            && self.closed_until.is_none_or(|t| now >= t)
            && self.first_submit.is_some_and(|f| now >= f + self.idle_timeout);
        if timed_out {
            self.give_up(now);
        }
        timed_out
    }

    /// A job was held here for a cause of the site (it goes elsewhere). A
    /// site that ran no job to its end since it was last given up (or the
    /// run began) and holds every job it has (`others_out` false: none is
    /// idle or running there) runs nothing, as one that starts nothing
    /// does: it is given up the same way, for twice the idle timeout, then
    /// tried with one job. Returns whether that happened now.
    pub fn held_by_site(&mut self, now: Time, others_out: bool) -> bool {
        let holds_all = !self.ran_to_end && !others_out;
        if holds_all {
            self.give_up(now);
        }
        holds_all
    }

    fn give_up(&mut self, now: Time) {
        self.closed_until = Some(now + 2.0 * self.idle_timeout);
        self.first_submit = None;
        self.window = 1.0;
        self.ran_to_end = false;
    }
}
