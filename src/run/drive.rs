//! One way to drive a run, for `cosched submit` (foreground, fresh or
//! `--resume`) and for `cosched daemon` alike: build the policy (warm-started
//! from what earlier runs learned of its sites and its kind of job, in the
//! memory database: [`crate::state::memory`]) → restore it from
//! the run's checkpoint when it resumes and one fits → rebuild the past and
//! engage one [`CondorSite`] per site → [`engine::run`] → remove forwarded
//! leftovers → keep what the run learned and store how it ended → write its
//! report. What only one of them does is passed in, as in mini-redis's
//! `server::run(listener, shutdown)`: the [`Watcher`] (the foreground's
//! display and messages, the daemon's status), a [`PolicyWrap`] (the
//! daemon's fair share) and the shutdown token (signals, or the daemon's
//! stop).
//!
//! # Why a resume loses and duplicates nothing, even after `kill -9`
//! (`cosched submit --resume`, and a daemon restarted with unfinished runs:
//! both come here with a run whose submissions are recorded.)
//! The state database records, per batch, the *intent* (batch id, jobs, submit
//! file) in a committed transaction *before* `condor_submit` runs, and the
//! cluster (or the failure) after it answers ([`DbJournal`], each site's
//! journal). Every job carries
//! `CoschedRun`/`CoschedBatch` attributes and every event of a site's jobs is
//! in that site's user log. The crash points, in order:
//! 0. Before the run is recorded (the `runs` row is committed before any
//!    `condor_submit` can start): nothing was submitted. `--resume` exits 2
//!    with "nothing to resume: no run was recorded here"; the person (or a
//!    script) starts the run again with `cosched submit`.
//! 1. Before the intent is committed: `condor_submit` never ran. The jobs were
//!    only in cosched's memory; resume sees nothing and they are in the pool.
//! 2. After the intent, before/while/after `condor_submit`, before the cluster
//!    is recorded: the outcome is unknown. A `condor_submit` started by the
//!    dead cosched may still be running (a child outlives `kill -9` of its
//!    parent), so resume first waits until no process has that submit file on
//!    its command line (`history`'s `wait_for_orphans`); after that the
//!    outcome is final. Then: a cluster in the site's user log that no recorded
//!    submission claims belongs to this intent (CondorSite runs one
//!    `condor_submit` at a time per site and resolves it before the next, so
//!    there is at most one unknown intent per site); otherwise `condor_q
//!    -constraint 'CoschedRun == "R" && CoschedBatch == "B"'` is asked; if
//!    neither shows the batch it was never queued (`condor_submit` queues a
//!    cluster in one transaction) and its jobs return to the pool. The outcome
//!    is recorded before anything else happens, so a crash during resume
//!    leaves the same question, answered the same way, next time. If
//!    `condor_q` cannot be asked, resume stops without submitting anything.
//! 3. After the cluster is recorded: nothing is unknown.
//! 4. A `condor_rm` decided but not run, or run but not yet in the log: the
//!    job is still at the site per the log; replay (below) makes the policy
//!    decide again, and the engine carries out replayed decisions that are
//!    still pending (a second `condor_rm` of a gone job is harmless).
//!
//! A schedd that does not answer: `condor_submit` is retried with the same
//! batch file (one intent, one file) and a back-off capped at a minute, the
//! progress shows the site's schedd unreachable, and nothing is counted as
//! queued until `condor_submit` answers. After `[condor] unreachable_timeout`
//! the run stops (exit 1) with the batch still an intent; `--resume` settles
//! it as in point 2.
//!
//! Rebuilding the policy: each site's user log is re-read from byte 0 and
//! turned into events (submit events become `Submitted` for the recorded
//! clusters; the rest mean what they mean live, through the one translation
//! [`crate::condor::site_event`]); each site's events are put in time order
//! (several processes write a log, so an event can land after one stamped
//! later), and the sites' sequences are merged in time order, a
//! resubmission after the end it follows on ties; the policy replays this
//! history before `Start` ([`engine::EngineOptions::history`]). The book only hands out jobs
//! in its pool, and history takes every job that is out out of the pool
//! (`JobBook::apply` accepts a `Submitted` for a pooled job for this), so
//! `Start` cannot submit a job that is already out. Following the logs then
//! continues exactly where the replay stopped.
//!
//! From a checkpoint (`checkpoint`, every `[run] checkpoint_every`
//! real seconds and once more at a clean stop, of policies that keep one, in
//! the foreground and in the daemon alike): the policy and the [`Watcher`]'s tally are restored as they were between two inputs, and only what lies past
//! each site's cursor is replayed: the log from the byte the policy had
//! heard up to, and, from the state database, every batch whose outcome it
//! had not heard (numbered from the cursor's `batches`, or settled just now
//! as in point 2) as a `Submitted` of all its jobs (never from the log's
//! tail, which may hold only a cluster's last submit events). A submit event
//! before the cursor of a batch still unknown is found by reading that
//! site's whole log, as above. The restored book holds decisions taken
//! before the checkpoint that no replayed action names; the engine settles
//! them as it settles replayed ones ([`engine::EngineOptions::restored`]):
//! a job still submitting goes back to the pool, a removal or a withdrawal
//! still pending is asked again. A checkpoint that does not fit (another run,
//! a log shorter than its cursor) is set aside and everything is replayed.
//!
//! Run time: t = 0 is the run's `epoch_unix`. Real HTCondor runs at rate 1;
//! on the fake HTCondor (`--simulate`, or a pool named by `COSCHED_FAKE_POOL`)
//! the log stamps are a virtual wall clock `epoch + (real − epoch) × speedup`,
//! so the engine's clock runs at the pool's speedup from the pool's epoch.
//!

use super::checkpoint::{self, Checkpoint};
use super::decisions;
use super::history;
use super::progress::Progress;
use crate::condor::{remove_forwarded_leftovers, Condor, CondorSite, Reachability};
use crate::config::SitesFile;
use crate::engine::{self, Ending, EngineOptions, Observer, RunClock, SiteCursor};
use crate::policy::{
    self, Action, CapacityMemory, Policy, PolicyConfig, RunSpec, SiteEvent, SiteId, Time, DEFAULT_GRID_POLL,
};
use crate::report::{RunDecisions, SiteDecisions};
use crate::state::{Db, DbJournal, MemoryDb, RunRecord, RunStatus};
use crate::submit_desc::{self, JobKinds};
use crate::sync::Locked;
use crate::Failure;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// A recorded run and what driving it takes.
pub struct Run {
    pub db: Arc<Mutex<Db>>,
    pub record: RunRecord,
    /// Its directory: submit files, user logs, decisions, checkpoint, report.
    pub dir: PathBuf,
    pub sites: SitesFile,
    /// Its kinds of job: each job's kind and each kind's submit description.
    pub kinds: Arc<JobKinds>,
    pub policy: PolicyConfig,
    /// Run seconds per real second.
    pub rate: f64,
    /// Submissions may be recorded: rebuild the past (from the checkpoint,
    /// when one fits) before going on.
    pub resumed: bool,
    /// The memory database the run starts from and adds to
    /// ([`crate::state::memory`]: the user's, or the daemon's); `None`: it
    /// starts cold and keeps nothing.
    pub memory: Option<PathBuf>,
}

impl Run {
    /// Run `record` as it was recorded (its sites file and submit
    /// descriptions as they were, its policy, its clock): how the daemon
    /// drives and resumes its runs. A run with recorded submissions resumes.
    pub fn recorded(
        db: Arc<Mutex<Db>>,
        dir: PathBuf,
        record: RunRecord,
        memory: Option<PathBuf>,
    ) -> Result<Run, Failure> {
        if record.simulate {
            return Err(Failure::usage(format!(
                "run {}: a --simulate run owns its fake pool and cannot be driven by the daemon",
                record.id
            )));
        }
        let (sites, _) = crate::config::parse(&record.sites_path, &record.sites_text).map_err(|e| {
            Failure::failed(format!("run {}: its recorded sites file no longer parses: {e}", record.id))
        })?;
        let mut kinds = Vec::new();
        for kind in &record.kinds {
            let desc = submit_desc::parse(&kind.job_path, &kind.job_text).map_err(|e| {
                Failure::failed(format!(
                    "run {}: the recorded submit description of its kind `{}` no longer parses: {e}",
                    record.id, kind.name
                ))
            })?;
            kinds.push((kind.name.clone(), kind.count, desc));
        }
        let kinds = JobKinds::new(kinds)
            .map_err(|e| Failure::failed(format!("run {}: its recorded kinds of job: {e}", record.id)))?;
        let policy = sites.policy_named(Some(&record.policy)).map_err(Failure::usage)?;
        let rate = if record.speedup > 0.0 { record.speedup } else { 1.0 };
        let resumed = !lock(&db).submissions(&record.id).map_err(state_failure)?.is_empty();
        Ok(Run { db, record, dir, sites, kinds: Arc::new(kinds), policy, rate, resumed, memory })
    }
}

/// Wraps a built policy, given the clock rate (the daemon's fair-share cap).
pub type PolicyWrap = Box<dyn FnOnce(Box<dyn Policy>, f64) -> Box<dyn Policy> + Send>;

/// Watches a run for whoever started it. Its tally of the run's events
/// covers the whole run: a checkpoint keeps it with the policy's state, and
/// a resume restores it from there (or from nothing) and replays the rest
/// into it, so a summary or a status after a restart counts the run's past.
pub trait Watcher: Observer {
    /// The tally of the run's events (only its counts; its display is the
    /// watcher's business).
    fn tally(&mut self) -> &mut Progress;
    /// The run is about to start, or to go on: its past is rebuilt and the
    /// engine is next.
    fn starting(&mut self, _start: &Starting<'_>) {}
}

/// What [`Watcher::starting`] is told.
pub struct Starting<'a> {
    pub record: &'a RunRecord,
    /// The run's sites, in site order.
    pub sites: &'a [String],
    pub resumed: bool,
    pub policy: &'static str,
    /// When the checkpoint the run goes on from was taken (Unix seconds).
    pub checkpoint_unix: Option<f64>,
    /// Events of the past the policy replays first.
    pub replaying: usize,
    /// Submissions whose outcome resume settled: (batch, what became of it).
    pub reconciled: &'a [(String, String)],
    /// Whether each site's schedd answers, in site order.
    pub reachability: &'a [Arc<Reachability>],
}

/// Where sites.toml does not say how often a grid site is polled, the
/// submit host's gridmanager is asked (its `GRIDMANAGER_JOB_PROBE_INTERVAL`),
/// once per run; where it cannot tell, HTCondor's default stands
/// ([`crate::config::SiteConfig::poll_period`]).
async fn ask_grid_polls(sites: &SitesFile, spec: &mut RunSpec) {
    if sites.sites.iter().any(|s| s.grid_resource.is_some() && s.poll_period.is_none()) {
        let said = Condor::new(&sites.condor).config_val(GRID_POLL_SETTING).await;
        take_grid_poll(sites, spec, said.as_deref());
    }
}

const GRID_POLL_SETTING: &str = "GRIDMANAGER_JOB_PROBE_INTERVAL";

/// What `condor_config_val` `said` of the grid poll, given to the grid sites
/// sites.toml leaves it to.
fn take_grid_poll(sites: &SitesFile, spec: &mut RunSpec, said: Option<&str>) {
    let period = match said.map(|v| (v, v.parse::<f64>())) {
        Some((_, Ok(period))) if period.is_finite() && period >= 0.0 => period,
        Some((value, _)) => {
            tracing::warn!(
                "condor_config_val {GRID_POLL_SETTING} said {value:?}, not a number of seconds; \
                 taking {DEFAULT_GRID_POLL} s (set poll_period in sites.toml)"
            );
            return;
        }
        None => {
            tracing::info!(
                "condor_config_val {GRID_POLL_SETTING} told nothing; taking {DEFAULT_GRID_POLL} s"
            );
            return;
        }
    };
    tracing::info!("grid sites are polled every {period} s (condor_config_val {GRID_POLL_SETTING})");
    for (site, info) in sites.sites.iter().zip(&mut spec.sites) {
        if site.grid_resource.is_some() && site.poll_period.is_none() {
            info.poll_period = period;
        }
    }
}

/// How a driven run ended.
pub struct Driven {
    pub ending: Ending,
    /// Jobs that failed on every attempt.
    pub given_up: u64,
    /// Where its report was written, or why it was not (`None`: no user log
    /// to make one from).
    pub report: Option<Result<PathBuf, String>>,
}

/// Drives `run` until it settles, hangs or `shutdown` is cancelled; then
/// stores what it learned and its status, and writes its report from the
/// user logs (also of a run stopped half-way: the report of the logs so
/// far, rewritten when the run ends).
pub async fn run(
    run: Run,
    wrap: PolicyWrap,
    watcher: &mut dyn Watcher,
    shutdown: CancellationToken,
) -> Result<Driven, Failure> {
    let Run { db, record, dir, sites, kinds, policy: config, rate, resumed, memory } = run;
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", dir.display())))?;
    let names: Vec<String> = sites.sites.iter().map(|s| s.name.clone()).collect();
    // Off the runtime's workers: another run may hold the memory database
    // for a moment, and the daemon's runs share those workers.
    let remembered = match memory.clone() {
        Some(path) => {
            let db = db.clone();
            tokio::task::spawn_blocking(move || recall(&db, &path)).await.unwrap_or_default()
        }
        None => CapacityMemory::new(),
    };
    let mut spec = sites.run_spec(record.n_jobs, remembered);
    if !record.simulate {
        ask_grid_polls(&sites, &mut spec).await;
    }
    spec.types = kinds.types().clone();
    spec.kind_keys = kinds.types().ids().map(|t| submit_desc::kind_key(kinds.desc(t))).collect();
    for t in kinds.types().ids() {
        tracing::info!("kind {} is {}", kinds.types().name(t), spec.kind_keys[t.index()]);
    }
    if record.blind_types {
        spec.types = spec.types.blind();
        spec.kind_keys = vec![submit_desc::blind_kind_key(&spec.kind_keys)];
    }
    // Said as the run starts: which memory it reads and writes, and where
    // each kind starts warm (a tester could tell only from decisions.jsonl).
    let kind_keys: Vec<(String, String)> =
        spec.types.ids().map(|t| (spec.types.name(t).to_string(), spec.kind_key(t).to_string())).collect();
    watcher.tally().starts_from(crate::state::memory::MemoryAtStart::new(
        memory.as_deref(),
        &spec.memory,
        &kind_keys,
        &names,
    ));
    let build = || policy::build(&config, &spec, None).map_err(Failure::usage);
    let mut policy = build()?;
    let checkpoints =
        checkpoint::Writer::new(&dir, &record.id, policy.name(), sites.run.checkpoint_every, rate);
    let restored =
        if resumed { restore(&dir, &record.id, &names, policy.as_mut(), watcher.tally()) } else { None };
    if restored.is_none() && resumed {
        // A restore that failed half-way leaves nothing of it behind.
        policy = build()?;
    }
    let mut policy = wrap(policy, rate);
    let cursors = restored.as_ref().map(|c| c.cursors.clone());
    let Engaged { history, reconciled, backends, clock, reachability } =
        engage(&db, &record, &dir, &sites, kinds.clone(), rate, resumed, cursors, shutdown.clone()).await?;
    lock(&db).set_status(&record.id, RunStatus::Running).map_err(state_failure)?;
    watcher.tally().replay(&history);
    if restored.is_some() && kinds.types().several() {
        // Each kind's window per site is not in the tally: a policy tells
        // them again after a replay of the whole run, a restored one only
        // as they change. Those it holds are the last the run recorded.
        let run_dir = dir.clone();
        let told = tokio::task::spawn_blocking(move || last_kind_windows(decisions::read(&run_dir)));
        let told = told.await.unwrap_or_default();
        if !told.is_empty() {
            watcher.decisions(&told);
        }
    }
    watcher.starting(&Starting {
        record: &record,
        sites: &names,
        resumed,
        policy: policy.name(),
        checkpoint_unix: restored.as_ref().map(|c| c.taken_unix),
        replaying: history.len(),
        reconciled: &reconciled,
        reachability: &reachability,
    });
    let options = EngineOptions { history, restored: restored.is_some(), horizon: horizon(&clock) };
    let (ending, at_stop) = {
        let mut steps = Steps {
            inner: watcher,
            reachability,
            epoch_unix: record.epoch_unix,
            rate,
            checkpoints,
            cursors: Vec::new(),
            at_stop: None,
        };
        let mut recording = decisions::Recording::new(&dir, &mut steps);
        let ending =
            engine::run(policy.as_mut(), backends, clock, options, &mut recording, shutdown).await.ending;
        drop(recording);
        (ending, steps.checkpoints.take().zip(steps.at_stop.take()))
    };
    // A clean stop (interrupted, with checkpoints on and a policy that
    // keeps them): the next start goes on from here, not from the last
    // periodic checkpoint (or, with none yet, the whole run's replay).
    if let Some((writer, (cursors, state, tally))) = at_stop {
        let written = tokio::task::spawn_blocking(move || writer.finish(cursors, state, tally)).await;
        match written.unwrap_or_else(|e| Err(format!("the checkpoint writer failed: {e}"))) {
            Ok(path) => {
                tracing::info!("run {}: checkpoint of the stop written to {}", record.id, path.display())
            }
            Err(why) => {
                tracing::warn!("run {}: no checkpoint of the stop ({why}); the last one stays", record.id)
            }
        }
    }
    // The simulated grid has no remote schedds to ask (its condor_q knows
    // no -name), so only a run on a pool of its own looks for forwarded
    // copies.
    if policy.book().out_total() == 0 && !record.simulate {
        // Nothing of the run is at any site (settled, or a cancelled run
        // drained): no remote copy is wanted any more.
        remove_forwarded_leftovers(&Condor::new(&sites.condor), &record.id, &sites.sites).await;
    }
    if let Some(path) = memory {
        let (run, learned) = (record.id.clone(), policy.learned());
        // A panic in there costs the next run its warm start, nothing else.
        let _ = tokio::task::spawn_blocking(move || keep(&path, &run, &learned)).await;
    }
    record_end(&db, &record.id, policy.as_ref(), ending)?;
    let cut_short = watcher.tally().cut_short_by_site();
    // Reading every log takes a while for a big run: off the runtime's
    // workers, which the daemon's other runs share.
    let epoch_unix = record.epoch_unix;
    let kinds = cluster_kinds(&lock(&db), &record.id, &kinds, names.len());
    let written =
        tokio::task::spawn_blocking(move || run_report(&dir, &names, epoch_unix, Some(cut_short), kinds));
    let report = written.await.unwrap_or_else(|e| Some(Err(format!("the report writer failed: {e}"))));
    Ok(Driven { ending, given_up: policy.book().given_up(), report })
}

/// What a checkpoint holds besides its header: each site's cursor, the
/// policy's state and the watcher's tally.
type CheckpointParts = (Vec<SiteCursor>, Vec<u8>, Vec<u8>);

/// What the engine's observer is: the watcher, told which schedds do not
/// answer (on the run's clock) before each progress call, and a checkpoint
/// of the policy with the watcher's tally every `[run] checkpoint_every`
/// and at an interrupted run's end.
struct Steps<'a> {
    inner: &'a mut dyn Watcher,
    reachability: Vec<Arc<Reachability>>,
    epoch_unix: f64,
    rate: f64,
    checkpoints: Option<checkpoint::Writer>,
    /// The cursors of the engine's last checkpoint call: the policy's state
    /// covers exactly them until the next input, and an interrupted run
    /// takes no input after its last call.
    cursors: Vec<Option<SiteCursor>>,
    /// Taken as an interrupted run finished (with checkpoints on), for
    /// [`run`] to write off the runtime.
    at_stop: Option<CheckpointParts>,
}

impl Observer for Steps<'_> {
    fn action(&mut self, now: Time, action: &Action) {
        self.inner.action(now, action);
    }
    fn event(&mut self, now: Time, site: SiteId, event: &SiteEvent) {
        self.inner.event(now, site, event);
    }
    fn decisions(&mut self, decisions: &[crate::policy::Decision]) {
        self.inner.decisions(decisions);
    }
    fn site_unreachable(&mut self, site: SiteId, down: Option<(Time, String)>) {
        self.inner.site_unreachable(site, down);
    }
    fn progress(&mut self, now: Time, policy: &dyn Policy) {
        for (i, r) in self.reachability.iter().enumerate() {
            let down = r.unreachable().map(|(since, e)| ((since - self.epoch_unix) * self.rate, e));
            self.inner.site_unreachable(SiteId(i as u32), down);
        }
        self.inner.progress(now, policy);
    }
    fn checkpoint(&mut self, now: Time, policy: &dyn Policy, cursors: &[Option<SiteCursor>]) {
        self.inner.checkpoint(now, policy, cursors);
        let Some(writer) = &mut self.checkpoints else { return };
        self.cursors.clear();
        self.cursors.extend_from_slice(cursors);
        if !writer.due(now) {
            return;
        }
        let Some(cursors) = cursors.iter().copied().collect::<Option<Vec<_>>>() else { return };
        #[allow(clippy::disallowed_methods)] // reported, not decided on: what a checkpoint costs the run
        let started = std::time::Instant::now();
        match (policy.checkpoint(), Progress::checkpoint(self.inner.tally())) {
            (Some(state), Some(tally)) => {
                let bytes = state.len() + tally.len();
                writer.write(now, cursors, state, tally);
                tracing::debug!("checkpoint of {bytes} bytes taken in {:?}", started.elapsed());
            }
            // A policy that keeps no checkpoint never will.
            _ => self.checkpoints = None,
        }
    }
    fn finished(&mut self, now: Time, policy: &dyn Policy, ending: Ending) {
        // Before the watcher's end, with the state of the last checkpoint
        // call: the engine stopped between two inputs.
        if ending == Ending::Interrupted && self.checkpoints.is_some() {
            let cursors = self.cursors.iter().copied().collect::<Option<Vec<_>>>().filter(|c| !c.is_empty());
            self.at_stop = match (cursors, policy.checkpoint(), Progress::checkpoint(self.inner.tally())) {
                (Some(cursors), Some(state), Some(tally)) => Some((cursors, state, tally)),
                _ => None,
            };
        }
        self.inner.finished(now, policy, ending);
    }
}

/// Of a run's recorded decisions, the last window told of each kind at
/// each site (decisions of a kind only: the site's own window is the
/// policy's to show).
fn last_kind_windows(decided: Vec<policy::Decision>) -> Vec<policy::Decision> {
    let mut last = BTreeMap::new();
    for d in decided {
        if let (policy::DecisionKind::Window { .. }, Some(kind)) = (&d.kind, &d.job_kind) {
            last.insert((d.site, kind.clone()), d);
        }
    }
    last.into_values().collect()
}

/// Jobs of a recorded run that succeeded, counted from its user logs (each
/// job once, by its first successful end): how a finished run is shown after
/// a restart, from the same records its live count came from.
pub fn settled_counts(
    db: &Db,
    run: &RunRecord,
    site_names: &[String],
    run_dir: &Path,
) -> Result<u64, Failure> {
    history::succeeded_jobs(db, &run.id, site_names, run_dir).map(|jobs| jobs.len() as u64)
}

/// A run made ready for the engine, the same way for `cosched submit` and
/// the daemon.
struct Engaged {
    /// What the policy replays before `Start` (empty for a fresh run).
    history: Vec<(SiteId, SiteEvent)>,
    /// Submissions whose outcome resume settled: (batch, what became of it).
    reconciled: Vec<(String, String)>,
    /// One per site, in site order, continuing where the history stops.
    backends: Vec<CondorSite>,
    clock: RunClock,
    /// Whether each site's schedd answers, in site order.
    reachability: Vec<Arc<Reachability>>,
}

/// Rebuilds a resumed run's past (settling the submissions a crash left
/// unknown) and makes one [`CondorSite`] per site. The clock is started
/// after the past is rebuilt, which can take a while (orphaned
/// `condor_submit`s are waited for).
#[allow(clippy::too_many_arguments)]
async fn engage(
    db: &Arc<Mutex<Db>>,
    run: &RunRecord,
    run_dir: &Path,
    sites: &SitesFile,
    kinds: Arc<JobKinds>,
    rate: f64,
    resumed: bool,
    cursors: Option<Vec<SiteCursor>>,
    stop: CancellationToken,
) -> Result<Engaged, Failure> {
    let names: Vec<String> = sites.sites.iter().map(|s| s.name.clone()).collect();
    let condor = Arc::new(Condor::new(&sites.condor));
    let base = history::TimeBase { epoch_unix: run.epoch_unix, rate };
    let past = if resumed {
        let timeout = sites.condor.submit_timeout;
        history::rebuild(db, &run.id, &names, run_dir, &condor, timeout, base, cursors.as_deref()).await?
    } else {
        history::Past { sites: names.iter().map(|_| Default::default()).collect(), ..Default::default() }
    };
    let clock = RunClock::scaled((engine::wall_clock_unix() - run.epoch_unix) * rate, rate);
    let site_names = Arc::new(names);
    let reachability: Vec<Arc<Reachability>> = sites.sites.iter().map(|_| Arc::default()).collect();
    let next_batches = crate::condor::first_free_batches(run_dir);
    let backends = sites
        .sites
        .iter()
        .zip(past.sites)
        .enumerate()
        .map(|(i, (site, start))| {
            let journal = DbJournal::new(db.clone(), run.id.clone(), site_names.clone());
            let backend = CondorSite::new(
                SiteId(i as u32),
                site.clone(),
                kinds.clone(),
                condor.clone(),
                run.id.clone(),
                run_dir.to_path_buf(),
                run.epoch_unix,
                Box::new(journal),
                start.known,
                start.log_offset,
                next_batches.get(&site.name).copied().unwrap_or(0),
            )
            .with_reachability(reachability[i].clone(), stop.clone());
            if rate == 1.0 {
                backend
            } else {
                backend.with_clock(clock)
            }
        })
        .collect();
    Ok(Engaged { history: past.history, reconciled: past.reconciled, backends, clock, reachability })
}

/// Restores `policy` and `tally` from the run's checkpoint, if it has a
/// usable one ([`checkpoint`]). On `None` the tally is as it was, and the
/// policy may be half restored.
fn restore(
    run_dir: &Path,
    run: &str,
    names: &[String],
    policy: &mut dyn Policy,
    tally: &mut Progress,
) -> Option<Checkpoint> {
    let logs: Vec<PathBuf> = names.iter().map(|name| CondorSite::log_path(run_dir, name)).collect();
    let saved = checkpoint::load(run_dir, run, policy.name(), &logs)?;
    // The policy first: a tally that does not take its part is left as it was.
    let restored = policy.restore(&saved.policy_state).and_then(|()| tally.restore(&saved.progress));
    match restored {
        Ok(()) => Some(saved),
        Err(why) => {
            checkpoint::set_aside(&checkpoint::path(run_dir), &why);
            None
        }
    }
}

/// When the engine gives up on jobs nothing starts: its default span from
/// now, not from the run's start, which a resumed run (or one on the fake
/// HTCondor at a high speedup) may be past already.
fn horizon(clock: &RunClock) -> Time {
    clock.now() + EngineOptions::default().horizon
}

/// What earlier runs learned, from the memory database at `path` (first
/// moving there what the state database kept before memory had kinds). A
/// memory that cannot be read is said and the run starts cold: memory only
/// speeds a run up.
fn recall(db: &Arc<Mutex<Db>>, path: &Path) -> CapacityMemory {
    // The state database is held only for its own reads and writes: the
    // daemon's other runs journal through it, while the memory database may
    // make this one wait for another process.
    let recalled = MemoryDb::open(path).and_then(|mut memory| {
        let legacy = lock(db).legacy_memory()?;
        if !legacy.is_empty() {
            let added = memory.import_legacy(&legacy)?;
            lock(db).forget_legacy_memory()?;
            tracing::info!(
                "moved what earlier runs learned of {added} site(s) to {}, as memory of an unknown kind \
                 (what is the site's carries over; no kind takes it as its knee)",
                path.display()
            );
        }
        memory.load()
    });
    recalled.unwrap_or_else(|e| {
        tracing::warn!("cannot read the memory of earlier runs ({e}); this run starts cold");
        CapacityMemory::new()
    })
}

/// Adds what the run learned to the memory database at `path`; a failure is
/// said, not fatal (the run's jobs are done either way).
fn keep(path: &Path, run: &str, learned: &CapacityMemory) {
    if let Err(e) = MemoryDb::open(path).and_then(|mut memory| memory.save(run, learned)) {
        tracing::warn!("cannot keep what this run learned ({e}); the next run starts without it");
    }
}

/// Stores a finished (or stopped) run's final status.
fn record_end(db: &Arc<Mutex<Db>>, run: &str, policy: &dyn Policy, ending: Ending) -> Result<(), Failure> {
    let status = match ending {
        Ending::Settled if policy.book().given_up() == 0 => RunStatus::Done,
        Ending::Settled => RunStatus::Failed,
        Ending::Hang => RunStatus::Hung,
        Ending::Interrupted => RunStatus::Interrupted,
    };
    db.locked().set_status(run, status).map_err(state_failure)
}

/// The kind of each cluster the run submitted, per site in site order
/// (a batch holds one kind); empty maps in a run of one kind, or when the
/// record cannot be read (the report then shows no kinds).
fn cluster_kinds(db: &Db, run: &str, kinds: &JobKinds, n_sites: usize) -> Vec<BTreeMap<i64, String>> {
    let mut out = vec![BTreeMap::new(); n_sites];
    if !kinds.types().several() {
        return out;
    }
    for sub in db.submissions(run).unwrap_or_default() {
        let (crate::state::SubmissionState::Submitted { cluster }, Some(job)) =
            (&sub.state, sub.jobs.first())
        else {
            continue;
        };
        if let Some(site) = out.get_mut(sub.site_index as usize) {
            site.insert(*cluster, kinds.types().name(kinds.types().of(*job)).to_string());
        }
    }
    out
}

/// Writes `run_dir/report` from the run's user logs and recorded decisions,
/// with what the run counted cut short per site where it kept a tally and
/// the kind of each cluster per site; `None` without logs.
fn run_report(
    run_dir: &Path,
    site_names: &[String],
    epoch_unix: f64,
    cut_short: Option<Vec<(u64, f64)>>,
    mut kinds: Vec<BTreeMap<i64, String>>,
) -> Option<Result<PathBuf, String>> {
    let mut logs = Vec::new();
    let mut sites = Vec::new();
    let mut decided = decisions::read(run_dir);
    for (i, name) in site_names.iter().enumerate() {
        let log = run_dir.join(format!("{name}.log"));
        if log.exists() {
            let (theirs, rest) = decided.into_iter().partition(|d| d.site.index() == i);
            decided = rest;
            let counted = cut_short.as_ref().and_then(|c| c.get(i).copied());
            sites.push(SiteDecisions {
                site: name.clone(),
                log: logs.len(),
                decisions: theirs,
                cut_short: counted,
                kinds: kinds.get_mut(i).map(std::mem::take).unwrap_or_default(),
            });
            logs.push(log);
        }
    }
    if logs.is_empty() {
        return None;
    }
    let decisions = RunDecisions { epoch_naive: naive_local(epoch_unix), sites };
    Some(
        crate::report::write_run_report(&logs, &decisions, &run_dir.join("report"))
            .map(|r| r.html)
            .map_err(|e| e.to_string()),
    )
}

/// `unix` on the naive local clock of the user logs' stamps (written in the
/// submit host's local time). The offset is the one at `unix`: a daylight
/// saving change during a run shifts the later decisions by its hour.
fn naive_local(unix: f64) -> f64 {
    use chrono::{Offset, TimeZone};
    let offset = chrono::Local
        .timestamp_opt(unix.floor() as i64, 0)
        .single()
        .map_or(0, |d| d.offset().fix().local_minus_utc());
    unix + f64::from(offset)
}

/// The run machinery's handle on the state database; a poisoned lock (a
/// panic elsewhere) still holds a usable connection.
fn lock(db: &Mutex<Db>) -> std::sync::MutexGuard<'_, Db> {
    db.locked()
}

/// A state database error as the command's failure: a lock held by another
/// cosched, or a database of a newer one, is the user's to fix (exit 2).
pub(crate) fn state_failure(e: crate::state::StateError) -> Failure {
    match e {
        crate::state::StateError::TooNew { .. } | crate::state::StateError::Locked(..) => {
            Failure::usage(e.to_string())
        }
        other => Failure::failed(format!("state database: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a daemon's stop took a checkpoint, a run of two kinds resumed
    /// from it showed no window for its kinds: a restored policy tells them
    /// only as they change. Those of the record stand in.
    #[test]
    fn a_restored_run_takes_each_kinds_last_window_from_its_decisions() {
        use policy::{Decision, DecisionKind};
        let window = |at: Time, site: u32, kind: Option<&str>, window: f64| Decision {
            at,
            site: SiteId(site),
            job_kind: kind.map(str::to_string),
            kind: DecisionKind::Window { window, capacity: None },
        };
        let verdict = Decision::of_site(
            5.0,
            SiteId(0),
            DecisionKind::Verdict { healthy: true, level: 4.0, slowdown: None },
        );
        let decided = vec![
            window(1.0, 0, Some("io"), 4.0),
            window(2.0, 0, None, 9.0),
            window(3.0, 1, Some("io"), 2.0),
            window(4.0, 0, Some("io"), 6.0),
            verdict,
            window(6.0, 0, Some("cpu"), 3.0),
        ];
        let last = last_kind_windows(decided);
        let seen: Vec<(u32, &str, Time)> =
            last.iter().map(|d| (d.site.0, d.job_kind.as_deref().unwrap(), d.at)).collect();
        assert_eq!(seen, vec![(0, "cpu", 6.0), (0, "io", 4.0), (1, "io", 3.0)]);
    }

    #[test]
    fn a_grid_site_left_unset_takes_the_gridmanagers_poll_and_no_other_does() {
        let text = "[[site]]\nname = \"local\"\n\
                    [[site]]\nname = \"ce\"\ngrid_resource = \"condor a.example.org a.example.org:9619\"\n\
                    [[site]]\nname = \"set\"\ngrid_resource = \"condor b.example.org b.example.org:9619\"\npoll_period = 30\n";
        let (sites, _) = crate::config::parse(Path::new("sites.toml"), text).expect("valid");
        let polls = |said: Option<&str>| {
            let mut spec = sites.run_spec(10, CapacityMemory::new());
            take_grid_poll(&sites, &mut spec, said);
            spec.sites.iter().map(|s| s.poll_period).collect::<Vec<_>>()
        };
        assert_eq!(polls(Some("5")), vec![0.0, 5.0, 30.0]);
        // Not a number, or nothing said: HTCondor's default stands.
        assert_eq!(polls(Some("$(UNEXPANDED)")), vec![0.0, DEFAULT_GRID_POLL, 30.0]);
        assert_eq!(polls(Some("-1")), vec![0.0, DEFAULT_GRID_POLL, 30.0]);
        assert_eq!(polls(None), vec![0.0, DEFAULT_GRID_POLL, 30.0]);
    }
}
