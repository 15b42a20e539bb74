//! One site's estimator and controller: the bookkeeping behind the rules of
//! the parent module's docs, stated in full in this module's children
//! (their reasoning: `docs/adaptive.md`).
//!
//! **The phases in full** (the diagram is the parent module's):
//! - *Testing*: a test runs at the window. Until the first verdict the
//!   window is the first one (`searched` false: the floor is a guess, not
//!   knowledge), and that verdict is its runs, taken healthy. After it, a
//!   test weighs a probe above the floor, or the floor itself after a cut.
//!   Healthy and not converged: Testing again at the next probe; healthy and
//!   converged: Holding, or Draining to check the floor below where it is
//!   the first window's; degraded: Draining.
//! - *Draining* (after a degraded verdict, carrying what it proved: the
//!   level judged, the least slowdown proven and the likeliest one, by
//!   which jobs still running past the window are moved in the tail; or a
//!   first window found slow, proving none, whose jobs past the window are
//!   then left to end): jobs run past the window and none starts; no new
//!   test begins, but the verdict's test goes on and a larger slowdown it
//!   proves cuts deeper. It may carry a level under suspicion and what is
//!   suspect there (`Suspect`): the floor itself (a probe proved thrash,
//!   the first window was slow, or the search converged on it), or
//!   memory's run times (a remembered level ran degraded; with the ceiling
//!   memory knew, to come back should they prove another job's). Drained
//!   with a suspect: Rechecking; without: Testing.
//! - *Rechecking* (carrying the suspect and, once drained, its baseline set
//!   aside): the runs at the level below are learned afresh. A suspect
//!   floor is settled by `recheck`'s check below (its sequential test
//!   against the floor's baseline): its runs slowed (the level below is the floor, its first
//!   window) or not (the old floor is back). Memory's run times are settled
//!   once the fresh runs are ready, by the two means: another job's
//!   (memory's floor is back under memory's ceiling: Holding where that
//!   converges) or not. Then Testing.
//! - *Holding* (since a time): the search converged, the level is held and
//!   watched (healthy verdicts change nothing); degraded: Draining; after
//!   `reprobe_after` mean runs, the level above is tried: Testing.
//!
//! A first cohort given up on (`restart_below`) starts the site again lower
//! in the phase it is in, less any suspect (Rechecking becomes Testing).
//! Facts that hold across phases stay on the site, each saying why:
//! whether the floor is knowledge (`searched`: a remembered level without
//! run times may be held and still await its first cohort's verdict),
//! whether the site is down or given up until a time (closing overlays
//! any phase: running jobs still end and are judged), the level whose
//! baseline no verdict compared with a level below (the floor moves past
//! it and back in any phase) and when the first cohort's runs became the
//! baseline (its jobs end in any phase), whether the ceiling is a
//! re-probe's assumption (through the re-probe's tests, or held from
//! memory), how long the last probe took (the next may follow a hold),
//! and what this run made of memory (its floor came from there, its run
//! times were checked, what the tail is to leave the next run).

use super::runtime::{Distribution, Exposure, Observation, Testimony, READY_UNSEEN, SAMPLE};
use crate::policy::book::TimeKey;
use crate::policy::plan::SiteModel;
use crate::policy::{JobId, SiteMemory, Time};
use std::collections::{BTreeMap, BTreeSet};

mod controller;
mod estimator;
mod memory;
#[cfg(test)]
mod phase_tests;
mod recheck;

pub use controller::{SILENT_PAST, SPEED_QUANTILE};
use estimator::*;
pub use estimator::{normal_upper_quantile, Waits};
use recheck::{Recheck, Suspect};

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
    pub scale_z: f64,
}

/// What is known of a site's knee, each bound where one is known: what a
/// warm run is to start from.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Bounds {
    /// The highest level known healthy.
    floor: Option<f64>,
    /// The lowest level seen degraded (or a re-probe's assumption).
    ceiling: Option<f64>,
}

/// Seconds HTCondor-G may take to report that a grid job started or ended:
/// the gridmanager polls a remote site every
/// `GRIDMANAGER_JOB_PROBE_INTERVAL` (60 s by default). Taken at the default
/// for every site, also where its own poll is known shorter: what it guards
/// (a baseline judged slow against the other sites', a wait judged long)
/// compares sites whose polls may differ.
const START_NEWS: f64 = crate::policy::DEFAULT_GRID_POLL;

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

/// Where a site's controller is; the parent module's docs draw the diagram.
/// Each phase holds what only it needs; what holds across phases (the floor
/// and the ceiling and what is known of them, whether the site is closed,
/// what this run made of memory) stays on [`Site`], each field saying why.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
enum Phase {
    /// A test runs at the window: the first window's (whose runs become
    /// the baseline; `searched` is false until then), a probe above the
    /// floor, or the floor itself after a cut.
    Testing,
    /// After a degraded verdict (or a first window found slow): jobs run
    /// past the window, none start, and no new test begins until they are
    /// gone. The verdict's own test goes on (`refine`).
    Draining {
        /// What the verdict proved, which the same test's evidence may
        /// still raise; none where no test proved anything (a first window
        /// found slow).
        proven: Option<Proven>,
        /// What is to be checked once drained ([`Suspect`]: a floor, or
        /// memory's run times).
        recheck: Option<Recheck>,
    },
    /// Drained below a level under suspicion ([`Suspect`]): the runs at the
    /// level below are learned afresh, then compared.
    Rechecking(Recheck),
    /// The search converged at the floor: the level is held and watched
    /// for a drop, and re-probed `reprobe_after` mean runs after `since`.
    Holding { since: Time },
}

/// What a degraded verdict proved, while the site drains after it.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Proven {
    /// The level judged.
    level: f64,
    /// The least slowdown proven there, as an index into [`STRETCH`].
    k: usize,
    /// The most likely slowdown then: what a job still running past the
    /// window is expected to suffer (the proven one, the least, is what
    /// the window is cut by).
    likeliest: f64,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Site {
    pub name: String,
    /// Most jobs that may be out here (slots, operator cap).
    pub cap: f64,
    pub idle_timeout: f64,
    rules: Rules,
    /// Seconds between the polls that tell of this site's starts and ends
    /// ([`crate::policy::SiteInfo::poll_period`]): a run's stamps lie up to
    /// one after its events, the same lag for every job started at one
    /// poll, so a cohort's runs may all read that much longer or shorter
    /// than the baseline's with nothing changed ([`scales_for`]).
    #[serde(default)]
    pub poll_period: f64,
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
    sample_runs: Vec<SampleRun>,
    levels: Vec<(Time, u32)>,
    pub dist: Option<Distribution>,
    /// Jobs to keep running.
    pub window: f64,
    /// Highest level known healthy.
    pub floor: f64,
    /// Lowest level seen degraded (`cap` while none).
    pub ceiling: f64,
    /// A test reached a verdict here (or memory said so): the floor is
    /// knowledge, not the initial guess. Not a phase: a level remembered
    /// without run times may be held while its first verdict is awaited,
    /// and a first cohort given up on (`restart_below`) awaits it in any.
    pub searched: bool,
    /// The floor came from memory: knowledge to keep even where this run
    /// reaches no verdict (see `remember`, a floor without run times). How
    /// the run began, read only when it is remembered: no phase's.
    floor_remembered: bool,
    test: Test,
    /// Where the controller is: testing, draining, rechecking or holding.
    phase: Phase,
    runs: BTreeMap<JobId, Run>,
    by_start: BTreeSet<(TimeKey, JobId)>,
    pub running: u32,
    /// When Θ was last brought up to date.
    last: Time,
    pub first_submit: Option<Time>,
    pub any_started: bool,
    /// HTCondor reports the grid resource down (026, no 027 yet). Closing
    /// overlays a phase, not replaces it: jobs running there still end and
    /// are judged, and the controller is where it was when the site reopens.
    pub down: bool,
    /// Given up as unresponsive until then (then one probe job); an
    /// overlay as `down` is, and either may hold without the other.
    pub closed_until: Option<Time>,
    /// A job ran to its end here (succeeded, or failed on its own) since
    /// the site was last given up: a site that holds jobs for a cause of
    /// its own is given up only while this is false.
    pub ran_to_end: bool,
    /// Jobs of the run not done yet (waiting in the pool or out anywhere),
    /// as of the last look at the site.
    pub left: f64,
    /// The test is evaluated no more often than every `EVALS` of a run time.
    next_eval: Time,
    /// The verdicts not told yet (`Adaptive::tell` takes them): when, what,
    /// and the window each left.
    pub verdicts: Vec<(Time, Verdict, f64)>,
    /// The floor and ceiling to remember, kept from before the first
    /// verdict on the floor once the pool was empty (see
    /// [`Site::check_in_tail`]). The tail is a time of the run, not a phase:
    /// a site may be in any when every job has been sent.
    tail_memory: Option<Bounds>,
    /// The level the healthy baseline was learned at while no verdict has
    /// compared it with a level below (the first cohort's, taken healthy,
    /// or the level below a floor whose runs proved slowed). A fact of the
    /// baseline, not a phase: the floor rises past it and is cut back under
    /// it in any phase, and is the first window's again there.
    unchecked_baseline: Option<f64>,
    /// When the first cohort's runs became the baseline (the first
    /// verdict): jobs started before it are that cohort (see
    /// [`Site::ended`] on the ones that outlive it), in whatever phase the
    /// site is in when they end.
    baseline_taken_at: Option<Time>,
    /// How many of our jobs the first cohort's runs saw running, as a job
    /// saw it ([`Site::level_run`]), when they became the baseline: fewer
    /// than its window where waits spread their starts. A fact of the
    /// baseline, kept through a check of its floor from below.
    baseline_level: Option<f64>,
    /// The ceiling is a re-probe's assumption (`probe_gain` × the knee held),
    /// not a level seen degraded (see [`Site::maybe_reprobe`]). A fact of
    /// the ceiling: it holds through a re-probe's tests, and memory may
    /// start a site held under an assumed ceiling.
    ceiling_assumed: bool,
    /// How long the last probe took from its start to a healthy verdict:
    /// how soon the next one's jobs must start to be judged with it. Kept
    /// across phases: the next probe may come after a hold and a re-probe.
    probe_took: Option<f64>,
    /// This run's own runs were compared with memory's (`check_memory`):
    /// once per run, whatever phase follows.
    memory_checked: bool,
    /// How many times faster a check below proved the floor's runs than
    /// the ceiling's, while the floor awaits its first verdict (see
    /// [`Site::settle_recheck`]): a fact of the floor's baseline, read once
    /// that baseline is ready, in whatever phase the site is then.
    faster_than_ceiling: Option<f64>,
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
            poll_period: 0.0,
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
            phase: Phase::Testing,
            probe_took: None,
            runs: BTreeMap::new(),
            by_start: BTreeSet::new(),
            running: 0,
            last: 0.0,
            first_submit: None,
            any_started: false,
            down: false,
            closed_until: None,
            ran_to_end: false,
            left: f64::INFINITY,
            next_eval: 0.0,
            verdicts: Vec::new(),
            tail_memory: None,
            unchecked_baseline: Some(initial),
            baseline_taken_at: None,
            baseline_level: None,
            ceiling_assumed: false,
            memory_checked: false,
            faster_than_ceiling: None,
        };
        if let Some(m) = memory {
            site.remember(m);
        }
        site
    }

    fn converged(&self) -> bool {
        self.ceiling <= self.floor * (1.0 + self.rules.precision) || self.floor >= self.cap
    }

    /// Whether the search converged and the level is held.
    pub fn holding(&self) -> bool {
        matches!(self.phase, Phase::Holding { .. })
    }

    fn draining(&self) -> bool {
        matches!(self.phase, Phase::Draining { .. })
    }

    /// The floor or memory under suspicion, while draining toward its
    /// check or checking it.
    fn recheck(&self) -> Option<&Recheck> {
        match &self.phase {
            Phase::Draining { recheck, .. } => recheck.as_ref(),
            Phase::Rechecking(recheck) => Some(recheck),
            Phase::Testing | Phase::Holding { .. } => None,
        }
    }

    /// The floor under suspicion, checked from the level below, if any.
    pub fn floor_checked(&self) -> Option<f64> {
        self.recheck().filter(|r| r.suspect == Suspect::Floor).map(|r| r.floor)
    }

    pub fn closed(&self, now: Time) -> bool {
        self.down || self.closed_until.is_some_and(|t| now < t)
    }
}
