//! Reading a finished log from start to end in bounded memory.
//!
//! Why it exists: `log dump|stats|report` and `replay` read logs that may be
//! gigabytes long (a week of a million jobs). Reading the whole file into
//! memory and parsing it at once cost about three times the file in RAM.
//! [`LogReader`] reads fixed-size chunks and hands back the events each chunk
//! completes, so memory is one chunk plus the longest event
//! ([`super::MAX_EVENT_BYTES`] at most), whatever the file's size.
//!
//! The events and diagnostics are those of [`super::parse_bytes`] on the
//! whole file: the [`Parser`] keeps a block cut by a chunk boundary until the
//! rest arrives (tests compare both on the fixtures and on a log of torn and
//! garbled blocks). The one difference: a single block longer than
//! [`super::MAX_EVENT_BYTES`] without its terminator is dropped with a
//! diagnostic, as the follower does, instead of being parsed as one block.

use super::{looks_binary, Diagnostic, Event, Parser, ReadError, BINARY_SNIFF};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Bytes read per call: large enough that syscalls and the parser's per-call
/// work do not show, small enough to stay in cache.
pub const READ_CHUNK: usize = 1 << 20;

/// Reads a log file's events in order, one chunk at a time.
///
/// ```no_run
/// # fn main() -> Result<(), cosched::userlog::ReadError> {
/// let mut reader = cosched::userlog::LogReader::open("job.log".as_ref(), 2026)?;
/// let mut events = Vec::new();
/// while reader.read_events(&mut events)? {
///     for ev in events.drain(..) {
///         println!("{} {:?}", ev.code, ev.job());
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LogReader {
    /// For errors.
    path: PathBuf,
    file: File,
    parser: Parser,
    /// Bytes read and not yet used by the parser are `buf[start..end]`; the
    /// parser has seen `buf[start..offered]`. The parser never copies them:
    /// an event cut by a read stays here until the next read completes it.
    buf: Vec<u8>,
    start: usize,
    offered: usize,
    end: usize,
    /// Bytes read (and offered to the parser) per call.
    chunk: usize,
    /// Bytes of the file read so far.
    read: u64,
    /// Read no further than this offset (a second pass over a file that may
    /// have grown since the first).
    limit: u64,
    /// The parser has been told the input ended.
    finished: bool,
}

impl LogReader {
    /// Opens a log; refuses missing files, directories and binary data (a
    /// NUL byte in the first 64 KiB) before any event is read.
    pub fn open(path: &Path, legacy_year: i32) -> Result<Self, ReadError> {
        LogReader::with_chunk_size(path, legacy_year, READ_CHUNK)
    }

    /// [`LogReader::open`] reading `chunk` bytes at a time (tests use tiny
    /// chunks to put block boundaries everywhere).
    pub fn with_chunk_size(path: &Path, legacy_year: i32, chunk: usize) -> Result<Self, ReadError> {
        let io = |e| ReadError::Io(path.to_path_buf(), e);
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ReadError::Missing(path.to_path_buf()))
            }
            Err(e) => return Err(io(e)),
            Ok(meta) if meta.is_dir() => return Err(ReadError::Directory(path.to_path_buf())),
            Ok(_) => {}
        }
        let mut file = File::open(path).map_err(io)?;
        // Read sequentially (no seeking back), so that pipes work too.
        let chunk = chunk.max(1);
        let mut buf = Vec::with_capacity(BINARY_SNIFF.max(chunk) + chunk);
        (&mut file).take(BINARY_SNIFF as u64).read_to_end(&mut buf).map_err(io)?;
        if let Some(at) = looks_binary(&buf) {
            return Err(ReadError::Binary(path.to_path_buf(), at));
        }
        let end = buf.len();
        Ok(LogReader {
            path: path.to_path_buf(),
            file,
            parser: Parser::with_legacy_year(legacy_year),
            buf,
            start: 0,
            offered: 0,
            end,
            chunk,
            read: end as u64,
            limit: u64::MAX,
            finished: false,
        })
    }

    /// Reads events' outlines only (see [`Parser::outline`]).
    pub fn outline(mut self) -> Self {
        self.parser = std::mem::take(&mut self.parser).outline();
        self
    }

    /// Reads no further than `offset` bytes into the file.
    pub fn until(mut self, offset: u64) -> Self {
        self.limit = offset;
        if self.read > offset {
            self.end = usize::try_from(offset).unwrap_or(usize::MAX).min(self.end);
            self.read = self.end as u64;
        }
        self
    }

    /// Appends the events completed by the next chunk to `events`. Returns
    /// `Ok(false)` once the whole file has been parsed (the last events, if
    /// any, are appended by that call).
    pub fn read_events(&mut self, events: &mut Vec<Event>) -> Result<bool, ReadError> {
        if self.finished {
            return Ok(false);
        }
        if self.offered == self.end {
            self.compact();
            let want = (self.chunk as u64).min(self.limit.saturating_sub(self.read)) as usize;
            if self.buf.len() < self.end + want {
                self.buf.resize(self.end + want, 0);
            }
            let n = loop {
                match self.file.read(&mut self.buf[self.end..self.end + want]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(ReadError::Io(self.path.clone(), e)),
                }
            };
            if n == 0 {
                self.parser.finish_with(&self.buf[self.start..self.end], events);
                self.start = self.end;
                self.finished = true;
                return Ok(false);
            }
            self.end += n;
            self.read += n as u64;
        }
        self.offered = self.end.min(self.offered + self.chunk);
        let used = self.parser.parse_some(&self.buf[self.start..self.offered], events);
        self.start += used;
        Ok(true)
    }

    /// Moves the unused bytes to the front of the buffer.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.offered -= self.start;
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// Diagnostics (malformed blocks) found since the last call.
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        self.parser.take_diagnostics()
    }

    /// Bytes of the file read so far (the whole file once done).
    pub fn bytes_read(&self) -> u64 {
        self.read
    }
}
