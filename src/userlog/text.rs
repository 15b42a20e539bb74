//! The text form of the user log: framing at `...` lines, the header line
//! (nom `complete` combinators over one whole line) and one body reader per
//! event code, modelled on HTCondor's `condor_event.cpp` readers but more
//! forgiving: a missing optional line never loses what was already read.

use super::{
    AttrValue, CpuUsage, Diagnostic, Event, EventBody, Eviction, ResourceRow, Termination, Timestamp,
    TransferKind,
};
use nom::bytes::complete::{tag, take_while_m_n};
use nom::character::complete::char;
use nom::combinator::opt;
use nom::IResult;

/// Where the next text block ends.
pub(super) enum Frame {
    /// No terminator yet; the search can resume at `searched`.
    Incomplete { searched: usize },
    /// The block's header and body are `data[..body_end]`; the next event
    /// starts at `next` (just past the `...` line).
    Block { body_end: usize, next: usize },
}

/// Finds the `...` line that ends the block starting at `data[0]`.
pub(super) fn frame(data: &[u8], resume: usize, at_eof: bool) -> Frame {
    // A block may itself start with the terminator (a stray `...`).
    if data.starts_with(b"...") {
        match sync_line_end(data, 0, at_eof) {
            Some(Some(end)) => return Frame::Block { body_end: 0, next: end },
            Some(None) => return Frame::Incomplete { searched: 0 },
            None => {}
        }
    }
    let mut from = resume.min(data.len());
    static FINDER: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    let finder = FINDER.get_or_init(|| memchr::memmem::Finder::new(b"\n..."));
    while let Some(i) = finder.find(&data[from..]) {
        let nl = from + i;
        match sync_line_end(data, nl + 1, at_eof) {
            Some(Some(end)) => return Frame::Block { body_end: nl + 1, next: end },
            Some(None) => return Frame::Incomplete { searched: nl },
            None => from = nl + 1,
        }
    }
    Frame::Incomplete { searched: data.len().saturating_sub(3) }
}

/// `data[at..]` starts with `...`: is it a whole `...` line? `Some(Some(end))`
/// yes, ending at `end`; `Some(None)` cannot tell yet; `None` no.
fn sync_line_end(data: &[u8], at: usize, at_eof: bool) -> Option<Option<usize>> {
    let after = at + 3;
    match data.get(after) {
        Some(b'\n') => Some(Some(after + 1)),
        Some(b'\r') => match data.get(after + 1) {
            Some(b'\n') => Some(Some(after + 2)),
            None if at_eof => Some(Some(after + 1)),
            None => Some(None),
            Some(_) => None,
        },
        None if at_eof => Some(Some(after)),
        None => Some(None),
        Some(_) => None,
    }
}

/// Text of a block: borrowed when valid UTF-8 (the usual case), else lossy.
pub(super) fn utf8(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// A short printable excerpt for diagnostics.
pub(super) fn snippet(bytes: &[u8]) -> String {
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let mut s: String = String::from_utf8_lossy(&line[..line.len().min(60)])
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if line.len() > 60 {
        s.push('…');
    }
    format!("{s:?}")
}

/// Does this line start like an event header (`NNN (`)?
fn looks_like_header(line: &[u8]) -> bool {
    let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
    (3..=5).contains(&digits) && line.get(digits) == Some(&b' ') && line.get(digits + 1) == Some(&b'(')
}

/// Where the last line that looks like an event header starts in `data`.
pub(super) fn last_header_start(data: &[u8]) -> Option<usize> {
    let mut last = looks_like_header(data).then_some(0);
    for nl in memchr::memchr_iter(b'\n', data) {
        if looks_like_header(&data[nl + 1..]) {
            last = Some(nl + 1);
        }
    }
    last
}

/// Parses one block (everything before its `...` line). Garbage before the
/// header and events that lost their own `...` are reported, and whatever
/// parses is still delivered.
pub(super) fn parse_block(
    block: &[u8],
    offset: u64,
    depth: Depth,
    events: &mut Vec<Event>,
    diags: &mut Vec<Diagnostic>,
) {
    split_block(block, offset, depth, false, events, diags)
}

/// [`parse_block`] for events that end where the next header starts, the
/// last one too (at the end of the input, before an unfinished event).
pub(super) fn parse_unterminated(
    block: &[u8],
    offset: u64,
    depth: Depth,
    events: &mut Vec<Event>,
    diags: &mut Vec<Diagnostic>,
) {
    split_block(block, offset, depth, true, events, diags)
}

fn split_block(
    block: &[u8],
    offset: u64,
    depth: Depth,
    last_cut: bool,
    events: &mut Vec<Event>,
    diags: &mut Vec<Diagnostic>,
) {
    if block.iter().all(|b| b.is_ascii_whitespace()) {
        diags.push(Diagnostic {
            line: None,
            offset,
            message: "stray `...` line with no event before it".into(),
        });
        return;
    }
    // Start of each line that looks like a header; normally just 0, and
    // then no allocation.
    let mut starts: Vec<usize> = Vec::new();
    let mut first_only = looks_like_header(block);
    for nl in memchr::memchr_iter(b'\n', block) {
        let at = nl + 1;
        if at < block.len() && block[at].is_ascii_digit() && looks_like_header(&block[at..]) {
            if first_only {
                starts.push(0);
                first_only = false;
            }
            starts.push(at);
        }
    }
    if first_only {
        parse_one(block, 0, offset, last_cut, depth, events, diags);
        return;
    }
    let Some(&first) = starts.first() else {
        diags.push(Diagnostic {
            line: None,
            offset,
            message: format!(
                "not an event (no `NNN (cluster.proc.subproc) date time` header): {}",
                snippet(block)
            ),
        });
        return;
    };
    if first > 0 && block[..first].iter().any(|b| !b.is_ascii_whitespace()) {
        diags.push(Diagnostic {
            line: None,
            offset,
            message: format!("skipped text before an event header: {}", snippet(block)),
        });
    }
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(block.len());
        parse_one(&block[..end], start, offset, last_cut || i + 1 < starts.len(), depth, events, diags);
    }
}

/// Parses `block[start..]` as one event; `cut` when the next header follows
/// without a `...` line between.
fn parse_one(
    block: &[u8],
    start: usize,
    offset: u64,
    cut: bool,
    depth: Depth,
    events: &mut Vec<Event>,
    diags: &mut Vec<Diagnostic>,
) {
    let sub_offset = offset + start as u64;
    if cut {
        diags.push(Diagnostic {
            line: None,
            offset: sub_offset,
            message: "event has no closing `...` line (the next header follows); read it anyway".into(),
        });
    }
    match parse_event(&block[start..], sub_offset, depth) {
        Ok((event, None)) => events.push(event),
        Ok((event, Some(problem))) => {
            diags.push(Diagnostic { line: None, offset: sub_offset, message: problem });
            events.push(event);
        }
        Err(message) => diags.push(Diagnostic { line: None, offset: sub_offset, message }),
    }
}

/// One event from its header line and body lines. A known event whose body
/// does not read is still returned (as `Other`), with the problem.
fn parse_event(bytes: &[u8], offset: u64, depth: Depth) -> Result<(Event, Option<String>), String> {
    let text = utf8(bytes);
    let text: &str = &text;
    let (header_line, body) = match memchr::memchr(b'\n', text.as_bytes()) {
        Some(nl) => (&text[..nl], &text[nl + 1..]),
        None => (text, ""),
    };
    let header_line = header_line.strip_suffix('\r').unwrap_or(header_line);
    let h = match header(header_line, depth.legacy_year) {
        Ok((_, h)) => h,
        Err(_) => return Err(format!("malformed event header: {}", snippet(header_line.as_bytes()))),
    };
    let mut lines = Lines { rest: body, problem: None };
    let (body, problem) = match read_body(h.code, h.rest, &mut lines, depth.outline) {
        Ok(b) => (b, lines.problem.map(|why| format!("event {:03}: {why}; read as 0", h.code))),
        Err(why) => (
            EventBody::Other { text: h.rest.to_string(), body: body.to_string() },
            Some(format!("event {:03} body not understood ({why}); kept raw", h.code)),
        ),
    };
    Ok((
        Event {
            offset,
            code: h.code,
            cluster: h.cluster,
            proc: h.proc,
            subproc: h.subproc,
            time: h.time,
            body,
        },
        problem,
    ))
}

struct Header<'a> {
    code: u16,
    cluster: i64,
    proc: i64,
    subproc: i64,
    time: Timestamp,
    rest: &'a str,
}

type R<'a, T> = IResult<&'a str, T>;

/// A decimal integer with an optional `-`: a nom parser written by hand
/// because it runs some 40 times per termination event.
fn signed(i: &str) -> R<'_, i64> {
    let b = i.as_bytes();
    let neg = b.first() == Some(&b'-');
    let start = usize::from(neg);
    let mut v: i64 = 0;
    let mut end = start;
    while end < b.len() && b[end].is_ascii_digit() {
        v = match v.checked_mul(10).and_then(|v| v.checked_add(i64::from(b[end] - b'0'))) {
            Some(v) => v,
            None => return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Digit))),
        };
        end += 1;
    }
    if end == start {
        return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Digit)));
    }
    Ok((&i[end..], if neg { -v } else { v }))
}

/// One or two digits (fields written `%02d`).
fn two(i: &str) -> R<'_, u32> {
    let b = i.as_bytes();
    let n = b.iter().take(2).take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Digit)));
    }
    let v = b[..n].iter().fold(0u32, |acc, c| acc * 10 + u32::from(c - b'0'));
    Ok((&i[n..], v))
}

use nom::Parser as _;

/// `NNN (C.P.S) DATE TIME[.frac][Z] REST`.
fn header(line: &str, legacy_year: i32) -> R<'_, Header<'_>> {
    let digits = line.bytes().take(6).take_while(u8::is_ascii_digit).count();
    if digits < 3 {
        return Err(nom::Err::Error(nom::error::Error::new(line, nom::error::ErrorKind::TakeWhileMN)));
    }
    // At most 5 digits are the code; a sixth then fails the " (" that follows.
    let (code, i) = line.split_at(digits.min(5));
    let code: u16 = match code.parse() {
        Ok(c) => c,
        Err(_) => return Err(nom::Err::Error(nom::error::Error::new(line, nom::error::ErrorKind::Digit))),
    };
    let (i, _) = tag(" (")(i)?;
    let (i, cluster) = signed(i)?;
    let (i, _) = char('.')(i)?;
    let (i, proc) = signed(i)?;
    let (i, _) = char('.')(i)?;
    let (i, subproc) = signed(i)?;
    let (i, _) = tag(") ")(i)?;
    let (i, time) = timestamp(i, legacy_year)?;
    let rest = i.strip_prefix(' ').unwrap_or(i);
    if !(i.is_empty() || i.starts_with(' ')) {
        return Err(nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Space)));
    }
    Ok((i, Header { code, cluster, proc, subproc, time, rest }))
}

/// `YYYY-MM-DD HH:MM:SS` (or with `T`) exactly: the form HTCondor writes by
/// default, read without the general combinators. `None` for anything else
/// (the general path then reads it, to the same result when it is this form).
fn plain_iso(i: &str) -> Option<(&str, [u32; 6])> {
    let b = i.as_bytes().get(..19)?;
    let d = |k: usize| -> Option<u32> {
        let (hi, lo) = (b[k], b[k + 1]);
        (hi.is_ascii_digit() && lo.is_ascii_digit()).then(|| u32::from(hi - b'0') * 10 + u32::from(lo - b'0'))
    };
    let seps =
        b[4] == b'-' && b[7] == b'-' && (b[10] == b' ' || b[10] == b'T') && b[13] == b':' && b[16] == b':';
    if !seps {
        return None;
    }
    // The digits first: only then is byte 19 known to start a character.
    let fields = [d(0)? * 100 + d(2)?, d(5)?, d(8)?, d(11)?, d(14)?, d(17)?];
    Some((&i[19..], fields))
}

/// The date and time fields of any accepted form: (year, month, day, hour,
/// minute, second).
fn date_time(i: &str, legacy: bool, legacy_year: i32) -> R<'_, (i64, u32, u32, u32, u32, u32)> {
    let (i, (year, month, day)) = if legacy {
        let (i, month) = two(i)?;
        let (i, _) = char('/')(i)?;
        let (i, day) = two(i)?;
        let (i, _) = char(' ')(i)?;
        (i, (i64::from(legacy_year), month, day))
    } else {
        let (i, year) = take_while_m_n(4, 6, |c: char| c.is_ascii_digit())(i)?;
        let (i, _) = char('-')(i)?;
        let (i, month) = two(i)?;
        let (i, _) = char('-')(i)?;
        let (i, day) = two(i)?;
        let (i, _) = nom::branch::alt((char(' '), char('T'))).parse(i)?;
        (i, (year.parse::<i64>().unwrap_or(0), month, day))
    };
    let (i, hour) = two(i)?;
    let (i, _) = char(':')(i)?;
    let (i, minute) = two(i)?;
    let (i, _) = char(':')(i)?;
    let (i, second) = two(i)?;
    Ok((i, (year, month, day, hour, minute, second)))
}

/// `YYYY-MM-DD HH:MM:SS`, `YYYY-MM-DDTHH:MM:SS`, or legacy `MM/DD HH:MM:SS`,
/// each with optional `.fraction` and `Z`.
fn timestamp(i: &str, legacy_year: i32) -> R<'_, Timestamp> {
    let bad = |at| nom::Err::Error(nom::error::Error::new(at, nom::error::ErrorKind::Verify));
    let legacy = i.as_bytes().get(2) == Some(&b'/');
    let (i, (year, month, day, hour, minute, second)) = match plain_iso(i) {
        Some((i, [y, mo, d, h, mi, s])) => (i, (i64::from(y), mo, d, h, mi, s)),
        None => date_time(i, legacy, legacy_year)?,
    };
    let (i, frac) = opt((char('.'), take_while_m_n(1, 9, |c: char| c.is_ascii_digit()))).parse(i)?;
    let (i, z) = opt(char('Z')).parse(i)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 24 || minute > 59 || second > 60 {
        return Err(bad(i));
    }
    let days = super::days_from_civil(year, month, day);
    let naive_unix = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    let micros = frac.map(|(_, digits)| {
        let mut us: u32 = 0;
        for (k, c) in digits.bytes().take(6).enumerate() {
            us += u32::from(c - b'0') * 10u32.pow(5 - k as u32);
        }
        us
    });
    Ok((i, Timestamp { naive_unix, micros, utc: z.is_some(), year_inferred: legacy }))
}

/// An ISO time stamp on its own (XML `EventTime`): `2026-11-21T05:05:45.785`.
pub(super) fn iso_time(s: &str) -> Option<Timestamp> {
    match timestamp(s.trim(), super::DEFAULT_LEGACY_YEAR) {
        Ok(("", t)) if !t.year_inferred => Some(t),
        _ => None,
    }
}

/// Body lines with `\n` and a trailing `\r` removed.
struct Lines<'a> {
    rest: &'a str,
    /// A value of the body that did not read (out of range) and was taken
    /// as 0: reported with the event, which is kept.
    problem: Option<String>,
}

/// A byte count HTCondor could have written (`nan` and `inf` read as numbers).
fn finite(n: f64) -> f64 {
    if n.is_finite() {
        n
    } else {
        0.0
    }
}

impl<'a> Lines<'a> {
    /// The CPU usage on the next line (0 if there is none or it does not read).
    fn usage(&mut self) -> CpuUsage {
        match self.next_line().and_then(cpu_usage) {
            Some(u) => self.keep(u).unwrap_or_default(),
            None => CpuUsage::default(),
        }
    }

    /// The value, or `None` with its problem kept.
    fn keep<T>(&mut self, value: Result<T, String>) -> Option<T> {
        match value {
            Ok(v) => Some(v),
            Err(why) => {
                self.problem.get_or_insert(why);
                None
            }
        }
    }

    fn next_line(&mut self) -> Option<&'a str> {
        if self.rest.is_empty() {
            return None;
        }
        let (line, rest) = match memchr::memchr(b'\n', self.rest.as_bytes()) {
            Some(nl) => (&self.rest[..nl], &self.rest[nl + 1..]),
            None => (self.rest, ""),
        };
        self.rest = rest;
        Some(line.strip_suffix('\r').unwrap_or(line))
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        self.next_line()
    }
}

fn expect<'a>(line: &'a str, prefix: &str) -> Result<&'a str, String> {
    line.strip_prefix(prefix).ok_or_else(|| format!("expected {prefix:?}"))
}

fn non_empty(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// `(N) rest` → (N, rest).
fn paren_int(s: &str) -> Option<(i64, &str)> {
    let s = s.trim_start().strip_prefix('(')?;
    let (s, n) = signed(s).ok()?;
    let s = s.strip_prefix(')')?;
    Some((n, s.trim_start()))
}

/// The integer that follows `prefix` in `s`.
fn int_after(s: &str, prefix: &str) -> Option<i64> {
    let s = s.trim_start().strip_prefix(prefix)?;
    signed(s.trim_start()).ok().map(|(_, v)| v)
}

/// `Code C Subcode S` (leading whitespace allowed).
fn code_subcode(s: &str) -> Option<(i64, i64)> {
    let s = s.trim_start().strip_prefix("Code ")?;
    let (s, code) = signed(s).ok()?;
    let s = s.strip_prefix(" Subcode ")?;
    let (_, sub) = signed(s).ok()?;
    Some((code, sub))
}

/// `Usr D HH:MM:SS, Sys D HH:MM:SS  -  …`: `None` if the line is not one,
/// `Some(Err)` if it starts like one but does not read, or a number is out
/// of range (HTCondor writes none that is: the line is damaged).
fn cpu_usage(line: &str) -> Option<Result<CpuUsage, String>> {
    fn part<'a>(s: &'a str, label: &str) -> Option<(&'a str, i64)> {
        let s = s.trim_start().strip_prefix(label)?;
        let (s, d) = signed(s).ok()?;
        let s = s.strip_prefix(' ')?;
        let (s, h) = signed(s).ok()?;
        let s = s.strip_prefix(':')?;
        let (s, m) = signed(s).ok()?;
        let s = s.strip_prefix(':')?;
        let (s, sec) = signed(s).ok()?;
        let secs = d.checked_mul(86_400)?.checked_add(h.checked_mul(3600)?)?;
        Some((s, secs.checked_add(m.checked_mul(60)?)?.checked_add(sec)?))
    }
    if !line.trim_start().starts_with("Usr ") {
        return None;
    }
    let usage = || {
        let (s, user_secs) = part(line, "Usr ")?;
        let s = s.strip_prefix(',')?;
        let (_, sys_secs) = part(s, "Sys ")?;
        Some(CpuUsage { user_secs, sys_secs })
    };
    Some(usage().ok_or_else(|| format!("CPU usage not understood or out of range: {:?}", line.trim())))
}

/// `\tN  -  {Run|Total} Bytes {Sent|Received} By WHO` → (total?, sent?, N).
fn bytes_line(line: &str) -> Option<(bool, bool, f64, &str)> {
    let s = line.trim_start();
    let (s, n) = nom::number::complete::double::<&str, nom::error::Error<&str>>(s).ok()?;
    let s = s.trim_start().strip_prefix('-')?.trim_start();
    let (total, s) = if let Some(s) = s.strip_prefix("Run Bytes ") {
        (false, s)
    } else {
        (true, s.strip_prefix("Total Bytes ")?)
    };
    let (sent, s) = if let Some(s) = s.strip_prefix("Sent By ") {
        (true, s)
    } else {
        (false, s.strip_prefix("Received By ")?)
    };
    Some((total, sent, n, s.trim()))
}

/// `name = value` (ClassAd long form), leading whitespace allowed.
pub(super) fn long_form(line: &str) -> Option<(String, AttrValue)> {
    let s = line.trim_ascii_start();
    let end = s.find(|c: char| c.is_whitespace() || c == '=')?;
    let name = &s[..end];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
        return None;
    }
    let value = s[end..].trim_ascii_start().strip_prefix('=')?.trim_ascii();
    if value.is_empty() {
        return None;
    }
    Some((name.to_string(), classad_value(value)))
}

/// A ClassAd literal as written in a log.
pub(super) fn classad_value(s: &str) -> AttrValue {
    let s = s.trim_ascii();
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        let inner = &s[1..s.len() - 1];
        if !inner.contains('\\') {
            return AttrValue::Str(inner.to_string());
        }
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(o) => out.push(o),
                    None => out.push('\\'),
                }
            } else {
                out.push(c);
            }
        }
        return AttrValue::Str(out);
    }
    if s.eq_ignore_ascii_case("true") {
        return AttrValue::Bool(true);
    }
    if s.eq_ignore_ascii_case("false") {
        return AttrValue::Bool(false);
    }
    let numeric = s.bytes().next().is_some_and(|b| b.is_ascii_digit() || b == b'-' || b == b'+' || b == b'.');
    if numeric {
        if let Ok(v) = s.parse::<i64>() {
            return AttrValue::Int(v);
        }
        if let Ok(v) = s.parse::<f64>() {
            if v.is_finite() {
                return AttrValue::Real(v);
            }
        }
    }
    AttrValue::Expr(s.to_string())
}

/// Submit/cluster-submit notes: `(log_notes, user_notes, warnings)`.
fn submit_notes(lines: &mut Lines) -> (Option<String>, Option<String>, Option<String>) {
    let (mut log, mut user, mut warn) = (None, None, None);
    for (n, line) in lines.enumerate() {
        let line = line.trim();
        if line.starts_with('[') || line.starts_with("DAG Node: ") {
            log = Some(line.to_string());
        } else if line.starts_with("WARNING: ") {
            warn = Some(line.to_string());
        } else if n == 0 {
            log = Some(line.to_string());
        } else if n == 1 {
            user = Some(line.to_string());
        }
    }
    (log, user, warn)
}

/// `SlotName:` and `Key = Value` lines of an execute event.
fn execute_props(lines: &mut Lines) -> (Option<String>, Vec<(String, AttrValue)>) {
    let mut slot = None;
    let mut props = Vec::new();
    for (n, line) in lines.enumerate() {
        if n == 0 {
            if let Some(name) = line.strip_prefix("\tSlotName:") {
                slot = Some(name.trim().trim_matches('"').to_string());
                continue;
            }
        }
        if let Some(kv) = long_form(line) {
            props.push(kv);
        }
    }
    (slot, props)
}

/// `\t(1) Normal termination (return value N)` or `\t(0) Abnormal
/// termination (signal N)` [+ core-file line] → (normal, rv, signal, core).
/// (normal, return value, signal, core file) of a termination.
type Status = (bool, Option<i64>, Option<i64>, Option<String>);

fn termination_status(lines: &mut Lines) -> Result<Status, String> {
    let line = lines.next_line().ok_or("no termination status line")?;
    let (flag, text) = paren_int(line).ok_or("termination status line not `(N) …`")?;
    if flag != 0 {
        let rv = int_after(text, "Normal termination (return value").ok_or("no return value")?;
        Ok((true, Some(rv), None, None))
    } else {
        let sig = int_after(text, "Abnormal termination (signal").ok_or("no signal number")?;
        let core =
            lines.next_line().and_then(|l| l.trim().strip_prefix("(1) Corefile in: ").map(str::to_string));
        Ok((false, None, Some(sig), core))
    }
}

/// CPU-usage lines, byte counts and the resource table of 005/015. With
/// `outline`, only the checks that can report a problem (the numbers out of
/// range), so that the diagnostics are those of a full read.
fn termination_usage(lines: &mut Lines, who: &str, outline: bool) -> Termination {
    let mut t = Termination::default();
    let mut usages = 0;
    let mut table: Option<UsageColumns> = None;
    while let Some(line) = lines.next_line() {
        if let Some(cols) = &table {
            if line.contains(':') {
                if !outline {
                    cols.row(line, &mut t.resources);
                }
                continue;
            }
            table = None;
        }
        if usages < 4 {
            if let Some(u) = cpu_usage(line) {
                let u = lines.keep(u).unwrap_or_default();
                match usages {
                    0 => t.run_remote = u,
                    1 => t.run_local = u,
                    2 => t.total_remote = u,
                    _ => t.total_local = u,
                }
                usages += 1;
                continue;
            }
        }
        if let Some((total, sent, n, by)) = bytes_line(line) {
            if !n.is_finite() {
                lines.problem.get_or_insert_with(|| format!("byte count not a number: {:?}", line.trim()));
            } else if by == who {
                match (total, sent) {
                    (false, true) => t.sent_bytes = n,
                    (false, false) => t.received_bytes = n,
                    (true, true) => t.total_sent_bytes = n,
                    (true, false) => t.total_received_bytes = n,
                }
            }
            continue;
        }
        if line.starts_with("\tPartitionable ") || line.starts_with("\tResources") {
            t.resources.clear();
            table = Some(UsageColumns::new(line));
        }
    }
    if outline {
        return Termination::default();
    }
    t
}

/// Column edges of the `Partitionable Resources : Usage Request Allocated
/// [Assigned]` table, taken from its header as HTCondor's reader does.
struct UsageColumns {
    use_end: usize,
    req_end: usize,
    alloc_end: Option<usize>,
    assigned_start: Option<usize>,
}

impl UsageColumns {
    fn new(header: &str) -> Self {
        let b = header.as_bytes();
        let colon = header.find(':').unwrap_or(0);
        let tbl = b.get(colon + 1..).unwrap_or(&[]);
        let mut p = 0;
        let skip = |p: &mut usize, space: bool| {
            while *p < tbl.len() && (tbl[*p] == b' ') == space {
                *p += 1;
            }
        };
        skip(&mut p, true);
        skip(&mut p, false);
        let use_end = p + 1;
        skip(&mut p, true);
        skip(&mut p, false);
        let req_end = p + 1;
        let rest = &header[(colon + 1 + p).min(header.len())..];
        let (mut alloc_end, mut assigned_start) = (None, None);
        if let Some(a) = rest.find("Allocated") {
            alloc_end = Some(p + a + 9);
            if let Some(s) = rest[a..].find("Assigned") {
                assigned_start = Some(p + a + s);
            }
        }
        UsageColumns { use_end, req_end, alloc_end, assigned_start }
    }

    fn row(&self, line: &str, out: &mut Vec<ResourceRow>) {
        let s = line.trim_start_matches([' ', '\t']);
        let tag_end = s.find([' ', ':']).unwrap_or(s.len());
        let tag = &s[..tag_end];
        let Some(colon) = s[tag_end..].find(':') else { return };
        if tag.is_empty() {
            return;
        }
        let tbl = &s.as_bytes()[tag_end + colon + 1..];
        let cell = |from: usize, to: usize| -> Option<AttrValue> {
            let (from, to) = (from.min(tbl.len()), to.min(tbl.len()));
            let text = std::str::from_utf8(tbl.get(from..to)?).ok()?.trim_ascii();
            (!text.is_empty()).then(|| classad_value(text))
        };
        out.push(ResourceRow {
            name: resource_name(tag),
            usage: cell(0, self.use_end),
            request: cell(self.use_end, self.req_end),
            allocated: self.alloc_end.and_then(|end| cell(self.req_end, end)),
            assigned: self.assigned_start.and_then(|start| cell(start, usize::MAX)),
        });
    }
}

/// The usual resource names need no allocation.
fn resource_name(tag: &str) -> std::borrow::Cow<'static, str> {
    const COMMON: [&str; 7] = ["Cpus", "Disk", "Memory", "GPUs", "TimeExecute", "TimeSlotBusy", "Gpus"];
    match COMMON.iter().find(|c| **c == tag) {
        Some(c) => std::borrow::Cow::Borrowed(c),
        None => std::borrow::Cow::Owned(tag.to_string()),
    }
}

/// How much of each event to read, and the year for legacy stamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Depth {
    pub legacy_year: i32,
    /// Leave out the body parts that cannot fail to read (see
    /// [`super::Parser::outline`]).
    pub outline: bool,
}

/// Reads the body of event `code`; `first` is the rest of the header line.
/// With `outline`, every check that can reject a body still runs (so the
/// variant and the diagnostics are those of a full read), but lines that are
/// only collected — notes, execute properties, CPU usage and the resource
/// table, image sizes, transfer details, attribute lists — are skipped.
fn read_body<'a>(
    code: u16,
    first: &'a str,
    lines: &mut Lines<'a>,
    outline: bool,
) -> Result<EventBody, String> {
    Ok(match code {
        0 => {
            let host = expect(first, "Job submitted from host: ")?.to_string();
            let (log_notes, user_notes, warnings) =
                if outline { (None, None, None) } else { submit_notes(lines) };
            EventBody::Submit { host, log_notes, user_notes, warnings }
        }
        1 => {
            let host = expect(first, "Job executing on host: ")?.to_string();
            let (slot_name, props) = if outline { (None, Vec::new()) } else { execute_props(lines) };
            EventBody::Execute { host, slot_name, props }
        }
        2 => EventBody::ExecutableError { error_type: paren_int(first).map(|(n, _)| n) },
        3 => {
            expect(first, "Job was checkpointed.")?;
            let run_remote = lines.usage();
            let run_local = lines.usage();
            let sent_bytes = lines.next_line().and_then(bytes_line).map_or(0.0, |b| finite(b.2));
            EventBody::Checkpointed { run_remote, run_local, sent_bytes }
        }
        4 => read_evicted(first, lines)?,
        5 => {
            expect(first, "Job terminated.")?;
            let (normal, return_value, signal, core_file) = termination_status(lines)?;
            let usage = Box::new(termination_usage(lines, "Job", outline));
            EventBody::Terminated { normal, return_value, signal, core_file, usage }
        }
        6 => {
            let size = expect(first, "Image size of job updated: ")?;
            let size_kb = signed(size.trim()).map_err(|_| "image size is not a number")?.1;
            let (mut mem, mut rss, mut pss) = (None, None, None);
            for line in lines.take(if outline { 0 } else { usize::MAX }) {
                let Some((n, label)) = line.trim_start().split_once("  -  ") else { break };
                let Ok(n) = n.trim().parse::<i64>() else { break };
                match label.split_whitespace().next().unwrap_or("") {
                    l if l.eq_ignore_ascii_case("MemoryUsage") => mem = Some(n),
                    l if l.eq_ignore_ascii_case("ResidentSetSize") => rss = Some(n),
                    l if l.eq_ignore_ascii_case("ProportionalSetSize") => pss = Some(n),
                    _ => break,
                }
            }
            EventBody::ImageSize {
                size_kb,
                memory_usage_mb: mem,
                resident_set_size_kb: rss,
                proportional_set_size_kb: pss,
            }
        }
        7 => {
            expect(first, "Shadow exception!")?;
            let message = lines.next_line().map(|l| l.trim().to_string()).unwrap_or_default();
            let sent_bytes = lines.next_line().and_then(bytes_line).map_or(0.0, |b| finite(b.2));
            let received_bytes = lines.next_line().and_then(bytes_line).map_or(0.0, |b| finite(b.2));
            EventBody::ShadowException { message, sent_bytes, received_bytes }
        }
        8 => EventBody::Generic { info: first.to_string() },
        9 => {
            expect(first, "Job was aborted")?;
            EventBody::Aborted { reason: lines.next_line().and_then(non_empty) }
        }
        10 => {
            expect(first, "Job was suspended.")?;
            let num_pids =
                lines.next_line().and_then(|l| int_after(l, "Number of processes actually suspended:"));
            EventBody::Suspended { num_pids }
        }
        11 => {
            expect(first, "Job was unsuspended.")?;
            EventBody::Unsuspended
        }
        12 => {
            expect(first, "Job was held.")?;
            let mut reason = String::new();
            let (mut code, mut subcode) = (0, 0);
            if let Some(line) = lines.next_line() {
                let line = line.trim();
                if line != "Reason unspecified" {
                    reason = line.to_string();
                }
                if let Some(l) = lines.next_line() {
                    match code_subcode(l) {
                        Some((c, s)) => (code, subcode) = (c, s),
                        None if l.trim_start().starts_with("Code ") => {
                            lines.problem =
                                Some(format!("hold code not understood or out of range: {:?}", l.trim()));
                        }
                        None => {}
                    }
                }
            }
            EventBody::Held { reason, code, subcode }
        }
        13 => {
            expect(first, "Job was released.")?;
            EventBody::Released { reason: lines.next_line().and_then(non_empty) }
        }
        14 => {
            let rest = expect(first, "Node ")?;
            let (rest, node) = signed(rest).map_err(|_| "no node number")?;
            let host = expect(rest, " executing on host: ")?.trim().to_string();
            let (slot_name, props) = execute_props(lines);
            EventBody::NodeExecute { node, host, slot_name, props }
        }
        15 => {
            let rest = expect(first, "Node ")?;
            let (rest, node) = signed(rest).map_err(|_| "no node number")?;
            expect(rest, " terminated.")?;
            let (normal, return_value, signal, core_file) = termination_status(lines)?;
            let usage = Box::new(termination_usage(lines, "Node", outline));
            EventBody::NodeTerminated { node, normal, return_value, signal, core_file, usage }
        }
        16 => {
            expect(first, "POST Script terminated.")?;
            let line = lines.next_line().ok_or("no termination status line")?;
            let (flag, text) = paren_int(line).ok_or("termination status line not `(N) …`")?;
            let (normal, return_value, signal) = if flag == 1 {
                (
                    true,
                    Some(int_after(text, "Normal termination (return value").ok_or("no return value")?),
                    None,
                )
            } else {
                (
                    false,
                    None,
                    Some(int_after(text, "Abnormal termination (signal").ok_or("no signal number")?),
                )
            };
            let dag_node =
                lines.next_line().and_then(|l| l.trim().strip_prefix("DAG Node: ").map(str::to_string));
            EventBody::PostScriptTerminated { normal, return_value, signal, dag_node }
        }
        21 => {
            let line = first.trim();
            let (kind, rest) = line.split_once(" from ").ok_or("expected `Error from DAEMON on HOST:`")?;
            let (daemon, host) = match rest.split_once(" on ") {
                Some((d, h)) => (d.trim().to_string(), h.trim()),
                None => (String::new(), rest.trim()),
            };
            let host = host.strip_suffix(':').unwrap_or(host).to_string();
            let mut message = String::new();
            let (mut hold_code, mut hold_subcode) = (0, 0);
            for line in lines {
                let l = line.strip_prefix('\t').unwrap_or(line);
                if let Some((c, s)) = code_subcode(l) {
                    (hold_code, hold_subcode) = (c, s);
                    break;
                }
                if !message.is_empty() {
                    message.push('\n');
                }
                message.push_str(l);
            }
            EventBody::RemoteError {
                critical: kind.trim() != "Warning",
                daemon,
                host,
                message,
                hold_code,
                hold_subcode,
            }
        }
        22 => {
            let reason = lines.next_line().and_then(|l| l.strip_prefix("    ")).ok_or("no reason line")?;
            let who = lines
                .next_line()
                .and_then(|l| l.strip_prefix("    Trying to reconnect to "))
                .ok_or("no `Trying to reconnect to` line")?;
            let (name, addr) = who.split_once(' ').ok_or("no startd address")?;
            EventBody::Disconnected {
                reason: reason.to_string(),
                startd_name: name.to_string(),
                startd_addr: addr.to_string(),
            }
        }
        23 => {
            let startd_name = expect(first, "Job reconnected to ")?.to_string();
            let startd_addr = lines
                .next_line()
                .and_then(|l| l.strip_prefix("    startd address: "))
                .ok_or("no startd address")?;
            let starter_addr = lines
                .next_line()
                .and_then(|l| l.strip_prefix("    starter address: "))
                .ok_or("no starter address")?;
            EventBody::Reconnected {
                startd_name,
                startd_addr: startd_addr.into(),
                starter_addr: starter_addr.into(),
            }
        }
        24 => {
            let reason = lines.next_line().and_then(|l| l.strip_prefix("    ")).ok_or("no reason line")?;
            let who = lines
                .next_line()
                .and_then(|l| l.strip_prefix("    Can not reconnect to "))
                .ok_or("no `Can not reconnect to` line")?;
            let name = who.split(',').next().unwrap_or(who);
            EventBody::ReconnectFailed { reason: reason.to_string(), startd_name: name.to_string() }
        }
        25 | 26 => {
            expect(first, if code == 25 { "Grid Resource Back Up" } else { "Detected Down Grid Resource" })?;
            let resource = lines
                .next_line()
                .and_then(|l| l.strip_prefix("    GridResource: "))
                .ok_or("no GridResource line")?
                .to_string();
            if code == 25 {
                EventBody::GridResourceUp { resource }
            } else {
                EventBody::GridResourceDown { resource }
            }
        }
        27 => {
            expect(first, "Job submitted to grid resource")?;
            let resource = lines
                .next_line()
                .and_then(|l| l.strip_prefix("    GridResource: "))
                .ok_or("no GridResource line")?;
            let job_id = lines
                .next_line()
                .and_then(|l| l.strip_prefix("    GridJobId: "))
                .ok_or("no GridJobId line")?;
            EventBody::GridSubmit { resource: resource.to_string(), job_id: job_id.to_string() }
        }
        28 => {
            expect(first, "Job ad information event triggered.")?;
            EventBody::JobAd {
                attrs: if outline { Vec::new() } else { lines.filter_map(long_form).collect() },
            }
        }
        29 => {
            expect(first, "The job's remote status is unknown")?;
            EventBody::StatusUnknown
        }
        30 => {
            expect(first, "The job's remote status is known again")?;
            EventBody::StatusKnown
        }
        31 => {
            expect(first, "Job is performing stage-in of input files")?;
            EventBody::StageIn
        }
        32 => {
            expect(first, "Job is performing stage-out of output files")?;
            EventBody::StageOut
        }
        33 => {
            if let Some(rest) = first.strip_prefix("Changing job attribute ") {
                let (name, rest) = rest.split_once(" from ").ok_or("expected `from`")?;
                let (old, new) = rest.split_once(" to ").ok_or("expected `to`")?;
                EventBody::AttributeUpdate {
                    name: name.into(),
                    value: new.into(),
                    old_value: Some(old.into()),
                }
            } else {
                let rest = expect(first, "Setting job attribute ")?;
                let (name, value) = rest.split_once(" to ").ok_or("expected `to`")?;
                EventBody::AttributeUpdate { name: name.into(), value: value.into(), old_value: None }
            }
        }
        34 => {
            let notes = lines.next_line().map(str::trim).unwrap_or("");
            if notes.is_empty() {
                return Err("no notes line".into());
            }
            EventBody::PreSkip { notes: notes.to_string() }
        }
        35 => {
            let host = expect(first, "Cluster submitted from host: ")?.to_string();
            let (log_notes, user_notes, _) = submit_notes(lines);
            EventBody::ClusterSubmit { host, log_notes, user_notes }
        }
        36 => {
            let mut line = first;
            if line.contains("remove") || line.contains("Remove") {
                line = lines.next_line().unwrap_or("");
            }
            let mut p = line.trim_start();
            let (mut next_proc_id, mut next_row) = (0, 0);
            if let Some(rest) = p.strip_prefix("Materialized ") {
                if let Ok((rest, jobs)) = signed(rest) {
                    if let Some(rest) = rest.strip_prefix(" jobs from ") {
                        if let Ok((rest, items)) = signed(rest) {
                            if let Some(rest) = rest.strip_prefix(" items.") {
                                (next_proc_id, next_row, p) = (jobs, items, rest.trim_start());
                            }
                        }
                    }
                }
            }
            let lower = p.to_ascii_lowercase();
            let completion = if let Some(code) = lower.strip_prefix("error") {
                signed(code.trim()).ok().map(|(_, c)| c).filter(|c| *c < 0).unwrap_or(-1)
            } else if lower.starts_with("complete") {
                1
            } else if lower.starts_with("paused") {
                2
            } else {
                0
            };
            let notes = lines.next_line().and_then(non_empty);
            EventBody::ClusterRemove { next_proc_id, next_row, completion, notes }
        }
        37 => {
            let mut reason = None;
            let (mut pause_code, mut hold_code) = (0, 0);
            let mut rest: Vec<&str> = Vec::new();
            if !(first.contains("pause") || first.contains("Pause")) {
                rest.push(first);
            }
            rest.extend(lines);
            let mut it = rest.into_iter();
            if let Some(r) = it.next() {
                reason = non_empty(r);
            }
            for line in it {
                if let Some(v) = line.find("PauseCode ").and_then(|i| int_after(&line[i + 10..], "")) {
                    pause_code = v;
                }
                if let Some(v) = line.find("HoldCode ").and_then(|i| int_after(&line[i + 9..], "")) {
                    hold_code = v;
                }
            }
            EventBody::FactoryPaused { reason, pause_code, hold_code }
        }
        38 => {
            let reason = if first.contains("resume") || first.contains("Resume") {
                lines.next_line().and_then(non_empty)
            } else {
                non_empty(first)
            };
            EventBody::FactoryResumed { reason }
        }
        40 => {
            let kind = TransferKind::from_text(first.trim_end()).ok_or("unknown file-transfer type")?;
            let (mut queueing_delay, mut host) = (None, None);
            for line in lines.take(if outline { 0 } else { usize::MAX }) {
                if let Some(v) = line.strip_prefix("\tSeconds spent in queue: ") {
                    queueing_delay = v.trim().parse().ok();
                } else if let Some(h) = line.strip_prefix("\tTransferring to host: ") {
                    host = Some(h.to_string());
                }
            }
            EventBody::FileTransfer { kind, queueing_delay, host }
        }
        41..=45 => {
            let mut attrs = Vec::new();
            for line in std::iter::once(first).chain(lines).take(if outline { 0 } else { usize::MAX }) {
                let Some((label, value)) = line.trim().split_once(':') else { continue };
                let name = match label.trim() {
                    "Bytes reserved" => "ReservedSpace",
                    "Reservation Expiration" => "ExpirationTime",
                    "Reservation UUID" | "UUID" => "UUID",
                    "Tag" => "Tag",
                    "Bytes" => "Size",
                    "Checksum Value" => "Checksum",
                    "Checksum Type" => "ChecksumType",
                    _ => continue,
                };
                let value = value.trim();
                let v = match value.parse::<i64>() {
                    Ok(n) if matches!(name, "ReservedSpace" | "ExpirationTime" | "Size") => AttrValue::Int(n),
                    _ => AttrValue::Str(value.to_string()),
                };
                attrs.push((name.to_string(), v));
            }
            EventBody::Details { attrs }
        }
        46 => {
            expect(first, "Dataflow job was skipped.")?;
            EventBody::DataflowJobSkipped { reason: lines.next_line().and_then(non_empty) }
        }
        47 => {
            let kind = expect(first, "Common files event: ")?;
            EventBody::CommonFiles { kind: kind.trim().to_string() }
        }
        100..=111 => {
            let attrs = if outline { Vec::new() } else { lines.filter_map(long_form).collect() };
            EventBody::ExecutePoint { head: first.to_string(), attrs }
        }
        _ => EventBody::Other { text: first.to_string(), body: lines.rest.to_string() },
    })
}

fn read_evicted(first: &str, lines: &mut Lines) -> Result<EventBody, String> {
    let rest = expect(first, "Job was evicted.")?;
    let (code, subcode) = code_subcode(rest).unwrap_or((0, 0));
    let line = lines.next_line().ok_or("no eviction kind line")?;
    let (ckpt, text) = paren_int(line).ok_or("eviction kind line not `(N) …`")?;
    let requeued = text.starts_with("Job terminated and was requeued");
    let mut d = Eviction {
        checkpointed: ckpt != 0,
        requeued,
        run_remote: lines.usage(),
        run_local: lines.usage(),
        ..Eviction::default()
    };
    let mut reason = None;
    if let (Some(sent), Some(recvd)) =
        (lines.next_line().and_then(bytes_line), lines.next_line().and_then(bytes_line))
    {
        (d.sent_bytes, d.received_bytes) = (finite(sent.2), finite(recvd.2));
        if requeued {
            (d.normal, d.return_value, d.signal, d.core_file) = termination_status(lines)?;
        }
        if let Some(line) = lines.next_line() {
            if !line.starts_with("\tPartitionable Resources") {
                reason = match line.strip_prefix("\tReason: ") {
                    Some(r) => Some(r.to_string()),
                    None => non_empty(line),
                };
            }
        }
    }
    Ok(EventBody::Evicted { code, subcode, reason, detail: Box::new(d) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_forms() {
        let (_, h) = header("005 (12345.1000.000) 2026-11-21T04:50:46.785Z Job terminated.", 2000).unwrap();
        assert_eq!((h.code, h.cluster, h.proc, h.subproc), (5, 12345, 1000, 0));
        assert_eq!(h.time.iso(), "2026-11-21T04:50:46.785");
        assert!(h.time.utc);
        assert_eq!(h.rest, "Job terminated.");
        let (_, h) = header("000 (-01.-01.-01) 02/29 23:59:59 Job submitted from host: x", 2024).unwrap();
        assert_eq!((h.cluster, h.proc, h.subproc), (-1, -1, -1));
        assert_eq!(h.time.iso(), "2024-02-29T23:59:59");
        assert!(h.time.year_inferred);
        assert!(header("000 (1.0.0) 2026-13-01 00:00:00 x", 2000).is_err());
        assert!(header("000 (1.0.0)2026-01-01 00:00:00 x", 2000).is_err());
        assert!(header("000 (99999999999999999999.0.0) 2026-01-01 00:00:00 x", 2000).is_err());
    }

    #[test]
    fn the_plain_iso_shortcut_reads_what_the_general_path_reads() {
        let stamps = [
            "2026-11-21 05:07:30 Job",
            "2026-11-21T05:07:30.785Z x",
            "0000-00-00 00:00:00",
            "9999-99-99 99:99:99",
            "2026-1-21 05:07:30 x",
            "20261-11-21 05:07:30",
            "2026-11-21 05:07:3",
            "2026-11-21  5:07:30",
            "2026-11-21x05:07:30",
            "11/21 05:05:29 x",
            "2026-11-2105:07:30",
            "2026-11-21 05:10:4\u{fffd} x",
        ];
        for s in stamps {
            if let Some((rest, [y, mo, d, h, mi, sec])) = plain_iso(s) {
                let general = date_time(s, false, 2000).map_err(|e| e.to_string());
                assert_eq!(general, Ok((rest, (i64::from(y), mo, d, h, mi, sec))), "{s}");
            }
            assert_eq!(
                plain_iso(s).is_some(),
                [
                    "2026-11-21 05:07:30 Job",
                    "2026-11-21T05:07:30.785Z x",
                    "0000-00-00 00:00:00",
                    "9999-99-99 99:99:99"
                ]
                .contains(&s),
                "{s}"
            );
        }
    }

    #[test]
    fn usage_table_columns_follow_the_header() {
        let cols = UsageColumns::new("\tPartitionable Resources :    Usage  Request Allocated ");
        let mut rows = Vec::new();
        cols.row("\t   Cpus                 :     0.01        1         1 ", &mut rows);
        cols.row("\t   GPUs                 :                           0 ", &mut rows);
        cols.row("\t   TimeExecute (s)      :        3                    ", &mut rows);
        let out: Vec<(String, AttrValue)> = rows.iter().flat_map(ResourceRow::attrs).collect();
        let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["CpusUsage", "RequestCpus", "Cpus", "GPUs", "TimeExecuteUsage"]);
        assert_eq!(out[0].1, AttrValue::Real(0.01));
        assert_eq!(out[4].1, AttrValue::Int(3));
    }
}
