//! The site model of `shared/scenarios/README.md`, pure: no tokio, no clock,
//! no I/O. The simulator drives it in tokio's paused clock; the fake HTCondor
//! drives it from a plain loop in scaled real time; the oracle reads its
//! parameters. Its parameters ([`SiteParams`]) live in [`crate::site_model`],
//! beside sites.toml's reader, which reads them too.
//!
//! # The model of several kinds of job
//! A scenario runs one kind of job, or several at once (`types`). Kind `t`
//! has `n_t` jobs of work `base_runtime_t × U(1 − jitter_t, 1 + jitter_t)`
//! and a load `ℓ_t ∈ [0, 1]`: the share of its uncontended run time spent on
//! the site's shared resource (1 for today's I/O-bound jobs). At a site:
//! - the capacity C is counted in load; with `L = Σ ℓ` over our running
//!   jobs there, the resource slows by `D(L) = 1` if `L ≤ C`, else
//!   `(L/C)(1 + β (L − C)/C)`;
//! - a running job of kind `t` progresses at
//!   `speed · type_speed[t] / ((1 − ℓ_t) + ℓ_t D(L))`: its own computing is
//!   untouched, its share on the resource is slowed by `D`.
//!
//! One kind of load 1 is the single-kind model, `rate(n)`, to the bit
//! ([`SiteTruth::type_rate`]). Slots are shared by every kind, in one FIFO.
//!
//! Jobs are numbered in the order the submitter's pool holds them: the kinds
//! interleaved evenly, job `i` of kind `t` at key `(i + 0.5)/n_t`, in key
//! order, ties in the order of the kinds. So a policy that takes jobs from
//! the pool in index order (bulk's split by slots) gives every site the same
//! mix. One kind is numbered as it always was.
//!
//! Randomness comes from a hand-written generator with one stream per concern
//! (job sizes; per site: waits, failures), so a seed means the same job sizes
//! for every policy and the same numbers across crate upgrades. Job sizes are
//! drawn in job order, one draw per job whatever its kind.

use crate::policy::{JobTypeId, SiteTruth};
pub use crate::site_model::{Capacity, SiteParams};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One kind of job of a scenario (the README's `types`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobType {
    pub name: String,
    pub n_jobs: u64,
    /// Mean work of a job, seconds at speed 1.
    pub base_runtime: f64,
    /// Work is `base_runtime × U(1 − jitter, 1 + jitter)`.
    #[serde(default)]
    pub jitter: f64,
    /// Share of an uncontended run spent on the site's shared resource.
    pub load: f64,
}

impl JobType {
    /// The one kind of a scenario without `types`: load 1.
    pub fn single(n_jobs: u64, base_runtime: f64, jitter: f64) -> JobType {
        JobType { name: crate::policy::jobtype::SINGLE_TYPE.into(), n_jobs, base_runtime, jitter, load: 1.0 }
    }
}

/// The kinds every site model of a simulated grid made from a sites file
/// knows (`--simulate`'s fake pool, the daemon's grid), in the models'
/// order: first `job`, the kind of a run of one submit description (load 1
/// unless `[simulate.kinds]` declares it), then the declared kinds by name.
/// Their counts and sizes are the runs'; only names and loads matter here.
pub fn declared_kinds(declared: &BTreeMap<String, crate::site_model::KindModel>) -> Vec<JobType> {
    let single = crate::policy::jobtype::SINGLE_TYPE;
    let kind = |name: &str, load: f64| JobType {
        name: name.into(),
        n_jobs: 0,
        base_runtime: 1.0,
        jitter: 0.0,
        load,
    };
    std::iter::once(kind(single, declared.get(single).map_or(1.0, |k| k.load)))
        .chain(declared.iter().filter(|(n, _)| *n != single).map(|(n, k)| kind(n, k.load)))
        .collect()
}

/// The index in [`declared_kinds`] of a run's kind named `name`, matched by
/// name; where the grid declares no kinds every kind is the one of load 1.
/// `Err`: the grid declares kinds, not this one; the message says what to
/// do (`file` is the sites file that declares them).
pub fn declared_kind(kinds: &[JobType], name: &str, file: &std::path::Path) -> Result<usize, String> {
    match kinds.iter().position(|k| k.name == name) {
        Some(i) => Ok(i),
        None if kinds.len() == 1 => Ok(0),
        None => Err(format!(
            "{}: the simulated grid declares the kinds {} in [simulate.kinds], not `{name}`; declare it there \
             with its load (`{name} = {{ load = 1.0 }}` for an I/O-bound job, 0 for one that never touches \
             the site's shared resource), or give the run a declared kind",
            file.display(),
            kinds[1..].iter().map(|k| format!("`{}`", k.name)).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// One scenario of a scenarios file: its kinds of job and its sites.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub desc: String,
    /// At least one; one of load 1 for a scenario written without `types`.
    pub types: Vec<JobType>,
    pub sites: Vec<SiteParams>,
}

impl Scenario {
    /// A scenario of one kind of job, as scenarios without `types` are.
    pub fn single(
        desc: impl Into<String>,
        n_jobs: u64,
        base_runtime: f64,
        jitter: f64,
        sites: Vec<SiteParams>,
    ) -> Scenario {
        Scenario { desc: desc.into(), types: vec![JobType::single(n_jobs, base_runtime, jitter)], sites }
    }

    /// Jobs of every kind.
    pub fn n_jobs(&self) -> u64 {
        self.types.iter().map(|t| t.n_jobs).sum()
    }

    /// Mean work of a job over every kind, seconds at speed 1 (of one kind:
    /// its `base_runtime`, exactly).
    pub fn base_runtime(&self) -> f64 {
        match self.types.as_slice() {
            [one] => one.base_runtime,
            types => {
                let n = self.n_jobs().max(1) as f64;
                types.iter().map(|t| t.n_jobs as f64 * t.base_runtime).sum::<f64>() / n
            }
        }
    }

    /// The kinds' names, in order.
    pub fn type_names(&self) -> Vec<&str> {
        self.types.iter().map(|t| t.name.as_str()).collect()
    }

    /// Sets the number of jobs of a scenario of one kind (a test's shorter
    /// run of a named scenario).
    ///
    /// # Panics
    /// If the scenario has several kinds: which kind would change is not said.
    pub fn set_n_jobs(&mut self, n_jobs: u64) {
        assert_eq!(self.types.len(), 1, "set_n_jobs on a scenario of several kinds");
        self.types[0].n_jobs = n_jobs;
    }
}

/// A scenario as a file writes it: one kind (`n_jobs`, `base_runtime`,
/// `jitter`) or several (`types`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScenarioText {
    #[serde(default)]
    desc: String,
    n_jobs: Option<u64>,
    base_runtime: Option<f64>,
    jitter: Option<f64>,
    types: Option<Vec<JobType>>,
    sites: Vec<SiteParams>,
}

impl TryFrom<ScenarioText> for Scenario {
    type Error = String;

    fn try_from(text: ScenarioText) -> Result<Scenario, String> {
        let ScenarioText { desc, n_jobs, base_runtime, jitter, types, sites } = text;
        let types = match (types, n_jobs, base_runtime) {
            (Some(types), None, None) if jitter.is_none() => types,
            (Some(_), ..) => {
                return Err("has both `types` and `n_jobs`/`base_runtime`/`jitter`: `types` replaces them \
                            (give each kind its own n_jobs, base_runtime and jitter)"
                    .into())
            }
            (None, Some(n), Some(base)) => vec![JobType::single(n, base, jitter.unwrap_or(0.0))],
            (None, None, _) => return Err("needs `n_jobs` (or `types`, a list of kinds of job)".into()),
            (None, _, None) => return Err("needs `base_runtime` (or `types`, a list of kinds of job)".into()),
        };
        Ok(Scenario { desc, types, sites })
    }
}

/// A small deterministic generator (xoshiro256**, seeded through SplitMix64).
/// Hand-written so that a seed means the same numbers forever, whatever
/// version of any crate is in the lock file.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// The stream `stream` of `seed`: different streams are independent, so
    /// drawing more from one never shifts another.
    pub fn stream(seed: u64, stream: u64) -> Self {
        let mut mixed_stream = stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut x = seed ^ splitmix64(&mut mixed_stream);
        let s = [splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x)];
        Rng { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with the given mean (0 for a mean of 0).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        if mean <= 0.0 {
            return 0.0;
        }
        -mean * (1.0 - self.uniform()).ln()
    }
}

/// Stream numbers, one per concern, so that e.g. the job sizes do not depend
/// on how many waits a policy caused to be drawn.
const STREAM_JOB_WORK: u64 = 1;
const STREAM_WAITS: u64 = 2;
const STREAM_FAILURES: u64 = 3;
const STREAM_HOLDS: u64 = 4;
const STREAM_SITE_BASE: u64 = 1000;

/// The seed of site number `index` of a run seeded with `seed` (what
/// [`SiteSim::new`] should be given so that every consumer of the model — the
/// simulator and the fake HTCondor — draws the same waits for the same seed).
pub fn site_seed(seed: u64, index: usize) -> u64 {
    Rng::stream(seed, STREAM_SITE_BASE + index as u64).next_u64()
}

/// Every job of `scenario` in job order: its kind and its work (seconds at
/// speed 1), `base_runtime × U(1 − jitter, 1 + jitter)` of its kind. The
/// same for every policy. Kinds are interleaved as the module doc says.
pub fn jobs(scenario: &Scenario, seed: u64) -> (Vec<JobTypeId>, Vec<f64>) {
    let kinds = interleave(&scenario.types.iter().map(|t| t.n_jobs).collect::<Vec<_>>());
    let mut rng = Rng::stream(seed, STREAM_JOB_WORK);
    let work = kinds
        .iter()
        .map(|k| {
            let t = &scenario.types[k.index()];
            let u = rng.uniform();
            t.base_runtime * (1.0 - t.jitter + 2.0 * t.jitter * u)
        })
        .collect();
    (kinds, work)
}

/// The work of every job of `scenario`, in job order ([`jobs`]).
pub fn job_work(scenario: &Scenario, seed: u64) -> Vec<f64> {
    jobs(scenario, seed).1
}

pub use crate::policy::jobtype::interleave;

/// Names one attempt of a job at a site; the caller keeps them unique.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttemptId(pub u64);

/// What happened to an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelEvent {
    /// It got one of our slots and began running.
    Started,
    /// It ran all its work.
    Finished,
    /// It was chosen to fail: it ran part of its work and ended failed/held.
    Failed,
}

/// The first multiple of `period` at or after `t` (`t` itself for a period
/// of 0). A time within rounding of a multiple is that multiple, so that a
/// cycle's own time maps to itself.
pub fn next_multiple(t: f64, period: f64) -> f64 {
    if period <= 0.0 {
        return t;
    }
    let cycles = (t / period - 1e-9).ceil().max(0.0);
    (cycles * period).max(t)
}

/// Orders non-negative finite floats by their bits (which, for those, is the
/// numeric order), so they can key a `BTreeSet`.
fn key(x: f64) -> u64 {
    debug_assert!(x >= 0.0 && x.is_finite(), "model time/progress {x}");
    x.max(0.0).to_bits()
}

#[derive(Clone, Copy, Debug)]
enum AttemptState {
    /// Serving its extra queue wait until `eligible_at`.
    Waiting { eligible_at: f64 },
    /// Never eligible: the site is dead.
    Stuck,
    /// Eligible, in the FIFO for one of our slots.
    Queued,
    /// Running; done when the site's progress counter reaches `target`.
    Running { target: f64, fails: bool },
}

#[derive(Clone, Debug)]
struct Attempt {
    work: f64,
    /// Index of its kind in the site's [`SiteSim::kinds`].
    kind: usize,
    state: AttemptState,
}

/// What a site keeps per kind of job: every running job of a kind
/// progresses at one rate, so the kind integrates one progress counter.
#[derive(Clone, Debug)]
struct KindSim {
    /// Share of an uncontended run spent on the shared resource.
    load: f64,
    /// Running attempts of this kind by progress target.
    running: BTreeSet<(u64, AttemptId)>,
    /// ∫ rate dt up to the site's `now`.
    progress: f64,
    /// Rate of every running job of this kind at `now`.
    rate: f64,
}

/// One simulated site: our slots, the other users' queue wait, the shared
/// resource with its knee, failures, capacity windows.
///
/// Event-driven. Processor sharing is kept cheap with a progress counter per
/// kind of job: all running jobs of a kind progress at the same rate, so the
/// site integrates `progress = ∫ rate dt` once per kind and each running job
/// just remembers the counter value at which it is done. A change of the
/// running set or of C changes the rates, not the stored targets, so every
/// change costs O(kinds + log running).
#[derive(Clone, Debug)]
pub struct SiteSim {
    params: SiteTruth,
    waits: Rng,
    failures: Rng,
    attempts: BTreeMap<AttemptId, Attempt>,
    /// Waiting attempts by the time they become eligible.
    waiting: BTreeSet<(u64, AttemptId)>,
    /// Eligible attempts in arrival order; removed ones are skipped lazily.
    queue: VecDeque<AttemptId>,
    queued: u32,
    stuck: u32,
    /// Running attempts of every kind.
    running: u32,
    /// Per kind of job, in the scenario's order.
    kinds: Vec<KindSim>,
    /// The model's own time: everything up to here has been accounted for.
    now: f64,
    /// Instants where C changes, ascending.
    boundaries: Vec<f64>,
    /// A slot was freed by a removal at this time and the queue must be looked at.
    fill_due: Option<f64>,
    /// Seconds between negotiation cycles (0: jobs start as soon as they may).
    negotiation_period: f64,
    /// Seconds between the gridmanager's polls, for the backend that reports
    /// this site's events (the model itself runs on the site's own time).
    poll_period: f64,
    /// Share of jobs held here for a cause of the site, and the seed that
    /// picks them (by job, so a job held here is held on every attempt).
    p_hold: f64,
    hold_seed: u64,
}

impl SiteSim {
    /// A site at time 0 with nothing submitted, running one kind of job of
    /// load 1. `seed` should come from [`site_seed`].
    pub fn new(params: &SiteParams, seed: u64) -> Self {
        Self::with_types(params, &[JobType::single(0, 1.0, 0.0)], seed)
    }

    /// A site at time 0 with nothing submitted, running the kinds `types`
    /// (submit each attempt with its kind's index in this list).
    pub fn with_types(params: &SiteParams, types: &[JobType], seed: u64) -> Self {
        let mut boundaries: Vec<f64> =
            params.cap_windows.iter().flat_map(|w| [w[0], w[1]]).filter(|t| t.is_finite()).collect();
        boundaries.sort_by(f64::total_cmp);
        boundaries.dedup();
        let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
        let (negotiation_period, poll_period) = (params.negotiation_period, params.poll_period);
        let p_hold = params.p_hold;
        let params = params.truth_for(&names);
        let kinds = types
            .iter()
            .enumerate()
            .map(|(t, k)| KindSim {
                load: k.load,
                running: BTreeSet::new(),
                progress: 0.0,
                rate: params.speed_of(t),
            })
            .collect();
        SiteSim {
            params,
            waits: Rng::stream(seed, STREAM_WAITS),
            failures: Rng::stream(seed, STREAM_FAILURES),
            attempts: BTreeMap::new(),
            waiting: BTreeSet::new(),
            queue: VecDeque::new(),
            queued: 0,
            stuck: 0,
            running: 0,
            kinds,
            now: 0.0,
            boundaries,
            fill_due: None,
            negotiation_period,
            poll_period,
            p_hold,
            hold_seed: Rng::stream(seed, STREAM_HOLDS).next_u64(),
        }
    }

    /// Whether the site holds job `job` for a cause of its own (its input
    /// is missing here): the same answer for every attempt of the job.
    pub fn holds(&self, job: u64) -> bool {
        self.p_hold > 0.0 && (self.p_hold >= 1.0 || Rng::stream(self.hold_seed, job).uniform() < self.p_hold)
    }

    /// Seconds between the gridmanager's polls of this site (0: its events
    /// are heard as they happen).
    pub fn poll_period(&self) -> f64 {
        self.poll_period
    }

    /// Looks at the queue now, or at the next negotiation cycle: an eligible
    /// job starts only when a cycle matches it to a free slot.
    fn fill_at_next_cycle(&mut self, events: &mut Vec<(f64, AttemptId, ModelEvent)>) {
        if self.negotiation_period > 0.0 {
            let next = next_multiple(self.now, self.negotiation_period);
            self.fill_due = Some(self.fill_due.map_or(next, |due| due.min(next)));
        } else {
            self.fill_slots(events);
        }
    }

    /// The model's time: everything up to here has happened.
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Our jobs at the site that are not running (waiting or queued).
    pub fn idle(&self) -> u32 {
        self.waiting.len() as u32 + self.queued + self.stuck
    }

    pub fn running(&self) -> u32 {
        self.running
    }

    /// Submits an attempt of a job of one kind at `now` (call
    /// [`SiteSim::advance`] up to `now` first). It draws its extra queue
    /// wait now.
    pub fn submit(&mut self, now: f64, attempt: AttemptId, work: f64) {
        self.submit_kind(now, attempt, work, 0);
    }

    /// [`SiteSim::submit`] for a job of kind `kind` (its index in the list
    /// the site was made with; an unknown one counts as the first).
    pub fn submit_kind(&mut self, now: f64, attempt: AttemptId, work: f64, kind: usize) {
        self.move_clock(now);
        let state = if self.params.dead {
            self.stuck += 1;
            AttemptState::Stuck
        } else {
            let eligible_at = self.now + self.waits.exponential(self.params.wait_mean);
            self.waiting.insert((key(eligible_at), attempt));
            AttemptState::Waiting { eligible_at }
        };
        let kind = if kind < self.kinds.len() { kind } else { 0 };
        let old = self.attempts.insert(attempt, Attempt { work: work.max(0.0), kind, state });
        debug_assert!(old.is_none(), "attempt {attempt:?} submitted twice");
    }

    /// Whether `attempt` is running at `now` (it may have started since the
    /// site last reported).
    pub fn has_started(&mut self, now: f64, attempt: AttemptId) -> bool {
        self.move_clock(now);
        matches!(self.attempts.get(&attempt).map(|a| &a.state), Some(AttemptState::Running { .. }))
    }

    /// Removes an attempt at `now` (call [`SiteSim::advance`] up to `now`
    /// first). Returns false if it is unknown or already ended.
    pub fn remove(&mut self, now: f64, attempt: AttemptId) -> bool {
        self.move_clock(now);
        let Some(a) = self.attempts.remove(&attempt) else { return false };
        match a.state {
            AttemptState::Waiting { eligible_at } => {
                self.waiting.remove(&(key(eligible_at), attempt));
            }
            AttemptState::Stuck => self.stuck -= 1,
            // Left in the queue; skipped when it comes up.
            AttemptState::Queued => self.queued -= 1,
            AttemptState::Running { target, .. } => {
                self.kinds[a.kind].running.remove(&(key(target), attempt));
                self.running -= 1;
                self.update_rate();
                if self.queued > 0 {
                    self.fill_due = Some(next_multiple(self.now, self.negotiation_period));
                }
            }
        }
        true
    }

    /// When the next event happens, if any is coming.
    pub fn next_event_time(&self) -> Option<f64> {
        [self.fill_due, self.next_finish(), self.next_eligible(), self.next_boundary()]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp)
    }

    /// Runs the site up to `until`; returns every event with time ≤ `until`, in
    /// time order (ends before starts at the same instant, so that a freed slot
    /// is reused at once).
    pub fn advance(&mut self, until: f64) -> Vec<(f64, AttemptId, ModelEvent)> {
        let mut events = Vec::new();
        loop {
            let fill = self.fill_due;
            let finish = self.next_finish();
            let eligible = self.next_eligible();
            let boundary = self.next_boundary();
            let Some(t) = [fill, finish, eligible, boundary].into_iter().flatten().min_by(f64::total_cmp)
            else {
                break;
            };
            if t > until {
                break;
            }
            if finish == Some(t) {
                // The kinds due now, found before the clock moves (their
                // finish times are computed from the present).
                let due: Vec<usize> =
                    (0..self.kinds.len()).filter(|&k| self.kind_finish(k) == Some(t)).collect();
                self.move_clock(t);
                for k in due {
                    self.finish_due(k, &mut events);
                }
                self.update_rate();
                self.fill_at_next_cycle(&mut events);
            } else if fill == Some(t) {
                self.move_clock(t);
                self.fill_due = None;
                self.fill_slots(&mut events);
            } else if eligible == Some(t) {
                self.move_clock(t);
                while let Some(&(k, id)) = self.waiting.first() {
                    if f64::from_bits(k) > t {
                        break;
                    }
                    self.waiting.pop_first();
                    if let Some(a) = self.attempts.get_mut(&id) {
                        a.state = AttemptState::Queued;
                        self.queue.push_back(id);
                        self.queued += 1;
                    }
                }
                self.fill_at_next_cycle(&mut events);
            } else {
                self.move_clock(t);
                // A capacity boundary: only the rates change.
                self.update_rate();
            }
        }
        if until.is_finite() {
            self.move_clock(until);
        }
        events
    }

    /// Moves the model's clock to `t`, integrating progress; no events.
    fn move_clock(&mut self, t: f64) {
        if t > self.now {
            for kind in &mut self.kinds {
                kind.progress += kind.rate * (t - self.now);
            }
            self.now = t;
            // Crossing a capacity boundary with nothing running leaves the
            // rates stale; recomputing is cheap.
            self.update_rate();
        }
    }

    fn update_rate(&mut self) {
        let c = self.params.capacity_at(self.now);
        // Summed per kind as count × load: exact for loads of 1, so one kind
        // of load 1 sees exactly the count of running jobs.
        let load: f64 = self.kinds.iter().map(|k| k.running.len() as f64 * k.load).sum();
        for (t, kind) in self.kinds.iter_mut().enumerate() {
            kind.rate = self.params.type_rate(t, kind.load, load, c);
        }
    }

    fn kind_finish(&self, k: usize) -> Option<f64> {
        let kind = &self.kinds[k];
        let &(target, _) = kind.running.first()?;
        if kind.rate <= 0.0 {
            return None;
        }
        Some(self.now + ((f64::from_bits(target) - kind.progress) / kind.rate).max(0.0))
    }

    fn next_finish(&self) -> Option<f64> {
        (0..self.kinds.len()).filter_map(|k| self.kind_finish(k)).min_by(f64::total_cmp)
    }

    fn next_eligible(&self) -> Option<f64> {
        self.waiting.first().map(|&(k, _)| f64::from_bits(k).max(self.now))
    }

    fn next_boundary(&self) -> Option<f64> {
        if self.running == 0 {
            return None;
        }
        self.boundaries.iter().copied().find(|&b| b > self.now)
    }

    /// Ends the job of kind `k` whose target is reached, and any others of
    /// that kind that reach theirs within rounding.
    fn finish_due(&mut self, k: usize, events: &mut Vec<(f64, AttemptId, ModelEvent)>) {
        let kind = &mut self.kinds[k];
        let Some(&(first, _)) = kind.running.first() else { return };
        kind.progress = kind.progress.max(f64::from_bits(first));
        let limit = kind.progress + 1e-9 * kind.progress.max(1.0);
        while let Some(&(target, id)) = kind.running.first() {
            if f64::from_bits(target) > limit {
                break;
            }
            kind.running.pop_first();
            self.running -= 1;
            let a = self.attempts.remove(&id).expect("running attempt is known");
            let fails = matches!(a.state, AttemptState::Running { fails: true, .. });
            events.push((self.now, id, if fails { ModelEvent::Failed } else { ModelEvent::Finished }));
        }
    }

    /// Starts queued attempts while a slot is free.
    fn fill_slots(&mut self, events: &mut Vec<(f64, AttemptId, ModelEvent)>) {
        while self.running < self.params.slots {
            let Some(id) = self.queue.pop_front() else { break };
            let Some(a) = self.attempts.get_mut(&id) else { continue };
            if !matches!(a.state, AttemptState::Queued) {
                continue;
            }
            self.queued -= 1;
            // Failure is decided at start, from the site's own stream.
            let fails = self.params.p_fail > 0.0 && self.failures.uniform() < self.params.p_fail;
            let work = if fails { a.work * self.failures.uniform() } else { a.work };
            let kind = &mut self.kinds[a.kind];
            let target = kind.progress + work;
            a.state = AttemptState::Running { target, fails };
            kind.running.insert((key(target), id));
            self.running += 1;
            events.push((self.now, id, ModelEvent::Started));
        }
        self.update_rate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(slots: u32, capacity: Capacity, beta: f64) -> SiteParams {
        SiteParams { capacity, beta, ..SiteParams::healthy("s", slots) }
    }

    /// Submits `n` jobs of `work` at t = 0 and runs to the end; returns the
    /// finish times in event order and checks the start/end pairing.
    fn run_all(params: &SiteParams, n: u64, work: f64) -> Vec<f64> {
        let mut sim = SiteSim::new(params, 7);
        for i in 0..n {
            sim.submit(0.0, AttemptId(i), work);
        }
        let events = sim.advance(f64::INFINITY);
        let ends: Vec<f64> = events.iter().filter(|e| e.2 != ModelEvent::Started).map(|e| e.0).collect();
        assert_eq!(ends.len() as u64, n);
        assert_eq!(sim.running() + sim.idle(), 0);
        ends
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn below_the_knee_every_job_takes_its_work() {
        let ends = run_all(&site(100, Capacity::Finite(50.0), 0.5), 50, 400.0);
        assert!(ends.iter().all(|&t| close(t, 400.0)), "{ends:?}");
        let mut fast = site(10, Capacity::Infinite, 0.0);
        fast.speed = 2.0;
        let ends = run_all(&fast, 10, 400.0);
        assert!(ends.iter().all(|&t| close(t, 200.0)), "{ends:?}");
    }

    #[test]
    fn pure_sharing_past_the_knee_conserves_throughput() {
        // 40 jobs of 100 s share a knee of 10: total work 4000 at 10 per second.
        let ends = run_all(&site(100, Capacity::Finite(10.0), 0.0), 40, 100.0);
        assert!(ends.iter().all(|&t| close(t, 400.0)), "{ends:?}");
    }

    #[test]
    fn thrash_lowers_throughput_by_the_formula() {
        // n = 20, C = 10, beta = 0.5: rate = (10/20) / (1 + 0.5·10/10) = 1/3.
        let p = site(100, Capacity::Finite(10.0), 0.5);
        assert!(close(p.truth().rate(20, 10.0), 1.0 / 3.0));
        assert!(close(p.truth().rate(10, 10.0), 1.0));
        let ends = run_all(&p, 20, 100.0);
        assert!(ends.iter().all(|&t| close(t, 300.0)), "{ends:?}");
    }

    #[test]
    fn capacity_windows_scale_the_knee_while_they_last() {
        // C = 10 halves during [50, 150). 20 jobs of 100, beta 0:
        // rate 0.5 → 25 done by 50; rate 0.25 → 50 by 150; rate 0.5 → 100 at 250.
        let mut p = site(100, Capacity::Finite(10.0), 0.0);
        p.cap_windows = vec![[50.0, 150.0, 0.5]];
        assert_eq!(p.truth().knee_at(49.0), 10);
        assert_eq!(p.truth().knee_at(50.0), 5);
        assert_eq!(p.truth().knee_at(150.0), 10);
        let ends = run_all(&p, 20, 100.0);
        assert!(ends.iter().all(|&t| close(t, 250.0)), "{ends:?}");
    }

    #[test]
    fn dead_sites_never_start() {
        let mut p = site(10, Capacity::Infinite, 0.0);
        p.dead = true;
        let mut sim = SiteSim::new(&p, 1);
        for i in 0..5 {
            sim.submit(0.0, AttemptId(i), 10.0);
        }
        assert_eq!(sim.next_event_time(), None);
        assert!(sim.advance(1e9).is_empty());
        assert_eq!((sim.idle(), sim.running()), (5, 0));
        assert!(sim.remove(1e9, AttemptId(3)));
        assert_eq!(sim.idle(), 4);
    }

    #[test]
    fn eligible_jobs_wait_fifo_for_a_free_slot() {
        let mut sim = SiteSim::new(&site(2, Capacity::Infinite, 0.0), 1);
        for i in 0..4 {
            sim.submit(0.0, AttemptId(i), 10.0);
        }
        let events = sim.advance(f64::INFINITY);
        let starts: Vec<(f64, u64)> =
            events.iter().filter(|e| e.2 == ModelEvent::Started).map(|e| (e.0, e.1 .0)).collect();
        assert_eq!(starts, vec![(0.0, 0), (0.0, 1), (10.0, 2), (10.0, 3)]);
    }

    #[test]
    fn a_negotiation_cycle_starts_eligible_jobs_only_at_its_multiples() {
        // Two slots, cycles every 7 s, jobs of 10 s: the first two start at
        // 0, and the slots they free at 10 are filled at the cycle of 14.
        let mut p = site(2, Capacity::Infinite, 0.0);
        p.negotiation_period = 7.0;
        let mut sim = SiteSim::new(&p, 1);
        for i in 0..4 {
            sim.submit(0.0, AttemptId(i), 10.0);
        }
        let events = sim.advance(f64::INFINITY);
        let starts: Vec<(f64, u64)> =
            events.iter().filter(|e| e.2 == ModelEvent::Started).map(|e| (e.0, e.1 .0)).collect();
        assert_eq!(starts, vec![(0.0, 0), (0.0, 1), (14.0, 2), (14.0, 3)]);
        // A job submitted between cycles waits for the next one.
        sim.submit(30.0, AttemptId(9), 10.0);
        let events = sim.advance(f64::INFINITY);
        assert_eq!(events[0], (35.0, AttemptId(9), ModelEvent::Started), "{events:?}");
    }

    #[test]
    fn the_next_multiple_of_a_period_maps_a_multiple_to_itself() {
        assert_eq!(next_multiple(3.0, 0.0), 3.0);
        assert_eq!(next_multiple(0.0, 7.0), 0.0);
        assert_eq!(next_multiple(0.1, 7.0), 7.0);
        assert_eq!(next_multiple(7.0, 7.0), 7.0);
        let many = 1000.0 * 0.1;
        assert!((next_multiple(many, 0.1) - many).abs() < 1e-9, "{}", next_multiple(many, 0.1));
    }

    #[test]
    fn removing_a_running_job_frees_its_slot_and_speeds_the_others() {
        // Knee 1, beta 0: two jobs share; removing one at t = 10 lets the other
        // run at full speed: 5 done by 10, 95 more → 105.
        let mut sim = SiteSim::new(&site(2, Capacity::Finite(1.0), 0.0), 1);
        sim.submit(0.0, AttemptId(0), 100.0);
        sim.submit(0.0, AttemptId(1), 100.0);
        sim.submit(0.0, AttemptId(2), 100.0);
        assert_eq!(sim.advance(10.0).len(), 2);
        assert!(sim.remove(10.0, AttemptId(1)));
        assert!(!sim.remove(10.0, AttemptId(1)));
        let events = sim.advance(f64::INFINITY);
        // Job 2 starts at 10 in the freed slot; 0 and 2 then share.
        assert_eq!(events[0], (10.0, AttemptId(2), ModelEvent::Started));
        let end0 = events.iter().find(|e| e.1 == AttemptId(0)).unwrap().0;
        // 5 done at 10, then rate 0.5: 95 more → 10 + 190 = 200.
        assert!(close(end0, 200.0), "{events:?}");
    }

    #[test]
    fn failures_run_part_of_the_work() {
        let mut p = site(10, Capacity::Infinite, 0.0);
        p.p_fail = 1.0;
        let mut sim = SiteSim::new(&p, 3);
        for i in 0..10 {
            sim.submit(0.0, AttemptId(i), 100.0);
        }
        let events = sim.advance(f64::INFINITY);
        for e in events.iter().filter(|e| e.2 != ModelEvent::Started) {
            assert_eq!(e.2, ModelEvent::Failed);
            assert!(e.0 >= 0.0 && e.0 <= 100.0);
        }
    }

    #[test]
    fn waits_are_exponential_with_the_given_mean() {
        let mut rng = Rng::stream(42, STREAM_WAITS);
        let n = 20_000;
        let mean = (0..n).map(|_| rng.exponential(30.0)).sum::<f64>() / f64::from(n);
        assert!((mean - 30.0).abs() < 1.5, "mean {mean}");
    }

    #[test]
    fn job_work_is_the_same_stream_for_a_seed_and_in_range() {
        let sc = Scenario::single("", 1000, 400.0, 0.2, vec![site(1, Capacity::Infinite, 0.0)]);
        let a = job_work(&sc, 5);
        assert_eq!(a, job_work(&sc, 5));
        assert_ne!(a, job_work(&sc, 6));
        assert!(a.iter().all(|&w| (320.0..480.0).contains(&w)));
        let mean = a.iter().sum::<f64>() / a.len() as f64;
        assert!((mean - 400.0).abs() < 10.0, "mean {mean}");
    }
}
