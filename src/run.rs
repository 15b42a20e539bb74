//! `cosched submit N sites.toml job.sub` end to end, `--resume`, and
//! `cosched check`.
//!
//! A run: validate both files (nothing is submitted when anything is wrong,
//! exit 2) → open the state directory ([`crate::state`]) → build the policy
//! (warm-started from the capacities earlier runs in the same directory
//! learned) → one [`CondorSite`] per site → [`engine::run`] with the
//! [`progress`] display as observer → store what was learned, print the
//! summary. SIGINT/SIGTERM stop submitting, keep every job where it is and
//! exit 3 with the commands to resume or clean up.
//!
//! # Why `--resume` loses and duplicates nothing, even after `kill -9`
//! The state database records, per batch, the *intent* (batch id, jobs, submit
//! file) in a committed transaction *before* `condor_submit` runs, and the
//! cluster (or the failure) after it answers. Every job carries
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
//! From a checkpoint (`checkpoint`, every `[run] checkpoint_every` real
//! seconds, of policies that keep one): the policy and the progress tally
//! are restored as they were between two inputs, and only what lies past
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
//! Root: HTCondor does not let root own jobs, so cosched refuses to run as
//! root. `COSCHED_ALLOW_ROOT=1` lifts that, and `--simulate` does not need
//! it; both exist only for testing against the fake HTCondor (CI runs as root).

mod checkpoint;
pub mod decisions;
mod history;
pub mod progress;

use crate::condor::{remove_forwarded_leftovers, Condor, CondorSite, Reachability, SubmitJournal};
use crate::config::{Problem, SitesFile};
use crate::engine::{self, Ending, EngineOptions, Observer, RunClock};
use crate::fake_condor::{self, FakeSite, PoolConfig};
use crate::policy::{self, Action, JobId, Policy, PolicyConfig, SiteEvent, SiteId, Time};
use crate::report::{RunDecisions, SiteDecisions};
use crate::state::{Db, RunRecord, RunStatus, StateDir};
use crate::submit_desc::{self, SubmitDescription};
use crate::{CmdResult, Exit, Failure};
use clap::Args;
use progress::{Display, Progress};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// Number of jobs to run (each gets a stable index 0..N-1, $(CoschedJob)).
    #[arg(required_unless_present = "resume", allow_negative_numbers = true)]
    pub n_jobs: Option<i64>,
    /// The sites file (see sites.example.toml).
    #[arg(required_unless_present = "resume")]
    pub sites: Option<PathBuf>,
    /// The HTCondor submit description of one job.
    #[arg(required_unless_present = "resume")]
    pub job: Option<PathBuf>,
    /// Scheduling policy; overrides [policy] name in sites.toml.
    #[arg(long)]
    pub policy: Option<String>,
    /// Where submit files, logs and the state database go.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Continue an interrupted run from its state directory.
    #[arg(long, value_name = "STATE_DIR", conflicts_with_all = ["n_jobs", "sites", "job", "state_dir"])]
    pub resume: Option<PathBuf>,
    /// Run on the built-in simulated grid: the fake HTCondor commands shipped
    /// with cosched, driven by each site's [site.simulate] model.
    #[arg(long)]
    pub simulate: bool,
    /// With --simulate: simulated seconds per real second.
    #[arg(long, default_value_t = 100.0, requires = "simulate")]
    pub speedup: f64,
    /// Print the final summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Hand the run to the daemon instead of running it here.
    #[arg(long)]
    pub daemon: bool,
    /// The daemon's socket (with --daemon).
    #[arg(long, env = "COSCHED_SOCKET")]
    pub socket: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    pub sites: PathBuf,
    pub job: PathBuf,
    /// Also check N (as `cosched submit N …` would).
    #[arg(long, allow_negative_numbers = true)]
    pub n_jobs: Option<i64>,
}

/// `cosched check SITES JOB [--n-jobs N]`.
pub fn check_command(args: CheckArgs) -> CmdResult {
    submit_desc::check(&args.sites, &args.job, args.n_jobs)
}

/// `cosched submit …`.
pub fn command(args: SubmitArgs) -> CmdResult {
    let plan = match &args.resume {
        Some(dir) => Plan::resume(dir)?,
        None => Plan::fresh(&args)?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::failed(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(execute(plan, args.json))
}

/// Everything a run needs before the runtime starts.
struct Plan {
    state: StateDir,
    db: Arc<Mutex<Db>>,
    run: RunRecord,
    sites: SitesFile,
    desc: Arc<SubmitDescription>,
    policy: PolicyConfig,
    /// Run seconds per real second.
    rate: f64,
    /// The fake pool this run drives, if any (stopped when the run is done).
    pool: Option<PathBuf>,
    resumed: bool,
}

fn usage_problems(problems: &[Problem]) -> Option<Failure> {
    for p in problems {
        eprintln!("{p}");
    }
    let errors = problems.iter().filter(|p| p.is_error()).count();
    (errors > 0).then(|| {
        Failure::usage(format!(
            "{errors} error(s) in the inputs; nothing was submitted (fix them and try again)"
        ))
    })
}

fn check_root(simulated: bool) -> Result<(), Failure> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root && !simulated && std::env::var("COSCHED_ALLOW_ROOT").as_deref() != Ok("1") {
        return Err(Failure::usage(
            "cosched does not run as root: HTCondor does not let root own jobs (condor_submit would fail). \
             Run it as the user who should own the jobs. (COSCHED_ALLOW_ROOT=1 exists only for testing \
             against cosched's fake HTCondor.)",
        ));
    }
    Ok(())
}

/// Loads and validates both files; every problem is printed.
fn load_inputs(
    sites_path: &Path,
    job_path: &Path,
    n_jobs: Option<i64>,
) -> Result<(SitesFile, SubmitDescription), Failure> {
    let sites = crate::config::load_with_warnings(sites_path);
    let desc = submit_desc::load(job_path);
    match (sites, desc) {
        (Ok((sites, warnings)), Ok(desc)) => {
            let mut problems = warnings;
            problems.extend(submit_desc::validate(&sites, &desc, n_jobs));
            match usage_problems(&problems) {
                Some(f) => Err(f),
                None => Ok((sites, desc)),
            }
        }
        _ => {
            let (problems, _) = submit_desc::check_problems(sites_path, job_path, n_jobs);
            Err(usage_problems(&problems).unwrap_or_else(|| Failure::usage("the inputs cannot be read")))
        }
    }
}

/// A `[[site]]` setting (a limit, a first window) that a policy chosen
/// with `--policy` will not honour is said before anything is submitted
/// (the file's own policy was checked with the file), not found out from
/// the queue.
fn warn_of_ignored_settings(policy: &PolicyConfig, sites: &SitesFile, sites_path: &Path) {
    if policy.name() == sites.policy.name() {
        return;
    }
    for site in &sites.sites {
        let settings = [
            (site.max_jobs.is_some(), "max_jobs"),
            (site.max_idle.is_some(), "max_idle"),
            (site.initial_window.is_some(), "initial_window"),
        ];
        for (set, key) in settings {
            if let Some(why) = policy.ignores(key).filter(|_| set) {
                eprintln!(
                    "{}",
                    crate::config::ignored_setting(sites_path, None, &site.name, policy.name(), key, why)
                );
            }
        }
    }
}

fn choose_policy(sites: &SitesFile, name: Option<&str>) -> Result<PolicyConfig, Failure> {
    match name {
        None => Ok(sites.policy.clone()),
        Some(n) if n == sites.policy.name() => Ok(sites.policy.clone()),
        Some(n) => PolicyConfig::lookup(n).map_err(Failure::usage),
    }
}

/// The fake pool of a `--simulate` run, from the sites file's models.
fn simulated_pool(sites: &SitesFile, epoch: f64, speedup: f64) -> Result<PoolConfig, Failure> {
    let params = sites.simulated_sites().map_err(|missing| {
        Failure::usage(format!(
            "--simulate needs a [site.simulate] table for every site; missing for: {}",
            missing.join(", ")
        ))
    })?;
    let mut pool = PoolConfig {
        epoch: Some(epoch),
        speedup,
        base_runtime: sites.simulate.base_runtime,
        jitter: sites.simulate.jitter,
        seed: sites.simulate.seed,
        ..PoolConfig::default()
    };
    for (site, params) in sites.sites.iter().zip(params) {
        match &site.grid_resource {
            Some(grid) => pool.sites.push(FakeSite::grid(grid.raw.clone(), params)),
            None if pool.local.is_none() => pool.local = Some(FakeSite::grid("", params)),
            None => {
                return Err(Failure::usage(format!(
                "--simulate: site `{}` is a second local-pool site (no grid_resource); the simulated grid \
                     has one local pool",
                site.name
            )))
            }
        }
    }
    Ok(pool)
}

/// Unix seconds now.
/// A run id people can type: `20261121T0612-3f9a`.
#[allow(clippy::disallowed_methods)] // the edge: ids carry the wall-clock start
fn new_run_id() -> String {
    let now = chrono::Utc::now();
    let salt = (now.timestamp_subsec_nanos() ^ std::process::id().wrapping_mul(2_654_435_761)) & 0xffff;
    format!("{}-{salt:04x}", now.format("%Y%m%dT%H%M%S"))
}

fn state_failure(e: crate::state::StateError) -> Failure {
    match e {
        crate::state::StateError::TooNew { .. } | crate::state::StateError::Locked(..) => {
            Failure::usage(e.to_string())
        }
        other => Failure::failed(format!("state database: {other}")),
    }
}

/// The fake pool named by `COSCHED_FAKE_POOL` (tests): its epoch and speedup.
fn foreign_fake_pool() -> Result<Option<(PathBuf, f64, f64)>, Failure> {
    let Some(dir) = std::env::var_os(fake_condor::POOL_ENV).filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    let dir = PathBuf::from(dir);
    let path = dir.join("pool.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Failure::usage(format!("{}: {e} (COSCHED_FAKE_POOL names a fake pool)", path.display()))
    })?;
    let config: PoolConfig =
        toml::from_str(&text).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    let epoch = config.epoch.ok_or_else(|| Failure::usage(format!("{}: no epoch", path.display())))?;
    Ok(Some((dir, epoch, config.speedup)))
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Plan {
    fn fresh(args: &SubmitArgs) -> Result<Plan, Failure> {
        let (Some(n), Some(sites_path), Some(job_path)) = (args.n_jobs, &args.sites, &args.job) else {
            return Err(Failure::usage("cosched submit N sites.toml job.sub (or --resume STATE_DIR)"));
        };
        check_root(args.simulate)?;
        let (mut sites, desc) = load_inputs(sites_path, job_path, Some(n))?;
        let policy = choose_policy(&sites, args.policy.as_deref())?;
        warn_of_ignored_settings(&policy, &sites, sites_path);
        if !(args.speedup > 0.0 && args.speedup.is_finite()) {
            return Err(Failure::usage(format!("--speedup must be a positive number, got {}", args.speedup)));
        }
        let run_id = new_run_id();
        let (epoch, rate, pool_config) = if args.simulate {
            let epoch = crate::engine::wall_clock_unix();
            (epoch, args.speedup, Some(simulated_pool(&sites, epoch, args.speedup)?))
        } else if let Some((_, epoch, speedup)) = foreign_fake_pool()? {
            (epoch, speedup, None)
        } else {
            (crate::engine::wall_clock_unix(), 1.0, None)
        };
        let state = StateDir::open(args.state_dir.as_deref().unwrap_or(Path::new("cosched-state")))
            .map_err(state_failure)?;
        let db = state.db().map_err(state_failure)?;
        if let Some(open) = db.runs().map_err(state_failure)?.into_iter().rev().find(|r| r.status.resumable())
        {
            return Err(Failure::usage(format!(
                "{} holds run {} that has not finished ({}); continue it with `cosched submit --resume {}`, \
                 or start this run with another --state-dir",
                state.root().display(),
                open.id,
                open.status.as_str(),
                state.root().display()
            )));
        }
        let run_dir = state.run_dir(&run_id);
        std::fs::create_dir_all(&run_dir)
            .map_err(|e| Failure::failed(format!("cannot create {}: {e}", run_dir.display())))?;
        let pool = match pool_config {
            Some(config) => {
                let pool_dir = run_dir.join("pool");
                let bin = fake_condor::install(&pool_dir, &config)
                    .map_err(|e| Failure::failed(format!("cannot set up the simulated grid: {e}")))?;
                sites.condor.bin_dir = Some(bin);
                Some(pool_dir)
            }
            None => None,
        };
        let run = RunRecord {
            id: run_id,
            created: chrono::DateTime::from_timestamp_millis((epoch * 1000.0) as i64)
                .map_or_else(String::new, |d| d.to_rfc3339()),
            n_jobs: n as u64,
            sites_path: absolute(sites_path),
            sites_text: std::fs::read_to_string(sites_path).unwrap_or_default(),
            job_path: absolute(job_path),
            job_text: std::fs::read_to_string(job_path).unwrap_or_default(),
            policy: policy.name().to_string(),
            epoch_unix: epoch,
            simulate: args.simulate,
            speedup: rate,
            status: RunStatus::Running,
        };
        db.create_run(&run).map_err(state_failure)?;
        Ok(Plan {
            state,
            db: Arc::new(Mutex::new(db)),
            run,
            sites,
            desc: Arc::new(desc),
            policy,
            rate,
            pool,
            resumed: false,
        })
    }

    fn resume(dir: &Path) -> Result<Plan, Failure> {
        let nothing_recorded = || {
            Failure::usage(format!(
                "{d}: nothing to resume: no run was recorded here, so nothing was submitted (cosched records \
                 a run before its first condor_submit); start it with `cosched submit N SITES JOB \
                 --state-dir {d}`",
                d = dir.display()
            ))
        };
        if !dir.join("state.db").is_file() {
            // A cosched stopped before it created the database leaves the
            // lock file: that is a state directory with no run in it.
            if dir.join("lock").is_file() {
                return Err(nothing_recorded());
            }
            return Err(Failure::usage(format!(
                "{}: no state database (state.db) here; give the --state-dir of the run to resume",
                dir.display()
            )));
        }
        let state = StateDir::open(dir).map_err(state_failure)?;
        let db = state.db().map_err(state_failure)?;
        let runs = db.runs().map_err(state_failure)?;
        let Some(run) = runs.iter().rev().find(|r| r.status.resumable()).cloned() else {
            return Err(match runs.last() {
                Some(last) => Failure::usage(format!(
                    "{}: nothing to resume: the last run, {}, is {}",
                    dir.display(),
                    last.id,
                    last.status.as_str()
                )),
                None => nothing_recorded(),
            });
        };
        check_root(run.simulate)?;
        // The files as they are now (a fix after a permanent error is
        // welcome), but the site list must be the run's: jobs are out there.
        let (mut sites, desc) = load_inputs(&run.sites_path, &run.job_path, Some(run.n_jobs as i64))?;
        let (recorded, _) = crate::config::parse(&run.sites_path, &run.sites_text)
            .map_err(|e| Failure::failed(format!("the run's recorded sites file no longer parses: {e}")))?;
        let names = |s: &SitesFile| s.sites.iter().map(|x| x.name.clone()).collect::<Vec<_>>();
        if names(&recorded) != names(&sites) {
            return Err(Failure::usage(format!(
                "{}: the sites changed since run {} started ({} then, {} now); jobs are out at those \
                 sites, so put the site list back as it was to resume",
                run.sites_path.display(),
                run.id,
                names(&recorded).join(", "),
                names(&sites).join(", ")
            )));
        }
        let policy = choose_policy(&sites, Some(&run.policy))?;
        let mut rate = 1.0;
        let mut pool = None;
        if run.simulate {
            let pool_dir = state.run_dir(&run.id).join("pool");
            let config = simulated_pool(&recorded, run.epoch_unix, run.speedup)?;
            let bin = fake_condor::install(&pool_dir, &config)
                .map_err(|e| Failure::failed(format!("cannot set up the simulated grid: {e}")))?;
            fake_condor::start(&pool_dir)
                .map_err(|e| Failure::failed(format!("cannot start the simulated grid's schedd: {e}")))?;
            sites.condor.bin_dir = Some(bin);
            rate = run.speedup;
            pool = Some(pool_dir);
        } else if let Some((_, _, speedup)) = foreign_fake_pool()? {
            rate = speedup;
        }
        Ok(Plan {
            state,
            db: Arc::new(Mutex::new(db)),
            run,
            sites,
            desc: Arc::new(desc),
            policy,
            rate,
            pool,
            resumed: true,
        })
    }
}

/// The state database as CondorSite's journal. A write that fails stops
/// cosched at once: submitting without the record would break resume, and
/// stopping here is just one more crash that resume handles.
struct DbJournal {
    db: Arc<Mutex<Db>>,
    run: String,
    site_names: Arc<Vec<String>>,
}

impl DbJournal {
    fn fatal(&self, what: &str, e: crate::state::StateError) -> ! {
        eprintln!(
            "cosched: cannot record {what} in the state database: {e}\n\
             Stopping before anything unrecorded happens; fix the cause and run `cosched submit --resume`."
        );
        std::process::exit(Exit::Partial as i32)
    }
    fn name(&self, site: SiteId) -> &str {
        self.site_names.get(site.index()).map_or("?", String::as_str)
    }
}

impl SubmitJournal for DbJournal {
    fn intent(&mut self, site: SiteId, batch: &str, jobs: &[JobId], submit_file: &Path) {
        let r = self.db.lock().unwrap_or_else(|p| p.into_inner()).record_intent(
            &self.run,
            self.name(site),
            site.0,
            batch,
            jobs,
            submit_file,
        );
        if let Err(e) = r {
            self.fatal("a submission", e);
        }
    }
    fn submitted(&mut self, batch: &str, cluster: i64) {
        let r = self.db.lock().unwrap_or_else(|p| p.into_inner()).record_submitted(&self.run, batch, cluster);
        if let Err(e) = r {
            self.fatal("a submitted cluster", e);
        }
    }
    fn failed(&mut self, batch: &str, error: &str) {
        let r = self.db.lock().unwrap_or_else(|p| p.into_inner()).record_failed(&self.run, batch, error);
        if let Err(e) = r {
            self.fatal("a failed submission", e);
        }
    }
    fn log_offset(&mut self, site: SiteId, offset: u64) {
        let r = self.db.lock().unwrap_or_else(|p| p.into_inner()).set_log_offset(
            &self.run,
            self.name(site),
            offset,
        );
        if let Err(e) = r {
            tracing::warn!("cannot checkpoint the user log offset: {e}");
        }
    }
}

/// The progress display, plus the one thing that stops a run besides a
/// signal: `condor_submit` rejecting a batch outright (the same submission
/// would fail again; a person has to look).
struct Watch {
    progress: Progress,
    stop: CancellationToken,
    permanent: Option<(String, String)>,
    names: Vec<String>,
    checkpoints: Option<checkpoint::Writer>,
}

impl Observer for Watch {
    fn action(&mut self, now: Time, action: &Action) {
        self.progress.action(now, action);
    }
    fn event(&mut self, now: Time, site: SiteId, event: &SiteEvent) {
        if let SiteEvent::SubmitFailed { error, permanent: true, .. } = event {
            if self.permanent.is_none() {
                let name = self.names.get(site.index()).cloned().unwrap_or_default();
                self.permanent = Some((name, error.clone()));
                self.stop.cancel();
            }
        }
        self.progress.event(now, site, event);
    }
    fn site_unreachable(&mut self, site: SiteId, down: Option<(Time, String)>) {
        self.progress.site_unreachable(site, down);
    }
    fn progress(&mut self, now: Time, policy: &dyn Policy) {
        self.progress.progress(now, policy);
    }
    fn checkpoint(&mut self, now: Time, policy: &dyn Policy, cursors: &[Option<engine::SiteCursor>]) {
        let Some(writer) = &mut self.checkpoints else { return };
        if !writer.due(now) {
            return;
        }
        let Some(cursors) = cursors.iter().copied().collect::<Option<Vec<_>>>() else { return };
        #[allow(clippy::disallowed_methods)] // reported, not decided on: what a checkpoint costs the run
        let started = std::time::Instant::now();
        match (policy.checkpoint(), self.progress.checkpoint()) {
            (Some(state), Some(progress)) => {
                let bytes = state.len() + progress.len();
                writer.write(now, cursors, state, progress);
                tracing::debug!("checkpoint of {bytes} bytes taken in {:?}", started.elapsed());
            }
            // A policy that keeps no checkpoint never will.
            _ => self.checkpoints = None,
        }
    }
    fn finished(&mut self, now: Time, policy: &dyn Policy, ending: Ending) {
        self.progress.finished(now, policy, ending);
    }
}

/// Tells an observer which sites' schedds do not answer (on the run's
/// clock) before each progress call: the same for a foreground run's
/// display and the daemon's `status`.
struct ShowReachability<'a> {
    inner: &'a mut dyn Observer,
    reachability: Vec<Arc<Reachability>>,
    epoch_unix: f64,
    rate: f64,
}

impl Observer for ShowReachability<'_> {
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
    fn checkpoint(&mut self, now: Time, policy: &dyn Policy, cursors: &[Option<engine::SiteCursor>]) {
        self.inner.checkpoint(now, policy, cursors);
    }
    fn finished(&mut self, now: Time, policy: &dyn Policy, ending: Ending) {
        self.inner.finished(now, policy, ending);
    }
}

/// Says when a site's schedd stops answering and when it answers again, and
/// stops the run (recording which site and why in `stopped`) once one has
/// been silent for `patience` seconds. The batch being retried stays
/// recorded as an intent, and `--resume` settles it.
async fn watch_schedd(
    names: Vec<String>,
    reachability: Vec<Arc<Reachability>>,
    patience: f64,
    shutdown: CancellationToken,
    stopped: Arc<Mutex<Option<(String, String)>>>,
) {
    let mut told = vec![false; names.len()];
    let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        every.tick().await;
        let now = crate::engine::wall_clock_unix();
        for (i, r) in reachability.iter().enumerate() {
            let name = names.get(i).map_or("?", String::as_str);
            match r.unreachable() {
                Some((since, error)) => {
                    if !told[i] {
                        told[i] = true;
                        eprintln!(
                            "cosched: site {name}: the schedd does not answer ({}); retrying the same batch, \
                             for at most {patience:.0} s ([condor] unreachable_timeout)",
                            error.lines().next().unwrap_or("")
                        );
                    }
                    if now - since >= patience {
                        *stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some((name.to_string(), error));
                        shutdown.cancel();
                        return;
                    }
                }
                None if told[i] => {
                    told[i] = false;
                    eprintln!("cosched: site {name}: the schedd answers again");
                }
                None => {}
            }
        }
    }
}

/// `condor_rm C1 C2 …` for the clusters the run submitted: its own jobs by
/// their ids, never by an attribute that Condor-C's forwarded copies carry.
fn removal_hint(db: &Arc<Mutex<Db>>, run: &str) -> String {
    let subs = db.lock().unwrap_or_else(|p| p.into_inner()).submissions(run).unwrap_or_default();
    let clusters: std::collections::BTreeSet<i64> = subs
        .iter()
        .filter_map(|s| match s.state {
            crate::state::SubmissionState::Submitted { cluster } => Some(cluster),
            _ => None,
        })
        .collect();
    if clusters.is_empty() {
        return "nothing was submitted".to_string();
    }
    let list: Vec<String> = clusters.iter().map(i64::to_string).collect();
    format!("condor_rm {}", list.join(" "))
}

async fn execute(plan: Plan, json: bool) -> CmdResult {
    let Plan { state, db, run, sites, desc, policy: policy_config, rate, pool, resumed } = plan;
    if let Some(pool_dir) = &pool {
        // The fake commands find their pool through the environment; set
        // before any of them is spawned.
        std::env::set_var(fake_condor::POOL_ENV, pool_dir);
    }
    let run_dir = state.run_dir(&run.id);
    let names: Vec<String> = sites.sites.iter().map(|s| s.name.clone()).collect();
    let shutdown = CancellationToken::new();
    let memory = db.lock().unwrap_or_else(|p| p.into_inner()).load_memory().map_err(state_failure)?;
    let spec = sites.run_spec(run.n_jobs, memory);
    let build = || policy::build(&policy_config, &spec, None).map_err(Failure::usage);
    let mut policy = build()?;
    let display = if json {
        Display::Quiet
    } else if std::io::stderr().is_terminal() {
        Display::Live
    } else {
        Display::Lines
    };
    let mut watch = Watch {
        progress: Progress::new(&run.id, names.clone(), run.n_jobs, rate, display),
        stop: shutdown.clone(),
        permanent: None,
        names: names.clone(),
        checkpoints: checkpoint::Writer::new(
            &run_dir,
            &run.id,
            policy.name(),
            sites.run.checkpoint_every,
            rate,
        ),
    };
    let restored =
        if resumed { restore(&run_dir, &run.id, &names, policy.as_mut(), &mut watch.progress) } else { None };
    if restored.is_none() && resumed {
        // A restore that failed half-way leaves nothing of it behind.
        policy = build()?;
        watch.progress = Progress::new(&run.id, names.clone(), run.n_jobs, rate, display);
    }
    let cursors = restored.as_ref().map(|c| c.cursors.clone());
    let Engaged { history, reconciled, backends, clock, reachability } =
        engage(&db, &run, &run_dir, &sites, desc, rate, resumed, cursors, shutdown.clone()).await?;
    for (batch, what) in &reconciled {
        eprintln!("cosched: batch {batch}: {what}");
    }
    watch.progress.replay(&history);
    if !json || resumed {
        // A week's run replays millions of events first (seconds): say so,
        // or the silence before the first progress line looks like a hang.
        let since = match &restored {
            Some(c) => format!(
                " from its checkpoint of {} ago",
                progress::format_duration((engine::wall_clock_unix() - c.taken_unix).max(0.0))
            ),
            None => String::new(),
        };
        let replaying = if history.is_empty() {
            since
        } else {
            format!("{since}; replaying its {} past events first", history.len())
        };
        eprintln!(
            "cosched: {} run {} of {} jobs over {} site(s) with policy {}{replaying}; state in {}",
            if resumed { "resuming" } else { "starting" },
            run.id,
            run.n_jobs,
            names.len(),
            policy.name(),
            state.root().display()
        );
    }
    let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let signals = tokio::spawn(watch_signals(shutdown.clone(), interrupted.clone()));
    let unreachable = Arc::new(Mutex::new(None));
    let schedd_watch = tokio::spawn(watch_schedd(
        names.clone(),
        reachability.clone(),
        sites.condor.unreachable_timeout,
        shutdown.clone(),
        unreachable.clone(),
    ));
    let options = EngineOptions { history, restored: restored.is_some(), horizon: horizon(&clock) };
    let report = {
        let mut shown =
            ShowReachability { inner: &mut watch, reachability, epoch_unix: run.epoch_unix, rate };
        let mut recording = decisions::Recording::new(&run_dir, &mut shown);
        engine::run(policy.as_mut(), backends, clock, options, &mut recording, shutdown.clone()).await
    };
    signals.abort();
    schedd_watch.abort();
    // The simulated grid has no remote schedds to ask (its condor_q knows
    // no -name), so only a real run looks for forwarded copies.
    if policy.book().out_total() == 0 && pool.is_none() {
        // Nothing of the run is at any site (settled, or a cancelled run
        // drained): no remote copy is wanted any more.
        remove_forwarded_leftovers(&Condor::new(&sites.condor), &run.id, &sites.sites).await;
    }
    record_end(&db, &run.id, policy.as_ref(), report.ending)?;
    let book = policy.book();
    let summary =
        watch.progress.take_summary().ok_or_else(|| Failure::failed("the run ended without a summary"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
    } else {
        print!("{}", progress::render_summary(&summary));
    }
    write_run_report(&run_dir, &names, run.epoch_unix, Some(watch.progress.cut_short_by_site()));
    let dir = state.root().display().to_string();
    let how_to_continue = format!(
        "  continue: cosched submit --resume {dir}\n  or remove its jobs: {}",
        removal_hint(&db, &run.id)
    );
    match report.ending {
        Ending::Settled => {
            if let Some(pool_dir) = &pool {
                if let Err(e) = fake_condor::stop(pool_dir) {
                    tracing::warn!("stopping the simulated grid: {e}");
                }
            }
            Ok(if book.given_up() == 0 { Exit::Ok } else { Exit::Partial })
        }
        Ending::Interrupted => {
            let silent = unreachable.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some((site, error)) = silent {
                return Err(Failure::failed(format!(
                    "the schedd of site {site} has not answered for {:.0} s ([condor] unreachable_timeout); \
                     stopped (jobs already out are left alone):\n{error}\nOnce it answers again,\n{how_to_continue}",
                    sites.condor.unreachable_timeout
                )));
            }
            if let Some((site, error)) = watch.permanent {
                return Err(Failure::failed(format!(
                    "condor_submit rejected a batch at site {site}; stopped submitting (jobs already out are \
                     left alone):\n{error}\nFix the cause, then\n{how_to_continue}"
                )));
            }
            eprintln!("cosched: interrupted; nothing more is submitted and the jobs out stay where they are.\n{how_to_continue}");
            Ok(Exit::Interrupted)
        }
        Ending::Hang => Err(Failure::failed(format!(
            "run {} stopped with {} job(s) stuck at the sites (nothing started them).\n{how_to_continue}",
            run.id, summary.unfinished
        ))),
    }
}

/// Writes the HTML report of the run's user logs into `run_dir/report` and
/// says where it is. A report that cannot be written costs the run nothing:
/// the logs stay, and `cosched log report` can make it later.
fn write_run_report(
    run_dir: &Path,
    site_names: &[String],
    epoch_unix: f64,
    cut_short: Option<Vec<(u64, f64)>>,
) {
    match run_report(run_dir, site_names, epoch_unix, cut_short) {
        Some(Ok(html)) => eprintln!("cosched: report: {}", html.display()),
        Some(Err(e)) => {
            eprintln!("cosched: no report written ({e}); the user logs are in {}", run_dir.display())
        }
        None => {}
    }
}

/// Writes `run_dir/report` from the run's user logs and recorded decisions,
/// with what the run counted cut short per site where it kept a tally;
/// `None` without logs.
fn run_report(
    run_dir: &Path,
    site_names: &[String],
    epoch_unix: f64,
    cut_short: Option<Vec<(u64, f64)>>,
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

/// Cancels `shutdown` on SIGINT or SIGTERM. The handlers are installed when
/// this is called, not when the returned task first runs (see the daemon's
/// `watch_signals`): a signal in between would kill cosched uncleanly.
fn watch_signals(
    shutdown: CancellationToken,
    seen: Arc<std::sync::atomic::AtomicBool>,
) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let installed = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
    async move {
        let (Ok(mut int), Ok(mut term)) = installed else {
            tracing::warn!("cannot watch SIGINT/SIGTERM; Ctrl-C will kill cosched without a clean stop");
            return;
        };
        tokio::select! {
            biased;
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        seen.store(true, std::sync::atomic::Ordering::SeqCst);
        eprintln!("\ncosched: stopping: no more submissions; jobs out are left alone");
        shutdown.cancel();
    }
}

/// Wraps a built policy, given the clock rate (the daemon's fair-share cap).
pub type PolicyWrap = Box<dyn FnOnce(Box<dyn Policy>, f64) -> Box<dyn Policy> + Send>;

/// Runs (or resumes) a run recorded in `db`, for `cosched daemon`: what
/// `execute` does between the plan and the summary, without the terminal
/// display or signal handling (the daemon has its own). Resume is the same as
/// `--resume`: a run with recorded submissions has its history rebuilt and
/// its unknown submissions reconciled first. `wrap` wraps the built policy
/// (the daemon's fair-share cap) and gets the clock rate. Stores what the run
/// learned and its final status in `runs`, like `cosched submit`.
pub async fn drive_recorded(
    db: Arc<Mutex<Db>>,
    run_dir: PathBuf,
    run: RunRecord,
    wrap: PolicyWrap,
    observer: &mut dyn Observer,
    shutdown: CancellationToken,
) -> Result<Ending, Failure> {
    if run.simulate {
        return Err(Failure::usage(format!(
            "run {}: a --simulate run owns its fake pool and cannot be driven by the daemon",
            run.id
        )));
    }
    let (sites, _) = crate::config::parse(&run.sites_path, &run.sites_text).map_err(|e| {
        Failure::failed(format!("run {}: its recorded sites file no longer parses: {e}", run.id))
    })?;
    let desc = submit_desc::parse(&run.job_path, &run.job_text).map_err(|e| {
        Failure::failed(format!("run {}: its recorded submit description no longer parses: {e}", run.id))
    })?;
    let policy_config = choose_policy(&sites, Some(&run.policy))?;
    let rate = if run.speedup > 0.0 { run.speedup } else { 1.0 };
    let resumed =
        !db.lock().unwrap_or_else(|p| p.into_inner()).submissions(&run.id).map_err(state_failure)?.is_empty();
    // The daemon's observer tallies the whole run from its events (no
    // checkpoint of it is kept), so its runs resume by replaying them all.
    let Engaged { history, reconciled, backends, clock, reachability } =
        engage(&db, &run, &run_dir, &sites, Arc::new(desc), rate, resumed, None, shutdown.clone()).await?;
    for (batch, what) in &reconciled {
        tracing::info!("run {}: batch {batch}: {what}", run.id);
    }
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", run_dir.display())))?;
    let memory = db.lock().unwrap_or_else(|p| p.into_inner()).load_memory().map_err(state_failure)?;
    let spec = sites.run_spec(run.n_jobs, memory);
    let mut policy = wrap(policy::build(&policy_config, &spec, None).map_err(Failure::usage)?, rate);
    db.lock()
        .unwrap_or_else(|p| p.into_inner())
        .set_status(&run.id, RunStatus::Running)
        .map_err(state_failure)?;
    // The observer hears the past too, so that what it tallies covers the
    // whole run, as `cosched submit`'s summary does after `--resume`.
    for (site, event) in &history {
        observer.event(event.at().unwrap_or(0.0), *site, event);
    }
    let options = EngineOptions { history, horizon: horizon(&clock), ..EngineOptions::default() };
    let mut shown = ShowReachability { inner: observer, reachability, epoch_unix: run.epoch_unix, rate };
    let mut recording = decisions::Recording::new(&run_dir, &mut shown);
    let report = engine::run(policy.as_mut(), backends, clock, options, &mut recording, shutdown).await;
    if policy.book().out_total() == 0 {
        // Nothing of the run is at any site or on its way there (settled):
        // no remote copy is wanted any more.
        remove_forwarded_leftovers(&Condor::new(&sites.condor), &run.id, &sites.sites).await;
    }
    record_end(&db, &run.id, policy.as_ref(), report.ending)?;
    // The same report a foreground run writes, beside its logs, once they
    // are complete: the run settled, or it stopped with nothing of it left
    // at any schedd (a cancelled run that drained, whose held-back
    // submissions never left; a daemon stopped between batches writes the
    // report of the logs so far, rewritten when the run ends).
    let nothing_at_schedds = policy.book().at_schedds() == 0;
    if report.ending == Ending::Settled || (report.ending == Ending::Interrupted && nothing_at_schedds) {
        let names: Vec<String> = sites.sites.iter().map(|s| s.name.clone()).collect();
        match run_report(&run_dir, &names, run.epoch_unix, shown.inner.cut_short_by_site()) {
            Some(Ok(path)) => tracing::info!("run {}: report: {}", run.id, path.display()),
            Some(Err(e)) => tracing::warn!("run {}: no report written ({e})", run.id),
            None => {}
        }
    }
    Ok(report.ending)
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
    desc: Arc<SubmitDescription>,
    rate: f64,
    resumed: bool,
    cursors: Option<Vec<engine::SiteCursor>>,
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
    let clock = RunClock::scaled((crate::engine::wall_clock_unix() - run.epoch_unix) * rate, rate);
    let site_names = Arc::new(names);
    let reachability: Vec<Arc<Reachability>> = sites.sites.iter().map(|_| Arc::default()).collect();
    let next_batches = crate::condor::first_free_batches(run_dir);
    let backends = sites
        .sites
        .iter()
        .zip(past.sites)
        .enumerate()
        .map(|(i, (site, start))| {
            let journal = DbJournal { db: db.clone(), run: run.id.clone(), site_names: site_names.clone() };
            let backend = CondorSite::new(
                SiteId(i as u32),
                site.clone(),
                desc.clone(),
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

/// Restores `policy` and `progress` from the run's checkpoint, if it has a
/// usable one ([`checkpoint`]); on `None` either may be half restored.
fn restore(
    run_dir: &Path,
    run: &str,
    names: &[String],
    policy: &mut dyn Policy,
    progress: &mut Progress,
) -> Option<checkpoint::Checkpoint> {
    let logs: Vec<PathBuf> = names.iter().map(|name| CondorSite::log_path(run_dir, name)).collect();
    let saved = checkpoint::load(run_dir, run, policy.name(), &logs)?;
    let restored = policy.restore(&saved.policy_state).and_then(|()| progress.restore(&saved.progress));
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

/// Stores what a finished (or stopped) run learned and its final status.
fn record_end(db: &Arc<Mutex<Db>>, run: &str, policy: &dyn Policy, ending: Ending) -> Result<(), Failure> {
    let status = match ending {
        Ending::Settled if policy.book().given_up() == 0 => RunStatus::Done,
        Ending::Settled => RunStatus::Failed,
        Ending::Hang => RunStatus::Hung,
        Ending::Interrupted => RunStatus::Interrupted,
    };
    let mut db = db.lock().unwrap_or_else(|p| p.into_inner());
    db.save_memory(run, &policy.learned()).map_err(state_failure)?;
    db.set_status(run, status).map_err(state_failure)
}
