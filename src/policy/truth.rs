//! What only the oracle may know: the true model of each site
//! (`shared/scenarios/README.md`), as plain numbers. The simulator fills it
//! from its scenario; no other policy ever sees it. It lives here, not in the
//! simulator, so that the policy layer imports nothing above it.

/// The truth about one site.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteTruth {
    /// CPU slots available to us.
    pub slots: u32,
    /// Mean of the exponential queue wait other users cause, seconds.
    pub wait_mean: f64,
    /// Knee C of the shared resource, in jobs at full speed (∞: none).
    pub capacity: f64,
    /// Thrash penalty past the knee.
    pub beta: f64,
    /// Uncontended run time is `work / speed`.
    pub speed: f64,
    /// Probability that an attempt fails.
    pub p_fail: f64,
    /// `[t1, t2, factor]`: C × factor while `t1 ≤ t < t2`.
    pub cap_windows: Vec<[f64; 3]>,
    /// Accepts jobs and never starts them.
    pub dead: bool,
    /// Each kind's speed factor here, in the run's order of kinds: a kind
    /// runs at `speed × type_speed[t]` (a kind not listed, at `speed`).
    pub type_speed: Vec<f64>,
}

impl SiteTruth {
    /// The capacity C in force at `t` (the base capacity times every window
    /// factor covering `t`).
    pub fn capacity_at(&self, t: f64) -> f64 {
        let mut c = self.capacity;
        for &[t1, t2, factor] in &self.cap_windows {
            if t1 <= t && t < t2 {
                c *= factor;
            }
        }
        c
    }

    /// The throughput-optimal concurrency at `t`: `min(slots, floor(C(t)))`.
    pub fn knee_at(&self, t: f64) -> u32 {
        let c = self.capacity_at(t);
        if c.is_finite() {
            (c.floor().max(0.0) as u32).min(self.slots)
        } else {
            self.slots
        }
    }

    /// Progress rate of each of `n` running jobs under capacity `c`, in work
    /// seconds per second (the model's `rate(n)`): full speed up to the knee,
    /// then shared, and slowed further by thrashing when `beta > 0`.
    pub fn rate(&self, n: u32, c: f64) -> f64 {
        let n = f64::from(n);
        if n <= c {
            self.speed
        } else if c <= 0.0 {
            0.0
        } else {
            self.speed * (c / n) / (1.0 + self.beta * (n - c) / c)
        }
    }

    /// The uncontended speed of kind `t` here: `speed × type_speed[t]`.
    pub fn speed_of(&self, t: usize) -> f64 {
        self.speed * self.type_speed.get(t).copied().unwrap_or(1.0)
    }

    /// How much slower the shared resource serves under a load `load` (the
    /// sum of the running jobs' loads) and capacity `c`, the model's `D(L)`:
    /// 1 up to the knee, then shared, and slowed further by thrashing when
    /// `beta > 0`. Infinite where the resource serves nothing (`c = 0`).
    pub fn slowdown(&self, load: f64, c: f64) -> f64 {
        if load <= c {
            1.0
        } else if c <= 0.0 {
            f64::INFINITY
        } else {
            (load / c) * (1.0 + self.beta * (load - c) / c)
        }
    }

    /// Progress rate of each running job of kind `t`, whose load is
    /// `load_t`, under a total load `load` and capacity `c`:
    /// `speed_t / ((1 − ℓ) + ℓ D(L))`. Its own computing is untouched; its
    /// share on the resource is slowed by `D`. For a kind of load 1 at
    /// speed factor 1, `n` running, this is [`SiteTruth::rate`] to the bit.
    pub fn type_rate(&self, t: usize, load_t: f64, load: f64, c: f64) -> f64 {
        let speed = self.speed_of(t);
        if load <= c || load_t <= 0.0 {
            speed
        } else if c <= 0.0 {
            0.0
        } else if load_t >= 1.0 {
            // `speed / D`, written as `rate` writes it, so that one kind of
            // load 1 gives the single-kind model's numbers exactly.
            speed * (c / load) / (1.0 + self.beta * (load - c) / c)
        } else {
            speed / ((1.0 - load_t) + load_t * self.slowdown(load, c))
        }
    }

    /// Successful jobs per second with `n` running under capacity `c`, for
    /// jobs of mean work `work` (failed attempts run half their work on
    /// average, and their time is lost).
    pub fn throughput(&self, n: u32, c: f64, work: f64) -> f64 {
        let attempt = work * (1.0 - self.p_fail / 2.0);
        f64::from(n) * self.rate(n, c) / attempt * (1.0 - self.p_fail)
    }

    /// The capacity boundaries after `t`, ascending.
    pub fn boundaries_after(&self, t: f64) -> impl Iterator<Item = f64> + '_ {
        self.cap_windows.iter().flat_map(|w| [w[0], w[1]]).filter(move |&b| b > t && b.is_finite())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(capacity: f64, beta: f64) -> SiteTruth {
        SiteTruth {
            slots: 100,
            wait_mean: 0.0,
            capacity,
            beta,
            speed: 1.0,
            p_fail: 0.0,
            cap_windows: vec![[50.0, 100.0, 0.5]],
            dead: false,
            type_speed: Vec::new(),
        }
    }

    #[test]
    fn rate_is_full_to_the_knee_then_shared_and_thrashed() {
        let s = site(10.0, 0.5);
        assert_eq!(s.rate(10, 10.0), 1.0);
        // 20 jobs on a knee of 10: half speed from sharing, ÷1.5 from thrashing.
        assert!((s.rate(20, 10.0) - 1.0 / 3.0).abs() < 1e-12);
        // Pure sharing keeps throughput flat past the knee.
        let flat = site(10.0, 0.0);
        assert!((flat.throughput(40, 10.0, 100.0) - flat.throughput(10, 10.0, 100.0)).abs() < 1e-12);
    }

    #[test]
    fn windows_scale_the_capacity_and_the_knee() {
        let s = site(10.0, 0.5);
        assert_eq!(s.knee_at(49.0), 10);
        assert_eq!(s.knee_at(50.0), 5);
        assert_eq!(s.knee_at(100.0), 10);
        assert_eq!(s.boundaries_after(60.0).collect::<Vec<_>>(), vec![100.0]);
        assert_eq!(site(f64::INFINITY, 0.0).knee_at(0.0), 100);
    }
}
