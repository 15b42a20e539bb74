//! A [`Machinery`] that runs every job on one simulated grid inside the
//! daemon's own process, in scaled real time, and keeps its records in
//! memory.
//!
//! It exists for the soak benchmark and for exercising the daemon's protocol,
//! fair share, cancellation and watch without HTCondor processes: 20 runs on
//! 50 sites would otherwise mean thousands of `condor_submit` processes on a
//! 2-core machine. It is NOT crash-safe: nothing survives a restart. Runs that
//! must survive go through the state database (`simulate = "fake"` or real
//! HTCondor).
//!
//! # One grid per daemon
//! The grid is the daemon's, declared once: the one sites file the daemon
//! config names in `sites`. Every `[[site]]` there has a `[site.simulate]`
//! model; its `[simulate]` gives the jobs' sizes (`base_runtime`, `jitter`)
//! and the seed, and `[simulate.kinds]` each kind of job's `load` on a
//! site's shared resource (with `type_speed` in a `[site.simulate]`, a
//! kind's speed factor at that site). It is built at start; SIGHUP does not
//! rebuild it. A run names sites of the grid by name in its own sites file
//! (its policy, windows and limits come from there); its own `[simulate]`
//! and `[site.simulate]` tables are not read: the sites and jobs are the
//! grid's.
//!
//! Each site of the grid is one [`SharedSite`]: every run at site X submits
//! into the same model of X, so one run's jobs take slots and load the
//! resource that another run's jobs see, as the model says (a job of load ℓ
//! adds ℓ to the site's load L; past the capacity C every job slows by
//! `(1 − ℓ) + ℓ·D(L)`). Each run keeps its own clock (0 at its start, the
//! grid's clock shifted), attempt numbers and [`Ledger`]; when a run settles
//! its ledger checks conservation (every job done exactly once, never at two
//! sites at once, no more jobs running at a site than its slots), and a
//! broken rule fails the run with the ledger's words. Fair share between
//! users is the server's, unchanged: it caps how many jobs each run has out,
//! and the sites then run whatever is out, of every run alike.
//!
//! # Kinds
//! A run's kind is matched by its name (`--jobs NAME=COUNT:FILE`). Without
//! `[simulate.kinds]` every kind runs as one kind of load 1 (the model
//! without kinds, as before). Once the grid declares kinds, a run with a
//! kind it does not declare is refused at submission, naming the kind and
//! the file to declare it in: declaring kinds is asking the grid to tell
//! them apart, and a misspelt kind silently run at load 1 would measure the
//! wrong thing. A run of one submit description is of the kind `job`: load
//! 1 unless the grid declares `job`.
//!
//! # Not modelled
//! The run's jobs all have the grid's sizes (one `base_runtime` for every
//! kind); a site's model is the same for every user (no per-user slots
//! beyond what fair share caps); queue waits and failures are drawn from
//! the site's own streams in the order attempts reach it, so two daemons
//! given the same runs at different instants draw differently (nothing here
//! is reproducible by seed; the bench is where runs are).

use super::access::Reader;
use super::config::DaemonConfig;
use super::protocol::{RunState, SubmitRequest};
use super::server::{BoxFuture, Created, Machinery, PolicyWrap, StatusObserver, StoredRun};
use crate::config::SitesFile;
use crate::engine::{self, Ending, EngineOptions, RunClock};
use crate::policy::{self, JobId, JobTypeId, JobTypes, PolicyConfig};
use crate::sim::backend::SimSite;
use crate::sim::metrics::{Ledger, Measured};
use crate::sim::model::{
    declared_kind, declared_kinds, job_work, site_seed, JobType, Scenario, SiteParams, SiteSim,
};
use crate::sim::shared::SharedSite;
use crate::sync::Locked;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The daemon's simulated grid.
struct Grid {
    /// The sites file it was made from (messages name it).
    path: PathBuf,
    /// Simulated seconds per real second.
    speedup: f64,
    /// Reads 0 when the grid was made; every site's model runs on it.
    clock: RunClock,
    /// Each site by name: its model and the shared site running it.
    sites: BTreeMap<String, (SiteParams, Arc<SharedSite>)>,
    /// The kinds every site's model knows, in the models' order: `job`
    /// (load 1, unless declared) first, then the declared ones by name.
    kinds: Vec<JobType>,
    base_runtime: f64,
    jitter: f64,
    seed: u64,
}

impl Grid {
    fn from_config(config: &DaemonConfig) -> Result<Grid, String> {
        let path = match config.sites.as_slice() {
            [one] => one.clone(),
            others => {
                return Err(format!(
                    "{}: simulate = true runs every job on one simulated grid, the sites of one sites \
                     file with a [site.simulate] model each; name exactly one file in `sites` (it names {})",
                    config.path.display(),
                    others.len()
                ))
            }
        };
        let file = crate::config::load(&path).map_err(|e| e.to_string())?;
        let params = file.simulated_sites().map_err(|missing| {
            format!(
                "{}: the daemon's simulated grid needs a [site.simulate] model of every site; missing for: {}",
                path.display(),
                missing.join(", ")
            )
        })?;
        let kinds = declared_kinds(&file.simulate.kinds);
        let clock = RunClock::scaled(0.0, config.speedup);
        let seed = file.simulate.seed;
        let sites = file
            .sites
            .iter()
            .zip(params)
            .enumerate()
            .map(|(i, (site, p))| {
                let sim = SiteSim::with_types(&p, &kinds, site_seed(seed, i));
                (site.name.clone(), (p, SharedSite::new(sim, clock)))
            })
            .collect();
        Ok(Grid {
            path,
            speedup: config.speedup,
            clock,
            sites,
            kinds,
            base_runtime: file.simulate.base_runtime,
            jitter: file.simulate.jitter,
            seed,
        })
    }

    /// The grid's index of each of the run's kinds, or why the grid cannot
    /// run one.
    fn kinds_of(&self, types: &JobTypes) -> Result<Vec<JobTypeId>, String> {
        (0..types.len())
            .map(|t| {
                let name = types.name(JobTypeId(t as u16));
                let index = declared_kind(&self.kinds, name, &self.path).map_err(|e| {
                    format!("{e} (the daemon reads its grid at start: restart it after declaring)")
                })?;
                Ok(JobTypeId(index as u16))
            })
            .collect()
    }

    /// Every site of the run's sites file must be one of the grid's.
    fn check_sites(&self, run_path: &str, sites: &SitesFile) -> Result<(), String> {
        let unknown: Vec<&str> =
            sites.sites.iter().map(|s| s.name.as_str()).filter(|n| !self.sites.contains_key(*n)).collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{run_path}: this daemon simulates only the sites of {} ({}); not among them: {}",
            self.path.display(),
            self.sites.keys().map(String::as_str).collect::<Vec<_>>().join(", "),
            unknown.join(", ")
        ))
    }
}

struct Recorded {
    stored: StoredRun,
    /// What is needed to drive it (the kinds as its policy is told them,
    /// and each kind's index in the grid); dropped when the run finishes.
    plan: Option<(SitesFile, PolicyConfig, JobTypes, Vec<JobTypeId>)>,
}

pub struct MemorySim {
    grid: Arc<Grid>,
    runs: Mutex<BTreeMap<u64, Recorded>>,
}

impl MemorySim {
    /// The machinery of a daemon with `simulate = true`: its grid from the
    /// config's sites file (see the module doc), or why there is none.
    pub fn new(config: &DaemonConfig) -> Result<Self, String> {
        Ok(MemorySim { grid: Arc::new(Grid::from_config(config)?), runs: Mutex::new(BTreeMap::new()) })
    }
}

impl Machinery for MemorySim {
    fn create(&self, request: &SubmitRequest, owner: &Reader) -> Result<Created, String> {
        // Simulated jobs read no file: nothing to check of `owner` but who.
        let owner = owner.uid;
        if request.n_jobs == 0 {
            return Err("N must be at least 1".into());
        }
        let kinds = request.run_kinds()?;
        let names = kinds.iter().map(|k| k.name.clone()).collect();
        let counts: Vec<u64> = kinds.iter().map(|k| k.count).collect();
        let types = JobTypes::interleaved(names, &counts)?;
        let in_grid = self.grid.kinds_of(&types)?;
        let (sites, warnings) = crate::config::parse(Path::new(&request.sites_path), &request.sites_toml)
            .map_err(|e| e.to_string())?;
        self.grid.check_sites(&request.sites_path, &sites)?;
        let policy = match &request.policy {
            Some(name) => PolicyConfig::lookup(name)?,
            None => sites.policy.clone(),
        };
        if policy.needs_truth() {
            return Err(format!(
                "the {} policy needs the true site model; the daemon does not offer it",
                policy.name()
            ));
        }
        let mut runs = self.runs.locked();
        let id = runs.keys().next_back().map_or(1, |k| k + 1);
        let stored = StoredRun::queued(id, owner, types.clone(), &policy, &sites);
        runs.insert(id, Recorded { stored: stored.clone(), plan: Some((sites, policy, types, in_grid)) });
        // The sites file's warnings; nothing of the request is changed:
        // these runs keep no checkpoints.
        Ok(Created { run: stored, warnings: warnings.iter().map(super::protocol::warning_text).collect() })
    }

    fn recorded(&self) -> Result<Vec<StoredRun>, String> {
        Ok(self.runs.locked().values().map(|r| r.stored.clone()).collect())
    }

    fn drive(
        &self,
        id: u64,
        wrap: PolicyWrap,
        mut observer: Box<StatusObserver>,
        stop: CancellationToken,
    ) -> BoxFuture<Result<Ending, String>> {
        let prepared = {
            let runs = self.runs.locked();
            runs.get(&id).and_then(|r| r.plan.clone().map(|plan| (r.stored.n_jobs, plan)))
        };
        let grid = self.grid.clone();
        Box::pin(async move {
            let (n_jobs, (sites, config, types, in_grid)) =
                prepared.ok_or_else(|| format!("no unfinished run {id} recorded"))?;
            let mut spec = sites.run_spec(n_jobs, Default::default());
            spec.types = types.clone();
            let inner = policy::build(&config, &spec, None)?;
            let mut policy = wrap(inner, grid.speedup);
            let seed = grid.seed.wrapping_add(id);
            let work = Arc::new(job_work(
                &Scenario::single("", n_jobs, grid.base_runtime, grid.jitter, Vec::new()),
                seed,
            ));
            // Each job's kind as the run knows it (for the ledger) and as
            // the grid does (for the sites); none kept for a run of one kind.
            let own_kinds: Vec<JobTypeId> =
                if types.several() { (0..n_jobs).map(|j| types.of(JobId(j))).collect() } else { Vec::new() };
            let grid_kinds: Vec<JobTypeId> = if in_grid.iter().all(|k| k.index() == 0) {
                Vec::new()
            } else {
                (0..n_jobs).map(|j| in_grid[types.of(JobId(j)).index()]).collect()
            };
            let grid_kinds = Arc::new(grid_kinds);
            let start = grid.clock.now();
            let clock = grid.clock.shifted(-start);
            let ledger = Arc::new(Mutex::new(Ledger::new(n_jobs, sites.sites.len(), false)));
            let mut params = Vec::with_capacity(sites.sites.len());
            let mut backends = Vec::with_capacity(sites.sites.len());
            for (i, site) in sites.sites.iter().enumerate() {
                let (p, shared) = grid
                    .sites
                    .get(&site.name)
                    .ok_or_else(|| format!("site `{}` left the grid", site.name))?;
                let tenancy = shared.attach(id, start)?;
                params.push(p.clone());
                backends.push(
                    SimSite::new(i as u32, tenancy, clock, work.clone(), ledger.clone())
                        .with_kinds(grid_kinds.clone()),
                );
            }
            let report = engine::run(
                policy.as_mut(),
                backends,
                clock,
                EngineOptions::default(),
                observer.as_mut(),
                stop,
            )
            .await;
            if report.ending == Ending::Settled {
                let scenario = Scenario {
                    desc: String::new(),
                    types: run_kinds(&grid, &types, &in_grid),
                    sites: params,
                };
                let ledger = std::mem::replace(&mut *ledger.locked(), Ledger::new(0, 0, false));
                let Measured { errors, .. } =
                    ledger.finish(&scenario, &own_kinds, &[], policy.book(), false, report.stopped_at);
                if !errors.is_empty() {
                    return Err(format!(
                        "the simulated grid's ledger found jobs not run exactly once: {}",
                        errors.join("; ")
                    ));
                }
            }
            Ok(report.ending)
        })
    }

    fn set_state(&self, id: u64, state: RunState, message: Option<&str>) -> Result<(), String> {
        let mut runs = self.runs.locked();
        let run = runs.get_mut(&id).ok_or_else(|| format!("no run {id} recorded"))?;
        run.stored.state = state;
        run.stored.message = message.map(str::to_string);
        if state.finished() {
            run.plan = None;
        }
        Ok(())
    }
}

/// The run's kinds as the ledger checks them: the run's names and counts,
/// the grid's sizes and loads.
fn run_kinds(grid: &Grid, types: &JobTypes, in_grid: &[JobTypeId]) -> Vec<JobType> {
    (0..types.len())
        .map(|t| {
            let id = JobTypeId(t as u16);
            JobType {
                name: types.name(id).to_string(),
                n_jobs: types.count(id),
                base_runtime: grid.base_runtime,
                jitter: grid.jitter,
                load: grid.kinds[in_grid[t].index()].load,
            }
        })
        .collect()
}
