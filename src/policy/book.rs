//! Where each of the N jobs is: the bookkeeping every policy shares.
//!
//! A policy decides *how many* jobs go *where*; the book decides *which* jobs
//! (lowest index first, so resubmitted jobs go before fresh ones) and keeps the
//! conservation invariant: a job is in exactly one state, and only a job in the
//! pool can be submitted. Stale events (a start reported for a job that was
//! already removed, a second end) are recognised and ignored here, so policies
//! never see an impossible transition.
//!
//! A job held for a cause of the site ([`HoldCause::Site`]: its input
//! missing there) is barred from that site: [`JobBook::take`] never hands it
//! to it again, and the hold spends none of its attempts (the job did not
//! fail; the site could not run it). Each site bars a job once, so a job
//! bounces at most once per site. Which sites are left for it is the
//! policy's to say (it alone knows which it has given up):
//! [`JobBook::give_up_stranded`] gives up the jobs every live site has
//! barred, rather than leave them in the pool for good.

use super::{Action, HoldCause, JobId, Outcome, SiteEvent, SiteId, Time};
use std::collections::{BTreeMap, BTreeSet};

/// A time as an ordered key: the bits of a non-negative f64 order like the
/// number (times before 0, which only a clock skew could give, count as 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct TimeKey(u64);

impl TimeKey {
    pub fn of(t: Time) -> Self {
        TimeKey(if t > 0.0 { t.to_bits() } else { 0 })
    }
    pub fn time(self) -> Time {
        f64::from_bits(self.0)
    }
}

/// The life of one job, as far as cosched knows it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum JobState {
    /// Waiting in cosched's own pool; nothing at any site.
    Pool,
    /// Handed to `condor_submit`, not yet confirmed.
    Submitting {
        site: SiteId,
    },
    /// Idle in the site's queue.
    Idle {
        site: SiteId,
        submitted: Time,
    },
    Running {
        site: SiteId,
        submitted: Time,
        started: Time,
    },
    /// On hold at the site: occupies nothing, needs removing.
    Held {
        site: SiteId,
        submitted: Time,
    },
    /// `condor_rm` asked for; back in the pool once the removal is seen.
    Removing {
        site: SiteId,
        submitted: Time,
    },
    /// Asked back while idle ([`Action::Withdraw`]): back in the pool once the
    /// removal is seen, or running after all if the site says it started.
    Withdrawing {
        site: SiteId,
        submitted: Time,
    },
    /// Succeeded. `started` is unknown for grid jobs that finished between polls.
    Done {
        site: SiteId,
        submitted: Time,
        started: Option<Time>,
        ended: Time,
    },
    /// Failed `max_attempts` times, or barred by every live site;
    /// reported, never retried.
    GivenUp,
}

impl JobState {
    /// The site holding the job, if any.
    pub fn site(&self) -> Option<SiteId> {
        match *self {
            JobState::Submitting { site }
            | JobState::Idle { site, .. }
            | JobState::Running { site, .. }
            | JobState::Held { site, .. }
            | JobState::Removing { site, .. }
            | JobState::Withdrawing { site, .. } => Some(site),
            JobState::Pool | JobState::Done { .. } | JobState::GivenUp => None,
        }
    }
}

/// What an event did to the book, so a policy can update its statistics.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Nothing: the event was stale or a duplicate.
    None,
    Submitted {
        jobs: Vec<JobId>,
    },
    Returned {
        jobs: Vec<JobId>,
    },
    Started {
        job: JobId,
        submitted: Time,
    },
    Succeeded {
        job: JobId,
        submitted: Time,
        started: Option<Time>,
        ended: Time,
    },
    /// The attempt failed (ended badly or held); `exhausted` means it was the
    /// last allowed attempt and the job is now given up; `barred`, that the
    /// hold was the site's and the job may not come back to it.
    Failed {
        job: JobId,
        held: bool,
        exhausted: bool,
        barred: bool,
    },
    Removed {
        job: JobId,
    },
}

/// Per-site counts of our jobs, as `condor_q` would show them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SiteCounts {
    pub submitting: u32,
    pub idle: u32,
    pub running: u32,
    pub held: u32,
    pub removing: u32,
    pub withdrawing: u32,
    pub done: u32,
}

impl SiteCounts {
    /// Jobs occupying the site's queue (idle, running, held, or on their way).
    pub fn out(&self) -> u32 {
        self.submitting + self.idle + self.running + self.held + self.removing + self.withdrawing
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct JobBook {
    states: Vec<JobState>,
    attempts: Vec<u32>,
    pool: BTreeSet<JobId>,
    counts: Vec<SiteCounts>,
    /// Per site, the jobs idle there (in index order, which is submission
    /// order within a batch): what a policy may withdraw.
    idle: Vec<BTreeSet<JobId>>,
    /// Per site, the jobs running there by start time (oldest first).
    running: Vec<BTreeSet<(TimeKey, JobId)>>,
    max_attempts: u32,
    done: u64,
    given_up: u64,
    /// Jobs out at any site (the sum of every site's `out()`), kept as they
    /// move so that asking costs nothing.
    out: u64,
    /// Jobs held for a cause of the site, and the sites that held them:
    /// where [`Self::take`] does not send them again.
    barred: BTreeMap<JobId, BTreeSet<SiteId>>,
    /// Those of them in the pool: where a policy looks for jobs that the
    /// sites it plans for would not take.
    barred_pool: BTreeSet<JobId>,
    /// The sites live at the last [`Self::give_up_stranded`], and whether a
    /// barred job came back to the pool since: what makes the next one look.
    live: Vec<bool>,
    strand_check_due: bool,
}

impl JobBook {
    pub fn new(n_jobs: u64, n_sites: usize, max_attempts: u32) -> Self {
        JobBook {
            states: vec![JobState::Pool; n_jobs as usize],
            attempts: vec![0; n_jobs as usize],
            pool: (0..n_jobs).map(JobId).collect(),
            counts: vec![SiteCounts::default(); n_sites],
            idle: vec![BTreeSet::new(); n_sites],
            running: vec![BTreeSet::new(); n_sites],
            max_attempts: max_attempts.max(1),
            done: 0,
            given_up: 0,
            out: 0,
            barred: BTreeMap::new(),
            barred_pool: BTreeSet::new(),
            live: vec![true; n_sites],
            strand_check_due: false,
        }
    }

    pub fn n_jobs(&self) -> u64 {
        self.states.len() as u64
    }
    pub fn state(&self, job: JobId) -> &JobState {
        &self.states[job.0 as usize]
    }
    pub fn attempts(&self, job: JobId) -> u32 {
        self.attempts[job.0 as usize]
    }
    pub fn pool_len(&self) -> u64 {
        self.pool.len() as u64
    }
    pub fn done(&self) -> u64 {
        self.done
    }
    pub fn given_up(&self) -> u64 {
        self.given_up
    }
    /// Every job either succeeded or was given up.
    pub fn settled(&self) -> bool {
        self.done + self.given_up == self.n_jobs()
    }
    /// The jobs decided but not yet confirmed by their site (submitting,
    /// removing, withdrawing), in index order: what a resumed run must
    /// settle before it goes on.
    pub fn unconfirmed(&self) -> impl Iterator<Item = (JobId, &JobState)> {
        self.states.iter().enumerate().map(|(i, s)| (JobId(i as u64), s)).filter(|(_, s)| {
            matches!(
                s,
                JobState::Submitting { .. } | JobState::Removing { .. } | JobState::Withdrawing { .. }
            )
        })
    }
    pub fn counts(&self, site: SiteId) -> SiteCounts {
        self.counts[site.index()]
    }
    /// The jobs idle at `site`, in index order.
    pub fn idle_at(&self, site: SiteId) -> &BTreeSet<JobId> {
        &self.idle[site.index()]
    }
    /// The `k` jobs submitted last among those idle at `site`, youngest
    /// first: a schedd queues one user's jobs in submission order, so these
    /// are at the back (and under exponential waits, the least likely to
    /// have served theirs): the ones to take back. By submission, not by
    /// index: a job taken back and sent elsewhere keeps its index, so by
    /// index a job queued there before it could be taken back in its place.
    /// O(idle at the site).
    pub fn youngest_idle(&self, site: SiteId, k: usize) -> Vec<JobId> {
        let submitted = |job: &JobId| match self.states[job.0 as usize] {
            JobState::Idle { submitted, .. } => submitted,
            _ => f64::NEG_INFINITY,
        };
        let younger = |a: &JobId, b: &JobId| submitted(b).total_cmp(&submitted(a)).then(b.cmp(a));
        let mut idle: Vec<JobId> = self.idle[site.index()].iter().copied().collect();
        if k < idle.len() {
            if k == 0 {
                return Vec::new();
            }
            idle.select_nth_unstable_by(k - 1, younger);
            idle.truncate(k);
        }
        idle.sort_by(younger);
        idle
    }
    /// The jobs running at `site` with their start times, oldest first.
    pub fn running_at(&self, site: SiteId) -> impl DoubleEndedIterator<Item = (Time, JobId)> + '_ {
        self.running[site.index()].iter().map(|&(t, j)| (t.time(), j))
    }
    /// Jobs out at any site.
    pub fn out_total(&self) -> u64 {
        self.out
    }
    /// Jobs a schedd holds for the run (idle, running, held, or being taken
    /// back), at all sites: [`Self::out_total`] less the submissions no
    /// schedd has accepted (on their way, or held back by the daemon's share
    /// cap, which never sends them once a run is cancelled).
    pub fn at_schedds(&self) -> u64 {
        self.out.saturating_sub(self.counts.iter().map(|c| u64::from(c.submitting)).sum::<u64>())
    }

    /// Takes up to `k` jobs from the pool (lowest index first), none that
    /// `site` has barred, and marks them as being submitted to `site`.
    pub fn take(&mut self, site: SiteId, k: u64) -> Vec<JobId> {
        let mut jobs = Vec::with_capacity(k.min(self.pool.len() as u64) as usize);
        if self.barred.is_empty() {
            while (jobs.len() as u64) < k {
                let Some(job) = self.pool.pop_first() else { break };
                jobs.push(job);
            }
        } else {
            jobs.extend(self.pool.iter().filter(|&&j| !self.barred_at(j, site)).take(k as usize));
            for job in &jobs {
                self.pool.remove(job);
            }
        }
        for &job in &jobs {
            self.set(job, JobState::Submitting { site });
        }
        jobs
    }

    /// Whether `site` held `job` for a cause of its own.
    pub fn barred_at(&self, job: JobId, site: SiteId) -> bool {
        self.barred.get(&job).is_some_and(|sites| sites.contains(&site))
    }

    /// Whether any site has barred any job: while none has, nothing of
    /// the bars needs looking at.
    pub fn any_barred(&self) -> bool {
        !self.barred.is_empty()
    }

    /// The jobs in the pool that some site has barred, in index order.
    pub fn barred_in_pool(&self) -> impl Iterator<Item = JobId> + '_ {
        self.barred_pool.iter().copied()
    }

    /// Takes these jobs from the pool and marks them as being submitted to
    /// `site` (for a policy that chooses which jobs, not only how many):
    /// those in the pool that `site` has not barred; others are skipped.
    /// Returns those taken.
    pub fn take_these(&mut self, site: SiteId, jobs: &[JobId]) -> Vec<JobId> {
        let mut taken = Vec::with_capacity(jobs.len());
        for &job in jobs {
            if *self.state(job) == JobState::Pool && !self.barred_at(job, site) {
                self.pool.remove(&job);
                self.set(job, JobState::Submitting { site });
                taken.push(job);
            }
        }
        taken
    }

    /// Gives up the jobs in the pool that every site `live` calls live has
    /// barred (none is left that might run them; with no site live, every
    /// barred job), and returns the actions that say so. `live[i]`: the
    /// policy may still send jobs to site `i`.
    /// Looks only when a barred job came back to the pool or a site stopped
    /// being live since the last call, so it costs nothing on most inputs.
    pub fn give_up_stranded(&mut self, live: &[bool]) -> Vec<Action> {
        let lost = live.iter().zip(&self.live).any(|(&now, &was)| was && !now);
        if live.len() != self.live.len() || lost {
            self.strand_check_due = true;
        }
        self.live = live.to_vec();
        if !std::mem::take(&mut self.strand_check_due) {
            return Vec::new();
        }
        let stranded: Vec<JobId> = self
            .barred_pool
            .iter()
            .copied()
            .filter(|j| (0..live.len()).all(|i| !live[i] || self.barred_at(*j, SiteId(i as u32))))
            .collect();
        let mut actions = Vec::with_capacity(stranded.len());
        for job in stranded {
            self.pool.remove(&job);
            self.set(job, JobState::GivenUp);
            self.given_up += 1;
            let held_at = self.barred[&job].iter().map(|s| s.0.to_string()).collect::<Vec<_>>().join(", ");
            actions.push(Action::GiveUp {
                job,
                why: format!(
                    "held for a cause of the site at every live site (site indexes {held_at}); none is left to try"
                ),
            });
        }
        actions
    }

    /// Gives up `job` if it is in the pool (a policy that keeps a book per
    /// kind of job gives up here what one of those gave up); returns whether
    /// it did.
    pub fn give_up(&mut self, job: JobId) -> bool {
        if *self.state(job) != JobState::Pool {
            return false;
        }
        self.pool.remove(&job);
        self.set(job, JobState::GivenUp);
        self.given_up += 1;
        true
    }

    /// Jobs currently in `state` at `site` matching `pred`, in index order.
    pub fn jobs_at(&self, site: SiteId, pred: impl Fn(&JobState) -> bool) -> Vec<JobId> {
        self.states
            .iter()
            .enumerate()
            .filter(|(_, s)| s.site() == Some(site) && pred(s))
            .map(|(i, _)| JobId(i as u64))
            .collect()
    }

    /// Marks jobs (idle, running or held at `site`) as being removed. Returns
    /// those that were; others are skipped.
    pub fn mark_removing(&mut self, site: SiteId, jobs: &[JobId]) -> Vec<JobId> {
        let mut marked = Vec::new();
        for &job in jobs {
            let submitted = match *self.state(job) {
                JobState::Idle { site: s, submitted }
                | JobState::Running { site: s, submitted, .. }
                | JobState::Held { site: s, submitted }
                    if s == site =>
                {
                    submitted
                }
                _ => continue,
            };
            self.set(job, JobState::Removing { site, submitted });
            marked.push(job);
        }
        marked
    }

    /// Marks idle jobs at `site` as being withdrawn (see [`Action::Withdraw`]).
    /// Returns those that were; jobs in any other state are skipped, so a
    /// job known to have started is never asked back.
    pub fn mark_withdrawing(&mut self, site: SiteId, jobs: &[JobId]) -> Vec<JobId> {
        let mut marked = Vec::new();
        for &job in jobs {
            if let JobState::Idle { site: s, submitted } = *self.state(job) {
                if s == site {
                    self.set(job, JobState::Withdrawing { site, submitted });
                    marked.push(job);
                }
            }
        }
        marked
    }

    /// Applies an event from `site`; returns what changed.
    pub fn apply(&mut self, site: SiteId, event: &SiteEvent) -> Change {
        match event {
            SiteEvent::Submitted { jobs, at } => {
                let mut ok = Vec::new();
                for &job in jobs {
                    match *self.state(job) {
                        JobState::Submitting { .. } => {}
                        // Only a resumed run's history reports a submission
                        // the book did not hand out (or handed to another
                        // site while replaying): the site has the job, so
                        // that is where it is.
                        JobState::Pool => {
                            self.pool.remove(&job);
                        }
                        _ => continue,
                    }
                    self.set(job, JobState::Idle { site, submitted: *at });
                    ok.push(job);
                }
                if ok.is_empty() {
                    Change::None
                } else {
                    Change::Submitted { jobs: ok }
                }
            }
            SiteEvent::SubmitFailed { jobs, .. } => {
                let mut back = Vec::new();
                for &job in jobs {
                    if *self.state(job) == (JobState::Submitting { site }) {
                        self.return_to_pool(job);
                        back.push(job);
                    }
                }
                if back.is_empty() {
                    Change::None
                } else {
                    Change::Returned { jobs: back }
                }
            }
            // A withdrawal that lost the race with the start leaves the job
            // running there (the backend declines it, or the removal cuts it
            // short and its `Removed` follows).
            SiteEvent::Started { job, at } | SiteEvent::WithdrawDeclined { job, at } => {
                match *self.state(*job) {
                    JobState::Idle { site: s, submitted } | JobState::Withdrawing { site: s, submitted }
                        if s == site =>
                    {
                        self.set(*job, JobState::Running { site, submitted, started: *at });
                        Change::Started { job: *job, submitted }
                    }
                    _ => Change::None,
                }
            }
            SiteEvent::ResourceDown { .. } | SiteEvent::ResourceUp { .. } => Change::None,
            SiteEvent::Ended { job, at, outcome } => {
                let (submitted, started) = match *self.state(*job) {
                    JobState::Idle { site: s, submitted } if s == site => (submitted, None),
                    JobState::Running { site: s, submitted, started } if s == site => {
                        (submitted, Some(started))
                    }
                    // A job can finish while its removal is on the way; the
                    // result is real, so keep it.
                    JobState::Removing { site: s, submitted }
                    | JobState::Withdrawing { site: s, submitted }
                        if s == site =>
                    {
                        (submitted, None)
                    }
                    _ => return Change::None,
                };
                match outcome {
                    Outcome::Success => {
                        self.set(*job, JobState::Done { site, submitted, started, ended: *at });
                        self.done += 1;
                        Change::Succeeded { job: *job, submitted, started, ended: *at }
                    }
                    Outcome::Failed { .. } => {
                        let exhausted = self.fail_attempt(*job);
                        Change::Failed { job: *job, held: false, exhausted, barred: false }
                    }
                }
            }
            SiteEvent::Held { job, cause, .. } => match *self.state(*job) {
                JobState::Idle { site: s, submitted }
                | JobState::Running { site: s, submitted, .. }
                | JobState::Withdrawing { site: s, submitted }
                    if s == site =>
                {
                    let barred = *cause == HoldCause::Site;
                    if barred {
                        self.barred.entry(*job).or_default().insert(site);
                    } else {
                        self.attempts[job.0 as usize] += 1;
                    }
                    let exhausted = self.attempts(*job) >= self.max_attempts;
                    self.set(*job, JobState::Held { site, submitted });
                    Change::Failed { job: *job, held: true, exhausted, barred }
                }
                _ => Change::None,
            },
            SiteEvent::Removed { job, .. } => match *self.state(*job) {
                JobState::Idle { site: s, .. }
                | JobState::Running { site: s, .. }
                | JobState::Held { site: s, .. }
                | JobState::Removing { site: s, .. }
                | JobState::Withdrawing { site: s, .. }
                    if s == site =>
                {
                    if self.attempts(*job) >= self.max_attempts {
                        self.set(*job, JobState::GivenUp);
                        self.given_up += 1;
                    } else {
                        self.return_to_pool(*job);
                    }
                    Change::Removed { job: *job }
                }
                _ => Change::None,
            },
        }
    }

    /// What every policy does after a failed attempt: a held job is removed
    /// (it sits in the site's queue until then) and a job out of attempts is
    /// given up. Returns the action for `change`, if it calls for one.
    pub fn after_failure(&mut self, site: SiteId, change: &Change) -> Option<Action> {
        match *change {
            Change::Failed { job, held: true, barred, .. } => {
                self.mark_removing(site, &[job]);
                let why =
                    if barred { "held for a cause of the site; the job goes elsewhere" } else { "held" };
                Some(Action::Remove { site, jobs: vec![job], why: why.into() })
            }
            Change::Failed { job, held: false, exhausted: true, .. } => {
                Some(Action::GiveUp { job, why: "failed on every attempt".into() })
            }
            _ => None,
        }
    }

    /// Counts a failed attempt; the job returns to the pool or is given up.
    fn fail_attempt(&mut self, job: JobId) -> bool {
        self.attempts[job.0 as usize] += 1;
        if self.attempts(job) >= self.max_attempts {
            self.set(job, JobState::GivenUp);
            self.given_up += 1;
            true
        } else {
            self.return_to_pool(job);
            false
        }
    }

    fn return_to_pool(&mut self, job: JobId) {
        self.set(job, JobState::Pool);
        self.pool.insert(job);
        self.strand_check_due |= self.barred.contains_key(&job);
    }

    fn set(&mut self, job: JobId, new: JobState) {
        let i = job.0 as usize;
        let old = std::mem::replace(&mut self.states[i], JobState::Pool);
        if self.barred.contains_key(&job) {
            if new == JobState::Pool {
                self.barred_pool.insert(job);
            } else {
                self.barred_pool.remove(&job);
            }
        }
        self.out = self.out - u64::from(old.site().is_some()) + u64::from(new.site().is_some());
        if let Some(c) = self.site_counter(&old) {
            *c -= 1;
        }
        self.index(&old, job, false);
        if let Some(c) = self.site_counter(&new) {
            *c += 1;
        }
        self.index(&new, job, true);
        self.states[i] = new;
    }

    /// Keeps the per-site idle and running indexes in step with `state`.
    fn index(&mut self, state: &JobState, job: JobId, add: bool) {
        match *state {
            JobState::Idle { site, .. } => {
                let set = &mut self.idle[site.index()];
                if add {
                    set.insert(job);
                } else {
                    set.remove(&job);
                }
            }
            JobState::Running { site, started, .. } => {
                let set = &mut self.running[site.index()];
                let key = (TimeKey::of(started), job);
                if add {
                    set.insert(key);
                } else {
                    set.remove(&key);
                }
            }
            _ => {}
        }
    }

    fn site_counter(&mut self, state: &JobState) -> Option<&mut u32> {
        let site = match *state {
            JobState::Done { site, .. } => site,
            ref s => s.site()?,
        };
        let c = &mut self.counts[site.index()];
        Some(match state {
            JobState::Submitting { .. } => &mut c.submitting,
            JobState::Idle { .. } => &mut c.idle,
            JobState::Running { .. } => &mut c.running,
            JobState::Held { .. } => &mut c.held,
            JobState::Removing { .. } => &mut c.removing,
            JobState::Withdrawing { .. } => &mut c.withdrawing,
            JobState::Done { .. } => &mut c.done,
            JobState::Pool | JobState::GivenUp => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S0: SiteId = SiteId(0);
    const S1: SiteId = SiteId(1);

    #[test]
    fn jobs_flow_and_counts_follow() {
        let mut book = JobBook::new(5, 2, 2);
        let jobs = book.take(S0, 3);
        assert_eq!(jobs, vec![JobId(0), JobId(1), JobId(2)]);
        assert_eq!(book.counts(S0).submitting, 3);
        book.apply(S0, &SiteEvent::Submitted { jobs: jobs.clone(), at: 1.0 });
        assert_eq!(book.counts(S0).idle, 3);
        book.apply(S0, &SiteEvent::Started { job: JobId(0), at: 2.0 });
        let c = book.apply(S0, &SiteEvent::Ended { job: JobId(0), at: 9.0, outcome: Outcome::Success });
        assert_eq!(c, Change::Succeeded { job: JobId(0), submitted: 1.0, started: Some(2.0), ended: 9.0 });
        assert_eq!(book.counts(S0), SiteCounts { idle: 2, done: 1, ..Default::default() });
        assert_eq!(book.done(), 1);
        // A duplicate end is stale.
        let c = book.apply(S0, &SiteEvent::Ended { job: JobId(0), at: 9.0, outcome: Outcome::Success });
        assert_eq!(c, Change::None);
        assert_eq!(book.done(), 1);
    }

    #[test]
    fn the_youngest_idle_jobs_are_the_last_submitted_whatever_their_index() {
        let mut book = JobBook::new(10, 2, 3);
        let first = book.take(S0, 8);
        book.apply(S0, &SiteEvent::Submitted { jobs: first, at: 0.0 });
        // Job 1, taken back from site 0, goes to site 1 after jobs 8 and 9.
        let later = book.take(S1, 2);
        book.apply(S1, &SiteEvent::Submitted { jobs: later, at: 5.0 });
        book.mark_withdrawing(S0, &[JobId(1)]);
        book.apply(S0, &SiteEvent::Removed { job: JobId(1), at: 6.0 });
        assert_eq!(book.take(S1, 1), vec![JobId(1)]);
        book.apply(S1, &SiteEvent::Submitted { jobs: vec![JobId(1)], at: 7.0 });
        // At site 1 the job of the lowest index is the one queued last.
        assert_eq!(book.youngest_idle(S1, 1), vec![JobId(1)]);
        assert_eq!(book.youngest_idle(S1, 3), vec![JobId(1), JobId(9), JobId(8)]);
        assert_eq!(book.youngest_idle(S1, 0), Vec::<JobId>::new());
        // Jobs submitted together go by index, the highest first.
        assert_eq!(book.youngest_idle(S0, 2), vec![JobId(7), JobId(6)]);
    }

    #[test]
    fn failed_jobs_return_first_and_are_given_up_after_max_attempts() {
        let mut book = JobBook::new(3, 2, 2);
        let jobs = book.take(S0, 2);
        book.apply(S0, &SiteEvent::Submitted { jobs, at: 0.0 });
        let failed = Outcome::Failed { detail: "exit 1".into() };
        let c = book.apply(S0, &SiteEvent::Ended { job: JobId(0), at: 5.0, outcome: failed.clone() });
        assert_eq!(c, Change::Failed { job: JobId(0), held: false, exhausted: false, barred: false });
        // Job 0 is back and goes before job 2.
        assert_eq!(book.take(S1, 1), vec![JobId(0)]);
        book.apply(S1, &SiteEvent::Submitted { jobs: vec![JobId(0)], at: 6.0 });
        // An event from the old site about job 0 is stale.
        assert_eq!(book.apply(S0, &SiteEvent::Started { job: JobId(0), at: 7.0 }), Change::None);
        let c = book.apply(S1, &SiteEvent::Ended { job: JobId(0), at: 8.0, outcome: failed });
        assert_eq!(c, Change::Failed { job: JobId(0), held: false, exhausted: true, barred: false });
        assert_eq!(*book.state(JobId(0)), JobState::GivenUp);
        assert_eq!(book.given_up(), 1);
    }

    #[test]
    fn replayed_submissions_take_jobs_out_of_the_pool_or_off_another_site() {
        let mut book = JobBook::new(4, 2, 2);
        // History of a resumed run: job 2 was submitted before the restart.
        let c = book.apply(S1, &SiteEvent::Submitted { jobs: vec![JobId(2)], at: 3.0 });
        assert_eq!(c, Change::Submitted { jobs: vec![JobId(2)] });
        assert_eq!(book.pool_len(), 3);
        // A replaying policy handed job 0 to site 0; history says site 1 has it.
        assert_eq!(book.take(S0, 1), vec![JobId(0)]);
        book.apply(S1, &SiteEvent::Submitted { jobs: vec![JobId(0)], at: 4.0 });
        assert_eq!(*book.state(JobId(0)), JobState::Idle { site: S1, submitted: 4.0 });
        assert_eq!(book.counts(S0).out(), 0);
        assert_eq!(book.counts(S1).idle, 2);
        // Never a job that is already out: that would be a second copy.
        let c = book.apply(S0, &SiteEvent::Submitted { jobs: vec![JobId(2)], at: 5.0 });
        assert_eq!(c, Change::None);
        assert_eq!(book.take(S0, 4), vec![JobId(1), JobId(3)]);
    }

    #[test]
    fn held_then_removed_returns_to_pool() {
        let mut book = JobBook::new(1, 1, 3);
        let jobs = book.take(S0, 1);
        book.apply(S0, &SiteEvent::Submitted { jobs, at: 0.0 });
        let c = book.apply(
            S0,
            &SiteEvent::Held { job: JobId(0), at: 1.0, reason: "x".into(), cause: HoldCause::Unknown },
        );
        assert_eq!(c, Change::Failed { job: JobId(0), held: true, exhausted: false, barred: false });
        assert_eq!(book.counts(S0).held, 1);
        assert_eq!(book.mark_removing(S0, &[JobId(0)]), vec![JobId(0)]);
        book.apply(S0, &SiteEvent::Removed { job: JobId(0), at: 2.0 });
        assert_eq!(*book.state(JobId(0)), JobState::Pool);
        assert_eq!(book.counts(S0).out(), 0);
        assert_eq!(book.pool_len(), 1);
    }

    #[test]
    fn a_hold_of_the_sites_bars_the_job_there_spends_no_attempt_and_strands_nothing() {
        let mut book = JobBook::new(3, 2, 1);
        let jobs = book.take(S0, 2);
        book.apply(S0, &SiteEvent::Submitted { jobs, at: 0.0 });
        let held =
            |job| SiteEvent::Held { job: JobId(job), at: 1.0, reason: "r".into(), cause: HoldCause::Site };
        let c = book.apply(S0, &held(0));
        assert_eq!(c, Change::Failed { job: JobId(0), held: true, exhausted: false, barred: true });
        book.mark_removing(S0, &[JobId(0)]);
        book.apply(S0, &SiteEvent::Removed { job: JobId(0), at: 2.0 });
        // One attempt allowed, and none spent: back in the pool, not given up.
        assert_eq!((book.state(JobId(0)).clone(), book.attempts(JobId(0))), (JobState::Pool, 0));
        assert_eq!(book.barred_in_pool().collect::<Vec<_>>(), vec![JobId(0)]);
        // Site 0 takes the next job, site 1 the barred one first.
        assert_eq!(book.take(S0, 1), vec![JobId(2)]);
        assert!(book.give_up_stranded(&[true, true]).is_empty());
        // Site 1 no longer live: nothing is left that would take job 0.
        let actions = book.give_up_stranded(&[true, false]);
        assert!(
            matches!(&actions[..], [Action::GiveUp { job: JobId(0), why }] if why.contains("every live site"))
        );
        assert_eq!((book.state(JobId(0)).clone(), book.given_up()), (JobState::GivenUp, 1));
        assert!(book.give_up_stranded(&[true, false]).is_empty(), "given up once");
        // A hold of unknown cause is a failed attempt, as before.
        let c = book.apply(
            S0,
            &SiteEvent::Held { job: JobId(1), at: 3.0, reason: "r".into(), cause: HoldCause::Unknown },
        );
        assert_eq!(c, Change::Failed { job: JobId(1), held: true, exhausted: true, barred: false });
        assert!(!book.barred_at(JobId(1), S0));
    }

    #[test]
    fn a_withdrawal_takes_back_only_idle_jobs_and_yields_to_a_start() {
        let mut book = JobBook::new(3, 2, 3);
        let jobs = book.take(S0, 3);
        book.apply(S0, &SiteEvent::Submitted { jobs, at: 0.0 });
        book.apply(S0, &SiteEvent::Started { job: JobId(0), at: 1.0 });
        // Job 0 is known to run: it is not asked back.
        assert_eq!(book.mark_withdrawing(S0, &[JobId(0), JobId(1), JobId(2)]), vec![JobId(1), JobId(2)]);
        assert_eq!(book.counts(S0).withdrawing, 2);
        // The site says job 1 had started after all: it runs there.
        let c = book.apply(S0, &SiteEvent::WithdrawDeclined { job: JobId(1), at: 2.0 });
        assert_eq!(c, Change::Started { job: JobId(1), submitted: 0.0 });
        assert_eq!(*book.state(JobId(1)), JobState::Running { site: S0, submitted: 0.0, started: 2.0 });
        // Job 2 is gone from the site and goes back to the pool, never before.
        assert_eq!(book.take(S1, 5), Vec::<JobId>::new());
        book.apply(S0, &SiteEvent::Removed { job: JobId(2), at: 3.0 });
        assert_eq!(book.take(S1, 5), vec![JobId(2)]);
        assert_eq!(book.counts(S0), SiteCounts { running: 2, ..Default::default() });
    }
}
