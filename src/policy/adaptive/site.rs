//! One site's estimator and controller: the bookkeeping behind the rules of
//! the parent module's docs (their reasoning: `docs/adaptive.md`).

use super::runtime::{Distribution, Exposure, Observation, Testimony, READY_UNSEEN, SAMPLE};
use crate::policy::book::TimeKey;
use crate::policy::plan::SiteModel;
use crate::policy::{JobId, SiteMemory, Time};
use std::collections::{BTreeMap, BTreeSet};

/// The controller's constants, derived once from the parameters.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Rules {
    /// The slowdown a test looks for (the thesis's 25%).
    pub kappa: f64,
    /// Log-likelihood ratio above which a level is degraded: ln((1 − β)/α).
    pub upper: f64,
    /// Log-likelihood ratio below which a level is healthy: ln(β/(1 − α)).
    pub lower: f64,
    /// How far past the highest healthy level the window may go.
    pub gain: f64,
    /// The search stops when ceiling ÷ floor is within 1 + this.
    pub precision: f64,
    /// Mean run times a converged level is held before the one above is tried.
    pub reprobe_after: f64,
    /// How many standard errors of the baseline's mean its scale may be
    /// off by: the normal quantile of the false-alarm rate.
    #[serde(default = "default_scale_z")]
    pub scale_z: f64,
}

/// A checkpoint written before the range followed the baseline's error
/// restores with the fixed range it was written with (`z` 0: the least).
fn default_scale_z() -> f64 {
    0.0
}

/// Seconds HTCondor-G may take to report that a grid job started or ended:
/// the gridmanager polls a remote site every
/// `GRIDMANAGER_JOB_PROBE_INTERVAL` (60 s by default).
const START_NEWS: f64 = 60.0;

/// Queue waits as an exponential with right-censoring: the MLE of the mean
/// is all the time jobs spent waiting (started or not) over the starts.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Waits {
    /// Σ waits of jobs that left the queue (started or not).
    closed: f64,
    /// Jobs idle now, and the sum of their submission times.
    idle: u64,
    idle_since_sum: f64,
    pub starts: u64,
}

impl Waits {
    fn submitted(&mut self, at: Time) {
        self.idle += 1;
        self.idle_since_sum += at;
    }
    fn left(&mut self, submitted: Time, at: Time, started: bool) {
        self.idle = self.idle.saturating_sub(1);
        self.idle_since_sum -= submitted;
        self.closed += (at - submitted).max(0.0);
        self.starts += u64::from(started);
    }
    /// All the waiting done so far, seconds.
    pub fn exposure(&self, now: Time) -> f64 {
        self.closed + (self.idle as f64 * now - self.idle_since_sum).max(0.0)
    }
    /// The mean wait, once three jobs started (before that it is too noisy
    /// to queue jobs ahead by).
    pub fn mean(&self, now: Time) -> Option<f64> {
        (self.starts >= 3).then(|| self.exposure(now) / self.starts as f64)
    }
    /// A wait for routing at any time: the waiting so far over the starts,
    /// or over one before the first (a site that starts nothing looks slower
    /// the longer it does so). Before the first start, each idle job's first
    /// [`START_NEWS`] seconds are no evidence: HTCondor-G hears of a remote
    /// start only when it next polls the site.
    pub fn pessimistic(&self, now: Time) -> f64 {
        if self.starts == 0 {
            let late = (self.idle as f64 * (now - START_NEWS) - self.idle_since_sum).max(0.0);
            return self.closed + late;
        }
        self.exposure(now) / self.starts as f64
    }
}

/// What a test concluded, for people (the report, `--trace`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Verdict {
    /// Jobs ran healthy with `level` running (on average while above the floor).
    Healthy { level: f64 },
    /// Jobs ran `slowdown` times slower with `level` running.
    Degraded { level: f64, slowdown: f64 },
}

/// How a running job's attempt ended, for the site's statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Success,
    Failure,
    /// Removed by us (site given up, cancelled): says nothing about the site.
    Removed,
}

/// Wald's sequential test of "jobs run at least κ times slower whenever more
/// than `level` run here" against "they run healthy". The alternative is
/// composite, so the statistic is the likelihood ratio of the best of a few
/// slowdowns from κ up (a generalized likelihood ratio): a level far past the
/// knee is told at once, not only when it happens to look 25% slow.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Test {
    id: u64,
    level: f64,
    started: Time,
    /// Θ: seconds with more than `level` running since the test began, and
    /// ∫ running dt over those seconds.
    above: f64,
    above_jobs: f64,
    /// Σ log-likelihood ratios of the attempts that ended, per slowdown
    /// and per scale of the healthy runs ([`SCALES`]).
    ended_llr: [[f64; SCALES.len()]; STRETCH.len()],
    /// The same for healthy at each scale.
    ended_null: [f64; SCALES.len()],
    /// The scales weighed (see [`SCALES`]), fixed when the test begins.
    #[serde(default = "fixed_scales")]
    scales: [f64; SCALES.len()],
    /// Runs weighed so far, each counted by the share of it spent above
    /// the level (attempts that ended).
    #[serde(default)]
    weighed: f64,
}

fn fixed_scales() -> [f64; SCALES.len()] {
    SCALES
}

/// One-sided upper quantile of the standard normal at probability `p`
/// (Abramowitz & Stegun 26.2.23, error < 4.5e-4).
pub fn normal_upper_quantile(p: f64) -> f64 {
    let p = p.clamp(1e-12, 0.5);
    let t = (-2.0 * p.ln()).sqrt();
    t - (2.515517 + 0.802853 * t + 0.010328 * t * t)
        / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t)
}

/// The scales a test weighs for a baseline learned as `d`: from 1 up to
/// the mean's standard error times `z` past it, and never less than
/// [`SCALES`]'s 10%.
fn scales_for(d: Option<&Distribution>, z: f64) -> [f64; SCALES.len()] {
    let Some(d) = d else { return SCALES };
    let least = SCALES[SCALES.len() - 1] - 1.0;
    let top = (z * d.spread / (d.ended.max(1) as f64).sqrt()).min(1.0);
    if top <= least {
        return SCALES;
    }
    let mut scales = SCALES;
    for (j, s) in scales.iter_mut().enumerate() {
        *s = 1.0 + top * j as f64 / (SCALES.len() - 1) as f64;
    }
    scales
}

/// The slowdowns weighed, as multiples of κ.
const STRETCH: [f64; 8] = [1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0];

/// Sites' speeds are compared at the run a quarter of runs end by
/// ([`Site::check_slow_baseline`]): a first verdict comes with up to half
/// the first cohort unseen, so its median is at the edge of the data and
/// its mean is the tail's assumption (a site of half the median speed,
/// runs ±50%, read 2.4 times slower by its median and 2.6 by its mean),
/// while hardware scales every quantile alike.
pub const SPEED_QUANTILE: f64 = 0.25;

/// A running job older than this many times the longest healthy run seen
/// testifies again (see [`Site::llrs`]): with run times ±50% around their
/// mean, the longest of the eight runs a test needs is within 10% of the
/// longest possible, so no healthy job gets to twice it.
const FAR_PAST: f64 = 2.0;

/// How much slower than the median site a healthy site may run its jobs:
/// hardware differs between sites (by about a factor 3 from the slowest to
/// the fastest on the grids we know), so a site is taken for collapsed on
/// speed alone only once its jobs are [`FAR_PAST`] times past the longest
/// healthy run of a site this much slower than the median one, and a first
/// window's runs slower than this are taken for slowed by a knee under it
/// ([`Site::check_slow_baseline`]).
const SPEED_SPREAD: f64 = 2.0;

/// A job at a site with no healthy runs of its own yet is past where a
/// healthy run is unlikely once it is this many times older than the median
/// site's longest healthy run (see [`Site::silent_stragglers`]).
pub const SILENT_PAST: f64 = FAR_PAST * SPEED_SPREAD;

/// How unlikely a healthy run past [`past_longest`] may be: the chance that
/// the end of a bounded spread lies further past the longest of n runs than
/// `ln(1/ε)/n` of their range is about ε.
const PAST_LONGEST_RISK: f64 = 0.01;

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
fn past_longest(d: &Distribution, top_scale: f64) -> f64 {
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
/// least range, 10%), and so is the base every slowdown applies to. Without
/// it on the healthy side, a baseline learned a little short drifts every
/// test toward "degraded" (measured: one run in seven on a healthy site at
/// ±50%); with it on that side only, jobs that all run 5% long — as they
/// do a little past a knee — testify for "healthy" with their whole runs
/// and for the slowdowns only with their time above the level, and a level
/// past the knee is passed (S3: its fast site held at 167 jobs, knee 100).
/// With 1.05 alone on both sides, 3 of 40 runs of a healthy ±50% site
/// called it degraded; with 1.10 too, 1 of 40.
///
/// The grid is as fine as the run-time kernel's least bandwidth (1% of the
/// mean, `runtime.rs`). A slowdown hypothesis stretches only a job's time
/// above the level, which shifts the work it implies by any fraction at
/// all; a healthy side that may only shift by whole steps of 5% then loses
/// to it on runs narrower than a step, and jobs of one size (±5%) on a
/// healthy site were called degraded in 10 of 40 runs (±2%: 4 of 40), each
/// run then held far below the slots (a quarter of them at 25–80 of 300).
/// In steps of 1%: none of 40 at ±2%, one of 40 at ±5%, none at ±50%. A
/// wider range has wider steps, but only where the runs spread widely
/// (the standard error is their spread over √n), and so does the kernel.
const SCALES: [f64; 11] = [1.0, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08, 1.09, 1.1];

/// A run the healthy sample may take, with its end and whether it succeeded.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct SampleRun {
    job: JobId,
    start: Time,
    end: Option<(Time, bool)>,
}

/// A floor under suspicion: a probe above it proved the site thrashes, and
/// the floor is where the baseline was learned, healthy only by assumption.
/// The site drains to the level below and learns its runs there afresh.
/// Or (`of_memory`) memory's run times under suspicion: the level memory
/// held healthy ran degraded by them, and the runs at the level cut to are
/// learned afresh to be compared with memory's (`Site::check_memory`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Recheck {
    /// The level under suspicion.
    floor: f64,
    /// What is under suspicion is memory's run times, not the floor: see
    /// [`Site::check_memory`].
    #[serde(default)]
    of_memory: bool,
    /// The ceiling before the verdict that began a check of memory, and
    /// whether it was assumed: the knee memory knew, which comes back if
    /// memory's runs prove to be another job's (the shared resource is the
    /// site's, not the run times').
    #[serde(default)]
    ceiling: (f64, bool),
    /// Its baseline (distribution and observations), set aside once the
    /// site has drained below it and the fresh sample begins.
    baseline: Option<(Distribution, Vec<Observation>)>,
}

/// Runs kept for the sample to be taken again as the floor rises, and
/// changes of the running count kept for it (bounds on memory and on the
/// cost of taking it again).
const SAMPLE_RUNS: usize = 4 * SAMPLE;
const SAMPLE_LEVELS: usize = 1 << 13;

/// One running job, as the tests need it.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Run {
    start: Time,
    /// The test running at its start and Θ then.
    test: u64,
    theta: f64,
    /// It ran through an overload (it was running at a degraded verdict or
    /// started while the site drained): how far it got is unknown, so no
    /// later test may judge by it.
    overloaded: bool,
}

/// Running jobs a test looks at, oldest first: beyond these the young ones
/// carry little information and the cost would grow with the site.
const TEST_JOBS: usize = 256;

/// Healthy runs to have ended before a test may judge anything against them
/// (and at most [`READY_UNSEEN`] of the distribution unseen).
const READY_ENDED: usize = 8;

/// Standard errors the first cohort's unseen share is taken up by
/// ([`Distribution::estimate_with_unseen_error`]): one. At the error of the
/// false-alarm rate's quantile, as the scale's, every first cohort would be
/// taken half unseen, and knees past the first window found later (held-out
/// family 0.8% slower, BENCHMARKS.md).
const UNSEEN_Z: f64 = 1.0;

/// A test is evaluated at most this many times per mean run time: often
/// enough to react within a few percent of a run, cheap on a busy site.
const EVALS: f64 = 40.0;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Site {
    pub name: String,
    /// Most jobs that may be out here (slots, operator cap).
    pub cap: f64,
    pub idle_timeout: f64,
    rules: Rules,
    pub waits: Waits,
    /// Idle jobs and their submission times.
    idle: BTreeMap<JobId, Time>,
    pub successes: u64,
    pub failures: u64,
    /// Healthy observations (ended, and censored) until the sample closes.
    observations: Vec<Observation>,
    /// Running jobs that have seen no more than `floor` running.
    clean: BTreeSet<JobId>,
    /// While the sample is open: the first runs started here, and the
    /// running count after each change, so that a floor a verdict raises
    /// counts the time they ran at levels it now knows healthy.
    #[serde(default)]
    sample_runs: Vec<SampleRun>,
    #[serde(default)]
    levels: Vec<(Time, u32)>,
    pub dist: Option<Distribution>,
    /// Jobs to keep running.
    pub window: f64,
    /// Highest level known healthy.
    pub floor: f64,
    /// Lowest level seen degraded (`cap` while none).
    pub ceiling: f64,
    /// A test reached a verdict here (or memory said so): the floor is
    /// knowledge, not the initial guess.
    pub searched: bool,
    /// The floor came from memory: knowledge to keep even where this run
    /// reaches no verdict (see `remember`, a floor without run times).
    #[serde(default)]
    floor_remembered: bool,
    test: Test,
    /// After a cut: no test until the jobs drained to the window.
    draining: bool,
    /// The search converged at `floor`; since when.
    pub holding_since: Option<Time>,
    runs: BTreeMap<JobId, Run>,
    by_start: BTreeSet<(TimeKey, JobId)>,
    pub running: u32,
    /// When Θ was last brought up to date.
    last: Time,
    pub first_submit: Option<Time>,
    pub any_started: bool,
    /// HTCondor reports the grid resource down (026, no 027 yet).
    pub down: bool,
    /// Given up as unresponsive until then (then one probe job).
    pub closed_until: Option<Time>,
    /// The test is evaluated no more often than every `EVALS` of a run time.
    next_eval: Time,
    /// The verdicts not told yet (`Adaptive::tell` takes them): when, what,
    /// and the window each left.
    pub verdicts: Vec<(Time, Verdict, f64)>,
    /// The most likely slowdown at the last degraded verdict: what a job
    /// still running there is expected to suffer (the verdict's own, the
    /// least one proved, is what the window is cut by).
    likeliest_slowdown: Option<f64>,
    /// While the site drains after a degraded verdict: the level judged and
    /// the slowdown proven there (an index into [`STRETCH`]), which the same
    /// test's evidence may still raise (see `refine`).
    #[serde(default)]
    proven: Option<(f64, usize)>,
    /// The capacity and ceiling to remember, kept from before the first
    /// verdict on the floor once the pool was empty (see
    /// [`Site::check_in_tail`]).
    #[serde(default)]
    remembered: Option<(Option<f64>, Option<f64>)>,
    /// The level the healthy baseline was learned at while no verdict has
    /// compared it with a level below (the first cohort's, taken healthy).
    #[serde(default)]
    unchecked_baseline: Option<f64>,
    /// When the first cohort's runs became the baseline (the first
    /// verdict): jobs started before it are that cohort (see
    /// [`Site::ended`] on the ones that outlive it).
    #[serde(default)]
    baseline_taken_at: Option<Time>,
    /// While the floor is checked against the level below (see `recheck`).
    #[serde(default)]
    recheck: Option<Recheck>,
    /// The ceiling is a re-probe's assumption (`probe_gain` × the knee held),
    /// not a level seen degraded (see [`Site::maybe_reprobe`]).
    #[serde(default)]
    ceiling_assumed: bool,
    /// How long the last probe took from its start to a healthy verdict:
    /// how soon the next one's jobs must start to be judged with it.
    #[serde(default)]
    probe_took: Option<f64>,
    /// This run's own runs were compared with memory's (`check_memory`).
    #[serde(default)]
    memory_checked: bool,
}

impl Site {
    pub fn new(
        name: String,
        cap: f64,
        idle_timeout: f64,
        initial: f64,
        rules: Rules,
        memory: Option<&SiteMemory>,
    ) -> Self {
        let initial = initial.max(1.0).min(cap);
        let mut site = Site {
            name,
            cap,
            idle_timeout,
            rules,
            waits: Waits::default(),
            idle: BTreeMap::new(),
            successes: 0,
            failures: 0,
            observations: Vec::new(),
            clean: BTreeSet::new(),
            sample_runs: Vec::new(),
            levels: Vec::new(),
            dist: None,
            window: initial,
            floor: initial,
            ceiling: cap,
            searched: false,
            floor_remembered: false,
            test: Test {
                id: 0,
                level: initial,
                started: 0.0,
                above: 0.0,
                above_jobs: 0.0,
                ended_llr: [[0.0; SCALES.len()]; STRETCH.len()],
                ended_null: [0.0; SCALES.len()],
                scales: SCALES,
                weighed: 0.0,
            },
            draining: false,
            holding_since: None,
            probe_took: None,
            runs: BTreeMap::new(),
            by_start: BTreeSet::new(),
            running: 0,
            last: 0.0,
            first_submit: None,
            any_started: false,
            down: false,
            closed_until: None,
            next_eval: 0.0,
            verdicts: Vec::new(),
            likeliest_slowdown: None,
            proven: None,
            remembered: None,
            unchecked_baseline: Some(initial),
            baseline_taken_at: None,
            recheck: None,
            ceiling_assumed: false,
            memory_checked: false,
        };
        if let Some(m) = memory {
            site.remember(m);
        }
        site
    }

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
            self.holding_since = Some(0.0);
        }
        self.new_test(0.0);
    }

    /// Warm start: the remembered capacity is the floor and the window; the
    /// remembered run times are the healthy distribution from the first job.
    fn remember(&mut self, m: &SiteMemory) {
        if let Some(d) =
            m.runtime_quantiles.as_deref().and_then(|q| Distribution::from_quantiles(q, m.runtime_range))
        {
            self.dist = Some(d);
        }
        if let Some(c) = m.capacity.filter(|c| *c >= 1.0) {
            let c = c.min(self.cap);
            self.unchecked_baseline = None;
            self.floor = c;
            self.floor_remembered = true;
            self.window = c;
            self.searched = true;
            match m.ceiling.filter(|&u| u > c) {
                Some(u) => {
                    self.ceiling = u.min(self.cap);
                    self.ceiling_assumed = m.ceiling_assumed;
                }
                // No knee was seen above the remembered level: the run starts
                // where a healthy verdict there would have taken it.
                None => self.window = (self.rules.gain * c).min(self.cap),
            }
            if self.dist.is_none() {
                // No run times came with it (a first cohort given up on, or
                // a state from before they were kept): nothing above the
                // level could be tested, and runs past it teach no baseline,
                // so the window would stay where it starts all run. The
                // level is known healthy: it is a first window whose verdict
                // comes once its runs are in.
                self.window = c;
                self.searched = false;
            }
            if self.converged() {
                self.holding_since = Some(0.0);
            }
            self.new_test(0.0);
        }
        if m.unresponsive {
            self.window = 1.0;
            // It started nothing for at least `idle_timeout` last time: its
            // wait is planned as one job's that long without a start, so a
            // job goes there only where the run is long enough to use a
            // site that slow (not a probe parked there while others have
            // room, to be moved once its wait, counted from zero, grew).
            self.waits.closed = self.idle_timeout;
        }
        if let Some((succeeded, failed)) = m.attempts {
            (self.successes, self.failures) = (succeeded, failed);
        }
        if let Some(w) = m.mean_wait {
            // As if three jobs had waited that long.
            self.waits.closed = 3.0 * w;
            self.waits.starts = 3;
        }
    }

    fn converged(&self) -> bool {
        self.ceiling <= self.floor * (1.0 + self.rules.precision) || self.floor >= self.cap
    }

    pub fn closed(&self, now: Time) -> bool {
        self.down || self.closed_until.is_some_and(|t| now < t)
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
        let checking = self.recheck.as_ref().filter(|r| r.of_memory).and_then(|r| r.baseline.as_ref());
        let own = self.dist.as_ref().or(checking.map(|(d, _)| d)).map(Distribution::mean);
        let run = own.or(fallback_run);
        let success = (self.successes as f64 + 1.0) / ((self.successes + self.failures) as f64 + 1.0);
        let mut model = SiteModel {
            open: true,
            window: self.window,
            run: run.unwrap_or(1.0),
            wait: self.waits.pessimistic(now),
            // Jobs kept waiting ahead start whenever the queue lets them, so
            // more than the window would run: not while the first cohort's
            // runs are still to become the baseline at that level.
            ahead: if self.ready() { self.waits.mean(now).unwrap_or(0.0) } else { 0.0 },
            success,
            draining: self.draining && f64::from(self.running) > self.window,
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
            let climbing =
                self.probing() && self.ceiling >= self.cap && !self.draining && self.recheck.is_none();
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

    /// Brings Θ up to `now`; call before the running count changes.
    fn advance(&mut self, now: Time) {
        let dt = (now - self.last).max(0.0);
        if f64::from(self.running) > self.test.level {
            self.test.above += dt;
            self.test.above_jobs += dt * f64::from(self.running);
        }
        self.last = self.last.max(now);
    }

    fn exposure(&self, run: &Run, now: Time) -> Exposure {
        let theta = if run.test == self.test.id { run.theta } else { 0.0 };
        Exposure {
            age: (now - run.start).max(0.0),
            before: (self.test.started - run.start).max(0.0),
            above: (self.test.above - theta).max(0.0),
        }
    }

    fn collecting(&self) -> bool {
        self.dist.as_ref().is_none_or(|d| d.ended < SAMPLE)
    }

    /// The running jobs have now seen more than `floor` running: the clean
    /// ones are healthy observations censored at their present age.
    fn taint(&mut self, now: Time) {
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
            self.waits.left(submitted, at, false);
        }
    }

    pub fn started(&mut self, job: JobId, at: Time) {
        let Some(submitted) = self.idle.remove(&job) else { return };
        self.advance(at);
        self.waits.left(submitted, at, true);
        self.any_started = true;
        self.closed_until = None;
        self.running += 1;
        self.runs.insert(
            job,
            Run { start: at, test: self.test.id, theta: self.test.above, overloaded: self.draining },
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
        if let (Some(d), false) = (&self.dist, run.overloaded) {
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
            if weighed.age > 0.0 {
                self.test.weighed += (weighed.above / weighed.age).min(1.0);
            }
            for (j, &scale) in self.test.scales.iter().enumerate() {
                for (k, stretch) in STRETCH.iter().enumerate() {
                    self.test.ended_llr[k][j] += llr(self.rules.kappa * stretch, scale);
                }
                self.test.ended_null[j] += llr(1.0, scale);
            }
        }
    }

    fn level_changed(&mut self, at: Time) {
        if self.collecting() && self.levels.len() < SAMPLE_LEVELS && !self.sample_runs.is_empty() {
            self.levels.push((at, self.running));
        }
    }

    /// Whether `n` running jobs are past the highest level known healthy.
    /// The floor a healthy test sets is the time average of the whole levels
    /// it ran at, so it ran at `⌈floor⌉` or more for part of its time, under
    /// the verdict. Taken strictly, the window's own level was past its floor
    /// (63.7 for 64: jobs between one end and the next start), and a run was
    /// never healthy again once its probe had filled the window.
    fn past_floor(&self, n: u32) -> bool {
        f64::from(n) > self.floor.ceil()
    }

    /// The floor rose: the sample's runs are healthy up to the first moment
    /// more than the new floor ran, not the old one (a job censored when the
    /// level first passed the old floor may now count whole). Censoring by
    /// the level, which other jobs set, stays independent of a job's own run.
    fn resample(&mut self, now: Time) {
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
    fn estimate(&mut self, now: Time) {
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
    fn sample_at(&self, now: Time) -> Vec<Observation> {
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
    fn llrs(&self, d: &Distribution, now: Time) -> ([f64; STRETCH.len()], bool) {
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
        for e in running {
            let healthy = e.running_healthy(d);
            for (j, &scale) in self.test.scales.iter().enumerate() {
                for (k, stretch) in STRETCH.iter().enumerate() {
                    llr[k][j] += e.running_llr(d, self.rules.kappa * stretch, scale, &healthy);
                }
                null[j] += e.running_llr(d, 1.0, scale, &healthy);
            }
        }
        let best = |l: &[f64; SCALES.len()]| l.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let best_null = best(&null);
        (llr.map(|l| best(&l) - best_null), truncated)
    }

    fn new_test(&mut self, now: Time) {
        // With the window above the floor, the test is about the levels in
        // between; with the window at the floor (held, or cut back to it), it
        // is about the level itself: every job's whole run counts.
        let level =
            if self.holding_since.is_some() || self.window < self.floor + 1.0 { 0.0 } else { self.floor };
        self.test = Test {
            id: self.test.id + 1,
            level,
            started: now,
            above: 0.0,
            above_jobs: 0.0,
            ended_llr: [[0.0; SCALES.len()]; STRETCH.len()],
            ended_null: [0.0; SCALES.len()],
            scales: scales_for(self.dist.as_ref(), self.rules.scale_z),
            weighed: 0.0,
        };
        self.last = now;
    }

    /// Whether the test under way is a probe: about the levels above a
    /// floor already judged, not about the floor itself (nor the first
    /// cohort, whose runs are the baseline).
    pub fn probing(&self) -> bool {
        self.searched && self.test.level > 0.0
    }

    /// Runs the test at `now`; on a verdict, applies it (see the parent
    /// module's docs) and returns it with the running jobs to shed. While
    /// the site drains after a degraded verdict, that verdict's test goes
    /// on (`refine`).
    pub fn check(&mut self, now: Time) -> Option<(Verdict, Vec<JobId>)> {
        self.judge(now, false)
    }

    /// [`Site::check`], told whether this is the tail.
    fn judge(&mut self, now: Time, tail: bool) -> Option<(Verdict, Vec<JobId>)> {
        if self.draining {
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
            // Drained: what ran through the overload is no evidence for the
            // next test, and how far it got is unknown.
            self.draining = false;
            self.proven = None;
            for run in self.runs.values_mut() {
                run.overloaded = true;
            }
            self.begin_recheck();
            self.new_test(now);
        }
        if self.recheck.is_some() {
            return self.settle_recheck(now);
        }
        if !self.ready() || now < self.next_eval {
            return None;
        }
        let mean = self.dist.as_ref().map_or(1.0, Distribution::mean);
        self.next_eval = now + (mean / EVALS).max(1.0);
        if !self.searched && self.window <= self.floor && self.floor < self.cap {
            // The first cohort's runs are the baseline, healthy by assumption:
            // that is the first verdict, and probing starts above it.
            let level = self.floor;
            self.healthy(now, level);
            self.searched = true;
            self.baseline_taken_at = Some(now);
            let verdict = Verdict::Healthy { level };
            self.verdicts.push((now, verdict, self.window));
            self.new_test(now);
            return Some((verdict, Vec::new()));
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
        let verdict = Verdict::Healthy { level };
        self.searched = true;
        self.verdicts.push((now, verdict, self.window));
        self.new_test(now);
        Some((verdict, Vec::new()))
    }

    /// A degraded verdict at `level`, slowdown `STRETCH[k]` × κ proven:
    /// applies it and returns it with the running jobs to shed.
    fn cut(
        &mut self,
        now: Time,
        level: f64,
        k: usize,
        llrs: &[f64; STRETCH.len()],
        truncated: bool,
    ) -> (Verdict, Vec<JobId>) {
        let slowdown = self.rules.kappa * STRETCH[k];
        let likeliest = (k..llrs.len()).max_by(|&a, &b| llrs[a].total_cmp(&llrs[b])).unwrap_or(k);
        self.likeliest_slowdown = Some(self.rules.kappa * STRETCH[likeliest]);
        self.proven = Some((level, k));
        self.degraded(level, slowdown, truncated);
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
    /// that no longer run slowed (BENCHMARKS.md, G0121; the guards tried
    /// against it are there too).
    fn refine(&mut self, now: Time) -> Option<(Verdict, Vec<JobId>)> {
        let (level, proven) = self.proven?;
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

    fn healthy(&mut self, now: Time, level: f64) {
        if self.holding_since.is_some() {
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
            self.holding_since = Some(now);
        } else if self.ceiling < self.cap {
            self.window = (self.floor * self.ceiling).sqrt().max(self.floor + 1.0).min(self.ceiling);
        } else {
            self.window = (self.rules.gain * self.floor).max(self.floor + 1.0).min(self.cap);
        }
    }

    /// Jobs ran `slowdown` times slower at `level`: the site delivered what
    /// `level / slowdown` jobs at full speed would (its knee if the resource
    /// only shares, less if it thrashes), so that is where the window goes.
    fn degraded(&mut self, level: f64, slowdown: f64, bound_only: bool) {
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
        self.holding_since = None;
        self.ceiling_assumed = false;
        if self.test.level == 0.0 {
            // The floor itself ran degraded: the capacity dropped, or the
            // floor was a miss of an earlier test.
            let (held, ceiling) = (self.floor, (self.ceiling, self.ceiling_assumed));
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
        if self.recheck.is_none()
            && self.floor_is_first_windows()
            && self.test.level > 0.0
            && level / slowdown < self.floor
        {
            self.check_below();
        }
        if self.recheck.is_some() {
            self.window = self.floor;
        }
        self.draining = true;
    }

    /// Whether the floor is the level the baseline was learned at, never
    /// compared with a level below.
    fn floor_is_first_windows(&self) -> bool {
        self.unchecked_baseline.is_some_and(|b| self.floor <= b)
    }

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
    fn check_memory(&mut self, held: f64, ceiling: (f64, bool)) {
        let remembered = self.dist.as_ref().is_some_and(Distribution::is_remembered);
        if remembered && !self.memory_checked && self.recheck.is_none() && self.floor < held {
            self.recheck = Some(Recheck { floor: held, of_memory: true, ceiling, baseline: None });
        }
    }

    /// The floor comes under suspicion: the window goes to the level below,
    /// and once the site has drained, the runs there are learned afresh
    /// (`begin_recheck`) and compared with the floor's (`settle_recheck`).
    fn check_below(&mut self) {
        self.recheck = Some(Recheck {
            floor: self.floor,
            of_memory: false,
            ceiling: (self.ceiling, self.ceiling_assumed),
            baseline: None,
        });
        self.floor = (self.floor / self.rules.gain).floor().max(1.0);
    }

    /// Drained below a floor under suspicion: its baseline is set aside and
    /// the runs at the level below become the sample.
    fn begin_recheck(&mut self) {
        let Some(recheck) = self.recheck.as_mut().filter(|r| r.baseline.is_none()) else { return };
        let Some(dist) = self.dist.take() else { return };
        recheck.baseline = Some((dist, std::mem::take(&mut self.observations)));
        self.clean.clear();
        self.sample_runs.clear();
        self.levels.clear();
    }

    /// Once the runs below the floor under suspicion are known: the floor's
    /// were slowed if they are κ times longer than these and more, by more
    /// than the two means' errors allow (`z` standard errors, as for the
    /// scale of a baseline). Then the level below is the floor, its runs the
    /// baseline, and the search bisects up to the old floor; else the old
    /// floor and its baseline come back, with these runs added to its sample.
    fn settle_recheck(&mut self, now: Time) -> Option<(Verdict, Vec<JobId>)> {
        let recheck = self.recheck.as_ref()?;
        let (old, _) = recheck.baseline.as_ref()?;
        let new = self.dist.as_ref().filter(|_| self.ready())?;
        let error = (old.spread.powi(2) / old.ended as f64 + new.spread.powi(2) / new.ended as f64).sqrt();
        let slowdown = old.mean() / new.mean();
        let level = recheck.floor;
        if recheck.of_memory {
            return self.settle_memory(now, level, slowdown, error);
        }
        // Degraded means κ slower, beyond the error of the two means.
        let verdict = if slowdown > self.rules.kappa * (1.0 + self.rules.scale_z * error) {
            self.recheck = None;
            self.unchecked_baseline = Some(self.floor);
            self.ceiling = self.ceiling.min(level);
            self.ceiling_assumed = false;
            self.window = if self.converged() {
                self.floor
            } else {
                (self.floor * self.ceiling).sqrt().max(self.floor + 1.0).min(self.ceiling)
            };
            Verdict::Degraded { level, slowdown }
        } else {
            let Some(Recheck { baseline: Some((dist, observations)), .. }) = self.recheck.take() else {
                return None;
            };
            self.unchecked_baseline = None;
            self.floor = level;
            self.window = level;
            self.dist = Some(dist);
            self.observations.extend(observations);
            self.estimate(now);
            Verdict::Healthy { level }
        };
        self.verdicts.push((now, verdict, self.window));
        self.new_test(now);
        Some((verdict, Vec::new()))
    }

    /// Memory's run times against the runs at the level a verdict cut to
    /// (`check_memory`), `slowdown` the ratio of memory's mean to theirs.
    /// Runs there `κ` times slower than memory's and more, beyond the two
    /// means' errors, mean the slowdown did not fall with our level: it was
    /// not the site's but the job's (or the hardware's), so `held`, the
    /// level judged, is the floor again under the ceiling memory knew, and
    /// this run's runs are the baseline. Runs there that much faster mean
    /// memory's runs were slowed (its floor past a knee, as when a first
    /// window is checked) or the job got shorter: either way the cut stands
    /// and this run's runs are the baseline. Within, memory holds and so
    /// does the cut (the capacity dropped); memory's distribution, the
    /// larger sample, is the baseline again.
    fn settle_memory(
        &mut self,
        now: Time,
        held: f64,
        slowdown: f64,
        error: f64,
    ) -> Option<(Verdict, Vec<JobId>)> {
        let bound = self.rules.kappa * (1.0 + self.rules.scale_z * error);
        let Some(Recheck { baseline: Some((memory, _)), ceiling, .. }) = self.recheck.take() else {
            return None;
        };
        self.memory_checked = true;
        if slowdown * bound < 1.0 {
            self.floor = held;
            self.window = held;
            (self.ceiling, self.ceiling_assumed) = ceiling;
            self.ceiling = self.ceiling.max(held);
            self.holding_since = self.converged().then_some(now);
        } else if slowdown <= bound {
            self.dist = Some(memory);
            self.observations.clear();
            self.clean.clear();
            self.sample_runs.clear();
            self.levels.clear();
        }
        let verdict = Verdict::Healthy { level: self.floor };
        self.verdicts.push((now, verdict, self.window));
        self.new_test(now);
        Some((verdict, Vec::new()))
    }

    /// After a degraded verdict, the running jobs to remove. The site
    /// delivered what `level / slowdown` jobs at full speed would; with
    /// sharing alone that is its knee, at least the window the cut leaves.
    /// κ times less (the thesis's degradation, which also covers most of the
    /// test's resolution of slowdowns) means the jobs past the window make
    /// the resource deliver less than the window alone would (it thrashes):
    /// the youngest of them, which have done the least work, go back to the
    /// pool.
    fn thrashing(&self, verdict: Verdict) -> Vec<JobId> {
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
    fn judged_window(&self) -> f64 {
        self.recheck.as_ref().filter(|r| !r.of_memory).map_or(self.window, |r| r.floor.max(self.window))
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
        let (Some(d), true, true) = (&self.dist, self.draining, excess >= 1.0) else { return Vec::new() };
        let Some(slowdown) = self.likeliest_slowdown else { return Vec::new() };
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
        self.recheck = None;
        self.ceiling = level.max(self.floor + 1.0).min(self.cap);
        self.ceiling_assumed = false;
        self.searched = false;
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

    /// Whether the floor is still the first window's, its runs taken as
    /// healthy and never compared with a level below (see
    /// [`Site::check_slow_baseline`]).
    pub fn baseline_unchecked(&self) -> bool {
        self.searched
            && self.recheck.is_none()
            && !self.draining
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
        self.check_below();
        self.window = self.floor;
        self.holding_since = None;
        self.proven = None;
        self.draining = true;
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
        let before = (!self.probing() && self.remembered.is_none()).then(|| self.capacity_memory());
        let verdict = self.judge(now, true)?;
        if let Some(before) = before {
            self.remembered = Some(before);
        }
        Some(verdict)
    }

    /// What a warm run is to start from: (the floor, the ceiling), each
    /// where this run learned one.
    fn capacity_memory(&self) -> (Option<f64>, Option<f64>) {
        // A first cohort that was given up on (`restart_below`) left a
        // floor and a ceiling but no verdict yet: the floor is still what
        // this run learned, and a warm run must not start above it. A
        // remembered floor stays known through a run too short to judge it.
        let learned = self.any_started && (self.searched || self.floor_remembered || self.ceiling < self.cap);
        // A floor whose check is still under way is what was known before it;
        // not where memory's run times are checked: that began with a
        // verdict at the floor, which stands until the check says otherwise.
        let floor = self.recheck.as_ref().filter(|r| !r.of_memory).map_or(self.floor, |r| r.floor);
        (learned.then_some(floor), (self.ceiling < self.cap).then_some(self.ceiling))
    }

    /// After holding a converged level for a while, tries the one above (a
    /// capacity that dropped may have come back), under a ceiling assumed
    /// at `probe_gain` times the old one (see `Site::healthy` for what
    /// reaching it means).
    pub fn maybe_reprobe(&mut self, now: Time) -> bool {
        let Some(since) = self.holding_since else { return false };
        let Some(run) = self.dist.as_ref().map(Distribution::mean) else { return false };
        if now < since + self.rules.reprobe_after * run || self.window >= self.cap {
            return false;
        }
        self.holding_since = None;
        self.ceiling = (self.ceiling.max(self.floor) * self.rules.gain).min(self.cap);
        self.ceiling_assumed = true;
        self.window = (self.floor * self.ceiling).sqrt().max(self.floor + 1.0).min(self.cap);
        self.new_test(now);
        true
    }

    /// When this site next needs looking at.
    pub fn next_check(&self, now: Time) -> Option<Time> {
        let mut next: Option<Time> = None;
        let mut at = |t: Time| next = Some(next.map_or(t, |n: Time| n.min(t)));
        if let Some(d) = &self.dist {
            // A draining site is looked at again when a job ends there, or
            // when its verdict's test may prove more.
            if self.running > 0 && self.ready() && (!self.draining || self.proven.is_some()) {
                at(self.next_eval.max(now + (d.mean() / EVALS).max(1.0) * 0.1));
            }
            if let Some(since) = self.holding_since {
                at((since + self.rules.reprobe_after * d.mean()).max(now + 1.0));
            }
        }
        if let (Some(first), false) = (self.first_submit, self.any_started) {
            if !self.idle.is_empty() {
                at((first + self.idle_timeout).max(now + 1e-3));
                // A site that starts nothing sends no events, but its wait
                // grows with the waiting: look again each time it doubles, so
                // routing and the tail see it (O(log) looks, not a poll).
                at((first + 2.0 * (now - first)).max(first + START_NEWS).max(now + 1.0));
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
            self.closed_until = Some(now + 2.0 * self.idle_timeout);
            self.first_submit = None;
            self.window = 1.0;
        }
        timed_out
    }

    /// The attempts' outcomes, scaled to at most a test sample (`SAMPLE`)
    /// with their ratio kept: the failure rate starts where it was, and
    /// each run's own attempts outweigh the past within a sample.
    fn attempts_to_remember(&self) -> Option<(u64, u64)> {
        let attempts = self.successes + self.failures;
        let sample = SAMPLE as u64;
        let scaled = |k: u64| {
            if attempts > sample {
                (k as f64 * sample as f64 / attempts as f64).round() as u64
            } else {
                k
            }
        };
        (attempts > 0).then(|| (scaled(self.successes), scaled(self.failures)))
    }

    /// What the next run should start from.
    pub fn memory(&self, now: Time) -> SiteMemory {
        let first_cohorts;
        let baseline = match &self.recheck {
            // A floor whose check is still under way is remembered with its
            // own baseline, not with the few runs below it so far.
            Some(Recheck { baseline: Some((dist, _)), .. }) => Some(dist),
            _ if !self.ready() => None,
            // The first cohort's tail is made heavy for its tests only
            // (`UNSEEN_Z`); the next run tests from the runs as they were.
            _ if self.floor_is_first_windows() => {
                first_cohorts = Distribution::estimate_with_unseen_error(&self.sample_at(now), 0.0);
                first_cohorts.as_ref().or(self.dist.as_ref())
            }
            _ => self.dist.as_ref(),
        };
        // A capacity kept from before the tail predates any re-probe there.
        let (capacity, ceiling, ceiling_assumed) = match self.remembered {
            Some((floor, ceiling)) => (floor, ceiling, false),
            None => {
                let (floor, ceiling) = self.capacity_memory();
                (floor, ceiling, self.ceiling_assumed && ceiling.is_some())
            }
        };
        let (runtime_quantiles, runtime_range) = baseline.map(|d| d.to_remember(16)).unzip();
        SiteMemory {
            capacity,
            ceiling,
            ceiling_assumed,
            baseline_runtime: baseline.or(self.dist.as_ref()).map(Distribution::mean),
            runtime_range: runtime_range.flatten(),
            runtime_quantiles,
            mean_wait: self.waits.mean(now),
            attempts: self.attempts_to_remember(),
            unresponsive: !self.any_started && self.waits.exposure(now) > 0.0,
        }
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
    fn the_scale_range_follows_the_baselines_standard_error() {
        let z = normal_upper_quantile(0.001);
        assert!((z - 3.09).abs() < 0.01, "{z}");
        let top = |d: &Distribution| scales_for(Some(d), z)[SCALES.len() - 1] - 1.0;
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
        assert_eq!(scales_for(Some(&narrow), z), SCALES);
    }
}
