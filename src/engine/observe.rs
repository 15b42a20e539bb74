//! Watching a run without steering it: progress displays, decision traces,
//! the status a daemon serves. Observers see every action and event but cannot
//! change them, so a run is the same whether it is watched or not.

use super::{Ending, SiteCursor};
use crate::policy::{Action, Decision, Policy, SiteEvent, SiteId, Time};
use serde::Serialize;

/// Callbacks from the engine's coordinator. All methods default to nothing.
pub trait Observer: Send {
    /// The policy decided `action` at `now`.
    fn action(&mut self, _now: Time, _action: &Action) {}
    /// A site reported `event`, received at `now`.
    fn event(&mut self, _now: Time, _site: SiteId, _event: &SiteEvent) {}
    /// The policy explained itself (see [`Policy::take_decisions`]); in time
    /// order, right after the [`Observer::action`]s of the same input.
    fn decisions(&mut self, _decisions: &[Decision]) {}
    /// A site's schedd has not answered since `down.0` (run time; with its
    /// last error), or (`None`) answers again. Told by the edges, which run
    /// the HTCondor commands, just before [`Observer::progress`].
    fn site_unreachable(&mut self, _site: SiteId, _down: Option<(Time, String)>) {}
    /// Called after each batch of inputs; cheap observers may redraw here.
    fn progress(&mut self, _now: Time, _policy: &dyn Policy) {}
    /// The engine is between two inputs at `now`, and the policy's state
    /// covers what each site reported up to its cursor (in site order):
    /// where a run keeps checkpoints, this is when one may be taken.
    fn checkpoint(&mut self, _now: Time, _policy: &dyn Policy, _cursors: &[Option<SiteCursor>]) {}
    /// The run ended.
    fn finished(&mut self, _now: Time, _policy: &dyn Policy, _ending: Ending) {}
}

/// Watches nothing.
pub struct NullObserver;
impl Observer for NullObserver {}

/// One decision, for `cosched bench --trace` and `cosched replay`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceEntry {
    pub time: Time,
    pub site: Option<SiteId>,
    /// `submit`, `remove`, `withdraw` or `give-up`.
    pub action: &'static str,
    pub jobs: usize,
    pub why: String,
}

impl TraceEntry {
    pub fn of(time: Time, action: &Action) -> Self {
        match action {
            Action::Submit { site, jobs, why } => {
                TraceEntry { time, site: Some(*site), action: "submit", jobs: jobs.len(), why: why.clone() }
            }
            Action::Remove { site, jobs, why } => {
                TraceEntry { time, site: Some(*site), action: "remove", jobs: jobs.len(), why: why.clone() }
            }
            Action::Withdraw { site, jobs, why } => {
                TraceEntry { time, site: Some(*site), action: "withdraw", jobs: jobs.len(), why: why.clone() }
            }
            Action::GiveUp { why, .. } => {
                TraceEntry { time, site: None, action: "give-up", jobs: 1, why: why.clone() }
            }
        }
    }
}

/// Records every action and what the policy said of itself.
#[derive(Default)]
pub struct TraceRecorder {
    pub entries: Vec<TraceEntry>,
    /// What the policy said of itself (windows, verdicts), in time order.
    pub decisions: Vec<Decision>,
}

impl Observer for TraceRecorder {
    fn action(&mut self, now: Time, action: &Action) {
        self.entries.push(TraceEntry::of(now, action));
    }
    fn decisions(&mut self, decisions: &[Decision]) {
        self.decisions.extend_from_slice(decisions);
    }
}
