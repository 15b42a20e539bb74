//! `condor_submit`, `condor_rm` and `condor_q`: argument handling, outputs and
//! exit codes as in `shared/fixtures/cli` (real HTCondor 25.0.13).
//!
//! Each command holds the pool lock for its whole read-modify-write of the
//! queue, and writes the user-log events it is responsible for (000 for
//! submit, 009 for removal) after it saves the queue, as HTCondor's schedd
//! logs a change once committed; events a killed command did not write are
//! written by the next holder of the lock ([`super::pool::Pool::commit`]). An event thus
//! always describes a change that happened, and is never lost.

use super::events;
use super::expr::{AdValue, Expr};
use super::os_text;
use super::pool::{FileLock, HistoryRecord, HistoryStatus, Job, Pool, Queue, Removal};
use super::submit_file::{self, Proc};
use crate::sim::model::{job_work, Rng, Scenario};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The user running the command (owner of the jobs it submits).
pub(crate) fn current_user() -> String {
    // SAFETY: getpwuid returns a pointer into static storage or null; it is
    // read at once, before any other call could overwrite it.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if !pw.is_null() && !(*pw).pw_name.is_null() {
            if let Ok(name) = std::ffi::CStr::from_ptr((*pw).pw_name).to_str() {
                return name.to_string();
            }
        }
    }
    std::env::var("USER").unwrap_or_else(|_| "condor".to_string())
}

fn out(text: &str) {
    let mut stdout = io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// HTCondor's error form: a blank line, then the message. Returns exit code 1.
/// The pool locked and its queue read, as `condor_submit` and `condor_rm`
/// change it; on failure, the exit code after HTCondor's kind of message.
fn locked_queue(pool: &Pool) -> Result<(FileLock, Queue), u8> {
    let guard = pool.lock().map_err(|e| fail(&format!("ERROR: Can't lock the fake pool: {e}")))?;
    let queue =
        pool.load_queue().map_err(|e| fail(&format!("ERROR: Can't read the fake pool's queue: {e}")))?;
    Ok((guard, queue))
}

fn fail(message: &str) -> u8 {
    let _ = io::stderr().lock().write_all(format!("\n{message}\n").as_bytes());
    1
}

fn open_pool() -> Result<Pool, u8> {
    Pool::from_env().map_err(|msg| fail(&format!("ERROR: {msg}")))
}

/// Draw streams of the fake's own randomness (the model has its own).
const STREAM_TRANSIENT: u64 = 0xFA_0001;
const STREAM_HOLDS: u64 = 0xFA_0002;
const STREAM_OTHER_WORK: u64 = 0xFA_0003;

// ---------------------------------------------------------------- condor_submit

pub(crate) fn condor_submit(args: &[String]) -> u8 {
    let mut terse = false;
    let mut dry_run = false;
    let mut file: Option<&str> = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-terse" => terse = true,
            // `-dry-run OUT`: the file is read and checked, nothing is queued
            // (the ads HTCondor would write to OUT are not modelled).
            "-dry-run" if args.next().is_some() => dry_run = true,
            "-" => file = Some("-"),
            a if a.starts_with('-') => {
                return fail(&format!(
                    "ERROR: unknown option {a} (the fake condor_submit knows -terse and -dry-run OUT)"
                ))
            }
            a if file.is_none() => file = Some(a),
            a => return fail(&format!("ERROR: more than one submit file given ({a})")),
        }
    }
    let pool = if dry_run {
        None
    } else {
        match open_pool() {
            Ok(p) => Some(p),
            Err(code) => return code,
        }
    };
    let mut text = String::new();
    let read = match file {
        None | Some("-") => io::stdin().read_to_string(&mut text).map(drop),
        Some(path) => std::fs::read_to_string(path).map(|t| text = t),
    };
    if let Err(e) = read {
        return fail(&format!("ERROR: Failed to open command file ({})", os_text(&e)));
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let template = match submit_file::parse(&text, &cwd) {
        Ok(t) => t,
        Err(msg) => return fail(&format!("ERROR: {msg}")),
    };
    let Some(pool) = pool else {
        out("Dry-Run job(s).");
        return 0;
    };
    let submit_file_name = file.filter(|f| *f != "-").unwrap_or("").to_string();

    let (guard, mut queue) = match locked_queue(&pool) {
        Ok(locked) => locked,
        Err(code) => return code,
    };
    queue.write_unwritten();
    queue.submit_calls += 1;
    let p_transient = pool.config.submit_transient_fail;
    if p_transient > 0.0
        && Rng::stream(pool.config.seed ^ STREAM_TRANSIENT, queue.submit_calls).uniform() < p_transient
    {
        let _ = pool.save_queue(&queue);
        return fail("ERROR: Can't find address of local schedd");
    }
    let cluster = queue.next_cluster;
    queue.next_cluster += 1;
    if !terse {
        out("Submitting job(s)");
    }
    // From here on the cluster id is used, whatever happens (as in HTCondor).
    let fail_saving = |queue: &Queue, message: &str| {
        let _ = pool.save_queue(queue);
        fail(message)
    };
    if let Some(message) = &pool.config.submit_permanent_error {
        return fail_saving(&queue, &format!("ERROR: {message}"));
    }
    let procs = template.procs(cluster);
    let now = pool.sim_now();
    let jobs = match build_jobs(&pool, &procs, cluster, now, &cwd, &submit_file_name) {
        Ok(jobs) => jobs,
        Err(message) => return fail_saving(&queue, &format!("ERROR: {message}")),
    };

    // 000 events in string order of the job id, like condor_submit.
    let mut order: Vec<&Job> = jobs.iter().collect();
    order.sort_by_key(|j| j.proc.to_string());
    let unix = pool.virtual_unix(now);
    let log_events: Vec<(PathBuf, String)> = order
        .iter()
        .filter_map(|j| j.log.clone().map(|log| (log, events::submitted(j.id(), unix))))
        .collect();
    // condor_submit refuses a log it cannot write before it queues anything.
    let logs: Vec<(PathBuf, String)> =
        log_events.iter().map(|(log, _)| (log.clone(), String::new())).collect();
    if let Some((log, e)) = events::append_all(&logs).into_iter().next() {
        return fail_saving(
            &queue,
            &format!("ERROR: Invalid log file: \"{}\" ({})", log.display(), os_text(&e)),
        );
    }
    let records: Vec<HistoryRecord> =
        jobs.iter().map(|j| HistoryRecord::of(j, HistoryStatus::Queued, now)).collect();
    let n = jobs.len() as u64;
    queue.jobs.extend(jobs);
    // The submit events follow the commit: written before it, a condor_submit
    // killed in between left an event for a cluster id the next submit took
    // again, and a resumed run that found "its" cluster in the log waited for
    // a job that was never queued.
    if let Err(e) = pool.commit(&mut queue, &log_events, &records) {
        return fail(&format!("ERROR: Can't write the fake pool's queue: {e}"));
    }
    if let Err(e) = pool.ensure_schedd() {
        return fail(&format!("ERROR: Can't start the fake schedd: {e}"));
    }
    drop(guard);

    if pool.config.submit_delay > 0.0 {
        std::thread::sleep(std::time::Duration::from_secs_f64(pool.config.submit_delay.min(3600.0)));
    }
    if terse {
        if n > 0 {
            out(&format!("{cluster}.0 - {cluster}.{}\n", n - 1));
        }
    } else {
        out(&format!("{}\n{n} job(s) submitted to cluster {cluster}.\n", ".".repeat(n as usize)));
    }
    0
}

const LOCAL_UNIVERSES: [&str; 7] =
    ["vanilla", "docker", "container", "local", "scheduler", "java", "parallel"];

/// Checks every proc like condor_submit does and turns it into a queue entry.
fn build_jobs(
    pool: &Pool,
    procs: &[Proc],
    cluster: u64,
    now: f64,
    cwd: &Path,
    submit_file: &str,
) -> Result<Vec<Job>, String> {
    let config = &pool.config;
    let owner = current_user();
    let mut checked_executables: BTreeMap<PathBuf, ()> = BTreeMap::new();
    let mut jobs = Vec::with_capacity(procs.len());
    let mut works = JobWork::new(config.base_runtime, config.jitter, config.seed);
    for p in procs {
        let iwd = match p.get("initialdir") {
            Some(dir) if !dir.is_empty() => cwd.join(dir),
            _ => cwd.to_path_buf(),
        };
        let universe = p.get("universe").unwrap_or_else(|| "vanilla".into()).to_ascii_lowercase();
        let (grid_resource, site, universe_number) = if universe == "grid" {
            let resource = p.get("grid_resource").unwrap_or_default();
            if resource.trim().is_empty() {
                return Err("No resource identifier was found (grid_resource is empty).".into());
            }
            let resource = normalize_resource(&resource);
            let site = config
                .sites
                .iter()
                .find(|s| normalize_resource(&s.grid_resource) == resource)
                .ok_or_else(|| {
                    let known: Vec<&str> = config.sites.iter().map(|s| s.grid_resource.as_str()).collect();
                    format!(
                    "the fake HTCondor pool {} has no site with grid_resource \"{resource}\" (it has: {})",
                    pool.dir.display(),
                    if known.is_empty() { "none".to_string() } else { known.join("; ") }
                )
                })?;
            (Some(resource), site, 9)
        } else if LOCAL_UNIVERSES.contains(&universe.as_str()) {
            let site = config.local.as_ref().ok_or_else(|| {
                format!(
                    "the fake HTCondor pool {} runs only grid-universe jobs (it has no local site for \
                     {universe} jobs)",
                    pool.dir.display()
                )
            })?;
            (None, site, 5)
        } else {
            return Err(format!("I don't know about the '{universe}' universe."));
        };
        let executable = p.get("executable").unwrap_or_default();
        if executable.is_empty() {
            return Err("No 'executable' parameter was provided".into());
        }
        let exe_path = iwd.join(&executable);
        let transfer_exe = p.get("transfer_executable").is_none_or(|v| !is_false(&v));
        if transfer_exe && !checked_executables.contains_key(&exe_path) {
            if let Err(e) = std::fs::File::open(&exe_path) {
                return Err(format!("Can't access executable file {}: {}", exe_path.display(), os_text(&e)));
            }
            checked_executables.insert(exe_path.clone(), ());
        }
        let log = p.get("log").filter(|l| !l.is_empty()).map(|l| iwd.join(l));
        let mut attrs = BTreeMap::new();
        for (name, value) in p.attrs() {
            attrs.insert(name, AdValue::parse_literal(&value));
        }
        let mut job = Job {
            cluster,
            proc: p.proc,
            qdate: now,
            status: 1,
            entered_status: now,
            grid_resource,
            universe: universe_number,
            log,
            cmd: exe_path.display().to_string(),
            args: p.get("arguments").or_else(|| p.get("args")).unwrap_or_default(),
            iwd: iwd.display().to_string(),
            owner: owner.clone(),
            submit_file: submit_file.to_string(),
            attrs,
            work: 0.0,
            hold: false,
            grid_job_id: None,
            start_date: None,
            hold_reason: None,
        };
        job.work = match job.attr("CoschedJob").and_then(AdValue::as_u64) {
            Some(index) => works.of_job(index),
            None => works.other(cluster, p.proc),
        };
        job.hold = site.hold_probability > 0.0
            && Rng::stream(config.seed ^ STREAM_HOLDS, (cluster << 24) ^ p.proc).uniform()
                < site.hold_probability;
        jobs.push(job);
    }
    Ok(jobs)
}

/// A grid resource with runs of white space collapsed, as it is compared.
pub(crate) fn normalize_resource(resource: &str) -> String {
    resource.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_false(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "false" | "f" | "no" | "n" | "0")
}

/// Job sizes: job `i` of a cosched run gets the work `crate::sim` gives job `i`
/// for the same seed; other jobs draw from a stream of their own.
struct JobWork {
    scenario: Scenario,
    seed: u64,
    known: Vec<f64>,
}

impl JobWork {
    fn new(base_runtime: f64, jitter: f64, seed: u64) -> Self {
        let scenario = Scenario::single(String::new(), 0, base_runtime, jitter, Vec::new());
        JobWork { scenario, seed, known: Vec::new() }
    }

    fn of_job(&mut self, index: u64) -> f64 {
        if index as usize >= self.known.len() {
            // Grow geometrically: a batch asks for many indexes near each other.
            let n_jobs = (index + 1).max(2 * self.known.len() as u64).min(index + 1 + 4096);
            self.scenario.set_n_jobs(n_jobs);
            self.known = job_work(&self.scenario, self.seed);
        }
        self.known[index as usize]
    }

    fn other(&self, cluster: u64, proc: u64) -> f64 {
        let u = Rng::stream(self.seed ^ STREAM_OTHER_WORK, (cluster << 24) ^ proc).uniform();
        let kind = &self.scenario.types[0];
        kind.base_runtime * (1.0 - kind.jitter + 2.0 * kind.jitter * u)
    }
}

// ---------------------------------------------------------------- targets

/// A job selector on the command line: `C`, `C.P` or an owner name.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    Cluster(u64),
    Job(u64, u64),
    Owner(String),
}

impl Target {
    fn parse(arg: &str) -> Option<Target> {
        if let Some((c, p)) = arg.split_once('.') {
            return Some(Target::Job(c.parse().ok()?, p.parse().ok()?));
        }
        if let Ok(c) = arg.parse() {
            return Some(Target::Cluster(c));
        }
        let owner_like = arg.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && arg.chars().all(|c| c.is_ascii_alphanumeric() || "_-@.".contains(c));
        owner_like.then(|| Target::Owner(arg.to_string()))
    }

    fn matches(&self, job: &Job) -> bool {
        match self {
            Target::Cluster(c) => job.cluster == *c,
            Target::Job(c, p) => job.cluster == *c && job.proc == *p,
            Target::Owner(o) => job.owner == *o,
        }
    }

    /// The target as a term of the constraint HTCondor builds from several.
    fn constraint(&self) -> String {
        match self {
            Target::Cluster(c) => format!("ClusterId == {c}"),
            Target::Job(c, p) => format!("ClusterId == {c} && ProcId == {p}"),
            Target::Owner(o) => format!("Owner == \"{o}\""),
        }
    }
}

/// Targets and a constraint from the command line, with the options the
/// command accepts without arguments returned as flags.
struct Selection {
    targets: Vec<Target>,
    constraint: Option<(String, Expr)>,
}

impl Selection {
    fn matches(&self, job: &Job, ad: &Ad) -> bool {
        (self.targets.is_empty() || self.targets.iter().any(|t| t.matches(job)))
            && self.constraint.as_ref().is_none_or(|(_, e)| e.matches(&|name| ad.get(name)))
    }
}

// --------------------------------------------------------- condor_config_val

/// `condor_config_val NAME`: the fake's one setting a run asks for. Its
/// grid sites' events are written as they happen (no gridmanager polls),
/// so their probe interval is 0; any other name is not defined, as the
/// real tool says of a name it does not know.
pub(crate) fn condor_config_val(args: &[String]) -> u8 {
    match args {
        [name] if name.eq_ignore_ascii_case("GRIDMANAGER_JOB_PROBE_INTERVAL") => {
            let _ = io::stdout().lock().write_all(b"0\n");
            0
        }
        [name] => fail(&format!("Not defined: {name}")),
        _ => fail("Usage: condor_config_val NAME (the fake answers one name at a time)"),
    }
}

// ---------------------------------------------------------------- condor_rm

pub(crate) fn condor_rm(args: &[String]) -> u8 {
    let mut targets = Vec::new();
    let mut constraint = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-constraint" | "-const" => match it.next() {
                Some(text) => match Expr::parse(text) {
                    Ok(e) => constraint = Some((text.clone(), e)),
                    Err(msg) => return fail(&format!("ERROR: Invalid constraint \"{text}\": {msg}")),
                },
                None => return fail("ERROR: -constraint requires another argument"),
            },
            a if a.starts_with('-') => {
                return fail(&format!("ERROR: unknown option {a} (the fake condor_rm knows -constraint)"))
            }
            a => match Target::parse(a) {
                Some(t) => targets.push(t),
                None => return fail(&format!("ERROR: Invalid job id or user name \"{a}\"")),
            },
        }
    }
    if targets.is_empty() && constraint.is_none() {
        let _ = io::stderr().write_all(
            b"Usage: condor_rm [options] { cluster | cluster.proc | user | -constraint expr } ...\n",
        );
        return 1;
    }
    // What HTCondor says on success and on failure.
    let (done, not_found) = match (targets.as_slice(), &constraint) {
        ([Target::Cluster(c)], None) => (
            format!("All jobs in cluster {c} have been marked for removal"),
            format!("Couldn't find/remove all jobs in cluster {c}"),
        ),
        ([Target::Job(c, p)], None) => {
            (format!("Job {c}.{p} marked for removal"), format!("Job {c}.{p} not found"))
        }
        ([Target::Owner(o)], None) => (
            format!("All jobs of user \"{o}\" have been marked for removal"),
            format!("Couldn't find/remove all of user {o}'s jobs"),
        ),
        (targets, constraint) => {
            let mut terms: Vec<String> = Vec::new();
            if !targets.is_empty() {
                terms.push(targets.iter().map(Target::constraint).collect::<Vec<_>>().join(" || "));
            }
            if let Some((text, _)) = constraint {
                terms.push(text.clone());
            }
            let text =
                if terms.len() == 1 { terms.remove(0) } else { format!("({}) && ({})", terms[0], terms[1]) };
            (
                format!("All jobs matching constraint ({text}) have been marked for removal"),
                format!("Couldn't find/remove all jobs matching constraint ({text})"),
            )
        }
    };
    let selection = Selection { targets, constraint };

    let pool = match open_pool() {
        Ok(p) => p,
        Err(code) => return code,
    };
    let (guard, mut queue) = match locked_queue(&pool) {
        Ok(locked) => locked,
        Err(code) => return code,
    };
    queue.write_unwritten();
    let now = pool.sim_now();
    let user = current_user();
    let (removed, kept): (Vec<Job>, Vec<Job>) = std::mem::take(&mut queue.jobs)
        .into_iter()
        .partition(|j| selection.matches(j, &Ad::of(j, &pool, now)));
    queue.jobs = kept;
    if removed.is_empty() {
        return fail(&not_found);
    }
    let unix = pool.virtual_unix(now);
    let log_events: Vec<(PathBuf, String)> = removed
        .iter()
        .filter_map(|j| j.log.clone().map(|log| (log, events::aborted(j.id(), unix, &user))))
        .collect();
    queue.removals.extend(removed.iter().map(|j| Removal { cluster: j.cluster, proc: j.proc, at: now }));
    let records: Vec<HistoryRecord> =
        removed.iter().map(|j| HistoryRecord::of(j, HistoryStatus::Removed, now)).collect();
    // A log that cannot be written does not stop the removal (HTCondor's
    // schedd would remove the job all the same).
    if let Err(e) = pool.commit(&mut queue, &log_events, &records) {
        return fail(&format!("ERROR: Can't write the fake pool's queue: {e}"));
    }
    // A running schedd applies the removals to its models; without one there
    // is no model to update, unless jobs are left that need a schedd anyway.
    if !queue.jobs.is_empty() {
        let _ = pool.ensure_schedd();
    }
    drop(guard);
    out(&format!("{done}\n"));
    0
}

// ---------------------------------------------------------------- condor_q

/// A job ad: attribute name (as HTCondor spells it) → value.
pub(crate) struct Ad {
    /// Keyed by the lower-cased name, which is also the sort order of
    /// `condor_q -json` (HTCondor sorts keys ignoring case).
    attrs: BTreeMap<String, (String, AdValue)>,
}

impl Ad {
    pub(crate) fn of(job: &Job, pool: &Pool, now: f64) -> Ad {
        let mut ad = Ad { attrs: BTreeMap::new() };
        let t = |sim: f64| AdValue::Int(pool.virtual_unix(sim).floor() as i64);
        let s = |text: &str| AdValue::Str(text.to_string());
        let qdate = pool.virtual_unix(job.qdate).floor() as i64;
        ad.set("Args", s(&job.args));
        ad.set("ClusterId", AdValue::Int(job.cluster as i64));
        ad.set("Cmd", s(&job.cmd));
        ad.set("CurrentHosts", AdValue::Int(i64::from(job.status == 2)));
        ad.set("EnteredCurrentStatus", t(job.entered_status));
        ad.set("GlobalJobId", s(&format!("cosched-fake#{}.{}#{qdate}", job.cluster, job.proc)));
        if let Some(resource) = &job.grid_resource {
            ad.set("GridResource", s(resource));
        }
        if let Some(id) = &job.grid_job_id {
            ad.set("GridJobId", s(id));
        }
        if let Some(reason) = &job.hold_reason {
            ad.set("HoldReason", s(reason));
            ad.set("HoldReasonCode", AdValue::Int(6));
            ad.set("HoldReasonSubCode", AdValue::Int(2));
        }
        ad.set("Iwd", s(&job.iwd));
        if let Some(start) = job.start_date {
            ad.set("JobCurrentStartDate", t(start));
            ad.set("JobStartDate", t(start));
        }
        ad.set("JobPrio", AdValue::Int(0));
        ad.set("JobStatus", AdValue::Int(i64::from(job.status)));
        ad.set("JobSubmitFile", s(&job.submit_file));
        ad.set("JobUniverse", AdValue::Int(i64::from(job.universe)));
        ad.set("MyType", s("Job"));
        ad.set("NumJobStarts", AdValue::Int(i64::from(job.start_date.is_some())));
        ad.set("Owner", s(&job.owner));
        ad.set("ProcId", AdValue::Int(job.proc as i64));
        ad.set("QDate", AdValue::Int(qdate));
        ad.set("ServerTime", t(now));
        ad.set("TargetType", s("Machine"));
        ad.set("User", s(&format!("{}@cosched-fake", job.owner)));
        if let Some(log) = &job.log {
            ad.set("UserLog", s(&log.display().to_string()));
        }
        for (name, value) in &job.attrs {
            ad.set(name, value.clone());
        }
        ad
    }

    fn set(&mut self, name: &str, value: AdValue) {
        self.attrs.insert(name.to_ascii_lowercase(), (name.to_string(), value));
    }

    pub(crate) fn get(&self, name: &str) -> Option<AdValue> {
        self.attrs.get(&name.to_ascii_lowercase()).map(|(_, v)| v.clone())
    }

    fn to_json(&self, only: Option<&[String]>) -> String {
        let lines: Vec<String> = self
            .attrs
            .iter()
            .filter(|(key, _)| only.is_none_or(|names| names.iter().any(|n| n.eq_ignore_ascii_case(key))))
            .map(|(_, (name, value))| format!("  \"{name}\": {}", value.to_json_text()))
            .collect();
        format!("{{\n{}\n}}\n", lines.join(",\n"))
    }
}

pub(crate) fn condor_q(args: &[String]) -> u8 {
    let mut json = false;
    let mut only: Option<Vec<String>> = None;
    let mut targets = Vec::new();
    let mut constraint = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-json" => json = true,
            "-nobatch" | "-allusers" | "-all" => {}
            "-attributes" | "-attrs" => match it.next() {
                Some(list) => {
                    only = Some(
                        list.split(',').map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect(),
                    )
                }
                None => return fail("Error: -attributes requires a comma-separated list of attributes"),
            },
            "-constraint" | "-const" => match it.next() {
                Some(text) => match Expr::parse(text) {
                    Ok(e) => constraint = Some((text.clone(), e)),
                    Err(msg) => return fail(&format!("Error: Invalid constraint \"{text}\": {msg}")),
                },
                None => return fail("Error: -constraint requires another argument"),
            },
            a if a.starts_with('-') => {
                return fail(&format!(
                    "Error: unknown option {a} (the fake condor_q knows -json, -attributes, -constraint)"
                ))
            }
            a => match Target::parse(a) {
                Some(t) => targets.push(t),
                None => return fail(&format!("Error: Invalid job id or user name \"{a}\"")),
            },
        }
    }
    let selection = Selection { targets, constraint };
    let pool = match open_pool() {
        Ok(p) => p,
        Err(code) => return code,
    };
    let queue = {
        let _guard = match pool.lock() {
            Ok(g) => g,
            Err(e) => return fail(&format!("Error: Can't lock the fake pool: {e}")),
        };
        match pool.load_queue() {
            Ok(q) => {
                if !q.jobs.is_empty() {
                    let _ = pool.ensure_schedd();
                }
                q
            }
            Err(e) => return fail(&format!("Error: Can't read the fake pool's queue: {e}")),
        }
    };
    let now = pool.sim_now();
    let ads: Vec<(&Job, Ad)> = queue
        .jobs
        .iter()
        .map(|j| (j, Ad::of(j, &pool, now)))
        .filter(|(j, ad)| selection.matches(j, ad))
        .collect();
    if json {
        if !ads.is_empty() {
            let body: Vec<String> = ads.iter().map(|(_, ad)| ad.to_json(only.as_deref())).collect();
            out(&format!("[\n{}]\n", body.join(",\n")));
        }
        return 0;
    }
    out(&table(&pool, &ads, now));
    0
}

/// The human form (`condor_q -nobatch`), for people poking at a pool.
fn table(pool: &Pool, ads: &[(&Job, Ad)], now: f64) -> String {
    let mut s = format!(
        "\n\n-- Schedd: cosched-fake : {} @ {}\n {:<10} {:<8} {:<12} {:>11} {:<2} {:<3} {:<4} {}\n",
        events::SUBMIT_HOST,
        events::stamp(pool.virtual_unix(now)),
        "ID",
        "OWNER",
        "SUBMITTED",
        "RUN_TIME",
        "ST",
        "PRI",
        "SIZE",
        "CMD"
    );
    let (mut idle, mut running, mut held) = (0, 0, 0);
    for (job, _) in ads {
        let state = match job.status {
            2 => {
                running += 1;
                "R"
            }
            5 => {
                held += 1;
                "H"
            }
            _ => {
                idle += 1;
                "I"
            }
        };
        let run = job.start_date.map_or(0.0, |start| (now - start).max(0.0)) as u64;
        let submitted = events::stamp(pool.virtual_unix(job.qdate));
        s.push_str(&format!(
            "{:<11} {:<8} {:<12} {:>2}+{:02}:{:02}:{:02} {:<2} {:<3} {:<4} {} {}\n",
            format!("{}.{}", job.cluster, job.proc),
            job.owner,
            submitted.get(5..16).unwrap_or(""),
            run / 86400,
            run / 3600 % 24,
            run / 60 % 60,
            run % 60,
            state,
            0,
            "0.0",
            job.cmd.rsplit('/').next().unwrap_or(""),
            job.args
        ));
    }
    s.push_str(&format!(
        "\nTotal for query: {} jobs; 0 completed, 0 removed, {idle} idle, {running} running, {held} held, 0 suspended\n",
        ads.len()
    ));
    s
}
