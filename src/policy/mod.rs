//! The decision core: what to submit where, and when to give up on a site.
//!
//! Everything here is pure. A policy is a state machine fed with the current
//! time and one [`Input`] at a time; it answers with [`Action`]s and names the
//! next instant it wants to be woken ([`Policy::next_deadline`]). It never reads
//! a clock, touches a file, spawns a process or knows about tokio. That is what
//! lets one policy run unchanged against real HTCondor, the simulated grid in
//! virtual time, and a replay of recorded logs.
//!
//! Besides actions, a policy may explain itself ([`Policy::take_decisions`]:
//! windows, capacities found, degradation verdicts); the run's report draws
//! those over each site's running jobs.
//!
//! Invariants every policy keeps (the engine checks them in debug builds and the
//! simulator checks them after every run):
//! - A job is out at no more than one site at a time; it is only submitted again
//!   after its previous attempt ended, failed, or was confirmed removed.
//! - The number of jobs out never exceeds N (the thesis's `sumOfK`).
//! - Actions are deterministic functions of the inputs: iteration over sites and
//!   jobs is in index order, never hash order.
//!
//! Policies: [`bulk`], [`jobrouter`], [`oracle`] (the baselines that judge the
//! others), [`thesis`] (Algorithms 1–3 of the 2013 thesis, read literally) and
//! [`adaptive`] (the default).

pub mod adaptive;
pub mod book;
pub mod bulk;
pub mod jobrouter;
pub mod oracle;
pub mod plan;
pub mod thesis;
pub mod truth;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

pub use book::{JobBook, JobState};
pub use truth::SiteTruth;

/// Seconds since the start of the run. Real runs map wall-clock log timestamps
/// onto this axis; simulated runs use tokio's paused clock.
pub type Time = f64;

/// Index of a site in the run's site list (the order of `[[site]]` tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SiteId(pub u32);

impl SiteId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Global, stable index of one of the N jobs (0..N-1). A resubmitted job keeps
/// its index, so `$(CoschedJob)` names its outputs the same wherever it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobId(pub u64);

impl fmt::Display for SiteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "site#{}", self.0)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job#{}", self.0)
    }
}

/// What a policy may know about a site before it has run anything there:
/// what HTCondor or the operator tells, never the site's hidden capacity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteInfo {
    pub name: String,
    /// CPU slots available to us, when known (a site's published slot count).
    pub slots: Option<u32>,
    /// Operator cap on our jobs out at this site (idle + running).
    pub max_jobs: Option<u32>,
    /// Operator cap on our idle jobs at this site.
    pub max_idle: Option<u32>,
    /// Remove a job that has been idle this long and send it elsewhere.
    pub idle_timeout: Option<f64>,
    /// Jobs the site starts with: a level the operator knows is below its
    /// knee (adaptive's `initial_window` otherwise). It stands over a
    /// smaller remembered capacity unless a run saw the site degraded at or
    /// below it.
    #[serde(default)]
    pub initial_window: Option<u32>,
}

impl SiteInfo {
    pub fn named(name: impl Into<String>) -> Self {
        SiteInfo {
            name: name.into(),
            slots: None,
            max_jobs: None,
            max_idle: None,
            idle_timeout: None,
            initial_window: None,
        }
    }
}

/// What was learned about one site in earlier runs (warm start).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SiteMemory {
    /// Concurrency at which the site last ran without degradation.
    pub capacity: Option<f64>,
    /// Uncongested run time of one job there, seconds.
    pub baseline_runtime: Option<f64>,
    /// Shortest and longest uncongested run times seen there, seconds (once
    /// enough were seen for the extremes to mean something): where a warm
    /// start's test may trust the remembered distribution, whose quantiles,
    /// taken from a smoothed estimate, reach beyond what was seen.
    #[serde(default)]
    pub runtime_range: Option<(f64, f64)>,
    /// Healthy run-time quantiles at probabilities 0, 1/16, …, 1: the
    /// distribution degradation is judged against from the first job on.
    #[serde(default)]
    pub runtime_quantiles: Option<Vec<f64>>,
    /// Lowest concurrency seen degraded, if any (the search resumes below it).
    #[serde(default)]
    pub ceiling: Option<f64>,
    /// The ceiling was not seen degraded but assumed by a re-probe still
    /// under way (a multiple of the knee held): reached healthy, it is
    /// left, as it would have been in the run that assumed it.
    #[serde(default)]
    pub ceiling_assumed: bool,
    /// Mean queue wait seen there, seconds.
    pub mean_wait: Option<f64>,
    /// Attempts there that succeeded and that failed, scaled down to a test
    /// sample's worth so that a site whose failures changed shows it within
    /// a sample (a warm start's failure rate begins here).
    #[serde(default)]
    pub attempts: Option<(u64, u64)>,
    /// Whether the site started nothing at all last time.
    pub unresponsive: bool,
}

/// Learned site knowledge keyed by site name (names survive edits of the site
/// list; indexes do not).
pub type CapacityMemory = BTreeMap<String, SiteMemory>;

/// Everything a policy is constructed from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSpec {
    pub n_jobs: u64,
    pub sites: Vec<SiteInfo>,
    /// Warm-start knowledge; empty for a cold start.
    pub memory: CapacityMemory,
    /// How many attempts a job gets before it is reported as failed for good.
    pub max_attempts: u32,
}

/// How one attempt of a job ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// Ran to completion and succeeded.
    Success,
    /// Ran to completion and failed (non-zero exit, signal); `detail` says how.
    Failed { detail: String },
}

/// One fact about one of our jobs at one site, as HTCondor would report it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SiteEvent {
    /// `condor_submit` accepted these jobs (they are now idle at the site).
    Submitted { jobs: Vec<JobId>, at: Time },
    /// `condor_submit` did not accept these jobs; they are back in the pool.
    /// `permanent` means retrying the same submission cannot help.
    SubmitFailed { jobs: Vec<JobId>, error: String, permanent: bool },
    /// The job started running (user log 001).
    Started { job: JobId, at: Time },
    /// The attempt ended (user log 005).
    Ended { job: JobId, at: Time, outcome: Outcome },
    /// The job was put on hold (user log 012); it stays at the site until removed.
    Held { job: JobId, at: Time, reason: String },
    /// The job left the queue without finishing (user log 009).
    Removed { job: JobId, at: Time },
    /// A [`Action::Withdraw`] found that the job had already started (or
    /// finished) at the site, so it was left there; it counts as running
    /// from `at` (the moment the backend learned it) until its end is seen.
    WithdrawDeclined { job: JobId, at: Time },
    /// HTCondor reports the site's grid resource down (user log 026): the
    /// gridmanager cannot reach the remote schedd. The job stays queued.
    ResourceDown { job: JobId, at: Time },
    /// The site's grid resource is reachable again (user log 025).
    ResourceUp { job: JobId, at: Time },
}

impl SiteEvent {
    /// The instant the event happened, where the event carries one.
    pub fn at(&self) -> Option<Time> {
        match self {
            SiteEvent::Submitted { at, .. }
            | SiteEvent::Started { at, .. }
            | SiteEvent::Ended { at, .. }
            | SiteEvent::Held { at, .. }
            | SiteEvent::Removed { at, .. }
            | SiteEvent::WithdrawDeclined { at, .. }
            | SiteEvent::ResourceDown { at, .. }
            | SiteEvent::ResourceUp { at, .. } => Some(*at),
            SiteEvent::SubmitFailed { .. } => None,
        }
    }
}

/// Everything that can make a policy act.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Input {
    /// The run begins; the first actions come out of this.
    Start,
    /// Something happened at a site.
    Site { site: SiteId, event: SiteEvent },
    /// The deadline the policy asked for has come.
    Tick,
}

/// What a policy asks the engine to do. `why` is for people: it is printed by
/// `cosched bench --trace`, `cosched replay` and the logs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// Submit these jobs (each in the pool) to a site as one batch.
    Submit { site: SiteId, jobs: Vec<JobId>, why: String },
    /// Remove these jobs (each out at the site) with `condor_rm`, whatever
    /// they are doing: for held jobs, sites given up, cancelled runs, and
    /// (`adaptive`) running jobs that cost throughput where they are (the
    /// youngest past the window of a thrashing site; in the tail, jobs a
    /// site with room would finish sooner).
    Remove { site: SiteId, jobs: Vec<JobId>, why: String },
    /// Take these idle jobs back to place them elsewhere — but only those
    /// HTCondor says have not started: the backend checks each job's real
    /// state first (for grid jobs the local copy may not know yet that the
    /// remote copy runs) and answers [`SiteEvent::WithdrawDeclined`] for a
    /// job it left in place. A started job is never cut short to be moved.
    Withdraw { site: SiteId, jobs: Vec<JobId>, why: String },
    /// Stop trying this job: it failed `max_attempts` times.
    GiveUp { job: JobId, why: String },
}

/// A site's class in the AgTime comparison (thesis Algorithm 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SiteClass {
    #[default]
    Unknown,
    Fast,
    Slow,
    /// Timed out: nothing started there within the idle timeout.
    Unresponsive,
}

impl fmt::Display for SiteClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SiteClass::Unknown => "-",
            SiteClass::Fast => "fast",
            SiteClass::Slow => "slow",
            SiteClass::Unresponsive => "unresponsive",
        })
    }
}

/// What a policy currently believes about one site, for progress displays,
/// `cosched status` and the capacity memory.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SiteView {
    /// Jobs the policy is willing to have out at the site now.
    pub window: u32,
    /// Capacity found by the search, if one has been found.
    pub capacity: Option<f64>,
    pub class: SiteClass,
    /// Mean AgTime (queue wait + run time) of recent jobs, seconds.
    pub agtime: Option<f64>,
}

/// Something a policy decided about a site that its actions do not show: the
/// reasons behind them, for people (the run's report draws them over each
/// site's running jobs). Purely informative: the engine hands them to its
/// observer and nothing steers by them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub at: Time,
    pub site: SiteId,
    pub kind: DecisionKind,
}

/// What was decided (see [`Decision`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DecisionKind {
    /// From now on the site may have `window` jobs out (running or about to);
    /// `capacity` is the concurrency the search has found healthy, if any.
    /// Emitted when either changes, never for a window that stayed the same.
    Window { window: f64, capacity: Option<f64> },
    /// A degradation test concluded: jobs ran healthy, or `slowdown` times
    /// slower, with `level` jobs running.
    Verdict { healthy: bool, level: f64, slowdown: Option<f64> },
}

/// The interface of every scheduling policy.
pub trait Policy: Send {
    /// The name used on command lines and in outputs (`thesis`, `adaptive`, …).
    fn name(&self) -> &'static str;
    /// Feeds one input at `now`; returns what to do, in order.
    fn handle(&mut self, now: Time, input: &Input) -> Vec<Action>;
    /// When the policy next wants an [`Input::Tick`], if ever.
    fn next_deadline(&self) -> Option<Time>;
    /// Where every job is. Every policy keeps one; the engine reads it to know
    /// when the run has settled and to show progress.
    fn book(&self) -> &JobBook;
    /// The policy's current belief about a site.
    fn site_view(&self, site: SiteId) -> SiteView;
    /// What this run learned, to warm-start the next one.
    fn learned(&self) -> CapacityMemory {
        CapacityMemory::new()
    }
    /// The decisions made since the last call, in time order. The engine
    /// calls it after every [`Policy::handle`], so a policy only buffers what
    /// one input decided. Policies without such reasons return nothing.
    fn take_decisions(&mut self) -> Vec<Decision> {
        Vec::new()
    }
    /// The policy's whole state, for [`Policy::restore`] into a policy built
    /// from the same spec and parameters: a week's run resumes from it and
    /// replays only what happened since, not millions of events. `None` for
    /// a policy that keeps none (its run resumes by replaying everything).
    fn checkpoint(&self) -> Option<Vec<u8>> {
        None
    }
    /// Takes the state a [`Policy::checkpoint`] of the same run saved. On an
    /// error the policy is as it was.
    fn restore(&mut self, _saved: &[u8]) -> Result<(), String> {
        Err(format!("policy {} keeps no checkpoint", self.name()))
    }
}

/// Policy names accepted on command lines, in display order.
/// `late-oracle` is the oracle told a site's truth only once a job ended
/// there: the bench's yardstick of what a policy that learns could reach.
pub const POLICY_NAMES: [&str; 6] = ["bulk", "jobrouter", "oracle", "late-oracle", "thesis", "adaptive"];

/// A policy and its parameters, as chosen in sites.toml or on the command line.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyConfig {
    Bulk,
    JobRouter(jobrouter::Params),
    Oracle,
    /// The oracle told a site's truth only once a job has ended there.
    LateOracle,
    Thesis(thesis::Params),
    Adaptive(adaptive::Params),
}

impl PolicyConfig {
    /// The named policy with default parameters.
    pub fn named(name: &str) -> Option<Self> {
        Some(match name {
            "bulk" => PolicyConfig::Bulk,
            "jobrouter" => PolicyConfig::JobRouter(Default::default()),
            "oracle" => PolicyConfig::Oracle,
            "late-oracle" => PolicyConfig::LateOracle,
            "thesis" => PolicyConfig::Thesis(Default::default()),
            "adaptive" => PolicyConfig::Adaptive(Default::default()),
            _ => return None,
        })
    }

    /// Why this policy does not honour the `[[site]]` setting `key` of
    /// sites.toml (`max_jobs`, `max_idle` or `initial_window`), if it does
    /// not: `bulk` stands for plain `condor_submit`, every job at once;
    /// `thesis` submits each batch whole (`max_jobs` caps its size) and
    /// starts every site at its `initial_k`; only `adaptive` learns from a
    /// first window.
    pub fn ignores(&self, key: &str) -> Option<&'static str> {
        match (self, key) {
            (PolicyConfig::Bulk, _) => Some("bulk submits every job at once, as plain condor_submit does"),
            (PolicyConfig::Thesis(_), "max_idle") => {
                Some("thesis submits each batch whole (max_jobs caps its size)")
            }
            (PolicyConfig::Thesis(_), "initial_window") => Some("thesis starts every site at its initial_k"),
            (PolicyConfig::JobRouter(_), "initial_window") => {
                Some("jobrouter holds each site to max_jobs and max_idle from the start")
            }
            (PolicyConfig::Oracle, "initial_window") => Some("the oracle knows each site's knee"),
            _ => None,
        }
    }

    /// Whether the policy reads the true site model, so runs only in
    /// `cosched bench` (the simulator knows the truth; nothing else does).
    pub fn needs_truth(&self) -> bool {
        matches!(self, PolicyConfig::Oracle | PolicyConfig::LateOracle)
    }

    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::Bulk => "bulk",
            PolicyConfig::JobRouter(_) => "jobrouter",
            PolicyConfig::Oracle => "oracle",
            PolicyConfig::LateOracle => "late-oracle",
            PolicyConfig::Thesis(_) => "thesis",
            PolicyConfig::Adaptive(_) => "adaptive",
        }
    }
}

/// What only the oracle may know: the true site model (simulation only).
#[derive(Clone, Debug, PartialEq)]
pub struct Truth {
    /// In site order.
    pub sites: Vec<SiteTruth>,
    /// Mean work of a job, seconds at speed 1.
    pub base_runtime: f64,
}

/// Builds the configured policy. Fails only for the oracle without [`Truth`].
pub fn build(
    config: &PolicyConfig,
    spec: &RunSpec,
    truth: Option<&Truth>,
) -> Result<Box<dyn Policy>, String> {
    Ok(match config {
        PolicyConfig::Bulk => Box::new(bulk::Bulk::new(spec)),
        PolicyConfig::JobRouter(p) => Box::new(jobrouter::JobRouter::new(spec, p)),
        PolicyConfig::Oracle => {
            let truth =
                truth.ok_or("the oracle policy needs the true site model: it runs only in simulation")?;
            Box::new(oracle::Oracle::new(spec, truth))
        }
        PolicyConfig::LateOracle => {
            let truth = truth
                .ok_or("the late-oracle policy needs the true site model: it runs only in simulation")?;
            Box::new(oracle::Oracle::late(spec, truth, adaptive::Params::default().initial_window))
        }
        PolicyConfig::Thesis(p) => Box::new(thesis::Thesis::new(spec, p)),
        PolicyConfig::Adaptive(p) => Box::new(adaptive::Adaptive::new(spec, p)),
    })
}
