//! `cosched daemon`: cosched as a systemd service that accepts runs from
//! several people over a Unix socket and shares each site's capacity between
//! them fairly.
//!
//! # Shape
//! Like mini-redis: [`command`] (the CLI) only reads the config, binds the
//! socket, wires signals and calls [`run`]; tests call [`run`] (or
//! [`server::serve`] with their own [`server::Machinery`]) with a listener and
//! a shutdown token of their own.
//!
//! - [`server`] — the accept loop, one task per connection and per run, the
//!   fair-share step, reload and watchdog.
//! - [`fairshare`] — HTCaaS's dynamic fair share, pure.
//! - [`share`] — the wrapper policy that applies a run's fair-share cap per
//!   site and drains a cancelled run.
//! - [`protocol`] — the JSON types below; [`client`] — `cosched runs`,
//!   `status`, `cancel`, `watch` and `submit --daemon`.
//! - [`notify`] — sd_notify by hand; [`config`] — the daemon's config file.
//! - [`dbrun`] — runs through the state database and `cosched submit`'s run
//!   machinery (crash-safe; HTCondor or the fake HTCondor);
//!   [`memsim`] — in-process simulated runs (`simulate = true`; not
//!   crash-safe, for the soak benchmark and demos) on one grid shared by
//!   every run, made of the daemon's sites file.
//!
//! # systemd
//! `Type=notify`: `READY=1` once the socket listens and recorded runs are
//! restarted; `STATUS=` carries a one-line summary; `WATCHDOG=1` is sent from
//! the coordinator loop when the unit sets `WatchdogSec=`. SIGTERM: stop
//! accepting and submitting, let every run record how far it got, take a
//! checkpoint (a run whose policy keeps them, with `checkpoint_every` not 0)
//! and write its report, exit (jobs keep running on the grid; a restart
//! resumes them from those checkpoints, replaying only what happened since,
//! each run shown `resuming` until its past is replayed). An HTCondor command in flight is let
//! finish within [`server::STOP_GRACE`]; the units' `KillMode=mixed` keeps
//! systemd's SIGTERM to the daemon alone, where the default would send it
//! to every `condor_submit` of the unit's cgroup at once. A second SIGTERM
//! or SIGINT during the stop exits at once (exit 3, as `cosched submit`
//! on a second Ctrl-C): the runs resume from their checkpoints at the next
//! start, and a command in flight dies with the daemon. SIGHUP: read the
//! config and its sites files again (capacities, weights, admins take
//! effect at once; the socket path, state directory, `condor_bin_dir` and
//! `min_checkpoint_every` only at the next start); a config that does not
//! parse is reported and the running one kept. When `JOURNAL_STREAM` is set
//! (stderr goes to journald) log lines carry no timestamps or colours.
//!
//! # Who may do what
//! The socket is created with `socket_mode` (default 0660) and `socket_group`,
//! so only that group's members (and the daemon's account) can connect. The
//! caller's uid comes from the kernel (`SO_PEERCRED`), never from the request.
//! A user sees, watches and cancels only their own runs; root, the daemon's own
//! account and members of `admin_groups`/`admin_gids` see all. Another user's
//! run answers exactly like a run that does not exist. `trust_client_uid =
//! true` makes the daemon honour an `as_uid` field instead: it exists only so
//! that tests, which cannot switch uid, can act as several users; never set
//! it on a shared host.
//!
//! # Invariants
//! - The daemon runs only the HTCondor tools of its own configuration
//!   (`condor_bin_dir`, else its own `PATH`). A run's sites file comes from
//!   the client, and its `[condor] bin_dir` would choose the programs the
//!   daemon's account runs (which owns every user's jobs and the state
//!   database): a submit whose `bin_dir` is not the daemon's is refused,
//!   saying so, rather than ignored, since its author meant other tools;
//!   and a recorded run is driven with the daemon's tools whatever its
//!   record says ([`dbrun::condor_settings`]). The other `[condor]` settings
//!   choose no program and no file and act only on the caller's own run
//!   (how long one HTCondor command may take, how often a removal is
//!   retried, how long a schedd may stay silent, how often a user log is
//!   read), so a run keeps its own; only values that would make the
//!   shared daemon spin (a user log read more than ten times a second, a
//!   removal retried more than 20 times at once) are refused here; a
//!   timeout past a month is refused for every run as the sites file is
//!   read (`config::MAX_CONDOR_SECONDS`).
//! - A run is checkpointed at most every `min_checkpoint_every` (default
//!   10 s): each checkpoint is a file written and synced in the shared
//!   state directory, and `[run] checkpoint_every` is the client's. A
//!   smaller one is raised, not refused (why: [`dbrun::checkpoint_every`]),
//!   and the submit's answer says so.
//! - The daemon deletes nothing at its socket path but a socket nobody
//!   answers on ([`bind`]): a config that names a file or a directory
//!   there is an error, not a loss.
//! - A submit is accepted only if its caller could read, by the mode bits,
//!   each file its jobs take from the submit host ([`access`]): HTCondor
//!   reads them as the daemon's account, which may read what the caller
//!   may not. Checked at the submit; what is not covered is listed there.
//! - Stopping never waits on a client: a connection that does not read
//!   what it is sent is dropped at shutdown, and only runs get the stop's
//!   grace.
//!
//! # Fair share
//! Every [`server::SHARE_EVERY`] the daemon gathers, per site name, each
//! active run's demand (jobs its policy wants out there: out + held back),
//! sums it per user, splits the site's capacity between users with
//! [`fairshare::allot`] (weights from `[weights]`), then each user's part
//! between that user's runs (equal weights), and hands each run its cap. A
//! site's capacity is `[capacity]` of the daemon config, else `max_jobs` (else
//! `slots`) of the site in the daemon's `sites` files; a site with no known
//! capacity is not capped. The cap is applied by the [`share::FairShare`]
//! wrapper around the run's own policy, which holds back Submit actions
//! beyond it; nothing running is preempted.
//!
//! # Protocol (JSON lines)
//! A client writes one JSON object per line and reads one JSON object per
//! line back (`watch` answers with a line per change until the run ends).
//! Several requests may share one connection. Requests carry `op`:
//!
//! ```text
//! {"op":"ping"}                                → {"ok":true,"uid":1000,"admin":false}
//! {"op":"submit","n_jobs":100,"sites_path":"/home/a/sites.toml","sites_toml":"…",
//!  "job_path":"/home/a/job.sub","job_sub":"…","policy":"adaptive"}
//!                                              → {"ok":true,"run":7}
//!                 (or {"ok":true,"run":7,"warnings":["…"]}: the inputs' warnings, what the daemon changed)
//! {"op":"submit","n_jobs":1400,"sites_path":"…","sites_toml":"…",
//!  "kinds":[{"name":"io","count":400,"job_path":"/home/a/io.sub","job_sub":"…"},
//!           {"name":"cpu","count":1000,"job_path":"/home/a/cpu.sub","job_sub":"…"}]}
//!                                              → {"ok":true,"run":8}   (several kinds: --jobs)
//! {"op":"runs"}                                → {"ok":true,"runs":[RUN…]}   (sites empty)
//! {"op":"status"}  {"op":"status","run":7}     → {"ok":true,"runs":[RUN…]}   (unfinished runs / that run)
//! {"op":"cancel","run":7}                      → {"ok":true,"run":7}
//! {"op":"watch","run":7}                       → {"ok":true,"runs":[RUN]} per change, last one finished
//! any failure                                  → {"ok":false,"error":"what went wrong"}
//! ```
//!
//! Paths in a submit are absolute: the files travel by content, and relative
//! names inside them resolve against their own directories
//! ([`protocol::SubmitRequest::sites_path`]).
//!
//! `RUN` is `{"id","owner","owner_name"?,"state","policy","n_jobs","done",
//! "given_up","out","time","cut_short","cut_short_seconds","message"?,
//! "sites":[SITE…]}` with `state` one of
//! `queued`, `resuming`, `running`, `cancelling`, `done`, `cancelled`, `failed`, and
//! `SITE` is `{"name","capacity","class","window","fair_cap","held_back",
//! "queued","running","held","done","agtime","kinds"?}` ([`protocol::SiteStatus`]),
//! `kinds` in a run of several kinds: `[{"name","done","running",
//! "mean_run_time","window","capacity"}…]`, each kind there.
//! Any request may carry `"as_uid": N`, refused unless `trust_client_uid`,
//! and `"version"`, the client's (`cosched --version`'s); every response
//! carries the daemon's `"version"`. A client adds to an error that the
//! daemon is of another version (after an upgrade, not restarted yet), and
//! the daemon's answer to a request it cannot read names the field and
//! both versions ([`protocol::version_hint`],
//! [`protocol::unreadable_request`]).

pub mod access;
pub mod client;
pub mod config;
pub mod dbrun;
pub mod fairshare;
pub mod memsim;
pub mod notify;
pub mod protocol;
pub mod server;
pub mod share;

use crate::{CmdResult, Exit, Failure};
use clap::Args;
use config::DaemonConfig;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct DaemonArgs {
    #[arg(long)]
    pub config: PathBuf,
}

/// Serves `listener` with `config` until `shutdown` is cancelled. The run
/// machinery follows the config: the state database in `state_dir`, or with
/// `simulate = true` in-process simulation.
pub async fn run(
    listener: UnixListener,
    config: DaemonConfig,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let (_reload_tx, reload) = mpsc::unbounded_channel();
    let control =
        server::Control { shutdown, reload, notifier: notify::Notifier::from_values(None, None, None, 0) };
    serve_with(listener, config, control).await
}

async fn serve_with(
    listener: UnixListener,
    config: DaemonConfig,
    control: server::Control,
) -> Result<(), String> {
    let machinery = machinery_for(&config)?;
    server::serve(listener, config, machinery, control).await
}

fn machinery_for(config: &DaemonConfig) -> Result<Arc<dyn server::Machinery>, String> {
    if config.simulate {
        return Ok(Arc::new(memsim::MemorySim::new(config)?));
    }
    Ok(Arc::new(dbrun::DbMachinery::open(
        &config.state_dir,
        config.condor_bin_dir.clone(),
        config.min_checkpoint_every,
    )?))
}

/// Binds the socket: removes a stale one (nobody answering on it), refuses
/// to start beside a live daemon or where something other than a socket
/// is, then sets the mode and group.
pub fn bind(config: &DaemonConfig) -> Result<UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    let path = &config.socket;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: creating the socket directory: {e}", dir.display()))?;
    }
    // symlink_metadata: a symbolic link there is not ours to follow either.
    if let Ok(found) = std::fs::symlink_metadata(path) {
        if !found.file_type().is_socket() {
            return Err(format!(
                "{}: `socket` of {} names something that is not a socket (a {}); not touching it: \
                 point `socket` at a path of its own (e.g. /run/cosched/cosched.sock)",
                path.display(),
                config.path.display(),
                kind_of(&found.file_type())
            ));
        }
        if live_daemon_at(path)? {
            return Err(format!("{}: another daemon is listening there; stop it first", path.display()));
        }
        std::fs::remove_file(path)
            .map_err(|e| format!("{}: removing a stale socket: {e}", path.display()))?;
    }
    let listener = UnixListener::bind(path).map_err(|e| format!("{}: cannot listen: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(config.socket_mode))
        .map_err(|e| format!("{}: setting mode {:o}: {e}", path.display(), config.socket_mode))?;
    if let Some(gid) = config.socket_group {
        std::os::unix::fs::chown(path, None, Some(gid))
            .map_err(|e| format!("{}: giving the socket to group {gid}: {e}", path.display()))?;
    }
    Ok(listener)
}

/// What a file that is not a socket is, for a message.
fn kind_of(file_type: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_symlink() {
        "symbolic link"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_file() {
        "regular file"
    } else {
        "device"
    }
}

/// Whether a daemon answers on `path`. A connection alone does not say so:
/// after a daemon is killed, a child it was forking keeps the listening
/// socket open until its `exec`, and accepts connections that nobody
/// answers. So a ping must be answered; a socket that accepts but stays mute
/// is looked at again until it goes away (then it was stale), for a few
/// seconds at most.
#[allow(clippy::disallowed_methods)] // a bounded wait at start-up needs the real clock
fn live_daemon_at(path: &std::path::Path) -> Result<bool, String> {
    use std::io::{BufRead, BufReader, Write};
    use std::time::{Duration, Instant};
    const PATIENCE: Duration = Duration::from_secs(5);
    let start = Instant::now();
    loop {
        let Ok(mut stream) = std::os::unix::net::UnixStream::connect(path) else { return Ok(false) };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut line = String::new();
        if writeln!(stream, "{{\"op\":\"ping\"}}").is_ok() {
            let _ = BufReader::new(&stream).read_line(&mut line);
        }
        if !line.trim().is_empty() {
            return Ok(true);
        }
        if start.elapsed() >= PATIENCE {
            return Err(format!(
                "{}: something accepts connections there but does not answer a ping after {PATIENCE:?}; \
                 if no cosched daemon runs, remove the socket and start again",
                path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `cosched daemon --config PATH`.
pub fn command(args: DaemonArgs) -> CmdResult {
    let config = config::load(&args.config).map_err(Failure::usage)?;
    refuse_root(config.simulate)?;
    // Its sites files too, before the socket exists: one that cannot be
    // read is an error of the config (exit 2), as the serve would find.
    server::load_capacity(&config).map_err(Failure::usage)?;
    // Before the socket exists: a database from a newer cosched, or one that
    // another process holds, stops the start with a clear message (exit 2).
    let machinery = machinery_for(&config).map_err(Failure::usage)?;
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| Failure::failed(format!("starting tokio: {e}")))?;
    runtime.block_on(async move {
        let listener = bind(&config).map_err(Failure::usage)?;
        let socket = config.socket.clone();
        tracing::info!("cosched daemon {} listening on {}", env!("CARGO_PKG_VERSION"), socket.display());
        let shutdown = CancellationToken::new();
        let (reload_tx, reload) = mpsc::unbounded_channel();
        let signals = tokio::spawn(watch_signals(shutdown.clone(), reload_tx));
        let control =
            server::Control { shutdown: shutdown.clone(), reload, notifier: notify::Notifier::from_env() };
        let served = server::serve(listener, config, machinery, control).await;
        signals.abort();
        let _ = std::fs::remove_file(&socket);
        served.map_err(Failure::failed)?;
        Ok(Exit::Ok)
    })
}

/// HTCondor refuses jobs owned by root; a daemon as root would only fail
/// later. In-process simulation submits nothing, so it may run as root.
fn refuse_root(simulated: bool) -> Result<(), Failure> {
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    if root && !simulated && std::env::var("COSCHED_ALLOW_ROOT").as_deref() != Ok("1") {
        return Err(Failure::usage(
            "the daemon must not run as root: HTCondor refuses jobs owned by root. Run it as a dedicated \
             account (see condor/cosched.service, User=cosched); COSCHED_ALLOW_ROOT=1 overrides this for tests",
        ));
    }
    Ok(())
}

/// Installs the handlers now, and returns the task that acts on them. Not an
/// `async fn`: its body would install them only once the spawned task first
/// ran, and a SIGTERM before that (systemd's stop right after READY=1, seen
/// under load) killed the daemon without a clean stop or its STOPPING=1.
fn watch_signals(
    shutdown: CancellationToken,
    reload: mpsc::UnboundedSender<()>,
) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let installed =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup()));
    async move {
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = installed else {
            tracing::error!("cannot install signal handlers; stop the daemon with SIGKILL");
            return;
        };
        loop {
            let name = tokio::select! {
                biased;
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
                _ = hup.recv() => { tracing::info!("SIGHUP: reloading the configuration"); let _ = reload.send(()); continue; }
            };
            // A second one while stopping: whoever sent it will not wait
            // for the stop's grace (a person at a terminal, an operator
            // whose `systemctl stop` hangs on a slow schedd). Exit at once,
            // as the foreground `cosched submit` does on a second Ctrl-C.
            if shutdown.is_cancelled() {
                tracing::warn!(
                    "{name} again: exiting at once (exit {}) without waiting for the runs; they resume from \
                     their checkpoints at the next start, and a condor_submit in flight dies with the daemon \
                     (the resume settles its batch)",
                    Exit::Interrupted as i32
                );
                std::process::exit(Exit::Interrupted as i32);
            }
            tracing::info!("{name}: stopping (send it again to exit at once)");
            shutdown.cancel();
        }
    }
}

/// The socket clients use: `--socket`/`COSCHED_SOCKET`, else
/// `$XDG_RUNTIME_DIR/cosched/cosched.sock` (a user unit's), else the system
/// daemon's `/run/cosched/cosched.sock`.
pub fn default_socket(explicit: Option<&Path>) -> std::path::PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        let user = Path::new(&dir).join("cosched").join("cosched.sock");
        if user.exists() {
            return user;
        }
    }
    std::path::PathBuf::from("/run/cosched/cosched.sock")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_in(dir: &Path, socket: &str) -> DaemonConfig {
        let text = format!("socket = \"{socket}\"\nstate_dir = \"state\"\n");
        config::parse(&dir.join("daemon.toml"), &text).unwrap()
    }

    /// A3 of the daemon's exploratory test: `bind` removed whatever was at
    /// the socket path and did not answer a ping: a file (the config, the
    /// state database), a directory it could not remove.
    #[test]
    fn a_socket_path_that_is_not_a_socket_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("important.txt"), "precious").unwrap();
        std::fs::create_dir(dir.path().join("a_dir")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("important.txt"), dir.path().join("a_link")).unwrap();
        for (name, kind) in
            [("important.txt", "regular file"), ("a_dir", "directory"), ("a_link", "symbolic link")]
        {
            let config = config_in(dir.path(), name);
            let why = bind(&config).err().unwrap_or_else(|| panic!("{name}: bound over a {kind}"));
            let path = dir.path().join(name);
            assert!(why.starts_with(&path.display().to_string()), "names the path: {why}");
            assert!(why.contains(&format!("not a socket (a {kind})")), "{why}");
            assert!(
                why.contains("daemon.toml") && why.contains("point `socket` at"),
                "says what to do: {why}"
            );
            assert!(std::fs::symlink_metadata(&path).is_ok(), "{name} is still there");
        }
        assert_eq!(std::fs::read_to_string(dir.path().join("important.txt")).unwrap(), "precious");
    }

    /// What `bind` may still remove: a socket nobody listens on (a daemon
    /// killed before it could remove its own).
    #[tokio::test]
    async fn a_stale_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        drop(std::os::unix::net::UnixListener::bind(dir.path().join("d.sock")).unwrap());
        let listener = bind(&config_in(dir.path(), "d.sock")).expect("the stale socket is replaced");
        let client = tokio::net::UnixStream::connect(dir.path().join("d.sock"));
        let (accepted, connected) = tokio::join!(listener.accept(), client);
        assert!(accepted.is_ok() && connected.is_ok(), "the new socket listens");
    }
}
