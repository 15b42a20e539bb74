//! How the fair share reaches a run: a wrapper policy that holds back Submit
//! actions beyond the run's cap at each site, and drains a cancelled run.
//!
//! Why a wrapper rather than changing `SiteInfo::max_jobs`: a policy gets its
//! site infos once, at construction, and every policy would have to learn to
//! take new caps mid-run. The wrapper works with any policy unchanged. The jobs
//! it holds back stay `Submitting` in the inner policy's book (from the
//! policy's point of view `condor_submit` is simply slow), so the book's
//! conservation invariant holds, and they go out, oldest first, as soon as the
//! site has room under the cap: when a job there ends, or when the daemon
//! raises the cap. Held-back jobs were never handed to `condor_submit`, so a
//! crash loses nothing: a resumed run finds them in the pool.
//!
//! Like HTCaaS, a lowered cap preempts nothing: jobs already out keep running
//! and the run submits no more there until it is under the new cap.
//!
//! The wrapper and the daemon's fair-share loop talk through a [`Board`]: the
//! wrapper publishes each site's demand (jobs the policy wants out = out +
//! held back), the loop writes each site's cap. The wrapper also carries
//! cancellation: once cancel is set it submits nothing more, removes every job
//! out (and each job whose `condor_submit` was in flight, as soon as it is
//! confirmed), and reports `drained` when nothing of the run is left at any
//! site, so the daemon can stop the run's engine.

use crate::policy::{
    Action, CapacityMemory, Decision, Input, JobBook, JobId, JobState, Policy, SiteEvent, SiteId, SiteView,
    Time,
};
use crate::sync::Locked;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// What a run and the daemon's fair-share loop share, per site of the run.
#[derive(Clone, Debug, Default)]
pub struct ShareState {
    /// Cap on the run's jobs out at each site (`None`: no cap).
    pub caps: Vec<Option<u64>>,
    /// Jobs the policy wants out at each site (out + held back).
    pub demand: Vec<u64>,
    /// Jobs held back by the cap at each site.
    pub held_back: Vec<u64>,
    /// Set by the daemon: stop submitting and remove everything.
    pub cancel: bool,
    /// Set by the wrapper: cancelled and nothing of the run is at any site.
    pub drained: bool,
    /// Set by the wrapper when jobs wait for a cap that has not seen their
    /// demand yet; the daemon then runs the fair share without waiting for
    /// its next tick (see `server::serve`), and clears it.
    pub asks: bool,
}

pub type Board = Arc<Mutex<ShareState>>;

pub fn new_board(n_sites: usize) -> Board {
    Arc::new(Mutex::new(ShareState {
        caps: vec![None; n_sites],
        demand: vec![0; n_sites],
        held_back: vec![0; n_sites],
        ..ShareState::default()
    }))
}

/// Locks a board; a poisoned lock (a panic elsewhere) still holds usable data.
pub fn lock(board: &Board) -> std::sync::MutexGuard<'_, ShareState> {
    board.locked()
}

pub struct FairShare {
    /// The run's own policy.
    inner: Box<dyn Policy>,
    board: Board,
    /// Per site: jobs the inner policy submitted that wait for room.
    held: Vec<VecDeque<JobId>>,
    /// The last time we were called (the policy has no clock of its own).
    now: Time,
    /// How long to sleep at most, in run-clock seconds, so that cap changes
    /// and cancellation made by the daemon are seen without a site event.
    poll: f64,
    /// When the removals of a cancelled run were last (re)sent.
    last_removal: Option<Time>,
}

impl FairShare {
    pub fn new(inner: Box<dyn Policy>, board: Board, poll: f64) -> Self {
        let n_sites = lock(&board).caps.len();
        FairShare {
            inner,
            board,
            held: vec![VecDeque::new(); n_sites],
            now: 0.0,
            poll: if poll > 0.0 { poll } else { 1.0 },
            last_removal: None,
        }
    }

    fn n_sites(&self) -> usize {
        self.held.len()
    }

    /// Jobs of the run handed to HTCondor at `site` and not finished.
    fn released_out(&self, site: SiteId) -> u64 {
        u64::from(self.inner.book().counts(site).out()).saturating_sub(self.held[site.index()].len() as u64)
    }

    /// Forgets held-back jobs that are no longer waiting to be submitted
    /// there. That happens on resume: the policy re-decides a submission while
    /// replaying history, and a later history event shows that it did happen
    /// before the restart. Releasing such a job would submit it twice.
    fn purge(&mut self) {
        let book = self.inner.book();
        for (i, q) in self.held.iter_mut().enumerate() {
            let site = SiteId(i as u32);
            q.retain(|&j| *book.state(j) == JobState::Submitting { site });
        }
    }

    /// Sends out held-back jobs where the cap leaves room.
    fn release(&mut self, caps: &[Option<u64>], out: &mut Vec<Action>, why: &str) {
        self.purge();
        for i in 0..self.n_sites() {
            if self.held[i].is_empty() {
                continue;
            }
            let site = SiteId(i as u32);
            let room = match caps.get(i).copied().flatten() {
                None => u64::MAX,
                Some(cap) => cap.saturating_sub(self.released_out(site)),
            };
            let k = room.min(self.held[i].len() as u64) as usize;
            if k > 0 {
                let jobs: Vec<JobId> = self.held[i].drain(..k).collect();
                out.push(Action::Submit { site, jobs, why: why.to_string() });
            }
        }
    }

    /// A job still held back was never submitted: nothing to remove there.
    fn not_held_back(&self, site: SiteId, jobs: Vec<JobId>) -> Vec<JobId> {
        let held = &self.held[site.index()];
        jobs.into_iter().filter(|j| !held.contains(j)).collect()
    }

    /// Removals for every job of a cancelled run still at a site.
    fn removals(&self) -> Vec<Action> {
        let book = self.inner.book();
        (0..self.n_sites())
            .filter_map(|i| {
                let site = SiteId(i as u32);
                let jobs = book.jobs_at(site, |s| {
                    matches!(s, JobState::Idle { .. } | JobState::Running { .. } | JobState::Held { .. })
                });
                (!jobs.is_empty()).then(|| Action::Remove { site, jobs, why: "run cancelled".into() })
            })
            .collect()
    }

    /// Nothing of the run left at any site (held-back jobs never left).
    fn drained(&self) -> bool {
        (0..self.n_sites()).all(|i| self.released_out(SiteId(i as u32)) == 0)
    }

    /// Publishes each site's demand and jobs held back. A cancelled run's
    /// held-back jobs never go out, so it asks for no share beyond what it
    /// still has out (its status shows them neither queued nor held back).
    fn publish(&self, cancelled: bool) {
        let mut b = lock(&self.board);
        for i in 0..self.n_sites() {
            let site = SiteId(i as u32);
            let demand = if cancelled {
                self.released_out(site)
            } else {
                u64::from(self.inner.book().counts(site).out())
            };
            if demand > b.demand[i] && !self.held[i].is_empty() && !cancelled {
                b.asks = true;
            }
            b.demand[i] = demand;
            b.held_back[i] = self.held[i].len() as u64;
        }
    }

    fn handle_cancelled(&mut self, now: Time, input: &Input) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Input::Site { site, event } = input {
            // Keep the book true so that we know what is still out. Whatever
            // the policy submits now stays held back for good: it is counted
            // out in the book but never leaves.
            for action in self.inner.handle(now, input) {
                if let Action::Submit { site, jobs, .. } = action {
                    self.held[site.index()].extend(jobs);
                }
            }
            if let SiteEvent::Submitted { jobs, .. } = event {
                actions.push(Action::Remove { site: *site, jobs: jobs.clone(), why: "run cancelled".into() });
            }
        }
        // First time, and again now and then in case a condor_rm was lost.
        let due = match self.last_removal {
            None => true,
            Some(t) => now - t >= 10.0 * self.poll,
        };
        if due {
            self.last_removal = Some(now);
            actions.extend(self.removals());
        }
        self.purge();
        let drained = self.drained();
        lock(&self.board).drained = drained;
        actions
    }
}

impl Policy for FairShare {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn handle(&mut self, now: Time, input: &Input) -> Vec<Action> {
        self.now = now;
        let (caps, cancel) = {
            let b = lock(&self.board);
            (b.caps.clone(), b.cancel)
        };
        if cancel {
            let actions = self.handle_cancelled(now, input);
            self.publish(true);
            return actions;
        }
        let forward = match input {
            Input::Tick => self.inner.next_deadline().is_some_and(|d| d <= now),
            _ => true,
        };
        let inner_actions = if forward { self.inner.handle(now, input) } else { Vec::new() };
        let mut actions = Vec::with_capacity(inner_actions.len());
        for action in inner_actions {
            match action {
                Action::Submit { site, jobs, why } => {
                    self.held[site.index()].extend(jobs);
                    self.release(&caps, &mut actions, &why);
                }
                Action::Remove { site, jobs, why } => {
                    let jobs = self.not_held_back(site, jobs);
                    if !jobs.is_empty() {
                        actions.push(Action::Remove { site, jobs, why });
                    }
                }
                Action::Withdraw { site, jobs, why } => {
                    let jobs = self.not_held_back(site, jobs);
                    if !jobs.is_empty() {
                        actions.push(Action::Withdraw { site, jobs, why });
                    }
                }
                other => actions.push(other),
            }
        }
        self.release(&caps, &mut actions, "fair share: room under this run's cap");
        self.publish(false);
        actions
    }

    fn next_deadline(&self) -> Option<Time> {
        let wake = self.now + self.poll;
        Some(self.inner.next_deadline().map_or(wake, |d| d.min(wake)))
    }

    fn book(&self) -> &JobBook {
        self.inner.book()
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        self.inner.site_view(site)
    }

    fn learned(&self) -> CapacityMemory {
        self.inner.learned()
    }

    fn take_decisions(&mut self) -> Vec<Decision> {
        self.inner.take_decisions()
    }

    /// The run's own policy's state. The jobs held back are `Submitting` in
    /// its book, never handed to `condor_submit`: a run restored from it
    /// hears that they were not submitted (the engine's resume) and holds
    /// them back again as it decides afresh.
    fn checkpoint(&self) -> Option<Vec<u8>> {
        self.inner.checkpoint()
    }

    fn restore(&mut self, saved: &[u8]) -> Result<(), String> {
        self.inner.restore(saved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Outcome, RunSpec, SiteInfo};

    fn bulk(n: u64, sites: usize) -> Box<dyn Policy> {
        let spec = RunSpec {
            n_jobs: n,
            sites: (0..sites)
                .map(|i| SiteInfo { slots: Some(1), ..SiteInfo::named(format!("s{i}")) })
                .collect(),
            max_attempts: 3,
            ..RunSpec::default()
        };
        Box::new(crate::policy::bulk::Bulk::new(&spec))
    }

    fn submitted(actions: &[Action]) -> Vec<(u32, Vec<u64>)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Submit { site, jobs, .. } => Some((site.0, jobs.iter().map(|j| j.0).collect())),
                _ => None,
            })
            .collect()
    }

    fn confirm(p: &mut FairShare, now: Time, site: u32, jobs: &[u64]) {
        let event = SiteEvent::Submitted { jobs: jobs.iter().map(|&j| JobId(j)).collect(), at: now };
        p.handle(now, &Input::Site { site: SiteId(site), event });
    }

    #[test]
    fn holds_back_beyond_the_cap_and_releases_as_jobs_end() {
        let board = new_board(1);
        lock(&board).caps[0] = Some(2);
        let mut p = FairShare::new(bulk(5, 1), board.clone(), 1.0);
        let a = p.handle(0.0, &Input::Start);
        assert_eq!(submitted(&a), vec![(0, vec![0, 1])]);
        assert_eq!(lock(&board).demand[0], 5, "the policy wants all five out");
        assert_eq!(lock(&board).held_back[0], 3);
        confirm(&mut p, 1.0, 0, &[0, 1]);
        let ended = SiteEvent::Ended { job: JobId(0), at: 2.0, outcome: Outcome::Success };
        let a = p.handle(2.0, &Input::Site { site: SiteId(0), event: ended });
        assert_eq!(submitted(&a), vec![(0, vec![2])], "one ended, one more goes out");
        // The daemon raises the cap: the next tick releases the rest.
        lock(&board).caps[0] = Some(10);
        assert_eq!(p.next_deadline(), Some(3.0));
        let a = p.handle(3.0, &Input::Tick);
        assert_eq!(submitted(&a), vec![(0, vec![3, 4])]);
        assert_eq!(lock(&board).held_back[0], 0);
    }

    #[test]
    fn a_held_job_that_history_shows_submitted_is_never_released() {
        // Resume: the policy re-decides a submission while history replays;
        // the cap holds it back; the next history event says it was out.
        let board = new_board(1);
        lock(&board).caps[0] = Some(0);
        let mut p = FairShare::new(bulk(2, 1), board.clone(), 1.0);
        assert!(submitted(&p.handle(0.0, &Input::Start)).is_empty());
        confirm(&mut p, 1.0, 0, &[0]);
        lock(&board).caps[0] = Some(10);
        let a = p.handle(2.0, &Input::Tick);
        assert_eq!(submitted(&a), vec![(0, vec![1])], "job 0 is already out and must not go again");
    }

    #[test]
    fn a_lowered_cap_preempts_nothing() {
        let board = new_board(1);
        let mut p = FairShare::new(bulk(4, 1), board.clone(), 1.0);
        let a = p.handle(0.0, &Input::Start);
        assert_eq!(submitted(&a), vec![(0, vec![0, 1, 2, 3])]);
        lock(&board).caps[0] = Some(1);
        let a = p.handle(1.0, &Input::Tick);
        assert!(a.is_empty(), "{a:?}");
    }

    #[test]
    fn cancel_removes_everything_out_and_reports_drained() {
        let board = new_board(2);
        lock(&board).caps = vec![Some(1), Some(1)];
        let mut p = FairShare::new(bulk(6, 2), board.clone(), 1.0);
        let a = p.handle(0.0, &Input::Start);
        assert_eq!(submitted(&a), vec![(0, vec![0]), (1, vec![3])]);
        confirm(&mut p, 1.0, 0, &[0]);
        lock(&board).cancel = true;
        let a = p.handle(2.0, &Input::Tick);
        assert_eq!(
            a,
            vec![Action::Remove { site: SiteId(0), jobs: vec![JobId(0)], why: "run cancelled".into() }]
        );
        assert!(!lock(&board).drained);
        // Job 3's submission was in flight: removed as soon as it is confirmed.
        let event = SiteEvent::Submitted { jobs: vec![JobId(3)], at: 3.0 };
        let a = p.handle(3.0, &Input::Site { site: SiteId(1), event });
        assert_eq!(
            a,
            vec![Action::Remove { site: SiteId(1), jobs: vec![JobId(3)], why: "run cancelled".into() }]
        );
        for (site, job) in [(0, 0), (1, 3)] {
            let event = SiteEvent::Removed { job: JobId(job), at: 4.0 };
            let a = p.handle(4.0, &Input::Site { site: SiteId(site), event });
            assert!(submitted(&a).is_empty(), "nothing is submitted after cancel: {a:?}");
        }
        assert!(lock(&board).drained);
    }

    /// With a tester's cancelled run: the jobs it held back at the cancel
    /// never go out, so its demand is what it still has out, and the fair
    /// share gives the others the rest.
    #[test]
    fn a_cancelled_run_asks_only_for_what_it_still_has_out() {
        let board = new_board(1);
        lock(&board).caps[0] = Some(2);
        let mut p = FairShare::new(bulk(6, 1), board.clone(), 1.0);
        p.handle(0.0, &Input::Start);
        confirm(&mut p, 1.0, 0, &[0, 1]);
        let shown = |board: &Board| {
            let b = lock(board);
            (b.demand[0], b.held_back[0])
        };
        assert_eq!(shown(&board), (6, 4));
        {
            let mut b = lock(&board);
            (b.cancel, b.asks) = (true, false);
        }
        p.handle(2.0, &Input::Tick);
        assert_eq!(shown(&board), (2, 4), "the two out, not the four held back (never submitted)");
        for job in [0, 1] {
            let event = SiteEvent::Removed { job: JobId(job), at: 3.0 };
            p.handle(3.0, &Input::Site { site: SiteId(0), event });
        }
        assert_eq!(shown(&board).0, 0);
        let b = lock(&board);
        assert!(b.drained && !b.asks, "drained, and asking for no share");
    }
}
