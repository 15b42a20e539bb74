//! HTCondor user (job event) logs: parser, follower and the `cosched log` commands (being written).

pub mod cmd;

use std::path::{Path, PathBuf};

/// A user-log time stamp as written: a naive date-time plus how it was written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00 reading the naive time as UTC.
    pub naive_unix: i64,
    /// Milliseconds when the stamp had `.mmm`.
    pub millis: Option<u16>,
    /// The stamp ended in `Z` (UTC).
    pub utc: bool,
    /// The stamp was `MM/DD` with the year inferred.
    pub legacy: bool,
}

impl Timestamp {
    /// Seconds since the Unix epoch, reading the naive time as UTC ("naive seconds").
    pub fn naive_seconds(&self) -> f64 {
        self.naive_unix as f64 + self.millis.map_or(0.0, |m| f64::from(m) / 1000.0)
    }
    /// Absolute time: the naive time minus the writer's UTC offset (ignored for `Z` stamps).
    pub fn to_unix(&self, local_utc_offset_secs: i64) -> f64 {
        if self.utc {
            self.naive_seconds()
        } else {
            self.naive_seconds() - local_utc_offset_secs as f64
        }
    }
    /// `2026-11-21T04:50:46`, plus `.785` when the stamp had milliseconds.
    pub fn iso(&self) -> String {
        String::new()
    }
}

/// One event of a user log.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Byte offset of the event's first byte.
    pub offset: u64,
    pub code: u16,
    pub cluster: i64,
    pub proc: i64,
    pub subproc: i64,
    pub time: Timestamp,
    pub body: EventBody,
}

/// The typed part of an event.
#[derive(Clone, Debug, PartialEq)]
pub enum EventBody {
    Other { text: String, body: String },
}

/// A malformed block, or other input the parser skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Byte offset of the first byte of the block concerned.
    pub offset: u64,
    pub message: String,
}

/// Incremental parser: feed bytes as they arrive; get only complete events.
#[derive(Debug, Default)]
pub struct Parser {
    consumed: u64,
}

impl Parser {
    pub fn new() -> Self {
        Parser::default()
    }
    pub fn feed(&mut self, _bytes: &[u8]) -> Vec<Event> {
        Vec::new()
    }
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        Vec::new()
    }
    /// Offset just past the last complete event.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }
}

/// Parses a whole log.
pub fn parse_bytes(bytes: &[u8]) -> (Vec<Event>, Vec<Diagnostic>) {
    let mut p = Parser::new();
    let ev = p.feed(bytes);
    (ev, p.take_diagnostics())
}

/// Why a log could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}: no such file")]
    Missing(PathBuf),
    #[error("{0}: is a directory, not a user log")]
    Directory(PathBuf),
    #[error("{0}: binary data, not an HTCondor user log")]
    Binary(PathBuf),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// Reads and parses a whole log file.
pub fn read_file(path: &Path) -> Result<(Vec<Event>, Vec<Diagnostic>), ReadError> {
    let bytes = std::fs::read(path).map_err(|e| ReadError::Io(path.to_path_buf(), e))?;
    Ok(parse_bytes(&bytes))
}

/// Follows a growing log. Cancel-safe `next()`: dropping its future loses nothing.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    offset: u64,
}

impl Follower {
    pub fn new(path: PathBuf, start_offset: u64) -> Self {
        Follower { path, offset: start_offset }
    }
    /// Waits until at least one event is available.
    pub async fn next(&mut self) -> std::io::Result<Vec<Event>> {
        let _ = &self.path;
        std::future::pending().await
    }
    /// Checkpoint: resume here.
    pub fn offset(&self) -> u64 {
        self.offset
    }
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        Vec::new()
    }
}

impl Event {
    /// The `cosched log dump` object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}
