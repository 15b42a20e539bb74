//! The XML form of the user log (`log_xml = True`): a run of `<c>…</c>`
//! ClassAds, one per event, with no root element. An execute event nests a
//! `<c>` (`ExecuteProps`), so an event ends at the `</c>` that closes the
//! top-level `<c>`, found by counting depth. Attribute names are those of
//! HTCondor's `ToClassAd`, which the text reader also reports, so both forms
//! map onto the same [`EventBody`].

use super::{AttrValue, CpuUsage, Event, EventBody, Termination, TransferKind};

/// What an XML-looking position holds.
#[derive(Clone, Copy)]
pub(super) enum Start {
    /// `<?xml …?>`, `<!DOCTYPE …>`, `<classads>`, `</classads>`, `<c/>`.
    Skip,
    /// `<c>` or `<c …>`: an event.
    Event,
}

pub(super) enum Frame {
    Incomplete,
    Skip(usize),
    Event(usize),
    /// The event lost its closing `</c>`: the next event's `<c>` starts a
    /// line at this offset (HTCondor starts every top-level `<c>` on a line
    /// of its own; a nested one follows its `<a n="…">` on the same line).
    Torn(usize),
}

/// Is `data` (starting at a non-blank byte) the start of XML rather than text?
pub(super) fn start_kind(data: &[u8]) -> Option<Start> {
    if data.first() != Some(&b'<') {
        return None;
    }
    const SKIPS: [&[u8]; 5] = [b"<?", b"<!", b"<classads", b"</classads", b"<c/>"];
    if SKIPS.iter().any(|p| data.starts_with(p)) {
        return Some(Start::Skip);
    }
    if data.starts_with(b"<c>") || data.starts_with(b"<c ") {
        return Some(Start::Event);
    }
    None
}

/// Where the XML item at `data[0]` ends.
pub(super) fn frame(data: &[u8], kind: Start) -> Frame {
    match kind {
        Start::Skip => match memchr::memchr(b'>', data) {
            Some(i) => Frame::Skip(i + 1),
            None => Frame::Incomplete,
        },
        Start::Event => {
            let mut depth = 0usize;
            for lt in memchr::memchr_iter(b'<', data) {
                let tag = &data[lt..];
                let opens = tag.starts_with(b"<c>") || tag.starts_with(b"<c ");
                if opens && depth > 0 && data[lt - 1] == b'\n' {
                    return Frame::Torn(lt);
                }
                if tag.starts_with(b"<c>") {
                    depth += 1;
                } else if tag.starts_with(b"<c ") {
                    let Some(gt) = memchr::memchr(b'>', tag) else { return Frame::Incomplete };
                    if tag[gt - 1] != b'/' {
                        depth += 1;
                    }
                } else if tag.starts_with(b"</c>") {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Frame::Event(lt + 4);
                    }
                } else if tag.len() < 4 {
                    return Frame::Incomplete;
                }
            }
            Frame::Incomplete
        }
    }
}

/// Parses one `<c>…</c>` event; with a value that was out of range and
/// read as 0, what it was.
pub(super) fn parse_event(bytes: &[u8], offset: u64) -> Result<(Event, Option<String>), String> {
    let text = super::text::utf8(bytes);
    let mut p = Cursor { s: &text, pos: 0, depth: 0 };
    let attrs = p.classad().map_err(|e| format!("malformed XML event: {e}"))?;
    let find = |name: &str| attrs.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v);
    let int = |name: &str| match find(name) {
        Some(AttrValue::Int(i)) => Some(*i),
        _ => None,
    };
    let code = int("EventTypeNumber").ok_or("XML event without EventTypeNumber")?;
    let code = u16::try_from(code).map_err(|_| format!("XML event number {code} out of range"))?;
    let time = match find("EventTime") {
        Some(AttrValue::Str(s)) => super::text::iso_time(s).ok_or_else(|| format!("bad EventTime {s:?}"))?,
        _ => return Err("XML event without EventTime".into()),
    };
    let (cluster, proc, subproc) =
        (int("Cluster").unwrap_or(-1), int("Proc").unwrap_or(-1), int("Subproc").unwrap_or(0));
    let body = body_from_attrs(code, &attrs, &text);
    let problem = USAGES.iter().find(|n| checked_usage(find(n)).is_none()).map(|n| {
        format!("event {code:03}: {n} out of range: {:?}; read as 0", find(n).map(super::json::attr_json))
    });
    Ok((Event { offset, code, cluster, proc, subproc, time, body }, problem))
}

/// A tiny reader for the ClassAd XML that HTCondor writes.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
    depth: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }
    fn ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }
    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.rest().starts_with(t) {
            self.pos += t.len();
            true
        } else {
            false
        }
    }
    fn want(&mut self, t: &str) -> Result<(), String> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(format!("expected {t:?} at byte {}", self.pos))
        }
    }
    /// Text up to the next `<`, entities decoded.
    fn text(&mut self) -> String {
        let r = self.rest();
        let end = r.find('<').unwrap_or(r.len());
        self.pos += end;
        unescape(&r[..end])
    }
    /// `<c>` (or `<c …>`) attributes `</c>`.
    fn classad(&mut self) -> Result<Vec<(String, AttrValue)>, String> {
        self.depth += 1;
        if self.depth > 32 {
            return Err("ClassAds nested too deeply".into());
        }
        self.ws();
        if self.eat("<c/>") {
            self.depth -= 1;
            return Ok(Vec::new());
        }
        if !self.eat("<c>") {
            self.want("<c ")?;
            let r = self.rest();
            let gt = r.find('>').ok_or("unclosed <c")?;
            self.pos += gt + 1;
        }
        let mut attrs = Vec::new();
        loop {
            if self.eat("</c>") {
                break;
            }
            self.want("<a n=\"")?;
            let r = self.rest();
            let q = r.find('"').ok_or("unclosed attribute name")?;
            let name = unescape(&r[..q]);
            self.pos += q + 1;
            self.want(">")?;
            let value = self.value()?;
            self.want("</a>")?;
            attrs.push((name, value));
        }
        self.depth -= 1;
        Ok(attrs)
    }
    fn value(&mut self) -> Result<AttrValue, String> {
        self.ws();
        let r = self.rest();
        if r.starts_with("<c") {
            return Ok(AttrValue::Ad(self.classad()?));
        }
        for (open, close) in [("<s>", "</s>"), ("<e>", "</e>"), ("<at>", "</at>"), ("<rt>", "</rt>")] {
            if self.eat(open) {
                let t = self.text();
                self.want(close)?;
                return Ok(if open == "<s>" { AttrValue::Str(t) } else { AttrValue::Expr(t) });
            }
        }
        if self.eat("<s/>") {
            return Ok(AttrValue::Str(String::new()));
        }
        if self.eat("<i>") {
            let t = self.text();
            self.want("</i>")?;
            return t.trim().parse().map(AttrValue::Int).map_err(|_| format!("bad integer {t:?}"));
        }
        if self.eat("<r>") {
            let t = self.text();
            self.want("</r>")?;
            return match t.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(AttrValue::Real(v)),
                _ => Ok(AttrValue::Expr(t)),
            };
        }
        if self.eat("<b v=\"") {
            let v = self.rest().starts_with('t');
            let r = self.rest();
            let end = r.find("/>").ok_or("unclosed <b")?;
            self.pos += end + 2;
            return Ok(AttrValue::Bool(v));
        }
        if self.eat("<un/>") {
            return Ok(AttrValue::Expr("undefined".into()));
        }
        if self.eat("<er/>") {
            return Ok(AttrValue::Expr("error".into()));
        }
        if self.eat("<l>") {
            let mut items = Vec::new();
            while !self.eat("</l>") {
                if self.rest().is_empty() {
                    return Err("unclosed <l>".into());
                }
                items.push(super::json::attr_json(&self.value()?).to_string());
            }
            return Ok(AttrValue::Expr(format!("{{ {} }}", items.join(", "))));
        }
        Err(format!("unknown XML value at byte {}", self.pos))
    }
}

fn unescape(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest.find(';').filter(|&i| i <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let ent = &rest[1..semi];
        let ch = match ent {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => ent
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| ent.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match ch {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Parses HTCondor's `Usr D HH:MM:SS, Sys D HH:MM:SS` (as in `RunLocalUsage`):
/// 0 when absent or of another form, `None` when a number is out of range.
fn checked_usage(s: Option<&AttrValue>) -> Option<CpuUsage> {
    let Some(AttrValue::Str(s)) = s else { return Some(CpuUsage::default()) };
    let nums: Option<Vec<i64>> =
        s.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty()).map(|p| p.parse().ok()).collect();
    let nums = nums?;
    if nums.len() != 8 {
        return Some(CpuUsage::default());
    }
    let secs = |n: &[i64]| {
        n[0].checked_mul(86_400)?
            .checked_add(n[1].checked_mul(3600)?)?
            .checked_add(n[2].checked_mul(60)?)?
            .checked_add(n[3])
    };
    Some(CpuUsage { user_secs: secs(&nums[..4])?, sys_secs: secs(&nums[4..])? })
}

/// [`checked_usage`], 0 when out of range ([`parse_event`] reports it).
fn usage_of(s: Option<&AttrValue>) -> CpuUsage {
    checked_usage(s).unwrap_or_default()
}

/// CPU usages of an event that are out of range (read as 0).
const USAGES: [&str; 4] = ["RunLocalUsage", "RunRemoteUsage", "TotalLocalUsage", "TotalRemoteUsage"];

/// Attribute names that the event header or our typed fields account for.
const HEADER: [&str; 6] = ["MyType", "EventTypeNumber", "EventTime", "Cluster", "Proc", "Subproc"];

fn body_from_attrs(code: u16, attrs: &[(String, AttrValue)], raw: &str) -> EventBody {
    let find = |name: &str| attrs.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v);
    let s = |name: &str| match find(name) {
        Some(AttrValue::Str(s)) | Some(AttrValue::Expr(s)) => Some(s.clone()),
        _ => None,
    };
    let st = |name: &str| s(name).unwrap_or_default();
    let i = |name: &str| match find(name) {
        Some(AttrValue::Int(i)) => Some(*i),
        Some(AttrValue::Real(r)) => Some(*r as i64),
        Some(AttrValue::Bool(b)) => Some(i64::from(*b)),
        _ => None,
    };
    let f = |name: &str| match find(name) {
        Some(AttrValue::Int(i)) => *i as f64,
        Some(AttrValue::Real(r)) => *r,
        _ => 0.0,
    };
    let b = |name: &str| match find(name) {
        Some(AttrValue::Bool(b)) => *b,
        Some(AttrValue::Int(i)) => *i != 0,
        _ => false,
    };
    let props = || match find("ExecuteProps") {
        Some(AttrValue::Ad(p)) => p.clone(),
        _ => Vec::new(),
    };
    let nonneg = |name: &str| i(name).filter(|v| *v >= 0);
    let others = |skip: &[&str]| -> Vec<(String, AttrValue)> {
        attrs
            .iter()
            .filter(|(k, _)| !HEADER.iter().chain(skip).any(|h| h.eq_ignore_ascii_case(k)))
            .cloned()
            .collect()
    };
    let termination = || {
        const KNOWN: [&str; 12] = [
            "TerminatedNormally",
            "ReturnValue",
            "TerminatedBySignal",
            "CoreFile",
            "RunLocalUsage",
            "RunRemoteUsage",
            "TotalLocalUsage",
            "TotalRemoteUsage",
            "SentBytes",
            "ReceivedBytes",
            "TotalSentBytes",
            "TotalReceivedBytes",
        ];
        let mut skip = KNOWN.to_vec();
        skip.push("Node");
        Box::new(Termination {
            run_remote: usage_of(find("RunRemoteUsage")),
            run_local: usage_of(find("RunLocalUsage")),
            total_remote: usage_of(find("TotalRemoteUsage")),
            total_local: usage_of(find("TotalLocalUsage")),
            sent_bytes: f("SentBytes"),
            received_bytes: f("ReceivedBytes"),
            total_sent_bytes: f("TotalSentBytes"),
            total_received_bytes: f("TotalReceivedBytes"),
            resources: super::ResourceRow::from_attrs(&others(&skip)),
        })
    };
    match code {
        0 => EventBody::Submit {
            host: st("SubmitHost"),
            log_notes: s("LogNotes"),
            user_notes: s("UserNotes"),
            warnings: s("Warnings"),
        },
        1 => EventBody::Execute { host: st("ExecuteHost"), slot_name: s("SlotName"), props: props() },
        2 => EventBody::ExecutableError { error_type: i("ExecuteErrorType") },
        3 => EventBody::Checkpointed {
            run_remote: usage_of(find("RunRemoteUsage")),
            run_local: usage_of(find("RunLocalUsage")),
            sent_bytes: f("SentBytes"),
        },
        4 => EventBody::Evicted {
            code: i("ReasonCode").unwrap_or(0),
            subcode: i("ReasonSubCode").unwrap_or(0),
            reason: s("Reason"),
            detail: Box::new(super::Eviction {
                checkpointed: b("Checkpointed"),
                requeued: b("TerminatedAndRequeued"),
                normal: b("TerminatedNormally"),
                return_value: nonneg("ReturnValue"),
                signal: nonneg("TerminatedBySignal"),
                core_file: s("CoreFile"),
                run_remote: usage_of(find("RunRemoteUsage")),
                run_local: usage_of(find("RunLocalUsage")),
                sent_bytes: f("SentBytes"),
                received_bytes: f("ReceivedBytes"),
            }),
        },
        5 => EventBody::Terminated {
            normal: b("TerminatedNormally"),
            return_value: nonneg("ReturnValue"),
            signal: nonneg("TerminatedBySignal"),
            core_file: s("CoreFile"),
            usage: termination(),
        },
        6 => EventBody::ImageSize {
            size_kb: i("Size").unwrap_or(-1),
            memory_usage_mb: nonneg("MemoryUsage"),
            resident_set_size_kb: nonneg("ResidentSetSize"),
            proportional_set_size_kb: nonneg("ProportionalSetSize"),
        },
        7 => EventBody::ShadowException {
            message: st("Message"),
            sent_bytes: f("SentBytes"),
            received_bytes: f("ReceivedBytes"),
        },
        8 => EventBody::Generic { info: st("Info") },
        9 => EventBody::Aborted { reason: s("Reason") },
        10 => EventBody::Suspended { num_pids: i("NumberOfPIDs") },
        11 => EventBody::Unsuspended,
        12 => EventBody::Held {
            reason: st("HoldReason"),
            code: i("HoldReasonCode").unwrap_or(0),
            subcode: i("HoldReasonSubCode").unwrap_or(0),
        },
        13 => EventBody::Released { reason: s("Reason") },
        14 => EventBody::NodeExecute {
            node: i("Node").unwrap_or(-1),
            host: st("ExecuteHost"),
            slot_name: s("SlotName"),
            props: props(),
        },
        15 => EventBody::NodeTerminated {
            node: i("Node").unwrap_or(-1),
            normal: b("TerminatedNormally"),
            return_value: nonneg("ReturnValue"),
            signal: nonneg("TerminatedBySignal"),
            core_file: s("CoreFile"),
            usage: termination(),
        },
        16 => EventBody::PostScriptTerminated {
            normal: b("TerminatedNormally"),
            return_value: nonneg("ReturnValue"),
            signal: nonneg("TerminatedBySignal"),
            dag_node: s("DAGNodeName"),
        },
        21 => EventBody::RemoteError {
            critical: !matches!(i("CriticalError"), Some(0)),
            daemon: st("Daemon"),
            host: st("ExecuteHost"),
            message: st("ErrorMsg"),
            hold_code: i("HoldReasonCode").unwrap_or(0),
            hold_subcode: i("HoldReasonSubCode").unwrap_or(0),
        },
        22 => EventBody::Disconnected {
            reason: st("DisconnectReason"),
            startd_name: st("StartdName"),
            startd_addr: st("StartdAddr"),
        },
        23 => EventBody::Reconnected {
            startd_name: st("StartdName"),
            startd_addr: st("StartdAddr"),
            starter_addr: st("StarterAddr"),
        },
        24 => EventBody::ReconnectFailed { reason: st("Reason"), startd_name: st("StartdName") },
        25 => EventBody::GridResourceUp { resource: st("GridResource") },
        26 => EventBody::GridResourceDown { resource: st("GridResource") },
        27 => EventBody::GridSubmit { resource: st("GridResource"), job_id: st("GridJobId") },
        28 => EventBody::JobAd { attrs: others(&[]) },
        29 => EventBody::StatusUnknown,
        30 => EventBody::StatusKnown,
        31 => EventBody::StageIn,
        32 => EventBody::StageOut,
        33 => EventBody::AttributeUpdate { name: st("Attribute"), value: st("Value"), old_value: None },
        34 => EventBody::PreSkip { notes: st("SkipEventLogNotes") },
        35 => EventBody::ClusterSubmit { host: st("SubmitHost"), log_notes: None, user_notes: None },
        36 => EventBody::ClusterRemove {
            next_proc_id: i("NextProcId").unwrap_or(0),
            next_row: i("NextRow").unwrap_or(0),
            completion: i("Completion").unwrap_or(0),
            notes: s("Notes"),
        },
        37 => EventBody::FactoryPaused {
            reason: s("Reason"),
            pause_code: i("PauseCode").unwrap_or(0),
            hold_code: i("HoldCode").unwrap_or(0),
        },
        38 => EventBody::FactoryResumed { reason: s("Reason") },
        40 => match i("Type").and_then(TransferKind::from_number) {
            Some(kind) => {
                EventBody::FileTransfer { kind, queueing_delay: i("QueueingDelay"), host: s("Host") }
            }
            None => EventBody::Other { text: st("MyType"), body: raw.to_string() },
        },
        41..=45 => EventBody::Details { attrs: others(&[]) },
        46 => EventBody::DataflowJobSkipped { reason: s("Reason") },
        47 => EventBody::CommonFiles { kind: st("Type") },
        100..=111 => EventBody::ExecutePoint { head: st("EventHead"), attrs: others(&["EventHead"]) },
        _ => EventBody::Other { text: s("EventHead").unwrap_or_else(|| st("MyType")), body: raw.to_string() },
    }
}
