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
//! **Cost.** The programme is solved by columns (`Columns`, Dantzig–Wolfe):
//! each column a whole mix, every site at a vertex of its own slots and
//! load, found per site in O(kinds²) from the kinds' prices, so a column
//! costs O(sites × kinds²) and the weights' programme has `kinds + 1`
//! rows whatever the sites; the columns are kept across the horizon's
//! search, some twenty programmes per mix. A dense simplex over every
//! (site, kind) costs O(sites²) per pivot and about `sites` pivots
//! (BENCHMARKS.md, "Scale"). The mix is solved again only when a kind's
//! jobs left fell by a fraction or a capacity changed.
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
    let runs = kinds_at(sites, loads, left);
    if runs.iter().all(Vec::is_empty) {
        return x;
    }
    let mut columns = Columns::seeded(sites, loads, left, &runs);
    // The soonest `T`: from the first run of every kind at its best site,
    // doubled until the jobs fit, then halved down to a part in 2^BISECTIONS.
    let first = (0..kinds)
        .filter(|&t| left[t] > 0.0)
        .map(|t| {
            (sites.iter().zip(&runs))
                .filter(|(_, runs)| runs.contains(&t))
                .map(|(site, _)| site.wait + 1.0 / site.rate[t])
                .fold(f64::INFINITY, f64::min)
        })
        .fold(0.0, f64::max);
    let mut hi = first.max(1.0);
    let mut solution = columns.programme(hi);
    let mut doublings = 0;
    while solution.0 < 1.0 && doublings < MAX_DOUBLINGS {
        hi *= 2.0;
        solution = columns.programme(hi);
        doublings += 1;
    }
    let mut lo = if doublings == 0 { 0.0 } else { hi / 2.0 };
    for _ in 0..BISECTIONS {
        let mid = 0.5 * (lo + hi);
        let at_mid = columns.programme(mid);
        if at_mid.0 >= 1.0 {
            hi = mid;
            solution = at_mid;
        } else {
            lo = mid;
        }
    }
    for (weight, column) in solution.1.iter().zip(&columns.pool) {
        if *weight > 0.0 {
            for (i, row) in x.iter_mut().enumerate() {
                for (t, a) in row.iter_mut().enumerate() {
                    *a += weight * column[i * kinds + t];
                }
            }
        }
    }
    whole_jobs(sites, loads, left, &mut x);
    x
}

/// The programme by columns (Dantzig–Wolfe): each column is a whole mix,
/// every site at a vertex of its own slots and load; the mixes the
/// programme weighs are the columns' convex combinations, which are every
/// mix within the sites' slots and load (a product of polytopes is the
/// hull of its vertices' products). A column the weights' prices say would
/// raise θ is added until none would: the optimum of the whole programme.
/// Each site's best vertex has at most two kinds, so the pricing costs
/// O(sites × kinds²), and the weights' programme has a row per kind and
/// one more, whatever the sites. The columns hold for every `T` (only how
/// many jobs they end depends on it), so the horizon's search keeps them.
struct Columns<'a> {
    sites: &'a [MixSite],
    loads: &'a [f64],
    left: &'a [f64],
    runs: &'a [Vec<usize>],
    /// Each column's `x[site × kinds + kind]`.
    pool: Vec<Vec<f64>>,
}

/// Columns after which the weights take what they have: a safeguard
/// against a pricing that rounding keeps finding worth a little more (the
/// pool is kept across the horizon's search, so it bounds a whole mix).
const MAX_COLUMNS: usize = 2000;

/// Per site, the kinds that can run there and have jobs left.
fn kinds_at(sites: &[MixSite], loads: &[f64], left: &[f64]) -> Vec<Vec<usize>> {
    (sites.iter())
        .map(|site| {
            (0..loads.len())
                .filter(|&t| site.rate[t] > 0.0 && left[t] > 0.0 && site.slots >= 1.0)
                .filter(|&t| loads[t] <= site.capacity)
                .collect()
        })
        .collect()
}

impl<'a> Columns<'a> {
    /// The first columns: for each kind with jobs left, that kind alone
    /// wherever it runs.
    fn seeded(sites: &'a [MixSite], loads: &'a [f64], left: &'a [f64], runs: &'a [Vec<usize>]) -> Self {
        let mut columns = Columns { sites, loads, left, runs, pool: Vec::new() };
        let kinds = loads.len();
        for t in (0..kinds).filter(|&t| left[t] > 0.0) {
            let only_t: Vec<f64> = (0..kinds).map(|u| if u == t { 1.0 } else { 0.0 }).collect();
            columns.add_best(&only_t);
        }
        columns
    }

    /// Jobs one slot of kind `t` at site `i` ends by `T` from now: its
    /// first job starts after the wait, the next as one ends.
    fn ends_by(&self, horizon: f64, i: usize, t: usize) -> f64 {
        let site = &self.sites[i];
        (site.rate[t] * (horizon - site.wait).max(0.0) + ROUNDING).floor()
    }

    /// Per kind, the share of its jobs left that `column` ends by `T`.
    fn shares(&self, horizon: f64, column: &[f64]) -> Vec<f64> {
        let kinds = self.loads.len();
        (0..kinds)
            .map(|t| {
                if self.left[t] <= 0.0 {
                    return 0.0;
                }
                let ends: f64 =
                    (0..self.sites.len()).map(|i| self.ends_by(horizon, i, t) * column[i * kinds + t]).sum();
                ends / self.left[t]
            })
            .collect()
    }

    /// How far the kinds' jobs left can be ended by `T` (`θ ≥ 1` where a
    /// mix ends them all), and the columns' weights in that mix.
    fn programme(&mut self, horizon: f64) -> (f64, Vec<f64>) {
        let kinds = self.loads.len();
        let with_jobs: Vec<usize> = (0..kinds).filter(|&t| self.left[t] > 0.0).collect();
        let mut shares: Vec<Vec<f64>> = self.pool.iter().map(|c| self.shares(horizon, c)).collect();
        loop {
            // max θ: θ − Σ_k λ_k share_kt ≤ 0 for each kind with jobs
            // left, Σ_k λ_k ≤ 1; variables λ_1.., θ.
            let n = self.pool.len() + 1;
            let mut rows: Vec<Vec<f64>> =
                (with_jobs.iter()).map(|&t| shares.iter().map(|s| -s[t]).chain([1.0]).collect()).collect();
            rows.push((0..n).map(|k| if k + 1 < n { 1.0 } else { 0.0 }).collect());
            let mut rhs = vec![0.0; with_jobs.len()];
            rhs.push(1.0);
            let objective: Vec<f64> = (0..n).map(|k| if k + 1 < n { 0.0 } else { 1.0 }).collect();
            let (mut solution, duals) = simplex(&rows, &rhs, &objective);
            let theta = solution[n - 1];
            solution.truncate(n - 1);
            // A new column's reduced cost: what the kinds' prices make of
            // the jobs it ends, less the price of a whole mix.
            let mut prices = vec![0.0; kinds];
            for (r, &t) in with_jobs.iter().enumerate() {
                prices[t] = duals[r] / self.left[t];
            }
            let mix_price = duals[with_jobs.len()];
            let priced: Vec<f64> = (0..self.sites.len())
                .flat_map(|i| (0..kinds).map(move |t| (i, t)))
                .map(|(i, t)| prices[t] * self.ends_by(horizon, i, t))
                .collect();
            let (column, worth) = self.best_column(&priced);
            let improves = worth > mix_price + EPS * mix_price.abs().max(1.0);
            if !improves || shares.len() >= MAX_COLUMNS || self.pool.contains(&column) {
                return (theta, solution);
            }
            shares.push(self.shares(horizon, &column));
            self.pool.push(column);
        }
    }

    /// Adds the best column for prices per kind alike at every site.
    fn add_best(&mut self, per_kind: &[f64]) {
        let priced: Vec<f64> = (0..self.sites.len()).flat_map(|_| per_kind.iter().copied()).collect();
        let (column, _) = self.best_column(&priced);
        self.pool.push(column);
    }

    /// The mix that maximises `Σ priced[i × kinds + t] x_it`, each site at
    /// its best vertex of `Σ x ≤ slots`, `Σ ℓ x ≤ C`, and what it is worth.
    /// A vertex holds one kind (as many as the slots or the load allow) or
    /// two with both bounds met; ties go to the lower kinds.
    fn best_column(&self, priced: &[f64]) -> (Vec<f64>, f64) {
        let kinds = self.loads.len();
        let mut column = vec![0.0; self.sites.len() * kinds];
        let mut worth = 0.0;
        for (i, site) in self.sites.iter().enumerate() {
            let value = |t: usize| priced[i * kinds + t];
            let alone = |t: usize| {
                if self.loads[t] > 0.0 {
                    site.slots.min(site.capacity / self.loads[t])
                } else {
                    site.slots
                }
            };
            // A vertex: up to two kinds and their jobs (none: the origin).
            let mut best = (0.0_f64, [(0, 0.0); 2]);
            let mut consider = |v: f64, jobs: [(usize, f64); 2]| {
                if v > best.0 + EPS * best.0.abs().max(1e-300) {
                    best = (v, jobs);
                }
            };
            for &t in &self.runs[i] {
                consider(value(t) * alone(t), [(t, alone(t)), (t, 0.0)]);
            }
            if site.capacity.is_finite() {
                for &t in &self.runs[i] {
                    for &u in &self.runs[i] {
                        if self.loads[t] <= self.loads[u] {
                            continue;
                        }
                        // x_t + x_u = slots, ℓ_t x_t + ℓ_u x_u = C.
                        let xt =
                            (site.capacity - self.loads[u] * site.slots) / (self.loads[t] - self.loads[u]);
                        let xu = site.slots - xt;
                        if xt > 0.0 && xu > 0.0 {
                            consider(value(t) * xt + value(u) * xu, [(t, xt), (u, xu)]);
                        }
                    }
                }
            }
            for (t, a) in best.1 {
                column[i * kinds + t] += a;
            }
            worth += best.0;
        }
        (column, worth)
    }
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
/// is feasible) and the programme bounded; returns `x` and each row's dual
/// price (what a unit more of its bound is worth). Dantzig's rule, with
/// Bland's smallest index among the ties, which also prevents cycling once
/// degenerate pivots repeat.
fn simplex(a: &[Vec<f64>], b: &[f64], c: &[f64]) -> (Vec<f64>, Vec<f64>) {
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
    let duals = (0..m).map(|r| t[m * w + n + r]).collect();
    (x, duals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simplex_finds_a_textbook_optimum() {
        // max 3x + 5y, x ≤ 4, 2y ≤ 12, 3x + 2y ≤ 18: (2, 6), worth 36.
        let a = vec![vec![1.0, 0.0], vec![0.0, 2.0], vec![3.0, 2.0]];
        let (x, duals) = simplex(&a, &[4.0, 12.0, 18.0], &[3.0, 5.0]);
        assert!((x[0] - 2.0).abs() < 1e-9 && (x[1] - 6.0).abs() < 1e-9, "{x:?}");
        // Its dual: the first bound is slack; 36 = 12 × 3/2 + 18 × 1.
        let expected = [0.0, 1.5, 1.0];
        assert!(duals.iter().zip(expected).all(|(d, e)| (d - e).abs() < 1e-9), "{duals:?}");
    }

    /// θ at `horizon` from the whole programme as one dense simplex, one
    /// variable per (site, kind): what the columns must reach.
    fn dense_theta(sites: &[MixSite], loads: &[f64], left: &[f64], horizon: f64) -> f64 {
        let columns = Columns { sites, loads, left, runs: &[], pool: Vec::new() };
        let vars: Vec<(usize, usize)> = (0..sites.len())
            .flat_map(|i| (0..loads.len()).map(move |t| (i, t)))
            .filter(|&(i, t)| sites[i].rate[t] > 0.0 && left[t] > 0.0 && loads[t] <= sites[i].capacity)
            .collect();
        let n = vars.len() + 1;
        let (mut rows, mut rhs) = (Vec::new(), Vec::new());
        for (i, site) in sites.iter().enumerate() {
            let slots: Vec<f64> =
                (0..n).map(|v| if v < vars.len() && vars[v].0 == i { 1.0 } else { 0.0 }).collect();
            let load: Vec<f64> = (0..n)
                .map(|v| if v < vars.len() && vars[v].0 == i { loads[vars[v].1] } else { 0.0 })
                .collect();
            rows.push(slots);
            rhs.push(site.slots);
            if site.capacity.is_finite() {
                rows.push(load);
                rhs.push(site.capacity);
            }
        }
        for t in (0..loads.len()).filter(|&t| left[t] > 0.0) {
            let mut row: Vec<f64> = (vars.iter())
                .map(|&(i, s)| if s == t { -columns.ends_by(horizon, i, t) / left[t] } else { 0.0 })
                .collect();
            row.push(1.0);
            rows.push(row);
            rhs.push(0.0);
        }
        let objective: Vec<f64> = (0..n).map(|v| if v == n - 1 { 1.0 } else { 0.0 }).collect();
        simplex(&rows, &rhs, &objective).0[n - 1]
    }

    #[test]
    fn the_columns_reach_the_whole_programmes_optimum() {
        // SplitMix64, so that the grids are drawn alike on every machine.
        let mut state = 0x5eed_u64;
        let mut draw = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        };
        for grid in 0..40 {
            let kinds = 2 + grid % 3;
            let loads: Vec<f64> = (0..kinds).map(|_| 0.01 + draw()).collect();
            let left: Vec<f64> = (0..kinds).map(|_| (50.0 + 2000.0 * draw()).floor()).collect();
            let sites: Vec<MixSite> = (0..2 + grid % 7)
                .map(|_| MixSite {
                    slots: (5.0 + 300.0 * draw()).floor(),
                    capacity: if draw() < 0.2 { f64::INFINITY } else { 2.0 + 150.0 * draw() },
                    rate: (0..kinds)
                        .map(|_| if draw() < 0.1 { 0.0 } else { 1.0 / (50.0 + 1000.0 * draw()) })
                        .collect(),
                    wait: 500.0 * draw(),
                })
                .collect();
            let runs = kinds_at(&sites, &loads, &left);
            let mut columns = Columns::seeded(&sites, &loads, &left, &runs);
            for horizon in [800.0, 3000.0, 20_000.0] {
                let by_columns = columns.programme(horizon).0;
                let whole = dense_theta(&sites, &loads, &left, horizon);
                assert!(
                    (by_columns - whole).abs() <= 1e-6 * whole.max(1.0),
                    "grid {grid}, T = {horizon}: θ {by_columns} by columns, {whole} by the whole programme"
                );
            }
        }
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
