//! The engine: runs one policy against one grid, whatever the grid is.
//!
//! Layout of a run (the same for real HTCondor, the simulated grid and tests):
//!
//! ```text
//!            actions                       commands
//!  policy <────────── coordinator ──────────────────> site task × n ──> SiteBackend
//!  (pure)  ──────────>  (this fn)  <──────────────────  (one per site)  (condor_submit +
//!           inputs                   site events                          user log, or sim)
//! ```
//!
//! The coordinator owns the policy and the clock; it is the only place where
//! time is read. Each site task owns its backend and does that site's slow
//! I/O (a `condor_submit` can take seconds), so one slow site never stalls
//! another. Events flow back to the coordinator through one channel and are fed
//! to the policy one at a time.
//!
//! Invariants:
//! - The policy is called from exactly one task, so it needs no locks.
//! - Every `select!` is `biased` so that, under tokio's paused clock, a run is
//!   a deterministic function of its inputs (the simulator relies on this).
//! - The engine never loops forever: past `horizon` it stops and reports a hang.
//! - A site task carries out its commands in the order sent. Submissions
//!   that queued up while its backend was busy may go as one batch
//!   ([`SiteBackend::merges_submits`]): a backend sees one batch either way,
//!   and records and reports it as one, so nothing above it can tell.

pub mod observe;

use crate::policy::{
    Action, Decision, DecisionKind, Input, JobId, JobState, Policy, SiteEvent, SiteId, Time,
};
use std::future::Future;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use observe::{NullObserver, Observer, TraceEntry, TraceRecorder};

/// One site as the engine sees it: somewhere to submit and remove jobs, and a
/// source of events about them. Implemented by the HTCondor backend
/// ([`crate::condor`]) and the simulated grid ([`crate::sim`]).
pub trait SiteBackend: Send + 'static {
    /// Submits `jobs` as one batch. Returns what became of them: normally one
    /// [`SiteEvent::Submitted`], or [`SiteEvent::SubmitFailed`].
    fn submit(&mut self, jobs: Vec<JobId>) -> impl Future<Output = Vec<SiteEvent>> + Send;
    /// Asks the site to remove `jobs`. Returns events known at once (a backend
    /// may also report removals later through [`SiteBackend::next_events`]).
    fn remove(&mut self, jobs: Vec<JobId>) -> impl Future<Output = Vec<SiteEvent>> + Send;
    /// Removes those of `jobs` that have not started at the site, and answers
    /// [`SiteEvent::WithdrawDeclined`] for each job that has: a backend must
    /// find out the job's real state first, never guess it from silence.
    fn withdraw(&mut self, jobs: Vec<JobId>) -> impl Future<Output = Vec<SiteEvent>> + Send;
    /// Waits for the next events. Must be cancel-safe: the site task drops this
    /// future whenever a command arrives, and no event may be lost by that.
    /// An empty vector means the backend has nothing more to say, ever.
    fn next_events(&mut self) -> impl Future<Output = Vec<SiteEvent>> + Send;
    /// Whether submissions that queued up for this site while it was busy
    /// may go as one batch ([`MAX_MERGED_SUBMIT`] jobs at most). Worth it
    /// where each batch costs a process (`condor_submit`); the simulated
    /// backends keep the batches the policy made, so that `cosched bench`
    /// measures the policy alone.
    fn merges_submits(&self) -> bool {
        false
    }
    /// How far this backend's reports have got, for a checkpoint; asked
    /// after each report and once before the first. `None` for a backend
    /// whose run cannot resume (the simulated grids).
    fn cursor(&self) -> Option<SiteCursor> {
        None
    }
}

/// How far a site's reports have got: every event its user log holds before
/// `log_offset`, and the outcome of each of its batches numbered below
/// `batches`, has been reported. A checkpoint keeps one per site, taken
/// with the policy's state at the same instant, so a resumed run replays
/// only what lies past it ([`crate::run`]'s resume).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SiteCursor {
    pub log_offset: u64,
    pub batches: u64,
}

/// Jobs one merged submission holds at most: submissions are merged only
/// while they wait, so this bounds the submit file and the time one
/// `condor_submit` takes, not how many jobs a policy may send.
pub const MAX_MERGED_SUBMIT: usize = 1000;

/// The run's clock: seconds since the run began. A resumed run keeps its
/// original origin through `offset`; a run on the fake HTCondor in scaled real
/// time runs `rate` simulated seconds per real second.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    origin: Instant,
    offset: f64,
    rate: f64,
}

impl RunClock {
    /// A clock reading `offset` seconds now, advancing in real time.
    pub fn starting_at(offset: f64) -> Self {
        RunClock::scaled(offset, 1.0)
    }
    /// A clock reading `offset` now and advancing `rate` seconds per second.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use cosched::engine::RunClock;
    /// // A resumed run that began 600 s ago, on a grid simulated 100× faster.
    /// let clock = RunClock::scaled(600.0, 100.0);
    /// tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    /// assert!((clock.now() - 800.0).abs() < 1e-6);
    /// # }
    /// ```
    pub fn scaled(offset: f64, rate: f64) -> Self {
        RunClock { origin: Instant::now(), offset, rate: if rate > 0.0 { rate } else { 1.0 } }
    }
    /// The same clock reading `by` seconds more: a run's clock on a grid
    /// whose clock this is, with `by` the grid's time at the run's start
    /// negated, so that the two never drift apart.
    pub fn shifted(self, by: f64) -> Self {
        RunClock { offset: self.offset + by, ..self }
    }
    pub fn rate(&self) -> f64 {
        self.rate
    }
    pub fn now(&self) -> Time {
        self.offset + self.origin.elapsed().as_secs_f64() * self.rate
    }
    /// The tokio instant at which the clock will read `t`.
    pub fn instant_at(&self, t: Time) -> Instant {
        let from_origin = ((t - self.offset) / self.rate).max(0.0);
        self.origin + std::time::Duration::from_secs_f64(from_origin.min(1e10))
    }
}

/// The wall clock as Unix seconds: the one place the edges read it (a run's
/// epoch, mapping log stamps to run time, the fake HTCondor's scaled time).
#[allow(clippy::disallowed_methods)] // the edge's single wall-clock read
pub fn wall_clock_unix() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Knobs of the engine itself (the policy has its own).
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Give up and report a hang when the run has not settled by then.
    pub horizon: Time,
    /// Events fed to the policy before the first `Start` (a resumed run's
    /// history, replayed so that the policy rebuilds its state).
    pub history: Vec<(SiteId, SiteEvent)>,
    /// The policy was restored from a checkpoint before the history: its
    /// book may hold jobs decided before that, which no replayed action
    /// names, still waiting for their site to confirm.
    pub restored: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions { horizon: 30.0 * 86400.0, history: Vec::new(), restored: false }
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Every job succeeded or was given up.
    Settled,
    /// The horizon passed first: jobs are stuck (dead site without a timeout).
    Hang,
    /// Shutdown was requested.
    Interrupted,
}

/// What the engine reports about a finished run.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub ending: Ending,
    /// When the run stopped, seconds since its start.
    pub stopped_at: Time,
    /// Highest number of our jobs running at once, per site.
    pub peak_running: Vec<u32>,
}

/// What a site task sends the coordinator: events, and its backend's
/// cursor just after them.
type Report = (SiteId, Vec<SiteEvent>, Option<SiteCursor>);

enum Command {
    Submit(Vec<JobId>),
    Remove(Vec<JobId>),
    Withdraw(Vec<JobId>),
}

/// Runs `policy` over `backends` (one per site, in site order) until every job
/// settles, the horizon passes, or `shutdown` is cancelled.
pub async fn run<B>(
    policy: &mut dyn Policy,
    backends: Vec<B>,
    clock: RunClock,
    options: EngineOptions,
    observer: &mut dyn Observer,
    shutdown: CancellationToken,
) -> RunReport
where
    B: SiteBackend,
{
    let n_sites = backends.len();
    let mut cursors: Vec<Option<SiteCursor>> = backends.iter().map(SiteBackend::cursor).collect();
    let (event_tx, mut event_rx) = mpsc::unbounded_channel::<Report>();
    let tracker = tokio_util::task::TaskTracker::new();
    let stop_sites = shutdown.child_token();
    let mut commands = Vec::with_capacity(n_sites);
    for (i, backend) in backends.into_iter().enumerate() {
        let (tx, rx) = mpsc::unbounded_channel();
        commands.push(tx);
        tracker.spawn(site_task(SiteId(i as u32), backend, rx, event_tx.clone(), stop_sites.clone()));
    }
    drop(event_tx);
    tracker.close();

    let mut peak_running = vec![0u32; n_sites];
    let dispatch = |policy: &mut dyn Policy, now: Time, input: Input, observer: &mut dyn Observer| {
        let actions = policy.handle(now, &input);
        for action in actions {
            observer.action(now, &action);
            // Why each batch went where it did: what an operator reads to
            // follow a run's decisions (`--log-level debug`).
            if tracing::enabled!(tracing::Level::DEBUG) {
                let entry = observe::TraceEntry::of(now, &action);
                let site = entry.site.map_or(String::new(), |s| s.index().to_string());
                tracing::debug!(site, "at {now:.1} s: {} {} job(s): {}", entry.action, entry.jobs, entry.why);
            }
            match action {
                Action::Submit { site, jobs, .. } if !jobs.is_empty() => {
                    let _ = commands[site.index()].send(Command::Submit(jobs));
                }
                Action::Remove { site, jobs, .. } if !jobs.is_empty() => {
                    let _ = commands[site.index()].send(Command::Remove(jobs));
                }
                Action::Withdraw { site, jobs, .. } if !jobs.is_empty() => {
                    let _ = commands[site.index()].send(Command::Withdraw(jobs));
                }
                Action::Submit { .. }
                | Action::Remove { .. }
                | Action::Withdraw { .. }
                | Action::GiveUp { .. } => {}
            }
        }
        let decided = policy.take_decisions();
        if !decided.is_empty() {
            observer.decisions(&decided);
        }
    };

    // Replaying a resumed run's history rebuilds the policy's state. What the
    // policy decided while replaying was decided with past knowledge and may
    // or may not have been carried out before the restart; history says which.
    // A job still `Removing` afterwards was not removed, and removing it is
    // still right (it was held or timed out), so that is carried out now;
    // likewise a job still `Withdrawing` is asked back now. A
    // job still `Submitting` was never submitted: the policy hears that its
    // submission failed, takes the job back into its pool and decides afresh
    // with what it knows now (a site it would have picked back then may have
    // turned out dead since).
    let mut replayed = Vec::new();
    for (site, event) in options.history {
        let now = event.at().unwrap_or(0.0);
        replayed.extend(policy.handle(now, &Input::Site { site, event }));
    }
    let now = clock.now();
    told_after_replay(policy, now, observer);
    let mut seen = std::collections::BTreeSet::new();
    let mut not_submitted: std::collections::BTreeMap<SiteId, Vec<JobId>> = Default::default();
    for action in replayed {
        match action {
            Action::Submit { site, jobs, .. } => {
                for job in jobs {
                    if *policy.book().state(job) == (JobState::Submitting { site }) && seen.insert(job) {
                        not_submitted.entry(site).or_default().push(job);
                    }
                }
            }
            Action::Remove { site, mut jobs, why } => {
                jobs.retain(|&j| {
                    matches!(*policy.book().state(j), JobState::Removing { site: s, .. } if s == site)
                        && seen.insert(j)
                });
                if !jobs.is_empty() {
                    let action = Action::Remove { site, jobs, why };
                    observer.action(now, &action);
                    if let Action::Remove { jobs, .. } = action {
                        let _ = commands[site.index()].send(Command::Remove(jobs));
                    }
                }
            }
            Action::Withdraw { site, mut jobs, why } => {
                jobs.retain(|&j| {
                    matches!(*policy.book().state(j), JobState::Withdrawing { site: s, .. } if s == site)
                        && seen.insert(j)
                });
                if !jobs.is_empty() {
                    observer.action(now, &Action::Withdraw { site, jobs: jobs.clone(), why });
                    let _ = commands[site.index()].send(Command::Withdraw(jobs));
                }
            }
            Action::GiveUp { .. } => {}
        }
    }
    // A restored checkpoint's book holds jobs decided before it was taken,
    // which no replayed action names: the same holds for them. (Only then:
    // a policy may keep decided jobs back on purpose, as the daemon's fair
    // share does, and they are its to release.)
    let mut unconfirmed: std::collections::BTreeMap<SiteId, (Vec<JobId>, Vec<JobId>)> = Default::default();
    let restored_book = if options.restored { Some(policy.book()) } else { None };
    for (job, state) in restored_book.into_iter().flat_map(|book| book.unconfirmed()) {
        if !seen.insert(job) {
            continue;
        }
        match *state {
            JobState::Submitting { site } => not_submitted.entry(site).or_default().push(job),
            JobState::Removing { site, .. } => unconfirmed.entry(site).or_default().0.push(job),
            JobState::Withdrawing { site, .. } => unconfirmed.entry(site).or_default().1.push(job),
            _ => {}
        }
    }
    for (site, (remove, withdraw)) in unconfirmed {
        let why = "decided before cosched restarted; not yet confirmed by the site".to_string();
        if !remove.is_empty() {
            observer.action(now, &Action::Remove { site, jobs: remove.clone(), why: why.clone() });
            let _ = commands[site.index()].send(Command::Remove(remove));
        }
        if !withdraw.is_empty() {
            observer.action(now, &Action::Withdraw { site, jobs: withdraw.clone(), why });
            let _ = commands[site.index()].send(Command::Withdraw(withdraw));
        }
    }
    for (site, jobs) in not_submitted {
        let event = SiteEvent::SubmitFailed {
            jobs,
            error: "decided while replaying the history of a resumed run; never submitted".into(),
            permanent: false,
        };
        dispatch(policy, now, Input::Site { site, event }, observer);
    }
    dispatch(policy, now, Input::Start, observer);
    observer.checkpoint(now, policy, &cursors);

    // The latest time the policy was handed. A deadline's wake hands it the
    // deadline, which the clock may read a hair later than it does (see
    // below); events after it are handed no earlier time, or a site that
    // reopens at a deadline would be open on the tick and closed again on
    // the next event at the same instant, over and over.
    let mut latest = now;
    let ending = loop {
        if policy.book().settled() {
            break Ending::Settled;
        }
        let deadline = policy.next_deadline().map_or(options.horizon, |d| d.min(options.horizon));
        enum Wake {
            Events(Option<Report>),
            Deadline,
            Shutdown,
        }
        let wake = tokio::select! {
            biased;
            _ = shutdown.cancelled() => Wake::Shutdown,
            got = event_rx.recv() => Wake::Events(got),
            _ = tokio::time::sleep_until(clock.instant_at(deadline)) => Wake::Deadline,
        };
        let now = clock.now().max(latest);
        latest = now;
        match wake {
            Wake::Shutdown => break Ending::Interrupted,
            Wake::Events(None) => {
                // Every site task is gone and nothing can change any more.
                break Ending::Hang;
            }
            Wake::Events(Some((site, events, cursor))) => {
                cursors[site.index()] = cursor;
                for event in events {
                    observer.event(now, site, &event);
                    dispatch(policy, now, Input::Site { site, event }, observer);
                    let r = policy.book().counts(site).running;
                    peak_running[site.index()] = peak_running[site.index()].max(r);
                }
                observer.progress(now, policy);
                observer.checkpoint(now, policy, &cursors);
            }
            Wake::Deadline => {
                // The timer fired, so the deadline has come even when the clock
                // reads a hair less (nanosecond rounding in `instant_at`); a
                // policy ticked "before" its deadline would ask again forever.
                let now = now.max(deadline);
                latest = now;
                if now >= options.horizon && policy.next_deadline().is_none_or(|d| d >= options.horizon) {
                    break Ending::Hang;
                }
                dispatch(policy, now, Input::Tick, observer);
                observer.progress(now, policy);
                observer.checkpoint(now, policy, &cursors);
            }
        }
    };
    let stopped_at = clock.now();
    stop_sites.cancel();
    tracker.wait().await;
    observer.finished(stopped_at, policy, ending);
    RunReport { ending, stopped_at, peak_running }
}

/// What the policy decided while replaying a resumed run's history was told
/// (and recorded) when it was first decided, before the restart, so it is not
/// told again; only the windows it rebuilt are (each site's, and each of
/// its kinds'), as of `now`, since the next window is told only when it
/// changes.
fn told_after_replay(policy: &mut dyn Policy, now: Time, observer: &mut dyn Observer) {
    let mut windows = std::collections::BTreeMap::new();
    for decision in policy.take_decisions() {
        if let DecisionKind::Window { .. } = decision.kind {
            windows.insert((decision.site, decision.job_kind.clone()), Decision { at: now, ..decision });
        }
    }
    if !windows.is_empty() {
        observer.decisions(&windows.into_values().collect::<Vec<_>>());
    }
}

async fn site_task<B: SiteBackend>(
    site: SiteId,
    mut backend: B,
    mut commands: mpsc::UnboundedReceiver<Command>,
    events: mpsc::UnboundedSender<Report>,
    stop: CancellationToken,
) {
    let mut backend_open = true;
    // A command taken from the channel while merging submissions, to be
    // carried out next: commands keep their order.
    let mut held: Option<Command> = None;
    loop {
        enum Step {
            Command(Command),
            Events(Vec<SiteEvent>),
            Stop,
        }
        let step = match held.take() {
            Some(cmd) => Step::Command(cmd),
            None => tokio::select! {
                biased;
                _ = stop.cancelled() => Step::Stop,
                cmd = commands.recv() => cmd.map_or(Step::Stop, Step::Command),
                evs = backend.next_events(), if backend_open => Step::Events(evs),
            },
        };
        let out = match step {
            Step::Stop => return,
            Step::Command(Command::Submit(mut jobs)) => {
                if backend.merges_submits() {
                    held = merge_waiting_submits(&mut jobs, &mut commands);
                }
                backend.submit(jobs).await
            }
            Step::Command(Command::Remove(jobs)) => backend.remove(jobs).await,
            Step::Command(Command::Withdraw(jobs)) => backend.withdraw(jobs).await,
            Step::Events(evs) => {
                if evs.is_empty() {
                    backend_open = false;
                }
                evs
            }
        };
        if !out.is_empty() && events.send((site, out, backend.cursor())).is_err() {
            return;
        }
    }
}

/// Appends to `jobs` the submissions waiting right behind it in `commands`,
/// up to [`MAX_MERGED_SUBMIT`] jobs. Stops at the first other command, which
/// it returns to be carried out next: a removal or withdrawal must not
/// overtake a submission sent before it, nor a submission one sent before.
/// Never waits: only what has queued up is merged.
fn merge_waiting_submits(
    jobs: &mut Vec<JobId>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
) -> Option<Command> {
    while jobs.len() < MAX_MERGED_SUBMIT {
        match commands.try_recv() {
            Ok(Command::Submit(more)) if jobs.len() + more.len() <= MAX_MERGED_SUBMIT => jobs.extend(more),
            Ok(other) => return Some(other),
            Err(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{bulk::Bulk, JobBook, RunSpec, SiteInfo, SiteView};

    /// Bulk, with decisions handed in by the test.
    struct Explaining {
        inner: Bulk,
        decided: Vec<Decision>,
    }

    impl Policy for Explaining {
        fn name(&self) -> &'static str {
            "explaining"
        }
        fn handle(&mut self, now: Time, input: &Input) -> Vec<Action> {
            self.inner.handle(now, input)
        }
        fn next_deadline(&self) -> Option<Time> {
            self.inner.next_deadline()
        }
        fn book(&self) -> &JobBook {
            self.inner.book()
        }
        fn site_view(&self, site: SiteId) -> SiteView {
            self.inner.site_view(site)
        }
        fn take_decisions(&mut self) -> Vec<Decision> {
            std::mem::take(&mut self.decided)
        }
    }

    #[derive(Default)]
    struct Told(Vec<Decision>);
    impl Observer for Told {
        fn decisions(&mut self, decisions: &[Decision]) {
            self.0.extend_from_slice(decisions);
        }
    }

    fn decision(at: Time, site: u32, kind: DecisionKind) -> Decision {
        Decision::of_site(at, SiteId(site), kind)
    }

    /// What a backend was asked to do, in order: (what, job ids).
    type Asked = Vec<(&'static str, Vec<u64>)>;

    /// A backend that records what it was asked to do.
    struct Recorder {
        merges: bool,
        done: std::sync::Arc<std::sync::Mutex<Asked>>,
    }

    impl Recorder {
        fn log(&self, what: &'static str, jobs: &[JobId]) {
            self.done.lock().unwrap().push((what, jobs.iter().map(|j| j.0).collect()));
        }
    }

    impl SiteBackend for Recorder {
        async fn submit(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
            self.log("submit", &jobs);
            vec![SiteEvent::Submitted { jobs, at: 0.0 }]
        }
        async fn remove(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
            self.log("remove", &jobs);
            Vec::new()
        }
        async fn withdraw(&mut self, jobs: Vec<JobId>) -> Vec<SiteEvent> {
            self.log("withdraw", &jobs);
            Vec::new()
        }
        async fn next_events(&mut self) -> Vec<SiteEvent> {
            std::future::pending().await
        }
        fn merges_submits(&self) -> bool {
            self.merges
        }
    }

    /// Runs one site task over `commands`, all queued before it starts (as
    /// they are while a slow `condor_submit` runs); returns what the backend
    /// was asked and the jobs reported submitted.
    fn site_task_over(merges: bool, commands: Vec<Command>) -> (Asked, Vec<u64>) {
        let rt =
            tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        let done = std::sync::Arc::default();
        let backend = Recorder { merges, done: std::sync::Arc::clone(&done) };
        let (tx, rx) = mpsc::unbounded_channel();
        for c in commands {
            tx.send(c).unwrap();
        }
        drop(tx);
        let (events_tx, mut events_rx) = mpsc::unbounded_channel();
        rt.block_on(site_task(SiteId(0), backend, rx, events_tx, CancellationToken::new()));
        let mut submitted = Vec::new();
        while let Ok((_, events, _)) = events_rx.try_recv() {
            for e in events {
                if let SiteEvent::Submitted { jobs, .. } = e {
                    submitted.extend(jobs.iter().map(|j| j.0));
                }
            }
        }
        let done = std::mem::take(&mut *done.lock().unwrap());
        (done, submitted)
    }

    fn jobs(ids: std::ops::Range<u64>) -> Vec<JobId> {
        ids.map(JobId).collect()
    }

    #[test]
    fn waiting_submissions_go_as_one_batch_and_nothing_overtakes_a_removal() {
        let commands = || {
            vec![
                Command::Submit(jobs(0..1)),
                Command::Submit(jobs(1..3)),
                Command::Remove(jobs(0..1)),
                Command::Submit(jobs(3..4)),
                Command::Withdraw(jobs(1..2)),
                Command::Submit(jobs(4..5)),
                Command::Submit(jobs(5..6)),
            ]
        };
        let (done, submitted) = site_task_over(true, commands());
        let expected: Vec<(&str, Vec<u64>)> = vec![
            ("submit", vec![0, 1, 2]),
            ("remove", vec![0]),
            ("submit", vec![3]),
            ("withdraw", vec![1]),
            ("submit", vec![4, 5]),
        ];
        assert_eq!(done, expected);
        assert_eq!(submitted, (0..6).collect::<Vec<_>>(), "every job reported submitted once");
        let (done, _) = site_task_over(false, commands());
        assert_eq!(done.len(), 7, "a backend that does not merge gets the batches as sent: {done:?}");
    }

    #[test]
    fn a_merged_submission_holds_at_most_the_limit_and_loses_no_job() {
        let n = MAX_MERGED_SUBMIT as u64;
        let commands =
            (0..2 * n + 7).step_by(3).map(|i| Command::Submit(jobs(i..(i + 3).min(2 * n + 7)))).collect();
        let (done, submitted) = site_task_over(true, commands);
        assert!(
            done.iter().all(|(_, b)| b.len() <= MAX_MERGED_SUBMIT),
            "{:?}",
            done.iter().map(|d| d.1.len()).collect::<Vec<_>>()
        );
        assert_eq!(done.len(), 3, "as few batches as the limit allows");
        assert_eq!(submitted, (0..2 * n + 7).collect::<Vec<_>>(), "in order, each once");
    }

    #[test]
    fn after_a_replay_only_each_site_s_rebuilt_window_is_told_as_of_the_resume() {
        let spec = RunSpec {
            n_jobs: 1,
            sites: vec![SiteInfo::named("a"), SiteInfo::named("b")],
            ..Default::default()
        };
        let window = |w| DecisionKind::Window { window: w, capacity: Some(4.0) };
        let verdict = DecisionKind::Verdict { healthy: false, level: 8.0, slowdown: Some(2.0) };
        let mut policy = Explaining {
            inner: Bulk::new(&spec),
            decided: vec![
                decision(1.0, 0, window(16.0)),
                decision(2.0, 0, verdict),
                decision(2.0, 0, window(4.0)),
                decision(3.0, 1, window(8.0)),
            ],
        };
        let mut told = Told::default();
        told_after_replay(&mut policy, 50.0, &mut told);
        assert_eq!(told.0, vec![decision(50.0, 0, window(4.0)), decision(50.0, 1, window(8.0))]);
        assert!(policy.take_decisions().is_empty(), "taken");
        told_after_replay(&mut policy, 60.0, &mut told);
        assert_eq!(told.0.len(), 2, "nothing decided, nothing told");
    }
}
