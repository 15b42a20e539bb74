//! The measurements of a simulated run (README "Metrics") and the
//! conservation checks every run must pass.

use super::model::{AttemptId, Scenario};
use super::waste::WasteSum;
use crate::policy::{JobBook, JobId, JobState, JobTypeId};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The successful attempt of one job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobRecord {
    pub job: u64,
    pub site: u32,
    pub submitted: f64,
    pub started: f64,
    pub ended: f64,
    /// All attempts of the job, this one included.
    pub attempts: u32,
}

/// One site's share of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteMetrics {
    pub name: String,
    /// Most of our jobs running at once there.
    pub peak_concurrency: u32,
    pub jobs_done: u64,
    /// What the policy believes the capacity is at the end, if anything.
    pub converged_capacity: Option<f64>,
    /// The true knee `min(slots, floor(C))` (C without windows).
    pub true_knee: u32,
}

/// The README's metrics for one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    /// End of the last job from t = 0; `None` for a hang.
    pub makespan: Option<f64>,
    /// Mean of end − submit of the successful attempts: the goodput area
    /// per job, summed in job order.
    pub mean_turnaround: f64,
    /// Their nearest-rank p95 ([`crate::stats`]).
    pub p95_turnaround: f64,
    /// Mean end time from t = 0 (fair to throttling policies).
    pub mean_completion: f64,
    /// Σ turnaround of successful attempts.
    pub goodput_area: f64,
    /// Σ (end − submit) of failed and removed attempts.
    pub wasted_area: f64,
    pub jobs_done: u64,
    /// When the run stopped (the horizon, for a hang).
    pub stopped_at: f64,
    pub sites: Vec<SiteMetrics>,
    /// Per kind of job, in the scenario's order; empty for a scenario of
    /// one kind (whose figures are the run's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<TypeMetrics>,
}

/// One kind of job's share of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TypeMetrics {
    pub name: String,
    /// End of the kind's last job from t = 0; `None` for a hang.
    pub makespan: Option<f64>,
    /// Mean end time of the kind's jobs from t = 0.
    pub mean_completion: f64,
    pub jobs_done: u64,
    /// Jobs of the kind done at each site, in site order.
    pub done_at: Vec<u64>,
}

/// How an attempt ended, as the simulator saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttemptEnd {
    Success,
    Failed,
    Removed,
    /// Held for a cause of the site (`p_hold`); `ended` is its removal.
    Held,
    /// Still at the site when the run stopped (a hang).
    Pending,
}

/// One attempt of one job at one site.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AttemptRecord {
    pub job: u64,
    pub site: u32,
    pub submitted: f64,
    pub started: Option<f64>,
    /// End, failure or removal time.
    pub ended: Option<f64>,
    pub end: AttemptEnd,
}

/// Every attempt of a run, checked and counted as the sites report it, so
/// that a run holds a few numbers per job and one record per attempt out,
/// not every attempt it ever made (a policy that takes back what has not
/// started makes many per job: 35 million at 10^6 jobs for `thesis`,
/// BENCHMARKS.md "Memory at scale").
pub struct Ledger {
    /// Per job, what its attempts came to so far.
    jobs: Vec<SoFar>,
    /// Per job, its successful attempt (meaningful where it has one).
    done: Vec<JobRecord>,
    /// Per site, the attempts out there now, by the site's number for them.
    live: Vec<BTreeMap<AttemptId, Live>>,
    wasted: WasteSum,
    errors: Vec<String>,
    /// Per site, most of our jobs running at once, as the model counts them.
    peaks: Vec<u32>,
    /// Site events reported (submissions, starts, ends, removals).
    events: u64,
    /// Per site, every attempt by its number, when the caller wants them.
    kept: Option<Vec<Vec<AttemptRecord>>>,
}

/// One job's attempts so far (40 bytes: a run of 10^6 jobs holds 10^6).
#[derive(Clone, Copy, Debug)]
struct SoFar {
    attempts: u32,
    successes: u16,
    /// Attempts out now.
    out: u8,
    /// An overlap was reported (once per job is enough).
    overlapped: bool,
    /// The site of the attempt that went out last, and of the one out or
    /// ended before it when the last went out (for the report of an
    /// overlap).
    last_site: u32,
    other_site: u32,
    /// When an attempt went out while another one was: their overlap
    /// starts there.
    doubled_at: f64,
    /// The latest end of an attempt that ended (−∞: none yet).
    last_end: f64,
    /// That end, if it came after the last attempt went out (−∞: no).
    ended_after: f64,
}

/// An attempt out at a site.
#[derive(Clone, Copy, Debug)]
struct Live {
    job: u64,
    submitted: f64,
    /// NaN until it starts.
    started: f64,
}

/// What a run's [`Ledger`] comes to.
pub struct Measured {
    pub metrics: Metrics,
    /// The successful attempt of every job that finished, in job order.
    pub jobs: Vec<JobRecord>,
    /// Every attempt, site by site in submission order, if they were kept.
    pub attempts: Vec<AttemptRecord>,
    /// Violated conservation rules.
    pub errors: Vec<String>,
    pub events: u64,
}

/// Two attempts of a job out for less than this together are not an
/// overlap: a withdrawal and a new submission at the same instant may come
/// in either order, and site clocks round to nanoseconds.
const SAME_INSTANT: f64 = 1e-6;

impl Ledger {
    /// A ledger for `n_jobs` jobs on `n_sites` sites; `keep` keeps every
    /// attempt's record besides (memory in proportion to the attempts).
    pub fn new(n_jobs: u64, n_sites: usize, keep: bool) -> Self {
        let n = n_jobs as usize;
        let none = SoFar {
            attempts: 0,
            successes: 0,
            out: 0,
            doubled_at: f64::NAN,
            last_end: f64::NEG_INFINITY,
            last_site: 0,
            other_site: 0,
            overlapped: false,
            ended_after: f64::NEG_INFINITY,
        };
        let unset = JobRecord { job: 0, site: 0, submitted: 0.0, started: 0.0, ended: 0.0, attempts: 0 };
        Ledger {
            jobs: vec![none; n],
            done: vec![unset; n],
            live: vec![BTreeMap::new(); n_sites],
            wasted: WasteSum::default(),
            errors: Vec::new(),
            peaks: vec![0; n_sites],
            events: 0,
            kept: keep.then(|| vec![Vec::new(); n_sites]),
        }
    }

    /// `attempt` (numbered by its site in submission order) of `job` went
    /// to `site` at `at`.
    pub fn submitted(&mut self, site: u32, attempt: AttemptId, job: u64, at: f64) {
        match self.jobs.get_mut(job as usize) {
            None => self.errors.push(format!("attempt of unknown job {job}")),
            Some(j) => {
                j.attempts += 1;
                if j.out > 0 {
                    j.doubled_at = at;
                }
                j.ended_after = if j.last_end - at > SAME_INSTANT { j.last_end } else { f64::NEG_INFINITY };
                j.out = j.out.saturating_add(1);
                j.other_site = j.last_site;
                j.last_site = site;
            }
        }
        if let Some(live) = self.live.get_mut(site as usize) {
            live.insert(attempt, Live { job, submitted: at, started: f64::NAN });
        }
        if let Some(kept) = self.kept.as_mut().and_then(|k| k.get_mut(site as usize)) {
            debug_assert_eq!(kept.len() as u64, attempt.0, "a site numbers its attempts from 0");
            kept.push(AttemptRecord {
                job,
                site,
                submitted: at,
                started: None,
                ended: None,
                end: AttemptEnd::Pending,
            });
        }
    }

    /// The job of `attempt` at `site` if it is still out there.
    pub fn out(&self, site: u32, attempt: AttemptId) -> Option<u64> {
        self.live.get(site as usize)?.get(&attempt).map(|l| l.job)
    }

    /// `attempt` at `site` started at `at`.
    pub fn started(&mut self, site: u32, attempt: AttemptId, at: f64) {
        let Some(live) = self.live.get_mut(site as usize).and_then(|l| l.get_mut(&attempt)) else {
            return;
        };
        live.started = at;
        let record = |end| AttemptRecord {
            job: live.job,
            site,
            submitted: live.submitted,
            started: Some(at),
            ended: None,
            end,
        };
        if at < live.submitted {
            self.errors.push(format!(
                "job {} at site {site}: submit ≤ start ≤ end violated: {:?}",
                live.job,
                record(AttemptEnd::Pending)
            ));
        }
        if let Some(r) = self.kept_mut(site, attempt) {
            r.started = Some(at);
        }
    }

    /// `attempt` at `site` ended at `at` as `end`; it is out no longer.
    pub fn ended(&mut self, site: u32, attempt: AttemptId, at: f64, end: AttemptEnd) {
        if let Some(r) = self.kept_mut(site, attempt) {
            r.ended = Some(at);
            r.end = end;
        }
        let Some(live) = self.live.get_mut(site as usize).and_then(|l| l.remove(&attempt)) else {
            return;
        };
        let started = (!live.started.is_nan()).then_some(live.started);
        let record =
            AttemptRecord { job: live.job, site, submitted: live.submitted, started, ended: Some(at), end };
        if !(live.submitted <= at && started.is_none_or(|s| s <= at)) {
            self.errors
                .push(format!("job {} at site {site}: submit ≤ start ≤ end violated: {record:?}", live.job));
        }
        let Some(j) = self.jobs.get_mut(live.job as usize) else { return };
        let overlap = (j.out >= 2 && at - j.doubled_at > SAME_INSTANT)
            || at.min(j.ended_after) - live.submitted > SAME_INSTANT;
        if overlap && !j.overlapped {
            j.overlapped = true;
            let (a, b) = (j.other_site, j.last_site);
            self.errors.push(format!("job {} was out at two sites at once (sites {a}, {b})", live.job));
        }
        j.out = j.out.saturating_sub(1);
        j.last_end = j.last_end.max(at);
        match end {
            AttemptEnd::Success => {
                if started.is_none() {
                    self.errors.push(format!("job {} succeeded without starting", live.job));
                }
                j.successes += 1;
                self.done[live.job as usize] = JobRecord {
                    job: live.job,
                    site,
                    submitted: live.submitted,
                    started: started.unwrap_or(live.submitted),
                    ended: at,
                    attempts: 0,
                };
            }
            AttemptEnd::Failed | AttemptEnd::Removed | AttemptEnd::Held => {
                self.wasted.add(live.job, live.submitted, site, attempt.0, at - live.submitted);
            }
            AttemptEnd::Pending => {}
        }
    }

    /// The model ran `running` of our jobs at `site` at once.
    pub fn saw_running(&mut self, site: u32, running: u32) {
        if let Some(peak) = self.peaks.get_mut(site as usize) {
            *peak = (*peak).max(running);
        }
    }

    /// Sites reported `n` more events.
    pub fn count_events(&mut self, n: u64) {
        self.events += n;
    }

    fn kept_mut(&mut self, site: u32, attempt: AttemptId) -> Option<&mut AttemptRecord> {
        self.kept.as_mut()?.get_mut(site as usize)?.get_mut(attempt.0 as usize)
    }

    /// Computes the metrics and checks conservation: every job done exactly
    /// once (unless the run hung), every kind's jobs all done, submit ≤
    /// start ≤ end, no job at two sites at once, peak concurrency ≤ slots,
    /// the policy's book agreeing with the sites. `kinds` is each job's
    /// kind, by job index.
    pub fn finish(
        self,
        scenario: &Scenario,
        kinds: &[JobTypeId],
        capacities: &[Option<f64>],
        book: &JobBook,
        hang: bool,
        stopped_at: f64,
    ) -> Measured {
        let Ledger { jobs: so_far, done, live, wasted, mut errors, peaks, events, kept } = self;
        // Attempts still out when the run stopped never end.
        let mut reported = BTreeSet::new();
        for l in live.iter().flat_map(|l| l.values()) {
            let Some(j) = so_far.get(l.job as usize).filter(|j| !j.overlapped) else { continue };
            let overlap = j.out >= 2 || j.ended_after - l.submitted > SAME_INSTANT;
            if overlap && reported.insert(l.job) {
                let (a, b) = (j.other_site, j.last_site);
                errors.push(format!("job {} was out at two sites at once (sites {a}, {b})", l.job));
            }
        }
        let mut jobs = done;
        let mut jobs_done_at = vec![0u64; scenario.sites.len()];
        let mut job = 0;
        jobs.retain_mut(|record| {
            let j = &so_far[job];
            let keep = match j.successes {
                1 => {
                    if let Some(count) = jobs_done_at.get_mut(record.site as usize) {
                        *count += 1;
                    }
                    record.attempts = j.attempts;
                    true
                }
                0 if hang || *book.state(JobId(job as u64)) == JobState::GivenUp => false,
                k => {
                    errors.push(format!("job {job} succeeded {k} times"));
                    false
                }
            };
            job += 1;
            keep
        });
        drop(so_far);
        let wasted = wasted.total().unwrap_or_else(|e| {
            errors.push(e);
            f64::NAN
        });
        if book.done() != jobs.len() as u64 {
            errors.push(format!("the policy counts {} jobs done, the sites {}", book.done(), jobs.len()));
        }
        let mut sites = Vec::with_capacity(scenario.sites.len());
        for (i, params) in scenario.sites.iter().enumerate() {
            let peak = peaks.get(i).copied().unwrap_or(0);
            if peak > params.slots {
                errors
                    .push(format!("site {}: {peak} jobs ran at once on {} slots", params.name, params.slots));
            }
            sites.push(SiteMetrics {
                name: params.name.clone(),
                peak_concurrency: peak,
                jobs_done: jobs_done_at[i],
                converged_capacity: capacities.get(i).copied().flatten(),
                true_knee: params.truth().knee_at(f64::NEG_INFINITY),
            });
        }
        let mut turnarounds: Vec<f64> = jobs.iter().map(|j| j.ended - j.submitted).collect();
        let done = jobs.len();
        // Summed in job order, not ascending as `stats::Summary`'s mean: the
        // bench's figures since the first baseline are these sums, bit for bit.
        let mean =
            |xs: &mut dyn Iterator<Item = f64>| if done == 0 { 0.0 } else { xs.sum::<f64>() / done as f64 };
        let mean_turnaround = mean(&mut turnarounds.iter().copied());
        let goodput_area = turnarounds.iter().sum();
        turnarounds.sort_unstable_by(f64::total_cmp);
        let types = if scenario.types.len() > 1 {
            type_metrics(scenario, kinds, &jobs, hang, &mut errors)
        } else {
            Vec::new()
        };
        let metrics = Metrics {
            makespan: if hang { None } else { Some(jobs.iter().map(|j| j.ended).fold(0.0, f64::max)) },
            mean_turnaround,
            p95_turnaround: crate::stats::nearest_rank(&turnarounds, 0.95).unwrap_or(0.0),
            mean_completion: mean(&mut jobs.iter().map(|j| j.ended)),
            goodput_area,
            wasted_area: wasted,
            jobs_done: done as u64,
            stopped_at,
            sites,
            types,
        };
        let attempts = kept.map_or_else(Vec::new, |k| k.into_iter().flatten().collect());
        Measured { metrics, jobs, attempts, errors, events }
    }
}

/// Each kind's figures, and the check that every job of each kind was done
/// (the count of jobs done is checked as a whole above; a policy that lost
/// one kind's job and ran another's twice would pass that).
fn type_metrics(
    scenario: &Scenario,
    kinds: &[JobTypeId],
    jobs: &[JobRecord],
    hang: bool,
    errors: &mut Vec<String>,
) -> Vec<TypeMetrics> {
    let mut types: Vec<TypeMetrics> = scenario
        .types
        .iter()
        .map(|t| TypeMetrics {
            name: t.name.clone(),
            makespan: None,
            mean_completion: 0.0,
            jobs_done: 0,
            done_at: vec![0; scenario.sites.len()],
        })
        .collect();
    let mut last = vec![0.0f64; types.len()];
    let mut sum = vec![0.0f64; types.len()];
    for j in jobs {
        let Some(t) = kinds.get(j.job as usize).map(|k| k.index()).filter(|&t| t < types.len()) else {
            errors.push(format!("job {} has no kind", j.job));
            continue;
        };
        types[t].jobs_done += 1;
        if let Some(at) = types[t].done_at.get_mut(j.site as usize) {
            *at += 1;
        }
        last[t] = last[t].max(j.ended);
        sum[t] += j.ended;
    }
    for (t, m) in types.iter_mut().enumerate() {
        let n_jobs = scenario.types[t].n_jobs;
        if !hang && m.jobs_done != n_jobs {
            errors.push(format!("type {}: {} of its {n_jobs} jobs done", m.name, m.jobs_done));
        }
        if m.done_at.iter().sum::<u64>() != m.jobs_done {
            errors.push(format!("type {}: jobs done at the sites do not add up to its jobs done", m.name));
        }
        m.makespan = (!hang).then_some(last[t]);
        m.mean_completion = if m.jobs_done == 0 { 0.0 } else { sum[t] / m.jobs_done as f64 };
    }
    types
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::parse_scenarios;

    const SUCCESS: AttemptEnd = AttemptEnd::Success;
    const REMOVED: AttemptEnd = AttemptEnd::Removed;

    /// A ledger of one job on 50 sites, with each site's next attempt number.
    fn ledger() -> (Ledger, Vec<u64>) {
        (Ledger::new(1, 50, false), vec![0; 50])
    }

    fn submit(l: &mut (Ledger, Vec<u64>), site: u32, at: f64) -> AttemptId {
        let attempt = AttemptId(l.1[site as usize]);
        l.1[site as usize] += 1;
        l.0.submitted(site, attempt, 0, at);
        attempt
    }

    /// Finishes `l` with a policy's book that counts `done` jobs done.
    fn finish(l: Ledger, hang: bool, done: bool) -> Measured {
        use crate::policy::{JobId, Outcome, SiteEvent, SiteId};
        let mut book = JobBook::new(1, 1, 3);
        if done {
            let (site, job) = (SiteId(0), JobId(0));
            book.take(site, 1);
            book.apply(site, &SiteEvent::Submitted { jobs: vec![job], at: 0.0 });
            book.apply(site, &SiteEvent::Started { job, at: 0.0 });
            book.apply(site, &SiteEvent::Ended { job, at: 1.0, outcome: Outcome::Success });
            assert_eq!(book.done(), 1);
        }
        let text = "[scenarios.X]\nn_jobs = 1\nbase_runtime = 100\njitter = 0.1\n\
                    sites = [{ name = \"s\", slots = 10, capacity = \"inf\", beta = 0.0, wait_mean = 1 }]\n";
        let (_, scenario) = parse_scenarios(text).expect("scenario parses").remove(0);
        l.finish(&scenario, &[], &[], &book, hang, 0.0)
    }

    #[test]
    fn a_withdrawal_and_a_resubmission_at_one_instant_do_not_overlap_in_either_order() {
        // Withdrawn from site 39 at t = 10 and sent to site 35 at t = 10:
        // the sites may report them either way round.
        let mut l = ledger();
        let withdrawn = submit(&mut l, 39, 0.0);
        l.0.ended(39, withdrawn, 10.0, REMOVED);
        submit(&mut l, 35, 10.0);
        let mut other_way = ledger();
        let withdrawn = submit(&mut other_way, 39, 0.0);
        submit(&mut other_way, 35, 10.0);
        other_way.0.ended(39, withdrawn, 10.0, REMOVED);
        // The same a nanosecond apart, as site clocks round.
        let mut rounded = ledger();
        let withdrawn = submit(&mut rounded, 39, 0.0);
        submit(&mut rounded, 35, 10.0 - 1e-9);
        rounded.0.ended(39, withdrawn, 10.0, REMOVED);
        for l in [l, other_way, rounded] {
            assert_eq!(l.0.errors, Vec::<String>::new());
        }
    }

    #[test]
    fn an_attempt_sent_while_another_is_out_overlaps_it() {
        let mut l = ledger();
        let out = submit(&mut l, 1, 0.0);
        let short = submit(&mut l, 2, 5.0);
        l.0.ended(2, short, 6.0, REMOVED);
        l.0.ended(1, out, 100.0, REMOVED);
        assert_eq!(l.0.errors, vec!["job 0 was out at two sites at once (sites 1, 2)"]);
        // Told in the other order: the earlier attempt's end heard first.
        let mut l = ledger();
        let out = submit(&mut l, 1, 0.0);
        l.0.ended(1, out, 100.0, REMOVED);
        let late = submit(&mut l, 2, 50.0);
        l.0.ended(2, late, 60.0, REMOVED);
        assert_eq!(l.0.errors, vec!["job 0 was out at two sites at once (sites 1, 2)"]);
        // One still out when the run stops overlaps whatever came after it.
        let mut l = ledger();
        submit(&mut l, 4, 0.0);
        submit(&mut l, 3, 100.0);
        let m = finish(l.0, true, false);
        assert_eq!(m.errors, vec!["job 0 was out at two sites at once (sites 4, 3)"]);
    }

    #[test]
    fn a_job_done_twice_or_without_starting_is_reported() {
        let mut l = ledger();
        let first = submit(&mut l, 1, 0.0);
        l.0.started(1, first, 1.0);
        l.0.ended(1, first, 10.0, SUCCESS);
        let again = submit(&mut l, 2, 20.0);
        l.0.ended(2, again, 30.0, SUCCESS);
        let m = finish(l.0, false, true);
        assert_eq!(m.errors[0], "job 0 succeeded without starting");
        assert!(m.errors.contains(&"job 0 succeeded 2 times".to_string()), "{:?}", m.errors);
        // Done once, counted once, with both its attempts.
        let mut l = ledger();
        let removed = submit(&mut l, 1, 0.0);
        l.0.ended(1, removed, 5.0, REMOVED);
        let done = submit(&mut l, 1, 5.0);
        l.0.started(1, done, 6.0);
        l.0.ended(1, done, 9.0, SUCCESS);
        let m = finish(l.0, false, true);
        assert!(m.errors.is_empty(), "{:?}", m.errors);
        assert_eq!(m.jobs.len(), 1);
        assert_eq!((m.jobs[0].attempts, m.jobs[0].started, m.jobs[0].ended), (2, 6.0, 9.0));
        assert_eq!(m.metrics.wasted_area, 5.0);
    }
}
