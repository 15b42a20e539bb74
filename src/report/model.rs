//! From user-log events to one record per job: the shared input of the report
//! and of `cosched replay`.
//!
//! Kept apart from the parser's types on purpose: [`LogEvent`] holds only what
//! the report needs (code, job id, time, a few body facts), so the numbers can
//! be computed and tested on hand-made inputs, and [`from_userlog`] is the one
//! place that knows the parser's event bodies.

use crate::userlog;
use std::collections::BTreeMap;

/// The facts of one user-log event that the report uses.
#[derive(Clone, Debug, PartialEq)]
pub struct LogEvent {
    /// ULogEventNumber (000 submit, 001 execute, 005 terminated, …).
    pub code: u16,
    pub cluster: i64,
    pub proc: i64,
    pub subproc: i64,
    /// Naive seconds of the event's time stamp (see `userlog::Timestamp`).
    pub time: f64,
    /// 027 GridResource, or the host of a grid 001 (a GridResource string).
    pub grid_resource: Option<String>,
    /// 005: `Some(0)` for return value 0; other values fail the job.
    pub return_value: Option<i64>,
    /// 005: killed by this signal.
    pub signal: Option<i64>,
    /// 012 hold reason, 009 abort reason.
    pub reason: Option<String>,
}

impl LogEvent {
    /// A bare event (tests and the parser adapter fill in the rest).
    pub fn new(code: u16, cluster: i64, proc: i64, time: f64) -> Self {
        LogEvent {
            code,
            cluster,
            proc,
            subproc: 0,
            time,
            grid_resource: None,
            return_value: None,
            signal: None,
            reason: None,
        }
    }
}

/// How a recorded job ended, as far as the log tells.
#[derive(Clone, Debug, PartialEq)]
pub enum JobEnd {
    /// 005 with return value 0.
    Success,
    /// 005 with a non-zero return value or a signal.
    Failed { detail: String },
    /// 009 after a 012: held and then removed.
    HeldRemoved { reason: String },
    /// 009 without a preceding hold.
    Removed,
    /// Still held when the log ends.
    Held { reason: String },
    /// The log ends before the job did.
    Unfinished,
}

impl JobEnd {
    /// Terminated (005) jobs have a turnaround; removed or unfinished ones do not.
    pub fn terminated(&self) -> bool {
        matches!(self, JobEnd::Success | JobEnd::Failed { .. })
    }
    pub fn label(&self) -> &'static str {
        match self {
            JobEnd::Success => "success",
            JobEnd::Failed { .. } => "failed",
            JobEnd::HeldRemoved { .. } => "held-removed",
            JobEnd::Removed => "removed",
            JobEnd::Held { .. } => "held",
            JobEnd::Unfinished => "unfinished",
        }
    }
}

/// One recorded job. Times are naive seconds, like [`LogEvent::time`].
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    /// Index of the log file it came from.
    pub file: usize,
    pub cluster: i64,
    pub proc: i64,
    pub subproc: i64,
    /// The site's name: the GridResource, else the log file's name.
    pub site: String,
    /// Whether `site` is a GridResource (not a log file name).
    pub grid: bool,
    /// 000. Jobs whose 000 is missing (log started late) take their first event.
    pub submitted: f64,
    /// First 001.
    pub started: Option<f64>,
    /// 005, or 009 for removed jobs.
    pub ended: Option<f64>,
    /// First 012, when the job was held.
    pub held_at: Option<f64>,
    pub end: JobEnd,
    /// Wall time spent running (sum over 001→004/005/009/012 intervals).
    pub running_seconds: f64,
    /// Running intervals `[start, stop)`; `stop` is `None` while running at the end of the log.
    pub runs: Vec<(f64, Option<f64>)>,
}

impl JobRecord {
    /// terminate − submit, for terminated jobs.
    pub fn turnaround(&self) -> Option<f64> {
        if self.end.terminated() {
            self.ended.map(|e| e - self.submitted)
        } else {
            None
        }
    }
    /// first execute − submit.
    pub fn queue_wait(&self) -> Option<f64> {
        self.started.map(|s| s - self.submitted)
    }
    /// terminate − first execute, for terminated jobs that were seen starting.
    pub fn run_time(&self) -> Option<f64> {
        match (self.started, self.ended) {
            (Some(s), Some(e)) if self.end.terminated() => Some(e - s),
            _ => None,
        }
    }
    /// The thesis's AgTime (queue wait + run time). For a terminated job it is
    /// its turnaround, also when the start was not seen (grid job finished
    /// between polls).
    pub fn agtime(&self) -> Option<f64> {
        self.turnaround()
    }
    pub fn id(&self) -> String {
        format!("{}.{}", self.cluster, self.proc)
    }
}

/// Turns the events of several logs into job records, in (file, first
/// appearance) order. `files[i]` names log `i` (the site name of its jobs when
/// they carry no GridResource).
pub fn jobs_from_events(files: &[(String, Vec<LogEvent>)]) -> Vec<JobRecord> {
    let mut out = Vec::new();
    for (file_index, (file_name, events)) in files.iter().enumerate() {
        let mut order: Vec<(i64, i64, i64)> = Vec::new();
        let mut by_job: BTreeMap<(i64, i64, i64), Vec<&LogEvent>> = BTreeMap::new();
        for ev in events {
            let key = (ev.cluster, ev.proc, ev.subproc);
            let list = by_job.entry(key).or_default();
            if list.is_empty() {
                order.push(key);
            }
            list.push(ev);
        }
        for key in order {
            let mut evs = by_job.remove(&key).unwrap_or_default();
            // Events of one job are in time order in a log; a stable sort keeps
            // the written order for equal stamps.
            evs.sort_by(|a, b| a.time.total_cmp(&b.time));
            if let Some(job) = job_from_events(file_index, file_name, key, &evs) {
                out.push(job);
            }
        }
    }
    out
}

fn job_from_events(
    file: usize,
    file_name: &str,
    (cluster, proc, subproc): (i64, i64, i64),
    evs: &[&LogEvent],
) -> Option<JobRecord> {
    let first = evs.first()?;
    let submitted = evs.iter().find(|e| e.code == 0).map_or(first.time, |e| e.time);
    let mut job = JobRecord {
        file,
        cluster,
        proc,
        subproc,
        site: file_name.to_string(),
        grid: false,
        submitted,
        started: None,
        ended: None,
        held_at: None,
        end: JobEnd::Unfinished,
        running_seconds: 0.0,
        runs: Vec::new(),
    };
    let mut grid_from_execute = None;
    let mut hold_reason: Option<String> = None;
    for ev in evs {
        match ev.code {
            27 => {
                if let Some(g) = &ev.grid_resource {
                    if !job.grid {
                        job.site = g.clone();
                        job.grid = true;
                    }
                }
            }
            1 => {
                if job.started.is_none() {
                    job.started = Some(ev.time);
                }
                if grid_from_execute.is_none() {
                    grid_from_execute = ev.grid_resource.clone();
                }
                if !matches!(job.runs.last(), Some((_, None))) {
                    job.runs.push((ev.time, None));
                }
            }
            4 | 5 | 9 | 12 => {
                if let Some((_, stop @ None)) = job.runs.last_mut() {
                    *stop = Some(ev.time);
                }
                match ev.code {
                    5 => {
                        job.ended = Some(ev.time);
                        job.end = match (ev.return_value, ev.signal) {
                            (Some(0), None) => JobEnd::Success,
                            (_, Some(sig)) => JobEnd::Failed { detail: format!("signal {sig}") },
                            (Some(rv), None) => JobEnd::Failed { detail: format!("exit {rv}") },
                            (None, None) => JobEnd::Failed { detail: "unknown termination".into() },
                        };
                    }
                    9 => {
                        job.ended = Some(ev.time);
                        job.end = match &hold_reason {
                            Some(r) => JobEnd::HeldRemoved { reason: r.clone() },
                            None => JobEnd::Removed,
                        };
                    }
                    12 => {
                        job.held_at.get_or_insert(ev.time);
                        let reason = ev.reason.clone().unwrap_or_else(|| "unspecified".into());
                        job.end = JobEnd::Held { reason: reason.clone() };
                        hold_reason = Some(reason);
                    }
                    _ => {}
                }
            }
            13 => {
                // Released: the job is queued again.
                if matches!(job.end, JobEnd::Held { .. }) {
                    job.end = JobEnd::Unfinished;
                }
            }
            _ => {}
        }
    }
    if !job.grid {
        if let Some(g) = grid_from_execute {
            job.site = g;
            job.grid = true;
        }
    }
    job.running_seconds = job.runs.iter().filter_map(|&(a, b)| b.map(|b| (b - a).max(0.0))).sum();
    Some(job)
}

/// The adapter from the parser's events. The only code here that knows
/// [`userlog::EventBody`].
pub fn from_userlog(ev: &userlog::Event) -> LogEvent {
    let mut out = LogEvent::new(ev.code, ev.cluster, ev.proc, ev.time.naive_seconds());
    out.subproc = ev.subproc;
    use userlog::EventBody as B;
    match &ev.body {
        B::GridSubmit { resource, .. } if !resource.is_empty() => out.grid_resource = Some(resource.clone()),
        // Grid jobs name the GridResource; vanilla jobs a sinful `<…>`.
        B::Execute { host, .. } if !host.is_empty() && !host.starts_with('<') => {
            out.grid_resource = Some(host.clone())
        }
        B::Terminated { return_value, signal, normal, .. } => {
            out.return_value = *return_value;
            out.signal = if *normal { None } else { signal.or(Some(0)) };
        }
        B::Held { reason, .. } => out.reason = Some(reason.clone()).filter(|r| !r.is_empty()),
        B::Aborted { reason } => out.reason = reason.clone(),
        B::Other { text, body } => apply_text(&mut out, text, body),
        _ => {}
    }
    out
}

/// Reads the few facts the report needs from an event's header text and body
/// lines (the HTCondor text forms of htcondor-facts.md).
fn apply_text(out: &mut LogEvent, text: &str, body: &str) {
    match out.code {
        27 => {
            out.grid_resource = body
                .lines()
                .find_map(|l| l.trim().strip_prefix("GridResource:"))
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
        }
        1 => {
            // Grid jobs name the GridResource; vanilla jobs a sinful `<…>`.
            let host = text.trim().strip_prefix("Job executing on host:").map(str::trim);
            out.grid_resource = host.filter(|h| !h.is_empty() && !h.starts_with('<')).map(str::to_string);
        }
        5 => {
            for line in body.lines() {
                let line = line.trim();
                if let Some(rest) = line.split("Normal termination (return value ").nth(1) {
                    out.return_value = rest.trim_end_matches(')').trim().parse().ok();
                } else if let Some(rest) = line.split("Abnormal termination (signal ").nth(1) {
                    out.signal = rest.trim_end_matches(')').trim().parse().ok();
                }
            }
        }
        12 | 9 => {
            out.reason = body
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with("Code "))
                .map(str::to_string);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(code: u16, proc: i64, time: f64) -> LogEvent {
        LogEvent::new(code, 1, proc, time)
    }

    #[test]
    fn a_job_gets_its_times_site_and_outcome() {
        let mut grid = ev(27, 0, 5.0);
        grid.grid_resource = Some("condor ce ce:9619".into());
        let mut end = ev(5, 0, 50.0);
        end.return_value = Some(0);
        let files = vec![("a.log".to_string(), vec![ev(0, 0, 0.0), grid, ev(1, 0, 10.0), end])];
        let jobs = jobs_from_events(&files);
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!(j.site, "condor ce ce:9619");
        assert_eq!(j.turnaround(), Some(50.0));
        assert_eq!(j.queue_wait(), Some(10.0));
        assert_eq!(j.run_time(), Some(40.0));
        assert_eq!(j.running_seconds, 40.0);
        assert_eq!(j.end, JobEnd::Success);
    }

    #[test]
    fn vanilla_jobs_take_the_file_name_and_failures_are_classified() {
        let mut end = ev(5, 0, 9.0);
        end.return_value = Some(3);
        let mut killed = ev(5, 1, 9.0);
        killed.signal = Some(9);
        let mut held = ev(12, 2, 4.0);
        held.reason = Some("disk full".into());
        let files = vec![(
            "pool.log".to_string(),
            vec![
                ev(0, 0, 0.0),
                ev(0, 1, 0.0),
                ev(0, 2, 0.0),
                ev(1, 0, 1.0),
                ev(1, 2, 2.0),
                end,
                killed,
                held,
                ev(9, 2, 8.0),
            ],
        )];
        let jobs = jobs_from_events(&files);
        assert_eq!(jobs.iter().map(|j| j.site.as_str()).collect::<Vec<_>>(), ["pool.log"; 3]);
        assert_eq!(jobs[0].end, JobEnd::Failed { detail: "exit 3".into() });
        assert_eq!(jobs[1].end, JobEnd::Failed { detail: "signal 9".into() });
        assert_eq!(jobs[1].run_time(), None, "never seen starting");
        assert_eq!(jobs[1].turnaround(), Some(9.0));
        assert_eq!(jobs[2].end, JobEnd::HeldRemoved { reason: "disk full".into() });
        assert_eq!(jobs[2].turnaround(), None);
        assert_eq!(jobs[2].running_seconds, 2.0);
    }

    #[test]
    fn body_text_gives_grid_resource_exit_and_reason() {
        let mut e = LogEvent::new(27, 1, 0, 0.0);
        apply_text(
            &mut e,
            "Job submitted to grid resource",
            "    GridResource: condor personal@vm 127.0.0.1:9618\n    GridJobId: condor x 36.0\n",
        );
        assert_eq!(e.grid_resource.as_deref(), Some("condor personal@vm 127.0.0.1:9618"));
        let mut e = LogEvent::new(1, 1, 0, 0.0);
        apply_text(&mut e, "Job executing on host: <127.0.0.1:1?a=b>", "");
        assert_eq!(e.grid_resource, None);
        let mut e = LogEvent::new(5, 1, 0, 0.0);
        apply_text(&mut e, "Job terminated.", "\t(1) Normal termination (return value 3)\n");
        assert_eq!(e.return_value, Some(3));
        let mut e = LogEvent::new(12, 1, 0, 0.0);
        apply_text(&mut e, "Job was held.", "\tError from slot: boom\n\tCode 6 Subcode 2\n");
        assert_eq!(e.reason.as_deref(), Some("Error from slot: boom"));
    }
}
