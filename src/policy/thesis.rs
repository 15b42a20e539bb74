//! `thesis`: Algorithms 1–3 of the 2013 thesis ("Adaptive Co-Scheduler for
//! Highly Dynamic Resources", chapter 4), read literally, so that the default
//! policy has an honest baseline to beat and the thesis's numbers can be
//! reproduced.
//!
//! The thesis runs one thread per site. Each thread submits a batch of k jobs,
//! waits until the whole batch has come back, measures the batch turnaround
//! and decides the next k; after every batch all threads meet at a barrier
//! where their AgTimes are compared (Algorithm 3). Here the threads are per-site
//! state machines and the barrier is a *round*: every responsive site submits
//! one batch, and the next round starts when every batch has come back.
//!
//! # How the text is read (where it is ambiguous, the most literal reading)
//! - **T2** is the mean turnaround (submit → end, i.e. queue wait + run time)
//!   of the batch's successful jobs; the same number is the site's **AgTime**
//!   for Algorithm 3 ("averaged over the batch"). The first batch only sets T1.
//! - **Kinds of job**: the thesis ran one kind, so T1 and T2 are turnarounds
//!   of the same work. In a run of several kinds each kind keeps its own T1,
//!   and a batch is degraded when its mean turnaround exceeds C2 times the
//!   mean T1 of its jobs (each its own kind's); a kind's first batch only
//!   sets its T1, and a fine batch averages each kind's T1 with its T2. With
//!   one kind this is `T2 > C2·T1` as written. One T1 for a mix reads the
//!   mix, not contention: it sinks to the shortest kind's, and batches
//!   holding a longer job then read degraded (`--blind-types` runs it so).
//! - **Algorithm 1**: if `T2 ≤ C2·T1` the batch was fine: `T1 ← (T1 + T2)/2`
//!   and k grows to `C1·k` (figure 4.1). The pseudo-code leaves `T2 = C2·T1`
//!   in neither branch (an endless loop); it is counted as fine. If
//!   `T2 > C2·T1`, Algorithm 2 searches between `low = k/2` and `high = k`.
//! - **Algorithm 2** is a binary search without a base case in the text. It
//!   submits `mid = (low + high)/2`; fine → search `[mid, high]` (T1 updated),
//!   degraded → `[low, mid]` (T1 kept). It stops when `high − low ≤ 1`; the
//!   capacity is then `low`, the largest size not seen degraded.
//! - **Hold**: the capacity is used for up to `hold_iterations` batches (the
//!   thesis's "maximum of ten iterations"). A degraded batch during the hold
//!   starts a new search between k/2 and k (Algorithm 1's loop still runs),
//!   except at k = 1, where there is no size below to search: the hold goes
//!   on, so a capacity of 1 is kept ten batches, not for as long as one-job
//!   batches keep reading as degraded; after the hold, growth by C1 resumes
//!   from the capacity (re-probe).
//! - **Algorithm 3** runs at each barrier when at least two sites report an
//!   AgTime (one site has nothing to be compared with; the single-site runs of
//!   chapter 5 grow by C1 alone). The propagation factor starts from C1 every
//!   round (`c1 ← 2` is the function's first line) and follows figure 4.2's
//!   piecewise function, first matching case wins: the lowest AgTime gets
//!   `C1·4`, the highest `max(C1/2, 1)`, the others below the average `C1·2`,
//!   the rest `C1`. The factor only sets how k grows (figure 4.1); a site that
//!   is searching or holding ignores it.
//! - **sumOfK**: jobs come out of the shared pool in site order, so the total
//!   out never exceeds N; a site whose k is larger than what is left gets the
//!   rest.
//! - **Timeout** (the deadlock guard of §4.6.2): `timeout` seconds after a
//!   round starts, a site whose batch is not back has its jobs that "do not
//!   execute" (idle or held) removed; its running jobs are waited for, since
//!   they will end. A site where none of the batch's jobs started is left out
//!   of the barrier and of every later round (it is unresponsive); if every
//!   site ends up unresponsive they are all tried again, one job at a time.
//!   A site's own `idle_timeout` overrides `timeout`.
//! - Failed jobs return to the pool and go out in the next round; they do not
//!   count in T2. The thesis keeps nothing between runs.

use super::book::Change;
use super::jobtype::{JobTypeId, JobTypes};
use super::{
    Action, Decision, DecisionKind, Input, JobBook, JobId, JobState, Policy, RunSpec, SiteClass, SiteId,
    SiteView, Time,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Deadlines closer than this count as reached (clock rounding).
const TIME_SLACK: Time = 1e-6;

/// Parameters from the `[policy]` table of sites.toml (`policy = "thesis"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// C1, the job propagation factor: k is multiplied by it after every batch
    /// that did not degrade (the thesis uses 2).
    pub c1: f64,
    /// C2, the degradation factor: a batch whose mean turnaround T2 exceeds
    /// `c2 × T1` is degraded (the thesis uses 1.25, "25% greater").
    pub c2: f64,
    /// How many batches the found capacity is held before growth is tried
    /// again (the thesis says "a maximum of ten iterations").
    pub hold_iterations: u32,
    /// Seconds after a round starts at which a site's jobs that have not
    /// started are removed; a site that started none of them is dropped.
    /// A site's own `idle_timeout` takes precedence.
    pub timeout: f64,
    /// Size of the first batch at every site (the thesis starts with one job).
    pub initial_k: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params { c1: 2.0, c2: 1.25, hold_iterations: 10, timeout: 1800.0, initial_k: 1 }
    }
}

impl super::ParamRanges for Params {
    fn out_of_range(&self) -> Vec<super::OutOfRange> {
        super::failing(&[
            ("c1", self.c1.is_finite() && self.c1 > 1.0, "a growth factor, more than 1"),
            ("c2", self.c2.is_finite() && self.c2 > 1.0, "a slowdown, more than 1 (1.25: 25% slower)"),
            ("timeout", self.timeout.is_finite() && self.timeout > 0.0, "a positive number of seconds"),
            ("initial_k", self.initial_k >= 1, "a number of jobs, at least 1"),
        ])
    }
}

/// Where a site is in Algorithms 1–2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Algorithm 1: k grows by the propagation factor after every good batch.
    Grow,
    /// Algorithm 2: binary search for the capacity in `[low, high]`; the batch
    /// out is of size `(low + high) / 2`.
    Search { low: u64, high: u64 },
    /// The capacity was found; `left` more batches of it before re-probing.
    Hold { left: u32 },
}

/// Algorithms 1 and 2 for one site: turns a sequence of batch turnarounds
/// into a sequence of batch sizes. Pure, so the thesis's sequences can be
/// checked by hand.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacitySearch {
    /// Size of the next batch.
    pub k: u64,
    pub phase: Phase,
    /// T1, the running reference turnaround, of each kind of job by its
    /// index; `None` before the kind's first batch.
    t1: Vec<Option<f64>>,
    /// The capacity the last search ended at.
    pub capacity: Option<u64>,
    c2: f64,
    hold_iterations: u32,
    /// k never grows beyond this (N, or the site's `max_jobs`).
    k_max: u64,
}

impl CapacitySearch {
    pub fn new(initial_k: u64, c2: f64, hold_iterations: u32, k_max: u64) -> Self {
        let k_max = k_max.max(1);
        CapacitySearch {
            k: initial_k.clamp(1, k_max),
            phase: Phase::Grow,
            t1: Vec::new(),
            capacity: None,
            c2,
            hold_iterations,
            k_max,
        }
    }

    /// Takes the mean turnaround `t2` of the batch of size `self.k` that just
    /// came back, all of one kind of job, and the propagation factor `c1`
    /// for this round; sets the next batch size. Returns whether the batch
    /// counted as degraded.
    pub fn observe(&mut self, t2: f64, c1: f64) -> bool {
        self.observe_kinds(&[(JobTypeId::default(), t2, 1)], c1)
    }

    /// [`CapacitySearch::observe`] for a batch of several kinds: each
    /// kind's mean turnaround in the batch and its count of jobs. Each kind
    /// is compared with its own T1 (a kind seen for the first time only
    /// sets it): the batch is degraded if its mean turnaround exceeds C2
    /// times the mean T1 of its jobs.
    pub fn observe_kinds(&mut self, batch: &[(JobTypeId, f64, u32)], c1: f64) -> bool {
        // (kind, its T1, its T2, its jobs) of the kinds seen before.
        let known: Vec<(JobTypeId, f64, f64, u32)> =
            batch.iter().filter_map(|&(kind, t2, n)| self.t1_of(kind).map(|t1| (kind, t1, t2, n))).collect();
        for &(kind, t2, _) in batch {
            self.t1_mut(kind).get_or_insert(t2);
        }
        if known.is_empty() {
            self.grow(c1);
            return false;
        }
        let (t1, t2) = match known[..] {
            // One kind: T2 against T1 as the thesis writes it.
            [(_, t1, t2, _)] => (t1, t2),
            _ => {
                let n: f64 = known.iter().map(|k| f64::from(k.3)).sum();
                let t1 = known.iter().map(|k| k.1 * f64::from(k.3)).sum::<f64>() / n;
                let t2 = known.iter().map(|k| k.2 * f64::from(k.3)).sum::<f64>() / n;
                (t1, t2)
            }
        };
        let degraded = t2 > self.c2 * t1;
        if !degraded {
            for &(kind, t1, t2, _) in &known {
                *self.t1_mut(kind) = Some((t1 + t2) / 2.0);
            }
        }
        match self.phase {
            Phase::Grow if degraded => self.search(self.k / 2, self.k),
            Phase::Grow => self.grow(c1),
            Phase::Search { low, high } => {
                let mid = self.k;
                if degraded {
                    self.search(low, mid)
                } else {
                    self.search(mid, high)
                }
            }
            // A batch of one job has no smaller size below it to search
            // (Algorithm 2's `low` is a size seen not degraded, and k/2 = 0
            // is none), so the hold goes on: §4.2 keeps a capacity at most
            // ten iterations, and a one-job batch's spread must not restart
            // them for ever.
            Phase::Hold { .. } if degraded && self.k >= 2 => self.search(self.k / 2, self.k),
            Phase::Hold { left } if left <= 1 => {
                self.phase = Phase::Grow;
                self.grow(c1);
            }
            Phase::Hold { left } => self.phase = Phase::Hold { left: left - 1 },
        }
        degraded
    }

    /// T1 of the first kind of job (the only one of a run of one kind).
    pub fn t1(&self) -> Option<f64> {
        self.t1_of(JobTypeId::default())
    }

    fn t1_of(&self, kind: JobTypeId) -> Option<f64> {
        self.t1.get(kind.index()).copied().flatten()
    }

    fn t1_mut(&mut self, kind: JobTypeId) -> &mut Option<f64> {
        let i = kind.index();
        if self.t1.len() <= i {
            self.t1.resize(i + 1, None);
        }
        &mut self.t1[i]
    }

    fn grow(&mut self, c1: f64) {
        let grown = (self.k as f64 * c1.max(1.0)).round() as u64;
        self.k = grown.clamp(1, self.k_max);
    }

    fn search(&mut self, low: u64, high: u64) {
        let low = low.max(1);
        if high <= low + 1 {
            self.capacity = Some(low);
            self.k = low;
            self.phase = if self.hold_iterations == 0 {
                Phase::Grow
            } else {
                Phase::Hold { left: self.hold_iterations }
            };
        } else {
            self.k = (low + high) / 2;
            self.phase = Phase::Search { low, high };
        }
    }
}

/// Algorithm 3 (figure 4.2): the propagation factor of each site from the
/// AgTimes reported at the barrier. Sites with `None` were left out of the
/// barrier and get `c1` unchanged. First matching case wins: lowest `c1·4`,
/// highest `max(c1/2, 1)`, below the average `c1·2`, otherwise `c1`.
pub fn propagation_factors(agtimes: &[Option<f64>], c1: f64) -> Vec<f64> {
    let reported: Vec<f64> = agtimes.iter().flatten().copied().collect();
    if reported.len() < 2 {
        return vec![c1; agtimes.len()];
    }
    let low = reported.iter().copied().fold(f64::INFINITY, f64::min);
    let high = reported.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let average = reported.iter().sum::<f64>() / reported.len() as f64;
    agtimes
        .iter()
        .map(|ag| match *ag {
            None => c1,
            Some(ag) if ag == low => c1 * 4.0,
            Some(ag) if ag == high => (c1 / 2.0).max(1.0),
            Some(ag) if ag < average => c1 * 2.0,
            Some(_) => c1,
        })
        .collect()
}

/// One site's thread of the thesis.
struct SiteState {
    search: CapacitySearch,
    /// Jobs of this round's batch not yet back.
    batch: BTreeSet<JobId>,
    /// Sum and count of the turnarounds of the batch's successful jobs,
    /// of all kinds (the site's AgTime) and of each kind by its index.
    turnaround_sum: f64,
    successes: u32,
    by_kind: Vec<(f64, u32)>,
    /// Some job of this round's batch started.
    any_started: bool,
    /// This round's timeout has fired for the site.
    timed_out: bool,
    /// Left out of every round after starting nothing within the timeout.
    unresponsive: bool,
    timeout: f64,
    /// AgTime of the last batch, and the class Algorithm 3 gave the site.
    agtime: Option<f64>,
    class: SiteClass,
}

pub struct Thesis {
    params: Params,
    book: JobBook,
    types: JobTypes,
    sites: Vec<SiteState>,
    /// When the current round started; `None` between rounds.
    round_start: Option<Time>,
    /// For [`Policy::take_decisions`]: not taken yet, and each site's
    /// (k, capacity) last told.
    decided: Vec<Decision>,
    told: Vec<Option<(u64, Option<u64>)>>,
}

impl Thesis {
    pub fn new(spec: &RunSpec, params: &Params) -> Self {
        let sites = spec
            .sites
            .iter()
            .map(|info| {
                let k_max = info.max_jobs.map_or(spec.n_jobs, |m| u64::from(m).min(spec.n_jobs));
                SiteState {
                    search: CapacitySearch::new(params.initial_k, params.c2, params.hold_iterations, k_max),
                    batch: BTreeSet::new(),
                    turnaround_sum: 0.0,
                    successes: 0,
                    by_kind: vec![(0.0, 0); spec.types.len()],
                    any_started: false,
                    timed_out: false,
                    unresponsive: false,
                    timeout: info.idle_timeout.unwrap_or(params.timeout),
                    agtime: None,
                    class: SiteClass::Unknown,
                }
            })
            .collect();
        Thesis {
            params: params.clone(),
            book: JobBook::new(spec.n_jobs, spec.sites.len(), spec.max_attempts),
            types: spec.types.clone(),
            sites,
            round_start: None,
            decided: Vec::new(),
            told: vec![None; spec.sites.len()],
        }
    }

    fn round_open(&self) -> bool {
        self.sites.iter().any(|s| !s.batch.is_empty())
    }

    /// Every responsive site submits a batch of its k (the threads leave the
    /// barrier together).
    fn start_round(&mut self, now: Time, actions: &mut Vec<Action>) {
        if !self.sites.is_empty() && self.sites.iter().all(|s| s.unresponsive) {
            for site in &mut self.sites {
                site.unresponsive = false;
                site.class = SiteClass::Unknown;
                site.search.k = 1;
            }
        }
        for (i, site) in self.sites.iter_mut().enumerate() {
            site.turnaround_sum = 0.0;
            site.successes = 0;
            site.by_kind.iter_mut().for_each(|k| *k = (0.0, 0));
            site.any_started = false;
            site.timed_out = false;
            if site.unresponsive {
                continue;
            }
            let jobs = self.book.take(SiteId(i as u32), site.search.k);
            if jobs.is_empty() {
                continue;
            }
            site.batch.extend(jobs.iter().copied());
            let why = match site.search.phase {
                Phase::Grow => format!("thesis: batch of k={} (growing)", site.search.k),
                Phase::Search { low, high } => {
                    format!("thesis: batch of k={} (searching {low}..{high})", site.search.k)
                }
                Phase::Hold { left } => {
                    format!("thesis: batch of k={} (holding capacity, {left} left)", site.search.k)
                }
            };
            actions.push(Action::Submit { site: SiteId(i as u32), jobs, why });
        }
        self.round_start = self.round_open().then_some(now);
    }

    /// The barrier: every batch is back (or its site timed out). Algorithm 3
    /// reweights the sites, then each site's Algorithm 1/2 picks its next k.
    fn end_round(&mut self) {
        self.round_start = None;
        let agtimes: Vec<Option<f64>> = self
            .sites
            .iter()
            .map(|s| (s.successes > 0).then(|| s.turnaround_sum / f64::from(s.successes)))
            .collect();
        let factors = propagation_factors(&agtimes, self.params.c1);
        let reported: Vec<f64> = agtimes.iter().flatten().copied().collect();
        let average = reported.iter().sum::<f64>() / reported.len().max(1) as f64;
        for (site, (agtime, c1)) in self.sites.iter_mut().zip(agtimes.into_iter().zip(factors)) {
            let Some(agtime) = agtime else { continue };
            site.agtime = Some(agtime);
            if reported.len() >= 2 {
                site.class = if agtime < average { SiteClass::Fast } else { SiteClass::Slow };
            }
            let batch: Vec<(JobTypeId, f64, u32)> = (self.types.ids().zip(&site.by_kind))
                .filter(|(_, &(_, n))| n > 0)
                .map(|(kind, &(sum, n))| (kind, sum / f64::from(n), n))
                .collect();
            site.search.observe_kinds(&batch, c1);
        }
    }

    /// Timeouts that have come: remove the jobs that never started.
    fn fire_timeouts(&mut self, now: Time, actions: &mut Vec<Action>) {
        let Some(start) = self.round_start else { return };
        for (i, site) in self.sites.iter_mut().enumerate() {
            // Within a microsecond counts as reached: the engine's clock
            // rounds to nanoseconds, and a deadline missed by that much would
            // be asked for again at once, for ever.
            if site.timed_out || site.batch.is_empty() || now + TIME_SLACK < start + site.timeout {
                continue;
            }
            site.timed_out = true;
            let id = SiteId(i as u32);
            let waiting: Vec<JobId> = site
                .batch
                .iter()
                .copied()
                .filter(|&j| matches!(self.book.state(j), JobState::Idle { .. } | JobState::Held { .. }))
                .collect();
            let removed = self.book.mark_removing(id, &waiting);
            for job in &removed {
                site.batch.remove(job);
            }
            if !site.any_started {
                site.unresponsive = true;
                site.class = SiteClass::Unresponsive;
                // Left out of the barrier: nothing of it is waited for.
                site.batch.clear();
            }
            if !removed.is_empty() {
                let why = if site.unresponsive {
                    format!("thesis: nothing started within {:.0} s; site left out", site.timeout)
                } else {
                    format!("thesis: not started within {:.0} s", site.timeout)
                };
                actions.push(Action::Remove { site: id, jobs: removed, why });
            }
        }
    }

    fn on_site_event(&mut self, site: SiteId, event: &super::SiteEvent, actions: &mut Vec<Action>) {
        let change = self.book.apply(site, event);
        let state = &mut self.sites[site.index()];
        match change {
            Change::None | Change::Submitted { .. } => {}
            Change::Returned { jobs } => {
                for job in jobs {
                    state.batch.remove(&job);
                }
            }
            Change::Started { job, .. } => {
                if state.batch.contains(&job) {
                    state.any_started = true;
                }
            }
            Change::Succeeded { job, submitted, ended, .. } => {
                if state.batch.remove(&job) {
                    state.turnaround_sum += ended - submitted;
                    state.successes += 1;
                    if let Some(kind) = state.by_kind.get_mut(self.types.of(job).index()) {
                        kind.0 += ended - submitted;
                        kind.1 += 1;
                    }
                }
            }
            Change::Failed { job, held: true, .. } => {
                state.batch.remove(&job);
                let jobs = self.book.mark_removing(site, &[job]);
                actions.push(Action::Remove { site, jobs, why: "thesis: held".into() });
            }
            Change::Failed { job, held: false, exhausted, .. } => {
                state.batch.remove(&job);
                if exhausted {
                    actions.push(Action::GiveUp { job, why: "failed on every attempt".into() });
                }
            }
            Change::Removed { job } => {
                state.batch.remove(&job);
                if *self.book.state(job) == JobState::GivenUp {
                    actions.push(Action::GiveUp { job, why: "held on every attempt".into() });
                }
            }
        }
    }

    /// After any input: when the barrier is complete, the next round starts.
    fn advance(&mut self, now: Time, actions: &mut Vec<Action>) {
        if self.round_open() {
            return;
        }
        if self.round_start.is_some() {
            self.end_round();
        }
        if self.book.pool_len() > 0 {
            self.start_round(now, actions);
        }
    }
}

impl Thesis {
    /// Each site's batch size k (its window) and capacity found, when they
    /// changed. O(sites) per input: the thesis's grids have few sites.
    fn tell(&mut self, now: Time) {
        for (i, (s, told)) in self.sites.iter().zip(&mut self.told).enumerate() {
            let current = (s.search.k, s.search.capacity);
            if *told != Some(current) {
                *told = Some(current);
                let kind =
                    DecisionKind::Window { window: current.0 as f64, capacity: current.1.map(|c| c as f64) };
                self.decided.push(Decision::of_site(now, SiteId(i as u32), kind));
            }
        }
    }
}

impl Policy for Thesis {
    fn name(&self) -> &'static str {
        "thesis"
    }

    fn handle(&mut self, now: Time, input: &Input) -> Vec<Action> {
        let mut actions = Vec::new();
        match input {
            Input::Start => {}
            Input::Site { site, event } => {
                if site.index() < self.sites.len() {
                    self.on_site_event(*site, event, &mut actions);
                }
            }
            Input::Tick => self.fire_timeouts(now, &mut actions),
        }
        if self.book.any_barred() {
            let live: Vec<bool> = self.sites.iter().map(|s| !s.unresponsive).collect();
            actions.extend(self.book.give_up_stranded(&live));
        }
        self.advance(now, &mut actions);
        self.tell(now);
        actions
    }

    fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decided)
    }

    fn next_deadline(&self) -> Option<Time> {
        let start = self.round_start?;
        self.sites
            .iter()
            .filter(|s| !s.timed_out && !s.batch.is_empty())
            .map(|s| start + s.timeout)
            .min_by(f64::total_cmp)
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        let s = &self.sites[site.index()];
        SiteView {
            window: s.search.k.min(u64::from(u32::MAX)) as u32,
            capacity: s.search.capacity.map(|c| c as f64),
            class: s.class,
            agtime: s.agtime,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{JobTypes, Outcome, SiteEvent, SiteInfo};

    const GOOD: f64 = 100.0;
    const BAD: f64 = 200.0;

    #[test]
    fn each_site_s_batch_size_is_told_when_it_changes() {
        use crate::policy::SiteInfo;
        let spec = RunSpec {
            n_jobs: 100,
            sites: vec![SiteInfo::named("a"), SiteInfo::named("b")],
            max_attempts: 3,
            ..RunSpec::default()
        };
        let params = Params::default();
        let mut t = Thesis::new(&spec, &params);
        let actions = t.handle(0.0, &Input::Start);
        let told = t.take_decisions();
        assert_eq!(told.len(), 2, "{told:?}");
        for (i, d) in told.iter().enumerate() {
            assert_eq!(d.site, SiteId(i as u32));
            let submitted = actions
                .iter()
                .filter_map(|a| match a {
                    Action::Submit { site, jobs, .. } if *site == d.site => Some(jobs.len() as f64),
                    _ => None,
                })
                .sum::<f64>();
            assert_eq!(d.kind, DecisionKind::Window { window: submitted, capacity: None }, "the batch sent");
        }
        t.handle(1.0, &Input::Tick);
        assert!(t.take_decisions().is_empty(), "nothing changed, nothing told");
    }

    fn sizes(search: &mut CapacitySearch, turnarounds: &[f64]) -> Vec<u64> {
        let mut ks = vec![search.k];
        for &t2 in turnarounds {
            search.observe(t2, 2.0);
            ks.push(search.k);
        }
        ks
    }

    #[test]
    fn grows_by_c1_then_binary_searches_between_k_half_and_k() {
        // k = 1, 2, 4, 8 fine; 8 degrades → search 4..8: 6 fine → 7 fine → capacity 7.
        let mut s = CapacitySearch::new(1, 1.25, 10, 1000);
        assert_eq!(
            sizes(&mut s, &[GOOD, GOOD, GOOD, GOOD, BAD, GOOD, GOOD]),
            vec![1, 2, 4, 8, 16, 12, 14, 15]
        );
        // The same run, counted from the batch of 8 degrading.
        let mut s = CapacitySearch::new(1, 1.25, 10, 1000);
        assert_eq!(sizes(&mut s, &[GOOD, GOOD, GOOD, BAD]), vec![1, 2, 4, 8, 6]);
        assert_eq!(s.phase, Phase::Search { low: 4, high: 8 });
        let mut up = s.clone();
        assert_eq!(sizes(&mut up, &[GOOD, GOOD]), vec![6, 7, 7]);
        assert_eq!(up.capacity, Some(7));
        assert_eq!(up.phase, Phase::Hold { left: 10 });
        let mut down = s.clone();
        assert_eq!(sizes(&mut down, &[BAD, GOOD]), vec![6, 5, 5]);
        assert_eq!(down.capacity, Some(5));
        let mut lowest = s;
        assert_eq!(sizes(&mut lowest, &[BAD, BAD]), vec![6, 5, 4]);
        assert_eq!(lowest.capacity, Some(4));
    }

    #[test]
    fn t1_is_averaged_only_over_good_batches() {
        let mut s = CapacitySearch::new(1, 1.25, 10, 1000);
        s.observe(100.0, 2.0);
        assert_eq!(s.t1(), Some(100.0));
        // 124 ≤ 125: fine, T1 = (100 + 124) / 2 = 112.
        assert!(!s.observe(124.0, 2.0));
        assert_eq!(s.t1(), Some(112.0));
        // Exactly C2·T1 = 140 counts as fine (the text has no branch for it).
        assert!(!s.observe(140.0, 2.0));
        assert_eq!(s.t1(), Some(126.0));
        // 158 > 157.5: degraded, T1 kept.
        assert!(s.observe(158.0, 2.0));
        assert_eq!(s.t1(), Some(126.0));
        assert_eq!((s.k, s.phase), (6, Phase::Search { low: 4, high: 8 }));
    }

    #[test]
    fn holds_the_capacity_ten_batches_then_reprobes() {
        let mut s = CapacitySearch::new(1, 1.25, 10, 1000);
        sizes(&mut s, &[GOOD, GOOD, GOOD, BAD, GOOD, GOOD]);
        assert_eq!((s.k, s.capacity), (7, Some(7)));
        let ks = sizes(&mut s, &[GOOD; 10]);
        assert_eq!(ks, vec![7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 14]);
        assert_eq!(s.phase, Phase::Grow);
        // A degradation during a hold searches between k/2 and k again.
        let mut s = CapacitySearch::new(1, 1.25, 10, 1000);
        sizes(&mut s, &[GOOD, GOOD, GOOD, BAD, GOOD, GOOD, GOOD, BAD]);
        assert_eq!((s.k, s.phase), (5, Phase::Search { low: 3, high: 7 }));
    }

    #[test]
    fn a_capacity_of_one_is_held_ten_batches_however_its_one_job_batches_read() {
        // 1 fine, 2 degraded → search 1..2 → capacity 1, held.
        let mut s = CapacitySearch::new(1, 1.25, 10, 1000);
        sizes(&mut s, &[GOOD, BAD]);
        assert_eq!((s.k, s.capacity, s.phase), (1, Some(1), Phase::Hold { left: 10 }));
        // One job cannot contend with itself: batches of one that read as
        // degraded (the jobs' spread) leave the count of ten as it is, and
        // growth resumes after the tenth.
        let ks = sizes(&mut s, &[BAD, GOOD, BAD, BAD, GOOD, BAD, GOOD, BAD, BAD, GOOD]);
        assert_eq!(ks, vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2]);
        assert_eq!(s.phase, Phase::Grow);
    }

    #[test]
    fn each_kind_of_job_is_compared_with_its_own_t1() {
        let (short, long) = (JobTypeId(0), JobTypeId(1));
        let mut s = CapacitySearch::new(1, 1.25, 10, 1000);
        // A short job, then a long one: a kind seen first only sets its T1.
        assert!(!s.observe_kinds(&[(short, 100.0, 1)], 2.0));
        assert!(!s.observe_kinds(&[(long, 300.0, 2)], 2.0));
        assert_eq!(s.k, 4, "two batches that were not degraded");
        // Both kinds at their own T1: not degraded, however far apart they are.
        assert!(!s.observe_kinds(&[(short, 100.0, 1), (long, 300.0, 3)], 2.0));
        // Mean T1 of the batch's jobs (100 + 3·300)/4 = 250; 330 > 1.25 × 250.
        assert!(s.observe_kinds(&[(short, 120.0, 1), (long, 400.0, 3)], 2.0));
        // One T1 for both would have read the long job as degraded.
        let mut blind = CapacitySearch::new(1, 1.25, 10, 1000);
        blind.observe(100.0, 2.0);
        assert!(blind.observe(300.0, 2.0));
    }

    #[test]
    fn k_never_exceeds_its_cap() {
        let mut s = CapacitySearch::new(1, 1.25, 10, 5);
        assert_eq!(sizes(&mut s, &[GOOD; 4]), vec![1, 2, 4, 5, 5]);
    }

    #[test]
    fn algorithm_3_weights() {
        // Average 250: lowest ×4, highest ÷2, below average ×2, above average unchanged.
        let f = propagation_factors(&[Some(100.0), Some(200.0), Some(300.0), Some(400.0)], 2.0);
        assert_eq!(f, vec![8.0, 4.0, 2.0, 1.0]);
        // The highest never goes below 1; a site left out keeps C1.
        let f = propagation_factors(&[Some(10.0), None, Some(50.0)], 1.5);
        assert_eq!(f, vec![6.0, 1.5, 1.0]);
        // One site has nothing to be compared with.
        assert_eq!(propagation_factors(&[Some(10.0)], 2.0), vec![2.0]);
    }

    fn spec(n: u64, sites: usize) -> RunSpec {
        RunSpec {
            n_jobs: n,
            types: JobTypes::single(n),
            sites: (0..sites).map(|i| SiteInfo::named(format!("s{i}"))).collect(),
            max_attempts: 3,
            ..RunSpec::default()
        }
    }

    fn submitted(actions: &[Action]) -> Vec<(SiteId, Vec<JobId>)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Submit { site, jobs, .. } => Some((*site, jobs.clone())),
                _ => None,
            })
            .collect()
    }

    fn site(i: u32, event: SiteEvent) -> Input {
        Input::Site { site: SiteId(i), event }
    }

    fn run_job(p: &mut Thesis, s: u32, job: JobId, at: Time, turnaround: f64) -> Vec<Action> {
        p.handle(at, &site(s, SiteEvent::Started { job, at }));
        let end = at + turnaround;
        p.handle(end, &site(s, SiteEvent::Ended { job, at: end, outcome: Outcome::Success }))
    }

    #[test]
    fn barrier_waits_for_every_site_then_reweights() {
        let mut p = Thesis::new(&spec(100, 2), &Params::default());
        let out = submitted(&p.handle(0.0, &Input::Start));
        assert_eq!(out, vec![(SiteId(0), vec![JobId(0)]), (SiteId(1), vec![JobId(1)])]);
        p.handle(0.0, &site(0, SiteEvent::Submitted { jobs: vec![JobId(0)], at: 0.0 }));
        p.handle(0.0, &site(1, SiteEvent::Submitted { jobs: vec![JobId(1)], at: 0.0 }));
        // Site 0 is back; the barrier still waits for site 1.
        assert!(run_job(&mut p, 0, JobId(0), 0.0, 100.0).is_empty());
        let next = submitted(&run_job(&mut p, 1, JobId(1), 0.0, 300.0));
        // Two sites: the fast one is lowest (C1·4 = 8), the slow one highest (max(1, 1) = 1).
        assert_eq!(
            next.iter().map(|(s, j)| (*s, j.len())).collect::<Vec<_>>(),
            vec![(SiteId(0), 8), (SiteId(1), 1)]
        );
        assert_eq!(p.site_view(SiteId(0)).class, SiteClass::Fast);
        assert_eq!(p.site_view(SiteId(1)).class, SiteClass::Slow);
        assert_eq!(p.site_view(SiteId(1)).agtime, Some(300.0));
    }

    #[test]
    fn barrier_leaves_out_a_site_that_starts_nothing_and_never_deadlocks() {
        let params = Params { timeout: 600.0, ..Params::default() };
        let mut p = Thesis::new(&spec(20, 2), &params);
        p.handle(0.0, &Input::Start);
        p.handle(0.0, &site(0, SiteEvent::Submitted { jobs: vec![JobId(0)], at: 0.0 }));
        p.handle(0.0, &site(1, SiteEvent::Submitted { jobs: vec![JobId(1)], at: 0.0 }));
        run_job(&mut p, 0, JobId(0), 1.0, 100.0);
        assert_eq!(p.next_deadline(), Some(600.0), "the dead site's timeout is pending");
        let acts = p.handle(600.0, &Input::Tick);
        assert!(
            acts.contains(&Action::Remove {
                site: SiteId(1),
                jobs: vec![JobId(1)],
                why: "thesis: nothing started within 600 s; site left out".into()
            }),
            "{acts:?}"
        );
        // The barrier completed without site 1: site 0 alone goes on (×2).
        let next = submitted(&acts);
        assert_eq!(next, vec![(SiteId(0), vec![JobId(2), JobId(3)])]);
        assert_eq!(p.site_view(SiteId(1)).class, SiteClass::Unresponsive);
        // The removed job comes back and is sent to site 0 in a later round, never to site 1.
        p.handle(601.0, &site(1, SiteEvent::Removed { job: JobId(1), at: 601.0 }));
        for j in [2, 3] {
            p.handle(601.0, &site(0, SiteEvent::Submitted { jobs: vec![JobId(j)], at: 601.0 }));
        }
        run_job(&mut p, 0, JobId(2), 602.0, 100.0);
        let next = submitted(&run_job(&mut p, 0, JobId(3), 602.0, 100.0));
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].0, SiteId(0));
        assert_eq!(next[0].1[0], JobId(1));
        assert_eq!(next[0].1.len(), 4);
    }

    #[test]
    fn a_slow_site_keeps_its_running_jobs_at_the_timeout() {
        let params = Params { timeout: 600.0, initial_k: 2, ..Params::default() };
        let mut p = Thesis::new(&spec(20, 1), &params);
        p.handle(0.0, &Input::Start);
        p.handle(0.0, &site(0, SiteEvent::Submitted { jobs: vec![JobId(0), JobId(1)], at: 0.0 }));
        p.handle(10.0, &site(0, SiteEvent::Started { job: JobId(0), at: 10.0 }));
        let acts = p.handle(600.0, &Input::Tick);
        assert!(matches!(&acts[..], [Action::Remove { jobs, .. }] if jobs == &vec![JobId(1)]), "{acts:?}");
        assert_eq!(p.next_deadline(), None);
        // The running job is waited for; then the next round includes the removed job.
        p.handle(601.0, &site(0, SiteEvent::Removed { job: JobId(1), at: 601.0 }));
        let end = SiteEvent::Ended { job: JobId(0), at: 700.0, outcome: Outcome::Success };
        let next = submitted(&p.handle(700.0, &site(0, end)));
        assert_eq!(next, vec![(SiteId(0), vec![JobId(1), JobId(2), JobId(3), JobId(4)])]);
    }

    #[test]
    fn never_submits_more_than_n() {
        let mut p = Thesis::new(&spec(3, 2), &Params { initial_k: 4, ..Params::default() });
        let out = submitted(&p.handle(0.0, &Input::Start));
        assert_eq!(out, vec![(SiteId(0), vec![JobId(0), JobId(1), JobId(2)])]);
        assert_eq!(p.book().out_total(), 3);
    }

    #[test]
    fn params_reject_unknown_keys_and_default_missing_ones() {
        let p: Params = toml::from_str("c1 = 3.0").unwrap();
        assert_eq!(p, Params { c1: 3.0, ..Params::default() });
        assert!(toml::from_str::<Params>("c3 = 1.0").is_err());
    }
}
