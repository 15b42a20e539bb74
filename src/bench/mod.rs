//! `cosched bench`: every (scenario, policy, seed) on the simulated grid, in
//! parallel across cores, summarised against the `oracle` and `bulk`
//! baselines measured in the same invocation (never against stored numbers).
//!
//! Each run gets its own OS thread's current-thread runtime with a paused
//! clock ([`crate::sim::run`]), so runs are independent and deterministic;
//! only the bench itself reads the wall clock, to report simulator speed.
//! A run that breaks a conservation rule is reported as an error (exit 1).

mod compare;
mod family;

use crate::policy::{self, CapacityMemory, DecisionKind, PolicyConfig};
use crate::sim::{self, Scenario, SimOptions, SimResult};
use crate::{CmdResult, Exit, Failure};
use clap::Args;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Scenario file (schema of shared/scenarios/scenarios.toml).
    #[arg(required_unless_present = "compare")]
    pub scenarios: Option<PathBuf>,
    /// Run nothing: compare two files of `--json` runs, per grid NEW's
    /// median makespan over the seeds both hold ÷ BASE's, for every policy
    /// both hold (a policy's `--blind-types` runs pair with its own).
    #[arg(long, num_args = 2, value_names = ["BASE", "NEW"],
          conflicts_with_all = ["scenario", "policy", "json", "trace", "warm", "warm_runs", "chart", "summary_only", "blind_types"])]
    pub compare: Option<Vec<PathBuf>>,
    /// Scenario names to run (default: all).
    #[arg(long)]
    pub scenario: Vec<String>,
    /// Policies to run (default: all, in the order listed below;
    /// `late-oracle` is the yardstick of what a policy that learns could reach).
    #[arg(long)]
    pub policy: Vec<String>,
    /// Seeds, as a range or list: 1-5, 3, 1,4,9.
    #[arg(long, default_value = "1-5")]
    pub seeds: String,
    /// One JSON object per run instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print every decision of the (single) run selected: actions, and the
    /// windows (for `adaptive`, also the verdicts) behind them.
    #[arg(long)]
    pub trace: bool,
    /// Run each (scenario, seed) twice and report the second run, warm-started
    /// from what the first learned.
    #[arg(long)]
    pub warm: bool,
    /// Like --warm, with N warm runs after the cold one, each started from
    /// what the run before it learned; the last is reported (as a user who
    /// runs the same jobs again and again would see it).
    #[arg(long, value_name = "N")]
    pub warm_runs: Option<u32>,
    /// Write an SVG chart comparing policies to this file.
    #[arg(long)]
    pub chart: Option<PathBuf>,
    /// Worker threads (default: number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print only the family summary, not a line per scenario and policy.
    #[arg(long)]
    pub summary_only: bool,
    /// Tell every policy that all jobs are of one kind, while the sites
    /// still run each as its kind: what knowing kinds is worth (scenarios
    /// with `types`; a scenario of one kind runs as without it).
    #[arg(long)]
    pub blind_types: bool,
}

/// One run to do.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    scenario: usize,
    policy: String,
    seed: u64,
    /// Asked for on the command line (baselines may be run only for ratios).
    shown: bool,
}

/// One run's line of `--json`.
#[derive(Debug, Serialize)]
pub struct RunLine<'a> {
    pub scenario: &'a str,
    pub policy: &'a str,
    pub seed: u64,
    pub warm: bool,
    /// Warm runs before this one was reported (0: a cold run).
    pub warm_runs: u32,
    pub makespan: Option<f64>,
    pub mean_turnaround: f64,
    pub p95_turnaround: f64,
    pub mean_completion: f64,
    pub goodput_area: f64,
    pub wasted_area: f64,
    pub jobs_done: u64,
    pub hang: bool,
    pub events: u64,
    /// Times the policy was woken (site events and its own deadlines).
    pub wakeups: u64,
    pub sites: &'a [sim::SiteMetrics],
    /// Per kind of job, for a scenario of several kinds only.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub types: &'a [sim::TypeMetrics],
    /// The policy was told every job is of one kind (`--blind-types`);
    /// present only then.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub blind_types: bool,
    pub errors: &'a [String],
}

/// Parses `1-5`, `3`, `1,4,9` or `1-3,7` into seeds, in the order given.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    let mut seeds = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = || format!("bad --seeds part {part:?}: use e.g. 1-5, 3 or 1,4,9");
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (u64, u64) =
                (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
            if a > b || b - a > 100_000 {
                return Err(bad());
            }
            seeds.extend(a..=b);
        } else {
            seeds.push(part.parse().map_err(|_| bad())?);
        }
    }
    if seeds.is_empty() {
        return Err("--seeds names no seed".into());
    }
    Ok(seeds)
}

pub fn command(args: BenchArgs) -> CmdResult {
    let scenarios_path = match (&args.compare, &args.scenarios) {
        (Some(files), _) => return compare::command(&files[0], &files[1]),
        (None, Some(path)) => path.clone(),
        (None, None) => return Err(Failure::usage("bench needs a scenario file (or --compare BASE NEW)")),
    };
    let all = sim::load_scenarios(&scenarios_path).map_err(Failure::usage)?;
    let mut scenarios: Vec<(String, Scenario)> = Vec::new();
    if args.scenario.is_empty() {
        scenarios = all;
    } else {
        for name in &args.scenario {
            let found = all.iter().find(|(n, _)| n == name).ok_or_else(|| {
                let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
                Failure::usage(format!(
                    "{}: no scenario {name:?}; the file has {}",
                    scenarios_path.display(),
                    names.join(", ")
                ))
            })?;
            scenarios.push(found.clone());
        }
    }
    let policies: Vec<String> = if args.policy.is_empty() {
        policy::POLICIES.iter().map(|p| p.name.to_string()).collect()
    } else {
        args.policy.clone()
    };
    for p in &policies {
        PolicyConfig::lookup(p).map_err(Failure::usage)?;
    }
    let seeds = parse_seeds(&args.seeds).map_err(Failure::usage)?;
    let warm_runs = match args.warm_runs {
        Some(0) => return Err(Failure::usage("--warm-runs counts warm runs after the cold one: 1 or more")),
        Some(n) => n,
        None => u32::from(args.warm),
    };
    let warm = warm_runs > 0;
    if args.trace && scenarios.len() * policies.len() * seeds.len() != 1 {
        return Err(Failure::usage(
            "--trace prints one run: select one --scenario, one --policy and one seed (e.g. --seeds 1)",
        ));
    }

    // The table's ratios need the baselines measured here too.
    let mut tasks = Vec::new();
    for (si, _) in scenarios.iter().enumerate() {
        for seed in &seeds {
            for p in &policies {
                tasks.push(Task { scenario: si, policy: p.clone(), seed: *seed, shown: true });
            }
            if !args.json && !args.trace {
                for base in ["bulk", "oracle"] {
                    if !policies.iter().any(|p| p == base) {
                        tasks.push(Task { scenario: si, policy: base.into(), seed: *seed, shown: false });
                    }
                }
            }
        }
    }
    let opts = SimOptions {
        trace: args.trace,
        blind_types: args.blind_types,
        keep_attempts: false,
        ..SimOptions::default()
    };
    let threads =
        args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    #[allow(clippy::disallowed_methods)] // wall time of the simulator itself, for runs/s
    let started = std::time::Instant::now();
    let (results, walls) = run_all(&scenarios, &tasks, &opts, warm_runs, threads);
    let wall = started.elapsed().as_secs_f64();

    let mut errors = 0;
    for (task, r) in tasks.iter().zip(&results) {
        for e in &r.errors {
            errors += 1;
            eprintln!("error: {} {} seed {}: {e}", scenarios[task.scenario].0, task.policy, task.seed);
        }
    }
    if args.trace {
        let (name, scenario) = &scenarios[tasks[0].scenario];
        print!("{}", trace_text(name, scenario, &tasks[0], &results[0]));
    } else if args.json {
        for (task, r) in tasks.iter().zip(&results).filter(|(t, _)| t.shown) {
            let line = run_line(&scenarios[task.scenario].0, task, r, warm_runs, args.blind_types);
            println!("{}", serde_json::to_string(&line).expect("run lines serialise"));
        }
    } else {
        if !args.summary_only {
            print!("{}", table(&scenarios, &policies, &tasks, &results, warm));
        }
        if scenarios.len() > 1 {
            print!("{}", family::summary(&scenarios, &policies, &tasks, &results));
        }
    }
    let events: u64 = results.iter().map(|r| r.events).sum();
    let runs = results.len() * (1 + warm_runs as usize);
    eprintln!(
        "{runs} simulated runs in {wall:.2} s on {threads} thread(s): {:.1} runs/s, {:.0} events/s",
        runs as f64 / wall.max(1e-9),
        events as f64 * f64::from(1 + warm_runs) / wall.max(1e-9)
    );
    let mut slowest: Vec<usize> = (0..tasks.len()).collect();
    slowest.sort_by(|&a, &b| walls[b].total_cmp(&walls[a]));
    let slowest: Vec<String> = slowest
        .iter()
        .take(3)
        .filter(|&&i| walls[i] >= 1.0)
        .map(|&i| {
            let t = &tasks[i];
            format!("{} {} seed {} {:.1} s", scenarios[t.scenario].0, t.policy, t.seed, walls[i])
        })
        .collect();
    if !slowest.is_empty() {
        eprintln!("slowest runs: {}", slowest.join(", "));
    }
    for (t, r) in tasks.iter().zip(&results).filter(|(_, r)| crate::sim::woken_too_often(r.wakeups, r.events))
    {
        eprintln!(
            "warning: {} {} seed {}: the policy was woken {} times for {} site events (a deadline that keeps \
             coming due?)",
            scenarios[t.scenario].0, t.policy, t.seed, r.wakeups, r.events
        );
    }
    if let Some(path) = &args.chart {
        let rows = chart_rows(&scenarios, &policies, &tasks, &results);
        std::fs::write(path, crate::report::bench_chart(&rows))
            .map_err(|e| Failure::failed(format!("{}: cannot write the chart: {e}", path.display())))?;
    }
    if errors > 0 {
        return Err(Failure::failed(format!(
            "{errors} error(s) in simulated runs (conservation or livelock); see above"
        )));
    }
    Ok(Exit::Ok)
}

/// Runs every task on `threads` OS threads, each run on its own runtime.
fn run_all(
    scenarios: &[(String, Scenario)],
    tasks: &[Task],
    opts: &SimOptions,
    warm_runs: u32,
    threads: usize,
) -> (Vec<SimResult>, Vec<f64>) {
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<(SimResult, f64)>>> = Mutex::new(vec![None; tasks.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads.min(tasks.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(task) = tasks.get(i) else { break };
                let scenario = &scenarios[task.scenario].1;
                let config = PolicyConfig::named(&task.policy).expect("policy names were checked");
                #[allow(clippy::disallowed_methods)] // wall time of one simulated run
                let started = std::time::Instant::now();
                let mut result = sim::run(scenario, &config, task.seed, opts);
                for _ in 0..warm_runs {
                    let memory: CapacityMemory = result.learned.clone();
                    let warm_opts = SimOptions { memory, ..opts.clone() };
                    result = sim::run(scenario, &config, task.seed, &warm_opts);
                }
                let wall = started.elapsed().as_secs_f64();
                // The bench shows metrics, never a job: at 10^6 jobs those
                // are 48 MB per run held to the end.
                result.jobs = Vec::new();
                release_freed_memory();
                slots.lock().expect("results lock")[i] = Some((result, wall));
            });
        }
    });
    slots.into_inner().expect("results lock").into_iter().map(|r| r.expect("every task ran")).unzip()
}

/// Hands the pages of freed heap memory back to the system. glibc keeps
/// what a run freed (some 280 MB at 10^6 jobs) mapped in its arena, in
/// pieces the next run's allocations do not fill, so a table's runs one
/// after another peaked well above the largest run alone (BENCHMARKS.md,
/// "Memory at scale"). Nothing a run computes depends on it.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system; it
    // touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn run_line<'a>(
    scenario: &'a str,
    task: &'a Task,
    r: &'a SimResult,
    warm_runs: u32,
    blind_types: bool,
) -> RunLine<'a> {
    let m = &r.metrics;
    RunLine {
        scenario,
        policy: &task.policy,
        seed: task.seed,
        warm: warm_runs > 0,
        warm_runs,
        makespan: m.makespan,
        mean_turnaround: m.mean_turnaround,
        p95_turnaround: m.p95_turnaround,
        mean_completion: m.mean_completion,
        goodput_area: m.goodput_area,
        wasted_area: m.wasted_area,
        jobs_done: m.jobs_done,
        hang: r.hang,
        events: r.events,
        wakeups: r.wakeups,
        sites: &m.sites,
        types: &m.types,
        blind_types,
        errors: &r.errors,
    }
}

/// The median makespan of a policy on a scenario (nearest rank, as every
/// quantile: [`crate::stats`]); a hang counts as infinite, so a policy that
/// hangs on most seeds has an infinite median.
pub(crate) fn median_makespan(runs: &[&SimResult]) -> f64 {
    median(runs.iter().map(|r| r.metrics.makespan.unwrap_or(f64::INFINITY)).collect())
}

/// A grid's makespan over its seeds, a hang infinite: the nearest-rank
/// median, as every quantile of cosched (`crate::stats`).
pub(crate) fn median(mut makespans: Vec<f64>) -> f64 {
    makespans.sort_by(f64::total_cmp);
    crate::stats::nearest_rank(&makespans, 0.5).unwrap_or(f64::NAN)
}

pub(crate) fn runs_of<'a>(
    tasks: &[Task],
    results: &'a [SimResult],
    scenario: usize,
    policy: &str,
) -> Vec<&'a SimResult> {
    tasks
        .iter()
        .zip(results)
        .filter(|(t, _)| t.scenario == scenario && t.policy == policy)
        .map(|(_, r)| r)
        .collect()
}

fn fmt_secs(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.0}")
    } else {
        "hang".into()
    }
}

fn fmt_ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "-".into()
    }
}

fn table(
    scenarios: &[(String, Scenario)],
    policies: &[String],
    tasks: &[Task],
    results: &[SimResult],
    warm: bool,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<9} {:<9} {:>9} {:>7} {:>6} {:>9} {:>9} {:>10} {:>5}  sites: peak running, capacity found/true knee{}",
        "scenario",
        "policy",
        "makespan",
        "/oracle",
        "/bulk",
        "turn.mean",
        "turn.p95",
        "completion",
        "hangs",
        if warm { " (warm runs)" } else { "" }
    );
    for (si, (name, _)) in scenarios.iter().enumerate() {
        let oracle = median_makespan(&runs_of(tasks, results, si, "oracle"));
        let bulk = median_makespan(&runs_of(tasks, results, si, "bulk"));
        for p in policies {
            let runs = runs_of(tasks, results, si, p);
            let n = runs.len().max(1) as f64;
            let median = median_makespan(&runs);
            let hangs = runs.iter().filter(|r| r.hang).count();
            let mean_of = |f: &dyn Fn(&SimResult) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / n;
            let mut sites = String::new();
            if let Some(first) = runs.first() {
                for (i, s) in first.metrics.sites.iter().enumerate() {
                    let peak = runs.iter().map(|r| r.metrics.sites[i].peak_concurrency).max().unwrap_or(0);
                    let mut caps: Vec<f64> =
                        runs.iter().filter_map(|r| r.metrics.sites[i].converged_capacity).collect();
                    caps.sort_by(f64::total_cmp);
                    let cap = caps.get(caps.len() / 2).map_or("-".to_string(), |c| format!("{c:.0}"));
                    let _ = write!(sites, " {} {peak} {cap}/{};", s.name, s.true_knee);
                }
            }
            let _ = writeln!(
                out,
                "{:<9} {:<9} {:>9} {:>7} {:>6} {:>9.0} {:>9.0} {:>10.0} {:>5} {}",
                name,
                p,
                fmt_secs(median),
                fmt_ratio(median, oracle),
                fmt_ratio(median, bulk),
                mean_of(&|r| r.metrics.mean_turnaround),
                mean_of(&|r| r.metrics.p95_turnaround),
                mean_of(&|r| r.metrics.mean_completion),
                format!("{hangs}/{}", runs.len()),
                sites.trim_end_matches(';')
            );
            if let Some(line) = types_line(&runs) {
                let _ = writeln!(out, "{:<9} {:<9} {line}", "", "");
            }
        }
    }
    out
}

/// Each kind's median makespan and mean completion over the runs, for a
/// scenario of several kinds (`None` otherwise).
fn types_line(runs: &[&SimResult]) -> Option<String> {
    let first = runs.first()?;
    if first.metrics.types.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    for (t, kind) in first.metrics.types.iter().enumerate() {
        let mut makespans: Vec<f64> =
            runs.iter().map(|r| r.metrics.types[t].makespan.unwrap_or(f64::INFINITY)).collect();
        makespans.sort_by(f64::total_cmp);
        let median = crate::stats::nearest_rank(&makespans, 0.5).unwrap_or(f64::NAN);
        let completion =
            runs.iter().map(|r| r.metrics.types[t].mean_completion).sum::<f64>() / runs.len() as f64;
        parts.push(format!("{} {} (completion {completion:.0})", kind.name, fmt_secs(median)));
    }
    Some(format!("by type: {}", parts.join("; ")))
}

fn chart_rows(
    scenarios: &[(String, Scenario)],
    policies: &[String],
    tasks: &[Task],
    results: &[SimResult],
) -> Vec<crate::report::BenchRow> {
    let mut rows = Vec::new();
    for (si, (name, _)) in scenarios.iter().enumerate() {
        for p in policies {
            let m = median_makespan(&runs_of(tasks, results, si, p));
            rows.push(crate::report::BenchRow {
                scenario: name.clone(),
                policy: p.clone(),
                makespan_s: m.is_finite().then_some(m),
            });
        }
    }
    rows
}

fn trace_text(name: &str, scenario: &Scenario, task: &Task, r: &SimResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {name} {} seed {}: every decision", task.policy, task.seed);
    let _ = writeln!(out, "{:>10}  {:<10} {:<8} {:>5}  reason", "time", "site", "action", "jobs");
    // The verdicts and windows behind the actions, merged in time order
    // (a decision before the actions it caused at the same instant).
    let decisions = r.decisions.iter().map(|d| {
        let (action, jobs, why) = match d.kind {
            DecisionKind::Verdict { healthy: true, level, .. } => ("verdict", level, "healthy".to_string()),
            DecisionKind::Verdict { healthy: false, level, slowdown } => (
                "verdict",
                level,
                slowdown.map_or("degraded".to_string(), |s| {
                    format!("degraded: jobs ran at least {s:.2}× slower")
                }),
            ),
            DecisionKind::Window { window, capacity } => (
                "window",
                window,
                capacity.map_or("no capacity found yet".to_string(), |c| format!("capacity found {c:.0}")),
            ),
        };
        // A kind's own window or verdict says whose, as the actions do.
        let why = d.job_kind.as_ref().map_or(why.clone(), |kind| format!("{kind}: {why}"));
        (d.at, Some(d.site), action, format!("{jobs:.0}"), why)
    });
    let actions = r.trace.iter().map(|e| (e.time, e.site, e.action, e.jobs.to_string(), e.why.clone()));
    let mut lines: Vec<_> = decisions.chain(actions).collect();
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (time, site, action, jobs, why) in lines {
        let site = site.map_or("-", |s| scenario.sites.get(s.index()).map_or("?", |p| p.name.as_str()));
        let _ = writeln!(out, "{time:>10.1}  {site:<10} {action:<8} {jobs:>5}  {why}");
    }
    let _ = writeln!(
        out,
        "# makespan {}, {} jobs done{}",
        r.metrics.makespan.map_or("hang".to_string(), |m| format!("{m:.0} s")),
        r.metrics.jobs_done,
        if r.hang { ", HANG" } else { "" }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_ranges_and_lists() {
        assert_eq!(parse_seeds("1-5").unwrap(), vec![1, 2, 3, 4, 5]);
        assert_eq!(parse_seeds("3").unwrap(), vec![3]);
        assert_eq!(parse_seeds("1,4,9").unwrap(), vec![1, 4, 9]);
        assert_eq!(parse_seeds("1-2,7").unwrap(), vec![1, 2, 7]);
        assert!(parse_seeds("5-1").is_err());
        assert!(parse_seeds("x").is_err());
        assert!(parse_seeds("").is_err());
    }
}
