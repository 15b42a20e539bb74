//! `Event` → the `cosched log dump` JSON object, with the attribute names and
//! presence rules of HTCondor's reader (`ToClassAd` in `condor_event.cpp`),
//! so that a dump can be compared with `ref_userlog.py dump`.

use super::{AttrValue, CpuUsage, Event, EventBody, Termination};
use serde_json::{json, Map, Value};

pub(super) fn attr_json(v: &AttrValue) -> Value {
    match v {
        AttrValue::Int(i) => json!(i),
        AttrValue::Real(r) => json!(r),
        AttrValue::Bool(b) => json!(b),
        AttrValue::Str(s) | AttrValue::Expr(s) => json!(s),
        AttrValue::Ad(attrs) => Value::Object(attrs.iter().map(|(k, v)| (k.clone(), attr_json(v))).collect()),
    }
}

fn usage_str(u: &CpuUsage) -> String {
    fn dhms(s: i64) -> String {
        format!("{} {:02}:{:02}:{:02}", s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60)
    }
    format!("Usr {}, Sys {}", dhms(u.user_secs), dhms(u.sys_secs))
}

struct Attrs(Map<String, Value>);

impl Attrs {
    fn set(&mut self, k: &str, v: impl Into<Value>) {
        self.0.insert(k.to_string(), v.into());
    }
    fn opt<T: Into<Value> + Clone>(&mut self, k: &str, v: &Option<T>) {
        if let Some(v) = v {
            self.set(k, v.clone());
        }
    }
    fn non_empty(&mut self, k: &str, v: &str) {
        if !v.is_empty() {
            self.set(k, v);
        }
    }
    fn ad(&mut self, attrs: &[(String, AttrValue)]) {
        for (k, v) in attrs {
            self.0.insert(k.clone(), attr_json(v));
        }
    }
    fn termination(
        &mut self,
        normal: bool,
        rv: Option<i64>,
        sig: Option<i64>,
        core: &Option<String>,
        t: &Termination,
    ) {
        for row in &t.resources {
            self.ad(&row.attrs());
        }
        self.set("TerminatedNormally", normal);
        self.opt("ReturnValue", &rv);
        self.opt("TerminatedBySignal", &sig);
        self.opt("CoreFile", core);
        self.set("RunLocalUsage", usage_str(&t.run_local));
        self.set("RunRemoteUsage", usage_str(&t.run_remote));
        self.set("TotalLocalUsage", usage_str(&t.total_local));
        self.set("TotalRemoteUsage", usage_str(&t.total_remote));
        self.set("SentBytes", t.sent_bytes);
        self.set("ReceivedBytes", t.received_bytes);
        self.set("TotalSentBytes", t.total_sent_bytes);
        self.set("TotalReceivedBytes", t.total_received_bytes);
    }
    fn execute(&mut self, host: &str, slot: &Option<String>, props: &[(String, AttrValue)]) {
        self.non_empty("ExecuteHost", host);
        self.opt("SlotName", slot);
        if !props.is_empty() {
            self.set("ExecuteProps", attr_json(&AttrValue::Ad(props.to_vec())));
        }
    }
}

pub(super) fn event_json(ev: &Event) -> Value {
    let mut a = Attrs(Map::new());
    match &ev.body {
        EventBody::Submit { host, log_notes, user_notes, warnings } => {
            a.non_empty("SubmitHost", host);
            a.opt("LogNotes", log_notes);
            a.opt("UserNotes", user_notes);
            a.opt("Warnings", warnings);
            if let Some(node) = log_notes.as_deref().and_then(|n| n.strip_prefix("DAG Node: ")) {
                a.set("StructuredNotes", json!({"DAGNodeName": node.trim()}));
            }
        }
        EventBody::Execute { host, slot_name, props } => a.execute(host, slot_name, props),
        EventBody::ExecutableError { error_type } => a.opt("ExecuteErrorType", error_type),
        EventBody::Checkpointed { run_remote, run_local, sent_bytes } => {
            a.set("RunLocalUsage", usage_str(run_local));
            a.set("RunRemoteUsage", usage_str(run_remote));
            a.set("SentBytes", *sent_bytes);
        }
        EventBody::Evicted { code, subcode, reason, detail } => {
            let d = detail;
            a.set("Checkpointed", d.checkpointed);
            a.set("RunLocalUsage", usage_str(&d.run_local));
            a.set("RunRemoteUsage", usage_str(&d.run_remote));
            a.set("SentBytes", d.sent_bytes);
            a.set("ReceivedBytes", d.received_bytes);
            a.set("TerminatedAndRequeued", d.requeued);
            a.set("TerminatedNormally", d.normal);
            a.opt("ReturnValue", &d.return_value);
            a.opt("TerminatedBySignal", &d.signal);
            a.opt("Reason", reason);
            if *code != 0 {
                a.set("ReasonCode", *code);
            }
            if *subcode != 0 {
                a.set("ReasonSubCode", *subcode);
            }
            a.opt("CoreFile", &d.core_file);
        }
        EventBody::Terminated { normal, return_value, signal, core_file, usage } => {
            a.termination(*normal, *return_value, *signal, core_file, usage)
        }
        EventBody::ImageSize { size_kb, memory_usage_mb, resident_set_size_kb, proportional_set_size_kb } => {
            a.set("Size", *size_kb);
            a.opt("MemoryUsage", memory_usage_mb);
            // HTCondor's reader defaults the resident set size to 0.
            a.set("ResidentSetSize", resident_set_size_kb.unwrap_or(0));
            a.opt("ProportionalSetSize", proportional_set_size_kb);
        }
        EventBody::ShadowException { message, sent_bytes, received_bytes } => {
            a.set("Message", message.as_str());
            a.set("SentBytes", *sent_bytes);
            a.set("ReceivedBytes", *received_bytes);
        }
        EventBody::Generic { info } => a.non_empty("Info", info),
        EventBody::Aborted { reason }
        | EventBody::Released { reason }
        | EventBody::FactoryResumed { reason }
        | EventBody::DataflowJobSkipped { reason } => a.opt("Reason", reason),
        EventBody::Suspended { num_pids } => a.set("NumberOfPIDs", num_pids.unwrap_or(-1)),
        EventBody::Held { reason, code, subcode } => {
            a.non_empty("HoldReason", reason);
            a.set("HoldReasonCode", *code);
            a.set("HoldReasonSubCode", *subcode);
        }
        EventBody::NodeExecute { node, host, slot_name, props } => {
            a.execute(host, slot_name, props);
            a.set("Node", *node);
        }
        EventBody::NodeTerminated { node, normal, return_value, signal, core_file, usage } => {
            a.termination(*normal, *return_value, *signal, core_file, usage);
            a.set("ReturnValue", return_value.unwrap_or(-1));
            a.set("TerminatedBySignal", signal.unwrap_or(-1));
            a.set("Node", *node);
        }
        EventBody::PostScriptTerminated { normal, return_value, signal, dag_node } => {
            a.set("TerminatedNormally", *normal);
            a.opt("ReturnValue", return_value);
            a.opt("TerminatedBySignal", signal);
            a.opt("DAGNodeName", dag_node);
        }
        EventBody::RemoteError { critical, daemon, host, message, hold_code, hold_subcode } => {
            a.non_empty("Daemon", daemon);
            a.non_empty("ExecuteHost", host);
            a.non_empty("ErrorMsg", message);
            if !critical {
                a.set("CriticalError", 0);
            }
            if *hold_code != 0 {
                a.set("HoldReasonCode", *hold_code);
                a.set("HoldReasonSubCode", *hold_subcode);
            }
        }
        EventBody::Disconnected { reason, startd_name, startd_addr } => {
            a.set("StartdAddr", startd_addr.as_str());
            a.set("StartdName", startd_name.as_str());
            a.set("DisconnectReason", reason.as_str());
            a.set("EventDescription", "Job disconnected, attempting to reconnect");
        }
        EventBody::Reconnected { startd_name, startd_addr, starter_addr } => {
            a.set("StartdAddr", startd_addr.as_str());
            a.set("StartdName", startd_name.as_str());
            a.set("StarterAddr", starter_addr.as_str());
            a.set("EventDescription", "Job reconnected");
        }
        EventBody::ReconnectFailed { reason, startd_name } => {
            a.set("StartdName", startd_name.as_str());
            a.set("Reason", reason.as_str());
            a.set("EventDescription", "Job reconnect impossible: rescheduling job");
        }
        EventBody::GridResourceUp { resource } | EventBody::GridResourceDown { resource } => {
            a.non_empty("GridResource", resource)
        }
        EventBody::GridSubmit { resource, job_id } => {
            a.non_empty("GridResource", resource);
            a.non_empty("GridJobId", job_id);
        }
        EventBody::JobAd { attrs } | EventBody::Details { attrs } => a.ad(attrs),
        EventBody::StatusUnknown | EventBody::StatusKnown | EventBody::Unsuspended => {}
        // HTCondor's reader has no class for these and reads them as "future" events.
        EventBody::StageIn => a.set("EventHead", "Job is performing stage-in of input files"),
        EventBody::StageOut => a.set("EventHead", "Job is performing stage-out of output files"),
        EventBody::AttributeUpdate { name, value, .. } => {
            a.set("Attribute", name.as_str());
            a.set("Value", value.as_str());
        }
        EventBody::PreSkip { notes } => a.non_empty("SkipEventLogNotes", notes),
        EventBody::ClusterSubmit { host, .. } => a.non_empty("SubmitHost", host),
        EventBody::ClusterRemove { next_proc_id, next_row, completion, notes } => {
            a.opt("Notes", notes);
            a.set("NextProcId", *next_proc_id);
            a.set("NextRow", *next_row);
            a.set("Completion", *completion);
        }
        EventBody::FactoryPaused { reason, pause_code, hold_code } => {
            a.opt("Reason", reason);
            a.set("PauseCode", *pause_code);
            a.set("HoldCode", *hold_code);
        }
        EventBody::FileTransfer { kind, queueing_delay, host } => {
            a.set("Type", *kind as i64);
            a.opt("QueueingDelay", queueing_delay);
            a.opt("Host", host);
        }
        EventBody::CommonFiles { kind } => a.set("Type", kind.as_str()),
        EventBody::ExecutePoint { head, attrs } => {
            a.ad(attrs);
            a.set("EventHead", head.as_str());
        }
        EventBody::Other { text, body } => {
            a.set("EventHead", text.as_str());
            for line in body.lines() {
                if let Some((k, v)) = super::text::long_form(line) {
                    a.0.insert(k, attr_json(&v));
                }
            }
        }
    }
    json!({
        "type": ev.code,
        "cluster": ev.cluster,
        "proc": ev.proc,
        "subproc": ev.subproc,
        "time": ev.time.iso(),
        "attrs": Value::Object(a.0),
    })
}
