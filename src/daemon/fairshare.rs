//! HTCaaS's dynamic fair share (Rho et al., MTAGS '13, equation 1), pure.
//!
//! Several people's runs compete for the same site. Each *demanding* claimant
//! U gets
//!
//! ```text
//! RA(U) = min(demand(U), capacity × weight(U) / Σ weight(p) for p in DU)
//! ```
//!
//! where DU is the set of claimants whose demand is not yet met. A claimant
//! whose demand fits under its share is *satisfied*: it takes exactly its
//! demand, leaves DU, and the capacity it did not need flows to the others,
//! whose shares are then recomputed. This is weighted max-min fairness
//! ("water filling"). The daemon applies it twice per site: between users
//! (weights from the daemon config), then between one user's runs (equal
//! weights).
//!
//! Shares are whole jobs. The fractional parts left over after the last round
//! go one job at a time to the largest remainders, ties to the lower index, so
//! the result is deterministic, never exceeds a claimant's demand, and adds up
//! to `min(capacity, Σ demand)`: no slot is wasted while anyone still wants one.
//!
//! No I/O, no clock: a function of its arguments only.

/// One party competing for a site's capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Claim {
    /// Jobs it would have out at the site if nothing held it back.
    pub demand: u64,
    /// Its relative weight (> 0; a non-positive or non-finite weight gets nothing).
    pub weight: f64,
}

impl Claim {
    pub fn new(demand: u64, weight: f64) -> Self {
        Claim { demand, weight }
    }
}

/// Splits `capacity` between `claims` by equation 1 with redistribution.
/// Returns one allotment per claim, in the same order.
pub fn allot(capacity: u64, claims: &[Claim]) -> Vec<u64> {
    let mut allotment = vec![0u64; claims.len()];
    let valid = |c: &Claim| c.demand > 0 && c.weight.is_finite() && c.weight > 0.0;
    let mut demanding: Vec<usize> = (0..claims.len()).filter(|&i| valid(&claims[i])).collect();
    let mut left = capacity;
    // Each round either satisfies at least one claimant (and so shrinks DU) or
    // is the last one, so this runs at most claims.len() + 1 times.
    loop {
        if demanding.is_empty() || left == 0 {
            return allotment;
        }
        let total_weight: f64 = demanding.iter().map(|&i| claims[i].weight).sum();
        let share = |i: usize| left as f64 * claims[i].weight / total_weight;
        let (satisfied, unsatisfied): (Vec<usize>, Vec<usize>) =
            demanding.iter().partition(|&&i| claims[i].demand as f64 <= share(i));
        if satisfied.is_empty() {
            // Nobody fits under their share: everyone left gets exactly it.
            let exact: Vec<f64> = demanding.iter().map(|&i| share(i)).collect();
            let mut given = 0u64;
            for (k, &i) in demanding.iter().enumerate() {
                allotment[i] = exact[k].floor() as u64;
                given += allotment[i];
            }
            let mut order: Vec<usize> = (0..demanding.len()).collect();
            order.sort_by(|&a, &b| {
                let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
                rb.partial_cmp(&ra).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
            });
            let mut spare = left.saturating_sub(given);
            for k in order {
                if spare == 0 {
                    break;
                }
                let i = demanding[k];
                if allotment[i] < claims[i].demand {
                    allotment[i] += 1;
                    spare -= 1;
                }
            }
            return allotment;
        }
        for &i in &satisfied {
            allotment[i] = claims[i].demand;
            left -= claims[i].demand;
        }
        demanding = unsatisfied;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn equal(demands: &[u64]) -> Vec<Claim> {
        demands.iter().map(|&d| Claim::new(d, 1.0)).collect()
    }

    // The worked example of section 2.2 of the HTCaaS paper, 100 cores.
    #[test]
    fn paper_example_single_user_takes_everything() {
        assert_eq!(allot(100, &equal(&[200])), vec![100]);
    }

    #[test]
    fn paper_example_second_user_halves_the_first() {
        // A has 200 tasks, B arrives with 50: 100/2 = 50 each.
        assert_eq!(allot(100, &equal(&[200, 50])), vec![50, 50]);
    }

    #[test]
    fn paper_example_small_user_is_satisfied_and_the_rest_flows_back() {
        // A still wants 100, C arrives with 20, B (50) still holds its cores:
        // share 33.3 each; C fits (20), leaving 80 for A and B: 40 each.
        assert_eq!(allot(100, &equal(&[100, 50, 20])), vec![40, 40, 20]);
        // Once B is done, C keeps 20 and A takes the remaining 80.
        assert_eq!(allot(100, &equal(&[100, 0, 20])), vec![80, 0, 20]);
    }

    #[test]
    fn released_capacity_cascades_over_several_rounds() {
        // 90 over four: share 22.5; D (5) fits → 85 over three: 28.3; C (25)
        // fits → 60 over two: 30; B (40) does not, A (100) does not: 30 each.
        assert_eq!(allot(90, &equal(&[100, 40, 25, 5])), vec![30, 30, 25, 5]);
    }

    #[test]
    fn weights_scale_shares() {
        // Weight 2 against 1 on 90 slots: 60 and 30.
        let claims = [Claim::new(1000, 2.0), Claim::new(1000, 1.0)];
        assert_eq!(allot(90, &claims), vec![60, 30]);
        // The heavy user needs only 10: the light one gets the other 80.
        let claims = [Claim::new(10, 2.0), Claim::new(1000, 1.0)];
        assert_eq!(allot(90, &claims), vec![10, 80]);
    }

    #[test]
    fn remainders_go_to_the_largest_fraction_then_the_lower_index() {
        // 10 over three equal: 3.33 each, one spare job to index 0.
        assert_eq!(allot(10, &equal(&[50, 50, 50])), vec![4, 3, 3]);
        // Weights 1:2 on 10: 3.33 and 6.67 → the larger fraction wins the spare.
        let claims = [Claim::new(50, 1.0), Claim::new(50, 2.0)];
        assert_eq!(allot(10, &claims), vec![3, 7]);
    }

    #[test]
    fn nothing_is_wasted_while_someone_wants_more() {
        assert_eq!(allot(100, &equal(&[30, 30])), vec![30, 30]);
        assert_eq!(allot(7, &equal(&[3, 100])), vec![3, 4]);
        assert_eq!(allot(0, &equal(&[3, 100])), vec![0, 0]);
        assert_eq!(allot(5, &[]), Vec::<u64>::new());
    }

    #[test]
    fn bad_weights_get_nothing() {
        let claims = [Claim::new(10, 0.0), Claim::new(10, f64::NAN), Claim::new(10, 1.0)];
        assert_eq!(allot(20, &claims), vec![0, 0, 10]);
    }

    #[test]
    fn allotments_add_up_and_respect_demand_for_many_cases() {
        // A small deterministic generator, so the case list is fixed.
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for case in 0..2000 {
            let n = next(6) as usize;
            let capacity = next(200);
            let claims: Vec<Claim> = (0..n).map(|_| Claim::new(next(120), 1.0 + next(4) as f64)).collect();
            let a = allot(capacity, &claims);
            let want: u64 = claims.iter().map(|c| c.demand).sum();
            assert_eq!(a.iter().sum::<u64>(), capacity.min(want), "case {case}: {claims:?} → {a:?}");
            for (c, got) in claims.iter().zip(&a) {
                assert!(*got <= c.demand, "case {case}: {claims:?} → {a:?}");
            }
            // Max-min: an unsatisfied claimant never gets less per weight than
            // anyone else (up to one job of rounding on either side).
            for (i, ci) in claims.iter().enumerate() {
                if a[i] < ci.demand {
                    for (j, cj) in claims.iter().enumerate() {
                        let (ni, nj) = (a[i] as f64 / ci.weight, a[j] as f64 / cj.weight);
                        assert!(
                            ni + 1.0 / ci.weight + 1.0 / cj.weight + 1e-9 >= nj,
                            "case {case}: {i} starved relative to {j}: {claims:?} → {a:?}"
                        );
                    }
                }
            }
        }
    }
}
