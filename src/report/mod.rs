//! Reports people look at: `cosched log report LOG… --out DIR`, the report at
//! the end of `cosched submit`, and the SVG chart of `cosched bench --chart`.
//!
//! A report works on any HTCondor user logs, also ones cosched did not write,
//! and shows what the thesis's evaluation (chapter 5) shows: the turnaround
//! histogram, the goodput graph (sorted turnarounds as an area), per-site jobs
//! queued and running over time, per-site mean AgTime and throughput, and
//! makespan and efficiency (HTCaaS equation 2). A cosched run's report also
//! shows what cosched decided ([`RunDecisions`]): per site, the scheduler's
//! window and the capacity it found over time, drawn over the site's running
//! jobs, with its degradation verdicts marked — why a site got fewer jobs.
//!
//! Constraints: the HTML is one self-contained file (inline SVG and CSS, no
//! scripts, nothing fetched), readable with 1 or 500 sites (charts show the
//! [`metrics::TOP_SITES`] busiest sites and "others"); every number on the page
//! is also in `report.json`, `jobs.csv` and `sites.csv`. The computations
//! ([`model`], [`metrics`]) are pure; only this module and [`spill`] (the job
//! records of a report on disk) read and write files.

pub mod html;
pub mod metrics;
pub mod model;
pub mod spill;
pub mod svg;

use crate::{CmdResult, Exit, Failure};
use std::path::{Path, PathBuf};

pub use metrics::Summary;
pub use model::{JobRecord, LogEvent, RunDecisions, SiteDecisions};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{0}")]
    Read(#[from] crate::userlog::ReadError),
    #[error("writing {0}: {1}")]
    Write(PathBuf, std::io::Error),
    #[error("the report's scratch file of job records in {0}: {1}")]
    Spill(PathBuf, std::io::Error),
}

/// What [`write_report`] wrote, and the headline numbers.
#[derive(Clone, Debug)]
pub struct ReportSummary {
    /// The HTML page (open this).
    pub html: PathBuf,
    pub json: PathBuf,
    pub jobs_csv: PathBuf,
    pub sites_csv: PathBuf,
    pub summary: Summary,
    /// Problems in the logs: malformed blocks skipped, jobs whose times go
    /// backwards left out of the figures (each was a warning).
    pub diagnostics: usize,
}

impl ReportSummary {
    /// A few lines for the terminal.
    pub fn text(&self) -> String {
        let s = &self.summary;
        let c = &s.counts;
        let secs = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{} s", svg::fmt_num(v)));
        let mut out = format!(
            "{} jobs at {} site(s): {} succeeded, {} failed, {} removed, {} held, {} unfinished\n",
            c.jobs,
            s.sites.len(),
            c.succeeded,
            c.failed,
            c.removed,
            c.held,
            c.unfinished
        );
        out += &format!(
            "makespan {}  efficiency {}  peak running {}\n",
            secs(s.makespan_s),
            s.efficiency_pct.map_or("–".into(), |e| format!("{e:.1} %")),
            s.peak_running
        );
        if let Some(t) = &s.turnaround {
            out += &format!(
                "turnaround mean {} s, median {} s, p90 {} s, max {} s\n",
                svg::fmt_num(t.mean),
                svg::fmt_num(t.p50),
                svg::fmt_num(t.p90),
                svg::fmt_num(t.max)
            );
        }
        if self.diagnostics > 0 {
            out += &format!(
                "{} problem(s) in the logs (malformed blocks skipped, or jobs with times out of order left out; each is a warning above)\n",
                self.diagnostics
            );
        }
        out += &format!("report: {}\n", self.html.display());
        out
    }
}

/// The year HTCondor's reader gives legacy `MM/DD` stamps: the current one.
#[allow(clippy::disallowed_methods)] // the command edge supplies the clock to the parser
pub fn current_year() -> i32 {
    use chrono::Datelike;
    chrono::Local::now().year()
}

/// Reads the logs into job records. Returns the records, the log names (file
/// names) and the number of diagnostics (see [`read_logs`]). Legacy `MM/DD`
/// stamps get `legacy_year`.
pub fn read_jobs(
    logs: &[PathBuf],
    legacy_year: i32,
) -> Result<(Vec<JobRecord>, Vec<String>, usize), ReportError> {
    let mut jobs = Vec::new();
    let (names, diagnostics) = read_logs(logs, legacy_year, |mut records| {
        jobs.append(&mut records);
        Ok(())
    })?;
    Ok((jobs, names, diagnostics))
}

/// Reads the logs one after the other and hands `take` each log's job
/// records. Returns the log names (file names) and the number of
/// diagnostics: malformed blocks, and jobs with a time that came out
/// negative (left out of the figures, [`crate::stats::JobTimes::backwards`]),
/// each also a warning naming the file and the job.
///
/// Each log is read once, a chunk at a time, and folded into one record per
/// job as it is read: memory is one log's records, never O(file) or
/// O(events). A log whose jobs have events out of time order is read a
/// second time for those jobs' events only.
pub fn read_logs(
    logs: &[PathBuf],
    legacy_year: i32,
    mut take: impl FnMut(Vec<JobRecord>) -> Result<(), ReportError>,
) -> Result<(Vec<String>, usize), ReportError> {
    let mut readers = Vec::with_capacity(logs.len());
    for path in logs {
        readers.push(crate::userlog::LogReader::open(path, legacy_year)?.outline());
    }
    let mut names = Vec::with_capacity(logs.len());
    let mut diagnostics = 0;
    let mut events = Vec::new();
    for (index, (path, mut reader)) in logs.iter().zip(readers).enumerate() {
        let name = log_name(path);
        let mut log = model::LogJobs::new(index, &name);
        loop {
            let more = reader.read_events(&mut events)?;
            for ev in events.drain(..) {
                log.add(&model::from_userlog(&ev));
            }
            let diags = reader.take_diagnostics();
            for d in &diags {
                tracing::warn!("{}", d.located(path));
            }
            diagnostics += diags.len();
            if !more {
                break;
            }
        }
        if !log.out_of_order().is_empty() {
            reread_out_of_order(path, legacy_year, reader.bytes_read(), &mut log)?;
        }
        let records = log.finish();
        for job in &records {
            if let Some(why) = job.times.describe_backwards() {
                tracing::warn!("{}: job {}: {why}; left out of the figures", path.display(), job.id());
                diagnostics += 1;
            }
        }
        take(records)?;
        names.push(name);
    }
    Ok((names, diagnostics))
}

/// The second pass over a log for the jobs whose events were out of time
/// order: their events only, up to where the first pass stopped.
fn reread_out_of_order(
    path: &Path,
    legacy_year: i32,
    length: u64,
    log: &mut model::LogJobs,
) -> Result<(), ReportError> {
    let mut reader = crate::userlog::LogReader::open(path, legacy_year)?.outline().until(length);
    let mut events = Vec::new();
    let mut theirs = Vec::new();
    loop {
        let more = reader.read_events(&mut events)?;
        for ev in events.drain(..) {
            if log.out_of_order().contains(&(ev.cluster, ev.proc, ev.subproc)) {
                theirs.push(model::from_userlog(&ev));
            }
        }
        reader.take_diagnostics();
        if !more {
            break;
        }
    }
    if reader.bytes_read() < length {
        // Not a file that can be read twice (a pipe): keep the jobs as folded.
        tracing::warn!(
            "{}: {} job(s) have events out of time order and the log cannot be read again; their times follow the log's order",
            path.display(),
            log.out_of_order().len()
        );
        return Ok(());
    }
    log.rebuild(&theirs);
    Ok(())
}

/// A log's name for site labels and tables: its file name.
fn log_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Reads `logs`, writes `report.html`, `report.json`, `jobs.csv` and
/// `sites.csv` into `out` (created if missing). Called by `cosched log report`.
pub fn write_report(logs: &[PathBuf], out: &Path) -> Result<ReportSummary, ReportError> {
    write_run_report(logs, &RunDecisions::default(), out)
}

/// [`write_report`] for a cosched run: also draws what its scheduler decided
/// about each site over that site's running jobs. Called at the end of
/// `cosched submit` and of daemon runs.
pub fn write_run_report(
    logs: &[PathBuf],
    decisions: &RunDecisions,
    out: &Path,
) -> Result<ReportSummary, ReportError> {
    let spilled = |e| ReportError::Spill(out.to_path_buf(), e);
    let start = || -> Result<spill::Spill, ReportError> {
        std::fs::create_dir_all(out).map_err(|e| ReportError::Write(out.to_path_buf(), e))?;
        spill::Spill::create(out).map_err(spilled)
    };
    // Started with the first log's records: read_logs has opened every log
    // by then, so a log that is not there leaves no directory behind.
    let mut jobs = None;
    // A run writes one log per site: its jobs are that site's, named as the
    // run names it, whatever their grid_resource (two sites may share one CE).
    let site_of_log: std::collections::BTreeMap<usize, std::sync::Arc<str>> =
        decisions.sites.iter().map(|s| (s.log, std::sync::Arc::from(s.site.as_str()))).collect();
    let (names, diagnostics) = read_logs(logs, current_year(), |mut records| {
        if jobs.is_none() {
            jobs = Some(start()?);
        }
        for job in &mut records {
            if let Some(site) = site_of_log.get(&job.file) {
                job.site = site.clone();
            }
        }
        if let Some(spill) = &mut jobs {
            records.iter().try_for_each(|j| spill.push(j)).map_err(spilled)?;
        }
        Ok(())
    })?;
    let mut jobs = match jobs {
        Some(spill) => spill,
        None => start()?,
    };
    jobs.finish().map_err(spilled)?;
    let mut summary = metrics::summarize(&jobs, decisions.start());
    metrics::add_cut_short_unseen_in_logs(&jobs, &mut summary, decisions);
    summary.decisions = metrics::decision_series(&jobs, &summary, decisions);
    summary.kinds = metrics::kind_rows(&jobs, decisions);
    if let Some(e) = jobs.take_error() {
        return Err(spilled(e));
    }
    let write = |name: &str, text: &str| -> Result<PathBuf, ReportError> {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| ReportError::Write(path.clone(), e))?;
        Ok(path)
    };
    let json = serde_json::json!({
        "logs": logs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "diagnostics": diagnostics,
        "definitions": html::DEFINITIONS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
        "summary": &summary,
    });
    let json_text = serde_json::to_string_pretty(&json).unwrap_or_default() + "\n";
    Ok(ReportSummary {
        html: write("report.html", &html::page(&summary, &names, diagnostics))?,
        json: write("report.json", &json_text)?,
        jobs_csv: {
            let path = out.join("jobs.csv");
            let failed = |e| ReportError::Write(path.clone(), e);
            let mut file = std::io::BufWriter::new(std::fs::File::create(&path).map_err(failed)?);
            html::write_jobs_csv(&mut file, &jobs, &names, summary.origin).map_err(failed)?;
            file.into_inner().map_err(|e| failed(e.into_error()))?;
            if let Some(e) = jobs.take_error() {
                return Err(spilled(e));
            }
            path
        },
        sites_csv: write("sites.csv", &html::sites_csv(&summary))?,
        summary,
        diagnostics,
    })
}

/// `cosched log report LOG… --out DIR`.
pub fn command(logs: &[PathBuf], out: &Path) -> CmdResult {
    let report = write_report(logs, out).map_err(|e| match e {
        ReportError::Read(_) => Failure::usage(format!("{e}; check the path of the log")),
        ReportError::Write(..) | ReportError::Spill(..) => {
            Failure::failed(format!("{e}; check that --out is a writable directory with room"))
        }
    })?;
    print!("{}", report.text());
    if report.summary.counts.jobs == 0 {
        return Err(Failure::usage(format!(
            "no job events found in {} log(s); are these HTCondor user logs?",
            logs.len()
        )));
    }
    Ok(if report.diagnostics > 0 { Exit::Partial } else { Exit::Ok })
}

/// One policy's result on one scenario, for [`bench_chart`].
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRow {
    pub scenario: String,
    pub policy: String,
    /// Makespan in seconds (e.g. the median over seeds); `None` if the run hung.
    pub makespan_s: Option<f64>,
}

/// The SVG chart of `cosched bench --chart FILE`: per scenario, each policy's
/// makespan relative to the best policy in that scenario (1 = best; lower is
/// better), so that scenarios of very different length share one axis.
/// Scenarios and policies appear in the order of first appearance in `rows`;
/// a dashed line marks 1 (the best), and runs that hung are labelled "hang".
pub fn bench_chart(rows: &[BenchRow]) -> String {
    let mut scenarios: Vec<String> = Vec::new();
    let mut policies: Vec<String> = Vec::new();
    for r in rows {
        if !scenarios.contains(&r.scenario) {
            scenarios.push(r.scenario.clone());
        }
        if !policies.contains(&r.policy) {
            policies.push(r.policy.clone());
        }
    }
    let values: Vec<Vec<Option<f64>>> = scenarios
        .iter()
        .map(|sc| {
            let of = |p: &String| {
                rows.iter().find(|r| &r.scenario == sc && &r.policy == p).and_then(|r| r.makespan_s)
            };
            let best = policies.iter().filter_map(of).fold(f64::INFINITY, f64::min);
            policies.iter().map(|p| of(p).filter(|_| best > 0.0).map(|m| m / best)).collect()
        })
        .collect();
    svg::grouped_bars(
        "Makespan relative to the best policy per scenario (lower is better)",
        "makespan / best makespan",
        &scenarios,
        &policies,
        &values,
        "hang",
        Some(1.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_chart_normalises_per_scenario_and_marks_hangs() {
        let rows = vec![
            BenchRow { scenario: "S1".into(), policy: "bulk".into(), makespan_s: Some(200.0) },
            BenchRow { scenario: "S1".into(), policy: "oracle".into(), makespan_s: Some(100.0) },
            BenchRow { scenario: "S6".into(), policy: "bulk".into(), makespan_s: None },
            BenchRow { scenario: "S6".into(), policy: "oracle".into(), makespan_s: Some(50.0) },
        ];
        let svg = bench_chart(&rows);
        assert!(svg.contains("S1: bulk") || svg.contains("S1 bulk: 2.00"), "{svg}");
        assert!(svg.contains("S6 oracle: 1.00"));
        assert!(svg.contains(">hang<"));
        assert!(svg.contains(">oracle<"), "legend names the policies");
    }
}
