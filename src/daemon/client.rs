//! The daemon's clients: `cosched runs`, `status`, `cancel`, `watch` and
//! `cosched submit … --daemon`. Plain blocking socket I/O: one request, one
//! (or, for `watch`, a stream of) JSON line(s) back; see [`crate::daemon`] for
//! the protocol. `COSCHED_AS_UID` adds `as_uid` to requests (honoured only by
//! a daemon with the test-only `trust_client_uid`).

use super::protocol::{
    version_hint, Envelope, KindRequest, Request, Response, RunStatus, SubmitRequest, VERSION,
};
use crate::run::SubmitArgs;
use crate::{CmdResult, Exit, Failure};
use clap::Args;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ClientArgs {
    /// The daemon's socket.
    #[arg(long, env = "COSCHED_SOCKET")]
    pub socket: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    pub run: Option<u64>,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Args, Debug)]
pub struct RunRefArgs {
    pub run: u64,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// An open connection to the daemon.
pub struct Connection {
    socket: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Connection {
    pub fn open(socket: &Path) -> Result<Connection, Failure> {
        let stream = UnixStream::connect(socket).map_err(|e| {
            Failure::failed(format!(
                "cannot reach the cosched daemon at {}: {e}\n  is it running (systemctl status cosched)? \
                 Another socket can be given with --socket or COSCHED_SOCKET.",
                socket.display()
            ))
        })?;
        let writer = stream.try_clone().map_err(|e| Failure::failed(format!("socket: {e}")))?;
        Ok(Connection { socket: socket.to_path_buf(), reader: BufReader::new(stream), writer })
    }

    /// Sends one request.
    pub fn send(&mut self, request: Request) -> Result<(), Failure> {
        let as_uid = std::env::var("COSCHED_AS_UID").ok().and_then(|v| v.trim().parse().ok());
        let version = Some(VERSION.to_string());
        let mut line = serde_json::to_string(&Envelope { request, as_uid, version })
            .map_err(|e| Failure::failed(format!("encoding the request: {e}")))?;
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| Failure::failed(format!("{}: sending to the daemon: {e}", self.socket.display())))
    }

    /// Reads one response line; a daemon error becomes a [`Failure`] (exit
    /// 1: the daemon could not do what it was asked).
    pub fn receive(&mut self) -> Result<Response, Failure> {
        self.receive_or(Failure::failed)
    }

    /// Reads one response line; a daemon error becomes `refused(its
    /// message)`. Failing to talk to the daemon at all is always exit 1.
    fn receive_or(&mut self, refused: fn(String) -> Failure) -> Result<Response, Failure> {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(|e| {
            Failure::failed(format!("{}: reading from the daemon: {e}", self.socket.display()))
        })?;
        if n == 0 {
            return Err(Failure::failed("the daemon closed the connection (is it stopping?)"));
        }
        let response: Response = serde_json::from_str(&line).map_err(|e| {
            Failure::failed(format!("the daemon answered something unreadable ({e}): {line}"))
        })?;
        if !response.ok {
            let mut error = response.error.unwrap_or_else(|| "the daemon refused".into());
            // After an upgrade the daemon may still be the old one, which
            // may not read the request as this client means it.
            if let Some(hint) = version_hint(response.version.as_deref(), VERSION) {
                error = format!("{error}\n{hint}");
            }
            return Err(refused(error));
        }
        Ok(response)
    }

    pub fn request(&mut self, request: Request) -> Result<Response, Failure> {
        self.send(request)?;
        self.receive()
    }
}

fn connect(args: &ClientArgs) -> Result<Connection, Failure> {
    Connection::open(&super::default_socket(args.socket.as_deref()))
}

fn print_json<T: serde::Serialize>(value: &T) -> Result<(), Failure> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| Failure::failed(format!("encoding JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

fn owner(run: &RunStatus) -> String {
    run.owner_name.clone().unwrap_or_else(|| run.owner.to_string())
}

/// `cosched runs`.
pub fn runs(args: ClientArgs) -> CmdResult {
    let mut conn = connect(&args)?;
    let runs = conn.request(Request::Runs)?.runs.unwrap_or_default();
    if args.json {
        print_json(&runs)?;
        return Ok(Exit::Ok);
    }
    if runs.is_empty() {
        println!("no runs");
        return Ok(Exit::Ok);
    }
    println!("{:>5}  {:<10}  {:<10}  {:<9}  {:>13}  {:>6}", "RUN", "OWNER", "STATE", "POLICY", "DONE", "OUT");
    for r in &runs {
        println!(
            "{:>5}  {:<10}  {:<10}  {:<9}  {:>13}  {:>6}",
            r.id,
            owner(r),
            r.state,
            r.policy,
            format!("{}/{}", r.done, r.n_jobs),
            r.out
        );
    }
    Ok(Exit::Ok)
}

/// Renders one run's status as a table (also used by `watch`).
pub fn render_status(r: &RunStatus) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "run {} ({}): {}, policy {}, {}/{} done, {} given up, {} out, t = {:.0} s{}{}",
        r.id,
        owner(r),
        r.state,
        r.policy,
        r.done,
        r.n_jobs,
        r.given_up,
        r.out,
        r.time,
        if r.cut_short > 0 {
            format!(", {} execution(s) cut short ({:.0} slot-s)", r.cut_short, r.cut_short_seconds)
        } else {
            String::new()
        },
        r.message.as_deref().map(|m| format!(" — {m}")).unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "  {:<20} {:<12} {:>8} {:>6} {:>6} {:>6} {:>7} {:>5} {:>6} {:>8}",
        "SITE", "CLASS", "CAPACITY", "WINDOW", "CAP", "QUEUED", "RUNNING", "HELD", "DONE", "AGTIME"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for site in &r.sites {
        let _ = writeln!(
            s,
            "  {:<20} {:<12} {:>8} {:>6} {:>6} {:>6} {:>7} {:>5} {:>6} {:>8}",
            site.name,
            site.class,
            opt(site.capacity),
            site.window,
            site.fair_cap.map_or("-".to_string(), |c| c.to_string()),
            site.queued + site.held_back,
            site.running,
            site.held,
            site.done,
            site.agtime.map_or("-".to_string(), |a| format!("{a:.0}s")),
        );
        if let Some(note) = unreachable_note(r, site) {
            let _ = writeln!(s, "    {note}");
        }
        let width = site.kinds.iter().map(|k| k.name.len()).max().unwrap_or(0);
        for k in &site.kinds {
            let _ = writeln!(
                s,
                "    {:<width$} {:>5} running {:>6} done  run time {}{}",
                k.name,
                k.running,
                k.done,
                k.mean_run_time.map_or("-".to_string(), |t| format!("{t:.0} s")),
                crate::run::progress::window_and_capacity(k)
            );
        }
    }
    s
}

/// `schedd unreachable since t = 120 s (for 40 s): ERROR…` for a site whose
/// schedd does not answer, as a foreground run's progress says it.
fn unreachable_note(r: &RunStatus, site: &super::protocol::SiteStatus) -> Option<String> {
    let since = site.unreachable_since?;
    let error = site.unreachable_error.as_deref().and_then(|e| e.lines().find(|l| !l.trim().is_empty()));
    Some(format!(
        "{}: schedd unreachable since t = {since:.0} s (for {:.0} s){}",
        site.name,
        (r.time - since).max(0.0),
        error.map(|e| format!(": {}", e.trim())).unwrap_or_default()
    ))
}

/// One line per run for `watch` into a file or pipe: what changes as it goes.
pub fn status_line(r: &RunStatus) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "run {}: {}, {}/{} done, {} given up, {} out",
        r.id, r.state, r.done, r.n_jobs, r.given_up, r.out
    );
    for site in &r.sites {
        let _ =
            write!(s, "; {} {}q/{}r/{}d", site.name, site.queued + site.held_back, site.running, site.done);
        if let Some(since) = site.unreachable_since {
            let _ = write!(s, " schedd unreachable since t = {since:.0} s");
        }
    }
    if let Some(m) = &r.message {
        let _ = write!(s, " — {m}");
    }
    s
}

/// `cosched status [RUN] [--json]`.
pub fn status(args: StatusArgs) -> CmdResult {
    let mut conn = connect(&args.client)?;
    let runs = conn.request(Request::Status { run: args.run })?.runs.unwrap_or_default();
    if args.client.json {
        print_json(&runs)?;
        return Ok(Exit::Ok);
    }
    if runs.is_empty() {
        println!("no unfinished runs");
    }
    for r in &runs {
        print!("{}", render_status(r));
    }
    Ok(Exit::Ok)
}

/// `cosched cancel RUN`.
pub fn cancel(args: RunRefArgs) -> CmdResult {
    let mut conn = connect(&args.client)?;
    conn.request(Request::Cancel { run: args.run })?;
    println!(
        "run {}: cancelling; its jobs are being removed (follow with `cosched watch {}`)",
        args.run, args.run
    );
    Ok(Exit::Ok)
}

/// `cosched watch RUN`: prints the status on every change until the run ends.
pub fn watch(args: RunRefArgs) -> CmdResult {
    let mut conn = connect(&args.client)?;
    conn.send(Request::Watch { run: args.run })?;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut last_line = String::new();
    loop {
        let response = conn.receive()?;
        let Some(run) = response.runs.and_then(|mut r| r.pop()) else { continue };
        if args.client.json {
            println!("{}", serde_json::to_string(&run).unwrap_or_default());
        } else if tty {
            // Redraw in place: clear the screen, home the cursor.
            print!("\x1b[2J\x1b[H{}", render_status(&run));
        } else {
            // A file or a pipe gets one line per change of what it shows.
            let line = status_line(&run);
            if line != last_line {
                println!("{line}");
                last_line = line;
            }
        }
        let _ = std::io::stdout().flush();
        match run.state.as_str() {
            "done" => return Ok(Exit::Ok),
            "cancelled" | "failed" => return Ok(Exit::Partial),
            _ => {}
        }
    }
}

/// `cosched submit N sites.toml job.sub --daemon` (or `cosched submit
/// sites.toml --jobs NAME=COUNT:FILE … --daemon`): hands the run to the
/// daemon and prints its id.
pub fn submit(args: &SubmitArgs) -> CmdResult {
    if args.resume.is_some() {
        return Err(Failure::usage(
            "--daemon and --resume do not go together: the daemon resumes its runs itself",
        ));
    }
    if args.simulate {
        // The daemon would run it on the real grid, or (config `simulate =
        // true`) simulate every run: the flag cannot be honoured per run.
        return Err(Failure::usage(
            "--daemon and --simulate do not go together: a daemon simulates every run when its config sets \
             `simulate = true` (then hand it runs without --simulate), and none otherwise; for one simulated \
             run, drop --daemon",
        ));
    }
    let (sites, specs) = args.inputs()?;
    if specs.is_empty() {
        return Err(Failure::usage("--daemon needs N, the sites file and the submit description"));
    }
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| Failure::usage(format!("{}: cannot read: {e}", p.display())))
    };
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string();
    let mut kinds = Vec::with_capacity(specs.len());
    for spec in &specs {
        let count = spec
            .count
            .and_then(|n| u64::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| Failure::usage("N must be at least 1"))?;
        kinds.push(KindRequest {
            name: spec.name.clone(),
            count,
            job_path: abs(&spec.path),
            job_sub: read(&spec.path)?,
        });
    }
    let n_jobs = kinds.iter().map(|k| k.count).sum();
    let mut request = SubmitRequest {
        n_jobs,
        sites_path: abs(&sites),
        sites_toml: read(&sites)?,
        job_path: String::new(),
        job_sub: String::new(),
        kinds: Vec::new(),
        policy: args.policy.clone(),
    };
    // A run of one description goes in the form every daemon reads.
    match kinds.pop() {
        Some(one) if args.jobs.is_empty() && kinds.is_empty() => {
            (request.job_path, request.job_sub) = (one.job_path, one.job_sub);
        }
        last => {
            kinds.extend(last);
            request.kinds = kinds;
        }
    }
    let mut conn = Connection::open(&super::default_socket(args.socket.as_deref()))?;
    conn.send(Request::Submit(request))?;
    // A refused submit left nothing submitted: an input error (exit 2), as
    // when the client itself finds one, not a run whose jobs failed.
    let response = conn.receive_or(Failure::usage)?;
    let id = response.run.ok_or_else(|| Failure::failed("the daemon accepted the run but gave no id"))?;
    // Accepted, with the inputs' warnings or a setting changed to the
    // daemon's bounds: on stderr, so that stdout stays the run id alone.
    for warning in &response.warnings {
        eprintln!("cosched: warning: {warning}");
    }
    if args.json {
        println!("{{\"run\":{id}}}");
    } else {
        println!("{id}");
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::protocol::SiteStatus;

    #[test]
    fn watch_lines_show_what_changes() {
        let run = RunStatus {
            id: 7,
            state: "running".into(),
            n_jobs: 10,
            done: 4,
            out: 6,
            sites: vec![SiteStatus {
                name: "ce".into(),
                queued: 2,
                running: 3,
                done: 4,
                ..SiteStatus::default()
            }],
            ..RunStatus::default()
        };
        assert_eq!(status_line(&run), "run 7: running, 4/10 done, 0 given up, 6 out; ce 2q/3r/4d");
    }
}
