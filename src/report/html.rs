//! The report's files: one self-contained HTML page (inline SVG, inline CSS,
//! no scripts, no network), the numbers as JSON, and jobs/sites as CSV.
//! The HTML is also well-formed XML (self-closed void elements, only the five
//! XML entities) so that it can be checked and post-processed with XML tools.

use super::metrics::{Occupancy, SiteSummary, Summary, TOP_SITES};
use super::model::{JobRecord, Jobs, Part};
use super::svg::{self, esc, fmt_num, OTHERS_COLOUR};
use std::fmt::Write;

/// How each number is defined; shown on the page and stored in the JSON.
pub const DEFINITIONS: &[(&str, &str)] = &[
    ("turnaround", "(last) terminate (005) − first submit (000) of every job that terminated, successfully or not"),
    (
        "queue wait",
        "first execute (001) − first submit (000); for a grid job that never logged an execute, its grid submit (027): a lower bound",
    ),
    ("run time", "terminate (005) − the execute (001) that run ended"),
    ("AgTime", "the turnaround: queue wait + time running and queued again (thesis §4.3)"),
    (
        "job",
        "one HTCondor job (cluster.proc) of the logs: in a cosched run, one attempt of one of its jobs (a job sent again after a failure, a hold or being taken back while idle has an attempt at each site it went to)",
    ),
    (
        "site means",
        "a site's mean AgTime, queue wait and run time are over its jobs that succeeded there (terminate (005) with return value 0), each time as defined here; its failed, held and removed jobs are counted, not timed. The summary of a cosched run shows the same means per site",
    ),
    (
        "quantiles",
        "nearest rank: the p-quantile of n sorted values is the one of rank ⌈p·n⌉, always a value some job had; the same figures as cosched log stats",
    ),
    (
        "makespan",
        "from the run's start to its last job's end: the last terminate/abort (005/009) over all logs. The run's start is run time 0 in the report cosched writes at the end of a run (as in the run's summary; every time axis starts there too), the first submit (000) for logs alone. Not the elapsed time of the run's progress line, which runs on to the run's stop",
    ),
    (
        "efficiency",
        "NT·PTE / (makespan·NCU) · 100 (HTCaaS equation 2) with NT = terminated jobs, PTE = their mean run time, NCU = peak jobs running at once",
    ),
    (
        "throughput",
        "CPU-hours (wall time of running intervals) per elapsed hour, elapsed = the site's first submit to its last terminate/abort",
    ),
    ("goodput area", "sum of turnarounds: the area under the sorted-turnaround graph; degraded runs have a larger one"),
    ("site", "the GridResource of the job's 027 (or grid 001) event, else the log file's name"),
    (
        "cut short",
        "executions removed (009, not after a hold) while they ran, and their slot-time: last execute (001) to the removal; 0 on a healthy run. A Condor-C job removed at the remote schedd before the log heard of its start has no 001 there: the report cosched writes at the end of a run adds those the run counted (from the remote schedd's answer) and says how many; cosched log report, which has only the logs, cannot",
    ),
];

/// The summary's cut-short count, saying how many of them only the run saw.
fn cut_short_total(s: &Summary) -> String {
    match s.cut_short_unseen_in_logs {
        0 => cut_short(&s.counts),
        n => format!(
            "{}; {n} of them at a remote schedd before the log heard of their start (counted by the run)",
            cut_short(&s.counts)
        ),
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_string(), fmt_num)
}

fn hours_or_secs(v: Option<f64>) -> String {
    match v {
        Some(s) if s >= 3600.0 => format!("{} s ({} h)", fmt_num(s), fmt_num(s / 3600.0)),
        Some(s) if s >= 120.0 => format!("{} s ({} min)", fmt_num(s), fmt_num(s / 60.0)),
        Some(s) => format!("{} s", fmt_num(s)),
        None => "–".into(),
    }
}

/// A site's name for chart labels: a Condor-C/HTCondor-CE GridResource
/// (`condor SCHEDD POOL`) is shown as its schedd; other names as they are.
/// Tooltips and tables keep the full name.
pub fn chart_label(name: &str) -> String {
    let mut words = name.split_whitespace();
    match (words.next(), words.next()) {
        (Some("condor"), Some(schedd)) => format!("{schedd} (condor)"),
        _ => name.to_string(),
    }
}

/// The sites charted one by one, plus "others" when there are more.
fn charted_sites(s: &Summary) -> Vec<(&SiteSummary, String)> {
    let mut out: Vec<(&SiteSummary, String)> = s
        .sites
        .iter()
        .take(TOP_SITES)
        .enumerate()
        .map(|(i, site)| (site, svg::colour(i).to_string()))
        .collect();
    if let Some(o) = &s.others {
        out.push((o, OTHERS_COLOUR.to_string()));
    }
    out
}

fn occupancy_series(s: &Summary, running: bool) -> (Vec<f64>, Vec<svg::Series>) {
    let t = s.total_occupancy.t.clone();
    let mut occs: Vec<&Occupancy> = s.occupancy.iter().take(TOP_SITES).collect();
    if let Some(o) = &s.others_occupancy {
        occs.push(o);
    }
    let series = charted_sites(s)
        .into_iter()
        .zip(occs)
        .map(|((site, fill), occ)| {
            let values = t
                .iter()
                .map(|&x| {
                    let (q, r) = occ.at(x);
                    f64::from(if running { r } else { q })
                })
                .collect();
            (chart_label(&site.name), values, fill)
        })
        .collect();
    (t, series)
}

/// All charts, in page order.
pub fn charts(s: &Summary) -> Vec<(&'static str, String)> {
    let turnarounds = &s.sorted_turnarounds;
    let (t, running) = occupancy_series(s, true);
    let (_, queued) = occupancy_series(s, false);
    let sites = charted_sites(s);
    let unit = svg::time_unit(sites.iter().filter_map(|(site, _)| site.mean_agtime_s).fold(0.0, f64::max));
    let agtime: Vec<(String, Option<f64>, String)> = sites
        .iter()
        .map(|(site, fill)| {
            (chart_label(&site.name), site.mean_agtime_s.map(|a| a / unit.seconds), fill.clone())
        })
        .collect();
    let agtime_label = format!("mean AgTime ({})", unit.name);
    let throughput: Vec<(String, Option<f64>, String)> =
        sites.iter().map(|(site, fill)| (chart_label(&site.name), site.throughput, fill.clone())).collect();
    vec![
        (
            "turnaround-histogram",
            svg::histogram(
                &format!("Turnaround of {} terminated jobs", turnarounds.len()),
                "turnaround",
                turnarounds,
            ),
        ),
        ("goodput", svg::goodput("Goodput: turnaround of every job, sorted", turnarounds)),
        ("running", svg::stacked_steps("Jobs running, per site", "jobs running", &t, &running)),
        ("queued", svg::stacked_steps("Jobs queued (idle), per site", "jobs queued", &t, &queued)),
        (
            "agtime",
            svg::hbars(
                "Mean AgTime per site, of its succeeded jobs (queue wait + run time)",
                &agtime_label,
                &agtime,
            ),
        ),
        ("throughput", svg::hbars("Throughput per site", "CPU-hours per elapsed hour", &throughput)),
    ]
}

/// The whole page.
pub fn page(s: &Summary, logs: &[String], diagnostics: usize) -> String {
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>cosched report</title>\n<style>\
body{font-family:sans-serif;margin:2em auto;max-width:960px;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}\
th{background:#f3f3f3}td.l,th.l{text-align:left}figure{margin:1.5em 0}svg{max-width:100%;height:auto}\
dt{font-weight:bold}dd{margin:0 0 .4em 1.5em}.sites{font-size:90%}\
</style>\n</head>\n<body>\n<h1>cosched report</h1>\n",
    );
    let _ = write!(h, "<p>From {} user log(s): ", logs.len());
    for (i, l) in logs.iter().enumerate() {
        let _ = write!(h, "{}<code>{}</code>", if i > 0 { ", " } else { "" }, esc(l));
    }
    h.push('.');
    if diagnostics > 0 {
        let _ = write!(h, " {diagnostics} problem(s) in the logs: malformed blocks skipped, or jobs with times out of order left out.");
    }
    h.push_str(" Numbers: <a href=\"report.json\">report.json</a>, <a href=\"jobs.csv\">jobs.csv</a>, <a href=\"sites.csv\">sites.csv</a>.</p>\n");

    let c = &s.counts;
    h.push_str("<h2>Summary</h2>\n<table>\n");
    let rows: Vec<(&str, String)> = vec![
        ("jobs", c.jobs.to_string()),
        ("terminated (succeeded / failed)", format!("{} ({} / {})", c.terminated, c.succeeded, c.failed)),
        ("removed / held / unfinished", format!("{} / {} / {}", c.removed, c.held, c.unfinished)),
        ("executions cut short (slot-time lost)", cut_short_total(s)),
        ("sites", s.sites.len().to_string()),
        ("makespan", hours_or_secs(s.makespan_s)),
        ("efficiency (equation 2)", s.efficiency_pct.map_or("–".into(), |e| format!("{e:.1} %"))),
        ("NCU: peak jobs running at once", s.peak_running.to_string()),
        ("PTE: mean run time", hours_or_secs(s.mean_run_time_s)),
        ("turnaround mean / median / p90", stats3(s.turnaround.as_ref())),
        ("queue wait mean / median / p90", stats3(s.queue_wait.as_ref())),
        ("run time mean / median / p90", stats3(s.run_time.as_ref())),
        ("goodput area", format!("{} job-hours", fmt_num(s.goodput_area_job_hours))),
    ];
    for (k, v) in rows {
        let _ = writeln!(h, "<tr><th class=\"l\">{}</th><td>{}</td></tr>", esc(k), esc(&v));
    }
    h.push_str("</table>\n");

    for (id, chart) in charts(s) {
        let _ = writeln!(h, "<figure id=\"{id}\">{chart}</figure>");
    }
    if let Some(o) = &s.others {
        let _ = writeln!(
            h,
            "<p>Charts show the {TOP_SITES} sites with the most jobs; {} are drawn together in grey. The table lists every site.</p>",
            esc(&o.name)
        );
    }
    decisions_section(&mut h, s);

    h.push_str("<h2>Sites</h2>\n<table class=\"sites\">\n<caption>Means are of each site's succeeded jobs.</caption>\n<tr><th class=\"l\">site</th><th>jobs</th><th>succeeded</th><th>failed</th><th>removed</th><th>cut short (slot-time)</th><th>mean AgTime (s)</th><th>mean queue wait (s)</th><th>mean run time (s)</th><th>CPU-hours</th><th>elapsed hours</th><th>throughput (CPU-h/h)</th><th>peak running</th></tr>\n");
    for site in &s.sites {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&site.name),
            site.counts.jobs,
            site.counts.succeeded,
            site.counts.failed,
            site.counts.removed,
            esc(&cut_short(&site.counts)),
            opt(site.mean_agtime_s),
            opt(site.mean_queue_wait_s),
            opt(site.mean_run_time_s),
            fmt_num(site.cpu_hours),
            fmt_num(site.elapsed_hours),
            opt(site.throughput),
            site.peak_running
        );
    }
    h.push_str("</table>\n");
    if !s.kinds.is_empty() {
        h.push_str("<h2>Kinds of job</h2>\n<table class=\"sites\">\n<tr><th class=\"l\">site</th><th class=\"l\">kind</th><th>jobs</th><th>succeeded</th><th>mean run time (s)</th></tr>\n");
        for k in &s.kinds {
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&k.site),
                esc(&k.kind),
                k.jobs,
                k.succeeded,
                opt(k.mean_run_time_s)
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("<h2>Definitions</h2>\n<dl>\n");
    for (k, v) in DEFINITIONS {
        let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    h.push_str("</dl>\n<p>Times are read from the logs' time stamps as written (naive local time).</p>\n</body>\n</html>\n");
    h
}

/// Decision charts drawn at most; the rest are in `report.json`.
pub const MAX_DECISION_CHARTS: usize = 24;

/// Per site of a cosched run, what the scheduler decided over the jobs that
/// ran there: nothing for logs without decisions. With more sites than
/// [`MAX_DECISION_CHARTS`], those with a degraded verdict come first.
fn decisions_section(h: &mut String, s: &Summary) {
    if s.decisions.is_empty() {
        return;
    }
    h.push_str(
        "<h2 id=\"decisions\">What cosched decided, per site</h2>\n<p>Over each site's running jobs: the \
         <b>window</b> (how many jobs the scheduler let out there), the <b>capacity found</b> (dashed: the most \
         jobs seen running there at healthy speed), and the verdicts of its degradation tests (green: jobs ran \
         healthy; red: they ran slower, hover for how much and at what level). A site gets fewer jobs after a red \
         verdict: its window is cut to what it delivered.</p>\n",
    );
    let mut order: Vec<usize> = (0..s.decisions.len()).collect();
    if order.len() > MAX_DECISION_CHARTS {
        order.sort_by_key(|&i| (s.decisions[i].verdicts.iter().all(|v| v.healthy), i));
        order.truncate(MAX_DECISION_CHARTS);
        order.sort_unstable();
        let _ = writeln!(
            h,
            "<p>{MAX_DECISION_CHARTS} of {} sites are drawn (those with degraded verdicts first); report.json has them all.</p>",
            s.decisions.len()
        );
    }
    for (k, i) in order.into_iter().enumerate() {
        let d = &s.decisions[i];
        let windows: Vec<svg::WindowStep> = d.windows.iter().map(|w| (w.t, w.window, w.capacity)).collect();
        let marks: Vec<svg::Mark> = d
            .verdicts
            .iter()
            .map(|v| svg::Mark {
                t: v.t,
                level: v.level,
                healthy: v.healthy,
                tooltip: format!(
                    "{}{}",
                    v.kind.as_ref().map_or(String::new(), |k| format!("{k} jobs: ")),
                    match v.slowdown {
                        Some(x) if !v.healthy => {
                            format!(
                                "degraded at {} s: {} running, jobs {}× slower",
                                fmt_num(v.t),
                                fmt_num(v.level),
                                fmt_num(x)
                            )
                        }
                        _ if !v.healthy => {
                            format!("degraded at {} s: {} running", fmt_num(v.t), fmt_num(v.level))
                        }
                        _ => format!("healthy at {} s: {} running", fmt_num(v.t), fmt_num(v.level)),
                    }
                ),
            })
            .collect();
        let running: Vec<f64> = d.running.running.iter().map(|&r| f64::from(r)).collect();
        let chart = svg::decisions(
            &format!("{}: jobs running and what cosched decided", d.site),
            &d.running.t,
            &running,
            svg::colour(k),
            &windows,
            &marks,
        );
        let _ = writeln!(
            h,
            "<figure id=\"decisions-{k}\" class=\"decisions\" data-site=\"{}\">{chart}</figure>",
            esc(&d.site)
        );
    }
}

fn stats3(s: Option<&crate::stats::Summary>) -> String {
    s.map_or("–".into(), |s| format!("{} / {} / {} s", fmt_num(s.mean), fmt_num(s.p50), fmt_num(s.p90)))
}

/// A CSV field, quoted when needed (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv_num(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:.3}"))
}

/// One row per job; times in seconds since the report's origin. Written
/// row by row (a million jobs make a file of 100 MB: it is not built in
/// memory first).
pub fn write_jobs_csv(
    out: &mut impl std::io::Write,
    jobs: &dyn Jobs,
    logs: &[String],
    origin: f64,
) -> std::io::Result<()> {
    out.write_all(
        b"log,cluster,proc,site,outcome,detail,submitted_s,started_s,ended_s,queue_wait_s,run_time_s,turnaround_s\n",
    )?;
    let mut written = Ok(());
    jobs.visit(Part::All, &mut |j| {
        if written.is_ok() {
            written = write_job_row(out, j, logs, origin);
        }
    });
    written
}

fn write_job_row(
    out: &mut impl std::io::Write,
    j: &JobRecord,
    logs: &[String],
    origin: f64,
) -> std::io::Result<()> {
    let detail = match &j.end {
        super::model::JobEnd::Failed { detail } => detail.as_str(),
        super::model::JobEnd::Held { reason } | super::model::JobEnd::HeldRemoved { reason } => reason,
        _ => "",
    };
    writeln!(
        out,
        "{},{},{},{},{},{},{},{},{},{},{},{}",
        csv_field(logs.get(j.file).map_or("", String::as_str)),
        j.cluster,
        j.proc,
        csv_field(&j.site),
        j.end.label(),
        csv_field(detail),
        csv_num(Some(j.submitted - origin)),
        csv_num(j.started.map(|t| t - origin)),
        csv_num(j.ended.map(|t| t - origin)),
        csv_num(j.queue_wait()),
        csv_num(j.run_time()),
        csv_num(j.turnaround()),
    )
}

/// `N (slot-time)` of the executions cut short.
fn cut_short(c: &crate::report::metrics::Counts) -> String {
    format!("{} ({})", c.cut_short, hours_or_secs(Some(c.cut_short_seconds)))
}

/// One row per site.
pub fn sites_csv(s: &Summary) -> String {
    let mut out = String::from(
        "site,grid,jobs,terminated,succeeded,failed,removed,held,unfinished,mean_agtime_s,mean_queue_wait_s,mean_run_time_s,cpu_hours,elapsed_hours,throughput_cpu_h_per_h,peak_running,cut_short,cut_short_seconds\n",
    );
    for site in &s.sites {
        let c = &site.counts;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&site.name),
            site.grid,
            c.jobs,
            c.terminated,
            c.succeeded,
            c.failed,
            c.removed,
            c.held,
            c.unfinished,
            csv_num(site.mean_agtime_s),
            csv_num(site.mean_queue_wait_s),
            csv_num(site.mean_run_time_s),
            csv_num(Some(site.cpu_hours)),
            csv_num(Some(site.elapsed_hours)),
            csv_num(site.throughput),
            site.peak_running,
            c.cut_short,
            csv_num(Some(c.cut_short_seconds))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_sites_are_charted_as_top_sites_and_others() {
        use crate::report::model::{jobs_from_events, LogEvent};
        let mut events = Vec::new();
        for j in 0..500i64 {
            let mut grid = LogEvent::new(27, 1, j, 1.0);
            grid.grid_resource = Some(format!("condor ce{j}.example.org ce{j}.example.org:9619"));
            let mut end = LogEvent::new(5, 1, j, 100.0 + j as f64);
            end.return_value = Some(0);
            events.extend([LogEvent::new(0, 1, j, 0.0), grid, LogEvent::new(1, 1, j, 10.0), end]);
        }
        let jobs = jobs_from_events(&[("grid.log".into(), events)]);
        let s = crate::report::metrics::summarize(&jobs, None);
        assert_eq!(s.sites.len(), 500);
        let page = page(&s, &["grid.log".into()], 0);
        let others = format!("others ({} sites)", 500 - TOP_SITES);
        for (id, chart) in charts(&s) {
            if matches!(id, "running" | "queued" | "agtime" | "throughput") {
                assert!(chart.contains(&others), "{id} aggregates the rest");
                assert!(!chart.contains("ce499.example.org"), "{id} draws only the top sites");
            }
        }
        assert!(page.contains("ce499.example.org"), "the table lists every site");
        assert_eq!(chart_label("condor ce1.x ce1.x:9619"), "ce1.x (condor)");
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
