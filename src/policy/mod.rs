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
//! - A job a site held for a cause of its own is never sent there again,
//!   and one that every site the policy still uses has held is given up
//!   (the [`JobBook`] keeps the bars; the policy says which sites are live).
//! - Actions are deterministic functions of the inputs: iteration over sites and
//!   jobs is in index order, never hash order.
//!
//! Policies: [`bulk`], [`jobrouter`], [`oracle`] (the baselines that judge the
//! others), [`thesis`] (Algorithms 1–3 of the 2013 thesis, read literally),
//! [`htcaas`] (seed 003's dispatch ratios per kind of job) and
//! [`adaptive`] (the default).

pub mod adaptive;
pub mod book;
pub mod bulk;
pub mod htcaas;
pub mod jobrouter;
pub mod jobtype;
pub mod memory;
pub mod oracle;
pub mod plan;
pub mod thesis;
pub mod truth;

use serde::{Deserialize, Serialize};
use std::any::Any;
use std::fmt;

pub use book::{JobBook, JobState};
pub use jobtype::{JobTypeId, JobTypes, KindNumbers};
pub use memory::{CapacityMemory, UNKNOWN_KIND};
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

/// The most jobs one run holds. The job book and the run's records keep a
/// few dozen bytes per job (BENCHMARKS.md, "Limits"): ten times the largest
/// runs cosched is built for, and far below what would exhaust a submit
/// host, whose daemon other users share.
pub const MAX_JOBS: u64 = 10_000_000;

/// Why a run of `n` jobs in all is refused, if it is: more than [`MAX_JOBS`].
pub fn too_many_jobs(n: u64) -> Option<String> {
    (n > MAX_JOBS).then(|| more_jobs_than_a_run_holds(&n.to_string()))
}

/// The refusal of a run of `n` jobs (as written: it may not fit a number).
pub fn more_jobs_than_a_run_holds(n: &str) -> String {
    format!("{n} jobs are more than one run holds ({MAX_JOBS}); split the work into several runs")
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

/// HTCondor's default `GRIDMANAGER_JOB_PROBE_INTERVAL`, seconds: how often a
/// submit host's gridmanager polls a grid site, where nothing says otherwise.
pub const DEFAULT_GRID_POLL: f64 = 60.0;

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
    /// Seconds between the polls by which the submit host learns of its
    /// jobs' starts and ends there: a grid site's, its gridmanager's probe
    /// interval (`GRIDMANAGER_JOB_PROBE_INTERVAL`); 0 where the events are
    /// written as they happen (the local pool). A log stamp lies up to one
    /// poll after the event it records.
    #[serde(default)]
    pub poll_period: f64,
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
            poll_period: 0.0,
        }
    }
}

/// What was learned about one kind of job at one site in earlier runs
/// (warm start; [`memory`] says which of it is the site's).
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
    /// How the site started the jobs waiting there, as a first cohort told:
    /// one by one as room freed (`true`), or together at its matchmaker's
    /// next cycle (`false`); `None` where no cohort told. The site's, not
    /// the kind's.
    #[serde(default)]
    pub starts_one_by_one: Option<bool>,
    /// Attempts there that succeeded and that failed, scaled down to a test
    /// sample's worth so that a site whose failures changed shows it within
    /// a sample (a warm start's failure rate begins here).
    #[serde(default)]
    pub attempts: Option<(u64, u64)>,
    /// Whether the site started nothing at all last time.
    pub unresponsive: bool,
}

/// Everything a policy is constructed from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSpec {
    pub n_jobs: u64,
    /// Each job's kind ([`jobtype`]); one kind unless the run has several.
    pub types: JobTypes,
    pub sites: Vec<SiteInfo>,
    /// Each kind's memory key ([`memory`]), by [`JobTypeId`]: the
    /// fingerprint of its submit description or the name its user gave it
    /// (in the simulator, its type name). Empty: each kind's name is its key.
    pub kind_keys: Vec<String>,
    /// Warm-start knowledge, by site and kind key; empty for a cold start.
    pub memory: CapacityMemory,
    /// How many attempts a job gets before it is reported as failed for good.
    pub max_attempts: u32,
}

impl RunSpec {
    /// The key kind `t`'s memory is kept under ([`RunSpec::kind_keys`]).
    pub fn kind_key(&self, t: JobTypeId) -> &str {
        self.kind_keys.get(t.index()).map_or_else(|| self.types.name(t), String::as_str)
    }
}

/// How one attempt of a job ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// Ran to completion and succeeded.
    Success,
    /// Ran to completion and failed (non-zero exit, signal); `detail` says how.
    Failed { detail: String },
}

/// Whose a hold is: what the job may expect of another site. The backend
/// that reads the hold decides (for HTCondor, `condor::hold_cause` reads its
/// hold reason code); the policy acts on the answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldCause {
    /// Something of the site's: its copy of the input, its executable, its
    /// own policy. Another site may run the job; this one would hold it again.
    Site,
    /// Something of the job's own (the user's hold policy, its memory past
    /// its request): it would follow the job anywhere, so it is a failed
    /// attempt.
    Job,
    /// Not known: a failed attempt, as a job-caused hold is.
    #[default]
    Unknown,
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
    /// The job was put on hold (user log 012); it stays at the site until
    /// removed. `cause` says whether it could run elsewhere.
    Held {
        job: JobId,
        at: Time,
        reason: String,
        #[serde(default)]
        cause: HoldCause,
    },
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
    /// Stop trying this job: it failed `max_attempts` times, or every site
    /// still live held it for a cause of its own.
    GiveUp { job: JobId, why: String },
}

impl Action {
    /// The reason given, for people.
    pub fn why_mut(&mut self) -> &mut String {
        match self {
            Action::Submit { why, .. }
            | Action::Remove { why, .. }
            | Action::Withdraw { why, .. }
            | Action::GiveUp { why, .. } => why,
        }
    }
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
    /// The kind of job it is about (its name, [`JobTypes::name`]) in a run
    /// of several kinds, where each kind has its own window and verdicts at
    /// a site; `None` for the site as a whole (every kind's jobs together,
    /// or the one kind of a run of one). Absent from the JSON when `None`,
    /// so a record of one kind reads as it always did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_kind: Option<String>,
    pub kind: DecisionKind,
}

impl Decision {
    /// A decision about site `site` as a whole.
    pub fn of_site(at: Time, site: SiteId, kind: DecisionKind) -> Decision {
        Decision { at, site, job_kind: None, kind }
    }
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
    /// What this run learned, by site and kind key, to warm-start the next
    /// run.
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

/// Every policy, one line each, in the order `cosched bench` runs and prints
/// them. Adding a policy is its module plus one line here: command lines,
/// sites.toml, `cosched bench`, the daemon and `--help` all read this table.
pub static POLICIES: &[Registered] = &[
    Registered {
        name: "bulk",
        about: "every job at once, split by slots, as plain Condor-G submission does (baseline)",
        params: ParamTable::none(),
        ignores: &[("max_jobs", BULK_WHY), ("max_idle", BULK_WHY), ("initial_window", BULK_WHY)],
        build: Build::Plain(|spec, _| Box::new(bulk::Bulk::new(spec))),
    },
    Registered {
        name: "jobrouter",
        about: "each site held to max_jobs and max_idle, as the HTCondor JobRouter does (baseline)",
        params: ParamTable::of::<jobrouter::Params>(),
        ignores: &[("initial_window", "jobrouter holds each site to max_jobs and max_idle from the start")],
        build: Build::Plain(|spec, p| Box::new(jobrouter::JobRouter::new(spec, p.get()))),
    },
    Registered {
        name: "oracle",
        about: "the best we can do with the true site model in hand (simulation only: the yardstick)",
        params: ParamTable::none(),
        ignores: &[("initial_window", "the oracle knows each site's knee")],
        build: Build::WithTruth(|spec, _, truth| Box::new(oracle::Oracle::new(spec, truth))),
    },
    Registered {
        name: "late-oracle",
        about: "the oracle, told a site's truth at its first end (simulation: a learner's best)",
        params: ParamTable::none(),
        ignores: &[],
        build: Build::WithTruth(|spec, _, truth| {
            Box::new(oracle::Oracle::late(spec, truth, adaptive::Params::default().initial_window))
        }),
    },
    Registered {
        name: "thesis",
        about: "Algorithms 1-3 of the 2013 thesis, read literally",
        params: ParamTable::of::<thesis::Params>(),
        ignores: &[
            ("max_idle", "thesis submits each batch whole (max_jobs caps its size)"),
            ("initial_window", "thesis starts every site at its initial_k"),
        ],
        build: Build::Plain(|spec, p| Box::new(thesis::Thesis::new(spec, p.get()))),
    },
    Registered {
        name: "htcaas",
        about: "seed 003's dispatch ratio per kind of job, moved by the sites' queues (simulation only: baseline)",
        params: ParamTable::none(),
        ignores: &[("max_jobs", HTCAAS_WHY), ("max_idle", HTCAAS_WHY), ("initial_window", HTCAAS_WHY)],
        build: Build::WithTruth(|spec, _, truth| Box::new(htcaas::Htcaas::new(spec, truth))),
    },
    Registered {
        name: "adaptive",
        about: "finds each site's knee by a sequential test and feeds the fastest sites (the default)",
        params: ParamTable::of::<adaptive::Params>(),
        ignores: &[],
        build: Build::Plain(|spec, p| adaptive::build(spec, p.get())),
    },
];

const BULK_WHY: &str = "bulk submits every job at once, as plain condor_submit does";
const HTCAAS_WHY: &str = "htcaas hands every task to its site's queue at once, by its kind's ratio";

/// The policy of a sites.toml without a `[policy]` table, and of one whose
/// table names none.
pub const DEFAULT_POLICY: &str = "adaptive";

/// One policy in [`POLICIES`].
pub struct Registered {
    /// The name on command lines, in sites.toml and in outputs; the built
    /// policy's [`Policy::name`] says the same.
    pub name: &'static str,
    /// One line for `--help` listings.
    pub about: &'static str,
    /// What its `[policy]` table in sites.toml holds.
    pub params: ParamTable,
    /// The `[[site]]` settings of sites.toml (`max_jobs`, `max_idle`,
    /// `initial_window`) it does not honour, each with why: a user who set
    /// one is told before anything is submitted.
    pub ignores: &'static [(&'static str, &'static str)],
    pub build: Build,
}

/// How a registered policy is built from a run's spec and its parameters.
pub enum Build {
    /// From what HTCondor and the operator tell: runs everywhere.
    Plain(fn(&RunSpec, &dyn PolicyParams) -> Box<dyn Policy>),
    /// Also from the true site model, which only the simulator knows: runs
    /// only in `cosched bench`.
    WithTruth(fn(&RunSpec, &dyn PolicyParams, &Truth) -> Box<dyn Policy>),
}

/// A policy's parameters, the `[policy]` table of sites.toml: their defaults
/// and how the table is read.
pub struct ParamTable {
    default: fn() -> Box<dyn PolicyParams>,
    read: fn(toml::de::ValueDeserializer<'_>) -> Result<Box<dyn PolicyParams>, toml::de::Error>,
    out_of_range: fn(&dyn PolicyParams) -> Vec<OutOfRange>,
}

/// A parameter outside the range its meaning allows: its key in the
/// `[policy]` table, and the range, in words.
pub type OutOfRange = (&'static str, &'static str);

/// The ranges a policy's parameters must lie in. sites.toml is checked
/// against them before anything runs, so a policy may rely on them.
pub trait ParamRanges {
    fn out_of_range(&self) -> Vec<OutOfRange>;
}

impl ParamTable {
    /// Parameters of type `P` (its `Default` are the defaults).
    pub const fn of<P>() -> ParamTable
    where
        P: PolicyParams + ParamRanges + Clone + Default + serde::de::DeserializeOwned,
    {
        ParamTable {
            default: || Box::new(P::default()),
            read: |table| Ok(Box::new(P::deserialize(table)?)),
            out_of_range: |params| params.get::<P>().out_of_range(),
        }
    }

    /// No parameters: a `[policy]` table holds only the name.
    pub const fn none() -> ParamTable {
        ParamTable::of::<NoParams>()
    }
}

/// The parameters of a policy that takes none.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

impl ParamRanges for NoParams {
    fn out_of_range(&self) -> Vec<OutOfRange> {
        Vec::new()
    }
}

/// `(key, range)` for each check that fails: the shape every policy's
/// [`ParamRanges`] takes.
pub fn failing(checks: &[(&'static str, bool, &'static str)]) -> Vec<OutOfRange> {
    checks.iter().filter(|(_, ok, _)| !ok).map(|&(key, _, range)| (key, range)).collect()
}

/// Any policy's parameters, behind one type so that [`PolicyConfig`] can
/// carry them whatever the policy.
pub trait PolicyParams: Any + fmt::Debug + Send + Sync {
    fn clone_box(&self) -> Box<dyn PolicyParams>;
    fn same(&self, other: &dyn PolicyParams) -> bool;
}

impl<P: Any + Clone + fmt::Debug + PartialEq + Send + Sync> PolicyParams for P {
    fn clone_box(&self) -> Box<dyn PolicyParams> {
        Box::new(self.clone())
    }
    fn same(&self, other: &dyn PolicyParams) -> bool {
        (other as &dyn Any).downcast_ref::<P>() == Some(self)
    }
}

impl dyn PolicyParams {
    /// The parameters as the type their policy registered.
    ///
    /// # Panics
    /// If they are of another type: [`PolicyConfig`] only ever pairs a
    /// policy with the parameters its own [`ParamTable`] made.
    pub fn get<P: Any>(&self) -> &P {
        (self as &dyn Any).downcast_ref().expect("a policy's parameters are of the type it registered")
    }
}

/// The names of [`POLICIES`], in order, for messages: `bulk, jobrouter, …`.
pub fn names() -> String {
    POLICIES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// A policy and its parameters, as chosen in sites.toml or on the command line.
pub struct PolicyConfig {
    policy: &'static Registered,
    params: Box<dyn PolicyParams>,
}

impl PolicyConfig {
    /// The named policy with default parameters.
    pub fn named(name: &str) -> Option<Self> {
        let policy = POLICIES.iter().find(|p| p.name == name)?;
        Some(PolicyConfig { policy, params: (policy.params.default)() })
    }

    /// The named policy with default parameters, or an error that lists the
    /// policies there are.
    pub fn lookup(name: &str) -> Result<Self, String> {
        Self::named(name).ok_or_else(|| format!("unknown policy `{name}`; choose one of {}", names()))
    }

    /// The named policy with the parameters of its `[policy]` table (without
    /// its `name`). `Ok(None)` for a name that is no policy.
    pub fn read(name: &str, table: toml::de::ValueDeserializer<'_>) -> Result<Option<Self>, toml::de::Error> {
        let Some(policy) = POLICIES.iter().find(|p| p.name == name) else { return Ok(None) };
        Ok(Some(PolicyConfig { policy, params: (policy.params.read)(table)? }))
    }

    /// The parameters outside the ranges their meaning allows.
    pub fn out_of_range(&self) -> Vec<OutOfRange> {
        (self.policy.params.out_of_range)(&*self.params)
    }

    /// Why this policy does not honour the `[[site]]` setting `key` of
    /// sites.toml (`max_jobs`, `max_idle` or `initial_window`), if it does not.
    pub fn ignores(&self, key: &str) -> Option<&'static str> {
        self.policy.ignores.iter().find(|(k, _)| *k == key).map(|(_, why)| *why)
    }

    /// Whether the policy reads the true site model, so runs only in
    /// `cosched bench` (the simulator knows the truth; nothing else does).
    pub fn needs_truth(&self) -> bool {
        matches!(self.policy.build, Build::WithTruth(_))
    }

    pub fn name(&self) -> &'static str {
        self.policy.name
    }

    /// The parameters, if they are of type `P`.
    pub fn params<P: Any>(&self) -> Option<&P> {
        (&*self.params as &dyn Any).downcast_ref()
    }
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig::named(DEFAULT_POLICY).expect("the default policy is registered")
    }
}

impl Clone for PolicyConfig {
    fn clone(&self) -> Self {
        PolicyConfig { policy: self.policy, params: self.params.clone_box() }
    }
}

impl PartialEq for PolicyConfig {
    fn eq(&self, other: &Self) -> bool {
        self.policy.name == other.policy.name && self.params.same(&*other.params)
    }
}

impl fmt::Debug for PolicyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyConfig").field("name", &self.policy.name).field("params", &self.params).finish()
    }
}

/// What only the oracle may know: the true site model (simulation only).
#[derive(Clone, Debug, PartialEq)]
pub struct Truth {
    /// In site order.
    pub sites: Vec<SiteTruth>,
    /// Mean work of a job, seconds at speed 1.
    pub base_runtime: f64,
    /// Each kind of job, in the order of [`RunSpec::types`]; one of load 1
    /// for a run of one kind.
    pub types: Vec<TypeTruth>,
}

impl Truth {
    /// The truth as a policy blind to kinds would take it (`--blind-types`):
    /// every job one kind of load 1, at each site's speed, of the mean work.
    pub fn blind(&self) -> Truth {
        let sites = self.sites.iter().map(|s| SiteTruth { type_speed: Vec::new(), ..s.clone() }).collect();
        let types = vec![TypeTruth { base_runtime: self.base_runtime, load: 1.0 }];
        Truth { sites, base_runtime: self.base_runtime, types }
    }
}

/// What only the oracle may know of one kind of job.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeTruth {
    /// Mean work of a job of this kind, seconds at speed 1.
    pub base_runtime: f64,
    /// Share of its uncontended run time spent on a site's shared resource.
    pub load: f64,
}

/// Builds the configured policy. Fails only for a policy that
/// [`PolicyConfig::needs_truth`] without [`Truth`].
pub fn build(
    config: &PolicyConfig,
    spec: &RunSpec,
    truth: Option<&Truth>,
) -> Result<Box<dyn Policy>, String> {
    let params = &*config.params;
    match (&config.policy.build, truth) {
        (Build::Plain(build), _) => Ok(build(spec, params)),
        (Build::WithTruth(build), Some(truth)) => Ok(build(spec, params, truth)),
        (Build::WithTruth(_), None) => Err(format!(
            "the {} policy needs the true site model: it runs only in simulation",
            config.policy.name
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RunSpec {
        RunSpec {
            n_jobs: 10,
            sites: vec![SiteInfo::named("a"), SiteInfo::named("b")],
            max_attempts: 3,
            ..Default::default()
        }
    }

    fn truth() -> Truth {
        let site = SiteTruth {
            slots: 4,
            wait_mean: 10.0,
            capacity: 4.0,
            beta: 1.0,
            speed: 1.0,
            p_fail: 0.0,
            cap_windows: Vec::new(),
            dead: false,
            type_speed: Vec::new(),
        };
        let types = vec![TypeTruth { base_runtime: 100.0, load: 1.0 }];
        Truth { sites: vec![site.clone(), site], base_runtime: 100.0, types }
    }

    #[test]
    fn every_registered_policy_builds_from_its_name_and_answers_to_it() {
        for registered in POLICIES {
            let config = PolicyConfig::named(registered.name)
                .unwrap_or_else(|| panic!("{} is registered but not found by name", registered.name));
            let policy = build(&config, &spec(), Some(&truth()))
                .unwrap_or_else(|e| panic!("{} does not build with the truth: {e}", registered.name));
            assert_eq!(policy.name(), registered.name, "the built policy calls itself another name");
            assert_eq!(config.name(), registered.name);
            let without_truth = build(&config, &spec(), None);
            assert_eq!(
                without_truth.is_err(),
                config.needs_truth(),
                "{}: built without the truth",
                registered.name
            );
        }
    }

    #[test]
    fn registered_names_are_unique_and_the_default_is_one_of_them() {
        let mut names: Vec<_> = POLICIES.iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), POLICIES.len(), "a policy name is registered twice: {}", super::names());
        assert!(
            PolicyConfig::named(DEFAULT_POLICY).is_some(),
            "the default policy {DEFAULT_POLICY} is not registered"
        );
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_registered_ones() {
        let err = PolicyConfig::lookup("fastest").unwrap_err();
        assert!(err.contains("`fastest`"), "{err}");
        for p in POLICIES {
            assert!(err.contains(p.name), "{err} does not offer {}", p.name);
        }
    }

    #[test]
    fn ignored_settings_name_only_site_keys() {
        for p in POLICIES {
            for (key, _) in p.ignores {
                assert!(
                    ["max_jobs", "max_idle", "initial_window"].contains(key),
                    "{} ignores `{key}`, which is no [[site]] setting",
                    p.name
                );
            }
        }
    }

    #[test]
    fn configs_with_other_parameters_differ() {
        let default = PolicyConfig::named("adaptive").unwrap();
        let table = toml::de::ValueDeserializer::parse("{ initial_window = 3 }").unwrap();
        let changed = PolicyConfig::read("adaptive", table).unwrap().expect("adaptive is registered");
        assert_ne!(default, changed);
        assert_eq!(changed.clone(), changed);
        assert_eq!(changed.params::<adaptive::Params>().map(|p| p.initial_window), Some(3));
        assert_ne!(default, PolicyConfig::named("thesis").unwrap());
    }
}
