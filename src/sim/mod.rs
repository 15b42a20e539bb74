//! The simulated grid: the site model of `shared/scenarios/README.md`
//! ([`model`]), run in virtual time as a backend of the real engine
//! ([`backend`]), and the measurements the bench reports ([`metrics`]).
//! [`shared`] lets several runs drive one site's model at once, in scaled
//! real time (the daemon's in-process grid).
//!
//! A simulated run is the engine's own run — coordinator, one task per site,
//! the policy — under a current-thread tokio runtime with a paused clock, so
//! simulated hours take milliseconds and a run is a deterministic function of
//! (scenario, policy, seed). No real I/O happens inside a run: under a paused
//! clock, pending real I/O would let time jump ahead.
//!
//! Only the oracle gets the true site parameters ([`crate::policy::Truth`]);
//! every other policy sees what HTCondor would show: slot counts and events.

pub mod backend;
pub mod metrics;
pub mod model;
pub mod shared;
pub mod waste;

pub use metrics::TypeMetrics;
pub use metrics::{JobRecord, Metrics, SiteMetrics};
pub use model::{
    job_work, jobs, site_seed, AttemptId, Capacity, JobType, ModelEvent, Scenario, SiteParams, SiteSim,
};

use crate::engine::{
    self, Ending, EngineOptions, NullObserver, Observer, RunClock, TraceEntry, TraceRecorder,
};
use crate::policy::{
    self, CapacityMemory, Decision, JobTypes, Policy, PolicyConfig, RunSpec, SiteId, SiteInfo, Truth,
    TypeTruth,
};
use backend::SimSite;
use metrics::{AttemptRecord, Ledger, Measured};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Attempts a job gets in a simulated run: enough that no p_fail of the
/// scenarios gives a job up (0.1^20 is never).
pub const SIM_MAX_ATTEMPTS: u32 = 20;

/// Knobs of one simulated run.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Record every decision (for `--trace` and determinism checks).
    pub trace: bool,
    /// Warm-start knowledge handed to the policy.
    pub memory: CapacityMemory,
    /// Simulated seconds after which an unsettled run is a hang.
    pub horizon: f64,
    /// Tell the policy every job is of one kind (`--blind-types`); the
    /// sites still run each job as its kind. A policy built by the caller
    /// ([`run_built`]) is told what the caller told it.
    pub blind_types: bool,
    /// Keep every attempt's record in [`SimResult::attempts`], for tests
    /// that look at them: memory in proportion to the attempts, which a
    /// policy that takes back unstarted jobs multiplies. The metrics and
    /// the conservation checks never need them.
    pub keep_attempts: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            trace: false,
            memory: CapacityMemory::new(),
            horizon: 30.0 * 86400.0,
            blind_types: false,
            keep_attempts: true,
        }
    }
}

/// Everything one simulated run produced.
#[derive(Clone, Debug)]
pub struct SimResult {
    pub metrics: Metrics,
    /// The successful attempt of every job that finished, in job order.
    pub jobs: Vec<JobRecord>,
    /// Every attempt at every site, site by site in submission order, if
    /// [`SimOptions::keep_attempts`].
    pub attempts: Vec<AttemptRecord>,
    /// The actions, when [`SimOptions::trace`] was set.
    pub trace: Vec<TraceEntry>,
    /// What the policy explained of itself (windows, capacities found,
    /// verdicts), when [`SimOptions::trace`] was set.
    pub decisions: Vec<Decision>,
    /// What the policy learned (for the next, warm run).
    pub learned: CapacityMemory,
    /// The run did not settle before the horizon.
    pub hang: bool,
    /// Violated conservation rules (a bug in a policy, the engine or the sim).
    pub errors: Vec<String>,
    /// Site events simulated (submissions, starts, ends, removals).
    pub events: u64,
    /// Times the policy was handed an input (events and its own deadlines):
    /// a policy that polls shows here.
    pub wakeups: u64,
}

/// Whether a policy woken `wakeups` times for `events` site events was
/// polled rather than woken by what it waits for. It is woken by events and
/// by deadlines that each stand for something due: the model tests' grids
/// wake it fewer than five times per site event, so ten leaves room and
/// still catches a deadline that keeps coming due.
pub fn woken_too_often(wakeups: u64, events: u64) -> bool {
    wakeups > 10 * events + 1000
}

/// What a policy may know of a scenario: each job's kind, the sites' names,
/// the slot counts declared and how often their events are polled.
pub fn run_spec(scenario: &Scenario, memory: CapacityMemory) -> RunSpec {
    let names: Vec<String> = scenario.types.iter().map(|t| t.name.clone()).collect();
    let kinds = model::interleave(&scenario.types.iter().map(|t| t.n_jobs).collect::<Vec<_>>());
    let types = match JobTypes::new(names.clone(), kinds) {
        Ok(types) => types,
        Err(e) => unreachable!("a scenario's kinds are valid once parsed: {e}"),
    };
    RunSpec {
        n_jobs: scenario.n_jobs(),
        types,
        sites: scenario
            .sites
            .iter()
            .map(|s| SiteInfo {
                slots: Some(s.declared()),
                poll_period: s.poll_period,
                ..SiteInfo::named(s.name.clone())
            })
            .collect(),
        // A kind is remembered under its type name: `bench --warm` hands
        // each kind what the cold pass learned of it.
        kind_keys: names,
        memory,
        max_attempts: SIM_MAX_ATTEMPTS,
    }
}

/// What only the oracle may know of a scenario.
pub fn truth(scenario: &Scenario) -> Truth {
    let names = scenario.type_names();
    Truth {
        sites: scenario.sites.iter().map(|s| s.truth_for(&names)).collect(),
        base_runtime: scenario.base_runtime(),
        types: scenario
            .types
            .iter()
            .map(|t| TypeTruth { base_runtime: t.base_runtime, load: t.load })
            .collect(),
    }
}

/// Runs one (scenario, policy, seed) to the end in virtual time, on a fresh
/// current-thread runtime with a paused clock. Must not be called from inside
/// a tokio runtime (use [`run_async`] there).
pub fn run(scenario: &Scenario, config: &PolicyConfig, seed: u64, opts: &SimOptions) -> SimResult {
    in_virtual_time(run_async(scenario, config, seed, opts))
}

/// [`run_policy`] for a policy the caller built (a site's own settings, a
/// wrapped policy), the same way [`run`] does.
pub fn run_built(scenario: &Scenario, policy: Box<dyn Policy>, seed: u64, opts: &SimOptions) -> SimResult {
    in_virtual_time(run_policy(scenario, policy, seed, opts))
}

fn in_virtual_time(run: impl std::future::Future<Output = SimResult>) -> SimResult {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread tokio runtime can be built");
    runtime.block_on(run)
}

/// [`run`] inside a runtime the caller made; it must have a paused clock, or
/// the run takes real time.
pub async fn run_async(
    scenario: &Scenario,
    config: &PolicyConfig,
    seed: u64,
    opts: &SimOptions,
) -> SimResult {
    let mut spec = run_spec(scenario, opts.memory.clone());
    let mut truth = truth(scenario);
    if opts.blind_types {
        spec.types = spec.types.blind();
        spec.kind_keys = vec![spec.types.name(policy::JobTypeId(0)).to_string()];
        truth = truth.blind();
    }
    let policy = match policy::build(config, &spec, Some(&truth)) {
        Ok(p) => p,
        Err(e) => unreachable!("the simulator always gives the truth: {e}"),
    };
    run_policy(scenario, policy, seed, opts).await
}

/// [`run_async`] with a policy the caller built for [`run_spec`] of
/// `scenario` (a test may wrap one to watch or check it).
pub async fn run_policy(
    scenario: &Scenario,
    mut policy: Box<dyn Policy>,
    seed: u64,
    opts: &SimOptions,
) -> SimResult {
    let (kinds, work) = jobs(scenario, seed);
    let (kinds, work) = (Arc::new(kinds), Arc::new(work));
    let clock = RunClock::starting_at(0.0);
    let ledger =
        Arc::new(Mutex::new(Ledger::new(scenario.n_jobs(), scenario.sites.len(), opts.keep_attempts)));
    let backends: Vec<SimSite> = scenario
        .sites
        .iter()
        .enumerate()
        .map(|(i, params)| {
            let sim = SiteSim::with_types(params, &scenario.types, site_seed(seed, i));
            SimSite::new(i as u32, sim, clock, work.clone(), ledger.clone()).with_kinds(kinds.clone())
        })
        .collect();
    let engine_opts = EngineOptions { horizon: opts.horizon, history: Vec::new(), restored: false };
    let mut recorder = TraceRecorder::default();
    let stop = CancellationToken::new();
    let mut watchdog = Watchdog {
        inner: if opts.trace { &mut recorder } else { &mut NullObserver },
        stop: stop.clone(),
        last_now: f64::NEG_INFINITY,
        same_instant: 0,
        tripped: false,
        wakeups: 0,
        went_back: None,
    };
    let report = engine::run(policy.as_mut(), backends, clock, engine_opts, &mut watchdog, stop).await;
    let (livelock, wakeups, went_back) = (watchdog.tripped, watchdog.wakeups, watchdog.went_back);
    let hang = report.ending != Ending::Settled;

    let capacities: Vec<Option<f64>> =
        (0..scenario.sites.len()).map(|i| policy.site_view(SiteId(i as u32)).capacity).collect();
    let ledger = std::mem::replace(&mut *ledger.lock().expect("ledger lock"), Ledger::new(0, 0, false));
    let Measured { metrics, jobs, attempts, mut errors, events } =
        ledger.finish(scenario, &kinds, &capacities, policy.book(), hang, report.stopped_at);
    if livelock {
        errors.push(format!(
            "stopped at t = {:.1} s: the policy was woken {LIVELOCK_WAKEUPS} times without virtual time \
             advancing (a deadline that is always due?)",
            report.stopped_at
        ));
    }
    if let Some((later, earlier)) = went_back {
        errors.push(format!("the policy was handed t = {earlier} s after t = {later} s (time went back)"));
    }
    SimResult {
        metrics,
        jobs,
        attempts,
        trace: recorder.entries,
        decisions: recorder.decisions,
        learned: policy.learned(),
        hang,
        errors,
        events,
        wakeups,
    }
}

/// Reads a scenarios file (`[scenarios.NAME]` tables) in file order. Errors
/// name the file, the line and the scenario.
pub fn load_scenarios(path: &Path) -> Result<Vec<(String, Scenario)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read the scenarios file: {e}", path.display()))?;
    parse_scenarios(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the text of a scenarios file; see [`load_scenarios`].
pub fn parse_scenarios(text: &str) -> Result<Vec<(String, Scenario)>, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        scenarios: std::collections::BTreeMap<String, model::ScenarioText>,
    }
    let file: File = toml::from_str(text).map_err(|e| format!("not a valid scenarios file: {e}"))?;
    // The map comes back sorted; show scenarios in the order the file
    // lists them (its `[scenarios.NAME]` headers), the way people read it.
    let position = |name: &str| {
        text.find(&format!("[scenarios.{name}]"))
            .or_else(|| text.find(&format!("[scenarios.\"{name}\"]")))
            .unwrap_or(usize::MAX)
    };
    let mut texts: Vec<_> = file.scenarios.into_iter().collect();
    texts.sort_by_key(|(name, _)| position(name));
    if texts.is_empty() {
        return Err("no [scenarios.NAME] table".into());
    }
    let mut scenarios = Vec::with_capacity(texts.len());
    for (name, text) in texts {
        let sc = Scenario::try_from(text)
            .and_then(|sc| validate(&sc).map(|()| sc))
            .map_err(|e| format!("scenario {name}: {e}"))?;
        scenarios.push((name, sc));
    }
    Ok(scenarios)
}

fn validate(sc: &Scenario) -> Result<(), String> {
    let typed = sc.types.len() > 1 || sc.types.iter().any(|t| t.name != policy::jobtype::SINGLE_TYPE);
    for (i, t) in sc.types.iter().enumerate() {
        // A scenario of one kind says `n_jobs`; one of several, the kind's.
        let field = |f: &str| {
            if typed {
                format!("type {}: {f}", if t.name.is_empty() { format!("#{i}") } else { t.name.clone() })
            } else {
                f.to_string()
            }
        };
        if typed && t.name.trim().is_empty() {
            return Err(format!(
                "type #{i}: needs a name (what type_speed and the per-type metrics call it)"
            ));
        }
        if sc.types[..i].iter().any(|o| o.name == t.name) {
            return Err(format!("type {}: two types have this name", t.name));
        }
        if t.n_jobs == 0 {
            return Err(format!("{} must be at least 1", field("n_jobs")));
        }
        if !(t.base_runtime > 0.0 && t.base_runtime.is_finite()) {
            return Err(format!("{} must be a positive number of seconds", field("base_runtime")));
        }
        if !(0.0..1.0).contains(&t.jitter) {
            return Err(format!("{} must be in [0, 1)", field("jitter")));
        }
        if !(0.0..=1.0).contains(&t.load) {
            return Err(format!(
                "{} = {} is outside [0, 1]: it is the share of a job's run time spent on the shared resource",
                field("load"),
                t.load
            ));
        }
    }
    if sc.types.len() > usize::from(u16::MAX) {
        return Err(format!("{} types: at most {} are supported", sc.types.len(), u16::MAX));
    }
    if sc.sites.is_empty() {
        return Err("needs at least one site".into());
    }
    for (i, s) in sc.sites.iter().enumerate() {
        let name = if s.name.is_empty() { format!("#{i}") } else { s.name.clone() };
        let bad = |what: &str| Err(format!("site {name}: {what}"));
        if let Err(e) = s.check() {
            return bad(&e);
        }
        for (kind, &factor) in &s.type_speed {
            if !sc.types.iter().any(|t| &t.name == kind) {
                let known = if typed {
                    format!("the scenario's types are {}", sc.type_names().join(", "))
                } else {
                    "the scenario has no `types`".to_string()
                };
                return bad(&format!("type_speed names type {kind:?}, but {known}: name one of them"));
            }
            if !(factor > 0.0 && factor.is_finite()) {
                return bad(&format!("type_speed.{kind} must be > 0 (a factor of the site's speed)"));
            }
        }
        if sc.sites[..i].iter().any(|o| o.name == s.name) {
            return bad("two sites have this name");
        }
    }
    Ok(())
}

/// Wake-ups at one virtual instant after which a run is declared livelocked.
const LIVELOCK_WAKEUPS: u64 = 200_000;

/// Passes everything to the real observer and stops the run if the policy
/// keeps the engine busy without virtual time moving: the engine's horizon
/// only bounds runs whose clock advances.
struct Watchdog<'a> {
    inner: &'a mut dyn Observer,
    stop: CancellationToken,
    last_now: f64,
    same_instant: u64,
    tripped: bool,
    wakeups: u64,
    /// The first time the policy was handed an earlier time than before:
    /// (the later, the earlier).
    went_back: Option<(f64, f64)>,
}

impl Observer for Watchdog<'_> {
    fn action(&mut self, now: f64, action: &policy::Action) {
        self.inner.action(now, action);
    }
    fn event(&mut self, now: f64, site: SiteId, event: &policy::SiteEvent) {
        self.inner.event(now, site, event);
    }
    fn decisions(&mut self, decisions: &[policy::Decision]) {
        self.inner.decisions(decisions);
    }
    fn progress(&mut self, now: f64, policy: &dyn policy::Policy) {
        self.wakeups += 1;
        if now < self.last_now {
            self.went_back.get_or_insert((self.last_now, now));
        }
        if now > self.last_now {
            self.last_now = now;
            self.same_instant = 0;
        } else {
            self.same_instant += 1;
            if self.same_instant >= LIVELOCK_WAKEUPS && !self.tripped {
                self.tripped = true;
                self.stop.cancel();
            }
        }
        self.inner.progress(now, policy);
    }
    fn finished(&mut self, now: f64, policy: &dyn policy::Policy, ending: Ending) {
        self.inner.finished(now, policy, ending);
    }
}
