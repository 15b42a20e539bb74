//! `oracle`: the best policy we can build knowing the true site model
//! ([`Truth`]), the denominator of every ratio the bench prints. It runs only
//! in simulation. It still observes only HTCondor's events (and its own
//! timers) and acts only by submit and remove; the truth only tells it how
//! many jobs to keep where:
//!
//! - **Knee**: keep each site at `min(slots, floor(C))` running. With
//!   `beta = 0` running past the knee costs nothing, so such a site is filled
//!   to its slots. When C drops (a capacity window starts) the youngest
//!   running jobs are removed down to the new knee: they have done the least
//!   work, and running past the knee would slow every job there.
//! - **Little's law**: a new job first spends `Exp(wait_mean)` in the other
//!   users' queue, so keeping k running at throughput μ needs about μ·wait
//!   jobs waiting ahead, plus the running deficit k − n. Waits are
//!   memoryless, so an idle job that has waited long is no closer to
//!   starting: idle jobs beyond that target are removed for free (on a site
//!   whose knee is below its slot count no idle job is waiting for a slot).
//! - **Tail rule**: the pool is water-filled over the sites by expected finish
//!   time (the m-th job out at a site finishes near
//!   `now + wait + max(run, m/μ)`); a site gets a job only if that job would
//!   finish there no later than the pool as a whole. Once the pool is empty,
//!   idle jobs at sites with a long wait + run are moved to sites with room
//!   and a shorter one, so that no job becomes a straggler by sitting in a
//!   slow queue.

use super::book::Change;
use super::{Action, Input, JobBook, JobId, Policy, RunSpec, SiteEvent, SiteId, SiteView, Time, Truth};
use crate::sim::SiteParams;
use std::collections::{BTreeMap, BTreeSet};

pub struct Oracle {
    book: JobBook,
    sites: Vec<SiteParams>,
    base_runtime: f64,
    /// Jobs idle at each site (submitted, not started), as events told.
    idle: Vec<BTreeSet<JobId>>,
    /// Start times of the jobs running at each site.
    running: Vec<BTreeMap<JobId, Time>>,
    /// Idle target per site at the last decision, for `site_view`.
    targets: Vec<u32>,
    /// The next instant the oracle wants to look again.
    wake: Option<Time>,
}

/// What the oracle plans with for one site at one instant.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// Jobs to keep running.
    knee: u32,
    /// The knee is the slot count: surplus eligible jobs wait for a slot
    /// instead of running past the knee.
    slot_bound: bool,
    /// Throughput at the knee, jobs per second.
    mu: f64,
    /// Uncontended run time of a job, seconds.
    run: f64,
    wait: f64,
    /// Jobs to keep idle (waiting in the queue) given the current running count.
    idle_target: u32,
}

impl Plan {
    /// Expected wait + run of a job submitted now to an uncrowded site.
    fn latency(&self) -> f64 {
        self.wait + self.run
    }
}

/// How often the oracle looks at idle jobs in the tail, as a fraction of the
/// shortest run time.
const TAIL_TICK_FRACTION: f64 = 0.05;

impl Oracle {
    pub fn new(spec: &RunSpec, truth: &Truth) -> Self {
        let n = spec.sites.len();
        Oracle {
            book: JobBook::new(spec.n_jobs, n, spec.max_attempts),
            sites: truth.sites.clone(),
            base_runtime: truth.base_runtime,
            idle: vec![BTreeSet::new(); n],
            running: vec![BTreeMap::new(); n],
            targets: vec![0; n],
            wake: None,
        }
    }

    fn plan(&self, site: usize, now: Time) -> Option<Plan> {
        let p = &self.sites[site];
        if p.dead || p.slots == 0 {
            return None;
        }
        let run = self.base_runtime / p.speed;
        let c = p.capacity_at(now);
        let knee = if c.is_finite() { (c.floor().max(0.0) as u32).min(p.slots) } else { p.slots };
        let (knee, useful) =
            if p.beta == 0.0 { (p.slots, c.min(f64::from(p.slots))) } else { (knee, f64::from(knee)) };
        if knee == 0 || useful <= 0.0 {
            return None;
        }
        let slot_bound = knee == p.slots;
        let mu = useful * p.speed / self.base_runtime;
        let n = self.running[site].len() as f64;
        let ahead = mu * p.wait_mean;
        // A slot-bound site may hold extra: surplus eligible jobs queue for a
        // slot instead of thrashing, and keep the slots busy despite the
        // randomness of the waits.
        let margin = if slot_bound { 2.0 * ahead.sqrt() + 2.0 } else { 0.0 };
        let idle_target = (ahead + margin + (f64::from(knee) - n)).round().max(0.0) as u32;
        Some(Plan { knee, slot_bound, mu, run, wait: p.wait_mean, idle_target })
    }

    /// Keeps the book of idle and running jobs per site.
    fn track(&mut self, site: SiteId, event: &SiteEvent, change: &Change) {
        let s = site.index();
        match (event, change) {
            (_, Change::Submitted { jobs }) => self.idle[s].extend(jobs.iter().copied()),
            (SiteEvent::Started { job, at }, Change::Started { .. }) => {
                self.idle[s].remove(job);
                self.running[s].insert(*job, *at);
            }
            (_, Change::None | Change::Returned { .. }) => {}
            (_, Change::Succeeded { job, .. } | Change::Failed { job, .. } | Change::Removed { job }) => {
                self.idle[s].remove(job);
                self.running[s].remove(job);
            }
            (_, Change::Started { job, .. }) => {
                self.idle[s].remove(job);
            }
        }
    }

    fn remove(&mut self, site: usize, jobs: Vec<JobId>, why: String, actions: &mut Vec<Action>) {
        let sid = SiteId(site as u32);
        let jobs = self.book.mark_removing(sid, &jobs);
        for job in &jobs {
            self.idle[site].remove(job);
            self.running[site].remove(job);
        }
        if !jobs.is_empty() {
            actions.push(Action::Remove { site: sid, jobs, why });
        }
    }

    /// Removes what is past the knee or past the idle target at every site.
    fn trim(&mut self, plans: &[Option<Plan>], actions: &mut Vec<Action>) {
        for (i, plan) in plans.iter().enumerate() {
            let Some(p) = plan else {
                continue;
            };
            // Past the knee (C dropped): the youngest running jobs go.
            let n = self.running[i].len() as u32;
            let tolerance = (p.knee / 10).max(2);
            if !p.slot_bound && n > p.knee + tolerance {
                let mut by_age: Vec<(Time, JobId)> = self.running[i].iter().map(|(&j, &t)| (t, j)).collect();
                by_age.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                let youngest: Vec<JobId> = by_age.iter().take((n - p.knee) as usize).map(|x| x.1).collect();
                let why = format!("{n} running past the knee {}: remove the youngest", p.knee);
                self.remove(i, youngest, why, actions);
            }
            // Surplus idle jobs: free to take back (waits are memoryless and
            // none of them waits for a slot here).
            let idle = self.idle[i].len() as u32;
            let slack = (p.idle_target / 4).max(2);
            if !p.slot_bound && idle > p.idle_target + slack {
                let extra: Vec<JobId> =
                    self.idle[i].iter().rev().take((idle - p.idle_target) as usize).copied().collect();
                let why = format!("{idle} idle > target {}: take the surplus back", p.idle_target);
                self.remove(i, extra, why, actions);
            }
        }
    }

    /// Splits the pool over the sites (see the module docs) and submits.
    fn dispatch(&mut self, now: Time, plans: &[Option<Plan>], actions: &mut Vec<Action>) {
        let pool = self.book.pool_len();
        if pool == 0 {
            return;
        }
        let count = |i: usize| self.book.counts(SiteId(i as u32));
        let out: Vec<u64> = (0..plans.len()).map(|i| u64::from(count(i).out())).collect();
        let room: Vec<u64> = plans
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let c = count(i);
                p.map_or(0, |p| u64::from(p.idle_target.saturating_sub(c.idle + c.submitting)))
            })
            .collect();
        if room.iter().all(|&r| r == 0) {
            return;
        }
        // Jobs site i can finish by T beyond those it has.
        let finishable = |i: usize, t: f64| -> u64 {
            let Some(p) = plans[i] else { return 0 };
            let span = t - now - p.wait;
            if span < p.run {
                return 0;
            }
            ((p.mu * span).floor() as u64).saturating_sub(out[i])
        };
        let total = |t: f64| (0..plans.len()).map(|i| finishable(i, t)).sum::<u64>();
        let mut hi = now + 1.0;
        while total(hi) < pool && hi - now < 1e12 {
            hi = now + (hi - now) * 2.0;
        }
        let mut lo = now;
        for _ in 0..50 {
            let mid = 0.5 * (lo + hi);
            if total(mid) >= pool {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        for (i, &r) in room.iter().enumerate() {
            let share = finishable(i, hi).min(r);
            if share == 0 {
                continue;
            }
            let site = SiteId(i as u32);
            let jobs = self.book.take(site, share);
            if jobs.is_empty() {
                break;
            }
            let p = plans[i].expect("a site with room has a plan");
            let why =
                format!("knee {}, keep {} waiting ahead; pool done by ~{:.0}s", p.knee, p.idle_target, hi);
            actions.push(Action::Submit { site, jobs, why });
        }
    }

    /// With the pool empty, moves idle jobs from sites where they would
    /// finish late to sites with room where they would finish sooner.
    fn tail(&mut self, now: Time, plans: &[Option<Plan>], actions: &mut Vec<Action>) {
        if self.book.pool_len() > 0 {
            return;
        }
        let mut room: Vec<u64> = plans
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let c = self.book.counts(SiteId(i as u32));
                // Room below the knee itself: a moved job should start at once.
                p.map_or(0, |p| u64::from(p.knee.saturating_sub(c.running + c.idle + c.submitting)))
            })
            .collect();
        let mut order: Vec<usize> = (0..plans.len()).filter(|&i| plans[i].is_some()).collect();
        order.sort_by(|&a, &b| {
            plans[b].unwrap().latency().total_cmp(&plans[a].unwrap().latency()).then(a.cmp(&b))
        });
        // Worst sites first, each giving jobs to the best sites with room.
        for &from in &order {
            let lf = plans[from].unwrap().latency();
            let mut moving = 0u64;
            for &to in order.iter().rev() {
                let lt = plans[to].unwrap().latency();
                if lt + 0.1 * lf >= lf {
                    break;
                }
                let k = room[to].min(self.idle[from].len() as u64 - moving);
                room[to] -= k;
                moving += k;
            }
            if moving > 0 {
                let jobs: Vec<JobId> = self.idle[from].iter().take(moving as usize).copied().collect();
                let why = format!("tail: idle here would finish ~{lf:.0}s from now; a faster site has room");
                self.remove(from, jobs, why, actions);
            }
        }
        let any_idle = self.idle.iter().any(|s| !s.is_empty());
        let shortest_run = plans.iter().flatten().map(|p| p.run).fold(f64::INFINITY, f64::min);
        self.wake = (any_idle && shortest_run.is_finite()).then_some(now + TAIL_TICK_FRACTION * shortest_run);
    }

    /// The next capacity boundary after `now` at any site.
    fn next_boundary(&self, now: Time) -> Option<Time> {
        self.sites
            .iter()
            .flat_map(|p| p.cap_windows.iter().flat_map(|w| [w[0], w[1]]))
            .filter(|&b| b > now)
            .min_by(f64::total_cmp)
    }
}

impl Policy for Oracle {
    fn name(&self) -> &'static str {
        "oracle"
    }

    fn handle(&mut self, now: Time, input: &Input) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Input::Site { site, event } = input {
            let change = self.book.apply(*site, event);
            self.track(*site, event, &change);
            actions.extend(self.book.after_failure(*site, &change));
        }
        self.wake = None;
        let plans: Vec<Option<Plan>> = (0..self.sites.len()).map(|i| self.plan(i, now)).collect();
        for (i, plan) in plans.iter().enumerate() {
            self.targets[i] = plan.map_or(0, |p| p.idle_target);
        }
        self.trim(&plans, &mut actions);
        self.dispatch(now, &plans, &mut actions);
        self.tail(now, &plans, &mut actions);
        if let Some(b) = self.next_boundary(now) {
            self.wake = Some(self.wake.map_or(b, |w| w.min(b)));
        }
        actions
    }

    fn next_deadline(&self) -> Option<Time> {
        self.wake
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        let p = &self.sites[site.index()];
        SiteView {
            window: self.targets[site.index()],
            capacity: (!p.dead).then(|| f64::from(p.knee_at(f64::NEG_INFINITY))),
            ..SiteView::default()
        }
    }
}
