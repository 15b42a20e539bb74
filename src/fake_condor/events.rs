//! User-log events in HTCondor 25's text form, copied line for line from the
//! fixtures in `shared/fixtures/userlogs` (grid-condorc.log for grid jobs,
//! vanilla-mixed.log for vanilla ones), and appended as whole events.

use chrono::TimeZone;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The sinful string the fake schedd "submits from".
pub(crate) const SUBMIT_HOST: &str = "<127.0.0.1:9618?addrs=127.0.0.1-9618&alias=cosched-fake>";
const STARTD_HOST: &str = "<127.0.0.1:9619?addrs=127.0.0.1-9619&alias=cosched-fake>";

/// `YYYY-MM-DD HH:MM:SS` in local time, HTCondor's default stamp.
pub(crate) fn stamp(unix: f64) -> String {
    let secs = unix.floor() as i64;
    match chrono::Local.timestamp_opt(secs, 0).earliest() {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S").to_string(),
        None => "1970-01-01 00:00:00".to_string(),
    }
}

fn header(code: u16, id: (u64, u64), unix: f64, text: &str) -> String {
    format!("{code:03} ({:03}.{:03}.000) {} {text}\n", id.0, id.1, stamp(unix))
}

/// The 000 event.
pub(crate) fn submitted(id: (u64, u64), unix: f64) -> String {
    format!("{}...\n", header(0, id, unix, &format!("Job submitted from host: {SUBMIT_HOST}")))
}

/// The 027 event, for a grid job handed to its resource as remote job `remote`.
pub(crate) fn grid_submitted(id: (u64, u64), unix: f64, resource: &str, remote: u64) -> String {
    format!(
        "{}    GridResource: {resource}\n    GridJobId: {resource} {remote}.0\n...\n",
        header(27, id, unix, "Job submitted to grid resource")
    )
}

/// The 001 event. Grid jobs name their resource (cut at 127 bytes like
/// HTCondor); vanilla jobs get the slot lines of HTCondor 25.
pub(crate) fn executing(id: (u64, u64), unix: f64, grid_resource: Option<&str>, slot: u64) -> String {
    match grid_resource {
        Some(resource) => {
            let mut cut = resource.len().min(127);
            while !resource.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}...\n", header(1, id, unix, &format!("Job executing on host: {}", &resource[..cut])))
        }
        None => format!(
            "{}\tSlotName: slot1_{slot}@cosched-fake\n\tCondorScratchDir = \"/var/lib/condor/execute/dir_{slot}\"\n\
             \tCpus = 1\n\tDisk = 2048\n\tGPUs = 0\n\tMemory = 128\n...\n",
            header(1, id, unix, &format!("Job executing on host: {STARTD_HOST}"))
        ),
    }
}

/// The 005 event, with `Normal termination (return value N)`. `run_seconds` fills the
/// vanilla resource table's TimeExecute row.
pub(crate) fn terminated(
    id: (u64, u64),
    unix: f64,
    return_value: i32,
    grid: bool,
    run_seconds: f64,
) -> String {
    let mut s = header(5, id, unix, "Job terminated.");
    s.push_str(&format!("\t(1) Normal termination (return value {return_value})\n"));
    for what in ["Run Remote", "Run Local", "Total Remote", "Total Local"] {
        s.push_str(&format!("\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  {what} Usage\n"));
    }
    for what in
        ["Run Bytes Sent By", "Run Bytes Received By", "Total Bytes Sent By", "Total Bytes Received By"]
    {
        s.push_str(&format!("\t0  -  {what} Job\n"));
    }
    s.push_str("\tPartitionable Resources :    Usage  Request Allocated \n");
    if grid {
        s.push_str("\t   Cpus                 :        0        1         1 \n");
        s.push_str("\t   Disk (KB)            :       75     1024      2048 \n");
        s.push_str("\t   Memory (MB)          :        2       64       128 \n");
    } else {
        let secs = run_seconds.max(0.0).round() as u64;
        s.push_str("\t   Cpus                 :                 1         1 \n");
        s.push_str("\t   Disk (KB)            :       75     1024      2048 \n");
        s.push_str("\t   GPUs                 :                           0 \n");
        s.push_str("\t   Memory (MB)          :        2       64       128 \n");
        s.push_str(&format!("\t   TimeExecute (s)      : {secs:>8}                    \n"));
        s.push_str(&format!("\t   TimeSlotBusy (s)     : {:>8}                    \n", secs + 1));
    }
    s.push_str("...\n");
    s
}

/// The 012 event.
pub(crate) fn held(id: (u64, u64), unix: f64, reason: &str, code: u32, subcode: u32) -> String {
    format!("{}\t{reason}\n\tCode {code} Subcode {subcode}\n...\n", header(12, id, unix, "Job was held."))
}

/// The 009 event, for a removal by `user` with condor_rm.
pub(crate) fn aborted(id: (u64, u64), unix: f64, user: &str) -> String {
    format!("{}\tvia condor_rm (by user {user})\n...\n", header(9, id, unix, "Job was aborted."))
}

/// Appends each log's events in the given order, one write per log file.
/// Returns the failures (a job whose log cannot be written still runs, as in
/// HTCondor; the caller reports them).
pub(crate) fn append_all(events: &[(PathBuf, String)]) -> Vec<(PathBuf, io::Error)> {
    let mut by_log: BTreeMap<&Path, String> = BTreeMap::new();
    for (log, text) in events {
        by_log.entry(log.as_path()).or_default().push_str(text);
    }
    let mut failures = Vec::new();
    for (log, text) in by_log {
        if let Err(e) = append(log, &text) {
            failures.push((log.to_path_buf(), e));
        }
    }
    failures
}

pub(crate) fn append(log: &Path, text: &str) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    f.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_pad_ids_to_three_digits_but_not_fixed_width() {
        let s = submitted((5, 1000), 0.0);
        assert!(s.starts_with("000 (005.1000.000) "), "{s}");
        assert!(s.ends_with(&format!("Job submitted from host: {SUBMIT_HOST}\n...\n")), "{s}");
    }

    #[test]
    fn grid_submit_names_the_remote_job() {
        let s = grid_submitted((33, 0), 0.0, "condor ce ce:9619", 36);
        assert!(
            s.contains("\n    GridResource: condor ce ce:9619\n    GridJobId: condor ce ce:9619 36.0\n...\n")
        );
    }
}
