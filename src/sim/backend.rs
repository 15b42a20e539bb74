//! The simulated grid as an engine backend: one [`SimSite`] per site, each
//! owning that site's [`SiteSim`] and driving it from tokio's (paused) clock.
//!
//! The engine cannot tell it from HTCondor: it reports only what HTCondor
//! would (submitted, started, ended, removed) and learns nothing from the
//! policy but submit and remove. What the bench needs beyond that (every
//! attempt, the model's own peak concurrency) goes into the run's
//! [`Ledger`], shared with the caller.

use super::metrics::{AttemptEnd, Ledger};
use super::model::{next_multiple, AttemptId, ModelEvent, SiteSim};
use super::shared::Tenancy;
use crate::engine::{RunClock, SiteBackend};
use crate::policy::{HoldCause, JobId, JobTypeId, Outcome, SiteEvent};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The model a [`SimSite`] drives: a site of the run's own (`cosched
/// bench`, in virtual time) or its share of a site several runs use
/// ([`super::shared`], the daemon's grid). The same operations, in the
/// run's time and attempt numbers.
// One per site of a run, never moved: the size costs nothing, and the
// bench's own sites would pay a pointer chase on every call if boxed.
#[allow(clippy::large_enum_variant)]
pub enum SiteModel {
    Own(SiteSim),
    Shared(Tenancy),
}

impl From<SiteSim> for SiteModel {
    fn from(sim: SiteSim) -> Self {
        SiteModel::Own(sim)
    }
}

impl From<Tenancy> for SiteModel {
    fn from(tenancy: Tenancy) -> Self {
        SiteModel::Shared(tenancy)
    }
}

impl SiteModel {
    fn advance(&mut self, until: f64) -> Vec<(f64, AttemptId, ModelEvent)> {
        match self {
            SiteModel::Own(sim) => sim.advance(until),
            SiteModel::Shared(t) => t.advance(until),
        }
    }
    fn submit_kind(&mut self, now: f64, attempt: AttemptId, work: f64, kind: usize) {
        match self {
            SiteModel::Own(sim) => sim.submit_kind(now, attempt, work, kind),
            SiteModel::Shared(t) => t.submit_kind(now, attempt, work, kind),
        }
    }
    fn remove(&mut self, now: f64, attempt: AttemptId) -> bool {
        match self {
            SiteModel::Own(sim) => sim.remove(now, attempt),
            SiteModel::Shared(t) => t.remove(now, attempt),
        }
    }
    fn has_started(&mut self, now: f64, attempt: AttemptId) -> bool {
        match self {
            SiteModel::Own(sim) => sim.has_started(now, attempt),
            SiteModel::Shared(t) => t.has_started(now, attempt),
        }
    }
    fn next_event_time(&self) -> Option<f64> {
        match self {
            SiteModel::Own(sim) => sim.next_event_time(),
            SiteModel::Shared(t) => t.next_event_time(),
        }
    }
    fn now(&self) -> f64 {
        match self {
            SiteModel::Own(sim) => sim.now(),
            SiteModel::Shared(t) => t.now(),
        }
    }
    fn running(&self) -> u32 {
        match self {
            SiteModel::Own(sim) => sim.running(),
            SiteModel::Shared(t) => t.running(),
        }
    }
    fn poll_period(&self) -> f64 {
        match self {
            SiteModel::Own(sim) => sim.poll_period(),
            SiteModel::Shared(t) => t.poll_period(),
        }
    }
    fn holds(&self, job: u64) -> bool {
        match self {
            SiteModel::Own(sim) => sim.holds(job),
            SiteModel::Shared(t) => t.holds(job),
        }
    }
    /// What wakes the run besides the model's own next event: another
    /// run's move of a shared site that produced events of this one.
    async fn woken(&self) {
        match self {
            SiteModel::Own(_) => std::future::pending().await,
            SiteModel::Shared(t) => t.wake().notified().await,
        }
    }
}

pub struct SimSite {
    site: u32,
    sim: SiteModel,
    clock: RunClock,
    /// Work of every job (seconds at speed 1), shared by all sites.
    work: Arc<Vec<f64>>,
    /// Kind of every job, by job index (empty: every job of the first kind).
    kinds: Arc<Vec<JobTypeId>>,
    /// Attempt of each job out here.
    out: BTreeMap<JobId, AttemptId>,
    /// Jobs on hold here (never given to the model), until removed.
    held: BTreeMap<JobId, AttemptId>,
    /// The next attempt's number: attempts are numbered in submission
    /// order, which is how the model orders simultaneous ones.
    next_attempt: u64,
    ledger: Arc<Mutex<Ledger>>,
    /// Starts and ends the site made that the submit side has not heard of
    /// yet, in time order: when the gridmanager's next poll tells of each,
    /// and what it tells. Empty where the site's poll period is 0.
    unheard: VecDeque<(f64, AttemptId, ModelEvent)>,
}

impl SimSite {
    /// Site number `site` of a run, driving `sim`: a [`SiteSim`] of the
    /// run's own, or a [`Tenancy`] of a site other runs use too (then
    /// `clock` is the grid's, shifted to read 0 where the tenancy starts).
    pub fn new(
        site: u32,
        sim: impl Into<SiteModel>,
        clock: RunClock,
        work: Arc<Vec<f64>>,
        ledger: Arc<Mutex<Ledger>>,
    ) -> Self {
        SimSite {
            site,
            sim: sim.into(),
            clock,
            work,
            kinds: Arc::new(Vec::new()),
            out: BTreeMap::new(),
            held: BTreeMap::new(),
            next_attempt: 0,
            ledger,
            unheard: VecDeque::new(),
        }
    }

    /// The same site for a run of several kinds: job `j` is of kind
    /// `kinds[j]`, an index into the kinds the model was made with.
    pub fn with_kinds(self, kinds: Arc<Vec<JobTypeId>>) -> Self {
        SimSite { kinds, ..self }
    }

    /// Runs the model up to `until` and translates what the submit side
    /// has heard of by then: everything, or, where the gridmanager polls
    /// the site, what its polls up to `until` told (at the poll's time).
    fn advance(&mut self, until: f64) -> Vec<SiteEvent> {
        let mut happened = self.sim.advance(until);
        let poll = self.sim.poll_period();
        if poll > 0.0 {
            self.unheard.extend(
                happened.drain(..).map(|(at, attempt, what)| (next_multiple(at, poll), attempt, what)),
            );
            while self.unheard.front().is_some_and(|u| u.0 <= until) {
                happened.extend(self.unheard.pop_front());
            }
        }
        let mut ledger = self.ledger.lock().expect("ledger lock");
        let mut events = Vec::with_capacity(happened.len());
        for (at, attempt, what) in happened {
            // The model reports only attempts it still holds, so never a
            // removed one; one no longer out would end twice.
            let Some(job) = ledger.out(self.site, attempt).map(JobId) else {
                continue;
            };
            match what {
                ModelEvent::Started => {
                    ledger.started(self.site, attempt, at);
                    events.push(SiteEvent::Started { job, at });
                }
                ModelEvent::Finished | ModelEvent::Failed => {
                    self.out.remove(&job);
                    let (end, outcome) = if what == ModelEvent::Finished {
                        (AttemptEnd::Success, Outcome::Success)
                    } else {
                        (
                            AttemptEnd::Failed,
                            Outcome::Failed { detail: "failed at the site (simulated)".into() },
                        )
                    };
                    ledger.ended(self.site, attempt, at, end);
                    events.push(SiteEvent::Ended { job, at, outcome });
                }
            }
        }
        ledger.saw_running(self.site, self.sim.running());
        ledger.count_events(events.len() as u64);
        events
    }

    /// Brings the model to the engine's present; returns what happened on
    /// the way (reported before whatever the caller does now).
    fn catch_up(&mut self) -> (f64, Vec<SiteEvent>) {
        let now = self.clock.now().max(self.sim.now());
        (now, self.advance(now))
    }
}

impl SiteBackend for SimSite {
    async fn submit(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        let (now, mut events) = self.catch_up();
        let mut ledger = self.ledger.lock().expect("ledger lock");
        let mut held = Vec::new();
        for &job in &jobs {
            let attempt = AttemptId(self.next_attempt);
            self.next_attempt += 1;
            if self.sim.holds(job.0) {
                ledger.submitted(self.site, attempt, job.0, now);
                self.held.insert(job, attempt);
                held.push(job);
                continue;
            }
            let work = self.work.get(job.0 as usize).copied().unwrap_or(0.0);
            let kind = self.kinds.get(job.0 as usize).map_or(0, |k| k.index());
            self.sim.submit_kind(now, attempt, work, kind);
            self.out.insert(job, attempt);
            ledger.submitted(self.site, attempt, job.0, now);
        }
        ledger.count_events(1 + held.len() as u64);
        events.push(SiteEvent::Submitted { jobs, at: now });
        events.extend(held.into_iter().map(|job| SiteEvent::Held {
            job,
            at: now,
            reason: "input missing at the site (simulated)".into(),
            cause: HoldCause::Site,
        }));
        events
    }

    async fn remove(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        let (now, mut events) = self.catch_up();
        let mut ledger = self.ledger.lock().expect("ledger lock");
        for job in jobs {
            if let Some(attempt) = self.held.remove(&job) {
                ledger.ended(self.site, attempt, now, AttemptEnd::Held);
                ledger.count_events(1);
                events.push(SiteEvent::Removed { job, at: now });
                continue;
            }
            let Some(&attempt) = self.out.get(&job) else { continue };
            if self.sim.remove(now, attempt) {
                self.out.remove(&job);
                ledger.ended(self.site, attempt, now, AttemptEnd::Removed);
                ledger.count_events(1);
                events.push(SiteEvent::Removed { job, at: now });
            }
        }
        events
    }

    /// The model knows each attempt's true state; `catch_up` has reported
    /// every start due by now, so a start seen here is simultaneous.
    async fn withdraw(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        let (now, mut events) = self.catch_up();
        let mut idle = Vec::with_capacity(jobs.len());
        for job in jobs {
            let Some(&attempt) = self.out.get(&job) else { continue };
            // Started, or ended and not yet heard of: no longer idle there.
            if self.sim.has_started(now, attempt) || self.unheard.iter().any(|u| u.1 == attempt) {
                events.push(SiteEvent::WithdrawDeclined { job, at: now });
            } else {
                idle.push(job);
            }
        }
        events.extend(self.remove(idle).await);
        events
    }

    async fn next_events(&mut self) -> Vec<SiteEvent> {
        loop {
            let heard = self.unheard.front().map(|u| u.0);
            let due = [self.sim.next_event_time(), heard].into_iter().flatten().min_by(f64::total_cmp);
            // Without a due time nothing happens here unless we are told to
            // act (the engine drops this future when a command comes) or,
            // on a shared site, another run's move brings us events.
            let timer = async {
                match due {
                    Some(t) => tokio::time::sleep_until(self.clock.instant_at(t)).await,
                    None => std::future::pending().await,
                }
            };
            let until = tokio::select! {
                biased;
                // The timer may round; never ask the model for less than
                // `t`, or the same wake-up would repeat forever.
                () = timer => self.clock.now().max(due.unwrap_or(f64::NEG_INFINITY)),
                () = self.sim.woken() => self.clock.now(),
            };
            let events = self.advance(until);
            if !events.is_empty() {
                return events;
            }
        }
    }
}
