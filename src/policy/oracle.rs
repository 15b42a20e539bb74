//! `oracle`: the best policy we know how to build with the true site model
//! ([`Truth`]) in hand — the denominator of every ratio the bench prints. It
//! runs only in simulation, observes only HTCondor's events and acts only by
//! submit, withdraw and remove; the truth tells it exactly what `adaptive`
//! has to estimate. Both hand their per-site models to the same [`Planner`],
//! so a gap between them is the price of not knowing, nothing else.
//!
//! - **The knee.** Each site's window is its throughput-optimal concurrency
//!   `min(slots, ⌊C(t)⌋)` (where the resource only shares, `beta = 0`,
//!   running past C gains nothing and makes every job slower). The model's
//!   run time at the window, its queue wait and failure rate complete the
//!   planner's model; a dead site is closed.
//! - **The queue ahead.** Little's law keeps `a W` jobs waiting ahead of a
//!   window of `w` (the planner's module doc). Those start at `idle / W` per
//!   second whatever runs, while jobs end at `X(n) / work` per second; past
//!   a knee that thrashes, `X` falls by `β` job-equivalents per job (at the
//!   site's speed), so completions fall by `β / R` per job past the window,
//!   `R` the healthy run there. If each job past the window took only one
//!   job off the queue, starts would fall by `1 / W`: with `W > R / β` a
//!   few extra starts slow completions more than they slow starts, the
//!   running count climbs, and the site settles where the whole queue runs
//!   collapsed (a knee of 11, `β` 2, waits of 120 s for runs of 60 s: 33
//!   running at a fifth of the knee's throughput). So each job past the
//!   window takes `g = 1 + β W / R` jobs off the queue: starts then fall by
//!   `1/W` more than completions do, the margin Little's law has where the
//!   resource only shares (`β = 0`, `g = 1`).
//!   Where one live site takes every job left, every job may wait there
//!   instead: HTCondor then keeps every slot busy, and each wave's waits
//!   pass while the wave before it runs. Little's law's queue assumes
//!   jobs end one by one; where a wave ends together, the queue restarts
//!   `a W` of its `w` jobs and the rest wait all of `W` after it, so a wave
//!   costs `R(w) + W (1 − W/R(w))⁺`. Every job waits where that is
//!   slower than every slot busy, run past the knee if the slots exceed
//!   it: per job, `R(s)/s < (R(k) + W (1 − W/R(k))⁺)/k`; within
//!   `LAST_WAVES` waves of the end, by the remaining attempts' whole
//!   waves, `⌊N/s⌋ R(s) + R(N mod s)` against `⌈N/w⌉ R(w) + (⌈N/w⌉ − 1) W
//!   (1 − W/R(w))⁺` (the last waves of a knee of 36 on 43 slots, 50 jobs:
//!   36 and 14 at full speed end sooner than 43 slowed and 7). A knee no
//!   lower than the slots always waits every job: running past it is
//!   impossible (two waves of 25 on 25 slots, waits of 500 s: Little's
//!   law's six ahead left the second wave's waits after the first wave,
//!   and the oracle lost to bulk submission by a quarter). Held-out G1041
//!   (a knee of 158 on 163 slots, β 0.5, waits of 367 s, runs of 2,580 s,
//!   four waves) took 1.10 times bulk submission's makespan at the knee.
//!   Every job waits there, too, where that site's resource only shares
//!   (`beta = 0`) and every job left fits in its slots: running past the knee then
//!   costs no throughput, and with every job there all runs at once, none
//!   waiting for a wave before it (held-out G1062, a knee of 19 on 480
//!   slots, 166 jobs, waits of 1,194 s: 1.29 times bulk submission's
//!   makespan before). Where the slots do not hold them all, the first
//!   wave would run slowed and delay the second (train G0185).
//! - **Capacity changes.** At every window boundary the models are
//!   recomputed. When C drops below the running jobs, those past the new knee
//!   either drain (stop sending) or the youngest are removed — whichever
//!   loses less: draining costs the throughput lost while the site runs past
//!   its knee, `X(K) Σ_{m=K+1..n} 1/X(m) − (n − K)` jobs' worth; removing
//!   costs the work the youngest have done, `Σ age / R`.
//! - **The last waves.** The knee is throughput-optimal, not makespan-
//!   optimal: 50 jobs on a knee of 47 run as 47 and then 3, two run times,
//!   where all 50 at once, each 1.13 times slower (beta 1), take 1.13. So
//!   once a site's remaining jobs `N` fit in `LAST_WAVES` waves at the knee,
//!   its window is the `⌈N / k⌉` (at most its slots) whose `k` waves, each
//!   as long as a run at that level, end them soonest.
//!   `N` is known only where one live site takes the whole remainder; where
//!   several share it, the planner's split decides `N` and the window keeps
//!   the knee.
//! - **Tail.** Once the pool is empty the planner's moves run every
//!   `TAIL_TICK` of the shortest run time.
//!
//! **`late-oracle`** ([`Oracle::late`]) is the same policy told each site's
//! truth only once a job has ended there: until then the site runs at most
//! `adaptive`'s first window (a site's own `initial_window`, else 16), or
//! its knee where that is lower, and nothing is queued ahead of it. It is
//! the yardstick of what a policy that learns could reach: no learner knows
//! anything of a site's knee before its first jobs end (their run times are
//! the only measure of healthy), and this one then knows everything at
//! once, with no probe, no test and no overshoot. It is generous on
//! purpose: it knows which sites are dead, and a knee below the first
//! window costs it nothing. What `adaptive` loses to `oracle` beyond what
//! `late-oracle` loses is the price of searching for the knees; what
//! `late-oracle` loses is the price of having to run jobs before knowing
//! anything (docs/adaptive.md, "What a learner could reach").

use super::book::Change;
use super::plan::{Planner, SiteModel, EVERY_JOB_WAITS};
use super::{Action, Input, JobBook, JobId, Policy, RunSpec, SiteId, SiteTruth, SiteView, Time, Truth};

pub struct Oracle {
    book: JobBook,
    sites: Vec<SiteTruth>,
    base_runtime: f64,
    planner: Planner,
    /// Next capacity boundary of any site, when the models change.
    next_boundary: Option<Time>,
    /// Next look at the tail (pool empty, jobs idle somewhere).
    next_tail: Option<Time>,
    /// The one live site, when there is one: it takes every job left, so
    /// its last waves can be planned as a whole.
    only_live: Option<usize>,
    /// `late-oracle`: per site, the first window it is held to until a job
    /// has ended there (`None` once told, and always for `oracle`).
    untold: Vec<Option<u32>>,
    late: bool,
}

/// How often the oracle looks at idle jobs in the tail, as a fraction of the
/// shortest run time.
const TAIL_TICK: f64 = 0.05;

/// How many waves at the knee a site's last jobs are planned as a whole in.
const LAST_WAVES: u64 = 4;

impl Oracle {
    pub fn new(spec: &RunSpec, truth: &Truth) -> Self {
        let n = spec.sites.len();
        let book = JobBook::new(spec.n_jobs, n, spec.max_attempts);
        let mut oracle = Oracle {
            planner: Planner::new(n),
            book,
            sites: truth.sites.clone(),
            base_runtime: truth.base_runtime,
            next_boundary: None,
            next_tail: None,
            only_live: None,
            untold: vec![None; n],
            late: false,
        };
        let mut live = truth.sites.iter().enumerate().filter(|(_, p)| !p.dead).map(|(i, _)| i);
        oracle.only_live = live.next().filter(|_| live.next().is_none());
        oracle.remodel(0.0);
        oracle
    }

    /// `late-oracle`: the oracle told a site's truth only once a job has
    /// ended there; until then it runs `first_window` jobs there (a site's
    /// own `initial_window` first), or its knee where that is lower.
    pub fn late(spec: &RunSpec, truth: &Truth, first_window: u32) -> Self {
        let mut oracle = Oracle::new(spec, truth);
        oracle.untold =
            spec.sites.iter().map(|info| Some(info.initial_window.unwrap_or(first_window).max(1))).collect();
        oracle.late = true;
        oracle.remodel(0.0);
        oracle
    }

    /// The window and run time the truth gives site `i` at `now`.
    fn model(&self, i: usize, now: Time) -> SiteModel {
        let p = &self.sites[i];
        let c = p.capacity_at(now);
        let knee = p.knee_at(now);
        if p.dead || knee == 0 {
            return SiteModel::CLOSED;
        }
        let untold = self.untold.get(i).copied().flatten();
        let window = match untold {
            // Jobs queued ahead would start past the first window as their
            // waits end: nothing waits ahead of a site not known yet.
            Some(first) => knee.min(first),
            None if self.only_live == Some(i) => self.last_waves(i, knee, c),
            None => knee,
        };
        // The one live site takes every job left: every one of them waits
        // there where that ends them sooner (module docs, "The queue ahead").
        let ahead = if untold.is_some() {
            0.0
        } else if self.only_live == Some(i)
            && (self.waiting_all_ends_sooner(i, knee, window, c)
                || p.beta == 0.0 && self.left(i) <= u64::from(p.slots))
        {
            EVERY_JOB_WAITS
        } else {
            p.wait_mean
        };
        SiteModel {
            open: true,
            window: f64::from(window),
            run: self.base_runtime / p.rate(window, c),
            wait: p.wait_mean,
            ahead,
            success: 1.0 - p.p_fail,
            draining: false,
            queue_gain: 1.0 + p.beta * p.wait_mean * p.speed / self.base_runtime,
            // The simulated grid's sites set no limits of a user's.
            max_out: None,
            max_idle: None,
        }
    }

    /// Whether the one live site `i` ends its jobs sooner with every one of
    /// them waiting there, every slot kept busy, than at `window` with
    /// Little's law's queue ahead (module docs, "The queue ahead").
    fn waiting_all_ends_sooner(&self, i: usize, knee: u32, window: u32, c: f64) -> bool {
        let p = &self.sites[i];
        if knee >= p.slots {
            return true;
        }
        let run = |n: u32| self.base_runtime / p.rate(n, c);
        // What a wave at `w` waits beyond its run: all of the wait but for
        // the share of the wave the queue ahead restarts, `a W` of `w`.
        let wave_wait = |w: u32| p.wait_mean * (1.0 - p.wait_mean / run(w)).max(0.0);
        let left = self.left(i);
        if left > LAST_WAVES * u64::from(knee) {
            return run(p.slots) / f64::from(p.slots) < (run(knee) + wave_wait(knee)) / f64::from(knee);
        }
        // The last waves, whole: failed attempts are run again.
        let attempts = (left as f64 / (1.0 - p.p_fail).max(0.05)).round().max(1.0) as u64;
        let slots = u64::from(p.slots);
        let (full, rest) = (attempts / slots, attempts % slots);
        let every_slot = full as f64 * run(p.slots) + if rest > 0 { run(rest as u32) } else { 0.0 };
        let waves = attempts.div_ceil(u64::from(window)) as f64;
        every_slot < waves * run(window) + (waves - 1.0) * wave_wait(window)
    }

    /// Jobs not done yet that site `i` may still run: its own out and the pool.
    fn left(&self, i: usize) -> u64 {
        u64::from(self.book.counts(SiteId(i as u32)).out()) + self.book.pool_len()
    }

    /// The window that ends the site's last few waves soonest, with all
    /// jobs not done yet to run there (module docs).
    fn last_waves(&self, i: usize, knee: u32, c: f64) -> u32 {
        let p = &self.sites[i];
        let left = self.left(i);
        if left <= u64::from(knee) || left > LAST_WAVES * u64::from(knee) {
            return knee;
        }
        let time = |w: u32| (left as f64 / f64::from(w)).ceil() / p.rate(w, c);
        (1..=LAST_WAVES)
            .map(|k| left.div_ceil(k) as u32)
            .filter(|&w| w >= knee && w <= p.slots)
            .fold(knee, |best, w| if time(w) < time(best) - 1e-9 { w } else { best })
    }

    fn remodel(&mut self, now: Time) {
        for i in 0..self.sites.len() {
            let m = self.model(i, now);
            self.planner.set_model(SiteId(i as u32), m, &self.book);
        }
        self.next_boundary = self.sites.iter().flat_map(|p| p.boundaries_after(now)).min_by(f64::total_cmp);
    }

    /// After a capacity drop: removes the youngest jobs past the knee where
    /// that loses less work than letting them drain (module docs).
    fn shed(&mut self, now: Time, actions: &mut Vec<Action>) {
        for i in 0..self.sites.len() {
            let p = &self.sites[i];
            let site = SiteId(i as u32);
            let n = self.book.counts(site).running;
            let c = p.capacity_at(now);
            // The level it should run at: the knee, or its last waves' window.
            let knee = self.planner.model(site).window as u32;
            if p.beta == 0.0 || n <= knee || knee == 0 {
                continue;
            }
            let x = |m: u32| p.throughput(m, c, self.base_runtime);
            let drain: f64 = (knee + 1..=n).map(|m| 1.0 / x(m)).sum::<f64>() * x(knee);
            let drain_loss = drain - f64::from(n - knee);
            let run = self.base_runtime / p.speed;
            let youngest: Vec<(Time, JobId)> =
                self.book.running_at(site).rev().take((n - knee) as usize).collect();
            let kill_loss: f64 = youngest.iter().map(|(started, _)| (now - started) / run).sum();
            if kill_loss < drain_loss {
                let jobs: Vec<JobId> = youngest.iter().map(|&(_, j)| j).collect();
                let jobs = self.book.mark_removing(site, &jobs);
                let why = format!(
                    "C fell to {c:.0}: {n} running past the knee {knee} would lose {drain_loss:.1} jobs' \
                     worth draining, {kill_loss:.1} removing the youngest"
                );
                actions.push(Action::Remove { site, jobs, why });
                self.planner.refresh(site, &self.book);
            }
        }
    }

    fn withdraw(&mut self, site: SiteId, jobs: &[JobId], why: String, actions: &mut Vec<Action>) {
        let jobs = self.book.mark_withdrawing(site, jobs);
        if !jobs.is_empty() {
            actions.push(Action::Withdraw { site, jobs, why });
            self.planner.refresh(site, &self.book);
        }
    }

    fn trim_surplus(&mut self, site: SiteId, actions: &mut Vec<Action>) {
        let k = self.planner.surplus(site, &self.book);
        if k > 0 {
            let jobs: Vec<JobId> = self.book.idle_at(site).iter().rev().take(k as usize).copied().collect();
            self.withdraw(site, &jobs, "idle beyond the knee and the wait ahead".into(), actions);
        }
    }

    fn shortest_run(&self) -> f64 {
        (0..self.sites.len())
            .map(|i| self.planner.model(SiteId(i as u32)))
            .filter(|m| m.open)
            .map(|m| m.run)
            .fold(f64::INFINITY, f64::min)
    }
}

impl Policy for Oracle {
    fn name(&self) -> &'static str {
        if self.late {
            "late-oracle"
        } else {
            "oracle"
        }
    }

    fn handle(&mut self, now: Time, input: &Input) -> Vec<Action> {
        let mut actions = Vec::new();
        match input {
            Input::Site { site, event } => {
                let change = self.book.apply(*site, event);
                actions.extend(self.book.after_failure(*site, &change));
                let ended = matches!(change, Change::Succeeded { .. } | Change::Failed { .. });
                if ended && self.untold.get(site.index()).is_some_and(Option::is_some) {
                    self.untold[site.index()] = None;
                    let model = self.model(site.index(), now);
                    self.planner.set_model(*site, model, &self.book);
                }
                if let Some(i) = self.only_live {
                    let model = self.model(i, now);
                    self.planner.set_model(SiteId(i as u32), model, &self.book);
                }
                self.planner.refresh(*site, &self.book);
                self.trim_surplus(*site, &mut actions);
            }
            Input::Start => {}
            Input::Tick => {
                if self.next_boundary.is_some_and(|b| b <= now) {
                    self.remodel(now);
                    self.shed(now, &mut actions);
                    for i in 0..self.sites.len() {
                        self.trim_surplus(SiteId(i as u32), &mut actions);
                    }
                }
                if self.next_tail.is_some_and(|t| t <= now) {
                    self.next_tail = None;
                    for (site, jobs) in self.planner.tail_moves(&self.book) {
                        let why = "tail: a site with room would finish these sooner".to_string();
                        self.withdraw(site, &jobs, why, &mut actions);
                    }
                }
            }
        }
        if self.book.any_barred() {
            let live: Vec<bool> =
                (0..self.sites.len()).map(|i| self.planner.model(SiteId(i as u32)).open).collect();
            actions.extend(self.book.give_up_stranded(&live));
        }
        actions.extend(
            self.planner.dispatch(now, &mut self.book, |_, m| {
                format!("window {:.0}, {}", m.window, m.waiting_ahead())
            }),
        );
        if self.book.pool_len() == 0 && self.book.out_total() > 0 && self.next_tail.is_none() {
            let tick = TAIL_TICK * self.shortest_run();
            self.next_tail = tick.is_finite().then_some(now + tick.max(1.0));
        }
        actions
    }

    fn next_deadline(&self) -> Option<Time> {
        match (self.next_boundary, self.next_tail) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        let p = &self.sites[site.index()];
        SiteView {
            window: self.planner.model(site).window as u32,
            capacity: (!p.dead).then(|| f64::from(p.knee_at(f64::NEG_INFINITY))),
            ..SiteView::default()
        }
    }
}
