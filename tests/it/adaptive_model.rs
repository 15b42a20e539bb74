//! Integration tests: the properties the `adaptive` policy's model promises
//! (its module doc), each checked over several seeds of grids built here —
//! not the named scenarios. Runs are simulated in virtual time and
//! deterministic by seed; a failure names its seed.

use crate::util::{self, at};
use cosched::policy::{
    Action, CapacityMemory, Decision, DecisionKind, Input, JobBook, Policy, PolicyConfig, SiteId, SiteMemory,
    SiteView, Time,
};
use cosched::sim::metrics::AttemptEnd;
use cosched::sim::{self, Capacity, JobType, Scenario, SimOptions, SimResult, SiteParams};

/// SplitMix64: a seeded stream for drawing grids (no RNG crate needed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in lo..=hi.
    fn u32(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo + 1)) as u32
    }
    fn pick<T: Copy>(&mut self, of: &[T]) -> T {
        of[(self.next() % of.len() as u64) as usize]
    }
}

fn site(name: &str, slots: u32) -> SiteParams {
    SiteParams { wait_mean: 10.0, ..SiteParams::healthy(name, slots) }
}

/// A grid of one site.
fn one_site(desc: &str, n_jobs: u64, base_runtime: f64, jitter: f64, site: SiteParams) -> Scenario {
    Scenario::single(desc, n_jobs, base_runtime, jitter, vec![site])
}

fn run(scenario: &Scenario, policy: &str, seed: u64) -> SimResult {
    run_with(scenario, policy, seed, &SimOptions::default())
}

fn run_with(scenario: &Scenario, policy: &str, seed: u64, options: &SimOptions) -> SimResult {
    let config = PolicyConfig::named(policy).expect("known policy");
    let result = sim::run(scenario, &config, seed, options);
    assert!(result.errors.is_empty(), "{policy} seed {seed}: conservation: {:?}", result.errors);
    assert!(!result.hang, "{policy} seed {seed}: the run hangs");
    assert_eq!(result.metrics.jobs_done, scenario.n_jobs(), "{policy} seed {seed}: jobs done");
    util::assert_woken_by_events(&result, &format!("{policy} seed {seed}"));
    result
}

fn makespan(r: &SimResult) -> f64 {
    r.metrics.makespan.expect("a settled run has a makespan")
}

/// The run's makespan is at most `factor` times the oracle's on the same
/// grid and seed.
fn assert_within_oracle(r: &SimResult, scenario: &Scenario, seed: u64, factor: f64, case: &str) {
    let oracle = makespan(&run(scenario, "oracle", seed));
    let adaptive = makespan(r);
    assert!(
        adaptive <= factor * oracle,
        "{case}: adaptive {adaptive:.0} s against the oracle's {oracle:.0} s"
    );
}

/// When the last job was first sent to a site: from then on the pool is
/// empty but for jobs that came back.
fn every_job_sent(r: &SimResult) -> f64 {
    let mut first_sent = std::collections::HashMap::new();
    for a in &r.attempts {
        let t = first_sent.entry(a.job).or_insert(a.submitted);
        *t = a.submitted.min(*t);
    }
    first_sent.values().copied().fold(0.0, f64::max)
}

/// Executions that had started and were removed: slot-time thrown away.
fn cut_short(r: &SimResult) -> usize {
    r.attempts.iter().filter(|a| a.started.is_some() && a.end == AttemptEnd::Removed).count()
}

/// Runs `scenario` under adaptive with its decisions traced, and checks
/// that no verdict called the (healthy) site slowed.
fn traced_without_a_slowdown(scenario: &Scenario, seed: u64, case: &str) -> SimResult {
    let r = run_with(scenario, "adaptive", seed, &SimOptions { trace: true, ..SimOptions::default() });
    let slowed = r.decisions.iter().find(|d| matches!(d.kind, DecisionKind::Verdict { healthy: false, .. }));
    assert!(slowed.is_none(), "{case}: a healthy site called slowed: {slowed:?}");
    r
}

#[test]
fn run_time_jitter_on_a_healthy_site_is_never_read_as_degradation_wide_or_narrow() {
    // No knee, 300 slots, jobs of 200 s: nothing ever degrades, so any
    // Degraded verdict is a false alarm. Ten seeds × four waves of jobs, per
    // spread of run times: wide (±50%) and jobs of nearly one size (±5%,
    // ±2%), where a slowdown's stretch of a job's time above the level could
    // fit the narrow runs better than the healthy hypothesis.
    for jitter in [0.5, 0.2, 0.05, 0.02] {
        let scenario = Scenario {
            desc: format!("healthy, ±{jitter} run times"),
            types: vec![JobType::single(1200, 200.0, jitter)],
            sites: vec![site("healthy", 300)],
        };
        for seed in 1..=10 {
            let r = run(&scenario, "adaptive", seed);
            let learned = &at(&r.learned, "healthy");
            let case = format!("seed {seed}, jitter ±{jitter}");
            assert_eq!(learned.ceiling, None, "{case}: a degraded verdict on a healthy site: {learned:?}");
            let found = learned.capacity.unwrap_or(0.0);
            assert!(found >= 0.9 * 300.0, "{case}: the window stopped at {found:.0} of 300 healthy slots");
            assert_eq!(cut_short(&r), 0, "{case}: running jobs removed on a healthy site");
        }
    }
}

#[test]
fn a_healthy_site_stays_healthy_over_many_runs_each_warm_from_the_last() {
    // A user runs the same jobs again and again, each run warm from what the
    // last one learned. No knee: nothing ever degrades. The healthy run
    // times a warm run tests by are the remembered quantiles, and a run that
    // takes no sample of its own remembers them again. Taken through the
    // smoothed estimate each time, they spread wider with every run (the
    // 1/16 quantile 139 → 128 → 114 → 90 s over four runs on the grid of
    // train G0101, whose runs are 137-312 s): the fourth run expected
    // runs far shorter than any, hundreds of running jobs survived past
    // them, and a healthy site of 988 slots was called 1.9 times slowed,
    // held at 414 and remembered there. On one site alone the quantiles
    // reached 0 s by the sixth run, were thrown away as unreadable, and the
    // site started over at a first window: 6,912 s where the first warm run
    // took 3,821.
    let scenario = one_site(
        "healthy, many runs",
        6000,
        142.0,
        0.39,
        SiteParams { speed: 0.63, wait_mean: 391.0, ..SiteParams::healthy("roomy", 988) },
    );
    for seed in 1..=3 {
        let mut memory = CapacityMemory::new();
        let mut first_quantiles = None;
        let mut first_warm = None;
        for generation in 1..=6 {
            let case = format!("seed {seed}, run {generation}");
            let options = SimOptions { trace: true, memory: memory.clone(), ..SimOptions::default() };
            let r = run_with(&scenario, "adaptive", seed, &options);
            let slowed =
                r.decisions.iter().find(|d| matches!(d.kind, DecisionKind::Verdict { healthy: false, .. }));
            assert!(slowed.is_none(), "{case}: a healthy site called slowed: {slowed:?}");
            let makespan = r.metrics.makespan.expect("finished");
            if generation > 1 {
                let first = *first_warm.get_or_insert(makespan);
                assert!(
                    makespan <= 1.25 * first,
                    "{case}: {makespan:.0} s, the first warm run took {first:.0} s"
                );
            }
            let learned = &at(&r.learned, "roomy");
            let quantiles = learned.runtime_quantiles.clone().expect("healthy run times remembered");
            match &first_quantiles {
                None => first_quantiles = Some(quantiles),
                Some(first) => assert_eq!(
                    &quantiles, first,
                    "{case}: the run times remembered changed though no run took a sample of its own"
                ),
            }
            memory = r.learned;
        }
    }
}

#[test]
fn a_warm_run_whose_jobs_changed_since_checks_memory_against_its_own_runs() {
    // Memory keeps each site's healthy run times, and a warm run tests by
    // them from its first job. But a user may run another job from the same
    // state directory, or the same job on other inputs, or a site's
    // hardware may change. Here jobs of 200 s were remembered on two
    // healthy sites and jobs of 600 s run now: every level in turn was
    // judged three times slowed and cut to a third, down to one job per
    // site (280,597-291,792 s on seeds 1-3, 4,031-4,146 s cold). A slowdown
    // that does not fall when our level falls is not ours: the runs at the
    // level cut to are checked against memory's.
    let grid = |runtime: f64| Scenario {
        desc: format!("two healthy sites, jobs of {runtime} s"),
        types: vec![JobType::single(1500, runtime, 0.3)],
        sites: vec![
            SiteParams { wait_mean: 30.0, ..site("big", 300) },
            SiteParams { wait_mean: 30.0, ..site("small", 100) },
        ],
    };
    let (short, long) = (grid(200.0), grid(600.0));
    for seed in 1..=3 {
        let memory = run(&short, "adaptive", seed).learned;
        let cold = makespan(&run(&long, "adaptive", seed));
        let warm = run_with(&long, "adaptive", seed, &SimOptions { memory, ..SimOptions::default() });
        let case = format!("seed {seed}");
        assert!(
            makespan(&warm) <= cold,
            "{case}: {:.0} s warm from another job's memory, {cold:.0} s cold",
            makespan(&warm)
        );
        assert_eq!(cut_short(&warm), 0, "{case}: running jobs removed from healthy sites");
        for (name, slots) in [("big", 300.0), ("small", 100.0)] {
            let learned = &at(&warm.learned, name);
            let found = learned.capacity.unwrap_or(0.0);
            assert!(found >= 0.9 * slots, "{case}: {name} held at {found:.0} of {slots} healthy slots");
            let mean = learned.baseline_runtime.unwrap_or(0.0);
            assert!(
                (400.0..900.0).contains(&mean),
                "{case}: {name} remembers runs of {mean:.0} s, not this job's 600 s"
            );
        }
    }
    // Where the capacity did drop since (a knee of 120 learned, 40 now), the
    // runs below are memory's and the cut stands.
    let knee = |capacity: f64| Scenario {
        desc: format!("a knee of {capacity}"),
        types: vec![JobType::single(1500, 200.0, 0.3)],
        sites: vec![SiteParams {
            capacity: Capacity::Finite(capacity),
            beta: 1.0,
            wait_mean: 30.0,
            ..site("knee", 300)
        }],
    };
    for seed in 1..=3 {
        let memory = run(&knee(120.0), "adaptive", seed).learned;
        let warm = run_with(&knee(40.0), "adaptive", seed, &SimOptions { memory, ..SimOptions::default() });
        let found = at(&warm.learned, "knee").capacity.unwrap_or(0.0);
        assert!(
            (20.0..=60.0).contains(&found),
            "seed {seed}: a knee of 120 that fell to 40 held at {found:.0}"
        );
    }
}

#[test]
fn a_big_healthy_sites_first_cohort_still_running_is_not_read_as_a_slowdown() {
    // No knee, 600 or 1,000 slots, three waves of jobs of 600 s ± 30% or
    // ± 10%. The first verdict comes once the shortest half of the first
    // cohort of 16 has ended; the rest is censored at once as the first
    // probe begins, and ends during the probe, past every run seen. Where a
    // run ending among the last few at risk made the KM's unseen share
    // small, that tail was thin, a slowdown mapped those ends back among
    // the runs seen, and the probe was called 2.5 times slowed: 14–16
    // running jobs removed, the site held at a fraction of its slots,
    // 4.6–6.2 times bulk submission's makespan (seeds 25 and 31 below,
    // docs/experiments.md, the false alarm on big healthy sites). At ± 10% the
    // runs seen are so close together that a slowdown of 1.5 since the
    // probe began fit the cohort's longer half better than any tail (seed
    // 10: held at 16–20 jobs, 6 times bulk; docs/experiments.md, "The sequential test:
    // what a job testifies").
    let kinds = [
        ("1,000 slots", SiteParams { wait_mean: 10.0, ..SiteParams::healthy("s", 1000) }),
        ("600 slots", SiteParams { wait_mean: 10.0, ..SiteParams::healthy("s", 600) }),
        (
            "1,000 slots, 10% of attempts fail",
            SiteParams { wait_mean: 10.0, p_fail: 0.1, ..SiteParams::healthy("s", 1000) },
        ),
    ];
    for (desc, site) in kinds {
        let waves = 3 * u64::from(site.slots);
        for jitter in [0.3, 0.1] {
            let scenario = one_site(desc, waves, 600.0, jitter, site.clone());
            for seed in 1..=40 {
                let case = format!("{desc}, ±{jitter}, seed {seed}");
                let r = traced_without_a_slowdown(&scenario, seed, &case);
                assert_eq!(cut_short(&r), 0, "{case}: running jobs removed on a healthy site");
            }
        }
    }
}

#[test]
fn a_healthy_baseline_of_a_few_runs_neither_calls_a_slowdown_nor_stalls_the_ramp() {
    // No knee, 300 slots, jobs ± 50%: the first verdict comes when 8 runs
    // of the first cohort of 16 have ended, and every probe is judged
    // against so few runs until a healthy verdict lets the sample grow.
    // Their mean is off by 10% (one standard error) one time in three, and
    // by 20% now and then. Where failures cut runs short, jobs are short,
    // or waits spread the first cohort's starts, such a baseline called a
    // healthy site slowed at every level (held at 4–64 of 300 slots), or
    // its first probe went undecided for 35 run times (seeds below), up to
    // 27 times slower than plain submission. (Short of that, the ramp from
    // 16 jobs to 300 costs up to about twice bulk submission's makespan.)
    let kinds = [
        (
            "20% of attempts fail",
            200.0,
            SiteParams { wait_mean: 10.0, p_fail: 0.2, ..SiteParams::healthy("s", 300) },
        ),
        ("jobs of 30 s", 30.0, SiteParams { wait_mean: 10.0, ..SiteParams::healthy("s", 300) }),
        ("waits of 600 s", 200.0, SiteParams { wait_mean: 600.0, ..SiteParams::healthy("s", 300) }),
    ];
    for (desc, base_runtime, site) in kinds {
        let scenario = one_site(desc, 1200, base_runtime, 0.5, site);
        for seed in [3, 11, 13, 14, 38].into_iter().chain(1..=10) {
            let case = format!("{desc}, seed {seed}");
            let r = traced_without_a_slowdown(&scenario, seed, &case);
            let (adaptive, bulk) = (makespan(&r), makespan(&run(&scenario, "bulk", seed)));
            assert!(adaptive <= 2.5 * bulk, "{case}: adaptive {adaptive:.0} s, bulk submission {bulk:.0} s");
        }
    }
}

/// When a traced run's window first reached `level` after `after` seconds.
fn window_first_reached(r: &SimResult, level: f64, after: Time) -> Option<Time> {
    r.decisions.iter().find_map(|d| match d.kind {
        DecisionKind::Window { window, .. } if d.at > after && window >= level => Some(d.at),
        _ => None,
    })
}

#[test]
fn a_capacity_that_rises_is_followed_within_one_reprobe() {
    // A knee of 50 (beta 0.5) that rises eightfold at 4,000 s and stays,
    // 1,000 slots, jobs of 400 s ± 20%. Once the knee is found and held, the
    // re-probe after `reprobe_after` (10) run times assumes the next knee
    // at twice the old one. Reached healthy, that ceiling was no knee: the
    // search must go on doubling, not hold there for another cycle, one
    // doubling per ten run times (the window reached 300 at 15,800–19,900 s
    // on seeds 1–5, the third re-probe after the rise). The same rule lets
    // a site leave a ceiling that a false alarm set.
    let site = SiteParams {
        wait_mean: 10.0,
        capacity: Capacity::Finite(50.0),
        beta: 0.5,
        cap_windows: vec![[4000.0, 1e9, 8.0]],
        ..SiteParams::healthy("s", 1000)
    };
    let scenario = one_site("a knee of 50 that rises to 400", 20_000, 400.0, 0.2, site);
    // The rise, then at most two cycles of holding and re-probing.
    let by = 4000.0 + 2.0 * 10.0 * 450.0;
    for seed in 1..=5 {
        let r = run_with(&scenario, "adaptive", seed, &SimOptions { trace: true, ..SimOptions::default() });
        let reached = window_first_reached(&r, 300.0, 4000.0);
        assert!(
            reached.is_some_and(|t| t <= by),
            "seed {seed}: the window reached 300 of the new knee of 400 at {reached:?} s, not by {by} s"
        );
    }
}

#[test]
fn a_warm_run_leaves_a_ceiling_a_reprobe_only_assumed() {
    // A run that ends while a re-probe is under way leaves a ceiling it only
    // assumed (twice the knee it held), not one it saw degraded. A warm run
    // started there must leave it once reached healthy, as the run that
    // assumed it would have: here the knee is 400, the memory says 50
    // healthy and 100 assumed. Taken for a knee seen, 100 was bisected
    // toward and held for `reprobe_after` (10) run times before the next
    // doubling: the window reached 200 at 5,166–5,272 s on seeds 1–5, where
    // it now does at 809–1,017 s.
    let knee = SiteParams { capacity: Capacity::Finite(400.0), beta: 0.5, ..site("s", 1000) };
    let scenario = one_site("a knee of 400 remembered under 100", 20_000, 400.0, 0.2, knee);
    let quantiles: Vec<f64> = (0..=16).map(|k| 320.0 + 10.0 * f64::from(k)).collect();
    let memory = util::remembered(
        "s",
        SiteMemory {
            capacity: Some(50.0),
            ceiling: Some(100.0),
            ceiling_assumed: true,
            baseline_runtime: Some(400.0),
            runtime_range: Some((320.0, 480.0)),
            runtime_quantiles: Some(quantiles),
            ..Default::default()
        },
    );
    // A few verdicts from 50 to 100, then one doubling; well short of a
    // hold of ten run times.
    let by = 2500.0;
    for seed in 1..=5 {
        let opts = SimOptions { trace: true, memory: memory.clone(), ..SimOptions::default() };
        let r = run_with(&scenario, "adaptive", seed, &opts);
        let reached = window_first_reached(&r, 200.0, 0.0);
        assert!(
            reached.is_some_and(|t| t <= by),
            "seed {seed}: from 50 remembered under an assumed 100, the window reached 200 at {reached:?} s, not by {by} s"
        );
    }
}

#[test]
fn the_healthy_runs_learned_reach_past_the_first_cohorts_short_half() {
    // Jobs of 200 s ± 50% (100–300 s) on a healthy site. The first verdict
    // comes when half the first cohort of 16 has ended, its shortest half;
    // the rest is censored once more than the first window runs. Unless the
    // floor that later verdicts raise counts those runs again, no run ever
    // stays below the floor long enough to end in the sample, and every test
    // judges against a distribution whose upper half is the tail's guess
    // (it stopped at 100.6–164.5 s on seed 14).
    let scenario = one_site("healthy, ±50% run times", 1200, 200.0, 0.5, site("healthy", 300));
    for seed in [1, 2, 3, 14] {
        let r = run(&scenario, "adaptive", seed);
        let (shortest, longest) = at(&r.learned, "healthy").runtime_range.expect("run times were learned");
        assert!(
            longest >= 250.0,
            "seed {seed}: the healthy runs learned span {shortest:.0}–{longest:.0} s of 100–300 s"
        );
    }
}

#[test]
fn every_probe_of_a_healthy_site_ends_in_a_verdict() {
    // No knee, 300 slots, jobs of about 1,170 s ± 48%. A healthy verdict
    // sets the floor to the level its test averaged, a little under the
    // whole number of jobs its window let run (31.2 for 32). The sample,
    // taken again up to the first moment more than the new floor ran, was
    // then censored where the probe filled its window, not where the next
    // one began: fewer than half its runs had ended, no test could start,
    // and none ever would, since no run ends clean while the level stays
    // past the floor (held at 62 of 300 slots from the second probe on,
    // seed 8: 60,020 s).
    let site = SiteParams { wait_mean: 30.0, speed: 0.6, ..SiteParams::healthy("s", 300) };
    let scenario = one_site("healthy, ±48% run times", 3000, 700.0, 0.48, site);
    for seed in 1..=10 {
        let r = run(&scenario, "adaptive", seed);
        let found = at(&r.learned, "s").capacity.unwrap_or(0.0);
        assert!(found >= 0.9 * 300.0, "seed {seed}: the window stopped at {found:.0} of 300 healthy slots");
        let (adaptive, bulk) = (makespan(&r), makespan(&run(&scenario, "bulk", seed)));
        assert!(adaptive <= 2.0 * bulk, "seed {seed}: adaptive {adaptive:.0} s, bulk submission {bulk:.0} s");
    }
}

#[test]
fn a_healthy_site_whose_waits_outlast_its_runs_is_used_to_its_slots() {
    // No knee, 300 slots, jobs of 200 s ± 30% that wait 600 s on average
    // for a slot: only a queue of Little's law's length (rate × wait, three
    // windows' worth here) keeps the window running. Capped at one window
    // for fear of all of them starting at once, the site ran about half its
    // window and the ramp crawled (1.8 × bulk submission).
    let scenario = Scenario {
        desc: "healthy, waits three times the run".into(),
        types: vec![JobType::single(1200, 200.0, 0.3)],
        sites: vec![SiteParams { wait_mean: 600.0, ..SiteParams::healthy("slow queue", 300) }],
    };
    for seed in 1..=5 {
        let adaptive = makespan(&run(&scenario, "adaptive", seed));
        let bulk = makespan(&run(&scenario, "bulk", seed));
        assert!(adaptive <= 1.4 * bulk, "seed {seed}: adaptive {adaptive:.0} s, bulk submission {bulk:.0} s");
    }
}

#[test]
fn a_knee_is_found_and_held_near_it_whatever_the_jitter() {
    // A shared resource serving 40 jobs at full speed that collapses past
    // that (beta 1), 500 slots: the search must end near 40 and the run must
    // stay within reach of the oracle, which knows the knee.
    for (seed, jitter) in (1..=6).zip([0.0, 0.1, 0.2, 0.3, 0.4, 0.5]) {
        let scenario = Scenario {
            desc: "knee 40".into(),
            types: vec![JobType::single(1500, 300.0, jitter)],
            sites: vec![SiteParams { capacity: Capacity::Finite(40.0), beta: 1.0, ..site("knee", 500) }],
        };
        let r = run(&scenario, "adaptive", seed);
        let found = at(&r.learned, "knee").capacity.expect("a capacity was found");
        assert!(
            (24.0..=60.0).contains(&found),
            "seed {seed}, jitter ±{jitter}: capacity found {found:.0}, true knee 40"
        );
        assert_within_oracle(&r, &scenario, seed, 1.5, &format!("seed {seed}, jitter ±{jitter}"));
        only_the_youngest_were_removed(&r, &format!("seed {seed}, jitter ±{jitter}"));
    }
}

/// One 60-slot site with a knee of 11 and steep thrash (beta 2), below the
/// first window of 16; jobs of 60 s ± 20%.
fn steep_knee_below_the_first_window(wait_mean: f64, n_jobs: u64) -> Scenario {
    let steep = SiteParams {
        capacity: Capacity::Finite(11.0),
        beta: 2.0,
        wait_mean,
        ..SiteParams::healthy("steep", 60)
    };
    Scenario {
        desc: "steep knee below the first window".into(),
        types: vec![JobType::single(n_jobs, 60.0, 0.2)],
        sites: vec![steep],
    }
}

/// One 500-slot site whose resource thrashes steeply (beta 2) past `knee`;
/// 300 jobs of 300 s ± 30%.
fn steep_knee(knee: f64) -> Scenario {
    let site = SiteParams { capacity: Capacity::Finite(knee), beta: 2.0, ..site("steep", 500) };
    one_site(&format!("a steep knee of {knee}"), 300, 300.0, 0.3, site)
}

#[test]
fn a_first_window_past_a_steep_knee_is_found_out_against_the_level_below() {
    // Knees of 5 and 9 under the first window of 16: every run of the first
    // cohort is slowed (3 to 17 times), and that is the baseline. The probe
    // above it proves the site thrashes; the floor, healthy only by
    // assumption, is then checked against runs at the level below, which
    // are faster. Taken on trust, the site was held at 15–17 (2.7 and 5.9
    // times the oracle's makespan).
    for knee in [5.0, 9.0] {
        for seed in 1..=5 {
            let case = format!("knee {knee}, seed {seed}");
            let r = run_with(
                &steep_knee(knee),
                "adaptive",
                seed,
                &SimOptions { trace: true, ..SimOptions::default() },
            );
            let first_window_slowed = r.decisions.iter().any(
                |d| matches!(d.kind, DecisionKind::Verdict { healthy: false, level, .. } if level == 16.0),
            );
            assert!(first_window_slowed, "{case}: the first window's runs were never found slowed");
            // The check halves the floor once per proof of thrash, and a
            // probe from 8 to 11 often proves only the least slowdown, so a
            // knee of 5 may end at 8–9, still well under the first window.
            let found = at(&r.learned, "steep").capacity.unwrap_or(0.0);
            assert!(found < 12.0, "{case}: capacity found {found:.0}, first window 16");
            assert_within_oracle(&r, &steep_knee(knee), seed, 3.0, &case);
        }
    }
}

#[test]
fn a_first_window_under_a_steep_knee_keeps_its_baseline_when_checked() {
    // A knee of 24 that thrashes (beta 2): the probe from 16 to 32 proves
    // the thrash, and so the first window is checked against the level
    // below. Its runs are no faster there (both levels are under the knee),
    // so the first window stays healthy and the search goes on above it.
    for seed in 1..=5 {
        let r = run(&steep_knee(24.0), "adaptive", seed);
        let found = at(&r.learned, "steep").capacity.unwrap_or(0.0);
        assert!((16.0..=30.0).contains(&found), "seed {seed}: capacity found {found:.0}, true knee 24");
    }
}

#[test]
fn a_collapse_is_seen_before_the_collapsed_jobs_end() {
    // A knee of 11 with steep thrash (beta 2) below the first window of 16:
    // the first cohort runs slowed, and the first probe runs every job
    // fifteen times slower or more, past any healthy run seen. The test must
    // still reach its verdict while those jobs run (they testify once past
    // where a healthy run is unlikely), not when they end. Waits of 120 s keep
    // jobs queued ahead, so the verdict shows as their withdrawal.
    let scenario = steep_knee_below_the_first_window(120.0, 400);
    for seed in 1..=5 {
        let config = PolicyConfig::named("adaptive").expect("known policy");
        let r = sim::run(&scenario, &config, seed, &SimOptions { trace: true, ..SimOptions::default() });
        assert!(r.errors.is_empty(), "seed {seed}: conservation: {:?}", r.errors);
        let probe = r.trace.iter().find(|t| t.why.contains("window 32")).map(|t| t.time);
        let probe = probe.unwrap_or_else(|| panic!("seed {seed}: no probe above the first window"));
        let cut = r
            .trace
            .iter()
            .find(|t| {
                t.time > probe && (t.why.contains("idle beyond window") || t.why.contains("degraded ≥"))
            })
            .map(|t| t.time);
        let cut = cut.unwrap_or_else(|| panic!("seed {seed}: the probe was never judged degraded"));
        // A healthy run here is 60 s ± 20%; a collapsed one fifteen times that.
        assert!(
            cut - probe <= 8.0 * 72.0,
            "seed {seed}: the probe began at {probe:.0} s, the cut came at {cut:.0} s"
        );
    }
}

/// Attempts removed while running, grouped by the instant of their removal,
/// each with the start times of the attempts kept running at that site then.
fn removals(r: &SimResult) -> Vec<(f64, Vec<f64>, Vec<f64>)> {
    let mut at: Vec<(u32, f64)> = r
        .attempts
        .iter()
        .filter(|a| a.started.is_some() && a.end == AttemptEnd::Removed)
        .filter_map(|a| Some((a.site, a.ended?)))
        .collect();
    at.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    at.dedup();
    at.into_iter()
        .map(|(site, t)| {
            let here = r.attempts.iter().filter(|a| a.site == site);
            let removed = here.clone().filter(|a| a.end == AttemptEnd::Removed && a.ended == Some(t));
            let kept = here.filter(|a| a.started.is_some_and(|s| s <= t) && a.ended.is_none_or(|e| e > t));
            (t, removed.filter_map(|a| a.started).collect(), kept.filter_map(|a| a.started).collect())
        })
        .collect()
}

/// A site sheds an overload from its youngest jobs, which have done the
/// least work: no job removed while running started before one kept
/// running at that site then.
fn only_the_youngest_were_removed(r: &SimResult, case: &str) {
    for (t, removed, kept) in removals(r) {
        let oldest_removed = removed.iter().copied().fold(f64::INFINITY, f64::min);
        let youngest_kept = kept.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert!(
            oldest_removed >= youngest_kept,
            "{case}: at {t:.0} s a job started at {oldest_removed:.0} s was removed, \
             one started at {youngest_kept:.0} s kept"
        );
    }
}

#[test]
fn sharing_alone_past_a_knee_costs_almost_no_running_job() {
    // Past a knee where jobs only share the resource (beta 0), a site
    // delivers its knee whatever runs: removing a running job throws its
    // work away for nothing. The rule removes only where the site delivers
    // κ less than the window, which sharing cannot do to a window known
    // healthy; but "healthy" holds only to within κ and the test's slowdowns
    // to a grid, so near a knee a verdict can still read a little short.
    // And a knee below the first window makes the baseline itself slow
    // (the module doc). What is bounded: at most 1% of the jobs lose their
    // run (2% with the knee below the first window; 17 of 1200 measured at
    // knee 8), and none where the knee is far above the first window.
    for (seed, knee) in (1..=8).zip([8.0, 16.0, 20.0, 25.0, 40.0, 60.0, 120.0, 200.0]) {
        let scenario = Scenario {
            desc: format!("sharing knee {knee}"),
            types: vec![JobType::single(1200, 200.0, 0.07 * (seed - 1) as f64)],
            sites: vec![SiteParams { capacity: Capacity::Finite(knee), ..site("sharing", 400) }],
        };
        let r = run(&scenario, "adaptive", seed);
        let cut = cut_short(&r);
        let bound = if knee < 16.0 { 24 } else { 12 };
        assert!(cut <= bound, "seed {seed}, knee {knee}: {cut} running jobs removed where nothing thrashes");
        if knee >= 60.0 {
            assert_eq!(cut, 0, "seed {seed}, knee {knee}: running jobs removed where nothing thrashes");
        }
        only_the_youngest_were_removed(&r, &format!("seed {seed}, knee {knee}"));
    }
}

/// Seeds 1-5 of `scenario` under `adaptive`, each also checked by `check`
/// and for removing only the youngest: in how many seeds running jobs were
/// removed, and the makespans ÷ the oracle's, sorted.
fn shedding_over_five_seeds(scenario: &Scenario, check: impl Fn(u64, &SimResult)) -> (usize, Vec<f64>) {
    let mut ratios = Vec::new();
    let mut shed = 0;
    for seed in 1..=5 {
        let r = run(scenario, "adaptive", seed);
        check(seed, &r);
        only_the_youngest_were_removed(&r, &format!("seed {seed}"));
        shed += usize::from(cut_short(&r) > 0);
        ratios.push(makespan(&r) / makespan(&run(scenario, "oracle", seed)));
    }
    ratios.sort_by(f64::total_cmp);
    (shed, ratios)
}

#[test]
fn a_thrashing_overload_is_shed_from_its_youngest_jobs_not_waited_out() {
    // A knee of 11 with steep thrash (beta 2) below the first window of 16:
    // a probe above it makes every job run ten times slower or more, so the
    // site delivers less than its window would. Waiting for those jobs to
    // end costs many run times; the youngest, with the least work done, are
    // removed instead. Only the youngest: no removed job started before a
    // job kept running there. Waiting it out, the median run took 1.37 times
    // the oracle's makespan over these seeds; shedding, 1.19. (Seed 4 is
    // 4 times the oracle either way: its first cohort, all above the knee,
    // is a baseline too slow for any later level to look degraded.)
    let scenario = steep_knee_below_the_first_window(30.0, 600);
    let (shed, ratios) = shedding_over_five_seeds(&scenario, |_, _| {});
    assert!(shed >= 3, "an overload was shed in only {shed} of 5 seeds");
    assert!(ratios[2] <= 1.3, "median makespan {:.2} times the oracle's ({ratios:.2?})", ratios[2]);
}

#[test]
fn a_probe_still_under_way_when_the_pool_empties_is_judged() {
    // The steep site's first probe (32 jobs, past a knee of 11 with beta 2)
    // takes the last jobs of the pool. Nothing is left to send, but the
    // verdict still decides whether the jobs past the floor are shed or
    // left to run many times slower: the probe is judged degraded (the run
    // remembers a ceiling) and, where the site delivers less than the window
    // alone would, the overload is shed. Without a test in the tail no seed
    // remembered a ceiling or removed a job, and the median run took 2.4
    // times the oracle's makespan; with it, 1.8. (Seeds 4 and 5 keep their
    // overload: as in the shedding test, a first cohort all above the knee
    // is a baseline too slow for the probe to look like thrash.)
    let scenario = steep_knee_below_the_first_window(30.0, 48);
    let (shed, ratios) = shedding_over_five_seeds(&scenario, |seed, r| {
        let learned = &at(&r.learned, "steep");
        assert!(learned.ceiling.is_some(), "seed {seed}: the last probe was never judged: {learned:?}");
    });
    assert!(shed >= 3, "the last probe's overload was shed in only {shed} of 5 seeds");
    assert!(ratios[2] <= 2.0, "median makespan {:.2} times the oracle's ({ratios:.2?})", ratios[2]);
}

#[test]
fn jobs_stuck_at_a_collapsed_site_are_shed_or_moved_to_a_site_with_room() {
    // Beside a roomy healthy site, one whose resource thrashes past a knee
    // of 10 (beta 2) while the first window is 16: its baseline is learned
    // already slowed, and its first probe leaves dozens of jobs running
    // many times slower than healthy. They must not set the makespan: they
    // are shed once the probe proves the thrash past the floor being
    // checked (their jobs go back to the pool), or, once nothing is left to
    // send, those that have run far longer than any healthy run would end
    // later than fresh copies at the roomy site, by their age alone: they
    // are removed and sent there, where each then succeeds. Left to drain,
    // they set a makespan of 2.3-5.7 times the oracle's (seeds 1-5). The
    // roomy site loses no running job.
    let scenario = Scenario {
        desc: "a collapsed site in the tail".into(),
        types: vec![JobType::single(1200, 250.0, 0.3)],
        sites: vec![
            SiteParams { wait_mean: 30.0, ..site("roomy", 200) },
            SiteParams {
                capacity: Capacity::Finite(10.0),
                beta: 2.0,
                wait_mean: 230.0,
                ..site("collapsing", 366)
            },
        ],
    };
    let mut moved = 0;
    for seed in 1..=5 {
        let r = run(&scenario, "adaptive", seed);
        let roomy_cut =
            r.attempts.iter().filter(|a| a.site == 0 && a.started.is_some() && a.end == AttemptEnd::Removed);
        assert_eq!(roomy_cut.count(), 0, "seed {seed}: running jobs removed at the roomy site");
        // Removed once every job had been sent somewhere: by the tail, not
        // by shedding (whose jobs go back to the pool, to any site).
        let pool_empty = every_job_sent(&r);
        let in_the_tail = r
            .attempts
            .iter()
            .filter(|a| a.started.is_some() && a.end == AttemptEnd::Removed)
            .filter(|a| a.ended.is_some_and(|t| t >= pool_empty))
            .collect::<Vec<_>>();
        let removed_at_collapsed =
            r.attempts.iter().any(|a| a.site == 1 && a.started.is_some() && a.end == AttemptEnd::Removed);
        moved += usize::from(removed_at_collapsed);
        for removed in in_the_tail {
            let ended = removed.ended.expect("a removal has a time");
            let moved_on = r.attempts.iter().any(|a| {
                a.job == removed.job && a.site == 0 && a.submitted >= ended && a.end == AttemptEnd::Success
            });
            assert!(
                moved_on,
                "seed {seed}: job {} was removed at {ended:.0} s and did not succeed at the roomy site",
                removed.job
            );
        }
        assert_within_oracle(&r, &scenario, seed, 2.0, &format!("seed {seed}"));
    }
    assert!(moved >= 4, "stuck jobs were shed or moved in only {moved} of 5 seeds");
}

#[test]
fn a_capacity_that_drops_once_the_pool_is_empty_is_seen_and_its_slowed_jobs_move_once() {
    // A site's knee of 100 (beta 2) falls to a quarter at 360 s, once
    // nothing is left to send (the pool empties at 320-345 s). The test of its floor goes on in the tail,
    // so the drop is seen and the jobs past the cut window, running many
    // times slow, move to the roomy site (without it, they crawled until
    // the drop ended: 3.4-4.3 times the oracle's makespan in seeds 3 and
    // 4). Each of the jobs running there when the capacity fell moves at
    // most once: while a site drains past its window, no jobs wait ahead
    // there to start into the overload, be moved on as stragglers and
    // come back (174 moves from the site's 120 slots did so). And the
    // next run is not told the knee is a quarter of what it was.
    let slots = 120;
    const DROP: f64 = 360.0;
    let scenario = Scenario {
        desc: "a capacity drop in the tail".into(),
        types: vec![JobType::single(1500, 60.0, 0.1)],
        sites: vec![
            SiteParams { wait_mean: 10.0, ..site("roomy", 300) },
            SiteParams {
                capacity: Capacity::Finite(100.0),
                beta: 2.0,
                wait_mean: 6.0,
                cap_windows: vec![[DROP, DROP + 1000.0, 0.25]],
                ..site("dropping", slots)
            },
        ],
    };
    for seed in 1..=5 {
        let r = run(&scenario, "adaptive", seed);
        // Once every job had been sent somewhere, a removal is a move.
        let pool_empty = every_job_sent(&r);
        assert!(
            pool_empty <= DROP,
            "seed {seed}: the pool emptied at {pool_empty:.0} s, after the drop: no tail to test"
        );
        let moved = r
            .attempts
            .iter()
            .filter(|a| a.site == 1 && a.started.is_some() && a.end == AttemptEnd::Removed)
            .filter(|a| a.ended.is_some_and(|t| t >= pool_empty))
            .count();
        assert!(
            moved <= slots as usize,
            "seed {seed}: {moved} running jobs moved from a site of {slots} slots"
        );
        // The drop was judged on the run's last jobs, and lasts only a
        // while: the next run starts from what the run learned before.
        let learned = at(&r.learned, "dropping").capacity.unwrap_or(0.0);
        assert!(learned >= 50.0, "seed {seed}: a knee of 100 remembered as {learned:.0}");
        assert_within_oracle(&r, &scenario, seed, 3.0, &format!("seed {seed}"));
    }
}

#[test]
fn a_verdict_in_the_tail_goes_on_while_jobs_run_past_the_floor() {
    // A warm start probes a steep knee of 27 (beta 2) at twice its floor as
    // the pool empties. The first degraded verdict proves only the least
    // slowdown (κ), and the window it leaves, the probe's level over κ, is
    // still far past the knee. The drain used to end there, and the jobs
    // under that window ran 3.5 times slow to the run's end: what ran
    // through an overload is no evidence for a later test, and in the tail
    // no job starts to feed one (seeds 1-20: 9 runs over twice the oracle's
    // makespan, worst 2.56). In the tail the verdict's test goes on while
    // any job runs past the floor, and the larger slowdown it proves moves
    // them.
    let scenario = Scenario {
        desc: "a steep knee probed as the pool empties".into(),
        types: vec![JobType::single(300, 240.0, 0.33)],
        sites: vec![
            SiteParams { speed: 1.3, wait_mean: 7.0, ..SiteParams::healthy("roomy", 115) },
            SiteParams {
                capacity: Capacity::Finite(27.0),
                beta: 2.0,
                speed: 0.63,
                wait_mean: 8.0,
                ..SiteParams::healthy("steep", 55)
            },
        ],
    };
    for seed in 1..=20 {
        let cold = run(&scenario, "adaptive", seed);
        let options = SimOptions { memory: cold.learned.clone(), ..SimOptions::default() };
        let warm = run_with(&scenario, "adaptive", seed, &options);
        assert_within_oracle(&warm, &scenario, seed, 2.0, &format!("seed {seed}, warm"));
    }
}

#[test]
fn a_dead_site_is_abandoned_within_the_idle_timeout() {
    // Beside a healthy site, one that never starts anything: the run must
    // finish no later than it would without the dead site plus the default
    // idle timeout (1200 s), and the dead site is remembered unresponsive.
    let healthy = SiteParams { wait_mean: 30.0, ..site("alive", 100) };
    let alone = Scenario {
        desc: "alone".into(),
        types: vec![JobType::single(600, 120.0, 0.3)],
        sites: vec![healthy.clone()],
    };
    let with_dead =
        Scenario { sites: vec![healthy, SiteParams { dead: true, ..site("dead", 400) }], ..alone.clone() };
    for seed in 1..=5 {
        let r = run(&with_dead, "adaptive", seed);
        let base = makespan(&run(&alone, "adaptive", seed));
        assert!(
            makespan(&r) <= base + 1200.0,
            "seed {seed}: {:.0} s with a dead site, {base:.0} s without",
            makespan(&r)
        );
        let dead = r.metrics.sites.iter().find(|s| s.name == "dead").expect("dead site");
        assert_eq!(dead.jobs_done, 0, "seed {seed}");
        assert!(at(&r.learned, "dead").unresponsive, "seed {seed}: {:?}", at(&r.learned, "dead"));
        // Warm, a run shorter than the idle timeout has no use for a site
        // that started nothing for that long: no job waits there.
        let options = SimOptions { memory: r.learned.clone(), ..SimOptions::default() };
        let warm = sim::run(&with_dead, &PolicyConfig::named("adaptive").unwrap(), seed, &options);
        assert!(warm.errors.is_empty() && !warm.hang, "seed {seed}: warm: {:?}", warm.errors);
        let dead_index = with_dead.sites.iter().position(|s| s.dead).unwrap() as u32;
        let parked: Vec<_> = warm.attempts.iter().filter(|a| a.site == dead_index).collect();
        assert!(parked.is_empty(), "seed {seed}: warm, jobs sent to the site remembered dead: {parked:?}");
    }
}

#[test]
fn a_dead_site_tried_again_with_one_job_is_given_up_again_and_never_polled() {
    // The only site starts nothing. It is given up after the idle timeout
    // (1200 s), tried with one job after twice that, given up again, and
    // so on until the horizon: each try is taken back within the idle
    // timeout, and as a site that starts nothing sends no events, only the
    // policy's own few deadlines wake it.
    let scenario = one_site("one dead site", 100, 300.0, 0.3, SiteParams { dead: true, ..site("dead", 400) });
    let config = PolicyConfig::named("adaptive").expect("known policy");
    for seed in 1..=3 {
        let options = SimOptions { horizon: 20_000.0, ..SimOptions::default() };
        let r = sim::run(&scenario, &config, seed, &options);
        assert!(r.errors.is_empty() && r.hang, "seed {seed}: {:?}", r.errors);
        util::assert_woken_by_events(&r, &format!("seed {seed}"));
        let tries: std::collections::BTreeSet<i64> =
            r.attempts.iter().map(|a| a.submitted.round() as i64).collect();
        assert!(tries.len() >= 4, "seed {seed}: tried at {tries:?} s within 20,000 s");
        for a in &r.attempts {
            let waited = a.ended.unwrap_or(20_000.0) - a.submitted;
            assert!(
                waited <= 1.5 * 1200.0 || a.submitted > 20_000.0 - 1.5 * 1200.0,
                "seed {seed}: a job waited {waited:.0} s at the dead site (sent at {:.0} s)",
                a.submitted
            );
        }
    }
}

#[test]
fn a_tail_whose_one_site_learns_its_runs_afresh_is_not_polled() {
    // One site, a knee of 16 that thrashes, 50 jobs of about 6,300 s there
    // (held-out G1078). After its degraded verdicts the site learns its
    // runs afresh, so no site has runs ready, and the tail was looked at
    // every three seconds for hours: 2,600 wakeups for 120 site events.
    let thrashing = SiteParams {
        capacity: Capacity::Finite(16.0),
        beta: 1.0,
        speed: 0.66,
        wait_mean: 470.0,
        ..site("s", 33)
    };
    let scenario = one_site("one thrashing site, long jobs", 50, 4142.0, 0.23, thrashing);
    for seed in 1..=3 {
        let r = run(&scenario, "adaptive", seed);
        assert!(
            r.wakeups <= 3 * r.events,
            "seed {seed}: woken {} times for {} site events",
            r.wakeups,
            r.events
        );
    }
}

/// A random grid of the kind `shared/tools/gridgen.py` draws, smaller so
/// that many run in a test: 1–8 sites, knees from 3 to none, thrash from
/// none to steep, waits of seconds to minutes, failing, dead and drifting
/// sites.
fn random_grid(seed: u64) -> Scenario {
    let mut rng = Rng(seed);
    let n_sites = rng.u32(1, 8) as usize;
    let mut sites: Vec<SiteParams> = (0..n_sites)
        .map(|i| {
            let slots = rng.u32(4, 400);
            let capacity = if rng.f64() < 0.3 {
                Capacity::Infinite
            } else {
                Capacity::Finite(f64::from(rng.u32(3, slots.max(3))))
            };
            let drop = rng.f64() < 0.15;
            SiteParams {
                name: format!("s{i}"),
                slots,
                wait_mean: rng.pick(&[2.0, 10.0, 60.0, 300.0]),
                capacity,
                beta: rng.pick(&[0.0, 0.2, 0.5, 1.0, 2.0]),
                speed: 0.5 + rng.f64(),
                p_fail: if rng.f64() < 0.3 { 0.3 * rng.f64() } else { 0.0 },
                cap_windows: if drop { vec![[500.0, 2000.0, 0.5]] } else { Vec::new() },
                dead: n_sites > 1 && rng.f64() < 0.15,
                ..SiteParams::healthy("", slots)
            }
        })
        .collect();
    if sites.iter().all(|s| s.dead) {
        sites[0].dead = false;
    }
    Scenario {
        desc: format!("random grid {seed}"),
        types: vec![JobType::single(
            u64::from(rng.u32(50, 1500)),
            rng.pick(&[30.0, 120.0, 600.0]),
            0.5 * rng.f64(),
        )],
        sites,
    }
}

#[test]
fn every_job_of_a_random_grid_is_done_once_by_every_adaptive_policy() {
    // Conservation (no job lost, none done twice, no attempt at two sites at
    // once: the engine checks each input) and termination on 40 random grids.
    for seed in 1..=40 {
        let grid = random_grid(seed);
        for policy in ["adaptive", "oracle", "late-oracle", "thesis"] {
            let r = run(&grid, policy, seed);
            let mut done = vec![0u32; grid.n_jobs() as usize];
            for a in r.attempts.iter().filter(|a| a.end == AttemptEnd::Success) {
                done[a.job as usize] += 1;
            }
            let twice = done.iter().filter(|&&d| d > 1).count();
            assert_eq!(twice, 0, "{policy}, grid seed {seed}: {twice} jobs completed twice");
        }
    }
}

#[test]
fn the_time_a_policy_is_handed_never_goes_back() {
    // A deadline's wake hands the policy the deadline, which the clock may
    // read a hair later; an event just after it must not be handed the
    // earlier reading, or a site reopening at that deadline is open on the
    // tick and closed on the event at the same instant (a livelock of
    // submissions and withdrawals, seen on a family grid). The simulator
    // reports a time that went back as an error of the run.
    for seed in 1..=20 {
        let grid = random_grid(seed);
        let r = sim::run(
            &grid,
            &PolicyConfig::named("adaptive").expect("known policy"),
            seed,
            &SimOptions::default(),
        );
        assert!(r.errors.is_empty(), "grid seed {seed}: {:?}", r.errors);
    }
}

/// Runs `original` and, from its `restore_at`-th input on, a twin restored
/// from the original's checkpoint then, feeding both every input and
/// failing on the first thing they decide differently.
struct Twin {
    original: Box<dyn Policy>,
    twin: Option<Box<dyn Policy>>,
    fresh: Box<dyn FnMut() -> Box<dyn Policy> + Send>,
    inputs: usize,
    restore_at: usize,
    /// Twins made, across runs.
    made: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Policy for Twin {
    fn name(&self) -> &'static str {
        self.original.name()
    }
    fn handle(&mut self, now: Time, input: &Input) -> Vec<Action> {
        self.inputs += 1;
        if self.inputs == self.restore_at {
            let saved = self.original.checkpoint().expect("adaptive keeps checkpoints");
            let mut twin = (self.fresh)();
            twin.restore(&saved).expect("its own checkpoint restores");
            self.twin = Some(twin);
            self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let actions = self.original.handle(now, input);
        if let Some(twin) = &mut self.twin {
            let context = format!("input {} at {now}: {input:?}", self.inputs);
            assert_eq!(twin.handle(now, input), actions, "{context}");
            assert_eq!(twin.next_deadline(), self.original.next_deadline(), "{context}");
            assert_eq!(twin.take_decisions(), self.original.take_decisions(), "{context}");
        }
        actions
    }
    fn next_deadline(&self) -> Option<Time> {
        self.original.next_deadline()
    }
    fn book(&self) -> &JobBook {
        self.original.book()
    }
    fn site_view(&self, site: SiteId) -> SiteView {
        self.original.site_view(site)
    }
    fn take_decisions(&mut self) -> Vec<Decision> {
        match self.twin {
            // Taken in `handle`, to compare.
            Some(_) => Vec::new(),
            None => self.original.take_decisions(),
        }
    }
}

#[test]
fn a_policy_restored_from_its_checkpoint_decides_as_the_original_would() {
    // What `--resume` from a checkpoint relies on: the checkpoint holds the
    // whole state, so the rest of the run cannot tell. Random grids, the
    // twin restored early, mid-run and late.
    let made = restored_twins_decide_alike((1..=12).map(|seed| (seed, random_grid(seed))));
    assert!(made >= 30, "only {made} of 36 runs got as far as their twin");
}

#[test]
fn a_policy_of_several_kinds_restored_from_its_checkpoint_decides_as_the_original_would() {
    // The same with a controller per kind: the mixed scenarios of the
    // model, each with its own seed.
    let all =
        sim::load_scenarios(&util::shared().join("scenarios/mixed.toml")).expect("mixed scenarios load");
    let grids = all.into_iter().enumerate().map(|(i, (_, grid))| (i as u64 + 1, grid));
    let made = restored_twins_decide_alike(grids);
    assert!(made >= 10, "only {made} of 12 runs got as far as their twin");
}

/// Runs `adaptive` on each (seed, grid) with a twin restored from its
/// checkpoint after 3, 200 and 2,000 inputs (the twin panics on the first
/// decision that differs); returns how many runs got as far as their twin.
fn restored_twins_decide_alike(grids: impl Iterator<Item = (u64, Scenario)>) -> usize {
    let made = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for (seed, grid) in grids {
        let spec = sim::run_spec(&grid, Default::default());
        let config = PolicyConfig::named("adaptive").expect("known policy");
        for restore_at in [3, 200, 2000] {
            let build = {
                let (config, spec) = (config.clone(), spec.clone());
                move || cosched::policy::build(&config, &spec, None).expect("adaptive builds")
            };
            let twin = Twin {
                original: build(),
                twin: None,
                fresh: Box::new(build),
                inputs: 0,
                restore_at,
                made: made.clone(),
            };
            let result = sim::run_built(&grid, Box::new(twin), seed, &SimOptions::default());
            assert!(!result.hang, "grid seed {seed}: the run hangs");
            assert_eq!(result.metrics.jobs_done, grid.n_jobs(), "grid seed {seed}");
        }
    }
    made.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn on_jobs_of_one_size_a_collapse_is_seen_within_about_a_run_time() {
    // Jobs of 200 s ± 5%, a knee of 20 with steep thrash (beta 2) above the
    // first window of 16: the probe at 32 runs every job about 3.5 times
    // slower. Its jobs pass the longest healthy run within a run time; until
    // then they testify for a slowdown only as much as the nuisance of the
    // healthy runs' scale (±10%) lets them, and past it only once past where
    // a healthy run is unlikely. Where that was twice the longest, the
    // verdict waited two run times (420 s at seed 1; now 52–245 s, seeds 1–8).
    let scenario = Scenario {
        desc: "collapse on jobs of one size".into(),
        types: vec![JobType::single(600, 200.0, 0.05)],
        sites: vec![SiteParams { capacity: Capacity::Finite(20.0), beta: 2.0, ..site("narrow", 200) }],
    };
    for seed in 1..=8 {
        let config = PolicyConfig::named("adaptive").expect("known policy");
        let r = sim::run(&scenario, &config, seed, &SimOptions { trace: true, ..SimOptions::default() });
        assert!(r.errors.is_empty(), "seed {seed}: conservation: {:?}", r.errors);
        let decisions = r.decisions;
        let probe = decisions
            .iter()
            .find(|d| matches!(d.kind, DecisionKind::Window { window, .. } if window >= 32.0));
        let probe = probe.unwrap_or_else(|| panic!("seed {seed}: no probe above the first window")).at;
        let verdict = decisions
            .iter()
            .find(|d| d.at > probe && matches!(d.kind, DecisionKind::Verdict { healthy: false, .. }))
            .unwrap_or_else(|| panic!("seed {seed}: the probe was never judged degraded"))
            .at;
        assert!(
            verdict - probe <= 1.5 * 200.0,
            "seed {seed}: the probe began at {probe:.0} s, the verdict came at {verdict:.0} s"
        );
    }
}

/// Executions at site `index` that had started and were removed.
fn cut_short_at(r: &SimResult, index: u32) -> usize {
    r.attempts
        .iter()
        .filter(|a| a.site == index && a.started.is_some() && a.end == AttemptEnd::Removed)
        .count()
}

#[test]
fn a_first_window_past_a_steep_knee_hands_its_cohort_to_sites_that_end_theirs() {
    // Beside two healthy sites, one whose knee (4, beta 2) lies under the
    // first window of 16: its first cohort runs about 28 times slow, never
    // ends while the rest of the run does, and so never teaches the site a
    // baseline to test by. Once those jobs are far past every healthy
    // site's runs, they move, and the site starts again lower. Kept, they
    // would set the makespan at about 8,000 s.
    let scenario = Scenario {
        desc: "a steep knee under the first window".into(),
        types: vec![JobType::single(400, 300.0, 0.2)],
        sites: vec![
            site("a", 100),
            site("b", 100),
            SiteParams { capacity: Capacity::Finite(4.0), beta: 2.0, ..site("steep", 50) },
        ],
    };
    for seed in 1..=5 {
        let r = run(&scenario, "adaptive", seed);
        assert_within_oracle(&r, &scenario, seed, 3.0, &format!("seed {seed}"));
        assert!(cut_short_at(&r, 2) > 0, "seed {seed}: the steep site's first cohort was never moved");
        // What the run learned there is a floor below the first window: a
        // warm run must not start the steep site at 16 again.
        let learned = &at(&r.learned, "steep");
        let capacity =
            learned.capacity.unwrap_or_else(|| panic!("seed {seed}: nothing learned: {learned:?}"));
        assert!(capacity < 16.0, "seed {seed}: the steep site is remembered at {capacity}");
        let config = PolicyConfig::named("adaptive").expect("known policy");
        let warm = sim::run(
            &scenario,
            &config,
            seed,
            &SimOptions { memory: r.learned.clone(), ..SimOptions::default() },
        );
        assert!(warm.errors.is_empty() && !warm.hang, "seed {seed}: warm run: {:?}", warm.errors);
        let peak = warm.metrics.sites[2].peak_concurrency;
        assert!(peak < 16, "seed {seed}: the warm run ran {peak} jobs at once at the steep site");
    }
}

#[test]
fn a_healthy_site_three_times_slower_than_the_rest_keeps_its_running_jobs() {
    // No knee anywhere; one site runs every job three times slower than the
    // other two (speed 0.5 against 1.5), with runs ±50%. Its first cohort is
    // still running long after the fast sites' longest runs, and that alone
    // must not read as a collapse: hardware differs between sites.
    let scenario = Scenario {
        desc: "a slow healthy site beside fast ones".into(),
        types: vec![JobType::single(400, 300.0, 0.5)],
        sites: vec![
            SiteParams { speed: 1.5, ..site("fast1", 100) },
            SiteParams { speed: 1.5, ..site("fast2", 100) },
            SiteParams { speed: 0.5, ..site("slow", 100) },
        ],
    };
    for seed in 1..=8 {
        let r = run(&scenario, "adaptive", seed);
        assert_eq!(cut_short_at(&r, 2), 0, "seed {seed}: running jobs removed at the slow healthy site");
    }
}

#[test]
fn a_warm_start_past_a_steep_knee_is_cut_to_it_as_the_evidence_grows() {
    // A run remembered 27 healthy and no knee above it (its site had 27
    // slots); the site now has 55 slots behind a resource with a knee of 27
    // that thrashes (beta 2). A warm start at twice the floor runs every job
    // about seven times slow, and all are young, so the test can judge only
    // once they pass the shortest healthy run, and then proves just the
    // least slowdown (1.25–1.9 here): a cut to 52 / 1.5 = 35 still runs
    // them three times slow. The verdict's test goes on while the site
    // drains, and the cut follows the slowdown it proves, down to the knee
    // within three run times.
    let remembered = one_site("the site as it was: 27 slots, no knee", 120, 300.0, 0.3, site("s", 27));
    let steep = SiteParams { capacity: Capacity::Finite(27.0), beta: 2.0, ..site("s", 55) };
    let now = one_site("the site now: 55 slots, a knee of 27 that thrashes", 300, 300.0, 0.3, steep);
    let config = PolicyConfig::named("adaptive").expect("known policy");
    for seed in 1..=5 {
        let learned = run(&remembered, "adaptive", seed).learned;
        let floor = at(&learned, "s").capacity.unwrap_or(0.0);
        assert!(
            (20.0..=27.0).contains(&floor) && at(&learned, "s").ceiling.is_none(),
            "seed {seed}: the first run should remember 27 healthy and no knee: {:?}",
            at(&learned, "s")
        );
        let warm = sim::run(
            &now,
            &config,
            seed,
            &SimOptions { memory: learned, trace: true, ..SimOptions::default() },
        );
        assert!(warm.errors.is_empty() && !warm.hang, "seed {seed}: warm run: {:?}", warm.errors);
        // The first verdict, at the level started with, and what the same
        // test proved later while the site drained.
        let slowdowns: Vec<(f64, f64)> = warm
            .decisions
            .iter()
            .filter_map(|d| match d.kind {
                DecisionKind::Verdict { healthy: false, level, slowdown: Some(s) } if level > 40.0 => {
                    Some((d.at, s))
                }
                _ => None,
            })
            .collect();
        let proven = slowdowns.iter().map(|&(_, s)| s).fold(0.0, f64::max);
        assert!(proven >= 2.5, "seed {seed}: at twice the knee the slowdowns proven were {slowdowns:?}");
        let cut_to_knee = warm.decisions.iter().find_map(|d| match d.kind {
            DecisionKind::Window { window, .. } if window <= 27.0 => Some(d.at),
            _ => None,
        });
        assert!(
            cut_to_knee.is_some_and(|t| t <= 3.0 * 300.0),
            "seed {seed}: the window came down to the knee at {cut_to_knee:?} s (jobs of 300 s)"
        );
    }
}

/// Two healthy sites of 150 slots beside `third`: jobs of 200 s ± `jitter`.
fn beside_two_healthy(n_jobs: u64, jitter: f64, third: SiteParams) -> Scenario {
    Scenario {
        desc: "a site beside two healthy ones".into(),
        types: vec![JobType::single(n_jobs, 200.0, jitter)],
        sites: vec![site("ref1", 150), SiteParams { speed: 1.2, ..site("ref2", 150) }, third],
    }
}

/// The first time site `name`'s window went under `below`, if ever.
fn window_under(r: &SimResult, name: &str, below: f64) -> Option<f64> {
    let id = r.metrics.sites.iter().position(|s| s.name == name).expect("site") as u32;
    r.decisions.iter().find_map(|d| match d.kind {
        DecisionKind::Window { window, .. } if d.site == SiteId(id) && window < below => Some(d.at),
        _ => None,
    })
}

#[test]
fn a_first_window_slower_than_hardware_explains_is_checked_against_the_level_below() {
    // A knee of 8 (beta 0.5) under the first window of 16: every run of
    // the baseline is three times slow, so no later test of this site can
    // tell. Hardware makes a site at most twice slower than the median one,
    // so the other sites' runs say it: the floor is checked against 8.
    // Before, only a probe above that proved thrash did (seeds 1-10: up to
    // 1.9 times the oracle's makespan).
    let knee = SiteParams { capacity: Capacity::Finite(8.0), beta: 0.5, ..site("knee", 100) };
    let scenario = beside_two_healthy(1500, 0.2, knee);
    let config = PolicyConfig::named("adaptive").unwrap();
    for seed in 1..=10 {
        let r = sim::run(&scenario, &config, seed, &SimOptions { trace: true, ..SimOptions::default() });
        assert!(r.errors.is_empty() && !r.hang, "seed {seed}: {:?}", r.errors);
        assert!(window_under(&r, "knee", 16.0).is_some(), "seed {seed}: the first window was never checked");
        assert_within_oracle(&r, &scenario, seed, 1.45, &format!("seed {seed}"));
    }
}

#[test]
fn a_site_of_half_the_median_speed_is_not_taken_for_one_past_its_knee() {
    // Hardware alone, half the median site's speed, runs ±50%: its first
    // window's runs are twice as long, and it has no knee at all. With the
    // error of the compared quantile taken from the runs seen (the short
    // half of the first cohort, which ends first), it was cut at seed 2.
    let slow = SiteParams { speed: 0.5, ..site("slow", 100) };
    let scenario = beside_two_healthy(1500, 0.5, slow);
    let config = PolicyConfig::named("adaptive").unwrap();
    for seed in 1..=20 {
        let r = sim::run(&scenario, &config, seed, &SimOptions { trace: true, ..SimOptions::default() });
        assert!(r.errors.is_empty() && !r.hang, "seed {seed}: {:?}", r.errors);
        assert_eq!(window_under(&r, "slow", 16.0), None, "seed {seed}: a healthy slow site was cut under 16");
    }
}

#[test]
fn the_one_site_searched_up_to_its_slots_gets_every_job_left_to_wait_there() {
    // One healthy site of 400 slots, no knee, runs of 1000 s, queue waits
    // of 1000 s, ten waves of jobs. Once the search ends at the slots, the
    // site itself starts no more than the window however many wait: every
    // job left goes there at once, and their waits pass while the slots
    // are busy. Little's law alone keeps about 400 waiting, and the last
    // of those start only W·H(400) ≈ 6.6 waits after the pool empties.
    let scenario = one_site(
        "healthy, waits as long as runs",
        4000,
        1000.0,
        0.2,
        SiteParams { wait_mean: 1000.0, ..SiteParams::healthy("s", 400) },
    );
    for seed in 1..=5 {
        let r = run_with(&scenario, "adaptive", seed, &SimOptions { trace: true, ..SimOptions::default() });
        let at_slots = r
            .decisions
            .iter()
            .find_map(|d| match d.kind {
                DecisionKind::Window { window, .. } if window >= 400.0 => Some(d.at),
                _ => None,
            })
            .unwrap_or_else(|| panic!("seed {seed}: the window never reached the slots"));
        let sent = every_job_sent(&r);
        assert!(
            sent <= at_slots + 1000.0,
            "seed {seed}: the last job was sent at {sent:.0} s, the window reached the slots at {at_slots:.0} s"
        );
    }
}

#[test]
fn waits_as_long_as_runs_delay_the_climb_to_the_slots_by_less_than_two_waits() {
    // One healthy site of 1,000 slots, runs of 1,000 s. With waits of 10 s
    // and of 1,000 s, when is 90% of the slots first judged healthy? The
    // first cohort starts one wait later; the climb after it must not lose
    // another wait: a probe is judged at the level that ran, so its jobs
    // are queued to start by the verdict, not only by Little's law (which
    // judged probes at 0.6–0.75 of their windows: 1,943–2,364 s later).
    let reached = |wait: f64, seed: u64| {
        let scenario = one_site(
            "healthy, 1,000 slots",
            8000,
            1000.0,
            0.2,
            SiteParams { wait_mean: wait, ..SiteParams::healthy("s", 1000) },
        );
        let r = run_with(&scenario, "adaptive", seed, &SimOptions { trace: true, ..SimOptions::default() });
        r.decisions
            .iter()
            .find_map(|d| match d.kind {
                DecisionKind::Verdict { healthy: true, level, .. } if level >= 900.0 => Some(d.at),
                _ => None,
            })
            .unwrap_or_else(|| panic!("seed {seed}, waits {wait} s: 900 running never judged healthy"))
    };
    for seed in 1..=5 {
        let (short, long) = (reached(10.0, seed), reached(1000.0, seed));
        assert!(
            long - short < 2000.0,
            "seed {seed}: 90% of the slots judged healthy at {long:.0} s with waits of 1,000 s, at {short:.0} s with waits of 10 s"
        );
    }
}

#[test]
fn a_warm_start_splits_a_single_wave_by_the_failure_rates_remembered() {
    // Two sites alike but for failures: 30% of the attempts at one of them
    // fail. The cold run learns it; the next run's single wave (one site's
    // slots' worth) is then split as the oracle, which knows the rates,
    // splits it — not as between two sites alike, where a warm start began
    // when it remembered no failures.
    let flaky = SiteParams { p_fail: 0.3, ..site("flaky", 60) };
    let grid = |n_jobs| Scenario {
        desc: "two sites of 60 slots, one failing 30% of its attempts".into(),
        types: vec![JobType::single(n_jobs, 300.0, 0.3)],
        sites: vec![site("steady", 60), flaky.clone()],
    };
    let config = PolicyConfig::named("adaptive").expect("known policy");
    for seed in 1..=5 {
        let learned = run(&grid(600), "adaptive", seed).learned;
        let (succeeded, failed) = at(&learned, "flaky").attempts.expect("attempts are remembered");
        let rate = failed as f64 / (succeeded + failed) as f64;
        assert!(
            succeeded + failed <= 64 && (0.15..=0.45).contains(&rate),
            "seed {seed}: remembered {succeeded} succeeded, {failed} failed (a sample's worth, 30% failing)"
        );
        let warm =
            sim::run(&grid(60), &config, seed, &SimOptions { memory: learned, ..SimOptions::default() });
        assert!(warm.errors.is_empty() && !warm.hang, "seed {seed}: warm run: {:?}", warm.errors);
        let at_flaky = first_sent_to(&warm, 1);
        let oracle_at_flaky = first_sent_to(&run(&grid(60), "oracle", seed), 1);
        assert!(
            at_flaky.abs_diff(oracle_at_flaky) <= 6,
            "seed {seed}: {at_flaky} of 60 jobs first sent to the site that fails 30%, by the oracle \
             {oracle_at_flaky}"
        );
    }
}

/// How many of the run's jobs were first sent to `site`.
fn first_sent_to(r: &SimResult, site: u32) -> usize {
    let mut first = std::collections::BTreeMap::new();
    for a in &r.attempts {
        let at = first.entry(a.job).or_insert((a.submitted, a.site));
        if a.submitted < at.0 {
            *at = (a.submitted, a.site);
        }
    }
    first.values().filter(|&&(_, s)| s == site).count()
}

/// The most running jobs at `site` past the window in force, over every
/// start there (a start is where the queue can take a site past its
/// window; after a cut, jobs already running drain past it), with the
/// start's time.
fn worst_start_past_window(r: &SimResult, site: u32) -> (f64, f64) {
    let mut changes: Vec<(f64, i32)> = Vec::new();
    for a in r.attempts.iter().filter(|a| a.site == site) {
        if let Some(started) = a.started {
            changes.push((started, 1));
            changes.extend(a.ended.map(|ended| (ended, -1)));
        }
    }
    // Ends before starts at the same instant: a freed slot is reused at once.
    changes.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let windows: Vec<(f64, f64)> = r
        .decisions
        .iter()
        .filter_map(|d| match d.kind {
            DecisionKind::Window { window, .. } if d.site == SiteId(site) => Some((d.at, window)),
            _ => None,
        })
        .collect();
    let (mut running, mut worst) = (0i32, (f64::NEG_INFINITY, 0.0));
    for (at, change) in changes {
        running += change;
        if change > 0 {
            let window = windows.iter().take_while(|w| w.0 <= at).last().map_or(0.0, |w| w.1);
            let past = f64::from(running) - window;
            if past > worst.0 {
                worst = (past, at);
            }
        }
    }
    worst
}

#[test]
fn issue_56_jobs_queued_ahead_never_run_past_the_window() {
    // The Condor-C site of issue 56 ran 74 jobs at once under a window of
    // 48: the jobs queued ahead to cover its wait started at once on free
    // CPUs. On the real pool a job waits only for the next negotiation cycle
    // (and, at a Condor-C site, for the gridmanager's poll to hear of it),
    // and every job waiting then starts together. Here both sites have 96
    // slots, a knee at 24 (beta 1), and a negotiation cycle of 5 s; `cc`'s
    // starts and ends are heard only at polls 5 s apart, so its waits look
    // longer than they are. The first grid declares 48 of the 96 slots.
    let grid = |declared: Option<u32>| Scenario {
        desc: "issue 56: queued jobs that start at once".into(),
        types: vec![JobType::single(240, 24.5, 0.18)],
        sites: vec![
            SiteParams {
                capacity: Capacity::Finite(24.0),
                beta: 1.0,
                declared_slots: declared,
                negotiation_period: 5.0,
                ..SiteParams::healthy("local", 96)
            },
            SiteParams {
                capacity: Capacity::Finite(24.0),
                beta: 1.0,
                declared_slots: declared,
                negotiation_period: 5.0,
                poll_period: 5.0,
                ..SiteParams::healthy("cc", 96)
            },
        ],
    };
    let traced = SimOptions { trace: true, ..SimOptions::default() };
    for (case, scenario) in [("96 slots declared 48", grid(Some(48))), ("96 slots declared", grid(None))] {
        for seed in 1..=3 {
            let r = run_with(&scenario, "adaptive", seed, &traced);
            for site in 0..2 {
                let (past, at) = worst_start_past_window(&r, site);
                assert!(
                    past <= 1.0,
                    "{case}, seed {seed}: {past} jobs past the window at {} at t = {at:.1} s",
                    r.metrics.sites[site as usize].name
                );
            }
        }
    }
}

/// Two sites whose slots (16) are the first window, each past its knee
/// (2 to 6, drawn by seed) from the first cohort on, thrashing past it
/// (beta 0.5 to 2): no probe above can check the first window's runs, and
/// no site runs faster than the other to tell. 300 jobs of 60 s ± 30%.
fn every_site_past_its_knee_at_its_slots(seed: u64) -> (Scenario, [f64; 2]) {
    let mut rng = Rng(seed);
    let knees = [f64::from(rng.u32(2, 6)), f64::from(rng.u32(2, 6))];
    let beta = rng.pick(&[0.5, 1.0, 2.0]);
    let knee = |name: &str, c: f64| SiteParams { capacity: Capacity::Finite(c), beta, ..site(name, 16) };
    let scenario = Scenario {
        desc: format!("every site past its knee at its slots: knees {knees:?}, beta {beta}"),
        types: vec![JobType::single(300, 60.0, 0.3)],
        sites: vec![knee("a", knees[0]), knee("b", knees[1])],
    };
    (scenario, knees)
}

#[test]
fn issue_56_a_knee_below_the_first_window_at_every_site_is_found_from_the_level_below() {
    // Past the knee, fewer jobs run faster; below it, they do not. The
    // search converges on the first window (all the sites hold), so it is
    // checked from the level below, and the capacity found is within a
    // probe step of the knee. Taken on trust, both sites were held at 16
    // and no capacity was found.
    for seed in 1..=6 {
        let (scenario, knees) = every_site_past_its_knee_at_its_slots(seed);
        let case = format!("seed {seed} ({})", scenario.desc);
        let r = run(&scenario, "adaptive", seed);
        for (name, knee) in ["a", "b"].into_iter().zip(knees) {
            let found = at(&r.learned, name).capacity.unwrap_or(f64::INFINITY);
            assert!(found <= 2.0 * knee + 1.0, "{case}: {name}: capacity found {found:.1}, true knee {knee}");
        }
        // The first cohort runs at 16 as bulk's first wave does; after it,
        // at least half of what knowing the knee gains over bulk.
        let bulk = makespan(&run(&scenario, "bulk", seed));
        let oracle = makespan(&run(&scenario, "oracle", seed));
        assert!(
            makespan(&r) <= 0.5 * (bulk + oracle),
            "{case}: adaptive {:.0} s, bulk {bulk:.0} s, oracle {oracle:.0} s",
            makespan(&r)
        );
    }
}

#[test]
fn issue_56_a_healthy_site_at_its_slots_pays_the_check_below_once_within_two_runs() {
    // The same sites with no knee: each first window is checked from the
    // level below once (the drain, under the longest run, and a test of at
    // most as many runs at 8 as the baseline holds), at half the site's
    // throughput: lost, at most two of the longest runs (78 s) over the
    // oracle's makespan.
    let healthy = |name: &str| SiteParams { capacity: Capacity::Infinite, ..site(name, 16) };
    let scenario = Scenario {
        desc: "healthy sites at their slots".into(),
        types: vec![JobType::single(300, 60.0, 0.3)],
        sites: vec![healthy("a"), healthy("b")],
    };
    for seed in 1..=5 {
        let r = run(&scenario, "adaptive", seed);
        let oracle = makespan(&run(&scenario, "oracle", seed));
        let lost = makespan(&r) - oracle;
        assert!(lost <= 2.0 * 78.0, "seed {seed}: adaptive {:.0} s, oracle {oracle:.0} s", makespan(&r));
        for name in ["a", "b"] {
            assert_eq!(at(&r.learned, name).capacity, Some(16.0), "seed {seed}: {name}");
        }
    }
}

#[test]
fn issue_56_a_site_checking_its_floor_below_still_tells_the_others_its_speed() {
    // The e2e knee case (`knee_setup`): a healthy site at its 4 slots, whose
    // first window is checked from the level below from its first verdict
    // on, and a 32-slot site past its knee of 4 at its first window of 16
    // (runs 16 times slower). The healthy site's speed, its baseline set
    // aside while it is rechecked, shows the first window slowed at its
    // verdict: the site goes below 16 and never probes above it. Told
    // nothing while the healthy site learned its runs below afresh, the
    // knee site probed 32 (runs 64 times slower) and its check below did
    // not drain before the run ended: memory kept 16.
    let good = SiteParams { capacity: Capacity::Infinite, wait_mean: 5.0, ..SiteParams::healthy("good", 4) };
    let knee = SiteParams {
        capacity: Capacity::Finite(4.0),
        beta: 1.0,
        wait_mean: 5.0,
        ..SiteParams::healthy("knee", 32)
    };
    let scenario = Scenario {
        desc: "a healthy site at its slots beside one past its knee".into(),
        types: vec![JobType::single(120, 60.0, 0.2)],
        sites: vec![good, knee],
    };
    for seed in 1..=5 {
        let r = run(&scenario, "adaptive", seed);
        let peak = r.metrics.sites[1].peak_concurrency;
        assert!(peak <= 16, "seed {seed}: {peak} ran at once at the knee site, past its first window");
        let found = at(&r.learned, "knee").capacity.unwrap_or(f64::INFINITY);
        assert!(found <= 2.0 * 4.0, "seed {seed}: capacity found {found:.1} at the knee site, true knee 4");
    }
}

#[test]
fn issue_55_a_silent_straggler_sent_back_where_it_ran_is_moved_once() {
    // Held-out typed T1086 never ended: one kind's speeds there spread past
    // hardware's, so a site with no healthy run of its own held a job past
    // `SILENT_PAST` times the median site's longest healthy run; the tail
    // moved it, the site started again lower, and the job, back in the
    // pool, went to the site quickest by its queue wait and the others' run
    // times: the same one, to be moved again a bar later, for good. Here one
    // kind, at a site twenty times slower than the other (a job of 300 s ±
    // 50% takes 3,000-9,000 s there, past the bar of four times the fast
    // site's longest run, about 1,800 s) but whose queue wait is 5 s
    // against 300 s. Each job is moved so at most once (it then ends where
    // it is, however slowly); before, some were moved over 200 times and
    // the run never ended.
    let scenario = Scenario {
        desc: "a site far slower than hardware explains, with the shortest waits".into(),
        types: vec![JobType::single(200, 300.0, 0.5)],
        sites: vec![
            SiteParams { wait_mean: 300.0, ..SiteParams::healthy("fast", 50) },
            SiteParams { wait_mean: 5.0, speed: 0.05, ..SiteParams::healthy("slow", 50) },
        ],
    };
    // The run ends in under four hours (the longest job run once more at
    // the slow site after its move); a livelock runs to the horizon.
    let options = SimOptions { horizon: 2.0 * 86400.0, ..SimOptions::default() };
    for seed in 1..=5 {
        let r = run_with(&scenario, "adaptive", seed, &options);
        let mut moved: std::collections::BTreeMap<u64, Vec<f64>> = std::collections::BTreeMap::new();
        for a in
            r.attempts.iter().filter(|a| a.site == 1 && a.started.is_some() && a.end == AttemptEnd::Removed)
        {
            moved.entry(a.job).or_default().push(a.ended.unwrap_or(f64::NAN));
        }
        assert!(
            !moved.is_empty(),
            "seed {seed}: no job was moved from the slow site: the rule was not exercised"
        );
        // The livelock's first half: a job moved went back to the slow site.
        let sent_back = moved
            .iter()
            .any(|(job, at)| r.attempts.iter().any(|a| a.job == *job && a.site == 1 && a.submitted >= at[0]));
        assert!(
            sent_back,
            "seed {seed}: no moved job went back to the slow site: the case was not exercised"
        );
        for (job, at) in &moved {
            assert_eq!(at.len(), 1, "seed {seed}: job {job} moved from the slow site at {at:.0?} s");
        }
    }
}
