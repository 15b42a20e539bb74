//! `cosched log dump|stats|follow`: the user-log reader at the terminal.
//!
//! Input errors (missing file, directory, binary data) are one line naming
//! the file, exit 2. Malformed blocks do not stop a command: what parses is
//! printed, each diagnostic goes to stderr as `FILE: offset N: …`, exit 1.
//! This is the one place of the userlog module that reads the clock: legacy
//! `MM/DD` stamps get the current year, as HTCondor's reader gives them.

use super::{read_log_bytes, Diagnostic, Event, EventBody, ReadError};
use crate::{CmdResult, Exit, Failure};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand, Debug)]
pub enum LogCommand {
    /// Print one JSON object per event, with HTCondor's attribute names.
    #[command(after_help = "Example:\n  cosched log dump job.log | jq .type")]
    Dump { file: PathBuf },
    /// Event counts and per-job queue wait, run time and turnaround statistics.
    #[command(after_help = "Example:\n  cosched log stats logs/*.log --json")]
    Stats {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Print events as they are written (like tail -f, one JSON object each).
    #[command(after_help = "Example:\n  cosched log follow job.log")]
    Follow { file: PathBuf },
    /// Write an HTML report with charts (and CSV/JSON numbers) from logs.
    #[command(after_help = "Example:\n  cosched log report run1/logs/*.log --out report")]
    Report {
        /// HTCondor user logs (any, also ones cosched did not write).
        #[arg(required = true)]
        logs: Vec<PathBuf>,
        /// Directory for report.html, report.json, jobs.csv and sites.csv.
        #[arg(long, default_value = "cosched-report")]
        out: PathBuf,
    },
}

/// The year HTCondor's reader gives legacy `MM/DD` stamps: the current one.
#[allow(clippy::disallowed_methods)] // the CLI edge supplies the clock to the parser
fn current_year() -> i32 {
    use chrono::Datelike;
    chrono::Local::now().year()
}

fn read_error(e: ReadError) -> Failure {
    Failure::usage(e.to_string())
}

fn report(file: &Path, diags: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diags {
        let _ = writeln!(err, "{}: offset {}: {}", file.display(), d.offset, d.message);
    }
}

/// Writing to a closed pipe (`| head`) ends the output quietly.
fn write_failed(e: std::io::Error) -> Option<Failure> {
    (e.kind() != std::io::ErrorKind::BrokenPipe).then(|| Failure::failed(format!("writing output: {e}")))
}

/// `cosched log dump FILE`: one JSON object per event.
pub fn dump(file: &Path) -> CmdResult {
    let bytes = read_log_bytes(file).map_err(read_error)?;
    let (events, diags) = super::parse_bytes_with_year(&bytes, current_year());
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for ev in &events {
        if let Err(e) = writeln!(out, "{}", ev.to_json()) {
            return write_failed(e).map_or(Ok(Exit::Ok), Err);
        }
    }
    if let Err(e) = out.flush() {
        return write_failed(e).map_or(Ok(Exit::Ok), Err);
    }
    report(file, &diags);
    Ok(if diags.is_empty() { Exit::Ok } else { Exit::Partial })
}

/// HTCondor's short name of an event code.
pub fn event_name(code: u16) -> &'static str {
    const NAMES: [&str; 48] = [
        "submit",
        "execute",
        "executable error",
        "checkpointed",
        "evicted",
        "terminated",
        "image size",
        "shadow exception",
        "generic",
        "aborted",
        "suspended",
        "unsuspended",
        "held",
        "released",
        "node execute",
        "node terminated",
        "post script terminated",
        "globus submit",
        "globus submit failed",
        "globus resource up",
        "globus resource down",
        "remote error",
        "disconnected",
        "reconnected",
        "reconnect failed",
        "grid resource up",
        "grid resource down",
        "grid submit",
        "job ad information",
        "status unknown",
        "status known",
        "stage in",
        "stage out",
        "attribute update",
        "pre skip",
        "cluster submit",
        "cluster remove",
        "factory paused",
        "factory resumed",
        "none",
        "file transfer",
        "reserve space",
        "release space",
        "file complete",
        "file used",
        "file removed",
        "dataflow job skipped",
        "common files",
    ];
    match code {
        c if (c as usize) < NAMES.len() => NAMES[c as usize],
        100..=111 => "execute point",
        _ => "unknown",
    }
}

/// What one job's events say, for `stats`.
#[derive(Default, Debug, Clone)]
pub struct JobTimes {
    pub submit: Option<f64>,
    pub first_execute: Option<f64>,
    pub last_execute: Option<f64>,
    pub grid_submit: Option<f64>,
    pub terminate: Option<f64>,
    pub removed: bool,
    pub held: bool,
}

impl JobTimes {
    /// Execute − submit; for a grid job that never logged 001, the 027
    /// (a lower bound).
    pub fn queue_wait(&self) -> Option<f64> {
        Some(self.first_execute.or(self.grid_submit)? - self.submit?)
    }
    /// Terminate − the execute it ended.
    pub fn run_time(&self) -> Option<f64> {
        Some(self.terminate? - self.last_execute?)
    }
    /// Terminate − submit.
    pub fn turnaround(&self) -> Option<f64> {
        Some(self.terminate? - self.submit?)
    }
}

/// Folds events into per-job times. Times are naive seconds: differences
/// within one log are exact.
pub fn job_times(events: &[Event]) -> BTreeMap<(i64, i64), JobTimes> {
    let mut jobs: BTreeMap<(i64, i64), JobTimes> = BTreeMap::new();
    for ev in events {
        let t = ev.time.naive_seconds();
        let job = jobs.entry(ev.job()).or_default();
        match &ev.body {
            EventBody::Submit { .. } => {
                job.submit.get_or_insert(t);
            }
            EventBody::Execute { .. } => {
                job.first_execute.get_or_insert(t);
                // A run that ends is the last one that started before it.
                if job.terminate.is_none() {
                    job.last_execute = Some(t);
                }
            }
            EventBody::GridSubmit { .. } => {
                job.grid_submit.get_or_insert(t);
            }
            EventBody::Terminated { .. } => job.terminate = Some(t),
            EventBody::Aborted { .. } => job.removed = true,
            EventBody::Held { .. } => job.held = true,
            EventBody::Released { .. } => job.held = false,
            _ => {}
        }
    }
    jobs
}

/// mean, p50, p95, max of a sample (nearest-rank percentiles).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
}

pub fn summarize(values: &mut [f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let rank = |p: f64| values[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    Some(Summary {
        n,
        mean: values.iter().sum::<f64>() / n as f64,
        p50: rank(0.5),
        p95: rank(0.95),
        max: values[n - 1],
    })
}

/// `cosched log stats FILE... [--json]`.
pub fn stats(files: &[PathBuf], as_json: bool) -> CmdResult {
    let year = current_year();
    let mut counts: BTreeMap<u16, u64> = BTreeMap::new();
    let mut all_jobs: Vec<JobTimes> = Vec::new();
    let mut any_diag = false;
    let mut parsed = Vec::new();
    for file in files {
        parsed.push(read_log_bytes(file).map_err(read_error)?);
    }
    for (file, bytes) in files.iter().zip(parsed) {
        let (events, diags) = super::parse_bytes_with_year(&bytes, year);
        report(file, &diags);
        any_diag |= !diags.is_empty();
        for ev in &events {
            *counts.entry(ev.code).or_default() += 1;
        }
        all_jobs.extend(job_times(&events).into_values());
    }
    let collect = |f: fn(&JobTimes) -> Option<f64>| -> Option<Summary> {
        let mut v: Vec<f64> = all_jobs.iter().filter_map(f).collect();
        summarize(&mut v)
    };
    let wait = collect(JobTimes::queue_wait);
    let run = collect(JobTimes::run_time);
    let turnaround = collect(JobTimes::turnaround);
    let completed = all_jobs.iter().filter(|j| j.terminate.is_some()).count();
    let removed = all_jobs.iter().filter(|j| j.terminate.is_none() && j.removed).count();
    let held = all_jobs.iter().filter(|j| j.terminate.is_none() && !j.removed && j.held).count();
    let jobs = all_jobs.len();

    let mut out = String::new();
    if as_json {
        let summary_json = |s: &Option<Summary>| match s {
            Some(s) => json!({"n": s.n, "mean": s.mean, "p50": s.p50, "p95": s.p95, "max": s.max}),
            None => serde_json::Value::Null,
        };
        let events: Vec<_> =
            counts.iter().map(|(c, n)| json!({"type": c, "name": event_name(*c), "count": n})).collect();
        let doc = json!({
            "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "events": events,
            "jobs": {"total": jobs, "completed": completed, "removed": removed, "held": held,
                     "other": jobs - completed - removed - held},
            "queue_wait_s": summary_json(&wait),
            "run_time_s": summary_json(&run),
            "turnaround_s": summary_json(&turnaround),
        });
        out.push_str(&doc.to_string());
        out.push('\n');
    } else {
        let total: u64 = counts.values().sum();
        out.push_str(&format!("events: {total}\n"));
        for (c, n) in &counts {
            out.push_str(&format!("  {c:03} {:<24} {n:>8}\n", event_name(*c)));
        }
        out.push_str(&format!(
            "jobs: {jobs} (completed {completed}, removed {removed}, held {held}, other {})\n",
            jobs - completed - removed - held
        ));
        out.push_str(&format!(
            "{:<14} {:>7} {:>10} {:>10} {:>10} {:>10}\n",
            "seconds", "jobs", "mean", "p50", "p95", "max"
        ));
        for (name, s) in [("queue wait", wait), ("run time", run), ("turnaround", turnaround)] {
            match s {
                Some(s) => out.push_str(&format!(
                    "{name:<14} {:>7} {:>10.1} {:>10.1} {:>10.1} {:>10.1}\n",
                    s.n, s.mean, s.p50, s.p95, s.max
                )),
                None => out.push_str(&format!("{name:<14} {:>7} {:>10}\n", 0, "-")),
            }
        }
    }
    if let Err(e) = std::io::stdout().lock().write_all(out.as_bytes()) {
        return write_failed(e).map_or(Ok(Exit::Ok), Err);
    }
    Ok(if any_diag { Exit::Partial } else { Exit::Ok })
}

/// `cosched log follow FILE`: events as they are written, until Ctrl-C.
pub fn follow(file: &Path) -> CmdResult {
    match std::fs::metadata(file) {
        Ok(m) if m.is_dir() => return Err(read_error(ReadError::Directory(file.to_path_buf()))),
        Ok(_) => {
            let mut head = [0u8; 4096];
            let n = std::fs::File::open(file)
                .and_then(|f| std::os::unix::fs::FileExt::read_at(&f, &mut head, 0))
                .map_err(|e| read_error(ReadError::Io(file.to_path_buf(), e)))?;
            if let Some(at) = head[..n].iter().position(|&b| b == 0) {
                return Err(read_error(ReadError::Binary(file.to_path_buf(), at as u64)));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("{}: does not exist yet; waiting for it", file.display());
        }
        Err(e) => return Err(read_error(ReadError::Io(file.to_path_buf(), e))),
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::failed(format!("starting the runtime: {e}")))?;
    rt.block_on(async {
        let mut follower = super::Follower::with_legacy_year(file.to_path_buf(), 0, current_year());
        let mut any_diag = false;
        // Created once, so that a signal between two batches is not missed.
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| Failure::failed(format!("installing the SIGTERM handler: {e}")))?;
        loop {
            tokio::select! {
                biased;
                _ = &mut ctrl_c => break,
                _ = term.recv() => break,
                got = follower.next() => {
                    let events = got.map_err(|e| Failure::failed(format!("{}: {e}", file.display())))?;
                    let diags = follower.take_diagnostics();
                    report(file, &diags);
                    any_diag |= !diags.is_empty();
                    let mut out = std::io::stdout().lock();
                    let written = events.iter().try_for_each(|ev| writeln!(out, "{}", ev.to_json()))
                        .and_then(|_| out.flush());
                    if let Err(e) = written {
                        return write_failed(e).map_or(Ok(Exit::Ok), Err);
                    }
                }
            }
        }
        Ok(if any_diag { Exit::Partial } else { Exit::Ok })
    })
}
