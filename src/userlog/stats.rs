//! The numbers of `cosched log stats`, folded one event at a time.
//!
//! Why it exists: a week of a million jobs makes logs of gigabytes; the
//! command must not hold the file or its events. What it must hold is one
//! record per job (a job's queue wait is known only when its execute comes,
//! and the percentiles need every job's value), so memory is O(jobs), kept
//! small: a job costs 20 bytes — its four time stamps as `i32` milliseconds
//! from its cluster's first stamp, and a flag byte — in a per-cluster array
//! indexed by proc number (HTCondor numbers the procs of a cluster 0, 1, 2…).
//! A job that does not fit that form (a stamp with a sub-millisecond part or
//! more than 24 days from its cluster's first one, a negative or far-off proc
//! number) is kept whole in a side map instead: exact, only bigger.
//!
//! The results are those of folding each log's events into per-job times in
//! log order: the decoded stamps are the same `f64`s as
//! [`super::Timestamp::naive_seconds`], and the figures are those of
//! [`crate::stats`], which do not depend on where a job was kept.

use super::{Event, EventBody, Timestamp};
use crate::stats::{Effect, JobFigures, JobTimes};
use std::collections::{BTreeMap, HashMap};

/// What an event does to its job's [`JobTimes`], by typed body: a known
/// event whose body did not parse (`Other`) counts for the job's existence
/// only.
pub fn effect(body: &EventBody) -> Effect {
    match body {
        EventBody::Submit { .. } => Effect::Submit,
        EventBody::Execute { .. } => Effect::Execute,
        EventBody::GridSubmit { .. } => Effect::GridSubmit,
        EventBody::Terminated { .. } => Effect::Terminate,
        EventBody::Aborted { .. } => Effect::Remove,
        EventBody::Held { .. } => Effect::Hold,
        EventBody::Released { .. } => Effect::Release,
        _ => Effect::None,
    }
}

/// "No stamp" in a packed slot.
const NONE: i32 = i32::MIN;
/// Slot flags.
const PRESENT: u8 = 1;
const EXECUTED: u8 = 2;
const REMOVED: u8 = 4;
const HELD: u8 = 8;
/// A dense cluster array grows to a proc number at most this far past twice
/// its length; farther procs go to the side map (a stray huge proc number
/// must not allocate megabytes).
const DENSE_SLACK: i64 = 16_384;

/// One job in 20 bytes. `wait_end` is the first execute, or while there is
/// none the first grid submit (flag `EXECUTED` tells which): all that
/// [`JobTimes::queue_wait`] needs of the two.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// submit, wait_end, last_execute, terminate: milliseconds from the
    /// cluster's base stamp, or [`NONE`].
    ms: [i32; 4],
    flags: u8,
}

const EMPTY: Slot = Slot { ms: [NONE; 4], flags: 0 };

/// The jobs of one cluster, indexed by proc.
#[derive(Debug)]
struct Cluster {
    /// The cluster's id (to name a job whose times went backwards).
    id: i64,
    /// Naive Unix seconds of the cluster's first stamp.
    base: i64,
    slots: Vec<Slot>,
}

impl Cluster {
    /// The packed form of `t`, if it has one.
    fn pack(&self, t: &Timestamp) -> Option<i32> {
        let micros = t.micros.unwrap_or(0);
        if micros % 1000 != 0 {
            return None;
        }
        let ms = (t.naive_unix.checked_sub(self.base)?)
            .checked_mul(1000)?
            .checked_add(i64::from(micros / 1000))?;
        i32::try_from(ms).ok().filter(|&m| m != NONE)
    }

    /// The exact `naive_seconds()` of the stamp packed as `ms`.
    fn unpack(&self, ms: i32) -> Option<f64> {
        if ms == NONE {
            return None;
        }
        let ms = i64::from(ms);
        let naive_unix = self.base + ms.div_euclid(1000);
        let stamp =
            Timestamp { naive_unix, micros: Some(ms.rem_euclid(1000) as u32 * 1000), ..Timestamp::default() };
        Some(stamp.naive_seconds())
    }

    fn unpack_slot(&self, s: &Slot) -> JobTimes {
        let executed = s.flags & EXECUTED != 0;
        let wait_end = self.unpack(s.ms[1]);
        JobTimes {
            submit: self.unpack(s.ms[0]),
            first_execute: wait_end.filter(|_| executed),
            grid_submit: wait_end.filter(|_| !executed),
            last_execute: self.unpack(s.ms[2]),
            terminate: self.unpack(s.ms[3]),
            removed: s.flags & REMOVED != 0,
            held: s.flags & HELD != 0,
        }
    }
}

/// Applies an event to a packed slot; `false` if its stamp does not pack
/// (the slot is then unchanged).
fn apply_packed(slot: &mut Slot, effect: Effect, ms: Option<i32>) -> bool {
    let set = |slot: &mut Slot, i: usize| match ms {
        Some(ms) => {
            slot.ms[i] = ms;
            true
        }
        None => false,
    };
    match effect {
        Effect::Submit if slot.ms[0] == NONE => set(slot, 0),
        Effect::Execute => {
            let first = slot.flags & EXECUTED == 0;
            let last = slot.ms[3] == NONE;
            if (first || last) && ms.is_none() {
                return false;
            }
            if first {
                slot.ms[1] = ms.unwrap_or(NONE);
                slot.flags |= EXECUTED;
            }
            if last {
                slot.ms[2] = ms.unwrap_or(NONE);
            }
            true
        }
        Effect::GridSubmit if slot.flags & EXECUTED == 0 && slot.ms[1] == NONE => set(slot, 1),
        Effect::Terminate => set(slot, 3),
        Effect::Remove => {
            slot.flags |= REMOVED;
            true
        }
        Effect::Hold => {
            slot.flags |= HELD;
            true
        }
        Effect::Release => {
            slot.flags &= !HELD;
            true
        }
        _ => true,
    }
}

/// The per-job times of one log.
#[derive(Debug, Default)]
struct LogJobs {
    clusters: Vec<Cluster>,
    /// Cluster id → index in `clusters`.
    index: HashMap<i64, usize>,
    /// The cluster of the previous event (most events follow one of their
    /// own cluster): (id, index).
    last: Option<(i64, usize)>,
    /// Jobs that do not pack, whole.
    wide: BTreeMap<(i64, i64), JobTimes>,
}

impl LogJobs {
    fn add(&mut self, ev: &Event) {
        let effect = effect(&ev.body);
        let (c, p) = ev.job();
        let at = match self.last {
            Some((id, at)) if id == c => at,
            _ => {
                let next = self.clusters.len();
                let at = *self.index.entry(c).or_insert(next);
                if at == next {
                    self.clusters.push(Cluster { id: c, base: ev.time.naive_unix, slots: Vec::new() });
                }
                self.last = Some((c, at));
                at
            }
        };
        let cluster = &mut self.clusters[at];
        let len = cluster.slots.len() as i64;
        let dense = (0..len).contains(&p) && cluster.slots[p as usize].flags & PRESENT != 0;
        if dense {
            let ms = cluster.pack(&ev.time);
            if apply_packed(&mut cluster.slots[p as usize], effect, ms) {
                return;
            }
            // This stamp does not pack: the job moves to the side map.
            let mut times = cluster.unpack_slot(&cluster.slots[p as usize]);
            cluster.slots[p as usize] = EMPTY;
            times.apply(effect, ev.time.naive_seconds());
            self.wide.insert((c, p), times);
            return;
        }
        if let Some(times) = self.wide.get_mut(&(c, p)) {
            times.apply(effect, ev.time.naive_seconds());
            return;
        }
        let mut slot = Slot { flags: PRESENT, ..EMPTY };
        let fits =
            p >= 0 && p <= 2 * len + DENSE_SLACK && apply_packed(&mut slot, effect, cluster.pack(&ev.time));
        if fits {
            let p = p as usize;
            if p >= cluster.slots.len() {
                // Grow by a quarter, not double: most jobs are in big
                // clusters, and doubling would leave up to half unused.
                let more = (p + 1 - cluster.slots.len()).max(cluster.slots.len() / 4);
                cluster.slots.reserve_exact(more);
                cluster.slots.resize(p + 1, EMPTY);
            }
            cluster.slots[p] = slot;
        } else {
            let mut times = JobTimes::default();
            times.apply(effect, ev.time.naive_seconds());
            self.wide.insert((c, p), times);
        }
    }

    /// Every job's times: the packed ones, then the side map's.
    fn for_each(&self, mut f: impl FnMut(&JobTimes)) {
        self.for_each_job(|_, times| f(times));
    }

    /// [`LogJobs::for_each`] with each job's (cluster, proc).
    fn for_each_job(&self, mut f: impl FnMut((i64, i64), &JobTimes)) {
        for cluster in &self.clusters {
            for (proc, slot) in cluster.slots.iter().enumerate().filter(|(_, s)| s.flags & PRESENT != 0) {
                f((cluster.id, proc as i64), &cluster.unpack_slot(slot));
            }
        }
        self.wide.iter().for_each(|(&job, times)| f(job, times));
    }
}

/// Event counts and per-job times of several logs, fed one event at a time.
#[derive(Debug)]
pub struct LogStats {
    /// Events by code.
    counts: BTreeMap<u16, u64>,
    /// Counts of codes below 64 (nearly all), without a map look-up.
    low_counts: [u64; 64],
    logs: Vec<LogJobs>,
}

/// What [`LogStats::finish`] computes.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsReport {
    /// (code, count), by code.
    pub events: Vec<(u16, u64)>,
    pub figures: JobFigures,
    /// Jobs with a time that came out negative, left out of the figures:
    /// (log number, from 0 in [`LogStats::start_log`] order; (cluster,
    /// proc); which events, [`JobTimes::describe_backwards`]).
    pub backwards: Vec<(usize, (i64, i64), String)>,
}

impl Default for LogStats {
    fn default() -> Self {
        LogStats::new()
    }
}

impl LogStats {
    pub fn new() -> Self {
        LogStats { counts: BTreeMap::new(), low_counts: [0; 64], logs: Vec::new() }
    }

    /// Starts the next log: its jobs are distinct from the previous logs'
    /// even when their ids are the same.
    pub fn start_log(&mut self) {
        self.logs.push(LogJobs::default());
    }

    /// Folds one event of the current log.
    pub fn add(&mut self, ev: &Event) {
        match self.low_counts.get_mut(usize::from(ev.code)) {
            Some(n) => *n += 1,
            None => *self.counts.entry(ev.code).or_default() += 1,
        }
        if self.logs.is_empty() {
            self.start_log();
        }
        if let Some(log) = self.logs.last_mut() {
            log.add(ev);
        }
    }

    /// The counts and summaries.
    pub fn finish(mut self) -> StatsReport {
        for (code, &n) in self.low_counts.iter().enumerate() {
            if n > 0 {
                self.counts.insert(code as u16, n);
            }
        }
        for log in &mut self.logs {
            for cluster in &mut log.clusters {
                cluster.slots.shrink_to_fit();
            }
        }
        let figures = JobFigures::of(|f| self.for_each_job(f));
        let mut backwards = Vec::new();
        for (i, log) in self.logs.iter().enumerate() {
            log.for_each_job(|job, times| {
                if let Some(why) = times.describe_backwards() {
                    backwards.push((i, job, why));
                }
            });
        }
        StatsReport { events: self.counts.into_iter().collect(), figures, backwards }
    }

    fn for_each_job(&self, mut f: impl FnMut(&JobTimes)) {
        for log in &self.logs {
            log.for_each(&mut f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userlog::parse_bytes;

    /// The plain fold: one `JobTimes` per job in a map, as the command did
    /// before it streamed.
    fn plain(events: &[Event]) -> BTreeMap<(i64, i64), JobTimes> {
        let mut jobs: BTreeMap<(i64, i64), JobTimes> = BTreeMap::new();
        for ev in events {
            jobs.entry(ev.job()).or_default().apply(effect(&ev.body), ev.time.naive_seconds());
        }
        jobs
    }

    /// The jobs as kept, as (submit, …) tuples in a canonical order.
    fn sorted(jobs: impl IntoIterator<Item = JobTimes>) -> Vec<String> {
        let mut out: Vec<String> = jobs.into_iter().map(|j| format!("{j:?}")).collect();
        out.sort();
        out
    }

    fn packed(events: &[Event]) -> Vec<String> {
        let mut log = LogJobs::default();
        for ev in events {
            log.add(ev);
        }
        let mut out = Vec::new();
        log.for_each(|j| out.push(*j));
        assert!(!log.wide.is_empty() && !log.clusters.is_empty(), "both kinds are exercised");
        sorted(out)
    }

    fn header(code: u16, cluster: i64, proc: i64, stamp: &str, rest: &str) -> String {
        format!("{code:03} ({cluster:03}.{proc:03}.000) {stamp} {rest}\n...\n")
    }

    #[test]
    fn packed_slots_and_the_side_map_give_the_plain_fold() {
        let mut log = String::new();
        // Dense cluster 7 in string order, with a grid job and a re-executed one.
        for p in [0, 1, 10, 2, 3] {
            log += &header(0, 7, p, "2026-11-21 05:00:00", "Job submitted from host: <h>");
        }
        log += &header(
            27,
            7,
            2,
            "2026-11-21 05:00:03",
            "Job submitted to grid resource\n    GridResource: condor a b\n    GridJobId: condor a b 1.0",
        );
        log += &header(1, 7, 0, "2026-11-21 05:00:05.250", "Job executing on host: <h>");
        log += &header(1, 7, 0, "2026-11-21 05:00:09", "Job executing on host: <h>");
        log += &header(
            5,
            7,
            0,
            "2026-11-21 05:01:00",
            "Job terminated.\n\t(1) Normal termination (return value 0)",
        );
        log += &header(1, 7, 0, "2026-11-21 05:02:00", "Job executing on host: <h>");
        // Sub-millisecond stamp, 30 days later, a negative and a far-off proc: side map.
        log += &header(1, 7, 1, "2026-11-21 05:00:07.000300", "Job executing on host: <h>");
        log += &header(
            5,
            7,
            3,
            "2026-12-21 05:00:00",
            "Job terminated.\n\t(1) Normal termination (return value 0)",
        );
        log += &header(0, 7, -1, "2026-11-21 05:00:00", "Job submitted from host: <h>");
        log += &header(0, 7, 999_999, "2026-11-21 05:00:00", "Job submitted from host: <h>");
        log += &header(12, 7, 10, "2026-11-21 05:00:30", "Job was held.\n\tboom\n\tCode 1 Subcode 0");
        log += &header(9, 7, 10, "2026-11-21 05:00:40", "Job was aborted.\n\tgone");
        // A cluster that starts with a later job, and an event whose body does not read.
        log += &header(6, 3, 4, "2026-11-20 01:00:00", "Image size of job updated: 12");
        log += &header(5, 3, 4, "2026-11-20 01:00:01", "Job terminated.");
        let (events, _) = parse_bytes(log.as_bytes());
        let want = plain(&events);
        assert_eq!(want.len(), 8);
        assert!(want.values().any(|j| j.first_execute.map(|t| t.fract()) == Some(0.25)));
        assert_eq!(packed(&events), sorted(want.into_values()));
    }
}
