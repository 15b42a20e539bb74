//! cosched: an adaptive co-scheduler for HTCondor grids.
//!
//! `cosched submit N sites.toml job.sub` runs N jobs of one submit description
//! over several sites through HTCondor-G, finds how many concurrent jobs each
//! site takes before its turnaround degrades, and sends more work to the sites
//! that turn jobs around fastest.
//!
//! # Layout
//! - [`policy`] — the pure decision core: [`policy::Policy`] takes the time and
//!   one input, returns actions; [`policy::JobBook`] is the shared bookkeeping
//!   of where each job is; [`policy::POLICIES`] is the one registry of
//!   policies (name, description, parameters, constructor) that sites.toml,
//!   `--policy`, `bench`, the daemon and `--help` read. `bulk`, `jobrouter`,
//!   `oracle` (baselines; `oracle` also builds `late-oracle`, told each site's
//!   truth only once a job ended there: the yardstick of what a learner could
//!   reach), `thesis` (the 2013 algorithm, read literally), `adaptive` (the
//!   default; its model and phase diagram in its module doc, the reasoning in
//!   `docs/adaptive.md`): `adaptive::site` is one site's state and its
//!   `Phase` (testing, draining, rechecking, holding),
//!   with the sequential test in `site::estimator`, the window controller in
//!   `site::controller`, rechecks of a suspect floor or memory in
//!   `site::recheck`, warm-start memory in `site::memory`; the run-time
//!   distribution and the test's likelihoods in `adaptive::runtime`. `plan`
//!   turns per-site models into submissions and moves for both `oracle` and
//!   `adaptive`; `truth` is what the oracle may know; `jobtype` is each
//!   job's kind (`JobTypes` in the `RunSpec`: the simulator's `types`, or
//!   a real run's submit descriptions, `submit --jobs`) and `KindNumbers`
//!   (each kind's jobs numbered on their own, for the policies that keep a
//!   book per kind: `oracle` and `adaptive::kinds`); `memory` is what runs
//!   learned, by site and kind key (a submit description's fingerprint or
//!   given name, `submit_desc::kind_key`), and what of it is the site's and
//!   carries over to a kind new there.
//! - [`engine`] — runs a policy against one [`engine::SiteBackend`] per site:
//!   a coordinator task owns the policy and the clock, one task per site does
//!   that site's I/O (for HTCondor it merges the submissions that queued up
//!   behind a slow `condor_submit` into one batch). Same code for HTCondor,
//!   simulation and replay.
//! - [`stats`] — the statistics every command shows: one quantile definition
//!   (nearest rank), one per-job fold of events (`JobTimes`), one summary
//!   type; `log stats`, the report, the simulator's metrics and the bench
//!   use it.
//! - [`userlog`] — HTCondor user (job event) logs: the events and their code
//!   table (`mod`), incremental parser (`text`, `xml`), follower of growing
//!   logs (`follow`), reader of finished logs in bounded memory (`reader`),
//!   the dump format (`json`), each event's effect on a job's times and
//!   `log stats` (`stats`), `cosched log dump|stats|follow` (`cmd`).
//! - [`site_model`] — the site model's parameters, a file format that
//!   sites.toml's `[site.simulate]` and the scenario files share.
//! - [`sim`] — the site model of `shared/scenarios` (`model`), a backend that
//!   runs it under tokio's paused clock (`backend`), one site several
//!   runs share in scaled real time (`shared`, the daemon's grid), metrics and conservation
//!   checks made as each attempt ends (`metrics`, per kind of job where a
//!   scenario has several; `waste`, the wasted area's ordered sum, put aside
//!   on disk past a million terms);
//!   [`bench`](mod@bench) compares policies on it (`--blind-types`: every job
//!   one kind), and two files of its `--json` runs per grid (`--compare`).
//! - [`config`] — `sites.toml`; [`submit_desc`] — the user's `job.sub` (or
//!   one per kind of job, `submit_desc::JobKinds`), its validation, the
//!   per-batch submit files cosched writes (one kind per batch), and each
//!   description's kind key (`submit_desc::kind`: what its memory is kept
//!   under).
//! - [`condor`] — the real HTCondor edge: `condor_submit`, `condor_rm`,
//!   `condor_q` processes, `CondorSite`, the HTCondor site backend that
//!   follows each site's user log, and `condor::preflight`, HTCondor's own
//!   check (`condor_submit -dry-run`) of a run's batch files before any is
//!   submitted.
//! - [`state`] — the SQLite state database (runs, submissions, log offsets,
//!   daemon runs) and `state::DbJournal`, the journal a
//!   site task records each batch's intent and outcome in; `state::memory`,
//!   the memory database (what runs learned per site and kind of job: the
//!   user's, or the daemon's) that every run reads and adds to.
//! - [`run`] — `cosched submit` and `check`: `run::drive` is **the one way
//!   to drive a run**, for `submit` and the daemon alike (policy, checkpoint
//!   restore, history, engine, checkpoints, leftovers, record, report; the
//!   crash-safety argument of `--resume` is its module doc);
//!   `run::plan` validates and opens a run, `run::simulate` sets up the fake
//!   pool of `--simulate`, `run::foreground` is the terminal's watcher and
//!   signals, `run::history` rebuilds a stopped run's past (from
//!   `run::checkpoint`'s last checkpoint when there is one),
//!   `run::progress` the progress and summary, `run::decisions` the policy's
//!   decisions kept for the report.
//! - [`fake_condor`] — `condor_submit`/`condor_rm`/`condor_q` look-alikes that
//!   run the site model in scaled real time (the `cosched` binary answers to
//!   those names, busybox-style); used by `--simulate`, the demo and the
//!   end-to-end tests.
//! - [`report`] — HTML/SVG/CSV/JSON reports from user logs (job records
//!   spilled to a scratch file as logs are read, `report::spill`, so a
//!   10^6-job report stays under 50 MiB); [`replay`] —
//!   recorded logs through a policy in virtual time (trace-driven).
//! - [`daemon`] — `cosched daemon` (socket server with peer credentials,
//!   HTCaaS fair share, sd_notify) and its clients; its runs go through
//!   `run::drive`.
//! - [`memory_cmd`] — `cosched memory`: what runs remembered per site and
//!   kind, shown and forgotten, in the memory database `submit` would use.
//! - [`sync`] — locks that stay usable after a panic elsewhere (why, there).
//! - [`cli`] — the command tree and dispatch; `main.rs` only calls it.
//!
//! # Where things go
//! - **A new policy**: its file `src/policy/NAME.rs` (module doc: estimates,
//!   rule, phases; `impl Policy`; a `Params` struct if it has parameters)
//!   and one entry in [`policy::POLICIES`] (`pub mod NAME;` beside it). The
//!   entry's place is its place in `cosched bench`'s output. Nothing else:
//!   sites.toml, `--policy`, `bench`, the daemon and `--help` read the table.
//!   `Policy::checkpoint`/`restore` are optional (without them `--resume`
//!   replays the whole run), as is `Policy::learned` (memory for the next).
//! - **A new HTCondor user-log event**: to read and dump it,
//!   `userlog/mod.rs` (an `EventBody` variant, its code in the event table),
//!   `userlog/text.rs` and `userlog/xml.rs` (its arm in each format's
//!   parser), `userlog/json.rs` (its dump; an exhaustive match, so the
//!   compiler points there), and a test in `tests/it/userlog.rs`. If it
//!   changes a job's times or end: `userlog/stats.rs` `effect` (the one
//!   fold, [`stats::JobTimes`], reads it from there for `log stats` and the
//!   report alike). If it carries a fact the report shows (a reason, a
//!   resource): `report::model::from_userlog`, the report's one adapter
//!   from the parser. If a policy must hear of it: a `policy::SiteEvent`
//!   variant (`policy/mod.rs`), then an arm in each exhaustive match on it,
//!   which the compiler lists: `JobBook::apply` (`policy/book.rs`),
//!   `KindNumbers::localize` (`policy/jobtype.rs`), `run/progress.rs`,
//!   `replay.rs`; `condor::site_event` (`condor/site.rs`), the one
//!   translation of a log event that live runs and `--resume` share; for the
//!   simulator, `sim/backend.rs`; and, for the end-to-end tests, the fake
//!   schedd's writer (`fake_condor/events.rs`, `fake_condor/schedd.rs`).
//! - **A new report figure**: its number computed from [`stats`] in
//!   `report/metrics.rs` (`summarize`, in passes over the jobs, which are
//!   on disk at scale; `report.json` serializes what it returns), its chart
//!   in `report/svg.rs` if no chart there draws it, its place and definition
//!   in `report/html.rs` (`charts`, `DEFINITIONS`), its column in `report/html.rs`'s `sites_csv` (a
//!   per-site figure) or `write_jobs_csv` (a per-job one), and its value on
//!   a fixture log, worked out by hand, in `tests/it/report.rs`. A per-job
//!   fact the fold does not keep yet is a field of
//!   `report::model::JobRecord`, read from the events in `from_userlog`.
//!
//! # Layers
//! Imports point down this list, never up:
//! 1. `main`, [`cli`] — each command owns its argument type (`run::SubmitArgs`,
//!    `bench::BenchArgs`, `daemon::DaemonArgs`, …); `cli` only assembles them.
//! 2. commands: [`daemon`] (which drives runs through `run::drive`), [`run`],
//!    [`bench`](mod@bench), [`replay`], `userlog::cmd`, [`report`].
//! 3. edges: [`condor`], [`fake_condor`], [`state`], [`config`],
//!    [`submit_desc`], [`sim`], [`site_model`] (which [`config`] and [`sim`]
//!    share, so the HTCondor edge does not depend on the simulator).
//! 4. [`engine`] — the coordinator between a policy and its site backends.
//! 5. [`policy`], [`userlog`] (the parser), [`stats`], [`sync`] — pure or
//!    self-contained; they import nothing above.
//!
//! # Invariants
//! - `policy` does no I/O, reads no clock, no environment and does not use
//!   tokio; time comes in as an argument. Only `engine` reads the run clock.
//!   (Checked on the source by an integration test, `policy.rs`.)
//! - Processes are spawned with argument vectors, never through a shell, and
//!   every string that goes into a submit file is validated first; a run
//!   submits nothing until `condor_submit -dry-run` has read one batch of
//!   each kind for each shape of site (a run is not left half-submitted by
//!   a refusal HTCondor makes of every batch alike).
//! - Parsers never panic and never abort a tail: bad bytes become diagnostics.
//! - The daemon runs only the HTCondor commands of its own configuration
//!   (`condor_bin_dir`): a client's sites file chooses no program the
//!   service account runs (`daemon::dbrun::condor_settings`), and a socket
//!   path is replaced only where a stale socket lies. Nor does a client
//!   choose a file that account reads for it: a submit naming an
//!   executable or input its caller could not read is refused
//!   (`daemon::access`; checked at the submit, by mode bits).
//! - A job is out at one site at most; no job is lost or run twice by cosched's
//!   own doing (also across crashes: intent is recorded before `condor_submit`,
//!   and every HTCondor command dies with cosched, so none commits after a
//!   resumed run looked for its batch). A clean stop (Ctrl-C, SIGTERM) waits
//!   for the command in flight: each runs in a process group of its own, so
//!   a terminal's SIGINT reaches cosched alone.
//! - A withdrawal (an idle job taken back to go elsewhere) happens only if
//!   HTCondor says the job has not started (`condor::CondorSite` asks
//!   `condor_q`, for Condor-C the remote schedd too, and removes with
//!   "idle or held" in the constraint), or if it is on hold (it runs
//!   nothing, and its hold may have been read already, so nothing else
//!   would take it out of the queue). A running job is removed only by
//!   the policy's explicit `Action::Remove`, each with its reason; a
//!   Condor-C job whose remote copy finished is never removed.
//! - A removal is done when the log says so (009, or 005 for a job that
//!   ended first), not when `condor_rm` answers: one still queued and not
//!   being removed after 15 s (a Condor-C copy the gridmanager held after
//!   its removal) is asked again (`CondorSite::audit`), so a run never waits
//!   on a job nothing will take out of the queue.
//! - The time the engine hands a policy never goes back (every simulated
//!   run reports it as an error if it does), and a policy is woken by
//!   events and by deadlines that stand for something due, never polled
//!   (`SimResult::wakeups`; the model tests bound it per site event).
//! - Simulated runs are deterministic by seed (BTreeMaps, `biased` selects).
//! - A checkpoint is a shortcut, never the record: the state database and the
//!   user logs stay the truth, a policy restored from its checkpoint decides
//!   what the original would have, and a checkpoint that does not fit is set
//!   aside for a full replay. Its format number changes with any policy
//!   state's layout (postcard is not self-describing).
//! - What a run remembers for the next is what it learned, or what it was
//!   given where it learned nothing new: memory passed through any number
//!   of runs does not drift (`Distribution::to_remember`). Memory is a
//!   hypothesis, not a verdict: where it calls a level it held healthy
//!   degraded, the run's own runs below decide between a capacity that
//!   dropped and jobs that changed (`Site::check_memory`).
//!
//! What cosched deliberately does not do: it never talks to a schedd except
//! through the three documented commands (no Python bindings, no
//! `condor_history`), never edits a user log, and never removes a job it did
//! not submit: every local `condor_rm` names our own clusters and procs,
//! never an attribute that Condor-C's forwarded copies carry too; at a
//! Condor-C site's remote schedd it removes only the forwarded copies of our
//! own jobs (by their remote ids, or by the run's id together with
//! `SubmitterGlobalJobId` once the run has settled), never one that finished.
//!
//! Tests: `tests/it` drives the fake HTCondor; `tests/real_pool` drives a real
//! HTCondor 25 pool (`../shared/htcondor`, root) and counts executions.

pub mod bench;
pub mod cli;
pub mod condor;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod fake_condor;
pub mod memory_cmd;
pub mod policy;
pub mod replay;
pub mod report;
pub mod run;
pub mod sim;
pub mod site_model;
pub mod state;
pub mod stats;
pub mod submit_desc;
pub mod sync;
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
