//! A fake HTCondor: `condor_submit`, `condor_rm` and `condor_q` look-alikes
//! that run the site model of `shared/scenarios` in scaled real time.
//!
//! Why it exists: cosched's real edge (processes, user logs, tailing, crash
//! recovery) has to be exercised end to end without an HTCondor pool — by the
//! README demo (`cosched submit … --simulate`) and by end-to-end tests that
//! kill cosched at random moments. So the fake copies HTCondor at the
//! interface cosched uses, byte for byte where the fixtures in
//! `shared/fixtures/cli` and `shared/fixtures/userlogs` show it, and nothing
//! behind it.
//!
//! How it works:
//! - A *pool* is a directory named by `COSCHED_FAKE_POOL`. [`install`] writes
//!   its `pool.toml` ([`PoolConfig`]) and a `bin/` of symlinks to the cosched
//!   binary, which answers to the HTCondor names busybox-style ([`main_as`]).
//! - The short-lived commands and one background fake schedd share the queue
//!   (`queue.json`) under an exclusive `flock` on `pool.lock`; every write is
//!   temp file + rename, so a process killed at any moment leaves a readable
//!   queue. `history.jsonl` is an append-only record of every proc ever queued.
//! - `condor_submit` writes the 000 events itself (like HTCondor) and starts
//!   the schedd if none runs. The schedd advances one [`crate::sim::model::SiteSim`]
//!   per site at `speedup` simulated seconds per real second and appends
//!   027/001/005/012 events to each job's log; `condor_rm` writes 009.
//! - Simulated time is `(real unix now − epoch) × speedup`; log stamps are the
//!   *virtual wall clock* `epoch + simulated time` in local time, so a reader
//!   maps a stamp to run time as `stamp − epoch`.
//!
//! Knobs and their semantics are documented in `condor/README.md`.
//!
//! [`install`]: crate::fake_condor::install
//! [`PoolConfig`]: crate::fake_condor::PoolConfig
//! [`main_as`]: crate::fake_condor::main_as

mod commands;
mod events;
mod expr;
mod pool;
mod schedd;
mod submit_file;

use crate::site_model::{KindModel, SiteParams};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub use pool::{history, HistoryRecord, HistoryStatus};

/// The environment variable every fake command reads to find its pool.
pub const POOL_ENV: &str = "COSCHED_FAKE_POOL";

/// The name the schedd runs under (`argv[0]`); private to the fake.
const SCHEDD_NAME: &str = "cosched_fake_schedd";

/// The message of an OS error without Rust's " (os error N)" suffix, as
/// HTCondor prints it (`No such file or directory`).
fn os_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Everything a pool is configured with; serialised as `pool.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Unix time (seconds) at which simulated time is 0. `None`: the moment of
    /// [`install`]. A resumed run must pass its original epoch so that old log
    /// stamps keep their meaning.
    #[serde(default)]
    pub epoch: Option<f64>,
    /// Simulated seconds per real second.
    #[serde(default = "default_speedup")]
    pub speedup: f64,
    /// Mean work of a job, simulated seconds at speed 1.
    #[serde(default = "default_base_runtime")]
    pub base_runtime: f64,
    /// Job work is `base_runtime × U(1 − jitter, 1 + jitter)`, drawn per job.
    #[serde(default)]
    pub jitter: f64,
    /// Seed of job sizes, queue waits, failures and fault draws. With the same
    /// seed and site order, the fake draws what `crate::sim` draws.
    #[serde(default)]
    pub seed: u64,
    /// Probability that a `condor_submit` fails as if the schedd could not be
    /// reached (nothing queued, no cluster id used, exit 1).
    #[serde(default)]
    pub submit_transient_fail: f64,
    /// When set, every `condor_submit` fails with `ERROR: <this>` (cluster id
    /// used, exit 1), like a submit file HTCondor rejects.
    #[serde(default)]
    pub submit_permanent_error: Option<String>,
    /// Real seconds `condor_submit` takes after queueing the jobs and before
    /// printing its answer (the window in which a crash of the caller leaves
    /// queued jobs it never heard of).
    #[serde(default)]
    pub submit_delay: f64,
    /// Simulated seconds from submission to the grid-submit (027) event.
    #[serde(default = "default_grid_submit_delay")]
    pub grid_submit_delay: f64,
    /// Real seconds the schedd lingers with an empty queue before it exits.
    #[serde(default = "default_schedd_idle_exit")]
    pub schedd_idle_exit: f64,
    /// Grid sites, matched by the exact `grid_resource` of a grid-universe job.
    /// The order matters: site `i` draws from `crate::sim::model::site_seed(seed, i)`.
    #[serde(default)]
    pub sites: Vec<FakeSite>,
    /// Where vanilla (non-grid) jobs run; `None` rejects them.
    #[serde(default)]
    pub local: Option<FakeSite>,
    /// Each kind of job's model by name (the sites file's
    /// `[simulate.kinds]`); a job's kind is its `CoschedType`. None: every
    /// job is one kind of load 1.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kinds: BTreeMap<String, KindModel>,
}

/// One site of a pool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FakeSite {
    /// The `grid_resource` string jobs name this site by (ignored for `local`).
    #[serde(default)]
    pub grid_resource: String,
    /// Probability that an attempt, when it would start, is put on hold
    /// instead (001 then 012 "Error from slot…" Code 6 Subcode 2); a held job
    /// stays in the queue until removed.
    #[serde(default)]
    pub hold_probability: f64,
    /// The site model (slots, waits, capacity, failures, `dead`).
    pub params: SiteParams,
}

fn default_speedup() -> f64 {
    100.0
}
fn default_base_runtime() -> f64 {
    400.0
}
fn default_grid_submit_delay() -> f64 {
    5.0
}
fn default_schedd_idle_exit() -> f64 {
    20.0
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            epoch: None,
            speedup: default_speedup(),
            base_runtime: default_base_runtime(),
            jitter: 0.0,
            seed: 0,
            submit_transient_fail: 0.0,
            submit_permanent_error: None,
            submit_delay: 0.0,
            grid_submit_delay: default_grid_submit_delay(),
            schedd_idle_exit: default_schedd_idle_exit(),
            sites: Vec::new(),
            local: None,
            kinds: BTreeMap::new(),
        }
    }
}

impl FakeSite {
    /// A grid site named by `grid_resource`, running `params`.
    pub fn grid(grid_resource: impl Into<String>, params: SiteParams) -> Self {
        FakeSite { grid_resource: grid_resource.into(), hold_probability: 0.0, params }
    }
}

/// Creates (or updates) a pool in `pool_dir` whose commands are the current
/// executable; returns the `bin/` directory to put first on `PATH`.
pub fn install(pool_dir: &Path, config: &PoolConfig) -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    install_with_exe(pool_dir, config, &exe)
}

/// [`install`] with an explicit cosched binary (tests pass the one cargo built).
/// An existing queue is kept. If a schedd runs with a different configuration
/// it is stopped (the next command restarts it with the new one).
pub fn install_with_exe(pool_dir: &Path, config: &PoolConfig, exe: &Path) -> std::io::Result<PathBuf> {
    pool::install(pool_dir, config, exe)
}

/// Starts the pool's schedd unless one runs. A resumed `--simulate` run
/// whose jobs are all out runs no command that would start it (each does),
/// yet those jobs move only while it runs: after a reboot, say.
pub fn start(pool_dir: &Path) -> std::io::Result<()> {
    let pool = pool::Pool::open(pool_dir).map_err(std::io::Error::other)?;
    let _held = pool.lock()?;
    pool.ensure_schedd()
}

/// Stops the pool's schedd, if one runs, and waits (a few seconds at most)
/// until it has let go of the pool.
pub fn stop(pool_dir: &Path) -> std::io::Result<()> {
    pool::stop_schedd(pool_dir)
}

/// Runs the fake command named `argv0` (`condor_submit`, `condor_rm`,
/// `condor_q`, `condor_config_val`, or the private schedd), if it is one; `None` when `argv0` is not
/// a fake command's name.
pub fn main_as(argv0: &str) -> Option<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match argv0 {
        "condor_submit" => commands::condor_submit(&args),
        "condor_rm" => commands::condor_rm(&args),
        "condor_q" => commands::condor_q(&args),
        "condor_config_val" => commands::condor_config_val(&args),
        SCHEDD_NAME => schedd::main(&args),
        _ => return None,
    };
    Some(ExitCode::from(code))
}
