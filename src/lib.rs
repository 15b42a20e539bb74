//! cosched: an adaptive co-scheduler for HTCondor grids.
//!
//! `cosched submit N sites.toml job.sub` runs N jobs of one submit description
//! over several sites through HTCondor-G, finds how many concurrent jobs each
//! site takes before its turnaround degrades, and sends more work to the sites
//! that turn jobs around fastest.
//!
//! # Layout
//! - [`policy`] — the pure decision core: [`policy::Policy`] takes the time and
//!   one input, returns actions. `bulk`, `jobrouter`, `oracle` (baselines),
//!   `thesis` (the 2013 algorithm), `adaptive` (the default).
//! - [`engine`] — runs a policy against one [`engine::SiteBackend`] per site:
//!   a coordinator task owns the policy and the clock, one task per site does
//!   that site's I/O. Same code for HTCondor, simulation and replay.
//! - [`userlog`] — HTCondor user (job event) log: incremental parser (text and
//!   XML), follower of growing logs, `cosched log …` commands.
//! - [`sim`] — the simulated grid (site model of `shared/scenarios`), a backend
//!   that runs in tokio's paused clock; [`bench`] compares policies on it.
//! - [`config`] — `sites.toml`; [`submit_desc`] — the user's `job.sub`, its
//!   validation and the per-batch submit files cosched writes.
//! - [`condor`] — the real HTCondor edge: `condor_submit`, `condor_rm`,
//!   `condor_q` processes and the HTCondor site backend.
//! - [`state`] — the SQLite state database (runs, submissions, offsets,
//!   learned capacities); [`run`] — `cosched submit` end to end.
//! - [`fake_condor`] — `condor_submit`/`condor_rm`/`condor_q` look-alikes that
//!   run the site model in scaled real time (the `cosched` binary answers to
//!   those names, busybox-style); used by `--simulate`, the demo and e2e tests.
//! - [`report`] — HTML/SVG reports; [`replay`] — recorded logs through a policy.
//! - [`daemon`] — `cosched daemon` and its Unix-socket clients.
//! - [`cli`] — argument definitions and dispatch; `main.rs` only calls it.
//!
//! # Invariants
//! - `policy` does no I/O, reads no clock and does not use tokio; time comes in
//!   as an argument. Only `engine` reads the run clock.
//! - Processes are spawned with argument vectors, never through a shell, and
//!   every string that goes into a submit file is validated first.
//! - Parsers never panic and never abort a tail: bad bytes become diagnostics.
//! - A job is out at one site at most; no job is lost or run twice by cosched's
//!   own doing (also across crashes: intent is recorded before `condor_submit`).
//! - Simulated runs are deterministic by seed (BTreeMaps, `biased` selects).

pub mod bench;
pub mod cli;
pub mod condor;
pub mod config;
pub mod daemon;
pub mod engine;
/// The fake HTCondor commands; the source lives under `condor/fake/` beside
/// the other HTCondor material. See [`fake_condor`]'s docs.
#[path = "../condor/fake/mod.rs"]
pub mod fake_condor;
pub mod policy;
pub mod replay;
pub mod report;
pub mod run;
pub mod sim;
pub mod state;
pub mod submit_desc;
pub mod userlog;

use std::fmt;

/// cosched's exit codes (also listed in `cosched --help`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Everything asked for was done.
    Ok = 0,
    /// It ran, but some jobs failed for good (or a log had malformed blocks).
    Partial = 1,
    /// Usage, configuration or input error; nothing was submitted.
    Usage = 2,
    /// Interrupted (SIGINT/SIGTERM); state is kept and the run can be resumed.
    Interrupted = 3,
}

/// An error for the person at the terminal: what failed, where, what to do.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    /// A usage/config/input error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Failure { exit: Exit::Usage, message: message.into() }
    }
    /// A failure while running (exit 1).
    pub fn failed(message: impl Into<String>) -> Self {
        Failure { exit: Exit::Partial, message: message.into() }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// What every command returns.
pub type CmdResult = Result<Exit, Failure>;
