//! A [`Machinery`] that runs every job on the simulated grid inside the
//! daemon's own process (the `[site.simulate]` model of each site, in scaled
//! real time) and keeps its records in memory.
//!
//! It exists for the soak benchmark and for exercising the daemon's protocol,
//! fair share, cancellation and watch without HTCondor processes: 20 runs on
//! 50 sites would otherwise mean thousands of `condor_submit` processes on a
//! 2-core machine. It is NOT crash-safe: nothing survives a restart. Runs that
//! must survive go through the state database (`simulate = "fake"` or real
//! HTCondor).
//!
//! Each run drives a grid of its own (its own model of every site), so runs
//! at one site share only the daemon's fair share of its capacity, not the
//! site's resource. A run of several kinds tells its policy each job's
//! kind, but the sites' `[site.simulate]` models know no kinds: every kind
//! runs there as one, of load 1 (issue 55 item 2 is not met here yet).

use super::protocol::{RunState, SubmitRequest};
use super::server::{BoxFuture, Machinery, PolicyWrap, StatusObserver, StoredRun};
use crate::engine::{self, Ending, EngineOptions, RunClock};
use crate::policy::{self, JobTypes, PolicyConfig};
use crate::sim::backend::SimSite;
use crate::sim::metrics::Ledger;
use crate::sim::model::{job_work, site_seed, Scenario, SiteSim};
use crate::sync::Locked;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

struct Recorded {
    stored: StoredRun,
    /// What is needed to drive it (the kinds as its policy is told them);
    /// dropped when the run finishes.
    plan: Option<(crate::config::SitesFile, PolicyConfig, JobTypes)>,
}

pub struct MemorySim {
    /// Simulated seconds per real second.
    speedup: f64,
    runs: Mutex<BTreeMap<u64, Recorded>>,
}

impl MemorySim {
    pub fn new(speedup: f64) -> Self {
        MemorySim { speedup, runs: Mutex::new(BTreeMap::new()) }
    }
}

impl Machinery for MemorySim {
    fn create(&self, request: &SubmitRequest, owner: u32) -> Result<StoredRun, String> {
        if request.n_jobs == 0 {
            return Err("N must be at least 1".into());
        }
        let kinds = request.run_kinds()?;
        let names = kinds.iter().map(|k| k.name.clone()).collect();
        let counts: Vec<u64> = kinds.iter().map(|k| k.count).collect();
        let types = JobTypes::interleaved(names, &counts)?;
        let (sites, _warnings) = crate::config::parse(Path::new(&request.sites_path), &request.sites_toml)
            .map_err(|e| e.to_string())?;
        if let Err(missing) = sites.simulated_sites() {
            return Err(format!(
                "{}: this daemon simulates every run, and these sites have no [site.simulate]: {}",
                request.sites_path,
                missing.join(", ")
            ));
        }
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
        runs.insert(id, Recorded { stored: stored.clone(), plan: Some((sites, policy, types)) });
        Ok(stored)
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
            runs.get(&id).and_then(|r| {
                r.plan.clone().map(|(sites, policy, types)| (r.stored.n_jobs, sites, policy, types))
            })
        };
        let speedup = self.speedup;
        Box::pin(async move {
            let (n_jobs, sites, config, types) =
                prepared.ok_or_else(|| format!("no unfinished run {id} recorded"))?;
            let params = sites.simulated_sites().map_err(|m| format!("sites without a model: {m:?}"))?;
            let mut spec = sites.run_spec(n_jobs, Default::default());
            spec.types = types;
            let inner = policy::build(&config, &spec, None)?;
            let mut policy = wrap(inner, speedup);
            let scenario = Scenario::single(
                String::new(),
                n_jobs,
                sites.simulate.base_runtime,
                sites.simulate.jitter,
                params.clone(),
            );
            let seed = sites.simulate.seed.wrapping_add(id);
            let work = Arc::new(job_work(&scenario, seed));
            let clock = RunClock::scaled(0.0, speedup);
            let ledger = Arc::new(Mutex::new(Ledger::new(n_jobs, params.len(), false)));
            let backends: Vec<SimSite> = params
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let sim = SiteSim::new(p, site_seed(seed, i));
                    SimSite::new(i as u32, sim, clock, work.clone(), ledger.clone())
                })
                .collect();
            let report = engine::run(
                policy.as_mut(),
                backends,
                clock,
                EngineOptions::default(),
                observer.as_mut(),
                stop,
            )
            .await;
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
