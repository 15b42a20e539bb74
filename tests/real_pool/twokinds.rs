//! Issue 55, item 6: on a real HTCondor, two kinds of job at once. An I/O
//! kind shares its site's emulated file server (the knee cases' `knee.py`:
//! a marker per running job, full speed up to C of them, thrashing past
//! them); a CPU kind touches nothing shared. Each site has far more slots
//! than the file server's knee, so the best a site can do is about C I/O
//! jobs with CPU jobs in the rest of its slots. The same jobs run twice,
//! with the default policy knowing the kinds and with `--blind-types`
//! (every job one kind to the policy), each in a directory and state
//! directory of its own; the typed run must take at most 0.8 × the blind
//! one's makespan, keep the I/O jobs near the knee at each site and run CPU
//! jobs well past it beside them.

use crate::cases::{run_id, MINUTES};
use crate::knee::{assert_each_completed_once_by_htcondor, epoch_unix, KNEE_PY, SITES};
use crate::pool::{eventually, summary, text, Case, Pool};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The pool: the two sites' declared slots together.
pub const CPUS: u32 = 48;
/// Slots declared per site.
const SLOTS: u32 = 24;
/// The file server's knee per site, and its thrash.
const C: u32 = 6;
const BETA: f64 = 1.0;
/// Jobs of each kind, and their work: `base + (7 i mod spread)` s.
const IO_JOBS: u64 = 120;
const CPU_JOBS: u64 = 240;
const WORK: (u32, u32) = (20, 5);
/// How long one run may take before it is killed.
const PATIENCE: Duration = Duration::from_secs(20 * 60);

/// The CPU kind: `cpu.py INDEX LEDGER BASE SPREAD JOB` works BASE +
/// (7·INDEX mod SPREAD) seconds touching nothing shared, and keeps the
/// ledger and the output as `knee.py` does.
const CPU_PY: &str = r#"#!/usr/bin/python3
# cpu.py INDEX LEDGER BASE SPREAD JOB: BASE + (7 INDEX mod SPREAD) s of work on no shared resource.
import os, sys, time

index, ledger, base, spread, job = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]


def note(what):
    with open(ledger, "a") as f:
        f.write("%s %s %d@%s\n" % (what, index, os.getpid(), job))


note("start")
time.sleep(base + (7 * int(index)) % spread)
note("end")
print("job %s" % index)
"#;

/// Kinds, in `--jobs` order.
const KINDS: [&str; 2] = ["io", "cpu"];

/// What one run did.
struct Run {
    makespan: f64,
    summary: Value,
    /// Per site: per kind, the jobs running at once, one sample per second
    /// from the site's first start to its last end.
    running: Vec<[Vec<u32>; 2]>,
}

fn run(pool: &Pool, blind: bool) -> Run {
    let label = if blind { "blind" } else { "typed" };
    let case = Case::new(pool, &format!("two-kinds-{label}"));
    let mut sites = Vec::new();
    for name in SITES {
        let markers = case.path(&format!("knee-{name}"));
        std::fs::create_dir(&markers).unwrap();
        pool.give(&markers);
        let extra = format!(
            "slots = {SLOTS}\n[site.submit]\nenvironment = '\"COSCHED_KNEE_DIR={} COSCHED_KNEE_C={C} COSCHED_KNEE_BETA={BETA}\"'\n",
            markers.display()
        );
        sites.push((name, (name == "cc").then_some(pool.grid_resource.as_str()), extra));
    }
    let sites_ref: Vec<(&str, Option<&str>, &str)> =
        sites.iter().map(|(n, g, e)| (*n, *g, e.as_str())).collect();
    case.write_sites("", &sites_ref);
    for (kind, script) in [("io", KNEE_PY), ("cpu", CPU_PY)] {
        let program = if kind == "io" { "knee.py" } else { "cpu.py" };
        case.write(program, script);
        std::fs::set_permissions(case.path(program), std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        case.write(
            &format!("{kind}.sub"),
            &format!(
                "executable = {program}\narguments = $(CoschedJob) {} {} {} $(Cluster).$(Process)\n\
                 output = out.$(CoschedJob)\nerror = err.$(CoschedJob)\nshould_transfer_files = YES\n\
                 when_to_transfer_output = ON_EXIT\nqueue\n",
                case.path("ledger").display(),
                WORK.0,
                WORK.1
            ),
        );
    }
    let (io, cpu) = (format!("io={IO_JOBS}:io.sub"), format!("cpu={CPU_JOBS}:cpu.sub"));
    let mut args = vec!["submit", "sites.toml", "--jobs", &io, "--jobs", &cpu, "--state-dir", "st", "--json"];
    if blind {
        args.push("--blind-types");
    }
    let out = case.run(&args, PATIENCE);
    assert_eq!(out.status.code(), Some(0), "{}: stderr:\n{}", case.name, text(&out.stderr));
    let s = summary(&out, &case.name);
    let n = IO_JOBS + CPU_JOBS;
    assert_eq!(s["done"].as_u64(), Some(n), "{}: {s}", case.name);
    let run = run_id(&s);
    let run_dir = case.path("st/runs").join(&run);
    let epoch = epoch_unix(&case.path("st/state.db"), &run);
    let kinds = cluster_kinds(&case.path("st/state.db"), &run);
    let running: Vec<[Vec<u32>; 2]> = SITES
        .iter()
        .enumerate()
        .map(|(i, name)| running_per_second(&run_dir.join(format!("{name}.log")), epoch, &kinds[i]))
        .collect();
    let makespan = s["makespan"].as_f64().expect("a makespan");
    let result = Run { makespan, summary: s, running };
    print_run(&case.name, &result);
    assert_each_completed_once_by_htcondor(&case, n, &run_dir);
    case.assert_nothing_left(&run);
    for name in SITES {
        let markers = case.path(&format!("knee-{name}"));
        eventually(&format!("{}: the markers of {name} are gone", case.name), MINUTES(1), || {
            (std::fs::read_dir(&markers).unwrap().count() == 0).then_some(())
        });
    }
    result
}

/// Per site, the kind (index in [`KINDS`]) of each cluster the run
/// submitted there, from the batch files it recorded (`+CoschedType`).
fn cluster_kinds(state_db: &Path, run: &str) -> Vec<BTreeMap<i64, usize>> {
    let db = cosched::state::Db::open(state_db).unwrap();
    let mut out = vec![BTreeMap::new(); SITES.len()];
    for sub in db.submissions(run).unwrap() {
        let cosched::state::SubmissionState::Submitted { cluster } = sub.state else { continue };
        let batch = std::fs::read_to_string(&sub.submit_file)
            .unwrap_or_else(|e| panic!("{}: {e}", sub.submit_file.display()));
        let kind = KINDS
            .iter()
            .position(|k| batch.contains(&format!("+CoschedType = \"{k}\"")))
            .unwrap_or_else(|| panic!("{}: no kind of {KINDS:?} in it", sub.submit_file.display()));
        out[sub.site_index as usize].insert(cluster, kind);
    }
    out
}

/// From a site's user log: per kind, the jobs running at each second of run
/// time, from the first start to the last end. A job runs from its start
/// (001) to its end (005), eviction (004), removal (009) or hold (012).
fn running_per_second(log: &Path, epoch: f64, kinds: &BTreeMap<i64, usize>) -> [Vec<u32>; 2] {
    let bytes = std::fs::read(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let (events, _) = cosched::userlog::parse_bytes(&bytes);
    // (run time, kind, +1 or -1), only for jobs that were running.
    let mut steps: Vec<(f64, usize, i32)> = Vec::new();
    let mut running = std::collections::BTreeSet::new();
    for e in &events {
        let Some(&kind) = kinds.get(&e.cluster) else { continue };
        let t = cosched::condor::event_run_time(e, epoch);
        let job = (e.cluster, e.proc);
        match e.code {
            1 if running.insert(job) => steps.push((t, kind, 1)),
            4 | 5 | 9 | 12 if running.remove(&job) => steps.push((t, kind, -1)),
            _ => {}
        }
    }
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = [Vec::new(), Vec::new()];
    let (Some(first), Some(last)) = (steps.first(), steps.last()) else { return out };
    let (from, to) = (first.0.floor() as i64, last.0.ceil() as i64);
    let mut now = [0i32; 2];
    let mut next = 0;
    for second in from..to {
        while next < steps.len() && steps[next].0 <= second as f64 {
            now[steps[next].1] += steps[next].2;
            next += 1;
        }
        for k in 0..2 {
            out[k].push(now[k].max(0) as u32);
        }
    }
    out
}

/// Per site: the I/O jobs running at once, over the seconds any ran (mean,
/// p90, peak), and the most CPU jobs that ran beside I/O jobs.
struct SiteFigures {
    io_mean: f64,
    io_p90: f64,
    io_peak: u32,
    cpu_beside_io: u32,
    cpu_peak: u32,
    /// The most jobs of both kinds at once (the site is declared at [`SLOTS`]).
    total_peak: u32,
}

fn figures(running: &[Vec<u32>; 2]) -> SiteFigures {
    let [io, cpu] = running;
    let mut busy: Vec<f64> = io.iter().filter(|&&n| n > 0).map(|&n| f64::from(n)).collect();
    busy.sort_by(f64::total_cmp);
    SiteFigures {
        io_mean: busy.iter().sum::<f64>() / busy.len().max(1) as f64,
        io_p90: cosched::stats::nearest_rank(&busy, 0.9).unwrap_or(0.0),
        io_peak: io.iter().copied().max().unwrap_or(0),
        cpu_beside_io: io.iter().zip(cpu).filter(|(i, _)| **i > 0).map(|(_, c)| *c).max().unwrap_or(0),
        cpu_peak: cpu.iter().copied().max().unwrap_or(0),
        total_peak: io.iter().zip(cpu).map(|(i, c)| i + c).max().unwrap_or(0),
    }
}

/// The run's numbers, for BENCHMARKS.md: makespans, each kind's, and per
/// site what ran at once.
fn print_run(name: &str, run: &Run) {
    let s = &run.summary;
    let mut line = format!("{name}: makespan {:.0} s", run.makespan);
    for kind in s["kinds"].as_array().into_iter().flatten() {
        line.push_str(&format!("; kind {}: {}", kind["name"].as_str().unwrap_or("?"), kind));
    }
    for (site, running) in SITES.iter().zip(&run.running) {
        let f = figures(running);
        line.push_str(&format!(
            "\n  {site}: I/O jobs at once (while any ran) mean {:.1}, p90 {:.0}, peak {}; CPU jobs beside them \
             at most {}, peak {}; both kinds at most {} (slots {SLOTS}); over {} s",
            f.io_mean,
            f.io_p90,
            f.io_peak,
            f.cpu_beside_io,
            f.cpu_peak,
            f.total_peak,
            running[0].len()
        ));
    }
    for site in s["sites"].as_array().into_iter().flatten() {
        line.push_str(&format!("\n  summary {site}"));
    }
    println!("{line}");
}

/// Issue 55, item 6: two sites of 24 slots whose file servers serve C = 6
/// (β = 1), 120 I/O jobs and 240 CPU jobs of 20–24 s. Knowing the kinds,
/// the default policy keeps each site's I/O jobs near the knee (p90 of
/// those running at once ≤ 2C) while more than 2C CPU jobs run beside them,
/// and takes at most 0.8 × the makespan of the same run with
/// `--blind-types`.
pub fn two_kinds_beat_blind(pool: &Pool) {
    assert_eq!(pool.cpus, CPUS, "two-kinds: a pool of {} slots", pool.cpus);
    let typed = run(pool, false);
    let blind = run(pool, true);
    let ratio = typed.makespan / blind.makespan;
    println!(
        "two-kinds: typed / blind makespan = {:.0} / {:.0} s = {ratio:.2}",
        typed.makespan, blind.makespan
    );
    // README, "slots": a declared `slots` is the most of our jobs a site
    // runs at once, whatever it could start (the pool has twice as many
    // CPUs), knowing the kinds or not.
    for (name, run) in [("typed", &typed), ("blind", &blind)] {
        for (site, running) in SITES.iter().zip(&run.running) {
            let peak = figures(running).total_peak;
            assert!(
                peak <= SLOTS + 1,
                "two-kinds: the {name} run ran {peak} jobs at once at site {site}, declared at {SLOTS} slots"
            );
        }
    }
    for (site, running) in SITES.iter().zip(&typed.running) {
        let f = figures(running);
        assert!(
            f.io_p90 <= f64::from(2 * C),
            "two-kinds: at site {site}, the typed run kept {:.0} I/O jobs at once (p90; mean {:.1}), more than \
             2C = {}",
            f.io_p90,
            f.io_mean,
            2 * C
        );
        assert!(
            f.cpu_beside_io > 2 * C,
            "two-kinds: at site {site}, the typed run ran at most {} CPU jobs beside I/O jobs, not more than \
             2C = {}",
            f.cpu_beside_io,
            2 * C
        );
    }
    assert!(
        ratio <= 0.8,
        "two-kinds: knowing the kinds took {:.0} s, {ratio:.2} × the blind run's {:.0} s (at most 0.8)",
        typed.makespan,
        blind.makespan
    );
}
