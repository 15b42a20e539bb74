//! The family summary of `cosched bench`: how each policy fares across many
//! grids at once, which is how policies are judged (a rule that only helps
//! one named scenario shows up here as noise, not as progress).
//!
//! Per grid a policy's score is its median makespan over the seeds divided by
//! the oracle's median on the same grid (and by bulk's, where bulk finishes).
//! Grids are split by how many waves of jobs they hold — `n_jobs` over the
//! summed throughput-optimal concurrency `Σ min(slots, C)` of the live sites
//! — because throttling only pays off once a grid runs several waves; with a
//! single wave even a perfect search costs up to one probing round.

use super::{median_makespan, runs_of, Task};
use crate::sim::{Scenario, SimResult};
use std::fmt::Write as _;

/// Waves of jobs a grid holds: jobs over the live sites' summed knees.
pub fn waves(scenario: &Scenario) -> f64 {
    let knees: f64 =
        scenario.sites.iter().filter(|s| !s.dead).map(|s| f64::from(s.slots).min(s.capacity.value())).sum();
    if knees > 0.0 {
        scenario.n_jobs() as f64 / knees
    } else {
        f64::INFINITY
    }
}

/// One policy's score on one grid.
#[derive(Clone, Debug)]
struct Score {
    grid: usize,
    vs_oracle: f64,
    /// `None` where bulk hangs.
    vs_bulk: Option<f64>,
    hangs: usize,
    runs_with_errors: usize,
    /// Hangs where none is excusable: any policy but bulk and jobrouter, or a
    /// grid without a dead site.
    bad_hangs: usize,
}

/// [`crate::stats::nearest_rank`]; NaN (printed "-") for no grids.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    crate::stats::nearest_rank(sorted, q).unwrap_or(f64::NAN)
}

fn fmt(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x.is_finite() {
        format!("{x:.2}")
    } else {
        "hang".into()
    }
}

/// The text of the summary: one block per wave class, one line per policy,
/// then each policy's worst grids.
pub fn summary(
    scenarios: &[(String, Scenario)],
    policies: &[String],
    tasks: &[Task],
    results: &[SimResult],
) -> String {
    let mut scores: Vec<(String, Vec<Score>)> = Vec::new();
    for p in policies {
        let mut list = Vec::new();
        for (gi, (_, sc)) in scenarios.iter().enumerate() {
            let runs = runs_of(tasks, results, gi, p);
            if runs.is_empty() {
                continue;
            }
            let oracle = median_makespan(&runs_of(tasks, results, gi, "oracle"));
            let bulk = median_makespan(&runs_of(tasks, results, gi, "bulk"));
            let mine = median_makespan(&runs);
            let ratio = |base: f64| if mine.is_finite() { mine / base } else { f64::INFINITY };
            let hangs = runs.iter().filter(|r| r.hang).count();
            let excusable = (p == "bulk" || p == "jobrouter") && sc.sites.iter().any(|s| s.dead);
            list.push(Score {
                grid: gi,
                vs_oracle: ratio(oracle),
                vs_bulk: bulk.is_finite().then(|| ratio(bulk)),
                hangs,
                runs_with_errors: runs.iter().filter(|r| !r.errors.is_empty()).count(),
                bad_hangs: if excusable { 0 } else { hangs },
            });
        }
        scores.push((p.clone(), list));
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nfamily summary: {} grids; per grid, median makespan over seeds ÷ the oracle's (÷ bulk's where bulk \
         finishes)",
        scenarios.len()
    );
    type Class = (&'static str, fn(f64) -> bool);
    let classes: [Class; 3] =
        [("grids of ≥ 3 waves", |w| w >= 3.0), ("grids of < 3 waves", |w| w < 3.0), ("all grids", |_| true)];
    for (label, keep) in classes {
        let chosen: Vec<usize> = (0..scenarios.len()).filter(|&g| keep(waves(&scenarios[g].1))).collect();
        let _ = writeln!(out, "{label} ({}):", chosen.len());
        let _ = writeln!(
            out,
            "  {:<10} {:>7} {:>7} {:>7}   {:>7} {:>7} {:>7} {:>5}   {:>5} {:>9} {:>6}",
            "policy", "÷oracle", "p90", "worst", "÷bulk", "p90", "worst", "n", "hangs", "bad hangs", "errors"
        );
        for (p, list) in &scores {
            let picked: Vec<&Score> = list.iter().filter(|s| chosen.contains(&s.grid)).collect();
            let mut vo: Vec<f64> = picked.iter().map(|s| s.vs_oracle).collect();
            vo.sort_by(f64::total_cmp);
            let mut vb: Vec<f64> = picked.iter().filter_map(|s| s.vs_bulk).collect();
            vb.sort_by(f64::total_cmp);
            let _ = writeln!(
                out,
                "  {:<10} {:>7} {:>7} {:>7}   {:>7} {:>7} {:>7} {:>5}   {:>5} {:>9} {:>6}",
                p,
                fmt(quantile(&vo, 0.5)),
                fmt(quantile(&vo, 0.9)),
                fmt(vo.last().copied().unwrap_or(f64::NAN)),
                fmt(quantile(&vb, 0.5)),
                fmt(quantile(&vb, 0.9)),
                fmt(vb.last().copied().unwrap_or(f64::NAN)),
                vb.len(),
                picked.iter().map(|s| s.hangs).sum::<usize>(),
                picked.iter().map(|s| s.bad_hangs).sum::<usize>(),
                picked.iter().map(|s| s.runs_with_errors).sum::<usize>(),
            );
        }
    }
    let _ = writeln!(out, "worst grids (÷oracle, waves):");
    for (p, list) in &scores {
        if p == "oracle" {
            continue;
        }
        let mut worst: Vec<&Score> = list.iter().collect();
        worst.sort_by(|a, b| b.vs_oracle.total_cmp(&a.vs_oracle));
        let names: Vec<String> = worst
            .iter()
            .take(5)
            .map(|s| {
                let (name, sc) = &scenarios[s.grid];
                format!("{name} {} ({:.1})", fmt(s.vs_oracle), waves(sc))
            })
            .collect();
        let _ = writeln!(out, "  {:<10} {}", p, names.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::parse_scenarios;

    #[test]
    fn waves_count_live_sites_at_their_knee_or_slots() {
        let text = r#"
[scenarios.g]
n_jobs = 600
base_runtime = 100
sites = [
  { name = "a", slots = 100, capacity = 50 },
  { name = "b", slots = 150 },
  { name = "x", slots = 300, dead = true },
]
"#;
        let sc = &parse_scenarios(text).unwrap()[0].1;
        // 50 (knee below slots) + 150 (no knee): 200 jobs a wave; the dead site adds nothing.
        assert!((waves(sc) - 3.0).abs() < 1e-12, "{}", waves(sc));
    }

    #[test]
    fn quantiles_are_nearest_rank_and_hangs_sort_last() {
        let v = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, f64::INFINITY];
        assert_eq!(quantile(&v, 0.5), 1.4);
        assert_eq!(quantile(&v, 0.9), 1.8);
        assert_eq!(fmt(v[9]), "hang");
    }
}
