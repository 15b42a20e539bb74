//! The state directory and its SQLite database: what `cosched submit` must
//! not forget, so that a run survives Ctrl-C, `kill -9` and power loss and
//! can be continued with `cosched submit --resume DIR` without losing or
//! duplicating a job.
//!
//! # Layout of a state directory
//! ```text
//! DIR/state.db            this database (WAL mode: also state.db-wal, state.db-shm)
//! DIR/lock                held (flock) by the one cosched working in DIR,
//!                         which writes its pid and run there for the next
//!                         one to name it
//! DIR/memory.db           the daemon's memory of sites and kinds, shared by
//!                         its users (a foreground run uses the user's own:
//!                         see [`memory`])
//! DIR/runs/<run-id>/      per-run files: submit files and user logs per site,
//!                         what the policy decided (decisions.jsonl, see
//!                         `run::decisions`), the run's report (report/),
//!                         the fake pool of a --simulate run (pool/)
//! ```
//!
//! # Tables (inspect with `sqlite3 DIR/state.db`)
//! - `runs` — one row per `cosched submit`: `id`, `created` (RFC 3339),
//!   `n_jobs`, `sites_path`/`sites_text` (the sites file as it was),
//!   `job_path`/`job_text` (the first kind's submit description as it was), `policy`,
//!   `blind_types` (the policy was told every job is of one kind),
//!   `epoch_unix` (the instant that is t = 0 of the run; log timestamps are
//!   mapped onto run time from it), `simulate`/`speedup` (a `--simulate` run and
//!   its clock rate), `status` (`running`, `interrupted`, `done`, `failed`,
//!   `hung`), `finished`, `memory` (the memory database a foreground run was
//!   started with, which its resumes use: a path, `''` for none (it starts
//!   cold and keeps nothing); NULL for a daemon's run, whose memory is the
//!   daemon's, and for a run recorded before schema 6).
//! - `run_kinds` — per (`run`, `kind`, its index in the run): the kind's
//!   `name`, its `count` of jobs, and its submit description as it was
//!   (`job_path`/`job_text`). A run recorded before this table (schema < 3)
//!   has none: it is of one kind, the `runs` row's description.
//! - `submissions` — one row per batch handed to `condor_submit`, keyed by
//!   (`run`, `batch`; the batch id is also in the jobs as `CoschedBatch`), `site`,
//!   `site_index`, `jobs` (JSON array of job indexes, in proc order),
//!   `submit_file`, `state` (`intent` → `submitted` | `failed`), `cluster`,
//!   `error`, `recorded`/`resolved` (RFC 3339).
//! - `log_offsets` — per (`run`, `site`): bytes of the site's user log already
//!   turned into events (a checkpoint; a resume re-reads the log from 0).
//! - `legacy_site_memory` — what runs learned before memory moved to the
//!   memory database ([`memory`]; schema 2 kept it here as `site_memory`,
//!   per site name, not per kind): the next run that has a memory database
//!   moves its rows there as memory of an unknown kind
//!   ([`crate::policy::UNKNOWN_KIND`]), which is only carried over to the
//!   kinds that run at the site, never taken as their knee.
//! - `daemon_runs` — runs handed to `cosched daemon`: the number people type
//!   (`id`), the `run`, its `owner` (uid from the kernel), the daemon's `state`
//!   (`queued`, `running`, `cancelling`, `done`, `cancelled`, `failed`) and a
//!   `message`. Written by [`crate::daemon`] only.
//! - `meta` — key/value: `schema` (same as `PRAGMA user_version`) and
//!   `written_by` (the cosched version that last migrated the file).
//!
//! # Durability
//! Every write is its own transaction, committed before the function returns,
//! with `synchronous = FULL`, so a row that was written survives `kill -9` and
//! power loss. In particular [`Db::record_intent`] is committed before
//! `condor_submit` starts (through [`DbJournal`], the run's journal); see
//! [`crate::run::drive`] for why that makes resume safe.
//!
//! # Schema versions
//! `PRAGMA user_version` is the schema version. Opening applies the missing
//! migrations in one transaction; a database with a version newer than this
//! build knows is refused (never read with the wrong meaning).

mod journal;
pub mod memory;

pub use journal::DbJournal;
pub use memory::MemoryDb;

use crate::policy::{JobId, SiteMemory};
use rusqlite::{params, Connection, OptionalExtension};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The schema this build writes; `MIGRATIONS[i]` takes version i to i + 1.
pub const SCHEMA_VERSION: u32 = 6;

const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    // 0 → 1: the first schema.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        created TEXT NOT NULL,
        n_jobs INTEGER NOT NULL,
        sites_path TEXT NOT NULL,
        sites_text TEXT NOT NULL,
        job_path TEXT NOT NULL,
        job_text TEXT NOT NULL,
        policy TEXT NOT NULL,
        epoch_unix REAL NOT NULL,
        simulate INTEGER NOT NULL,
        speedup REAL NOT NULL,
        status TEXT NOT NULL
            CHECK (status IN ('running', 'interrupted', 'done', 'failed', 'hung')),
        finished TEXT
     );
     CREATE TABLE submissions (
        batch TEXT NOT NULL,
        run TEXT NOT NULL REFERENCES runs(id),
        site TEXT NOT NULL,
        site_index INTEGER NOT NULL,
        jobs TEXT NOT NULL,
        submit_file TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('intent', 'submitted', 'failed')),
        cluster INTEGER,
        error TEXT,
        recorded TEXT NOT NULL,
        resolved TEXT,
        PRIMARY KEY (run, batch)
     );
     CREATE TABLE log_offsets (
        run TEXT NOT NULL REFERENCES runs(id),
        site TEXT NOT NULL,
        offset INTEGER NOT NULL,
        PRIMARY KEY (run, site)
     );
     CREATE TABLE site_memory (
        site TEXT PRIMARY KEY,
        memory TEXT NOT NULL,
        updated TEXT NOT NULL,
        run TEXT
     );",
    // 1 → 2: runs owned by daemon users (see crate::daemon::dbrun).
    "CREATE TABLE daemon_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run TEXT NOT NULL UNIQUE REFERENCES runs(id),
        owner INTEGER NOT NULL,
        state TEXT NOT NULL
            CHECK (state IN ('queued', 'running', 'cancelling', 'done', 'cancelled', 'failed')),
        message TEXT
     );",
    // 2 → 3: runs of several kinds of job (`cosched submit SITES --jobs …`).
    "CREATE TABLE run_kinds (
        run TEXT NOT NULL REFERENCES runs(id),
        kind INTEGER NOT NULL,
        name TEXT NOT NULL,
        count INTEGER NOT NULL,
        job_path TEXT NOT NULL,
        job_text TEXT NOT NULL,
        PRIMARY KEY (run, kind)
     );",
    // 3 → 4: memory is kept per site and kind in the memory database
    // (`state::memory`); what was learned per site only waits here for the
    // next run to move it there.
    "ALTER TABLE site_memory RENAME TO legacy_site_memory;",
    // 4 → 5: a run whose policy is told its jobs are of one kind
    // (`cosched submit --blind-types`).
    "ALTER TABLE runs ADD COLUMN blind_types INTEGER NOT NULL DEFAULT 0;",
    // 5 → 6: the memory database a foreground run was started with, which
    // its resumes keep (`Db::create_run_with_memory`).
    "ALTER TABLE runs ADD COLUMN memory TEXT;",
];

/// What went wrong with the state directory or database.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Sql { path: PathBuf, source: rusqlite::Error },
    #[error(
        "{path}: written by a newer cosched (schema {found}, this cosched knows up to {known}); \
         use that cosched, or start over with another --state-dir"
    )]
    TooNew { path: PathBuf, found: u32, known: u32 },
    #[error(
        "{0}: another cosched is working in this state directory ({1}); wait for it to finish, \
         or use another --state-dir"
    )]
    Locked(PathBuf, String),
    #[error("{path}: {message}")]
    Corrupt { path: PathBuf, message: String },
}

/// A state directory, locked for this process until dropped.
#[derive(Debug)]
pub struct StateDir {
    root: PathBuf,
    /// Holds the `flock`; released when the file is closed (also by `kill -9`).
    /// Its content says whose it is ([`StateDir::claim`]).
    lock: File,
}

impl StateDir {
    /// Creates `root` if needed and locks it against a second cosched.
    ///
    /// The lock is an `flock` on `DIR/lock`, opened close-on-exec (as is
    /// every descriptor cosched opens: Rust's std and SQLite both set
    /// `O_CLOEXEC`), so no `condor_submit` or fake schedd cosched starts can
    /// keep it after the `exec`; `kill -9` of cosched closes its descriptor
    /// and so releases the lock. What remains is a child caught between
    /// `fork` and `exec` at the moment of the kill, which holds a copy for
    /// an instant: hence a few seconds' patience. When the lock stays taken
    /// the error names the processes holding it.
    pub fn open(root: &Path) -> Result<StateDir, StateError> {
        StateDir::open_patiently(root, LOCK_PATIENCE, &mut |_, _| {})
    }

    /// [`StateDir::open`] for a command someone watches: when the lock is
    /// taken, `waiting` is told at once who holds it (as
    /// [`StateError::Locked`] would name them) and how long this one waits,
    /// before the wait begins, so that no wait is silent.
    pub fn open_telling(
        root: &Path,
        waiting: &mut dyn FnMut(&str, std::time::Duration),
    ) -> Result<StateDir, StateError> {
        StateDir::open_patiently(root, LOCK_PATIENCE, waiting)
    }

    /// [`StateDir::open_telling`], waiting at most `patience` for a taken lock.
    fn open_patiently(
        root: &Path,
        patience: std::time::Duration,
        waiting: &mut dyn FnMut(&str, std::time::Duration),
    ) -> Result<StateDir, StateError> {
        let io = |source| StateError::Io { path: root.to_path_buf(), source };
        std::fs::create_dir_all(root.join("runs")).map_err(io)?;
        let root = std::fs::canonicalize(root).map_err(io)?;
        let lock_path = root.join("lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| StateError::Io { path: lock_path.clone(), source })?;
        let tries = patience.as_millis() / 100;
        for attempt in 0.. {
            // SAFETY: flock on a file descriptor we own; no memory is involved.
            let rc =
                unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            if attempt >= tries {
                return Err(StateError::Locked(root, describe_holders(&lock_path)));
            }
            if attempt == 0 {
                waiting(&describe_holders(&lock_path), patience);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let state = StateDir { root, lock };
        state.write_claim(None);
        Ok(state)
    }

    /// Writes into the lock file that `run` is the one working here, for
    /// the messages of a cosched that finds the lock taken (its pid alone
    /// is written when the lock is taken).
    pub fn claim(&self, run: &str) {
        self.write_claim(Some(run));
    }

    fn write_claim(&self, run: Option<&str>) {
        use std::os::unix::fs::FileExt;
        let mut note = format!("pid {}\n", std::process::id());
        if let Some(run) = run {
            note.push_str(&format!("run {run}\n"));
        }
        // Only messages read it: a note that cannot be written costs a
        // waiting cosched the run's name, and the lock holds all the same.
        let written = self.lock.set_len(0).and_then(|()| self.lock.write_all_at(note.as_bytes(), 0));
        if let Err(e) = written {
            tracing::debug!("{}: cannot note who holds the lock: {e}", self.root.join("lock").display());
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn db_path(&self) -> PathBuf {
        self.root.join("state.db")
    }
    /// The memory database of the daemon that works here ([`memory`]).
    pub fn memory_path(&self) -> PathBuf {
        self.root.join(memory::FILE_NAME)
    }
    /// `runs/<id>/`, where a run's submit files, logs and fake pool live.
    pub fn run_dir(&self, run: &str) -> PathBuf {
        self.root.join("runs").join(run)
    }
    /// Opens (creating or migrating) the database.
    pub fn db(&self) -> Result<Db, StateError> {
        Db::open(&self.db_path())
    }
}

/// How long a taken lock is waited for before it is reported.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Who holds `lock_path` open, as `pid N: command line`, with the run the
/// holder noted in the lock file ([`StateDir::claim`]) when the note is
/// that process's, for the messages (Linux `/proc`; elsewhere, or when
/// nothing is found, a generic phrase).
fn describe_holders(lock_path: &Path) -> String {
    // A note left by a process gone (killed before it was rewritten) names
    // no holder: it counts only for the pid it names.
    let note = std::fs::read_to_string(lock_path).unwrap_or_default();
    let noted = |key: &str| note.lines().find_map(|l| l.strip_prefix(key)).map(str::trim);
    let noted_pid = noted("pid ").and_then(|p| p.parse::<u32>().ok());
    let noted_run = noted("run ");
    let mut holders = Vec::new();
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for entry in procs.filter_map(Result::ok) {
            let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else { continue };
            // This process opened the lock file to ask: not a holder.
            if pid == std::process::id() {
                continue;
            }
            let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
            if fds
                .filter_map(Result::ok)
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == lock_path))
            {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                let words: Vec<String> = cmdline
                    .split(|&b| b == 0)
                    .filter(|w| !w.is_empty())
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect();
                let mut holder = format!("pid {pid}: {}", words.join(" "));
                if let (Some(run), true) = (noted_run, noted_pid == Some(pid)) {
                    holder.push_str(&format!(", run {run}"));
                }
                holders.push(holder);
            }
        }
    }
    if holders.is_empty() {
        "held by a process that cannot be seen from here".to_string()
    } else {
        format!("held by {}", holders.join("; "))
    }
}

/// The memory database a run was started with, as its record keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordedMemory {
    /// Not recorded: a daemon's run (its memory is the daemon's), or a run
    /// recorded before schema 6.
    Unknown,
    /// It started cold and keeps nothing.
    None,
    /// It starts from and adds to this database.
    At(PathBuf),
}

/// A run's lifecycle state in the `runs` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Interrupted,
    Done,
    /// Settled, but some jobs failed for good.
    Failed,
    /// Stopped with jobs stuck at a site.
    Hung,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Done => "done",
            RunStatus::Failed => "failed",
            RunStatus::Hung => "hung",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RunStatus::Running,
            "interrupted" => RunStatus::Interrupted,
            "done" => RunStatus::Done,
            "failed" => RunStatus::Failed,
            "hung" => RunStatus::Hung,
            _ => return None,
        })
    }
    /// A run that `--resume` can continue.
    pub fn resumable(self) -> bool {
        matches!(self, RunStatus::Running | RunStatus::Interrupted | RunStatus::Hung)
    }
}

/// One row of `runs`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub id: String,
    pub created: String,
    pub n_jobs: u64,
    pub sites_path: PathBuf,
    pub sites_text: String,
    /// Its kinds of job, in kind order (one for `cosched submit N SITES
    /// JOB`); their counts add up to `n_jobs`.
    pub kinds: Vec<RecordedKind>,
    pub policy: String,
    /// The policy is told every job is of one kind (`--blind-types`), as it
    /// must be again when the run resumes.
    pub blind_types: bool,
    pub epoch_unix: f64,
    pub simulate: bool,
    pub speedup: f64,
    pub status: RunStatus,
}

/// One kind of job of a run (a row of `run_kinds`).
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedKind {
    pub name: String,
    pub count: u64,
    /// Its submit description, where it was and as it was.
    pub job_path: PathBuf,
    pub job_text: String,
}

/// Where a submission stands.
#[derive(Clone, Debug, PartialEq)]
pub enum SubmissionState {
    /// Recorded before `condor_submit` ran; its outcome is not known.
    Intent,
    Submitted {
        cluster: i64,
    },
    Failed {
        error: String,
    },
}

/// One row of `submissions`.
#[derive(Clone, Debug, PartialEq)]
pub struct Submission {
    pub batch: String,
    pub site: String,
    pub site_index: u32,
    /// In proc order: proc p of the cluster is `jobs[p]`.
    pub jobs: Vec<JobId>,
    pub submit_file: PathBuf,
    pub state: SubmissionState,
    pub recorded: String,
}

/// The open database.
pub struct Db {
    conn: Connection,
    path: PathBuf,
}

/// Takes a database of schema `version` to the last of `migrations`
/// (`migrations[i]` takes i to i + 1), and says so in its `meta` table and
/// `PRAGMA user_version`, within the caller's transaction.
fn migrate(tx: &rusqlite::Transaction<'_>, version: u32, migrations: &[&str]) -> rusqlite::Result<()> {
    for migration in &migrations[version as usize..] {
        tx.execute_batch(migration)?;
    }
    let target = migrations.len() as u32;
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('schema', ?1), ('written_by', ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![target.to_string(), env!("CARGO_PKG_VERSION")],
    )?;
    tx.pragma_update(None, "user_version", target)
}

/// How long opening a database waits for another connection's lock: the
/// busy timeout, and the patience of [`enable_wal`].
const BUSY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Puts the database of `conn` in WAL mode (one writer, and readers never
/// blocked by it). The switch needs the file to itself, and SQLite answers
/// "database is locked" at once, without waiting in the busy handler,
/// while another connection holds it: several runs creating the memory
/// database at the same moment failed so
/// (`memory::tests::runs_writing_at_once_lose_nothing`). So a switch that
/// finds the file busy is tried again, 50 ms apart, for [`BUSY_PATIENCE`].
/// A database already in WAL mode (every open but a file's first) needs no
/// switch and takes no lock for it.
fn enable_wal(conn: &Connection) -> rusqlite::Result<()> {
    const PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
    let tries = BUSY_PATIENCE.as_millis() / PAUSE.as_millis();
    let busy = |e: &rusqlite::Error| {
        matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    };
    let mut tried = 0;
    loop {
        let switched =
            conn.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0)).and_then(|mode| {
                if mode.eq_ignore_ascii_case("wal") {
                    Ok(())
                } else {
                    conn.pragma_update(None, "journal_mode", "WAL")
                }
            });
        match switched {
            Err(e) if busy(&e) && tried < tries => {
                tried += 1;
                std::thread::sleep(PAUSE);
            }
            done => return done,
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish()
    }
}

/// RFC 3339 wall-clock time for the record.
#[allow(clippy::disallowed_methods)] // the edge: records say when things happened
fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Db {
    /// Opens `path`, creating and migrating it as needed.
    pub fn open(path: &Path) -> Result<Db, StateError> {
        let sql = |source| StateError::Sql { path: path.to_path_buf(), source };
        let mut conn = Connection::open(path).map_err(sql)?;
        conn.busy_timeout(BUSY_PATIENCE).map_err(sql)?;
        let version: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sql)?;
        if version > SCHEMA_VERSION {
            return Err(StateError::TooNew {
                path: path.to_path_buf(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        enable_wal(&conn).map_err(sql)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(sql)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(sql)?;
        if version < SCHEMA_VERSION {
            let tx = conn.transaction().map_err(sql)?;
            migrate(&tx, version, &MIGRATIONS).map_err(sql)?;
            tx.commit().map_err(sql)?;
        }
        Ok(Db { conn, path: path.to_path_buf() })
    }

    fn sql(&self, source: rusqlite::Error) -> StateError {
        StateError::Sql { path: self.path.clone(), source }
    }

    fn corrupt(&self, message: String) -> StateError {
        StateError::Corrupt { path: self.path.clone(), message }
    }

    /// Records a new run (status `running`) and its kinds, in one
    /// transaction, its memory left to whoever drives it (the daemon's).
    pub fn create_run(&self, run: &RunRecord) -> Result<(), StateError> {
        self.insert_run(run, None)
    }

    /// [`Db::create_run`] for a foreground run, with the memory database it
    /// starts from and adds to (`None`: none), which its resumes use
    /// ([`Db::run_memory`]).
    pub fn create_run_with_memory(&self, run: &RunRecord, memory: Option<&Path>) -> Result<(), StateError> {
        // '' for none: a path is never empty.
        self.insert_run(run, Some(memory.map_or_else(String::new, |p| p.to_string_lossy().into_owned())))
    }

    /// The memory database run `id` was started with.
    pub fn run_memory(&self, id: &str) -> Result<RecordedMemory, StateError> {
        let memory: Option<Option<String>> = self
            .conn
            .query_row("SELECT memory FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(|e| self.sql(e))?;
        match memory {
            None => Err(self.corrupt(format!("no run {id} recorded"))),
            Some(None) => Ok(RecordedMemory::Unknown),
            Some(Some(path)) if path.is_empty() => Ok(RecordedMemory::None),
            Some(Some(path)) => Ok(RecordedMemory::At(PathBuf::from(path))),
        }
    }

    /// Records run `run`, its kinds and its `memory` column (`None`: NULL).
    fn insert_run(&self, run: &RunRecord, memory: Option<String>) -> Result<(), StateError> {
        let Some(first) = run.kinds.first() else {
            return Err(self.corrupt(format!("run {} has no kind of job", run.id)));
        };
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        tx.execute(
            "INSERT INTO runs (id, created, n_jobs, sites_path, sites_text, job_path, job_text,
                               policy, epoch_unix, simulate, speedup, status, blind_types, memory)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                run.id,
                run.created,
                run.n_jobs as i64,
                run.sites_path.to_string_lossy(),
                run.sites_text,
                first.job_path.to_string_lossy(),
                first.job_text,
                run.policy,
                run.epoch_unix,
                run.simulate,
                run.speedup,
                run.status.as_str(),
                run.blind_types,
                memory,
            ],
        )
        .map_err(|e| self.sql(e))?;
        for (i, kind) in run.kinds.iter().enumerate() {
            tx.execute(
                "INSERT INTO run_kinds (run, kind, name, count, job_path, job_text)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    run.id,
                    i as i64,
                    kind.name,
                    kind.count as i64,
                    kind.job_path.to_string_lossy(),
                    kind.job_text
                ],
            )
            .map_err(|e| self.sql(e))?;
        }
        tx.commit().map_err(|e| self.sql(e))
    }

    fn run_from_row(&self, row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<RunRecord, String>> {
        let status: String = row.get(11)?;
        let n_jobs: i64 = row.get(2)?;
        let Some(status) = RunStatus::parse(&status) else {
            return Ok(Err(format!("unknown run status {status:?}")));
        };
        Ok(Ok(RunRecord {
            id: row.get(0)?,
            created: row.get(1)?,
            n_jobs: n_jobs.max(0) as u64,
            sites_path: PathBuf::from(row.get::<_, String>(3)?),
            sites_text: row.get(4)?,
            // A run recorded before `run_kinds` has one kind, this one.
            kinds: vec![RecordedKind {
                name: crate::policy::jobtype::SINGLE_TYPE.to_string(),
                count: n_jobs.max(0) as u64,
                job_path: PathBuf::from(row.get::<_, String>(5)?),
                job_text: row.get(6)?,
            }],
            policy: row.get(7)?,
            blind_types: row.get(12)?,
            epoch_unix: row.get(8)?,
            simulate: row.get(9)?,
            speedup: row.get(10)?,
            status,
        }))
    }

    const RUN_COLUMNS: &'static str = "id, created, n_jobs, sites_path, sites_text, job_path, job_text, \
                                       policy, epoch_unix, simulate, speedup, status, blind_types";

    /// All runs, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRecord>, StateError> {
        self.runs_named(None)
    }

    /// One run by id.
    pub fn run(&self, id: &str) -> Result<Option<RunRecord>, StateError> {
        // Read alone, not found among all: the daemon asks for each of its
        // runs in turn as it starts, with thousands kept.
        Ok(self.runs_named(Some(id))?.pop())
    }

    /// The run named `id`, or all runs (oldest first), with their kinds.
    fn runs_named(&self, id: Option<&str>) -> Result<Vec<RunRecord>, StateError> {
        let only = if id.is_some() { "WHERE id = ?1" } else { "" };
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {} FROM runs {only} ORDER BY rowid", Self::RUN_COLUMNS))
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(id), |row| self.run_from_row(row))
            .map_err(|e| self.sql(e))?;
        let mut runs = Vec::new();
        for row in rows {
            runs.push(row.map_err(|e| self.sql(e))?.map_err(|m| self.corrupt(m))?);
        }
        let mut kinds: std::collections::BTreeMap<String, Vec<RecordedKind>> = Default::default();
        let only = if id.is_some() { "WHERE run = ?1" } else { "" };
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT run, name, count, job_path, job_text FROM run_kinds {only} ORDER BY run, kind"
            ))
            .map_err(|e| self.sql(e))?;
        fn kind_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(String, RecordedKind)> {
            let count: i64 = row.get(2)?;
            Ok((
                row.get::<_, String>(0)?,
                RecordedKind {
                    name: row.get(1)?,
                    count: count.max(0) as u64,
                    job_path: PathBuf::from(row.get::<_, String>(3)?),
                    job_text: row.get(4)?,
                },
            ))
        }
        let rows = stmt.query_map(rusqlite::params_from_iter(id), kind_from_row).map_err(|e| self.sql(e))?;
        for row in rows {
            let (run, kind) = row.map_err(|e| self.sql(e))?;
            kinds.entry(run).or_default().push(kind);
        }
        for run in &mut runs {
            if let Some(recorded) = kinds.remove(&run.id) {
                run.kinds = recorded;
            }
        }
        Ok(runs)
    }

    /// Sets a run's status (and its finishing time when it is final).
    pub fn set_status(&self, run: &str, status: RunStatus) -> Result<(), StateError> {
        let finished = (!status.resumable()).then(now_rfc3339);
        self.conn
            .execute(
                "UPDATE runs SET status = ?2, finished = ?3 WHERE id = ?1",
                params![run, status.as_str(), finished],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Records that `jobs` are about to be handed to `condor_submit` as batch
    /// `batch`. Committed before it returns: this must precede the submit.
    pub fn record_intent(
        &self,
        run: &str,
        site: &str,
        site_index: u32,
        batch: &str,
        jobs: &[JobId],
        submit_file: &Path,
    ) -> Result<(), StateError> {
        let jobs_json = serde_json::to_string(&jobs.iter().map(|j| j.0).collect::<Vec<_>>())
            .map_err(|e| self.corrupt(e.to_string()))?;
        self.conn
            .execute(
                "INSERT INTO submissions (batch, run, site, site_index, jobs, submit_file, state, recorded)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'intent', ?7)",
                params![
                    batch,
                    run,
                    site,
                    site_index,
                    jobs_json,
                    submit_file.to_string_lossy(),
                    now_rfc3339()
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// `condor_submit` put batch `batch` into cluster `cluster`.
    pub fn record_submitted(&self, run: &str, batch: &str, cluster: i64) -> Result<(), StateError> {
        self.resolve(run, batch, "submitted", Some(cluster), None)
    }

    /// Batch `batch` was not submitted (and, as far as HTCondor tells, is not queued).
    pub fn record_failed(&self, run: &str, batch: &str, error: &str) -> Result<(), StateError> {
        self.resolve(run, batch, "failed", None, Some(error))
    }

    fn resolve(
        &self,
        run: &str,
        batch: &str,
        state: &str,
        cluster: Option<i64>,
        error: Option<&str>,
    ) -> Result<(), StateError> {
        let changed = self
            .conn
            .execute(
                "UPDATE submissions SET state = ?3, cluster = ?4, error = ?5, resolved = ?6
                 WHERE run = ?1 AND batch = ?2",
                params![run, batch, state, cluster, error, now_rfc3339()],
            )
            .map_err(|e| self.sql(e))?;
        if changed == 0 {
            return Err(self.corrupt(format!("batch {batch} has no recorded intent")));
        }
        Ok(())
    }

    /// A run's submissions in the order they were recorded.
    pub fn submissions(&self, run: &str) -> Result<Vec<Submission>, StateError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT batch, site, site_index, jobs, submit_file, state, cluster, error, recorded
                 FROM submissions WHERE run = ?1 ORDER BY rowid",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([run], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, u32>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, String>(5)?,
                    row.get::<_, Option<i64>>(6)?,
                    row.get::<_, Option<String>>(7)?,
                    row.get::<_, String>(8)?,
                ))
            })
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (batch, site, site_index, jobs, submit_file, state, cluster, error, recorded) =
                row.map_err(|e| self.sql(e))?;
            let jobs: Vec<u64> = serde_json::from_str(&jobs)
                .map_err(|e| self.corrupt(format!("batch {batch}: jobs {jobs:?}: {e}")))?;
            let state = match (state.as_str(), cluster) {
                ("intent", _) => SubmissionState::Intent,
                ("submitted", Some(cluster)) => SubmissionState::Submitted { cluster },
                ("failed", _) => SubmissionState::Failed { error: error.unwrap_or_default() },
                _ => return Err(self.corrupt(format!("batch {batch}: state {state:?} without a cluster"))),
            };
            out.push(Submission {
                batch,
                site,
                site_index,
                jobs: jobs.into_iter().map(JobId).collect(),
                submit_file: PathBuf::from(submit_file),
                state,
                recorded,
            });
        }
        Ok(out)
    }

    /// Checkpoints how much of a site's user log has been read.
    pub fn set_log_offset(&self, run: &str, site: &str, offset: u64) -> Result<(), StateError> {
        self.conn
            .execute(
                "INSERT INTO log_offsets (run, site, offset) VALUES (?1, ?2, ?3)
                 ON CONFLICT(run, site) DO UPDATE SET offset = excluded.offset",
                params![run, site, offset as i64],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The last checkpoint of a site's user log (0 when none).
    pub fn log_offset(&self, run: &str, site: &str) -> Result<u64, StateError> {
        let offset: Option<i64> = self
            .conn
            .query_row("SELECT offset FROM log_offsets WHERE run = ?1 AND site = ?2", [run, site], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.sql(e))?;
        Ok(offset.unwrap_or(0).max(0) as u64)
    }

    /// What runs learned before memory was kept per kind (schema 2's
    /// `site_memory`): per site, when it was learned and the memory, oldest
    /// first; [`Db::forget_legacy_memory`] once it is moved.
    pub fn legacy_memory(&self) -> Result<Vec<(String, String, SiteMemory)>, StateError> {
        let query = "SELECT site, updated, memory FROM legacy_site_memory ORDER BY updated, site";
        memory::memory_rows(&self.conn, &self.path, query)
    }

    /// Empties `legacy_site_memory` (its rows were moved to a memory database).
    pub fn forget_legacy_memory(&self) -> Result<(), StateError> {
        self.conn.execute("DELETE FROM legacy_site_memory", []).map_err(|e| self.sql(e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_record(id: &str) -> RunRecord {
        RunRecord {
            id: id.into(),
            created: "2026-11-21T05:00:00Z".into(),
            n_jobs: 10,
            sites_path: "/x/sites.toml".into(),
            sites_text: "[[site]]".into(),
            kinds: vec![RecordedKind {
                name: "job".into(),
                count: 10,
                job_path: "/x/job.sub".into(),
                job_text: "queue".into(),
            }],
            policy: "adaptive".into(),
            blind_types: false,
            epoch_unix: 1.7e9,
            simulate: true,
            speedup: 100.0,
            status: RunStatus::Running,
        }
    }

    #[test]
    fn a_runs_kinds_are_kept_and_a_run_recorded_without_them_has_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("state.db")).unwrap();
        let kind = |name: &str, count: u64| RecordedKind {
            name: name.into(),
            count,
            job_path: format!("/x/{name}.sub").into(),
            job_text: format!("executable = {name}\nqueue\n"),
        };
        let two =
            RunRecord { kinds: vec![kind("io", 4), kind("cpu", 6)], blind_types: true, ..run_record("r2") };
        db.create_run(&two).unwrap();
        // As a cosched of schema 2 recorded it: the runs row alone.
        db.conn
            .execute(
                "INSERT INTO runs (id, created, n_jobs, sites_path, sites_text, job_path, job_text, policy,
                                   epoch_unix, simulate, speedup, status)
                 VALUES ('old', 'x', 7, '/x/s.toml', '', '/x/old.sub', 'queue', 'bulk', 0, 0, 1, 'interrupted')",
                [],
            )
            .unwrap();
        let runs = db.runs().unwrap();
        assert_eq!(runs[0], two);
        assert!(!runs[1].blind_types, "a run recorded before blind_types told its policy the kinds");
        let old = &runs[1].kinds;
        assert_eq!(old.len(), 1);
        assert_eq!(
            (old[0].name.as_str(), old[0].count, old[0].job_path.as_path()),
            ("job", 7, Path::new("/x/old.sub"))
        );
        // One run read alone is the one among all, its kinds with it.
        for run in &runs {
            assert_eq!(db.run(&run.id).unwrap().as_ref(), Some(run), "{}", run.id);
        }
        let none = RunRecord { kinds: Vec::new(), ..run_record("r3") };
        assert!(db.create_run(&none).is_err(), "a run has a kind");
        assert!(db.run("r3").unwrap().is_none(), "and nothing of it is recorded");
    }

    #[test]
    fn submissions_go_from_intent_to_outcome_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let db = Db::open(&path).unwrap();
            db.create_run(&run_record("r1")).unwrap();
            db.record_intent("r1", "a", 0, "b1", &[JobId(3), JobId(1)], Path::new("/s/b1.sub")).unwrap();
            db.record_intent("r1", "b", 1, "b2", &[JobId(0)], Path::new("/s/b2.sub")).unwrap();
            db.record_intent("r1", "b", 1, "b3", &[JobId(2)], Path::new("/s/b3.sub")).unwrap();
            db.record_submitted("r1", "b1", 42).unwrap();
            db.record_failed("r1", "b2", "ERROR: no").unwrap();
            db.set_log_offset("r1", "a", 1234).unwrap();
        }
        let db = Db::open(&path).unwrap();
        let subs = db.submissions("r1").unwrap();
        let states: Vec<_> = subs.iter().map(|s| (s.batch.as_str(), s.state.clone())).collect();
        assert_eq!(
            states,
            vec![
                ("b1", SubmissionState::Submitted { cluster: 42 }),
                ("b2", SubmissionState::Failed { error: "ERROR: no".into() }),
                ("b3", SubmissionState::Intent),
            ]
        );
        assert_eq!(subs[0].jobs, vec![JobId(3), JobId(1)]);
        assert_eq!(db.log_offset("r1", "a").unwrap(), 1234);
        assert_eq!(db.log_offset("r1", "b").unwrap(), 0);
        assert!(db.record_submitted("r1", "nope", 1).is_err(), "resolving an unrecorded batch must fail");
    }

    #[test]
    fn runs_and_statuses_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("state.db")).unwrap();
        db.create_run(&run_record("r1")).unwrap();
        db.create_run(&run_record("r2")).unwrap();
        db.set_status("r1", RunStatus::Done).unwrap();
        let runs = db.runs().unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].status, RunStatus::Done);
        assert_eq!(runs[1], run_record("r2"));
        assert!(db.create_run(&run_record("r2")).is_err(), "run ids are unique");
    }

    #[test]
    fn a_database_from_a_newer_cosched_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        Db::open(&path).unwrap();
        Connection::open(&path).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        match Db::open(&path) {
            Err(StateError::TooNew { found, known, .. }) => {
                assert_eq!((found, known), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
            }
            other => panic!("expected TooNew, got {other:?}"),
        }
    }

    fn open_at_once(root: &Path) -> Result<StateDir, StateError> {
        StateDir::open_patiently(root, std::time::Duration::ZERO, &mut |held, _| {
            panic!("told of a wait with no patience: {held}")
        })
    }

    #[test]
    fn a_state_dir_is_locked_against_a_second_cosched() {
        let dir = tempfile::tempdir().unwrap();
        let first = StateDir::open(dir.path()).unwrap();
        first.claim("r1");
        let note = std::fs::read_to_string(dir.path().join("lock")).unwrap();
        assert_eq!(note, format!("pid {}\nrun r1\n", std::process::id()), "whose the lock is");
        let mut told = Vec::new();
        let second =
            StateDir::open_patiently(dir.path(), std::time::Duration::from_millis(200), &mut |h, p| {
                told.push((h.to_string(), p))
            });
        assert!(matches!(second, Err(StateError::Locked(..))), "{second:?}");
        assert_eq!(told.len(), 1, "the wait is told once, before it: {told:?}");
        assert_eq!(told[0].1, std::time::Duration::from_millis(200), "with how long it is: {told:?}");
        drop(first);
        StateDir::open(dir.path()).expect("lock is released on drop");
    }

    /// The refusal, and the word before a wait, name the other process
    /// (pid and command, and the run it noted in the lock file), never the
    /// one asking, which has the lock file open too.
    #[test]
    fn the_lock_refusal_names_the_other_holder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("runs")).unwrap();
        let lock = dir.path().join("lock");
        std::fs::write(&lock, "").unwrap();
        let mut holder = std::process::Command::new("flock")
            .arg(&lock)
            .args(["sleep", "30"])
            .spawn()
            .expect("flock(1) runs");
        let mut tries = 0;
        let refusal = loop {
            match open_at_once(dir.path()) {
                Err(StateError::Locked(_, holders)) => break holders,
                Ok(state) => {
                    drop(state);
                    tries += 1;
                    assert!(tries < 200, "flock never took the lock");
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => panic!("{e}"),
            }
        };
        // As a cosched holding the lock notes itself; then a note another
        // process left, which names no holder.
        std::fs::write(&lock, format!("pid {}\nrun r9\n", holder.id())).unwrap();
        let mut told = String::new();
        let noted =
            StateDir::open_patiently(dir.path(), std::time::Duration::from_millis(100), &mut |h, _| {
                told = h.to_string()
            });
        // No process has pid u32::MAX (Linux's pid_max is at most 2^22).
        std::fs::write(&lock, format!("pid {}\nrun stale\n", u32::MAX)).unwrap();
        let stale = open_at_once(dir.path());
        let _ = holder.kill();
        let _ = holder.wait();
        assert!(refusal.contains(&format!("pid {}:", holder.id())), "names flock: {refusal}");
        assert!(refusal.contains("sleep 30"), "with its command: {refusal}");
        assert!(!refusal.contains(&format!("pid {}:", std::process::id())), "not itself: {refusal}");
        assert!(
            told.contains(&format!("pid {}:", holder.id())) && told.contains("sleep 30, run r9"),
            "{told}"
        );
        match noted {
            Err(StateError::Locked(_, holders)) => assert_eq!(holders, told, "the refusal says the same"),
            other => panic!("expected Locked, got {other:?}"),
        }
        match stale {
            Err(StateError::Locked(_, holders)) => assert!(!holders.contains("stale"), "{holders}"),
            other => panic!("expected Locked, got {other:?}"),
        }
    }

    #[test]
    fn a_runs_memory_is_kept_as_started() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("state.db")).unwrap();
        db.create_run_with_memory(&run_record("at"), Some(Path::new("/m/mm.db"))).unwrap();
        db.create_run_with_memory(&run_record("cold"), None).unwrap();
        db.create_run(&run_record("daemon")).unwrap();
        assert_eq!(db.run_memory("at").unwrap(), RecordedMemory::At("/m/mm.db".into()));
        assert_eq!(db.run_memory("cold").unwrap(), RecordedMemory::None);
        assert_eq!(db.run_memory("daemon").unwrap(), RecordedMemory::Unknown);
        assert!(db.run_memory("nope").is_err(), "no such run");
    }

    /// What kill -9 relies on: a child started while cosched holds the lock
    /// and the database (a condor_submit, the fake schedd it starts) keeps
    /// neither, so the lock is free as soon as cosched itself is gone.
    #[test]
    fn children_inherit_neither_the_lock_nor_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let db = state.db().unwrap();
        db.create_run(&run_record("r1")).unwrap();
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let root = state.root().to_path_buf();
        let inherited: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
            .map(|fds| {
                fds.filter_map(Result::ok).filter_map(|fd| std::fs::read_link(fd.path()).ok()).collect()
            })
            .unwrap_or_default();
        drop((db, state));
        let reopened = open_at_once(dir.path());
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            inherited.iter().all(|t| !t.starts_with(&root)),
            "a child inherited descriptors into the state directory: {inherited:?}"
        );
        reopened.expect("the lock is free while the child still runs");
    }
}
