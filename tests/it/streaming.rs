//! The log tools read a chunk at a time: their results must be those of
//! parsing the whole file at once — on the real logs, on the crafted edge
//! cases, and on a synthetic log of several chunks whose damaged blocks
//! straddle the chunk boundaries.
//!
//! The references here are computed from `parse_bytes` on the whole file,
//! with the per-job folds written out in the test (as the commands did before
//! they streamed), not with the commands' own code.

use crate::util;
use cosched::condor::site_event;
use cosched::policy::JobId;
use cosched::report::model::{from_userlog, jobs_from_events};
use cosched::userlog::{parse_bytes, Diagnostic, Event, EventBody, LogReader, READ_CHUNK};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The legacy year the commands use (HTCondor's: the current one).
#[allow(clippy::disallowed_methods)] // the test asks for the year the commands will use
fn current_year() -> i32 {
    use chrono::Datelike;
    chrono::Local::now().year()
}

fn crafted_logs() -> Vec<PathBuf> {
    [
        "all-events.log",
        "crlf.log",
        "garbage.log",
        "huge-ids.log",
        "torn-write.log",
        "unknown-codes.log",
        "xml.log",
    ]
    .iter()
    .map(|n| util::root().join("fixtures/userlogs").join(n))
    .collect()
}

fn read_all(path: &Path, chunk: usize, outline: bool) -> (Vec<Event>, Vec<Diagnostic>) {
    let mut reader = LogReader::with_chunk_size(path, 2000, chunk).unwrap();
    if outline {
        reader = reader.outline();
    }
    let (mut events, mut diags) = (Vec::new(), Vec::new());
    let mut batch = Vec::new();
    loop {
        let more = reader.read_events(&mut batch).unwrap();
        events.append(&mut batch);
        diags.extend(reader.take_diagnostics());
        if !more {
            break;
        }
    }
    assert_eq!(reader.bytes_read(), std::fs::metadata(path).unwrap().len(), "{}", path.display());
    (events, diags)
}

/// An outline keeps what the folds use: header, variant, and the fields
/// `from_userlog` reads; and what a policy is told of the event, which a
/// resumed run reads from outlines.
fn assert_outline_matches(path: &Path, outline: &[Event], full: &[Event]) {
    assert_eq!(outline.len(), full.len(), "{}", path.display());
    for (o, f) in outline.iter().zip(full) {
        assert_eq!(
            (o.offset, o.code, o.cluster, o.proc, o.subproc, o.time),
            (f.offset, f.code, f.cluster, f.proc, f.subproc, f.time),
            "{}",
            path.display()
        );
        assert_eq!(
            std::mem::discriminant(&o.body),
            std::mem::discriminant(&f.body),
            "{} at {}",
            path.display(),
            f.offset
        );
        assert_eq!(from_userlog(o), from_userlog(f), "{} at {}", path.display(), f.offset);
        assert_eq!(
            site_event(JobId(0), 0.0, o),
            site_event(JobId(0), 0.0, f),
            "{} at {}",
            path.display(),
            f.offset
        );
    }
}

#[test]
fn the_chunked_reader_gives_what_whole_file_parsing_gives() {
    let mut logs = util::shared_logs();
    logs.extend(crafted_logs());
    for log in &logs {
        let bytes = std::fs::read(log).unwrap();
        let (want_events, want_diags) = parse_bytes(&bytes);
        let mut chunks = vec![7, 64, 4099, READ_CHUNK];
        if bytes.len() < 20_000 {
            chunks.push(1);
        }
        for chunk in chunks {
            let (events, diags) = read_all(log, chunk, false);
            assert_eq!(events, want_events, "{} in chunks of {chunk}", log.display());
            assert_eq!(diags, want_diags, "{} in chunks of {chunk}", log.display());
            let (outline, outline_diags) = read_all(log, chunk, true);
            assert_outline_matches(log, &outline, &want_events);
            assert_eq!(outline_diags, want_diags, "{} outline in chunks of {chunk}", log.display());
        }
    }
}

// ---------------------------------------------------------------------------
// A synthetic log of several chunks, damaged where the chunks meet.

/// The event blocks (each ending with its `...` line) of the shared logs
/// written in the default format.
fn fixture_blocks() -> Vec<String> {
    let mut blocks = Vec::new();
    for log in util::shared_logs() {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.as_bytes().get(20) == Some(&b'/') {
            continue; // legacy dates: the year depends on when the test runs
        }
        let mut block = String::new();
        for line in text.split_inclusive('\n') {
            block.push_str(line);
            if line.trim_end() == "..." {
                blocks.push(std::mem::take(&mut block));
            }
        }
    }
    assert!(blocks.len() > 2000, "the fixtures' events");
    blocks
}

/// `block` with its header's cluster replaced.
fn renumbered(block: &str, cluster: i64) -> String {
    let open = block.find('(').unwrap();
    let dot = open + block[open..].find('.').unwrap();
    format!("{}{cluster:03}{}", &block[..=open], &block[dot..])
}

/// Damaged pieces, each around 100–300 bytes, each a different way of
/// going wrong (and one fine XML event and one fine CRLF event).
fn damage(k: usize, cluster: i64) -> Vec<u8> {
    let c = cluster;
    let text = match k % 9 {
        0 => "this line is not an event\nneither is this one\n...\n".to_string(),
        1 => format!(
            "005 ({c:03}.000.000) 2026-11-21 06:20:03 Job terminated.\n\t(1) Normal termination (return val\n\
             009 ({c:03}.001.000) 2026-11-21 06:20:04 Job was aborted.\n\tvia condor_rm (by user htcuser)\n...\n"
        ),
        2 => format!("001 ({c:03}.000.000) 2026-13-45 06:20:01 Job executing on host: bad date\n...\n"),
        3 => "...\n".to_string(),
        4 => format!(
            "<c>\n    <a n=\"MyType\"><s>SubmitEvent</s></a>\n    <a n=\"EventTypeNumber\"><i>0</i></a>\n    \
             <a n=\"EventTime\"><s>2026-11-21T06:30:00.125</s></a>\n    <a n=\"Cluster\"><i>{c}</i></a>\n    \
             <a n=\"Proc\"><i>7</i></a>\n    <a n=\"Subproc\"><i>0</i></a>\n</c>\n"
        ),
        5 => format!(
            "000 ({c:03}.008.000) 2026-11-21 06:20:00 Job submitted from host: <127.0.0.1:1>\r\n...\r\n\
             001 ({c:03}.008.000) 2026-11-21 06:20:02 Job executing on host: <127.0.0.1:1>\r\n...\r\n"
        ),
        6 => format!("garbage right before a header\n012 ({c:03}.002.000) 2026-11-21 06:20:05 Job was held.\n\tbecause\n\tCode 21 Subcode 0\n...\n"),
        7 => format!("006 ({c:03}.003.000) 2026-11-21 06:20:06 Image size of job updated: lots\n...\n"),
        _ => format!(
            "005 ({c:03}.004.000) 2026-11-21 06:21:00 Job terminated.\n\t(1) Normal termination (return value 0)\n\
             \tweird \u{0} byte and \u{7f} here\n...\n"
        ),
    };
    let mut bytes = text.into_bytes();
    if k % 9 == 8 {
        // Not UTF-8: a lone continuation byte.
        let at = bytes.iter().position(|&b| b == 0).unwrap();
        bytes[at] = 0x80;
    }
    bytes
}

/// A log of about `chunks` reader chunks: the fixtures' events with fresh
/// cluster numbers, damaged pieces across every chunk boundary and in
/// between, a job whose events are out of time order, and an unfinished
/// block at the end.
fn synthetic_log(dir: &Path, chunks: usize, seed: u64) -> PathBuf {
    let blocks = fixture_blocks();
    let mut rng = util::Rng(seed);
    let mut out: Vec<u8> = Vec::new();
    let mut copy = 0i64;
    let mut damaged = 0usize;
    let end = chunks * READ_CHUNK;
    while out.len() < end {
        copy += 1;
        for block in &blocks {
            let boundary = (out.len() / READ_CHUNK + 1) * READ_CHUNK;
            // Start a damaged piece a few bytes before the next boundary,
            // and now and then anywhere.
            if boundary - out.len() < 120 || rng.below(400) == 0 {
                let pad = (boundary - out.len()).saturating_sub(1 + rng.below(40) as usize);
                out.extend(std::iter::repeat_n(b'\n', pad.min(119)));
                out.extend(damage(damaged, 5000 + copy));
                damaged += 1;
            }
            let cluster =
                block[block.find('(').unwrap() + 1..].split('.').next().unwrap().parse::<i64>().unwrap();
            out.extend(renumbered(block, cluster + 100 * copy).as_bytes());
        }
    }
    // One job whose execute is logged before its submit, out of time order.
    out.extend(b"001 (777.000.000) 2026-11-21 07:00:10 Job executing on host: <127.0.0.1:1>\n...\n");
    out.extend(b"000 (777.000.000) 2026-11-21 07:00:00 Job submitted from host: <127.0.0.1:1>\n...\n");
    out.extend(b"005 (777.000.000) 2026-11-21 07:00:05 Job terminated.\n\t(1) Normal termination (return value 0)\n...\n");
    out.extend(b"005 (778.000.000) 2026-11-21 07:01:00 Job terminated.\n\t(1) Normal termination (retu");
    assert!(damaged >= chunks, "every boundary is damaged");
    let path = dir.join(format!("synthetic-{seed}.log"));
    std::fs::write(&path, &out).unwrap();
    path
}

#[test]
fn a_synthetic_log_damaged_across_chunk_boundaries_reads_as_a_whole() {
    let tmp = util::tempdir();
    let path = synthetic_log(tmp.path(), 3, 7);
    let (want_events, want_diags) = parse_bytes(&std::fs::read(&path).unwrap());
    assert!(want_diags.len() > 10, "the damage is seen: {}", want_diags.len());
    for chunk in [4099, 65_536, READ_CHUNK] {
        let (events, diags) = read_all(&path, chunk, false);
        assert_eq!(events.len(), want_events.len(), "chunks of {chunk}");
        assert!(events == want_events, "chunks of {chunk}: events differ");
        assert_eq!(diags, want_diags, "chunks of {chunk}");
        let (outline, _) = read_all(&path, chunk, true);
        assert_outline_matches(&path, &outline, &want_events);
    }
}

/// The 1-based line of byte `offset`, counted here, not by the parser.
fn line_of(bytes: &[u8], offset: u64) -> u64 {
    1 + bytes[..offset as usize].iter().filter(|&&b| b == b'\n').count() as u64
}

#[test]
fn log_dump_prints_the_whole_file_events_and_diagnostics() {
    let tmp = util::tempdir();
    let path = synthetic_log(tmp.path(), 3, 11);
    let bytes = std::fs::read(&path).unwrap();
    let mut parser = cosched::userlog::Parser::with_legacy_year(current_year());
    let mut events = parser.feed(&bytes);
    events.extend(parser.finish());
    let diags = parser.take_diagnostics();
    assert!(!diags.is_empty(), "the synthetic log has malformed blocks");

    let out = util::cosched(tmp.path(), &["log", "dump", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "malformed blocks: exit 1");
    let got: Vec<&[u8]> = out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    assert_eq!(got.len(), events.len());
    for (line, ev) in got.iter().zip(&events) {
        assert_eq!(serde_json::from_slice::<Value>(line).unwrap(), ev.to_json(), "event at {}", ev.offset);
    }
    let want_err: String = diags
        .iter()
        .map(|d| format!("{}:{}: {}\n", path.display(), line_of(&bytes, d.offset), d.message))
        .collect();
    assert_eq!(String::from_utf8_lossy(&out.stderr), want_err);
}

/// `log stats --json` of `logs`, computed from each whole file's events.
fn reference_stats(logs: &[PathBuf]) -> Value {
    #[derive(Default)]
    struct Job {
        submit: Option<f64>,
        first_execute: Option<f64>,
        last_execute: Option<f64>,
        grid_submit: Option<f64>,
        terminate: Option<f64>,
        removed: bool,
        held: bool,
    }
    let mut counts: BTreeMap<u16, u64> = BTreeMap::new();
    let mut jobs: Vec<Job> = Vec::new();
    for log in logs {
        let mut parser = cosched::userlog::Parser::with_legacy_year(current_year());
        let mut events = parser.feed(&std::fs::read(log).unwrap());
        events.extend(parser.finish());
        let mut by_job: BTreeMap<(i64, i64), Job> = BTreeMap::new();
        for ev in &events {
            *counts.entry(ev.code).or_default() += 1;
            let t = ev.time.naive_seconds();
            let job = by_job.entry((ev.cluster, ev.proc)).or_default();
            match &ev.body {
                EventBody::Submit { .. } => job.submit = job.submit.or(Some(t)),
                EventBody::Execute { .. } => {
                    job.first_execute = job.first_execute.or(Some(t));
                    if job.terminate.is_none() {
                        job.last_execute = Some(t);
                    }
                }
                EventBody::GridSubmit { .. } => job.grid_submit = job.grid_submit.or(Some(t)),
                EventBody::Terminated { .. } => job.terminate = Some(t),
                EventBody::Aborted { .. } => job.removed = true,
                EventBody::Held { .. } => job.held = true,
                EventBody::Released { .. } => job.held = false,
                _ => {}
            }
        }
        jobs.extend(by_job.into_values());
    }
    // A time that comes out negative (events out of order) is left out.
    let summary = |f: &dyn Fn(&Job) -> Option<f64>| -> Value {
        let mut v: Vec<f64> = jobs.iter().filter_map(f).filter(|t| *t >= 0.0).collect();
        if v.is_empty() {
            return Value::Null;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let rank = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        json!({"n": n, "mean": v.iter().sum::<f64>() / n as f64, "p50": rank(0.5), "p95": rank(0.95), "max": v[n - 1]})
    };
    let completed = jobs.iter().filter(|j| j.terminate.is_some()).count();
    let removed = jobs.iter().filter(|j| j.terminate.is_none() && j.removed).count();
    let held = jobs.iter().filter(|j| j.terminate.is_none() && !j.removed && j.held).count();
    json!({
        "events": counts.iter().map(|(c, n)| (*c, *n)).collect::<Vec<_>>(),
        "jobs": {"total": jobs.len(), "completed": completed, "removed": removed, "held": held,
                 "other": jobs.len() - completed - removed - held},
        "queue_wait_s": summary(&|j| Some(j.first_execute.or(j.grid_submit)? - j.submit?)),
        "run_time_s": summary(&|j| Some(j.terminate? - j.last_execute?)),
        "turnaround_s": summary(&|j| Some(j.terminate? - j.submit?)),
    })
}

/// The text of `"key":VALUE` in a one-line JSON object whose VALUE is
/// `null` or an object without nested objects.
fn raw_field<'a>(text: &'a str, key: &str) -> &'a str {
    let start =
        text.find(&format!("\"{key}\":")).unwrap_or_else(|| panic!("{key} in {text}")) + key.len() + 3;
    let rest = &text[start..];
    let end = if rest.starts_with("null") { 4 } else { rest.find('}').unwrap() + 1 };
    &rest[..end]
}

#[test]
fn log_stats_equals_the_whole_file_fold_on_every_log_and_on_several_at_once() {
    let tmp = util::tempdir();
    let synthetic = synthetic_log(tmp.path(), 2, 3);
    let mut sets: Vec<Vec<PathBuf>> = util::shared_logs().into_iter().map(|l| vec![l]).collect();
    sets.extend(crafted_logs().into_iter().map(|l| vec![l]));
    sets.push(vec![synthetic.clone()]);
    sets.push([util::shared_logs(), vec![synthetic]].concat());
    for logs in sets {
        let want = reference_stats(&logs);
        let mut args = vec!["log", "stats", "--json"];
        args.extend(logs.iter().map(|l| l.to_str().unwrap()));
        let out = util::cosched(tmp.path(), &args);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{logs:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut got: Value = serde_json::from_str(&text).unwrap();
        // Same numbers to the bit: compared as written (the shortest exact
        // form), since serde_json's default float parsing may be 1 ulp off.
        for key in ["queue_wait_s", "run_time_s", "turnaround_s"] {
            assert_eq!(raw_field(&text, key), want[key].to_string(), "{logs:?}: {key}");
        }
        got["events"] = Value::from(
            got["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| json!([e["type"], e["count"]]))
                .collect::<Vec<_>>(),
        );
        for key in ["events", "jobs"] {
            assert_eq!(got[key], want[key], "{logs:?}: {key}");
        }
    }
}

#[test]
fn report_jobs_equal_the_whole_file_records_also_for_jobs_out_of_time_order() {
    let tmp = util::tempdir();
    let synthetic = synthetic_log(tmp.path(), 2, 5);
    let mut sets: Vec<Vec<PathBuf>> = util::shared_logs().into_iter().map(|l| vec![l]).collect();
    sets.extend(crafted_logs().into_iter().map(|l| vec![l]));
    sets.push([vec![synthetic.clone()], util::shared_logs()].concat());
    for logs in sets {
        let files: Vec<(String, Vec<cosched::report::LogEvent>)> = logs
            .iter()
            .map(|l| {
                let (events, _) = parse_bytes(&std::fs::read(l).unwrap());
                (
                    l.file_name().unwrap().to_string_lossy().into_owned(),
                    events.iter().map(from_userlog).collect(),
                )
            })
            .collect();
        let want = jobs_from_events(&files);
        let (got, names, _) =
            cosched::report::read_jobs(&logs, cosched::userlog::DEFAULT_LEGACY_YEAR).unwrap();
        assert_eq!(names, files.iter().map(|f| f.0.clone()).collect::<Vec<_>>());
        assert_eq!(got.len(), want.len(), "{logs:?}");
        assert!(got == want, "{logs:?}: records differ");
    }
    // The job logged out of order was rebuilt in time order (000, 005, 001):
    // its 005 ended no run, and the 001 that came after it is still open.
    let (jobs, _, _) = cosched::report::read_jobs(&[synthetic], 2000).unwrap();
    let odd = jobs.iter().find(|j| j.cluster == 777).unwrap();
    assert_eq!((odd.queue_wait(), odd.turnaround()), (Some(10.0), Some(5.0)));
    assert_eq!(odd.runs.len(), 1);
    assert_eq!(odd.runs[0].1, None, "in log order the 005 would have closed the run");
}
