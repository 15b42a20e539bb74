//! HTCondor user (job event) logs: an incremental parser for the text and XML
//! forms, a follower for logs that are still being written, and the
//! `cosched log …` commands.
//!
//! Why it exists: the user log is cosched's only reliable, push-style view of
//! what a site did with a job (submitted, running, finished, held, removed).
//! The engine tails one log per site; `replay`, `report` and `log stats` read
//! finished logs, of any size, with a [`LogReader`]: a chunk at a time, so
//! memory does not grow with the file (what grows is theirs: one record per
//! job).
//!
//! Constraints:
//! - Never panics and never gives up on a log: a malformed block becomes a
//!   [`Diagnostic`] carrying its line and byte offset and parsing resumes at the next
//!   `...` line (text) or the next top-level `<c>` (XML).
//! - Incremental: [`Parser::feed`] takes whatever bytes are there and returns
//!   only complete events; a block without its terminator is kept until more
//!   bytes arrive (the writer may be mid-write).
//! - No clock: legacy `MM/DD` stamps carry no year; HTCondor assumes the
//!   current year, so the year is a parameter ([`Parser::with_legacy_year`])
//!   and only the command line reads the clock to supply it (the live engine
//!   gives its run's start, [`LegacyDates::after`]). Within a log the year
//!   moves on at New Year ([`LegacyDates`]).
//! - Attribute names in [`Event::to_json`] are HTCondor's own, as its reader
//!   reports them (`SubmitHost`, `HoldReasonCode`, …).

pub mod cmd;
mod follow;
mod json;
mod reader;
pub mod stats;
mod text;
mod xml;

pub use follow::{line_at, Follower};
pub use reader::{LogReader, READ_CHUNK};

use std::path::{Path, PathBuf};

/// The year given to legacy `MM/DD` stamps when the caller does not say.
/// A leap year, so `02/29` stays a valid date. Differences between events of
/// one log depend on it only across the end of February (a leap day exists
/// in leap years only): the year changes at New Year within a log anyway
/// ([`LegacyDates`]). The CLI passes the current year instead, as HTCondor's
/// own reader does, and the live engine the year its run began.
pub const DEFAULT_LEGACY_YEAR: i32 = 2000;

/// Half a year, in seconds: how far a legacy stamp may seem to go back
/// before it is taken for the next year's (or forward, the last year's).
const HALF_YEAR: i64 = 183 * 86_400;

/// The years of legacy `MM/DD` stamps, which carry none: each log starts in a
/// given year, and since HTCondor writes stamps in time order, a stamp that
/// seems more than half a year earlier than the one before it is in the next
/// year (the log crossed New Year), and one more than half a year later is
/// a late write from the year before. Without this, a job that ran over New
/// Year would last minus a year.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyDates {
    /// The year the next stamp is read in.
    pub year: i32,
    /// Naive seconds of the last legacy stamp read, or of the time the log is
    /// known to start after (the run's start): what the next one is compared to.
    pub previous: Option<i64>,
}

impl LegacyDates {
    /// Stamps start in `year`; the first one is taken as written.
    pub fn in_year(year: i32) -> Self {
        LegacyDates { year, previous: None }
    }

    /// Stamps are no earlier than about `naive_unix` (a run's start, in the
    /// submit host's local time read as UTC): the first one is placed in its
    /// year, or the next if it would be more than half a year before it.
    pub fn after(naive_unix: i64) -> Self {
        let (year, _, _) = civil_from_days(naive_unix.div_euclid(86_400));
        let year = i32::try_from(year).unwrap_or(DEFAULT_LEGACY_YEAR);
        LegacyDates { year, previous: Some(naive_unix) }
    }

    /// Stamps of a log that a run began at `epoch_unix` (UTC seconds)
    /// writes: legacy stamps are the submit host's local time.
    pub fn from_run_start(epoch_unix: f64) -> Self {
        use chrono::{Offset, TimeZone};
        let utc = epoch_unix as i64;
        let offset = chrono::Local
            .timestamp_opt(utc, 0)
            .earliest()
            .map_or(0, |d| i64::from(d.offset().fix().local_minus_utc()));
        LegacyDates::after(utc + offset)
    }

    /// Moves a stamp read in `read_in` to its year, and remembers it.
    fn place(&mut self, t: &mut Timestamp, read_in: i32) {
        if read_in != self.year {
            t.naive_unix = shift_year(t.naive_unix, i64::from(self.year) - i64::from(read_in));
        }
        let Some(previous) = self.previous else {
            self.previous = Some(t.naive_unix);
            return;
        };
        if t.naive_unix < previous.saturating_sub(HALF_YEAR) {
            self.year = self.year.saturating_add(1);
            t.naive_unix = shift_year(t.naive_unix, 1);
        } else if t.naive_unix > previous.saturating_add(HALF_YEAR) {
            // One late stamp from before New Year: the year stays.
            t.naive_unix = shift_year(t.naive_unix, -1);
            return;
        }
        self.previous = Some(t.naive_unix);
    }
}

/// The same date and time `years` later (02/29 of a leap year becomes 03/01,
/// as `mktime` would read it).
fn shift_year(naive_unix: i64, years: i64) -> i64 {
    let (days, secs) = (naive_unix.div_euclid(86_400), naive_unix.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    days_from_civil(y + years, m, d) * 86_400 + secs
}

/// A user-log time stamp as written: a naive date-time plus how it was written.
///
/// Without `Z` the writer used the submit host's local time, whose offset the
/// log does not record; hence "naive" seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp {
    /// Whole seconds since 1970-01-01T00:00:00, reading the naive time as UTC.
    pub naive_unix: i64,
    /// Sub-second part in microseconds, when the stamp had one (`.785`).
    pub micros: Option<u32>,
    /// The stamp ended in `Z`: it is UTC, not local time.
    pub utc: bool,
    /// The stamp was legacy `MM/DD …` and its year was supplied by the reader.
    pub year_inferred: bool,
}

impl Timestamp {
    /// A plain stamp at `naive_unix` naive seconds (for tests, simulations).
    pub fn from_naive_seconds(naive_unix: i64) -> Self {
        Timestamp { naive_unix, ..Timestamp::default() }
    }

    /// A stamp from calendar fields; `None` if a field is out of range.
    pub fn from_parts(year: i32, month: u32, day: u32, hour: u32, minute: u32, second: u32) -> Option<Self> {
        if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 24 || minute > 59 || second > 60 {
            return None;
        }
        let days = days_from_civil(i64::from(year), month, day);
        let secs = days * 86_400 + i64::from(hour) * 3600 + i64::from(minute) * 60 + i64::from(second);
        Some(Timestamp::from_naive_seconds(secs))
    }

    /// Seconds since the Unix epoch, reading the naive time as UTC ("naive
    /// seconds"). Differences between two events of one log are correct
    /// (ignoring DST changes); use [`Timestamp::to_unix`] for absolute time.
    pub fn naive_seconds(&self) -> f64 {
        self.naive_unix as f64 + self.micros.map_or(0.0, |us| f64::from(us) / 1e6)
    }

    /// Absolute Unix time, given the writer's offset from UTC in seconds
    /// (east positive). A stamp written with `Z` ignores the offset.
    pub fn to_unix(&self, local_utc_offset_secs: i64) -> f64 {
        if self.utc {
            self.naive_seconds()
        } else {
            self.naive_seconds() - local_utc_offset_secs as f64
        }
    }

    /// `2026-11-21T04:50:46`, plus `.785` when the stamp had a non-zero
    /// sub-second part — exactly what HTCondor's reader reports (it drops
    /// the `Z` and a zero sub-second part).
    pub fn iso(&self) -> String {
        let days = self.naive_unix.div_euclid(86_400);
        let secs = self.naive_unix.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        let mut out =
            format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
        if let Some(us) = self.micros {
            if us != 0 {
                out.push_str(&format!(".{:03}", us / 1000));
            }
        }
        out
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date. Days past the end of
/// a month roll over into the next, as C's `mktime` does.
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// One event of a user log.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Byte offset of the event's first byte (its header line, or `<c>`).
    pub offset: u64,
    /// The event number (`ULogEventNumber`): 0 submit, 1 execute, 5 terminated…
    pub code: u16,
    pub cluster: i64,
    pub proc: i64,
    pub subproc: i64,
    pub time: Timestamp,
    pub body: EventBody,
}

/// A ClassAd value as it appears in a log (execute properties, job-ad
/// information, the resource table, XML attributes).
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Int(i64),
    Real(f64),
    Bool(bool),
    Str(String),
    /// Anything else (an expression, `undefined`, a list), kept as written.
    Expr(String),
    /// A nested ClassAd.
    Ad(Vec<(String, AttrValue)>),
}

/// CPU time of one of the four `Usr … , Sys …` lines, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuUsage {
    pub user_secs: i64,
    pub sys_secs: i64,
}

/// The accounting part of a termination (005, 015): CPU times, bytes moved
/// and the partitionable-resource table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Termination {
    pub run_remote: CpuUsage,
    pub run_local: CpuUsage,
    pub total_remote: CpuUsage,
    pub total_local: CpuUsage,
    pub sent_bytes: f64,
    pub received_bytes: f64,
    pub total_sent_bytes: f64,
    pub total_received_bytes: f64,
    /// The partitionable-resource table, one row per resource.
    pub resources: Vec<ResourceRow>,
}

/// One row of the `Partitionable Resources : Usage Request Allocated
/// [Assigned]` table. HTCondor's reader names the cells `<Name>Usage`,
/// `Request<Name>`, `<Name>` and `Assigned<Name>` (`CpusUsage`, …).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceRow {
    /// `Cpus`, `Disk`, `Memory`, `GPUs`, `TimeExecute`, … (no unit).
    pub name: std::borrow::Cow<'static, str>,
    pub usage: Option<AttrValue>,
    pub request: Option<AttrValue>,
    pub allocated: Option<AttrValue>,
    pub assigned: Option<AttrValue>,
}

impl ResourceRow {
    /// The cells under HTCondor's attribute names.
    pub fn attrs(&self) -> Vec<(String, AttrValue)> {
        let n = &self.name;
        [
            (format!("{n}Usage"), &self.usage),
            (format!("Request{n}"), &self.request),
            (n.to_string(), &self.allocated),
            (format!("Assigned{n}"), &self.assigned),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k, v.clone()?)))
        .collect()
    }

    /// Groups flat attributes (`CpusUsage`, `RequestCpus`, `Cpus`, …) into
    /// rows, the way HTCondor's writer builds the table.
    pub fn from_attrs(attrs: &[(String, AttrValue)]) -> Vec<ResourceRow> {
        let mut rows: Vec<ResourceRow> = Vec::new();
        for (k, v) in attrs {
            let (name, cell): (&str, fn(&mut ResourceRow) -> &mut Option<AttrValue>) =
                if let Some(n) = k.strip_prefix("Request") {
                    (n, |r| &mut r.request)
                } else if let Some(n) = k.strip_prefix("Assigned") {
                    (n, |r| &mut r.assigned)
                } else if let Some(n) = k.strip_suffix("Usage") {
                    (n, |r| &mut r.usage)
                } else {
                    (k.as_str(), |r| &mut r.allocated)
                };
            if name.is_empty() {
                continue;
            }
            let at = match rows.iter().position(|r| r.name == name) {
                Some(i) => i,
                None => {
                    rows.push(ResourceRow { name: name.to_string().into(), ..ResourceRow::default() });
                    rows.len() - 1
                }
            };
            *cell(&mut rows[at]) = Some(v.clone());
        }
        rows
    }
}

/// The rest of a 004 eviction (boxed: rarely needed, and it keeps
/// [`EventBody`] small).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Eviction {
    pub checkpointed: bool,
    /// "Job terminated and was requeued": then `normal`, `return_value`,
    /// `signal` and `core_file` describe how it ended.
    pub requeued: bool,
    pub normal: bool,
    pub return_value: Option<i64>,
    pub signal: Option<i64>,
    pub core_file: Option<String>,
    pub run_remote: CpuUsage,
    pub run_local: CpuUsage,
    pub sent_bytes: f64,
    pub received_bytes: f64,
}

/// The kind of a 040 file-transfer event; the number is HTCondor's `Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferKind {
    InputQueued = 1,
    InputStarted = 2,
    InputFinished = 3,
    OutputQueued = 4,
    OutputStarted = 5,
    OutputFinished = 6,
}

impl TransferKind {
    const ALL: [(TransferKind, &'static str); 6] = [
        (TransferKind::InputQueued, "Entered queue to transfer input files"),
        (TransferKind::InputStarted, "Started transferring input files"),
        (TransferKind::InputFinished, "Finished transferring input files"),
        (TransferKind::OutputQueued, "Entered queue to transfer output files"),
        (TransferKind::OutputStarted, "Started transferring output files"),
        (TransferKind::OutputFinished, "Finished transferring output files"),
    ];
    fn from_text(text: &str) -> Option<Self> {
        Self::ALL.iter().find(|(_, t)| *t == text).map(|(k, _)| *k)
    }
    fn from_number(n: i64) -> Option<Self> {
        Self::ALL.iter().find(|(k, _)| *k as i64 == n).map(|(k, _)| *k)
    }
}

/// The typed part of an event. Fields that scheduling needs are typed; the
/// rest of what HTCondor writes is kept so that `to_json` can report it.
#[derive(Clone, Debug, PartialEq)]
pub enum EventBody {
    /// 000. `host` is the schedd's sinful string.
    Submit { host: String, log_notes: Option<String>, user_notes: Option<String>, warnings: Option<String> },
    /// 001. For grid jobs `host` is the GridResource string.
    Execute { host: String, slot_name: Option<String>, props: Vec<(String, AttrValue)> },
    /// 002.
    ExecutableError { error_type: Option<i64> },
    /// 003.
    Checkpointed { run_remote: CpuUsage, run_local: CpuUsage, sent_bytes: f64 },
    /// 004. `code`/`subcode` are 0 when the header carries none.
    Evicted { code: i64, subcode: i64, reason: Option<String>, detail: Box<Eviction> },
    /// 005.
    Terminated {
        normal: bool,
        return_value: Option<i64>,
        signal: Option<i64>,
        core_file: Option<String>,
        usage: Box<Termination>,
    },
    /// 006.
    ImageSize {
        size_kb: i64,
        memory_usage_mb: Option<i64>,
        resident_set_size_kb: Option<i64>,
        proportional_set_size_kb: Option<i64>,
    },
    /// 007.
    ShadowException { message: String, sent_bytes: f64, received_bytes: f64 },
    /// 008.
    Generic { info: String },
    /// 009 (job removed).
    Aborted { reason: Option<String> },
    /// 010.
    Suspended { num_pids: Option<i64> },
    /// 011.
    Unsuspended,
    /// 012. `reason` is empty for "Reason unspecified".
    Held { reason: String, code: i64, subcode: i64 },
    /// 013.
    Released { reason: Option<String> },
    /// 014.
    NodeExecute { node: i64, host: String, slot_name: Option<String>, props: Vec<(String, AttrValue)> },
    /// 015.
    NodeTerminated {
        node: i64,
        normal: bool,
        return_value: Option<i64>,
        signal: Option<i64>,
        core_file: Option<String>,
        usage: Box<Termination>,
    },
    /// 016.
    PostScriptTerminated {
        normal: bool,
        return_value: Option<i64>,
        signal: Option<i64>,
        dag_node: Option<String>,
    },
    /// 021.
    RemoteError {
        critical: bool,
        daemon: String,
        host: String,
        message: String,
        hold_code: i64,
        hold_subcode: i64,
    },
    /// 022.
    Disconnected { reason: String, startd_name: String, startd_addr: String },
    /// 023.
    Reconnected { startd_name: String, startd_addr: String, starter_addr: String },
    /// 024.
    ReconnectFailed { reason: String, startd_name: String },
    /// 025.
    GridResourceUp { resource: String },
    /// 026.
    GridResourceDown { resource: String },
    /// 027. `job_id` is `<grid_resource> <remote id>`.
    GridSubmit { resource: String, job_id: String },
    /// 028: the attributes as logged.
    JobAd { attrs: Vec<(String, AttrValue)> },
    /// 029.
    StatusUnknown,
    /// 030.
    StatusKnown,
    /// 031.
    StageIn,
    /// 032.
    StageOut,
    /// 033.
    AttributeUpdate { name: String, value: String, old_value: Option<String> },
    /// 034.
    PreSkip { notes: String },
    /// 035.
    ClusterSubmit { host: String, log_notes: Option<String>, user_notes: Option<String> },
    /// 036.
    ClusterRemove { next_proc_id: i64, next_row: i64, completion: i64, notes: Option<String> },
    /// 037.
    FactoryPaused { reason: Option<String>, pause_code: i64, hold_code: i64 },
    /// 038.
    FactoryResumed { reason: Option<String> },
    /// 040.
    FileTransfer { kind: TransferKind, queueing_delay: Option<i64>, host: Option<String> },
    /// 041–045 (space reservations and the file-reuse cache): `Key: value`
    /// lines under HTCondor's attribute names.
    Details { attrs: Vec<(String, AttrValue)> },
    /// 046.
    DataflowJobSkipped { reason: Option<String> },
    /// 047.
    CommonFiles { kind: String },
    /// 100–111: execute-point events; the header text and `key = value` lines.
    ExecutePoint { head: String, attrs: Vec<(String, AttrValue)> },
    /// Any other or unknown event, or a known one whose body did not parse:
    /// the header text after the time stamp and the raw body lines.
    Other { text: String, body: String },
}

/// HTCondor's short name of an event code (`cosched log stats` counts events
/// by it). The one list of codes and names: [`EventBody`]'s variants say which
/// code each reads, and an unknown code reads as [`EventBody::Other`].
pub fn event_name(code: u16) -> &'static str {
    const NAMES: [&str; 48] = [
        "submit",
        "execute",
        "executable error",
        "checkpointed",
        "evicted",
        "terminated",
        "image size",
        "shadow exception",
        "generic",
        "aborted",
        "suspended",
        "unsuspended",
        "held",
        "released",
        "node execute",
        "node terminated",
        "post script terminated",
        "globus submit",
        "globus submit failed",
        "globus resource up",
        "globus resource down",
        "remote error",
        "disconnected",
        "reconnected",
        "reconnect failed",
        "grid resource up",
        "grid resource down",
        "grid submit",
        "job ad information",
        "status unknown",
        "status known",
        "stage in",
        "stage out",
        "attribute update",
        "pre skip",
        "cluster submit",
        "cluster remove",
        "factory paused",
        "factory resumed",
        "none",
        "file transfer",
        "reserve space",
        "release space",
        "file complete",
        "file used",
        "file removed",
        "dataflow job skipped",
        "common files",
    ];
    match code {
        c if (c as usize) < NAMES.len() => NAMES[c as usize],
        100..=111 => "execute point",
        _ => "unknown",
    }
}

/// A malformed block, or other input the parser skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Byte offset of the first byte concerned: exact, and what a program
    /// (`--json`, a resume point) can seek to.
    pub offset: u64,
    /// 1-based line of that byte, what a person and an editor look for
    /// (`FILE:LINE:`). `None` when the parser began mid-file and was not
    /// told the line it began on ([`Parser::resuming`]), and for problems
    /// that are not at a place in the file (a saved offset past its end).
    pub line: Option<u64>,
    pub message: String,
}

impl Diagnostic {
    /// `FILE:LINE: MESSAGE`, the project's compiler style (as `sites.toml`'s
    /// errors), or `FILE: byte OFFSET: MESSAGE` where the line is unknown,
    /// so that the place is never lost. The one format every printer uses.
    pub fn located<'a>(&'a self, file: &'a Path) -> impl std::fmt::Display + 'a {
        Located { file, diagnostic: self }
    }
}

struct Located<'a> {
    file: &'a Path,
    diagnostic: &'a Diagnostic,
}

impl std::fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.diagnostic;
        match d.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), d.message),
            None => write!(f, "{}: byte {}: {}", self.file.display(), d.offset, d.message),
        }
    }
}

/// Newlines in `bytes`: how many lines a consumed slice moves the count on.
pub(crate) fn newlines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

/// Longest unfinished event kept while waiting for its terminator (bytes).
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// Incremental parser: feed bytes as they arrive; get only complete events.
///
/// Text blocks end at a `...` line (a trailing `\r` is fine); XML events at
/// the `</c>` that closes the top-level `<c>`. The format is decided per
/// event from its first byte, so a log shared by text and XML jobs works.
#[derive(Debug)]
pub struct Parser {
    /// Bytes after `consumed` that do not yet form a complete event.
    buf: Vec<u8>,
    /// Offset of `buf[0]` in the stream: just past the last complete event.
    consumed: u64,
    /// 1-based line of byte `consumed`, moved on by the newlines of each
    /// slice as it is consumed (each byte is counted once, never re-scanned),
    /// so diagnostics can say `FILE:LINE`. `None`: resumed mid-file at an
    /// unknown line; diagnostics then keep only their offset.
    line: Option<u64>,
    /// Where in `buf` the search for a text terminator can resume, so that
    /// feeding one byte at a time stays linear.
    scan_hint: usize,
    /// The year for legacy `MM/DD` stamps (`legacy.year`, copied); whether
    /// to read outlines only.
    depth: text::Depth,
    /// The years of legacy stamps as the log goes on.
    legacy: LegacyDates,
    diagnostics: Vec<Diagnostic>,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    /// A parser that gives legacy stamps [`DEFAULT_LEGACY_YEAR`].
    pub fn new() -> Self {
        Parser::with_legacy_year(DEFAULT_LEGACY_YEAR)
    }

    /// A parser that gives legacy `MM/DD` stamps this year (HTCondor's reader
    /// uses the current year).
    pub fn with_legacy_year(legacy_year: i32) -> Self {
        Parser::with_legacy_dates(LegacyDates::in_year(legacy_year))
    }

    /// A parser that dates legacy `MM/DD` stamps from `legacy` on (a run's
    /// follower: [`LegacyDates::after`] its start).
    pub fn with_legacy_dates(legacy: LegacyDates) -> Self {
        Parser {
            buf: Vec::new(),
            consumed: 0,
            line: Some(1),
            scan_hint: 0,
            depth: text::Depth { legacy_year: legacy.year, outline: false },
            legacy,
            diagnostics: Vec::new(),
        }
    }

    /// Where legacy stamps stand now: a parser for the next file of the
    /// same log (rotation) goes on from here.
    pub fn legacy_dates(&self) -> LegacyDates {
        self.legacy
    }

    /// Reads each event's outline only: the header, the body's variant and
    /// what scheduling needs of it (hosts, the grid resource and job id,
    /// termination status, hold and abort reasons), with the diagnostics of a
    /// full read. Left empty: submit notes, execute properties, CPU usage,
    /// byte counts and the resource table of terminations, image-size
    /// details, file-transfer details, and attribute lists (028, 041–045,
    /// 100–111). For readers that fold job states (`log stats`, reports),
    /// several times faster on real logs. Text events only; XML events are
    /// always read whole.
    pub fn outline(mut self) -> Self {
        self.depth.outline = true;
        self
    }

    /// A parser for a stream whose first byte is at `offset` (resuming).
    pub fn starting_at(offset: u64, legacy_year: i32) -> Self {
        Parser::resuming(offset, LegacyDates::in_year(legacy_year))
    }

    /// [`Parser::starting_at`] with legacy stamps dated from `legacy` on.
    /// The line of `offset` is unknown unless it is 0 (the parser does no
    /// I/O to count it); a caller that knows it says so with
    /// [`Parser::at_line`].
    pub fn resuming(offset: u64, legacy: LegacyDates) -> Self {
        let line = (offset == 0).then_some(1);
        Parser { consumed: offset, line, ..Parser::with_legacy_dates(legacy) }
    }

    /// The stream's first byte is on this 1-based line (`None`: unknown).
    pub fn at_line(mut self, line: Option<u64>) -> Self {
        self.line = line;
        self
    }

    /// The 1-based line of [`Parser::consumed`], if known.
    pub fn line(&self) -> Option<u64> {
        self.line
    }

    /// Consumes `data[..used]`, which starts at `consumed`: gives the
    /// diagnostics from `first_new` on (all at offsets within `data`) their
    /// lines, and moves `consumed` and `line` past it. Diagnostics come in
    /// file order, so one pass over the slice serves both; one out of order
    /// is counted again from the slice's start rather than given a wrong line.
    fn consume(&mut self, data: &[u8], used: usize, first_new: usize) {
        let base = self.consumed;
        if let Some(start_line) = self.line {
            let (mut at, mut line) = (0usize, start_line);
            for d in &mut self.diagnostics[first_new..] {
                let Some(rel) = d.offset.checked_sub(base).and_then(|r| usize::try_from(r).ok()) else {
                    continue;
                };
                let rel = rel.min(data.len());
                if rel < at {
                    (at, line) = (0, start_line);
                }
                line += newlines(&data[at..rel]);
                at = rel;
                d.line = Some(line);
            }
            if used >= at {
                line += newlines(&data[at..used]);
            } else {
                line = start_line + newlines(&data[..used]);
            }
            self.line = Some(line);
        }
        self.consumed = base + used as u64;
    }

    /// Takes the next bytes of the log; returns the events completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        self.feed_into(bytes, &mut events);
        events
    }

    /// [`Parser::feed`] appending to `events` (a caller's reused vector).
    pub fn feed_into(&mut self, bytes: &[u8], events: &mut Vec<Event>) {
        if self.buf.is_empty() {
            let used = self.parse_some(bytes, events);
            self.buf.extend_from_slice(&bytes[used..]);
        } else {
            let mut buf = std::mem::take(&mut self.buf);
            buf.extend_from_slice(bytes);
            let used = self.parse_some(&buf, events);
            buf.drain(..used);
            self.buf = buf;
        }
    }

    /// Parses the complete events at the start of `data`, which begins at
    /// [`Parser::consumed`], and returns how many bytes it used; the caller
    /// keeps the rest and passes it again with more bytes after it. For
    /// readers that own their buffer ([`LogReader`]): nothing is copied into
    /// the parser. Do not mix with [`Parser::feed`] on one parser.
    pub fn parse_some(&mut self, data: &[u8], events: &mut Vec<Event>) -> usize {
        let used = self.process(data, events, false);
        let rest = &data[used..];
        if rest.len() > MAX_EVENT_BYTES {
            let first_new = self.diagnostics.len();
            // No real event is this long: a writer that never terminates its
            // block (or garbage) must not grow a follower's memory forever.
            self.diagnostics.push(Diagnostic {
                line: None,
                offset: self.consumed,
                message: format!(
                    "{} bytes without an event terminator; skipped: {}",
                    rest.len(),
                    text::snippet(rest)
                ),
            });
            self.consume(rest, rest.len(), first_new);
            self.scan_hint = 0;
            return data.len();
        }
        used
    }

    /// The input has ended: a trailing `...` without its newline closes its
    /// event; anything else left over is reported as an unfinished event.
    pub fn finish(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        let buf = std::mem::take(&mut self.buf);
        self.finish_with(&buf, &mut events);
        events
    }

    /// [`Parser::finish`] for a caller that kept the unused bytes
    /// ([`Parser::parse_some`]): `rest` is all of them.
    pub fn finish_with(&mut self, rest: &[u8], events: &mut Vec<Event>) {
        let used = self.process(rest, events, true);
        let rest = &rest[used..];
        let first_new = self.diagnostics.len();
        if rest.iter().any(|b| !b.is_ascii_whitespace()) {
            let skip = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
            let mut last = &rest[skip..];
            let mut offset = self.consumed + skip as u64;
            let end_marker = if xml::start_kind(last).is_some() {
                "`</c>`"
            } else {
                // Whole events that lost their `...` before the last one are
                // read, as they are when a terminated block follows them.
                if let Some(at) = text::last_header_start(last).filter(|&at| at > 0) {
                    let before = events.len();
                    text::parse_unterminated(&last[..at], offset, self.depth, events, &mut self.diagnostics);
                    self.date_legacy(&mut events[before..]);
                    last = &last[at..];
                    offset += at as u64;
                }
                "`...` line"
            };
            self.diagnostics.push(Diagnostic {
                line: None,
                offset,
                message: format!(
                    "unfinished event at end of input ({} bytes without a closing {end_marker}): {}",
                    last.len(),
                    text::snippet(last)
                ),
            });
        }
        self.consume(rest, rest.len(), first_new);
        self.scan_hint = 0;
    }

    /// Diagnostics collected since the last call.
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.diagnostics)
    }

    /// Offset just past the last complete event (a safe resume point).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Bytes held back because their event is not complete yet.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Parses the complete events at the start of `data` (which begins at
    /// stream offset `self.consumed`); returns how many bytes were used.
    fn process(&mut self, data: &[u8], events: &mut Vec<Event>, at_eof: bool) -> usize {
        let base = self.consumed;
        let first_new = self.diagnostics.len();
        // Real logs average about 235 bytes per event; avoid regrowing.
        events.reserve(data.len() / 160);
        let mut pos = 0usize;
        let mut hint = self.scan_hint;
        loop {
            while pos < data.len() && data[pos].is_ascii_whitespace() {
                pos += 1;
            }
            if pos >= data.len() {
                break;
            }
            let rest = &data[pos..];
            let offset = base + pos as u64;
            if let Some(kind) = xml::start_kind(rest) {
                match xml::frame(rest, kind) {
                    xml::Frame::Incomplete => break,
                    xml::Frame::Skip(n) => pos += n,
                    xml::Frame::Torn(n) => {
                        self.diagnostics.push(Diagnostic { line: None,
                            offset,
                            message: format!(
                                "XML event has no closing `</c>` (the next event's `<c>` follows); skipped: {}",
                                text::snippet(&rest[..n])
                            ),
                        });
                        pos += n;
                    }
                    xml::Frame::Event(n) => {
                        match xml::parse_event(&rest[..n], offset) {
                            Ok((ev, problem)) => {
                                if let Some(message) = problem {
                                    self.diagnostics.push(Diagnostic { line: None, offset, message });
                                }
                                events.push(ev);
                            }
                            Err(message) => self.diagnostics.push(Diagnostic { line: None, offset, message }),
                        }
                        pos += n;
                    }
                }
                hint = 0;
                continue;
            }
            match text::frame(rest, hint.saturating_sub(pos), at_eof) {
                text::Frame::Incomplete { searched } => {
                    hint = pos + searched;
                    break;
                }
                text::Frame::Block { body_end, next } => {
                    let before = events.len();
                    text::parse_block(&rest[..body_end], offset, self.depth, events, &mut self.diagnostics);
                    self.date_legacy(&mut events[before..]);
                    pos += next;
                    hint = 0;
                }
            }
        }
        self.scan_hint = hint.saturating_sub(pos);
        self.consume(data, pos, first_new);
        pos
    }

    /// Gives the legacy stamps of events just read their year.
    fn date_legacy(&mut self, events: &mut [Event]) {
        let read_in = self.depth.legacy_year;
        for ev in events.iter_mut().filter(|ev| ev.time.year_inferred) {
            self.legacy.place(&mut ev.time, read_in);
        }
        self.depth.legacy_year = self.legacy.year;
    }
}

/// Parses a whole log (a trailing unfinished event becomes a diagnostic).
pub fn parse_bytes(bytes: &[u8]) -> (Vec<Event>, Vec<Diagnostic>) {
    parse_bytes_with_year(bytes, DEFAULT_LEGACY_YEAR)
}

/// [`parse_bytes`] with the year for legacy `MM/DD` stamps.
pub fn parse_bytes_with_year(bytes: &[u8], legacy_year: i32) -> (Vec<Event>, Vec<Diagnostic>) {
    let mut parser = Parser::with_legacy_year(legacy_year);
    let mut events = parser.feed(bytes);
    events.extend(parser.finish());
    (events, parser.take_diagnostics())
}

/// Why a log could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}: no such file; check the path")]
    Missing(PathBuf),
    #[error("{0}: is a directory, not a user log; name the log file inside it")]
    Directory(PathBuf),
    #[error("{0}: binary data (NUL bytes near offset {1}), not an HTCondor user log")]
    Binary(PathBuf, u64),
    #[error("{0}: cannot read: {1}")]
    Io(PathBuf, std::io::Error),
}

/// Reads and parses a whole log file into memory (all its events at once:
/// for files of any size, read them with a [`LogReader`]).
pub fn read_file(path: &Path) -> Result<(Vec<Event>, Vec<Diagnostic>), ReadError> {
    read_file_with_year(path, DEFAULT_LEGACY_YEAR)
}

/// [`read_file`] with the year for legacy `MM/DD` stamps.
pub fn read_file_with_year(
    path: &Path,
    legacy_year: i32,
) -> Result<(Vec<Event>, Vec<Diagnostic>), ReadError> {
    let mut reader = LogReader::open(path, legacy_year)?;
    let mut events = Vec::new();
    let mut diagnostics = Vec::new();
    while reader.read_events(&mut events)? {
        diagnostics.extend(reader.take_diagnostics());
    }
    diagnostics.extend(reader.take_diagnostics());
    Ok((events, diagnostics))
}

/// How much of a file's start is checked for NUL bytes.
const BINARY_SNIFF: usize = 64 * 1024;

/// A user log is text: a NUL byte in its first 64 KiB means something else.
fn looks_binary(bytes: &[u8]) -> Option<u64> {
    let head = &bytes[..bytes.len().min(BINARY_SNIFF)];
    memchr::memchr(0, head).map(|p| p as u64)
}

impl Event {
    /// The `cosched log dump` object: `{"type", "cluster", "proc", "subproc",
    /// "time", "attrs"}` with HTCondor's attribute names in `attrs`.
    pub fn to_json(&self) -> serde_json::Value {
        json::event_json(self)
    }

    /// `(cluster, proc)`: the job this event is about.
    pub fn job(&self) -> (i64, i64) {
        (self.cluster, self.proc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_unterminated_block_is_dropped_with_a_diagnostic() {
        let mut parser = Parser::new();
        let junk = vec![b'x'; 1 << 20];
        for _ in 0..17 {
            assert!(parser.feed(&junk).is_empty());
        }
        assert!(parser.pending() <= MAX_EVENT_BYTES);
        let diags = parser.take_diagnostics();
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert_eq!(diags[0].offset, 0);
        let ok = b"000 (001.000.000) 2026-11-21 05:03:12 Job submitted from host: <h>\n...\n";
        parser.feed(b"\n...\n");
        assert_eq!(parser.feed(ok).len(), 1);
    }

    #[test]
    fn diagnostics_give_the_line_or_else_the_byte() {
        let bad =
            "000 (001.000.000) 2026-11-21 05:03:12 Job submitted from host: <h>\n...\nnot an event\n...\n";
        let at = bad.find("not an").unwrap() as u64;
        // Fed a byte at a time: each byte is counted once, as it is consumed.
        let mut parser = Parser::new();
        for b in bad.as_bytes() {
            parser.feed(std::slice::from_ref(b));
        }
        let diags = parser.take_diagnostics();
        assert_eq!(diags.iter().map(|d| (d.offset, d.line)).collect::<Vec<_>>(), [(at, Some(3))]);
        assert_eq!(parser.line(), Some(5));
        let shown = diags[0].located(Path::new("j.log")).to_string();
        assert!(shown.starts_with("j.log:3: not an event"), "{shown}");

        // Resumed mid-file without being told the line: the byte, not a guess.
        let mut resumed = Parser::resuming(1000, LegacyDates::in_year(2026));
        resumed.feed(b"not an event\n...\n");
        let diags = resumed.take_diagnostics();
        assert_eq!(diags[0].line, None, "{diags:?}");
        let shown = diags[0].located(Path::new("j.log")).to_string();
        assert!(shown.starts_with("j.log: byte 1000: not an event"), "{shown}");
        let mut told = Parser::resuming(1000, LegacyDates::in_year(2026)).at_line(Some(40));
        told.feed(b"\n\nnot an event\n...\n");
        assert_eq!(told.take_diagnostics()[0].line, Some(42));
    }

    #[test]
    fn civil_round_trip() {
        for days in [-800_000i64, -1, 0, 1, 11_016, 20_778, 60_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "days {days}");
        }
        assert_eq!(Timestamp::from_parts(2026, 11, 21, 4, 50, 46).unwrap().iso(), "2026-11-21T04:50:46");
    }

    #[test]
    fn february_29_of_a_non_leap_year_rolls_over_like_mktime() {
        let t = Timestamp::from_parts(2026, 2, 29, 0, 0, 0).unwrap();
        assert_eq!(t.iso(), "2026-03-01T00:00:00");
    }
}
