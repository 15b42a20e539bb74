//! What the person who typed `cosched submit` sees: a live table redrawn in
//! place on a terminal (about twice a second), plain lines every ~10 s when
//! stderr is a file or pipe, and the final summary (text or `--json`).
//!
//! It is an [`Observer`]: it sees every action and event but steers nothing.
//! It reads no clock of its own; redraws are paced by the run clock's
//! readings divided by its rate (simulated seconds per real second), so a
//! `--simulate` run at ×100 still redraws twice per real second.
//!
//! A run of several kinds of job ([`Progress::with_kinds`]) also shows each
//! kind at each site: jobs running and done, and the mean run time of its
//! successful attempts there (a kind's speed at a site is what a policy has
//! to learn per kind); a run of one kind shows and prints what it always did.
//!
//! The summary's makespan and each site's means are [`crate::stats`]'s
//! ([`stats::makespan`], [`stats::SiteMeans`]), from the same user-log
//! events the run's report reads, so the two show the same figures. One
//! input differs: an attempt's submission is the moment cosched ran
//! `condor_submit` (live; the 000 it wrote when a resumed run replays its
//! logs), where the report has only the 000, stamped to the second by
//! `condor_submit` as it queued the jobs. The progress line's *elapsed*
//! time is another figure than the makespan: from the run's start to now.

use crate::engine::{Ending, Observer};
use crate::policy::{
    Action, Decision, DecisionKind, JobId, JobTypeId, JobTypes, Outcome, Policy, SiteEvent, SiteId, Time,
};
use crate::state::memory::MemoryAtStart;
use crate::stats::{self, Effect, JobTimes, SiteMeans};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Display {
    /// A table redrawn in place on a terminal.
    Live,
    /// One plain line every ~10 s (logs, CI).
    Lines,
    /// Nothing until the summary.
    Quiet,
}

/// One job's current attempt, as far as the summary needs it.
#[derive(Clone, Copy, Debug, Serialize, serde::Deserialize)]
struct Attempt {
    site: SiteId,
    /// Its times as its events tell them, its submission first: what its
    /// site's means take once it succeeds. Whether it was held (a failure)
    /// before it ended or was removed is `times.held`.
    times: JobTimes,
    /// Since when it runs: its first start, until a hold stops it.
    started: Option<Time>,
}

impl Attempt {
    /// Applies one of its events at `at`. A submission is timed when
    /// `condor_submit` began, to the instant, and its start by the log, to
    /// the second below: a start stamped in the second of the submission
    /// would come first, so the submission is taken no later than it.
    fn apply(&mut self, effect: Effect, at: Time) {
        if let Some(submitted) = self.times.submit.as_mut() {
            *submitted = submitted.min(at);
        }
        self.times.apply(effect, at);
    }
}

/// Why jobs were submitted again: what ended each one's previous attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RetryCauses {
    /// The attempt failed or was held.
    pub after_failure: u64,
    /// The attempt was removed while it ran (cut short).
    pub after_cut_short: u64,
    /// The job was withdrawn while idle, to wait elsewhere: no slot time lost.
    pub moved_idle: u64,
}

/// What ended a job's last attempt, until the job is submitted again.
#[derive(Clone, Copy, Debug, Serialize, serde::Deserialize)]
enum Ended {
    Failed,
    CutShort,
    Idle,
}

/// Per-site totals.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
struct SiteTotals {
    done: u64,
    failed_attempts: u64,
    submit_failures: u64,
    /// Of the successful attempts.
    means: SiteMeans,
    last_submit_error: Option<String>,
    /// Executions that started and were removed before they ended, and the
    /// slot-seconds they had used.
    cut_short: u64,
    cut_short_seconds: f64,
    last_hold_reason: Option<String>,
    /// Since when HTCondor has reported the grid resource down (026), until 025.
    down_since: Option<Time>,
}

/// One kind's jobs at one site.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
struct KindTotals {
    /// Running now.
    running: u32,
    done: u64,
    /// Of its successful attempts (only the run time is shown).
    means: SiteMeans,
}

/// Watches a run and writes its progress to stderr.
pub struct Progress {
    names: Vec<String>,
    /// Each job's kind: per-kind lines are shown when there are several.
    types: JobTypes,
    n_jobs: u64,
    /// Simulated (run-clock) seconds per real second.
    rate: f64,
    display: Display,
    run_id: String,
    /// Run time of the first progress call of this process (ETA baseline).
    first_seen: Option<(Time, u64)>,
    last_draw: Option<Time>,
    lines_drawn: usize,
    tally: Tally,
    summary: Option<Summary>,
    /// Things a person should hear about at once (a hold reason, a site
    /// down), printed at the next redraw.
    notes: Vec<String>,
    /// Sites whose schedd does not answer: (since, run time; last error).
    unreachable: BTreeMap<SiteId, (Time, String)>,
    /// By site, then kind: the window and capacity found the policy told
    /// last for that kind there ([`Decision::job_kind`]); empty in a run of
    /// one kind. Not in the tally: a policy tells its windows again after a
    /// resume's replay, and a restored one as they change.
    kind_windows: Vec<Vec<Option<WindowTold>>>,
    /// What the run starts from, for the summary ([`Progress::starts_from`]).
    memory: Option<MemoryAtStart>,
}

/// A window and the capacity found, as a policy told them.
type WindowTold = (f64, Option<f64>);

/// What the events have told so far: the whole run's, also after a resume
/// (replayed, or restored from a checkpoint with [`Progress::restore`]).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
struct Tally {
    attempts: BTreeMap<JobId, Attempt>,
    /// Job attempts handed to sites (for the retry count).
    submitted_attempts: u64,
    ever_submitted: std::collections::BTreeSet<JobId>,
    done: std::collections::BTreeSet<JobId>,
    /// The last end (terminate or removal) of any attempt, run time: where
    /// the makespan ends.
    last_end: Option<Time>,
    sites: Vec<SiteTotals>,
    /// Our jobs running at each site now, and the most at once, counted
    /// from the events themselves, so a resumed run's peak covers its past.
    running: Vec<u32>,
    peaks: Vec<u32>,
    /// The last reason each job failed (for jobs that fail for good).
    last_failure: BTreeMap<JobId, String>,
    /// What ended each job's last attempt, for a job not submitted again yet.
    #[serde(default)]
    ended_by: BTreeMap<JobId, Ended>,
    #[serde(default)]
    retry_causes: RetryCauses,
    /// By site, then kind; empty in a run of one kind.
    #[serde(default)]
    kinds: Vec<Vec<KindTotals>>,
    /// Where and when each job last removed with no start seen left, until
    /// it succeeds: the gridmanager can write a start after the removal,
    /// and one stamped before it was an execution cut short (see
    /// `condor::site`'s `translate`), wherever the job went since.
    #[serde(default)]
    removed_unstarted: BTreeMap<JobId, (SiteId, Time)>,
}

/// The final summary (`--json` prints this).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub run: String,
    pub policy: String,
    pub ending: String,
    pub n_jobs: u64,
    pub done: u64,
    pub failed: u64,
    /// Jobs neither done nor failed (an interrupted or hung run).
    pub unfinished: u64,
    /// From the run's start to its last job's end, seconds
    /// ([`stats::makespan`]).
    pub makespan: Option<f64>,
    /// From the run's start to its stop, seconds: the progress line's
    /// elapsed time at the end (past the makespan by the time the last
    /// end took to be read).
    pub elapsed: f64,
    /// Attempts beyond each job's first.
    pub retries: u64,
    /// The retries by what ended the attempt before. (A checkpoint written
    /// by an older cosched does not restore, postcard being positional: the
    /// run resumes by replaying its logs, which counts them all.)
    pub retry_causes: RetryCauses,
    /// Executions that had started and were removed before they ended (by
    /// cosched or anyone), over all sites; on a healthy site, zero.
    pub cut_short: u64,
    /// The slot-time those executions had used, seconds.
    pub cut_short_seconds: f64,
    pub sites: Vec<SiteSummary>,
    pub failed_jobs: Vec<FailedJob>,
    /// What the run started from: its memory file, and per kind the sites
    /// where it started warm (absent where the run was not told).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryAtStart>,
    /// Each kind of job over the run (absent in a run of one kind).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<KindSummary>,
}

/// One kind of job over the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct KindSummary {
    pub name: String,
    pub n_jobs: u64,
    pub done: u64,
}

/// One kind of job at one site (also each kind of a site in the daemon's
/// `status`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct KindSiteSummary {
    pub name: String,
    pub done: u64,
    /// Running when the summary was made.
    pub running: u32,
    /// Mean run time of its successful attempts there, seconds (as the
    /// report's, [`stats::SiteMeans`]).
    pub mean_run_time: Option<f64>,
    /// The kind's window there (jobs of the kind the policy lets out),
    /// where its policy keeps one per kind and told it.
    #[serde(default)]
    pub window: Option<f64>,
    /// The concurrency of the kind its policy found healthy there (what it
    /// learned, and keeps for the next run), if found.
    #[serde(default)]
    pub capacity: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SiteSummary {
    pub name: String,
    pub done: u64,
    pub failed_attempts: u64,
    pub submit_failures: u64,
    /// The means of its successful attempts, seconds ([`stats::SiteMeans`],
    /// as the report's sites table).
    pub mean_queue_wait: Option<f64>,
    pub mean_run_time: Option<f64>,
    pub mean_turnaround: Option<f64>,
    /// Capacity the policy found, in concurrent jobs.
    pub capacity: Option<f64>,
    pub class: String,
    pub peak_running: Option<u32>,
    pub cut_short: u64,
    pub cut_short_seconds: f64,
    /// Why the site's last held job was held (HTCondor's hold reason).
    pub last_hold_reason: Option<String>,
    /// HTCondor reported the site's grid resource down (026) and it was not
    /// back (025) when the run ended.
    pub grid_resource_down: bool,
    /// Each kind of job there (absent in a run of one kind).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<KindSiteSummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FailedJob {
    pub job: u64,
    pub reason: String,
}

impl Progress {
    pub fn new(run_id: &str, names: Vec<String>, n_jobs: u64, rate: f64, display: Display) -> Self {
        let n_sites = names.len();
        Progress {
            names,
            types: JobTypes::single(n_jobs),
            n_jobs,
            rate: if rate > 0.0 { rate } else { 1.0 },
            display,
            run_id: run_id.to_string(),
            first_seen: None,
            last_draw: None,
            lines_drawn: 0,
            tally: Tally {
                attempts: BTreeMap::new(),
                submitted_attempts: 0,
                ever_submitted: Default::default(),
                done: Default::default(),
                last_end: None,
                sites: vec![SiteTotals::default(); n_sites],
                running: vec![0; n_sites],
                peaks: vec![0; n_sites],
                last_failure: BTreeMap::new(),
                ended_by: BTreeMap::new(),
                retry_causes: RetryCauses::default(),
                kinds: Vec::new(),
                removed_unstarted: BTreeMap::new(),
            },
            summary: None,
            notes: Vec::new(),
            unreachable: BTreeMap::new(),
            kind_windows: Vec::new(),
            memory: None,
        }
    }

    /// Tells what the run starts from: the memory file and, per kind, the
    /// sites where it starts warm. Said once, at the next redraw (not
    /// `--json`'s quiet display: its summary holds it), and kept for the
    /// summary.
    pub fn starts_from(&mut self, memory: MemoryAtStart) {
        if self.display != Display::Quiet {
            self.notes.push(memory.line());
        }
        self.memory = Some(memory);
    }

    /// Tells the kind of each job, to show each kind per site when there
    /// are several.
    pub fn with_kinds(mut self, types: JobTypes) -> Self {
        (self.tally.kinds, self.kind_windows) = if types.several() {
            let n = self.names.len();
            (vec![vec![KindTotals::default(); types.len()]; n], vec![vec![None; types.len()]; n])
        } else {
            (Vec::new(), Vec::new())
        };
        self.types = types;
        self
    }

    /// Keeps each kind's window per site from the policy's decisions.
    fn note_decisions(&mut self, decisions: &[Decision]) {
        for d in decisions {
            let (DecisionKind::Window { window, capacity }, Some(name)) = (&d.kind, &d.job_kind) else {
                continue;
            };
            let Some(t) = self.types.ids().find(|&t| self.types.name(t) == name) else { continue };
            if let Some(slot) = self.kind_windows.get_mut(d.site.index()).and_then(|s| s.get_mut(t.index())) {
                *slot = Some((*window, *capacity));
            }
        }
    }

    /// One kind's totals at one site (`None` in a run of one kind).
    fn kind_totals(&mut self, site: SiteId, job: JobId) -> Option<&mut KindTotals> {
        let kind = self.types.of(job);
        self.tally.kinds.get_mut(site.index())?.get_mut(kind.index())
    }

    /// The summary, once the run has finished.
    pub fn take_summary(&mut self) -> Option<Summary> {
        self.summary.take()
    }

    /// Executions cut short so far, over all sites, and their slot-seconds.
    pub fn cut_short(&self) -> (u64, f64) {
        (
            self.tally.sites.iter().map(|t| t.cut_short).sum(),
            self.tally.sites.iter().map(|t| t.cut_short_seconds).sum(),
        )
    }

    /// Executions cut short so far at each site, in site order, and their
    /// slot-seconds.
    pub fn cut_short_by_site(&self) -> Vec<(u64, f64)> {
        self.tally.sites.iter().map(|t| (t.cut_short, t.cut_short_seconds)).collect()
    }

    /// Tells the display that a site's schedd has not answered since
    /// `since` (run time), or (`None`) that it answers again.
    pub fn set_unreachable(&mut self, site: SiteId, down: Option<(Time, String)>) {
        match down {
            Some(d) => {
                self.unreachable.insert(site, d);
            }
            None => {
                self.unreachable.remove(&site);
            }
        }
    }

    fn started(&mut self, site: SiteId, job: JobId) {
        let i = site.index();
        self.tally.running[i] += 1;
        self.tally.peaks[i] = self.tally.peaks[i].max(self.tally.running[i]);
        if let Some(k) = self.kind_totals(site, job) {
            k.running += 1;
        }
    }

    /// An attempt that was running (`was_running`) is no more.
    fn stopped(&mut self, site: SiteId, job: JobId, was_running: bool) {
        if was_running {
            let i = site.index();
            self.tally.running[i] = self.tally.running[i].saturating_sub(1);
            if let Some(k) = self.kind_totals(site, job) {
                k.running = k.running.saturating_sub(1);
            }
        }
    }

    /// An attempt ended (005 or 009) at `at`, whatever became of its job:
    /// the makespan runs to the last such end, as the report's does.
    fn ended_at(&mut self, at: Time) {
        self.tally.last_end = Some(self.tally.last_end.map_or(at, |last| last.max(at)));
    }

    fn site_name(&self, site: SiteId) -> &str {
        self.names.get(site.index()).map_or("?", String::as_str)
    }

    fn totals(&mut self, site: SiteId) -> &mut SiteTotals {
        let i = site.index().min(self.tally.sites.len().saturating_sub(1));
        &mut self.tally.sites[i]
    }

    /// Mirrors the book's transitions closely enough for statistics; stale
    /// events (for a job not at that site) are ignored as the book does.
    fn record(&mut self, site: SiteId, event: &SiteEvent) {
        if site.index() >= self.tally.sites.len() {
            return;
        }
        match event {
            SiteEvent::Submitted { jobs, at } => {
                for &job in jobs {
                    if self.tally.done.contains(&job) {
                        continue;
                    }
                    self.tally.submitted_attempts += 1;
                    self.tally.ever_submitted.insert(job);
                    let causes = &mut self.tally.retry_causes;
                    match self.tally.ended_by.remove(&job) {
                        Some(Ended::Failed) => causes.after_failure += 1,
                        Some(Ended::CutShort) => causes.after_cut_short += 1,
                        Some(Ended::Idle) => causes.moved_idle += 1,
                        None => {}
                    }
                    let mut times = JobTimes::default();
                    times.apply(Effect::Submit, *at);
                    self.tally.attempts.insert(job, Attempt { site, times, started: None });
                }
            }
            SiteEvent::SubmitFailed { jobs, error, .. } => {
                let t = self.totals(site);
                t.submit_failures += 1;
                t.last_submit_error = Some(error.clone());
                let name = self.site_name(site).to_string();
                for &job in jobs {
                    self.tally
                        .last_failure
                        .insert(job, format!("{name}: submit failed: {}", one_line(error)));
                }
            }
            SiteEvent::Started { job, at } | SiteEvent::WithdrawDeclined { job, at } => {
                if let Some(a) = self.tally.attempts.get_mut(job).filter(|a| a.site == site) {
                    // Its times are the log's: a declined withdrawal is no
                    // 001 (its `at` is when condor_q told the job started).
                    if matches!(event, SiteEvent::Started { .. }) {
                        a.apply(Effect::Execute, *at);
                    }
                }
                if let Some(a) =
                    self.tally.attempts.get_mut(job).filter(|a| a.site == site && a.started.is_none())
                {
                    a.started = Some(*at);
                    self.started(site, *job);
                } else if let Some(&(s, removed)) = self.tally.removed_unstarted.get(job) {
                    if s == site && *at <= removed {
                        self.tally.removed_unstarted.remove(job);
                        if let Some(e @ Ended::Idle) = self.tally.ended_by.get_mut(job) {
                            *e = Ended::CutShort;
                        }
                        let t = self.totals(site);
                        t.cut_short += 1;
                        t.cut_short_seconds += removed - at;
                    }
                }
            }
            SiteEvent::Ended { job, at, outcome } => {
                self.ended_at(*at);
                let Some(mut a) = self.tally.attempts.get(job).copied().filter(|a| a.site == site) else {
                    return;
                };
                self.tally.attempts.remove(job);
                self.stopped(site, *job, a.started.is_some());
                a.apply(Effect::Terminate, *at);
                match outcome {
                    Outcome::Success => {
                        if !self.tally.done.insert(*job) {
                            return;
                        }
                        self.tally.removed_unstarted.remove(job);
                        let t = self.totals(site);
                        t.done += 1;
                        t.means.add(&a.times, true);
                        if let Some(k) = self.kind_totals(site, *job) {
                            k.done += 1;
                            k.means.add(&a.times, true);
                        }
                    }
                    Outcome::Failed { detail } => {
                        self.tally.ended_by.insert(*job, Ended::Failed);
                        self.totals(site).failed_attempts += 1;
                        let name = self.site_name(site).to_string();
                        self.tally.last_failure.insert(*job, format!("{name}: {}", one_line(detail)));
                    }
                }
            }
            SiteEvent::Held { job, at, reason, .. } => {
                if let Some(a) = self.tally.attempts.get_mut(job).filter(|a| a.site == site) {
                    // A held job occupies no slot.
                    a.apply(Effect::Hold, *at);
                    let was = std::mem::take(&mut a.started);
                    self.stopped(site, *job, was.is_some());
                    let name = self.site_name(site).to_string();
                    let reason = one_line(reason);
                    let t = self.totals(site);
                    t.failed_attempts += 1;
                    if t.last_hold_reason.as_deref() != Some(reason.as_str()) {
                        t.last_hold_reason = Some(reason.clone());
                        self.notes.push(format!("site {name}: job {} held: {reason}", job.0));
                    }
                    self.tally.last_failure.insert(*job, format!("{name}: held: {reason}"));
                    self.tally.ended_by.insert(*job, Ended::Failed);
                }
            }
            SiteEvent::Removed { job, at } => {
                self.ended_at(*at);
                if let Some(a) = self.tally.attempts.get(job).copied().filter(|a| a.site == site) {
                    self.tally.attempts.remove(job);
                    self.stopped(site, *job, a.started.is_some());
                    if let Some(started) = a.started {
                        self.tally.ended_by.insert(*job, Ended::CutShort);
                        let t = self.totals(site);
                        t.cut_short += 1;
                        t.cut_short_seconds += (at - started).max(0.0);
                    } else if !a.times.held {
                        self.tally.ended_by.insert(*job, Ended::Idle);
                        self.tally.removed_unstarted.insert(*job, (site, *at));
                    }
                }
            }
            SiteEvent::ResourceDown { at, .. } => {
                let name = self.site_name(site).to_string();
                let t = self.totals(site);
                if t.down_since.is_none() {
                    t.down_since = Some(*at);
                    self.notes.push(format!(
                        "site {name}: HTCondor reports its grid resource down (026); its idle jobs go elsewhere"
                    ));
                }
            }
            SiteEvent::ResourceUp { .. } => {
                let name = self.site_name(site).to_string();
                if self.totals(site).down_since.take().is_some() {
                    self.notes.push(format!("site {name}: grid resource back up (025)"));
                }
            }
        }
    }

    fn table(&self, now: Time, policy: &dyn Policy) -> String {
        let book = policy.book();
        let mut out = String::new();
        let elapsed = format_duration(now);
        let _ =
            write!(out, "cosched {}  {}  {}/{} done", self.run_id, policy.name(), book.done(), self.n_jobs);
        if book.given_up() > 0 {
            let _ = write!(out, ", {} failed", book.given_up());
        }
        let _ = write!(out, "  elapsed {elapsed}");
        if let Some(eta) = self.eta_real(now, book.done() + book.given_up()) {
            let _ = write!(out, "  ETA {}", format_duration(eta));
        }
        out.push('\n');
        let width = self.names.iter().map(String::len).max().unwrap_or(4).max(4);
        let _ = writeln!(
            out,
            "  {:<width$} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>8}  class",
            "site", "sending", "queued", "running", "done", "failed", "window", "capacity"
        );
        for (i, name) in self.names.iter().enumerate() {
            let site = SiteId(i as u32);
            let c = book.counts(site);
            let view = policy.site_view(site);
            let failed = self.tally.sites[i].failed_attempts;
            let cap = view.capacity.map_or("-".to_string(), |c| format!("{c:.1}"));
            let _ = writeln!(
                out,
                "  {:<width$} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>8}  {}{}",
                name,
                c.submitting,
                c.idle + c.held,
                c.running,
                c.done,
                failed,
                view.window,
                cap,
                view.class,
                self.site_state(site, now)
            );
            for line in self.kind_lines(site) {
                let _ = writeln!(out, "    {line}");
            }
        }
        out
    }

    /// One line per kind of job at `site`: `io  3 running  12 done  run
    /// time 412 s  window 8  capacity 6.0` (none in a run of one kind).
    fn kind_lines(&self, site: SiteId) -> Vec<String> {
        let width = self.types.ids().map(|t| self.types.name(t).len()).max().unwrap_or(0);
        self.kind_site_summaries(site)
            .iter()
            .map(|k| {
                let run = secs(k.mean_run_time);
                format!(
                    "{:<width$}  {:>5} running {:>7} done  run time {run}{}",
                    k.name,
                    k.running,
                    k.done,
                    window_and_capacity(k)
                )
            })
            .collect()
    }

    /// ` [io 2r/3d cpu 1r/1d]` for a plain progress line (empty in a run of
    /// one kind).
    fn kind_counts(&self, site: SiteId) -> String {
        let Some(kinds) = self.tally.kinds.get(site.index()) else { return String::new() };
        let each: Vec<String> = kinds
            .iter()
            .enumerate()
            .map(|(t, k)| format!("{} {}r/{}d", self.types.name(JobTypeId(t as u16)), k.running, k.done))
            .collect();
        format!(" [{}]", each.join(" "))
    }

    /// ` (down since 4m05s)`-style remarks on a site, empty when healthy.
    fn site_state(&self, site: SiteId, now: Time) -> String {
        let mut out = String::new();
        if let Some((since, _)) = self.unreachable.get(&site) {
            let _ = write!(out, " schedd unreachable for {}", format_duration(now - since));
        }
        if let Some(since) = self.tally.sites.get(site.index()).and_then(|t| t.down_since) {
            let _ = write!(out, " grid resource down for {}", format_duration(now - since));
        }
        out
    }

    /// Real seconds until every job settles, from this process's pace.
    fn eta_real(&self, now: Time, settled: u64) -> Option<f64> {
        let (t0, settled0) = self.first_seen?;
        let gained = settled.checked_sub(settled0).filter(|g| *g > 0)?;
        let per_job = (now - t0) / gained as f64;
        let left = self.n_jobs.saturating_sub(settled);
        Some(per_job * left as f64 / self.rate)
    }

    fn draw(&mut self, now: Time, policy: &dyn Policy, force: bool) {
        if self.first_seen.is_none() {
            self.first_seen = Some((now, policy.book().done() + policy.book().given_up()));
        }
        let period = match self.display {
            Display::Live => 0.5,
            Display::Lines => 10.0,
            Display::Quiet => return,
        };
        let notes = std::mem::take(&mut self.notes);
        if !force && notes.is_empty() && self.last_draw.is_some_and(|last| (now - last) / self.rate < period)
        {
            return;
        }
        self.last_draw = Some(now);
        let mut err = std::io::stderr().lock();
        if !notes.is_empty() {
            if self.display == Display::Live && self.lines_drawn > 0 {
                // Above the table, which is drawn again below.
                let _ = write!(err, "\x1b[{}A\r\x1b[J", self.lines_drawn);
                self.lines_drawn = 0;
            }
            for note in &notes {
                let _ = writeln!(err, "cosched: {note}");
            }
        }
        match self.display {
            Display::Live => {
                let table = self.table(now, policy);
                let mut frame = String::new();
                if self.lines_drawn > 0 {
                    // Back to the top of the previous frame, and clear it.
                    let _ = write!(frame, "\x1b[{}A\r\x1b[J", self.lines_drawn);
                }
                frame.push_str(&table);
                self.lines_drawn = table.lines().count();
                let _ = err.write_all(frame.as_bytes());
            }
            Display::Lines => {
                let book = policy.book();
                let mut line = format!(
                    "cosched {}: {}/{} done, {} failed, elapsed {}",
                    self.run_id,
                    book.done(),
                    self.n_jobs,
                    book.given_up(),
                    format_duration(now)
                );
                for (i, name) in self.names.iter().enumerate() {
                    let c = book.counts(SiteId(i as u32));
                    // Jobs handed to condor_submit and not acknowledged are
                    // not queued anywhere yet: "s", apart from "q".
                    let _ = write!(
                        line,
                        "; {name} {}s/{}q/{}r/{}d{}{}",
                        c.submitting,
                        c.idle + c.held,
                        c.running,
                        c.done,
                        self.kind_counts(SiteId(i as u32)),
                        self.site_state(SiteId(i as u32), now)
                    );
                }
                let _ = writeln!(err, "{line}");
            }
            Display::Quiet => {}
        }
        let _ = err.flush();
    }

    /// The summary of the run, stopped at `now`.
    fn build_summary(&self, now: Time, policy: &dyn Policy, ending: Ending) -> Summary {
        let book = policy.book();
        // The capacity shown is the one the next warm start will read.
        let learned = policy.learned();
        let sites = self
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let t = &self.tally.sites[i];
                let view = policy.site_view(SiteId(i as u32));
                let kinds = self.kind_site_summaries(SiteId(i as u32));
                SiteSummary {
                    name: name.clone(),
                    done: t.done,
                    failed_attempts: t.failed_attempts,
                    submit_failures: t.submit_failures,
                    mean_queue_wait: t.means.queue_wait(),
                    mean_run_time: t.means.run_time(),
                    mean_turnaround: t.means.turnaround(),
                    capacity: if kinds.is_empty() {
                        learned.of_site(name).find_map(|(_, m)| m.capacity).or(view.capacity)
                    } else {
                        // Of several kinds, the capacities of the kind
                        // lines below added, as the decisions, the report
                        // and `status` tell a site's (the first kind's
                        // remembered one alone was shown here).
                        kinds.iter().filter_map(|k| k.capacity).reduce(|a, b| a + b)
                    },
                    class: view.class.to_string(),
                    peak_running: Some(self.tally.peaks[i]),
                    cut_short: t.cut_short,
                    cut_short_seconds: t.cut_short_seconds,
                    last_hold_reason: t.last_hold_reason.clone(),
                    grid_resource_down: t.down_since.is_some(),
                    kinds,
                }
            })
            .collect();
        let kinds = if self.tally.kinds.is_empty() {
            Vec::new()
        } else {
            self.types
                .ids()
                .map(|t| KindSummary {
                    name: self.types.name(t).to_string(),
                    n_jobs: self.types.count(t),
                    done: self.tally.kinds.iter().map(|site| site.get(t.index()).map_or(0, |k| k.done)).sum(),
                })
                .collect()
        };
        let mut failed_jobs: Vec<FailedJob> = (0..book.n_jobs())
            .map(JobId)
            .filter(|&j| matches!(book.state(j), crate::policy::JobState::GivenUp))
            .map(|j| FailedJob {
                job: j.0,
                reason: self
                    .tally
                    .last_failure
                    .get(&j)
                    .cloned()
                    .unwrap_or_else(|| "failed on every attempt".into()),
            })
            .collect();
        failed_jobs.sort_by_key(|f| f.job);
        Summary {
            run: self.run_id.clone(),
            policy: policy.name().to_string(),
            ending: match ending {
                Ending::Settled => "settled",
                Ending::Hang => "hung",
                Ending::Interrupted => "interrupted",
            }
            .to_string(),
            n_jobs: self.n_jobs,
            done: book.done(),
            failed: book.given_up(),
            unfinished: self.n_jobs - book.done() - book.given_up(),
            makespan: stats::makespan(0.0, self.tally.last_end),
            elapsed: now,
            retries: self.tally.submitted_attempts.saturating_sub(self.tally.ever_submitted.len() as u64),
            retry_causes: self.tally.retry_causes,
            cut_short: self.tally.sites.iter().map(|t| t.cut_short).sum(),
            cut_short_seconds: self.tally.sites.iter().map(|t| t.cut_short_seconds).sum(),
            sites,
            failed_jobs,
            memory: self.memory.clone(),
            kinds,
        }
    }

    /// Each kind of job at `site` (none in a run of one kind): what the
    /// summary, the progress and the daemon's `status` show of it.
    pub fn kind_site_summaries(&self, site: SiteId) -> Vec<KindSiteSummary> {
        let Some(kinds) = self.tally.kinds.get(site.index()) else { return Vec::new() };
        let windows = self.kind_windows.get(site.index());
        kinds
            .iter()
            .enumerate()
            .map(|(t, k)| {
                let told = windows.and_then(|w| w.get(t).copied().flatten());
                KindSiteSummary {
                    name: self.types.name(JobTypeId(t as u16)).to_string(),
                    done: k.done,
                    running: k.running,
                    mean_run_time: k.means.run_time(),
                    window: told.map(|(w, _)| w),
                    capacity: told.and_then(|(_, c)| c),
                }
            })
            .collect()
    }
}

/// `  window 8  capacity 6.0` of a kind at a site, as far as told.
pub fn window_and_capacity(k: &KindSiteSummary) -> String {
    let mut out = String::new();
    if let Some(w) = k.window {
        let _ = write!(out, "  window {w:.0}");
    }
    if let Some(c) = k.capacity {
        let _ = write!(out, "  capacity {c:.1}");
    }
    out
}

/// `412 s`, or `-` with nothing to average.
fn secs(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.0} s"))
}

impl Observer for Progress {
    fn action(&mut self, _now: Time, action: &Action) {
        if let Action::GiveUp { job, why } = action {
            self.tally.last_failure.entry(*job).or_insert_with(|| why.clone());
        }
    }
    fn event(&mut self, _now: Time, site: SiteId, event: &SiteEvent) {
        self.record(site, event);
    }
    fn decisions(&mut self, decisions: &[Decision]) {
        self.note_decisions(decisions);
    }
    fn site_unreachable(&mut self, site: SiteId, down: Option<(Time, String)>) {
        self.set_unreachable(site, down);
    }
    fn progress(&mut self, now: Time, policy: &dyn Policy) {
        self.draw(now, policy, false);
    }
    fn finished(&mut self, now: Time, policy: &dyn Policy, ending: Ending) {
        self.draw(now, policy, true);
        self.summary = Some(self.build_summary(now, policy, ending));
    }
}

impl Progress {
    /// Feeds a resumed run's history, so the summary covers the whole run.
    /// What the events told so far, for a checkpoint.
    pub fn checkpoint(&self) -> Option<Vec<u8>> {
        postcard::to_stdvec(&self.tally).ok()
    }

    /// Takes what a [`Progress::checkpoint`] of the same run saved.
    pub fn restore(&mut self, saved: &[u8]) -> Result<(), String> {
        let tally: Tally = postcard::from_bytes(saved).map_err(|e| format!("unreadable: {e}"))?;
        if tally.sites.len() != self.tally.sites.len() || tally.running.len() != self.tally.running.len() {
            return Err(format!("it is of a run over {} sites", tally.sites.len()));
        }
        let shape = |t: &Tally| t.kinds.iter().map(Vec::len).collect::<Vec<_>>();
        if shape(&tally) != shape(&self.tally) {
            return Err("it counts other kinds of job than the run has".into());
        }
        self.tally = tally;
        Ok(())
    }

    pub fn replay(&mut self, history: &[(SiteId, SiteEvent)]) {
        for (site, event) in history {
            self.record(*site, event);
        }
    }
}

/// The summary as people read it.
pub fn render_summary(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nRun {} ({}): {} of {} jobs done, {} failed for good{}.",
        s.run,
        s.policy,
        s.done,
        s.n_jobs,
        s.failed,
        if s.unfinished > 0 { format!(", {} unfinished", s.unfinished) } else { String::new() }
    );
    if !s.kinds.is_empty() {
        let each: Vec<String> =
            s.kinds.iter().map(|k| format!("{} {}/{}", k.name, k.done, k.n_jobs)).collect();
        let _ = writeln!(out, "Kinds of job (done of each): {}.", each.join(", "));
    }
    let _ = writeln!(
        out,
        "Makespan {} (from the run's start to its last job's end), elapsed {} (to the run's stop).",
        s.makespan.map_or("-".to_string(), format_duration),
        format_duration(s.elapsed)
    );
    let _ = writeln!(
        out,
        "{} retr{}{}, {} execution(s) cut short{}.",
        s.retries,
        if s.retries == 1 { "y" } else { "ies" },
        retry_causes(&s.retry_causes),
        s.cut_short,
        if s.cut_short > 0 {
            format!(" ({} of slot time lost)", format_duration(s.cut_short_seconds))
        } else {
            String::new()
        }
    );
    let width = s.sites.iter().map(|x| x.name.len()).max().unwrap_or(4).max(4);
    let _ = writeln!(
        out,
        "  {:<width$} {:>6} {:>8} {:>10} {:>9} {:>10} {:>8} {:>5}  class",
        "site", "done", "failures", "queue wait", "run time", "turnaround", "capacity", "peak"
    );
    for site in &s.sites {
        let _ = writeln!(
            out,
            "  {:<width$} {:>6} {:>8} {:>10} {:>9} {:>10} {:>8} {:>5}  {}",
            site.name,
            site.done,
            site.failed_attempts + site.submit_failures,
            secs(site.mean_queue_wait),
            secs(site.mean_run_time),
            secs(site.mean_turnaround),
            site.capacity.map_or("-".to_string(), |c| format!("{c:.1}")),
            site.peak_running.map_or("-".to_string(), |p| p.to_string()),
            if site.grid_resource_down {
                format!("{} (grid resource down)", site.class)
            } else {
                site.class.clone()
            }
        );
        let kind_width = site.kinds.iter().map(|k| k.name.len()).max().unwrap_or(0);
        for k in &site.kinds {
            let _ = writeln!(
                out,
                "    {:<kind_width$} {:>6} done, run time {}{}",
                k.name,
                k.done,
                secs(k.mean_run_time),
                window_and_capacity(k)
            );
        }
    }
    let _ = writeln!(out, "  (queue wait, run time, turnaround: means of the jobs that succeeded at the site, as in the report)");
    for site in s.sites.iter().filter(|x| x.last_hold_reason.is_some()) {
        let _ =
            writeln!(out, "  {} last hold: {}", site.name, site.last_hold_reason.as_deref().unwrap_or(""));
    }
    if !s.failed_jobs.is_empty() {
        let _ = writeln!(out, "Failed for good:");
        for f in s.failed_jobs.iter().take(20) {
            let _ = writeln!(out, "  job {}: {}", f.job, f.reason);
        }
        if s.failed_jobs.len() > 20 {
            let _ = writeln!(out, "  … and {} more (see --json)", s.failed_jobs.len() - 20);
        }
    }
    out
}

/// " (5 after a failure, 2 cut short, 40 idle jobs moved)": the causes
/// that are not zero; nothing when all are.
fn retry_causes(c: &RetryCauses) -> String {
    let idle = if c.moved_idle == 1 { "idle job moved" } else { "idle jobs moved" };
    let parts: Vec<String> =
        [(c.after_failure, "after a failure"), (c.after_cut_short, "cut short"), (c.moved_idle, idle)]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// `1h02m03s`, `4m05s`, `12s`.
pub fn format_duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 {
        format!("{h}h{m:02}m{s:02}s")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::HoldCause;

    #[test]
    fn stats_follow_successful_attempts_and_count_retries() {
        let mut p = Progress::new("r", vec!["a".into(), "b".into()], 2, 1.0, Display::Quiet);
        let (a, b) = (SiteId(0), SiteId(1));
        p.record(a, &SiteEvent::Submitted { jobs: vec![JobId(0), JobId(1)], at: 0.0 });
        p.record(a, &SiteEvent::Started { job: JobId(0), at: 10.0 });
        p.record(a, &SiteEvent::Ended { job: JobId(0), at: 110.0, outcome: Outcome::Success });
        p.record(
            a,
            &SiteEvent::Held { job: JobId(1), at: 5.0, reason: "no\nslot".into(), cause: HoldCause::Unknown },
        );
        p.record(a, &SiteEvent::Removed { job: JobId(1), at: 6.0 });
        // A stale end for job 1 at the old site counts for nothing.
        p.record(a, &SiteEvent::Ended { job: JobId(1), at: 7.0, outcome: Outcome::Success });
        p.record(b, &SiteEvent::Submitted { jobs: vec![JobId(1)], at: 20.0 });
        p.record(b, &SiteEvent::Ended { job: JobId(1), at: 220.0, outcome: Outcome::Success });
        assert_eq!(p.tally.done.len(), 2);
        assert_eq!(p.tally.submitted_attempts - p.tally.ever_submitted.len() as u64, 1, "one retry");
        assert_eq!(p.tally.sites[0].done, 1);
        let a_means = p.tally.sites[0].means;
        assert_eq!((a_means.queue_wait(), a_means.run_time()), (Some(10.0), Some(100.0)));
        let b_means = p.tally.sites[1].means;
        assert_eq!(b_means.turnaround(), Some(200.0));
        assert_eq!(b_means.run_time(), None, "no start seen: run time unknown");
        assert_eq!(p.tally.last_end, Some(220.0));
        assert_eq!(p.tally.last_failure[&JobId(1)], "a: held: no slot");
        let held_then_removed = RetryCauses { after_failure: 1, ..RetryCauses::default() };
        assert_eq!(p.tally.retry_causes, held_then_removed, "a job held, then removed, failed");
    }

    #[test]
    fn retries_are_told_apart_by_what_ended_the_attempt_before() {
        let mut p = Progress::new("r", vec!["a".into(), "b".into()], 4, 1.0, Display::Quiet);
        let (a, b) = (SiteId(0), SiteId(1));
        let jobs: Vec<JobId> = (0..4).map(JobId).collect();
        p.record(a, &SiteEvent::Submitted { jobs: jobs.clone(), at: 0.0 });
        p.record(a, &SiteEvent::Started { job: JobId(0), at: 1.0 });
        p.record(a, &SiteEvent::Started { job: JobId(1), at: 1.0 });
        p.record(
            a,
            &SiteEvent::Ended {
                job: JobId(0),
                at: 5.0,
                outcome: Outcome::Failed { detail: "exit 1".into() },
            },
        );
        p.record(a, &SiteEvent::Removed { job: JobId(1), at: 6.0 });
        p.record(a, &SiteEvent::Removed { job: JobId(2), at: 6.0 });
        // Job 3 is removed while idle and never sent again (a cancel): no retry.
        p.record(a, &SiteEvent::Removed { job: JobId(3), at: 6.0 });
        p.record(b, &SiteEvent::Submitted { jobs: jobs[..3].to_vec(), at: 7.0 });
        let expected = RetryCauses { after_failure: 1, after_cut_short: 1, moved_idle: 1 };
        assert_eq!(p.tally.retry_causes, expected);
        assert_eq!(retry_causes(&expected), " (1 after a failure, 1 cut short, 1 idle job moved)");
        assert_eq!(retry_causes(&RetryCauses::default()), "");
    }

    #[test]
    fn a_start_stamped_in_the_second_of_the_submission_is_no_negative_wait() {
        let mut p = Progress::new("r", vec!["a".into()], 2, 400.0, Display::Quiet);
        let a = SiteId(0);
        // Submitted at 100.7 (exact); the log stamps the start 100 (whole seconds).
        p.record(a, &SiteEvent::Submitted { jobs: vec![JobId(0), JobId(1)], at: 100.7 });
        p.record(a, &SiteEvent::Started { job: JobId(0), at: 100.0 });
        p.record(a, &SiteEvent::Started { job: JobId(1), at: 104.0 });
        for job in [JobId(0), JobId(1)] {
            p.record(a, &SiteEvent::Ended { job, at: 160.0, outcome: Outcome::Success });
        }
        let means = p.tally.sites[0].means;
        let wait = means.queue_wait().expect("both waits");
        assert!((wait - 3.3 / 2.0).abs() < 1e-9, "(0 + 3.3) / 2, not (-0.7 + 3.3) / 2: {wait}");
        let turnaround = means.turnaround().expect("both turnarounds");
        assert!((turnaround - (60.0 + 59.3) / 2.0).abs() < 1e-9, "{turnaround}");
    }

    /// As the report times the same attempts from their log events
    /// (`stats::SiteMeans`): only those that succeeded, the wait to the
    /// first start the log stamps, the run from the last start, and the
    /// makespan to the last end of any attempt, also one removed.
    #[test]
    fn the_summary_times_attempts_as_the_report_does() {
        let mut p = Progress::new("r", vec!["a".into()], 3, 1.0, Display::Quiet);
        let a = SiteId(0);
        p.record(a, &SiteEvent::Submitted { jobs: vec![JobId(0), JobId(1), JobId(2)], at: 0.0 });
        // condor_q said job 0 runs before its log did: no start of the log's.
        p.record(a, &SiteEvent::WithdrawDeclined { job: JobId(0), at: 12.0 });
        p.record(a, &SiteEvent::Started { job: JobId(0), at: 10.0 });
        // Evicted and started again (no event the summary sees between).
        p.record(a, &SiteEvent::Started { job: JobId(0), at: 30.0 });
        p.record(a, &SiteEvent::Ended { job: JobId(0), at: 60.0, outcome: Outcome::Success });
        p.record(a, &SiteEvent::Started { job: JobId(1), at: 1.0 });
        let failed = Outcome::Failed { detail: "exit 1".into() };
        p.record(a, &SiteEvent::Ended { job: JobId(1), at: 2.0, outcome: failed });
        p.record(a, &SiteEvent::Removed { job: JobId(2), at: 70.0 });
        let means = p.tally.sites[0].means;
        let got = (means.queue_wait(), means.run_time(), means.turnaround());
        assert_eq!(got, (Some(10.0), Some(30.0), Some(60.0)));
        assert_eq!(stats::makespan(0.0, p.tally.last_end), Some(70.0));
        assert_eq!(p.tally.running, vec![0], "job 0 counted running once");
    }

    #[test]
    fn executions_cut_short_and_peaks_come_from_the_events_even_replayed() {
        let mut p = Progress::new("r", vec!["a".into()], 3, 1.0, Display::Quiet);
        let a = SiteId(0);
        // The history of a resumed run: two jobs ran at once before the restart.
        p.replay(&[
            (a, SiteEvent::Submitted { jobs: vec![JobId(0), JobId(1), JobId(2)], at: 0.0 }),
            (a, SiteEvent::Started { job: JobId(0), at: 5.0 }),
            (a, SiteEvent::Started { job: JobId(1), at: 6.0 }),
            (a, SiteEvent::Ended { job: JobId(0), at: 20.0, outcome: Outcome::Success }),
        ]);
        // Live: job 1 is removed while it runs; job 2 never started.
        p.record(a, &SiteEvent::Removed { job: JobId(1), at: 16.0 });
        p.record(a, &SiteEvent::Removed { job: JobId(2), at: 16.0 });
        assert_eq!((p.tally.sites[0].cut_short, p.tally.sites[0].cut_short_seconds), (1, 10.0));
        assert_eq!(p.tally.peaks[0], 2, "the peak covers the replayed past");
        assert_eq!(p.tally.running[0], 0);
        // A held job stops running without being cut short later.
        p.record(a, &SiteEvent::Submitted { jobs: vec![JobId(2)], at: 30.0 });
        p.record(a, &SiteEvent::Started { job: JobId(2), at: 31.0 });
        p.record(
            a,
            &SiteEvent::Held {
                job: JobId(2),
                at: 33.0,
                reason: "input\nmissing".into(),
                cause: HoldCause::Site,
            },
        );
        p.record(a, &SiteEvent::Removed { job: JobId(2), at: 34.0 });
        assert_eq!(p.tally.sites[0].cut_short, 1);
        assert_eq!(p.tally.sites[0].last_hold_reason.as_deref(), Some("input missing"));
        assert!(p.notes.iter().any(|n| n.contains("job 2 held: input missing")), "{:?}", p.notes);
    }

    /// The gridmanager can write a remote start after the schedd wrote the
    /// job's removal; stamped before it, the execution was cut short, as
    /// the logs read in time order say. Once, at the site it was removed
    /// from, and not for a start stamped after the removal.
    #[test]
    fn a_start_told_after_its_removal_and_stamped_before_it_is_cut_short() {
        let mut p = Progress::new("r", vec!["a".into(), "b".into()], 3, 1.0, Display::Quiet);
        let (a, b) = (SiteId(0), SiteId(1));
        p.record(a, &SiteEvent::Submitted { jobs: vec![JobId(0), JobId(1), JobId(2)], at: 0.0 });
        for j in 0..3 {
            p.record(a, &SiteEvent::Removed { job: JobId(j), at: 20.0 });
        }
        assert_eq!(p.tally.sites[0].cut_short, 0);
        p.record(a, &SiteEvent::Started { job: JobId(0), at: 13.0 });
        p.record(a, &SiteEvent::Started { job: JobId(0), at: 14.0 });
        p.record(a, &SiteEvent::Started { job: JobId(1), at: 21.0 });
        p.record(b, &SiteEvent::Started { job: JobId(2), at: 15.0 });
        assert_eq!((p.tally.sites[0].cut_short, p.tally.sites[0].cut_short_seconds), (1, 7.0));
        assert_eq!(p.tally.sites[1].cut_short, 0);
        assert_eq!(p.tally.running, vec![0, 0], "nothing runs after its removal");
        // Its next attempt is retried as one cut short.
        p.record(b, &SiteEvent::Submitted { jobs: vec![JobId(0)], at: 30.0 });
        assert_eq!(p.tally.retry_causes.after_cut_short, 1);
        // Job 2 went to `b` before `a` told its start: still cut short at `a`.
        p.record(b, &SiteEvent::Submitted { jobs: vec![JobId(2)], at: 31.0 });
        p.record(a, &SiteEvent::Started { job: JobId(2), at: 18.0 });
        assert_eq!((p.tally.sites[0].cut_short, p.tally.sites[0].cut_short_seconds), (2, 9.0));
        assert_eq!(p.tally.running, vec![0, 0]);
    }

    #[test]
    fn a_grid_resource_down_is_shown_until_it_is_back() {
        let mut p = Progress::new("r", vec!["ce".into()], 1, 1.0, Display::Quiet);
        let ce = SiteId(0);
        p.record(ce, &SiteEvent::ResourceDown { job: JobId(0), at: 17.0 });
        assert_eq!(p.site_state(ce, 77.0), " grid resource down for 1m00s");
        p.record(ce, &SiteEvent::ResourceUp { job: JobId(0), at: 90.0 });
        assert_eq!(p.site_state(ce, 95.0), "");
        p.set_unreachable(ce, Some((100.0, "ERROR: Failed to connect".into())));
        assert_eq!(p.site_state(ce, 130.0), " schedd unreachable for 30s");
    }

    #[test]
    fn each_kind_is_counted_at_each_site_and_a_tally_of_other_kinds_is_refused() {
        let types =
            JobTypes::new(vec!["io".into(), "cpu".into()], vec![JobTypeId(0), JobTypeId(1), JobTypeId(1)])
                .unwrap();
        let mut p = Progress::new("r", vec!["a".into()], 3, 1.0, Display::Quiet).with_kinds(types.clone());
        let a = SiteId(0);
        p.record(a, &SiteEvent::Submitted { jobs: vec![JobId(0), JobId(1), JobId(2)], at: 0.0 });
        for job in 0..3 {
            p.record(a, &SiteEvent::Started { job: JobId(job), at: 10.0 });
        }
        assert_eq!(p.kind_counts(a), " [io 1r/0d cpu 2r/0d]");
        p.record(a, &SiteEvent::Ended { job: JobId(0), at: 110.0, outcome: Outcome::Success });
        p.record(a, &SiteEvent::Ended { job: JobId(1), at: 310.0, outcome: Outcome::Success });
        p.record(a, &SiteEvent::Removed { job: JobId(2), at: 20.0 });
        assert_eq!(p.kind_counts(a), " [io 0r/1d cpu 0r/1d]");
        let rows = p.kind_site_summaries(a);
        let got: Vec<(&str, u64, u32, Option<f64>)> =
            rows.iter().map(|k| (k.name.as_str(), k.done, k.running, k.mean_run_time)).collect();
        assert_eq!(got, [("io", 1, 0, Some(100.0)), ("cpu", 1, 0, Some(300.0))]);
        assert!(p.kind_lines(a)[1].contains("run time 300 s"), "{:?}", p.kind_lines(a));
        // Each kind's window and capacity, as its decisions last told them;
        // the site's own window, and a kind the run does not have, are not.
        let told = |kind: Option<&str>, window, capacity| Decision {
            job_kind: kind.map(str::to_string),
            ..Decision::of_site(5.0, a, DecisionKind::Window { window, capacity })
        };
        p.decisions(&[told(Some("cpu"), 8.0, None), told(Some("cpu"), 5.0, Some(4.0))]);
        p.decisions(&[told(None, 30.0, Some(20.0)), told(Some("gpu"), 9.0, Some(9.0))]);
        let told_of = |p: &Progress| {
            p.kind_site_summaries(a).iter().map(|k| (k.window, k.capacity)).collect::<Vec<_>>()
        };
        assert_eq!(told_of(&p), [(None, None), (Some(5.0), Some(4.0))]);
        assert!(p.kind_lines(a)[1].ends_with("window 5  capacity 4.0"), "{:?}", p.kind_lines(a));
        // A checkpoint's tally restores into a run of the same kinds only.
        let saved = p.checkpoint().unwrap();
        let mut same = Progress::new("r", vec!["a".into()], 3, 1.0, Display::Quiet).with_kinds(types);
        assert_eq!(same.restore(&saved), Ok(()));
        let mut one = Progress::new("r", vec!["a".into()], 3, 1.0, Display::Quiet);
        assert!(one.restore(&saved).is_err());
        assert_eq!(one.kind_counts(a), "", "a run of one kind shows no kinds");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(12.4), "12s");
        assert_eq!(format_duration(245.0), "4m05s");
        assert_eq!(format_duration(3723.0), "1h02m03s");
    }
}
