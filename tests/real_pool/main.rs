//! cosched against a real HTCondor 25 pool (`../shared/htcondor`): the
//! integration suite of issues 14 and 17.
//!
//! This binary owns the pool: it starts one with `pool.sh` before the first
//! case and stops it after the last, also when a case fails (each case runs
//! under `catch_unwind`, and the pool's `Drop` stops it). That is why it has
//! its own `main` (`harness = false` in Cargo.toml) instead of libtest, whose
//! threads would each need the pool and nothing would own its end.
//!
//! Cases run in phases: the independent ones side by side (each in its own
//! directory, ledger and state directory), then the ones that disturb the
//! whole pool (the schedd stopped) alone. Every job is a 5–15 s sleep that
//! appends `start`/`end` lines to its case's ledger, so executions are
//! counted, not outputs.
//!
//! Needs root (pool.sh creates the accounts `condor` and `cosched-test`). Not
//! root, or a pool that cannot start: one line saying so and a failure, so CI
//! never passes without it. `COSCHED_REAL_POOL=skip` skips the suite (one
//! line, success) on a developer's machine without root; CI never sets it.
//! `COSCHED_REAL_POOL=CASE,CASE` runs only the named cases.

// Real processes on a real pool: wall-clock deadlines are the point here.
#![allow(clippy::disallowed_methods)]

mod cases;
mod pool;

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
    let phases = cases::phases();
    let selected: Vec<Vec<(&str, CaseFn)>> = phases
        .into_iter()
        .map(|phase| phase.into_iter().filter(|(name, _)| wanted(name)).collect::<Vec<_>>())
        .filter(|phase| !phase.is_empty())
        .collect();
    if selected.is_empty() {
        println!("real-pool suite: no case matches the filter");
        return ExitCode::SUCCESS;
    }
    let started = Instant::now();
    let pool = match pool::Pool::start() {
        Ok(pool) => pool,
        Err(e) => {
            println!(
                "real-pool suite: cannot run: {e} (run the tests as root, or set COSCHED_REAL_POOL=skip to skip them)"
            );
            return ExitCode::FAILURE;
        }
    };
    println!("real-pool suite: pool on 127.0.0.1:{} in {}", pool.port, pool.dir.display());
    let mut passed = 0;
    let mut failed = Vec::new();
    for phase in selected {
        let results: Vec<(&str, Result<f64, String>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = phase
                .iter()
                .map(|&(name, body)| {
                    let pool = &pool;
                    (
                        name,
                        scope.spawn(move || {
                            let t0 = Instant::now();
                            std::panic::catch_unwind(AssertUnwindSafe(|| body(pool)))
                                .map(|()| t0.elapsed().as_secs_f64())
                                .map_err(|e| {
                                    e.downcast_ref::<String>()
                                        .cloned()
                                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                                        .unwrap_or_else(|| "panicked".into())
                                })
                        }),
                    )
                })
                .collect();
            handles.into_iter().map(|(name, h)| (name, h.join().unwrap_or(Err("panicked".into())))).collect()
        });
        for (name, result) in results {
            match result {
                Ok(secs) => {
                    println!("test {name} ... ok ({secs:.0} s)");
                    passed += 1;
                }
                Err(message) => {
                    println!("test {name} ... FAILED");
                    failed.push((name, message));
                }
            }
        }
    }
    // Whatever the cases did, no job may be left idle, running or held in
    // the pool: completed Condor-C copies (status 4) linger by design.
    let left =
        pool.query("JobStatus != 4 && JobStatus != 3", "ClusterId,ProcId,JobStatus,HoldReason,CoschedRun");
    if !left.is_empty() && failed.is_empty() {
        failed.push(("pool-left-clean", format!("jobs left in the pool after every case: {left:?}")));
    }
    drop(pool);
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
