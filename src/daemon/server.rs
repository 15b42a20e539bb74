//! The daemon proper: accepts clients on the Unix socket, keeps one task per
//! run, and splits each site's capacity between users with the fair share.
//!
//! One coordinator loop (in [`serve`]) owns the decisions that involve every
//! run: the fair-share step (every [`SHARE_EVERY`]), stopping runs that
//! finished cancelling, reloads, and systemd's watchdog. Because the watchdog
//! is pinged from that loop, a coordinator that hangs gets the daemon
//! restarted. Connections and runs are tasks of their own; a bad client or a
//! failed run is logged and stays local.

use super::access::Reader;
use super::config::{self, DaemonConfig};
use super::fairshare::{allot, Claim};
use super::notify::Notifier;
use super::protocol::{Envelope, Request, Response, RunState, RunStatus, SiteStatus, SubmitRequest};
use super::share::{self, Board, FairShare};
use crate::config::SitesFile;
use crate::engine::{Ending, Observer};
use crate::policy::{Decision, JobTypes, Policy, PolicyConfig, SiteId, Time};
use crate::run::drive::{Starting, Watcher};
use crate::sync::{Locked, ReadWriteLocked};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How often the fair share is recomputed and the caps handed out.
pub const SHARE_EVERY: Duration = Duration::from_millis(200);
/// How soon a run whose demand grew gets a new cap (see `ShareState::asks`).
const SHARE_SOON: Duration = Duration::from_millis(20);
/// Longest request line accepted (a submit carries two files).
const MAX_REQUEST: u64 = 4 << 20;
/// How long a stop waits for runs to record how far they got and write
/// their reports, a `condor_submit` in flight included: each site's task
/// lets the command it is running finish before it stops. Well under the
/// units' `TimeoutStopSec=60s` (checked by the unit-file test): their
/// `KillMode=mixed` sends SIGTERM to the daemon alone, so the commands
/// finish within this grace; what is still running when the daemon exits
/// dies with it (SIGKILL: `kill_on_drop`, `PR_SET_PDEATHSIG`, and systemd's
/// final kill of the unit's cgroup), and the run's resume looks for its batch.
pub const STOP_GRACE: Duration = Duration::from_secs(30);
/// `watch` sends at most this often.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Wraps a run's policy; gets the run clock's rate (simulated seconds per
/// real second) so that polling intervals can be set in real time.
pub use crate::run::drive::PolicyWrap;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A run as the state database has it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRun {
    pub id: u64,
    pub owner: u32,
    pub state: RunState,
    pub n_jobs: u64,
    /// Each job's kind of job (what `status` shows per site; one kind for
    /// a run of one description).
    pub kinds: JobTypes,
    pub policy: String,
    /// Site names, in the run's site order.
    pub sites: Vec<String>,
    pub message: Option<String>,
    /// Jobs done and given up as the run's records say (its user logs): what
    /// a restarted daemon shows for a run that ended before it.
    pub done: u64,
    pub given_up: u64,
    /// A finished run's last status as it showed it (its clock, its sites'
    /// figures), kept by [`Machinery::keep_final_status`]: what a restarted
    /// daemon shows of it besides the counts above. `None` for an
    /// unfinished run, or one that ended without it kept.
    pub last: Option<RunStatus>,
}

impl StoredRun {
    /// A run just accepted: queued, nothing said about it yet.
    pub fn queued(
        id: u64,
        owner: u32,
        kinds: JobTypes,
        policy: &PolicyConfig,
        sites: &SitesFile,
    ) -> StoredRun {
        StoredRun {
            id,
            owner,
            state: RunState::Queued,
            n_jobs: kinds.total(),
            kinds,
            policy: policy.name().to_string(),
            sites: sites.sites.iter().map(|s| s.name.clone()).collect(),
            message: None,
            done: 0,
            given_up: 0,
            last: None,
        }
    }
}

/// A run [`Machinery::create`] recorded, and what its client is told of
/// how the request was taken.
pub struct Created {
    pub run: StoredRun,
    /// What the client should hear, one entry each: the warnings of its
    /// input files (as `cosched submit` prints them), and settings of the
    /// request the daemon changed to stay within its own bounds (a
    /// checkpoint interval raised to its floor). The submit's answer
    /// carries them ([`super::protocol::Response::warnings`]).
    pub warnings: Vec<String>,
}

/// What the daemon needs from the run machinery: record a run, run or resume
/// it, list and update what is recorded. Implemented over the state database
/// and [`crate::run::drive`] for real runs; tests may implement it in memory.
pub trait Machinery: Send + Sync + 'static {
    /// Checks a new run's inputs and records it (state `queued`), owned by
    /// `owner.uid`. Machinery that submits as the daemon's account takes
    /// only the files `owner` may read ([`super::access`]).
    fn create(&self, request: &SubmitRequest, owner: &Reader) -> Result<Created, String>;
    /// Every run recorded, oldest first.
    fn recorded(&self) -> Result<Vec<StoredRun>, String>;
    /// Runs (or resumes, from whatever is recorded) run `id` until it settles
    /// or `stop` is cancelled. Must be safe to call again after any crash.
    fn drive(
        &self,
        id: u64,
        wrap: PolicyWrap,
        observer: Box<StatusObserver>,
        stop: CancellationToken,
    ) -> BoxFuture<Result<Ending, String>>;
    /// Records a run's state (so that a restart knows a cancel was asked for
    /// and which runs are finished).
    fn set_state(&self, id: u64, state: RunState, message: Option<&str>) -> Result<(), String>;
    /// Keeps a finished run's last status, for [`Machinery::recorded`] to
    /// give back as [`StoredRun::last`] after a restart; called before its
    /// finished state is recorded. Machinery whose runs do not outlive the
    /// daemon keeps nothing.
    fn keep_final_status(&self, _id: u64, _status: &RunStatus) -> Result<(), String> {
        Ok(())
    }
}

/// One run known to the daemon.
struct RunEntry {
    id: u64,
    owner: u32,
    sites: Vec<String>,
    /// Each job's kind, for the status of each kind per site.
    kinds: JobTypes,
    board: Board,
    /// The latest status (the observer writes it, clients read it).
    status: Mutex<RunStatus>,
    /// Bumped on every status change, for `watch`.
    changed: watch::Sender<u64>,
    /// Stops this run's engine (a child of the daemon's shutdown).
    stop: CancellationToken,
}

impl RunEntry {
    fn snapshot(&self) -> RunStatus {
        self.status.locked().clone()
    }
    fn update(&self, f: impl FnOnce(&mut RunStatus)) {
        f(&mut self.status.locked());
        self.changed.send_modify(|v| *v += 1);
    }
    fn state(&self) -> RunState {
        RunState::parse(&self.snapshot().state).unwrap_or(RunState::Failed)
    }
}

struct Shared {
    config: RwLock<Arc<DaemonConfig>>,
    /// Fair-share capacity per site name (config overrides, then sites files).
    capacity: RwLock<BTreeMap<String, u64>>,
    runs: Mutex<BTreeMap<u64, Arc<RunEntry>>>,
    machinery: Arc<dyn Machinery>,
    /// The runs' tasks: a stop gives them [`STOP_GRACE`] to record how far
    /// they got.
    tasks: TaskTracker,
    /// The client connections' tasks, apart from the runs': a stop that
    /// waits on them says so, and does not blame a run.
    clients: TaskTracker,
    shutdown: CancellationToken,
    /// This process's effective uid: its own account counts as an admin.
    euid: u32,
}

impl Shared {
    fn config(&self) -> Arc<DaemonConfig> {
        self.config.reading().clone()
    }
    fn runs(&self) -> Vec<Arc<RunEntry>> {
        self.runs.locked().values().cloned().collect()
    }
    fn run(&self, id: u64) -> Option<Arc<RunEntry>> {
        self.runs.locked().get(&id).cloned()
    }
}

/// Who is asking.
#[derive(Clone, Copy, Debug)]
struct Caller {
    uid: u32,
    /// The kernel's primary gid of the caller; `None` for an `as_uid`,
    /// whose primary group is its passwd entry's ([`groups`]).
    gid: Option<u32>,
    admin: bool,
}

impl Caller {
    fn sees(&self, run: &RunEntry) -> bool {
        self.admin || run.owner == self.uid
    }
}

/// Signals from outside the library (the binary maps SIGHUP onto `reload`).
pub struct Control {
    pub shutdown: CancellationToken,
    /// Each message asks for the configuration to be read again.
    pub reload: mpsc::UnboundedReceiver<()>,
    pub notifier: Notifier,
}

/// Reads the capacities the fair share splits: `[capacity]` of the daemon
/// config wins over the sites files' `max_jobs` (else `slots`). A sites
/// file that cannot be read is an error of the daemon config, which names it.
pub fn load_capacity(config: &DaemonConfig) -> Result<BTreeMap<String, u64>, String> {
    let mut capacity = BTreeMap::new();
    for path in &config.sites {
        let sites = crate::config::load(path)
            .map_err(|e| format!("{}: `sites` names {}:\n{e}", config.path.display(), path.display()))?;
        for site in &sites.sites {
            if let Some(c) = site.max_jobs.or(site.slots) {
                capacity.insert(site.name.clone(), u64::from(c));
            }
        }
    }
    capacity.extend(config.capacity.iter().map(|(k, v)| (k.clone(), *v)));
    Ok(capacity)
}

/// Serves `listener` until `control.shutdown` is cancelled, then stops every
/// run (their jobs keep running on the grid; a restart resumes them) and
/// returns once every task has let go.
pub async fn serve(
    listener: UnixListener,
    config: DaemonConfig,
    machinery: Arc<dyn Machinery>,
    mut control: Control,
) -> Result<(), String> {
    let capacity = load_capacity(&config)?;
    // SAFETY: geteuid cannot fail and touches no memory.
    let euid = unsafe { libc::geteuid() };
    let shared = Arc::new(Shared {
        config: RwLock::new(Arc::new(config)),
        capacity: RwLock::new(capacity),
        runs: Mutex::new(BTreeMap::new()),
        machinery,
        tasks: TaskTracker::new(),
        clients: TaskTracker::new(),
        shutdown: control.shutdown.clone(),
        euid,
    });
    let recorded = shared.machinery.recorded()?;
    let mut resumed = 0;
    for stored in recorded {
        let unfinished = !stored.state.finished();
        let entry = add_entry(&shared, stored);
        if unfinished {
            resumed += 1;
            start_run(&shared, entry);
        }
    }
    tracing::info!("listening; {resumed} unfinished run(s) resumed");
    let notifier = control.notifier;
    notifier.ready(&summary(&shared));
    let mut ticker = tokio::time::interval(SHARE_SOON);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut watchdog = notifier.watchdog_interval().map(|every| {
        let mut t = tokio::time::interval(every);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    let mut accept_backoff = Duration::from_millis(10);
    let mut last_summary = String::new();
    let mut last_share = tokio::time::Instant::now();
    loop {
        enum Wake {
            Stop,
            Accepted(std::io::Result<UnixStream>),
            Share,
            Reload,
            Watchdog,
        }
        let wake = tokio::select! {
            biased;
            _ = control.shutdown.cancelled() => Wake::Stop,
            Some(()) = control.reload.recv() => Wake::Reload,
            _ = async { watchdog.as_mut().expect("guarded").tick().await }, if watchdog.is_some() => Wake::Watchdog,
            _ = ticker.tick() => Wake::Share,
            got = listener.accept() => Wake::Accepted(got.map(|(s, _)| s)),
        };
        match wake {
            Wake::Stop => break,
            Wake::Accepted(Ok(stream)) => {
                accept_backoff = Duration::from_millis(10);
                let shared = shared.clone();
                shared.clients.clone().spawn(async move {
                    if let Err(e) = connection(&shared, stream).await {
                        tracing::debug!("client connection ended: {e}");
                    }
                });
            }
            Wake::Accepted(Err(e)) => {
                // Out of file descriptors and the like: back off, keep serving.
                tracing::warn!("accepting a client failed: {e}; retrying in {accept_backoff:?}");
                tokio::time::sleep(accept_backoff).await;
                accept_backoff = (accept_backoff * 2).min(Duration::from_secs(1));
            }
            Wake::Share => {
                // Every SHARE_EVERY, or sooner when a run waits for a cap
                // that has not seen its demand yet.
                let asked = shared.runs().iter().any(|r| std::mem::take(&mut share::lock(&r.board).asks));
                if !asked && last_share.elapsed() < SHARE_EVERY {
                    continue;
                }
                last_share = tokio::time::Instant::now();
                share_step(&shared);
                let s = summary(&shared);
                if s != last_summary {
                    notifier.status(&s);
                    last_summary = s;
                }
            }
            Wake::Reload => {
                notifier.reloading();
                reload(&shared);
                notifier.ready(&summary(&shared));
            }
            Wake::Watchdog => notifier.watchdog(),
        }
    }
    notifier.stopping("stopping: saving runs for the next start; their jobs keep running on the grid");
    tracing::info!(
        "stopping: {} run(s) and {} client connection(s) to finish",
        shared.tasks.len(),
        shared.clients.len()
    );
    shared.tasks.close();
    shared.clients.close();
    // Engines stop at once; a run still reconciling its past (condor_q can
    // be slow) is abandoned after a while: everything it did is recorded, and
    // the unit's stop timeout must not be reached. Connections end at once
    // (`send` and reads give way to the stop); only a submit's dry run in
    // progress can keep one.
    let deadline = tokio::time::Instant::now() + STOP_GRACE;
    if tokio::time::timeout_at(deadline, shared.tasks.wait()).await.is_err() {
        tracing::warn!(
            "{} run(s) still busy after {STOP_GRACE:?}; exiting anyway (resume will redo them)",
            shared.tasks.len()
        );
    }
    if tokio::time::timeout_at(deadline, shared.clients.wait()).await.is_err() {
        tracing::warn!(
            "{} client request(s) still being answered after {STOP_GRACE:?}; exiting anyway",
            shared.clients.len()
        );
    }
    tracing::info!("stopped");
    Ok(())
}

fn reload(shared: &Shared) {
    let path = shared.config().path.clone();
    let loaded = config::load(&path).and_then(|c| load_capacity(&c).map(|cap| (c, cap)));
    match loaded {
        Ok((mut new, capacity)) => {
            let old = shared.config();
            if new.socket != old.socket
                || new.state_dir != old.state_dir
                || new.condor_bin_dir != old.condor_bin_dir
                || new.min_checkpoint_every != old.min_checkpoint_every
            {
                tracing::warn!(
                    "reload: socket, state_dir, condor_bin_dir and min_checkpoint_every changes take effect \
                     at the next restart; keeping {}, {}, {:?} and {} s",
                    old.socket.display(),
                    old.state_dir.display(),
                    old.condor_bin_dir,
                    old.min_checkpoint_every
                );
                new.socket = old.socket.clone();
                new.state_dir = old.state_dir.clone();
                new.condor_bin_dir = old.condor_bin_dir.clone();
                new.min_checkpoint_every = old.min_checkpoint_every;
            }
            *shared.capacity.writing() = capacity;
            *shared.config.writing() = Arc::new(new);
            tracing::info!("reloaded {}", path.display());
            share_step(shared);
        }
        Err(e) => tracing::error!("reload failed, keeping the running configuration: {e}"),
    }
}

/// One line for `systemctl status`.
fn summary(shared: &Shared) -> String {
    let runs = shared.runs();
    let active: Vec<_> = runs.iter().filter(|r| !r.state().finished()).collect();
    let out: u64 = active.iter().map(|r| r.snapshot().out).sum();
    let users: std::collections::BTreeSet<u32> = active.iter().map(|r| r.owner).collect();
    format!("{} active run(s) of {} user(s), {} job(s) out", active.len(), users.len(), out)
}

fn add_entry(shared: &Shared, stored: StoredRun) -> Arc<RunEntry> {
    let (changed, _) = watch::channel(0);
    // A finished run's figures as it last showed them, where kept for its
    // sites; who, what and how it ended from its record.
    let names = |last: &RunStatus| last.sites.iter().map(|s| &s.name).eq(stored.sites.iter());
    let last = stored.last.clone().filter(|last| stored.state.finished() && names(last));
    let status = RunStatus {
        id: stored.id,
        owner: stored.owner,
        owner_name: config::user_name(stored.owner),
        state: stored.state.as_str().to_string(),
        policy: stored.policy.clone(),
        n_jobs: stored.n_jobs,
        done: stored.done,
        given_up: stored.given_up,
        message: stored.message.clone(),
        ..last.unwrap_or_else(|| RunStatus {
            sites: stored
                .sites
                .iter()
                .map(|s| SiteStatus { name: s.clone(), ..SiteStatus::default() })
                .collect(),
            ..RunStatus::default()
        })
    };
    let board = share::new_board(stored.sites.len());
    {
        // Until the first fair-share step has seen this run's demand, it may
        // submit nothing to a shared site: otherwise a new run would grab
        // more than its share in its first moments.
        let capacity = shared.capacity.reading();
        let mut b = share::lock(&board);
        for (i, name) in stored.sites.iter().enumerate() {
            if capacity.contains_key(name) {
                b.caps[i] = Some(0);
            }
        }
        b.cancel = stored.state == RunState::Cancelling;
    }
    let entry = Arc::new(RunEntry {
        id: stored.id,
        owner: stored.owner,
        sites: stored.sites,
        kinds: stored.kinds,
        board,
        status: Mutex::new(status),
        changed,
        stop: shared.shutdown.child_token(),
    });
    shared.runs.locked().insert(entry.id, entry.clone());
    entry
}

fn start_run(shared: &Arc<Shared>, entry: Arc<RunEntry>) {
    let shared2 = shared.clone();
    shared.tasks.spawn(async move {
        let shared = shared2;
        if entry.state() != RunState::Cancelling {
            // A run that was running when the daemon stopped replays its
            // past first: until its counts are rebuilt (the first progress),
            // it says so rather than showing none done.
            let shown =
                if entry.state() == RunState::Running { RunState::Resuming } else { RunState::Running };
            entry.update(|s| s.state = shown.as_str().into());
            if let Err(e) = shared.machinery.set_state(entry.id, RunState::Running, None) {
                tracing::warn!("run {}: recording its state: {e}", entry.id);
            }
        }
        let board = entry.board.clone();
        let wrap: PolicyWrap = Box::new(move |policy, rate| {
            // Look at caps and cancellation ten times a second of real time.
            Box::new(FairShare::new(policy, board, 0.1 * rate))
        });
        let names = entry.sites.clone();
        let n_jobs = entry.snapshot().n_jobs;
        let tally = crate::run::progress::Progress::new(
            &entry.id.to_string(),
            names,
            n_jobs,
            1.0,
            crate::run::progress::Display::Quiet,
        )
        .with_kinds(entry.kinds.clone());
        let unreachable = vec![None; entry.sites.len()];
        let observer = Box::new(StatusObserver { entry: entry.clone(), tally, unreachable });
        let result = shared.machinery.drive(entry.id, wrap, observer, entry.stop.clone()).await;
        let (cancel, drained) = {
            let b = share::lock(&entry.board);
            (b.cancel, b.drained)
        };
        let (state, message) = match result {
            Ok(Ending::Settled) if cancel => (RunState::Cancelled, None),
            Ok(Ending::Settled) => {
                let given_up = entry.snapshot().given_up;
                (RunState::Done, (given_up > 0).then(|| format!("{given_up} job(s) failed on every attempt")))
            }
            Ok(Ending::Interrupted) if cancel && drained => (RunState::Cancelled, None),
            Ok(Ending::Interrupted) => {
                // The daemon is stopping: the run stays recorded as it is and
                // a restart resumes it.
                entry.update(|s| s.message = Some("daemon stopping; resumes at restart".into()));
                tracing::info!("run {}: stopped with the daemon; it resumes at the next start", entry.id);
                return;
            }
            Ok(Ending::Hang) => (RunState::Failed, Some("jobs stuck at a site past the horizon".to_string())),
            Err(e) => (RunState::Failed, Some(e)),
        };
        tracing::info!(
            "run {}: {}{}",
            entry.id,
            state.as_str(),
            message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
        );
        let last = RunStatus { state: state.as_str().into(), message: message.clone(), ..entry.snapshot() };
        if let Err(e) = shared.machinery.keep_final_status(entry.id, &last) {
            tracing::warn!("run {}: keeping its last status: {e}; a restart shows its counts only", entry.id);
        }
        if let Err(e) = shared.machinery.set_state(entry.id, state, message.as_deref()) {
            tracing::error!("run {}: recording that it is {}: {e}", entry.id, state.as_str());
        }
        entry.update(|s| {
            s.state = state.as_str().into();
            s.message = message;
        });
    });
}

/// Keeps a run's status current for `status` and `watch`: the daemon's
/// [`Watcher`] of a run.
pub struct StatusObserver {
    entry: Arc<RunEntry>,
    /// The same tally of events as `cosched submit`'s summary (executions
    /// cut short), so both say the same; kept in the run's checkpoints.
    tally: crate::run::progress::Progress,
    /// Per site, since when (run time) its schedd has not answered.
    unreachable: Vec<Option<(Time, String)>>,
}

impl Watcher for StatusObserver {
    fn tally(&mut self) -> &mut crate::run::progress::Progress {
        &mut self.tally
    }

    fn starting(&mut self, start: &Starting<'_>) {
        let id = self.entry.id;
        for (batch, what) in start.reconciled {
            tracing::info!("run {id}: batch {batch}: {what}");
        }
        if start.resumed {
            let from = match start.checkpoint_unix {
                Some(taken) => format!(
                    " from its checkpoint of {:.1} s ago",
                    (crate::engine::wall_clock_unix() - taken).max(0.0)
                ),
                None => " from its records".to_string(),
            };
            tracing::info!("run {id}: resuming{from}; replaying its {} past events first", start.replaying);
        }
    }
}

impl Observer for StatusObserver {
    fn event(&mut self, now: Time, site: SiteId, event: &crate::policy::SiteEvent) {
        self.tally.event(now, site, event);
    }

    fn decisions(&mut self, decisions: &[Decision]) {
        self.tally.decisions(decisions);
    }

    fn site_unreachable(&mut self, site: SiteId, down: Option<(Time, String)>) {
        if let Some(slot) = self.unreachable.get_mut(site.index()) {
            *slot = down;
        }
    }

    fn progress(&mut self, now: Time, policy: &dyn Policy) {
        let (cut_short, cut_short_seconds) = self.tally.cut_short();
        let (caps, held, cancelled) = {
            let b = share::lock(&self.entry.board);
            (b.caps.clone(), b.held_back.clone(), b.cancel)
        };
        let book = policy.book();
        let sites: Vec<SiteStatus> = self
            .entry
            .sites
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let site = SiteId(i as u32);
                let c = book.counts(site);
                let view = policy.site_view(site);
                let held_here = held.get(i).copied().unwrap_or(0);
                let down = self.unreachable.get(i).cloned().flatten();
                SiteStatus {
                    name: name.clone(),
                    capacity: view.capacity,
                    class: view.class.to_string(),
                    window: view.window,
                    fair_cap: caps.get(i).copied().flatten(),
                    // A cancelled run's held-back jobs never go out: none
                    // waits for room any more (`share::FairShare`).
                    held_back: if cancelled { 0 } else { held_here },
                    queued: u64::from(c.submitting + c.idle).saturating_sub(held_here),
                    running: u64::from(c.running),
                    held: u64::from(c.held),
                    done: u64::from(c.done),
                    agtime: view.agtime,
                    unreachable_since: down.as_ref().map(|d| d.0),
                    unreachable_error: down.map(|d| d.1),
                    kinds: self.tally.kind_site_summaries(site),
                }
            })
            .collect();
        let held_total: u64 = held.iter().sum();
        self.entry.update(|s| {
            // Its past replayed: the counts below are the whole run's.
            if s.state == RunState::Resuming.as_str() {
                s.state = RunState::Running.as_str().into();
            }
            s.time = now;
            s.cut_short = cut_short;
            s.cut_short_seconds = cut_short_seconds;
            s.done = book.done();
            s.given_up = book.given_up();
            s.out = book.out_total().saturating_sub(held_total);
            s.sites = sites;
        });
    }

    fn finished(&mut self, now: Time, policy: &dyn Policy, _ending: Ending) {
        self.progress(now, policy);
    }
}

/// Finished runs of each user kept in memory for `status`/`runs` (older
/// ones stay in the state database only), so a daemon that runs for months
/// stays small. Counted per user: one user's many runs do not push another's
/// out of sight.
const KEEP_FINISHED: usize = 200;

fn forget_old_finished(shared: &Shared) {
    let mut runs = shared.runs.locked();
    let finished = runs.values().filter(|r| r.state().finished()).map(|r| (r.id, r.owner));
    for id in beyond_each_users_last(finished.collect(), KEEP_FINISHED) {
        runs.remove(&id);
    }
}

/// Of `runs` (id, owner), the ids of each owner's older than its last
/// `keep` (ids grow with time).
fn beyond_each_users_last(runs: Vec<(u64, u32)>, keep: usize) -> Vec<u64> {
    let mut by_owner: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (id, owner) in runs {
        by_owner.entry(owner).or_default().push(id);
    }
    let mut old = Vec::new();
    for mut ids in by_owner.into_values() {
        ids.sort_unstable();
        old.extend(ids.iter().take(ids.len().saturating_sub(keep)));
    }
    old
}

/// One round of the fair share over every active run.
fn share_step(shared: &Shared) {
    forget_old_finished(shared);
    let config = shared.config();
    let capacity = shared.capacity.reading().clone();
    let runs: Vec<Arc<RunEntry>> = shared.runs().into_iter().filter(|r| !r.state().finished()).collect();
    // Stop the engines of cancelled runs that have nothing left at any site.
    for run in &runs {
        let b = share::lock(&run.board);
        if b.cancel && b.drained && !run.stop.is_cancelled() {
            run.stop.cancel();
        }
    }
    // demand[site name][user] → (index in `runs`, site index in that run,
    // jobs wanted out) for each of the user's runs using the site.
    type Wants = Vec<(usize, usize, u64)>;
    let mut demand: BTreeMap<&str, BTreeMap<u32, Wants>> = BTreeMap::new();
    let boards: Vec<_> = runs.iter().map(|r| share::lock(&r.board).demand.clone()).collect();
    for (k, run) in runs.iter().enumerate() {
        for (i, name) in run.sites.iter().enumerate() {
            let want = boards[k].get(i).copied().unwrap_or(0);
            demand.entry(name.as_str()).or_default().entry(run.owner).or_default().push((k, i, want));
        }
    }
    let mut caps: Vec<Vec<Option<u64>>> = runs.iter().map(|r| vec![None; r.sites.len()]).collect();
    for (site, by_user) in &demand {
        let Some(&cap) = capacity.get(*site) else { continue };
        let users: Vec<(&u32, &Wants)> = by_user.iter().collect();
        let claims: Vec<Claim> = users
            .iter()
            .map(|(uid, runs)| Claim::new(runs.iter().map(|r| r.2).sum(), config.weight(**uid)))
            .collect();
        let per_user = allot(cap, &claims);
        for ((_, user_runs), user_cap) in users.iter().zip(per_user) {
            let claims: Vec<Claim> = user_runs.iter().map(|r| Claim::new(r.2, 1.0)).collect();
            let per_run = allot(user_cap, &claims);
            for (&(k, i, _), c) in user_runs.iter().zip(per_run) {
                caps[k][i] = Some(c);
            }
        }
    }
    for (k, run) in runs.iter().enumerate() {
        share::lock(&run.board).caps = caps[k].clone();
    }
}

async fn connection(shared: &Arc<Shared>, stream: UnixStream) -> std::io::Result<()> {
    let cred = stream.peer_cred()?;
    let (read, write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut client = Client { write, shutdown: shared.shutdown.clone() };
    // Bytes, not a String: a line that is not UTF-8 is a bad request to
    // answer, not a read error that ends the connection.
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut reader).take(MAX_REQUEST);
        let n = tokio::select! {
            biased;
            _ = shared.shutdown.cancelled() => return Ok(()),
            n = limited.read_until(b'\n', &mut line) => n?,
        };
        if n == 0 {
            return Ok(());
        }
        if !line.ends_with(b"\n") && n as u64 >= MAX_REQUEST {
            client.send(Response::error(format!("request longer than {MAX_REQUEST} bytes"))).await?;
            return Ok(());
        }
        let text = match std::str::from_utf8(&line) {
            Ok(text) => text,
            Err(e) => {
                let at = e.valid_up_to() + 1;
                client
                    .send(Response::error(format!(
                        "bad request: not UTF-8 (byte {at} of the line); send JSON in UTF-8"
                    )))
                    .await?;
                continue;
            }
        };
        let envelope: Envelope = match serde_json::from_str(text.trim()) {
            Ok(e) => e,
            Err(e) => {
                client.send(Response::error(super::protocol::unreadable_request(text.trim(), &e))).await?;
                continue;
            }
        };
        let caller = match identify(shared, cred.uid(), cred.gid(), envelope.as_uid) {
            Ok(c) => c,
            Err(e) => {
                client.send(Response::error(e)).await?;
                continue;
            }
        };
        match envelope.request {
            Request::Watch { run } => watch_run(shared, caller, run, &mut client).await?,
            request => {
                let response = answer(shared, caller, request).await;
                client.send(response).await?;
            }
        }
    }
}

fn identify(shared: &Shared, uid: u32, gid: u32, as_uid: Option<u32>) -> Result<Caller, String> {
    let config = shared.config();
    let (uid, gid) = match as_uid {
        None => (uid, Some(gid)),
        Some(claimed) if config.trust_client_uid => (claimed, None),
        Some(_) => {
            return Err("as_uid is honoured only when the daemon config sets trust_client_uid = true \
                        (a test-only setting)"
                .into())
        }
    };
    let admin = uid == 0
        || (as_uid.is_none() && uid == shared.euid)
        || groups(uid, gid).iter().any(|g| config.admin_gids.contains(g));
    Ok(Caller { uid, gid, admin })
}

/// Every group of `uid`: its primary `gid` (else its passwd entry's) and
/// its supplementary groups; none for a uid the host does not know.
fn groups(uid: u32, gid: Option<u32>) -> Vec<u32> {
    let primary = gid.or_else(|| config::user_name(uid).and_then(|n| primary_gid(&n)));
    primary.map(|g| config::groups_of(uid, g)).unwrap_or_default()
}

fn primary_gid(user: &str) -> Option<u32> {
    let cname = std::ffi::CString::new(user).ok()?;
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to memory we own for the duration of the call.
    let rc = unsafe { libc::getpwnam_r(cname.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    (rc == 0 && !out.is_null()).then_some(pw.pw_gid)
}

/// Where a connection's answers go.
struct Client {
    write: tokio::net::unix::OwnedWriteHalf,
    /// The daemon's: a client that does not read what it is sent must not
    /// hold up a stop (a write to it waits until it reads).
    shutdown: CancellationToken,
}

impl Client {
    /// Writes one response line, with the daemon's version; gives up (an
    /// error) when the daemon stops.
    async fn send(&mut self, response: Response) -> std::io::Result<()> {
        let response = Response { version: Some(super::protocol::VERSION.to_string()), ..response };
        let mut line = serde_json::to_string(&response).map_err(std::io::Error::other)?;
        line.push('\n');
        tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => Err(std::io::Error::other("the daemon is stopping")),
            written = self.write.write_all(line.as_bytes()) => written,
        }
    }
}

fn no_such_run(id: u64) -> Response {
    // The same answer whether the run does not exist or is someone else's.
    Response::error(format!(
        "no run {id} of yours (see `cosched runs`; of your finished runs, the last {KEEP_FINISHED} are kept)"
    ))
}

async fn answer(shared: &Arc<Shared>, caller: Caller, request: Request) -> Response {
    match request {
        Request::Ping => Response { uid: Some(caller.uid), admin: Some(caller.admin), ..Response::ok() },
        Request::Submit(submit) => {
            let active = shared.runs().iter().filter(|r| !r.state().finished()).count();
            let max = shared.config().max_runs;
            if active >= max {
                return Response::error(format!(
                    "the daemon already has {active} active runs (max_runs = {max}); try later"
                ));
            }
            let machinery = shared.machinery.clone();
            let (uid, gid) = (caller.uid, caller.gid);
            // Recording a run writes files and the database, and the groups
            // are the host's user database: off the runtime.
            let created = tokio::task::spawn_blocking(move || {
                machinery.create(&submit, &Reader { uid, groups: groups(uid, gid) })
            })
            .await;
            match created {
                Ok(Ok(Created { run: stored, warnings })) => {
                    let id = stored.id;
                    tracing::info!("run {id}: submitted by uid {uid}, {} jobs", stored.n_jobs);
                    let entry = add_entry(shared, stored);
                    start_run(shared, entry);
                    Response { run: Some(id), warnings, ..Response::ok() }
                }
                Ok(Err(e)) => Response::error(e),
                Err(e) => Response::error(format!("recording the run failed: {e}")),
            }
        }
        Request::Runs => {
            let runs = shared
                .runs()
                .iter()
                .filter(|r| caller.sees(r))
                .map(|r| RunStatus { sites: Vec::new(), ..r.snapshot() })
                .collect();
            Response { runs: Some(runs), ..Response::ok() }
        }
        Request::Status { run: Some(id) } => match shared.run(id).filter(|r| caller.sees(r)) {
            Some(r) => Response { runs: Some(vec![r.snapshot()]), ..Response::ok() },
            None => no_such_run(id),
        },
        Request::Status { run: None } => {
            let runs = shared
                .runs()
                .iter()
                .filter(|r| caller.sees(r) && !r.state().finished())
                .map(|r| r.snapshot())
                .collect();
            Response { runs: Some(runs), ..Response::ok() }
        }
        Request::Cancel { run: id } => {
            let Some(run) = shared.run(id).filter(|r| caller.sees(r)) else { return no_such_run(id) };
            let state = run.state();
            if state.finished() {
                return Response::error(format!("run {id} is already {}", state.as_str()));
            }
            // Recorded first, so that a crash now still ends in a cancelled run.
            if let Err(e) = shared.machinery.set_state(id, RunState::Cancelling, None) {
                return Response::error(format!("recording the cancel of run {id}: {e}"));
            }
            share::lock(&run.board).cancel = true;
            run.update(|s| s.state = RunState::Cancelling.as_str().into());
            tracing::info!("run {id}: cancel asked by uid {}", caller.uid);
            Response { run: Some(id), ..Response::ok() }
        }
        Request::Watch { .. } => unreachable!("handled by watch_run"),
    }
}

async fn watch_run(
    shared: &Arc<Shared>,
    caller: Caller,
    id: u64,
    client: &mut Client,
) -> std::io::Result<()> {
    let Some(run) = shared.run(id).filter(|r| caller.sees(r)) else {
        return client.send(no_such_run(id)).await;
    };
    let mut changes = run.changed.subscribe();
    loop {
        changes.mark_unchanged();
        let status = run.snapshot();
        let finished = RunState::parse(&status.state).is_some_and(|s| s.finished());
        client.send(Response { runs: Some(vec![status]), ..Response::ok() }).await?;
        if finished {
            return Ok(());
        }
        tokio::select! {
            biased;
            _ = shared.shutdown.cancelled() => return Ok(()),
            changed = changes.changed() => if changed.is_err() { return Ok(()) },
        }
        // Rate limit: a busy run changes many times a second.
        tokio::select! {
            biased;
            _ = shared.shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(WATCH_EVERY) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One user's many finished runs once pushed every other user's out of
    /// `runs` and `status` (the daemon's exploratory test, B1).
    #[test]
    fn finished_runs_are_forgotten_per_user_oldest_first() {
        let mut runs: Vec<(u64, u32)> = (1..=5).map(|id| (id, 1000)).collect();
        runs.push((6, 2000));
        runs.extend((7..=9).map(|id| (id, 1000)));
        let mut old = beyond_each_users_last(runs, 3);
        old.sort_unstable();
        assert_eq!(old, vec![1, 2, 3, 4, 5], "user 1000 keeps 7, 8, 9; user 2000 keeps its one run");
    }
}
