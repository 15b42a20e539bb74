//! Issue 56: on a real HTCondor, cosched beats plain submission where a
//! resource is shared, and keeps up where nothing is.
//!
//! A shared resource with a knee is emulated by the jobs themselves
//! (`../shared/htcondor/README.md`): each job of a site keeps a marker file
//! in that site's directory (handed to it through `[site.submit]
//! environment`) and, every second, makes one second of progress while at
//! most C markers are there, else C² / (n·(C + β(n − C))) seconds: the site
//! model's processor sharing, thrashing past the knee. Every case runs the
//! same jobs twice, with `--policy bulk` (plain submission) and with the
//! default policy, each in a directory and state directory of its own (no
//! warm start from the other), and compares their makespans.
//!
//! Both sites of a case share one pool's CPUs (vanilla jobs and the
//! Condor-C site's forwarded copies land on the same startd), but each has
//! its own marker directory, so each has its own knee.

use crate::cases::{run_id, site, MINUTES};
use crate::pool::{eventually, summary, text, Case, Ledger, Pool};
use cosched::policy::DecisionKind;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// The pool of the knee-above and search cases: room past both sites' knees.
pub const ABOVE_CPUS: u32 = 96;
/// The pool of the knee-below and healthy cases.
pub const BELOW_CPUS: u32 = 16;

/// The job of the knee cases: `knee.py INDEX LEDGER BASE SPREAD JOB` works
/// BASE + (7·INDEX mod SPREAD) seconds at full speed. Like the sleep job it
/// appends `start I PID@JOB` and `end I PID@JOB` to the ledger (JOB is the
/// HTCondor id of the execution's job at its site) and prints `job I`.
/// Its site's resource comes from the environment: `COSCHED_KNEE_DIR` (the
/// marker directory), `COSCHED_KNEE_C` (C), `COSCHED_KNEE_BETA` (β). The
/// marker goes on SIGTERM too (`condor_rm` sends it), so a job cut short
/// does not slow its site for the rest of the run.
pub(crate) const KNEE_PY: &str = r#"#!/usr/bin/python3
# knee.py INDEX LEDGER BASE SPREAD JOB: BASE + (7 INDEX mod SPREAD) s of work
# at a site whose resource serves C jobs at full speed and thrashes past them.
import os, signal, sys, time

index, ledger, base, spread, job = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
work = base + (7 * int(index)) % spread
where = os.environ["COSCHED_KNEE_DIR"]
c = float(os.environ["COSCHED_KNEE_C"])
beta = float(os.environ["COSCHED_KNEE_BETA"])
marker = os.path.join(where, "%s.%d" % (index, os.getpid()))


def note(what):
    with open(ledger, "a") as f:
        f.write("%s %s %d@%s\n" % (what, index, os.getpid(), job))


def leave():
    try:
        os.unlink(marker)
    except FileNotFoundError:
        pass


def terminated(signum, frame):
    leave()
    sys.exit(128 + signum)


signal.signal(signal.SIGTERM, terminated)
note("start")
open(marker, "w").close()
done = 0.0
while done < work:
    n = len(os.listdir(where))
    rate = 1.0 if n <= c else c * c / (n * (c + beta * (n - c)))
    step = min(1.0, (work - done) / rate)
    time.sleep(step)
    done += rate * step
leave()
note("end")
print("job %s" % index)
"#;

/// A site's emulated shared resource.
#[derive(Clone, Copy)]
struct Knee {
    /// Jobs the resource serves at full speed.
    c: u32,
    /// Thrash past the knee.
    beta: f64,
}

/// What a case runs: `n` jobs over the two sites, `local` (vanilla) and
/// `cc` (Condor-C to the pool itself), each declared at `slots`.
struct Setup {
    name: &'static str,
    n: u64,
    /// Work of job i: `base + (7 i mod spread)` s; `None`: the suite's
    /// 5–15 s sleep job, on sites with no shared resource.
    work: Option<(u32, u32)>,
    slots: u32,
    knee: Option<Knee>,
    /// How long one run may take before it is killed.
    patience: Duration,
}

pub(crate) const SITES: [&str; 2] = ["local", "cc"];

/// One run of a setup under one policy, as measured.
struct Run<'p> {
    case: Case<'p>,
    summary: Value,
    ledger: Ledger,
    /// Wall seconds of the cosched process: by the monotonic clock, and by
    /// the system clock.
    wall: (f64, f64),
    makespan: f64,
    /// Per site: the capacity found, the most jobs running at once (the
    /// site's user log), and the worst start past the window.
    sites: Vec<SiteRun>,
}

struct SiteRun {
    name: &'static str,
    capacity: Option<f64>,
    peak_running: u32,
    peak_window: Option<f64>,
    windows: WindowCheck,
}

/// The starts of a site checked against the window in force.
#[derive(Default)]
struct WindowCheck {
    /// Starts (001 events) checked.
    starts: u32,
    /// Starts judged against the declared slots, where the decision record
    /// coalesced window changes and the window in force is not known.
    against_slots: u32,
    /// The worst start: (run time, running after it, window bound).
    worst: Option<(f64, u32, f64)>,
    /// Starts past the window lowered just before them, of jobs queued
    /// under the window before (see [`check_windows`]): not counted past.
    before_withdrawal: u32,
    /// Starts after which more than window + 1 jobs ran.
    past: u32,
}

/// One run of `setup` under `policy` (the default where `None`); `round`
/// tells apart the runs of a setup repeated (its directory's name).
fn run_setup<'p>(pool: &'p Pool, setup: &Setup, policy: Option<&str>, round: usize) -> Run<'p> {
    assert!(
        pool.cpus == if setup.slots > BELOW_CPUS { ABOVE_CPUS } else { BELOW_CPUS },
        "{}: a pool of {} slots",
        setup.name,
        pool.cpus
    );
    let label = policy.unwrap_or("default");
    let name = match round {
        0 => format!("{}-{label}", setup.name),
        r => format!("{}-{label}-{r}", setup.name),
    };
    let case = Case::new(pool, &name);
    let mut sites = Vec::new();
    for name in SITES {
        let grid = (name == "cc").then_some(pool.grid_resource.as_str());
        let mut extra = format!("slots = {}\n", setup.slots);
        if let Some(knee) = setup.knee {
            let markers = case.path(&format!("knee-{name}"));
            std::fs::create_dir(&markers).unwrap();
            pool.give(&markers);
            extra.push_str(&format!(
                "[site.submit]\nenvironment = '\"COSCHED_KNEE_DIR={} COSCHED_KNEE_C={} COSCHED_KNEE_BETA={}\"'\n",
                markers.display(),
                knee.c,
                knee.beta
            ));
        }
        sites.push((name, grid, extra));
    }
    let sites_ref: Vec<(&str, Option<&str>, &str)> =
        sites.iter().map(|(n, g, e)| (*n, *g, e.as_str())).collect();
    case.write_sites("", &sites_ref);
    if let Some((base, spread)) = setup.work {
        case.write("knee.py", KNEE_PY);
        std::fs::set_permissions(case.path("knee.py"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        case.write(
            "job.sub",
            &format!(
                "executable = knee.py\narguments = $(CoschedJob) {} {base} {spread} $(Cluster).$(Process)\noutput = out.$(CoschedJob)\n\
                 error = err.$(CoschedJob)\nshould_transfer_files = YES\nwhen_to_transfer_output = ON_EXIT\nqueue\n",
                case.path("ledger").display()
            ),
        );
    }
    let n = setup.n.to_string();
    let mut args = vec!["submit", n.as_str(), "sites.toml", "job.sub", "--state-dir", "st", "--json"];
    if let Some(policy) = policy {
        args.extend(["--policy", policy]);
    }
    // Both clocks: the makespans are the user logs' stamps, which are the
    // system clock's, and on this machine's VM the system clock once ran
    // 27 s ahead of the monotonic one within a run of 570 s.
    let (t0, since) = (Instant::now(), SystemTime::now());
    let out = case.run(&args, setup.patience);
    let wall = (t0.elapsed().as_secs_f64(), since.elapsed().map_or(f64::NAN, |d| d.as_secs_f64()));
    assert_eq!(out.status.code(), Some(0), "{}: stderr:\n{}", case.name, text(&out.stderr));
    let s = summary(&out, &case.name);
    assert_eq!(s["done"].as_u64(), Some(setup.n), "{}: {s}", case.name);
    let run_dir = case.path("st/runs").join(run_id(&s));
    let epoch = epoch_unix(&case.path("st/state.db"), &run_id(&s));
    let decisions = cosched::run::decisions::read(&run_dir);
    let sites = SITES
        .iter()
        .enumerate()
        .map(|(i, &name)| {
            let starts = running_after_starts(&run_dir.join(format!("{name}.log")), epoch);
            let windows = windows_of(&decisions, i);
            SiteRun {
                name,
                capacity: site(&s, name)["capacity"].as_f64(),
                peak_running: starts.iter().map(|(_, r)| *r).max().unwrap_or(0),
                peak_window: windows.iter().map(|(_, w)| *w).reduce(f64::max),
                windows: check_windows(&starts, &windows, f64::from(setup.slots)),
            }
        })
        .collect();
    let makespan = s["makespan"].as_f64().expect("a makespan");
    let ledger = case.ledger();
    let run = Run { case, summary: s, ledger, wall, makespan, sites };
    // The numbers first: a run that breaks an invariant is measured too.
    print_run(setup, &run, policy.is_none());
    let (case, s) = (&run.case, &run.summary);
    match setup.work {
        Some(_) => assert_each_completed_once_by_htcondor(case, setup.n, &run_dir),
        None => {
            case.assert_each_completed_once(setup.n);
        }
    }
    case.assert_nothing_left(&run_id(s));
    if setup.knee.is_some() {
        // A marker left behind would slow its site for good: the emulation
        // itself failed, and no number of the run could be trusted.
        for name in SITES {
            let markers = case.path(&format!("knee-{name}"));
            eventually(&format!("{}: the markers of {name} are gone", case.name), MINUTES(1), || {
                (std::fs::read_dir(&markers).unwrap().count() == 0).then_some(())
            });
        }
    }
    run
}

/// Every job 0..n ran to its end exactly once by HTCondor's word, and wrote
/// its output. An execution that ran its last line just as it was removed
/// (`condor_rm` of a running job: the policy cut it short) wrote `end` to
/// the ledger, but HTCondor aborted it (009) and its output never came
/// back: that one is cut short, not a completion. So an execution counts
/// as completed when the ledger has its end and its job's user log its
/// termination (005).
pub(crate) fn assert_each_completed_once_by_htcondor(case: &Case, n: u64, run_dir: &Path) {
    let mut terminated = std::collections::BTreeSet::new();
    for name in SITES {
        let bytes = std::fs::read(run_dir.join(format!("{name}.log"))).unwrap_or_default();
        let (events, _) = cosched::userlog::parse_bytes(&bytes);
        terminated.extend(events.iter().filter(|e| e.code == 5).map(|e| format!("{}.{}", e.cluster, e.proc)));
    }
    let text = std::fs::read_to_string(case.path("ledger")).unwrap_or_default();
    let mut completed: std::collections::BTreeMap<u64, u32> = std::collections::BTreeMap::new();
    let mut ended_at_removal = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let ["end", index, execution] = words[..] else { continue };
        let index: u64 = index.parse().unwrap_or_else(|_| panic!("{}: ledger line {line:?}", case.name));
        let job = execution.split_once('@').map(|(_, job)| job).unwrap_or_default();
        if terminated.contains(job) {
            *completed.entry(index).or_default() += 1;
        } else {
            ended_at_removal.push((index, job.to_string()));
        }
    }
    if !ended_at_removal.is_empty() {
        println!(
            "{}: executions that ran their last line as HTCondor aborted them (cut short): {ended_at_removal:?}",
            case.name
        );
    }
    let missing: Vec<u64> = (0..n).filter(|i| !completed.contains_key(i)).collect();
    let twice: Vec<(&u64, &u32)> = completed.iter().filter(|(_, c)| **c > 1).collect();
    let beyond: Vec<&u64> = completed.keys().filter(|i| **i >= n).collect();
    assert!(missing.is_empty(), "{}: jobs HTCondor never saw complete: {missing:?}", case.name);
    assert!(twice.is_empty(), "{}: jobs completed more than once: {twice:?}\nledger:\n{text}", case.name);
    assert!(beyond.is_empty(), "{}: executions of jobs beyond N: {beyond:?}", case.name);
    for i in 0..n {
        let out = std::fs::read_to_string(case.path(&format!("out.{i}"))).unwrap_or_default();
        assert_eq!(out.trim(), format!("job {i}"), "{}: out.{i}", case.name);
    }
}

/// The instant that is t = 0 of the run (user-log stamps map to run time
/// from it).
pub(crate) fn epoch_unix(state_db: &Path, run: &str) -> f64 {
    let db = rusqlite::Connection::open(state_db).unwrap();
    db.query_row("SELECT epoch_unix FROM runs WHERE id = ?1", [run], |r| r.get(0)).unwrap()
}

/// From a site's user log: at each start (001), in run time, the jobs
/// running there after it. A job stops running at its end (005), eviction
/// (004), removal (009) or hold (012).
fn running_after_starts(log: &Path, epoch: f64) -> Vec<(f64, u32)> {
    let bytes = std::fs::read(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let (events, _) = cosched::userlog::parse_bytes(&bytes);
    let mut running = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for e in &events {
        let job = (e.cluster, e.proc);
        match e.code {
            1 => {
                running.insert(job);
                out.push((cosched::condor::event_run_time(e, epoch), running.len() as u32));
            }
            4 | 5 | 9 | 12 => {
                running.remove(&job);
            }
            _ => {}
        }
    }
    out
}

/// A site's window points (run time, window), in the order written.
fn windows_of(decisions: &[cosched::policy::Decision], site: usize) -> Vec<(f64, f64)> {
    decisions
        .iter()
        .filter(|d| d.site.index() == site && d.job_kind.is_none())
        .filter_map(|d| match d.kind {
            DecisionKind::Window { window, .. } => Some((d.at, window)),
            DecisionKind::Verdict { .. } => None,
        })
        .collect()
}

/// How long a lowered window takes to be enacted on idle jobs: the policy's
/// withdrawal reaches the site task, which asks `condor_q` and then runs
/// `condor_rm`. On CI's loaded pool (96 busy slots on 2 cores, other lanes
/// beside) each command takes a second or two; and a job's start is stamped
/// by the system clock, the window's time by the run's.
const WITHDRAWN_WITHIN: f64 = 5.0;

/// Each start against the window in force then, plus one (issue 56, item 3).
///
/// Checked at starts, because running jobs grow only by starts: a window
/// lowered below the jobs running is enacted by removals that HTCondor logs
/// seconds later, and is not a start past the window. Nor is the start of a
/// job queued under the window before it was lowered: the lowering is
/// enacted by withdrawing that job (a `condor_q` to see it has not started,
/// then a `condor_rm`), and the schedd may start it in between. So the bound
/// is the largest window in force within [`WITHDRAWN_WITHIN`] before the
/// start. What item 3 forbids (74 running under a window of 48 for minutes,
/// from jobs queued ahead) outlasts that by far. Log stamps have a
/// resolution of one second, so the bound also takes the second after.
/// The run's decision record has every window change of a site's first
/// `EXACT_FIRST`; past those it coalesces
/// changes closer than `WINDOW_SPACING` to the last one written
/// (`run::decisions`), so between two such points written closer than that,
/// windows may have been in force that the record lost, and there the only
/// bound known is the declared `slots`.
fn check_windows(starts: &[(f64, u32)], windows: &[(f64, f64)], slots: f64) -> WindowCheck {
    use cosched::run::decisions::{EXACT_FIRST, WINDOW_SPACING};
    // Segments [from, to) with the highest window that may have been in force.
    let mut segments: Vec<(f64, f64, f64, bool)> = Vec::new();
    for (k, &(at, w)) in windows.iter().enumerate() {
        let (to, exact) = match windows.get(k + 1) {
            Some(&(next, _)) => (next, k + 1 < EXACT_FIRST || next - at >= WINDOW_SPACING),
            None => (f64::INFINITY, true),
        };
        segments.push((
            if k == 0 { f64::NEG_INFINITY } else { at },
            to,
            if exact { w } else { slots },
            exact,
        ));
    }
    let mut check = WindowCheck::default();
    for &(t, running) in starts {
        let near: Vec<&(f64, f64, f64, bool)> = segments
            .iter()
            .filter(|(from, to, _, _)| *from <= t + 1.0 && *to > t - 1.0 - WITHDRAWN_WITHIN)
            .collect();
        let bound = near.iter().map(|s| s.2).fold(0.0, f64::max);
        let at_start = near
            .iter()
            .filter(|(from, to, _, _)| *from <= t + 1.0 && *to > t - 1.0)
            .map(|s| s.2)
            .fold(0.0, f64::max);
        if f64::from(running) - at_start > 1.0 && f64::from(running) - bound <= 1.0 {
            check.before_withdrawal += 1;
        }
        check.starts += 1;
        if near.iter().any(|s| !s.3) {
            check.against_slots += 1;
        }
        let excess = f64::from(running) - bound;
        if check.worst.is_none_or(|(_, r, b)| excess > f64::from(r) - b) {
            check.worst = Some((t, running, bound));
        }
        if excess > 1.0 {
            check.past += 1;
        }
    }
    check
}

/// One line per run, and the decisions of a default run, for BENCHMARKS.md.
fn print_run(setup: &Setup, run: &Run, decisions: bool) {
    let mut line = format!(
        "{} [{}]: makespan {:.0} s (wall {:.0} s, system clock {:.0} s), {} executions, {} cut short (summary {})",
        setup.name,
        run.summary["policy"].as_str().unwrap_or("?"),
        run.makespan,
        run.wall.0,
        run.wall.1,
        run.ledger.executions(),
        run.ledger.cut_short,
        run.summary["cut_short"]
    );
    for s in &run.sites {
        let w = &s.windows;
        line.push_str(&format!(
            "; {}: capacity {}, peak running {}",
            s.name,
            s.capacity.map_or("-".to_string(), |c| format!("{c:.1}")),
            s.peak_running
        ));
        // A policy without windows (bulk) records none to check against.
        if let Some(peak) = s.peak_window {
            line.push_str(&format!(
                ", peak window {peak:.0}, starts past window+1 {}/{} ({} judged against slots, \
                 {} before the withdrawal of a lowered window){}",
                w.past,
                w.starts,
                w.against_slots,
                w.before_withdrawal,
                w.worst.map_or(String::new(), |(t, r, b)| format!(
                    ", worst {r} running under {b:.0} at t={t:.0}"
                )),
            ));
        }
    }
    println!("{line}");
    if decisions {
        let run_dir = run.case.path("st/runs").join(run_id(&run.summary));
        for d in cosched::run::decisions::read(&run_dir) {
            let name = SITES.get(d.site.index()).copied().unwrap_or("?");
            match d.kind {
                DecisionKind::Window { window, capacity } => println!(
                    "{}: decision t={:.0} {name}: window {window:.0}{}",
                    setup.name,
                    d.at,
                    capacity.map_or(String::new(), |c| format!(", capacity {c:.1}"))
                ),
                DecisionKind::Verdict { healthy, level, slowdown } => println!(
                    "{}: decision t={:.0} {name}: verdict at {level:.0} running: {}{}",
                    setup.name,
                    d.at,
                    if healthy { "healthy" } else { "degraded" },
                    slowdown.map_or(String::new(), |x| format!(", {x:.2}x slower"))
                ),
            }
        }
    }
}

/// Runs bulk, then the default; returns both.
fn both<'p>(pool: &'p Pool, setup: &Setup) -> (Run<'p>, Run<'p>) {
    let bulk = run_setup(pool, setup, Some("bulk"), 0);
    let default = run_setup(pool, setup, None, 0);
    println!(
        "{}: default / bulk makespan = {:.0} / {:.0} s = {:.2}",
        setup.name,
        default.makespan,
        bulk.makespan,
        default.makespan / bulk.makespan
    );
    (bulk, default)
}

fn assert_ratio(setup: &Setup, default: &Run, bulk: &Run, at_most: f64) {
    let ratio = default.makespan / bulk.makespan;
    assert!(
        ratio <= at_most,
        "{}: the default policy took {:.0} s, {ratio:.2} × bulk's {:.0} s (at most {at_most})",
        setup.name,
        default.makespan,
        bulk.makespan
    );
}

/// Issue 56, item 1: a knee above the first window (16). 96 slots, two
/// sites declared at 48 each, C = 24 per site, β = 1, 240 jobs of 20–29 s.
/// The default policy finds each site's knee (capacity within [16, 36])
/// and takes at most 0.6 × bulk's makespan; and no job starts while the
/// jobs running at its site already fill the window in force (item 3: the
/// jobs queued ahead to cover a site's wait start at once on free CPUs).
pub fn knee_above_first_window(pool: &Pool) {
    let setup = Setup {
        name: "knee-above",
        n: 240,
        work: Some((20, 10)),
        slots: 48,
        knee: Some(Knee { c: 24, beta: 1.0 }),
        patience: MINUTES(30),
    };
    let (bulk, default) = both(pool, &setup);
    for s in &default.sites {
        let capacity = s.capacity.unwrap_or_else(|| {
            panic!("{}: site {} found no capacity: {}", setup.name, s.name, default.summary)
        });
        assert!(
            (16.0..=36.0).contains(&capacity),
            "{}: site {} found a capacity of {capacity:.1}, not within [16, 36] (C = 24)",
            setup.name,
            s.name
        );
    }
    assert_ratio(&setup, &default, &bulk, 0.6);
    for s in &default.sites {
        // Item 4, README: a declared `slots` is the most of our jobs that
        // run at the site at once, though this pool would start twice as many.
        assert!(
            s.peak_running <= setup.slots + 1,
            "{}: site {} ran {} jobs at once, declared at {} slots",
            setup.name,
            s.name,
            s.peak_running,
            setup.slots
        );
        let w = &s.windows;
        assert!(
            w.past == 0,
            "{}: at site {}, {} of {} starts left more than window + 1 jobs running; the worst: {:?} \
             (run time, running, window)",
            setup.name,
            s.name,
            w.past,
            w.starts,
            w.worst
        );
    }
}

/// Issue 56, item 1: a search must pay for itself. The sites of
/// [`knee_above_first_window`], 160 jobs of 10–14 s: about one thrashed
/// wave under bulk, where throttling cannot win back what a search costs.
/// One run's ratio varies by more than the margin the bar leaves (a late
/// probe at `cc` makes the slow ones; the runs measured are in
/// BENCHMARKS.md, "The real pool"), so the bar is on [`SEARCH_ROUNDS`]
/// rounds.
pub fn search_pays_for_itself(pool: &Pool) {
    let setup = Setup {
        name: "search-pays",
        n: 160,
        work: Some((10, 5)),
        slots: 48,
        knee: Some(Knee { c: 24, beta: 1.0 }),
        patience: MINUTES(15),
    };
    let ratio = rounds(pool, &setup, SEARCH_ROUNDS, |_| {});
    assert!(
        ratio <= 1.10,
        "{}: the default policy's makespan was {ratio:.2} × bulk's over {SEARCH_ROUNDS} rounds (at most 1.10)",
        setup.name
    );
}

/// Rounds of [`search_pays_for_itself`]: its spread is narrower than the
/// healthy case's, and its lane's longest case is knee-above (about 1,000
/// s): three rounds of about 240 s keep `.ci/run` within its hour.
const SEARCH_ROUNDS: usize = 3;

/// Runs bulk and the default `n` times, alternately (a drift of the pool's
/// pace falls on both alike), checks each default run with `each`, and
/// returns the default's total makespan over bulk's: the mean ratio a user
/// who runs the case `n` times sees, each round weighed by its length.
fn rounds(pool: &Pool, setup: &Setup, n: usize, each: impl Fn(&Run)) -> f64 {
    let (mut bulk_total, mut default_total) = (0.0, 0.0);
    let mut ratios = Vec::new();
    for round in 1..=n {
        let bulk = run_setup(pool, setup, Some("bulk"), round);
        let default = run_setup(pool, setup, None, round);
        each(&default);
        bulk_total += bulk.makespan;
        default_total += default.makespan;
        ratios.push(default.makespan / bulk.makespan);
        println!(
            "{} round {round}: default / bulk makespan = {:.0} / {:.0} s = {:.2}",
            setup.name,
            default.makespan,
            bulk.makespan,
            default.makespan / bulk.makespan
        );
    }
    let ratio = default_total / bulk_total;
    println!(
        "{}: default / bulk makespan over {n} rounds = {default_total:.0} / {bulk_total:.0} s = {ratio:.2} \
         (rounds {ratios:.2?})",
        setup.name
    );
    ratio
}

/// Issue 56, item 2: a knee below the first window. 16 slots, two sites
/// declared at 16, C = 4, β = 1, 96 jobs of 5–9 s: every site is past its
/// knee from the first cohort on. The default policy must find out
/// (capacity at most 8 at each site) and take at most 0.4 × bulk's makespan.
pub fn knee_below_first_window(pool: &Pool) {
    let setup = Setup {
        name: "knee-below",
        n: 96,
        work: Some((5, 5)),
        slots: 16,
        knee: Some(Knee { c: 4, beta: 1.0 }),
        patience: MINUTES(20),
    };
    let (bulk, default) = both(pool, &setup);
    for s in &default.sites {
        let capacity = s.capacity.unwrap_or_else(|| {
            panic!("{}: site {} found no capacity: {}", setup.name, s.name, default.summary)
        });
        assert!(
            capacity <= 8.0,
            "{}: site {} found a capacity of {capacity:.1}, more than 8 (C = 4)",
            setup.name,
            s.name
        );
    }
    assert_ratio(&setup, &default, &bulk, 0.4);
}

/// Issue 56, item 4: where nothing is shared, keep up. Two sites declared at
/// the 16 CPUs they share, the suite's 40 sleep jobs of 5–15 s: the default
/// policy takes at most 1.10 × bulk's makespan and cuts nothing short.
///
/// The makespan is about 65 s, and most of it is HTCondor's latencies (a
/// negotiation cycle, the gridmanager's poll of `cc`), not the 25 s of work
/// per CPU: the default's makespan varies from round to round by more than
/// the bar (`cc`'s forwarding, spooling and first negotiation take 30–45 s
/// before its jobs start). So the case runs both policies [`HEALTHY_ROUNDS`]
/// times, and the bar is on the total makespans ([`rounds`]).
/// More jobs would not do instead: with more than a probe's reach of jobs
/// left after the first cohort, the default policy checks its first window
/// below (a knee under it cannot be probed from above), which on healthy
/// sites costs about a wave at half the throughput, by design
/// (docs/adaptive.md, "Rechecking a floor"; 120 jobs: 1.00 and 1.10 ×
/// bulk): that would measure the check, not whether the policy keeps up.
pub fn healthy_sites_keep_up(pool: &Pool) {
    let setup = Setup { name: "healthy", n: 40, work: None, slots: 16, knee: None, patience: MINUTES(8) };
    let ratio = rounds(pool, &setup, HEALTHY_ROUNDS, |default| {
        assert_eq!(
            default.ledger.cut_short, 0,
            "{}: executions cut short on healthy sites",
            default.case.name
        );
        assert_eq!(
            default.summary["cut_short"].as_u64(),
            Some(0),
            "{}: {}",
            default.case.name,
            default.summary
        );
    });
    assert!(
        ratio <= 1.10,
        "{}: the default policy's makespan was {ratio:.2} × bulk's over {HEALTHY_ROUNDS} rounds (at most 1.10)",
        setup.name
    );
}

/// Rounds of the healthy case: enough that, at the spread a round's ratio
/// was measured to have (BENCHMARKS.md, "The real pool"), their mean
/// passes the bar by chance in about one CI in a hundred; the median of
/// three did in one in four. Seven rounds of about 140 s fit beside the
/// lane of knee-above and search-pays (about 1,700 s).
const HEALTHY_ROUNDS: usize = 7;
