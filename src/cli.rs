//! Command-line definitions and dispatch. Validation of what the user typed
//! happens in clap; each command's module turns the arguments into settings and
//! does the work. Commands return [`CmdResult`]; this module prints the error
//! and turns the result into the process exit code.

use crate::bench::BenchArgs;
use crate::daemon::client::{ClientArgs, RunRefArgs, StatusArgs};
use crate::daemon::DaemonArgs;
use crate::memory_cmd::MemoryArgs;
use crate::replay::ReplayArgs;
use crate::run::{CheckArgs, SubmitArgs};
use crate::userlog::cmd::LogCommand;
use crate::{CmdResult, Exit};
use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;

const EXIT_CODES: &str = "\
Exit codes:
  0  everything done
  1  ran, but some jobs failed for good (or a log had malformed blocks)
  2  usage, configuration or input error (nothing was submitted)
  3  interrupted; the run can be resumed with --resume";

#[derive(Parser, Debug)]
#[command(
    name = "cosched",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("COSCHED_COMMIT"), ")"),
    about = "Adaptive co-scheduler for HTCondor grids",
    long_about = "cosched runs N jobs of one HTCondor submit description (or of several, one per kind of \
job) over several grid sites, \
finds how many concurrent jobs each site takes before its turnaround degrades, \
and sends more work to the sites that turn jobs around fastest.",
    after_help = EXIT_CODES,
)]
pub struct Cli {
    /// Log verbosity for diagnostics on stderr (error, warn, info, debug, trace).
    #[arg(long, global = true, default_value = "warn", env = "COSCHED_LOG", value_parser = log_level)]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run N jobs of a submit description (or several kinds of job, with
    /// --jobs) across the sites of sites.toml.
    #[command(after_help = with_policies("Examples:
  cosched submit 375 sites.example.toml condor/io_job.sub --simulate
  cosched submit 10000 sites.toml job.sub --state-dir run1
  cosched submit --resume run1
  cosched submit sites.toml --jobs io=400:io.sub --jobs cpu=1000:cpu.sub
    (one run of two kinds: 1400 jobs, $(CoschedJob) 0..1399 over both,
    each job's kind in $(CoschedType); a kind's name defaults to its
    file's stem: --jobs 400:io.sub is the kind `io`)"))]
    Submit(SubmitArgs),
    /// Validate sites.toml and submit descriptions without submitting anything.
    #[command(after_help = "Examples:\n  cosched check sites.toml job.sub\n  \
                            cosched check sites.toml --jobs io=400:io.sub --jobs cpu=1000:cpu.sub")]
    Check(CheckArgs),
    /// Read HTCondor user (job event) logs.
    #[command(subcommand)]
    Log(LogCommand),
    /// Compare policies on simulated scenarios.
    #[command(after_help = with_policies("Examples:
  cosched bench ../shared/scenarios/scenarios.toml
  cosched bench scenarios.toml --scenario S1 --policy adaptive --policy thesis --seeds 1-5
  cosched bench scenarios.toml --scenario S3 --policy adaptive --seeds 1 --trace
  cosched bench typed.toml --seeds 1-3 --json --policy adaptive > typed.jsonl
  cosched bench typed.toml --seeds 1-3 --json --policy adaptive --blind-types > blind.jsonl
  cosched bench --compare typed.jsonl blind.jsonl
    (per grid, blind's median makespan over the seeds ÷ typed's)"))]
    Bench(BenchArgs),
    /// Show what runs remembered per site and kind of job, or forget it.
    #[command(after_help = "Examples:
  cosched memory
    (the memory `cosched submit` uses: each site and kind, its capacity,
    ceiling, mean run time, when it was learned and by which run)
  cosched memory --json --memory shared/memory.db
  cosched memory --state-dir /var/lib/cosched
    (the daemon's, or that of `cosched submit --simulate --state-dir DIR`)
  cosched memory forget ce1
  cosched memory forget ce1 --kind name:my-analysis
  cosched memory forget --all")]
    Memory(MemoryArgs),
    /// Feed recorded user logs through a policy and print its decisions.
    #[command(after_help = with_policies("Example:\n  cosched replay run1/logs/*.log --sites sites.toml --policy thesis"))]
    Replay(ReplayArgs),
    /// Run as a service that accepts runs over a Unix socket.
    #[command(after_help = "Example:\n  cosched daemon --config /etc/cosched/daemon.toml")]
    Daemon(DaemonArgs),
    /// List the daemon's runs (yours, or all for an admin).
    #[command(after_help = "Example:\n  cosched runs --json")]
    Runs(ClientArgs),
    /// Show a daemon run's progress per site.
    #[command(after_help = "Example:\n  cosched status 7 --json")]
    Status(StatusArgs),
    /// Cancel a daemon run and remove its jobs.
    #[command(after_help = "Example:\n  cosched cancel 7")]
    Cancel(RunRefArgs),
    /// Follow a daemon run's progress live.
    #[command(after_help = "Example:\n  cosched watch 7")]
    Watch(RunRefArgs),
    /// Print shell completions.
    #[command(after_help = "Example:\n  cosched completions bash > /etc/bash_completion.d/cosched")]
    Completions(CompletionsArgs),
    /// Print the man page (roff).
    #[command(after_help = "Example:\n  cosched man > cosched.1 && man ./cosched.1")]
    Man,
}

/// `examples`, then the policies `--policy` takes, one line each, from the
/// registry (those that need the simulator's truth run only in `cosched bench`).
fn with_policies(examples: &str) -> String {
    let width = crate::policy::POLICIES.iter().map(|p| p.name.len()).max().unwrap_or(0);
    let mut out = format!("{examples}\n\nPolicies (--policy, or [policy] name in sites.toml):");
    for p in crate::policy::POLICIES {
        out.push_str(&format!("\n  {:width$}  {}", p.name, p.about));
    }
    out
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    pub shell: clap_complete::Shell,
}

/// Parses the command line, runs the command, returns the exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    init_tracing(&cli.log_level);
    match dispatch(cli.command) {
        Ok(exit) => ExitCode::from(exit as u8),
        Err(failure) => {
            eprintln!("cosched: {failure}");
            ExitCode::from(failure.exit as u8)
        }
    }
}

const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// A `--log-level`: a level, or filter directives `target=level` separated
/// by commas (tracing's `EnvFilter`). A bare word that is no level would be
/// read as a target and silence every line, so it is refused.
fn log_level(value: &str) -> Result<String, String> {
    let known = |level: &str| LOG_LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level.trim()));
    for directive in value.split(',') {
        let level = directive.rsplit_once('=').map_or(directive, |(_, level)| level);
        if !known(level) {
            return Err(format!(
                "`{}` is not a log level; use one of {}",
                level.trim(),
                LOG_LEVELS.join(", ")
            ));
        }
    }
    tracing_subscriber::EnvFilter::try_new(value).map(|_| value.to_string()).map_err(|e| e.to_string())
}

fn init_tracing(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false);
    // Under systemd stderr goes to journald, which stamps lines itself and
    // shows escape codes raw: no timestamps, no colours there. Escape codes
    // are for a terminal only, not for a file or a pipe.
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        let _ = builder.without_time().with_ansi(false).try_init();
    } else {
        use std::io::IsTerminal;
        let _ = builder.with_ansi(std::io::stderr().is_terminal()).try_init();
    }
}

fn dispatch(command: Command) -> CmdResult {
    match command {
        Command::Submit(args) if args.daemon => crate::daemon::client::submit(&args),
        Command::Submit(args) => crate::run::command(args),
        Command::Check(args) => crate::run::check_command(args),
        Command::Log(LogCommand::Dump { file }) => crate::userlog::cmd::dump(&file),
        Command::Log(LogCommand::Stats { files, json }) => crate::userlog::cmd::stats(&files, json),
        Command::Log(LogCommand::Follow { file }) => crate::userlog::cmd::follow(&file),
        Command::Log(LogCommand::Report { logs, out }) => crate::report::command(&logs, &out),
        Command::Bench(args) => crate::bench::command(args),
        Command::Replay(args) => crate::replay::command(args),
        Command::Memory(args) => crate::memory_cmd::command(args),
        Command::Daemon(args) => crate::daemon::command(args),
        Command::Runs(args) => crate::daemon::client::runs(args),
        Command::Status(args) => crate::daemon::client::status(args),
        Command::Cancel(args) => crate::daemon::client::cancel(args),
        Command::Watch(args) => crate::daemon::client::watch(args),
        Command::Completions(args) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(args.shell, &mut cmd, "cosched", &mut std::io::stdout());
            Ok(Exit::Ok)
        }
        Command::Man => {
            let cmd = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(cmd)
                .render(&mut std::io::stdout())
                .map_err(|e| crate::Failure::failed(format!("writing the man page: {e}")))?;
            Ok(Exit::Ok)
        }
    }
}
