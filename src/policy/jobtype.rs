//! Which kind of job each job of a run is: the one thing a policy is told of
//! a job beyond its index. A run may hold several kinds at once (in a real
//! run, one per submit description; in the simulator, the scenario's
//! `types`); a kind loads a site's shared resource and runs at a site's
//! speed in its own way, which a policy has to learn per site and per kind.
//!
//! A policy keys what it learns on [`JobTypeId`], the kind's index in the
//! run's list; the names are for people. A run of one kind has one type,
//! index 0, and every policy that ignores types decides as it always did.

use super::{JobId, SiteEvent};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Index of a kind of job in the run's [`JobTypes`] (0 in a run of one kind).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobTypeId(pub u16);

impl JobTypeId {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// The kinds of job of a run, and each job's kind.
#[derive(Clone, Debug, PartialEq)]
pub struct JobTypes {
    /// Each kind's name, for people; never empty.
    names: Vec<String>,
    /// Jobs of each kind.
    counts: Vec<u64>,
    /// Each job's kind, by job index; empty when the run has one kind, so a
    /// run of one kind costs nothing per job.
    of_job: Arc<[JobTypeId]>,
}

impl Default for JobTypes {
    fn default() -> Self {
        JobTypes::single(0)
    }
}

/// The name of the one kind of a run that does not name its kinds.
pub const SINGLE_TYPE: &str = "job";

impl JobTypes {
    /// `n_jobs` jobs of one kind.
    pub fn single(n_jobs: u64) -> Self {
        JobTypes { names: vec![SINGLE_TYPE.into()], counts: vec![n_jobs], of_job: Arc::from(Vec::new()) }
    }

    /// Kinds named `names`, job `j` of kind `of_job[j]`. Fails if a job
    /// names a kind that is not in the list, or the list is empty or too
    /// long for a [`JobTypeId`].
    pub fn new(names: Vec<String>, of_job: Vec<JobTypeId>) -> Result<Self, String> {
        if names.is_empty() {
            return Err("a run needs at least one job type".into());
        }
        if names.len() > usize::from(u16::MAX) {
            return Err(format!("{} job types: at most {} are supported", names.len(), u16::MAX));
        }
        let mut counts = vec![0u64; names.len()];
        for (j, t) in of_job.iter().enumerate() {
            match counts.get_mut(t.index()) {
                Some(c) => *c += 1,
                None => return Err(format!("job {j} is of type #{}, but the run has {}", t.0, names.len())),
            }
        }
        if names.len() == 1 {
            return Ok(JobTypes { names, counts, of_job: Arc::from(Vec::new()) });
        }
        Ok(JobTypes { names, counts, of_job: Arc::from(of_job) })
    }

    /// The same jobs seen as one kind (`--blind-types`: what a policy does
    /// without knowing kinds).
    pub fn blind(&self) -> Self {
        JobTypes::single(self.counts.iter().sum())
    }

    /// How many kinds the run has (at least 1).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Never: a run has at least one kind.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether the run has more than one kind.
    pub fn several(&self) -> bool {
        self.names.len() > 1
    }

    /// The kind of `job` (0 for a job beyond the list, which a run of one
    /// kind does not keep).
    pub fn of(&self, job: JobId) -> JobTypeId {
        self.of_job.get(job.0 as usize).copied().unwrap_or_default()
    }

    pub fn name(&self, t: JobTypeId) -> &str {
        self.names.get(t.index()).map_or("?", String::as_str)
    }

    /// Jobs of kind `t`.
    pub fn count(&self, t: JobTypeId) -> u64 {
        self.counts.get(t.index()).copied().unwrap_or(0)
    }

    /// Every kind, in order.
    pub fn ids(&self) -> impl Iterator<Item = JobTypeId> {
        (0..self.names.len() as u16).map(JobTypeId)
    }
}

/// The jobs of each kind numbered `0..n_t` in the order of the run's
/// numbers: how a policy that keeps one book per kind (a lane) speaks of
/// them, and how it turns its lanes' words back into the run's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KindNumbers {
    /// The kind of each job of the run, with its number within the kind.
    of_job: Vec<(JobTypeId, u64)>,
    /// Per kind, the run's number of each of its jobs.
    jobs: Vec<Vec<JobId>>,
}

impl KindNumbers {
    pub fn new(types: &JobTypes, n_jobs: u64) -> Self {
        let mut jobs = vec![Vec::new(); types.len()];
        let of_job = (0..n_jobs)
            .map(|j| {
                let t = types.of(JobId(j));
                let kind = &mut jobs[t.index()];
                kind.push(JobId(j));
                (t, kind.len() as u64 - 1)
            })
            .collect();
        KindNumbers { of_job, jobs }
    }

    /// Jobs of kind `t`, in the run's numbers (index: the kind's number).
    pub fn jobs_of(&self, t: JobTypeId) -> &[JobId] {
        self.jobs.get(t.index()).map_or(&[], Vec::as_slice)
    }

    /// The run's number of job `local` of kind `t`.
    pub fn global(&self, t: JobTypeId, local: JobId) -> JobId {
        self.jobs[t.index()][local.0 as usize]
    }

    /// The kind of `job`, and its number within the kind.
    pub fn local(&self, job: JobId) -> (JobTypeId, JobId) {
        let (t, local) = self.of_job[job.0 as usize];
        (t, JobId(local))
    }

    /// `event` with only kind `t`'s jobs, in their own numbers; `None` if
    /// it is about none of them. A site's grid resource going down or up is
    /// about the site, whatever job's log told it: every kind hears it
    /// (about its own job 0 where the job was another kind's).
    pub fn localize(&self, t: JobTypeId, event: &SiteEvent) -> Option<SiteEvent> {
        let one = |job: &JobId| {
            let (kind, local) = self.local(*job);
            (kind == t).then_some(local)
        };
        let many = |jobs: &[JobId]| -> Option<Vec<JobId>> {
            let v: Vec<JobId> = jobs.iter().filter_map(one).collect();
            (!v.is_empty()).then_some(v)
        };
        Some(match event {
            SiteEvent::Submitted { jobs, at } => SiteEvent::Submitted { jobs: many(jobs)?, at: *at },
            SiteEvent::SubmitFailed { jobs, error, permanent } => {
                SiteEvent::SubmitFailed { jobs: many(jobs)?, error: error.clone(), permanent: *permanent }
            }
            SiteEvent::Started { job, at } => SiteEvent::Started { job: one(job)?, at: *at },
            SiteEvent::Ended { job, at, outcome } => {
                SiteEvent::Ended { job: one(job)?, at: *at, outcome: outcome.clone() }
            }
            SiteEvent::Held { job, at, reason, cause } => {
                SiteEvent::Held { job: one(job)?, at: *at, reason: reason.clone(), cause: *cause }
            }
            SiteEvent::Removed { job, at } => SiteEvent::Removed { job: one(job)?, at: *at },
            SiteEvent::WithdrawDeclined { job, at } => {
                SiteEvent::WithdrawDeclined { job: one(job)?, at: *at }
            }
            SiteEvent::ResourceDown { job, at } => SiteEvent::ResourceDown { job: one(job)?, at: *at },
            SiteEvent::ResourceUp { job, at } => SiteEvent::ResourceUp { job: one(job)?, at: *at },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_job_has_its_kind_and_counts_add_up() {
        let t =
            JobTypes::new(vec!["io".into(), "cpu".into()], vec![JobTypeId(0), JobTypeId(1), JobTypeId(1)])
                .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.of(JobId(0)), JobTypeId(0));
        assert_eq!(t.of(JobId(2)), JobTypeId(1));
        assert_eq!((t.count(JobTypeId(0)), t.count(JobTypeId(1))), (1, 2));
        assert_eq!(t.name(JobTypeId(1)), "cpu");
        let blind = t.blind();
        assert_eq!((blind.len(), blind.count(JobTypeId(0)), blind.of(JobId(2))), (1, 3, JobTypeId(0)));
    }

    #[test]
    fn a_job_of_a_kind_not_listed_is_refused() {
        let err = JobTypes::new(vec!["io".into()], vec![JobTypeId(1)]).unwrap_err();
        assert!(err.contains("job 0") && err.contains("#1"), "{err}");
        assert!(JobTypes::new(Vec::new(), Vec::new()).is_err());
    }
}
