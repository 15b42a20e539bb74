//! Warm-start memory: what a run starts from, and what it leaves the next.
//!
//! **Memory.** [`Policy::learned`](crate::policy::Policy::learned) keeps
//! each site's floor, ceiling (and whether a re-probe only assumed it),
//! healthy run-time quantiles, mean wait, how it starts jobs, and attempts'
//! outcomes (scaled to a test's sample, so that this run's outweigh them
//! within one); a warm run starts there and tests from its first job (a
//! floor remembered without run times is a first window again). How a site
//! starts jobs is its matchmaker's and its other users' doing, not the
//! run's: a warm run queues ahead from its first job where memory says one
//! by one, and its own first cohort, watched as a cold run's is, replaces
//! that verdict when it tells (the site may have changed). It takes no
//! sample of its own, so it hands the run times on as it was given them,
//! until the level memory holds healthy runs degraded: then the runs at the
//! level cut to are learned afresh and compared with memory's, once per
//! run. Slower than memory's by κ and the two means' errors (and, at a
//! polled site, a poll over the mean run), the slowdown did not fall with
//! our level: the jobs changed since (another job, other inputs, other
//! hardware), and the floor comes back with this run's runs as its
//! baseline. Faster, memory's were slowed or the jobs got shorter: the cut
//! stands with this run's runs. Within, the capacity dropped: the cut
//! stands with memory's. A site's own `initial_window` stands over a
//! smaller remembered floor unless a run saw it degraded at or below that
//! window.

use super::*;

impl Site {
    /// Warm start: the remembered capacity is the floor and the window; the
    /// remembered run times are the healthy distribution from the first job.
    pub(super) fn remember(&mut self, m: &SiteMemory) {
        if let Some(d) =
            m.runtime_quantiles.as_deref().and_then(|q| Distribution::from_quantiles(q, m.runtime_range))
        {
            self.dist = Some(d);
        }
        if let Some(c) = m.capacity.filter(|c| *c >= 1.0) {
            let c = c.min(self.cap);
            self.unchecked_baseline = None;
            self.floor = c;
            self.floor_remembered = true;
            self.window = c;
            self.searched = true;
            match m.ceiling.filter(|&u| u > c) {
                Some(u) => {
                    self.ceiling = u.min(self.cap);
                    self.ceiling_assumed = m.ceiling_assumed;
                }
                // No knee was seen above the remembered level: the run starts
                // where a healthy verdict there would have taken it.
                None => self.window = (self.rules.gain * c).min(self.cap),
            }
            if self.dist.is_none() {
                // No run times came with it (a first cohort given up on, or
                // a state from before they were kept): nothing above the
                // level could be tested, and runs past it teach no baseline,
                // so the window would stay where it starts all run. The
                // level is known healthy: it is a first window whose verdict
                // comes once its runs are in.
                self.window = c;
                self.searched = false;
            }
            if self.converged() {
                self.phase = Phase::Holding { since: 0.0 };
            }
            self.new_test(0.0);
        }
        if m.unresponsive {
            self.window = 1.0;
            // It started nothing for at least `idle_timeout` last time: its
            // wait is planned as one job's that long without a start, so a
            // job goes there only where the run is long enough to use a
            // site that slow (not a probe parked there while others have
            // room, to be moved once its wait, counted from zero, grew).
            self.waits.closed = self.idle_timeout;
            self.waits.left_unstarted = 1;
            self.waits.recent_waited = self.idle_timeout;
        }
        if let Some((succeeded, failed)) = m.attempts {
            (self.successes, self.failures) = (succeeded, failed);
        }
        self.waits.starting = Starting::from_memory(m.starts_one_by_one);
        if let Some(w) = m.mean_wait {
            self.waits.remember(w);
        }
    }

    /// What a warm run is to start from, each bound where this run
    /// learned one.
    pub(super) fn capacity_memory(&self) -> Bounds {
        // A first cohort that was given up on (`restart_below`) left a
        // floor and a ceiling but no verdict yet: the floor is still what
        // this run learned, and a warm run must not start above it. A
        // remembered floor stays known through a run too short to judge it.
        let learned = self.any_started && (self.searched || self.floor_remembered || self.ceiling < self.cap);
        // A floor whose check is still under way is what was known before it;
        // not where memory's run times are checked: that began with a
        // verdict at the floor, which stands until the check says otherwise.
        let floor = self.recheck().filter(|r| r.suspect == Suspect::Floor).map_or(self.floor, |r| r.floor);
        Bounds { floor: learned.then_some(floor), ceiling: (self.ceiling < self.cap).then_some(self.ceiling) }
    }

    /// The attempts' outcomes, scaled to at most a test sample (`SAMPLE`)
    /// with their ratio kept: the failure rate starts where it was, and
    /// each run's own attempts outweigh the past within a sample.
    pub(super) fn attempts_to_remember(&self) -> Option<(u64, u64)> {
        let attempts = self.successes + self.failures;
        let sample = SAMPLE as u64;
        let scaled = |k: u64| {
            if attempts > sample {
                (k as f64 * sample as f64 / attempts as f64).round() as u64
            } else {
                k
            }
        };
        (attempts > 0).then(|| (scaled(self.successes), scaled(self.failures)))
    }

    /// What the next run should start from.
    pub fn memory(&self, now: Time) -> SiteMemory {
        let first_cohorts;
        let baseline = match self.recheck() {
            // A floor whose check is still under way is remembered with its
            // own baseline, not with the few runs below it so far.
            Some(Recheck { baseline: Some((dist, _)), .. }) => Some(dist),
            _ if !self.ready() => None,
            // The first cohort's tail is made heavy for its tests only
            // (`UNSEEN_Z`); the next run tests from the runs as they were.
            _ if self.floor_is_first_windows() => {
                first_cohorts = Distribution::estimate_with_unseen_error(&self.sample_at(now), 0.0);
                first_cohorts.as_ref().or(self.dist.as_ref())
            }
            _ => self.dist.as_ref(),
        };
        // A capacity kept from before the tail predates any re-probe there.
        let (Bounds { floor: capacity, ceiling }, ceiling_assumed) = match self.tail_memory {
            Some(bounds) => (bounds, false),
            None => {
                let bounds = self.capacity_memory();
                (bounds, self.ceiling_assumed && bounds.ceiling.is_some())
            }
        };
        let (runtime_quantiles, runtime_range) = baseline.map(|d| d.to_remember(16)).unzip();
        SiteMemory {
            capacity,
            ceiling,
            ceiling_assumed,
            baseline_runtime: baseline.or(self.dist.as_ref()).map(Distribution::mean),
            runtime_range: runtime_range.flatten(),
            runtime_quantiles,
            mean_wait: self.waits.mean(now),
            starts_one_by_one: self.waits.starting.to_remember(),
            attempts: self.attempts_to_remember(),
            unresponsive: !self.any_started && self.waits.exposure(now) > 0.0,
        }
    }
}
