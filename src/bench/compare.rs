//! `cosched bench --compare BASE NEW`: two files of `--json` runs set side
//! by side as policies are judged, per grid. A grid's score is its median
//! makespan over the seeds (a hang infinite, [`super::median`]), NEW's over
//! BASE's; over the grids, their geometric mean, how many moved by more
//! than [`MOVED`] either way, and the ones that moved most.
//!
//! Runs pair by (scenario, policy, seed), each at most once in a file (two
//! benches' output in one is refused, not silently paired): only seeds
//! present in both files count, so a file cut short is compared on what it holds, and a policy's
//! runs with `--blind-types` pair with the same policy's without (that is
//! what knowing kinds is worth). Grids where either side hangs are counted,
//! not averaged.

use super::median;
use crate::{CmdResult, Exit, Failure};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// A grid moved where its ratio is past 1 ± this: the "worse (better) by
/// over 2%" that BENCHMARKS.md and docs/experiments.md count grids by.
const MOVED: f64 = 0.02;

/// Grids listed each way.
const LISTED: usize = 5;

/// What the comparison needs of a `--json` line ([`super::RunLine`]).
#[derive(Deserialize)]
struct Run {
    scenario: String,
    policy: String,
    seed: u64,
    makespan: Option<f64>,
    hang: bool,
}

/// Makespans by policy, scenario and seed.
type Runs = BTreeMap<String, BTreeMap<String, BTreeMap<u64, f64>>>;

fn read(path: &Path) -> Result<Runs, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(format!(
            "{}: cannot read it: {e} (give a file written by `cosched bench … --json`)",
            path.display()
        ))
    })?;
    let mut runs = Runs::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let run: Run = serde_json::from_str(line).map_err(|e| {
            Failure::usage(format!(
                "{}:{}: not a run of `cosched bench --json`: {e} (the file must hold only its output, one run per line)",
                path.display(),
                i + 1
            ))
        })?;
        let makespan = match run.makespan {
            Some(m) if !run.hang && m > 0.0 => m,
            _ => f64::INFINITY,
        };
        let seeds = runs.entry(run.policy).or_default().entry(run.scenario).or_default();
        if seeds.insert(run.seed, makespan).is_some() {
            return Err(Failure::usage(format!(
                "{}:{}: a second run of the same policy, scenario and seed (seed {}): give each side the output of one bench",
                path.display(),
                i + 1,
                run.seed
            )));
        }
    }
    Ok(runs)
}

/// One policy's comparison over the grids both files hold for it.
#[derive(Debug, PartialEq)]
struct Comparison {
    policy: String,
    /// (grid, NEW ÷ BASE) where both finish, least first.
    ratios: Vec<(String, f64)>,
    /// Grids where BASE, NEW, or both hang.
    hangs: (usize, usize, usize),
    /// Seeds per grid in both files, least and most.
    seeds: (usize, usize),
}

impl Comparison {
    fn geometric_mean(&self) -> f64 {
        let n = self.ratios.len() as f64;
        (self.ratios.iter().map(|(_, r)| r.ln()).sum::<f64>() / n).exp()
    }
}

/// Every policy both files hold, compared grid by grid.
fn compare(base: &Runs, new: &Runs) -> Vec<Comparison> {
    let mut out = Vec::new();
    for (policy, base_grids) in base {
        let Some(new_grids) = new.get(policy) else { continue };
        let mut c = Comparison {
            policy: policy.clone(),
            ratios: Vec::new(),
            hangs: (0, 0, 0),
            seeds: (usize::MAX, 0),
        };
        for (grid, base_seeds) in base_grids {
            let Some(new_seeds) = new_grids.get(grid) else { continue };
            let (b, n): (Vec<f64>, Vec<f64>) =
                base_seeds.iter().filter_map(|(seed, b)| Some((*b, *new_seeds.get(seed)?))).unzip();
            if b.is_empty() {
                continue;
            }
            c.seeds = (c.seeds.0.min(b.len()), c.seeds.1.max(b.len()));
            let (b, n) = (median(b), median(n));
            match (b.is_finite(), n.is_finite()) {
                (true, true) => c.ratios.push((grid.clone(), n / b)),
                (true, false) => c.hangs.1 += 1,
                (false, true) => c.hangs.0 += 1,
                (false, false) => c.hangs.2 += 1,
            }
        }
        if !c.ratios.is_empty() || c.hangs != (0, 0, 0) {
            c.ratios.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            out.push(c);
        }
    }
    out
}

fn listed(ratios: &[(String, f64)]) -> String {
    ratios.iter().map(|(g, r)| format!("{g} {r:.3}")).collect::<Vec<_>>().join(", ")
}

fn report(comparisons: &[Comparison]) -> String {
    let mut s = String::new();
    for c in comparisons {
        let grids = c.ratios.len() + c.hangs.0 + c.hangs.1 + c.hangs.2;
        let seeds = if c.seeds.0 == c.seeds.1 {
            format!("{}", c.seeds.0)
        } else {
            format!("{}–{}", c.seeds.0, c.seeds.1)
        };
        let _ = writeln!(s, "{}: {grids} grids, {seeds} seed(s) each in both files", c.policy);
        if !c.ratios.is_empty() {
            let rs: Vec<f64> = c.ratios.iter().map(|(_, r)| *r).collect();
            let worse = rs.iter().filter(|&&r| r > 1.0 + MOVED).count();
            let better = rs.iter().filter(|&&r| r < 1.0 - MOVED).count();
            let _ = writeln!(
                s,
                "  NEW ÷ BASE, per grid median makespan: geometric mean {:.4}, median {:.4}; \
                 over {:.0}% slower on {worse}, faster on {better}",
                c.geometric_mean(),
                median(rs),
                MOVED * 100.0
            );
            let slower: Vec<(String, f64)> =
                c.ratios.iter().rev().filter(|(_, r)| *r > 1.0 + MOVED).take(LISTED).cloned().collect();
            let faster: Vec<(String, f64)> =
                c.ratios.iter().filter(|(_, r)| *r < 1.0 - MOVED).take(LISTED).cloned().collect();
            if !slower.is_empty() {
                let _ = writeln!(s, "  most slower: {}", listed(&slower));
            }
            if !faster.is_empty() {
                let _ = writeln!(s, "  most faster: {}", listed(&faster));
            }
        }
        let (base, new, both) = c.hangs;
        if base + new + both > 0 {
            let _ = writeln!(s, "  grids that hang: in BASE only {base}, in NEW only {new}, in both {both}");
        }
    }
    s
}

/// The command: reads both files, prints the comparison of every policy
/// they share.
pub(super) fn command(base_path: &Path, new_path: &Path) -> CmdResult {
    let (base, new) = (read(base_path)?, read(new_path)?);
    let comparisons = compare(&base, &new);
    if comparisons.is_empty() {
        return Err(Failure::usage(format!(
            "{} and {} share no (policy, scenario, seed) run: compare files of the same scenarios and policies",
            base_path.display(),
            new_path.display()
        )));
    }
    print!("{}", report(&comparisons));
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(lines: &[(&str, &str, u64, Option<f64>)]) -> Runs {
        let mut r = Runs::new();
        for &(policy, grid, seed, m) in lines {
            r.entry(policy.into())
                .or_default()
                .entry(grid.into())
                .or_default()
                .insert(seed, m.unwrap_or(f64::INFINITY));
        }
        r
    }

    #[test]
    fn grids_compare_by_their_medians_over_the_seeds_both_files_hold() {
        let base = runs(&[
            ("adaptive", "A", 1, Some(100.0)),
            ("adaptive", "A", 2, Some(120.0)),
            ("adaptive", "A", 3, Some(140.0)),
            ("adaptive", "B", 1, Some(200.0)),
            ("adaptive", "B", 2, Some(220.0)),
            ("adaptive", "B", 3, Some(240.0)),
            ("bulk", "A", 1, Some(50.0)),
        ]);
        let new = runs(&[
            ("adaptive", "A", 1, Some(90.0)),
            ("adaptive", "A", 2, Some(130.0)),
            ("adaptive", "A", 3, Some(150.0)),
            // A seed BASE lacks does not count.
            ("adaptive", "A", 4, Some(1.0)),
            ("adaptive", "B", 1, Some(180.0)),
            ("adaptive", "B", 2, Some(190.0)),
            ("adaptive", "B", 3, Some(200.0)),
        ]);
        let c = compare(&base, &new);
        assert_eq!(c.len(), 1, "bulk is in BASE only: {c:?}");
        // A: 130 / 120; B: 190 / 220.
        let expected = [("B".to_string(), 190.0 / 220.0), ("A".to_string(), 130.0 / 120.0)];
        assert_eq!(c[0].ratios.len(), 2);
        for ((g, r), (eg, er)) in c[0].ratios.iter().zip(&expected) {
            assert_eq!(g, eg);
            assert!((r - er).abs() < 1e-12, "{g}: {r} against {er}");
        }
        assert!((c[0].geometric_mean() - (130.0 / 120.0 * 190.0 / 220.0_f64).sqrt()).abs() < 1e-12);
        assert_eq!(c[0].seeds, (3, 3));
        let text = report(&c);
        assert!(text.contains("faster on 1") && text.contains("slower on 1"), "{text}");
        assert!(text.contains("most slower: A 1.083") && text.contains("most faster: B 0.864"), "{text}");
    }

    #[test]
    fn a_grid_that_hangs_is_counted_not_averaged() {
        let base =
            runs(&[("adaptive", "A", 1, None), ("adaptive", "B", 1, Some(10.0)), ("adaptive", "C", 1, None)]);
        let new = runs(&[
            ("adaptive", "A", 1, Some(5.0)),
            ("adaptive", "B", 1, Some(11.0)),
            ("adaptive", "C", 1, None),
        ]);
        let c = compare(&base, &new);
        assert_eq!(c[0].hangs, (1, 0, 1));
        assert_eq!(c[0].ratios, vec![("B".to_string(), 1.1)]);
    }
}
