//! The fake schedd: the one background process of a pool. It runs every
//! site's model in scaled real time and writes what HTCondor's schedd and
//! gridmanager would write to the user logs: 027 when a grid job reaches its
//! resource, 001 at start, 005 at the end, 001 + 012 for an attempt that goes
//! on hold.
//!
//! One instance per pool (an exclusive `flock` on `schedd.lock`). Each tick
//! takes the pool lock, applies what the commands changed (new jobs,
//! removals) at the simulated time they happened, steps the models event by
//! event up to now, and commits the change: the queue is saved with the
//! events (in time order) and history records, then these are written
//! ([`Pool::commit`]), so a schedd stopped in between loses none. It
//! exits after `schedd_idle_exit` real seconds with an empty queue — deciding
//! so, and letting go of `schedd.lock`, under the pool lock, so a concurrent
//! `condor_submit` either sees it running or starts a new one — on SIGTERM,
//! or when the pool directory is gone.
//!
//! The models live in memory only. A schedd that starts on a non-empty queue
//! (the previous one was killed) resubmits the queued jobs to fresh models at
//! its start time; a job that had started does not log a second 001.

use super::events;
use super::pool::{self, HistoryRecord, HistoryStatus, Pool, Queue};
use super::POOL_ENV;
use crate::sim::model::{declared_kinds, site_seed, AttemptId, JobType, ModelEvent, SiteSim};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Longest real time between two looks at the queue (new jobs, removals).
const POLL: f64 = 0.025;
/// Shortest sleep, so that a burst of events does not spin the CPU.
const MIN_SLEEP: f64 = 0.002;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub(crate) fn main(args: &[String]) -> u8 {
    let dir = match args.first().map(PathBuf::from).or_else(|| std::env::var_os(POOL_ENV).map(PathBuf::from))
    {
        Some(dir) => dir,
        None => return 2,
    };
    let Ok(pool) = Pool::open(&dir) else { return 1 };
    let instance = match pool::try_lock(&pool.path(pool::SCHEDD_LOCK)) {
        Ok(Some(lock)) => lock,
        // Another schedd runs: nothing to do.
        Ok(None) => return 0,
        Err(_) => return 1,
    };
    let _ = pool::write_atomic(&pool.path(pool::SCHEDD_PID), format!("{}\n", std::process::id()).as_bytes());
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    let mut schedd = Schedd::new(pool);
    schedd.note("started");
    let reason = schedd.run(instance);
    schedd.note(&format!("exiting: {reason}"));
    0
}

/// What happened to a job in the model, as the schedd reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Happening {
    Started,
    Held,
    Finished,
    Failed,
}

struct Schedd {
    pool: Pool,
    /// One model per configured site; the pool's `local` site is last.
    sims: Vec<SiteSim>,
    /// The kinds every model knows, in its order ([`declared_kinds`]).
    kinds: Vec<JobType>,
    /// Jobs in a model: (cluster, proc) → (site index, attempt).
    attempts: BTreeMap<(u64, u64), (usize, AttemptId)>,
    by_attempt: BTreeMap<AttemptId, (u64, u64)>,
    next_attempt: u64,
    queue: Queue,
    /// Identity of the queue file as last read or written by us.
    queue_stamp: Option<(u64, u64, i64, i64)>,
    /// Simulated time at start: jobs queued before it enter the models here.
    started_at: f64,
    /// Real time since which the queue has been empty.
    idle_since: Option<f64>,
}

impl Schedd {
    fn new(pool: Pool) -> Self {
        let seed = pool.config.seed;
        let kinds = declared_kinds(&pool.config.kinds);
        let sims: Vec<SiteSim> = pool
            .config
            .sites
            .iter()
            .chain(pool.config.local.iter())
            .enumerate()
            .map(|(i, site)| SiteSim::with_types(&site.params, &kinds, site_seed(seed, i)))
            .collect();
        let started_at = pool.sim_now();
        Schedd {
            pool,
            sims,
            kinds,
            attempts: BTreeMap::new(),
            by_attempt: BTreeMap::new(),
            next_attempt: 1,
            queue: Queue::default(),
            queue_stamp: None,
            started_at,
            idle_since: None,
        }
    }

    /// A line in `schedd.log`, for whoever debugs a pool.
    fn note(&self, message: &str) {
        let line = format!(
            "{} pid {}: {message}\n",
            events::stamp(crate::engine::wall_clock_unix()),
            std::process::id()
        );
        if let Ok(mut f) =
            std::fs::OpenOptions::new().create(true).append(true).open(self.pool.path(pool::SCHEDD_LOG))
        {
            let _ = f.write_all(line.as_bytes());
        }
    }

    fn run(&mut self, instance: pool::FileLock) -> String {
        let mut instance = Some(instance);
        loop {
            if STOP.load(Ordering::SeqCst) {
                return "signalled".into();
            }
            let wake = match self.tick(&mut instance) {
                Ok(Tick::Continue(wake)) => wake,
                Ok(Tick::Exit(reason)) => return reason,
                Err(e) => {
                    if !self.pool.path("pool.toml").exists() {
                        return "the pool directory is gone".into();
                    }
                    self.note(&format!("tick failed: {e}"));
                    None
                }
            };
            let now = crate::engine::wall_clock_unix();
            let until = wake.map_or(now + POLL, |sim| self.pool.real_at(sim).min(now + POLL));
            std::thread::sleep(Duration::from_secs_f64((until - now).max(MIN_SLEEP)));
        }
    }

    fn tick(&mut self, instance: &mut Option<pool::FileLock>) -> std::io::Result<Tick> {
        if !self.pool.path("pool.toml").exists() {
            return Ok(Tick::Exit("the pool directory is gone".into()));
        }
        let _guard = self.pool.lock()?;
        let stamp = self.pool.queue_stamp();
        if stamp != self.queue_stamp {
            self.queue = self.pool.load_queue()?;
            // Before any event of ours: a killed command's come first.
            self.queue.write_unwritten();
            self.queue_stamp = stamp;
        }
        let now = self.pool.sim_now();
        let mut changed = false;
        let mut happenings: Vec<(f64, (u64, u64), Happening)> = Vec::new();

        // What the commands did since the last tick, in the order it happened.
        let mut commands: Vec<(f64, (u64, u64), bool)> = Vec::new();
        for job in &self.queue.jobs {
            if job.status != 5 && !self.attempts.contains_key(&job.id()) {
                commands.push((job.qdate.max(self.started_at), job.id(), true));
            }
        }
        for r in std::mem::take(&mut self.queue.removals) {
            changed = true;
            commands.push((r.at, (r.cluster, r.proc), false));
        }
        commands.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (t, id, is_submit) in commands {
            if is_submit {
                let Some(job) = self.job(id) else { continue };
                let Some(site) = self.site_of(job.grid_resource.as_deref()) else {
                    // The configuration changed under the queue; the job can never run.
                    continue;
                };
                let work = job.work;
                // A kind the pool does not declare runs as the first, of
                // load 1 (the run was checked against the declared ones).
                let kind = job
                    .attr("CoschedType")
                    .map(super::expr::AdValue::as_plain_string)
                    .and_then(|k| self.kinds.iter().position(|d| d.name == k));
                let t = t.max(self.sims[site].now());
                self.step(site, t, &mut happenings);
                let attempt = AttemptId(self.next_attempt);
                self.next_attempt += 1;
                self.sims[site].submit_kind(t, attempt, work, kind.unwrap_or(0));
                self.attempts.insert(id, (site, attempt));
                self.by_attempt.insert(attempt, id);
            } else if let Some((site, attempt)) = self.attempts.remove(&id) {
                let t = t.max(self.sims[site].now());
                self.step(site, t, &mut happenings);
                self.sims[site].remove(t, attempt);
                self.by_attempt.remove(&attempt);
            }
        }
        for site in 0..self.sims.len() {
            self.step(site, now, &mut happenings);
        }
        happenings.sort_by(|a, b| a.0.total_cmp(&b.0));

        let mut writes: Vec<(f64, PathBuf, String)> = Vec::new();
        let mut records: Vec<HistoryRecord> = Vec::new();
        for (t, id, what) in happenings {
            let Ok(index) = self.queue.jobs.binary_search_by_key(&id, |j| j.id()) else { continue };
            changed = true;
            self.grid_submit(index, t, &mut writes);
            let job = &mut self.queue.jobs[index];
            let unix = self.pool.epoch + t;
            let log = job.log.clone();
            let mut write = |text: String| {
                if let Some(log) = &log {
                    writes.push((t, log.clone(), text));
                }
            };
            match what {
                Happening::Started | Happening::Held => {
                    if job.start_date.is_none() {
                        write(events::executing(id, unix, job.grid_resource.as_deref(), id.1 + 1));
                        job.start_date = Some(t);
                    }
                    if what == Happening::Held {
                        let reason = format!(
                            "Error from slot1_{}@{}: Failed to execute '{}': (errno=2: 'No such file or directory')",
                            id.1 % 64 + 1,
                            host_of(job.grid_resource.as_deref()),
                            job.cmd
                        );
                        write(events::held(id, unix, &reason, 6, 2));
                        job.hold_reason = Some(reason);
                        job.status = 5;
                        records.push(HistoryRecord::of(job, HistoryStatus::Held, t));
                    } else {
                        job.status = 2;
                    }
                    job.entered_status = t;
                }
                Happening::Finished | Happening::Failed => {
                    let ok = what == Happening::Finished;
                    let run = job.start_date.map_or(0.0, |s| t - s);
                    write(events::terminated(
                        id,
                        unix,
                        if ok { 0 } else { 1 },
                        job.grid_resource.is_some(),
                        run,
                    ));
                    let status = if ok { HistoryStatus::Succeeded } else { HistoryStatus::Failed };
                    records.push(HistoryRecord::of(job, status, t));
                    self.queue.jobs.remove(index);
                }
            }
        }
        // Grid jobs reach their resource a little after submission.
        let delay = self.pool.config.grid_submit_delay.max(0.0);
        for index in 0..self.queue.jobs.len() {
            let job = &self.queue.jobs[index];
            if job.grid_resource.is_some() && job.grid_job_id.is_none() && job.qdate + delay <= now {
                changed = true;
                self.grid_submit(index, now, &mut writes);
            }
        }

        if changed {
            writes.sort_by(|a, b| a.0.total_cmp(&b.0));
            let in_order: Vec<(PathBuf, String)> =
                writes.into_iter().map(|(_, log, text)| (log, text)).collect();
            // Committed before written, like condor_submit's: a schedd
            // killed between the two (`fake_condor::stop` in a test) left a
            // 005 in the log for a job whose history still said queued.
            let failures = self.pool.commit(&mut self.queue, &in_order, &records)?;
            self.queue_stamp = self.pool.queue_stamp();
            for (log, e) in failures {
                self.note(&format!("cannot write to user log {}: {e}", log.display()));
            }
        }

        if self.queue.jobs.is_empty() && self.attempts.is_empty() {
            let real_now = crate::engine::wall_clock_unix();
            let since = *self.idle_since.get_or_insert(real_now);
            if real_now - since >= self.pool.config.schedd_idle_exit {
                // Let go of the instance lock while still holding the pool lock.
                instance.take();
                return Ok(Tick::Exit("idle".into()));
            }
        } else {
            self.idle_since = None;
        }
        Ok(Tick::Continue(self.next_wake(delay)))
    }

    /// Writes the 027 of job `index` if it has none yet, stamped at its due
    /// time or at `by`, whichever is earlier (it must precede the event at `by`).
    fn grid_submit(&mut self, index: usize, by: f64, writes: &mut Vec<(f64, PathBuf, String)>) {
        let delay = self.pool.config.grid_submit_delay.max(0.0);
        let job = &mut self.queue.jobs[index];
        let Some(resource) = job.grid_resource.clone() else { return };
        if job.grid_job_id.is_some() {
            return;
        }
        let remote = self.queue.next_remote;
        self.queue.next_remote += 1;
        job.grid_job_id = Some(format!("{resource} {remote}.0"));
        let t = (job.qdate + delay).min(by).max(job.qdate);
        if let Some(log) = &job.log {
            writes.push((
                t,
                log.clone(),
                events::grid_submitted(job.id(), self.pool.epoch + t, &resource, remote),
            ));
        }
    }

    fn job(&self, id: (u64, u64)) -> Option<&super::pool::Job> {
        self.queue.jobs.binary_search_by_key(&id, |j| j.id()).ok().map(|i| &self.queue.jobs[i])
    }

    fn site_of(&self, grid_resource: Option<&str>) -> Option<usize> {
        let sites = &self.pool.config.sites;
        match grid_resource {
            Some(r) => sites.iter().position(|s| super::commands::normalize_resource(&s.grid_resource) == r),
            None => self.pool.config.local.as_ref().map(|_| sites.len()),
        }
    }

    fn hold_pending(&self, id: (u64, u64)) -> bool {
        self.job(id).is_some_and(|j| j.hold)
    }

    /// Runs site `site`'s model up to `until` one event time at a time, so
    /// that an attempt going on hold leaves its slot at the instant it would
    /// have started.
    fn step(&mut self, site: usize, until: f64, happenings: &mut Vec<(f64, (u64, u64), Happening)>) {
        let mut stalls = 0;
        while let Some(t) = self.sims[site].next_event_time() {
            if t > until || stalls > 100 {
                break;
            }
            let events = self.sims[site].advance(t);
            let stalled = events.is_empty() && self.sims[site].next_event_time() == Some(t);
            stalls = if stalled { stalls + 1 } else { 0 };
            self.absorb(site, events, happenings);
        }
        // Moves the model's clock; returns only what a stall above left over.
        let rest = self.sims[site].advance(until);
        self.absorb(site, rest, happenings);
    }

    fn absorb(
        &mut self,
        site: usize,
        events: Vec<(f64, AttemptId, ModelEvent)>,
        happenings: &mut Vec<(f64, (u64, u64), Happening)>,
    ) {
        for (t, attempt, event) in events {
            let Some(&id) = self.by_attempt.get(&attempt) else { continue };
            let what = match event {
                ModelEvent::Started if self.hold_pending(id) => {
                    self.sims[site].remove(t, attempt);
                    Happening::Held
                }
                ModelEvent::Started => Happening::Started,
                ModelEvent::Finished => Happening::Finished,
                ModelEvent::Failed => Happening::Failed,
            };
            if what != Happening::Started {
                self.by_attempt.remove(&attempt);
                self.attempts.remove(&id);
            }
            happenings.push((t, id, what));
        }
    }

    /// The next simulated instant something is due: a model event or a 027.
    fn next_wake(&self, delay: f64) -> Option<f64> {
        let models = self.sims.iter().filter_map(SiteSim::next_event_time);
        let grid = self
            .queue
            .jobs
            .iter()
            .filter(|j| j.grid_resource.is_some() && j.grid_job_id.is_none())
            .map(|j| j.qdate + delay);
        models.chain(grid).min_by(f64::total_cmp)
    }
}

enum Tick {
    /// Keep going; wake at this simulated time at the latest.
    Continue(Option<f64>),
    Exit(String),
}

/// The host part of a grid resource, for hold reasons (`condor SCHEDD POOL`
/// → SCHEDD's host).
fn host_of(grid_resource: Option<&str>) -> String {
    grid_resource
        .and_then(|r| r.split_whitespace().nth(1))
        .map(|w| w.rsplit('@').next().unwrap_or(w).to_string())
        .unwrap_or_else(|| "cosched-fake".to_string())
}
