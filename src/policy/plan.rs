//! The planner: from one model per site (how many jobs it should run, how
//! long they run and wait, how often they fail) to submissions and moves.
//! The oracle fills the models with the truth, `adaptive` with its estimates;
//! everything after that is the same code, so the two differ only in what
//! they know.
//!
//! Per site, with window `w` (jobs to keep running), mean run time `R`, mean
//! queue wait `W` and success probability `q`:
//! - attempts end at `a = w / (R (1 − (1 − q)/2))` per second (a failed
//!   attempt runs half its work on average) and jobs succeed at `μ = q a`;
//! - **Little's law**: keeping `w` running through an exponential wait of
//!   mean `W` needs `a W` jobs waiting, plus the running deficit
//!   `w − running`: the site's target of jobs out is `w + a W` while at
//!   most `w` run. Past the window each running job takes `g ≥ 1` jobs off
//!   the queue, `running + (a W − g (running − w))⁺`; with `g = 1`, the
//!   `max(running, w + a W)` of Little's law. A larger `g` is for a
//!   resource that thrashes past the window, where the queue must shrink
//!   faster than completions fall or the window is an unstable equilibrium
//!   (the oracle's module doc derives `g`);
//! - a job sent now would succeed after its **marginal latency**
//!   `λ = max(W + R, out / μ)`: the pipeline's own length, or the backlog
//!   already queued there.
//!
//! The pool is water-filled over the sites by finish time: the horizon `T*`
//! is the earliest time by which the open sites together could finish the
//! pool, `Σ μ (T* − now − λ)⁺ = pool`, and a site is given a job only while
//! that job would finish by `T*` and the site is below its target. Near the
//! end this is the tail rule: a slow site gets nothing when the fast ones
//! will finish the rest sooner. Once the pool is empty, jobs idle at a site
//! whose `W + R` is well above what a site with room offers (by 10%, and by
//! more than the minute a grid job's start may take to be heard of) are withdrawn
//! (the wait is memoryless: a job that has waited long is no closer to its
//! start) and go there instead. It is the last of them that ends the run:
//! `k` jobs idle at a site start after `W H(k)` (below), so as many move as
//! bring the later of the two sites' last ends, `W H(k − m) + R` at the
//! giver and `W' H(m) + R'` at the taker, furthest below `W H(k) + R` — when
//! that gains the minute, even where one job alone would not. The giver's
//! wait there is the one its waits prove (`proven_wait`, past its dead
//! time), not the one routing presumes: a job gives up its place in a
//! queue only on evidence.
//!
//! **The last wave.** Once the sites' room takes the whole pool, what is
//! sent now is the last of it, and the run ends with the last of these
//! jobs' queue waits. `n` jobs that all run at once after independent
//! exponential waits of mean `W` have all started only after `W H(n)` on
//! average (`H(n) = 1 + 1/2 + … + 1/n ≈ ln n + 0.58`; waits are memoryless,
//! so this holds for the jobs already waiting whatever their ages): 400 jobs
//! at a site of 50 s waits end theirs after 330 s, not 50. The last of
//! all the sites' waits ends later still: each site's last wait is a
//! straggler of its own. So the wave is given a budget of stragglers. A job
//! waiting at a site is still waiting or running at `T` with probability
//! `p = e^{−(T − R)/W}`, and the expected number of the wave's jobs still
//! out at `T`, `Σ n p` over every site (the jobs already waiting included),
//! stays within `e^{−γ} ≈ 0.56`. For one site that is `W (ln n + γ) + R ≤
//! T`, the expected last of its `n` waits; shared, it keeps the last of all
//! of them near `T`, where a bound per site would let each of `k` sites add
//! a straggler of its own. The budget goes first to the sites where a job
//! is least likely to straggle, and the horizon is found with it. Two cases
//! keep the plain backlog: jobs past the window's free slots, which queue
//! for slots anyway, and waits longer than the margin a move needs, whose
//! idle jobs the tail moves.
//!
//! Cost: the horizon is recomputed in O(sites log sites) (in the last wave,
//! plus a bisection of 40 steps of O(sites log sites) each, and the wave's
//! shares once) only when the pool or a model changed materially; between
//! recomputations an event touches only its own site (O(log sites)).

use super::book::{SiteCounts, TimeKey};
use super::{Action, JobBook, JobId, SiteId, Time};
use std::collections::{BTreeMap, BTreeSet};

/// The wait Little's law is given where every job left may wait ahead: a
/// queue `rate × this` long holds any run's jobs (finite, so that rooms
/// stay counts).
pub const EVERY_JOB_WAITS: f64 = 1e9;

/// What the planner knows of one site.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SiteModel {
    /// Whether the site may be given jobs at all now.
    pub open: bool,
    /// Jobs to keep running there.
    pub window: f64,
    /// Mean run time of a job there at the window, seconds.
    pub run: f64,
    /// Mean queue wait a new submission there is taken to face, seconds
    /// (for routing): where little is known of the site's waits, a
    /// cautious one.
    pub wait: f64,
    /// The mean queue wait the waits there so far prove, at most `wait`.
    /// The tail moves jobs already waiting by it: a job gives up its place
    /// in a queue only on evidence.
    #[serde(default)]
    pub proven_wait: f64,
    /// Of `proven_wait`, the part every job waits (the waits are a dead
    /// time, then memoryless): the jobs waiting there now start after the
    /// rest, `proven_wait − dead_time`, spread as exponential waits are.
    #[serde(default)]
    pub dead_time: f64,
    /// The wait Little's law queues jobs ahead for: the mean wait where it
    /// is known, 0 where it is not (a guess must not fill a queue).
    pub ahead: f64,
    /// Probability that an attempt succeeds.
    pub success: f64,
    /// Draining past its window after a degraded verdict: nothing is sent,
    /// not even to wait ahead (it would start into the overload, and in the
    /// tail be moved on and come back); the jobs waiting there already stay
    /// (withdrawing them would lose their place in the queue).
    pub draining: bool,
    /// Jobs the queue kept ahead gives up per job running past the window
    /// (`g` of the module doc; 1 where nothing is known of what running
    /// past the window costs, as in Little's law).
    #[serde(default = "one")]
    pub queue_gain: f64,
    /// The user's `max_jobs` for the site: our jobs there, idle and
    /// running, never more, whatever the plan.
    #[serde(default)]
    pub max_out: Option<f64>,
    /// The user's `max_idle` for the site: our jobs waiting there, never
    /// more.
    #[serde(default)]
    pub max_idle: Option<f64>,
}

fn one() -> f64 {
    1.0
}

impl SiteModel {
    /// A site that gets nothing.
    pub const CLOSED: SiteModel = SiteModel {
        open: false,
        window: 0.0,
        run: 1.0,
        wait: 0.0,
        proven_wait: 0.0,
        dead_time: 0.0,
        ahead: 0.0,
        success: 1.0,
        draining: false,
        queue_gain: 1.0,
        max_out: None,
        max_idle: None,
    };

    /// Attempts ending per second with the window full.
    pub fn attempt_rate(&self) -> f64 {
        let q = self.success.clamp(1e-3, 1.0);
        self.window.max(0.0) / (self.run.max(1e-3) * (1.0 - (1.0 - q) / 2.0))
    }

    /// The queue kept waiting ahead, for a decision's reason: "every job
    /// left" where the site may queue them all (a count in the billions
    /// would say nothing).
    pub fn waiting_ahead(&self) -> String {
        if self.ahead >= EVERY_JOB_WAITS {
            "every job left may wait ahead".to_string()
        } else {
            format!("{:.0} waiting ahead", self.attempt_rate() * self.ahead)
        }
    }

    /// How far the site is past the user's limits with `out` jobs there
    /// (negative: how many more they allow).
    fn past_limits(&self, c: SiteCounts, out: u32) -> f64 {
        let by_out = self.max_out.map_or(f64::NEG_INFINITY, |m| f64::from(out) - m);
        let by_idle = self.max_idle.map_or(f64::NEG_INFINITY, |m| f64::from(waiting(c)) - m);
        by_out.max(by_idle)
    }

    /// Jobs succeeding per second with the window full.
    pub fn rate(&self) -> f64 {
        self.attempt_rate() * self.success.clamp(1e-3, 1.0)
    }

    /// Seconds until a job sent now to an uncrowded site succeeds, on
    /// average, retried there after failures.
    pub fn latency(&self) -> f64 {
        self.latency_after(self.wait)
    }

    /// [`SiteModel::latency`] by the proven wait: what a job already
    /// waiting there is known to face.
    fn proven_latency(&self) -> f64 {
        self.latency_after(self.proven_wait)
    }

    fn latency_after(&self, wait: f64) -> f64 {
        let q = self.success.clamp(1e-3, 1.0);
        (wait + self.run) + (1.0 / q - 1.0) * (wait + self.run / 2.0)
    }

    /// Jobs to have out there (idle and running) with `running` running.
    pub fn out_target(&self, running: u32) -> f64 {
        if !self.open {
            return 0.0;
        }
        let running = f64::from(running);
        let past = (running - self.window).max(0.0);
        let queue = (self.attempt_rate() * self.ahead - self.queue_gain.max(1.0) * past).max(0.0);
        running.max(self.window) + queue
    }

    /// Marginal latency with `out` jobs out: when a job sent now would succeed.
    pub fn marginal_latency(&self, out: u32) -> f64 {
        let mu = self.rate();
        if mu <= 0.0 {
            return f64::INFINITY;
        }
        self.latency().max(f64::from(out) / mu)
    }

    /// The chance that a job waiting here now (or sent now) is still
    /// waiting or running `slack` seconds from now, where the site runs it
    /// as soon as its wait ends: `e^{−(slack − R)/W}` with `R` the rest of
    /// its latency (failures folded in as in [`SiteModel::latency`]), at
    /// most 1.
    fn straggler_odds(&self, slack: f64) -> f64 {
        let rest = self.latency() - self.wait;
        (-(slack - rest) / self.wait).exp().min(1.0)
    }

    /// Whether the last of the site's queue waits bounds when it finishes:
    /// where the wait is shorter than a move's margin the tail never moves
    /// its idle jobs (no move could gain the margin on the wait), so the
    /// largest of their waits is the site's to finish with; longer waits
    /// are the tail's to cut short by moving the jobs still idle.
    fn waits_race(&self) -> bool {
        self.wait > 0.0 && self.wait < MOVE_MARGIN
    }
}

/// Jobs at a site still to draw their queue wait (or drawing it): the ones
/// whose waits race each other to the site's last start.
fn waiting(counts: SiteCounts) -> u32 {
    counts.submitting + counts.idle
}

/// `H(n) − ln n` as `n` grows.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// `H(n) = 1 + 1/2 + … + 1/n`: the expected largest of `n` independent
/// exponential waits of mean 1. Waits are memoryless, so the jobs waiting
/// at a site now, whatever their ages, end their waits after `W H(n)`.
fn harmonic(n: u32) -> f64 {
    if n <= 32 {
        (1..=n).map(|k| 1.0 / f64::from(k)).sum()
    } else {
        let n = f64::from(n);
        let n2 = n * n;
        n.ln() + EULER_GAMMA + 1.0 / (2.0 * n) - 1.0 / (12.0 * n2) + 1.0 / (120.0 * n2 * n2)
    }
}

/// The pool's finish horizon, cached between material changes.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Horizon {
    /// When the open sites could finish the pool (absolute time).
    at: Time,
    /// When it was computed, and the pool then.
    computed: Time,
    pool: u64,
    /// The sites' room takes the whole pool: what is sent now is the last
    /// of it, and the last of its queue waits ends the run.
    last_wave: bool,
}

/// Submissions and moves from per-site models (see the module docs).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Planner {
    models: Vec<SiteModel>,
    /// Each open site's key in `candidates`, if it has room.
    keys: Vec<Option<TimeKey>>,
    /// Open sites below their target, by marginal latency.
    candidates: BTreeSet<(TimeKey, u32)>,
    horizon: Option<Horizon>,
    /// In the last wave, the jobs more each site may be sent by the
    /// horizon's straggler budget, less those sent since it was computed.
    /// Kept with the horizon (a checkpoint drops it, and the next dispatch
    /// computes it again).
    #[serde(skip)]
    wave: Option<Vec<f64>>,
    /// A model changed since the horizon was computed.
    stale: bool,
}

/// The last wave's budget of stragglers: how many of its jobs may be
/// expected still to be waiting or running at the horizon. For waits that
/// race at one site, `n e^{−(T − R)/W} = e^{−γ}` is `T = R + W (ln n + γ)`,
/// the expected last of `n` exponential waits; over several sites the same
/// budget, shared, keeps the expected last of all of them near `T`.
const STRAGGLERS: f64 = 0.561_459_483_566_885_1;

/// Relative improvement of a job's expected finish that justifies moving it.
const MOVE_GAIN: f64 = 0.1;

/// Seconds a move must also gain: a grid job's start reaches the submit
/// host only when the gridmanager next polls the site (60 s by default), so
/// a job taken back may have just started there; a move that gains less
/// than that is not worth the chance of cutting it short.
const MOVE_MARGIN: f64 = 60.0;

impl Planner {
    pub fn new(n_sites: usize) -> Self {
        Planner {
            models: vec![SiteModel::CLOSED; n_sites],
            keys: vec![None; n_sites],
            candidates: BTreeSet::new(),
            horizon: None,
            wave: None,
            stale: true,
        }
    }

    pub fn model(&self, site: SiteId) -> &SiteModel {
        &self.models[site.index()]
    }

    /// Sets a site's model and refreshes its standing.
    pub fn set_model(&mut self, site: SiteId, model: SiteModel, book: &JobBook) {
        let old = self.models[site.index()];
        if old != model {
            let material = old.open != model.open
                || old.draining != model.draining
                || (old.rate() - model.rate()).abs() > 0.05 * old.rate().max(model.rate())
                || (old.latency() - model.latency()).abs() > 0.05 * old.latency().max(model.latency());
            self.stale |= material;
            self.models[site.index()] = model;
        }
        self.refresh(site, book);
    }

    /// Jobs `site` may still be given before it reaches its target.
    pub fn room(&self, site: SiteId, book: &JobBook) -> u64 {
        let c = book.counts(site);
        let model = &self.models[site.index()];
        let target =
            if model.draining { f64::from(c.running).max(model.window) } else { model.out_target(c.running) };
        let room = (target.floor() - f64::from(c.out())).min(-model.past_limits(c, c.out()).ceil());
        room.max(0.0) as u64
    }

    /// Idle jobs above the site's target by more than its uncertainty: they
    /// would start and run past the window. The target moves with every
    /// estimate of the wait (a mean of a few exponential draws is uncertain
    /// by half), and a withdrawal is a `condor_rm` that the next estimate
    /// may undo with a `condor_submit`: only an excess of more than half
    /// the queue kept ahead, or than the target's own fluctuation (√target),
    /// is withdrawn. Jobs already on their way out (being withdrawn or
    /// removed) are not counted: a `condor_rm` takes a while, and every
    /// event meanwhile would withdraw the same excess again, the run's
    /// whole queue in a few events, to be sent back once they are out.
    /// Idle jobs past the user's limits go whatever the slack.
    pub fn surplus(&self, site: SiteId, book: &JobBook) -> u64 {
        let c = book.counts(site);
        let model = &self.models[site.index()];
        let target = model.out_target(c.running);
        let staying = c.out() - c.withdrawing - c.removing;
        let excess = f64::from(staying) - target;
        let slack = if model.open {
            target.sqrt().max(0.5 * model.attempt_rate() * model.ahead).max(1.0)
        } else {
            0.0
        };
        let excess = if excess > slack { excess } else { 0.0 };
        let past_limits = model.past_limits(c, staying);
        (excess.max(past_limits).max(0.0).ceil() as u64).min(u64::from(c.idle))
    }

    /// Re-files `site` after its counts changed.
    pub fn refresh(&mut self, site: SiteId, book: &JobBook) {
        let i = site.index();
        if let Some(key) = self.keys[i].take() {
            self.candidates.remove(&(key, i as u32));
        }
        let model = &self.models[i];
        if model.open && self.room(site, book) > 0 {
            let key = TimeKey::of(model.marginal_latency(book.counts(site).out()));
            self.keys[i] = Some(key);
            self.candidates.insert((key, i as u32));
        }
    }

    /// The pool's finish horizon at `now`, recomputed when stale.
    fn horizon(&mut self, now: Time, book: &JobBook) -> Horizon {
        let pool = book.pool_len();
        if let Some(h) = self.horizon {
            let drift = pool.abs_diff(h.pool) > (h.pool / 20).max(1);
            let aged = now - h.computed > 0.05 * (h.at - h.computed).max(0.0);
            if !self.stale && !drift && !aged {
                return h;
            }
        }
        let room: u64 = (0..self.models.len()).map(|i| self.room(SiteId(i as u32), book)).sum();
        let last_wave = room >= pool;
        let open: Vec<(usize, &SiteModel, SiteCounts)> = self
            .models
            .iter()
            .enumerate()
            .filter(|(_, m)| m.open && m.rate() > 0.0)
            .map(|(i, m)| (i, m, book.counts(SiteId(i as u32))))
            .filter(|(_, m, c)| m.marginal_latency(c.out()).is_finite())
            .collect();
        let mut lines: Vec<(f64, f64)> =
            open.iter().map(|(_, m, c)| (m.marginal_latency(c.out()), m.rate())).collect();
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        let need = pool as f64;
        let (mut sum_mu, mut sum_mu_l) = (0.0, 0.0);
        let mut tau = f64::INFINITY;
        for (k, &(l, mu)) in lines.iter().enumerate() {
            sum_mu += mu;
            sum_mu_l += mu * l;
            let t = (need + sum_mu_l) / sum_mu;
            let next = lines.get(k + 1).map_or(f64::INFINITY, |x| x.0);
            if t <= next {
                tau = t;
                break;
            }
        }
        // The lines ignore that the last of many queue waits ends late;
        // with it each site finishes fewer jobs by a time, so the horizon
        // found is a lower bound: search above it.
        let finished_by = |t: f64| {
            let bounds = self.wave_bounds(book, t);
            open.iter()
                .map(|&(i, m, c)| {
                    let backlog = m.rate() * (t - m.marginal_latency(c.out())).max(0.0);
                    backlog.min(bounds[i])
                })
                .sum::<f64>()
        };
        if last_wave && tau.is_finite() && finished_by(tau) < need - 0.5 {
            let (mut lo, mut hi) = (tau, tau.max(1.0) * 2.0);
            while finished_by(hi) < need - 0.5 && hi < 1e12 {
                (lo, hi) = (hi, hi * 2.0);
            }
            for _ in 0..40 {
                let mid = 0.5 * (lo + hi);
                if finished_by(mid) < need - 0.5 {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            tau = hi;
        }
        let horizon = Horizon { at: now + tau, computed: now, pool, last_wave };
        self.horizon = Some(horizon);
        self.wave = None;
        self.stale = false;
        horizon
    }

    /// In the last wave, how many more jobs each site may be sent so that
    /// the wave's queue waits end in time to run by `slack` from now
    /// (module docs): the expected number of its jobs still waiting or
    /// running then, `Σ n p`, stays within [`STRAGGLERS`], spent on the
    /// sites where a job is least likely to straggle first. A site is
    /// unbounded where its waits do not race (the tail moves long waits'
    /// idle jobs) or where the jobs would fill its free slots and queue
    /// for slots anyway.
    fn wave_bounds(&self, book: &JobBook, slack: f64) -> Vec<f64> {
        let mut bounds = vec![f64::INFINITY; self.models.len()];
        let mut budget = STRAGGLERS;
        let mut racing = Vec::new();
        for (i, m) in self.models.iter().enumerate() {
            if !m.open || !m.waits_race() {
                continue;
            }
            let c = book.counts(SiteId(i as u32));
            let odds = m.straggler_odds(slack);
            // Jobs past the free slots queue for slots: the backlog, not
            // their waits, says when they end.
            let slots = (m.window - f64::from(c.running)).max(0.0);
            let waiting = f64::from(waiting(c));
            budget -= waiting.min(slots) * odds;
            let backlog = m.rate() * (slack - m.marginal_latency(c.out())).max(0.0);
            racing.push((odds, i, (slots - waiting).max(0.0), backlog));
        }
        racing.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (odds, i, free, backlog) in racing.into_iter().filter(|r| r.0 > 0.0) {
            let share = (budget.max(0.0) / odds).floor();
            if share <= free {
                bounds[i] = share;
            }
            budget -= share.min(free).min(backlog) * odds;
        }
        bounds
    }

    /// Hands pool jobs to sites with room whose jobs would finish by the
    /// horizon, lowest marginal latency first. `why` explains a submission.
    pub fn dispatch(
        &mut self,
        now: Time,
        book: &mut JobBook,
        mut why: impl FnMut(SiteId, &SiteModel) -> String,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        if book.pool_len() == 0 || self.candidates.is_empty() {
            return actions;
        }
        let horizon = self.horizon(now, book);
        if horizon.last_wave && self.wave.is_none() {
            self.wave = Some(self.wave_bounds(book, horizon.at - now));
        }
        let mut passed = Vec::new();
        while book.pool_len() > 0 {
            let Some(&(key, i)) = self.candidates.iter().find(|c| !passed.contains(&c.1)) else { break };
            let site = SiteId(i);
            let model = self.models[i as usize];
            let slack = horizon.at - now - key.time();
            if slack < 0.0 {
                break;
            }
            let by_backlog = (model.rate() * slack).ceil();
            let wave = self.wave.as_ref().filter(|_| horizon.last_wave);
            let by_waits = wave.map_or(f64::INFINITY, |b| b[i as usize].floor());
            // At least one: a slot's worth refilled as a job ends there; the
            // wave's shares, taken once per horizon, do not see the slots
            // freed since (a strict bound measured worse, docs/experiments.md).
            let allowed = (by_backlog.min(by_waits) as u64).max(1);
            let k = self.room(site, book).min(allowed).min(book.pool_len());
            passed.push(i);
            if k == 0 {
                continue;
            }
            if let Some(bounds) = self.wave.as_mut() {
                bounds[i as usize] -= k as f64;
            }
            let jobs = book.take(site, k);
            if !jobs.is_empty() {
                actions.push(Action::Submit { site, jobs, why: why(site, &model) });
            }
            self.refresh(site, book);
        }
        for i in passed {
            self.refresh(SiteId(i), book);
        }
        if book.any_barred() {
            self.place_barred(book, &mut why, &mut actions);
        }
        actions
    }

    /// Jobs left in the pool that a site held for a cause of its own go to
    /// the soonest site with room that has not held them, whatever the
    /// horizon: the sites the horizon counts on will not take them, and
    /// left in the pool they would wait there for good.
    fn place_barred(
        &mut self,
        book: &mut JobBook,
        why: &mut impl FnMut(SiteId, &SiteModel) -> String,
        actions: &mut Vec<Action>,
    ) {
        let mut sent: BTreeMap<SiteId, Vec<JobId>> = BTreeMap::new();
        for job in book.barred_in_pool().collect::<Vec<_>>() {
            let taker =
                self.candidates.iter().map(|&(_, i)| SiteId(i)).find(|&site| !book.barred_at(job, site));
            let Some(site) = taker else { continue };
            sent.entry(site).or_default().extend(book.take_these(site, &[job]));
            self.refresh(site, book);
        }
        for (site, jobs) in sent {
            actions.push(Action::Submit { site, jobs, why: why(site, &self.models[site.index()]) });
        }
    }

    /// The sites with room, as (the latency a job sent there now would
    /// have, how many jobs it has room for, the site), soonest first: where
    /// jobs that the tail moves can go.
    pub fn takers(&self, book: &JobBook) -> Vec<(f64, u64, SiteId)> {
        self.candidates
            .iter()
            .map(|&(key, i)| (key.time(), self.room(SiteId(i), book), SiteId(i)))
            .filter(|&(_, room, _)| room > 0)
            .collect()
    }

    /// The latency a job must face where it is for a move to a site of
    /// `taker` latency to be worth it: `MOVE_GAIN` better, and by at least
    /// `MOVE_MARGIN`.
    pub fn move_bar(taker: f64) -> f64 {
        (taker * (1.0 + MOVE_GAIN)).max(taker + MOVE_MARGIN)
    }

    /// With the pool empty: idle jobs at sites where they would succeed
    /// late, to be withdrawn because a site with room would finish them
    /// sooner. Returns (site, jobs) pairs; the caller withdraws them and the
    /// next dispatch sends them on. O(sites² + room the takers have):
    /// call it from a timer.
    pub fn tail_moves(&self, book: &JobBook) -> Vec<(SiteId, Vec<JobId>)> {
        if book.pool_len() > 0 {
            return Vec::new();
        }
        let mut takers = self.takers(book);
        if takers.is_empty() {
            return Vec::new();
        }
        let mut givers: Vec<(f64, usize)> = self
            .models
            .iter()
            .enumerate()
            .filter(|(i, _)| !book.idle_at(SiteId(*i as u32)).is_empty())
            .map(|(i, m)| (if m.open { m.proven_latency() } else { f64::INFINITY }, i))
            .collect();
        givers.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        // Jobs each taker has been given so far, whose waits race there.
        let mut given = vec![0u32; takers.len()];
        let mut moves = Vec::new();
        for (latency, i) in givers {
            let site = SiteId(i as u32);
            let idle = book.idle_at(site);
            let wait = (self.models[i].proven_wait - self.models[i].dead_time).max(0.0);
            // The last of `k` jobs still waiting here starts after `W H(k)`
            // (memoryless waits): that is what a move shortens.
            let last_here = |k: u64| if k == 0 { 0.0 } else { latency + wait * (harmonic(k as u32) - 1.0) };
            let mut count = 0u64;
            for (t, taker) in takers.iter_mut().enumerate() {
                let left = idle.len() as u64 - count;
                // Each job must be better off there, or the gain below is
                // only the error of comparing the means of two maxima.
                if taker.2 == site || taker.1 == 0 || left == 0 || latency <= taker.0 * (1.0 + MOVE_GAIN) {
                    continue;
                }
                let taker_wait = self.models[taker.2.index()].wait;
                let last_there = |m: u64| taker.0 + taker_wait * (harmonic(given[t] + m as u32) - 1.0);
                let gain = |m: u64| last_here(left) - last_here(left - m).max(last_there(m));
                let best =
                    (1..=taker.1.min(left)).max_by(|&a, &b| gain(a).total_cmp(&gain(b)).then(b.cmp(&a)));
                if let Some(m) = best.filter(|&m| gain(m) > MOVE_MARGIN) {
                    taker.1 -= m;
                    given[t] += m as u32;
                    count += m;
                }
            }
            if count > 0 {
                // The youngest go: in a real queue the oldest are nearest the front.
                moves.push((site, book.youngest_idle(site, count as usize)));
            }
        }
        moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::SiteEvent;

    fn model(window: f64, run: f64, wait: f64) -> SiteModel {
        SiteModel {
            open: true,
            window,
            run,
            wait,
            proven_wait: wait,
            dead_time: 0.0,
            ahead: wait,
            success: 1.0,
            draining: false,
            queue_gain: 1.0,
            max_out: None,
            max_idle: None,
        }
    }

    /// Jobs the actions submit to `site`.
    fn submitted_to(actions: &[Action], site: SiteId) -> usize {
        actions
            .iter()
            .map(|a| match a {
                Action::Submit { site: s, jobs, .. } if *s == site => jobs.len(),
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn littles_law_keeps_the_wait_filled() {
        // 10 running jobs of 100 s end one every 10 s; a 300 s wait needs 30 in the queue.
        let m = model(10.0, 100.0, 300.0);
        assert!((m.attempt_rate() - 0.1).abs() < 1e-12);
        assert!((m.out_target(10) - 40.0).abs() < 1e-9);
        // Four short of the window: those four more too; four above it: four fewer waiting.
        assert!((m.out_target(6) - 40.0).abs() < 1e-9);
        assert!((m.out_target(14) - 40.0).abs() < 1e-9);
        assert!((m.out_target(45) - 45.0).abs() < 1e-9);
        // A queue that gives up three jobs per job past the window: at 14
        // running, 30 − 3 × 4 = 18 wait; from 20 running on, none.
        let steep = SiteModel { queue_gain: 3.0, ..m };
        assert!((steep.out_target(10) - 40.0).abs() < 1e-9);
        assert!((steep.out_target(6) - 40.0).abs() < 1e-9);
        assert!((steep.out_target(14) - 32.0).abs() < 1e-9);
        assert!((steep.out_target(25) - 25.0).abs() < 1e-9);
        // Failures: half the work lost per failed attempt, retried.
        let f = SiteModel { success: 0.5, ..model(10.0, 100.0, 0.0) };
        assert!((f.attempt_rate() - 10.0 / 75.0).abs() < 1e-12);
        assert!((f.latency() - (100.0 + 50.0)).abs() < 1e-9);
    }

    #[test]
    fn the_pool_goes_where_it_finishes_first_and_never_to_a_site_that_would_finish_last() {
        // 100 jobs; a fast site (10 running, 100 s) and a slow one (10 running, 1000 s).
        let mut book = JobBook::new(100, 2, 3);
        let mut planner = Planner::new(2);
        planner.set_model(SiteId(0), model(10.0, 100.0, 0.0), &book);
        planner.set_model(SiteId(1), model(10.0, 1000.0, 0.0), &book);
        let acts = planner.dispatch(0.0, &mut book, |_, _| String::new());
        let to = |s: u32| submitted_to(&acts, SiteId(s));
        // The fast site alone finishes 100 jobs by t = 1000, when the slow
        // one's first would just end: the slow site would still help a little
        // (Σ μ (T − λ) = 100 gives T ≈ 1000), but never by much.
        assert_eq!(to(0), 10);
        assert!(to(1) <= 1, "{acts:?}");
    }

    #[test]
    fn the_harmonic_numbers_agree_with_their_sum_across_the_series_switch() {
        let mut exact = 0.0;
        for n in 1..=3000u32 {
            exact += 1.0 / f64::from(n);
            assert!((harmonic(n) - exact).abs() < 1e-10, "H({n}) = {} ≠ {exact}", harmonic(n));
        }
    }

    #[test]
    fn the_last_wave_is_not_piled_where_the_last_of_its_queue_waits_would_end_the_run() {
        // 400 jobs. Site 0 runs them all at once, 30 s each, after a queue
        // wait of 50 s on average: its mean job would be done by 80 s, the
        // first of any site, but the last of 400 waits ends after
        // 50 H(400) ≈ 330 s. Four sites without waits run 50 jobs of 100 s
        // at a time, 2 jobs/s together once their first jobs end. Site 0
        // should get the n jobs whose last wait ends when the others finish
        // the rest: 50 H(n) + 30 = 100 + (400 − n)/2 gives n ≈ 64, all done
        // by about 270 s, where piling the pool on site 0 would end at 360.
        let mut book = JobBook::new(400, 5, 3);
        let mut planner = Planner::new(5);
        planner.set_model(SiteId(0), model(1000.0, 30.0, 50.0), &book);
        for i in 1..5 {
            planner.set_model(SiteId(i), model(50.0, 100.0, 0.0), &book);
        }
        let acts = planner.dispatch(0.0, &mut book, |_, _| String::new());
        let to = |s: u32| submitted_to(&acts, SiteId(s));
        assert!((40..=100).contains(&to(0)), "{} jobs sent to the site of 50 s waits", to(0));
        for i in 1..5 {
            assert_eq!(to(i), 50, "a site without waits runs its window");
        }
        assert!(book.pool_len() >= 100, "the rest waits for the next waves");
    }

    #[test]
    fn the_last_waves_stragglers_are_counted_over_all_sites_not_per_site() {
        // 300 jobs. A site without waits runs 50 at a time, 100 s each; the
        // others run jobs of 30 s after queue waits of 40 s on average, each
        // with room for all. The last of the waits ends the run wherever they
        // are, so ten such sites must take as many jobs as one: waits of the
        // same law do not end sooner for being split up.
        let sent_to_waits = |sites: u32| {
            let mut book = JobBook::new(300, sites as usize + 1, 3);
            let mut planner = Planner::new(sites as usize + 1);
            planner.set_model(SiteId(0), model(50.0, 100.0, 0.0), &book);
            for i in 1..=sites {
                planner.set_model(SiteId(i), model(1000.0, 30.0, 40.0), &book);
            }
            let acts = planner.dispatch(0.0, &mut book, |_, _| String::new());
            (1..=sites).map(|i| submitted_to(&acts, SiteId(i))).sum::<usize>()
        };
        let (one, ten) = (sent_to_waits(1), sent_to_waits(10));
        assert!(one >= 20, "{one} sent to the one site with waits");
        assert!(ten.abs_diff(one) <= 10, "{ten} sent to ten sites with waits, {one} to one");
    }

    #[test]
    fn with_the_pool_empty_idle_jobs_move_to_a_faster_site_with_room() {
        let mut book = JobBook::new(20, 2, 3);
        let mut planner = Planner::new(2);
        let slow = model(10.0, 100.0, 5000.0);
        planner.set_model(SiteId(1), slow, &book);
        let jobs = book.take(SiteId(1), 20);
        book.apply(SiteId(1), &SiteEvent::Submitted { jobs, at: 0.0 });
        planner.set_model(SiteId(0), model(10.0, 100.0, 0.0), &book);
        let moves = planner.tail_moves(&book);
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].0, SiteId(1));
        assert_eq!(moves[0].1.len(), 10, "the fast site has room for its window");
        assert!(moves[0].1.contains(&JobId(19)), "the youngest go first");
    }

    #[test]
    fn a_wait_presumed_turns_the_pool_away_but_moves_no_job_already_waiting() {
        // Site 1 took 16 jobs and started none yet; they have waited 20 s,
        // within the minute a grid site's start may take to be heard of:
        // routing takes its wait as 20 s, the proof says nothing yet.
        // Site 0 runs 10 s jobs after 8 s waits and has room for 8.
        let mut book = JobBook::new(24, 2, 3);
        let mut planner = Planner::new(2);
        let unstarted = SiteModel { proven_wait: 0.0, ..model(16.0, 10.0, 20.0) };
        planner.set_model(SiteId(1), unstarted, &book);
        let jobs = book.take(SiteId(1), 16);
        book.apply(SiteId(1), &SiteEvent::Submitted { jobs, at: 0.0 });
        planner.set_model(SiteId(0), SiteModel { ahead: 0.0, ..model(8.0, 10.0, 8.0) }, &book);
        let acts = planner.dispatch(20.0, &mut book, |_, _| String::new());
        // Taken at a wait of 0, site 1 would finish the 8 by 35 s and site
        // 0 only by 38 s: they would have waited for site 1.
        assert_eq!(submitted_to(&acts, SiteId(0)), 8, "{acts:?}");
        // Site 0 with room for 8 more: a presumption moves nothing there.
        planner.set_model(SiteId(0), SiteModel { ahead: 0.0, ..model(16.0, 10.0, 8.0) }, &book);
        assert!(planner.tail_moves(&book).is_empty(), "a presumption moves nothing");
        // Presumed 200 s, still nothing moves; proven 200 s (or 200 s past
        // a dead time), the youngest go to the site with room.
        let presumed = SiteModel { proven_wait: 0.0, ..model(16.0, 10.0, 200.0) };
        planner.set_model(SiteId(1), presumed, &book);
        assert!(planner.tail_moves(&book).is_empty(), "a presumption moves nothing");
        planner.set_model(SiteId(1), model(16.0, 10.0, 200.0), &book);
        assert_eq!(planner.tail_moves(&book).len(), 1);
        let late = SiteModel { proven_wait: 220.0, dead_time: 20.0, ..model(16.0, 10.0, 220.0) };
        planner.set_model(SiteId(1), late, &book);
        assert_eq!(planner.tail_moves(&book).len(), 1);
    }

    #[test]
    fn a_draining_site_is_sent_nothing_and_keeps_the_jobs_waiting_there() {
        // Window 10 of 100 s runs with waits of 300 s: Little's law keeps
        // 30 waiting. 12 run (past the window) and 20 wait.
        let mut book = JobBook::new(40, 1, 3);
        let jobs = book.take(SiteId(0), 32);
        book.apply(SiteId(0), &SiteEvent::Submitted { jobs: jobs.clone(), at: 0.0 });
        for &job in &jobs[..12] {
            book.apply(SiteId(0), &SiteEvent::Started { job, at: 1.0 });
        }
        let mut planner = Planner::new(1);
        planner.set_model(SiteId(0), model(10.0, 100.0, 300.0), &book);
        assert_eq!(planner.room(SiteId(0), &book), 8, "healthy, the queue is topped up");
        let draining = SiteModel { draining: true, ..model(10.0, 100.0, 300.0) };
        planner.set_model(SiteId(0), draining, &book);
        assert_eq!(planner.room(SiteId(0), &book), 0, "nothing more while it drains");
        assert_eq!(planner.surplus(SiteId(0), &book), 0, "the jobs waiting keep their place");
    }

    #[test]
    fn the_users_max_jobs_and_max_idle_bound_the_plan() {
        // Little's law would keep 40 out at a window of 10 (30 waiting).
        let mut book = JobBook::new(100, 1, 3);
        let mut planner = Planner::new(1);
        let idle_capped = SiteModel { max_idle: Some(15.0), ..model(10.0, 100.0, 300.0) };
        planner.set_model(SiteId(0), idle_capped, &book);
        assert_eq!(planner.room(SiteId(0), &book), 15, "max_idle 15: no more waiting");
        let both = SiteModel { max_out: Some(12.0), ..idle_capped };
        planner.set_model(SiteId(0), both, &book);
        assert_eq!(planner.room(SiteId(0), &book), 12, "max_jobs 12: no more in all");
        // 20 already waiting (the limit was lowered since): the 5 past it
        // go, though the plan's own target of 40 would keep them.
        let jobs = book.take(SiteId(0), 20);
        book.apply(SiteId(0), &SiteEvent::Submitted { jobs, at: 0.0 });
        planner.set_model(SiteId(0), idle_capped, &book);
        assert_eq!(planner.room(SiteId(0), &book), 0);
        assert_eq!(planner.surplus(SiteId(0), &book), 5);
    }

    #[test]
    fn a_surplus_being_withdrawn_is_not_withdrawn_again() {
        // Window 10 of 100 s runs with waits of 300 s: 40 out is the target.
        // 80 wait: 40 too many, past the slack of half the queue kept ahead.
        let mut book = JobBook::new(80, 1, 3);
        let jobs = book.take(SiteId(0), 80);
        book.apply(SiteId(0), &SiteEvent::Submitted { jobs, at: 0.0 });
        let mut planner = Planner::new(1);
        planner.set_model(SiteId(0), model(10.0, 100.0, 300.0), &book);
        let surplus = planner.surplus(SiteId(0), &book);
        assert_eq!(surplus, 40);
        let idle: Vec<JobId> = book.idle_at(SiteId(0)).iter().rev().take(surplus as usize).copied().collect();
        assert_eq!(book.mark_withdrawing(SiteId(0), &idle).len(), 40);
        planner.refresh(SiteId(0), &book);
        assert_eq!(planner.surplus(SiteId(0), &book), 0, "the 40 on their way out are the surplus");
        assert_eq!(planner.room(SiteId(0), &book), 0, "nor is the site given more meanwhile");
    }

    #[test]
    fn the_tail_moves_for_the_last_of_many_waits_what_it_would_not_for_one() {
        // Per job a move gains 51 s of wait, less than the margin; but the
        // last of 12 waits of 95 s ends after 95 H(12) ≈ 295 s, and at the
        // taker the last of those it is given after 28 H(j).
        let mut book = JobBook::new(12, 2, 3);
        let mut planner = Planner::new(2);
        planner.set_model(SiteId(1), model(24.0, 28.0, 95.0), &book);
        let jobs = book.take(SiteId(1), 12);
        book.apply(SiteId(1), &SiteEvent::Submitted { jobs, at: 0.0 });
        planner.set_model(SiteId(0), model(38.0, 44.0, 28.0), &book);
        // The same two models, one job idle at the slow site instead of 12.
        let single = {
            let mut one = JobBook::new(1, 2, 3);
            let jobs = one.take(SiteId(1), 1);
            one.apply(SiteId(1), &SiteEvent::Submitted { jobs, at: 0.0 });
            planner.tail_moves(&one)
        };
        assert!(single.is_empty(), "one job alone gains less than the margin: {single:?}");
        let moves = planner.tail_moves(&book);
        assert_eq!(moves.len(), 1);
        let moved = moves[0].1.len();
        assert!((6..12).contains(&moved), "{moved} of 12 moved: most, not the last few");
    }

    #[test]
    fn a_queue_of_every_job_left_is_said_in_words_not_as_a_count() {
        // 10 jobs running, each 100 s, all succeed: an attempt ends every
        // 10 s, so 50 s of wait ahead is 5 jobs.
        let some = SiteModel { ahead: 50.0, ..model(10.0, 100.0, 50.0) };
        assert_eq!(some.waiting_ahead(), "5 waiting ahead");
        let all = SiteModel { ahead: EVERY_JOB_WAITS, ..model(10.0, 100.0, 50.0) };
        let said = all.waiting_ahead();
        assert!(said.contains("every job left") && !said.chars().any(|c| c.is_ascii_digit()), "{said}");
    }
}
