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

use super::access::{self, Reader};
use super::protocol::{warning_text, RunState, SubmitRequest};
use super::server::{BoxFuture, Created, Machinery, PolicyWrap, StatusObserver, StoredRun};
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
    /// Held across a run's creation, which makes its number and name one
    /// step: two submits at the same moment get two runs.
    conn: Mutex<Connection>,
    /// The daemon config's `condor_bin_dir`: the only HTCondor tools its
    /// runs run, whatever their sites files say ([`condor_settings`]).
    condor_bin_dir: Option<PathBuf>,
    /// The daemon config's `min_checkpoint_every`: no run checkpoints more
    /// often, whatever its sites file says ([`checkpoint_every`]).
    min_checkpoint_every: f64,
}

fn sql_error(path: &Path) -> impl Fn(rusqlite::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

impl DbMachinery {
    /// Opens (creating or migrating) the state directory's database; refuses
    /// a database written by a newer cosched. Its runs run the HTCondor
    /// tools of `condor_bin_dir` (`None`: the daemon's `PATH`) and
    /// checkpoint at most every `min_checkpoint_every` real seconds.
    pub fn open(
        state_dir: &Path,
        condor_bin_dir: Option<PathBuf>,
        min_checkpoint_every: f64,
    ) -> Result<DbMachinery, String> {
        let state = StateDir::open(state_dir).map_err(|e| e.to_string())?;
        let db = state.db().map_err(|e| e.to_string())?;
        let path = state.db_path();
        let conn = Connection::open(&path).map_err(sql_error(&path))?;
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(sql_error(&path))?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(sql_error(&path))?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(sql_error(&path))?;
        Ok(DbMachinery {
            state,
            db: Arc::new(Mutex::new(db)),
            conn: Mutex::new(conn),
            condor_bin_dir,
            min_checkpoint_every,
        })
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

/// A client's `[condor] poll_interval` below this is refused: reading a user
/// log more often than ten times a second is a busy loop in a daemon that
/// every user shares.
const MIN_POLL_INTERVAL: f64 = 0.1;
/// A client's `[condor] retries` above this is refused: each is a
/// `condor_rm` the daemon's account sends to a shared schedd.
const MAX_RETRIES: u32 = 20;

/// The `[condor]` settings a run of the daemon gets from its sites file
/// (`sites_path`, the client's): its own numbers within bounds, and the
/// daemon's `bin_dir`. A `bin_dir` other than the daemon's is refused, not
/// ignored: it would choose the programs the daemon's account runs, and a
/// user who set it should learn that the daemon does not run those. `Err`
/// lists every setting refused, with what to do.
pub fn condor_settings(
    sites_path: &Path,
    asked: &crate::config::CondorSettings,
    daemon_bin_dir: Option<&Path>,
) -> Result<crate::config::CondorSettings, String> {
    let at = sites_path.display();
    let mut refused = Vec::new();
    if let Some(dir) = asked.bin_dir.as_deref().filter(|d| Some(*d) != daemon_bin_dir) {
        let own = daemon_bin_dir.map_or("the daemon's PATH".to_string(), |d| {
            format!("its own `condor_bin_dir` = {}", d.display())
        });
        refused.push(format!(
            "{at}: [condor] bin_dir = {}: the daemon runs only the HTCondor tools of its own configuration \
             ({own}); remove bin_dir from the sites file you hand the daemon",
            dir.display()
        ));
    }
    let mut bounded = |key: &str, value: String, ok: bool, limit: String| {
        if !ok {
            refused.push(format!(
                "{at}: [condor] {key} = {value}: the daemon accepts {limit}; change or remove it"
            ));
        }
    };
    // Timeouts past a month were refused as the sites file was read
    // (`config::MAX_CONDOR_SECONDS`); these bounds are the shared daemon's.
    let poll = asked.poll_interval;
    bounded(
        "poll_interval",
        format!("{poll:?}"),
        poll >= MIN_POLL_INTERVAL,
        format!("at least {MIN_POLL_INTERVAL} s"),
    );
    bounded(
        "retries",
        asked.retries.to_string(),
        asked.retries <= MAX_RETRIES,
        format!("at most {MAX_RETRIES}"),
    );
    if !refused.is_empty() {
        return Err(refused.join("\n"));
    }
    Ok(crate::config::CondorSettings { bin_dir: daemon_bin_dir.map(Path::to_path_buf), ..asked.clone() })
}

/// The `[run] checkpoint_every` a run of the daemon gets from its sites
/// file (`sites_path`, the client's): the client's, or the daemon's floor
/// (`min_checkpoint_every`) where the client's is smaller, with the
/// sentence that tells the client so.
///
/// Raised, not refused (unlike a `[condor] poll_interval` below its bound):
/// a checkpoint is a shortcut, never the record, so a run checkpointed less
/// often than asked does and ends exactly as it would have; only a resume
/// replays a few more seconds. A user who keeps one sites file for
/// `cosched submit` and `--daemon` expects it to be taken, not sent back
/// over an interval the daemon is free to choose; and a run recorded before
/// this floor (or under a lower one) is already accepted, so raising is
/// the one rule for new and recorded runs alike. 0 (no checkpoints) stays 0:
/// it writes nothing, and only the run's own resume replays more.
pub fn checkpoint_every(sites_path: &Path, asked: f64, floor: f64) -> (f64, Option<String>) {
    if asked == 0.0 || asked >= floor {
        return (asked, None);
    }
    let told = format!(
        "{}: [run] checkpoint_every = {asked}: this daemon checkpoints a run at most every {floor} s \
         (its min_checkpoint_every); this run is checkpointed every {floor} s",
        sites_path.display()
    );
    (floor, Some(told))
}

/// The file of a finished run's directory that keeps its last status
/// ([`Machinery::keep_final_status`]).
const FINAL_STATUS: &str = "daemon-status.json";

/// A finished run's last status, if it was kept and reads; else the
/// restarted daemon shows its counts only.
fn read_final_status(run_dir: &Path) -> Option<super::protocol::RunStatus> {
    let file = run_dir.join(FINAL_STATUS);
    let text = std::fs::read(&file).ok()?;
    serde_json::from_slice(&text)
        .inspect_err(|e| {
            tracing::warn!("{}: not a run's status ({e}); showing its counts only", file.display())
        })
        .ok()
}

impl Machinery for DbMachinery {
    fn create(&self, request: &SubmitRequest, reader: &Reader) -> Result<Created, String> {
        let owner = reader.uid;
        let sites_path = PathBuf::from(&request.sites_path);
        i64::try_from(request.n_jobs).map_err(|_| "N is too large".to_string())?;
        let kinds = request.run_kinds()?;
        let mut msgs: Vec<String> = Vec::new();
        // Its warnings go back to the client with the run's number, as
        // `cosched submit` prints them in the foreground.
        let mut warned: Vec<crate::config::Problem> = Vec::new();
        let sites = crate::config::parse(&sites_path, &request.sites_toml)
            .map(|(s, w)| {
                warned = w;
                s
            })
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
        warned.extend(problems);
        let (problems, mut warned): (Vec<_>, Vec<_>) =
            crate::submit_desc::without_repeats(warned).into_iter().partition(|p| p.is_error());
        if !problems.is_empty() {
            let problems: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            return Err(format!("{}\nnothing was submitted", problems.join("\n")));
        }
        // Before HTCondor sees a file (its dry run reads the executable):
        // the daemon's account would read for the caller what the caller
        // may not read (`access`).
        let who = access::who(owner);
        let refused: Vec<String> =
            descs.iter().flat_map(|(_, _, desc)| access::refusals(reader, &who, desc)).collect();
        if !refused.is_empty() {
            return Err(format!("{}\nnothing was submitted", refused.join("\n")));
        }
        let job_kinds =
            crate::submit_desc::JobKinds::new(descs).map_err(|e| format!("{e}\nnothing was submitted"))?;
        let condor = condor_settings(&sites_path, &sites.condor, self.condor_bin_dir.as_deref())
            .map_err(|why| format!("{why}\nnothing was submitted"))?;
        // The record keeps the client's sites file as sent; `drive` applies
        // the floor each time the run is driven.
        let (_, raised) =
            checkpoint_every(&sites_path, sites.run.checkpoint_every, self.min_checkpoint_every);
        // HTCondor's own reading of the batches, as `cosched submit` has it
        // before anything is submitted (`condor::preflight`).
        let found = crate::condor::preflight(&crate::condor::Condor::new(&condor), &sites, &job_kinds)
            .map_err(|why| format!("{why}\nnothing was submitted"))?;
        let refused: Vec<String> =
            found.problems.iter().filter(|p| p.is_error()).map(|p| p.to_string()).collect();
        if !refused.is_empty() {
            return Err(format!("{}\nnothing was submitted", refused.join("\n")));
        }
        warned.extend(found.problems.into_iter().filter(|p| !p.is_error()));
        let policy = match &request.policy {
            Some(name) => PolicyConfig::lookup(name)?,
            None => sites.policy.clone(),
        };
        warned.extend(crate::config::ignored_settings(&policy, &sites));
        if policy.needs_truth() {
            return Err(format!(
                "the {} policy needs the true site model; it runs only in `cosched bench`",
                policy.name()
            ));
        }
        let (epoch, rate) = time_base()?;
        let path = self.state.db_path();
        // Held until the run is in `daemon_runs`: creates run in parallel
        // (one blocking task per submit), and two that read the same next
        // number made the same run name, one refused by `runs`' key.
        let conn = self.conn();
        let next: i64 = conn
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
        // Two writes on two connections, so two transactions: a crash (or a
        // failed insert) between them leaves a `runs` row that no daemon run
        // names. That orphan is harmless clutter, so the two are left apart
        // (`create_run` is the state module's, on its own connection):
        // - nothing was submitted for it: a run is driven only once `create`
        //   has returned, and the client was told no number (its connection
        //   ended, or it got this error), so it has nothing to follow;
        // - a restarted daemon lists and resumes the runs of `daemon_runs`
        //   only (`recorded`), so the orphan is neither shown nor driven,
        //   and no run directory was made for it;
        // - its number is given again (`MAX(id) + 1` of `daemon_runs`), to a
        //   run named after another second (`…T…-dN`): no clash with the
        //   orphan's name, except for a submit in the very second of the
        //   failure, refused by `runs`' key (nothing made, retried at once).
        // `an_orphan_runs_row_is_neither_listed_nor_driven_and_its_number_is_reused`
        // holds the daemon to this.
        self.db.locked().create_run(&record).map_err(|e| e.to_string())?;
        // The number read above, so that run N is named `…-dN`.
        conn.execute(
            "INSERT INTO daemon_runs (id, run, owner, state) VALUES (?1, ?2, ?3, 'queued')",
            params![next, run_id, i64::from(owner)],
        )
        .map_err(sql_error(&path))?;
        let mut warnings: Vec<String> =
            crate::submit_desc::without_repeats(warned).iter().map(warning_text).collect();
        warnings.extend(raised);
        Ok(Created {
            run: StoredRun::queued(next as u64, owner, job_kinds.types().clone(), &policy, &sites),
            warnings,
        })
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
            // A finished run is shown as its records say it ended, with
            // the figures it last showed; an unfinished one is replayed
            // when it resumes.
            let last = if state.finished() { read_final_status(&self.state.run_dir(&run)) } else { None };
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
                last,
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
        let bin_dir = self.condor_bin_dir.clone();
        let min_checkpoint_every = self.min_checkpoint_every;
        Box::pin(async move {
            let (record, run_dir) = prepared?;
            let id = record.id.clone();
            let mut run = drive::Run::recorded(db, run_dir, record, Some(memory)).map_err(|f| f.message)?;
            // Whatever its record says (a run recorded before bin_dir was
            // checked, or under another config): the daemon's own tools.
            if run.sites.condor.bin_dir != bin_dir {
                tracing::warn!(
                    "run {id}: its sites file names [condor] bin_dir {:?}; running the daemon's ({:?})",
                    run.sites.condor.bin_dir,
                    bin_dir
                );
                run.sites.condor.bin_dir = bin_dir;
            }
            // Its record keeps the client's interval: the floor is applied
            // here, for a new run as for one recorded before it.
            let (every, raised) = checkpoint_every(
                &run.record.sites_path,
                run.sites.run.checkpoint_every,
                min_checkpoint_every,
            );
            if let Some(why) = raised {
                tracing::info!("run {id}: {why}");
                run.sites.run.checkpoint_every = every;
            }
            let driven = drive::run(run, wrap, observer.as_mut(), stop).await.map_err(|f| f.message)?;
            match driven.report {
                Some(Ok(path)) => tracing::info!("run {id}: report: {}", path.display()),
                Some(Err(e)) => tracing::warn!("run {id}: no report written ({e})"),
                None => {}
            }
            Ok(driven.ending)
        })
    }

    /// In the run's directory (`daemon-status.json`), beside its report.
    fn keep_final_status(&self, id: u64, status: &super::protocol::RunStatus) -> Result<(), String> {
        let dir = self.state.run_dir(&self.text_id(id)?);
        let file = dir.join(FINAL_STATUS);
        let text = serde_json::to_vec(status).map_err(|e| format!("encoding the status: {e}"))?;
        let temporary = file.with_extension("new");
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&temporary, text))
            .and_then(|()| std::fs::rename(&temporary, &file))
            .map_err(|e| format!("{}: {e}", file.display()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CondorSettings;

    /// A1 of the daemon's exploratory test: a sites file naming its own
    /// `bin_dir` made the daemon's account run the client's programs.
    #[test]
    fn a_client_may_not_choose_the_htcondor_tools_nor_make_the_daemon_spin() {
        let sites = Path::new("/home/a/sites.toml");
        let daemon = Path::new("/opt/condor/bin");
        let evil = CondorSettings {
            bin_dir: Some("/home/a/evil".into()),
            poll_interval: 0.001,
            ..CondorSettings::default()
        };
        let why = condor_settings(sites, &evil, Some(daemon)).unwrap_err();
        assert!(why.contains("/home/a/sites.toml: [condor] bin_dir = /home/a/evil"), "{why}");
        assert!(why.contains("/opt/condor/bin") && why.contains("remove bin_dir"), "{why}");
        assert!(why.contains("poll_interval = 0.001"), "{why}");
        let why = condor_settings(
            sites,
            &CondorSettings { bin_dir: Some("/usr/bin".into()), ..evil.clone() },
            None,
        )
        .unwrap_err();
        assert!(why.contains("bin_dir = /usr/bin") && why.contains("the daemon's PATH"), "{why}");
        let many = CondorSettings { retries: 1000, ..CondorSettings::default() };
        assert!(condor_settings(sites, &many, None).unwrap_err().contains("retries = 1000"));

        // The run's own patience is its own; the tools are the daemon's.
        let own =
            CondorSettings { bin_dir: None, submit_timeout: 20.0, retries: 6, poll_interval: 0.2, ..evil };
        let got = condor_settings(sites, &own, Some(daemon)).unwrap();
        assert_eq!(got, CondorSettings { bin_dir: Some(daemon.to_path_buf()), ..own.clone() });
        let same = CondorSettings { bin_dir: Some("/opt/condor/bin/".into()), ..own.clone() };
        assert_eq!(condor_settings(sites, &same, Some(daemon)).unwrap().bin_dir.as_deref(), Some(daemon));
        assert_eq!(condor_settings(sites, &own, None).unwrap().bin_dir, None);
    }

    /// Found by a tester attacking the daemon as a hostile user: a sites
    /// file's `[run] checkpoint_every = 0.001` made the shared daemon write
    /// and sync the run's checkpoint a thousand times a second.
    #[test]
    fn a_checkpoint_interval_below_the_daemons_floor_is_raised_and_the_client_told() {
        let sites = Path::new("/home/a/sites.toml");
        let (every, told) = checkpoint_every(sites, 0.001, 10.0);
        assert_eq!(every, 10.0, "the daemon's floor, not the client's interval");
        let told = told.expect("the client is told");
        assert!(told.starts_with("/home/a/sites.toml: [run] checkpoint_every = 0.001: "), "{told}");
        assert!(told.contains("min_checkpoint_every") && told.ends_with("every 10 s"), "{told}");
        assert_eq!(checkpoint_every(sites, 60.0, 10.0), (60.0, None), "above the floor: the client's");
        assert_eq!(checkpoint_every(sites, 10.0, 10.0), (10.0, None));
        assert_eq!(checkpoint_every(sites, 0.0, 10.0), (0.0, None), "no checkpoints stays none");
        assert_eq!(checkpoint_every(sites, 0.001, 0.0), (0.001, None), "a floor of 0 is none");
    }

    /// A user in no group.
    fn user(uid: u32) -> Reader {
        Reader { uid, groups: Vec::new() }
    }

    /// A request of 3 jobs of `job.sh` at one local site, with a
    /// `condor_submit` that accepts every dry run, in `dir`; the tools'
    /// directory.
    fn small_request(dir: &Path) -> (SubmitRequest, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        // Its files are read for users of other uids (`access`).
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.join("bin");
        std::fs::create_dir(&bin).unwrap();
        crate::condor::testing::script(&bin, "condor_submit", "exit 0");
        let job = dir.join("job.sh");
        std::fs::write(&job, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&job, std::fs::Permissions::from_mode(0o755)).unwrap();
        let request = SubmitRequest {
            n_jobs: 3,
            sites_path: dir.join("sites.toml").display().to_string(),
            sites_toml: "[[site]]\nname = \"pool\"\n".into(),
            job_path: dir.join("job.sub").display().to_string(),
            job_sub: format!("executable = {}\nqueue\n", job.display()),
            kinds: Vec::new(),
            policy: Some("bulk".into()),
        };
        (request, bin)
    }

    /// Asked of the same tester's findings: what a crash between a run's
    /// `runs` row and its `daemon_runs` row leaves (see `create`) is
    /// harmless: the restarted daemon neither lists nor drives it, and its
    /// number goes to the next run, under a name of its own.
    #[test]
    fn an_orphan_runs_row_is_neither_listed_nor_driven_and_its_number_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (request, bin) = small_request(dir.path());
        let state = dir.path().join("state");
        // Made in an earlier second, as by a daemon that crashed then.
        let orphan = "20250101T000000-d2".to_string();
        {
            let machinery = DbMachinery::open(&state, Some(bin.clone()), 0.0).unwrap();
            let first = machinery.create(&request, &user(1000)).unwrap();
            assert_eq!(first.run.id, 1);
            let db = machinery.db.locked();
            let recorded = db.run(&machinery.text_id(1).unwrap()).unwrap().unwrap();
            // `create`'s first write for run 2, and the crash before its second.
            db.create_run(&RunRecord { id: orphan.clone(), ..recorded }).unwrap();
        }
        let machinery = DbMachinery::open(&state, Some(bin), 0.0).unwrap();
        let listed: Vec<u64> = machinery.recorded().unwrap().iter().map(|r| r.id).collect();
        assert_eq!(listed, vec![1], "the orphan is not listed, so not resumed");
        let next = machinery.create(&request, &user(1001)).unwrap();
        assert_eq!(next.run.id, 2, "its number is given again");
        let name = machinery.text_id(2).unwrap();
        assert!(name.ends_with("-d2") && name != orphan, "under a name of its own: {name}");
        let listed: Vec<u64> = machinery.recorded().unwrap().iter().map(|r| r.id).collect();
        assert_eq!(listed, vec![1, 2]);
        assert!(machinery.db.locked().run(&orphan).unwrap().is_some(), "left as it was");
        assert!(!machinery.state.run_dir(&orphan).exists(), "nothing was made for it");
    }

    /// A4 of the daemon's exploratory test: two creates in the same second
    /// read the same next number and made the same run name; one was
    /// refused with "UNIQUE constraint failed: runs.id".
    #[test]
    fn submits_at_the_same_moment_each_get_a_run_of_their_own() {
        const SUBMITS: usize = 8;
        const ROUNDS: usize = 3;
        let dir = tempfile::tempdir().unwrap();
        let (request, bin) = small_request(dir.path());
        let machinery = Arc::new(DbMachinery::open(&dir.path().join("state"), Some(bin), 0.0).unwrap());
        let mut ids = Vec::new();
        for _ in 0..ROUNDS {
            let start = Arc::new(std::sync::Barrier::new(SUBMITS));
            let creates: Vec<_> = (0..SUBMITS)
                .map(|i| {
                    let (machinery, request, start) = (machinery.clone(), request.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        machinery.create(&request, &user(1000 + i as u32))
                    })
                })
                .collect();
            for create in creates {
                let created = create.join().unwrap().unwrap_or_else(|e| panic!("a submit was refused: {e}"));
                ids.push(created.run.id);
            }
        }
        ids.sort_unstable();
        assert_eq!(ids, (1..=(SUBMITS * ROUNDS) as u64).collect::<Vec<_>>());
        for id in ids {
            let name = machinery.text_id(id).unwrap();
            assert!(name.ends_with(&format!("-d{id}")), "run {id} is named {name}");
        }
    }
}
