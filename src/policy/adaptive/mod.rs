//! `adaptive`: the default policy — an estimator per site and a controller,
//! from nothing but what HTCondor tells a user (the user log, our jobs'
//! counts, slot counts). This page states the model, what is estimated and
//! the rule that follows. Each rule's detail is stated where it is applied
//! (`site`: the phases and what holds across them; `site::estimator`: the
//! test's safeguards; `site::controller`: the verdicts, a wrong start, what
//! the planner is told, unresponsive sites; `site::recheck`: the check
//! below; `site::memory`; `kinds`: private modules, so read them in the
//! source or with `cargo doc --document-private-items`), and why each is
//! as it is, with what it was measured to do, in `docs/adaptive.md`.
//!
//! **The model.** A site runs our jobs on `slots` slots after a queue wait
//! (other users) taken as exponential. Our jobs share a resource we cannot
//! see: past some concurrency, the knee, every running job slows at once,
//! and throughput stays flat (the resource shares) or falls (it thrashes).
//! A job's healthy run time is its work at the site's speed, spread by the
//! jobs' sizes (±50% is ordinary). Attempts fail at some rate, and a site
//! may stop starting anything.
//!
//! **What is estimated, per site.** The healthy run-time distribution
//! (Kaplan–Meier over runs made only at levels known healthy, running jobs
//! censored: `runtime.rs`); the queue wait (the censored exponential's MLE:
//! all waiting done over the starts; for routing, before any start, at
//! least the waiting jobs' mean age; for moving waiting jobs, a dead time
//! then memoryless, `site::estimator`'s `Waits::proven`); the failure rate
//! (Laplace's rule); and the knee, as a floor (the highest level known
//! healthy) and a ceiling (the lowest level seen degraded).
//!
//! **Degraded or not.** While more than the floor run, Wald's SPRT weighs
//! "every job runs κ (`degradation_factor`) times slower while more than
//! the floor run" against "healthy": an ended job by the density of its
//! run, a running job by the chance of surviving to its age. Processor
//! sharing slows every running job at once, so old jobs testify as soon as
//! the level rises; no single job decides, every likelihood being floored
//! by a 1% share of outliers. The thresholds
//! ln((1 − β)/α) and ln(β/(1 − α)) bound false and missed alarms by
//! `false_alarm` (α) and `missed_alarm` (β) whatever the spread of healthy
//! runs, since the spread is in the likelihoods. What the bounds assume of
//! a baseline learned from few runs is made true in `site::estimator`.
//!
//! **The rule.**
//! - *Start* at `initial_window` jobs, taken as below any knee: their runs
//!   are the baseline.
//! - *Healthy at n*: the floor goes to n; the window to `probe_gain` × the
//!   floor while no ceiling is known, else to the geometric middle of floor
//!   and ceiling (the thesis's binary search).
//! - *Degraded at n*, s the least slowdown proven: the site delivered what
//!   n / s jobs at full speed would, so the window goes there (never below
//!   the floor) and the ceiling to n. Running jobs are removed only where the resource is
//!   proven to thrash (n / s more than κ below the window).
//! - *Converged* (ceiling within 1 + `precision` of the floor): the level is
//!   held, and re-probed after `reprobe_after` mean runs.
//! - *A wrong start*: a first window past the knee slows its own baseline,
//!   so nothing at that level tells floor from knee. Past a knee, fewer
//!   jobs run faster; so such a floor is checked from the level below
//!   (floor / `probe_gain`) when there is cause: a probe proved thrash, its
//!   runs are far slower than other sites', or the search converged on it
//!   (the last only while more than a probe's reach of jobs is left to pay
//!   for the check).
//! - *Routing*: the pool is water-filled by expected finish time over the
//!   sites' windows (`crate::policy::plan`); once it is empty, the tail
//!   moves idle jobs, and jobs running past a draining site's window, where
//!   they would finish sooner by a margin.
//!
//! **The phases.** Each site's controller is in one phase at a time
//! (`site::Phase`, each carrying what only it needs), as in tcp_bbr.c:
//!
//! ```text
//!             +------------------ reprobe -----------------+
//!             v                                            |
//!   start -> TESTING ---- healthy, converged ---------> HOLDING
//!             |  ^   (healthy, not converged: stays)       |
//!   degraded, |  | drained,                      degraded, |
//!   slow 1st  |  | no suspect                    slow 1st  |
//!   window,   |  |                               window    |
//!   converged |  |                                         |
//!   on the 1st|  |                                         |
//!   window    v  |                                         |
//!           DRAINING <---------------------------------------+
//!             |    (degraded again: stays, cut deeper)
//!             | drained, a suspect
//!             v
//!           RECHECKING ---- settled ----> TESTING (HOLDING where memory's
//!                                          floor comes back converged)
//! ```
//!
//! **Unresponsive sites.** A site HTCondor reports down is closed until it
//! is up again; one that starts nothing within `idle_timeout`, or that ran
//! no job to its end since it was last given up and holds every job it has,
//! is given up for a while and then tried with one job. **Memory**
//! ([`Policy::learned`]) keeps each site's floor, ceiling, run times,
//! waits, how it starts jobs and its failures for the next run, which
//! starts there, tests its floor from the first job, and compares memory's
//! run times with its own only where that level runs degraded. **Several
//! kinds of job** (`kinds`): one such controller per kind, so that each
//! kind's knee is the share of the site's resource the others leave it; the
//! kinds share each site's slots.
//!
//! Cost per input: O(log) in jobs and sites, plus a test over at most 256
//! running jobs of the site concerned (and, while its first window is
//! unchecked, a median over the sites); sites that did not change are not
//! visited.

mod kinds;
mod runtime;
mod site;

use super::book::{Change, TimeKey};
use super::plan::{Planner, SiteModel, EVERY_JOB_WAITS};
use super::{
    Action, CapacityMemory, Decision, DecisionKind, Input, JobBook, JobId, Policy, RunSpec, SiteClass,
    SiteEvent, SiteId, SiteView, Time,
};
use runtime::Distribution;
use serde::{Deserialize, Serialize};
use site::{End, Rules, Site, Verdict, SILENT_PAST, SPEED_QUANTILE};
use std::collections::BTreeSet;

/// Parameters from the `[policy]` table of sites.toml (`name = "adaptive"`,
/// the default). Each has a physical meaning; none is fitted to a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// Jobs a site starts with when nothing is known about it: a level
    /// taken as below any site's knee (their runs are its healthy baseline).
    /// A site's own `initial_window` takes precedence.
    pub initial_window: u32,
    /// C2 of the thesis: a site is degraded when its jobs run this many times
    /// slower than healthy.
    pub degradation_factor: f64,
    /// Probability that a test calls a healthy level degraded.
    pub false_alarm: f64,
    /// Probability that a test calls a degraded level healthy.
    pub missed_alarm: f64,
    /// A window may go this many times past the highest level known healthy
    /// (the largest overshoot risked while no ceiling is known); also the
    /// step down to the level a first window is checked against.
    pub probe_gain: f64,
    /// The capacity search stops when the lowest degraded level is within
    /// this fraction of the highest healthy one.
    pub precision: f64,
    /// Mean run times a converged level is held before the level above is
    /// tried again.
    pub reprobe_after: f64,
    /// Seconds a site may leave every job idle before it is given up (its
    /// jobs go elsewhere). A site's own `idle_timeout` takes precedence.
    pub idle_timeout: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            initial_window: 16,
            degradation_factor: 1.25,
            false_alarm: 0.001,
            missed_alarm: 0.05,
            probe_gain: 2.0,
            precision: 0.1,
            reprobe_after: 10.0,
            idle_timeout: 1200.0,
        }
    }
}

impl super::ParamRanges for Params {
    fn out_of_range(&self) -> Vec<super::OutOfRange> {
        let probability = |p: f64| p > 0.0 && p < 0.5;
        let positive = |x: f64| x.is_finite() && x > 0.0;
        super::failing(&[
            ("initial_window", self.initial_window >= 1, "a number of jobs, at least 1"),
            (
                "degradation_factor",
                self.degradation_factor.is_finite() && self.degradation_factor > 1.0,
                "a slowdown, more than 1 (1.25: 25% slower)",
            ),
            ("false_alarm", probability(self.false_alarm), "a probability, more than 0 and less than 0.5"),
            ("missed_alarm", probability(self.missed_alarm), "a probability, more than 0 and less than 0.5"),
            ("probe_gain", self.probe_gain.is_finite() && self.probe_gain > 1.0, "a factor, more than 1"),
            ("precision", positive(self.precision), "a fraction, more than 0 (0.1: within 10%)"),
            ("reprobe_after", positive(self.reprobe_after), "a number of mean run times, more than 0"),
            ("idle_timeout", positive(self.idle_timeout), "a positive number of seconds"),
        ])
    }
}

impl Params {
    /// The rules, from parameters within their ranges (sites.toml is
    /// checked against [`super::ParamRanges`] before anything runs).
    fn rules(&self) -> Rules {
        let (alpha, beta) = (self.false_alarm, self.missed_alarm);
        Rules {
            kappa: self.degradation_factor,
            upper: ((1.0 - beta) / alpha).ln(),
            lower: (beta / (1.0 - alpha)).ln(),
            gain: self.probe_gain,
            precision: self.precision,
            reprobe_after: self.reprobe_after,
            scale_z: site::normal_upper_quantile(alpha),
        }
    }
}

/// How often the tail is looked at once the pool is empty, as a fraction of
/// the shortest run time.
const TAIL_TICK: f64 = 0.05;

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Adaptive {
    book: JobBook,
    sites: Vec<Site>,
    planner: Planner,
    /// Each site's next check, and the set of them in time order.
    due_at: Vec<Option<TimeKey>>,
    due: BTreeSet<(TimeKey, u32)>,
    next_tail: Option<Time>,
    every_job_sent: bool,
    /// The median healthy run time of the sites that know theirs, and which
    /// sites those were at their last review.
    fallback_run: Option<f64>,
    ready: Vec<bool>,
    /// The latest time seen (for what is learned at the end).
    now: Time,
    /// For [`Policy::take_decisions`]: what is not taken yet, and per site
    /// what was told.
    #[serde(with = "decisions_as_json")]
    decided: Vec<Decision>,
    told: Vec<Told>,
    /// Per site, whether its slots (not a `max_jobs` of ours) bound its
    /// window: the site itself then starts no more than that.
    slots_bind: Vec<bool>,
    /// Per site, the user's `max_jobs` and `max_idle`.
    limits: Vec<(Option<u32>, Option<u32>)>,
    /// Each kind's memory key ([`RunSpec::kind_key`]): this run's, not a
    /// checkpoint's, like `limits`.
    #[serde(skip)]
    kind_keys: Vec<String>,
    /// Jobs moved once as outlasting what a slower healthy site would take
    /// (`Site::silent_stragglers`): never moved so again.
    moved_silent: BTreeSet<JobId>,
    /// Per site, the slots this controller may fill while other kinds of
    /// job run there too (`kinds`); empty for a run of one kind.
    slot_share: Vec<Option<f64>>,
}

/// Decisions not yet taken, in a checkpoint: `DecisionKind` is an internally
/// tagged enum (its JSON form), which postcard cannot read back, so a
/// checkpoint written with any decision untaken was unreadable and the
/// resume replayed every log instead. They go as one JSON string.
pub(super) mod decisions_as_json {
    use super::Decision;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(decided: &[Decision], serializer: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(decided).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Decision>, D::Error> {
        let text = String::deserialize(deserializer)?;
        serde_json::from_str(&text).map_err(serde::de::Error::custom)
    }
}

/// Which (window, capacity) of a site was told last.
#[derive(Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
struct Told {
    window: Option<(f64, Option<f64>)>,
}

/// `adaptive` for `spec`: with several kinds of job, one controller per
/// kind (`kinds`); with one, the controller itself.
pub fn build(spec: &RunSpec, params: &Params) -> Box<dyn Policy> {
    if spec.types.several() {
        Box::new(kinds::ByKind::new(spec, params))
    } else {
        Box::new(Adaptive::new(spec, params))
    }
}

impl Adaptive {
    /// Takes what is this run's of `fresh`, for a policy restored from a
    /// checkpoint: the user's limits (this run's sites.toml: a limit
    /// lowered for the resumed run holds from its start) and the kinds'
    /// memory keys.
    fn take_limits_of(&mut self, fresh: Adaptive) {
        (self.limits, self.slots_bind, self.kind_keys) = (fresh.limits, fresh.slots_bind, fresh.kind_keys);
    }

    pub fn new(spec: &RunSpec, params: &Params) -> Self {
        let rules = params.rules();
        let kind_keys: Vec<String> = spec.types.ids().map(|t| spec.kind_key(t).to_string()).collect();
        let sites: Vec<Site> = spec
            .sites
            .iter()
            .map(|info| {
                let cap =
                    f64::from(info.slots.unwrap_or(u32::MAX).min(info.max_jobs.unwrap_or(u32::MAX)).max(1));
                let cap = cap.min(1e6);
                // One kind (`kinds` gives each of several its own controller).
                let own = spec.memory.get(&info.name, &kind_keys[0]);
                // A kind new at a known site starts from what is the site's.
                let carried = own.is_none().then(|| spec.memory.carried_over(&info.name)).flatten();
                let memory = own.or(carried.as_ref());
                let mut site = Site::new(
                    info.name.clone(),
                    cap,
                    info.idle_timeout.unwrap_or(params.idle_timeout),
                    f64::from(info.initial_window.unwrap_or(params.initial_window)),
                    rules,
                    memory,
                );
                site.poll_period = info.poll_period;
                // A site remembered as starting nothing is tried with one
                // job whatever its operator says it can take.
                if let Some(level) = info.initial_window.filter(|_| memory.is_some_and(|m| !m.unresponsive)) {
                    site.take_operators_window(f64::from(level));
                }
                site
            })
            .collect();
        let n = sites.len();
        let slots_bind = spec
            .sites
            .iter()
            .map(|info| info.slots.is_some_and(|s| s <= info.max_jobs.unwrap_or(u32::MAX)))
            .collect();
        let limits = spec.sites.iter().map(|info| (info.max_jobs, info.max_idle)).collect();
        let mut policy = Adaptive {
            book: JobBook::new(spec.n_jobs, n, spec.max_attempts),
            sites,
            planner: Planner::new(n),
            due_at: vec![None; n],
            due: BTreeSet::new(),
            next_tail: None,
            every_job_sent: false,
            fallback_run: None,
            ready: vec![false; n],
            now: 0.0,
            decided: Vec::new(),
            told: vec![Told::default(); n],
            slots_bind,
            limits,
            kind_keys,
            slot_share: Vec::new(),
            moved_silent: BTreeSet::new(),
        };
        policy.ready = policy.sites.iter().map(Site::ready).collect();
        policy.fallback_run = policy.median_run();
        policy
    }

    /// The median over sites with healthy runs of their own (but site
    /// `except`) of one statistic of those runs.
    fn median_over_ready(&self, except: Option<usize>, of: impl Fn(&Distribution) -> f64) -> Option<f64> {
        self.median_over(except, |s| s.dist.as_ref().filter(|_| s.ready()), of)
    }

    /// The median over sites (but site `except`) of one statistic of the
    /// runs `runs` picks from each (sites it picks none from are left out).
    fn median_over(
        &self,
        except: Option<usize>,
        runs: impl Fn(&Site) -> Option<&Distribution>,
        of: impl Fn(&Distribution) -> f64,
    ) -> Option<f64> {
        let mut values: Vec<f64> = (self.sites.iter().enumerate())
            .filter(|&(j, _)| Some(j) != except)
            .filter_map(|(_, s)| runs(s))
            .map(of)
            .collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    }

    /// The run time a site with none of its own is planned with: the
    /// median ready site's healthy mean, or while no site's runs are ready,
    /// the median of the first cohorts' runs so far (None before any ended).
    fn median_run(&self) -> Option<f64> {
        self.median_over_ready(None, Distribution::mean)
            .or_else(|| self.median_over(None, |s| s.dist.as_ref(), Distribution::mean))
    }

    /// The run time the tail is looked at by: the median site's healthy
    /// mean run; while no site's runs are ready (all are learned afresh
    /// after a verdict), the median of what the sites hold; with no runs
    /// at all, the time since the run began, so that the looks grow apart
    /// as it goes on (a fixed minute made a one-site tail of runs of two
    /// hours look every three seconds: 2,600 wakeups for 120 site events).
    fn tail_run(&self, now: Time) -> f64 {
        if let Some(run) = self.fallback_run {
            return run;
        }
        let mut held: Vec<f64> =
            self.sites.iter().filter_map(|s| s.dist.as_ref()).map(Distribution::mean).collect();
        held.sort_by(f64::total_cmp);
        held.get(held.len() / 2).copied().unwrap_or(now).max(60.0)
    }

    fn median_longest(&self) -> Option<f64> {
        self.median_over_ready(None, Distribution::longest_seen)
    }

    /// Feeds a site event to the site's estimator.
    fn observe(&mut self, i: usize, event: &SiteEvent, change: &Change, now: Time) {
        let at = event.at().unwrap_or(now);
        let c = self.book.counts(SiteId(i as u32));
        let s = &mut self.sites[i];
        match change {
            Change::Submitted { jobs } => s.submitted(jobs, at),
            Change::Started { job, .. } => s.started(*job, at),
            Change::Succeeded { job, ended, .. } => {
                s.ran_to_end = true;
                s.ended(*job, *ended, End::Success);
            }
            Change::Failed { job, held, barred, .. } => {
                s.ran_to_end |= !held;
                s.ended(*job, at, End::Failure);
                if *barred {
                    s.held_by_site(now, c.submitting + c.idle + c.running + c.withdrawing > 0);
                }
            }
            Change::Removed { job } => s.ended(*job, at, End::Removed),
            Change::Returned { .. } => {}
            Change::None => match event {
                SiteEvent::ResourceDown { .. } => s.down = true,
                SiteEvent::ResourceUp { .. } => s.down = false,
                _ => {}
            },
        }
    }

    /// Looks at site `i` after something happened there or its time came:
    /// timeouts, tests, re-probes; then hands the planner its model and
    /// withdraws what its target no longer covers.
    fn review(&mut self, i: usize, now: Time, actions: &mut Vec<Action>) {
        let site = SiteId(i as u32);
        self.sites[i].left = (self.book.pool_len() + self.book.out_total()) as f64;
        self.sites[i].time_out(now);
        // Once every job has been sent, jobs that come back (failed, moved)
        // are all that starts anywhere: the tail goes on while they wait.
        self.every_job_sent |= self.book.pool_len() == 0;
        let tail = self.every_job_sent;
        let verdict = if tail { self.sites[i].check_in_tail(now) } else { self.sites[i].check(now) };
        if let Some((_, jobs)) = verdict {
            let why = "adaptive: the site delivers less with these youngest jobs running than without them";
            self.remove(site, &jobs, why.to_string(), actions);
        }
        if !tail {
            // A first window past a knee, told by the other sites' speeds.
            if self.sites[i].baseline_unchecked() {
                let quantile = |d: &Distribution| d.quantile(SPEED_QUANTILE);
                if let Some(others) = self.median_over(Some(i), Site::speed_known, quantile) {
                    self.sites[i].check_slow_baseline(others);
                }
            }
            self.sites[i].maybe_reprobe(now);
        }
        // Until its first cohort's runs are ready, a site's ends move the
        // median of what the sites hold: while no site is ready, that is
        // what a site with no runs of its own is planned with. Taken as a
        // second instead, such a site looked able to end the pool at once
        // and held the jobs left from one whose runs were known (a Condor-C
        // site forwarding its first cohort, `local`'s refills held until
        // its verdict on the real pool). Looked at again only once it moved
        // by a tenth: O(sites) per end of a first cohort.
        let held_moved = !self.ready[i]
            && self.sites[i].dist.is_some()
            && !self.ready.iter().any(|&r| r)
            && self.median_run().is_some_and(|m| self.fallback_run.is_none_or(|f| (m / f - 1.0).abs() > 0.1));
        if self.sites[i].ready() != self.ready[i] || held_moved {
            self.ready[i] = self.sites[i].ready();
            let fallback = self.median_run();
            if fallback != self.fallback_run {
                self.fallback_run = fallback;
                for j in (0..self.sites.len()).filter(|&j| j != i && !self.sites[j].ready()) {
                    let model = self.model(j, now);
                    self.planner.set_model(SiteId(j as u32), model, &self.book);
                }
            }
        }
        let model = self.model(i, now);
        self.planner.set_model(site, model, &self.book);
        let surplus = self.planner.surplus(site, &self.book);
        if surplus > 0 {
            let jobs: Vec<JobId> = self.book.youngest_idle(site, surplus as usize);
            let why = if self.sites[i].closed(now) {
                "adaptive: site closed (unresponsive or reported down); idle jobs go elsewhere".to_string()
            } else {
                format!("adaptive: idle beyond window {:.0} and the wait ahead", model.window)
            };
            self.withdraw(site, &jobs, why, actions);
        }
        self.schedule(i, now);
        self.tell(i, now);
    }

    /// Site `i`'s new verdicts, and its window if it changed, as decisions.
    fn tell(&mut self, i: usize, now: Time) {
        let (site, s, told) = (SiteId(i as u32), &mut self.sites[i], &mut self.told[i]);
        // Told once and let go: a watched level reaches a verdict every few
        // dozen runs, and a week-long run must not carry them all.
        for (at, verdict, _) in s.verdicts.drain(..) {
            let kind = match verdict {
                Verdict::Healthy { level } => DecisionKind::Verdict { healthy: true, level, slowdown: None },
                Verdict::Degraded { level, slowdown } => {
                    DecisionKind::Verdict { healthy: false, level, slowdown: Some(slowdown) }
                }
            };
            self.decided.push(Decision::of_site(at, site, kind));
        }
        let window = (s.window, s.capacity_found());
        if told.window != Some(window) {
            told.window = Some(window);
            let kind = DecisionKind::Window { window: window.0, capacity: window.1 };
            self.decided.push(Decision::of_site(now, site, kind));
        }
    }

    /// With the pool empty: the running jobs past the window of a site that
    /// drains after a degraded verdict, and those of a site with no healthy
    /// runs of its own that outlast the other sites' runs far past what a
    /// slower healthy site would take (`Site::silent_stragglers`; that
    /// site starts again lower), where a fresh start at another site with
    /// room would finish sooner (by the planner's bar for moves) than they
    /// are expected to there. Each job is judged on its own: what it is
    /// expected to need is not monotone in its age (see `Site::stragglers`).
    fn remove_stragglers(&mut self, now: Time, actions: &mut Vec<Action>, touched: &mut Vec<usize>) {
        let mut takers = self.planner.takers(&self.book);
        let median_longest = self.median_longest();
        for i in 0..self.sites.len() {
            let mut silent = Vec::new();
            if let Some(longest) = median_longest {
                silent = self.sites[i].silent_stragglers(now, SILENT_PAST * longest);
                // Once: a job's size is its own, and one too long for the
                // bar went back to a site it was taken from, again and
                // again, while a kind's speeds spread past hardware's
                // (held-out T1086 never ended).
                silent.retain(|(job, _)| !self.moved_silent.contains(job));
                if !silent.is_empty() {
                    self.sites[i].restart_below(now, &silent, longest);
                    touched.push(i);
                }
            }
            let cases = [
                (self.sites[i].stragglers(now), "these run slowed past the window", false),
                (
                    silent,
                    "these outlast what a slower healthy site would take by far (a first window past a knee)",
                    true,
                ),
            ];
            for (stragglers, because, silent) in cases {
                let mut jobs = Vec::new();
                for (job, time_left) in stragglers {
                    // A fresh copy at the same site would run as slowed.
                    let taker = takers.iter_mut().find(|(latency, room, site)| {
                        site.index() != i && *room > 0 && time_left > Planner::move_bar(*latency)
                    });
                    let Some(taker) = taker else { continue };
                    taker.1 -= 1;
                    jobs.push(job);
                }
                if silent {
                    self.moved_silent.extend(jobs.iter().copied());
                }
                let why = format!("adaptive: tail: {because}; a site with room would finish them sooner");
                self.remove(SiteId(i as u32), &jobs, why, actions);
            }
        }
    }

    fn remove(&mut self, site: SiteId, jobs: &[JobId], why: String, actions: &mut Vec<Action>) {
        let jobs = self.book.mark_removing(site, jobs);
        if !jobs.is_empty() {
            actions.push(Action::Remove { site, jobs, why });
            self.planner.refresh(site, &self.book);
        }
    }

    /// Site `i` as the planner should see it. Where it is the one site
    /// left open and its search ended at its slots with no knee seen below
    /// (and no other kind holds any of them),
    /// the site itself starts no more than the window however many wait:
    /// every job left waits there, and their waits pass while the slots are
    /// busy rather than after (as the oracle's "queue ahead"). The user's
    /// `max_jobs` and `max_idle` bound whatever the plan.
    fn model(&self, i: usize, now: Time) -> SiteModel {
        let mut model = self.sites[i].model(now, self.fallback_run);
        if let Some(&(max_jobs, max_idle)) = self.limits.get(i) {
            model.max_out = max_jobs.map(f64::from);
            model.max_idle = max_idle.map(f64::from);
        }
        // Other kinds hold some of the slots: jobs queued past this one's
        // share would take theirs as they free.
        let share = self.slot_share.get(i).copied().flatten();
        if let Some(share) = share {
            model.window = model.window.min(share);
        }
        let site = &self.sites[i];
        let at_slots = self.slots_bind.get(i).copied().unwrap_or(false)
            && share.is_none_or(|share| share >= site.cap)
            && site.holding()
            && site.window >= site.cap
            && site.ceiling >= site.cap;
        // Stops at the first other site open: O(1) unless all others closed.
        if at_slots
            && model.open
            && model.ahead > 0.0
            && self.sites.iter().enumerate().all(|(j, s)| j == i || s.closed(now))
        {
            model.ahead = EVERY_JOB_WAITS;
        }
        model
    }

    /// Widens site `i`'s climbing probe to `level` ([`Site::widen_probe`]);
    /// returns whether it did, the site then looked at on the next tick.
    fn widen_probe(&mut self, i: usize, level: f64, now: Time) -> bool {
        if !self.sites[i].widen_probe(level) {
            return false;
        }
        self.look_now(i, now);
        true
    }

    /// Site `i`'s ceiling was seen under a load that has left
    /// ([`Site::ceiling_stale`]); returns whether the window grew, the
    /// site then looked at on the next tick (`None`: not now).
    fn ceiling_stale(&mut self, i: usize, now: Time) -> Option<bool> {
        let grew = self.sites[i].ceiling_stale(now)?;
        if grew {
            self.look_now(i, now);
        }
        Some(grew)
    }

    fn look_now(&mut self, i: usize, now: Time) {
        if let Some(key) = self.due_at[i].take() {
            self.due.remove(&(key, i as u32));
        }
        let key = TimeKey::of(now);
        self.due_at[i] = Some(key);
        self.due.insert((key, i as u32));
    }

    /// Bounds site `i`'s window by the slots other kinds leave this one
    /// (`share`, those granted so far where the site starts at once; see
    /// `kinds`' module doc); returns whether the share grew or the floor is
    /// to be checked (the lane looks at the site again now).
    ///
    /// A share it is `entitled` to at or under a floor that is the first
    /// window's holds the kind there: no probe above can run, so nothing
    /// will ever check the floor's runs, as where the first window is all
    /// the site holds. It is checked from the level below in the same way
    /// ([`Site::check_held_floor`]); the kinds sharing the slots are what
    /// the first window's level ran slowed by, where it is past this
    /// kind's knee. Not while another kind checks its own floor there
    /// (`others_checking`), nor where the site's jobs wait longer to start
    /// than they run (`kinds`' module doc says why).
    fn share_slots(&mut self, i: usize, share: f64, entitled: f64, others_checking: bool, now: Time) -> bool {
        if self.slot_share.len() != self.sites.len() {
            self.slot_share = vec![None; self.sites.len()];
        }
        let before = self.slot_share[i];
        let site = &mut self.sites[i];
        let run = site.dist.as_ref().map_or(0.0, Distribution::mean);
        let refills_within_a_run = site.waits.mean(now).is_some_and(|wait| wait < run);
        let held_by_share =
            !others_checking && refills_within_a_run && entitled <= site.floor && site.baseline_unchecked();
        if held_by_share {
            site.check_held_floor();
        }
        let checking = held_by_share && !site.baseline_unchecked();
        if before == Some(share) && !checking {
            return false;
        }
        self.slot_share[i] = Some(share);
        let model = self.model(i, now);
        self.planner.set_model(SiteId(i as u32), model, &self.book);
        if checking {
            self.look_now(i, now);
        }
        checking || before.is_some_and(|b| b < share)
    }

    /// Whether site `i`'s floor is a guess or its first window's runs,
    /// never compared with a level below.
    fn floor_unproven(&self, i: usize) -> bool {
        self.sites.get(i).is_some_and(|s| !s.searched || s.baseline_unchecked())
    }

    /// Whether site `i` may start jobs sent past its slots at once (its
    /// first cohort started together, or has not told yet), rather than as
    /// its slots free.
    fn starts_together(&self, i: usize) -> bool {
        self.sites.get(i).is_some_and(|s| !s.waits.one_by_one())
    }

    /// Site `i`'s floor under a check from below, if any.
    fn floor_checked(&self, i: usize) -> Option<f64> {
        self.sites.get(i).and_then(Site::floor_checked)
    }

    fn withdraw(&mut self, site: SiteId, jobs: &[JobId], why: String, actions: &mut Vec<Action>) {
        let jobs = self.book.mark_withdrawing(site, jobs);
        if !jobs.is_empty() {
            actions.push(Action::Withdraw { site, jobs, why });
            self.planner.refresh(site, &self.book);
        }
    }

    fn schedule(&mut self, i: usize, now: Time) {
        if let Some(key) = self.due_at[i].take() {
            self.due.remove(&(key, i as u32));
        }
        if let Some(t) = self.sites[i].next_check(now, !self.every_job_sent) {
            let key = TimeKey::of(t);
            self.due_at[i] = Some(key);
            self.due.insert((key, i as u32));
        }
    }
}

impl Policy for Adaptive {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn handle(&mut self, now: Time, input: &Input) -> Vec<Action> {
        self.now = self.now.max(now);
        let mut actions = Vec::new();
        let mut touched: Vec<usize> = Vec::new();
        match input {
            Input::Start => touched.extend(0..self.sites.len()),
            Input::Site { site, event } => {
                let change = self.book.apply(*site, event);
                self.observe(site.index(), event, &change, now);
                actions.extend(self.book.after_failure(*site, &change));
                touched.push(site.index());
            }
            Input::Tick => {
                while let Some(&(key, i)) = self.due.first() {
                    if key.time() > now {
                        break;
                    }
                    self.due.pop_first();
                    self.due_at[i as usize] = None;
                    touched.push(i as usize);
                }
                if self.next_tail.is_some_and(|t| t <= now) {
                    self.next_tail = None;
                    for (site, jobs) in self.planner.tail_moves(&self.book) {
                        let why = "adaptive: tail: a site with room would finish these sooner".to_string();
                        self.withdraw(site, &jobs, why, &mut actions);
                    }
                    self.remove_stragglers(now, &mut actions, &mut touched);
                }
            }
        }
        for i in touched {
            self.review(i, now, &mut actions);
        }
        if self.book.any_barred() {
            let live: Vec<bool> = self.sites.iter().map(|s| !s.closed(now)).collect();
            actions.extend(self.book.give_up_stranded(&live));
        }
        let sites = &self.sites;
        actions.extend(self.planner.dispatch(now, &mut self.book, |site, m| {
            let s = &sites[site.index()];
            format!(
                "adaptive: window {:.0} (healthy ≤ {:.0}{}), {}",
                m.window,
                s.floor,
                if s.ceiling < s.cap { format!(", degraded ≥ {:.0}", s.ceiling) } else { String::new() },
                m.waiting_ahead()
            )
        }));
        if self.book.pool_len() == 0 && self.book.out_total() > 0 && self.next_tail.is_none() {
            let tick = TAIL_TICK * self.tail_run(now);
            self.next_tail = Some(now + tick.max(1.0));
        }
        actions
    }

    fn next_deadline(&self) -> Option<Time> {
        let due = self.due.first().map(|(k, _)| k.time());
        match (due, self.next_tail) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        let s = &self.sites[site.index()];
        let model = self.planner.model(site);
        let class = if s.closed(self.now) {
            SiteClass::Unresponsive
        } else if !s.ready() {
            SiteClass::Unknown
        } else {
            // Fast: no slower than the median open site.
            let mut latencies: Vec<f64> = (0..self.sites.len())
                .map(|j| self.planner.model(SiteId(j as u32)))
                .filter(|m| m.open)
                .map(|m| m.latency())
                .collect();
            latencies.sort_by(f64::total_cmp);
            let median = latencies.get(latencies.len() / 2).copied().unwrap_or(f64::INFINITY);
            if model.latency() <= median {
                SiteClass::Fast
            } else {
                SiteClass::Slow
            }
        };
        SiteView {
            window: s.window.round() as u32,
            capacity: s.capacity_found(),
            class,
            agtime: s.ready().then_some(model.wait + model.run),
        }
    }

    fn learned(&self) -> CapacityMemory {
        let mut learned = CapacityMemory::new();
        for s in &self.sites {
            learned.insert(s.name.clone(), self.kind_keys[0].clone(), s.memory(self.now));
        }
        learned
    }

    fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decided)
    }

    fn checkpoint(&self) -> Option<Vec<u8>> {
        postcard::to_stdvec(self).ok()
    }

    fn restore(&mut self, saved: &[u8]) -> Result<(), String> {
        let saved: Adaptive = postcard::from_bytes(saved).map_err(|e| format!("unreadable: {e}"))?;
        let names = |a: &Adaptive| a.sites.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        if names(&saved) != names(self) || saved.book.n_jobs() != self.book.n_jobs() {
            return Err(format!(
                "it is of another run ({} jobs over sites {:?})",
                saved.book.n_jobs(),
                names(&saved)
            ));
        }
        let fresh = std::mem::replace(self, saved);
        self.take_limits_of(fresh);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
