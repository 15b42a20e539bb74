//! The measurements of a simulated run (README "Metrics") and the
//! conservation checks every run must pass.

use super::backend::{AttemptEnd, AttemptRecord};
use super::model::Scenario;
use crate::policy::{JobBook, JobId, JobState, JobTypeId};
use serde::Serialize;

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

/// The first pair of one job's attempts (sorted by submission) that were
/// out for an overlapping stretch of time, as (site, site). Only an overlap
/// of positive length counts: a withdrawal and a new submission at the same
/// instant may come in either order among simultaneous attempts, and site
/// clocks round to nanoseconds, so the two instants may differ by that much.
fn first_overlap(list: &[&AttemptRecord]) -> Option<(u32, u32)> {
    const SAME_INSTANT: f64 = 1e-6;
    // Of the earlier attempts, the one out longest overlaps the current
    // one most (all began no later than it).
    let mut longest: Option<&AttemptRecord> = None;
    for &attempt in list {
        if let Some(earlier) = longest {
            let end = |a: &AttemptRecord| a.ended.unwrap_or(f64::INFINITY);
            if end(earlier).min(end(attempt)) - attempt.submitted > SAME_INSTANT {
                return Some((earlier.site, attempt.site));
            }
        }
        let out_longer = |a: &AttemptRecord| {
            longest.is_none_or(|l| a.ended.is_none_or(|e| l.ended.is_some_and(|le| e > le)))
        };
        if out_longer(attempt) {
            longest = Some(attempt);
        }
    }
    None
}

/// Computes the metrics and checks conservation: every job done exactly once
/// (unless the run hung), every kind's jobs all done, submit ≤ start ≤ end,
/// no job at two sites at once, peak concurrency ≤ slots, the policy's book
/// agreeing with the sites. `kinds` is each job's kind, by job index.
#[allow(clippy::too_many_arguments)] // one run's every record, each its own fact
pub fn measure(
    scenario: &Scenario,
    kinds: &[JobTypeId],
    attempts: &[AttemptRecord],
    peaks: &[u32],
    capacities: &[Option<f64>],
    book: &JobBook,
    hang: bool,
    stopped_at: f64,
) -> (Metrics, Vec<JobRecord>, Vec<String>) {
    let n = scenario.n_jobs() as usize;
    let mut errors = Vec::new();
    for a in attempts {
        if a.job as usize >= n {
            errors.push(format!("attempt of unknown job {}", a.job));
        }
        let ordered = match (a.started, a.ended) {
            (Some(s), Some(e)) => a.submitted <= s && s <= e,
            (Some(s), None) => a.submitted <= s,
            (None, Some(e)) => a.submitted <= e,
            (None, None) => true,
        };
        if !ordered {
            errors.push(format!("job {} at site {}: submit ≤ start ≤ end violated: {a:?}", a.job, a.site));
        }
        if a.end == AttemptEnd::Success && a.started.is_none() {
            errors.push(format!("job {} succeeded without starting", a.job));
        }
    }
    // Each job's attempts in submission order: one index array, not a list
    // per job.
    let mut by_job: Vec<u32> =
        (0..attempts.len() as u32).filter(|&i| (attempts[i as usize].job as usize) < n).collect();
    by_job.sort_by(|&a, &b| {
        let (a, b) = (&attempts[a as usize], &attempts[b as usize]);
        a.job.cmp(&b.job).then(a.submitted.total_cmp(&b.submitted))
    });
    let mut jobs = Vec::with_capacity(n);
    let mut jobs_done_at = vec![0u64; scenario.sites.len()];
    let mut wasted = 0.0;
    let mut rest = &by_job[..];
    for job in 0..n as u64 {
        let len = rest.iter().take_while(|&&i| attempts[i as usize].job == job).count();
        let list: Vec<&AttemptRecord> = rest[..len].iter().map(|&i| &attempts[i as usize]).collect();
        rest = &rest[len..];
        if let Some((first, second)) = first_overlap(&list) {
            errors.push(format!("job {job} was out at two sites at once (sites {first}, {second})"));
        }
        let successes: Vec<_> = list.iter().filter(|a| a.end == AttemptEnd::Success).collect();
        match successes.len() {
            1 => {
                let a = successes[0];
                if let Some(count) = jobs_done_at.get_mut(a.site as usize) {
                    *count += 1;
                }
                jobs.push(JobRecord {
                    job,
                    site: a.site,
                    submitted: a.submitted,
                    started: a.started.unwrap_or(a.submitted),
                    ended: a.ended.unwrap_or(a.submitted),
                    attempts: list.len() as u32,
                });
            }
            0 if hang || *book.state(JobId(job)) == JobState::GivenUp => {}
            k => errors.push(format!("job {job} succeeded {k} times")),
        }
        for a in list
            .iter()
            .filter(|a| matches!(a.end, AttemptEnd::Failed | AttemptEnd::Removed | AttemptEnd::Held))
        {
            wasted += a.ended.unwrap_or(a.submitted) - a.submitted;
        }
    }
    if book.done() != jobs.len() as u64 {
        errors.push(format!("the policy counts {} jobs done, the sites {}", book.done(), jobs.len()));
    }
    let mut sites = Vec::with_capacity(scenario.sites.len());
    for (i, params) in scenario.sites.iter().enumerate() {
        let peak = peaks.get(i).copied().unwrap_or(0);
        if peak > params.slots {
            errors.push(format!("site {}: {peak} jobs ran at once on {} slots", params.name, params.slots));
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
    (metrics, jobs, errors)
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

    fn attempt(site: u32, submitted: f64, ended: Option<f64>) -> AttemptRecord {
        AttemptRecord { job: 0, site, submitted, started: None, ended, end: AttemptEnd::Removed }
    }

    #[test]
    fn a_withdrawal_and_a_resubmission_at_one_instant_do_not_overlap_in_either_order() {
        // Withdrawn from site 39 at t = 10 and sent to site 35 at t = 10:
        // the sort by submission may list them either way round.
        let withdrawn = attempt(39, 10.0, Some(10.0));
        let resent = attempt(35, 10.0, None);
        assert_eq!(first_overlap(&[&withdrawn, &resent]), None);
        assert_eq!(first_overlap(&[&resent, &withdrawn]), None);
        // The same a nanosecond apart, as site clocks round.
        let resent_early = attempt(35, 10.0 - 1e-9, None);
        assert_eq!(first_overlap(&[&resent_early, &withdrawn]), None);
    }

    #[test]
    fn an_attempt_sent_while_another_is_out_overlaps_it() {
        let out = attempt(1, 0.0, Some(100.0));
        let short = attempt(2, 5.0, Some(6.0));
        let after = attempt(3, 100.0, None);
        assert_eq!(first_overlap(&[&out, &short, &after]), Some((1, 2)));
        assert_eq!(first_overlap(&[&out, &after]), None);
        // One still out overlaps whatever comes after it.
        let still_out = attempt(4, 0.0, None);
        assert_eq!(first_overlap(&[&still_out, &after]), Some((4, 3)));
    }
}
