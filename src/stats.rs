//! The statistics every command shows: one quantile definition, one per-job
//! fold of user-log events, one summary type, a site's means and the
//! makespan. `cosched log stats`, the report, a run's summary, the
//! simulator's metrics and the bench compute their figures here, so that
//! one fact is computed one way and two commands shown the same jobs print
//! the same numbers.
//!
//! **Quantiles are nearest rank**: the `q` quantile of `n` sorted values is
//! the value of rank `ceil(q·n)` (ranks from 1; rank 1 for `q·n ≤ 1`), so the
//! p50 of 1, 2, 3, 4 is 2 and the p95 of 1…20 is 19. Why this one and not an
//! interpolated one: a quantile is then always one of the values, a job's
//! real queue wait or turnaround, never a time no job had; it needs no choice
//! among the nine interpolation schemes, and the bench's figures, pinned by
//! the baselines every policy change is compared against, were made with it.
//!
//! **A mean sums the values in ascending order**, so it does not depend on
//! the order the jobs were met in (which log first, where a job was kept).
//! A site's means ([`SiteMeans`]), kept as a run goes on, sum them as they
//! come: two orders differ in the last bits at most.
//!
//! **A job's times** ([`JobTimes`]), from its events in log order:
//! - queue wait = its first execute (001) − its first submit (000); for a
//!   grid job that never logged an execute, its first grid submit (027): a
//!   lower bound;
//! - run time = its terminate (005) − the execute that run ended (the last
//!   001 before the first 005);
//! - turnaround = its (last) terminate − its first submit.
//!
//! A job without a submit event (a log started late) has no queue wait and no
//! turnaround. A time that comes out negative (an event stamped before the
//! one it follows: events written out of order, local time going back at
//! the end of daylight saving) is no time at all: it is left out of every
//! figure, and [`JobTimes::backwards`] says which events, for the reader to
//! report. How a job ended ([`Outcome`]): completed if it terminated, else
//! removed if aborted (009), else held if held (012) and not released (013)
//! since, else other.
//!
//! **A site's means** ([`SiteMeans`]), in the run's summary and in the
//! report's sites table alike: the mean queue wait, run time and turnaround
//! of the attempts that succeeded there (a terminate with return value 0),
//! each time as above. An attempt is one HTCondor job (one `cluster.proc`):
//! a job sent again after a failure, a hold or being taken back while idle
//! has an attempt at each site it went to. Its failed, held and removed
//! attempts are counted where they happened, not timed: a failure ran part
//! of its work, and a job taken back before it started has no queue wait.
//!
//! **Makespan** ([`makespan`]): from the run's start to its last job's end,
//! the last terminate (005) or abort (009) of any attempt. The run's start
//! is run time 0 in the summary and in the report cosched writes at a run's
//! end; in a report of logs alone (`cosched log report`) the first submit
//! (000) stands in for it. It is not the progress line's *elapsed* time:
//! that runs from the run's start to now, at the end to the run's stop,
//! which comes after its last job's end by the time the log takes to tell
//! that end (a grid site's poll, the log's reading).

use serde::{Deserialize, Serialize};

/// The value of rank `ceil(q·n)` of `sorted` (ascending); `None` when empty.
pub fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[rank - 1])
}

/// Count, mean and nearest-rank quantiles of one quantity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub max: f64,
}

impl Summary {
    /// Sorts `values` and summarizes them; `None` when empty.
    pub fn of(values: &mut [f64]) -> Option<Summary> {
        // Unstable: no extra memory, and values equal under `total_cmp` have
        // the same bits, so the sorted sequence is the same.
        values.sort_unstable_by(f64::total_cmp);
        Summary::of_sorted(values)
    }

    /// [`Summary::of`] for values already in ascending order.
    pub fn of_sorted(sorted: &[f64]) -> Option<Summary> {
        let n = sorted.len();
        let rank = |q| nearest_rank(sorted, q);
        Some(Summary {
            n,
            mean: sorted.iter().sum::<f64>() / n as f64,
            min: *sorted.first()?,
            p50: rank(0.5)?,
            p90: rank(0.9)?,
            p95: rank(0.95)?,
            max: *sorted.last()?,
        })
    }
}

/// What an event does to its job's [`JobTimes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Submit,
    Execute,
    GridSubmit,
    Terminate,
    Remove,
    Hold,
    Release,
    /// Any other event: the job exists, nothing else.
    None,
}

impl Effect {
    /// By event number (ULogEventNumber). The user-log reader maps its typed
    /// bodies instead (`userlog::stats::effect`): an event whose body did
    /// not read counts for its job's existence only.
    pub fn of_code(code: u16) -> Effect {
        match code {
            0 => Effect::Submit,
            1 => Effect::Execute,
            5 => Effect::Terminate,
            9 => Effect::Remove,
            12 => Effect::Hold,
            13 => Effect::Release,
            27 => Effect::GridSubmit,
            _ => Effect::None,
        }
    }
}

/// What one job's events say. Times are naive seconds: differences within
/// one log are exact.
#[derive(Default, Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct JobTimes {
    /// First 000.
    pub submit: Option<f64>,
    /// First 001.
    pub first_execute: Option<f64>,
    /// The 001 that the (last) 005 ended: the last one before a 005.
    pub last_execute: Option<f64>,
    /// First 027.
    pub grid_submit: Option<f64>,
    /// Last 005.
    pub terminate: Option<f64>,
    /// A 009 was seen.
    pub removed: bool,
    /// Held (012) and not released (013) since.
    pub held: bool,
}

/// How a job ended, as far as its events tell (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Removed,
    Held,
    Other,
}

/// A time of a job that came out negative: its `end` event is stamped
/// `seconds` before its `start` event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backwards {
    /// `queue wait`, `run time` or `turnaround`.
    pub quantity: &'static str,
    /// The events, as `execute (001)`.
    pub start: &'static str,
    pub end: &'static str,
    pub seconds: f64,
}

impl std::fmt::Display for Backwards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "its {} is stamped {} s before its {}, so it has no {}",
            self.end,
            (self.seconds * 1000.0).round() / 1000.0,
            self.start,
            self.quantity
        )
    }
}

impl JobTimes {
    /// Execute − submit; for a grid job that never logged 001, the 027
    /// (a lower bound).
    pub fn queue_wait(&self) -> Option<f64> {
        self.raw_queue_wait().filter(|t| *t >= 0.0)
    }
    /// Terminate − the execute it ended.
    pub fn run_time(&self) -> Option<f64> {
        self.raw_run_time().filter(|t| *t >= 0.0)
    }
    /// Terminate − submit.
    pub fn turnaround(&self) -> Option<f64> {
        self.raw_turnaround().filter(|t| *t >= 0.0)
    }

    fn raw_queue_wait(&self) -> Option<f64> {
        Some(self.first_execute.or(self.grid_submit)? - self.submit?)
    }
    fn raw_run_time(&self) -> Option<f64> {
        Some(self.terminate? - self.last_execute?)
    }
    fn raw_turnaround(&self) -> Option<f64> {
        Some(self.terminate? - self.submit?)
    }

    /// The job's times that came out negative (and are left out), and the
    /// events that make them.
    pub fn backwards(&self) -> Vec<Backwards> {
        let started = if self.first_execute.is_some() { "first execute (001)" } else { "grid submit (027)" };
        [
            ("queue wait", "submit (000)", started, self.raw_queue_wait()),
            ("run time", "execute (001)", "terminate (005)", self.raw_run_time()),
            ("turnaround", "submit (000)", "terminate (005)", self.raw_turnaround()),
        ]
        .into_iter()
        .filter_map(|(quantity, start, end, t)| {
            let t = t.filter(|t| *t < 0.0)?;
            Some(Backwards { quantity, start, end, seconds: -t })
        })
        .collect()
    }

    /// [`JobTimes::backwards`] as one line, `None` when there are none.
    pub fn describe_backwards(&self) -> Option<String> {
        let all = self.backwards();
        (!all.is_empty()).then(|| all.iter().map(Backwards::to_string).collect::<Vec<_>>().join("; "))
    }

    pub fn outcome(&self) -> Outcome {
        if self.terminate.is_some() {
            Outcome::Completed
        } else if self.removed {
            Outcome::Removed
        } else if self.held {
            Outcome::Held
        } else {
            Outcome::Other
        }
    }

    /// Applies one event of this job (events in log order).
    pub fn apply(&mut self, effect: Effect, t: f64) {
        match effect {
            Effect::Submit => {
                self.submit.get_or_insert(t);
            }
            Effect::Execute => {
                self.first_execute.get_or_insert(t);
                // A run that ends is the last one that started before it.
                if self.terminate.is_none() {
                    self.last_execute = Some(t);
                }
            }
            Effect::GridSubmit => {
                self.grid_submit.get_or_insert(t);
            }
            Effect::Terminate => self.terminate = Some(t),
            Effect::Remove => self.removed = true,
            Effect::Hold => self.held = true,
            Effect::Release => self.held = false,
            Effect::None => {}
        }
    }
}

/// [Makespan](self): `last_end − start`, seconds; `None` without an end, or
/// with one before the start (events out of order).
pub fn makespan(start: f64, last_end: Option<f64>) -> Option<f64> {
    last_end.map(|end| end - start).filter(|m| *m >= 0.0)
}

/// Count and sum of one quantity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Mean {
    n: u64,
    sum: f64,
}

impl Mean {
    fn add(&mut self, value: Option<f64>) {
        if let Some(v) = value {
            self.n += 1;
            self.sum += v;
        }
    }
    fn get(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// [A site's means](self): of the queue wait, run time and turnaround of
/// its attempts that succeeded. Summed as the attempts are added (a site of
/// a million jobs keeps three sums, not a million values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SiteMeans {
    queue_wait: Mean,
    run_time: Mean,
    turnaround: Mean,
}

impl SiteMeans {
    /// Counts one attempt, with the times its events gave: timed if it
    /// `succeeded` (terminated with return value 0), else not at all.
    pub fn add(&mut self, times: &JobTimes, succeeded: bool) {
        if succeeded {
            self.queue_wait.add(times.queue_wait());
            self.run_time.add(times.run_time());
            self.turnaround.add(times.turnaround());
        }
    }
    pub fn queue_wait(&self) -> Option<f64> {
        self.queue_wait.get()
    }
    pub fn run_time(&self) -> Option<f64> {
        self.run_time.get()
    }
    /// Also the thesis's AgTime.
    pub fn turnaround(&self) -> Option<f64> {
        self.turnaround.get()
    }
}

/// The jobs' outcomes and the [`Summary`] of each of their times: the figures
/// `cosched log stats` prints, which the report shows too.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobFigures {
    pub jobs: usize,
    pub completed: usize,
    pub removed: usize,
    pub held: usize,
    pub queue_wait: Option<Summary>,
    pub run_time: Option<Summary>,
    pub turnaround: Option<Summary>,
}

impl JobFigures {
    /// The figures of the jobs `for_each` visits (it is called four times,
    /// once per quantity, so that one vector of values is alive at a time;
    /// it must visit the same jobs each time).
    pub fn of(for_each: impl Fn(&mut dyn FnMut(&JobTimes))) -> JobFigures {
        let mut figures = JobFigures::default();
        for_each(&mut |j| {
            figures.jobs += 1;
            match j.outcome() {
                Outcome::Completed => figures.completed += 1,
                Outcome::Removed => figures.removed += 1,
                Outcome::Held => figures.held += 1,
                Outcome::Other => {}
            }
        });
        let summary = |f: fn(&JobTimes) -> Option<f64>| {
            let mut n = 0;
            for_each(&mut |j| n += usize::from(f(j).is_some()));
            let mut values = Vec::with_capacity(n);
            for_each(&mut |j| values.extend(f(j)));
            Summary::of(&mut values)
        };
        figures.queue_wait = summary(JobTimes::queue_wait);
        figures.run_time = summary(JobTimes::run_time);
        figures.turnaround = summary(JobTimes::turnaround);
        figures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_is_the_value_of_rank_ceil_q_n() {
        // n = 4: p50 → rank 2, p90 → rank ceil(3.6) = 4, p0 → rank 1.
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(nearest_rank(&v, 0.5), Some(2.0));
        assert_eq!(nearest_rank(&v, 0.9), Some(4.0));
        assert_eq!(nearest_rank(&v, 0.0), Some(1.0));
        // n = 20: p95 → rank 19; p50 → rank 10.
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.95), Some(19.0));
        assert_eq!(nearest_rank(&v, 0.5), Some(10.0));
        assert_eq!(nearest_rank(&[], 0.5), None);
    }

    #[test]
    fn a_summary_sorts_and_takes_its_quantiles_from_the_values() {
        let s = Summary::of(&mut [4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s, Summary { n: 4, mean: 2.5, min: 1.0, p50: 2.0, p90: 4.0, p95: 4.0, max: 4.0 });
        assert!(Summary::of(&mut []).is_none());
    }

    #[test]
    fn a_mean_does_not_depend_on_the_order_of_the_values() {
        // 1e16 + 1 + 1 is 1e16 left to right, 1e16 + 2 smallest first.
        let a = Summary::of(&mut [1e16, 1.0, 1.0]).unwrap();
        let b = Summary::of(&mut [1.0, 1.0, 1e16]).unwrap();
        assert_eq!(a.mean, b.mean);
        assert_eq!(a.mean, (1e16 + 2.0) / 3.0);
    }

    #[test]
    fn a_job_re_run_after_it_terminated_keeps_the_run_that_ended() {
        let mut j = JobTimes::default();
        for (effect, t) in [
            (Effect::Submit, 0.0),
            (Effect::Execute, 10.0),
            (Effect::Execute, 20.0),
            (Effect::Terminate, 50.0),
            (Effect::Execute, 70.0),
        ] {
            j.apply(effect, t);
        }
        assert_eq!((j.queue_wait(), j.run_time(), j.turnaround()), (Some(10.0), Some(30.0), Some(50.0)));
        assert_eq!(j.outcome(), Outcome::Completed);
        let mut grid = JobTimes::default();
        grid.apply(Effect::Submit, 5.0);
        grid.apply(Effect::GridSubmit, 8.0);
        grid.apply(Effect::Hold, 9.0);
        assert_eq!((grid.queue_wait(), grid.outcome()), (Some(3.0), Outcome::Held));
        grid.apply(Effect::Release, 10.0);
        assert_eq!(grid.outcome(), Outcome::Other);
    }

    #[test]
    fn a_sites_means_time_its_succeeded_attempts_only() {
        let times = |events: &[(Effect, f64)]| {
            let mut j = JobTimes::default();
            events.iter().for_each(|&(e, t)| j.apply(e, t));
            j
        };
        let ok = times(&[(Effect::Submit, 0.0), (Effect::Execute, 10.0), (Effect::Terminate, 50.0)]);
        let evicted = times(&[
            (Effect::Submit, 0.0),
            (Effect::Execute, 20.0),
            (Effect::Execute, 30.0),
            (Effect::Terminate, 60.0),
        ]);
        let failed = times(&[(Effect::Submit, 0.0), (Effect::Execute, 1.0), (Effect::Terminate, 2.0)]);
        let taken_back = times(&[(Effect::Submit, 0.0), (Effect::GridSubmit, 1.0), (Effect::Remove, 9.0)]);
        let mut site = SiteMeans::default();
        assert_eq!(site.queue_wait(), None);
        site.add(&ok, true);
        site.add(&evicted, true);
        site.add(&failed, false);
        site.add(&taken_back, false);
        // Waits to the first execute, runs from the execute the terminate ended.
        assert_eq!(site.queue_wait(), Some((10.0 + 20.0) / 2.0));
        assert_eq!(site.run_time(), Some((40.0 + 30.0) / 2.0));
        assert_eq!(site.turnaround(), Some((50.0 + 60.0) / 2.0));
        assert_eq!(makespan(100.0, Some(160.0)), Some(60.0));
        assert_eq!(makespan(100.0, Some(90.0)), None);
        assert_eq!(makespan(100.0, None), None);
    }

    /// Report #2: events out of order (a DST fall-back) gave negative times
    /// that were averaged in.
    #[test]
    fn a_negative_time_is_left_out_and_told() {
        let mut j = JobTimes::default();
        for (effect, t) in [(Effect::Submit, 100.0), (Effect::Execute, 400.0), (Effect::Terminate, 130.0)] {
            j.apply(effect, t);
        }
        assert_eq!((j.queue_wait(), j.run_time(), j.turnaround()), (Some(300.0), None, Some(30.0)));
        assert_eq!(
            j.backwards(),
            [Backwards {
                quantity: "run time",
                start: "execute (001)",
                end: "terminate (005)",
                seconds: 270.0
            }]
        );
        let ok = JobTimes { submit: Some(1.0), terminate: Some(1.0), ..JobTimes::default() };
        assert!(ok.backwards().is_empty() && ok.turnaround() == Some(0.0));
        let figures = JobFigures::of(|f| {
            f(&j);
            f(&ok);
        });
        assert_eq!(figures.run_time, None);
        assert_eq!(figures.turnaround.map(|s| (s.n, s.min)), Some((2, 0.0)));
    }
}
