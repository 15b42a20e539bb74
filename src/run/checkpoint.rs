//! Checkpoints of a running run (`cosched submit` or the daemon's): the
//! policy's state and the progress tally, with each site's cursor (how far
//! its user log and its batches had been heard), taken between two inputs of
//! the engine every `[run] checkpoint_every` real seconds, and once more
//! when the run is stopped (SIGINT/SIGTERM, the daemon's stop:
//! [`Writer::finish`]). A resume restores the last one and replays only the
//! events past the cursors: seconds after a week of a million jobs, where
//! replaying the whole run takes longer the longer it ran.
//!
//! A checkpoint is a shortcut, never a record: the state database and the
//! user logs stay the truth, and resume settles unknown submissions from
//! them exactly as without one. A checkpoint that is missing, unreadable, of
//! another run or policy, or ahead of a user log (a log cut short by a crash
//! of the machine) is set aside with a warning, and the whole run is replayed.
//!
//! It is written to a temporary file, synced and renamed over the last one,
//! on a thread of its own: a crash leaves the previous checkpoint or the new
//! one, never half of one, and the run does not wait for the disk. The one
//! taken at a stop is written after the one under way, if any, and waited
//! for: the process is about to exit.

use crate::engine::SiteCursor;
use crate::policy::Time;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bumped whenever what a checkpoint holds changes meaning or layout (a
/// field added to a policy's state counts: postcard is not self-describing);
/// an older one is set aside (the run is replayed whole), never misread.
/// 2: `adaptive` keeps a probe's duration, the run times a memory-built
/// distribution came from, and only the verdicts not told yet.
/// 3: `adaptive` checks memory's run times against the run's own (a
/// recheck says whether it is of memory, with the ceiling before it, and a
/// site whether memory was checked).
/// 4: `adaptive` holds a site's controller phase as one enum (draining,
/// rechecking, holding) in place of flags, and no defaults for old layouts.
/// 5: `adaptive`'s draining phase carries the likeliest slowdown with what
/// its verdict proved, and a recheck what it suspects (the floor, or
/// memory's run times with memory's ceiling) as one enum.
/// 6: the job book keeps the sites that held each job for a cause of their
/// own (and which sites were live), `adaptive`'s site whether a job ran to
/// its end there since it was last given up.
/// 7: the progress tally counts each kind of job per site.
/// 8: `adaptive` keeps a controller per kind of job, each with the share of
/// every site's slots the other kinds leave it.
/// 9: `adaptive`'s queue-wait estimate keeps the recent waits and how the
/// site starts the jobs that wait there (its first cohort's verdict).
/// 10: a decision not told yet names its kind of job, and `adaptive`'s
/// controller per kind keeps them as `adaptive`'s one controller does.
/// 11: `adaptive`'s test, while a floor is rechecked, weighs runs faster
/// than the floor's baseline set aside (not slower than the fresh one).
/// 12: `adaptive`'s site keeps how much faster a check below proved the
/// floor's runs than the ceiling's, until the floor's first verdict.
/// 13: `adaptive`'s queue-wait estimate may hold memory's verdict on how the
/// site starts jobs while a warm run's first cohort is watched.
/// 14: `adaptive`'s first cohort is every job sent before any started (its
/// last submission, and the submission times of those still to start).
/// 15: `adaptive`'s queue-wait estimate keeps the started jobs' waits, the
/// shortest of them and the jobs that left unstarted (the wait proven, a
/// dead time then memoryless, that moves go by).
/// 16: `adaptive` with several kinds keeps, per kind and site, the kinds
/// seen slowed and the jobs of theirs its last degraded verdict ran beside.
/// 17: `adaptive`'s floor proved by a check below keeps the level its
/// baseline's runs saw running.
/// 18: the progress tally keeps where and when a job removed unstarted
/// left, so that a start its log writes after the removal counts it cut
/// short.
/// 19: `adaptive`'s site keeps how often its starts and ends are polled
/// (its test lets a cohort read up to a poll longer or shorter).
/// 20: the progress tally keeps each attempt's times, each site's (and
/// kind's) means over the attempts that succeeded, and the last end (the
/// summary's makespan, `crate::stats`).
const FORMAT: u32 = 20;

#[derive(Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    format: u32,
    pub run: String,
    pub policy: String,
    /// Wall-clock Unix seconds when it was taken.
    pub taken_unix: f64,
    /// One per site, in site order.
    pub cursors: Vec<SiteCursor>,
    /// [`crate::policy::Policy::checkpoint`].
    pub policy_state: Vec<u8>,
    /// [`super::progress::Progress::checkpoint`].
    pub progress: Vec<u8>,
}

/// Where a run's checkpoint lives.
pub fn path(run_dir: &Path) -> PathBuf {
    run_dir.join("checkpoint")
}

/// The checkpoint of run `run` with policy `policy` whose cursors fit the
/// user logs at `logs` (one per site), if there is one; a checkpoint set
/// aside says why on stderr.
pub fn load(run_dir: &Path, run: &str, policy: &str, logs: &[PathBuf]) -> Option<Checkpoint> {
    let file = path(run_dir);
    let bytes = match std::fs::read(&file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            set_aside(&file, &format!("cannot read it: {e}"));
            return None;
        }
    };
    let checkpoint: Checkpoint = match postcard::from_bytes(&bytes) {
        Ok(c) => c,
        Err(e) => {
            set_aside(&file, &format!("it does not decode: {e}"));
            return None;
        }
    };
    let why = if checkpoint.format != FORMAT {
        Some(format!("it is of format {}, this cosched writes {FORMAT}", checkpoint.format))
    } else if checkpoint.run != run || checkpoint.policy != policy {
        Some(format!("it is of run {} with policy {}", checkpoint.run, checkpoint.policy))
    } else if checkpoint.cursors.len() != logs.len() {
        Some(format!("it has {} sites, the run {}", checkpoint.cursors.len(), logs.len()))
    } else {
        checkpoint.cursors.iter().zip(logs).find_map(|(cursor, log)| {
            let length = std::fs::metadata(log).map_or(0, |m| m.len());
            (length < cursor.log_offset).then(|| {
                format!(
                    "the user log {} has {length} bytes, fewer than the {} it had read",
                    log.display(),
                    cursor.log_offset
                )
            })
        })
    };
    match why {
        Some(why) => {
            set_aside(&file, &why);
            None
        }
        None => Some(checkpoint),
    }
}

/// Says on stderr why a checkpoint is not used.
pub fn set_aside(file: &Path, why: &str) {
    eprintln!(
        "cosched: not using the checkpoint {} ({why}); replaying the whole run instead",
        file.display()
    );
}

/// Takes a checkpoint every so often, on its own thread.
pub struct Writer {
    file: PathBuf,
    run: String,
    policy: String,
    /// Run seconds between checkpoints (real seconds × the clock's rate).
    every: f64,
    /// Run time of the last checkpoint, or of the writer's start.
    last: Option<Time>,
    /// A write is under way (the next is skipped rather than queued).
    writing: Arc<AtomicBool>,
    /// The thread of the last write, for [`Writer::finish`] to wait on: two
    /// writes at once would share the temporary file.
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    /// A writer for run `run`, every `every_secs` real seconds on a clock
    /// that runs `rate` run seconds per real second; `None` for 0.
    pub fn new(run_dir: &Path, run: &str, policy: &str, every_secs: f64, rate: f64) -> Option<Writer> {
        (every_secs > 0.0).then(|| Writer {
            file: path(run_dir),
            run: run.to_string(),
            policy: policy.to_string(),
            every: every_secs * rate,
            last: None,
            writing: Arc::default(),
            thread: None,
        })
    }

    /// Whether a checkpoint is wanted at run time `now` (the first call
    /// starts the interval).
    pub fn due(&mut self, now: Time) -> bool {
        let last = *self.last.get_or_insert(now);
        now - last >= self.every && !self.writing.load(Ordering::Acquire)
    }

    /// Writes a checkpoint of the state given, taken at run time `now`, in
    /// the background.
    pub fn write(&mut self, now: Time, cursors: Vec<SiteCursor>, policy_state: Vec<u8>, progress: Vec<u8>) {
        self.last = Some(now);
        let Some(bytes) = self.encode(cursors, policy_state, progress) else {
            tracing::warn!("a checkpoint of run {} could not be encoded; none taken", self.run);
            return;
        };
        let file = self.file.clone();
        let writing = self.writing.clone();
        writing.store(true, Ordering::Release);
        self.thread = Some(std::thread::spawn(move || {
            if let Err(e) = replace(&file, &bytes) {
                tracing::warn!("cannot write the checkpoint {}: {e}; the last one stays", file.display());
            }
            writing.store(false, Ordering::Release);
        }));
    }

    /// Writes the checkpoint of a run that stops, on the calling thread
    /// (blocking: after the write under way, if any), whatever the interval;
    /// the run's next start goes on from it. `Err` says why there is none.
    pub fn finish(
        mut self,
        cursors: Vec<SiteCursor>,
        policy_state: Vec<u8>,
        progress: Vec<u8>,
    ) -> Result<PathBuf, String> {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let bytes = self
            .encode(cursors, policy_state, progress)
            .ok_or_else(|| format!("a checkpoint of run {} could not be encoded", self.run))?;
        replace(&self.file, &bytes).map_err(|e| format!("cannot write {}: {e}", self.file.display()))?;
        Ok(self.file)
    }

    fn encode(&self, cursors: Vec<SiteCursor>, policy_state: Vec<u8>, progress: Vec<u8>) -> Option<Vec<u8>> {
        let checkpoint = Checkpoint {
            format: FORMAT,
            run: self.run.clone(),
            policy: self.policy.clone(),
            taken_unix: crate::engine::wall_clock_unix(),
            cursors,
            policy_state,
            progress,
        };
        postcard::to_stdvec(&checkpoint).ok()
    }
}

/// Writes `bytes` over `file` atomically: a temporary file beside it,
/// synced, then renamed over it.
fn replace(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let temporary = file.with_extension("new");
    let mut out = std::fs::File::create(&temporary)?;
    out.write_all(bytes)?;
    out.sync_all()?;
    std::fs::rename(&temporary, file)?;
    if let Some(dir) = file.parent() {
        // The rename itself is durable once the directory is synced.
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_written(writer: &Writer) {
        while writer.writing.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_checkpoint_is_loaded_only_for_its_run_its_policy_and_logs_that_reach_its_cursors() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("a.log");
        std::fs::write(&log, vec![b'x'; 100]).unwrap();
        let logs = vec![log.clone()];
        let mut writer = Writer::new(dir.path(), "r1", "adaptive", 60.0, 1.0).unwrap();
        writer.write(0.0, vec![SiteCursor { log_offset: 100, batches: 3 }], vec![1, 2, 3], vec![4]);
        wait_written(&writer);

        let loaded = load(dir.path(), "r1", "adaptive", &logs).expect("its own checkpoint");
        assert_eq!(loaded.cursors, vec![SiteCursor { log_offset: 100, batches: 3 }]);
        assert_eq!((loaded.policy_state, loaded.progress), (vec![1, 2, 3], vec![4]));
        assert!(load(dir.path(), "r2", "adaptive", &logs).is_none(), "another run");
        assert!(load(dir.path(), "r1", "thesis", &logs).is_none(), "another policy");
        assert!(load(dir.path(), "r1", "adaptive", &[log.clone(), log.clone()]).is_none(), "other sites");
        std::fs::write(&log, vec![b'x'; 99]).unwrap();
        assert!(load(dir.path(), "r1", "adaptive", &logs).is_none(), "a log shorter than its cursor");
        std::fs::write(path(dir.path()), b"\xff\xff\xff").unwrap();
        assert!(load(dir.path(), "r1", "adaptive", &logs).is_none(), "garbage");
        assert!(load(&dir.path().join("none"), "r1", "adaptive", &logs).is_none(), "no checkpoint");
    }

    #[test]
    fn a_checkpoint_is_due_once_per_interval_of_real_time() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Writer::new(dir.path(), "r1", "adaptive", 0.0, 1.0).is_none());
        // 60 real seconds on a clock at 500 run seconds per real second.
        let mut writer = Writer::new(dir.path(), "r1", "adaptive", 60.0, 500.0).unwrap();
        assert!(!writer.due(1000.0), "the first call starts the interval");
        assert!(!writer.due(1000.0 + 29_999.0));
        assert!(writer.due(1000.0 + 30_000.0));
        writer.write(31_000.0, vec![SiteCursor::default()], Vec::new(), Vec::new());
        wait_written(&writer);
        assert!(!writer.due(31_000.0 + 29_999.0), "the interval restarts at each checkpoint");
        assert!(writer.due(31_000.0 + 30_000.0));
    }

    /// A tester's SIGTERM of the daemon: the log said the run was
    /// checkpointed for its next start, and no checkpoint was there. The
    /// one of a stop is written at once, whatever the interval, after the
    /// write under way.
    #[test]
    fn the_checkpoint_of_a_stop_is_written_at_once_after_the_one_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("a.log");
        std::fs::write(&log, vec![b'x'; 200]).unwrap();
        let mut writer = Writer::new(dir.path(), "r1", "adaptive", 3600.0, 1.0).unwrap();
        assert!(!writer.due(0.0), "no periodic checkpoint for an hour");
        writer.write(0.0, vec![SiteCursor { log_offset: 100, batches: 1 }], vec![1], vec![1]);
        let file = writer.finish(vec![SiteCursor { log_offset: 200, batches: 2 }], vec![2], vec![2]).unwrap();
        assert_eq!(file, path(dir.path()));
        let loaded = load(dir.path(), "r1", "adaptive", &[log]).expect("the stop's checkpoint");
        assert_eq!(loaded.cursors, vec![SiteCursor { log_offset: 200, batches: 2 }], "the last one wins");
        assert_eq!((loaded.policy_state, loaded.progress), (vec![2], vec![2]));
        assert!(!dir.path().join("checkpoint.new").exists(), "no temporary file is left");
    }
}
