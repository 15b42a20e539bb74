//! The memory database: what runs learned, per site and per kind of job
//! ([`crate::policy::memory`]), kept apart from any one run's state
//! directory so that every run reads it.
//!
//! # Where it lives
//! - `cosched submit`: the user's, `$XDG_STATE_HOME/cosched/memory.db`
//!   (`~/.local/state/cosched/memory.db` without `XDG_STATE_HOME`), whatever
//!   the state directory. `COSCHED_MEMORY=PATH` or `--memory PATH` names
//!   another (tests, a memory shared by a group); `--no-memory` runs cold and
//!   keeps nothing. A `--simulate` run keeps its memory in its state
//!   directory's `memory.db` (its sites are models, named like the real
//!   ones).
//! - `cosched daemon`: `memory.db` in its state directory, one for all its
//!   users: their runs of the same kind at a site learn for each other.
//! - `cosched memory` shows and forgets what one of them holds, found the
//!   same way ([`memory_file`]): `--memory PATH`, else `--state-dir DIR`'s
//!   (the daemon's, or `--simulate` runs'), else the user's.
//!
//! A run says at its start which file it reads and writes and, per kind,
//! at which sites it starts from what was remembered ([`MemoryAtStart`]).
//! A file this cosched cannot use is left as it is and the run starts cold:
//! one of a newer cosched (a newer schema) is neither read nor written; one
//! SQLite cannot read, or a row that does not parse, is said with what to
//! do (`cosched memory forget`, or removing the file).
//!
//! # Table (inspect with `sqlite3 memory.db`)
//! - `memory` — per (`site` name, `kind` key): what was learned (`memory`,
//!   the JSON of [`crate::policy::SiteMemory`]), `updated` (RFC 3339), and
//!   the `run` that learned it. `kind` is empty for memory learned before
//!   kinds were told apart ([`crate::policy::UNKNOWN_KIND`]).
//! - `meta` — `schema` and `written_by`, as in the state database.
//!
//! # Concurrent runs
//! Several runs (several terminals, the daemon's runs) read and write one
//! file: SQLite in WAL mode with a busy timeout (the switch to WAL, on a
//! file's first opens, retried while another run holds it:
//! `state::enable_wal`), every write one immediate transaction, each run
//! writing only the rows of its own kinds' sites. Two runs of one kind at one
//! site both write that row; the later run's is kept, and either is a fair
//! start for the next run.

use super::{now_rfc3339, StateError};
use crate::policy::{CapacityMemory, SiteMemory, UNKNOWN_KIND};
use rusqlite::{params, Connection, ErrorCode, TransactionBehavior};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The environment variable naming the user's memory database.
pub const MEMORY_ENV: &str = "COSCHED_MEMORY";

/// The memory schema this build writes; `MIGRATIONS[i]` takes i to i + 1.
const SCHEMA_VERSION: u32 = 1;

const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    // 0 → 1: the first schema.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE memory (
        site TEXT NOT NULL,
        kind TEXT NOT NULL,
        memory TEXT NOT NULL,
        updated TEXT NOT NULL,
        run TEXT,
        PRIMARY KEY (site, kind)
     );",
];

/// `PRAGMA application_id` of a memory database ("cosm"): a state database
/// or another program's file named by mistake is refused, not migrated.
const APPLICATION_ID: i32 = 0x636f_736d;

/// The memory database's name in a state directory (the daemon's, a
/// `--simulate` run's).
pub const FILE_NAME: &str = "memory.db";

/// The memory database a command uses ([module doc](self)): `memory`
/// (`--memory PATH`), else [`FILE_NAME`] in `state_dir`, else the user's
/// ([`user_memory_path`]).
pub fn memory_file(memory: Option<&Path>, state_dir: Option<&Path>) -> Result<PathBuf, String> {
    match (memory, state_dir) {
        (Some(path), _) => Ok(path.to_path_buf()),
        (None, Some(dir)) => Ok(dir.join(FILE_NAME)),
        (None, None) => user_memory_path(),
    }
}

/// The user's memory database ([module doc](self)), from the environment:
/// `COSCHED_MEMORY`, else under `XDG_STATE_HOME`, else under `HOME`.
pub fn user_memory_path() -> Result<PathBuf, String> {
    memory_path_in(|name| std::env::var_os(name))
}

/// [`user_memory_path`] in an environment `env` reads.
fn memory_path_in(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<PathBuf, String> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(path) = var(MEMORY_ENV) {
        return Ok(path);
    }
    // The XDG spec: a relative XDG_STATE_HOME is invalid and ignored.
    if let Some(state) = var("XDG_STATE_HOME").filter(|p| p.is_absolute()) {
        return Ok(state.join("cosched").join(FILE_NAME));
    }
    match var("HOME") {
        Some(home) => Ok(home.join(".local/state/cosched").join(FILE_NAME)),
        None => Err(format!(
            "neither {MEMORY_ENV}, XDG_STATE_HOME nor HOME is set, so there is no memory database to \
             use; give --memory PATH, or --no-memory to run cold"
        )),
    }
}

/// An open memory database.
pub struct MemoryDb {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for MemoryDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDb").field("path", &self.path).finish()
    }
}

impl MemoryDb {
    /// Opens `path`, creating it (and its directory) and migrating it as
    /// needed; another run may be doing the same at the same moment. A file
    /// that is not ours to use (`refusal`) is left as it was.
    pub fn open(path: &Path) -> Result<MemoryDb, StateError> {
        let sql = |source| unreadable(path, source);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|source| StateError::Io { path: dir.to_path_buf(), source })?;
        }
        let mut conn = Connection::open(path).map_err(sql)?;
        conn.busy_timeout(super::BUSY_PATIENCE).map_err(sql)?;
        // Whose the file is, before anything is written to it (the switch
        // to WAL below writes); read in one transaction, as one snapshot of
        // a file another run may be creating.
        let seen = {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred).map_err(sql)?;
            let seen = identity(&tx).map_err(sql)?;
            tx.commit().map_err(sql)?;
            seen
        };
        if let Some(refused) = refusal(path, seen) {
            return Err(refused);
        }
        super::enable_wal(&conn).map_err(sql)?;
        // Memory only speeds a run up: a write lost to power loss costs a
        // cold start, not a job.
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(sql)?;
        // Read again and migrated in one write transaction, so that two runs
        // creating the file at once migrate it once.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        let (id, version, tables) = identity(&tx).map_err(sql)?;
        if let Some(refused) = refusal(path, (id, version, tables)) {
            return Err(refused);
        }
        if version < SCHEMA_VERSION {
            super::migrate(&tx, version, &MIGRATIONS).map_err(sql)?;
            tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(MemoryDb { conn, path: path.to_path_buf() })
    }

    /// [`MemoryDb::open`] for a file that should exist already: `None`
    /// where it does not (nothing was remembered there; none is created).
    pub fn open_existing(path: &Path) -> Result<Option<MemoryDb>, StateError> {
        match std::fs::metadata(path) {
            Ok(_) => MemoryDb::open(path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Io { path: path.to_path_buf(), source }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Everything learned so far, in the order it was learned (what carries
    /// over to a new kind is from the kind learned last at the site). A
    /// memory that cannot be read is said, with how to forget it, and
    /// skipped: memory only speeds a run up.
    pub fn load(&self) -> Result<CapacityMemory, StateError> {
        let mut memory = CapacityMemory::new();
        for entry in self.rows("updated, site, kind")? {
            match entry.memory {
                Ok(m) => memory.insert(entry.site, entry.kind, m),
                Err(e) => tracing::warn!(
                    "{}: the memory of kind {} at {} is unreadable ({e}), ignored; `{}` removes it",
                    self.path.display(),
                    shown_kind(&entry.kind),
                    entry.site,
                    forget_command(&self.path, &entry.site, Some(&entry.kind))
                ),
            }
        }
        Ok(memory)
    }

    /// Every (site, kind) remembered, by site then kind, also those whose
    /// memory cannot be read (`cosched memory` shows them to be forgotten).
    pub fn entries(&self) -> Result<Vec<Remembered>, StateError> {
        self.rows("site, kind")
    }

    fn rows(&self, order: &str) -> Result<Vec<Remembered>, StateError> {
        let sql = |source| StateError::Sql { path: self.path.clone(), source };
        let query = format!("SELECT site, kind, memory, updated, run FROM memory ORDER BY {order}");
        let mut stmt = self.conn.prepare(&query).map_err(sql)?;
        let rows = stmt
            .query_map([], |r| {
                let json: String = r.get(2)?;
                Ok(Remembered {
                    site: r.get(0)?,
                    kind: r.get(1)?,
                    memory: serde_json::from_str(&json).map_err(|e| e.to_string()),
                    updated: r.get(3)?,
                    run: r.get(4)?,
                })
            })
            .map_err(sql)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(sql)
    }

    /// Forgets what was learned at `site` (`None`: at every site), of
    /// `kind` only when one is given; returns how many (site, kind)
    /// memories went. The next run there starts cold.
    pub fn forget(&mut self, site: Option<&str>, kind: Option<&str>) -> Result<usize, StateError> {
        let path = self.path.clone();
        let sql = |source| StateError::Sql { path: path.clone(), source };
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        let gone = tx
            .execute(
                "DELETE FROM memory WHERE (?1 IS NULL OR site = ?1) AND (?2 IS NULL OR kind = ?2)",
                params![site, kind],
            )
            .map_err(sql)?;
        tx.commit().map_err(sql)?;
        Ok(gone)
    }

    /// Stores what `run` learned (rows of other sites and kinds keep what
    /// earlier runs learned).
    pub fn save(&mut self, run: &str, memory: &CapacityMemory) -> Result<(), StateError> {
        let now = now_rfc3339();
        let path = self.path.clone();
        let sql = |source| StateError::Sql { path: path.clone(), source };
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        for (site, kind, m) in memory.iter() {
            let json = serde_json::to_string(m)
                .map_err(|e| StateError::Corrupt { path: path.clone(), message: e.to_string() })?;
            tx.execute(
                "INSERT INTO memory (site, kind, memory, updated, run) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(site, kind) DO UPDATE SET memory = excluded.memory,
                     updated = excluded.updated, run = excluded.run",
                params![site, kind, json, now, run],
            )
            .map_err(sql)?;
        }
        tx.commit().map_err(sql)
    }

    /// Takes in memory learned before kinds were told apart (a state
    /// database's `legacy_site_memory`: site, when learned, memory) as
    /// memory of an unknown kind, where the site has none yet; returns how
    /// many sites it added.
    pub fn import_legacy(&mut self, rows: &[(String, String, SiteMemory)]) -> Result<usize, StateError> {
        let path = self.path.clone();
        let sql = |source| StateError::Sql { path: path.clone(), source };
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        let mut added = 0;
        for (site, updated, m) in rows {
            let json = serde_json::to_string(m)
                .map_err(|e| StateError::Corrupt { path: path.clone(), message: e.to_string() })?;
            added += tx
                .execute(
                    "INSERT INTO memory (site, kind, memory, updated, run) VALUES (?1, ?2, ?3, ?4, NULL)
                     ON CONFLICT(site, kind) DO NOTHING",
                    params![site, UNKNOWN_KIND, json, updated],
                )
                .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(added)
    }
}

/// One (site, kind)'s row of the memory database.
#[derive(Clone, Debug)]
pub struct Remembered {
    pub site: String,
    /// The kind's key ([`crate::submit_desc::kind_key`]; empty for memory
    /// of an unknown kind, [`UNKNOWN_KIND`]).
    pub kind: String,
    /// What was learned, or why it cannot be read.
    pub memory: Result<SiteMemory, String>,
    /// When (RFC 3339).
    pub updated: String,
    /// The run that learned it (none for memory moved from a state database).
    pub run: Option<String>,
}

/// A kind's key as messages show it (the unknown kind's is empty).
pub fn shown_kind(kind: &str) -> String {
    if kind == UNKNOWN_KIND {
        "''".to_string()
    } else {
        kind.to_string()
    }
}

/// The command that forgets what the memory database at `path` holds of
/// `site` (of `kind` only, when given).
pub fn forget_command(path: &Path, site: &str, kind: Option<&str>) -> String {
    let kind = kind.map_or(String::new(), |k| format!(" --kind {}", shown_kind(k)));
    format!("cosched memory forget {site}{kind} --memory {}", path.display())
}

/// `path`'s `application_id`, `user_version` and number of tables.
fn identity(conn: &Connection) -> rusqlite::Result<(i32, u32, i64)> {
    let id = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let version = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let tables = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    Ok((id, version, tables))
}

/// Why the file at `path`, of this [`identity`], is not ours to read or
/// write, if it is not: another program's, or a newer cosched's.
fn refusal(path: &Path, (id, version, tables): (i32, u32, i64)) -> Option<StateError> {
    let message = if id != APPLICATION_ID && (id != 0 || tables > 0) {
        "not a cosched memory database (a state database is `state.db` in a state directory; the \
         memory database is another file, e.g. memory.db): name the memory database with --memory PATH \
         (or COSCHED_MEMORY)"
            .to_string()
    } else if version > SCHEMA_VERSION {
        format!(
            "a memory database of a newer cosched (schema {version}; this one knows up to \
             {SCHEMA_VERSION}), left as it is, unread: use that cosched, or give this one another \
             file with --memory PATH (or COSCHED_MEMORY)"
        )
    } else {
        return None;
    };
    Some(StateError::Corrupt { path: path.to_path_buf(), message })
}

/// An SQLite error at `path`, saying what to do where the file is no
/// database SQLite can read.
fn unreadable(path: &Path, source: rusqlite::Error) -> StateError {
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StateError::Corrupt {
            path: path.to_path_buf(),
            message: format!(
                "not a database SQLite can read ({source}). If it is cosched's memory, it is \
                 damaged: remove it (`rm -f {p} {p}-wal {p}-shm`) and the next run starts a new \
                 one; if --memory or COSCHED_MEMORY names another file by mistake, name the memory \
                 database",
                p = path.display()
            ),
        },
        _ => StateError::Sql { path: path.to_path_buf(), source },
    }
}

/// What a run starts from, said as it starts and kept in its summary
/// (`--json`): the memory file it reads and writes, and per kind the sites
/// where it starts from what earlier runs learned of it (warm) and those
/// where it starts cold (what is the site's, its queue wait, still carries
/// over there from another kind).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryAtStart {
    /// The memory database; `None`: the run starts cold and keeps nothing.
    pub path: Option<PathBuf>,
    /// Each kind of the run, in kind order.
    pub kinds: Vec<KindAtStart>,
}

/// One kind's start ([`MemoryAtStart`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindAtStart {
    /// Its name in the run (`$(CoschedType)`).
    pub kind: String,
    /// Its memory key ([`crate::submit_desc::kind_key`]).
    pub key: String,
    /// Sites it starts warm at, in site order.
    pub warm: Vec<String>,
    /// Sites it starts cold at, in site order.
    pub new: Vec<String>,
}

impl MemoryAtStart {
    /// The start of a run over `sites` of `kinds` (name, memory key), in
    /// their orders, given what was `recalled` from the file at `path`.
    pub fn new(
        path: Option<&Path>,
        recalled: &CapacityMemory,
        kinds: &[(String, String)],
        sites: &[String],
    ) -> Self {
        let kinds = kinds
            .iter()
            .map(|(kind, key)| {
                let (warm, new) = sites.iter().cloned().partition(|site| recalled.get(site, key).is_some());
                KindAtStart { kind: kind.clone(), key: key.clone(), warm, new }
            })
            .collect();
        MemoryAtStart { path: path.map(Path::to_path_buf), kinds }
    }

    /// One line: `memory PATH: io warm at alpha, beta; cpu new`.
    pub fn line(&self) -> String {
        let Some(path) = &self.path else {
            return "no memory: every kind starts cold, and what this run learns is not kept".to_string();
        };
        let kinds: Vec<String> = self
            .kinds
            .iter()
            .map(|k| match (k.warm.is_empty(), k.new.is_empty()) {
                (true, _) => format!("{} new", k.kind),
                (false, true) => format!("{} warm at {}", k.kind, k.warm.join(", ")),
                (false, false) => {
                    format!("{} warm at {}, new at {}", k.kind, k.warm.join(", "), k.new.join(", "))
                }
            })
            .collect();
        format!("memory {}: {}", path.display(), kinds.join("; "))
    }
}

/// The rows `query` selects: a site, a second text (a kind, a date), and a
/// memory's JSON. A memory that cannot be read (hand-edited, or written by
/// a cosched whose memory had other fields) is skipped with a warning:
/// memory only speeds a run up.
pub(super) fn memory_rows(
    conn: &Connection,
    path: &Path,
    query: &str,
) -> Result<Vec<(String, String, SiteMemory)>, StateError> {
    let sql = |source| StateError::Sql { path: path.to_path_buf(), source };
    let mut stmt = conn.prepare(query).map_err(sql)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))
        .map_err(sql)?;
    let mut out = Vec::new();
    for row in rows {
        let (site, other, json) = row.map_err(sql)?;
        match serde_json::from_str::<SiteMemory>(&json) {
            Ok(m) => out.push((site, other, m)),
            Err(e) => tracing::warn!(
                "{}: the memory at {site} ({other:?}) is unreadable, ignored: {e}",
                path.display()
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Db;

    fn learned(capacity: f64) -> SiteMemory {
        SiteMemory { capacity: Some(capacity), mean_wait: Some(capacity * 10.0), ..SiteMemory::default() }
    }

    #[test]
    fn memory_is_kept_per_site_and_kind_and_merged_across_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deep/er/memory.db");
        let mut db = MemoryDb::open(&path).unwrap();
        let mut first = CapacityMemory::new();
        first.insert("a", "fp1:io", learned(4.0));
        first.insert("a", "fp1:cpu", learned(40.0));
        first.insert("b", "fp1:io", learned(8.0));
        db.save("r1", &first).unwrap();
        let mut second = CapacityMemory::new();
        second.insert("b", "fp1:io", learned(6.0));
        MemoryDb::open(&path).unwrap().save("r2", &second).unwrap();
        let loaded = MemoryDb::open(&path).unwrap().load().unwrap();
        let got: Vec<(&str, &str, Option<f64>)> = loaded.iter().map(|(s, k, m)| (s, k, m.capacity)).collect();
        assert_eq!(
            got,
            [("a", "fp1:cpu", Some(40.0)), ("a", "fp1:io", Some(4.0)), ("b", "fp1:io", Some(6.0))]
        );
    }

    #[test]
    fn runs_writing_at_once_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        let (runs, saves) = (6, 15);
        std::thread::scope(|scope| {
            for r in 0..runs {
                let path = &path;
                scope.spawn(move || {
                    for i in 0..saves {
                        // Each "run" opens the file afresh, as a run does.
                        let mut db = MemoryDb::open(path).unwrap_or_else(|e| panic!("run {r}: {e}"));
                        let mut m = CapacityMemory::new();
                        m.insert(format!("site{i}"), format!("kind{r}"), learned(f64::from(r * 100 + i)));
                        db.save(&format!("r{r}"), &m).unwrap_or_else(|e| panic!("run {r}, save {i}: {e}"));
                    }
                });
            }
        });
        let loaded = MemoryDb::open(&path).unwrap().load().unwrap();
        assert_eq!(loaded.len(), (runs * saves) as usize);
        for r in 0..runs {
            for i in 0..saves {
                let m = loaded.get(&format!("site{i}"), &format!("kind{r}"));
                assert_eq!(m.and_then(|m| m.capacity), Some(f64::from(r * 100 + i)), "run {r}, save {i}");
            }
        }
    }

    /// A state database of schema 2 (memory per site name only): the
    /// upgrade keeps its rows, a run moves them to the memory database as
    /// an unknown kind, which never passes for a kind's knee and carries
    /// over what is the site's.
    #[test]
    fn a_schema_2_state_database_s_memory_becomes_carry_over_of_an_unknown_kind() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.db");
        {
            let conn = Connection::open(&state).unwrap();
            for m in &crate::state::MIGRATIONS[..2] {
                conn.execute_batch(m).unwrap();
            }
            conn.pragma_update(None, "user_version", 2).unwrap();
            let old = SiteMemory { capacity: Some(12.0), mean_wait: Some(30.0), ..SiteMemory::default() };
            conn.execute(
                "INSERT INTO site_memory (site, memory, updated, run) VALUES ('a', ?1, '2026-01-01T00:00:00Z', 'old')",
                [serde_json::to_string(&old).unwrap()],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO site_memory (site, memory, updated, run) VALUES ('b', 'not json', '2026-01-01T00:00:00Z', 'old')",
                [],
            )
            .unwrap();
        }
        let db = Db::open(&state).unwrap();
        let legacy = db.legacy_memory().unwrap();
        assert_eq!(
            legacy.iter().map(|(s, _, m)| (s.as_str(), m.capacity)).collect::<Vec<_>>(),
            [("a", Some(12.0))]
        );

        let mut memory = MemoryDb::open(&dir.path().join("memory.db")).unwrap();
        let mut newer = CapacityMemory::new();
        newer.insert("a", UNKNOWN_KIND, learned(3.0));
        memory.save("new", &newer).unwrap();
        assert_eq!(memory.import_legacy(&legacy).unwrap(), 0, "never over newer memory of the site");
        let mut fresh = MemoryDb::open(&dir.path().join("fresh.db")).unwrap();
        assert_eq!(fresh.import_legacy(&legacy).unwrap(), 1);
        db.forget_legacy_memory().unwrap();
        assert!(db.legacy_memory().unwrap().is_empty());

        let loaded = fresh.load().unwrap();
        assert_eq!(loaded.get("a", UNKNOWN_KIND).and_then(|m| m.capacity), Some(12.0));
        let carried = loaded.carried_over("a").expect("the site's memory carries over");
        assert_eq!((carried.capacity, carried.mean_wait), (None, Some(30.0)));
    }

    #[test]
    fn a_file_that_is_not_a_memory_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.db");
        Db::open(&state).unwrap();
        let err = MemoryDb::open(&state).unwrap_err().to_string();
        assert!(err.contains("not a cosched memory database"), "{err}");
    }

    /// A memory database as a newer cosched would leave it: ours, of a
    /// schema this one does not know, not in WAL mode.
    fn newer(path: &Path) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
    }

    #[test]
    fn a_newer_coscheds_memory_is_said_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        newer(&path);
        let before = std::fs::read(&path).unwrap();
        let err = MemoryDb::open(&path).unwrap_err().to_string();
        assert!(err.contains("newer cosched") && err.contains("--memory PATH"), "{err}");
        assert!(!err.contains("--state-dir"), "a state directory is not what to change: {err}");
        // Compared whole, not printed: a page of bytes says nothing.
        assert!(std::fs::read(&path).unwrap() == before, "neither migrated nor switched to WAL");
        assert!(!dir.path().join("memory.db-wal").exists());
    }

    #[test]
    fn a_damaged_file_says_how_to_start_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        let err = MemoryDb::open(&path).unwrap_err().to_string();
        assert!(err.contains("not a database SQLite can read"), "{err}");
        assert!(err.contains(&format!("rm -f {}", path.display())), "{err}");
    }

    #[test]
    fn an_unreadable_memory_is_skipped_shown_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        let mut db = MemoryDb::open(&path).unwrap();
        let mut m = CapacityMemory::new();
        m.insert("a", "fp2:io", learned(4.0));
        m.insert("b", "fp2:io", learned(5.0));
        db.save("r1", &m).unwrap();
        db.conn.execute("UPDATE memory SET memory = 'not json' WHERE site = 'a'", []).unwrap();
        let loaded = db.load().unwrap();
        assert_eq!(loaded.iter().map(|(s, _, _)| s).collect::<Vec<_>>(), ["b"]);
        let entries = db.entries().unwrap();
        assert!(entries[0].site == "a" && entries[0].memory.is_err(), "{entries:?}");
        assert_eq!(entries[0].run.as_deref(), Some("r1"));
        assert_eq!(
            forget_command(&path, "a", Some("fp2:io")),
            format!("cosched memory forget a --kind fp2:io --memory {}", path.display())
        );
        assert_eq!(db.forget(Some("a"), Some("fp2:other")).unwrap(), 0);
        assert_eq!(db.forget(Some("a"), Some("fp2:io")).unwrap(), 1);
        assert_eq!(db.entries().unwrap().len(), 1);
        assert_eq!(db.forget(None, None).unwrap(), 1);
        assert!(db.entries().unwrap().is_empty());
    }

    #[test]
    fn a_run_says_per_kind_where_it_starts_warm() {
        let mut m = CapacityMemory::new();
        m.insert("alpha", "fp2:io", learned(4.0));
        m.insert("beta", "fp2:io", learned(6.0));
        m.insert("alpha", "fp2:other", learned(6.0));
        let sites = ["alpha".to_string(), "beta".to_string(), "gamma".to_string()];
        let kinds = [("io".to_string(), "fp2:io".to_string()), ("cpu".to_string(), "fp2:cpu".to_string())];
        let start = MemoryAtStart::new(Some(Path::new("/m/memory.db")), &m, &kinds, &sites);
        assert_eq!(start.line(), "memory /m/memory.db: io warm at alpha, beta, new at gamma; cpu new");
        assert_eq!(
            MemoryAtStart::new(Some(Path::new("/m/memory.db")), &m, &kinds[..1], &sites[..2]).line(),
            "memory /m/memory.db: io warm at alpha, beta"
        );
        let json = serde_json::to_value(&start).unwrap();
        assert_eq!(json["kinds"][0]["warm"], serde_json::json!(["alpha", "beta"]), "{json}");
        assert_eq!(json["kinds"][1]["new"], serde_json::json!(["alpha", "beta", "gamma"]), "{json}");
        let cold = MemoryAtStart::new(None, &CapacityMemory::new(), &kinds, &sites);
        assert!(cold.line().starts_with("no memory:"), "{}", cold.line());
    }

    #[test]
    fn memory_and_submit_take_the_same_file() {
        let given = Path::new("/g/m.db");
        assert_eq!(memory_file(Some(given), Some(Path::new("/s"))).unwrap(), given);
        assert_eq!(memory_file(None, Some(Path::new("/s"))).unwrap(), Path::new("/s/memory.db"));
        assert_eq!(memory_file(None, None), user_memory_path());
    }

    #[test]
    fn the_user_s_memory_follows_the_environment() {
        let path = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> =
                vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            memory_path_in(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.into()))
        };
        let all = [(MEMORY_ENV, "/m/mine.db"), ("XDG_STATE_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(path(&all).unwrap(), Path::new("/m/mine.db"));
        assert_eq!(path(&all[1..]).unwrap(), Path::new("/x/cosched/memory.db"));
        assert_eq!(path(&[(MEMORY_ENV, ""), all[1], all[2]]).unwrap(), Path::new("/x/cosched/memory.db"));
        assert_eq!(
            path(&[("XDG_STATE_HOME", "relative"), all[2]]).unwrap(),
            Path::new("/h/.local/state/cosched/memory.db")
        );
        assert!(path(&[]).unwrap_err().contains("--no-memory"));
    }
}
