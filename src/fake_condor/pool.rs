//! The pool directory: configuration, the shared queue, the history record,
//! locking and the scaled clock.
//!
//! Files (all in the pool directory):
//! - `pool.toml` — [`PoolConfig`], written once by `install`.
//! - `pool.lock` — every reader and writer of the queue holds an exclusive
//!   `flock` on it, so the queue is never seen half-updated.
//! - `queue.json` — [`Queue`]: the jobs still in the queue, the cluster
//!   counter and the user-log events of the last change until they are
//!   written ([`Pool::commit`]). Replaced by temp file + rename, so a process
//!   killed at any moment leaves either the old or the new queue.
//! - `history.jsonl` — one [`HistoryRecord`] line per status change of every
//!   proc ever queued; [`history`] keeps each proc's last line.
//! - `schedd.lock`, `schedd.pid`, `schedd.log` — the single schedd instance.

use super::expr::AdValue;
use super::{PoolConfig, POOL_ENV, SCHEDD_NAME};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

const CONFIG_FILE: &str = "pool.toml";
const LOCK_FILE: &str = "pool.lock";
const QUEUE_FILE: &str = "queue.json";
const HISTORY_FILE: &str = "history.jsonl";
pub(crate) const SCHEDD_LOCK: &str = "schedd.lock";
pub(crate) const SCHEDD_PID: &str = "schedd.pid";
pub(crate) const SCHEDD_LOG: &str = "schedd.log";

/// The real wall clock, Unix seconds.
/// An exclusive `flock`; released when dropped (the file is closed).
pub(crate) struct FileLock {
    _file: File,
}

fn open_lock_file(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)
}

fn flock(file: &File, operation: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), operation) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Blocks until the exclusive lock on `path` is ours.
pub(crate) fn lock(path: &Path) -> io::Result<FileLock> {
    let file = open_lock_file(path)?;
    flock(&file, libc::LOCK_EX)?;
    Ok(FileLock { _file: file })
}

/// Takes the exclusive lock on `path` if nobody holds it.
pub(crate) fn try_lock(path: &Path) -> io::Result<Option<FileLock>> {
    let file = open_lock_file(path)?;
    match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => Ok(Some(FileLock { _file: file })),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to `path` through a temp file and a rename.
/// The length of a user log; 0 when it does not exist yet.
fn log_length(log: &Path) -> u64 {
    std::fs::metadata(log).map_or(0, |m| m.len())
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// One job in the queue. Times are simulated seconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Job {
    pub cluster: u64,
    pub proc: u64,
    /// Submission time.
    pub qdate: f64,
    /// 1 idle, 2 running, 5 held (HTCondor's JobStatus).
    pub status: u8,
    pub entered_status: f64,
    /// `None` for a vanilla job (runs at the pool's `local` site).
    pub grid_resource: Option<String>,
    /// HTCondor's JobUniverse: 9 grid, 5 vanilla.
    pub universe: u8,
    /// Absolute path of the user log, if the job has one.
    pub log: Option<PathBuf>,
    pub cmd: String,
    pub args: String,
    pub iwd: String,
    pub owner: String,
    pub submit_file: String,
    /// `+Attr` / `MY.Attr` attributes of the submit description, names as written.
    pub attrs: BTreeMap<String, AdValue>,
    /// Simulated seconds of work at speed 1.
    pub work: f64,
    /// Decided at submission: this attempt goes on hold when it would start.
    pub hold: bool,
    /// Set when the 027 event is written.
    pub grid_job_id: Option<String>,
    /// When the 001 event was written.
    pub start_date: Option<f64>,
    pub hold_reason: Option<String>,
}

impl Job {
    pub fn id(&self) -> (u64, u64) {
        (self.cluster, self.proc)
    }
    /// The site the job runs at, as history records it.
    pub fn site_name(&self) -> String {
        self.grid_resource.clone().unwrap_or_else(|| "local".to_string())
    }
    /// A custom attribute by name (ClassAd names are case-insensitive).
    pub fn attr(&self, name: &str) -> Option<&AdValue> {
        self.attrs.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    }
}

/// A removal done by `condor_rm` that the schedd has not yet applied to its model.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Removal {
    pub cluster: u64,
    pub proc: u64,
    pub at: f64,
}

fn first_cluster() -> u64 {
    1
}

/// The shared queue (`queue.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Queue {
    /// The next cluster id; ids are never reused, also after a failed submit.
    #[serde(default = "first_cluster")]
    pub next_cluster: u64,
    /// The next remote cluster id (the number in a 027's GridJobId).
    #[serde(default = "first_cluster")]
    pub next_remote: u64,
    /// Number of `condor_submit` calls so far (indexes the transient-failure draws).
    #[serde(default)]
    pub submit_calls: u64,
    /// Jobs in the queue, ordered by (cluster, proc).
    #[serde(default)]
    pub jobs: Vec<Job>,
    #[serde(default)]
    pub removals: Vec<Removal>,
    /// User-log events of the last committed change that may not be in their
    /// logs yet (see [`Pool::commit`]).
    #[serde(default)]
    pub unwritten: Vec<Unwritten>,
}

/// Text a committed change appends to a user log, and the log's length
/// before it: the text is in the log once the log is longer than that (logs
/// only grow, and only under the pool lock).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Unwritten {
    pub log: PathBuf,
    pub at: u64,
    pub text: String,
}

impl Queue {
    /// Writes the events a killed command committed but did not write, and
    /// forgets them (the caller saves the queue with its own change). Hold
    /// the pool lock.
    pub fn write_unwritten(&mut self) {
        for u in std::mem::take(&mut self.unwritten) {
            if log_length(&u.log) <= u.at {
                let _ = super::events::append(&u.log, &u.text);
            }
        }
    }
}

impl Default for Queue {
    fn default() -> Self {
        Queue {
            next_cluster: 1,
            next_remote: 1,
            submit_calls: 0,
            jobs: Vec::new(),
            removals: Vec::new(),
            unwritten: Vec::new(),
        }
    }
}

/// What became of a proc, as `history.jsonl` records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryStatus {
    /// In the queue (idle or running).
    Queued,
    /// On hold, still in the queue.
    Held,
    /// Ended with return value 0.
    Succeeded,
    /// Ended with a non-zero return value (a model failure).
    Failed,
    /// Removed with condor_rm.
    Removed,
}

/// One proc ever queued in a pool, with its latest status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryRecord {
    pub cluster: u64,
    pub proc: u64,
    /// The job's `CoschedRun` attribute.
    pub run: Option<String>,
    /// The job's `CoschedJob` attribute.
    pub job: Option<u64>,
    /// The job's `CoschedBatch` attribute.
    pub batch: Option<String>,
    /// The job's `CoschedType` attribute (its kind).
    #[serde(default)]
    pub kind: Option<String>,
    /// Its `arguments`, macros expanded: what the job would be run with.
    #[serde(default)]
    pub args: String,
    /// The job's `grid_resource`, or `local` for a vanilla job.
    pub site: String,
    pub status: HistoryStatus,
    /// Simulated time of this status.
    pub time: f64,
}

impl HistoryRecord {
    pub(crate) fn of(job: &Job, status: HistoryStatus, time: f64) -> Self {
        let number = |name: &str| job.attr(name).and_then(AdValue::as_u64);
        HistoryRecord {
            cluster: job.cluster,
            proc: job.proc,
            run: job.attr("CoschedRun").map(AdValue::as_plain_string),
            job: number("CoschedJob"),
            batch: job.attr("CoschedBatch").map(AdValue::as_plain_string),
            kind: job.attr("CoschedType").map(AdValue::as_plain_string),
            args: job.args.clone(),
            site: job.site_name(),
            status,
            time,
        }
    }
}

/// Every proc ever queued in the pool at `pool_dir`, with its latest status,
/// ordered by (cluster, proc). Missing or unreadable history reads as empty;
/// a torn last line (a writer killed mid-write) is skipped.
pub fn history(pool_dir: &Path) -> Vec<HistoryRecord> {
    // Under the pool lock: never half of an append.
    let Ok(_guard) = lock(&pool_dir.join(LOCK_FILE)) else { return Vec::new() };
    let Ok(text) = std::fs::read_to_string(pool_dir.join(HISTORY_FILE)) else { return Vec::new() };
    let mut latest: BTreeMap<(u64, u64), HistoryRecord> = BTreeMap::new();
    for line in text.lines() {
        if let Ok(record) = serde_json::from_str::<HistoryRecord>(line) {
            latest.insert((record.cluster, record.proc), record);
        }
    }
    latest.into_values().collect()
}

/// An opened pool: its directory and configuration (epoch resolved).
pub(crate) struct Pool {
    pub dir: PathBuf,
    pub config: PoolConfig,
    pub epoch: f64,
}

impl Pool {
    /// The pool named by `COSCHED_FAKE_POOL`; the error is the message to print.
    pub fn from_env() -> Result<Pool, String> {
        match std::env::var_os(POOL_ENV) {
            Some(dir) if !dir.is_empty() => Pool::open(Path::new(&dir)),
            _ => Err(format!(
                "{POOL_ENV} is not set. This is cosched's fake HTCondor; point {POOL_ENV} at a pool \
                 directory made by `cosched submit --simulate` (or cosched::fake_condor::install)."
            )),
        }
    }

    pub fn open(dir: &Path) -> Result<Pool, String> {
        let path = dir.join(CONFIG_FILE);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("Can't read the fake pool's configuration {}: {e}", path.display()))?;
        let config: PoolConfig = toml::from_str(&text)
            .map_err(|e| format!("{}: invalid fake pool configuration: {e}", path.display()))?;
        let epoch =
            config.epoch.ok_or_else(|| format!("{}: no epoch (write it with install)", path.display()))?;
        if !(config.speedup > 0.0 && config.speedup.is_finite()) {
            return Err(format!("{}: speedup must be a positive number", path.display()));
        }
        Ok(Pool { dir: dir.to_path_buf(), config, epoch })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn lock(&self) -> io::Result<FileLock> {
        lock(&self.path(LOCK_FILE))
    }

    /// Simulated time now.
    pub fn sim_now(&self) -> f64 {
        self.sim_at(crate::engine::wall_clock_unix())
    }

    /// Simulated time at real Unix time `real`.
    pub fn sim_at(&self, real: f64) -> f64 {
        ((real - self.epoch) * self.config.speedup).max(0.0)
    }

    /// Real Unix time at which simulated time reads `sim`.
    pub fn real_at(&self, sim: f64) -> f64 {
        self.epoch + sim / self.config.speedup
    }

    /// The virtual wall clock (Unix seconds) at simulated time `sim`.
    pub fn virtual_unix(&self, sim: f64) -> f64 {
        self.epoch + sim
    }

    /// Reads the queue (an absent queue is an empty one). Hold the pool lock.
    pub fn load_queue(&self) -> io::Result<Queue> {
        match std::fs::read(self.path(QUEUE_FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("queue.json: {e}"))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Queue::default()),
            Err(e) => Err(e),
        }
    }

    /// Replaces the queue. Hold the pool lock.
    pub fn save_queue(&self, queue: &Queue) -> io::Result<()> {
        let bytes = serde_json::to_vec(queue).map_err(io::Error::other)?;
        write_atomic(&self.path(QUEUE_FILE), &bytes)
    }

    /// Saves `queue` with the user-log events and history records of its
    /// change, then writes them, as HTCondor's schedd logs a change once it
    /// has committed it: an event always describes a committed change, and a
    /// process killed between the two leaves the events and records in
    /// `queue.json`, for the next holder of the lock to write
    /// ([`Queue::write_unwritten`]), never lost. Returns the user logs that
    /// could not be written; an error if the queue or the history could not.
    /// Hold the pool lock.
    pub fn commit(
        &self,
        queue: &mut Queue,
        events: &[(PathBuf, String)],
        records: &[HistoryRecord],
    ) -> io::Result<Vec<(PathBuf, io::Error)>> {
        queue.write_unwritten();
        let mut by_log: BTreeMap<&Path, String> = BTreeMap::new();
        for (log, text) in events {
            by_log.entry(log.as_path()).or_default().push_str(text);
        }
        let history = self.path(HISTORY_FILE);
        let mut history_text = String::new();
        for r in records {
            history_text.push_str(&serde_json::to_string(r).map_err(io::Error::other)?);
            history_text.push('\n');
        }
        // The history before the user logs, here and in `write_unwritten`: a
        // reader that sees an end in a log (tests poll logs without the
        // lock) then finds its record. Written after, a test that read the
        // history on seeing the last 005 found that job still queued.
        queue.unwritten = (!history_text.is_empty())
            .then_some((history.as_path(), history_text.clone()))
            .into_iter()
            .chain(by_log)
            .map(|(log, text)| Unwritten { log: log.to_path_buf(), at: log_length(log), text })
            .collect();
        self.save_queue(queue)?;
        // Written now; the saved copy stays for a reader after a kill.
        queue.unwritten.clear();
        if !history_text.is_empty() {
            super::events::append(&history, &history_text)?;
        }
        Ok(super::events::append_all(events))
    }

    /// (inode, length, mtime) of the queue file, to notice other writers.
    pub fn queue_stamp(&self) -> Option<(u64, u64, i64, i64)> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(self.path(QUEUE_FILE)).ok()?;
        Some((m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
    }

    /// Starts the schedd unless one runs. Call with the pool lock held: the
    /// schedd decides to exit under the same lock, so a job queued now is
    /// either seen by the running schedd or by the one started here.
    pub fn ensure_schedd(&self) -> io::Result<()> {
        match try_lock(&self.path(SCHEDD_LOCK))? {
            None => Ok(()),
            Some(probe) => {
                drop(probe);
                spawn_schedd(&self.dir)
            }
        }
    }
}

fn spawn_schedd(dir: &Path) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg0(SCHEDD_NAME)
        .arg(dir)
        .env(POOL_ENV, dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid, syscall and close are async-signal-safe and touch no
    // memory of ours. A new session keeps the schedd alive when the caller's
    // process group is killed (a Ctrl-C or kill of cosched must not take the
    // "HTCondor" down with it). Closing every inherited descriptor above
    // stdio keeps the long-lived schedd from holding a caller's pipe open
    // (which would make a `Command::output()` of cosched wait for it).
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
                for fd in 3..4096 {
                    libc::close(fd);
                }
            }
            Ok(())
        });
    }
    cmd.spawn().map(drop)
}

/// See [`super::install_with_exe`].
pub(crate) fn install(pool_dir: &Path, config: &PoolConfig, exe: &Path) -> io::Result<PathBuf> {
    std::fs::create_dir_all(pool_dir)?;
    let mut config = config.clone();
    if config.epoch.is_none() {
        config.epoch = Some(crate::engine::wall_clock_unix());
    }
    let text = toml::to_string(&config).map_err(io::Error::other)?;
    let config_path = pool_dir.join(CONFIG_FILE);
    let old = std::fs::read_to_string(&config_path).ok();
    if old.as_deref() != Some(text.as_str()) {
        stop_schedd(pool_dir)?;
        write_atomic(&config_path, text.as_bytes())?;
    }
    let bin = pool_dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    for name in ["condor_submit", "condor_rm", "condor_q", "condor_config_val"] {
        let link = bin.join(name);
        match std::fs::remove_file(&link) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::os::unix::fs::symlink(exe, &link)?;
    }
    Ok(bin)
}

/// See [`super::stop`].
pub(crate) fn stop_schedd(pool_dir: &Path) -> io::Result<()> {
    let lock_path = pool_dir.join(SCHEDD_LOCK);
    if !pool_dir.exists() || try_lock(&lock_path)?.is_some() {
        return Ok(());
    }
    let pid: Option<libc::pid_t> =
        std::fs::read_to_string(pool_dir.join(SCHEDD_PID)).ok().and_then(|s| s.trim().parse().ok());
    let Some(pid) = pid.filter(|&p| p > 1) else {
        return Err(io::Error::other(format!(
            "{}: a schedd holds the lock but left no pid",
            pool_dir.display()
        )));
    };
    for (signal, patience) in [(libc::SIGTERM, 100), (libc::SIGKILL, 100)] {
        // SAFETY: kill with a pid we read from our own pid file, whose owner
        // still holds the schedd lock (so the pid is not a recycled one).
        unsafe { libc::kill(pid, signal) };
        for _ in 0..patience {
            if try_lock(&lock_path)?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Err(io::Error::other(format!("the fake schedd (pid {pid}) of {} did not stop", pool_dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A committed event is written once: by the next holder of the lock if
    /// the command that committed it died first, not again if it did not.
    #[test]
    fn unwritten_events_are_written_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("job.log");
        std::fs::write(&log, "000 first\n").unwrap();
        let pending = || vec![Unwritten { log: log.clone(), at: 10, text: "009 second\n".into() }];
        let mut queue = Queue { unwritten: pending(), ..Queue::default() };
        queue.write_unwritten();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "000 first\n009 second\n");
        assert!(queue.unwritten.is_empty());
        // The same entry again, as left by a command that did write it.
        let mut queue = Queue { unwritten: pending(), ..Queue::default() };
        queue.write_unwritten();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "000 first\n009 second\n");
        // A log that does not exist yet gets the whole text.
        let fresh = dir.path().join("new.log");
        let mut queue = Queue {
            unwritten: vec![Unwritten { log: fresh.clone(), at: 0, text: "000 x\n".into() }],
            ..Queue::default()
        };
        queue.write_unwritten();
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "000 x\n");
    }

    /// A process killed right after saving its commit (the state a
    /// `fake_condor::stop` mid-tick can leave) wrote neither its events nor
    /// its history records: the next loader writes both, once.
    #[test]
    fn a_commit_cut_after_its_save_is_completed_by_the_next_loader() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool { dir: dir.path().to_path_buf(), config: PoolConfig::default(), epoch: 0.0 };
        let log = dir.path().join("job.log");
        std::fs::write(&log, "000 first\n").unwrap();
        let record = HistoryRecord {
            cluster: 1,
            proc: 2,
            run: None,
            job: None,
            batch: None,
            kind: None,
            args: String::new(),
            site: "local".into(),
            status: HistoryStatus::Succeeded,
            time: 9.0,
        };
        let mut queue = Queue::default();
        pool.commit(&mut queue, &[(log.clone(), "005 done\n".into())], std::slice::from_ref(&record))
            .unwrap();
        assert_eq!(history(dir.path()), std::slice::from_ref(&record));
        // Undo the writes that followed the save, as a kill before them would.
        std::fs::write(&log, "000 first\n").unwrap();
        std::fs::remove_file(pool.path(HISTORY_FILE)).unwrap();
        for _ in 0..2 {
            pool.load_queue().unwrap().write_unwritten();
            assert_eq!(std::fs::read_to_string(&log).unwrap(), "000 first\n005 done\n");
            assert_eq!(history(dir.path()), std::slice::from_ref(&record));
        }
    }
}
