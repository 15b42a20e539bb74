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

/// Why `name` cannot name a kind of job, if it cannot. It goes into every
/// submit file of its kind (`CoschedType = NAME`, `+CoschedType = "NAME"`)
/// and into shell history: letters, digits, `_`, `-` and `.`, starting with
/// a letter or `_`, at most 64.
pub fn kind_name_error(name: &str) -> Option<String> {
    let first_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if name.is_empty() {
        Some("a kind of job needs a name".into())
    } else if !(first_ok && rest_ok) || name.len() > 64 {
        Some(format!(
            "`{}` cannot name a kind of job: use letters, digits, `_`, `-` and `.`, starting with a letter \
             or `_`, at most 64",
            name.escape_debug()
        ))
    } else {
        None
    }
}

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

    /// Kinds named `names` with `counts[t]` jobs of kind `t`, spread evenly
    /// over the job indexes ([`interleave`]): the pool then offers the kinds
    /// in their proportions at any point of the run, and no kind waits for
    /// another to be used up. Fails as [`JobTypes::new`] does, or when the
    /// two lists differ in length, or they hold more than
    /// [`super::MAX_JOBS`] jobs.
    pub fn interleaved(names: Vec<String>, counts: &[u64]) -> Result<Self, String> {
        if names.len() != counts.len() {
            return Err(format!("{} job type names for {} counts", names.len(), counts.len()));
        }
        let refused = match counts.iter().try_fold(0u64, |sum, &c| sum.checked_add(c)) {
            Some(total) => super::too_many_jobs(total),
            None => Some(super::more_jobs_than_a_run_holds("over 2^64")),
        };
        if let Some(why) = refused {
            return Err(why);
        }
        JobTypes::new(names, interleave(counts))
    }

    /// Jobs of every kind.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The same jobs seen as one kind (`--blind-types`: what a policy does
    /// without knowing kinds).
    pub fn blind(&self) -> Self {
        JobTypes::single(self.total())
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

/// The kind of each job when kind `t` has `counts[t]` jobs: job `i` of kind
/// `t` at key `(i + 0.5)/n_t`, in key order, ties by kind. Keys are
/// compared exactly, as `(2i + 1) n_s` against `(2j + 1) n_t`.
pub fn interleave(counts: &[u64]) -> Vec<JobTypeId> {
    if let [n] = counts {
        return vec![JobTypeId(0); *n as usize];
    }
    let total: u64 = counts.iter().sum();
    let mut next = vec![0u64; counts.len()];
    let mut order = Vec::with_capacity(total as usize);
    // A merge of the kinds' sequences: each step takes the kind whose next
    // key is smallest (few kinds, so a scan beats a heap).
    for _ in 0..total {
        let mut best: Option<usize> = None;
        for (t, &n) in counts.iter().enumerate() {
            if next[t] >= n {
                continue;
            }
            let smaller = best.is_none_or(|b| {
                u128::from(2 * next[t] + 1) * u128::from(counts[b])
                    < u128::from(2 * next[b] + 1) * u128::from(n)
            });
            if smaller {
                best = Some(t);
            }
        }
        let t = best.expect("a kind has jobs left while the total is not reached");
        next[t] += 1;
        order.push(JobTypeId(t as u16));
    }
    order
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
            SiteEvent::ResourceDown { job, at } => {
                SiteEvent::ResourceDown { job: one(job).unwrap_or(JobId(0)), at: *at }
            }
            SiteEvent::ResourceUp { job, at } => {
                SiteEvent::ResourceUp { job: one(job).unwrap_or(JobId(0)), at: *at }
            }
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
    fn interleaved_kinds_alternate_in_their_proportions() {
        let t = JobTypes::interleaved(vec!["io".into(), "cpu".into()], &[2, 4]).unwrap();
        let order: Vec<u16> = (0..6).map(|j| t.of(JobId(j)).0).collect();
        // Keys (i + 0.5)/n: io 0.25, 0.75; cpu 0.125, 0.375, 0.625, 0.875.
        assert_eq!(order, [1, 0, 1, 1, 0, 1]);
        assert_eq!((t.total(), t.count(JobTypeId(0))), (6, 2));
        assert!(JobTypes::interleaved(vec!["io".into()], &[1, 2]).is_err());
    }

    #[test]
    fn each_kind_hears_of_its_own_jobs_in_its_own_numbers_and_every_kind_of_its_site() {
        let types = JobTypes::new(
            vec!["io".into(), "cpu".into()],
            vec![JobTypeId(0), JobTypeId(1), JobTypeId(1), JobTypeId(0)],
        )
        .unwrap();
        let numbers = KindNumbers::new(&types, 4);
        assert_eq!(numbers.jobs_of(JobTypeId(0)), [JobId(0), JobId(3)]);
        assert_eq!(numbers.local(JobId(2)), (JobTypeId(1), JobId(1)));
        assert_eq!(numbers.global(JobTypeId(0), JobId(1)), JobId(3));
        let submitted = SiteEvent::Submitted { jobs: vec![JobId(1), JobId(3)], at: 5.0 };
        let io = numbers.localize(JobTypeId(0), &submitted);
        assert_eq!(io, Some(SiteEvent::Submitted { jobs: vec![JobId(1)], at: 5.0 }));
        let started = SiteEvent::Started { job: JobId(2), at: 6.0 };
        assert_eq!(numbers.localize(JobTypeId(0), &started), None);
        // The site's grid resource is down for every kind, whichever job's
        // log said so.
        let down = SiteEvent::ResourceDown { job: JobId(2), at: 7.0 };
        assert!(matches!(numbers.localize(JobTypeId(0), &down), Some(SiteEvent::ResourceDown { .. })));
        let cpu = numbers.localize(JobTypeId(1), &down);
        assert_eq!(cpu, Some(SiteEvent::ResourceDown { job: JobId(1), at: 7.0 }));
    }

    #[test]
    fn a_job_of_a_kind_not_listed_is_refused() {
        let err = JobTypes::new(vec!["io".into()], vec![JobTypeId(1)]).unwrap_err();
        assert!(err.contains("job 0") && err.contains("#1"), "{err}");
        assert!(JobTypes::new(Vec::new(), Vec::new()).is_err());
    }
}
