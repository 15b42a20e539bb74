//! `adaptive`: the default policy — an estimator per site and a controller,
//! from nothing but what HTCondor tells a user (the user log, our jobs'
//! counts, slot counts).
//!
//! **The model.** A site runs our jobs on `slots` slots after a queue wait
//! (other users) that we take as exponential. All our jobs share a resource
//! we cannot see; past some concurrency (the knee) every running job slows
//! at once, and throughput stays flat or falls. A job's healthy run time is
//! its own work at the site's speed, spread by the jobs' sizes (±50% is
//! ordinary). Attempts fail at some rate.
//!
//! **What is estimated, per site.**
//! - *Healthy run times*: the Kaplan–Meier distribution (`runtime.rs`) of jobs
//!   that only ever ran at levels known healthy (running jobs are censored
//!   observations, so a cohort's short jobs ending first do not bias it).
//!   Known healthy *now*: a run is censored when the level first passes the
//!   floor, and taken again up to the first passing of a floor a later
//!   verdict raised (else the sample stayed the first cohort's short half,
//!   since a probe or a queue ahead keeps the level past the floor). A
//!   healthy test's floor is the average of the whole levels it ran at, so
//!   it ran at `⌈floor⌉` for part of its time: that level is not past it.
//!   A sample taken again that leaves more than half its runs unseen is not
//!   taken: the old one, censored at the old floor, is healthy still, and
//!   no test runs without a baseline.
//! - *Queue wait*: the exponential's MLE with censoring — all waiting done
//!   (started jobs and those still idle) over the starts. A site that starts
//!   nothing looks slower the longer it does so.
//! - *Failure rate*: successes and failures (Laplace's rule).
//! - *The knee*: a floor (highest level known healthy) and a ceiling (lowest
//!   level seen degraded), from sequential tests.
//!
//! **Degraded or not: a sequential test.** While more than the floor run,
//! Wald's SPRT weighs "jobs run `degradation_factor` (κ) times slower
//! whenever more than the floor run" against "they run healthy", with the
//! likelihood of every job's run under each: a job that ended contributes the
//! density of its run time, a job still running the probability of running
//! that long, each job's time above the floor counted κ times slower under
//! the first hypothesis. Processor sharing slows every running job at once,
//! so old jobs testify as soon as the level rises — no need to wait a run
//! time for jobs started there. The thresholds `ln((1 − β)/α)` and
//! `ln(β/(1 − α))` bound the false alarm rate by `false_alarm` (α) and the
//! miss rate by `missed_alarm` (β) whatever the spread of run times, since
//! the spread is in the likelihoods; no single job can decide, since every
//! likelihood is floored by a 1% share of outliers.
//!
//! Those bounds hold for a null that is known, and ours is learned from as
//! few as eight runs (the first verdict comes once half the first cohort
//! has ended). Four consequences, each from the estimate's own error:
//! the scale of the learned runs is a nuisance parameter, known to within
//! `z` standard errors of the sample's mean, `z` the normal quantile of α
//! (3.1): with runs ±50% that is 31% at 8 runs, 22% at 16 and 11% at 64,
//! and never taken below 10%. So every hypothesis — healthy, and each
//! slowdown — takes the best of the runs as learned and up to that much
//! longer, in steps as fine as the distribution's own smoothing, the
//! range fixed when a test begins (profiled out alike: on the healthy side
//! only, jobs all a little long past a knee would testify for health with
//! their whole runs and against it only with their time above the level);
//! running jobs testify only at ages
//! between the shortest and the longest healthy run seen (outside, survival
//! is the kernel's or the tail's assumption), or once past where a healthy
//! run is unlikely (as having survived to there: a collapsed site's jobs
//! would otherwise say nothing until they end, many run times later). That
//! is twice the longest while some sampled run has not ended; once all
//! have, the end of the spread lies past the longest of n by more than
//! ln(100)/n of their range with chance 1%, and the healthy side may
//! stretch it by the scale's range more (1.1–1.15× the longest on jobs of
//! one size, so a site three times slow is seen within a run time, not
//! two); past the longest run seen lies the mass 1/(n + 1) that the next
//! of n + 1 draws is the longest; and a test that has weighed as many
//! whole runs above its level as a full sample holds (`SAMPLE`, 64)
//! without a verdict ends healthy. It then knows the level as well as the
//! baseline knows the floor, so a slowdown it cannot prove is within the
//! baseline's own error, and a level whose jobs run less than κ slower
//! than the floor's delivers more than the floor does. Measured on a
//! healthy 300-slot site with run times ±50% (40 seeds): one false alarm,
//! where the naive test had six. With the scale's range fixed at 10%, a
//! first baseline 10–20% short called healthy sites slowed at every level
//! (20% of attempts failing, jobs of 30 s, waits of 600 s: held at 4–64 of
//! 300 slots, up to 27 times slower than plain submission), or left their
//! first probe undecided for 35 run times.
//!
//! **The controller.** A site starts at `initial_window` jobs, taken as
//! healthy: their runs are the distribution (no jobs are queued ahead until
//! then: they would start whenever the queue lets them and run the site
//! past the level its baseline is learned at). Then:
//! - *healthy*: the floor rises to the level that ran; the window goes to
//!   `probe_gain` × the floor (no ceiling known: an overshoot is at most that
//!   factor past the knee) or to the geometric middle of floor and ceiling
//!   (bisection, as the thesis's binary search);
//! - *degraded at level n with slowdown s* (s the least slowdown the
//!   evidence proves, the first past the threshold; the most likely one
//!   cuts deeper and was measured worse on the family): the site delivered
//!   what `n / s` jobs at full speed would — its knee if the resource only
//!   shares, a lower bound if it thrashes — so the window goes there (never
//!   below the floor) and the ceiling to n. Where the proof rests on jobs
//!   still running past where a healthy run is unlikely, s is only a bound
//!   from below (an earlier verdict proves less), and what n delivered is
//!   unknown: the window goes back to the floor. The site drains by getting
//!   nothing, and the next test starts once it has (once no whole job is
//!   past the window). Until then the
//!   verdict's test goes on: a verdict reached at the first moment the
//!   evidence sufficed proves the least slowdown it could (often κ, even
//!   where jobs run eight times slow), and once its jobs prove "at least a
//!   larger s" against every smaller slowdown, healthy included (the
//!   generalized likelihood ratio of the slowdowns from s up against those
//!   below, past the same threshold), the cut follows that s, as if the
//!   verdict had said so. Running jobs are removed
//!   only where keeping them costs throughput: with sharing alone a site
//!   delivers its knee whatever runs, at least the window the cut leaves, so
//!   `n / s` κ times below that window (κ also covers the test's resolution
//!   of s, the grid of slowdowns it weighs) means the jobs past it make the
//!   resource deliver less than the window alone would (it thrashes, and
//!   draining would take s run times at that low rate). Then the youngest
//!   jobs past the window, which have done the least work, go back to the
//!   pool.
//!   (A first window already past the knee makes the baseline slow too; then
//!   sharing alone can read as thrash, and the jobs removed, those past the
//!   window, lose their work so far: at a 400-slot site of knee 8 the
//!   makespan moved by −0.7% to +1.1% over five seeds against keeping them);
//! - *converged* (ceiling within 1 + `precision` of the floor): the level is
//!   held and watched by the same test against "everything runs κ slower
//!   now" (a capacity drop cuts to the delivered level), and after
//!   `reprobe_after` run times the level above is tried (a capacity that
//!   dropped may have come back). Where no level was seen degraded, the
//!   slots, not a knee, ended the search: the window stays at the slots
//!   (the level that ran falls short of the window by the jobs between one
//!   start and the next, and holding that level idled those slots: 283 of
//!   300 on a healthy site).
//!
//! **Routing and queueing** are the [`Planner`]'s, shared with the oracle:
//! Little's law keeps `rate × wait` jobs waiting ahead where waits are known
//! (no more than would, each after its own exponential wait, take the site
//! `probe_gain` times past its window within a run time, the overshoot a
//! probe risks anyway, nor `probe_gain²` times past it if all started at
//! once, as a negotiation cycle may start them; a cap of one window for
//! that case alone left sites whose waits outlast their runs half used),
//! the pool is water-filled by expected finish time so that a slow site gets
//! no job the fast ones would finish sooner, and once the pool is empty idle
//! jobs move to a site that would finish them sooner. So do running jobs
//! past the window of a site draining after a degraded verdict: each is
//! expected to need the mean run, at the most likely slowdown then (not the
//! least, which sets the window), less its age, to end there, and a
//! fresh start at another site with room that beats this by the margin a
//! move of an idle job needs goes ahead (a capacity that drops near the
//! end would otherwise make its slowed jobs the run's tail). A job past
//! where a healthy run is unlikely, where the test stops weighing its age, is
//! slowed by an unknown factor: knowing only that its total time exceeds
//! its age, a scale-free prior puts the median of what is left at that age
//! (a site that collapsed past a low knee held such jobs for 2-5× the
//! oracle's makespan; moving them took it to 1.3-1.8×). For these tail
//! rules every test goes on once every job has been sent (the tail: what
//! starts from then on is only jobs that came back, failed or moved): a
//! last probe past a steep knee is otherwise never judged, and a capacity
//! that drops near the end never seen, and their jobs never moved. And a
//! degraded verdict's test goes on while any job runs past the floor, not
//! only past the window: no job starts to feed a later test, and what ran
//! through the overload is no evidence for one, so a verdict of the least
//! slowdown left its jobs under a window still far past the knee, unjudged
//! to the end (a knee of 27 that thrashes, judged "1.25× slower" at 54:
//! 43 jobs ran on 3.5 times slow). What a verdict on the
//! floor says then is not remembered for the next run, though: it is the
//! run's last few jobs that judge it. While a site drains past its window,
//! nothing is sent there, not even to wait ahead: it would start into the
//! overload, and in the tail be moved on, come back and be moved again.
//! Jobs already waiting there stay (withdrawn, they would lose their place
//! in the queue). Sites without their own run times yet are planned with
//! the other sites' median.
//!
//! **The first window, checked.** The baseline is learned at the first
//! window, healthy by assumption. Past a knee under it every baseline run
//! is slowed alike, so nothing tells the floor from the knee and the site is
//! held there (a knee of 9 under 16 that thrashes: every job four times
//! slow). Only a level below can tell, and two things say when to look.
//! A probe above that proves the site delivered less than the floor would
//! at full speed (`n / s` under the floor) proves the resource thrashes, so
//! a floor past the knee costs throughput, not just latency (with sharing
//! alone a level past the knee delivers the knee, and no check is needed).
//! And the other sites: hardware makes a site at most `SPEED_SPREAD` (2)
//! times slower than the median one, so a baseline slower than that was
//! slowed by what ran beside it. Sites are compared at the run a quarter of
//! runs end by (a first verdict comes with up to half the cohort unseen:
//! the median is at the edge of the data, the mean the tail's assumption),
//! beyond `z` standard errors of that quantile (√(p(1 − p)/n) over the
//! density there), plus the minute HTCondor-G may take to hear of an end
//! (a remote site's short runs read long by that much beside a local
//! pool's): with runs ±50% and eight ended the error is about 60%, so
//! only baselines three times slower or more are checked this way, and a
//! site of half the median speed is not (0 of 40 seeds; 5 with the
//! spread of the runs seen for the error). Then,
//! where the floor is still the baseline's own level, the window goes to
//! the level below (the floor over `probe_gain`). Running jobs are shed and
//! moved by the floor, as without the check: those between the two levels
//! cost throughput only if the floor was slowed, which is not known yet, so
//! they drain. Once the site has drained, the baseline is set aside and the
//! runs below are learned afresh, with no test meanwhile. If the floor's
//! runs were κ times longer than these and more, by more than `z` standard
//! errors of the two means, the floor was slowed: the level below becomes
//! the floor (its runs the baseline, unchecked in turn), the old floor the
//! ceiling, and the search bisects between them. Else the old floor and its
//! baseline come back, the new runs added to its sample. A run that ends
//! with the check under way remembers the old floor and baseline. Where the
//! floor was healthy under a knee that thrashes (24 under a probe of 32),
//! the check costs a run time at half the floor; knees of 5 and 9 under 16
//! went from 5.9 and 2.7 times the oracle's makespan to 2.1 and 1.4. The
//! other sites speak once the first verdict comes, a probe's only once it
//! ends: a knee of 8 under 16 beside two healthy sites went from 1.4–1.9
//! times the oracle's makespan to 1.2–1.4.
//!
//! **A first window past a steep knee** runs the whole first cohort slowed,
//! so none of it ends and the site never learns a baseline to test by.
//! Only other sites can speak for it: hardware differs between sites, up to
//! `SPEED_SPREAD` (2) times slower than the median one, so once the pool
//! is empty, first-cohort jobs older than `FAR_PAST` times the longest
//! healthy run such a site would take (4× the median site's longest, plus
//! the minute HTCondor-G may take to hear of an end) move by the straggler
//! rule, their age taken as what they still need; and the site starts
//! again at the level the first cohort delivered, the same `n / s` with s
//! the least slowdown their age proves. Kept, they were the run's tail (a
//! knee of 9 under a drop to a quarter: 3.7× the oracle's makespan, 2.5×
//! with the rule).
//!
//! **Unresponsive sites.** HTCondor's own "grid resource down" (026) closes a
//! site at once (its idle jobs are withdrawn, running ones stay) until 027
//! says it is back. A site that starts nothing within `idle_timeout` is given
//! up for twice that, then tried with one job. Before that its queue wait
//! (the waiting so far over one start, less the minute HTCondor-G may take
//! to hear of a remote start) is looked at each time it doubles,
//! so the planner sends it nothing more and the tail moves its idle jobs
//! to sites that start them.
//!
//! **Memory.** [`Policy::learned`] keeps each site's floor, ceiling, healthy
//! run-time quantiles with the shortest and longest run seen, and mean wait;
//! a warm run starts there and tests from its first job. A site that
//! started nothing starts with one job's wait of `idle_timeout` in vain,
//! the least it was last time.
//!
//! Cost per input: O(log) in jobs and sites, plus a test over at most 256
//! running jobs of the site concerned (and, while its first window is
//! unchecked, a median over the sites); sites that did not change are not
//! visited.

mod runtime;
mod site;

use super::book::{Change, TimeKey};
use super::plan::Planner;
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

impl Params {
    fn rules(&self) -> Rules {
        let alpha = self.false_alarm.clamp(1e-9, 0.5);
        let beta = self.missed_alarm.clamp(1e-9, 0.5);
        Rules {
            kappa: self.degradation_factor.max(1.01),
            upper: ((1.0 - beta) / alpha).ln(),
            lower: (beta / (1.0 - alpha)).ln(),
            gain: self.probe_gain.max(1.1),
            precision: self.precision.max(0.01),
            reprobe_after: self.reprobe_after.max(1.0),
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
    #[serde(default)]
    every_job_sent: bool,
    /// The median healthy run time of the sites that know theirs, and which
    /// sites those were at their last review.
    fallback_run: Option<f64>,
    ready: Vec<bool>,
    /// The latest time seen (for what is learned at the end).
    now: Time,
    /// For [`Policy::take_decisions`]: what is not taken yet, and per site
    /// what was told.
    decided: Vec<Decision>,
    told: Vec<Told>,
}

/// How many of a site's verdicts, and which (window, capacity), were told.
#[derive(Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
struct Told {
    verdicts: usize,
    window: Option<(f64, Option<f64>)>,
}

impl Adaptive {
    pub fn new(spec: &RunSpec, params: &Params) -> Self {
        let rules = params.rules();
        let sites: Vec<Site> = spec
            .sites
            .iter()
            .map(|info| {
                let cap =
                    f64::from(info.slots.unwrap_or(u32::MAX).min(info.max_jobs.unwrap_or(u32::MAX)).max(1));
                let cap = cap.min(1e6);
                Site::new(
                    info.name.clone(),
                    cap,
                    info.idle_timeout.unwrap_or(params.idle_timeout),
                    f64::from(params.initial_window),
                    rules,
                    spec.memory.get(&info.name),
                )
            })
            .collect();
        let n = sites.len();
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
        };
        policy.ready = policy.sites.iter().map(Site::ready).collect();
        policy.fallback_run = policy.median_run();
        policy
    }

    /// The median over sites with healthy runs of their own (but site
    /// `except`) of one statistic of those runs.
    fn median_over_ready(&self, except: Option<usize>, of: impl Fn(&Distribution) -> f64) -> Option<f64> {
        let mut values: Vec<f64> = (self.sites.iter().enumerate())
            .filter(|&(j, s)| Some(j) != except && s.ready())
            .filter_map(|(_, s)| s.dist.as_ref())
            .map(of)
            .collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    }

    fn median_run(&self) -> Option<f64> {
        self.median_over_ready(None, Distribution::mean)
    }

    fn median_longest(&self) -> Option<f64> {
        self.median_over_ready(None, Distribution::longest_seen)
    }

    /// Feeds a site event to the site's estimator.
    fn observe(&mut self, i: usize, event: &SiteEvent, change: &Change, now: Time) {
        let at = event.at().unwrap_or(now);
        let s = &mut self.sites[i];
        match change {
            Change::Submitted { jobs } => s.submitted(jobs, at),
            Change::Started { job, .. } => s.started(*job, at),
            Change::Succeeded { job, ended, .. } => s.ended(*job, *ended, End::Success),
            Change::Failed { job, .. } => s.ended(*job, at, End::Failure),
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
                if let Some(others) = self.median_over_ready(Some(i), quantile) {
                    self.sites[i].check_slow_baseline(others);
                }
            }
            self.sites[i].maybe_reprobe(now);
        }
        if self.sites[i].ready() != self.ready[i] {
            self.ready[i] = self.sites[i].ready();
            let fallback = self.median_run();
            if fallback != self.fallback_run {
                self.fallback_run = fallback;
                for j in (0..self.sites.len()).filter(|&j| j != i && !self.sites[j].ready()) {
                    let model = self.sites[j].model(now, self.fallback_run);
                    self.planner.set_model(SiteId(j as u32), model, &self.book);
                }
            }
        }
        let model = self.sites[i].model(now, self.fallback_run);
        self.planner.set_model(site, model, &self.book);
        let surplus = self.planner.surplus(site, &self.book);
        if surplus > 0 {
            let jobs: Vec<JobId> =
                self.book.idle_at(site).iter().rev().take(surplus as usize).copied().collect();
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
        let (site, s, told) = (SiteId(i as u32), &self.sites[i], &mut self.told[i]);
        for &(at, verdict, _) in s.verdicts.iter().skip(told.verdicts) {
            let kind = match verdict {
                Verdict::Healthy { level } => DecisionKind::Verdict { healthy: true, level, slowdown: None },
                Verdict::Degraded { level, slowdown } => {
                    DecisionKind::Verdict { healthy: false, level, slowdown: Some(slowdown) }
                }
            };
            self.decided.push(Decision { at, site, kind });
        }
        told.verdicts = s.verdicts.len();
        let window = (s.window, s.searched.then_some(s.floor));
        if told.window != Some(window) {
            told.window = Some(window);
            let kind = DecisionKind::Window { window: window.0, capacity: window.1 };
            self.decided.push(Decision { at: now, site, kind });
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
                if !silent.is_empty() {
                    self.sites[i].restart_below(now, &silent, longest);
                    touched.push(i);
                }
            }
            let cases = [
                (self.sites[i].stragglers(now), "these run slowed past the window"),
                (
                    silent,
                    "these outlast what a slower healthy site would take by far (a first window past a knee)",
                ),
            ];
            for (stragglers, because) in cases {
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
        if let Some(t) = self.sites[i].next_check(now) {
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
        let sites = &self.sites;
        actions.extend(self.planner.dispatch(now, &mut self.book, |site, m| {
            let s = &sites[site.index()];
            format!(
                "adaptive: window {:.0} (healthy ≤ {:.0}{}), {:.0} waiting ahead",
                m.window,
                s.floor,
                if s.ceiling < s.cap { format!(", degraded ≥ {:.0}", s.ceiling) } else { String::new() },
                m.attempt_rate() * m.ahead
            )
        }));
        if self.book.pool_len() == 0 && self.book.out_total() > 0 && self.next_tail.is_none() {
            let tick = TAIL_TICK * self.fallback_run.unwrap_or(60.0);
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
            capacity: s.searched.then_some(s.floor),
            class,
            agtime: s.ready().then_some(model.wait + model.run),
        }
    }

    fn learned(&self) -> CapacityMemory {
        self.sites.iter().map(|s| (s.name.clone(), s.memory(self.now))).collect()
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
        *self = saved;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
