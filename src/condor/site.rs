//! [`CondorSite`]: one HTCondor site as an engine backend. Submissions are
//! `condor_submit` of a per-batch submit file; everything that happens to a job
//! afterwards is read from the site's user log.
//!
//! Crash safety comes from the [`SubmitJournal`]: the intent to submit a batch
//! (its jobs and submit file) is recorded before `condor_submit` runs and the
//! cluster after it returns, so a crash in between leaves a batch whose jobs
//! can be looked up by their `CoschedRun`/`CoschedBatch` attributes
//! ([`super::Condor::find_batch`]). The same lookup guards retries: a
//! `condor_submit` that timed out may have queued its jobs anyway, so before
//! trying again cosched asks the schedd.
//!
//! Procs map to jobs by position: `queue CoschedJob from (i1 i2 …)` gives proc
//! k to the k-th listed job.
//!
//! A batch holds jobs of one kind: what the engine hands over in one
//! submission is split by kind, in the order the kinds' first jobs come,
//! and each part is a batch of its own (its own intent, submit file,
//! `condor_submit` and cluster), carried out one after the other as any
//! batches are. One description per file keeps each kind's commands its
//! own (commands set before one `queue` statement stay in force for the
//! next), and one cluster per intent keeps a resume's question of an
//! unknown batch the same as ever.

use super::{ClusterRange, Condor, CondorError, ErrorKind};
use crate::config::SiteConfig;
use crate::engine::{RunClock, SiteBackend, SiteCursor};
use crate::policy::{HoldCause, JobId, JobTypeId, Outcome, SiteEvent, SiteId, Time};
use crate::submit_desc::JobKinds;
use crate::sync::Locked;
use crate::userlog::{Event, EventBody, Follower, LegacyDates};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Journal hooks the state database implements, so that "record intent, run
/// condor_submit, record the cluster" is crash-safe. Called synchronously
/// (SQLite is fast).
pub trait SubmitJournal: Send {
    /// About to run `condor_submit submit_file` for `jobs` as `batch`.
    fn intent(&mut self, site: SiteId, batch: &str, jobs: &[JobId], submit_file: &Path);
    /// The batch is in the queue as `cluster` (procs in the order of `jobs`).
    fn submitted(&mut self, batch: &str, cluster: i64);
    /// The batch was not submitted; its jobs are free again.
    fn failed(&mut self, batch: &str, error: &str);
    /// Every event of the site's log before `offset` has been delivered.
    fn log_offset(&mut self, site: SiteId, offset: u64);
}

/// A journal that records nothing (tests, dry runs).
pub struct NoJournal;

impl SubmitJournal for NoJournal {
    fn intent(&mut self, _: SiteId, _: &str, _: &[JobId], _: &Path) {}
    fn submitted(&mut self, _: &str, _: i64) {}
    fn failed(&mut self, _: &str, _: &str) {}
    fn log_offset(&mut self, _: SiteId, _: u64) {}
}

/// Where "now" comes from for [`SiteEvent::Submitted`].
enum Now {
    /// Wall clock minus the run's epoch (real HTCondor).
    Wall,
    /// The engine's clock (scaled runs on the fake HTCondor).
    Clock(RunClock),
}

/// One HTCondor site (a CE, a batch system, or the local pool).
pub struct CondorSite {
    site: SiteId,
    config: SiteConfig,
    /// Each job's kind and each kind's submit description.
    kinds: Arc<JobKinds>,
    condor: Arc<Condor>,
    /// The run's id, written into every job as `CoschedRun`.
    run_id: String,
    /// Where this site's submit files and user log live.
    dir: PathBuf,
    /// Run time 0 as Unix seconds: log stamps map to run time as `stamp - epoch_unix`.
    epoch_unix: f64,
    journal: Box<dyn SubmitJournal>,
    /// (cluster, proc) → job, for every cluster submitted in this run.
    procs: BTreeMap<(i64, i64), JobId>,
    /// Where each job's current attempt is, for `condor_rm`.
    out: BTreeMap<JobId, (i64, i64)>,
    follower: Follower,
    /// Sequence number of the next batch file (continues past earlier files).
    next_batch: u64,
    now: Now,
    /// Multiplies retry back-off delays (1; tests shorten them).
    backoff_scale: f64,
    /// Whether the schedd answers, shared with whoever shows or judges it.
    reachability: Arc<Reachability>,
    /// Stops a `condor_submit` retry loop when the run stops.
    stop: CancellationToken,
    /// Removals and withdrawals that must be tried again (the schedd did not
    /// answer, or a Condor-C job was being forwarded), with when they were
    /// first asked for.
    later: BTreeMap<JobId, (Later, Time)>,
    /// When `later` is next looked at.
    later_due: Option<tokio::time::Instant>,
    /// HTCondor reported this site's grid resource down (026) and not yet
    /// back (025): nothing can be forwarded there, so idle jobs can go at once.
    resource_down: bool,
    /// Condor-C jobs whose remote copy cosched removed itself
    /// ([`Self::take_back_remote`]): the gridmanager may hold the local copy
    /// ("Job disappeared from remote schedd") instead of letting it go, and
    /// that hold is no failure of the job, only a removal to finish.
    taken_back: std::collections::BTreeSet<(i64, i64)>,
    /// Procs whose last event (005 or 009) has been seen: anything the
    /// gridmanager writes for them afterwards is about an execution that no
    /// longer belongs to the run's view of the job, with one exception
    /// ([`Self::translate`]). The value is a 009's stamp, until a start
    /// written after it is told.
    gone: BTreeMap<(i64, i64), Option<Time>>,
    /// Jobs whose removal was asked for and not yet confirmed by their log
    /// (009, or 005 for one that ended first), with when it was first asked
    /// (run time). The policy counts such a job as leaving and waits for its
    /// 009; should the removal not take, whatever the cause (a hold the
    /// gridmanager put on a copy whose remote copy went, a `condor_rm` that
    /// raced it), [`Self::audit`] finds the job still queued and asks again.
    unconfirmed: BTreeMap<JobId, Time>,
    /// When [`Self::audit`] may next ask the queue (run time).
    audit_next: Time,
}

/// What the remote copies of Condor-C jobs say, read against their local
/// copies ([`RemoteProgress::of`]).
#[derive(Debug, Default)]
struct RemoteProgress {
    /// The remote copy finished or is sending its output back.
    finished: Vec<(i64, i64)>,
    /// The remote copy runs while the local copy still says idle, with when
    /// that was seen (its start, for what a removal cuts short).
    running: Vec<((i64, i64), Time)>,
    /// Still being forwarded: no remote id yet, or a remote copy held while
    /// its input is spooled. Taking it back now would leave its remote copy
    /// held, or fail its stage-in.
    forwarding: Vec<(i64, i64)>,
}

impl RemoteProgress {
    /// `local`'s copies against their remote copies' `JobStatus`
    /// ([`job_statuses`]), seen at `now`. While the site's grid resource is
    /// down nothing is being forwarded: the gridmanager is not trying.
    fn of(local: &[LocalAd], remote: &BTreeMap<(i64, i64), i64>, now: Time, resource_down: bool) -> Self {
        let mut progress = Self::default();
        for ad in local {
            let spooling = remote.get(&ad.proc) == Some(&SPOOLING);
            if ad.status == 1 && ad.managed && (ad.grid_job_id.is_none() || spooling) && !resource_down {
                progress.forwarding.push(ad.proc);
            }
            let grid_done =
                ad.grid_job_status.as_deref().is_some_and(|s| s.eq_ignore_ascii_case("COMPLETED"));
            match remote.get(&ad.proc) {
                Some(4 | 6) => progress.finished.push(ad.proc),
                _ if grid_done => progress.finished.push(ad.proc),
                Some(2 | 7) if ad.status == 1 => progress.running.push((ad.proc, now)),
                _ => {}
            }
        }
        progress
    }
}

/// A removal waiting to be tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Later {
    /// `condor_rm`, whatever the job does.
    Remove,
    /// Only if it has not started (see [`SiteBackend::withdraw`]).
    Withdraw,
}

/// Whether a site's schedd answers: set by [`CondorSite`] when `condor_submit`
/// fails in a way that retrying can fix (schedd unreachable, timeouts) and
/// cleared when it succeeds. The run's progress shows it and the run stops
/// (exit 1, resumable) when it lasts longer than `[condor] unreachable_timeout`.
#[derive(Debug, Default)]
pub struct Reachability {
    /// Since when (Unix seconds) the schedd has not answered, and its last error.
    down: Mutex<Option<(f64, String)>>,
}

impl Reachability {
    /// `Some((since_unix, last_error))` while the schedd does not answer.
    pub fn unreachable(&self) -> Option<(f64, String)> {
        self.down.locked().clone()
    }
    fn failed(&self, error: &str) {
        let mut down = self.down.locked();
        let since = down.as_ref().map_or_else(crate::engine::wall_clock_unix, |d| d.0);
        *down = Some((since, error.to_string()));
    }
    fn answered(&self) {
        *self.down.locked() = None;
    }
}

/// How long a Condor-C job that the gridmanager may be forwarding (managed,
/// no remote id yet, or a remote copy held while its input is spooled to
/// it) is left alone before it is removed anyway: removing it mid-forward
/// would leave its remote copy held at the remote schedd, or fail its
/// stage-in and leave the local copy held.
const FORWARD_PATIENCE: f64 = 120.0;
/// How soon deferred removals are looked at again (real seconds).
const LATER_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// How long (run seconds) a removal may go unconfirmed by the log (no 009
/// or 005) before the queue is asked whether it took; the queue is asked at
/// most this often. A job being removed shows `JobStatus` 3 until its 009,
/// however long the gridmanager takes, and is left alone; one that is not
/// (held, or still idle or running) is removed again. On HTCondor 25 the
/// gridmanager holds ("Job disappeared from remote schedd") a Condor-C job
/// removed after its remote copy was taken back, and a second `condor_rm`
/// takes only once it has dropped the job's remote id, seconds later: so
/// the first check comes soon, and the next ones as soon.
const REMOVAL_PATIENCE: f64 = 15.0;

impl CondorSite {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        site: SiteId,
        config: SiteConfig,
        kinds: Arc<JobKinds>,
        condor: Arc<Condor>,
        run_id: String,
        dir: PathBuf,
        epoch_unix: f64,
        journal: Box<dyn SubmitJournal>,
        known: Vec<(i64, Vec<JobId>)>,
        log_offset: u64,
        next_batch: u64,
    ) -> Self {
        let mut procs = BTreeMap::new();
        let mut out = BTreeMap::new();
        for (cluster, jobs) in known {
            for (proc, job) in jobs.into_iter().enumerate() {
                procs.insert((cluster, proc as i64), job);
                // Later clusters hold later attempts.
                out.insert(job, (cluster, proc as i64));
            }
        }
        let log = Self::log_path(&dir, &config.name);
        CondorSite {
            site,
            config,
            kinds,
            condor,
            run_id,
            dir,
            epoch_unix,
            journal,
            procs,
            out,
            // Legacy `MM/DD` stamps are dated from the run's start (in the
            // submit host's local time, as HTCondor writes them), not from
            // the parser's fixed default year: the policy's times would be
            // decades off.
            follower: Follower::with_legacy_dates(log, log_offset, LegacyDates::from_run_start(epoch_unix)),
            next_batch,
            now: Now::Wall,
            backoff_scale: 1.0,
            reachability: Arc::default(),
            stop: CancellationToken::new(),
            later: BTreeMap::new(),
            later_due: None,
            resource_down: false,
            taken_back: Default::default(),
            gone: Default::default(),
            unconfirmed: BTreeMap::new(),
            audit_next: f64::NEG_INFINITY,
        }
    }

    /// Shares the schedd's reachability with the caller, and stops retrying
    /// `condor_submit` when `stop` is cancelled (the run is stopping).
    pub fn with_reachability(mut self, reachability: Arc<Reachability>, stop: CancellationToken) -> Self {
        self.reachability = reachability;
        self.stop = stop;
        self
    }

    /// Reads "now" from the engine's clock instead of the wall clock (needed
    /// when the run clock is scaled, as on the fake HTCondor).
    pub fn with_clock(mut self, clock: RunClock) -> Self {
        self.now = Now::Clock(clock);
        self
    }

    /// Scales the back-off between `condor_submit` retries (tests use a small
    /// factor; real runs keep 1).
    pub fn with_backoff_scale(mut self, scale: f64) -> Self {
        self.backoff_scale = scale.max(0.0);
        self
    }

    /// The user log of site `name` in `dir` (one per site, shared by its batches).
    pub fn log_path(dir: &Path, name: &str) -> PathBuf {
        dir.join(format!("{name}.log"))
    }

    /// The submit file of batch `batch` in `dir`.
    pub fn submit_file_path(dir: &Path, batch: &str) -> PathBuf {
        dir.join(format!("{batch}.sub"))
    }

    fn now(&self) -> Time {
        match &self.now {
            Now::Clock(clock) => clock.now(),
            Now::Wall => crate::engine::wall_clock_unix() - self.epoch_unix,
        }
    }

    /// Runs `condor_submit` with retries; returns the procs in job order and
    /// when the successful attempt began (the schedd queues the jobs during
    /// the call, so its start is the better submit time: with a scaled clock
    /// the call itself can last many simulated seconds), or the error that
    /// ended the attempts.
    ///
    /// A transient failure (schedd unreachable, timeout) is retried with the
    /// same batch file and a growing back-off capped at a minute, for as long
    /// as the run goes on: the site is "unreachable" meanwhile
    /// ([`Reachability`]), and the run decides how long that may last. Before
    /// each retry the schedd is asked whether the batch got in after all.
    /// `Ok(None)` means the run stopped first (or was stopping when the
    /// attempt failed, which is then not retried): the outcome stays unknown
    /// and is settled by `--resume`.
    async fn submit_with_retries(
        &mut self,
        batch: &str,
        file: &Path,
        jobs: &[JobId],
    ) -> Result<Option<(Vec<(i64, i64)>, Time)>, CondorError> {
        let mut attempt = 0u32;
        loop {
            let started = self.now();
            let error = match self.condor.submit(file).await {
                Ok(range) => {
                    self.reachability.answered();
                    return Ok(Some((procs_of(range, jobs.len()), started)));
                }
                Err(e) => e,
            };
            if error.kind == ErrorKind::Permanent {
                self.reachability.answered();
                return Err(error);
            }
            // The jobs may have been queued anyway (a timeout after the
            // schedd committed, unreadable output): look before retrying.
            if let Ok(found) = self.condor.find_batch(&self.run_id, batch).await {
                if let Some(procs) = match_found(&found, jobs) {
                    tracing::info!(site = %self.config.name, batch, "condor_submit failed but the batch is in the queue: {error}");
                    self.reachability.answered();
                    return Ok(Some((procs, started)));
                }
            }
            if self.stop.is_cancelled() {
                tracing::warn!(
                    site = %self.config.name,
                    batch,
                    "{error}; the run is stopping: the batch is not retried, and resuming the run \
                     (`cosched submit --resume`) settles it (condor_q tells whether it got in)"
                );
                return Ok(None);
            }
            self.reachability.failed(&error.to_string());
            let delay = backoff(batch, attempt) * self.backoff_scale;
            tracing::warn!(site = %self.config.name, batch, "{error}; retrying the same batch in {delay:.0} s");
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return Ok(None),
                _ = tokio::time::sleep(std::time::Duration::from_secs_f64(delay)) => {}
            }
            attempt += 1;
        }
    }

    /// Runs `condor_rm` for `targets`, retrying transient failures a few
    /// times. `false` when it could not be done now: the caller tries again
    /// later ([`Self::later`]), since a job whose removal is lost stays
    /// "being removed" until its log says otherwise, and at a site that never
    /// starts it the log never will.
    async fn remove_with_retries(&mut self, targets: &[String]) -> bool {
        let key = format!("{}-rm-{}", self.config.name, targets.first().map_or("", String::as_str));
        let mut attempt = 0u32;
        loop {
            let error = match self.condor.remove(targets).await {
                Ok(()) => return true,
                Err(e) => e,
            };
            if error.kind == ErrorKind::Permanent {
                tracing::warn!(site = %self.config.name, "removing {} job(s): {error}", targets.len());
                return true;
            }
            if attempt >= self.condor.retries() {
                tracing::warn!(site = %self.config.name, "removing {} job(s): {error}; trying again later", targets.len());
                return false;
            }
            let delay = backoff(&key, attempt) * self.backoff_scale;
            tracing::warn!(site = %self.config.name, "removing {} job(s): {error}; retrying in {delay:.1} s", targets.len());
            tokio::time::sleep(std::time::Duration::from_secs_f64(delay)).await;
            attempt += 1;
        }
    }

    /// `condor_rm -constraint` for our procs, in chunks; `unstarted_only`
    /// adds "idle or held", so that a job that started since it was looked
    /// at is not cut short (the schedd evaluates the constraint
    /// atomically). Held counts as not started: a Condor-C job whose remote
    /// copy was taken back can be held by the gridmanager ("job disappeared
    /// from remote schedd") between the look and the removal, and one left
    /// held would never run nor be asked back again (a run stuck at 231 of
    /// 240 on the real pool).
    async fn remove_procs(&mut self, procs: &[(i64, i64)], unstarted_only: bool) -> bool {
        let mut all = true;
        for chunk in procs.chunks(200) {
            let ids = procs_constraint(chunk);
            let constraint =
                if unstarted_only { format!("({ids}) && (JobStatus == 1 || JobStatus == 5)") } else { ids };
            all &= self.remove_with_retries(&["-constraint".to_string(), constraint]).await;
        }
        all
    }

    /// Removes `jobs`; those that could not be removed now are kept for later.
    /// A Condor-C job whose remote copy has already finished is left alone:
    /// its result is on its way (the local copy hears of it at the next
    /// poll) and removing it now would throw a finished execution away. One
    /// whose remote copy runs, unknown to the local copy, is reported started
    /// first, so that the execution cut short is counted.
    async fn remove_now(&mut self, jobs: &[JobId]) -> Vec<SiteEvent> {
        let mut procs: Vec<(i64, i64)> = jobs.iter().filter_map(|j| self.out.get(j)).copied().collect();
        let RemoteProgress { mut finished, running, forwarding } = self.remote_progress(&procs).await;
        // Being forwarded: removing it now would leave its remote copy held
        // at the remote schedd, or fail its stage-in; wait for its remote id
        // and its input (not forever).
        let now = self.now();
        let mut wait = Vec::new();
        for &job in jobs {
            let Some(proc) = self.out.get(&job).copied() else { continue };
            let first = self.later.get(&job).map_or(now, |l| l.1);
            if forwarding.contains(&proc) && now - first < FORWARD_PATIENCE {
                wait.push((job, first));
                procs.retain(|p| *p != proc);
            }
        }
        for &job in jobs {
            if !wait.iter().any(|w| w.0 == job) {
                self.later.remove(&job);
            }
        }
        for (job, first) in wait {
            self.later.insert(job, (Later::Remove, first));
        }
        procs.retain(|p| !finished.contains(p));
        // The remote copies go first, at their schedd: the gridmanager acts
        // on a local removal only at its next poll, and in between an idle
        // copy can start and a running one finish, its result thrown away
        // and its execution unseen. Those that have not started go first
        // (atomically: what is left had started or finished when they went),
        // then the started ones, each counted as cut short whether or not
        // the local copy heard of its start. A copy that finished stays.
        let (mut taken_back, left) = self.take_back_remote(&procs, "JobStatus == 1 || JobStatus == 5").await;
        let started: Vec<(i64, i64)> =
            left.iter().filter(|(_, s)| matches!(s, 2 | 7)).map(|(p, _)| *p).collect();
        finished.extend(left.iter().filter(|(_, s)| matches!(s, 4 | 6)).map(|(p, _)| *p));
        let (killed, left) = self.take_back_remote(&started, "JobStatus == 2 || JobStatus == 7").await;
        finished.extend(left.iter().filter(|(_, s)| matches!(s, 4 | 6)).map(|(p, _)| *p));
        let running: Vec<((i64, i64), Time)> = running
            .into_iter()
            .filter(|(p, _)| !killed.contains(p))
            .chain(killed.iter().map(|&p| (p, now)))
            .collect();
        taken_back.extend(killed);
        if !finished.is_empty() {
            tracing::info!(
                site = %self.config.name,
                "not removing {} job(s) that finished at the remote schedd: their results are on the way",
                finished.len()
            );
            procs.retain(|p| !finished.contains(p));
        }
        let events: Vec<SiteEvent> = running
            .iter()
            .filter(|(proc, _)| procs.contains(proc))
            .filter_map(|(proc, at)| self.procs.get(proc).map(|&job| SiteEvent::Started { job, at: *at }))
            .collect();
        tracing::debug!(
            site = %self.config.name,
            "removing {} job(s): {} removed at the remote schedd, {} running there unheard of, {} finished there",
            procs.len(),
            taken_back.len(),
            events.len(),
            finished.len()
        );
        if !self.remove_procs(&procs, false).await {
            let now = self.now();
            for &job in jobs {
                self.later.entry(job).or_insert((Later::Remove, now));
            }
        }
        events
    }

    /// Takes back those of `jobs` that HTCondor says have not started, and
    /// those on hold; returns [`SiteEvent::WithdrawDeclined`] for those that
    /// have started. What cannot be decided now (no answer from the schedd;
    /// a Condor-C job being forwarded) is kept for later.
    ///
    /// For a grid job the local copy learns of its remote copy's start only
    /// at the gridmanager's next poll (60 s by default), so for Condor-C the
    /// remote schedd is asked directly (`condor_q -name -pool`), and the
    /// local `GridJobStatus` is used only when it cannot be asked.
    async fn withdraw_now(&mut self, jobs: &[JobId]) -> Vec<SiteEvent> {
        let targets: Vec<(JobId, (i64, i64))> =
            jobs.iter().filter_map(|j| self.out.get(j).map(|p| (*j, *p))).collect();
        if targets.is_empty() {
            return Vec::new();
        }
        let now = self.now();
        let procs: Vec<(i64, i64)> = targets.iter().map(|t| t.1).collect();
        let ads = match self
            .condor
            .query(
                &procs_constraint(&procs),
                &["ClusterId", "ProcId", "JobStatus", "GridJobId", "GridJobStatus", "Managed"],
            )
            .await
        {
            Ok(ads) => ads,
            Err(e) => {
                tracing::warn!(site = %self.config.name, "cannot see whether {} job(s) started: {e}; trying again later", targets.len());
                for (job, _) in &targets {
                    self.later.entry(*job).or_insert((Later::Withdraw, now));
                }
                return Vec::new();
            }
        };
        let local: BTreeMap<(i64, i64), LocalAd> = ads.iter().filter_map(LocalAd::read).collect();
        let remote = remote_states(&self.condor, &self.config.name, local.values()).await;
        let mut events = Vec::new();
        let mut idle: Vec<(i64, i64)> = Vec::new();
        let mut held: Vec<(i64, i64)> = Vec::new();
        for (job, proc) in targets {
            let first = self.later.get(&job).map_or(now, |l| l.1);
            let Some(ad) = local.get(&proc) else {
                // Gone from the queue: its log says whether it ended or was removed.
                self.later.remove(&job);
                continue;
            };
            match ad.verdict(remote.get(&proc).copied(), self.resource_down, now - first) {
                Verdict::Started => {
                    self.later.remove(&job);
                    events.push(SiteEvent::WithdrawDeclined { job, at: now });
                }
                Verdict::NotStarted => {
                    self.later.remove(&job);
                    idle.push(proc);
                }
                Verdict::Wait => {
                    self.later.insert(job, (Later::Withdraw, first));
                }
                Verdict::Held => {
                    self.later.remove(&job);
                    held.push(proc);
                }
                Verdict::LeftToLog => {
                    self.later.remove(&job);
                }
            }
        }
        // A Condor-C job's remote copy can start between the look above and
        // the gridmanager acting on a local removal: take it back at its
        // schedd first, where "not started" is part of the removal itself.
        let (taken_back, left) = self.take_back_remote(&idle, "JobStatus == 1 || JobStatus == 5").await;
        let started: Vec<(i64, i64)> =
            left.iter().filter(|(_, s)| matches!(s, 2 | 4 | 6 | 7)).map(|(p, _)| *p).collect();
        for proc in &started {
            if let Some(&job) = self.procs.get(proc) {
                events.push(SiteEvent::WithdrawDeclined { job, at: now });
            }
        }
        idle.retain(|p| !taken_back.contains(p) && !started.contains(p));
        // Their remote copies are gone, or they are held: nothing can run
        // for them any more.
        let stopped: Vec<(i64, i64)> = taken_back.into_iter().chain(held).collect();
        self.expect_removal(&stopped);
        let mut all = self.remove_procs(&stopped, false).await;
        all &= self.remove_procs(&idle, true).await;
        if !all {
            idle.extend(stopped);
            for (job, proc) in &self.out {
                if idle.contains(proc) {
                    self.later.entry(*job).or_insert((Later::Withdraw, now));
                }
            }
        }
        events
    }

    /// For the Condor-C jobs among `procs` whose remote copy is known:
    /// removes at the remote schedd those remote copies whose status
    /// satisfies `statuses` (the remote schedd evaluates it with the
    /// removal, so it cannot race a change there), then asks which are
    /// gone. Returns (taken back, the others still there with their remote
    /// `JobStatus`). Jobs in neither (another grid type, no remote copy yet,
    /// a remote schedd that cannot be asked or will not let us remove) are
    /// left to the local queue as before.
    async fn take_back_remote(
        &mut self,
        procs: &[(i64, i64)],
        statuses: &str,
    ) -> (Vec<(i64, i64)>, Vec<((i64, i64), i64)>) {
        let condor_c =
            self.config.grid_resource.as_ref().is_some_and(|g| g.raw.trim_start().starts_with("condor "));
        if !condor_c || procs.is_empty() {
            return Default::default();
        }
        let attributes = ["ClusterId", "ProcId", "JobStatus", "GridJobId"];
        let ads = match self.condor.query(&procs_constraint(procs), &attributes).await {
            Ok(ads) => ads,
            Err(e) => {
                tracing::debug!(site = %self.config.name, "cannot look for remote copies: {e}");
                return Default::default();
            }
        };
        let local: Vec<LocalAd> = ads.iter().filter_map(LocalAd::read).map(|(_, ad)| ad).collect();
        let by_schedd = by_remote_schedd(local.iter());
        let (mut taken, mut left) = (Vec::new(), Vec::new());
        for ((schedd, pool), pairs) in by_schedd {
            let remotes: Vec<(i64, i64)> = pairs.iter().map(|p| p.1).collect();
            let ids = procs_constraint(&remotes);
            let matching = format!("({ids}) && ({statuses})");
            if let Err(e) = self.condor.remove_remote(&schedd, &pool, &matching).await {
                tracing::debug!(site = %self.config.name, "removing remote copies at {schedd}: {e}");
                continue;
            }
            let asked = self.condor.query_remote(&schedd, &pool, &ids, &REMOTE_STATUS_ATTRIBUTES).await;
            let Ok(ads) = asked else { continue };
            let status = job_statuses(&ads);
            for (local, remote) in pairs {
                match status.get(&remote) {
                    None | Some(3) => {
                        self.taken_back.insert(local);
                        taken.push(local);
                    }
                    Some(&status) => left.push((local, status)),
                }
            }
        }
        (taken, left)
    }

    /// What the remote copies of `procs` say ([`RemoteProgress`]): nothing
    /// where the site is not Condor-C or its local queue cannot be asked.
    async fn remote_progress(&mut self, procs: &[(i64, i64)]) -> RemoteProgress {
        let condor_c =
            self.config.grid_resource.as_ref().is_some_and(|g| g.raw.trim_start().starts_with("condor "));
        if !condor_c || procs.is_empty() {
            return Default::default();
        }
        let attributes = ["ClusterId", "ProcId", "JobStatus", "GridJobId", "GridJobStatus", "Managed"];
        let Ok(ads) = self.condor.query(&procs_constraint(procs), &attributes).await else {
            return Default::default();
        };
        let local: Vec<LocalAd> = ads.iter().filter_map(LocalAd::read).map(|(_, ad)| ad).collect();
        let remote = remote_states(&self.condor, &self.config.name, local.iter()).await;
        RemoteProgress::of(&local, &remote, self.now(), self.resource_down)
    }

    /// Retries the removals and withdrawals kept for later.
    async fn retry_later(&mut self) -> Vec<SiteEvent> {
        let removals: Vec<JobId> =
            self.later.iter().filter(|(_, l)| l.0 == Later::Remove).map(|(j, _)| *j).collect();
        let withdrawals: Vec<JobId> =
            self.later.iter().filter(|(_, l)| l.0 == Later::Withdraw).map(|(j, _)| *j).collect();
        let mut events = self.remove_now(&removals).await;
        events.extend(self.withdraw_now(&withdrawals).await);
        events.extend(self.audit().await);
        events
    }

    /// Records that `procs` are being removed whatever they do, so that
    /// [`Self::audit`] follows them to their 009.
    fn expect_removal(&mut self, procs: &[(i64, i64)]) {
        let now = self.now();
        for proc in procs {
            if let Some(&job) = self.procs.get(proc) {
                self.unconfirmed.entry(job).or_insert(now);
            }
        }
    }

    /// Asks the queue about the removals the log has not confirmed within
    /// [`REMOVAL_PATIENCE`], and removes again those still queued and not
    /// being removed (`JobStatus` other than 3). Those gone from the queue
    /// are left to their log. A removal deferred on purpose (in `later`)
    /// is not this audit's business, and a removal that finds the remote
    /// copy finished leaves it to end, as always.
    async fn audit(&mut self) -> Vec<SiteEvent> {
        let now = self.now();
        if now < self.audit_next {
            return Vec::new();
        }
        let due: Vec<(JobId, (i64, i64))> = self
            .unconfirmed
            .iter()
            .filter(|&(job, &asked)| now - asked >= REMOVAL_PATIENCE && !self.later.contains_key(job))
            .filter_map(|(job, _)| self.out.get(job).map(|&proc| (*job, proc)))
            .collect();
        if due.is_empty() {
            return Vec::new();
        }
        self.audit_next = now + REMOVAL_PATIENCE;
        let procs: Vec<(i64, i64)> = due.iter().map(|d| d.1).collect();
        let ads = match self
            .condor
            .query(&procs_constraint(&procs), &["ClusterId", "ProcId", "JobStatus"])
            .await
        {
            Ok(ads) => ads,
            Err(e) => {
                tracing::debug!(site = %self.config.name, "cannot look for removals that did not take: {e}");
                return Vec::new();
            }
        };
        let statuses = job_statuses(&ads);
        let mut stale = Vec::new();
        for (job, proc) in &due {
            let Some(status) = statuses.get(proc).filter(|&&s| s != 3) else { continue };
            tracing::warn!(
                site = %self.config.name,
                "job {} ({}.{}): still queued with JobStatus {status} {:.0} s after its removal was asked; removing it again",
                job.0,
                proc.0,
                proc.1,
                now - self.unconfirmed[job]
            );
            stale.push(*job);
        }
        if stale.is_empty() {
            return Vec::new();
        }
        self.remove_now(&stale).await
    }

    fn translate(&mut self, events: Vec<Event>) -> Vec<SiteEvent> {
        let mut out = Vec::new();
        for event in events {
            let proc = (event.cluster, event.proc);
            let Some(&job) = self.procs.get(&proc) else {
                continue;
            };
            if let Some(removed) = self.gone.get_mut(&proc) {
                // The gridmanager writes a remote start when it learns of
                // it, which can be after the schedd wrote the removal: an
                // execution that began before its removal was cut short,
                // as the logs in time order (`cosched log report`) show.
                // Told only while the job is not out here again under
                // another proc, so that no later attempt takes the start.
                let at = event_run_time(&event, self.epoch_unix);
                if event.code == 1
                    && removed.is_some_and(|removed| at <= removed)
                    && !self.out.contains_key(&job)
                {
                    *removed = None;
                    tracing::debug!(
                        site = %self.config.name,
                        "job {} ({}.{}): its start was written after its removal; counted as cut short",
                        job.0,
                        proc.0,
                        proc.1
                    );
                    out.push(SiteEvent::Started { job, at });
                    continue;
                }
                tracing::warn!(
                    site = %self.config.name,
                    "job {} ({}.{}): event {:03} after the job left the queue; ignored",
                    job.0,
                    proc.0,
                    proc.1,
                    event.code
                );
                continue;
            }
            let current = self.out.get(&job) == Some(&proc);
            if event.code == 12 && self.taken_back.contains(&proc) {
                // Held because its remote copy, which cosched removed, is
                // gone: finish the removal.
                let now = self.now();
                self.later.insert(job, (Later::Remove, now));
                self.unconfirmed.entry(job).or_insert(now);
                continue;
            }
            if event.code == 12 && current && self.unconfirmed.contains_key(&job) {
                // Held while its removal was under way: that removal did not
                // take (a held job never leaves by itself), so ask again.
                let now = self.now();
                self.later.entry(job).or_insert((Later::Remove, now));
            }
            if matches!(event.code, 5 | 9) {
                let removed = (event.code == 9).then(|| event_run_time(&event, self.epoch_unix));
                self.gone.insert(proc, removed);
                if current {
                    self.unconfirmed.remove(&job);
                }
            }
            let Some(translated) = site_event(job, event_run_time(&event, self.epoch_unix), &event) else {
                continue;
            };
            match translated {
                SiteEvent::ResourceDown { .. } => self.resource_down = true,
                SiteEvent::ResourceUp { .. } => self.resource_down = false,
                _ => {}
            }
            if matches!(translated, SiteEvent::Ended { .. } | SiteEvent::Removed { .. })
                && self.out.get(&job) == Some(&(event.cluster, event.proc))
            {
                self.out.remove(&job);
            }
            out.push(translated);
        }
        out
    }
}

/// Run time (seconds after `epoch_unix`) of a user-log event's stamp.
pub fn event_run_time(event: &Event, epoch_unix: f64) -> Time {
    event.time.to_unix(local_offset_at(event.time.naive_unix)) - epoch_unix
}

/// What a user-log event of `job`, stamped `at` in run time, tells a policy:
/// 001 → started, 005 → ended (with its outcome), 012 → held, 009 → removed,
/// 026/025 → the site's grid resource down/back up (the gridmanager writes
/// them into the log of every job it holds for that resource).
/// `None` for every other code. Submit events (000) are the caller's to
/// translate: only it knows which batch, and so which jobs, a cluster holds.
/// The live backend and `--resume`'s history both use this, so a resumed
/// policy sees the past exactly as it was seen live.
pub fn site_event(job: JobId, at: Time, event: &Event) -> Option<SiteEvent> {
    Some(match (event.code, &event.body) {
        (1, _) => SiteEvent::Started { job, at },
        (5, EventBody::Terminated { normal, return_value, signal, .. }) => {
            let outcome = match (normal, return_value, signal) {
                (true, Some(0), _) => Outcome::Success,
                (true, Some(code), _) => Outcome::Failed { detail: format!("exit code {code}") },
                (false, _, Some(sig)) => Outcome::Failed { detail: format!("killed by signal {sig}") },
                _ => Outcome::Failed { detail: "abnormal termination".to_string() },
            };
            SiteEvent::Ended { job, at, outcome }
        }
        (5, other) => SiteEvent::Ended {
            job,
            at,
            outcome: Outcome::Failed {
                detail: format!("termination event not understood: {}", other_text(other)),
            },
        },
        (12, EventBody::Held { reason, code, subcode }) => {
            let cause = hold_cause(*code);
            let reason = if reason.is_empty() { "reason unspecified" } else { reason.as_str() };
            SiteEvent::Held { job, at, reason: format!("{reason} (code {code}, subcode {subcode})"), cause }
        }
        (12, other) => SiteEvent::Held { job, at, reason: other_text(other), cause: HoldCause::Unknown },
        (9, _) => SiteEvent::Removed { job, at },
        (25, _) => SiteEvent::ResourceUp { job, at },
        (26, _) => SiteEvent::ResourceDown { job, at },
        _ => return None,
    })
}

/// Whose a hold is, by HTCondor's hold reason code (the manual's table of
/// `HoldReasonCode`s). The site's, where another site may run the job: the
/// gridmanager's own holds (0: it could not hand the job to that site's
/// resource, e.g. spool its input there), a grid resource's error (2), the
/// execute side could not start the job or reach its files there (6, 8,
/// 10, 11, 13, 14, 18), a site's hook, account, shadow, container or
/// policy refused it (19, 21, 23, 24, 26–31, 35, 45), or the site caps the
/// input it takes (32). The job's, which would hold it anywhere: its user
/// or its own policy (1, 3, 5, 15), its credential (4), its timing (20,
/// 25) or its limits (33, 34, 36, 46, 47). The rest is not known (output
/// that failed to come back, 7, 9, 12, which the job may not have written;
/// the submit side's own log, 22; spooling, 16; codes this table lacks)
/// and counts as a failed attempt, as every hold once did.
pub fn hold_cause(code: i64) -> HoldCause {
    match code {
        0 | 2 | 6 | 8 | 10 | 11 | 13 | 14 | 18 | 19 | 21 | 23 | 24 | 26..=32 | 35 | 45 => HoldCause::Site,
        1 | 3 | 4 | 5 | 15 | 20 | 25 | 33 | 34 | 36 | 46 | 47 => HoldCause::Job,
        _ => HoldCause::Unknown,
    }
}

impl CondorSite {
    /// Submits `jobs`, all of kind `kind`, as one batch: intent, submit
    /// file, `condor_submit` (retried while the schedd does not answer),
    /// outcome.
    async fn submit_batch(&mut self, kind: JobTypeId, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        if jobs.is_empty() {
            return Vec::new();
        }
        let batch = format!("{}-b{:05}", self.config.name, self.next_batch);
        self.next_batch += 1;
        let file = Self::submit_file_path(&self.dir, &batch);
        let log = Self::log_path(&self.dir, &self.config.name);
        let name = self.kinds.types().name(kind);
        let text = self.kinds.desc(kind).render_batch(&self.config, &self.run_id, &batch, name, &jobs, &log);
        let written = async {
            tokio::fs::create_dir_all(&self.dir).await?;
            tokio::fs::write(&file, text).await
        }
        .await;
        if let Err(e) = written {
            let error = format!("cannot write the submit file {}: {e}", file.display());
            return vec![SiteEvent::SubmitFailed { jobs, error, permanent: false }];
        }
        self.journal.intent(self.site, &batch, &jobs, &file);
        match self.submit_with_retries(&batch, &file, &jobs).await {
            Ok(Some((procs, at))) => {
                let cluster = procs.first().map_or(-1, |p| p.0);
                for ((c, p), job) in procs.iter().zip(&jobs) {
                    self.procs.insert((*c, *p), *job);
                    self.out.insert(*job, (*c, *p));
                }
                self.journal.submitted(&batch, cluster);
                vec![SiteEvent::Submitted { jobs, at }]
            }
            // The run is stopping with the schedd silent: whether the batch
            // got in stays unknown (its intent is recorded) until `--resume`
            // asks the schedd. The engine no longer listens.
            Ok(None) => Vec::new(),
            Err(error) => {
                let message = error.to_string();
                self.journal.failed(&batch, &message);
                vec![SiteEvent::SubmitFailed {
                    jobs,
                    error: message,
                    permanent: error.kind == ErrorKind::Permanent,
                }]
            }
        }
    }
}

/// `jobs` split by kind, each kind's jobs in their order, the kinds in the
/// order of their first job.
fn by_kind(kinds: &JobKinds, jobs: Vec<JobId>) -> Vec<(JobTypeId, Vec<JobId>)> {
    let types = kinds.types();
    if !types.several() {
        return vec![(JobTypeId(0), jobs)];
    }
    let mut parts: Vec<(JobTypeId, Vec<JobId>)> = Vec::new();
    for job in jobs {
        let kind = types.of(job);
        match parts.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, part)) => part.push(job),
            None => parts.push((kind, vec![job])),
        }
    }
    parts
}

impl SiteBackend for CondorSite {
    /// Each batch costs a `condor_submit` process (a fork of cosched and an
    /// exec): under load, merging what queued up is what keeps up.
    fn merges_submits(&self) -> bool {
        true
    }

    fn cursor(&self) -> Option<SiteCursor> {
        Some(SiteCursor { log_offset: self.follower.offset(), batches: self.next_batch })
    }

    async fn submit(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        let mut events = Vec::new();
        for (kind, jobs) in by_kind(&self.kinds, jobs) {
            events.extend(self.submit_batch(kind, jobs).await);
            if self.stop.is_cancelled() {
                // The run is stopping: the kinds not sent yet stay unsent,
                // as a submission the engine never got to would.
                break;
            }
        }
        events
    }

    async fn remove(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        let now = self.now();
        for job in &jobs {
            self.later.remove(job);
            if self.out.contains_key(job) {
                self.unconfirmed.entry(*job).or_insert(now);
            }
        }
        // The removals themselves are reported by the log (009), like
        // everything else.
        self.remove_now(&jobs).await
    }

    async fn withdraw(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
        self.withdraw_now(&jobs).await
    }

    async fn next_events(&mut self) -> Vec<SiteEvent> {
        loop {
            if self.later.is_empty() && self.unconfirmed.is_empty() {
                self.later_due = None;
            } else if self.later_due.is_none() {
                self.later_due = Some(tokio::time::Instant::now() + LATER_EVERY);
            }
            let due = self.later_due;
            let next = tokio::select! {
                biased;
                got = self.follower.next() => Some(got),
                _ = async { tokio::time::sleep_until(due.expect("guarded")).await }, if due.is_some() => None,
            };
            let Some(got) = next else {
                // Removals are idempotent, so being cancelled half-way
                // through here only means asking again.
                self.later_due = None;
                let events = self.retry_later().await;
                if !events.is_empty() {
                    return events;
                }
                continue;
            };
            match got {
                Ok(events) => {
                    for d in self.follower.take_diagnostics() {
                        tracing::warn!(site = %self.config.name, "{}", d.located(self.follower.path()));
                    }
                    let translated = self.translate(events);
                    self.journal.log_offset(self.site, self.follower.offset());
                    if !translated.is_empty() {
                        return translated;
                    }
                }
                Err(e) => {
                    tracing::warn!(site = %self.config.name, "reading the user log: {e}");
                    tokio::time::sleep(self.condor.poll_interval()).await;
                }
            }
        }
    }
}

/// The remote schedd's `JobStatus` of each Condor-C job that has a remote
/// copy, by local proc (-1: not in the remote queue). Empty when the remote
/// schedd cannot be asked (another grid type, no credentials for it, down):
/// callers then rely on the local copy.
async fn remote_states<'a>(
    condor: &Condor,
    site: &str,
    ads: impl Iterator<Item = &'a LocalAd>,
) -> BTreeMap<(i64, i64), i64> {
    let mut out = BTreeMap::new();
    for ((schedd, pool), pairs) in by_remote_schedd(ads) {
        let remotes: Vec<(i64, i64)> = pairs.iter().map(|p| p.1).collect();
        let asked =
            condor.query_remote(&schedd, &pool, &procs_constraint(&remotes), &REMOTE_STATUS_ATTRIBUTES).await;
        match asked {
            Ok(ads) => {
                let seen = job_statuses(&ads);
                for (local, remote) in pairs {
                    out.insert(local, seen.get(&remote).copied().unwrap_or(-1));
                }
            }
            Err(e) => tracing::debug!(site, "asking the remote schedd {schedd}: {e}"),
        }
    }
    out
}

/// What a remote copy's status is read from.
const REMOTE_STATUS_ATTRIBUTES: [&str; 4] = ["ClusterId", "ProcId", "JobStatus", "HoldReasonCode"];

/// The status [`job_statuses`] gives a copy held while the gridmanager
/// spools its input to it (`JobStatus` 5, `HoldReasonCode` 16): a Condor-C
/// job still being forwarded, not one held for a cause. Removed now, its
/// stage-in fails ("Failed to receive GoAhead") and the local copy is held
/// ("Job disappeared from remote schedd").
const SPOOLING: i64 = -2;

/// `JobStatus` by (cluster, proc) of `condor_q -json` ads, [`SPOOLING`]
/// for a copy held for its input's spooling.
fn job_statuses(ads: &[serde_json::Value]) -> BTreeMap<(i64, i64), i64> {
    ads.iter()
        .filter_map(|ad| {
            let id = (ad.get("ClusterId")?.as_i64()?, ad.get("ProcId")?.as_i64()?);
            let status = ad.get("JobStatus")?.as_i64()?;
            let spooling =
                status == 5 && ad.get("HoldReasonCode").and_then(serde_json::Value::as_i64) == Some(16);
            Some((id, if spooling { SPOOLING } else { status }))
        })
        .collect()
}

/// Condor-C jobs with a remote copy, by (remote schedd, pool): (local proc,
/// remote proc) pairs.
type RemotePairs = BTreeMap<(String, String), Vec<((i64, i64), (i64, i64))>>;

fn by_remote_schedd<'a>(ads: impl Iterator<Item = &'a LocalAd>) -> RemotePairs {
    let mut by_schedd = RemotePairs::new();
    for ad in ads {
        if let Some((schedd, pool, remote)) = ad.condor_c_remote() {
            by_schedd.entry((schedd, pool)).or_default().push((ad.proc, remote));
        }
    }
    by_schedd
}

/// Removes the copies of run `run_id`'s jobs that the gridmanager left at
/// the remote schedd of each Condor-C site in `sites` and that are not
/// running (a local copy removed while it was being forwarded leaves its
/// remote copy held, "Spooling input data files", for good). Called once
/// every job of the run has settled, when no remote copy is still wanted.
/// Returns how many were removed; a schedd that cannot be asked is warned
/// about and skipped.
pub async fn remove_forwarded_leftovers(condor: &Condor, run_id: &str, sites: &[SiteConfig]) -> usize {
    let run = crate::submit_desc::plain_id(run_id);
    // Forwarded copies carry the run's attributes and SubmitterGlobalJobId;
    // the run's own jobs never carry the latter.
    let constraint = format!(
        "CoschedRun == \"{run}\" && SubmitterGlobalJobId =!= undefined && (JobStatus == 1 || JobStatus == 5)"
    );
    let mut schedds = std::collections::BTreeSet::new();
    for site in sites {
        let Some(grid) = &site.grid_resource else { continue };
        if let ["condor", schedd, pool] = grid.raw.split_whitespace().collect::<Vec<_>>()[..] {
            schedds.insert((site.name.clone(), schedd.to_string(), pool.to_string()));
        }
    }
    let mut removed = 0;
    for (site, schedd, pool) in schedds {
        let left = match condor.query_remote(&schedd, &pool, &constraint, &["ClusterId", "ProcId"]).await {
            Ok(ads) => ads.len(),
            Err(e) => {
                tracing::warn!(site, "cannot look for copies left at the remote schedd {schedd}: {e}");
                continue;
            }
        };
        if left == 0 {
            continue;
        }
        match condor.remove_remote(&schedd, &pool, &constraint).await {
            Ok(()) => {
                tracing::info!(site, "removed {left} copies of this run's jobs that HTCondor left at {schedd}");
                removed += left;
            }
            Err(e) => tracing::warn!(
                site,
                "{left} copies of this run's jobs are left at the remote schedd {schedd} and cannot be removed: {e}"
            ),
        }
    }
    removed
}

/// `(ClusterId == C && ProcId == P) || …`: our own jobs by the ids HTCondor
/// gave them (an attribute like `CoschedRun` would also match the copies
/// Condor-C forwards to a remote schedd, and on a pool that is its own
/// remote, those are in the same queue).
fn procs_constraint(procs: &[(i64, i64)]) -> String {
    let mut by_cluster: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (c, p) in procs {
        by_cluster.entry(*c).or_default().push(*p);
    }
    let terms: Vec<String> = by_cluster
        .iter()
        .flat_map(|(c, ps)| ps.iter().map(move |p| format!("(ClusterId == {c} && ProcId == {p})")))
        .collect();
    if terms.is_empty() {
        "false".to_string()
    } else {
        terms.join(" || ")
    }
}

/// What the local queue says about one of our jobs.
#[derive(Clone, Debug, PartialEq)]
struct LocalAd {
    proc: (i64, i64),
    status: i64,
    grid_job_id: Option<String>,
    grid_job_status: Option<String>,
    managed: bool,
}

/// What to do with a job asked back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// It started (or finished): leave it, say so.
    Started,
    /// Not started: remove it (only if still idle then).
    NotStarted,
    /// Cannot tell yet, or cannot remove safely yet: ask again later.
    Wait,
    /// Held: it runs nothing, so remove it. Its hold may be heard already
    /// (by a cosched that died before removing it, or swallowed as the hold
    /// of a copy taken back), and then its log says nothing more until it
    /// is removed: left alone, it would stay held and asked back forever.
    Held,
    /// Being removed: its 009 tells the policy.
    LeftToLog,
}

impl LocalAd {
    fn read(ad: &serde_json::Value) -> Option<((i64, i64), LocalAd)> {
        let proc = (ad.get("ClusterId")?.as_i64()?, ad.get("ProcId")?.as_i64()?);
        let text = |k: &str| ad.get(k).and_then(serde_json::Value::as_str).map(str::to_string);
        Some((
            proc,
            LocalAd {
                proc,
                status: ad.get("JobStatus")?.as_i64()?,
                grid_job_id: text("GridJobId"),
                grid_job_status: text("GridJobStatus"),
                managed: text("Managed").as_deref() == Some("External"),
            },
        ))
    }

    /// `(schedd, pool, remote proc)` of a Condor-C job's remote copy, from
    /// `GridJobId = "condor SCHEDD POOL C.P"`.
    fn condor_c_remote(&self) -> Option<(String, String, (i64, i64))> {
        let words: Vec<&str> = self.grid_job_id.as_deref()?.split_whitespace().collect();
        let ["condor", schedd, pool, id] = words[..] else { return None };
        let (c, p) = id.split_once('.')?;
        Some((schedd.to_string(), pool.to_string(), (c.parse().ok()?, p.parse().ok()?)))
    }

    /// `remote`: the remote copy's JobStatus when the remote schedd answered
    /// (-1: not in its queue). `waited`: seconds since the withdrawal was
    /// first asked for.
    fn verdict(&self, remote: Option<i64>, resource_down: bool, waited: f64) -> Verdict {
        match self.status {
            // running, completed, transferring output, suspended
            2 | 4 | 6 | 7 => return Verdict::Started,
            1 => {}
            5 => return Verdict::Held,
            _ => return Verdict::LeftToLog,
        }
        let grid_started = matches!(
            self.grid_job_status.as_deref().map(str::to_ascii_uppercase).as_deref(),
            Some("RUNNING" | "COMPLETED" | "TRANSFERRING_OUTPUT" | "SUSPENDED" | "STAGE_OUT")
        );
        if grid_started {
            return Verdict::Started;
        }
        match remote {
            // The remote copy runs or ran: the local copy just has not heard.
            Some(2 | 4 | 6 | 7) => return Verdict::Started,
            // Gone from the remote queue while the local copy waits: it may
            // have finished there; the next poll tells. Or still being
            // forwarded, its input spooled to it: wait for the spooling to
            // end, as for its remote id below.
            Some(-1 | SPOOLING) if waited < FORWARD_PATIENCE => return Verdict::Wait,
            _ => {}
        }
        // Managed by the gridmanager, no remote id yet: it may be creating
        // the remote copy right now, and a removal then leaves that copy
        // held ("Spooling input data files") at the remote schedd. Unless
        // the resource is down (nothing can be created there), wait for the
        // remote id, but not forever.
        if self.managed && self.grid_job_id.is_none() && !resource_down && waited < FORWARD_PATIENCE {
            return Verdict::Wait;
        }
        Verdict::NotStarted
    }
}

/// The procs of a submitted range, one per job, in job order.
fn procs_of(range: ClusterRange, n_jobs: usize) -> Vec<(i64, i64)> {
    if range.count() != n_jobs as u64 {
        tracing::warn!("condor_submit made {} job(s) for a batch of {n_jobs}", range.count());
    }
    (0..n_jobs as i64).map(|k| (range.cluster, range.first + k)).collect()
}

/// Matches the ads of a batch found in the queue to its jobs (by the
/// `CoschedJob` attribute, else by proc order); `None` unless every job is there.
fn match_found(found: &[(i64, i64, Option<u64>)], jobs: &[JobId]) -> Option<Vec<(i64, i64)>> {
    if found.len() < jobs.len() || jobs.is_empty() {
        return None;
    }
    let mut sorted: Vec<_> = found.to_vec();
    sorted.sort();
    jobs.iter()
        .enumerate()
        .map(|(k, job)| match sorted.iter().find(|(_, _, j)| *j == Some(job.0)) {
            Some((c, p, _)) => Some((*c, *p)),
            None => sorted.get(k).map(|(c, p, _)| (*c, *p)),
        })
        .collect()
}

/// Seconds to wait before retry `attempt` (0-based) of `batch`: exponential
/// from 2 s, capped at 60 s, with ±25% jitter from a hash (no clock, no RNG,
/// so sites retrying together still spread out).
pub fn backoff(batch: &str, attempt: u32) -> f64 {
    let base = (2.0 * 2f64.powi(attempt.min(10) as i32)).min(60.0);
    // FNV-1a over the batch name and the attempt.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in batch.bytes().chain(attempt.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let frac = (h >> 11) as f64 / (1u64 << 53) as f64;
    base * (0.75 + 0.5 * frac)
}

/// Per site, the first batch number not used by a submit file already in
/// `dir` (a resumed run continues after the files of the earlier one; pass
/// each site's to [`CondorSite::new`], 0 for a site without files). One read
/// of the directory for all sites: a long run leaves hundreds of thousands
/// of submit files there.
pub fn first_free_batches(dir: &Path) -> BTreeMap<String, u64> {
    let mut next = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return next };
    for entry in entries.filter_map(|e| e.ok()) {
        let Ok(name) = entry.file_name().into_string() else { continue };
        let Some(batch) = name.strip_suffix(".sub") else { continue };
        let (Some((site, _)), Some(number)) = (batch.rsplit_once("-b"), batch_number(batch)) else {
            continue;
        };
        let free = next.entry(site.to_string()).or_insert(0);
        *free = (*free).max(number + 1);
    }
    next
}

/// The number of a batch named as [`CondorSite`] names them (`site-b00042`).
pub fn batch_number(batch: &str) -> Option<u64> {
    batch.rsplit_once("-b")?.1.parse().ok()
}

fn other_text(body: &EventBody) -> String {
    match body {
        EventBody::Other { text, body } => format!("{} {}", text.trim(), body.trim()).trim().to_string(),
        other => format!("{other:?}"),
    }
}

/// The submit host's UTC offset (seconds east) at a naive local time, as log
/// stamps without `Z` are written in local time.
fn local_offset_at(naive_unix: i64) -> i64 {
    use chrono::{Offset, TimeZone};
    let Some(naive) = chrono::DateTime::from_timestamp(naive_unix, 0).map(|d| d.naive_utc()) else {
        return 0;
    };
    chrono::Local
        .offset_from_local_datetime(&naive)
        .earliest()
        .map_or(0, |o| i64::from(o.fix().local_minus_utc()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condor::testing::{args, replay, script};
    use crate::config::{CondorSettings, GridResource};
    use std::sync::Mutex;

    #[test]
    fn backoff_grows_and_stays_within_jitter() {
        for attempt in 0..8 {
            let base = (2.0 * 2f64.powi(attempt as i32)).min(60.0);
            let d = backoff("site-b00003", attempt);
            assert!(d >= base * 0.75 && d <= base * 1.25, "attempt {attempt}: {d} vs base {base}");
        }
        assert_ne!(backoff("a-b00001", 1), backoff("b-b00001", 1), "jitter depends on the batch");
    }

    #[test]
    fn a_remote_copy_held_for_its_input_spooling_is_told_from_one_held_for_a_cause() {
        let ads: Vec<serde_json::Value> = serde_json::from_str(
            r#"[{"ClusterId": 9, "ProcId": 0, "JobStatus": 5, "HoldReasonCode": 16},
                {"ClusterId": 9, "ProcId": 1, "JobStatus": 5, "HoldReasonCode": 13},
                {"ClusterId": 9, "ProcId": 2, "JobStatus": 5},
                {"ClusterId": 9, "ProcId": 3, "JobStatus": 1, "HoldReasonCode": 16}]"#,
        )
        .unwrap();
        let statuses = job_statuses(&ads);
        assert_eq!(statuses[&(9, 0)], SPOOLING);
        assert_eq!(statuses[&(9, 1)], 5);
        assert_eq!(statuses[&(9, 2)], 5);
        assert_eq!(statuses[&(9, 3)], 1, "a code left from an earlier hold, released since");
    }

    #[test]
    fn found_batch_matches_jobs_by_cosched_job() {
        let jobs = [JobId(7), JobId(3)];
        let found = [(40, 1, Some(3)), (40, 0, Some(7))];
        assert_eq!(match_found(&found, &jobs), Some(vec![(40, 0), (40, 1)]));
        assert_eq!(match_found(&found[..1], &jobs), None, "a partial batch is not a submitted batch");
        assert_eq!(match_found(&[], &jobs), None);
    }

    /// Records journal calls as lines.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Recorder {
        fn lines(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    impl SubmitJournal for Recorder {
        fn intent(&mut self, site: SiteId, batch: &str, jobs: &[JobId], submit_file: &Path) {
            let jobs: Vec<u64> = jobs.iter().map(|j| j.0).collect();
            assert!(submit_file.exists(), "the submit file is written before the intent is recorded");
            self.0.lock().unwrap().push(format!("intent {} {batch} {jobs:?}", site.0));
        }
        fn submitted(&mut self, batch: &str, cluster: i64) {
            self.0.lock().unwrap().push(format!("submitted {batch} {cluster}"));
        }
        fn failed(&mut self, batch: &str, _error: &str) {
            self.0.lock().unwrap().push(format!("failed {batch}"));
        }
        fn log_offset(&mut self, site: SiteId, offset: u64) {
            self.0.lock().unwrap().push(format!("offset {} {offset}", site.0));
        }
    }

    struct Setup {
        _tmp: tempfile::TempDir,
        bin: PathBuf,
        state: PathBuf,
        journal: Recorder,
    }

    fn setup() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let state = tmp.path().join("state");
        Setup { bin, state, journal: Recorder::default(), _tmp: tmp }
    }

    fn site_config() -> SiteConfig {
        SiteConfig {
            grid_resource: Some(GridResource::parse("condor ce.example.org ce.example.org:9619").unwrap()),
            ..SiteConfig::named("ce")
        }
    }

    fn backend(s: &Setup, timeout: f64, epoch_unix: f64, known: Vec<(i64, Vec<JobId>)>) -> CondorSite {
        let desc =
            crate::submit_desc::parse(Path::new("/jobs/job.sub"), "executable = /bin/true\nqueue\n").unwrap();
        backend_of(s, JobKinds::single(desc, 100), timeout, epoch_unix, known)
    }

    fn backend_of(
        s: &Setup,
        kinds: JobKinds,
        timeout: f64,
        epoch_unix: f64,
        known: Vec<(i64, Vec<JobId>)>,
    ) -> CondorSite {
        let condor = Condor::new(&CondorSettings {
            bin_dir: Some(s.bin.clone()),
            submit_timeout: timeout,
            ..Default::default()
        });
        CondorSite::new(
            SiteId(1),
            site_config(),
            Arc::new(kinds),
            Arc::new(condor),
            "run1".into(),
            s.state.clone(),
            epoch_unix,
            Box::new(s.journal.clone()),
            known,
            0,
            first_free_batches(&s.state).get("ce").copied().unwrap_or(0),
        )
        .with_clock(RunClock::starting_at(100.0))
        .with_backoff_scale(0.001)
    }

    fn jobs(range: std::ops::Range<u64>) -> Vec<JobId> {
        range.map(JobId).collect()
    }

    /// Unix time of a naive local time stamp `2026-11-21T05:00:00`-style.
    fn local_unix(iso: &str) -> f64 {
        use chrono::TimeZone;
        let naive = chrono::NaiveDateTime::parse_from_str(iso, "%Y-%m-%dT%H:%M:%S").unwrap();
        chrono::Local.from_local_datetime(&naive).earliest().unwrap().timestamp() as f64
    }

    async fn collect(site: &mut CondorSite, n: usize) -> Vec<SiteEvent> {
        let mut got = Vec::new();
        while got.len() < n {
            let more = tokio::time::timeout(std::time::Duration::from_secs(20), site.next_events())
                .await
                .unwrap_or_else(|_| panic!("only {} of {n} events arrived: {got:?}", got.len()));
            assert!(!more.is_empty(), "an empty batch means the backend is finished");
            got.extend(more);
        }
        got
    }

    /// What HTCondor's own reader says the translated events must be: the
    /// reference dump beside each fixture log.
    fn expected_from_reference(log: &str, known: &[(i64, Vec<JobId>)], epoch_unix: f64) -> Vec<SiteEvent> {
        let text = std::fs::read_to_string(
            crate::condor::testing::fixtures().join(format!("../userlogs/{log}.ref.jsonl")),
        )
        .unwrap();
        let mut out = Vec::new();
        for line in text.lines() {
            let e: serde_json::Value = serde_json::from_str(line).unwrap();
            let (cluster, proc) = (e["cluster"].as_i64().unwrap(), e["proc"].as_i64().unwrap());
            let Some(job) = known
                .iter()
                .find(|(c, _)| *c == cluster)
                .and_then(|(_, jobs)| jobs.get(proc as usize))
                .copied()
            else {
                continue;
            };
            let at = local_unix(e["time"].as_str().unwrap()) - epoch_unix;
            let attrs = &e["attrs"];
            out.push(match e["type"].as_i64().unwrap() {
                1 => SiteEvent::Started { job, at },
                5 => {
                    let outcome = if attrs["TerminatedNormally"] == true {
                        match attrs["ReturnValue"].as_i64().unwrap() {
                            0 => Outcome::Success,
                            code => Outcome::Failed { detail: format!("exit code {code}") },
                        }
                    } else {
                        Outcome::Failed {
                            detail: format!("killed by signal {}", attrs["TerminatedBySignal"]),
                        }
                    };
                    SiteEvent::Ended { job, at, outcome }
                }
                9 => SiteEvent::Removed { job, at },
                12 => SiteEvent::Held {
                    job,
                    at,
                    reason: format!(
                        "{} (code {}, subcode {})",
                        attrs["HoldReason"].as_str().unwrap(),
                        attrs["HoldReasonCode"],
                        attrs["HoldReasonSubCode"]
                    ),
                    cause: hold_cause(attrs["HoldReasonCode"].as_i64().unwrap()),
                },
                _ => continue,
            });
        }
        out
    }

    #[tokio::test]
    async fn a_batch_of_two_kinds_is_one_condor_submit_per_kind_each_recorded_before_it_runs() {
        let s = setup();
        // Each call queues the next cluster of two procs: 40, then 41.
        let next = s.bin.join("next");
        script(
            &s.bin,
            "condor_submit",
            &format!(
                "n=$(cat '{c}' 2>/dev/null || echo 40); echo $((n + 1)) > '{c}'; echo \"$n.0 - $n.1\"",
                c = next.display()
            ),
        );
        let desc = |exe: &str| {
            crate::submit_desc::parse(Path::new("/jobs/k.sub"), &format!("executable = {exe}\nqueue\n"))
                .unwrap()
        };
        // Two of each, interleaved: 0 and 2 are io, 1 and 3 cpu.
        let kinds =
            JobKinds::new(vec![("io".into(), 2, desc("/bin/io")), ("cpu".into(), 2, desc("/bin/cpu"))])
                .unwrap();
        let mut site = backend_of(&s, kinds, 30.0, 0.0, vec![]);
        let out = site.submit(jobs(0..4)).await;
        let submitted: Vec<Vec<u64>> = out
            .iter()
            .map(|e| match e {
                SiteEvent::Submitted { jobs, .. } => jobs.iter().map(|j| j.0).collect(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(submitted, [vec![0, 2], vec![1, 3]]);
        assert_eq!(
            s.journal.lines(),
            [
                "intent 1 ce-b00000 [0, 2]",
                "submitted ce-b00000 40",
                "intent 1 ce-b00001 [1, 3]",
                "submitted ce-b00001 41"
            ]
        );
        for (batch, kind) in [("ce-b00000", "io"), ("ce-b00001", "cpu")] {
            let text = std::fs::read_to_string(CondorSite::submit_file_path(&s.state, batch)).unwrap();
            assert!(text.contains(&format!("executable = /bin/{kind}\n")), "{batch}: {text}");
            assert!(text.contains(&format!("+CoschedType = \"{kind}\"\n")), "{batch}: {text}");
        }
        assert_eq!(site.out.get(&JobId(3)), Some(&(41, 1)), "procs map to each cluster's jobs in order");
    }

    #[tokio::test]
    async fn submits_then_reads_its_jobs_from_the_log() {
        let s = setup();
        script(&s.bin, "condor_submit", "echo '33.0 - 33.7'");
        script(&s.bin, "condor_rm", "echo 'Job 33.5 marked for removal'");
        let epoch = local_unix("2026-11-21T05:03:00");
        let mut site = backend(&s, 30.0, epoch, vec![]);
        let batch = jobs(10..18);
        let out = site.submit(batch.clone()).await;
        let [SiteEvent::Submitted { jobs: submitted, at }] = out.as_slice() else { panic!("{out:?}") };
        assert_eq!(submitted, &batch);
        assert!((100.0..200.0).contains(at), "`at` is read from the run clock: {at}");
        let file = CondorSite::submit_file_path(&s.state, "ce-b00000");
        assert_eq!(args(&s.bin, "condor_submit"), ["-terse".to_string(), file.display().to_string()]);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("queue CoschedJob from (\n10\n11\n12\n13\n14\n15\n16\n17\n)\n"), "{text}");
        assert!(
            text.contains(&format!("log = {}", CondorSite::log_path(&s.state, "ce").display())),
            "{text}"
        );
        assert_eq!(
            s.journal.lines(),
            ["intent 1 ce-b00000 [10, 11, 12, 13, 14, 15, 16, 17]", "submitted ce-b00000 33"]
        );

        // HTCondor writes the log; clusters 34 and 35 are not ours.
        let log = crate::condor::testing::fixtures().join("../userlogs/grid-condorc.log");
        std::fs::copy(&log, CondorSite::log_path(&s.state, "ce")).unwrap();
        let known = vec![(33, batch.clone())];
        let expected = expected_from_reference("grid-condorc", &known, epoch);
        assert_eq!(expected.len(), 16, "8 starts and 8 ends in cluster 33");
        assert_eq!(collect(&mut site, expected.len()).await, expected);
        let size = std::fs::metadata(&log).unwrap().len();
        assert_eq!(s.journal.lines().last().unwrap(), &format!("offset 1 {size}"));

        // Finished jobs are not removed again; the others are, in one call.
        site.remove(vec![JobId(12)]).await;
        assert!(args(&s.bin, "condor_rm").is_empty(), "job 12 already ended");
        site.out.insert(JobId(15), (33, 5));
        site.out.insert(JobId(16), (33, 6));
        assert!(site.remove(vec![JobId(15), JobId(16), JobId(99)]).await.is_empty());
        // By our own ids, never by an attribute forwarded copies share.
        assert_eq!(
            args(&s.bin, "condor_rm"),
            ["-constraint", "(ClusterId == 33 && ProcId == 5) || (ClusterId == 33 && ProcId == 6)"]
        );
    }

    /// Under load the gridmanager can write a Condor-C job's start after
    /// the schedd wrote its removal (seen once in CI: the run counted no
    /// execution cut short, `cosched log report` on its logs two). A start
    /// stamped before the removal is told, once; one stamped after it, or
    /// for a job out here again under a later proc, is not.
    #[tokio::test]
    async fn a_start_written_after_the_removal_and_stamped_before_it_is_told() {
        let s = setup();
        let epoch = local_unix("2026-11-21T05:03:00");
        let mut site = backend(&s, 30.0, epoch, vec![(40, jobs(0..3))]);
        let event = |code: &str, proc: u32, at: &str, text: &str| {
            format!("{code} (040.{proc:03}.000) 2026-11-21 05:03:{at} {text}\n...\n")
        };
        let aborted = "Job was aborted.\n\tVia condor_rm (by user root)";
        let executing = "Job executing on host: condor personal@vm 127.0.0.1:9618";
        let removals: String = (0..3)
            .flat_map(|p| {
                [
                    event("000", p, "01", "Job submitted from host: <127.0.0.1:7341>"),
                    event("009", p, "20", aborted),
                ]
            })
            .collect();
        let path = CondorSite::log_path(&s.state, "ce");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, removals).unwrap();
        let got = collect(&mut site, 3).await;
        assert_eq!(got, (0..3).map(|j| SiteEvent::Removed { job: JobId(j), at: 20.0 }).collect::<Vec<_>>());
        // Job 2 is out here again, as 41.0, when the late starts are written.
        site.procs.insert((41, 0), JobId(2));
        site.out.insert(JobId(2), (41, 0));
        let late: String = [
            event("001", 0, "13", executing),
            event("001", 0, "14", executing),
            event("001", 1, "21", executing),
            event("001", 2, "15", executing),
        ]
        .concat();
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut file, late.as_bytes()).unwrap();
        assert_eq!(collect(&mut site, 1).await, [SiteEvent::Started { job: JobId(0), at: 13.0 }]);
    }

    #[test]
    fn holds_of_the_site_its_input_or_executable_are_told_from_the_jobs_own() {
        use crate::policy::HoldCause::{Job, Site, Unknown};
        // The gridmanager's spooling failure (a Condor-C site without the
        // input, on the real pool), input transfer, executable missing.
        for code in [0, 13, 6, 26] {
            assert_eq!(hold_cause(code), Site, "code {code}");
        }
        // periodic_hold, condor_hold, memory past the request.
        for code in [3, 1, 34] {
            assert_eq!(hold_cause(code), Job, "code {code}");
        }
        for code in [12, 16, 99, -1] {
            assert_eq!(hold_cause(code), Unknown, "code {code}");
        }
    }

    #[tokio::test]
    async fn resumed_site_maps_known_clusters_and_held_and_removed_jobs() {
        let s = setup();
        let epoch = local_unix("2026-11-21T05:00:00");
        std::fs::create_dir_all(&s.state).unwrap();
        for (name, known) in [
            ("vanilla-mixed", vec![(19, jobs(0..12)), (20, jobs(12..22)), (21, jobs(22..30))]),
            ("grid-condorc", vec![(33, jobs(100..108)), (34, jobs(200..201)), (35, jobs(300..301))]),
        ] {
            let log = crate::condor::testing::fixtures().join(format!("../userlogs/{name}.log"));
            std::fs::copy(&log, CondorSite::log_path(&s.state, "ce")).unwrap();
            let expected = expected_from_reference(name, &known, epoch);
            let mut site = backend(&s, 30.0, epoch, known);
            assert_eq!(collect(&mut site, expected.len()).await, expected, "{name}");
            assert!(site.out.is_empty(), "{name}: every job ended or was removed: {:?}", site.out);
        }
    }

    /// Report #2: a submit host writing legacy `MM/DD` stamps. The policy's
    /// times are the run's, also for a log that crosses New Year.
    #[tokio::test]
    async fn legacy_stamps_are_dated_from_the_runs_start() {
        let s = setup();
        std::fs::create_dir_all(&s.state).unwrap();
        let epoch = local_unix("2026-11-21T05:00:00");
        let log = crate::condor::testing::fixtures().join("../userlogs/legacy-dates.log");
        std::fs::copy(&log, CondorSite::log_path(&s.state, "ce")).unwrap();
        let known = vec![(47, jobs(0..5))];
        let expected = expected_from_reference("legacy-dates", &known, epoch);
        assert!(!expected.is_empty());
        let mut site = backend(&s, 30.0, epoch, known);
        assert_eq!(collect(&mut site, expected.len()).await, expected);

        let epoch = local_unix("2026-12-31T23:50:00");
        let text = "000 (050.000.000) 12/31 23:58:00 Job submitted from host: <h>\n...\n\
                    001 (050.000.000) 12/31 23:59:00 Job executing on host: <h>\n...\n\
                    005 (050.000.000) 01/01 00:01:00 Job terminated.\n\t(1) Normal termination (return value 0)\n...\n";
        std::fs::write(CondorSite::log_path(&s.state, "ce"), text).unwrap();
        let mut site = backend(&s, 30.0, epoch, vec![(50, jobs(0..1))]);
        assert_eq!(
            collect(&mut site, 2).await,
            [
                SiteEvent::Started { job: JobId(0), at: 540.0 },
                SiteEvent::Ended { job: JobId(0), at: 660.0, outcome: Outcome::Success }
            ]
        );
    }

    /// A script `name` that fails twice as if the schedd were unreachable,
    /// then runs `success`; returns the file counting its calls.
    fn flaky_script(bin: &Path, name: &str, success: &str) -> PathBuf {
        let count = bin.join(format!("{name}.count"));
        script(
            bin,
            name,
            &format!(
                "n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n + 1)) > '{c}'\n\
                 if [ \"$n\" -lt 2 ]; then printf '\\nERROR: Failed to connect to local queue manager\\n' >&2; exit 1; fi\n\
                 {success}",
                c = count.display()
            ),
        );
        count
    }

    #[tokio::test]
    async fn transient_failures_are_retried() {
        let s = setup();
        let count = flaky_script(&s.bin, "condor_submit", "echo '40.0 - 40.1'");
        replay(&s.bin, "condor_q", "condor_q-json-nomatch");
        let mut site = backend(&s, 30.0, 0.0, vec![]);
        let out = site.submit(jobs(3..5)).await;
        assert!(matches!(out.as_slice(), [SiteEvent::Submitted { .. }]), "{out:?}");
        assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "3", "two failures, then success");
        assert_eq!(
            args(&s.bin, "condor_q").iter().filter(|a| *a == "-json").count(),
            2,
            "looked for the batch before each retry"
        );
        assert_eq!(s.journal.lines(), ["intent 1 ce-b00000 [3, 4]", "submitted ce-b00000 40"]);
        assert_eq!(site.procs.get(&(40, 1)), Some(&JobId(4)));
    }

    #[tokio::test]
    async fn transient_condor_rm_failures_are_retried() {
        let s = setup();
        let count = flaky_script(&s.bin, "condor_rm", "echo 'Job 40.1 marked for removal'");
        let mut site = backend(&s, 30.0, 0.0, vec![(40, jobs(3..5))]);
        assert!(site.remove(vec![JobId(4)]).await.is_empty());
        assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "3", "two failures, then success");
        let one = "(ClusterId == 40 && ProcId == 1)";
        assert_eq!(args(&s.bin, "condor_rm"), ["-constraint", one, "-constraint", one, "-constraint", one]);
        // A permanent failure is not retried.
        std::fs::remove_file(&count).unwrap();
        std::fs::remove_file(s.bin.join("condor_rm.args")).unwrap();
        script(&s.bin, "condor_rm", "echo 'ERROR: permission denied' >&2; exit 1");
        site.remove(vec![JobId(3)]).await;
        assert_eq!(args(&s.bin, "condor_rm"), ["-constraint", "(ClusterId == 40 && ProcId == 0)"]);
        assert!(site.later.is_empty(), "a permanent failure is not tried again later");
        // A schedd that stays silent: the removal is kept for later.
        script(
            &s.bin,
            "condor_rm",
            "printf '\\nERROR: Failed to connect to local queue manager\\n' >&2; exit 1",
        );
        site.remove(vec![JobId(4)]).await;
        assert_eq!(site.later.get(&JobId(4)).map(|l| l.0), Some(Later::Remove));
    }

    fn local_ad(status: i64, grid_job_id: Option<&str>, grid_status: Option<&str>, managed: bool) -> LocalAd {
        LocalAd {
            proc: (7, 0),
            status,
            grid_job_id: grid_job_id.map(String::from),
            grid_job_status: grid_status.map(String::from),
            managed,
        }
    }

    #[test]
    fn a_withdrawal_moves_only_jobs_htcondor_says_have_not_started() {
        use Verdict::*;
        let remote_id = Some("condor personal@vm 127.0.0.1:9618 12.0");
        // Vanilla: the local status is the truth.
        assert_eq!(local_ad(1, None, None, false).verdict(None, false, 0.0), NotStarted);
        assert_eq!(local_ad(2, None, None, false).verdict(None, false, 0.0), Started);
        assert_eq!(local_ad(4, None, None, false).verdict(None, false, 0.0), Started);
        assert_eq!(local_ad(5, None, None, false).verdict(None, false, 0.0), Held);
        assert_eq!(local_ad(3, None, None, false).verdict(None, false, 0.0), LeftToLog);
        // Condor-C: the remote copy runs though the local copy has not heard.
        assert_eq!(local_ad(1, remote_id, Some("IDLE"), true).verdict(Some(2), false, 0.0), Started);
        assert_eq!(local_ad(1, remote_id, Some("IDLE"), true).verdict(Some(4), false, 0.0), Started);
        assert_eq!(local_ad(1, remote_id, Some("IDLE"), true).verdict(Some(1), false, 0.0), NotStarted);
        // Held remotely for a cause has not started either; held while its
        // input is spooled to it, it is still being forwarded: wait, but
        // not forever.
        assert_eq!(local_ad(1, remote_id, None, true).verdict(Some(5), false, 0.0), NotStarted);
        assert_eq!(local_ad(1, remote_id, None, true).verdict(Some(SPOOLING), false, 0.0), Wait);
        assert_eq!(
            local_ad(1, remote_id, None, true).verdict(Some(SPOOLING), false, FORWARD_PATIENCE),
            NotStarted
        );
        // The remote schedd cannot be asked: the gridmanager's last poll.
        assert_eq!(local_ad(1, remote_id, Some("RUNNING"), true).verdict(None, false, 0.0), Started);
        assert_eq!(local_ad(1, remote_id, Some("IDLE"), true).verdict(None, false, 0.0), NotStarted);
        // Gone from the remote queue: it may have finished there; wait.
        assert_eq!(local_ad(1, remote_id, Some("IDLE"), true).verdict(Some(-1), false, 0.0), Wait);
        // Being forwarded (managed, no remote id): a removal now would leave
        // a held copy at the remote schedd. Wait, unless the resource is down,
        // and not forever.
        assert_eq!(local_ad(1, None, None, true).verdict(None, false, 0.0), Wait);
        assert_eq!(local_ad(1, None, None, true).verdict(None, true, 0.0), NotStarted);
        assert_eq!(local_ad(1, None, None, true).verdict(None, false, FORWARD_PATIENCE), NotStarted);
        // Not yet picked up by the gridmanager: nothing was forwarded.
        assert_eq!(local_ad(1, None, None, false).verdict(None, false, 0.0), NotStarted);
    }

    #[test]
    fn a_removal_waits_for_copies_still_being_forwarded_or_spooled() {
        let remote_id = Some("condor personal@vm 127.0.0.1:9618 12.3");
        let ad = |proc: (i64, i64), status, grid_id: Option<&str>, grid_status: Option<&str>| LocalAd {
            proc,
            ..local_ad(status, grid_id, grid_status, true)
        };
        let local = [
            ad((1, 0), 1, None, None),              // no remote id yet
            ad((1, 1), 1, remote_id, None),         // its input being spooled
            ad((1, 2), 1, remote_id, Some("IDLE")), // forwarded, idle there
            ad((1, 3), 1, remote_id, Some("IDLE")), // runs there, unknown here
            ad((1, 4), 2, remote_id, Some("RUNNING")),
            ad((1, 5), 1, remote_id, Some("COMPLETED")),
            ad((1, 6), 1, remote_id, None), // finished there
        ];
        let remote = BTreeMap::from([((1, 1), SPOOLING), ((1, 2), 1), ((1, 3), 2), ((1, 4), 2), ((1, 6), 4)]);
        let progress = RemoteProgress::of(&local, &remote, 30.0, false);
        assert_eq!(progress.forwarding, vec![(1, 0), (1, 1)]);
        assert_eq!(progress.running, vec![((1, 3), 30.0)]);
        assert_eq!(progress.finished, vec![(1, 5), (1, 6)]);
        // With the grid resource down the gridmanager forwards nothing, so
        // nothing is waited for.
        assert!(RemoteProgress::of(&local, &remote, 30.0, true).forwarding.is_empty());
        // Not yet picked up by the gridmanager (not managed): nothing to wait for.
        let unmanaged = [LocalAd { managed: false, ..ad((1, 0), 1, None, None) }];
        assert!(RemoteProgress::of(&unmanaged, &remote, 30.0, false).forwarding.is_empty());
    }

    #[test]
    fn condor_c_remote_ids_are_read_from_grid_job_id() {
        let ad = local_ad(1, Some("condor personal@vm 127.0.0.1:9618 12.3"), None, true);
        assert_eq!(ad.condor_c_remote(), Some(("personal@vm".into(), "127.0.0.1:9618".into(), (12, 3))));
        assert_eq!(local_ad(1, Some("batch slurm 55"), None, true).condor_c_remote(), None);
        assert_eq!(local_ad(1, None, None, true).condor_c_remote(), None);
        assert_eq!(procs_constraint(&[]), "false");
        assert_eq!(
            procs_constraint(&[(9, 1), (3, 0)]),
            "(ClusterId == 3 && ProcId == 0) || (ClusterId == 9 && ProcId == 1)"
        );
    }

    /// Asks jobs 3, 4, … back from a vanilla site whose cluster 40 holds
    /// them and whose condor_q shows proc `p` with status `statuses[p]`;
    /// the last job (one more than `statuses` has) has left the queue.
    /// Returns what the site reported, the `condor_rm` arguments, and the
    /// withdrawals kept for later.
    async fn withdrawn(statuses: &[i64]) -> (Vec<SiteEvent>, Vec<String>, Vec<JobId>) {
        let s = setup();
        let ads: Vec<String> = statuses
            .iter()
            .enumerate()
            .map(|(p, status)| format!(r#"{{"ClusterId": 40, "ProcId": {p}, "JobStatus": {status}}}"#))
            .collect();
        script(&s.bin, "condor_q", &format!("echo '[{}]'", ads.join(", ")));
        script(&s.bin, "condor_rm", "echo ok");
        let asked = jobs(3..4 + statuses.len() as u64);
        let mut site = backend(&s, 30.0, 0.0, vec![(40, asked.clone())]);
        let out = site.withdraw(asked).await;
        (out, args(&s.bin, "condor_rm"), site.later.keys().copied().collect())
    }

    /// Withdrawing: condor_q says which jobs started; only idle ones are
    /// removed, with "idle or held" in the constraint (one held since the
    /// look must go too; one started since must not). Job 5 left the
    /// queue: its log says how.
    #[tokio::test]
    async fn withdraw_asks_condor_q_and_removes_only_idle_jobs() {
        let (out, removed, later) = withdrawn(&[2, 1]).await;
        assert!(matches!(out.as_slice(), [SiteEvent::WithdrawDeclined { job: JobId(3), .. }]), "{out:?}");
        assert_eq!(
            removed,
            ["-constraint", "((ClusterId == 40 && ProcId == 1)) && (JobStatus == 1 || JobStatus == 5)"]
        );
        assert!(later.is_empty(), "{later:?}");
    }

    /// A held job asked back is removed, whatever its log said before: a
    /// resumed cosched (the backend made with `known` clusters, reading its
    /// log from where the dead one stopped) may never read its hold again,
    /// and a job left held would be asked back forever. One being removed
    /// is left to its 009.
    #[tokio::test]
    async fn a_held_job_asked_back_is_removed_though_its_hold_was_read_before() {
        let (out, removed, later) = withdrawn(&[5, 3]).await;
        assert!(out.is_empty(), "none started: {out:?}");
        assert_eq!(removed, ["-constraint", "(ClusterId == 40 && ProcId == 0)"]);
        assert!(later.is_empty(), "{later:?}");
    }

    /// Withdrawing Condor-C jobs: their remote copies are removed at the
    /// remote schedd first, with "not started" in the constraint; one whose
    /// remote copy started in the meantime is declined, not removed.
    #[tokio::test]
    async fn condor_c_withdrawal_takes_remote_copies_back_atomically() {
        let s = setup();
        let asked = s.bin.join("remote.count");
        script(
            &s.bin,
            "condor_q",
            &format!(
                r#"case "$*" in
*-name*)
  n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n + 1)) > '{c}'
  if [ "$n" -eq 0 ]; then
    echo '[{{"ClusterId": 12, "ProcId": 0, "JobStatus": 1}}, {{"ClusterId": 12, "ProcId": 1, "JobStatus": 1}}]'
  else
    echo '[{{"ClusterId": 12, "ProcId": 1, "JobStatus": 2}}]'
  fi ;;
*)
  echo '[{{"ClusterId": 40, "ProcId": 0, "JobStatus": 1, "Managed": "External", "GridJobStatus": "IDLE", "GridJobId": "condor s@h 127.0.0.1:9618 12.0"}},'
  echo ' {{"ClusterId": 40, "ProcId": 1, "JobStatus": 1, "Managed": "External", "GridJobStatus": "IDLE", "GridJobId": "condor s@h 127.0.0.1:9618 12.1"}}]' ;;
esac"#,
                c = asked.display()
            ),
        );
        script(&s.bin, "condor_rm", "echo ok");
        let mut site = backend(&s, 30.0, 0.0, vec![(40, jobs(3..5))]);
        let out = site.withdraw(vec![JobId(3), JobId(4)]).await;
        // 12.1 started between the first look and the removal: declined.
        assert!(matches!(out.as_slice(), [SiteEvent::WithdrawDeclined { job: JobId(4), .. }]), "{out:?}");
        assert_eq!(
            args(&s.bin, "condor_rm"),
            [
                "-name",
                "s@h",
                "-pool",
                "127.0.0.1:9618",
                "-constraint",
                "((ClusterId == 12 && ProcId == 0) || (ClusterId == 12 && ProcId == 1)) && (JobStatus == 1 || JobStatus == 5)",
                // The local copy of 12.0, whatever its status: nothing runs for it now.
                "-constraint",
                "(ClusterId == 40 && ProcId == 0)",
            ]
        );
        assert!(site.later.is_empty());
    }

    /// A removal that did not take (here a `condor_rm` that answers but
    /// leaves the job held, as the gridmanager's hold of a Condor-C copy
    /// whose remote copy went can) is asked again once the log has not
    /// confirmed it within the patience; one the schedd is carrying out
    /// (`JobStatus` 3) is not, and one whose 009 was read is forgotten.
    #[tokio::test]
    async fn a_removal_that_did_not_take_is_asked_again() {
        let s = setup();
        script(
            &s.bin,
            "condor_q",
            r#"echo '[{"ClusterId": 40, "ProcId": 0, "JobStatus": 5}, {"ClusterId": 40, "ProcId": 1, "JobStatus": 3}]'"#,
        );
        script(&s.bin, "condor_rm", "echo ok");
        let mut site = backend(&s, 30.0, 0.0, vec![(40, jobs(3..6))]);
        site.remove(jobs(3..6)).await;
        let first = args(&s.bin, "condor_rm");
        assert_eq!(first.len(), 2, "one condor_rm: {first:?}");
        // Not yet due: nothing is asked.
        assert!(site.audit().await.is_empty());
        assert_eq!(args(&s.bin, "condor_rm"), first);
        // Job 5's 009 confirms its removal.
        let log = "009 (040.002.000) 2026-11-21 05:00:10 Job was aborted.\n\tvia condor_rm\n...\n";
        site.translate(crate::userlog::parse_bytes(log.as_bytes()).0);
        assert!(!site.unconfirmed.contains_key(&JobId(5)));
        for asked in site.unconfirmed.values_mut() {
            *asked -= REMOVAL_PATIENCE + 1.0;
        }
        site.audit().await;
        let all = args(&s.bin, "condor_rm");
        assert_eq!(
            &all[2..],
            ["-constraint", "(ClusterId == 40 && ProcId == 0)"],
            "only the held one: {all:?}"
        );
        // Asked at most once per patience.
        site.audit().await;
        assert_eq!(args(&s.bin, "condor_rm").len(), 4);
    }

    /// 026 and 025 in a site's log become ResourceDown and ResourceUp.
    #[tokio::test]
    async fn grid_resource_down_and_up_reach_the_policy() {
        let s = setup();
        std::fs::create_dir_all(&s.state).unwrap();
        let log = "026 (041.000.000) 2026-11-21 05:00:10 Detected Down Grid Resource\n    GridResource: condor x y\n...\n\
                   025 (041.000.000) 2026-11-21 05:00:40 Grid Resource Back Up\n    GridResource: condor x y\n...\n";
        std::fs::write(CondorSite::log_path(&s.state, "ce"), log).unwrap();
        let epoch = local_unix("2026-11-21T05:00:00");
        let mut site = backend(&s, 30.0, epoch, vec![(41, jobs(0..1))]);
        let got = collect(&mut site, 2).await;
        assert_eq!(
            got,
            [
                SiteEvent::ResourceDown { job: JobId(0), at: 10.0 },
                SiteEvent::ResourceUp { job: JobId(0), at: 40.0 }
            ]
        );
        assert!(!site.resource_down);
    }

    #[tokio::test]
    async fn a_timed_out_submit_that_got_in_is_not_submitted_twice() {
        let s = setup();
        script(&s.bin, "condor_submit", "exec sleep 30");
        script(
            &s.bin,
            "condor_q",
            r#"echo '[{"ClusterId": 41, "CoschedJob": 8, "ProcId": 1}, {"ClusterId": 41, "CoschedJob": 7, "ProcId": 0}]'"#,
        );
        let mut site = backend(&s, 0.3, 0.0, vec![]);
        let out = site.submit(jobs(7..9)).await;
        assert!(matches!(out.as_slice(), [SiteEvent::Submitted { .. }]), "{out:?}");
        assert_eq!(args(&s.bin, "condor_submit").len(), 2, "one call (two arguments), no retry");
        assert_eq!(s.journal.lines().last().unwrap(), "submitted ce-b00000 41");
        assert_eq!((site.procs.get(&(41, 0)), site.procs.get(&(41, 1))), (Some(&JobId(7)), Some(&JobId(8))));
    }

    #[tokio::test]
    async fn permanent_failures_are_reported_at_once() {
        let s = setup();
        replay(&s.bin, "condor_submit", "condor_submit-bad-exe");
        let mut site = backend(&s, 30.0, 0.0, vec![]);
        let out = site.submit(jobs(0..2)).await;
        let [SiteEvent::SubmitFailed { jobs: failed, error, permanent: true }] = out.as_slice() else {
            panic!("{out:?}")
        };
        assert_eq!(failed, &jobs(0..2));
        assert!(error.contains("Can't access executable"), "{error}");
        assert_eq!(args(&s.bin, "condor_submit").len(), 2, "not retried");
        assert_eq!(s.journal.lines(), ["intent 1 ce-b00000 [0, 1]", "failed ce-b00000"]);
        // The next batch gets a new name; so does one made after a restart.
        replay(&s.bin, "condor_submit", "condor_submit-terse");
        site.submit(jobs(0..2)).await;
        assert_eq!(s.journal.lines()[2], "intent 1 ce-b00001 [0, 1]");
        let site = backend(&s, 30.0, 0.0, vec![]);
        assert_eq!(site.next_batch, 2);
    }
}
