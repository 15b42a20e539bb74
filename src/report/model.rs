//! From user-log events to one record per job: the shared input of the report
//! and of `cosched replay`.
//!
//! Kept apart from the parser's types on purpose: [`LogEvent`] holds only what
//! the report needs (code, job id, time, a few body facts), so the numbers can
//! be computed and tested on hand-made inputs, and [`from_userlog`] is the one
//! place that knows the parser's event bodies.

use crate::stats::{Effect, JobTimes};
use crate::userlog;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// The facts of one user-log event that the report uses.
#[derive(Clone, Debug, PartialEq)]
pub struct LogEvent {
    /// ULogEventNumber (000 submit, 001 execute, 005 terminated, …).
    pub code: u16,
    pub cluster: i64,
    pub proc: i64,
    pub subproc: i64,
    /// Naive seconds of the event's time stamp (see `userlog::Timestamp`).
    pub time: f64,
    /// 027 GridResource, or the host of a grid 001 (a GridResource string).
    pub grid_resource: Option<String>,
    /// 005: `Some(0)` for return value 0; other values fail the job.
    pub return_value: Option<i64>,
    /// 005: killed by this signal.
    pub signal: Option<i64>,
    /// 012 hold reason, 009 abort reason.
    pub reason: Option<String>,
    /// What the event does to its job's times (by typed body: an event
    /// whose body did not read counts for its job's existence only).
    pub effect: Effect,
}

impl LogEvent {
    /// A bare event (tests and the parser adapter fill in the rest).
    pub fn new(code: u16, cluster: i64, proc: i64, time: f64) -> Self {
        LogEvent {
            code,
            cluster,
            proc,
            subproc: 0,
            time,
            grid_resource: None,
            return_value: None,
            signal: None,
            reason: None,
            effect: Effect::of_code(code),
        }
    }
}

/// How a recorded job ended, as far as the log tells.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum JobEnd {
    /// 005 with return value 0.
    Success,
    /// 005 with a non-zero return value or a signal.
    Failed { detail: String },
    /// 009 after a 012: held and then removed.
    HeldRemoved { reason: String },
    /// 009 without a preceding hold.
    Removed,
    /// Still held when the log ends.
    Held { reason: String },
    /// The log ends before the job did.
    Unfinished,
}

impl JobEnd {
    /// Terminated (005) jobs have a turnaround; removed or unfinished ones do not.
    pub fn terminated(&self) -> bool {
        matches!(self, JobEnd::Success | JobEnd::Failed { .. })
    }
    pub fn label(&self) -> &'static str {
        match self {
            JobEnd::Success => "success",
            JobEnd::Failed { .. } => "failed",
            JobEnd::HeldRemoved { .. } => "held-removed",
            JobEnd::Removed => "removed",
            JobEnd::Held { .. } => "held",
            JobEnd::Unfinished => "unfinished",
        }
    }
}

/// One recorded job. Times are naive seconds, like [`LogEvent::time`].
/// Serialized for [`super::spill`] only, which keeps `site` apart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Index of the log file it came from.
    pub file: usize,
    pub cluster: i64,
    pub proc: i64,
    pub subproc: i64,
    /// The site's name: the GridResource, else the log file's name (shared
    /// by the jobs of a site: a million jobs need not hold a million copies).
    #[serde(skip)]
    pub site: Arc<str>,
    /// Whether `site` is a GridResource (not a log file name).
    pub grid: bool,
    /// 000. Jobs whose 000 is missing (log started late) take their first event.
    pub submitted: f64,
    /// First 001.
    pub started: Option<f64>,
    /// 005, or 009 for removed jobs.
    pub ended: Option<f64>,
    /// First 012, when the job was held.
    pub held_at: Option<f64>,
    pub end: JobEnd,
    /// Wall time spent running (sum over 001→004/005/009/012 intervals).
    pub running_seconds: f64,
    /// Running intervals `[start, stop)`; `stop` is `None` while running at the end of the log.
    pub runs: Vec<(f64, Option<f64>)>,
    /// The job's times as [`crate::stats`] defines them: its queue wait,
    /// run time, turnaround and outcome in every figure of the report.
    /// `end` says in what state the log leaves the job (its last word).
    pub times: JobTimes,
    /// The last 005 said return value 0.
    pub exit_ok: bool,
}

impl JobRecord {
    /// [`JobTimes::turnaround`].
    pub fn turnaround(&self) -> Option<f64> {
        self.times.turnaround()
    }
    /// [`JobTimes::queue_wait`].
    pub fn queue_wait(&self) -> Option<f64> {
        self.times.queue_wait()
    }
    /// [`JobTimes::run_time`].
    pub fn run_time(&self) -> Option<f64> {
        self.times.run_time()
    }
    /// The slot-seconds of an execution cut short: the job was removed
    /// (009, not after a hold, which had already freed the slot) while it
    /// ran, from its last start to the removal. The rule of the run's own
    /// summary and `cosched status` (`run::progress`), applied to the same
    /// user-log events, so the three agree (also where the gridmanager
    /// wrote a start after the removal it preceded: the run counts it as
    /// the log in time order does), with one exception: a Condor-C
    /// job running at the remote schedd when cosched removed it, before the
    /// local log heard of its start, is cut short for the run (which learns
    /// of the start from the remote `condor_q`) but has no 001 here; a run's
    /// own report adds those ([`crate::report::metrics::add_cut_short_unseen_in_logs`]).
    pub fn cut_short_seconds(&self) -> Option<f64> {
        if self.end != JobEnd::Removed {
            return None;
        }
        let &(start, _) = self.runs.last()?;
        Some((self.ended? - start).max(0.0))
    }
    /// It terminated (005) with return value 0: one of the attempts a
    /// site's means are of ([`crate::stats::SiteMeans`]).
    pub fn succeeded(&self) -> bool {
        self.times.outcome() == crate::stats::Outcome::Completed && self.exit_ok
    }
    pub fn id(&self) -> String {
        format!("{}.{}", self.cluster, self.proc)
    }
}

/// Which of a report's jobs to visit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Part<'a> {
    All,
    /// The jobs shown under this site ([`JobRecord::site`]).
    Site(&'a str),
    /// The jobs of log number `.0` ([`JobRecord::file`]).
    Log(usize),
}

impl Part<'_> {
    pub fn holds(&self, job: &JobRecord) -> bool {
        match *self {
            Part::All => true,
            Part::Site(name) => *job.site == *name,
            Part::Log(log) => job.file == log,
        }
    }
}

/// The job records a report is computed from, in their order: log by log,
/// each log's jobs in order of first appearance. The report computes its
/// figures in passes over a part at a time, so that the records need not be
/// in memory ([`super::spill::Spill`] keeps them on disk).
pub trait Jobs {
    /// Visits the jobs of `part`, in order.
    fn visit(&self, part: Part<'_>, f: &mut dyn FnMut(&JobRecord));
}

impl Jobs for Vec<JobRecord> {
    fn visit(&self, part: Part<'_>, f: &mut dyn FnMut(&JobRecord)) {
        self.iter().filter(|j| part.holds(j)).for_each(f);
    }
}

/// What the scheduling policy of a cosched run decided about its sites, to
/// be drawn over what the logs show. Logs cosched did not write have none.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunDecisions {
    /// Naive seconds (as [`LogEvent::time`]) of run time 0: a decision at run
    /// time `t` happened at `epoch_naive + t` on the logs' clock.
    pub epoch_naive: f64,
    pub sites: Vec<SiteDecisions>,
}

impl RunDecisions {
    /// The run's start on the logs' clock (naive seconds), for a cosched
    /// run (one with sites); `None` for logs alone.
    pub fn start(&self) -> Option<f64> {
        (!self.sites.is_empty()).then_some(self.epoch_naive)
    }
}

/// One site's decisions and the log of its jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteDecisions {
    /// The site's name in the run (its `[[site]]` name).
    pub site: String,
    /// Index of the site's user log among the report's logs.
    pub log: usize,
    /// Times in run seconds (see [`RunDecisions::epoch_naive`]).
    pub decisions: Vec<crate::policy::Decision>,
    /// Executions the run itself counted cut short at the site, and their
    /// slot-seconds (`run::progress`), where it kept a tally. It can exceed
    /// what the log shows: see [`JobRecord::cut_short_seconds`].
    pub cut_short: Option<(u64, f64)>,
    /// The kind of job of each cluster the run submitted at the site (a
    /// batch holds one kind); empty in a run of one kind.
    pub kinds: std::collections::BTreeMap<i64, String>,
}

/// Turns the events of several logs into job records, in (file, first
/// appearance) order. `files[i]` names log `i` (the site name of its jobs when
/// they carry no GridResource).
pub fn jobs_from_events(files: &[(String, Vec<LogEvent>)]) -> Vec<JobRecord> {
    let mut out = Vec::new();
    let mut names = SiteNames::default();
    for (file_index, (file_name, events)) in files.iter().enumerate() {
        let mut order: Vec<(i64, i64, i64)> = Vec::new();
        let mut by_job: BTreeMap<(i64, i64, i64), Vec<&LogEvent>> = BTreeMap::new();
        for ev in events {
            let key = (ev.cluster, ev.proc, ev.subproc);
            let list = by_job.entry(key).or_default();
            if list.is_empty() {
                order.push(key);
            }
            list.push(ev);
        }
        for key in order {
            let evs = by_job.remove(&key).unwrap_or_default();
            let file_name = names.get(file_name);
            out.extend(job_from_events(file_index, &file_name, evs, &mut names));
        }
    }
    out
}

/// One job's record from all its events (in any order).
fn job_from_events(
    file: usize,
    file_name: &Arc<str>,
    evs: Vec<&LogEvent>,
    names: &mut SiteNames,
) -> Option<JobRecord> {
    let (mut job, state) = fold_in_time_order(file, file_name, evs, names)?;
    finish(&mut job, state);
    Some(job)
}

fn fold_in_time_order(
    file: usize,
    file_name: &Arc<str>,
    mut evs: Vec<&LogEvent>,
    names: &mut SiteNames,
) -> Option<(JobRecord, FoldState)> {
    // Events of one job are in time order in a log; a stable sort keeps
    // the written order for equal stamps.
    evs.sort_by(|a, b| a.time.total_cmp(&b.time));
    let (first, rest) = evs.split_first()?;
    let (mut job, mut state) = start(file, file_name, first, names);
    for ev in rest {
        apply(&mut job, &mut state, ev, names);
    }
    Some((job, state))
}

/// Site names, each held once.
#[derive(Debug, Default)]
struct SiteNames(HashSet<Arc<str>>);

impl SiteNames {
    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(known) = self.0.get(name) {
            return known.clone();
        }
        let name: Arc<str> = name.into();
        self.0.insert(name.clone());
        name
    }
}

/// What folding a job's events needs besides its record. Small, because the
/// streaming reader keeps one per job while a log is read.
#[derive(Clone, Debug)]
struct FoldState {
    /// Time of the last event applied (to notice events out of order).
    last_time: f64,
    /// A 000 has been applied (`submitted` is its time, not the first event's).
    submit_seen: bool,
    /// Rarely needed: most jobs are never held, and grid jobs log their 027
    /// before their 001.
    rare: Option<Box<RareState>>,
}

#[derive(Clone, Debug, Default)]
struct RareState {
    /// The GridResource of the first grid 001 while no 027 named the site.
    grid_from_execute: Option<Arc<str>>,
    /// Why the job was last held.
    hold_reason: Option<String>,
}

/// A job's record from its first event (in time order). [`start`], [`apply`]
/// and [`finish`] are the one place that says what each event does to a
/// job: [`jobs_from_events`] and [`LogJobs`] both fold with them.
fn start(
    file: usize,
    file_name: &Arc<str>,
    first: &LogEvent,
    names: &mut SiteNames,
) -> (JobRecord, FoldState) {
    let mut job = JobRecord {
        file,
        cluster: first.cluster,
        proc: first.proc,
        subproc: first.subproc,
        site: file_name.clone(),
        grid: false,
        // Jobs whose 000 is missing (log started late) take their first event.
        submitted: first.time,
        started: None,
        ended: None,
        held_at: None,
        end: JobEnd::Unfinished,
        running_seconds: 0.0,
        runs: Vec::new(),
        times: JobTimes::default(),
        exit_ok: false,
    };
    let mut state = FoldState { last_time: first.time, submit_seen: false, rare: None };
    apply(&mut job, &mut state, first, names);
    (job, state)
}

/// Applies the job's next event (in time order).
fn apply(job: &mut JobRecord, state: &mut FoldState, ev: &LogEvent, names: &mut SiteNames) {
    state.last_time = ev.time;
    job.times.apply(ev.effect, ev.time);
    match ev.code {
        0 if !state.submit_seen => {
            job.submitted = ev.time;
            state.submit_seen = true;
        }
        27 => {
            if let Some(g) = &ev.grid_resource {
                if !job.grid {
                    job.site = names.get(g);
                    job.grid = true;
                }
            }
        }
        1 => {
            if job.started.is_none() {
                job.started = Some(ev.time);
            }
            // Only used when no 027 names the site, which a 027 that came
            // first already did.
            if let (Some(g), false) = (&ev.grid_resource, job.grid) {
                let rare = state.rare.get_or_insert_with(Box::default);
                rare.grid_from_execute.get_or_insert_with(|| names.get(g));
            }
            if !matches!(job.runs.last(), Some((_, None))) {
                // Most jobs run once: no room for four runs.
                job.runs.reserve_exact(1);
                job.runs.push((ev.time, None));
            }
        }
        4 | 5 | 9 | 12 => {
            if let Some((_, stop @ None)) = job.runs.last_mut() {
                *stop = Some(ev.time);
            }
            match ev.code {
                5 => {
                    job.ended = Some(ev.time);
                    job.end = match (ev.return_value, ev.signal) {
                        (Some(0), None) => JobEnd::Success,
                        (_, Some(sig)) => JobEnd::Failed { detail: format!("signal {sig}") },
                        (Some(rv), None) => JobEnd::Failed { detail: format!("exit {rv}") },
                        (None, None) => JobEnd::Failed { detail: "unknown termination".into() },
                    };
                    job.exit_ok = job.end == JobEnd::Success;
                }
                9 => {
                    job.ended = Some(ev.time);
                    job.end = match state.rare.as_ref().and_then(|r| r.hold_reason.as_ref()) {
                        Some(r) => JobEnd::HeldRemoved { reason: r.clone() },
                        None => JobEnd::Removed,
                    };
                }
                12 => {
                    job.held_at.get_or_insert(ev.time);
                    let reason = ev.reason.clone().unwrap_or_else(|| "unspecified".into());
                    job.end = JobEnd::Held { reason: reason.clone() };
                    state.rare.get_or_insert_with(Box::default).hold_reason = Some(reason);
                }
                _ => {}
            }
        }
        13 => {
            // Released: the job is queued again.
            if matches!(job.end, JobEnd::Held { .. }) {
                job.end = JobEnd::Unfinished;
            }
        }
        _ => {}
    }
}

/// Completes a record once all its events are applied.
fn finish(job: &mut JobRecord, state: FoldState) {
    if !job.grid {
        if let Some(g) = state.rare.and_then(|r| r.grid_from_execute) {
            job.site = g;
            job.grid = true;
        }
    }
    job.running_seconds = job.runs.iter().filter_map(|&(a, b)| b.map(|b| (b - a).max(0.0))).sum();
}

/// The jobs of one log, built as its events are read: what
/// [`jobs_from_events`] gives for that log, without holding the events.
///
/// Memory is one record per job (O(jobs), not O(events); what that costs
/// at 10^6 jobs is in BENCHMARKS.md, "Memory at scale"). A job whose
/// events come out of time order (none do in HTCondor's own logs) cannot be
/// folded as they come, since the record must follow time order: such jobs
/// are listed by [`LogJobs::out_of_order`] and rebuilt from their events
/// ([`LogJobs::rebuild`]), which the caller reads again.
#[derive(Debug)]
pub struct LogJobs {
    file: usize,
    file_name: Arc<str>,
    names: SiteNames,
    /// In order of first appearance.
    jobs: Vec<JobRecord>,
    /// `states[i]` folds `jobs[i]`.
    states: Vec<FoldState>,
    index: JobIndex,
    /// Jobs that had an event earlier than one before it, by key.
    out_of_order: BTreeSet<(i64, i64, i64)>,
}

impl LogJobs {
    /// The jobs of log number `file`, called `file_name`.
    pub fn new(file: usize, file_name: &str) -> Self {
        let mut names = SiteNames::default();
        LogJobs {
            file,
            file_name: names.get(file_name),
            names,
            jobs: Vec::new(),
            states: Vec::new(),
            index: JobIndex::default(),
            out_of_order: BTreeSet::new(),
        }
    }

    /// Folds the log's next event.
    pub fn add(&mut self, ev: &LogEvent) {
        let key = (ev.cluster, ev.proc, ev.subproc);
        match self.index.get(key) {
            Some(at) => {
                let state = &mut self.states[at];
                if ev.time < state.last_time {
                    self.out_of_order.insert(key);
                }
                apply(&mut self.jobs[at], state, ev, &mut self.names);
            }
            None => {
                self.index.insert(key, self.jobs.len());
                let (job, state) = start(self.file, &self.file_name, ev, &mut self.names);
                self.jobs.push(job);
                self.states.push(state);
            }
        }
    }

    /// The jobs whose events were not in time order.
    pub fn out_of_order(&self) -> &BTreeSet<(i64, i64, i64)> {
        &self.out_of_order
    }

    /// Rebuilds the out-of-order jobs from all their events (`events` holds
    /// them, and possibly events of other jobs, which are ignored).
    pub fn rebuild(&mut self, events: &[LogEvent]) {
        let mut by_job: BTreeMap<(i64, i64, i64), Vec<&LogEvent>> = BTreeMap::new();
        for ev in events {
            let key = (ev.cluster, ev.proc, ev.subproc);
            if self.out_of_order.contains(&key) {
                by_job.entry(key).or_default().push(ev);
            }
        }
        for (key, evs) in by_job {
            if let (Some(at), Some((job, state))) =
                (self.index.get(key), fold_in_time_order(self.file, &self.file_name, evs, &mut self.names))
            {
                self.jobs[at] = job;
                self.states[at] = state;
            }
        }
        self.out_of_order.clear();
    }

    /// The records, in order of first appearance.
    pub fn finish(self) -> Vec<JobRecord> {
        let LogJobs { mut jobs, states, index, .. } = self;
        drop(index);
        for (job, state) in jobs.iter_mut().zip(states) {
            finish(job, state);
        }
        jobs.shrink_to_fit();
        jobs
    }
}

/// Where each job's record is, by (cluster, proc, subproc): 4 bytes a job.
/// HTCondor numbers a cluster's procs 0, 1, 2…, so each cluster keeps an
/// array indexed by proc; other ids (subprocs, negative or far-off procs) go
/// to a map.
#[derive(Debug, Default)]
struct JobIndex {
    clusters: HashMap<i64, Vec<u32>>,
    /// The cluster of the last look-up and its array (most events follow
    /// one of their own cluster).
    last: Option<(i64, Vec<u32>)>,
    other: HashMap<(i64, i64, i64), usize>,
}

/// No job at this proc.
const NO_JOB: u32 = u32::MAX;

impl JobIndex {
    /// The array of `cluster`, made the current one.
    fn procs(&mut self, cluster: i64) -> &mut Vec<u32> {
        if self.last.as_ref().is_none_or(|(c, _)| *c != cluster) {
            let procs = self.clusters.remove(&cluster).unwrap_or_default();
            if let Some((c, old)) = self.last.replace((cluster, procs)) {
                self.clusters.insert(c, old);
            }
        }
        &mut self.last.as_mut().expect("just set").1
    }

    fn get(&mut self, (cluster, proc, subproc): (i64, i64, i64)) -> Option<usize> {
        if subproc == 0 {
            if let Ok(p) = usize::try_from(proc) {
                if let Some(&at) = self.procs(cluster).get(p) {
                    if at != NO_JOB {
                        return Some(at as usize);
                    }
                }
            }
        }
        self.other.get(&(cluster, proc, subproc)).copied()
    }

    fn insert(&mut self, (cluster, proc, subproc): (i64, i64, i64), at: usize) {
        if let (0, Ok(p), Ok(at32)) = (subproc, usize::try_from(proc), u32::try_from(at)) {
            let procs = self.procs(cluster);
            // A stray huge proc number must not allocate megabytes.
            if at32 != NO_JOB && p <= 2 * procs.len() + 16_384 {
                if p >= procs.len() {
                    procs.resize(p + 1, NO_JOB);
                }
                procs[p] = at32;
                return;
            }
        }
        self.other.insert((cluster, proc, subproc), at);
    }
}

/// The adapter from the parser's events. The only code here that knows
/// [`userlog::EventBody`].
pub fn from_userlog(ev: &userlog::Event) -> LogEvent {
    let mut out = LogEvent::new(ev.code, ev.cluster, ev.proc, ev.time.naive_seconds());
    out.subproc = ev.subproc;
    out.effect = userlog::stats::effect(&ev.body);
    use userlog::EventBody as B;
    match &ev.body {
        B::GridSubmit { resource, .. } if !resource.is_empty() => out.grid_resource = Some(resource.clone()),
        // Grid jobs name the GridResource; vanilla jobs a sinful `<…>`.
        B::Execute { host, .. } if !host.is_empty() && !host.starts_with('<') => {
            out.grid_resource = Some(host.clone())
        }
        B::Terminated { return_value, signal, normal, .. } => {
            out.return_value = *return_value;
            out.signal = if *normal { None } else { signal.or(Some(0)) };
        }
        B::Held { reason, .. } => out.reason = Some(reason.clone()).filter(|r| !r.is_empty()),
        B::Aborted { reason } => out.reason = reason.clone(),
        B::Other { text, body } => apply_text(&mut out, text, body),
        _ => {}
    }
    out
}

/// Reads the few facts the report needs from an event's header text and body
/// lines (the HTCondor text forms of htcondor-facts.md).
fn apply_text(out: &mut LogEvent, text: &str, body: &str) {
    match out.code {
        27 => {
            out.grid_resource = body
                .lines()
                .find_map(|l| l.trim().strip_prefix("GridResource:"))
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
        }
        1 => {
            // Grid jobs name the GridResource; vanilla jobs a sinful `<…>`.
            let host = text.trim().strip_prefix("Job executing on host:").map(str::trim);
            out.grid_resource = host.filter(|h| !h.is_empty() && !h.starts_with('<')).map(str::to_string);
        }
        5 => {
            for line in body.lines() {
                let line = line.trim();
                if let Some(rest) = line.split("Normal termination (return value ").nth(1) {
                    out.return_value = rest.trim_end_matches(')').trim().parse().ok();
                } else if let Some(rest) = line.split("Abnormal termination (signal ").nth(1) {
                    out.signal = rest.trim_end_matches(')').trim().parse().ok();
                }
            }
        }
        12 | 9 => {
            out.reason = body
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with("Code "))
                .map(str::to_string);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(code: u16, proc: i64, time: f64) -> LogEvent {
        LogEvent::new(code, 1, proc, time)
    }

    #[test]
    fn a_job_gets_its_times_site_and_outcome() {
        let mut grid = ev(27, 0, 5.0);
        grid.grid_resource = Some("condor ce ce:9619".into());
        let mut end = ev(5, 0, 50.0);
        end.return_value = Some(0);
        let files = vec![("a.log".to_string(), vec![ev(0, 0, 0.0), grid, ev(1, 0, 10.0), end])];
        let jobs = jobs_from_events(&files);
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!(&*j.site, "condor ce ce:9619");
        assert_eq!(j.turnaround(), Some(50.0));
        assert_eq!(j.queue_wait(), Some(10.0));
        assert_eq!(j.run_time(), Some(40.0));
        assert_eq!(j.running_seconds, 40.0);
        assert_eq!(j.end, JobEnd::Success);
    }

    #[test]
    fn vanilla_jobs_take_the_file_name_and_failures_are_classified() {
        let mut end = ev(5, 0, 9.0);
        end.return_value = Some(3);
        let mut killed = ev(5, 1, 9.0);
        killed.signal = Some(9);
        let mut held = ev(12, 2, 4.0);
        held.reason = Some("disk full".into());
        let files = vec![(
            "pool.log".to_string(),
            vec![
                ev(0, 0, 0.0),
                ev(0, 1, 0.0),
                ev(0, 2, 0.0),
                ev(1, 0, 1.0),
                ev(1, 2, 2.0),
                end,
                killed,
                held,
                ev(9, 2, 8.0),
            ],
        )];
        let jobs = jobs_from_events(&files);
        assert_eq!(jobs.iter().map(|j| &*j.site).collect::<Vec<_>>(), ["pool.log"; 3]);
        assert_eq!(jobs[0].end, JobEnd::Failed { detail: "exit 3".into() });
        assert_eq!(jobs[1].end, JobEnd::Failed { detail: "signal 9".into() });
        assert_eq!(jobs[1].run_time(), None, "never seen starting");
        assert_eq!(jobs[1].turnaround(), Some(9.0));
        assert_eq!(jobs[2].end, JobEnd::HeldRemoved { reason: "disk full".into() });
        assert_eq!(jobs[2].turnaround(), None);
        assert_eq!(jobs[2].running_seconds, 2.0);
    }

    #[test]
    fn body_text_gives_grid_resource_exit_and_reason() {
        let mut e = LogEvent::new(27, 1, 0, 0.0);
        apply_text(
            &mut e,
            "Job submitted to grid resource",
            "    GridResource: condor personal@vm 127.0.0.1:9618\n    GridJobId: condor x 36.0\n",
        );
        assert_eq!(e.grid_resource.as_deref(), Some("condor personal@vm 127.0.0.1:9618"));
        let mut e = LogEvent::new(1, 1, 0, 0.0);
        apply_text(&mut e, "Job executing on host: <127.0.0.1:1?a=b>", "");
        assert_eq!(e.grid_resource, None);
        let mut e = LogEvent::new(5, 1, 0, 0.0);
        apply_text(&mut e, "Job terminated.", "\t(1) Normal termination (return value 3)\n");
        assert_eq!(e.return_value, Some(3));
        let mut e = LogEvent::new(12, 1, 0, 0.0);
        apply_text(&mut e, "Job was held.", "\tError from slot: boom\n\tCode 6 Subcode 2\n");
        assert_eq!(e.reason.as_deref(), Some("Error from slot: boom"));
    }
}
