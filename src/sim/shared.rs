//! One simulated site that several runs submit into at once: the daemon's
//! in-process grid (`daemon::memsim`), where runs of different users and
//! kinds at one site load the same resource and take the same slots.
//!
//! A [`SharedSite`] owns the site's one [`SiteSim`], in the grid's time (a
//! [`RunClock`] that reads 0 when the grid was made). Each run at the site
//! holds a [`Tenancy`]: the run's [`SimSite`](super::backend::SimSite)
//! drives the site through it exactly as it drives a site of its own, in the
//! run's time (0 at the run's start), and hears only of its own attempts.
//!
//! # How the site moves
//! - Whoever touches the site (a run that submits, removes or catches up; the
//!   site's driver) first advances the model to the present and files every
//!   event it returns in the mailbox of the run whose attempt it is, waking
//!   that run (a [`Notify`] permit, so a wake-up is never lost).
//! - One driver task per site sleeps until the model's next event and
//!   advances it then, so that an event of a run that is asleep still
//!   happens on time; a run's submission or removal wakes the driver to look
//!   again (the next event may have come closer). It starts with the first
//!   tenancy and ends when the last one is dropped.
//! - Attempt numbers stay each run's own (0, 1, … in its submission order);
//!   the model knows attempt `a` of the run with tag `t` as
//!   `t × 2^40 + a`, which tells the owner of every event without a table
//!   and orders simultaneous attempts of one run as before.
//! - A dropped tenancy (its run finished, failed or was cancelled) takes its
//!   attempts still at the site out of the model, as `condor_rm` of the
//!   whole run would: nothing of an ended run loads the site afterwards.
//!
//! The lock is a plain mutex held for one model operation, never across an
//! await. Not crash-safe: the site lives in memory.

use super::model::{AttemptId, ModelEvent, SiteSim};
use crate::engine::RunClock;
use crate::sync::Locked;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Bits of the model's attempt number that are the run's own number for it.
const ATTEMPT_BITS: u32 = 40;

/// Highest run tag: the tag fills the bits above a run's attempt number.
pub const MAX_TAG: u64 = (1 << (64 - ATTEMPT_BITS)) - 1;

/// One site's model and the runs at it.
pub struct SharedSite {
    state: Mutex<SiteState>,
    /// The grid's clock: what the model's times are read on.
    clock: RunClock,
    /// Wakes the driver: the model's next event may have moved.
    changed: Notify,
}

struct SiteState {
    sim: SiteSim,
    /// The runs at the site, by tag.
    tenants: BTreeMap<u64, Tenant>,
    /// A driver task is running (it clears this as it ends, under the lock).
    driven: bool,
}

/// What the site keeps for one run.
struct Tenant {
    /// Events of the run's attempts not yet taken by the run, in time order
    /// (grid time, the model's attempt numbers).
    mail: Vec<(f64, AttemptId, ModelEvent)>,
    /// The run's attempts in the model (not yet ended or removed).
    live: BTreeSet<AttemptId>,
    /// Wakes the run's backend: it has mail.
    wake: Arc<Notify>,
}

impl SiteState {
    /// Advances the model to `until` (grid time) and files what happened.
    fn advance(&mut self, until: f64) {
        for (at, attempt, what) in self.sim.advance(until) {
            // An attempt of a run no longer here was removed as it left, so
            // the model reports none; skipping is only defensive.
            let Some(tenant) = self.tenants.get_mut(&(attempt.0 >> ATTEMPT_BITS)) else { continue };
            if what != ModelEvent::Started {
                tenant.live.remove(&attempt);
            }
            tenant.mail.push((at, attempt, what));
            tenant.wake.notify_one();
        }
    }
}

impl SharedSite {
    /// A site running `sim`, whose times are read on `clock`.
    pub fn new(sim: SiteSim, clock: RunClock) -> Arc<SharedSite> {
        let state = SiteState { sim, tenants: BTreeMap::new(), driven: false };
        Arc::new(SharedSite { state: Mutex::new(state), clock, changed: Notify::new() })
    }

    /// Lets run `tag` (unique among the runs at the site, at most
    /// [`MAX_TAG`]) use the site; its clock reads 0 at grid time `start`.
    /// Starts the site's driver if none runs: call from within a tokio
    /// runtime.
    pub fn attach(self: &Arc<Self>, tag: u64, start: f64) -> Result<Tenancy, String> {
        if tag > MAX_TAG {
            return Err(format!(
                "run tag {tag} is past the {MAX_TAG} runs one simulated grid tells apart; restart the daemon"
            ));
        }
        let wake = Arc::new(Notify::new());
        let mut state = self.state.locked();
        if state.tenants.contains_key(&tag) {
            return Err(format!("run tag {tag} is already at this simulated site"));
        }
        let tenant = Tenant { mail: Vec::new(), live: BTreeSet::new(), wake: wake.clone() };
        state.tenants.insert(tag, tenant);
        if !state.driven {
            state.driven = true;
            tokio::spawn(drive(self.clone()));
        }
        Ok(Tenancy { site: self.clone(), tag, start, wake })
    }

    /// Grid time now, never behind the model.
    fn now(&self, state: &SiteState) -> f64 {
        self.clock.now().max(state.sim.now())
    }
}

/// The site's driver: advances the model at each of its events while any
/// run is at the site.
async fn drive(site: Arc<SharedSite>) {
    loop {
        let next = {
            let mut state = site.state.locked();
            if state.tenants.is_empty() {
                state.driven = false;
                return;
            }
            state.sim.next_event_time()
        };
        let Some(t) = next else {
            site.changed.notified().await;
            continue;
        };
        tokio::select! {
            biased;
            () = site.changed.notified() => {}
            () = tokio::time::sleep_until(site.clock.instant_at(t)) => {
                // The timer may round; never advance to less than `t`, or the
                // same wake-up would repeat forever.
                let until = site.clock.now().max(t);
                site.state.locked().advance(until);
            }
        }
    }
}

/// One run's use of a [`SharedSite`]: the model's operations in the run's
/// time and attempt numbers, seeing only the run's own attempts.
pub struct Tenancy {
    site: Arc<SharedSite>,
    tag: u64,
    /// Grid time at which the run's clock reads 0.
    start: f64,
    wake: Arc<Notify>,
}

impl Tenancy {
    fn global(&self, attempt: AttemptId) -> AttemptId {
        AttemptId((self.tag << ATTEMPT_BITS) | attempt.0)
    }

    fn local(attempt: AttemptId) -> AttemptId {
        AttemptId(attempt.0 & ((1 << ATTEMPT_BITS) - 1))
    }

    /// Runs the site up to `until` (run time) and returns the run's events
    /// not yet taken, in time order: those up to `until` and any another run
    /// filed a little past it (the runs' clocks are read at different
    /// instants).
    pub fn advance(&mut self, until: f64) -> Vec<(f64, AttemptId, ModelEvent)> {
        let mut state = self.site.state.locked();
        state.advance(until + self.start);
        let mail = state.tenants.get_mut(&self.tag).map(|t| std::mem::take(&mut t.mail)).unwrap_or_default();
        mail.into_iter().map(|(at, attempt, what)| (at - self.start, Self::local(attempt), what)).collect()
    }

    /// [`SiteSim::submit_kind`], at run time `now` (or the site's present,
    /// if another run has moved it past).
    pub fn submit_kind(&mut self, now: f64, attempt: AttemptId, work: f64, kind: usize) {
        let global = self.global(attempt);
        let mut state = self.site.state.locked();
        let now = self.site.now(&state).max(now + self.start);
        state.advance(now);
        state.sim.submit_kind(now, global, work, kind);
        if let Some(t) = state.tenants.get_mut(&self.tag) {
            t.live.insert(global);
        }
        drop(state);
        self.site.changed.notify_one();
    }

    /// [`SiteSim::remove`], at run time `now`.
    pub fn remove(&mut self, now: f64, attempt: AttemptId) -> bool {
        let global = self.global(attempt);
        let mut state = self.site.state.locked();
        let now = self.site.now(&state).max(now + self.start);
        state.advance(now);
        let removed = state.sim.remove(now, global);
        if let Some(t) = state.tenants.get_mut(&self.tag) {
            t.live.remove(&global);
        }
        drop(state);
        self.site.changed.notify_one();
        removed
    }

    /// [`SiteSim::has_started`], at run time `now`.
    pub fn has_started(&mut self, now: f64, attempt: AttemptId) -> bool {
        let global = self.global(attempt);
        let mut state = self.site.state.locked();
        let now = self.site.now(&state).max(now + self.start);
        state.advance(now);
        state.sim.has_started(now, global)
    }

    /// When the run should next look at the site: now if it has mail (the
    /// driver keeps the site's own schedule).
    pub fn next_event_time(&self) -> Option<f64> {
        let state = self.site.state.locked();
        let has_mail = state.tenants.get(&self.tag).is_some_and(|t| !t.mail.is_empty());
        has_mail.then(|| state.sim.now() - self.start)
    }

    /// The site's present, run time.
    pub fn now(&self) -> f64 {
        self.site.state.locked().sim.now() - self.start
    }

    /// Jobs running at the site, every run's.
    pub fn running(&self) -> u32 {
        self.site.state.locked().sim.running()
    }

    pub fn poll_period(&self) -> f64 {
        self.site.state.locked().sim.poll_period()
    }

    /// Whether the site holds the run's job `job` (drawn per run and job:
    /// job 3 of one run is not job 3 of another).
    pub fn holds(&self, job: u64) -> bool {
        self.site.state.locked().sim.holds((self.tag << ATTEMPT_BITS) ^ job)
    }

    /// Notified when the run has mail.
    pub fn wake(&self) -> &Notify {
        &self.wake
    }
}

impl Drop for Tenancy {
    fn drop(&mut self) {
        let mut state = self.site.state.locked();
        let now = self.site.now(&state);
        state.advance(now);
        if let Some(tenant) = state.tenants.remove(&self.tag) {
            for attempt in tenant.live {
                state.sim.remove(now, attempt);
            }
        }
        drop(state);
        self.site.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::{Capacity, SiteParams};

    /// A site whose resource serves one job at full speed and is shared past
    /// that (beta 0), with `slots` slots.
    fn knee_of_one(slots: u32) -> Arc<SharedSite> {
        let params = SiteParams { capacity: Capacity::Finite(1.0), ..SiteParams::healthy("s", slots) };
        SharedSite::new(SiteSim::new(&params, 1), RunClock::scaled(0.0, 1.0))
    }

    fn ends(events: &[(f64, AttemptId, ModelEvent)]) -> Vec<(f64, u64)> {
        events.iter().filter(|e| e.2 == ModelEvent::Finished).map(|e| (e.0, e.1 .0)).collect()
    }

    /// Runs 1 and 2 at a [`knee_of_one`], run 2's clock reading 0 at grid
    /// time `b_start`, each with a job of 100 s submitted at grid time 0.
    fn two_runs(b_start: f64) -> (Arc<SharedSite>, Tenancy, Tenancy) {
        let site = knee_of_one(4);
        let mut a = site.attach(1, 0.0).unwrap();
        let mut b = site.attach(2, b_start).unwrap();
        a.submit_kind(0.0, AttemptId(0), 100.0, 0);
        b.submit_kind(-b_start, AttemptId(0), 100.0, 0);
        (site, a, b)
    }

    #[tokio::test(start_paused = true)]
    async fn two_runs_share_the_resource_and_each_hears_only_of_its_own_attempts() {
        // b's clock reads 0 at grid time 10: its times are 10 less.
        let (_site, mut a, mut b) = two_runs(10.0);
        // Two jobs of load 1 at a capacity of 1: each at half speed, 200 s.
        assert_eq!(ends(&a.advance(f64::INFINITY)), [(200.0, 0)]);
        let heard = b.advance(f64::INFINITY);
        assert_eq!(ends(&heard), [(190.0, 0)], "b's own attempt 0, in b's time: {heard:?}");
        assert!(a.advance(f64::INFINITY).is_empty(), "nothing of b's reaches a");
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_that_leaves_takes_its_jobs_off_the_site() {
        let (site, mut a, mut b) = two_runs(0.0);
        a.advance(50.0);
        drop(a);
        // 25 done by 50 at half speed, then alone: 75 more at full speed.
        assert_eq!(ends(&b.advance(f64::INFINITY)), [(125.0, 0)]);
        assert_eq!(site.state.locked().sim.running(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_driver_moves_the_site_while_its_runs_wait_and_wakes_the_owner() {
        let site = knee_of_one(4);
        let mut a = site.attach(1, 0.0).unwrap();
        let _b = site.attach(2, 0.0).unwrap();
        a.submit_kind(0.0, AttemptId(7), 100.0, 0);
        // Nobody advances the site but its driver: at the job's start (its
        // wait is 0) and at its end, each time waking a.
        let mut heard = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(1000), async {
            while ends(&heard).is_empty() {
                a.wake().notified().await;
                assert!(a.next_event_time().is_some(), "woken with mail");
                heard.extend(a.advance(0.0));
            }
        })
        .await
        .expect("the driver filed a's events");
        assert_eq!(
            heard,
            [(0.0, AttemptId(7), ModelEvent::Started), (100.0, AttemptId(7), ModelEvent::Finished)]
        );
        drop(a);
        drop(_b);
        // The last run gone, the driver ends.
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while site.state.locked().driven {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the driver ended with the last run");
    }
}
