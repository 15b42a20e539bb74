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
use rusqlite::{params, Connection, TransactionBehavior};
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
        return Ok(state.join("cosched").join("memory.db"));
    }
    match var("HOME") {
        Some(home) => Ok(home.join(".local/state/cosched/memory.db")),
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
    /// needed; another run may be doing the same at the same moment.
    pub fn open(path: &Path) -> Result<MemoryDb, StateError> {
        let sql = |source| StateError::Sql { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|source| StateError::Io { path: dir.to_path_buf(), source })?;
        }
        let mut conn = Connection::open(path).map_err(sql)?;
        conn.busy_timeout(super::BUSY_PATIENCE).map_err(sql)?;
        super::enable_wal(&conn).map_err(sql)?;
        // Memory only speeds a run up: a write lost to power loss costs a
        // cold start, not a job.
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(sql)?;
        // Read and migrated in one write transaction, so that two runs
        // creating the file at once migrate it once.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        let id: i32 = tx.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(sql)?;
        let version: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sql)?;
        let tables: i64 =
            tx.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(sql)?;
        if id != APPLICATION_ID && (id != 0 || tables > 0) {
            return Err(StateError::Corrupt {
                path: path.to_path_buf(),
                message: "not a cosched memory database (a state database is `state.db` in a state \
                          directory; the memory database is another file, e.g. memory.db)"
                    .into(),
            });
        }
        if version > SCHEMA_VERSION {
            return Err(StateError::TooNew {
                path: path.to_path_buf(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        if version < SCHEMA_VERSION {
            super::migrate(&tx, version, &MIGRATIONS).map_err(sql)?;
            tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(MemoryDb { conn, path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Everything learned so far, in the order it was learned (what carries
    /// over to a new kind is from the kind learned last at the site).
    pub fn load(&self) -> Result<CapacityMemory, StateError> {
        let query = "SELECT site, kind, memory FROM memory ORDER BY updated, site, kind";
        let mut memory = CapacityMemory::new();
        for (site, kind, m) in memory_rows(&self.conn, &self.path, query)? {
            memory.insert(site, kind, m);
        }
        Ok(memory)
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
