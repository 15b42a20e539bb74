//! Following a log that HTCondor is still writing.
//!
//! The follower owns the read offset, the partial event at the end of the
//! file, and the file's identity. It wakes on inotify (via `notify`) and also
//! polls with a back-off that doubles to a cap and resets on data, because
//! inotify is blind on NFS, where user logs often live.
//!
//! - A write cut mid-event is held in the parser until the rest arrives.
//! - Rotation (another file now at the path; device+inode differ): the old
//!   file is read to its end first, then the new one from offset 0.
//! - Truncation or rewrite in place (size below our offset, or the first
//!   bytes changed): read again from offset 0, with a diagnostic.
//! - A log that does not exist yet is waited for.
//!
//! `next()` is cancel-safe: all reading and parsing happens synchronously in
//! one poll and its events are returned from that same poll, so a future
//! dropped while waiting loses nothing. Reads are plain blocking `pread`s of
//! what is already in the file; they never wait for data.

use super::{Diagnostic, Event, LegacyDates, Parser, DEFAULT_LEGACY_YEAR};
use crate::sync::Locked;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// First poll interval without a notification; doubles while idle.
const MIN_BACKOFF: Duration = Duration::from_millis(10);
/// Longest poll interval (the NFS worst case for noticing new data).
const MAX_BACKOFF: Duration = Duration::from_millis(1000);
/// Bytes compared at the start of the file to notice a rewrite in place.
const FINGERPRINT: usize = 64;
/// Read at most this much per poll before handing events back.
const MAX_READ_PER_POLL: u64 = 64 << 20;

/// Largest skipped prefix whose lines are counted when resuming mid-file.
/// Counting costs a read of the prefix; up to this much, no more than one
/// poll may read anyway ([`MAX_READ_PER_POLL`]), and in exchange diagnostics
/// say `FILE:LINE`. Past it, a resume would stall its task on reading
/// what the checkpoint exists to skip: diagnostics give the byte offset.
const MAX_COUNTED_PREFIX: u64 = MAX_READ_PER_POLL;

/// The 1-based line of byte `offset` of `file`, if the prefix before it is
/// at most 64 MiB (`MAX_COUNTED_PREFIX`); `None` (unknown) past that.
pub fn line_at(file: &File, offset: u64) -> io::Result<Option<u64>> {
    if offset > MAX_COUNTED_PREFIX {
        return Ok(None);
    }
    let mut buf = vec![0; (offset as usize).min(256 * 1024)];
    let (mut at, mut line) = (0u64, 1u64);
    while at < offset {
        let want = ((offset - at) as usize).min(buf.len());
        let n = file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            // Shorter than the offset: the line is not there to count.
            return Ok(None);
        }
        line += super::newlines(&buf[..n]);
        at += n as u64;
    }
    Ok(Some(line))
}

/// Follows a growing log. Cancel-safe `next()`: dropping its future loses nothing.
pub struct Follower {
    /// The log's path; what is at it may change (rotation).
    path: PathBuf,
    /// Parses the current file; `consumed()` is the checkpoint offset.
    parser: Parser,
    /// The file being read, if it exists yet.
    file: Option<OpenLog>,
    /// Offset to start the first file at (a saved checkpoint).
    start_offset: Option<u64>,
    /// The follower's own diagnostics (rotation, truncation) and the parser's.
    diagnostics: Vec<Diagnostic>,
    /// inotify wake-ups; `None` until set up (or if unavailable).
    wake: Option<Wake>,
    /// Never set up inotify: poll only (to measure the NFS fallback).
    polling_only: bool,
    /// Current idle poll interval.
    backoff: Duration,
    /// Read buffer, reused.
    buf: Vec<u8>,
}

struct OpenLog {
    file: File,
    dev: u64,
    ino: u64,
    /// Bytes of this file handed to the parser.
    read_to: u64,
    /// The file's first bytes, as read.
    fingerprint: Vec<u8>,
}

struct Wake {
    /// Keeps the directory's watch alive while this follower uses it.
    _watch: Arc<DirWatch>,
    rx: mpsc::Receiver<()>,
}

/// One inotify watch per directory, shared by every follower of a file in
/// it. A run keeps all its sites' logs in one directory: with a watch per
/// follower, each write to any log woke every follower's watcher (100 sites,
/// 100 watcher threads, each reading every event), which cost more CPU than
/// everything else cosched does in a run.
struct DirWatch {
    _watcher: notify::RecommendedWatcher,
    /// File name → the followers of that file (several may follow one file).
    subscribers: Arc<Mutex<HashMap<OsString, Vec<mpsc::Sender<()>>>>>,
}

/// The watches in use, by directory; a watch ends when its last follower goes.
fn dir_watches() -> &'static Mutex<HashMap<PathBuf, Weak<DirWatch>>> {
    static WATCHES: OnceLock<Mutex<HashMap<PathBuf, Weak<DirWatch>>>> = OnceLock::new();
    WATCHES.get_or_init(Default::default)
}

impl DirWatch {
    /// Subscribes to changes of `dir/name`, watching `dir` if nobody does yet.
    fn subscribe(dir: &Path, name: &OsStr) -> Option<(Arc<DirWatch>, mpsc::Receiver<()>)> {
        let mut watches = dir_watches().locked();
        watches.retain(|_, w| w.strong_count() > 0);
        let watch = match watches.get(dir).and_then(Weak::upgrade) {
            Some(watch) => watch,
            None => {
                let watch = Arc::new(DirWatch::start(dir)?);
                watches.insert(dir.to_path_buf(), Arc::downgrade(&watch));
                watch
            }
        };
        let (tx, rx) = mpsc::channel(1);
        watch.subscribers.locked().entry(name.to_os_string()).or_default().push(tx);
        Some((watch, rx))
    }

    fn start(dir: &Path) -> Option<DirWatch> {
        use notify::Watcher;
        let subscribers: Arc<Mutex<HashMap<OsString, Vec<mpsc::Sender<()>>>>> = Arc::default();
        let to = Arc::clone(&subscribers);
        // Runs on notify's own thread: never block there, only try_send.
        let handler = move |res: notify::Result<notify::Event>| {
            let mut subscribers = to.locked();
            let wake = |senders: &mut Vec<mpsc::Sender<()>>| {
                // A full channel already has a wake-up pending; a closed one's
                // follower is gone.
                senders.retain(|tx| !matches!(tx.try_send(()), Err(mpsc::error::TrySendError::Closed(_))));
            };
            match &res {
                Ok(ev) if !ev.paths.is_empty() => {
                    for name in ev.paths.iter().filter_map(|p| p.file_name()) {
                        if let Some(senders) = subscribers.get_mut(name) {
                            wake(senders);
                        }
                    }
                }
                // No path, or an error (e.g. the queue overflowed): anyone may
                // have missed something.
                _ => subscribers.values_mut().for_each(wake),
            }
            subscribers.retain(|_, senders| !senders.is_empty());
        };
        let mut watcher = notify::recommended_watcher(handler).ok()?;
        watcher.watch(dir, notify::RecursiveMode::NonRecursive).ok()?;
        Some(DirWatch { _watcher: watcher, subscribers })
    }
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower").field("path", &self.path).field("offset", &self.offset()).finish()
    }
}

impl Follower {
    /// Follows `path` from `start_offset` (0, or a saved [`Follower::offset`]).
    pub fn new(path: PathBuf, start_offset: u64) -> Self {
        Follower::with_legacy_year(path, start_offset, DEFAULT_LEGACY_YEAR)
    }

    /// [`Follower::new`] with the year for legacy `MM/DD` stamps.
    pub fn with_legacy_year(path: PathBuf, start_offset: u64, legacy_year: i32) -> Self {
        Follower::with_legacy_dates(path, start_offset, LegacyDates::in_year(legacy_year))
    }

    /// [`Follower::new`] dating legacy `MM/DD` stamps from `legacy` on (a
    /// run's log: [`LegacyDates::after`] the run's start). The years go on
    /// across rotations and truncations: the log's time does.
    pub fn with_legacy_dates(path: PathBuf, start_offset: u64, legacy: LegacyDates) -> Self {
        Follower {
            path,
            parser: Parser::resuming(start_offset, legacy),
            file: None,
            start_offset: Some(start_offset),
            diagnostics: Vec::new(),
            wake: None,
            polling_only: false,
            backoff: MIN_BACKOFF,
            buf: vec![0; 256 * 1024],
        }
    }

    /// Do not use inotify, only the polling back-off (as on NFS).
    pub fn polling_only(mut self) -> Self {
        self.polling_only = true;
        self.wake = None;
        self
    }

    /// Waits until at least one event is available and returns the events
    /// available now, in log order. Cancel-safe.
    pub async fn next(&mut self) -> io::Result<Vec<Event>> {
        loop {
            let events = self.poll()?;
            if !events.is_empty() {
                self.backoff = MIN_BACKOFF;
                return Ok(events);
            }
            self.wait().await;
        }
    }

    /// Reads whatever is in the file now, without waiting.
    pub fn poll(&mut self) -> io::Result<Vec<Event>> {
        self.ensure_watch();
        let mut events = Vec::new();
        let at_path = match std::fs::metadata(&self.path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let replaced = self
            .file
            .as_ref()
            .map(|open| at_path.as_ref().is_some_and(|m| (m.dev(), m.ino()) != (open.dev, open.ino)));
        if let Some(replaced) = replaced {
            if replaced {
                self.read_available(&mut events)?;
                self.close_rotated(&mut events);
            } else if let Some(why) = self.rewritten()? {
                let from = self.parser.consumed();
                self.diagnostics.push(Diagnostic {
                    line: self.parser.line(),
                    offset: from,
                    message: format!("{}: {why}; reading it again from the start", self.path.display()),
                });
                if let Some(open) = &mut self.file {
                    open.read_to = 0;
                    open.fingerprint.clear();
                }
                self.collect_parser_diagnostics();
                self.parser = Parser::resuming(0, self.parser.legacy_dates());
            }
        }
        if self.file.is_none() && at_path.is_some() {
            self.open()?;
        }
        match self.read_available(&mut events) {
            Ok(()) => {}
            Err(e) if events.is_empty() => return Err(e),
            Err(e) => tracing::warn!("reading {}: {e}", self.path.display()),
        }
        self.collect_parser_diagnostics();
        Ok(events)
    }

    /// Checkpoint: the offset just past the last event delivered, in the file
    /// now at the path. Resume with `Follower::new(path, offset)`.
    pub fn offset(&self) -> u64 {
        self.parser.consumed()
    }

    /// The log's path (what its diagnostics are about).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Diagnostics since the last call (malformed blocks, rotation, truncation).
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        self.collect_parser_diagnostics();
        std::mem::take(&mut self.diagnostics)
    }

    fn collect_parser_diagnostics(&mut self) {
        self.diagnostics.extend(self.parser.take_diagnostics());
    }

    fn open(&mut self) -> io::Result<()> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        let mut start = self.start_offset.take().unwrap_or(0);
        if start > meta.len() {
            self.diagnostics.push(Diagnostic { line: None,
                offset: start,
                message: format!(
                    "{}: saved offset {start} is past the end ({} bytes): the log was replaced; reading it from the start",
                    self.path.display(),
                    meta.len()
                ),
            });
            start = 0;
        }
        let mut fingerprint = vec![0; (start as usize).min(FINGERPRINT)];
        let n = file.read_at(&mut fingerprint, 0)?;
        fingerprint.truncate(n);
        let line = line_at(&file, start)?;
        self.parser = Parser::resuming(start, self.parser.legacy_dates()).at_line(line);
        self.file = Some(OpenLog { file, dev: meta.dev(), ino: meta.ino(), read_to: start, fingerprint });
        Ok(())
    }

    /// The old file has been read to its end; let it go.
    fn close_rotated(&mut self, events: &mut Vec<Event>) {
        events.extend(self.parser.finish());
        for d in self.parser.take_diagnostics() {
            self.diagnostics.push(Diagnostic {
                line: d.line,
                offset: d.offset,
                message: format!("{} (in the file rotated away from {})", d.message, self.path.display()),
            });
        }
        self.file = None;
        self.parser = Parser::resuming(0, self.parser.legacy_dates());
    }

    /// Has the open file been truncated or rewritten in place?
    fn rewritten(&mut self) -> io::Result<Option<String>> {
        let Some(open) = &self.file else { return Ok(None) };
        let len = open.file.metadata()?.len();
        if len < open.read_to {
            return Ok(Some(format!("truncated to {len} bytes (had read {})", open.read_to)));
        }
        if !open.fingerprint.is_empty() {
            let mut now = vec![0; open.fingerprint.len()];
            let n = open.file.read_at(&mut now, 0)?;
            if now[..n] != open.fingerprint[..] {
                return Ok(Some("rewritten in place (its first bytes changed)".into()));
            }
        }
        Ok(None)
    }

    fn read_available(&mut self, events: &mut Vec<Event>) -> io::Result<()> {
        let Some(open) = &mut self.file else { return Ok(()) };
        let mut read = 0u64;
        loop {
            let n = open.file.read_at(&mut self.buf, open.read_to)?;
            if n == 0 {
                return Ok(());
            }
            let chunk = &self.buf[..n];
            if open.fingerprint.len() < FINGERPRINT && (open.read_to as usize) == open.fingerprint.len() {
                let take = (FINGERPRINT - open.fingerprint.len()).min(n);
                open.fingerprint.extend_from_slice(&chunk[..take]);
            }
            open.read_to += n as u64;
            read += n as u64;
            events.extend(self.parser.feed(chunk));
            if read >= MAX_READ_PER_POLL && !events.is_empty() {
                return Ok(());
            }
        }
    }

    /// Subscribes to the inotify watch of the log's directory (once it exists).
    fn ensure_watch(&mut self) {
        if self.wake.is_some() || self.polling_only {
            return;
        }
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let Some(name) = self.path.file_name() else { return };
        if let Some((watch, rx)) = DirWatch::subscribe(&dir, name) {
            self.wake = Some(Wake { _watch: watch, rx });
        }
    }

    /// Waits for a notification or the poll interval, whichever is first.
    async fn wait(&mut self) {
        let sleep = tokio::time::sleep(self.backoff);
        match &mut self.wake {
            Some(wake) => {
                tokio::select! {
                    biased;
                    got = wake.rx.recv() => {
                        if got.is_none() {
                            self.wake = None;
                        }
                    }
                    _ = sleep => {}
                }
            }
            None => sleep.await,
        }
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine runs followers inside spawned tasks.
    #[test]
    fn follower_and_its_next_future_are_send() {
        fn send<T: Send>(_: &T) {}
        let mut f = Follower::new(PathBuf::from("/nonexistent/dir/job.log"), 0);
        send(&f);
        let fut = f.next();
        send(&fut);
    }
}
