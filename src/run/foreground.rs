//! What a run in the foreground adds to [`super::drive`]: the progress
//! display and the messages of the person who typed `cosched submit`, and
//! the three things that stop such a run besides its end: SIGINT/SIGTERM
//! (a clean stop; a second one exits at once),
//! `condor_submit` rejecting a batch outright (the same submission would
//! fail again; a person has to look), and a schedd silent for longer than
//! `[condor] unreachable_timeout`.

use super::drive::{Starting, Watcher};
use super::progress::{self, Progress};
use crate::condor::Reachability;
use crate::engine::{self, Ending, Observer};
use crate::policy::{Action, Policy, SiteEvent, SiteId, Time};
use crate::sync::Locked;
use crate::Exit;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The foreground's [`Watcher`]: the progress display, which is also the
/// run's tally, and the watches that stop the run.
pub(super) struct Watch {
    pub progress: Progress,
    stop: CancellationToken,
    /// The run's sites, in site order (known once it starts).
    names: Vec<String>,
    /// The batch `condor_submit` rejected outright: (site, its error).
    pub permanent: Option<(String, String)>,
    /// The schedd silent past the patience: (site, its last error).
    pub unreachable: Arc<Mutex<Option<(String, String)>>>,
    /// Seconds a schedd may stay silent (`[condor] unreachable_timeout`).
    patience: f64,
    /// Whether to say what the run starts with (not for `--json`, unless
    /// it resumes: a replay takes a while).
    tell_start: bool,
    /// The state directory, as the start message names it.
    state_root: String,
    /// The schedd watches, from the run's start to its end.
    watches: Vec<JoinHandle<()>>,
    /// The signal watch, from the run's start until this is dropped: past
    /// the engine's end (the report) a second Ctrl-C still stops at once.
    signals: Option<JoinHandle<()>>,
}

impl Watch {
    pub fn new(
        progress: Progress,
        stop: CancellationToken,
        patience: f64,
        json: bool,
        state_root: String,
    ) -> Watch {
        Watch {
            progress,
            stop,
            names: Vec::new(),
            permanent: None,
            unreachable: Arc::default(),
            patience,
            tell_start: !json,
            state_root,
            watches: Vec::new(),
            signals: None,
        }
    }
}

impl Watcher for Watch {
    fn tally(&mut self) -> &mut Progress {
        &mut self.progress
    }

    fn starting(&mut self, start: &Starting<'_>) {
        self.names = start.sites.to_vec();
        for (batch, what) in start.reconciled {
            eprintln!("cosched: batch {batch}: {what}");
        }
        if self.tell_start || start.resumed {
            // A week's run replays millions of events first (seconds): say so,
            // or the silence before the first progress line looks like a hang.
            let since = match start.checkpoint_unix {
                Some(taken) => format!(
                    " from its checkpoint of {} ago",
                    progress::format_duration((engine::wall_clock_unix() - taken).max(0.0))
                ),
                None => String::new(),
            };
            let replaying = if start.replaying == 0 {
                since
            } else {
                format!("{since}; replaying its {} past events first", start.replaying)
            };
            eprintln!(
                "cosched: {} run {} of {} jobs over {} site(s) with policy {}{replaying}; state in {}",
                if start.resumed { "resuming" } else { "starting" },
                start.record.id,
                start.record.n_jobs,
                self.names.len(),
                start.policy,
                self.state_root
            );
        }
        self.signals = Some(tokio::spawn(watch_signals(self.stop.clone(), self.state_root.clone())));
        self.watches.push(tokio::spawn(watch_schedd(
            self.names.clone(),
            start.reachability.to_vec(),
            self.patience,
            self.stop.clone(),
            self.unreachable.clone(),
        )));
    }
}

impl Observer for Watch {
    fn action(&mut self, now: Time, action: &Action) {
        self.progress.action(now, action);
    }
    fn event(&mut self, now: Time, site: SiteId, event: &SiteEvent) {
        if let SiteEvent::SubmitFailed { error, permanent: true, .. } = event {
            if self.permanent.is_none() {
                let name = self.names.get(site.index()).cloned().unwrap_or_default();
                self.permanent = Some((name, error.clone()));
                self.stop.cancel();
            }
        }
        self.progress.event(now, site, event);
    }
    fn site_unreachable(&mut self, site: SiteId, down: Option<(Time, String)>) {
        self.progress.site_unreachable(site, down);
    }
    fn decisions(&mut self, decisions: &[crate::policy::Decision]) {
        self.progress.decisions(decisions);
    }
    fn progress(&mut self, now: Time, policy: &dyn Policy) {
        self.progress.progress(now, policy);
    }
    fn finished(&mut self, now: Time, policy: &dyn Policy, ending: Ending) {
        for watch in self.watches.drain(..) {
            watch.abort();
        }
        self.progress.finished(now, policy, ending);
    }
}

/// Cancels `shutdown` on the first SIGINT or SIGTERM: a clean stop, which
/// waits for the HTCondor commands in flight (they are in process groups of
/// their own, so a terminal's Ctrl-C reaches cosched alone: see
/// `condor::Condor::run`). On the next one, exits at once with
/// [`Exit::Interrupted`]: a schedd that hangs must not hold the person at
/// the terminal for the whole `[condor] submit_timeout`. That exit leaves
/// what a `kill -9` would (`super::drive`'s crash points): the state
/// database is committed transaction by transaction, a `condor_submit` in
/// flight dies with cosched (its intent is recorded), and `--resume`
/// settles its batch from the user log or `condor_q`.
///
/// The handlers are installed when this is called, not when the returned
/// task first runs (see the daemon's `watch_signals`): a signal in between
/// would kill cosched uncleanly. tokio keeps them installed for good, so
/// this watch lasts as long as the [`Watch`] (past the engine's end: a
/// second Ctrl-C also cuts the report short).
fn watch_signals(shutdown: CancellationToken, state_root: String) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let installed = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
    async move {
        let (Ok(mut int), Ok(mut term)) = installed else {
            tracing::warn!("cannot watch SIGINT/SIGTERM; Ctrl-C will kill cosched without a clean stop");
            return;
        };
        let mut signalled = false;
        loop {
            tokio::select! {
                biased;
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            if signalled {
                eprintln!(
                    "\ncosched: stopping at once: a condor_submit in flight dies with cosched; \
                     `cosched submit --resume {state_root}` settles its batch (the user log or condor_q \
                     tells whether it got in)"
                );
                std::process::exit(Exit::Interrupted as i32);
            }
            signalled = true;
            eprintln!(
                "\ncosched: stopping: no more submissions; jobs out are left alone, a batch being submitted \
                 is waited for (Ctrl-C again stops at once)"
            );
            shutdown.cancel();
        }
    }
}

/// Says when a site's schedd stops answering and when it answers again, and
/// stops the run (recording which site and why in `stopped`) once one has
/// been silent for `patience` seconds. The batch being retried stays
/// recorded as an intent, and `--resume` settles it.
async fn watch_schedd(
    names: Vec<String>,
    reachability: Vec<Arc<Reachability>>,
    patience: f64,
    shutdown: CancellationToken,
    stopped: Arc<Mutex<Option<(String, String)>>>,
) {
    let mut told = vec![false; names.len()];
    let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        every.tick().await;
        let now = engine::wall_clock_unix();
        for (i, r) in reachability.iter().enumerate() {
            let name = names.get(i).map_or("?", String::as_str);
            match r.unreachable() {
                Some((since, error)) => {
                    if !told[i] {
                        told[i] = true;
                        eprintln!(
                            "cosched: site {name}: the schedd does not answer ({}); retrying the same batch, \
                             for at most {patience:.0} s ([condor] unreachable_timeout)",
                            error.lines().next().unwrap_or("")
                        );
                    }
                    if now - since >= patience {
                        *stopped.locked() = Some((name.to_string(), error));
                        shutdown.cancel();
                        return;
                    }
                }
                None if told[i] => {
                    told[i] = false;
                    eprintln!("cosched: site {name}: the schedd answers again");
                }
                None => {}
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        for watch in self.watches.iter().chain(&self.signals) {
            watch.abort();
        }
    }
}
