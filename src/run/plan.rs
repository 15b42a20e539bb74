//! What a run needs before the runtime starts: the sites file and every
//! kind's submit description validated, by cosched and then by
//! `condor_submit -dry-run` (`condor::preflight`; nothing is submitted when
//! anything is wrong, exit 2), the state directory opened and locked, and the run
//! recorded with its kinds (`cosched submit`) or found (`--resume`, with the
//! files as they are now but the run's sites and kinds).
//!
//! Root: HTCondor does not let root own jobs, so cosched refuses to run as
//! root. `COSCHED_ALLOW_ROOT=1` lifts that, and `--simulate` does not need
//! it; both exist only for testing against the fake HTCondor (CI runs as root).

use super::drive::{state_failure, Run};
use super::simulate::{foreign_fake_pool, simulated_pool};
use super::SubmitArgs;
use crate::config::{Problem, SitesFile};
use crate::fake_condor;
use crate::state::{RecordedKind, RunRecord, RunStatus, StateDir};
use crate::submit_desc::{self, JobKinds, KindSpec};
use crate::Failure;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A run made ready to drive, with what only a foreground run holds.
pub(super) struct Plan {
    /// Holds the state directory's lock while the run lives.
    pub state: StateDir,
    pub run: Run,
    /// The fake pool this run drives, if any (stopped when the run is done).
    pub pool: Option<PathBuf>,
}

impl Plan {
    pub(super) fn fresh(args: &SubmitArgs) -> Result<Plan, Failure> {
        let (sites_path, kind_specs) = args.inputs()?;
        let sites_path = sites_path.as_path();
        check_root(args.simulate)?;
        let (mut sites, kinds) = load_inputs(sites_path, &kind_specs)?;
        let policy = sites.policy_named(args.policy.as_deref()).map_err(Failure::usage)?;
        for ignored in crate::config::ignored_settings(&policy, &sites) {
            eprintln!("{ignored}");
        }
        if !args.simulate {
            dry_run(&sites, &kinds)?;
        }
        if !(args.speedup > 0.0 && args.speedup <= MAX_SPEEDUP) {
            return Err(Failure::usage(format!(
                "--speedup must be more than 0 and at most {MAX_SPEEDUP}, got {}; `cosched bench` runs a \
                 simulated grid in virtual time, as fast as it computes",
                args.speedup
            )));
        }
        let run_id = new_run_id();
        let (epoch, rate, pool_config) = if args.simulate {
            let declared = crate::sim::model::declared_kinds(&sites.simulate.kinds);
            for t in 0..kinds.types().len() {
                let name = kinds.types().name(crate::policy::JobTypeId(t as u16));
                crate::sim::model::declared_kind(&declared, name, sites_path).map_err(Failure::usage)?;
            }
            let epoch = crate::engine::wall_clock_unix();
            (epoch, args.speedup, Some(simulated_pool(&sites, epoch, args.speedup)?))
        } else if let Some((_, epoch, speedup)) = foreign_fake_pool()? {
            (epoch, speedup, None)
        } else {
            (crate::engine::wall_clock_unix(), 1.0, None)
        };
        // Nothing is submitted before the run is recorded: a state directory
        // that cannot hold it is the user's to fix (exit 2).
        let state_dir = args.state_dir.as_deref().unwrap_or(Path::new("cosched-state"));
        let unusable = |f: Failure| {
            Failure::usage(format!(
                "{}\n  nothing was submitted; give --state-dir a directory you can write",
                f.message
            ))
        };
        let state = StateDir::open(state_dir).map_err(|e| unusable(state_failure(e)))?;
        let db = state.db().map_err(|e| unusable(state_failure(e)))?;
        if let Some(open) = db
            .runs()
            .map_err(|e| unusable(state_failure(e)))?
            .into_iter()
            .rev()
            .find(|r| r.status.resumable())
        {
            return Err(Failure::usage(format!(
                "{} holds run {} that has not finished ({}); continue it with `cosched submit --resume {}`, \
                 or start this run with another --state-dir",
                state.root().display(),
                open.id,
                open.status.as_str(),
                state.root().display()
            )));
        }
        let run_dir = state.run_dir(&run_id);
        std::fs::create_dir_all(&run_dir)
            .map_err(|e| unusable(Failure::failed(format!("cannot create {}: {e}", run_dir.display()))))?;
        let pool = match pool_config {
            Some(config) => {
                let pool_dir = run_dir.join("pool");
                let bin = fake_condor::install(&pool_dir, &config)
                    .map_err(|e| Failure::failed(format!("cannot set up the simulated grid: {e}")))?;
                sites.condor.bin_dir = Some(bin);
                Some(pool_dir)
            }
            None => None,
        };
        let run = RunRecord {
            id: run_id,
            created: chrono::DateTime::from_timestamp_millis((epoch * 1000.0) as i64)
                .map_or_else(String::new, |d| d.to_rfc3339()),
            n_jobs: kinds.n_jobs(),
            sites_path: absolute(sites_path),
            sites_text: std::fs::read_to_string(sites_path).unwrap_or_default(),
            kinds: kind_specs
                .iter()
                .map(|k| RecordedKind {
                    name: k.name.clone(),
                    count: k.count.unwrap_or(0).max(0) as u64,
                    job_path: absolute(&k.path),
                    job_text: std::fs::read_to_string(&k.path).unwrap_or_default(),
                })
                .collect(),
            policy: policy.name().to_string(),
            blind_types: args.blind_types,
            epoch_unix: epoch,
            simulate: args.simulate,
            speedup: rate,
            status: RunStatus::Running,
        };
        db.create_run(&run).map_err(state_failure)?;
        let run = Run {
            db: Arc::new(Mutex::new(db)),
            record: run,
            dir: run_dir,
            sites,
            kinds: Arc::new(kinds),
            policy,
            rate,
            resumed: false,
            memory: memory_place(args, args.simulate.then_some(&state)),
        };
        Ok(Plan { state, run, pool })
    }

    /// The unfinished run of state directory `dir`; the kinds the command
    /// line named (`--jobs` beside `--resume`), if any, must be the run's.
    pub(super) fn resume(dir: &Path, args: &SubmitArgs) -> Result<Plan, Failure> {
        let nothing_recorded = || {
            Failure::usage(format!(
                "{d}: nothing to resume: no run was recorded here, so nothing was submitted (cosched records \
                 a run before its first condor_submit); start it with `cosched submit N SITES JOB \
                 --state-dir {d}`",
                d = dir.display()
            ))
        };
        if !dir.join("state.db").is_file() {
            // A cosched stopped before it created the database leaves the
            // lock file: that is a state directory with no run in it.
            if dir.join("lock").is_file() {
                return Err(nothing_recorded());
            }
            return Err(Failure::usage(format!(
                "{}: no state database (state.db) here; give the --state-dir of the run to resume",
                dir.display()
            )));
        }
        let state = StateDir::open(dir).map_err(state_failure)?;
        let db = state.db().map_err(state_failure)?;
        let runs = db.runs().map_err(state_failure)?;
        let Some(run) = runs.iter().rev().find(|r| r.status.resumable()).cloned() else {
            return Err(match runs.last() {
                Some(last) => Failure::usage(format!(
                    "{}: nothing to resume: the last run, {}, is {}",
                    dir.display(),
                    last.id,
                    last.status.as_str()
                )),
                None => nothing_recorded(),
            });
        };
        check_root(run.simulate)?;
        let recorded_kinds = recorded_specs(&run);
        same_kinds(&run, &recorded_kinds, &args.jobs)?;
        // The files as they are now (a fix after a permanent error is
        // welcome), but the site list and the kinds must be the run's: jobs
        // are out there, numbered over those kinds.
        let (mut sites, kinds) = load_inputs(&run.sites_path, &recorded_kinds)?;
        let (recorded, _) = crate::config::parse(&run.sites_path, &run.sites_text)
            .map_err(|e| Failure::failed(format!("the run's recorded sites file no longer parses: {e}")))?;
        let names = |s: &SitesFile| s.sites.iter().map(|x| x.name.clone()).collect::<Vec<_>>();
        if names(&recorded) != names(&sites) {
            return Err(Failure::usage(format!(
                "{}: the sites changed since run {} started ({} then, {} now); jobs are out at those \
                 sites, so put the site list back as it was to resume",
                run.sites_path.display(),
                run.id,
                names(&recorded).join(", "),
                names(&sites).join(", ")
            )));
        }
        let policy = sites.policy_named(Some(&run.policy)).map_err(Failure::usage)?;
        let mut rate = 1.0;
        let mut pool = None;
        if run.simulate {
            let pool_dir = state.run_dir(&run.id).join("pool");
            let config = simulated_pool(&recorded, run.epoch_unix, run.speedup)?;
            let bin = fake_condor::install(&pool_dir, &config)
                .map_err(|e| Failure::failed(format!("cannot set up the simulated grid: {e}")))?;
            fake_condor::start(&pool_dir)
                .map_err(|e| Failure::failed(format!("cannot start the simulated grid's schedd: {e}")))?;
            sites.condor.bin_dir = Some(bin);
            rate = run.speedup;
            pool = Some(pool_dir);
        } else if let Some((_, _, speedup)) = foreign_fake_pool()? {
            rate = speedup;
        }
        let memory = memory_place(args, run.simulate.then_some(&state));
        let run = Run {
            db: Arc::new(Mutex::new(db)),
            dir: state.run_dir(&run.id),
            record: run,
            sites,
            kinds: Arc::new(kinds),
            policy,
            rate,
            resumed: true,
            memory,
        };
        Ok(Plan { state, run, pool })
    }
}

/// The memory database a foreground run reads and adds to
/// ([`crate::state::memory`]), `None` for none: `--no-memory`, or no place
/// for the user's (said, and the run goes on cold). A `--simulate` run's
/// sites are models named like the real ones, so unless told otherwise it
/// keeps its memory in its state directory (`simulated`), never in the
/// user's, where a real run would take a model's knee for the site's.
fn memory_place(args: &SubmitArgs, simulated: Option<&StateDir>) -> Option<PathBuf> {
    if args.no_memory {
        return None;
    }
    if let Some(path) = &args.memory {
        return Some(path.clone());
    }
    if let Some(state) = simulated {
        return Some(state.memory_path());
    }
    crate::state::memory::user_memory_path()
        .inspect_err(|e| eprintln!("cosched: warning: {e}; this run starts cold and keeps nothing"))
        .ok()
}

fn usage_problems(problems: &[Problem]) -> Option<Failure> {
    for p in problems {
        eprintln!("{p}");
    }
    let errors = problems.iter().filter(|p| p.is_error()).count();
    (errors > 0).then(|| {
        Failure::usage(format!(
            "{errors} error(s) in the inputs; nothing was submitted (fix them and try again)"
        ))
    })
}

/// HTCondor's own check of the run's submit files before any is submitted
/// (`condor::preflight`): a refusal is an error of the inputs.
fn dry_run(sites: &SitesFile, kinds: &JobKinds) -> Result<(), Failure> {
    let found = crate::condor::preflight(&crate::condor::Condor::new(&sites.condor), sites, kinds)
        .map_err(|why| Failure::usage(format!("{why}; nothing was submitted")))?;
    usage_problems(&found.problems).map_or(Ok(()), Err)
}

fn check_root(simulated: bool) -> Result<(), Failure> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root && !simulated && std::env::var("COSCHED_ALLOW_ROOT").as_deref() != Ok("1") {
        return Err(Failure::usage(
            "cosched does not run as root: HTCondor does not let root own jobs (condor_submit would fail). \
             Run it as the user who should own the jobs. (COSCHED_ALLOW_ROOT=1 exists only for testing \
             against cosched's fake HTCondor.)",
        ));
    }
    Ok(())
}

/// Loads and validates the sites file and every kind's description; every
/// problem is printed.
fn load_inputs(sites_path: &Path, kinds: &[KindSpec]) -> Result<(SitesFile, JobKinds), Failure> {
    let sites = crate::config::load_with_warnings(sites_path);
    let descs: Result<Vec<_>, _> = kinds.iter().map(|k| submit_desc::load(&k.path)).collect();
    let (Ok((sites, warnings)), Ok(descs)) = (sites, descs) else {
        let (problems, _) = submit_desc::check_problems(sites_path, kinds);
        return Err(usage_problems(&problems).unwrap_or_else(|| Failure::usage("the inputs cannot be read")));
    };
    let mut problems = warnings;
    for (kind, desc) in kinds.iter().zip(&descs) {
        problems.extend(submit_desc::validate(&sites, desc, kind.count));
    }
    if let Some(f) = usage_problems(&submit_desc::without_repeats(problems)) {
        return Err(f);
    }
    let named = kinds.iter().zip(descs).map(|(k, d)| (k.name.clone(), k.count.unwrap_or(0).max(0) as u64, d));
    let kinds = JobKinds::new(named.collect()).map_err(Failure::usage)?;
    Ok((sites, kinds))
}

/// The kinds of a recorded run, as the command line would give them.
fn recorded_specs(run: &RunRecord) -> Vec<KindSpec> {
    run.kinds
        .iter()
        .map(|k| KindSpec { name: k.name.clone(), count: Some(k.count as i64), path: k.job_path.clone() })
        .collect()
}

/// Refuses a resume whose command line names other kinds than the run's:
/// its jobs are numbered over the run's kinds, and some are out.
fn same_kinds(run: &RunRecord, recorded: &[KindSpec], given: &[KindSpec]) -> Result<(), Failure> {
    if given.is_empty() {
        return Ok(());
    }
    let key = |k: &KindSpec| (k.name.clone(), k.count, absolute(&k.path));
    if given.len() == recorded.len() && given.iter().map(key).eq(recorded.iter().map(key)) {
        return Ok(());
    }
    let list =
        |kinds: &[KindSpec]| kinds.iter().map(|k| format!("--jobs {}", k.display())).collect::<Vec<_>>();
    Err(Failure::usage(format!(
        "run {} was started with other kinds of job ({}) than given now ({}); its jobs are numbered over \
         those kinds and some are out, so resume it as it was (`cosched submit --resume DIR`, the kinds come \
         from its record), or start a new run with another --state-dir",
        run.id,
        list(recorded).join(" "),
        list(given).join(" ")
    )))
}

/// A `[[site]]` setting (a limit, a first window) that a policy chosen
/// with `--policy` will not honour is said before anything is submitted
/// (the file's own policy was checked with the file), not found out from
/// the queue.
/// The fastest a `--simulate` run goes: its fake HTCondor commands are real
/// processes, and each millisecond they take is `speedup` ms of simulated
/// time, which past this distorts the run (BENCHMARKS.md, "Limits").
const MAX_SPEEDUP: f64 = 10_000.0;

/// A run id people can type: `20261121T0612-3f9a`.
#[allow(clippy::disallowed_methods)] // the edge: ids carry the wall-clock start
fn new_run_id() -> String {
    let now = chrono::Utc::now();
    let salt = (now.timestamp_subsec_nanos() ^ std::process::id().wrapping_mul(2_654_435_761)) & 0xffff;
    format!("{}-{salt:04x}", now.format("%Y%m%dT%H%M%S"))
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
