//! `adaptive`: the default policy. It keeps the thesis's ideas — degradation
//! is a run time more than 25% above the site's uncongested baseline, each
//! site's capacity is searched for, sites are told apart by AgTime (queue
//! wait + run time) and the fast ones get the work first — and drops what
//! makes the thesis slow: batches, the barrier, forgetting.
//!
//! - **Continuous windows, no rounds.** Each site has a target concurrency
//!   (its window); a job goes out as soon as one comes back, so no site waits
//!   for another and no batch waits for its slowest job.
//! - **Baseline first.** A site starts at `initial_window` jobs (below most
//!   knees); their run times are its uncongested baseline, except those that
//!   ended after the window had grown well past that level (the cohort's
//!   long jobs end last, into a blind overshoot). Later jobs count for the
//!   baseline only if they ran at no more than that concurrency, so slightly
//!   slowed jobs cannot make the baseline, and the knee, creep up; and after
//!   40 jobs the baseline is closed, since a capacity drop below that level
//!   would otherwise let slowed jobs in one after another.
//! - **Growth clocked by completions, bounded by verified levels.** Until a
//!   knee is seen the window grows by `growth` per healthy completion: a site
//!   without contention is full within a few dozen completions. Completions
//!   come faster the more jobs run, so unchecked this growth runs away
//!   (×2 in seconds near a knee of 80); it is therefore held within
//!   `verified_growth` × the highest level the pace test has verified (see
//!   below), and jumps to that bound at each verification. An overshoot is
//!   at most that factor past the knee.
//! - **The pace test.** All our jobs at a site share its resource, so past
//!   the knee every running job slows at once — including the first cohort,
//!   whose healthy run times are known. Taking healthy run times as uniform
//!   on [shortest, shortest + spread], each running job older than the
//!   shortest healthy run would end at a known rate (hazard); their sum,
//!   integrated over time, is the number of completions a healthy site would
//!   have produced. When that reaches `pace_verify` and at least
//!   `pace_healthy` of it happened, the mean concurrency over the interval is
//!   verified healthy; while growing blind, once it reaches `pace_judge` and
//!   fewer than `pace_degraded` of it happened, the site is degraded — about
//!   a minute after an overshoot, while completions still trickle in (which
//!   the stall test below cannot see).
//! - **Degradation from running jobs.** Past the knee jobs old enough
//!   to finish under health stop finishing. The stall test asks whether the
//!   `k` running jobs older than the shortest healthy run have produced no
//!   completion for `stall_patience` × (spread of healthy run times ÷ k) —
//!   seconds to a minute after an overshoot, not a job length later. Once a
//!   knee is known (or remembered) a job is due only after the shortest
//!   healthy run slowed by the tolerated 25%: levels then move by a few
//!   jobs, and a cohort slowed 15% by one is not a stall. A job
//!   that lived through an overload before a cut did only part of its work
//!   (credited at half the speed the cut estimated), so it is due that much
//!   later: otherwise the survivors of a cut look stalled and cause a second,
//!   needless one. A job older than `overdue_factor` × the longest healthy
//!   run is a slower backstop; completed jobs give the mild signal (smoothed
//!   run time ÷ baseline above `degradation_factor`, confirmed by a job
//!   longer than any healthy one: a cohort of jobs started together ends
//!   longest last, and its tail alone reads 1.2 on a healthy site).
//!   A site kept above its window by jobs queued ahead is judged like any
//!   other once a healthy run has passed since the cut.
//! - **Cut to the measured knee, then bisect.** A degradation at `n` running
//!   makes `n` the ceiling. With a measured slowdown the window goes to
//!   `n / slowdown` (the knee if throughput were flat past it), but keeps
//!   90% of `n`: a mild signal means a little past the knee, and below it
//!   every missing job costs throughput while above it a job costs only a
//!   little (nothing at all where the resource only shares). A pace verdict
//!   of `o` completions where `e` were expected cuts to `n (o + 2) / e`, where
//!   the knee could at most be, and makes 1.5× that the ceiling (past it
//!   jobs would run more than 25% slow even if the resource only shared).
//!   On a stall the window goes to `n / 2` (Algorithm 2's low end), or to the
//!   throughput delivered since the previous cut if higher (jobs finished ×
//!   baseline ÷ time: the knee itself when the resource only shares, less
//!   when it thrashes, so a safe lower bound); never below the level last
//!   confirmed healthy. When the pace test found the site degraded, jobs
//!   progressed at about (completions seen ÷ expected) of healthy speed, so
//!   running jobs × that ratio is a lower bound on the knee: no later cut
//!   goes below it, capped at 0.8 × the level being cut so a cut still
//!   cuts. The youngest running jobs above the window are removed if they
//!   did little work (age × their share of the new window
//!   below half a baseline run after a stall, a quarter after a mild
//!   signal). Between floor and ceiling the window moves by bisection in log
//!   space; a level is confirmed by three completions of jobs started at it
//!   that took no longer than the baseline mean (the first jobs to end at a
//!   level are its short ones: "within 25%" would confirm a level 30% slow;
//!   not while the pool is empty: a draining site tests nothing, and
//!   the capacity remembered for the next run must have been tested). After
//!   `reprobe_after` baseline run times at a converged level the ceiling is
//!   raised again, so a capacity that dropped and recovered is followed;
//!   after a drop from a confirmed level, that lost level is where the
//!   re-probe aims (a bisection back toward it, not ×1.25 steps), and a
//!   lost level well above the final one is what memory keeps, since a
//!   capacity that dropped during this run may be whole at the next start.
//! - **Queueing ahead.** Where other users make us wait, `window × mean wait
//!   / run time` extra jobs are kept idle at the site (Little's law), so a
//!   finished job's slot is refilled at once.
//! - **Routing by expected completion, non-blocking reclassification.**
//!   Pool jobs go first to the sites with the lowest expected turnaround
//!   (mean wait + baseline); fast/slow classes are recomputed from AgTime on
//!   every input, never at a barrier. Near the end a site is skipped when a
//!   job sent there would finish after the pool has drained through faster
//!   sites, and once the pool is empty jobs still idle at a slow site are
//!   moved to a site with room that would finish them sooner.
//! - **Idle timeouts.** A site that starts nothing within `idle_timeout` is
//!   unresponsive: its jobs are removed and go elsewhere; one probe job is
//!   tried again after twice the timeout.
//! - **Memory.** [`Policy::learned`] returns each site's capacity, baseline
//!   and mean wait; a warm run starts each site at `warm_start` × its
//!   remembered capacity (the search may end a few jobs past the knee, where
//!   run times are still within the 25%) with its remembered baseline, so it
//!   can judge degradation from the first job on. The remembered baseline
//!   weighs as much as 20 jobs here, and the remembered longest healthy run
//!   confirms slowdowns; for the stall test healthy runs are taken to span
//!   [0.85, 1.35] × the baseline until 20 have been seen (a remembered
//!   shortest run would call a cohort a few percent slow stalled).
//!
//! Cost per input: O(sites + log jobs) — ordered sets of running and idle
//! jobs per site, the stall and pace tests look at no more than the 64
//! oldest running jobs; nothing scans the N jobs.

use super::book::Change;
use super::{
    Action, CapacityMemory, Input, JobBook, JobId, JobState, Policy, RunSpec, SiteClass, SiteId, SiteMemory,
    SiteView, Time,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Parameters from the `[policy]` table of sites.toml (`policy = "adaptive"`,
/// the default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// Concurrency a site starts at when nothing is known about it (capped by
    /// its slots and `max_jobs`). Small enough to run below most knees, so
    /// that the first run times are an uncongested baseline.
    pub initial_window: u32,
    /// C2 of the thesis: a site is degraded when jobs run this many times
    /// longer than the baseline on average.
    pub degradation_factor: f64,
    /// A running job older than this many times the longest healthy run time
    /// seen at the site (once 20 have been seen), and than
    /// `degradation_factor` × 1.2 × the baseline, is evidence of degradation
    /// without waiting for it to end.
    pub overdue_factor: f64,
    /// Factor by which the window grows per healthy completion while no knee
    /// has been seen (1.1: about ×2.6 per ten completions).
    pub growth: f64,
    /// Jobs old enough to finish under health that produce no completion for
    /// this many expected gaps between completions mean the site stalled
    /// (lower: faster detection of an overshoot, more false alarms).
    pub stall_patience: f64,
    /// Pace test: once the running jobs old enough to end under health would
    /// have produced this many completions (a healthy site's expectation),
    /// the level they ran at is verified healthy if at least `pace_healthy`
    /// of that number did end.
    pub pace_verify: f64,
    /// Fraction of the expected completions that verifies a level (0.75).
    pub pace_healthy: f64,
    /// Pace test, while growing without a known knee: once this many
    /// completions are expected, fewer than `pace_degraded` of them mean the
    /// site slowed down (an overshoot), long before a new job is overdue.
    /// Higher: fewer false alarms, later detection.
    pub pace_judge: f64,
    /// Fraction of the expected completions below which the pace says
    /// degraded (0.4: jobs progress at less than 40% of healthy speed).
    pub pace_degraded: f64,
    /// While no knee is known the window stays within this factor of the
    /// highest level the pace test verified (or the baseline level), and
    /// jumps to it at each verification: an overshoot is at most this many
    /// times the knee. Lower: smaller overshoots, slower fill of a site
    /// without contention.
    pub verified_growth: f64,
    /// A warm start begins at this fraction of the remembered capacity
    /// (unless the capacity was the site's whole limit) and climbs from
    /// there: a remembered level a little above the knee would otherwise
    /// stall the first jobs.
    pub warm_start: f64,
    /// A level set after a knee was seen is confirmed healthy no sooner than
    /// this many shortest healthy run times after it was set, and only once
    /// three jobs started at it have ended healthy.
    pub confirm_after: f64,
    /// After this many baseline run times at a converged level the ceiling is
    /// raised and the level above is tried (capacity can come back).
    pub reprobe_after: f64,
    /// Seconds a site may leave every job idle before it is declared
    /// unresponsive and its jobs are sent elsewhere. A site's own
    /// `idle_timeout` takes precedence.
    pub idle_timeout: f64,
    /// Whether to submit ahead at sites with long queue waits (Little's law).
    pub queue_ahead: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            initial_window: 32,
            degradation_factor: 1.25,
            overdue_factor: 1.1,
            growth: 1.1,
            stall_patience: 10.0,
            pace_verify: 6.0,
            pace_healthy: 0.75,
            pace_judge: 12.0,
            pace_degraded: 0.4,
            verified_growth: 4.0,
            warm_start: 0.9,
            confirm_after: 1.0,
            reprobe_after: 1.5,
            idle_timeout: 1200.0,
            queue_ahead: true,
        }
    }
}

/// What showed a site degraded.
#[derive(Clone, Copy, Debug)]
enum Evidence {
    /// Completed jobs ran this many times the baseline (smoothed).
    Slowdown(f64),
    /// The pace test: `observed` completions where a healthy site would
    /// have produced `expected`.
    Pace { observed: f64, expected: f64 },
    /// Jobs old enough to have finished under health are not finishing.
    Stall,
}

/// Deadlines closer than this count as reached: the engine's clock rounds to
/// nanoseconds, and a deadline checked as missed by that much would be
/// dropped (a lost wake-up) or asked for again at once (a livelock).
const TIME_SLACK: Time = 1e-6;

/// Run times that make a site's baseline. The jobs' own length does not
/// change during a run, so once this many are known the baseline is closed:
/// admitting more lets jobs slowed by a capacity drop in, each raising the
/// mean a little and letting slower ones in after it, until a 1.4× slowdown
/// reads as healthy (and is remembered so for the next run).
const BASELINE_JOBS: u32 = 40;

/// Key for ordering by time (non-negative finite times order like their bits).
fn tkey(t: Time) -> u64 {
    t.max(0.0).to_bits()
}

/// Running mean and maximum of a sample.
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    n: u32,
    sum: f64,
    min: f64,
    max: f64,
}

impl Stats {
    fn add(&mut self, x: f64) {
        self.min = if self.n == 0 { x } else { self.min.min(x) };
        self.n += 1;
        self.sum += x;
        self.max = self.max.max(x);
    }
    fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / f64::from(self.n))
    }
}

struct SiteState {
    name: String,
    /// Most jobs that may be out (slots, operator cap).
    cap: f64,
    idle_timeout: f64,
    /// Concurrency we aim to keep running.
    target: f64,
    /// Highest concurrency confirmed healthy.
    floor: f64,
    /// Lowest concurrency seen degraded since the last re-probe.
    ceiling: Option<f64>,
    /// When `target` last changed.
    level_since: Time,
    /// Completions of jobs started since `level_since` that took no longer
    /// than the baseline mean: the evidence that confirms a level.
    level_ok: u32,
    /// Jobs started before this are not judged overdue (they lived through a
    /// level that was already judged).
    judged_until: Time,
    /// Estimated speed of jobs, relative to healthy, before the last cut:
    /// a job that lived through the overload has done about
    /// `age × cut_speed` of its work and is due that much later.
    cut_speed: f64,
    /// Run times of jobs that ran at a healthy level.
    healthy: Stats,
    /// Baseline known from memory before any job ran here.
    remembered_baseline: Option<f64>,
    /// Shortest and longest healthy run times known from memory.
    remembered_range: Option<(f64, f64)>,
    /// Concurrency up to which a completed job counts for the baseline: the
    /// initial window (or most of the remembered capacity). Jobs run higher
    /// may be slightly slowed, and letting them in would let the baseline,
    /// and with it the knee, creep up.
    baseline_level: f64,
    /// Recent slowdowns (run time ÷ baseline) of completed jobs, smoothed.
    slowdown: Option<f64>,
    /// Last completion of a judged job (started after `judged_until`).
    last_completion: Time,
    /// When the baseline became known; jobs started before it made it and
    /// are not judged by their run time.
    baseline_since: Option<Time>,
    /// Healthy completions since the last growth step.
    healthy_completions: u32,
    /// Successful completions since the last cut (`judged_until`).
    completions_since_cut: u32,
    /// Running jobs by start time.
    running: BTreeSet<(u64, JobId)>,
    /// Start time and concurrency integral at start of each running job.
    started: BTreeMap<JobId, (Time, f64)>,
    /// ∫ running dt up to `integral_at`.
    integral: f64,
    integral_at: Time,
    /// Idle jobs by submission time (for idle timeouts and moving the tail),
    /// and the submission time of each.
    idle: BTreeSet<(u64, JobId)>,
    submitted: BTreeMap<JobId, Time>,
    /// Queue waits (submit → start) and AgTimes (submit → end) seen here.
    waits: Stats,
    agtime: Option<f64>,
    first_submit: Option<Time>,
    any_started: bool,
    /// Unresponsive: no new jobs until this time, then one probe.
    unresponsive_until: Option<Time>,
    /// Pace test: completions of judged jobs a healthy site would have
    /// produced since the test was last reset (∫ hazard dt over the due
    /// running jobs), the completions seen, and when it was last integrated.
    pace_expected: f64,
    pace_observed: f64,
    pace_at: Time,
    /// Fewest jobs running since the pace test was last reset: the level
    /// its verdict is about.
    pace_level: f64,
    /// Concurrency integral and time when the pace test was last reset.
    pace_integral0: f64,
    pace_t0: Time,
    /// Highest level at which the pace test found the site healthy.
    verified: f64,
    /// Highest confirmed level a later degradation took away (0 if none):
    /// capacity that dropped may come back, and the re-probe aims there.
    lost: f64,
    /// Knee estimated when the pace test found the site degraded (running
    /// jobs × completions seen ÷ expected; 0 if none): later cuts do not go
    /// below it, capped at 0.8 × the level they cut from.
    knee_floor: f64,
    class: SiteClass,
}

impl SiteState {
    fn baseline(&self) -> Option<f64> {
        match self.remembered_baseline {
            // What an earlier run measured weighs as much as this many jobs
            // here: a few jobs that ran slow after a capacity drop must not
            // become the baseline and let slower ones in after them.
            Some(b) => {
                const PRIOR: f64 = 20.0;
                Some((b * PRIOR + self.healthy.sum) / (PRIOR + f64::from(self.healthy.n)))
            }
            None => self.healthy.mean().filter(|_| self.healthy.n >= 3),
        }
    }

    /// The longest run time a healthy job is expected to take, once enough
    /// jobs have been seen for the maximum to mean something.
    fn healthy_max(&self) -> Option<f64> {
        if self.healthy.n >= 20 {
            Some(self.healthy.max)
        } else if let Some((_, hi)) = self.remembered_range {
            Some(hi)
        } else {
            self.remembered_baseline.map(|b| b * 1.25)
        }
    }

    /// The shortest run time a healthy job takes, and the spread of healthy
    /// run times (at least half the shortest: early samples are the short
    /// ones, so the measured spread starts too small). With a remembered
    /// baseline, 20 jobs here before their extremes replace the assumed
    /// [0.85, 1.35] × it: a few short ones would make every later job late.
    fn healthy_range(&self) -> Option<(f64, f64)> {
        let known = if self.remembered_baseline.is_some() { 20 } else { 3 };
        let (lo, hi) = if self.healthy.n >= known {
            (self.healthy.min, self.healthy.max)
        } else {
            // Remembered: only the mean is known; assume a wide spread rather
            // than cry stall at the first late job.
            let b = self.remembered_baseline?;
            (0.85 * b, 1.35 * b)
        };
        Some((lo, (hi - lo).max(0.5 * lo)))
    }

    /// Running jobs that started after `judged_until`, oldest first.
    fn judged_running(&self) -> impl Iterator<Item = (Time, JobId)> + '_ {
        self.running.range((tkey(self.judged_until), JobId(0))..).map(|&(k, j)| (f64::from_bits(k), j))
    }

    /// When the site counts as stalled if no judged job completes before:
    /// jobs old enough to finish under health (`due`) are not finishing for
    /// `patience` mean gaps between completions (spread ÷ due). A job is due
    /// once it ran the shortest healthy run time at healthy speed (see
    /// [`SiteState::effective_start`]) — slowed by the tolerated
    /// `degradation` once a knee is known. The stall time is the earliest
    /// `max(due_k, since + patience·spread/k)` over the k-th due job.
    ///
    /// Why the tolerance only then: while the window grows blind an
    /// overshoot is large and must be caught within seconds; once a knee is
    /// known the window moves in small steps (and a warm start begins near
    /// the remembered knee), so a level a few jobs past the knee slows a
    /// cohort started together by 10–20%, which is within the 25% and must
    /// not read as a stall: a stall halves the window.
    fn stall_at(&self, patience: f64, degradation: f64) -> Option<Time> {
        let (lo, spread) = self.healthy_range()?;
        let tolerated = if self.ceiling.is_some() { degradation.max(1.0) } else { 1.0 };
        let mut due: Vec<Time> = self
            .running
            .iter()
            .take(64)
            .map(|&(k, _)| self.effective_start(f64::from_bits(k)) + tolerated * lo)
            .collect();
        due.sort_by(f64::total_cmp);
        let since = self.last_completion.max(*due.first()?);
        due.iter()
            .enumerate()
            .map(|(k, &at)| at.max(since + patience * spread / (k + 1) as f64))
            .min_by(f64::total_cmp)
    }

    /// When a job started at `start` would have started to have done its
    /// work so far at healthy speed: one that lived through the overload
    /// before the last cut progressed at about `cut_speed` until the cut.
    /// It is credited half of that: the estimate assumes a resource that
    /// only shares (one that thrashes is slower), and the level after the
    /// cut may still be a little slow.
    fn effective_start(&self, start: Time) -> Time {
        let cut = self.judged_until;
        if start < cut {
            cut - (cut - start) * self.cut_speed * 0.5
        } else {
            start
        }
    }

    fn mean_wait(&self) -> f64 {
        self.waits.mean().unwrap_or(0.0)
    }

    /// Expected seconds from submission to the end of a job sent here now,
    /// when the site is not overloaded: queue wait + uncongested run time.
    fn expected_turnaround(&self) -> Option<f64> {
        self.baseline().map(|b| b + self.mean_wait())
    }

    /// The job is no longer idle or running here.
    fn drop_job(&mut self, job: JobId) {
        if let Some((start, _)) = self.started.remove(&job) {
            self.running.remove(&(tkey(start), job));
        }
        if let Some(at) = self.submitted.remove(&job) {
            self.idle.remove(&(tkey(at), job));
        }
    }

    /// Adds to `pace_expected` the completions a healthy site would have
    /// produced among the due judged jobs between `pace_at` and `now`.
    /// Healthy run times are taken as uniform on [lo, lo + spread]: a job of
    /// age `a` in it ends at rate 1 / (hi − a); the last tenth of the range
    /// (and beyond it) at the rate of its start, so late jobs count but
    /// never infinitely.
    fn integrate_pace(&mut self, now: Time) {
        let from = self.pace_at;
        if now <= from {
            return;
        }
        self.pace_at = now;
        self.pace_level = self.pace_level.min(self.running.len() as f64);
        // Only from run times seen (here or in an earlier run): a remembered
        // mean says nothing of the shortest runs, and the hazards hang on it.
        if self.healthy.n < 3 && self.remembered_range.is_none() {
            return;
        }
        let Some((lo, spread)) = self.healthy_range() else { return };
        // Run times vary by ±20% or more around the mean; early samples are
        // the short ones, so assume a spread of at least 60% of the
        // shortest (a narrower one expects completions too soon).
        let spread = spread.max(0.6 * lo);
        let ft = 0.25;
        let hi = lo + spread;
        let flat = hi - ft * spread;
        let mut expected = 0.0;
        for (start, _) in self.judged_running().take(64) {
            let a = (from - start).max(lo);
            let b = now - start;
            if b <= a {
                continue;
            }
            let (a1, b1) = (a.min(flat), b.min(flat));
            if b1 > a1 {
                expected += ((hi - a1) / (hi - b1)).ln();
            }
            let tail = b - a.max(flat);
            if tail > 0.0 {
                expected += tail / (ft * spread);
            }
        }
        self.pace_expected += expected;
    }

    fn reset_pace(&mut self) {
        self.pace_expected = 0.0;
        self.pace_observed = 0.0;
        self.pace_level = self.running.len() as f64;
        self.pace_integral0 = self.integral;
        self.pace_t0 = self.integral_at;
    }

    fn advance_integral(&mut self, now: Time) {
        if now > self.integral_at {
            self.integral += self.running.len() as f64 * (now - self.integral_at);
            self.integral_at = now;
        }
    }
}

pub struct Adaptive {
    params: Params,
    book: JobBook,
    sites: Vec<SiteState>,
    /// Time of the last input: deadlines already passed are not asked for
    /// again (their condition was checked then; the next event re-checks).
    now: Time,
}

impl Adaptive {
    pub fn new(spec: &RunSpec, params: &Params) -> Self {
        let sites = spec
            .sites
            .iter()
            .map(|info| {
                let slots = info.slots.map_or(f64::INFINITY, f64::from);
                let cap = info.max_jobs.map_or(slots, |m| f64::from(m).min(slots)).min(spec.n_jobs as f64);
                let cap = if cap.is_finite() { cap.max(1.0) } else { spec.n_jobs.max(1) as f64 };
                let memory = spec.memory.get(&info.name);
                let initial = f64::from(params.initial_window.max(1)).min(cap);
                let (target, floor, ceiling) = match memory.and_then(|m| m.capacity) {
                    Some(c) if c >= 1.0 => {
                        let c = c.min(cap);
                        let w = if c >= cap { c } else { (c * params.warm_start).floor().max(1.0) };
                        (w, w, Some(c * 1.2))
                    }
                    _ => (initial, 0.0, None),
                };
                let mut waits = Stats::default();
                if let Some(w) = memory.and_then(|m| m.mean_wait) {
                    waits.add(w);
                }
                let unresponsive = memory.is_some_and(|m| m.unresponsive);
                SiteState {
                    name: info.name.clone(),
                    cap,
                    idle_timeout: info.idle_timeout.unwrap_or(params.idle_timeout),
                    target: if unresponsive { 1.0 } else { target },
                    floor,
                    ceiling,
                    level_since: 0.0,
                    level_ok: 0,
                    judged_until: 0.0,
                    cut_speed: 1.0,
                    healthy: Stats::default(),
                    remembered_baseline: memory.and_then(|m| m.baseline_runtime),
                    remembered_range: memory.and_then(|m| m.runtime_range),
                    baseline_level: if memory.and_then(|m| m.capacity).is_some() {
                        0.8 * target
                    } else {
                        target
                    },
                    slowdown: None,
                    healthy_completions: 0,
                    completions_since_cut: 0,
                    last_completion: 0.0,
                    baseline_since: memory.and_then(|m| m.baseline_runtime).map(|_| 0.0),
                    running: BTreeSet::new(),
                    started: BTreeMap::new(),
                    integral: 0.0,
                    integral_at: 0.0,
                    idle: BTreeSet::new(),
                    submitted: BTreeMap::new(),
                    waits,
                    agtime: None,
                    first_submit: None,
                    any_started: false,
                    unresponsive_until: None,
                    pace_expected: 0.0,
                    pace_observed: 0.0,
                    pace_at: 0.0,
                    pace_level: 0.0,
                    pace_integral0: 0.0,
                    pace_t0: 0.0,
                    knee_floor: 0.0,
                    verified: 0.0,
                    lost: 0.0,
                    class: SiteClass::Unknown,
                }
            })
            .collect();
        Adaptive {
            params: params.clone(),
            book: JobBook::new(spec.n_jobs, spec.sites.len(), spec.max_attempts),
            sites,
            now: 0.0,
        }
    }

    fn set_target(&mut self, i: usize, target: f64, now: Time) {
        let s = &mut self.sites[i];
        let t = target.clamp(1.0, s.cap);
        if t != s.target {
            s.target = t;
            s.level_since = now;
            s.level_ok = 0;
        }
    }

    /// A degradation was seen at site `i` while `n` jobs were running there:
    /// `n` becomes the ceiling and the window goes back to the highest level
    /// confirmed healthy (half of `n` if that level is no longer healthy).
    fn degraded(
        &mut self,
        i: usize,
        n: f64,
        evidence: Evidence,
        now: Time,
        why: &str,
        actions: &mut Vec<Action>,
    ) {
        let severe = !matches!(evidence, Evidence::Slowdown(_));
        let s = &mut self.sites[i];
        let n = n.max(1.0);
        s.ceiling = Some(n);
        if n <= s.floor * 1.1 + 2.0 {
            // Degraded at (or about) a level confirmed healthy: the site got
            // worse than it was. Half of it is the new floor (a capacity that
            // drops is not expected to drop by more than half at once).
            s.lost = s.lost.max(s.floor);
            s.floor = (n / 2.0).floor();
        }
        // A measured slowdown gives the knee directly if throughput stays
        // flat past it (n / slowdown; with a collapsing resource the knee is
        // higher, so this errs low), but a mild signal keeps 90% of `n`:
        // below the knee each missing job costs throughput, above it little. A stall backs off to half the level
        // (Algorithm 2's low end), the pace test to where its count says
        // the knee could at most be. Never below what was confirmed healthy.
        let mut estimate = match evidence {
            Evidence::Slowdown(x) => (n / x.max(1.0)).max(0.9 * n),
            Evidence::Pace { observed, expected } => {
                // Jobs progress at about observed ÷ expected of healthy
                // speed, so the site delivers about that share of `n` jobs'
                // work: a lower bound on the knee that bisection need not
                // search below. Two completions more is where it could be
                // at most, give or take the luck of a short count.
                s.knee_floor = n * observed / expected;
                let at_most = n * (observed + 2.0) / expected;
                // Past 1.5 × that level jobs would run more than 25% slow
                // even if the resource only shared: the bisection need not
                // climb back to the overshoot to learn it.
                s.ceiling = Some(n.min((1.5 * at_most).max(s.floor + 2.0)));
                at_most.min(n / 2.0)
            }
            Evidence::Stall => n / 2.0,
        };
        // Throughput since the last cut, in jobs at full speed: past the
        // knee it is the knee when the resource only shares (beta = 0) and
        // less when it thrashes, so it is a lower bound on the knee.
        let since = now - s.judged_until;
        if let (Some(base), Some((lo, _))) = (s.baseline(), s.healthy_range()) {
            if s.judged_until > 0.0 && since >= lo {
                let delivered = f64::from(s.completions_since_cut) * base / since;
                estimate = estimate.max(delivered.min(n));
            }
        }
        s.completions_since_cut = 0;
        let target = s.floor.max(estimate.floor()).max(s.knee_floor.min(0.8 * n).floor());
        // How fast the jobs that lived through this overload progressed: the
        // measured slowdown, or — as if the resource only shared — the
        // knee estimate's share of `n`.
        s.cut_speed = match evidence {
            Evidence::Slowdown(x) => 1.0 / x.max(1.0),
            _ => (target / n).min(1.0),
        };
        s.judged_until = now;
        s.last_completion = now;
        s.reset_pace();
        s.slowdown = None;
        s.healthy_completions = 0;
        self.set_target(i, target.max(1.0), now);
        let why = format!("{why}; window {:.0}", self.sites[i].target);
        self.shed(i, severe, now, &why, actions);
    }

    /// Removes what is above the window: the youngest running jobs (little
    /// work is lost) and idle jobs beyond the queue-ahead allowance.
    /// After a severe degradation (jobs not finishing at all) the running
    /// jobs have made little progress and every one younger than a healthy
    /// run goes; after a mild one only those that just started.
    fn shed(&mut self, i: usize, severe: bool, now: Time, why: &str, actions: &mut Vec<Action>) {
        let site = SiteId(i as u32);
        let s = &self.sites[i];
        // Work a running job has done, estimated as its age times its share
        // of the new window over its life (an upper bound: past the knee the
        // resource may also thrash). Jobs that did little are cheap to redo.
        let base = s.baseline().unwrap_or(0.0);
        let young_limit = if severe { 0.5 * base } else { 0.25 * base };
        let excess = s.running.len() as f64 - s.target.ceil();
        let mut victims = Vec::new();
        if excess >= 1.0 {
            for &(start, job) in s.running.iter().rev().take(excess as usize) {
                let age = now - f64::from_bits(start);
                let mean_n = match s.started.get(&job) {
                    Some(&(_, i0)) if age > 0.0 => (s.integral - i0) / age,
                    _ => 0.0,
                };
                let progress = age * (s.target / mean_n.max(1.0)).min(1.0);
                if progress <= young_limit {
                    victims.push(job);
                }
            }
        }
        let allowance = self.queue_allowance(i);
        let idle_excess = s.idle.len() as f64 - allowance;
        if idle_excess >= 1.0 {
            victims.extend(s.idle.iter().rev().take(idle_excess as usize).map(|&(_, j)| j));
        }
        self.remove(i, &victims, now, why, actions);
        let _ = site;
    }

    fn remove(&mut self, i: usize, jobs: &[JobId], now: Time, why: &str, actions: &mut Vec<Action>) {
        if jobs.is_empty() {
            return;
        }
        let site = SiteId(i as u32);
        let marked = self.book.mark_removing(site, jobs);
        let s = &mut self.sites[i];
        s.advance_integral(now);
        for &job in &marked {
            s.drop_job(job);
        }
        if !marked.is_empty() {
            actions.push(Action::Remove { site, jobs: marked, why: format!("adaptive: {why}") });
        }
    }

    /// Idle jobs worth keeping at site `i` so that finished jobs are replaced
    /// without waiting (Little's law: throughput × wait).
    fn queue_allowance(&self, i: usize) -> f64 {
        let s = &self.sites[i];
        if !self.params.queue_ahead {
            return 0.0;
        }
        match s.baseline() {
            Some(b) if b > 0.0 => (s.target * s.mean_wait() / b).ceil(),
            _ => 0.0,
        }
    }

    fn on_event(&mut self, now: Time, site: SiteId, event: &super::SiteEvent, actions: &mut Vec<Action>) {
        let i = site.index();
        self.sites[i].integrate_pace(now);
        let change = self.book.apply(site, event);
        self.sites[i].advance_integral(now);
        match event {
            super::SiteEvent::ResourceDown { .. } if self.sites[i].class != SiteClass::Unresponsive => {
                // HTCondor itself says the site cannot be reached: no need to
                // wait for the idle timeout. Jobs that started stay.
                let jobs: Vec<JobId> = self.sites[i].idle.iter().map(|&(_, j)| j).collect();
                let s = &mut self.sites[i];
                s.class = SiteClass::Unresponsive;
                s.unresponsive_until = Some(f64::INFINITY);
                let jobs = self.book.mark_withdrawing(site, &jobs);
                for &job in &jobs {
                    self.sites[i].drop_job(job);
                }
                if !jobs.is_empty() {
                    let why = "adaptive: HTCondor reports the grid resource down (026)".to_string();
                    actions.push(Action::Withdraw { site, jobs, why });
                }
            }
            super::SiteEvent::ResourceUp { .. } if self.sites[i].unresponsive_until.is_some() => {
                // 027: reachable again; probe it with one job.
                let s = &mut self.sites[i];
                s.unresponsive_until = None;
                s.class = SiteClass::Unknown;
                s.target = 1.0;
            }
            _ => {}
        }
        match change {
            Change::None => {}
            Change::Submitted { jobs } => {
                let at = event.at().unwrap_or(now);
                let s = &mut self.sites[i];
                s.first_submit.get_or_insert(at);
                for job in jobs {
                    s.idle.insert((tkey(at), job));
                    s.submitted.insert(job, at);
                }
            }
            Change::Returned { .. } => {}
            Change::Started { job, submitted } => {
                let at = event.at().unwrap_or(now);
                let s = &mut self.sites[i];
                s.idle.remove(&(tkey(submitted), job));
                s.submitted.remove(&job);
                s.running.insert((tkey(at), job));
                s.started.insert(job, (at, s.integral));
                s.waits.add((at - submitted).max(0.0));
                s.any_started = true;
                s.unresponsive_until = None;
                if s.class == SiteClass::Unresponsive {
                    s.class = SiteClass::Unknown;
                }
            }
            Change::Succeeded { job, submitted, started, ended } => {
                let s = &mut self.sites[i];
                let entry = s.started.get(&job).copied();
                s.drop_job(job);
                let agtime = ended - submitted;
                s.agtime = Some(s.agtime.map_or(agtime, |a| 0.9 * a + 0.1 * agtime));
                if let (Some(start), Some((_, i0))) = (started, entry) {
                    let runtime = (ended - start).max(1e-9);
                    let mean_n = (s.integral - i0) / runtime;
                    self.judge_completion(i, runtime, mean_n, start, now, actions);
                }
            }
            Change::Failed { job, held, exhausted } => {
                self.sites[i].drop_job(job);
                if held {
                    let jobs = self.book.mark_removing(site, &[job]);
                    actions.push(Action::Remove { site, jobs, why: "adaptive: held".into() });
                } else if exhausted {
                    actions.push(Action::GiveUp { job, why: "failed on every attempt".into() });
                }
            }
            Change::Removed { job } => {
                self.sites[i].drop_job(job);
                if *self.book.state(job) == JobState::GivenUp {
                    actions.push(Action::GiveUp { job, why: "held on every attempt".into() });
                }
            }
        }
    }

    /// A job ended after `runtime` seconds at a mean concurrency of `mean_n`.
    fn judge_completion(
        &mut self,
        i: usize,
        runtime: f64,
        mean_n: f64,
        start: Time,
        now: Time,
        actions: &mut Vec<Action>,
    ) {
        let c2 = self.params.degradation_factor;
        let s = &mut self.sites[i];
        let judged = start >= s.judged_until;
        s.last_completion = now;
        s.completions_since_cut += 1;
        let Some(base) = s.baseline() else {
            // The first jobs run at the initial window, below most knees:
            // they are the baseline.
            s.healthy.add(runtime);
            s.healthy_completions += 1;
            s.floor = s.floor.max(mean_n.floor());
            if s.baseline().is_some() {
                s.baseline_since = Some(now);
            }
            return;
        };
        let ratio = runtime / base;
        let baseline_since = s.baseline_since.unwrap_or(now);
        if judged {
            s.pace_observed += 1.0;
        }
        if ratio <= 1.3 {
            // Healthy, or too little slowed to tell (a tighter cut would bias
            // the baseline down, run after run).
            // The first cohort (started before the baseline was known) counts
            // unless the window grew well past its level before it ended: its
            // long jobs end last, into the overshoot of a blind growth, and
            // would raise the baseline by a tenth (a 1.37× slowdown would
            // then pass for the 25%).
            let first_cohort = start < baseline_since && mean_n <= s.baseline_level * 1.25;
            let sampling = s.healthy.n < BASELINE_JOBS;
            if sampling && (first_cohort || mean_n <= s.baseline_level * 1.05) {
                s.healthy.add(runtime);
            }
            s.healthy_completions += 1;
            if judged && ratio <= 1.1 {
                s.floor = s.floor.max(mean_n.min(s.target).floor());
            }
        }
        if !judged || start < baseline_since {
            return;
        }
        if start >= s.level_since && ratio <= 1.0 {
            s.level_ok += 1;
        }
        let smoothed = s.slowdown.map_or(ratio, |x| 0.8 * x + 0.2 * ratio);
        s.slowdown = Some(smoothed);
        // The smoothed ratio alone misreads a healthy site: a cohort of jobs
        // started together ends longest last, and its tail reads 1.2. A job
        // longer than any healthy one is the confirmation.
        let longer_than_healthy = s.healthy_max().is_some_and(|hmax| runtime > hmax);
        if smoothed > c2 && longer_than_healthy {
            let why = format!("run times {smoothed:.2}× the baseline at {mean_n:.0} running");
            self.degraded(i, mean_n, Evidence::Slowdown(smoothed), now, &why, actions);
        }
    }

    /// Degradation seen in running jobs: jobs old enough to have finished
    /// under health are not finishing, or one has run longer than any
    /// healthy job.
    fn check_running(&mut self, i: usize, now: Time, actions: &mut Vec<Action>) {
        let c2 = self.params.degradation_factor;
        let s = &self.sites[i];
        let n = s.running.len() as f64;
        let lo = s.healthy_range().map_or(0.0, |(lo, _)| lo);
        let draining = n > s.target * 1.05 + 1.0 && now < s.judged_until + lo;
        if draining || (s.ceiling.is_some() && now < s.judged_until + 0.5 * lo) {
            // Still draining down to a window cut for a degradation already
            // seen, or just after the cut (the jobs that lived through the
            // overload are still slow): nothing new to learn yet. Not for
            // longer than a healthy run: jobs queued ahead may start beyond
            // the window, and a site that stays above it must still be
            // judged.
            let s = &mut self.sites[i];
            s.reset_pace();
            return;
        }
        let (expected, observed) = (s.pace_expected, s.pace_observed);
        if expected >= self.params.pace_verify && observed >= self.params.pace_healthy * expected {
            // The level verified is the mean concurrency over the interval:
            // running lags the window, and the newest level had only part of
            // the interval to show a slowdown.
            let s = &mut self.sites[i];
            let level = if s.integral_at > s.pace_t0 {
                (s.integral - s.pace_integral0) / (s.integral_at - s.pace_t0)
            } else {
                s.pace_level
            };
            s.verified = s.verified.max(level.floor());
            s.reset_pace();
            return;
        }
        // Only while growing blind: once a knee is known the bisection and
        // the slower tests judge, and the pace's false alarms would cost more
        // than its speed gains.
        if expected >= self.params.pace_judge && s.ceiling.is_none() {
            if observed < self.params.pace_degraded * expected {
                let why = format!(
                    "{observed:.0} jobs finished where a healthy site would finish {expected:.0}, \
                     at {n:.0} running"
                );
                return self.degraded(i, n, Evidence::Pace { observed, expected }, now, &why, actions);
            }
            // Keep a sliding memory of the pace.
            let s = &mut self.sites[i];
            s.pace_expected *= 0.5;
            s.pace_observed *= 0.5;
        }
        let s = &self.sites[i];
        if let Some(at) = s.stall_at(self.params.stall_patience, self.params.degradation_factor) {
            if now + TIME_SLACK >= at {
                let since = s.last_completion;
                let why = format!("no job finished since {since:.0} s, at {n:.0} running");
                return self.degraded(i, n, Evidence::Stall, now, &why, actions);
            }
        }
        let Some(hmax) = s.healthy_max() else { return };
        let Some((start, _)) = s.judged_running().next() else { return };
        let age = now - start;
        let limit = (hmax * self.params.overdue_factor).max(c2 * 1.2 * s.baseline().unwrap_or(hmax));
        if age + TIME_SLACK > limit {
            let why = format!("a job has run {age:.0} s, longer than any healthy one, at {n:.0} running");
            self.degraded(i, n, Evidence::Stall, now, &why, actions);
        }
    }

    /// Growth and confirmation of the current level.
    fn grow(&mut self, i: usize, now: Time) {
        let confirm = self.params.confirm_after;
        let reprobe = self.params.reprobe_after;
        let growth = self.params.growth;
        let verified_growth = self.params.verified_growth;
        let pool_empty = self.book.pool_len() == 0;
        let s = &mut self.sites[i];
        let Some(base) = s.baseline() else { return };
        let Some((lo, _)) = s.healthy_range() else { return };
        let running = s.running.len() as f64;
        let mut next = s.target;
        match s.ceiling {
            None => {
                // No knee seen: the window grows by a factor per healthy
                // completion, as long as it is being used. Completions clock
                // the growth: when the site slows, growth slows with it.
                let bound = verified_growth * s.verified.max(s.floor);
                if s.verified > 0.0 && running >= 0.5 * s.target {
                    next = next.max(bound);
                }
                if s.healthy_completions > 0 && running >= 0.5 * s.target {
                    next = (s.target * growth.powi(s.healthy_completions as i32)).min(bound).max(next);
                    s.healthy_completions = 0;
                }
            }
            Some(ceiling) => {
                // A level is confirmed when jobs started at it have had the
                // time of a healthy run without a degradation.
                // With the pool empty the site drains: a higher window would
                // send nothing, and confirming levels by time alone would
                // teach the next run a capacity nobody tested.
                if pool_empty {
                    return;
                }
                let at_level = running >= 0.9 * s.target;
                let evidence = s.level_ok >= 3;
                if now + TIME_SLACK < s.level_since + confirm * lo || !at_level || !evidence {
                    return;
                }
                s.floor = s.floor.max(s.target.min(running.max(1.0)).floor());
                if ceiling / s.floor.max(1.0) > 1.1 && ceiling - s.floor > 1.0 {
                    next = (s.floor.max(1.0) * ceiling).sqrt().floor().max(s.floor + 1.0);
                } else if s.lost > ceiling && now + TIME_SLACK >= s.level_since + reprobe * base {
                    // Capacity that was lost may come back: aim the ceiling
                    // just past the level it was lost at, so the bisection
                    // climbs back toward it instead of by ×1.25 steps.
                    s.ceiling = Some((s.lost * 1.1).max(s.lost + 2.0));
                    next = (s.floor * 1.1).max(s.floor + 1.0).floor();
                } else if now + TIME_SLACK >= s.level_since + reprobe * base {
                    // Held long enough: see whether capacity came back.
                    s.ceiling = Some((ceiling * 1.25).max(ceiling + 2.0));
                    next = (s.floor * 1.1).max(s.floor + 1.0).floor();
                }
                if s.floor >= s.lost {
                    s.lost = 0.0;
                }
            }
        }
        let t = next.clamp(1.0, s.cap);
        if t != s.target {
            s.target = t;
            s.level_since = now;
            s.level_ok = 0;
        }
    }

    fn check_unresponsive(&mut self, i: usize, now: Time, actions: &mut Vec<Action>) {
        let s = &self.sites[i];
        if s.any_started || s.idle.is_empty() {
            return;
        }
        let Some(&(oldest, _)) = s.idle.first() else { return };
        if now + TIME_SLACK < f64::from_bits(oldest) + s.idle_timeout {
            return;
        }
        let jobs: Vec<JobId> = s.idle.iter().map(|&(_, j)| j).collect();
        let timeout = s.idle_timeout;
        let s = &mut self.sites[i];
        s.class = SiteClass::Unresponsive;
        s.unresponsive_until = Some(now + 2.0 * timeout);
        s.target = 1.0;
        self.remove(i, &jobs, now, &format!("nothing started within {timeout:.0} s"), actions);
    }

    /// Jobs site `i` may be given now: window + queued ahead − out. A site
    /// above its window (after a cut) gets nothing until it drains below.
    fn room(&self, i: usize, now: Time) -> f64 {
        let s = &self.sites[i];
        if s.unresponsive_until.is_some_and(|until| now < until) {
            return 0.0;
        }
        let out = f64::from(self.book.counts(SiteId(i as u32)).out());
        ((s.target + self.queue_allowance(i)).min(s.cap) - out).floor().max(0.0)
    }

    /// Sends pool jobs to sites with room, fastest expected turnaround first
    /// (sites not measured yet first of all, to measure them).
    fn dispatch(&mut self, now: Time, actions: &mut Vec<Action>) {
        if self.book.pool_len() == 0 {
            return;
        }
        let mut order: Vec<usize> = (0..self.sites.len()).collect();
        let key = |s: &SiteState| s.expected_turnaround().unwrap_or(0.0);
        order.sort_by(|&a, &b| key(&self.sites[a]).total_cmp(&key(&self.sites[b])).then(a.cmp(&b)));
        // Throughput of all responsive sites, jobs per second.
        let throughput: f64 = self
            .sites
            .iter()
            .filter(|s| s.class != SiteClass::Unresponsive)
            .filter_map(|s| s.expected_turnaround().map(|t| s.target / t.max(1.0)))
            .sum();
        let best = self.sites.iter().filter_map(|s| s.expected_turnaround()).min_by(f64::total_cmp);
        for i in order {
            let pool = self.book.pool_len() as f64;
            if pool == 0.0 {
                break;
            }
            let give = self.room(i, now);
            if give < 1.0 {
                continue;
            }
            let s = &self.sites[i];
            // A job sent here would end after the pool drains through faster sites.
            if let (Some(best), Some(mine)) = (best, s.expected_turnaround()) {
                if throughput > 0.0 && mine > 1.25 * best && mine > best + pool / throughput {
                    continue;
                }
            }
            let site = SiteId(i as u32);
            let jobs = self.book.take(site, give as u64);
            if !jobs.is_empty() {
                let allowance = self.queue_allowance(i);
                let s = &self.sites[i];
                let why = format!(
                    "adaptive: window {:.0}{} (running {})",
                    s.target,
                    if allowance > 0.0 { format!(" + {allowance:.0} queued ahead") } else { String::new() },
                    s.running.len(),
                );
                actions.push(Action::Submit { site, jobs, why });
            }
        }
    }

    /// The tail: with the pool empty, jobs still idle at a site where they
    /// would finish late (long queue wait) are removed, to go to a site with
    /// room that would finish them sooner. Waits are memoryless, so a job
    /// that has waited long is no closer to starting.
    fn steal_tail(&mut self, now: Time, actions: &mut Vec<Action>) {
        if self.book.pool_len() > 0 {
            return;
        }
        let mut room = 0.0;
        let mut best: Option<f64> = None;
        for i in 0..self.sites.len() {
            let spare = self.room(i, now);
            if let (true, Some(f)) = (spare >= 1.0, self.sites[i].expected_turnaround()) {
                if !matches!(best, Some(b) if b <= f) {
                    best = Some(f);
                    room = spare;
                }
            }
        }
        let Some(best) = best else { return };
        let mut order: Vec<usize> = (0..self.sites.len()).collect();
        let key = |i: usize| self.sites[i].expected_turnaround().unwrap_or(0.0);
        order.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
        for i in order {
            if room < 1.0 {
                break;
            }
            let s = &self.sites[i];
            let slow = s.expected_turnaround().is_some_and(|f| f > 1.25 * best);
            if !slow || s.idle.is_empty() {
                continue;
            }
            let jobs: Vec<JobId> = s.idle.iter().rev().take(room as usize).map(|&(_, j)| j).collect();
            room -= jobs.len() as f64;
            self.remove(i, &jobs, now, "the tail finishes sooner elsewhere", actions);
        }
    }

    /// Fast and slow classes by AgTime (the thesis's Algorithm 3, without the
    /// barrier: recomputed whenever asked).
    fn classify(&mut self) {
        let known: Vec<f64> = self.sites.iter().filter_map(|s| s.agtime).collect();
        if known.len() < 2 {
            return;
        }
        let average = known.iter().sum::<f64>() / known.len() as f64;
        for s in &mut self.sites {
            if s.class == SiteClass::Unresponsive {
                continue;
            }
            if let Some(a) = s.agtime {
                s.class = if a <= average { SiteClass::Fast } else { SiteClass::Slow };
            }
        }
    }

    fn deadline_of(&self, s: &SiteState) -> Option<Time> {
        let mut d: Option<Time> = None;
        let now = self.now;
        let mut consider = |t: Time| {
            if t > now + TIME_SLACK {
                d = Some(d.map_or(t, |x: Time| x.min(t)));
            }
        };
        if let Some(at) = s.stall_at(self.params.stall_patience, self.params.degradation_factor) {
            consider(at);
        }
        if let (Some(hmax), Some((start, _))) = (s.healthy_max(), s.judged_running().next()) {
            let c2 = self.params.degradation_factor;
            let limit = (hmax * self.params.overdue_factor).max(c2 * 1.2 * s.baseline().unwrap_or(hmax));
            consider(start + limit);
        }
        if let (Some(base), Some((lo, spread)), Some(_)) = (s.baseline(), s.healthy_range(), s.ceiling) {
            consider(s.level_since + self.params.confirm_after * lo);
            consider(s.level_since + lo + spread);
            consider(s.level_since + self.params.reprobe_after * base);
        }
        if !s.any_started {
            if let Some(&(oldest, _)) = s.idle.first() {
                consider(f64::from_bits(oldest) + s.idle_timeout);
            }
        }
        if let Some(until) = s.unresponsive_until.filter(|_| self.book.pool_len() > 0) {
            consider(until);
        }
        d
    }
}

impl Policy for Adaptive {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn handle(&mut self, now: Time, input: &Input) -> Vec<Action> {
        let mut actions = Vec::new();
        self.now = self.now.max(now);
        let touched: Vec<usize> = match input {
            Input::Start => (0..self.sites.len()).collect(),
            Input::Site { site, event } if site.index() < self.sites.len() => {
                self.on_event(now, *site, event, &mut actions);
                vec![site.index()]
            }
            Input::Site { .. } => Vec::new(),
            Input::Tick => (0..self.sites.len()).collect(),
        };
        for i in touched {
            self.sites[i].integrate_pace(now);
            self.sites[i].advance_integral(now);
            self.check_unresponsive(i, now, &mut actions);
            self.check_running(i, now, &mut actions);
            self.grow(i, now);
        }
        self.classify();
        self.dispatch(now, &mut actions);
        self.steal_tail(now, &mut actions);
        actions
    }

    fn next_deadline(&self) -> Option<Time> {
        self.sites.iter().filter_map(|s| self.deadline_of(s)).min_by(f64::total_cmp)
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        let s = &self.sites[site.index()];
        SiteView {
            window: s.target.round() as u32,
            capacity: s.ceiling.map(|_| s.floor.max(1.0)),
            class: s.class,
            agtime: s.agtime,
        }
    }

    fn learned(&self) -> CapacityMemory {
        self.sites
            .iter()
            .map(|s| {
                // The window the search ended at (a late cut can push the
                // floor below the knee; the window is back near it).
                let capacity = match s.ceiling {
                    Some(c) => s.floor.max(s.target).min(c),
                    None => s.floor.max(s.target),
                };
                // A capacity lost to a drop during this run was the site's
                // before the drop and may be again at the next run's start.
                // Only a large drop says so; a small one is noise at the knee.
                let capacity = if s.lost > 1.25 * capacity { s.lost } else { capacity };
                let memory = SiteMemory {
                    capacity: (capacity >= 1.0 && s.any_started).then_some(capacity),
                    baseline_runtime: s.baseline(),
                    runtime_range: if s.healthy.n >= 20 {
                        Some((s.healthy.min, s.healthy.max))
                    } else {
                        s.remembered_range
                    },
                    mean_wait: s.waits.mean(),
                    unresponsive: !s.any_started && s.first_submit.is_some(),
                };
                (s.name.clone(), memory)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Outcome, SiteEvent, SiteInfo};

    fn spec(n: u64, slots: &[u32]) -> RunSpec {
        RunSpec {
            n_jobs: n,
            sites: slots
                .iter()
                .enumerate()
                .map(|(i, &s)| SiteInfo { slots: Some(s), ..SiteInfo::named(format!("s{i}")) })
                .collect(),
            memory: CapacityMemory::new(),
            max_attempts: 3,
        }
    }

    fn at(site: u32, event: SiteEvent) -> Input {
        Input::Site { site: SiteId(site), event }
    }

    /// Feeds `Submitted` for every submission in `actions`; returns the jobs by site.
    fn confirm(p: &mut Adaptive, now: Time, actions: &[Action]) -> Vec<(SiteId, Vec<JobId>)> {
        let mut out = Vec::new();
        for a in actions {
            if let Action::Submit { site, jobs, .. } = a {
                p.handle(now, &at(site.0, SiteEvent::Submitted { jobs: jobs.clone(), at: now }));
                out.push((*site, jobs.clone()));
            }
        }
        out
    }

    fn removed(actions: &[Action]) -> Vec<JobId> {
        actions
            .iter()
            .flat_map(|a| match a {
                Action::Remove { jobs, .. } => jobs.clone(),
                _ => Vec::new(),
            })
            .collect()
    }

    fn done(p: &mut Adaptive, job: JobId, now: Time) -> Vec<Action> {
        p.handle(now, &at(0, SiteEvent::Ended { job, at: now, outcome: Outcome::Success }))
    }

    #[test]
    fn starts_at_the_initial_window_and_never_sends_more_than_n() {
        let mut p = Adaptive::new(&spec(1000, &[400]), &Params::default());
        let start = p.handle(0.0, &Input::Start);
        let first = confirm(&mut p, 0.0, &start);
        assert_eq!(first[0].1.len(), 32);
        let mut p = Adaptive::new(&spec(10, &[400, 400]), &Params::default());
        let first = p.handle(0.0, &Input::Start);
        let total: usize = confirm(&mut p, 0.0, &first).iter().map(|(_, j)| j.len()).sum();
        assert_eq!(total, 10);
        assert_eq!(p.book().out_total(), 10);
    }

    /// One site, 32 jobs started at t = 1; jobs 0..k end healthy around 400 s.
    fn baseline_run(k: u64) -> Adaptive {
        let mut p = Adaptive::new(&spec(1000, &[400]), &Params::default());
        let start = p.handle(0.0, &Input::Start);
        confirm(&mut p, 0.0, &start);
        for j in 0..32 {
            p.handle(1.0, &at(0, SiteEvent::Started { job: JobId(j), at: 1.0 }));
        }
        for j in 0..k {
            let acts = done(&mut p, JobId(j), 400.0 + j as f64);
            confirm(&mut p, 400.0 + j as f64, &acts);
        }
        p
    }

    #[test]
    fn grows_by_the_growth_factor_per_healthy_completion() {
        let p = baseline_run(3);
        // Three baseline completions, each one healthy: 32 × 1.1³ = 42.6.
        assert_eq!(p.site_view(SiteId(0)).window, 43);
        assert_eq!(p.sites[0].target, 32.0 * 1.1f64.powi(3));
        let p = baseline_run(6);
        assert!((p.sites[0].target - 32.0 * 1.1f64.powi(6)).abs() < 1e-9);
        assert_eq!(p.site_view(SiteId(0)).capacity, None, "no knee seen yet");
    }

    #[test]
    fn a_stall_cuts_the_window_to_half_and_removes_the_youngest_jobs() {
        let mut p = baseline_run(3);
        // The jobs sent at growth start; then nothing ends any more.
        let young: Vec<JobId> = (32..42).map(JobId).collect();
        for &j in &young {
            p.handle(410.0, &at(0, SiteEvent::Started { job: j, at: 410.0 }));
        }
        let running = p.sites[0].running.len() as f64;
        let deadline = p.next_deadline().expect("the stall test asks for a tick");
        // 29 old jobs are due (older than the shortest run, 399 s; no knee
        // known yet, so no tolerance); spread max(2, 0.5 × 399) = 199.5;
        // patience 10 → the 29th gap: 402 + 10 × 199.5 / 29.
        let expected = 402.0 + 10.0 * (0.5 * 399.0) / 29.0;
        assert!((deadline - expected).abs() < 1e-6, "deadline {deadline}, expected {expected}");
        let acts = p.handle(deadline, &Input::Tick);
        assert_eq!(p.sites[0].ceiling, Some(running));
        assert_eq!(p.sites[0].target, (running / 2.0).floor().max(p.sites[0].floor));
        let gone = removed(&acts);
        assert!(!gone.is_empty(), "{acts:?}");
        // Only jobs sent since growth began (running or still idle) go; the
        // old ones, close to the end of their work, stay.
        assert!(gone.iter().all(|j| j.0 >= 32), "{gone:?}");
        assert!(young.iter().any(|j| gone.contains(j)), "{gone:?}");
    }

    /// `baseline_run(3)`, ten more jobs started at 410 s, then nothing ends:
    /// the stall cut. Returns the policy, the cut's time and the jobs running
    /// at it.
    fn stalled_run() -> (Adaptive, Time, f64) {
        let mut p = baseline_run(3);
        for j in 32..42 {
            p.handle(410.0, &at(0, SiteEvent::Started { job: JobId(j), at: 410.0 }));
        }
        let running = p.sites[0].running.len() as f64;
        let cut = p.next_deadline().expect("the stall test asks for a tick");
        p.handle(cut, &Input::Tick);
        assert_eq!(p.sites[0].ceiling, Some(running), "the tick at {cut} was the stall");
        (p, cut, running)
    }

    #[test]
    fn the_survivors_of_a_cut_are_due_only_for_the_work_they_did_before_it() {
        let (p, cut, running) = stalled_run();
        let s = &p.sites[0];
        // The old jobs (started at 1 s) lived through the stall at the
        // speed the cut estimated, window ÷ running, and are credited half.
        let speed = s.target / running;
        assert_eq!(s.cut_speed, speed);
        let credited = cut - (cut - 1.0) * speed * 0.5;
        assert!((s.effective_start(1.0) - credited).abs() < 1e-9);
        // So no second stall before a shortest healthy run (399 s) past
        // that: the survivors did not get their time to end yet.
        let (lo, _) = s.healthy_range().expect("baseline known");
        let next = s
            .stall_at(Params::default().stall_patience, Params::default().degradation_factor)
            .expect("jobs still running");
        assert!(next >= credited + lo - 1e-9, "next stall check {next}, due from {}", credited + lo);
        assert!(next > cut + 0.5 * lo, "next stall check {next} too soon after the cut at {cut}");
    }

    #[test]
    fn a_site_held_above_its_window_is_judged_again_after_a_healthy_run() {
        let (mut p, cut, first_ceiling) = stalled_run();
        // As when jobs queued ahead start beyond the window, or jobs too far
        // along to remove stay: the site runs well above its window.
        p.set_target(0, 20.0, cut);
        let s = &p.sites[0];
        assert!(
            s.running.len() as f64 > s.target * 1.05 + 1.0,
            "{} running, window {}",
            s.running.len(),
            s.target
        );
        let mut now = cut;
        let mut again = None;
        while now < cut + 3000.0 {
            let Some(next) = p.next_deadline() else { break };
            now = next;
            p.handle(now, &Input::Tick);
            if p.sites[0].ceiling.is_some_and(|c| c < first_ceiling) {
                again = Some(now);
                break;
            }
        }
        let again = again.expect("a site that never drains below its window is judged again");
        let (lo, _) = p.sites[0].healthy_range().unwrap();
        assert!(again >= cut + lo - 1e-9, "judged at {again}, while the cut at {cut} was still draining");
    }

    #[test]
    fn a_pace_verdict_cuts_to_where_the_knee_could_be_at_most_and_lowers_the_ceiling() {
        let mut p = baseline_run(3);
        for j in 32..42 {
            p.handle(410.0, &at(0, SiteEvent::Started { job: JobId(j), at: 410.0 }));
        }
        let mut verdict = None;
        for (k, j) in (3..29).enumerate() {
            let t = 425.0 + 25.0 * k as f64;
            let running = p.sites[0].running.len() as f64;
            let acts = done(&mut p, JobId(j), t);
            confirm(&mut p, t, &acts);
            if acts.iter().any(|a| matches!(a, Action::Remove { why, .. } if why.contains("would finish"))) {
                verdict = Some(running - 1.0);
                break;
            }
        }
        let n = verdict.expect("the pace test fired");
        let s = &p.sites[0];
        let ceiling = s.ceiling.expect("a knee is known");
        // The knee is at least n × seen ÷ expected and at most 2 / expected
        // above it; the ceiling is 1.5 × that upper estimate.
        assert!(ceiling < n, "ceiling {ceiling} not below the {n} running");
        assert!(s.knee_floor > 0.0 && s.knee_floor < ceiling / 1.5, "{} vs {ceiling}", s.knee_floor);
        assert!(s.target <= (ceiling / 1.5).max(s.floor) + 1e-9, "window {} ceiling {ceiling}", s.target);
        assert!(s.target <= n / 2.0 || s.target <= s.floor, "window {}", s.target);
    }

    #[test]
    fn a_slowed_cohort_is_caught_by_the_pace_before_anything_stalls_or_is_overdue() {
        let mut p = baseline_run(3);
        for j in 32..42 {
            p.handle(410.0, &at(0, SiteEvent::Started { job: JobId(j), at: 410.0 }));
        }
        // The old jobs keep finishing, but one every 25 s where a healthy
        // site would finish about one every 8 s: never long enough without a
        // completion for the stall test, never old enough to be overdue.
        let mut caught = None;
        for (k, j) in (3..29).enumerate() {
            let t = 425.0 + 25.0 * k as f64;
            let acts = done(&mut p, JobId(j), t);
            confirm(&mut p, t, &acts);
            if acts.iter().any(|a| matches!(a, Action::Remove { why, .. } if why.contains("would finish"))) {
                caught = Some(t);
                break;
            }
        }
        let caught = caught.expect("the pace test fired");
        assert!(caught < 600.0, "caught at {caught}");
        assert!(p.sites[0].ceiling.is_some());
    }

    #[test]
    fn blind_growth_stays_within_a_factor_of_the_verified_level() {
        let p = baseline_run(30);
        let s = &p.sites[0];
        let bound = Params::default().verified_growth * s.verified.max(s.floor);
        // Unbounded, 27 growth steps of ×1.1 would reach the 400 slots.
        assert!(s.target <= bound + 1e-9, "target {} bound {bound}", s.target);
        assert!(s.target < 400.0, "target {}", s.target);
    }

    #[test]
    fn a_site_that_starts_nothing_loses_its_jobs_to_the_others() {
        let params = Params { idle_timeout: 600.0, ..Params::default() };
        let mut p = Adaptive::new(&spec(100, &[400, 400]), &params);
        let start = p.handle(0.0, &Input::Start);
        let sent = confirm(&mut p, 0.0, &start);
        let dead_jobs = sent.iter().find(|(s, _)| *s == SiteId(1)).expect("site 1 got jobs").1.clone();
        for (_, jobs) in sent.iter().filter(|(s, _)| *s == SiteId(0)) {
            for &j in jobs {
                p.handle(5.0, &at(0, SiteEvent::Started { job: j, at: 5.0 }));
            }
        }
        assert_eq!(p.next_deadline(), Some(600.0));
        let acts = p.handle(600.0, &Input::Tick);
        assert_eq!(removed(&acts), dead_jobs);
        assert_eq!(p.site_view(SiteId(1)).class, SiteClass::Unresponsive);
        for &j in &dead_jobs {
            p.handle(600.0, &at(1, SiteEvent::Removed { job: j, at: 600.0 }));
        }
        // Site 0 finishes a job: the freed place goes to a returned job, at site 0.
        let acts =
            p.handle(700.0, &at(0, SiteEvent::Ended { job: JobId(0), at: 700.0, outcome: Outcome::Success }));
        let sent = confirm(&mut p, 700.0, &acts);
        assert!(sent.iter().all(|(s, _)| *s == SiteId(0)), "{sent:?}");
        assert!(sent.iter().any(|(_, jobs)| jobs.iter().any(|j| dead_jobs.contains(j))), "{sent:?}");
        assert!(p.learned()["s1"].unresponsive);
    }

    #[test]
    fn a_grid_resource_down_moves_idle_jobs_at_once_and_up_probes_again() {
        let mut p = Adaptive::new(&spec(100, &[400, 400]), &Params::default());
        let start = p.handle(0.0, &Input::Start);
        let sent = confirm(&mut p, 0.0, &start);
        let down_jobs = sent.iter().find(|(s, _)| *s == SiteId(1)).expect("site 1 got jobs").1.clone();
        let acts = p.handle(17.0, &at(1, SiteEvent::ResourceDown { job: down_jobs[0], at: 17.0 }));
        let withdrawn: Vec<JobId> = acts
            .iter()
            .flat_map(|a| match a {
                Action::Withdraw { site, jobs, .. } if *site == SiteId(1) => jobs.clone(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(withdrawn, down_jobs, "{acts:?}");
        assert_eq!(p.site_view(SiteId(1)).class, SiteClass::Unresponsive);
        for &j in &down_jobs {
            let acts = p.handle(18.0, &at(1, SiteEvent::Removed { job: j, at: 18.0 }));
            assert!(acts.iter().all(|a| !matches!(a, Action::Submit { site, .. } if *site == SiteId(1))));
        }
        let acts = p.handle(60.0, &at(1, SiteEvent::ResourceUp { job: down_jobs[0], at: 60.0 }));
        let probes: usize = acts
            .iter()
            .map(|a| match a {
                Action::Submit { site, jobs, .. } if *site == SiteId(1) => jobs.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(probes, 1, "{acts:?}");
    }

    #[test]
    fn a_warm_start_begins_at_the_remembered_capacity() {
        let mut s = spec(1000, &[400]);
        s.memory.insert(
            "s0".into(),
            SiteMemory {
                capacity: Some(50.0),
                baseline_runtime: Some(400.0),
                mean_wait: Some(0.0),
                ..SiteMemory::default()
            },
        );
        let mut p = Adaptive::new(&s, &Params::default());
        let start = p.handle(0.0, &Input::Start);
        let sent = confirm(&mut p, 0.0, &start);
        // warm_start × the remembered 50, below the site's 400-slot limit.
        let expected = (50.0 * Params::default().warm_start).floor() as usize;
        assert_eq!(sent[0].1.len(), expected);
        assert!(expected < 50);
        assert_eq!(p.site_view(SiteId(0)).capacity, Some(expected as f64));
        assert_eq!(p.sites[0].baseline(), Some(400.0));
        // A remembered baseline lets the very first jobs be judged: one that
        // runs past max(1.1 × 1.25 × 400, 1.25 × 1.2 × 400) = 600 s is overdue.
        for j in 0..expected as u64 {
            p.handle(1.0, &at(0, SiteEvent::Started { job: JobId(j), at: 1.0 }));
        }
        let acts = p.handle(601.5, &Input::Tick);
        assert!(p.sites[0].ceiling.is_some_and(|c| c <= 50.0), "{acts:?}");
    }

    /// A policy that judges completions directly: site 0 of a 400-slot
    /// spec, with `memory` if given.
    fn judging(memory: Option<SiteMemory>) -> Adaptive {
        let mut s = spec(1000, &[400]);
        if let Some(m) = memory {
            s.memory.insert("s0".into(), m);
        }
        Adaptive::new(&s, &Params::default())
    }

    #[test]
    fn the_baseline_is_closed_after_forty_jobs() {
        let mut p = judging(None);
        let mut acts = Vec::new();
        // 39 jobs of 400 s at 20 running (below the initial window of 32).
        for k in 0..39 {
            p.judge_completion(0, 400.0, 20.0, 1000.0 + f64::from(k), 2000.0, &mut acts);
        }
        assert_eq!(p.sites[0].baseline(), Some(400.0));
        // The 40th, 1.25× slow (within the 1.3 that still counts), gets in:
        // the mean moves by 100 / 40.
        p.judge_completion(0, 500.0, 20.0, 1100.0, 2000.0, &mut acts);
        assert_eq!(p.sites[0].baseline(), Some(402.5));
        // The 41st does not: the baseline is closed.
        p.judge_completion(0, 500.0, 20.0, 1200.0, 2000.0, &mut acts);
        assert_eq!(p.sites[0].baseline(), Some(402.5));
        assert_eq!(p.sites[0].healthy.n, BASELINE_JOBS);
    }

    #[test]
    fn first_cohort_jobs_that_ended_in_an_overshoot_are_not_baseline() {
        let mut p = judging(None);
        let mut acts = Vec::new();
        // Three cohort jobs (started at 1 s, initial window 32) make the
        // baseline known at 402 s.
        for k in 0..3 {
            p.judge_completion(0, 399.0 + f64::from(k), 32.0, 1.0, 400.0 + f64::from(k), &mut acts);
        }
        assert_eq!(p.sites[0].baseline(), Some(400.0));
        assert_eq!(p.sites[0].baseline_since, Some(402.0));
        // A cohort job that lived at 45 on average (the window grew past
        // 1.25 × 32 = 40 under it) is not baseline; one at 38 is.
        p.judge_completion(0, 480.0, 45.0, 1.0, 481.0, &mut acts);
        assert_eq!(p.sites[0].healthy.n, 3);
        p.judge_completion(0, 480.0, 38.0, 1.0, 481.0, &mut acts);
        assert_eq!(p.sites[0].healthy.n, 4);
        assert_eq!(p.sites[0].baseline(), Some(420.0));
    }

    #[test]
    fn a_remembered_baseline_outweighs_a_few_slow_jobs() {
        let memory =
            SiteMemory { capacity: Some(50.0), baseline_runtime: Some(400.0), ..SiteMemory::default() };
        let mut p = judging(Some(memory));
        let mut acts = Vec::new();
        // Three jobs 1.2× slow at 20 running (below 0.8 × the warm window
        // of 45: baseline level) — as after a capacity drop.
        for k in 0..3 {
            p.judge_completion(0, 480.0, 20.0, 10.0 + f64::from(k), 500.0, &mut acts);
        }
        // The memory weighs 20 jobs: (20 × 400 + 3 × 480) / 23, not 480.
        let expected = (20.0 * 400.0 + 3.0 * 480.0) / 23.0;
        assert!((p.sites[0].baseline().unwrap() - expected).abs() < 1e-9);
    }

    #[test]
    fn once_a_knee_is_known_a_stall_allows_the_tolerated_slowdown() {
        let mut p = baseline_run(3);
        let (patience, c2) = (Params::default().stall_patience, Params::default().degradation_factor);
        // 29 cohort jobs started at 1 s still run; shortest healthy run
        // 399 s, spread 0.5 × 399, last completion at 402 s.
        let gap = patience * (0.5 * 399.0) / 29.0;
        let blind = p.sites[0].stall_at(patience, c2).unwrap();
        assert!((blind - (402.0 + gap)).abs() < 1e-6, "{blind}");
        // With a knee known the jobs are due at 1 + 1.25 × 399 s.
        p.sites[0].ceiling = Some(100.0);
        let known = p.sites[0].stall_at(patience, c2).unwrap();
        assert!((known - (1.0 + 1.25 * 399.0 + gap)).abs() < 1e-6, "{known}");
    }

    #[test]
    fn the_healthy_run_time_range_is_remembered_and_used() {
        let mut p = judging(None);
        let mut acts = Vec::new();
        for k in 0..20 {
            p.judge_completion(0, 320.0 + 8.0 * f64::from(k), 20.0, 1000.0, 2000.0, &mut acts);
        }
        let learned = p.learned();
        assert_eq!(learned["s0"].runtime_range, Some((320.0, 472.0)));
        // The next run confirms a slowdown against the longest healthy run
        // it remembers, not against 1.25 × the mean.
        let warm = judging(Some(learned["s0"].clone()));
        assert_eq!(warm.sites[0].healthy_max(), Some(472.0));
        let cold_memory = SiteMemory { baseline_runtime: Some(396.0), ..SiteMemory::default() };
        assert_eq!(judging(Some(cold_memory)).sites[0].healthy_max(), Some(1.25 * 396.0));
    }

    #[test]
    fn learned_memory_names_sites() {
        let p = baseline_run(5);
        let m = p.learned();
        let site = &m["s0"];
        // Run times 399..=403 s (started at 1, ended at 400..=404).
        assert_eq!(site.baseline_runtime, Some((399.0 + 400.0 + 401.0 + 402.0 + 403.0) / 5.0));
        assert_eq!(site.mean_wait, Some(1.0));
        assert!(!site.unresponsive);
    }

    #[test]
    fn params_reject_unknown_keys_and_default_missing_ones() {
        let p: Params = toml::from_str("initial_window = 8").unwrap();
        assert_eq!(p, Params { initial_window: 8, ..Params::default() });
        assert!(toml::from_str::<Params>("window = 8").is_err());
    }
}
