//! Which kind of job each job of a run is: the one thing a policy is told of
//! a job beyond its index. A run may hold several kinds at once (in a real
//! run, one per submit description; in the simulator, the scenario's
//! `types`); a kind loads a site's shared resource and runs at a site's
//! speed in its own way, which a policy has to learn per site and per kind.
//!
//! A policy keys what it learns on [`JobTypeId`], the kind's index in the
//! run's list; the names are for people. A run of one kind has one type,
//! index 0, and every policy that ignores types decides as it always did.

use super::JobId;
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
