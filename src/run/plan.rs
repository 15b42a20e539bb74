//! What a run needs before the runtime starts: the sites file and every
//! kind's submit description validated, by cosched and then by
//! `condor_submit -dry-run` (`condor::preflight`; nothing is submitted when
//! anything is wrong, exit 2), the state directory opened and locked, and the run
//! recorded with its kinds, the text of their descriptions and its memory
//! database (`cosched submit`) or found (`--resume`: the run's sites, kinds,
//! descriptions and memory, with the sites file as it is now).
//!
//! A run is one thing: a resume submits from the descriptions' text as the
//! run recorded it (a file edited since is said, and not read), and keeps
//! what it learns in the memory it started with. The sites file is read as
//! it is now (a fix after a refused batch is welcome) but must list the
//! run's sites.
//!
//! The run's clock (its `epoch_unix`: the makespan, the elapsed time, the
//! report's start) starts once the state directory's lock is this run's: a
//! wait for another cosched to let go of it is said at once, and is not
//! the run's.
//!
//! Root: HTCondor does not let root own jobs, so cosched refuses to run as
//! root. `COSCHED_ALLOW_ROOT=1` lifts that, and `--simulate` does not need
//! it; both exist only for testing against the fake HTCondor (CI runs as root).

use super::drive::{state_failure, Run};
use super::simulate::{foreign_fake_pool, simulated_pool};
use super::SubmitArgs;
use crate::config::{Problem, SitesFile};
use crate::fake_condor;
use crate::state::{RecordedKind, RecordedMemory, RunRecord, RunStatus, StateDir, StateError};
use crate::submit_desc::{self, JobKinds, KindSpec, SubmitDescription};
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
        // Read once: the text validated is the text recorded, and submitted.
        let (descs, texts) = match read_descriptions(&kind_specs) {
            Some(read) => {
                let (descs, texts): (Vec<_>, Vec<_>) = read.into_iter().unzip();
                (Some(descs), texts)
            }
            None => (None, Vec::new()),
        };
        let (mut sites, kinds) = load_inputs(sites_path, &kind_specs, descs)?;
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
        if args.simulate && args.speedup > FAITHFUL_SPEEDUP {
            eprintln!(
                "cosched: warning: --speedup {}: each millisecond cosched and the fake HTCondor take is {} \
                 simulated seconds, so the policy hears of starts and ends late and decides otherwise than on a \
                 grid (at 1000, starts heard up to 90 s late made it queue jobs on waits that were not); keep \
                 it at {FAITHFUL_SPEEDUP} or less to watch the policy, or use `cosched bench` (virtual time)",
                args.speedup,
                args.speedup / 1000.0
            );
        }
        if args.simulate {
            let declared = crate::sim::model::declared_kinds(&sites.simulate.kinds);
            for t in 0..kinds.types().len() {
                let name = kinds.types().name(crate::policy::JobTypeId(t as u16));
                crate::sim::model::declared_kind(&declared, name, sites_path).map_err(Failure::usage)?;
            }
        }
        // Nothing is submitted before the run is recorded: a state directory
        // that cannot hold it is the user's to fix (exit 2).
        let state_dir = args.state_dir.as_deref().unwrap_or(Path::new("cosched-state"));
        let unusable = |f: Failure| {
            Failure::usage(format!(
                "{}\n  nothing was submitted; give --state-dir a directory you can write",
                f.message
            ))
        };
        let state = open_state(state_dir).map_err(|e| match e {
            StateError::Locked(..) => Failure::usage(format!("{e}\n  nothing was submitted")),
            e => unusable(state_failure(e)),
        })?;
        let run_id = new_run_id();
        state.claim(&run_id);
        // The run starts now that the state directory is its own: time spent
        // waiting for its lock is in no figure of the run.
        let (epoch, rate, pool_config) = if args.simulate {
            let epoch = crate::engine::wall_clock_unix();
            (epoch, args.speedup, Some(simulated_pool(&sites, epoch, args.speedup)?))
        } else if let Some((_, epoch, speedup)) = foreign_fake_pool()? {
            (epoch, speedup, None)
        } else {
            (crate::engine::wall_clock_unix(), 1.0, None)
        };
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
                .enumerate()
                .map(|(i, k)| RecordedKind {
                    name: k.name.clone(),
                    count: k.count.unwrap_or(0).max(0) as u64,
                    job_path: absolute(&k.path),
                    // No text from the first read: the file changed between
                    // it and `load_inputs`', which found it good.
                    job_text: texts
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| std::fs::read_to_string(&k.path).unwrap_or_default()),
                })
                .collect(),
            policy: policy.name().to_string(),
            blind_types: args.blind_types,
            epoch_unix: epoch,
            simulate: args.simulate,
            speedup: rate,
            status: RunStatus::Running,
        };
        let memory = memory_place(args, args.simulate.then_some(&state));
        db.create_run_with_memory(&run, memory.as_deref()).map_err(state_failure)?;
        let run = Run {
            db: Arc::new(Mutex::new(db)),
            record: run,
            dir: run_dir,
            sites,
            kinds: Arc::new(kinds),
            policy,
            rate,
            resumed: false,
            memory,
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
        let state = open_state(dir).map_err(state_failure)?;
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
        state.claim(&run.id);
        check_root(run.simulate)?;
        let recorded_kinds = recorded_specs(&run);
        same_kinds(&run, &recorded_kinds, &args.jobs)?;
        let recorded_memory = db.run_memory(&run.id).map_err(state_failure)?;
        let memory = resumed_memory(&run, recorded_memory, args, &state)?;
        // The sites file as it is now (a fix after a permanent error is
        // welcome), but the site list and the kinds must be the run's: jobs
        // are out there, numbered over those kinds. The descriptions are the
        // run's own text: jobs out there were submitted from it, and what the
        // run learns is kept under its fingerprint.
        let descs = recorded_descriptions(&run)?;
        warn_of_edited_descriptions(&run);
        let (mut sites, kinds) = load_inputs(&run.sites_path, &recorded_kinds, Some(descs))?;
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
    // Recorded with the run, for its resumes, which may start elsewhere.
    let given = args.memory.as_ref().map(|path| std::path::absolute(path).unwrap_or_else(|_| path.clone()));
    crate::state::memory::memory_file(given.as_deref(), simulated.map(StateDir::root))
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

/// Loads the sites file and validates it with every kind's description
/// (`descs`, in kind order; `None`: read each from its file); every problem
/// is printed.
fn load_inputs(
    sites_path: &Path,
    kinds: &[KindSpec],
    descs: Option<Vec<SubmitDescription>>,
) -> Result<(SitesFile, JobKinds), Failure> {
    let given = descs.is_some();
    let sites = crate::config::load_with_warnings(sites_path);
    let descs: Result<Vec<_>, _> = match descs {
        Some(descs) => Ok(descs),
        None => kinds.iter().map(|k| submit_desc::load(&k.path)).collect(),
    };
    let (Ok((sites, warnings)), Ok(descs)) = (sites, descs) else {
        // What `cosched check` says of the files; of the descriptions only
        // when they are the files (the ones given parsed already).
        let on_disk = if given { &[][..] } else { kinds };
        let (problems, _) = submit_desc::check_problems(sites_path, on_disk);
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

/// Each kind's submit description read once, with its text: what is
/// validated is what is recorded. `None` when one cannot be read or
/// parsed, for [`load_inputs`] to report with every other problem.
fn read_descriptions(kinds: &[KindSpec]) -> Option<Vec<(SubmitDescription, String)>> {
    kinds
        .iter()
        .map(|k| {
            let text = std::fs::read_to_string(&k.path).ok()?;
            submit_desc::parse(&k.path, &text).ok().map(|desc| (desc, text))
        })
        .collect()
}

/// A resumed run's submit descriptions, parsed from the text it recorded
/// at its start, at their recorded paths (so a relative `executable` or
/// input still resolves against the description's own directory). A kind
/// recorded without its text (its file could not be read again as the run
/// was recorded) is read from its file.
fn recorded_descriptions(run: &RunRecord) -> Result<Vec<SubmitDescription>, Failure> {
    run.kinds
        .iter()
        .map(|kind| {
            if kind.job_text.is_empty() {
                return submit_desc::load(&kind.job_path).map_err(|e| Failure::usage(e.to_string()));
            }
            submit_desc::parse(&kind.job_path, &kind.job_text).map_err(|e| {
                Failure::failed(format!(
                    "run {}: the submit description its kind `{}` was started with ({}, kept in its state \
                     database) no longer parses: {e}\nresume it with the cosched that started it",
                    run.id,
                    kind.name,
                    kind.job_path.display()
                ))
            })
        })
        .collect()
}

/// Says, once per file, that a resumed run's submit description is no
/// longer on disk as the run started with it (edited, or gone): the run
/// goes on with the text it recorded, never the file's, so that its jobs
/// are all of one description and what it learns is kept under that one's
/// fingerprint.
fn warn_of_edited_descriptions(run: &RunRecord) {
    let mut said = std::collections::BTreeSet::new();
    for kind in run.kinds.iter().filter(|k| !k.job_text.is_empty()) {
        if !said.insert(&kind.job_path) {
            continue;
        }
        let now = match std::fs::read_to_string(&kind.job_path) {
            Ok(text) if text == kind.job_text => continue,
            Ok(_) => "changed since".to_string(),
            Err(e) => format!("cannot be read ({e}) since"),
        };
        eprintln!(
            "cosched: warning: {}: {now} run {} started; the run goes on with the text it started with \
             (kept in its state database). To run the new text, start a new run (another --state-dir) \
             once this one is done or its jobs are removed",
            kind.job_path.display(),
            run.id
        );
    }
}

/// The memory database a resumed run goes on with: the one it was started
/// with, from its record, so that what it learns before and after the
/// resume goes to one place. `--memory` or `--no-memory` beside `--resume`
/// that says otherwise is refused (exit 2), like `--policy`: a run keeps
/// its own. A run recorded without its memory (before schema 6) takes the
/// command line's, as it always did.
fn resumed_memory(
    run: &RunRecord,
    recorded: RecordedMemory,
    args: &SubmitArgs,
    state: &StateDir,
) -> Result<Option<PathBuf>, Failure> {
    let started = match recorded {
        RecordedMemory::Unknown => return Ok(memory_place(args, run.simulate.then_some(state))),
        RecordedMemory::None => None,
        RecordedMemory::At(path) => Some(path),
    };
    let asked = match (&args.memory, args.no_memory) {
        (Some(path), _) => Some(Some(path.as_path())),
        (None, true) => Some(None),
        (None, false) => None,
    };
    let same = |a: Option<&Path>, b: Option<&Path>| match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            std::path::absolute(a).is_ok_and(|a| a == b)
                || std::fs::canonicalize(a).is_ok_and(|a| std::fs::canonicalize(b).is_ok_and(|b| a == b))
        }
        _ => false,
    };
    match asked {
        Some(asked) if !same(asked, started.as_deref()) => {
            let what = |m: Option<&Path>| match m {
                Some(path) => format!("the memory database {}", path.display()),
                None => "no memory (--no-memory: it starts cold and keeps nothing)".to_string(),
            };
            Err(Failure::usage(format!(
                "run {} was started with {}, and a run keeps one memory; resume it without --memory and \
                 --no-memory (it goes on with its own), or use {} in a new run (another --state-dir)",
                run.id,
                what(started.as_deref()),
                what(asked)
            )))
        }
        _ => Ok(started),
    }
}

/// Opens and locks the state directory `dir`. When another cosched holds
/// it, who (pid, command, run) and how long this one waits are said at
/// once: a run that waits in silence looks hung.
fn open_state(dir: &Path) -> Result<StateDir, StateError> {
    StateDir::open_telling(dir, &mut |held, patience| {
        eprintln!(
            "cosched: {}: another cosched is working in this state directory ({held}); waiting up to \
             {} s for it to let go (this run's clock starts once it has)",
            dir.display(),
            patience.as_secs_f64()
        )
    })
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

/// The fastest a `--simulate` run goes: its fake HTCondor commands are real
/// processes, and each millisecond they take is `speedup` ms of simulated
/// time, which past this distorts the run (BENCHMARKS.md, "Limits").
const MAX_SPEEDUP: f64 = 10_000.0;

/// The speedup past which `--simulate` is warned about: the tail and the
/// fake HTCondor take some milliseconds per event, which the speedup makes
/// seconds of grid time (docs/experiments.md, "Waits counted only while a
/// slot is free").
const FAITHFUL_SPEEDUP: f64 = 200.0;

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
