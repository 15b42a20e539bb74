//! The mix: how many jobs of each kind each site should run, from the true
//! model of several kinds (`shared/scenarios/README.md`, "Job types").
//!
//! **The rule.** A site runs `x_t` jobs of kind `t` (load `ℓ_t`, work `w_t`).
//! With `L = Σ ℓ_t x_t ≤ C` every job runs at its full speed `v_t`; past C
//! the resource serves at most C units of load (less where `β > 0`) and
//! every job holds its slot longer, so no mix past C finishes more work of
//! any kind than one at C: the plan keeps `Σ ℓ_t x_t ≤ C` and
//! `Σ x_t ≤ slots`. A running job of kind `t` then succeeds at
//! `μ_t = v_t (1 − p) / (w_t (1 − p/2))` per second (a failed attempt runs
//! half its work on average). A slot of kind `t` at a site of mean queue
//! wait `W` has ended `e_t(T) = ⌊μ_t (T − W)⌋⁺` jobs by `T` from now: its
//! first starts after the wait (Little's law's queue ahead keeps the wait
//! out of every later one), and only whole jobs count, which is what a run
//! of one or two waves turns on. The `m_t` jobs of each kind left end by
//! the least `T` for which the linear programme
//!
//! > maximise θ subject to, at every live site, `Σ_t x_t ≤ slots` and
//! > `Σ_t ℓ_t x_t ≤ C`, and for every kind `Σ_sites e_t(T) x_t ≥ θ m_t`
//!
//! reaches θ ≥ 1 (feasibility grows with `T`: it is found by doubling,
//! then bisection), and its solution there is the mix. A fixed mix is
//! enough: the constraints are linear, so a schedule that changes the mix
//! over time does no better than its average, which is a mix. The
//! programme sends each kind where it ends soonest for what it costs there:
//! a site whose file server is strong takes the I/O-bound jobs, one with
//! many slots and a weak server fills with CPU-bound ones, a kind that is
//! slow at a site (a cloud's vCPUs) or a site of long waits gets less.
//! With one kind of load 1 its answer is `min(slots, C)`, today's knee.
//!
//! **Whole jobs.** The planner keeps `x_t` running as a real number (it
//! sends whole jobs up to the floor of its target), so each `x_t` is
//! rounded down, then up by one in the order of the largest fractions while
//! the site's slots and load allow; slots and load the programme left
//! unused (no mix that ends every kind together needs them) go to the kind
//! that would finish last.
//!
//! Cost: a dense simplex over `sites × kinds + 1` variables and
//! `2 sites + kinds` constraints, some twenty times per mix, solved again
//! only when a kind's jobs left fell by a fraction or a capacity changed.
//! What it does not do: stay near the last mix. The programme's optimum is
//! often not unique, and two solutions in a row may trade a site's kinds,
//! whose planners then withdraw the jobs waiting past the new shares.

/// One live site as the programme sees it.
#[derive(Clone, Debug)]
pub struct MixSite {
    /// Jobs it may run at once (its slots, or less).
    pub slots: f64,
    /// Its resource's capacity in load (∞: none).
    pub capacity: f64,
    /// Per kind, successes per second of one running job (0: the kind does
    /// not run there).
    pub rate: Vec<f64>,
    /// Mean queue wait of a job sent there, seconds.
    pub wait: f64,
}

/// Slack for whole numbers computed in floating point.
const ROUNDING: f64 = 1e-6;

/// How many times the horizon may double before the mix takes what it has.
const MAX_DOUBLINGS: u32 = 60;

/// Halvings of the horizon's bracket: a part in 2^16 of it.
const BISECTIONS: u32 = 16;

/// The mix: `x[site][kind]`, jobs of each kind to keep running at each
/// site, for kinds of load `loads` with `left` jobs each not done yet.
pub fn solve(sites: &[MixSite], loads: &[f64], left: &[f64]) -> Vec<Vec<f64>> {
    let kinds = loads.len();
    let mut x = vec![vec![0.0; kinds]; sites.len()];
    // One variable per (site, kind) that can run there and has jobs left.
    let vars: Vec<(usize, usize)> = (0..sites.len())
        .flat_map(|i| (0..kinds).map(move |t| (i, t)))
        .filter(|&(i, t)| sites[i].rate[t] > 0.0 && left[t] > 0.0 && sites[i].slots >= 1.0)
        .filter(|&(i, t)| loads[t] <= sites[i].capacity)
        .collect();
    if vars.is_empty() {
        return x;
    }
    let n = vars.len() + 1;
    let theta = vars.len();
    let mut rows: Vec<Vec<f64>> = Vec::new();
    let mut rhs: Vec<f64> = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        let mut slots = vec![0.0; n];
        let mut load = vec![0.0; n];
        for (v, &(s, t)) in vars.iter().enumerate() {
            if s == i {
                slots[v] = 1.0;
                load[v] = loads[t];
            }
        }
        if slots.iter().any(|&a| a > 0.0) {
            rows.push(slots);
            rhs.push(site.slots);
            if site.capacity.is_finite() {
                rows.push(load);
                rhs.push(site.capacity.max(0.0));
            }
        }
    }
    // Jobs one slot of kind `t` at site `i` ends by `T` from now: its
    // first job starts after the wait, the next as one ends.
    let ends_by = |horizon: f64, i: usize, t: usize| {
        (sites[i].rate[t] * (horizon - sites[i].wait).max(0.0) + ROUNDING).floor()
    };
    // How far the kinds' jobs left can be ended by `T`: `θ ≥ 1` where the
    // mix ends them all.
    let programme = |horizon: f64| -> Vec<f64> {
        let mut rows = rows.clone();
        let mut rhs = rhs.clone();
        for (t, &m) in left.iter().enumerate() {
            if m <= 0.0 {
                continue;
            }
            let mut row = vec![0.0; n];
            for (v, &(i, s)) in vars.iter().enumerate() {
                if s == t {
                    row[v] = -ends_by(horizon, i, t) / m;
                }
            }
            row[theta] = 1.0;
            rows.push(row);
            rhs.push(0.0);
        }
        let mut objective = vec![0.0; n];
        objective[theta] = 1.0;
        simplex(&rows, &rhs, &objective)
    };
    // The soonest `T`: from the first run of every kind at its best site,
    // doubled until the jobs fit, then halved down to a part in 2^BISECTIONS.
    let first = (0..kinds)
        .filter(|&t| left[t] > 0.0)
        .map(|t| {
            vars.iter()
                .filter(|v| v.1 == t)
                .map(|&(i, _)| sites[i].wait + 1.0 / sites[i].rate[t])
                .fold(f64::INFINITY, f64::min)
        })
        .fold(0.0, f64::max);
    let mut hi = first.max(1.0);
    let mut solution = programme(hi);
    let mut doublings = 0;
    while solution[theta] < 1.0 && doublings < MAX_DOUBLINGS {
        hi *= 2.0;
        solution = programme(hi);
        doublings += 1;
    }
    let mut lo = if doublings == 0 { 0.0 } else { hi / 2.0 };
    for _ in 0..BISECTIONS {
        let mid = 0.5 * (lo + hi);
        let at_mid = programme(mid);
        if at_mid[theta] >= 1.0 {
            hi = mid;
            solution = at_mid;
        } else {
            lo = mid;
        }
    }
    for (v, &(i, t)) in vars.iter().enumerate() {
        x[i][t] = solution[v].max(0.0);
    }
    whole_jobs(sites, loads, left, &mut x);
    x
}

/// Rounds the mix to whole jobs within each site's slots and load, then
/// gives what is left unused to the kind that would finish last.
fn whole_jobs(sites: &[MixSite], loads: &[f64], left: &[f64], x: &mut [Vec<f64>]) {
    let fits = |site: &MixSite, row: &[f64], t: usize, k: f64| {
        let used: f64 = row.iter().sum();
        let load: f64 = row.iter().zip(loads).map(|(a, l)| a * l).sum();
        used + k <= site.slots + ROUNDING && load + k * loads[t] <= site.capacity + ROUNDING
    };
    for (site, row) in sites.iter().zip(x.iter_mut()) {
        let fractions: Vec<f64> = row.iter().map(|&a| a - (a + ROUNDING).floor()).collect();
        for a in row.iter_mut() {
            *a = (*a + ROUNDING).floor();
        }
        let mut order: Vec<usize> = (0..row.len()).filter(|&t| fractions[t] > ROUNDING).collect();
        order.sort_by(|&a, &b| fractions[b].total_cmp(&fractions[a]).then(a.cmp(&b)));
        for t in order {
            if fits(site, row, t, 1.0) {
                row[t] += 1.0;
            }
        }
    }
    let throughput =
        |x: &[Vec<f64>], t: usize| -> f64 { sites.iter().zip(x).map(|(s, r)| s.rate[t] * r[t]).sum() };
    for i in 0..sites.len() {
        loop {
            // The kind whose jobs left take longest at the mix, among those
            // one more of which fits here.
            let last = (0..loads.len())
                .filter(|&t| left[t] > 0.0 && sites[i].rate[t] > 0.0 && fits(&sites[i], &x[i], t, 1.0))
                .max_by(|&a, &b| {
                    let ends = |t: usize| left[t] / throughput(x, t).max(1e-300);
                    ends(a).total_cmp(&ends(b)).then(b.cmp(&a))
                });
            let Some(t) = last else { break };
            let used: f64 = x[i].iter().sum();
            let load: f64 = x[i].iter().zip(loads).map(|(a, l)| a * l).sum();
            let by_load = if loads[t] > 0.0 { (sites[i].capacity - load) / loads[t] } else { f64::INFINITY };
            let k = (sites[i].slots - used).min(by_load).floor().max(1.0);
            x[i][t] += k;
        }
    }
}

/// Tolerance of the simplex's comparisons (its rows are scaled to
/// coefficients of at most about 1).
const EPS: f64 = 1e-9;

/// Pivots after which the simplex stops with what it has (a safeguard: a
/// programme of this size needs a few hundred).
const MAX_PIVOTS: usize = 20_000;

/// Maximises `c·x` subject to `A x ≤ b`, `x ≥ 0`, with `b ≥ 0` (the origin
/// is feasible) and the programme bounded. Dantzig's rule, with Bland's
/// smallest index among the ties, which also prevents cycling once
/// degenerate pivots repeat.
fn simplex(a: &[Vec<f64>], b: &[f64], c: &[f64]) -> Vec<f64> {
    let (m, n) = (a.len(), c.len());
    let w = n + m + 1;
    let mut t = vec![0.0; (m + 1) * w];
    for r in 0..m {
        t[r * w..r * w + n].copy_from_slice(&a[r]);
        t[r * w + n + r] = 1.0;
        t[r * w + w - 1] = b[r].max(0.0);
    }
    for j in 0..n {
        t[m * w + j] = -c[j];
    }
    let mut basis: Vec<usize> = (n..n + m).collect();
    let mut degenerate = 0usize;
    for _ in 0..MAX_PIVOTS {
        let cost = &t[m * w..m * w + n + m];
        let entering = if degenerate < 2 * (n + m) {
            cost.iter()
                .enumerate()
                .filter(|(_, &v)| v < -EPS)
                .min_by(|x, y| x.1.total_cmp(y.1))
                .map(|(j, _)| j)
        } else {
            cost.iter().position(|&v| v < -EPS)
        };
        let Some(e) = entering else { break };
        let mut leaving: Option<(f64, usize)> = None;
        for r in 0..m {
            let coef = t[r * w + e];
            if coef > EPS {
                let ratio = t[r * w + w - 1] / coef;
                leaving = match leaving {
                    Some((best, br))
                        if ratio > best + EPS || (ratio >= best - EPS && basis[r] > basis[br]) =>
                    {
                        Some((best, br))
                    }
                    _ => Some((ratio, r)),
                };
            }
        }
        let Some((ratio, r)) = leaving else { break };
        degenerate = if ratio <= EPS { degenerate + 1 } else { 0 };
        let p = t[r * w + e];
        for j in 0..w {
            t[r * w + j] /= p;
        }
        for row in 0..=m {
            let f = t[row * w + e];
            if row != r && f != 0.0 {
                for j in 0..w {
                    t[row * w + j] -= f * t[r * w + j];
                }
            }
        }
        basis[r] = e;
    }
    let mut x = vec![0.0; n];
    for (r, &v) in basis.iter().enumerate() {
        if v < n {
            x[v] = t[r * w + w - 1];
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simplex_finds_a_textbook_optimum() {
        // max 3x + 5y, x ≤ 4, 2y ≤ 12, 3x + 2y ≤ 18: (2, 6), worth 36.
        let a = vec![vec![1.0, 0.0], vec![0.0, 2.0], vec![3.0, 2.0]];
        let x = simplex(&a, &[4.0, 12.0, 18.0], &[3.0, 5.0]);
        assert!((x[0] - 2.0).abs() < 1e-9 && (x[1] - 6.0).abs() < 1e-9, "{x:?}");
    }

    #[test]
    fn one_site_holds_the_io_jobs_at_its_server_and_fills_its_slots_with_cpu_jobs() {
        // M2 of mixed.toml: 500 slots, C = 50; 1000 I/O jobs of 400 s (load
        // 1) and 4000 CPU jobs of 1200 s (load 0.03). Both end together at
        // T with x_io = 400,000/T and x_cpu = 4,800,000/T; the load
        // 544,000/T ≤ 50 binds first: T = 10,880 s, x_io ≈ 36.8, x_cpu ≈ 441.
        let site = MixSite { slots: 500.0, capacity: 50.0, rate: vec![1.0 / 400.0, 1.0 / 1200.0], wait: 0.0 };
        let x = solve(&[site], &[1.0, 0.03], &[1000.0, 4000.0]);
        let (io, cpu) = (x[0][0], x[0][1]);
        assert!((36.0..=37.0).contains(&io), "{io} I/O jobs");
        assert!(io + 0.03 * cpu <= 50.0 + 1e-6 && io + cpu <= 500.0, "{io} + {cpu} past the site");
        assert!(cpu >= 441.0, "{cpu} CPU jobs: the load left must be filled");
    }

    #[test]
    fn each_kind_goes_where_it_runs_best() {
        // Two sites of 100 slots: one with a strong server (C = 100), one
        // with a weak one (C = 5). Equal numbers of I/O and CPU jobs of the
        // same work: the weak site can run only CPU jobs at full speed.
        let strong = MixSite { slots: 100.0, capacity: 100.0, rate: vec![0.01, 0.01], wait: 0.0 };
        let weak = MixSite { slots: 100.0, capacity: 5.0, rate: vec![0.01, 0.01], wait: 0.0 };
        let x = solve(&[strong, weak], &[1.0, 0.01], &[1000.0, 1000.0]);
        assert!(x[1][0] <= 4.0, "the weak server takes {} I/O jobs", x[1][0]);
        assert!(x[1][1] >= 95.0, "the weak server's slots hold {} CPU jobs", x[1][1]);
        assert!(x[0][0] >= 95.0, "the strong server takes {} I/O jobs", x[0][0]);
        // One kind of load 1: the knee, min(slots, C).
        let one =
            solve(&[MixSite { slots: 40.0, capacity: 12.5, rate: vec![0.01], wait: 0.0 }], &[1.0], &[100.0]);
        assert_eq!(one, vec![vec![12.0]]);
    }
}
