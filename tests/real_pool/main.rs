//! cosched against a real HTCondor 25 pool (`../shared/htcondor`): the
//! integration suite of issues 14 and 17.
//!
//! This binary owns the pools: it starts them with `pool.sh` before the
//! first case and stops them after the last, also when a case fails (each
//! case runs under `catch_unwind`, and a pool's `Drop` stops it). That is why
//! it has its own `main` (`harness = false` in Cargo.toml) instead of
//! libtest, whose threads would each need a pool and nothing would own its
//! end.
//!
//! Cases run in lanes, each on a pool of its own size, and the lanes side by
//! side: the behaviour cases on 16 slots; the knee cases of issue 56 on 96
//! slots and on 16, and the two-kinds case of issue 55 on 48 (those measure
//! makespans, so each has its pool to itself while it runs). Within a lane, phases run one after the other, and the
//! cases of a phase side by side (each in its own directory, ledger and state
//! directory); the ones that disturb the whole pool (the schedd stopped) run
//! in a phase alone. Every job appends `start`/`end` lines to its case's
//! ledger, so executions are counted, not outputs.
//!
//! Needs root (pool.sh creates the accounts `condor` and `cosched-test`). Not
//! root, or a pool that cannot start: one line saying so and a failure, so CI
//! never passes without it. `COSCHED_REAL_POOL=skip` skips the suite (one
//! line, success) on a developer's machine without root; CI never sets it.
//! `COSCHED_REAL_POOL=CASE,CASE` runs only the named cases.
//! `COSCHED_REAL_POOL_KEEP=1` keeps each pool's directory (the cases' logs,
//! ledgers and run directories) once the pool is stopped. The cases that
//! assert targets the default policy does not meet yet (`Lane::awaiting_policy`:
//! issue 56's knee-below case, issue 55's two kinds) run when named or with
//! `COSCHED_REAL_POOL_KNEES=1`, not by default; issue 56's knee-above,
//! search-pays and healthy cases run by default.

// Real processes on a real pool: wall-clock deadlines are the point here.
#![allow(clippy::disallowed_methods)]

mod cases;
mod knee;
mod pool;
mod twokinds;

use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::time::Instant;

/// A case: its name and body.
pub type CaseFn = fn(&pool::Pool);

fn main() -> ExitCode {
    let setting = std::env::var("COSCHED_REAL_POOL").unwrap_or_default();
    if setting == "skip" {
        println!("real-pool suite: skipped (COSCHED_REAL_POOL=skip); CI runs it as root");
        return ExitCode::SUCCESS;
    }
    let only: Vec<String> = setting.split(',').filter(|s| !s.is_empty()).map(String::from).collect();
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |name: &str| {
        (only.is_empty() || only.iter().any(|o| o == name))
            && (filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())))
    };
    let knees_asked = std::env::var("COSCHED_REAL_POOL_KNEES").is_ok_and(|v| v == "1");
    let named = |name: &str| only.iter().chain(&filter).any(|o| name.contains(o.as_str()));
    let awaiting: Vec<&str> = cases::lanes()
        .iter()
        .flat_map(|lane| lane.awaiting_policy.iter().copied())
        .filter(|name| !knees_asked && !named(name))
        .collect();
    if !awaiting.is_empty() {
        println!(
            "real-pool suite: not run: {} (targets not met yet: BENCHMARKS.md, \"The real pool\"); \
             COSCHED_REAL_POOL_KNEES=1 runs them",
            awaiting.join(", ")
        );
    }
    let lanes = cases::lanes();
    let lanes: Vec<cases::Lane> = lanes
        .into_iter()
        .map(|lane| cases::Lane {
            phases: lane
                .phases
                .into_iter()
                .map(|phase| {
                    phase
                        .into_iter()
                        .filter(|(name, _)| wanted(name) && !awaiting.contains(name))
                        .collect::<Vec<_>>()
                })
                .filter(|phase| !phase.is_empty())
                .collect(),
            ..lane
        })
        .filter(|lane| !lane.phases.is_empty())
        .collect();
    if lanes.is_empty() {
        println!("real-pool suite: no case matches the filter");
        return ExitCode::SUCCESS;
    }
    let started = Instant::now();
    // One after the other: pool.sh creates the accounts on its first start,
    // and two starts at once would race to create them.
    let mut pools = Vec::new();
    for lane in &lanes {
        match pool::Pool::start(lane.cpus) {
            Ok(pool) => {
                println!(
                    "real-pool suite: pool of {} slots on 127.0.0.1:{} in {}",
                    pool.cpus,
                    pool.port,
                    pool.dir.display()
                );
                pools.push(pool);
            }
            Err(e) => {
                println!(
                    "real-pool suite: cannot run: {e} (run the tests as root, or set COSCHED_REAL_POOL=skip to skip them)"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    let mut failed: Vec<(&str, String)> = Vec::new();
    let results: Vec<Vec<(&str, Result<f64, String>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lanes
            .iter()
            .zip(&pools)
            .map(|(lane, pool)| scope.spawn(move || run_lane(&lane.phases, pool)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    let passed = results.iter().flatten().filter(|(_, r)| r.is_ok()).count();
    for (name, result) in results.into_iter().flatten() {
        if let Err(message) = result {
            failed.push((name, message));
        }
    }
    // Whatever the cases did, no job may be left idle, running or held in
    // any pool: completed Condor-C copies (status 4) linger by design.
    for pool in &pools {
        let left = pool
            .query("JobStatus != 4 && JobStatus != 3", "ClusterId,ProcId,JobStatus,HoldReason,CoschedRun");
        if !left.is_empty() && failed.is_empty() {
            failed.push((
                "pool-left-clean",
                format!("jobs left in the pool of {} slots after every case: {left:?}", pool.cpus),
            ));
        }
    }
    drop(pools);
    for (name, message) in &failed {
        println!("\n---- {name} ----\n{message}");
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; finished in {:.0} s",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    println!("{passed} passed, {} failed", failed.len());
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs a lane's phases one after the other on its pool, the cases of a
/// phase side by side; prints each case's verdict as it ends.
fn run_lane<'a>(phases: &[Vec<(&'a str, CaseFn)>], pool: &pool::Pool) -> Vec<(&'a str, Result<f64, String>)> {
    let mut all = Vec::new();
    for phase in phases {
        let results: Vec<(&str, Result<f64, String>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = phase
                .iter()
                .map(|&(name, body)| {
                    (
                        name,
                        scope.spawn(move || {
                            let t0 = Instant::now();
                            let result = std::panic::catch_unwind(AssertUnwindSafe(|| body(pool)))
                                .map(|()| t0.elapsed().as_secs_f64())
                                .map_err(|e| {
                                    e.downcast_ref::<String>()
                                        .cloned()
                                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                                        .unwrap_or_else(|| "panicked".into())
                                });
                            match &result {
                                Ok(secs) => println!("test {name} ... ok ({secs:.0} s)"),
                                Err(_) => {
                                    println!("test {name} ... FAILED ({:.0} s)", t0.elapsed().as_secs_f64())
                                }
                            }
                            result
                        }),
                    )
                })
                .collect();
            handles.into_iter().map(|(name, h)| (name, h.join().unwrap_or(Err("panicked".into())))).collect()
        });
        all.extend(results);
    }
    all
}
