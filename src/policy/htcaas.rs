//! `htcaas`: the job dispatch of HTCaaS on a cluster and a cloud (seed 003,
//! Algorithms 1 and 2), the baseline that splits each kind of job over the
//! sites by a ratio of its own and moves the ratios with the sites' queues.
//!
//! **What it knows.** A run's kinds are HTCaaS's metajobs: kind `t` is a
//! metajob of `n_t` tasks, all arriving at t = 0 (a run of one kind is one
//! metajob). Each kind starts from the ratio that "an empirical measurement"
//! found best for it: the paper runs each application alone at every split
//! 0, 0.1, …, 1 between the cluster and the cloud and keeps the split of
//! lowest elapsed time. cosched cannot run that experiment inside a run, so
//! the simulator's true model stands in for it ([`Truth`]), and for nothing
//! else: the elapsed time of `n` jobs of kind `t` alone at a site, every
//! one submitted at once, is its mean wait plus `⌈n / c⌉` runs at the
//! speed `c = min(n, slots)` running jobs of load `ℓ_t` get there
//! ([`SiteTruth::type_rate`](crate::policy::truth::SiteTruth::type_rate)), stretched by its failures. For two sites that
//! is the paper's grid search; for N sites the ten tenths go one at a time
//! to the site where the tenth would end soonest, which minimises the
//! largest elapsed time over the same grid (each site's time grows with its
//! share). A site where a kind never runs (a dead one) gets no share of it.
//!
//! **Algorithm 1 (dispatch).** Each metajob's tasks are assigned at once by
//! its kind's ratio, the first `N D₁` to the first site and so on (largest
//! remainders decide the odd task), and submitted: HTCaaS hands every task
//! to its resource's queue, which is what a Condor-G submission of them all
//! does. After the metajobs of an arrival are dispatched, the workload is
//! monitored (Algorithm 2). A task whose attempt failed comes in again as a
//! request of its kind: it goes to the site furthest below the kind's
//! current ratio of the tasks assigned so far, and the workload is
//! monitored again. (The over-provisioning ratio `r_{v/p}` of the
//! algorithm's first lines has no counterpart: the simulator's slots are
//! the cores.)
//!
//! **Algorithm 2 (workload monitoring).** The threshold `λ` is the mean
//! size of the `m` most recent metajobs, here the run's kinds (the paper
//! leaves `m` open; a run's metajobs are all it has). `W_s` is the tasks
//! waiting at site `s` (submitted, not started: `condor_q`'s idle count).
//! For two sites, cluster and cloud, read literally: if both queues reach
//! `λ`, every ratio returns to its measured value; if only the cluster's
//! does, each kind's cluster share `D` falls by `k = 0.1`; if only the
//! cloud's does, it rises by `k` (a share stays within [0, 1]). For N sites:
//! every site whose queue reaches `λ` gives `k` of each kind's share (or
//! what it has) to the sites below `λ` that the kind can run at, split in
//! proportion to their slots; if every site's queue reaches `λ`, the ratios
//! return to their measured values. With two sites this is the literal
//! reading.
//!
//! No window, no throttle: like bulk submission, every task waits in its
//! site's queue, and a site runs as many as it has slots.

use super::book::Change;
use super::bulk::proportional_shares;
use super::{
    Action, Input, JobBook, JobId, JobTypeId, JobTypes, Policy, RunSpec, SiteId, SiteView, Time, Truth,
};

/// The step by which Algorithm 2 moves a ratio (the paper's `k`).
pub const STEP: f64 = 0.1;

/// The grid of the measured ratios: tenths, as in the paper's experiment.
const TENTHS: u32 = 10;

pub struct Htcaas {
    book: JobBook,
    kinds: JobTypes,
    /// Per kind, the share of its tasks each site is given (summing to 1
    /// over the sites, where the kind runs anywhere).
    ratio: Vec<Vec<f64>>,
    /// The ratios the measurement found: where Algorithm 2 returns to.
    measured: Vec<Vec<f64>>,
    /// Per kind, the sites the measurement found it runs at.
    runs_at: Vec<Vec<bool>>,
    /// Per kind and site, tasks assigned so far (resubmissions included).
    assigned: Vec<Vec<u64>>,
    /// Slots per site: how a share moved to several sites is split.
    slots: Vec<f64>,
    /// The threshold `λ`: the mean size of the recent metajobs.
    threshold: f64,
}

impl Htcaas {
    pub fn new(spec: &RunSpec, truth: &Truth) -> Self {
        let n_sites = spec.sites.len();
        let kinds = spec.types.clone();
        let mut measured = Vec::new();
        let mut runs_at = Vec::new();
        for t in kinds.ids() {
            let (ratio, runs) = measure(truth, t, kinds.count(t));
            measured.push(ratio);
            runs_at.push(runs);
        }
        let sizes: Vec<f64> = kinds.ids().map(|t| kinds.count(t) as f64).collect();
        Htcaas {
            book: JobBook::new(spec.n_jobs, n_sites, spec.max_attempts),
            ratio: measured.clone(),
            measured,
            runs_at,
            assigned: vec![vec![0; n_sites]; kinds.len()],
            slots: truth.sites.iter().map(|s| f64::from(s.slots.max(1))).collect(),
            threshold: sizes.iter().sum::<f64>() / sizes.len() as f64,
            kinds,
        }
    }

    /// Kind `t`'s current share of each site.
    pub fn ratio(&self, t: JobTypeId) -> &[f64] {
        &self.ratio[t.index()]
    }

    /// Algorithm 1 for the metajobs arriving at the start: every kind's
    /// tasks assigned by its ratio and submitted.
    fn dispatch_all(&mut self, actions: &mut Vec<Action>) {
        let n_sites = self.slots.len();
        let mut per_site: Vec<Vec<JobId>> = vec![Vec::new(); n_sites];
        for t in self.kinds.ids() {
            let tasks: Vec<JobId> =
                (0..self.book.n_jobs()).map(JobId).filter(|&j| self.kinds.of(j) == t).collect();
            let shares = proportional_shares(tasks.len() as u64, &self.ratio[t.index()]);
            let mut next = tasks.iter();
            for (s, &share) in shares.iter().enumerate() {
                per_site[s].extend(next.by_ref().take(share as usize));
                self.assigned[t.index()][s] += share;
            }
        }
        for (s, jobs) in per_site.into_iter().enumerate() {
            let site = SiteId(s as u32);
            let jobs = self.book.take_these(site, &jobs);
            if !jobs.is_empty() {
                actions.push(Action::Submit { site, jobs, why: "htcaas: each kind by its ratio".into() });
            }
        }
    }

    /// Algorithm 1 for a task back from a failed attempt: the site furthest
    /// below its kind's ratio of the tasks assigned so far.
    fn resubmit(&mut self, job: JobId, actions: &mut Vec<Action>) {
        let t = self.kinds.of(job).index();
        let total: u64 = self.assigned[t].iter().sum::<u64>() + 1;
        let deficit = |s: usize| self.ratio[t][s] * total as f64 - self.assigned[t][s] as f64;
        // A site that held this job for a cause of its own is no choice;
        // where every site its ratio names did, any other site is.
        let open = |s: usize| self.runs_at[t][s] && !self.book.barred_at(job, SiteId(s as u32));
        let best = (0..self.slots.len())
            .filter(|&s| open(s) && self.ratio[t][s] > 0.0)
            .max_by(|&a, &b| deficit(a).total_cmp(&deficit(b)).then(b.cmp(&a)))
            .or_else(|| (0..self.slots.len()).find(|&s| open(s)));
        let Some(s) = best else { return };
        let site = SiteId(s as u32);
        let jobs = self.book.take_these(site, &[job]);
        if !jobs.is_empty() {
            self.assigned[t][s] += 1;
            actions.push(Action::Submit {
                site,
                jobs,
                why: "htcaas: a failed task, by its kind's ratio".into(),
            });
        }
    }

    /// Algorithm 2 (module docs).
    fn monitor(&mut self) {
        let n_sites = self.slots.len();
        let waiting = |s: usize| {
            let c = self.book.counts(SiteId(s as u32));
            f64::from(c.submitting + c.idle)
        };
        let live: Vec<usize> = (0..n_sites).filter(|&s| self.runs_at.iter().any(|r| r[s])).collect();
        let over: Vec<usize> = live.iter().copied().filter(|&s| waiting(s) >= self.threshold).collect();
        if over.is_empty() {
            return;
        }
        if over.len() == live.len() {
            self.ratio = self.measured.clone();
            return;
        }
        for t in 0..self.ratio.len() {
            let under: Vec<usize> =
                live.iter().copied().filter(|&s| self.runs_at[t][s] && !over.contains(&s)).collect();
            let weight: f64 = under.iter().map(|&s| self.slots[s]).sum();
            if under.is_empty() || weight <= 0.0 {
                continue;
            }
            for &s in &over {
                let given = STEP.min(self.ratio[t][s]);
                self.ratio[t][s] -= given;
                for &u in &under {
                    self.ratio[t][u] = (self.ratio[t][u] + given * self.slots[u] / weight).min(1.0);
                }
            }
        }
    }
}

/// The ratio the paper's offline experiment would find for kind `t` of
/// `n` tasks (module docs), and the sites where the kind runs at all.
fn measure(truth: &Truth, t: JobTypeId, n: u64) -> (Vec<f64>, Vec<bool>) {
    let kind = truth.types.get(t.index());
    let (work, load) = kind.map_or((truth.base_runtime, 1.0), |k| (k.base_runtime, k.load));
    let elapsed = |s: usize, tasks: f64| -> f64 {
        let p = &truth.sites[s];
        if tasks <= 0.0 {
            return 0.0;
        }
        let running = tasks.min(f64::from(p.slots)).max(1.0);
        let c = p.capacity_at(0.0);
        let rate = p.type_rate(t.index(), load, load * running, c);
        if p.dead || rate <= 0.0 {
            return f64::INFINITY;
        }
        let attempts = 1.0 / (1.0 - p.p_fail).max(0.05);
        p.wait_mean + (tasks / running).ceil() * work / rate * attempts
    };
    let n_sites = truth.sites.len();
    let runs: Vec<bool> = (0..n_sites).map(|s| elapsed(s, 1.0).is_finite()).collect();
    let mut tenths = vec![0u32; n_sites];
    for _ in 0..TENTHS {
        let at = |s: usize, q: u32| elapsed(s, n as f64 * f64::from(q) / f64::from(TENTHS));
        let best = (0..n_sites)
            .filter(|&s| runs[s])
            .min_by(|&a, &b| at(a, tenths[a] + 1).total_cmp(&at(b, tenths[b] + 1)).then(a.cmp(&b)));
        let Some(s) = best else { break };
        tenths[s] += 1;
    }
    (tenths.iter().map(|&q| f64::from(q) / f64::from(TENTHS)).collect(), runs)
}

impl Policy for Htcaas {
    fn name(&self) -> &'static str {
        "htcaas"
    }

    fn handle(&mut self, _now: Time, input: &Input) -> Vec<Action> {
        let mut actions = Vec::new();
        match input {
            Input::Start => {
                self.dispatch_all(&mut actions);
                self.monitor();
            }
            Input::Site { site, event } => {
                let change = self.book.apply(*site, event);
                actions.extend(self.book.after_failure(*site, &change));
                let back = match change {
                    Change::Returned { jobs } => jobs,
                    Change::Removed { job } | Change::Failed { job, held: false, exhausted: false, .. } => {
                        vec![job]
                    }
                    _ => Vec::new(),
                };
                if !back.is_empty() {
                    for job in back {
                        self.resubmit(job, &mut actions);
                    }
                    self.monitor();
                }
                if self.book.any_barred() {
                    // htcaas closes no site: a job every site held is given up.
                    actions.extend(self.book.give_up_stranded(&vec![true; self.slots.len()]));
                }
            }
            Input::Tick => {}
        }
        actions
    }

    fn next_deadline(&self) -> Option<Time> {
        None
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        let assigned = self.assigned.iter().map(|a| a[site.index()]).sum::<u64>();
        SiteView { window: assigned.min(u64::from(u32::MAX)) as u32, ..SiteView::default() }
    }
}
