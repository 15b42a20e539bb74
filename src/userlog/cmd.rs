//! `cosched log dump|stats|follow`: the user-log reader at the terminal.
//!
//! Input errors (missing file, directory, binary data) are one line naming
//! the file, exit 2. Malformed blocks do not stop a command: what parses is
//! printed, each diagnostic goes to stderr as `FILE:LINE: …` (`FILE: byte N: …` where
//! the line is unknown), exit 1.
//! This is the one place of the userlog module that reads the clock: legacy
//! `MM/DD` stamps get the current year, as HTCondor's reader gives them.

use super::stats::{LogStats, StatsReport};
use super::{Diagnostic, LogReader, ReadError};
use crate::stats::{JobFigures, Summary};
use crate::{CmdResult, Exit, Failure};
use serde_json::json;
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
        let _ = writeln!(err, "{}", d.located(file));
    }
}

/// Writing to a closed pipe (`| head`) ends the output quietly.
fn write_failed(e: std::io::Error) -> Option<Failure> {
    (e.kind() != std::io::ErrorKind::BrokenPipe).then(|| Failure::failed(format!("writing output: {e}")))
}

/// `cosched log dump FILE`: one JSON object per event, written as the file
/// is read (a chunk at a time: memory does not grow with the file).
pub fn dump(file: &Path) -> CmdResult {
    let mut reader = LogReader::open(file, current_year()).map_err(read_error)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut events = Vec::new();
    let mut any_diag = false;
    loop {
        let more = reader.read_events(&mut events).map_err(read_error)?;
        for ev in events.drain(..) {
            if let Err(e) = writeln!(out, "{}", ev.to_json()) {
                return write_failed(e).map_or(Ok(Exit::Ok), Err);
            }
        }
        let diags = reader.take_diagnostics();
        if !diags.is_empty() {
            // Events before a diagnostic are printed before it.
            if let Err(e) = out.flush() {
                return write_failed(e).map_or(Ok(Exit::Ok), Err);
            }
            report(file, &diags);
            any_diag = true;
        }
        if !more {
            break;
        }
    }
    if let Err(e) = out.flush() {
        return write_failed(e).map_or(Ok(Exit::Ok), Err);
    }
    Ok(if any_diag { Exit::Partial } else { Exit::Ok })
}

/// `cosched log stats FILE... [--json]`. Reads each log once, a chunk at a
/// time; holds 20 bytes or so per job (see [`super::stats`]).
pub fn stats(files: &[PathBuf], as_json: bool) -> CmdResult {
    let year = current_year();
    // Every file is checked before any is read: a typo in the last name
    // should not cost minutes of reading the first.
    let mut readers = Vec::with_capacity(files.len());
    for file in files {
        readers.push(LogReader::open(file, year).map_err(read_error)?.outline());
    }
    let mut fold = LogStats::new();
    let mut any_diag = false;
    let mut events = Vec::new();
    for (file, mut reader) in files.iter().zip(readers) {
        fold.start_log();
        loop {
            let more = reader.read_events(&mut events).map_err(read_error)?;
            for ev in events.drain(..) {
                fold.add(&ev);
            }
            let diags = reader.take_diagnostics();
            report(file, &diags);
            any_diag |= !diags.is_empty();
            if !more {
                break;
            }
        }
    }
    let StatsReport {
        events: counts,
        figures: JobFigures { jobs, completed, removed, held, queue_wait: wait, run_time: run, turnaround },
        backwards,
    } = fold.finish();
    for (log, (cluster, proc), why) in &backwards {
        eprintln!("{}: job {cluster}.{proc}: {why}; left out of the statistics", files[*log].display());
    }
    any_diag |= !backwards.is_empty();

    let mut out = String::new();
    if as_json {
        let summary_json = |s: &Option<Summary>| match s {
            Some(s) => json!({"n": s.n, "mean": s.mean, "p50": s.p50, "p95": s.p95, "max": s.max}),
            None => serde_json::Value::Null,
        };
        let events: Vec<_> = counts
            .iter()
            .map(|(c, n)| json!({"type": c, "name": super::event_name(*c), "count": n}))
            .collect();
        let doc = json!({
            "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "events": events,
            "jobs": {"total": jobs, "completed": completed, "removed": removed, "held": held,
                     "other": jobs - completed - removed - held},
            "queue_wait_s": summary_json(&wait),
            "run_time_s": summary_json(&run),
            "turnaround_s": summary_json(&turnaround),
            "left_out": backwards.iter().map(|(log, (cluster, proc), why)| {
                json!({"file": files[*log].display().to_string(), "job": format!("{cluster}.{proc}"), "why": why})
            }).collect::<Vec<_>>(),
        });
        out.push_str(&doc.to_string());
        out.push('\n');
    } else {
        let total: u64 = counts.iter().map(|(_, n)| n).sum();
        out.push_str(&format!("events: {total}\n"));
        for (c, n) in &counts {
            out.push_str(&format!("  {c:03} {:<24} {n:>8}\n", super::event_name(*c)));
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
