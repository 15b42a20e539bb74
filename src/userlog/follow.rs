//! Following a log that HTCondor is still writing.
//!
//! The follower owns the read offset, the partial event at the end of the
//! file, and the file's identity. It wakes on inotify (via `notify`) and also
//! polls with a back-off that doubles to a cap and resets on data, because
//! inotify is blind on NFS, where user logs often live.
//!
//! - A write cut mid-event is held in the parser until the rest arrives.
//! - Rotation (another file now at the path; device+inode differ): the old
//!   file is read to its end first (through the descriptor held open, under
//!   whatever name it has now), then any files rotated away after it and
//!   before the new one (a log rotated more than once between two polls),
//!   oldest first, then the new one from offset 0. Those in between are
//!   found by name beside the log: `LOG.old` and `LOG.N`, HTCondor's
//!   rotation (`EVENT_LOG_MAX_ROTATIONS`) and logrotate's. They are told
//!   apart from older rotated files by their identity (files this follower
//!   read to their end are not read again) and by their modification time
//!   (a file rotated after the old one was written after the old one was
//!   last seen at the path). Events that cannot be read so (a compressed
//!   rotated file, a read error, or a file dropped by later rotations) are
//!   reported as a loss, never skipped silently: see [`Follower::next`].
//!   What this cannot see: a file deleted rather than renamed, or moved to
//!   another directory, before it was read.
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
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// First poll interval without a notification; doubles while idle.
const MIN_BACKOFF: Duration = Duration::from_millis(10);
/// Longest poll interval (the NFS worst case for noticing new data).
const MAX_BACKOFF: Duration = Duration::from_millis(1000);
/// Bytes compared at the start of the file to notice a rewrite in place.
const FINGERPRINT: usize = 64;
/// Read at most this much per poll before handing events back.
const MAX_READ_PER_POLL: u64 = 64 << 20;
/// Files read to their end that are remembered, so that one found again
/// under a rotated name is not read twice (older ones are told by their
/// modification time anyway).
const MAX_FINISHED: usize = 64;
/// Extensions of compressed rotated files (logrotate's `compress`).
const COMPRESSED: [&str; 6] = ["gz", "bz2", "xz", "zst", "lz4", "Z"];
/// What a loss of events means and what to do about it: the end of every
/// diagnostic that reports one.
const LOST: &str = "the jobs whose events were there stay counted as queued or running, neither done \
                    nor failed: cosched learns of a job's end only from this log, and neither the run nor \
                    `cosched submit --resume` settles them from condor_q; `condor_history` tells what \
                    became of them";

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
    /// The last files read to their end (rotated away), newest last.
    finished: VecDeque<Finished>,
    /// Events were lost since `next()` last returned: it returns now, with
    /// or without events, so that the diagnostic is not held back until the
    /// log's next event (which may never come).
    lost: bool,
}

struct OpenLog {
    file: File,
    dev: u64,
    ino: u64,
    /// Bytes of this file handed to the parser.
    read_to: u64,
    /// The file's first bytes, as read.
    fingerprint: Vec<u8>,
    /// Its modification time when it was last seen at the path: a file
    /// rotated away after it was created after that, so modified no earlier.
    seen_mtime: Option<SystemTime>,
}

/// A file read to its end: its identity, and its first bytes (an inode
/// number is reused once a file is deleted; its first events are not).
struct Finished {
    dev: u64,
    ino: u64,
    fingerprint: Vec<u8>,
}

impl Finished {
    /// Is `file` (with metadata `meta`) this one?
    fn is(&self, file: &File, meta: &std::fs::Metadata) -> bool {
        if (meta.dev(), meta.ino()) != (self.dev, self.ino) {
            return false;
        }
        if self.fingerprint.is_empty() {
            return meta.len() == 0;
        }
        let mut head = vec![0; self.fingerprint.len()];
        matches!(file.read_at(&mut head, 0), Ok(n) if head[..n] == self.fingerprint[..])
    }
}

/// A name a rotated copy of the log gets: `LOG.old` or `LOG.N`, compressed
/// or not.
struct Slot {
    /// Order among files of one modification time, older first: the larger
    /// number is older (HTCondor and logrotate move older files up), `.old`
    /// is the newest.
    age: u64,
    compressed: bool,
}

impl Slot {
    /// The slot of `name` for a log named `log`, if it is one.
    fn of(log: &OsStr, name: &OsStr) -> Option<Slot> {
        let rest = name.as_bytes().strip_prefix(log.as_bytes())?.strip_prefix(b".")?;
        let rest = std::str::from_utf8(rest).ok()?;
        let (stem, compressed) = match rest.split_once('.') {
            Some((stem, ext)) if COMPRESSED.contains(&ext) => (stem, true),
            Some(_) => return None,
            None => (rest, false),
        };
        let age = match stem {
            "old" => 0,
            digits
                if !digits.is_empty() && digits.len() <= 9 && digits.bytes().all(|b| b.is_ascii_digit()) =>
            {
                digits.parse().ok()?
            }
            _ => return None,
        };
        Some(Slot { age, compressed })
    }
}

/// A file rotated away after the one being read, still to be read.
struct Rotated {
    path: PathBuf,
    mtime: Option<SystemTime>,
    age: u64,
    len: u64,
    /// The open file and its identity; `None` if compressed.
    file: Option<(File, u64, u64)>,
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
            finished: VecDeque::new(),
            lost: false,
        }
    }

    /// Do not use inotify, only the polling back-off (as on NFS).
    pub fn polling_only(mut self) -> Self {
        self.polling_only = true;
        self.wake = None;
        self
    }

    /// Waits until at least one event is available and returns the events
    /// available now, in log order. Cancel-safe. Also returns, with or
    /// without events, as soon as events are found lost (a rotated file that
    /// cannot be read): [`Follower::take_diagnostics`] says what was lost.
    pub async fn next(&mut self) -> io::Result<Vec<Event>> {
        loop {
            let events = self.poll()?;
            if !events.is_empty() || self.lost {
                self.lost = false;
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
        if let (Some(false), Some(open), Some(meta)) = (replaced, &mut self.file, &at_path) {
            open.seen_mtime = meta.modified().ok();
        }
        if let Some(replaced) = replaced {
            if replaced {
                // No cap on this read: a checkpoint is an offset in the file
                // at the path, so none may fall between the old file's
                // events and the new one's.
                match self.read_available(&mut events, u64::MAX) {
                    Ok(()) => {}
                    Err(e) if events.is_empty() => return Err(e),
                    Err(e) => {
                        // It stays open: the next poll reads on from here.
                        tracing::warn!("reading {} (rotated away): {e}", self.path.display());
                        self.collect_parser_diagnostics();
                        return Ok(events);
                    }
                }
                if let Some(old) = self.close_rotated(&mut events) {
                    self.read_rotated_since(&old, at_path.as_ref(), &mut events);
                }
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
        match self.read_available(&mut events, MAX_READ_PER_POLL) {
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
        let seen_mtime = meta.modified().ok();
        self.file =
            Some(OpenLog { file, dev: meta.dev(), ino: meta.ino(), read_to: start, fingerprint, seen_mtime });
        Ok(())
    }

    /// The old file has been read to its end; let it go (and return it).
    fn close_rotated(&mut self, events: &mut Vec<Event>) -> Option<OpenLog> {
        self.finish_file(events, "the file rotated away from");
        let old = self.file.take()?;
        self.remember(Finished { dev: old.dev, ino: old.ino, fingerprint: old.fingerprint.clone() });
        Some(old)
    }

    /// Ends the parser's file: its last events and diagnostics (these say
    /// they are `(in WHERE PATH)`), and a new parser for the next file.
    fn finish_file(&mut self, events: &mut Vec<Event>, in_where: &str) {
        events.extend(self.parser.finish());
        for d in self.parser.take_diagnostics() {
            self.diagnostics.push(Diagnostic {
                line: d.line,
                offset: d.offset,
                message: format!("{} (in {in_where} {})", d.message, self.path.display()),
            });
        }
        self.parser = Parser::resuming(0, self.parser.legacy_dates());
    }

    fn remember(&mut self, finished: Finished) {
        if self.finished.len() == MAX_FINISHED {
            self.finished.pop_front();
        }
        self.finished.push_back(finished);
    }

    /// Reports events lost, loudly: `next()` returns to have it said.
    fn lose(&mut self, message: String) {
        self.diagnostics.push(Diagnostic { line: None, offset: 0, message });
        self.lost = true;
    }

    /// Reads the files rotated away after `old` (just read to its end and
    /// let go) and before the file now at the path (`at_path`): those a
    /// log rotated more than once between two polls leaves in between.
    /// Oldest first: by modification time, then by name as HTCondor and
    /// logrotate number them. What cannot be read is reported as lost.
    fn read_rotated_since(
        &mut self,
        old: &OpenLog,
        at_path: Option<&std::fs::Metadata>,
        events: &mut Vec<Event>,
    ) {
        let (dir, Some(log)) = (log_dir(&self.path), self.path.file_name().map(OsStr::to_os_string)) else {
            return;
        };
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                self.lose(format!(
                    "{}: events may be lost: it was rotated, and its directory cannot be listed to look for \
                     files rotated away after the one being read ({e}); if it was rotated more than once \
                     between two reads, the files in between were not read; {LOST}",
                    self.path.display()
                ));
                return;
            }
        };
        let old_meta = old.file.metadata().ok();
        let old_mtime = old_meta.as_ref().and_then(|m| m.modified().ok());
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let Some(slot) = Slot::of(&log, &entry.file_name()) else { continue };
            let path = entry.path();
            let Ok(meta) = std::fs::metadata(&path) else { continue };
            let id = (meta.dev(), meta.ino());
            if !meta.is_file()
                || id == (old.dev, old.ino)
                || at_path.is_some_and(|m| (m.dev(), m.ino()) == id)
            {
                continue;
            }
            let mtime = meta.modified().ok();
            if let (Some(t), Some(seen)) = (mtime, old.seen_mtime) {
                if t < seen {
                    // Rotated away before the old file was.
                    continue;
                }
            }
            let file = if slot.compressed {
                // gzip and its kind keep the modification time: this is
                // most likely the old file itself, compressed.
                if mtime.is_some() && mtime == old_mtime {
                    continue;
                }
                None
            } else {
                let opened = File::open(&path).and_then(|file| Ok((file.metadata()?, file)));
                let (meta, file) = match opened {
                    Ok(opened) => opened,
                    Err(e) => {
                        self.lose(format!(
                            "{}: events lost: {} ({} bytes), rotated away from it between two reads, cannot \
                             be read ({e}); none of its events were seen; {LOST}",
                            self.path.display(),
                            path.display(),
                            meta.len()
                        ));
                        continue;
                    }
                };
                if self.finished.iter().any(|f| f.is(&file, &meta)) {
                    continue;
                }
                Some((file, meta.dev(), meta.ino()))
            };
            found.push(Rotated { path, mtime, age: slot.age, len: meta.len(), file });
        }
        found.sort_by(|a, b| a.mtime.cmp(&b.mtime).then(b.age.cmp(&a.age)));
        if let Some(oldest) = found.first() {
            if old_meta.is_some_and(|m| m.nlink() == 0) {
                // The file being read lost its last name: a later rotation
                // deleted or overwrote it, and may have dropped others.
                self.lose(format!(
                    "{}: events may be lost: it was rotated more than once between two reads, and the file \
                     being read was then deleted or overwritten by a later rotation (the oldest rotated \
                     file left after it is {}): if it was rotated more times than rotated files are kept, \
                     the files in between are gone with their events; {LOST}",
                    self.path.display(),
                    oldest.path.display()
                ));
            }
        }
        for rotated in found {
            match rotated.file {
                Some((file, dev, ino)) => self.read_whole(file, dev, ino, &rotated.path, events),
                None => self.lose(format!(
                    "{}: events lost: {} ({} bytes) was rotated away from it between two reads and is \
                     compressed; cosched reads no compressed log, so none of its events were seen; {LOST}",
                    self.path.display(),
                    rotated.path.display(),
                    rotated.len
                )),
            }
        }
    }

    /// Reads a file rotated away between two polls, whole.
    fn read_whole(&mut self, file: File, dev: u64, ino: u64, path: &Path, events: &mut Vec<Event>) {
        let before = events.len();
        let mut fingerprint = Vec::new();
        let mut at = 0u64;
        let read = loop {
            match file.read_at(&mut self.buf, at) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    let chunk = &self.buf[..n];
                    if fingerprint.len() < FINGERPRINT && at as usize == fingerprint.len() {
                        fingerprint.extend_from_slice(&chunk[..(FINGERPRINT - fingerprint.len()).min(n)]);
                    }
                    at += n as u64;
                    events.extend(self.parser.feed(chunk));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        self.finish_file(events, &format!("{}, rotated away between two reads from", path.display()));
        match read {
            Ok(()) => tracing::info!(
                "{}: rotated more than once between two reads: read {} ({at} bytes, {} events) in between",
                self.path.display(),
                path.display(),
                events.len() - before
            ),
            Err(e) => {
                let len = file.metadata().map_or(at, |m| m.len());
                self.lose(format!(
                    "{}: events lost: reading {}, rotated away from it between two reads, failed at byte \
                     {at} of {len} ({e}); the events in bytes {at}..{len} of it were not seen; {LOST}",
                    self.path.display(),
                    path.display()
                ));
            }
        }
        self.remember(Finished { dev, ino, fingerprint });
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

    /// Reads what the open file holds past `read_to`, stopping once `cap`
    /// bytes have been read and some events are complete.
    fn read_available(&mut self, events: &mut Vec<Event>, cap: u64) -> io::Result<()> {
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
            if read >= cap && !events.is_empty() {
                return Ok(());
            }
        }
    }

    /// Subscribes to the inotify watch of the log's directory (once it exists).
    fn ensure_watch(&mut self) {
        if self.wake.is_some() || self.polling_only {
            return;
        }
        let dir = log_dir(&self.path);
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

/// The directory a log is in (`.` for a bare name).
fn log_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
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

    /// Only the log's own rotated names are slots: HTCondor's `.old` and
    /// `.N`, and logrotate's `.N` with a compression extension.
    #[test]
    fn rotated_names_are_told_from_other_files() {
        let slot =
            |name: &str| Slot::of(OsStr::new("a.log"), OsStr::new(name)).map(|s| (s.age, s.compressed));
        assert_eq!(slot("a.log.old"), Some((0, false)));
        assert_eq!(slot("a.log.1"), Some((1, false)));
        assert_eq!(slot("a.log.12"), Some((12, false)));
        assert_eq!(slot("a.log.2.gz"), Some((2, true)));
        assert_eq!(slot("a.log.old.zst"), Some((0, true)));
        for other in
            ["a.log", "a.log.", "a.log.1.log", "a.log.log", "a.log.x", "a.log.1.tmp", "b.log.1", "a.log1"]
        {
            assert!(slot(other).is_none(), "{other}");
        }
    }
}
