//! The daemon's [`Machinery`] for real runs: the state database and run
//! machinery of `cosched submit` ([`crate::state`], [`crate::run`]).
//!
//! Every daemon run is a row of `runs` like a foreground run (same intent →
//! outcome records, log offsets, its kinds of job in `run_kinds`), plus a row of
//! `daemon_runs` with the number people type, the owner's uid and the
//! daemon's state. Driving a run is [`crate::run::drive`], as for
//! `cosched submit`: a run with recorded submissions is resumed exactly as
//! `cosched submit --resume` would (from its checkpoint when one fits,
//! history rebuilt from the user logs, unknown submissions reconciled with
//! `condor_q` by job tags), so a daemon killed at any moment loses and
//! repeats nothing, and every run writes its report beside its logs. The
//! state directory is locked (`flock`) for the daemon's lifetime: one daemon
//! per state directory, and no foreground cosched in it meanwhile. What the
//! runs learn is kept in the state directory's `memory.db`
//! ([`crate::state::memory`]), one memory for all the daemon's users: a
//! run starts from what any user's runs of its kind learned of its sites.
//!
//! On the fake HTCondor (`COSCHED_FAKE_POOL` set in the daemon's environment,
//! as in tests) run time follows the pool's epoch and speedup.

use super::protocol::{RunState, SubmitRequest};
use super::server::{BoxFuture, Machinery, PolicyWrap, StatusObserver, StoredRun};
use crate::engine::Ending;
use crate::policy::PolicyConfig;
use crate::run::drive;
use crate::state::{Db, RunRecord, RunStatus, StateDir};
use crate::sync::Locked;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

pub struct DbMachinery {
    /// Holds the state directory's lock while the daemon lives.
    state: StateDir,
    /// The run machinery's handle on the database.
    db: Arc<Mutex<Db>>,
    /// Our own connection for `daemon_runs` (same file; WAL lets both in).
    conn: Mutex<Connection>,
}

fn sql_error(path: &Path) -> impl Fn(rusqlite::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

impl DbMachinery {
    /// Opens (creating or migrating) the state directory's database; refuses
    /// a database written by a newer cosched.
    pub fn open(state_dir: &Path) -> Result<DbMachinery, String> {
        let state = StateDir::open(state_dir).map_err(|e| e.to_string())?;
        let db = state.db().map_err(|e| e.to_string())?;
        let path = state.db_path();
        let conn = Connection::open(&path).map_err(sql_error(&path))?;
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(sql_error(&path))?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(sql_error(&path))?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(sql_error(&path))?;
        Ok(DbMachinery { state, db: Arc::new(Mutex::new(db)), conn: Mutex::new(conn) })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.locked()
    }

    fn text_id(&self, id: u64) -> Result<String, String> {
        let path = self.state.db_path();
        self.conn()
            .query_row("SELECT run FROM daemon_runs WHERE id = ?1", params![id as i64], |r| r.get(0))
            .optional()
            .map_err(sql_error(&path))?
            .ok_or_else(|| format!("no run {id} recorded"))
    }
}

/// Run time 0 and rate for a new run: the fake pool's when one is named in
/// the environment, else now at rate 1.
fn time_base() -> Result<(f64, f64), String> {
    let pool = crate::run::simulate::foreign_fake_pool().map_err(|f| f.message)?;
    Ok(pool.map_or_else(|| (crate::engine::wall_clock_unix(), 1.0), |(_, epoch, speedup)| (epoch, speedup)))
}

#[allow(clippy::disallowed_methods)] // the edge: records say when runs were made
fn new_run_id(n: u64) -> (String, String) {
    let now = chrono::Utc::now();
    (format!("{}-d{n}", now.format("%Y%m%dT%H%M%S")), now.to_rfc3339())
}

/// Each job's kind of a recorded run (one kind when the record's kinds do
/// not make a run, which `drive` then reports).
fn recorded_kinds(record: &RunRecord) -> crate::policy::JobTypes {
    let names = record.kinds.iter().map(|k| k.name.clone()).collect();
    let counts: Vec<u64> = record.kinds.iter().map(|k| k.count).collect();
    crate::policy::JobTypes::interleaved(names, &counts)
        .unwrap_or_else(|_| crate::policy::JobTypes::single(record.n_jobs))
}

fn site_names(record: &RunRecord) -> Vec<String> {
    crate::config::parse(&record.sites_path, &record.sites_text)
        .map(|(s, _)| s.sites.iter().map(|x| x.name.clone()).collect())
        .unwrap_or_default()
}

impl Machinery for DbMachinery {
    fn create(&self, request: &SubmitRequest, owner: u32) -> Result<StoredRun, String> {
        let sites_path = PathBuf::from(&request.sites_path);
        i64::try_from(request.n_jobs).map_err(|_| "N is too large".to_string())?;
        let kinds = request.run_kinds()?;
        let mut msgs: Vec<String> = Vec::new();
        let sites = crate::config::parse(&sites_path, &request.sites_toml)
            .map(|(s, _)| s)
            .map_err(|e| msgs.push(e.to_string()))
            .ok();
        let mut descs = Vec::with_capacity(kinds.len());
        for kind in &kinds {
            match crate::submit_desc::parse(Path::new(&kind.job_path), &kind.job_sub) {
                Ok(desc) => descs.push((kind.name.clone(), kind.count, desc)),
                Err(e) => msgs.push(e.to_string()),
            }
        }
        let Some(sites) = sites.filter(|_| msgs.is_empty()) else {
            return Err(format!("{}\nnothing was submitted", msgs.join("\n")));
        };
        // As `cosched submit` checks them: every description against the
        // sites, with its kind's count.
        let problems = descs.iter().flat_map(|(_, count, desc)| {
            crate::submit_desc::validate(&sites, desc, i64::try_from(*count).ok())
        });
        let problems: Vec<String> = crate::submit_desc::without_repeats(problems.collect())
            .into_iter()
            .filter(|p| p.is_error())
            .map(|p| p.to_string())
            .collect();
        if !problems.is_empty() {
            return Err(format!("{}\nnothing was submitted", problems.join("\n")));
        }
        let job_kinds =
            crate::submit_desc::JobKinds::new(descs).map_err(|e| format!("{e}\nnothing was submitted"))?;
        // HTCondor's own reading of the batches, as `cosched submit` has it
        // before anything is submitted (`condor::preflight`).
        let found = crate::condor::preflight(&crate::condor::Condor::new(&sites.condor), &sites, &job_kinds)
            .map_err(|why| format!("{why}\nnothing was submitted"))?;
        let refused: Vec<String> =
            found.problems.iter().filter(|p| p.is_error()).map(|p| p.to_string()).collect();
        if !refused.is_empty() {
            return Err(format!("{}\nnothing was submitted", refused.join("\n")));
        }
        let policy = match &request.policy {
            Some(name) => PolicyConfig::lookup(name)?,
            None => sites.policy.clone(),
        };
        if policy.needs_truth() {
            return Err(format!(
                "the {} policy needs the true site model; it runs only in `cosched bench`",
                policy.name()
            ));
        }
        let (epoch, rate) = time_base()?;
        let path = self.state.db_path();
        let next: i64 = self
            .conn()
            .query_row("SELECT COALESCE(MAX(id), 0) + 1 FROM daemon_runs", [], |r| r.get(0))
            .map_err(sql_error(&path))?;
        let (run_id, created) = new_run_id(next as u64);
        let record = RunRecord {
            id: run_id.clone(),
            created,
            n_jobs: request.n_jobs,
            sites_path,
            sites_text: request.sites_toml.clone(),
            // Recorded with the run: a restarted daemon resumes it with
            // these kinds, as `--resume` does a foreground run.
            kinds: kinds
                .into_iter()
                .map(|k| crate::state::RecordedKind {
                    name: k.name,
                    count: k.count,
                    job_path: PathBuf::from(k.job_path),
                    job_text: k.job_sub,
                })
                .collect(),
            policy: policy.name().to_string(),
            blind_types: false,
            epoch_unix: epoch,
            simulate: false,
            speedup: rate,
            status: RunStatus::Running,
        };
        self.db.locked().create_run(&record).map_err(|e| e.to_string())?;
        let conn = self.conn();
        conn.execute(
            "INSERT INTO daemon_runs (run, owner, state) VALUES (?1, ?2, 'queued')",
            params![run_id, i64::from(owner)],
        )
        .map_err(sql_error(&path))?;
        let id = conn.last_insert_rowid() as u64;
        Ok(StoredRun::queued(id, owner, job_kinds.types().clone(), &policy, &sites))
    }

    fn recorded(&self) -> Result<Vec<StoredRun>, String> {
        let path = self.state.db_path();
        let rows: Vec<(i64, String, i64, String, Option<String>)> = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare("SELECT id, run, owner, state, message FROM daemon_runs ORDER BY id")
                .map_err(sql_error(&path))?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
                .map_err(sql_error(&path))?;
            rows.collect::<Result<_, _>>().map_err(sql_error(&path))?
        };
        let db = self.db.locked();
        let mut out = Vec::with_capacity(rows.len());
        for (id, run, owner, state, message) in rows {
            let record = db.run(&run).map_err(|e| e.to_string())?.ok_or_else(|| {
                format!("{}: daemon run {id} names run {run}, which is not in `runs`", path.display())
            })?;
            let state = RunState::parse(&state).unwrap_or(RunState::Failed);
            let sites = site_names(&record);
            // A finished run is shown as its records say it ended; an
            // unfinished one is replayed when it resumes.
            let (done, given_up) = if state.finished() {
                let counts =
                    crate::run::drive::settled_counts(&db, &record, &sites, &self.state.run_dir(&run))
                        .map_err(|e| e.to_string())?;
                let given_up =
                    if state == RunState::Cancelled { 0 } else { record.n_jobs - counts.min(record.n_jobs) };
                (counts, given_up)
            } else {
                (0, 0)
            };
            out.push(StoredRun {
                id: id as u64,
                owner: owner as u32,
                state,
                n_jobs: record.n_jobs,
                kinds: recorded_kinds(&record),
                policy: record.policy.clone(),
                sites,
                message,
                done,
                given_up,
            });
        }
        Ok(out)
    }

    fn drive(
        &self,
        id: u64,
        wrap: PolicyWrap,
        mut observer: Box<StatusObserver>,
        stop: CancellationToken,
    ) -> BoxFuture<Result<Ending, String>> {
        let prepared = self.text_id(id).and_then(|text| {
            let record = self.db.locked().run(&text).map_err(|e| e.to_string())?;
            let record = record.ok_or_else(|| format!("run {text} is not in `runs`"))?;
            Ok((record, self.state.run_dir(&text)))
        });
        let memory = self.state.memory_path();
        let db = self.db.clone();
        Box::pin(async move {
            let (record, run_dir) = prepared?;
            let id = record.id.clone();
            let run = drive::Run::recorded(db, run_dir, record, Some(memory)).map_err(|f| f.message)?;
            let driven = drive::run(run, wrap, observer.as_mut(), stop).await.map_err(|f| f.message)?;
            match driven.report {
                Some(Ok(path)) => tracing::info!("run {id}: report: {}", path.display()),
                Some(Err(e)) => tracing::warn!("run {id}: no report written ({e})"),
                None => {}
            }
            Ok(driven.ending)
        })
    }

    fn set_state(&self, id: u64, state: RunState, message: Option<&str>) -> Result<(), String> {
        let path = self.state.db_path();
        let changed = self
            .conn()
            .execute(
                "UPDATE daemon_runs SET state = ?1, message = ?2 WHERE id = ?3",
                params![state.as_str(), message, id as i64],
            )
            .map_err(sql_error(&path))?;
        if changed == 0 {
            return Err(format!("no run {id} recorded"));
        }
        Ok(())
    }
}
