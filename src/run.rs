//! `cosched submit N sites.toml job.sub` end to end, `--resume`, and
//! `cosched check`.
//!
//! A run: validate both files and record the run, or find the run to resume
//! (`plan`) → drive it ([`drive`], the same way as the daemon does, with
//! checkpoints and resume from them) with the terminal's `foreground`
//! watcher: the [`progress`] display, SIGINT/SIGTERM, a batch `condor_submit`
//! rejects, a schedd silent too long → print the summary and say how to go
//! on. SIGINT/SIGTERM stop submitting, keep every job where it is and exit 3
//! with the commands to resume or clean up. Why a resume loses and repeats
//! nothing is in [`drive`]'s docs.
//!
//! On the fake HTCondor ([`simulate`]: `--simulate`, or a pool named by
//! `COSCHED_FAKE_POOL`) the run's clock runs at the pool's speedup from the
//! pool's epoch.

mod checkpoint;
pub mod decisions;
pub mod drive;
mod foreground;
mod history;
mod plan;
pub mod progress;
pub mod simulate;

use crate::engine::Ending;
use crate::fake_condor;
use crate::state::Db;
use crate::submit_desc::{self, KindSpec, JOBS_FORM};
use crate::sync::Locked;
use crate::{CmdResult, Exit, Failure};
use clap::Args;
use foreground::Watch;
use plan::Plan;
use progress::{Display, Progress};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
#[command(override_usage = "cosched submit [OPTIONS] N SITES JOB\n       \
                  cosched submit [OPTIONS] SITES --jobs [NAME=]COUNT:FILE...\n       \
                  cosched submit --resume STATE_DIR")]
pub struct SubmitArgs {
    /// Number of jobs to run (each gets a stable index 0..N-1, $(CoschedJob)).
    /// With --jobs, give SITES alone instead.
    #[arg(value_name = "N", required_unless_present_any = ["resume", "jobs"], allow_negative_numbers = true)]
    pub n_jobs: Option<String>,
    /// The sites file (see sites.example.toml).
    #[arg(required_unless_present_any = ["resume", "jobs"])]
    pub sites: Option<PathBuf>,
    /// The HTCondor submit description of one job.
    // Not required here: without it, N is most often what is missing
    // (`cosched submit sites.toml job.sub`), which `inputs` says.
    pub job: Option<PathBuf>,
    /// One kind of job of the run: COUNT jobs of the submit description
    /// FILE, named NAME ($(CoschedType); default: FILE's stem). Repeat for
    /// each kind; $(CoschedJob) numbers the jobs of all kinds 0..N-1.
    #[arg(long = "jobs", value_name = JOBS_FORM, value_parser = KindSpec::parse, allow_hyphen_values = true)]
    pub jobs: Vec<KindSpec>,
    /// Scheduling policy; overrides `[policy] name` in sites.toml (a resumed
    /// run keeps its own).
    #[arg(long, conflicts_with = "resume")]
    pub policy: Option<String>,
    /// Tell the policy every job is of one kind, while each job still runs as
    /// its own: what knowing kinds is worth (kept for --resume).
    #[arg(long, conflicts_with_all = ["resume", "daemon"])]
    pub blind_types: bool,
    /// Where submit files, logs and the state database go.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Continue an interrupted run from its state directory. Its kinds, the
    /// text of their submit descriptions and its memory are recorded there:
    /// it goes on with those (--jobs, --memory, --no-memory, if given, must
    /// be the same), never with a description edited since (said).
    #[arg(long, value_name = "STATE_DIR", conflicts_with_all = ["n_jobs", "sites", "job", "state_dir"])]
    pub resume: Option<PathBuf>,
    /// The memory of sites and kinds of job to start from and add to
    /// (default: $COSCHED_MEMORY, else $XDG_STATE_HOME/cosched/memory.db,
    /// else ~/.local/state/cosched/memory.db). A resumed run keeps the one it
    /// was started with; another given with --resume is refused.
    #[arg(long, value_name = "PATH", conflicts_with = "daemon")]
    pub memory: Option<PathBuf>,
    /// Start cold and keep nothing of what the run learns (kept for --resume).
    #[arg(long, conflicts_with_all = ["memory", "daemon"])]
    pub no_memory: bool,
    /// Run on the built-in simulated grid: the fake HTCondor commands shipped
    /// with cosched, driven by each site's [site.simulate] model.
    #[arg(long)]
    pub simulate: bool,
    /// With --simulate: simulated seconds per real second, at most 10000
    /// (a resumed run keeps its own). Every millisecond cosched and the fake
    /// HTCondor take is this many of grid time: past a few hundred, events
    /// reach the policy late and it decides otherwise than it would on a
    /// grid (a warning says so).
    #[arg(long, default_value_t = 100.0, requires = "simulate", conflicts_with = "resume")]
    pub speedup: f64,
    /// Print the final summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Hand the run to the daemon instead of running it here.
    #[arg(long)]
    pub daemon: bool,
    /// The daemon's socket (with --daemon).
    #[arg(long, env = "COSCHED_SOCKET")]
    pub socket: Option<PathBuf>,
}

/// The two forms of `cosched submit`, for messages.
const FORMS: &str = "`cosched submit N SITES JOB` for one submit description, or \
                     `cosched submit SITES --jobs [NAME=]COUNT:FILE --jobs …` for several";

impl SubmitArgs {
    /// The sites file and the kinds of job, from either form (never with
    /// `--resume`). Mixing the forms is refused, saying which to use.
    pub fn inputs(&self) -> Result<(PathBuf, Vec<KindSpec>), Failure> {
        if self.jobs.is_empty() {
            if let (Some(sites), Some(job), None) = (&self.n_jobs, &self.sites, &self.job) {
                if sites.parse::<i64>().is_err() {
                    return Err(Failure::usage(format!(
                        "N, the number of jobs, is missing: cosched submit N {sites} {}",
                        job.display()
                    )));
                }
            }
            let (Some(n), Some(sites), Some(job)) = (&self.n_jobs, &self.sites, &self.job) else {
                return Err(Failure::usage(format!("give the jobs to run: {FORMS}")));
            };
            looks_swapped(sites, job)?;
            let n: i64 = n.parse().map_err(|e: std::num::ParseIntError| match e.kind() {
                std::num::IntErrorKind::PosOverflow => {
                    Failure::usage(crate::policy::more_jobs_than_a_run_holds(n))
                }
                _ => Failure::usage(format!(
                    "N, the number of jobs, must be a whole number, got `{n}`; {FORMS}"
                )),
            })?;
            return Ok((sites.clone(), vec![KindSpec::single(Some(n), job)]));
        }
        // With --jobs the one positional, in N's place, is the sites file.
        let sites = match (&self.n_jobs, &self.sites, &self.job) {
            (Some(sites), None, None) => PathBuf::from(sites),
            (None, _, _) => {
                return Err(Failure::usage(format!(
                    "--jobs needs the sites file before it: cosched submit SITES {}",
                    jobs_line(&self.jobs)
                )))
            }
            _ => {
                return Err(Failure::usage(format!(
                    "N SITES JOB and --jobs do not go together: --jobs gives each kind's count and submit \
                     description, so give the sites file alone (cosched submit SITES {}), or drop --jobs \
                     for a run of one description (cosched submit N SITES JOB)",
                    jobs_line(&self.jobs)
                )))
            }
        };
        kinds_without_repeats(&self.jobs)?;
        Ok((sites, self.jobs.clone()))
    }
}

/// Refuses SITES and JOB given the other way round, told by their names
/// (`x.sub` where the sites file goes and `y.toml` where the job goes):
/// read as given, each file's errors would be about the other's syntax.
fn looks_swapped(sites: &std::path::Path, job: &std::path::Path) -> Result<(), Failure> {
    let ext = |p: &std::path::Path| p.extension().map(|e| e.to_string_lossy().to_ascii_lowercase());
    if ext(sites).as_deref() == Some("sub") && ext(job).as_deref() == Some("toml") {
        return Err(Failure::usage(format!(
            "the sites file comes before the submit description: SITES is {} and JOB is {}; swap them",
            sites.display(),
            job.display()
        )));
    }
    Ok(())
}

/// `--jobs A --jobs B` as typed (normalised), for messages.
fn jobs_line(jobs: &[KindSpec]) -> String {
    jobs.iter().map(|k| format!("--jobs {}", k.display())).collect::<Vec<_>>().join(" ")
}

fn kinds_without_repeats(kinds: &[KindSpec]) -> Result<(), Failure> {
    match submit_desc::duplicate_kind(kinds) {
        Some(message) => Err(Failure::usage(message)),
        None => Ok(()),
    }
}

#[derive(Args, Debug)]
#[command(override_usage = "cosched check [OPTIONS] SITES JOB\n       \
                  cosched check [OPTIONS] SITES --jobs [NAME=]COUNT:FILE...")]
pub struct CheckArgs {
    /// The sites file (see sites.example.toml).
    pub sites: PathBuf,
    /// The submit description (or --jobs, as `cosched submit` takes them).
    #[arg(required_unless_present = "jobs")]
    pub job: Option<PathBuf>,
    /// Also check N (as `cosched submit N …` would).
    #[arg(long, allow_negative_numbers = true)]
    pub n_jobs: Option<i64>,
    /// One kind of job, as `cosched submit SITES --jobs …` takes it; every
    /// description is checked.
    #[arg(long = "jobs", value_name = JOBS_FORM, value_parser = KindSpec::parse, allow_hyphen_values = true)]
    pub jobs: Vec<KindSpec>,
}

/// `cosched check SITES JOB [--n-jobs N]`, or `cosched check SITES --jobs …`.
pub fn check_command(args: CheckArgs) -> CmdResult {
    let kinds = match (&args.job, args.n_jobs, args.jobs.is_empty()) {
        (Some(job), n, true) => {
            looks_swapped(&args.sites, job)?;
            vec![KindSpec::single(n, job)]
        }
        (None, None, false) => {
            kinds_without_repeats(&args.jobs)?;
            args.jobs
        }
        (job, n, _) => {
            let given = match (job, n) {
                (Some(_), Some(_)) => "JOB and --n-jobs",
                (Some(_), None) => "JOB",
                _ => "--n-jobs",
            };
            return Err(Failure::usage(format!(
                "{given} and --jobs do not go together: --jobs gives each kind's count and submit \
                 description (cosched check SITES {}); or drop --jobs to check one (cosched check SITES JOB \
                 --n-jobs N)",
                jobs_line(&args.jobs)
            )));
        }
    };
    submit_desc::check(&args.sites, &kinds, || dry_run(&args.sites, &kinds))
}

/// HTCondor's own reading of the batches a run of these inputs would submit
/// (`condor::preflight`), and a line for `check`'s summary. Called where the
/// inputs were found usable.
fn dry_run(sites_path: &std::path::Path, kinds: &[KindSpec]) -> (Vec<crate::config::Problem>, String) {
    let loaded = crate::config::load_with_warnings(sites_path).ok().and_then(|(sites, _)| {
        let descs: Option<Vec<_>> = kinds
            .iter()
            .map(|k| {
                submit_desc::load(&k.path)
                    .ok()
                    .map(|d| (k.name.clone(), k.count.unwrap_or(1).max(1) as u64, d))
            })
            .collect();
        Some((sites, submit_desc::JobKinds::new(descs?).ok()?))
    });
    let Some((sites, kinds)) = loaded else { return (Vec::new(), String::new()) };
    match crate::condor::preflight(&crate::condor::Condor::new(&sites.condor), &sites, &kinds) {
        Ok(found) if found.problems.is_empty() => (
            Vec::new(),
            format!("\n  condor_submit -dry-run: {} submit file(s) read, none refused", found.checked),
        ),
        Ok(found) => (found.problems, String::new()),
        Err(why) => (Vec::new(), format!("\n  HTCondor's own check (condor_submit -dry-run) skipped: {why}")),
    }
}

/// `cosched submit …`.
pub fn command(args: SubmitArgs) -> CmdResult {
    let plan = match &args.resume {
        Some(dir) => Plan::resume(dir, &args)?,
        None => Plan::fresh(&args)?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::failed(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(execute(plan, args.json))
}

/// How to remove the run's jobs: `condor_rm C1 C2 …` for the clusters it
/// submitted, by their ids, never by an attribute that Condor-C's forwarded
/// copies carry. Past a line's worth of ids, they are written to a file in
/// the run's directory for `xargs`. A simulated run's jobs exist only in its
/// own grid, where the submit host's `condor_rm` would remove other jobs.
fn removal_hint(
    db: &Arc<Mutex<Db>>,
    run: &str,
    run_dir: &std::path::Path,
    pool: Option<&std::path::Path>,
) -> String {
    let subs = db.locked().submissions(run).unwrap_or_default();
    let clusters: std::collections::BTreeSet<i64> = subs
        .iter()
        .filter_map(|s| match s.state {
            crate::state::SubmissionState::Submitted { cluster } => Some(cluster),
            _ => None,
        })
        .collect();
    if clusters.is_empty() {
        return "nothing was submitted".to_string();
    }
    if let Some(pool) = pool {
        return format!(
            "its jobs exist only in its simulated grid ({}); the submit host's condor_rm is not for them",
            pool.display()
        );
    }
    let list: Vec<String> = clusters.iter().map(i64::to_string).collect();
    if list.len() <= HINT_CLUSTERS {
        return format!("condor_rm {}", list.join(" "));
    }
    let file = run_dir.join("clusters");
    match std::fs::write(&file, list.join("\n") + "\n") {
        Ok(()) => format!("xargs condor_rm < {} ({} clusters)", file.display(), list.len()),
        Err(_) => format!("condor_rm {}", list.join(" ")),
    }
}

/// Cluster ids a removal hint lists on its line.
const HINT_CLUSTERS: usize = 12;

async fn execute(plan: Plan, json: bool) -> CmdResult {
    let Plan { state, run, pool } = plan;
    if let Some(pool_dir) = &pool {
        // The fake commands find their pool through the environment; set
        // before any of them is spawned.
        std::env::set_var(fake_condor::POOL_ENV, pool_dir);
    }
    let (id, db, dir, condor) =
        (run.record.id.clone(), run.db.clone(), run.dir.clone(), run.sites.condor.clone());
    let names: Vec<String> = run.sites.sites.iter().map(|s| s.name.clone()).collect();
    let shutdown = CancellationToken::new();
    let display = if json {
        Display::Quiet
    } else if std::io::stderr().is_terminal() {
        Display::Live
    } else {
        Display::Lines
    };
    let mut watch = Watch::new(
        Progress::new(&id, names, run.record.n_jobs, run.rate, display).with_kinds(run.kinds.types().clone()),
        shutdown.clone(),
        condor.unreachable_timeout,
        json,
        state.root().display().to_string(),
    );
    let driven = drive::run(run, Box::new(|policy, _| policy), &mut watch, shutdown).await?;
    let summary =
        watch.progress.take_summary().ok_or_else(|| Failure::failed("the run ended without a summary"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
    } else {
        print!("{}", progress::render_summary(&summary));
    }
    // A report that cannot be written costs the run nothing: the logs stay,
    // and `cosched log report` can make it later.
    match &driven.report {
        Some(Ok(html)) => eprintln!("cosched: report: {}", html.display()),
        Some(Err(e)) => eprintln!("cosched: no report written ({e}); the user logs are in {}", dir.display()),
        None => {}
    }
    let how_to_continue = format!(
        "  continue: cosched submit --resume {}\n  or remove its jobs: {}",
        state.root().display(),
        removal_hint(&db, &id, &dir, pool.as_deref())
    );
    match driven.ending {
        Ending::Settled => {
            if let Some(pool_dir) = &pool {
                if let Err(e) = fake_condor::stop(pool_dir) {
                    tracing::warn!("stopping the simulated grid: {e}");
                }
            }
            Ok(if driven.given_up == 0 { Exit::Ok } else { Exit::Partial })
        }
        Ending::Interrupted => {
            let silent = watch.unreachable.locked().take();
            if let Some((site, error)) = silent {
                return Err(Failure::failed(format!(
                    "the schedd of site {site} has not answered for {:.0} s ([condor] unreachable_timeout); \
                     stopped (jobs already out are left alone):\n{error}\nOnce it answers again,\n{how_to_continue}",
                    condor.unreachable_timeout
                )));
            }
            if let Some((site, error)) = watch.permanent.take() {
                return Err(Failure::failed(format!(
                    "condor_submit rejected a batch at site {site}; stopped submitting (jobs already out are \
                     left alone):\n{error}\nFix the cause, then\n{how_to_continue}"
                )));
            }
            eprintln!("cosched: interrupted; nothing more is submitted and the jobs out stay where they are.\n{how_to_continue}");
            Ok(Exit::Interrupted)
        }
        Ending::Hang => Err(Failure::failed(format!(
            "run {id} stopped with {} job(s) stuck at the sites (nothing started them).\n{how_to_continue}",
            summary.unfinished
        ))),
    }
}
