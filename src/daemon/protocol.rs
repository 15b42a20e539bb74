//! The daemon's socket protocol: JSON lines (one request per line, one or more
//! response lines per request). The schema is documented in [`crate::daemon`];
//! these types are that schema, so their field names are a wire format.

use serde::{Deserialize, Serialize};

/// This build's version as requests and responses carry it: `cosched
/// --version`'s, the release and its commit, so that two builds of one
/// release are told apart too.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("COSCHED_COMMIT"), ")");

/// One request line: an operation plus the client's version and, for tests
/// only, `as_uid`. No type of a request refuses a field it does not know
/// (no `deny_unknown_fields`, here or in any earlier cosched): a field a
/// newer client adds is ignored by an older daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(flatten)]
    pub request: Request,
    /// Act as this uid instead of the kernel's peer credentials. Honoured only
    /// when the daemon config sets `trust_client_uid = true` (tests); refused
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_uid: Option<u32>,
    /// The client's [`VERSION`] (absent from clients older than this
    /// field): what the daemon says when it cannot read the request
    /// ([`unreadable_request`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Who am I, and is the daemon alive.
    Ping,
    /// Start a run. The files travel by content: the daemon may not be able to
    /// read the user's home, and it keeps its own copies so that a resumed run
    /// does not depend on files the user may edit meanwhile.
    Submit(SubmitRequest),
    /// The caller's runs (an admin's: everyone's), newest last.
    Runs,
    /// Progress of one run, or of every visible unfinished run.
    Status {
        #[serde(default)]
        run: Option<u64>,
    },
    /// Stop a run and remove its jobs from the grid.
    Cancel { run: u64 },
    /// Status lines until the run ends (at least one line, one per change,
    /// at most a few per second).
    Watch { run: u64 },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubmitRequest {
    /// Jobs of the run, all kinds.
    pub n_jobs: u64,
    /// Where the client read the sites file. This path and each
    /// description's are absolute ([`SubmitRequest::run_kinds`] refuses
    /// others): messages name them, and relative names inside a file
    /// (a description's `executable`, inputs and `initialdir`, a sites
    /// file's `bin_dir`) resolve against its directory, which the daemon's
    /// account reads for every user. There is no working directory of the
    /// client's to resolve a relative one against (an older client's
    /// `cwd` is ignored), and the daemon's own is nobody's.
    pub sites_path: String,
    pub sites_toml: String,
    /// A run of one submit description (`cosched submit N SITES JOB
    /// --daemon`): where the client read it, and its text. Empty when
    /// `kinds` gives the run's descriptions.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job_path: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job_sub: String,
    /// A run of several kinds (`--jobs NAME=COUNT:FILE`, repeated): each
    /// kind's name, count and description, in the order given; their counts
    /// add up to `n_jobs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<KindRequest>,
    /// Overrides `[policy] name` of the sites file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// One kind of job of a [`SubmitRequest`]: what `--jobs NAME=COUNT:FILE`
/// names, the file by content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindRequest {
    pub name: String,
    pub count: u64,
    /// Where the client read the description (absolute, as
    /// [`SubmitRequest::sites_path`]).
    pub job_path: String,
    pub job_sub: String,
}

impl SubmitRequest {
    /// The run's kinds: those of `kinds`, or the one description of
    /// `job_path` (named [`crate::policy::jobtype::SINGLE_TYPE`], all
    /// `n_jobs` jobs). An error says what is inconsistent, or which path
    /// is not absolute.
    pub fn run_kinds(&self) -> Result<Vec<KindRequest>, String> {
        if let Some(why) = crate::policy::too_many_jobs(self.n_jobs) {
            return Err(format!("{why}\nnothing was submitted"));
        }
        let relative: Vec<&str> = std::iter::once(self.sites_path.as_str())
            .chain((!self.job_path.is_empty()).then_some(self.job_path.as_str()))
            .chain(self.kinds.iter().map(|k| k.job_path.as_str()))
            .filter(|p| !std::path::Path::new(p).is_absolute())
            .collect();
        if !relative.is_empty() {
            return Err(format!(
                "{}: not an absolute path; the daemon resolves each file's relative names against its \
                 directory and has no working directory of yours, so name every file from / (`cosched \
                 submit --daemon` does)\nnothing was submitted",
                relative.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", ")
            ));
        }
        if self.kinds.is_empty() {
            if self.job_sub.is_empty() && self.job_path.is_empty() {
                return Err("the request names no submit description (job_path, job_sub) and no kinds".into());
            }
            return Ok(vec![KindRequest {
                name: crate::policy::jobtype::SINGLE_TYPE.to_string(),
                count: self.n_jobs,
                job_path: self.job_path.clone(),
                job_sub: self.job_sub.clone(),
            }]);
        }
        if !self.job_path.is_empty() || !self.job_sub.is_empty() {
            return Err(
                "a request gives either one description (job_path, job_sub) or kinds, not both".into()
            );
        }
        let total = self.kinds.iter().try_fold(0u64, |sum, k| sum.checked_add(k.count));
        if total != Some(self.n_jobs) {
            return Err(format!(
                "the kinds' counts ({}) do not add up to n_jobs ({})",
                self.kinds.iter().map(|k| format!("{}={}", k.name, k.count)).collect::<Vec<_>>().join(", "),
                self.n_jobs
            ));
        }
        Ok(self.kinds.clone())
    }
}

/// Every response line. `ok` says whether the request succeeded; `error`
/// says why not. Which other fields are present depends on the request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `ping`: the uid the daemon sees, and whether it counts as an admin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<bool>,
    /// `submit`, `cancel`: the run concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    /// `submit`: what the client should hear of an accepted run, one
    /// entry each: the warnings `cosched submit` prints in the foreground
    /// (of the sites file, the descriptions, HTCondor's dry run;
    /// [`warning_text`]), and what the daemon changed of the request to
    /// stay within its own bounds (e.g. `[run] checkpoint_every` raised to
    /// its `min_checkpoint_every`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// `runs`, `status`, `watch`: one entry per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Vec<RunStatus>>,
    /// The daemon's [`VERSION`], on every response (absent from daemons
    /// older than this field): after an upgrade, a daemon not restarted yet
    /// is the old one, and the client says so with its errors
    /// ([`version_hint`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl Response {
    pub fn error(message: impl Into<String>) -> Self {
        Response { ok: false, error: Some(message.into()), ..Response::default() }
    }
    pub fn ok() -> Self {
        Response { ok: true, ..Response::default() }
    }
}

/// What a client adds to a daemon's error when the two are of different
/// versions (`daemon`: the response's [`Response::version`], `None` from a
/// daemon older than that field), as after an upgrade before the daemon is
/// restarted: a request the old daemon cannot read, or one it reads
/// otherwise than the new client means. `None` when they are of one version.
pub fn version_hint(daemon: Option<&str>, client: &str) -> Option<String> {
    let daemon = match daemon {
        Some(daemon) if daemon == client => return None,
        Some(daemon) => format!("cosched {daemon}"),
        None => "an older cosched, which does not say its version".to_string(),
    };
    Some(format!(
        "the daemon runs {daemon} (this client is {client}): restart it (`systemctl restart cosched`) after an \
         upgrade"
    ))
}

/// The daemon's answer to a request line it cannot read as an
/// [`Envelope`] (`error`, from reading `line`): serde's reason, the field
/// it is about, and, for a JSON object, both versions, since a client of
/// another version may send a request this daemon reads no more or not yet.
pub fn unreadable_request(line: &str, error: &serde_json::Error) -> String {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_str::<serde_json::Value>(line) else {
        return format!("bad request: {error}; send one JSON object per line");
    };
    let said = error.to_string();
    let field = quoted_after(&said, "missing field `")
        .or_else(|| said.starts_with("unknown variant `").then_some("op"))
        .map(str::to_string)
        .or_else(|| field_at_fault(&fields));
    let field = field.filter(|f| !said.contains(&format!("`{f}`"))).map(|f| format!(" (field `{f}`)"));
    let versions = match fields.get("version").and_then(|v| v.as_str()) {
        Some(client) if client == VERSION => return format!("bad request: {said}{}", field.unwrap_or_default()),
        Some(client) => format!("the client is cosched {client} and this daemon cosched {VERSION}"),
        None => format!(
            "the client did not say its version (a cosched older than this daemon's {VERSION}, or another program)"
        ),
    };
    format!(
        "bad request: {said}{}: {versions}; a client of another version may send what this daemon does not \
         read: use a client of the daemon's version, or restart the daemon (`systemctl restart cosched`) after \
         an upgrade",
        field.unwrap_or_default()
    )
}

/// The name between `start` and the next backquote of `text`.
fn quoted_after<'a>(text: &'a str, start: &str) -> Option<&'a str> {
    let rest = &text[text.find(start)? + start.len()..];
    rest.split('`').next()
}

/// Which field of a request that does not read makes it fail, where serde
/// does not say (a value of the wrong type): the one without which the
/// request reads, or fails only for want of it. `op` chooses the fields,
/// so it is not one of those.
fn field_at_fault(fields: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    fields
        .keys()
        .filter(|key| *key != "op")
        .find(|key| {
            let mut without = fields.clone();
            without.remove(key.as_str());
            match serde_json::from_value::<Envelope>(serde_json::Value::Object(without)) {
                Ok(_) => true,
                Err(e) => e.to_string().starts_with(&format!("missing field `{key}`")),
            }
        })
        .cloned()
}

/// A warning about an input file as [`Response::warnings`] carries it, for
/// the client to print after `cosched: warning: `: where (`FILE:LINE:COL`),
/// what, and the hint on a line of its own, as `cosched submit` prints it.
pub fn warning_text(problem: &crate::config::Problem) -> String {
    let at = problem.location.map(|(line, col)| format!(":{line}:{col}")).unwrap_or_default();
    let hint = problem.hint.as_deref().map(|h| format!("\n  hint: {h}")).unwrap_or_default();
    format!("{}{at}: {}{hint}", problem.file.display(), problem.message)
}

/// Where a run is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Recorded, its task not started yet (or waiting for a restart).
    Queued,
    /// Running when the daemon stopped, and started again: its past is
    /// being replayed, and its counts are the whole run's once it is
    /// `running`. Shown only: the record says `running`.
    Resuming,
    Running,
    /// Cancel asked for: removing its jobs from the grid.
    Cancelling,
    /// Every job succeeded or was given up.
    Done,
    Cancelled,
    /// The run could not go on (see `message`).
    Failed,
}

impl RunState {
    pub fn finished(self) -> bool {
        matches!(self, RunState::Done | RunState::Cancelled | RunState::Failed)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Resuming => "resuming",
            RunState::Running => "running",
            RunState::Cancelling => "cancelling",
            RunState::Done => "done",
            RunState::Cancelled => "cancelled",
            RunState::Failed => "failed",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => RunState::Queued,
            "resuming" => RunState::Resuming,
            "running" => RunState::Running,
            "cancelling" => RunState::Cancelling,
            "done" => RunState::Done,
            "cancelled" => RunState::Cancelled,
            "failed" => RunState::Failed,
            _ => return None,
        })
    }
}

/// One run as `runs`, `status` and `watch` show it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    pub id: u64,
    pub owner: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_name: Option<String>,
    pub state: String,
    pub policy: String,
    pub n_jobs: u64,
    pub done: u64,
    pub given_up: u64,
    /// Jobs at sites now (submitting, idle, running, held, being removed).
    pub out: u64,
    /// Seconds on the run's clock.
    pub time: f64,
    /// Executions that had started and were removed before they ended, and
    /// the slot-seconds they had used (0 on healthy sites).
    #[serde(default)]
    pub cut_short: u64,
    #[serde(default)]
    pub cut_short_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Per site, in the run's site order (empty in `runs`).
    #[serde(default)]
    pub sites: Vec<SiteStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SiteStatus {
    pub name: String,
    /// Capacity found by the policy's search, if any.
    pub capacity: Option<f64>,
    pub class: String,
    /// Jobs the policy wants out there.
    pub window: u32,
    /// The fair-share cap on this run's jobs there (None: uncapped).
    pub fair_cap: Option<u64>,
    /// Jobs the policy wanted out but the fair share held back.
    pub held_back: u64,
    pub queued: u64,
    pub running: u64,
    pub held: u64,
    pub done: u64,
    /// Mean AgTime (queue wait + run time) of recent jobs, seconds.
    pub agtime: Option<f64>,
    /// Since when (the run's clock, like `time`) the site's schedd has not
    /// answered, and its last error; absent while it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_since: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_error: Option<String>,
    /// Each kind of job there, in a run of several kinds: its jobs running
    /// and done, their mean run time, its window and what was learned of it
    /// (the capacity found), as the run's summary shows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<crate::run::progress::KindSiteSummary>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_from_documented_json() {
        let e: Envelope = serde_json::from_str(r#"{"op":"cancel","run":7}"#).unwrap();
        assert_eq!(e, Envelope { request: Request::Cancel { run: 7 }, as_uid: None, version: None });
        let e: Envelope = serde_json::from_str(r#"{"op":"status","as_uid":1001}"#).unwrap();
        assert_eq!(e, Envelope { request: Request::Status { run: None }, as_uid: Some(1001), version: None });
        let e: Envelope = serde_json::from_str(r#"{"op":"runs"}"#).unwrap();
        assert_eq!(e.request, Request::Runs);
        assert!(serde_json::from_str::<Envelope>(r#"{"op":"explode"}"#).is_err());
        assert!(serde_json::from_str::<Envelope>(r#"{"op":"cancel"}"#).is_err());
    }

    #[test]
    fn a_submit_gives_one_description_or_kinds_whose_counts_make_n() {
        let kind = |name: &str, count| KindRequest {
            name: name.into(),
            count,
            job_path: format!("/h/{name}.sub"),
            job_sub: "queue\n".into(),
        };
        let one: Envelope = serde_json::from_str(
            r#"{"op":"submit","n_jobs":5,"sites_path":"/h/s","sites_toml":"","job_path":"/h/j.sub","job_sub":"queue\n"}"#,
        )
        .unwrap();
        let Request::Submit(mut r) = one.request else { panic!("a submit") };
        let single = r.run_kinds().unwrap();
        assert_eq!((single.len(), single[0].name.as_str(), single[0].count), (1, "job", 5));
        r.kinds = vec![kind("io", 2), kind("cpu", 3)];
        assert!(r.run_kinds().unwrap_err().contains("not both"));
        (r.job_path, r.job_sub) = (String::new(), String::new());
        assert_eq!(r.run_kinds().unwrap(), vec![kind("io", 2), kind("cpu", 3)]);
        r.n_jobs = 6;
        assert!(r.run_kinds().unwrap_err().contains("io=2, cpu=3"));
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("job_path\":\"\""), "an empty description is left out: {text}");
    }

    /// A tester's raw client sent `job_path: "rel.sub"` with a `cwd`: the
    /// `cwd` was never read, and the description's relative names resolved
    /// against the daemon's own working directory.
    #[test]
    fn a_submit_naming_a_file_by_a_relative_path_is_refused() {
        let line = |sites: &str, job: &str| {
            format!(
                r#"{{"op":"submit","n_jobs":5,"sites_path":"{sites}","sites_toml":"","job_path":"{job}","job_sub":"queue\n","cwd":"/h"}}"#
            )
        };
        let request = |text: String| match serde_json::from_str::<Envelope>(&text).unwrap().request {
            Request::Submit(r) => r,
            other => panic!("a submit, not {other:?}"),
        };
        let e = request(line("/h/sites.toml", "rel.sub")).run_kinds().unwrap_err();
        assert!(e.starts_with("\"rel.sub\": not an absolute path"), "{e}");
        assert!(e.ends_with("nothing was submitted"), "{e}");
        let e = request(line("s.toml", "./j.sub")).run_kinds().unwrap_err();
        assert!(e.starts_with("\"s.toml\", \"./j.sub\": "), "every one named: {e}");
        let mut r = request(line("/h/sites.toml", ""));
        r.job_sub.clear();
        r.kinds =
            vec![KindRequest { name: "io".into(), count: 5, job_path: "io.sub".into(), job_sub: "q".into() }];
        assert!(r.run_kinds().unwrap_err().starts_with("\"io.sub\": "), "a kind's too");
        assert!(
            request(line("/h/sites.toml", "/h/j.sub")).run_kinds().is_ok(),
            "an older client's cwd is ignored"
        );
    }

    #[test]
    fn a_warning_reads_as_cosched_submit_prints_it_without_its_level() {
        use crate::config::Problem;
        let p = Problem::warning(std::path::Path::new("/h/sites.toml"), Some((3, 1)), "site `a`: hmm")
            .with_hint("do this");
        assert_eq!(warning_text(&p), "/h/sites.toml:3:1: site `a`: hmm\n  hint: do this");
        let p = Problem::warning(std::path::Path::new("/h/j.sub"), None, "odd");
        assert_eq!(warning_text(&p), "/h/j.sub: odd");
    }

    #[test]
    fn resuming_is_a_state_of_its_own_and_not_finished() {
        assert_eq!(RunState::parse("resuming"), Some(RunState::Resuming));
        assert_eq!(RunState::Resuming.as_str(), "resuming");
        assert!(!RunState::Resuming.finished());
    }

    /// After an upgrade, a new client against the old daemon got "missing
    /// field `cwd`", with no word of versions.
    #[test]
    fn a_client_says_when_the_daemon_is_of_another_version() {
        assert_eq!(version_hint(Some("0.3.0 (abc)"), "0.3.0 (abc)"), None, "one version: nothing to add");
        let hint = version_hint(Some("0.2.0 (abc)"), "0.3.0 (def)").unwrap();
        assert_eq!(
            hint,
            "the daemon runs cosched 0.2.0 (abc) (this client is 0.3.0 (def)): restart it \
             (`systemctl restart cosched`) after an upgrade"
        );
        let hint = version_hint(None, "0.3.0 (def)").unwrap();
        assert!(
            hint.starts_with("the daemon runs an older cosched, which does not say its version"),
            "{hint}"
        );
        assert!(
            hint.contains("(this client is 0.3.0 (def))") && hint.contains("systemctl restart"),
            "{hint}"
        );
        let from_daemon: Response =
            serde_json::from_str(r#"{"ok":false,"error":"x","version":"9"}"#).unwrap();
        assert_eq!(from_daemon.version.as_deref(), Some("9"));
        let from_older: Response = serde_json::from_str(r#"{"ok":false,"error":"x"}"#).unwrap();
        assert_eq!(from_older.version, None);
    }

    /// The envelope of the daemons before `version`: they must read a new
    /// client's requests, which carry it.
    #[test]
    fn a_daemon_older_than_the_version_field_reads_requests_that_carry_it() {
        #[derive(Debug, Deserialize)]
        struct OlderEnvelope {
            #[serde(flatten)]
            request: Request,
            #[serde(default)]
            as_uid: Option<u32>,
        }
        let requests = [
            Request::Ping,
            Request::Runs,
            Request::Status { run: Some(3) },
            Request::Watch { run: 3 },
            Request::Submit(SubmitRequest {
                n_jobs: 2,
                sites_path: "/h/s.toml".into(),
                sites_toml: String::new(),
                job_path: "/h/j.sub".into(),
                job_sub: "queue\n".into(),
                kinds: Vec::new(),
                policy: None,
            }),
        ];
        for request in requests {
            let sent = Envelope { request: request.clone(), as_uid: Some(5), version: Some(VERSION.into()) };
            let line = serde_json::to_string(&sent).unwrap();
            assert!(
                line.contains(&format!("\"version\":{}", serde_json::to_string(VERSION).unwrap())),
                "{line}"
            );
            let read: OlderEnvelope = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!((read.request, read.as_uid), (request, Some(5)));
        }
    }

    fn unreadable(line: &str) -> String {
        let e = serde_json::from_str::<Envelope>(line).expect_err("a request this daemon cannot read");
        unreadable_request(line, &e)
    }

    #[test]
    fn a_request_the_daemon_cannot_read_is_answered_with_its_field_and_the_versions() {
        let other = r#"{"op":"submit","n_jobs":2,"sites_toml":"","version":"0.9.0 (abc)"}"#;
        let said = unreadable(other);
        assert!(said.starts_with("bad request: missing field `sites_path`"), "{said}");
        assert!(
            said.contains(&format!("the client is cosched 0.9.0 (abc) and this daemon cosched {VERSION}")),
            "{said}"
        );
        assert!(said.contains("a client of another version") && said.contains("systemctl restart"), "{said}");
        let older = unreadable(r#"{"op":"submit","n_jobs":"two","sites_path":"/h/s","sites_toml":""}"#);
        assert!(older.contains("(field `n_jobs`)"), "the field of a value of the wrong type: {older}");
        assert!(older.contains("the client did not say its version"), "{older}");
        let op = unreadable(r#"{"op":"explode"}"#);
        assert!(
            op.starts_with("bad request: unknown variant `explode`") && op.contains("(field `op`)"),
            "{op}"
        );
        let same = unreadable(&format!(r#"{{"op":"cancel","run":-1,"version":"{VERSION}"}}"#));
        assert!(same.contains("(field `run`)") && !same.contains("version"), "one version: {same}");
        let not_json = unreadable("ping");
        assert!(
            not_json.ends_with("send one JSON object per line") && !not_json.contains("version"),
            "{not_json}"
        );
    }

    #[test]
    fn responses_leave_out_absent_fields() {
        let r = Response { run: Some(3), ..Response::ok() };
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"ok":true,"run":3}"#);
        let r = Response::error("no such run 9");
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"ok":false,"error":"no such run 9"}"#);
    }
}
