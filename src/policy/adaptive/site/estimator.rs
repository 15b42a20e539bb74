//! The estimator: the healthy sample (what runs count, censored where),
//! the queue wait, and Wald's sequential test of "degraded" against
//! "healthy" over the jobs that ended and the ones still running (the
//! test as the `adaptive` module doc states it).
//!
//! **What the test assumes, made true.** The SPRT's bounds hold whatever
//! the spread of healthy runs, but the healthy distribution is itself
//! learned from few runs, so what the bounds assume is made true:
//! - its scale is profiled out within `z` standard errors of its mean (`z`
//!   the normal quantile of α) plus, at a site whose events reach the log
//!   at a gridmanager's polls, one poll over the mean run (the jobs a poll
//!   started share its lag, an error no number of them averages:
//!   [`scales_for`]);
//! - a running job testifies only at ages where the learned distribution
//!   is data rather than assumption;
//! - the first cohort's share past its longest run is taken one standard
//!   error up (its jobs started together and are censored together, so the
//!   last few at risk set it), and that cohort's own jobs ending in that
//!   tail testify by having survived to its start and, far out, by having
//!   ended within it, not by the tail's assumed density (the tail stands
//!   for them);
//! - a test that has weighed `SAMPLE` (64) runs with no verdict ends
//!   healthy.

use super::*;

/// Queue waits as an exponential with right-censoring: the MLE of the mean
/// is all the time jobs spent waiting (started or not) over the starts.
/// And how the site starts the jobs that wait there, as its first cohort
/// showed ([`Starting`]).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Waits {
    /// Σ waits of jobs that left the queue (started or not).
    pub(super) closed: f64,
    /// Jobs idle now, and the sum of their submission times.
    pub(super) idle: u64,
    pub(super) idle_since_sum: f64,
    pub starts: u64,
    /// Σ waits of the jobs that started, the shortest of them (the dead
    /// time every job waits, as far as the starts show), and the jobs that
    /// left the queue unstarted: the shifted exponential of
    /// [`Waits::proven`].
    #[serde(default)]
    pub(super) started_waited: f64,
    #[serde(default)]
    pub(super) shortest_start: Option<f64>,
    #[serde(default)]
    pub(super) left_unstarted: u64,
    /// The same estimate over about the last `memory` starts: all the
    /// waiting done (by jobs started, withdrawn or still idle) up to
    /// `recent_at`, and the starts, each start discounting both by
    /// `1 − 1/memory`.
    pub(super) recent_waited: f64,
    pub(super) recent_starts: f64,
    pub(super) recent_at: Time,
    pub(super) starting: Starting,
}

/// How a site starts the jobs waiting there. A job waits for one of two
/// things: room (other users' jobs ahead of it, slots busy), and then jobs
/// start one by one as room frees; or only the matchmaker's next cycle (a
/// negotiation, a gridmanager's poll) on a site with room to spare, and then
/// every job waiting starts at that cycle, together. Its first cohort (the
/// jobs of its first submission, sent at one time) tells which: waiting for
/// room, n jobs' starts spread over about `H(n−1)` times their mean wait (the
/// range of n exponential draws), more than the mean itself; waiting for a
/// cycle, within one cycle, no more than the mean (all at once, where they
/// did not wait at all).
///
/// The verdict comes as soon as the starts so far decide it. Were the jobs
/// of the cohort still waiting all to start now (at its latest start, `l`),
/// its range would stay that of the starts so far, `l − f`, and its mean
/// wait would be all the waiting done so far over the cohort's size `n`:
/// `(Σ waits started + Σ (l − a_j) over the n − k still waiting) / n`, with
/// `k` started and job `j` submitted at `a_j`. Starting later widens the
/// range by all of the delay and the mean by only `(n − k)/n` of it, so
/// that is the most the cohort can still look
/// like one cycle's: once the range so far is past it, the cohort starts one
/// by one, whatever the rest do. Under exponential waits of mean `μ` the
/// waiting done up to the k-th start is about `kμ` (memoryless: each start
/// takes `μ` of waiting), so this comes once the range so far passes `k/n`
/// of a mean wait: in expectation at the 6th start of 16, within half a
/// mean wait, where the whole cohort takes `H(n)` (3.4) of them. That mean
/// is never below the first wait, so a cohort spread over less than its
/// first wait (one cycle's) is not told early; told early, the verdict is
/// the one the whole cohort would give, and at `k = n` the test is the
/// whole cohort's: range against mean. A cohort too small to tell is one
/// by one as soon as it is whole.
///
/// How a site starts jobs is its matchmaker's and its other users' doing,
/// not the run's: a warm run knows it from memory, as it knows the site's
/// queue wait. It still watches its own first cohort, since the site may
/// have changed (its other users gone, its slots freed); until that cohort
/// tells, memory's verdict stands.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Starting {
    /// The first cohort is still starting and has not told yet: what it
    /// showed so far. No queue is kept: it might start at the next cycle,
    /// all of it past the window.
    Watching(Cohort),
    /// A warm run's first cohort, still starting: what memory says the site
    /// did (`one_by_one`) stands until the cohort tells.
    Recalled { one_by_one: bool, cohort: Cohort },
    /// Jobs start one by one, or the cohort was too small to tell: a queue
    /// kept ahead by Little's law keeps the window full and no fuller.
    OneByOne,
    /// Jobs start together: a queue kept ahead would all start at the next
    /// cycle, past the window, so none is kept.
    Together,
}

impl Default for Starting {
    /// A site that was sent nothing yet.
    fn default() -> Starting {
        Starting::Watching(Cohort::default())
    }
}

/// The first cohort's starts so far. The cohort is every job sent to the
/// site before any of them started: a first window may go out in several
/// submissions (one `condor_submit` per kind of job, each a moment after
/// the other), and counted by one submission alone, the first kind's few
/// jobs were "too few to tell" and made a site that starts jobs together
/// keep a queue ahead (a Condor-C site of 24 slots ran 30 at once).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cohort {
    /// When its first and its last job were submitted, and how many of
    /// its jobs are still to start or have started (a job withdrawn before
    /// starting leaves it).
    at: Time,
    last_at: Time,
    size: u32,
    started: u32,
    first_start: Time,
    last_start: Time,
    /// Σ waits of the jobs that started.
    waited: f64,
    /// Σ submission times of the jobs still to start.
    unstarted_at: f64,
}

/// Fewer jobs than this cannot tell the two ways apart: the range of 8
/// exponential waits is 2.6 times their mean on average, but that of 3 only
/// 1.5, and often less than 1.
pub const COHORT_TO_TELL: u32 = 8;

impl Cohort {
    /// The verdict, once the starts up to `now` decide it ([`Starting`]).
    fn verdict(&self, now: Time) -> Option<Starting> {
        let whole = self.started == self.size;
        if self.size < COHORT_TO_TELL && (whole || now > self.at) {
            return Some(Starting::OneByOne);
        }
        if self.started > 0 {
            // Jobs still waiting have waited since their submission up to
            // the latest start at least.
            let unstarted = f64::from(self.size.saturating_sub(self.started));
            let waiting = (unstarted * self.last_start - self.unstarted_at).max(0.0);
            let mean_were_all_started = (self.waited + waiting) / f64::from(self.size);
            // Told early, the mean is a bound summed in another order than
            // the whole cohort's: a tie must not be decided by rounding.
            let rounding = if whole { 1.0 } else { 1.0 + 1e-9 };
            if self.last_start - self.first_start > mean_were_all_started * rounding {
                return Some(Starting::OneByOne);
            }
        }
        whole.then_some(Starting::Together)
    }
}

impl Starting {
    /// What a run starts from: memory's verdict where a run told one.
    pub fn from_memory(one_by_one: Option<bool>) -> Starting {
        match one_by_one {
            Some(one_by_one) => Starting::Recalled { one_by_one, cohort: Cohort::default() },
            None => Starting::default(),
        }
    }
    /// The first cohort while it is watched.
    fn cohort(&mut self) -> Option<&mut Cohort> {
        match self {
            Starting::Watching(cohort) | Starting::Recalled { cohort, .. } => Some(cohort),
            Starting::OneByOne | Starting::Together => None,
        }
    }
    /// What the next run is to recall: the verdict that stands, if any.
    pub fn to_remember(self) -> Option<bool> {
        match self {
            Starting::Watching(_) => None,
            Starting::Recalled { one_by_one, .. } => Some(one_by_one),
            Starting::OneByOne => Some(true),
            Starting::Together => Some(false),
        }
    }
}

impl Waits {
    /// Adds the waiting done by the jobs idle since `recent_at`.
    fn accrue(&mut self, at: Time) {
        if at > self.recent_at {
            self.recent_waited += self.idle as f64 * (at - self.recent_at);
            self.recent_at = at;
        }
    }
    fn submitted(&mut self, at: Time) {
        self.accrue(at);
        self.idle += 1;
        self.idle_since_sum += at;
        if let Some(cohort) = self.starting.cohort() {
            if cohort.size == 0 || cohort.started == 0 {
                if cohort.size == 0 {
                    cohort.at = at;
                }
                cohort.last_at = at;
                cohort.size += 1;
                cohort.unstarted_at += at;
            }
        }
    }
    fn left(&mut self, submitted: Time, at: Time, started: bool, memory: f64) {
        self.accrue(at);
        self.idle = self.idle.saturating_sub(1);
        self.idle_since_sum -= submitted;
        self.closed += (at - submitted).max(0.0);
        self.starts += u64::from(started);
        let wait = (at - submitted).max(0.0);
        if !started {
            self.left_unstarted += 1;
        } else {
            self.started_waited += wait;
            self.shortest_start = Some(self.shortest_start.map_or(wait, |s| s.min(wait)));
            let keep = 1.0 - 1.0 / memory.max(1.0);
            self.recent_waited *= keep;
            self.recent_starts = self.recent_starts * keep + 1.0;
        }
        if let Some(cohort) = self.starting.cohort() {
            if cohort.size > 0 && (cohort.at..=cohort.last_at).contains(&submitted) {
                cohort.unstarted_at -= submitted;
                if started {
                    let first = if cohort.started == 0 { at } else { cohort.first_start.min(at) };
                    cohort.first_start = first;
                    cohort.last_start = cohort.last_start.max(at);
                    cohort.started += 1;
                    cohort.waited += (at - submitted).max(0.0);
                } else {
                    cohort.size -= 1;
                }
                if let Some(verdict) = cohort.verdict(at) {
                    self.starting = verdict;
                }
            }
        }
    }
    /// A warm start: as if three jobs had waited `mean` seconds each. They
    /// are counted as started waits but set no dead time (memory keeps
    /// none): this run's first start does, so that a site that forwards
    /// its jobs before starting them (a Condor-C site) has the jobs it
    /// holds moved no sooner in a warm run than in a cold one.
    pub(super) fn remember(&mut self, mean: f64) {
        self.closed = 3.0 * mean;
        self.starts = 3;
        self.started_waited = 3.0 * mean;
        self.shortest_start = None;
        (self.recent_waited, self.recent_starts) = (3.0 * mean, 3.0);
    }
    /// Whether jobs waiting here are known to start one by one
    /// ([`Starting`]): only there may a queue be kept ahead.
    pub fn one_by_one(&self) -> bool {
        matches!(self.starting, Starting::OneByOne | Starting::Recalled { one_by_one: true, .. })
    }
    /// [`Waits::mean`] over about the last `memory` starts (the `memory`
    /// of each start): where jobs start sooner than they did, it follows.
    pub fn recent_mean(&self, now: Time) -> Option<f64> {
        let waited = self.recent_waited + self.idle as f64 * (now - self.recent_at).max(0.0);
        (self.starts >= 3).then(|| waited / self.recent_starts.max(1.0))
    }
    /// All the waiting done so far, seconds.
    pub fn exposure(&self, now: Time) -> f64 {
        self.closed + self.waited_idle(now)
    }
    /// The mean wait, once three jobs started (before that it is too noisy
    /// to queue jobs ahead by).
    pub fn mean(&self, now: Time) -> Option<f64> {
        (self.starts >= 3).then(|| self.exposure(now) / self.starts as f64)
    }
    /// A wait for routing at any time: the waiting so far over the starts,
    /// or over one before the first (a site that starts nothing looks slower
    /// the longer it does so). Before the first start, each idle job's first
    /// [`START_NEWS`] seconds are no evidence of a long wait (HTCondor-G
    /// hears of a remote start only when it next polls the site), but none
    /// of a short one either: the wait is then at least the mean age of the
    /// jobs waiting. Taken as 0 there, a site whose first starts came late
    /// (its jobs queued for the CPUs another site's jobs held) looked the
    /// fastest of all, and the pool waited for it while a site running jobs
    /// stood empty.
    pub fn pessimistic(&self, now: Time) -> f64 {
        if self.starts == 0 {
            let mean_age = if self.idle == 0 { 0.0 } else { self.waited_idle(now) / self.idle as f64 };
            return self.proven(now).max(mean_age);
        }
        self.exposure(now) / self.starts as f64
    }
    /// The wait the waits so far prove, for moving jobs already waiting
    /// here. Before the first start, the waiting past each idle job's first
    /// [`START_NEWS`] seconds (as [`Waits::pessimistic`], but no mean age:
    /// a presumption moves nothing). After it, the waits as a dead time `d`
    /// (the shortest wait started) and then exponential: `d` plus the
    /// waiting past `d` over the starts (the MLE of the shifted
    /// exponential). Where a site forwards jobs and then starts them
    /// together (a Condor-C site), its first start heard is `d`, not one
    /// start over the waiting of all its jobs, which would take them back
    /// just as the site starts them. Where waits are memoryless from the
    /// start, `d` is the least of many draws, near 0, and the two agree.
    pub fn proven(&self, now: Time) -> f64 {
        let Some(dead) = self.shortest_start else {
            let late = (self.idle as f64 * (now - START_NEWS) - self.idle_since_sum).max(0.0);
            return (self.closed + late) / self.starts.max(1) as f64;
        };
        let started = (self.started_waited - self.starts as f64 * dead).max(0.0);
        let unstarted = self.closed - self.started_waited;
        let withdrawn = (unstarted - self.left_unstarted as f64 * dead).max(0.0);
        let idle = (self.idle as f64 * (now - dead) - self.idle_since_sum).max(0.0);
        dead + (started + withdrawn + idle) / self.starts.max(1) as f64
    }
    /// The dead time of [`Waits::proven`]: the shortest wait started.
    pub fn dead_time(&self) -> f64 {
        self.shortest_start.unwrap_or(0.0)
    }
    /// All the waiting done so far by the jobs waiting now.
    fn waited_idle(&self, now: Time) -> f64 {
        (self.idle as f64 * now - self.idle_since_sum).max(0.0)
    }
}

/// Wald's sequential test of "jobs run at least κ times slower whenever more
/// than `level` run here" against "they run healthy". The alternative is
/// composite, so the statistic is the likelihood ratio of the best of a few
/// slowdowns from κ up (a generalized likelihood ratio): a level far past the
/// knee is told at once, not only when it happens to look 25% slow.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Test {
    pub(super) id: u64,
    pub(super) level: f64,
    pub(super) started: Time,
    /// Θ: seconds with more than `level` running since the test began, and
    /// ∫ running dt over those seconds.
    pub(super) above: f64,
    pub(super) above_jobs: f64,
    /// Σ log-likelihood ratios of the attempts that ended, per slowdown
    /// and per scale of the healthy runs ([`SCALES`]).
    pub(super) ended_llr: [[f64; SCALES.len()]; STRETCH.len()],
    /// The same for healthy at each scale.
    pub(super) ended_null: [f64; SCALES.len()],
    /// The scales weighed (see [`SCALES`]), fixed when the test begins.
    pub(super) scales: [f64; SCALES.len()],
    /// Runs weighed so far, each counted by the share of it spent above
    /// the level (attempts that ended).
    pub(super) weighed: f64,
}

/// One-sided upper quantile of the standard normal at probability `p`
/// (Abramowitz & Stegun 26.2.23, error < 4.5e-4).
pub fn normal_upper_quantile(p: f64) -> f64 {
    let p = p.clamp(1e-12, 0.5);
    let t = (-2.0 * p.ln()).sqrt();
    t - (2.515517 + 0.802853 * t + 0.010328 * t * t)
        / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t)
}

/// The scales a test weighs for a baseline learned as `d` at a site polled
/// every `poll` seconds: from 1 up to the mean's standard error times `z`
/// past it, plus a poll, and never less than [`SCALES`]'s 10%.
///
/// A poll, because where a gridmanager tells of starts and ends, every
/// run reads from one poll to another: the jobs a cohort started at one
/// poll share that poll's lag behind their true start, and the baseline's
/// first cohort shared another's. Every run of one cohort may then read up
/// to a poll longer (or shorter) than the baseline's, all the same way,
/// with nothing slowed: an error common to the cohort, which no number of
/// its jobs averages away (what it did on the real pool: `docs/adaptive.md`,
/// "A poll is an error common to a cohort").
pub(super) fn scales_for(d: Option<&Distribution>, z: f64, poll: f64) -> [f64; SCALES.len()] {
    let Some(d) = d else { return SCALES };
    let least = SCALES[SCALES.len() - 1] - 1.0;
    let top = (z * d.spread / (d.ended.max(1) as f64).sqrt() + poll_lag(poll, d)).min(1.0);
    if top <= least {
        return SCALES;
    }
    let mut scales = SCALES;
    for (j, s) in scales.iter_mut().enumerate() {
        *s = 1.0 + top * j as f64 / (SCALES.len() - 1) as f64;
    }
    scales
}

/// A poll over the mean run of `d`: how far, relatively, every run of one
/// cohort may read off together at a site polled every `poll` seconds (see
/// [`scales_for`]).
pub(super) fn poll_lag(poll: f64, d: &Distribution) -> f64 {
    if d.mean() > 0.0 {
        poll.max(0.0) / d.mean()
    } else {
        0.0
    }
}

/// The slowdowns weighed, as multiples of κ.
pub(super) const STRETCH: [f64; 8] = [1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0];

/// A running job older than this many times the longest healthy run seen
/// testifies again (see [`Site::llrs`]): with run times ±50% around their
/// mean, the longest of the eight runs a test needs is within 10% of the
/// longest possible, so no healthy job gets to twice it.
pub(super) const FAR_PAST: f64 = 2.0;

/// How unlikely a healthy run past [`past_longest`] may be: the chance that
/// the end of a bounded spread lies further past the longest of n runs than
/// `ln(1/ε)/n` of their range is about ε.
pub(super) const PAST_LONGEST_RISK: f64 = 0.01;

/// The age from which a running job older than every healthy run seen
/// testifies again, as having survived to there. Until every sampled run has
/// ended, the longest seen is no order statistic of the whole spread and only
/// [`FAR_PAST`] is safe. Once all have, the end of the spread lies past the
/// longest of n runs by about their range over n, and by more than
/// `ln(1/ε)` times that with chance ε; and the healthy side may stretch every
/// run by the test's largest scale, `top_scale` ([`scales_for`]). On jobs
/// of one size (±5%) that is 1.1–1.15× the longest, not twice it: a site
/// running three times slow is seen within about one run time, where before
/// its jobs said nothing until two had passed. On runs ±50% it is about
/// 1.8× the longest at 8 runs and 1.15× at 64, and never past `FAR_PAST`.
pub(super) fn past_longest(d: &Distribution, top_scale: f64) -> f64 {
    let (shortest, longest) = (d.shortest_seen(), d.longest_seen());
    let far = FAR_PAST * longest;
    if d.unseen > 0.0 || d.ended == 0 {
        return far;
    }
    let beyond = (longest - shortest) * (1.0 / PAST_LONGEST_RISK).ln() / d.ended as f64;
    (top_scale * (longest + beyond)).min(far)
}

/// The learned distribution is known up to its scale: it comes from a few
/// dozen runs, whose mean is uncertain by a few percent (the standard error
/// of a mean of n runs of spread ±50% is about 0.3/√n: 7% at 16 runs).
/// That scale is a nuisance parameter, profiled out of both hypotheses
/// alike: healthy is the best of the runs as learned and all of them up to
/// `z` standard errors longer (`scales_for`; these are the steps at the
/// least range, 10%), and so is the base every slowdown applies to. On the
/// healthy side only, a baseline learned a little short drifts every test
/// toward "degraded"; on that side only, jobs that all run a little long,
/// as they do just past a knee, pass that knee.
///
/// The grid is as fine as the run-time kernel's least bandwidth (1% of the
/// mean, `runtime.rs`): a slowdown stretches only a job's time above the
/// level, which shifts the work it implies by any fraction, so a healthy
/// side that may only shift by coarser steps loses to it on runs narrower
/// than a step. A wider range has wider steps, but only where the runs
/// spread widely (the standard error is their spread over √n), and so does
/// the kernel. What each choice was measured to do:
/// `docs/experiments.md`, "The adaptive policy's constants".
pub(super) const SCALES: [f64; 11] = [1.0, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08, 1.09, 1.1];

/// A run the healthy sample may take, with its end and whether it succeeded.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct SampleRun {
    pub(super) job: JobId,
    pub(super) start: Time,
    pub(super) end: Option<(Time, bool)>,
}

/// Runs kept for the sample to be taken again as the floor rises, and
/// changes of the running count kept for it (bounds on memory and on the
/// cost of taking it again).
pub(super) const SAMPLE_RUNS: usize = 4 * SAMPLE;
pub(super) const SAMPLE_LEVELS: usize = 1 << 13;

/// One running job, as the tests need it.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Run {
    pub(super) start: Time,
    /// The test running at its start and Θ then.
    pub(super) test: u64,
    pub(super) theta: f64,
    /// It ran through an overload (it was running at a degraded verdict or
    /// started while the site drained): how far it got is unknown, so no
    /// later test may judge by it.
    pub(super) overloaded: bool,
}

/// Running jobs a test looks at, oldest first: beyond these the young ones
/// carry little information and the cost would grow with the site.
pub(super) const TEST_JOBS: usize = 256;

/// Healthy runs to have ended before a test may judge anything against them
/// (and at most [`READY_UNSEEN`] of the distribution unseen).
pub(super) const READY_ENDED: usize = 8;

/// Standard errors the first cohort's unseen share is taken up by
/// ([`Distribution::estimate_with_unseen_error`]): one. At the error of the
/// false-alarm rate's quantile, as the scale's, every first cohort would be
/// taken half unseen, and knees past the first window found later
/// (`docs/experiments.md`, "The adaptive policy's constants").
pub(super) const UNSEEN_Z: f64 = 1.0;

/// A test is evaluated at most this many times per mean run time: often
/// enough to react within a few percent of a run, cheap on a busy site.
pub(super) const EVALS: f64 = 40.0;

impl Site {
    /// Brings Θ up to `now`; call before the running count changes.
    pub(super) fn advance(&mut self, now: Time) {
        let dt = (now - self.last).max(0.0);
        if f64::from(self.running) > self.test.level {
            self.test.above += dt;
            self.test.above_jobs += dt * f64::from(self.running);
        }
        self.last = self.last.max(now);
    }

    pub(super) fn exposure(&self, run: &Run, now: Time) -> Exposure {
        let theta = if run.test == self.test.id { run.theta } else { 0.0 };
        Exposure {
            age: (now - run.start).max(0.0),
            before: (self.test.started - run.start).max(0.0),
            above: (self.test.above - theta).max(0.0),
        }
    }

    pub(super) fn collecting(&self) -> bool {
        self.dist.as_ref().is_none_or(|d| d.ended < SAMPLE)
    }

    /// The running jobs have now seen more than `floor` running: the clean
    /// ones are healthy observations censored at their present age.
    pub(super) fn taint(&mut self, now: Time) {
        let clean = std::mem::take(&mut self.clean);
        if self.collecting() {
            for job in clean {
                if let Some(r) = self.runs.get(&job) {
                    self.observations.push(Observation { time: now - r.start, ended: false });
                }
            }
        }
    }

    pub fn submitted(&mut self, jobs: &[JobId], at: Time) {
        self.first_submit.get_or_insert(at);
        for &job in jobs {
            self.waits.submitted(at);
            self.idle.insert(job, at);
        }
    }

    /// A job left the queue without (known) start: withdrawn, removed,
    /// held, or finished between two polls of a grid job.
    pub fn left_idle(&mut self, job: JobId, at: Time) {
        if let Some(submitted) = self.idle.remove(&job) {
            self.waits.left(submitted, at, false, self.window);
        }
    }

    pub fn started(&mut self, job: JobId, at: Time) {
        let Some(submitted) = self.idle.remove(&job) else { return };
        self.advance(at);
        self.waits.left(submitted, at, true, self.window);
        self.any_started = true;
        self.closed_until = None;
        self.running += 1;
        // Only jobs queued past the window start past the slots, so the
        // site starts what it is sent, whatever its first cohort showed.
        if f64::from(self.running) > self.cap + 1.0 {
            self.waits.starting = Starting::Together;
        }
        self.runs.insert(
            job,
            Run { start: at, test: self.test.id, theta: self.test.above, overloaded: self.draining() },
        );
        self.by_start.insert((TimeKey::of(at), job));
        self.level_changed(at);
        if self.collecting() && self.sample_runs.len() < SAMPLE_RUNS {
            self.sample_runs.push(SampleRun { job, start: at, end: None });
        }
        if !self.past_floor(self.running) {
            self.clean.insert(job);
        } else if !self.past_floor(self.running - 1) {
            self.taint(at);
        }
    }

    /// A running job's attempt ended.
    pub fn ended(&mut self, job: JobId, at: Time, end: End) {
        let Some(run) = self.runs.remove(&job) else {
            // Never seen running (a grid job can start and end between polls).
            self.left_idle(job, at);
            match end {
                End::Success => self.successes += 1,
                End::Failure => self.failures += 1,
                End::Removed => {}
            }
            return;
        };
        self.advance(at);
        self.by_start.remove(&(TimeKey::of(run.start), job));
        let was_clean = self.clean.remove(&job);
        let exposure = self.exposure(&run, at);
        let above_now = f64::from(self.running) > self.test.level;
        self.running = self.running.saturating_sub(1);
        self.level_changed(at);
        if let Some(r) = self.sample_runs.iter_mut().rev().find(|r| r.job == job && r.end.is_none()) {
            r.end = Some((at, end == End::Success));
        }
        match end {
            End::Success => self.successes += 1,
            End::Failure => self.failures += 1,
            End::Removed => return,
        }
        let ok = end == End::Success;
        if was_clean && self.collecting() {
            self.observations.push(Observation { time: exposure.age, ended: ok });
            if ok {
                self.estimate(at);
            }
        }
        let reference = self.floor_below().or(self.dist.as_ref());
        if let (Some(d), false) = (reference, run.overloaded) {
            // A first cohort's job that outlived the baseline taken from its
            // shorter half ends where that baseline is the tail's
            // assumption: the tail stands for this very job. By the density
            // at its end, a slowdown that maps the end back among the runs
            // seen would win on the tail's assumed shape, not on data. Short
            // of where a healthy run is unlikely (`past_longest`), it
            // testifies as having survived to the longest run seen, which is
            // what it said while running up to that age; past there, as
            // having ended between that and its age, which still tells
            // slowdowns that would have kept it running from those that
            // would not.
            let cohort = self.baseline_taken_at.is_some_and(|taken| run.start < taken);
            let known = d.longest_seen();
            let testimony = if !ok {
                Testimony::Survived(exposure)
            } else if !cohort || exposure.age <= known {
                Testimony::Ended(exposure)
            } else if exposure.age < past_longest(d, self.test.scales[SCALES.len() - 1]) {
                Testimony::Survived(exposure.cut_at(known))
            } else {
                Testimony::EndedBetween(exposure.cut_at(known), exposure)
            };
            let healthy = testimony.healthy(d);
            let llr = |kappa: f64, scale: f64| testimony.llr(d, kappa, scale, above_now, &healthy);
            let weighed = testimony.exposure();
            let factors = self.factors();
            let mut ended_llr = self.test.ended_llr;
            let mut ended_null = self.test.ended_null;
            for (j, &scale) in self.test.scales.iter().enumerate() {
                for (k, factor) in factors.iter().enumerate() {
                    ended_llr[k][j] += llr(*factor, scale);
                }
                ended_null[j] += llr(1.0, scale);
            }
            (self.test.ended_llr, self.test.ended_null) = (ended_llr, ended_null);
            if weighed.age > 0.0 {
                self.test.weighed += (weighed.above / weighed.age).min(1.0);
            }
        }
    }

    pub(super) fn level_changed(&mut self, at: Time) {
        if self.collecting() && self.levels.len() < SAMPLE_LEVELS && !self.sample_runs.is_empty() {
            self.levels.push((at, self.running));
        }
    }

    /// The level the sample's runs ran at up to `now`, as a running job saw
    /// it: the levels recorded, each weighted by the jobs it held and how
    /// long (∫n² dt / ∫n dt). None before any ran.
    pub(super) fn level_run(&self, now: Time) -> Option<f64> {
        let ends = self.levels.iter().skip(1).map(|&(t, _)| t).chain([now]);
        let (mut job_level, mut job_time) = (0.0, 0.0);
        for (&(from, n), to) in self.levels.iter().zip(ends) {
            let (n, dt) = (f64::from(n), (to - from).max(0.0));
            job_level += n * n * dt;
            job_time += n * dt;
        }
        (job_time > 0.0).then(|| job_level / job_time)
    }

    /// Whether `n` running jobs are past the highest level known healthy.
    /// The floor a healthy test sets is the time average of the whole levels
    /// it ran at, so it ran at `⌈floor⌉` or more for part of its time, under
    /// the verdict. Taken strictly, the window's own level was past its floor
    /// (63.7 for 64: jobs between one end and the next start), and a run was
    /// never healthy again once its probe had filled the window.
    pub(super) fn past_floor(&self, n: u32) -> bool {
        f64::from(n) > self.floor.ceil()
    }

    /// The floor rose: the sample's runs are healthy up to the first moment
    /// more than the new floor ran, not the old one (a job censored when the
    /// level first passed the old floor may now count whole). Censoring by
    /// the level, which other jobs set, stays independent of a job's own run.
    pub(super) fn resample(&mut self, now: Time) {
        if !self.collecting() || self.sample_runs.is_empty() || self.levels.len() >= SAMPLE_LEVELS {
            return;
        }
        let mut observations = Vec::with_capacity(self.sample_runs.len());
        let mut clean = BTreeSet::new();
        for run in &self.sample_runs {
            let until = run.end.map_or(now, |(t, _)| t);
            // From the change that started it (the level it started at) to
            // the last change before it ended.
            let from = self.levels.partition_point(|&(t, _)| t < run.start);
            let past_floor = self.levels[from..]
                .iter()
                .take_while(|&&(t, _)| t < until)
                .find(|&&(_, n)| self.past_floor(n))
                .map(|&(t, _)| t);
            match (past_floor, run.end) {
                (Some(t), _) => observations.push(Observation { time: t - run.start, ended: false }),
                (None, Some((t, ok))) => observations.push(Observation { time: t - run.start, ended: ok }),
                (None, None) => {
                    clean.insert(run.job);
                }
            }
        }
        // Clean runs the sample did not keep (it keeps the first
        // `SAMPLE_RUNS`) stay clean.
        let kept: BTreeSet<JobId> = self.sample_runs.iter().map(|r| r.job).collect();
        clean.extend(self.clean.iter().filter(|job| !kept.contains(job)));
        let before = (
            std::mem::replace(&mut self.observations, observations),
            std::mem::replace(&mut self.clean, clean),
            self.dist.clone(),
        );
        let was_ready = self.ready();
        self.estimate(now);
        if was_ready && !self.ready() {
            // Censored where the level first passed the new floor, the runs
            // leave more than half their mass unseen. The old sample, censored
            // at the old floor, is healthy still; without it no test runs,
            // and none ever would while the level stays past the floor (no
            // run ends clean there): the site held at its probe all run.
            (self.observations, self.clean, self.dist) = before;
        }
    }

    /// Re-estimates the healthy distribution (while the sample is open).
    pub(super) fn estimate(&mut self, now: Time) {
        let obs = self.sample_at(now);
        // Only the first cohort's runs started together and are censored
        // together when the first probe begins; later samples are taken
        // again as the floor rises, from runs started over time.
        let z = if self.floor_is_first_windows() { UNSEEN_Z } else { 0.0 };
        if let Some(d) = Distribution::estimate_with_unseen_error(&obs, z) {
            self.dist = Some(d);
        }
        if !self.collecting() {
            // The sample is closed: nothing will take it again (and a
            // checkpoint need not carry it).
            self.sample_runs = Vec::new();
            self.levels = Vec::new();
        }
    }

    /// The healthy sample at `now`: the runs ended or censored, and the clean
    /// runs still going.
    pub(super) fn sample_at(&self, now: Time) -> Vec<Observation> {
        let mut obs = self.observations.clone();
        obs.extend(
            self.clean
                .iter()
                .filter_map(|job| self.runs.get(job))
                .map(|r| Observation { time: now - r.start, ended: false }),
        );
        obs
    }

    /// Whether the healthy distribution is known well enough to test by.
    pub fn ready(&self) -> bool {
        self.dist.as_ref().is_some_and(|d| d.ended >= READY_ENDED && d.unseen <= READY_UNSEEN)
    }

    /// The test's log-likelihood ratios at `now`, one per slowdown weighed.
    /// Per slowdown, the best over the healthy runs' [`SCALES`] against the
    /// best healthy hypothesis. And whether a running job past the longest
    /// healthy run testified (as having survived to a younger age): then a
    /// slowdown is proven only from below.
    pub(super) fn llrs(&self, d: &Distribution, now: Time) -> ([f64; STRETCH.len()], bool) {
        let mut truncated = false;
        let mut llr = self.test.ended_llr;
        let mut null = self.test.ended_null;
        // Survival is known from data only between the shortest and the
        // longest healthy runs seen: the kernel's spread below the first
        // and the tail past the last are assumptions, which hundreds of
        // young (or old) jobs would otherwise turn into a verdict.
        let (lowest, known) = (d.shortest_seen(), d.longest_seen());
        let (beyond, far) = (past_longest(d, self.test.scales[SCALES.len() - 1]), FAR_PAST * known);
        let running = self
            .by_start
            .iter()
            .take(TEST_JOBS)
            .take_while(|(start, _)| now - start.time() > lowest)
            .filter_map(|(_, job)| self.runs.get(job))
            .filter(|r| !r.overloaded)
            .filter_map(|r| {
                // Past the longest healthy run seen, survival is the tail's
                // assumption, not data: such a job testifies when it ends,
                // or once it is past where a healthy run is unlikely to be
                // (`past_longest`, at most `FAR_PAST` times the longest), as
                // having survived to there; a collapsed site's jobs would
                // otherwise say nothing until they end, many run times later.
                let e = self.exposure(r, now);
                match e.age {
                    age if age <= known => Some(e),
                    age if age >= far => {
                        truncated = true;
                        Some(e.truncated(far))
                    }
                    age if age >= beyond => {
                        truncated = true;
                        Some(e.truncated(beyond))
                    }
                    _ => None,
                }
            });
        let factors = self.factors();
        for e in running {
            let healthy = e.running_healthy(d);
            for (j, &scale) in self.test.scales.iter().enumerate() {
                for (k, factor) in factors.iter().enumerate() {
                    llr[k][j] += e.running_llr(d, *factor, scale, &healthy);
                }
                null[j] += e.running_llr(d, 1.0, scale, &healthy);
            }
        }
        let best = |l: &[f64; SCALES.len()]| l.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let best_null = best(&null);
        (llr.map(|l| best(&l) - best_null), truncated)
    }

    pub(super) fn new_test(&mut self, now: Time) {
        // With the window above the floor, the test is about the levels in
        // between; with the window at the floor (held, or cut back to it), it
        // is about the level itself: every job's whole run counts.
        let level = if self.holding() || self.window < self.floor + 1.0 { 0.0 } else { self.floor };
        self.test = Test {
            id: self.test.id + 1,
            level,
            started: now,
            above: 0.0,
            above_jobs: 0.0,
            ended_llr: [[0.0; SCALES.len()]; STRETCH.len()],
            ended_null: [0.0; SCALES.len()],
            scales: match self.floor_below() {
                // Below, a false alarm is a baseline learned long: the
                // healthy side may shorten it as far as it may lengthen it
                // above.
                Some(d) => scales_for(Some(d), self.rules.scale_z, self.poll_period).map(|s| 1.0 / s),
                None => scales_for(self.dist.as_ref(), self.rules.scale_z, self.poll_period),
            },
            weighed: 0.0,
        };
        self.last = now;
    }

    /// While a floor under suspicion is checked from the level below
    /// ([`Suspect::Floor`], drained), its baseline: the test then weighs the
    /// runs here against it, every whole run counting.
    pub(super) fn floor_below(&self) -> Option<&Distribution> {
        match &self.phase {
            Phase::Rechecking(Recheck { suspect: Suspect::Floor, baseline: Some((d, _)), .. }) => Some(d),
            _ => None,
        }
    }

    /// The runs this site's speed is known by, for the other sites to be
    /// compared with ([`Site::check_slow_baseline`]): its own once ready;
    /// while its floor is checked from the level below and the runs there
    /// are not yet ready, the floor's baseline set aside. Slowed, if
    /// anything, by its level, that baseline only makes another site's
    /// runs look less slow; without it, a site checking its floor hides
    /// its speed for a drain and a sample, and a first window past a knee
    /// judged meanwhile goes untold (a probe above it thrashes instead).
    pub fn speed_known(&self) -> Option<&Distribution> {
        self.dist.as_ref().filter(|_| self.ready()).or(self.floor_below())
    }

    /// The factors the test's alternatives stretch a run by, least first:
    /// κ × [`STRETCH`] slower above a floor, or, checking a floor from
    /// below, as many times *faster* than its baseline (past a knee, fewer
    /// jobs run faster: that baseline was slowed by its level).
    pub(super) fn factors(&self) -> [f64; STRETCH.len()] {
        let below = self.floor_below().is_some();
        STRETCH.map(|s| if below { 1.0 / (self.rules.kappa * s) } else { self.rules.kappa * s })
    }

    /// Whether the test under way is a probe: about the levels above a
    /// floor already judged, not about the floor itself (nor the first
    /// cohort, whose runs are the baseline).
    pub fn probing(&self) -> bool {
        self.searched && self.test.level > 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(times: impl Iterator<Item = f64>) -> Vec<Observation> {
        times.map(|time| Observation { time, ended: true }).collect()
    }

    #[test]
    fn a_job_past_the_longest_run_testifies_near_it_on_runs_of_one_size_and_far_past_it_otherwise() {
        // 64 runs of 190–210 s, all ended: a healthy run past 1.2× the
        // longest is out of the question, so a job there must testify.
        let narrow =
            Distribution::estimate(&ended((0..64).map(|i| 190.0 + 20.0 * f64::from(i) / 63.0))).unwrap();
        let past = past_longest(&narrow, SCALES[SCALES.len() - 1]);
        assert!(past >= 210.0 * SCALES[SCALES.len() - 1] && past <= 1.2 * 210.0, "narrow: {past}");
        // 8 runs over 100–300 s: the end of the spread is far less certain.
        let wide =
            Distribution::estimate(&ended((0..8).map(|i| 100.0 + 200.0 * f64::from(i) / 7.0))).unwrap();
        let past_wide = past_longest(&wide, SCALES[SCALES.len() - 1]);
        assert!(past_wide > 1.3 * 300.0 && past_wide <= FAR_PAST * 300.0, "wide: {past_wide}");
        // One run still going past the longest ended: no order statistic yet.
        let mut open = ended((0..64).map(|i| 190.0 + 20.0 * f64::from(i) / 63.0));
        open.push(Observation { time: 230.0, ended: false });
        let open = Distribution::estimate(&open).unwrap();
        assert_eq!(past_longest(&open, SCALES[SCALES.len() - 1]), FAR_PAST * open.longest_seen());
    }

    #[test]
    fn a_late_first_start_is_a_dead_time_to_moves_and_a_long_wait_to_routing() {
        // 16 jobs sent at 0 s; the first start heard at 25 s, as a Condor-C
        // site's after forwarding them together.
        let mut waits = Waits::default();
        for _ in 0..16 {
            waits.submitted(0.0);
        }
        assert_eq!(waits.proven(20.0), 0.0, "within the minute a start takes to be heard of");
        assert_eq!(waits.pessimistic(20.0), 20.0, "routing: the jobs' mean age");
        waits.left(0.0, 25.0, true, 16.0);
        assert_eq!(waits.pessimistic(25.0), 16.0 * 25.0, "one start over all the waiting");
        assert_eq!((waits.proven(25.0), waits.dead_time()), (25.0, 25.0));
        // Ten seconds on with no other start, the waiting past 25 s counts.
        assert_eq!(waits.proven(35.0), 25.0 + 15.0 * 10.0);
        // Memoryless waits of 10 s: the shortest start is near 0, and the
        // two estimates are near each other.
        let mut memoryless = Waits::default();
        for _ in 0..16 {
            memoryless.submitted(0.0);
        }
        for i in 0..16 {
            let wait = -10.0 * (1.0 - (f64::from(i) + 0.5) / 16.0).ln();
            memoryless.left(0.0, wait, true, 16.0);
        }
        let (plain, proven) = (memoryless.pessimistic(60.0), memoryless.proven(60.0));
        assert!((plain - 10.0).abs() < 1.0 && proven <= plain && proven > 0.95 * plain, "{plain} {proven}");
    }

    #[test]
    fn a_warm_start_leaves_the_dead_time_to_this_runs_first_start() {
        // Memory says jobs wait 5 s here; this run's 16 jobs are forwarded
        // together and the first start is heard at 25 s.
        let mut waits = Waits::default();
        waits.remember(5.0);
        for _ in 0..16 {
            waits.submitted(0.0);
        }
        assert_eq!(waits.proven(20.0), 5.0, "within the minute a start takes to be heard of: memory's wait");
        waits.left(0.0, 25.0, true, 16.0);
        assert_eq!(waits.dead_time(), 25.0);
        // Memory's three waits were shorter than the dead time: they add
        // nothing past it, and the 15 jobs still waiting are not moved on
        // memory's 5 s while the site forwards them.
        assert_eq!(waits.proven(25.0), 25.0);
        assert_eq!(waits.proven(33.0), 25.0 + 15.0 * 8.0 / 4.0);
    }

    #[test]
    fn the_scale_range_follows_the_baselines_standard_error() {
        let z = normal_upper_quantile(0.001);
        assert!((z - 3.09).abs() < 0.01, "{z}");
        let top = |d: &Distribution| scales_for(Some(d), z, 0.0)[SCALES.len() - 1] - 1.0;
        // Eight runs of 100–300 s: the mean is known to ±10% (one standard
        // error), so a baseline 20% short is within reach of the test.
        let eight =
            Distribution::estimate(&ended((0..8).map(|i| 100.0 + 200.0 * f64::from(i) / 7.0))).unwrap();
        assert!(top(&eight) > 0.25 && top(&eight) < 0.4, "8 runs ±50%: {}", top(&eight));
        // Sixty-four: a third of that, and jobs of one size keep the least range.
        let many =
            Distribution::estimate(&ended((0..64).map(|i| 100.0 + 200.0 * f64::from(i) / 63.0))).unwrap();
        assert!(top(&many) > 0.1 && top(&many) < 0.15, "64 runs ±50%: {}", top(&many));
        let narrow =
            Distribution::estimate(&ended((0..8).map(|i| 195.0 + 10.0 * f64::from(i) / 7.0))).unwrap();
        assert_eq!(scales_for(Some(&narrow), z, 0.0), SCALES);
    }

    #[test]
    fn a_polled_sites_scale_range_takes_a_poll_more() {
        let z = normal_upper_quantile(0.001);
        // Runs of one size, 100 s: the standard error leaves the least
        // range; polled every 20 s, a cohort may read a fifth longer.
        let runs = Distribution::estimate(&ended((0..16).map(|i| 99.0 + 2.0 * f64::from(i) / 15.0))).unwrap();
        let top = |poll: f64| scales_for(Some(&runs), z, poll)[SCALES.len() - 1] - 1.0;
        assert!((top(0.0) - 0.1).abs() < 1e-9, "unpolled: {}", top(0.0));
        assert!((top(20.0) - 0.2).abs() < 0.01, "polled every 20 s: {}", top(20.0));
        // A poll as long as the runs is no evidence of anything.
        assert!((top(1000.0) - 1.0).abs() < 1e-9, "{}", top(1000.0));
    }
}
