//! The controller's phase transitions, on sites fed events by hand.

use super::estimator::{Starting, COHORT_TO_TELL};
use super::*;
use crate::policy::adaptive::Params;

fn rules() -> Rules {
    Params::default().rules()
}

/// Memory of a site whose healthy runs take 90–110 s, held healthy at
/// `capacity` (and degraded at `ceiling`).
fn memory(capacity: f64, ceiling: Option<f64>) -> SiteMemory {
    let quantiles = (0..=16).map(|i| 90.0 + 20.0 * f64::from(i) / 16.0).collect();
    SiteMemory {
        capacity: Some(capacity),
        ceiling,
        runtime_quantiles: Some(quantiles),
        runtime_range: Some((90.0, 110.0)),
        ..SiteMemory::default()
    }
}

fn start(site: &mut Site, jobs: std::ops::Range<u64>, at: Time) {
    let jobs: Vec<JobId> = jobs.map(JobId).collect();
    site.submitted(&jobs, at);
    for job in jobs {
        site.started(job, at);
    }
}

#[test]
fn a_degraded_verdict_drains_the_site_and_nothing_is_judged_healthy_until_it_has() {
    // Held healthy at 10, no knee known: the window probes at twice that.
    let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), Some(&memory(10.0, None)));
    assert!(matches!(site.phase, Phase::Testing));
    assert_eq!((site.floor, site.window), (10.0, 20.0));
    // Twenty jobs run far past every healthy run (90–110 s): the probe is
    // degraded, and the window goes back to the level known healthy.
    start(&mut site, 0..20, 0.0);
    let verdict = site.check(400.0).map(|(v, _)| v);
    let Some(Verdict::Degraded { level, slowdown }) = verdict else { panic!("{verdict:?}") };
    assert_eq!(level, 20.0);
    assert!(slowdown >= site.rules.kappa);
    assert_eq!(site.window, 10.0);
    assert_eq!(site.ceiling, 20.0);
    let Phase::Draining { proven: Some(Proven { level: judged, .. }), recheck: None } = site.phase else {
        panic!("{:?}", site.phase)
    };
    assert_eq!(judged, 20.0);
    assert!(site.model(400.0, None).draining);
    // What the verdict proved goes with the phase: the ten jobs past the
    // window are the ones the tail may move, by the likeliest slowdown.
    assert_eq!(site.stragglers(400.0).len(), 10);
    // While more than the window run, the verdict's test goes on (a deeper
    // cut may follow) but no new test begins and nothing is healthy.
    let test = site.test.id;
    for t in (401..800).step_by(10) {
        let verdict = site.check(f64::from(t));
        assert!(!matches!(verdict, Some((Verdict::Healthy { .. }, _))), "at {t}: {verdict:?}");
        assert!(matches!(site.phase, Phase::Draining { .. }), "at {t}: {:?}", site.phase);
        assert_eq!(site.test.id, test);
    }
    // Drained to the window: a new test, by which the jobs that ran
    // through the overload no longer testify.
    for job in 0..10 {
        site.ended(JobId(job), 800.0, End::Success);
    }
    assert!(f64::from(site.running) <= site.window);
    site.check(810.0);
    assert!(matches!(site.phase, Phase::Testing), "{:?}", site.phase);
    assert!(site.test.id > test);
    assert!(site.runs.values().all(|r| r.overloaded));
}

#[test]
fn a_converged_level_is_held_until_reprobe_after_mean_runs_then_the_level_above_is_tried() {
    // Healthy at 10, degraded at 10.5: within `precision`, converged.
    let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), Some(&memory(10.0, Some(10.5))));
    assert!(matches!(site.phase, Phase::Holding { since: 0.0 }), "{:?}", site.phase);
    assert_eq!(site.window, 10.0);
    let mean = site.dist.as_ref().map(Distribution::mean).unwrap();
    let due = site.rules.reprobe_after * mean;
    assert!(site.next_check(0.0, true).is_some_and(|t| (t - due).abs() < 1e-9));
    assert!(!site.maybe_reprobe(0.9 * due));
    assert!(site.holding());
    assert!(site.maybe_reprobe(due));
    assert!(matches!(site.phase, Phase::Testing));
    // The ceiling is assumed `probe_gain` times the old one, and the window
    // bisects between it and the floor.
    assert_eq!(site.ceiling, 10.5 * site.rules.gain);
    assert!(site.ceiling_assumed);
    assert!(site.window > site.floor && site.window < site.ceiling);
}

#[test]
fn a_slow_first_window_is_checked_against_the_level_below_and_comes_back_if_that_runs_as_slow() {
    let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), None);
    // The first window's sixteen runs, 900–1050 s, are its baseline.
    start(&mut site, 0..16, 0.0);
    for job in 0..16 {
        site.ended(JobId(job), 900.0 + 10.0 * job as f64, End::Success);
    }
    let verdict = site.check(1100.0).map(|(v, _)| v);
    assert_eq!(verdict, Some(Verdict::Healthy { level: 16.0 }));
    assert!(site.baseline_unchecked());
    // The other sites run theirs in about 100 s: past hardware's spread,
    // so the floor is suspect and the site drains to the level below.
    site.check_slow_baseline(100.0);
    let Phase::Draining { proven: None, recheck: Some(r) } = &site.phase else { panic!("{:?}", site.phase) };
    assert_eq!((r.floor, r.suspect), (16.0, Suspect::Floor));
    assert_eq!((site.floor, site.window), (8.0, 8.0));
    // Nothing runs: drained at once; the floor's runs are set aside and
    // no verdict comes until the level below has runs of its own.
    assert_eq!(site.check(1101.0), None);
    let Phase::Rechecking(r) = &site.phase else { panic!("{:?}", site.phase) };
    assert!(r.baseline.is_some() && site.dist.is_none());
    // They run as slowly at 8: the floor's runs were not slowed by the
    // level, so the floor of 16 comes back.
    start(&mut site, 16..24, 1200.0);
    for (i, job) in (16..24).enumerate() {
        site.ended(JobId(job), 2100.0 + 20.0 * i as f64, End::Success);
    }
    let verdict = site.check(2300.0).map(|(v, _)| v);
    assert_eq!(verdict, Some(Verdict::Healthy { level: 16.0 }));
    assert!(matches!(site.phase, Phase::Testing));
    assert_eq!((site.floor, site.window), (16.0, 16.0));
}

#[test]
fn a_floor_whose_runs_never_ran_above_the_level_checked_is_not_proven_by_the_check() {
    for tail in [false, true] {
        // The first window's sixteen jobs, sent together, start one at a
        // time (the site's waits are long): each ends before the next
        // starts, so never more than one of them ran at once.
        let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), None);
        site.submitted(&(0..16).map(JobId).collect::<Vec<_>>(), 0.0);
        for job in 0..16 {
            let at = 1000.0 * job as f64;
            site.started(JobId(job), at);
            site.ended(JobId(job), at + 900.0 + 10.0 * job as f64, End::Success);
        }
        assert_eq!(site.check(16_100.0).map(|(v, _)| v), Some(Verdict::Healthy { level: 16.0 }));
        site.check_slow_baseline(100.0);
        assert_eq!(site.check(16_101.0), None);
        // Eight run together as slowly: "as fast" as a level of one, which
        // says nothing of sixteen. What ran healthy is the eight (less the
        // time their last ones ran alone), and the next run is told so,
        // also where the check settles once every job was sent (the tail's
        // own verdicts are not remembered).
        start(&mut site, 16..24, 16_200.0);
        for (i, job) in (16..24).enumerate() {
            site.ended(JobId(job), 17_100.0 + 20.0 * i as f64, End::Success);
        }
        let verdict = if tail { site.check_in_tail(17_300.0) } else { site.check(17_300.0) };
        let Some((Verdict::Healthy { level }, _)) = verdict else { panic!("tail {tail}: {verdict:?}") };
        assert!(level > 7.0 && level <= 8.0, "tail {tail}: {level}");
        assert_eq!((site.floor, site.window), (level, level), "tail {tail}");
        assert_eq!(site.memory(17_300.0).capacity, Some(level), "tail {tail}");
    }
}

/// A site whose first window of 16 ran its runs in 900–1050 s, found slow
/// against other sites' runs of 100 s and drained to 8 to be checked; the
/// runs at 8 take `run` each. Returns the site once the check has settled,
/// with the runs at 8 still to become its baseline.
fn checked_below_at_8(run: f64) -> Site {
    let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), None);
    start(&mut site, 0..16, 0.0);
    for job in 0..16 {
        site.ended(JobId(job), 900.0 + 10.0 * job as f64, End::Success);
    }
    assert_eq!(site.check(1100.0).map(|(v, _)| v), Some(Verdict::Healthy { level: 16.0 }));
    site.check_slow_baseline(100.0);
    assert_eq!(site.check(1101.0), None);
    start(&mut site, 16..24, 1200.0);
    let mut verdict = None;
    for (i, job) in (16..24).enumerate() {
        let at = 1200.0 + run + 5.0 * i as f64;
        site.ended(JobId(job), at, End::Success);
        if verdict.is_none() {
            verdict = site.check(at).map(|(v, _)| v);
        }
    }
    assert!(matches!(verdict, Some(Verdict::Degraded { level, .. }) if level == 16.0), "{verdict:?}");
    assert_eq!((site.floor, site.ceiling), (8.0, 16.0));
    site
}

/// The runs at 8 become the baseline: eight more, as long, end.
fn first_verdict_at_8(site: &mut Site, run: f64) -> Option<Verdict> {
    let from = 1300.0 + run;
    start(site, 24..32, from);
    (24..32).find_map(|job| {
        let at = from + run + (job - 24) as f64;
        site.ended(JobId(job), at, End::Success);
        site.check(at).map(|(v, _)| v)
    })
}

#[test]
fn a_level_below_that_ran_the_levels_ratio_faster_is_checked_below_in_turn() {
    // Four times faster at half the level: more than a knee between 8 and
    // 16 would give, so 8 may be past the knee too and is checked at 4.
    let mut site = checked_below_at_8(240.0);
    assert_eq!(first_verdict_at_8(&mut site, 240.0), Some(Verdict::Healthy { level: 8.0 }));
    let Phase::Draining { proven: None, recheck: Some(r) } = &site.phase else { panic!("{:?}", site.phase) };
    assert_eq!((r.floor, r.suspect), (8.0, Suspect::Floor));
    assert_eq!((site.floor, site.window), (4.0, 4.0));
}

#[test]
fn a_level_below_that_ran_less_than_the_levels_ratio_faster_is_bisected_up_from() {
    // 1.6 times faster at half the level: a knee between 8 and 16, where a
    // probe between them finds it.
    let mut site = checked_below_at_8(600.0);
    assert_eq!(first_verdict_at_8(&mut site, 600.0), Some(Verdict::Healthy { level: 8.0 }));
    assert!(matches!(site.phase, Phase::Testing), "{:?}", site.phase);
    assert_eq!(site.floor, 8.0);
    assert!(site.window > 8.0 && site.window < 16.0, "{}", site.window);
}

#[test]
fn a_remembered_level_run_degraded_checks_memorys_run_times_and_memorys_floor_and_ceiling_come_back() {
    // Memory: healthy at 10 with runs of 90–110 s, degraded at 10.5.
    let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), Some(&memory(10.0, Some(10.5))));
    assert!(matches!(site.phase, Phase::Holding { .. }), "{:?}", site.phase);
    // The held level runs its jobs far past memory's runs: the floor itself
    // is degraded, and memory's run times come under suspicion, with the
    // ceiling memory knew kept to come back.
    start(&mut site, 0..10, 0.0);
    let verdict = site.check(400.0).map(|(v, _)| v);
    assert!(matches!(verdict, Some(Verdict::Degraded { level, .. }) if level == 10.0), "{verdict:?}");
    let Phase::Draining { recheck: Some(r), .. } = &site.phase else { panic!("{:?}", site.phase) };
    assert_eq!((r.floor, r.suspect), (10.0, Suspect::Memory { ceiling: 10.5 }));
    let floor = site.floor;
    assert!(floor < 10.0 && site.window == floor, "floor {floor}, window {}", site.window);
    // Drained: memory's runs are set aside and the level cut to learns its own.
    for job in 0..10 {
        site.ended(JobId(job), 410.0, End::Success);
    }
    assert_eq!(site.check(420.0), None);
    let Phase::Rechecking(r) = &site.phase else { panic!("{:?}", site.phase) };
    assert!(r.baseline.as_ref().is_some_and(|(d, _)| d.is_remembered()) && site.dist.is_none());
    // They run three times memory's runs there too: the slowdown did not
    // fall with the level, so it is the jobs', not the site's. Memory's
    // floor comes back under memory's ceiling (converged: held), with this
    // run's runs as the baseline.
    let per_batch = floor.ceil() as u64;
    let (mut job, mut at) = (100, 1000.0);
    while site.dist.as_ref().is_none_or(|d| d.ended < READY_ENDED) {
        start(&mut site, job..job + per_batch, at);
        for (i, j) in (job..job + per_batch).enumerate() {
            site.ended(JobId(j), at + 295.0 + 2.0 * i as f64, End::Success);
        }
        (job, at) = (job + per_batch, at + 400.0);
    }
    let verdict = site.check(at).map(|(v, _)| v);
    assert_eq!(verdict, Some(Verdict::Healthy { level: 10.0 }));
    assert_eq!((site.floor, site.window, site.ceiling), (10.0, 10.0, 10.5));
    assert!(!site.ceiling_assumed && site.memory_checked);
    assert!(matches!(site.phase, Phase::Holding { since } if since == at), "{:?}", site.phase);
    assert!(site.dist.as_ref().is_some_and(|d| !d.is_remembered()));
}

#[test]
fn memorys_run_times_are_not_judged_another_jobs_by_a_gap_a_poll_explains() {
    // Memory: healthy at 10 with runs of 90–110 s, degraded at 10.5. The
    // held level runs degraded, the site drains to the level cut to, and
    // the runs there take 138–142 s: 1.4 times memory's mean, beyond κ and
    // the two means' errors. Unpolled, the slowdown did not fall with the
    // level, so the jobs changed: memory's floor comes back. Polled every
    // 30 s, each sample may read a poll off (a fifth of these runs), so
    // the gap proves nothing of the jobs: the cut stands, with memory's
    // run times as its baseline.
    for (poll, jobs_changed) in [(0.0, true), (30.0, false)] {
        let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), Some(&memory(10.0, Some(10.5))));
        site.poll_period = poll;
        start(&mut site, 0..10, 0.0);
        let verdict = site.check(400.0).map(|(v, _)| v);
        assert!(matches!(verdict, Some(Verdict::Degraded { level, .. }) if level == 10.0), "{verdict:?}");
        let cut = site.floor;
        for job in 0..10 {
            site.ended(JobId(job), 410.0, End::Success);
        }
        assert_eq!(site.check(420.0), None);
        assert!(matches!(site.phase, Phase::Rechecking(_)), "poll {poll}: {:?}", site.phase);
        let per_batch = cut.ceil() as u64;
        let (mut job, mut at) = (100, 1000.0);
        while site.dist.as_ref().is_none_or(|d| d.ended < READY_ENDED) {
            start(&mut site, job..job + per_batch, at);
            for (i, j) in (job..job + per_batch).enumerate() {
                site.ended(JobId(j), at + 138.0 + 4.0 * (i as f64 / per_batch as f64), End::Success);
            }
            (job, at) = (job + per_batch, at + 200.0);
        }
        let verdict = site.check(at).map(|(v, _)| v);
        assert!(matches!(verdict, Some(Verdict::Healthy { .. })), "poll {poll}: {verdict:?}");
        assert!(site.memory_checked, "poll {poll}");
        if jobs_changed {
            assert_eq!((site.floor, site.ceiling), (10.0, 10.5), "poll {poll}");
            assert!(site.dist.as_ref().is_some_and(|d| !d.is_remembered()), "poll {poll}");
        } else {
            assert_eq!(site.floor, cut, "poll {poll}");
            assert!(site.dist.as_ref().is_some_and(Distribution::is_remembered), "poll {poll}");
        }
    }
}

#[test]
fn a_probe_within_one_probes_overshoot_of_every_job_left_takes_them_all() {
    // Remembered healthy at 10 (runs of 90–110 s): the probe at 20 runs
    // healthy (at about 20: the level is the time it ran weighed), and the
    // next would be about 40. With 60 jobs left, within one more probe's
    // overshoot (about 80), a probe of 40 would leave a last wave of 20 and
    // a search that ends when the jobs do: all 60 go now. With 90 left,
    // the probe stays twice the level judged.
    for (left, all_left) in [(60.0, true), (90.0, false)] {
        let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), Some(&memory(10.0, None)));
        assert_eq!((site.floor, site.window), (10.0, 20.0));
        start(&mut site, 0..20, 0.0);
        for job in 0..20 {
            site.ended(JobId(job), 95.0 + job as f64 / 2.0, End::Success);
        }
        site.left = left;
        let verdict = (120..2000).step_by(10).find_map(|t| site.check(f64::from(t))).map(|(v, _)| v);
        let Some(Verdict::Healthy { level }) = verdict else { panic!("{left} jobs left: {verdict:?}") };
        assert!((19.0..=20.0).contains(&level), "{left} jobs left: judged at {level}");
        let window = if all_left { left } else { 2.0 * level };
        assert_eq!(site.window, window, "{left} jobs left");
    }
}

#[test]
fn the_first_windows_own_runs_never_send_every_job_left() {
    // The first window's runs are its baseline, taken healthy, not shown
    // so: past a knee below them, every job left at once would only
    // thrash harder. The probe stays twice the window.
    let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), None);
    start(&mut site, 0..16, 0.0);
    for job in 0..16 {
        site.ended(JobId(job), 900.0 + 10.0 * job as f64, End::Success);
    }
    site.left = 50.0;
    let verdict = site.check(1100.0).map(|(v, _)| v);
    assert_eq!(verdict, Some(Verdict::Healthy { level: 16.0 }));
    assert_eq!(site.window, 32.0);
}

/// A site whose first window is all it holds (16 slots), its first cohort
/// ended at `first` s a run (slowed or not: nothing at 16 tells), and the
/// first verdict taken: returns the site, drained to the level below.
fn held_at_its_slots(first: f64, left: f64) -> Site {
    let mut site = Site::new("s".into(), 16.0, 1200.0, 16.0, rules(), None);
    site.left = left;
    start(&mut site, 0..16, 0.0);
    for job in 0..16 {
        site.ended(JobId(job), first * (0.9 + 0.2 * job as f64 / 15.0), End::Success);
    }
    let verdict = site.check(1.3 * first).map(|(v, _)| v);
    assert_eq!(verdict, Some(Verdict::Healthy { level: 16.0 }));
    site
}

#[test]
fn issue_56_a_first_window_past_its_knee_at_the_slots_is_found_from_the_level_below() {
    // The first cohort's runs, 360–440 s, are its baseline: no probe above
    // the slots can check them, and no other site is there to. Past the
    // knee, fewer jobs run faster: the search holds the first window only
    // after the level below ran as fast.
    let mut site = held_at_its_slots(400.0, 200.0);
    let Phase::Draining { proven: None, recheck: Some(r) } = &site.phase else { panic!("{:?}", site.phase) };
    assert_eq!((r.floor, r.suspect), (16.0, Suspect::Floor));
    assert_eq!((site.floor, site.window), (8.0, 8.0));
    assert_eq!(site.check(521.0), None);
    assert!(matches!(site.phase, Phase::Rechecking(_)), "{:?}", site.phase);
    // At 8, the jobs run in 90–110 s, four times faster (a knee of 4 with
    // thrash): the sequential test proves it after a few of them, before
    // the runs at 8 are a baseline of their own.
    let (mut job, mut at, mut verdict) = (16, 600.0, None);
    while verdict.is_none() && at < 2000.0 {
        start(&mut site, job..job + 2, at);
        at += 50.0;
        for (i, j) in (job..job + 2).enumerate() {
            site.ended(JobId(j), at + 45.0 + 10.0 * i as f64, End::Success);
        }
        at += 60.0;
        verdict = site.check(at).map(|(v, _)| v);
        job += 2;
    }
    let Some(Verdict::Degraded { level, slowdown }) = verdict else { panic!("at {at}: {verdict:?}") };
    assert_eq!(level, 16.0);
    assert!(slowdown >= 2.0 * site.rules.kappa, "proven {slowdown}");
    assert!(at < 600.0 + 2.0 * 400.0, "the verdict took until {at}");
    // The level below is the floor, a first window again (its runs, once
    // known, the baseline), and the first window the ceiling (under the
    // slots: a ceiling at the cap would read as none).
    assert_eq!((site.floor, site.window), (8.0, 8.0));
    assert!(site.ceiling < 16.0 && site.ceiling > 8.0, "ceiling {}", site.ceiling);
    assert!(!site.searched && site.floor_is_first_windows());
    assert!(matches!(site.phase, Phase::Testing), "{:?}", site.phase);
}

#[test]
fn issue_56_a_healthy_first_window_at_the_slots_pays_the_level_below_once_and_for_a_bounded_time() {
    // Runs of 90–110 s at 16 and at 8 alike: the first window comes back
    // once as many runs below as its baseline holds have been weighed at
    // most, and is not checked again.
    let mut site = held_at_its_slots(100.0, 200.0);
    assert_eq!(site.window, 8.0);
    let drained = 130.0;
    assert_eq!(site.check(drained), None);
    let baseline = site.floor_below().map(|d| d.ended).unwrap();
    let (mut job, mut at, mut verdict) = (16, drained, None);
    while verdict.is_none() && job < 16 + 64 {
        start(&mut site, job..job + 8, at);
        for (i, j) in (job..job + 8).enumerate() {
            site.ended(JobId(j), at + 90.0 + 20.0 * i as f64 / 7.0, End::Success);
        }
        at += 111.0;
        verdict = site.check(at).map(|(v, _)| v);
        job += 8;
    }
    assert_eq!(verdict, Some(Verdict::Healthy { level: 16.0 }), "at {at}");
    // A run's drain and the test's runs at half the level: at most as many
    // runs below as the baseline holds, in waves of 8.
    let waves = (baseline as f64 / 8.0).ceil();
    assert!(at - drained <= waves * 111.0, "{} runs below for a baseline of {baseline}", job - 16);
    assert_eq!((site.floor, site.window), (16.0, 16.0));
    assert!(!site.floor_is_first_windows());
    // Held at the slots from now on: no second check below.
    let verdict = (0..200).find_map(|i| site.check(at + 10.0 * f64::from(i)));
    assert!(
        !matches!(site.phase, Phase::Draining { .. } | Phase::Rechecking(_)),
        "{verdict:?} {:?}",
        site.phase
    );
}

#[test]
fn issue_56_no_check_below_where_the_jobs_left_are_within_a_probe_of_the_floor() {
    // With 30 jobs left (under a probe's reach of 32), lowering the window
    // could not pay back before the run ends: the first window is held.
    let site = held_at_its_slots(400.0, 30.0);
    assert!(site.holding(), "{:?}", site.phase);
    assert_eq!(site.window, 16.0);
}

/// A site of `slots` known healthy at 16 (memory), sent a cohort of 16 at
/// t = 0.
fn cohort_sent(slots: f64) -> Site {
    let mut site = Site::new("s".into(), slots, 1200.0, 16.0, rules(), Some(&memory(16.0, None)));
    let jobs: Vec<JobId> = (0..16).map(JobId).collect();
    site.submitted(&jobs, 0.0);
    site
}

/// [`cohort_sent`], whose job `i` starts after `wait(i)` seconds.
fn cohort_started(slots: f64, wait: impl Fn(u64) -> f64) -> Site {
    let mut site = cohort_sent(slots);
    for job in 0..16 {
        site.started(JobId(job), wait(job));
    }
    site
}

/// The quantiles of Exp(10 s) for 16 jobs: other users' jobs ahead,
/// freeing room one by one.
fn exponential_waits(i: u64) -> f64 {
    -10.0 * (1.0 - (i as f64 + 0.5) / 16.0).ln()
}

#[test]
fn a_cohort_that_starts_within_a_cycle_keeps_no_queue_ahead() {
    // Waits of 8–9 s: the first negotiation cycle started all 16 (the real
    // pool's `local`). Jobs queued now would all start at the next one.
    let together = cohort_started(100.0, |i| 8.0 + (i % 2) as f64);
    assert_eq!(together.waits.starting, Starting::Together);
    let model = together.model(20.0, None);
    assert_eq!(model.ahead, 0.0);
    assert_eq!(model.out_target(together.running), together.window);
    // Waits of mean 10 s spread as exponential draws are: Little's law
    // keeps jobs queued ahead there.
    let one_by_one = cohort_started(100.0, exponential_waits);
    assert_eq!(one_by_one.waits.starting, Starting::OneByOne);
    let model = one_by_one.model(20.0, None);
    assert!(model.ahead > 0.0, "{model:?}");
    assert!(model.out_target(one_by_one.running) > one_by_one.window, "{model:?}");
}

#[test]
fn a_first_window_sent_in_several_submissions_is_one_cohort() {
    // Two kinds of job, one `condor_submit` each: 6 jobs at 0.0 s and 10 at
    // 0.3 s, all started by one gridmanager poll at 49 s (the real pool's
    // `cc`, blind to kinds). The 6 alone are too few to tell, and read as
    // "one by one" the site kept a queue ahead that started all at once.
    let mut site = Site::new("s".into(), 24.0, 1200.0, 16.0, rules(), None);
    site.submitted(&(0..6).map(JobId).collect::<Vec<_>>(), 0.0);
    site.submitted(&(6..16).map(JobId).collect::<Vec<_>>(), 0.3);
    for job in 0..16 {
        site.started(JobId(job), 49.0);
    }
    assert_eq!(site.waits.starting, Starting::Together);
    assert_eq!(site.model(60.0, None).ahead, 0.0);
    // A job sent once one of the cohort started is not the cohort's: its
    // start tells nothing of how the first window started.
    let mut site = Site::new("s".into(), 24.0, 1200.0, 16.0, rules(), None);
    site.submitted(&(0..16).map(JobId).collect::<Vec<_>>(), 0.0);
    site.started(JobId(0), 49.0);
    site.submitted(&[JobId(16)], 50.0);
    site.started(JobId(16), 55.0);
    assert!(matches!(site.waits.starting, Starting::Watching(_)), "{:?}", site.waits.starting);
    for job in 1..16 {
        site.started(JobId(job), 60.0);
    }
    assert_eq!(site.waits.starting, Starting::Together);
}

#[test]
fn a_site_that_runs_more_than_its_slots_keeps_no_queue_ahead() {
    // Its cohort started one by one, but 22 of our jobs run on 20 slots:
    // only jobs queued past the window start past the slots.
    let mut site = cohort_started(20.0, exponential_waits);
    assert_eq!(site.waits.starting, Starting::OneByOne);
    start(&mut site, 16..22, 40.0);
    assert_eq!(site.waits.starting, Starting::Together);
    assert_eq!(site.model(40.0, None).ahead, 0.0);
}

#[test]
fn a_site_with_no_run_ended_is_modelled_no_faster_than_its_jobs_are_old() {
    // Other sites' runs take 500 s; this site's first cohort, past a steep
    // knee, has run for 5,000 s and none has ended. The planner must not
    // count on those jobs ending soon and hold the jobs left for the slots
    // they would free.
    let mut site = Site::new("s".into(), 16.0, 1200.0, 16.0, rules(), None);
    start(&mut site, 0..16, 0.0);
    assert_eq!(site.model(100.0, Some(500.0)).run, 500.0);
    assert!(site.model(5000.0, Some(500.0)).run >= 5000.0);
    assert!(site.model(5000.0, None).run >= 5000.0);
}

#[test]
fn a_cohort_still_starting_keeps_no_queue_ahead() {
    // 15 of 16 started within a cycle (8–9 s): the 16th may start in it
    // or at the next cycle, and so would jobs queued ahead now, all at
    // once. Until the cohort tells, what is out is the window.
    let mut site = cohort_sent(100.0);
    for job in 0..15 {
        site.started(JobId(job), 8.0 + (job % 2) as f64);
    }
    assert!(matches!(site.waits.starting, Starting::Watching(_)), "{:?}", site.waits.starting);
    let model = site.model(20.0, None);
    assert_eq!(model.ahead, 0.0);
    assert_eq!(model.out_target(site.running), site.window);
    site.started(JobId(15), 9.0);
    assert_eq!(site.waits.starting, Starting::Together);
    assert_eq!(site.model(20.0, None).ahead, 0.0);
}

#[test]
fn a_cohort_that_starts_one_by_one_keeps_a_queue_before_all_of_it_started() {
    // Exponential waits of mean 10 s, in order: by the range so far against
    // the mean the cohort would have were the rest to start at once, it
    // starts one by one within half a mean wait, not after the whole
    // cohort's `H(16)` (3.4) mean waits.
    let mut site = cohort_sent(100.0);
    let mut told = None;
    for job in 0..16 {
        let at = exponential_waits(job);
        site.started(JobId(job), at);
        let model = site.model(at, None);
        match site.waits.starting {
            Starting::Watching(_) => assert_eq!(model.ahead, 0.0, "watching at {at}"),
            Starting::OneByOne => {
                told.get_or_insert(at);
                assert!(model.ahead > 0.0, "at {at}: {model:?}");
                assert!(model.out_target(site.running) > site.window, "at {at}: {model:?}");
            }
            Starting::Together | Starting::Recalled { .. } => panic!("{:?} at {at}", site.waits.starting),
        }
    }
    let told = told.expect("a verdict");
    assert!(told < 5.0, "one by one only at {told} s");
    // Too small a cohort to tell: one by one from its first start.
    let mut small = Site::new("s".into(), 100.0, 1200.0, 4.0, rules(), None);
    let jobs: Vec<JobId> = (0..4).map(JobId).collect();
    small.submitted(&jobs, 0.0);
    small.started(JobId(0), 8.0);
    assert_eq!(small.waits.starting, Starting::OneByOne);
}

#[test]
fn a_cohort_started_over_two_cycles_within_its_mean_wait_is_told_together_once_whole() {
    // Half of it matched at the first cycle (8 s), half at the next (16 s):
    // a range of 8 s under a mean wait of 12 s. At the second cycle's first
    // start the rest might all start at once, so no verdict comes early.
    let wait = |i: u64| if i < 8 { 8.0 } else { 16.0 };
    let mut site = cohort_sent(100.0);
    for job in 0..15 {
        site.started(JobId(job), wait(job));
        assert!(matches!(site.waits.starting, Starting::Watching(_)), "{job}: {:?}", site.waits.starting);
        assert_eq!(site.model(wait(job), None).ahead, 0.0);
    }
    site.started(JobId(15), wait(15));
    assert_eq!(site.waits.starting, Starting::Together);
}

/// [`memory`] at 16 with a mean wait of 10 s, and how memory says the
/// site starts jobs.
fn memory_of_starts(one_by_one: Option<bool>) -> SiteMemory {
    SiteMemory { mean_wait: Some(10.0), starts_one_by_one: one_by_one, ..memory(16.0, None) }
}

#[test]
fn a_warm_run_queues_ahead_from_its_first_job_where_memory_says_the_site_starts_one_by_one() {
    // Memory says the site started jobs one by one: the warm run keeps a
    // queue ahead before its own cohort has told anything.
    let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), Some(&memory_of_starts(Some(true))));
    assert!(site.waits.one_by_one(), "{:?}", site.waits.starting);
    let model = site.model(0.0, None);
    assert!(model.ahead > 0.0, "{model:?}");
    assert!(model.out_target(0) > site.window, "{model:?}");
    // Its cohort is still watched, and what it tells replaces memory's
    // verdict: this time the site started all 16 within a cycle (8–9 s),
    // so no queue is kept, and the next run recalls that.
    let jobs: Vec<JobId> = (0..16).map(JobId).collect();
    site.submitted(&jobs, 0.0);
    for job in 0..16 {
        assert!(site.waits.one_by_one(), "{job}: {:?}", site.waits.starting);
        site.started(JobId(job), 8.0 + (job % 2) as f64);
    }
    assert_eq!(site.waits.starting, Starting::Together);
    assert_eq!(site.model(20.0, None).ahead, 0.0);
    assert_eq!(site.memory(20.0).starts_one_by_one, Some(false));
    // Where memory says it started them together, or nothing of it, none
    // is queued until the cohort tells.
    for recalled in [Some(false), None] {
        let site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), Some(&memory_of_starts(recalled)));
        assert_eq!(site.model(0.0, None).ahead, 0.0, "memory {recalled:?}");
    }
}

#[test]
fn what_a_cohort_told_of_how_the_site_starts_jobs_is_remembered() {
    let one_by_one = cohort_started(100.0, exponential_waits);
    assert_eq!(one_by_one.memory(200.0).starts_one_by_one, Some(true));
    let together = cohort_started(100.0, |i| 8.0 + (i % 2) as f64);
    assert_eq!(together.memory(200.0).starts_one_by_one, Some(false));
    // Not told yet: nothing to remember, and memory's verdict, where there
    // was one, stands.
    assert_eq!(cohort_sent(100.0).memory(0.0).starts_one_by_one, None);
    let recalled = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), Some(&memory_of_starts(Some(true))));
    assert_eq!(recalled.memory(0.0).starts_one_by_one, Some(true));
}

/// The verdict of a whole cohort by its definition ([`Starting`]).
fn whole_cohort_verdict(waits: &[f64]) -> Starting {
    let (first, last) = waits.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &w| (a.min(w), b.max(w)));
    let mean = waits.iter().sum::<f64>() / waits.len() as f64;
    if waits.len() >= COHORT_TO_TELL as usize && last - first <= mean {
        Starting::Together
    } else {
        Starting::OneByOne
    }
}

proptest::proptest! {
    /// Whatever the waits, a verdict told before the whole cohort started
    /// is the one the whole cohort would have given.
    #[test]
    fn an_early_verdict_is_the_whole_cohorts(
        draws in proptest::collection::vec(0.0f64..1.0, 1..40),
        first in 0.0f64..60.0,
        spread in 0.0f64..60.0,
        cycle in proptest::option::of(1.0f64..30.0),
    ) {
        // Waits from `first` to `first + spread`, which is about as often
        // within their mean as not; at cycles, each rounded up to one.
        let mut waits: Vec<f64> = draws.iter().map(|u| first + spread * u).collect();
        if let Some(c) = cycle {
            for w in &mut waits {
                *w = (*w / c).ceil() * c;
            }
        }
        waits.sort_by(f64::total_cmp);
        let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), None);
        let jobs: Vec<JobId> = (0..waits.len() as u64).map(JobId).collect();
        site.submitted(&jobs, 0.0);
        for (job, &w) in jobs.iter().zip(&waits) {
            site.started(*job, w);
            if let Starting::Watching(_) = site.waits.starting {
                continue;
            }
            proptest::prop_assert_eq!(site.waits.starting, whole_cohort_verdict(&waits), "at {}", w);
            break;
        }
        proptest::prop_assert_eq!(site.waits.starting, whole_cohort_verdict(&waits));
    }
}

#[test]
fn a_probe_whose_runs_read_a_poll_longer_is_not_judged_slowed_where_the_site_is_polled() {
    // The first window's runs read 30 s. The probe's, started together at
    // one poll, read 36 s: 1.2 times the baseline, short of the 1.25 the
    // test looks for and past the 10% its baseline's scale may be off by.
    // Where events are told as they happen that is a slowdown; where a
    // gridmanager polls every 6 s it is one poll's lag, nothing slowed.
    for (poll, slowed) in [(0.0, true), (6.0, false)] {
        let mut site = Site::new("s".into(), 100.0, 1200.0, 16.0, rules(), None);
        site.poll_period = poll;
        start(&mut site, 0..16, 0.0);
        for job in 0..16 {
            site.ended(JobId(job), 30.0 + 0.02 * job as f64, End::Success);
        }
        let verdict = site.check(31.0).map(|(v, _)| v);
        assert_eq!(verdict, Some(Verdict::Healthy { level: 16.0 }), "poll {poll}");
        assert_eq!(site.window, 32.0);
        start(&mut site, 16..48, 40.0);
        for job in 16..48 {
            site.ended(JobId(job), 76.0 + 0.02 * (job - 16) as f64, End::Success);
        }
        let verdict = site.check(77.0).map(|(v, _)| v);
        match verdict {
            Some(Verdict::Degraded { level, .. }) => assert!(slowed, "poll {poll}: degraded at {level}"),
            // Healthy at about the 32 that ran (a time average).
            Some(Verdict::Healthy { level }) => {
                assert!(!slowed && level > 31.0, "poll {poll}: healthy at {level}")
            }
            None => panic!("poll {poll}: no verdict from 32 runs"),
        }
    }
}
