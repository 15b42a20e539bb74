//! The real HTCondor edge: running `condor_submit`, `condor_rm` and
//! `condor_q`, and the HTCondor [`crate::engine::SiteBackend`] ([`CondorSite`]).
//!
//! Everything here relies only on documented HTCondor behaviour
//! (`shared/htcondor-facts.md`, outputs in `shared/fixtures/cli/`), so the same
//! code drives a real schedd and cosched's fake commands:
//! - `condor_submit -terse FILE` prints `C.first - C.last`; errors exit 1 with
//!   `ERROR: …` on stderr, and a failed submit may still consume a cluster id.
//! - `condor_rm` exits 1 for jobs that are no longer there (`Couldn't find…`,
//!   `Job C.P not found`): for cosched that means "already gone".
//! - `condor_q -json` prints nothing at all when nothing matches.
//!
//! Constraints: processes are spawned from argument vectors, never a shell;
//! every command has a timeout and is killed when it passes; failures carry the
//! command line, exit status and the child's stderr, and are classified as
//! transient (worth retrying: schedd unreachable, timeouts, security
//! handshakes) or permanent (bad executable, permissions, syntax).

mod preflight;
mod site;

pub use preflight::preflight;

pub use site::{
    backoff, batch_number, event_run_time, first_free_batches, remove_forwarded_leftovers, site_event,
    CondorSite, NoJournal, Reachability, SubmitJournal,
};

use crate::config::CondorSettings;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Runs the HTCondor commands. Cheap to share (`Arc<Condor>`): it holds only
/// settings.
#[derive(Clone, Debug)]
pub struct Condor {
    /// Where the commands are; `None` searches `PATH`.
    bin_dir: Option<PathBuf>,
    /// Longest any one command may run before it is killed.
    timeout: Duration,
    /// Retries of a transiently failing `condor_submit` (used by [`CondorSite`]).
    retries: u32,
    /// Log polling fallback interval (used by [`CondorSite`]).
    poll_interval: Duration,
}

/// The jobs one `condor_submit` made: procs `first..=last` of `cluster`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterRange {
    pub cluster: i64,
    pub first: i64,
    pub last: i64,
}

impl ClusterRange {
    /// Number of procs in the range.
    pub fn count(&self) -> u64 {
        (self.last - self.first + 1).max(0) as u64
    }
}

/// Whether retrying the same command can help.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Schedd unreachable or busy, timeouts, security handshakes, a killed
    /// command, output that cannot be read: try again later.
    Transient,
    /// The command itself is wrong (executable, permissions, syntax): retrying
    /// the same thing fails the same way.
    Permanent,
}

/// A failed HTCondor command.
#[derive(Clone, Debug, PartialEq)]
pub struct CondorError {
    /// The command line as run (for people; it was not run through a shell).
    pub command: String,
    /// Exit status; `None` when it did not exit (timeout, signal, not started).
    pub status: Option<i32>,
    /// The child's stderr (or what went wrong running it), trimmed.
    pub stderr: String,
    pub kind: ErrorKind,
}

impl fmt::Display for CondorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` failed", self.command)?;
        match self.status {
            Some(code) => write!(f, " (exit status {code})")?,
            None => write!(f, " (no exit status)")?,
        }
        let lines: Vec<&str> =
            self.stderr.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
        match lines.as_slice() {
            [] => {}
            [one] => write!(f, ": {}", one.trim())?,
            many => {
                write!(f, ":")?;
                for line in many {
                    write!(f, "\n    {line}")?;
                }
            }
        }
        if self.kind == ErrorKind::Transient {
            write!(f, " [transient]")?;
        }
        Ok(())
    }
}

impl std::error::Error for CondorError {}

/// Spawns retried while the program is busy ("Text file busy"), and the
/// wait before the first retry (then twice, three times as long, …).
const BUSY_RETRIES: u32 = 5;
const BUSY_BACKOFF: Duration = Duration::from_millis(20);

/// Messages that mean "the command was wrong", checked first: retrying an
/// unreadable executable or a syntax error only repeats it.
const PERMANENT: [&str; 9] = [
    "can't access executable",
    "permission denied",
    "syntax error",
    "parse error",
    "failed to parse",
    "failed to create new user record",
    "unknown grid",
    "is not allowed",
    "unsupported",
];

/// Messages that mean "HTCondor could not be reached right now".
const TRANSIENT: [&str; 17] = [
    "failed to connect",
    "connection refused",
    "secman",
    "timed out",
    "timeout",
    "can't connect",
    "cannot connect",
    "could not connect",
    "unable to connect",
    "failed to communicate",
    "connection reset",
    "no route to host",
    "temporarily unavailable",
    "try again",
    "can't find address",
    "queue manager",
    "broken pipe",
];

/// Classifies a failed command from its stderr (and stdout) text. A command
/// without an exit status (killed, timed out) is transient; unknown messages
/// are permanent, so that cosched does not hammer a schedd it does not
/// understand.
pub fn classify(text: &str, status: Option<i32>) -> ErrorKind {
    let lower = text.to_ascii_lowercase();
    if PERMANENT.iter().any(|p| lower.contains(p)) {
        return ErrorKind::Permanent;
    }
    if status.is_none() || TRANSIENT.iter().any(|p| lower.contains(p)) {
        return ErrorKind::Transient;
    }
    ErrorKind::Permanent
}

/// Reads `condor_submit` output: `-terse` lines `C.first - C.last`, or the
/// plain `N job(s) submitted to cluster C.`. With several clusters (which one
/// `queue` statement never makes) the first is returned.
pub fn parse_submit_output(stdout: &str) -> Option<ClusterRange> {
    for line in stdout.lines() {
        let line = line.trim();
        if let Some((a, b)) = line.split_once(" - ") {
            if let (Some((c1, p1)), Some((c2, p2))) = (parse_job_id(a), parse_job_id(b)) {
                if c1 == c2 && p1 <= p2 {
                    return Some(ClusterRange { cluster: c1, first: p1, last: p2 });
                }
            }
        }
        if let Some((count, rest)) = line.split_once(" job(s) submitted to cluster ") {
            let count: i64 = count.trim().parse().ok()?;
            let cluster: i64 = rest.trim().trim_end_matches('.').parse().ok()?;
            if count >= 1 {
                return Some(ClusterRange { cluster, first: 0, last: count - 1 });
            }
        }
    }
    None
}

fn parse_job_id(s: &str) -> Option<(i64, i64)> {
    let (c, p) = s.trim().split_once('.')?;
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
    if !digits(c) || !digits(p) {
        return None;
    }
    Some((c.parse().ok()?, p.parse().ok()?))
}

/// What a finished child left.
struct Finished {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Condor {
    pub fn new(settings: &CondorSettings) -> Self {
        let secs = |s: f64, default: f64| {
            Duration::from_secs_f64(if s.is_finite() && s > 0.0 { s } else { default })
        };
        Condor {
            bin_dir: settings.bin_dir.clone(),
            timeout: secs(settings.submit_timeout, 120.0),
            retries: settings.retries,
            poll_interval: secs(settings.poll_interval, 5.0),
        }
    }

    /// How often a transient `condor_submit` failure is retried.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Log polling fallback.
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// The program to run for `name` (`condor_submit`, …).
    pub fn program(&self, name: &str) -> PathBuf {
        match &self.bin_dir {
            Some(dir) => dir.join(name),
            None => PathBuf::from(name),
        }
    }

    /// Runs `name args…` with a timeout; `Err` only when it could not be run
    /// or did not finish in time.
    async fn run(&self, name: &str, args: &[String]) -> Result<Finished, CondorError> {
        let program = self.program(name);
        let command_line = std::iter::once(program.display().to_string())
            .chain(args.iter().map(|a| if a.contains(' ') { format!("'{a}'") } else { a.clone() }))
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = tokio::process::Command::new(&program);
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        // A process group of its own: a terminal sends Ctrl-C's SIGINT to
        // its whole foreground group, and a `condor_submit` in that group
        // would die mid-commit, its outcome unknown and its batch left for
        // `--resume` to settle. Ctrl-C asks cosched to stop cleanly, which
        // waits for the command in flight (bounded by the [condor] timeout);
        // the command still dies with cosched (`die_with_parent`).
        cmd.process_group(0);
        die_with_parent(&mut cmd);
        let mut spawned = cmd.spawn();
        // "Text file busy": the program is open for writing somewhere — being
        // replaced (an upgrade), or just written and its descriptor not yet
        // closed in a process forked meanwhile. That passes in moments.
        for attempt in 1..=BUSY_RETRIES {
            match &spawned {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    tokio::time::sleep(BUSY_BACKOFF * attempt).await;
                    spawned = cmd.spawn();
                }
                _ => break,
            }
        }
        let child = spawned.map_err(|e| CondorError {
            command: command_line.clone(),
            status: None,
            stderr: match (e.kind(), &self.bin_dir) {
                (std::io::ErrorKind::NotFound, None) => format!(
                    "cannot run {}: not found on PATH (is HTCondor installed? set [condor] bin_dir in the sites file)",
                    program.display()
                ),
                (std::io::ErrorKind::NotFound, Some(dir)) => format!(
                    "cannot run {}: not found (check [condor] bin_dir in the sites file: {} holds no {})",
                    program.display(),
                    dir.display(),
                    program.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())
                ),
                _ => format!("cannot run {}: {e}", program.display()),
            },
            kind: if e.raw_os_error() == Some(libc::ETXTBSY) { ErrorKind::Transient } else { ErrorKind::Permanent },
        })?;
        // Dropping the future on timeout drops the child, which kills it.
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(Ok(output)) => Ok(Finished {
                status: output.status.code(),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            }),
            Ok(Err(e)) => Err(CondorError {
                command: command_line,
                status: None,
                stderr: format!("waiting for it failed: {e}"),
                kind: ErrorKind::Transient,
            }),
            Err(_) => Err(CondorError {
                command: command_line,
                status: None,
                stderr: format!("timed out after {:.0} s and was killed", self.timeout.as_secs_f64()),
                kind: ErrorKind::Transient,
            }),
        }
    }

    fn failure(command: &str, args: &[String], finished: &Finished, program: &Path) -> CondorError {
        let text = if finished.stderr.is_empty() {
            finished.stdout.trim().to_string()
        } else {
            finished.stderr.clone()
        };
        let _ = command;
        CondorError {
            command: std::iter::once(program.display().to_string())
                .chain(args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" "),
            status: finished.status,
            kind: classify(&text, finished.status),
            stderr: text,
        }
    }

    /// `condor_submit -terse FILE`.
    pub async fn submit(&self, submit_file: &Path) -> Result<ClusterRange, CondorError> {
        let args = vec!["-terse".to_string(), submit_file.display().to_string()];
        // No working directory is needed: rendered submit files use absolute
        // paths (executable, initialdir, log).
        let finished = self.run("condor_submit", &args).await?;
        let program = self.program("condor_submit");
        if finished.status != Some(0) {
            return Err(Self::failure("condor_submit", &args, &finished, &program));
        }
        parse_submit_output(&finished.stdout).ok_or_else(|| CondorError {
            command: format!("{} {}", program.display(), args.join(" ")),
            status: finished.status,
            // The jobs may be in the queue: transient, so that the caller
            // looks for them before trying again.
            stderr: format!("could not read the cluster id from its output: {:?}", finished.stdout.trim()),
            kind: ErrorKind::Transient,
        })
    }

    /// `condor_submit -dry-run OUT FILE`: HTCondor's own reading of a
    /// submit file (its syntax, expressions, universe, environment),
    /// nothing queued; the job ads go to `out`.
    pub async fn dry_run(&self, submit_file: &Path, out: &Path) -> Result<(), CondorError> {
        let args = vec!["-dry-run".to_string(), out.display().to_string(), submit_file.display().to_string()];
        let finished = self.run("condor_submit", &args).await?;
        if finished.status != Some(0) {
            return Err(Self::failure("condor_submit", &args, &finished, &self.program("condor_submit")));
        }
        Ok(())
    }

    /// `condor_rm TARGET…` (`C` or `C.P`). Jobs that are not in the queue any
    /// more count as removed.
    pub async fn remove(&self, targets: &[String]) -> Result<(), CondorError> {
        if targets.is_empty() {
            return Ok(());
        }
        let finished = self.run("condor_rm", targets).await?;
        if finished.status == Some(0) {
            return Ok(());
        }
        let text = format!("{}\n{}", finished.stderr, finished.stdout).to_ascii_lowercase();
        if text.contains("couldn't find") || text.contains("not found") {
            return Ok(());
        }
        Err(Self::failure("condor_rm", targets, &finished, &self.program("condor_rm")))
    }

    /// `condor_rm -name SCHEDD -pool POOL -constraint EXPR` at another
    /// schedd: how a Condor-C job's remote copy is taken back atomically
    /// (the remote schedd evaluates `EXPR`, so a constraint on `JobStatus`
    /// cannot race a start there), and how copies the gridmanager left
    /// behind are cleaned up.
    pub async fn remove_remote(&self, schedd: &str, pool: &str, constraint: &str) -> Result<(), CondorError> {
        let args = ["-name", schedd, "-pool", pool, "-constraint", constraint].map(String::from);
        self.remove(&args).await
    }

    /// `condor_config_val NAME`: the submit host's setting, `None` where it
    /// is not defined or the tool could not be run.
    pub async fn config_val(&self, name: &str) -> Option<String> {
        let finished = self.run("condor_config_val", &[name.to_string()]).await.ok()?;
        let value = finished.stdout.trim();
        (finished.status == Some(0) && !value.is_empty()).then(|| value.to_string())
    }

    /// `condor_q -json -constraint EXPR [-attributes A,B]`: the matching job
    /// ads (none when nothing matches: condor_q then prints nothing at all).
    pub async fn query(
        &self,
        constraint: &str,
        attributes: &[&str],
    ) -> Result<Vec<serde_json::Value>, CondorError> {
        self.query_with(&[], constraint, attributes).await
    }

    /// [`Condor::query`] at another schedd (`-name SCHEDD -pool POOL`): how
    /// cosched sees the remote copy of a Condor-C job without waiting for
    /// the gridmanager's next poll.
    pub async fn query_remote(
        &self,
        schedd: &str,
        pool: &str,
        constraint: &str,
        attributes: &[&str],
    ) -> Result<Vec<serde_json::Value>, CondorError> {
        let at = ["-name".to_string(), schedd.to_string(), "-pool".to_string(), pool.to_string()];
        self.query_with(&at, constraint, attributes).await
    }

    async fn query_with(
        &self,
        first: &[String],
        constraint: &str,
        attributes: &[&str],
    ) -> Result<Vec<serde_json::Value>, CondorError> {
        let mut args = first.to_vec();
        args.extend(["-json".to_string(), "-constraint".to_string(), constraint.to_string()]);
        if !attributes.is_empty() {
            args.push("-attributes".to_string());
            args.push(attributes.join(","));
        }
        let finished = self.run("condor_q", &args).await?;
        let program = self.program("condor_q");
        if finished.status != Some(0) {
            return Err(Self::failure("condor_q", &args, &finished, &program));
        }
        parse_query_output(&finished.stdout).map_err(|e| CondorError {
            command: format!("{} {}", program.display(), args.join(" ")),
            status: finished.status,
            stderr: format!("its output is not a JSON array of job ads: {e}"),
            kind: ErrorKind::Transient,
        })
    }

    /// The jobs of one cosched batch still in the queue, as
    /// (cluster, proc, `CoschedJob`) — how a submission whose outcome is
    /// unknown (timeout, crash between `condor_submit` and recording its
    /// cluster) is found again. The copies Condor-C forwards to a remote
    /// schedd carry the same attributes (and on a pool that is its own
    /// remote they are in this queue); they also carry
    /// `SubmitterGlobalJobId`, which ours never do.
    pub async fn find_batch(
        &self,
        run: &str,
        batch: &str,
    ) -> Result<Vec<(i64, i64, Option<u64>)>, CondorError> {
        let run = crate::submit_desc::plain_id(run);
        let batch = crate::submit_desc::plain_id(batch);
        let constraint = format!(
            "CoschedRun == \"{run}\" && CoschedBatch == \"{batch}\" && SubmitterGlobalJobId =?= undefined"
        );
        let ads = self.query(&constraint, &["ClusterId", "ProcId", "CoschedJob"]).await?;
        Ok(ads
            .iter()
            .filter_map(|ad| {
                let cluster = ad.get("ClusterId")?.as_i64()?;
                let proc = ad.get("ProcId")?.as_i64()?;
                Some((cluster, proc, ad.get("CoschedJob").and_then(serde_json::Value::as_u64)))
            })
            .collect())
    }

    /// The clusters of several cosched batches still in the queue, as
    /// (batch, cluster) pairs: [`Condor::find_batch`] for many batches at
    /// once. A resumed run settles every unknown submission with it, one
    /// `condor_q` per 100 batches rather than one each (a `condor_q` is a
    /// fork of a process that may hold hundreds of MB).
    pub async fn find_batches(
        &self,
        run: &str,
        batches: &[String],
    ) -> Result<Vec<(String, i64)>, CondorError> {
        let run = crate::submit_desc::plain_id(run);
        let mut found = Vec::new();
        for chunk in batches.chunks(100) {
            let names: Vec<String> = chunk
                .iter()
                .map(|b| format!("CoschedBatch == \"{}\"", crate::submit_desc::plain_id(b)))
                .collect();
            let constraint = format!(
                "CoschedRun == \"{run}\" && SubmitterGlobalJobId =?= undefined && ({})",
                names.join(" || ")
            );
            let ads = self.query(&constraint, &["ClusterId", "CoschedBatch"]).await?;
            found.extend(ads.iter().filter_map(|ad| {
                let cluster = ad.get("ClusterId")?.as_i64()?;
                let batch = ad.get("CoschedBatch")?.as_str()?;
                Some((batch.to_string(), cluster))
            }));
        }
        Ok(found)
    }
}

/// Parses `condor_q -json` output: empty (nothing matched) or a JSON array.
pub fn parse_query_output(stdout: &str) -> Result<Vec<serde_json::Value>, String> {
    if stdout.trim().is_empty() {
        return Ok(Vec::new());
    }
    match serde_json::from_str::<serde_json::Value>(stdout) {
        Ok(serde_json::Value::Array(ads)) => Ok(ads),
        Ok(other) => Err(format!("expected an array, got {}", kind_of(&other))),
        Err(e) => Err(e.to_string()),
    }
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Stand-ins for the HTCondor commands in unit tests: tiny scripts that print
/// recorded outputs (the fixtures of `shared/fixtures/cli`) and log their
/// arguments. The scripts are run by the code under test exactly as the real
/// commands would be: by path, with an argument vector.
/// A `condor_submit` that outlives a cosched killed with `-9` could commit its
/// batch after the resumed run has looked for it in `condor_q` and
/// submitted it again: every HTCondor command dies with cosched instead
/// (SIGKILL from the kernel when the parent dies). Killed before its commit,
/// a submit leaves nothing at the schedd; after it, the resume finds the batch.
fn die_with_parent(cmd: &mut tokio::process::Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: runs in the child between fork and exec; prctl and getppid are
    // async-signal-safe and nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the prctl took effect.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    pub fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/cli")
    }

    /// Writes `dir/name`: a script running `body` after appending its
    /// arguments, one per line, to `dir/name.args`.
    pub fn script(dir: &Path, name: &str, body: &str) {
        let path = dir.join(name);
        let args = dir.join(format!("{name}.args"));
        let text = format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '{}'; done\n{body}\n",
            args.display()
        );
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A script replaying fixture `case` (its stdout, stderr and exit code).
    pub fn replay(dir: &Path, name: &str, case: &str) {
        let f = fixtures();
        let rc = std::fs::read_to_string(f.join(format!("{case}.rc"))).unwrap();
        let body = format!(
            "cat '{}'\ncat '{}' >&2\nexit {}",
            f.join(format!("{case}.stdout")).display(),
            f.join(format!("{case}.stderr")).display(),
            rc.trim()
        );
        script(dir, name, &body);
    }

    /// The arguments the script `name` was called with, per call in order
    /// (calls are not delimited; tests call once or count lines).
    pub fn args(dir: &Path, name: &str) -> Vec<String> {
        std::fs::read_to_string(dir.join(format!("{name}.args")))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(fixtures().join(name)).unwrap()
    }

    fn condor_in(dir: &Path, timeout: f64) -> Condor {
        Condor::new(&CondorSettings {
            bin_dir: Some(dir.to_path_buf()),
            submit_timeout: timeout,
            ..Default::default()
        })
    }

    #[test]
    fn terse_and_plain_outputs_parse() {
        assert_eq!(
            parse_submit_output(&fixture("condor_submit-terse.stdout")),
            Some(ClusterRange { cluster: 55, first: 0, last: 1 })
        );
        assert_eq!(
            parse_submit_output(&fixture("condor_submit-plain.stdout")),
            Some(ClusterRange { cluster: 54, first: 0, last: 1 })
        );
        assert_eq!(parse_submit_output(&fixture("condor_submit-bad-exe.stdout")), None);
        assert_eq!(
            parse_submit_output("12345.0 - 12345.999\n"),
            Some(ClusterRange { cluster: 12345, first: 0, last: 999 })
        );
        for junk in
            ["", "55.0 -", "55.1 - 55.0", "55.0 - 56.3", "a.0 - a.1", "-1 job(s) submitted to cluster 3."]
        {
            assert_eq!(parse_submit_output(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn fixture_errors_are_classified() {
        let bad_exe = fixture("condor_submit-bad-exe.stderr");
        assert_eq!(classify(&bad_exe, Some(1)), ErrorKind::Permanent);
        assert_eq!(
            classify("\nERROR: Failed to create new User record for root", Some(1)),
            ErrorKind::Permanent
        );
        for transient in [
            "\nERROR: Failed to connect to local queue manager\nCEDAR:6001:Failed to connect to <127.0.0.1:9618>",
            "SECMAN:2007:Failed to end classad message.",
            "connect(): Connection refused",
            "Can't find address of local schedd",
        ] {
            assert_eq!(classify(transient, Some(1)), ErrorKind::Transient, "{transient}");
        }
        assert_eq!(classify("", None), ErrorKind::Transient, "killed commands are transient");
        assert_eq!(classify("ERROR: something nobody has seen", Some(1)), ErrorKind::Permanent);
    }

    #[test]
    fn query_outputs_parse() {
        assert_eq!(parse_query_output(&fixture("condor_q-json-nomatch.stdout")), Ok(vec![]));
        let ads = parse_query_output(&fixture("condor_q-json-running.stdout")).unwrap();
        assert_eq!(ads.len(), 2);
        assert!(ads.iter().all(|ad| ad["ClusterId"] == 55));
        assert!(parse_query_output("{\"a\": 1}").is_err());
        assert!(parse_query_output("[{").is_err());
    }

    #[tokio::test]
    async fn submit_runs_terse_with_an_argument_vector() {
        let bin = tempfile::tempdir().unwrap();
        replay(bin.path(), "condor_submit", "condor_submit-terse");
        let file = bin.path().join("a batch.sub");
        std::fs::write(&file, "queue\n").unwrap();
        let range = condor_in(bin.path(), 30.0).submit(&file).await.unwrap();
        assert_eq!(range, ClusterRange { cluster: 55, first: 0, last: 1 });
        assert_eq!(args(bin.path(), "condor_submit"), ["-terse".to_string(), file.display().to_string()]);
    }

    #[tokio::test]
    async fn submit_failure_carries_status_and_stderr() {
        let bin = tempfile::tempdir().unwrap();
        replay(bin.path(), "condor_submit", "condor_submit-bad-exe");
        let e = condor_in(bin.path(), 30.0).submit(Path::new("/x/b.sub")).await.unwrap_err();
        assert_eq!((e.status, e.kind), (Some(1), ErrorKind::Permanent));
        assert_eq!(
            e.stderr,
            "ERROR: Can't access executable file /nonexistent/prog: No such file or directory"
        );
        let shown = e.to_string();
        assert!(
            shown.contains("condor_submit -terse /x/b.sub") && shown.contains("exit status 1"),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn a_hung_command_is_killed_and_transient() {
        let bin = tempfile::tempdir().unwrap();
        script(bin.path(), "condor_submit", "exec sleep 30");
        let started = tokio::time::Instant::now();
        let e = condor_in(bin.path(), 0.3).submit(Path::new("/x/b.sub")).await.unwrap_err();
        assert_eq!((e.status, e.kind), (None, ErrorKind::Transient), "{e}");
        assert!(e.stderr.contains("timed out"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(20), "the child was not waited for to the end");
    }

    #[tokio::test]
    async fn missing_commands_are_permanent_with_a_hint() {
        let bin = tempfile::tempdir().unwrap();
        let e = condor_in(bin.path(), 5.0).submit(Path::new("/x/b.sub")).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Permanent);
        assert!(e.stderr.contains("bin_dir"), "{e}");
    }

    #[tokio::test]
    async fn remove_treats_unknown_jobs_as_gone() {
        let bin = tempfile::tempdir().unwrap();
        let condor = condor_in(bin.path(), 30.0);
        for case in ["condor_rm-nonexistent", "condor_rm-nonexistent-job", "condor_rm-multi", "condor_rm-job"]
        {
            replay(bin.path(), "condor_rm", case);
            condor
                .remove(&["54.1".to_string(), "99999".to_string()])
                .await
                .unwrap_or_else(|e| panic!("{case}: {e}"));
        }
        script(bin.path(), "condor_rm", "echo 'ERROR: Failed to connect to local queue manager' >&2; exit 1");
        let e = condor.remove(&["1.0".to_string()]).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Transient);
        assert_eq!(args(bin.path(), "condor_rm").last().map(String::as_str), Some("1.0"));
    }

    #[tokio::test]
    async fn a_program_busy_for_a_moment_is_run_once_it_is_free() {
        // A program still open for writing cannot be executed ("Text file
        // busy"); here this process holds it open for 30 ms.
        let bin = tempfile::tempdir().unwrap();
        script(bin.path(), "condor_rm", "echo ok");
        let writer = std::fs::OpenOptions::new().append(true).open(bin.path().join("condor_rm")).unwrap();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(writer);
        });
        let condor = condor_in(bin.path(), 30.0);
        condor.remove(&["1.0".to_string()]).await.unwrap();
        release.await.unwrap();
        assert_eq!(args(bin.path(), "condor_rm"), ["1.0"]);
    }

    #[tokio::test]
    async fn query_passes_constraint_and_attributes() {
        let bin = tempfile::tempdir().unwrap();
        replay(bin.path(), "condor_q", "condor_q-json-nomatch");
        let condor = condor_in(bin.path(), 30.0);
        assert!(condor.find_batch("run 1", "ce-b00002").await.unwrap().is_empty());
        assert_eq!(
            args(bin.path(), "condor_q"),
            [
                "-json",
                "-constraint",
                "CoschedRun == \"run_1\" && CoschedBatch == \"ce-b00002\" && SubmitterGlobalJobId =?= undefined",
                "-attributes",
                "ClusterId,ProcId,CoschedJob"
            ]
        );
        replay(bin.path(), "condor_q", "condor_q-json-running");
        let ads = condor.query("ClusterId == 55", &[]).await.unwrap();
        assert_eq!(ads.len(), 2);
    }
}
