//! `cosched replay LOG… --sites sites.toml`: what would cosched have decided?
//!
//! Trace-driven simulation through the real engine. The recorded jobs of each
//! site become a queue of samples (queue wait, run time, outcome, hold
//! reason); a [`ReplaySite`] implements [`SiteBackend`] in tokio's paused
//! clock and, when the policy submits k jobs to a site, gives them the next k
//! samples of that site and reports their starts, ends and holds at the
//! sampled delays. When the policy submits more jobs to a site than were
//! recorded there, the samples are reused from the first one again (cycling);
//! a site with no usable sample never starts anything (like a dead site).
//!
//! `--policy` defaults to the `[policy]` of sites.toml (whose default is
//! `adaptive`).
//!
//! Log sites map to the sites of sites.toml by the exact GridResource string;
//! grid jobs whose GridResource matches no site go to the site with the log's
//! index (log i → site i mod n); jobs of a vanilla pool (no GridResource) go to
//! the first site. N is the number of distinct recorded jobs.
//!
//! The output is one line per decision (the policy's own `why`) and one per
//! change of a site's window, capacity or class. Same input, same output:
//! virtual time, one thread, and the engine's `biased` selects.
//!
//! Bounded: the engine's time per virtual day is small but not nothing, so
//! a replay's virtual time is bounded. A recorded job that took longer than
//! [`MAX_JOB_SECONDS`] (a mis-dated stamp, a typo'd year: the log's own
//! span) is left out, with a note; the horizon a replay that cannot finish
//! stops at is at most [`MAX_HORIZON_SECONDS`].

use crate::config::SitesFile;
use crate::engine::{
    self, Ending, EngineOptions, Observer, RunClock, SiteBackend, TraceEntry, TraceRecorder,
};
use crate::policy::{
    self, Action, JobId, Outcome, Policy, PolicyConfig, SiteClass, SiteEvent, SiteId, SiteView, Time,
};
use crate::report::model::{JobEnd, JobRecord};
use crate::{CmdResult, Exit, Failure};
use clap::Args;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Recorded HTCondor user logs (any, also ones cosched did not write).
    #[arg(required = true)]
    pub logs: Vec<PathBuf>,
    /// The sites to replay on; log sites map to them by grid_resource, else
    /// by log order; a vanilla pool's jobs go to the first site.
    #[arg(long)]
    pub sites: PathBuf,
    /// The policy to replay (one listed below that needs no simulator);
    /// overrides [policy] name in sites.toml (whose default is adaptive).
    #[arg(long)]
    pub policy: Option<String>,
    /// Print decisions as JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// Longest recorded job (submission to end or hold) a replay takes as a
/// sample: longer ones are taken for mis-dated stamps and left out.
pub const MAX_JOB_SECONDS: f64 = 30.0 * 86400.0;

/// Longest virtual time a replay runs (about half a minute of the engine's
/// time): one that has not settled by then stops as a hang.
pub const MAX_HORIZON_SECONDS: f64 = 180.0 * 86400.0;

/// What happened to one recorded job, as delays from its submission.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Seconds from submission to the first start, if it was seen starting.
    pub start_after: Option<f64>,
    /// Seconds from submission to the end, hold or removal.
    pub end_after: f64,
    pub end: SampleEnd,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SampleEnd {
    Ended(Outcome),
    /// Put on hold; it stays at the site until the policy removes it.
    Held {
        reason: String,
    },
    /// Left the queue without finishing (009 without a hold).
    Removed,
}

impl Sample {
    /// The sample of a recorded job; `None` for jobs the log does not
    /// finish, and for jobs whose times go backwards (which the reader
    /// reports): a negative delay is no delay.
    pub fn of(job: &JobRecord) -> Option<Sample> {
        if !job.times.backwards().is_empty() {
            return None;
        }
        let start_after = job.queue_wait();
        let after = |t: f64| {
            let delay = t - job.submitted;
            (delay >= 0.0).then(|| delay.max(start_after.unwrap_or(0.0)))
        };
        let (end_after, end) = match &job.end {
            JobEnd::Success => (after(job.ended?)?, SampleEnd::Ended(Outcome::Success)),
            JobEnd::Failed { detail } => {
                (after(job.ended?)?, SampleEnd::Ended(Outcome::Failed { detail: detail.clone() }))
            }
            JobEnd::Held { reason } | JobEnd::HeldRemoved { reason } => {
                (after(job.held_at?)?, SampleEnd::Held { reason: reason.clone() })
            }
            JobEnd::Removed => (after(job.ended?)?, SampleEnd::Removed),
            JobEnd::Unfinished => return None,
        };
        Some(Sample { start_after, end_after, end })
    }
}

/// The site index (in sites.toml order) of each recorded job.
pub fn map_sites(jobs: &[JobRecord], sites: &SitesFile) -> Vec<usize> {
    let n = sites.sites.len().max(1);
    jobs.iter()
        .map(|job| {
            if !job.grid {
                return 0;
            }
            sites
                .sites
                .iter()
                .position(|s| s.grid_resource.as_ref().is_some_and(|g| g.raw == *job.site))
                .unwrap_or(job.file % n)
        })
        .collect()
}

/// A site of the replay: hands out recorded samples in virtual time.
pub struct ReplaySite {
    samples: Vec<Sample>,
    next_sample: usize,
    clock: RunClock,
    /// Events to report, by (time, sequence) so that equal times keep order.
    pending: BTreeMap<(u64, u64), SiteEvent>,
    seq: u64,
    /// Jobs out here (submitted, not ended or removed).
    out: BTreeSet<JobId>,
}

/// Sort key of a non-negative time: the bits of a non-negative f64 order like the number.
fn time_key(t: f64) -> u64 {
    t.max(0.0).to_bits()
}

impl ReplaySite {
    pub fn new(samples: Vec<Sample>, clock: RunClock) -> Self {
        ReplaySite { samples, next_sample: 0, clock, pending: BTreeMap::new(), seq: 0, out: BTreeSet::new() }
    }

    fn schedule(&mut self, at: f64, event: SiteEvent) {
        self.seq += 1;
        self.pending.insert((time_key(at), self.seq), event);
    }
}

fn event_job(event: &SiteEvent) -> Option<JobId> {
    match event {
        SiteEvent::Started { job, .. }
        | SiteEvent::Ended { job, .. }
        | SiteEvent::Held { job, .. }
        | SiteEvent::Removed { job, .. }
        | SiteEvent::WithdrawDeclined { job, .. }
        | SiteEvent::ResourceDown { job, .. }
        | SiteEvent::ResourceUp { job, .. } => Some(*job),
        SiteEvent::Submitted { .. } | SiteEvent::SubmitFailed { .. } => None,
    }
}

impl SiteBackend for ReplaySite {
    async fn submit(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        let now = self.clock.now();
        for &job in &jobs {
            self.out.insert(job);
            if self.samples.is_empty() {
                continue;
            }
            let sample = self.samples[self.next_sample % self.samples.len()].clone();
            self.next_sample += 1;
            if let Some(s) = sample.start_after {
                self.schedule(now + s, SiteEvent::Started { job, at: now + s });
            }
            let at = now + sample.end_after;
            let event = match sample.end {
                SampleEnd::Ended(outcome) => SiteEvent::Ended { job, at, outcome },
                // Samples are dealt to jobs in turn: a recorded hold is a
                // fact of the site's sample, not of this job there, so it
                // bars nothing and counts as a failed attempt.
                SampleEnd::Held { reason } => {
                    SiteEvent::Held { job, at, reason, cause: crate::policy::HoldCause::Unknown }
                }
                SampleEnd::Removed => SiteEvent::Removed { job, at },
            };
            self.schedule(at, event);
        }
        vec![SiteEvent::Submitted { jobs, at: now }]
    }

    async fn remove(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        let now = self.clock.now();
        let gone: BTreeSet<JobId> = jobs.into_iter().filter(|j| self.out.remove(j)).collect();
        self.pending.retain(|_, ev| event_job(ev).is_none_or(|j| !gone.contains(&j)));
        gone.into_iter().map(|job| SiteEvent::Removed { job, at: now }).collect()
    }

    /// Every start due by now has been delivered (events go out in time
    /// order), so a job the policy believes idle has not started: removing
    /// it is what HTCondor would do.
    async fn withdraw(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        self.remove(jobs).await
    }

    async fn next_events(&mut self) -> Vec<SiteEvent> {
        loop {
            let Some((&(key, _), _)) = self.pending.first_key_value() else {
                // Nothing scheduled; the engine drops this future when a command comes.
                std::future::pending::<()>().await;
                continue;
            };
            let t = f64::from_bits(key);
            tokio::time::sleep_until(self.clock.instant_at(t)).await;
            // Take everything due at `t`, only now: a dropped sleep loses nothing.
            let mut events = Vec::new();
            while let Some(entry) = self.pending.first_entry() {
                if entry.key().0 > key {
                    break;
                }
                let ev = entry.remove();
                if matches!(ev, SiteEvent::Ended { .. } | SiteEvent::Removed { .. }) {
                    if let Some(job) = event_job(&ev) {
                        self.out.remove(&job);
                    }
                }
                events.push(ev);
            }
            if !events.is_empty() {
                return events;
            }
        }
    }
}

/// One line of the replay's output.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ReplayLine {
    /// A decision of the policy.
    Decision { t: Time, site: Option<String>, action: &'static str, jobs: usize, why: String },
    /// The policy's view of a site changed (window, capacity or class).
    View {
        t: Time,
        site: String,
        window: u32,
        capacity: Option<f64>,
        class: String,
        agtime: Option<f64>,
        /// What changed, for people: `window 4→8, class -→fast`.
        change: String,
    },
}

impl ReplayLine {
    /// The text form: `t=  123s site=NAME submit 4 jobs — why`.
    pub fn text(&self) -> String {
        match self {
            ReplayLine::Decision { t, site, action, jobs, why } => {
                let what = if *action == "give-up" {
                    "give up 1 job".to_string()
                } else {
                    format!("{action} {jobs} job{}", if *jobs == 1 { "" } else { "s" })
                };
                format!("t={t:>6.0}s site={} {what} — {why}", site.as_deref().unwrap_or("-"))
            }
            ReplayLine::View { t, site, change, agtime, .. } => {
                let ag = agtime.map_or(String::new(), |a| format!(" (mean AgTime {a:.0}s)"));
                format!("t={t:>6.0}s site={site} view {change}{ag}")
            }
        }
    }
}

fn fmt_capacity(c: Option<f64>) -> String {
    c.map_or("-".into(), |c| format!("{c:.1}"))
}

/// Records decisions (through [`TraceRecorder`]) and changes of site views.
struct ReplayObserver {
    names: Vec<String>,
    trace: TraceRecorder,
    views: Vec<SiteView>,
    lines: Vec<ReplayLine>,
}

impl ReplayObserver {
    fn decision(&self, e: &TraceEntry) -> ReplayLine {
        ReplayLine::Decision {
            t: e.time,
            site: e.site.map(|s| self.names.get(s.index()).cloned().unwrap_or_else(|| s.to_string())),
            action: e.action,
            jobs: e.jobs,
            why: e.why.clone(),
        }
    }

    fn compare_views(&mut self, now: Time, policy: &dyn Policy) {
        for (i, old) in self.views.iter_mut().enumerate() {
            let new = policy.site_view(SiteId(i as u32));
            let mut changes = Vec::new();
            if new.window != old.window {
                changes.push(format!("window {}→{}", old.window, new.window));
            }
            if new.capacity != old.capacity {
                changes.push(format!(
                    "capacity {}→{}",
                    fmt_capacity(old.capacity),
                    fmt_capacity(new.capacity)
                ));
            }
            if new.class != old.class {
                changes.push(format!("class {}→{}", old.class, new.class));
            }
            if !changes.is_empty() {
                self.lines.push(ReplayLine::View {
                    t: now,
                    site: self.names[i].clone(),
                    window: new.window,
                    capacity: new.capacity,
                    class: class_name(new.class),
                    agtime: new.agtime,
                    change: changes.join(", "),
                });
            }
            *old = new;
        }
    }
}

fn class_name(c: SiteClass) -> String {
    match c {
        SiteClass::Unknown => "unknown".into(),
        other => other.to_string(),
    }
}

impl Observer for ReplayObserver {
    fn action(&mut self, now: Time, action: &Action) {
        self.trace.action(now, action);
        if let Some(entry) = self.trace.entries.last() {
            let line = self.decision(entry);
            self.lines.push(line);
        }
    }
    fn progress(&mut self, now: Time, policy: &dyn Policy) {
        self.compare_views(now, policy);
    }
    fn finished(&mut self, now: Time, policy: &dyn Policy, _ending: Ending) {
        self.compare_views(now, policy);
    }
}

/// The result of a replay.
#[derive(Clone, Debug)]
pub struct ReplayOutput {
    /// `#` lines for people: the mapping of log sites to sites, N, samples.
    pub header: Vec<String>,
    pub lines: Vec<ReplayLine>,
    /// The closing `#` line: how the replay ended.
    pub footer: String,
    pub ending: Ending,
    /// What of the input was not used, for `--json` (the text has it in
    /// `header`) and the exit code.
    pub input: InputNotes,
}

/// What of the recorded input a replay did not use; the last line of
/// `--json` (`"kind": "input"`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputNotes {
    /// Problems the log reader reported (malformed blocks, jobs whose times
    /// go backwards), each a warning on stderr.
    pub log_problems: usize,
    /// Jobs left out as longer than [`MAX_JOB_SECONDS`]: `LOG: CLUSTER.PROC`.
    pub too_long: Vec<String>,
    /// The horizon was cut to [`MAX_HORIZON_SECONDS`].
    pub horizon_capped: bool,
}

impl InputNotes {
    /// Something of the input was not used or the replay was cut short.
    pub fn any(&self) -> bool {
        self.log_problems > 0 || !self.too_long.is_empty() || self.horizon_capped
    }
}

impl ReplayOutput {
    /// The whole text output.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for l in &self.header {
            out += l;
            out.push('\n');
        }
        for l in &self.lines {
            out += &l.text();
            out.push('\n');
        }
        out += &self.footer;
        out.push('\n');
        out
    }
}

/// Replays `logs` through `policy_name` on the sites of `sites` (with the
/// parameters of its `[policy]` table when that names the same policy).
pub fn replay(logs: &[PathBuf], sites: &SitesFile, policy_name: &str) -> Result<ReplayOutput, Failure> {
    let config = if sites.policy.name() == policy_name {
        sites.policy.clone()
    } else {
        PolicyConfig::lookup(policy_name).map_err(Failure::usage)?
    };
    // Only differences of times within a log matter here, so the year given
    // to legacy `MM/DD` stamps is fixed: the output does not depend on the date.
    let (jobs, names, diagnostics) = crate::report::read_jobs(logs, crate::userlog::DEFAULT_LEGACY_YEAR)
        .map_err(|e| Failure::usage(format!("{e}; check the log's path")))?;
    if jobs.is_empty() {
        return Err(Failure::usage(format!(
            "no jobs found in {} log(s); are these HTCondor user logs?",
            logs.len()
        )));
    }
    let site_of = map_sites(&jobs, sites);
    let n_sites = sites.sites.len();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); n_sites];
    let mut recorded: Vec<BTreeSet<String>> = vec![BTreeSet::new(); n_sites];
    let mut input = InputNotes { log_problems: diagnostics, ..InputNotes::default() };
    for (job, &site) in jobs.iter().zip(&site_of) {
        recorded[site].insert(job.site.to_string());
        match Sample::of(job) {
            Some(s) if s.end_after > MAX_JOB_SECONDS => input.too_long.push(format!(
                "{}: {}",
                names.get(job.file).map_or("?", String::as_str),
                job.id()
            )),
            Some(s) => samples[site].push(s),
            None => {}
        }
    }
    // Replays that cannot finish (a site with only held jobs, no timeout)
    // stop at a horizon well past anything the recording shows: twenty times
    // the samples' time in the queue one after another, within the cap.
    let recorded_seconds: f64 = samples.iter().flatten().map(|s| s.end_after).sum();
    let wanted = (recorded_seconds * 20.0).max(86400.0);
    let horizon = wanted.min(MAX_HORIZON_SECONDS);
    input.horizon_capped = wanted > horizon;

    let mut header = vec![format!(
        "# replay of {} job(s) from {} log(s) ({}) with policy {}{}",
        jobs.len(),
        logs.len(),
        names.join(", "),
        config.name(),
        if diagnostics > 0 {
            format!("; {diagnostics} problem(s) in the logs (malformed blocks, times out of order; warnings on stderr)")
        } else {
            String::new()
        }
    )];
    if !input.too_long.is_empty() {
        header.push(format!(
            "# {} job(s) left out: each took more than {} days from submission to its end, a mis-dated stamp? check their events: {}",
            input.too_long.len(),
            MAX_JOB_SECONDS / 86400.0,
            input.too_long.join(", ")
        ));
    }
    for (i, site) in sites.sites.iter().enumerate() {
        let from: Vec<&str> = recorded[i].iter().map(String::as_str).collect();
        header.push(format!(
            "# site {} ← {} sample(s) from {}",
            site.name,
            samples[i].len(),
            if from.is_empty() { "nothing (never starts a job)".to_string() } else { from.join(", ") }
        ));
    }

    let spec = sites.run_spec(jobs.len() as u64, policy::CapacityMemory::new());
    let mut policy = policy::build(&config, &spec, None).map_err(Failure::usage)?;
    let names: Vec<String> = sites.sites.iter().map(|s| s.name.clone()).collect();
    let views = (0..n_sites).map(|i| policy.site_view(SiteId(i as u32))).collect();
    let mut observer = ReplayObserver { names, trace: TraceRecorder::default(), views, lines: Vec::new() };

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| Failure::failed(format!("starting the replay's runtime: {e}")))?;
    let report = runtime.block_on(async {
        let clock = RunClock::starting_at(0.0);
        let backends: Vec<ReplaySite> = samples.into_iter().map(|s| ReplaySite::new(s, clock)).collect();
        let options = EngineOptions { horizon, history: Vec::new(), restored: false };
        engine::run(policy.as_mut(), backends, clock, options, &mut observer, CancellationToken::new()).await
    });
    let book = policy.book();
    let footer = format!(
        "# {} at t={:.0}s: {} done, {} given up, {} not finished",
        match report.ending {
            Ending::Settled => "settled".to_string(),
            Ending::Hang if input.horizon_capped => format!(
                "hang (stopped at the horizon, capped at {} days of virtual time)",
                MAX_HORIZON_SECONDS / 86400.0
            ),
            Ending::Hang => "hang (stopped at the horizon)".to_string(),
            Ending::Interrupted => "interrupted".to_string(),
        },
        report.stopped_at,
        book.done(),
        book.given_up(),
        book.n_jobs() - book.done() - book.given_up()
    );
    // A cap that was not reached cut nothing short.
    input.horizon_capped &= report.ending == Ending::Hang;
    Ok(ReplayOutput { header, lines: observer.lines, footer, ending: report.ending, input })
}

/// `cosched replay LOG… --sites sites.toml [--policy NAME] [--json]`.
pub fn command(args: ReplayArgs) -> CmdResult {
    let sites = crate::config::load(&args.sites).map_err(|e| Failure::usage(e.to_string()))?;
    let policy = args.policy.as_deref().unwrap_or(sites.policy.name());
    let out = replay(&args.logs, &sites, policy)?;
    if args.json {
        for line in &out.lines {
            println!("{}", serde_json::to_string(line).unwrap_or_default());
        }
        let mut input = serde_json::to_value(&out.input).unwrap_or_default();
        input["kind"] = "input".into();
        println!("{input}");
    } else {
        print!("{}", out.text());
    }
    // As `log stats` and `log report`: a log that was not all used is a
    // partial result.
    Ok(match out.ending {
        Ending::Settled if !out.input.any() => Exit::Ok,
        _ => Exit::Partial,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{jobs_from_events, LogEvent};

    fn record(end: JobEnd, started: Option<f64>, ended: Option<f64>, held_at: Option<f64>) -> JobRecord {
        let mut evs = vec![LogEvent::new(0, 1, 0, 100.0)];
        if let Some(s) = started {
            evs.push(LogEvent::new(1, 1, 0, s));
        }
        let mut job = jobs_from_events(&[("a.log".into(), evs)]).remove(0);
        job.end = end;
        job.ended = ended;
        job.held_at = held_at;
        job
    }

    #[test]
    fn samples_carry_delays_and_outcomes() {
        let s = Sample::of(&record(JobEnd::Success, Some(110.0), Some(150.0), None)).unwrap();
        assert_eq!(
            s,
            Sample { start_after: Some(10.0), end_after: 50.0, end: SampleEnd::Ended(Outcome::Success) }
        );
        let s =
            Sample::of(&record(JobEnd::Held { reason: "r".into() }, Some(105.0), None, Some(120.0))).unwrap();
        assert_eq!(s.end, SampleEnd::Held { reason: "r".into() });
        assert_eq!(s.end_after, 20.0);
        assert!(Sample::of(&record(JobEnd::Unfinished, None, None, None)).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn backend_reports_at_sampled_times_and_cycles() {
        let clock = RunClock::starting_at(0.0);
        let sample =
            Sample { start_after: Some(5.0), end_after: 12.0, end: SampleEnd::Ended(Outcome::Success) };
        let mut site = ReplaySite::new(vec![sample], clock);
        let ev = site.submit(vec![JobId(0), JobId(1)]).await;
        assert_eq!(ev, vec![SiteEvent::Submitted { jobs: vec![JobId(0), JobId(1)], at: 0.0 }]);
        let ev = site.next_events().await;
        assert_eq!(
            ev,
            vec![
                SiteEvent::Started { job: JobId(0), at: 5.0 },
                SiteEvent::Started { job: JobId(1), at: 5.0 }
            ]
        );
        // Removing job 1 cancels its end.
        let ev = site.remove(vec![JobId(1)]).await;
        assert_eq!(ev.len(), 1);
        let ev = site.next_events().await;
        assert_eq!(ev, vec![SiteEvent::Ended { job: JobId(0), at: 12.0, outcome: Outcome::Success }]);
        assert!((clock.now() - 12.0).abs() < 1e-6, "virtual time advanced to the end");
    }
}
