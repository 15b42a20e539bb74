//! Integration tests: `cosched log report` (numbers checked against values
//! computed here from the raw log text, and well-formed HTML/SVG) and the CLI
//! polish (`--help` examples, completions, man page, version).

use crate::util::{self, cosched, root, shared, tempdir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// One event header, parsed with plain string operations: (code, job, seconds).
/// Legacy `MM/DD` stamps get a fixed year: only differences within a log matter here.
fn header(line: &str) -> Option<(u32, (i64, i64), f64)> {
    let mut parts = line.split_whitespace();
    let code: u32 = parts.next()?.parse().ok()?;
    let id = parts.next()?.strip_prefix('(')?.strip_suffix(')')?;
    let mut id = id.split('.');
    let job = (id.next()?.parse().ok()?, id.next()?.parse().ok()?);
    let date = parts.next()?;
    let time = parts.next()?.trim_end_matches('Z');
    let (y, m, d) = if date.contains('-') {
        let v: Vec<i64> = date.split('-').map(|s| s.parse().unwrap()).collect();
        (v[0], v[1], v[2])
    } else {
        let v: Vec<i64> = date.split('/').map(|s| s.parse().unwrap()).collect();
        (2026, v[0], v[1])
    };
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<f64> = hms.split(':').map(|s| s.parse().unwrap()).collect();
    let frac: f64 = format!("0.{frac}").parse().unwrap();
    let secs = days_from_civil(y, m, d) as f64 * 86400.0 + t[0] * 3600.0 + t[1] * 60.0 + t[2] + frac;
    Some((code, job, secs))
}

/// Per job of one log: its event times by code (first of each).
fn job_times(log: &Path) -> BTreeMap<(i64, i64), BTreeMap<u32, f64>> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut jobs: BTreeMap<(i64, i64), BTreeMap<u32, f64>> = BTreeMap::new();
    let mut at_header = true;
    for line in text.lines() {
        if at_header {
            if let Some((code, job, t)) = header(line) {
                jobs.entry(job).or_default().entry(code).or_insert(t);
            }
            at_header = false;
        }
        if line.trim_end() == "..." {
            at_header = true;
        }
    }
    jobs
}

fn run_report(logs: &[PathBuf], out: &Path) -> serde_json::Value {
    let mut args: Vec<String> = vec!["log".into(), "report".into()];
    args.extend(logs.iter().map(|p| p.display().to_string()));
    args.extend(["--out".into(), out.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = cosched(&root(), &args);
    assert!(
        o.status.success(),
        "cosched {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("turnaround mean"), "terminal summary: {stdout}");
    let json = std::fs::read_to_string(out.join("report.json")).expect("report.json written");
    serde_json::from_str(&json).expect("report.json is JSON")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
fn report_numbers_match_the_logs() {
    let logs = util::shared_logs();
    let dir = tempdir();
    let json = run_report(&logs, dir.path());
    let s = &json["summary"];

    let (mut turnarounds, mut jobs) = (Vec::new(), 0usize);
    for log in &logs {
        for times in job_times(log).values() {
            jobs += 1;
            if let (Some(submit), Some(end)) = (times.get(&0), times.get(&5)) {
                turnarounds.push(end - submit);
            }
        }
    }
    let mean = turnarounds.iter().sum::<f64>() / turnarounds.len() as f64;
    assert_eq!(s["counts"]["jobs"].as_u64(), Some(jobs as u64), "{s}");
    assert_eq!(s["counts"]["terminated"].as_u64(), Some(turnarounds.len() as u64));
    let got = s["turnaround"]["mean"].as_f64().expect("mean turnaround");
    assert!(close(got, mean), "mean turnaround: report {got}, logs {mean}");
    let area = s["goodput_area_job_hours"].as_f64().unwrap();
    assert!(close(area, turnarounds.iter().sum::<f64>() / 3600.0), "goodput area {area}");
    // grid-condorc.log's jobs are at their GridResource, the rest at their log.
    let sites: Vec<&str> =
        s["sites"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert!(sites.contains(&"condor personal@vm 127.0.0.1:9618"), "{sites:?}");
    assert!(sites.contains(&"many-jobs.log"), "{sites:?}");
    assert_eq!(sites[0], "many-jobs.log", "most jobs first");
}

#[test]
fn makespan_and_efficiency_follow_equation_2() {
    let log = shared().join("fixtures/userlogs/many-jobs.log");
    let dir = tempdir();
    let json = run_report(std::slice::from_ref(&log), dir.path());
    let s = &json["summary"];
    let jobs = job_times(&log);
    let first_submit = jobs.values().filter_map(|t| t.get(&0)).fold(f64::INFINITY, |a, &b| a.min(b));
    let last_end = jobs.values().filter_map(|t| t.get(&5)).fold(0.0f64, |a, &b| a.max(b));
    let makespan = last_end - first_submit;
    let runs: Vec<f64> = jobs.values().filter_map(|t| Some(t.get(&5)? - t.get(&1)?)).collect();
    let pte = runs.iter().sum::<f64>() / runs.len() as f64;
    // Peak concurrency: sweep over starts (+1) and ends (−1), equal times together.
    let mut deltas: BTreeMap<i64, i64> = BTreeMap::new();
    for t in jobs.values() {
        if let (Some(a), Some(b)) = (t.get(&1), t.get(&5)) {
            *deltas.entry((a * 1000.0) as i64).or_default() += 1;
            *deltas.entry((b * 1000.0) as i64).or_default() -= 1;
        }
    }
    let (mut running, mut ncu) = (0i64, 0i64);
    for d in deltas.values() {
        running += d;
        ncu = ncu.max(running);
    }
    let efficiency = runs.len() as f64 * pte / (makespan * ncu as f64) * 100.0;
    assert!(close(s["makespan_s"].as_f64().unwrap(), makespan), "makespan {} vs {makespan}", s["makespan_s"]);
    assert_eq!(s["peak_running"].as_i64(), Some(ncu));
    let got = s["efficiency_pct"].as_f64().unwrap();
    assert!(close(got, efficiency), "efficiency {got} vs {efficiency}");
    assert!(got > 0.0 && got <= 100.0, "efficiency {got}");
    // The per-site throughput is CPU-hours over elapsed hours of the one site.
    let site = &s["sites"][0];
    let cpu_h = runs.iter().sum::<f64>() / 3600.0;
    assert!(close(site["cpu_hours"].as_f64().unwrap(), cpu_h), "cpu hours {}", site["cpu_hours"]);
    assert!(close(site["throughput"].as_f64().unwrap(), cpu_h / (makespan / 3600.0)));
}

#[test]
fn report_files_are_well_formed_and_self_contained() {
    let dir = tempdir();
    run_report(&util::shared_logs(), dir.path());
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    if let Err(e) = xml::check(&html) {
        panic!("report.html is not well-formed: {e}");
    }
    let svgs = xml::elements(&html, "svg");
    assert_eq!(svgs.len(), 6, "six charts");
    for svg in &svgs {
        if let Err(e) = xml::check(svg) {
            panic!("an SVG is not well-formed: {e}\n{svg}");
        }
        assert!(svg.contains("<title>"), "every chart has a title");
    }
    for needle in ["Turnaround of", "Goodput", "Jobs running", "Jobs queued", "Mean AgTime", "Throughput"] {
        assert!(html.contains(needle), "chart {needle}");
    }
    for forbidden in ["<script", "http://", "https://", "<link"] {
        let stripped = html.replace("http://www.w3.org/2000/svg", "");
        assert!(!stripped.contains(forbidden), "report.html must not need the network or JS: {forbidden}");
    }
    let jobs_csv = std::fs::read_to_string(dir.path().join("jobs.csv")).unwrap();
    let n_jobs: usize = util::shared_logs().iter().map(|l| job_times(l).len()).sum();
    assert_eq!(jobs_csv.lines().count(), n_jobs + 1, "a header and one row per job");
    let sites_csv = std::fs::read_to_string(dir.path().join("sites.csv")).unwrap();
    assert!(sites_csv.starts_with("site,grid,jobs,"));
}

#[test]
fn report_of_a_missing_log_is_a_usage_error() {
    let dir = tempdir();
    let out = dir.path().join("r");
    let o = cosched(dir.path(), &["log", "report", "no-such.log", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such.log"));
}

/// A tiny XML well-formedness checker: balanced tags, quoted attributes,
/// known entities, no stray `<` or `&`.
pub mod xml {
    pub fn check(doc: &str) -> Result<(), String> {
        let b = doc.as_bytes();
        let mut stack: Vec<&str> = Vec::new();
        let mut i = 0;
        let mut roots = 0;
        while i < b.len() {
            match b[i] {
                b'<' => {
                    let rest = &doc[i..];
                    if rest.starts_with("<!--") {
                        i += rest.find("-->").ok_or("unclosed comment")? + 3;
                    } else if rest.starts_with("<!") || rest.starts_with("<?") {
                        if !stack.is_empty() {
                            return Err(format!("declaration inside an element at byte {i}"));
                        }
                        i += rest.find('>').ok_or("unclosed declaration")? + 1;
                    } else if let Some(close) = rest.strip_prefix("</") {
                        let end = close.find('>').ok_or("unclosed end tag")?;
                        let name = close[..end].trim();
                        match stack.pop() {
                            Some(open) if open == name => {}
                            other => return Err(format!("</{name}> at byte {i} closes {other:?}")),
                        }
                        i += end + 3;
                    } else {
                        let (name, len, self_closing) =
                            start_tag(rest).map_err(|e| format!("byte {i}: {e}"))?;
                        if stack.is_empty() {
                            roots += 1;
                        }
                        if !self_closing {
                            stack.push(name);
                        }
                        i += len;
                    }
                }
                b'&' => {
                    let rest = &doc[i..];
                    let end = rest.find(';').ok_or(format!("bare & at byte {i}"))?;
                    let ent = &rest[1..end];
                    let ok = matches!(ent, "amp" | "lt" | "gt" | "quot" | "apos")
                        || ent.strip_prefix('#').is_some_and(|n| {
                            n.parse::<u32>().is_ok()
                                || n.strip_prefix('x').is_some_and(|h| u32::from_str_radix(h, 16).is_ok())
                        });
                    if !ok {
                        return Err(format!("unknown entity &{ent}; at byte {i}"));
                    }
                    i += end + 1;
                }
                b'>' if !stack.is_empty() => i += 1,
                _ => i += 1,
            }
        }
        if let Some(open) = stack.last() {
            return Err(format!("<{open}> never closed"));
        }
        if roots != 1 {
            return Err(format!("{roots} root elements"));
        }
        Ok(())
    }

    /// Parses `<name attr="v" …>` or `…/>`: (name, length, self-closing).
    fn start_tag(s: &str) -> Result<(&str, usize, bool), String> {
        let b = s.as_bytes();
        let mut i = 1;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'-' | b'_' | b':' | b'.')) {
            i += 1;
        }
        let name = &s[1..i];
        if name.is_empty() {
            return Err("stray < (not a tag)".into());
        }
        let mut seen: Vec<&str> = Vec::new();
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            match b.get(i) {
                Some(b'>') => return Ok((name, i + 1, false)),
                Some(b'/') if b.get(i + 1) == Some(&b'>') => return Ok((name, i + 2, true)),
                Some(_) => {
                    let start = i;
                    while i < b.len() && !matches!(b[i], b'=' | b'>' | b'/') && !b[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    let attr = &s[start..i];
                    if seen.contains(&attr) {
                        return Err(format!("<{name}> repeats attribute {attr}"));
                    }
                    seen.push(attr);
                    if b.get(i) != Some(&b'=') {
                        return Err(format!("<{name}> attribute {attr} has no value"));
                    }
                    i += 1;
                    let q = *b.get(i).ok_or("tag cut short")?;
                    if q != b'"' && q != b'\'' {
                        return Err(format!("<{name}> attribute {attr} is not quoted"));
                    }
                    let end = s[i + 1..].find(q as char).ok_or("unclosed attribute value")?;
                    if s[i + 1..i + 1 + end].contains('<') {
                        return Err(format!("< inside attribute {attr}"));
                    }
                    i += end + 2;
                }
                None => return Err(format!("<{name}> cut short")),
            }
        }
    }

    /// The text of every `<name …>…</name>` element (not nested in itself).
    pub fn elements<'a>(doc: &'a str, name: &str) -> Vec<&'a str> {
        let (open, close) = (format!("<{name} "), format!("</{name}>"));
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(a) = doc[from..].find(&open) {
            let a = from + a;
            let Some(b) = doc[a..].find(&close) else { break };
            out.push(&doc[a..a + b + close.len()]);
            from = a + b + close.len();
        }
        out
    }

    #[test]
    fn the_checker_rejects_broken_documents() {
        assert!(check("<a><b x=\"1\"/>t &amp; u</a>").is_ok());
        assert!(check("<a><b></a>").is_err());
        assert!(check("<a x=1></a>").is_err());
        assert!(check("<a>&nbsp;</a>").is_err());
        assert!(check("<a>1 < 2</a>").is_err());
        assert!(check("<a></a><b></b>").is_err());
    }
}

/// `--help` examples, completions, man page, version.
mod cli {
    use crate::util::{cosched, root};
    use clap::CommandFactory;

    /// Every command and subcommand, with its path.
    fn all_commands(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        // clap's generated `help` subcommands explain the others; they need no example.
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let p = format!("{path} {}", sub.get_name());
            if sub.has_subcommands() {
                all_commands(sub, p, out);
            } else {
                out.push((p, sub.clone()));
            }
        }
    }

    #[test]
    fn every_command_help_has_an_example() {
        let mut cmd = cosched::cli::Cli::command();
        cmd.build();
        let mut commands = Vec::new();
        all_commands(&cmd, "cosched".into(), &mut commands);
        assert!(commands.len() >= 10, "{} commands", commands.len());
        let mut missing = Vec::new();
        for (path, mut sub) in commands {
            let help = sub.render_long_help().to_string();
            let example = help.split_once("Example").map(|(_, ex)| ex);
            if !example.is_some_and(|ex| ex.contains(&path)) {
                missing.push(path);
            }
        }
        assert!(missing.is_empty(), "--help without an example invoking the command: {missing:?}");
    }

    #[test]
    fn completions_man_and_version() {
        let o = cosched(&root(), &["completions", "bash"]);
        assert!(o.status.success());
        let bash = String::from_utf8_lossy(&o.stdout);
        assert!(bash.contains("_cosched()") && bash.contains("complete "), "bash completion: {bash:.200}");
        for sub in ["submit", "replay", "report"] {
            assert!(bash.contains(sub), "completion knows {sub}");
        }

        let o = cosched(&root(), &["man"]);
        assert!(o.status.success());
        let man = String::from_utf8_lossy(&o.stdout);
        assert!(man.starts_with(".ie") || man.contains(".TH"), "roff: {man:.200}");
        assert!(man.contains(".TH cosched") && man.contains("SUBCOMMANDS"), "{man:.400}");

        let o = cosched(&root(), &["--version"]);
        assert!(o.status.success());
        let v = String::from_utf8_lossy(&o.stdout);
        let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
        let version = manifest
            .lines()
            .find_map(|l| l.strip_prefix("version = \""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("package version in Cargo.toml");
        assert!(v.starts_with(&format!("cosched {version} (")), "--version: {v}");
    }
}

/// The `.log` files of `dir`, sorted.
fn logs_in(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs
}

/// `cosched log stats --json` and `cosched log report`'s `report.json` of
/// one log, whatever their exit codes (some fixtures are torn or hold no job).
fn stats_and_report(log: &Path, out: &Path) -> (serde_json::Value, serde_json::Value) {
    let log = log.to_str().unwrap();
    let stats = cosched(&root(), &["log", "stats", "--json", log]);
    let stats = serde_json::from_slice(&stats.stdout).unwrap_or_else(|e| {
        panic!("{log}: log stats --json: {e}: {}", String::from_utf8_lossy(&stats.stderr))
    });
    let report = cosched(&root(), &["log", "report", log, "--out", out.to_str().unwrap()]);
    let json = std::fs::read_to_string(out.join("report.json")).unwrap_or_else(|e| {
        panic!("{log}: no report.json ({e}): {}", String::from_utf8_lossy(&report.stderr))
    });
    (stats, serde_json::from_str(&json).expect("report.json is JSON"))
}

#[test]
fn log_stats_and_the_report_give_the_same_figures_for_every_fixture_log() {
    let mut logs = logs_in(&shared().join("fixtures/userlogs"));
    assert!(logs.len() >= 5, "the shared fixtures are there");
    logs.extend(logs_in(&root().join("fixtures/userlogs")));
    let mut compared = 0;
    for log in &logs {
        let dir = tempdir();
        let (stats, report) = stats_and_report(log, dir.path());
        let (jobs, counts) = (&stats["jobs"], &report["summary"]["counts"]);
        let name = log.display();
        for (ours, theirs) in [
            ("total", "jobs"),
            ("completed", "terminated"),
            ("removed", "removed"),
            ("held", "held"),
            ("other", "unfinished"),
        ] {
            assert_eq!(jobs[ours], counts[theirs], "{name}: jobs {ours} (log stats) vs {theirs} (report)");
        }
        for (ours, theirs) in
            [("queue_wait_s", "queue_wait"), ("run_time_s", "run_time"), ("turnaround_s", "turnaround")]
        {
            let (a, b) = (&stats[ours], &report["summary"][theirs]);
            assert_eq!(a.is_null(), b.is_null(), "{name}: {ours} {a} vs {theirs} {b}");
            if a.is_null() {
                continue;
            }
            for figure in ["n", "mean", "p50", "p95", "max"] {
                assert_eq!(a[figure], b[figure], "{name}: {theirs} {figure}: log stats {a}, report {b}");
                compared += 1;
            }
        }
    }
    assert!(compared >= 5 * 3 * 5, "figures of most logs compared: {compared}");
}

#[test]
fn the_median_queue_wait_of_many_jobs_is_the_nearest_rank_one() {
    // Derived from the log text: the 300 jobs' first 001 − 000, sorted; the
    // median of nearest rank is the value of rank ⌈0.5·300⌉ = 150, p95 of
    // rank 285. An interpolated median would be the mean of ranks 150 and 151.
    let log = shared().join("fixtures/userlogs/many-jobs.log");
    let mut waits: Vec<f64> =
        job_times(&log).values().filter_map(|t| Some(t.get(&1)? - t.get(&0)?)).collect();
    waits.sort_by(f64::total_cmp);
    assert_eq!(waits.len(), 300);
    assert_ne!(waits[149], waits[150], "ranks 150 and 151 differ, so the two definitions do");
    let dir = tempdir();
    let (stats, report) = stats_and_report(&log, dir.path());
    for (what, s) in [("log stats", &stats["queue_wait_s"]), ("report", &report["summary"]["queue_wait"])] {
        assert_eq!(s["p50"].as_f64(), Some(waits[149]), "{what}: {s}");
        assert_eq!(s["p95"].as_f64(), Some(waits[284]), "{what}: {s}");
    }
}

/// Report #2: a job whose events go backwards gave negative times in
/// jobs.csv and the figures; it is left out of them and counted as a
/// problem of the log.
#[test]
fn a_job_whose_times_go_backwards_is_left_out_of_the_report() {
    let tmp = crate::util::tempdir();
    let log = tmp.path().join("out_of_order.log");
    std::fs::write(
        &log,
        "005 (019.000.000) 2026-11-21 04:00:00 Job terminated.\n\t(1) Normal termination (return value 0)\n...\n\
         001 (019.000.000) 2026-11-21 05:00:00 Job executing on host: x\n...\n\
         000 (019.000.000) 2026-11-21 06:00:00 Job submitted from host: <h>\n...\n",
    )
    .unwrap();
    let (jobs, _, problems) = cosched::report::read_jobs(std::slice::from_ref(&log), 2026).unwrap();
    assert_eq!(problems, 1);
    assert_eq!((jobs[0].queue_wait(), jobs[0].turnaround()), (None, None));
    let out = tmp.path().join("rep");
    let summary = cosched::report::write_report(&[log], &out).unwrap();
    assert_eq!(summary.diagnostics, 1);
    assert_eq!(summary.summary.makespan_s, None);
    let csv = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let row = csv.lines().nth(1).unwrap();
    assert!(row.ends_with(",,,"), "no queue wait, run time or turnaround: {csv}");
}

/// A tester's finding: for one `--simulate` run the
/// `--json` summary and the run's report gave two makespans (the summary
/// from the run's start, the report from its first submission), and two
/// sets of per-site means (the summary over the successful attempts, timed
/// from cosched's condor_submit to its first start; the report over every
/// attempt, failed, held and withdrawn ones too, a withdrawn grid job's
/// grid submit (027) standing for a start). Now both take them from
/// `cosched::stats`: makespan from the run's start to its last job's end,
/// and per site the means of the attempts that succeeded there.
///
/// A run where attempts are not jobs: one site fails a third of its
/// attempts (each sent again), the other makes jobs wait past its
/// `idle_timeout` (taken back while idle, sent again).
#[test]
fn a_runs_summary_and_its_report_agree_on_makespan_and_each_sites_means() {
    /// Simulated seconds per real second: low, so that the time condor_submit
    /// takes (see `SUBMIT_SLACK`) is a simulated second at most.
    const SPEEDUP: f64 = 10.0;
    /// The one input the two do not share: a submission is timed by the
    /// summary from the moment cosched ran condor_submit (exact), by the
    /// report from the 000 that condor_submit wrote as it queued the jobs, a
    /// moment later (the command's own time, under 0.1 real s: ×SPEEDUP),
    /// stamped to the second below. A mean of waits or turnarounds differs
    /// by less than this; every other time is the same log stamp on both.
    const SUBMIT_SLACK: f64 = 1.0 + 0.1 * SPEEDUP;
    let dir = tempdir();
    util::write_echo_job(dir.path());
    std::fs::write(
        dir.path().join("sites.toml"),
        "[run]\nmax_attempts = 50\n\
         [simulate]\nbase_runtime = 20\njitter = 0.2\nseed = 3\n\n\
         [[site]]\nname = \"flaky\"\ngrid_resource = \"condor flaky.example flaky.example:9619\"\nslots = 6\n\
         [site.simulate]\nwait_mean = 4\np_fail = 0.35\n\n\
         [[site]]\nname = \"slow\"\ngrid_resource = \"batch slurm cosched@slow.example\"\nslots = 6\nidle_timeout = 15\n\
         [site.simulate]\nwait_mean = 40\n",
    )
    .unwrap();
    let speedup = SPEEDUP.to_string();
    let out = cosched(
        dir.path(),
        &["submit", "20", "sites.toml", "job.sub", "--simulate", "--speedup", &speedup, "--json"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json is JSON");
    let html = stderr
        .lines()
        .find_map(|l| l.strip_prefix("cosched: report: "))
        .unwrap_or_else(|| panic!("the report's path is printed: {stderr}"));
    let json = std::fs::read_to_string(Path::new(html.trim()).with_file_name("report.json")).unwrap();
    let report: serde_json::Value = serde_json::from_str(&json).expect("report.json is JSON");
    let r = &report["summary"];
    let context = format!("summary {summary}\nreport {r}");

    // Attempts are not jobs: some failed, or were taken back, and were sent again.
    assert!(summary["retries"].as_u64().unwrap() > 0, "{context}");
    assert!(r["counts"]["failed"].as_u64().unwrap() > 0, "failed attempts: {context}");
    assert!(r["counts"]["jobs"].as_u64().unwrap() > 20, "more attempts than jobs: {context}");

    let num = |v: &serde_json::Value, what: &str| v.as_f64().unwrap_or_else(|| panic!("{what}: {context}"));
    // The same log stamps from the same start: equal but for float rounding.
    let makespan = num(&summary["makespan"], "summary makespan");
    assert!(close(makespan, num(&r["makespan_s"], "report makespan")), "makespan: {context}");
    // The run stopped once it had read its last job's end: the stop is
    // no earlier than that end's stamp, but for up to a second here. The
    // fake schedd has written an end stamped 0.38 simulated s (38 ms real)
    // ahead of the run's clock when it was read (c948cbe, under load: two
    // runs of four); why is not known yet, and a stop seconds early would
    // still fail this.
    assert!(num(&summary["elapsed"], "summary elapsed") >= makespan - 1.0, "elapsed: {context}");

    let report_sites = r["sites"].as_array().unwrap();
    for site in summary["sites"].as_array().unwrap() {
        let name = site["name"].as_str().unwrap();
        let Some(theirs) = report_sites.iter().find(|s| s["name"] == name) else {
            // A site sent nothing has no log, so no row in the report.
            assert_eq!(site["done"], 0, "{name} ran jobs: {context}");
            continue;
        };
        assert_eq!(site["done"], theirs["counts"]["succeeded"], "{name}: jobs done: {context}");
        let pairs = [
            ("mean_run_time", "mean_run_time_s", 0.0),
            ("mean_queue_wait", "mean_queue_wait_s", SUBMIT_SLACK),
            ("mean_turnaround", "mean_agtime_s", SUBMIT_SLACK),
        ];
        for (ours, report_field, slack) in pairs {
            let (a, b) = (&site[ours], &theirs[report_field]);
            assert_eq!(a.is_null(), b.is_null(), "{name}: {ours} {a} vs {report_field} {b}: {context}");
            if let (Some(a), Some(b)) = (a.as_f64(), b.as_f64()) {
                assert!(
                    close(a, b) || (a - b).abs() <= slack,
                    "{name}: {ours} {a} (summary) vs {report_field} {b} (report): {context}"
                );
            }
        }
    }
}
