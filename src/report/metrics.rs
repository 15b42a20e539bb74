//! The numbers of a report, computed from job records. Pure.
//!
//! Definitions (also written into the report so readers need not guess):
//! - a job's turnaround, queue wait and run time, its outcome (terminated,
//!   removed, held) and the quantiles of each are those of [`crate::stats`],
//!   as `cosched log stats` prints them; AgTime (thesis) is the turnaround;
//! - a site's means are [`crate::stats::SiteMeans`], of its jobs that
//!   succeeded, as the run's summary shows them;
//! - makespan is [`crate::stats::makespan`] (seed 000's "time to complete a
//!   bag of tasks"): from the run's start, or the first 000 for logs alone,
//!   to the last 005/009 over all logs, as the run's summary shows it.
//! - efficiency (seed 000, equation 2) = NT·PTE / (makespan·NCU) · 100 with NT =
//!   terminated jobs, PTE = their mean run time (measured, not nominal), NCU =
//!   the peak number of jobs running at once (the cores the run actually used).
//! - throughput of a site = CPU-hours (slot wall time of running intervals) per
//!   elapsed hour, elapsed = the site's first 000 to its last 005/009.
//! - goodput area = sum of turnarounds (the area under the sorted-turnaround
//!   graph): degraded runs have a larger area.

use super::model::{JobRecord, Jobs, Part, RunDecisions};
use crate::policy::DecisionKind;
use crate::stats::{self, JobFigures, Outcome, SiteMeans};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

/// How many jobs ended which way ([`crate::stats::Outcome`]; terminated
/// jobs split by their last 005's return value).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counts {
    pub jobs: usize,
    pub terminated: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub removed: usize,
    pub held: usize,
    pub unfinished: usize,
    /// Executions removed while they ran ([`JobRecord::cut_short_seconds`]),
    /// and the slot-seconds they had used: thrown away.
    pub cut_short: usize,
    pub cut_short_seconds: f64,
}

impl Counts {
    fn add(&mut self, job: &JobRecord) {
        self.jobs += 1;
        if let Some(seconds) = job.cut_short_seconds() {
            self.cut_short += 1;
            self.cut_short_seconds += seconds;
        }
        match job.times.outcome() {
            Outcome::Completed => {
                self.terminated += 1;
                if job.succeeded() {
                    self.succeeded += 1;
                } else {
                    self.failed += 1;
                }
            }
            Outcome::Removed => self.removed += 1,
            Outcome::Held => self.held += 1,
            Outcome::Other => self.unfinished += 1,
        }
    }
}

/// One site's numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteSummary {
    pub name: String,
    /// A GridResource (true) or a log file name (false).
    pub grid: bool,
    pub counts: Counts,
    /// The means of its succeeded jobs ([`crate::stats::SiteMeans`]);
    /// AgTime is their turnaround.
    pub mean_agtime_s: Option<f64>,
    pub mean_queue_wait_s: Option<f64>,
    pub mean_run_time_s: Option<f64>,
    pub cpu_hours: f64,
    pub elapsed_hours: f64,
    /// CPU-hours per elapsed hour.
    pub throughput: Option<f64>,
    pub peak_running: u32,
}

impl Occupancy {
    /// The value of the step function at `t` (seconds since the origin).
    pub fn at(&self, t: f64) -> (u32, u32) {
        let i = self.t.partition_point(|&x| x <= t);
        if i == 0 {
            (0, 0)
        } else {
            (self.queued[i - 1], self.running[i - 1])
        }
    }
}

/// Queued and running jobs of one site over time: a step function; each point
/// holds from its time until the next point's. On an axis in spans
/// ([`OccupancyAxis`]) each point is the largest count of its span.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Occupancy {
    /// Seconds since the report's origin.
    pub t: Vec<f64>,
    pub queued: Vec<u32>,
    pub running: Vec<u32>,
}

/// Everything a report shows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub counts: Counts,
    /// Naive seconds of the origin of every time axis and of the makespan:
    /// the run's start in a cosched run's report, else the first 000.
    pub origin: f64,
    pub turnaround: Option<stats::Summary>,
    pub queue_wait: Option<stats::Summary>,
    pub run_time: Option<stats::Summary>,
    pub makespan_s: Option<f64>,
    /// Seed 000 equation 2, percent.
    pub efficiency_pct: Option<f64>,
    /// NCU of equation 2.
    pub peak_running: u32,
    /// PTE of equation 2: mean run time of terminated jobs, seconds.
    pub mean_run_time_s: Option<f64>,
    /// Sum of turnarounds, job-hours.
    pub goodput_area_job_hours: f64,
    /// Per site, most jobs first.
    pub sites: Vec<SiteSummary>,
    /// The sites past the first [`TOP_SITES`] taken together, when there are more.
    pub others: Option<SiteSummary>,
    /// Of `counts.cut_short`, the executions the run counted that no user
    /// log shows (see [`add_cut_short_unseen_in_logs`]).
    pub cut_short_unseen_in_logs: usize,
    /// Turnarounds in ascending order (the goodput graph), seconds.
    #[serde(skip)]
    pub sorted_turnarounds: Vec<f64>,
    /// Per site (same order as `sites`).
    #[serde(skip)]
    pub occupancy: Vec<Occupancy>,
    /// The sites in `others` together.
    #[serde(skip)]
    pub others_occupancy: Option<Occupancy>,
    /// All sites together.
    #[serde(skip)]
    pub total_occupancy: Occupancy,
    /// The width in seconds of the spans the occupancies are reduced to
    /// ([`OccupancyAxis`]), or `None` when they are exact.
    #[serde(skip)]
    pub occupancy_span: Option<f64>,
    /// What the policy decided, per site of a cosched run (see
    /// [`decision_series`]); empty for other logs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<DecisionSeries>,
    /// Each kind of job at each site of a cosched run of several kinds
    /// (see [`kind_rows`]); empty for other logs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<KindRow>,
}

/// One kind of job at one site of a run of several kinds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindRow {
    /// The site's name in the run.
    pub site: String,
    pub kind: String,
    /// Job records (attempts) of the kind in the site's log.
    pub jobs: usize,
    pub succeeded: usize,
    /// Mean run time of its attempts that succeeded, as the sites table's
    /// and the run's summary's.
    pub mean_run_time_s: Option<f64>,
}

/// Each kind of job at each site, sites in the run's order and each site's
/// kinds by name, from the kind the run recorded for each cluster
/// ([`SiteDecisions::kinds`](crate::report::model::SiteDecisions::kinds)); empty when the run recorded none. A job
/// whose cluster has no recorded kind counts under `?`.
pub fn kind_rows(jobs: &dyn Jobs, decisions: &RunDecisions) -> Vec<KindRow> {
    if decisions.sites.iter().all(|s| s.kinds.is_empty()) {
        return Vec::new();
    }
    // (site index, kind) → (jobs, succeeded, their means).
    let mut acc: std::collections::BTreeMap<(usize, String), (usize, usize, SiteMeans)> = Default::default();
    jobs.visit(Part::All, &mut |j| {
        let Some(at) = decisions.sites.iter().position(|s| s.log == j.file) else { return };
        let kind = decisions.sites[at].kinds.get(&j.cluster).map_or("?", String::as_str);
        let row = acc.entry((at, kind.to_string())).or_default();
        row.0 += 1;
        row.1 += usize::from(j.succeeded());
        row.2.add(&j.times, j.succeeded());
    });
    acc.into_iter()
        .map(|((at, kind), (jobs, succeeded, means))| KindRow {
            site: decisions.sites[at].site.clone(),
            kind,
            jobs,
            succeeded,
            mean_run_time_s: means.run_time(),
        })
        .collect()
}

/// One site's decisions on the report's time axis, and its running jobs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DecisionSeries {
    /// The site's name in the run.
    pub site: String,
    /// The window and the capacity found: a step function, each point
    /// holding until the next. In a run of several kinds, of all kinds
    /// together.
    pub windows: Vec<WindowPoint>,
    /// In a run of several kinds, each kind's own window and capacity at
    /// the site (each point names its kind; each kind's a step function).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kind_windows: Vec<WindowPoint>,
    /// Every verdict, each of a kind's test in a run of several kinds.
    pub verdicts: Vec<VerdictPoint>,
    /// The jobs of the site's log.
    #[serde(skip)]
    pub running: Occupancy,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowPoint {
    /// Seconds since the report's origin, the run's start (clamped to 0).
    pub t: f64,
    pub window: f64,
    pub capacity: Option<f64>,
    /// The kind of job whose window it is (in `kind_windows`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VerdictPoint {
    pub t: f64,
    pub healthy: bool,
    /// The kind of job whose test it was, in a run of several kinds (its
    /// jobs are the `level`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Jobs running when the test judged.
    pub level: f64,
    /// How many times slower than healthy jobs ran (degraded verdicts).
    pub slowdown: Option<f64>,
}

/// Sites charted one by one; the rest are charted as "others".
pub const TOP_SITES: usize = super::svg::MAX_SERIES;

/// Steps an occupancy keeps at most. Its exact step function has a step per
/// distinct event time (some four per job), which a run of 10^6 jobs makes
/// millions of, per site and again for all sites together, and the charts
/// drew every one: 604 MB for the report of 10^5 jobs. No chart is wider
/// than this many pixels anyway.
pub const MAX_OCCUPANCY_STEPS: usize = 2000;

/// The time axis every occupancy of one report shares: exact, or cut into
/// [`MAX_OCCUPANCY_STEPS`] equal spans of `[origin, horizon]` each holding
/// the largest count of its span (so peaks survive, and `peak_running` and
/// the efficiency stay exact). Shared so that the stacked charts can add
/// the sites span by span.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OccupancyAxis {
    pub origin: f64,
    pub horizon: f64,
    /// Width of a span, seconds; `None`: exact.
    pub span: Option<f64>,
}

impl OccupancyAxis {
    /// Exact when all of `jobs` together make no more than
    /// [`MAX_OCCUPANCY_STEPS`] changes to the counts, else in spans.
    pub fn for_jobs(jobs: &dyn Jobs, origin: f64, horizon: f64) -> Self {
        let mut n = 0usize;
        jobs.visit(Part::All, &mut |j| job_deltas(j, horizon, |_| n += 1));
        let span = (n > MAX_OCCUPANCY_STEPS && horizon > origin)
            .then(|| (horizon - origin) / MAX_OCCUPANCY_STEPS as f64);
        OccupancyAxis { origin, horizon, span }
    }
}

/// Computes the report's numbers, in passes over `jobs` (see
/// [`super::spill`] for what each keeps in memory); `start` is the run's
/// start on the logs' clock ([`RunDecisions::start`]), for a cosched run.
pub fn summarize(jobs: &dyn Jobs, start: Option<f64>) -> Summary {
    // One pass for what every job adds to: extremes, counts, and each site's
    // numbers, sites in order of first appearance.
    let mut origin = f64::INFINITY;
    let mut latest = f64::NEG_INFINITY;
    let mut last_end = f64::NEG_INFINITY;
    let mut counts = Counts::default();
    let mut sites: Vec<(Arc<str>, SiteAcc)> = Vec::new();
    let mut site_at: HashMap<Arc<str>, usize> = HashMap::new();
    jobs.visit(Part::All, &mut |j| {
        origin = origin.min(j.submitted);
        latest = [Some(j.submitted), j.started, j.ended, j.held_at]
            .into_iter()
            .flatten()
            .chain(j.runs.iter().filter_map(|r| r.1))
            .fold(latest, f64::max);
        last_end = j.ended.map_or(last_end, |e| last_end.max(e));
        counts.add(j);
        let at = *site_at.entry(j.site.clone()).or_insert_with(|| {
            sites.push((j.site.clone(), SiteAcc::default()));
            sites.len() - 1
        });
        sites[at].1.add(j);
    });
    let origin = start.unwrap_or(if origin.is_finite() { origin } else { 0.0 });
    let horizon = origin.max(latest);
    let figures = JobFigures::of(|f| jobs.visit(Part::All, &mut |j| f(&j.times)));
    let makespan_s = stats::makespan(origin, last_end.is_finite().then_some(last_end));

    let axis = OccupancyAxis::for_jobs(jobs, origin, horizon);
    let occupancy: Vec<Occupancy> =
        sites.iter().map(|(name, _)| occupancy_of(jobs, &[Part::Site(name)], axis)).collect();
    let mut order: Vec<usize> = (0..sites.len()).collect();
    order.sort_by(|&a, &b| sites[b].1.counts.jobs.cmp(&sites[a].1.counts.jobs).then(a.cmp(&b)));
    let summaries: Vec<SiteSummary> =
        order.iter().map(|&i| sites[i].1.summary(&sites[i].0, &occupancy[i])).collect();
    let (others, others_occupancy) = if sites.len() > TOP_SITES {
        // Added site by site in this order, as before the jobs were kept on
        // disk: a float sum's bits depend on the order.
        let rest: Vec<Part> = order[TOP_SITES..].iter().map(|&i| Part::Site(&sites[i].0)).collect();
        let occ = occupancy_of(jobs, &rest, axis);
        let mut acc = SiteAcc::default();
        for &part in &rest {
            jobs.visit(part, &mut |j| acc.add(j));
        }
        let mut summary = acc.summary(&format!("others ({} sites)", sites.len() - TOP_SITES), &occ);
        summary.grid = false;
        (Some(summary), Some(occ))
    } else {
        (None, None)
    };
    let mut occupancy = occupancy;
    let occupancy: Vec<Occupancy> = order.iter().map(|&i| std::mem::take(&mut occupancy[i])).collect();

    let total_occupancy = occupancy_of(jobs, &[Part::All], axis);
    let peak_running = total_occupancy.running.iter().copied().max().unwrap_or(0);
    let mean_run_time_s = figures.run_time.map(|s| s.mean);
    let efficiency_pct = match (makespan_s, figures.run_time) {
        (Some(m), Some(runs)) if m > 0.0 && peak_running > 0 => {
            Some(runs.n as f64 * runs.mean / (m * f64::from(peak_running)) * 100.0)
        }
        _ => None,
    };
    let mut sorted_turnarounds = Vec::with_capacity(figures.turnaround.map_or(0, |t| t.n));
    jobs.visit(Part::All, &mut |j| sorted_turnarounds.extend(j.turnaround()));
    sorted_turnarounds.sort_unstable_by(f64::total_cmp);
    Summary {
        counts,
        cut_short_unseen_in_logs: 0,
        origin,
        turnaround: figures.turnaround,
        queue_wait: figures.queue_wait,
        run_time: figures.run_time,
        makespan_s,
        efficiency_pct,
        peak_running,
        mean_run_time_s,
        goodput_area_job_hours: sorted_turnarounds.iter().sum::<f64>() / 3600.0,
        sites: summaries,
        others,
        sorted_turnarounds,
        occupancy,
        others_occupancy,
        total_occupancy,
        occupancy_span: axis.span,
        decisions: Vec::new(),
        kinds: Vec::new(),
    }
}

/// Adds to `summary` the executions each site's run counted cut short
/// beyond what its user log shows: a Condor-C job running at the remote
/// schedd when cosched removed it, before the local log heard of its start
/// (the run learns of that start from the remote `condor_q`), has no 001 in
/// the log. So the report agrees with the run's summary and `cosched
/// status`. A run without a tally changes nothing.
pub fn add_cut_short_unseen_in_logs(jobs: &dyn Jobs, summary: &mut Summary, decisions: &RunDecisions) {
    for site in &decisions.sites {
        let Some((counted, counted_seconds)) = site.cut_short else { continue };
        // And the site the log's jobs are shown under (a log holds one site's jobs).
        let (mut logged, mut logged_seconds, mut shown) = (0u64, 0.0, None);
        jobs.visit(Part::Log(site.log), &mut |j| {
            shown.get_or_insert_with(|| j.site.clone());
            if let Some(x) = j.cut_short_seconds() {
                (logged, logged_seconds) = (logged + 1, logged_seconds + x);
            }
        });
        if counted <= logged {
            continue;
        }
        let unseen = (counted - logged) as usize;
        let seconds = (counted_seconds - logged_seconds).max(0.0);
        summary.counts.cut_short += unseen;
        summary.counts.cut_short_seconds += seconds;
        summary.cut_short_unseen_in_logs += unseen;
        let row = summary.sites.iter_mut().find(|s| shown.as_deref() == Some(s.name.as_str()));
        if let Some(row) = row {
            row.counts.cut_short += unseen;
            row.counts.cut_short_seconds += seconds;
        }
    }
}

/// Each site's decisions of `decisions` on the axis of `summary` (made from
/// `jobs`), in time order, with the running jobs of the site's log. Sites
/// without decisions are left out.
pub fn decision_series(jobs: &dyn Jobs, summary: &Summary, decisions: &RunDecisions) -> Vec<DecisionSeries> {
    let origin = summary.origin;
    let horizon = origin + summary.total_occupancy.t.last().copied().unwrap_or(0.0);
    let axis = OccupancyAxis { origin, horizon, span: summary.occupancy_span };
    let at = |t: f64| (decisions.epoch_naive + t - origin).max(0.0);
    decisions
        .sites
        .iter()
        .filter(|s| !s.decisions.is_empty())
        .map(|s| {
            let mut ordered: Vec<&crate::policy::Decision> = s.decisions.iter().collect();
            ordered.sort_by(|a, b| a.at.total_cmp(&b.at));
            let mut windows = Vec::new();
            let mut kind_windows = Vec::new();
            let mut verdicts = Vec::new();
            for d in ordered {
                let kind = d.job_kind.clone();
                match d.kind {
                    DecisionKind::Window { window, capacity } => {
                        let point = WindowPoint { t: at(d.at), window, capacity, kind };
                        if point.kind.is_some() { &mut kind_windows } else { &mut windows }.push(point);
                    }
                    DecisionKind::Verdict { healthy, level, slowdown } => {
                        verdicts.push(VerdictPoint { t: at(d.at), healthy, kind, level, slowdown })
                    }
                }
            }
            let running = occupancy_of(jobs, &[Part::Log(s.log)], axis);
            DecisionSeries { site: s.site.clone(), windows, kind_windows, verdicts, running }
        })
        .collect()
}

/// A site's numbers, its jobs added in order.
#[derive(Debug)]
struct SiteAcc {
    counts: Counts,
    /// The first job's.
    grid: Option<bool>,
    first_submit: f64,
    last_end: f64,
    running_seconds: f64,
    means: SiteMeans,
}

impl Default for SiteAcc {
    fn default() -> Self {
        SiteAcc {
            counts: Counts::default(),
            grid: None,
            first_submit: f64::INFINITY,
            last_end: f64::NEG_INFINITY,
            // Where `f64`'s `Sum` starts: a site whose jobs never ran has -0.
            running_seconds: -0.0,
            means: SiteMeans::default(),
        }
    }
}

impl SiteAcc {
    fn add(&mut self, j: &JobRecord) {
        self.counts.add(j);
        self.grid.get_or_insert(j.grid);
        self.first_submit = self.first_submit.min(j.submitted);
        self.last_end = j.ended.map_or(self.last_end, |e| self.last_end.max(e));
        self.running_seconds += j.running_seconds;
        self.means.add(&j.times, j.succeeded());
    }

    fn summary(&self, name: &str, occ: &Occupancy) -> SiteSummary {
        let (first, last) = (self.first_submit, self.last_end);
        let elapsed_hours = if last > first { (last - first) / 3600.0 } else { 0.0 };
        let cpu_hours = self.running_seconds / 3600.0;
        SiteSummary {
            name: name.to_string(),
            grid: self.grid.unwrap_or(false),
            counts: self.counts.clone(),
            mean_agtime_s: self.means.turnaround(),
            mean_queue_wait_s: self.means.queue_wait(),
            mean_run_time_s: self.means.run_time(),
            cpu_hours,
            elapsed_hours,
            throughput: (elapsed_hours > 0.0).then(|| cpu_hours / elapsed_hours),
            peak_running: occ.running.iter().copied().max().unwrap_or(0),
        }
    }
}

/// Queued/running step function of the jobs of `parts` on `axis`. Held
/// jobs count as neither. Jobs still queued or running when the logs end
/// stay so until the horizon.
fn occupancy_of(jobs: &dyn Jobs, parts: &[Part], axis: OccupancyAxis) -> Occupancy {
    let OccupancyAxis { origin, horizon, span } = axis;
    // The times at which a job joins the queued, leaves it, starts and
    // stops running, each list sorted on its own: a million jobs make some
    // four million, 8 bytes each. Counted first, so that no vector holds
    // room for twice as many.
    let kind = |(_, dq, dr): (f64, i32, i32)| match (dq, dr) {
        (1, _) => 0,
        (-1, _) => 1,
        (_, 1) => 2,
        _ => 3,
    };
    const STEP: [(i64, i64); 4] = [(1, 0), (-1, 0), (0, 1), (0, -1)];
    let mut n = [0usize; 4];
    for &part in parts {
        jobs.visit(part, &mut |j| job_deltas(j, horizon, |d| n[kind(d)] += 1));
    }
    let mut times: [Vec<f64>; 4] = n.map(Vec::with_capacity);
    for &part in parts {
        jobs.visit(part, &mut |j| job_deltas(j, horizon, |d| times[kind(d)].push(d.0)));
    }
    for list in &mut times {
        list.sort_unstable_by(f64::total_cmp);
    }
    // (time since origin, queued, running) after each distinct time: the
    // changes at one time are summed together, whatever their order.
    let (mut q, mut r) = (0i64, 0i64);
    let mut next = [0usize; 4];
    let steps = std::iter::from_fn(|| {
        let t = (0..4).filter_map(|k| times[k].get(next[k]).copied()).min_by(f64::total_cmp)?;
        for k in 0..4 {
            while times[k].get(next[k]) == Some(&t) {
                q += STEP[k].0;
                r += STEP[k].1;
                next[k] += 1;
            }
        }
        Some((t - origin, q.max(0) as u32, r.max(0) as u32))
    });
    match span {
        None => {
            let mut occ = Occupancy::default();
            for (t, q, r) in steps {
                occ.t.push(t);
                occ.queued.push(q);
                occ.running.push(r);
            }
            occ
        }
        Some(width) => in_spans(steps, horizon - origin, width),
    }
}

/// The step function `steps` (as [`occupancy_of`] makes it) over
/// `[0, length]` cut into spans of `width`: one step per span, each the
/// largest count held in it, and a last one at `length`. Every occupancy on
/// one axis gets the same steps.
fn in_spans(steps: impl Iterator<Item = (f64, u32, u32)>, length: f64, width: f64) -> Occupancy {
    let n = ((length / width).round() as usize).max(1);
    let first = |t: f64| ((t / width).floor().max(0.0) as usize).min(n - 1);
    // A value held up to `end` reaches the span before a boundary `end` is on.
    let last = |end: f64| ((end / width).ceil().max(1.0) as usize - 1).min(n - 1);
    let mut queued = vec![0u32; n];
    let mut running = vec![0u32; n];
    let mut held: Option<(f64, u32, u32)> = None;
    let mut hold = |from: f64, to: f64, q: u32, r: u32| {
        for k in first(from)..=last(to).max(first(from)) {
            queued[k] = queued[k].max(q);
            running[k] = running[k].max(r);
        }
    };
    for (t, q, r) in steps {
        if let Some((from, hq, hr)) = held.replace((t, q, r)) {
            if t > from {
                hold(from, t, hq, hr);
            }
        }
    }
    let (end_q, end_r) = match held {
        Some((from, q, r)) => {
            hold(from, from, q, r);
            (q, r)
        }
        None => (0, 0),
    };
    let mut occ = Occupancy { t: (0..n).map(|k| k as f64 * width).collect(), queued, running };
    occ.t.push(length);
    occ.queued.push(end_q);
    occ.running.push(end_r);
    occ
}

/// One job's changes to the queued and running counts, as (time, Δqueued,
/// Δrunning).
fn job_deltas(j: &JobRecord, horizon: f64, mut delta: impl FnMut((f64, i32, i32))) {
    let stop = j.held_at.into_iter().chain(j.ended).fold(horizon, f64::min);
    // Queued from submission until the first run (or the stop), and
    // between runs (after an eviction).
    let mut queued_from = Some(j.submitted);
    for &(start, end) in &j.runs {
        if let Some(q) = queued_from.take() {
            if start > q {
                delta((q, 1, 0));
                delta((start.min(stop), -1, 0));
            }
        }
        let end = end.unwrap_or(horizon);
        delta((start, 0, 1));
        delta((end, 0, -1));
        if end < stop {
            queued_from = Some(end);
        }
    }
    if let Some(q) = queued_from {
        if stop > q {
            delta((q, 1, 0));
            delta((stop, -1, 0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{jobs_from_events, JobEnd, LogEvent, SiteDecisions};

    fn job(proc: i64, submit: f64, start: f64, end: f64, rv: i64) -> Vec<LogEvent> {
        let mut e = LogEvent::new(5, 1, proc, end);
        e.return_value = Some(rv);
        vec![LogEvent::new(0, 1, proc, submit), LogEvent::new(1, 1, proc, start), e]
    }

    #[test]
    fn makespan_efficiency_and_occupancy() {
        // Two jobs on one site: [0,10) queued→[10,110) run; [0,0) → [0,50) run.
        let mut evs = job(0, 100.0, 110.0, 210.0, 0);
        evs.extend(job(1, 100.0, 100.0, 150.0, 1));
        let jobs = jobs_from_events(&[("s.log".into(), evs)]);
        let s = summarize(&jobs, None);
        assert_eq!(s.makespan_s, Some(110.0));
        assert_eq!(s.peak_running, 2);
        assert_eq!(s.counts.succeeded, 1);
        assert_eq!(s.counts.failed, 1);
        // NT·PTE = 100 + 50; makespan·NCU = 110·2.
        let eff = s.efficiency_pct.unwrap();
        assert!((eff - 150.0 / 220.0 * 100.0).abs() < 1e-9, "{eff}");
        assert_eq!(s.turnaround.as_ref().unwrap().mean, (110.0 + 50.0) / 2.0);
        assert!((s.goodput_area_job_hours - 160.0 / 3600.0).abs() < 1e-12);
        let occ = &s.occupancy[0];
        assert_eq!(occ.t, vec![0.0, 10.0, 50.0, 110.0]);
        assert_eq!(occ.queued, vec![1, 0, 0, 0]);
        assert_eq!(occ.running, vec![1, 2, 1, 0]);
        let site = &s.sites[0];
        assert!((site.cpu_hours - 150.0 / 3600.0).abs() < 1e-12);
        assert!((site.throughput.unwrap() - 150.0 / 110.0).abs() < 1e-9);
        // The site's means are its succeeded job's: queued 10 s, ran 100 s.
        let means = (site.mean_queue_wait_s, site.mean_run_time_s, site.mean_agtime_s);
        assert_eq!(means, (Some(10.0), Some(100.0), Some(110.0)));
        // A cosched run's report counts from the run's start, here 30 s
        // before the first submit, as its summary does.
        let run = summarize(&jobs, Some(70.0));
        assert_eq!((run.origin, run.makespan_s), (70.0, Some(140.0)));
        assert_eq!(run.occupancy[0].t[0], 30.0);
    }

    #[test]
    fn executions_the_run_counted_cut_short_beyond_its_logs_are_added_to_their_site() {
        // Log 0: job 1.0 ran 100-130 and was removed (009) at 130: cut
        // short by 30 s. Job 1.1 was removed while idle: not cut short.
        // The run counted 3 at that site (two more removed at the remote
        // schedd before the log heard of their start), 50 slot-s in all.
        let mut evs = vec![
            LogEvent::new(0, 1, 0, 100.0),
            LogEvent::new(1, 1, 0, 100.0),
            LogEvent::new(9, 1, 0, 130.0),
            LogEvent::new(0, 1, 1, 100.0),
            LogEvent::new(9, 1, 1, 130.0),
        ];
        let other = job(0, 100.0, 110.0, 210.0, 0);
        evs.sort_by(|a, b| a.time.total_cmp(&b.time));
        let jobs = jobs_from_events(&[("a.log".into(), evs), ("b.log".into(), other)]);
        let mut s = summarize(&jobs, None);
        assert_eq!((s.counts.cut_short, s.counts.cut_short_seconds), (1, 30.0));
        let site = |log: usize, counted: Option<(u64, f64)>| SiteDecisions {
            site: format!("s{log}"),
            log,
            decisions: Vec::new(),
            cut_short: counted,
            kinds: Default::default(),
        };
        let decisions =
            RunDecisions { epoch_naive: 0.0, sites: vec![site(0, Some((3, 50.0))), site(1, Some((0, 0.0)))] };
        add_cut_short_unseen_in_logs(&jobs, &mut s, &decisions);
        assert_eq!((s.counts.cut_short, s.counts.cut_short_seconds), (3, 50.0));
        assert_eq!(s.cut_short_unseen_in_logs, 2);
        let row = |log: usize| {
            let name = &jobs.iter().find(|j| j.file == log).expect("a job per log").site;
            s.sites.iter().find(|x| x.name == **name).expect("a row per site").counts.clone()
        };
        assert_eq!((row(0).cut_short, row(0).cut_short_seconds), (3, 50.0));
        assert_eq!(row(1).cut_short, 0);

        // A run that counted no more than the log, or kept no tally, changes nothing.
        let mut t = summarize(&jobs, None);
        let fewer = RunDecisions { epoch_naive: 0.0, sites: vec![site(0, Some((1, 30.0))), site(1, None)] };
        add_cut_short_unseen_in_logs(&jobs, &mut t, &fewer);
        assert_eq!((t.counts.cut_short, t.cut_short_unseen_in_logs), (1, 0));
    }

    #[test]
    fn each_kind_at_each_site_from_the_kinds_the_run_recorded_per_cluster() {
        // Log 0 (site s0): cluster 1 is `io`, cluster 2 `cpu`. io: proc 0
        // runs 110-210 (100 s, rv 0), proc 1 runs 100-150 (50 s, rv 1):
        // 2 jobs, 1 succeeded, whose run time is the mean, 100 s (the failed
        // one's is not: a site's means are of its succeeded jobs). cpu: 2.0 runs 120-420
        // (300 s, rv 0). Log 1 (site s1): cluster 1 has no recorded kind.
        let mut a = job(0, 100.0, 110.0, 210.0, 0);
        a.extend(job(1, 100.0, 100.0, 150.0, 1));
        let mut cpu = job(0, 100.0, 120.0, 420.0, 0);
        for e in &mut cpu {
            e.cluster = 2;
        }
        a.extend(cpu);
        a.sort_by(|x, y| x.time.total_cmp(&y.time));
        let jobs = jobs_from_events(&[("a.log".into(), a), ("b.log".into(), job(0, 0.0, 1.0, 11.0, 0))]);
        let site = |log: usize, kinds: &[(i64, &str)]| SiteDecisions {
            site: format!("s{log}"),
            log,
            decisions: Vec::new(),
            cut_short: None,
            kinds: kinds.iter().map(|(c, k)| (*c, k.to_string())).collect(),
        };
        let run =
            RunDecisions { epoch_naive: 0.0, sites: vec![site(0, &[(1, "io"), (2, "cpu")]), site(1, &[])] };
        let rows: Vec<(String, String, usize, usize, Option<f64>)> = kind_rows(&jobs, &run)
            .into_iter()
            .map(|r| (r.site, r.kind, r.jobs, r.succeeded, r.mean_run_time_s))
            .collect();
        assert_eq!(
            rows,
            [
                ("s0".into(), "cpu".into(), 1, 1, Some(300.0)),
                ("s0".into(), "io".into(), 2, 1, Some(100.0)),
                ("s1".into(), "?".into(), 1, 1, Some(10.0)),
            ]
        );
        let one_kind = RunDecisions { epoch_naive: 0.0, sites: vec![site(0, &[]), site(1, &[])] };
        assert!(kind_rows(&jobs, &one_kind).is_empty(), "a run of one kind shows no kinds");
    }

    /// `n` jobs at three sites, submitted one a second, each queued a
    /// while and running a while (deterministic, uneven).
    fn many_jobs(n: usize) -> Vec<JobRecord> {
        let sites: Vec<std::sync::Arc<str>> = ["a", "b", "c"].iter().map(|&s| s.into()).collect();
        (0..n)
            .map(|i| {
                let submitted = 1000.0 + i as f64;
                let started = submitted + (i * 7919 % 600) as f64;
                let ended = started + 300.0 + (i * 104_729 % 900) as f64;
                JobRecord {
                    file: i % 3,
                    cluster: i as i64,
                    proc: 0,
                    subproc: 0,
                    site: sites[i % 3].clone(),
                    grid: false,
                    submitted,
                    started: Some(started),
                    ended: Some(ended),
                    held_at: None,
                    end: JobEnd::Success,
                    running_seconds: ended - started,
                    runs: vec![(started, Some(ended))],
                    times: crate::stats::JobTimes {
                        submit: Some(submitted),
                        first_execute: Some(started),
                        last_execute: Some(started),
                        terminate: Some(ended),
                        ..Default::default()
                    },
                    exit_ok: true,
                }
            })
            .collect()
    }

    #[test]
    fn occupancies_are_bounded_whatever_the_jobs_and_keep_their_peaks() {
        for n in [10_000, 40_000] {
            let jobs = many_jobs(n);
            let s = summarize(&jobs, None);
            let span = s.occupancy_span.expect("this many changes are cut into spans");
            let all = s.occupancy.iter().chain(s.others_occupancy.iter()).chain([&s.total_occupancy]);
            for occ in all {
                assert_eq!(occ.t.len(), MAX_OCCUPANCY_STEPS + 1, "{n} jobs");
                assert_eq!(occ.t, s.total_occupancy.t, "one axis for all");
            }
            // The exact step function, to compare with.
            let horizon = s.origin + s.total_occupancy.t.last().unwrap();
            let exact =
                occupancy_of(&jobs, &[Part::All], OccupancyAxis { origin: s.origin, horizon, span: None });
            assert!(exact.t.len() > 4 * MAX_OCCUPANCY_STEPS, "the exact one is long: {}", exact.t.len());
            assert_eq!(s.peak_running, exact.running.iter().copied().max().unwrap(), "peak kept exactly");
            // Each span holds the largest count within it: never below the
            // exact count at any moment, and reached somewhere in the span.
            for (k, &t0) in s.total_occupancy.t[..MAX_OCCUPANCY_STEPS].iter().enumerate() {
                let (_, top) = s.total_occupancy.at(t0);
                let within: Vec<u32> = exact
                    .t
                    .iter()
                    .zip(&exact.running)
                    .filter(|(&t, _)| t >= t0 && t < t0 + span)
                    .map(|(_, &r)| r)
                    .chain([exact.at(t0).1])
                    .collect();
                assert_eq!(top, within.iter().copied().max().unwrap(), "span {k} of {n} jobs");
            }
        }
    }

    #[test]
    fn the_page_does_not_grow_with_the_jobs() {
        let page = |n| {
            super::super::html::page(
                &summarize(&many_jobs(n), None),
                &["a".into(), "b".into(), "c".into()],
                0,
            )
            .len()
        };
        let (small, large) = (page(10_000), page(80_000));
        assert!(large < small * 3 / 2, "{small} bytes for 10^4 jobs, {large} for 8×10^4: it grows with them");
        assert!(large < 2_000_000, "{large} bytes");
    }
}
