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
//! **Several kinds** (`RunSpec::types`; the model's `types`). A site's knee
//! is then a mix, not a count: the truth gives each kind's load `ℓ_t`,
//! work and speed at every site, and each site's capacity C counted in
//! load. The oracle keeps one planner per kind (each kind's jobs in a book
//! of their own, the run's book beside them) and gives kind `t` the window
//! `x_t` at each site that the `mix` finds: the jobs of every kind left
//! end soonest, counted in whole runs after each site's wait, with
//! `Σ ℓ_t x_t ≤ C` and `Σ x_t ≤ slots` at every site (past C no mix
//! finishes more of any kind). Each kind's planner then
//! does what the planner does for one: Little's law's queue ahead (its
//! gain `g = 1 + β ℓ_t W / R_t`, a job past the window loading the
//! resource by its own share), the water-filling by finish time, the
//! tail's moves. The mix is solved again whenever a kind's jobs left
//! fell by `RESOLVE` of what they were (so that a kind nearly done gives
//! its sites to the others, at O(log N) solutions per run), at capacity
//! boundaries, and when `late-oracle` is told a site. What is derived for
//! one kind's last waves and its capacity drops (the one live site's
//! queue of every job, the window past the knee, shedding the youngest)
//! is not: with several kinds, jobs past a smaller mix drain. With one
//! kind (and `--blind-types`) the oracle decides as above, job for job.
//! `late-oracle` holds an untold site to its first window of jobs in all,
//! the mix's slots there, still within C.
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

mod mix;

use super::book::Change;
use super::plan::{Planner, SiteModel, EVERY_JOB_WAITS};
use super::{
    Action, Input, JobBook, JobId, JobTypeId, JobTypes, KindNumbers, Policy, RunSpec, SiteEvent, SiteId,
    SiteTruth, SiteView, Time, Truth, TypeTruth,
};
use mix::MixSite;

pub struct Oracle {
    /// Every job of the run, whatever its kind: what the engine reads.
    book: JobBook,
    sites: Vec<SiteTruth>,
    base_runtime: f64,
    /// One per kind of job, in the run's order of kinds.
    lanes: Vec<Lane>,
    /// Several kinds: the mix the lanes' windows come from.
    kinds: Option<Kinds>,
    /// Next capacity boundary of any site, when the models change.
    next_boundary: Option<Time>,
    /// The one live site, when there is one: it takes every job left, so
    /// its last waves can be planned as a whole.
    only_live: Option<usize>,
    /// `late-oracle`: per site, the first window it is held to until a job
    /// has ended there (`None` once told, and always for `oracle`).
    untold: Vec<Option<u32>>,
    late: bool,
}

/// The jobs of one kind and the planner that places them.
struct Lane {
    planner: Planner,
    /// The kind's own book, in its own job numbers, where the run has
    /// several kinds; with one, the run's book is the lane's.
    own: Option<LaneBook>,
    /// Next look at the kind's tail (its pool empty, jobs idle somewhere).
    next_tail: Option<Time>,
}

/// A kind's jobs, numbered `0..n_t` in the order of the run's numbers
/// ([`KindNumbers`]).
struct LaneBook {
    book: JobBook,
}

/// Lane `t`'s `jobs` in the run's numbers.
fn global(kinds: &Option<Kinds>, t: usize, jobs: &[JobId]) -> Vec<JobId> {
    let Some(kinds) = kinds else { return jobs.to_vec() };
    jobs.iter().map(|&j| kinds.numbers.global(JobTypeId(t as u16), j)).collect()
}

/// What the oracle knows of several kinds, and the mix it keeps.
struct Kinds {
    types: JobTypes,
    truth: Vec<TypeTruth>,
    /// Each job's number within its kind.
    numbers: KindNumbers,
    /// Jobs of each kind to keep running at each site (`mix[site][kind]`).
    mix: Vec<Vec<f64>>,
    /// Jobs of each kind not done when the mix was last solved.
    solved_for: Vec<u64>,
}

/// How often the oracle looks at idle jobs in the tail, as a fraction of the
/// shortest run time.
const TAIL_TICK: f64 = 0.05;

/// How many waves at the knee a site's last jobs are planned as a whole in.
const LAST_WAVES: u64 = 4;

/// The share of a kind's jobs left that ends between two solutions of the
/// mix (module docs, "Several kinds").
const RESOLVE: f64 = 0.1;

impl Oracle {
    pub fn new(spec: &RunSpec, truth: &Truth) -> Self {
        let n = spec.sites.len();
        let book = JobBook::new(spec.n_jobs, n, spec.max_attempts);
        let kinds = (spec.types.several() && truth.types.len() == spec.types.len()).then(|| {
            let numbers = KindNumbers::new(&spec.types, spec.n_jobs);
            let counts = spec.types.ids().map(|t| numbers.jobs_of(t).len() as u64).collect();
            Kinds {
                types: spec.types.clone(),
                truth: truth.types.clone(),
                numbers,
                mix: vec![vec![0.0; spec.types.len()]; n],
                solved_for: counts,
            }
        });
        let lanes = match &kinds {
            None => vec![Lane { planner: Planner::new(n), own: None, next_tail: None }],
            Some(k) => k
                .types
                .ids()
                .map(|t| {
                    let book = JobBook::new(k.numbers.jobs_of(t).len() as u64, n, spec.max_attempts);
                    Lane { planner: Planner::new(n), own: Some(LaneBook { book }), next_tail: None }
                })
                .collect(),
        };
        let mut oracle = Oracle {
            book,
            sites: truth.sites.clone(),
            base_runtime: truth.base_runtime,
            lanes,
            kinds,
            next_boundary: None,
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

    /// The book lane `t` plans with.
    fn lane_book(&self, t: usize) -> &JobBook {
        self.lanes[t].own.as_ref().map_or(&self.book, |o| &o.book)
    }

    /// The window and run time the truth gives site `i` at `now` for the
    /// jobs of lane `t`.
    fn model(&self, i: usize, t: usize, now: Time) -> SiteModel {
        match &self.kinds {
            None => self.knee_model(i, now),
            Some(kinds) => self.mix_model(kinds, i, t),
        }
    }

    /// One kind: the knee (module docs).
    fn knee_model(&self, i: usize, now: Time) -> SiteModel {
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
            proven_wait: p.wait_mean,
            dead_time: 0.0,
            ahead,
            success: 1.0 - p.p_fail,
            draining: false,
            queue_gain: 1.0 + p.beta * p.wait_mean * p.speed / self.base_runtime,
            // The simulated grid's sites set no limits of a user's.
            max_out: None,
            max_idle: None,
        }
    }

    /// Several kinds: kind `t`'s share of the mix at site `i` (module docs,
    /// "Several kinds").
    fn mix_model(&self, kinds: &Kinds, i: usize, t: usize) -> SiteModel {
        let p = &self.sites[i];
        let window = kinds.mix[i][t];
        if p.dead || window < 1.0 {
            return SiteModel::CLOSED;
        }
        let run = kinds.truth[t].base_runtime / p.speed_of(t);
        let untold = self.untold.get(i).copied().flatten().is_some();
        SiteModel {
            open: true,
            window,
            run,
            wait: p.wait_mean,
            proven_wait: p.wait_mean,
            dead_time: 0.0,
            ahead: if untold { 0.0 } else { p.wait_mean },
            success: 1.0 - p.p_fail,
            draining: false,
            queue_gain: 1.0 + p.beta * kinds.truth[t].load * p.wait_mean / run,
            max_out: None,
            max_idle: None,
        }
    }

    /// Solves the mix again for the jobs of each kind not done yet.
    fn solve_mix(&mut self, now: Time) {
        let Some(kinds) = self.kinds.as_mut() else { return };
        let left: Vec<u64> = self
            .lanes
            .iter()
            .map(|l| l.own.as_ref().map_or(0, |o| o.book.n_jobs() - o.book.done() - o.book.given_up()))
            .collect();
        let sites: Vec<MixSite> = self
            .sites
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let untold = self.untold.get(i).copied().flatten();
                let slots = untold.map_or(p.slots, |first| first.min(p.slots));
                let rate = (0..kinds.truth.len())
                    .map(|t| {
                        let attempt = kinds.truth[t].base_runtime * (1.0 - p.p_fail / 2.0);
                        if p.dead {
                            0.0
                        } else {
                            p.speed_of(t) * (1.0 - p.p_fail) / attempt
                        }
                    })
                    .collect();
                MixSite { slots: f64::from(slots), capacity: p.capacity_at(now), rate, wait: p.wait_mean }
            })
            .collect();
        let loads: Vec<f64> = kinds.truth.iter().map(|t| t.load).collect();
        let left_f: Vec<f64> = left.iter().map(|&m| m as f64).collect();
        kinds.mix = mix::solve(&sites, &loads, &left_f);
        kinds.solved_for = left;
    }

    /// Whether kind `t`'s jobs left fell far enough since the mix was
    /// solved for the mix to be solved again.
    fn mix_is_stale(&self, t: usize) -> bool {
        let (Some(kinds), Some(own)) = (&self.kinds, &self.lanes[t].own) else { return false };
        let left = own.book.n_jobs() - own.book.done() - own.book.given_up();
        let solved = kinds.solved_for[t];
        left < solved && (left == 0 || (solved - left) as f64 >= RESOLVE * solved as f64)
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

    /// Sets every lane's model at every site from the truth at `now`.
    fn remodel(&mut self, now: Time) {
        self.solve_mix(now);
        for t in 0..self.lanes.len() {
            self.set_models(t, now);
        }
        self.next_boundary = self.sites.iter().flat_map(|p| p.boundaries_after(now)).min_by(f64::total_cmp);
    }

    /// Sets lane `t`'s model at every site.
    fn set_models(&mut self, t: usize, now: Time) {
        for i in 0..self.sites.len() {
            self.set_model(i, t, now);
        }
    }

    fn set_model(&mut self, i: usize, t: usize, now: Time) {
        let m = self.model(i, t, now);
        let Oracle { book, lanes, .. } = self;
        let lane = &mut lanes[t];
        let lane_book = lane.own.as_ref().map_or(&*book, |o| &o.book);
        lane.planner.set_model(SiteId(i as u32), m, lane_book);
    }

    /// After a capacity drop: removes the youngest jobs past the knee where
    /// that loses less work than letting them drain (module docs). With
    /// several kinds the mix is solved again and the jobs past it drain.
    fn shed(&mut self, now: Time, actions: &mut Vec<Action>) {
        if self.kinds.is_some() {
            return;
        }
        for i in 0..self.sites.len() {
            let p = &self.sites[i];
            let site = SiteId(i as u32);
            let n = self.book.counts(site).running;
            let c = p.capacity_at(now);
            // The level it should run at: the knee, or its last waves' window.
            let knee = self.lanes[0].planner.model(site).window as u32;
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
                self.lanes[0].planner.refresh(site, &self.book);
            }
        }
    }

    /// Withdraws lane `t`'s idle `jobs` (its own numbers) from `site`.
    fn withdraw(&mut self, t: usize, site: SiteId, jobs: &[JobId], why: String, actions: &mut Vec<Action>) {
        let Oracle { book, lanes, kinds, .. } = self;
        let lane = &mut lanes[t];
        let jobs = match &mut lane.own {
            None => book.mark_withdrawing(site, jobs),
            Some(own) => {
                let marked = own.book.mark_withdrawing(site, jobs);
                let jobs = global(kinds, t, &marked);
                book.mark_withdrawing(site, &jobs)
            }
        };
        if !jobs.is_empty() {
            actions.push(Action::Withdraw { site, jobs, why });
            let lane_book = lane.own.as_ref().map_or(&*book, |o| &o.book);
            lane.planner.refresh(site, lane_book);
        }
    }

    fn trim_surplus(&mut self, t: usize, site: SiteId, actions: &mut Vec<Action>) {
        let book = self.lane_book(t);
        let k = self.lanes[t].planner.surplus(site, book);
        if k > 0 {
            let jobs: Vec<JobId> = book.youngest_idle(site, k as usize);
            self.withdraw(t, site, &jobs, "idle beyond the knee and the wait ahead".into(), actions);
        }
    }

    fn shortest_run(&self, t: usize) -> f64 {
        (0..self.sites.len())
            .map(|i| self.lanes[t].planner.model(SiteId(i as u32)))
            .filter(|m| m.open)
            .map(|m| m.run)
            .fold(f64::INFINITY, f64::min)
    }

    /// Applies a site's event to every book; returns the run's change, and
    /// the lane of the job it was about, with several kinds.
    fn apply(&mut self, site: SiteId, event: &SiteEvent, actions: &mut Vec<Action>) -> (Change, Vec<usize>) {
        let change = self.book.apply(site, event);
        actions.extend(self.book.after_failure(site, &change));
        let Some(kinds) = &self.kinds else { return (change, vec![0]) };
        let mut touched = Vec::new();
        for (t, lane) in self.lanes.iter_mut().enumerate() {
            let Some(own) = lane.own.as_mut() else { continue };
            if let Some(local) = kinds.numbers.localize(JobTypeId(t as u16), event) {
                let lane_change = own.book.apply(site, &local);
                // The run's book has said what to do; this keeps the lane's
                // marks in step with it.
                let _ = own.book.after_failure(site, &lane_change);
                touched.push(t);
            }
        }
        (change, touched)
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
                let (change, touched) = self.apply(*site, event, &mut actions);
                let ended = matches!(change, Change::Succeeded { .. } | Change::Failed { .. });
                let told = ended && self.untold.get(site.index()).is_some_and(Option::is_some);
                if told {
                    self.untold[site.index()] = None;
                }
                if self.kinds.is_some() {
                    if told || touched.iter().any(|&t| self.mix_is_stale(t)) {
                        self.remodel(now);
                    }
                } else {
                    if told {
                        self.set_model(site.index(), 0, now);
                    }
                    if let Some(i) = self.only_live {
                        self.set_model(i, 0, now);
                    }
                }
                for t in touched {
                    let Oracle { book, lanes, .. } = self;
                    let lane = &mut lanes[t];
                    lane.planner.refresh(*site, lane.own.as_ref().map_or(&*book, |o| &o.book));
                    self.trim_surplus(t, *site, &mut actions);
                }
            }
            Input::Start => {}
            Input::Tick => {
                if self.next_boundary.is_some_and(|b| b <= now) {
                    self.remodel(now);
                    self.shed(now, &mut actions);
                    for t in 0..self.lanes.len() {
                        for i in 0..self.sites.len() {
                            self.trim_surplus(t, SiteId(i as u32), &mut actions);
                        }
                    }
                }
                for t in 0..self.lanes.len() {
                    if self.lanes[t].next_tail.is_some_and(|at| at <= now) {
                        self.lanes[t].next_tail = None;
                        for (site, jobs) in self.lanes[t].planner.tail_moves(self.lane_book(t)) {
                            let why = "tail: a site with room would finish these sooner".to_string();
                            self.withdraw(t, site, &jobs, why, &mut actions);
                        }
                    }
                }
            }
        }
        if self.book.any_barred() {
            let live: Vec<bool> =
                (0..self.sites.len()).map(|i| self.lanes[0].planner.model(SiteId(i as u32)).open).collect();
            actions.extend(self.book.give_up_stranded(&live));
        }
        for t in 0..self.lanes.len() {
            let Oracle { book, lanes, kinds, .. } = self;
            let lane = &mut lanes[t];
            let why = |_, m: &SiteModel| format!("window {:.0}, {}", m.window, m.waiting_ahead());
            match &mut lane.own {
                None => actions.extend(lane.planner.dispatch(now, book, why)),
                Some(own) => {
                    for action in lane.planner.dispatch(now, &mut own.book, why) {
                        if let Action::Submit { site, jobs, why } = action {
                            let jobs = book.take_these(site, &global(kinds, t, &jobs));
                            actions.push(Action::Submit { site, jobs, why });
                        }
                    }
                }
            }
            let lane_book = self.lane_book(t);
            if lane_book.pool_len() == 0 && lane_book.out_total() > 0 && self.lanes[t].next_tail.is_none() {
                let tick = TAIL_TICK * self.shortest_run(t);
                self.lanes[t].next_tail = tick.is_finite().then_some(now + tick.max(1.0));
            }
        }
        actions
    }

    fn next_deadline(&self) -> Option<Time> {
        self.lanes.iter().filter_map(|l| l.next_tail).chain(self.next_boundary).min_by(f64::total_cmp)
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        let p = &self.sites[site.index()];
        SiteView {
            window: self.lanes.iter().map(|l| l.planner.model(site).window).sum::<f64>() as u32,
            capacity: (!p.dead).then(|| f64::from(p.knee_at(f64::NEG_INFINITY))),
            ..SiteView::default()
        }
    }
}
