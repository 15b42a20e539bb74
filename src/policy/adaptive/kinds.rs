//! `adaptive` with several kinds of job: one controller per kind (a lane),
//! each the one-kind policy of the module above over its own kind's jobs.
//!
//! **Why one per kind.** A site's knee is a mix, not a count: its resource
//! serves C units of load, and a kind of load ℓ slows by `(1 − ℓ) + ℓ D(L)`
//! when the site's load L passes C (the model's "Job types"). Every
//! quantity a lane estimates is then its kind's own, at each site: the
//! healthy run time (a kind's speed there), the queue wait, the failure
//! rate, and the knee in jobs of that kind. The last is the kind's share of
//! C given what the other kinds load there, which is what the lane's test
//! measures: its runs slow only when the site's load passes C, whoever
//! loads it, and by its own ℓ. An I/O-bound lane therefore finds the knee
//! the CPU-bound jobs leave it, and a CPU-bound lane, whose runs barely
//! slow, fills the slots; each lane's planner routes its kind where its
//! jobs come back soonest. With one kind there is one lane, and that lane
//! is the policy.
//!
//! **Slots.** The kinds share a site's slots: each lane's window there is
//! bounded by what the others' windows leave (a kind held to its knee
//! leaves the rest of the slots to the others), and never below an equal
//! share among the kinds with jobs left (where each would fill them all).
//! Without the bound, two lanes each filling the slots queued half their
//! jobs behind the other's, and each planned with slots it did not have.
//! What a kind wants at a site is its window there or its jobs left,
//! whichever is fewer: as its jobs run out, the others' shares grow, at
//! each of the site's events (a lane that holds its level, as a warm one
//! does, tells no new window), and a kind whose share grew looks at once.
//! A share at or under a kind's floor that is still its first window's
//! holds the kind there: no probe above can run to prove that floor slowed
//! (an I/O kind held to half the slots, past its knee, stayed there until
//! the CPU kind's jobs ran out), so it is checked from the level below, as
//! where the first window is all a site holds. The check weighs the runs
//! below against the floor's under what the other kinds load the site
//! with, so that load is held: one kind of a site checks at a time
//! (another's drain would speed the runs by its drop), and the slots the
//! check drains stay the checking kind's against kinds whose own floors
//! are unproven (a guess, or a first window's runs never compared with a
//! level below), which may be past their knees (the I/O kind took a CPU
//! kind's drained slots and ran 16 where its knee was 6). And only where the
//! site refills within a run (its mean wait under the kind's mean run
//! there): elsewhere what the check drains comes back a wait later, not a
//! run, and the check costs more than the test it makes.
//! A share is granted as the slots free: where a site starts whatever it
//! is sent at once (free CPUs past our slots, told by its first cohort
//! starting together), a kind whose share shrank runs its jobs past it to
//! their end, and the kind its share went to gets those slots only as
//! they free, so the kinds together stay within the declared slots (two
//! kinds on 24 slots of a 48-CPU site ran 27–28). Elsewhere the site's own
//! queue holds the taker's jobs until then, and they may wait there ahead.
//! What holds a kind at its floor (above) is its share, not the slots
//! granted it so far: those grow as the others' jobs end, so its probes
//! above can run (taken for a hold, they sent an I/O kind whose knee was 6
//! from a floor of 4 to a check at 2).
//! Every lane's first windows are known before any submits (a warm run's
//! from memory), so the shares are set before the first lane plans:
//! planned one after the other, each with the slots the ones before had
//! not yet told of, two kinds each sent a site its every slot.
//!
//! **What carries over between kinds.** A lane's probes climb one step
//! per verdict of its own, so a kind of long runs would climb at a run
//! time per probe where another kind's quick verdicts show the site far
//! from loaded. Counted as if every job loaded the resource as much as
//! any could (the one-kind model, where the loads are all 1), a site
//! judged healthy with `H` of our jobs of every kind running holds `H`
//! jobs: while a lane's probes climb (no ceiling known), its probe goes at
//! least to `H` less what the other kinds run there now. It is a probe,
//! judged by the lane's own test like any other; what carries over is
//! only how far the next one may go. A light kind is thus held back by
//! nothing the one-kind policy would not hold it to, and a heavy kind
//! risks no more than a probe's overshoot.
//!
//! **A ceiling under another kind's load.** A lane's ceiling at a site is
//! the level of its kind seen degraded beside what the other kinds ran
//! there then: its knee is C less their load, over its own ℓ. When most
//! of that load leaves (a kind of short runs took the site past its knee,
//! then ran out), the knee in this kind's jobs moves up by what left, and
//! a ceiling held for `reprobe_after` runs holds the kind under a knee
//! that is gone. The loads are unknown, so it is counted in jobs, and only
//! the jobs of kinds seen slowed at the site count: a kind of load ℓ slows
//! by `1 + ℓ (D − 1)`, so a kind never seen slowed may be as light as a
//! CPU-bound one (ℓ = 0.02), and its leaving moves no knee. The ceiling
//! goes stale where such jobs, counted at its verdict, fell by
//! `probe_gain − 1` times the ceiling: had they loaded as much as this
//! kind's, the knee moved up a probe's step or more. A stale ceiling
//! becomes one a re-probe assumes (`probe_gain` × it) and a level held is
//! re-probed at once; the lane's own test judges the probe, so a wrong
//! guess costs one probe's overshoot, and never while a verdict is being
//! refined or its floor checked (draining, rechecking). With one kind
//! nothing else loads the site and no ceiling goes stale.
//!
//! **Not learned (yet).** Each kind's load relative to the others', and
//! the site's capacity in load: a lane knows the others only through its
//! own runs and the count above. So a kind new at a site starts from the
//! first window (memory carries over only what is the site's: its queue
//! wait and how it starts jobs, its failures, whether it started
//! anything); and a light kind's
//! knee is its share of what the heavy kinds leave, not the mix that ends
//! every kind soonest (the oracle's).
//!
//! **Decisions.** Each lane's verdicts and windows are told with its kind's
//! name ([`Decision::job_kind`]); a site's window of all kinds together (the
//! lanes' windows and capacities added) is told with none.
//!
//! **Memory.** Each lane reads and keeps its kind's own (the kind's key:
//! a submit description's fingerprint or given name, a scenario's kind).
//!
//! **What is shared.** The run's book (what the engine reads) mirrors the
//! lanes' books: every event goes to the run's book and, in the kind's own
//! numbers ([`KindNumbers`]), to the lane of the job it is about; a site's
//! grid resource going down or up goes to every lane. The lanes' actions
//! come back in the run's numbers and are marked in the run's book.
//!
//! **Cost.** An input goes to one lane (a site-wide event or a tick to each
//! lane due); per lane, the cost of the one-kind policy over its jobs.

use super::{Adaptive, Params};
use crate::policy::{
    Action, CapacityMemory, Decision, DecisionKind, Input, JobBook, JobId, JobState, JobTypeId, JobTypes,
    KindNumbers, Policy, RunSpec, SiteClass, SiteId, SiteView, Time,
};

#[derive(serde::Serialize, serde::Deserialize)]
pub struct ByKind {
    /// Every job of the run, whatever its kind: what the engine reads.
    book: JobBook,
    numbers: KindNumbers,
    /// Each kind's name, which every reason given for an action begins with.
    names: Vec<String>,
    /// One per kind, in the run's order of kinds.
    lanes: Vec<Adaptive>,
    /// Per kind and site, the window and capacity its lane told last: a
    /// site's decisions say what all its kinds may run together.
    told: Vec<Vec<(f64, Option<f64>)>>,
    /// Per kind and site, the window its lane holds there: the one told
    /// last, or before any is told, its first. What the kind wants there
    /// counts from it.
    windows: Vec<Vec<f64>>,
    /// Per site, the most of our jobs of every kind it ran when one kind
    /// was judged healthy there.
    healthy_with: Vec<f64>,
    /// Per kind and site, how many jobs of each other kind seen slowed
    /// there ran there at the kind's last degraded verdict: the load its
    /// ceiling was seen under.
    ceiling_under: Vec<Vec<Option<Vec<f64>>>>,
    /// Per kind and site, whether a verdict there found the kind's runs
    /// slowed: a kind that loads the site's resource.
    slowed: Vec<Vec<bool>>,
    /// `probe_gain`: a ceiling seen under the other kinds' jobs goes stale
    /// once as many of them as a probe's step above it have left.
    gain: f64,
    /// Each site's slots, where sites.toml gives them.
    slots: Vec<Option<f64>>,
    /// Each lane's decisions, marked with its kind, and each site's window
    /// of all kinds together (see [`super::decisions_as_json`]).
    #[serde(with = "super::decisions_as_json")]
    decided: Vec<Decision>,
}

/// Each kind's part of a site's own `initial_window`. The operator's
/// number is a level below the site's knee in jobs of any kind, so the
/// kinds' first cohorts together stay within it: equal parts, a kind with
/// fewer jobs than its part leaving the rest to the others, and at least
/// one job each (a kind must run to be learned). The policy's own
/// `initial_window` is each kind's instead: a guess, not a fact of the
/// site, and split among the kinds it cost the typed family a quarter of
/// its makespan in ramp (docs/experiments.md, "each kind's first window
/// its part of the site's").
pub(super) fn shares_of(window: u32, jobs: &[u64]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&t| jobs[t]);
    let mut shares = vec![0; jobs.len()];
    let mut left = u64::from(window);
    for (taken, &t) in order.iter().enumerate() {
        let part = left / (order.len() - taken) as u64;
        let share = part.min(jobs[t]).max(1);
        shares[t] = u32::try_from(share).unwrap_or(u32::MAX);
        left = left.saturating_sub(share);
    }
    shares
}

impl ByKind {
    pub fn new(spec: &RunSpec, params: &Params) -> Self {
        let numbers = KindNumbers::new(&spec.types, spec.n_jobs);
        let jobs: Vec<u64> = spec.types.ids().map(|t| numbers.jobs_of(t).len() as u64).collect();
        let operators: Vec<Option<Vec<u32>>> =
            spec.sites.iter().map(|info| info.initial_window.map(|w| shares_of(w, &jobs))).collect();
        let lanes = spec
            .types
            .ids()
            .map(|t| {
                let mut sites = spec.sites.clone();
                for (info, shares) in sites.iter_mut().zip(&operators) {
                    if let Some(shares) = shares {
                        info.initial_window = Some(shares[t.index()]);
                    }
                }
                let lane = RunSpec {
                    n_jobs: jobs[t.index()],
                    types: JobTypes::single(jobs[t.index()]),
                    sites,
                    memory: spec.memory.clone(),
                    kind_keys: vec![spec.kind_key(t).to_string()],
                    max_attempts: spec.max_attempts,
                };
                Adaptive::new(&lane, params)
            })
            .collect();
        ByKind {
            book: JobBook::new(spec.n_jobs, spec.sites.len(), spec.max_attempts),
            numbers,
            names: spec.types.ids().map(|t| spec.types.name(t).to_string()).collect(),
            lanes,
            told: vec![vec![(0.0, None); spec.sites.len()]; spec.types.len()],
            windows: vec![vec![0.0; spec.sites.len()]; spec.types.len()],
            healthy_with: vec![0.0; spec.sites.len()],
            ceiling_under: vec![vec![None; spec.sites.len()]; spec.types.len()],
            slowed: vec![vec![false; spec.sites.len()]; spec.types.len()],
            gain: params.rules().gain,
            slots: spec.sites.iter().map(|info| info.slots.map(f64::from)).collect(),
            decided: Vec::new(),
        }
    }

    /// Lane `t`'s actions in the run's numbers, marked in the run's book.
    fn translate(&mut self, t: JobTypeId, actions: Vec<Action>, out: &mut Vec<Action>) {
        let global = |numbers: &KindNumbers, jobs: &[JobId]| -> Vec<JobId> {
            jobs.iter().map(|&j| numbers.global(t, j)).collect()
        };
        let kind = &self.names[t.index()];
        for mut action in actions {
            action.why_mut().insert_str(0, &format!("{kind}: "));
            match action {
                Action::Submit { site, jobs, why } => {
                    let jobs = self.book.take_these(site, &global(&self.numbers, &jobs));
                    if !jobs.is_empty() {
                        out.push(Action::Submit { site, jobs, why });
                    }
                }
                Action::Remove { site, jobs, why } => {
                    let jobs = self.book.mark_removing(site, &global(&self.numbers, &jobs));
                    if !jobs.is_empty() {
                        out.push(Action::Remove { site, jobs, why });
                    }
                }
                Action::Withdraw { site, jobs, why } => {
                    let jobs = self.book.mark_withdrawing(site, &global(&self.numbers, &jobs));
                    if !jobs.is_empty() {
                        out.push(Action::Withdraw { site, jobs, why });
                    }
                }
                Action::GiveUp { job, why } => {
                    let job = self.numbers.global(t, job);
                    // Out of attempts, the run's book gave it up on the
                    // same event; stranded, the lane gave it up from its pool.
                    if self.book.give_up(job) || *self.book.state(job) == JobState::GivenUp {
                        out.push(Action::GiveUp { job, why });
                    }
                }
            }
        }
    }

    fn feed(&mut self, t: JobTypeId, now: Time, input: &Input, out: &mut Vec<Action>) {
        let actions = self.lanes[t.index()].handle(now, input);
        self.translate(t, actions, out);
        let mut widened = Vec::new();
        for d in self.lanes[t.index()].take_decisions() {
            if let DecisionKind::Verdict { healthy: true, .. } = d.kind {
                let i = d.site.index();
                let running = f64::from(self.book.counts(d.site).running);
                self.healthy_with[i] = self.healthy_with[i].max(running);
                for u in self.kinds() {
                    let own = f64::from(self.lanes[u.index()].book.counts(d.site).running);
                    let room = self.healthy_with[i] - (running - own);
                    if self.lanes[u.index()].widen_probe(i, room, now) {
                        widened.push(u);
                    }
                }
            }
            if let DecisionKind::Verdict { healthy: false, .. } = d.kind {
                let i = d.site.index();
                self.slowed[t.index()][i] = true;
                let under = self.loading(t.index(), i);
                self.ceiling_under[t.index()][i] = Some(under);
            }
            let own = Decision { job_kind: Some(self.names[t.index()].clone()), ..d.clone() };
            match d.kind {
                DecisionKind::Window { window, capacity } => {
                    self.told[t.index()][d.site.index()] = (window, capacity);
                    self.windows[t.index()][d.site.index()] = window;
                    widened.extend(self.share_slots(d.site.index(), d.at));
                    let kinds = self.told.iter().map(|per_site| per_site[d.site.index()]);
                    let (window, capacity) = kinds
                        .fold((0.0, Some(0.0)), |(w, c), (lw, lc)| (w + lw, c.zip(lc).map(|(c, lc)| c + lc)));
                    self.decided.push(own);
                    self.decided.push(Decision { kind: DecisionKind::Window { window, capacity }, ..d });
                }
                DecisionKind::Verdict { .. } => self.decided.push(own),
            }
        }
        // A controller whose probe widened looks at its sites again now (a
        // tick is its "look now").
        widened.sort();
        widened.dedup();
        for u in widened {
            self.feed(u, now, &Input::Tick, out);
        }
    }

    /// Shares site `i`'s slots among the kinds: each may fill what the
    /// others' windows leave (a kind held to its knee leaves the rest to
    /// the others), and at least an equal share of them among the kinds
    /// with jobs left (where every kind would fill them all).
    /// Returns the kinds whose share grew.
    fn share_slots(&mut self, i: usize, now: Time) -> Vec<JobTypeId> {
        let Some(slots) = self.slots[i] else { return Vec::new() };
        let left = |lane: &Adaptive| (lane.book.pool_len() + lane.book.out_total()) as f64;
        let wants: Vec<f64> = (self.lanes.iter().zip(&self.windows))
            .map(|(lane, windows)| windows[i].min(left(lane)))
            .collect();
        // A kind checking its floor from below keeps the floor's slots from
        // the kinds whose own floors are unproven (maybe past their knees,
        // so maybe heavy): its runs below are weighed against the floor's
        // under the load the others put on the site then.
        let kept: Vec<f64> = (self.lanes.iter().zip(&wants))
            .map(|(lane, &want)| lane.floor_checked(i).map_or(want, |floor| floor.min(left(lane)).max(want)))
            .collect();
        let kinds_left = wants.iter().filter(|&&w| w > 0.0).count().max(1) as f64;
        // Granted as the others' jobs out leave where the site starts at
        // once ("Slots" above).
        let together = self.lanes.iter().any(|lane| lane.starts_together(i));
        let out: Vec<f64> = (self.lanes.iter())
            .map(|lane| {
                let c = lane.book.counts(SiteId(i as u32));
                f64::from(c.submitting + c.idle + c.running + c.removing + c.withdrawing)
            })
            .collect();
        let mut grew = Vec::new();
        for t in 0..self.lanes.len() {
            let others = if self.lanes[t].floor_unproven(i) { &kept } else { &wants };
            let taken: f64 = others.iter().enumerate().filter(|&(u, _)| u != t).map(|(_, w)| w).sum();
            let entitled = (slots - taken).max(slots / kinds_left);
            let free = slots - out.iter().enumerate().filter(|&(u, _)| u != t).map(|(_, o)| o).sum::<f64>();
            let share = if together { entitled.min(free.max(out[t])) } else { entitled }.max(1.0);
            let others_checking =
                (self.lanes.iter().enumerate()).any(|(u, l)| u != t && l.floor_checked(i).is_some());
            if self.lanes[t].share_slots(i, share, entitled.max(1.0), others_checking, now) {
                grew.push(JobTypeId(t as u16));
            }
        }
        grew
    }

    /// How many jobs of each kind other than `t` seen slowed at site `i`
    /// run there now (none of the others).
    fn loading(&self, t: usize, i: usize) -> Vec<f64> {
        (self.lanes.iter().enumerate())
            .map(|(u, lane)| {
                let loads = u != t && self.slowed[u][i];
                if loads {
                    f64::from(lane.book.counts(SiteId(i as u32)).running)
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The kinds whose ceiling at site `i` was seen under the jobs of other
    /// kinds seen slowed there, `probe_gain − 1` times the ceiling of which
    /// have left since: that ceiling is re-probed ("A ceiling under another
    /// kind's load" above). Returns the kinds whose window grew.
    fn stale_ceilings(&mut self, i: usize, now: Time) -> Vec<JobTypeId> {
        let mut grew = Vec::new();
        for t in 0..self.lanes.len() {
            let Some(then) = &self.ceiling_under[t][i] else { continue };
            let left: f64 =
                then.iter().zip(self.loading(t, i)).map(|(then, now)| (then - now).max(0.0)).sum();
            if left < (self.gain - 1.0) * self.lanes[t].sites[i].ceiling {
                continue;
            }
            let Some(grown) = self.lanes[t].ceiling_stale(i, now) else { continue };
            self.ceiling_under[t][i] = None;
            if grown {
                grew.push(JobTypeId(t as u16));
            }
        }
        grew
    }

    fn kinds(&self) -> impl Iterator<Item = JobTypeId> {
        (0..self.lanes.len() as u16).map(JobTypeId)
    }
}

impl Policy for ByKind {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn handle(&mut self, now: Time, input: &Input) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::Site { site, event } => {
                // The lanes decide what a failure calls for; the run's book
                // keeps the record.
                self.book.apply(*site, event);
                for t in self.kinds().collect::<Vec<_>>() {
                    if let Some(local) = self.numbers.localize(t, event) {
                        self.feed(t, now, &Input::Site { site: *site, event: local }, &mut out);
                    }
                }
                // What a kind wants here shrinks as its jobs run out, with
                // no new window told: the others' shares follow it, and a
                // ceiling seen under the jobs that left may be stale.
                let mut look = self.share_slots(site.index(), now);
                look.extend(self.stale_ceilings(site.index(), now));
                look.sort();
                look.dedup();
                for u in look {
                    self.feed(u, now, &Input::Tick, &mut out);
                }
            }
            Input::Start => {
                // Each lane's first windows are known before any submits
                // (a warm run's from memory): the first lane to plan takes
                // its share, not every slot, and has nothing to withdraw.
                for (lane, windows) in self.lanes.iter().zip(&mut self.windows) {
                    for (site, window) in lane.sites.iter().zip(windows.iter_mut()) {
                        *window = site.window;
                    }
                }
                for i in 0..self.slots.len() {
                    self.share_slots(i, now);
                }
                for t in self.kinds().collect::<Vec<_>>() {
                    self.feed(t, now, input, &mut out);
                }
            }
            Input::Tick => {
                for t in self.kinds().collect::<Vec<_>>() {
                    if self.lanes[t.index()].next_deadline().is_some_and(|at| at <= now) {
                        self.feed(t, now, input, &mut out);
                    }
                }
            }
        }
        out
    }

    fn next_deadline(&self) -> Option<Time> {
        self.lanes.iter().filter_map(Adaptive::next_deadline).min_by(f64::total_cmp)
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    /// The site as all its kinds make it: their windows and capacities
    /// added, the soonest AgTime of any kind, and its best class (a site
    /// is fast if any kind runs fast there, unresponsive only if every
    /// kind finds it so).
    fn site_view(&self, site: SiteId) -> SiteView {
        let views: Vec<SiteView> = self.lanes.iter().map(|l| l.site_view(site)).collect();
        let class = [SiteClass::Fast, SiteClass::Slow, SiteClass::Unknown]
            .into_iter()
            .find(|c| views.iter().any(|v| v.class == *c))
            .unwrap_or(SiteClass::Unresponsive);
        SiteView {
            window: views.iter().map(|v| v.window).sum(),
            capacity: views.iter().map(|v| v.capacity).sum(),
            class,
            agtime: views.iter().filter_map(|v| v.agtime).min_by(f64::total_cmp),
        }
    }

    /// Each kind's memory of each site, under the kind's key.
    fn learned(&self) -> CapacityMemory {
        let mut learned = CapacityMemory::new();
        for lane in &self.lanes {
            for (site, kind, memory) in lane.learned().iter() {
                learned.insert(site, kind, memory.clone());
            }
        }
        learned
    }

    fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decided)
    }

    fn checkpoint(&self) -> Option<Vec<u8>> {
        postcard::to_stdvec(self).ok()
    }

    fn restore(&mut self, saved: &[u8]) -> Result<(), String> {
        let saved: ByKind = postcard::from_bytes(saved).map_err(|e| format!("unreadable: {e}"))?;
        let counts = |b: &ByKind| b.lanes.iter().map(|l| l.book.n_jobs()).collect::<Vec<_>>();
        if counts(&saved) != counts(self) {
            return Err(format!("it is of another run (jobs per kind {:?})", counts(&saved)));
        }
        let mut lanes = std::mem::take(&mut self.lanes).into_iter();
        *self = saved;
        // The user's limits are this run's sites.toml (as for one kind).
        for (lane, fresh) in self.lanes.iter_mut().zip(&mut lanes) {
            lane.take_limits_of(fresh);
        }
        Ok(())
    }
}
