//! Rebuilding a run's past for `--resume`: settle the submissions whose
//! outcome is unknown, then turn the recorded submissions and the sites' user
//! logs into the event history the policy replays before it continues.
//! The reasoning behind each step is in [`super::drive`]'s module docs.

use crate::condor::{event_run_time, site_event, Condor, CondorSite};
use crate::engine::SiteCursor;
use crate::policy::{JobId, SiteEvent, SiteId, Time};
use crate::state::{Db, Submission, SubmissionState};
use crate::sync::Locked;
use crate::userlog::{Event, LegacyDates, Parser};
use crate::Failure;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a resumed run starts from, per site.
#[derive(Debug, Default)]
pub struct SiteStart {
    /// Clusters submitted so far and their jobs in proc order.
    pub known: Vec<(i64, Vec<JobId>)>,
    /// Where following the site's user log continues (just past what was replayed).
    pub log_offset: u64,
}

/// The replayed past: the policy's history and where each site continues.
#[derive(Debug, Default)]
pub struct Past {
    pub history: Vec<(SiteId, SiteEvent)>,
    pub sites: Vec<SiteStart>,
    /// Submissions settled now, for the report: (batch, what became of it).
    pub reconciled: Vec<(String, String)>,
}

/// How a recorded submission time maps onto run time.
#[derive(Clone, Copy, Debug)]
pub struct TimeBase {
    /// Unix seconds of run time 0.
    pub epoch_unix: f64,
    /// Run seconds per real second (the fake's speedup; 1 for real HTCondor).
    pub rate: f64,
}

/// Settles unknown submissions (recording the outcome) and builds the past:
/// all of it, or with a checkpoint's `cursors` (one per site) only what lies
/// past them, for a policy restored from that checkpoint.
///
/// The queue is asked once about every unknown batch of the run (a week's
/// run resumes with one at each of its hundreds of sites, and a `condor_q`
/// is a fork of a process that may hold hundreds of MB), after every
/// `condor_submit` left by the stopped run has exited. Then, site by site,
/// the log settles what it can, the answer settles the rest, and the site's
/// history is built; the logs are parsed a few sites ahead (`ReadAhead`),
/// so memory holds a few sites' logs at a time, never all of them (that
/// was 1.74 GB at a million jobs).
#[allow(clippy::too_many_arguments)]
pub async fn rebuild(
    db: &Arc<Mutex<Db>>,
    run: &str,
    site_names: &[String],
    run_dir: &Path,
    condor: &Condor,
    submit_timeout: f64,
    base: TimeBase,
    cursors: Option<&[SiteCursor]>,
) -> Result<Past, Failure> {
    let state_err = |e: crate::state::StateError| Failure::failed(format!("state database: {e}"));
    let mut past = Past::default();
    let mut per_site: Vec<Vec<Step>> = Vec::new();
    // Read once and dealt out by site: a week's run has tens of thousands of
    // batches, and reading them all again for every site was most of a resume.
    let mut subs_by_site: Vec<Vec<Submission>> = vec![Vec::new(); site_names.len()];
    {
        let db = db.locked();
        for sub in db.submissions(run).map_err(state_err)? {
            if let Some(list) = subs_by_site.get_mut(sub.site_index as usize) {
                list.push(sub);
            }
        }
    }
    let unknown_batches: Vec<&Submission> =
        subs_by_site.iter().flatten().filter(|s| s.state == SubmissionState::Intent).collect();
    for sub in &unknown_batches {
        wait_for_orphans(&sub.submit_file, Duration::from_secs_f64(submit_timeout.max(1.0) + 5.0)).await;
    }
    let asked: Vec<String> = unknown_batches.iter().map(|s| s.batch.clone()).collect();
    // A failed condor_q matters only for a batch that no log settles.
    let queued = if asked.is_empty() { Ok(BTreeMap::new()) } else { in_queue(&asked, run, condor).await };
    let cursor = |site: usize| cursors.and_then(|c| c.get(site).copied());
    let mut logs = ReadAhead::start(
        site_names
            .iter()
            .enumerate()
            .map(|(i, name)| (CondorSite::log_path(run_dir, name), cursor(i).map_or(0, |c| c.log_offset)))
            .collect(),
        base.epoch_unix,
    );
    for (site, subs) in subs_by_site.into_iter().enumerate() {
        let cursor = cursor(site);
        let Some((log_path, read)) = logs.next().await else {
            return Err(Failure::failed(
                "a thread reading the user logs stopped before the last site (see the messages above); \
                 nothing was resubmitted: run `cosched submit --resume` again"
                    .to_string(),
            ));
        };
        let unknown: Vec<&Submission> = subs.iter().filter(|s| s.state == SubmissionState::Intent).collect();
        let (mut events, mut consumed) = read?;
        let recorded: BTreeSet<i64> = subs
            .iter()
            .filter_map(|s| match s.state {
                SubmissionState::Submitted { cluster } => Some(cluster),
                _ => None,
            })
            .collect();
        let mut settled: BTreeMap<String, i64> = BTreeMap::new();
        let mut from_queue = false;
        // An unknown batch's submit events may lie before the cursor: the
        // log follower reads past them while `condor_submit` is still out.
        let whole;
        let seen_events = match cursor {
            Some(c) if !unknown.is_empty() && c.log_offset > 0 => {
                whole = read_log(&log_path, 0, base.epoch_unix)?.0;
                &whole
            }
            _ => &events,
        };
        for sub in &unknown {
            let outcome = match found_in_log(sub, unknown.len(), seen_events, &recorded) {
                Some(cluster) => Some((cluster, "found in the user log")),
                None => {
                    let queued = queued.as_ref().map_err(|e| {
                        Failure::failed(format!(
                            "cannot tell whether batch {} was submitted before cosched stopped: {e}\n\
                             Nothing was resubmitted. Run `cosched submit --resume` again once condor_q works.",
                            sub.batch
                        ))
                    })?;
                    match queued
                        .get(&crate::submit_desc::plain_id(&sub.batch))
                        .map(|c| c.iter().collect::<Vec<_>>())
                    {
                        None => None,
                        Some(clusters) if clusters.len() == 1 => {
                            from_queue = true;
                            Some((*clusters[0], "found with condor_q"))
                        }
                        Some(clusters) => {
                            return Err(Failure::failed(format!(
                                "batch {} is in the queue more than once (clusters {clusters:?}); remove the \
                                 extra clusters with condor_rm and run `cosched submit --resume` again",
                                sub.batch
                            )))
                        }
                    }
                }
            };
            let db = db.locked();
            match outcome {
                Some((cluster, how)) => {
                    db.record_submitted(run, &sub.batch, cluster).map_err(state_err)?;
                    settled.insert(sub.batch.clone(), cluster);
                    past.reconciled
                        .push((sub.batch.clone(), format!("submitted as cluster {cluster} ({how})")));
                }
                None => {
                    let why =
                        "not submitted: cosched stopped before condor_submit answered, and neither the \
                               user log nor condor_q shows the batch";
                    db.record_failed(run, &sub.batch, why).map_err(state_err)?;
                    past.reconciled
                        .push((sub.batch.clone(), "never submitted; its jobs go back to the pool".into()));
                }
            }
        }
        if from_queue {
            // A batch found through condor_q may have had its submit events
            // written since the log was read.
            let (more, end) = read_log(&log_path, consumed, base.epoch_unix)?;
            events.extend(more);
            consumed = end;
        }
        let mut procs: BTreeMap<(i64, i64), JobId> = BTreeMap::new();
        let mut start = SiteStart::default();
        let mut no_submit_event = Vec::new();
        // From a checkpoint, every submission the policy has not heard of
        // comes from its record, never from the log: the log's tail may
        // hold only the last of a cluster's submit events.
        let with_submit_event: BTreeSet<i64> = match cursor {
            Some(_) => BTreeSet::new(),
            None => events.iter().filter(|e| e.code == 0).map(|e| e.cluster).collect(),
        };
        for sub in &subs {
            let (cluster, heard) = match (&sub.state, settled.get(&sub.batch)) {
                (SubmissionState::Submitted { cluster }, _) => {
                    let number = crate::condor::batch_number(&sub.batch);
                    (*cluster, cursor.is_some_and(|c| number.is_some_and(|n| n < c.batches)))
                }
                (SubmissionState::Intent, Some(cluster)) => (*cluster, false),
                _ => continue,
            };
            for (p, job) in sub.jobs.iter().enumerate() {
                procs.insert((cluster, p as i64), *job);
            }
            start.known.push((cluster, sub.jobs.clone()));
            if !heard && !with_submit_event.contains(&cluster) {
                let at = recorded_run_time(&sub.recorded, base);
                no_submit_event.push(Step::submitted(cluster, sub.jobs.clone(), at));
            }
        }
        start.log_offset = consumed;
        if cursor.is_some() {
            events.retain(|e| e.code != 0);
        }
        let sequence = translate(&events, &procs, base.epoch_unix);
        per_site.push(in_time_order(sequence, no_submit_event));
        past.sites.push(start);
    }
    past.history = merge(per_site);
    Ok(past)
}

/// The jobs of a run with a successful end in its user logs, from the
/// submissions recorded as submitted: a finished run's count of done jobs,
/// read from the same records as its live count.
pub fn succeeded_jobs(
    db: &Db,
    run: &str,
    site_names: &[String],
    run_dir: &Path,
) -> Result<BTreeSet<JobId>, Failure> {
    let subs = db.submissions(run).map_err(|e| Failure::failed(format!("state database: {e}")))?;
    let mut done = BTreeSet::new();
    for (i, name) in site_names.iter().enumerate() {
        let mut procs: BTreeMap<(i64, i64), JobId> = BTreeMap::new();
        for sub in subs.iter().filter(|s| s.site_index as usize == i) {
            if let SubmissionState::Submitted { cluster } = sub.state {
                for (p, job) in sub.jobs.iter().enumerate() {
                    procs.insert((cluster, p as i64), *job);
                }
            }
        }
        // Outcomes only: the year of a legacy stamp does not matter here.
        let (events, _) = read_log(&CondorSite::log_path(run_dir, name), 0, 0.0)?;
        for event in &events {
            let Some(&job) = procs.get(&(event.cluster, event.proc)) else { continue };
            if let Some(SiteEvent::Ended { outcome: crate::policy::Outcome::Success, .. }) =
                site_event(job, 0.0, event)
            {
                done.insert(job);
            }
        }
    }
    Ok(done)
}

/// The cluster of an unknown submission, when its site's log shows it. One
/// `condor_submit` runs at a time per site: with one unknown batch, a
/// cluster in the log that no submission claims is that batch's (a submit
/// event is written once the schedd has queued the cluster, and cluster ids
/// are never reused).
fn found_in_log(sub: &Submission, unknown: usize, events: &[Event], recorded: &BTreeSet<i64>) -> Option<i64> {
    if unknown != 1 {
        return None;
    }
    let strangers: BTreeSet<i64> =
        events.iter().filter(|e| e.code == 0 && !recorded.contains(&e.cluster)).map(|e| e.cluster).collect();
    if strangers.len() > 1 {
        tracing::warn!("batch {}: several unrecorded clusters in the user log: {strangers:?}", sub.batch);
        return None;
    }
    let cluster = *strangers.iter().next()?;
    let procs = events.iter().filter(|e| e.code == 0 && e.cluster == cluster).count();
    if procs == sub.jobs.len() {
        return Some(cluster);
    }
    tracing::warn!(
        "batch {}: cluster {cluster} in the user log has {procs} job(s), the batch {}",
        sub.batch,
        sub.jobs.len()
    );
    None
}

/// The clusters in the queue of each of `batches` (by its name as a
/// submit file writes it), from one `condor_q`.
async fn in_queue(
    batches: &[String],
    run: &str,
    condor: &Condor,
) -> Result<BTreeMap<String, BTreeSet<i64>>, String> {
    let found = condor.find_batches(run, batches).await.map_err(|e| e.to_string())?;
    let mut clusters: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    for (batch, cluster) in found {
        clusters.entry(batch).or_default().insert(cluster);
    }
    Ok(clusters)
}

/// Reads the logs at `paths` ahead of the caller, on up to [`READERS`]
/// threads (site `i` on reader `i mod n`), and hands them over in order:
/// parsing is most of a resume's reading, and it overlaps with settling and
/// translating earlier sites. Memory holds at most two logs per reader
/// besides the caller's.
struct ReadAhead {
    readers: Vec<tokio::sync::mpsc::Receiver<(PathBuf, LogRead)>>,
    next: usize,
}

/// A log's complete events and the offset just past them ([`read_log`]).
type LogRead = Result<(Vec<Event>, u64), Failure>;

/// Threads parsing logs during a resume (the machine's cores, at most this).
const READERS: usize = 4;

impl ReadAhead {
    /// Reads each log from its offset.
    fn start(paths: Vec<(PathBuf, u64)>, epoch_unix: f64) -> ReadAhead {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, READERS);
        let readers = (0..n)
            .map(|reader| {
                let (tx, rx) = tokio::sync::mpsc::channel(1);
                let mine: Vec<(PathBuf, u64)> = paths.iter().skip(reader).step_by(n).cloned().collect();
                tokio::task::spawn_blocking(move || {
                    for (path, from) in mine {
                        let read = read_log(&path, from, epoch_unix);
                        if tx.blocking_send((path, read)).is_err() {
                            return;
                        }
                    }
                });
                rx
            })
            .collect();
        ReadAhead { readers, next: 0 }
    }

    /// The next site's log path and what reading it gave.
    async fn next(&mut self) -> Option<(PathBuf, LogRead)> {
        let n = self.readers.len();
        let got = self.readers[self.next % n].recv().await;
        self.next += 1;
        got
    }
}

/// Reads a user log from byte `from` (the end of a complete event, or 0):
/// its complete events and the offset just past them. Legacy `MM/DD`
/// stamps are dated from the run's start at `epoch_unix`, as the live
/// follower dates them.
fn read_log(path: &Path, from: u64, epoch_unix: f64) -> LogRead {
    let read = || -> std::io::Result<(Vec<u8>, Option<u64>)> {
        use std::io::{Read, Seek};
        let mut file = std::fs::File::open(path)?;
        // The line `from` is on, for diagnostics (counted as the live
        // follower counts it, so both name the same place).
        let line = crate::userlog::line_at(&file, from)?;
        file.seek(std::io::SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok((bytes, line))
    };
    match read() {
        Ok((bytes, line)) => {
            // Outlines: a policy is told the same of an outline as of the
            // whole event (what `site_event` reads), at several times the speed.
            let mut parser =
                Parser::with_legacy_dates(LegacyDates::from_run_start(epoch_unix)).outline().at_line(line);
            let events = parser.feed(&bytes);
            for d in parser.take_diagnostics() {
                let d = crate::userlog::Diagnostic { offset: from + d.offset, ..d };
                tracing::warn!("{}", d.located(path));
            }
            Ok((events, from + parser.consumed()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((Vec::new(), 0)),
        Err(e) => Err(Failure::failed(format!("cannot read the user log {}: {e}", path.display()))),
    }
}

/// One event of a site's history, with what ordering needs to know.
#[derive(Debug)]
struct Step {
    at: Time,
    /// The cluster the event is about.
    cluster: i64,
    event: SiteEvent,
}

impl Step {
    fn submitted(cluster: i64, jobs: Vec<JobId>, at: Time) -> Step {
        Step { at, cluster, event: SiteEvent::Submitted { jobs, at } }
    }
}

/// A site's log as policy events, in log order. Consecutive submit (000)
/// events of one cluster become one `Submitted`; every other event means
/// what it means to the live backend ([`site_event`]).
fn translate(events: &[Event], procs: &BTreeMap<(i64, i64), JobId>, epoch_unix: f64) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut last_submit: Option<(i64, usize)> = None;
    for event in events {
        let Some(&job) = procs.get(&(event.cluster, event.proc)) else { continue };
        let at = event_run_time(event, epoch_unix);
        if event.code == 0 {
            if let Some((cluster, index)) = last_submit {
                if cluster == event.cluster {
                    if let SiteEvent::Submitted { jobs, .. } = &mut out[index].event {
                        jobs.push(job);
                        continue;
                    }
                }
            }
            last_submit = Some((event.cluster, out.len()));
            out.push(Step::submitted(event.cluster, vec![job], at));
            continue;
        }
        let Some(translated) = site_event(job, at, event) else { continue };
        last_submit = None;
        out.push(Step { at, cluster: event.cluster, event: translated });
    }
    out
}

/// A site's history in time order. The log is not: several processes
/// write it (condor_submit its 000s, the schedd the rest, condor_rm 009s),
/// and an event can land after one stamped later. Left in log order, such
/// an event would hold back everything behind it in [`merge`], and a job's
/// resubmission elsewhere could be replayed before the end that caused it
/// (the book would then ignore the submission, and lose track of a queued
/// job). One job's own events are stamped in the order they happen, and the
/// sort is stable, so each job keeps its order. Submissions recorded in the
/// state database but missing from the log (`missing`) go just before their
/// cluster's first event, or at their recorded time when it has none.
fn in_time_order(mut steps: Vec<Step>, missing: Vec<Step>) -> Vec<Step> {
    for mut step in missing {
        let index = steps.iter().position(|s| s.cluster == step.cluster).unwrap_or(steps.len());
        if let Some(first) = steps.get(index) {
            step.at = step.at.min(first.at);
            if let SiteEvent::Submitted { at, .. } = &mut step.event {
                *at = step.at;
            }
        }
        steps.insert(index, step);
    }
    steps.sort_by(|a, b| a.at.total_cmp(&b.at));
    steps
}

/// Merges the sites' sequences into one history, keeping each site's log
/// order. Between sites the earlier event goes first; on a tie (log stamps
/// are whole seconds) a submission goes last, because a job's resubmission
/// elsewhere is always caused by the end of its previous attempt.
fn merge(per_site: Vec<Vec<Step>>) -> Vec<(SiteId, SiteEvent)> {
    /// A site's next step: earliest first, a submission after anything else
    /// stamped the same second, then the lower site number.
    struct Head {
        at: Time,
        submission: bool,
        site: usize,
    }
    impl Head {
        fn of(step: &Step, site: usize) -> Head {
            Head { at: step.at, submission: matches!(step.event, SiteEvent::Submitted { .. }), site }
        }
    }
    impl Ord for Head {
        // Reversed: `BinaryHeap` pops its greatest.
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            (other.at.total_cmp(&self.at))
                .then(other.submission.cmp(&self.submission))
                .then(other.site.cmp(&self.site))
        }
    }
    impl PartialOrd for Head {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl PartialEq for Head {
        fn eq(&self, other: &Self) -> bool {
            self.cmp(other).is_eq()
        }
    }
    impl Eq for Head {}

    let total = per_site.iter().map(Vec::len).sum();
    let mut sites: Vec<std::vec::IntoIter<Step>> = per_site.into_iter().map(Vec::into_iter).collect();
    let mut next: Vec<Option<Step>> = sites.iter_mut().map(Iterator::next).collect();
    let mut heads: std::collections::BinaryHeap<Head> =
        next.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|s| Head::of(s, i))).collect();
    let mut out = Vec::with_capacity(total);
    while let Some(Head { site, .. }) = heads.pop() {
        let Some(step) = next[site].take() else { continue };
        out.push((SiteId(site as u32), step.event));
        next[site] = sites[site].next();
        if let Some(s) = &next[site] {
            heads.push(Head::of(s, site));
        }
    }
    out
}

/// Run time of a recorded RFC 3339 wall-clock instant.
fn recorded_run_time(recorded: &str, base: TimeBase) -> Time {
    chrono::DateTime::parse_from_rfc3339(recorded)
        .map(|d| (d.timestamp_millis() as f64 / 1000.0 - base.epoch_unix) * base.rate)
        .unwrap_or(0.0)
}

/// Waits (at most `patience`) until no process still runs with `submit_file`
/// on its command line: a `condor_submit` started by the cosched that crashed
/// outlives it and may still queue the batch, so its outcome can only be read
/// once it has exited. Linux `/proc`; elsewhere there is nothing to wait for.
async fn wait_for_orphans(submit_file: &Path, patience: Duration) {
    let needle = submit_file.as_os_str().as_encoded_bytes().to_vec();
    let deadline = tokio::time::Instant::now() + patience;
    let mut warned = false;
    while orphan_running(&needle) {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                "a process still runs with {} after {patience:?}; going on",
                submit_file.display()
            );
            return;
        }
        if !warned {
            eprintln!(
                "cosched: waiting for a condor_submit of {} left by the stopped run",
                submit_file.display()
            );
            warned = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn orphan_running(needle: &[u8]) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    let me = std::process::id().to_string();
    entries.filter_map(|e| e.ok()).any(|e| {
        let name = e.file_name();
        let Some(pid) = name.to_str() else { return false };
        if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|cmd| cmd.split(|&b| b == 0).any(|arg| arg == needle))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sites, each with a batch whose `condor_submit` never answered and
    /// that its (empty) log does not show: one is in the queue, one never got
    /// there. One `condor_q` settles both, and the database says so.
    #[tokio::test]
    async fn the_unknown_batches_of_every_site_are_settled_with_one_condor_q() {
        use crate::condor::testing::{args, script};
        use crate::state::{RunRecord, RunStatus};
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        script(
            &bin,
            "condor_q",
            r#"echo '[{"ClusterId":7,"CoschedBatch":"a-b00001"},{"ClusterId":7,"CoschedBatch":"a-b00001"}]'"#,
        );
        let db = Db::open(&dir.path().join("state.db")).unwrap();
        db.create_run(&RunRecord {
            id: "r1".into(),
            created: "2026-11-26T00:00:00Z".into(),
            n_jobs: 3,
            sites_path: dir.path().join("sites.toml"),
            sites_text: String::new(),
            kinds: vec![crate::state::RecordedKind {
                name: "job".into(),
                count: 3,
                job_path: dir.path().join("job.sub"),
                job_text: String::new(),
            }],
            policy: "adaptive".into(),
            blind_types: false,
            epoch_unix: 0.0,
            simulate: false,
            speedup: 1.0,
            status: RunStatus::Running,
        })
        .unwrap();
        let file = |b: &str| dir.path().join(format!("{b}.sub"));
        db.record_intent("r1", "a", 0, "a-b00001", &[JobId(0), JobId(1)], &file("a-b00001")).unwrap();
        db.record_intent("r1", "b", 1, "b-b00001", &[JobId(2)], &file("b-b00001")).unwrap();
        let db = Arc::new(Mutex::new(db));
        let condor = Condor::new(&crate::config::CondorSettings {
            bin_dir: Some(bin.clone()),
            submit_timeout: 5.0,
            ..Default::default()
        });
        let names = ["a".to_string(), "b".to_string()];
        let base = TimeBase { epoch_unix: 0.0, rate: 1.0 };
        let past = rebuild(&db, "r1", &names, dir.path(), &condor, 0.0, base, None).await.unwrap();

        let calls = args(&bin, "condor_q");
        assert_eq!(calls.iter().filter(|a| *a == "-json").count(), 1, "one condor_q: {calls:?}");
        let constraint = calls.iter().find(|a| a.contains("CoschedRun")).expect("a constraint");
        assert!(constraint.contains("a-b00001") && constraint.contains("b-b00001"), "{constraint}");
        assert_eq!(past.sites[0].known, vec![(7, vec![JobId(0), JobId(1)])]);
        assert!(past.sites[1].known.is_empty());
        let states: BTreeMap<String, SubmissionState> =
            db.lock().unwrap().submissions("r1").unwrap().into_iter().map(|s| (s.batch, s.state)).collect();
        assert_eq!(states["a-b00001"], SubmissionState::Submitted { cluster: 7 });
        assert!(matches!(states["b-b00001"], SubmissionState::Failed { .. }), "{states:?}");
        // The replayed history has the submission the log lacks.
        assert!(past.history.iter().any(|(site, e)| site.0 == 0
            && matches!(e, SiteEvent::Submitted { jobs, .. } if *jobs == vec![JobId(0), JobId(1)])));
    }

    fn sub(t: Time) -> Step {
        Step::submitted(1, vec![JobId(0)], t)
    }
    fn removed(t: Time) -> Step {
        Step { at: t, cluster: 1, event: SiteEvent::Removed { job: JobId(0), at: t } }
    }

    #[test]
    fn a_resubmission_in_the_same_second_goes_after_the_end_it_follows() {
        // Site 1's submission and site 0's removal share a stamp.
        let merged = merge(vec![vec![sub(1.0), removed(5.0)], vec![sub(5.0)]]);
        let order: Vec<(u32, bool)> =
            merged.iter().map(|(s, e)| (s.0, matches!(e, SiteEvent::Submitted { .. }))).collect();
        assert_eq!(order, vec![(0, true), (0, false), (1, true)]);
    }

    #[test]
    fn an_end_written_late_is_replayed_before_the_resubmission_it_caused() {
        // Site 0's log: job 1 removed at 105 (condor_rm), then job 0's end
        // at 100, written late by the schedd. Job 0 was resubmitted to
        // site 1 at 102, after that end.
        let late = Step { at: 100.0, cluster: 1, event: SiteEvent::Removed { job: JobId(0), at: 100.0 } };
        let early = Step { at: 105.0, cluster: 1, event: SiteEvent::Removed { job: JobId(1), at: 105.0 } };
        let site0 = in_time_order(vec![early, late], Vec::new());
        let merged = merge(vec![site0, vec![Step::submitted(7, vec![JobId(0)], 102.0)]]);
        let order: Vec<(u32, Time)> = merged.iter().map(|(s, e)| (s.0, e.at().unwrap())).collect();
        assert_eq!(order, vec![(0, 100.0), (1, 102.0), (0, 105.0)]);
    }

    #[test]
    fn a_submission_missing_from_the_log_goes_before_its_cluster_s_first_event() {
        let started =
            |cluster, t| Step { at: t, cluster, event: SiteEvent::Started { job: JobId(0), at: t } };
        // Recorded at 50.4; its job's start is stamped 50 (whole seconds).
        let steps = in_time_order(
            vec![started(3, 20.0), started(9, 50.0)],
            vec![Step::submitted(9, vec![JobId(0)], 50.4), Step::submitted(12, vec![JobId(5)], 70.0)],
        );
        let order: Vec<(i64, bool, Time)> = steps
            .iter()
            .map(|s| (s.cluster, matches!(s.event, SiteEvent::Submitted { .. }), s.event.at().unwrap()))
            .collect();
        assert_eq!(order, vec![(3, false, 20.0), (9, true, 50.0), (9, false, 50.0), (12, true, 70.0)]);
    }

    #[test]
    fn a_site_keeps_its_log_order_even_when_stamps_tie() {
        // Submitted then Removed at the same second on one site stay in that order.
        let merged = merge(vec![vec![sub(3.0), removed(3.0)]]);
        assert!(matches!(merged[0].1, SiteEvent::Submitted { .. }));
        assert!(matches!(merged[1].1, SiteEvent::Removed { .. }));
    }

    #[test]
    fn sites_interleave_by_time_then_ends_before_submissions_then_site_number() {
        let merged = merge(vec![
            vec![sub(2.0), removed(4.0)],
            vec![removed(2.0), sub(4.0), removed(9.0)],
            vec![],
            vec![sub(1.0), sub(4.0), removed(4.0)],
        ]);
        let order: Vec<(u32, Time, bool)> = merged
            .iter()
            .map(|(s, e)| (s.0, e.at().unwrap(), matches!(e, SiteEvent::Submitted { .. })))
            .collect();
        assert_eq!(
            order,
            vec![
                (3, 1.0, true),
                (1, 2.0, false),
                (0, 2.0, true),
                (0, 4.0, false),
                (1, 4.0, true),
                (3, 4.0, true),
                (3, 4.0, false),
                (1, 9.0, false),
            ]
        );
    }
}
